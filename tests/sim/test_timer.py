"""The ``StepTimer`` interface, ``BudgetedTimer`` and ranking by memory overflow."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.exceptions import BudgetExhausted, GnplaceError, InvalidArgument, InvalidPlacement
from gnplace.placement import Placement
from gnplace.placers.annealing import AnnealingPlacer
from gnplace.placers.groups import repair_memory
from gnplace.placers.random_search import RandomSearchPlacer
from gnplace.sim.costmodel import PLACETO_COSTS
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BatchResult, BudgetedTimer, StepTimer, overflow
from gnplace.toy import chain_graph, mlp_training_graph

GiB = 2**30


# ---------------------------------------------------------------------------------- StepTimer
def test_step_timer_needs_time():
    class NoTime(StepTimer):
        pass

    with pytest.raises(TypeError):
        NoTime()  # type: ignore[abstract]


def test_default_time_batch_loops_over_time_and_matches_the_simulator(time_only_timer):
    g, c = mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2")
    batch = np.random.default_rng(0).integers(0, 2, size=(5, g.num_ops))
    looped = time_only_timer.time_batch(g, c, batch)
    direct = Simulator().time_batch(g, c, batch)
    assert time_only_timer.calls == 5
    assert np.array_equal(looped.step_time, direct.step_time)
    assert np.array_equal(looped.peak_memory, direct.peak_memory)
    assert np.array_equal(looped.busy_time, direct.busy_time)
    assert np.array_equal(looped.oom, direct.oom)


def test_default_time_batch_checks_the_batch(time_only_timer):
    g, c = chain_graph(3), load_cluster("k80x2")
    with pytest.raises(InvalidPlacement, match="shape"):
        time_only_timer.time_batch(g, c, np.zeros((2, 4), dtype=int))
    with pytest.raises(InvalidPlacement, match="outside"):
        time_only_timer.time_batch(g, c, np.full((2, 3), 5))
    empty = time_only_timer.time_batch(g, c, np.zeros((0, 3), dtype=int))
    assert len(empty) == 0 and empty.peak_memory.shape == (0, 2)


@pytest.mark.parametrize("bad", [0.7, np.nan])
def test_a_batch_with_a_fractional_device_index_is_refused_as_time_refuses_it(bad):
    # time() refuses device 0.7 (a Placement); time_batch cut it to device 0 and timed another placement
    g, c, sim = chain_graph(3), load_cluster("k80x2"), Simulator()
    with pytest.raises(InvalidPlacement, match="whole numbers"):
        sim.time(g, c, [bad, 1.0, 0.0])
    with pytest.raises(InvalidPlacement, match="whole numbers"):
        sim.time_batch(g, c, [[0.0, 1.0, 0.0], [bad, 1.0, 0.0]])
    with pytest.raises(InvalidPlacement, match="whole numbers"):
        BudgetedTimer(sim).time_groups(g, c, np.array([[bad, 1.0, 0.0]]))
    assert sim.time_batch(g, c, [[1.0, 1.0, 0.0]]).step_time[0] == sim.time(g, c, [1, 1, 0]).step_time


def test_a_timer_names_its_cost_model():
    assert Simulator().cost_model.launch_overhead and not Simulator("placeto").cost_model.launch_overhead
    assert Simulator("placeto").cost_model is PLACETO_COSTS
    assert BudgetedTimer(Simulator("placeto")).cost_model is PLACETO_COSTS


def test_batch_result_from_results():
    g, c = chain_graph(3), load_cluster("k80x2")
    sim = Simulator()
    results = [sim.time(g, c, p) for p in ([0, 0, 0], [0, 1, 0])]
    batch = BatchResult.from_results(results, c.num_devices)
    assert batch.step_time.tolist() == [r.step_time for r in results]
    assert batch.peak_memory.shape == (2, 2) and batch.oom.tolist() == [False, False]


# ---------------------------------------------------------------------------------- overflow
def test_results_compare_by_their_values():
    """Two results of one step timed twice are equal (``==`` was a ValueError: the truth value of an array), as are
    their timelines and batches; another step, another placement's timeline or a missing timeline is not."""
    import pickle

    g, c = mlp_training_graph(layers=2), load_cluster("k80x2")
    sim = Simulator()
    ones = [0] * g.num_ops
    a, b = sim.time(g, c, ones, timeline=True), sim.time(g, c, ones, timeline=True)
    assert a == b and a == pickle.loads(pickle.dumps(a)) and not a != b
    assert a.timeline == b.timeline
    other = sim.time(g, c, [k % 2 for k in range(g.num_ops)], timeline=True)
    assert a != other and a.timeline != other.timeline and a != sim.time(g, c, ones) and a != "a"
    batch = sim.time_batch(g, c, np.zeros((2, g.num_ops), dtype=np.int64))
    assert batch == sim.time_batch(g, c, np.zeros((2, g.num_ops), dtype=np.int64))
    assert batch != sim.time_batch(g, c, np.zeros((3, g.num_ops), dtype=np.int64))
    with pytest.raises(TypeError, match="unhashable type: 'StepResult'"):
        hash(a)


