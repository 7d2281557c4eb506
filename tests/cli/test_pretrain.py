"""``gnplace pretrain`` in-process: a tiny run, and one-line errors with exit 2."""

from __future__ import annotations

import json

import yaml

from gnplace.cli import main
from gnplace.graph_io import save_graph
from gnplace.toy import mlp_training_graph


def _config(tmp_path):
    for family in ("alpha", "beta"):
        for i in range(2):
            save_graph(mlp_training_graph(layers=2 + i, width=128, batch=16), tmp_path / "data" / family / f"g{i}.gnpg")
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({
        "data": {"root": str(tmp_path / "data"), "families": ["alpha", "beta"], "val_per_family": 1,
                 "presets": ["k80x2"], "random_clusters": 0, "val_clusters": ["k80x2"], "max_nodes": 30},
        "schedule": {"iterations": 2, "pairs_per_step": 1, "steps_per_epoch": 1},
        "learner": {"samples": 2, "epochs": 1, "hidden": 8, "head": 4, "layers": 1},
    }))
    return path


def test_pretrain_runs_and_exports(tmp_path, capsys):
    config = _config(tmp_path)
    export = tmp_path / "shipped" / "p.ckpt"
    code = main(["pretrain", "--config", str(config), "--out", str(tmp_path / "run"), "--no-progress",
                 "--export", str(export), "--set", "schedule.iterations=3"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["iterations"] == 3 and export.is_file()


def test_bad_config_and_bad_resume_exit_2(tmp_path, capsys):
    config = _config(tmp_path)
    assert main(["pretrain", "--config", str(config), "--set", "schedule.colour=red", "--no-progress"]) == 2
    assert "unknown key schedule.colour" in capsys.readouterr().err
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    last.parent.mkdir(parents=True)
    last.write_text("not a checkpoint")
    assert main(["pretrain", "--config", str(config), "--out", str(tmp_path / "run"), "--resume", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error:") and err.count("\n") == 1
