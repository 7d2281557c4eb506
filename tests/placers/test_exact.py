"""Tests of the ``exact`` placer: CP-SAT placement and schedule, checked against brute force."""

from __future__ import annotations

import itertools
import types
import warnings

import numpy as np
import pytest

from gnplace.cluster import Cluster, cluster_from_dict, load_cluster
from gnplace.exceptions import InfeasiblePlacement, UnsupportedGraph
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.placers.auto import AutoPlacer
from gnplace.placers.exact import ExactPlacer, brute_force, delay_model
from gnplace.placers.round_robin import RoundRobinPlacer
from gnplace.placers.single import SinglePlacer
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, fork_graph, layered_graph, mixed_cluster, mlp_training_graph, toy_cluster

GiB = 2**30
UNIT = 1e-9  # seconds per tick in the brute-force comparisons


def measured(names, edges, ms_per_kind: dict[str, list[float]], out_bytes, group=None, name="measured") -> OpGraph:
    return OpGraph(
        names, edges, out_bytes=out_bytes, group=group, name=name,
        cost_s={kind: np.asarray(ms) * 1e-3 for kind, ms in ms_per_kind.items()},
    )


def diamond() -> OpGraph:
    """Diamond ``a -> {b, c, d} -> e``: three branches, each fastest on a different device."""
    return measured(
        list("abcde"), [(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4)],
        {"cpu": [1, 2, 9, 9, 1], "k80": [1, 9, 2, 9, 1], "v100": [1, 9, 9, 2, 1]}, [10**6] * 5, name="diamond",
    )


def grouped_dag() -> OpGraph:
    """Six ops in four colocation groups, two parallel paths, mixed affinities."""
    return measured(
        [f"v{i}" for i in range(6)], [(0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 5)],
        {"cpu": [0.5, 3, 1, 3, 1, 0.5], "k80": [0.5, 1, 3, 1, 3, 0.5], "v100": [0.5, 2, 2, 2, 2, 0.5]},
        [2 * 10**6] * 6, group=[0, 1, 2, 1, 3, 0], name="grouped",
    )


def affinity_chain() -> OpGraph:
    """A chain whose first ops are fastest on the CPU and last on the V100: a split can pay."""
    return measured(
        [f"c{i}" for i in range(5)], [(i, i + 1) for i in range(4)],
        {"cpu": [1, 1, 5, 5, 5], "k80": [4, 4, 3, 3, 3], "v100": [6, 6, 1, 1, 1]}, [10**6] * 5, name="affinity",
    )


def delay_model_optimum(graph: OpGraph, cluster: Cluster) -> int:
    """Brute force of the solver's delay model: every group placement, every topological order.

    For a fixed order, ops are appended to their device as early as inputs allow (serial schedule
    generation); the best over all orders is the optimum, since sorting an optimal schedule by start
    time gives an order whose schedule is no later.
    """
    dur, delay = delay_model(graph, cluster, time_unit=UNIT)
    preds = [[] for _ in range(graph.num_ops)]
    for e, (u, w) in enumerate(zip(graph.edge_src.tolist(), graph.edge_dst.tolist())):
        preds[w].append((u, e))
    orders = [p for p in itertools.permutations(range(graph.num_ops))
              if all(p.index(u) < p.index(w) for u, w in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()))]
    best = None
    for per_group in itertools.product(range(cluster.num_devices), repeat=graph.num_groups):
        device = [per_group[g] for g in graph.group.tolist()]
        for order in orders:
            free = [0] * cluster.num_devices
            end = [0] * graph.num_ops
            for v in order:
                k = device[v]
                ready = max([end[u] + int(delay[e, device[u], k]) for u, e in preds[v]], default=0)
                end[v] = max(ready, free[k]) + int(dur[v, k])
                free[k] = end[v]
            makespan = max(end)
            best = makespan if best is None else min(best, makespan)
    return best


def test_name_and_repr():
    assert ExactPlacer.name == "exact"
    assert repr(ExactPlacer()) == (
        "ExactPlacer(time_limit=30.0, max_groups=60, activation_memory=True, link_contention=True, "
        "select='simulator', time_unit=None, num_workers=2)"
    )


@pytest.mark.parametrize("make_graph", [diamond, grouped_dag, affinity_chain, fork_graph])
def test_objective_equals_brute_force_of_the_delay_model(make_graph):
    g, c = make_graph(), mixed_cluster()
    placer = ExactPlacer(time_limit=20, time_unit=UNIT, link_contention=False, select="model")
    p = placer.place(g, c, seed=0)
    assert placer.last_status == "optimal"
    assert placer.last_gap == 0.0
    assert placer.last_bound_s == pytest.approx(placer.last_objective_s)
    assert round(placer.last_objective_s / UNIT) == delay_model_optimum(g, c)
    assert not p.splits_groups(g)


@pytest.mark.parametrize(
    "graph, cluster",
    [
        (affinity_chain(), mixed_cluster()),  # a chain: one transfer at a time, no contention
        (chain_graph(5, flops=2e10, out_bytes=1000), load_cluster("cpu_gpu")),
        (OpGraph([f"o{i}" for i in range(6)], [(i, i + 1) for i in range(5)], flops=[1e10, 5e9, 2e10, 1e9, 1e10, 3e9],
                 out_bytes=[10**5] * 6, group=[0, 0, 1, 1, 2, 2], name="grouped_chain"), load_cluster("k80x2")),
        (fork_graph(flops=1e11, out_bytes=1000), load_cluster("k80x2")),  # branches on distinct links
        (fork_graph(flops=1e11, out_bytes=1000), load_cluster("k80x4")),
    ],
)
@pytest.mark.parametrize("link_contention", [False, True])
def test_simulated_step_equals_brute_force_where_no_contention_can_occur(graph, cluster, link_contention):
    placer = ExactPlacer(time_limit=20, time_unit=UNIT, link_contention=link_contention, select="model")
    p = placer.place(graph, cluster, seed=0)
    sim = Simulator()
    best = sim.time(graph, cluster, brute_force(graph, cluster)).step_time
    tolerance = (graph.num_ops + graph.num_edges) * UNIT  # op and transfer times rounded to ticks
    assert placer.last_status == "optimal"
    assert sim.time(graph, cluster, p).step_time == pytest.approx(best, abs=tolerance)
    assert placer.last_step_time_s == placer.last_model_step_time_s == pytest.approx(best, abs=tolerance)
    assert placer.last_objective_s == pytest.approx(best, abs=tolerance)


