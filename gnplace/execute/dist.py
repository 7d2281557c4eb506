"""``DistTimer``: time placed training steps across processes with ``torch.distributed``, one rank per device.

Rank ``r`` is device ``r`` of the cluster. Every rank runs the ops placed on it in the one recorded
(topological) order, except that it may run a later op whose inputs are all there before an
earlier one still waiting for a tensor (a device's ready queue, as in the simulator). After an op
whose output another rank consumes, the producer sends that output once to each consuming rank
(``isend``, tagged by tensor); every rank posts all its receives (``irecv``) when the step starts and
waits for one only when no op it could run is ready (gloo cannot show a receive arriving before it is
waited for, so there an op reading another rank's tensor runs only as the rank's earliest op left,
once no other op is ready: see :func:`run_rank`). Parameters and inputs cross before the first
op and gradients to their parameter's rank after the last, where the graph's optimizer updates the
parameter (:mod:`gnplace.execute.optim`; its state lives on that rank across the steps of a
measurement). Sends never wait and receives are all
posted, so a step cannot deadlock: the earliest op (in the recorded order) not yet run anywhere has
every input made, and its rank either runs it or something else that is ready.

Processes: rank 0 is the process that times (the driver: a search, fine-tuning). Without
``torch.distributed``'s environment variables the timer starts ranks ``1..n-1`` itself on this
machine (fresh interpreters running :func:`_worker_main`, so a caller's script needs no ``__main__``
guard) and gives each ``threads`` CPU threads (default 1: two ranks of one thread on a CPU-only
machine are a real two-device cluster, with real compute and real transfers over gloo). A rank that
dies while starting is reported at once with the last line it wrote; ranks whose driver is killed
(``kill -9``) exit on their own within a second.
Across hosts, start every process with ``torchrun`` (``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``,
``WORLD_SIZE``): rank 0 runs the timing code and the others call :func:`serve` (``gnplace finetune``,
``scripts/finetune.py`` and ``gnplace profile --timer dist`` do both). Backends: gloo on CPUs, NCCL where every
rank has a GPU.

The step time is the slowest rank's, all ranks starting together after a barrier; the median of
``repeats`` steps after ``warmup``. A placement whose resident bytes exceed a device's capacity is
reported out of memory without running, by the bytes each rank holds in its step
(:meth:`~gnplace.execute.program.Program.peak_bytes` with ``ranks=True``: parameters and their optimizer
state, inputs, buffers' copies, every receive buffer from the step's start, an op's output it sends until its
last use on the rank, where the rank waits for its sends and lets it go, with the copy it sends of one written in
place or with gaps, and the buffer updates it sends; each rank's ops in the order its ready queue runs them over
gloo, :meth:`~gnplace.execute.program.Program.rank_order`, where NCCL may run an op reading another rank's tensor
sooner).
A rank that runs out of memory for real (``torch.OutOfMemoryError`` on a GPU, the CPU allocator's
failure) leaves the step, which is then reported out of memory on that device; the ranks this timer
started are restarted at the next step (a few seconds). A rank that dies otherwise ends the timer
with :class:`~gnplace.exceptions.ExecutionFailed` naming it. Ranks started with ``torchrun`` cannot
be restarted, so there any rank's failure, out of memory included, ends the timer.
"""

from __future__ import annotations

import atexit
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.distributed as dist

from gnplace.cluster import Cluster
from gnplace.exceptions import ExecutionFailed, InvalidArgument, first_line
from gnplace.execute.base import RealStepTimer, check_threads, oom_result
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
from gnplace.execute.runner import call_op, is_oom_error
from gnplace.graph import OpGraph
from gnplace.importers.trace import Ref, without_autocast
from gnplace.limits import MAX_TIMEOUT_S, check_timeout
from gnplace.seed import torch_rng_kept
from gnplace.sim.timer import StepResult
from gnplace.workers import available_cores

__all__ = [
    "DistTimer", "RankOutOfMemory", "serve", "serve_unless_rank_zero", "release_waiting_ranks", "run_rank",
    "transfer_tags", "launched_by_torchrun", "check_cores",
    "MAX_TIMEOUT_S", "environment_backend",
]

#: Exit code of a started rank that ran out of memory in a step (told apart from a rank that failed).
OOM_EXIT_CODE = 86


