"""Record one training step (forward, loss, backward) of a PyTorch module as a list of aten ops.

The recorder is a ``TorchDispatchMode`` under ``FakeTensorMode``: no real compute happens, so a
large model records in seconds, and every op comes with the shapes and dtypes of its tensors.
Module pre/post-forward hooks keep a stack of module *calls*; each forward op is tagged with the
innermost call that ran it, and the post-forward hook tags every autograd node created inside the
call (``Node.metadata``). During the backward pass ``torch._C._current_autograd_node()`` names the
autograd node being run, so every gradient op inherits the call of its forward op: that is the
colocation group (a module call, so that an RNN cell called at 35 time steps gives 35 groups). A
``torch.utils.checkpoint`` segment reruns its forward in the backward: those ops are the calls' that rerun them,
each the forward call it recomputes (:class:`_Recomputation`).

The record is executable: :meth:`TrainingTrace.replay` runs the recorded ops on real tensors, and
the tests check it reproduces eager gradients.
"""

from __future__ import annotations

import bisect
import logging
import reprlib
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import TreeSpec, tree_flatten, tree_map, tree_unflatten

from gnplace.exceptions import ExecutionFailed, InvalidArgument, UnsupportedGraph, first_line
from gnplace.importers.module_state import (
    ModuleCall,
    carry_reassigned_buffers,
    held_tensors,
    memory_of,
    refuse_state_read_from_outside,
    refuse_swapped_memory,
    restore_attributes,
    saved_attributes,
    state_names,
)
from gnplace.quiet import ignored_warnings
from gnplace.workers import SharedSetting

__all__ = [
    "Ref", "TracedOp", "TrainingTrace", "record_training_step", "positional_inputs", "input_leaves", "SPLIT_OPS",
    "held_tensors",
    "written_argument", "memory_owners", "autocast_state", "without_autocast", "recorded_default_dtype",
]

CallKey = tuple[str, int]  # (module path, how many times that module was called before)


@dataclass(frozen=True)
class Ref:
    """Where a tensor came from.

    ``kind`` is ``"op"`` (``index``: op, ``output``: which output), ``"param"``, ``"buffer"`` or
    ``"input"`` (``name``).
    """

    kind: str
    index: int = -1
    output: int = 0
    name: str = ""


@dataclass
class TracedOp:
    """One recorded aten op.

    Attributes:
        func: the aten overload called.
        args, kwargs: its arguments, tensors replaced by :class:`Ref`.
        outputs: the fake output tensors, flattened (``None`` for non-tensor outputs).
        call: the module call that owns the op (its colocation group).
        backward: whether it ran in the backward pass.
        reads_default_dtype: whether its floating output's dtype is torch's default dtype, given by no input
            and no ``dtype`` argument (``torch.ones(n)``, an integer tensor divided): run under another
            default, it makes another dtype.
    """

    func: Any
    args: Any
    kwargs: Any
    outputs: list[Any]
    call: CallKey
    backward: bool
    reads_default_dtype: bool = False

    @property
    def name(self) -> str:
        """The op's short name, e.g. ``"convolution"`` or ``"add_"``."""
        return str(self.func._opname)


@dataclass
class TrainingTrace:
    """Every aten op of one training step, with where each of their tensors came from.

    Attributes:
        ops: the ops in execution order.
        params: trainable parameters by name (the real tensors of the module).
        buffers: buffers by name, and the frozen parameters (``requires_grad`` off), read the same way.
        inputs: the example inputs (real tensors), flattened: the leaves of the positional inputs
            (a tuple or dict of tensors given as one input holds several), as :func:`input_leaves` lists them.
        loss: :class:`Ref` of the loss.
        grads: :class:`Ref` of each parameter's gradient (``None`` for a parameter the loss does not use).
        module_calls: how many times each module path was called.
        input_grads: :class:`Ref` of the gradient of each input given with ``requires_grad`` (by
            position; ``None`` for one the loss does not use), as eager ``backward()`` fills its ``.grad``.
        input_spec: how the positional inputs nest (the pytree spec the leaves ``inputs`` unflatten by).
        tied: state-dict names of parameters that are another's tensor (``lm_head.weight`` of a model that
            ties it to its input embedding), each to the name the tensor is held under in ``params`` or
            ``buffers``.
        untrained_state: state-dict names of the persistent buffers and frozen parameters (no gradient, no
            update), which a ``device_map`` must place too; a leaf module's beside its own trainable
            parameter are left out (they go with it under its key: batch norm's running statistics).
        autocast: the ``torch.autocast`` regions the step was recorded in (:func:`autocast_state`): the casts they
            made are ops of the step, which runs with autocast off.
        default_dtype: ``torch.get_default_dtype()`` when the step was recorded, which its ops that read it
            (:attr:`TracedOp.reads_default_dtype`) run under.
    """

    ops: list[TracedOp]
    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    inputs: list[torch.Tensor]
    loss: Ref
    grads: dict[str, Ref | None]
    module_calls: dict[str, int] = field(default_factory=dict)
    input_grads: dict[int, Ref | None] = field(default_factory=dict)
    input_spec: TreeSpec | None = None
    tied: dict[str, str] = field(default_factory=dict)
    untrained_state: list[str] = field(default_factory=list)
    autocast: tuple[tuple[str, str], ...] = ()
    default_dtype: torch.dtype = torch.float32

    def results(self) -> list[Ref]:
        """What the step hands back: the loss, then every parameter's and input's gradient that exists."""
        return [self.loss, *[g for g in (*self.grads.values(), *self.input_grads.values()) if g is not None]]

    def __repr__(self) -> str:  # every op and tensor printed: 130,000 characters for a small transformer
        return (f"TrainingTrace(ops={len(self.ops)}, params={len(self.params)}, buffers={len(self.buffers)}, "
                f"inputs={len(self.inputs)})")

    def check_replayable(self) -> None:
        """Refuse a step whose backward draws random numbers: a checkpointed segment recomputing a dropout.

        ``torch.utils.checkpoint`` runs its segment again in the backward with the random state of the forward
        put back, so eager dropout draws the same mask twice; the recorded step, run op by op, draws a new one,
        and the gradients would follow another mask than the loss did (wrong gradients, silently).

        Raises:
            ExecutionFailed: naming the random op.
        """
        for op in self.ops:
            if op.backward and torch.Tag.nondeterministic_seeded in op.func.tags:
                raise ExecutionFailed(
                    f"the step's backward draws random numbers ({op.func}): a checkpointed segment "
                    "(torch.utils.checkpoint) with dropout or another random op recomputes it with the forward's "
                    "random numbers, which running it op by op cannot; checkpoint the segment without its dropout, "
                    "or set dropout to 0, to run it on devices (the graph still places and simulates)"
                )

    def replay(
        self, params: dict[str, torch.Tensor] | None = None, inputs: list[torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor | None]]:
        """Run the recorded ops on real tensors; returns the loss and each parameter's gradient.

        Raises:
            ExecutionFailed: if the backward draws random numbers (:meth:`check_replayable`).
        """
        self.check_replayable()
        params = params if params is not None else {k: v.detach() for k, v in self.params.items()}
        # the recorded inputs are the caller's tensors: an op writing into one in place must not change them
        inputs = inputs if inputs is not None else [x.clone() if isinstance(x, torch.Tensor) else x
                                                    for x in self.inputs]
        values: list[list[Any]] = []

        def resolve(x: Any) -> Any:
            if isinstance(x, Ref):
                if x.kind == "op":
                    return values[x.index][x.output]
                if x.kind == "param":
                    return params[x.name]
                if x.kind == "buffer":
                    return self.buffers[x.name].clone()
                return inputs[int(x.name)]
            return x

        # the casts autocast made when recording are ops of the step; factories make the recorded default dtype
        with torch.no_grad(), without_autocast(), recorded_default_dtype(self.default_dtype):
            for op in self.ops:
                out = op.func(*tree_map(resolve, op.args), **tree_map(resolve, op.kwargs))
                flat, _ = tree_flatten(out)
                values.append(flat)
        loss = resolve(self.loss)
        return loss, {k: (resolve(r) if r is not None else None) for k, r in self.grads.items()}


