"""The learned screen of a search's samples: an online ridge model of log step time over group devices."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.exceptions import InvalidArgument
from gnplace.rl.screen import MoveScreen


def additive(rng, groups=8, devices=3):
    """Placements whose log step is a sum of one cost per (group, device), and those costs."""
    cost = rng.uniform(0.0, 0.2, size=(groups, devices))
    return cost, lambda x: np.exp(1.0 + cost[np.arange(groups), x].sum(axis=-1))


def test_the_screen_ranks_placements_of_an_additive_step_in_its_order():
    rng = np.random.default_rng(0)
    cost, step = additive(rng)
    screen = MoveScreen(8, 3, least=40)
    seen = rng.integers(0, 3, size=(60, 8))
    screen.observe(seen[:39], step(seen[:39]), np.zeros(39, dtype=bool))
    assert not screen.ready  # fewer than `least`: a search times what it draws
    screen.observe(seen[39:], step(seen[39:]), np.zeros(21, dtype=bool))
    assert screen.ready and len(screen) == len({row.tobytes() for row in seen})
    fresh = rng.integers(0, 3, size=(30, 8))
    assert np.allclose(screen.predict(fresh), np.log(step(fresh)), atol=0.05)
    order = screen.rank(fresh)
    assert order[0] == np.argmin(step(fresh))
    true_rank = np.argsort(np.argsort(step(fresh)))
    assert np.corrcoef(np.argsort(order), true_rank)[0, 1] > 0.9


def test_it_learns_each_placement_once_skips_oom_and_keeps_a_window():
    screen = MoveScreen(2, 2, window=2, least=2)
    rows = np.array([[0, 0], [0, 1], [0, 0], [1, 1], [1, 0], [0, 0]])
    screen.observe(rows, np.array([1.0, 2.0, 5.0, 3.0, 4.0, 6.0]), np.array([0, 0, 0, 1, 0, 0], dtype=bool))
    # [0, 0] again is not learned twice and [1, 1] is OOM; [1, 0] pushes the oldest, [0, 0], out of the window of
    # two, and [0, 0] then comes back, pushing [0, 1] out
    state = screen.state()
    assert state["groups"] == [[1, 0], [0, 0]] and np.allclose(state["log_step"], np.log([4.0, 6.0]))
    screen.observe(np.array([[1, 1]]), np.array([np.inf]), np.array([False]))  # nor is a step that is not one
    assert len(screen) == 2


def test_its_state_comes_back_and_ranks_the_same():
    rng = np.random.default_rng(1)
    _, step = additive(rng)
    screen = MoveScreen(8, 3)
    seen = rng.integers(0, 3, size=(50, 8))
    screen.observe(seen, step(seen), np.zeros(50, dtype=bool))
    again = MoveScreen(8, 3)
    again.restore(screen.state())
    fresh = rng.integers(0, 3, size=(10, 8))
    assert again.ready and np.array_equal(again.predict(fresh), screen.predict(fresh))
    assert np.array_equal(MoveScreen(8, 3).predict(fresh), np.zeros(10))  # nothing learned: no preference


@pytest.mark.parametrize("bad", [dict(num_groups=0), dict(window=1), dict(least=1), dict(ridge=0.0)])
def test_bad_settings_are_refused(bad):
    with pytest.raises(InvalidArgument):
        MoveScreen(**{"num_groups": 4, "num_devices": 2, **bad})
