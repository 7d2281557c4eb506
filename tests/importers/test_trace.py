"""Recording one training step of a PyTorch module as aten ops (``gnplace.importers.trace``)."""

from __future__ import annotations

import logging
import re
import threading
import warnings
from collections.abc import Callable

import pytest
import torch
from torch import nn

from gnplace.exceptions import ExecutionFailed, InvalidArgument, UnsupportedGraph
from gnplace.importers.trace import Ref, TrainingTrace, _recording_device, record_training_step
from tests.importers.test_torch import _Block  # b(tanh(a(x)))


def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


def mse(out: torch.Tensor) -> torch.Tensor:
    return out.square().mean()


class Twice(nn.Module):
    """Calls ``fc`` twice; ``unused`` never runs."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.Tanh()
        self.unused = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.act(self.fc(x))).sum()


def calls_of(trace: TrainingTrace, name: str, *, backward: bool) -> list[tuple[str, int]]:
    return [op.call for op in trace.ops if op.name == name and op.backward == backward]


@pytest.mark.parametrize("model, shown", [
    (None, "None"), (lambda x: x, "the function <lambda>"), (nn.Linear, "the class torch.nn.modules.linear.Linear"),
])
def test_what_is_no_module_is_one_clear_error(model, shown):
    """None, a function or a module's class (not an instance) were AttributeErrors or a TypeError inside."""
    with pytest.raises(InvalidArgument, match=f"^the model must be a torch.nn.Module \\(an instance\\), got {shown}$"):
        record_training_step(model, (torch.zeros(2, 2),))


def test_a_module_called_twice_gives_two_calls():
    trace = record_training_step(Twice(), (torch.randn(2, 4),))
    assert trace.module_calls == {"": 1, "fc": 2, "act": 1}
    assert calls_of(trace, "addmm", backward=False) == [("fc", 0), ("fc", 1)]
    assert calls_of(trace, "tanh", backward=False) == [("act", 0)]
    forward_calls = {op.call for op in trace.ops if not op.backward}
    assert {("fc", 0), ("fc", 1)} <= forward_calls


def test_backward_ops_carry_the_call_of_their_forward_op():
    model = mlp()
    trace = record_training_step(model, (torch.randn(5, 6),), loss=mse)
    assert any(op.backward for op in trace.ops) and not trace.ops[0].backward
    first_backward = next(i for i, op in enumerate(trace.ops) if op.backward)
    assert all(op.backward for op in trace.ops[first_backward:])  # forward, then backward
    # the ReLU's gradient runs in the ReLU's call, each weight gradient in its Linear's call
    assert calls_of(trace, "relu", backward=False) == [("1", 0)]
    assert calls_of(trace, "threshold_backward", backward=True) == [("1", 0)]
    for name, ref in trace.grads.items():
        assert ref is not None and ref.kind == "op"
        assert trace.ops[ref.index].backward
        assert trace.ops[ref.index].call == (name.split(".")[0], 0), name
    # every backward op belongs to a call that ran forward ops
    forward_calls = {op.call for op in trace.ops if not op.backward}
    assert {op.call for op in trace.ops if op.backward} <= forward_calls


def test_gradients_of_a_module_called_twice_go_to_each_call():
    trace = record_training_step(Twice(), (torch.randn(2, 4),))
    assert calls_of(trace, "tanh_backward", backward=True) == [("act", 0)]
    # the weight gradient is an ``mm`` per call, each in the call whose addmm it differentiates
    weight_grad_calls = {op.call for op in trace.ops if op.backward and op.name == "mm"}
    assert weight_grad_calls == {("fc", 0), ("fc", 1)}