@pytest.mark.heavy
def test_objective_never_exceeds_the_simulated_step_time():
    g, c = mlp_training_graph(layers=3, width=512, batch=64, branches=2), load_cluster("k80x4")
    placer = ExactPlacer(time_limit=20, select="model")
    p = placer.place(g, c, seed=0)
    assert placer.last_status == "optimal"
    step = Simulator().time(g, c, p).step_time
    assert placer.last_step_time_s == step
    assert placer.last_objective_s <= step * (1 + 1e-6)
    # select="simulator" never returns worse than the model's choice or the baselines
    chosen = ExactPlacer(time_limit=20).place(g, c, seed=0)
    simulated = Simulator().time(g, c, chosen).step_time
    assert simulated <= step
    assert simulated <= Simulator().time(g, c, RoundRobinPlacer().place(g, c)).step_time


def test_time_limit_gives_a_feasible_placement_and_a_gap():
    g, c = layered_graph(40, seed=1), load_cluster("k80x4")
    placer = ExactPlacer(time_limit=0.5)
    p = placer.place(g, c, seed=0)
    p.check(g)
    assert placer.last_status in ("optimal", "feasible", "unknown")
    if placer.last_status == "feasible":
        assert 0.0 <= placer.last_gap <= 1.0
        assert placer.last_bound_s <= placer.last_objective_s
    assert placer.last_step_time_s <= Simulator().time(g, c, RoundRobinPlacer().place(g, c)).step_time


def test_deterministic_under_seed_with_one_worker():
    g, c = grouped_dag(), mixed_cluster()
    runs = [ExactPlacer(num_workers=1, time_limit=20).place(g, c, seed=3).devices.tolist() for _ in range(2)]
    assert runs[0] == runs[1]


def test_returns_a_feasible_placement_when_memory_is_tight(heavy_groups, small_gpus):
    # three 0.6 GiB groups, 1 GiB devices: no device holds two, so the three must spread out
    g = heavy_groups([0.6] * 3)
    c = small_gpus(3, name="tight3")
    sim = Simulator()
    assert sim.time(g, c, SinglePlacer().place(g, c)).is_oom
    placer = ExactPlacer(time_limit=10)
    p = placer.place(g, c, seed=0)
    assert sorted(p.devices.tolist()) == [0, 1, 2]
    assert not placer.last_oom and not sim.time(g, c, p).is_oom


def test_a_solution_that_overflows_the_timer_is_repaired_where_no_baseline_fits():
    # the model's memory count (its own schedule) admits its optimum, which the simulator's FIFO order
    # overflows on device 1 by 10 MB; single and round robin overflow too, while moving a group fits (as heft does)
    g = OpGraph([f"v{i}" for i in range(7)], [(0, 3), (0, 5), (2, 4), (3, 6)],
                flops=[0.09e9, 1.4e9, 3.3e9, 4e9, 0.12e9, 7.2e9, 4.4e9],
                out_bytes=[22e6, 37e6, 22e6, 32e6, 36e6, 4e6, 2e6], param_bytes=[10e6, 4e6, 0, 0, 39e6, 0, 0],
                group=[0, 1, 2, 3, 1, 2, 1], name="overflows_the_timer")
    c = toy_cluster(3, memory=123e6, bandwidth=1e10, latency=1e-5)
    sim = Simulator()
    assert sim.time(g, c, SinglePlacer().place(g, c)).is_oom and sim.time(g, c, RoundRobinPlacer().place(g, c)).is_oom
    placer = ExactPlacer(time_limit=1, num_workers=1)
    p = placer.place(g, c, seed=0)
    assert placer.last_model_step_time_s is not None
    assert not sim.time(g, c, p).is_oom and not placer.last_oom
    assert placer.last_step_time_s == sim.time(g, c, p).step_time


def test_where_the_solver_finds_nothing_the_result_is_no_slower_than_auto():
    # each op 1-2 us on its home device and 100x that elsewhere; memory tight. In 0.2 deterministic units CP-SAT
    # found no solution: the descent from single and round robin alone stopped at 1.53 ms, auto (and heft) found
    # 1.35 ms, the optimum of brute force
    home = np.array([0, 2, 2, 2, 2, 0, 0, 0, 2, 0])
    base = np.array([1.88, 1.95, 1.53, 1.79, 1.33, 1.82, 1.82, 1.07, 1.96, 1.34]) * 1e-6
    kinds = ["v100", "k80", "cpu"]
    g = layered_graph(10, width=2, seed=28)
    g = g.replace(cost_s={k: np.where(home == i, base, base * 100) for i, k in enumerate(kinds)})
    c = cluster_from_dict({"name": "home", "devices": [{"name": f"d{i}", "kind": k, "memory": 33.6e6}
                                                       for i, k in enumerate(kinds)],
                           "links": {"default": {"bandwidth": 1e10, "latency": 1e-5}}})
    sim = Simulator()
    placer = ExactPlacer(time_limit=0.2, num_workers=1)
    placement = placer.place(g, c, seed=0)
    assert placer.last_status == "unknown"
    auto = sim.time(g, c, AutoPlacer().place(g, c, seed=0))
    result = sim.time(g, c, placement)
    assert not result.is_oom and not auto.is_oom
    assert result.step_time <= auto.step_time


def _two_homes() -> tuple[OpGraph, Cluster]:
    """Ten ops, each 1-2 us on its home device of two and 100x that on the other; 19.23 MB a device, where 8.6% of the
    1,024 placements fit: single moves from any fitting placement near the optimum overflow or slow it."""
    home = np.array([0, 1, 0, 1, 1, 1, 0, 0, 0, 1])
    base = np.array([1.56, 1.41, 1.45, 1.10, 1.60, 1.60, 1.38, 1.93, 1.60, 1.96]) * 1e-6
    kinds = ["v100", "k80"]
    graph = layered_graph(10, width=2, seed=14)
    graph = graph.replace(cost_s={k: np.where(home == i, base, base * 100) for i, k in enumerate(kinds)})
    cluster = cluster_from_dict({"name": "homes", "devices": [{"name": f"d{i}", "kind": k, "memory": 19.23e6}
                                                              for i, k in enumerate(kinds)],
                                 "links": {"default": {"bandwidth": 1e10, "latency": 1e-5}}})
    return graph, cluster


