"""Lower bounds on step time."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.graph import OpGraph
from gnplace.sim import Simulator, lower_bound
from gnplace.sim.bounds import critical_path, work_bound
from gnplace.toy import chain_graph, layered_graph


def test_critical_path_takes_each_op_on_its_fastest_device():
    g = OpGraph(["a", "b", "c", "d"], [(0, 1), (0, 2), (1, 3), (2, 3)])
    times = np.array([[1.0, 2.0], [5.0, 3.0], [1.0, 1.0], [2.0, 4.0]])
    assert critical_path(g, times) == pytest.approx(1 + 3 + 2)


def test_work_bound_on_identical_devices_is_total_over_count():
    times = np.repeat(np.array([[1.0], [2.0], [3.0]]), 3, axis=1)
    assert work_bound(times) == pytest.approx(2.0)


def test_work_bound_on_proportional_devices_is_total_over_total_speed():
    # device 1 is three times faster on every op: ideal split finishes at W / (1 + 3) in device-0 units
    base = np.array([4.0, 8.0, 12.0, 16.0])
    times = np.stack([base, base / 3], axis=1)
    assert work_bound(times) == pytest.approx(base.sum() / 4, rel=1e-3)
    assert work_bound(times) <= base.sum() / 4 + 1e-12  # never above the LP optimum


def test_work_bound_is_valid_for_any_assignment():
    rng = np.random.default_rng(0)
    times = rng.uniform(0.1, 1.0, size=(50, 3))
    bound = work_bound(times)
    for _ in range(200):
        choice = rng.integers(0, 3, 50)
        loads = np.bincount(choice, weights=times[np.arange(50), choice], minlength=3)
        assert loads.max() >= bound - 1e-12


@pytest.mark.parametrize("base", [[[1.0, 1.0], [1.0, 1.0]], [[0.9, 0.6], [0.7, 0.8], [0.5, 0.5]]])
def test_work_bound_of_times_whose_sums_pass_the_largest_float_scales_with_them(base):
    """Times near the largest float: their sums overflowed to inf and the ascent ended in an IndexError."""
    base = np.array(base)
    times = base * 1e308
    bound = work_bound(times)
    assert np.isfinite(bound) and bound == pytest.approx(work_bound(base) * 1e308, rel=1e-12)
    with np.errstate(over="ignore"):
        for choice in np.random.default_rng(0).integers(0, 2, (50, base.shape[0])):  # below every busiest device
            assert bound <= np.bincount(choice, weights=times[np.arange(base.shape[0]), choice], minlength=2).max()


def test_lower_bound_is_below_simulated_steps():
    g = layered_graph(400, seed=5)
    c = load_cluster("cpu_gpu")
    sim = Simulator()
    b = lower_bound(g, c, times=sim.cost_model.op_times(g, c))
    steps = sim.time_batch(g, c, np.random.default_rng(1).integers(0, 2, (32, g.num_ops))).step_time
    assert b.value == max(b.critical_path, b.work)
    assert np.all(steps >= b.value)



def test_memory_shortfall_proves_only_what_no_placement_can_fit(tmp_path):
    from gnplace.sim.bounds import memory_shortfall
    from gnplace.toy import mlp_training_graph

    graph = mlp_training_graph(layers=2, width=256, batch=8)
    assert memory_shortfall(graph, load_cluster("k80x2")) is None
    params, largest = float(graph.param_bytes.sum()), float(graph.param_bytes.max())

    def cluster(*memories):
        devices = "".join(f"  - {{name: d{k}, kind: k80, memory: {int(m)}}}\n" for k, m in enumerate(memories))
        (tmp_path / "c.yaml").write_text(f"name: small\ndevices:\n{devices}links: {{default: placeto}}\n")
        return load_cluster(tmp_path / "c.yaml")

    assert "need" in memory_shortfall(graph, cluster(params / 3, params / 3))  # less than all parameters in all
    many = [largest * 0.9] * (int(params // (largest * 0.9)) + 2)  # room for all in all, not for the largest op
    assert "largest device" in memory_shortfall(graph, cluster(*many))
    assert memory_shortfall(graph, cluster(params / 2 + largest, params / 2 + largest)) is None  # may fit


def _cluster_of(tmp_path, *memories):
    """A cluster of K80s with the given memories (bytes), written as YAML and loaded."""
    devices = "".join(f"  - {{name: d{k}, kind: k80, memory: {int(m)}}}\n" for k, m in enumerate(memories))
    (tmp_path / "c.yaml").write_text(f"name: small\ndevices:\n{devices}links: {{default: placeto}}\n")
    return load_cluster(tmp_path / "c.yaml")


def _every_placement_overflows(graph, cluster):
    """Whether both simulators find every placement of the groups of ``graph`` on ``cluster`` out of memory."""
    import itertools

    groups = np.array(list(itertools.product(range(cluster.num_devices), repeat=graph.num_groups)), dtype=np.int64)
    return all(bool(Simulator(mode=mode).time_batch(graph, cluster, groups[:, graph.group]).oom.all())
               for mode in ("default", "placeto"))


def test_memory_shortfall_checks_colocation_groups_not_single_ops(tmp_path):
    """Ops of one group share a device: two ops of 600 B of parameters each do not fit a device of 1000 B.

    Each op alone fits the largest device and all fit the devices in all, so the check of single ops let
    the graph through (and ``gnplace place`` ran every placer into OUT OF MEMORY).
    """
    from gnplace.sim.bounds import memory_shortfall

    g = OpGraph(["w1", "w2", "loss"], [(0, 2), (1, 2)], param_bytes=[600, 600, 0], out_bytes=[4, 4, 4],
                group=[0, 0, 1], name="tied")
    c = _cluster_of(tmp_path, 1000, 1000)
    reason = memory_shortfall(g, c)
    assert reason == ("colocation group 0 (op 'w1' and 1 other op, placed together) holds 1.17 KiB of parameters "
                      "and optimizer state, and the largest device of 'small' holds 1000 B")
    assert _every_placement_overflows(g, c)
    # the parameters of a group are what it is refused for, not its activations: that needs a simulation
    assert memory_shortfall(g, _cluster_of(tmp_path, 1000, 1200)) is None
    assert memory_shortfall(g, _cluster_of(tmp_path, 1000, 1208)) is None
    assert not _every_placement_overflows(g, _cluster_of(tmp_path, 1000, 1208))  # 1200 B of parameters, 8 B of outputs
    three = OpGraph(["a", "b", "c"], [], param_bytes=[400, 400, 400], group=[0, 0, 0], name="three")
    assert "(op 'a' and 2 other ops, placed together) holds 1.17 KiB" in memory_shortfall(three, c)


def test_memory_shortfall_never_refuses_what_a_placement_fits(tmp_path):
    """On random small graphs and clusters: whatever it refuses, every placement overflows in the simulator."""
    from gnplace.sim.bounds import memory_shortfall

    outcomes = []
    for seed in range(12):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(3, 9))
        edges = [(int(u), v) for v in range(1, n) for u in rng.choice(v, size=min(v, int(rng.integers(1, 3))),
                                                                      replace=False)]
        out = rng.integers(0, 400, n)
        flops = rng.uniform(1e6, 1e8, n) * (rng.random(n) < 0.7)  # ops of no FLOP take no time in Placeto's mode
        g = OpGraph([f"v{i}" for i in range(n)], edges, flops=flops.tolist(),
                    param_bytes=rng.integers(0, 600, n) * (rng.random(n) < 0.5), out_bytes=out,
                    edge_bytes=[int(rng.integers(0, out[u] + 1)) for u, _ in edges], group=rng.integers(0, 3, n))
        for _ in range(8):
            c = _cluster_of(tmp_path, *rng.integers(200, 1500, int(rng.integers(1, 4))))
            refused = memory_shortfall(g, c) is not None
            outcomes.append(refused)
            if refused:
                assert _every_placement_overflows(g, c), (seed, c.memory)
    assert 10 < sum(outcomes) < len(outcomes) - 10  # both kinds of cluster came up, or the test proves little


@pytest.mark.parametrize("shape", [(3, 2), (2000, 3), (2000,), (2001, 2), (2000, 0)])
def test_op_times_of_the_wrong_shape_are_one_error(shape):
    """The compiled longest path read past a ``[3, 2]`` array for a 2,000-op chain: a bound of 3e262 s."""
    from gnplace.exceptions import InvalidArgument
    from gnplace.toy import chain_graph

    g, c = chain_graph(2000), load_cluster("k80x2")
    with pytest.raises(InvalidArgument, match=r"^op times must have shape \[num_ops, num_devices\] = \[2000, 2\], got "):
        lower_bound(g, c, times=np.ones(shape))
    if len(shape) == 2 and shape[0] == 2000 and shape[1] > 0:
        assert critical_path(g, np.ones(shape)) == 2000.0  # any number of devices will do for the path alone
    else:
        with pytest.raises(InvalidArgument, match=r"= \[2000, num_devices\], got "):
            critical_path(g, np.ones(shape))


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])  # inf: an IndexError in the work bound
def test_negative_nan_or_infinite_op_times_are_one_error(value):
    from gnplace.exceptions import InvalidArgument

    g = OpGraph(["a", "b"], [(0, 1)])
    times = np.ones((2, 2))
    times[1, 0] = value
    with pytest.raises(InvalidArgument, match=r"^op times must be finite seconds >= 0, got \[.*, 1.0\] for op 'b'$"):
        lower_bound(g, load_cluster("k80x2"), times=times)


@pytest.mark.parametrize("times", [np.array([[np.nan, 1.0]]), np.array([1.0, 2.0]), np.array([[-1.0, 2.0]]),
                                   np.array([[np.inf, np.inf]])])
def test_work_bound_refuses_times_that_are_not_finite_seconds(times):
    """Called directly it gave an IndexError, a tuple IndexError or a negative bound."""
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match="op times must"):
        work_bound(times)


@pytest.mark.parametrize("times", ["x", [[1.0, 2.0], [3.0]], [[1.0, "a"]]])
def test_bounds_refuse_times_that_hold_no_numbers(times):
    """Text or ragged rows were numpy's ValueError , where InvalidArgument is promised."""
    from gnplace.exceptions import InvalidArgument

    g = OpGraph(["a", "b"], [(0, 1)])
    with pytest.raises(InvalidArgument, match=r"^op times must be a \[num_ops, num_devices\] array of seconds, got "):
        lower_bound(g, load_cluster("k80x2"), times=times)
    with pytest.raises(InvalidArgument, match="^op times must be a "):
        critical_path(g, times)
    with pytest.raises(InvalidArgument, match="^op times must be a "):
        work_bound(times)


