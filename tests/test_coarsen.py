"""Coarsening large graphs into groups, and expanding coarse placements."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnplace.cluster import load_cluster
from gnplace.coarsen import _acyclic_nodes, _unit_seconds, coarsen, coarsen_within, heavy_edge_matching, module_units
from gnplace.graph import OpGraph
from gnplace.graph_io import load_graph
from gnplace.placement import GraphKey, Placement
from gnplace.sim import Simulator
from gnplace.toy import chain_graph, layered_graph

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = [ROOT / "datasets" / "cifar10" / "cifar10_000.gnpg", ROOT / "datasets" / "ptb" / "ptb_001.gnpg",
          ROOT / "datasets" / "nmt" / "nmt_001.gnpg"]


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
@pytest.mark.parametrize("num_groups", [8, 40])
def test_coarse_graph_is_a_dag_of_whole_colocation_groups(path, num_groups):
    g = load_graph(path)
    c = coarsen(g, num_groups, load_cluster("k80x4"))
    coarse = c.graph
    assert coarse.num_groups <= num_groups
    assert len(coarse.topological_order()) == coarse.num_ops  # validated DAG
    # every colocation group of the original lies in one part
    part_of_op = coarse.group[c.node_of_op]
    for unit in np.unique(g.group):
        assert np.unique(part_of_op[g.group == unit]).size == 1
    assert coarse.total_flops == pytest.approx(g.total_flops)
    assert coarse.total_param_bytes == g.total_param_bytes


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
def test_coarse_op_times_sum_the_ops_they_hold(path):
    g = load_graph(path)
    cluster = load_cluster("cpu_gpu")
    c = coarsen(g, 16, cluster)
    sim = Simulator()
    for device in range(cluster.num_devices):
        full = sim.time(g, cluster, np.full(g.num_ops, device)).step_time
        coarse = sim.time(c.graph, cluster, np.full(c.graph.num_ops, device)).step_time
        assert coarse == pytest.approx(full, rel=1e-9)


def test_expand_puts_every_op_on_its_nodes_device():
    g = layered_graph(600, seed=2)
    cluster = load_cluster("k80x4")
    c = coarsen(g, 12, cluster)
    rng = np.random.default_rng(0)
    per_group = rng.integers(0, 4, c.graph.num_groups)
    coarse = Placement.from_groups(c.graph, cluster, per_group)
    full = c.expand(coarse)
    assert np.array_equal(full.devices, coarse.devices[c.node_of_op])
    assert not full.splits_groups(g)
    Simulator().time(g, cluster, full)  # a valid placement of the original graph


def test_small_graph_keeps_its_groups_and_bad_count_is_rejected():
    g = layered_graph(50, seed=0)
    c = coarsen(g, 1000, load_cluster("k80x2"))
    assert c.graph.num_groups == g.num_groups
    with pytest.raises(ValueError, match="a whole number >= 1"):
        coarsen(g, 0, load_cluster("k80x2"))


def test_deterministic():
    g = load_graph(GRAPHS[0])
    a = coarsen(g, 30, load_cluster("k80x4"), seed=1)
    b = coarsen(g, 30, load_cluster("k80x4"), seed=1)
    assert a.graph == b.graph and np.array_equal(a.node_of_op, b.node_of_op)


def test_two_coarsenings_compare_by_value():
    """``a == b`` of two coarsenings was numpy's 'truth value of an array is ambiguous' ValueError."""
    import pickle

    g, c = load_graph(GRAPHS[0]), load_cluster("k80x4")
    a = coarsen(g, 30, c, seed=1)
    assert a == coarsen(g, 30, c, seed=1) and a == pickle.loads(pickle.dumps(a))
    assert a != coarsen(g, 20, c, seed=1) and a != "a"


def test_module_units_merge_whole_branches_of_a_cell():
    g = load_graph(GRAPHS[0])
    units = module_units(g, 200)
    first = np.full(g.num_groups, g.num_ops)
    np.minimum.at(first, g.group, np.arange(g.num_ops))
    branches: dict[str, set[int]] = {}
    for k, op in enumerate(first.tolist()):
        path = g.module[op].split(".")
        if len(path) >= 5 and path[2] == "ops":  # cells.<i>.ops.<j>.<layer>...: a branch of a cell
            branches.setdefault(".".join(path[:4]), set()).add(int(units[k]))
    assert branches and all(len(u) == 1 for u in branches.values())  # every branch is one unit
    assert len(set(units.tolist())) > len(branches)  # and the branches stay apart
    assert np.array_equal(module_units(g, g.num_groups), np.arange(g.num_groups))  # nothing to merge


def test_module_units_never_fold_a_network_into_a_handful_of_units():
    g = load_graph(GRAPHS[1])  # ptb: every cell node is one module under `cell.nodes`
    units = module_units(g, g.num_groups - 1)
    assert int(units.max()) + 1 >= (g.num_groups - 1) / 4


