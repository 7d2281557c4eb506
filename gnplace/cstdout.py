"""Silence what C libraries write to standard output.

METIS (through pymetis) prints notes such as ``***Cannot bisect a graph with 0 vertices!`` from C when a
recursive bisection meets a part with a small target share; they go to file descriptor 1, past
``sys.stdout``, and would land in the middle of a progress bar or a ``--json`` document.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Iterator

__all__ = ["flush_c_stdio", "quiet_c_stdout"]


def flush_c_stdio() -> None:
    """Flush the C library's stdio buffers, so that text a C call buffered goes where fd 1 points now."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):  # no C library to load by name (Windows): nothing buffered to flush
        pass


#: Guards the redirection: threads inside :func:`quiet_c_stdout` at once share one (see there).
_LOCK = threading.Lock()
_depth = 0
_saved: int | None = None


@contextlib.contextmanager
def quiet_c_stdout() -> Iterator[None]:
    """Send file descriptor 1 to ``/dev/null`` for the duration; Python's ``sys.stdout`` is flushed first.

    Threads (and nested calls) inside it at once share one redirection, which the last to leave undoes:
    each saved fd 1 and put it back on leaving, so a thread that entered while another's redirection
    stood saved ``/dev/null`` and restored it last, and the process's standard output stayed in
    ``/dev/null`` for good (after two threads' ``metis`` placements nothing more was printed).

    Examples:
        >>> with quiet_c_stdout():
        ...     os.write(1, b"not shown\\n")
        10
    """
    global _depth, _saved
    with _LOCK:
        if _depth == 0:
            sys.stdout.flush()
            saved = os.dup(1)
            with open(os.devnull, "w") as devnull:
                os.dup2(devnull.fileno(), 1)
            _saved = saved
        _depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                flush_c_stdio()  # into /dev/null, not into whatever is written after
                os.dup2(_saved, 1)
                os.close(_saved)
                _saved = None
