"""``hierarchical``: Mirhoseini et al., "A Hierarchical Model for Device Placement", ICLR 2018.

Two networks, trained jointly from scratch on one graph:

* the **Grouper** (:class:`~gnplace.policy.grouper.Grouper`), a feed-forward network (hidden 64)
  that reads each unit (here: a colocation group of the decision graph, so colocation is kept) and
  gives a softmax over :math:`K` groups,
  :math:`K = \\min(256, 20 \\times \\text{devices}, \\text{units})` (TensorFlow grappler's default);
* the **Placer**, the seq2seq policy (:class:`~gnplace.policy.seq2seq.Seq2SeqPolicy`, bidirectional
  encoder) that reads the :math:`K` groups in index order and emits a device per group. A group's
  embedding is built from its members, as the paper does: the sum of their inputs (op-kind counts,
  sizes: :func:`~gnplace.policy.seq2seq.sequence_features`), their number (normalised), and its row
  of the adjacency between groups (edges from it to every group, normalised).

A sample is a grouping :math:`g` and a placement :math:`d` of the groups; every unit runs on its
group's device. Both networks are trained with REINFORCE on the joint log-likelihood,

.. math::
    \\nabla J \\approx \\tfrac{1}{B}\\textstyle\\sum_b (R_b - \\bar R)\\,
        \\nabla\\bigl[\\log p_{grouper}(g_b) + \\log p_{placer}(d_b \\mid g_b)\\bigr],

with :math:`R = -\\sqrt{T / T_{ser}}`, the step time over the graph's serial step, a placement that
overflows a device charged :math:`T = 10\\,T_{slow}` (:func:`~gnplace.rl.comparator.sqrt_reward`; the
paper: :math:`-\\sqrt{T}` in seconds, failing placements charged 100 s), :math:`\\bar R` an exponential
moving average (decay 0.9), Adam with learning rate 0.1 decayed by 0.95 (here: every 10 updates, to a
floor of 1e-3, our choice: the paper does not say how often), gradient norm bound 1.0, and Gaussian
noise of standard deviation 0.5 on the Placer's logits during the first half of the budget ("early on";
the log-likelihoods are the noiseless ones).

Where this differs from the paper by default: the initial learning rate is 0.01, not 0.1
(:class:`HierarchicalPlacer` says what was measured); the Placer's LSTMs are 128 wide (``hidden``, the
seeds' shared default), not the paper's 512 (``-O hierarchical.hidden=512`` runs that width); and the
Grouper reads each unit's :func:`~gnplace.policy.seq2seq.sequence_features` (op-kind histogram, sizes,
adjacency counts and offsets) in place of the paper's learned type embedding, output shapes (5 outputs x
5 dimensions) and adjacency embedding of width 20.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gnplace.exceptions import InvalidArgument
from gnplace.limits import MAX_WIDTH
from gnplace.rl.comparator import (
    ComparatorPlacer,
    SequenceProblem,
    check_nonnegative,
    check_positive,
    check_rate,
    check_unit,
    check_whole,
    seq2seq_update_bytes,
)
from gnplace.rl.rnn_pg import MovingBaseline

if TYPE_CHECKING:  # torch loads on first use: the registry resolves this placer without it
    import torch

__all__ = ["MAX_GROUPS", "MAX_NOISE", "MAX_UNITS", "HierarchicalPlacer", "default_groups", "hierarchical_update_bytes"]

#: Largest ``groups`` (:math:`K`): the Placer's input and attention are ``[samples, K, K]`` per update, quadratic
#: in it (one update at 1,024 groups of 1,024 units, 16 samples, 4 devices: 0.75 GB more peak memory).
MAX_GROUPS = 1024
#: Largest ``noise``, the logit noise's standard deviation: times a normal draw it stays within float32's 3.4e38.
MAX_NOISE = 1e30
#: Largest ``max_nodes``: the units the Grouper assigns to groups (its memory grows with units times groups).
MAX_UNITS = 4096


def hierarchical_update_bytes(units: int, groups: int, samples: int, devices: int, *, hidden: int, layers: int,
                              grouper_hidden: int, in_features: int) -> int:
    """Working set of one joint update of the Grouper and the Placer, bytes.

    .. math::
        \\text{Placer}(K) + 16\\,P_{grouper} + 4\\,\\bigl(3 B K (K + F + 1) + 6 S K + 3 S H_g\\bigr)

    The Placer's update over its :math:`K` groups (:func:`~gnplace.rl.comparator.seq2seq_update_bytes`,
    its input :math:`F + 1 + K` wide and read by the encoder per sample); the Grouper's :math:`P_{grouper}`
    weights with their gradients and Adam's moments; float32: the Placer's inputs
    (:func:`~gnplace.policy.grouper.group_inputs`: the :math:`K \\times K` adjacency, its normalised copy and
    the concatenated input, per sample), the Grouper's ``[S, K]`` logits and log-probabilities, sampled and
    trained (with gradients), and its hidden layer. One update at 540 groups of 540 units, 16 samples,
    hidden 128, 2 layers and 4 devices grew the peak by 0.31 GiB (``ru_maxrss``); this gives 0.36.

    Args:
        units (int): :math:`S`, the units the Grouper assigns.
        groups (int): :math:`K`.
        samples (int): :math:`B`.
        devices (int): :math:`D`.
        hidden (int): the Placer's LSTM width.
        layers (int): the Placer's stacked LSTM layers.
        grouper_hidden (int): :math:`H_g`, the Grouper's hidden width.
        in_features (int): :math:`F`, width of a unit's input.

    Examples:
        >>> round(hierarchical_update_bytes(1024, 1024, 16, 4, hidden=128, layers=2, grouper_hidden=64,
        ...                                 in_features=40) / 2**30, 2)
        0.86
    """
    s, k, b, f, gh = units, groups, samples, in_features, grouper_hidden
    placer = seq2seq_update_bytes(k, b, devices, hidden=hidden, layers=layers, in_features=f + 1 + k,
                                  batched_encoder=True)
    grouper = 16 * (f * gh + gh + gh * k + k)
    return placer + grouper + 4 * (3 * b * k * (k + f + 1) + 6 * s * k + 3 * s * gh)


def default_groups(num_devices: int, units: int) -> int:
    """:math:`K = \\min(256, 20 \\times \\text{devices}, \\text{units})`, at least 1.

    Examples:
        >>> default_groups(4, 1000), default_groups(4, 30), default_groups(16, 5000)
        (80, 30, 256)
    """
    return max(1, min(256, 20 * num_devices, units))


class HierarchicalPlacer(ComparatorPlacer):
    """The hierarchical planner: Grouper and Placer trained jointly with REINFORCE on one graph (module docstring).

    Args:
        groups (int or None, optional): :math:`K`, 1 to :data:`MAX_GROUPS` (default: :func:`default_groups`).
        grouper_hidden (int, optional): the Grouper's hidden width (default: 64).
        lr (float, optional): Adam's initial learning rate (the paper: 0.1; see above) (default: 0.01:
            with 992 evaluations on k80x4, 0.01, 0.03 and 0.1 gave 1.126, 1.126 and 1.126 of ``auto``'s
            step on ptb_002, 1.188, 1.247 and 1.315 on cifar10_002, 1.122, 1.121 and 1.151 on nmt_002).
        lr_decay (float, optional): its decay every ``decay_every`` updates (default: 0.95).
        decay_every (int, optional): updates between decays (default: 10).
        min_lr (float, optional): its floor (default: 1e-3); a decay never raises the rate, so an ``lr``
            below it stays as it is.
        noise (float, optional): standard deviation of the Placer's logit noise early on (default: 0.5).
        decay (float, optional): the moving-average baseline's decay (default: 0.9).
        clip (float, optional): gradient-norm bound (default: 1.0).
        **kwargs: budget, samples, hidden, layers, max_nodes (at most :data:`MAX_UNITS`), timer, progress, as for
            :class:`~gnplace.rl.comparator.ComparatorPlacer`.

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> placer = HierarchicalPlacer(budget=32, samples=8, hidden=16, layers=1)
        >>> placer.place(mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2"), seed=0).devices.shape
        (20,)
    """

    name = "hierarchical"
    #: Largest ``max_nodes`` (:data:`MAX_UNITS`).
    most_nodes = MAX_UNITS

    def __init__(self, groups: int | None = None, grouper_hidden: int = 64, lr: float = 0.01, lr_decay: float = 0.95,
                 decay_every: int = 10, min_lr: float = 1e-3, noise: float = 0.5, decay: float = 0.9, clip: float = 1.0,
                 **kwargs: Any) -> None:
        super().__init__(lr=lr, **kwargs)
        owner = type(self).__name__
        if groups is not None:
            check_whole(owner, groups=groups)
            if groups > MAX_GROUPS:  # refused, not allocated
                raise InvalidArgument(f"{owner}: groups must be at most {MAX_GROUPS}, got {groups}")
        check_whole(owner, grouper_hidden=grouper_hidden, decay_every=decay_every)
        if grouper_hidden > MAX_WIDTH:  # refused, not allocated
            raise InvalidArgument(f"{owner}: grouper_hidden must be at most {MAX_WIDTH}, got {grouper_hidden}")
        check_positive(owner, clip=clip)
        check_rate(owner, min_lr=min_lr)
        check_unit(owner, decay=decay)
        check_unit(owner, closed=True, positive=True, lr_decay=lr_decay)  # 0 was refused where [0, 1] was said
        check_nonnegative(owner, noise=noise)
        if noise > MAX_NOISE:  # noise x a normal draw past float32's range: inf logits, nan probabilities mid-run
            raise InvalidArgument(f"{owner}: noise must be at most {MAX_NOISE:g}, got {noise!r}")
        self.groups = None if groups is None else int(groups)
        self.grouper_hidden = int(grouper_hidden)
        self.lr_decay, self.min_lr, self.noise = float(lr_decay), float(min_lr), float(noise)
        self.decay_every = max(1, int(decay_every))
        self.decay, self.clip = float(decay), float(clip)

    def groups_for(self, problem: SequenceProblem) -> int:
        """:math:`K` on ``problem``: ``groups`` (or :func:`default_groups`), at most its units."""
        groups = self.groups or default_groups(problem.inp.cluster.num_devices, problem.units)
        return max(1, min(groups, problem.units))

    def update_options(self, problem: SequenceProblem) -> dict[str, int]:
        """The options :meth:`update_bytes` grows with and their values on ``problem``."""
        return {"samples": self.samples, "groups": self.groups_for(problem), "max_nodes": self.max_nodes,
                "hidden": self.hidden, "layers": self.layers}

    def update_bytes(self, problem: SequenceProblem) -> int:
        """Working set of one joint update on ``problem``, bytes (:func:`hierarchical_update_bytes`)."""
        return hierarchical_update_bytes(problem.units, self.groups_for(problem), self.samples,
                                         problem.inp.cluster.num_devices, hidden=self.hidden, layers=self.layers,
                                         grouper_hidden=self.grouper_hidden, in_features=int(problem.x.shape[1]))

    def search(self, problem: SequenceProblem, generator: torch.Generator, tick: Callable[[], None]) -> None:
        """Joint REINFORCE of the Grouper and the Placer until the budget no longer holds a batch."""
        import torch

        from gnplace.policy.grouper import Grouper, group_inputs
        from gnplace.policy.seq2seq import Seq2SeqPolicy, group_edges

        groups = self.groups_for(problem)
        position = np.empty(problem.units, dtype=np.int64)
        position[problem.order] = np.arange(problem.units)
        edges = torch.as_tensor(position[group_edges(problem.inp)].reshape(-1, 2))
        grouper = Grouper(problem.x.shape[1], groups, self.grouper_hidden)
        placer = Seq2SeqPolicy(problem.x.shape[1] + 1 + groups, problem.inp.cluster.num_devices, hidden=self.hidden,
                               layers=self.layers)
        params = [*grouper.parameters(), *placer.parameters()]
        optimiser = torch.optim.Adam(params, lr=self.lr)
        baseline = MovingBaseline(self.decay)
        noisy_until = self.budget // 2
        updates = 0  # this run's (last_updates is what the placer reports; another thread's run may reset it)
        while problem.remaining >= self.samples:
            with torch.no_grad():
                p_grouper = grouper(problem.x).exp()
                if not bool(torch.isfinite(p_grouper).all()):
                    raise InvalidArgument(f"hierarchical diverged: the Grouper's probabilities are not finite after "
                                          f"{problem.timer.evaluations} evaluations (lower hierarchical.lr, now "
                                          f"{self.lr:g})")
                grouping = torch.multinomial(p_grouper, self.samples, replacement=True,
                                             generator=generator).T  # g ~ p_grouper, [B, S]
                inputs = group_inputs(problem.x, grouping, groups, edges)
                noise = self.noise if problem.timer.evaluations < noisy_until else 0.0
                placement, _ = placer.sample(inputs, self.samples, generator, noise=noise)  # d ~ p_placer(. | g)
            actions = placement.gather(1, grouping)  # every unit on its group's device
            _, rewards = problem.score(actions.numpy())
            advantages = torch.as_tensor(rewards - baseline.update(rewards), dtype=torch.float32)  # R_b - R_bar
            logp_group = grouper(problem.x).gather(1, grouping.T).sum(0)  # log p_grouper(g_b), [B]
            logp_place = placer.log_probs(inputs, placement).gather(-1, placement.unsqueeze(-1)).squeeze(-1).sum(1)
            loss = -(advantages * (logp_group + logp_place)).mean()
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, self.clip)
            optimiser.step()
            updates += 1
            self.last_updates = updates
            self.check_weights(params)
            if updates % self.decay_every == 0:
                for param_group in optimiser.param_groups:  # lr <- max(0.95 lr, min_lr), staircase
                    # (a floor above the initial rate would raise it: the decay holds it there instead)
                    param_group["lr"] = max(param_group["lr"] * self.lr_decay, min(self.min_lr, self.lr))
            tick()