def test_overflow_sums_bytes_over_capacity_relative_to_the_largest_device():
    peak = np.array([[1.0, 2.0], [3.0, 0.5], [5.0, 5.0], [2.0, 4.0]])
    assert overflow(peak, np.array([2.0, 4.0])).tolist() == [0.0, 0.25, 1.0, 0.0]
    assert overflow(peak, np.array([4.0, 4.0])).tolist() == [0.0, 0.0, 0.5, 0.0]


def test_overflow_of_an_empty_batch():
    assert overflow(np.zeros((0, 3)), np.ones(3)).shape == (0,)


# ---------------------------------------------------------------------------------- BudgetedTimer
def test_budgeted_timer_times_group_placements_as_op_placements(counting_simulator):
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    timer = BudgetedTimer(counting_simulator)
    candidates = np.array([[0, 0, 0], [0, 1, 0], [1, 0, 1]])
    result = timer.time_groups(g, c, candidates)
    expected = Simulator().time_batch(g, c, candidates[:, g.group])
    assert np.array_equal(result.step_time, expected.step_time)
    assert np.array_equal(result.peak_memory, expected.peak_memory)
    assert timer.evaluations == 3 and counting_simulator.batches == [3]
    timer.time(g, c, Placement.from_groups(g, c, candidates[0]))
    assert timer.evaluations == 4 and counting_simulator.evaluations == 4
    assert timer.remaining is None


def test_budget_is_enforced_before_timing(counting_simulator):
    g, c = chain_graph(3), load_cluster("k80x2")
    timer = BudgetedTimer(counting_simulator, budget=3)
    timer.time_batch(g, c, np.zeros((2, 3), dtype=int))
    assert timer.remaining == 1
    with pytest.raises(BudgetExhausted, match=r"^timing 2 more placements would exceed the budget of 3 evaluations "
                                              r"\(2 spent\)$"):
        timer.time_batch(g, c, np.zeros((2, 3), dtype=int))
    assert counting_simulator.evaluations == 2 and timer.evaluations == 2
    timer.time(g, c, [0, 1, 0])
    with pytest.raises(BudgetExhausted, match=r"^timing 1 more placement would exceed"):  # was "placement(s)"
        timer.time(g, c, [0, 0, 0])
    with pytest.raises(BudgetExhausted, match=r"the budget of 1 evaluation \(1 spent\)$"):  # was "1 evaluations"
        one = BudgetedTimer(counting_simulator, budget=1)
        one.time(g, c, [0, 0, 0])
        one.time(g, c, [0, 0, 0])
    assert issubclass(BudgetExhausted, GnplaceError)


@pytest.mark.parametrize(("rows", "says"), [
    ([[0, 1, 0], [0, 1]], "has rows of 3 and 2 entries"),
    (([0, 1, 0], (0, 1, 0, 1)), "has rows of 3 and 4 entries"),
    ([[0, 1, 0], 5], "mixes lists of devices with a row that is no list, 5"),
])
def test_a_ragged_batch_is_refused_as_ragged(rows, says):
    # time_batch said "device indices must be whole numbers, got [0, 1, 0]"; time_groups raised numpy's ValueError
    g, c = chain_graph(3), load_cluster("k80x2")
    timer = BudgetedTimer(budget=5)
    with pytest.raises(InvalidPlacement, match=rf"^batch of placements {says}, expected \(batch, 3\)$"):
        timer.time_batch(g, c, rows)
    with pytest.raises(InvalidPlacement, match=rf"^batch of group placements {says}, expected \(batch, 3\)$"):
        timer.time_groups(g, c, rows)
    assert timer.evaluations == 0


