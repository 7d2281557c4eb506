"""The compiled event loop of the step simulator (numba).

One call simulates one training step of one placed graph. Semantics (see ``simulator.py``):

* Each device runs one op at a time; ready ops wait in a FIFO queue ordered by the time they
  became ready (events are handled in time order, so arrival order is ready-time order; ties go by
  event order, which is deterministic).
* An op is ready when every input is on its device: local producers have ended, remote ones have
  arrived by transfer.
* When an op ends, its output is sent once per remote device that consumes it (``mode 0``: over
  the link between the two devices, one transfer at a time per ordered pair) or once over the
  sender's outbound channel to all remote consumers together (``mode 1``: Placeto's simulator).
* After an op with non-zero cost a device waits ``op_gap`` seconds; after a transfer its link
  waits ``xfer_gap`` seconds.
* A message's CPU: when a transfer is queued at its producer's end while its receiver computes,
  the sender's next op takes ``msg_cpu[sender]`` seconds longer; when it arrives while its sender
  computes, the receiver's next op takes ``msg_cpu[receiver]`` longer (``mode 0`` only; 0 for every
  preset). It models CPU ranks whose communication threads find no idle core when both ends compute.
* Memory: parameters are resident from the start; an op's output occupies its device from the
  op's start until its last local consumer has ended and its last outgoing transfer is done; a
  received copy occupies the receiver from the transfer's start until its last consumer there ends.
  An op or transfer that starts after a gap (``op_gap``, ``xfer_gap``) is charged when it starts,
  not when its device or link chose it, so memory freed in the gap is free for it. An op of zero
  seconds holds its inputs and its output together at the instant it runs, whether it started at
  once or after its device's gap (then its charge and its frees fall in one instant).

The only priority queue is the global event heap (time, sequence number); queues of devices and
links are FIFO linked lists held in integer arrays. The remote devices an op's output goes to are its
"slots"; on a cluster of more than ``DENSE_LINKS`` devices a simulation's state grows with the ops, the
edges and the devices, not with their products: a slot is found by a binary search and links are kept
for the ordered pairs some transfer uses alone (a 4,096-device cluster held [ops, devices] and
[devices, devices] arrays, about 0.7 GB, and took 0.4 s a simulation of a 2,000-op graph; now 2 ms).
The queues' appends are written out in place: a shared inline helper measured about 5-10% slower on
the random-placement benchmark.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

OP_END = 0
XFER_END = 1
OP_MEMORY = 2  # an op chosen before its device's gap ended takes its output's memory when it starts
XFER_MEMORY = 3  # likewise a transfer after its link's gap, on the devices receiving it
KINDS = 4  # an event's payload is its op's or transfer's index times KINDS, plus its kind
DENSE_LINKS = 64  # up to this many devices, a link's state is kept for every ordered pair (D * D), else for those used


@njit(cache=True, inline="always")
def _push(ht, hs, hp, size, t, seq, payload):  # type: ignore[no-untyped-def]
    i = size
    ht[i] = t
    hs[i] = seq
    hp[i] = payload
    while i > 0:
        parent = (i - 1) >> 1
        if ht[i] < ht[parent] or (ht[i] == ht[parent] and hs[i] < hs[parent]):
            ht[i], ht[parent] = ht[parent], ht[i]
            hs[i], hs[parent] = hs[parent], hs[i]
            hp[i], hp[parent] = hp[parent], hp[i]
            i = parent
        else:
            break
    return size + 1


@njit(cache=True, inline="always")
def _pop(ht, hs, hp, size):  # type: ignore[no-untyped-def]
    t = ht[0]
    payload = hp[0]
    size -= 1
    if size > 0:
        ht[0] = ht[size]
        hs[0] = hs[size]
        hp[0] = hp[size]
        i = 0
        while True:
            left = 2 * i + 1
            if left >= size:
                break
            best = left
            right = left + 1
            if right < size and (ht[right] < ht[left] or (ht[right] == ht[left] and hs[right] < hs[left])):
                best = right
            if ht[best] < ht[i] or (ht[best] == ht[i] and hs[best] < hs[i]):
                ht[i], ht[best] = ht[best], ht[i]
                hs[i], hs[best] = hs[best], hs[i]
                hp[i], hp[best] = hp[best], hp[i]
                i = best
            else:
                break
    return t, payload, size


@njit(cache=True, inline="always")
def _slot(slot_dev, lo, hi, k):  # type: ignore[no-untyped-def]
    """The index in ``slot_dev[lo:hi]`` (ascending devices) of device ``k``, which is there."""
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if slot_dev[mid] <= k:
            lo = mid
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def _charge(mem, charged, charged_list, n_charged, k, nbytes):  # type: ignore[no-untyped-def]
    """Add ``nbytes`` to device ``k``'s memory, a deferred charge of this instant; returns the devices charged."""
    mem[k] += nbytes
    if not charged[k]:
        charged[k] = True
        charged_list[n_charged] = k
        n_charged += 1
    return n_charged


