"""The compiled event loop of the simulator, called directly with hand-built arrays."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gnplace.sim._kernel import longest_path, simulate_many, simulate_step


def frozen(array: np.ndarray) -> np.ndarray:
    """``array`` made read-only, as the simulator passes it: numba then reuses the simulator's compiled kernel.

    A writable array where the simulator's is read-only is another type, which numba compiled again in each test
    worker: 17 s for ``simulate_step`` on a fresh install (2026-12-07), more than every other test of this module.
    """
    array.flags.writeable = False
    return array


def csr(n: int, edges: list[tuple[int, int]], edge_bytes: list[float] | None = None):
    """``(out_ptr, out_dst, out_eb, in_ptr, in_src)`` of ``edges`` on ``n`` nodes (indices read-only, as in OpGraph)."""
    src = np.array([u for u, _ in edges], dtype=np.int64)
    dst = np.array([w for _, w in edges], dtype=np.int64)
    eb = np.array(edge_bytes if edge_bytes is not None else [0.0] * len(edges), dtype=np.float64)
    out_order = np.argsort(src, kind="stable")
    in_order = np.argsort(dst, kind="stable")
    out_ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]).astype(np.int64)
    in_ptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))]).astype(np.int64)
    return frozen(out_ptr), frozen(dst[out_order]), eb[out_order], frozen(in_ptr), frozen(src[in_order])


def step(placement, cost, out_bytes, edges, *, param_bytes=None, bandwidth=100.0, latency=0.5, mode=0,
         channel_inv_bw=0.0, op_gap=0.0, xfer_gap=0.0, msg_cpu=0.0, edge_bytes=None):
    """Run ``simulate_step`` on a two-device cluster; edges carry their producer's whole output unless given."""
    n = len(placement)
    out_bytes = np.asarray(out_bytes, dtype=np.float64)
    carried = [out_bytes[u] for u, _ in edges] if edge_bytes is None else edge_bytes
    out_ptr, out_dst, out_eb, in_ptr, in_src = csr(n, edges, carried)
    d = np.asarray(cost).shape[1]
    return simulate_step(
        np.asarray(placement, dtype=np.int64), np.asarray(cost, dtype=np.float64), np.arange(d), out_bytes,
        np.zeros(n) if param_bytes is None else np.asarray(param_bytes, dtype=np.float64),
        out_ptr, out_dst, out_eb, in_ptr, in_src,
        frozen(np.full((d, d), 1.0 / np.asarray(bandwidth, dtype=np.float64))), frozen(np.full((d, d), latency)), mode,
        channel_inv_bw, op_gap, xfer_gap, np.full(d, msg_cpu, dtype=np.float64),
    )


CHAIN_COST = [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]  # seconds of op0, op1, op2 on either device
CHAIN_BYTES = [100.0, 200.0, 0.0]
CHAIN_EDGES = [(0, 1), (1, 2)]


# ---------------------------------------------------------------------------------- longest_path
def test_longest_path_finds_the_heaviest_path():
    # 0 -> 1 -> 3 -> 4 weighs 1 + 5 + 1 + 3 = 10; 0 -> 2 -> 3 -> 4 only 7
    edges = [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)]
    out_ptr, out_dst, *_ = csr(5, edges)
    weight = np.array([1.0, 5.0, 2.0, 1.0, 3.0])
    order = frozen(np.arange(5))
    assert longest_path(order, weight, out_ptr, out_dst) == 10.0
    weight[2] = 6.0  # now the other branch: 1 + 6 + 1 + 3
    assert longest_path(order, weight, out_ptr, out_dst) == 11.0


def test_longest_path_takes_any_topological_order_and_lone_nodes():
    # 3 -> 1 -> 0, 2 alone; order 3, 2, 1, 0
    out_ptr, out_dst, *_ = csr(4, [(3, 1), (1, 0)])
    order = frozen(np.array([3, 2, 1, 0]))
    assert longest_path(order, np.array([1.0, 1.0, 2.5, 1.0]), out_ptr, out_dst) == 3.0
    assert longest_path(order, np.array([1.0, 1.0, 4.0, 1.0]), out_ptr, out_dst) == 4.0  # the lone node