_SKIP_NAMESPACES = ("prim",)


class _Recorder(TorchDispatchMode):
    def __init__(self, origin: dict[int, Ref], keep: list[Any], call_stack: list[CallKey]) -> None:
        super().__init__()
        self.origin = origin
        self.keep = keep
        self.call_stack = call_stack
        self.ops: list[TracedOp] = []
        self.current: str = ""
        self.failed: str = ""
        self.failed_in: str = ""  # the autograd node whose backward ran the failed op ("" in the forward)
        self.memory: dict[int, int | None] = {}  # id of each tensor the step made -> its memory when last made
        self.rerun_open = 0  # module calls open that the backward runs (a checkpoint's recomputation)
        # the call around each non-reentrant checkpoint segment in the forward, by the id of the segment (a
        # _ForwardCall of the recording keeps each alive): the call of its recomputed ops outside any module call
        self.segment_calls: dict[int, CallKey] = {}
        self.made_in_reruns: list[object] = []  # the segments of segment_calls a rerun made anew, kept alive
        # the call of each autograd node a reentrant rerun made outside the module calls it recomputes, by the node's
        # sequence number: no call's post-forward hook walks to it (the call around the segment does not rerun)
        self.made_in_reentrant_reruns: dict[int, CallKey] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        self.current = str(func)
        try:
            _check_dtypes(func, args, kwargs)
            out = _ctc_loss_outputs(*args, **kwargs) if func is _CTC_LOSS else func(*args, **kwargs)
        except Exception:
            self.failed = str(func)  # the op itself failed, not the model's Python code around it
            node = torch._C._current_autograd_node()
            self.failed_in = node.name() if node is not None else ""
            raise
        if func.namespace in _SKIP_NAMESPACES:
            return out
        node = torch._C._current_autograd_node()
        if node is not None and not self.rerun_open:
            call = self.outside_call(node)
            if node.name() == _REENTRANT_CHECKPOINT:  # a reentrant rerun: a segment it makes anew is in this call
                _tag_reentrant_segments_made(call)
                # and so is the node this op made, if it made one: autograd numbers it before the op dispatches
                self.made_in_reentrant_reruns[_SEQUENCE() - 1] = call
        else:  # the forward, or a module call that a checkpoint reruns in the backward: the call innermost
            call = self.call_stack[-1]

        def to_ref(x: Any) -> Any:
            if isinstance(x, torch.Tensor):
                ref = self.origin.get(id(x))
                if ref is None:  # a tensor made outside the step (a constant): keep it by value
                    return x
                return ref
            return x

        index = len(self.ops)
        arg_refs, kwarg_refs = tree_map(to_ref, args), tree_map(to_ref, kwargs)  # before in-place outputs re-map
        flat, _ = tree_flatten(out)
        outputs: list[Any] = []
        for k, t in enumerate(flat):
            if isinstance(t, torch.Tensor):
                self.origin[id(t)] = Ref("op", index, k)
                self.keep.append(t)
                self.memory[id(t)] = memory_of(t)
                outputs.append(t)
            else:
                outputs.append(None)
        self.ops.append(TracedOp(func, arg_refs, kwarg_refs, outputs, call, node is not None,
                                 _reads_default_dtype(func, args, kwargs, flat)))
        return out

    def outside_call(self, node: Any) -> CallKey:
        """The call of an op that the backward runs under ``node`` outside any module call a checkpoint reruns.

        The node's call (for a node that an op of a reentrant rerun made outside module calls, that op's); in a
        non-reentrant segment's recomputation (the node's call is that of the op whose saved tensor it asked for), or
        in the forward of one that a rerun made anew (under that segment's own hooks), the call around that segment.
        """
        metadata = _node_metadata(node)
        call: CallKey = metadata.get("gnplace_call") or self.made_in_reentrant_reruns.get(node._sequence_nr(), ("", 0))
        if self.segment_calls:
            segment = _checkpoint_segment(recomputing=True) or _checkpoint_segment(recomputing=False)
            if segment is not None:
                call = self.segment_calls.get(id(segment), call)
        return call


_CTC_LOSS = torch.ops.aten._ctc_loss.default
"""CTC's loss with its lengths given as Python ints (``F.ctc_loss``'s, as tuples or lists): fake tensors refuse it as an
op whose output shape depends on the data (torch tags it so, as its overload of lengths in tensors), though its outputs'
shapes follow from the lengths (:func:`_ctc_loss_outputs`)."""


def _ctc_loss_outputs(log_probs: torch.Tensor, targets: torch.Tensor, input_lengths: Sequence[int],
                      target_lengths: Sequence[int], blank: int = 0, zero_infinity: bool = False
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """:data:`_CTC_LOSS`'s outputs, of the shapes its kernels (CPU and CUDA) make, after their checks of shapes.

    The loss of each sequence ``[batch]`` and the forward variables ``[batch, T, 2 * max(target_lengths) + 1]``
    its backward reads, both of ``log_probs``' dtype (``log_probs`` ``[T, batch, classes]``: ``F.ctc_loss``
    unsqueezes an unbatched one; ``targets`` ``[batch, S]`` padded or ``[sum(target_lengths)]`` concatenated).

    Raises:
        RuntimeError: where the kernels refuse the shapes or lengths, as they do.
    """
    if log_probs.dim() != 3:
        raise RuntimeError(f"ctc_loss: log_probs has {log_probs.dim()} dimensions, [T, batch, classes] wanted")
    steps, batch, classes = log_probs.shape
    if not 0 <= blank < classes:
        raise RuntimeError(f"ctc_loss: blank {blank} must be in label range (0..{classes - 1})")
    if len(input_lengths) != batch or len(target_lengths) != batch:
        raise RuntimeError(f"ctc_loss: input_lengths ({len(input_lengths)}) and target_lengths "
                           f"({len(target_lengths)}) must be of size batch_size ({batch})")
    longest = max(target_lengths, default=0)
    if targets.dim() == 1 and targets.shape[0] != sum(target_lengths):
        raise RuntimeError(f"ctc_loss: concatenated targets of size {targets.shape[0]}, the target lengths sum to "
                           f"{sum(target_lengths)}")
    if targets.dim() != 1 and (targets.dim() != 2 or targets.shape[0] != batch or targets.shape[1] < longest):
        raise RuntimeError(f"ctc_loss: padded targets of shape {tuple(targets.shape)}, [{batch}, >= {longest}] "
                           "wanted")
    if any(not 0 <= n <= steps for n in input_lengths) or min(target_lengths, default=0) < 0:
        raise RuntimeError(f"ctc_loss: input lengths {tuple(input_lengths)} must be in 0..{steps}, target lengths "
                           f"{tuple(target_lengths)} at least 0")
    return log_probs.new_empty((batch,)), log_probs.new_empty((batch, steps, 2 * longest + 1))


class _CtcLossMean(TorchFunctionMode):
    """``F.ctc_loss`` (and ``torch.ctc_loss``) of lengths given as Python ints, averaged as ATen averages it, in ops.

    ATen's ``ctc_loss`` of ``reduction="mean"`` divides each sequence's loss by its target length, made a tensor
    in C++ (``at::tensor``) where fake tensors have no memory to write it to ("its data is not allocated yet"): the
    recording failed. Here its ``reduction="none"`` loss is divided by ``torch.tensor(target_lengths).clamp_min(1)``
    and averaged, as ATen does, so the step records :data:`_CTC_LOSS` and that division (the same values, and
    gradients, as eager's). Any other call runs as it is.
    """

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is not torch.nn.functional.ctc_loss and func is not torch.ctc_loss:
            return func(*args, **kwargs)
        import inspect

        from torch.nn import _reduction

        call = inspect.signature(torch.nn.functional.ctc_loss).bind(*args, **kwargs)
        call.apply_defaults()
        reduction, lengths = call.arguments["reduction"], call.arguments["target_lengths"]
        mean = reduction == "mean" if isinstance(reduction, str) else reduction == _reduction.get_enum("mean")
        if not mean or isinstance(lengths, torch.Tensor) or isinstance(call.arguments["input_lengths"], torch.Tensor):
            return func(*args, **kwargs)
        call.arguments["reduction"] = "none" if isinstance(reduction, str) else _reduction.get_enum("none")
        each = func(*call.args, **call.kwargs)
        return (each / torch.tensor(lengths, dtype=each.dtype, device=each.device).clamp_min(1)).mean()


def _reads_default_dtype(func: Any, args: Any, kwargs: Any, outputs: list[Any]) -> bool:
    """Whether an op made a floating (or complex) tensor whose dtype only torch's default dtype gave it.

    ``torch.ones(n)``, ``torch.arange(0.0, 1.0, 0.1)``, ``torch.rand(n)`` without ``dtype``, and an integer or
    boolean tensor divided or scaled by a Python float: no floating tensor among its inputs, no ``dtype`` given.
    """
    def floating(t: Any) -> bool:
        return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())

    if not any(floating(t) for t in outputs) or any(floating(t) for t in tree_flatten((args, kwargs))[0]):
        return False
    for k, argument in enumerate(func._schema.arguments):
        if argument.name == "dtype":
            given = args[k] if k < len(args) else kwargs.get("dtype")
            if given is not None:
                return False
    return True


