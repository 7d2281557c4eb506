"""Fixtures of the learned-placer tests: the checks every seed method's placer shares."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.placers import PLACERS, make_placer
from gnplace.placers.base import Placer
from gnplace.placers.exact import brute_force
from gnplace.sim.simulator import Simulator
from gnplace.toy import mlp_training_graph

#: A policy small enough to learn in a test: 16 samples a batch, 32 hidden units, one layer.
SMALL = dict(samples=16, hidden=32, layers=1)


class SeedPlacerChecks:
    """What every recurrent seed placer (``rnn_pg``, ``hierarchical``, ``spotlight``, ``post``) must do."""

    @staticmethod
    def registered(name: str, placer_class: type[Placer]) -> None:
        """``name`` is registered as ``placer_class``, learned, taking a timer and a budget."""
        info = PLACERS.info(name)
        assert PLACERS[name] is placer_class and info.learned and {"timer", "budget"} <= info.accepts
        assert make_placer(name, budget=10).budget == 10

    @staticmethod
    def deterministic(placer_class: type[Placer]) -> None:
        """Two runs under seed 3 on a small MLP on k80x4 give the same placement."""
        g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x4")
        runs = [placer_class(budget=48, **SMALL).place(g, c, seed=3).devices for _ in range(2)]
        assert np.array_equal(*runs)

    @staticmethod
    def learns_the_optimum(placer_class: type[Placer], graph) -> None:
        """480 evaluations on ``graph`` (16 ops on k80x2) beat random placements, find the brute-force
        optimum, and the policy's own mean reward rises (not only the best of its samples)."""
        c, sim = load_cluster("k80x2"), Simulator()
        rng = np.random.default_rng(0)
        random_steps = [sim.time(graph, c, rng.integers(2, size=graph.num_ops)).step_time for _ in range(100)]
        placer = placer_class(budget=480, **SMALL)
        step = sim.time(graph, c, placer.place(graph, c, seed=0)).step_time
        assert step < np.median(random_steps)
        assert placer.last_evaluations == 480 and placer.last_updates == 30
        steps = [s for _, s in placer.last_history]
        assert steps == sorted(steps, reverse=True) and steps[-1] == pytest.approx(step)
        rewards = placer.last_mean_rewards
        assert np.mean(rewards[-3:]) > np.mean(rewards[:3]) + 0.05
        assert step == pytest.approx(sim.time(graph, c, brute_force(graph, c)).step_time)


@pytest.fixture
def seed_placer_checks() -> type[SeedPlacerChecks]:
    """The shared checks of the recurrent seed placers (:class:`SeedPlacerChecks`)."""
    return SeedPlacerChecks
