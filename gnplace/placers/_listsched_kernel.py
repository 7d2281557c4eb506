"""The compiled loops of list scheduling (numba): ETF, HEFT, the upward rank, m-SCT's favourite children.

The schedulers fill the arrays of one :class:`~gnplace.placers.listsched.ListSchedule` in place and
make the choices that ``etf_schedule``'s and ``heft_schedule``'s docstrings describe, step by step as
:class:`~gnplace.placers.listsched.ListSchedule`'s methods (which call the helpers here): the same
ready times, the same devices an op may use, the same ties as the Python loops they replaced on
2026-11-29 (``tests/placers/test_listsched.py`` pins placements of shipped graphs). Since 2026-11-30
ETF also lists a ready op on the devices it may newly use as soon as a placed group takes room, where
both loops missed some earliest starts when memory was tight (``m_etf`` and ``m_sct`` revision 2); the
tests check both schedulers against their definitions by brute force on random memory-tight cases. The per-device
heaps are arrays (``keys [num_devices, capacity, 2]``, ``ops [num_devices, capacity]``, ``size
[num_devices]``) that double when full. Ordered by key, then op index, every entry of one heap is
distinct, so any binary heap pops them in the order ``heapq`` did. Since 2026-12-04 ETF fills heaps only for
the devices in use and the first idle device of each class of interchangeable devices (``twin_kernel``), which
holds what each of them would: the same choices, with each ready op listed on a handful of heaps, not on thousands.

Times are seconds: ``op_time [num_ops, num_kinds]``, the distinct columns of the op times, device ``d``'s being
``column[d]`` (:func:`~gnplace.sim.costmodel.op_time_columns`: 4,096 K80s have one, where an [ops, devices] matrix of
93,567 ops took 3 GB), ``latency`` and ``inv_bw`` (seconds per byte, 0 within a device) ``[num_devices,
num_devices]``; memory in bytes (``room``, ``group_bytes``).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _before(a0: float, a1: float, av: int, b0: float, b1: float, bv: int) -> bool:
    """Whether the entry ``(a0, a1, av)`` comes before ``(b0, b1, bv)`` (tuple order)."""
    if a0 != b0:
        return a0 < b0
    if a1 != b1:
        return a1 < b1
    return av < bv


@njit(cache=True)
def _push(keys, ops, size, d, k0, k1, v):  # type: ignore[no-untyped-def]
    """Push ``(k0, k1, v)`` onto heap ``d``; returns the arrays (new ones when they had to grow)."""
    if size[d] == ops.shape[1]:
        grown_keys = np.empty((keys.shape[0], 2 * keys.shape[1], 2))
        grown_ops = np.empty((ops.shape[0], 2 * ops.shape[1]), dtype=np.int64)
        for h in range(keys.shape[0]):  # element by element: a slice assignment compiles numba's shape checks
            for i in range(keys.shape[1]):
                grown_keys[h, i, 0], grown_keys[h, i, 1], grown_ops[h, i] = keys[h, i, 0], keys[h, i, 1], ops[h, i]
        keys, ops = grown_keys, grown_ops
    i = size[d]
    size[d] += 1
    while i > 0:  # sift the new entry up
        parent = (i - 1) >> 1
        if not _before(k0, k1, v, keys[d, parent, 0], keys[d, parent, 1], ops[d, parent]):
            break
        keys[d, i, 0], keys[d, i, 1], ops[d, i] = keys[d, parent, 0], keys[d, parent, 1], ops[d, parent]
        i = parent
    keys[d, i, 0], keys[d, i, 1], ops[d, i] = k0, k1, v
    return keys, ops


@njit(cache=True)
def _pop(keys, ops, size, d):  # type: ignore[no-untyped-def]
    """Remove the top of heap ``d`` (the caller read it first)."""
    size[d] -= 1
    n = size[d]
    if n == 0:
        return
    k0, k1, v = keys[d, n, 0], keys[d, n, 1], ops[d, n]  # the last entry sinks from the top
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        right = child + 1
        if right < n and _before(keys[d, right, 0], keys[d, right, 1], ops[d, right],
                                 keys[d, child, 0], keys[d, child, 1], ops[d, child]):
            child = right
        if not _before(keys[d, child, 0], keys[d, child, 1], ops[d, child], k0, k1, v):
            break
        keys[d, i, 0], keys[d, i, 1], ops[d, i] = keys[d, child, 0], keys[d, child, 1], ops[d, child]
        i = child
    keys[d, i, 0], keys[d, i, 1], ops[d, i] = k0, k1, v


@njit(cache=True)
def _copy_heap(keys, ops, size, d, t):  # type: ignore[no-untyped-def]
    """Make heap ``t`` a copy of heap ``d``, which it replaces; returns the arrays (as :func:`_push`)."""
    for i in range(size[d]):
        keys[t, i, 0], keys[t, i, 1], ops[t, i] = keys[d, i, 0], keys[d, i, 1], ops[d, i]
    size[t] = size[d]
    return keys, ops


@njit(cache=True)
def _ready_time(v, out, finish, op_device, latency, inv_bw, in_ptr, in_src, in_bytes):  # type: ignore[no-untyped-def]
    """``ListSchedule.ready_time(v)`` into ``out [num_devices]``: when every input could be on each device."""
    lo, hi = in_ptr[v], in_ptr[v + 1]
    out[:] = 0.0
    for e in range(lo, hi):
        p = in_src[e]
        w = op_device[p]
        for d in range(out.shape[0]):
            arrive = finish[p] + latency[w, d] + in_bytes[e] * inv_bw[w, d]
            if e == lo or arrive > out[d]:
                out[d] = arrive


@njit(cache=True)
def _fits_by_own_room(v, d, group, group_device, group_ok, column, group_bytes, room):  # type: ignore[no-untyped-def]
    """Whether ``v`` may go to device ``d`` by its group's device, ``d``'s speed and room alone: 1 yes, 0 no.

    -1: only if ``d`` has the most room of the devices its group may use (none has enough).
    """
    g = group[v]
    fixed = group_device[g]
    if fixed >= 0:
        return 1 if fixed == d else 0
    if not group_ok[g, column[d]]:
        return 0
    return 1 if room[d] >= group_bytes[g] else -1


@njit(cache=True)
def _fits(v, d, group, group_device, group_ok, column, group_bytes, room):  # type: ignore[no-untyped-def]
    """``ListSchedule.fits``: whether ``v`` may still go to device ``d``."""
    known = _fits_by_own_room(v, d, group, group_device, group_ok, column, group_bytes, room)
    if known >= 0:
        return known == 1
    g = group[v]
    most = -np.inf
    for k in range(room.shape[0]):
        if group_ok[g, column[k]] and room[k] > most:
            most = room[k]
    return most < group_bytes[g] and room[d] == most


@njit(cache=True)
def _candidates(v, out, group, group_device, group_ok, column, group_bytes, room):  # type: ignore[no-untyped-def]
    """``ListSchedule.candidates(v)`` into ``out`` (bool ``[num_devices]``): the devices ``v`` may go to now."""
    g = group[v]
    fixed = group_device[g]
    num_devices = out.shape[0]
    if fixed >= 0:
        for d in range(num_devices):
            out[d] = d == fixed
        return
    most = -np.inf
    any_fits = False
    for d in range(num_devices):
        r = room[d] if group_ok[g, column[d]] else -np.inf
        out[d] = r >= group_bytes[g]
        any_fits = any_fits or out[d]
        if r > most:
            most = r
    if not any_fits:
        for d in range(num_devices):
            out[d] = (room[d] if group_ok[g, column[d]] else -np.inf) == most


@njit(cache=True)
def _assign(  # type: ignore[no-untyped-def]
    v, d, start, ready, group, group_device, group_bytes, room, op_device, start_s, finish, device_free, op_time,
    column, out_ptr, out_dst, pending,
):
    """``ListSchedule.assign``: schedule ``v`` on ``d`` at ``start``; the ops it makes ready go into ``ready``.

    Returns how many (they fill ``ready[:count]`` in the order of ``v``'s out-edges).
    """
    g = group[v]
    if group_device[g] < 0:
        group_device[g] = d
        room[d] -= group_bytes[g]
    op_device[v] = d
    start_s[v] = start
    finish[v] = start + op_time[v, column[d]]
    device_free[d] = max(device_free[d], finish[v])
    count = 0
    for e in range(out_ptr[v], out_ptr[v + 1]):
        w = out_dst[e]
        pending[w] -= 1
    for e in range(out_ptr[v], out_ptr[v + 1]):  # after every decrement, as numpy's fancy indexing reads them
        w = out_dst[e]
        if pending[w] == 0:
            ready[count] = w
            count += 1
    return count


@njit(cache=True)
def _arrival_on(  # type: ignore[no-untyped-def]
    v, ready_at, act, num_act, listed, finish, op_device, latency, inv_bw, in_ptr, in_src, in_bytes,
):
    """:func:`_ready_time` of a newly ready ``v`` on the active devices ``act[:num_act]`` into ``ready_at[d, v]``.

    ``v`` is listed on none of them yet (``listed[d, v]`` cleared).
    """
    lo, hi = in_ptr[v], in_ptr[v + 1]
    for k in range(num_act):
        d = act[k]
        listed[d, v] = False
        ready_at[d, v] = 0.0
        for e in range(lo, hi):
            p = in_src[e]
            w = op_device[p]
            arrive = finish[p] + latency[w, d] + in_bytes[e] * inv_bw[w, d]
            if e == lo or arrive > ready_at[d, v]:
                ready_at[d, v] = arrive


@njit(cache=True)
def _most_room(g, act, num_act, group_ok, column, room):  # type: ignore[no-untyped-def]
    """The most room (bytes) on an active device fast enough for group ``g``, -inf if none: that of all devices."""
    most = -np.inf
    for k in range(num_act):
        d = act[k]
        if group_ok[g, column[d]] and room[d] > most:
            most = room[d]
    return most


@njit(cache=True)
def _fits_on(v, d, act, num_act, group, group_device, group_ok, column, group_bytes, room):  # type: ignore[no-untyped-def]
    """:func:`_fits` with the most room read off the active devices (every other one has an active twin)."""
    known = _fits_by_own_room(v, d, group, group_device, group_ok, column, group_bytes, room)
    if known >= 0:
        return known == 1
    g = group[v]
    most = _most_room(g, act, num_act, group_ok, column, room)
    return most < group_bytes[g] and room[d] == most


@njit(cache=True)
def _twin_lists(twin):  # type: ignore[no-untyped-def]
    """The devices active at first and the next twin of each device, from ``twin [D]``.

    Returns ``(act, num_act, next_twin)``: ``act[:num_act]`` the first device of each class in index order (room
    for all ``D``), ``next_twin [D]`` the next device of each one's class, or -1.
    """
    num_devices = twin.shape[0]
    next_twin = np.full(num_devices, -1, dtype=np.int64)
    last_twin = np.arange(num_devices)
    act = np.empty(num_devices, dtype=np.int64)
    num_act = 0
    for d in range(num_devices):
        first = twin[d]
        if first == d:
            act[num_act] = d
            num_act += 1
        else:
            next_twin[last_twin[first]] = d
            last_twin[first] = d
    return act, num_act, next_twin


@njit(cache=True)
def _activate(t, act, num_act):  # type: ignore[no-untyped-def]
    """Insert device ``t`` into ``act[:num_act]``, kept in index order; returns the new count."""
    k = num_act
    while k > 0 and act[k - 1] > t:
        act[k] = act[k - 1]
        k -= 1
    act[k] = t
    return num_act + 1


@njit(cache=True, inline="always")
def _enlist(  # type: ignore[no-untyped-def]
    v, ready_at, neg_rank, listed, act, num_act, wait_keys, wait_ops, wait_size, listings, group, group_device,
    group_ok, column, group_bytes, room,
):
    """ETF's ``enlist``: list ``v`` by its ready time on every active device it may use and is not listed on.

    The devices it may use are :func:`_candidates`, the most room read off the active devices. Returns
    ``(wait_keys, wait_ops, listings)``: the heaps (grown if need be) and the listings made so far.
    """
    g = group[v]
    fixed = group_device[g]
    need = group_bytes[g]
    most = -np.inf
    if fixed < 0:
        most = _most_room(g, act, num_act, group_ok, column, room)
    for k in range(num_act):
        d = act[k]
        if fixed >= 0:
            allowed = d == fixed
        else:
            r = room[d] if group_ok[g, column[d]] else -np.inf
            allowed = r >= need if most >= need else r == most
        if allowed and not listed[d, v]:
            listed[d, v] = True
            listings += 1
            wait_keys, wait_ops = _push(wait_keys, wait_ops, wait_size, d, ready_at[d, v], neg_rank[v], v)
    return wait_keys, wait_ops, listings


@njit(cache=True, inline="always")
def _usable(  # type: ignore[no-untyped-def]
    v, d, done, ready_at, neg_rank, listed, act, num_act, wait_keys, wait_ops, wait_size, listings, group,
    group_device, group_ok, column, group_bytes, room,
):
    """ETF's ``usable``: whether the heap top ``v`` may still start on ``d``.

    An op scheduled already may not; one whose group went elsewhere or no longer has room on ``d`` may
    not, and is listed where it fits. Returns ``(usable, wait_keys, wait_ops, listings)``.
    """
    if done[v]:
        return False, wait_keys, wait_ops, listings
    if _fits_on(v, d, act, num_act, group, group_device, group_ok, column, group_bytes, room):
        return True, wait_keys, wait_ops, listings
    listed[d, v] = False
    wait_keys, wait_ops, listings = _enlist(v, ready_at, neg_rank, listed, act, num_act, wait_keys, wait_ops,
                                            wait_size, listings, group, group_device, group_ok, column, group_bytes,
                                            room)
    return False, wait_keys, wait_ops, listings


@njit(cache=True)
def etf_kernel(  # type: ignore[no-untyped-def]
    op_time,  # float64 [n, K] seconds of each op on each distinct column of devices
    neg_rank,  # float64 [n] minus each op's priority (lower first)
    favourite_parent,  # int64 [n] the producer each op is the favourite child of, or -1 (m-SCT)
    favourite_bytes,  # float64 [n] bytes on the edge from that producer
    column,  # int64 [D] each device's column of op_time
    group,  # int64 [n] colocation group of each op
    group_ok,  # bool [G, K] columns fast enough for each group (min_speed): device d's is group_ok[:, column[d]]
    group_bytes,  # float64 [G] bytes each group reserves (0 without memory awareness)
    room,  # float64 [D] bytes left on each device (updated)
    latency,  # float64 [D, D] seconds per transfer
    inv_bw,  # float64 [D, D] seconds per byte, 0 within a device
    in_ptr, in_src, in_bytes,  # int64 [n+1], int64 [m], float64 [m]: CSR of producers
    out_ptr, out_dst,  # int64 [n+1], int64 [m]: CSR of consumers
    pending,  # int64 [n] producers not yet scheduled (updated)
    op_device, start_s, finish,  # int64 / float64 / float64 [n]: the schedule (filled)
    device_free,  # float64 [D] when each device is next free (updated)
    group_device,  # int64 [G] device of each group, -1 while unplaced (filled)
    twin,  # int64 [D] the first device each device is interchangeable with (itself if none): interchangeable_devices
):
    """Earliest Task First over the schedule's arrays (``ListSchedule.arrays``, from ``column`` on), in place.

    ``favourite_parent`` all -1: plain ETF; else m-SCT's rule.

    Of interchangeable devices (``twin``) that no op was assigned to yet, only the first has heaps: the others
    would hold the same entries under the same keys, their tops would tie with its top in everything but the
    device index, and the lower index wins. When an op is assigned to it, the next of them gets a copy of its
    heaps and listings (what it would have held) and takes its place. On 4,096 K80s every ready op was listed
    on 4,096 heaps.

    Returns the listings made (entries pushed on the wait heaps), or -1 if the schedule stalled (a ready op with
    no device).
    """
    n, num_devices = op_time.shape[0], column.shape[0]
    # [device, op], filled for the active devices as ops get ready: the pages of the others are never touched
    ready_at = np.empty((num_devices, n))
    listed = np.empty((num_devices, n), dtype=np.bool_)
    done = np.zeros(n, dtype=np.bool_)
    capacity = max(16, n // num_devices + 16)
    wait_keys, wait_ops = np.empty((num_devices, capacity, 2)), np.empty((num_devices, capacity), dtype=np.int64)
    now_keys, now_ops = np.empty((num_devices, capacity, 2)), np.empty((num_devices, capacity), dtype=np.int64)
    wait_size = np.zeros(num_devices, dtype=np.int64)
    now_size = np.zeros(num_devices, dtype=np.int64)
    ready = np.empty(max(1, out_dst.shape[0]), dtype=np.int64)
    listings = 0
    waiting = np.empty(n, dtype=np.int64)  # the ready ops not yet scheduled, compact; where each one is in it
    waiting_at = np.full(n, -1, dtype=np.int64)
    num_waiting = 0
    # the devices with heaps, in index order (active): those with an op, and the first without one of each class
    used = np.zeros(num_devices, dtype=np.bool_)
    act, num_act, next_twin = _twin_lists(twin)

    for v in range(n):  # make_ready(sources), in index order: their ready times are 0
        if pending[v] == 0:
            waiting[num_waiting], waiting_at[v] = v, num_waiting
            num_waiting += 1
            _arrival_on(v, ready_at, act, num_act, listed, finish, op_device, latency, inv_bw, in_ptr, in_src, in_bytes)
            wait_keys, wait_ops, listings = _enlist(v, ready_at, neg_rank, listed, act, num_act, wait_keys,
                                                    wait_ops, wait_size, listings, group, group_device, group_ok,
                                                    column, group_bytes, room)
    for _ in range(n):
        before = -1
        while before != listings:  # a dropped top may be listed on a device already cleaned
            before = listings
            for k in range(num_act):
                d = act[k]
                # clean(d): ops that could start when d is free go to the rank heap; stale tops are dropped
                while wait_size[d] > 0:
                    v = wait_ops[d, 0]
                    if not wait_keys[d, 0, 0] <= device_free[d]:
                        usable, wait_keys, wait_ops, listings = _usable(
                            v, d, done, ready_at, neg_rank, listed, act, num_act, wait_keys, wait_ops, wait_size,
                            listings, group, group_device, group_ok, column, group_bytes, room)
                        if usable:
                            break
                    r = wait_keys[d, 0, 1]
                    _pop(wait_keys, wait_ops, wait_size, d)
                    if not done[v] and listed[d, v]:
                        now_keys, now_ops = _push(now_keys, now_ops, now_size, d, r, 0.0, v)
                while now_size[d] > 0:
                    usable, wait_keys, wait_ops, listings = _usable(
                        now_ops[d, 0], d, done, ready_at, neg_rank, listed, act, num_act, wait_keys, wait_ops,
                        wait_size, listings, group, group_device, group_ok, column, group_bytes, room)
                    if usable:
                        break
                    _pop(now_keys, now_ops, now_size, d)
        # the earliest start over the heap tops: (start, -rank, finish, device, op)
        best_d = np.int64(-1)  # typed: literal -1s would compile _assign and _fits once more each
        best_v = np.int64(-1)
        best_start = best_r = best_finish = 0.0
        for k in range(num_act):
            d = act[k]
            if now_size[d] > 0:
                v = now_ops[d, 0]
                s, r = device_free[d], now_keys[d, 0, 0]
            elif wait_size[d] > 0:
                v = wait_ops[d, 0]
                s, r = wait_keys[d, 0, 0], wait_keys[d, 0, 1]
            else:
                continue
            f = s + op_time[v, column[d]]
            if best_d < 0 or s < best_start or (s == best_start and (r < best_r or (r == best_r and (
                    f < best_finish or (f == best_finish and (d < best_d or (d == best_d and v < best_v))))))):
                best_d, best_v, best_start, best_r, best_finish = d, v, s, r, f
        if best_d < 0:
            return -1
        start, d, v = best_start, best_d, best_v
        parent = favourite_parent[v]
        if parent >= 0:
            p = op_device[parent]
            if 0 <= p and p != d and _fits_on(v, p, act, num_act, group, group_device, group_ok, column, group_bytes,
                                              room):
                start_p = max(ready_at[p, v], device_free[p])
                saved = latency[p, d] + favourite_bytes[v] * inv_bw[p, d]
                if start_p <= start + saved:
                    start, d = start_p, p
        if not used[d]:
            used[d] = True
            t = next_twin[d]
            if t >= 0:  # d's twins had what d has: the next of them gets it and a place among the active
                wait_keys, wait_ops = _copy_heap(wait_keys, wait_ops, wait_size, d, t)
                now_keys, now_ops = _copy_heap(now_keys, now_ops, now_size, d, t)
                for i in range(num_waiting):
                    u = waiting[i]
                    listed[t, u], ready_at[t, u] = listed[d, u], ready_at[d, u]
                num_act = _activate(t, act, num_act)
        done[v] = True
        last = waiting[num_waiting - 1]  # v leaves the ready ops
        waiting[waiting_at[v]], waiting_at[last], waiting_at[v] = last, waiting_at[v], -1
        num_waiting -= 1
        takes_room = group_device[group[v]] < 0 and group_bytes[group[v]] > 0
        count = _assign(v, d, start, ready, group, group_device, group_bytes, room, op_device, start_s, finish,
                        device_free, op_time, column, out_ptr, out_dst, pending)
        if takes_room:
            # d has less room now: a ready op of an unplaced group listed on d may no longer fit there, and
            # where no device has room for its group it may now go to others (the devices with the most room
            # left); list it there at once, or its earliest start on them would be missed until its stale
            # entry on d reached a heap top (a group that still fits on d may go where it could before)
            for i in range(num_waiting):
                u = waiting[i]
                h = group[u]
                if listed[d, u] and group_device[h] < 0 and room[d] < group_bytes[h]:
                    wait_keys, wait_ops, listings = _enlist(u, ready_at, neg_rank, listed, act, num_act,
                                                            wait_keys, wait_ops, wait_size, listings, group,
                                                            group_device, group_ok, column, group_bytes, room)
        for i in range(count):  # make_ready
            w = ready[i]
            waiting[num_waiting], waiting_at[w] = w, num_waiting
            num_waiting += 1
            _arrival_on(w, ready_at, act, num_act, listed, finish, op_device, latency, inv_bw, in_ptr, in_src, in_bytes)
            wait_keys, wait_ops, listings = _enlist(w, ready_at, neg_rank, listed, act, num_act, wait_keys,
                                                    wait_ops, wait_size, listings, group, group_device, group_ok,
                                                    column, group_bytes, room)
    return listings


@njit(cache=True)
def heft_kernel(  # type: ignore[no-untyped-def]
    op_time, group_time,  # float64 [n, K], [G, K]: seconds of each op and each whole group on each distinct column
    neg_rank, column, group, group_ok, group_bytes, room, latency, inv_bw, in_ptr, in_src, in_bytes, out_ptr, out_dst,
    pending, op_device, start_s, finish, device_free, group_device,  # as etf_kernel's (ListSchedule.arrays)
    twin,  # int64 [D] as etf_kernel's
):
    """HEFT over the schedule's arrays, in place.

    Highest rank first among ready ops, each on its earliest-finish device (a group's first op counts the
    whole group's seconds there); ties go to the lower device index. Of interchangeable devices without ops
    (``twin``) only the first is weighed, as in ``etf_kernel``: the others finish each op when it does and lose the
    tie (4,096 K80s: every op weighed 4,096 devices). Returns how many (op, device) pairs were weighed.
    """
    n, num_devices = op_time.shape[0], column.shape[0]
    used = np.zeros(num_devices, dtype=np.bool_)
    act, num_act, next_twin = _twin_lists(twin)
    keys = np.empty((1, max(16, n), 2))
    ops = np.empty((1, max(16, n)), dtype=np.int64)
    size = np.zeros(1, dtype=np.int64)
    at = np.empty(num_devices)
    ready = np.empty(max(1, out_dst.shape[0]), dtype=np.int64)
    heap = np.int64(0)  # the one heap (typed: a literal 0 would compile _push and _pop once more)
    weighed = 0
    for v in range(n):
        if pending[v] == 0:
            keys, ops = _push(keys, ops, size, heap, neg_rank[v], 0.0, v)
    while size[0] > 0:
        v = ops[0, 0]
        _pop(keys, ops, size, heap)
        g = group[v]
        fixed = group_device[g]
        most = -np.inf if fixed >= 0 else _most_room(g, act, num_act, group_ok, column, room)
        lo, hi = in_ptr[v], in_ptr[v + 1]
        best_d = np.int64(-1)  # typed: a literal -1 would compile _assign once more
        best_finish = np.inf
        weighed += num_act
        for k in range(num_act):  # _ready_time and _candidates on the active devices
            d = act[k]
            arrive = 0.0
            for e in range(lo, hi):
                p = in_src[e]
                w = op_device[p]
                t = finish[p] + latency[w, d] + in_bytes[e] * inv_bw[w, d]
                if e == lo or t > arrive:
                    arrive = t
            if fixed >= 0:
                allowed = d == fixed
            else:
                r = room[d] if group_ok[g, column[d]] else -np.inf
                allowed = r >= group_bytes[g] if most >= group_bytes[g] else r == most
            start = max(arrive, device_free[d])
            at[d] = start
            work = op_time[v, column[d]] if fixed >= 0 else group_time[g, column[d]]
            f = start + work if allowed else np.inf
            if best_d < 0 or f < best_finish:
                best_d, best_finish = d, f
        if not used[best_d]:
            used[best_d] = True
            if next_twin[best_d] >= 0:
                num_act = _activate(next_twin[best_d], act, num_act)
        count = _assign(v, best_d, at[best_d], ready, group, group_device, group_bytes, room, op_device, start_s,
                        finish, device_free, op_time, column, out_ptr, out_dst, pending)
        for i in range(count):
            w = ready[i]
            keys, ops = _push(keys, ops, size, heap, neg_rank[w], 0.0, w)
    return weighed


@njit(cache=True)
def upward_rank_kernel(rank, topo, ptr, succ, comm):  # type: ignore[no-untyped-def]
    """HEFT's upward rank in place: ``rank`` (seconds ``[n]``) holds each op's own cost on entry.

    ``rank[v] += max over out-edges e = (v, s) of comm[e] + rank[s]``, in reverse topological order
    ``topo``; ``ptr``, ``succ`` and ``comm`` (seconds) follow ``graph.out_csr``.
    """
    for i in range(topo.shape[0] - 1, -1, -1):
        v = topo[i]
        lo, hi = ptr[v], ptr[v + 1]
        if hi > lo:
            longest = comm[lo] + rank[succ[lo]]
            for e in range(lo + 1, hi):
                path = comm[e] + rank[succ[e]]
                if path > longest:
                    longest = path
            rank[v] += longest


@njit(cache=True)
def favourite_children_kernel(ptr, dst, size):  # type: ignore[no-untyped-def]
    """m-SCT's favourite children over ``graph.out_csr`` (``size`` in bytes): see ``m_sct.favourite_children``.

    Returns ``(parent [n], bytes [n])``: the producer each op is the favourite child of (its largest
    out-edge, the first of equals), the largest such producer winning, the first on a tie; -1 and 0 for none.
    """
    n = ptr.shape[0] - 1
    parent = np.full(n, -1, dtype=np.int64)
    best = np.full(n, -1.0)
    for u in range(n):
        lo, hi = ptr[u], ptr[u + 1]
        if hi > lo:
            e = lo
            for k in range(lo + 1, hi):
                if size[k] > size[e]:
                    e = k
            v = dst[e]
            if size[e] > best[v]:
                parent[v], best[v] = u, size[e]
    return parent, np.maximum(best, 0.0)


@njit(cache=True)
def _keep_same_columns(columns, first, same):  # type: ignore[no-untyped-def]
    """Clear ``same[d]`` where column ``d`` of ``columns [rows, D]`` differs from column ``first[d]``."""
    for i in range(columns.shape[0]):
        for d in range(same.shape[0]):
            if same[d] and columns[i, d] != columns[i, first[d]]:
                same[d] = False


@njit(cache=True)
def _keep_same_ok(group_ok, column, first, same):  # type: ignore[no-untyped-def]
    """Clear ``same[d]`` where device ``d``'s column of ``group_ok [G, K]`` (``column[d]``) differs from ``first[d]``'s.

    Only the distinct columns are held: a [groups, devices] matrix of 29,499 groups on 4,096 K80s took 120 MB.
    """
    for d in range(same.shape[0]):
        a, b = column[d], column[first[d]]
        if same[d] and a != b:
            for i in range(group_ok.shape[0]):
                if group_ok[i, a] != group_ok[i, b]:
                    same[d] = False
                    break


@njit(cache=True)
def twin_kernel(  # type: ignore[no-untyped-def]
    op_bits, group_ok, column, state_bits, latency_bits, inv_bw_bits, label, rounds,
):
    """``interchangeable_devices`` checked bit for bit: the first device of each device's class (itself if alone).

    ``label [D]`` is each device's candidate class; a device joins the first unsettled device of its label when
    their columns of ``op_bits [k, D]`` (op times, or a class of equal op times: group times follow from them),
    ``group_ok [G, K]`` (device ``d``'s is column ``column[d]``) and ``state_bits [k, D]`` hold the same bits, and so
    do those of ``latency_bits`` and ``inv_bw_bits`` ``[D, D]`` but for the rows of the two devices, and the link
    from that first device to it is the one to the class's other members. Those that do not join try again among
    themselves, for at most ``rounds`` rounds (islands of a multi-node cluster); then they are their own.
    """
    num_devices = label.shape[0]
    twin = np.arange(num_devices)
    settled = np.zeros(num_devices, dtype=np.bool_)
    same = np.empty(num_devices, dtype=np.bool_)
    first = np.empty(num_devices, dtype=np.int64)
    head = np.empty(num_devices, dtype=np.int64)  # by label: the first unsettled device
    seen = np.empty(num_devices, dtype=np.int64)  # by device: its class's first member after it
    for _ in range(rounds):
        head[:] = -1
        for d in range(num_devices):
            if not settled[d] and head[label[d]] < 0:
                head[label[d]] = d
        for d in range(num_devices):
            first[d] = head[label[d]]
            same[d] = not settled[d] and first[d] != d
        _keep_same_columns(op_bits, first, same)
        _keep_same_columns(state_bits, first, same)
        _keep_same_ok(group_ok, column, first, same)
        for w in range(num_devices):
            for d in range(num_devices):
                r = first[d]
                if same[d] and w != d and w != r and (latency_bits[w, d] != latency_bits[w, r]
                                                       or inv_bw_bits[w, d] != inv_bw_bits[w, r]):
                    same[d] = False
        seen[:] = -1
        for d in range(num_devices):
            r = first[d]
            if same[d]:
                if seen[r] < 0:
                    seen[r] = d
                elif latency_bits[r, d] != latency_bits[r, seen[r]] or inv_bw_bits[r, d] != inv_bw_bits[r, seen[r]]:
                    continue
                twin[d] = r
                settled[d] = True
        progress = False
        for d in range(num_devices):
            if not settled[d] and first[d] == d:
                settled[d] = True  # the first of its class, or alone
            progress = progress or not settled[d]
        if not progress:
            break
    return twin