#: Ops whose eager kernels refuse tensors of several floating dtypes (``mat1 and mat2 must have the same dtype``),
#: where the fake kernels the recorder runs do not check: products and convolutions.
_ONE_DTYPE_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "addr", "convolution", "_convolution",
})
#: Normalisations, whose eager kernels refuse parameters of another dtype than the input's, but float32 ones for a
#: half or bfloat16 input (``mixed dtype (CPU): expect parameter to have scalar type of Float``).
_NORM_OPS = frozenset({
    "native_layer_norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "_native_batch_norm_legit_functional", "native_group_norm",
})
_HALF_DTYPES = (torch.float16, torch.bfloat16)


def _check_dtypes(func: Any, args: Any, kwargs: Any) -> None:
    """Refuse an op that eager PyTorch refuses for mixing floating dtypes, which its fake kernel lets pass.

    A model cast with ``.double()`` given float32 inputs fails in eager at its first product or norm; recorded
    with fake tensors, ``addmm`` and the norms compute a result anyway, and the step that cannot run was
    recorded.

    Raises:
        RuntimeError: naming the dtypes (the recorder reports it as the op's failure).
    """
    name = str(func._opname)
    if name not in _ONE_DTYPE_OPS and name not in _NORM_OPS:
        return
    tensors = [t for t in tree_flatten((args, kwargs))[0]
               if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())]
    if not tensors:
        return
    first = tensors[0].dtype
    if name in _NORM_OPS:
        bad = [t.dtype for t in tensors[1:]
               if t.dtype != first and not (t.dtype == torch.float32 and first in _HALF_DTYPES)]
        what = f"an input of {first} and parameters of {', '.join(sorted({str(d) for d in bad}))}"
    else:
        bad = [t.dtype for t in tensors if t.dtype != first]
        what = f"tensors of {', '.join(sorted({str(t.dtype) for t in tensors}))}"
    if bad:
        raise RuntimeError(
            f"{name} is given {what}, which eager PyTorch refuses too: give the model and its inputs one dtype "
            "(model.to(x.dtype), or the inputs .to() the model's)"
        )


def positional_inputs(example_inputs: Any) -> tuple[Any, ...]:
    """``example_inputs`` as the tuple of positional inputs of ``forward``: a lone tensor is one input.

    Raises:
        InvalidArgument: for a dict, which a tuple would make the tuple of its keys: the strings reached
            ``forward`` as its inputs ("linear(): argument 'input' must be Tensor, not str"); for what is neither a
            tensor nor a sequence of inputs (None or a number was ``TypeError: 'NoneType' object is not iterable``,
            and a string its characters).

    Examples:
        >>> len(positional_inputs(torch.zeros(3, 2))), len(positional_inputs([torch.zeros(3), 1]))
        (1, 2)
    """
    if isinstance(example_inputs, Mapping):
        keys = ", ".join(repr(k) for k in list(example_inputs)[:3])
        raise InvalidArgument(f"the example inputs are a dict ({keys}), not forward's inputs in order: give a "
                              "tuple of them, and a dict that forward takes as one argument inside it, (inputs,)")
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, str | bytes) or not isinstance(example_inputs, Iterable):
        raise InvalidArgument(f"the example inputs must be a tensor or a tuple of forward's inputs in order, got "
                              f"{type(example_inputs).__name__} {reprlib.repr(example_inputs)}")
    return tuple(example_inputs)


def input_leaves(example_inputs: Any) -> tuple[list[Any], TreeSpec]:
    """The leaves of the positional inputs (tensors inside tuples, lists and dicts included) and their nesting.

    The recorded step reads each tensor leaf as an input, so a batch nested as the example is followed
    at every call.

    Examples:
        >>> leaves, spec = input_leaves(({"a": torch.zeros(2), "b": torch.ones(3)}, 2.0))
        >>> [tuple(x.shape) if isinstance(x, torch.Tensor) else x for x in leaves]
        [(2,), (3,), 2.0]
    """
    return tree_flatten(positional_inputs(example_inputs))


def _raised_in(err: BaseException, function: str, file: str = "") -> bool:
    """Whether ``err`` was raised inside a call of a function named ``function`` (its traceback's frames).

    With ``file``, only a function of a file whose path ends so counts (``"nn/modules/batchnorm.py"``).
    """
    tb = err.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == function and code.co_filename.replace("\\", "/").endswith(file):
            return True
        tb = tb.tb_next
    return False


def _described(value: Any) -> str:
    """``value`` for a message: a class or function by name, anything else by its short repr."""
    if isinstance(value, type):
        return f"the class {value.__module__}.{value.__qualname__}"
    if callable(value):
        return f"the function {getattr(value, '__qualname__', type(value).__name__)}"
    return reprlib.repr(value)


def check_loss(loss: Any) -> None:
    """Refuse a ``loss`` that is neither callable nor None (``loss=3``).

    It was called inside the recording: an UnsupportedGraph ("the loss function raised TypeError: 'int' object
    is not callable"), where the callers promise InvalidArgument.

    Raises:
        InvalidArgument: naming the value.

    Examples:
        >>> check_loss(3)
        Traceback (most recent call last):
        ...
        gnplace.exceptions.InvalidArgument: loss must be a function of the module's output returning a scalar loss, \
or None (the module returns its loss), got 3
    """
    if loss is not None and not callable(loss):
        raise InvalidArgument("loss must be a function of the module's output returning a scalar loss, or None (the "
                              f"module returns its loss), got {reprlib.repr(loss)}")



def _recording_device(tensors: list[Any]) -> torch.device | None:
    """The one device a step is recorded on whose parameters, buffers and inputs lie on several, else ``None``.

    A module :func:`gnplace.apply` placed holds them where its placement put them (``cuda:0`` and ``cuda:1``, or
    a GPU and the CPU). The recording computes nothing (fake tensors) and a device it reads is re-targeted to the
    op's device when the step runs (:mod:`gnplace.execute.compiler`), so one device serves: the first accelerator
    among them, so that an autocast region of its kind casts as it would there, else the CPU.
    """
    devices = {t.device for t in tensors if isinstance(t, torch.Tensor)}
    if len(devices) < 2:
        return None
    accelerators = sorted((d for d in devices if d.type not in ("cpu", "meta")), key=lambda d: (d.type, d.index or 0))
    return accelerators[0] if accelerators else torch.device("cpu")


def _moved(fake: torch.Tensor, device: torch.device | None) -> torch.Tensor:
    """``fake`` on ``device`` (a fake tensor's device is metadata: nothing is copied); as it is where ``None``."""
    return fake if device is None or fake.device == device else fake.to(device)

