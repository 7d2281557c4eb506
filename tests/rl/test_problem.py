"""A (graph, cluster) prepared for learning: reference, rewards, best placement seen."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.placers import make_placer
from gnplace.rl.problem import PlacementProblem, majority_groups, reward
from gnplace.sim.simulator import Simulator
from gnplace.toy import mlp_training_graph, toy_cluster

GiB = 2**30


def test_reward_is_log_speedup_minus_the_overflow_penalty():
    r = reward(np.array([1.0, 1.0]), np.array([[0.5, 0.5], [1.5, 0.5]]), np.ones(2), 2.0, 4.0)
    assert r[0] == pytest.approx(np.log(2.0)) and r[1] == pytest.approx(np.log(2.0) - 4.0 * 0.5)


def test_the_reference_is_auto_and_counts_one_evaluation():
    g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x4")
    sim = Simulator()
    p = PlacementProblem.build(g, c, sim)
    auto = make_placer("auto").place(g, c, seed=0)
    assert np.array_equal(p.reference_devices, auto.devices)
    assert p.reference_step == sim.time(g, c, auto).step_time
    assert p.evaluations == 1 and p.history == [(1, p.reference_step)]
    assert np.array_equal(p.inp.expand(p.reference_groups), auto.devices)  # groups are whole


def test_score_keeps_the_best_fitting_placement(heavy_groups):
    g, c = heavy_groups([0.6, 0.6]), toy_cluster(2, memory=1 * GiB)
    p = PlacementProblem.build(g, c, Simulator(), reference="round_robin")
    start = p.best_step
    result, rewards = p.score(np.array([[0, 0], [1, 0]]), Simulator(), 4.0)
    assert result.oom.tolist() == [True, False]
    assert rewards[0] < rewards[1]
    assert p.best_step <= start and not p.best_oom and p.evaluations == 3
    assert len(p.history) == 2


def test_majority_groups_picks_the_device_with_most_work():
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    p = PlacementProblem.build(g, c, Simulator())
    devices = p.inp.expand(np.array([1, 0, 1]))
    assert majority_groups(p.inp, devices).tolist() == [1, 0, 1]


def test_the_policys_own_best_excludes_the_reference():
    g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x4")
    sim = Simulator()
    p = PlacementProblem.build(g, c, sim)
    assert p.sample_best_devices is None and p.sample_best_step == float("inf")
    worst = np.zeros((1, p.inp.num_groups), dtype=np.int64)
    spread = (np.arange(p.inp.num_groups) % c.num_devices)[None, :]
    slower, _ = p.score(spread, sim, 4.0)  # round robin: slower than the reference (auto's single device)
    assert p.sample_best_step == pytest.approx(slower.step_time[0])
    assert p.sample_best_step > p.reference_step == p.best_step
    assert np.array_equal(p.sample_best_groups(), spread[0])
    result, _ = p.score(np.concatenate([worst, spread]), sim, 4.0)
    assert p.sample_best_step == pytest.approx(result.step_time.min())
    assert np.array_equal(p.sample_best_groups(), [worst[0], spread[0]][int(np.argmin(result.step_time))])
    assert p.best_step == pytest.approx(min(p.reference_step, p.sample_best_step))


def test_an_offered_placement_replaces_the_best_only_if_it_fits_and_is_faster():
    g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x4")
    p = PlacementProblem.build(g, c, Simulator(), reference="round_robin")
    start, devices = p.best_step, np.zeros(g.num_ops, dtype=np.int64)
    p.offer(devices, start / 2, True, 5)  # faster but overflowing: kept out
    assert p.best_step == start and p.evaluations == 6 and p.history[-1] == (6, start)
    p.offer(devices, start * 2, False, 1)  # fits but slower: kept out
    p.offer(devices, start / 2, False, 1)
    assert p.best_step == start / 2 and p.best_devices.tolist() == devices.tolist() and p.history[-1] == (8, start / 2)
    assert p.sample_best_devices is None  # not the policy's own sample


def test_an_anchored_score_keeps_the_incumbents_ops_in_every_group_a_sample_leaves_in_place():
    g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x4")
    sim = Simulator()
    p = PlacementProblem.build(g, c, sim, reference="single")
    group = p.inp.decision.group[p.inp.coarsening.node_of_op]
    split = int(group[0])
    incumbent = np.zeros(g.num_ops, dtype=np.int64)
    incumbent[np.flatnonzero(group == split)[:1]] = 3  # the incumbent splits one group over two devices
    p.offer(incumbent, 0.0, False, 1)  # as a search's start (step time immaterial here)
    p.anchored = True
    same = p.best_groups()[None, :]
    moved = same.copy()
    other = (split + 1) % p.inp.num_groups
    moved[0, other] = 2
    anchored = p.anchor(np.concatenate([same, moved]))
    assert np.array_equal(anchored[0], incumbent)  # the incumbent's own choices give the incumbent back
    assert (anchored[1][group == other] == 2).all()  # the moved group moves whole
    assert np.array_equal(anchored[1][group != other], incumbent[group != other])  # and nothing else changes
    result, _ = p.score(same, sim, 4.0)
    assert result.step_time[0] == pytest.approx(sim.time(g, c, incumbent).step_time)


def test_a_memo_times_each_distinct_placement_once_and_counts_only_new_ones(counting_simulator):
    g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x4")
    p = PlacementProblem.build(g, c, Simulator())
    p.memo = True
    spread = (np.arange(p.inp.num_groups) % c.num_devices)[None, :]
    batch = np.concatenate([spread, spread, p.reference_groups[None, :]])  # a repeat, and the reference itself
    result, rewards = p.score(batch, counting_simulator, 4.0)
    assert counting_simulator.evaluations == 1 and p.evaluations == 2 and p.history[-1][0] == 2
    assert result.step_time[0] == result.step_time[1] and rewards[0] == rewards[1]
    assert result.step_time[2] == p.reference_step  # the reference was timed when the problem was built
    again, _ = p.score(batch[:1], counting_simulator, 4.0)  # timed by an earlier batch: no evaluation
    assert counting_simulator.evaluations == 1 and p.evaluations == 2
    plain = PlacementProblem.build(g, c, Simulator())  # without the memo: every row timed and counted
    unmemoised, _ = plain.score(batch, Simulator(), 4.0)
    assert plain.evaluations == 4
    for field in ("step_time", "busy_time", "peak_memory", "oom"):
        assert np.array_equal(getattr(result, field), getattr(unmemoised, field)), field


def test_widen_lowers_the_prior_while_batches_repeat_placements_and_restores_it_when_they_do_not():
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    p = PlacementProblem.build(g, c, Simulator(), reference="single")
    assert p.kappa is None
    assert [p.widen(0, 16, 3.0) for _ in range(4)] == [2.0, 1.0, 1.0, 1.0]  # floored at KAPPA_FLOOR
    assert p.widen(6, 16, 3.0) == 1.0  # between the two thresholds: kept
    assert [p.widen(16, 16, 3.0) for _ in range(3)] == [2.0, 3.0, 3.0]  # back up to the configured prior
    low = PlacementProblem.build(g, c, Simulator(), reference="single")
    assert low.widen(0, 16, 0.5) == 0.5  # a prior below the floor is never raised by widening


def test_reference_oom_says_whether_the_reference_overflows_and_the_best_stays_it_until_one_fits():
    g = mlp_training_graph(layers=4, width=4096, batch=256)
    tight = toy_cluster(2, memory=0.3 * GiB, bandwidth=2e8)  # one device cannot hold the step; two can
    p = PlacementProblem.build(g, tight, Simulator(), reference="single")
    assert p.reference_oom and p.best_oom
    p.offer(np.zeros(g.num_ops, dtype=np.int64), 0.0, True, 1)  # an overflowing placement does not replace it
    assert p.best_step == p.reference_step
    assert not PlacementProblem.build(g, load_cluster("k80x4"), Simulator(), reference="single").reference_oom


def test_the_policys_own_best_as_groups_is_what_it_chose_even_when_anchored_to_a_split_incumbent():
    g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x4")
    sim = Simulator()
    p = PlacementProblem.build(g, c, sim, reference="single")
    group = p.inp.decision.group[p.inp.coarsening.node_of_op]
    split = int(np.bincount(group).argmax())  # a layer: matmuls, then its light weight update last
    incumbent = np.zeros(g.num_ops, dtype=np.int64)
    incumbent[np.flatnonzero(group == split)[-1:]] = 3  # the incumbent moves the layer's last op away
    p.offer(incumbent, 0.0, False, 1)
    p.anchored = True
    same = p.best_groups()[None, :]  # the policy keeps every group where the incumbent has most of it
    assert same[0, split] == 0
    p.score(same, sim, 4.0)
    assert np.array_equal(p.sample_best_devices, incumbent)
    assert p.sample_best_groups().tolist() == same[0].tolist()  # device 0 for the split group, as chosen


def test_the_prior_is_kappa_on_the_best_placements_device_of_every_group():
    p = PlacementProblem.build(mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2"), Simulator(),
                               reference="single")
    bias = p.prior(2.5)
    best = p.best_groups()
    assert bias.shape == (p.inp.num_groups, 2)
    assert bias[np.arange(p.inp.num_groups), best].tolist() == [2.5] * p.inp.num_groups
    assert float(bias.sum()) == 2.5 * p.inp.num_groups


def test_a_fitting_placement_replaces_an_overflowing_best_even_when_slower():
    """The best seen overflows (the reference, one device): the first placement that fits is the best, at any step."""
    g = mlp_training_graph(layers=4, width=4096, batch=256)
    tight = toy_cluster(2, memory=0.3 * GiB, bandwidth=2e8)
    sim = Simulator()
    p = PlacementProblem.build(g, tight, sim, reference="single")
    assert p.best_oom
    halves = (np.arange(p.inp.num_groups) * 2 // p.inp.num_groups)[None, :]  # first half on 0, the rest on 1
    result, _ = p.score(halves, sim, 4.0)
    assert not result.oom[0] and result.step_time[0] > p.reference_step  # fits, and is slower than the reference
    assert not p.best_oom and p.best_step == result.step_time[0]
    assert np.array_equal(p.best_devices, p.inp.expand(halves[0]))


def test_majority_groups_weighs_ops_by_their_work_not_their_count():
    """A group whose few heaviest ops are on device 1 and its many lighter ones on device 0 goes to device 1 when
    those do most of the group's FLOP (a mutant counting ops passed)."""
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    p = PlacementProblem.build(g, c, Simulator())
    op_group = p.inp.decision.group[p.inp.coarsening.node_of_op]
    work = g.flops + 1.0
    found = []
    for group in range(p.inp.num_groups):
        members = np.flatnonzero(op_group == group)
        heavy = members[np.argsort(-work[members], kind="stable")]
        for size in range(1, len(members)):
            if work[heavy[:size]].sum() > work[heavy[size:]].sum():  # most of the work on fewer than half the ops
                if 2 * size < len(members):
                    found.append((group, heavy[:size]))
                break
    assert found  # the test's premise: a group where the heaviest few ops outweigh the many
    for group, heavy in found:
        devices = np.zeros(g.num_ops, dtype=np.int64)
        devices[heavy] = 1
        assert majority_groups(p.inp, devices)[group] == 1
        devices = 1 - devices
        assert majority_groups(p.inp, devices)[group] == 0


