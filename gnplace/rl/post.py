"""``post``: Gao, Chen & Li, "Post: Device Placement with Cross-Entropy Minimization and PPO", NeurIPS 2018.

Post treats a placement as a set of categorical distributions, one per unit, and combines two
updates on each batch of sampled placements: the cross-entropy method (keep the best fraction
:math:`\\rho` of the samples, the elite, and minimise the cross-entropy of the policy to them) and
proximal policy optimisation on all the samples. Here both act on the seq2seq policy of ``spotlight``
(the issue asks for the same policy; Post's own distributions are the per-unit softmaxes the decoder
emits), in one loss per gradient step:

.. math::
    L(\\theta) = L^{PPO}(\\theta) + \\lambda_{CE}\\, \\mathbb{E}_{b \\in \\mathcal{E}}\\Bigl[-\\tfrac{1}{S}
        \\textstyle\\sum_t \\log \\pi_\\theta(a_{bt} \\mid a_{b,<t})\\Bigr]

with :math:`L^{PPO}` Spotlight's (:mod:`gnplace.rl.spotlight`) and :math:`\\mathcal{E}` the elite of the
batch by reward. :math:`\\rho = 0.25` and :math:`\\lambda_{CE} = 1` are our choices (the paper tunes
its elite size per model).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gnplace.rl.comparator import check_nonnegative, check_unit
from gnplace.rl.spotlight import SpotlightPlacer

if TYPE_CHECKING:
    import torch

__all__ = ["PostPlacer", "elite"]


def elite(rewards: np.ndarray, fraction: float) -> np.ndarray:
    """Indices of the best ``ceil(fraction * B)`` samples by reward (at least one), best first.

    Examples:
        >>> elite(np.array([0.1, 0.9, 0.5, 0.3]), 0.5).tolist()
        [1, 2]
    """
    count = max(1, math.ceil(fraction * len(rewards)))
    return np.argsort(-np.asarray(rewards), kind="stable")[:count]


class PostPlacer(SpotlightPlacer):
    """Post: cross-entropy minimisation over the elite plus PPO, on one graph (see the module docstring).

    Args:
        elite_fraction (float, optional): :math:`\\rho`, the share of each batch kept as the elite (default: 0.25).
        cross_entropy (float, optional): :math:`\\lambda_{CE}` (default: 1.0).
        **kwargs: as for :class:`~gnplace.rl.spotlight.SpotlightPlacer`.

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> placer = PostPlacer(budget=32, samples=8, epochs=2, hidden=16, layers=1)
        >>> placer.place(mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2"), seed=0).devices.shape
        (20,)
    """

    name = "post"

    def __init__(self, elite_fraction: float = 0.25, cross_entropy: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # a number (True was read as 1.0) in (0, 1]: 1.5 was refused as outside [0, 1], 0 as outside (0, 1]
        check_unit("PostPlacer", closed=True, positive=True, elite_fraction=elite_fraction)
        check_nonnegative("PostPlacer", cross_entropy=cross_entropy)
        self.elite_fraction, self.cross_entropy = float(elite_fraction), float(cross_entropy)

    def loss_options(self) -> dict[str, float]:
        """The options that scale the loss or its steps: Spotlight's and cross_entropy."""
        return {**super().loss_options(), "cross_entropy": self.cross_entropy}

    def extra_loss(self, actions: torch.Tensor, rewards: Any) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """The cross-entropy of the policy to this batch's elite placements, weighted by :math:`\\lambda_{CE}`."""
        import torch

        best = torch.as_tensor(elite(rewards, self.elite_fraction))
        targets = actions[best]  # the elite E

        def cross_entropy(new_log_probs: torch.Tensor) -> torch.Tensor:
            logp = new_log_probs[best].gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # log pi(a_t | a_<t), b in E
            return -self.cross_entropy * logp.mean()

        return cross_entropy
