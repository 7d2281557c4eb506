"""Lower bounds on step time."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.graph import OpGraph
from gnplace.sim import Simulator, lower_bound
from gnplace.sim.bounds import critical_path, work_bound
from gnplace.toy import layered_graph


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


def test_the_bound_never_exceeds_a_step_by_rounding():
    """The work bound's float sum rounded up past the simulator's: 1 + 7 ulps against a step of 1.0 on one device."""
    from gnplace.toy import toy_cluster

    n = 16
    seconds = [1.0] + [1e-16] * (n - 1)  # one device adds them in order: 1.0 + 1e-16 == 1.0, every time
    g = OpGraph([f"n{i}" for i in range(n)], [(i, i + 1) for i in range(n - 1)], cost_s={"k80": seconds})
    for devices in (1, 2):
        c, sim = toy_cluster(devices), Simulator()
        step = sim.time(g, c, [0] * n).step_time
        bound = lower_bound(g, c, times=sim.cost_model.op_times(g, c))
        assert step == 1.0 and bound.value <= step
        assert bound.value == pytest.approx(1.0, rel=1e-12)