def test_backward_of_a_functional_op_between_module_calls_keeps_its_call():
    class Functional(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(torch.relu(self.a(x))).sum()

    trace = record_training_step(Functional(), (torch.randn(2, 4),))
    assert calls_of(trace, "relu", backward=False) == [("", 0)]
    assert calls_of(trace, "threshold_backward", backward=True) == [("", 0)]  # is ("b", 0)


def test_an_unused_parameter_gets_no_gradient():
    trace = record_training_step(Twice(), (torch.randn(2, 4),))
    assert trace.grads["unused.weight"] is None and trace.grads["unused.bias"] is None
    assert isinstance(trace.grads["fc.weight"], Ref)
    assert "unused" not in trace.module_calls
    loss, grads = trace.replay()
    assert grads["unused.weight"] is None


def test_frozen_parameters_and_buffers_are_not_trainable():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    model[0].bias.requires_grad_(False)
    trace = record_training_step(model, (torch.randn(3, 4),), loss=lambda out: out.sum())
    assert set(trace.params) == {"0.weight", "1.weight", "1.bias"} == set(trace.grads)
    assert set(trace.buffers) == {"1.running_mean", "1.running_var", "1.num_batches_tracked", "0.bias"}  # read each run
    assert trace.params["0.weight"] is model[0].weight  # the real tensors, not fakes


def test_replay_reproduces_eager_loss_and_gradients():
    model = mlp()
    x = torch.randn(5, 6)
    trace = record_training_step(model, (x,), loss=mse)
    assert trace.loss.kind == "op"
    loss, grads = trace.replay()
    eager_loss = mse(model(x))
    eager = torch.autograd.grad(eager_loss, list(model.parameters()))
    assert torch.allclose(loss, eager_loss)
    assert list(grads) == [name for name, _ in model.named_parameters()]
    for (name, got), want in zip(grads.items(), eager):
        assert got.shape == want.shape and torch.allclose(got, want, atol=1e-6), name


def test_a_shape_mistake_in_the_model_is_one_error_and_logs_no_traceback(caplog):
    with caplog.at_level("DEBUG"), \
            pytest.raises(UnsupportedGraph, match=r"op aten\.addmm\.default failed: .*\[8, 5\] X \[4, 2\]"):
        record_training_step(nn.Linear(4, 2), (torch.zeros(8, 5),), loss=lambda out: out.sum())
    assert not [r for r in caplog.records if r.levelno >= 40]  # fake tensors logged its traceback at ERROR level


def test_replay_under_autocast_runs_the_recorded_ops_uncast():
    """The caller's autocast cast the replayed float32 products to bfloat16: another loss than the recorded step's."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    trace = record_training_step(net, (torch.randn(5, 6),), lambda y: y.square().mean())
    assert trace.autocast == ()
    loss, grads = trace.replay()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cast_loss, cast_grads = trace.replay()
    assert torch.equal(cast_loss, loss) and all(torch.equal(cast_grads[k], g) for k, g in grads.items())


def test_replay_leaves_the_example_inputs_as_they_were_so_a_second_replay_gives_the_same_loss():
    class ScalesItsInput(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            x.div_(2)  # in place, into the caller's tensor
            return self.fc(x).square().mean()

    torch.manual_seed(0)
    model, x = ScalesItsInput(), torch.randn(3, 4)
    before = x.clone()
    eager = model(before.clone())
    trace = record_training_step(model, (x,))
    first, _ = trace.replay()
    second, _ = trace.replay()
    assert torch.equal(x, before)  # was halved by each replay
    assert torch.allclose(first, eager) and torch.allclose(second, eager)


def test_replay_with_new_parameters_and_inputs_is_a_function_of_them():
    model = mlp()
    trace = record_training_step(model, (torch.randn(5, 6),), loss=mse)
    torch.manual_seed(1)
    other = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    x = torch.randn(5, 6)
    loss, grads = trace.replay({k: v.detach() for k, v in other.named_parameters()}, [x])
    eager_loss = mse(other(x))
    assert torch.allclose(loss, eager_loss)
    for (name, got), want in zip(grads.items(), torch.autograd.grad(eager_loss, list(other.parameters()))):
        assert torch.allclose(got, want, atol=1e-6), name


def test_a_tuple_whose_first_item_is_the_loss_needs_no_loss_function():
    class LossAndLogits(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            logits = self.fc(x)
            return logits.sum(), logits

    trace = record_training_step(LossAndLogits(), (torch.randn(4, 3),))
    assert trace.ops[trace.loss.index].name == "sum"


def test_a_non_scalar_output_without_loss_is_unsupported():
    with pytest.raises(UnsupportedGraph, match=r"^Linear must return a scalar loss, not a tensor of shape \(2, 4\): pass loss= to map its output"):
        record_training_step(nn.Linear(4, 4), (torch.randn(2, 4),))  # returns [2, 4]


def test_hooks_are_removed_after_success_and_after_failure():
    model = mlp()
    record_training_step(model, (torch.randn(5, 6),), loss=mse)
    with pytest.raises(UnsupportedGraph, match="must return a scalar loss"):
        record_training_step(model, (torch.randn(5, 6),))
    for m in model.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks


@pytest.mark.filterwarnings("ignore:`torch.jit.trace(_method)?` is deprecated:DeprecationWarning")  # what users still have
@pytest.mark.parametrize("script", [torch.jit.script, lambda m: torch.jit.trace(m, torch.randn(5, 6))])
def test_a_torchscript_submodule_is_refused_in_one_line_leaving_no_hooks(script):
    """A scripted or traced submodule takes no hooks: a traceback came from register_forward_pre_hook, and the
    hooks already put on the modules before it stayed."""
    model = nn.Sequential(script(mlp()), nn.Linear(3, 1))
    with pytest.raises(UnsupportedGraph, match=r"^cannot trace a training step of Sequential: its submodule '0' is "
                                               r"a TorchScript module \(torch\.jit\.script or torch\.jit\.trace\)"):
        record_training_step(model, (torch.randn(5, 6),), loss=mse)
    assert not model._forward_hooks and not model._forward_pre_hooks
    with pytest.raises(UnsupportedGraph, match="of RecursiveScriptModule: it is a TorchScript module"):
        record_training_step(torch.jit.script(mlp()), (torch.randn(5, 6),), loss=mse)


def test_a_parameter_the_loss_holds_as_the_tensor_itself_is_refused_naming_it():
    """``w = model.weight`` kept by the loss: the recording read the real tensor as a constant, so the step had no
    gradient of the loss's term in it (a wrong gradient, silently); through the module it records."""
    model = mlp()
    held = model[0].weight
    with pytest.raises(UnsupportedGraph, match=r"read its parameter '0\.weight' as a tensor held from outside the "
                                               r"module's call .* \(module\.0\.weight inside the loss function\)"):
        record_training_step(model, (torch.randn(5, 6),), loss=lambda out: mse(out) + held.square().sum())
    trace = record_training_step(model, (torch.randn(5, 6),), loss=lambda out: mse(out) + model[0].weight.square().sum())
    assert trace.grads["0.weight"] is not None


def test_a_failing_op_is_named():
    message = r"^cannot trace a training step of Sequential: op aten\.addmm\.default failed: a and b must have"
    with pytest.raises(UnsupportedGraph, match=message):
        record_training_step(mlp(), (torch.randn(5, 7),), loss=mse)  # 7 features into Linear(6, 8)



@pytest.mark.skipif(not hasattr(torch, "_grouped_mm"), reason="this torch has no grouped matmul")
def test_a_grouped_matmul_of_float32_names_the_bfloat16_cast():
    """transformers' mixture-of-experts layers (Mixtral's by default) call it; a float32 model failed with no way out."""

    class Experts(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(2, 16, 16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch._grouped_mm(x, self.w, offs=torch.tensor([3, 6], dtype=torch.int32)).sum()

    with pytest.raises(UnsupportedGraph, match=r"op aten\._grouped_mm\.default failed: .*BF16.* \(aten\._grouped_mm "
                                               r"takes bfloat16 only: cast the model .*module\.to\(torch\.bfloat16\)"):
        record_training_step(Experts(), (torch.randn(6, 16),))

def test_a_model_whose_state_dict_raises_still_imports_without_the_state_record():
    from gnplace.importers.torch import from_module

    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)
            self.register_buffer("scale", torch.ones(3))

        def forward(self, x):
            return (self.lin(x) * self.scale).sum()

        def state_dict(self, *args, **kwargs):
            raise RuntimeError("this model saves itself another way")

    graph = from_module(Odd(), (torch.randn(2, 3),))
    assert "update/lin.weight" in graph.node_names and "untrained_state" not in graph.meta


@pytest.mark.parametrize("make, op", [
    (lambda: nn.Linear(4, 2).double(), "addmm"),
    (lambda: nn.Linear(4, 2, bias=False).double(), "mm"),
    (lambda: nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4).double()), "native_layer_norm"),
    (lambda: nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4).double()), "native_batch_norm"),
])
def test_a_step_eager_refuses_for_mixing_dtypes_is_refused_not_recorded(make, op):
    """``net.double()`` given float32 inputs: eager fails at the first product or norm; the fake kernels of addmm,
    mm and the norms computed a result anyway, and a step that cannot run was recorded."""
    with pytest.raises(RuntimeError):
        make()(torch.zeros(8, 4))
    with pytest.raises(UnsupportedGraph, match=rf"op aten\.{op}\.\w+ failed: {op} is given .*torch\.float64.* "
                                               r"eager PyTorch refuses too"):
        record_training_step(make(), (torch.zeros(8, 4),), lambda out: out.float().sum())


