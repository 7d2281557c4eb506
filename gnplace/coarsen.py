"""Coarsen a large graph into a chosen number of groups, and expand a coarse placement back to ops.

Placers work on colocation groups; a graph of 100,000 ops has tens of thousands of them. Coarsening
merges them in levels, as the hierarchical planner's grouper does (Mirhoseini et al., ICLR 2018):

1. **colocation**: an op, its gradient ops and its update op are one unit already;
2. **module subtrees** (only with ``modules=True``): groups under one module, connected through each
   other, become one unit, whole subtrees at a time from the leaves up (a branch of a cell, then a
   cell), the hierarchical planner's grouping by the model's own structure (:func:`module_units`);
3. **heavy-edge matching**: units are merged pairwise along the heaviest byte edges first, under a
   compute cap, so that merges follow chains of data dependencies (:func:`heavy_edge_matching`);
4. **METIS**, if more than ``num_groups`` units remain: the unit graph (vertex weight: compute
   seconds on the fastest device; edge weight: bytes between units) is partitioned by pymetis into
   ``num_groups`` balanced parts with few bytes cut, which keeps parallel branches apart (their cut
   is small) and keeps the DAG's parallelism.

The result is a *coarse graph*: each coarse node is a set of ops of one part, contiguous enough
that the coarse graph stays a DAG (ops are visited in topological order; an op joins its part's
open node unless that node was opened before some producer's node, in which case the part opens
a new node, so every coarse edge runs from an older node to a newer one). Coarse nodes of a part
share one colocation group, so a placer that places groups places ``num_groups`` units. Coarse op
times are the exact sums of their ops' times on each device kind of the cluster (stored as
measured ``cost_s``), so the simulator charges the same compute; transfers carry each crossing
tensor once per coarse edge: once per consuming coarse node, where the expanded placement sends it once per
consuming device. Two consuming nodes on one device are charged the tensor twice (a ``[0, 1, 1]`` placement of
a tensor of 8 MB read by ops of two groups: 16 MB crossed in the coarse graph, 8 MB expanded), so a coarse
graph's transfer bytes and peaks may exceed its expansion's (1.1-1.5x and 1.2-1.6x on shipped graphs coarsened
to 16 groups on k80x4); placements are timed expanded, on the graph itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat

import numpy as np
from numba import njit

from gnplace.cluster import Cluster
from gnplace.cstdout import quiet_c_stdout
from gnplace.exceptions import InvalidArgument, UnsupportedGraph
from gnplace.graph import OpGraph, exact_sum
from gnplace.limits import MAX_COUNT, is_whole
from gnplace.placement import GraphKey, Placement, check_graph_and_cluster
from gnplace.sim.costmodel import DEFAULT_COSTS, CostModel

__all__ = ["Coarsening", "coarsen", "coarsen_within", "module_units", "partition_units"]


@dataclass(frozen=True, eq=False)
class Coarsening:
    """A coarse graph and the map from the original ops to its nodes.

    Attributes:
        graph (OpGraph): the coarse graph (a DAG), one colocation group per part.
        node_of_op (np.ndarray): coarse node of every original op, ``[num_ops]``.
        part_of_unit (np.ndarray): part (coarse group: ``graph.group`` of its nodes) of every original colocation
            group, ``[original.num_groups]``.
        original (OpGraph): the graph that was coarsened.
    """

    graph: OpGraph
    node_of_op: np.ndarray
    part_of_unit: np.ndarray
    original: OpGraph

    def __eq__(self, other: object) -> bool:
        """Equal graphs and maps (the dataclass's ``==`` asked an array's truth: a ValueError for two coarsenings)."""
        if not isinstance(other, Coarsening):
            return NotImplemented
        return (self.graph == other.graph and self.original == other.original
                and np.array_equal(self.node_of_op, other.node_of_op)
                and np.array_equal(self.part_of_unit, other.part_of_unit))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:  # the maps' numbers (thousands of them) were printed in full
        return f"Coarsening(graph={self.graph!r}, original={self.original!r})"

    def expand(self, placement: Placement) -> Placement:
        """The placement of the original graph that puts every op where its coarse node is (made for it).

        Raises:
            InvalidPlacement: ``placement`` is not one of the coarse graph (another graph's, or of another length).
        """
        if not isinstance(placement, Placement):  # a list of devices was an AttributeError
            raise InvalidArgument(f"expand takes a Placement of the coarse graph, got {type(placement).__name__}")
        placement.check(self.graph)  # another graph's placement would be stamped as made for the original
        return Placement(placement.devices[self.node_of_op], placement.cluster, GraphKey.of(self.original))


def _csr(src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected CSR adjacency of ``count`` units from directed unit edges, weights in KiB (at least 1)."""
    keep = src != dst
    a, b = np.minimum(src[keep], dst[keep]), np.maximum(src[keep], dst[keep])
    uniq, inverse = np.unique(a * count + b, return_inverse=True)
    kib = np.bincount(inverse, weights=nbytes[keep] / 1024.0) if uniq.size else np.zeros(0)
    ua, ub = uniq // count, uniq % count
    w = np.maximum(1, np.minimum(kib, 2**30)).astype(np.int64)
    rows, cols, ws = np.concatenate([ua, ub]), np.concatenate([ub, ua]), np.concatenate([w, w])
    order = np.lexsort((cols, rows))
    xadj = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=count), out=xadj[1:])
    return xadj, cols[order], ws[order]


