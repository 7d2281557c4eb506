"""What ``import gnplace`` settles before its heavy imports (numba, numpy), for its commands above all.

A command reports Ctrl-C and bad input in one line once it reaches
:func:`~gnplace.cli.common.run_reporting_errors`; before that, in the first second of ``gnplace place ...`` or
``python scripts/place.py ...``, the package imports numba and numpy, and a Ctrl-C then printed Python's traceback
of whatever import it stopped, as a thread count numba cannot start (``NUMBA_NUM_THREADS=0``) printed numba's.
:func:`command_imports` wraps the package's imports: in a process that runs one of gnplace's commands, a Ctrl-C
that nothing catches is one ``PROG: interrupted`` line (Python ends with SIGINT's status, 130 in a shell), an
error of the imports one ``PROG: error: ...`` line and status 2, and a warning of theirs (numba's about a setting
it cannot read) one ``PROG: warning: ...`` line. Elsewhere (a program of the user's that imports
gnplace, an interpreter) nothing changes, bar :func:`check_thread_settings`'s one-line error. Only the standard
library is imported here: this runs before the package's other modules.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

from gnplace.exceptions import GnplaceError, InvalidArgument, first_line

__all__ = ["MAX_THREADS", "check_thread_settings", "command_name", "command_imports"]

#: Most threads ``NUMBA_NUM_THREADS`` may ask numba for: 4,096 placed a graph with the policy on a 2-core VM
#: (2026-12-04), 100,000 ended the process in a segmentation fault when numba started its pool.
MAX_THREADS = 4096

#: The modules ``python -m`` runs as the ``gnplace`` command, and ``gnplace.warmup`` (``make install``'s, reported as
#: ``gnplace``, as its own line is): a Ctrl-C during its minute of compiling printed the traceback of the kernel it
#: stopped.
_COMMAND_MODULES = ("gnplace", "gnplace.cli", "gnplace.warmup")

_ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], object]


def check_thread_settings() -> None:
    """Refuse a ``NUMBA_NUM_THREADS`` numba cannot use, before numba is imported.

    numba reads it when it loads: ``0`` or a negative count raised its ValueError inside ``import numba`` (and so
    ``import gnplace``), ``abc`` printed its warning with a traceback in it, and a count of 100,000 threads
    crashed the process when numba started them.

    Raises:
        InvalidArgument: if it is set to anything but a whole number from 1 to :data:`MAX_THREADS`.

    Examples:
        >>> check_thread_settings()  # unset, or a count numba can use
    """
    given = os.environ.get("NUMBA_NUM_THREADS")
    if given is None:
        return
    try:
        count = int(given)  # as numba reads it (spaces around it are allowed)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_THREADS:
        raise InvalidArgument(f"NUMBA_NUM_THREADS={given!r}: numba's thread count must be a whole number from 1 to "
                              f"{MAX_THREADS}; set it to one, or unset it for one thread per core")


def command_name() -> str | None:
    """The name of the gnplace command this process runs, else :obj:`None` (a user's program, an interpreter).

    ``gnplace`` for the ``gnplace`` console script and ``python -m gnplace`` (or ``-m gnplace.cli``, ``-m
    gnplace.warmup``); a script's name for ``python scripts/NAME.py`` of a checkout (``place``: the name its errors
    are reported under).

    Examples:
        >>> command_name() is None  # under pytest
        True
    """
    program = sys.argv[0] if sys.argv else ""
    if program == "-m":  # while ``python -m MODULE`` imports the module's package
        return "gnplace" if _module_run() in _COMMAND_MODULES else None
    path = Path(program)
    if path.name == "gnplace":
        return "gnplace"
    scripts = Path(__file__).resolve().parent.parent / "scripts"
    if path.suffix == ".py" and path.is_file() and path.resolve().parent == scripts:
        return path.stem
    return None


def _module_run() -> str | None:
    """The module ``python -m`` was given, from the interpreter's own arguments (``-m gnplace``, ``-mgnplace``)."""
    given = list(getattr(sys, "orig_argv", ()))[1:]
    for position, argument in enumerate(given):
        if argument == "-m":
            return given[position + 1] if position + 1 < len(given) else None
        if argument.startswith("-m"):
            return argument[2:]
    return None


def _reporting_interrupts(prog: str, previous: _ExceptHook) -> _ExceptHook:
    """A ``sys.excepthook`` that reports a Ctrl-C nothing caught as one line, and hands other errors to ``previous``.

    Python then ends the process with SIGINT's status (130 in a shell), as it does after the traceback.
    """
    def hook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            print(f"{prog}: interrupted", file=sys.stderr)
            return
        previous(kind, error, trace)

    return hook


@contextlib.contextmanager
def command_imports() -> Iterator[None]:
    """Around the package's imports: in a command's process, Ctrl-C and bad settings are one line (module's doc).

    Outside a command (:func:`command_name` is :obj:`None`) it changes nothing.

    Raises:
        SystemExit: with status 2 when, in a command's process, the imports raise a
            :class:`~gnplace.exceptions.GnplaceError` (its line printed first).
    """
    prog = command_name()
    if prog is None:
        yield
        return
    sys.excepthook = _reporting_interrupts(prog, sys.excepthook)  # the command's own handling takes over later
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            yield
    except GnplaceError as err:
        _print_warnings(prog, caught)
        print(f"{prog}: error: {first_line(err)}", file=sys.stderr)
        raise SystemExit(2) from None
    _print_warnings(prog, caught)


def _print_warnings(prog: str, caught: list[warnings.WarningMessage]) -> None:
    """Print each of the imports' warnings as one ``PROG: warning:`` line, as a command prints its own.

    numba's about a setting it cannot read (``NUMBA_OPT=abc``: "Environment variable 'NUMBA_OPT' is defined but its
    associated value 'abc' could not be parsed.") went on with the traceback of its parse, at every command.
    """
    for warning in caught:
        text = str(warning.message).strip()
        print(f"{prog}: warning: {text.splitlines()[0] if text else warning.category.__name__}", file=sys.stderr)
