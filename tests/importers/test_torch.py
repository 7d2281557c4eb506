"""Training graphs from PyTorch modules."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from gnplace.exceptions import InvalidArgument, UnsupportedGraph
from gnplace.graph import BACKWARD, FORWARD, UPDATE
from gnplace.importers.flops import VIEW_OPS
from gnplace.importers.torch import OPTIMIZERS, from_module, import_step


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


def test_adamw_updates_cost_adams_flop_and_its_decoupled_weight_decay():
    model, inputs = cnn_case()
    adam, adamw = (from_module(model, inputs, optimizer=name) for name in ("adam", "adamw"))
    elements = sum(p.numel() for p in model.parameters())
    assert float(adam.flops[adam.phase == UPDATE].sum()) == 10 * elements
    assert float(adamw.flops[adamw.phase == UPDATE].sum()) == 12 * elements
    assert np.array_equal(adam.param_bytes, adamw.param_bytes)


def test_views_are_folded_and_gradients_share_their_forward_group():
    model, inputs = cnn_case()
    g = from_module(model, inputs)
    assert not set(g.op_types) & VIEW_OPS
    conv = g.index("conv1/convolution")
    conv_grad = g.index("grad/conv1/convolution_backward")
    assert g.group[conv] == g.group[conv_grad] == g.group[g.index("update/conv1.weight")]
    assert g.module[conv] == "conv1"
    assert g.group[g.index("conv2/convolution")] != g.group[conv]


class _Block(nn.Module):
    """``b(tanh(a(x)))``."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.tanh(self.a(x)))


def test_the_gradient_of_a_modules_own_op_between_two_children_is_that_modules():
    """``b(tanh(a(x)))``: the tanh is the block's, and so is its backward; the walk from the block's output stopped at
    ``b``'s nodes, so the tanh's backward was tagged by the loss, the root's (``grad/root/tanh_backward``)."""

    torch.manual_seed(0)
    g = from_module(nn.Sequential(_Block(), _Block(), nn.Linear(4, 1)), (torch.randn(2, 4),), loss=lambda y: y.sum())
    for block in ("0", "1"):
        tanh, grad = g.index(f"{block}/tanh"), g.index(f"grad/{block}/tanh_backward")
        assert g.module[grad] == g.module[tanh] == block
        assert g.group[grad] == g.group[tanh]
    assert g.group[g.index("grad/0.a/mm")] == g.group[g.index("0.a/addmm")]  # the children keep theirs
    assert not [name for name in g.node_names if name.startswith("grad/root/")]



@dataclasses.dataclass
class _Held:
    """A tensor in an object pytree does not open: a module's hooks see no tensor in it."""

    y: torch.Tensor


