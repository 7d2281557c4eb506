"""Run one placed training step of a :class:`~gnplace.execute.program.Program` in this process.

:func:`run_step` walks the program's ops in order, runs each on the torch device its plan gives it,
moves a tensor to another device once per consuming device (right after the op that makes it), frees
each copy of a value after the last op on its device that reads it (the maker's copy, once sent, does not
wait for the other devices' reads: :attr:`~gnplace.execute.program.Plan.frees`), applies the update of the
graph's optimizer to each parameter on its own device (:mod:`gnplace.execute.optim`: SGD, momentum, Adam or
AdamW, its state kept there), and counts the bytes resident on each device against a capacity
(:class:`~gnplace.execute.memory.Ledger`, the count :meth:`~gnplace.execute.program.Program.peak_bytes`
gives without running).
:func:`call_op` runs one op; the distributed executor shares it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_flatten, tree_map

from gnplace.exceptions import ExecutionFailed, InvalidPlacement, first_line
from gnplace.execute.memory import DeviceOutOfMemory, Ledger
from gnplace.execute.optim import OptimizerState
from gnplace.execute.program import (
    BEFORE,
    Plan,
    Program,
    ProgramOp,
    resolve_aten,
    shared_source,
    under_recorded_default_dtype,
)
from gnplace.importers.trace import Ref, without_autocast

__all__ = [
    "StepOutput", "DeviceOutOfMemory", "run_step", "call_op", "synchronize", "is_oom_error", "place_params",
    "optimizer_state",
]


def is_oom_error(err: BaseException) -> bool:
    """Whether ``err`` is torch running out of device memory (CUDA's, or the CPU allocator's ``RuntimeError``)."""
    text = str(err).lower()
    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in text or "can't allocate memory" in text


@dataclass
class StepOutput:
    """What one executed step gives back.

    Attributes:
        loss (torch.Tensor | None): the loss (on its device); ``None`` when not kept.
        grads (dict[str, torch.Tensor | None]): each parameter's gradient, on the parameter's device.
        seconds (float): wall seconds of the step, devices synchronised at the end.
        busy (np.ndarray): seconds the host spent in each device's ops, ``[num_devices]`` (on a CUDA
            device this is launch time).
        peak_bytes (np.ndarray): most bytes resident on each device, ``[num_devices]``: parameters and
            their optimizer state, inputs until their last use (on a CPU device the program's own tensor, which
            torch keeps to the end: :mod:`gnplace.execute.memory`), buffers' copies, live tensors by storage
            (a view keeps what it shows), copies received from other devices, the loss and the gradients
            (and their copies on the parameters' devices) to the end; no op's workspace (what its kernel
            frees before it returns: :mod:`gnplace.execute.memory`).
        moved_bytes (float): bytes that crossed devices.
        moves (int): tensors that crossed devices.
        buffers (dict[str, torch.Tensor]): the new value of each buffer the step updated (batch norm's
            running statistics), on the device that updated it.
        input_grads (dict[int, torch.Tensor | None]): the gradient of each input recorded with
            ``requires_grad`` (by position), on the input's device.
    """

    loss: torch.Tensor | None
    grads: dict[str, torch.Tensor | None]
    seconds: float
    busy: np.ndarray
    peak_bytes: np.ndarray
    moved_bytes: float
    moves: int
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)
    input_grads: dict[int, torch.Tensor | None] = field(default_factory=dict)


def synchronize(devices: Sequence[torch.device]) -> None:
    """Wait for every CUDA device among ``devices`` to finish its queued work."""
    for dev in {d for d in devices if d.type == "cuda"}:
        torch.cuda.synchronize(dev)


def _nbytes(x: Any) -> int:
    return int(x.numel()) * int(x.element_size()) if isinstance(x, torch.Tensor) else 0


def _storage_nbytes(x: Any) -> int:
    """Bytes of the storage under ``x``, as torch allocated it (a loss's 0-d mean can hold its batch's bytes)."""
    if isinstance(x, torch.Tensor) and x.layout == torch.strided:
        return int(x.untyped_storage().nbytes())
    return _nbytes(x)


#: How to make an argument at run time from ``(resolve, device)``: ``None`` for a constant used as it is.
_Build = Callable[[Callable[[Ref], Any], torch.device], Any] | None


def _builder(x: Any) -> _Build:
    """A maker of ``x`` with its references resolved, its tensors moved to the device and its device replaced.

    Only plain tuples, lists and dicts are looked into (what the trace records arguments in);
    :func:`_op_builders` checks that against ``tree_flatten`` and falls back to it when they differ.
    """
    if isinstance(x, Ref):
        return lambda resolve, device: resolve(x)
    if isinstance(x, torch.Tensor):  # a constant of the step
        return lambda resolve, device: x.to(device)
    if isinstance(x, torch.device):
        return lambda resolve, device: device
    kind = type(x)
    if kind is tuple or kind is list or kind is dict:
        slots = x.items() if kind is dict else enumerate(x)
        made = [(k, b) for k, b in ((k, _builder(v)) for k, v in slots) if b is not None]
        if not made:
            return None
        fixed = dict(x) if kind is dict else list(x)

        def container(resolve: Callable[[Ref], Any], device: torch.device) -> Any:
            out = fixed.copy()
            for k, b in made:
                out[k] = b(resolve, device)
            return tuple(out) if kind is tuple else out

        return container
    return None


def _moved(x: Any) -> bool:
    """Whether ``x`` is replaced at run time: a reference, a tensor constant or a device."""
    return isinstance(x, (Ref, torch.Tensor, torch.device))


def _plain_count(x: Any) -> int:
    """How many replaced leaves :func:`_builder` finds in ``x`` (it looks into plain tuples, lists, dicts only)."""
    kind = type(x)
    if _moved(x):
        return 1
    if kind is tuple or kind is list:
        return sum(_plain_count(v) for v in x)
    if kind is dict:
        return sum(_plain_count(v) for v in x.values())
    return 0


def _tree_maker(value: Any) -> Callable[[Callable[[Ref], Any], torch.device], Any]:
    """The slow, general maker: ``tree_map`` over ``value`` at every call."""

    def make(resolve: Callable[[Ref], Any], device: torch.device) -> Any:
        def one(x: Any) -> Any:
            if isinstance(x, Ref):
                return resolve(x)
            if isinstance(x, torch.Tensor):
                return x.to(device)
            return device if isinstance(x, torch.device) else x

        return tree_map(one, value)

    return make


def _op_builders(op: ProgramOp) -> tuple[Any, Any]:
    """``op``'s argument makers ``(args, kwargs)``, worked out on first use and kept on the op (not pickled)."""
    made = op.__dict__.get("_builders")
    if made is not None:
        return made
    args, kwargs = tuple(op.args), dict(op.kwargs)
    if _plain_count((args, kwargs)) == sum(_moved(x) for x in tree_flatten((args, kwargs))[0]):
        made = (_builder(args) or (lambda resolve, device: args),
                _builder(kwargs) or (lambda resolve, device: dict(kwargs)))  # a fresh dict: "device" may be set
    else:  # something to replace sits in another kind of container: tree_map, as before
        made = (_tree_maker(args), _tree_maker(kwargs))
    object.__setattr__(op, "_builders", made)  # a frozen dataclass: kept beside its fields, dropped by pickling
    return made


def _flat(out: Any) -> list[Any]:
    """An op's outputs flattened as ``tree_flatten`` does, without it for the usual tensor or tuple of tensors."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(x is None or isinstance(x, torch.Tensor) for x in out):
        return list(out)
    return tree_flatten(out)[0]


def call_op(op: ProgramOp, fn: Any, resolve: Callable[[Ref], Any], device: torch.device) -> list[Any]:
    """Run ``op`` (its aten overload ``fn``) with its references resolved, new tensors made on ``device``.

    Returns:
        list: the op's outputs, flattened.

    Raises:
        ExecutionFailed: if the op cannot run there (one line naming the op and the device); running out
            of device memory is raised as it is, for the caller to report as OOM.
    """
    make_args, make_kwargs = _op_builders(op)
    kwargs = make_kwargs(resolve, device)
    if "device" in kwargs:
        kwargs["device"] = device
    args = make_args(resolve, device)
    try:
        out = fn(*args, **kwargs)
    except Exception as err:
        if is_oom_error(err):
            raise
        if op.target in _VIEWS_AS_RESHAPE and isinstance(err, RuntimeError) and "reshape" in str(err):
            # a tensor that crossed ranks arrives in the layout it was recorded in, which may not be the one a
            # kernel made it in: a view recorded against that layout is made as a reshape, a copy where its
            # strides allow no view (a crossing is a copy anyway)
            return _flat(torch.ops.aten.reshape.default(*args, **kwargs))
        first = first_line(err)
        raise ExecutionFailed(f"op {op.target} failed on {device}: {first}") from err
    return _flat(out)


#: View ops whose failure on a tensor of another layout than the one recorded is retried as a reshape.
_VIEWS_AS_RESHAPE = frozenset({"aten.view.default", "aten._unsafe_view.default"})


def _cross(value: torch.Tensor, devices: Sequence[torch.device], target: int) -> torch.Tensor:
    """``value`` copied to device ``target``; running out of memory there (the copy allocates) is its OOM."""
    try:
        return value.to(devices[target])
    except Exception as err:
        if is_oom_error(err):
            raise DeviceOutOfMemory(target, float("inf")) from err
        raise


def place_params(
    params: Mapping[str, torch.Tensor], plan: Plan, devices: Sequence[torch.device], *, copy: bool = False,
) -> dict[str, torch.Tensor]:
    """Each parameter moved to its plan device (``copy``: a copy even where it is already there).

    Raises:
        DeviceOutOfMemory: if a device runs out of memory for real while a parameter is copied onto it.
    """
    placed = {}
    for name, value in params.items():
        target = plan.param_device.get(name, 0)
        try:
            placed[name] = value.to(devices[target], copy=copy)
        except Exception as err:
            if is_oom_error(err):
                raise DeviceOutOfMemory(target, float("inf")) from err
            raise
    return placed


def optimizer_state(program: Program, params: Mapping[str, torch.Tensor], plan: Plan) -> OptimizerState | None:
    """The state of the program's optimizer for ``params`` (zeroed, on their devices); ``None`` for SGD, which has none.

    Raises:
        DeviceOutOfMemory: if a device runs out of memory for real while a parameter's state is made on it.
    """
    if program.optimizer == "sgd":
        return None
    state = OptimizerState(program.optimizer, {})
    for name, value in params.items():
        try:
            state.add(name, value)
        except Exception as err:
            if is_oom_error(err):
                raise DeviceOutOfMemory(plan.param_device.get(name, 0), float("inf")) from err
            raise
    return state


@without_autocast()  # the casts autocast made when recording are ops of the step; none is added
@under_recorded_default_dtype  # torch.ones(n) makes the dtype it made when recorded
def run_step(
    program: Program,
    plan: Plan,
    devices: Sequence[torch.device],
    *,
    params: dict[str, torch.Tensor] | None = None,
    inputs: Sequence[torch.Tensor] | None = None,
    lr: float = 0.0,
    capacity: np.ndarray | None = None,
    keep_outputs: bool = True,
    buffers: Mapping[str, torch.Tensor] | None = None,
    state: OptimizerState | None = None,
) -> StepOutput:
    """Run one step of ``program`` placed by ``plan`` over the torch ``devices`` (cluster index -> device).

    Args:
        program (Program): the step.
        plan (Plan): where each op runs (:meth:`Program.plan`).
        devices (Sequence[torch.device]): the torch device of each cluster device.
        params (dict, optional): parameter values, already on their plan devices (default: the
            program's initial values, moved there; copied there where ``lr`` updates them, so that the
            program's own values are never trained).
        inputs (Sequence, optional): input values, already on their devices (default: the program's).
        lr (float, optional): learning rate of the update of the program's optimizer
            (:attr:`Program.optimizer <gnplace.execute.program.Program.optimizer>`), applied in place to
            ``params``; 0 skips the update (default: 0).
        capacity (np.ndarray, optional): bytes each device may hold, ``[num_devices]``; a step that
            needs more raises :class:`DeviceOutOfMemory` (default: no limit).
        keep_outputs (bool, optional): return the loss and the gradients (default: :obj:`True`).
        buffers (Mapping, optional): the buffers' values to start from, copied to each device that
            uses them (default: the program's, as recorded); the step's updates come back in
            :attr:`StepOutput.buffers`.
        state (OptimizerState, optional): the optimizer's state of ``params``, on their devices, updated
            in place (:func:`optimizer_state`; default: a fresh one for this step, as a new optimizer's
            first step, where the optimizer keeps any). Its bytes are counted on each parameter's device
            whether or not the step updates (:meth:`Program.state_bytes
            <gnplace.execute.program.Program.state_bytes>`).

    Raises:
        InvalidPlacement: if the plan names a device beyond ``devices``.
        DeviceOutOfMemory: if ``capacity`` is exceeded, or a device runs out of memory for real in an
            op, a tensor's crossing to it, an input's copy onto it, a parameter's update or (without
            ``params``) a parameter's copy onto it.
    """
    num_devices = len(devices)
    used = [*plan.op_device.tolist(), *plan.param_device.values(), *plan.input_device.values()]
    if used and max(used) >= num_devices:
        raise InvalidPlacement(f"the plan runs on device {max(used)}, but {num_devices} torch devices are given "
                               f"(devices 0..{num_devices - 1})")
    fns = [resolve_aten(op.target) for op in program.ops]
    # worked out before the clock starts: the buffers each op reads, what its outputs share memory with
    buffer_reads = [program.buffers_read(i) for i in range(len(program.ops))]
    sources = [shared_source(op) for op in program.ops]
    if params is None:  # (on a CPU device .to hands back the program's own tensor, which the update trained)
        params = place_params(program.params, plan, devices, copy=bool(lr))
    if state is None and lr:
        state = optimizer_state(program, params, plan)
    made_inputs = inputs is None  # then the step's values hold them alone, and free them after their last use
    if inputs is None:
        inputs = []
        for index in range(len(program.inputs)):
            target = plan.input_device.get(index, 0)
            try:
                inputs.append(program.input_copy(index, devices[target]))
            except Exception as err:  # the copy allocates on its device
                if is_oom_error(err):
                    raise DeviceOutOfMemory(target, float("inf")) from err
                raise
    ledger = Ledger(num_devices, capacity)  # parameters, inputs and the step's tensors, by storage
    for k, p in params.items():
        ledger.hold(plan.param_device.get(k, 0), _nbytes(p) + program.state_bytes(k), check=False)
    ledger.check()  # the parameters alone: no op output would tell
    busy = np.zeros(num_devices)
    values: dict[tuple[Ref, int], Any] = {}  # (ref, device) -> value there
    start_buffers = program.buffers if buffers is None else buffers
    written = {name for op in program.ops for name in op.writes_buffers}
    copies: dict[tuple[str, int], torch.Tensor] = {}  # (buffer, device) -> the step's copy there
    counted: set[tuple[str, int]] = set()  # (buffer, device) whose copy the ledger holds
    updated: dict[str, int] = {}  # buffer -> the device whose copy the step last updated
    fresh: dict[str, set[int]] = {}  # buffer -> the devices whose copy holds its latest value
    moved_bytes, moves = 0.0, 0

    where: dict[Ref, list[int]] = {}  # devices holding a copy of each op output

    def admit(key: tuple[Ref, int], value: Any, size: int, shares: Ref | None = None) -> None:
        """Hold ``value`` as ``key``: a new storage of ``size`` bytes, or (``size`` 0) one sharing ``shares``'s."""
        values[key] = value
        where.setdefault(key[0], []).append(key[1])
        if size:
            ledger.make(key, key[1], size)
        elif shares is not None:
            ledger.share(key, (shares, key[1]))

    def home(ref: Ref) -> int:
        return plan.value_device.get(ref, 0)

    for name, p in params.items():
        values[(Ref("param", name=name), plan.param_device.get(name, 0))] = p
    for position in range(len(inputs)):  # (no loop variable: it held the last input, a device copy, all step)
        key = (Ref("input", name=str(position)), plan.input_device.get(position, 0))
        if position in plan.input_device:  # an input the step reads: on its device until its last use
            admit(key, inputs[position], _nbytes(inputs[position]))
        else:
            values[key] = inputs[position]
    if made_inputs:
        inputs = ()

    def move_after(index: int) -> None:
        """Send what crosses after op ``index``, then drop the copies no op reads any more (:attr:`Plan.frees`)."""
        nonlocal moved_bytes, moves
        for ref, src, dst in plan.moves.get(index, ()):
            value = values[(ref, src)]
            admit((ref, dst), _cross(value, devices, dst), _nbytes(value))
            moved_bytes += _nbytes(value)
            moves += 1
        for ref, dev in plan.frees.get(index, ()):
            held = where.get(ref)
            if held and dev in held:  # (a parameter on its own device is the caller's, never the step's)
                held.remove(dev)
                values.pop((ref, dev), None)
                ledger.release((ref, dev))

    synchronize(devices)
    start = time.perf_counter()
    move_after(BEFORE)
    for i, op in enumerate(program.ops):
        d = int(plan.op_device[i])
        device = devices[d]

        def resolve(ref: Ref, d: int = d, device: torch.device = device) -> Any:
            name = ref.name if ref.kind == "buffer" else program.buffer_alias.get(ref)
            if name is not None:  # a buffer, or an op's result that is the buffer: its latest value here
                key = (name, d)
                latest = fresh.get(name)  # devices holding the buffer's latest value, once the step wrote it
                if latest is not None and d not in latest:  # written on another device since: bring that value
                    copies[key] = copies[(name, next(iter(latest)))].to(device, copy=True)
                    latest.add(d)
                elif key not in copies:
                    # a copy of what the step writes; what it only reads (frozen parameters) is used in place
                    copies[key] = start_buffers[name].detach().to(device, copy=name in written)
                return copies[key]
            return values[(ref, d)]

        for name in buffer_reads[i]:  # the step's copy of a buffer lives on each device reading it
            if (name, d) not in counted:
                counted.add((name, d))
                ledger.hold(d, _nbytes(start_buffers[name]))
        t0 = time.perf_counter()
        try:
            outputs = call_op(op, fns[i], resolve, device)
        except Exception as err:
            if is_oom_error(err):
                raise DeviceOutOfMemory(d, float("inf")) from err
            raise
        for out_index in range(len(outputs)):  # (no loop variable holding an output, nor the list: they held the
            if op.out_shapes[out_index] is not None:  # op's outputs through the next op, though freed after this)
                size = _storage_nbytes(outputs[out_index]) if op.out_bytes else 0
                admit((Ref("op", i, out_index), d), outputs[out_index], size, sources[i])
        del outputs
        busy[d] += time.perf_counter() - t0
        for name in op.writes_buffers:
            updated[name] = d
            fresh[name] = {d}
        move_after(i)

    def deliver(ref: Ref | None, target: int | None) -> torch.Tensor | None:
        """The value ``ref`` names, moved to device ``target`` (None: where it was made)."""
        nonlocal moved_bytes, moves
        if ref is None:
            return None
        src = home(ref)
        if target is None or src == target:
            return values[(ref, src)]
        if (ref, target) in values:  # crossed already, for an op there or another parameter's update
            return values[(ref, target)]
        value = values[(ref, src)]
        moved_bytes += _nbytes(value)
        moves += 1
        admit((ref, target), _cross(value, devices, target), _nbytes(value))  # lives there until the step ends
        return values[(ref, target)]

    # each gradient goes to its parameter's device, where the update runs; an input's to the input's
    grads = {name: deliver(ref, plan.param_device.get(name)) for name, ref in program.grads.items()}
    input_grads = {k: deliver(ref, plan.input_device.get(k, 0)) for k, ref in program.input_grads.items()}
    if lr:
        with torch.no_grad():
            if state is None:  # SGD, as the executors have always run it
                for name, g in grads.items():
                    if g is not None:
                        params[name].sub_(g, alpha=lr)
            else:
                for name, g in grads.items():
                    if g is not None:
                        try:  # Adam's update allocates temporaries of the parameter's size, which no count holds
                            state.update(name, params[name], g, lr)
                        except Exception as err:
                            if is_oom_error(err):
                                raise DeviceOutOfMemory(plan.param_device.get(name, 0), float("inf")) from err
                            raise
    synchronize(devices)
    seconds = time.perf_counter() - start
    loss = values.get((program.loss, home(program.loss))) if keep_outputs else None
    return StepOutput(loss, grads if keep_outputs else {}, seconds, busy, ledger.peak, moved_bytes, moves,
                      {name: copies[(name, d)] for name, d in updated.items()}, input_grads if keep_outputs else {})