def record_training_step(
    module: torch.nn.Module, example_inputs: tuple[Any, ...], loss: Callable[[Any], torch.Tensor] | None = None
) -> TrainingTrace:
    """Record forward, loss and backward of one training step of ``module`` on ``example_inputs``.

    Args:
        module (torch.nn.Module): the model; its trainable parameters get gradients.
        example_inputs (tuple): positional inputs of ``module.forward`` (a lone tensor is one input).
        loss (callable, optional): maps the module's output to a scalar loss (default: the module
            returns the loss, a scalar tensor or a tuple whose first item is one).

    Raises:
        InvalidArgument: if ``module`` is no module (None, a function, a module's class), or ``loss`` neither
            callable nor None.
        UnsupportedGraph: if the step cannot be run or traced; the message names the failing op.
    """
    if not isinstance(module, torch.nn.Module):  # None or a function was an AttributeError ('named_parameters')
        raise InvalidArgument(f"the model must be a torch.nn.Module (an instance), got {_described(module)}")
    check_loss(loss)
    from torch._subclasses.fake_tensor import FakeTensorMode

    params: dict[str, torch.Tensor] = {k: p for k, p in module.named_parameters() if p.requires_grad}
    buffers = dict(module.named_buffers())
    buffer_names = list(buffers)
    # frozen parameters are read like buffers, at each run (a later load_state_dict is seen), never constants
    buffers.update({k: p for k, p in module.named_parameters() if not p.requires_grad})
    inputs, input_spec = input_leaves(example_inputs)
    origin: dict[int, Ref] = {}
    keep: list[Any] = []
    call_stack: list[CallKey] = [("", 0)]
    calls: dict[str, int] = {}
    paths = {id(m): name for name, m in module.named_modules()}

    log = _CallLog()  # which call was innermost when each autograd node was made
    # per open call: where its marks start in the log, its place in call order, its module, whether the backward runs it
    starts: list[tuple[int, int, int, bool]] = []
    recorder = _Recorder(origin, keep, call_stack)
    forward_calls: list[_ForwardCall] = []
    rerun = _Recomputation(forward_calls, calls, recorder.ops)
    # each non-reentrant segment a forward call ran in, by its id, with those around it (the tuple holds it alive)
    nests: dict[int, tuple[object, ...]] = {}
    opened = [0]  # how many calls have opened, forward and rerun

    def pre_hook(mod: torch.nn.Module, args: Any, kwargs: Any) -> None:
        path = paths.get(id(mod), type(mod).__name__)
        first = next((t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)), None)
        first_input = origin.get(id(first)) if first is not None else None
        node = torch._C._current_autograd_node()
        if node is None:
            calls[path] = calls.get(path, -1) + 1
            call_stack.append((path, calls[path]))
            segment = _checkpoint_segment(recomputing=False)
            segments = () if segment is None else nests.get(id(segment))
            if segments is None:  # a segment's first call: what it is nested in, once (a walk of the stack)
                segments = nests[id(segment)] = _enclosing_segments(segment)
                for around in segments:  # the first call in a segment opens from the call around the segment
                    recorder.segment_calls.setdefault(id(around), call_stack[-2])
            forward_calls.append(_ForwardCall(call_stack[-1], _SEQUENCE(), first_input, segments))
        else:  # a checkpoint recomputing its segment: the forward call it reruns
            made = _checkpoint_segment(recomputing=False)  # a non-reentrant segment this rerun made anew
            if made is not None and id(made) not in recorder.segment_calls:  # its first call: the call around it
                around = call_stack[-1] if recorder.rerun_open else _node_metadata(node).get("gnplace_call", ("", 0))
                if not recorder.rerun_open:  # in a non-reentrant rerun, the call around the segment rerun
                    reentrant, rerunning = _rerun()
                    if reentrant is False and rerunning is not None:
                        around = recorder.segment_calls.get(id(rerunning), around)
                for segment in _enclosing_segments(made):  # those it is nested in that the rerun made too
                    if id(segment) not in recorder.segment_calls:
                        recorder.segment_calls[id(segment)] = around
                        recorder.made_in_reruns.append(segment)
            if not recorder.rerun_open and node.name() == _REENTRANT_CHECKPOINT:  # a segment it makes: in its call
                _tag_reentrant_segments_made(recorder.outside_call(node))
            call_stack.append(rerun.key(path, first_input, node))
            recorder.rerun_open += 1
        opened[0] += 1
        place = opened[0]  # the calls so far, this one included
        starts.append((len(log.marks), place, id(mod), node is not None))
        log.mark(call_stack[-1], place)

    def post_hook(mod: torch.nn.Module, _args: Any, output: Any) -> None:
        if not starts or starts[-1][2] != id(mod):  # its pre-hook did not run (another pre-hook raised before it)
            return
        call_stack.pop()
        since, place, _, rerun_call = starts.pop()
        recorder.rerun_open -= rerun_call
        _tag_autograd_nodes(output, log, since, place)
        log.mark(call_stack[-1], starts[-1][1] if starts else 0)

    scripted = next((name for name, m in module.named_modules() if isinstance(m, torch.jit.ScriptModule)), None)
    if scripted is not None:  # its forward runs in TorchScript: no hooks, no parameters to swap for fake ones
        what = f"its submodule {scripted!r} is" if scripted else "it is"
        raise UnsupportedGraph(
            f"cannot trace a training step of {type(module).__name__}: {what} a TorchScript module "
            "(torch.jit.script or torch.jit.trace), which a recording cannot run; import the module before scripting"
        )
    attributes = saved_attributes(module)  # put back after recording, its parameters and buffers too
    handles = []
    for mod in module.modules():
        handles.append(mod.register_forward_pre_hook(pre_hook, with_kwargs=True))
        # run when the forward raises too: a non-reentrant checkpoint stops its recomputation so, once it has the
        # tensors the backward needs, and the calls it was in must close
        handles.append(mod.register_forward_hook(post_hook, always_call=True))
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    stage = ["forward"]  # what the step was running when it failed: "forward", "loss" or "backward"
    # a module gnplace.apply placed holds its state on several devices: recorded on one, as the step it records
    # runs each op where a placement puts it (it failed: "Expected all tensors to be on the same device")
    on = _recording_device([*params.values(), *buffers.values(), *inputs])
    try:
        with _RECORDING_SWITCHES, _training_grad_mode(), fake_mode, _CtcLossMean():
            fake_params = {}
            for k, p in params.items():
                fp = _moved(fake_mode.from_tensor(p.detach()), on).requires_grad_(True)
                fake_params[k] = fp
                origin[id(fp)] = Ref("param", name=k)
            fake_buffers = {}
            for k, b in buffers.items():
                fb = _moved(fake_mode.from_tensor(b), on)
                fake_buffers[k] = fb
                origin[id(fb)] = Ref("buffer", name=k)
            fake_inputs = []
            differentiated: list[int] = []  # inputs given with requires_grad: the step computes their gradients
            for i, x in enumerate(inputs):
                fx = _moved(fake_mode.from_tensor(x.detach()), on) if isinstance(x, torch.Tensor) else x
                if isinstance(fx, torch.Tensor):
                    if x.requires_grad:
                        fx.requires_grad_(True)
                        differentiated.append(i)
                    origin[id(fx)] = Ref("input", name=str(i))
                fake_inputs.append(fx)
            # attention through its math decomposition (matmuls, softmax): the fused kernels are device-specific
            # (on CPU, aten._scaled_dot_product_flash_attention_for_cpu), and a recorded step runs on every device
            # recurrent layers through their cells' matmuls and activations for the same reason: with oneDNN on,
            # nn.LSTM and nn.GRU record as aten.mkldnn_rnn_layer, a CPU-only kernel whose backward needs the
            # forward's opaque workspace (empty under fake tensors)
            wanted = list(fake_params)

            def step(*args: Any) -> tuple[torch.Tensor, tuple[torch.Tensor | None, ...]]:
                """Forward, loss and gradients, all with the fake parameters in the module.

                A checkpointed segment recomputes its forward during the backward, and must read them too.
                """
                output = module(*args)
                stage[0] = "loss"
                value = loss(output) if loss is not None else output
                if isinstance(value, (tuple, list)):
                    value = value[0]
                if not isinstance(value, torch.Tensor) or value.numel() != 1:
                    got = f"a tensor of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) \
                        else f"a {type(value).__name__}"
                    raise UnsupportedGraph(
                        f"{type(module).__name__} must return a scalar loss, not {got}: pass loss= to map its "
                        "output to one (from a MODULE:FACTORY, return (module, example_inputs, loss))"
                    )
                if not wanted and not differentiated:
                    raise UnsupportedGraph(
                        f"{type(module).__name__} has no trainable parameter (none, or requires_grad is off for each) "
                        "and no example input requires grad: a training step has no gradient to compute"
                    )
                if not value.is_floating_point() or not value.requires_grad:
                    why = (f"it is a {value.dtype} scalar, where backward needs a real floating-point one"
                           if not value.is_floating_point() else "it depends on no trainable parameter and no input "
                           "that requires grad (detached, or computed by comparisons or integer ops)")
                    raise UnsupportedGraph(f"the loss of {type(module).__name__} has no gradient: {why}")
                _tag_autograd_nodes(value, log, 0, 0, start=0)  # the loss, and what no call's output reached
                stage[0] = "backward"
                with without_autocast():  # as eager's loss.backward() outside the autocast region, as PyTorch advises
                    grads = _gradients(value, [*[fake_params[k] for k in wanted],
                                               *[fake_inputs[i] for i in differentiated]], recorder.ops)
                stage[0] = "forward"  # a buffer the forward reassigned, carried below
                carry_reassigned_buffers(module, {k: fake_buffers[k] for k in buffer_names})
                return value, grads

            recorder.memory.update({id(t): memory_of(t) for t in (*fake_params.values(), *fake_buffers.values(),
                                                                     *fake_inputs) if isinstance(t, torch.Tensor)})
            with recorder:
                state = {f"module.{k}": v for k, v in {**fake_params, **fake_buffers}.items()}
                value, grads = torch.func.functional_call(ModuleCall(module, step), state,
                                                          tree_unflatten(fake_inputs, input_spec))
            refuse_swapped_memory(module, [*fake_params.values(), *fake_buffers.values(), *fake_inputs, *keep],
                                   recorder, set(buffer_names))
    except UnsupportedGraph:
        raise
    except Exception as err:  # noqa: BLE001 - any failure inside a user's model becomes one clear line
        first = first_line(err)
        name = type(module).__name__
        if "DataDependent" in type(err).__name__ or recorder.failed.startswith("aten._local_scalar_dense"):
            if _raised_in(err, "_detect_is_causal_mask"):  # torch.nn's transformers compare a mask with a causal one
                raise UnsupportedGraph(
                    f"cannot trace a training step of {name}: a torch.nn transformer layer reads its attention "
                    f"mask's values to tell whether it is causal ({recorder.failed or first}); say which it is: "
                    "is_causal=True with a causal mask, is_causal=False with any other (tgt_is_causal and "
                    "src_is_causal for nn.Transformer)"
                ) from err
            if _raised_in(err, "forward", "nn/modules/batchnorm.py"):  # momentum=None divides by its batch count
                raise UnsupportedGraph(
                    f"cannot trace a training step of {name}: a batch norm layer with momentum=None (a cumulative "
                    f"average) reads the value of its batch count ({recorder.failed or first}); give it a momentum "
                    "(0.1 is PyTorch's default) to record its step"
                ) from err
            raise UnsupportedGraph(
                f"cannot trace a training step of {name}: its forward reads a tensor's value "
                f"({recorder.failed or first}), as in `if x.sum() > 0:` or `.item()`; a recorded step cannot "
                "follow data-dependent control flow"
            ) from err
        if "DynamicOutputShape" in type(err).__name__ and "ctc_loss" in recorder.failed:
            raise UnsupportedGraph(
                f"cannot trace a training step of {name}: ctc_loss's lengths are tensors, whose values size its "
                f"work ({recorder.failed}); give input_lengths and target_lengths as tuples of ints"
            ) from err
        if "DynamicOutputShape" in type(err).__name__ and recorder.failed_in:  # a backward formula's, not the model's
            raise UnsupportedGraph(
                f"cannot trace a training step of {name}: the backward of {recorder.failed_in} runs "
                f"{recorder.failed}, whose output shape depends on the data"
                + (" (nn.Embedding(sparse=True) with padding_idx drops the padding's rows from its gradient: give "
                   "sparse=False or no padding_idx)" if recorder.failed_in.startswith("EmbeddingBackward") else "")
                + "; a recorded step has fixed shapes"
            ) from err
        if "DynamicOutputShape" in type(err).__name__:  # nonzero, unique, x[mask], packed sequences
            raise UnsupportedGraph(
                f"cannot trace a training step of {name}: the output shape of {recorder.failed or first} depends "
                "on the data (as in x[mask], nonzero, unique or pack_padded_sequence); a recorded step has fixed "
                "shapes (use masks of a fixed shape, e.g. torch.where, or padded sequences)"
            ) from err
        if recorder.failed:
            # torch's kernel of grouped matmuls (transformers' mixture-of-experts layers, Mixtral's by default) takes
            # bfloat16 alone: the step traces once the model is cast to it
            hint = (" (aten._grouped_mm takes bfloat16 only: cast the model and its floating inputs with "
                    "module.to(torch.bfloat16), or give a transformers model another experts implementation, "
                    "e.g. 'batched_mm')" if "_grouped_mm" in recorder.failed and "BF16" in first else "")
            raise UnsupportedGraph(f"cannot trace a training step of {name}: op {recorder.failed} failed: "
                                   f"{first}{hint}") from err
        if stage[0] != "forward":  # the loss function, or a custom autograd function's backward
            part = "the loss function" if stage[0] == "loss" else "its backward"
            raise UnsupportedGraph(f"cannot trace a training step of {name}: {part} raised {type(err).__name__}: "
                                   f"{first}") from err
        raise UnsupportedGraph(
            f"cannot trace a training step of {name}: its forward raised {type(err).__name__}: {first} "
            f"(the example inputs go to {_forward_signature(module)} by position, in the order given)"
        ) from err
    finally:
        for h in handles:
            h.remove()
        restore_attributes(attributes)
    refuse_state_read_from_outside(module, recorder.ops, {**params, **buffers})
    loss_ref = origin.get(id(value))
    if loss_ref is None:
        raise UnsupportedGraph(f"the loss of {type(module).__name__} does not depend on any traced op")
    made = [origin.get(id(g)) if g is not None else None for g in grads]  # where each gradient was made
    grad_refs = dict(zip(wanted, made))
    input_grad_refs = dict(zip(differentiated, made[len(wanted):]))
    module_calls = {k: v + 1 for k, v in calls.items()}
    tied, untrained_state = state_names(module)
    return TrainingTrace(recorder.ops, params, buffers, inputs, loss_ref, grad_refs, module_calls, input_grad_refs,
                         input_spec, tied, untrained_state, autocast_state(), torch.get_default_dtype())