class RankOutOfMemory(ExecutionFailed):
    """A rank ran out of device memory for real in a step; the timer reports the placement out of memory.

    Attributes:
        rank (int): the rank (the cluster's device index) that ran out.
    """

    def __init__(self, rank: int, said: str) -> None:
        super().__init__(f"rank {rank} ran out of memory: {said}")
        self.rank = rank


def check_cores(world: int, threads: int) -> None:
    """Refuse ``world`` ranks of ``threads`` threads each that this machine cannot give a core each.

    Ranks that share cores time their contention, not the cluster they stand for.

    Raises:
        InvalidArgument: if ``world * threads`` is more than the cores this process may run on.
    """
    cores = available_cores()
    if world * threads > cores:
        raise InvalidArgument(
            f"{world} ranks of {threads} thread(s) need {world * threads} cores on this machine, which gives this "
            f"process {cores}: use fewer devices or threads, or start the ranks on several hosts with torchrun"
        )


def launched_by_torchrun() -> bool:
    """Whether this process is one of several started with torch.distributed's environment variables."""
    return "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1


def _rank_device(backend: str) -> torch.device:
    if backend == "nccl":
        local = os.environ.get("LOCAL_RANK", dist.get_rank() % max(1, torch.cuda.device_count()))
        return torch.device("cuda", int(local))
    return torch.device("cpu")


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


def _run_command(program: Program, placement: np.ndarray, device: torch.device, options: dict[str, Any]) -> Any:
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


def _round_trip(rank: int, other: int, outbox: torch.Tensor, inbox: torch.Tensor) -> None:
    """Rank 0 sends ``outbox`` to ``other`` and receives ``inbox`` back; the other rank the reverse."""
    if rank == 0:
        dist.send(outbox, other)
        dist.recv(inbox, other)
    else:
        dist.recv(inbox, other)
        dist.send(outbox, other)


