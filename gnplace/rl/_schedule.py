"""The compiled commit step of the placement MDP's list schedule (numba).

:class:`~gnplace.rl.env.PlacementMDP` asks the policy for a device only at a group's first node;
every node, decided or not, is then scheduled on its device by :func:`schedule_node`, one call per
node for all ``B`` episodes. The semantics follow the simulator's default mode
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

__all__ = ["schedule_node"]


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
