"""``DistTimer``: time placed training steps across processes with ``torch.distributed``, one rank per device.

Rank ``r`` is device ``r`` of the cluster. Every rank runs the ops placed on it in the one recorded
(topological) order, except that it may run a later op whose inputs are all there before an
earlier one still waiting for a tensor (a device's ready queue, as in the simulator). After an op
whose output another rank consumes, the producer sends that output once to each consuming rank
(``isend``, tagged by tensor); every rank posts all its receives (``irecv``) when the step starts and
waits for one only when no op it could run is ready (gloo cannot show a receive arriving before it is
waited for, so there an op reading another rank's tensor runs only as the rank's earliest op left,
once no other op is ready: see :func:`~gnplace.execute.rank.run_rank`). Parameters and inputs cross before the first
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
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from gnplace.cluster import Cluster
from gnplace.exceptions import ExecutionFailed, InvalidArgument, first_line
from gnplace.execute.base import RealStepTimer, check_threads, oom_result
from gnplace.execute.links import exchange_cost, pingpong
from gnplace.execute.program import (
    Program,
)
from gnplace.execute.rank import run_command
from gnplace.execute.runner import is_oom_error
from gnplace.graph import OpGraph
from gnplace.limits import MAX_TIMEOUT_S, check_timeout
from gnplace.seed import torch_rng_kept
from gnplace.sim.timer import StepResult
from gnplace.workers import available_cores

__all__ = [
    "DistTimer", "RankOutOfMemory", "serve", "serve_unless_rank_zero", "release_waiting_ranks", "launched_by_torchrun",
    "check_cores",
    "MAX_TIMEOUT_S", "environment_backend", "environment_timeout",
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


def environment_timeout() -> float:
    """The seconds ``GNPLACE_DIST_TIMEOUT`` names (default 300): how long a serving rank waits for rank 0.

    Raises:
        InvalidArgument: for a value that is no number of seconds above 0 and at most :data:`MAX_TIMEOUT_S` (``abc``
            was a ``ValueError`` traceback).
    """
    text = os.environ.get("GNPLACE_DIST_TIMEOUT", "300")
    try:
        return check_timeout(float(text))
    except (ValueError, InvalidArgument):
        raise InvalidArgument(f"GNPLACE_DIST_TIMEOUT must be seconds above 0 and at most {MAX_TIMEOUT_S:,}, "
                              f"got {text!r}") from None


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
        timeout_s = min(RELEASE_TIMEOUT_S, environment_timeout())
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
        backend, timeout_s = environment_backend(), environment_timeout()
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
                run_command(program, payload["placement"], device, payload)
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
                return list(run_command(self.program, devices, device, options))
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