class _Scaled(nn.Module):
    """``l(held.y) * self.scale``: its input inside an object, a tensor of its parent's read from an attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)
        self.scale = torch.ones(4)

    def forward(self, held: _Held) -> torch.Tensor:
        return self.l(held.y) * self.scale


class _Wrapped(nn.Module):
    """Its sigmoid handed back inside an object."""

    def forward(self, x: torch.Tensor) -> _Held:
        return _Held(torch.sigmoid(x))


class _Parent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.c, self.w = nn.Linear(4, 4), _Scaled(), _Wrapped()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        self.c.scale = torch.cos(h)
        return self.w(self.c(_Held(torch.tanh(h)))).y.sum()


def test_a_gradient_is_its_forward_ops_module_however_tensors_reach_a_call_and_leave_it():
    """A call's nodes are those made while it was open. The walk from its output stopped at its inputs' nodes only,
    so a tensor of its parent's read from an attribute (the cos) or given inside an object (the tanh, once the walk
    went on through nested calls, ce9f23e) had its backward tagged the child's; and a sigmoid handed back inside an
    object, which no walk from the child's output reached, the root's."""
    torch.manual_seed(0)
    g = from_module(_Parent(), (torch.randn(2, 4),))
    for forward, backward in (("root/cos", "grad/root/sin"), ("root/tanh", "grad/root/tanh_backward"),
                              ("c/mul", "grad/c/mul"), ("w/sigmoid", "grad/w/sigmoid_backward")):
        assert g.module[g.index(backward)] == g.module[g.index(forward)], backward
    grads = {name.split("/")[1] for name in g.node_names if name.startswith("grad/")}
    assert grads == {"root", "a", "c", "c.l", "w"}
    assert g.group[g.index("grad/c/mul")] == g.group[g.index("c/mul")]


class _Checkpointed(nn.Module):
    """Two checkpointed segments, a block and a linear layer, then a buffer reassigned (a moving average)."""

    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.a, self.b, self.reentrant = _Block(), nn.Linear(4, 4), reentrant
        self.register_buffer("mean", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.utils.checkpoint.checkpoint(self.a, x, use_reentrant=self.reentrant)
        h = torch.utils.checkpoint.checkpoint(self.b, h, use_reentrant=self.reentrant)
        self.mean = 0.9 * self.mean + 0.1 * h.detach().mean(0)
        return h.square().sum()


@pytest.mark.parametrize("reentrant", [False, True])
def test_an_op_a_checkpoint_recomputes_is_the_module_that_reruns_it(reentrant: bool) -> None:
    """A checkpointed segment's forward runs again in the backward: each op rerun is its module's, as in the forward.
    They were the autograd node's that asked for them: ``a.b``'s (non-reentrant, whose first read is ``a.b``'s input)
    or, reentrant, the checkpoint's own node, the model's (``grad/root/addmm``)."""
    torch.manual_seed(0)
    g = from_module(_Checkpointed(reentrant), (torch.randn(2, 4, requires_grad=True),))
    assert g.module[g.index("grad/a.a/addmm")] == "a.a"
    assert g.module[g.index("grad/a/tanh")] == "a"
    assert g.phase[g.index("grad/a/tanh")] == BACKWARD
    recomputed = {name for name in g.node_names if name.startswith("grad/root/")}
    assert not {name for name in recomputed if name.split("/")[-1] in ("addmm", "tanh")}


class _CheckpointedSteps(nn.Module):
    """One block called at three steps, each step checkpointed."""

    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.cell, self.reentrant = _Block(), reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            x = torch.utils.checkpoint.checkpoint(self.cell, x, use_reentrant=self.reentrant)
        return x.square().sum()


@pytest.mark.parametrize("reentrant", [False, True])
def test_an_op_a_checkpoint_recomputes_is_in_the_group_of_the_call_it_reruns(reentrant: bool) -> None:
    """Rerunning a segment calls its modules again: those calls were new ones (``cell.a`` called a fourth time), so the
    recomputed ops, and the reentrant checkpoint's gradients of the segment rerun, were in groups of their own, which
    no forward op is in; each is the group of the step it recomputes."""
    torch.manual_seed(0)
    g = from_module(_CheckpointedSteps(reentrant), (torch.randn(2, 4, requires_grad=True),))

    def groups(prefix: str) -> list[int]:
        return [int(g.group[i]) for i, name in enumerate(g.node_names) if name.startswith(prefix)]

    assert len(set(groups("cell.a/addmm"))) == 3
    assert sorted(groups("grad/cell.a/addmm")) == sorted(groups("cell.a/addmm"))
    assert sorted(groups("grad/cell/tanh_backward")) == sorted(groups("cell/tanh"))
    assert set(groups("grad/cell.b/mm")) == set(groups("cell.b/addmm"))
    assert set(g.group[g.phase == BACKWARD]) <= set(g.group[g.phase == FORWARD])
    trace = import_step(_CheckpointedSteps(reentrant), (torch.randn(2, 4, requires_grad=True),)).trace
    assert trace.module_calls == {"": 1, "cell": 3, "cell.a": 3, "cell.b": 3}  # the reruns were counted: 6 each


def test_complex_views_are_folded_into_their_producers():
    """view_as_complex and view_as_real re-describe memory: they were nodes of their own, at 1 FLOP an element."""

    class Rotate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(8, 2))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            z = torch.view_as_complex(self.w) * torch.view_as_complex(x)
            return torch.view_as_real(z).sum()

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 'FLOP rules do not know 2 op types' without them among the views
        g = from_module(Rotate(), (torch.randn(8, 2),))
    assert not set(g.op_types) & {"view_as_complex", "view_as_real"}
    assert [g.node_names[i] for i in np.flatnonzero(g.phase == FORWARD)] == [
        "root/mul", "root/sum", "root/ones_like", "input/0"]


def test_a_sparse_embedding_gradient_holds_its_entries_not_the_table():
    """nn.Embedding(sparse=True)'s gradient is a COO tensor of one entry per token: 32 x (an int64 index + 64 floats)
    = 8,448 bytes, not the 50,000 x 64 table's 12.8 MB; wrapping indices and values is no arithmetic (was 3.2 MFLOP)."""
    model = nn.Sequential(nn.Embedding(50_000, 64, sparse=True), nn.Linear(64, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # '_sparse_coo_tensor_with_dims_and_tensors' had no rule
        g = from_module(model, (torch.randint(0, 50_000, (4, 8)),), loss=lambda out: out.sum())
    grad = g.index("grad/0/_sparse_coo_tensor_with_dims_and_tensors")
    assert g.out_bytes[grad] == 4 * 8 * (8 + 64 * 4)
    assert g.flops[grad] == 0
    edge = np.flatnonzero((g.edge_src == grad) & (g.edge_dst == g.index("update/0.weight")))
    assert g.edge_bytes[edge].tolist() == [8448]


def test_sgd_updates_the_rows_a_sparse_gradient_holds_and_momentum_the_whole_table():
    """Plain SGD adds nn.Embedding(sparse=True)'s gradient entry by entry: 32 tokens x 64 values x 2 FLOP, not the
    50,000 x 64 table's 6.4 MFLOP; momentum decays its whole buffer, so it stays dense, as a dense gradient's."""
    def update_flops(optimizer: str, sparse: bool) -> float:
        model = nn.Sequential(nn.Embedding(50_000, 64, sparse=sparse), nn.Linear(64, 2))
        g = from_module(model, (torch.randint(0, 50_000, (4, 8)),), loss=lambda out: out.sum(), optimizer=optimizer)
        return float(g.flops[g.index("update/0.weight")])

    assert update_flops("sgd", sparse=True) == 2 * 4 * 8 * 64
    assert update_flops("sgd", sparse=False) == 2 * 50_000 * 64
    assert update_flops("momentum", sparse=True) == update_flops("momentum", sparse=False) == 4 * 50_000 * 64


@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
def test_adam_refuses_a_sparse_gradient_as_torch_does(optimizer):
    """torch.optim.Adam and AdamW raise 'Adam does not support sparse gradients' at their first step on
    nn.Embedding(sparse=True)'s gradient (SGD, with momentum or not, takes it): the step was imported as if they
    took it. Refused in one line naming the parameter and what to use instead; a dense embedding stays fine."""
    def model(sparse: bool) -> nn.Module:
        return nn.Sequential(nn.Embedding(100, 8, sparse=sparse), nn.Linear(8, 2))

    tokens = (torch.randint(0, 100, (4,)),)
    with pytest.raises(UnsupportedGraph, match=r"^parameter '0.weight' gets a sparse gradient .* 'sgd' or 'momentum', "
                                               r"or build the module with sparse=False$") as caught:
        from_module(model(True), tokens, loss=lambda out: out.sum(), optimizer=optimizer)
    assert "\n" not in str(caught.value)
    from_module(model(False), tokens, loss=lambda out: out.sum(), optimizer=optimizer)


def test_max_norms_renorm_writes_the_rows_it_looks_up_not_the_table():
    """nn.Embedding(max_norm=...) rescales in place the rows its 4 x 5 tokens look up: 20 x 16 floats = 1,280 bytes
    written and passed to the look-up that follows it, not the 1,000 x 16 table's 64,000 it returns."""
    model = nn.Embedding(1000, 16, max_norm=1.0)
    g = from_module(model, (torch.randint(0, 1000, (4, 5)),), loss=lambda out: out.sum())
    renorm, lookup = g.index("root/embedding_renorm_"), g.index("root/embedding")
    assert g.out_bytes[renorm] == 20 * 16 * 4
    edge = np.flatnonzero((g.edge_src == renorm) & (g.edge_dst == lookup))
    assert g.edge_bytes[edge].tolist() == [20 * 16 * 4]
    g.validate()

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

    with pytest.raises(UnsupportedGraph, match="cannot trace a training step of Bad: its forward reads a tensor's value"):
        from_module(Bad(), (torch.randn(2, 4),))


@pytest.mark.parametrize("select", [lambda h: h[h > 0], torch.nonzero, torch.unique])
def test_a_shape_that_depends_on_the_data_is_named(select):
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.fc(x)
            return h.sum() + select(h).float().sum()

    with pytest.raises(UnsupportedGraph, match="the output shape of aten.* depends on the data"):
        from_module(Masked(), (torch.randn(2, 4),))


def test_a_backward_of_a_shape_that_depends_on_the_data_names_the_layer_not_a_mask():
    """A sparse embedding's gradient drops its padding's rows (aten.index): the model indexes by no mask of its own."""
    net = nn.Sequential(nn.Embedding(10, 4, sparse=True, padding_idx=0), nn.Flatten(), nn.Linear(12, 1))
    with pytest.raises(UnsupportedGraph, match=r"^cannot trace a training step of Sequential: the backward of "
                                               r"EmbeddingBackward0 runs aten.index.Tensor, whose output shape depends "
                                               r"on the data \(nn.Embedding\(sparse=True\) with padding_idx .*sparse=False"):
        from_module(net, (torch.tensor([[0, 3, 4], [5, 0, 1]]),), loss=lambda out: out.sum())


def test_a_forward_that_raises_is_named_with_how_inputs_are_matched():
    class Picky(nn.Module):
        def forward(self, input_ids: torch.Tensor, embeds: torch.Tensor | None = None) -> torch.Tensor:
            if embeds is not None:
                raise ValueError("You cannot specify both input_ids and embeds")
            return input_ids.float().sum()

    with pytest.raises(UnsupportedGraph, match=r"its forward raised ValueError: You cannot specify both input_ids and "
                                                r"embeds \(the example inputs go to forward\(input_ids, embeds\) by "
                                                r"position"):
        from_module(Picky(), (torch.ones(2), torch.ones(2)))


def test_non_scalar_output_needs_a_loss():
    with pytest.raises(UnsupportedGraph, match="must return a scalar loss"):
        from_module(nn.Linear(4, 4), (torch.randn(2, 4),))


@pytest.mark.parametrize("model, loss, match", [
    (nn.Linear(4, 2).requires_grad_(False), lambda o: o.sum(), "has no trainable parameter"),
    (nn.ReLU(), lambda o: o.sum(), "has no trainable parameter"),
    (nn.Linear(4, 2), lambda o: o.detach().sum(), "the loss of Linear has no gradient"),
    (nn.Linear(4, 2), lambda o: (o > 0).sum(), "the loss of Linear has no gradient"),
    (nn.Linear(4, 2), lambda o: o.to(torch.complex64).sum(), "the loss of Linear has no gradient"),
])
def test_a_step_with_nothing_to_differentiate_is_told_so(model, loss, match):
    """Not "its forward raised RuntimeError: ... grad()" with advice on how inputs are matched: it did not raise."""
    with pytest.raises(UnsupportedGraph, match=match) as err:
        from_module(model, (torch.randn(3, 4),), loss=loss)
    assert "forward raised" not in str(err.value)


def test_a_loss_function_that_raises_is_named_as_the_loss_not_the_forward():
    def loss(out: torch.Tensor) -> torch.Tensor:
        raise KeyError("logits")

    with pytest.raises(UnsupportedGraph, match=r"the loss function raised KeyError: 'logits'") as err:
        from_module(nn.Linear(4, 2), (torch.randn(3, 4),), loss=loss)
    assert "forward" not in str(err.value)


def test_a_backward_that_raises_is_named_as_the_backward():
    class Fails(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # noqa: ANN001, ANN205 - torch's signature
            return x * 2

        @staticmethod
        def backward(ctx, grad):  # noqa: ANN001, ANN205
            raise ValueError("no gradient here")

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return Fails.apply(self.fc(x)).sum()

    with pytest.raises(UnsupportedGraph, match=r"its backward raised ValueError: no gradient here") as err:
        from_module(Net(), (torch.randn(3, 4),))
    assert "forward" not in str(err.value)


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
    assert g.edge_bytes[g.edge_src == read].tolist() == [8 * 8 * 4] * len(consumers)  # the weight's bytes each
    assert sum(1 for n in g.node_names if n.startswith("update/")) == 3  # a.weight, a.bias, b.bias


def test_deterministic():
    model, inputs = cnn_case()
    assert from_module(model, inputs) == from_module(model, inputs)


# ------------------------------------------------------------------------------- the op-to-node map
def needed_ops(trace) -> set[int]:
    """Every trace op the loss or a gradient depends on, views included (walked independently)."""
    from torch.utils._pytree import tree_flatten

    from gnplace.importers.trace import Ref

    roots = [trace.loss, *(r for r in trace.grads.values() if r is not None)]
    todo = [r.index for r in roots if r.kind == "op"]
    seen: set[int] = set()
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        op = trace.ops[i]
        todo += [r.index for r in tree_flatten((op.args, op.kwargs))[0] if isinstance(r, Ref) and r.kind == "op"]
    return seen


def views_source(trace, i: int):
    """The Ref that a chain of views starting at op ``i`` shows (``None``: a constant)."""
    from torch.utils._pytree import tree_flatten

    from gnplace.importers.trace import Ref

    while trace.ops[i].name in VIEW_OPS:
        sources = [r for r in tree_flatten((trace.ops[i].args, trace.ops[i].kwargs))[0] if isinstance(r, Ref)]
        if not sources:
            return None
        if sources[0].kind != "op":
            return sources[0]
        i = sources[0].index
    return Ref("op", i, 0)


def replay_mapped(step):
    """Replay only the ops the map covers, plus views of buffers and constants: what an executor runs."""
    from torch.utils._pytree import tree_flatten, tree_map

    from gnplace.importers.trace import Ref

    trace = step.trace
    run = set(step.node_of_op)
    for i in needed_ops(trace) - run:
        src = views_source(trace, i)
        assert trace.ops[i].name in VIEW_OPS and (src is None or src.kind == "buffer"), trace.ops[i].name
        run.add(i)
    values: dict[int, list] = {}
    params = {k: v.detach() for k, v in trace.params.items()}

    def resolve(x):
        if not isinstance(x, Ref):
            return x
        if x.kind == "op":
            return values[x.index][x.output]
        if x.kind == "param":
            return params[x.name]
        if x.kind == "buffer":
            return trace.buffers[x.name].clone()
        return trace.inputs[int(x.name)]

    with torch.no_grad():
        for i in sorted(run):
            op = trace.ops[i]
            values[i] = tree_flatten(op.func(*tree_map(resolve, op.args), **tree_map(resolve, op.kwargs)))[0]
    return resolve(trace.loss), {k: (resolve(r) if r is not None else None) for k, r in trace.grads.items()}


def assert_map_covers_the_step(step, model, inputs):
    """The facts an executor relies on, and the graph is that of ``from_module``."""
    g, trace = step.graph, step.trace
    kept = {i: v for i, v in step.node_of_op.items() if trace.ops[i].name not in VIEW_OPS}
    # every kept trace op maps to its own node, of its op type, phase and call
    for i, v in kept.items():
        op = trace.ops[i]
        assert g.op_types[v] == op.name and g.phase[v] == (BACKWARD if op.backward else FORWARD)
        assert g.module[v] == op.call[0]
    assert len(set(kept.values())) == len(kept)
    # every forward and backward node but inputs and reads is the image of a trace op
    images = set(kept.values())
    for v in range(g.num_ops):
        if g.phase[v] != UPDATE and g.op_types[v] not in ("input", "read"):
            assert v in images, g.node_names[v]
    # every op the step needs is mapped (views of buffers and constants have no node)
    for i in needed_ops(trace) - set(step.node_of_op):
        src = views_source(trace, i)
        assert trace.ops[i].name in VIEW_OPS and (src is None or src.kind == "buffer"), trace.ops[i].name
    # a view maps to the node holding the data it shows
    for i, v in step.node_of_op.items():
        if i in kept:
            continue
        src = views_source(trace, i)
        if src.kind == "op":
            assert v == step.node_of_op[src.index]
        elif src.kind == "input":
            assert v == step.input_node[int(src.name)]
        else:
            assert src.kind == "param" and v == step.update_node[src.name]
    # parameters, reads and inputs
    assert {p: g.node_names[v] for p, v in step.update_node.items()} == {p: f"update/{p}" for p in trace.params}
    assert all(g.node_names[v] == f"read/{p}" for p, v in step.read_node.items())
    assert all(g.node_names[v] == f"input/{k}" and g.op_types[v] == "input" for k, v in step.input_node.items())
    assert sorted(v for v in range(g.num_ops) if g.op_types[v] == "input") == sorted(step.input_node.values())
    # the trace still replays the eager step, and so does the part of it the map covers
    eager_loss = model(*inputs)
    eager = dict(zip([k for k, _ in model.named_parameters()], torch.autograd.grad(eager_loss, list(model.parameters()))))
    for loss, grads in (trace.replay(), replay_mapped(step)):
        assert torch.allclose(loss, eager_loss, atol=1e-5)
        for name, got in grads.items():
            assert torch.allclose(got, eager[name], atol=1e-4), name


class Views(nn.Module):
    """Views of an input, of a parameter, of a buffer and of an op's output; a tied weight."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.b.weight = self.a.weight
        self.scale = nn.Parameter(torch.ones(2, 8))
        self.register_buffer("shift", torch.full((2, 8), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x.view(4, 8)).relu()
        h = h.reshape(2, 2, 8).transpose(0, 1) * self.scale.unsqueeze(0) + self.shift[None]
        return self.b(h.flatten(0, 1)).square().mean()


def test_import_step_gives_the_graph_of_from_module():
    from gnplace.importers.torch import import_step, trace_to_graph

    model, inputs = cnn_case()
    step = import_step(model, inputs, optimizer="adam", name="cnn", meta={"k": 1})
    assert step.graph == from_module(model, inputs, optimizer="adam", name="cnn", meta={"k": 1})
    assert step.graph == trace_to_graph(step.trace, optimizer="adam", name="cnn", meta={"k": 1})
    with pytest.raises(AttributeError):
        step.graph = None  # frozen


def test_op_to_node_map_of_a_small_cnn():
    from gnplace.importers.torch import import_step

    model, inputs = cnn_case()
    step = import_step(model, inputs)
    assert_map_covers_the_step(step, model, inputs)
    conv = next(i for i, op in enumerate(step.trace.ops) if op.name == "convolution")
    assert step.graph.node_names[step.node_of_op[conv]] == "conv1/convolution"
    assert sorted(step.input_node) == [0, 1] and step.read_node == {}


def test_op_to_node_map_folds_views_and_keeps_reads():
    from gnplace.importers.torch import import_step

    torch.manual_seed(0)
    model, inputs = Views(), (torch.randn(2, 2, 8),)
    step = import_step(model, inputs)
    assert_map_covers_the_step(step, model, inputs)
    g, ops = step.graph, step.trace.ops
    assert list(step.read_node) == ["a.weight"]
    views = {op.name for i, op in enumerate(ops) if i in step.node_of_op and op.name in VIEW_OPS}
    assert {"view", "t", "unsqueeze", "transpose"} <= views
    first_view = next(i for i, op in enumerate(ops) if op.name == "view")
    assert step.node_of_op[first_view] == step.input_node[0]  # x.view(...) shows the input
    transpose = next(i for i, op in enumerate(ops) if op.name == "transpose" and not op.backward)
    assert g.op_types[step.node_of_op[transpose]] == "relu"  # a view of the relu's output


def test_op_to_node_map_of_enas_family_graphs():
    from gnplace.families import cifar10, ptb
    from gnplace.importers.torch import import_step

    for module, knobs in ((cifar10, {"layers": 2, "channels": 8, "batch": 8}),
                          (ptb, {"hidden": 32, "steps": 3, "batch": 4, "vocab": 100, "num_nodes": 4})):
        model, inputs = module.sample(np.random.default_rng(0), **knobs)
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0  # so that eager and replayed gradients can be compared
        step = import_step(model, inputs)
        assert_map_covers_the_step(step, model, inputs)


def test_lstm_layer_imports_as_its_cells_matmuls():
    """nn.LSTM records through its cells (oneDNN's fused kernel is off while recording): no unknown op,
    and the forward matmuls are the closed form, 2 FLOP per multiply-add of W x and R h at each step."""
    lstm = nn.LSTM(8, 16, batch_first=True)
    x = torch.randn(3, 5, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unknown op type would warn
        g = from_module(lstm, (x,), loss=lambda out: out[0].sum())
    forward = np.flatnonzero(g.phase == FORWARD)
    matmul = sum(g.flops[i] for i in forward if g.op_types[i] in ("mm", "addmm"))
    # x W_ih^T for all 15 rows at once, then h W_hh^T + b_hh at each of the 5 steps of batch 3
    assert matmul == 2 * 15 * 8 * 64 + 5 * (2 * 3 * 16 * 64 + 3 * 64)


class _Causal(nn.Module):
    """A torch.nn transformer encoder under a causal mask, told that it is causal or left to find out."""

    def __init__(self, told: bool) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.told = told

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.encoder(x, mask=mask, is_causal=True if self.told else None).square().mean()


def test_a_transformer_left_to_detect_a_causal_mask_is_told_how_to_say_it():
    """torch.nn compares the mask with a causal one (a data-dependent read): the error names the fix, which works."""
    with pytest.raises(UnsupportedGraph, match=r"reads its attention mask's values .* is_causal=True with a causal"):
        from_module(_Causal(told=False), (torch.randn(2, 5, 8),))
    assert from_module(_Causal(told=True), (torch.randn(2, 5, 8),)).num_ops > 0


def test_a_cumulative_batch_norm_is_refused_with_its_own_reason():
    # momentum=None averages over all batches: it reads the batch count's value, which a recording cannot
    def net(momentum):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.BatchNorm1d(6, momentum=momentum))

    with pytest.raises(UnsupportedGraph, match=r"batch norm layer with momentum=None .* give it a momentum"):
        from_module(net(None), (torch.randn(8, 6),), loss=lambda y: y.square().mean())
    assert from_module(net(0.1), (torch.randn(8, 6),), loss=lambda y: y.square().mean()).num_ops > 0


class _WriteIntoView(nn.Module):
    """``y[:, 0] = 0`` (select, fill_) or ``y[:, 1:3] = x[:, :2]`` (slice, copy_) between two layers."""

    def __init__(self, copy: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.out = nn.Linear(6, 2)
        self.copy = copy

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        if self.copy:
            y[:, 1:3] = x[:, :2]
        else:
            y[:, 0] = 0
        return self.out(y).sum()


def _reaches(g, u: int) -> set[int]:
    """The nodes reachable from ``u`` along the graph's edges, ``u`` included."""
    ptr, dst, _ = g.out_csr
    seen, todo = {u}, [u]
    while todo:
        a = todo.pop()
        for v in dst[ptr[a]:ptr[a + 1]].tolist():
            if v not in seen:
                seen.add(v)
                todo.append(v)
    return seen


def _tensor_read(ops, ref):
    """The op output ``ref`` shows through views and in-place results: the tensor whose memory it is."""
    from gnplace.importers.trace import Ref

    while ref.kind == "op" and (ops[ref.index].name in VIEW_OPS or ops[ref.index].name.endswith("_")):
        ref = ops[ref.index].args[0]
        assert isinstance(ref, Ref)
    return ref


@pytest.mark.parametrize("copy", [False, True])
def test_a_write_into_a_view_is_a_node_that_later_readers_of_the_tensor_follow(copy):
    from torch.utils._pytree import tree_flatten

    from gnplace.importers.torch import import_step
    from gnplace.importers.trace import Ref

    torch.manual_seed(0)
    model, x = _WriteIntoView(copy), torch.randn(3, 4)
    step = import_step(model, (x,))
    g, ops = step.graph, step.trace.ops
    writes = [i for i, op in enumerate(ops) if op.name in ("fill_", "copy_") and op.args[0].kind == "op"
              and ops[op.args[0].index].name in ("select", "slice")]
    assert {ops[i].backward for i in writes} == {False, True}  # the user's write, and its backward's (zeroing the slice)
    for w in writes:
        assert w in step.node_of_op, ops[w].name
        after = _reaches(g, step.node_of_op[w])
        # every later op that reads the written tensor (out's addmm, the mm and sum of fc's backward) follows the write
        base = _tensor_read(ops, ops[w].args[0])
        readers = [j for j in range(w + 1, len(ops)) if ops[j].name not in VIEW_OPS and any(
            isinstance(r, Ref) and _tensor_read(ops, r) == base for r in tree_flatten((ops[j].args, ops[j].kwargs))[0])]
        assert readers
        for j in readers:
            assert step.node_of_op[j] in after, (ops[w].name, g.node_names[step.node_of_op[j]])
    # the recorded step still replays the eager one
    loss, grads = step.trace.replay()
    eager_loss = model(x)
    eager = dict(zip([k for k, _ in model.named_parameters()], torch.autograd.grad(eager_loss, list(model.parameters()))))
    assert torch.allclose(loss, eager_loss)
    for name, got in grads.items():
        assert torch.allclose(got, eager[name], atol=1e-6), name


class _WriteAfterAView(nn.Module):
    """A view taken, then its tensor written in place, and only the view read: nothing reads the write's result."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x).clone()
        flat = h.view(-1)
        h.mul_(3)
        return flat.square().sum()


def test_a_write_into_a_tensor_after_a_view_of_it_is_a_node_that_readers_of_the_view_follow():
    """The graph left ``mul_`` out (the reader of the view was tied to the clone), so it ran without it."""
    from gnplace.importers.torch import import_step

    step = import_step(_WriteAfterAView(), (torch.randn(5, 4),))
    ops = step.trace.ops
    write = next(i for i, op in enumerate(ops) if op.name == "mul_")
    square = next(i for i, op in enumerate(ops) if op.name == "pow" and not op.backward)
    assert write in step.node_of_op
    assert step.node_of_op[square] in _reaches(step.graph, step.node_of_op[write])


def test_hooks_of_the_users_are_named_in_a_warning_as_they_run_once_at_the_recording():
    """A forward hook storing activations ran once, on fake tensors, and never at a placed step: the user was left
    holding a FakeTensor, with no word. PyTorch's own hooks of weight_norm compute into the step and are not named."""
    from gnplace.importers.torch import import_step

    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    acts: list[torch.Tensor] = []
    net[0].register_forward_hook(lambda m, a, o: acts.append(o.detach()))
    net.register_forward_pre_hook(lambda m, a: None)
    with pytest.warns(UserWarning, match=r"^hooks ran once, as the step was recorded, on fake tensors \(a forward "
                                         r"pre-hook on the module, a forward hook on '0'\): the placed step runs") as w:
        import_step(net, (torch.zeros(2, 3),), loss=lambda y: y.sum())
    assert w[0].filename == __file__  # the caller's line
    plain = nn.Linear(3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # (the old weight_norm)
        torch.nn.utils.weight_norm(plain)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import_step(plain, (torch.zeros(2, 3),), loss=lambda y: y.sum())
    assert not [c for c in caught if "hooks ran once" in str(c.message)]
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, a, o: None)
    try:
        with pytest.warns(UserWarning, match=r"a global forward hook \(torch.nn.modules.module."
                                             r"register_module_forward_hook\)"):
            import_step(nn.Linear(3, 1), (torch.zeros(2, 3),), loss=lambda y: y.sum())
    finally:
        handle.remove()


@pytest.mark.parametrize("module", ["net", None])
def test_what_is_no_module_is_one_clear_error(module):
    """``from_module("net", ...)`` was an AttributeError ('str' object has no attribute 'named_modules')."""
    with pytest.raises(InvalidArgument, match=rf"^a training graph is recorded from a torch.nn.Module, got {module!r}$"):
        from_module(module, (torch.zeros(2, 4),), loss=lambda out: out.sum())


@pytest.mark.parametrize("meta", [3, ["family"], "cifar10"])
def test_meta_that_is_no_dict_is_one_clear_error(meta):
    """``from_module(..., meta=3)`` was a bare TypeError ('int' object is not iterable), after the whole recording."""
    with pytest.raises(InvalidArgument, match=r"^meta must be a dict of facts to store with the graph, or None, got "):
        from_module(nn.Linear(4, 2), (torch.zeros(2, 4),), loss=lambda out: out.sum(), meta=meta)
    assert from_module(nn.Linear(4, 2), (torch.zeros(2, 4),), loss=lambda out: out.sum(),
                       meta={"family": "toy"}).meta["family"] == "toy"


class _Centred(nn.Module):
    """A batch norm beside its own ``center`` buffer and ``gain`` frozen parameter, read in its own forward."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(8)
        self.lin = nn.Linear(8, 8)
        self.register_buffer("center", torch.zeros(8))
        self.register_buffer("mask", torch.ones(8), persistent=False)
        self.gain = nn.Parameter(torch.ones(8), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin((self.bn(x) - self.center) * self.gain) * (self.mask * 2)


def test_the_forward_ops_reading_a_buffer_or_frozen_parameter_beside_another_tensor_are_recorded() -> None:
    """No edge leaves a buffer or frozen parameter, so the import names their readers in the meta, for
    device_map's check of the ops accelerate runs unhooked; a batch norm's reads of its running statistics (it is
    always hooked) and ``mask * 2`` (it reads no other tensor) are left out."""
    graph = from_module(_Centred(), (torch.randn(4, 8),), loss=lambda y: y.sum())
    assert graph.meta["untrained_readers"] == {"center": ["root/sub"], "gain": ["root/mul"]}
    assert "untrained_readers" not in from_module(nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8)),
                                                  (torch.randn(4, 8),), loss=lambda y: y.sum()).meta


def test_a_linears_input_update_and_optimizer_state_bytes_and_flop_by_hand():
    """Linear(4, 8) on a batch of 16: the input op holds 16 x 4 floats (256 B) and passes them to the product and to
    the weight's gradient; the weight's update holds its 32 floats (128 B) times the optimizer's state factor (SGD 1,
    momentum 2, Adam and AdamW 3) and costs 2, 4, 10 or 12 FLOP per element, writing no output. Mutants giving
    momentum one state, the input op or its edges no bytes, or the update op the parameter's bytes as output, passed
    (the other tests read the factors from OPTIMIZERS itself)."""
    expected = {"sgd": (128, 64.0), "momentum": (256, 128.0), "adam": (384, 320.0), "adamw": (384, 384.0)}
    for optimizer, (state, flops) in expected.items():
        g = from_module(nn.Linear(4, 8), (torch.zeros(16, 4),), loss=lambda out: out.sum(), optimizer=optimizer)
        update = g.index("update/weight")
        assert (int(g.param_bytes[update]), float(g.flops[update]), int(g.out_bytes[update])) == (state, flops, 0)
    x = g.index("input/0")
    assert g.out_bytes[x] == 16 * 4 * 4
    edges = {(g.node_names[u], g.node_names[v]): int(b) for u, v, b in zip(g.edge_src, g.edge_dst, g.edge_bytes)}
    assert edges[("input/0", "root/addmm")] == edges[("input/0", "grad/root/mm")] == 16 * 4 * 4
    assert edges[("grad/root/mm", "update/weight")] == 8 * 4 * 4


def test_a_convolutions_update_reads_its_weights_gradient_alone_and_joins_its_module():
    """convolution_backward writes dX, dW and db together (1,760 B); the weight's update reads dW's 864 B of them (a
    mutant passing every output passed), and is in the conv's module (a mutant leaving the module empty passed)."""
    class Conv(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.conv(x).sum()

    g = from_module(Conv(), (torch.zeros(2, 3, 6, 6, requires_grad=True),))
    grad, update = g.index("grad/conv/convolution_backward"), g.index("update/conv.weight")
    assert g.out_bytes[grad] == (2 * 3 * 36 + 8 * 3 * 9 + 8) * 4
    edge = np.flatnonzero((g.edge_src == grad) & (g.edge_dst == update))
    assert g.edge_bytes[edge].tolist() == [8 * 3 * 9 * 4]
    assert g.module[update] == g.module[g.index("update/conv.bias")] == "conv"


def test_an_input_is_in_the_group_of_its_first_consumer():
    """x feeds act(x) then fc(x): its input op joins act's call, not that of fc's weight gradient, its last reader
    (a mutant taking the last consumer passed)."""
    class Two(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.act, self.fc = nn.Tanh(), nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (self.act(x) * self.fc(x)).sum()

    g = from_module(Two(), (torch.zeros(3, 4),))
    assert g.group[g.index("input/0")] == g.group[g.index("act/tanh")] != g.group[g.index("grad/fc/mm")]


def test_an_edge_passing_two_outputs_of_one_op_carries_the_larger():
    """sort's indices (int64, 240 B) and values (120 B) both feed one mul: the edge carries 240 B, whichever is read
    last (a mutant keeping the last tensor's bytes passed)."""
    class Sorted(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(6, 6)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            values, indices = self.fc(x).sort(dim=-1)
            return (indices * values).sum()

    g = from_module(Sorted(), (torch.zeros(5, 6),))
    edge = np.flatnonzero((g.edge_src == g.index("root/sort")) & (g.edge_dst == g.index("root/mul")))
    assert g.edge_bytes[edge].tolist() == [5 * 6 * 8]


def test_a_view_of_a_view_is_folded_into_the_op_that_made_the_data():
    """sum reads h.view(2, 8).t(): its edge comes from the product (a mutant resolving a view's source one level
    only dropped the edge without a word)."""
    fc = nn.Linear(4, 4)
    g = from_module(fc, (torch.zeros(4, 4),), loss=lambda out: out.view(2, 8).t().square().sum())
    edge = np.flatnonzero((g.edge_src == g.index("root/addmm")) & (g.edge_dst == g.index("root/pow")))
    assert g.edge_bytes[edge].tolist() == [16 * 4]


def test_tied_parameters_and_the_readers_of_a_childs_buffer_are_in_the_meta():
    """A tied weight is named in the meta with the parameter it shares; a module holding a parameter and a child
    with a buffer is no module every device_map hooks, so its op reading the child's buffer is recorded (mutants
    leaving out the tied names, or taking every module holding a parameter for hooked, passed)."""
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
            self.b.weight = self.a.weight
            self.w = nn.Parameter(torch.ones(4))
            self.sub = nn.Module()
            self.sub.register_buffer("scale", torch.ones(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (self.b(self.a(x)) * self.w + self.sub.scale).sum()

    g = from_module(Tied(), (torch.zeros(3, 4),))
    assert g.meta["tied_parameters"] == {"b.weight": "a.weight"}
    assert g.meta["untrained_readers"] == {"sub.scale": ["root/add"]}


def test_a_write_into_one_split_piece_leaves_the_readers_of_the_others_alone():
    """As LSTM cells do, a gate chunk activated in place (unsafe_chunk, sigmoid_): the other chunk's reader follows the
    product, not the write (a mutant tying every later reader of the tensor to the write passed)."""
    class Gates(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a, b = self.fc(x).unsafe_chunk(2, dim=1)
            a.sigmoid_()
            return (a * 2).sum() + b.square().sum()

    g = from_module(Gates(), (torch.zeros(3, 4),))
    edges = {(g.node_names[u], g.node_names[v]) for u, v in zip(g.edge_src, g.edge_dst)}
    assert ("root/sigmoid_", "root/mul") in edges and ("fc/addmm", "root/pow") in edges
    assert ("root/sigmoid_", "root/pow") not in edges


def test_a_step_of_no_parameter_whose_input_requires_grad_is_imported():
    """An input that requires grad is something to differentiate, where the module trains nothing: a step whose
    backward computes the input's gradient (refused as "no trainable parameter" had the check read parameters
    alone)."""
    graph = from_module(nn.ReLU(), (torch.randn(3, 4, requires_grad=True),), loss=lambda o: o.sum())
    assert graph.num_ops > 0 and (graph.phase == 1).any()  # a backward op: the input's gradient
    assert not graph.param_bytes.any()  # and nothing to update
