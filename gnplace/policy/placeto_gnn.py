"""Placeto's graph neural network: a node-by-node placement policy for a fixed number of devices.

Placeto (Addanki et al., *Placeto: Learning Generalizable Device Placement Algorithms for
Distributed Machine Learning*, NeurIPS 2019) places a graph by visiting its nodes one at a time and
choosing each one's device from a graph embedding of the *current* placement. The network has three
parts, all implemented here.

**State features** (:func:`state_features`, names in :func:`placeto_features`), one row per node
:math:`v` of the decision graph, each column divided by its largest absolute value over the graph
(so a graph of microsecond ops and one of second-long ops look alike):

* ``run_time``: seconds of :math:`v` on the device it is placed on now;
* ``out_bytes``: bytes :math:`v` writes;
* ``device_0 .. device_{D-1}``: its current device, one-hot;
* ``visited``: whether :math:`v` was placed in this pass of the episode;
* ``current``: whether :math:`v` is being placed at this step;
* ``start``: its start time (seconds) minus the current node's start time.

**Embedding** (:class:`PlacetoGNN`). Messages flow along the DAG top-down (producers to
consumers) and bottom-up (consumers to producers) with separate weights,

.. math::
    h^{\\downarrow}_v = f^{\\downarrow}(x_v)
        + g^{\\downarrow}\\Bigl(\\textstyle\\sum_{u \\in P(v)} h^{\\downarrow}_u\\Bigr),
    \\qquad
    h^{\\uparrow}_v = f^{\\uparrow}(x_v) + g^{\\uparrow}\\Bigl(\\textstyle\\sum_{w \\in S(v)} h^{\\uparrow}_w\\Bigr)

with :math:`P(v)` the producers and :math:`S(v)` the consumers of :math:`v`, and :math:`f`,
:math:`g` two-layer MLPs. The recursion is run as ``rounds`` synchronous rounds from
:math:`h = f(x)` (Placeto's spec recommends 8); after ``rounds`` at least the graph's number of
levels (its depth + 1: a source's first round adds :math:`g` of the empty sum, :math:`g(0) \\neq 0`) it is
the exact topological recursion, below that every node sees the nodes up to ``rounds`` edges away.
A node's embedding is :math:`e_v = [h^{\\downarrow}_v \\| h^{\\uparrow}_v]`.

**Aggregation and head.** The nodes outside the current decision are split by their relation to
it (:func:`relation_masks`): its *parents* (direct producers), its *children* (direct consumers)
and its *parallel* nodes (neither ancestors nor descendants). Each set's embeddings are averaged
and concatenated with the mean embedding of the current nodes; an MLP maps the :math:`4 \\cdot 2H`
vector to one logit per device,

.. math::
    \\pi_\\theta(\\cdot \\mid s) = \\mathrm{softmax}\\bigl(\\mathrm{MLP}([\\bar e_{cur} \\| \\bar e_{par}
        \\| \\bar e_{chi} \\| \\bar e_{para}])\\bigr) \\in \\Delta^{D-1}.

The head has a fixed number of outputs :math:`D`, so a trained network places only on clusters of
``D`` devices (Placeto's limitation; gnplace's :class:`~gnplace.policy.gnn.PlacementPolicy` scores
devices by their features instead and has none).

Choices where the paper is silent: *parents* and *children* are the direct neighbours, not all
ancestors and descendants: a decision of a training graph is a colocation group holding forward
and gradient ops, of which nearly every other node is both an ancestor and a descendant, so those
sets would pool almost the whole graph and say nothing (farther nodes still reach the current ones
through message passing); a node can be a producer of one member and a consumer of another, and
then counts in both sets; the set aggregations are means (a sum would scale with the graph's
size); "current" is the mean over the decision's nodes; empty sets aggregate to zeros.

Batching: ``S`` states of one graph are run at once by carrying the states as extra feature
columns (node-major tensors ``[N, S, H]``, viewed as ``[N, S * H]`` for the neighbour sums), so
one message-passing call serves every state.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from gnplace.policy.gnn import TidyMessagePassing

__all__ = [
    "PlacetoConfig", "placeto_features", "state_features", "relation_masks", "NeighbourSum", "PlacetoGNN",
]


def placeto_features(num_devices: int) -> tuple[str, ...]:
    """Names of the state feature columns for ``num_devices`` devices, in order.

    Examples:
        >>> placeto_features(2)
        ('run_time', 'out_bytes', 'device_0', 'device_1', 'visited', 'current', 'start')
    """
    return ("run_time", "out_bytes", *(f"device_{d}" for d in range(num_devices)), "visited", "current", "start")


@dataclass(frozen=True)
class PlacetoConfig:
    """The network's shape.

    Attributes:
        num_devices (int): devices ``D``: the width of the output head.
        hidden (int): width ``H`` of each direction's embedding (default: 32).
        rounds (int): synchronous message-passing rounds in each direction (default: 8).
    """

    num_devices: int
    hidden: int = 32
    rounds: int = 8

    @property
    def features(self) -> tuple[str, ...]:
        """The state feature names the network reads (:func:`placeto_features`)."""
        return placeto_features(self.num_devices)

    def to_dict(self) -> dict[str, object]:
        """Plain values: the shape and the feature names (what a checkpoint stores)."""
        return {**asdict(self), "features": list(self.features)}


def _normalise_columns(x: torch.Tensor) -> torch.Tensor:
    """Each column of every state divided by its largest absolute value over the nodes (0 stays 0)."""
    scale = x.abs().amax(dim=-2, keepdim=True)
    return x / torch.where(scale > 0, scale, torch.ones_like(scale))


def state_features(
    run_time: np.ndarray, out_bytes: np.ndarray, device: np.ndarray, visited: np.ndarray, current: np.ndarray,
    start: np.ndarray, num_devices: int,
) -> torch.Tensor:
    """The normalised state features of ``S`` states of one graph of ``N`` nodes, ``[S, N, F]`` float32.

    Args:
        run_time (np.ndarray): seconds of each node on its current device, ``[S, N]``.
        out_bytes (np.ndarray): bytes each node writes, ``[N]``.
        device (np.ndarray): current device of each node, ``[S, N]`` int.
        visited (np.ndarray): whether each node was placed in this pass, ``[S, N]`` bool.
        current (np.ndarray): whether each node is being placed now, ``[S, N]`` or ``[N]`` bool.
        start (np.ndarray): start of each node in seconds, ``[S, N]``; made relative to the earliest
            start among the current nodes.
        num_devices (int): ``D``.

    Examples:
        >>> x = state_features(np.array([[1.0, 2.0]]), np.array([10, 0]), np.array([[0, 1]]),
        ...                    np.array([[True, False]]), np.array([False, True]), np.array([[0.0, 1.0]]), 2)
        >>> x[0].tolist()  # run_time, out_bytes, device_0, device_1, visited, current, start
        [[0.5, 1.0, 1.0, 0.0, 1.0, 0.0, -1.0], [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]]
    """
    s, n = device.shape
    cur = np.broadcast_to(np.asarray(current, dtype=bool), (s, n))
    big = np.where(cur, np.asarray(start, dtype=np.float64), np.inf).min(axis=1, keepdims=True)
    rel = np.asarray(start, dtype=np.float64) - np.where(np.isfinite(big), big, 0.0)
    onehot = np.eye(num_devices)[np.asarray(device, dtype=np.int64)]
    columns = np.concatenate([
        np.asarray(run_time, dtype=np.float64)[..., None],
        np.broadcast_to(np.asarray(out_bytes, dtype=np.float64), (s, n))[..., None],
        onehot,
        np.asarray(visited, dtype=np.float64)[..., None],
        cur.astype(np.float64)[..., None],
        rel[..., None],
    ], axis=-1)
    return _normalise_columns(torch.as_tensor(columns, dtype=torch.float32))


def relation_masks(
    num_nodes: int, edge_src: np.ndarray, edge_dst: np.ndarray, members: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parents (direct producers), children (direct consumers) and parallel nodes of each decision, outside it.

    Args:
        num_nodes (int): nodes ``N`` of the DAG.
        edge_src (np.ndarray): producer of each edge, ``[E]``.
        edge_dst (np.ndarray): consumer of each edge, ``[E]``.
        members (np.ndarray): which nodes each decision covers, ``[G, N]`` bool.

    Returns:
        tuple[np.ndarray, np.ndarray, np.ndarray]: ``(parents, children, parallel)``, each
        ``[G, N]`` bool; none holds a member of its decision; ``parents`` holds the producers of
        the members, ``children`` their consumers, ``parallel`` the nodes that are neither ancestors
        nor descendants of any member.

    Examples:
        >>> # 0 -> 1 -> 3 -> 4, 0 -> 2; deciding node 1: parent 0, child 3, parallel 2 (4 is a farther descendant)
        >>> p, c, q = relation_masks(5, np.array([0, 1, 0, 3]), np.array([1, 3, 2, 4]), np.eye(5, dtype=bool)[[1]])
        >>> p.astype(int).tolist(), c.astype(int).tolist(), q.astype(int).tolist()
        ([[1, 0, 0, 0, 0]], [[0, 0, 0, 1, 0]], [[0, 0, 1, 0, 0]])
    """
    members = np.asarray(members, dtype=bool).reshape(-1, num_nodes)
    # reach[u, v]: a path of one edge or more from u to v; filled in reverse topological order
    succ: list[list[int]] = [[] for _ in range(num_nodes)]
    indegree = np.zeros(num_nodes, dtype=np.int64)
    for u, v in zip(np.asarray(edge_src).tolist(), np.asarray(edge_dst).tolist()):
        succ[u].append(v)
        indegree[v] += 1
    frontier = [v for v in range(num_nodes) if indegree[v] == 0]
    order: list[int] = []
    while frontier:
        u = frontier.pop()
        order.append(u)
        for v in succ[u]:
            indegree[v] -= 1
            if indegree[v] == 0:
                frontier.append(v)
    if len(order) != num_nodes:
        raise ValueError("relation_masks needs a DAG; the edges form a cycle")
    reach = np.zeros((num_nodes, num_nodes), dtype=bool)
    for u in reversed(order):
        for v in succ[u]:
            reach[u, v] = True
            reach[u] |= reach[v]
    m = members.astype(np.float64)
    ancestors = (m @ reach.T.astype(np.float64)) > 0  # [G, N]: u reaches some member
    descendants = (m @ reach.astype(np.float64)) > 0  # [G, N]: some member reaches u
    adjacency = np.zeros((num_nodes, num_nodes))
    adjacency[np.asarray(edge_src, dtype=np.int64), np.asarray(edge_dst, dtype=np.int64)] = 1.0
    parents = ((m @ adjacency.T) > 0) & ~members  # u -> some member
    children = ((m @ adjacency) > 0) & ~members  # some member -> u
    parallel = ~(ancestors | descendants | members)
    return parents, children, parallel