def test_rewards_floor_a_zero_step_and_a_zero_reference_at_a_picosecond():
    """A step of no work (0 s) and a reference of 0 s both count as STEP_FLOOR_S (1e-12 s): 0 s against a 0 s
    reference is as good as it (reward 0), 2e-12 s against it is twice as slow (-log 2), and 0 s against a 1e-12 s
    reference is as good as it too. Mutants dividing by the bare reference (NaN, -inf) or taking the bare step
    (log 0: +inf) passed."""
    zeros, ones = np.zeros((2, 2)), np.ones(2)
    assert reward(np.array([0.0, 2e-12]), zeros, ones, 0.0, 4.0).tolist() == pytest.approx([0.0, -np.log(2.0)])
    assert reward(np.array([0.0, 4e-12]), zeros, ones, 1e-12, 4.0).tolist() == pytest.approx([0.0, -np.log(4.0)])


def test_score_keeps_the_fitting_row_itself_not_the_row_at_its_index_among_the_fitting(heavy_groups):
    """Two groups of 0.6 GiB on two 1 GiB devices: [0, 0] overflows and [1, 0] fits. The best is the second row's
    placement; a mutant taking the argmin's index among the fitting rows (0) as the batch row kept the overflowing
    first row."""
    g, c = heavy_groups([0.6, 0.6]), toy_cluster(2, memory=1 * GiB)
    sim = Simulator()
    p = PlacementProblem.build(g, c, sim, reference="single")  # overflows: any fitting row replaces it
    result, _ = p.score(np.array([[0, 0], [1, 0]]), sim, 4.0)
    assert result.oom.tolist() == [True, False]
    assert p.sample_best_devices.tolist() == [1, 0] and p.sample_best_step == result.step_time[1]
    assert p.best_devices.tolist() == [1, 0] and p.best_step == result.step_time[1] and not p.best_oom


