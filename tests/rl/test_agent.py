"""Rollouts of the policy: sampled, greedy, teacher-forced; log-probabilities for the update."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnplace.cluster import load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.policy.features import build_policy_input
from gnplace.policy.gnn import PlacementPolicy
from gnplace.rl.agent import log_probs, sample, sample_move, teacher_forced
from gnplace.rl.env import PlacementMDP, RefinementMDP
from gnplace.toy import layered_graph


def policy_and_mdp(seed=0):
    torch.manual_seed(seed)
    inp = build_policy_input(layered_graph(80, seed=4).replace(group=np.arange(80) // 2), load_cluster("k80x4"))
    return PlacementPolicy(), PlacementMDP(inp)


def test_the_numpy_head_of_rollouts_matches_the_torch_head_of_updates():
    policy, mdp = policy_and_mdp()
    traj = sample(policy, mdp, 6, np.random.default_rng(0))
    with torch.no_grad():
        again = log_probs(policy, policy.encode(mdp.inp), traj)
    finite = torch.isfinite(traj.old_log_probs)
    assert torch.equal(finite, torch.isfinite(again))
    assert torch.allclose(traj.old_log_probs[finite], again[finite], atol=1e-5)


def test_samples_are_seeded_and_greedy_is_the_argmax():
    policy, mdp = policy_and_mdp()
    a = sample(policy, mdp, 4, np.random.default_rng(3)).rollout.group_devices
    b = sample(policy, mdp, 4, np.random.default_rng(3)).rollout.group_devices
    assert np.array_equal(a, b)
    greedy = sample(policy, mdp, 2, greedy=True)
    assert np.array_equal(greedy.actions[0], greedy.old_log_probs[0].argmax(-1).numpy())
    assert np.array_equal(greedy.rollout.group_devices[0], greedy.rollout.group_devices[1])


def test_a_cold_temperature_samples_the_greedy_placement_and_keeps_the_policys_log_probs():
    policy, mdp = policy_and_mdp()
    def argmax_every_step(traj, rows):  # a most likely device at each decision (ties between alike devices)
        chosen = traj.old_log_probs.gather(-1, traj.actions.unsqueeze(-1)).squeeze(-1)
        return torch.allclose(chosen[rows], traj.old_log_probs.max(-1).values[rows])

    cold = sample(policy, mdp, 4, np.random.default_rng(0), temperature=1e-4)
    assert argmax_every_step(cold, slice(None))
    assert cold.old_log_probs.exp().nan_to_num().sum(-1).allclose(torch.ones(4, mdp.num_groups))  # pi, not pi^(1/tau)
    assert (cold.old_log_probs.max(-1).values < -1e-3).any()  # ... which is not one-hot
    mixed = sample(policy, mdp, 3, np.random.default_rng(0), temperature=np.array([1e-4, 1.0, 1e-4]))
    assert argmax_every_step(mixed, [0, 2]) and not argmax_every_step(mixed, [1])
    with pytest.raises(InvalidArgument, match="temperatures"):
        sample(policy, mdp, 2, np.random.default_rng(0), temperature=0.0)


def test_sampled_devices_are_always_allowed():
    policy, mdp = policy_and_mdp()
    traj = sample(policy, mdp, 8, np.random.default_rng(1))
    chosen = traj.mask.gather(-1, traj.actions.unsqueeze(-1)).squeeze(-1)
    assert chosen.all()


def test_teacher_forcing_follows_the_target_and_marks_equivalent_devices():
    _, mdp = policy_and_mdp()
    target = np.arange(mdp.num_groups) % 4
    traj = teacher_forced(mdp, target)
    assert np.array_equal(traj.rollout.group_devices[0], target)
    assert traj.equivalent.gather(-1, traj.actions.unsqueeze(-1)).all()
    assert traj.equivalent[0, 0].all()  # at the first decision every idle K80 is alike


def test_a_refinement_move_is_one_decision():
    policy, mdp = policy_and_mdp()
    chains = RefinementMDP(mdp.inp, np.zeros(mdp.num_groups, dtype=np.int64), 1.0, chains=5)
    traj = sample_move(policy, chains, np.random.default_rng(0))
    assert traj.actions.shape == (5, 1) and traj.rollout.group_devices.shape == (5, mdp.num_groups)
    # the untrained prior keeps the group where it is most of the time
    assert (traj.actions[:, 0] == 0).float().mean() >= 0.4


def test_a_sampling_bias_pulls_samples_to_its_devices_and_log_probs_carry_it():
    policy, mdp = policy_and_mdp()
    target = np.arange(mdp.num_groups) % mdp.num_devices
    bias = np.zeros((8, mdp.num_groups, mdp.num_devices))
    bias[:, np.arange(mdp.num_groups), target] = 30.0  # overwhelming: every allowed target is taken
    traj = sample(policy, mdp, 8, np.random.default_rng(0), bias=bias)
    allowed = traj.mask.numpy()[:, np.arange(traj.groups.numel()), target[traj.groups.numpy()]]
    chosen = traj.rollout.group_devices[:, traj.groups.numpy()]
    assert allowed.any() and (chosen[allowed] == target[traj.groups.numpy()][None, :].repeat(8, 0)[allowed]).all()
    assert traj.bias is not None and traj.bias.shape == traj.mask.shape
    with torch.no_grad():
        again = log_probs(policy, policy.encode(mdp.inp), traj)  # the biased policy, as the samples were drawn
    finite = torch.isfinite(traj.old_log_probs)
    assert torch.allclose(traj.old_log_probs[finite], again[finite], atol=1e-4)
    plain = sample(policy, mdp, 8, np.random.default_rng(0))
    assert plain.bias is None and not np.array_equal(plain.rollout.group_devices, traj.rollout.group_devices)


def test_taking_episodes_keeps_each_ones_decisions_and_log_probs_together():
    policy, mdp = policy_and_mdp()
    bias = np.zeros((mdp.num_groups, mdp.num_devices))
    bias[:, 2] = 1.0
    traj = sample(policy, mdp, 6, np.random.default_rng(0), bias=bias)
    part = traj.take(np.array([4, 1]))
    assert part.rollout.group_devices.tolist() == traj.rollout.group_devices[[4, 1]].tolist()
    for name in ("dynamic", "mask", "actions", "old_log_probs", "bias"):
        assert torch.equal(getattr(part, name), getattr(traj, name)[[4, 1]]), name
    assert torch.equal(part.groups, traj.groups) and part.rollout.finish.tolist() == traj.rollout.finish[[4, 1]].tolist()
    with torch.no_grad():  # the update re-evaluates the kept episodes as it would have in the whole batch
        enc = policy.encode(mdp.inp)
        assert torch.allclose(log_probs(policy, enc, part), log_probs(policy, enc, traj)[[4, 1]])


def test_a_decision_with_one_allowed_device_takes_it_with_probability_one_and_learns_nothing_there():
    """Every group fits on one device only: both heads give it probability 1, the entropy, KL and PPO's gradient are 0.

    Masked devices are out of the softmax, the entropy and the log-probabilities: none leaks into them, as a
    ``-inf`` logit times a zero probability (NaN) or a large finite mask value (a share of the probability) would.
    """
    from gnplace.cluster import Device
    from gnplace.rl.ppo import normalise_advantages, ppo_loss
    from gnplace.toy import uniform_cluster

    roomy = [Device(f"gpu{k}", "k80", 2.8e12, 2.4e11, 1e15 if k == 1 else 1.0) for k in range(3)]
    torch.manual_seed(0)
    policy = PlacementPolicy()
    with torch.no_grad():  # a trained-looking head, not the EFT rule alone
        policy.out.weight.normal_()
    mdp = PlacementMDP(build_policy_input(layered_graph(30, seed=2), uniform_cluster(roomy)))
    traj = sample(policy, mdp, 4, np.random.default_rng(0))
    one = (traj.mask.sum(-1) == 1).all(0)  # the decisions of groups that hold bytes: they fit on gpu1 alone
    assert one.sum() >= 10 and (traj.actions[:, one] == 1).all()
    assert traj.old_log_probs[:, one, 1].eq(0.0).all() and torch.isinf(traj.old_log_probs[:, one][..., [0, 2]]).all()
    assert (sample(policy, mdp, 1, greedy=True).actions[:, one] == 1).all()
    new = log_probs(policy, policy.encode(mdp.inp), traj)[:, one]
    advantages = normalise_advantages(np.array([0.1, -0.2, 0.3, 0.0]))
    loss, stats = ppo_loss(new, traj.old_log_probs[:, one], traj.actions[:, one], advantages, traj.mask[:, one],
                           clip=0.2, beta=1.0, entropy=0.01)
    loss.backward()
    assert stats["losses/entropy"] == 0.0 and stats["losses/approx_kl"] == 0.0 and stats["losses/clipfrac"] == 0.0
    assert all(p.grad is None or float(p.grad.abs().max()) == 0.0 for p in policy.parameters())


def test_a_temperature_too_small_to_divide_by_is_refused_and_the_least_draws_allowed_devices():
    """``temperature=1e-310`` was taken: logits / tau overflowed, the draw's probabilities were NaN, and every decision
    whose allowed logits were all negative took device 0, which the mask forbade (120 of 120 decisions here)."""
    from gnplace.cluster import Device
    from gnplace.limits import MIN_TEMPERATURE
    from gnplace.toy import uniform_cluster

    roomy = [Device(f"gpu{k}", "k80", 2.8e12, 2.4e11, 1e15 if k == 1 else 1.0) for k in range(3)]
    torch.manual_seed(0)
    policy = PlacementPolicy()
    with torch.no_grad():
        policy.out.bias.fill_(-1.0)  # every logit negative
    mdp = PlacementMDP(build_policy_input(layered_graph(30, seed=2), uniform_cluster(roomy)))
    for tau in (1e-310, np.array([1.0, 1e-310]), MIN_TEMPERATURE / 2, float("nan")):
        with pytest.raises(InvalidArgument, match="temperatures must be at least 1e-06"):
            sample(policy, mdp, 2, np.random.default_rng(0), temperature=tau)
    traj = sample(policy, mdp, 4, np.random.default_rng(0), temperature=MIN_TEMPERATURE)
    assert traj.mask.gather(-1, traj.actions.unsqueeze(-1)).all()


def test_a_trained_heads_numpy_logits_are_its_torch_logits():
    """The rollouts' numpy head is the update's torch head for any weights, not only the untrained EFT rule.

    Untrained, the head's last layer is 0 and only the EFT term shows: a numpy head without its ReLU, or without a
    projection, gave the same logits there; PPO's ratio compares the two heads' log-probabilities.
    """
    policy, mdp = policy_and_mdp()
    with torch.no_grad():
        policy.out.weight.normal_()
        policy.out.bias.fill_(0.3)
        policy.dynamic_proj.bias.normal_()
    traj = sample(policy, mdp, 3, np.random.default_rng(0))
    with torch.no_grad():
        again = log_probs(policy, policy.encode(mdp.inp), traj)
    finite = torch.isfinite(traj.old_log_probs)
    assert torch.equal(finite, torch.isfinite(again))
    assert float((traj.old_log_probs[finite] - again[finite]).abs().max()) < 1e-4
    assert float(again[finite].exp().std()) > 0.01  # not uniform: the head's weights show


def test_a_cold_sample_records_the_log_probs_of_the_policy_itself():
    """The recorded log-probabilities are the policy's own at tau = 1 (PPO's behaviour policy), not the tempered draw's.

    On k80x4 a tempered distribution is not one-hot either (it ties alike devices), so only a comparison with the
    update's head tells the two apart.
    """
    policy, mdp = policy_and_mdp()
    with torch.no_grad():
        policy.out.weight.normal_()
    cold = sample(policy, mdp, 2, np.random.default_rng(0), temperature=0.05)
    with torch.no_grad():
        again = log_probs(policy, policy.encode(mdp.inp), cold)
    finite = torch.isfinite(again)
    assert float((cold.old_log_probs[finite] - again[finite]).abs().max()) < 1e-4


def test_teacher_forcing_falls_back_to_the_earliest_finish_where_the_target_does_not_fit():
    """A target device the group no longer fits on is replaced by the allowed device of least EFT gap (0)."""
    from gnplace.policy.features import DYNAMIC_FEATURES
    from gnplace.toy import toy_cluster

    inp = build_policy_input(layered_graph(40, seed=4).replace(group=np.arange(40) // 2), toy_cluster(3))
    need = float(inp.group_bytes.sum())
    inp = build_policy_input(inp.graph, toy_cluster(3, memory=need / 2))  # device 0 holds about half the groups
    mdp = PlacementMDP(inp)
    traj = teacher_forced(mdp, np.zeros(mdp.num_groups, dtype=np.int64))
    actions, mask = traj.actions[0].numpy(), traj.mask[0].numpy()
    moved = actions != 0
    assert moved.any() and not mask[moved, 0].any()  # only where device 0 is masked
    gap = traj.dynamic[0, :, :, DYNAMIC_FEATURES.index("eft_gap")].numpy()
    least = np.where(mask, gap, np.inf).min(axis=1)
    assert np.array_equal(gap[np.arange(len(actions)), actions][moved], least[moved])
    assert (least[moved] == 0).all()


def test_equivalent_devices_need_the_same_device_features_as_well_as_the_same_state():
    """Two idle devices of one state are interchangeable only if the devices themselves are alike (links too)."""
    from gnplace.rl.agent import equivalent_devices
    from gnplace.rl.env import Rollout

    dynamic = np.zeros((1, 2, 3, 4), dtype=np.float32)
    dynamic[0, 1, 1, 0] = 0.5  # at the second decision device 1 is in another state
    mask = np.ones((1, 2, 3), dtype=bool)
    mask[0, 1, 2] = False
    rollout = Rollout(np.array([0, 1]), dynamic, mask, np.array([[0, 0]]), np.zeros((1, 2), dtype=np.int64),
                      np.zeros(1))
    device_x = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 2.0]])  # device 2 has other links
    same = equivalent_devices(rollout, device_x)
    assert same.tolist() == [[[True, True, False], [True, False, False]]]
