"""The exceptions gnplace raises.

Every error that bad input can cause derives from :class:`GnplaceError`, so that the command line
can print it as one line and exit non-zero, and library users can catch one class. Messages name
the object, the value found and, where there is one, the fix. :class:`Terminated` is no error: it is
how a run stopped by SIGTERM ends, a ``KeyboardInterrupt`` as Ctrl-C's is.
"""

from __future__ import annotations

__all__ = [
    "GnplaceError",
    "InvalidGraph",
    "InvalidCluster",
    "InvalidPlacement",
    "InfeasiblePlacement",
    "UnsupportedGraph",
    "UnknownName",
    "UnknownPlacer",
    "InvalidArgument",
    "BudgetExhausted",
    "MissingDependency",
    "InvalidCheckpoint",
    "ExecutionFailed",
    "Terminated",
]


class GnplaceError(Exception):
    """Base class of every error gnplace raises on bad input."""


class InvalidGraph(GnplaceError, ValueError):
    """An :class:`~gnplace.graph.OpGraph` or graph file breaks a rule (cycle, dangling edge, ...)."""


class InvalidCluster(GnplaceError, ValueError):
    """A cluster description (preset name, YAML file or arguments) is malformed."""


class InvalidPlacement(GnplaceError, ValueError):
    """A placement does not fit its graph or cluster (wrong length, unknown device, ...)."""


class InfeasiblePlacement(GnplaceError):
    """No placement can satisfy a constraint, such as a memory budget that nothing fits."""


class UnsupportedGraph(GnplaceError):
    """A model or graph uses something gnplace cannot handle (an op it cannot trace, ...)."""


class UnknownName(GnplaceError, ValueError):
    """A name (of a placer, a cluster preset, a family, ...) that gnplace does not know."""


class UnknownPlacer(UnknownName, KeyError):
    """A name no placer is registered under, looked up as the registry's key (``PLACERS[name]``).

    A :class:`KeyError` as well, as a :class:`~collections.abc.Mapping`'s missing key is: ``PLACERS.get(name)``
    raised UnknownName rather than return None, and ``except KeyError`` let it through. Its text is the message
    alone (a KeyError's ``str`` quotes it).
    """

    __str__ = BaseException.__str__


class InvalidArgument(GnplaceError, ValueError):
    """An argument's value is malformed (an ``--input-shape`` that is not ``NAME=D1,D2,...``, ...)."""


class BudgetExhausted(GnplaceError):
    """A :class:`~gnplace.sim.timer.BudgetedTimer` was asked for more evaluations than its budget allows."""


class MissingDependency(GnplaceError, ImportError):
    """Something gnplace was asked for needs a library that is not installed."""


class InvalidCheckpoint(GnplaceError, ValueError):
    """A checkpoint file is missing, truncated, corrupt, foreign or made for other features."""


class ExecutionFailed(GnplaceError):
    """A placed step could not run on real devices (a rank died, a device is missing); a distributed run lost a rank."""


class Terminated(KeyboardInterrupt):
    """A run stopped on SIGTERM, after saving what it had done (as it stops on Ctrl-C).

    Under Lightning, or while worker processes ran or ``evaluate`` ran its tasks in this process
    (:func:`~gnplace.workers.sigterm_as_interrupt`).

    A ``KeyboardInterrupt``, so that whatever a caller does on Ctrl-C (keep the best placement, stop its
    workers) it does on SIGTERM too; the command line reports it as one line and exits 143 (128 + 15).
    """


def first_line(err: BaseException) -> str:  # a helper beside the classes, so not in __all__ (the classes only)
    """The first line of ``err``'s message, or its type's name when it has none (for one-line reports)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def after_interrupt(err: BaseException) -> bool:  # a helper, as first_line
    """Whether ``err`` was raised while handling a Ctrl-C (a ``KeyboardInterrupt`` in its context chain).

    Lightning's trainer answers Ctrl-C with ``sys.exit(1)`` after its own shutdown, and numba's compiled
    loops hand it back as a ``SystemError``: both carry the ``KeyboardInterrupt`` as their context.

    Examples:
        >>> try:
        ...     try:
        ...         raise KeyboardInterrupt
        ...     except KeyboardInterrupt:
        ...         raise SystemExit(1)
        ... except SystemExit as err:
        ...     after_interrupt(err), after_interrupt(SystemExit(1))
        (True, False)
    """
    return in_chain(err, KeyboardInterrupt)


def in_chain(err: BaseException, kind: type[BaseException]) -> bool:  # a helper, as first_line
    """Whether ``err`` or an exception in its cause or context chain is a ``kind`` (each looked at once)."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, kind):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False