def test_a_placement_as_fast_as_the_best_does_not_replace_it(heavy_groups):
    """On two like devices, one light group each way round ([0, 1] and [1, 0]) times the same: the first seen stays
    the best and the policy's own best (mutants replacing on a tie passed)."""
    g, c = heavy_groups([0.1, 0.1]), toy_cluster(2)
    sim = Simulator()
    p = PlacementProblem.build(g, c, sim, reference="round_robin")
    assert p.reference_devices.tolist() == [0, 1]
    result, _ = p.score(np.array([[1, 0]]), sim, 4.0)
    assert result.step_time[0] == p.reference_step and p.best_devices.tolist() == [0, 1]
    assert p.sample_best_devices.tolist() == [1, 0]
    p.score(np.array([[0, 1]]), sim, 4.0)
    assert p.sample_best_devices.tolist() == [1, 0]


def test_widen_keeps_the_prior_at_exactly_a_quarter_and_exactly_half_new():
    """Fewer than a quarter new lowers the prior, more than half raises it: 4 of 16 and 8 of 16 keep it (mutants
    lowering at a quarter or raising at a half passed). An empty batch has no new placements: it lowers."""
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    p = PlacementProblem.build(g, c, Simulator(), reference="single")
    assert p.widen(4, 16, 3.0) == 3.0 and p.widen(0, 16, 3.0) == 2.0
    assert p.widen(8, 16, 3.0) == 2.0 and p.widen(9, 16, 3.0) == 3.0
    assert p.widen(0, 0, 3.0) == 2.0