def test_a_batch_of_placements_is_timed_as_each_alone():
    """``time_batch(graph, cluster, [p, q])`` times Placements as ``time`` does; it was refused as "device indices
    must be whole numbers, got Placement(...)". One of another graph or cluster is refused as ``time`` refuses it."""
    g, c = mlp_training_graph(layers=2, width=8, batch=4), load_cluster("k80x2")
    sim = Simulator()
    ps = [Placement.from_groups(g, c, [0, 1, 0]), Placement.from_groups(g, c, [1, 1, 0])]
    batch = sim.time_batch(g, c, ps)
    assert batch.step_time.tolist() == [sim.time(g, c, p).step_time for p in ps]
    assert np.array_equal(batch.step_time, sim.time_batch(g, c, np.stack([p.devices for p in ps])).step_time)
    on_k80x4 = Placement.from_groups(g, load_cluster("k80x4"), [0, 1, 0])  # the same devices at those indices
    assert sim.time_batch(g, c, [on_k80x4]).step_time.tolist() == [sim.time(g, c, ps[0]).step_time]
    other = Placement.from_groups(chain_graph(3), c, [0, 1, 0])
    with pytest.raises(InvalidPlacement, match="^placement has 3 entries, graph 'mlp.*' has .* ops$"):
        sim.time_batch(g, c, [ps[0], other])
    with pytest.raises(InvalidPlacement, match="made for cluster 'k80x4'.*not for cluster 'v100x8'"):
        sim.time_batch(g, load_cluster("v100x8"), [on_k80x4])


@pytest.mark.parametrize("groups", [[0, 1, 0], [[0, 1]], [[0, 1, 0, 1]], [[[0, 1, 0]]]])
def test_a_group_batch_of_the_wrong_shape_is_refused_before_it_is_counted(groups):
    # a 1-D placement or one with too few or too many groups gave a raw IndexError or timed a wrong placement
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    timer = BudgetedTimer(budget=5)
    with pytest.raises(InvalidPlacement, match=r"expected \(batch, 3\)"):
        timer.time_groups(g, c, groups)
    assert timer.evaluations == 0


@pytest.mark.parametrize("budget", [-1, 2.5, True, "3"])
def test_bad_budget(budget):
    with pytest.raises(InvalidArgument, match="budget"):
        BudgetedTimer(budget=budget)


def test_budgeted_timer_prefers_a_slower_placement_that_fits(heavy_groups, small_gpus):
    g, c = heavy_groups([0.8, 0.8]), small_gpus(2, memory=1 * GiB)  # both groups on one GPU: out of memory
    timer = BudgetedTimer()
    assert timer.best is None and timer.best_key == (np.inf, np.inf) and timer.best_placement(c) is None
    result = timer.time_groups(g, c, np.array([[0, 0], [1, 1], [0, 1]]))
    assert result.oom.tolist() == [True, True, False]
    assert result.step_time[2] > result.step_time[0]  # the split pays for a transfer
    assert timer.best.tolist() == [0, 1]
    assert timer.best_placement(c).devices.tolist() == [0, 1]
    assert timer.best_key == (0.0, pytest.approx(float(result.step_time[2])))


def test_budgeted_timer_ranks_out_of_memory_placements_by_overflow(heavy_groups, small_gpus):
    g, c = heavy_groups([1.2, 1.2]), small_gpus(2, memory=1 * GiB)  # nothing fits
    timer = BudgetedTimer()
    result = timer.time_groups(g, c, np.array([[0, 0], [1, 0]]))
    assert result.oom.all()
    assert timer.best.tolist() == [1, 0]  # 0.2 GiB over on each GPU beats 1.4 GiB over on one
    assert timer.best_key[0] == pytest.approx(0.4, abs=0.01)
    assert timer.best_key[0] == pytest.approx(float(overflow(result.peak_memory, c.memory)[1]))


