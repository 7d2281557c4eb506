"""``spotlight``: Gao, Chen & Li, "Spotlight: Optimizing Device Placement for Training Deep Neural Networks", ICML 2018.

The policy of ``rnn_pg`` (:class:`~gnplace.policy.seq2seq.Seq2SeqPolicy`, two stacked LSTM layers,
initialised to uniformly random distributions) places the groups one stage at a time, Spotlight's
multi-stage MDP: stage :math:`t` chooses the device of the :math:`t`-th group given the devices
chosen before it (the decoder's state), and the reward, :math:`R = -\\sqrt{T / T_{ser}}`
(the step time over the graph's serial step: :func:`~gnplace.rl.comparator.sqrt_reward`), comes when
the placement is complete. One policy per graph. Spotlight trains it with proximal policy optimisation
with a KL penalty, :math:`\\beta` "set as the typical value of 1" and adapted, and ten stochastic
gradient steps on each batch of sampled placements: the landed loss (:func:`~gnplace.rl.ppo.ppo_loss`),

.. math::
    L(\\theta) = \\mathbb{E}_{b,t}\\bigl[-\\min(r_{bt}\\hat A_b, \\mathrm{clip}(r_{bt}, 1\\pm\\epsilon)\\hat A_b)
        + \\beta\\,\\mathrm{KL}(\\pi_{\\theta_{old}} \\| \\pi_\\theta) - c_H H(\\pi_\\theta)\\bigr]

with :math:`\\hat A_b` the batch's rewards normalised (:func:`~gnplace.rl.ppo.normalise_advantages`)
and :math:`\\beta` halved or doubled after each batch (:func:`~gnplace.rl.ppo.adapt_beta`) by the KL of the
updated policy to the one that sampled the batch, measured after the batch's ``epochs`` steps.

The clipped ratio is ours: Spotlight's objective is the KL penalty alone, :math:`\\mathbb{E}[r\\hat A] -
\\beta\\,\\mathrm{KL}`, which ``clip=None`` (``-O spotlight.clip=null``) runs. The default keeps the clip of
the learner's PPO, under which the figures in docs/ were measured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gnplace.exceptions import InvalidArgument
from gnplace.limits import MAX_EPOCHS
from gnplace.rl.comparator import ComparatorPlacer, SequenceProblem, check_nonnegative, check_positive, check_whole

if TYPE_CHECKING:  # torch loads on first use: the registry resolves this placer without it
    import torch

    from gnplace.policy.seq2seq import Seq2SeqPolicy
    from gnplace.rl.ppo import PPOConfig

__all__ = ["SpotlightPlacer", "ppo_update"]


def ppo_update(
    policy: Seq2SeqPolicy, optimiser: torch.optim.Optimizer, x: torch.Tensor, actions: torch.Tensor,
    old_log_probs: torch.Tensor, advantages: torch.Tensor, config: PPOConfig, beta: float, *, clip_norm: float = 1.0,
    extra: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> float:
    """``config.epochs`` steps of :func:`~gnplace.rl.ppo.ppo_loss` on one batch; returns the next :math:`\\beta`.

    Args:
        policy (Seq2SeqPolicy): the policy :math:`\\pi_\\theta`.
        optimiser (torch.optim.Optimizer): its optimiser.
        x (torch.Tensor): the units' inputs, ``[S, F]``.
        actions (torch.Tensor): the sampled devices, ``[B, S]``.
        old_log_probs (torch.Tensor): :math:`\\log\\pi_{\\theta_{old}}` when they were sampled, ``[B, S, D]``.
        advantages (torch.Tensor): :math:`\\hat A_b`, ``[B]``.
        config (PPOConfig): epochs, clip, entropy and KL target.
        beta (float): the KL coefficient :math:`\\beta` for this batch.
        clip_norm (float, optional): gradient-norm bound (default: 1.0).
        extra (callable, optional): a further loss term from the new log-probabilities ``[B, S, D]``
            (Post's cross-entropy) (default: none).
    """
    import torch

    from gnplace.rl.ppo import adapt_beta, exact_kl, ppo_loss

    mask = torch.ones_like(old_log_probs, dtype=torch.bool)  # every device allowed: the seeds mask nothing
    for _ in range(config.epochs):  # K epochs of gradient steps on the batch
        new_log_probs = policy.log_probs(x, actions)
        loss, _ = ppo_loss(new_log_probs, old_log_probs, actions, advantages, mask, clip=config.clip, beta=beta,
                           entropy=config.entropy)
        if extra is not None:
            loss = loss + extra(new_log_probs)
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), clip_norm)
        optimiser.step()
    # ALGO LOGIC: d = KL(pi_old || pi_theta) of the updated policy, after the K steps (Schulman et al. 2017, sec. 4);
    # the loss's KL is the one before each step: 0 at the first, so with one epoch beta only ever halved
    with torch.no_grad():
        kl = float(exact_kl(old_log_probs, policy.log_probs(x, actions), mask))
    return adapt_beta(beta, kl, config.kl_target)  # beta <- beta / 2 or 2 beta


class SpotlightPlacer(ComparatorPlacer):
    """Spotlight: the seq2seq policy trained with PPO on one graph (see the module docstring).

    Args:
        epochs (int, optional): gradient steps per batch (Spotlight: 10) (default: 10).
        beta (float, optional): initial KL coefficient (Spotlight: 1) (default: 1.0).
        clip (float or None, optional): :math:`\\epsilon` of the clipped ratio; None: no clipping, the paper's
            objective (default: 0.2, as the learner's PPO).
        entropy (float, optional): entropy bonus :math:`c_H` (default: 0.0).
        lr (float, optional): Adam's learning rate (default: 0.003).
        **kwargs: budget, samples, hidden, layers, max_nodes, timer, progress, as for
            :class:`~gnplace.rl.comparator.ComparatorPlacer`.

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> placer = SpotlightPlacer(budget=32, samples=8, epochs=2, hidden=16, layers=1)
        >>> placer.place(mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2"), seed=0).devices.shape
        (20,)
        >>> placer.last_updates
        4
    """

    name = "spotlight"

    def __init__(self, epochs: int = 10, beta: float = 1.0, clip: float | None = 0.2, entropy: float = 0.0,
                 lr: float = 0.003, **kwargs: Any) -> None:
        from gnplace.rl.ppo import PPOConfig

        super().__init__(lr=lr, **kwargs)
        owner = type(self).__name__
        check_whole(owner, epochs=epochs)
        if epochs > MAX_EPOCHS:  # one update hears no kill before its last epoch
            raise InvalidArgument(f"{owner}: epochs must be at most {MAX_EPOCHS}, got {epochs}")
        if clip is not None:  # None: the paper's objective, the KL penalty alone
            check_positive(owner, clip=clip)
        check_nonnegative(owner, beta=beta, entropy=entropy)
        self.config = PPOConfig(epochs=int(epochs), clip=None if clip is None else float(clip), beta=float(beta),
                                entropy=float(entropy))

    def loss_options(self) -> dict[str, float]:
        """The options that scale the loss or its steps: lr, beta and entropy."""
        return {"lr": self.lr, "beta": self.config.beta, "entropy": self.config.entropy}

    def extra_loss(self, actions: torch.Tensor, rewards: Any) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """A further loss term for this batch (none for Spotlight; Post's cross-entropy)."""
        return None

    def search(self, problem: SequenceProblem, generator: torch.Generator, tick: Callable[[], None]) -> None:
        """PPO on batches of sampled placements until the budget no longer holds a batch."""
        import torch

        from gnplace.policy.seq2seq import Seq2SeqPolicy
        from gnplace.rl.ppo import normalise_advantages

        policy = Seq2SeqPolicy(problem.x.shape[1], problem.inp.cluster.num_devices, hidden=self.hidden,
                               layers=self.layers)
        optimiser = torch.optim.Adam(policy.parameters(), lr=self.lr)
        beta = self.config.beta
        while problem.remaining >= self.samples:
            actions, old_log_probs = policy.sample(problem.x, self.samples, generator)  # a ~ pi_theta_old
            _, rewards = problem.score(actions.numpy())
            advantages = normalise_advantages(rewards)  # A_b = (R_b - mean R) / std R
            beta = ppo_update(policy, optimiser, problem.x, actions, old_log_probs, advantages, self.config, beta,
                              extra=self.extra_loss(actions, rewards))
            self.last_updates += 1
            self.check_weights(policy.parameters())
            tick()