def _module_units_reference(graph, target):
    """module_units as it was written first: each level's components by networkx."""
    import networkx as nx

    label = np.arange(graph.num_groups, dtype=np.int64)
    if graph.num_groups <= target:
        return label
    first = np.full(graph.num_groups, graph.num_ops, dtype=np.int64)
    np.minimum.at(first, graph.group, np.arange(graph.num_ops))
    paths = [graph.module[i].split(".") if graph.module[i] else [] for i in first.tolist()]
    src, dst = graph.group[graph.edge_src], graph.group[graph.edge_dst]
    pairs = np.unique(np.stack([src[src != dst], dst[src != dst]], axis=1), axis=0)
    joined, added = nx.Graph(), np.zeros(pairs.shape[0], dtype=bool)
    for depth in range(max((len(p) for p in paths), default=0) - 1, 0, -1):
        ids: dict[str, int] = {}
        key = np.array([ids.setdefault(".".join(p[:depth]) if len(p) > depth else f"#{k}", len(ids))
                        for k, p in enumerate(paths)], dtype=np.int64)
        same = key[pairs[:, 0]] == key[pairs[:, 1]]
        joined.add_edges_from(pairs[same & ~added].tolist())
        added |= same
        lowest = np.arange(graph.num_groups, dtype=np.int64)
        for members in nx.connected_components(joined):
            lowest[list(members)] = min(members)
        unit = np.unique(lowest, return_inverse=True)[1].astype(np.int64)
        if int(unit.max()) + 1 < target / 4:
            break
        label = unit
        if int(unit.max()) + 1 <= target:
            break
    return label