def pingpong(peer: int, sizes: list[int], repeats: int, device: torch.device) -> list[float]:
    """Median one-way seconds of sending ``sizes`` bytes between rank 0 and ``peer`` (half a round trip).

    Ranks 0 and ``peer`` take part (the others return at once); rank 0 returns the times.
    """
    rank = dist.get_rank()
    if rank not in (0, peer):
        return []
    other = peer if rank == 0 else 0
    times = []
    for size in sizes:
        buffer = torch.zeros(max(1, size // 4), dtype=torch.float32, device=device)
        trips = []
        for r in range(repeats + 1):
            start = time.perf_counter()
            _round_trip(rank, other, buffer, buffer)
            if r:  # the first exchange sets the connection up
                trips.append(time.perf_counter() - start)
        times.append(float(np.median(trips)) / 2)
    return times


def exchange_cost(peer: int, rounds: int, device: torch.device, *, iterations: int = 50, width: int = 256) -> float:
    """Seconds of each rank's time that a message exchanged while both ranks compute adds, per message end.

    Ranks 0 and ``peer`` each run ``iterations`` chunks of compute (four ``width``-wide matrix
    products) in two ways, ``rounds`` times each and alternating: alone, and with a receive from the
    other rank posted before each chunk and, after it, a send to it and a wait for both, as the
    executor posts receives up front and sends after each op. Each message then costs its sender
    and its receiver, so half the extra seconds per chunk is what one end of one message costs.
    On CPU ranks that share a host's cores this is far more than the wire time (0.6-0.9 ms on a
    2-core VM with 1.4 ms chunks, against 60 us from a computing rank to an idle one): both communication
    threads need a core while both ranks compute. Rank 0 returns its measurement, others 0.
    """
    rank = dist.get_rank()
    if rank not in (0, peer):
        return 0.0
    other = peer if rank == 0 else 0
    matrix = torch.randn(width, width, generator=torch.Generator().manual_seed(0)).to(device)
    outbox, inbox = torch.zeros(16, device=device), torch.zeros(16, device=device)

    def chunks(talk: bool) -> float:
        _round_trip(rank, other, outbox, inbox)  # both ranks start within a round trip of each other
        start = time.perf_counter()
        for _ in range(iterations):
            receive = dist.irecv(inbox, other) if talk else None
            for _ in range(4):
                matrix @ matrix
            if receive is not None:
                send = dist.isend(outbox, other)
                receive.wait()
                if send is not None:
                    send.wait()
        return (time.perf_counter() - start) / iterations

    alone, talking = [], []
    for _ in range(rounds):
        alone.append(chunks(False))
        talking.append(chunks(True))
    return max(0.0, float(np.median(talking) - np.median(alone)) / 2)


def environment_backend() -> str:
    """The backend ``GNPLACE_DIST_BACKEND`` names: ``"gloo"`` (also where it is unset) or ``"nccl"``.

    What :func:`serve` joins with and what a :class:`DistTimer` given no backend uses, so that rank 0 and the ranks
    ``torchrun`` started agree: a ``gnplace finetune --timer dist`` under ``torchrun`` with ``nccl`` named there
    had rank 0 on gloo and the others on NCCL.

    Raises:
        InvalidArgument: for any other value.
    """
    backend = os.environ.get("GNPLACE_DIST_BACKEND", "gloo")
    if backend not in ("gloo", "nccl"):
        raise InvalidArgument(f"GNPLACE_DIST_BACKEND must be 'gloo' or 'nccl', got {backend!r}")
    return backend


def _forget_unmade_group() -> None:
    """Take back the number a failed ``init_process_group`` gave the process group it never made.

    torch numbers the default group (its store keys, ``/0//cpu//...``) from a counter that it raises before the
    rendezvous and puts back to 0 only when ``destroy_process_group`` destroys a group: a join that failed (ranks
    that never came within the timeout) left it raised, and every later timer of this process then waited under
    ``/1//...`` for fresh ranks that wait under ``/0//...``, failing after its timeout.
    """
    if dist.is_initialized():
        return
    world = getattr(dist.distributed_c10d, "_world", None)
    if world is not None and hasattr(world, "group_count"):
        world.group_count = 0


#: Whether this process is rank 0 of processes ``torchrun`` started whose other ranks went to serve it
#: (:func:`serve_unless_rank_zero`) and have not been joined yet: an error before its timer joins them tells them to
#: stop (:func:`release_waiting_ranks`) rather than leave them waiting ``GNPLACE_DIST_TIMEOUT``.
_RANKS_WAITING = False

#: The longest rank 0 waits for the serving ranks to join so that it can tell them it stopped (seconds).
RELEASE_TIMEOUT_S = 60.0


def serve_unless_rank_zero() -> bool:
    """Under ``torchrun``, serve rank 0 on any other rank (True once rank 0 stopped it); False on rank 0 and elsewhere.

    Rank 0 notes that the others now wait for it, so that an error of its before its timer joins them (a cluster
    file it refuses, an output folder it cannot write) tells them at once (:func:`release_waiting_ranks`): they
    waited ``GNPLACE_DIST_TIMEOUT`` (300 s) before they stopped, each in one line.

    Raises:
        ExecutionFailed: as :func:`serve` does, on a rank other than 0.
    """
    global _RANKS_WAITING
    if not launched_by_torchrun():
        return False
    if int(os.environ["RANK"]) > 0:
        serve()
        return True
    _RANKS_WAITING = True
    return False


def release_waiting_ranks(reason: str) -> None:
    """Tell the ranks serving this rank 0 that it stopped before timing anything, with ``reason`` (one line).

    Only where they went to serve (:func:`serve_unless_rank_zero`) and no timer of this process joined them yet (a
    timer that did stops them itself); it joins their process group, waiting at most :data:`RELEASE_TIMEOUT_S` or
    ``GNPLACE_DIST_TIMEOUT`` if shorter, and sends them ``reason``: each ends in one line naming it. Ranks that never
    come (gone already) are left as they are; nothing here raises.
    """
    global _RANKS_WAITING
    if not _RANKS_WAITING:
        return
    _RANKS_WAITING = False
    if dist.is_initialized():
        return
    try:
        timeout_s = min(RELEASE_TIMEOUT_S, check_timeout(float(os.environ.get("GNPLACE_DIST_TIMEOUT", "300"))))
        dist.init_process_group(environment_backend(), timeout=timedelta(seconds=timeout_s))
    except (RuntimeError, ValueError, InvalidArgument):  # they are gone, or the settings were refused on every rank
        _forget_unmade_group()
        return
    try:
        dist.broadcast_object_list([("abort", reason)], src=0)
    except RuntimeError:  # a rank gone meanwhile: nothing more to tell
        pass
    finally:
        dist.destroy_process_group()


def serve() -> None:
    """Run as a worker rank (1..n-1): take commands from rank 0 until it stops the timer.

    Start it in every process but rank 0's when launching across hosts with ``torchrun``; it joins
    the process group from the environment if this process has none yet, with the backend that
    ``GNPLACE_DIST_BACKEND`` names (``gloo``, the default, or ``nccl``) and waiting ``GNPLACE_DIST_TIMEOUT``
    seconds (default 300) for rank 0's next command.

    Raises:
        ExecutionFailed: in one line, when rank 0 is gone while this rank waits for its next command (a rank that
            ``torchrun`` started on another host printed a gloo traceback when its driver was killed), or when
            this rank cannot join rank 0's process group (rank 0 stopped before starting its timer, a refused
            setting: the rank printed the rendezvous's ``DistNetworkError`` traceback after the timeout).
        InvalidArgument: for a ``GNPLACE_DIST_BACKEND`` or ``GNPLACE_DIST_TIMEOUT`` out of range (``abc`` was a
            ``ValueError`` traceback).
    """
    if not dist.is_initialized():
        backend = environment_backend()
        text = os.environ.get("GNPLACE_DIST_TIMEOUT", "300")
        try:
            timeout_s = check_timeout(float(text))
        except (ValueError, InvalidArgument):
            raise InvalidArgument(f"GNPLACE_DIST_TIMEOUT must be seconds above 0 and at most {MAX_TIMEOUT_S:,}, "
                                  f"got {text!r}") from None
        try:
            dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
        except (RuntimeError, ValueError) as err:  # no rank 0 within the timeout (it stopped on an error), no address
            _forget_unmade_group()
            raise ExecutionFailed(f"rank {os.environ.get('RANK', '?')}: could not join the process group of rank 0, "
                                  f"which runs the timing, waiting up to {timeout_s:g} s (GNPLACE_DIST_TIMEOUT): "
                                  f"{first_line(err)}") from err
    device = _rank_device(dist.get_backend())
    program: Program | None = None
    try:
        while True:
            box: list[Any] = [None]
            try:
                dist.broadcast_object_list(box, src=0)
            except RuntimeError as err:  # gloo's closed connection, NCCL's DistBackendError, a timeout
                raise ExecutionFailed(f"rank {dist.get_rank()}: rank 0, which runs the timing, is gone: "
                                      f"{first_line(err)}") from err
            command, payload = box[0]
            if command == "stop":
                break
            if command == "abort":  # rank 0 stopped before its timer joined the ranks (release_waiting_ranks)
                raise ExecutionFailed(f"rank {dist.get_rank()}: rank 0 stopped before timing anything: {payload}")
            if command == "program":
                program = pickle.loads(payload)
            elif command == "run":
                assert program is not None
                _run_command(program, payload["placement"], device, payload)
            elif command == "pingpong":
                pingpong(payload["peer"], payload["sizes"], payload["repeats"], device)
            elif command == "exchange":
                exchange_cost(payload["peer"], payload["rounds"], device)
    finally:
        dist.destroy_process_group()


def _watch_parent(parent: int) -> None:
    """End this worker when the process that started it is gone (a driver killed with ``kill -9``)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _worker_main() -> None:
    """A rank started by :class:`DistTimer`: ``python -c ... RANK WORLD HOST PORT BACKEND THREADS TIMEOUT_S``.

    It reports itself up in the timer's store (so that rank 0 sees a rank that dies while starting),
    joins the process group and serves rank 0. Any failure is one line on stderr (which rank 0
    reads back) and exit code 1, never a traceback.
    """
    rank, world, host, port, backend, threads, timeout_s = sys.argv[1:8]
    threading.Thread(target=_watch_parent, args=(int(os.environ["GNPLACE_DIST_PARENT"]),), daemon=True).start()
    try:
        torch.set_num_threads(int(threads))
        timeout = timedelta(seconds=float(timeout_s))
        store = dist.TCPStore(host, int(port), int(world), is_master=False, timeout=timeout)
        store.set(f"gnplace/up/{rank}", "1")
        dist.init_process_group(backend, store=store, rank=int(rank), world_size=int(world), timeout=timeout)
        serve()
    except BaseException as err:  # noqa: BLE001 - one line for rank 0 to report
        print(f"rank {rank}: {first_line(err)}", file=sys.stderr, flush=True)
        if is_oom_error(err):
            # gone at once, its connections closed by the exit, so that rank 0 sees this rank gone out of
            # memory before any rank that fails because this one left
            os._exit(OOM_EXIT_CODE)
        sys.exit(1)


_WORKER_CODE = "from gnplace.execute.dist import _worker_main; _worker_main()"  # what each started rank runs


def _last_line(log: Any) -> str:
    """The last non-empty line a worker wrote to its stderr file (empty if none)."""
    try:
        log.seek(0)
        lines = [line.strip() for line in log.read().decode(errors="replace").splitlines() if line.strip()]
    except (OSError, ValueError):
        return ""
    return lines[-1] if lines else ""


class DistTimer(RealStepTimer):
    """Times a placed training step with one ``torch.distributed`` rank per cluster device (see the module docstring).

    Args:
        step (ImportedStep or Program): the recorded step (:func:`~gnplace.importers.torch.import_step`).
        backend (str, optional): ``"gloo"`` or ``"nccl"`` (default: what ``GNPLACE_DIST_BACKEND`` names, else
            ``"gloo"``: :func:`environment_backend`).
        threads (int, optional): CPU threads of each rank, a whole number from 1 to the cores here (default: 1).
        warmup (int, optional): untimed steps first (default: 1).
        repeats (int, optional): timed steps, the median is reported (default: 5).
        lr (float, optional): learning rate of each step's update, by the graph's optimizer (default: 1e-3).
        timeout_s (float, optional): seconds a collective may wait before failing, above 0 and at most
            :data:`MAX_TIMEOUT_S` (default: 120).

    Raises:
        InvalidArgument: for a backend, thread count or timeout out of range.

    The ranks start at the first :meth:`time` and stay up until :meth:`close` (also at exit; use the
    timer as a context manager to close it early).
    """

    def __init__(
        self, step: Any, *, backend: str | None = None, threads: int = 1, warmup: int = 1, repeats: int = 5,
        lr: float = 1e-3, timeout_s: float = 120.0,
    ) -> None:
        super().__init__(step, warmup=warmup, repeats=repeats, lr=lr)
        if backend is None:
            backend = environment_backend()
        if backend not in ("gloo", "nccl"):
            raise InvalidArgument(f"backend must be 'gloo' or 'nccl', got {backend!r}")
        self.backend = backend
        self.threads = check_threads(threads)  # 1.5 was cut to 1, and 0 killed every rank as it started
        self.timeout_s = check_timeout(timeout_s)  # 0 or -5 was gloo's raw DistNetworkError traceback
        self.world = 0
        self._procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[Any] = []  # each started rank's stderr (a temporary file)
        self._store: Any = None  # rank 0 hosts the ranks' TCP store: held while the process group lives
        self._owns_group = False
        self._closed = False
        self._busy = False  # a command is under way on the ranks: they wait on rank 0 in it, not on a broadcast
        # sys.excepthook before the process group was made, and the hook torch.distributed put in its place
        self._hooks: tuple[Any, Any] | None = None

    def settings(self) -> dict[str, Any]:
        """How this timer measures (see :meth:`RealStepTimer.settings`), with its backend and threads per rank."""
        return {**super().settings(), "backend": self.backend, "threads": self.threads}

    def __repr__(self) -> str:
        return f"DistTimer({self.program.graph_name!r}, backend={self.backend!r}, world={self.world})"

    def __enter__(self) -> DistTimer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the ranks this timer started (1..n-1)."""
        return [int(p.pid) for p in self._procs]

    def start(self, world: int) -> None:
        """Bring up ``world`` ranks (this process is rank 0) and send them the program.

        Raises:
            ExecutionFailed: if a rank dies while starting, or the ranks do not come within ``timeout_s`` (those
                this timer starts, or, under ``torchrun``, the processes it started).
        """
        if self.world == world and dist.is_initialized():
            return
        if self.world:
            self.close()
        self._closed = False
        if launched_by_torchrun():
            global _RANKS_WAITING
            _RANKS_WAITING = False  # joined below, or given up on after timeout_s: they are this timer's to stop
            if int(os.environ["WORLD_SIZE"]) != world or int(os.environ["RANK"]) != 0:
                raise ExecutionFailed(
                    f"torchrun started {os.environ['WORLD_SIZE']} processes (this is rank {os.environ['RANK']}); "
                    f"the cluster has {world} devices and the timer runs on rank 0"
                )
            if not dist.is_initialized():
                try:
                    with self._keeping_excepthook():
                        dist.init_process_group(self.backend, timeout=timedelta(seconds=self.timeout_s))
                except (RuntimeError, ValueError) as err:  # a rank that never came: DistStoreError, a traceback
                    _forget_unmade_group()
                    raise ExecutionFailed(
                        f"rank 0 could not join the process group of the {world} processes torchrun started, "
                        f"waiting up to {self.timeout_s:g} s for them: {first_line(err)}"
                    ) from err
        else:
            check_cores(world, self.threads)
            if dist.is_initialized():
                raise ExecutionFailed("a torch.distributed process group is already running in this process")
            self._spawn(world)
        self._owns_group = True
        self.world = world
        atexit.register(self.close)  # the ranks end with this process; unregistered by close
        self._broadcast(("program", pickle.dumps(self.program)))

    def _spawn(self, world: int) -> None:
        """Start ranks ``1..world-1`` as fresh interpreters on this machine and join them as rank 0.

        Each rank reports itself up in a TCP store before joining the process group, and rank 0 waits
        for those reports while watching the processes, so that a rank that dies while starting (a
        failed import, a killed process) ends the timer at once with its last line of stderr, not
        after ``timeout_s``. A fresh interpreter (not ``multiprocessing``'s spawn) also spares the
        caller's script the ``if __name__ == "__main__"`` guard.
        """
        timeout = timedelta(seconds=self.timeout_s)
        store = dist.TCPStore("127.0.0.1", 0, world, is_master=True, wait_for_workers=False, timeout=timeout)
        env = {**os.environ, "GNPLACE_DIST_PARENT": str(os.getpid()),
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # the modules this process sees
        for r in range(1, world):
            log = tempfile.TemporaryFile()
            args = [str(r), str(world), "127.0.0.1", str(store.port), self.backend, str(self.threads),
                    str(self.timeout_s)]
            self._procs.append(subprocess.Popen([sys.executable, "-c", _WORKER_CODE, *args], env=env,
                                                stdin=subprocess.DEVNULL, stderr=log))
            self._logs.append(log)
        deadline = time.monotonic() + self.timeout_s
        waiting = [f"gnplace/up/{r}" for r in range(1, world)]
        while waiting:
            self._check_ranks(starting=True)
            waiting = [key for key in waiting if not store.check([key])]
            if waiting and time.monotonic() > deadline:
                self.close(force=True)
                raise ExecutionFailed(f"{len(waiting)} rank(s) of the distributed timer did not start within "
                                      f"{self.timeout_s:g} s")
            time.sleep(0.02 if waiting else 0)
        self._store = store
        try:
            with self._keeping_excepthook():
                dist.init_process_group(self.backend, store=store, rank=0, world_size=world, timeout=timeout)
        except Exception as err:  # noqa: BLE001 - reported with the ranks' state
            _forget_unmade_group()
            self._fail(err)

    @contextmanager
    def _keeping_excepthook(self) -> Iterator[None]:
        """Note ``sys.excepthook`` around the making of the process group, for :meth:`close` to put back.

        ``init_process_group`` wraps ``sys.excepthook`` so that tracebacks read ``[rank0]: ...``, and
        ``destroy_process_group`` leaves the wrapper: after a closed timer, every uncaught error of the
        caller's program was printed prefixed with ``[rank0]:``, and each start wrapped the wrapper again.
        """
        before = sys.excepthook
        try:
            yield
        finally:
            if sys.excepthook is not before:
                self._hooks = (before, sys.excepthook)

    def _restore_excepthook(self) -> None:
        """Put back the ``sys.excepthook`` the process group replaced, unless someone has replaced it since."""
        if self._hooks is not None:
            before, wrapper = self._hooks
            self._hooks = None
            if sys.excepthook is wrapper:
                sys.excepthook = before

    def _check_ranks(self, starting: bool = False) -> None:
        """Raise :class:`ExecutionFailed` naming the first started rank that has died, the timer closed first.

        A rank that left a step out of memory is raised as :class:`RankOutOfMemory`, before any other.
        """
        dead = [(r, code) for r, p in enumerate(self._procs, start=1) if (code := p.poll()) is not None]
        if not dead:
            return
        said = {r: _last_line(self._logs[r - 1]) for r, _ in dead}
        self.close(force=True)
        out = [r for r, code in dead if code == OOM_EXIT_CODE]
        if out and not starting:
            raise RankOutOfMemory(out[0], said[out[0]].removeprefix(f"rank {out[0]}: "))
        r, code = dead[0]
        why = f"exit code {code}" if code >= 0 else f"killed by signal {-code}"
        when = " while starting" if starting else ""
        raise ExecutionFailed(f"rank {r} of the distributed timer died{when} ({why}"
                              f"{': ' + said[r] if said[r] else ''}); timer closed")

    def _fail(self, err: BaseException, grace_s: float = 3.0) -> None:
        """Close the timer and raise ``err`` as one :class:`ExecutionFailed`, naming the rank that died if one did.

        A rank that fails in a step (an op it cannot run) closes its connections as it exits, so rank 0
        sees its own receive fail first; the started ranks get ``grace_s`` seconds to be seen gone, so
        that the error names the rank and its last line rather than rank 0's broken connection.
        """
        deadline = time.monotonic() + (grace_s if self._procs else 0.0)
        while True:
            try:
                self._check_ranks()  # closes the timer and raises if a rank died
            except ExecutionFailed as dead:
                raise dead from err
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        self.close(force=True)
        first = first_line(err)
        raise ExecutionFailed(f"the distributed step failed: {first}") from err

    @contextmanager
    def _under_way(self) -> Iterator[None]:
        """Mark a command under way on the ranks until it ends normally.

        Left by an exception (a Ctrl-C), the ranks still wait on rank 0 inside it, so :meth:`close` stops them
        as with ``force``.
        """
        self._busy = True
        yield
        self._busy = False

    def _broadcast(self, command: tuple[str, Any]) -> None:
        self._check_ranks()
        try:
            with self._under_way():  # (a broadcast cut short leaves the ranks inside it)
                dist.broadcast_object_list([command], src=0)
        except Exception as err:  # noqa: BLE001 - a dead rank shows up here
            self._fail(err)

    def check_cluster(self, cluster: Cluster) -> None:
        """Refuse a cluster whose devices the ranks are not: gloo ranks compute on CPUs, NCCL ranks on GPUs.

        Timing a GPU cluster (``k80x2``) on gloo ranks would measure this machine's CPUs under the GPUs'
        names and memory; profile the ranks instead (``gnplace profile --timer dist`` writes their cluster).

        Raises:
            InvalidArgument: naming the first device of the other sort.
        """
        want_cpu = self.backend == "gloo"
        other = next((d for d in cluster.devices if d.is_cpu != want_cpu), None)
        if other is not None:
            ranks = "CPU ranks (gloo)" if want_cpu else "GPU ranks (NCCL)"
            raise InvalidArgument(
                f"the distributed timer runs {ranks}, but device {other.name!r} of cluster {cluster.name!r} is "
                f"{'a GPU' if want_cpu else 'a CPU'} ({other.kind}): time the cluster of its ranks (gnplace profile "
                "--timer dist writes it), or use --timer local with --devices")

    def run(self, cluster: Cluster, placement: Any, *, collect: bool = False) -> list[Any]:
        """Run the step under ``placement`` on every rank; each rank's ``(seconds, busy seconds, collected)``.

        ``collect``: ``collected`` holds the first step's loss (on its rank) and the rank's gradients, and
        its parameters after the last step (``"params"``); else it is empty.

        Raises:
            RankOutOfMemory: if a rank runs out of device memory (the timer is then closed; the next
                run starts its ranks again, unless ``torchrun`` started them).
            ExecutionFailed: if a rank dies or a collective fails (the timer is then closed).
        """
        self.check_cluster(cluster)
        devices = self.program.node_devices(placement)
        if devices.size and devices.max() >= cluster.num_devices:
            raise InvalidArgument(f"placement names device {devices.max()}, the cluster has {cluster.num_devices}")
        self.start(cluster.num_devices)
        options = {"placement": devices, "warmup": self.warmup, "repeats": self.repeats, "lr": self.lr,
                   "collect": collect}
        self._broadcast(("run", options))
        threads = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            device = _rank_device(self.backend)
            # until the step's results are in; the model's random ops leave the caller's generators alone
            with self._under_way(), torch_rng_kept([device]):
                return list(_run_command(self.program, devices, device, options))
        except Exception as err:  # noqa: BLE001 - a dead rank shows up here
            if is_oom_error(err):  # this rank's own: the others are left waiting, so they are stopped
                self.close(force=True)
                raise RankOutOfMemory(0, first_line(err)) from err
            self._fail(err)
            raise  # unreachable: _fail raises
        finally:
            torch.set_num_threads(threads)

    @contextmanager
    def using(self, program: Program) -> Iterator[None]:
        """Run another program on the same ranks for a while (calibration probes); measurements stay apart."""
        saved, saved_cache, saved_journal, saved_confirm = self.program, self.cache, self.journal, self.confirm
        self.program, self.cache, self.journal, self.confirm = program, {}, None, 0
        if self.world:
            self._broadcast(("program", pickle.dumps(program)))
        try:
            yield
        finally:
            self.program, self.cache, self.journal, self.confirm = saved, saved_cache, saved_journal, saved_confirm
            if self._busy:  # left in the middle of a command (Ctrl-C): the ranks cannot hear the program
                self.close()
            if self.world and not self._closed:
                self._broadcast(("program", pickle.dumps(saved)))

    def link_times(self, world: int, sizes: list[int], repeats: int = 20) -> dict[int, list[float]]:
        """Median one-way seconds of each size in ``sizes`` (bytes) from rank 0 to every other rank.

        Returns:
            dict[int, list[float]]: per rank ``1..world-1``, seconds per size.
        """
        device = _rank_device(self.backend)
        return self._each_peer(world, "pingpong", {"sizes": list(sizes), "repeats": repeats},
                               lambda peer: pingpong(peer, list(sizes), repeats, device))

    def _each_peer(self, world: int, command: str, options: dict[str, Any], measure: Any) -> dict[int, Any]:
        """Run ``command`` with ``options`` on the ranks and ``measure(peer)`` here, for each peer ``1..world-1``."""
        self.start(world)
        found = {}
        for peer in range(1, world):
            self._broadcast((command, {"peer": peer, **options}))
            try:
                with self._under_way():
                    found[peer] = measure(peer)
            except Exception as err:  # noqa: BLE001 - a dead rank shows up here
                self._fail(err)
        return found

    def message_costs(self, world: int, rounds: int = 3) -> dict[int, float]:
        """Seconds per message end, exchanged while both ranks compute, between rank 0 and every other rank.

        Returns:
            dict[int, float]: per rank ``1..world-1``, :func:`exchange_cost` measured with it.
        """
        device = _rank_device(self.backend)
        threads = torch.get_num_threads()
        torch.set_num_threads(self.threads)  # rank 0 computes as its rank would
        try:
            return self._each_peer(world, "exchange", {"rounds": rounds},
                                   lambda peer: exchange_cost(peer, rounds, device))
        finally:
            torch.set_num_threads(threads)

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Any) -> StepResult:
        self.check_cluster(cluster)
        plan = self.program.plan(placement)
        peak = self.program.peak_bytes(plan, cluster.num_devices, ranks=True)
        over = np.flatnonzero(peak > cluster.memory)
        if over.size:
            return oom_result(graph, cluster, placement, int(over[0]), float(peak[over[0]]))
        try:
            per_rank = self.run(cluster, placement)
        except RankOutOfMemory as err:
            if launched_by_torchrun():  # its ranks cannot be started again
                raise ExecutionFailed(f"{err}; ranks started with torchrun cannot be restarted") from err
            return oom_result(graph, cluster, placement, err.rank, float("inf"))
        seconds = np.array([r[0] for r in per_rank])  # [ranks, repeats]
        busy = np.array([r[1] for r in per_rank])
        step = float(np.median(seconds.max(axis=0)))
        return StepResult(step, np.median(busy, axis=1), peak, cluster.memory, cluster.device_names)

    def close(self, force: bool = False) -> None:
        """Stop the ranks and leave the process group (idempotent).

        Closed in the middle of a command (a Ctrl-C while the ranks run a step), the ranks wait on rank 0
        inside it and would not hear a "stop" until ``timeout_s``: they are stopped as with ``force``.
        """
        if self._closed:
            return
        self._closed = True
        # registered by start: left there, it held the closed timer (its program's tensors, its cache) for the
        # process's life, and each start added one more
        atexit.unregister(self.close)
        force = force or self._busy
        self._busy = False
        if self._owns_group and dist.is_initialized():
            if not force:
                try:
                    self._check_ranks()
                    dist.broadcast_object_list([("stop", None)], src=0)
                except Exception:  # noqa: BLE001, S110 - closing: nothing more to report
                    pass
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001, S110
                pass
        self._restore_excepthook()
        for p in self._procs:
            try:
                p.wait(timeout=5 if not force else 0.5)
            except subprocess.TimeoutExpired:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for log in self._logs:
            log.close()
        self._logs = []
        self._store = None
        self._procs = []
        self._owns_group = False
        self.world = 0
