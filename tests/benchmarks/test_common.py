"""``scripts/benchmarks/common.py``. What the benchmarks share: learning curves read at a budget and at a target, the test graphs."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_learning_curves_are_read_at_a_budget_and_at_a_target(load_script):
    common = load_script("benchmarks.common")
    curve = [[1, 1.2], [17, 1.0], [33, 0.9]]
    assert common.first_reaching(curve, 1.0) == 17 and common.first_reaching([[1, 1.2]], 1.0) is None
    assert common.best_at(curve, 20) == 1.0 and common.best_at(curve, 0) == float("inf")
    assert [Path(p).stem for p in common.test_graphs("ptb", 2)] == ["ptb_002", "ptb_004"]