#: The device types whose ``torch.autocast`` state a recording keeps.
_AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps")


def autocast_state() -> tuple[tuple[str, str], ...]:
    """The ``torch.autocast`` regions active here: ``(device type, dtype)`` of each device type it is on for.

    Examples:
        >>> autocast_state()
        ()
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     autocast_state()
        (('cpu', 'torch.bfloat16'),)
    """
    return tuple((device, str(torch.get_autocast_dtype(device))) for device in _AUTOCAST_DEVICES
                 if torch.is_autocast_enabled(device))


@contextmanager
def without_autocast() -> Iterator[None]:
    """Turn off every active ``torch.autocast`` region, so that a recorded step's aten ops run as recorded.

    Under autocast an aten product called op by op is cast too (``mm`` of float32 tensors returns bfloat16), and
    the step would compute neither what was recorded nor what eager autocast computes.
    """
    from contextlib import ExitStack

    with ExitStack() as stack:
        for device, _ in autocast_state():
            stack.enter_context(torch.autocast(device, enabled=False))
        yield


@contextmanager
def recorded_default_dtype(dtype: torch.dtype | None) -> Iterator[None]:
    """Run with torch's default dtype set to ``dtype`` (``None``: as it is), and the caller's put back after.

    A recorded step's ops that read the default dtype (:attr:`TracedOp.reads_default_dtype`) make what they made
    when recorded: ``torch.ones(n)`` recorded under float64 and run in a process of float32 (a rank) would make
    float32 and fail in the first product with a float64 tensor.
    """
    was = torch.get_default_dtype()
    if dtype is None or dtype == was:
        yield
        return
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(was)


