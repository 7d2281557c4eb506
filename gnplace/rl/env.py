"""The placement MDP of Spotlight: groups placed stage by stage, many episodes at once.

Spotlight (Gao, Chen & Li, ICML 2018) places a graph as a multi-stage decision process. Here the
stages follow a list schedule of the decision graph (:mod:`gnplace.policy.features`): nodes are
taken in priority order (upward rank, a topological order), each is scheduled on its group's device
at its earliest start, and the first node of each colocation group is a *decision*: the policy picks
the group's device there. The state a decision sees is what has been placed so far, as the landed
list schedulers keep it (:class:`~gnplace.placers.listsched.ListSchedule`): per device the time it
is next free, the memory left and the work assigned; per candidate device the time the node's inputs
arrive there (producers' finish plus the transfer over the link from their devices), its earliest
start and the group's earliest finish. An episode ends when every group has a device; its reward comes
from the step time of the finished placement, measured by a timer on the original graph: its log over
the reference's, negated, less a penalty for memory overflow (:func:`gnplace.rl.problem.reward`; no
unit).

The schedule keeps the simulator's semantics where a list schedule can (:mod:`gnplace.rl._schedule`):
an output crosses a link once per receiving device, each link carries one transfer at a time, and
an op ready early fills an idle gap of its device instead of waiting behind later ops. Without
them the schedule's finish was 0.89-1.15 of the simulated step on decision graphs of the test
splits, with them 0.93-1.08 (``python scripts/bench.py constructor``).

:class:`PlacementMDP` plays ``B`` episodes of one graph at once, one compiled call per node for all of
them (:mod:`gnplace.rl._schedule`: a decision's features, a node's schedule), so a batch of rollouts
costs about what one does. The dynamic features of each decision (:data:`DYNAMIC_FEATURES`, ``[B, D]``
per feature) are kept for the policy update.

Time quantities are in units of the group's work (its least seconds on any device, at least the mean
over groups), so that features do not depend on the graph's size or the devices' speed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnplace.limits import is_whole
from gnplace.policy.features import DYNAMIC_FEATURES, PolicyInput
from gnplace.rl._schedule import decision_features, schedule_node

__all__ = ["DYNAMIC_FEATURES", "REFINE_FEATURES", "Rollout", "PlacementMDP", "RefinementMDP", "Chooser"]

#: How many idle gaps of each device a rollout's list schedule keeps for ops that are ready early (insertion, as
#: in HEFT): an op goes into the earliest gap long enough for it, else after the device's last op.
_IDLE_GAPS = 4

#: ``choose(decision, group, dynamic [B, D, F], mask [B, D]) -> devices [B]``: the policy's move.
Chooser = Callable[[int, int, np.ndarray, np.ndarray], np.ndarray]


@dataclass
class Rollout:
    """``B`` finished episodes of one graph.

    Attributes:
        groups (np.ndarray): the group decided at each decision, ``[S]`` (``S`` = number of groups).
        dynamic (np.ndarray): dynamic features, ``[B, S, D, len(DYNAMIC_FEATURES)]`` float32.
        mask (np.ndarray): devices allowed at each decision, ``[B, S, D]`` bool.
        actions (np.ndarray): the device chosen at each decision, ``[B, S]`` int64.
        group_devices (np.ndarray): device of every group, ``[B, G]`` int64.
        finish (np.ndarray): the list schedule's finish time of the last node, ``[B]`` seconds (an
            estimate; rewards come from a timer).
    """

    groups: np.ndarray
    dynamic: np.ndarray
    mask: np.ndarray
    actions: np.ndarray
    group_devices: np.ndarray
    finish: np.ndarray


class PlacementMDP:
    """Plays ``B`` episodes of the multi-stage placement MDP of one graph and cluster at once.

    Args:
        inp (PolicyInput): the decision graph, its op and group times, priority order and memory.

    Examples:
        >>> import numpy as np
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> from gnplace.policy.features import build_policy_input
        >>> inp = build_policy_input(mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2"))
        >>> mdp = PlacementMDP(inp)
        >>> eft = lambda s, g, dyn, mask: dyn[:, :, DYNAMIC_FEATURES.index("is_eft")].argmax(axis=1)
        >>> r = mdp.rollout(4, eft)
        >>> r.group_devices.shape, r.dynamic.shape[1:3]
        ((4, 4), (4, 2))
    """

    def __init__(self, inp: PolicyInput) -> None:
        self.inp = inp
        coarse = inp.decision
        cluster = inp.cluster
        self.num_devices = cluster.num_devices
        self.num_groups = inp.num_groups
        self.order = inp.order
        self.group = coarse.group
        self.op_time = inp.op_time
        self.group_time = inp.group_time
        self.group_bytes = inp.group_bytes
        self.capacity = cluster.memory.astype(np.float64)
        self.latency = cluster.latency
        self.inv_bw = cluster.inverse_bandwidth()  # 0 on the diagonal: nothing to send on one device
        fastest = self.group_time.min(axis=1) if self.num_groups else np.zeros(0)
        floor = float(fastest.mean()) if fastest.size else 1.0
        self.scale = np.maximum(fastest, max(floor, 1e-12))
        self.work_per_device = max(float(fastest.sum()) / self.num_devices, 1e-12)
        ptr, src, nbytes = coarse.in_csr
        self.preds = [src[ptr[v]:ptr[v + 1]] for v in range(coarse.num_ops)]
        self.pred_bytes = [nbytes[ptr[v]:ptr[v + 1]].astype(np.float64) for v in range(coarse.num_ops)]
        # what the features of a decision take from its node and group alone: each producer's share of the
        # node's input bytes, and the group's log slowdown on each device (clipped), in group order
        self.has_share = [bool(b.size and b.sum() > 0) for b in self.pred_bytes]
        self.share = [b / b.sum() if has else b for b, has in zip(self.pred_bytes, self.has_share)]
        self.log_slowdown = np.array([
            np.clip(np.log(np.maximum(work, 1e-300) / max(float(work.min()), 1e-300)), 0.0, 10.0)
            for work in self.group_time
        ]).reshape(self.num_groups, self.num_devices)

    def rollout(self, batch: int, choose: Chooser) -> Rollout:
        """Play ``batch`` episodes, asking ``choose`` for each group's device.

        Args:
            batch (int): episodes ``B``.
            choose (Chooser): the policy; it gets the decision index, the group, the dynamic
                features ``[B, D, F]`` (float32) and the allowed devices ``[B, D]`` and returns a
                device per episode, ``[B]``.
        """
        b_idx = np.arange(batch)
        n, d, g_count = self.op_time.shape[0], self.num_devices, self.num_groups
        node_dev = np.zeros((batch, n), dtype=np.int64)
        finish = np.zeros((batch, n))
        free = np.zeros((batch, d))  # end of each device's last op, seconds
        # the _IDLE_GAPS largest idle gaps kept per device (empty ones have start == end), seconds
        hole_start, hole_end = np.zeros((batch, d, _IDLE_GAPS)), np.zeros((batch, d, _IDLE_GAPS))
        link_free = np.zeros((batch, d, d))  # when each ordered link (src, dst) is next free, seconds
        sent = np.full((batch, n, d), np.inf)  # when a node's output is on each remote device, seconds
        room = np.repeat(self.capacity[None, :], batch, axis=0)
        load = np.zeros((batch, d))
        group_dev = np.full((batch, g_count), -1, dtype=np.int64)
        decided = np.zeros(g_count, dtype=bool)
        dynamic = np.zeros((batch, g_count, d, len(DYNAMIC_FEATURES)), dtype=np.float32)
        mask_all = np.zeros((batch, g_count, d), dtype=bool)
        actions = np.zeros((batch, g_count), dtype=np.int64)
        groups = np.zeros(g_count, dtype=np.int64)
        s = 0
        for v in self.order.tolist():
            preds = self.preds[v]
            g = int(self.group[v])
            if not decided[g]:
                # ALGO LOGIC: a decision stage: features of every candidate device, then the policy's move
                features = np.empty((batch, d, len(DYNAMIC_FEATURES)), dtype=np.float32)
                mask = np.empty((batch, d), dtype=bool)
                decision_features(preds, self.pred_bytes[v], self.share[v], self.has_share[v], self.op_time[v],
                                  self.group_time[g], float(self.group_bytes[g]), self.log_slowdown[g],
                                  float(self.scale[g]), self.work_per_device, node_dev, finish, link_free, sent,
                                  self.latency, self.inv_bw, free, hole_start, hole_end, room, self.capacity, load,
                                  features, mask)
                chosen = np.asarray(choose(s, g, features, mask), dtype=np.int64)
                dynamic[:, s], mask_all[:, s], actions[:, s], groups[s] = features, mask, chosen, g
                group_dev[:, g] = chosen
                room[b_idx, chosen] -= self.group_bytes[g]
                load[b_idx, chosen] += self.group_time[g, chosen]
                decided[g] = True
                s += 1
            # (a contiguous copy of the group's column: one compiled signature for every batch size, not two)
            schedule_node(v, preds, self.pred_bytes[v], np.ascontiguousarray(group_dev[:, g]), self.op_time[v],
                          node_dev, finish, link_free, sent, self.latency, self.inv_bw, free, hole_start, hole_end)
        return Rollout(groups, dynamic, mask_all, actions, group_dev, finish.max(axis=1) if n else np.zeros(batch))


#: Names of the dynamic features of a refinement move to a device, in order (``stay_cost`` first: the rule term).
REFINE_FEATURES: tuple[str, ...] = (
    "stay_cost",  # 0 on the group's current device, 1 elsewhere: the prior keeps groups where they are
    "log_slowdown",  # log of the group's seconds there over its seconds on its fastest device
    "memory_left",  # bytes left there after the move, over the device's capacity (clipped to [-1, 1])
    "neighbours_here",  # share of the bytes the group exchanges with other groups that sit there
    "utilisation",  # the device's busy seconds over the current step time (from the last timing)
    "load",  # work there minus the mean over devices, over the graph's work per device
    "is_current",  # whether the group is there now
    "fits",  # whether the group fits there
    "zero",  # padding to the policy's feature width
)


class RefinementMDP:
    """Placeto's and GiPH's refinement MDP: ``B`` chains move one group at a time from a start placement.

    The groups are visited in priority order, cyclically; at each step the policy picks the visited
    group's device in every chain (it may keep it), every chain's new placement is timed, and the
    reward of the move is the decrease in step time (Addanki et al., NeurIPS 2019), here over the
    reference's. The best placement seen is kept by the caller, so the search never returns worse
    than its start. After each pass over the groups, every chain restarts from the best placement
    seen.

    Args:
        inp (PolicyInput): the decision graph.
        start (np.ndarray): the start placement, a device per group, ``[G]``.
        start_step (float): its step time, seconds.
        chains (int): ``B``.
    """

    def __init__(self, inp: PolicyInput, start: np.ndarray, start_step: float, chains: int) -> None:
        self.inp = inp
        self.num_groups, self.num_devices = inp.num_groups, inp.cluster.num_devices
        coarse = inp.decision
        first = np.full(self.num_groups, coarse.num_ops, dtype=np.int64)
        position = np.empty(coarse.num_ops, dtype=np.int64)
        position[inp.order] = np.arange(coarse.num_ops)
        np.minimum.at(first, coarse.group, position)
        self.cycle = np.argsort(first, kind="stable")
        gs, gd = coarse.group[coarse.edge_src], coarse.group[coarse.edge_dst]
        cross = gs != gd
        self.neighbours = np.zeros((self.num_groups, self.num_groups))
        np.add.at(self.neighbours, (gs[cross], gd[cross]), coarse.edge_bytes[cross])
        self.neighbours = self.neighbours + self.neighbours.T
        self.capacity = inp.cluster.memory.astype(np.float64)
        fastest = inp.group_time.min(axis=1)
        self.work_per_device = max(float(fastest.sum()) / self.num_devices, 1e-12)
        self.current = np.repeat(np.asarray(start, dtype=np.int64)[None, :], chains, axis=0)
        self.step_time = np.full(chains, float(start_step))
        self.busy = np.zeros((chains, self.num_devices))
        self.steps = 0

    @property
    def group(self) -> int:
        """The group visited at this step."""
        return int(self.cycle[self.steps % max(self.num_groups, 1)])

    def observe(self) -> tuple[np.ndarray, np.ndarray]:
        """Dynamic features ``[B, D, F]`` and allowed devices ``[B, D]`` of a move of :attr:`group`."""
        g, inp = self.group, self.inp
        b, d = self.current.shape[0], self.num_devices
        here = self.current[:, g]
        onehot = np.zeros((b, d), dtype=bool)
        onehot[np.arange(b), here] = True
        used = np.zeros((b, d))
        np.add.at(used, (np.repeat(np.arange(b), self.num_groups), self.current.ravel()), np.tile(inp.group_bytes, b))
        room = self.capacity[None, :] - used + np.where(onehot, inp.group_bytes[g], 0.0)
        fits = room >= inp.group_bytes[g]
        mask = fits | onehot
        load = np.zeros((b, d))
        work = inp.group_time[np.arange(self.num_groups)[None, :], self.current]
        np.add.at(load, (np.repeat(np.arange(b), self.num_groups), self.current.ravel()), work.ravel())
        nb = self.neighbours[g]
        total = nb.sum()
        share = np.zeros((b, d))
        if total > 0:
            np.add.at(share, (np.repeat(np.arange(b), self.num_groups), self.current.ravel()), np.tile(nb / total, b))
        gt = inp.group_time[g]
        out = np.zeros((b, d, len(REFINE_FEATURES)), dtype=np.float32)
        out[..., 0] = ~onehot
        with np.errstate(divide="ignore"):  # a group of 0 s (zero-FLOP ops, no launch overhead): log 0, clipped to 0
            out[..., 1] = np.clip(np.log(gt / max(float(gt.min()), 1e-300)), 0.0, 10.0)[None, :]
        out[..., 2] = np.clip((room - inp.group_bytes[g]) / self.capacity[None, :], -1.0, 1.0)
        out[..., 3] = share
        out[..., 4] = self.busy / np.maximum(self.step_time[:, None], 1e-300)
        out[..., 5] = np.clip((load - load.mean(axis=1, keepdims=True)) / self.work_per_device, -5.0, 5.0)
        out[..., 6] = onehot
        out[..., 7] = fits
        return out, mask

    def move(self, devices: np.ndarray) -> np.ndarray:
        """Put :attr:`group` on ``devices`` (``[B]``) in every chain; the new placements, ``[B, G]``."""
        self.current[:, self.group] = devices
        self.steps += 1
        return self.current.copy()

    def record(self, step_time: np.ndarray, busy: np.ndarray) -> np.ndarray:
        """Store the timing of the new placements; returns the decrease in step time of each chain (seconds)."""
        before = self.step_time
        # copies: restart() resets these in place, which would reset the caller's timing arrays too
        self.step_time, self.busy = np.array(step_time, dtype=np.float64), np.array(busy, dtype=np.float64)
        return before - self.step_time

    def restart(self, start: np.ndarray, start_step: float) -> None:
        """Every chain back to ``start`` (``[G]``, step time ``start_step`` seconds), when a pass ends."""
        self.current[:] = np.asarray(start, dtype=np.int64)[None, :]
        self.step_time[:] = float(start_step)
        self.busy[:] = 0.0

    def state(self) -> dict[str, Any]:
        """The chains as plain data (lists and numbers), for a checkpoint: placements, steps, busy times, moves."""
        return {"current": self.current.tolist(), "step_time": self.step_time.tolist(), "busy": self.busy.tolist(),
                "steps": self.steps}

    @classmethod
    def restored(cls, inp: PolicyInput, state: Mapping[str, Any]) -> RefinementMDP:
        """The chains :meth:`state` saved, over ``inp``.

        Raises:
            ValueError: if ``state`` does not fit ``inp`` (another pair's chains, or an edited file).
        """
        given = np.asarray(state["current"])
        current = given.astype(np.int64)
        if current.ndim != 2 or current.shape[1] != inp.num_groups or not current.size:
            raise ValueError(f"refinement chains of shape {current.shape} for {inp.num_groups} groups")
        if given.dtype.kind not in "iu" and not np.array_equal(given, current):  # 1.7 was device 1, without a word
            raise ValueError("a refinement chain names a device by a number that is not whole")
        if current.min() < 0 or current.max() >= inp.cluster.num_devices:
            raise ValueError(f"a refinement chain names a device outside the {inp.cluster.num_devices} there are")
        mdp = cls(inp, current[0], 0.0, current.shape[0])
        mdp.current[:] = current
        mdp.step_time = np.asarray(state["step_time"], dtype=np.float64).reshape(current.shape[0])
        mdp.busy = np.asarray(state["busy"], dtype=np.float64).reshape(current.shape[0], inp.cluster.num_devices)
        for name, seconds in (("step time", mdp.step_time), ("busy time", mdp.busy)):  # NaN or -1 s were taken
            if not (seconds >= 0).all():
                raise ValueError(f"a refinement chain's {name} is not seconds >= 0")
        steps = state["steps"]
        if not is_whole(steps) or steps < 0:  # -3 and 2.5 (as 2) were taken
            raise ValueError(f"refinement steps must be a whole number >= 0, got {steps!r}")
        mdp.steps = int(steps)
        return mdp