def test_a_half_precision_input_with_float32_norm_parameters_still_records():
    """Eager allows a bfloat16 input with float32 norm parameters (mixed precision): the check lets it pass."""
    norm = nn.LayerNorm(4)
    norm(torch.zeros(8, 4, dtype=torch.bfloat16))
    trace = record_training_step(norm, (torch.zeros(8, 4, dtype=torch.bfloat16),), lambda out: out.float().sum())
    assert any(op.name == "native_layer_norm" for op in trace.ops)


class _LayerTwice(nn.Module):
    """One layer with a batch norm registered under two names (``self.b = self.a``), and a buffer the forward adds."""

    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
        self.b = self.a

    def forward(self, x):
        if not hasattr(self, "seen"):
            self.register_buffer("seen", torch.ones(1))
        return self.b(self.a(x)).square().mean()


def test_recording_leaves_a_module_registered_twice_with_its_own_tensors():
    """functional_call swapped the twice-registered layer's fakes back in: the user's module computed fake tensors
    (its forward returned a FakeTensor) and could not be moved (``.to()``: "Couldn't swap Linear.weight")."""
    torch.manual_seed(0)
    model, x = _LayerTwice(), torch.randn(3, 4)
    before = {k: v for k, v in model.state_dict(keep_vars=True).items()}
    record_training_step(model, (x,))
    after = model.state_dict(keep_vars=True)
    assert list(after) == list(before) and all(after[k] is v for k, v in before.items())  # the very tensors
    assert type(model(x)) is torch.Tensor
    model.to(torch.float64)


class _KeepsLogits(nn.Module):
    """Keeps its last logits for logging, ``None`` before any call; counts its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.last_logits, self.calls = nn.Linear(4, 2), None, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.a(x)
        self.last_logits, self.calls = logits, self.calls + 1
        return logits.square().mean()


def test_an_attribute_the_forward_sets_to_a_tensor_keeps_its_value_from_before_the_recording():
    """``self.last_logits = logits`` over ``__init__``'s ``None`` was deleted after the recording (it held one of its
    fake tensors): ``net.last_logits`` after ``gnplace.apply`` was an AttributeError, where README says it keeps the
    value it had before. One the forward adds (none before) is still dropped, and a counter counts the recording."""
    model = _KeepsLogits()
    record_training_step(model, (torch.randn(3, 4),))
    assert model.last_logits is None and model.calls == 1
    del model.last_logits
    record_training_step(model, (torch.randn(3, 4),))
    assert not hasattr(model, "last_logits")


class _CheckpointedDropout(nn.Module):
    """A checkpointed segment with dropout: eager recomputes it in the backward with the forward's mask."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.drop = nn.Linear(4, 4), nn.Dropout(0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        segment = lambda h: self.drop(torch.tanh(self.a(h)))  # noqa: E731
        return torch.utils.checkpoint.checkpoint(segment, x, use_reentrant=False).square().sum()


def test_replay_refuses_a_checkpointed_dropout_rather_than_give_another_masks_gradients():
    """``replay`` drew a second mask in the backward where eager reuses the forward's: its gradients were not
    eager's under the same seed (the loss equal, the weight's gradient off by a third of its largest entry), silently."""
    torch.manual_seed(0)
    net, x = _CheckpointedDropout(), torch.randn(64, 4)
    trace = record_training_step(net, (x,))
    with pytest.raises(ExecutionFailed, match=r"backward draws random numbers \(aten\.bernoulli_\.float\)"):
        trace.replay()


class _CheckpointedAverage(nn.Module):
    """A non-reentrant checkpointed segment of two layers, then a buffer reassigned (a moving average)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.register_buffer("mean", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.utils.checkpoint.checkpoint(lambda y: self.b(torch.tanh(self.a(y))), x, use_reentrant=False)
        self.mean = 0.9 * self.mean + 0.1 * h.detach().mean(0)
        return h.square().sum()


def test_a_checkpoint_stopping_its_recomputation_early_leaves_no_module_call_open():
    """The non-reentrant checkpoint stops recomputing by raising once it has the tensors the backward needs: the calls
    it was in never closed, and the buffer's update, after the backward, was ``b``'s (``("b", 1)``), not the model's."""
    trace = record_training_step(_CheckpointedAverage(), (torch.randn(2, 4),))
    update = trace.ops[-1]
    assert update.name == "copy_" and not update.backward
    assert update.call == ("", 0)


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_a_step_recorded_under_no_grad_or_inference_mode_is_a_training_step_and_the_mode_is_kept(mode):
    """The caller's no_grad or inference_mode (an import from an evaluation loop) gave 'the loss has no gradient'."""
    model = mlp()
    x = torch.randn(5, 6)
    with mode():
        trace = record_training_step(model, (x,), loss=mse)
        assert not torch.is_grad_enabled()
    loss, grads = trace.replay()
    eager = torch.autograd.grad(mse(model(x)), list(model.parameters()))
    for got, want in zip(grads.values(), eager):
        torch.testing.assert_close(got, want)


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
def test_a_step_recorded_under_anomaly_detection_records_and_leaves_it_on():
    """detect_anomaly's NaN check read the fake gradients' values: 'its forward reads a tensor's value'."""
    model = mlp()
    x = torch.randn(5, 6)
    with torch.autograd.detect_anomaly():
        trace = record_training_step(model, (x,), loss=mse)
        assert torch.is_anomaly_enabled() and torch.is_anomaly_check_nan_enabled()
    loss, _ = trace.replay()
    torch.testing.assert_close(loss, mse(model(x)).detach())


class _MakesTensors(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, tokens):
        y = self.fc(x) * 2.0 + torch.ones(4) + torch.zeros(4, dtype=torch.float32) + tokens / 3
        return y.square().sum()


def test_ops_that_make_a_tensor_of_the_default_dtype_are_marked_and_replay_under_the_recorded_one():
    """Replayed under float64, torch.ones(4) and tokens / 3 made float64 where the step recorded float32."""
    model, x, tokens = _MakesTensors(), torch.randn(3, 4), torch.arange(12).reshape(3, 4)
    trace = record_training_step(model, (x, tokens))
    assert trace.default_dtype == torch.float32
    assert sorted(op.name for op in trace.ops if op.reads_default_dtype) == ["div", "ones"]
    want, _ = trace.replay()
    torch.set_default_dtype(torch.float64)
    try:
        got, _ = trace.replay()
    finally:
        torch.set_default_dtype(torch.float32)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=0, atol=0)