@contextmanager
def _training_grad_mode() -> Iterator[None]:
    """Record with gradients on and inference mode off (this thread's modes), whatever the caller's.

    Under the caller's ``torch.no_grad()`` or ``torch.inference_mode()`` (an import from an evaluation loop, a
    notebook cell under a decorator) the fake parameters would carry no autograd graph, and the loss none to
    differentiate. Both are the caller's again afterwards; anomaly detection, the process's, is
    :data:`_RECORDING_SWITCHES`'.
    """
    with torch.inference_mode(False), torch.enable_grad():
        yield


_TF32_NOTE_IGNORED = ignored_warnings(message="TF32 acceleration on top of oneDNN")


def _switch_for_recording() -> Callable[[], None]:
    """Set the process's switches a recording needs (see :data:`_RECORDING_SWITCHES`); returns what puts them back."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    anomaly = torch.autograd.set_detect_anomaly(False)  # (switches as it is made)
    kernels = sdpa_kernel(SDPBackend.MATH)
    onednn = torch.backends.mkldnn.flags(enabled=False)
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    was = logger.disabled
    with _TF32_NOTE_IGNORED:  # said on every switch
        kernels.__enter__()
        onednn.__enter__()
    logger.disabled = True

    def back() -> None:
        logger.disabled = was
        with _TF32_NOTE_IGNORED:
            onednn.__exit__(None, None, None)
            kernels.__exit__(None, None, None)
        anomaly.__exit__(None, None, None)

    return back


_RECORDING_SWITCHES = SharedSetting(_switch_for_recording)
"""What a recording switches for the process while it runs, and the caller's switches back after the last.

