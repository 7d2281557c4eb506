"""Worker processes for long runs (evaluations, teacher searches, benchmarks) that end with their parent.

A ``ProcessPoolExecutor`` worker outlives its parent when the parent is killed without a chance to
stop it (``kill -9``, an out-of-memory kill, a closed terminal): it runs its task to the end, for
minutes or hours, on cores the next run needs. The pool made here starts every worker with a watcher
thread that ends the worker within ``PARENT_POLL_S`` seconds of its parent's death (the worker's
parent process id changes when it is re-parented), so a killed run leaves nothing behind and can be
resumed at once. Workers are spawned, not forked: a fork of a process that has started torch's
threads is not safe.

The workers also share the cores rather than each taking all of them: the simulator's batches
(numba's OpenMP threads) and torch's intra-op pool start one thread per core in every process, and
OpenMP threads spin while they wait. Two teacher searches in two processes of two threads each on
two cores took 40-48 s for 50,000 evaluations each, against 12 s with one thread each (and 10 s
for one search alone with two threads): ``threads_per_worker`` splits the cores among the workers.
"""

from __future__ import annotations

import ast
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import ContextDecorator, contextmanager
from types import FrameType
from typing import Any

__all__ = ["PARENT_POLL_S", "SharedSetting", "available_cores", "check_main_guarded", "is_launched_rank",
           "limit_threads", "process_pool", "sigterm_as_interrupt", "sigterm_left_default", "task_mapper",
           "terminate_workers", "threads_kept",
           "threads_per_worker",
           "torch_threads", "set_torch_threads_here", "THREAD_VARIABLES",
           "watch_parent",
           "RANK_VARIABLES", "stray_ranks_hidden"]

PARENT_POLL_S = 1.0
"""Seconds between a worker's checks that its parent still lives."""


class SharedSetting(ContextDecorator):
    """A process-wide setting (a file descriptor, loggers' levels) that threads inside it at once share.

    The first to enter makes it and the last to leave undoes it; nested uses count too. Each use saving and
    restoring the setting itself went wrong under threads: one that entered while another's setting stood
    saved that setting, restored it last, and it stayed for the rest of the process.

    Args:
        setup (callable): makes the setting and returns the callable that undoes it.

    Examples:
        >>> steps = []
        >>> shared = SharedSetting(lambda: steps.append("made") or (lambda: steps.append("undone")))
        >>> with shared:
        ...     with shared:
        ...         pass
        >>> steps
        ['made', 'undone']
    """

    def __init__(self, setup: Callable[[], Callable[[], None]]) -> None:
        self._setup = setup
        self._lock = threading.Lock()
        self._depth = 0
        self._undo: Callable[[], None] | None = None

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._undo = self._setup()
            self._depth += 1

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._undo is not None:
                undo, self._undo = self._undo, None
                undo()


#: The variables that tell a process its rank (Lightning's ``_get_rank`` reads the first two, and its environments the
#: rest; torchrun sets ``RANK`` and ``GROUP_RANK``, its node's rank): a launcher sets them beside ``WORLD_SIZE`` or
#: ``MASTER_ADDR``.
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK")


def is_launched_rank(*, slurm: bool = False) -> bool:
    """Whether this process is a rank other than 0 that a launcher started (Lightning's DDP, torchrun).

    Such ranks find one of :data:`RANK_VARIABLES` set to something other than ``0``, beside the ``WORLD_SIZE`` or
    ``MASTER_ADDR`` every launcher (and every multi-node run's user) sets as well; rank 0, and a process no launcher
    started, do not. A rank variable alone, left in a shell by an earlier job, does not make a process a rank: it
    made a plain run skip its folder's run lock. ``RANK`` and ``GROUP_RANK`` count: torchrun's rank on a second host
    has ``LOCAL_RANK=0`` and no ``NODE_RANK``, and took the lock of a shared output folder (one node's run refused).

    Args:
        slurm (bool, optional): also a task other than 0 of a SLURM job step of several tasks (``SLURM_PROCID``),
            which Lightning takes for a rank of ``gnplace pretrain`` and srun starts with neither ``WORLD_SIZE`` nor
            ``MASTER_ADDR``; commands that run one process read none of SLURM's variables (default: False).
    """
    ranked = any(os.environ.get(name, "0") != "0" for name in RANK_VARIABLES)
    if ranked and ("WORLD_SIZE" in os.environ or "MASTER_ADDR" in os.environ):
        return True
    return slurm and _slurm_task() > 0


