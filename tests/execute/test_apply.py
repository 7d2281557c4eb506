import copy

import numpy as np
import pytest
import torch

import gnplace
from gnplace.cluster import load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.importers.torch import import_step
from gnplace.placement import Placement


def _loss(y):
    return y.square().mean()


def test_placed_module_trains_exactly_like_eager():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    reference = copy.deepcopy(net)
    x = torch.randn(12, 6)
    graph = import_step(net, (x,), loss=_loss).graph
    placement = Placement(np.random.default_rng(0).integers(0, 2, graph.num_ops), load_cluster("k80x2"))
    placed = gnplace.apply(net, placement, (x,), loss=_loss, devices=["cpu", "cpu"])
    ours, theirs = torch.optim.SGD(net.parameters(), lr=0.1), torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        batch = torch.randn(12, 6)
        ours.zero_grad()
        placed(batch).backward()
        ours.step()
        theirs.zero_grad()
        _loss(reference(batch)).backward()
        theirs.step()
    for a, b in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b)


def test_inputs_of_another_shape_are_refused():
    net = torch.nn.Linear(4, 1)
    x = torch.randn(8, 4)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([0] * graph.num_ops, load_cluster("k80x2")), (x,), loss=_loss,
                           devices=["cpu", "cpu"])
    with pytest.raises(InvalidArgument, match="recorded for"):
        placed(torch.randn(3, 4))
    with pytest.raises(InvalidArgument, match="Placement"):
        gnplace.apply(net, [0] * graph.num_ops, (x,), loss=_loss)
