"""A recorded step compiled into a program: the ops it keeps, and writes into views that still run as eager."""

import numpy as np
import pytest
import torch

from gnplace.exceptions import ExecutionFailed, InvalidArgument
from gnplace.execute.compiler import compile_step
from gnplace.execute.runner import run_step
from gnplace.importers.torch import import_step
from tests.execute.models import CheckpointedDropout, ViewsBeforeWrites, WritesInPlace


def _step():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
    return import_step(net, (torch.randn(5, 6),), loss=lambda y: y.square().mean())


def test_program_keeps_only_needed_ops_and_names_their_nodes():
    step = _step()
    program = compile_step(step)
    assert program.num_nodes == step.graph.num_ops
    assert all(-1 <= op.node < step.graph.num_ops for op in program.ops)
    assert {op.node for op in program.ops if op.node >= 0} | set(program.param_node.values()) >= {
        i for i, k in enumerate(step.graph.op_kinds) if k not in ("input", "update", "read")}
    assert len(program.ops) <= len(step.trace.ops)


@pytest.mark.parametrize("how", ["itself", "pieces", "view", "pieces then whole"])
def test_in_place_writes_whose_readers_follow_them_run_as_eager(how):
    """A write into a view whose tensor is read afterwards (``view``, ``pieces then whole``) was refused: run op by
    op the reader of ``y`` had the copy sent before the write (a wrong loss and gradients)."""
    torch.manual_seed(0)
    module, x = WritesInPlace(how), torch.randn(3, 4)
    step = import_step(module, (x,))
    loss = module(x)
    loss.backward()
    program = compile_step(step)
    for placement in (np.zeros(program.num_nodes), np.arange(program.num_nodes) % 2,
                      1 - np.arange(program.num_nodes) % 2):
        out = run_step(program, program.plan(placement.astype(np.int64)), [torch.device("cpu")] * 2)
        torch.testing.assert_close(out.loss, loss.detach())
        for name, p in module.named_parameters():
            torch.testing.assert_close(out.grads[name], p.grad)


class _Spectral(torch.nn.Module):
    """A spectral filter: rfft, a learned complex weight, irfft (whose backward writes into a view)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((5,), 0.5 + 0.1j, dtype=torch.cfloat))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.irfft(torch.fft.rfft(x, dim=-1) * self.weight, n=8, dim=-1).square().mean()


def test_a_write_into_a_view_by_pytorchs_own_backward_runs_as_eager():
    """irfft's backward zeroes part of a tensor it then reads: refused before, as the user could not write it
    otherwise."""
    torch.manual_seed(0)
    module, x = _Spectral(), torch.randn(3, 8)
    step = import_step(module, (x,))
    loss = module(x)
    loss.backward()
    program = compile_step(step)
    for placement in (np.arange(program.num_nodes) % 2, 1 - np.arange(program.num_nodes) % 2):
        out = run_step(program, program.plan(placement), [torch.device("cpu")] * 2)
        torch.testing.assert_close(out.loss, loss.detach())
        torch.testing.assert_close(out.grads["weight"], module.weight.grad)


class _Renormed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4, max_norm=1.0)
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.embed(x)).sum()


def test_an_embedding_with_max_norm_is_refused_naming_the_layer_and_its_setting():
    """The refusal named only aten.embedding_renorm_ and 'as y[:, 0] = 0 does': not the layer the user wrote."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (embedding_renorm_ has no FLOP rule)
        step = import_step(_Renormed(), (torch.tensor([[1, 2], [3, 4]]),))
    with pytest.raises(ExecutionFailed, match=r"^nn.Embedding\(max_norm=...\) renormalises, in place, the rows of its "
                                              r"weight that it reads, .* leave max_norm unset"):
        compile_step(step)


def test_views_read_after_an_in_place_write_to_their_tensor_are_made_again_after_it():
    """A view made before the write was read after it from the copy sent before it (``test_dist`` runs the ranks)."""
    from gnplace.execute.program import storage_of

    torch.manual_seed(0)
    module, x = ViewsBeforeWrites(), torch.randn(3, 4)
    program = compile_step(import_step(module, (x,)))
    writes = [i for i, op in enumerate(program.ops) if op.mutates is not None]
    assert len(writes) == 2  # mul_ and add_

    def base(ref):
        while ref.kind == "op" and program.ops[ref.index].is_view:
            ref = program.ops[ref.index].args[0]
        return ref

    stale = []
    for r, op in enumerate(program.ops):
        for ref in op.reads:
            if ref.kind == "op" and program.ops[ref.index].is_view:
                made = base(ref).index
                stale += [(r, w) for w in writes if made < w < r and storage_of(program, program.ops[w].mutates)
                          == storage_of(program, ref)]
    assert stale == []
    eager = module(x.clone())
    for devices in (np.zeros(program.num_nodes, dtype=np.int64), np.arange(program.num_nodes) % 2):
        torch.testing.assert_close(run_step(program, program.plan(devices), [torch.device("cpu")] * 2).loss,
                                   eager.detach())


