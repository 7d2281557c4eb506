"""``post``, Post."""

from __future__ import annotations

import pytest

from gnplace.exceptions import InvalidArgument
from gnplace.rl.post import PostPlacer


def test_registered_as_a_learned_budgeted_placer(seed_placer_checks):
    seed_placer_checks.registered("post", PostPlacer)


def test_learns_on_a_small_graph_and_beats_random_placements(seed_placer_checks, two_chains):
    seed_placer_checks.learns_the_optimum(PostPlacer, two_chains(8))


def test_deterministic_under_a_seed(seed_placer_checks):
    seed_placer_checks.deterministic(PostPlacer)


@pytest.mark.parametrize("bad", [dict(elite_fraction=True), dict(elite_fraction=0.0), dict(elite_fraction=1.5),
                                 dict(cross_entropy=True), dict(cross_entropy=-1.0), dict(cross_entropy="1"),
                                 dict(cross_entropy=1e39)])  # past float32: nan probabilities mid-run
def test_bad_options_are_one_line_errors(bad):
    with pytest.raises(InvalidArgument) as err:  # True was read as 1.0
        PostPlacer(**bad)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5, True])
def test_a_bad_elite_fraction_is_refused_with_the_interval_it_is_checked_against(fraction):
    """1.5 and -0.1 were refused as outside [0, 1], 0 as outside (0, 1]: the first message offered 0, refused."""
    with pytest.raises(InvalidArgument, match=r"^PostPlacer: elite_fraction must be in \(0, 1\], got "):
        PostPlacer(elite_fraction=fraction)
    assert PostPlacer(elite_fraction=1.0).elite_fraction == 1.0


def test_the_elite_is_the_best_ceil_of_the_fraction_best_first():
    import numpy as np

    from gnplace.rl.post import elite

    rewards = np.array([0.1, 0.9, 0.5, 0.3, 0.7])
    assert elite(rewards, 0.5).tolist() == [1, 4, 2]  # ceil(2.5) = 3, not 2
    assert elite(rewards, 0.1).tolist() == [1]  # at least one
    assert elite(rewards, 1.0).tolist() == [1, 4, 2, 3, 0]


def test_the_cross_entropy_term_is_the_elites_mean_log_likelihood_times_its_weight():
    """lambda_CE E_{b in E}[-1/S sum_t log pi(a_bt | a_b,<t)], on a hand-made batch of 4 samples of 2 units."""
    import math

    import numpy as np
    import torch

    placer = PostPlacer(elite_fraction=0.5, cross_entropy=2.0)
    actions = torch.tensor([[0, 1], [1, 1], [0, 0], [1, 0]])
    rewards = np.array([0.3, 0.9, 0.1, 0.6])  # the elite: samples 1 and 3
    probs = torch.tensor([[[0.5, 0.5], [0.5, 0.5]], [[0.2, 0.8], [0.4, 0.6]], [[0.5, 0.5], [0.5, 0.5]],
                          [[0.7, 0.3], [0.9, 0.1]]])
    term = placer.extra_loss(actions, rewards)
    assert term is not None
    value = float(term(torch.log(probs)))
    assert value == pytest.approx(-2.0 * (math.log(0.8) + math.log(0.6) + math.log(0.3) + math.log(0.9)) / 4, rel=1e-6)
