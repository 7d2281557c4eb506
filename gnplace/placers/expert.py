"""``expert``: the placement a person would write by hand.

The papers compare learned placements with human experts' (Mirhoseini et al., ICML 2017,
https://arxiv.org/abs/1706.04972; the hierarchical planner, ICLR 2018; Placeto, NeurIPS 2019;
Baechi, SoCC 2020). Their experts follow two rules, which :class:`ExpertPlacer` reproduces:

* **Recurrent stacks** (RNN language models, NMT; ``meta["family"]`` is ``"ptb"`` or ``"nmt"``,
  or module paths name numbered layers, e.g. ``encoder.cells.1``, that run more than once):
  one layer per device, layer :math:`i` on device :math:`i \\bmod D`, so that the layers of
  successive time steps form a wavefront pipeline. The encoder's and decoder's layer :math:`i`
  share a device. A reverse-direction cell (a path part containing ``backward`` or ``reverse``)
  is layer 0, as in a bidirectional first layer. A group without a layer (embeddings, attention,
  softmax, loss) joins the layer that feeds it: for each of its forward ops the deepest layer among
  the op's forward ancestors, the shallowest of these over its ops, or layer 0 if no layer feeds
  it. Embeddings go with the first layer, attention and softmax with the last.
* **Feed-forward nets**: contiguous blocks of layers, one block per device, cut where the prefix
  sum of compute time crosses each device's share. Layers are taken in the order the model
  defines them: colocation groups by id, which numbers them by first appearance, for imported
  models the order the forward pass ran them (branch after branch, as a person reads the code).

Only devices of the fastest kind are used (a CPU beside GPUs is left idle) unless their memory
cannot hold the graph; finally groups are moved off devices that run out of memory
(:func:`~gnplace.placers.groups.repair_memory`).
"""

from __future__ import annotations

import re

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph import FORWARD, OpGraph
from gnplace.placement import Placement, check_graph_and_cluster
from gnplace.placers.base import check_flag
from gnplace.placers.groups import (
    contiguous_blocks,
    device_sums,
    group_times,
    memory_need,
    repair_memory,
    usable_devices,
)
from gnplace.seed import SeedLike, check_seed
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import StepTimer

__all__ = ["ExpertPlacer", "group_layers"]

_LAYER = re.compile(r"(?:^|\.)(?:cells|layers|layer|rnns|rnn|lstms|lstm|grus|gru|h)\.(\d+)(?:\.|$)")
_REVERSE = re.compile(r"backward|reverse")
_RECURRENT_FAMILIES = ("ptb", "nmt")


def group_layers(graph: OpGraph) -> tuple[np.ndarray, bool]:
    """The layer index of every colocation group, read from module paths, and whether layers recur.

    Returns:
        tuple[np.ndarray, bool]: layer of each group (-1 where no path names one), ``[num_groups]``;
        and whether some layer's module runs in more than one group (an unrolled recurrence).

    Examples:
        >>> g = OpGraph(["a", "b", "c"], [(0, 1), (1, 2)], module=["rnn.0", "rnn.1", "rnn.1"], group=[0, 1, 2])
        >>> layers, recurrent = group_layers(g)
        >>> layers.tolist(), recurrent
        ([0, 1, 1], True)
    """
    layer = np.full(graph.num_groups, -1, dtype=np.int64)
    groups_of: dict[str, set[int]] = {}
    for v, path in enumerate(graph.module):
        g = int(graph.group[v])
        match = _LAYER.search(path)
        if match is not None:
            layer[g] = max(layer[g], int(match.group(1)))
            groups_of.setdefault(path, set()).add(g)
        elif _REVERSE.search(path) and layer[g] < 0:
            layer[g] = 0
    return layer, any(len(gs) > 1 for gs in groups_of.values())


def _label_by_ancestors(graph: OpGraph, layer: np.ndarray) -> np.ndarray:
    """Give every unlabelled group the layer that feeds it (see the module docstring), else layer 0."""
    forward = graph.phase == FORWARD
    ptr, producers, _ = graph.in_csr
    own = np.where(forward, layer[graph.group], -1)
    feed = own.copy()  # deepest layer among each forward op's forward ancestors, itself included
    for v in graph.topological_order().tolist():
        if forward[v]:
            preds = producers[ptr[v] : ptr[v + 1]]
            preds = preds[forward[preds]]
            if preds.size:
                feed[v] = max(feed[v], int(feed[preds].max()))
    result = layer.copy()
    for g in np.flatnonzero(layer < 0).tolist():
        fed = feed[(graph.group == g) & (feed >= 0)]
        result[g] = int(fed.min()) if fed.size else 0
    return result


class ExpertPlacer:
    """Place a graph as a human expert would: one layer per device for recurrent stacks, else blocks.

    Args:
        strategy (str, optional): ``"auto"`` (layers for recurrent stacks, see the module
            docstring, else blocks), ``"layers"`` or ``"blocks"`` (default: ``"auto"``).
        memory_aware (bool, optional): repair a placement that runs out of memory (default: :obj:`True`).
        timer (StepTimer, optional): checks memory; op-time estimates come from its cost model
            (default: ``Simulator()``).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> ExpertPlacer().place(chain_graph(6), load_cluster("k80x2")).devices.tolist()
        [0, 0, 0, 1, 1, 1]
    """

    name = "expert"
    accepts = frozenset({"timer"})
    #: Changes when results under the same options change. 1 (2026-12-04): where the memory repair's moves left a
    #: placement over memory, it tries the largest device and a descent by the simulated overflow
    #: (:func:`~gnplace.placers.groups.repair_memory`); placements that fitted are as before.
    revision = "1"

    def __init__(self, *, strategy: str = "auto", memory_aware: bool = True, timer: StepTimer | None = None) -> None:
        if strategy not in ("auto", "layers", "blocks"):
            raise InvalidArgument(f"ExpertPlacer: unknown strategy {strategy!r} (choose 'auto', 'layers' or 'blocks')")
        self.strategy = strategy
        self.memory_aware = check_flag("expert", "memory_aware", memory_aware)
        self.timer = timer or Simulator()

    def __repr__(self) -> str:
        return f"ExpertPlacer(strategy={self.strategy!r}, memory_aware={self.memory_aware})"

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Place ``graph`` on ``cluster`` (``seed`` is checked, and unused: this placer is deterministic)."""
        check_graph_and_cluster(graph, cluster)
        check_seed(seed)
        op_time, column = self.timer.cost_model.op_time_columns(graph, cluster)  # distinct columns: the same bits
        devices = usable_devices(op_time, cluster, memory_need(graph, cluster, self.timer), min_speed=1.0,
                                 column=column)
        layer, recurrent = group_layers(graph)
        strategy = self.strategy
        if strategy == "auto":
            named = graph.meta.get("family") in _RECURRENT_FAMILIES
            strategy = "layers" if named or (recurrent and np.unique(layer[layer >= 0]).size > 1) else "blocks"
        if strategy == "layers":
            per_group = devices[_label_by_ancestors(graph, layer) % devices.size]
        else:
            times = group_times(graph, op_time)  # of the distinct columns
            speed = 1.0 / np.maximum(device_sums(times, column, devices), 1e-300)
            per_group = devices[contiguous_blocks(times[:, column[devices[0]]], speed)]
        if self.memory_aware:
            per_group = repair_memory(graph, cluster, per_group, timer=self.timer)
        return Placement.from_groups(graph, cluster, per_group)
