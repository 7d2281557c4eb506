"""Silencing other libraries' notes (their loggers, warnings, ``print``), shared by threads.

Loggers' levels, the warning filters and ``sys.stdout`` are the process's. A use that saved one and restored it
after (``logger.setLevel`` back, :class:`warnings.catch_warnings`, :func:`contextlib.redirect_stdout`) went wrong
when another thread did the same meanwhile: the one to leave last restored what the other had set, and it stayed
for the rest of the process (a library's logger at ERROR, every warning ignored, ``print`` into a buffer no one
reads). Here each logger, each warning filter and stdout has one :class:`~gnplace.workers.SharedSetting`: the first
use makes the setting and the last undoes it, and a filter is taken out of the list by itself, leaving whatever
other code added or removed meanwhile.
"""

from __future__ import annotations

import io
import logging
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, cast

from gnplace.workers import SharedSetting

__all__ = ["ignored_warnings", "logger_at_error", "quietly", "stdout_discarded"]

_LOCK = threading.Lock()
_LOGGERS: dict[str, SharedSetting] = {}
_FILTERS: dict[tuple[str, str, type[Warning]], SharedSetting] = {}


def logger_at_error(name: str) -> SharedSetting:
    """The logger ``name`` at ERROR while any thread is inside; its own level again after the last leaves.

    Args:
        name (str): the logger's name (``"transformers"``, ``"accelerate"``).

    Examples:
        >>> log = logging.getLogger("gnplace.doctest")
        >>> with logger_at_error("gnplace.doctest"):
        ...     logging.getLevelName(log.level)
        'ERROR'
        >>> logging.getLevelName(log.level)
        'NOTSET'
    """
    with _LOCK:
        if name not in _LOGGERS:
            _LOGGERS[name] = SharedSetting(lambda: _set_error_level(name))
        return _LOGGERS[name]


def _set_error_level(name: str) -> Callable[[], None]:
    """Set logger ``name`` to ERROR; returns what sets its level back."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    return lambda: logger.setLevel(level)


def ignored_warnings(message: str = "", module: str = "", category: type[Warning] = Warning) -> SharedSetting:
    """Warnings matching ``message``, ``module`` and ``category`` ignored while any thread is inside.

    The arguments are :func:`warnings.filterwarnings`' (regular expressions matched at the start of the
    message and of the warning's module). The filter goes first in the list and, after the last to leave, is taken
    out again; an equal filter the list held already stays where it was.

    Args:
        message (str, optional): the message's start, a regular expression (default: any).
        module (str, optional): the module's name, a regular expression (default: any).
        category (type[Warning], optional): the warnings' class (default: every warning).

    Examples:
        >>> with ignored_warnings(message="doctest note"):
        ...     warnings.warn("doctest note")
    """
    key = (message, module, category)
    with _LOCK:
        if key not in _FILTERS:
            _FILTERS[key] = SharedSetting(lambda: _add_filter(message, module, category))
        return _FILTERS[key]


def _add_filter(message: str, module: str, category: type[Warning]) -> Callable[[], None]:
    """Put an "ignore" filter first; returns what takes that one filter out (and nothing else).

    The filter is the tuple :func:`warnings.filterwarnings` makes, inserted as it is even where the list holds an
    equal one (the caller's own, which stays where it was): taking out the first equal filter then takes out this.
    """
    added = ("ignore", re.compile(message, re.I) if message else None, category,
             re.compile(module) if module else None, 0)
    filters = cast(list[Any], warnings.filters)
    filters.insert(0, added)
    _filters_changed()

    def take_out() -> None:
        try:
            filters.remove(added)
        except ValueError:  # another caller's resetwarnings() or filter list took it out already
            return
        _filters_changed()

    return take_out


def _filters_changed() -> None:
    """Tell :mod:`warnings` its list changed, as :func:`warnings.filterwarnings` does (cached decisions redone)."""
    mutated = getattr(warnings, "_filters_mutated", None)
    if mutated is not None:
        mutated()


def _discard_stdout() -> Callable[[], None]:
    """Point ``sys.stdout`` at a buffer no one reads; returns what points it back (unless someone else moved it)."""
    saved, sink = sys.stdout, io.StringIO()
    sys.stdout = sink

    def back() -> None:
        if sys.stdout is sink:
            sys.stdout = saved

    return back


_STDOUT = SharedSetting(_discard_stdout)


def stdout_discarded() -> SharedSetting:
    """Python's ``print`` to stdout discarded while any thread is inside.

    C code's output is not: see :func:`gnplace.cstdout.quiet_c_stdout`.
    """
    return _STDOUT


@contextmanager
def quietly(*loggers: str, warnings_too: bool = True) -> Iterator[None]:
    """The loggers ``loggers`` at ERROR and, with ``warnings_too``, every warning ignored while the body runs.

    Args:
        *loggers (str): names of the loggers to quiet.
        warnings_too (bool, optional): ignore every warning as well (default: True).
    """
    with ExitStack() as stack:
        for name in loggers:
            stack.enter_context(logger_at_error(name))
        if warnings_too:
            stack.enter_context(ignored_warnings())
        yield
