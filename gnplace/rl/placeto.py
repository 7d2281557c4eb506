"""Placeto (Addanki et al., NeurIPS 2019): progressive placement refined node by node, trained by REINFORCE.

Placeto does not build a placement from nothing: it starts from a complete placement and improves
it one decision at a time, asking its graph network (:class:`~gnplace.policy.placeto_gnn.PlacetoGNN`)
for the device of the node it visits, given an embedding of the whole current placement.

**Decisions.** Placements keep colocation groups whole, so the MDP runs on gnplace's decision graph
(:func:`~gnplace.policy.features.build_policy_input`, coarsened to at most ``max_nodes`` nodes, 128
by default: Placeto worked on grouped graphs of a few hundred nodes at most). Its nodes form a DAG,
over which the network runs; each step decides one decision *group* (a colocation group holds a
forward op and its gradient ops, so groups do not form a DAG), visited in the order of their first
node in the priority order ``inp.order`` (a topological order).

**MDP** (symbols of the paper). :math:`G` groups, :math:`D` devices, ``passes`` sweeps :math:`K`,
episode length :math:`L = K G`.

* :math:`p_0`: a uniformly random device per group (Placeto's start).
* state :math:`s_t`: the decision graph with the current placement :math:`p_t` as node features
  (:func:`~gnplace.policy.placeto_gnn.state_features`: run time in seconds on the node's device,
  output bytes, device one-hot, visited in this sweep, is current, start time in seconds relative to
  the current group's start), and the current group :math:`g_t`, the :math:`(t \\bmod G)`-th of
  the visit order.
* action :math:`a_t \\in \\{0..D-1\\}`: the device of :math:`g_t`;
  :math:`p_{t+1} = p_t[g_t \\leftarrow a_t]`.
* cost :math:`c(p) = T(p) / T(p_0) + \\lambda\\,\\mathrm{over}(p)`: the simulated (or measured) step
  seconds :math:`T` over the episode's starting step seconds, plus ``oom_penalty`` :math:`\\lambda`
  times :func:`~gnplace.sim.timer.overflow` (bytes over capacity summed over devices, over the
  largest capacity).
* reward :math:`r_t = c(p_t) - c(p_{t+1})`: the decrease of the cost made by step :math:`t`.
  Dividing by :math:`T(p_0)` makes rewards scale-free (a fraction of the starting step time), so one
  learning rate serves microsecond and second-long graphs and a family of graphs of different sizes.
* return-to-go :math:`R_t = \\sum_{t' \\ge t} \\gamma^{t' - t} r_{t'}`; undiscounted by default
  (:math:`\\gamma = 1`: the final placement is what counts, and then :math:`R_t = c(p_t) - c(p_L)`);
  ``gamma`` is a pretraining option (:class:`PlacetoHyper`).

**Loss** (REINFORCE, Williams 1992, with a baseline and an entropy bonus), over the :math:`B`
episodes of an update:

.. math::
    L(\\theta) = -\\frac{1}{BL}\\sum_{b,t}\\bigl(R_{bt} - \\bar R_t\\bigr)\\log\\pi_\\theta(a_{bt} \\mid s_{bt})
        - \\frac{c_H}{BL}\\sum_{b,t} H\\bigl(\\pi_\\theta(\\cdot \\mid s_{bt})\\bigr)

where the baseline :math:`\\bar R_t` is the mean return at step index :math:`t` over the most recent
``baseline_window`` episodes of the same graph (this update's included). Adam, learning rate decayed
geometrically from ``lr`` (1e-3) to ``lr_end`` (1e-4) over the run's updates, gradient norm clipped to
``clip`` (1.25).

**Costs in evaluations** (:class:`~gnplace.sim.timer.BudgetedTimer`): timing the :math:`B`
starting placements is :math:`B`; each step of the :math:`B` parallel episodes is :math:`B` more (the
reward needs :math:`T(p_{t+1})`); an update costs :math:`B (1 + L)`.

Choices where the paper is silent (besides those of the network, see
:mod:`gnplace.policy.placeto_gnn`):

* **start times** come from a cheap list schedule of the decision graph, not from the timer: nodes in
  ``inp.order``, each device runs one node at a time, a node starts when its device is free and its
  inputs have arrived (producer's end plus the cost model's transfer delay between the two devices,
  without link contention); seconds of nodes from ``inp.op_time``. Features therefore cost no
  evaluations, and only timer calls are counted;
* the baseline averages the last ``baseline_window`` (16) episodes of the graph *including* this
  update's, so the first update has one; the learning rate decays geometrically;
* an update plays :math:`B` episodes while they fit in the budget, the last one fewer if only those
  fit; fewer than :math:`1 + L` evaluations left over stay unspent;
* ``visited`` is reset at the start of every sweep when ``passes`` > 1;
* the memory penalty is ``oom_penalty`` times the overflow as a fraction of the largest device's
  capacity (:func:`~gnplace.sim.timer.overflow`), where the paper charges a fixed penalty per GB over
  the limit: like the step-time cost it is scale-free, so one ``oom_penalty`` serves small and large
  graphs and devices;
* after training, one greedy episode (argmax devices) from the best placement seen refines it, for
  one evaluation (its final placement is timed; greedy steps need no reward);
* a checkpoint with a budget of at most one episode (:math:`1 + L`) runs Placeto's zero-shot
  placement: one greedy episode from a random start, one evaluation; without a checkpoint, a budget
  below one episode buys random placements and the best is returned;
* if the best placement timed runs a device out of memory, it is repaired as every memory-aware
  placer's is (:func:`~gnplace.placers.groups.repair_memory`); those evaluations are outside the
  budget and reported apart (``last_repair_evaluations``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument, InvalidCheckpoint
from gnplace.graph import OpGraph
from gnplace.limits import MAX_DEVICES, MAX_DRAWN, MAX_LAYERS, MAX_WIDTH, check_budget, is_number, is_whole
from gnplace.placement import GraphKey, Placement, check_graph_and_cluster
from gnplace.progress import evaluation_bar
from gnplace.rl import comparator
from gnplace.rl.comparator import MAX_LR, check_finite_weights, check_update_bytes
from gnplace.rl.config import past_64_bits
from gnplace.seed import SeedLike, as_generator
from gnplace.sim.costmodel import CostModel
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BudgetedTimer, StepTimer, overflow
from gnplace.workers import torch_threads

if TYPE_CHECKING:  # torch and torch-geometric load on first use: the registry resolves this module lightly
    import torch

    from gnplace.policy.features import PolicyInput
    from gnplace.policy.placeto_gnn import PlacetoConfig, PlacetoGNN

__all__ = [
    "FORMAT", "VERSION", "MAX_DECISION_NODES", "MAX_PASSES", "PlacetoHyper", "PlacetoModel", "PlacetoProblem",
    "prepare_problem", "estimate_starts", "placeto_update_bytes", "check_delay_bytes", "PlacetoPlacer",
    "pretrain_placeto", "save_placeto", "load_placeto",
]

#: The ``format`` field of a Placeto checkpoint.
FORMAT = "gnplace-placeto"
#: The checkpoint version this gnplace writes and reads.
VERSION = 1
#: Most (state x node) rows per forward pass of an update: longer episodes are split into chunks.
_CHUNK_ROWS = 65536
#: Largest ``max_nodes``: an update keeps the state features of every step, ``passes * G * batch * N * (D + 5)``
#: float32 with ``G`` groups of ``N <= max_nodes`` nodes, quadratic in ``max_nodes`` (one update at 1,024 nodes,
#: 4 devices, 4 episodes: 0.15 GB of states, 1.2 GB more peak memory; 4,096 nodes would hold 2.4 GB of states).
MAX_DECISION_NODES = 1024
#: Largest ``passes``: the state features of an update grow linearly with the sweeps per episode.
MAX_PASSES = 4


def placeto_update_bytes(nodes: int, groups: int, devices: int, *, episodes: int, passes: int, hidden: int,
                         rounds: int, edges: int = 0) -> int:
    """Working set of one update (its episodes played, then the gradient step), bytes.

    .. math::
        16\\,P + 8\\,K G B N F + 4\\,\\min(K G, c)\\,B N\\,\\bigl((12 R + 24) H + 2 F\\bigr) + 8\\,E D^2,
        \\qquad F = D + 5,\\; c = \\max(1, \\lfloor 65536 / (B N) \\rfloor)

    :math:`P` weights of the network with their gradients and Adam's moments (float32); the state
    features of every step of the :math:`B` episodes (``[K G, B, N, F]`` float32, twice: the steps'
    list and its stacked copy); and the activations one chunk of the gradient step keeps for backward,
    per (state, node) row: :math:`R` rounds of two directions of message passing of width :math:`H` and
    the pooled embeddings, with slack for their gradients; and the transfer delays of the :math:`E`
    decision-graph edges between every two devices (:attr:`PlacetoProblem.in_delay`, ``[E, D, D]``
    float64, held through the run: 128 MiB an edge at 4,096 devices). One update at 1,024 nodes (540
    groups), 4 devices and the defaults grew the peak by 1.01 GiB (``ru_maxrss``), where this gives
    1.09; at 240 nodes (69 groups), 0.67 GiB against 0.94.

    Args:
        nodes (int): :math:`N`, nodes of the decision graph.
        groups (int): :math:`G`, decisions per sweep.
        devices (int): :math:`D`.
        episodes (int): :math:`B`, episodes per update.
        passes (int): :math:`K`, sweeps per episode.
        hidden (int): :math:`H`, the network's width.
        rounds (int): :math:`R`, rounds of message passing.
        edges (int, optional): :math:`E`, edges of the decision graph (default: 0, the delays not counted).

    Examples:
        >>> round(placeto_update_bytes(1024, 540, 4, episodes=4, passes=1, hidden=32, rounds=8) / 2**30, 2)
        1.09
    """
    n, g, d, b, k, h = nodes, groups, devices, episodes, passes, hidden
    f = d + 5
    weights = 2 * (f * h + h + h * h + h) + 2 * (2 * h * h + 2 * h) + (8 * h * h + h + h * d + d)  # f, g, head
    states = 8 * k * g * b * n * f
    rows = min(k * g, max(1, _CHUNK_ROWS // max(b * n, 1))) * b * n
    return 16 * weights + states + 4 * rows * ((12 * rounds + 24) * h + 2 * f) + _delay_bytes(edges, d)


def _delay_bytes(edges: int, devices: int) -> int:
    """Bytes of the transfer delays of ``edges`` edges between every two of ``devices`` (``[E, D, D]`` float64)."""
    return 8 * edges * devices * devices


def check_delay_bytes(who: str, inp: PolicyInput, max_nodes: int) -> None:
    """Refuse in one line a decision graph whose transfer delays would take more than ``comparator.MAX_UPDATE_BYTES``.

    :func:`prepare_problem` runs it on every path (training, pretraining, random and zero-shot placement)
    before allocating :attr:`PlacetoProblem.in_delay`, ``[E, D, D]`` float64: 128 MiB an edge at 4,096
    devices, whatever the budget.

    Args:
        who (str): who asks, the start of the message.
        inp (PolicyInput): the decision graph and the cluster (``E`` edges, ``D`` devices).
        max_nodes (int): the ``max_nodes`` that made the decision graph, for the message.

    Raises:
        InvalidArgument: one line with the delays' size and the limit in GiB, naming max_nodes and the devices.

    Examples:
        >>> from gnplace.toy import chain_graph, toy_cluster
        >>> from gnplace.policy.features import build_policy_input
        >>> check_delay_bytes("me", build_policy_input(chain_graph(3), toy_cluster(2)), 128)  # 2 edges: 128 bytes
    """
    edges, devices = inp.decision.num_edges, inp.cluster.num_devices
    delays, limit = _delay_bytes(edges, devices), comparator.MAX_UPDATE_BYTES
    if delays > limit:  # only fewer edges (max_nodes) or fewer devices shrink them
        raise InvalidArgument(f"{who}: the transfer delays of the {edges} decision-graph edges between {devices} "
                              f"devices would take about {delays / 2**30:.1f} GiB, over the {limit / 2**30:g} GiB "
                              f"limit; lower max_nodes (now {max_nodes}) or the number of devices")


def _check_update(who: str, inp: PolicyInput, hyper: PlacetoHyper, episodes: int) -> None:
    """Refuse in one line settings whose update on ``inp`` needs more than ``comparator.MAX_UPDATE_BYTES``.

    Needs only the decision graph: :func:`prepare_problem` runs it, after :func:`check_delay_bytes`, before
    allocating the edges' delays.
    """
    nodes, groups, edges = inp.decision.num_ops, inp.num_groups, inp.decision.num_edges
    devices = inp.cluster.num_devices
    estimate = placeto_update_bytes(nodes, groups, devices, episodes=episodes, passes=hyper.passes,
                                    hidden=hyper.hidden, rounds=hyper.rounds, edges=edges)
    lower = (f"episodes (now {episodes}), passes (now {hyper.passes}), max_nodes (now {hyper.max_nodes}), "
             f"hidden (now {hyper.hidden}) or rounds (now {hyper.rounds}) (over {nodes} nodes, {groups} groups "
             f"and {devices} devices)")
    check_update_bytes(who, estimate, lower)


def _as_float(value: Any) -> float:
    """``float(value)``, ``inf`` for an int past float's range (``float(10**400)`` raised OverflowError)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


