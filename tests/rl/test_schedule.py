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
