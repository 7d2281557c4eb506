"""Tests of ``gnplace.placers._listsched_kernel``: the array heaps and the compiled ETF and HEFT loops."""

from __future__ import annotations

import heapq

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gnplace.cluster import Cluster, Device, load_cluster
from gnplace.graph import OpGraph
from gnplace.placers._listsched_kernel import _pop, _push
from gnplace.placers.heft import heft_schedule
from gnplace.placers.listsched import ListSchedule, etf_schedule, interchangeable_devices, static_rank
from gnplace.sim.costmodel import op_times
from gnplace.toy import chain_graph


@settings(deadline=None, max_examples=60)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.booleans()), min_size=1, max_size=200))
def test_the_array_heaps_pop_what_heapq_pops(steps):
    """Pushes and pops on two heaps of capacity 4 (so they grow), keys with many ties, against ``heapq``."""
    keys, ops = np.empty((2, 4, 2)), np.empty((2, 4), dtype=np.int64)
    size = np.zeros(2, dtype=np.int64)
    reference: list[list[tuple[float, float, int]]] = [[], []]
    for v, (a, b, pop) in enumerate(steps):
        d = v % 2
        if pop and reference[d]:
            assert (keys[d, 0, 0], keys[d, 0, 1], ops[d, 0]) == heapq.heappop(reference[d])
            _pop(keys, ops, size, d)
        else:
            keys, ops = _push(keys, ops, size, d, float(a), float(b), v)
            heapq.heappush(reference[d], (float(a), float(b), v))
        assert size.tolist() == [len(r) for r in reference]
    for d in range(2):
        while reference[d]:
            assert (keys[d, 0, 0], keys[d, 0, 1], ops[d, 0]) == heapq.heappop(reference[d])
            _pop(keys, ops, size, d)
    assert size.tolist() == [0, 0]


def _assert_valid(s: ListSchedule, graph: OpGraph) -> None:
    """Every op placed with its group, after its inputs arrive, and no two ops of a device overlap."""
    assert np.all(s.op_device >= 0) and np.all(s.op_device == s.group_device[graph.group])
    for v in range(graph.num_ops):
        d = s.op_device[v]
        for e in range(s.in_ptr[v], s.in_ptr[v + 1]):
            p = s.in_src[e]
            arrive = s.finish[p] + s.latency[s.op_device[p], d] + s.in_bytes[e] * s.inv_bw[s.op_device[p], d]
            assert s.start[v] >= arrive - 1e-15
    for d in range(s.device_free.shape[0]):
        on = np.flatnonzero(s.op_device == d)
        order = on[np.argsort(s.start[on], kind="stable")]
        assert np.all(s.start[order][1:] >= s.finish[order][:-1] - 1e-15)
        assert s.device_free[d] == (s.finish[on].max() if on.size else 0.0)


def test_many_ready_ops_outgrow_the_first_heaps_and_schedule_validly():
    """300 independent ops with three consumers each on 8 devices: each device's heaps start with room for 53."""
    n = 300
    edges = [(i, n + i % 100) for i in range(n)]
    graph = OpGraph([f"op{i}" for i in range(n + 100)], edges, flops=np.full(n + 100, 1e9), out_bytes=np.full(n + 100, 1e6))
    cluster = load_cluster("v100x8")
    for schedule_with in (etf_schedule, heft_schedule):
        s = ListSchedule(graph, cluster, op_times(graph, cluster))
        schedule_with(s, static_rank(graph, s.op_time, cluster))
        _assert_valid(s, graph)
        assert len(set(s.op_device.tolist())) == 8  # the independent ops spread over every device


@settings(deadline=None, max_examples=25)
@given(st.integers(0, 2**32 - 1))
def test_schedules_of_random_graphs_are_valid(seed):
    from gnplace.toy import layered_graph

    rng = np.random.default_rng(seed)
    graph = layered_graph(int(rng.integers(2, 40)), width=3, seed=rng)
    cluster = load_cluster(["k80x2", "cpu_gpu", "tight4"][int(rng.integers(3))])
    for schedule_with in (etf_schedule, heft_schedule):
        s = ListSchedule(graph, cluster, op_times(graph, cluster), min_speed=float(rng.random()))
        schedule_with(s, rng.random(graph.num_ops))
        _assert_valid(s, graph)