def test_budgeted_timer_keeps_the_best_across_calls_and_the_first_of_ties(two_chains):
    g, c = two_chains(3), load_cluster("k80x2")
    timer = BudgetedTimer(Simulator())
    timer.time_batch(g, c, np.array([[0] * 6, [1] * 6]))  # equal on symmetric devices: the first wins
    assert timer.best.tolist() == [0] * 6
    serial_key = timer.best_key
    timer.time(g, c, [0, 0, 0, 1, 1, 1])  # the two chains in parallel is faster
    assert timer.best.tolist() == [0, 0, 0, 1, 1, 1] and timer.best_key[1] < serial_key[1]
    best_key = timer.best_key
    timer.time_batch(g, c, np.array([[1, 1, 1, 0, 0, 0], [0] * 6]))  # as good, but later: no change
    assert timer.best.tolist() == [0, 0, 0, 1, 1, 1] and timer.best_key == best_key
    assert timer.evaluations == 5


def test_budgeted_timer_keeps_a_copy_of_the_best_and_starts_afresh_on_a_new_graph(two_chains):
    g, c = two_chains(2), load_cluster("k80x2")
    timer = BudgetedTimer()
    candidates = np.array([[0, 0, 1, 1]])
    timer.time_batch(g, c, candidates)
    candidates[:] = 1
    assert timer.best.tolist() == [0, 0, 1, 1]
    other = chain_graph(2)
    timer.time(other, c, [1, 1])
    assert timer.best.tolist() == [1, 1] and timer.evaluations == 2


# ---------------------------------------------------------------------------------- slow timers drive the searches
def test_a_time_only_timer_drives_random_search(time_only_timer):
    g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x4")
    ours = RandomSearchPlacer(budget=40, batch=8, start=None, timer=time_only_timer).place(g, c, seed=3)
    reference = RandomSearchPlacer(budget=40, batch=8, start=None).place(g, c, seed=3)
    assert time_only_timer.calls == 40
    assert ours == Placement(reference.devices, c)


def test_a_time_only_timer_drives_annealing(time_only_timer):
    g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x4")
    ours = AnnealingPlacer(budget=60, start="best", timer=time_only_timer).place(g, c, seed=1)
    reference = AnnealingPlacer(budget=60, start="best").place(g, c, seed=1)
    assert time_only_timer.calls == 60
    assert ours.devices.tolist() == reference.devices.tolist()


def test_a_time_only_timer_drives_memory_repair(time_only_timer, only_fits_split):
    g, c = only_fits_split
    start = np.zeros(g.num_groups, dtype=np.int64)
    counted = BudgetedTimer(time_only_timer)
    fixed = repair_memory(g, c, start, timer=counted)
    assert counted.evaluations == time_only_timer.calls > 0
    assert fixed.tolist() == repair_memory(g, c, start).tolist()
    assert not Simulator().time(g, c, Placement.from_groups(g, c, fixed)).is_oom


def test_repair_memory_stops_at_the_budget(only_fits_split):
    g, c = only_fits_split
    with pytest.raises(BudgetExhausted):
        repair_memory(g, c, np.zeros(g.num_groups, dtype=np.int64), timer=BudgetedTimer(budget=1))



def test_geomean_averages_the_ratios_there_are():
    import math

    from gnplace.sim.timer import geomean

    assert geomean([1.0, 4.0, float("nan"), None]) == pytest.approx(2.0)
    assert geomean(r for r in (0.5, float("inf"), 0.0, -1.0, 2.0)) == pytest.approx(1.0)  # a generator; inf, 0 dropped
    assert math.isnan(geomean([])) and math.isnan(geomean([None, float("nan")]))


