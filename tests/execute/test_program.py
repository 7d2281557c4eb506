import numpy as np
import pytest
import torch

from gnplace.exceptions import ExecutionFailed, InvalidPlacement
from gnplace.execute.program import BEFORE, compile_step, resolve_aten
from gnplace.execute.runner import run_step
from gnplace.importers.torch import import_step
from gnplace.importers.trace import Ref


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


def test_views_run_where_they_are_used_and_only_data_crosses():
    """A view runs where its first consumer runs; its source crosses to it, and other consumers get its output."""
    step = _step()
    program = compile_step(step)
    views = [i for i, op in enumerate(program.ops) if op.is_view]
    consumers = {i: [j for j, op in enumerate(program.ops) if any(r.kind == "op" and r.index == i for r in _refs(op))]
                 for i in views}
    source_crossed = split_consumers = 0
    for seed in range(6):  # random placements over two devices
        plan = program.plan(np.random.default_rng(seed).integers(0, 2, step.graph.num_ops))
        assert set(plan.op_device.tolist()) == {0, 1}
        moved = {(after, ref, src, dst) for after, moves in plan.moves.items() for ref, src, dst in moves}
        for i in views:
            if not consumers[i]:
                continue
            d = int(plan.op_device[i])
            assert d == plan.op_device[consumers[i][0]]
            for source in _refs(program.ops[i]):  # the data the view shows crosses to it
                src = plan.value_device[source]
                if src != d:
                    source_crossed += 1
                    assert (source.index if source.kind == "op" else BEFORE, source, src, d) in moved
            for j in consumers[i]:  # every consumer runs by the view or receives its output
                dst = int(plan.op_device[j])
                if dst != d:
                    split_consumers += 1
                    assert (i, Ref("op", i, 0), d, dst) in moved
    assert source_crossed and split_consumers  # both cases occur

    # the last layer's weight on device 1, all else on 0: it crosses once to device 0 (its
    # consumers), its gradient back to device 1
    devices = np.zeros(step.graph.num_ops, dtype=np.int64)
    devices[step.update_node["2.weight"]] = 1
    plan = program.plan(devices)
    weight_moves = [m for m in plan.moves.get(BEFORE, []) if m[0].name == "2.weight"]
    assert [(src, dst) for _, src, dst in weight_moves] == [(1, 0)]
    assert [g[0] for g in plan.grad_moves] == ["2.weight"]


def _refs(op):
    from gnplace.execute.program import refs_in

    return refs_in((op.args, op.kwargs))


def test_static_peak_bytes_match_the_executor_count():
    step = _step()
    program = compile_step(step)
    rng = np.random.default_rng(0)
    for _ in range(4):
        plan = program.plan(rng.integers(0, 3, step.graph.num_ops))
        out = run_step(program, plan, [torch.device("cpu")] * 3)
        np.testing.assert_allclose(program.peak_bytes(plan, 3), out.peak_bytes)


def test_plan_rejects_a_placement_of_another_graph():
    program = compile_step(_step())
    with pytest.raises(InvalidPlacement, match="nodes"):
        program.plan([0, 1])


def test_resolve_aten_names_a_missing_op():
    with pytest.raises(ExecutionFailed, match="no op"):
        resolve_aten("aten.no_such_op.default")


class _WritesInPlace(torch.nn.Module):
    """``y = linear(x)`` written in place: into a view of it (``y[:, 0] = 0``), or on the tensor itself."""

    def __init__(self, into_view: bool) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.into_view = into_view

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if self.into_view:
            y[:, 0] = 0.0  # the later users of y read the write through the view
        else:
            y.add_(1.0).relu_()  # in place on the tensor itself: its users follow the writes
        return (y * y).sum()


def test_a_write_into_a_view_is_refused_not_run_wrongly():
    """Run op by op the write would be lost (eager 0.59 against 2.48 placed); the program refuses the step."""
    step = import_step(_WritesInPlace(into_view=True), (torch.randn(2, 4),))
    assert step.graph.num_ops > 0  # the graph itself places and simulates
    with pytest.raises(ExecutionFailed, match=r"writes in place into a view \(aten\.fill_.* into the aten\.select"):
        compile_step(step)


class _WritesIntoAPiece(torch.nn.Module):
    """Halves of ``y = linear(x)`` activated in place; the loss reads the halves, or ``y`` itself."""

    def __init__(self, read_whole: bool) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 6)
        self.read_whole = read_whole

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        first, second = y.unsafe_chunk(2, dim=1)  # as the LSTM cell splits its gates
        first.sigmoid_()
        second.tanh_()
        return (y * y).sum() if self.read_whole else (first * second).sum()


def test_writes_into_pieces_run_unless_the_whole_is_read_after():
    """The LSTM cell's pattern (activations in place on the gates' chunks) runs; reading the whole is refused."""
    torch.manual_seed(0)
    module, x = _WritesIntoAPiece(read_whole=False), torch.randn(3, 4)
    step = import_step(module, (x,))
    loss = module(x)
    loss.backward()
    program = compile_step(step)
    out = run_step(program, program.plan(np.arange(program.num_nodes) % 2), [torch.device("cpu")] * 2)
    torch.testing.assert_close(out.loss, loss.detach())
    for name, p in module.named_parameters():
        torch.testing.assert_close(out.grads[name], p.grad)
    with pytest.raises(ExecutionFailed, match=r"into the aten\.unsafe_split.* and then reads that tensor"):
        compile_step(import_step(_WritesIntoAPiece(read_whole=True), (x,)))


def test_in_place_ops_on_a_tensor_itself_run_as_eager():
    torch.manual_seed(0)
    module, x = _WritesInPlace(into_view=False), torch.randn(2, 4)
    step = import_step(module, (x,))
    loss = module(x)
    loss.backward()
    program = compile_step(step)
    out = run_step(program, program.plan(np.zeros(program.num_nodes, dtype=np.int64)), [torch.device("cpu")])
    torch.testing.assert_close(out.loss, loss.detach())
    for name, p in module.named_parameters():
        torch.testing.assert_close(out.grads[name], p.grad)