def _slurm_task() -> int:
    """This process's task in a SLURM job step of several tasks that Lightning takes for its ranks; 0 otherwise.

    Lightning's ``SLURMEnvironment`` is the job's where ``SLURM_NTASKS`` is set and the job is not named ``bash``
    or ``interactive`` (its way to run other launchers inside a job); its global rank is ``SLURM_PROCID``.
    """
    if os.environ.get("SLURM_JOB_NAME") in ("bash", "interactive"):
        return 0
    try:
        tasks, task = int(os.environ.get("SLURM_NTASKS", "1")), int(os.environ.get("SLURM_PROCID", "0"))
    except ValueError:
        return 0
    return task if tasks > 1 else 0


def _hide_stray_ranks() -> Callable[[], None]:
    """Take rank variables that no launcher set out of the environment, and rank 0 for Lightning; returns the undo."""
    if "WORLD_SIZE" in os.environ or "MASTER_ADDR" in os.environ:  # a launcher's rank, or one of a multi-node run
        return lambda: None
    stray = {name: os.environ.pop(name) for name in RANK_VARIABLES if name in os.environ}
    from lightning_utilities.core.rank_zero import rank_zero_only

    rank = getattr(rank_zero_only, "rank", 0)
    rank_zero_only.rank = 0  # type: ignore[attr-defined]  # Lightning read it from the variables when imported

    def undo() -> None:
        for name, value in stray.items():
            os.environ.setdefault(name, value)
        rank_zero_only.rank = rank  # type: ignore[attr-defined]

    return undo


stray_ranks_hidden = SharedSetting(_hide_stray_ranks)
"""Run Lightning as the one process of its run where rank variables are strays (a context, or a decorator).

``LOCAL_RANK=1`` left in a shell by an earlier job, without the ``WORLD_SIZE`` or ``MASTER_ADDR`` every launcher
sets (:func:`is_launched_rank`), made Lightning take a plain run for rank 1: ``gnplace pretrain`` wrote no logs and
no TensorBoard files, and with ``--devices 2`` Lightning took the ranks for started by another launcher. Inside,
those variables are out of ``os.environ`` and Lightning's rank-zero functions run; both come back after.
"""


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the platform tells it, else the machine's): at least 1.

    Examples:
        >>> available_cores() >= 1
        True
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def threads_per_worker(jobs: int, cores: int | None = None) -> int:
    """Compute threads of each of ``jobs`` worker processes on ``cores`` cores (default: :func:`available_cores`).

    At least 1. The default is the cores this process may run on, not the machine's: under ``taskset`` or a
    container's CPU limit the machine's count gave each worker more threads than there are cores to run them.

    Examples:
        >>> threads_per_worker(2, cores=2), threads_per_worker(2, cores=16), threads_per_worker(4, cores=2)
        (1, 8, 1)
    """
    return max(1, (cores or available_cores()) // max(1, jobs))


def process_pool(jobs: int, *, ignore_interrupts: bool = False, threads: int | None = None) -> ProcessPoolExecutor:
    """A spawn-context pool of ``jobs`` workers, each of which exits when the process that made it dies.

    Args:
        jobs (int): worker processes (at least 1).
        ignore_interrupts (bool, optional): workers ignore Ctrl-C, which the terminal sends to every
            process of the group, so that the parent alone decides how to stop them (default: False).
        threads (int, optional): compute threads of each worker, for the simulator's batches and for
            torch (default: :func:`threads_per_worker`, the cores shared among the workers).

    Returns:
        ProcessPoolExecutor: use it as a context manager, as any pool.

    Raises:
        InvalidArgument: if it is called from a script's top level, outside ``if __name__ == "__main__":``
            (:func:`check_main_guarded`).

    Examples:
        >>> with process_pool(1) as pool:
        ...     pool.submit(abs, -3).result()
        3
    """
    check_main_guarded()
    return ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker,
                               initargs=(os.getpid(), ignore_interrupts, threads or threads_per_worker(jobs)))


