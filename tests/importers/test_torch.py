"""Training graphs from PyTorch modules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from gnplace.exceptions import UnsupportedGraph
from gnplace.graph import BACKWARD, FORWARD, UPDATE
from gnplace.importers.flops import VIEW_OPS
from gnplace.importers.torch import OPTIMIZERS, from_module


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 8 * 8, 10)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn(self.conv1(x)))
        h = torch.relu(self.conv2(h))
        return nn.functional.cross_entropy(self.fc(h.flatten(1)), y)


def cnn_case() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return SmallCNN(), (torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,)))


def forward_backward_flops(g) -> tuple[float, float]:
    return float(g.flops[g.phase == FORWARD].sum()), float(g.flops[g.phase == BACKWARD].sum())


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_one_update_per_parameter_holding_its_state(optimizer):
    model, inputs = cnn_case()
    g = from_module(model, inputs, optimizer=optimizer)
    updates = [g.node_names[i] for i in np.flatnonzero(g.phase == UPDATE)]
    assert sorted(updates) == sorted(f"update/{k}" for k, _ in model.named_parameters())
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    assert int(g.param_bytes.sum()) == total * OPTIMIZERS[optimizer][0]
    g.validate()  # a DAG with consistent sizes


def test_views_are_folded_and_gradients_share_their_forward_group():
    model, inputs = cnn_case()
    g = from_module(model, inputs)
    assert not set(g.op_types) & VIEW_OPS
    conv = g.index("conv1/convolution")
    conv_grad = g.index("grad/conv1/convolution_backward")
    assert g.group[conv] == g.group[conv_grad] == g.group[g.index("update/conv1.weight")]
    assert g.module[conv] == "conv1"
    assert g.group[g.index("conv2/convolution")] != g.group[conv]


def test_backward_flops_about_twice_forward_for_conv_and_matmul_nets():
    model, inputs = cnn_case()
    fwd, bwd = forward_backward_flops(from_module(model, inputs))
    # conv1's input gradient is not needed, so slightly under 2x
    assert 1.5 <= bwd / fwd <= 2.5

    mlp = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))
    fwd, bwd = forward_backward_flops(from_module(mlp, (torch.randn(32, 64),), loss=lambda out: out.square().mean()))
    assert bwd / fwd == pytest.approx(2.0, rel=0.25)


def test_linear_flops_match_closed_form():
    fc = nn.Linear(64, 32)
    g = from_module(fc, (torch.randn(16, 64),), loss=lambda out: out.sum())
    assert g.flops[g.index("root/addmm")] == 2 * 16 * 64 * 32 + 16 * 32
    # weight gradient: (32 x 16) @ (16 x 64); no input gradient is needed
    assert sorted(g.flops[[i for i, t in enumerate(g.op_types) if t == "mm"]].tolist()) == [2 * 32 * 16 * 64]
    assert g.flops[g.index("update/weight")] == 2 * 64 * 32


def test_conv2d_flops_match_closed_form():
    conv = nn.Conv2d(8, 16, kernel_size=3, stride=2, padding=1, bias=False)
    g = from_module(conv, (torch.randn(2, 8, 10, 10),), loss=lambda out: out.sum())
    n, cout, ho, wo, cin, k = 2, 16, 5, 5, 8, 3
    assert g.flops[g.index("root/convolution")] == 2 * n * ho * wo * cout * cin * k * k


def test_lstm_cell_flops_match_closed_form():
    cell = nn.LSTMCell(32, 64)
    x, h, c = torch.randn(8, 32), torch.randn(8, 64), torch.randn(8, 64)
    g = from_module(cell, (x, (h, c)), loss=lambda out: out[0].sum() + out[1].sum())
    fwd = {g.op_types[i]: 0.0 for i in np.flatnonzero(g.phase == FORWARD)}
    matmul = sum(g.flops[i] for i in np.flatnonzero(g.phase == FORWARD) if g.op_types[i] in ("mm", "addmm"))
    # gates = x W_ih^T + b_ih + h W_hh^T + b_hh: two matmuls into 4H
    assert matmul == 2 * 8 * 32 * 256 + 2 * 8 * 64 * 256 + 8 * 256 * (sum(1 for i in np.flatnonzero(g.phase == FORWARD) if g.op_types[i] == "addmm"))
    assert fwd  # the cell traced into forward ops


def test_traced_step_reproduces_eager_gradients():
    from gnplace.importers.trace import record_training_step

    model, inputs = cnn_case()
    trace = record_training_step(model, inputs)
    loss, grads = trace.replay()
    eager_loss = model(*inputs)
    eager = torch.autograd.grad(eager_loss, list(model.parameters()))
    assert torch.allclose(loss, eager_loss)
    for (name, got), want in zip(grads.items(), eager):
        assert torch.allclose(got, want, atol=1e-5), name


def test_unknown_op_types_are_counted_and_warned_once():
    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.special.i0(x * self.w).sum() + torch.special.i0(x).sum()

    with pytest.warns(UserWarning, match=r"FLOP rules do not know 2 op types.*: i0, special_i1") as record:
        g = from_module(Odd(), (torch.randn(4, 16),))
    assert len([w for w in record if "FLOP rules" in str(w.message)]) == 1
    assert all(g.flops[i] > 0 for i, t in enumerate(g.op_types) if t == "i0")


def test_untraceable_module_names_the_failing_op():
    class Bad(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.fc(x)
            if h.sum() > 0:  # data-dependent control flow
                h = h * 2
            return h.sum()

    with pytest.raises(UnsupportedGraph, match="cannot trace a training step of Bad at op"):
        from_module(Bad(), (torch.randn(2, 4),))


def test_non_scalar_output_needs_a_loss():
    with pytest.raises(UnsupportedGraph, match="must return a scalar loss"):
        from_module(nn.Linear(4, 4), (torch.randn(2, 4),))


def test_unknown_optimizer():
    with pytest.raises(ValueError, match="unknown optimizer 'lamb'"):
        from_module(nn.Linear(4, 1), (torch.randn(2, 4),), loss=lambda o: o.sum(), optimizer="lamb")


def test_shared_parameter_is_served_by_a_read_op():
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(8, 8)
            self.b = nn.Linear(8, 8)
            self.b.weight = self.a.weight

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(torch.relu(self.a(x))).sum()

    g = from_module(Tied(), (torch.randn(4, 8),))
    read = g.index("read/a.weight")
    consumers = g.edge_dst[g.edge_src == read]
    assert g.group[read] == g.group[g.index("a/addmm")]
    assert g.index("b/addmm") in consumers.tolist()
    assert sum(1 for n in g.node_names if n.startswith("update/")) == 3  # a.weight, a.bias, b.bias


def test_deterministic():
    model, inputs = cnn_case()
    assert from_module(model, inputs) == from_module(model, inputs)
