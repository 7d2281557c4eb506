import numpy as np
import pytest
import torch

from gnplace.execute.compiler import compile_step
from gnplace.execute.runner import DeviceOutOfMemory, is_oom_error, run_step
from gnplace.importers.torch import import_step
from tests.execute.models import MakesItsOwnConstants, Net, ScalesItsInput, SharedGrad

CPU = torch.device("cpu")


def _eager(net, x):
    net.zero_grad()
    loss = net(*x) if isinstance(x, tuple) else net(x)
    loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in net.named_parameters()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_placed_step_gives_eager_loss_and_gradients(seed):
    torch.manual_seed(0)
    net, x = Net(), torch.randn(16, 8)
    step = import_step(net, (x,))
    want_loss, want_grads = _eager(net, x)
    program = compile_step(step)
    devices = np.random.default_rng(seed).integers(0, 3, step.graph.num_ops)
    out = run_step(program, program.plan(devices), [CPU, CPU, CPU])
    torch.testing.assert_close(out.loss, want_loss)
    for name, grad in want_grads.items():
        torch.testing.assert_close(out.grads[name], grad)
    assert out.moves == program.plan(devices).num_moves > 0


def test_update_applies_sgd_in_place():
    torch.manual_seed(0)
    net, x = Net(), torch.randn(16, 8)
    program = compile_step(import_step(net, (x,)))
    plan = program.plan(np.zeros(program.num_nodes, dtype=np.int64))
    params = {k: v.clone() for k, v in program.params.items()}
    out = run_step(program, plan, [CPU], params=params, lr=0.5)
    name = "b.weight"
    torch.testing.assert_close(params[name], program.params[name] - 0.5 * out.grads[name])


def test_capacity_is_enforced_and_torch_oom_recognised():
    torch.manual_seed(0)
    net, x = Net(), torch.randn(16, 8)
    program = compile_step(import_step(net, (x,)))
    plan = program.plan(np.zeros(program.num_nodes, dtype=np.int64))
    with pytest.raises(DeviceOutOfMemory) as info:
        run_step(program, plan, [CPU], capacity=np.array([1000.0]))
    assert info.value.device == 0
    assert is_oom_error(torch.OutOfMemoryError("CUDA out of memory"))
    assert not is_oom_error(ValueError("shape mismatch"))


def test_an_op_that_cannot_run_on_a_device_fails_in_one_line():
    from gnplace.exceptions import ExecutionFailed
    from gnplace.execute.runner import call_op

    torch.manual_seed(0)
    program = compile_step(import_step(Net(), (torch.randn(4, 8),)))
    op = program.ops[0]

    def cpu_only(*args, **kwargs):  # as a kernel recorded on one backend fails on another
        raise NotImplementedError("Could not run 'aten::x' with arguments from the 'CUDA' backend.\nCPU: registered")

    with pytest.raises(ExecutionFailed, match=rf"^op {op.target} failed on cpu: Could not run .*backend\.$"):
        call_op(op, cpu_only, lambda ref: None, CPU)

    def oom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    with pytest.raises(torch.OutOfMemoryError):  # left to the executor, which reports the placement as OOM
        call_op(op, oom, lambda ref: None, CPU)


def test_attention_is_recorded_with_ops_every_device_runs():
    from gnplace.execute.examples import transformer

    module, inputs = transformer()
    step = import_step(module, inputs)
    targets = {op.target for op in compile_step(step).ops}
    assert not any(t.endswith("_for_cpu") or "flash" in t or "efficient_attention" in t for t in targets)
    assert "aten._safe_softmax.default" in targets
    program = compile_step(step)
    devices = (step.graph.group % 2).astype(np.int64)
    out = run_step(program, program.plan(devices), [CPU, CPU])
    want_loss, want_grads = _eager(module, inputs)  # eager runs the fused CPU attention kernel
    torch.testing.assert_close(out.loss, want_loss, rtol=1e-4, atol=1e-6)
    for name, grad in want_grads.items():
        torch.testing.assert_close(out.grads[name], grad, rtol=1e-3, atol=1e-5)