def test_majority_groups_count_ops_of_no_flop():
    """Every op weighs its FLOP plus one: a group of zero-FLOP ops goes where most of them are (a mutant weighing
    FLOP alone put it on device 0 always)."""
    from gnplace.graph import OpGraph
    from gnplace.policy.features import build_policy_input, ops_alone

    g = OpGraph(["a", "b", "c", "d"], [], flops=[0.0, 0.0, 0.0, 0.0], group=[0, 0, 0, 1])
    inp = build_policy_input(g, toy_cluster(2), coarsening=ops_alone(g), held=np.ones(4))
    assert majority_groups(inp, np.array([1, 0, 1, 1])).tolist() == [1, 1]


def test_untimed_rows_are_the_first_row_of_each_new_placement():
    """[0, 1], [1, 0], [0, 1] again and a timed [1, 1]: the new placements' first rows are 0 and 1 (a mutant keeping
    each one's last row gave 2 and 1)."""
    from gnplace.rl.problem import placement_key, untimed_rows

    devices = np.array([[0, 1], [1, 0], [0, 1], [1, 1]])
    timed = {placement_key(np.array([1, 1])): (1.0, np.zeros(2), np.zeros(2), False)}
    keys, rows = untimed_rows(devices, timed)
    assert rows == [0, 1] and keys[0] == keys[2] != keys[1]


def test_an_offered_placement_that_fits_replaces_an_overflowing_best_even_when_slower(heavy_groups):
    """The reference (one device for two 0.6 GiB groups on 1 GiB devices) overflows: any fitting offer replaces it
    (a mutant asking only for a faster step kept the overflowing best)."""
    g, c = heavy_groups([0.6, 0.6]), toy_cluster(2, memory=1 * GiB)
    p = PlacementProblem.build(g, c, Simulator(), reference="single")
    assert p.best_oom and p.reference_oom
    p.offer(np.array([1, 0]), p.reference_step * 2, False, 1)
    assert not p.best_oom and p.best_devices.tolist() == [1, 0] and p.best_step == p.reference_step * 2


def test_a_placement_key_is_the_same_for_any_integer_dtype():
    """The memo's key of [0, 1] as int32 or a list is the int64 one's (a mutant hashing the given bytes missed)."""
    from gnplace.rl.problem import placement_key

    want = placement_key(np.array([0, 1], dtype=np.int64))
    assert placement_key(np.array([0, 1], dtype=np.int32)) == want and placement_key([0, 1]) == want


def test_the_model_ranks_an_overflowing_placement_last_and_the_screen_is_residual_over_it(heavy_groups):
    """model_log_step is log seconds by the model, inf where it overflows; a screen made beside a model learns the
    residual over it, one made without learns the step itself (mutants dropping the inf, or the flag, passed)."""
    g, c = heavy_groups([0.6, 0.6]), toy_cluster(2, memory=1 * GiB)
    sim = Simulator()
    p = PlacementProblem.build(g, c, sim, reference="round_robin")
    assert p.model_log_step(np.array([[0, 0]])) is None
    assert not p.start_screen().residual
    q = PlacementProblem.build(g, c, sim, reference="round_robin")
    q.model = sim
    got = q.model_log_step(np.array([[0, 0], [1, 0]]))
    assert got[0] == np.inf and got[1] == pytest.approx(np.log(sim.time(g, c, np.array([1, 0])).step_time))
    assert q.start_screen().residual


def test_a_problem_made_without_timing_its_reference_does_not_call_it_overflowing():
    """reference_oom reads the reference's timing; a problem made directly, its reference untimed, says False."""
    from gnplace.policy.features import build_policy_input
    from gnplace.rl.env import PlacementMDP

    inp = build_policy_input(mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2"))
    devices = np.zeros(inp.graph.num_ops, dtype=np.int64)
    p = PlacementProblem(inp, PlacementMDP(inp), devices, np.zeros(inp.num_groups, dtype=np.int64), 1.0)
    assert not p.reference_oom and not p.best_oom
