"""What the placement policy sees of a graph and a cluster: the decision graph and its features.

A training graph of any size is first coarsened (:func:`gnplace.coarsen.coarsen`) into the
*decision graph*: at most ``max_nodes`` nodes (default 1,000), each a run of ops of one colocation
group, so that the policy decides once per group and a 100,000-op graph costs what a 1,000-op graph
does. Coarsening keeps every colocation group while the node count allows it, and merges groups by
heavy-edge matching and METIS only beyond that; a placement of the decision graph's groups expands
back to every op exactly (:meth:`PolicyInput.expand`).

Static features, computed once per (graph, cluster), each normalised so that a 200-op and a
100,000-op graph look alike (logarithms standardised over the graph, times over the critical path,
fractions):

* **node** (:data:`NODE_FEATURES`): ops, FLOP, output and parameter bytes (log, standardised), the
  phase mix and the histogram of canonical op kinds (:mod:`gnplace.opkinds`) of its ops, its compute
  time on the fastest device (log, standardised) and the spread across devices, topological depth,
  t-level and b-level (HEFT's upward rank) over the critical path, in and out degree;
* **edge** (:data:`EDGE_FEATURES`): bytes (log, standardised), mean transfer time over the mean
  node time, whether both ends share a group;
* **device** (:data:`DEVICE_FEATURES`): peak FLOP/s, memory bandwidth and capacity relative to the
  cluster's largest, its speed on this graph (total op time relative to the fastest device), its
  capacity over the graph's memory, the mean bandwidth and latency of its links to the others.

The dynamic features of a decision (:data:`DYNAMIC_FEATURES`: data arrival, earliest start and finish,
memory left, ...) are named here, beside the others a checkpoint records, and computed at each decision by
the placement MDP, :mod:`gnplace.rl.env`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from gnplace.cluster import Cluster, off_diagonal
from gnplace.coarsen import Coarsening, coarsen_within, node_written_bytes
from gnplace.exceptions import InvalidArgument, InvalidPlacement
from gnplace.graph import OpGraph
from gnplace.opkinds import OP_KINDS
from gnplace.placement import GraphKey
from gnplace.placers.groups import group_times, held_at_peak
from gnplace.placers.listsched import mean_comm_time, mean_link_costs, upward_rank
from gnplace.sim.costmodel import DEFAULT_COSTS, CostModel

__all__ = [
    "NODE_FEATURES", "EDGE_FEATURES", "DEVICE_FEATURES", "DYNAMIC_FEATURES", "PolicyInput", "decision_graph",
    "ops_alone", "build_policy_input", "standardise",
]

#: Names of the node feature columns, in order.
NODE_FEATURES: tuple[str, ...] = (
    "log_ops", "log_flops", "log_out_bytes", "log_param_bytes", "forward", "backward", "update",
    *(f"kind_{k}" for k in OP_KINDS),
    "log_time", "time_spread", "depth", "t_level", "b_level", "log_in_degree", "log_out_degree",
)
#: Names of the edge feature columns, in order.
EDGE_FEATURES: tuple[str, ...] = ("log_bytes", "transfer_time", "same_group")
#: Names of the device feature columns, in order.
DEVICE_FEATURES: tuple[str, ...] = (
    "log_peak_flops", "log_mem_bandwidth", "log_capacity", "speed", "capacity_over_need", "log_link_bandwidth",
    "log_link_latency",
)
#: Names of the dynamic features of a (decision, device) pair, in order, which the placement MDP computes at each
#: decision (:mod:`gnplace.rl.env`); ``eft_gap`` must stay first.
DYNAMIC_FEATURES: tuple[str, ...] = (
    "eft_gap",  # group's earliest finish there minus the best allowed one, in group work
    "est_gap",  # earliest start there minus the earliest anywhere, in group work
    "arrival_gap",  # when the inputs would all be there minus the earliest anywhere, in group work
    "log_slowdown",  # log of the group's seconds there over its seconds on its fastest device
    "memory_left",  # bytes left there after placing the group, over the device's capacity (clipped to [-1, 1])
    "parents_here",  # share of the bytes of the node's inputs produced there
    "load",  # work already there minus the mean over devices, over the graph's work per device
    "is_eft",  # whether the device is the earliest-finish choice
    "fits",  # whether the group fits there
)


@dataclass(frozen=True, eq=False)
class PolicyInput:
    """One (graph, cluster) as the policy and the placement MDP see it.

    Attributes:
        graph (OpGraph): the graph to place.
        cluster (Cluster): the devices.
        coarsening (Coarsening): the decision graph (``coarsening.graph``) and the map of every op
            of ``graph`` to its node.
        op_time (np.ndarray): seconds of each decision node on each device, ``[N, D]``.
        group_time (np.ndarray): seconds of each group on each device, ``[G, D]``.
        group_bytes (np.ndarray): bytes each group holds at the memory peak of the step run on the
            fastest device alone (:func:`~gnplace.placers.groups.held_at_peak`), ``[G]``.
        order (np.ndarray): the priority order of the nodes (upward rank, a topological order), ``[N]``.
        node_x (torch.Tensor): node features, ``[N, len(NODE_FEATURES)]`` float32.
        edge_index (torch.Tensor): decision-graph edges ``(producer, consumer)``, ``[2, E]`` int64.
        edge_x (torch.Tensor): edge features, ``[E, len(EDGE_FEATURES)]`` float32.
        node_group (torch.Tensor): group of each node, ``[N]`` int64.
        device_x (torch.Tensor): device features, ``[D, len(DEVICE_FEATURES)]`` float32.
    """

    graph: OpGraph
    cluster: Cluster
    coarsening: Coarsening
    op_time: np.ndarray
    group_time: np.ndarray
    group_bytes: np.ndarray
    order: np.ndarray
    node_x: torch.Tensor
    edge_index: torch.Tensor
    edge_x: torch.Tensor
    node_group: torch.Tensor
    device_x: torch.Tensor

    def __repr__(self) -> str:  # its arrays and tensors printed ran to 11,000 characters for bert_base
        return f"PolicyInput(graph={self.graph!r}, cluster={self.cluster!r}, decision={self.decision!r})"

    @property
    def decision(self) -> OpGraph:
        """The decision graph (coarse nodes; one colocation group per placement unit)."""
        return self.coarsening.graph

    @property
    def num_groups(self) -> int:
        """Number of placement decisions ``G``."""
        return self.decision.num_groups

    def expand(self, group_devices: np.ndarray) -> np.ndarray:
        """Device of every op of :attr:`graph` from a device per decision group, ``[..., G] -> [..., num_ops]``.

        Raises:
            InvalidPlacement: ``group_devices`` does not end in ``G`` entries (a longer one was cut to its first ``G``
                without a word, a shorter one an IndexError).
        """
        group_devices = np.asarray(group_devices, dtype=np.int64)
        if group_devices.ndim == 0 or group_devices.shape[-1] != self.num_groups:
            raise InvalidPlacement(f"a device per decision group takes {self.num_groups} entries (the last axis), got "
                                   f"shape {group_devices.shape}")
        return group_devices[..., self.decision.group[self.coarsening.node_of_op]]

    def groups_of(self, devices: np.ndarray) -> np.ndarray:
        """Device of every decision group from a placement of :attr:`graph` that keeps them whole, ``[G]``.

        Raises:
            InvalidPlacement: ``devices`` is not ``[num_ops]`` (one device, or a list of one, was spread over
                every group; another length was a numpy ValueError).
        """
        devices = np.asarray(devices, dtype=np.int64)
        if devices.shape != (self.graph.num_ops,):
            raise InvalidPlacement(f"a device per op of {self.graph.name!r} takes {self.graph.num_ops} entries, got "
                                   f"shape {devices.shape}")
        per_group = np.zeros(self.num_groups, dtype=np.int64)
        per_group[self.decision.group[self.coarsening.node_of_op]] = devices
        return per_group


def decision_graph(
    graph: OpGraph, cluster: Cluster, *, max_nodes: int = 1000, seed: int = 0, modules: bool = False,
    cost_model: CostModel = DEFAULT_COSTS,
) -> Coarsening:
    """Coarsen ``graph`` until it has at most ``max_nodes`` nodes, keeping every group while that suffices.

    With ``modules``, a graph that must be coarsened is merged along its module hierarchy first
    (whole branches, then cells: :func:`~gnplace.coarsen.module_units`), so each decision places a
    whole subtree of the model.
    A coarse node's seconds are its ops' under ``cost_model``, the timer's (Placeto's mode has no
    launch overhead).

    Examples:
        >>> from gnplace.toy import layered_graph
        >>> from gnplace.cluster import load_cluster
        >>> decision_graph(layered_graph(3000, seed=0), load_cluster("k80x4"), max_nodes=500).graph.num_ops <= 500
        True
    """
    return coarsen_within(graph, max_nodes, cluster, seed=seed, modules=modules, cost_model=cost_model)


def ops_alone(graph: OpGraph) -> Coarsening:
    """The decision graph with every op its own node and the groups kept: no coarsening.

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> g = mlp_training_graph(layers=3, width=64, batch=8)
        >>> ops_alone(g).graph is g
        True
    """
    return Coarsening(graph, np.arange(graph.num_ops), np.arange(graph.num_groups), graph)


def standardise(values: np.ndarray) -> np.ndarray:
    """``(v - mean) / std`` over the graph (0 where every value is the same), as every log feature is.

    Examples:
        >>> standardise(np.array([1.0, 3.0])).tolist(), standardise(np.array([2.0, 2.0])).tolist()
        ([-1.0, 1.0], [0.0, 0.0])
    """
    if values.size == 0:
        return values
    std = values.std()
    return (values - values.mean()) / std if std > 1e-12 else np.zeros_like(values)


def _t_level(graph: OpGraph, cost: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """Longest path from any source to each node's start (seconds), ``[N]``; ``comm`` in out-CSR order."""
    ptr, succ, _ = graph.out_csr
    level = np.zeros(graph.num_ops)
    for v in graph.topological_order().tolist():
        lo, hi = ptr[v], ptr[v + 1]
        if hi > lo:
            np.maximum.at(level, succ[lo:hi], level[v] + cost[v] + comm[lo:hi])
    return level


