"""Hand-computed cases and properties of the step simulator."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnplace.cluster import Cluster, load_cluster
from gnplace.exceptions import InvalidPlacement
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.sim import Simulator, lower_bound, simulate
from gnplace.sim.simulator import PLACETO_OP_GAP, PLACETO_TRANSFER_GAP
from gnplace.toy import layered_graph, mlp_training_graph, toy_cluster


def unit_cluster(num_devices: int = 2, *, bandwidth: float = 1e6, latency: float = 1e-3, memory: float = 1e12) -> Cluster:
    """Devices of kind 'unit' (graphs give measured op times for it), links of 1 MB/s and 1 ms."""
    return toy_cluster(num_devices, kind="unit", peak_flops=1e12, mem_bandwidth=1e12, memory=memory, launch_overhead=0.0,
                       bandwidth=bandwidth, latency=latency, prefix="d", name=f"unit{num_devices}")


def timed_graph(names, edges, seconds, out_bytes, param_bytes=None) -> OpGraph:
    """A graph whose ops take exactly ``seconds`` on 'unit' devices."""
    return OpGraph(names, edges, out_bytes=out_bytes, param_bytes=param_bytes, cost_s={"unit": seconds}, name="hand")


# ------------------------------------------------------------------------------- hand cases
def test_chain_on_one_device_is_sum_of_op_times():
    g = timed_graph(["a", "b", "c"], [(0, 1), (1, 2)], [1.0, 2.0, 0.5], [10, 10, 10])
    r = simulate(g, unit_cluster(), [0, 0, 0], timeline=True)
    assert r.step_time == pytest.approx(3.5)
    assert r.timeline.op_start.tolist() == pytest.approx([0.0, 1.0, 3.0])
    assert r.timeline.num_transfers == 0
    assert r.busy_time.tolist() == pytest.approx([3.5, 0.0])


def test_fork_across_two_devices_waits_for_its_transfers():
    # src(1) -> left(2) on d0, right(3) on d1, both -> sink(1) on d0; 1e6 B at 1e6 B/s + 1 ms latency
    g = timed_graph(["src", "left", "right", "sink"], [(0, 1), (0, 2), (1, 3), (2, 3)], [1, 2, 3, 1], [10**6] * 4)
    r = simulate(g, unit_cluster(), [0, 0, 1, 0], timeline=True)
    t = r.timeline
    assert t.num_transfers == 2
    assert t.xfer_node.tolist() == [0, 2]
    assert t.xfer_start.tolist() == pytest.approx([1.0, 5.001])
    assert t.xfer_end.tolist() == pytest.approx([2.001, 6.002])
    assert t.op_start.tolist() == pytest.approx([0.0, 1.0, 2.001, 6.002])
    assert r.step_time == pytest.approx(7.002)


def test_shared_output_is_sent_once_per_device():
    # src on d0 feeds three ops on d1 and one on d2: two transfers, not four
    names = ["src", "a", "b", "c", "d"]
    g = timed_graph(names, [(0, 1), (0, 2), (0, 3), (0, 4)], [1] * 5, [1000] * 5)
    r = simulate(g, unit_cluster(3), [0, 1, 1, 1, 2], timeline=True)
    t = r.timeline
    assert sorted(zip(t.xfer_node.tolist(), t.xfer_dst.tolist())) == [(0, 1), (0, 2)]
    # three consumers queue on d1 after one arrival at 1 + 0.001 + 0.001
    assert r.step_time == pytest.approx(1.002 + 3.0)


def test_one_transfer_at_a_time_per_link_direction():
    # two producers on d0 end together; their outputs to d1 share the d0->d1 link
    g = timed_graph(["p", "q", "x", "y"], [(0, 2), (1, 3)], [1, 1, 1, 1], [10**6, 10**6, 0, 0])
    c = unit_cluster(3, latency=0.0)
    r = simulate(g, c, [0, 2, 1, 1], timeline=True)
    # p on d0 and q on d2 use different links: both arrive at 1 + 1
    assert r.timeline.xfer_end.tolist() == pytest.approx([2.0, 2.0])
    g2 = timed_graph(["p", "q", "x", "y"], [(0, 2), (1, 2), (1, 3)], [1, 1, 1, 1], [10**6, 10**6, 0, 0])
    r2 = simulate(g2, c, [0, 0, 1, 1], timeline=True)
    # p ends at 1, q at 2 on the same device; the second transfer waits for nothing but q
    assert sorted(r2.timeline.xfer_end.tolist()) == pytest.approx([2.0, 3.0])
    g3 = OpGraph(["p", "q", "r", "x"], [(0, 3), (1, 3), (2, 3)], out_bytes=[10**6] * 3 + [0],
                 cost_s={"unit": [1.0, 1.0, 1.0, 1.0]})
    c4 = unit_cluster(4, latency=0.0)
    # three producers on three devices send to d3 over three distinct links, in parallel
    r3 = simulate(g3, c4, [0, 1, 2, 3], timeline=True)
    assert r3.timeline.xfer_end.tolist() == pytest.approx([2.0, 2.0, 2.0])


def test_transfer_to_a_device_carries_its_edges_capped_at_the_output_size():
    # both consumers on d1 need 1e6 + 1e5 bytes of an output of 1e6 bytes: one transfer of 1e6
    g = OpGraph(["p", "a", "b"], [(0, 1), (0, 2)], out_bytes=[10**6, 0, 0], edge_bytes=[10**6, 10**5],
                cost_s={"unit": [1.0, 1.0, 1.0]})
    r = simulate(g, unit_cluster(2), [0, 1, 1], timeline=True)
    assert r.timeline.xfer_bytes.tolist() == [10**6]
    g2 = g.replace(edge_bytes=[10**5, 2 * 10**5])
    assert simulate(g2, unit_cluster(2), [0, 1, 1], timeline=True).timeline.xfer_bytes.tolist() == [3 * 10**5]


def test_link_serialises_back_to_back_transfers():
    # p1, p2 on d0 each send 1 MB to d1: the second waits for the first on the d0 -> d1 link
    g = timed_graph(["p1", "p2", "c1", "c2"], [(0, 2), (1, 3)], [1.0, 0.1, 0.0, 0.0], [10**6, 10**6, 0, 0])
    r = simulate(g, unit_cluster(latency=0.0), [0, 0, 1, 1], timeline=True)
    t = r.timeline
    assert t.xfer_start.tolist() == pytest.approx([1.0, 2.0])
    assert t.xfer_end.tolist() == pytest.approx([2.0, 3.0])
    assert r.step_time == pytest.approx(3.0)


def test_memory_freed_after_last_consumer():
    # a(100) -> b(200) -> c(50): peak when b runs with a still live
    g = timed_graph(["a", "b", "c"], [(0, 1), (1, 2)], [1, 1, 1], [100, 200, 50])
    assert simulate(g, unit_cluster(), [0, 0, 0]).peak_memory.tolist() == [300.0, 0.0]
    # a also feeds c: a stays live until c ends
    g2 = timed_graph(["a", "b", "c"], [(0, 1), (1, 2), (0, 2)], [1, 1, 1], [100, 200, 50])
    assert simulate(g2, unit_cluster(), [0, 0, 0]).peak_memory.tolist() == [350.0, 0.0]


def test_memory_freed_at_an_instant_is_free_for_what_starts_then():
    # a (d0) and b (d1) both end at t=1; b's output has no consumer and is freed then, when a's
    # output starts arriving on d1 for c: d1 never holds both (found by the reference-sweep property)
    g = timed_graph(["a", "b", "c"], [(0, 2)], [1, 1, 1], [100, 100, 0])
    r = simulate(g, unit_cluster(), [0, 1, 1], timeline=True)
    assert r.timeline.op_end[0] == r.timeline.op_end[1] == r.timeline.xfer_start[0]
    assert r.peak_memory.tolist() == [100.0, 100.0]


def test_memory_counts_parameters_and_received_copies():
    g = timed_graph(["a", "b"], [(0, 1)], [1, 1], [100, 10], param_bytes=[1000, 7])
    r = simulate(g, unit_cluster(), [0, 1])
    # d0: parameters 1000 + output 100 (live until its transfer ends); d1: 7 + received 100 + own 10
    assert r.peak_memory.tolist() == [1100.0, 117.0]


def test_out_of_memory_is_flagged_per_device():
    g2 = timed_graph(["a", "b", "c"], [(0, 1), (1, 2), (0, 2)], [1, 1, 1], [100, 200, 50])
    r = simulate(g2, unit_cluster(memory=320), [0, 0, 0])
    assert r.oom.tolist() == [True, False] and r.is_oom
    ok = simulate(g2, unit_cluster(memory=350), [0, 0, 0])
    assert not ok.is_oom


# ------------------------------------------------------------------------------- placeto mode
def test_placeto_mode_hand_case():
    us = 1e-6
    # src(10us) d0 -> left(20us) d0, right(30us) d1 -> sink(10us) d0; 7,600 B take 1 us on the channel
    g = timed_graph(["src", "left", "right", "sink"], [(0, 1), (0, 2), (1, 3), (2, 3)],
                    [10 * us, 20 * us, 30 * us, 10 * us], [7600] * 4)
    r = Simulator("placeto").time(g, unit_cluster(), [0, 0, 1, 0], timeline=True)
    t = r.timeline
    assert t.op_start.tolist() == pytest.approx([0.0, 15.7 * us, 11 * us, 42 * us])
    assert t.xfer_start.tolist() == pytest.approx([10 * us, 41 * us])
    assert t.xfer_end.tolist() == pytest.approx([11 * us, 42 * us])
    assert r.step_time == pytest.approx(52 * us)


def test_placeto_mode_counts_memory_as_the_default_mode_does_the_readmes_example():
    """The README's example: a received copy is counted on its receiver (Placeto's rule would give 76 and 1 MB)."""
    g = OpGraph(["a", "b"], [(0, 1)], flops=[1e9, 1e9], out_bytes=[76e6, 1e6])
    for mode in ("placeto", "default"):
        assert Simulator(mode).time(g, load_cluster("k80x2"), [0, 1]).peak_memory.tolist() == [76e6, 77e6]


def test_placeto_mode_sends_once_to_all_remote_devices_and_channel_waits():
    us = 1e-6
    # src on d0 feeds d1 and d2 with one transfer; a second output of d0 waits 25 us on the channel
    g = timed_graph(["src", "a", "b", "src2", "c"], [(0, 1), (0, 2), (3, 4)],
                    [10 * us, 1 * us, 1 * us, 1 * us, 1 * us], [7600, 0, 0, 7600, 0])
    r = Simulator("placeto").time(g, unit_cluster(3), [0, 1, 2, 0, 1], timeline=True)
    t = r.timeline
    assert t.xfer_dst.tolist() == [-1, -1]
    assert t.xfer_start.tolist() == pytest.approx([10 * us, 11 * us + PLACETO_TRANSFER_GAP])
    assert t.op_start[1] == pytest.approx(11 * us) and t.op_start[2] == pytest.approx(11 * us)


def test_placeto_gap_only_after_nonzero_ops():
    us = 1e-6
    g = timed_graph(["a", "b", "c"], [(0, 1), (1, 2)], [1 * us, 0.0, 1 * us], [0, 0, 0])
    r = Simulator("placeto").time(g, unit_cluster(), [0, 0, 0])
    assert r.step_time == pytest.approx(2 * us + PLACETO_OP_GAP)


# ------------------------------------------------------------------------------- API
def test_message_cpu_is_charged_to_the_next_op_in_the_default_mode_alone():
    """a (d0) ends while c computes on d1: d0's next op, e, pays 0.25 s; a's copy reaches d1 while e computes on
    d0: d1's next op, b, pays 0.25 s. Placeto's mode charges none (the README's cost model, a device's docstring)."""
    import dataclasses

    base = unit_cluster()
    devices = [dataclasses.replace(dev, message_cpu=0.25) for dev in base.devices]
    cluster = Cluster(devices, base.bandwidth, base.latency, name="msg")
    g = timed_graph(["a", "b", "c", "e"], [(0, 1), (0, 3)], [1.0, 1.0, 2.0, 1.0], [0, 0, 0, 0])
    r = simulate(g, cluster, [0, 1, 1, 0], timeline=True)
    assert r.timeline.op_end.tolist() == [1.0, 3.25, 2.0, 2.25]
    assert r.step_time == 3.25 and r.busy_time.tolist() == [2.25, 3.25]
    p = simulate(g, cluster, [0, 1, 1, 0], mode="placeto")
    assert p.step_time == pytest.approx(3.0 + PLACETO_OP_GAP) and p.busy_time.tolist() == [2.0, 3.0]
    assert simulate(g, base, [0, 1, 1, 0]).step_time == 3.0  # none set: none charged


def test_invalid_placements_are_rejected():
    g = timed_graph(["a", "b"], [(0, 1)], [1, 1], [1, 1])
    c = unit_cluster()
    with pytest.raises(InvalidPlacement, match="placement has 3 entries"):
        simulate(g, c, [0, 0, 0])
    with pytest.raises(InvalidPlacement, match="op 'b' is placed on device 5"):
        simulate(g, c, [0, 5])
    with pytest.raises(InvalidPlacement, match="expected"):
        Simulator().time_batch(g, c, np.zeros((3, 5), dtype=int))
    with pytest.raises(InvalidPlacement, match="outside"):
        Simulator().time_batch(g, c, np.full((3, 2), 2))
    with pytest.raises(ValueError, match="unknown simulator mode"):
        Simulator("fast")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", [["default"], {"mode": "default"}, None, 1])
def test_a_mode_that_is_no_name_is_unknown(mode):
    """A list or dict was an unhashable-type TypeError of the modes' dict (Simulator) or the shared simulators'."""
    from gnplace.exceptions import UnknownName

    g, c = mlp_training_graph(layers=2), load_cluster("k80x2")
    with pytest.raises(UnknownName, match=r"^unknown simulator mode .* \(choose 'default' or 'placeto'\)$"):
        Simulator(mode)
    with pytest.raises(UnknownName, match="^unknown simulator mode"):
        simulate(g, c, [0] * g.num_ops, mode=mode)


@pytest.mark.parametrize("timeline", ["no", 1, None])
def test_a_timeline_that_is_no_bool_is_refused(timeline):
    """simulate(..., timeline="no") read the string as true and recorded the timeline."""
    from gnplace.exceptions import InvalidArgument

    g, c = mlp_training_graph(layers=2), load_cluster("k80x2")
    with pytest.raises(InvalidArgument, match=r"^simulate: timeline must be true or false, got "):
        simulate(g, c, [0] * g.num_ops, timeline=timeline)
    assert simulate(g, c, [0] * g.num_ops, timeline=np.bool_(True)).timeline is not None


def test_placement_by_names_and_object_agree():
    g = mlp_training_graph(layers=2, width=64, batch=8)
    c = load_cluster("k80x2")
    devices = np.arange(g.num_ops) % 2
    by_index = simulate(g, c, devices)
    by_object = simulate(g, c, Placement(devices, c))
    by_names = simulate(g, c, Placement(devices, c).device_names(g))
    assert by_index.step_time == by_object.step_time == by_names.step_time


@pytest.mark.parametrize("mode", ["default", "placeto"])
def test_batch_matches_single_evaluations(mode):
    g = layered_graph(300, seed=3)
    c = load_cluster("k80x4")
    rng = np.random.default_rng(0)
    placements = rng.integers(0, 4, size=(16, g.num_ops))
    sim = Simulator(mode)
    batch = sim.time_batch(g, c, placements)
    for b in range(16):
        one = sim.time(g, c, placements[b])
        assert batch.step_time[b] == one.step_time
        assert np.array_equal(batch.peak_memory[b], one.peak_memory)
        assert np.array_equal(batch.busy_time[b], one.busy_time)


def test_deterministic():
    g = layered_graph(500, seed=1)
    c = load_cluster("v100x8")
    p = np.random.default_rng(2).integers(0, 8, g.num_ops)
    a, b = simulate(g, c, p, timeline=True), simulate(g, c, p, timeline=True)
    assert a.step_time == b.step_time
    assert np.array_equal(a.timeline.op_start, b.timeline.op_start)


def test_repr_and_to_dict():
    assert repr(Simulator("placeto")) == "Simulator(mode='placeto')"
    g = mlp_training_graph(layers=2, width=64, batch=8)
    d = simulate(g, load_cluster("k80x2"), np.zeros(g.num_ops, dtype=int)).to_dict()
    assert set(d) == {"step_time_s", "oom", "devices"}
    assert d["devices"][0]["utilisation"] == pytest.approx(1.0)


# ------------------------------------------------------------------------------- properties
def reference_peaks(g: OpGraph, devices: np.ndarray, t, num_devices: int) -> np.ndarray:
    """Peak memory recomputed from a timeline by a plain sweep (frees before allocations at equal times)."""
    changes: list[tuple[float, int, int, float]] = []  # (time, order, device, delta)
    base = np.bincount(devices, weights=g.param_bytes, minlength=num_devices).astype(float)
    ptr, dst, _ = g.out_csr
    for u in range(g.num_ops):
        du = int(devices[u])
        consumers = dst[ptr[u]:ptr[u + 1]]
        local_ends = [t.op_end[w] for w in consumers if devices[w] == du]
        sends = [t.xfer_end[x] for x in np.flatnonzero(t.xfer_node == u)]
        free_at = max(local_ends + sends + [t.op_end[u]])
        changes += [(t.op_start[u], 1, du, float(g.out_bytes[u])), (free_at, 0, du, -float(g.out_bytes[u]))]
    for x in range(t.num_transfers):
        u, k = int(t.xfer_node[x]), int(t.xfer_dst[x])
        ends = [t.op_end[w] for w in dst[ptr[u]:ptr[u + 1]] if devices[w] == k]
        changes += [(t.xfer_start[x], 1, k, float(t.xfer_bytes[x])), (max(ends), 0, k, -float(t.xfer_bytes[x]))]
    mem, peak = base.copy(), base.copy()
    for _, _, k, delta in sorted(changes):
        mem[k] += delta
        peak[k] = max(peak[k], mem[k])
    return peak


@st.composite
def placed_graphs(draw):
    n = draw(st.integers(1, 40))
    edges = sorted({(u, v) for v in range(1, n) for u in draw(st.sets(st.integers(0, v - 1), max_size=3))})
    seconds = draw(st.lists(st.floats(1e-6, 1e-2), min_size=n, max_size=n))
    out_bytes = draw(st.lists(st.integers(0, 10**7), min_size=n, max_size=n))
    params = draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n))
    d = draw(st.integers(1, 4))
    devices = np.array(draw(st.lists(st.integers(0, d - 1), min_size=n, max_size=n)))
    g = OpGraph([f"n{i}" for i in range(n)], edges, out_bytes=out_bytes, param_bytes=params, cost_s={"unit": seconds})
    return g, unit_cluster(d, bandwidth=1e9, latency=1e-5), devices


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_graphs())
def test_step_time_is_at_least_the_bound(case):
    g, c, devices = case
    sim = Simulator()
    r = sim.time(g, c, devices)
    bound = lower_bound(g, c, times=sim.cost_model.op_times(g, c))
    assert r.step_time >= bound.value * (1 - 1e-12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_graphs())
def test_schedule_respects_devices_links_and_dependencies(case):
    g, c, devices = case
    r = simulate(g, c, devices, timeline=True)
    t = r.timeline
    eps = 1e-12
    for k in range(c.num_devices):  # one op at a time per device
        on_k = np.flatnonzero(devices == k)
        order = on_k[np.argsort(t.op_start[on_k], kind="stable")]
        assert np.all(t.op_start[order][1:] >= t.op_end[order][:-1] - eps)
    for a in range(c.num_devices):  # one transfer at a time per link direction
        for b in range(c.num_devices):
            xs = np.flatnonzero((t.xfer_src == a) & (t.xfer_dst == b))
            order = xs[np.argsort(t.xfer_start[xs], kind="stable")]
            assert np.all(t.xfer_start[order][1:] >= t.xfer_end[order][:-1] - eps)
    for u, v in zip(g.edge_src.tolist(), g.edge_dst.tolist()):  # inputs present before start
        if devices[u] == devices[v]:
            assert t.op_start[v] >= t.op_end[u] - eps
        else:
            x = np.flatnonzero((t.xfer_node == u) & (t.xfer_dst == devices[v]))
            assert x.size == 1 and t.xfer_start[x[0]] >= t.op_end[u] - eps
            assert t.op_start[v] >= t.xfer_end[x[0]] - eps
    assert r.step_time == pytest.approx(float(t.op_end.max()))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_graphs())
def test_peak_memory_matches_a_reference_sweep(case):
    g, c, devices = case
    r = simulate(g, c, devices, timeline=True)
    assert r.peak_memory == pytest.approx(reference_peaks(g, devices, r.timeline, c.num_devices))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_graphs(), st.sampled_from(["default", "placeto"]))
def test_single_device_step_is_sum_of_op_times_plus_gaps(case, mode):
    g, c, _ = case
    sim = Simulator(mode)
    r = sim.time(g, c, np.zeros(g.num_ops, dtype=int))
    times = sim.cost_model.op_times(g, c)[:, 0]
    gaps = (g.num_ops - 1) * PLACETO_OP_GAP if mode == "placeto" else 0.0  # every op here costs > 0
    assert r.step_time == pytest.approx(times.sum() + gaps, rel=1e-9)
    assert r.busy_time[0] == pytest.approx(times.sum(), rel=1e-9)


def test_placeto_mode_charges_an_op_after_its_devices_gap_when_it_starts():
    # a's 100 MB output is freed when its 1 kB transfer ends, 0.13 us after a; b starts after the 5.7 us op gap.
    # Charged when gpu0 chose b (at a's end), b's 100 MB were counted beside a's: a peak of 200 MB, not 100
    mb = 10**6
    graph = OpGraph(["a", "b", "c"], [(0, 2)], flops=[1e9, 1e9, 1e9], out_bytes=[100 * mb, 100 * mb, 0],
                    edge_bytes=[1000])
    result = Simulator("placeto").time(graph, toy_cluster(2), [0, 0, 1], timeline=True)
    timeline = result.timeline
    assert timeline.op_end[0] < timeline.xfer_end[0] < timeline.op_start[1]  # a freed, then b starts
    assert timeline.op_start[1] == pytest.approx(timeline.op_end[0] + PLACETO_OP_GAP)
    assert result.peak_memory[0] == 100 * mb


@pytest.mark.parametrize(("edges", "out_mb", "seconds", "peak_mb"), [
    ([(0, 1)], [0, 100], [1e-3, 0.0], 100),  # b, a zero-second sink, writes 100 MB nobody reads
    ([(0, 1), (1, 2)], [100, 100, 0], [1e-3, 0.0, 1e-3], 200),  # b reads a's 100 MB and writes its own 100 MB
])
def test_a_zero_second_op_holds_its_inputs_and_output_after_a_gap_as_without_one(edges, out_mb, seconds, peak_mb):
    # Placeto's device idles 5.7 us after a, so b is charged when it starts, at the instant it ends and frees:
    # its output and inputs were never counted together (peaks 0 and 100 MB); without the gap they were
    mb = 10**6
    g = OpGraph([f"n{i}" for i in range(len(out_mb))], edges, out_bytes=[x * mb for x in out_mb],
                cost_s={"k80": seconds})
    c = toy_cluster(1)
    for mode in ("default", "placeto"):
        assert Simulator(mode).time(g, c, [0] * g.num_ops).peak_memory[0] == peak_mb * mb, mode


def test_one_compiled_kernel_serves_time_time_batch_and_an_unpickled_graph_and_cluster():
    """numba compiles a kernel per argument types (read-only is one): each extra one took seconds per process."""
    import pickle

    from gnplace.sim import _kernel

    graph, cluster = layered_graph(10, width=3, seed=2), load_cluster("k80x2")
    devices = np.arange(10) % 2
    sim = Simulator()
    sim.time(graph, cluster, devices)
    sim.time_batch(graph, cluster, [devices])
    compiled = {name: set(getattr(_kernel, name).signatures) for name in ("simulate_step", "simulate_many")}
    again, moved = pickle.loads(pickle.dumps((graph, cluster)))
    sim.time(again, moved, devices)
    sim.time(again, moved, Placement(devices, moved))
    sim.time_batch(again, moved, [devices])
    assert {name: set(getattr(_kernel, name).signatures) for name in compiled} == compiled


def test_the_tests_and_the_processes_they_start_time_batches_on_one_numba_thread():
    """Each of ``make test``'s two xdist workers ran numba's batch kernel on a thread per core: every batch waited at
    OpenMP's barrier for a thread the other worker held (tests/placers/test_annealing.py and test_random_search.py,
    42 s on two threads, 11 s on one, on the loaded 2-core VM). conftest.py sets one before numba is imported."""
    import os

    import numba

    assert numba.config.NUMBA_NUM_THREADS == 1 and os.environ["NUMBA_NUM_THREADS"] == "1"


def test_the_first_batch_of_a_process_leaves_torchs_thread_count_as_it_was():
    """numba's first parallel call starts its OpenMP pool, which set torch's thread count to one per core: a
    fine-tuning that had set one thread trained on two in the first run of a process only (another placement)."""
    import os
    import subprocess
    import sys

    code = ("import torch; torch.set_num_threads(1)\n"
            "x = torch.ones(256, 256); x @ x  # torch's own OpenMP pool started, as a search's policy had\n"
            "import numpy as np\n"
            "from gnplace.cluster import load_cluster\n"
            "from gnplace.sim import Simulator\n"
            "from gnplace.toy import layered_graph\n"
            "Simulator().time_batch(layered_graph(20, width=3, seed=0), load_cluster('k80x2'), np.zeros((4, 20), int))\n"
            "print(torch.get_num_threads())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NUMBA_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1"]


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork here")
@pytest.mark.parametrize("start", ["batch(0)", "import numba; numba.set_num_threads(1)",
                                   "import numba; numba.get_num_threads()",
                                   "from gnplace.workers import limit_threads; limit_threads(1)"])
def test_a_process_forked_after_numbas_pool_started_times_its_batches(start):
    """A worker forked after numba's OpenMP pool started in the parent, by the parent's first batch (a multiprocessing
    pool under Linux's default start method) or by ``numba.set_num_threads`` / ``get_num_threads``
    (:func:`gnplace.workers.limit_threads`, ``threads_kept``) before any, was ended by GNU OpenMP at its first batch
    ("fork() called from a process already using GNU OpenMP"): a BrokenProcessPool in the parent. It times them row
    by row, as the parent does in parallel."""
    import os
    import subprocess
    import sys

    code = ("import multiprocessing as mp\n"
            "from concurrent.futures import ProcessPoolExecutor\n"
            "import numpy as np\n"
            "from gnplace.cluster import load_cluster\n"
            "from gnplace.sim import Simulator\n"
            "from gnplace.toy import layered_graph\n"
            "g, c = layered_graph(20, width=3, seed=0), load_cluster('k80x2')\n"
            "rows = np.random.default_rng(0).integers(0, 2, (6, 20))\n"
            "def batch(_):\n"
            "    r = Simulator().time_batch(g, c, rows)\n"
            "    return r.step_time.tolist(), r.busy_time.tolist(), r.peak_memory.tolist()\n"
            f"{start}\n"
            "with ProcessPoolExecutor(1, mp_context=mp.get_context('fork')) as pool:\n"
            "    there = pool.submit(batch, 0).result()\n"
            "print(there == batch(0))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NUMBA_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True"]


def test_a_simulator_keeps_16_graphs_prepared_by_default():
    """The documented default of ``cache_size`` (a mutant of it passed)."""
    assert Simulator().cache_size == 16 and Simulator("placeto").cache_size == 16


@pytest.mark.parametrize("size", [-1, 2.5, True, "16"])
def test_a_cache_size_that_is_not_a_count_is_refused(size):
    """-1 emptied the cache and then popped from it: a KeyError on the first time()."""
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match="cache_size must be a whole number >= 0"):
        Simulator(cache_size=size)


def test_a_cache_of_none_still_times():
    g, c = layered_graph(40, seed=0), load_cluster("k80x2")
    p = (np.arange(g.num_ops) % 2).astype(np.int64)
    assert Simulator(cache_size=0).time(g, c, p).step_time == Simulator().time(g, c, p).step_time


@pytest.mark.parametrize("mode", ["default", "placeto"])
def test_a_large_cluster_times_a_placement_as_a_small_one_of_the_devices_it_uses(mode):
    """Past ``DENSE_LINKS`` devices the kernel keeps state for the links and devices used alone (it held [ops,
    devices] and [devices, devices] arrays: 0.4 s a simulation on 4,096 devices); an op feeding 40 devices
    sorts its receivers otherwise than one feeding a few."""
    from gnplace.cluster import cluster_from_dict
    from gnplace.sim._kernel import DENSE_LINKS

    def cluster(count):
        return cluster_from_dict({"name": f"c{count}", "devices": [{"name": "v", "count": 3, "kind": "v100"},
                                                                   {"name": "g", "count": count - 3, "kind": "k80"}],
                                  "links": {"default": "pcie3"}})

    m = 40
    star = OpGraph([f"o{i}" for i in range(m + 2)],
                   [(0, i) for i in range(1, m + 1)] + [(i, m + 1) for i in range(1, m + 1)] + [(0, m + 1)],
                   flops=[1e9] * (m + 2), out_bytes=[1e6] * (m + 2), param_bytes=[1e5] * (m + 2), name="star")
    rng = np.random.default_rng(0)
    small, large = cluster(DENSE_LINKS), cluster(4096)
    sim = Simulator(mode)
    for graph in (star, layered_graph(400, width=12, seed=3)):
        rows = np.stack([rng.permutation(graph.num_ops) % 48, rng.integers(0, 5, graph.num_ops),
                         np.arange(graph.num_ops) % 48, (np.arange(graph.num_ops) * 7) % 41])
        a, b = sim.time_batch(graph, small, rows), sim.time_batch(graph, large, rows)
        assert np.array_equal(a.step_time, b.step_time) and len(np.unique(a.step_time)) == len(rows)
        assert np.array_equal(a.peak_memory, b.peak_memory[:, :DENSE_LINKS]) and not b.peak_memory[:, 48:].any()
        one = sim.time(graph, large, rows[0], timeline=True)
        assert one.step_time == a.step_time[0] and one.timeline.num_transfers > 0


def test_memory_filled_exactly_is_not_out_of_memory():
    """A device runs out of memory above its capacity, not at it: in time and in time_batch alike."""
    from gnplace.cluster import Device
    from gnplace.toy import uniform_cluster

    c = uniform_cluster([Device("d0", "gpu", peak_flops=1e12, mem_bandwidth=1e11, memory=1000)], bandwidth=1e9,
                        latency=0.0, name="one")
    g = OpGraph(["w", "x"], [(0, 1)], flops=[1e6, 1e6], out_bytes=[0, 0], param_bytes=[600, 400])
    sim = Simulator()
    assert sim.time(g, c, [0, 0]).peak_memory[0] == 1000 and not sim.time(g, c, [0, 0]).is_oom
    assert sim.time_batch(g, c, np.zeros((1, 2), dtype=np.int64)).oom.tolist() == [False]
    assert sim.time_batch(g.replace(param_bytes=[600, 401]), c, np.zeros((1, 2), dtype=np.int64)).oom.tolist() == [True]


def test_the_cache_keeps_the_graphs_used_last():
    """``cache_size`` graphs stay prepared, the least recently used is dropped first."""
    c = load_cluster("k80x2")
    g1, g2, g3 = (layered_graph(10, seed=s) for s in range(3))
    sim = Simulator(cache_size=2)
    first = sim._prepared(g1, c)
    sim._prepared(g2, c)
    assert sim._prepared(g1, c) is first  # g1 used again: g2 is now the oldest
    sim._prepared(g3, c)
    assert sim._prepared(g1, c) is first and len(sim._cache) == 2


def test_a_full_cache_drops_its_oldest_graph_for_a_new_one_not_the_new_one():
    """The graph prepared last stays prepared: a mutant that dropped the newest entry (``popitem(last=True)``) kept
    the old two and prepared the third graph again at each call."""
    c = load_cluster("k80x2")
    g1, g2, g3 = (layered_graph(10, seed=s) for s in range(3))
    sim = Simulator(cache_size=2)
    sim._prepared(g1, c)
    sim._prepared(g2, c)
    third = sim._prepared(g3, c)  # g1, the oldest, goes
    assert sim._prepared(g3, c) is third
    assert list(sim._cache) == [(id(g2), id(c)), (id(g3), id(c))]


def test_threads_sharing_a_simulator_are_not_stopped_by_each_others_cache_changes():
    """Another thread dropped a key between a look-up and its move (``simulate``'s shared simulator from threads
    over more graphs than its cache holds: a KeyError of ``move_to_end``), or emptied the cache while one trimmed it."""
    from collections import OrderedDict

    class Dropped(OrderedDict):
        """Another thread's trim drops the key this thread just found."""

        def get(self, key, default=None):
            found = super().get(key, default)
            self.clear()
            return found

    class Emptied(OrderedDict):
        """Another thread trims the cache first."""

        def popitem(self, last=True):
            self.clear()
            return super().popitem(last=last)

    c = load_cluster("k80x2")
    g1, g2 = (layered_graph(10, seed=s) for s in range(2))
    expected = [Simulator().time(g, c, [0] * g.num_ops).step_time for g in (g1, g2)]
    for cache in (Dropped, Emptied):
        sim = Simulator(cache_size=1)
        sim._cache = cache()
        assert [sim.time(g, c, [0] * g.num_ops).step_time for g in (g1, g1, g2, g2)] == [x for x in expected for _ in "ab"]


def test_a_used_simulator_pickles_and_copies_without_the_graphs_it_prepared():
    """Its cache of prepared arrays went along: every graph it had timed (6.9 MB after ten cifar10 graphs) in each
    pickle of it or of a placer it times, for each worker task; the copy times as the original."""
    import copy
    import pickle

    c = load_cluster("k80x2")
    sim = Simulator("placeto", cache_size=3)
    size = len(pickle.dumps(sim))
    graphs = [layered_graph(400, width=4, seed=s) for s in range(3)]
    for g in graphs:
        sim.time(g, c, [0] * g.num_ops)
    for twin in (pickle.loads(pickle.dumps(sim)), copy.deepcopy(sim)):
        assert len(pickle.dumps(twin)) == len(pickle.dumps(sim)) == size and len(sim._cache) == 3
        assert (twin.mode, twin.cache_size) == ("placeto", 3)
        assert [twin.time(g, c, [0] * g.num_ops) for g in graphs] == [sim.time(g, c, [0] * g.num_ops) for g in graphs]


@pytest.mark.parametrize("mode", ["default", "placeto"])
def test_devices_of_one_kind_share_one_column_of_op_times_and_time_as_with_every_column(mode):
    """The simulator keeps op times by kind of device (op_time_columns), each device reading its kind's column: it
    made the whole [ops, devices] matrix, 3 GiB and 3-6 s for 93,567 ops on 4,096 K80s; the same bits as with it."""
    from gnplace.cluster import cluster_from_dict
    from gnplace.sim import _kernel
    from gnplace.sim.simulator import _Prepared

    c = cluster_from_dict({"name": "kinds", "devices": [{"name": "g", "count": 40, "kind": "k80"},
                                                        {"name": "v", "count": 3, "kind": "v100"},
                                                        {"name": "h", "count": 30, "kind": "k80"}],
                           "links": {"default": "pcie3"}})
    g = layered_graph(400, width=12, seed=3)
    sim = Simulator(mode)
    prepared = sim._prepared(g, c)
    assert prepared.cost.shape == (g.num_ops, 2) and prepared.cost_column.tolist() == [0] * 40 + [1] * 3 + [0] * 30
    full = _Prepared(g, c, sim.cost_model)
    full.args = (sim.cost_model.op_times(g, c), np.arange(c.num_devices), *full.args[2:])
    rng = np.random.default_rng(0)
    rows = np.stack([rng.integers(0, c.num_devices, g.num_ops), np.arange(g.num_ops) % c.num_devices,
                     rng.integers(38, 45, g.num_ops)])
    batch = sim.time_batch(g, c, rows)
    for b, row in enumerate(rows):
        want = _kernel.simulate_step(row.copy(), *full.args)
        assert batch.step_time[b] == want[0] == sim.time(g, c, row).step_time
        assert batch.busy_time[b].tobytes() == want[1].tobytes() and batch.peak_memory[b].tobytes() == want[2].tobytes()
    assert len(np.unique(batch.step_time)) == len(rows)


def test_the_cache_keeps_no_graph_or_cluster_alive_and_forgets_them_when_collected():
    """It held them: ``simulate`` over a loop of graphs kept the last 16 alive (93,567 ops: 850 MB more)."""
    import gc
    import weakref

    g, c = layered_graph(10, seed=0), load_cluster("k80x2")
    sim = Simulator()
    expected = sim.time(g, c, [0] * 10).step_time
    assert sim.time(g, c, [0] * 10).step_time == expected and len(sim._cache) == 1  # still prepared while in use
    graph_gone = weakref.ref(g)
    del g
    gc.collect()
    assert graph_gone() is None and len(sim._cache) == 0
    other = layered_graph(10, seed=1)
    sim.time(other, c, [0] * 10)
    cluster_gone = weakref.ref(c)
    del c
    gc.collect()
    assert cluster_gone() is None and len(sim._cache) == 0


def test_op_times_are_the_prepared_columns_spread_read_only_with_the_cost_models_bits():
    from gnplace.exceptions import InvalidArgument

    g, c = layered_graph(12, seed=0), load_cluster("cpu_gpu")
    for mode in ("default", "placeto"):
        sim = Simulator(mode)
        times = sim.op_times(g, c)
        assert times.tobytes() == sim.cost_model.op_times(g, c).tobytes() and times.dtype == np.float64
        assert not times.flags.writeable and sim._prepared(g, c).cost.flags.writeable  # the kernel's own left as it was
    with pytest.raises(InvalidArgument, match="graph"):
        Simulator().op_times("g.gnpg", c)


# ------------------------------------------------------- invariants on heterogeneous random clusters
@st.composite
def mixed_placed_graphs(draw):
    """A graph (random layered, or hand-timed with ties and ops of 0 s) placed at random on a cluster, and a mode."""
    from gnplace.cluster_sampler import random_cluster

    if draw(st.booleans()):
        g = layered_graph(draw(st.integers(1, 40)), width=draw(st.integers(1, 5)), seed=draw(st.integers(0, 10**6)))
        c = random_cluster(draw(st.integers(0, 10**6)), min_devices=1, tight_probability=0.5)
    else:  # measured seconds from a few values: equal ready times, and ops of 0 s that take no gap after them
        n = draw(st.integers(1, 25))
        edges = sorted({(u, v) for v in range(1, n) for u in draw(st.sets(st.integers(0, v - 1), max_size=3))})
        seconds = draw(st.lists(st.sampled_from([0.0, 1.5e-4, 1e-3, 2e-3]), min_size=n, max_size=n))
        out_bytes = draw(st.lists(st.sampled_from([0, 5 * 10**5, 10**6]), min_size=n, max_size=n))
        g = timed_graph([f"n{i}" for i in range(n)], edges, seconds, out_bytes)
        c = unit_cluster(draw(st.integers(1, 4)), bandwidth=1e9, latency=draw(st.sampled_from([0.0, 1e-4])))
    devices = np.array(draw(st.lists(st.integers(0, c.num_devices - 1), min_size=g.num_ops, max_size=g.num_ops)))
    return g, c, devices, draw(st.sampled_from(["default", "placeto"]))


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_placed_graphs())
def test_every_device_and_link_runs_its_work_in_ready_order_without_idling(case):
    """Each op starts at max(ready, its device free after the last op and gap), in ready order; transfers likewise."""
    g, c, devices, mode = case
    sim = Simulator(mode)
    r = sim.time(g, c, devices, timeline=True)
    t = r.timeline
    cost = sim.op_times(g, c)[np.arange(g.num_ops), devices]
    op_gap, xfer_gap = (PLACETO_OP_GAP, PLACETO_TRANSFER_GAP) if mode == "placeto" else (0.0, 0.0)
    ptr, dst, edge_bytes = g.out_csr
    arrival = {}
    for x in range(t.num_transfers):
        u = int(t.xfer_node[x])
        here = edge_bytes[ptr[u]:ptr[u + 1]]
        on = devices[dst[ptr[u]:ptr[u + 1]]]
        remote = sorted(set(on.tolist()) - {int(devices[u])})
        if mode == "default":
            remote = [int(t.xfer_dst[x])]
            expected = min(here[on == remote[0]].sum(), g.out_bytes[u])
            seconds = c.latency[devices[u], remote[0]] + expected / c.bandwidth[devices[u], remote[0]]
        else:  # one send to every remote device: the most bytes one of them reads, at the channel's rate
            expected = min(max(here[on == k].sum() for k in remote), g.out_bytes[u])
            seconds = expected / sim.cost_model.channel_bandwidth
        assert t.xfer_bytes[x] == expected
        assert t.xfer_end[x] - t.xfer_start[x] == pytest.approx(seconds, rel=1e-9, abs=1e-15)
        arrival.update({(u, k): t.xfer_end[x] for k in remote})
    channel = t.xfer_dst if mode == "default" else np.zeros_like(t.xfer_src)  # a link per pair, or per sender
    for a, b in set(zip(t.xfer_src.tolist(), channel.tolist())):
        on_link = np.flatnonzero((t.xfer_src == a) & (channel == b))
        free = 0.0
        for x in on_link[np.argsort(t.xfer_start[on_link], kind="stable")]:
            assert t.xfer_start[x] == max(t.op_end[t.xfer_node[x]], free)  # sent as soon as made and the link is free
            free = t.xfer_end[x] + xfer_gap
    ready = np.zeros(g.num_ops)
    for u, v in zip(g.edge_src.tolist(), g.edge_dst.tolist()):
        ready[v] = max(ready[v], t.op_end[u] if devices[u] == devices[v] else arrival[(u, int(devices[v]))])
    for k in range(c.num_devices):
        on_k = np.flatnonzero(devices == k)
        free, last_ready = 0.0, 0.0
        for v in on_k[np.lexsort((t.op_end[on_k], t.op_start[on_k]))]:  # an op of 0 s before one started with it
            assert t.op_start[v] == max(ready[v], free)
            assert t.op_end[v] - t.op_start[v] == pytest.approx(cost[v], rel=1e-12, abs=0)
            assert cost[v] == 0 or ready[v] >= last_ready  # FIFO by ready time
            free, last_ready = t.op_end[v] + (op_gap if cost[v] > 0 else 0.0), max(last_ready, ready[v])
    assert r.step_time == (t.op_end.max() if g.num_ops else 0.0)


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_placed_graphs())
def test_step_busy_memory_and_batches_agree_on_any_cluster(case):
    """The bound, busy time, memory limits and OOM flags hold, and time_batch gives time's bits in any batch."""
    g, c, devices, mode = case
    sim = Simulator(mode)
    times = sim.op_times(g, c)
    r = sim.time(g, c, devices)
    assert r.step_time >= lower_bound(g, c, times=times).value
    busy = np.bincount(devices, weights=times[np.arange(g.num_ops), devices], minlength=c.num_devices)
    assert r.busy_time == pytest.approx(busy, rel=1e-12, abs=0) and r.step_time >= r.busy_time.max()
    params = np.bincount(devices, weights=g.param_bytes, minlength=c.num_devices)
    assert np.all(r.peak_memory >= params) and np.array_equal(r.oom, r.peak_memory > c.memory)
    others = np.random.default_rng(0).integers(0, c.num_devices, size=(3, g.num_ops))
    batch = sim.time_batch(g, c, np.vstack([others, devices[None], others[::-1]]))
    assert batch.step_time[3] == r.step_time and batch.oom[3] == r.is_oom
    assert np.array_equal(batch.busy_time[3], r.busy_time) and np.array_equal(batch.peak_memory[3], r.peak_memory)
    assert np.array_equal(batch.step_time[:3], batch.step_time[4:][::-1])
    for k in range(c.num_devices):  # every op on one device: its compute, and in Placeto's mode a gap after each
        alone = sim.time(g, c, np.full(g.num_ops, k)).step_time  # op of non-zero cost but perhaps the last one run
        gaps = np.count_nonzero(times[:, k] > 0) if mode == "placeto" else 0
        assert any(alone == pytest.approx(times[:, k].sum() + m * PLACETO_OP_GAP, rel=1e-12, abs=1e-18)
                   for m in {gaps, max(gaps - 1, 0)})


