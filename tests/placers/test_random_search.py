"""Tests of the ``random_search`` placer: the best of ``budget`` scored placements."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.placers.random_search import RandomSearchPlacer
from gnplace.placers.round_robin import RoundRobinPlacer
from gnplace.placers.single import SinglePlacer
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, layered_graph, mlp_training_graph


def test_name_and_repr():
    assert RandomSearchPlacer.name == "random_search"
    assert repr(RandomSearchPlacer()) == "RandomSearchPlacer(budget=1000, batch=64, block_fraction=0.25, start='auto')"
    assert repr(RandomSearchPlacer(budget=7, batch=3, block_fraction=0.0, start=None)) == (
        "RandomSearchPlacer(budget=7, batch=3, block_fraction=0.0, start=None)"
    )


@pytest.mark.parametrize("budget, batch", [(1, 64), (3, 2), (8, 4), (100, 64), (257, 64), (50, 7)])
def test_budget_is_exact_and_batches_bounded(budget, batch, counting_simulator):
    sim = counting_simulator
    g, c = mlp_training_graph(layers=3, width=64, batch=8, branches=2), load_cluster("k80x4")
    p = RandomSearchPlacer(budget=budget, batch=batch, start=None, timer=sim).place(g, c, seed=0)
    assert sim.evaluations == budget
    assert max(sim.batches) <= batch
    assert isinstance(p, Placement) and not p.splits_groups(g)


def test_deterministic_under_seed():
    g, c = layered_graph(40, seed=2), load_cluster("k80x4")
    runs = [RandomSearchPlacer(budget=200).place(g, c, seed=s).devices.tolist() for s in (5, 5, 6)]
    assert runs[0] == runs[1]
    rng_runs = [RandomSearchPlacer(budget=200).place(g, c, seed=np.random.default_rng(9)).devices.tolist()
                for _ in range(2)]
    assert rng_runs[0] == rng_runs[1]


@pytest.mark.parametrize("preset", ["k80x2", "k80x4", "cpu_gpu", "v100x8"])
def test_never_worse_than_single_and_round_robin(preset, step_time):
    g, c = mlp_training_graph(layers=4, width=256, batch=32, branches=2), load_cluster(preset)
    best = step_time(g, c, RandomSearchPlacer(budget=100).place(g, c, seed=1))
    assert best <= step_time(g, c, SinglePlacer().place(g, c)) + 1e-15
    assert best <= step_time(g, c, RoundRobinPlacer().place(g, c)) + 1e-15


def test_search_beats_baselines_on_a_parallel_graph(step_time):
    g, c = layered_graph(60, seed=3), load_cluster("k80x4")
    best = step_time(g, c, RandomSearchPlacer(budget=500).place(g, c, seed=0))
    baseline = min(step_time(g, c, RoundRobinPlacer().place(g, c)), step_time(g, c, SinglePlacer().place(g, c)))
    assert best < 0.8 * baseline


def test_returns_a_feasible_placement_when_memory_is_tight(heavy_groups, small_gpus):
    # 0.6 + 0.3 | 0.6 + 0.3 GiB fits two 1 GiB devices; single device and round robin (0.6 + 0.6) do not
    g, c = heavy_groups([0.6, 0.3, 0.6, 0.3]), small_gpus()
    sim = Simulator()
    assert sim.time(g, c, SinglePlacer().place(g, c)).is_oom
    assert sim.time(g, c, RoundRobinPlacer().place(g, c)).is_oom
    for seed in range(3):
        p = RandomSearchPlacer(budget=20, block_fraction=0.0).place(g, c, seed=seed)
        assert not sim.time(g, c, p).is_oom


def test_least_overflow_when_nothing_fits(heavy_groups, small_gpus):
    g, c = heavy_groups([0.9, 0.9, 0.9]), small_gpus()  # 2.7 GiB on 2 GiB of devices
    p = RandomSearchPlacer(budget=30).place(g, c, seed=0)
    result = Simulator().time(g, c, p)
    assert result.is_oom
    assert len(set(p.devices.tolist())) == 2  # one device holds 0.9 GiB, the other 1.8: least overflow


def test_single_device_cluster_and_empty_graph(one_device_cluster):
    assert RandomSearchPlacer(budget=5).place(chain_graph(4), one_device_cluster, seed=0).devices.tolist() == [0] * 4
    assert RandomSearchPlacer(budget=5).place(OpGraph([], []), load_cluster("k80x2"), seed=0).devices.tolist() == []


@pytest.mark.parametrize("kwargs", [dict(budget=0), dict(budget=10**9 + 1), dict(batch=0), dict(block_fraction=1.5), dict(budget=2.5),
                                    dict(budget=True), dict(batch=8.0), dict(block_fraction=True)])
def test_bad_options(kwargs):
    with pytest.raises(ValueError, match="RandomSearchPlacer"):
        RandomSearchPlacer(**kwargs)


def test_starts_from_auto_and_never_ends_worse(counting_simulator, step_time):
    from gnplace.placers.auto import AutoPlacer

    g, c = mlp_training_graph(layers=4, width=256, batch=32, branches=2), load_cluster("k80x4")
    auto_sim = type(counting_simulator)()
    reference = AutoPlacer(timer=auto_sim).place(g, c, seed=0)
    p = RandomSearchPlacer(budget=30, timer=counting_simulator).place(g, c, seed=0)
    assert counting_simulator.evaluations == 30 + auto_sim.evaluations  # auto's own work is not in the budget
    assert step_time(g, c, p) <= step_time(g, c, reference) + 1e-15


def test_no_progress_reaches_the_search_it_starts_from(bars_asked):
    """``-O random_search.start=annealing --no-progress`` drew annealing's bar: the start kept its own default."""
    import gnplace.placers.annealing as annealing

    shown = bars_asked(annealing)
    g, c = layered_graph(12, seed=0), load_cluster("k80x2")
    RandomSearchPlacer(budget=5, start="annealing", progress=False).place(g, c, seed=0)
    assert shown == [False]


def test_a_block_draw_cuts_the_topological_order_into_runs_on_distinct_devices():
    """With ``block_fraction=1`` every draw is blocks: along the groups in topological order, each device one run."""
    from gnplace.placers.base import group_order

    g = layered_graph(30, seed=1)
    order = group_order(g)
    draws = RandomSearchPlacer(block_fraction=1.0)._draw(order, 4, 20, np.random.default_rng(0))
    for row in draws:
        runs = [int(d) for i, d in enumerate(row[order]) if i == 0 or d != row[order][i - 1]]
        assert len(runs) == len(set(runs)) <= 4, row[order]


def test_the_structured_candidates_end_with_blocks_over_the_fastest_two_to_all_devices():
    """After the baselines (each device, round robin), equal-work blocks over the m fastest devices, m = 2 .. D, the
    first block on the fastest: cpu_gpu's GPU."""
    g = chain_graph(6)
    rows = RandomSearchPlacer(start=None)._structured(g, load_cluster("k80x4"), np.random.default_rng(0))
    assert rows[5:].tolist() == [[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2], [0, 0, 1, 2, 2, 3]]
    rows = RandomSearchPlacer(start=None)._structured(g, load_cluster("cpu_gpu"), np.random.default_rng(0))
    assert rows[3:].tolist() == [[1, 1, 1, 0, 0, 0]]