def test_memory_bounds_refuse_what_is_no_graph_or_cluster():
    """``memory_shortfall``, ``require_memory`` and ``never_fits`` given a preset's name were AttributeErrors."""
    from gnplace.exceptions import InvalidArgument
    from gnplace.sim.bounds import memory_shortfall, never_fits, require_memory

    g, c = layered_graph(10, seed=0), load_cluster("k80x2")
    for check in (memory_shortfall, require_memory, never_fits):
        with pytest.raises(InvalidArgument, match="cluster must be a Cluster"):
            check(g, "k80x2")
        with pytest.raises(InvalidArgument, match="graph must be an OpGraph"):
            check("g.gnpg", c)


def test_lower_bound_refuses_what_is_no_graph_or_cluster():
    """``lower_bound(g, "k80x2")`` (the README's Quick Start, a preset's name for the cluster) was an AttributeError."""
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match="cluster must be a Cluster"):
        lower_bound(layered_graph(10, seed=0), "k80x2")
    with pytest.raises(InvalidArgument, match="graph must be an OpGraph"):
        lower_bound("g.gnpg", load_cluster("k80x2"))


def test_work_bound_reaches_the_lp_optimum_on_unrelated_devices():
    """Two ops fast on device 0, one on device 1: the LP moves 1/11 of an op to device 1, T = 21/11.

    Neither candidate weighting (uniform, 0.818; by speed, 1.636) is optimal here: the ascent has to get there.
    """
    times = np.array([[1.0, 10.0], [1.0, 10.0], [10.0, 1.0]])
    assert work_bound(times) == pytest.approx(21 / 11, rel=1e-3)
    assert work_bound(times) <= 21 / 11


