"""Worker processes for long runs (evaluations, teacher searches, benchmarks) that end with their parent.

A ``ProcessPoolExecutor`` worker outlives its parent when the parent is killed without a chance to
stop it (``kill -9``, an out-of-memory kill, a closed terminal): it runs its task to the end, for
minutes or hours, on cores the next run needs. The pool made here starts every worker with a watcher
thread that ends the worker within ``PARENT_POLL_S`` seconds of its parent's death (the worker's
parent process id changes when it is re-parented), so a killed run leaves nothing behind and can be
resumed at once. Workers are spawned, not forked: a fork of a process that has started torch's
threads is not safe.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor

__all__ = ["PARENT_POLL_S", "process_pool"]

PARENT_POLL_S = 1.0
"""Seconds between a worker's checks that its parent still lives."""


def process_pool(jobs: int, *, ignore_interrupts: bool = False) -> ProcessPoolExecutor:
    """A spawn-context pool of ``jobs`` workers, each of which exits when the process that made it dies.

    Args:
        jobs (int): worker processes (at least 1).
        ignore_interrupts (bool, optional): workers ignore Ctrl-C, which the terminal sends to every
            process of the group, so that the parent alone decides how to stop them (default: False).

    Returns:
        ProcessPoolExecutor: use it as a context manager, as any pool.

    Examples:
        >>> with process_pool(1) as pool:
        ...     pool.submit(abs, -3).result()
        3
    """
    return ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker, initargs=(os.getpid(), ignore_interrupts))


def _start_worker(parent: int, ignore_interrupts: bool) -> None:
    """Worker start-up: optionally ignore Ctrl-C, and watch ``parent`` (a process id) from a daemon thread."""
    if ignore_interrupts:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_when_orphaned, args=(parent,), name="gnplace-parent-watch", daemon=True).start()


def _exit_when_orphaned(parent: int) -> None:
    """End this process (exit status 1, no clean-up: its task's result has nowhere to go) once ``parent`` is gone."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)