def check_main_guarded(otherwise: str = "start no workers (jobs=1)") -> None:
    """Refuse to start worker processes from the top level of a script run as ``__main__`` that has no main guard.

    A spawned worker runs the script that started it again (as ``__mp_main__``) before its first task, so that
    the script's functions and classes can be handed to it; a call at the script's top level, outside ``if
    __name__ == "__main__":``, then starts workers in every worker, which Python stops with a traceback in
    each, and the caller saw only that a worker "died" (``gnplace.evaluate(..., jobs=2)`` from such a script,
    which works under Linux's fork but not under the spawn these pools use). A script Python does not run
    again (``python -c``, a notebook, a package's ``__main__``) or whose source cannot be read is let through.

    A program read from standard input (``python - < script.py``, a heredoc in a CI job) is refused too, guard or
    not: its ``__file__`` is ``<stdin>``, which each worker tried to run as a file, and died.

    Args:
        otherwise (str, optional): the way to start no workers, which the message offers beside the guard.

    Raises:
        InvalidArgument: naming the script's line that started the workers, and the fix.
    """
    from gnplace.exceptions import InvalidArgument

    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None) or ""
    if script and getattr(main, "__spec__", None) is None \
            and not os.path.isfile(os.path.join(getattr(multiprocessing.process, "ORIGINAL_DIR", None) or "", script)):
        raise InvalidArgument(f"this program was read from {script}, which the worker processes it starts cannot "
                              f"read again: save it as a file and run that, or {otherwise}")
    line = _unguarded_main_line(main) if main is not None else None
    if line is not None:
        raise InvalidArgument(f"{script}:{line} starts worker processes from the script's top level, which each "
                              "worker runs again as it starts: put the script's calls under `if __name__ == "
                              f"\"__main__\":`, or {otherwise}")