class _MakesComplex(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return (self.fc(x) * (torch.arange(4) * 1j).abs()).square().sum()


def test_the_default_dtype_is_recorded_and_put_back_and_a_complex_result_of_it_is_marked():
    """An integer tensor times ``1j`` is complex64 under float32 (complex128 under float64): the default gives it."""
    from gnplace.importers.trace import recorded_default_dtype

    trace = record_training_step(_MakesComplex(), (torch.randn(3, 4),))
    assert [op.name for op in trace.ops if op.reads_default_dtype] == ["mul"]
    torch.set_default_dtype(torch.float64)
    try:
        trace = record_training_step(nn.Linear(4, 4), (torch.randn(3, 4),), loss=mse)
    finally:
        torch.set_default_dtype(torch.float32)
    assert trace.default_dtype == torch.float64
    with recorded_default_dtype(torch.float64):
        assert torch.get_default_dtype() == torch.float64
    assert torch.get_default_dtype() == torch.float32


def test_a_lone_tensor_is_one_input_a_loss_of_no_element_is_refused_and_a_forward_dropout_replays():
    """``torch.zeros(3, 2)`` as the inputs is one input, not its 3 rows; a loss of 0 elements is no scalar; a dropout
    of the forward draws its mask once, as eager does (only a backward's draws are refused)."""
    from gnplace.importers.trace import positional_inputs

    x = torch.zeros(3, 2)
    assert len(positional_inputs(x)) == 1 and positional_inputs(x)[0] is x
    with pytest.raises(UnsupportedGraph, match=r"must return a scalar loss, not a tensor of shape \(0,\)"):
        record_training_step(mlp(), (torch.randn(4, 6),), loss=lambda out: out.flatten()[:0])
    trace = record_training_step(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)), (torch.randn(3, 4),), loss=mse)
    trace.check_replayable()


@pytest.mark.parametrize("inputs, shown", [(None, "NoneType None"), (3.0, "float 3.0"), ("x", "str 'x'")])
def test_example_inputs_that_are_no_tensor_or_sequence_are_refused_in_one_line(inputs, shown):
    """None was ``TypeError: 'NoneType' object is not iterable`` from inside the recording; a string was its
    characters, passed to forward."""
    from gnplace.importers.torch import from_module, import_step

    for call in (import_step, from_module):
        with pytest.raises(InvalidArgument, match=rf"^the example inputs must be a tensor or a tuple of forward's "
                                                  rf"inputs in order, got {re.escape(shown)}$"):
            call(nn.Linear(3, 2), inputs, loss=mse)


def test_a_dict_of_example_inputs_is_refused_in_one_line_not_passed_as_its_keys():
    """``import_step(net, {"x": x})`` passed the string "x" to forward: "linear(): argument 'input' must be Tensor,
    not str", a message that named no dict."""
    from gnplace.importers.torch import from_module, import_step

    net = nn.Linear(3, 2)
    for call in (lambda: import_step(net, {"x": torch.zeros(4, 3)}), lambda: from_module(net, {"x": torch.zeros(4, 3)})):
        with pytest.raises(InvalidArgument, match=r"^the example inputs are a dict \('x'\), not forward's inputs in "
                                                  r"order: give a tuple of them"):
            call()
    # a dict that forward takes as one argument goes inside a tuple
    class Keyed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, batch: dict) -> torch.Tensor:
            return self.fc(batch["x"]).sum()

    assert import_step(Keyed(), ({"x": torch.zeros(4, 3)},)).graph.num_ops > 0


class _WaitsInForward(nn.Module):
    """Marks ``inside`` as its forward runs (fake tensors, in a recording), then waits for ``go`` (at most 60 s)."""

    def __init__(self, inside: threading.Event, go: threading.Event) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.inside, self.go = inside, go

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.inside.set()
        assert self.go.wait(60)
        return self.fc(x).sum()


def _process_switches() -> tuple[object, ...]:
    return (torch.backends.mkldnn.enabled, torch.is_anomaly_enabled(), torch.backends.cuda.flash_sdp_enabled(),
            torch.backends.cuda.mem_efficient_sdp_enabled(), logging.getLogger("torch._subclasses.fake_tensor").disabled,
            list(warnings.filters))


def test_recordings_in_threads_that_overlap_leave_the_process_switches_as_they_were():
    """Each recording saved and restored oneDNN, the attention kernels, the fake tensors' log and a warnings filter
    (the process's): a second recording that began inside the first and ended after it restored the first's switches,
    and oneDNN stayed off, the log muted and the filter set for the rest of the process (imports in four threads)."""
    before = _process_switches()
    a_inside, b_inside, a_done = threading.Event(), threading.Event(), threading.Event()
    traces: dict[str, TrainingTrace] = {}

    def first() -> None:  # enters first, leaves first: while the second records
        traces["a"] = record_training_step(_WaitsInForward(a_inside, b_inside), (torch.randn(3, 4),))
        a_done.set()

    def second() -> None:
        assert a_inside.wait(60)
        traces["b"] = record_training_step(_WaitsInForward(b_inside, a_done), (torch.randn(3, 4),))

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert set(traces) == {"a", "b"}
    assert _process_switches() == before


class CTC(nn.Module):
    """Classes by frame and ``F.ctc_loss`` (``call``: ``functional``, ``module`` or ``torch``) of lengths given here."""

    def __init__(self, call: str, lengths: tuple, **options) -> None:
        super().__init__()
        self.head = nn.Linear(8, 6)
        self.call, self.lengths, self.options = call, lengths, options

    def forward(self, frames: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        log_probs = self.head(frames).log_softmax(-1)
        if self.call == "torch":  # reduction 1: the mean
            return torch.ctc_loss(log_probs, targets, *self.lengths, 0, 1, False)
        if self.call == "module":
            return nn.CTCLoss(**self.options)(log_probs, targets, *self.lengths)
        return nn.functional.ctc_loss(log_probs, targets, *self.lengths, **self.options)


@pytest.mark.parametrize("call, lengths, targets, options", [
    ("functional", ((12, 10, 12), (4, 3, 5)), (3, 5), {}),
    ("module", ((12, 10, 12), [4, 3, 5]), (3, 5), {"reduction": "sum", "zero_infinity": True}),
    ("torch", ([12, 12, 12], [4, 3, 5]), (3, 5), {}),
    ("functional", ((12, 12, 12), (4, 3, 5)), (12,), {"blank": 0}),  # targets concatenated
    ("functional", ((12,), (4,)), (4,), {}),  # unbatched: frames [T, 8]
    # an empty target: its loss is divided by max(length, 1), as ATen divides it, not by 0
    ("functional", ((12, 12, 12), (4, 0, 5)), (3, 5), {"zero_infinity": True}),
    # padded targets wider than the longest target, and a sequence of no frame (and no target): eager takes both
    ("functional", ((12, 10, 12), (4, 3, 5)), (3, 7), {}),
    ("functional", ((12, 0, 12), (4, 0, 5)), (3, 5), {"zero_infinity": True}),
])
def test_ctc_loss_of_lengths_given_as_ints_records_and_replays_eagers_loss_and_gradients(call, lengths, targets,
                                                                                         options):
    """F.ctc_loss was refused as an op whose "output shape depends on the data": fake tensors refuse aten._ctc_loss
    (torch tags it so for its overload of lengths in tensors), though its outputs' shapes follow from the lengths as
    ints; and its mean failed making a tensor of the target lengths in C++. Recorded, its outputs have the kernel's
    shapes, and the replay gives eager's loss and gradients, bit for bit."""
    torch.manual_seed(0)
    model = CTC(call, lengths, **options)
    frames = torch.randn(12, 8) if len(targets) == 1 and len(lengths[0]) == 1 else torch.randn(12, 3, 8)
    target = torch.randint(1, 6, targets)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "FLOP rules do not know")
        trace = record_training_step(model, (frames, target), loss=lambda loss: loss)
    loss, grads = trace.replay()
    want = model(frames, target)
    assert torch.equal(loss, want.detach())
    for got, eager in zip(grads.values(), torch.autograd.grad(want, list(model.parameters()))):
        assert torch.equal(got, eager)
    (ctc,) = [op for op in trace.ops if op.name == "_ctc_loss"]
    log_probs = model.head(frames).log_softmax(-1).detach()
    eager_outputs = torch.ops.aten._ctc_loss(log_probs if log_probs.dim() == 3 else log_probs.unsqueeze(1),
                                             target, list(lengths[0]), list(lengths[1]))
    assert [o.shape for o in ctc.outputs] == [o.shape for o in eager_outputs]


