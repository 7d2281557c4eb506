"""The placement MDPs: Spotlight's multi-stage construction and the refinement chains."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.placers.heft import HeftPlacer
from gnplace.policy.features import build_policy_input
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