def _depth(graph: OpGraph) -> np.ndarray:
    """Topological depth of each node (sources 0), ``[N]``."""
    ptr, succ, _ = graph.out_csr
    depth = np.zeros(graph.num_ops)
    for v in graph.topological_order().tolist():
        lo, hi = ptr[v], ptr[v + 1]
        if hi > lo:
            np.maximum.at(depth, succ[lo:hi], depth[v] + 1)
    return depth


def _node_features(graph: OpGraph, co: Coarsening, op_time: np.ndarray, comm: np.ndarray) -> np.ndarray:
    coarse = co.graph
    n = coarse.num_ops
    node = co.node_of_op
    count = np.bincount(node, minlength=n).astype(np.float64)
    phase = np.zeros((n, 3))
    np.add.at(phase, (node, graph.phase.astype(np.int64)), 1.0)
    kind_index = {k: i for i, k in enumerate(OP_KINDS)}
    kinds = np.zeros((n, len(OP_KINDS)))
    # the stored canonical kind of every op (importers know more than the raw type), base form
    fine_kind = np.array([kind_index[k.removesuffix("_grad")] for k in graph.op_kinds], dtype=np.int64)
    np.add.at(kinds, (node, fine_kind), 1.0)
    share = count[:, None].clip(min=1.0)
    fastest = op_time.min(axis=1)
    mean_time = op_time.mean(axis=1)
    b_level = upward_rank(coarse, mean_time, comm)
    t_level = _t_level(coarse, mean_time, comm)
    critical = max(float((b_level + t_level).max()) if n else 0.0, 1e-12)
    depth = _depth(coarse)
    in_deg = np.bincount(coarse.edge_dst, minlength=n)
    out_deg = np.bincount(coarse.edge_src, minlength=n)
    # log_out_bytes: the outputs the node sends on plus its largest internal one, as the shipped checkpoints were
    # trained on (the coarse graph's own out_bytes, its memory, counts the internal peak since 2026-11-29)
    written = node_written_bytes(graph, node)
    columns = [
        standardise(np.log1p(count)),
        standardise(np.log1p(coarse.flops)),
        standardise(np.log1p(written)),
        standardise(np.log1p(coarse.param_bytes.astype(np.float64))),
        *(phase / share).T,
        *(kinds / share).T,
        standardise(np.log(fastest + 1e-12)),
        np.log(op_time.max(axis=1) / np.maximum(fastest, 1e-12) + 1e-12).clip(0.0, 10.0),
        depth / max(float(depth.max()) if n else 0.0, 1.0),
        t_level / critical,
        b_level / critical,
        np.log1p(in_deg),
        np.log1p(out_deg),
    ]
    return np.stack(columns, axis=1) if n else np.zeros((0, len(NODE_FEATURES)))