def test_longest_path_of_an_empty_graph_is_zero():
    empty = frozen(np.zeros(0, dtype=np.int64))
    assert longest_path(empty, np.zeros(0), frozen(np.zeros(1, dtype=np.int64)), empty) == 0.0


# ---------------------------------------------------------------------------------- simulate_step
def test_chain_across_two_devices():
    # op0 on device 0 [0, 1]; its 100 bytes cross at 100 B/s after 0.5 s latency [1, 2.5];
    # op1 on device 1 [2.5, 4.5]; op2 next to it [4.5, 7.5]
    out = step([0, 1, 1], CHAIN_COST, CHAIN_BYTES, CHAIN_EDGES)
    total, busy, peak, op_start, op_end, nx, x_node, x_src, x_dst, x_bytes, x_start, x_end = out
    assert total == pytest.approx(7.5)
    assert op_start.tolist() == pytest.approx([0.0, 2.5, 4.5])
    assert op_end.tolist() == pytest.approx([1.0, 4.5, 7.5])
    assert busy.tolist() == pytest.approx([1.0, 5.0])
    assert nx == 1
    assert (x_node[0], x_src[0], x_dst[0], x_bytes[0]) == (0, 0, 1, 100.0)
    assert (x_start[0], x_end[0]) == pytest.approx((1.0, 2.5))
    # device 0 holds op0's output until its transfer is done; device 1 the received copy and op1's output
    assert peak.tolist() == pytest.approx([100.0, 300.0])


def test_chain_on_one_device_needs_no_transfer():
    out = step([1, 1, 1], CHAIN_COST, CHAIN_BYTES, CHAIN_EDGES, param_bytes=[0.0, 50.0, 0.0])
    total, busy, peak, _, op_end, nx = out[:6]
    assert total == pytest.approx(6.0) and op_end.tolist() == pytest.approx([1.0, 3.0, 6.0])
    assert nx == 0 and busy.tolist() == pytest.approx([0.0, 6.0])
    # parameters resident from the start; op0's output freed once op1 has ended
    assert peak.tolist() == pytest.approx([0.0, 50.0 + 100.0 + 200.0])


def test_placeto_mode_uses_the_sender_channel_and_op_gap():
    # channel: 100 bytes at 0.02 s/byte [1, 3]; device 1 idles 0.25 s after op1 before op2
    out = step([0, 1, 1], CHAIN_COST, CHAIN_BYTES, CHAIN_EDGES, mode=1, channel_inv_bw=0.02, op_gap=0.25)
    total, _, _, op_start, _, nx, _, x_src, x_dst, x_bytes, x_start, x_end = out
    assert total == pytest.approx(8.25)
    assert op_start.tolist() == pytest.approx([0.0, 3.0, 5.25])
    assert nx == 1 and (x_src[0], x_dst[0], x_bytes[0]) == (0, -1, 100.0)
    assert (x_start[0], x_end[0]) == pytest.approx((1.0, 3.0))


def test_one_transfer_at_a_time_per_link_with_its_gap():
    # op0 and op1 on device 0 both feed op2 on device 1; each transfer takes 1 s, then the link waits 0.5 s
    cost = [[1.0, 1.0]] * 3
    out = step([0, 0, 1], cost, [100.0, 100.0, 0.0], [(0, 2), (1, 2)], latency=0.0, xfer_gap=0.5)
    total, _, _, op_start, _, nx, x_node, _, _, _, x_start, x_end = out
    assert nx == 2 and x_node[:2].tolist() == [0, 1]
    assert x_start[:2].tolist() == pytest.approx([1.0, 2.5]) and x_end[:2].tolist() == pytest.approx([2.0, 3.5])
    assert op_start[2] == pytest.approx(3.5) and total == pytest.approx(4.5)


def test_one_transfer_per_remote_device_however_many_consumers():
    # op0 on device 0 feeds op1 and op2, both on device 1: one transfer
    cost = [[1.0, 1.0]] * 3
    out = step([0, 1, 1], cost, [100.0, 0.0, 0.0], [(0, 1), (0, 2)], latency=0.0)
    total, nx = out[0], out[5]
    assert nx == 1 and total == pytest.approx(1.0 + 1.0 + 1.0 + 1.0)


