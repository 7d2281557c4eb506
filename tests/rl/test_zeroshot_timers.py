"""The timers ``policy`` wraps the simulator in (:mod:`gnplace.rl.zeroshot_timers`)."""

from __future__ import annotations

import numpy as np

from gnplace.cluster import load_cluster
from gnplace.rl.zeroshot_timers import MemoTimer, ReportingTimer
from gnplace.sim.simulator import Simulator
from gnplace.toy import layered_graph


def test_memo_gives_back_the_simulators_bits_and_simulates_a_placement_once():
    """``MemoTimer`` returns what the simulator gave for a placement timed before, without simulating it again."""
    from gnplace.rl.problem import placement_key

    g, c = layered_graph(60, seed=1), load_cluster("tight4")
    rows: list[bytes] = []

    class Counting(Simulator):
        def time(self, graph, cluster, placement, *, timeline=False):  # type: ignore[no-untyped-def]
            rows.append(placement_key(np.asarray(getattr(placement, "devices", placement))))
            return super().time(graph, cluster, placement, timeline=timeline)

        def time_batch(self, graph, cluster, placements):  # type: ignore[no-untyped-def]
            rows.extend(placement_key(row) for row in np.asarray(placements))
            return super().time_batch(graph, cluster, placements)

    rng = np.random.default_rng(0)
    batch = rng.integers(0, c.num_devices, size=(5, g.num_ops))
    batch[3], batch[4] = batch[1], 0
    memo, plain = MemoTimer(Counting()), Simulator()
    first = memo.time(g, c, batch[0])
    assert first == plain.time(g, c, batch[0]) and memo.time(g, c, batch[0]) == first
    timed = memo.time_batch(g, c, batch)
    assert timed == plain.time_batch(g, c, batch)
    assert memo.time(g, c, batch[1]) == plain.time(g, c, batch[1])
    assert len(rows) == len(set(rows)) == 4  # rows 0 (once), 1 (row 3 is row 1), 2 and 4
    assert memo.time_batch(g, c, batch[:0]).step_time.shape == (0,)
    assert memo.time(g, c, batch[2], timeline=True).timeline is not None  # a timeline is simulated
    other = layered_graph(60, seed=2)
    assert memo.time(other, c, batch[0]) == plain.time(other, c, batch[0])  # another graph: its own results


def test_reporting_counts_each_timing_and_reports_the_count_so_far():
    g, c = layered_graph(30, seed=0), load_cluster("k80x2")
    told: list[int] = []
    timer = ReportingTimer(Simulator(), told.append)
    timer.time(g, c, np.zeros(g.num_ops, dtype=np.int64))
    timer.time_batch(g, c, np.zeros((3, g.num_ops), dtype=np.int64))
    assert told == [1, 4] and timer.evaluations == 4
    assert ReportingTimer(Simulator()).time(g, c, np.zeros(g.num_ops, dtype=np.int64)).step_time > 0  # no report