class _WritesBuffers(torch.nn.Module):
    """Buffers written three ways: batch norm's statistics (arguments its schema does not mark written), ``out=``
    (a written argument given by keyword), and batch norm's ``_legit`` kernel, whose first result is no alias of the
    statistics it writes (it is the normalised activation, which the loss reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.bn = torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)
        self.register_buffer("total", torch.zeros(4))
        self.register_buffer("rm", torch.zeros(4))
        self.register_buffer("rv", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.add(self.total, x.sum(0), out=self.total)
        h = self.bn(self.fc(x))
        y = torch._native_batch_norm_legit(h, None, None, self.rm, self.rv, True, 0.1, 1e-5)[0]
        return (y * torch.arange(4.0)).square().mean()


def test_every_buffer_write_is_seen_and_a_result_that_is_no_alias_is_read_as_itself():
    torch.manual_seed(0)
    module, x = _WritesBuffers(), torch.randn(3, 4)
    program = compile_step(import_step(module, (x,)))
    written = {op.target: op.writes_buffers for op in program.ops if op.writes_buffers}
    assert written == {"aten.add.out": ("total",), "aten.native_batch_norm.default": ("bn.running_mean", "bn.running_var"),
                       "aten.add_.Tensor": ("bn.num_batches_tracked",), "aten._native_batch_norm_legit.default": ("rm", "rv")}
    # add.out and add_ return the buffer they write; the _legit kernel returns no statistic
    assert set(program.buffer_alias.values()) == {"total", "bn.num_batches_tracked"}
    eager = module(x)
    out = run_step(program, program.plan(np.arange(program.num_nodes) % 2), [torch.device("cpu")] * 2)
    torch.testing.assert_close(out.loss, eager.detach())
    for name in ("total", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked", "rm", "rv"):
        torch.testing.assert_close(out.buffers[name], dict(module.named_buffers())[name])


class _ScalesItsBufferThroughDetach(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.scale.detach().mul_(0.5)  # the whole buffer, through a view of it
        return (self.fc(x) * self.scale).square().mean()


def test_a_write_through_a_whole_view_of_a_buffer_then_read_is_refused_naming_both():
    step = import_step(_ScalesItsBufferThroughDetach(), (torch.randn(3, 4),))
    with pytest.raises(ExecutionFailed, match=r"^the step writes in place into a view \(aten.mul_.Tensor into the "
                                              r"aten.detach.default of buffer 'scale'\) and then reads it \(aten.mul"):
        compile_step(step)


_OFFSETS = torch.arange(4.0)


class _ReadsAGlobal(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.fc(x) * _OFFSETS).square().mean()


def test_the_program_holds_copies_of_the_constants_and_parameters_it_was_compiled_with():
    """A tensor made outside the step (a global) is a constant kept by value, and the parameters are the program's
    own: changing the caller's afterwards changes neither the program's loss nor the module."""
    torch.manual_seed(0)
    module, x = _ReadsAGlobal(), torch.randn(3, 4)
    program = compile_step(import_step(module, (x,)))
    before = module(x).detach()
    weight = module.fc.weight.detach().clone()
    try:
        _OFFSETS.add_(1.0)
        program.params["fc.weight"].mul_(1.0)  # the program's own tensor: the module's stays
        out = run_step(program, program.plan(np.zeros(program.num_nodes, dtype=np.int64)), [torch.device("cpu")])
        torch.testing.assert_close(out.loss, before)
        program.params["fc.weight"].add_(1.0)
        torch.testing.assert_close(module.fc.weight.detach(), weight)
    finally:
        _OFFSETS.sub_(1.0)


def test_writes_into_views_add_only_the_copies_they_need():
    """A write into one half (``pieces``) leaves the other as it was: no snapshot. ``y[:, 0] = 0`` read as ``y`` adds
    one clone of ``y`` (3 x 6 float32: 72 bytes) after the write, and so does its backward's write into a view of
    the gradient, and no op else (no view made again); writes on the tensor itself (``itself``) add no op to those
    recorded; every view kept is read; the constant ``0.0`` made a tensor (``lift_fresh``) belongs to no node (-1:
    it runs where it is read)."""
    from collections import Counter

    torch.manual_seed(0)
    steps = {how: import_step(WritesInPlace(how), (torch.randn(3, 4),)) for how in ("pieces", "view", "itself")}
    programs = {how: compile_step(step) for how, step in steps.items()}

    def added(how):
        return Counter(op.target for op in programs[how].ops) - Counter(str(op.func) for op in steps[how].trace.ops)

    assert not [op for op in programs["pieces"].ops if op.target == "aten.clone.default"]
    assert added("view") == {"aten.clone.default": 2} and not added("itself")
    view = programs["view"]
    snapshots = [op for op in view.ops if op.target == "aten.clone.default" and op.out_shapes == [(3, 6)]]
    assert len(snapshots) == 2 and {op.out_bytes for op in snapshots} == {72}
    assert [op.node for op in view.ops if op.target == "aten.lift_fresh.default"] == [-1]
    for program in programs.values():
        read = {ref.index for op in program.ops for ref in op.reads if ref.kind == "op"}
        read |= {ref.index for ref in [program.loss, *program.grads.values()] if ref is not None and ref.kind == "op"}
        assert all(k in read for k, op in enumerate(program.ops) if op.is_view)


def test_a_step_whose_backward_draws_random_numbers_is_not_compiled():
    """A checkpointed dropout recomputed in the backward draws another mask op by op: no program of it."""
    step = import_step(CheckpointedDropout(), (torch.randn(8, 4),))
    with pytest.raises(ExecutionFailed, match=r"the step's backward draws random numbers \(aten\.bernoulli_"):
        compile_step(step)



@pytest.mark.parametrize("given", [None, "step"])
def test_what_is_no_imported_step_is_refused_in_one_line(given):
    # an AttributeError ('trace') from inside
    with pytest.raises(InvalidArgument, match=r"^compile_step needs an imported step \(gnplace\.importers\.torch\."
                                              r"import_step\), got "):
        compile_step(given)