class _Awkward(torch.nn.Module):
    """Ops whose arguments nest tensors (cat's list, a dict-built constant) and whose outputs are tuples."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(16)  # native_layer_norm: a tuple of three outputs
        self.register_buffer("shift", torch.arange(8.0))

    def forward(self, x):
        h = self.norm(torch.cat([self.a(x), x + self.shift], dim=1))
        var, mean = torch.var_mean(h, dim=1)
        parts = torch.split(h, 4, dim=1)
        return (var.sum() + mean.sum() + parts[1].square().mean() + torch.stack(list(parts[:2])).mean()
                + torch.zeros(2, device=x.device).sum())


@pytest.mark.parametrize("make", ["net", "awkward", "transformer"])
def test_argument_makers_build_what_tree_map_builds(make):
    from torch.utils._pytree import tree_flatten, tree_map

    from gnplace.execute.examples import transformer
    from gnplace.execute.runner import _flat, _op_builders
    from gnplace.importers.trace import Ref

    torch.manual_seed(0)
    if make == "transformer":
        module, inputs = transformer()
    else:
        module, inputs = (Net(), (torch.randn(4, 8),)) if make == "net" else (_Awkward(), (torch.randn(4, 8),))
    program = compile_step(import_step(module, inputs))
    token: dict[Ref, object] = {}

    def resolve(ref):  # a distinct object per reference, to check each lands where tree_map puts it
        return token.setdefault(ref, object())

    def reference(x):
        if isinstance(x, Ref):
            return resolve(x)
        if isinstance(x, torch.Tensor):
            return x.to(CPU)
        return CPU if isinstance(x, torch.device) else x

    def same(a, b):
        if isinstance(a, torch.Tensor):
            return isinstance(b, torch.Tensor) and torch.equal(a, b)
        if isinstance(a, (list, tuple)):
            return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        return a is b or a == b

    nested = 0
    for op in program.ops:
        make_args, make_kwargs = _op_builders(op)
        assert same(tuple(tree_map(reference, op.args)), make_args(resolve, CPU)), op.target
        assert same(tree_map(reference, op.kwargs), make_kwargs(resolve, CPU)), op.target
        assert op.reads == tuple(x for x in tree_flatten((op.args, op.kwargs))[0] if isinstance(x, Ref))
        nested += any(isinstance(a, (list, tuple)) and any(isinstance(x, Ref) for x in a) for a in op.args)
    assert make != "awkward" or nested >= 2  # cat's and stack's lists of tensors
    t = torch.ones(2)
    for out in (t, (t, None), [t, t], torch.max(torch.ones(2, 2), dim=1), ((t, [t]), 3), None, 2.0):
        assert _flat(out) == tree_flatten(out)[0] or all(a is b for a, b in zip(_flat(out), tree_flatten(out)[0]))


def test_a_program_that_ran_still_pickles_and_runs_the_same():
    import pickle

    torch.manual_seed(0)
    net, x = Net(), torch.randn(16, 8)
    program = compile_step(import_step(net, (x,)))
    plan = program.plan(np.zeros(program.num_nodes, dtype=np.int64))
    first = run_step(program, plan, [CPU])  # the ops keep their argument makers now
    again = pickle.loads(pickle.dumps(program))  # as the distributed timer sends it to its ranks
    assert not any("_builders" in op.__dict__ for op in again.ops)
    second = run_step(again, again.plan(np.zeros(again.num_nodes, dtype=np.int64)), [CPU])
    torch.testing.assert_close(first.loss, second.loss)
    for name, grad in first.grads.items():
        torch.testing.assert_close(grad, second.grads[name])


def test_a_reference_in_another_kind_of_container_is_still_resolved():
    from collections import namedtuple

    from gnplace.execute.program import ProgramOp
    from gnplace.execute.runner import _op_builders
    from gnplace.importers.trace import Ref

    Pair = namedtuple("Pair", "left right")
    ref = Ref("op", 0)
    op = ProgramOp("aten.add.Tensor", (Pair(ref, 2), [ref]), {"alpha": Pair(1, ref)}, 0, None, [(1,)], [torch.float32], 4)
    make_args, make_kwargs = _op_builders(op)  # tree_map's way: it looks into the namedtuple
    assert make_args(lambda r: "x", CPU) == (Pair("x", 2), ["x"])
    assert make_kwargs(lambda r: "x", CPU) == {"alpha": Pair(1, "x")}


def _linear_step():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    return import_step(net, (torch.randn(8, 16),), loss=lambda y: y.square().mean())


def test_parameters_alone_over_a_device_capacity_are_out_of_memory():
    """Device 1 holds only the parameters (their update nodes): no op output there, so nothing checked it."""
    step = _linear_step()
    program = compile_step(step)
    plan = program.plan((step.graph.phase == 2).astype(np.int64))
    with pytest.raises(DeviceOutOfMemory) as info:
        run_step(program, plan, [CPU, CPU], capacity=np.array([1e9, 100.0]))
    on_device_1 = sum(p.numel() * p.element_size() for k, p in program.params.items() if plan.param_device[k] == 1)
    assert info.value.device == 1 and info.value.needed == on_device_1


def test_a_real_oom_while_a_parameter_is_copied_to_its_device_is_that_devices(monkeypatch):
    step = _linear_step()
    program = compile_step(step)
    placement = np.zeros(step.graph.num_ops, dtype=np.int64)
    placement[step.update_node["2.weight"]] = 1
    plan = program.plan(placement)
    weight = program.params["2.weight"]
    assert _oom_device_when(monkeypatch, lambda tensor: tensor is weight, program, plan) == 1


def _oom_device_when(monkeypatch, fails, program, plan) -> int:
    """The device of the :class:`DeviceOutOfMemory` a step on two CPUs raises where ``Tensor.to`` runs out of memory
    for the tensors ``fails(tensor)`` picks (called from the frame that moves it)."""
    real = torch.Tensor.to

    def to(self, *args, **kwargs):
        if fails(self):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", to)
    with pytest.raises(DeviceOutOfMemory) as info:
        run_step(program, plan, [CPU, CPU])
    return info.value.device


def test_a_plan_beyond_the_torch_devices_given_is_one_clear_error():
    """An IndexError (list index out of range) before."""
    from gnplace.exceptions import InvalidPlacement

    program = compile_step(_linear_step())
    with pytest.raises(InvalidPlacement, match=r"^the plan runs on device 2, but 2 torch devices are given "
                                               r"\(devices 0\.\.1\)$"):
        run_step(program, program.plan([2] * program.num_nodes), [CPU, CPU])


def test_gradient_copies_on_the_parameters_device_are_counted():
    """Every update on device 1: each gradient crosses there after the last op and lives there until the update.

    The count left them out: device 1 peaked at its parameters' 2,704 bytes, with as many bytes of
    gradients beside them.
    """
    step = _linear_step()
    program = compile_step(step)
    plan = program.plan((step.graph.phase == 2).astype(np.int64))
    params = sum(p.numel() * p.element_size() for p in program.params.values())
    grads = sum(program.value_bytes(ref) for ref in program.grads.values())
    out = run_step(program, plan, [CPU, CPU])
    assert len(plan.grad_moves) == len(program.params) == 4
    assert out.peak_bytes[1] == params + grads == 2 * 2704
    np.testing.assert_array_equal(out.peak_bytes, program.peak_bytes(plan, 2))
    with pytest.raises(DeviceOutOfMemory) as info:  # fits the parameters, not their gradients as well
        run_step(program, plan, [CPU, CPU], capacity=np.array([1e9, 4000.0]))
    assert info.value.device == 1


def test_a_gradient_two_parameters_share_crosses_once_and_is_counted_once():
    """``p`` and ``q`` get one gradient tensor: the step copied it to their device twice, counted neither."""
    torch.manual_seed(0)
    x = torch.randn(16, 8)

    step = import_step(SharedGrad(), (x,))
    program = compile_step(step)
    devices = np.array([1 if n in ("update/p", "update/q") else 0 for n in step.graph.node_names], dtype=np.int64)
    plan = program.plan(devices)
    out = run_step(program, plan, [CPU, CPU])
    assert out.moves == plan.num_moves
    assert out.grads["p"] is out.grads["q"]
    assert out.peak_bytes[1] == 2 * 16 * 8 * 4 + 16 * 8 * 4  # p, q and their one gradient


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam", "adamw"])
def test_placed_steps_update_as_torch_optim_does_with_the_state_kept_on_each_parameters_device(optimizer):
    """The graph's optimizer ran as plain SGD: an Adam graph's executed update was SGD's, and its state was nowhere."""
    from gnplace.execute.runner import optimizer_state, place_params
    from tests.execute.test_optim import TORCH_OPTIMIZERS

    torch.manual_seed(0)
    net, x = SharedGrad(), torch.randn(16, 8)
    program = compile_step(import_step(net, (x,), optimizer=optimizer))
    assert program.optimizer == optimizer
    plan = program.plan(np.arange(program.num_nodes) % 2)
    assert set(plan.param_device.values()) == {0, 1}
    params = place_params(program.params, plan, [CPU, CPU], copy=True)
    state = optimizer_state(program, params, plan)
    reference = TORCH_OPTIMIZERS[optimizer](net.parameters(), 0.01)
    for _ in range(3):
        run_step(program, plan, [CPU, CPU], params=params, lr=0.01, state=state)
        reference.zero_grad()
        net(x).backward()
        reference.step()
    for name, p in net.named_parameters():
        assert torch.equal(params[name], p.detach()), name


