"""Tests of the ``annealing`` placer: FlexFlow-style MCMC over group placements."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.exceptions import UnknownName
from gnplace.graph import OpGraph
from gnplace.placement import Placement, as_placement
from gnplace.placers.annealing import AnnealingPlacer, GivenStart
from gnplace.placers.round_robin import RoundRobinPlacer
from gnplace.placers.single import SinglePlacer
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BatchResult, BudgetedTimer, StepResult, StepTimer
from gnplace.toy import chain_graph, layered_graph, mlp_training_graph, toy_cluster


def test_name_and_repr():
    assert AnnealingPlacer.name == "annealing"
    assert repr(AnnealingPlacer()) == (
        "AnnealingPlacer(budget=2000, start='auto', initial_temperature=0.001, final_temperature=0.0001, "
        "reheat_after=0.2, reheat_temperature=0.05, swap_probability=0.3, block_probability=0.2, "
        "pull_probability=0.2, sibling_probability=0.1, module_probability=0.3, max_block=64, "
        "oom_penalty=10.0, batch=16)"
    )
    assert "start='round_robin'" in repr(AnnealingPlacer(start="round_robin"))


@pytest.mark.parametrize(
    "budget, batch, start",
    [(1, 16, "best"), (3, 16, "best"), (5, 16, "best"), (40, 1, "best"), (200, 16, "single"), (123, 5, "round_robin"),
     (77, 8, "random")],
)
def test_budget_is_exact_and_batches_bounded(budget, batch, start, counting_simulator):
    sim = counting_simulator
    g, c = mlp_training_graph(layers=3, width=64, batch=8, branches=2), load_cluster("k80x4")
    p = AnnealingPlacer(budget=budget, batch=batch, start=start, timer=sim).place(g, c, seed=0)
    assert sim.evaluations == budget
    assert max(sim.batches) <= max(batch, 5)  # the start candidates (D + 1 = 5) are scored together
    assert isinstance(p, Placement) and not p.splits_groups(g)


def test_deterministic_under_seed():
    g, c = layered_graph(30, seed=2), load_cluster("k80x4")
    runs = [AnnealingPlacer(budget=300).place(g, c, seed=s).devices.tolist() for s in (4, 4)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("start", ["best", "single", "round_robin"])
def test_never_worse_than_its_start(start, step_time):
    g, c = mlp_training_graph(layers=4, width=256, batch=32, branches=2), load_cluster("k80x4")
    best = step_time(g, c, AnnealingPlacer(budget=150, start=start).place(g, c, seed=0))
    if start in ("best", "single"):
        assert best <= step_time(g, c, SinglePlacer().place(g, c)) + 1e-15
    if start in ("best", "round_robin"):
        assert best <= step_time(g, c, RoundRobinPlacer().place(g, c)) + 1e-15


def test_starts_from_a_placer_object_or_a_registered_name(counting_simulator, step_time):
    g, c = chain_graph(5), load_cluster("k80x2")
    sim = counting_simulator
    p = AnnealingPlacer(budget=20, start=RoundRobinPlacer(), timer=sim).place(g, c, seed=0)
    assert sim.evaluations == 20
    assert step_time(g, c, p) <= step_time(g, c, RoundRobinPlacer().place(g, c)) + 1e-15
    with pytest.raises(UnknownName, match=r"^AnnealingPlacer: start: unknown placer 'nope' \(choose one of: "
                                          r"annealing, auto, .*, random_search, .*; or best, the better of single and "
                                          r"round_robin; or random, one random placement\)$") as caught:
        AnnealingPlacer(budget=5, start="nope").place(g, c, seed=0)
    assert "best," not in str(caught.value).split(";")[0]  # best and random are starts, not placers: -p best fails


def test_improves_on_a_parallel_graph(step_time):
    g, c = layered_graph(60, seed=3), load_cluster("k80x4")
    best = step_time(g, c, AnnealingPlacer(budget=600).place(g, c, seed=0))
    assert best < 0.75 * step_time(g, c, RoundRobinPlacer().place(g, c))


def test_leaves_an_out_of_memory_start_for_a_feasible_placement(heavy_groups, small_gpus):
    # every group holds 0.4 GiB: all on one 1 GiB device runs out of memory; two per device fits
    g = heavy_groups([0.4] * 4)
    c = small_gpus()
    sim = Simulator()
    assert sim.time(g, c, SinglePlacer().place(g, c)).is_oom
    p = AnnealingPlacer(budget=60, start="single").place(g, c, seed=0)
    assert not sim.time(g, c, p).is_oom


@pytest.mark.parametrize("budget", [1, 2, 3])
def test_a_budget_too_small_to_leave_an_out_of_memory_start_still_returns_a_placement_that_fits(
    budget, heavy_groups, small_gpus, counting_simulator
):
    g, c = heavy_groups([0.4] * 4), small_gpus()
    p = AnnealingPlacer(budget=budget, start="single", timer=counting_simulator).place(g, c, seed=0)
    assert not Simulator().time(g, c, p).is_oom  # was the start, out of memory: the best of what it timed
    assert counting_simulator.evaluations > budget  # the repair's, outside the budget as every placer's


def test_single_device_cluster_and_empty_graph(one_device_cluster, counting_simulator):
    sim = counting_simulator
    p = AnnealingPlacer(budget=50, start="best", timer=sim).place(chain_graph(4), one_device_cluster, seed=0)
    assert p.devices.tolist() == [0] * 4
    assert sim.evaluations == 2  # the single candidate and round robin; no move exists
    assert AnnealingPlacer().place(OpGraph([], []), load_cluster("k80x2"), seed=0).devices.tolist() == []


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(budget=0), "budget >= 1"),
        (dict(budget=10**9 + 1), "at most 1,000,000,000"),
        (dict(batch=0), "batch >= 1"),
        (dict(initial_temperature=0.01, final_temperature=0.1), "final_temperature"),
        (dict(final_temperature=0.0), "final_temperature"),
        (dict(swap_probability=2.0), "swap_probability"),
        (dict(block_probability=-0.1), "block_probability"),
        (dict(block_probability=0.5, pull_probability=0.4, sibling_probability=0.2), "sum to at most 1"),
        (dict(module_probability=-0.1), "module_probability"),
        (dict(block_probability=0.4, module_probability=0.5), "sum to at most 1"),
        (dict(max_block=1), "max_block >= 2"),
        (dict(max_block=2.5), "max_block >= 2"),
        (dict(oom_penalty=-1.0), "oom_penalty >= 0"),
        (dict(oom_penalty="10"), "oom_penalty >= 0"),
        (dict(oom_penalty=float("nan")), "oom_penalty >= 0"),
        (dict(reheat_after=1.0), "reheat_after"),
        (dict(reheat_after=0.0), "reheat_after"),
        (dict(reheat_temperature=0.0), "reheat_temperature"),
        # true was taken for 1 (every other placer refuses it), and a string leaked Python's "'<=' not supported"
        (dict(initial_temperature=True), r"^AnnealingPlacer needs initial_temperature to be a finite number, got True$"),
        (dict(swap_probability=True), "swap_probability to be a finite number"),
        (dict(reheat_temperature=True), "reheat_temperature to be a finite number"),
        (dict(final_temperature="zzz"), r"final_temperature to be a finite number, got 'zzz'"),
        (dict(reheat_after=""), "reheat_after to be a finite number"),
        (dict(pull_probability=None), "pull_probability to be a finite number"),
        # NaN passed the probabilities' range checks (that move was never drawn), infinity turned the temperatures
        # into NaN, and 10**400 (a YAML integer of -O) was float()'s OverflowError traceback
        (dict(block_probability=float("nan")), "block_probability to be a finite number, got nan"),
        (dict(module_probability=float("nan")), "module_probability to be a finite number"),
        (dict(initial_temperature=float("inf")), "initial_temperature to be a finite number, got inf"),
        (dict(reheat_temperature=float("inf")), "reheat_temperature to be a finite number"),
        (dict(initial_temperature=10**400), "initial_temperature to be a finite number"),
        (dict(pull_probability=10**400), "pull_probability to be a finite number"),
        (dict(oom_penalty=10**400), "finite oom_penalty >= 0"),
        (dict(oom_penalty=float("inf")), "finite oom_penalty >= 0"),
        # T_end / T_0 underflowed to 0: every temperature after the first was 0 (a greedy chain, a RuntimeWarning)
        (dict(initial_temperature=1e300, final_temperature=1e-30), "final_temperature / initial_temperature underflows"),
        (dict(final_temperature=1e-300, reheat_temperature=1e300), "final_temperature / reheat_temperature underflows"),
    ],
)
def test_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AnnealingPlacer(**kwargs)


def test_starts_from_auto_by_default_and_never_ends_worse(counting_simulator, step_time):
    from gnplace.placers.auto import AutoPlacer

    g, c = mlp_training_graph(layers=4, width=256, batch=32, branches=2), load_cluster("v100x8")
    auto_sim = type(counting_simulator)()
    reference = AutoPlacer(timer=auto_sim).place(g, c, seed=0)
    p = AnnealingPlacer(budget=40, timer=counting_simulator).place(g, c, seed=0)
    assert counting_simulator.evaluations == 40 + auto_sim.evaluations  # auto's own work is not in the budget
    assert step_time(g, c, p) <= step_time(g, c, reference) + 1e-15


def _moves(graph, **kwargs):
    from gnplace.placers.annealing import _Moves

    return _Moves(graph, AnnealingPlacer(**kwargs))


def test_a_block_moves_groups_contiguous_in_topological_order_to_one_device():
    g = chain_graph(10)  # one group per op, topological order 0..9
    moves = _moves(g, block_probability=1.0, pull_probability=0.0, sibling_probability=0.0, module_probability=0.0, max_block=4)
    rng = np.random.default_rng(0)
    current = np.arange(10) % 4  # neighbours on different devices: no block is on one device already
    for _ in range(50):
        proposal = moves.propose(current, 4, rng)
        runs = [(i, n) for n in (2, 3, 4) for i in range(11 - n)
                if np.unique(proposal[i : i + n]).size == 1
                and np.array_equal(np.delete(proposal, range(i, i + n)), np.delete(current, range(i, i + n)))]
        assert runs, proposal  # one run of 2 to 4 consecutive groups on one device, the rest unchanged


def test_a_pull_moves_a_group_onto_a_neighbour_across_a_cut_edge():
    g = chain_graph(6)
    moves = _moves(g, block_probability=0.0, pull_probability=1.0, sibling_probability=0.0, module_probability=0.0)
    rng = np.random.default_rng(1)
    current = np.array([0, 0, 0, 1, 1, 1])  # the only cut edge is 2 -> 3
    seen = {tuple(moves.propose(current, 2, rng)) for _ in range(40)}
    assert seen == {(0, 0, 0, 0, 1, 1), (0, 0, 1, 1, 1, 1)}


def test_a_sibling_move_takes_the_calls_of_one_module_together():
    # two calls of module "cell" (groups 0 and 2) around a call of "head" (group 1)
    g = OpGraph(["a", "b", "c"], [(0, 1), (1, 2)], module=["cell", "head", "cell"])
    moves = _moves(g, block_probability=0.0, pull_probability=0.0, sibling_probability=1.0, module_probability=0.0)
    assert [s.tolist() for s in moves.siblings] == [[0, 2]]
    rng = np.random.default_rng(2)
    current = np.zeros(3, dtype=np.int64)
    for _ in range(30):
        proposal = moves.propose(current, 3, rng)
        changed = set(np.flatnonzero(proposal != current).tolist())
        assert changed in ({0}, {2}, {0, 2})  # all calls, or a window of consecutive ones
    assert _moves(chain_graph(3)).siblings == []  # ops outside any module are not calls of one cell


def test_a_module_move_takes_one_subtree_of_the_module_hierarchy_to_one_device():
    # cell.0 holds groups 0 and 1 (its branches a and b), cell.1 groups 2 and 3, and head group 4
    modules = ["cell.0.a", "cell.0.b", "cell.1.a", "cell.1.b", "head"]
    g = OpGraph(["a", "b", "c", "d", "e"], [(0, 2), (1, 2), (2, 4), (3, 4)], module=modules)
    moves = _moves(g, block_probability=0.0, pull_probability=0.0, sibling_probability=0.0, module_probability=1.0)
    assert sorted(sorted(m.tolist()) for m in moves.modules) == [[0, 1], [0, 1, 2, 3], [2, 3]]  # 2+ groups, not all
    rng = np.random.default_rng(3)
    current = np.array([0, 1, 2, 3, 0])
    seen = set()
    for _ in range(60):
        proposal = moves.propose(current, 4, rng)
        changed = np.flatnonzero(proposal != current)
        subtree = next(m for m in ([0, 1], [2, 3], [0, 1, 2, 3]) if set(changed.tolist()) <= set(m))
        assert np.unique(proposal[subtree]).size == 1  # the whole subtree on one device
        seen.add(tuple(subtree))
    assert seen == {(0, 1), (2, 3), (0, 1, 2, 3)}
    assert _moves(chain_graph(3)).modules == []  # no module paths, no subtrees


def test_structural_moves_escape_a_local_optimum_of_single_moves(step_time):
    # a long chain cut once: every single move or swap adds a transfer, moving the cut needs a block
    from gnplace.placers.auto import AutoPlacer

    g, c = layered_graph(60, seed=3), load_cluster("k80x4")
    plain = AnnealingPlacer(
        budget=400, block_probability=0, pull_probability=0, sibling_probability=0, module_probability=0
    )
    rich = AnnealingPlacer(budget=400)
    reference = step_time(g, c, AutoPlacer().place(g, c, seed=0))
    assert step_time(g, c, rich.place(g, c, seed=0)) <= step_time(g, c, plain.place(g, c, seed=0)) + 1e-15
    assert step_time(g, c, rich.place(g, c, seed=0)) <= reference + 1e-15


def _schedules(monkeypatch, placer, graph, cluster):
    """Run ``placer`` and return, per batch, ``(evaluations before it, schedule, current placement, best so far)``."""
    from gnplace.placers import annealing

    calls = []
    step = annealing.AnnealingPlacer._step

    def spy(self, graph, cluster, scorer, moves, rng, current, current_energy, acceptance, scale, schedule):
        best = scorer.best_placement(cluster).group_devices(graph)
        calls.append((scorer.evaluations, schedule, current.copy(), best))
        return step(self, graph, cluster, scorer, moves, rng, current, current_energy, acceptance, scale, schedule)

    monkeypatch.setattr(annealing.AnnealingPlacer, "_step", spy)
    placer.place(graph, cluster, seed=0)
    return calls


def test_a_stalled_chain_reheats_once_from_the_best_placement(monkeypatch):
    g, c = layered_graph(60, seed=3), load_cluster("k80x4")
    calls = _schedules(monkeypatch, AnnealingPlacer(budget=600, reheat_after=0.05), g, c)
    schedules = [schedule for _, schedule, _, _ in calls]
    assert schedules[0] == (0, 0.001)
    hot = [i for i, schedule in enumerate(schedules) if schedule[1] == 0.05]
    assert hot and len({schedules[i] for i in hot}) == 1  # once
    first = hot[0]
    spent, (start, _) = calls[first][0], schedules[first]
    assert start == spent and 0.05 * 600 < spent < 0.9 * 600
    assert np.array_equal(calls[first][2], calls[first][3])  # from the best placement seen
    assert all(schedule == (0, 0.001) for schedule in schedules[:first])


@pytest.mark.parametrize("options", [dict(reheat_after=None), dict(initial_temperature=0.05)])
def test_never_reheats_when_off_or_already_hot(monkeypatch, options):
    g, c = layered_graph(60, seed=3), load_cluster("k80x4")
    calls = _schedules(monkeypatch, AnnealingPlacer(budget=600, **options), g, c)
    assert {schedule for _, schedule, _, _ in calls} == {(0, AnnealingPlacer(**options).initial_temperature)}


def test_a_given_start_is_annealed_from_and_never_lost():
    """``GivenStart(placement)``: the chain starts from that placement (timed once, counted) and returns no worse."""
    from gnplace.sim.timer import BudgetedTimer

    graph, cluster, sim = layered_graph(60, seed=1), load_cluster("k80x4"), Simulator()
    start = RoundRobinPlacer().place(graph, cluster)
    counted = BudgetedTimer(sim)
    placed = AnnealingPlacer(budget=40, start=GivenStart(start), timer=counted, progress=False).place(
        graph, cluster, seed=0)
    assert counted.evaluations == 40  # the start's timing is one of the budget's, nothing else runs
    assert sim.time(graph, cluster, placed).step_time < sim.time(graph, cluster, start).step_time
    assert GivenStart(start).place(graph, load_cluster("k80x2"), seed=5) is start


def test_no_progress_reaches_the_search_it_starts_from(bars_asked):
    """``gnplace place -p annealing -O annealing.start=random_search --no-progress`` drew random_search's bar on a
    terminal (and evaluate's workers its lines): the start placer, built from its name, kept its own default."""
    import gnplace.placers.random_search as random_search

    shown = bars_asked(random_search)
    g, c = layered_graph(12, seed=0), load_cluster("k80x2")
    AnnealingPlacer(budget=5, start="random_search", progress=False).place(g, c, seed=0)
    assert shown == [False]
    shown.clear()
    AnnealingPlacer(budget=5, start="random_search").place(g, c, seed=0)  # not asked: the start's own default
    assert shown == [None]


class _Tilted(StepTimer):
    """A timer of known energies: 1 s plus ``tilt`` seconds per op on device 0; with ``spill``, device 1 is over
    memory by half its capacity whenever it holds an op (an overflow of 0.5 on two alike devices)."""

    def __init__(self, tilt: float = 1e-3, spill: bool = False) -> None:
        self.tilt, self.spill = tilt, spill

    def time_batch(self, graph, cluster, placements):
        p = np.asarray(placements)
        peak = np.zeros((p.shape[0], cluster.num_devices))
        if self.spill:
            peak[:, 1] = np.where((p == 1).any(axis=1), 1.5 * cluster.memory[1], 0.0)
        return BatchResult(1.0 + self.tilt * (p == 0).sum(axis=1), np.zeros_like(peak), peak,
                           (peak > cluster.memory).any(axis=1))

    def time(self, graph, cluster, placement, *, timeline=False):
        batch = self.time_batch(graph, cluster, as_placement(graph, cluster, placement).devices[None, :])
        return StepResult(float(batch.step_time[0]), batch.busy_time[0], batch.peak_memory[0], cluster.memory,
                          [d.name for d in cluster.devices])


class _Listed:
    """Moves that propose the given placements in turn."""

    def __init__(self, proposals) -> None:
        self.proposals = iter(proposals)

    def propose(self, current, num_devices, rng):
        return np.asarray(next(self.proposals))


def test_the_temperature_cools_geometrically_from_t0_to_t_end_over_the_budget(monkeypatch):
    """T_i = T_0 (T_end / T_0)^(i / (B - 1)): a chain that never cooled, or heated, or tested exp(+delta / T), passed."""
    from gnplace.placers import annealing

    timer, g, c = _Tilted(), chain_graph(1), toy_cluster(2)  # the one op is 1 ms slower on device 0
    placer = AnnealingPlacer(budget=101, initial_temperature=1e-3, final_temperature=1e-5, reheat_after=None,
                             timer=timer)
    scorer, rng, exponents = BudgetedTimer(timer, placer.budget), np.random.default_rng(0), []
    exp = np.exp
    monkeypatch.setattr(annealing.np, "exp", lambda x: exponents.append(np.array(x)) or exp(x))
    # eight proposals a batch (acceptance 1/8), each the one op moved to device 0: 1 ms worse, delta 1e-3 of scale 1
    placer._step(g, c, scorer, _Listed([[0]] * 8), rng, np.array([1]), 1.0, 1 / 8, 1.0, (0, 1e-3))
    scorer.time_groups(g, c, np.ones((85, 1), dtype=np.int64))  # evaluations 8 to 92
    placer._step(g, c, scorer, _Listed([[0]] * 8), rng, np.array([1]), 1.0, 1 / 8, 1.0, (0, 1e-3))
    monkeypatch.undo()
    assert scorer.evaluations == 101
    temperatures = -1e-3 / np.concatenate(exponents)
    index = np.r_[0:8, 93:101]
    assert temperatures == pytest.approx(1e-3 * (1e-5 / 1e-3) ** (index / 100), rel=1e-9)
    assert temperatures[-1] == pytest.approx(1e-5, rel=1e-12)  # T_end at the last evaluation


def test_the_first_accepted_proposal_of_a_batch_moves_the_chain():
    """Proposals are tested in order and the first accepted one is taken (a later, better one is dropped)."""
    timer, g, c = _Tilted(), chain_graph(2), toy_cluster(2)
    placer = AnnealingPlacer(budget=10, timer=timer)
    proposals = [[0, 1], [1, 1]]  # energies 1.001 and 1.000 from 1.002: both accepted
    current, energy, _ = placer._step(g, c, BudgetedTimer(timer, 10), _Listed(proposals), np.random.default_rng(0),
                                      np.array([0, 0]), 1.002, 0.5, 1.0, (0, 1e-3))
    assert current.tolist() == [0, 1] and energy == pytest.approx(1.001)


def _first_state(monkeypatch, placer, graph, cluster):
    """Run ``placer``; the placement and energy the chain's first step starts from."""
    from gnplace.placers import annealing

    first = []
    step = annealing.AnnealingPlacer._step

    def spy(self, graph, cluster, scorer, moves, rng, current, current_energy, *rest):
        first.append((current.copy(), current_energy))
        return step(self, graph, cluster, scorer, moves, rng, current, current_energy, *rest)

    monkeypatch.setattr(annealing.AnnealingPlacer, "_step", spy)
    placer.place(graph, cluster, seed=0)
    return first[0]


def test_the_chain_starts_from_the_start_candidate_of_least_energy(monkeypatch):
    """Of the ``best`` candidates (each single device, round robin) the chain takes the lowest energy, not the first."""
    g, c = chain_graph(3), toy_cluster(2)
    current, energy = _first_state(monkeypatch, AnnealingPlacer(budget=20, start="best", timer=_Tilted()), g, c)
    assert current.tolist() == [1, 1, 1] and energy == 1.0


def test_the_energy_multiplies_the_step_by_one_plus_the_penalty_times_the_overflow(monkeypatch):
    """E = t (1 + rho overflow): all on device 1 is the fastest step but 0.5 over memory, 1 * (1 + 10 * 0.5)."""
    g, c = chain_graph(3), toy_cluster(2)
    timer = _Tilted(spill=True)
    current, energy = _first_state(monkeypatch, AnnealingPlacer(budget=20, start="single", timer=timer), g, c)
    assert current.tolist() == [0, 0, 0] and energy == pytest.approx(1.003)  # 1.003 fits; 1.0 * 6 overflows
    current, energy = _first_state(monkeypatch, AnnealingPlacer(budget=20, start="round_robin", timer=timer), g, c)
    assert current.tolist() == [0, 1, 0] and energy == pytest.approx(1.002 * (1 + 10 * 0.5))


def test_never_reheats_in_the_last_tenth_of_the_budget(monkeypatch):
    """A chain that has stalled for ``reheat_after`` of the budget only after 90% of it keeps cooling to the end."""
    g, c = chain_graph(3), toy_cluster(2)  # from all on device 1, the lowest energy, every move is worse: a stall
    calls = _schedules(monkeypatch, AnnealingPlacer(budget=600, start="single", reheat_after=0.92, timer=_Tilted()), g, c)
    assert {schedule for _, schedule, _, _ in calls} == {(0, 0.001)}


def test_a_swap_exchanges_the_devices_of_two_groups():
    moves = _moves(chain_graph(6), block_probability=0.0, pull_probability=0.0, sibling_probability=0.0,
                   module_probability=0.0, swap_probability=1.0)
    rng, current = np.random.default_rng(4), np.array([0, 0, 1, 1, 2, 3])
    for _ in range(30):
        proposal = moves.propose(current, 4, rng)
        a, b = np.flatnonzero(proposal != current)
        assert (proposal[a], proposal[b]) == (current[b], current[a])
