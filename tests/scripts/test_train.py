"""``scripts/train.py``: the pairs its flags name."""

from __future__ import annotations

import sys
import types
from pathlib import Path

GRAPH = Path(__file__).resolve().parents[2] / "datasets" / "examples" / "mlp1x8w6144b256.gnpg"


def test_a_cluster_named_twice_is_trained_on_once(tmp_path, load_script, monkeypatch):
    """``--clusters k80x2,k80x2`` trained on each graph's k80x2 pair twice as often, without a word."""
    given = {}

    def fit(pairs, out, **kwargs):
        given["pairs"] = pairs
        return types.SimpleNamespace(iteration=0)

    monkeypatch.setitem(sys.modules, "gnplace.train", types.SimpleNamespace(fit=fit))  # (no Lightning import)
    script = load_script("train")
    args = ["--graphs", str(GRAPH), "--split", "all", "--out", str(tmp_path / "out")]
    assert script.main([*args, "--clusters", "k80x2, k80x4,k80x2"]) == 0
    assert given["pairs"] == [(str(GRAPH), "k80x2"), (str(GRAPH), "k80x4")]
