"""``post``, Post."""

from __future__ import annotations

from gnplace.rl.post import PostPlacer


def test_registered_as_a_learned_budgeted_placer(seed_placer_checks):
    seed_placer_checks.registered("post", PostPlacer)


def test_learns_on_a_small_graph_and_beats_random_placements(seed_placer_checks, two_chains):
    seed_placer_checks.learns_the_optimum(PostPlacer, two_chains(8))


def test_deterministic_under_a_seed(seed_placer_checks):
    seed_placer_checks.deterministic(PostPlacer)
