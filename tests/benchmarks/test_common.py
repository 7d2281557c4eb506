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


def test_a_rows_file_of_another_program_is_one_error_not_a_traceback(load_script, tmp_path, capsys):
    """``zeroshot_rows.jsonl`` (or the report's ``learned.jsonl``) holding other JSON lines was a KeyError."""
    import json

    import pytest

    from gnplace.exceptions import InvalidArgument

    common = load_script("benchmarks.common")
    rows = tmp_path / "zeroshot_rows.jsonl"
    rows.write_text(json.dumps([1, 2]) + "\n")
    with pytest.raises(InvalidArgument, match="zeroshot_rows.jsonl: not the rows of an earlier run"):
        common.Store(rows)
    out = tmp_path / "zs"
    out.mkdir()
    (out / "zeroshot_rows.jsonl").write_text(json.dumps({"graph": "ptb_002"}) + "\n")  # rows with no key
    code = load_script("bench").main(["zeroshot", "--families", "ptb", "--clusters", "k80x2", "--min-ops", "1000000000",
                                      "--real-clusters", "--unseen-clusters", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("bench: error: ") and err.count("\n") == 1 and "move it away" in err, err