def _device_features(cluster: Cluster, op_time: np.ndarray, need: float) -> np.ndarray:
    """The :data:`DEVICE_FEATURES` of each device, ``[num_devices, len(DEVICE_FEATURES)]``.

    ``op_time`` is in seconds, ``[num_ops, num_devices]``, and ``need`` the bytes the graph holds at its peak.
    """
    d = cluster.num_devices
    flops = np.array([dev.effective_flops for dev in cluster.devices])
    bandwidth = np.array([dev.mem_bandwidth * dev.mem_efficiency for dev in cluster.devices])
    capacity = cluster.memory
    total = op_time.sum(axis=0) if op_time.size else np.ones(d)
    if d > 1:
        link_bw, link_lat = _link_means(cluster)
    else:
        link_bw, link_lat = np.ones(1), np.zeros(1)
    with np.errstate(divide="ignore", under="ignore"):  # a ratio under 1e-308 is floored, below, not warned of
        columns = [
            _log_share(flops),
            _log_share(bandwidth),
            _log_share(capacity),
            np.log(np.maximum(total.min(), 1e-300) / np.maximum(total, 1e-300)).clip(-10.0, 0.0),  # 0 s of work: 0
            np.log(capacity / max(need, 1.0)).clip(-10.0, 10.0),
            _log_share(link_bw),
            np.log1p(link_lat / 1e-5),
        ]
    return np.stack(columns, axis=1)


