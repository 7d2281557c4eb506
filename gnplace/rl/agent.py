"""The policy acting in the placement MDP: sampled, greedy and teacher-forced rollouts, and log-probabilities.

A rollout runs the graph encoder once and the cheap head once per decision for all ``B`` episodes
together (:class:`~gnplace.rl.env.PlacementMDP`). What the update needs is kept: the dynamic
features and masks of every decision, the devices chosen and the behaviour policy's log-probabilities
of every device, so that PPO can re-evaluate all decisions of all episodes in one batched call of the
head (:func:`log_probs`) instead of replaying the MDP.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gnplace.exceptions import InvalidArgument
from gnplace.limits import MIN_TEMPERATURE
from gnplace.policy.gnn import Encoded, PlacementPolicy
from gnplace.rl.env import PlacementMDP, RefinementMDP, Rollout

__all__ = ["Trajectories", "sample", "sample_move", "teacher_forced", "log_probs"]


@dataclass
class Trajectories:
    """Rollouts of one graph as tensors for the update.

    Attributes:
        rollout (Rollout): the episodes, as the MDP recorded them.
        groups (torch.Tensor): group decided at each decision, ``[S]`` int64.
        dynamic (torch.Tensor): ``[B, S, D, F]`` float32.
        mask (torch.Tensor): ``[B, S, D]`` bool.
        actions (torch.Tensor): ``[B, S]`` int64.
        old_log_probs (torch.Tensor): the behaviour policy's log-probability of every device,
            ``[B, S, D]`` (``-inf`` where masked); all zeros for teacher-forced rollouts.
        equivalent (torch.Tensor | None): for teacher-forced rollouts, the devices interchangeable
            with the chosen one at each decision (same device and dynamic features), ``[B, S, D]``.
        bias (torch.Tensor | None): logits added to the policy's at every decision while sampling
            (:func:`sample`'s ``bias``), ``[B, S, D]``; the behaviour policy includes it, and so does
            :func:`log_probs`, so that PPO's ratio compares like with like.
    """

    rollout: Rollout
    groups: torch.Tensor
    dynamic: torch.Tensor
    mask: torch.Tensor
    actions: torch.Tensor
    old_log_probs: torch.Tensor
    equivalent: torch.Tensor | None = None
    bias: torch.Tensor | None = None

    def take(self, index: np.ndarray) -> Trajectories:
        """The episodes ``index`` (``[B']`` ints), in that order (a screened batch: :mod:`gnplace.rl.screen`)."""
        r = self.rollout
        rows = torch.as_tensor(np.asarray(index, dtype=np.int64))
        rollout = Rollout(r.groups, r.dynamic[index], r.mask[index], r.actions[index], r.group_devices[index],
                          r.finish[index])
        return Trajectories(rollout, self.groups, self.dynamic[rows], self.mask[rows], self.actions[rows],
                            self.old_log_probs[rows], None if self.equivalent is None else self.equivalent[rows],
                            None if self.bias is None else self.bias[rows])


def _wrap(rollout: Rollout, old: torch.Tensor) -> Trajectories:
    return Trajectories(
        rollout, torch.from_numpy(rollout.groups), torch.from_numpy(rollout.dynamic), torch.from_numpy(rollout.mask),
        torch.from_numpy(rollout.actions), old,
    )


def equivalent_devices(rollout: Rollout, device_x: np.ndarray) -> np.ndarray:
    """Devices interchangeable with the chosen one at each decision: same static and dynamic features, ``[B, S, D]``."""
    chosen = np.take_along_axis(rollout.dynamic, rollout.actions[:, :, None, None], axis=2)  # [B, S, 1, F]
    same_state = (rollout.dynamic == chosen).all(axis=-1)
    same_device = (device_x[None, None, :, :] == device_x[rollout.actions][:, :, None, :]).all(axis=-1)
    return same_state & same_device & rollout.mask


@dataclass(frozen=True)
class _HeadArrays:
    """The head's weights and one graph's projections as numpy arrays, for fast per-decision scoring."""

    group: np.ndarray  # [G, K]
    device: np.ndarray  # [D, K]
    w_dynamic: np.ndarray  # [F, K]
    b_dynamic: np.ndarray  # [K]
    w_out: np.ndarray  # [K]
    b_out: float
    alpha: float


def _head_arrays(policy: PlacementPolicy, enc: Encoded) -> _HeadArrays:
    with torch.no_grad():
        return _HeadArrays(
            enc.group.numpy(), enc.device.numpy(), policy.dynamic_proj.weight.T.numpy().copy(),
            policy.dynamic_proj.bias.numpy(), policy.out.weight[0].numpy(), float(policy.out.bias[0]),
            float(policy.log_alpha.exp()),
        )


def _numpy_logits(head: _HeadArrays, g: int, dynamic: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """:meth:`PlacementPolicy.logits` of one decision for all episodes, in numpy (``[B, D]``, masked ``-inf``)."""
    z = dynamic @ head.w_dynamic
    z += head.b_dynamic
    z += head.device[None]
    z += head.group[g]
    np.maximum(z, 0.0, out=z)
    logits = z @ head.w_out + head.b_out - head.alpha * dynamic[..., 0]
    return np.where(mask, logits, -np.inf)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    top = logits.max(axis=-1, keepdims=True)
    shifted = logits - top
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@torch.no_grad()
def sample(
    policy: PlacementPolicy, mdp: PlacementMDP, batch: int, rng: np.random.Generator | None = None, *,
    greedy: bool = False, enc: Encoded | None = None, temperature: float | np.ndarray = 1.0,
    bias: np.ndarray | None = None,
) -> Trajectories:
    """Play ``batch`` episodes with the policy: devices drawn from its distribution, or its argmax if ``greedy``.

    The head is evaluated in numpy per decision (the same function as
    :meth:`~gnplace.policy.gnn.PlacementPolicy.logits`, which the update uses on all decisions at once).

    Args:
        policy (PlacementPolicy): the policy.
        mdp (PlacementMDP): the graph's MDP.
        batch (int): episodes ``B``.
        rng (np.random.Generator, optional): the source of the draws (default: a fresh unseeded one).
        greedy (bool, optional): take the most likely device at every decision (default: :obj:`False`).
        enc (Encoded, optional): the policy's encoding of the graph, if already computed.
        temperature (float or np.ndarray, optional): the draws follow ``softmax(logits / tau)``, one
            ``tau`` for all episodes or one per episode (``[B]``), each at least
            :data:`~gnplace.limits.MIN_TEMPERATURE`; below 1 they stay nearer the greedy placement (default: 1).
            The recorded log-probabilities are the policy's own (``tau = 1``).
        bias (np.ndarray, optional): logits added to the policy's for each group and device, ``[G, D]``
            for every episode or ``[B, G, D]`` per episode (a search's pull toward its best placement;
            default: none). The recorded log-probabilities and the trajectories' ``bias`` include it.
    """
    enc = enc if enc is not None else policy.encode(mdp.inp)
    tau = np.broadcast_to(np.asarray(temperature, dtype=np.float64), (batch,)).reshape(batch, 1)
    if not (tau >= MIN_TEMPERATURE).all():  # (NaN too) below it, logits / tau overflow: a draw may take a masked device
        raise InvalidArgument(f"sampling temperatures must be at least {MIN_TEMPERATURE:g} (> 0), got {temperature!r}")
    tempered = not (greedy or (tau == 1.0).all())
    arrays = _head_arrays(policy, enc)
    rng = rng if rng is not None else np.random.default_rng()
    old = np.zeros((batch, mdp.num_groups, mdp.num_devices), dtype=np.float32)
    if bias is not None:
        bias = np.broadcast_to(bias, (batch, mdp.num_groups, mdp.num_devices))

    def choose(s: int, g: int, dynamic: np.ndarray, mask: np.ndarray) -> np.ndarray:
        logits = _numpy_logits(arrays, g, dynamic, mask)
        if bias is not None:
            logits = logits + bias[:, g]
        log_p = _log_softmax(logits)
        old[:, s] = log_p
        if greedy:
            return log_p.argmax(axis=-1)
        draw = _log_softmax(logits / tau) if tempered else log_p  # pi(a|s)^(1/tau), renormalised
        cdf = np.cumsum(np.exp(draw), axis=-1)
        u = rng.random(batch) * cdf[:, -1]
        return np.minimum((u[:, None] >= cdf).sum(axis=-1), mdp.num_devices - 1)

    traj = _wrap(mdp.rollout(batch, choose), torch.from_numpy(old))
    if bias is not None:
        traj.bias = torch.from_numpy(np.ascontiguousarray(bias[:, traj.rollout.groups], dtype=np.float32))
    return traj


@torch.no_grad()
def sample_move(
    policy: PlacementPolicy, mdp: RefinementMDP, rng: np.random.Generator
) -> Trajectories:
    """One step of the refinement MDP in every chain: the visited group's new device, drawn from the policy.

    The chains move (:meth:`~gnplace.rl.env.RefinementMDP.move`); the returned trajectories have
    one decision each (``S = 1``) and a placeholder rollout whose ``group_devices`` are the chains'
    new placements.
    """
    enc = policy.encode(mdp.inp)
    dynamic, mask = mdp.observe()
    g = mdp.group
    log_p = _log_softmax(_numpy_logits(_head_arrays(policy, enc), g, dynamic, mask))
    cdf = np.cumsum(np.exp(log_p), axis=-1)
    u = rng.random(mask.shape[0]) * cdf[:, -1]
    actions = np.minimum((u[:, None] >= cdf).sum(axis=-1), mdp.num_devices - 1)
    placements = mdp.move(actions)
    rollout = Rollout(np.array([g]), dynamic[:, None], mask[:, None], actions[:, None], placements,
                      np.zeros(mask.shape[0]))
    return _wrap(rollout, torch.from_numpy(log_p[:, None].astype(np.float32)))


def teacher_forced(mdp: PlacementMDP, group_devices: np.ndarray) -> Trajectories:
    """One episode that places every group on ``group_devices`` (``[G]``) where allowed (the imitation target).

    Where the target device is masked (the group no longer fits there by the MDP's estimate), the
    allowed device with the earliest finish is taken instead.
    """
    target = np.asarray(group_devices, dtype=np.int64)

    def choose(s: int, g: int, dynamic: np.ndarray, mask: np.ndarray) -> np.ndarray:
        wanted = np.full(mask.shape[0], target[g])
        fallback = np.where(mask, dynamic[:, :, 0], np.inf).argmin(axis=1)
        return np.where(mask[np.arange(mask.shape[0]), wanted], wanted, fallback)

    traj = _wrap(mdp.rollout(1, choose), torch.zeros(1, mdp.num_groups, mdp.num_devices))
    traj.equivalent = torch.from_numpy(equivalent_devices(traj.rollout, mdp.inp.device_x.numpy()))
    return traj


def log_probs(policy: PlacementPolicy, enc: Encoded, traj: Trajectories) -> torch.Tensor:
    """The policy's log-probability of every device at every decision of ``traj``, ``[B, S, D]`` (differentiable).

    With the trajectories' sampling ``bias``, the biased policy's, as they were drawn.
    """
    logits = policy.logits(enc, traj.groups, traj.dynamic, traj.mask)
    if traj.bias is not None:
        logits = logits + traj.bias
    return torch.log_softmax(logits, dim=-1)
