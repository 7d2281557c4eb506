"""A compiled program and its plan: where each op runs under a placement, what crosses, the peak bytes."""

import numpy as np
import pytest
import torch

from gnplace.exceptions import ExecutionFailed, InvalidPlacement
from gnplace.execute.compiler import compile_step
from gnplace.execute.program import BEFORE, resolve_aten
from gnplace.execute.runner import run_step
from gnplace.importers.torch import import_step
from gnplace.importers.trace import Ref
from tests.execute.models import Net, SharedGrad, WritesInPlace


def _step():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
    return import_step(net, (torch.randn(5, 6),), loss=lambda y: y.square().mean())


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


def _shared_grad_step():
    torch.manual_seed(0)
    module = SharedGrad()
    return module, import_step(module, (torch.randn(16, 8),))


def test_a_gradient_already_crossing_or_shared_by_two_parameters_crosses_once():
    """Each (tensor, device) crosses once: a second transfer under the same tag would never be received (deadlock)."""
    _, step = _shared_grad_step()
    program = compile_step(step)
    assert program.grads["p"] == program.grads["q"]  # one tensor, the gradient of both
    names = step.graph.node_names
    devices = np.array([1 if n in ("update/p", "update/q", "grad/w/sum") else 0 for n in names], dtype=np.int64)
    plan = program.plan(devices)
    moves = [(ref, dst) for m in plan.moves.values() for ref, _, dst in m]
    moves += [(ref, dst) for _, ref, _, dst in plan.grad_moves]
    assert (program.grads["p"], 1) in moves
    assert len(moves) == len(set(moves)) == plan.num_moves


def _refs(op):
    from gnplace.execute.program import refs_in

    return refs_in((op.args, op.kwargs))


def _check_static_peaks(step, seed, placements, same):
    """``same(static, counted)`` on each of ``placements`` random placements over 3 CPU devices."""
    program = compile_step(step)
    rng = np.random.default_rng(seed)
    for _ in range(placements):
        plan = program.plan(rng.integers(0, 3, step.graph.num_ops))
        out = run_step(program, plan, [torch.device("cpu")] * 3)
        same(program.peak_bytes(plan, 3), out.peak_bytes)


def test_static_peak_bytes_match_the_executor_count():
    _check_static_peaks(_step(), 0, 4, np.testing.assert_allclose)


def test_plan_rejects_a_placement_of_another_graph():
    program = compile_step(_step())
    with pytest.raises(InvalidPlacement, match="nodes"):
        program.plan([0, 1])


def test_resolve_aten_names_a_missing_op():
    with pytest.raises(ExecutionFailed, match="no op"):
        resolve_aten("aten.no_such_op.default")


def test_plan_refuses_device_indices_that_are_not_whole_or_not_one_per_node():
    """0.7 was cut to device 0, and a [1, n] array was read as one placement."""
    program = compile_step(_step())
    n = program.num_nodes
    with pytest.raises(InvalidPlacement, match="whole numbers, got 0.7"):
        program.plan([0.7] * n)
    with pytest.raises(InvalidPlacement, match=rf"^placement has shape \(1, {n}\)"):
        program.plan(np.zeros((1, n), dtype=np.int64))
    with pytest.raises(InvalidPlacement, match="whole numbers, got 'gpu0'"):
        program.plan(["gpu0"] * n)
    assert program.plan([1.0] * n).op_device.tolist() == [1] * len(program.ops)


def test_static_peak_bytes_match_the_executor_count_with_buffers_and_shared_weights():
    """The count by storage, buffers' copies, the input and the gradient copies: the same without running."""
    torch.manual_seed(0)
    _check_static_peaks(import_step(Net(), (torch.randn(16, 8),)), 1, 6, np.testing.assert_array_equal)


@pytest.mark.parametrize("count", ["run", "static"])
def test_the_copies_of_the_buffers_a_step_reads_are_counted(count):
    """Batch norm's running statistics live on the device that updates them: 72 bytes the count left out."""
    peaks = {}
    for track in (True, False):  # the same ops, with or without the running statistics
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8, track_running_stats=track))
        step = import_step(net, (torch.randn(16, 8),), loss=lambda y: y.square().mean())
        program = compile_step(step)
        plan = program.plan(np.zeros(step.graph.num_ops, dtype=np.int64))
        run = count == "run"
        peaks[track] = (run_step(program, plan, [torch.device("cpu")]).peak_bytes if run else
                        program.peak_bytes(plan, 1))[0]
        buffers = sum(b.numel() * b.element_size() for b in program.buffers.values())
    assert buffers == 0 and peaks[True] == peaks[False] + (8 + 8) * 4 + 8  # mean, variance, batch count