def test_work_bound_on_proportional_devices_is_exact():
    """Weights proportional to speed are the LP optimum on proportional devices: W / (1 + 2 + 5) to the ulp.

    The ascent alone, from uniform weights, ends 0.2 % short on these 50 ops.
    """
    base = np.random.default_rng(0).uniform(1.0, 2.0, 50)
    times = np.stack([base, base / 2, base / 5], axis=1)
    assert work_bound(times) == pytest.approx(base.sum() / 8, rel=1e-12)
    assert work_bound(times, iterations=0) == pytest.approx(base.sum() / 8, rel=1e-12)


def test_work_bound_stays_below_a_sequential_sum_of_the_same_times():
    """numpy's pairwise sum of 1 and fifteen 1e-16 is 1 + 7 ulps, a device's running sum 1.0: the bound steps below."""
    times = np.array([[1.0]] + [[1e-16]] * 15)
    assert work_bound(times) <= sum(times[:, 0].tolist()) == 1.0


def test_parameters_that_fill_the_memory_exactly_fit(tmp_path):
    """Memory overflows only above capacity: parameters equal to all the devices' memory are not refused."""
    from gnplace.sim.bounds import memory_shortfall

    g = OpGraph(["w1", "w2"], [], param_bytes=[500, 500], out_bytes=[0, 0], name="exact")
    c = _cluster_of(tmp_path, 500, 500)
    assert memory_shortfall(g, c) is None
    assert not _every_placement_overflows(g, c)