@dataclass(frozen=True)
class PlacetoHyper:
    """Placeto's training hyperparameters (the paper's where it states them).

    Attributes:
        batch (int): parallel episodes per update, ``B`` (default: 4).
        hidden (int): embedding width per direction (default: 32).
        rounds (int): message-passing rounds per direction (default: 8).
        lr (float): Adam's initial learning rate (default: 1e-3).
        lr_end (float): learning rate at the last update (geometric decay) (default: 1e-4).
        entropy (float): entropy bonus :math:`c_H` (default: 0.01).
        clip (float): gradient-norm clip (default: 1.25).
        max_nodes (int): most nodes of the decision graph, at most :data:`MAX_DECISION_NODES` (default: 128).
        oom_penalty (float): :math:`\\lambda`, cost per unit of :func:`~gnplace.sim.timer.overflow` (default: 4.0).
        passes (int): sweeps over the groups per episode, :math:`K`, at most :data:`MAX_PASSES` (default: 1).
        baseline_window (int): episodes of a graph the baseline averages over (default: 16).
        gamma (float): discount :math:`\\gamma` of the return-to-go, in [0, 1] (default: 1.0, undiscounted).
    """

    batch: int = 4
    hidden: int = 32
    rounds: int = 8
    lr: float = 1e-3
    lr_end: float = 1e-4
    entropy: float = 0.01
    clip: float = 1.25
    max_nodes: int = 128
    oom_penalty: float = 4.0
    passes: int = 1
    baseline_window: int = 16
    gamma: float = 1.0

    def validate(self, who: str, names: Mapping[str, str] | None = None) -> None:
        """Raise :class:`~gnplace.exceptions.InvalidArgument` (one line, naming ``who``) on a bad value.

        ``names`` maps a field to the name its caller took it as, for the message (:class:`PlacetoPlacer`
        takes ``batch`` as ``episodes``).
        """
        def shown(name: str) -> str:
            return (names or {}).get(name, name)

        for name in ("batch", "hidden", "rounds", "max_nodes", "passes", "baseline_window"):
            value = getattr(self, name)
            if not is_whole(value) or value < 1:
                raise InvalidArgument(f"{who} needs {shown(name)} >= 1 (a whole number), got {value!r}")
        for name, most in (("batch", MAX_DRAWN), ("hidden", MAX_WIDTH), ("rounds", MAX_LAYERS),
                           ("max_nodes", MAX_DECISION_NODES), ("passes", MAX_PASSES)):
            if getattr(self, name) > most:  # refused, not allocated
                raise InvalidArgument(f"{who} needs {shown(name)} <= {most}, got {getattr(self, name)!r}")
        for name, low, strict in (("lr", 0.0, True), ("lr_end", 0.0, True), ("clip", 0.0, True),
                                  ("entropy", 0.0, False), ("oom_penalty", 0.0, False), ("gamma", 0.0, False)):
            value = getattr(self, name)
            ok = is_number(value) \
                and math.isfinite(_as_float(value)) and (float(value) > low if strict else float(value) >= low)
            if not ok:
                raise InvalidArgument(f"{who} needs {name} {'>' if strict else '>='} {low:g}, got {value!r}")
            wide = past_64_bits(value)  # entropy=10**20: an OverflowError
            if wide is not None:
                raise InvalidArgument(f"{who} needs {name} {wide}")
        for name in ("lr", "lr_end"):
            if float(getattr(self, name)) > MAX_LR:  # Adam's float32 step overflowed: a RuntimeError mid-run
                raise InvalidArgument(f"{who} needs {name} <= {MAX_LR:g}, got {getattr(self, name)!r}")
        if not 0.0 <= float(self.gamma) <= 1.0:
            raise InvalidArgument(f"{who} needs gamma in [0, 1], got {self.gamma!r}")