def test_the_program_runs_the_optimizer_its_graphs_update_nodes_name_and_counts_its_state():
    """A program compiled from an Adam graph named no optimizer: it ran, and counted, SGD's update."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
    x = torch.randn(5, 6)
    programs = {name: compile_step(import_step(net, (x,), loss=lambda y: y.square().mean(), optimizer=name))
                for name in ("sgd", "momentum", "adam", "adamw")}
    assert {name: program.optimizer for name, program in programs.items()} == {name: name for name in programs}
    devices = np.arange(programs["sgd"].num_nodes) % 2
    sgd = programs["sgd"]
    for name, factor in (("momentum", 1), ("adam", 2), ("adamw", 2)):
        program = programs[name]
        plan = program.plan(devices)
        state = np.zeros(2)
        for param, value in program.params.items():
            assert program.state_bytes(param) == factor * value.numel() * value.element_size()
            state[plan.param_device[param]] += program.state_bytes(param)
        for ranks in (False, True):
            np.testing.assert_array_equal(program.peak_bytes(plan, 2, ranks=ranks),
                                          sgd.peak_bytes(sgd.plan(devices), 2, ranks=ranks) + state)
        out = run_step(program, plan, [torch.device("cpu")] * 2, lr=0.1)
        np.testing.assert_array_equal(program.peak_bytes(plan, 2), out.peak_bytes)


def test_a_step_its_trace_program_and_plan_print_in_one_short_line():
    """Each printed every op and tensor: 130,000 characters for gnplace.execute.examples:transformer (a Plan 41,000)."""
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    step = import_step(net, (torch.randn(6, 4),), loss=lambda y: y.square().mean())
    program = compile_step(step)
    plan = program.plan(np.arange(step.graph.num_ops) % 2)
    assert repr(step.trace) == f"TrainingTrace(ops={len(step.trace.ops)}, params=4, buffers=0, inputs=1)"
    assert repr(step) == f"ImportedStep(graph={step.graph!r}, trace={step.trace!r})"
    assert repr(program) == (f"Program(graph='Sequential', ops={len(program)}, params=4, buffers=0, inputs=1, "
                             "optimizer='sgd')")
    assert repr(plan) == f"Plan(ops={len(program)}, devices=[0, 1], moves={plan.num_moves})" and plan.num_moves > 0


@pytest.mark.parametrize("how", ["itself", "pieces"])
def test_an_in_place_write_runs_where_the_value_it_writes_is(how):
    """A write into a split's piece follows the piece, which is placed only once the split (a view) follows its
    consumer: the second pass over the ops puts the write there too (with one pass, 'pieces' under seed 5 wrote
    on device 0 into a piece on device 1)"""
    torch.manual_seed(0)
    step = import_step(WritesInPlace(how), (torch.randn(3, 4),))
    program = compile_step(step)
    for seed in range(8):
        plan = program.plan(np.random.default_rng(seed).integers(0, 2, step.graph.num_ops))
        for i, op in enumerate(program.ops):
            target = plan.value_device.get(op.mutates, -1) if op.mutates is not None else -1
            assert target < 0 or plan.op_device[i] == target, (seed, i)


def test_a_value_read_by_several_ops_on_another_device_crosses_to_it_once():
    """Each (value, device) pair is one move, however many ops there read it (a second send under the same tag
    would never be received)."""
    step = _step()
    program = compile_step(step)
    for seed in range(6):
        plan = program.plan(np.random.default_rng(seed).integers(0, 2, step.graph.num_ops))
        moves = [(ref, dst) for m in plan.moves.values() for ref, _, dst in m]
        assert len(moves) == len(set(moves)), seed


_LOSSES = {  # each loss of a batch; the 0-d result of the first four lies in the storage of its elementwise losses
    "mse": lambda y, t: torch.nn.functional.mse_loss(y, t),
    "smooth_l1": lambda y, t: torch.nn.functional.smooth_l1_loss(y, t),
    "soft_margin": lambda y, t: torch.nn.functional.soft_margin_loss(y, t.sign()),
    "bce": lambda y, t: torch.nn.functional.binary_cross_entropy(y.sigmoid(), t.sigmoid(), reduction="sum"),
    "huber": lambda y, t: torch.nn.functional.huber_loss(y, t),
    "mse_none": lambda y, t: torch.nn.functional.mse_loss(y, t, reduction="none").sum(),
}


class _Scored(torch.nn.Module):
    def __init__(self, loss):
        super().__init__()
        self.layer, self.loss = torch.nn.Linear(8, 4), loss

    def forward(self, x, t):
        return self.loss(self.layer(x), t)


@pytest.mark.filterwarnings("ignore:FLOP rules do not know")
@pytest.mark.parametrize("loss", sorted(_LOSSES))
def test_each_output_is_counted_by_the_storage_torch_makes_it_in(loss, monkeypatch):
    """A 0-d ``mse_loss`` lies in a storage of its batch's elementwise losses (256 bytes here, 131,072 for
    ``examples.transformer``'s): the count held the loss's 4 bytes all step. Each new output of the step is now
    counted as the storage torch allocates for it, statically and as the step runs, which then agree."""
    import gnplace.execute.runner as runner

    torch.manual_seed(0)
    step = import_step(_Scored(_LOSSES[loss]), (torch.randn(16, 8), torch.randn(16, 4)))
    program = compile_step(step)
    made = {}
    call_op = runner.call_op

    def spy(op, fn, resolve, device):
        outputs = call_op(op, fn, resolve, device)
        if op.out_bytes:
            index = program.ops.index(op)
            made.update({Ref("op", index, k): o.untyped_storage().nbytes() for k, o in enumerate(outputs)
                         if isinstance(o, torch.Tensor)})
        return outputs

    monkeypatch.setattr(runner, "call_op", spy)
    plan = program.plan(np.zeros(step.graph.num_ops, dtype=np.int64))
    out = run_step(program, plan, [torch.device("cpu")])
    assert made and {ref: program.made_bytes(ref) for ref in made} == made
    held = made[program.loss] if program.loss in made else 0
    assert held == (16 * 4 * 4 if loss in ("mse", "smooth_l1", "soft_margin", "bce") else 4)
    np.testing.assert_array_equal(program.peak_bytes(plan, 1), out.peak_bytes)
    _check_static_peaks(step, 0, 2, np.testing.assert_array_equal)


def test_a_gradient_crossed_for_an_op_is_not_delivered_again_in_the_static_count():
    """``p``'s gradient crosses to device 1 for ``grad/w/sum`` there, where ``p`` is updated: the executor uses that
    copy, and the static count must not add another (a mutant delivering it again passed: no placement of the
    tests' random ones had such a gradient)."""
    _, step = _shared_grad_step()
    program = compile_step(step)
    names = step.graph.node_names
    plan = program.plan(np.array([1 if n in ("update/p", "update/q", "grad/w/sum") else 0 for n in names]))
    assert [(ref, src, dst) for _, ref, src, dst in plan.grad_moves] == program.deliveries(plan)  # w.bias's alone
    out = run_step(program, plan, [torch.device("cpu")] * 2)
    np.testing.assert_array_equal(program.peak_bytes(plan, 2), out.peak_bytes)


class _Gapped(torch.nn.Module):
    """A tensor made with gaps in its memory (rows of 4 floats, 8 apart): torch allocates the span, not the values."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(8, 4))

    def forward(self, x):
        return (x * self.w * torch.empty_strided((8, 4), (8, 1)).fill_(2.0)).sum()


def test_an_output_made_with_gaps_is_counted_by_the_span_of_its_storage():
    """``empty_strided((8, 4), (8, 1))`` holds 60 floats (240 bytes) for its 32: a mutant counting 128 passed."""
    step = import_step(_Gapped(), (torch.randn(8, 4),))
    program = compile_step(step)
    made = next(i for i, op in enumerate(program.ops) if op.target == "aten.empty_strided.default")
    assert program.value_bytes(Ref("op", made, 0)) == 128 and program.made_bytes(Ref("op", made, 0)) == 240
    _check_static_peaks(step, 0, 3, np.testing.assert_array_equal)


def test_the_forward_alone_runs_on_the_steps_devices_and_gives_its_loss_and_buffer_updates():
    """A call under no_grad ran the whole step, backward included: the forward program is the ops that did not run
    in the backward (15 of 47), on the devices the step's plan gives them."""
    torch.manual_seed(0)
    step = import_step(Net(), (torch.randn(16, 8),))
    program = compile_step(step)
    devices = [torch.device("cpu")] * 3
    for seed in range(3):
        plan = program.plan(np.random.default_rng(seed).integers(0, 3, step.graph.num_ops))
        forward, forward_plan = program.forward_only(plan)
        kept = [i for i, op in enumerate(program.ops) if not op.backward]
        assert 0 < len(forward.ops) == len(kept) < len(program.ops) / 2
        assert not any(op.backward for op in forward.ops) and forward.results() == [forward.loss]
        assert forward_plan.op_device.tolist() == plan.op_device[kept].tolist()
        assert not forward_plan.grad_moves and forward.grads == {} and forward.input_grads == {}
        whole, alone = run_step(program, plan, devices), run_step(forward, forward_plan, devices)
        assert torch.equal(alone.loss, whole.loss) and alone.grads == {}
        assert alone.buffers.keys() == whole.buffers.keys() == {"bn.running_mean", "bn.running_var",
                                                                "bn.num_batches_tracked"}
        for name, value in whole.buffers.items():
            assert torch.equal(alone.buffers[name], value)
        np.testing.assert_array_equal(forward.peak_bytes(forward_plan, 3), alone.peak_bytes)
    # a program compiled before the ops' phase was kept has no backward to leave out: the whole step runs
    import dataclasses

    old = dataclasses.replace(program, ops=[dataclasses.replace(op, backward=False) for op in program.ops])
    assert old.forward_only(old.plan([0] * step.graph.num_ops)) is None
