"""A recorded step compiled into a program: the ops it keeps, and writes into views that still run as eager."""

import numpy as np
import pytest
import torch

from gnplace.exceptions import ExecutionFailed
from gnplace.execute.compiler import compile_step
from gnplace.execute.runner import run_step
from gnplace.importers.torch import import_step
from tests.execute.models import ViewsBeforeWrites, WritesInPlace


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