def test_the_work_bound_makes_no_temporary_the_size_of_its_times():
    import tracemalloc

    times = np.random.default_rng(0).random((20_000, 1024))  # 164 MB; [100,000, 4,096] is 3.3 GB
    expected = float((times * np.full(1024, 1 / 1024)).min(axis=1).sum())  # the uniform weights' value
    tracemalloc.start()
    try:
        bound = work_bound(times, iterations=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < times.nbytes / 2
    assert expected * 0.999 < bound


def _repeated_columns(seed: int) -> np.ndarray:
    """Op times of a few device kinds repeated over up to 64 devices, in any order, with ties, zeros and subnormals."""
    rng = np.random.default_rng(seed)
    values = np.array([0.0, -0.0, 1e-3, 2e-3, 0.1, 0.3, 1.0, 3.0, 1e-300, 5e-324])
    kinds = rng.choice(values, size=(int(rng.integers(1, 60)), int(rng.integers(1, 4))))
    if seed % 2:
        kinds = rng.random(kinds.shape)
    return kinds[:, rng.integers(0, kinds.shape[1], size=int(rng.integers(8, 65)))]


def test_the_work_bound_reads_identical_devices_once_a_class(monkeypatch):
    from gnplace.sim import bounds

    times = np.random.default_rng(0).uniform(1e-4, 1e-2, size=(300, 2))[:, [0, 1, 1, 0] * 64]  # 256 devices, 2 kinds
    plain = work_bound(times)  # what the plain path gives: below, _cheapest reads the whole matrix each iteration

    def whole_matrix(times: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise AssertionError("read every device's column")

    monkeypatch.setattr(bounds, "_cheapest", whole_matrix)
    assert work_bound(times).hex() == plain.hex()


@pytest.mark.parametrize("seed", range(40))
def test_the_cheapest_device_by_class_is_argmins_bit_for_bit(seed, monkeypatch):
    from gnplace.sim import bounds
    from gnplace.sim.bounds import _cheapest, _cheapest_by_class, _device_classes

    monkeypatch.setattr(bounds, "_CLASS_FACTOR", 1)  # classes however few devices share one
    monkeypatch.setattr(bounds, "_CLASS_MIN_DEVICES", 1)
    times = _repeated_columns(seed)
    classes = _device_classes(times, times.sum(axis=0))
    assert classes is not None
    first, label = classes
    assert (times.view(np.uint64) == times[:, first[label]].view(np.uint64)).all()
    rng = np.random.default_rng(seed)
    weights = np.array([0.0, -0.0, 1e-300, 1e-17, 0.25, 1 / 3, 0.5, 0.5 + 2**-53])
    for lam in (rng.random(times.shape[1]), rng.choice(weights, size=times.shape[1])):
        choice, least = _cheapest(times, lam)
        by_class, by_class_least = _cheapest_by_class(np.ascontiguousarray(times[:, first]), label, lam)
        assert np.array_equal(by_class, choice)
        assert by_class_least.tobytes() == least.tobytes()


def test_devices_that_differ_anywhere_are_not_one_class(monkeypatch):
    from gnplace.sim import bounds
    from gnplace.sim.bounds import _device_classes

    monkeypatch.setattr(bounds, "_CLASS_MIN_DEVICES", 1)
    monkeypatch.setattr(bounds, "_CLASS_FACTOR", 1)
    times = np.ones((1000, 16))
    times[500, 3] = 2.0  # the same sum as no other column, and rows 0, 500 and 999 tell it
    classes = _device_classes(times, times.sum(axis=0))
    assert classes is not None and list(classes[1]) == [0, 0, 0, 1] + [0] * 12
    times[400, 5], times[401, 5] = 0.5, 1.5  # the same sum and sampled rows as the others: found by the check
    assert _device_classes(times, times.sum(axis=0)) is None


def test_the_bound_of_measured_times_that_span_the_float_range_is_valid():
    """A graph's measured times of 4e18 s and 1e-310 s (both accepted) made a step of 1e279 and an IndexError."""
    g = OpGraph(["a", "b"], [], cost_s={"cpu": [1.0, 4e18], "p100": [1e-310, 3.0]})
    bound = lower_bound(g, load_cluster("cpu_gpu"))
    assert 2.99 < bound.work <= 3.0 == bound.critical_path  # a on the p100, b on the cpu: 3 s


@pytest.mark.parametrize("times", [[[1e-310, 0.0], [0.0, 5e-324], [0.0, 1.0], [1e-300, 1e-20]],
                                   [[1.0, 1e-310, 1e-300], [4e18, 3.0, 4e18]],
                                   [[3.0, 1e-300, 1.7e308], [1e-300, 1e300, 2.2e-308], [1e308, 5e-324, 1.0]]])
def test_the_work_bound_of_denormal_and_huge_times_is_below_every_assignment(times):
    """Each was an IndexError (weights past 2**53 lost the simplex's 1 in rounding)."""
    import itertools
    import math

    times = np.array(times)
    n, d = times.shape
    bound = work_bound(times)
    for choice in itertools.product(range(d), repeat=n):
        loads = [math.fsum(times[v, k] for v in range(n) if choice[v] == k) for k in range(d)]
        assert bound <= max(loads)


def test_weights_past_two_to_the_53_project_onto_the_simplex():
    """``[2**53 + 2, 0]`` projected to ``[2, 0]``, weights summing to 2: a bound twice too high."""
    from gnplace.sim.bounds import _project_simplex

    for x in ([2.0**53 + 2, 0.0], [1e279, 1.0], [np.inf, 1.0, np.inf], [1.7e308, 1.7e308, 0.0]):
        lam = _project_simplex(np.array(x))
        assert (lam >= 0).all() and lam.sum() == pytest.approx(1.0, abs=1e-15)


def _training_like_graph(rng: np.random.Generator) -> OpGraph:
    """A random DAG of forward ops, a backward pass reading forward outputs, and updates; some ops of no FLOP."""
    n = int(rng.integers(4, 12))
    edges = sorted({(int(u), v) for v in range(1, n) for u in rng.choice(v, size=min(v, int(rng.integers(1, 3))),
                                                                        replace=False)})
    phase = np.zeros(n, dtype=np.int64)
    phase[int(rng.integers(1, n - 1)):] = 1
    phase[n - 1] = 2 if rng.random() < 0.5 else 1
    out = rng.integers(0, 400, n)
    flops = rng.uniform(1e6, 1e8, n) * (rng.random(n) < 0.7)  # ops of no FLOP take no time in Placeto's mode
    return OpGraph([f"v{i}" for i in range(n)], edges, flops=flops.tolist(), phase=phase.tolist(),
                   param_bytes=rng.integers(0, 300, n) * (rng.random(n) < 0.4), out_bytes=out,
                   edge_bytes=[int(rng.integers(0, out[u] + 1)) for u, _ in edges], group=rng.integers(0, 3, n))


@pytest.mark.parametrize("mode", ["default", "placeto"])
def test_the_live_memory_floor_is_below_every_placements_summed_peaks(mode):
    """Whatever the placement and schedule, the devices' peaks add up to the floor at least (both simulators)."""
    from gnplace.sim.bounds import live_memory_floor

    sim, c = Simulator(mode=mode), load_cluster("k80x4")
    above = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        g = _training_like_graph(rng)
        floor = live_memory_floor(g, sim.cost_model.op_time_columns(g, c)[0])
        placements = rng.integers(0, c.num_devices, (64, g.num_ops))
        placements[0] = 0
        summed = sim.time_batch(g, c, placements).peak_memory.sum(axis=1)
        assert np.all(summed >= floor), (seed, floor, summed.min())
        above += floor > g.total_param_bytes
    assert above > 10  # the floor counts activations on most graphs, or the test proves little


def test_the_live_memory_floor_counts_the_forward_outputs_the_backward_pass_reads():
    from gnplace.sim.bounds import live_memory_floor
    from gnplace.toy import mlp_training_graph

    g, c = mlp_training_graph(layers=4, width=256, batch=64), load_cluster("k80x4")
    floor = live_memory_floor(g, Simulator().cost_model.op_time_columns(g, c)[0])
    peak = float(Simulator().time(g, c, np.zeros(g.num_ops, dtype=np.int64)).peak_memory.max())
    assert g.total_param_bytes < floor <= peak
    assert floor > g.total_param_bytes + 0.5 * (peak - g.total_param_bytes)


def test_never_fits_proves_activations_that_no_cluster_of_that_memory_holds(tmp_path):
    """Parameters fit, the forward outputs the backward pass reads do not: no placement fits, and it says so."""
    from gnplace.sim.bounds import live_memory_floor, memory_shortfall, never_fits
    from gnplace.toy import mlp_training_graph

    g = mlp_training_graph(layers=2, width=64, batch=4096)
    small = _cluster_of(tmp_path, *[g.total_param_bytes] * 2)
    floor = live_memory_floor(g, Simulator().cost_model.op_time_columns(g, small)[0])
    tight = _cluster_of(tmp_path, *[0.45 * floor] * 2)
    assert memory_shortfall(g, tight) is None and never_fits(g, tight)
    assert _every_placement_overflows(g, tight)
    one = float(Simulator().time(g, small, np.zeros(g.num_ops, dtype=np.int64)).peak_memory.max())
    assert not never_fits(g, _cluster_of(tmp_path, one, one))  # one device holds it all


def _two_first_backward_ops(scale: int = 1) -> OpGraph:
    """a -> x (backward) and a -> b -> y (backward), y -> z (backward): x and y start the backward pass.

    In topological order (ties by index) a, x, b, y, z. When x starts, a's output (100 x ``scale`` bytes, read by x)
    is live; when y starts, b's (1,000 x ``scale``, read by y) is, a's no longer needed by y or z.
    """
    s = scale
    return OpGraph(["a", "x", "b", "y", "z"], [(0, 1), (0, 2), (2, 3), (3, 4)], phase=[0, 1, 0, 1, 1],
                   out_bytes=[100 * s, 1, 1000 * s, 2, 1], edge_bytes=[100 * s, 100 * s, 1000 * s, 2],
                   param_bytes=[7, 0, 0, 0, 0])


def test_the_live_memory_floor_is_taken_at_the_first_backward_ops_latest_first():
    """A candidate is a backward op that follows no backward op (not z), the latest in topological order first (y,
    then x), and one of positive seconds on every kind of device: each was untested (mutants that took every
    backward op, the earliest first, or ops of 0 s passed)."""
    from gnplace.sim.bounds import live_memory_floor

    g = _two_first_backward_ops()
    ones = np.ones((g.num_ops, 2))
    at_x, at_y = 7 + 1 + 100, 7 + 2 + 1000  # parameters, the op's output, what its ancestors hold for it
    assert live_memory_floor(g, ones) == at_y
    assert live_memory_floor(g, ones, candidates=1) == at_y  # y, not x (earliest) nor z (follows y)
    assert live_memory_floor(g, ones, candidates=2) == max(at_x, at_y)
    no_y = ones.copy()
    no_y[3, 1] = 0.0  # y takes 0 s on the second kind: what it reads may be freed as it starts
    assert live_memory_floor(g, no_y) == at_x
    assert live_memory_floor(g, np.zeros((g.num_ops, 1))) == 7  # no candidate: the parameters alone


def test_never_fits_claims_nothing_within_its_rounding_margin(tmp_path):
    """``never_fits`` proves a floor past the memory by more than its margin for float sums (1e-6 of the floor plus
    twice the outputs), not one a byte past it (a mutant without the margin passed)."""
    from gnplace.sim.bounds import live_memory_floor, never_fits

    g = _two_first_backward_ops(scale=10**6)
    floor = live_memory_floor(g, Simulator().cost_model.op_time_columns(g, load_cluster("k80x2"))[0])
    assert floor == 7 + 2 + 1000 * 10**6
    slack = 1e-6 * (floor + 2.0 * float(g.out_bytes.sum()))  # 3,200 bytes
    assert not never_fits(g, _cluster_of(tmp_path, floor - 1))
    assert not never_fits(g, _cluster_of(tmp_path, floor - slack + 1))
    assert never_fits(g, _cluster_of(tmp_path, floor - slack - 1))


def test_op_times_of_zero_seconds_are_bounded_not_refused():
    """Times must be >= 0, so an op of 0 s is valid: a -> b of 0 s and (1 s, 2 s) has a critical path of 1 s, and a
    work bound of 2/3 s (b split 2/3 on the 1 s device, 1/3 on the 2 s one)."""
    times = np.array([[0.0, 0.0], [1.0, 2.0]])
    bound = lower_bound(chain_graph(2), load_cluster("k80x2"), times=times)
    assert bound.critical_path == 1.0
    assert bound.work == pytest.approx(2 / 3, rel=1e-6) and bound.work <= 2 / 3


def test_never_fits_claims_nothing_at_exactly_its_rounding_margin(tmp_path):
    """A floor past the memory by exactly the margin is not proof, one byte more is.

    a (100,000,000 bytes of parameters, a 300,000,000-byte output) -> y, the backward pass (an empty output): the
    floor at y is 400,000,000 bytes, the margin 1e-6 x (400,000,000 + 2 x 300,000,000) = 1,000 bytes.
    """
    from gnplace.sim.bounds import live_memory_floor, memory_shortfall, never_fits

    g = OpGraph(["a", "y"], [(0, 1)], phase=[0, 1], out_bytes=[300_000_000, 0], edge_bytes=[300_000_000],
                param_bytes=[100_000_000, 0])
    assert live_memory_floor(g, Simulator().cost_model.op_time_columns(g, load_cluster("k80x2"))[0]) == 400_000_000
    at_margin = _cluster_of(tmp_path, 400_000_000 - 1_000)
    assert memory_shortfall(g, at_margin) is None and not never_fits(g, at_margin)
    assert never_fits(g, _cluster_of(tmp_path, 400_000_000 - 1_001))


def test_work_bound_refuses_ops_without_a_device_as_the_critical_path_does():
    """Three ops timed on no device (``[3, 0]``) had a work bound of 0 s, where critical_path refused them; no op at
    all is still 0 s."""
    from gnplace.exceptions import InvalidArgument

    times = np.zeros((3, 0))
    with pytest.raises(InvalidArgument, match=r"^op times must have shape \[num_ops, num_devices\] = \[3, num_devices\], "
                                              r"got \[3, 0\]$"):
        critical_path(chain_graph(3), times)
    with pytest.raises(InvalidArgument, match=r"^op times must have shape \[num_ops, num_devices\] with num_devices >= 1 "
                                              r"for ops, got \[3, 0\]$"):
        work_bound(times)
    assert work_bound(np.zeros((0, 2))) == 0.0 and work_bound(np.zeros((0, 0))) == 0.0
