"""Tests of the ``single`` placer: everything on the fastest device that holds the graph."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import cluster_from_dict, load_cluster
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.placers.single import SinglePlacer
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, fork_graph, mlp_training_graph

GiB = 2**30


def two_speeds():
    """``slow`` (1 TFLOP/s, 16 GiB) first, then ``fast`` (10 TFLOP/s, 1 GiB)."""
    return cluster_from_dict(
        {
            "name": "two_speeds",
            "devices": [
                {"name": "slow", "kind": "slow", "peak_flops": 1e12, "mem_bandwidth": 1e11, "memory": 16 * GiB},
                {"name": "fast", "kind": "fast", "peak_flops": 10e12, "mem_bandwidth": 1e12, "memory": 1 * GiB},
            ],
            "links": {"default": "pcie3"},
        }
    )


def heavy_chain(param_bytes: int) -> OpGraph:
    return OpGraph(
        ["a", "b", "c"], [(0, 1), (1, 2)], flops=[1e10] * 3, out_bytes=[1000] * 3,
        param_bytes=[param_bytes, 0, 0], name="heavy",
    )


def test_name_and_repr():
    assert SinglePlacer.name == "single"
    assert repr(SinglePlacer()) == "SinglePlacer()"


def test_all_ops_on_one_device():
    g = mlp_training_graph(layers=3, width=16, batch=8)
    p = SinglePlacer().place(g, load_cluster("k80x4"))
    assert isinstance(p, Placement)
    assert p.devices.shape == (g.num_ops,)
    assert len(set(p.devices.tolist())) == 1
    assert not p.splits_groups(g)


def test_picks_the_gpu_over_the_cpu():
    p = SinglePlacer().place(chain_graph(3), load_cluster("cpu_gpu"))
    assert p.devices.tolist() == [1, 1, 1]


def test_picks_the_fastest_device_when_everything_fits():
    c = two_speeds()
    p = SinglePlacer().place(heavy_chain(0), c)
    assert p.devices.tolist() == [1, 1, 1]
    assert p.cluster is c


def test_picks_the_fastest_device_that_fits():
    p = SinglePlacer().place(heavy_chain(2 * GiB), two_speeds())
    assert p.devices.tolist() == [0, 0, 0]  # fast device has 1 GiB only
    assert not Simulator().time(heavy_chain(2 * GiB), two_speeds(), p).is_oom


def test_falls_back_to_fastest_when_nothing_fits():
    g = heavy_chain(64 * GiB)
    c = two_speeds()
    p = SinglePlacer().place(g, c)
    assert p.devices.tolist() == [1, 1, 1]
    assert Simulator().time(g, c, p).is_oom


def test_is_the_best_single_device_by_simulation():
    g, c = fork_graph(), load_cluster("cpu_gpu")
    sim = Simulator()
    times = [sim.time(g, c, [k] * g.num_ops).step_time for k in range(c.num_devices)]
    p = SinglePlacer().place(g, c)
    assert p.devices[0] == int(np.argmin(times))


def test_deterministic_and_seed_unused():
    g, c = mlp_training_graph(layers=2, width=8, batch=4), load_cluster("v100x8")
    runs = [SinglePlacer().place(g, c, seed=s).devices.tolist() for s in (None, 0, 1, 12345)]
    assert all(r == runs[0] for r in runs)


def test_uses_the_given_timer():
    class Recording(Simulator):
        calls = 0

        def time_batch(self, graph, cluster, placements):
            Recording.calls += 1
            return super().time_batch(graph, cluster, placements)

    sim = Recording()
    placer = SinglePlacer(timer=sim)
    assert placer.timer is sim
    placer.place(chain_graph(3), load_cluster("k80x2"))
    assert Recording.calls == 1


def test_placeto_mode_timer_also_works():
    p = SinglePlacer(Simulator("placeto")).place(chain_graph(3), load_cluster("cpu_gpu"))
    assert p.devices.tolist() == [1, 1, 1]


@pytest.mark.parametrize("preset", ["k80x2", "k80x4", "tight4", "v100x8"])
def test_identical_devices_choose_the_first(preset):
    # equal scores: argmin takes the lowest index, a stable choice
    assert SinglePlacer().place(chain_graph(4), load_cluster(preset)).devices.tolist() == [0, 0, 0, 0]


def test_a_placement_of_one_graph_is_refused_for_another_of_as_many_ops():
    torch = pytest.importorskip("torch")
    import gnplace
    from gnplace.exceptions import InvalidPlacement
    from gnplace.importers.torch import import_step

    def loss(y):
        return y.square().mean()

    x, cluster = torch.randn(8, 4), load_cluster("k80x2")
    tanh_net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    relu_net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    graph_a, graph_b = import_step(tanh_net, (x,), loss=loss).graph, import_step(relu_net, (x,), loss=loss).graph
    assert graph_a.num_ops == graph_b.num_ops and graph_a.node_names != graph_b.node_names
    placement = SinglePlacer().place(graph_a, cluster)
    placement.check(graph_a)
    with pytest.raises(InvalidPlacement, match="made for") as err:
        placement.check(graph_b)
    assert "\n" not in str(err.value)
    with pytest.raises(InvalidPlacement, match="made for"):
        Simulator().time(graph_b, cluster, placement)
    with pytest.raises(InvalidPlacement, match="made for"):
        gnplace.apply(relu_net, placement, (x,), loss=loss, devices=["cpu", "cpu"])
    gnplace.apply(tanh_net, placement, (x,), loss=loss, devices=["cpu", "cpu"])  # its own graph's module takes it


class _Counting(Simulator):
    """The simulator, remembering the device of each whole-graph candidate it timed."""

    def __init__(self):
        super().__init__()
        self.tried = []

    def time_batch(self, graph, cluster, placements):
        self.tried += [int(row[0]) for row in np.asarray(placements)]
        return super().time_batch(graph, cluster, placements)


def test_the_simulator_times_one_device_of_those_alike_but_for_their_names():
    """4,096 alike devices (the limit of a cluster) took 4,096 simulations of 0.25 s each of a 3,197-op graph."""
    g = mlp_training_graph(layers=3, width=16, batch=8)
    timer = _Counting()
    big = cluster_from_dict({"name": "big", "devices": [{"name": "gpu", "count": 4096, "kind": "k80"}],
                             "links": {"default": "pcie3"}})
    assert SinglePlacer(timer).place(g, big).devices.tolist() == [0] * g.num_ops and timer.tried == [0]
    mixed = cluster_from_dict({"name": "mixed", "devices": [{"name": "a", "count": 2, "kind": "k80"},
                                                            {"name": "v", "kind": "v100"},
                                                            {"name": "b", "count": 2, "kind": "k80"},
                                                            {"name": "c", "kind": "k80", "memory": "1 GiB"}],
                               "links": {"default": "pcie3"}})
    timer = _Counting()
    placed = SinglePlacer(timer).place(g, mixed)
    assert timer.tried == [0, 2, 5]  # a0, v, c: b0 and b1 are a0's equals, a1 too
    everywhere = Simulator().time_batch(g, mixed, np.repeat(np.arange(6)[:, None], g.num_ops, axis=1))
    assert placed.devices[0] == int(np.argmin(np.where(everywhere.oom, np.inf, everywhere.step_time)))


def test_a_timer_other_than_the_simulator_times_every_device():
    """Two GPUs of one kind are two devices to a real timer."""
    class Real:
        def __init__(self):
            self.tried, self.sim = [], Simulator()

        def time_batch(self, graph, cluster, placements):
            self.tried += [int(row[0]) for row in np.asarray(placements)]
            return self.sim.time_batch(graph, cluster, placements)

    timer = Real()
    SinglePlacer(timer).place(chain_graph(3), load_cluster("k80x4"))
    assert timer.tried == [0, 1, 2, 3]