def test_ctc_loss_of_lengths_in_tensors_or_of_lengths_that_do_not_fit_is_refused_in_one_line():
    """Lengths in tensors size its work by their values: the message said to use masks of a fixed shape."""
    frames, targets = torch.randn(12, 3, 8), torch.randint(1, 6, (3, 5))
    tensors = CTC("functional", (torch.tensor([12, 12, 12]), torch.tensor([4, 3, 5])))
    with pytest.raises(UnsupportedGraph, match=r"^cannot trace a training step of CTC: ctc_loss's lengths are "
                                               r"tensors, whose values size its work \(aten._ctc_loss.Tensor\); give "
                                               r"input_lengths and target_lengths as tuples of ints$"):
        record_training_step(tensors, (frames, targets), loss=lambda loss: loss)
    for lengths, why in ((((12, 12, 13), (4, 3, 5)), "input lengths"), (((12, 12, 12), (4, 3, 6)), "padded targets"),
                         (((12, 12), (4, 3)), "must be of size batch_size")):
        with pytest.raises(UnsupportedGraph, match=f"op aten._ctc_loss.default failed: ctc_loss: .*{why}"):
            record_training_step(CTC("functional", lengths), (frames, targets), loss=lambda loss: loss)
    # as eager refuses them: a negative target length, target lengths not one per sequence, concatenated targets
    # longer or shorter than the target lengths sum to
    for lengths, given, why in ((((12, 12, 12), (4, -1, 5)), targets, "at least 0"),
                                (((12, 12, 12), (4, 3)), targets, "must be of size batch_size"),
                                (((12, 12, 12), (4, 3, 5)), torch.randint(1, 6, (13,)), "the target lengths sum to 12"),
                                (((12, 12, 12), (4, 3, 5)), torch.randint(1, 6, (11,)), "the target lengths sum to 12")):
        with pytest.raises(RuntimeError):
            nn.functional.ctc_loss(torch.randn(12, 3, 6).log_softmax(-1), given, *lengths)
        with pytest.raises(UnsupportedGraph, match=f"op aten._ctc_loss.default failed: ctc_loss: .*{why}"):
            record_training_step(CTC("functional", lengths), (frames, given), loss=lambda loss: loss)
    with pytest.raises(UnsupportedGraph, match=r"ctc_loss: blank 6 must be in label range \(0..5\)"):  # 6 classes
        record_training_step(CTC("functional", ((12, 12, 12), (4, 3, 5)), blank=6), (frames, targets),
                             loss=lambda loss: loss)


class _Teacher(nn.Module):
    """A student and a frozen teacher whose weights ``forward`` moves toward the student's, as ``how`` says."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.student, self.teacher, self.how = nn.Linear(4, 3), nn.Linear(4, 3), how
        self.teacher.requires_grad_(False)
        self.register_buffer("shift", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        moved = 0.9 * self.teacher.weight + 0.1 * self.student.weight.detach()
        if self.how == "assign teacher":
            self.teacher.weight.data = moved
        elif self.how == "assign student":
            self.student.weight.data = self.student.weight.data.clamp(-0.2, 0.2)
        elif self.how == "assign buffer":
            self.shift.data = self.shift + 1
        elif self.how == "copy":
            with torch.no_grad():
                self.teacher.weight.copy_(moved)
        elif self.how == "set_":
            self.shift.set_(self.shift + 1)
        elif self.how == "assign activation":  # a straight-through sign
            h = self.student(x)
            h.data = h.data.sign()
            return (h - self.teacher(x)).square().mean()
        elif self.how == "assign input":
            x.data = x.data.sign()
        return (self.student(x) - self.teacher(x) + self.shift).square().mean()


@pytest.mark.parametrize("how, name", [("assign teacher", "parameter 'teacher.weight'"),
                                       ("assign student", "parameter 'student.weight'"),
                                       ("assign buffer", "buffer 'shift'"),
                                       ("assign activation", r"the output of aten.addmm.default \(in 'student'\)"),
                                       ("assign input", "input 0")])
def test_a_forward_assigning_data_of_its_state_is_refused_not_recorded_reading_the_old_values(how, name):
    """``.data =`` is no op: the step read the old values (the old teacher: loss 0.831, eager's 0.710), silently."""
    with pytest.raises(UnsupportedGraph, match=rf"^cannot trace a training step of _Teacher: it gives {name} new "
                                               r"values by assigning its .data, .*torch.no_grad\(\) \(x.copy_\(new\)\)$"):
        record_training_step(_Teacher(how), (torch.randn(5, 4),))


@pytest.mark.parametrize("how", ["copy", "set_"])
def test_a_forward_writing_its_state_by_ops_replays_eagers_loss_and_gradients(how):
    torch.manual_seed(0)
    net, x = _Teacher(how), torch.randn(5, 4)
    eager_net = _Teacher(how)
    eager_net.load_state_dict(net.state_dict())
    trace = record_training_step(net, (x,))
    loss, grads = trace.replay()
    eager = eager_net(x)
    eager.backward()
    torch.testing.assert_close(loss, eager.detach())
    torch.testing.assert_close(grads["student.weight"], eager_net.student.weight.grad)


class _ScaledCheckpoint(nn.Module):
    """A reentrant checkpointed segment reading a plain tensor attribute that requires grad (no parameter)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.scale = nn.Linear(4, 4), torch.ones(4, requires_grad=True)

    def segment(self, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(h)) * self.scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(self.segment, self.fc(x), use_reentrant=True).square().mean()


def test_a_reentrant_checkpoint_records_eagers_gradients_and_leaves_the_callers_tensors_without_fake_ones():
    """Its step is back-propagated (torch.autograd.grad is refused), which must not fill .grad of the caller's tensors."""
    torch.manual_seed(0)
    net, x = _ScaledCheckpoint(), torch.randn(3, 4)
    trace = record_training_step(net, (x,))
    assert net.scale.grad is None and net.fc.weight.grad is None
    loss, grads = trace.replay()
    eager = net(x)
    eager.backward()
    torch.testing.assert_close(loss, eager.detach())
    torch.testing.assert_close(grads["fc.weight"], net.fc.weight.grad)


def test_replay_leaves_the_recorded_buffers_as_they_were():
    """Batch norm's step writes its running statistics in place: a replay writes into copies, not the trace's own."""
    trace = record_training_step(nn.BatchNorm1d(3), (torch.randn(4, 3),), loss=lambda out: out.square().sum())
    before = {k: v.clone() for k, v in trace.buffers.items()}
    trace.replay()
    assert all(torch.equal(trace.buffers[k], v) for k, v in before.items())


class _CheckpointedSteps(nn.Module):
    """One block called at three steps, each a reentrant checkpointed segment."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = _Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            x = torch.utils.checkpoint.checkpoint(self.cell, x, use_reentrant=True)
        return x.square().sum()


def test_the_first_op_of_a_rerun_call_is_that_calls_too():
    """The weight's ``t`` is the first op each rerun ``cell.a`` makes (an autograd node numbered as the call's first
    mark): its backward, a weight's gradient, is its Linear's, never the model's."""
    trace = record_training_step(_CheckpointedSteps(), (torch.randn(2, 4, requires_grad=True),))
    assert {op.call[0] for op in trace.ops if op.backward and op.name == "t"} == {"cell.a", "cell.b"}