def test_the_optimizer_state_is_counted_on_each_parameters_device():
    """Adam keeps two moments beside each parameter: the executor's peak left them out (the simulator's has them)."""
    torch.manual_seed(0)
    net, x = SharedGrad(), torch.randn(16, 8)
    peaks = {}
    for optimizer in ("sgd", "adam"):
        program = compile_step(import_step(net, (x,), optimizer=optimizer))
        plan = program.plan(np.arange(program.num_nodes) % 2)
        peaks[optimizer] = run_step(program, plan, [CPU, CPU], lr=0.01).peak_bytes
        np.testing.assert_array_equal(peaks[optimizer], program.peak_bytes(plan, 2))
    state = np.zeros(2)
    for name, p in program.params.items():
        state[plan.param_device[name]] += 2 * p.numel() * p.element_size()
    np.testing.assert_array_equal(peaks["adam"], peaks["sgd"] + state)


def test_an_input_the_step_writes_in_place_is_as_recorded_in_every_run():
    """``.to`` hands back the input itself on its own device: the write compounded, step after step (x 256 after 8)."""
    torch.manual_seed(0)
    module, x = ScalesItsInput(), torch.randn(3, 4)
    want = module(x.clone()).detach()
    program = compile_step(import_step(module, (x.clone(),)))
    recorded = program.inputs[0].clone()
    for devices in (np.zeros(program.num_nodes, dtype=np.int64), np.arange(program.num_nodes) % 2):
        for _ in range(3):
            torch.testing.assert_close(run_step(program, program.plan(devices), [CPU, CPU]).loss, want)
    assert torch.equal(program.inputs[0], recorded)


