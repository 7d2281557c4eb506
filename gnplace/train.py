"""Training the placement policy under Lightning: the system (``PlacementLearner``) and its data.

Lightning's split (its style guide): the *model* is the plain :class:`~gnplace.policy.gnn.PlacementPolicy`;
the *system* :class:`PlacementLearner` owns the science of one training iteration; the
:class:`PlacementDataModule` answers "which (graph, cluster) pairs, in which order"; the ``Trainer``
owns the engineering (loop, checkpoints, logs, progress bar, devices).

One iteration (:meth:`PlacementLearner.training_step`, manual optimisation):

1. **imitation** (the first ``imitation_steps`` iterations): the best placement known of each pair (the
   reference, unless a search offered a better start: :meth:`~gnplace.rl.problem.PlacementProblem.offer`) is
   replayed through the MDP and the policy is fitted to its choices (:mod:`gnplace.rl.imitation`); no
   sample is drawn or timed, and only the last imitation iteration times a placement: the greedy one of each of
   its pairs, one evaluation each (``greedy/after_imitation``);
2. **reinforcement** afterwards: for each pair of the batch, ``samples`` placements are drawn from
   the policy in one batched rollout (:mod:`gnplace.rl.agent`), timed together by the timer
   (``time_batch``), rewarded against the reference (:mod:`gnplace.rl.problem`), and the policy takes
   ``epochs`` PPO steps (:mod:`gnplace.rl.ppo`) or one REINFORCE step (:mod:`gnplace.rl.reinforce`).

The iteration count, the sampling generator, the KL coefficient and the best placement of each pair
are saved in checkpoints (plain tensors and numbers: they load with ``weights_only=True``), and the
pairs of an iteration depend only on the seed and the iteration count, so ``Trainer.fit(ckpt_path=...)``
continues a run exactly where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch

from gnplace.callbacks import (
    StopAfter,
    TimedCheckpoint,
    fit_interruptibly,
    progress_callbacks,
    quiet_lightning,
    single_process_plugins,
)
from gnplace.cluster import Cluster, load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph import OpGraph
from gnplace.graph_io import load_graph
from gnplace.limits import finite_number, is_whole
from gnplace.placement import Placement
from gnplace.policy.gnn import PlacementPolicy
from gnplace.rl.agent import Trajectories, log_probs, sample, sample_move, teacher_forced
from gnplace.rl.config import SCREEN_MODELS, LearnerConfig
from gnplace.rl.env import RefinementMDP
from gnplace.rl.imitation import imitation_loss
from gnplace.rl.ppo import adapt_beta, normalise_advantages, ppo_loss, risk_seeking_advantages
from gnplace.rl.problem import STEP_FLOOR_S, PlacementProblem
from gnplace.rl.reinforce import reinforce_loss
from gnplace.runlock import holds_folder
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BudgetedTimer, StepTimer, geomean, overflow, relative_step
from gnplace.units import counted
from gnplace.workers import stray_ranks_hidden

__all__ = ["LearnerConfig", "PlacementLearner", "PlacementDataModule", "ProblemStream", "fit",
           "changed_settings", "every_rank", "pooled_means", "SCREEN_MODELS"]


class PlacementLearner(L.LightningModule):
    """The system that trains a :class:`~gnplace.policy.gnn.PlacementPolicy` (see the module docstring).

    Args:
        config (LearnerConfig, optional): hyperparameters (default: ``LearnerConfig()``).
        timer (StepTimer, optional): times sampled placements (default: ``Simulator()``); not saved.
    """

    def __init__(self, config: LearnerConfig | None = None, timer: StepTimer | None = None) -> None:
        super().__init__()
        self.config = config = config or LearnerConfig()
        self.save_hyperparameters(asdict(config))
        from gnplace.seed import seeded_torch

        with seeded_torch(config.seed):
            self.policy = PlacementPolicy(config.policy)
        self.automatic_optimization = False
        self.timer: StepTimer = timer or Simulator()
        config.check_timer(self.timer)
        self.rng = np.random.default_rng(config.seed)
        self.beta = config.beta
        self.iteration = 0
        self._teachers: dict[tuple[int, str], tuple[tuple[Any, ...], Trajectories]] = {}
        self._share = 1.0  # this rank's pairs of the iteration over an even share of them (see training_step)
        # (held-out pair, family, greedy ratio, greedy overflows, best ratio) of each pair this rank validated
        self._val_ratios: list[tuple[int, str, float, bool, float]] = []
        self.last_validation: dict[str, float] = {}

    def forward(self, problem: PlacementProblem) -> np.ndarray:
        """The policy's greedy placement of ``problem``, a device per decision group ``[G]`` (inference only)."""
        with torch.no_grad():
            return sample(self.policy, problem.mdp, 1, greedy=True).rollout.group_devices[0]

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """One iteration: imitation first, then sampling, timing and a policy update.

        The pairs come from the :class:`PlacementDataModule` by this learner's iteration count (the
        loop's ``batch`` is only a tick), so that a resumed run continues exactly.
        """
        data = getattr(self.trainer, "datamodule", None)
        if not isinstance(data, PlacementDataModule):
            from gnplace.exceptions import InvalidArgument

            raise InvalidArgument("PlacementLearner trains with a PlacementDataModule (fit(..., datamodule=...))")
        self._forget_earlier_steps()
        batch = data.batch(self.iteration)
        world, rank = self._world()
        if world > 1:  # data parallel: each rank simulates its own share of the pairs (DDP averages the gradients)
            # 4 pairs on 3 ranks are 2, 1 and 1: a mean over the ranks of each rank's mean weighted the pairs 1/6,
            # 1/3, 1/3 and 1/6, where one process weights each 1/4; each rank's mean counts as its pairs' share
            self._share = len(batch[rank::world]) * world / len(batch)
            batch = batch[rank::world]
        if self.iteration < self.config.imitation_steps:
            self._imitation_step(batch)
        else:
            self._reinforcement_step(batch)
        self.iteration += 1

    def _forget_earlier_steps(self) -> None:
        """Drop what the earlier iterations of this epoch logged: each row of the log holds its own iteration's figures.

        Lightning resets what a step logs once an epoch only, and writes every metric logged earlier in the epoch
        again at each later step, with its old value: a search's log (one epoch) carried the last imitation step's
        ``imitation/loss`` and ``greedy/after_imitation`` on every PPO row (54 of 54 for ``ppo``, 3 imitation steps,
        budget 200), and pretraining's did up to its epoch's end. Lightning resets a step's logged values this way
        itself at an epoch's first step (``LightningModule.log``); its collection has no public name.
        """
        results = getattr(self._trainer, "_results", None) if self._trainer is not None else None
        if results is not None:
            results.reset(metrics=False, fx="training_step")

    def _update(self, loss: torch.Tensor) -> None:
        """One gradient step of Adam on ``loss``, the gradient norm bounded.

        ``loss`` is the mean over this rank's pairs; in a distributed run the ranks' gradients are averaged
        (:meth:`_average_gradients`, not DDP's hooks), each rank's counting as many pairs as it holds, so that the step
        is the one process's: the mean over the iteration's pairs.
        """
        optimizer = self.optimizers()
        assert not isinstance(optimizer, list)
        optimizer.zero_grad()
        if self._share != 1.0:  # a rank of an uneven share: its mean counts as its pairs (an even one is left exact)
            loss = loss * self._share
        if self._world()[0] > 1:
            # DDP's hooks summed each bucket of 3 ranks' gradients in an order that its bucket layout sets, and a
            # resumed run's first backward has the layout of before the first rebuild: 1 ulp off the run not stopped
            # (2 ranks' sums have no order). The one reduce is _average_gradients', of one tensor laid out alike.
            from lightning.pytorch.strategies import ParallelStrategy

            strategy = self.trainer.strategy
            assert isinstance(strategy, ParallelStrategy)
            with strategy.block_backward_sync():
                self.manual_backward(loss)
        else:
            self.manual_backward(loss)
        self._average_gradients()
        self.clip_gradients(optimizer, gradient_clip_val=self.config.grad_clip,  # type: ignore[arg-type]
                            gradient_clip_algorithm="norm")
        optimizer.step()
        # a diverged run stops here, before any checkpoint or export holds weights no placer can load (every rank
        # holds the same weights after the averaged step, so every rank stops)
        if not all(bool(torch.isfinite(p).all()) for p in self.policy.parameters()):
            from gnplace.exceptions import InvalidArgument

            raise InvalidArgument(
                f"training diverged at iteration {self.iteration}: the policy's weights are not finite (the loss was "
                f"{float(loss.detach()):.4g}); lower the learning rate (lr = {self.config.lr:g})"
            )

    def _world(self) -> tuple[int, int]:
        """``(world size, this process's rank)``: ``(1, 0)`` outside a distributed run."""
        if self._trainer is None:
            return 1, 0
        return int(self.trainer.world_size), int(self.trainer.global_rank)

    def _average_gradients(self) -> None:
        """Average the gradients over the ranks of a distributed run (the strategy's ``reduce``).

        Every backward of the step is averaged here, in one flat tensor (:meth:`_update` keeps DDP's hooks out of
        the backward): PPO takes ``epochs`` steps per batch.
        """
        if self._world()[0] <= 1:
            return
        params = list(self.policy.parameters())
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = self.trainer.strategy.reduce(torch.cat([g.reshape(-1) for g in grads]), reduce_op="mean")
        offset = 0
        for p, g in zip(params, grads):
            p.grad = flat[offset:offset + g.numel()].view_as(g).clone()
            offset += g.numel()

    def _mean_over_ranks(self, value: float) -> float:
        """``value``, this rank's mean over its pairs, as the mean over every rank's pairs (itself otherwise).

        Each rank's counts as many pairs as it holds (see :meth:`_update`).
        """
        if self._world()[0] <= 1:
            return value
        mine = torch.tensor([value], dtype=torch.float64)
        if self._share != 1.0:
            mine = mine * self._share
        return float(self.trainer.strategy.reduce(mine, reduce_op="mean")[0])

    def _imitation_step(self, batch: list[PlacementProblem]) -> None:
        trajectories = [self._incumbent(p) for p in batch]  # the best so far: the reference, or a search's start
        losses, stats = [], []
        for problem, traj in zip(batch, trajectories):
            assert traj is not None
            enc = self.policy.encode(problem.inp)
            loss, info = imitation_loss(log_probs(self.policy, enc, traj), traj.actions, traj.equivalent)
            losses.append(loss)
            stats.append(info)
        self._update(torch.stack(losses).mean())
        if self.iteration == self.config.imitation_steps - 1:  # the end of imitation: how good is the greedy policy?
            for problem in batch:
                greedy = relative_step(self.greedy_step(problem), problem.reference_step)
                stats.append({"greedy/after_imitation": greedy})
        self._log_mean(stats)

    def greedy_step(self, problem: PlacementProblem) -> float:
        """Step time (seconds) of the policy's greedy placement of ``problem``, timed once (one evaluation).

        Also kept as ``problem.greedy_steps[iteration]``.
        """
        devices = self.forward(problem)[None, :]
        result, _ = problem.score(devices, self.timer, self.config.oom_penalty)
        step = float(result.step_time[0])
        problem.greedy_steps[self.iteration] = step
        return step

    def _reinforcement_step(self, batch: list[PlacementProblem]) -> None:
        cfg = self.config
        # ALGO LOGIC: rollouts of the current policy, timed together, rewarded against the reference
        rollouts, advantages, rewards, ratios = [], [], [], []
        for problem in batch:
            if cfg.mode == "refine":
                traj, reward = self._refine_step(problem)
            else:
                traj = self._draw(problem)
                timed_before = problem.evaluations
                # log T_hat of the batch as it is timed (scoring may move the incumbent its placements anchor to)
                base = problem.model_log_step(problem.placements(traj.rollout.group_devices)) \
                    if problem.model is not None else None
                result, reward = problem.score(traj.rollout.group_devices, self.timer, cfg.oom_penalty)
                if problem.screen is not None:
                    problem.screen.observe(traj.rollout.group_devices, result.step_time, result.oom, base)
                if problem.widening and cfg.prior > 0:  # the next batch's kappa, by its new share
                    problem.widen(problem.evaluations - timed_before, cfg.samples, cfg.prior)
            rollouts.append(traj)
            # A_i: normalised over the pair's samples, or the best share's excess over R_epsilon (risk-seeking)
            advantages.append(normalise_advantages(reward) if cfg.risk >= 1
                              else risk_seeking_advantages(reward, cfg.risk))
            rewards.append(float(reward.mean()))
            ratios.append(relative_step(problem.best_step, problem.reference_step))
        epochs = cfg.epochs if cfg.algo == "ppo" else 1
        stats: list[dict[str, float]] = []
        for _ in range(epochs):
            losses = []
            pulled = cfg.elite > 0 and cfg.mode == "construct"  # the incumbent is a constructive trajectory
            incumbents = [self._incumbent(p, cfg.elite_target) for p in batch] if pulled else [None] * len(batch)
            for problem, traj, adv, best in zip(batch, rollouts, advantages, incumbents):
                enc = self.policy.encode(problem.inp)
                new = log_probs(self.policy, enc, traj)
                if cfg.algo == "ppo":
                    loss, info = ppo_loss(new, traj.old_log_probs, traj.actions, adv, traj.mask, clip=cfg.clip,
                                          beta=self.beta, entropy=cfg.entropy)
                else:
                    loss, info = reinforce_loss(new, traj.actions, adv, traj.mask, entropy=cfg.entropy)
                if best is not None:
                    # Post's cross-entropy pull, toward the best placement seen (or the best the policy sampled)
                    pull, _ = imitation_loss(log_probs(self.policy, enc, best), best.actions, best.equivalent)
                    loss = loss + cfg.elite * pull
                losses.append(loss)
                stats.append(info)
            self._update(torch.stack(losses).mean())
        if cfg.algo == "ppo":
            # the same beta on every rank: the KL of the last epoch over its pairs (stats[-1] alone was the last
            # pair's), averaged over the ranks. Schulman et al. measure d after the last update; this is the KL
            # before it, as the last epoch's loss computed it (no forward more; see gnplace.rl.ppo's docstring)
            kl = float(np.mean([info["losses/approx_kl"] for info in stats[-len(batch):]]))
            self.beta = adapt_beta(self.beta, self._mean_over_ranks(kl), cfg.kl_target)
        self._log_mean(stats + [{"reward/mean": r, "best/vs_reference": q, "losses/beta": self.beta}
                                for r, q in zip(rewards, ratios)])
        if self._trainer is not None and isinstance(self.timer, BudgetedTimer) and self.timer.budget is not None:
            # a search: its bar shows the evaluations spent (with a memo it may end before its last iteration)
            # and the best step so far over the reference's
            self.log_dict({"evaluations": int(self.timer.evaluations), "best": float(np.mean(ratios))},
                          prog_bar=True, on_step=True, on_epoch=False, batch_size=1)

    def _draw(self, problem: PlacementProblem) -> Trajectories:
        """The batch of ``samples`` placements of ``problem`` to time: drawn, or screened from ``screen`` times as many.

        With ``screen`` ``M > 1`` the pair gets a :class:`~gnplace.rl.screen.MoveScreen`, which learns
        from every batch timed; once it is :attr:`~gnplace.rl.screen.MoveScreen.ready`, ``M * samples``
        placements are drawn and the ``samples`` distinct ones not timed before that it ranks fastest
        are kept (repeats fill the batch if fewer are new: they cost nothing). The PPO update then
        learns from the kept ones with their behaviour log-probabilities, a batch filtered toward the
        better samples, as the cross-entropy method filters toward its elite.
        """
        cfg = self.config
        bias = self._prior(problem)
        if cfg.screen <= 1:
            return sample(self.policy, problem.mdp, cfg.samples, self.rng, bias=bias)
        if cfg.screen_model == "simulator" and problem.model is None:
            problem.model = Simulator()  # the screen ranks by it, corrected by what the timer measures
        screen = problem.start_screen()
        if not screen.ready:
            return sample(self.policy, problem.mdp, cfg.samples, self.rng, bias=bias)
        drawn = sample(self.policy, problem.mdp, cfg.samples * cfg.screen, self.rng, bias=bias)
        devices = problem.placements(drawn.rollout.group_devices)
        keys, rows = problem.untimed(devices)
        new = np.asarray(rows, dtype=np.int64)
        kept = new[screen.rank(drawn.rollout.group_devices[new], problem.model_log_step(devices[new]))][: cfg.samples]
        if kept.shape[0] < cfg.samples:  # too few new placements: repeats, already timed, fill the batch
            rest = np.setdiff1d(np.arange(len(keys)), kept, assume_unique=True)
            kept = np.concatenate([kept, rest[: cfg.samples - kept.shape[0]]])
        return drawn.take(kept)

    def _prior(self, problem: PlacementProblem) -> np.ndarray | None:
        """The sampling bias toward the best placement seen: ``kappa`` on its device of every group, ``[G, D]``.

        ``kappa`` is the pair's adapted one if it widens (:attr:`~gnplace.rl.problem.PlacementProblem.kappa`).
        """
        if self.config.prior <= 0:
            return None
        return problem.prior(self.config.prior if problem.kappa is None else problem.kappa)

    def _refine_step(self, problem: PlacementProblem) -> tuple[Trajectories, np.ndarray]:
        """One move of every refinement chain of ``problem``, timed and rewarded.

        The move's reward is the decrease in step time over the reference's step, less the memory penalty.
        """
        cfg = self.config
        mdp = problem.refiner
        if mdp is None:  # (the pair's chains: saved with its state, so that a resume moves them on)
            mdp = problem.refiner = RefinementMDP(problem.inp, problem.best_groups(), problem.best_step, cfg.samples)
        traj = sample_move(self.policy, mdp, self.rng)
        result, _ = problem.score(traj.rollout.group_devices, self.timer, cfg.oom_penalty)
        gain = mdp.record(result.step_time, result.busy_time) / max(problem.reference_step, STEP_FLOOR_S)
        reward = gain - cfg.oom_penalty * overflow(result.peak_memory, problem.inp.cluster.memory)
        if mdp.steps % max(problem.inp.num_groups, 1) == 0:
            mdp.restart(problem.best_groups(), problem.best_step)
        return traj, reward

    def _incumbent(self, problem: PlacementProblem, target: str = "best") -> Trajectories | None:
        """A placement of ``problem`` replayed through its MDP (cached until it changes), or None if there is none.

        ``target`` ``"best"``: the best placement seen, the reference included; ``"samples"``: the best
        placement the policy itself produced (:attr:`PlacementProblem.sample_best_devices`).
        """
        if target == "samples":
            if problem.sample_best_devices is None:
                return None
            groups = problem.sample_best_groups()
        else:
            groups = problem.best_groups()
        # keyed by the groups replayed, not the best step: a fitting placement that replaces an overflowing
        # reference may time the same, and the stale reference was imitated on
        key, slot = (id(problem), target, groups.tobytes()), (id(problem), target)
        cached = self._teachers.get(slot)
        if cached is None or cached[0] != key:
            cached = (key, teacher_forced(problem.mdp, groups))
            self._teachers[slot] = cached
        return cached[1]

    def _log_mean(self, stats: list[dict[str, float]]) -> None:
        """Log the mean of each figure of ``stats`` (a dict per pair, or per pair and PPO epoch) as this iteration's.

        In a distributed run each rank holds its own pairs' figures: every rank's sums and counts are pooled
        (:func:`pooled_means`; a collective, which every rank makes once an iteration), so that the logged figures
        are the whole batch's, each pair weighted alike, as one process logs them (up to float rounding). Rank 0's
        share alone was logged before (2 processes, 2 pairs: ``imitation/loss`` 0.408, its pair's, where the batch's
        was 0.371).
        """
        if self._trainer is None:
            return
        world = self._world()[0]
        if world > 1:
            values = pooled_means(every_rank(_sums_and_counts(stats), world))
        elif not stats:
            return
        else:
            keys = {k for s in stats for k in s}
            values = {k: float(np.mean([s[k] for s in stats if k in s])) for k in sorted(keys)}
        if values:
            self.log_dict(values, prog_bar=False, on_step=True, on_epoch=False, batch_size=1)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """Adam over the policy's parameters."""
        return torch.optim.Adam(self.policy.parameters(), lr=self.config.lr)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Keep the iteration, the sampling generator's state and :math:`\\beta` (numbers only)."""
        from gnplace.policy.checkpoint import feature_set

        checkpoint["gnplace"] = {"iteration": self.iteration, "beta": self.beta, "rng": self.rng.bit_generator.state,
                                 "features": feature_set()}
        world, _ = self._world()
        if world > 1:  # every rank's draws, so that a resumed distributed run is the run it continues
            checkpoint["gnplace"]["rngs"] = every_rank(self.rng.bit_generator.state, world)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restore what :meth:`on_save_checkpoint` kept: each rank of a distributed run its own draws.

        Raises:
            InvalidCheckpoint: if the iteration, :math:`\\beta` or the generator's state is malformed (an
                edited file: ``fit`` and a search resume without checking them first); nothing is restored then.
        """
        from gnplace.exceptions import InvalidCheckpoint

        state = checkpoint.get("gnplace", {})
        iteration, beta = state.get("iteration", 0), state.get("beta", self.config.beta)
        if not is_whole(iteration) or iteration < 0:
            raise InvalidCheckpoint(f"the checkpoint's learner's iteration ({iteration!r}) is malformed; cannot resume "
                                    "from it")
        if not isinstance(beta, int | float) or not finite_number(beta) or beta < 0:  # (10**400: no float)
            raise InvalidCheckpoint(f"the checkpoint's learner's beta ({beta!r}) is malformed; cannot resume from it")
        world, rank = self._world()
        rngs = state.get("rngs")
        rng = np.random.default_rng()
        try:
            if world > 1 and isinstance(rngs, list) and len(rngs) == world:
                rng.bit_generator.state = rngs[rank]
            elif world > 1:  # a checkpoint of before 2026-11-29: each rank reseeds from the iteration
                rng = np.random.default_rng((self.config.seed, rank, int(iteration)))
            elif "rng" in state:
                rng.bit_generator.state = state["rng"]
            else:
                rng = self.rng
        except (KeyError, TypeError, ValueError) as err:
            raise InvalidCheckpoint("the checkpoint's learner's sampling generator state is malformed; cannot resume "
                                    "from it") from err
        self.iteration, self.beta, self.rng = int(iteration), float(beta), rng

    def setup(self, stage: str) -> None:
        """In a distributed run, give each rank its own stream of samples (rank 0 keeps the single-process one).

        The ranks on one machine also share its cores for their simulations (:mod:`gnplace.workers`: ranks
        whose parallel loops each take every core spin against each other).
        """
        world, rank = self._world()
        if world > 1 and rank > 0:
            self.rng = np.random.default_rng((self.config.seed, rank))
        if world > 1:
            from gnplace.workers import limit_threads, threads_per_worker

            limit_threads(threads_per_worker(self.trainer.num_devices), torch=False)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        """Time the greedy placement of one held-out pair (and ``val_samples`` samples); keep the ratios.

        With a ``prior``, the greedy decode and the samples carry it around the reference placement
        (and, with an anchored data module, keep its ops where a group stays), as a search from
        ``auto`` would; the samples come from a generator seeded by the pair, the same each validation.
        In a distributed run each rank validates the pairs ``index % world == rank`` only (every rank validated every
        pair); :meth:`on_validation_epoch_end` gathers them.
        """
        data = getattr(self.trainer, "datamodule", None)
        if not isinstance(data, PlacementDataModule):
            return
        index = int(batch)
        world, rank = self._world()
        if index % world != rank:  # another rank's: each held-out pair is validated once, by rank index % world
            return
        problem = data.val_problem(index)
        bias = self._prior(problem)  # a held-out problem is never scored: its best placement is the reference
        with torch.no_grad():
            enc = self.policy.encode(problem.inp)
            groups = sample(self.policy, problem.mdp, 1, greedy=True, enc=enc, bias=bias).rollout.group_devices
            if self.config.val_samples > 0:
                rng = np.random.default_rng((self.config.seed, index))
                drawn = sample(self.policy, problem.mdp, self.config.val_samples, rng, enc=enc, bias=bias)
                groups = np.concatenate([groups, drawn.rollout.group_devices])
        result = self.timer.time_batch(problem.inp.graph, problem.inp.cluster, problem.placements(groups))
        ratios = np.maximum(result.step_time, STEP_FLOOR_S) / max(problem.reference_step, STEP_FLOOR_S)
        fits = ~result.oom
        best = float(ratios[fits].min()) if fits.any() else float(ratios[0])
        self._val_ratios.append((index, data.val_family(index), float(ratios[0]), bool(result.oom[0]), best))

    def on_validation_epoch_start(self) -> None:
        """Start collecting the held-out ratios of this validation."""
        self._val_ratios = []

    def on_validation_epoch_end(self) -> None:
        """Log the held-out results of this validation.

        ``val/greedy_vs_auto`` is the geometric mean of the greedy step time over the reference's,
        overall and per family (``val/<family>``); ``val/oom`` the share of greedy placements that
        overflow; with ``val_samples``, ``val/best_vs_auto`` the geometric mean of the best fitting
        placement of the greedy one and the samples (per family ``val/best/<family>``).

        In a distributed run each rank validated its share of the pairs (:meth:`validation_step`): every rank's are
        gathered (a collective, which every rank makes) and taken in the pairs' order, as one process takes them, so
        that every rank logs, exports and selects ``best.ckpt`` by the same figures, those of one process.
        """
        ratios = getattr(self, "_val_ratios", [])
        world = self._world()[0]
        if world > 1:
            ratios = sorted((r for share in every_rank(ratios, world) for r in share), key=lambda r: r[0])
        if not ratios:
            return

        values = {"val/greedy_vs_auto": geomean([r for _, _, r, _, _ in ratios]),
                  "val/oom": float(np.mean([o for _, _, _, o, _ in ratios]))}
        families = sorted({f for _, f, _, _, _ in ratios})
        for family in families:
            values[f"val/{family}"] = geomean([r for _, f, r, _, _ in ratios if f == family])
        if self.config.val_samples > 0:
            values["val/best_vs_auto"] = geomean([b for _, _, _, _, b in ratios])
            for family in families:
                values[f"val/best/{family}"] = geomean([b for _, f, _, _, b in ratios if f == family])
        self.last_validation = values
        self.log_dict(values, on_step=False, on_epoch=True, batch_size=1)


class ProblemStream:
    """The ticks of the training loop: one per iteration, ``steps_per_epoch`` per epoch.

    What each iteration trains on is decided by the learner's own iteration count
    (:meth:`PlacementDataModule.batch`), which checkpoints keep exactly, so a resumed run draws the
    same pairs whatever the loop does with its data on a restart. The stream itself only paces epochs.

    Args:
        steps_per_epoch (int): ticks per epoch.
    """

    def __init__(self, steps_per_epoch: int) -> None:
        self.steps_per_epoch = steps_per_epoch

    def __len__(self) -> int:
        return self.steps_per_epoch

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.steps_per_epoch))


class PlacementDataModule(L.LightningDataModule):
    """The (graph, cluster) pairs a learner trains on, prepared lazily and kept.

    Args:
        pairs (Sequence[tuple]): ``(graph, cluster)`` pairs; graphs as :class:`OpGraph` or file paths,
            clusters as :class:`Cluster`, preset names or YAML files.
        pairs_per_step (int, optional): pairs in each training batch (default: 1).
        steps_per_epoch (int, optional): batches per epoch (default: 100).
        timer (StepTimer, optional): times the reference placements (default: ``Simulator()``).
        max_nodes (int, optional): most nodes of each decision graph (default: 1,000).
        reference (str, optional): the registered placer whose placement is the reference (default: ``"auto"``).
        seed (int, optional): seed of the batch order (default: 0).
        reference_seed (int, optional): seed the reference placer runs with (default: ``seed``); a search
            passes its caller's seed, so its reference is the placement ``auto`` gives under that seed.
        modules (bool, optional): coarsen graphs along their module hierarchy first
            (:func:`~gnplace.policy.features.decision_graph`) (default: :obj:`False`).
        anchored (bool, optional): score each problem's placements relative to its best seen
            (:meth:`~gnplace.rl.problem.PlacementProblem.anchor`; a search's setting) (default: :obj:`False`).
        memo (bool, optional): time each distinct placement of a pair once and count only new ones
            (:attr:`~gnplace.rl.problem.PlacementProblem.memo`; a search's setting) (default: :obj:`False`).
        widen (bool, optional): with ``memo``, adapt each pair's sampling prior to the share of new
            placements in its batches (:meth:`~gnplace.rl.problem.PlacementProblem.widen`; a search's
            setting) (default: :obj:`False`).
        starts (Mapping[int, np.ndarray], optional): a placement (device of every op) offered to pair
            ``i`` as its best before training, timed then: a search's, which imitation then fits
            (:mod:`gnplace.rl.teacher`) (default: none).
        val_families (Sequence[str], optional): the family of each held-out pair whose graph names none
            (``meta["family"]``): pretraining's dataset folder (default: none, ``"other"``).
    """

    def __init__(
        self, pairs: Sequence[tuple[OpGraph | str, Cluster | str]], *, pairs_per_step: int = 1,
        steps_per_epoch: int = 100, timer: StepTimer | None = None, max_nodes: int = 1000, reference: str = "auto",
        seed: int = 0, reference_seed: int | None = None,
        val_pairs: Sequence[tuple[OpGraph | str, Cluster | str]] = (), modules: bool = False,
        anchored: bool = False, starts: Mapping[int, np.ndarray] | None = None, memo: bool = False,
        widen: bool = False, val_families: Sequence[str] = (),
    ) -> None:
        super().__init__()
        if not pairs:
            from gnplace.exceptions import InvalidArgument

            raise InvalidArgument("PlacementDataModule needs at least one (graph, cluster) pair")
        self.pairs = list(pairs)
        self.pairs_per_step = max(1, int(pairs_per_step))
        self.steps_per_epoch = max(1, int(steps_per_epoch))
        self.timer: StepTimer = timer or Simulator()
        self.max_nodes = max_nodes
        self.modules = bool(modules)
        self.anchored = bool(anchored)
        self.memo = bool(memo)
        self.widen = bool(widen) and self.memo
        self.reference = reference
        self.seed = seed
        self.reference_seed = seed if reference_seed is None else reference_seed
        self._problems: dict[int, PlacementProblem] = {}
        self._restored: dict[int, dict[str, Any]] = {}
        self._fingerprints: list[list[str]] | None = None
        self.val_pairs = list(val_pairs)
        self.val_families = list(val_families)
        self._val_problems: dict[int, PlacementProblem] = {}
        self.starts = dict(starts or {})

    def batch(self, iteration: int) -> list[PlacementProblem]:
        """The pairs of iteration ``iteration``: ``pairs_per_step`` of them, by ``default_rng((seed, iteration))``.

        Examples:
            >>> data = PlacementDataModule([("g0", "k80x2"), ("g1", "k80x2"), ("g2", "k80x2")], pairs_per_step=2)
            >>> data._problems = {0: "a", 1: "b", 2: "c"}  # prepared problems stand here
            >>> data.batch(5) == data.batch(5), len(data.batch(5))
            (True, 2)
        """
        rng = np.random.default_rng((self.seed, iteration))
        count = len(self.pairs)
        picks = rng.choice(count, size=min(self.pairs_per_step, count), replace=False) if count > 1 else [0]
        return [self.problem(int(i)) for i in picks]

    def problem(self, index: int) -> PlacementProblem:
        """The prepared problem of pair ``index`` (coarsened, featurised, reference timed), built once."""
        if index not in self._problems:
            problem = self._prepare(self.pairs[index])
            if index in self.starts:  # a search's placement: the best before training, imitation's target
                start = Placement(np.asarray(self.starts[index], dtype=np.int64), problem.inp.cluster)
                timed = self.timer.time(problem.inp.graph, problem.inp.cluster, start)
                problem.offer(start.devices, float(timed.step_time), bool(timed.is_oom), evaluations=1)
            saved = self._restored.pop(index, None)
            if saved is not None:
                _restore_problem(problem, saved)
            self._problems[index] = problem
        return self._problems[index]

    def val_problem(self, index: int) -> PlacementProblem:
        """The prepared held-out problem of ``val_pairs[index]``, built once."""
        if index not in self._val_problems:  # validation expands its placements as training does
            self._val_problems[index] = self._prepare(self.val_pairs[index])
        return self._val_problems[index]

    def _prepare(self, pair: tuple[OpGraph | str, Cluster | str]) -> PlacementProblem:
        """A (graph, cluster) pair as a problem: coarsened, featurised, reference timed, anchored as configured."""
        graph, cluster = pair
        graph = graph if isinstance(graph, OpGraph) else load_graph(graph)
        problem = PlacementProblem.build(
            graph, load_cluster(cluster), self.timer, max_nodes=self.max_nodes, reference=self.reference,
            seed=self.seed, reference_seed=self.reference_seed, modules=self.modules,
        )
        problem.anchored, problem.memo, problem.widening = self.anchored, self.memo, self.widen
        return problem

    def val_family(self, index: int) -> str:
        """The family of held-out pair ``index``: its graph's ``meta["family"]``, else ``val_families``', else "other".

        An imported graph (``gnplace import``, ``module:factory``) names no family: a run over two folders of them
        logged both as ``val/other``.
        """
        meta = self.val_problem(index).inp.graph.meta
        if "family" in meta:
            return str(meta["family"])
        return self.val_families[index] if index < len(self.val_families) else "other"

    def val_dataloader(self) -> ProblemStream:
        """One tick per held-out pair (empty without ``val_pairs``)."""
        return ProblemStream(len(self.val_pairs))

    def state_dict(self) -> dict[str, Any]:
        """The best placement seen of every prepared pair (lists and numbers), saved in checkpoints.

        A pair restored from a checkpoint but not prepared again since (a finished run resumed, which
        trains no more) keeps the state it was restored with: saving it again loses nothing.
        """
        own = self._problem_states()
        world = int(self.trainer.world_size) if self.trainer is not None else 1
        if world > 1:  # each rank prepared the pairs of its own share: every rank's states, rank 0's first
            ranks = every_rank(own, world)
            return {"pairs": self.pair_names(), "pair_fingerprints": self.pair_fingerprints(),
                    "pairs_per_step": self.pairs_per_step, "problems": ranks[0], "ranks": ranks}
        return {"pairs": self.pair_names(), "pair_fingerprints": self.pair_fingerprints(),
                "pairs_per_step": self.pairs_per_step, "problems": own}

    def _problem_states(self) -> dict[int, dict[str, Any]]:
        """The state of every pair this process prepared or was restored with, by pair index."""
        return {
            **{i: dict(saved) for i, saved in self._restored.items() if i not in self._problems},
            **{i: {"reference_step": p.reference_step,
                   "best_devices": p.best_devices.tolist(), "best_step": p.best_step, "best_oom": p.best_oom,
                "evaluations": p.evaluations, "history": [list(h) for h in p.history],
                "greedy_steps": [[i, step] for i, step in sorted(p.greedy_steps.items())],
                "sample_best_devices": None if p.sample_best_devices is None else p.sample_best_devices.tolist(),
                "sample_best_step": p.sample_best_step, "kappa": p.kappa,
                **({"timed": [[key.hex(), step, busy.tolist(), peak.tolist(), oom]
                              for key, (step, busy, peak, oom) in p.timed.items()]} if p.memo else {}),
                **({"screen": p.screen.state()} if p.screen is not None else {}),
                **({"refiner": p.refiner.state()} if p.refiner is not None else {})}
               for i, p in self._problems.items()},
        }

    def pair_names(self) -> list[list[str]]:
        """``[graph, cluster]`` of every training pair: a file path or name of each, what a checkpoint records."""
        return [[graph.name if isinstance(graph, OpGraph) else str(graph),
                 cluster.name if isinstance(cluster, Cluster) else str(cluster)] for graph, cluster in self.pairs]

    def pair_fingerprints(self) -> list[list[str]]:
        """``[graph, cluster]`` fingerprints of every training pair: what a resume compares (computed once).

        The names (:meth:`pair_names`) are paths as typed: a graph file rewritten in place resumed with
        another graph's reference step, and the same file named another way was refused.
        """
        if self._fingerprints is None:
            from gnplace.cluster import load_cluster
            from gnplace.graph_io import load_graph

            known: dict[tuple[str, str], str] = {}  # each file read once (pretraining pairs 67 graphs x 17 clusters)

            def fingerprint(item: Any, kind: str) -> str:
                if isinstance(item, OpGraph | Cluster):
                    return item.fingerprint()
                key = (kind, str(item))
                if key not in known:
                    known[key] = (load_graph(item) if kind == "graph" else load_cluster(item)).fingerprint()
                return known[key]

            self._fingerprints = [[fingerprint(graph, "graph"), fingerprint(cluster, "cluster")]
                                  for graph, cluster in self.pairs]
        return self._fingerprints

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved: at once into a pair already prepared, else when it is.

        A pair prepared before the restore (a search prepares its one pair first) is not prepared again,
        so its reference placement is not timed again: on a real timer that would be real steps, and a
        new measurement.
        """
        problems = state.get("problems", {})
        ranks = state.get("ranks")
        if self.trainer is not None and isinstance(ranks, list) and len(ranks) == int(self.trainer.world_size):
            problems = ranks[int(self.trainer.global_rank)]  # this rank's own pairs
        self._restored = {int(i): s for i, s in problems.items()}
        for i in list(self._restored):
            if i in self._problems:
                _restore_problem(self._problems[i], self._restored.pop(i))

    def train_dataloader(self) -> ProblemStream:
        """The ticks of the loop, ``steps_per_epoch`` per epoch (see :class:`ProblemStream`)."""
        return ProblemStream(self.steps_per_epoch)


def every_rank(value: Any, world: int) -> list[Any]:
    """``value`` of every rank of a distributed run, by rank (``torch.distributed.all_gather_object``).

    Every rank must call it at once: checkpoints are, since :class:`~gnplace.callbacks.TimedCheckpoint`'s
    rank 0 decides for all when to save. Outside a distributed run, ``[value]``.
    """
    import torch.distributed as dist

    if world <= 1 or not dist.is_available() or not dist.is_initialized():
        return [value]
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, value)
    return gathered


def _sums_and_counts(stats: Sequence[Mapping[str, float]]) -> dict[str, tuple[float, int]]:
    """The sum and the count of each figure of ``stats`` (the dicts that :meth:`PlacementLearner._log_mean` logs).

    Examples:
        >>> _sums_and_counts([{"a": 1.0, "b": 2.0}, {"a": 3.0}])
        {'a': (4.0, 2), 'b': (2.0, 1)}
    """
    keys = sorted({k for s in stats for k in s})
    return {k: (float(np.sum([s[k] for s in stats if k in s])), sum(k in s for s in stats)) for k in keys}


def pooled_means(parts: Sequence[Mapping[str, tuple[float, int]]]) -> dict[str, float]:
    """The mean of each figure over every rank's values, from each rank's ``(sum, count)`` of it (rank order).

    Each value counts once, whichever rank holds it: a mean of the ranks' means weighted 2 pairs of a rank like
    1 pair of another.

    Examples:
        >>> pooled_means([{"loss": (3.0, 2)}, {"loss": (3.0, 1), "kl": (0.5, 1)}])
        {'kl': 0.5, 'loss': 2.0}
    """
    totals: dict[str, list[float]] = {}
    for part in parts:
        for key, (total, count) in part.items():
            pooled = totals.setdefault(key, [0.0, 0])
            pooled[0] += total
            pooled[1] += count
    return {k: totals[k][0] / totals[k][1] for k in sorted(totals) if totals[k][1]}


def _restore_problem(problem: PlacementProblem, saved: Mapping[str, Any]) -> None:
    """Put a resumed run's state of one pair, as :meth:`PlacementDataModule.state_dict` saved it, into ``problem``.

    The best placement seen so far, the evaluations and history, the sampling prior, the placements
    timed (memo), the screen and, where saved, the reference's step as the run first timed it.

    Raises:
        InvalidCheckpoint: if the state does not fit the pair (another graph's or cluster's) or is malformed.
    """
    from gnplace.exceptions import InvalidCheckpoint

    name = problem.inp.graph.name
    ops, devices = problem.inp.graph.num_ops, problem.inp.cluster.num_devices

    def check_fits(placement: np.ndarray, which: str) -> None:
        fits = placement.shape == (ops,) and (not placement.size or (np.issubdtype(placement.dtype, np.integer)
                                                                     and 0 <= placement.min()
                                                                     and placement.max() < devices))
        if not fits:
            raise InvalidCheckpoint(f"the checkpoint's {which} of pair {name} does not fit it ({placement.size} ops "
                                    f"for {ops}, or a device outside its {devices}): a checkpoint of other graphs or "
                                    "clusters")

    check_fits(np.asarray(saved.get("best_devices", [])), "best placement")
    try:
        restored = _restored_values(saved)
    except (KeyError, TypeError, ValueError, OverflowError) as err:  # an edited checkpoint: one line (10**30 too)
        raise InvalidCheckpoint(f"the checkpoint's state of pair {name} is malformed ({type(err).__name__}: "
                                f"{err}); cannot resume from it") from err
    if "sample_best_devices" in restored:  # the elite target of elite_target: samples, drawn into as the best is
        check_fits(restored["sample_best_devices"], "best sampled placement")
    problem.timed.update(restored.pop("timed"))  # merged: a search's pair has timed its start already
    for key, value in restored.items():
        setattr(problem, key, value)
    if saved.get("screen") is not None:  # what the pair's screen had learned
        try:
            problem.start_screen().restore(saved["screen"])
        except InvalidArgument as err:  # (an unchecked one ranked with another pair's groups, or raised an IndexError)
            raise InvalidCheckpoint(f"the checkpoint's screen of pair {name} is malformed ({err}); cannot resume "
                                    "from it") from err
    if saved.get("refiner") is not None:  # where refinement's chains were (they restarted from the best)
        try:
            problem.refiner = RefinementMDP.restored(problem.inp, saved["refiner"])
        except (KeyError, TypeError, ValueError) as err:
            raise InvalidCheckpoint(f"the checkpoint's refinement chains of pair {name} are malformed "
                                    f"({type(err).__name__}: {err}); cannot resume from it") from err


def _restored_values(saved: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes of a :class:`PlacementProblem` that ``saved`` restores, converted (``timed`` to be merged)."""
    values: dict[str, Any] = {
        "best_devices": np.asarray(saved["best_devices"], dtype=np.int64),
        "best_step": float(saved["best_step"]), "best_oom": bool(saved["best_oom"]),
        "evaluations": int(saved["evaluations"]),
        "history": [(int(e), float(t)) for e, t in saved["history"]],
        "greedy_steps": {int(i): float(t) for i, t in saved.get("greedy_steps", [])},  # (none before 2026-11-29)
        "kappa": None if saved.get("kappa") is None else float(saved["kappa"]),
        "timed": {bytes.fromhex(key): (float(step), np.asarray(busy, dtype=np.float64),
                                       np.asarray(peak, dtype=np.float64), bool(oom))
                  for key, step, busy, peak, oom in saved.get("timed", [])},
    }
    if saved.get("reference_step") is not None:  # (checkpoints of before 2026-11-28 keep the step timed now)
        values["reference_step"] = float(saved["reference_step"])
    if saved.get("sample_best_devices") is not None:
        values["sample_best_devices"] = np.asarray(saved["sample_best_devices"], dtype=np.int64)
        values["sample_best_step"] = float(saved["sample_best_step"])
    return values


def changed_settings(saved: Mapping[str, Any], config: LearnerConfig) -> list[str]:
    """The learner settings a checkpoint's ``hyper_parameters`` record otherwise than ``config``, by name.

    A setting the checkpoint does not record (a run of a gnplace from before it existed: ``screen`` and
    ``screen_model``, 2026-11-28) ran at :class:`LearnerConfig`'s default, which is what the run did before the
    setting existed: a resume under another value is another run (it was resumed with any, unchecked).

    Examples:
        >>> changed_settings({"lr": 0.5, "samples": LearnerConfig().samples, "gone": 1}, LearnerConfig())
        ['lr']
        >>> changed_settings({}, LearnerConfig(screen=8))  # a run recorded before the screen existed
        ['screen']
    """
    defaults = asdict(LearnerConfig())
    return sorted(k for k, v in asdict(config).items() if saved.get(k, defaults[k]) != v)


def _check_resumable(path: Path, config: LearnerConfig, data: PlacementDataModule) -> None:
    """Refuse a checkpoint ``fit`` cannot continue, in one line.

    That is an unreadable one, or one of another learner's settings, of other pairs or another count of them an
    iteration, or whose weights do not fit the policy.
    """
    from gnplace.exceptions import InvalidCheckpoint
    from gnplace.policy.checkpoint import check_training_state, check_training_weights, read_checkpoint

    saved = read_checkpoint(path)  # a truncated or corrupt file: one line
    settings = saved.get("hyper_parameters")
    if not isinstance(saved.get("state_dict"), dict) or not isinstance(settings, dict):
        raise InvalidCheckpoint(f"{path}: not a gnplace training checkpoint (cannot resume from it)")
    differ = changed_settings(settings, config)
    if differ:
        raise InvalidCheckpoint(f"{path}: made with other learner settings ({', '.join(differ)}); resume with the "
                                "same settings or use another folder")
    recorded = saved.get(type(data).__qualname__)
    if not isinstance(recorded, dict):  # its entries: check_training_state, below
        raise InvalidCheckpoint(f"{path}: its pairs' state ({type(data).__qualname__}) is missing or damaged; cannot "
                                "resume from it")
    pairs, prints = recorded.get("pairs"), recorded.get("pair_fingerprints")  # since 2026-11-29, 2026-12-02
    if prints is None and pairs is None:  # its pairs' best placements would be restored into whatever pairs are given
        raise InvalidCheckpoint(f"{path}: records no graphs or clusters (a run of an older gnplace), so it cannot be "
                                "checked: use another folder")
    if prints is not None:  # what the files hold, however they are named
        other = prints != data.pair_fingerprints()
    else:  # an older run's: the names as typed
        other = pairs != data.pair_names()
    if other:
        raise InvalidCheckpoint(f"{path}: made with other graphs or clusters; resume with the same ones or use "
                                "another folder")
    per_step = recorded.get("pairs_per_step")  # recorded since 2026-12-02: other pairs drawn every iteration
    if per_step is not None and per_step != data.pairs_per_step:
        raise InvalidCheckpoint(f"{path}: made with {counted(per_step, 'pair')} an iteration, not "
                                f"{data.pairs_per_step}; resume with the same count or use another folder")
    check_training_weights(path, saved["state_dict"], config.policy, "the learner's policy")  # Lightning: a traceback
    check_training_state(path, saved, config.policy)


@holds_folder("out", "--out")  # one run at a time in a folder
@stray_ranks_hidden  # LOCAL_RANK=1 left in the shell: no logs were written, a rank other than 0 writes none
def fit(
    pairs: Sequence[tuple[OpGraph | str, Cluster | str]], out: str | Path, *, config: LearnerConfig | None = None,
    iterations: int = 1000, pairs_per_step: int = 1, steps_per_epoch: int = 100, checkpoint_every_s: float = 300.0,
    resume: bool = False, progress: bool | None = None, timer: StepTimer | None = None, max_nodes: int = 1000,
) -> PlacementLearner:
    """Train a policy on ``pairs`` for ``iterations`` iterations, with logs and checkpoints under ``out``.

    ``out/logs`` holds Lightning's CSV logs (``metrics.csv``), ``out/tensorboard`` its TensorBoard
    events, ``out/checkpoints/last.ckpt`` the latest checkpoint, written every ``checkpoint_every_s``
    seconds and at the end; with ``resume`` a run continues from it exactly.

    Args:
        pairs (Sequence[tuple]): ``(graph, cluster)`` pairs (see :class:`PlacementDataModule`).
        out (str or Path): output folder.
        config (LearnerConfig, optional): hyperparameters (default: ``LearnerConfig()``).
        iterations (int, optional): iterations in all, imitation included (default: 1000).
        pairs_per_step (int, optional): pairs per iteration (default: 1).
        steps_per_epoch (int, optional): iterations per Lightning epoch, the logs' ``epoch`` column; the logs hold
            a row every iteration whatever it is, and ``fit`` validates nothing (default: 100).
        checkpoint_every_s (float, optional): seconds between checkpoints (default: 300).
        resume (bool, optional): continue from ``out/checkpoints/last.ckpt`` if it exists (default: :obj:`False`).
        progress (bool or None, optional): show Lightning's progress bar (True), nothing (False), or the bar on a
            terminal and a line every half minute elsewhere, e.g. in a log file (None; default).
        timer (StepTimer, optional): times placements (default: ``Simulator()``).
        max_nodes (int, optional): most nodes of each decision graph (default: 1,000).
    """
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    out = Path(out)
    config = config or LearnerConfig()
    data = PlacementDataModule(pairs, pairs_per_step=pairs_per_step, steps_per_epoch=steps_per_epoch, timer=timer,
                               max_nodes=max_nodes, seed=config.seed)
    learner = PlacementLearner(config, timer)
    last = out / "checkpoints" / "last.ckpt"
    if last.exists() and not resume:  # a new run would overwrite it
        raise InvalidArgument(f"{out} holds a run already ({last.relative_to(out)}): resume it (--resume), or use "
                              "another folder")
    if resume and last.exists():
        _check_resumable(last, config, data)
    bars = progress_callbacks(progress, "train", iterations)
    with quiet_lightning():  # its start-up lines (no GPU, no TPU, a logging service's advert) say nothing here
        trainer = L.Trainer(
            max_epochs=-1, accelerator="cpu", devices=1,
            callbacks=[TimedCheckpoint(last, checkpoint_every_s), StopAfter(iterations), *bars],
            enable_checkpointing=False,
            logger=[CSVLogger(out, name="logs"), TensorBoardLogger(out, name="tensorboard")], log_every_n_steps=1,
            enable_progress_bar=bool(bars), enable_model_summary=False, default_root_dir=out, limit_val_batches=0,
            plugins=single_process_plugins(),
        )
    with quiet_lightning():
        fit_interruptibly(trainer, learner, datamodule=data, ckpt_path=str(last) if resume and last.exists() else None,
                          weights_only=True)  # TimedCheckpoint saves the finished run
    return learner