#: The floor of a device's log share of the cluster's largest rate or memory: ``e**-50`` (2e-22) of it is
#: none in effect, and a device of 1e-320 bytes beside 12 GiB ones was ``-inf`` (a NaN loss in a search).
LOG_SHARE_FLOOR = -50.0


def _log_share(values: np.ndarray) -> np.ndarray:
    """``log(values / values.max())``, at least :data:`LOG_SHARE_FLOOR` (the same values wherever it is above)."""
    return np.maximum(np.log(values / values.max()), LOG_SHARE_FLOOR)


def _link_means(cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    """Each device's mean bandwidth (bytes/s) and latency (seconds) to the others, ``[num_devices]`` each.

    A block of rows of :func:`~gnplace.cluster.off_diagonal`'s links (about 512 KiB) at a time, the bits of a
    mean per row (:func:`_mean` where a row's sum overflows): a Python loop over the rows, with a ``[D, D]`` mask,
    took 7-13 ms at 512 devices and 0.10-0.21 s at 4,096 on the loaded VM (1.3-2.1 ms and 0.10-0.14 s now), and
    the links gathered whole (two 134 MB copies) were slower still at 4,096.
    """
    d = cluster.num_devices
    link_bw, link_lat = np.empty(d), np.empty(d)
    rows = max(1, 2**16 // d)
    for top in range(0, d, rows):
        bottom = min(d, top + rows)
        links = off_diagonal(cluster.bandwidth, top, bottom)
        with np.errstate(over="ignore"):
            link_bw[top:bottom] = links.mean(axis=1)
        for k in np.flatnonzero(~np.isfinite(link_bw[top:bottom])).tolist():  # rates summing past a float
            link_bw[top + k] = _mean(links[k])
        link_lat[top:bottom] = off_diagonal(cluster.latency, top, bottom).mean(axis=1)
    return link_bw, link_lat


def _mean(values: np.ndarray) -> float:
    """The mean of positive finite ``values``, also where their sum overflows (three links of 1e308 B/s)."""
    with np.errstate(over="ignore"):
        mean = float(values.mean())
    if math.isfinite(mean):
        return mean
    top = float(values.max())
    return float((values / top).mean()) * top


def _priority_order(graph: OpGraph, rank: np.ndarray) -> np.ndarray:
    """Nodes by decreasing rank, ties by topological position: a topological order when ranks grow upstream."""
    position = np.empty(graph.num_ops, dtype=np.int64)
    position[graph.topological_order()] = np.arange(graph.num_ops)
    order = np.lexsort((position, -rank))
    # a zero-cost node can tie its producer; repair any producer-after-consumer by topological position
    placed = np.empty_like(position)
    placed[order] = np.arange(graph.num_ops)
    if graph.num_edges and np.any(placed[graph.edge_src] > placed[graph.edge_dst]):
        order = graph.topological_order().copy()
    return order


def _check_reused(graph: OpGraph, coarsening: Coarsening | None, held: np.ndarray | None) -> None:
    """Refuse a ``coarsening`` of another graph (other op names or edges) and ``held`` not ``[num_ops]`` bytes >= 0.

    A decision graph of another graph of as many ops gave features of the one and a map to the other's ops, whose
    placements split ``graph``'s colocation groups, without a word; of another size, or a ``held`` of another length,
    a numpy ValueError.
    """
    if coarsening is not None:
        if not isinstance(coarsening, Coarsening):
            raise InvalidArgument(f"build_policy_input: coarsening must be a Coarsening (decision_graph's), got "
                                  f"{type(coarsening).__name__}")
        original = coarsening.original
        if original is not graph and GraphKey.of(original).digest != GraphKey.of(graph).digest:
            raise InvalidArgument(f"build_policy_input: the coarsening is of graph {original.name!r} "
                                  f"({original.num_ops} ops), not of {graph.name!r} ({graph.num_ops} ops): make it "
                                  "with decision_graph(graph, ...)")
    if held is not None and np.shape(held) != (graph.num_ops,):
        raise InvalidArgument(f"build_policy_input: held takes the bytes of each of the {graph.num_ops} ops of "
                              f"{graph.name!r}, got shape {np.shape(held)}")
    if held is not None:  # NaN bytes made NaN device and decision features without a word; negative ones, room
        try:
            values = np.asarray(held, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidArgument(f"build_policy_input: held takes bytes (numbers) for the ops of {graph.name!r}, "
                                  f"got {np.asarray(held).dtype}") from None
        bad = np.flatnonzero(~(np.isfinite(values) & (values >= 0)))
        if bad.size:
            raise InvalidArgument(f"build_policy_input: held takes finite bytes of at least 0 for the ops of "
                                  f"{graph.name!r}, got {values[bad[0]]} for op {graph.node_names[bad[0]]!r}")


def build_policy_input(
    graph: OpGraph, cluster: Cluster, *, cost_model: CostModel = DEFAULT_COSTS, max_nodes: int = 1000, seed: int = 0,
    coarsening: Coarsening | None = None, held: np.ndarray | None = None, modules: bool = False,
) -> PolicyInput:
    """Coarsen ``graph`` for ``cluster`` and compute every static feature the policy and the MDP need.

    Args:
        graph (OpGraph): the graph to place.
        cluster (Cluster): the devices.
        cost_model (CostModel, optional): op and transfer estimates, usually the timer's
            (default: :data:`~gnplace.sim.costmodel.DEFAULT_COSTS`).
        max_nodes (int, optional): most nodes of the decision graph (default: 1,000).
        seed (int, optional): seed of the coarsening's METIS step (default: 0).
        coarsening (Coarsening, optional): a decision graph of ``graph`` already made by
            :func:`decision_graph` (for another set of the same devices, say), reused instead of
            coarsening again (default: None).
        held (np.ndarray, optional): bytes each op of ``graph`` holds at the memory peak,
            ``[num_ops]``, reused from :func:`~gnplace.placers.groups.held_at_peak` of the whole
            cluster when placing on a subset of its fastest devices (default: None: computed here,
            one simulation).
        modules (bool, optional): coarsen along the module hierarchy first (see
            :func:`decision_graph`) (default: :obj:`False`).

    Raises:
        InvalidArgument: ``coarsening`` is of another graph (other op names or edges), or ``held`` is not
            ``[num_ops]`` finite bytes of at least 0.

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> inp = build_policy_input(mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2"))
        >>> inp.num_groups, tuple(inp.node_x.shape) == (inp.decision.num_ops, len(NODE_FEATURES))
        (4, True)
    """
    _check_reused(graph, coarsening, held)
    co = coarsening if coarsening is not None else decision_graph(graph, cluster, max_nodes=max_nodes, seed=seed,
                                                                  modules=modules, cost_model=cost_model)
    coarse = co.graph
    op_time = cost_model.op_times(coarse, cluster)
    devices = np.arange(cluster.num_devices)
    links = mean_link_costs(cluster, devices)  # once: it reads every device pair (0.25 s at 4,096 devices)
    comm = mean_comm_time(cluster, devices, coarse.out_csr[2], links=links)
    g_time = group_times(coarse, op_time)
    # the bytes a group holds at the peak of a one-device step, not all its outputs at once (2.3-10x more)
    held = held_at_peak(graph, cluster) if held is None else np.asarray(held, dtype=np.float64)
    g_bytes = np.bincount(coarse.group[co.node_of_op], weights=held, minlength=coarse.num_groups)
    rank = upward_rank(coarse, op_time.mean(axis=1), comm)
    node_x = _node_features(graph, co, op_time, comm)
    src, dst = coarse.edge_src, coarse.edge_dst
    mean_node = max(float(op_time.min(axis=1).mean()) if coarse.num_ops else 0.0, 1e-12)
    edge_comm = mean_comm_time(cluster, devices, coarse.edge_bytes.astype(np.float64), links=links)
    edge_x = np.stack([
        standardise(np.log1p(coarse.edge_bytes.astype(np.float64))),
        np.log1p(edge_comm / mean_node),
        (coarse.group[src] == coarse.group[dst]).astype(np.float64),
    ], axis=1) if coarse.num_edges else np.zeros((0, len(EDGE_FEATURES)))
    device_x = _device_features(cluster, op_time, float(g_bytes.sum()))
    return PolicyInput(
        graph=graph, cluster=cluster, coarsening=co, op_time=op_time, group_time=g_time, group_bytes=g_bytes,
        order=_priority_order(coarse, rank),
        node_x=torch.as_tensor(node_x, dtype=torch.float32),
        edge_index=torch.as_tensor(np.stack([src, dst]) if coarse.num_edges else np.zeros((2, 0)), dtype=torch.long),
        edge_x=torch.as_tensor(edge_x, dtype=torch.float32),
        node_group=torch.as_tensor(np.array(coarse.group), dtype=torch.long),
        device_x=torch.as_tensor(device_x, dtype=torch.float32),
    )
