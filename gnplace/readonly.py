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

from typing import Any

import numpy as np

__all__ = ["ReadOnlyArrays", "read_only"]


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