@njit(cache=True, inline="always")
def _settle(mem, peak, fleeting, charged, charged_list, n_charged):  # type: ignore[no-untyped-def]
    """Take the peak of each device charged at this instant, once its frees are done; returns 0 (none charged).

    A device's peak counts what an op of zero seconds freed at this instant (``fleeting``): it held those bytes.
    """
    for ci in range(n_charged):
        k = charged_list[ci]
        charged[k] = False
        if mem[k] + fleeting[k] > peak[k]:
            peak[k] = mem[k] + fleeting[k]
        fleeting[k] = 0.0
    return 0


@njit(cache=True)
def simulate_step(  # type: ignore[no-untyped-def]
    placement,  # int64 [n] device of each op
    cost,  # float64 [n, K] seconds of each op on each kind of device (op_time_columns)
    cost_column,  # int64 [D] each device's column of cost
    out_bytes,  # float64 [n] bytes each op writes
    param_bytes,  # float64 [n] resident bytes of each op
    out_ptr,  # int64 [n+1] CSR of consumers
    out_dst,  # int64 [m]
    out_eb,  # float64 [m] bytes of each out-edge
    in_ptr,  # int64 [n+1] CSR of producers
    in_src,  # int64 [m]
    inv_bw,  # float64 [D, D] seconds per byte of each link (mode 0)
    lat,  # float64 [D, D] seconds per transfer (mode 0)
    mode,  # 0: per-pair links; 1: Placeto's sender channel
    channel_inv_bw,  # seconds per byte of the sender channel (mode 1)
    op_gap,  # seconds a device waits after an op of non-zero cost
    xfer_gap,  # seconds a link or channel waits after a transfer
    msg_cpu,  # float64 [D] seconds a message costs each end's compute while the other end computes (mode 0)
):
    n = placement.shape[0]
    D = cost_column.shape[0]
    # ---- outputs
    op_start = np.zeros(n)
    op_end = np.zeros(n)
    busy = np.zeros(D)
    mem = np.zeros(D)
    peak = np.zeros(D)
    # ---- state
    pending = np.empty(n, np.int64)
    local_uses = np.zeros(n, np.int64)
    # the remote devices that consume each op's output, one slot per (op, device), op v's ascending in
    # slot_dev[slot_ptr[v]:slot_ptr[v + 1]]: past DENSE_LINKS devices no [n, D] or [D, D] state
    slot_ptr = np.zeros(n + 1, np.int64)
    slot_dev = np.empty(out_dst.shape[0], np.int64)
    remote_uses = np.zeros(out_dst.shape[0], np.int64)  # consumers on the slot's device not yet ended
    dense = D <= DENSE_LINKS
    slot_link = np.empty(out_dst.shape[0] if mode == 0 and not dense else 0, np.int64)  # its transfer's link
    slot_at = np.empty(n * D if dense else 0, np.int64)  # the slot of (op, device) on a small cluster
    stamp = np.full(D, -1, np.int64)
    where = np.empty(D, np.int64)  # the slot of each remote device of the op at hand
    xcap = 0  # exact number of transfers this placement needs
    for v in range(n):
        pending[v] = in_ptr[v + 1] - in_ptr[v]
        dv = placement[v]
        mem[dv] += param_bytes[v]
        first = slot_ptr[v]
        sends = 0
        for e in range(out_ptr[v], out_ptr[v + 1]):
            dw = placement[out_dst[e]]
            if dw == dv:
                local_uses[v] += 1
            else:
                if stamp[dw] != v:
                    stamp[dw] = v
                    where[dw] = first + sends
                    slot_dev[first + sends] = dw
                    sends += 1
                remote_uses[where[dw]] += 1
        last = first + sends
        slot_ptr[v + 1] = last
        if sends > 16:
            order = np.argsort(slot_dev[first:last]) + first
            slot_dev[first:last] = slot_dev[order]
            remote_uses[first:last] = remote_uses[order]
        else:  # in place: a sort's copies per op cost more than the simulation of a few devices
            for i in range(first + 1, last):
                k = slot_dev[i]
                uses = remote_uses[i]
                j = i - 1
                while j >= first and slot_dev[j] > k:
                    slot_dev[j + 1] = slot_dev[j]
                    remote_uses[j + 1] = remote_uses[j]
                    j -= 1
                slot_dev[j + 1] = k
                remote_uses[j + 1] = uses
        if dense:
            for sl in range(first, last):
                slot_at[v * D + slot_dev[sl]] = sl
        elif mode == 0:
            for sl in range(first, last):
                slot_link[sl] = dv * D + slot_dev[sl]
        xcap += sends if mode == 0 else min(sends, 1)
    slots = slot_ptr[n]
    recv_bytes = np.empty(slots)  # bytes of the copy the slot's device received
    acc = np.zeros(slots)  # bytes the op's consumers on the slot's device read (each slot has one at least)
    if mode == 1:
        L = D  # a channel per sender
    elif dense:
        L = D * D  # a link per ordered pair of devices, link dv * D + k
    else:  # those some transfer uses
        link_pairs = np.unique(slot_link[:slots])
        slot_link = np.searchsorted(link_pairs, slot_link[:slots])
        L = link_pairs.shape[0]
    if xcap < 1:
        xcap = 1
    x_node = np.empty(xcap, np.int64)
    x_src = np.empty(xcap, np.int64)
    x_dst = np.empty(xcap, np.int64)  # -1: every remote consumer (mode 1)
    x_bytes = np.empty(xcap)
    x_start = np.empty(xcap)
    x_end = np.empty(xcap)
    x_next = np.empty(xcap, np.int64)
    x_slot = np.empty(xcap, np.int64)  # the sender's slot of the receiving device (mode 0)
    nx = 0
    for k in range(D):
        peak[k] = mem[k]
    dq_head = np.full(D, -1, np.int64)
    dq_tail = np.full(D, -1, np.int64)
    dq_next = np.empty(n, np.int64)
    dev_running = np.zeros(D, np.bool_)
    dev_avail = np.zeros(D)
    debt = np.zeros(D)  # message CPU seconds each device's next op pays
    charge = False
    if mode == 0:
        for k in range(D):
            if msg_cpu[k] > 0.0:
                charge = True
    lq_head = np.full(L, -1, np.int64)
    lq_tail = np.full(L, -1, np.int64)
    link_busy = np.zeros(L, np.bool_)
    link_avail = np.zeros(L)
    ecap = 2 * (n + xcap) + 1  # an end per op and transfer, and a deferred memory charge per op and transfer
    ht = np.empty(ecap)
    hs = np.empty(ecap, np.int64)
    hp = np.empty(ecap, np.int64)
    hsize = 0
    seq = 0
    charged = np.zeros(D, np.bool_)  # devices whose memory grew at this instant by a deferred charge
    charged_list = np.empty(D, np.int64)  # those devices, n_charged of them: no pass over every device
    n_charged = 0
    fleeting = np.zeros(D)  # bytes each device freed at this instant with the end of an op of zero seconds
    done = 0
    step = 0.0

    # initial ready ops, in index order
    for v in range(n):
        if pending[v] == 0:
            dv = placement[v]
            dq_next[v] = -1
            if dq_tail[dv] == -1:
                dq_head[dv] = v
            else:
                dq_next[dq_tail[dv]] = v
            dq_tail[dv] = v
    now = 0.0
    start_devices = np.ones(D, np.bool_)
    start_links = np.zeros(L, np.bool_)
    touched_devices = np.arange(D)
    n_touched_devices = D
    touched_links = np.empty(L, np.int64)
    n_touched_links = 0
    while True:
        # ---- start work on idle devices and links touched by the last events, once every event of
        # this instant is processed: memory freed at time t is free for what starts at t
        if hsize == 0 or ht[0] != now:
            n_charged = _settle(mem, peak, fleeting, charged, charged_list, n_charged)  # after this instant's frees
            for ti in range(n_touched_devices):
                k = touched_devices[ti]
                if start_devices[k]:
                    start_devices[k] = False
                    if not dev_running[k] and dq_head[k] != -1:
                        v = dq_head[k]
                        dq_head[k] = dq_next[v]
                        if dq_head[k] == -1:
                            dq_tail[k] = -1
                        s = now if now > dev_avail[k] else dev_avail[k]
                        c = cost[v, cost_column[k]] + debt[k]
                        debt[k] = 0.0
                        op_start[v] = s
                        op_end[v] = s + c
                        busy[k] += c
                        dev_running[k] = True
                        if s > now:  # after the device's gap: charged when it starts
                            hsize = _push(ht, hs, hp, hsize, s, seq, v * KINDS + OP_MEMORY)
                            seq += 1
                        else:  # its peak is taken once this instant's frees are done
                            n_charged = _charge(mem, charged, charged_list, n_charged, k, out_bytes[v])
                        hsize = _push(ht, hs, hp, hsize, s + c, seq, v * KINDS + OP_END)
                        seq += 1
            n_touched_devices = 0
            for ti in range(n_touched_links):
                li = touched_links[ti]
                if start_links[li]:
                    start_links[li] = False
                    if not link_busy[li] and lq_head[li] != -1:
                        x = lq_head[li]
                        lq_head[li] = x_next[x]
                        if lq_head[li] == -1:
                            lq_tail[li] = -1
                        s = now if now > link_avail[li] else link_avail[li]
                        if mode == 0:
                            dur = lat[x_src[x], x_dst[x]] + x_bytes[x] * inv_bw[x_src[x], x_dst[x]]
                        else:
                            dur = x_bytes[x] * channel_inv_bw
                        x_start[x] = s
                        x_end[x] = s + dur
                        link_busy[li] = True
                        link_avail[li] = s + dur + xfer_gap
                        u = x_node[x]
                        later = s > now  # after the link's gap: the copies are charged when it starts
                        if mode == 0:  # one receiver: no loop over the devices on this hot path
                            k = x_dst[x]
                            recv_bytes[x_slot[x]] = x_bytes[x]
                            if not later:
                                n_charged = _charge(mem, charged, charged_list, n_charged, k, x_bytes[x])
                        else:
                            for sl in range(slot_ptr[u], slot_ptr[u + 1]):
                                if remote_uses[sl] > 0:
                                    k = slot_dev[sl]
                                    recv_bytes[sl] = x_bytes[x]
                                    if not later:
                                        n_charged = _charge(mem, charged, charged_list, n_charged, k, x_bytes[x])
                        if later:
                            hsize = _push(ht, hs, hp, hsize, s, seq, x * KINDS + XFER_MEMORY)
                            seq += 1
                        hsize = _push(ht, hs, hp, hsize, s + dur, seq, x * KINDS + XFER_END)
                        seq += 1
            n_touched_links = 0
            if hsize == 0 or ht[0] != now:  # nothing more frees memory at this instant: take what started's peaks
                n_charged = _settle(mem, peak, fleeting, charged, charged_list, n_charged)
        if hsize == 0:
            break
        now, payload, hsize = _pop(ht, hs, hp, hsize)
        kind = payload % KINDS
        ident = payload // KINDS
        if kind == OP_MEMORY:
            n_charged = _charge(mem, charged, charged_list, n_charged, placement[ident], out_bytes[ident])
        elif kind == XFER_MEMORY:
            u = x_node[ident]
            if mode == 0:
                n_charged = _charge(mem, charged, charged_list, n_charged, x_dst[ident], x_bytes[ident])
            else:
                for sl in range(slot_ptr[u], slot_ptr[u + 1]):
                    if remote_uses[sl] > 0:
                        n_charged = _charge(mem, charged, charged_list, n_charged, slot_dev[sl], x_bytes[ident])
        elif kind == OP_END:
            v = ident
            dv = placement[v]
            done += 1
            if now > step:
                step = now
            dev_running[dv] = False
            dev_avail[dv] = now + (op_gap if cost[v, cost_column[dv]] > 0.0 else 0.0)
            if not start_devices[dv]:
                start_devices[dv] = True
                touched_devices[n_touched_devices] = dv
                n_touched_devices += 1
            # inputs no longer needed by v
            freed = 0.0
            for e in range(in_ptr[v], in_ptr[v + 1]):
                u = in_src[e]
                du = placement[u]
                if du == dv:
                    local_uses[u] -= 1
                    if local_uses[u] == 0:
                        mem[dv] -= out_bytes[u]
                        freed += out_bytes[u]
                else:
                    sl = slot_at[u * D + dv] if dense else _slot(slot_dev, slot_ptr[u], slot_ptr[u + 1], dv)
                    remote_uses[sl] -= 1
                    if remote_uses[sl] == 0:
                        mem[dv] -= recv_bytes[sl]
                        freed += recv_bytes[sl]
            # outputs: local consumers become ready; remote devices get one transfer
            for sl in range(slot_ptr[v], slot_ptr[v + 1]):
                where[slot_dev[sl]] = sl
            for e in range(out_ptr[v], out_ptr[v + 1]):
                w = out_dst[e]
                dw = placement[w]
                if dw == dv:
                    pending[w] -= 1
                    if pending[w] == 0:
                        dq_next[w] = -1
                        if dq_tail[dw] == -1:
                            dq_head[dw] = w
                        else:
                            dq_next[dq_tail[dw]] = w
                        dq_tail[dw] = w
                else:
                    acc[where[dw]] += out_eb[e]
            if mode == 0:
                for sl in range(slot_ptr[v], slot_ptr[v + 1]):  # by device, ascending
                    k = slot_dev[sl]
                    x = nx
                    nx += 1
                    x_node[x] = v
                    x_src[x] = dv
                    x_dst[x] = k
                    x_slot[x] = sl
                    x_bytes[x] = acc[sl] if acc[sl] < out_bytes[v] else out_bytes[v]
                    if charge and dev_running[k]:
                        debt[dv] += msg_cpu[dv]
                    li = dv * D + k if dense else slot_link[sl]
                    x_next[x] = -1
                    if lq_tail[li] == -1:
                        lq_head[li] = x
                    else:
                        x_next[lq_tail[li]] = x
                    lq_tail[li] = x
                    if not start_links[li]:
                        start_links[li] = True
                        touched_links[n_touched_links] = li
                        n_touched_links += 1
                    local_uses[v] += 1
            else:
                largest = -1.0
                for sl in range(slot_ptr[v], slot_ptr[v + 1]):
                    if acc[sl] > largest:
                        largest = acc[sl]
                if largest >= 0.0:
                    x = nx
                    nx += 1
                    x_node[x] = v
                    x_src[x] = dv
                    x_dst[x] = -1
                    x_bytes[x] = largest if largest < out_bytes[v] else out_bytes[v]
                    li = dv
                    x_next[x] = -1
                    if lq_tail[li] == -1:
                        lq_head[li] = x
                    else:
                        x_next[lq_tail[li]] = x
                    lq_tail[li] = x
                    if not start_links[li]:
                        start_links[li] = True
                        touched_links[n_touched_links] = li
                        n_touched_links += 1
                    local_uses[v] += 1
            if local_uses[v] == 0:
                mem[dv] -= out_bytes[v]
                freed += out_bytes[v]
            if op_start[v] == now and freed > fleeting[dv]:
                # an op of zero seconds held its inputs and output together at this instant, whose frees
                # come first: counted at its start if it started at once, here if after its device's gap
                fleeting[dv] = freed
                n_charged = _charge(mem, charged, charged_list, n_charged, dv, 0.0)  # its peak taken with its frees
        else:
            x = ident
            u = x_node[x]
            du = x_src[x]
            if mode == 1:
                li = du
            elif dense:
                li = du * D + x_dst[x]
            else:
                li = slot_link[x_slot[x]]
            link_busy[li] = False
            if not start_links[li]:
                start_links[li] = True
                touched_links[n_touched_links] = li
                n_touched_links += 1
            local_uses[u] -= 1
            if local_uses[u] == 0:
                mem[du] -= out_bytes[u]
            if charge and dev_running[du]:
                debt[x_dst[x]] += msg_cpu[x_dst[x]]
            for e in range(out_ptr[u], out_ptr[u + 1]):
                w = out_dst[e]
                dw = placement[w]
                if (mode == 0 and dw == x_dst[x]) or (mode == 1 and dw != du):
                    pending[w] -= 1
                    if pending[w] == 0:
                        dq_next[w] = -1
                        if dq_tail[dw] == -1:
                            dq_head[dw] = w
                        else:
                            dq_next[dq_tail[dw]] = w
                        dq_tail[dw] = w
                        if not start_devices[dw]:
                            if not start_devices[dw]:
                                start_devices[dw] = True
                                touched_devices[n_touched_devices] = dw
                                n_touched_devices += 1
    if done != n:
        step = -1.0
    return step, busy, peak, op_start, op_end, nx, x_node, x_src, x_dst, x_bytes, x_start, x_end