def test_a_step_recorded_under_another_default_dtype_makes_its_tensors_of_that_dtype_wherever_it_runs():
    """Recorded under float64, run under float32 (a rank's process, a later call): torch.ones(4, 4) came out float32 and
    the product with the float64 layer failed ('expected m1 and m2 to have the same dtype')."""
    from gnplace.execute.rank import run_rank

    torch.manual_seed(0)
    was = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        net, x = MakesItsOwnConstants(), torch.randn(5, 6)
        step = import_step(net, (x,))
        want_loss, want_grads = _eager(net, x)
    finally:
        torch.set_default_dtype(was)
    program = compile_step(step)
    assert program.default_dtype == torch.float64
    assert compile_step(import_step(Net(), (torch.randn(4, 8),))).default_dtype is None  # no op reads it
    plan = program.plan(np.arange(step.graph.num_ops) % 2)
    out = run_step(program, plan, [CPU, CPU])
    torch.testing.assert_close(out.loss, want_loss, rtol=0, atol=0)
    for name, grad in want_grads.items():
        torch.testing.assert_close(out.grads[name], grad, rtol=0, atol=0)
    params = {k: v.clone() for k, v in program.params.items()}
    alone = program.plan(np.zeros(step.graph.num_ops, dtype=np.int64))
    _, _, got = run_rank(program, alone, 0, CPU, params, lr=0.0, collect=True, op_seconds=np.zeros(len(program)))
    torch.testing.assert_close(got["loss"], want_loss, rtol=0, atol=0)
    assert torch.get_default_dtype() == was


