"""The Paleo-style cost model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gnplace.cluster import Cluster, Device, load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph import OpGraph
from gnplace.sim.costmodel import (
    DEFAULT_COSTS,
    PLACETO_COSTS,
    CostModel,
    op_time_columns,
    op_times,
    spread_columns,
    spread_sums,
    transfer_time,
)
from gnplace.toy import chain_graph, layered_graph, mixed_cluster, uniform_cluster


def two_kinds() -> Cluster:
    devices = [
        Device("fast", "gpu", peak_flops=1e12, mem_bandwidth=1e11, memory=1e9, flops_efficiency=0.5,
               mem_efficiency=0.25, launch_overhead=1e-5),
        Device("slow", "cpu", peak_flops=1e11, mem_bandwidth=1e10, memory=1e9, flops_efficiency=1.0,
               mem_efficiency=1.0, launch_overhead=0.0),
    ]
    return uniform_cluster(devices, bandwidth=1e9, latency=1e-5, name="two")


def test_compute_memory_and_launch_terms():
    # b reads 400 bytes from a, writes 100, holds 50 parameter bytes: traffic 400 + 100 + 2 * 50
    g = OpGraph(["a", "b"], [(0, 1)], flops=[0.0, 2e9], out_bytes=[400, 100], param_bytes=[0, 50])
    t = op_times(g, two_kinds())
    assert t[1, 0] == pytest.approx(2e9 / (1e12 * 0.5) + 600 / (1e11 * 0.25) + 1e-5)
    assert t[1, 1] == pytest.approx(2e9 / 1e11 + 600 / 1e10)
    assert t[0, 0] == pytest.approx(400 / (1e11 * 0.25) + 1e-5)
    assert op_times(g, two_kinds(), launch_overhead=False)[1, 0] == pytest.approx(t[1, 0] - 1e-5)


def test_no_clock_cycle_floor_without_the_launch_overhead():
    """Paleo floors an op's time at one clock cycle; gnplace has no such floor (README, a documented difference):
    without the launch overhead an empty op takes 0 s and 1,000 FLOP on a K80 0.8 ns, under one cycle."""
    g = OpGraph(["empty", "tiny"], [(0, 1)], flops=[0.0, 1e3], out_bytes=[0.0, 0.0])
    k80 = load_cluster("k80x2")
    bare = op_times(g, k80, launch_overhead=False)
    assert bare[0, 0] == 0.0 and bare[1, 0] == pytest.approx(1e3 / (k80.devices[0].peak_flops
                                                                     * k80.devices[0].flops_efficiency))
    assert 0.7e-9 < bare[1, 0] < 1 / 875e6  # under the K80's shortest cycle (875 MHz boost clock)
    assert op_times(g, k80)[:, 0] == pytest.approx(bare[:, 0] + k80.devices[0].launch_overhead)  # 5.7 us on top


def test_measured_costs_win_where_present():
    g = OpGraph(["a", "b"], [(0, 1)], flops=[1e9, 1e9], out_bytes=[4, 4], cost_s={"GPU": [0.25, np.nan]})
    t = op_times(g, two_kinds())
    modelled = op_times(g.replace(cost_s={}), two_kinds())
    assert t[0, 0] == 0.25  # measured on kind 'gpu' (kinds are case-insensitive)
    assert t[1, 0] == modelled[1, 0]  # NaN: not measured, modelled
    assert np.array_equal(t[:, 1], modelled[:, 1])  # nothing measured on the cpu


def test_transfer_time_is_latency_plus_bytes_over_bandwidth():
    c = load_cluster("k80x2")
    assert transfer_time(c, 0, 1, 7.6e6) == pytest.approx(25e-6 + 1e-3)
    assert transfer_time(c, 1, 1, 7.6e6) == 0.0


def test_faster_device_is_faster_on_presets():
    g = OpGraph(["a"], flops=[1e10], out_bytes=[1e6])
    t = op_times(g, load_cluster("cpu_gpu"))
    assert t[0, 0] > 10 * t[0, 1]


def test_cost_models_of_the_two_modes():
    g, c = chain_graph(3), load_cluster("k80x2")
    assert np.array_equal(DEFAULT_COSTS.op_times(g, c), op_times(g, c))
    assert np.array_equal(PLACETO_COSTS.op_times(g, c), op_times(g, c, launch_overhead=False))
    assert PLACETO_COSTS.op_gap == 5.7e-6 and PLACETO_COSTS.transfer_gap == 25e-6 and PLACETO_COSTS.shared_channel
    assert not DEFAULT_COSTS.shared_channel and DEFAULT_COSTS.op_gap == 0.0


def test_edge_delays_follow_links_or_the_shared_channel():
    g, c = chain_graph(3, out_bytes=7_600_000), load_cluster("k80x2")
    links = DEFAULT_COSTS.edge_delays(g, c)
    channel = PLACETO_COSTS.edge_delays(g, c)
    assert links.shape == channel.shape == (2, 2, 2)
    assert links[:, 0, 0].tolist() == [0.0, 0.0] and channel[:, 1, 1].tolist() == [0.0, 0.0]
    assert links[0, 0, 1] == pytest.approx(c.transfer_time(0, 1, 7_600_000))
    assert channel[0, 1, 0] == pytest.approx(7_600_000 / 7600e6)
    assert CostModel(channel_bandwidth=1e9).edge_delays(g, c)[1, 0, 1] == pytest.approx(7.6e-3)


def test_an_update_op_reads_and_writes_its_parameters():
    """Parameter bytes count twice in the memory traffic (read and written); alone, without FLOPs to hide them."""
    g = OpGraph(["w"], flops=[0.0], out_bytes=[0], param_bytes=[1000])
    t = op_times(g, two_kinds(), launch_overhead=False)
    assert t[0].tolist() == pytest.approx([2000 / (1e11 * 0.25), 2000 / 1e10], rel=1e-12)


def test_devices_alike_share_one_computed_column_with_the_same_times(monkeypatch):
    g = chain_graph(5).replace(cost_s={"v100": [1.0, np.nan, 3.0, np.nan, 5.0]})  # measured on one kind only
    c = mixed_cluster()
    devices = [*c.devices, *(dataclasses.replace(d, name=f"{d.name}b") for d in c.devices)]
    mixed = Cluster(devices, np.full((6, 6), 1e9), np.zeros((6, 6)), name="twice")
    looked_up = []
    kept = OpGraph.measured_cost
    monkeypatch.setattr(OpGraph, "measured_cost", lambda self, kind: looked_up.append(kind) or kept(self, kind))
    times = op_times(g, mixed)
    assert len(looked_up) == 3  # a column per kind of device, not per device
    for k, dev in enumerate(mixed.devices):
        alone = op_times(g, Cluster([dev], [[np.inf]], [[0.0]], name="one"))
        assert times[:, k].tobytes() == alone[:, 0].tobytes(), dev.name


@pytest.mark.parametrize("order", ["runs", "interleaved"])
def test_op_times_are_the_columns_of_each_devices_kind_bit_for_bit(monkeypatch, order):
    """op_times copies its distinct columns (op_time_columns) to runs of alike devices as slices; devices of one
    kind interleaved (more runs than _MAX_SLICES) are taken column by column; the same bits either way."""
    from gnplace.cluster import cluster_from_dict
    from gnplace.sim import costmodel

    kinds = ["k80", "v100", "k80", "p100"] if order == "runs" else ["k80", "v100"] * 40
    entries = [{"name": f"d{i}", "count": 30 if order == "runs" else 1, "kind": kind} for i, kind in enumerate(kinds)]
    c = cluster_from_dict({"name": order, "devices": entries, "links": {"default": "pcie3"}})
    g = layered_graph(300, seed=1)
    g = g.replace(cost_s={"v100": np.where(np.arange(g.num_ops) % 3 == 0, 1e-3, np.nan)})  # measured on one kind
    columns, column = op_time_columns(g, c)
    assert columns.shape == (g.num_ops, len(set(kinds))) and columns.flags.c_contiguous
    took = []
    kept = np.take
    monkeypatch.setattr(costmodel.np, "take", lambda *a, **k: took.append(1) or kept(*a, **k))
    times = op_times(g, c)
    assert bool(took) == (order == "interleaved")  # 4,096 K80s: take wrote the matrix in 4.5 s, a slice in 0.4 s
    assert times.flags.c_contiguous and times.tobytes() == columns[:, column].tobytes()
    took.clear()  # on a few devices take is as fast or faster
    assert op_times(g, load_cluster("k80x4")).tobytes() == times[:, [0] * 4].tobytes() and took == [1]
    for k, dev in enumerate(c.devices):
        alone = op_times(g, Cluster([dev], [[np.inf]], [[0.0]], name="one"))
        assert times[:, k].tobytes() == alone[:, 0].tobytes(), dev.name


@pytest.mark.parametrize("ops", [0, 1, 9, 1000])
def test_spread_sums_are_the_spread_matrixs_column_sums_bit_for_bit(ops):
    """numpy sums a C-order matrix's columns row after row where it has two or more, a lone column pairwise:
    spread_sums sums the distinct columns once each, in the order the spread matrix would, the same bits."""
    rng = np.random.default_rng(0)
    for kinds in (1, 2, 5):
        columns = rng.random((ops, kinds)) * rng.choice([1e-6, 1e-3, 1.0], size=(ops, kinds))
        for devices in (1, 2, 3, 17, 300):
            for column in (np.sort(rng.integers(0, kinds, devices)), rng.integers(0, kinds, devices),
                           np.zeros(devices, dtype=np.int64)):
                sums = spread_sums(columns, column)
                assert sums.tobytes() == spread_columns(columns, column).sum(axis=0).tobytes(), (kinds, devices)


def one_way_cluster() -> Cluster:
    """Two devices whose links differ by direction: 0 -> 1 at 1 GB/s after 10 us, 1 -> 0 at 4 GB/s after 20 us."""
    devices = [Device(f"d{k}", "gpu", peak_flops=1e12, mem_bandwidth=1e11, memory=1e9) for k in range(2)]
    return Cluster(devices, [[np.inf, 1e9], [4e9, np.inf]], [[0.0, 1e-5], [2e-5, 0.0]], name="one_way")


def test_transfers_and_edge_delays_follow_the_link_from_the_sender_to_the_receiver():
    """A mutant that read the link back (dst -> src), or the transposed bandwidth or latency, passed on the presets,
    whose links are alike both ways: 1 MB from d0 to d1 takes 10 us + 1 ms; from d1 to d0 20 us + 0.25 ms."""
    c = one_way_cluster()
    assert transfer_time(c, 0, 1, 1e6) == pytest.approx(1.01e-3, rel=1e-12)
    assert transfer_time(c, 1, 0, 1e6) == pytest.approx(2.7e-4, rel=1e-12)
    delays = DEFAULT_COSTS.edge_delays(chain_graph(2, out_bytes=1_000_000), c)
    assert delays[0].ravel().tolist() == pytest.approx([0.0, 1.01e-3, 2.7e-4, 0.0], rel=1e-12)


def test_a_cost_models_columns_leave_the_launch_overhead_out_as_its_op_times_do():
    """PLACETO_COSTS.op_time_columns (what the simulator times by) added the launch overhead its op_times leaves out
    under a mutant: an op of 1e9 FLOP on a device reaching 5e11 FLOP/s takes 2 ms, 2 ms + 10 us with the overhead."""
    g = OpGraph(["a"], flops=[1e9], out_bytes=[0])
    c = Cluster([two_kinds().devices[0]], [[np.inf]], [[0.0]], name="fast")  # 1e12 FLOP/s at 0.5, 10 us overhead
    placeto, _ = PLACETO_COSTS.op_time_columns(g, c)
    default, _ = DEFAULT_COSTS.op_time_columns(g, c)
    assert placeto.ravel().tolist() == pytest.approx([2e-3], rel=1e-12)
    assert default.ravel().tolist() == pytest.approx([2e-3 + 1e-5], rel=1e-12)


def test_a_cost_models_defaults_are_the_simulators_default_mode():
    """Launch overhead on, no gap after ops or transfers, per-pair links (a mutant of transfer_gap's default passed)."""
    assert CostModel() == DEFAULT_COSTS
    assert (DEFAULT_COSTS.launch_overhead, DEFAULT_COSTS.op_gap, DEFAULT_COSTS.channel_bandwidth,
            DEFAULT_COSTS.transfer_gap) == (True, 0.0, None, 0.0)


@pytest.mark.parametrize(("fields", "said"), [
    ({"channel_bandwidth": 0.0}, r"channel_bandwidth must be None \(per-pair links\) or bytes/s in \[1000, "),
    ({"channel_bandwidth": float("nan")}, "channel_bandwidth must be"),
    ({"channel_bandwidth": 10**400}, "channel_bandwidth must be"),
    ({"op_gap": -1.0}, r"op_gap must be seconds in \[0, "),
    ({"transfer_gap": float("nan")}, "transfer_gap must be seconds"),
    ({"op_gap": "1e-6"}, "op_gap must be seconds"),
    ({"launch_overhead": "no"}, r"launch_overhead must be True or False, got 'no'$"),
])
def test_a_cost_model_refuses_fields_it_cannot_time_by(fields, said):
    """``CostModel(channel_bandwidth=0)`` gave edge delays of NaN and infinity; a gap of -1 s or NaN, or a launch
    overhead of "no" (true), were taken."""
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"^CostModel: " + said):
        CostModel(**fields)