def test_geomean_refuses_weights_that_do_not_match_the_values():
    import math

    from gnplace.sim.timer import geomean

    # zip stopped at the shorter: [1, 2, 4] under two weights averaged [1, 2] alone, sqrt(2) instead of 2
    with pytest.raises(InvalidArgument, match="values and weights differ in length"):
        geomean([1.0, 2.0, 4.0], weights=[1, 1])
    with pytest.raises(InvalidArgument, match="weights must be finite and >= 0, got -1"):
        geomean([1.0, 4.0], weights=[-1, 2])  # was 16, outside the values
    with pytest.raises(InvalidArgument, match="weights must be finite and >= 0, got nan"):
        geomean([1.0, 4.0], weights=[math.nan, 1])
    assert geomean([1.0, 4.0, None], weights=(w for w in (1, 1, 5))) == pytest.approx(2.0)  # a generator of weights
    assert math.isnan(geomean([1.0, 4.0], weights=[0, 0]))


def test_a_wrapped_timer_that_refuses_leaves_no_evaluation_counted():
    """A budget of 0 inside a budget of 5: the inner refuses, so the outer made no evaluation (it counted 1)."""
    graph, cluster = chain_graph(2), load_cluster("k80x2")
    outer = BudgetedTimer(BudgetedTimer(Simulator(), budget=0), budget=5)
    with pytest.raises(BudgetExhausted):
        outer.time(graph, cluster, [0, 0])
    with pytest.raises(BudgetExhausted):
        outer.time_batch(graph, cluster, np.zeros((2, 2), dtype=np.int64))
    assert outer.evaluations == 0 and outer.remaining == 5


def test_the_best_placement_is_made_for_the_graph_timed_last():
    from gnplace.placement import GraphKey

    cluster, timer = load_cluster("k80x2"), BudgetedTimer()
    first, last = chain_graph(3), mlp_training_graph(layers=2, width=8, batch=4)
    timer.time_batch(first, cluster, [[0, 1, 0]])
    assert timer.best_placement(cluster).made_for == GraphKey.of(first)
    timer.time_batch(last, cluster, np.zeros((2, last.num_ops), dtype=np.int64))
    best = timer.best_placement(cluster)
    assert best.made_for is not None and best.made_for.digest == GraphKey.of(last).digest
    with pytest.raises(InvalidPlacement, match="made for"):
        best.check(last.replace(node_names=[f"other{k}" for k in range(last.num_ops)]))


def test_a_budgeted_timer_refuses_what_is_no_timer():
    """``BudgetedTimer("sim")`` failed at its first ``time``, as an AttributeError."""
    for timer in ("sim", 3, Simulator):
        with pytest.raises(InvalidArgument, match="BudgetedTimer: timer must be a StepTimer"):
            BudgetedTimer(timer)
    assert isinstance(BudgetedTimer(BudgetedTimer()).timer, BudgetedTimer)