def test_an_input_leaves_memory_after_its_last_use(monkeypatch):
    """The loop that admitted the inputs kept the last one in its variable all step: a GPU copy of tiny's target
    stayed on its device through the backward (16 ops after its last use), where the ledger counted it freed."""
    import weakref

    import gnplace.execute.runner as runner
    from gnplace.execute import examples
    from gnplace.execute.program import Program
    from gnplace.importers.trace import Ref

    module, inputs = examples.tiny()
    program = compile_step(import_step(module, inputs))
    plan = program.plan(np.zeros(program.num_nodes, dtype=np.int64))
    made = {}

    def input_copy(self, k, device):  # a copy of its own, as on a GPU (on a CPU it is the program's tensor)
        copy = self.inputs[k].clone()
        made[k] = weakref.ref(copy)
        return copy

    alive = []  # whether the target's copy lives, before each op
    call_op = runner.call_op

    def spy(op, fn, resolve, device):
        alive.append(made[1]() is not None)
        return call_op(op, fn, resolve, device)

    monkeypatch.setattr(Program, "input_copy", input_copy)
    monkeypatch.setattr(runner, "call_op", spy)
    run_step(program, plan, [CPU])
    last = plan.last_use[Ref("input", name="1")]
    assert len(alive) == len(program.ops) > last + 1
    assert alive[last] and not any(alive[last + 1:])


def test_a_tensor_sent_to_another_device_leaves_its_maker_once_sent():
    """Layers 0-1 on device 0, layer 2 and the loss on device 1: device 1 makes ``grad/2/mm`` (1,024 bytes) for
    device 0 alone. The executor held it on device 1 until device 0's ``threshold_backward`` read it, after the last
    use anywhere, so it sat beside ``grad/2/mm_1`` (512 bytes): device 1 peaked at 3,220 bytes, now 2,708."""
    from gnplace.importers.trace import Ref

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    step = import_step(net, (x,), loss=lambda y: y.square().mean())
    program = compile_step(step)
    devices = np.array([(0, 0, 1, 1)[k] for k in step.graph.group], dtype=np.int64)
    plan = program.plan(devices)
    made = next(i for i, op in enumerate(program.ops) if step.graph.node_names[op.node] == "grad/2/mm")
    sent = Ref("op", made, 0)
    assert plan.moves[made] == [(sent, 1, 0)]
    assert (sent, 1) in plan.frees[made] and (sent, 0) in plan.frees[plan.last_use[sent]]
    out = run_step(program, plan, [CPU, CPU])
    assert out.peak_bytes.tolist() == [5760, 2708]
    np.testing.assert_array_equal(out.peak_bytes, program.peak_bytes(plan, 2))
    net.zero_grad()
    loss = net(x).square().mean()
    loss.backward()
    torch.testing.assert_close(out.loss, loss.detach())
    for name, p in net.named_parameters():
        torch.testing.assert_close(out.grads[name], p.grad)


