"""Read-only arrays that stay read-only through pickling.

:class:`~gnplace.graph.OpGraph`, :class:`~gnplace.cluster.Cluster` and
:class:`~gnplace.placement.Placement` are immutable: every array they hold is read-only. numpy's pickles
do not keep that flag, so an object sent to a worker process (``gnplace evaluate``'s pool, a
``torch.distributed`` rank, a spawned pretraining rank) came back with writable arrays. That broke the
promise, and it cost time: numba compiles a kernel once per distinct argument type, read-only being part
of an array's type, so every kernel a worker ran on an unpickled graph or cluster was compiled a second
time (about 8 s for the simulator's, 2026-12-01).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import numpy as np

__all__ = ["ReadOnlyArrays", "ReadOnlyAttributes", "ReadOnlyDict", "read_only"]


def read_only(value: Any) -> Any:
    """``value`` with each array in it made read-only, in place: an array, or a tuple or list of them.

    Other values, and the contents of dicts (a graph's ``meta`` is the user's), are left as they are.

    Examples:
        >>> ptr, dst = read_only((np.arange(3), np.zeros(2)))
        >>> ptr.flags.writeable, dst.flags.writeable
        (False, False)
    """
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, tuple | list):
        for item in value:
            read_only(item)
    return value


K = TypeVar("K")
V = TypeVar("V")


class ReadOnlyDict(dict[K, V]):
    """A dict that refuses every change after it is made, and pickles and copies as one.

    A graph's measured seconds (``OpGraph.cost_s``) are checked when the graph is made, and what the graph
    caches (its fingerprint) reads them: an entry set afterwards skipped the checks (an array of another length
    was a numpy broadcasting traceback in the simulator) and left the fingerprint stale.

    Examples:
        >>> costs = ReadOnlyDict({"k80": 1.0})
        >>> costs["v100"] = 2.0
        Traceback (most recent call last):
        ...
        TypeError: this mapping is read-only
    """

    #: The error a change raises (a subclass says how to make one with the change instead).
    refusal = "this mapping is read-only"

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(self.refusal)

    __setitem__ = __delitem__ = __ior__ = update = pop = popitem = clear = setdefault = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:  # pickle's default would set each item on an empty one: refused
        return type(self), (dict(self),)

    def __copy__(self) -> ReadOnlyDict[K, V]:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> ReadOnlyDict[K, V]:
        import copy

        return type(self)({key: copy.deepcopy(value, memo) for key, value in self.items()})


class ReadOnlyArrays:
    """A mixin whose ``__setstate__`` makes the unpickled object's arrays read-only again (:func:`read_only`).

    For classes whose state is their ``__dict__`` (plain classes and dataclasses without slots).

    Examples:
        >>> import pickle
        >>> from gnplace.cluster import load_cluster
        >>> pickle.loads(pickle.dumps(load_cluster("k80x2"))).latency.flags.writeable
        False
    """

    #: Attributes holding a dict of the class's own arrays (a graph's ``cost_s``), made read-only too.
    _read_only_dicts: tuple[str, ...] = ()

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            read_only(list(value.values()) if key in self._read_only_dicts and isinstance(value, dict) else value)
        self.__dict__.update(state)


class ReadOnlyAttributes:
    """A mixin that refuses to rebind or delete a public attribute once the object is made (an ``AttributeError``).

    A graph's or a cluster's fields are checked when it is made, and what is kept of it reads them: its cached
    structure, its fingerprint, a simulator's prepared arrays (kept per object). ``graph.flops = ...`` or
    ``cluster.devices = ...`` was taken without a word, and a simulator that had timed the object went on timing
    the old numbers. Each public name of :attr:`_fields` may be bound once, by ``__init__``; once all are,
    no public attribute may be set. Private ones (``_``-prefixed: the object's caches) may, and unpickling and
    copies, which fill ``__dict__`` directly, are not affected.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> chain_graph(2).name = "other"
        Traceback (most recent call last):
        ...
        AttributeError: a graph's name is read-only: make another graph with graph.replace(name=...)
    """

    #: The public attributes ``__init__`` binds, once each.
    _fields: tuple[str, ...] = ()

    def _refusal(self, name: str) -> str:
        """The message refusing to set or delete ``name`` (a subclass says how to make one with the change)."""
        return f"{type(self).__name__}'s {name} is read-only"

    if not TYPE_CHECKING:  # (mypy would let any attribute be set on a class with __setattr__, typos too)

        def __setattr__(self, name: str, value: Any) -> None:
            if not name.startswith("_"):
                bound = self.__dict__
                if name in bound or hasattr(type(self), name) or all(field in bound for field in self._fields):
                    raise AttributeError(self._refusal(name))
            object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if not name.startswith("_"):
            raise AttributeError(self._refusal(name))
        object.__delattr__(self, name)