@dataclass
class PlacetoModel:
    """A Placeto network and how it was made.

    Attributes:
        network (PlacetoGNN): the policy (its ``config`` fixes the number of devices).
        meta (dict): plain values: graphs, cluster, episodes, evaluations, hyperparameters, ...
    """

    network: PlacetoGNN
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_devices(self) -> int:
        """Devices ``D`` the network places on."""
        return self.network.config.num_devices


# ---------------------------------------------------------------------------------------------- the problem
@dataclass(eq=False)
class PlacetoProblem:
    """One (graph, cluster) laid out for Placeto's MDP; built once by :func:`prepare_problem`.

    Attributes:
        inp (PolicyInput): the decision graph (``N`` nodes, ``G`` groups) and its maps to the graph.
        visit (np.ndarray): groups in visit order (by their first node in ``inp.order``), ``[G]``.
        members (torch.Tensor): nodes of each group, ``[G, N]`` bool.
        parents (torch.Tensor): direct producers of each group outside it, ``[G, N]`` bool.
        children (torch.Tensor): direct consumers of each group outside it, ``[G, N]`` bool.
        parallel (torch.Tensor): nodes neither ancestors nor descendants of the group, ``[G, N]`` bool.
        edge_index (torch.Tensor): decision-graph edges ``(producer, consumer)``, ``[2, E]``.
        node_group (np.ndarray): group of each node, ``[N]``.
        out_bytes (np.ndarray): bytes each node writes, ``[N]``.
        op_time (np.ndarray): seconds of each node on each device, ``[N, D]``.
        in_ptr (np.ndarray): in-edge CSR pointers, ``[N + 1]``.
        in_src (np.ndarray): producer of each in-edge, ``[E]``.
        in_delay (np.ndarray): seconds each in-edge's bytes take between two devices, ``[E, D, D]``.
    """

    inp: PolicyInput
    visit: np.ndarray
    members: torch.Tensor
    parents: torch.Tensor
    children: torch.Tensor
    parallel: torch.Tensor
    edge_index: torch.Tensor
    node_group: np.ndarray
    out_bytes: np.ndarray
    op_time: np.ndarray
    in_ptr: np.ndarray
    in_src: np.ndarray
    in_delay: np.ndarray

    @property
    def num_nodes(self) -> int:
        """Nodes ``N`` of the decision graph."""
        return int(self.node_group.shape[0])

    @property
    def num_groups(self) -> int:
        """Decisions ``G`` per sweep."""
        return int(self.visit.shape[0])

    @property
    def num_devices(self) -> int:
        """Devices ``D``."""
        return int(self.op_time.shape[1])