def test_a_tensor_sent_to_another_device_is_gone_from_its_maker_before_the_makers_next_op(monkeypatch):
    """The count frees ``grad/2/mm`` on device 1 once copied to device 0, but the executor's list of the op's outputs
    (and its loop variable) held it through the next op: one op's outputs more than counted on a GPU. The copy is a
    clone here, as between two devices (one CPU hands back the tensor itself)."""
    import weakref

    import gnplace.execute.runner as runner

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    step = import_step(net, (torch.randn(8, 16),), loss=lambda y: y.square().mean())
    program = compile_step(step)
    plan = program.plan(np.array([(0, 0, 1, 1)[k] for k in step.graph.group], dtype=np.int64))
    made = next(i for i, op in enumerate(program.ops) if step.graph.node_names[op.node] == "grad/2/mm")
    call_op, made_here, alive = runner.call_op, [], []

    def spy(op, fn, resolve, device):
        if made_here:
            alive.append(made_here.pop()() is not None)
        outputs = call_op(op, fn, resolve, device)
        if op is program.ops[made]:
            made_here.append(weakref.ref(outputs[0]))
        return outputs

    monkeypatch.setattr(runner, "call_op", spy)
    monkeypatch.setattr(runner, "_cross", lambda value, devices, target: value.clone())
    run_step(program, plan, [CPU, CPU])
    assert alive == [False]


def test_a_plan_pickled_before_it_had_frees_runs_and_frees_as_it_then_did():
    """A placed module saved before :attr:`Plan.frees` unpickles a plan without it: the step failed on it."""
    import pickle

    from gnplace.execute.program import Plan

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    step = import_step(net, (torch.randn(8, 16),), loss=lambda y: y.square().mean())
    program = compile_step(step)
    plan = program.plan(np.array([(0, 0, 1, 1)[k] for k in step.graph.group], dtype=np.int64))
    state = dict(pickle.loads(pickle.dumps(plan)).__dict__)
    del state["frees"]
    old = Plan.__new__(Plan)
    old.__setstate__(state)
    out = run_step(program, old, [CPU, CPU])
    assert out.peak_bytes.tolist() == [5760, 3220]  # grad/2/mm held on device 1 until device 0 read it, as before
    np.testing.assert_array_equal(out.peak_bytes, program.peak_bytes(old, 2))
    torch.testing.assert_close(out.loss, run_step(program, plan, [CPU, CPU]).loss)


def test_a_real_oom_while_a_tensor_crosses_is_the_receiving_devices(monkeypatch):
    """Layers 0-1 on device 0, layer 2 and the loss on device 1: the first crossing is layer 1's activation, to device
    1. Its copy allocates there, so running out then is device 1's OOM (a mutant naming device 0 passed)."""
    import sys

    step = _linear_step()
    program = compile_step(step)
    plan = program.plan(np.array([(0, 0, 1, 1)[k] for k in step.graph.group], dtype=np.int64))
    crossing = lambda tensor: sys._getframe(2).f_code.co_name == "_cross"  # noqa: E731 (to's caller)
    assert _oom_device_when(monkeypatch, crossing, program, plan) == 1


def test_a_real_oom_while_a_parameters_optimizer_state_is_made_is_that_parameters_devices(monkeypatch):
    """Adam's moments of ``2.weight`` (updated on device 1) are made there: running out is device 1's OOM."""
    from gnplace.execute.optim import OptimizerState
    from gnplace.execute.runner import optimizer_state, place_params

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    step = import_step(net, (torch.randn(8, 16),), loss=lambda y: y.square().mean(), optimizer="adam")
    program = compile_step(step)
    placement = np.zeros(step.graph.num_ops, dtype=np.int64)
    placement[step.update_node["2.weight"]] = 1
    plan = program.plan(placement)
    params = place_params(program.params, plan, [CPU, CPU], copy=True)
    add = OptimizerState.add

    def add_or_fail(self, name, param):
        if name == "2.weight":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB")
        add(self, name, param)

    monkeypatch.setattr(OptimizerState, "add", add_or_fail)
    with pytest.raises(DeviceOutOfMemory) as info:
        optimizer_state(program, params, plan)
    assert info.value.device == 1