def heavy_edge_matching(
    graph: OpGraph, unit_seconds: np.ndarray, target: int, *, cap_factor: float = 1.0,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Merge colocation groups pairwise along the heaviest edges until about ``target`` remain.

    Each round matches every unit at most once, heaviest edge (bytes) first, and merges a pair only
    if its compute stays under ``cap_factor`` x the mean compute per target group (default 1.0,
    the best of 1, 1.5, 2 and 3 on the scale benchmark), so merges
    follow data dependencies (chains) rather than joining parallel branches. Stops when a round
    merges nothing. ``start`` (unit of every colocation group, ``0..k-1``) begins from units already
    merged, such as :func:`module_units`'s (default: every group alone).

    Returns:
        np.ndarray: merged unit of every colocation group, numbered ``0..k-1``.
    """
    label = np.arange(graph.num_groups, dtype=np.int64) if start is None else np.asarray(start, dtype=np.int64)
    # each round keys the unit edges: the graph's edges while a weight may round, else the last round's, one per pair
    # of units (whole bytes summing under 2**53 are added exactly in any grouping: the same weights). Late rounds of
    # a large graph merge a few pairs each (908 rounds to 8 groups at 280,158 ops): keying every edge of the graph,
    # matching in a Python loop and renumbering in numpy passes over every group took 6.6 s of it (1.0 s in all now)
    exact = exact_sum(graph.edge_bytes) < 2**53
    a, b = label[graph.group[graph.edge_src]], label[graph.group[graph.edge_dst]]
    nbytes: np.ndarray = graph.edge_bytes.astype(np.float64)
    unit_seconds = np.asarray(unit_seconds, dtype=np.float64)
    cap = cap_factor * float(unit_seconds.sum()) / max(target, 1)
    count = int(label.max()) + 1 if label.size else 0
    seconds = np.bincount(label, weights=unit_seconds, minlength=count)
    while count > target:
        keep = a != b
        a, b, nbytes = a[keep], b[keep], nbytes[keep]
        key, inverse = np.unique(np.minimum(a, b) * count + np.maximum(a, b), return_inverse=True)
        weight = np.bincount(inverse, weights=nbytes) if key.size else np.zeros(0)
        merged_into, merges = _match_kernel(key, np.lexsort((key, -weight)), count, seconds, cap, target)
        if merges == 0:
            break
        label, seconds, renumber = _relabel_kernel(label, merged_into, unit_seconds, count)
        if exact:
            a, b, nbytes = renumber[key // count], renumber[key % count], weight
        else:
            a, b = renumber[a], renumber[b]
        count = seconds.shape[0]
    return label


@njit(cache=True)
def _relabel_kernel(label, merged_into, unit_seconds, count):  # type: ignore[no-untyped-def]
    """:func:`heavy_edge_matching`'s units after a round's merges, numbered ``0..k-1`` in order, and their seconds.

    The numbers ``np.unique(merged_into[label], return_inverse=True)`` gives, and the seconds ``np.bincount(label,
    weights=unit_seconds)`` sums (group by group, in order: the same bits), in two passes over the groups.

    Returns:
        tuple: unit of each group, seconds of each unit, and the new unit of each of the ``count`` old ones.
    """
    used = np.zeros(count, dtype=np.bool_)
    for unit in label:
        used[merged_into[unit]] = True
    rank = np.empty(count, dtype=np.int64)
    k = 0
    for u in range(count):
        if used[u]:
            k += 1
        rank[u] = k - 1
    renumber = rank[merged_into]
    new = np.empty_like(label)
    seconds = np.zeros(k)
    for i in range(label.shape[0]):
        unit = renumber[label[i]]
        new[i] = unit
        seconds[unit] += unit_seconds[i]
    return new, seconds, renumber


@njit(cache=True)
def _match_kernel(key, order, count, seconds, cap, target):  # type: ignore[no-untyped-def]
    """One round of :func:`heavy_edge_matching`, its loop: match units along the unit edges in order.

    Each edge ``key[e]`` (``lo * count + hi``) in ``order`` matches its units, each once, and only while their
    ``seconds`` sum to at most ``cap``, until ``target`` units remain.

    Returns the unit each unit merges into (itself, or the lower unit of its pair) and the count of merges.
    """
    merged_into = np.arange(count)
    matched = np.zeros(count, dtype=np.bool_)
    merges = 0
    for e in order:
        u, v = key[e] // count, key[e] % count
        if matched[u] or matched[v] or seconds[u] + seconds[v] > cap:
            continue
        matched[u] = True
        matched[v] = True
        merged_into[v] = u
        merges += 1
        if count - merges <= target:
            break
    return merged_into, merges


def module_units(graph: OpGraph, target: int) -> np.ndarray:
    """Merge colocation groups along the module hierarchy, a whole subtree at a time, toward ``target`` units.

    Level by level from the leaves up, the groups whose first op's module path shares one prefix of
    that length, and that are connected through each other's edges, become one unit: in an ENAS cell
    the relu, conv and batch-norm modules of ``cells.3.ops.2`` become one branch, then the branches of
    ``cells.3`` one cell. A level is taken while more than ``target`` units remain, and only if it
    leaves at least a quarter of ``target`` (a level that would fold a network into a handful of
    units, all the nodes of a recurrent cell say, is not). Groups outside any module stay alone.
    Every unit is a whole subtree's call, so a placement by units moves a branch or a cell at once,
    the move :class:`~gnplace.placers.annealing.AnnealingPlacer`'s module proposals make.

    Returns:
        np.ndarray: unit of every colocation group, numbered ``0..k-1``.

    Examples:
        >>> from gnplace.graph_io import load_graph
        >>> g = load_graph("datasets/cifar10/cifar10_002.gnpg")  # 516 groups, 52 cell branches
        >>> g.num_groups, int(module_units(g, 300).max()) + 1
        (516, 152)
    """
    label = np.arange(graph.num_groups, dtype=np.int64)
    if graph.num_groups <= target:
        return label
    first = np.full(graph.num_groups, graph.num_ops, dtype=np.int64)
    np.minimum.at(first, graph.group, np.arange(graph.num_ops))
    prefixes = _module_prefixes([graph.module[i] for i in first.tolist()])
    src, dst = graph.group[graph.edge_src], graph.group[graph.edge_dst]
    cross = src != dst
    # distinct group edges, in (src, dst) order, as one integer each: numpy's unique of rows sorted them as bytes
    # (0.2 s at 93,567 ops), and its unique of integers hashes them first (0.15 s); a sort takes 4 ms
    code = np.sort(src[cross] * np.int64(graph.num_groups) + dst[cross])
    code = code[np.concatenate(([True], code[1:] != code[:-1]))]
    pairs = np.stack([code // graph.num_groups, code % graph.num_groups], axis=1)
    lowest = np.arange(graph.num_groups, dtype=np.int64)  # each group's component so far, by its lowest group
    added = np.zeros(pairs.shape[0], dtype=bool)
    for depth in range(len(prefixes), 0, -1):
        members, number = prefixes[depth - 1]  # the prefix of each group's path at this depth, as an integer
        key = np.arange(graph.num_groups, 2 * graph.num_groups, dtype=np.int64)  # a group without one: its own
        key[members] = number
        same = key[pairs[:, 0]] == key[pairs[:, 1]]  # a superset of the deeper level's: prefixes of prefixes
        # (joined by union-find in numba: networkx's graph and components took 1.5 s of 4 s at 280,158 ops)
        lowest = _join_kernel(lowest, pairs[same & ~added])
        added |= same
        # numbered in the order of their lowest groups: a group that is its own lowest starts a unit
        unit = np.cumsum(lowest == np.arange(graph.num_groups), dtype=np.int64)[lowest] - 1
        count = int(unit.max()) + 1
        if count < target / 4:
            break
        label = unit
        if count <= target:
            break
    return label


def _module_prefixes(names: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each name's dotted prefixes as integers, one item a level ``d`` (from 1, item ``d - 1``).

    An item holds the names of more than ``d`` parts (their indices, ascending) and a number for each, the same
    for the same first ``d`` parts. As many items as the most dots in a name; a name of ``d`` parts or fewer
    (``""`` has none) is in none from item ``d - 1`` on. Each part is looked up once, then numbered by numpy (each
    prefix joined again at every level, as a string key: module_units took 0.59 s at 280,158 ops, 0.13 s now,
    best of 5 on a loaded 2-core VM). Memory: the parts, not the names times the levels.
    """
    # every name's parts, in order, split at once (a list a name made the collector sweep the heap: 0.8 s of 1.3)
    joined = ".".join(filter(None, names))
    flat = joined.split(".") if joined else []
    parts = {part: k for k, part in enumerate(dict.fromkeys(flat))}  # each distinct part's number
    part = np.fromiter(map(parts.__getitem__, flat), dtype=np.int64, count=len(flat))
    size = np.fromiter(map(str.count, names, repeat(".")), dtype=np.int64, count=len(names)) + 1
    size *= np.fromiter(map(bool, names), dtype=bool, count=len(names))  # "" has no part
    start = np.cumsum(size) - size  # where each name's parts begin in ``part``
    members = np.arange(len(names), dtype=np.int64)
    number = np.zeros(len(names), dtype=np.int64)  # each member's first d - 1 parts, as a number below len(names)
    prefixes = []
    for d in range(1, int(size.max(initial=0))):
        keep = size[members] > d
        members, number = members[keep], number[keep]
        _, number = np.unique(number * np.int64(len(parts)) + part[start[members] + d - 1], return_inverse=True)
        number = number.reshape(-1).astype(np.int64)
        prefixes.append((members, number))
    return prefixes


@njit(cache=True)
def _join_kernel(lowest, pairs):  # type: ignore[no-untyped-def]
    """:func:`module_units`'s components: ``lowest`` (each group's lowest group joined to it) with ``pairs`` joined.

    Union-find whose root is the lowest group of its component: a root links under the lower root.
    """
    root = lowest.copy()
    for k in range(pairs.shape[0]):
        u, v = pairs[k, 0], pairs[k, 1]
        while root[u] != u:
            root[u] = root[root[u]]
            u = root[u]
        while root[v] != v:
            root[v] = root[root[v]]
            v = root[v]
        if u < v:
            root[v] = u
        elif v < u:
            root[u] = v
    for g in range(root.shape[0]):  # in order: a group's root is settled before any higher group reads it
        root[g] = root[root[g]]
    return root


def metis_parts(
    graph: OpGraph, label: np.ndarray, unit_seconds: np.ndarray, num_parts: int, *, seed: int = 0
) -> np.ndarray:
    """Balanced METIS partition of the units ``label`` (of each colocation group) into ``num_parts``.

    By recursive bisection up to :data:`~gnplace.placers.metis.RECURSIVE_MAX_PARTS` parts, else by METIS's k-way
    method (coarsening's hundreds of parts): pymetis's own default rule, passed explicitly, so that a pymetis with
    another default makes the same parts.

    Returns:
        np.ndarray: part of every unit, numbered ``0..k-1`` (METIS may leave a part empty).
    """
    import pymetis

    from gnplace.placers.metis import RECURSIVE_MAX_PARTS, check_pymetis

    count = int(label.max()) + 1
    if count <= num_parts:
        return np.arange(count, dtype=np.int64)
    seconds = np.bincount(label, weights=unit_seconds, minlength=count)
    xadj, adjncy, eweights = _csr(label[graph.group[graph.edge_src]], label[graph.group[graph.edge_dst]],
                                  graph.edge_bytes.astype(np.float64), count)
    vweights = np.maximum(1, np.round(seconds / max(seconds.max(), 1e-300) * 1e6)).astype(np.int64)
    check_pymetis()
    options = pymetis.Options(seed=int(seed), contig=False)  # (pymetis refuses a numpy integer)
    with quiet_c_stdout():  # METIS prints notes on nearly empty bisections from C
        _, raw_parts = pymetis.part_graph(
            num_parts, pymetis.CSRAdjacency(xadj.tolist(), adjncy.tolist()), vweights=vweights.tolist(),
            eweights=eweights.tolist(), options=options, recursive=num_parts <= RECURSIVE_MAX_PARTS,
        )
    _, parts = np.unique(np.asarray(raw_parts, dtype=np.int64), return_inverse=True)
    return np.asarray(parts, dtype=np.int64)


def partition_units(
    graph: OpGraph, num_groups: int, unit_seconds: np.ndarray, *, seed: int = 0, modules: bool = False
) -> np.ndarray:
    """Part (``0..k-1``, ``k <= num_groups``) of every colocation group: heavy-edge matching, then METIS.

    Args:
        graph (OpGraph): the graph.
        num_groups (int): how many parts there may be at most.
        unit_seconds (np.ndarray): compute seconds of each colocation group, ``[num_groups_in_graph]``.
        seed (int, optional): METIS seed (default: 0).
        modules (bool, optional): merge module subtrees first (:func:`module_units`) (default: :obj:`False`).
    """
    start = module_units(graph, num_groups) if modules else None
    label = heavy_edge_matching(graph, unit_seconds, num_groups, start=start)
    if int(label.max(initial=-1)) + 1 <= num_groups:
        return label
    return metis_parts(graph, label, unit_seconds, num_groups, seed=seed)[label]


def _acyclic_nodes(graph: OpGraph, part_of_op: np.ndarray) -> np.ndarray:
    """Coarse node of each op: ops of one part, split wherever a producer's node is newer."""
    ptr, src, _ = graph.in_csr
    parts = int(part_of_op.max()) + 1 if part_of_op.size else 0
    return _acyclic_kernel(graph.topological_order(), np.asarray(part_of_op, dtype=np.int64), ptr, src, parts)


@njit(cache=True)
def _acyclic_kernel(order, part_of_op, ptr, src, parts):  # type: ignore[no-untyped-def]
    """:func:`_acyclic_nodes`'s loop: an op joins its part's open node unless a producer's node is newer."""
    node = np.full(part_of_op.shape[0], -1, dtype=np.int64)
    open_node = np.full(parts, -1, dtype=np.int64)  # the node each part adds its ops to, -1 before its first
    count = 0
    for v in order:
        current = open_node[part_of_op[v]]
        split = current < 0
        for i in range(ptr[v], ptr[v + 1]):
            if split:
                break
            split = node[src[i]] > current
        if split:
            current = count
            count += 1
            open_node[part_of_op[v]] = current
        node[v] = current
    return node


def coarsen(
    graph: OpGraph, num_groups: int, cluster: Cluster, *, seed: int = 0, modules: bool = False,
    cost_model: CostModel = DEFAULT_COSTS,
) -> Coarsening:
    """Coarsen ``graph`` to ``num_groups`` colocation groups (see the module docstring).

    Args:
        graph (OpGraph): the graph.
        num_groups (int): how many groups the coarse graph has at most (METIS may leave a part empty;
            fewer if the graph has fewer colocation groups).
        cluster (Cluster): the cluster whose device kinds the coarse op times are summed for.
        seed (int, optional): METIS seed (default: 0).
        modules (bool, optional): merge module subtrees before heavy edges (:func:`module_units`)
            (default: :obj:`False`).
        cost_model (CostModel, optional): the op times summed into the coarse nodes' measured seconds:
            the model of the timer that will time the placements (default: :data:`DEFAULT_COSTS`; Placeto's
            mode has no launch overhead).

    Examples:
        >>> from gnplace.toy import layered_graph
        >>> from gnplace.cluster import load_cluster
        >>> c = coarsen(layered_graph(400, seed=0), 20, load_cluster("k80x4"))
        >>> c.graph.num_groups, int(c.node_of_op.max()) + 1 == c.graph.num_ops
        (20, True)
    """
    _check_inputs(graph, cluster, seed, modules, cost_model)
    _check_count("num_groups", num_groups)
    times = cost_model.op_time_columns(graph, cluster)
    unit_seconds = _unit_seconds(graph, times[0])
    part_of_unit, node_of_op = _parts_and_nodes(graph, num_groups, unit_seconds, seed=seed, modules=modules)
    return _coarse_graph(graph, cluster, times, num_groups, part_of_unit, node_of_op)


def coarsen_within(
    graph: OpGraph, max_nodes: int, cluster: Cluster, *, seed: int = 0, modules: bool = False,
    cost_model: CostModel = DEFAULT_COSTS,
) -> Coarsening:
    """Coarsen ``graph`` to at most ``max_nodes`` coarse nodes, keeping every group while that suffices.

    The coarse graph of all the graph's groups comes first; while it has more than ``max_nodes`` nodes,
    the graph is coarsened again to ``min(G - 1, floor(0.95 G max_nodes / N))`` groups, ``G`` the last
    group count and ``N`` its node count. Only the last coarse graph is built: the same result as
    calling :func:`coarsen` with each count in turn.

    Args:
        graph (OpGraph): the graph.
        max_nodes (int): the most nodes the coarse graph may have (at one group it has one).
        cluster (Cluster): the cluster whose device kinds the coarse op times are summed for.
        seed (int, optional): METIS seed (default: 0).
        modules (bool, optional): merge module subtrees before heavy edges (default: :obj:`False`).
        cost_model (CostModel, optional): the op times summed into the coarse nodes (see :func:`coarsen`).

    Examples:
        >>> from gnplace.toy import layered_graph
        >>> from gnplace.cluster import load_cluster
        >>> coarsen_within(layered_graph(3000, seed=0), 500, load_cluster("k80x4")).graph.num_ops <= 500
        True
    """
    _check_inputs(graph, cluster, seed, modules, cost_model)
    _check_count("max_nodes", max_nodes)
    times = cost_model.op_time_columns(graph, cluster)
    unit_seconds = _unit_seconds(graph, times[0])
    groups = max(graph.num_groups, 1)
    part_of_unit, node_of_op = _parts_and_nodes(graph, groups, unit_seconds, seed=seed, modules=modules)
    while (nodes := int(node_of_op.max()) + 1 if graph.num_ops else 0) > max_nodes and groups > 1:
        groups = max(1, min(groups - 1, int(groups * max_nodes / nodes * 0.95)))
        part_of_unit, node_of_op = _parts_and_nodes(graph, groups, unit_seconds, seed=seed, modules=modules)
    return _coarse_graph(graph, cluster, times, groups, part_of_unit, node_of_op)


def _unit_seconds(graph: OpGraph, columns: np.ndarray) -> np.ndarray:
    """Seconds of each group on its fastest device, ``[num_groups]``, from op times by kind (``op_time_columns``).

    The least time of an op over the distinct columns is the least over all devices, the same bits: the whole
    [93,567, 4,096] matrix of 4,096 K80s took 1.3-7 s and 3 GiB to make, twice per policy placement.
    """
    return np.bincount(graph.group, weights=columns.min(axis=1), minlength=graph.num_groups)


def _check_inputs(graph: object, cluster: object, seed: object, modules: object, cost_model: object) -> None:
    """Refuse what is no graph or cluster, a METIS seed that is no whole number >= 0, and options of another type.

    ``modules`` must be a bool and ``cost_model`` a :class:`CostModel`. They were an AttributeError, and
    pymetis's "METIS options accept only integer values" (a seed of ``"a"`` or a numpy Generator), while
    ``seed=-1`` passed where every placer refuses it; ``modules="no"`` merged module subtrees, and
    ``cost_model="placeto"`` was an AttributeError.
    """
    check_graph_and_cluster(graph, cluster)
    if not is_whole(seed) or seed < 0:
        raise InvalidArgument(f"coarsening: seed must be a whole number >= 0 (METIS's seed), got {seed!r}")
    if not isinstance(modules, bool | np.bool_):
        raise InvalidArgument(f"coarsening: modules must be true or false, got {modules!r}")
    if not isinstance(cost_model, CostModel):
        raise InvalidArgument(f"coarsening: cost_model must be a CostModel (DEFAULT_COSTS, PLACETO_COSTS or a "
                              f"timer's cost_model), got {cost_model!r}")


def _check_count(name: str, value: object) -> None:
    """Refuse a count that is not a whole number >= 1 (a float reached pymetis, a bool was one group)."""
    if not is_whole(value) or value < 1:
        raise InvalidArgument(f"{name} must be a whole number >= 1, got {value!r}")


def _parts_and_nodes(
    graph: OpGraph, num_groups: int, unit_seconds: np.ndarray, *, seed: int, modules: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Part of every colocation group (at most ``num_groups``) and coarse node of every op."""
    part_of_unit = partition_units(graph, num_groups, unit_seconds, seed=seed, modules=modules)
    return part_of_unit, _acyclic_nodes(graph, part_of_unit[graph.group])


def node_output_bytes(graph: OpGraph, node_of_op: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bytes of the outputs of each coarse node: what leaves it, its largest internal output, its peak.

    An output leaves its node when an op of another node reads it (or nothing does: the step's
    results); the others are internal, read only inside the node. The first two are what the
    policies' output-bytes feature sums (:func:`node_written_bytes`); the peak is the node's memory
    (:func:`node_peak_bytes`).

    Returns:
        tuple: ``(leaving, largest internal, peak)``, bytes, each ``[num coarse nodes]`` float64.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> g = chain_graph(3)  # 4 MB outputs, a -> b -> c, all in one node: b reads a, c reads b
        >>> [float(x[0]) for x in node_output_bytes(g, np.zeros(3, dtype=np.int64))]
        [4000000.0, 4000000.0, 8000000.0]
    """
    leaves = _leaving_outputs(graph, node_of_op)
    return (*_leaving_and_largest(graph, node_of_op, leaves), node_peak_bytes(graph, node_of_op, leaves))


def node_written_bytes(graph: OpGraph, node_of_op: np.ndarray) -> np.ndarray:
    """Bytes each coarse node's outputs hold: those leaving it plus its largest internal one, ``[nodes]`` float64.

    The output-bytes feature of the policies (the shipped checkpoints were trained on it), not the
    node's memory, which :func:`node_peak_bytes` gives.
    """
    leaving, largest = _leaving_and_largest(graph, node_of_op, _leaving_outputs(graph, node_of_op))
    return leaving + largest


def node_peak_bytes(graph: OpGraph, node_of_op: np.ndarray, leaves: np.ndarray | None = None) -> np.ndarray:
    """The most bytes of its outputs each coarse node holds at once while it runs, ``[nodes]`` float64.

    Run in the graph's topological order, an internal output is live from its op to the last op of the
    node that reads it, and a leaving one from its op on; an op's output and the inputs it reads are
    live together. The largest internal output beside the leaving ones undercounts a node whose
    outputs wait for a later op of it (a coarse placement that fitted then ran out of memory once
    expanded).

    Args:
        graph (OpGraph): the graph.
        node_of_op (np.ndarray): coarse node of every op, ``[num_ops]``.
        leaves (np.ndarray, optional): which ops' outputs leave their node (default: computed).
    """
    return _node_peaks(graph, node_of_op, leaves).astype(np.float64)


def _node_peaks(graph: OpGraph, node_of_op: np.ndarray, leaves: np.ndarray | None = None) -> np.ndarray:
    """:func:`node_peak_bytes` in whole bytes (int64) where the graph's outputs sum to under 2**63, else float64.

    Summed in floats, the running sum past 2**53 bytes was rounded, and the error carried into every later node:
    an op of 2**53 bytes beside one of 1 left the next node 1 byte short of the output it sends on, a coarse graph
    that refused itself (an edge larger than its producer's output).
    """
    n = int(node_of_op.max()) + 1 if graph.num_ops else 0
    leaves = _leaving_outputs(graph, node_of_op) if leaves is None else leaves
    out = _summable(graph.out_bytes)
    position = np.empty(graph.num_ops, dtype=np.int64)
    position[graph.topological_order()] = np.arange(graph.num_ops)
    freed = position.copy()  # an internal output after its last reader (all in its node); a leaving one, at the end
    np.maximum.at(freed, graph.edge_src, position[graph.edge_dst])
    freed[leaves] = graph.num_ops
    # allocations (kind 0) before frees (kind 1) at one position: an op's output and its inputs are live together
    events_node = np.concatenate([node_of_op, node_of_op])
    events_at = np.concatenate([position, freed])
    events_kind = np.repeat([0, 1], graph.num_ops)
    order = np.lexsort((events_kind, events_at, events_node))
    live = np.cumsum(np.concatenate([out, -out])[order])  # each node's events are contiguous and sum to zero
    peak = np.zeros(n, dtype=out.dtype)
    np.maximum.at(peak, events_node[order], live)
    return peak


def _summable(values: np.ndarray) -> np.ndarray:
    """Whole numbers as int64 where all of them sum to under 2**63 (every partial sum exact), else as float64."""
    return values.astype(np.int64) if exact_sum(values) < 2**63 else values.astype(np.float64)


def _sums(index: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    """The sum of the whole numbers ``values`` at each of ``count`` indices: exact (int64) where all sum under 2**63.

    ``np.bincount`` sums in floats: a node's parameters of 2**53 + 1 bytes were 2**53. Past int64, float64 sums.
    """
    summable = _summable(values)
    if summable.dtype == np.float64:
        return np.bincount(index, weights=summable, minlength=count)
    total = np.zeros(count, dtype=np.int64)
    np.add.at(total, index, summable)
    return total


def _leaving_outputs(graph: OpGraph, node_of_op: np.ndarray) -> np.ndarray:
    """Whether each op's output leaves its coarse node (another node reads it, or nothing does), ``[num_ops]``."""
    leaves = np.zeros(graph.num_ops, dtype=bool)
    leaves[graph.edge_src[node_of_op[graph.edge_src] != node_of_op[graph.edge_dst]]] = True
    leaves |= np.bincount(graph.edge_src, minlength=graph.num_ops) == 0
    return leaves


def _leaving_and_largest(graph: OpGraph, node_of_op: np.ndarray, leaves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per coarse node, the bytes of its leaving outputs and of its largest internal one."""
    n = int(node_of_op.max()) + 1 if graph.num_ops else 0
    out = graph.out_bytes.astype(np.float64)
    leaving = np.bincount(node_of_op, weights=np.where(leaves, out, 0.0), minlength=n)
    largest = np.zeros(n)
    np.maximum.at(largest, node_of_op, np.where(leaves, 0.0, out))
    return leaving, largest


def _check_node_sizes(graph: OpGraph, num_groups: int, sums: dict[str, np.ndarray]) -> None:
    """Refuse coarse nodes whose sums (``sums``: what, e.g. ``"FLOP"``, to its sum per node) pass 2**62.

    The coarse graph refused itself, naming its node ``'c0'`` and a sum past :data:`~gnplace.limits.MAX_COUNT`
    (bytes wrapped negative). Edges carry at most their node's leaving outputs, so they stay under it too.

    Raises:
        UnsupportedGraph: naming the graph, the count of groups and the sum.
    """
    for what, values in sums.items():
        finite = values[np.isfinite(values)]  # (NaN seconds: an op not measured on that kind)
        if finite.size and finite.max() > MAX_COUNT:  # (a float sum past int64, before a cast wraps it negative)
            raise UnsupportedGraph(f"coarsening {graph.name!r} to {num_groups} groups: a coarse node would hold more "
                                   f"than 2**62 {what}, past the limit of any size")


def _coarse_graph(
    graph: OpGraph, cluster: Cluster, times: tuple[np.ndarray, np.ndarray], num_groups: int,
    part_of_unit: np.ndarray, node_of_op: np.ndarray,
) -> Coarsening:
    """The coarse graph of the parts ``part_of_unit`` and nodes ``node_of_op``.

    ``times``: op seconds by kind of device and each device's column (``CostModel.op_time_columns``).
    """
    columns, column = times
    part_of_op = part_of_unit[graph.group]
    n = int(node_of_op.max()) + 1 if graph.num_ops else 0

    # coarse edges: each producer sends its largest edge to a coarse node once
    cs, cd = node_of_op[graph.edge_src], node_of_op[graph.edge_dst]
    cross = cs != cd
    key = graph.edge_src[cross] * max(n, 1) + cd[cross]
    uniq, inverse = np.unique(key, return_inverse=True)
    per_tensor = np.zeros(uniq.shape[0], dtype=np.int64)
    np.maximum.at(per_tensor, inverse, graph.edge_bytes[cross])
    producer = uniq // max(n, 1)
    tensor_src, tensor_dst = node_of_op[producer], uniq % max(n, 1)
    pair = tensor_src * max(n, 1) + tensor_dst
    pairs, pair_inverse = np.unique(pair, return_inverse=True)
    pair_bytes = _sums(pair_inverse, per_tensor, pairs.shape[0])
    # what a node holds while it runs: its outputs live at once at their peak (the leaving ones stay after)
    peaks = _node_peaks(graph, node_of_op)
    params = _sums(node_of_op, graph.param_bytes, n)
    node_part = np.zeros(n, dtype=np.int64)
    node_part[node_of_op] = part_of_op
    first_op = np.full(n, graph.num_ops, dtype=np.int64)
    np.minimum.at(first_op, node_of_op, np.arange(graph.num_ops))
    cost_s = {}
    for k, dev in enumerate(cluster.devices):
        if dev.kind.lower() not in cost_s:  # (kinds are read without case: "K80" is "k80", which the cluster checks)
            cost_s[dev.kind.lower()] = np.bincount(node_of_op, weights=columns[:, column[k]], minlength=n)
    flops = np.bincount(node_of_op, weights=graph.flops, minlength=n)
    _check_node_sizes(graph, num_groups, {"bytes of outputs live at once": peaks,
                                          "bytes of parameters and optimizer state": params, "FLOP": flops,
                                          **{f"seconds on a {kind}": seconds for kind, seconds in cost_s.items()}})
    coarse = OpGraph(
        [f"c{i}" for i in range(n)],
        np.stack([pairs // max(n, 1), pairs % max(n, 1)], axis=1) if pairs.size else [],
        flops=flops,
        out_bytes=peaks,
        param_bytes=params,
        edge_bytes=pair_bytes,
        op_types=["cluster"] * n,
        phase=graph.phase[first_op],
        group=node_part,
        module=[graph.module[i] for i in first_op.tolist()],
        cost_s=cost_s,
        name=f"{graph.name}@{num_groups}",
        meta={**graph.meta, "coarsened_from": graph.name, "original_ops": graph.num_ops},
    )
    # the coarse graph numbers its groups by first appearance among its nodes; the parts, by unit: the same
    # numbers for the map, so that a unit's part is the group of its nodes (it was not, for a graph whose first
    # node held a later unit)
    group_of_part = np.zeros(int(part_of_unit.max(initial=-1)) + 1, dtype=np.int64)
    group_of_part[node_part] = coarse.group
    return Coarsening(coarse, node_of_op, group_of_part[part_of_unit], graph)
