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