def test_a_cost_model_takes_fields_at_their_limits():
    from gnplace.limits import MAX_COUNT, MAX_SECONDS, MIN_RATE

    for fields in ({"channel_bandwidth": MIN_RATE}, {"channel_bandwidth": float(MAX_COUNT)}, {"op_gap": 0},
                   {"op_gap": MAX_SECONDS, "transfer_gap": MAX_SECONDS}, {"launch_overhead": np.False_}):
        CostModel(**fields)
    assert PLACETO_COSTS.shared_channel and not DEFAULT_COSTS.shared_channel


@pytest.mark.parametrize("call", [
    lambda g, c: op_times(g, c),
    lambda g, c: DEFAULT_COSTS.op_times(g, c),
    lambda g, c: DEFAULT_COSTS.op_time_columns(g, c),
    lambda g, c: DEFAULT_COSTS.edge_delays(g, c),
])
def test_a_graph_or_cluster_of_the_wrong_kind_is_one_line(call):
    # each was an AttributeError from inside ('in_bytes', 'devices', 'num_devices')
    with pytest.raises(InvalidArgument, match=r"^graph must be an OpGraph \(gnplace\.load_graph\(path\)\), got None$"):
        call(None, load_cluster("k80x2"))
    with pytest.raises(InvalidArgument, match=r"^cluster must be a Cluster \(gnplace\.load_cluster\(preset or path\)\), "
                                              r"got 'k80x2'$"):
        call(chain_graph(2), "k80x2")