def prepare_problem(
    graph: OpGraph, cluster: Cluster, *, cost_model: CostModel, max_nodes: int = 128, seed: int = 0,
    check: Callable[[PolicyInput], None] | None = None, who: str = "prepare_problem",
) -> PlacetoProblem:
    """Coarsen ``graph`` into its decision graph and precompute what every MDP step reuses.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the devices.
        cost_model (CostModel): op seconds and the edges' transfer delays (seconds).
        max_nodes (int, optional): most nodes of the decision graph (default: 128).
        seed (int, optional): seed of the coarsening's METIS step (default: 0).
        check (callable, optional): called with the decision graph (its :class:`PolicyInput`) before the
            ``[E, D, D]`` transfer delays (8 bytes each) are allocated, to refuse settings in time
            (default: None).
        who (str, optional): who asks, the start of a refusal (default: ``"prepare_problem"``).

    Returns:
        PlacetoProblem: the decision graph and its precomputed arrays.

    Raises:
        InvalidArgument: if the transfer delays alone would take more than ``comparator.MAX_UPDATE_BYTES``
            (:func:`check_delay_bytes`), or as ``check`` raises; both before the delays are allocated.

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> from gnplace.sim.costmodel import DEFAULT_COSTS
        >>> p = prepare_problem(mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2"),
        ...                     cost_model=DEFAULT_COSTS)
        >>> p.num_groups, tuple(p.members.shape) == (p.num_groups, p.num_nodes)
        (4, True)
    """
    import torch

    from gnplace.coarsen import node_written_bytes
    from gnplace.policy.features import build_policy_input
    from gnplace.policy.placeto_gnn import relation_masks

    inp = build_policy_input(graph, cluster, cost_model=cost_model, max_nodes=max_nodes, seed=seed)
    check_delay_bytes(who, inp, max_nodes)  # before the delays, whatever is done next: 128 MiB an edge at 4,096 devices
    if check is not None:
        check(inp)
    dec = inp.decision
    n, g = dec.num_ops, inp.num_groups
    group = np.asarray(dec.group, dtype=np.int64)
    position = np.empty(n, dtype=np.int64)
    position[inp.order] = np.arange(n)
    first = np.full(g, n, dtype=np.int64)
    np.minimum.at(first, group, position)
    visit = np.argsort(first, kind="stable")
    members = np.zeros((g, n), dtype=bool)
    members[group, np.arange(n)] = True
    parents, children, parallel = relation_masks(n, dec.edge_src, dec.edge_dst, members)
    in_order = np.argsort(dec.edge_dst, kind="stable")  # the order of OpGraph.in_csr
    in_ptr, in_src, _ = dec.in_csr
    delays = cost_model.edge_delays(dec, cluster) if dec.num_edges else np.zeros((0,) + (cluster.num_devices,) * 2)
    written = node_written_bytes(graph, inp.coarsening.node_of_op)  # not its memory, the decision graph's out_bytes
    return PlacetoProblem(
        inp=inp, visit=visit,
        members=torch.as_tensor(members), parents=torch.as_tensor(parents), children=torch.as_tensor(children),
        parallel=torch.as_tensor(parallel),
        edge_index=torch.as_tensor(np.stack([dec.edge_src, dec.edge_dst]).astype(np.int64)),
        node_group=group, out_bytes=written,
        op_time=np.ascontiguousarray(inp.op_time, dtype=np.float64),
        in_ptr=np.ascontiguousarray(in_ptr, dtype=np.int64), in_src=np.ascontiguousarray(in_src, dtype=np.int64),
        in_delay=np.ascontiguousarray(delays[in_order], dtype=np.float64),
    )


@njit(cache=True)
def _list_schedule(  # type: ignore[no-untyped-def]
    order, in_ptr, in_src, in_delay, op_time, devices,
):
    count, n = devices.shape
    start = np.zeros((count, n))
    finish = np.zeros(n)
    ready = np.zeros(op_time.shape[1])
    for b in range(count):
        ready[:] = 0.0
        for i in range(n):
            v = order[i]
            d = devices[b, v]
            t = ready[d]  # the device is free
            for k in range(in_ptr[v], in_ptr[v + 1]):
                u = in_src[k]
                arrival = finish[u] + in_delay[k, devices[b, u], d]  # the input is here
                if arrival > t:
                    t = arrival
            start[b, v] = t
            finish[v] = t + op_time[v, d]
            ready[d] = finish[v]
    return start


def estimate_starts(problem: PlacetoProblem, node_devices: np.ndarray) -> np.ndarray:
    """Start of every decision node in seconds under each placement, by a list schedule, ``[B, N]``.

    Nodes run in ``inp.order``, one at a time per device, each once its device is free and its inputs
    have arrived (transfer delays of the cost model, no link contention). No timer is involved.

    Args:
        problem (PlacetoProblem): the prepared graph.
        node_devices (np.ndarray): device of each decision node, ``[B, N]``.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> from gnplace.sim.costmodel import DEFAULT_COSTS
        >>> p = prepare_problem(chain_graph(3), load_cluster("k80x2"), cost_model=DEFAULT_COSTS)
        >>> s = estimate_starts(p, np.zeros((1, p.num_nodes), dtype=np.int64))
        >>> bool(np.allclose(s[0, p.inp.order], np.concatenate([[0], np.cumsum(p.op_time[p.inp.order, 0])[:-1]])))
        True
    """
    devices = np.ascontiguousarray(node_devices, dtype=np.int64)
    return _list_schedule(  # type: ignore[no-any-return]
        np.ascontiguousarray(problem.inp.order, dtype=np.int64), problem.in_ptr, problem.in_src, problem.in_delay,
        problem.op_time, devices,
    )


# ---------------------------------------------------------------------------------------------- the MDP
@dataclass
class _Episodes:
    """What ``B`` parallel episodes of one graph recorded (training ones only hold states and rewards)."""

    final: np.ndarray  # device of each group at the end, [B, G]
    steps: np.ndarray  # group decided at each step, [L]
    states: torch.Tensor | None = None  # state features, [L, B, N, F]
    actions: np.ndarray | None = None  # [L, B]
    returns: np.ndarray | None = None  # R_t, [L, B]
    final_cost: np.ndarray | None = None  # c(p_L), [B]


def _state(problem: PlacetoProblem, groups: np.ndarray, visited: np.ndarray, current: int) -> torch.Tensor:
    """State features ``[B, N, F]`` of placements ``groups`` ``[B, G]`` while deciding group ``current``."""
    from gnplace.policy.placeto_gnn import state_features

    node_dev = groups[:, problem.node_group]  # [B, N]
    run_time = problem.op_time[np.arange(problem.num_nodes)[None, :], node_dev]  # seconds on its device
    start = estimate_starts(problem, node_dev)  # seconds
    return state_features(run_time, problem.out_bytes, node_dev, visited[:, problem.node_group],
                          problem.members[current].numpy(), start, problem.num_devices)


def _masks(problem: PlacetoProblem, steps: np.ndarray, repeat: int) -> tuple[torch.Tensor, ...]:
    """The four relation masks of each step's group, each row repeated ``repeat`` times, ``[S * repeat, N]``."""
    import torch

    index = torch.as_tensor(np.repeat(steps, repeat))
    return tuple(m[index] for m in (problem.members, problem.parents, problem.children, problem.parallel))


