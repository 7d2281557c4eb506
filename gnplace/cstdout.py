"""Silence what C libraries write to standard output.

METIS (through pymetis) prints notes such as ``***Cannot bisect a graph with 0 vertices!`` from C when a
recursive bisection meets a part with a small target share; they go to file descriptor 1, past
``sys.stdout``, and would land in the middle of a progress bar or a ``--json`` document.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable

from gnplace.workers import SharedSetting

__all__ = ["flush_c_stdio", "quiet_c_stdout"]


def flush_c_stdio() -> None:
    """Flush the C library's stdio buffers, so that text a C call buffered goes where fd 1 points now."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):  # no C library to load by name (Windows): nothing buffered to flush
        pass


def _stdout_to_devnull() -> Callable[[], None]:
    """Point fd 1 at ``/dev/null`` (Python's ``sys.stdout`` flushed first); returns what points it back.

    A process whose fd 1 is closed (``>&-``, a daemon; Python then sets ``sys.stdout`` to None) has nothing to
    silence: C's writes there already go nowhere, and it is left closed. A ``sys.stdout`` with no ``flush`` (a
    logging adapter with ``write`` alone, which is all ``print`` needs) holds nothing to flush.
    """
    flush = getattr(sys.stdout, "flush", None)
    if flush is not None:
        flush()
    try:
        saved = os.dup(1)
    except OSError:  # fd 1 closed
        return lambda: None
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 1)

    def back() -> None:
        flush_c_stdio()  # into /dev/null, not into whatever is written after
        os.dup2(saved, 1)
        os.close(saved)

    return back


_QUIET = SharedSetting(_stdout_to_devnull)


def quiet_c_stdout() -> SharedSetting:
    """Send file descriptor 1 to ``/dev/null`` for the duration; Python's ``sys.stdout`` is flushed first.

    Threads (and nested calls) inside it at once share one redirection, which the last to leave undoes
    (:class:`~gnplace.workers.SharedSetting`): each saved fd 1 and put it back on leaving, so a thread that
    entered while another's redirection stood saved ``/dev/null`` and restored it last, and the process's
    standard output stayed in ``/dev/null`` for good (after two threads' ``metis`` placements nothing more
    was printed).

    Examples:
        >>> with quiet_c_stdout():
        ...     os.write(1, b"not shown\\n")
        10
    """
    return _QUIET
