"""Probes of the link between rank 0 and another rank: one-way seconds by message size, and a message's cost.

:func:`pingpong` times round trips of given sizes (half a round trip is the one-way time, from which
:mod:`gnplace.execute.profile` fits a link's bandwidth in bytes/s and latency in seconds); :func:`exchange_cost`
the seconds each message of a step costs beyond its bytes. Both run on rank 0 and on its peer at once.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

__all__ = ["exchange_cost", "pingpong"]


def _round_trip(rank: int, other: int, outbox: torch.Tensor, inbox: torch.Tensor) -> None:
    """Rank 0 sends ``outbox`` to ``other`` and receives ``inbox`` back; the other rank the reverse."""
    if rank == 0:
        dist.send(outbox, other)
        dist.recv(inbox, other)
    else:
        dist.recv(inbox, other)
        dist.send(outbox, other)


def pingpong(peer: int, sizes: list[int], repeats: int, device: torch.device) -> list[float]:
    """Median one-way seconds of sending ``sizes`` bytes between rank 0 and ``peer`` (half a round trip).

    Ranks 0 and ``peer`` take part (the others return at once); rank 0 returns the times.
    """
    rank = dist.get_rank()
    if rank not in (0, peer):
        return []
    other = peer if rank == 0 else 0
    times = []
    for size in sizes:
        buffer = torch.zeros(max(1, size // 4), dtype=torch.float32, device=device)
        trips = []
        for r in range(repeats + 1):
            start = time.perf_counter()
            _round_trip(rank, other, buffer, buffer)
            if r:  # the first exchange sets the connection up
                trips.append(time.perf_counter() - start)
        times.append(float(np.median(trips)) / 2)
    return times


def exchange_cost(peer: int, rounds: int, device: torch.device, *, iterations: int = 50, width: int = 256) -> float:
    """Seconds of each rank's time that a message exchanged while both ranks compute adds, per message end.

    Ranks 0 and ``peer`` each run ``iterations`` chunks of compute (four ``width``-wide matrix
    products) in two ways, ``rounds`` times each and alternating: alone, and with a receive from the
    other rank posted before each chunk and, after it, a send to it and a wait for both, as the
    executor posts receives up front and sends after each op. Each message then costs its sender
    and its receiver, so half the extra seconds per chunk is what one end of one message costs.
    On CPU ranks that share a host's cores this is far more than the wire time (0.6-0.9 ms on a
    2-core VM with 1.4 ms chunks, against 60 us from a computing rank to an idle one): both communication
    threads need a core while both ranks compute. Rank 0 returns its measurement, others 0.
    """
    rank = dist.get_rank()
    if rank not in (0, peer):
        return 0.0
    other = peer if rank == 0 else 0
    matrix = torch.randn(width, width, generator=torch.Generator().manual_seed(0)).to(device)
    outbox, inbox = torch.zeros(16, device=device), torch.zeros(16, device=device)

    def chunks(talk: bool) -> float:
        _round_trip(rank, other, outbox, inbox)  # both ranks start within a round trip of each other
        start = time.perf_counter()
        for _ in range(iterations):
            receive = dist.irecv(inbox, other) if talk else None
            for _ in range(4):
                matrix @ matrix
            if receive is not None:
                send = dist.isend(outbox, other)
                receive.wait()
                if send is not None:
                    send.wait()
        return (time.perf_counter() - start) / iterations

    alone, talking = [], []
    for _ in range(rounds):
        alone.append(chunks(False))
        talking.append(chunks(True))
    return max(0.0, float(np.median(talking) - np.median(alone)) / 2)