def _cost(step: np.ndarray, peak: np.ndarray, capacity: np.ndarray, base: np.ndarray, penalty: float) -> np.ndarray:
    """c(p) = T(p) / T(p_0) + lambda * over(p), ``[B]`` (seconds over seconds, bytes over bytes)."""
    return step / base + penalty * overflow(peak, capacity)


def _play(
    net: PlacetoGNN, problem: PlacetoProblem, start: np.ndarray, *, passes: int, rng: np.random.Generator,
    greedy: bool = False, timer: BudgetedTimer | None = None, penalty: float = 0.0, gamma: float = 1.0,
    on_timed: Callable[[], None] | None = None,
) -> _Episodes:
    """Play ``B`` episodes from ``start`` ``[B, G]``; with a ``timer``, time every step and record the rewards."""
    import torch

    inp = problem.inp
    groups = np.array(start, dtype=np.int64, copy=True)
    count, g = groups.shape
    length = g * passes
    steps = np.tile(problem.visit, passes)
    training = timer is not None
    states: list[torch.Tensor] = []
    actions = np.zeros((length, count), dtype=np.int64)
    costs = np.zeros((length + 1, count))
    base = np.ones(count)
    capacity = inp.cluster.memory

    def timed() -> np.ndarray:
        assert timer is not None
        result = timer.time_batch(inp.graph, inp.cluster, inp.expand(groups))
        if on_timed is not None:
            on_timed()
        return _cost(result.step_time, result.peak_memory, capacity, base, penalty)

    if timer is not None:
        first = timer.time_batch(inp.graph, inp.cluster, inp.expand(groups))  # T(p_0): B evaluations
        if on_timed is not None:
            on_timed()
        base = np.where(first.step_time > 0, first.step_time, 1.0)
        costs[0] = _cost(first.step_time, first.peak_memory, capacity, base, penalty)  # c(p_0)
    visited = np.zeros((count, g), dtype=bool)
    for t in range(length):
        if t % g == 0:
            visited[:] = False  # a new sweep
        current = int(steps[t])  # g_t
        x = _state(problem, groups, visited, current)  # s_t
        masks = _masks(problem, steps[t:t + 1], count)
        with torch.no_grad():
            logits = net(x, problem.edge_index, *masks)
        action: np.ndarray
        if greedy:
            action = logits.argmax(dim=-1).numpy()
        else:  # a_t ~ pi_theta(. | s_t)
            cdf = torch.softmax(logits.double(), dim=-1).cumsum(dim=-1).numpy()
            drawn = (cdf < rng.random((count, 1))).sum(axis=1)
            action = np.minimum(drawn, problem.num_devices - 1)
        groups[:, current] = action  # p_{t+1} = p_t[g_t <- a_t]
        visited[:, current] = True
        if training:
            states.append(x)
            actions[t] = action
            costs[t + 1] = timed()  # c(p_{t+1}): B evaluations
    if not training:
        return _Episodes(final=groups, steps=steps)
    rewards = costs[:-1] - costs[1:]  # r_t = c(p_t) - c(p_{t+1})
    returns = np.zeros_like(rewards)
    running = np.zeros(count)
    for t in range(length - 1, -1, -1):  # R_t = sum_{t' >= t} gamma^(t' - t) r_t'
        running = rewards[t] + gamma * running
        returns[t] = running
    return _Episodes(final=groups, steps=steps, states=torch.stack(states), actions=actions, returns=returns,
                     final_cost=costs[-1].copy())


