"""The compiled steps of the placement MDP's list schedule (numba).

:class:`~gnplace.rl.env.PlacementMDP` asks the policy for a device only at a group's first node,
showing it the features :func:`decision_features` computes for every candidate device; every node,
decided or not, is then scheduled on its device by :func:`schedule_node`, one call per node for all
``B`` episodes. The semantics follow the simulator's default mode
(:mod:`gnplace.sim._kernel`) as far as a list schedule can:

* an output crosses a link once per receiving device, and each ordered link (src, dst) carries one
  transfer at a time; a node's producers are sent in order of their finish;
* a device never idles while an op could run: the node goes into the earliest idle gap long enough
  for it (insertion, as in HEFT) among the ``H`` largest gaps kept per device, else after the
  device's last op.

All times are seconds.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["schedule_node", "decision_features"]


@njit(cache=True)
def schedule_node(  # type: ignore[no-untyped-def]
    v,  # int: the node
    preds,  # int64 [P] its producers
    pred_bytes,  # float64 [P] bytes each producer sends it
    dev,  # int64 [B] its device in each episode
    work,  # float64 [D] its seconds on each device
    node_dev,  # int64 [B, N] device of each scheduled node (written at v)
    finish,  # float64 [B, N] finish of each scheduled node (written at v)
    link_free,  # float64 [B, D, D] when each ordered link is next free (updated)
    sent,  # float64 [B, N, D] when a node's output is on a remote device, inf if never sent (updated)
    latency,  # float64 [D, D] seconds per transfer
    inv_bw,  # float64 [D, D] seconds per byte (0 on the diagonal)
    free,  # float64 [B, D] end of each device's last op (updated)
    hole_start,  # float64 [B, D, H] idle gaps of each device (updated; empty ones have start == end)
    hole_end,  # float64 [B, D, H]
):
    batch = dev.shape[0]
    count = preds.shape[0]
    holes = hole_start.shape[2]
    times = np.empty(count)
    for b in range(batch):
        k = dev[b]
        # ---- inputs: local ones when their producer ends, remote ones after their transfer
        for i in range(count):
            times[i] = finish[b, preds[i]]
        ready = 0.0
        for i in np.argsort(times, kind="mergesort"):
            u = preds[i]
            src = node_dev[b, u]
            t = times[i]
            if src != k:
                if np.isinf(sent[b, u, k]):
                    begin = t if t > link_free[b, src, k] else link_free[b, src, k]
                    t = begin + latency[src, k] + pred_bytes[i] * inv_bw[src, k]
                    link_free[b, src, k] = t
                    sent[b, u, k] = t
                else:
                    t = sent[b, u, k]
            if t > ready:
                ready = t
        # ---- the earliest idle gap that holds the op, else after the device's last op
        w = work[k]
        best = np.inf
        j = -1
        for h in range(holes):
            hs = hole_start[b, k, h]
            he = hole_end[b, k, h]
            if he > hs:
                st = hs if hs > ready else ready
                if st + w <= he and st < best:
                    best = st
                    j = h
        if j >= 0:
            begin = best
            end = begin + w
            hs = hole_start[b, k, j]
            he = hole_end[b, k, j]
            if he - end >= begin - hs:  # the hole keeps its larger remainder
                hole_start[b, k, j] = end
                gap_start, gap_end = hs, begin
            else:
                hole_end[b, k, j] = begin
                gap_start, gap_end = end, he
        else:
            begin = ready if ready > free[b, k] else free[b, k]
            end = begin + w
            gap_start, gap_end = free[b, k], begin
            free[b, k] = end
        # ---- the other remainder (or the gap an appended op leaves) replaces the smallest hole if larger
        smallest = 0
        size = np.inf
        for h in range(holes):
            s = hole_end[b, k, h] - hole_start[b, k, h]
            if s < size:
                size = s
                smallest = h
        if gap_end - gap_start > size:
            hole_start[b, k, smallest] = gap_start
            hole_end[b, k, smallest] = gap_end
        finish[b, v] = end
        node_dev[b, v] = k


@njit(cache=True)
def _clip(x, low, high):  # type: ignore[no-untyped-def]
    """``np.clip`` of one number (NaN stays NaN)."""
    if x < low:
        return low
    if x > high:
        return high
    return x


@njit(cache=True)
def _mean(row):  # type: ignore[no-untyped-def]
    """``row.mean()`` of a float64 row, summed in numpy's order.

    numpy's pairwise sum: one at a time below 8 values, else 8 partial sums, combined in pairs, then the
    rest one at a time; so the features are numpy's to the last bit (and rollouts what they were).
    """
    n = row.shape[0]
    if n < 8:
        total = -0.0
        for i in range(n):
            total += row[i]
        return total / n
    r = row[:8].copy()
    i = 8
    while i < n - (n % 8):
        for j in range(8):
            r[j] += row[i + j]
        i += 8
    total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        total += row[i]
        i += 1
    return total / n


@njit(cache=True)
def decision_features(  # type: ignore[no-untyped-def]
    preds,  # int64 [P] the decision node's producers
    pred_bytes,  # float64 [P] bytes each producer sends it
    share,  # float64 [P] each producer's share of those bytes (unused without has_share)
    has_share,  # bool: the node has inputs of some bytes
    work,  # float64 [D] the node's seconds on each device
    group_work,  # float64 [D] its group's seconds on each device
    group_bytes,  # float: the group's bytes
    log_slowdown,  # float64 [D] the group's log slowdown there (the feature, clipped already)
    scale,  # float: the group's work, seconds (the unit of the time features)
    work_per_device,  # float: the graph's work per device, seconds
    node_dev,  # int64 [B, N] device of each scheduled node
    finish,  # float64 [B, N] finish of each scheduled node, seconds
    link_free,  # float64 [B, D, D] when each ordered link is next free, seconds
    sent,  # float64 [B, N, D] when a node's output is on a remote device, inf if never sent
    latency,  # float64 [D, D] seconds per transfer
    inv_bw,  # float64 [D, D] seconds per byte (0 on the diagonal)
    free,  # float64 [B, D] end of each device's last op, seconds
    hole_start,  # float64 [B, D, H] idle gaps of each device (empty ones have start == end), seconds
    hole_end,  # float64 [B, D, H]
    room,  # float64 [B, D] bytes left on each device
    capacity,  # float64 [D] bytes of each device
    load,  # float64 [B, D] work placed on each device, seconds
    out,  # float32 [B, D, F] the dynamic features (filled, in the order of env.DYNAMIC_FEATURES)
    mask,  # bool [B, D] the devices allowed (filled)
):
    """The dynamic features of a decision and its allowed devices, in every episode (see ``env.DYNAMIC_FEATURES``).

    A device is allowed if the group fits there, or, where it fits nowhere, if it has the most room left.
    Reads the schedule's arrays and writes only ``out`` and ``mask``.
    """
    batch, d = out.shape[0], out.shape[1]
    count = preds.shape[0]
    holes = hole_start.shape[2]
    ready = np.empty(d)
    start = np.empty(d)
    eft = np.empty(d)  # the group's earliest finish on each device, seconds
    for b in range(batch):
        # ---- when the inputs would all be on each device: a local one when its producer ends, one sent
        # already when it arrived, any other after its link is free, then latency plus bytes over bandwidth
        for k in range(d):
            latest = 0.0
            for i in range(count):
                u = preds[i]
                src = node_dev[b, u]
                done = finish[b, u]
                if src == k:
                    at = done
                elif np.isfinite(sent[b, u, k]):
                    at = sent[b, u, k]
                else:
                    lf = link_free[b, src, k]
                    at = (done if done >= lf else lf) + (latency[src, k] + pred_bytes[i] * inv_bw[src, k])
                if i == 0 or at > latest:
                    latest = at
            ready[k] = latest
            # ---- the earliest start there: in the earliest idle gap that holds the op, else after the last op
            in_hole = np.inf
            for h in range(holes):
                hs, he = hole_start[b, k, h], hole_end[b, k, h]
                begin = hs if hs >= latest else latest
                if begin + work[k] <= he and he > hs and begin < in_hole:
                    in_hole = begin
            after = latest if latest >= free[b, k] else free[b, k]
            start[k] = in_hole if in_hole < after else after
            eft[k] = start[k] + group_work[k]
        fits_any = False
        most = room[b, 0]
        for k in range(d):
            fits_any = fits_any or room[b, k] >= group_bytes
            most = max(most, room[b, k])
        for k in range(d):
            mask[b, k] = room[b, k] >= group_bytes if fits_any else room[b, k] == most
        best, soonest_start, soonest_ready = np.inf, start[0], ready[0]
        for k in range(d):
            if mask[b, k] and eft[k] < best:
                best = eft[k]
            soonest_start = min(soonest_start, start[k])
            soonest_ready = min(soonest_ready, ready[k])
        mean_load = _mean(load[b])
        for k in range(d):
            out[b, k, 0] = _clip((eft[k] - best) / scale, -20.0, 20.0)
            out[b, k, 1] = _clip((start[k] - soonest_start) / scale, 0.0, 20.0)
            out[b, k, 2] = _clip((ready[k] - soonest_ready) / scale, 0.0, 20.0)
            out[b, k, 3] = log_slowdown[k]
            out[b, k, 4] = _clip((room[b, k] - group_bytes) / capacity[k], -1.0, 1.0)
            here = 0.0
            if has_share:
                for i in range(count):  # in producer order, as numpy's einsum sums
                    here += share[i] if node_dev[b, preds[i]] == k else 0.0
            out[b, k, 5] = here
            out[b, k, 6] = _clip((load[b, k] - mean_load) / work_per_device, -5.0, 5.0)
            out[b, k, 7] = 1.0 if (eft[k] == best and mask[b, k]) else 0.0
            out[b, k, 8] = 1.0 if room[b, k] >= group_bytes else 0.0
