"""One rank's share of a placed training step under ``torch.distributed``: its ops, its sends and its receives.

:func:`run_rank` runs the ops a :class:`~gnplace.execute.program.Plan` puts on one rank, in the recorded order save
that a ready op may pass one still waiting for a tensor (its ready queue), sending each output another rank reads
once (``isend``, tagged by :func:`transfer_tags`) and posting every receive when the step starts; it returns the
rank's seconds. :func:`run_command` is every rank's side of one timing: warm-up and timed steps, the figures gathered.
:class:`~gnplace.execute.dist.DistTimer` starts the ranks and drives them.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.distributed as dist

from gnplace.execute.optim import OptimizerState
from gnplace.execute.program import (
    BEFORE,
    READY_WINDOW,
    Plan,
    Program,
    next_ready,
    resolve_aten,
    storage_of,
    under_recorded_default_dtype,
)
from gnplace.execute.runner import call_op
from gnplace.importers.trace import Ref, without_autocast

__all__ = ["run_command", "run_rank", "transfer_tags"]


def transfer_tags(plan: Plan) -> dict[tuple[Ref, int], int]:
    """A message tag for every ``(tensor, destination)`` that crosses ranks under ``plan``, the same on every rank."""
    tags: dict[tuple[Ref, int], int] = {}
    for after in sorted(plan.moves):
        for ref, _, dst in plan.moves[after]:
            tags[(ref, dst)] = len(tags)
    for _, ref, _, dst in plan.grad_moves:
        tags.setdefault((ref, dst), len(tags))
    return tags


@without_autocast()  # the casts autocast made when recording are ops of the step; none is added
@under_recorded_default_dtype  # torch.ones(n) makes the dtype it made when recorded
def run_rank(
    program: Program, plan: Plan, rank: int, device: torch.device, params: dict[str, torch.Tensor], *, lr: float,
    collect: bool = False, op_seconds: np.ndarray | None = None, window: int = READY_WINDOW,
    state: OptimizerState | None = None,
) -> tuple[float, float, dict[str, Any]]:
    """Run this rank's share of one step (see the module docstring).

    Every receive is posted at the start, each tensor under its own tag (:func:`transfer_tags`); a
    rank then runs the first of its ops (in the recorded order, looking ``window`` ops ahead) whose
    inputs have all arrived, as a device runs its ready ops in the simulator, and waits only when
    none has. An in-place op, and one that reads or updates a buffer, runs only after every earlier op of
    the rank, and no later op before it.
    Gloo's receives cannot be seen arriving (a receive's ``is_completed()`` stays false until its
    ``wait()``, torch 2.13), so with gloo an op that reads another rank's tensor runs only as the rank's
    earliest op not yet run, once no other op in the window is ready, and the rank then waits for it.
    An op output the rank sends leaves after its last use on the rank (right after it is sent, where nothing
    there reads it): the rank waits for its sends then, which cannot deadlock, as every receive of the step is
    posted before any rank waits for anything (gloo's sends cannot be seen leaving either, and one of up to a
    few MiB has left when ``isend`` returns). Parameters, inputs, the loss and gradients sent are waited for
    when the step ends, before the update.

    Args:
        program (Program): the step.
        plan (Plan): where everything runs (the same on every rank).
        rank (int): this rank (its device index in the plan).
        device (torch.device): this rank's torch device.
        params (dict): this rank's parameters (those the plan puts on it), updated in place.
        lr (float): learning rate of the update of the program's optimizer (:attr:`Program.optimizer
            <gnplace.execute.program.Program.optimizer>`; 0: no update).
        collect (bool): return the loss and this rank's gradients as CPU tensors.
        op_seconds (np.ndarray, optional): filled with the seconds of each op from the end of the
            previous one (the loop's own overhead charged to the op): calibration runs every op on
            one rank with it, which needs no process group.
        window (int): how many of its next ops a rank looks through for one that is ready.
        state (OptimizerState, optional): the optimizer's state of ``params``, on this rank's device,
            updated in place (default: a fresh one for this step where the optimizer keeps any).

    Returns:
        tuple: wall seconds of the step on this rank, seconds spent computing, and (with
        ``collect``) ``{"loss": ..., "grads": {...}}`` of what lives on this rank.
    """
    ops = program.ops
    if state is None and lr and program.optimizer != "sgd":
        state = OptimizerState(program.optimizer, params)
    mine = [i for i in range(len(ops)) if int(plan.op_device[i]) == rank]
    fns = {i: resolve_aten(ops[i].target) for i in mine}
    inputs_of = {i: ops[i].reads for i in mine}
    tags = transfer_tags(plan)
    values: dict[Ref, Any] = {}
    buffers: dict[str, torch.Tensor] = {}
    for name, p in params.items():
        values[Ref("param", name=name)] = p
    for k, d in plan.input_device.items():
        if d == rank:
            values[Ref("input", name=str(k))] = program.input_copy(k, device)
    keep = set(program.results())
    uses: dict[Ref, int] = {}
    for i in mine:
        for ref in set(inputs_of[i]):
            uses[ref] = uses.get(ref, 0) + 1
    pending: list[Any] = []  # (message, tensor) of every send waited for when the step ends
    # the messages of each op output this rank sends (not the loss or a gradient), with the tensors they read:
    # waited for, and let go, where the output leaves (release)
    sending: dict[Ref, list[tuple[Any, torch.Tensor]]] = {}
    arriving: dict[Ref, Any] = {}
    all_moves = [*plan.moves.values(), [(ref, src, dst) for _, ref, src, dst in plan.grad_moves]]
    layouts = {ref: _layout(program, ref) for moves in all_moves for ref, src, dst in moves if rank in (src, dst)}
    waited = 0.0  # seconds spent waiting for tensors from other ranks, and for sends to leave (not computing)
    start = time.perf_counter()
    for moves in all_moves:
        for ref, src, dst in moves:
            if dst == rank and ref not in arriving:  # (no name here holds a receive buffer past its release)
                arriving[ref], values[ref] = _post_receive(program, ref, layouts[ref], src, tags[(ref, dst)], device)

    written = program.written_storages
    # buffer updates from other ranks (program.buffer_moves), under tags after the tensors' own
    buffer_in: dict[tuple[int, str], tuple[Any, torch.Tensor]] = {}  # (reader, buffer) -> (receive, tensor)
    buffer_out: dict[int, list[tuple[str, int, int]]] = {}  # writer -> [(buffer, destination, tag)]
    for k, (name, writer, src, dst, reader) in enumerate(program.buffer_moves(plan)):
        if dst == rank:
            held = torch.empty_like(program.buffers[name], device=device)
            buffer_in[(reader, name)] = (dist.irecv(held, src, tag=len(tags) + k), held)
        elif src == rank:
            buffer_out.setdefault(writer, []).append((name, dst, len(tags) + k))
    current = -1  # the op being run: a buffer read takes the update that crossed for it

    def send(moves: list[tuple[Ref, int, int]]) -> None:
        for ref, src, dst in moves:
            if src == rank:
                # isend reads the tensor's memory until the message leaves: one an in-place op writes later
                # would arrive written (a wrong loss), so such a tensor goes as a copy
                tensor = _on_the_wire(values[ref], *_lazy(program, ref))
                layout = layouts[ref]
                wire = tensor.permute(layout.order)  # its memory in order (no copy) where it is laid out as recorded
                if storage_of(program, ref) in written or not wire.is_contiguous():
                    wire = _laid_out(layout, tensor.device).copy_(tensor).permute(layout.order)
                message = (dist.isend(wire, dst, tag=tags[(ref, dst)]), wire)
                if ref.kind == "op" and ref not in keep:
                    sending.setdefault(ref, []).append(message)
                else:
                    pending.append(message)

    def release(ref: Ref) -> None:
        """Let go of this rank's output ``ref`` after its last use here, its sends waited for (they read it).

        Every receive of the step is posted when it starts, before any rank waits for anything, so a send's wait
        ends once the message has left (gloo writes one of up to a few MiB within ``isend`` itself; its
        ``is_completed()`` stays false until ``wait()``, torch 2.13, so there is nothing to poll).
        """
        nonlocal waited
        values.pop(ref, None)
        messages = sending.pop(ref, None)
        if messages:
            t0 = time.perf_counter()
            for work, _ in messages:
                work.wait()
            waited += time.perf_counter() - t0

    def resolve(ref: Ref) -> Any:
        nonlocal waited
        if ref.kind == "buffer":
            update = buffer_in.pop((current, ref.name), None)
            if update is not None:  # updated on another rank since this rank's copy was made
                t0 = time.perf_counter()
                update[0].wait()
                waited += time.perf_counter() - t0
                buffers[ref.name] = update[1]
            elif ref.name not in buffers:
                buffers[ref.name] = program.buffers[ref.name].to(device, copy=True)
            return buffers[ref.name]
        work = arriving.pop(ref, None)
        if work is not None:
            t0 = time.perf_counter()
            work.wait()
            waited += time.perf_counter() - t0
        return values[ref]

    def ready(i: int) -> bool:
        for ref in inputs_of[i]:
            work = arriving.get(ref)
            if work is not None:
                if not work.is_completed():
                    return False
            elif ref.kind == "op" and ref not in values:  # made by an earlier op of this rank not yet run
                return False
            elif ref.kind == "buffer" and (i, ref.name) in buffer_in and not buffer_in[(i, ref.name)][0].is_completed():
                return False
        return True

    send(plan.moves.get(BEFORE, []))
    busy = 0.0
    done = [False] * len(mine)
    first = 0  # the earliest of this rank's ops not yet run
    last = time.perf_counter()
    while first < len(mine):
        pick = next_ready(ops, mine, done, first, ready, window)
        i = mine[pick]
        op = ops[i]
        t0, waited_before = time.perf_counter(), waited
        current = i
        # (no name here keeps an output past its release: a list of them held it through the next op)
        values.update({Ref("op", i, k): value for k, value in enumerate(call_op(op, fns[i], resolve, device))
                       if op.out_shapes[k] is not None})
        busy += time.perf_counter() - t0 - (waited - waited_before)
        send(plan.moves.get(i, []))
        for name, dst, tag in buffer_out.get(i, ()):  # a copy: a later update here must not reach the message
            update = buffers[name].clone()
            pending.append((dist.isend(update, dst, tag=tag), update))
        for k in range(len(op.out_shapes)):  # an output made for other ranks alone leaves once sent
            if Ref("op", i, k) in sending and Ref("op", i, k) not in uses:
                release(Ref("op", i, k))
        for ref in set(inputs_of[i]):
            uses[ref] -= 1
            if uses[ref] == 0 and ref not in keep and ref.kind == "op" and ref not in arriving:
                release(ref)
        done[pick] = True
        while first < len(mine) and done[first]:
            first += 1
        if op_seconds is not None:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            now = time.perf_counter()
            op_seconds[i] = now - last
            last = now
    grad_sends = [(ref, src, dst) for _, ref, src, dst in plan.grad_moves]
    send(grad_sends)
    grads: dict[str, Any] = {}
    for name, ref, _, dst in plan.grad_moves:
        if dst == rank:
            grads[name] = resolve(ref)
    for name, grad_ref in program.grads.items():
        if grad_ref is not None and name in params and name not in grads:
            grads[name] = resolve(grad_ref)
    for work, _ in pending:  # before the update: a parameter sent is read by isend until its message leaves
        work.wait()
    if lr:
        with torch.no_grad():
            if state is None:  # SGD, as the executors have always run it
                for name, g in grads.items():
                    params[name].sub_(g, alpha=lr)
            else:
                for name, g in grads.items():
                    state.update(name, params[name], g, lr)
    for work in [*arriving.values(), *(update for update, _ in buffer_in.values())]:
        work.wait()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    collected: dict[str, Any] = {}
    if collect:
        if plan.value_device.get(program.loss, 0) == rank:
            collected["loss"] = resolve(program.loss).detach().cpu()
        collected["grads"] = {k: v.detach().cpu() for k, v in grads.items()}
    return seconds, busy, collected


def _lazy(program: Program, ref: Ref) -> tuple[bool, bool]:
    """Whether ``ref`` was recorded with the conjugate bit and the negative bit (lazy ``conj()``, ``_neg_view``)."""
    if ref.kind == "op":
        lazy = program.ops[ref.index].out_lazy
        return lazy[ref.output] if ref.output < len(lazy) else (False, False)
    tensor = _given(program, ref)
    return bool(tensor.is_conj()), bool(tensor.is_neg())


def _given(program: Program, ref: Ref) -> torch.Tensor:
    """The parameter or input ``ref`` names, as the program holds it."""
    return program.params[ref.name] if ref.kind == "param" else program.inputs[int(ref.name)]


def _on_the_wire(value: torch.Tensor, conj: bool, neg: bool) -> torch.Tensor:
    """The memory ``value`` crosses ranks as: gloo views a complex tensor as real, which a marked one cannot be.

    Unmarked as recorded (``conj``, ``neg``), ``value`` is its plain memory (no copy when it is marked so),
    which :func:`_off_the_wire` marks again on the other side; a tensor marked otherwise is resolved.
    """
    if conj:
        value = value.conj()
    if neg:
        value = value._neg_view()
    return value.resolve_conj().resolve_neg()


def _off_the_wire(received: torch.Tensor, conj: bool, neg: bool) -> torch.Tensor:
    """``received`` (plain memory, :func:`_on_the_wire`) marked as the sender's tensor was recorded: the same values."""
    if neg:
        received = received._neg_view()
    return received.conj() if conj else received


class _Layout(NamedTuple):
    """How a tensor crosses ranks: its shape, dtype, strides (``None``: contiguous) and the order of its dims in memory.

    ``order`` is the permutation of the dims under which a tensor of these strides is contiguous (the identity
    for a contiguous one): gloo sends and receives only contiguous tensors, and a tensor permuted so is its
    memory as it lies.
    """

    shape: tuple[int, ...]
    dtype: torch.dtype
    stride: tuple[int, ...] | None
    order: tuple[int, ...]


def _layout(program: Program, ref: Ref) -> _Layout:
    """The layout ``ref`` crosses ranks in: as it was recorded, where its strides are a contiguous tensor's permuted.

    A tensor made transposed (``t()`` of a weight, which the backward's ``mm`` reads) arrived contiguous: the op
    reading it then took another kernel path than eager's and rounded otherwise (gradients 1 ulp off). One
    whose memory has gaps or overlaps (a slice, an ``expand``) crosses contiguous.
    """
    if ref.kind == "op":
        op = program.ops[ref.index]
        shape, dtype = op.out_shapes[ref.output], op.out_dtypes[ref.output]
        assert shape is not None and dtype is not None
        stride = op.out_strides[ref.output] if ref.output < len(op.out_strides) else None
    else:
        tensor = _given(program, ref)
        shape, dtype, stride = tuple(tensor.shape), tensor.dtype, tuple(tensor.stride())
    if stride is not None:
        order = tuple(sorted(range(len(shape)), key=lambda d: (-stride[d], d)))
        if torch.empty_strided(shape, stride, device="meta").permute(order).is_contiguous():
            return _Layout(shape, dtype, stride, order)
    return _Layout(shape, dtype, None, tuple(range(len(shape))))


def _laid_out(layout: _Layout, device: torch.device) -> torch.Tensor:
    """An empty tensor of ``layout`` on ``device``."""
    if layout.stride is None:
        return torch.empty(layout.shape, dtype=layout.dtype, device=device)
    return torch.empty_strided(layout.shape, layout.stride, dtype=layout.dtype, device=device)


def _post_receive(
    program: Program, ref: Ref, layout: _Layout, src: int, tag: int, device: torch.device,
) -> tuple[Any, torch.Tensor]:
    """Post the receive of ``ref`` from rank ``src``: its message, and the tensor it fills (as ``ref`` was recorded).

    The buffer is received in the order its memory holds it, so that it arrives in the layout it was made in.
    """
    buffer = _laid_out(layout, device)
    work = dist.irecv(buffer.permute(layout.order), src, tag=tag)
    return work, _off_the_wire(buffer, *_lazy(program, ref))  # (a view: filled as it arrives)


def run_command(program: Program, placement: np.ndarray, device: torch.device, options: dict[str, Any]) -> Any:
    """Every rank's side of one ``run`` command: warm-up and timed steps; gathers per-rank figures.

    With ``options["collect"]``, a rank's figures carry the first step's loss and gradients
    (:func:`run_rank`) and its parameters as the last step's update left them (``"params"``).
    """
    rank = dist.get_rank()
    plan = program.plan(placement)
    params = {k: v.to(device, copy=True) for k, v in program.params.items() if plan.param_device.get(k) == rank}
    state = None if program.optimizer == "sgd" else OptimizerState(program.optimizer, params)  # kept across steps
    seconds: list[float] = []
    busy: list[float] = []
    collected: dict[str, Any] = {}
    for r in range(options["warmup"] + options["repeats"]):
        dist.barrier()
        s, b, got = run_rank(program, plan, rank, device, params, lr=options["lr"],
                             collect=options["collect"] and r == 0, state=state)
        collected = collected or got
        if r >= options["warmup"]:
            seconds.append(s)
            busy.append(b)
    if options["collect"]:
        collected["params"] = {k: v.detach().cpu() for k, v in params.items()}
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (seconds, busy, collected))
    return gathered