def test_module_units_join_components_without_networkx(monkeypatch):
    """Each level's components were found by networkx (a graph of every joined pair, then its components as
    Python sets): 3.6-3.9 s of a 280,158-op graph's module units; a union-find in numba (0.9-1.2 s) finds the
    same units, here and on all 108 shipped graphs at 8, 32, 256, 1,000 and half their groups."""
    import networkx as nx

    graphs = [load_graph(path) for path in GRAPHS] + [load_graph(ROOT / "datasets" / "real" / "t5_small.gnpg")]
    expected = {(g.name, t): _module_units_reference(g, t) for g in graphs for t in (8, 40, 200, g.num_groups // 2)}

    def refused(*args, **kwargs):
        raise AssertionError("networkx called")

    monkeypatch.setattr(nx, "connected_components", refused)
    monkeypatch.setattr(nx, "Graph", refused)
    for g in graphs:
        for t in (8, 40, 200, g.num_groups // 2):
            assert np.array_equal(module_units(g, t), expected[g.name, t])


def test_module_coarsening_keeps_a_dag_of_whole_groups():
    g = load_graph(GRAPHS[0])
    c = coarsen(g, 100, load_cluster("k80x4"), modules=True)
    assert c.graph.num_groups <= 100 and len(c.graph.topological_order()) == c.graph.num_ops
    part_of_op = c.graph.group[c.node_of_op]
    for unit in np.unique(g.group):
        assert np.unique(part_of_op[g.group == unit]).size == 1


@pytest.mark.parametrize(("path", "max_nodes", "modules"), [(GRAPHS[0], 300, False), (GRAPHS[0], 120, True),
                                                            (GRAPHS[2], 200, True), (GRAPHS[1], 5000, False)],
                         ids=["cifar10", "cifar10-modules", "nmt-modules", "ptb-no-coarsening"])
def test_coarsen_within_is_coarsen_with_each_count_in_turn(path, max_nodes, modules):
    """Only the last coarse graph is built, but the counts tried and the result are the plain loop's."""
    g = load_graph(path)
    cluster = load_cluster("k80x4")
    groups = g.num_groups
    expected = coarsen(g, groups, cluster, seed=3, modules=modules)
    while expected.graph.num_ops > max_nodes and groups > 1:
        groups = max(1, min(groups - 1, int(groups * max_nodes / expected.graph.num_ops * 0.95)))
        expected = coarsen(g, groups, cluster, seed=3, modules=modules)
    got = coarsen_within(g, max_nodes, cluster, seed=3, modules=modules)
    assert got.graph == expected.graph and got.graph.name == expected.graph.name
    assert np.array_equal(got.node_of_op, expected.node_of_op)
    assert np.array_equal(got.part_of_unit, expected.part_of_unit)
    assert got.graph.num_ops <= max_nodes


def _acyclic_nodes_reference(graph, part_of_op):
    """The loop that the compiled one replaced, in Python."""
    node = np.full(graph.num_ops, -1, dtype=np.int64)
    open_node: dict[int, int] = {}
    ptr, src, _ = graph.in_csr
    count = 0
    for v in graph.topological_order().tolist():
        current = open_node.get(int(part_of_op[v]), -1)
        producers = node[src[ptr[v]:ptr[v + 1]]]
        if current < 0 or (producers.size and producers.max() > current):
            current = count
            count += 1
            open_node[int(part_of_op[v])] = current
        node[v] = current
    return node


@settings(max_examples=30, deadline=None)
@given(ops=st.integers(1, 300), parts=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_acyclic_nodes_match_the_python_loop(ops, parts, seed):
    g = layered_graph(ops, seed=seed)
    part_of_op = np.random.default_rng(seed).integers(0, parts, g.num_ops)
    assert np.array_equal(_acyclic_nodes(g, part_of_op), _acyclic_nodes_reference(g, part_of_op))


def _matching_reference(graph, unit_seconds, target, start=None):
    """heavy_edge_matching as it was written first: each round's units renumbered by ``np.unique`` of every label."""
    label = np.arange(graph.num_groups, dtype=np.int64) if start is None else np.asarray(start, dtype=np.int64)
    src_unit, dst_unit = graph.group[graph.edge_src], graph.group[graph.edge_dst]
    cap = float(unit_seconds.sum()) / max(target, 1)
    while (count := int(label.max()) + 1 if label.size else 0) > target:
        seconds = np.bincount(label, weights=unit_seconds, minlength=count)
        a, b = label[src_unit], label[dst_unit]
        keep = a != b
        key, inverse = np.unique(np.minimum(a[keep], b[keep]) * count + np.maximum(a[keep], b[keep]),
                                 return_inverse=True)
        weight = np.bincount(inverse, weights=graph.edge_bytes[keep]) if key.size else np.zeros(0)
        merged_into, matched, merges = np.arange(count, dtype=np.int64), np.zeros(count, dtype=bool), 0
        for e in np.lexsort((key, -weight)).tolist():
            u, v = divmod(int(key[e]), count)
            if matched[u] or matched[v] or seconds[u] + seconds[v] > cap:
                continue
            matched[u] = matched[v] = True
            merged_into[v] = u
            merges += 1
            if count - merges <= target:
                break
        if merges == 0:
            break
        label = np.unique(merged_into[label], return_inverse=True)[1].astype(np.int64)
    return label


def test_heavy_edge_matching_stops_merging_at_the_target_count():
    """A round stops once the units are down to ``target``: a 4-op chain to 3 merges its first pair only, though
    the cap (2 x 4 s / 3) lets the last pair merge too."""
    g = chain_graph(4)
    assert g.num_groups == 4
    assert heavy_edge_matching(g, np.ones(4), 3, cap_factor=2.0).tolist() == [0, 0, 1, 2]
    assert heavy_edge_matching(g, np.ones(4), 2, cap_factor=2.0).tolist() == [0, 0, 1, 1]


def test_a_units_seconds_are_those_of_its_ops_on_their_fastest_device():
    """The seconds matching and METIS weigh a unit by: each op's least time over the kinds of device, summed."""
    g = chain_graph(3)
    columns = np.array([[1.0, 3.0], [4.0, 2.0], [5.0, 6.0]])
    assert _unit_seconds(g, columns).tolist() == [1.0, 2.0, 5.0]


def test_heavy_edge_matching_renumbers_units_without_sorting_every_group_each_round(monkeypatch):
    """Each round renumbered the units by ``np.unique`` of all the groups' labels: late rounds of a large graph
    merge one pair each, and 82 rounds' sorts of 300,000 labels took 2.8 s of the matching's 4.4 s (46 s of 53 s
    to 8 groups); the units are now renumbered in one pass, to the same numbers."""
    g = layered_graph(3000, seed=0)
    unit_seconds = g.flops / 1e12
    rng = np.random.default_rng(0)
    for target, start in ((8, None), (200, None), (50, np.unique(rng.integers(0, 1500, g.num_groups),
                                                                   return_inverse=True)[1])):
        assert np.array_equal(heavy_edge_matching(g, unit_seconds, target, start=start),
                              _matching_reference(g, unit_seconds, target, start=start))
    sorted_sizes = []
    unique = np.unique

    def spy(values, *args, **kwargs):
        sorted_sizes.append(np.size(values))
        return unique(values, *args, **kwargs)

    monkeypatch.setattr(np, "unique", spy)
    heavy_edge_matching(g, unit_seconds, 8)
    assert sorted_sizes and g.num_groups not in sorted_sizes  # the edges' keys alone, not every group's label


def test_heavy_edge_matching_rounds_key_the_merged_unit_edges_not_every_edge_of_the_graph(monkeypatch):
    """Each round keyed and sorted every edge of the graph between two units, and matched them in a Python loop: a
    280,158-op graph took 908 rounds and 6.6 s to 8 groups (1.0 s now), most of them rounds that merge a few pairs.
    A round now keys the last round's merged unit edges, one per pair (exact: whole bytes under 2**53 sum alike in
    any grouping), to the same units; edges whose weights may round (bytes past 2**53) are keyed as before."""
    g = layered_graph(3000, seed=0)
    unit_seconds = g.flops / 1e12
    rng = np.random.default_rng(0)
    start = np.unique(rng.integers(0, 1500, g.num_groups), return_inverse=True)[1]
    for target, begin in ((8, None), (200, None), (50, start)):
        assert np.array_equal(heavy_edge_matching(g, unit_seconds, target, start=begin),
                              _matching_reference(g, unit_seconds, target, start=begin))
    # edges of 2**53 - k and of a few bytes: merged weights summed in another grouping round otherwise (other units)
    small = layered_graph(300, seed=1)
    rng = np.random.default_rng(1)
    nbytes = np.where(rng.random(small.num_edges) < 0.5, 2**53 - rng.integers(0, 4, small.num_edges),
                      rng.integers(1, 4, small.num_edges))
    huge = small.replace(out_bytes=np.full(small.num_ops, 2**60), edge_bytes=nbytes)
    assert np.array_equal(heavy_edge_matching(huge, small.flops / 1e12, 8),
                          _matching_reference(huge, small.flops / 1e12, 8))
    sizes = []  # (keys handed, distinct keys) of each round
    unique = np.unique

    def spy(values, *args, **kwargs):
        found = unique(values, *args, **kwargs)
        sizes.append((np.size(values), np.size(found[0] if isinstance(found, tuple) else found)))
        return found

    monkeypatch.setattr(np, "unique", spy)
    heavy_edge_matching(g, unit_seconds, 8)
    assert len(sizes) > 2
    assert all(handed <= distinct for (_, distinct), (handed, _) in zip(sizes, sizes[1:]))  # one key per unit pair


def test_coarse_seconds_are_the_timers_the_placeto_mode_has_no_launch_overhead():
    from gnplace.policy.features import build_policy_input
    from gnplace.sim.costmodel import DEFAULT_COSTS, PLACETO_COSTS

    graph, cluster = layered_graph(300, seed=3), load_cluster("k80x4")
    for costs in (DEFAULT_COSTS, PLACETO_COSTS):
        co = coarsen(graph, 12, cluster, cost_model=costs)
        want = np.bincount(co.node_of_op, weights=costs.op_times(graph, cluster)[:, 0], minlength=co.graph.num_ops)
        np.testing.assert_allclose(co.graph.cost_s["k80"], want)
        inp = build_policy_input(graph, cluster, cost_model=costs, max_nodes=40)
        assert inp.coarsening.graph.num_ops <= 40
        total = inp.op_time[:, 0].sum()  # the decision graph's seconds: were the default's in Placeto's mode too
        assert total == pytest.approx(costs.op_times(graph, cluster)[:, 0].sum())
    assert PLACETO_COSTS.op_times(graph, cluster).sum() < DEFAULT_COSTS.op_times(graph, cluster).sum()


def test_a_coarse_node_holds_its_outputs_live_at_once_so_one_that_fits_expands_to_one_that_fits():
    from gnplace.coarsen import node_output_bytes
    from gnplace.toy import fork_graph, toy_cluster

    sim = Simulator()
    fork, two = fork_graph(), toy_cluster(2, memory=10_000_000)  # a -> (b, c) -> d, 4 MB outputs, 10 MB devices
    one = coarsen(fork, 1, two)
    on_one = Placement([0] * one.graph.num_ops, two)
    coarse, expanded = sim.time(one.graph, two, on_one), sim.time(fork, two, one.expand(on_one))
    assert coarse.peak_memory.max() == expanded.peak_memory.max() == 12e6  # was 8 MB: a fit that did not
    assert coarse.is_oom and expanded.is_oom
    leaving, largest, peak = node_output_bytes(fork, np.zeros(4, dtype=np.int64))
    assert (leaving.tolist(), largest.tolist(), peak.tolist()) == ([4e6], [4e6], [12e6])
    for name in ("cifar10/cifar10_002", "ptb/ptb_017"):  # every op in one node: exactly the step's peak
        graph = load_graph(ROOT / "datasets" / f"{name}.gnpg")
        whole = coarsen(graph, 1, two)
        alone = Placement([0] * whole.graph.num_ops, two)
        assert sim.time(whole.graph, two, alone).peak_memory.max() == \
            pytest.approx(sim.time(graph, two, whole.expand(alone)).peak_memory.max())


def test_an_expanded_placement_is_made_for_the_original_graph():
    from gnplace.placement import GraphKey

    graph, cluster = layered_graph(60, seed=4), load_cluster("k80x4")
    c = coarsen(graph, 12, cluster)
    coarse = Placement.from_groups(c.graph, cluster, np.arange(c.graph.num_groups) % 4)
    fine = c.expand(coarse)
    assert fine.made_for is not None and fine.made_for.digest == GraphKey.of(graph).digest
    fine.check(graph)


def test_expand_refuses_a_placement_that_is_not_of_the_coarse_graph():
    """A placement of the full graph was indexed by node and stamped as made for the original; a short one was an IndexError."""
    from gnplace.exceptions import InvalidPlacement

    graph, cluster = layered_graph(200, seed=0), load_cluster("k80x4")
    c = coarsen(graph, 8, cluster)
    with pytest.raises(InvalidPlacement, match="entries"):
        c.expand(Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster))
    with pytest.raises(InvalidPlacement, match="made for"):
        other = coarsen(layered_graph(200, seed=1), 8, cluster).graph
        c.expand(Placement(np.zeros(c.graph.num_ops, dtype=np.int64), cluster, GraphKey.of(other)))
    assert c.expand(Placement(np.zeros(c.graph.num_ops, dtype=np.int64), cluster)).devices.shape == (graph.num_ops,)


@pytest.mark.parametrize("call", [lambda g, c: coarsen(g, 2.5, c), lambda g, c: coarsen(g, "8", c),
                                  lambda g, c: coarsen(g, True, c), lambda g, c: coarsen_within(g, 0, c),
                                  lambda g, c: coarsen_within(g, -5, c)])
def test_counts_that_are_not_whole_numbers_of_at_least_one_are_refused(call):
    """A float reached pymetis (a TypeError), a bool was one group, max_nodes 0 gave a one-node graph."""
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match="must be a whole number >= 1"):
        call(layered_graph(60, seed=0), load_cluster("k80x2"))


def test_coarsening_refuses_what_is_no_graph_cluster_seed_or_placement():
    """A preset's name was an AttributeError, a seed of "a" or a Generator pymetis's TypeError, and -1 passed."""
    from gnplace.exceptions import InvalidArgument

    graph, cluster = layered_graph(40, seed=0), load_cluster("k80x4")
    for call in (coarsen, coarsen_within):
        with pytest.raises(InvalidArgument, match="cluster must be a Cluster"):
            call(graph, 4, "k80x4")
        with pytest.raises(InvalidArgument, match="graph must be an OpGraph"):
            call("g.gnpg", 4, cluster)
        for seed in ("a", np.random.default_rng(0), -1, 1.5, True):
            with pytest.raises(InvalidArgument, match=r"^coarsening: seed must be a whole number >= 0"):
                call(graph, 4, cluster, seed=seed)
    coarse = coarsen(graph, 4, cluster, seed=np.int64(3))
    with pytest.raises(InvalidArgument, match="expand takes a Placement of the coarse graph, got list"):
        coarse.expand([0] * coarse.graph.num_ops)


def test_coarsening_refuses_a_modules_flag_or_cost_model_of_another_type():
    """``modules="no"`` merged module subtrees as ``True`` does; ``cost_model="placeto"`` was an AttributeError."""
    from gnplace.exceptions import InvalidArgument

    graph, cluster = layered_graph(40, seed=0), load_cluster("k80x4")
    for call in (coarsen, coarsen_within):
        for modules in ("no", 0, None):
            with pytest.raises(InvalidArgument, match=r"^coarsening: modules must be true or false, got "):
                call(graph, 4, cluster, modules=modules)
        with pytest.raises(InvalidArgument, match=r"^coarsening: cost_model must be a CostModel .*got 'placeto'$"):
            call(graph, 4, cluster, cost_model="placeto")
    assert coarsen(graph, 4, cluster, modules=np.bool_(False)) == coarsen(graph, 4, cluster)


def test_a_pymetis_without_the_api_used_is_refused_in_one_line(monkeypatch):
    """pymetis < 2025.2 (the floor was 2023.1) has no CSRAdjacency: coarsening was an AttributeError."""
    import pymetis

    from gnplace.exceptions import MissingDependency

    monkeypatch.delattr(pymetis, "CSRAdjacency")
    with pytest.raises(MissingDependency, match=r"pymetis 2025\.2 or later.*pip install"):
        coarsen(layered_graph(40, seed=0), 2, load_cluster("k80x2"))


def test_coarse_edges_carry_each_tensor_once_and_nodes_take_their_first_ops_phase():
    """Between two coarse nodes: the sum, over producers, of each producer's largest edge into the other node."""
    from gnplace.toy import mlp_training_graph

    g = mlp_training_graph(layers=4, width=64, batch=8)
    co = coarsen(g, 4, load_cluster("k80x2"))
    node, coarse = co.node_of_op, co.graph
    expected: dict[tuple[int, int], dict[int, int]] = {}
    for u, w, b in zip(g.edge_src.tolist(), g.edge_dst.tolist(), g.edge_bytes.tolist(), strict=True):
        if node[u] != node[w]:
            tensors = expected.setdefault((int(node[u]), int(node[w])), {})
            tensors[u] = max(tensors.get(u, 0), b)
    got = {(a, b): x for a, b, x in zip(coarse.edge_src.tolist(), coarse.edge_dst.tolist(), coarse.edge_bytes.tolist(),
                                      strict=True)}
    assert got == {pair: sum(t.values()) for pair, t in expected.items()} and len(got) > 1
    first = [int(np.flatnonzero(node == k)[0]) for k in range(coarse.num_ops)]
    assert coarse.phase.tolist() == g.phase[first].tolist() and len(set(coarse.phase.tolist())) > 1


def test_coarsening_many_devices_reads_op_times_by_kind_and_coarsens_as_on_one_device_a_kind(monkeypatch):
    """Coarsening made the whole [ops, devices] op-time matrix for each kind's column and each op's least time:
    3 GiB and 1.3-7 s for 93,567 ops on 4,096 K80s, twice per policy placement; by kind, the same bits."""
    from gnplace.cluster import cluster_from_dict
    from gnplace.sim.costmodel import CostModel

    def cluster(count):
        return cluster_from_dict({"name": f"c{count}", "devices": [{"name": "g", "count": count, "kind": "k80"},
                                                                   {"name": "v", "count": count, "kind": "v100"}],
                                  "links": {"default": "pcie3"}})

    g = layered_graph(600, seed=2)
    few = [coarsen(g, 12, cluster(1), seed=1), coarsen_within(g, 40, cluster(1), seed=1)]

    def refused(*args, **kwargs):
        raise AssertionError("the whole op-time matrix was made")

    monkeypatch.setattr(CostModel, "op_times", refused)
    many = [coarsen(g, 12, cluster(300), seed=1), coarsen_within(g, 40, cluster(300), seed=1)]
    for a, b in zip(few, many):
        assert np.array_equal(a.node_of_op, b.node_of_op) and sorted(a.graph.cost_s) == sorted(b.graph.cost_s)
        assert all(a.graph.cost_s[k].tobytes() == b.graph.cost_s[k].tobytes() for k in a.graph.cost_s)


@pytest.mark.parametrize("parts, recursive", [(4, True), (8, True), (9, False), (40, False)])
def test_metis_parts_chooses_the_metis_method_itself_as_the_metis_placer_does(metis_methods, parts, recursive):
    """pymetis chose recursive bisection or k-way by its own default rule: one with another rule would change parts."""
    from gnplace.coarsen import metis_parts

    g = layered_graph(300, width=4, seed=0)
    metis_parts(g, np.arange(g.num_groups), np.ones(g.num_groups), parts, seed=0)
    assert metis_methods == [recursive]


def _random_dag(seed: int, num_ops: int, *, groups: int | None = None, modules: bool = False) -> OpGraph:
    """A random DAG of ``num_ops`` ops, labels not in topological order: up to three producers each, random groups,
    phases and module paths, some FLOP, outputs, parameters and edges of zero."""
    rng = np.random.default_rng(seed)
    label = rng.permutation(num_ops)
    edges = sorted({(int(label[u]), int(label[v])) for v in range(1, num_ops)
                    for u in rng.choice(v, size=min(int(rng.integers(0, 4)), v), replace=False)})
    some = rng.random((3, num_ops)) < 0.25
    out = np.where(some[0], 0, np.round(10.0 ** rng.uniform(2, 8, num_ops))).astype(np.int64)
    src = np.array([u for u, _ in edges], dtype=np.int64)
    edge_bytes = np.where(rng.random(len(edges)) < 0.25, 0, (out[src] * rng.random(len(edges))).astype(np.int64))
    count = groups or int(rng.integers(1, num_ops + 1))
    paths = [".".join(f"m{int(x)}" for x in rng.integers(0, 3, int(rng.integers(0, 4)))) for _ in range(num_ops)]
    flops = np.where(some[1], 0.0, 10.0 ** rng.uniform(3, 11, num_ops))
    params = np.where(some[2], 0, np.round(10.0 ** rng.uniform(2, 8, num_ops)))
    return OpGraph([f"op{i}" for i in range(num_ops)], edges, flops=flops, out_bytes=out, param_bytes=params,
                   edge_bytes=edge_bytes, phase=rng.integers(0, 3, num_ops),
                   group=rng.integers(0, count, num_ops) * 7 + 3, module=paths if modules else None, name=f"dag{seed}")


def _check_coarsening(graph: OpGraph, co, num_groups: int) -> None:
    """What the module docstring promises of a coarsening of ``graph`` to at most ``num_groups`` groups."""
    coarse, node = co.graph, co.node_of_op
    assert node.shape == (graph.num_ops,) and coarse.num_groups <= num_groups
    assert np.array_equal(np.unique(node), np.arange(coarse.num_ops))  # every op in one node, no node empty
    assert co.part_of_unit.shape == (graph.num_groups,)
    assert np.array_equal(coarse.group[node], co.part_of_unit[graph.group])  # no group split; the map is the groups
    a, b = node[graph.edge_src], node[graph.edge_dst]
    assert np.all(a[a != b] < b[a != b])  # every coarse edge from an older node to a newer one: a DAG
    cross = a != b
    edges = set(zip(coarse.edge_src.tolist(), coarse.edge_dst.tolist()))
    assert edges == set(zip(a[cross].tolist(), b[cross].tolist()))
    per_node = np.zeros(coarse.num_ops, dtype=np.int64)
    np.add.at(per_node, node, graph.param_bytes)
    assert np.array_equal(coarse.param_bytes, per_node)
    flops = np.bincount(node, weights=graph.flops, minlength=coarse.num_ops)
    np.testing.assert_allclose(coarse.flops, flops, rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(ops=st.integers(1, 300), groups=st.integers(1, 40), seed=st.integers(0, 2**16), modules=st.booleans(),
       devices=st.integers(1, 16))
def test_coarsening_random_dags_keeps_groups_whole_its_map_their_numbers_and_sums_exact(ops, groups, seed, modules,
                                                                                      devices):
    """``part_of_unit`` numbered the parts apart from the coarse graph's groups (a graph whose first coarse node
    held a later part): ``coarse.group[node_of_op]`` and ``part_of_unit[graph.group]`` disagreed."""
    from gnplace.cluster_sampler import random_cluster

    graph = _random_dag(seed, ops, modules=modules)
    cluster = random_cluster(seed, min_devices=1, max_devices=devices, tight_probability=0.5)
    co = coarsen(graph, groups, cluster, seed=seed % 5, modules=modules)
    _check_coarsening(graph, co, groups)
    assert co == coarsen(graph, groups, cluster, seed=seed % 5, modules=modules)
    per_group = np.random.default_rng(seed).integers(0, cluster.num_devices, co.graph.num_groups)
    expanded = co.expand(Placement.from_groups(co.graph, cluster, per_group))
    assert not expanded.splits_groups(graph)
    assert np.array_equal(expanded.group_devices(graph), per_group[co.part_of_unit])
    within = coarsen_within(graph, groups, cluster, seed=seed % 5, modules=modules)
    _check_coarsening(graph, within, graph.num_groups)
    assert within.graph.num_ops <= groups
    if coarsen(graph, graph.num_groups, cluster).graph.num_ops <= groups:  # every group kept while that suffices
        assert within.graph.num_groups == graph.num_groups


def test_a_units_part_is_the_group_of_its_coarse_nodes():
    """b -> a: the first node holds b, the coarse graph's group 0, which ``part_of_unit`` called part 1."""
    from gnplace.toy import toy_cluster

    co = coarsen(OpGraph(["a", "b"], [(1, 0)]), 2, toy_cluster(2))
    assert co.node_of_op.tolist() == [1, 0] and co.graph.group.tolist() == [0, 1]
    assert co.part_of_unit.tolist() == [1, 0]


def test_coarse_bytes_are_exact_sums_past_2_to_the_53_and_a_node_past_the_limit_is_refused_in_one_line():
    """Float sums past 2**53 bytes were rounded: a, of 2**53 bytes, and b, of 1, left the next node one byte short of
    the output it sends on (a coarse graph that refused itself), and parameters of 2**53 + 1 bytes summed to 2**53;
    a node past 2**62 bytes (FLOP, seconds) was the coarse graph's "node 'c0' has param_bytes too large
    (-9223372036854775808)"."""
    from gnplace.coarsen import node_peak_bytes
    from gnplace.exceptions import UnsupportedGraph
    from gnplace.toy import toy_cluster

    two = toy_cluster(2)
    g = OpGraph(["a", "b", "c", "e"], [(0, 1), (2, 3)], out_bytes=[2**53, 1, 3, 0], param_bytes=[2**53, 1, 0, 0],
                group=[0, 0, 1, 2])
    co = coarsen(g, 3, two)
    assert co.node_of_op.tolist() == [0, 0, 1, 2]
    assert co.graph.out_bytes.tolist() == [2**53 + 1, 3, 0] and co.graph.edge_bytes.tolist() == [3]
    assert co.graph.param_bytes.tolist() == [2**53 + 1, 0, 0]
    assert node_peak_bytes(g, co.node_of_op).tolist() == [2.0**53, 3.0, 0.0]
    for field, what in (("param_bytes", "bytes of parameters"), ("out_bytes", "bytes of outputs"), ("flops", "FLOP")):
        huge = OpGraph(["a", "b"], [(0, 1)], group=[0, 0], **{field: [2**62, 2**62]})
        with pytest.raises(UnsupportedGraph, match=r"^coarsening 'graph' to 1 groups: a coarse node would hold more "
                                                   rf"than 2\*\*62 {what}"):
            coarsen(huge, 1, two)
    measured = OpGraph(["a", "b"], [(0, 1)], group=[0, 0], cost_s={"k80": [2.0**62, 2.0**62]})
    with pytest.raises(UnsupportedGraph, match=r"than 2\*\*62 seconds on a k80, past the limit of any size$"):
        coarsen(measured, 1, two)


def test_module_units_keep_a_module_named_like_another_groups_placeholder_apart():
    """Each level's key was a string: a group's path prefix, or ``#k`` for group k without one at that level, in
    one table, so a module named ``#0.c`` took group 0's placeholder and joined it (a module ``a``) at level 1.
    The prefixes are numbered apart from the groups without one now (and each part looked up once, not each
    prefix joined again at every level: 0.75 s at 280,158 ops)."""
    g = OpGraph(["a", "b", "c"], [(0, 1), (1, 2)], flops=[1e9] * 3, module=["a", "#0.c", "x.y.z"])
    assert module_units(g, 2).tolist() == [0, 1, 2]  # no two groups share a module at any level
    joined = OpGraph(["a", "b", "c"], [(0, 1), (1, 2)], flops=[1e9] * 3, module=["m.a", "m.b", "x.y.z"])
    assert module_units(joined, 2).tolist() == [0, 0, 1]
    odd = ["", "a..b", "a..c", ".a.b", ".a.c", "a.", "a.x", "a.b.c.d", "a.b.c.e", "a.b.f", "", "q"]  # empty parts
    g = OpGraph([f"n{i}" for i in range(len(odd))], [(i, i + 1) for i in range(len(odd) - 1)],
                flops=[1e9] * len(odd), module=odd)
    for target in range(1, len(odd)):
        assert np.array_equal(module_units(g, target), _module_units_reference(g, target)), target


def test_heavy_edge_matching_merges_a_pair_whose_seconds_reach_the_cap_exactly():
    """A pair merges while its seconds sum to at most the cap: two 1 s ops to one group (cap 2 s) merge, a cap of 1.9 s
    keeps them apart (a mutant that merged only under the cap passed)."""
    g = chain_graph(2)
    assert heavy_edge_matching(g, np.ones(2), 1).tolist() == [0, 0]
    assert heavy_edge_matching(g, np.ones(2), 1, cap_factor=0.95).tolist() == [0, 1]


def test_module_units_take_a_level_that_leaves_a_quarter_of_the_target():
    """A level is refused only where it leaves fewer than a quarter of ``target`` units: three modules of eight ops,
    to 7 units, are taken (3 >= 7 / 4; a mutant that asked for half the target kept the eight ops apart)."""
    modules = ["m0.a", "m0.b", "m0.c", "m1.a", "m1.b", "m1.c", "m2.a", "m2.b"]
    g = OpGraph([f"v{i}" for i in range(8)], [(i, i + 1) for i in range(7)], module=modules)
    assert module_units(g, 7).tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
    assert module_units(g, 8).tolist() == list(range(8))  # 8 groups <= target: nothing to merge


def test_a_nodes_written_bytes_are_its_leaving_outputs_and_its_largest_internal_one():
    """a -> b -> c with a and b in node 0: b's 100 bytes leave it and a's 10 stay inside; c's 5 are the step's
    result. The largest internal output counts internal outputs alone (a mutant that took b's too passed)."""
    from gnplace.coarsen import node_output_bytes, node_written_bytes

    g = OpGraph(["a", "b", "c"], [(0, 1), (1, 2)], out_bytes=[10, 100, 5])
    node_of_op = np.array([0, 0, 1])
    leaving, largest, peak = node_output_bytes(g, node_of_op)
    assert leaving.tolist() == [100.0, 5.0] and largest.tolist() == [10.0, 0.0] and peak.tolist() == [110.0, 5.0]
    assert node_written_bytes(g, node_of_op).tolist() == [110.0, 5.0]


def test_metis_parts_leaves_units_no_more_than_the_parts_alone(monkeypatch):
    """As many units as parts: each is its own part, without METIS (a mutant that called it then passed)."""
    import pymetis

    from gnplace.coarsen import metis_parts

    def refused(*args, **kwargs):
        raise AssertionError("METIS called")

    monkeypatch.setattr(pymetis, "part_graph", refused)
    g = chain_graph(3)
    assert metis_parts(g, np.arange(3), np.ones(3), 3).tolist() == [0, 1, 2]
    assert metis_parts(g, np.arange(3), np.ones(3), 4).tolist() == [0, 1, 2]


def test_coarsen_within_coarsens_again_a_graph_one_node_over():
    """A 4-op chain within 3 nodes: its coarse graph of every group has 4, one over, so it is coarsened again (a
    mutant that let one node over pass returned 4)."""
    c = coarsen_within(chain_graph(4), 3, load_cluster("k80x2"))
    assert c.graph.num_ops <= 3
    assert coarsen_within(chain_graph(4), 4, load_cluster("k80x2")).graph.num_ops == 4


def test_module_units_take_a_level_that_leaves_exactly_a_quarter_of_the_target():
    """Two modules of nine ops, to 8 units: the level leaves 2 = 8 / 4 units, not fewer than a quarter, so it is
    taken (a mutant that refused a level leaving a quarter exactly kept the nine ops apart)."""
    modules = ["m0.a", "m0.b", "m0.c", "m0.d", "m0.e", "m1.a", "m1.b", "m1.c", "m1.d"]
    g = OpGraph([f"v{i}" for i in range(9)], [(i, i + 1) for i in range(8)], module=modules)
    assert module_units(g, 8).tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]


def test_a_coarse_graph_is_named_for_its_graph_and_group_count_and_records_what_it_was_coarsened_from():
    """chain4 to 2 groups is ``chain4@2``; its meta keeps the graph's and adds its name and op count."""
    g = chain_graph(4).replace(meta={"source": "toy"})
    coarse = coarsen(g, 2, load_cluster("k80x2")).graph
    assert coarse.name == "chain4@2"
    assert coarse.meta == {"source": "toy", "coarsened_from": "chain4", "original_ops": 4}


def test_a_coarse_node_of_exactly_two_to_the_62_flop_is_within_the_limit():
    """The limit refuses a node of more than 2**62 of anything: one of 2**62 FLOP exactly coarsens (a mutant that
    refused the limit itself passed)."""
    g = OpGraph(["a", "b"], [(0, 1)], flops=[2.0**62, 0.0], group=[0, 0])
    assert coarsen(g, 1, load_cluster("k80x2")).graph.flops.tolist() == [2.0**62]