# fork: op0 on device 0 feeds op1 (device 0, 3 s) and op2 (device 1, 1 s), which join in op3 on device 0
FORK_COST = [[1.0, 1.0], [3.0, 3.0], [1.0, 1.0], [1.0, 1.0]]
FORK_EDGES = [(0, 1), (0, 2), (1, 3), (2, 3)]


def test_a_message_costs_each_end_compute_only_while_the_other_end_computes():
    # op0's output leaves device 0 at 1 s while device 1 is idle: no charge to device 0; it arrives at
    # 1.5 s while device 0 computes op1, so device 1's op2 pays 0.25 s: [1.5, 2.75]. op2's output
    # leaves at 2.75 s while device 0 computes: device 1 would pay on its next op (it has none); it
    # arrives at 3.25 s while device 1 idles: op3 pays nothing and starts when op1 ends, at 4 s
    plain = step([0, 0, 1, 0], FORK_COST, [100.0, 0.0, 100.0, 0.0], FORK_EDGES, bandwidth=1e9, latency=0.5)
    charged = step([0, 0, 1, 0], FORK_COST, [100.0, 0.0, 100.0, 0.0], FORK_EDGES, bandwidth=1e9, latency=0.5,
                   msg_cpu=0.25)
    assert plain[3].tolist() == pytest.approx([0.0, 1.0, 1.5, 4.0]) and plain[0] == pytest.approx(5.0)
    assert charged[3].tolist() == pytest.approx([0.0, 1.0, 1.5, 4.0]) and charged[0] == pytest.approx(5.0)
    assert charged[4][2] == pytest.approx(2.75) and charged[1].tolist() == pytest.approx([5.0, 1.25])
    # op1 made short (0.5 s): op0's output now arrives at 1.5 s with device 0 idle; op2 pays nothing
    short = [[1.0, 1.0], [0.5, 0.5], [1.0, 1.0], [1.0, 1.0]]
    quiet = step([0, 0, 1, 0], short, [100.0, 0.0, 100.0, 0.0], FORK_EDGES, bandwidth=1e9, latency=0.5, msg_cpu=0.25)
    assert quiet[4][2] == pytest.approx(2.5) and quiet[0] == pytest.approx(4.0)


def test_a_charged_message_delays_the_critical_path():
    # op2 on device 1 is now the long branch (3 s): its 0.25 s charge moves the whole step
    cost = [[1.0, 1.0], [3.0, 3.0], [3.0, 3.0], [1.0, 1.0]]
    plain = step([0, 0, 1, 0], cost, [100.0, 0.0, 100.0, 0.0], FORK_EDGES, bandwidth=1e9, latency=0.5)
    charged = step([0, 0, 1, 0], cost, [100.0, 0.0, 100.0, 0.0], FORK_EDGES, bandwidth=1e9, latency=0.5,
                   msg_cpu=0.25)
    assert charged[0] == pytest.approx(plain[0] + 0.25)
    # Placeto's channel mode charges nothing
    placeto = [step([0, 0, 1, 0], cost, [100.0, 0.0, 100.0, 0.0], FORK_EDGES, mode=1, channel_inv_bw=1e-9,
                    msg_cpu=m)[0] for m in (0.0, 0.25)]
    assert placeto[0] == placeto[1]


def test_a_message_is_paid_once_by_the_receiving_device_at_its_own_rate():
    # as in the fork above, op0's output arrives at device 1 while device 0 computes: op2 pays device 1's 0.5 s
    # (not the sender's 0.25 s). op2's output leaves device 1 at 3 s while device 0 computes op1: op4, next on
    # device 1, pays that message's 0.5 s, and only that one (the debt op2 paid is gone)
    edges = [*FORK_EDGES, (2, 4)]
    out = step([0, 0, 1, 0, 1], [*FORK_COST, [1.0, 1.0]], [100.0, 0.0, 100.0, 0.0, 0.0], edges, bandwidth=1e9,
               latency=0.5, msg_cpu=[0.25, 0.5])
    op_start, op_end = out[3], out[4]
    assert (op_start[2], op_end[2]) == pytest.approx((1.5, 3.0))
    assert (op_start[4], op_end[4]) == pytest.approx((3.0, 4.5))
    assert out[1][1] == pytest.approx(1.5 + 1.5)