class _TanhBetween(nn.Module):
    """``p``, whose forward checkpoints ``b(tanh(a(h)))``, in a ``sigmoid`` of a segment around it where ``outer`` is
    not None: the ``tanh`` and ``sigmoid`` are between module calls, in ``p``'s call."""

    def __init__(self, reentrant: bool, outer: bool | None = None) -> None:
        super().__init__()
        self.p = nn.Module()
        self.p.a, self.p.b = nn.Linear(4, 4), nn.Linear(4, 4)
        checkpoint = torch.utils.checkpoint.checkpoint

        def inner(h: torch.Tensor) -> torch.Tensor:
            return checkpoint(lambda z: self.p.b(torch.tanh(self.p.a(z))), h, use_reentrant=reentrant)

        self.p.forward = inner if outer is None else (  # type: ignore[method-assign]
            lambda x: checkpoint(lambda h: torch.sigmoid(inner(h)), x, use_reentrant=outer))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.p(x)).sum()


@pytest.mark.parametrize(("reentrant", "outer"), [(False, None), (True, None), (False, False), (True, False),
                                                  (False, True), (True, True)])
def test_a_recomputed_op_outside_the_segments_module_calls_is_in_the_call_around_the_segment(reentrant, outer):
    """In a non-reentrant rerun the ``tanh`` between ``a`` and ``b`` was tagged with the call of the node that asked for
    the rerun (``p.b``'s), where its forward twin is ``p``'s: its gradient and its recomputation fell in other
    groups; so was a non-reentrant segment's made anew in another segment's rerun. The reentrant rerun tagged them
    ``p``'s already, but for a reentrant segment made anew in a reentrant rerun: its node, made in the backward
    outside any module call, had no call, and its rerun's ``tanh`` was ``("", 0)``. The gradients of a reentrant
    rerun's ``tanh`` and ``sigmoid`` (their nodes made in the backward, which no call's hook walks to) were
    ``("", 0)`` too, where an unchecked or non-reentrant step has them in ``p``'s call."""
    trace = record_training_step(_TanhBetween(reentrant, outer), (torch.randn(2, 4, requires_grad=True),))
    between = [(op.name, op.call, op.backward) for op in trace.ops if op.name in ("tanh", "sigmoid")]
    assert {call for _, call, _ in between} == {("p", 0)}
    gradients = [op for op in trace.ops if op.name in ("tanh_backward", "sigmoid_backward")]
    assert len(gradients) == (1 if outer is None else 2) and {op.call for op in gradients} == {("p", 0)}
    assert {(name, backward) for name, _, backward in between} == \
        {("tanh", False), ("tanh", True)} | ({("sigmoid", False), ("sigmoid", True)} if outer is not None else set())
    assert {op.call for op in trace.ops if op.name == "relu"} == {("", 0)}


