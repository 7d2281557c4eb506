import json

import numpy as np
import pytest

from gnplace.exceptions import InvalidArgument, InvalidCheckpoint
from gnplace.finetune import finetune
from gnplace.graph_io import save_graph
from gnplace.toy import mlp_training_graph

TINY = "gnplace.execute.examples:tiny"


def test_finetune_with_the_simulator_writes_the_best_placement_and_resumes(tmp_path):
    path = save_graph(mlp_training_graph(layers=3, width=256, batch=32), tmp_path / "g.gnpg")
    out = tmp_path / "run"
    summary = finetune(str(path), "k80x2", budget=80, samples=8, epochs=1, out=out, progress=False)
    assert summary is not None and summary["evaluations"] <= 80
    assert summary["step_time_s"] <= summary["auto_s"] * (1 + 1e-9)  # never worse than the reference...
    assert summary["zero_shot_s"] is not None  # ...nor than the checkpoint's zero-shot placement it started from
    assert summary["step_time_s"] <= summary["zero_shot_s"] * (1 + 1e-9)
    assert (out / "placement.json").exists() and (out / "last.ckpt").exists()
    assert json.loads((out / "summary.json").read_text())["timer"] == "sim"
    logged = _logged_iterations(out)
    assert logged == list(range(len(logged))) and logged  # one session, from the start
    again = finetune(str(path), "k80x2", budget=80, samples=8, epochs=1, out=out, resume=True, progress=False)
    assert again is not None and again["step_time_s"] == pytest.approx(summary["step_time_s"])
    assert _logged_iterations(out) == logged  # resuming a finished run trains nothing more


def _logged_iterations(out):
    """The iterations every session of a fine-tuning run logged (Lightning's CSV logs), in order."""
    import csv

    steps = []
    for metrics in sorted((out / "logs").glob("version_*/metrics.csv"), key=lambda m: int(m.parent.name[8:])):
        with metrics.open(newline="") as handle:
            steps += [int(r["step"]) for r in csv.DictReader(handle)]
    return steps


@pytest.mark.parametrize("timer", ["local", "dist"])
def test_finetune_on_real_steps(tmp_path, timer):
    summary = finetune(TINY, "k80x2", timer=timer, budget=12, samples=4, epochs=1, repeats=1, out=tmp_path,
                       devices=["cpu", "cpu"], progress=False)
    assert summary is not None and summary["timer"] == timer
    assert summary["step_time_s"] > 0 and np.isfinite(summary["single_s"])
    assert summary["evaluations"] <= 12


def test_bad_inputs_are_one_clear_error(tmp_path):
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    with pytest.raises(InvalidArgument, match="MODULE:FACTORY"):
        finetune(str(path), "k80x2", timer="local", out=tmp_path)
    with pytest.raises(InvalidArgument, match="unknown timer"):
        finetune(str(path), "k80x2", timer="gpu", out=tmp_path)
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(InvalidCheckpoint):
        finetune(str(path), "k80x2", checkpoint=str(bad), out=tmp_path)
