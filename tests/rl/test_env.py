"""The placement MDPs: Spotlight's multi-stage construction and the refinement chains."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.placers.heft import HeftPlacer
from gnplace.policy.features import build_policy_input, ops_alone
from gnplace.rl.env import DYNAMIC_FEATURES, REFINE_FEATURES, PlacementMDP, RefinementMDP
from gnplace.sim.simulator import Simulator
from gnplace.toy import layered_graph, mlp_training_graph, toy_cluster

GiB = 2**30


def eft(s, g, dynamic, mask):
    return np.where(mask, dynamic[:, :, 0], np.inf).argmin(axis=1)


def random_choice(rng):
    def choose(s, g, dynamic, mask):
        return np.array([rng.choice(np.flatnonzero(row)) for row in mask])
    return choose


def test_every_group_is_decided_once_in_priority_order():
    g, c = mlp_training_graph(layers=4, width=64, batch=8, branches=2), load_cluster("k80x4")
    mdp = PlacementMDP(build_policy_input(g, c))
    r = mdp.rollout(5, random_choice(np.random.default_rng(0)))
    assert sorted(r.groups.tolist()) == list(range(mdp.num_groups))
    assert r.group_devices.shape == (5, mdp.num_groups) and r.dynamic.shape[-1] == len(DYNAMIC_FEATURES)
    assert np.array_equal(r.group_devices[:, r.groups], r.actions)


def test_masking_never_places_a_group_where_it_does_not_fit():
    # groups holding 0.25 GiB at the peak (the last 0.5 GiB), 1.77 GiB in all, on four 0.6 GiB GPUs: two fit on one
    # (on four 2 GiB GPUs, as this test had it, all of them fit on any one: nothing was ever masked)
    g = mlp_training_graph(layers=6, width=8192, batch=64)
    c = toy_cluster(4, memory=0.6 * GiB)
    inp = build_policy_input(g, c)
    assert inp.group_bytes.sum() > c.memory[0] and inp.group_bytes.max() < c.memory[0]
    mdp = PlacementMDP(inp)
    r = mdp.rollout(16, random_choice(np.random.default_rng(1)))
    assert (~r.mask).sum() >= 16  # devices were masked
    used = np.zeros((16, 4))
    for s, grp in enumerate(r.groups):
        fits_somewhere = (used + inp.group_bytes[grp] <= c.memory[None, :]).any(axis=1)
        chosen = r.actions[:, s]
        assert np.all(r.mask[np.arange(16), s, chosen])
        fits_there = used[np.arange(16), chosen] + inp.group_bytes[grp] <= c.memory[chosen]
        assert np.all(fits_there | ~fits_somewhere)  # only where nothing fits may a group overflow
        used[np.arange(16), chosen] += inp.group_bytes[grp]


def test_eft_decoding_is_a_list_schedule_close_to_heft():
    g, c = layered_graph(200, seed=5).replace(group=np.arange(200) // 2), load_cluster("k80x4")
    inp = build_policy_input(g, c)
    r = PlacementMDP(inp).rollout(1, eft)
    sim = Simulator()
    ours = sim.time(g, c, inp.expand(r.group_devices[0])).step_time
    heft = sim.time(g, c, HeftPlacer().place(g, c)).step_time
    assert ours <= 1.25 * heft


def test_features_are_bounded_and_the_eft_choice_has_zero_gap():
    g, c = layered_graph(150, seed=2), load_cluster("v100x8")
    r = PlacementMDP(build_policy_input(g, c)).rollout(3, eft)
    assert np.isfinite(r.dynamic).all() and np.abs(r.dynamic).max() <= 20.0
    is_eft = r.dynamic[..., DYNAMIC_FEATURES.index("is_eft")].astype(bool)
    assert np.all(r.dynamic[..., 0][is_eft] == 0.0) and np.all(is_eft.any(axis=-1))


def test_refinement_chains_move_one_group_at_a_time_and_restart():
    g, c = mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2")
    inp = build_policy_input(g, c)
    start = np.zeros(inp.num_groups, dtype=np.int64)
    mdp = RefinementMDP(inp, start, 1.0, chains=3)
    features, mask = mdp.observe()
    assert features.shape == (3, 2, len(REFINE_FEATURES)) and mask.all()
    assert features[:, 0, REFINE_FEATURES.index("is_current")].all() and (features[:, :, 0] == [0, 1]).all()
    group = mdp.group
    after = mdp.move(np.array([1, 0, 1]))
    assert after[:, group].tolist() == [1, 0, 1] and (np.delete(after, group, axis=1) == 0).all()
    step_time, busy = np.array([0.5, 1.0, 2.0]), np.ones((3, 2))
    gain = mdp.record(step_time, busy)
    assert gain.tolist() == [0.5, 0.0, -1.0]
    mdp.restart(start, 1.0)
    assert (mdp.current == 0).all() and (mdp.step_time == 1.0).all()
    assert step_time.tolist() == [0.5, 1.0, 2.0] and (busy == 1).all()  # the caller's timings are its own


def test_refinement_chains_restored_from_their_state_move_on_as_they_would_have():
    g, c = mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2")
    inp = build_policy_input(g, c)
    mdp = RefinementMDP(inp, np.zeros(inp.num_groups, dtype=np.int64), 1.0, chains=3)
    mdp.move(np.array([1, 0, 1]))
    mdp.record(np.array([0.5, 1.0, 2.0]), np.arange(6.0).reshape(3, 2))
    again = RefinementMDP.restored(inp, json.loads(json.dumps(mdp.state())))  # what a checkpoint holds
    assert again.group == mdp.group and again.steps == 1
    for mine, theirs in zip(mdp.observe(), again.observe(), strict=True):
        assert np.array_equal(mine, theirs)
    state, groups = mdp.state(), inp.num_groups
    for bad in ({**state, "current": [[0, 1]]}, {**state, "current": [[0] * groups, [5] * groups]},
                {**state, "busy": [1.0]}, {k: v for k, v in state.items() if k != "steps"}):
        with pytest.raises((ValueError, KeyError)):
            RefinementMDP.restored(inp, bad)



def test_the_load_feature_is_the_work_placed_over_the_mean_in_work_per_device():
    """All of a 4-group chain on device 0 of two: at decision s, (load - mean load) / (total work / 2 devices) is
    +-(work of the s groups placed) / (total work)."""
    from gnplace.toy import chain_graph

    inp = build_policy_input(chain_graph(4), toy_cluster(2))
    r = PlacementMDP(inp).rollout(1, lambda s, g, dynamic, mask: np.zeros(1, dtype=np.int64))
    assert r.groups.tolist() == [0, 1, 2, 3]
    work = inp.group_time.min(axis=1)
    placed = np.concatenate([[0.0], np.cumsum(work)[:-1]]) / work.sum()
    load = r.dynamic[0, :, :, DYNAMIC_FEATURES.index("load")]
    assert np.allclose(load, np.stack([placed, -placed], axis=1), atol=1e-6, rtol=0)
    assert placed[-1] > 0.7


def test_a_refinement_move_may_keep_its_group_where_it_is_even_over_memory_and_sees_each_devices_busy_share():
    """The current device is always allowed (a chain over memory could not stay put: a mutant leaving it out of the
    mask passed), and the busy feature is each device's busy seconds over the chain's step (a mutant leaving it
    unscaled passed)."""
    g = mlp_training_graph(layers=3, width=64, batch=8)
    inp = build_policy_input(g, toy_cluster(2, memory=1024))  # no group fits anywhere
    start = np.array([k % 2 for k in range(inp.num_groups)], dtype=np.int64)
    mdp = RefinementMDP(inp, start, 1.0, chains=2)
    features, mask = mdp.observe()
    here = start[mdp.group]
    assert mask.tolist() == [[d == here for d in range(2)]] * 2
    assert not features[..., REFINE_FEATURES.index("fits")].any()
    mdp.move(np.array([here, here]))
    mdp.record(np.array([0.5, 2.0]), np.array([[0.25, 0.5], [1.0, 0.5]]))
    busy = mdp.observe()[0][..., REFINE_FEATURES.index("utilisation")]
    assert busy.tolist() == [[0.5, 1.0], [0.5, 0.25]]


def _two_kinds(memory=(1000, 1000)):
    """Two devices of kinds x and y (measured op times per kind), 1 GB/s links of 10 us."""
    from gnplace.cluster import Cluster, Device

    devices = [Device("d0", "x", 1e12, 1e11, memory[0]), Device("d1", "y", 1e12, 1e11, memory[1])]
    return Cluster(devices, np.full((2, 2), 1e9), np.full((2, 2), 1e-5), name="xy")


def _alone(graph, cluster, held):
    from gnplace.policy.features import ops_alone

    return build_policy_input(graph, cluster, coarsening=ops_alone(graph), held=np.asarray(held, dtype=np.float64))


def test_the_dynamic_features_of_two_lone_ops_equal_hand_computed_values():
    """y takes 4 s on d0 and 6 s on d1, x 1 s and 3 s; they hold 200 and 100 of 1,000 bytes. y goes first (upward rank
    5 over 2), to d1 as the chooser says, then x. Times are in units of the group's least seconds, at least the mean
    of those over groups (2.5 s): 4 s for y, 2.5 s for x. At x's decision d1 is busy until 6 s: x would start there
    at 6 s and end at 9 s against 1 s on d0 (gaps 2.4 and 3.2); its log slowdown there is log 3 (over its fastest
    device, not the mean); load is d1's 6 s of y (its seconds there, not its least) less the mean 3 s, over 2.5 s of
    work per device. The schedule ends at 6 s, when y does, though x (the last node) ends at 1 s.
    Mutants dropping the unit's floor, taking the slowdown over the mean, loading a group's least seconds, or
    taking the last node's finish for the schedule's, passed."""
    from gnplace.graph import OpGraph

    g = OpGraph(["y", "x"], [], cost_s={"x": [4.0, 1.0], "y": [6.0, 3.0]})
    inp = _alone(g, _two_kinds(), [200, 100])
    r = PlacementMDP(inp).rollout(1, lambda s, group, dynamic, mask: np.array([1 - s]))
    assert r.groups.tolist() == [0, 1] and r.actions.tolist() == [[1, 0]]

    def feature(name, s):
        return r.dynamic[0, s, :, DYNAMIC_FEATURES.index(name)].tolist()

    want = {  # decision 0 (y), decision 1 (x): a value per device
        "eft_gap": ([0.0, 0.5], [0.0, 3.2]), "est_gap": ([0.0, 0.0], [0.0, 2.4]),
        "arrival_gap": ([0.0, 0.0], [0.0, 0.0]), "log_slowdown": ([0.0, np.log(1.5)], [0.0, np.log(3.0)]),
        "memory_left": ([0.8, 0.8], [0.9, 0.7]), "parents_here": ([0.0, 0.0], [0.0, 0.0]),
        "load": ([0.0, 0.0], [-1.2, 1.2]), "is_eft": ([1.0, 0.0], [1.0, 0.0]), "fits": ([1.0, 1.0], [1.0, 1.0]),
    }
    assert set(want) == set(DYNAMIC_FEATURES)
    for name, per_decision in want.items():
        for s, values in enumerate(per_decision):
            assert feature(name, s) == pytest.approx(values, abs=1e-6), (name, s)
    assert r.finish.tolist() == [6.0]


def test_parents_here_is_the_share_of_input_bytes_and_zero_for_inputs_of_no_bytes():
    """a -> b: b's input is all from a's device (share 1 there), and 0 everywhere when a sends 0 bytes (a mutant
    dividing by those 0 bytes gave NaN)."""
    from gnplace.graph import OpGraph

    for sent, want in ((10, [1.0, 0.0]), (0, [0.0, 0.0])):
        g = OpGraph(["a", "b"], [(0, 1)], out_bytes=[sent, 0], cost_s={"x": [1.0, 1.0], "y": [1.0, 1.0]})
        r = PlacementMDP(_alone(g, _two_kinds(), [1, 1])).rollout(1, lambda s, group, dynamic, mask: np.zeros(1, int))
        assert r.dynamic[0, 1, :, DYNAMIC_FEATURES.index("parents_here")].tolist() == want


def test_refinement_visits_groups_by_their_first_node_in_priority_order_and_wraps_around():
    """Ops b, a, d: a -> b and d alone, b group 0, a and d group 1. The priority order is a, b, d (ranks 2 s and more,
    1 s, 1 ms), so group 1 (first at a) comes before group 0 (b); after both, group 1 again (mutants taking the
    groups' largest position, which left them in index order, or stopping at the last group, passed)."""
    from gnplace.graph import OpGraph

    g = OpGraph(["b", "a", "d"], [(1, 0)], group=[0, 1, 1], cost_s={"x": [1.0, 1.0, 1e-3], "y": [1.0, 1.0, 1e-3]})
    inp = _alone(g, _two_kinds(), [1, 1, 1])
    assert inp.order.tolist() == [1, 0, 2] and inp.decision.group.tolist() == [0, 1, 1]
    mdp = RefinementMDP(inp, np.zeros(2, dtype=np.int64), 1.0, chains=1)
    visited = []
    for _ in range(5):
        visited.append(mdp.group)
        mdp.move(np.zeros(1, dtype=np.int64))
    assert visited == [1, 0, 1, 0, 1]


def test_refinement_neighbours_here_is_the_share_of_bytes_exchanged_either_way():
    """a -> b, 500 bytes, each its own group, a on d0 and b on d1: a's neighbours are all on d1, b's (its producer,
    an in-edge) all on d0 (mutants counting only out-edges, or bytes not shares, passed)."""
    from gnplace.graph import OpGraph

    g = OpGraph(["a", "b"], [(0, 1)], out_bytes=[500, 0], cost_s={"x": [1.0, 1.0], "y": [1.0, 1.0]})
    mdp = RefinementMDP(_alone(g, _two_kinds(), [1, 1]), np.array([0, 1]), 1.0, chains=1)
    column = REFINE_FEATURES.index("neighbours_here")
    assert mdp.group == 0 and mdp.observe()[0][0, :, column].tolist() == [0.0, 1.0]
    mdp.move(np.array([0]))
    assert mdp.group == 1 and mdp.observe()[0][0, :, column].tolist() == [1.0, 0.0]


def test_refinement_memory_counts_the_group_out_of_its_own_device_and_fits_exactly():
    """Groups of 500, 400 and 300 bytes on devices of 900 and 2,000, at [0, 0, 1]: group 0 leaves 900 - 900 + 500 on
    d0, exactly its 500 (it fits, memory left 0), and 1,700 on d1 ((1,700 - 500) / 2,000 = 0.6). Moved to d1, group
    1 (400, on d0) leaves 900 there (memory left 500 / 900) and 1,200 on d1 (800 / 2,000 = 0.4). Mutants leaving the
    group's own bytes in, asking for more room than it needs, or dividing by the largest capacity, passed."""
    from gnplace.graph import OpGraph

    g = OpGraph(["a", "b", "c"], [], cost_s={"x": [3.0, 2.0, 1.0], "y": [3.0, 2.0, 1.0]})
    mdp = RefinementMDP(_alone(g, _two_kinds((900, 2000)), [500, 400, 300]), np.array([0, 0, 1]), 1.0, chains=1)
    left, fits = REFINE_FEATURES.index("memory_left"), REFINE_FEATURES.index("fits")
    features, mask = mdp.observe()
    assert mdp.group == 0 and mask.tolist() == [[True, True]]
    assert features[0, :, fits].tolist() == [1.0, 1.0]
    assert features[0, :, left].tolist() == pytest.approx([0.0, 0.6])
    mdp.move(np.array([1]))
    features, _ = mdp.observe()
    assert mdp.group == 1 and features[0, :, fits].tolist() == [1.0, 1.0]
    assert features[0, :, left].tolist() == pytest.approx([500 / 900, 0.4])


def test_refinement_load_is_each_chains_own_and_busy_times_are_cleared_on_restart():
    """a takes 3 s on d0 and 6 s on d1, b 2 s and c 1 s on either; work per device (3 + 2 + 1) / 2 = 3 s. Chain 0 at
    [0, 0, 0] loads d0 with 6 s (mean 3 s: +1, -1); chain 1 at [1, 0, 0] loads 3 s and 6 s (mean 4.5 s: -0.5, +0.5).
    After a restart no device has been busy yet. Mutants centring on the batch's mean load, or keeping the busy
    seconds of before the restart, passed."""
    from gnplace.graph import OpGraph

    g = OpGraph(["a", "b", "c"], [], cost_s={"x": [3.0, 2.0, 1.0], "y": [6.0, 2.0, 1.0]})
    inp = _alone(g, _two_kinds(), [1, 1, 1])
    mdp = RefinementMDP(inp, np.zeros(3, dtype=np.int64), 1.0, chains=2)
    mdp.move(np.array([0, 1]))
    mdp.record(np.array([6.0, 6.0]), np.array([[6.0, 0.0], [3.0, 6.0]]))
    features, _ = mdp.observe()
    assert features[:, :, REFINE_FEATURES.index("load")] == pytest.approx(np.array([[1.0, -1.0], [-0.5, 0.5]]))
    assert features[:, :, REFINE_FEATURES.index("utilisation")] == pytest.approx(np.array([[1.0, 0.0], [0.5, 1.0]]))
    mdp.restart(np.zeros(3, dtype=np.int64), 6.0)
    assert mdp.observe()[0][:, :, REFINE_FEATURES.index("utilisation")].tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_restored_chains_refuse_a_device_past_the_last_or_below_zero():
    """On two devices, a chain naming device 2 (one past the last) or -1 is refused (mutants letting one past the end,
    or a negative one, through passed; the old test named device 5)."""
    g, c = mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2")
    inp = build_policy_input(g, c)
    state = RefinementMDP(inp, np.zeros(inp.num_groups, dtype=np.int64), 1.0, chains=1).state()
    for device in (2, -1):
        with pytest.raises(ValueError, match="outside the 2 there are"):
            RefinementMDP.restored(inp, {**state, "current": [[device] + [0] * (inp.num_groups - 1)]})
    assert RefinementMDP.restored(inp, {**state, "current": [[1] * inp.num_groups]}).current.tolist() == [
        [1] * inp.num_groups]


@pytest.mark.parametrize(("edit", "said"), [
    ({"current": "1.7"}, "by a number that is not whole"),
    ({"step_time": [float("nan")]}, "step time is not seconds >= 0"),
    ({"step_time": [-1.0]}, "step time is not seconds >= 0"),
    ({"busy": [[float("nan"), 0.0]]}, "busy time is not seconds >= 0"),
    ({"steps": -3}, r"steps must be a whole number >= 0, got -3$"),
    ({"steps": 2.5}, r"steps must be a whole number >= 0, got 2.5$"),
    ({"steps": True}, "steps must be a whole number"),
])
def test_restored_chains_refuse_an_edited_state(edit, said):
    """A chain's device of 1.7 was device 1, and NaN or negative step times and steps of -3 were taken, without a
    word: an edited checkpoint resumed chains no run made (resuming refuses the ValueError in one line)."""
    g, c = mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2")
    inp = build_policy_input(g, c)
    state = RefinementMDP(inp, np.zeros(inp.num_groups, dtype=np.int64), 1.0, chains=1).state()
    if edit.get("current") == "1.7":
        edit = {"current": [[1.7] * inp.num_groups]}
    with pytest.raises(ValueError, match=said):
        RefinementMDP.restored(inp, {**state, **edit})
    restored = RefinementMDP.restored(inp, {**state, "current": [[1.0] * inp.num_groups], "step_time": [float("inf")],
                                            "steps": np.int64(4)})  # whole floats, an OOM chain's inf, numpy's 4
    assert restored.current.tolist() == [[1] * inp.num_groups] and restored.steps == 4


def test_a_refinement_move_of_a_group_of_no_seconds_is_quiet_and_slows_nothing():
    """A group of zero-FLOP ops takes 0 s under Placeto's costs (no launch overhead): its log slowdown was log(0 /
    1e-300), a numpy divide-by-zero warning before the clip made it 0 (the construction MDP floors it quietly)."""
    import warnings

    from gnplace.graph import OpGraph
    from gnplace.sim.costmodel import PLACETO_COSTS

    g = OpGraph(["a", "b"], [(0, 1)], flops=[0.0, 1e9])
    inp = build_policy_input(g, toy_cluster(2), cost_model=PLACETO_COSTS, coarsening=ops_alone(g), held=np.ones(2))
    assert inp.group_time[0].tolist() == [0.0, 0.0]
    mdp = RefinementMDP(inp, np.zeros(2, dtype=np.int64), 1.0, chains=1)
    assert mdp.group == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        features, _ = mdp.observe()
    assert features[0, :, REFINE_FEATURES.index("log_slowdown")].tolist() == [0.0, 0.0]
