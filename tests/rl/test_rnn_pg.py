"""``rnn_pg``, Mirhoseini et al. (ICML 2017)."""

from __future__ import annotations

from gnplace.rl.rnn_pg import RnnPGPlacer


def test_registered_as_a_learned_budgeted_placer(seed_placer_checks):
    seed_placer_checks.registered("rnn_pg", RnnPGPlacer)


def test_learns_on_a_small_graph_and_beats_random_placements(seed_placer_checks, two_chains):
    seed_placer_checks.learns_the_optimum(RnnPGPlacer, two_chains(8))


def test_deterministic_under_a_seed(seed_placer_checks):
    seed_placer_checks.deterministic(RnnPGPlacer)