def test_a_link_runs_at_the_bandwidth_of_its_direction():
    # 100 bytes from device 1 to device 0 at 50 bytes/s (device 0 to 1 has 100 bytes/s): 2 s
    out = step([1, 0], [[1.0, 1.0], [1.0, 1.0]], [100.0, 0.0], [(0, 1)], latency=0.0,
               bandwidth=np.array([[np.inf, 100.0], [50.0, np.inf]]))
    x_start, x_end = out[10], out[11]
    assert out[5] == 1 and (x_start[0], x_end[0]) == pytest.approx((1.0, 3.0)) and out[0] == pytest.approx(4.0)


def test_placeto_sends_an_output_of_no_bytes_to_its_remote_consumer():
    """A zero-byte edge still carries the dependency: a transfer of 0 s, not a consumer that never starts."""
    out = step([0, 1], [[1.0, 1.0], [1.0, 1.0]], [0.0, 0.0], [(0, 1)], mode=1, channel_inv_bw=0.01)
    assert out[0] == pytest.approx(2.0) and out[5] == 1


@pytest.mark.parametrize("mode", [0, 1])
def test_a_transfer_after_its_links_gap_is_charged_when_it_starts(mode):
    # op0 and op1 on device 0 feed op2 and op3 on device 1; 100 B then 300 B at 100 B/s, the link idle 0.5 s
    # between. op2 ends at 2.1 s and frees op0's copy; op1's starts at 2.5 s: device 1 peaks at 300 B, not 400
    cost = [[1.0, 1.0], [1.0, 1.0], [0.1, 0.1], [0.1, 0.1]]
    out = step([0, 0, 1, 1], cost, [100.0, 300.0, 0.0, 0.0], [(0, 2), (1, 3)], latency=0.0, xfer_gap=0.5,
               mode=mode, channel_inv_bw=0.01)
    x_start = out[10]
    assert x_start[:2].tolist() == pytest.approx([1.0, 2.5]) and out[3][2] == pytest.approx(2.0)
    assert out[2][1] == 300.0


@pytest.mark.parametrize("mode", [0, 1])
def test_an_output_sent_in_no_time_is_free_for_the_op_that_starts_at_that_instant(mode):
    # op0 sends its 100 B output to op2 on device 1 by an edge of 0 bytes: with no latency (mode 0), or from an
    # op of 0 s (mode 1, no op gap), the transfer ends as op0 does, freeing op0's output when op1 starts on
    # device 0. Charged before that transfer was done, op1's 100 B were counted beside op0's: a peak of 200 B
    cost = [[0.0 if mode else 1.0] * 2, [1.0, 1.0], [1.0, 1.0]]
    out = step([0, 0, 1], cost, [100.0, 100.0, 0.0], [(0, 2)], latency=0.0, mode=mode, channel_inv_bw=0.01,
               edge_bytes=[0.0])
    op_start, op_end, x_start, x_end = out[3], out[4], out[10], out[11]
    assert x_start[0] == x_end[0] == op_end[0] == op_start[1]
    assert out[2][0] == 100.0


def test_ready_ops_of_one_instant_queue_in_the_order_of_their_events():
    # ops 0, 1, 2 end at 1 s on devices 0, 1, 2; each output reaches its consumer (3, 4, 5) on device 3 at 1.5 s.
    # Events of one time are handled in the order they were made: op 0's end, then 1's, then 2's, so their
    # transfers and then their consumers' readiness follow in that order (a heap whose ties went by the later
    # sequence number ran op 4 first, then 5, then 3)
    out = step([0, 1, 2, 3, 3, 3], [[1.0] * 4] * 6, [0.0] * 6, [(0, 3), (1, 4), (2, 5)])
    assert out[0] == 4.5
    assert out[3].tolist() == [0.0, 0.0, 0.0, 1.5, 2.5, 3.5]