def test_the_placement_does_not_depend_on_which_improving_solutions_cp_sat_reported(monkeypatch):
    # the interleaved search's two tasks of a batch report solutions as the threads run, and one not strictly better
    # than a solution reported first is not reported: nmt_004@12 on k80x4 handed the callback 47 or 50 solutions (same
    # deterministic time, same final solution) and the descent from them returned 46.3206 or 46.3149 ms. Here, before
    # exact revision 6, the descent from every improving solution returned 7.190 ms, and with none reported 7.239
    from ortools.sat.python import cp_model

    g, c = layered_graph(18, width=3, seed=3), load_cluster("k80x2")
    placer = ExactPlacer(time_limit=1)
    reported = placer.place(g, c, seed=0)
    monkeypatch.setattr(cp_model.CpSolverSolutionCallback, "OnSolutionCallback", lambda self: None)
    assert placer.place(g, c, seed=0).devices.tolist() == reported.devices.tolist()


def test_the_descent_goes_wide_where_the_solver_proved_its_optimum(monkeypatch):
    # proved optimal: single moves from the solver's final solution and pool and the baselines stop at 6.462 ms, where
    # two groups moved at once reach 6.430 (as single moves from every improving solution did before exact revision 6)
    import gnplace.placers.exact as exact

    g, c = layered_graph(18, width=3, seed=5), load_cluster("k80x2")
    sim = Simulator()
    placer = ExactPlacer(time_limit=1)
    step = sim.time(g, c, placer.place(g, c, seed=0)).step_time
    descend = exact._descend
    monkeypatch.setattr(exact, "_descend", lambda *args, wide: descend(*args, wide=False))
    narrow = sim.time(g, c, placer.place(g, c, seed=0)).step_time
    assert placer.last_status == "optimal" and step < 0.999 * narrow


def test_a_wide_descent_leaves_the_local_optimum_of_single_moves():
    # from single and round robin, single moves stopped at 1.134 times the brute-force optimum; moving two groups at
    # once (or exchanging two devices' groups) reaches it
    from gnplace.placers._search import baseline_candidates
    from gnplace.placers.exact import _descend

    g, c = _two_homes()
    sim = Simulator()
    best = sim.time(g, c, brute_force(g, c)).step_time
    starts = baseline_candidates(g, c)
    narrow = sim.time(g, c, _descend(g, c, starts, sim))
    wide = sim.time(g, c, _descend(g, c, starts, sim, wide=True))
    assert not narrow.is_oom and narrow.step_time > 1.1 * best
    assert not wide.is_oom and wide.step_time == pytest.approx(best)


def test_where_the_solver_proves_nothing_the_result_is_the_brute_force_optimum():
    # in 0.02 deterministic units CP-SAT finds no solution (status unknown): the descent from auto, single and round
    # robin by single moves stopped at 1.134 times the brute-force optimum
    g, c = _two_homes()
    sim = Simulator()
    placer = ExactPlacer(time_limit=0.02, num_workers=1)
    placement = placer.place(g, c, seed=0)
    assert placer.last_status == "unknown"
    result = sim.time(g, c, placement)
    assert not result.is_oom and result.step_time == pytest.approx(sim.time(g, c, brute_force(g, c)).step_time)


@pytest.mark.parametrize("num_workers", [1, 2])
def test_a_solve_the_wall_clock_net_ends_says_so(monkeypatch, num_workers):
    # the net is made to come at once (the forked solver's child inherits it): where it, not the deterministic limit,
    # ends the search, the result may depend on the machine's load, and the placer says so. Before, a loaded machine
    # reached the net of 10 x time_limit + 30 s unannounced: bench.py exact's ptb_004@12 on k80x4 came out "unknown"
    from gnplace.placers import _exact_model

    monkeypatch.setattr(_exact_model, "WALL_SECONDS_PER_UNIT", 0.0)
    monkeypatch.setattr(_exact_model, "WALL_NET_BASE_S", 0.0)
    g, c = _two_homes()
    placer = ExactPlacer(time_limit=100, num_workers=num_workers)
    with pytest.warns(RuntimeWarning, match="wall-clock net .* may depend on the machine's load"):
        placement = placer.place(g, c, seed=0)
    assert placer.last_wall_net is True and placer.last_status in ("feasible", "unknown")
    assert placer.last_deterministic_time < 100 and placement.devices.shape == (g.num_ops,)


