"""The MDP's list schedule keeps the simulator's link and device semantics (``gnplace/rl/_schedule.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.graph import OpGraph
from gnplace.policy.features import build_policy_input, ops_alone
from gnplace.rl.env import PlacementMDP
from gnplace.sim.simulator import Simulator
from gnplace.toy import toy_cluster

MB = 1_000_000


def mdp_and_sim(graph: OpGraph, devices: list[int]) -> tuple[float, float]:
    """The MDP's finish and the simulator's step time (seconds) of one op-level placement on 2 slow-link GPUs."""
    cluster = toy_cluster(2, bandwidth=1e9)  # 1 ms per MB: transfers outlast the ops
    inp = build_policy_input(graph, cluster, coarsening=ops_alone(graph))
    target = np.asarray(devices)
    rollout = PlacementMDP(inp).rollout(1, lambda s, g, dynamic, mask: np.array([target[g]]))
    step = Simulator().time(graph, cluster, inp.expand(rollout.group_devices[0])).step_time
    return float(rollout.finish[0]), step


def test_one_link_carries_one_transfer_at_a_time():
    # a and b end on gpu0 one op apart; both 8 MB outputs cross to c on gpu1 over the one link, in turn
    g = OpGraph(["a", "b", "c"], [(0, 2), (1, 2)], flops=[1e9] * 3, out_bytes=[8 * MB, 8 * MB, MB])
    finish, step = mdp_and_sim(g, [0, 0, 1])
    assert finish == pytest.approx(step, rel=1e-9)
    assert step > 16e-3  # two 8 ms transfers, one after the other


def test_an_output_crosses_to_a_device_once_for_all_its_consumers_there():
    g = OpGraph(["a", "c1", "c2", "d"], [(0, 1), (0, 2), (1, 3), (2, 3)], flops=[1e9] * 4,
                out_bytes=[8 * MB, MB, MB, MB])
    finish, step = mdp_and_sim(g, [0, 1, 1, 1])
    assert finish == pytest.approx(step, rel=1e-9)
    assert step < 16e-3  # one 8 ms transfer, not two in turn


def test_an_op_ready_early_fills_the_idle_gap_before_a_later_op():
    # b waits on gpu1 for a's 8 MB from gpu0; x, ready at once and placed after b in priority
    # order (it has no successors), runs in the gap before b, as the simulator's device does
    g = OpGraph(["a", "b", "x"], [(0, 1)], flops=[1e9] * 3, out_bytes=[8 * MB, MB, MB])
    finish, step = mdp_and_sim(g, [0, 1, 1])
    assert finish == pytest.approx(step, rel=1e-9)
    single_op = Simulator().time(OpGraph(["x"], flops=[1e9]), toy_cluster(1), np.zeros(1, dtype=int)).step_time
    assert step < 8e-3 + 3 * single_op  # x did not wait for b


def numpy_decision_features(preds, pred_bytes, work, group_work, group_bytes, scale, work_per_device, node_dev,
                            finish, link_free, sent, latency, inv_bw, free, hole_start, hole_end, room, capacity,
                            load):
    """The decision features as whole-array numpy (what the MDP computed before they were compiled)."""
    batch, d = room.shape
    if preds.size == 0:
        ready = np.zeros((batch, d))
    else:
        where, done = node_dev[:, preds], finish[:, preds]
        transfer = latency[where] + pred_bytes[None, :, None] * inv_bw[where]
        queued = np.maximum(done[:, :, None], link_free[np.arange(batch)[:, None], where]) + transfer
        already = sent[:, preds]
        arrive = np.where(np.isfinite(already), already, queued)
        ready = np.where(where[:, :, None] == np.arange(d), done[:, :, None], arrive).max(axis=1)
    begin = np.maximum(hole_start, ready[..., None])
    in_gap = (begin + work[None, :, None] <= hole_end) & (hole_end > hole_start)
    start = np.minimum(np.where(in_gap, begin, np.inf).min(axis=2), np.maximum(ready, free))
    fits = room >= group_bytes
    mask = np.where(fits.any(axis=1, keepdims=True), fits, room == room.max(axis=1, keepdims=True))
    eft = start + group_work[None, :]
    best = np.where(mask, eft, np.inf).min(axis=1, keepdims=True)
    out = np.empty((batch, d, 9), dtype=np.float32)
    out[..., 0] = np.clip((eft - best) / scale, -20.0, 20.0)
    out[..., 1] = np.clip((start - start.min(axis=1, keepdims=True)) / scale, 0.0, 20.0)
    out[..., 2] = np.clip((ready - ready.min(axis=1, keepdims=True)) / scale, 0.0, 20.0)
    out[..., 3] = np.clip(np.log(group_work / group_work.min()), 0.0, 10.0)[None, :]
    out[..., 4] = np.clip((room - group_bytes) / capacity[None, :], -1.0, 1.0)
    here = node_dev[:, preds][:, :, None] == np.arange(d)
    out[..., 5] = np.einsum("bpd,p->bd", here, pred_bytes / pred_bytes.sum()) if preds.size else 0.0
    out[..., 6] = np.clip((load - load.mean(axis=1, keepdims=True)) / work_per_device, -5.0, 5.0)
    out[..., 7] = (eft == best) & mask
    out[..., 8] = fits
    return out, mask


@pytest.mark.parametrize("devices,producers", [(2, 0), (3, 1), (4, 3), (8, 5), (12, 9), (16, 2)])
def test_the_compiled_decision_features_are_numpys_to_the_last_bit(devices, producers):
    """Features of random schedule states (links busy, outputs sent, idle gaps, tight memory), bit for bit."""
    from gnplace.rl._schedule import decision_features

    rng = np.random.default_rng(devices * 100 + producers)
    batch, nodes, gaps = 5, 12, 4
    preds = rng.choice(nodes, producers, replace=False).astype(np.int64)
    pred_bytes = rng.uniform(1e3, 1e8, producers)
    work, group_work = rng.uniform(1e-5, 1e-2, devices), rng.uniform(1e-4, 1e-1, devices)
    latency = rng.uniform(1e-6, 1e-4, (devices, devices))
    inv_bw = rng.uniform(1e-11, 1e-9, (devices, devices))
    np.fill_diagonal(inv_bw, 0.0)
    node_dev = rng.integers(0, devices, (batch, nodes))
    finish = rng.uniform(0.0, 0.1, (batch, nodes))
    link_free = rng.uniform(0.0, 0.1, (batch, devices, devices))
    sent = np.where(rng.random((batch, nodes, devices)) < 0.3, rng.uniform(0.0, 0.2, (batch, nodes, devices)), np.inf)
    free = rng.uniform(0.0, 0.1, (batch, devices))
    hole_start = rng.uniform(0.0, 0.1, (batch, devices, gaps))
    hole_end = hole_start + np.where(rng.random((batch, devices, gaps)) < 0.7, rng.uniform(0.0, 0.05, hole_start.shape),
                                     0.0)
    capacity = rng.uniform(1e9, 2e9, devices)
    room = capacity * rng.uniform(-0.2, 1.0, (batch, devices))
    room[0] = -1.0 * np.arange(devices)  # fits nowhere: the devices with the most room are allowed
    load = rng.uniform(0.0, 1.0, (batch, devices))
    group_bytes, scale, per_device = 4e8, float(group_work.min()), 0.37
    expected, expected_mask = numpy_decision_features(preds, pred_bytes, work, group_work, group_bytes, scale,
                                                      per_device, node_dev, finish, link_free, sent, latency, inv_bw,
                                                      free, hole_start, hole_end, room, capacity, load)
    out, mask = np.empty((batch, devices, 9), dtype=np.float32), np.empty((batch, devices), dtype=bool)
    has_share = producers > 0
    decision_features(preds, pred_bytes, pred_bytes / pred_bytes.sum() if has_share else pred_bytes, has_share,
                      work, group_work, group_bytes, np.clip(np.log(group_work / group_work.min()), 0.0, 10.0),
                      scale, per_device, node_dev, finish, link_free, sent, latency, inv_bw, free, hole_start,
                      hole_end, room, capacity, load, out, mask)
    assert np.array_equal(mask, expected_mask) and mask[0].sum() == 1 and mask[0, 0]
    assert np.array_equal(out, expected)  # bit for bit: rollouts, and so placements, are what they were
    assert 0 < out[..., 0].max()  # the states are not degenerate: some device finishes later than the best


def test_the_compiled_mean_sums_in_numpys_order():
    from gnplace.rl._schedule import _mean

    rng = np.random.default_rng(3)
    rows = rng.random((400, 40)) * 10.0 ** rng.uniform(-6, 6, (400, 40))
    for n in range(1, 41):
        assert all(_mean(row[:n]) == row[:n].mean() for row in rows), n  # bit for bit, not approximately


def test_a_full_device_tying_the_earliest_finish_is_not_the_earliest_finish_choice():
    """Two idle, equal devices, the group fitting only on the second: both finish it at once, and ``is_eft`` marks
    the second alone (the first is masked). A tie is where a kernel reading ``eft == best`` without the mask
    marked both."""
    from gnplace.policy.features import DYNAMIC_FEATURES
    from gnplace.rl._schedule import decision_features

    devices, nodes = 2, 1
    preds, pred_bytes = np.zeros(0, dtype=np.int64), np.zeros(0)
    work = group_work = np.full(devices, 1e-3)  # seconds, the same on both
    zeros = np.zeros((1, devices))
    out, mask = np.empty((1, devices, 9), dtype=np.float32), np.empty((1, devices), dtype=bool)
    decision_features(preds, pred_bytes, pred_bytes, False, work, group_work, 4e8, np.zeros(devices), 1e-3, 1.0,
                      np.zeros((1, nodes), dtype=np.int64), np.zeros((1, nodes)), np.zeros((1, devices, devices)),
                      np.full((1, nodes, devices), np.inf), np.zeros((devices, devices)),
                      np.zeros((devices, devices)), zeros, np.zeros((1, devices, 1)), np.zeros((1, devices, 1)),
                      np.array([[1e8, 2e9]]), np.full(devices, 2e9), zeros, out, mask)
    assert mask.tolist() == [[False, True]]
    assert out[0, :, DYNAMIC_FEATURES.index("eft_gap")].tolist() == [0.0, 0.0]  # the tie
    assert out[0, :, DYNAMIC_FEATURES.index("is_eft")].tolist() == [0.0, 1.0]
    assert out[0, :, DYNAMIC_FEATURES.index("fits")].tolist() == [0.0, 1.0]