def _unguarded_main_line(main: Any) -> int | None:
    """The line of the script ``main`` (the ``__main__`` module) whose unguarded top-level code calls now, if any."""
    spec_name = getattr(getattr(main, "__spec__", None), "name", "") or ""
    path = getattr(main, "__file__", None)
    if not path or spec_name == "__main__" or spec_name.endswith(".__main__"):  # multiprocessing runs those not again
        return None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not (frame.f_globals is vars(main) and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:  # called from a function the script's top level did not call (a thread's, a callback's)
        return None
    if os.path.abspath(frame.f_code.co_filename) != os.path.abspath(path):  # typed at `python -i script.py`'s prompt
        return None
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return None
    line = frame.f_lineno
    return None if any(_is_name_check(node, line) for node in ast.walk(tree)) else line


def _is_name_check(node: ast.AST, line: int) -> bool:
    """Whether ``node`` is an ``if`` that reads ``__name__`` (a main guard, however written) and holds ``line``.

    Any test of ``__name__`` counts, nested in a ``try`` or joined with another condition too: a script
    refused wrongly is worse than one let through, which fails as it did before.
    """
    if not isinstance(node, ast.If) or not node.lineno <= line <= (node.end_lineno or node.lineno):
        return False
    return any(isinstance(name, ast.Name) and name.id == "__name__" for name in ast.walk(node.test))


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the body runs, a first SIGTERM raises :class:`~gnplace.exceptions.Terminated` (a ``KeyboardInterrupt``).

    For the bodies that run worker processes. By default a SIGTERM (``kill``, ``timeout``, a scheduler's stop)
    ended the process at once: the results its workers had finished out of order went unsaved, and
    multiprocessing's resource tracker printed a warning of "leaked semaphore objects". Raised, it stops the
    workers and saves what finished, as Ctrl-C does; the command line reports it in one line and exits 143. A
    second SIGTERM ends the process at once, as before. Nothing changes outside the main thread, or where a handler
    other than the default is set (Lightning's during a fit, which composes the handlers it finds; a caller's).

    A body that runs its tasks in this process (``gnplace evaluate -j 1``) is stopped the same way, between two
    bytecodes, as Ctrl-C stops it; a Lightning fit in it (:func:`~gnplace.callbacks.fit_interruptibly`) runs under
    :func:`sigterm_left_default`, so that Lightning answers a SIGTERM as it does elsewhere: the iteration under way
    saved and stopped at its end, then :class:`~gnplace.exceptions.Terminated`.
    """
    from gnplace.exceptions import Terminated

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM, while the workers stop: at once
        raise Terminated("SIGTERM")

    _INTERRUPTING.add(stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        _INTERRUPTING.discard(stop)
        if signal.getsignal(signal.SIGTERM) is stop:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


#: The SIGTERM handlers :func:`sigterm_as_interrupt` has set, while it has them set.
_INTERRUPTING: set[Callable[[int, FrameType | None], None]] = set()


@contextmanager
def sigterm_left_default() -> Iterator[None]:
    """While the body runs, SIGTERM has its default action again where :func:`sigterm_as_interrupt` had set its own.

    For a Lightning fit in such a body (``gnplace evaluate -j 1 -p ppo``): Lightning composes the SIGTERM handlers it
    finds with its own, and :func:`sigterm_as_interrupt`'s would raise in the middle of the iteration that Lightning
    saves and finishes first. Nothing changes elsewhere (no handler of its set, or outside the main thread); the
    handler is set back afterwards unless the body left another one.
    """
    handler = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    if handler not in _INTERRUPTING:
        yield
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:  # (Lightning sets back what it found)
            signal.signal(signal.SIGTERM, handler)


@contextmanager
def task_mapper(jobs: int) -> Iterator[Callable[..., Iterator[Any]]]:
    """``map`` over up to ``jobs`` workers (:func:`process_pool`, closed on exit), or the built-in ``map`` for one job.

    One job runs its tasks in this process: a spawned worker spends about 5 s importing torch before
    its first task. The pool starts at the first call of the mapper that has tasks, with no more workers
    than that call's tasks (the cores are shared among the workers started: ``jobs`` of 16 for 2 tasks
    gave each of the 2 busy workers a 16th of them); later calls run on the same workers. Results come
    in the order of the tasks either way. When the body stops on an error (a task's included) or Ctrl-C,
    the workers are ended at once: the tasks under way are lost rather than waited for, and the queued
    ones never start. A SIGTERM stops the body as Ctrl-C does (:func:`sigterm_as_interrupt`), one job's too: it
    ended that one at once, with no word of it.

    Args:
        jobs (int): most worker processes; 1 or less runs the tasks in this process.

    Examples:
        >>> with task_mapper(1) as mapper:
        ...     list(mapper(abs, [-1, -2]))
        [1, 2]
    """
    if jobs <= 1:
        with sigterm_as_interrupt():  # (a Lightning fit among the tasks keeps Lightning's own: sigterm_left_default)
            yield map
        return
    started: list[ProcessPoolExecutor] = []  # the pool, once a call has tasks: at most one

    def mapper(fn: Callable[..., Any], *iterables: Any) -> Iterator[Any]:
        calls = list(zip(*iterables))
        if calls and not started:  # Ctrl-C reaches this process alone; it ends the workers
            started.append(process_pool(min(jobs, len(calls)), ignore_interrupts=True))
        # all submitted at once, as pool.map does, but never cancelled (see below)
        futures = [started[0].submit(fn, *args) for args in calls]
        return (future.result() for future in futures)

    try:
        with sigterm_as_interrupt():  # a SIGTERM stops the workers and saves, as Ctrl-C
            yield mapper
    except BaseException:
        # shutting down alone waited for the tasks under way and ran the queued ones (minutes of teacher
        # searches after a Ctrl-C). Terminated, the pool marks the pending futures broken; pool.map's
        # cancelling of them races with that, and the pool's thread then printed an InvalidStateError.
        for pool in started:
            terminate_workers(pool)
            pool.shutdown(wait=True)
        raise
    for pool in started:
        pool.shutdown(wait=True, cancel_futures=True)  # a caller that stopped reading early: the rest never start


def terminate_workers(pool: ProcessPoolExecutor) -> None:
    """End the worker processes of ``pool`` (a ``ProcessPoolExecutor``) now, tasks under way included.

    Killed, not cancelled: the pool marks its pending futures broken (cancelling them too races with
    that, and the pool's thread prints an ``InvalidStateError``). Shut the pool down afterwards.

    SIGKILL, not SIGTERM: a task that runs under Lightning (the ``ppo``, ``reinforce`` and ``finetune`` searches)
    takes a SIGTERM as "save, then stop after this iteration", and its worker ran on: a Ctrl-C to ``gnplace
    evaluate -j 2 -p ppo`` waited in the pool's shutdown, the workers still busy a minute later.
    """
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.kill()


def _start_worker(parent: int, ignore_interrupts: bool, threads: int) -> None:
    """Worker start-up: optionally ignore Ctrl-C, use ``threads`` compute threads, watch ``parent`` (a process id)."""
    if ignore_interrupts:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit_threads(threads)
    threading.Thread(target=_exit_when_orphaned, args=(parent,), name="gnplace-parent-watch", daemon=True).start()


#: The environment variables :func:`limit_threads` sets: libraries not loaded yet read their thread counts there.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")


def limit_threads(threads: int, *, torch: bool = True) -> None:
    """Use at most ``threads`` compute threads in this process: numba's parallel loops, torch and OpenMP.

    Libraries not loaded yet read the environment when they are; numba and torch, if loaded, are told
    directly (the workers import gnplace, which loads numba, before their initializer runs). numpy's
    BLAS, loaded with numpy before, keeps its thread per core, so that numpy's results do not depend
    on how many workers share the cores; the small solve of a search's screen, where a busy machine
    made those threads cost most, runs on one thread in every process (:mod:`gnplace.rl.screen`).
    ``torch=False`` leaves a loaded torch's own setting alone (pretraining keeps one thread for its
    small tensors).
    """
    for name in THREAD_VARIABLES[:3]:
        os.environ[name] = str(threads)
    loaded_torch = sys.modules.get("torch")
    kept = loaded_torch.get_num_threads() if loaded_torch is not None else 0
    numba = sys.modules.get("numba")
    if numba is not None:
        # the first call starts numba's OpenMP pool, which sets the OpenMP thread count torch reads to one per core
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    else:
        os.environ["NUMBA_NUM_THREADS"] = str(threads)
    if loaded_torch is not None:
        wanted = threads if torch else kept
        if loaded_torch.get_num_threads() != wanted:
            loaded_torch.set_num_threads(wanted)


@contextmanager
def threads_kept() -> Iterator[None]:
    """Run the body; afterwards what :func:`limit_threads` changes in it is as it was: the variables and numba's count.

    A worker process keeps its limit for life, but rank 0 of a ``ddp`` pretraining is the caller's own process: its
    limit (one thread for each of two ranks on two cores) stayed after ``gnplace.pretrain.pretrain`` returned, numba's
    parallel loops on one thread and ``OMP_NUM_THREADS=1`` for the processes the caller started next. numba's count
    (this thread's) is read only where its thread pool has started, which would set torch's OpenMP count (see
    :func:`limit_threads`); one started in the body is given numba's default count back. torch's own count is
    :func:`torch_threads`' to keep.

    Examples:
        >>> import os
        >>> before = os.environ.get("MKL_NUM_THREADS")
        >>> with threads_kept():
        ...     limit_threads(1, torch=False)
        >>> os.environ.get("MKL_NUM_THREADS") == before
        True
    """
    saved = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    numba_threads = _numba_threads_if_started()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        numba = sys.modules.get("numba")
        now = _numba_threads_if_started()
        if numba is not None and now is not None:
            wanted = numba_threads if numba_threads is not None else numba.config.NUMBA_NUM_THREADS
            if now != wanted:
                numba.set_num_threads(wanted)


def _numba_threads_if_started() -> int | None:
    """This thread's count of numba's parallel threads where numba is loaded and its pool has started, else None."""
    numba = sys.modules.get("numba")
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if numba is None or parallel is None or not getattr(parallel, "_is_initialized", False):
        return None  # numba.get_num_threads() would start the pool
    return int(numba.get_num_threads())


#: Held while a thread changes torch's thread counts in :func:`torch_threads`.
_TORCH_THREADS = threading.Lock()


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Run the body with torch's intra-op pool at ``threads`` threads; the caller's count back afterwards.

    The learners' tensors are small, and more threads spin and slow them down, so their loops run on one; a
    library call that set it and left it (``gnplace.pretrain.pretrain`` did) left the caller's own training
    on one thread for the rest of the process.

    Under OpenMP (torch's CPU builds) each thread has its count, and ``torch.set_num_threads`` also sets the count
    that threads yet to use torch start with. Placements in threads at once (``policy``, ``ppo``, ``finetune``)
    left that one at 1: a thread started later, the caller's next training in one, ran on one thread. It is put
    back as each call sets its own thread's, and a thread that first used torch inside another's call started
    with the caller's count, not that call's.

    Examples:
        >>> import torch
        >>> before = torch.get_num_threads()
        >>> with torch_threads(1):
        ...     torch.get_num_threads()
        1
        >>> torch.get_num_threads() == before
        True
    """
    import torch

    with _TORCH_THREADS:
        kept = torch.get_num_threads()
        set_torch_threads_here(torch, threads)
    try:
        yield
    finally:
        with _TORCH_THREADS:
            if torch.get_num_threads() != kept:
                set_torch_threads_here(torch, kept)


def set_torch_threads_here(torch: Any, threads: int) -> None:
    """``torch.set_num_threads(threads)`` (``torch`` the module) for this thread, where counts are each thread's.

    There (OpenMP, torch's CPU builds) the count that threads yet to use torch start with, which
    ``torch.set_num_threads`` sets too, is left as it was.
    """
    if not _torch_counts_per_thread(torch):
        torch.set_num_threads(threads)
        return
    start = _in_new_thread(torch.get_num_threads)  # the count threads yet to use torch start with
    torch.set_num_threads(threads)
    if start != threads:
        _in_new_thread(lambda: torch.set_num_threads(start))


def _torch_counts_per_thread(torch: Any) -> bool:
    """Whether torch's intra-op thread counts are each thread's: its OpenMP backend (its CPU builds)."""
    return "parallel backend: OpenMP" in torch.__config__.parallel_info()


def _in_new_thread(call: Callable[[], Any]) -> Any:
    """What ``call()`` returns in a thread started for it (one that has not used torch yet)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()), name="gnplace-torch-threads", daemon=True)
    thread.start()
    thread.join()
    return out[0]


def watch_parent(parent: int) -> None:
    """End this process within :data:`PARENT_POLL_S` seconds of ``parent``'s death (a process id), as workers do.

    A daemon thread watches this process's parent id; once it is no longer ``parent`` (gone already, or
    re-parented since), the process exits with status 1 and no clean-up. One watch a process: a later call
    in the same process does nothing.
    """
    if os.getpid() in _watching:  # (a forked child inherits the set, not the thread: it watches too)
        return
    _watching.add(os.getpid())
    threading.Thread(target=_exit_when_orphaned, args=(parent,), name="gnplace-parent-watch", daemon=True).start()


_watching: set[int] = set()  # the processes in which :func:`watch_parent` started a watch


def _exit_when_orphaned(parent: int) -> None:
    """End this process (exit status 1, no clean-up: its task's result has nowhere to go) once ``parent`` is gone.

    A process that ``multiprocessing`` started for ``parent`` watches the pipe its start-up came through, which
    reads end of file once ``parent`` has died, whatever started it: a worker of a ``forkserver`` context is the
    server's child, not its pool's, and the re-parenting check alone (its parent id is not ``parent``) ended it
    at once, before its first task (every task a ``BrokenProcessPool``). Any other process (one that
    ``subprocess`` started) watches its parent id.
    """
    launcher = multiprocessing.parent_process()  # None where multiprocessing did not start this process
    if launcher is not None and launcher.pid != parent:
        launcher = None
    by_parent_id = launcher is None or os.getppid() == parent  # a forkserver's child is the server's, not parent's
    while (launcher is None or launcher.is_alive()) and (not by_parent_id or os.getppid() == parent):
        time.sleep(PARENT_POLL_S)
    os._exit(1)