def test_an_input_the_step_never_reads_is_not_counted():
    """An input no op reads has no device of its own: holding it on device 0 would add its 4,000 bytes there."""

    class Ignores(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 2)

        def forward(self, x, unused):
            return self.a(x).square().mean()

    torch.manual_seed(0)
    x, unused = torch.randn(3, 4), torch.randn(100, 10)  # 4,000 bytes unread
    program = compile_step(import_step(Ignores(), (x, unused)))
    plan = program.plan(np.zeros(program.num_nodes, dtype=np.int64))
    assert len(program.inputs) == 2 and list(plan.input_device) == [0]
    out = run_step(program, plan, [CPU])
    assert out.peak_bytes[0] < 4000
    np.testing.assert_array_equal(out.peak_bytes, program.peak_bytes(plan, 1))


def test_an_inputs_gradient_goes_back_to_the_inputs_device_and_only_when_outputs_are_kept():
    """Forward on device 0, the backward on device 1: the input's gradient is made on device 1 and crosses back to the
    input's device 0, one crossing beyond the plan's op and parameter-gradient moves. ``keep_outputs=False`` returns
    none of it."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    x = torch.randn(10, 6, requires_grad=True)
    step = import_step(net, (x,), loss=lambda y: y.square().mean())
    program = compile_step(step)
    plan = program.plan(np.array([n.startswith("grad/") for n in step.graph.node_names], dtype=np.int64))
    assert plan.input_device == {0: 0}
    out = run_step(program, plan, [CPU, CPU])
    assert out.moves == plan.num_moves + 1
    np.testing.assert_array_equal(out.peak_bytes, program.peak_bytes(plan, 2))
    net(x).square().mean().backward()
    torch.testing.assert_close(out.input_grads[0], x.grad)
    assert run_step(program, plan, [CPU, CPU], keep_outputs=False).input_grads == {}


def test_a_view_of_a_tensor_in_another_layout_is_made_as_a_reshape():
    """A tensor that crossed ranks arrives in its recorded layout: ``view`` fails on a transposed one, and is retried
    as a reshape (a copy), which gives the elements in order: 0, 3, 1, 4, 2, 5."""
    from gnplace.execute.program import ProgramOp
    from gnplace.execute.runner import call_op
    from gnplace.importers.trace import Ref

    ref = Ref("op", 0)
    op = ProgramOp("aten.view.default", (ref, [6]), {}, 0, None, [(6,)], [torch.float32], 0)
    transposed = torch.arange(6.0).reshape(2, 3).t()
    with pytest.raises(RuntimeError, match="reshape"):
        transposed.view(6)
    (out,) = call_op(op, torch.ops.aten.view.default, lambda r: transposed, CPU)
    assert out.tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]


def test_an_op_that_makes_a_tensor_makes_it_on_its_own_device_whatever_device_was_recorded():
    """``device=`` recorded as text (not a torch.device, which the argument makers replace) is set to the op's device."""
    from gnplace.execute.program import ProgramOp
    from gnplace.execute.runner import call_op

    op = ProgramOp("aten.zeros.default", ([2],), {"device": "meta", "dtype": torch.float32}, 0, None, [(2,)],
                   [torch.float32], 8)
    (out,) = call_op(op, torch.ops.aten.zeros.default, lambda r: None, CPU)
    assert out.device == CPU and out.tolist() == [0.0, 0.0]


def test_a_step_that_updates_the_programs_own_parameters_trains_copies():
    """Without ``params``, a CPU device's ``.to`` handed back the program's own tensors and ``lr`` trained them: each
    call started where the last left them (a loss of 0.0977, then 0.0222), where a GPU's copies did not move."""
    step = _linear_step()
    program = compile_step(step)
    plan = program.plan(np.zeros(program.num_nodes, dtype=np.int64))
    before = {name: p.clone() for name, p in program.params.items()}
    first = run_step(program, plan, [CPU], lr=0.5)
    second = run_step(program, plan, [CPU], lr=0.5)
    assert torch.equal(first.loss, second.loss)
    for name, p in program.params.items():
        assert torch.equal(p, before[name]), name
