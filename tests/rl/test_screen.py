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


def test_a_residual_screen_ranks_by_its_base_at_once_and_learns_what_the_base_misses():
    rng = np.random.default_rng(2)
    cost, step = additive(rng)
    seen, fresh = rng.integers(0, 3, size=(60, 8)), rng.integers(0, 3, size=(30, 8))
    base = lambda x: np.log(step(x)) - 0.4 * (x[:, 0] == 2)  # noqa: E731 (a model blind to group 0 on device 2)
    screen = MoveScreen(8, 3, residual=True)
    assert screen.ready and np.array_equal(screen.rank(fresh, base(fresh)), np.argsort(base(fresh), kind="stable"))
    screen.observe(seen, step(seen), np.zeros(60, dtype=bool), base(seen))
    before = np.abs(base(fresh) - np.log(step(fresh))).max()
    after = np.abs(screen.predict(fresh, base(fresh)) - np.log(step(fresh))).max()
    assert before > 0.35 and after < 0.1  # the residual corrects the base
    again = MoveScreen(8, 3)
    again.restore(screen.state())  # a residual screen comes back residual
    assert again.residual and np.array_equal(again.predict(fresh, base(fresh)), screen.predict(fresh, base(fresh)))
    # a placement the base puts out of memory (inf) is ranked last and not learned from
    assert screen.rank(fresh[:3], np.array([0.0, np.inf, -1.0])).tolist() == [2, 0, 1]
    screen.observe(fresh[:1], step(fresh[:1]), np.zeros(1, dtype=bool), np.array([np.inf]))
    assert len(screen) == 60 - (len(seen) - len({r.tobytes() for r in seen}))


def test_a_base_goes_with_a_residual_screen_only():
    x = np.zeros((2, 4), dtype=np.int64)
    with pytest.raises(InvalidArgument, match="residual"):
        MoveScreen(4, 2).predict(x, np.zeros(2))
    with pytest.raises(InvalidArgument, match="residual"):
        MoveScreen(4, 2, residual=True).observe(x, np.ones(2), np.zeros(2, dtype=bool))
    with pytest.raises(InvalidArgument, match="3 values for 2"):
        MoveScreen(4, 2, residual=True).predict(x, np.zeros(3))


@pytest.mark.parametrize("bad", [dict(num_groups=0), dict(window=1), dict(least=1), dict(ridge=0.0)])
def test_bad_settings_are_refused(bad):
    with pytest.raises(InvalidArgument):
        MoveScreen(**{"num_groups": 4, "num_devices": 2, **bad})


@pytest.mark.parametrize("state, found", [
    ({"groups": [[0, 1, 0]], "log_step": [0.5]}, "3 devices for 2 groups"),  # another pair's screen
    ({"groups": [[0, 7]], "log_step": [0.5]}, "device 7 outside 0..1"),  # learned [0, 7] as [1, 1] or an IndexError
    ({"groups": [[0, 1], [1, 1]], "log_step": [0.5]}, "2 placements and 1 log step"),
    ({"groups": [[0, 1]], "log_step": [float("nan")]}, "not finite"),
    ({"groups": [[0, 1]], "log_step": ["x"]}, "malformed"),
    ({"groups": [[0, 10**30]], "log_step": [0.0]}, "malformed"),  # past a C long: an OverflowError traceback
    ({"groups": [[0, 1]], "log_step": [10**400]}, "malformed"),  # past a float
    ({"groups": 3, "log_step": [0.5]}, "malformed"), (None, "malformed"),
])
def test_a_malformed_state_is_refused_with_one_error_and_changes_nothing(state, found):
    screen = MoveScreen(2, 2, least=2)
    screen.observe(np.array([[0, 0], [1, 0]]), np.array([1.0, 2.0]), np.zeros(2, dtype=bool))
    before = screen.state()
    with pytest.raises(InvalidArgument, match=found):
        screen.restore(state)
    assert screen.state() == before


def test_a_screen_that_keeps_fewer_placements_than_it_needs_to_rank_is_refused():
    # window 8, least 32: at most 8 placements are ever kept, so it never became ready and never ranked
    with pytest.raises(InvalidArgument, match="least <= window"):
        MoveScreen(4, 2, window=8, least=32)
    assert MoveScreen(4, 2, window=8, least=32, residual=True).ready  # a residual screen ranks from the start
    assert MoveScreen(4, 2, window=8, least=8).least == 8


def test_the_screen_solves_on_one_blas_thread_whatever_the_cores(monkeypatch):
    # a thread per core spun for 80 ms a solve on a busy machine, and made the ranking depend on the cores
    from threadpoolctl import threadpool_info

    solve, threads = np.linalg.solve, []

    def recording(*args, **kwargs):
        threads.extend(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")
        return solve(*args, **kwargs)

    monkeypatch.setattr(np.linalg, "solve", recording)
    rng = np.random.default_rng(4)
    screen = MoveScreen(8, 3, least=4)
    x = rng.integers(0, 3, size=(40, 8))
    screen.observe(x, np.exp(rng.random(40)), np.zeros(40, dtype=bool))
    screen.rank(x[:5])
    assert threads and set(threads) == {1}


def test_the_model_predicts_from_centred_features_where_the_placements_seen_lean_to_one_device():
    """log T(x) = mu + w^T (phi(x) - mean phi): the all-on-0 placement and its four single moves (mean phi 0.8 on
    device 0), of log step 1 + 0.5 per group on device 1, are fitted exactly; uncentred phi(x) shifted them all."""
    x = np.vstack([np.zeros(4, dtype=np.int64), np.eye(4, dtype=np.int64)])
    screen = MoveScreen(4, 2, least=2, ridge=1e-9)
    log_step = 1.0 + 0.5 * x.sum(axis=1)
    screen.observe(x, np.exp(log_step), np.zeros(5, dtype=bool))
    assert np.allclose(screen.predict(x), log_step, atol=1e-6)
    assert screen.predict(np.ones((1, 4), dtype=np.int64)) == pytest.approx([3.0], abs=1e-6)  # additive, unseen