def test_what_an_op_of_zero_seconds_held_counts_at_its_instant_alone():
    # device 0 runs op0 (1 s, 100 B) -> op1 (0 s) -> op2 (1 s, 200 B) -> op3 (1 s, 200 B). op1 holds op0's 100 B at
    # 1 s, freed as it ends; op2's and op3's outputs are live together from 2 s: the peak is 400 B. Counted again at
    # a later instant (a mutant that never cleared them passed), op0's 100 B made it 500 B
    out = step([0, 0, 0, 0], [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [1.0, 1.0]], [100.0, 0.0, 200.0, 200.0],
               [(0, 1), (1, 2), (2, 3)])
    assert out[3].tolist() == [0.0, 1.0, 1.0, 2.0] and out[0] == 3.0
    assert out[2].tolist() == [400.0, 0.0]


def test_placeto_sends_the_most_bytes_one_remote_device_reads():
    # op0's 100 B output: 50 B to op1 on device 1, 100 B to op2 on device 2, one transfer over the sender's channel of
    # the larger (a mutant that sent the first device's 50 B passed): 1 s at 0.01 s/B, then each consumer's 1 s
    cost = [[1.0] * 3] * 3
    out = step([0, 1, 2], cost, [100.0, 0.0, 0.0], [(0, 1), (0, 2)], edge_bytes=[50.0, 100.0], mode=1,
               channel_inv_bw=0.01)
    assert out[5] == 1 and out[9][0] == 100.0
    assert out[0] == pytest.approx(3.0) and out[2].tolist() == [100.0, 100.0, 100.0]


def test_a_cycle_never_finishes():
    out = step([0, 0], [[1.0, 1.0], [1.0, 1.0]], [1.0, 1.0], [(0, 1), (1, 0)])
    assert out[0] == -1.0


# ---------------------------------------------------------------------------------- simulate_many
def test_simulate_many_equals_simulate_step_row_by_row():
    rng = np.random.default_rng(0)
    edges = [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (0, 4)]
    n, d = 5, 2
    cost = rng.uniform(0.5, 2.0, size=(n, d))
    out_bytes = rng.uniform(10.0, 200.0, size=n)
    param_bytes = rng.uniform(0.0, 50.0, size=n)
    out_ptr, out_dst, out_eb, in_ptr, in_src = csr(n, edges, [out_bytes[u] for u, _ in edges])
    inv_bw = frozen(np.array([[0.0, 0.01], [0.02, 0.0]]))
    lat = frozen(np.array([[0.0, 0.1], [0.3, 0.0]]))
    placements = np.array(list(itertools.product(range(d), repeat=n)), dtype=np.int64)
    for mode, op_gap, xfer_gap in ((0, 0.0, 0.0), (1, 0.05, 0.1)):
        args = (cost, np.arange(d), out_bytes, param_bytes, out_ptr, out_dst, out_eb, in_ptr, in_src, inv_bw, lat, mode, 0.005,
                op_gap, xfer_gap, np.array([0.0, 0.25]))
        steps, busies, peaks = simulate_many(placements, *args)
        assert steps.shape == (len(placements),) and peaks.shape == busies.shape == (len(placements), d)
        for b, placement in enumerate(placements):
            one = simulate_step(placement, *args)
            assert steps[b] == one[0] and np.array_equal(busies[b], one[1]) and np.array_equal(peaks[b], one[2])
        assert len(np.unique(steps)) > 4  # the placements really differ


def test_the_event_heap_pops_in_time_then_sequence_order():
    """The kernel's heap, alone: every size from 1 to 40, ties in time broken by sequence (a mutant that never
    looked at the last right child was caught only by a 200 s run of the whole simulator)."""
    from gnplace.sim._kernel import _pop, _push

    rng = np.random.default_rng(0)
    for n in range(1, 41):
        ht, hs, hp = np.zeros(n), np.zeros(n, np.int64), np.zeros(n, np.int64)
        times = rng.integers(0, 5, n).astype(float)  # few distinct times: many ties
        size = 0
        for seq in rng.permutation(n):
            size = _push(ht, hs, hp, size, times[seq], seq, 100 + seq)
        popped = []
        while size:
            t, payload, size = _pop(ht, hs, hp, size)
            popped.append((t, payload - 100))
        assert popped == sorted((times[seq], seq) for seq in range(n))
