"""``policy``'s polish: annealing from its best candidate, over the module map first (:mod:`gnplace.rl.zeroshot_polish`)."""

from __future__ import annotations

import numpy as np

from gnplace.cluster import load_cluster
from gnplace.graph_io import load_graph
from gnplace.rl.zeroshot_polish import anneal, module_units
from gnplace.sim.simulator import Simulator


def test_the_polish_keeps_its_start_where_the_chain_finds_nothing_faster():
    """A chain of ops is fastest on one device: annealing from there ties it at best, and a tie is no gain, so the
    start comes back with its own choice (not ``", annealed"``) and step."""
    from gnplace.placement import Placement
    from gnplace.toy import chain_graph

    graph, cluster, sim = chain_graph(6), load_cluster("k80x2"), Simulator()
    start = Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster)
    step = sim.time(graph, cluster, start).step_time
    got, got_step, choice, spent = anneal(sim, graph, cluster, start, True, 0, step, "greedy", polish=16, reheat=False)
    assert got is start and got_step == step and choice == "greedy" and spent == 16


def test_module_units_join_every_call_of_a_module_on_recurrent_graphs_only():
    """ptb's groups are calls of a few modules (the cell's nodes at every time step): a unit is a union of whole groups,
    one per module. cifar10's modules are each called once: no map coarser than its groups, None."""
    graph = load_graph("datasets/ptb/ptb_010.gnpg")
    units = module_units(graph)
    assert units is not None and units.shape == (graph.num_ops,)
    # 128 groups, 8 units: the cell's 6 nodes, the cell's own ops, the root's with the embedding's (one of whose groups
    # a root op leads)
    assert len(np.unique(units)) == 8 and graph.num_groups == 128
    for g in range(graph.num_groups):  # a group lies in one unit
        assert len(np.unique(units[graph.group == g])) == 1
    node_4 = {int(u) for u, module in zip(units, graph.module) if module == "cell.nodes.4"}
    assert len(node_4) == 1  # node 4 at all 35 time steps is one unit
    assert module_units(load_graph("datasets/cifar10/cifar10_002.gnpg")) is None