def test_time_groups_times_the_ops_placements_in_c_order(monkeypatch):
    """``BudgetedTimer.time_groups`` spreads the groups' devices to ops by ``np.take``: rows in C order, which ``[:, group]``'s
    are not (check_batch copied them: 0.9 s of 96 placements of 280,158 ops)."""
    from gnplace.sim.simulator import Simulator
    from gnplace.toy import layered_graph

    g, c = layered_graph(30, width=3, seed=0), load_cluster("k80x4")
    g = g.replace(group=np.arange(30) // 2)
    seen = []
    original = BudgetedTimer.time_batch

    def spy(self, graph, cluster, placements):
        seen.append(np.asarray(placements).flags.c_contiguous)
        return original(self, graph, cluster, placements)

    monkeypatch.setattr(BudgetedTimer, "time_batch", spy)
    rows = np.random.default_rng(0).integers(0, 4, (5, g.num_groups))
    result = BudgetedTimer(Simulator()).time_groups(g, c, rows)
    assert seen == [True]
    want = [Simulator().time(g, c, r[g.group]).step_time for r in rows]
    assert result.step_time.tolist() == want


class _Returns(StepTimer):
    """A user's timer whose ``time`` (and, when ``batch`` is given, ``time_batch``) returns what it is told."""

    def __init__(self, result, batch=None):
        self.result, self.batch = result, batch

    def time(self, graph, cluster, placement, *, timeline=False):
        return self.result(graph, cluster, placement) if callable(self.result) else self.result

    def time_batch(self, graph, cluster, placements):
        return self.batch if self.batch is not None else super().time_batch(graph, cluster, placements)


def _step(seconds):
    def result(graph, cluster, placement):
        timed = Simulator().time(graph, cluster, placement)
        return type(timed)(seconds, timed.busy_time, timed.peak_memory, timed.memory_capacity, timed.device_names)
    return result


@pytest.mark.parametrize("placer", ["expert", "single", "random_search"])
@pytest.mark.parametrize(("result", "says"), [
    (1.5, "timer _Returns: time() must return a StepResult, got 1.5 (float)"),
    (_step(float("nan")), "timer _Returns: time() returned a step_time of nan, expected finite seconds >= 0"),
    (_step(-1.0), "timer _Returns: time() returned a step_time of -1.0, expected finite seconds >= 0"),
    (_step(float("inf")), "timer _Returns: time() returned a step_time of inf, expected finite seconds >= 0"),
])
def test_a_user_timer_returning_no_valid_step_result_is_refused_naming_it(placer, result, says):
    """A float from time() was a bare AttributeError inside the placers; a step of nan, -1 or inf s was taken."""
    from gnplace import get_placer

    g, c = chain_graph(4), _toy2()
    with pytest.raises(InvalidArgument) as err:
        get_placer(placer, timer=_Returns(result)).place(g, c)
    assert str(err.value) == says


def _toy2():
    from gnplace.toy import toy_cluster

    return toy_cluster(2)


@pytest.mark.parametrize(("batch", "says"), [
    ([1.0], "timer _Returns: time_batch() must return a BatchResult, got [1.0] (list)"),
    (BatchResult(np.array([1.0, np.nan]), np.zeros((2, 2)), np.zeros((2, 2)), np.zeros(2, dtype=bool)),
     "timer _Returns: time_batch() returned a step_time of nan for placement 1, expected finite seconds >= 0"),
    (BatchResult(np.array([1.0]), np.zeros((1, 2)), np.zeros((1, 2)), np.zeros(1, dtype=bool)),
     "timer _Returns: time_batch() returned 1 step times and peak_memory of shape (1, 2) for 2 placements, expected "
     "2 and (2, 2)"),
    (BatchResult(np.array([1.0, 2.0]), np.zeros((2, 2)), np.zeros((2, 3)), np.zeros(2, dtype=bool)),
     "timer _Returns: time_batch() returned 2 step times and peak_memory of shape (2, 3) for 2 placements, expected "
     "2 and (2, 2)"),
])
def test_a_user_timer_batch_returning_no_valid_batch_result_is_refused_naming_it(batch, says):
    with pytest.raises(InvalidArgument) as err:
        _Returns(_step(1.0), batch).time_batch(chain_graph(3), _toy2(), [[0, 0, 0], [0, 1, 0]])
    assert str(err.value) == says


def _short_peaks(graph, cluster, placement):
    timed = Simulator().time(graph, cluster, placement)
    return type(timed)(timed.step_time, timed.busy_time, timed.peak_memory[:1], timed.memory_capacity,
                       timed.device_names)


def test_a_user_timer_with_a_peak_for_too_few_devices_is_refused_naming_it():
    """A peak row shorter than the cluster was an IndexError deep in the memory repair."""
    with pytest.raises(InvalidArgument) as err:
        _Returns(_short_peaks).time(chain_graph(3), _toy2(), [0, 1, 0])
    assert str(err.value) == ("timer _Returns: time() returned peak_memory of shape (1,), expected (2,): bytes for "
                              "each of the cluster's 2 devices")


def test_a_valid_user_timer_gives_what_the_simulator_gives():
    g, c = chain_graph(4), _toy2()
    ours = _Returns(lambda graph, cluster, placement: Simulator().time(graph, cluster, placement))
    batch = [[0, 0, 1, 1], [0, 1, 0, 1]]
    assert ours.time_batch(g, c, batch) == Simulator().time_batch(g, c, batch)
    assert ours.time(g, c, [0, 1, 1, 1]) == Simulator().time(g, c, [0, 1, 1, 1])
