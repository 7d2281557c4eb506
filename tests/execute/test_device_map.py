import numpy as np
import pytest
import torch

from gnplace.cluster import cluster_from_dict, load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.execute.device_map import accelerate_device_map, device_map_values, from_device_map, to_device_map
from gnplace.importers.torch import from_module
from gnplace.placement import Placement


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(4)])


def _graph(net):
    return from_module(net, (torch.randn(4, 16),), loss=lambda y: y.sum())


def test_device_map_round_trips_a_module_level_placement():
    net = _net()
    graph = _graph(net)
    cluster = load_cluster("k80x2")
    wanted = {"0": 0, "1": 0, "2": 1, "3": 1}
    placement = from_device_map(graph, cluster, wanted)
    assert to_device_map(graph, placement) == wanted
    assert to_device_map(graph, Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster)) == {"": 0}
    with pytest.raises(InvalidArgument, match="no device"):
        from_device_map(graph, cluster, {"": 5})


def test_exported_map_dispatches_with_accelerate_on_cpu_devices():
    from accelerate import dispatch_model

    net = _net()
    graph = _graph(net)
    cpus = cluster_from_dict({"name": "cpus", "devices": [{"name": "cpu", "count": 2, "kind": "cpu"}],
                              "links": {"default": "pcie3"}})
    assert device_map_values(cpus) == ["cpu", "cpu"]
    placement = Placement((graph.group % 2).astype(np.int64), cpus)
    device_map = to_device_map(graph, placement)
    x = torch.randn(4, 16)
    with torch.no_grad():
        want = net(x)
        dispatched = dispatch_model(net, device_map=device_map)
        torch.testing.assert_close(dispatched(x), want)


def test_accelerate_maps_are_valid_placements():
    net = _net()
    graph = _graph(net)
    cluster = load_cluster("k80x4")
    for mode in ("auto", "balanced"):
        found = accelerate_device_map(net, cluster, mode)
        placement = from_device_map(graph, cluster, found)
        assert placement.devices.shape == (graph.num_ops,)
    with pytest.raises(InvalidArgument, match="mode"):
        accelerate_device_map(net, cluster, "sequential")
