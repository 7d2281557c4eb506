"""``scripts/bench.py``: subcommands whose whole path is cheap enough to run end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_fidelity_with_fine_tuning_covers_every_graph(tmp_path):
    """Calibration, the simulator's error and fine-tuning on real steps, for two models in one run."""
    graphs = [f"gnplace.execute.examples:{name}" for name in ("tiny", "branchy")]
    done = subprocess.run(
        [sys.executable, "scripts/bench.py", "fidelity", "--timer", "local", "--devices", "cpu,cpu", "--graphs", *graphs,
         "--placements", "3", "--repeats", "1", "--finetune-budget", "4", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "fidelity.json").read_text())
    assert set(summary["graphs"]) == {"tiny", "branchy"} and summary["placements"] == 6
    for entry in summary["graphs"].values():
        assert len(entry["placements"]) == 3 and entry["finetune"]["step_time_s"] > 0


def test_constructor_compares_the_mdps_finish_time_with_the_simulator(load_script):
    """The list schedule's finish time of the greedy placement over the simulated step, coarse and op-level."""
    import argparse

    bench = load_script("bench")
    args = argparse.Namespace(checkpoint=None, families=["ptb"], per_family=1, clusters=["k80x2"], op_level=True)
    rows = bench.bench_constructor(args)
    assert len(rows) == 1
    row = rows[0]
    assert row["op_nodes"] == row["ops"] > row["coarse_nodes"] > 0
    for level in ("coarse", "op"):
        # an estimate of the same step: within a factor of two, never a unit or scale slip
        assert 0.5 < row[f"{level}_mdp_over_sim"] < 2.0 and 0.5 < row[f"{level}_mdp_over_decision_sim"] < 2.0
    assert row["op_mdp_over_sim"] == row["op_mdp_over_decision_sim"]  # no coarsening: one graph