def test_the_schedulers_compile_each_helper_once_for_a_graph_and_its_unpickled_copy():
    """numba compiles a function per argument types: a literal ``-1`` or ``0``, or a writable array where a
    read-only one came before, compiled a helper again (seconds in each process that schedules)."""
    import pickle

    from numba.core import types

    from gnplace.placers import _listsched_kernel as kernel
    from gnplace.placers import make_placer
    from gnplace.toy import layered_graph

    def schedule(graph: OpGraph, cluster: Cluster) -> dict[str, set]:
        """Place with the three list schedulers; the signatures their kernels are compiled for then."""
        for name in ("heft", "m_etf", "m_sct"):
            make_placer(name).place(graph, cluster, seed=0)
        return {name: set(getattr(kernel, name).signatures) for name in ("etf_kernel", "heft_kernel")}

    graph, cluster = layered_graph(30, width=4, seed=3), load_cluster("tight4")
    compiled = schedule(graph, cluster)
    assert schedule(*pickle.loads(pickle.dumps((graph, cluster)))) == compiled
    for name in ("_assign", "_fits", "_push", "_pop", "_ready_time", "_candidates"):
        literal = [sig for sig in getattr(kernel, name).signatures if any(isinstance(t, types.Literal) for t in sig)]
        assert not literal, f"{name} compiled for literal arguments: {literal}"


def alike_k80s(count: int) -> Cluster:
    """``count`` K80s on Placeto's links, every device alike (interchangeable while none has an op)."""
    from gnplace.cluster import DEVICE_KINDS, LINK_KINDS, Device

    link = LINK_KINDS["placeto"]
    return Cluster([Device(f"gpu{k}", "k80", **DEVICE_KINDS["k80"]) for k in range(count)],
                   np.full((count, count), link["bandwidth"]), np.full((count, count), link["latency"]))


def test_etf_lists_ready_ops_on_one_of_many_alike_devices_without_ops():
    """On 512 alike K80s ETF listed every ready op on all 512 (2026-12-04: 40 s of m_etf's 47.5 s on 93,567 ops and
    4,096 K80s); devices without ops have one device's heaps a class now, and the schedule is that of all heaps."""
    from gnplace.placers._listsched_kernel import etf_kernel
    from gnplace.placers.listsched import interchangeable_devices
    from gnplace.toy import layered_graph

    graph, d = layered_graph(300, seed=0), 512
    cluster = alike_k80s(d)
    rank = static_rank(graph, op_times(graph, cluster), cluster)
    runs = []
    for alike in (True, False):
        s = ListSchedule(graph, cluster, op_times(graph, cluster), min_speed=0.5)
        twin = interchangeable_devices(s) if alike else np.arange(d)
        listings = etf_kernel(s.op_time, -rank, np.full(graph.num_ops, -1), np.zeros(graph.num_ops), *s.arrays(), twin)
        runs.append((listings, s.op_device.tolist(), s.start.tolist()))
    (fewer, *twins), (every, *separate) = runs
    assert twins == separate
    assert every >= graph.num_ops * d and fewer < graph.num_ops * 20



def test_heft_weighs_one_of_many_alike_devices_without_ops():
    """On 512 alike K80s HEFT weighed every device for every op; now the devices in use and one idle device a class,
    with the schedule of weighing them all."""
    from gnplace.placers._listsched_kernel import heft_kernel
    from gnplace.placers.listsched import interchangeable_devices
    from gnplace.toy import layered_graph

    graph, d = layered_graph(300, seed=0), 512
    cluster = alike_k80s(d)
    rank = static_rank(graph, op_times(graph, cluster), cluster)
    runs = []
    for alike in (True, False):
        s = ListSchedule(graph, cluster, op_times(graph, cluster))
        twin = interchangeable_devices(s) if alike else np.arange(d)
        runs.append((heft_kernel(s.op_time, s.group_time, -rank, *s.arrays(), twin), s.op_device.tolist(),
                     s.start.tolist()))
    (fewer, *twins), (every, *separate) = runs
    assert twins == separate
    assert every == graph.num_ops * d and fewer < graph.num_ops * 20


def test_devices_the_first_of_their_class_reaches_over_other_links_are_not_twins():
    """gpu1 and gpu2 each match gpu0 from the third device's side, but gpu0 reaches gpu1 at 40 GB/s and gpu2 at
    12 GB/s (one-way links): gpu1 is gpu0's twin, gpu2 its own, not all three one class."""
    devices = [Device(name=f"gpu{i}", kind="k80", peak_flops=2.8e12, mem_bandwidth=240e9, memory=12 * 2**30)
               for i in range(3)]
    bandwidth = np.array([[np.inf, 40e9, 12e9], [12e9, np.inf, 12e9], [6e9, 6e9, np.inf]])
    cluster = Cluster(devices, bandwidth, np.full((3, 3), 1e-5) - np.eye(3) * 1e-5, name="one_way")
    graph = chain_graph(2)
    assert interchangeable_devices(ListSchedule(graph, cluster, op_times(graph, cluster))).tolist() == [0, 0, 2]
