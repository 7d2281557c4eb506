"""``OpGraph``: an immutable DAG of the ops of one training step.

Every node is one op of a training graph (forward, backward or parameter update) with its cost
inputs: FLOP, bytes it writes, bytes of parameters and optimizer state resident with it, and,
optionally, measured seconds per device kind that override the cost model (as Placeto's measured op
costs did). Every edge carries the bytes that flow from producer to consumer. Nodes that must share
a device (an op, its gradient ops and its update op) share a colocation ``group`` id. Besides its raw
``op_type`` (which depends on the importer: aten, ONNX, ...), each op has a canonical ``op_kind``
from the one vocabulary of :mod:`gnplace.opkinds` (``matmul``, ``conv_grad``, ``update``, ...).

All per-node and per-edge data live in read-only numpy arrays, so that the simulator and the
placers read them without copies. The constructor validates once (see :meth:`OpGraph.validate`);
code that receives an ``OpGraph`` can trust it.
"""

from __future__ import annotations

import copy
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from gnplace.exceptions import InvalidArgument, InvalidGraph, UnknownName
from gnplace.limits import MAX_COUNT
from gnplace.opkinds import KIND_VOCABULARY, canonical_kind
from gnplace.readonly import ReadOnlyArrays, ReadOnlyAttributes, ReadOnlyDict
from gnplace.units import counted

__all__ = ["OpGraph", "PHASES", "FORWARD", "BACKWARD", "UPDATE", "exact_sum", "require_ops", "check_graph"]

#: Names of the phases, indexed by the values of :attr:`OpGraph.phase`.
PHASES: tuple[str, ...] = ("forward", "backward", "update")
FORWARD, BACKWARD, UPDATE = 0, 1, 2