@st.composite
def graphs_on_clusters_at_the_limits(draw):
    """A DAG of FLOP and bytes from 0 to 2**62 on 1 to 6 devices at the limits a cluster file allows.

    Rates reached from MIN_RATE (1e3) to 1e18, memory from 1 byte to 2**62, links asymmetric from 1e3 to 1e18 B/s,
    latencies and launch overheads from 0 to MAX_SECONDS, each device a kind of its own.
    """
    from gnplace.cluster import Device
    from gnplace.limits import MAX_COUNT, MAX_SECONDS, MIN_RATE

    n = draw(st.integers(1, 12))
    edges = sorted({(u, v) for v in range(1, n) for u in draw(st.sets(st.integers(0, v - 1), max_size=3))})
    flops = draw(st.lists(st.sampled_from([0.0, 1.0, 1e9, 1e15, float(MAX_COUNT)]), min_size=n, max_size=n))
    out_bytes = draw(st.lists(st.sampled_from([0, 1, 2**30, 2**50, MAX_COUNT]), min_size=n, max_size=n))
    params = draw(st.lists(st.sampled_from([0, 1, 2**40, MAX_COUNT]), min_size=n, max_size=n))
    groups = draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n))
    g = OpGraph([f"n{i}" for i in range(n)], edges, flops=flops, out_bytes=out_bytes, param_bytes=params, group=groups)
    d = draw(st.integers(1, 6))
    rates, seconds = st.sampled_from([MIN_RATE, 1e6, 1e12, 1e18]), st.sampled_from([0.0, 1e-5, 1.0, MAX_SECONDS])
    devices = [Device(f"d{k}", f"kind{k}", draw(rates) * 2, draw(rates) * 2,
                      float(draw(st.sampled_from([1, 2**20, 2**40, MAX_COUNT]))), flops_efficiency=0.5,
                      mem_efficiency=0.5, launch_overhead=draw(seconds)) for k in range(d)]
    bandwidth = np.array(draw(st.lists(rates, min_size=d * d, max_size=d * d))).reshape(d, d)
    latency = np.array(draw(st.lists(seconds, min_size=d * d, max_size=d * d))).reshape(d, d)
    placed = np.array(draw(st.lists(st.integers(0, d - 1), min_size=n, max_size=n)))
    return g, Cluster(devices, bandwidth, latency, name="limits"), placed


@settings(max_examples=80, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs_on_clusters_at_the_limits(), st.sampled_from(["default", "placeto"]))
def test_steps_at_the_limits_of_a_cluster_file_are_finite_and_never_under_the_bound(case, mode):
    """Devices of 1e3 to 1e18 FLOP/s, links of 1e3 to 1e18 B/s, latencies up to MAX_SECONDS, ops of 2**62 FLOP and
    bytes: every step is finite, at least the lower bound of its cost model, and a batch gives each step's bits."""
    g, c, devices = case
    sim = Simulator(mode)
    result = sim.time(g, c, devices)
    bound = lower_bound(g, c, times=sim.cost_model.op_times(g, c))
    assert np.isfinite(result.step_time) and result.step_time >= 0.0
    assert np.isfinite(bound.value) and result.step_time >= bound.value * (1 - 1e-12)
    assert np.all(np.isfinite(result.busy_time)) and np.all(np.isfinite(result.peak_memory))
    batch = sim.time_batch(g, c, np.stack([devices, np.zeros_like(devices)]))
    assert batch.step_time[0] == result.step_time
