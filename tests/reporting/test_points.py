"""``scripts/reporting/points.py``: the points of a saved row a figure draws, and what it leaves out."""

from __future__ import annotations

import math


def test_a_learning_curve_keeps_the_points_a_figure_draws_and_says_what_it_left_out(load_script):
    points = load_script("reporting.points")
    drawn, note = points.curve_points([[1, 1.0], [10, math.nan], [100, 0.8], [-1, 0.9], [5, 0.0], [True, 1.0], "x"])
    assert drawn.tolist() == [[1.0, 1.0], [100.0, 0.8]]
    assert note == ("5 of 7 points left out (2 not a pair of numbers, 1 not finite, 1 evaluations < 0, "
                    "1 ratio <= 0)")
    assert points.curve_points([[1, 1.1], [8, 0.9]])[1] is None
    for history, said in (([], "no points"), (None, "no points"), ([[1, -1.0]], "no points (1 ratio <= 0)")):
        drawn, note = points.curve_points(history)
        assert drawn.shape == (0, 2) and note == said


def test_the_scale_keeps_the_points_log_axes_draw_sorted_by_ops(load_script):
    points = load_script("reporting.points")
    rows = [{"ops": 2000, "seconds": 0.5}, {"ops": 100, "seconds": 0.1}, {"ops": 10, "seconds": math.inf},
            {"ops": 0, "seconds": 1.0}, {"ops": None, "seconds": 1.0}]
    assert points.scale_points(rows) == ([(100, 0.1), (2000, 0.5)],
                                         "3 of 5 points left out (1 not a number, 1 not finite, 1 <= 0)")
    assert points.scale_points(rows[:2])[1] is None
    assert points.scale_points([{"ops": 5, "seconds": -1.0}]) == ([], "no points (1 <= 0)")