def _json_shaped(value: Any) -> Any:
    """A deep copy of ``value`` with each tuple a list, as JSON reads it back (a graph's ``meta``).

    A tuple in ``meta`` came back a list from a saved file, and the graph read was not ``==`` the one saved.

    Examples:
        >>> _json_shaped({"shape": (8, 128), "tags": [("a", 1)]})
        {'shape': [8, 128], 'tags': [['a', 1]]}
    """
    if isinstance(value, dict):
        return {key: _json_shaped(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_shaped(item) for item in value]
    return copy.deepcopy(value)


def _texts(values: Any, field: str, graph: str) -> tuple[str, ...]:
    """``values`` (one entry per node) as strings; one string or a non-iterable is an :class:`InvalidGraph`.

    ``op_types="mm"`` was read as the types ``("m", "m")``; ``node_names=5`` was a TypeError.
    """
    if isinstance(values, str | bytes) or not isinstance(values, Iterable) or isinstance(values, Mapping):
        raise InvalidGraph(f"graph {graph!r}: {field} must be a sequence of strings, one per node, "
                           f"got {reprlib.repr(values)}")
    texts = tuple(values)
    if any(x is None for x in texts):  # was the text "None"
        raise InvalidGraph(f"graph {graph!r}: {field} must be strings, one per node, got None at position "
                           f"{texts.index(None)} (give \"\" for none)")
    return tuple(str(x) for x in texts)


def _frozen(values: Any, dtype: Any, length: int, field: str) -> np.ndarray:
    array = np.array(values, dtype=dtype, copy=True)
    if array.ndim != 1 or array.shape[0] != length:
        raise InvalidGraph(f"field {field!r} has shape {array.shape}, expected ({length},)")
    array.flags.writeable = False
    return array


def _read_only(ptr: np.ndarray, other: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    for array in (ptr, other, size):
        array.flags.writeable = False
    return ptr, other, size


def _numbers(values: Any, field: str) -> np.ndarray:
    """``values`` as a numpy array of numbers; text and booleans are refused, not read as numbers.

    ``out_bytes=["1", "2"]`` and ``flops=[True, False]`` were cast without a word (a graph file is read
    strictly), and a ragged list was numpy's ValueError. So were a boolean among numbers (``[True, 2.0]``,
    which numpy makes numbers), complex numbers (their imaginary part dropped, with numpy's ComplexWarning),
    dates and durations (``datetime64`` as days since 1970).
    """
    try:
        given = np.asarray(values)
    except (TypeError, ValueError, OverflowError) as err:
        raise InvalidGraph(f"field {field!r} is not numeric: {err}") from err
    kind = given.dtype.kind
    if kind in "iuf" and isinstance(values, list | tuple) and bool in set(map(type, values)):  # (set of types: C speed)
        kind = "b"  # one True among numbers: numpy read it as 1
    if kind in "bUScmMV":
        what = {"b": "booleans", "c": "complex numbers", "m": "durations", "M": "dates", "V": "records"}.get(
            kind, "text")
        raise InvalidGraph(f"field {field!r} is not numeric: it holds {what} ({reprlib.repr(given.tolist())})")
    return given


def _as_float(values: Any, length: int, field: str) -> np.ndarray:
    try:
        return _frozen(_numbers(values, field), np.float64, length, field)
    except InvalidGraph:
        raise
    except (TypeError, ValueError, OverflowError) as err:  # (an int past a float's range: OverflowError)
        raise InvalidGraph(f"field {field!r} is not numeric: {err}") from err


def _as_int(
    values: Any, length: int, field: str, names: Sequence[str] | None = None, unit: str = " of bytes"
) -> np.ndarray:
    def where(i: int) -> str:
        return f"node {names[i]!r}" if names is not None else f"position {i}"

    exact = _numbers(values, field)
    if exact.dtype.kind in "iu":  # whole numbers already: cast as they are (through float64, 2**53 + 1 was
        # read as 2**53, and two group ids past 2**53 became one group)
        too_big = np.flatnonzero((exact > MAX_COUNT) | (exact < -MAX_COUNT))
        if too_big.size:
            bad = int(too_big[0])
            raise InvalidGraph(f"{where(bad)} has {field} too large ({exact[bad]}; the limit is 2**62)")
        return _frozen(exact, np.int64, length, field)
    as_float = _as_float(values, length, field)
    if not np.all(np.isfinite(as_float)):
        bad = int(np.flatnonzero(~np.isfinite(as_float))[0])
        what = "NaN" if np.isnan(as_float[bad]) else "infinite"
        raise InvalidGraph(f"{where(bad)} has {what} {field} ({as_float[bad]})")
    if np.any(as_float != np.round(as_float)):
        bad = int(np.flatnonzero(as_float != np.round(as_float))[0])
        raise InvalidGraph(f"{where(bad)}: {field} must be a whole number{unit}, found {as_float[bad]}")
    _check_size(as_float, field, where)  # before the cast, which would wrap a huge value to a negative one
    return _frozen(as_float, np.int64, length, field)


def _check_size(values: np.ndarray, field: str, where: Any) -> None:
    """Refuse a magnitude over :data:`~gnplace.limits.MAX_COUNT`, as a graph file's reader does."""
    too_big = np.flatnonzero(np.abs(values) > MAX_COUNT)
    if too_big.size:
        bad = int(too_big[0])
        raise InvalidGraph(f"{where(bad)} has {field} too large ({values[bad]:.6g}; the limit is 2**62)")


def exact_sum(values: np.ndarray) -> int:
    """The exact sum of an int64 array of magnitudes up to 2**62 (``int(values.sum())`` wraps past 2**63).

    Each value is split at bit 31, so that each half's sum fits in int64 for up to 2**32 values.
    """
    values = np.asarray(values, dtype=np.int64)
    return (int((values >> 31).sum()) << 31) + int((values & (2**31 - 1)).sum())


class _MeasuredSeconds(ReadOnlyDict[str, np.ndarray]):
    """A graph's ``cost_s``: checked when the graph is made, so read-only after (its arrays are too)."""

    refusal = ("a graph's cost_s is read-only (checked when the graph is made): make a graph with other "
               "measured seconds by graph.replace(cost_s={kind: seconds, ...})")


class OpGraph(ReadOnlyAttributes, ReadOnlyArrays):
    """An immutable DAG of ops with their costs, colocation groups and edge sizes.

    Args:
        node_names (Sequence[str]): unique op names, ``num_ops`` of them.
        edges (array-like): ``[num_edges, 2]`` pairs ``(producer, consumer)`` of node indices.
        flops (array-like, optional): FLOP of each op (default: zeros).
        out_bytes (array-like, optional): bytes each op writes, the size of its outputs
            (default: the largest edge leaving the op, else 0).
        param_bytes (array-like, optional): bytes of parameters and optimizer state resident on
            the device of the op; non-zero on update ops (default: zeros).
        edge_bytes (array-like, optional): bytes each edge carries, at most ``out_bytes`` of its
            producer (default: ``out_bytes`` of the producer).
        op_types (Sequence[str], optional): op type of each node, e.g. ``"conv2d"`` (default: ``"op"``).
        phase (array-like, optional): 0 forward, 1 backward, 2 update, or the names in
            :data:`PHASES` (default: forward).
        op_kinds (Sequence[str], optional): canonical kind of each node, entries of
            :data:`gnplace.opkinds.KIND_VOCABULARY`; an importer that knows more than the op type
            tells (an ONNX ``Gather`` of a parameter is an ``embedding``) passes them (default:
            :func:`gnplace.opkinds.canonical_kind` of each op type and phase).
        group (array-like, optional): colocation group of each op; ops of one group are placed
            together. Renumbered ``0..num_groups-1`` in order of first appearance
            (default: one group per op).
        module (Sequence[str], optional): owning module path of each op (default: ``""``).
        cost_s (Mapping[str, array-like], optional): measured seconds of each op per device kind;
            NaN marks an op that was not measured there (default: none).
        name (str, optional): graph name (default: ``"graph"``).
        meta (Mapping, optional): JSON-serialisable facts about the graph (family, seed, ...); a tuple in it is
            kept as a list, as a saved graph reads it back.

    Raises:
        InvalidGraph: on a cycle (the message lists nodes on it), an edge to a node that does not
            exist, a duplicate edge or name, a negative or NaN size, an op kind outside the
            vocabulary, fields of the wrong length, or a name of None.

    Examples:
        >>> g = OpGraph(["a", "b", "c"], [(0, 1), (1, 2)], flops=[1e9, 2e9, 1e9],
        ...             out_bytes=[4e6, 4e6, 0], name="chain")
        >>> g
        OpGraph(name='chain', num_ops=3, num_edges=2, num_groups=3)
        >>> g.topological_order().tolist()
        [0, 1, 2]
        >>> OpGraph(["x", "y"], [(0, 1)], op_types=["mm", "mm"], phase=[0, 1]).op_kinds
        ('matmul', 'matmul_grad')
    """

    _read_only_dicts = ("cost_s",)  # its measured seconds stay read-only through pickling too
    # (ReadOnlyAttributes) what __init__ binds; after, none is rebound (meta's contents are the user's to change)
    _fields = ("name", "node_names", "meta", "edge_src", "edge_dst", "flops", "out_bytes", "param_bytes",
               "edge_bytes", "op_types", "module", "phase", "op_kinds", "group", "cost_s")

    def _refusal(self, name: str) -> str:
        argument = {"edge_src": "edges", "edge_dst": "edges"}.get(name, name)
        if name not in self._fields:  # worked out from the fields (num_groups, out_csr, ...), or no field at all
            return f"a graph's {name} cannot be set: a graph is immutable (make another with graph.replace(...))"
        return f"a graph's {name} is read-only: make another graph with graph.replace({argument}=...)"

    def __init__(
        self,
        node_names: Sequence[str],
        edges: Any = (),
        *,
        flops: Any = None,
        out_bytes: Any = None,
        param_bytes: Any = None,
        edge_bytes: Any = None,
        op_types: Sequence[str] | None = None,
        phase: Any = None,
        group: Any = None,
        module: Sequence[str] | None = None,
        cost_s: Mapping[str, Any] | None = None,
        name: str = "graph",
        meta: Mapping[str, Any] | None = None,
        op_kinds: Sequence[str] | None = None,
    ) -> None:
        if not isinstance(name, str):  # None was the name "None", which a graph file refuses to hold; 3 was "3"
            raise InvalidGraph(f"a graph's name must be a string, got {reprlib.repr(name)} (the default is 'graph')")
        self.name = str(name)  # (a str subclass, numpy's str_, made a plain str)
        names = _texts(node_names, "node_names", self.name)
        n = len(names)
        self.node_names = names
        for label, given in (("meta", meta), ("cost_s", cost_s)):
            if given is not None and not isinstance(given, Mapping):
                raise InvalidGraph(f"graph {self.name!r}: {label} must be a mapping, got {reprlib.repr(given)}")
        try:
            self.meta: dict[str, Any] = _json_shaped(dict(meta or {}))  # a copy: the caller's nested dicts stay theirs
        except RecursionError:
            raise InvalidGraph(f"graph {self.name!r}: meta is nested too deep, or holds itself") from None

        try:
            edge_array = _numbers(edges if len(edges) else np.zeros((0, 2)), "edges").astype(np.float64)
        except (TypeError, ValueError, OverflowError) as err:  # (an int past a float's range: OverflowError)
            raise InvalidGraph(
                f"graph {self.name!r}: edges must be [num_edges, 2] pairs of node indices ({err})"
            ) from err
        if edge_array.ndim != 2 or edge_array.shape[1] != 2:
            raise InvalidGraph(f"graph {self.name!r}: edges must be [num_edges, 2] pairs, got shape {edge_array.shape}")
        m = edge_array.shape[0]
        self.edge_src = _as_int(edge_array[:, 0], m, "edges", unit="")
        self.edge_dst = _as_int(edge_array[:, 1], m, "edges", unit="")

        self.flops = _as_float(np.zeros(n) if flops is None else flops, n, "flops")
        if out_bytes is None:
            fallback = np.zeros(n)
            if edge_bytes is not None and m:
                np.maximum.at(fallback, self._checked_src(n), _as_int(edge_bytes, m, "edge_bytes"))
            out_bytes = fallback
        self.out_bytes = _as_int(out_bytes, n, "out_bytes", names)
        self.param_bytes = _as_int(np.zeros(n) if param_bytes is None else param_bytes, n, "param_bytes", names)
        if edge_bytes is None:
            edge_bytes = self.out_bytes[self._checked_src(n)] if m else np.zeros(0)
        self.edge_bytes = _as_int(edge_bytes, m, "edge_bytes")
        self.op_types = _texts(op_types if op_types is not None else ["op"] * n, "op_types", self.name)
        self.module = _texts(module if module is not None else [""] * n, "module", self.name)
        self.phase = self._phases(phase, n)
        if op_kinds is None and len(self.op_types) == n:
            op_kinds = [canonical_kind(t, p) for t, p in zip(self.op_types, self.phase.tolist())]
        self.op_kinds = _texts(op_kinds if op_kinds is not None else (), "op_kinds", self.name)
        raw_group = np.arange(n) if group is None else group
        _, first, inverse = np.unique(_as_int(raw_group, n, "group", unit=""), return_index=True, return_inverse=True)
        # renumber groups in order of first appearance, so ids are stable under relabelling
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.shape[0])
        self.group = _frozen(rank[inverse] if n else np.zeros(0), np.int64, n, "group")
        measured: dict[str, np.ndarray] = {}
        for kind, values in (cost_s or {}).items():
            key = str(kind).lower()  # device kinds are matched in lower case: "K80" and "k80" are one kind
            if key in measured:
                raise InvalidGraph(f"graph {self.name!r}: cost_s gives device kind {key!r} twice (as {kind!r} "
                                   "and in another case); kinds are matched in lower case")
            measured[key] = _as_float(values, n, f"cost_s[{kind!r}]")
        self.cost_s: Mapping[str, np.ndarray] = _MeasuredSeconds(measured)
        self.validate()

    # ------------------------------------------------------------------ construction helpers
    def _checked_src(self, n: int) -> np.ndarray:
        self._check_edge_range(n)
        return self.edge_src

    def _check_edge_range(self, n: int) -> None:
        for column, label in ((self.edge_src, "producer"), (self.edge_dst, "consumer")):
            bad = np.flatnonzero((column < 0) | (column >= n))
            if bad.size:
                e = int(bad[0])
                raise InvalidGraph(
                    f"graph {self.name!r}: edge {e} ({int(self.edge_src[e])} -> {int(self.edge_dst[e])}) "
                    f"names {label} {int(column[e])}, which is not a node (graph has {n} nodes)"
                )

    def _phases(self, phase: Any, n: int) -> np.ndarray:
        if phase is None:
            return _frozen(np.zeros(n), np.int8, n, "phase")
        if isinstance(phase, str | bytes | Mapping) or not isinstance(phase, Iterable):
            raise InvalidGraph(f"graph {self.name!r}: phase must be a sequence, one per node (0, 1, 2 or "
                               f"{', '.join(PHASES)}), got {reprlib.repr(phase)}")
        values = []
        for i, p in enumerate(phase):
            if isinstance(p, str):
                if p not in PHASES:
                    raise InvalidGraph(
                        f"graph {self.name!r}: node {i} has unknown phase {p!r} (expected one of {PHASES})"
                    )
                values.append(PHASES.index(p))
            else:
                try:
                    known = not isinstance(p, (bool, np.bool_)) and float(p) in (0, 1, 2)
                except (TypeError, ValueError, OverflowError):
                    known = False
                if not known:
                    raise InvalidGraph(f"graph {self.name!r}: node {i} has unknown phase {reprlib.repr(p)} "
                                       "(expected 0, 1 or 2)")
                values.append(int(p))
        return _frozen(values, np.int8, n, "phase")

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Check every invariant; raise :class:`~gnplace.exceptions.InvalidGraph` on the first broken one.

        Checks: unique names, field lengths, op kinds in :data:`gnplace.opkinds.KIND_VOCABULARY`,
        edges inside the graph, no duplicate edges, no NaN or negative sizes, edges no larger than
        their producer's output, measured costs non-negative, and acyclicity (the error lists the
        nodes of one cycle).
        """
        n = self.num_ops
        if len(set(self.node_names)) != n:
            seen: set[str] = set()
            dup = next(x for x in self.node_names if x in seen or seen.add(x))  # type: ignore[func-returns-value]
            raise InvalidGraph(f"graph {self.name!r}: node name {dup!r} is used twice")
        for field, entries in (("op_types", self.op_types), ("module", self.module), ("op_kinds", self.op_kinds)):
            if len(entries) != n:
                has = counted(len(entries), "entry", "entries")
                raise InvalidGraph(f"graph {self.name!r}: field {field!r} has {has}, expected {n}")
        known = set(KIND_VOCABULARY)
        for i, kind in enumerate(self.op_kinds):
            if kind not in known:
                raise InvalidGraph(
                    f"graph {self.name!r}: node {self.node_names[i]!r} has unknown op kind {kind!r} "
                    f"(expected one of gnplace.opkinds.KIND_VOCABULARY: {', '.join(KIND_VOCABULARY)})"
                )
        self._check_edge_range(n)
        for field in ("flops", "out_bytes", "param_bytes"):
            values = getattr(self, field)
            bad = np.flatnonzero(~(values >= 0))  # catches NaN too
            if bad.size:
                i = int(bad[0])
                what = "NaN" if np.isnan(values[i]) else "negative"
                raise InvalidGraph(f"graph {self.name!r}: node {self.node_names[i]!r} has {what} {field} ({values[i]})")
        if not np.all(np.isfinite(self.flops)):
            i = int(np.flatnonzero(~np.isfinite(self.flops))[0])
            raise InvalidGraph(f"graph {self.name!r}: node {self.node_names[i]!r} has infinite flops")
        _check_size(self.flops, "flops", lambda i: f"graph {self.name!r}: node {self.node_names[i]!r}")
        for kind, seconds in self.cost_s.items():
            _check_size(seconds[np.isfinite(seconds)], f"cost_s[{kind!r}]", lambda i: f"graph {self.name!r}: a node")
        bad = np.flatnonzero(self.edge_bytes < 0)
        if bad.size:
            raise InvalidGraph(f"graph {self.name!r}: edge {self._edge_label(int(bad[0]))} has negative bytes")
        too_big = np.flatnonzero(self.edge_bytes > self.out_bytes[self.edge_src])
        if too_big.size:
            e = int(too_big[0])
            raise InvalidGraph(
                f"graph {self.name!r}: edge {self._edge_label(e)} carries {int(self.edge_bytes[e])} bytes, more than "
                f"its producer writes ({int(self.out_bytes[self.edge_src[e]])} out_bytes)"
            )
        if self.num_edges:
            keys = self.edge_src * max(n, 1) + self.edge_dst
            uniq, counts = np.unique(keys, return_counts=True)
            if np.any(counts > 1):
                key = int(uniq[np.flatnonzero(counts > 1)[0]])
                e = int(np.flatnonzero(keys == key)[0])
                raise InvalidGraph(f"graph {self.name!r}: edge {self._edge_label(e)} appears twice")
        for kind, values in self.cost_s.items():
            bad = np.flatnonzero((values < 0) | np.isinf(values))
            if bad.size:
                i = int(bad[0])
                raise InvalidGraph(
                    f"graph {self.name!r}: node {self.node_names[i]!r} has invalid measured "
                    f"cost_s[{kind!r}] ({values[i]})"
                )
        self.topological_order()  # raises on a cycle

    def _edge_label(self, e: int) -> str:
        return f"{self.node_names[self.edge_src[e]]!r} -> {self.node_names[self.edge_dst[e]]!r}"

    # ------------------------------------------------------------------ sizes
    @property
    def num_ops(self) -> int:
        """Number of ops (nodes)."""
        return len(self.node_names)

    @property
    def num_edges(self) -> int:
        """Number of edges."""
        return int(self.edge_src.shape[0])

    @cached_property
    def num_groups(self) -> int:
        """Number of colocation groups."""
        return int(self.group.max()) + 1 if self.num_ops else 0

    def __len__(self) -> int:
        return self.num_ops

    def __repr__(self) -> str:
        return (
            f"OpGraph(name={self.name!r}, num_ops={self.num_ops}, num_edges={self.num_edges}, "
            f"num_groups={self.num_groups})"
        )

    # ------------------------------------------------------------------ structure
    @cached_property
    def out_csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Outgoing edges as CSR: ``(ptr [num_ops+1], consumer [num_edges], bytes [num_edges])``."""
        order = np.argsort(self.edge_src, kind="stable")
        ptr = np.zeros(self.num_ops + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.edge_src, minlength=self.num_ops), out=ptr[1:])
        return _read_only(ptr, self.edge_dst[order], self.edge_bytes[order])

    @cached_property
    def in_csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Incoming edges as CSR: ``(ptr [num_ops+1], producer [num_edges], bytes [num_edges])``."""
        order = np.argsort(self.edge_dst, kind="stable")
        ptr = np.zeros(self.num_ops + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.edge_dst, minlength=self.num_ops), out=ptr[1:])
        return _read_only(ptr, self.edge_src[order], self.edge_bytes[order])

    @cached_property
    def in_bytes(self) -> np.ndarray:
        """Bytes each op reads from its producers, ``[num_ops]``."""
        total = np.bincount(self.edge_dst, weights=self.edge_bytes, minlength=self.num_ops)
        total.flags.writeable = False
        return total

    @cached_property
    def _topo(self) -> np.ndarray:
        n = self.num_ops
        ptr_array, consumers_array, _ = self.out_csr
        # Python lists, not numpy's arrays: an item of an array is a numpy scalar, and the walk of 280,000 ops
        # over them took 0.45 s (CPU) of loading the graph
        indegree: list[int] = np.bincount(self.edge_dst, minlength=n).tolist()
        ptr, consumers = ptr_array.tolist(), consumers_array.tolist()
        frontier: list[int] = [u for u in range(n) if indegree[u] == 0]
        order: list[int] = []
        head = 0
        while head < len(frontier):
            u = frontier[head]
            head += 1
            order.append(u)
            for v in consumers[ptr[u] : ptr[u + 1]]:
                indegree[v] -= 1
                if indegree[v] == 0:
                    frontier.append(v)
        if len(order) != n:
            stuck = np.asarray(indegree, dtype=np.int64)
            raise InvalidGraph(f"graph {self.name!r} has a cycle: {' -> '.join(self._find_cycle(stuck))}")
        result = np.asarray(order, dtype=np.int64)
        result.flags.writeable = False
        return result

    def _find_cycle(self, indegree: np.ndarray) -> list[str]:
        import networkx as nx

        stuck = indegree > 0
        sub = nx.DiGraph()
        mask = stuck[self.edge_src] & stuck[self.edge_dst]
        sub.add_edges_from(zip(self.edge_src[mask].tolist(), self.edge_dst[mask].tolist()))
        cycle = nx.find_cycle(sub)
        names = [self.node_names[u] for u, _ in cycle]
        return names + [names[0]]

    def topological_order(self) -> np.ndarray:
        """Node indices in a topological order (Kahn's algorithm, ties by index), ``[num_ops]``.

        Raises:
            InvalidGraph: if the graph has a cycle.
        """
        return self._topo

    def index(self, node_name: str) -> int:
        """Index of the node called ``node_name``.

        Raises:
            UnknownName: if no node has that name (it was a bare ``KeyError: 'nope'``, naming no graph).

        Examples:
            >>> g = OpGraph(["a", "b"], [(0, 1)], name="pair")
            >>> g.index("b")
            1
            >>> g.index("c")
            Traceback (most recent call last):
            ...
            gnplace.exceptions.UnknownName: graph 'pair' has no node named 'c' (its 2 nodes: 'a', 'b')
        """
        try:
            return self._name_index[node_name]
        except (KeyError, TypeError):  # TypeError: an unhashable name, such as a list
            names = self.node_names
            shown = ", ".join(repr(name) for name in names[:8]) + (", ..." if len(names) > 8 else "")
            raise UnknownName(f"graph {self.name!r} has no node named {reprlib.repr(node_name)} (its {len(names)} "
                              f"nodes: {shown or 'none'})") from None

    @cached_property
    def _name_index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.node_names)}

    def measured_cost(self, kind: str) -> np.ndarray | None:
        """Measured seconds per op on device kind ``kind`` (NaN where unmeasured), or ``None``.

        Raises:
            InvalidArgument: if ``kind`` is no ``str`` (None was an AttributeError: 'lower').
        """
        if not isinstance(kind, str):
            raise InvalidArgument(f"a device kind is a str, such as 'k80', got {reprlib.repr(kind)}")
        return self.cost_s.get(kind.lower())

    # ------------------------------------------------------------------ totals
    @property
    def total_flops(self) -> float:
        """Sum of FLOP over all ops."""
        return float(self.flops.sum())

    @property
    def total_param_bytes(self) -> int:
        """Bytes of parameters and optimizer state resident over all ops."""
        return exact_sum(self.param_bytes)

    def fingerprint(self) -> str:
        """SHA-256 (hex) of everything that shapes a step of this graph: all but its name and meta.

        Two graphs with the same fingerprint pose the same placement problem; a resumed search
        checks it (:meth:`~gnplace.cluster.Cluster.fingerprint` is the cluster's).

        Examples:
            >>> from gnplace.toy import mlp_training_graph
            >>> mlp_training_graph(layers=2).fingerprint() == mlp_training_graph(layers=2).fingerprint()
            True
            >>> mlp_training_graph(layers=2).fingerprint() == mlp_training_graph(layers=3).fingerprint()
            False
        """
        import hashlib

        digest = hashlib.sha256()
        for values in (self.node_names, self.op_types, self.op_kinds, self.module):
            digest.update(repr(tuple(values)).encode())
        arrays = [getattr(self, name) for name in ("edge_src", "edge_dst", "flops", "out_bytes", "param_bytes",
                                                   "edge_bytes", "phase", "group")]
        for kind in sorted(self.cost_s):
            digest.update(repr(kind).encode())
            arrays.append(self.cost_s[kind])
        for values in arrays:
            digest.update(repr((values.dtype.str, values.shape)).encode())
            digest.update(np.ascontiguousarray(values).tobytes())
        return digest.hexdigest()

    def replace(self, **changes: Any) -> OpGraph:
        """A copy with some constructor arguments replaced (the graph itself is immutable).

        Op kinds are kept, unless ``op_types`` or ``phase`` is replaced without ``op_kinds``: then
        they are derived again from the new types and phases.

        Raises:
            InvalidArgument: if a name given is no constructor argument (a typo was a TypeError).
            InvalidGraph: if the graph with the changes is not valid, as the constructor says.
        """
        fields: dict[str, Any] = dict(
            node_names=self.node_names,
            edges=np.stack([self.edge_src, self.edge_dst], axis=1),
            flops=self.flops,
            out_bytes=self.out_bytes,
            param_bytes=self.param_bytes,
            edge_bytes=self.edge_bytes,
            op_types=self.op_types,
            phase=self.phase,
            group=self.group,
            module=self.module,
            cost_s=self.cost_s,
            name=self.name,
            meta=self.meta,
            op_kinds=self.op_kinds,
        )
        unknown = sorted(set(changes) - set(fields))
        if unknown:
            raise InvalidArgument(f"graph.replace: no OpGraph argument is named {', '.join(unknown)} (it takes: "
                                  f"{', '.join(fields)})")
        if ("op_types" in changes or "phase" in changes) and "op_kinds" not in changes:
            fields["op_kinds"] = None
        fields.update(changes)
        names = fields.pop("node_names")
        edges = fields.pop("edges")
        return OpGraph(names, edges, **fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpGraph):
            return NotImplemented
        arrays = ("edge_src", "edge_dst", "flops", "out_bytes", "param_bytes", "edge_bytes", "phase", "group")
        return (
            self.name == other.name
            and self.node_names == other.node_names
            and self.op_types == other.op_types
            and self.op_kinds == other.op_kinds
            and self.module == other.module
            and self.meta == other.meta
            and all(np.array_equal(getattr(self, a), getattr(other, a)) for a in arrays)
            and self.cost_s.keys() == other.cost_s.keys()
            and all(np.array_equal(v, other.cost_s[k], equal_nan=True) for k, v in self.cost_s.items())
        )

    def __hash__(self) -> int:
        """Of the name and sizes: cheap to read (``==`` compares every array), and shared by equal graphs.

        So a graph loaded twice, copied or unpickled finds the other's entry in a dict or set.
        """
        return hash((self.name, self.num_ops, self.num_edges))


def check_graph(graph: Any) -> None:
    """Refuse a ``graph`` that is no :class:`OpGraph` (a path, a placement, None) in one line.

    Raises:
        InvalidArgument: naming what was given and how to load a graph (it was an AttributeError deep inside).
    """
    if not isinstance(graph, OpGraph):
        raise InvalidArgument(f"graph must be an OpGraph (gnplace.load_graph(path)), got {reprlib.repr(graph)}")


def require_ops(graph: OpGraph, source: str) -> OpGraph:
    """``graph``, refused with an :class:`InvalidGraph` when it has no ops (nothing to place or time).

    ``source`` names where the graph came from (its file), for the message.
    """
    if graph.num_ops == 0:
        raise InvalidGraph(f"{source}: graph {graph.name!r} has no ops; there is nothing to place")
    return graph