class NeighbourSum(TidyMessagePassing):
    """:math:`\\sum_{u \\in N(v)} h_u` over the sources ``u`` of the edges into each node ``v``.

    Shapes:
        x ``[N, C]``, edge_index ``[2, E]`` -> ``[N, C]`` (``C`` may hold many states side by side).
    """

    def __init__(self) -> None:
        super().__init__(aggr="add")

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Sum of the embeddings of each node's in-neighbours along ``edge_index`` (source to target)."""
        return self.propagate(edge_index, x=x)  # type: ignore[no-any-return]

    def message(self, x_j: torch.Tensor) -> torch.Tensor:
        """The message of one edge: the source's embedding."""
        return x_j


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, outputs))


class PlacetoGNN(nn.Module):
    """Placeto's policy: message passing both ways along the DAG, relation pooling, a softmax over ``D`` devices.

    Args:
        config (PlacetoConfig): devices, width and rounds.

    Shapes:
        :meth:`forward`: x ``[S, N, F]``, edge_index ``[2, E]``, four masks ``[S, N]`` -> logits ``[S, D]``.

    Examples:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> net = PlacetoGNN(PlacetoConfig(num_devices=3, hidden=8, rounds=2))
        >>> x = torch.rand(5, 4, len(net.config.features))  # 5 states of a 4-node graph
        >>> edges = torch.tensor([[0, 1, 0], [1, 3, 2]])
        >>> cur = torch.zeros(5, 4, dtype=torch.bool); cur[:, 1] = True
        >>> par, chi, para = (torch.zeros(5, 4, dtype=torch.bool) for _ in range(3))
        >>> par[:, 0], chi[:, 3], para[:, 2] = True, True, True
        >>> probs = net(x, edges, cur, par, chi, para).softmax(-1)
        >>> tuple(probs.shape), bool(torch.allclose(probs.sum(-1), torch.ones(5)))
        ((5, 3), True)
    """

    def __init__(self, config: PlacetoConfig) -> None:
        super().__init__()
        self.config = config
        h, f = config.hidden, len(config.features)
        self.f_down, self.g_down = _mlp(f, h, h), _mlp(h, h, h)  # top-down: producers to consumers
        self.f_up, self.g_up = _mlp(f, h, h), _mlp(h, h, h)  # bottom-up: consumers to producers
        self.neighbours = NeighbourSum()
        self.head = _mlp(8 * h, h, config.num_devices)

    def _direction(self, x: torch.Tensor, edge_index: torch.Tensor, f: nn.Module, g: nn.Module) -> torch.Tensor:
        """``rounds`` synchronous rounds of h_v = f(x_v) + g(sum of h_u over in-neighbours u), ``[N, S, H]``."""
        n, s, _ = x.shape
        fx = f(x)  # f(x_v)
        h = fx
        for _ in range(self.config.rounds):
            summed = self.neighbours(h.reshape(n, -1), edge_index).view(n, s, -1)  # sum_{u in N(v)} h_u
            h = fx + g(summed)  # h_v = f(x_v) + g(sum)
        return h

    def embed(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Node embeddings :math:`e_v = [h^\\downarrow_v \\| h^\\uparrow_v]` of every state, ``[N, S, 2H]``."""
        nodes_first = x.transpose(0, 1)  # [N, S, F]: states ride along as extra columns
        down = self._direction(nodes_first, edge_index, self.f_down, self.g_down)
        up = self._direction(nodes_first, edge_index.flip(0), self.f_up, self.g_up)
        return torch.cat([down, up], dim=-1)

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor, current: torch.Tensor, parents: torch.Tensor,
        children: torch.Tensor, parallel: torch.Tensor,
    ) -> torch.Tensor:
        """Logits over the ``D`` devices for the current decision of each state, ``[S, D]``.

        Args:
            x (torch.Tensor): state features (:func:`state_features`), ``[S, N, F]``.
            edge_index (torch.Tensor): the DAG's edges ``(producer, consumer)``, ``[2, E]`` int64.
            current (torch.Tensor): the nodes being placed, ``[S, N]`` bool.
            parents (torch.Tensor): their producers outside the decision, ``[S, N]`` bool.
            children (torch.Tensor): their consumers outside the decision, ``[S, N]`` bool.
            parallel (torch.Tensor): nodes neither ancestors nor descendants of them, ``[S, N]`` bool.
        """
        e = self.embed(x, edge_index)  # [N, S, 2H]
        pooled = []
        for mask in (current, parents, children, parallel):
            m = mask.to(e.dtype)  # [S, N]
            total = torch.einsum("sn,nsh->sh", m, e)
            pooled.append(total / m.sum(dim=1, keepdim=True).clamp(min=1.0))  # mean over the set, 0 if empty
        return self.head(torch.cat(pooled, dim=-1))  # type: ignore[no-any-return]