@njit(cache=True, parallel=True)
def simulate_many(  # type: ignore[no-untyped-def]
    placements, cost, cost_column, out_bytes, param_bytes, out_ptr, out_dst, out_eb, in_ptr, in_src,
    inv_bw, lat, mode, channel_inv_bw, op_gap, xfer_gap, msg_cpu,
):
    """Simulate ``placements[b]`` for every row ``b``.

    Returns step times ``[B]``, busy seconds ``[B, D]`` and peak bytes ``[B, D]``.
    """
    B = placements.shape[0]
    D = cost_column.shape[0]
    steps = np.empty(B)
    peaks = np.empty((B, D))
    busies = np.empty((B, D))
    for b in prange(B):
        result = simulate_step(
            placements[b], cost, cost_column, out_bytes, param_bytes, out_ptr, out_dst, out_eb, in_ptr, in_src,
            inv_bw, lat, mode, channel_inv_bw, op_gap, xfer_gap, msg_cpu,
        )
        steps[b] = result[0]
        for d in range(D):  # element by element: a row assignment compiles numba's shape checks
            busies[b, d] = result[1][d]
            peaks[b, d] = result[2][d]
    return steps, busies, peaks


@njit(cache=True)
def longest_path(order, weight, out_ptr, out_dst):  # type: ignore[no-untyped-def]
    """Length of the heaviest path (sum of node weights) of a DAG given in topological ``order``."""
    n = order.shape[0]
    finish = np.zeros(n)
    best = 0.0
    for i in range(n):
        v = order[i]
        finish[v] += weight[v]
        if finish[v] > best:
            best = finish[v]
        for e in range(out_ptr[v], out_ptr[v + 1]):
            w = out_dst[e]
            if finish[v] > finish[w]:
                finish[w] = finish[v]
    return best


@njit(cache=True)
def reachable(ptr, nbr, source):  # type: ignore[no-untyped-def]
    """Whether each node is reached from ``source`` (itself included) along the CSR adjacency ``ptr``, ``nbr``."""
    n = ptr.shape[0] - 1
    seen = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int64)
    seen[source] = True
    stack[0] = source
    top = 1
    while top > 0:
        top -= 1
        v = stack[top]
        for e in range(ptr[v], ptr[v + 1]):
            w = nbr[e]
            if not seen[w]:
                seen[w] = True
                stack[top] = w
                top += 1
    return seen
