import pytest
import torch

from gnplace.exceptions import InvalidArgument, InvalidGraph
from gnplace.execute.optim import OptimizerState, graph_optimizer, optimizer_of, state_bytes
from gnplace.importers.torch import import_step
from gnplace.toy import chain_graph

#: Each optimizer as torch.optim runs it with the defaults the executors take.
TORCH_OPTIMIZERS = {
    "sgd": lambda params, lr: torch.optim.SGD(params, lr=lr),
    "momentum": lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9),
    "adam": lambda params, lr: torch.optim.Adam(params, lr=lr),
    "adamw": lambda params, lr: torch.optim.AdamW(params, lr=lr),
}


@pytest.mark.parametrize("optimizer", list(TORCH_OPTIMIZERS))
def test_each_update_gives_torch_optims_values_over_three_steps(optimizer):
    generator = torch.Generator().manual_seed(0)
    start = torch.randn(5, 3, generator=generator)
    grads = [torch.randn(5, 3, generator=generator) for _ in range(3)]
    ours = start.clone()
    state = OptimizerState(optimizer, {"w": ours})
    theirs = torch.nn.Parameter(start.clone())
    reference = TORCH_OPTIMIZERS[optimizer]([theirs], 0.05)
    for grad in grads:
        state.update("w", ours, grad, 0.05)
        theirs.grad = grad.clone()
        reference.step()
        assert torch.equal(ours, theirs.detach())  # the same operations in the same order: the same bits
    assert state.steps["w"] == 3


def test_state_is_the_optimizers_extra_bytes_made_beside_each_parameter():
    params = {"a": torch.zeros(4, 2), "b": torch.zeros(3)}
    assert [len(OptimizerState(name, params).slots["a"]) for name in ("sgd", "momentum", "adam", "adamw")] == [0, 1, 2, 2]
    slots = OptimizerState("adam", params).slots["b"]
    assert all(s.shape == (3,) and s.device == params["b"].device and not s.any() for s in slots)
    assert [state_bytes(name, 32) for name in ("sgd", "momentum", "adam", "adamw")] == [0, 32, 64, 64]
    with pytest.raises(InvalidArgument, match=r"^unknown optimizer 'lion' \(choose one of: sgd, momentum, adam, adamw\)$"):
        OptimizerState("lion", params)


def test_the_optimizer_is_read_off_the_graphs_update_nodes():
    net, x = torch.nn.Linear(4, 2), torch.randn(8, 4)
    for name in ("sgd", "momentum", "adam", "adamw"):
        assert graph_optimizer(import_step(net, (x,), loss=lambda y: y.sum(), optimizer=name).graph) == name
    assert graph_optimizer(chain_graph(3)) is None  # no update node
    assert optimizer_of(["adam_update", "update", "apply_gradients"]) == "adam"  # what names none is no optimizer
    with pytest.raises(InvalidGraph, match=r"^the graph's update ops name several optimizers \(adam, sgd\)"):
        optimizer_of(["sgd_update", "adam_update"])