Anomaly detection off (``torch.autograd.detect_anomaly()`` checks each gradient for NaN by reading its values,
which fake tensors have none of: the recording failed as data-dependent control flow); scaled dot-product
attention's math kernel alone and oneDNN (mkldnn) off, so that composite ops take their portable decompositions;
the log of fake tensors muted (an op that fails on its fake inputs, a user's shape mistake, logs its traceback at
ERROR level there, and the failure reaches the caller as one line anyway). Each is torch's, or logging's, for the
whole process: recordings in threads at once share one switching, made by the first to enter and undone by the
last to leave (:class:`~gnplace.workers.SharedSetting`). Each recording saved and restored its own, and four
imports in threads left oneDNN off, the fake tensors' log muted and a warnings filter behind for the rest of the
process.
"""


def _forward_signature(module: torch.nn.Module) -> str:
    """``forward(a, b, ...)`` of ``module``: what the example inputs are matched to."""
    import inspect

    try:
        names = [p.name for p in inspect.signature(module.forward).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return "forward"
    return f"forward({', '.join(names)})"


def _node_metadata(node: Any) -> dict[str, Any]:
    """The metadata dict of an autograd node.

    torch's stubs declare ``Node.metadata`` a method, but autograd nodes expose it as a dict
    attribute; this is the one place that reads it untyped.
    """
    metadata: dict[str, Any] = node.metadata
    return metadata


#: The number the next autograd node made in this thread gets (each node keeps its own: ``Node._sequence_nr()``).
_SEQUENCE: Callable[[], int] = torch._C._autograd._get_sequence_nr


@dataclass
class _CallLog:
    """Which module call was innermost when each autograd node of a recording was made.

    Each call's start and end is marked with the thread's autograd sequence number then (:data:`_SEQUENCE`) and
    the call innermost from there on (its key and its place in call order): a node made while a call was open
    belongs to the innermost one, its output or not (a tensor inside an object that pytree does not open).
    """

    marks: list[int] = field(default_factory=list)
    owners: list[tuple[CallKey, int]] = field(default_factory=list)

    def mark(self, call: CallKey, place: int) -> None:
        """Note that ``call`` (opened ``place``-th) is the innermost from the next node made on."""
        self.marks.append(_SEQUENCE())
        self.owners.append((call, place))

    def owner(self, number: int, since: int) -> tuple[CallKey, int]:
        """The call innermost when the node numbered ``number`` was made, among the marks from ``since`` on."""
        k = bisect.bisect_right(self.marks, number, lo=since) - 1
        return self.owners[max(k, since)]


@dataclass(frozen=True)
class _ForwardCall:
    """A module call of the forward: its key, the sequence number when it opened, its first tensor input, its segments.

    ``segments`` are the non-reentrant ``torch.utils.checkpoint`` segments around the call, innermost first
    (:func:`_checkpoint_segment`, :func:`_enclosing_segments`; empty outside any, or where it cannot be told): the
    segments' own objects, kept alive with the call, so that no other takes their place (an ``id`` would be reused
    once a segment is freed).
    """

    key: CallKey
    opened: int
    first_input: Ref | None
    segments: tuple[object, ...] = ()


#: The saved-tensor pack hooks of ``torch.utils.checkpoint`` that hold its segment (a ``_CheckpointFrame``): the one a
#: non-reentrant segment's forward runs under (the frame itself), and the one its recomputation runs under (a weak
#: reference to the frame), each by its qualified name and the name of the closure variable holding it.
_SEGMENT_HOOKS = {
    False: ("_checkpoint_hook.__init__.<locals>.pack_hook", "frame"),
    True: ("_recomputation_hook.__init__.<locals>.pack_hook", "target_frame_ref"),
}


def _checkpoint_segment(recomputing: bool) -> object | None:
    """The non-reentrant ``torch.utils.checkpoint`` segment running now, its forward's or (``recomputing``) its rerun's.

    A non-reentrant checkpoint runs its segment's forward under saved-tensor hooks of its own, whose pack hook holds
    the segment (a ``_CheckpointFrame``), and its recomputation under others, whose pack hook holds a weak reference
    to the same object: the innermost saved-tensor hooks name it. ``None`` where they are other hooks (a reentrant
    checkpoint has none; the segment's own ``save_on_cpu``), none, or of a torch that holds the segment elsewhere.
    """
    top = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
    hooks = top(True) if top is not None else None
    if not hooks:
        return None
    pack = hooks[0]
    for _ in range(4):  # under torch._dynamo.disable's wrapper (the recomputation's hook)
        pack = getattr(pack, "__wrapped__", pack)
    qualname, variable = _SEGMENT_HOOKS[recomputing]
    code, closure = getattr(pack, "__code__", None), getattr(pack, "__closure__", None)
    if (getattr(pack, "__module__", None) != "torch.utils.checkpoint" or getattr(pack, "__qualname__", None) != qualname
            or code is None or closure is None or variable not in code.co_freevars):
        return None
    try:
        held = closure[code.co_freevars.index(variable)].cell_contents
    except ValueError:  # an empty cell
        return None
    if not recomputing:
        return held
    return held() if isinstance(held, weakref.ref) else None


def _enclosing_segments(innermost: object) -> tuple[object, ...]:
    """``innermost``, the non-reentrant segment running now, then the non-reentrant segments around it, outwards.

    Each non-reentrant ``torch.utils.checkpoint`` call runs its segment's function while its generator, which
    made the segment (its local ``new_frame``), waits: the stack's ``checkpoint`` frames name them, innermost
    first. Just ``(innermost,)`` where they do not start with it (a torch that names them otherwise).
    """
    frame: FrameType | None = sys._getframe(1)
    found: list[object] = []
    while frame is not None:
        if frame.f_code.co_name == "checkpoint" and frame.f_globals.get("__name__") == "torch.utils.checkpoint":
            made = _segment_made_by(frame)
            if made is not None:
                found.append(made)
        frame = frame.f_back
    return tuple(found) if found and found[0] is innermost else (innermost,)


def _segment_made_by(frame: FrameType) -> object | None:
    """The non-reentrant segment that the ``torch.utils.checkpoint.checkpoint`` call running in ``frame`` made.

    Its generator's ``new_frame``; ``None`` for a reentrant one (no generator).
    """
    generator = getattr(frame.f_locals.get("gen"), "gi_frame", None)
    return generator.f_locals.get("new_frame") if generator is not None else None


#: The functions of ``torch.utils.checkpoint`` that rerun a segment in the backward, by qualified name: a reentrant
#: segment's node's backward (``True``), and the unpack hook that recomputes a non-reentrant segment (``False``).
_RERUNS = {"CheckpointFunction.backward": True, "_checkpoint_hook.__init__.<locals>.unpack_hook": False}


def _rerun() -> tuple[bool | None, object | None]:
    """Whether the innermost rerun of a checkpointed segment running now is a reentrant segment's, and what it reruns.

    What it reruns: the reentrant segment's node (``ctx``), or the non-reentrant segment the unpack hook recomputes
    (its closure's ``frame``). ``(None, None)`` where no function of :data:`_RERUNS` is running (or a torch that
    names them otherwise).
    """
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") == "torch.utils.checkpoint":
            reentrant = _RERUNS.get(frame.f_code.co_qualname)
            if reentrant is not None:
                return reentrant, frame.f_locals.get("ctx" if reentrant else "frame")
        frame = frame.f_back
    return None, None


def _segments_in_rerun() -> list[object]:
    """The ``torch.utils.checkpoint`` segments whose forward runs now in the innermost rerun, innermost first.

    A reentrant one is told by its autograd node (``CheckpointFunction.forward``'s ``ctx``, the object its backward
    runs as), a non-reentrant one by its own object (:func:`_segment_made_by`). Empty outside any rerun (or on a
    torch that names these functions otherwise).
    """
    frame: FrameType | None = sys._getframe(1)
    made: list[object] = []
    while frame is not None:
        if frame.f_globals.get("__name__") == "torch.utils.checkpoint":
            name = frame.f_code.co_qualname
            if name in _RERUNS:
                return made
            if name == "CheckpointFunction.forward" and "ctx" in frame.f_locals:
                made.append(frame.f_locals["ctx"])
            elif name == "checkpoint" and (segment := _segment_made_by(frame)) is not None:
                made.append(segment)
        frame = frame.f_back
    return []


def _tag_reentrant_segments_made(call: CallKey) -> None:
    """Tag the nodes of the reentrant segments whose forward runs now in a rerun, untagged yet, with ``call``.

    A reentrant segment made anew in a reentrant segment's rerun, outside the module calls that rerun recomputes, has
    its node made in the backward, which no call's post-forward hook tags: its own rerun's ops outside module calls
    had no call (``("", 0)``), where their forward twins are in the call around the segment. That call is ``call``,
    the call of an op run where its forward starts (its first op or module call, outside any call it makes). A node
    that is no part of the step's graph (made in another reentrant segment's forward, under ``no_grad``, or in a
    non-reentrant segment's recomputation) is tagged alike, to no effect.
    """
    for made in _segments_in_rerun():
        if isinstance(made, torch.autograd.function.BackwardCFunction):
            metadata = _node_metadata(made)
            if "gnplace_call" not in metadata:  # made before any call now open: walks from later calls stop there
                metadata["gnplace_call"], metadata["gnplace_opened"] = call, 0


#: The autograd node of a reentrant ``torch.utils.checkpoint`` segment (``use_reentrant=True``), whose backward reruns
#: the segment: made before the segment's forward ran (under ``no_grad``, which makes no node).
_REENTRANT_CHECKPOINT = "CheckpointFunctionBackward"


@dataclass
class _Recomputation:
    """Which forward call each module call run in the backward recomputes (a ``torch.utils.checkpoint`` segment's).

    A checkpoint reruns its segment's forward while the backward runs one autograd node (the reentrant
    checkpoint's own node, or the node that first reads a tensor the non-reentrant one did not keep): the calls
    rerun then are the segment's calls, in their forward order, from the one the segment starts with. That one
    is, for a non-reentrant segment told by its object (:func:`_checkpoint_segment`, or the rerun's own where a
    segment it made anew holds the hooks), the first forward call of its module inside that segment, in a segment
    nested in it too (for a segment made anew in a rerun, as a reentrant segment's rerun makes those it holds, the
    first call of its module that the rerun recomputed in it or in one nested in it, a reentrant one told by its
    node); else the forward call of its module given the same first tensor input (the non-reentrant checkpoint
    gives the segment its inputs again, the reentrant one a ``detach`` of each); else, of the module's forward
    calls, the first opened after the reentrant checkpoint's node was made, or the last opened before the node that
    asked for the recomputation was (made inside the segment). A call that does not follow the segment's order
    (control flow that differs) is a new call of its module, numbered after its forward calls.
    """

    forward: list[_ForwardCall]
    calls: dict[str, int]  # how many times each module was called in the forward, less one
    ops: list[TracedOp]
    trigger: tuple[str, int] = ("", -1)  # the autograd node rerunning the segment now (its name and number)
    cursor: int | None = None  # the place in ``forward`` of the call the next rerun call recomputes
    reentrant: bool | None = None  # whether the last call rerun for ``trigger`` was a reentrant segment's
    extra: dict[str, int] = field(default_factory=dict)  # new calls of each module in the backward
    # the segments whose forward ran in a rerun (made anew there; a non-reentrant one by its object, a reentrant one
    # by its node), each with the place in ``forward`` of the first call of each module it recomputed: where that
    # segment's own recomputation starts
    rerun_segments: list[tuple[object, dict[str, int]]] = field(default_factory=list)

    def key(self, path: str, first_input: Ref | None, node: Any) -> CallKey:
        """The key of the call of the module ``path`` opened while the backward runs ``node``.

        A reentrant segment inside a non-reentrant one reruns twice under its own node: the outer segment's
        recomputation (reading the tensors the node saved, :data:`_RERUNS`' unpack hook) runs the reentrant forward,
        then the node's backward runs it again. That second rerun starts anew: it went on from the first, with calls
        that never ran (``a``'s fourth of three, ``b``'s second), which got the gradients of the calls it recomputes.
        """
        trigger, (reentrant, rerunning) = (node.name(), node._sequence_nr()), _rerun()
        if trigger != self.trigger or (reentrant and self.reentrant is False):
            self.trigger = trigger
            segment = _checkpoint_segment(recomputing=True)
            if segment is None and reentrant is False:  # under the hooks of a segment made in the rerun
                segment = rerunning
            self.cursor = self._start(path, self.forward_ref(first_input), node, segment, reentrant=bool(reentrant))
        self.reentrant = reentrant
        if self.cursor is not None and self.cursor < len(self.forward) and self.forward[self.cursor].key[0] == path:
            self.cursor += 1
            segment = _checkpoint_segment(recomputing=False)
            if segment is not None:  # a non-reentrant segment made in the rerun: its own rerun comes later
                self._rerun_places(segment).setdefault(path, self.cursor - 1)
            for made in _segments_in_rerun():  # those made in the rerun around it (a reentrant one by its node)
                self._rerun_places(made).setdefault(path, self.cursor - 1)
            return self.forward[self.cursor - 1].key
        self.cursor = None
        self.extra[path] = self.extra.get(path, 0) + 1
        return path, self.calls.get(path, -1) + self.extra[path]

    def _rerun_places(self, segment: object) -> dict[str, int]:
        """The first place in ``forward`` of each module's call that a rerun recomputed in ``segment`` (made there)."""
        if self.rerun_segments and self.rerun_segments[-1][0] is segment:
            return self.rerun_segments[-1][1]
        places = next((places for made, places in self.rerun_segments if made is segment), None)
        if places is None:
            places = {}
            self.rerun_segments.append((segment, places))
        return places

    def forward_ref(self, ref: Ref | None) -> Ref | None:
        """``ref``, or the forward tensor it is a ``detach`` of, made in the backward (a reentrant rerun's input)."""
        while ref is not None and ref.kind == "op":
            op = self.ops[ref.index]
            if not (op.backward and op.name == "detach" and isinstance(op.args[0], Ref)):
                break
            ref = op.args[0]
        return ref

    def _start(self, path: str, first_input: Ref | None, node: Any, segment: object | None = None,
               reentrant: bool = False) -> int | None:
        """The place in ``forward`` of the call of ``path`` that a segment rerun by ``node`` starts with.

        ``segment``: the non-reentrant segment being recomputed, where it is known; ``reentrant``: whether the rerun
        is ``node``'s own backward (a reentrant segment's). A segment calling one module twice on its own input
        (``b(a(h)) + a(h)``) gave that first input to both calls, and the rerun started at the second: its calls were
        tagged with calls that never ran (``a``'s fourth of three). A reentrant segment made in another reentrant
        one's rerun (its node made then) had no call of that module opened after its node, and went on to new ones.
        A non-reentrant segment holding another (``c(checkpoint(b(a(h)) + a(h)))``) reran under the hooks of the one
        it made anew, which named no segment, and its calls of ``a`` were all in the nested one: its rerun started
        at the last ``a`` before ``node`` and went on to calls that never ran (``b``'s second, ``a``'s fourth).
        """
        if reentrant:  # a reentrant segment made in a rerun: where that rerun recomputed its first call of the module
            made = next((places for made, places in self.rerun_segments if made is node), {})
            if path in made:
                return made[path]
        made = next((places for made, places in self.rerun_segments if made is segment), {})
        if path in made:  # a segment made in a rerun: where that rerun recomputed its first call of the module
            return made[path]
        candidates = [k for k, call in enumerate(self.forward) if call.key[0] == path]
        inside = [k for k in candidates if any(made is segment for made in self.forward[k].segments)]
        if inside:
            return inside[0]
        same = [k for k in candidates if first_input is not None and self.forward[k].first_input == first_input]
        if len(same) == 1:
            return same[0]
        number = node._sequence_nr()
        if node.name() == _REENTRANT_CHECKPOINT:
            return next((k for k in same or candidates if self.forward[k].opened > number), None)
        return next((k for k in reversed(same or candidates) if self.forward[k].opened <= number), None)


def _tag_autograd_nodes(output: Any, log: _CallLog, since: int, opened: int, start: int | None = None) -> None:
    """Tag the untagged autograd nodes reachable from ``output`` of the call whose marks start at ``since``.

    The call was the ``opened``-th to open, at sequence number ``start`` (default: its first mark's). A node
    made before it (a smaller number) is its parent's or an earlier call's: the walk stops there, whether the
    call got it as an input or not (read from an attribute, inside an object). A node made in it is tagged with
    the call innermost then (:meth:`_CallLog.owner`): this call's own ops, and those of a nested call that its
    output did not reach. The walk goes on through the nodes of calls nested in this one (tagged already, with
    an ``opened`` place after this call's), to the call's own ops that only they read (``b(tanh(a(x)))``: the
    tanh's backward is this call's, between ``b``'s and ``a``'s nodes); it stops at nodes of calls before it.
    """
    start = log.marks[since] if start is None else start
    seen: set[int] = set()
    flat, _ = tree_flatten(output)
    todo = [t.grad_fn for t in flat if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        metadata = _node_metadata(node)
        if "gnplace_call" in metadata:
            if metadata["gnplace_opened"] <= opened:
                continue  # a call before this one (or this one's own input), not nested in it
        else:
            number = node._sequence_nr()
            if number < start:
                continue  # made before the call: what it was given
            metadata["gnplace_call"], metadata["gnplace_opened"] = log.owner(number, since)
        todo.extend(f for f, _ in node.next_functions if f is not None)


def _reentrant_checkpoint_in(output: torch.Tensor) -> bool:
    """Whether the autograd graph of ``output`` holds a ``torch.utils.checkpoint`` segment with ``use_reentrant=True``.

    Such a segment runs a backward of its own inside the step's (its recomputed forward's), which accumulates
    into the ``.grad`` of the leaves and refuses :func:`torch.autograd.grad`.
    """
    seen: set[int] = set()
    todo = [output.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if node.name() == "CheckpointFunctionBackward":
            return True
        todo.extend(f for f, _ in node.next_functions)
    return False


def _gradients(
    loss: torch.Tensor, leaves: list[torch.Tensor], ops: Sequence[TracedOp]
) -> tuple[torch.Tensor | None, ...]:
    """The gradient of ``loss`` with respect to each of ``leaves`` (``None`` for one it does not depend on).

    :func:`torch.autograd.grad` where it can; a step with a reentrant checkpoint (``use_reentrant=True``, the
    older default, as transformers' gradient checkpointing uses) refuses it, so there the loss is
    back-propagated as eager's ``loss.backward()`` does and the gradients read from the leaves' ``.grad``
    (each leaf is a fresh fake tensor of the recording, without one before). A tensor of the caller's
    that requires grad and that the step read (``ops`` so far hold it: ``self.scale = torch.ones(4,
    requires_grad=True)``, no parameter) keeps its ``.grad``, where the backward put a fake tensor.
    """
    if not _reentrant_checkpoint_in(loss):
        return torch.autograd.grad(loss, leaves, allow_unused=True)
    outside = {id(x): x for _, x in held_tensors(ops) if x.requires_grad}
    kept = {key: x.grad for key, x in outside.items()}
    try:
        loss.backward()
    finally:
        for key, x in outside.items():
            x.grad = kept[key]
    return tuple(leaf.grad for leaf in leaves)


#: View ops whose outputs are disjoint pieces of their input: a write into one leaves the others as they were.
SPLIT_OPS = frozenset({"split", "unsafe_split", "split_with_sizes", "unsafe_split_with_sizes", "chunk", "unbind"})


def written_argument(op: Any) -> Any:
    """The argument a recorded op writes in place (its schema's first ``a!`` argument), or ``None``."""
    for k, argument in enumerate(op.func._schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            return op.args[k] if k < len(op.args) else op.kwargs.get(argument.name)
    return None


def memory_owners(
    ops: Sequence[Any], view_source: Callable[[int], Ref | None], written: Sequence[Any],
) -> Callable[[Ref], tuple[Ref, tuple[tuple[int, int], ...]]]:
    """``storage(ref)``: the tensor whose memory ``ref`` shares, and the pieces of it that ``ref`` lies in.

    Views (``view_source(i)``: the tensor op ``i`` views, ``None`` if it is no view) and in-place results
    (``written[i]``: what op ``i`` writes, a :class:`Ref` or anything else) share their input's memory; the
    pieces are :data:`SPLIT_OPS` outputs, outermost first (disjoint, so a write into one leaves its siblings
    alone). Walked without recursion (a chain of in-place writes can be long) and remembered for every ref
    on the way. The torch importer (which writes into views the graph must follow) and the executor
    (which refuses them) share it.
    """
    known: dict[Ref, tuple[Ref, tuple[tuple[int, int], ...]]] = {}

    def storage(ref: Ref) -> tuple[Ref, tuple[tuple[int, int], ...]]:
        chain: list[tuple[Ref, tuple[int, int] | None]] = []  # from ref toward its tensor, with the piece taken
        at = ref
        while at not in known and at.kind == "op":
            source = view_source(at.index)
            if source is not None:
                chain.append((at, (at.index, at.output) if ops[at.index].name in SPLIT_OPS else None))
                at = source
            elif isinstance(written[at.index], Ref):
                chain.append((at, None))
                at = written[at.index]
            else:
                break
        base, pieces = known.setdefault(at, (at, ()))
        for step, piece in reversed(chain):
            pieces = pieces + (piece,) if piece is not None else pieces
            known[step] = (base, pieces)
        return known[ref]

    return storage