def test_a_solve_the_deterministic_limit_ends_is_not_blamed_on_the_net(monkeypatch):
    # the same model at 0.02 deterministic units, stopped by that limit (unknown): no warning, last_wall_net False;
    # the net is checked around CP-SAT's call, so a clock read as far past it blames the net (the load decides)
    from gnplace.placers import _exact_model

    g, c = _two_homes()
    placer = ExactPlacer(time_limit=0.02, num_workers=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        placer.place(g, c, seed=0)
    assert placer.last_status == "unknown" and placer.last_wall_net is False
    ticks = itertools.count(0.0, 1e6)  # each read of the model's clock a million seconds after the one before
    monkeypatch.setattr(_exact_model, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
    with pytest.warns(RuntimeWarning, match="wall-clock net"):
        placer.place(g, c, seed=0)
    assert placer.last_status == "unknown" and placer.last_wall_net is True


def test_activation_memory_counts(small_gpus):
    # a -> b -> c; a writes 0.7 GiB, c holds 0.5 GiB of parameters; 1 GiB devices. Parameters alone fit
    # anywhere, but a's output and c's parameters cannot share a device: c must sit apart
    g = OpGraph(["a", "b", "c"], [(0, 1), (1, 2)], flops=[1e9] * 3, out_bytes=[int(0.7 * GiB), 1000, 0],
                param_bytes=[0, 0, int(0.5 * GiB)], name="big_activation")
    c = small_gpus(name="two")
    sim = Simulator()
    placer = ExactPlacer(time_limit=10, select="model")
    p = placer.place(g, c, seed=0)
    assert p.devices[0] == p.devices[1] != p.devices[2]
    assert not sim.time(g, c, p).is_oom
    params_only = ExactPlacer(time_limit=10, select="model", activation_memory=False)
    q = params_only.place(g, c, seed=0)
    assert q.devices.tolist() == [0, 0, 0]  # no transfer: faster, and out of memory
    assert sim.time(g, c, q).is_oom


def test_too_many_groups_is_unsupported():
    g = chain_graph(8)
    message = r"^graph 'chain8' has 8 colocation groups, more than ExactPlacer's max_groups=5; coarsen it \(gnplace\.coarsen\) or use a "
    with pytest.raises(UnsupportedGraph, match=message):
        ExactPlacer(max_groups=5).place(g, load_cluster("k80x2"))


def _never_built(*args, **kwargs):
    raise AssertionError("the model was built")


def test_delays_over_the_memory_limit_are_refused_before_anything_is_built(monkeypatch):
    """The [edges, D, D] delays grew with edges x devices^2 whatever the groups: GiBs before a refusal or a solve."""
    from gnplace.placers import exact
    from gnplace.rl import comparator

    g, c = chain_graph(4), load_cluster("k80x4")  # 3 edges x 16 device pairs x 16 bytes: 768 bytes
    monkeypatch.setattr(comparator, "MAX_UPDATE_BYTES", 767)
    monkeypatch.setattr(exact, "delay_model", _never_built)
    message = (r"^ExactPlacer: the transfer delays of the 3 edges of graph 'chain4' between 4 devices would take "
               r"about 0\.0 GiB to build, over the 7\.14324e-07 GiB limit; coarsen it \(gnplace\.coarsen\), use fewer "
               r"devices, or use a search placer such as 'annealing'$")
    with pytest.raises(UnsupportedGraph, match=message):
        ExactPlacer(time_limit=1).place(g, c)
    monkeypatch.undo()
    monkeypatch.setattr(comparator, "MAX_UPDATE_BYTES", 768)  # at the limit: placed
    assert ExactPlacer(time_limit=1).place(g, c).devices.shape == (4,)


def test_a_model_over_max_model_terms_is_refused_before_anything_is_built(monkeypatch):
    """Few groups but many ops (or many devices) made a model CP-SAT cannot build: refused, saying what to do."""
    from gnplace.placers import exact

    g = OpGraph([f"v{i}" for i in range(4)], [(0, 1), (1, 2), (2, 3)], flops=[1e9] * 4, out_bytes=[1000] * 4,
                group=[0, 0, 1, 1], name="two_groups")
    c = load_cluster("k80x4")  # 4 ops x 4 devices + 1 edge between groups x 12 device pairs = 28 terms
    monkeypatch.setattr(exact, "MAX_MODEL_TERMS", 27)
    monkeypatch.setattr(exact, "delay_model", _never_built)
    message = (r"^ExactPlacer: graph 'two_groups' on 4 devices makes a model of 28 terms \(4 ops x 4 devices \+ 1 "
               r"edges between colocation groups x 12 device pairs\), more than MAX_MODEL_TERMS=27, too large to "
               r"build and solve; coarsen it \(gnplace\.coarsen\), use fewer devices, or use a search placer")
    with pytest.raises(UnsupportedGraph, match=message) as info:
        ExactPlacer(time_limit=1).place(g, c)
    assert "\n" not in str(info.value)
    monkeypatch.undo()
    monkeypatch.setattr(exact, "MAX_MODEL_TERMS", 28)  # at the cap: placed
    assert ExactPlacer(time_limit=1).place(g, c).devices.shape == (4,)


def test_delay_model_holds_at_most_delay_bytes_per_entry():
    """The delays took 24 bytes an entry at their peak (three float64 and int64 copies), over the refusal's estimate."""
    import tracemalloc

    from gnplace.placers.exact import DELAY_BYTES_PER_ENTRY

    g, c = layered_graph(300, seed=0), toy_cluster(16)
    entries = g.num_edges * 16 * 16
    tracemalloc.start()
    try:
        delay_model(g, c, time_unit=1e-9)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 1.1 * DELAY_BYTES_PER_ENTRY * entries


@pytest.mark.parametrize(
    "params_gib, match",
    [
        ([0.5, 2.0], r"^colocation group 1 of graph 'heavy' holds \d+ bytes of parameters, more than the largest"),
        ([0.9, 0.9, 0.9], r"^graph 'heavy' holds \d+ bytes of parameters, more than all devices"),
    ],
)
def test_parameters_that_fit_nowhere_are_infeasible(params_gib, match, small_gpus):
    n = len(params_gib)
    g = OpGraph([f"l{i}" for i in range(n)], [(i, i + 1) for i in range(n - 1)], flops=[1e9] * n,
                out_bytes=[1000] * n, param_bytes=[int(p * GiB) for p in params_gib], name="heavy")
    c = small_gpus(name="two")
    with pytest.raises(InfeasiblePlacement, match=match) as info:
        ExactPlacer(time_limit=5).place(g, c)
    assert "\n" not in str(info.value)


def test_activations_that_fit_nowhere_are_infeasible(small_gpus):
    g = OpGraph(["a", "b"], [(0, 1)], flops=[1e9, 1e9], out_bytes=[2 * GiB, 0], name="huge_output")
    c = small_gpus(name="two")
    message = r"^no placement of graph 'huge_output' fits the memory of cluster 'two'"
    with pytest.raises(InfeasiblePlacement, match=message):
        ExactPlacer(time_limit=5).place(g, c)


def test_an_op_that_fits_no_device_is_one_error_without_a_search():
    # the fork's sink holds its two 4 MB inputs and its 4 MB output: on 9.6 MB devices the two-worker search ran
    # to the wall-clock net (40 s at time_limit=1, "unknown") and returned a placement out of memory
    import dataclasses

    k80x2 = load_cluster("k80x2")
    c = Cluster([dataclasses.replace(d, memory=9.6e6) for d in k80x2.devices], k80x2.bandwidth, k80x2.latency,
                name="tight")
    with pytest.raises(InfeasiblePlacement, match=r"^no placement of graph 'fork' fits the memory of cluster 'tight'"):
        ExactPlacer(time_limit=1).place(fork_graph(), c, seed=0)


def test_a_placement_that_fits_exactly_is_found_where_the_models_rounding_refuses_it():
    """Parameters of exactly each device's memory: the model (demands rounded up, capacities down) found no
    placement, no baseline fitted (single and round robin), and the placer said none fits; [0, 1, 1] does."""
    from gnplace.cluster import Device

    g = OpGraph(["a", "b", "c"], [], flops=[1e9] * 3, out_bytes=[0] * 3, param_bytes=[10**9, 5 * 10**8, 5 * 10**8],
                name="tight")
    c = Cluster([Device(f"g{k}", "k80", 2.8e12, 240e9, 10**9) for k in range(2)], np.full((2, 2), 1e10),
                np.zeros((2, 2)), name="two")
    placer = ExactPlacer(time_limit=5, num_workers=1)
    placement = placer.place(g, c, seed=0)
    assert not Simulator().time(g, c, placement).is_oom and not placer.last_oom
    assert sorted(np.bincount(placement.devices, minlength=2).tolist()) == [1, 2]


def test_empty_graph():
    placer = ExactPlacer()
    assert placer.place(OpGraph([], []), load_cluster("k80x2")).devices.tolist() == []
    assert placer.last_status == "optimal" and placer.last_objective_s == 0.0


def test_brute_force_is_the_best_simulated_placement():
    g, c = fork_graph(flops=1e11, out_bytes=1000), load_cluster("k80x2")
    best = brute_force(g, c)
    assert isinstance(best, Placement)
    sim = Simulator()
    all_steps = [sim.time(g, c, list(p)).step_time for p in itertools.product(range(2), repeat=4)]
    assert sim.time(g, c, best).step_time == min(all_steps)
    with pytest.raises(UnsupportedGraph, match="more than limit=10"):
        brute_force(g, c, limit=10)


def test_delay_model_ticks():
    g, c = chain_graph(2, out_bytes=12_000), load_cluster("k80x2")
    dur, delay = delay_model(g, c, time_unit=1e-6)
    seconds = Simulator().cost_model.op_times(g, c)
    assert dur.tolist() == np.rint(seconds / 1e-6).astype(int).tolist()
    assert delay[0].tolist() == [[0, 27], [27, 0]]  # 25 us + 12 kB at 7.6 GB/s = 26.6 us


@pytest.mark.parametrize("kwargs", [dict(time_limit=0), dict(max_groups=0), dict(num_workers=0), dict(select="best"),
                                    dict(time_unit=-1.0), dict(num_workers=True), dict(num_workers=1e15),
                                    dict(num_workers=10**15), dict(max_groups=1.5), dict(max_groups=True),
                                    dict(time_limit="5"), dict(time_limit=True),
                                    # 10**400 was float()'s OverflowError traceback (time_unit's when placing), NaN and
                                    # infinity passed; "no" was bool("no"), true
                                    dict(time_limit=10**400), dict(time_limit=float("inf")), dict(time_unit=10**400),
                                    dict(time_unit=float("nan")), dict(activation_memory="no"),
                                    dict(link_contention=0)])
def test_bad_options(kwargs):
    with pytest.raises(ValueError, match="ExactPlacer"):
        ExactPlacer(**kwargs)


def test_placeto_mode_simulator_matches_on_a_chain():
    # Placeto's simulator: sender channel at 7.6 GB/s, 5.7 us idle after each op; a chain has no contention
    g, c = affinity_chain(), mixed_cluster()
    sim = Simulator("placeto")
    placer = ExactPlacer(time_limit=20, time_unit=UNIT, select="model", timer=sim)
    p = placer.place(g, c, seed=0)
    best = sim.time(g, c, brute_force(g, c, timer=sim)).step_time
    assert placer.last_status == "optimal"
    assert placer.last_step_time_s == sim.time(g, c, p).step_time == pytest.approx(best, abs=10 * UNIT)
    assert placer.last_objective_s == pytest.approx(best, abs=10 * UNIT)


def test_single_device_cluster(one_device_cluster):
    g = chain_graph(4)
    placer = ExactPlacer(time_limit=5)
    assert placer.place(g, one_device_cluster).devices.tolist() == [0] * 4
    assert placer.last_status == "optimal"
    assert placer.last_objective_s == pytest.approx(placer.last_step_time_s, abs=1e-7)


@pytest.mark.parametrize("ops, width, seed, run, devices, slack", [
    (11, 3, 23532, 1, 1, 1.0), (15, 4, 58934, 1, 2, 1.0), (14, 1, 1310, 3, 4, 1.5), (3, 2, 408, 2, 2, 1.0),
    (10, 1, 38682, 3, 4, 1.0694542939570237),
])
@pytest.mark.parametrize("num_workers", [1, 2])
def test_models_that_aborted_the_solver_are_solved(ops, width, seed, run, devices, slack, num_workers):
    """OR-Tools 9.15's interleaved search aborted the whole process (failed CHECKs) on these models."""
    from gnplace.toy import toy_cluster

    graph = layered_graph(ops, width=width, seed=seed)
    graph = graph.replace(group=np.minimum(np.arange(ops) // run, 11))
    roomy = toy_cluster(devices)
    peak = Simulator().time(graph, roomy, RoundRobinPlacer().place(graph, roomy)).peak_memory.max()
    cluster = toy_cluster(devices, memory=float(peak) * slack, name="tight")
    with warnings.catch_warnings(record=True) as caught:  # OR-Tools 9.15 aborts on the 2-worker models here
        warnings.simplefilter("always")
        placement = ExactPlacer(time_limit=0.2, num_workers=num_workers).place(graph, cluster, seed=7)
    assert placement.devices.shape == (ops,) and not placement.splits_groups(graph)
    assert all("parallel search aborted" in str(w.message) for w in caught)  # the only warning: solved again
    assert not caught or num_workers == 2


def test_a_received_copy_holds_only_the_bytes_read_on_its_device():
    # op 0 sends 12 kB to op 1 and 20.6 MB to op 3: a copy next to op 1's 62 MB of parameters holds the 12 kB;
    # charged all of op 0's out-edge bytes, the model found nothing that fits where 108 of 243 placements do
    graph = OpGraph([f"n{i}" for i in range(5)], [(0, 1), (0, 3)],
                    flops=[3.94e8, 7.07e9, 7.81e8, 1.10e8, 1.91e8],
                    out_bytes=[20602056, 32359486, 5947453, 18351635, 8172284],
                    param_bytes=[0, 61952642, 0, 0, 0], edge_bytes=[12391, 20602056])
    cluster = toy_cluster(3, memory=94513168.0, name="tight")
    every = np.array(list(itertools.product(range(3), repeat=5)))
    timed = Simulator().time_batch(graph, cluster, every)
    best = timed.step_time[~timed.oom].min()
    placed = ExactPlacer(time_limit=10, num_workers=1).place(graph, cluster, seed=0)
    result = Simulator().time(graph, cluster, placed)
    assert not result.is_oom and result.step_time == pytest.approx(best)


def test_placeto_gaps_longer_than_the_ops_leave_the_model_solvable(one_device_cluster):
    # three 1 us ops, each followed by Placeto's 5.7 us gap: the model's horizon had no room for the gaps, so it
    # was infeasible and the placer fell back to a baseline with last_status "infeasible"
    g, sim = chain_graph(3, flops=1e6, out_bytes=100), Simulator("placeto")
    placer = ExactPlacer(time_limit=5, num_workers=1, timer=sim)
    placer.place(g, one_device_cluster, seed=0)
    assert placer.last_status == "optimal"
    assert placer.last_objective_s == pytest.approx(sim.time(g, one_device_cluster, [0, 0, 0]).step_time, abs=1e-8)


def test_the_solver_optimum_is_the_brute_force_optimum_with_partial_edges():
    # op 0 writes 8 MB: op 1 reads all of it, op 2 a 4 kB slice. Timed, c beside a is a transfer of 4 kB; the model
    # sized every transfer of op 0 by its largest edge (8 MB, 0.67 ms), put c beside a and missed the optimum
    g = OpGraph(["a", "b", "c"], [(0, 1), (0, 2)], flops=[1e9, 5e11, 5e11], out_bytes=[8 * 10**6, 0, 0],
                edge_bytes=[8 * 10**6, 4000])
    c = toy_cluster(2)
    placer = ExactPlacer(time_limit=10, time_unit=UNIT, select="model", num_workers=1)
    placed = placer.place(g, c, seed=0)
    best = Simulator().time(g, c, brute_force(g, c)).step_time
    assert placer.last_status == "optimal"
    assert Simulator().time(g, c, placed).step_time == pytest.approx(best)
    assert placer.last_objective_s <= best + 10 * UNIT


def test_an_exact_fit_no_baseline_finds_is_placed_not_called_infeasible():
    """Two devices filled to the byte ({4,3,3} + {4,3,3} tenths): the model's rounding refused it and so did single,
    round robin and their repair, so exact said no placement fits while auto found one."""
    capacity = 10 * 2**20
    a = capacity // 10
    params = [4 * a - 2, 3 * a + 1, 4 * a - 2, 3 * a + 1, 3 * a + 1, 3 * a + 1]
    g = OpGraph([f"op{i}" for i in range(6)], [], flops=[1e9] * 6, out_bytes=[0] * 6, param_bytes=params,
                name="packing")
    c = toy_cluster(2, memory=capacity)
    assert not Simulator().time(g, c, brute_force(g, c)).is_oom  # a placement fits
    placement = ExactPlacer(time_limit=5).place(g, c, seed=0)
    assert not Simulator().time(g, c, placement).is_oom


@pytest.mark.parametrize("unit", [1e-30, 1e-300, True, float("inf"), float("nan")])
def test_a_time_unit_that_overflows_the_solver_or_is_no_number_is_one_error(unit):
    """Ticks too fine made CP-SAT refuse the model (a RuntimeError traceback: 1e-17 s on a 98-op graph); True was 1 s."""
    from gnplace.exceptions import InvalidArgument

    g, c = mlp_training_graph(layers=2, width=8, batch=4), load_cluster("k80x2")
    with pytest.raises(InvalidArgument, match="time_unit"):
        ExactPlacer(time_unit=unit, time_limit=1).place(g, c, seed=0)


def test_memory_is_counted_for_ops_that_take_no_tick(tmp_path):
    """A memory interval of no length (an op of 0 ticks: no work, or a time_unit coarser than it) is ignored by
    CP-SAT's cumulative constraint: two 6 GB outputs meeting on one 8 GB device were proved "optimal"."""
    path = tmp_path / "two8.yaml"
    path.write_text("name: two8\ndevices: [{name: gpu, count: 2, kind: k80, memory: 8 GB}]\nlinks: {default: pcie3}\n")
    graph = OpGraph(["a1", "a2", "x", "c"], [(0, 3), (1, 3)], out_bytes=[6e9, 6e9, 0, 0], edge_bytes=[6e9, 1e6])
    cluster = load_cluster(path)
    placer = ExactPlacer(time_unit=10, select="model", num_workers=1)
    placement = placer.place(graph, cluster, seed=0)
    assert placer.last_status == "optimal" and not Simulator().time(graph, cluster, placement).is_oom


def test_devices_far_apart_in_speed_get_a_unit_fine_enough_for_the_fast_ones():
    """A device 10^7 times slower set a 10 ms tick: the fast devices' ops took no tick, and the solver's
    "optimal" placement (0.00968 s) was slower than heft's (0.00900 s)."""
    import dataclasses

    from gnplace.placers.exact import _auto_unit
    from gnplace.placers.heft import HeftPlacer
    from gnplace.sim.costmodel import DEFAULT_COSTS

    graph = layered_graph(12, width=3, seed=0)
    k80x4 = load_cluster("k80x4")
    slow = dataclasses.replace(k80x4.devices[3], kind="slow", peak_flops=k80x4.devices[3].peak_flops / 1e7,
                               mem_bandwidth=k80x4.devices[3].mem_bandwidth / 1e7)
    cluster = Cluster([*k80x4.devices[:3], slow], k80x4.bandwidth, k80x4.latency, name="far-apart")
    fastest = DEFAULT_COSTS.op_times(graph, cluster).min(axis=1).sum()
    assert fastest / _auto_unit(graph, cluster, DEFAULT_COSTS) >= 1e6
    sim = Simulator()
    exact = sim.time(graph, cluster, ExactPlacer(time_limit=20).place(graph, cluster, seed=0)).step_time
    assert exact <= sim.time(graph, cluster, HeftPlacer().place(graph, cluster, seed=0)).step_time * (1 + 1e-9)


def test_memory_that_can_never_bind_leaves_tiny_graphs_provably_optimal():
    # 6 ops, 4 groups on a K80 and a CPU of 16 GB, a few MB of tensors: the activations' cumulative constraint,
    # which can never bind here, kept CP-SAT from proving the optimum in 20 deterministic units (it returned
    # 11.00 ms where the optimum is 9.89, and took 30 s); one of 70 random tiny cases, with two more like it
    cost_ms = {"k80": [4.163363, 4.061052, 1.404957, 1.549325, 2.734711, 3.588037],
               "cpu": [4.667929, 2.077307, 1.126853, 1.330473, 1.31296, 4.043696]}
    g = measured([f"o{i}" for i in range(6)], [(1, 2), (1, 3), (1, 4), (3, 4), (0, 5), (1, 5), (2, 5), (3, 5)],
                 cost_ms, [37818, 8590513, 412284, 805931, 1032197, 1330753], group=[0, 1, 2, 2, 3, 3], name="ample")
    c = cluster_from_dict({"name": "ample", "devices": [{"name": "gpu", "kind": "k80", "memory": 16e9},
                                                         {"name": "cpu", "kind": "cpu", "memory": 16e9}],
                           "links": {"default": {"bandwidth": 731058045.1332196, "latency": 6.342767851682426e-06}}})
    placer = ExactPlacer(time_limit=20, time_unit=UNIT, num_workers=1, link_contention=False, select="model")
    placer.place(g, c, seed=0)
    assert placer.last_status == "optimal"
    assert round(placer.last_objective_s / UNIT) == delay_model_optimum(g, c)


def test_a_solved_model_returns_at_once_with_two_workers():
    # 5 ops on a K80 and a V100: proved optimal in 0.08 s, yet CP-SAT 9.15's interleaved "reduced_costs" subsolver
    # went on to the wall-clock safety net (then 10 x time_limit + 30 s: 230 s at the default limit of 20, 40 s here).
    # Checked by the solver's deterministic time, not by the clock, which load would make flaky: 0.00033 units, the
    # same every run; with "reduced_costs" back and CP-SAT's default batches of 6, 0.156 when the net stopped it
    cost_ms = {"v100": [3.057586, 0.584402, 1.13526, 4.054565, 0.678685],
               "k80": [4.333054, 2.270434, 0.647105, 0.954022, 4.27763]}
    g = measured([f"o{i}" for i in range(5)], [(1, 2), (2, 4)], cost_ms, [3710298, 5796732, 9541737, 8705901, 9307446],
                 group=[0, 1, 0, 2, 2], name="stalls")
    c = cluster_from_dict({"name": "pair", "devices": [{"name": "d0", "kind": "k80", "memory": 16e9},
                                                        {"name": "d1", "kind": "v100", "memory": 16e9}],
                           "links": {"default": {"bandwidth": 8519663018.336061, "latency": 8.117022902962852e-06}}})
    placer = ExactPlacer(time_limit=1, num_workers=2)
    placer.place(g, c, seed=0)
    assert placer.last_status == "optimal" and placer.last_deterministic_time < 0.01


def test_select_simulator_finds_the_placement_the_simulator_times_fastest():
    # ops 0, 2, 3 and 4 have no inputs; the model's optimum puts them all on the CPU and runs op 4 (which feeds the
    # V100) first: 7.54 ms. The simulator runs ready ops by index, op 4 last: 11.45 ms, and of the solver's solutions
    # and the baselines the best timed 10.02 ms, where op 3 on the V100 times 7.95 ms (brute force)
    cost_ms = {"cpu": [1.193, 0.979, 1.064, 4.0, 1.286, 3.694, 3.658],
               "v100": [2.853, 4.822, 2.18, 0.659, 2.729, 1.411, 1.059]}
    g = measured([f"o{i}" for i in range(7)], [(4, 5), (4, 6), (5, 6)], cost_ms,
                 [3700023, 3265128, 9925006, 9248883, 3590777, 8559950, 6925040], group=[0, 1, 0, 2, 3, 1, 4],
                 name="ready")
    c = cluster_from_dict({"name": "pair", "devices": [{"name": "cpu", "kind": "cpu", "memory": 16e9},
                                                        {"name": "gpu", "kind": "v100", "memory": 16e9}],
                           "links": {"default": {"bandwidth": 2.5e9, "latency": 1.4e-6}}})
    sim = Simulator()
    placer = ExactPlacer(time_limit=10)  # the descent from the solver's solutions reaches the 7.95 ms placement
    step = sim.time(g, c, placer.place(g, c, seed=0)).step_time
    assert step == pytest.approx(sim.time(g, c, brute_force(g, c)).step_time)
    assert placer.last_status == "optimal" and placer.last_model_step_time_s > 1.4 * step


_ONE_WORKER_SOLVE = """
import sys
from ortools.sat.python import cp_model

real = cp_model.CpSolver.solve


def solve(self, *args, **kwargs):
    print("solving", flush=True)
    return real(self, *args, **kwargs)


cp_model.CpSolver.solve = solve
from gnplace.cluster import load_cluster
from gnplace.graph_io import load_graph
from gnplace.placers.exact import ExactPlacer

graph = load_graph(sys.argv[1])  # 17 groups on k80x4: about 11 s of one worker's search to prove it optimal
placer = ExactPlacer(num_workers=1, time_limit=60.0)
try:
    placer.place(graph, load_cluster("k80x4"), seed=0)
except KeyboardInterrupt:
    sys.exit(130)  # as the CLI does: Python then ends, where a solver thread still running aborted the process
print("returned", placer.last_status, flush=True)
"""


def _interruptible() -> None:
    """A child's Ctrl-C as a terminal gives it: a test suite run in the background (``make test &``, ``nohup``) starts
    its processes with SIGINT ignored, which a Python child keeps, so no KeyboardInterrupt ever came."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_a_one_worker_solve_interrupts_the_placer():
    """CP-SAT's own SIGINT handler stopped the search and the placer returned as if its time had run out:
    ``gnplace place -p exact`` on one worker exited 0 on Ctrl-C (and a solve left running at exit aborted, -6)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", _ONE_WORKER_SOLVE, str(root / "datasets/examples/mlp2x8w2048b512.gnpg")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=root,
                            preexec_fn=_interruptible)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "solving"
        time.sleep(0.5)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "returned" not in out, (proc.returncode, out, err[-2000:])
    assert time.monotonic() - started < 10  # the search stops at once, not at its limit


_TWO_WORKER_SOLVE = """
import sys
import gnplace.placers._exact_model as exact_model
from gnplace.cluster import load_cluster
from gnplace.graph_io import load_graph
from gnplace.placers.exact import ExactPlacer

if sys.argv[2] == "apart":
    exact_model._can_fork = lambda: False  # a fresh interpreter's solve, as where fork is not used
graph = load_graph(sys.argv[1])  # 17 groups on k80x4: a minute of the two workers' search at this limit
placer = ExactPlacer(num_workers=2, time_limit=60.0)
try:
    placer.place(graph, load_cluster("k80x4"), seed=0)
except KeyboardInterrupt:
    sys.exit(130)
print("returned", placer.last_status, flush=True)
"""


def _start_two_worker_solve(how: str) -> tuple[object, int]:
    """``_TWO_WORKER_SOLVE`` in a process, once its solver's child runs (``how``: ``"fork"`` or ``"apart"``).

    Returns:
        tuple: the ``subprocess.Popen`` and the child's process id.
    """
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", _TWO_WORKER_SOLVE, str(root / "datasets/examples/mlp2x8w2048b512.gnpg"),
                             how], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=root,
                            preexec_fn=_interruptible)
    children: list[int] = []
    deadline = time.monotonic() + 60
    while not children and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        children = [int(c) for c in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
    if not children:
        proc.kill()
        raise AssertionError(f"no solver process started: {proc.communicate()[1][-2000:]}")
    time.sleep(2.0)  # solving (a fresh interpreter imports for about a second first)
    return proc, children[0]


@pytest.mark.parametrize("how", ["fork", "apart"])
def test_ctrl_c_to_the_placers_process_alone_stops_the_two_worker_solve(how, process_alive):
    """A SIGINT to the process alone (``kill -INT PID``, where Ctrl-C signals the whole process group) raised in the
    placer, but leaving the pool waited for the solver's child to reach its limit: exit 130 after 56 s."""
    import os
    import signal
    import time

    proc, child = _start_two_worker_solve(how)
    try:
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=90)
        took = time.monotonic() - started
    finally:
        proc.kill()
        out, err = proc.communicate()
        if process_alive(child):
            os.kill(child, signal.SIGKILL)
    assert proc.returncode == 130 and "returned" not in out, (proc.returncode, out, err[-2000:])
    assert took < 5 and not process_alive(child, within=2)


def test_a_fresh_interpreters_solve_ends_when_its_parent_is_killed(process_alive):
    """The child that solves apart from a process that cannot fork watches its parent as the forked one does."""
    import os
    import signal

    proc, child = _start_two_worker_solve("apart")
    try:
        proc.kill()  # SIGKILL: no handler, nothing is cleaned up
        proc.communicate(timeout=30)
        assert not process_alive(child, within=5), "the solver outlived its parent"
    finally:
        if process_alive(child):
            os.kill(child, signal.SIGKILL)


_WITHOUT_FORK = """
import multiprocessing
import sys
import warnings

import numpy as np

multiprocessing.get_all_start_methods = lambda: ["spawn", "forkserver"]  # as on Windows
multiprocessing.set_start_method("spawn")  # and no `if __name__ == "__main__":` guard below
from gnplace.placers.exact import ExactPlacer
from gnplace.placers.round_robin import RoundRobinPlacer
from gnplace.sim.simulator import Simulator
from gnplace.toy import layered_graph, toy_cluster

graph = layered_graph(10, width=1, seed=38682)  # the last case of test_models_that_aborted_the_solver_are_solved
graph = graph.replace(group=np.minimum(np.arange(10) // 3, 11))
roomy = toy_cluster(4)
peak = Simulator().time(graph, roomy, RoundRobinPlacer().place(graph, roomy)).peak_memory.max()
cluster = toy_cluster(4, memory=float(peak) * 1.0694542939570237, name="tight")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    placement = ExactPlacer(time_limit=0.2, num_workers=2).place(graph, cluster, seed=7)
print("placed", placement.devices.tolist(), *[str(w.message) for w in caught], flush=True)
"""


def test_where_fork_is_no_start_method_a_model_that_aborts_cp_sat_does_not_end_the_caller():
    """Without ``fork`` the two workers searched in the caller's process: OR-Tools' abort ended it (exit -6,
    ``Fatal Python error: Aborted``), from a script without a ``__main__`` guard under spawn too."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", _WITHOUT_FORK], capture_output=True, text=True, env=env, cwd=root,
                            timeout=300)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.startswith("placed [") and "parallel search aborted" in result.stdout


def test_a_descent_takes_only_strictly_better_moves():
    """From ``[0, 0]`` (2 s) the single moves give 2 s and 3 s: none better, the descent stops there, though a step
    sideways to ``[1, 0]`` would lead on to ``[1, 1]`` (1 s)."""
    from gnplace.placers.exact import _descend
    from gnplace.sim.timer import BatchResult, StepTimer

    seconds = {(0, 0): 2.0, (1, 0): 2.0, (0, 1): 3.0, (1, 1): 1.0}

    class Listed(StepTimer):
        def time_batch(self, graph, cluster, placements):
            rows = np.asarray(placements)
            zeros = np.zeros((rows.shape[0], cluster.num_devices))
            return BatchResult(np.array([seconds[tuple(r)] for r in rows.tolist()]), zeros, zeros.copy(),
                               np.zeros(rows.shape[0], dtype=bool))

        def time(self, graph, cluster, placement, *, timeline=False):
            raise AssertionError("the descent times batches")

    g, c = chain_graph(2), toy_cluster(2)
    assert _descend(g, c, np.array([[0, 0]]), Listed()).group_devices(g).tolist() == [0, 0]