class _Learner:
    """REINFORCE with a per-step baseline: the optimiser, the learning-rate schedule, the baselines."""

    def __init__(self, net: PlacetoGNN, hyper: PlacetoHyper, total_updates: int) -> None:
        import torch

        self.net = net
        self.hyper = hyper
        self.total_updates = max(int(total_updates), 1)
        self.updates = 0
        self.optimizer = torch.optim.Adam(net.parameters(), lr=hyper.lr)
        self.history: dict[int, deque[np.ndarray]] = {}

    def learning_rate(self) -> float:
        """Geometric decay from ``lr`` at the first update to ``lr_end`` at the last."""
        h = self.hyper
        frac = self.updates / max(self.total_updates - 1, 1)
        return float(h.lr * (h.lr_end / h.lr) ** min(frac, 1.0))

    def update(self, problem: PlacetoProblem, episodes: _Episodes, key: int) -> dict[str, float]:
        """One gradient step on the episodes of one graph (``key`` names the graph's baseline)."""
        import torch

        assert episodes.states is not None and episodes.actions is not None and episodes.returns is not None
        h = self.hyper
        window = self.history.setdefault(key, deque(maxlen=h.baseline_window))
        window.extend(episodes.returns.T)  # each episode's returns, [L]
        baseline = np.mean(np.stack(list(window)), axis=0)  # \bar R_t over recent episodes of this graph
        advantage = torch.as_tensor(episodes.returns - baseline[:, None], dtype=torch.float32)  # R_t - \bar R_t
        length, count = episodes.actions.shape
        actions = torch.as_tensor(episodes.actions)
        lr = self.learning_rate()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad()
        chunk = max(1, _CHUNK_ROWS // max(count * problem.num_nodes, 1))
        total = float(length * count)
        pg_sum, ent_sum = 0.0, 0.0
        for t0 in range(0, length, chunk):
            t1 = min(t0 + chunk, length)
            x = episodes.states[t0:t1].reshape(-1, *episodes.states.shape[2:])
            logits = self.net(x, problem.edge_index, *_masks(problem, episodes.steps[t0:t1], count))
            logp = torch.log_softmax(logits, dim=-1).view(t1 - t0, count, -1)
            chosen = logp.gather(-1, actions[t0:t1, :, None]).squeeze(-1)  # log pi_theta(a_t | s_t)
            # ALGO LOGIC: score-function gradient weighted by the return-to-go over its baseline
            pg = -(advantage[t0:t1] * chosen).sum() / total
            ent = -(logp.exp() * logp).sum(-1).sum() / total  # H(pi_theta(. | s_t))
            (pg - h.entropy * ent).backward()
            pg_sum, ent_sum = pg_sum + float(pg.detach()), ent_sum + float(ent.detach())
        norm = torch.nn.utils.clip_grad_norm_(self.net.parameters(), h.clip)
        self.optimizer.step()
        self.updates += 1
        # a nan network samples device 0 everywhere ((nan < u).sum() is 0) and trains on: say so instead
        check_finite_weights("placeto", self.net.parameters(), self.updates, f"placeto.lr, now {h.lr:g}")
        return {"losses/policy": pg_sum, "losses/entropy": ent_sum, "grad_norm": float(norm), "lr": lr}


def _network(config: PlacetoConfig, seed: int, state: dict[str, torch.Tensor] | None = None) -> PlacetoGNN:
    from gnplace.policy.placeto_gnn import PlacetoGNN
    from gnplace.seed import seeded_torch

    with seeded_torch(seed):
        net = PlacetoGNN(config)
    if state is not None:
        net.load_state_dict(state)
    return net


# ---------------------------------------------------------------------------------------------- the placer
class PlacetoPlacer:
    """Placeto: a graph network refines a random placement group by group, trained by REINFORCE on the graph.

    Trains a fresh policy (or fine-tunes the one in ``checkpoint``) on the graph for ``budget``
    timer evaluations and returns the best placement timed; see the module docstring for the MDP,
    the reward and the loss. With a checkpoint and a budget of one episode or less (``1 + K G`` for
    ``G`` groups and ``K`` = ``passes``), it places zero-shot: one greedy episode from a random start,
    one evaluation.

    Args:
        budget (int, optional): timer evaluations in all, 1 to :data:`~gnplace.limits.MAX_BUDGET` (default: 2000).
        episodes (int, optional): parallel episodes per update, ``B`` (default: 4).
        hidden (int, optional): embedding width per direction (default: 32).
        rounds (int, optional): message-passing rounds per direction (default: 8).
        lr (float, optional): Adam's initial learning rate (default: 1e-3).
        lr_end (float, optional): its value at the last update, geometric decay (default: 1e-4).
        entropy (float, optional): entropy bonus :math:`c_H` (default: 0.01).
        clip (float, optional): gradient-norm clip (default: 1.25).
        max_nodes (int, optional): most nodes of the decision graph, 1 to :data:`MAX_DECISION_NODES` (default: 128).
        oom_penalty (float, optional): :math:`\\lambda`, cost per unit of memory overflow (default: 4.0).
        passes (int, optional): sweeps over the groups per episode, 1 to :data:`MAX_PASSES` (default: 1).
        checkpoint (str, optional): a Placeto checkpoint (:func:`save_placeto`) to start from; its
            network shape replaces ``hidden`` and ``rounds`` (values given are still checked), and it places
            only on clusters of its number of devices (default: ``None``, a fresh network).
        timer (StepTimer, optional): times placements (default: ``Simulator()``).
        progress (bool or None, optional): a progress bar over evaluations (default: on a terminal).

    After :meth:`place`: ``last_evaluations`` (within the budget), ``last_repair_evaluations``
    (memory repair, outside it), ``last_history`` (``(evaluations, best step seconds)`` after each
    timed batch), ``last_step`` (seconds), ``last_updates``, ``last_episodes``.

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> placer = PlacetoPlacer(budget=60, hidden=8, rounds=2)
        >>> placer.place(mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2"), seed=0).devices.shape
        (20,)
        >>> placer.last_evaluations <= 60, placer.last_updates >= 1
        (True, True)
    """

    name = "placeto"
    learned = True
    #: Changes when results under the same options change. 1 (2026-12-04): a best placement over memory is repaired by
    #: the memory repair of that day (:func:`~gnplace.placers.groups.repair_memory`); one that fitted is as before.
    revision = "1"
    accepts = frozenset({"timer", "budget", "checkpoint"})
    checkpoint_format = FORMAT  # saved by save_placeto, read by load_placeto

    def __init__(
        self, budget: int = 2000, episodes: int = 4, hidden: int = 32, rounds: int = 8, lr: float = 1e-3,
        lr_end: float = 1e-4, entropy: float = 0.01, clip: float = 1.25, max_nodes: int = 128,
        oom_penalty: float = 4.0, passes: int = 1, checkpoint: str | None = None, timer: StepTimer | None = None,
        progress: bool | None = None,
    ) -> None:
        who = type(self).__name__
        self.budget = check_budget(budget, who)  # at most MAX_BUDGET: a typo is not a search of years
        self.checkpoint = None if checkpoint is None else str(checkpoint)
        self._model: PlacetoModel | None = None
        names = {"batch": "episodes"}  # its option is episodes, the field batch
        self.hyper = PlacetoHyper(batch=episodes, hidden=hidden, rounds=rounds, lr=lr, lr_end=lr_end,
                                  entropy=entropy, clip=clip, max_nodes=max_nodes, oom_penalty=oom_penalty,
                                  passes=passes)
        self.hyper.validate(who, names)  # the options as given: a checkpoint's shape replaced a bad hidden unseen
        if self.checkpoint is not None:
            self._model = load_placeto(self.checkpoint)  # raises InvalidCheckpoint before any work
            config = self._model.network.config
            self.hyper = replace(self.hyper, hidden=config.hidden, rounds=config.rounds)
            self.hyper.validate(who, names)
        self.timer = timer or Simulator()
        self.progress = progress
        self._reset()

    def __repr__(self) -> str:
        h = self.hyper
        return (f"PlacetoPlacer(budget={self.budget}, episodes={h.batch}, hidden={h.hidden}, rounds={h.rounds}, "
                f"checkpoint={self.checkpoint!r})")

    def _reset(self) -> None:
        self.last_evaluations = 0
        self.last_repair_evaluations = 0
        self.last_history: list[tuple[int, float]] = []
        self.last_step: float | None = None
        self.last_updates = 0
        self.last_episodes = 0

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Train on ``graph`` for the budget and return the best placement timed.

        Args:
            graph (OpGraph): the graph.
            cluster (Cluster): the devices.
            seed (int, np.random.Generator or None, optional): seed of the coarsening, the network's
                initial weights, the starting placements and the sampled actions (default: None).

        Returns:
            Placement: the best placement timed (every colocation group on one device).

        Raises:
            InvalidArgument: if the checkpoint was trained for another number of devices than ``cluster`` has,
                training diverged (the network's weights not finite: lower ``lr``), one update would need
                more than ``comparator.MAX_UPDATE_BYTES`` (:func:`placeto_update_bytes`; refused before training),
                or, whatever the budget, the decision graph's transfer delays alone would
                (:func:`check_delay_bytes`; refused before they are allocated).
        """
        check_graph_and_cluster(graph, cluster)

        from gnplace.policy.placeto_gnn import PlacetoConfig

        self._reset()
        d = cluster.num_devices
        model = self._model
        if model is not None and model.num_devices != d:  # before the shortcuts: one device is a mismatch too
            raise InvalidArgument(
                f"placeto checkpoint {self.checkpoint} was trained for {model.num_devices} devices, cluster "
                f"{cluster.name!r} has {d} (Placeto's output head has one logit per device)"
            )
        if graph.num_ops == 0 or d == 1:
            return Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster, GraphKey.of(graph))
        seed_value = int(as_generator(seed).integers(2**31 - 1))
        h = self.hyper
        rng = np.random.default_rng(seed_value)
        problem = prepare_problem(graph, cluster, cost_model=self.timer.cost_model, max_nodes=h.max_nodes,
                                  seed=seed_value, check=self._check_training, who=type(self).__name__)
        g = problem.num_groups
        per_episode = 1 + g * h.passes
        config = PlacetoConfig(num_devices=d, hidden=h.hidden, rounds=h.rounds)
        net = _network(config, seed_value, None if model is None else model.network.state_dict())
        counted = BudgetedTimer(self.timer, self.budget)
        with torch_threads(1), evaluation_bar(f"{self.name} {graph.name}", self.budget, self.progress) as advance_to:
            if model is not None and self.budget <= per_episode:
                # Placeto's zero-shot placement: one greedy episode from a random start
                net.eval()
                start = rng.integers(d, size=(1, g))
                final = _play(net, problem, start, passes=h.passes, rng=rng, greedy=True).final
                counted.time_batch(graph, cluster, problem.inp.expand(final))
                self.last_episodes = 1
            elif self.budget < per_episode:
                # not one episode affordable: the best of the random starting placements
                counted.time_batch(graph, cluster, problem.inp.expand(rng.integers(d, size=(self.budget, g))))
            else:
                self._train(net, problem, counted, rng, per_episode, advance_to)
            advance_to(counted.evaluations)
        assert counted.best is not None
        self.last_evaluations = counted.evaluations
        trace = counted.trace
        feasible = [(e, s) for e, over, s in trace if over == 0]
        self.last_history = feasible or [(e, s) for e, _, s in trace]
        self.last_step = counted.best_key[1]
        best = counted.best
        if counted.best_key[0] > 0:  # nothing timed fits: move groups off overflowing devices
            best = self._repair(graph, cluster, best)
        return Placement(best, cluster, GraphKey.of(graph))

    def _check_training(self, inp: PolicyInput) -> None:
        """Refuse (one line) an update past ``comparator.MAX_UPDATE_BYTES`` if :meth:`place` will train on ``inp``."""
        h = self.hyper
        per_episode = 1 + inp.num_groups * h.passes
        zero_shot = self._model is not None and self.budget == per_episode
        if self.budget >= per_episode and not zero_shot:  # it will train
            _check_update(type(self).__name__, inp, h, min(h.batch, self.budget // per_episode))

    def _train(self, net: PlacetoGNN, problem: PlacetoProblem, counted: BudgetedTimer, rng: np.random.Generator,
               per_episode: int, advance_to: Callable[[int], None]) -> None:
        """REINFORCE updates while an episode fits in the budget, then one greedy episode from the best."""
        h = self.hyper
        d, g = problem.num_devices, problem.num_groups
        reserve = 1 if self.budget >= per_episode + 1 else 0  # the final greedy episode's evaluation
        plan: list[int] = []
        left = self.budget - reserve
        while left >= per_episode:
            plan.append(min(h.batch, left // per_episode))
            left -= plan[-1] * per_episode
        learner = _Learner(net, h, len(plan))
        for count in plan:
            net.train()
            start = rng.integers(d, size=(count, g))  # p_0: uniformly random
            played = _play(net, problem, start, passes=h.passes, rng=rng, timer=counted, penalty=h.oom_penalty,
                           gamma=h.gamma,
                           on_timed=lambda: advance_to(counted.evaluations))
            learner.update(problem, played, key=0)
            self.last_episodes += count
        self.last_updates = learner.updates
        remaining = counted.remaining
        if reserve and remaining is not None and remaining >= 1 and counted.best is not None:
            net.eval()
            start = problem.inp.groups_of(counted.best)[None, :]
            final = _play(net, problem, start, passes=h.passes, rng=rng, greedy=True).final
            counted.time_batch(problem.inp.graph, problem.inp.cluster, problem.inp.expand(final))
            self.last_episodes += 1

    def _repair(self, graph: OpGraph, cluster: Cluster, devices: np.ndarray) -> np.ndarray:
        """The best placement, groups moved off overflowing devices if that fits (evaluations outside the budget)."""
        return comparator.repair_best(self, graph, cluster, devices)


# ---------------------------------------------------------------------------------------------- pretraining
def _hyper(who: str, hyper: dict[str, Any]) -> PlacetoHyper:
    names = {f.name for f in fields(PlacetoHyper)}
    unknown = sorted(set(hyper) - names)
    if unknown:
        raise InvalidArgument(f"{who}: unknown option(s) {', '.join(unknown)} (choose from {', '.join(sorted(names))})")
    result = PlacetoHyper(**hyper)
    result.validate(who)
    return result


def pretrain_placeto(
    graphs: Sequence[OpGraph], cluster: Cluster, *, episodes: int, seed: int = 0, timer: StepTimer | None = None,
    progress: bool | None = None, **hyper: Any,
) -> PlacetoModel:
    """Train one Placeto policy across a family of graphs on ``cluster``: Placeto's generalisation setting.

    Updates cycle through the graphs in order; each plays ``batch`` episodes of one graph (the last
    may play fewer) and takes one REINFORCE step, with a baseline per graph; the learning rate decays
    over the run. Deterministic under ``seed``.

    Args:
        graphs (Sequence[OpGraph]): the training graphs (each with at least one op).
        cluster (Cluster): the devices (at least 2; the network's head is fixed to their number).
        episodes (int): episodes in all.
        seed (int, optional): seed of the coarsening, the weights, the starts and the actions (default: 0).
        timer (StepTimer, optional): times placements (default: ``Simulator()``).
        progress (bool or None, optional): a progress bar over episodes (default: on a terminal).
        **hyper: fields of :class:`PlacetoHyper` (``batch``, ``hidden``, ``rounds``, ``lr``, ...).

    Returns:
        PlacetoModel: the network (in evaluation mode) and its meta (graphs, cluster, episodes,
        updates, evaluations, seed, hyperparameters, mean final cost per graph).

    Raises:
        InvalidArgument: on no graphs, an empty graph, a one-device cluster, a bad option, or options whose
            update on one of the graphs would need more than ``comparator.MAX_UPDATE_BYTES``
            (:func:`placeto_update_bytes`, the transfer delays counted first by :func:`check_delay_bytes`;
            refused before training).

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> graphs = [mlp_training_graph(layers=2, width=64, batch=8), mlp_training_graph(layers=3, width=64, batch=8)]
        >>> model = pretrain_placeto(graphs, load_cluster("k80x2"), episodes=4, batch=2, hidden=8, rounds=2)
        >>> model.num_devices, model.meta["updates"]
        (2, 2)
    """
    from gnplace.policy.placeto_gnn import PlacetoConfig

    who = "pretrain_placeto"
    h = _hyper(who, hyper)
    if not is_whole(episodes) or episodes < 1:
        raise InvalidArgument(f"{who} needs episodes >= 1, got {episodes!r}")
    if not graphs:
        raise InvalidArgument(f"{who} needs at least one graph")
    empty = [g.name for g in graphs if g.num_ops == 0]
    if empty:
        raise InvalidArgument(f"{who}: graph {empty[0]!r} has no ops")
    d = cluster.num_devices
    if d < 2:
        raise InvalidArgument(f"{who} needs a cluster of at least 2 devices, {cluster.name!r} has {d}")
    if not is_whole(seed):
        raise InvalidArgument(f"{who} needs an int seed, got {seed!r}")
    timer = timer or Simulator()
    seed_value = int(seed)
    rng = np.random.default_rng(seed_value)
    batch = min(h.batch, int(episodes))

    def check(inp: PolicyInput) -> None:  # before the graph's delays are allocated, the network built or a step played
        _check_update(who, inp, h, batch)

    problems = [prepare_problem(g, cluster, cost_model=timer.cost_model, max_nodes=h.max_nodes, seed=seed_value,
                                check=check, who=who) for g in graphs]
    plan = [min(h.batch, episodes - k) for k in range(0, int(episodes), h.batch)]
    net = _network(PlacetoConfig(num_devices=d, hidden=h.hidden, rounds=h.rounds), seed_value)
    learner = _Learner(net, h, len(plan))
    counted = BudgetedTimer(timer)
    final_cost: list[list[float]] = [[] for _ in graphs]
    played_so_far = 0
    with torch_threads(1), evaluation_bar(f"placeto pretraining on {cluster.name}", int(episodes), progress,
                                          unit="episodes") as advance_to:
        net.train()
        for k, count in enumerate(plan):
            index = k % len(problems)
            problem = problems[index]
            start = rng.integers(d, size=(count, problem.num_groups))
            played = _play(net, problem, start, passes=h.passes, rng=rng, timer=counted, penalty=h.oom_penalty,
                           gamma=h.gamma)
            learner.update(problem, played, key=index)
            assert played.final_cost is not None
            final_cost[index].extend(played.final_cost.tolist())
            played_so_far += count
            advance_to(played_so_far)
    net.eval()
    meta = {
        "graphs": [g.name for g in graphs], "cluster": cluster.name, "episodes": int(episodes),
        "updates": learner.updates, "evaluations": counted.evaluations, "seed": seed_value,
        "hyper": asdict(h),
        # c(p_L) over each graph's last episodes: the final step time as a fraction of the start's
        "final_cost": [float(np.mean(c[-h.baseline_window:])) if c else None for c in final_cost],
    }
    return PlacetoModel(net, meta)


# ---------------------------------------------------------------------------------------------- checkpoints
def save_placeto(model: PlacetoModel, path: str | Path, meta: dict[str, Any] | None = None) -> Path:
    """Write ``model`` as a Placeto checkpoint (plain data, atomically); ``meta`` (plain values) joins its meta.

    The file holds ``{"format": "gnplace-placeto", "version": 1, "config": {num_devices, hidden,
    rounds, features}, "state_dict": {...}, "meta": {...}}``.

    Examples:
        >>> import tempfile
        >>> from gnplace.policy.placeto_gnn import PlacetoConfig
        >>> model = PlacetoModel(_network(PlacetoConfig(num_devices=2, hidden=8, rounds=2), 0), {"episodes": 3})
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = save_placeto(model, f"{d}/p.pt")
        ...     again = load_placeto(f"{d}/p.pt")
        >>> again.num_devices, again.meta["episodes"]
        (2, 3)
    """
    from gnplace.policy.checkpoint import atomic_torch_save

    state = {k: v.detach().cpu().clone() for k, v in model.network.state_dict().items()}
    return atomic_torch_save({
        "format": FORMAT, "version": VERSION, "config": model.network.config.to_dict(), "state_dict": state,
        "meta": {**model.meta, **(meta or {})},
    }, path)


def load_placeto(path: str | Path) -> PlacetoModel:
    """The Placeto model in ``path`` (in evaluation mode).

    Raises:
        InvalidCheckpoint: (one line) if the file is missing, truncated, corrupt, of another format or
            version, its recorded shape is past :mod:`gnplace.limits`, or its weights do not fit that shape.
    """
    import torch

    from gnplace.policy.checkpoint import read_checkpoint, weights_mismatch
    from gnplace.policy.placeto_gnn import PlacetoConfig, PlacetoGNN, placeto_features

    path = Path(path)
    data = read_checkpoint(path)
    if data.get("format") != FORMAT:
        found = data.get("format")
        raise InvalidCheckpoint(f"{path}: not a Placeto checkpoint (format {found!r}, expected {FORMAT!r})")
    if data.get("version") != VERSION:
        found = data.get("version")
        raise InvalidCheckpoint(f"{path}: Placeto checkpoint version {found!r}; this gnplace reads {VERSION}")
    raw = data.get("config")
    config = None
    if isinstance(raw, dict):
        try:
            config = PlacetoConfig(num_devices=int(raw["num_devices"]), hidden=int(raw["hidden"]),
                                   rounds=int(raw["rounds"]))
        except (KeyError, TypeError, ValueError, OverflowError):  # (int(inf): OverflowError)
            config = None
    if config is None or config.num_devices < 1 or config.hidden < 1 or config.rounds < 0:
        raise InvalidCheckpoint(f"{path}: the network's shape is missing or malformed")
    for name, value, most in (("num_devices", config.num_devices, MAX_DEVICES), ("hidden", config.hidden, MAX_WIDTH),
                              ("rounds", config.rounds, MAX_LAYERS)):
        if value > most:  # refused, not allocated: a hidden of 10**6 asked the allocator for 4 TB
            raise InvalidCheckpoint(f"{path}: the network's {name} is {value}, more than the {most} gnplace allows")
    assert isinstance(raw, dict)
    features = raw.get("features", [])
    if not isinstance(features, list) or features != list(placeto_features(config.num_devices)):
        raise InvalidCheckpoint(f"{path}: made for other state features; retrain with this gnplace version")
    state = data.get("state_dict")
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) and v.is_floating_point()
                                              for v in state.values()):
        raise InvalidCheckpoint(f"{path}: the weights are missing or malformed")
    broken = sorted(str(k) for k, v in state.items() if not bool(torch.isfinite(v).all()))
    if broken:  # NaN logits: every placement a draw from nothing
        raise InvalidCheckpoint(f"{path}: the weights are not finite (NaN or infinity in {broken[0]}); retrain or "
                                "use another checkpoint")
    mismatch = weights_mismatch(lambda: PlacetoGNN(config), state)  # checked before the network is allocated
    if mismatch:
        raise InvalidCheckpoint(f"{path}: the weights do not fit the network's shape ({mismatch})")
    net = PlacetoGNN(config)
    try:
        net.load_state_dict(state)
    except RuntimeError as err:
        first = str(err).strip().splitlines()[0]
        raise InvalidCheckpoint(f"{path}: the weights do not fit the network's shape ({first[:160]})") from err
    net.eval()
    meta = data.get("meta", {})
    return PlacetoModel(net, dict(meta) if isinstance(meta, dict) else {})
