"""``rnn_pg``, Mirhoseini et al. (ICML 2017)."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.placers import PLACERS, make_placer
from gnplace.placers.exact import brute_force
from gnplace.rl.rnn_pg import RnnPGPlacer
from gnplace.sim.simulator import Simulator

SMALL = dict(samples=16, hidden=32, layers=1)


def test_registered_as_a_learned_budgeted_placer():
    info = PLACERS.info("rnn_pg")
    assert PLACERS["rnn_pg"] is RnnPGPlacer and info.learned and {"timer", "budget"} <= info.accepts
    assert make_placer("rnn_pg", budget=10).budget == 10


def test_learns_on_a_small_graph_and_beats_random_placements(two_chains):
    g, c, sim = two_chains(8), load_cluster("k80x2"), Simulator()
    rng = np.random.default_rng(0)
    random_steps = [sim.time(g, c, rng.integers(2, size=g.num_ops)).step_time for _ in range(100)]
    placer = RnnPGPlacer(budget=480, **SMALL)
    step = sim.time(g, c, placer.place(g, c, seed=0)).step_time
    assert step < np.median(random_steps)
    assert placer.last_evaluations == 480 and placer.last_updates == 30
    steps = [s for _, s in placer.last_history]
    assert steps == sorted(steps, reverse=True) and steps[-1] == pytest.approx(step)
    # the policy itself improves (not only the best of its samples) and finds the optimum
    rewards = placer.last_mean_rewards
    assert np.mean(rewards[-3:]) > np.mean(rewards[:3]) + 0.05
    assert step == pytest.approx(sim.time(g, c, brute_force(g, c)).step_time)


def test_deterministic_under_a_seed():
    from gnplace.toy import mlp_training_graph

    g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x4")
    runs = [RnnPGPlacer(budget=48, **SMALL).place(g, c, seed=3).devices for _ in range(2)]
    assert np.array_equal(*runs)