class _Branches(nn.Module):
    """``a`` called on one tensor before a checkpointed segment and twice inside it, around ``b``."""

    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.a, self.b, self.reentrant = nn.Linear(4, 4), nn.Linear(4, 4), reentrant

    def segment(self, h: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(h)) + self.a(h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(self.segment, self.a(x), use_reentrant=self.reentrant).square().sum()


def test_a_reentrant_rerun_recomputes_the_segments_calls_in_their_order():
    """The reentrant checkpoint reruns its whole segment: ``a`` (its second call), ``b``, ``a`` (its third)."""
    trace = record_training_step(_Branches(reentrant=True), (torch.randn(2, 4),))
    assert trace.module_calls == {"": 1, "a": 3, "b": 1}
    assert calls_of(trace, "addmm", backward=True) == [("a", 1), ("b", 0), ("a", 2)]


def test_a_non_reentrant_rerun_starts_at_its_segments_first_call_of_a_module_called_twice_on_its_input():
    """``a`` called twice on the segment's own input: the rerun started at the second call (the last before the node
    that asked for it), and its ``a``, ``b``, ``a`` were tagged ``a``'s third, ``b``'s second and ``a``'s fourth call,
    two of them calls that never ran. The segment is told by its own object: the reentrant version's tags (the rerun
    stops early, inside the last ``a``, once it has what the backward needs)."""
    trace = record_training_step(_Branches(reentrant=False), (torch.randn(2, 4),))
    assert trace.module_calls == {"": 1, "a": 3, "b": 1}
    backward = [op for op in trace.ops if op.backward]
    rerun = backward[:next(k for k, op in enumerate(backward) if op.name == "mm")]  # before the first gradient
    assert list(dict.fromkeys(op.call for op in rerun if op.call[0])) == [("a", 1), ("b", 0), ("a", 2)]
    assert all(op.call[1] < trace.module_calls[op.call[0]] for op in trace.ops)


class _NonReentrantInReentrant(_Branches):
    """``_Branches``' segment checkpointed non-reentrantly inside a reentrant segment."""

    def __init__(self) -> None:
        super().__init__(reentrant=True)

    def inner(self, h: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(super().segment, h, use_reentrant=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(self.inner, self.a(x), use_reentrant=True).square().sum()


def test_a_non_reentrant_segment_made_in_a_rerun_recomputes_the_calls_that_rerun_recomputed():
    """The reentrant rerun makes the non-reentrant segment anew (its forward ran under no_grad, without one), and
    recomputes ``a``, ``b``, ``a``; that segment's own recomputation then started at the last ``a`` before the node
    asking for it and went on to calls that never ran (``b``'s second, ``a``'s fourth)."""
    trace = record_training_step(_NonReentrantInReentrant(), (torch.randn(2, 4),))
    assert trace.module_calls == {"": 1, "a": 3, "b": 1}
    assert calls_of(trace, "addmm", backward=True) == [("a", 1), ("b", 0), ("a", 2), ("a", 1), ("b", 0)]
    assert all(op.call[1] < trace.module_calls[op.call[0]] for op in trace.ops)


class _ReentrantInNonReentrant(_Branches):
    """``_Branches``' segment checkpointed reentrantly inside a non-reentrant segment (or, unless ``checkpointed``,
    the same calls without a checkpoint)."""

    def __init__(self, checkpointed: bool = True) -> None:
        super().__init__(reentrant=False)
        self.checkpointed = checkpointed

    def inner(self, h: torch.Tensor) -> torch.Tensor:
        if not self.checkpointed:
            return super().segment(h)
        return torch.utils.checkpoint.checkpoint(super().segment, h, use_reentrant=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.checkpointed:
            return self.inner(self.a(x)).square().sum()
        return torch.utils.checkpoint.checkpoint(self.inner, self.a(x), use_reentrant=False).square().sum()


def test_a_reentrant_segment_in_a_non_reentrant_one_reruns_its_calls_twice_under_its_node():
    """The outer segment's recomputation runs the reentrant forward (``a``, ``b``, ``a``), then the reentrant node's
    backward runs it again under the same node: that second rerun went on from the first, to calls that never ran
    (``a``'s fourth and fifth of three, ``b``'s second), and the gradients of ``a``'s second and third calls and of
    ``b``'s went to them. Each call's gradients are now its own, as without the checkpoints."""
    trace = record_training_step(_ReentrantInNonReentrant(), (torch.randn(2, 4),))
    plain = record_training_step(_ReentrantInNonReentrant(checkpointed=False), (torch.randn(2, 4),))
    assert trace.module_calls == plain.module_calls == {"": 1, "a": 3, "b": 1}
    assert calls_of(trace, "addmm", backward=True) == [("a", 1), ("b", 0), ("a", 2)] * 2
    assert sorted(calls_of(trace, "mm", backward=True)) == sorted(calls_of(plain, "mm", backward=True))
    assert all(op.call[1] < trace.module_calls[op.call[0]] for op in trace.ops)


class _NestedCheckpoints(nn.Module):
    """A reentrant checkpointed segment holding another around ``blk``, given the outer segment's own input."""

    def __init__(self) -> None:
        super().__init__()
        self.blk = _Block()

    def segment(self, h: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(self.blk, h, use_reentrant=True) * 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(self.segment, self.blk(x), use_reentrant=True).square().sum()


def test_a_nested_reentrant_rerun_given_a_detach_of_a_detach_is_the_call_it_recomputes():
    """The inner segment's rerun gets a detach (the inner checkpoint's) of a detach (the outer's) of ``blk``'s first
    output: both reruns of ``blk`` recompute its second call, the one inside the segment, not a call of their own."""
    trace = record_training_step(_NestedCheckpoints(), (torch.randn(2, 4),))
    assert trace.module_calls == {"": 1, "blk": 2, "blk.a": 2, "blk.b": 2}
    assert calls_of(trace, "tanh", backward=True) == [("blk", 1), ("blk", 1)]
    assert all(op.call[1] < trace.module_calls[op.call[0]] for op in trace.ops)


class _ReentrantInReentrant(_Branches):
    """``_Branches``' segment checkpointed reentrantly inside a reentrant segment that then calls ``c`` (or, unless
    ``checkpointed``, the same calls without a checkpoint)."""

    def __init__(self, checkpointed: bool = True) -> None:
        super().__init__(reentrant=True)
        self.c, self.checkpointed = nn.Linear(4, 4), checkpointed

    def inner(self, h: torch.Tensor) -> torch.Tensor:
        if not self.checkpointed:
            return self.c(super().segment(h))
        return self.c(torch.utils.checkpoint.checkpoint(super().segment, h, use_reentrant=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.checkpointed:
            return self.inner(self.a(x)).square().sum()
        return torch.utils.checkpoint.checkpoint(self.inner, self.a(x), use_reentrant=True).square().sum()


def test_a_reentrant_segment_made_in_a_reentrant_rerun_recomputes_the_calls_that_rerun_recomputed():
    """The outer rerun makes the inner segment's node anew and recomputes its ``a``, ``b``, ``a``; the inner node's
    own rerun, given a detach of a detach of ``a``'s first output (the input of ``a``'s second and third calls), found
    no call of ``a`` opened after its node and went on to calls that never ran (``a``'s fourth and fifth of three,
    ``b``'s second), which got the gradients of the calls it recomputes. Each call's gradients are now its own."""
    trace = record_training_step(_ReentrantInReentrant(), (torch.randn(2, 4),))
    plain = record_training_step(_ReentrantInReentrant(checkpointed=False), (torch.randn(2, 4),))
    assert trace.module_calls == plain.module_calls == {"": 1, "a": 3, "b": 1, "c": 1}
    assert calls_of(trace, "addmm", backward=True) == [("a", 1), ("b", 0), ("a", 2), ("c", 0), ("a", 1), ("b", 0),
                                                       ("a", 2)]
    assert sorted(calls_of(trace, "mm", backward=True)) == sorted(calls_of(plain, "mm", backward=True))
    assert all(op.call[1] < trace.module_calls[op.call[0]] for op in trace.ops)


class _NonReentrantNest(_Branches):
    """``_Branches``' segment in ``levels`` nested checkpoints, non-reentrant but the outermost if ``reentrant``, each
    but the outermost with a layer after it (``c``, then ``d``), or, unless ``checkpointed``, the same calls without."""

    def __init__(self, levels: int, reentrant: bool = False, checkpointed: bool = True) -> None:
        super().__init__(reentrant=reentrant)
        self.c, self.d, self.levels, self.checkpointed = nn.Linear(4, 4), nn.Linear(4, 4), levels, checkpointed

    def checkpoint(self, segment: Callable[[torch.Tensor], torch.Tensor], h: torch.Tensor,
                   reentrant: bool = False) -> torch.Tensor:
        if not self.checkpointed:
            return segment(h)
        return torch.utils.checkpoint.checkpoint(segment, h, use_reentrant=reentrant)

    def nest(self, level: int) -> Callable[[torch.Tensor], torch.Tensor]:
        if level == self.levels:
            return super().segment
        inner, after = self.nest(level + 1), (self.c, self.d)[level - 1]
        return lambda h: after(self.checkpoint(inner, h))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.checkpoint(self.nest(1), self.a(x), self.reentrant).square().sum()


@pytest.mark.parametrize("levels, reentrant", [(2, False), (3, False), (3, True)])
def test_a_non_reentrant_segment_in_a_non_reentrant_one_recomputes_the_calls_it_nests(levels, reentrant):
    """The outer segment's recomputation runs under the hooks of the inner segment it makes anew, and its calls of
    ``a`` were the inner segment's only: its rerun started at the last ``a`` before the node asking for it, and went
    on to calls that never ran (``b``'s second, ``a``'s fourth), in groups no forward op is in. Each segment's rerun
    now recomputes its own calls, nested ones included, as without the checkpoints. In a reentrant segment's rerun,
    which makes both anew, the outer one's rerun starts where that rerun recomputed its first nested ``a``."""
    trace = record_training_step(_NonReentrantNest(levels, reentrant), (torch.randn(2, 4),))
    plain = record_training_step(_NonReentrantNest(levels, reentrant, checkpointed=False), (torch.randn(2, 4),))
    assert trace.module_calls == plain.module_calls
    forward = set(calls_of(plain, "addmm", backward=False))
    assert set(calls_of(trace, "addmm", backward=True)) <= forward
    assert calls_of(trace, "addmm", backward=True)[:3] == [("a", 1), ("b", 0), ("a", 2)]
    assert sorted(calls_of(trace, "mm", backward=True)) == sorted(calls_of(plain, "mm", backward=True))
    assert all(op.call[1] < trace.module_calls[op.call[0]] for op in trace.ops)


class _TwoSegmentsOfOneInput(nn.Module):
    """``fc`` checkpointed twice (non-reentrant) on the same tensor: two segments that compute the same."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.fc = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        y = torch.utils.checkpoint.checkpoint(self.fc, h, use_reentrant=False)
        z = torch.utils.checkpoint.checkpoint(self.fc, h, use_reentrant=False)
        return (y * z).sum()


def test_two_segments_of_one_input_each_recompute_their_own_call():
    """Each segment's rerun is the call of its own segment: the two calls' backwards are alike, op for op (the
    recomputed ``weight.t()`` included), though the first call's accumulates the weight's two gradients."""
    from collections import Counter

    trace = record_training_step(_TwoSegmentsOfOneInput(), (torch.randn(2, 4),))
    count = Counter(op.call for op in trace.ops if op.backward and op.name in ("t", "mm", "detach"))
    assert count[("fc", 0)] == count[("fc", 1)] > 0


class _RerunsAnotherLayer(nn.Module):
    """A reentrant segment whose rerun calls ``c`` where its forward called ``b`` (control flow that differs)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c, self.rerun = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4), False

    def segment(self, h: torch.Tensor) -> torch.Tensor:
        h = self.a(h)
        out = self.c(h) if self.rerun else self.b(h)
        self.rerun = True
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(self.segment, x, use_reentrant=True).square().sum()


def test_a_rerun_call_the_forward_did_not_make_is_a_new_call_of_its_module():
    trace = record_training_step(_RerunsAnotherLayer(), (torch.randn(2, 4, requires_grad=True),))
    assert calls_of(trace, "addmm", backward=True) == [("a", 0), ("c", 0)]  # not b's call


def _refuse(module: nn.Module, args: tuple) -> None:
    raise ValueError("not now")


class _CatchesItsChild(nn.Module):
    """Calls ``flaky``, whose own pre-hook raises, and goes on without it."""

    def __init__(self) -> None:
        super().__init__()
        self.flaky, self.fc = nn.Linear(4, 4), nn.Linear(4, 4)
        self.flaky.register_forward_pre_hook(_refuse)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            self.flaky(x)
        except ValueError:
            pass
        return torch.tanh(self.fc(x))


def test_a_child_whose_pre_hook_raises_closes_no_call_of_its_parent():
    """The child's pre-hook raised before the recorder's ran: its post-hook (always called) must not close the parent's."""
    trace = record_training_step(nn.Sequential(_CatchesItsChild()), (torch.randn(2, 4),), loss=lambda y: y.sum())
    assert calls_of(trace, "tanh", backward=False) == [("0", 0)]
    assert calls_of(trace, "tanh_backward", backward=True) == [("0", 0)]


def test_memory_owners_lists_the_pieces_of_nested_splits_outermost_first():
    """``a, b = h.chunk(2); a1, a2 = a.chunk(2)``: ``a1`` lies in piece 0 of the first chunk, then piece 0 of the
    second; walking ``a1`` first remembers ``a`` on the way, with its own piece alone."""
    from types import SimpleNamespace

    from gnplace.importers.trace import memory_owners

    ops = [SimpleNamespace(name="addmm"), SimpleNamespace(name="chunk"), SimpleNamespace(name="chunk")]
    h, a, a1, a2 = Ref("op", 0), Ref("op", 1, 0), Ref("op", 2, 0), Ref("op", 2, 1)
    storage = memory_owners(ops, {1: h, 2: a}.get, [None, None, None])
    assert storage(a1) == (h, ((1, 0), (2, 0)))
    assert storage(a) == (h, ((1, 0),))
    assert storage(a2) == (h, ((1, 0), (2, 1)))
    assert storage(Ref("op", 1, 1)) == (h, ((1, 1),))


def test_a_module_whose_state_lies_on_several_devices_records_as_on_one():
    """A module ``gnplace.apply`` placed holds its parameters on several devices (``cuda:0`` and ``cuda:1``); the
    recording failed ("Expected all tensors to be on the same device"), so ``apply`` again (in eval mode, the fix its
    refusal names) or ``import_step`` of it could not run. The meta device stands in for a second GPU here: a fake
    tensor's device is metadata, as the recording computes nothing."""
    from gnplace.importers.torch import import_step

    net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
    x = torch.randn(3, 4)
    before = import_step(net, (x,), loss=lambda y: y.sum()).graph
    net[2].to("meta")
    after = import_step(net, (x,), loss=lambda y: y.sum()).graph
    assert after.node_names == before.node_names
    assert after.flops.tolist() == before.flops.tolist() and after.out_bytes.tolist() == before.out_bytes.tolist()
    assert _recording_device([torch.zeros(1), torch.zeros(1, device="meta")]) == torch.device("cpu")
    assert _recording_device([torch.zeros(1), torch.zeros(1)]) is None
