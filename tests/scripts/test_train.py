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


def test_a_screen_model_without_a_screen_is_refused_before_training(tmp_path, load_script, monkeypatch, capsys):
    """``--screen-model simulator`` at the default ``--screen 1`` trained with no screen at all, without a word."""
    monkeypatch.setitem(sys.modules, "gnplace.train", types.SimpleNamespace(fit=None))  # (never reached)
    script = load_script("train")
    args = ["--graphs", str(GRAPH), "--split", "all", "--out", str(tmp_path / "out"), "--screen-model", "simulator"]
    assert script.main(args) == 2
    assert capsys.readouterr().err == ("train: error: --screen-model simulator is what the screen starts from, and "
                                       "--screen 1 screens nothing (every sample is timed): leave --screen-model out, "
                                       "or raise --screen\n")


def test_a_graph_of_no_ops_is_refused_before_training(tmp_path, load_script, monkeypatch, capsys):
    """It was trained on (0 s steps over auto's 0 s: "NaN or Inf found in input tensor" each iteration), where
    gnplace place, simulate, evaluate, finetune and pretrain refuse one in one line."""
    from gnplace.graph import OpGraph
    from gnplace.graph_io import save_graph

    monkeypatch.setitem(sys.modules, "gnplace.train", types.SimpleNamespace(fit=None))  # (never reached)
    empty = save_graph(OpGraph([], name="empty"), tmp_path / "empty.gnpg")
    script = load_script("train")
    assert script.main(["--graphs", str(GRAPH), str(empty), "--split", "all", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"train: error: {empty}: graph 'empty' has no ops; there is nothing to place\n"
