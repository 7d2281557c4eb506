"""``scripts/bench.py``: subcommands whose whole path is cheap enough to run end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

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
        signed = sorted(r["simulated_s"] / r["measured_s"] - 1 for r in entry["placements"])
        assert entry["median_signed_error"] == pytest.approx(signed[1])  # > 0: the simulator too slow
        assert not any(r["name"].startswith("single") for r in entry["placements"])  # calibration's own
    assert "median signed error" in done.stdout


def test_apply_times_a_placed_step_beside_eager(load_script, capsys):
    """The placed module's step and eager PyTorch's, both real and both on this CPU."""
    import argparse

    bench = load_script("benchmarks.execute")
    rows = bench.bench_apply(argparse.Namespace(models=["gnplace.execute.examples:tiny"], rounds=2, repeat=2))
    assert len(rows) == 1 and rows[0]["ops"] > 0 and rows[0]["eager_s"] > 0 and rows[0]["placed_s"] > 0
    assert rows[0]["ratio"] == rows[0]["placed_s"] / rows[0]["eager_s"]
    assert "| tiny |" in capsys.readouterr().out


def test_constructor_compares_the_mdps_finish_time_with_the_simulator(load_script):
    """The list schedule's finish time of the greedy placement over the simulated step, coarse and op-level."""
    import argparse

    bench = load_script("benchmarks.zeroshot")
    args = argparse.Namespace(checkpoint=None, families=["ptb"], per_family=1, clusters=["k80x2"], op_level=True)
    rows = bench.bench_constructor(args)
    assert len(rows) == 1
    row = rows[0]
    assert row["op_nodes"] == row["ops"] > row["coarse_nodes"] > 0
    for level in ("coarse", "op"):
        # an estimate of the same step: within a factor of two, never a unit or scale slip
        assert 0.5 < row[f"{level}_mdp_over_sim"] < 2.0 and 0.5 < row[f"{level}_mdp_over_decision_sim"] < 2.0
    assert row["op_mdp_over_sim"] == row["op_mdp_over_decision_sim"]  # no coarsening: one graph


def test_zeroshot_row_places_policy_and_auto_under_its_seed(load_script):
    """``--seed`` reaches both placements, is recorded, and repeats; the policy is never slower than auto."""
    bench = load_script("benchmarks.zeroshot")
    path = str(ROOT / "datasets" / "ptb" / "ptb_029.gnpg")  # auto's metis partition differs under seeds 0 and 1
    rows = [bench._zero_shot_row((path, "cpu_gpu", None, 4, "test", {}, seed)) for seed in (0, 1, 1)]
    assert [r["seed"] for r in rows] == [0, 1, 1]
    assert rows[1] == {**rows[2], "place_s": rows[1]["place_s"], "plain_s": rows[1]["plain_s"]}  # same seed, same row
    assert rows[0]["auto_ms"] < rows[1]["auto_ms"]  # auto under each row's own seed
    assert all(0 < r["policy"] <= 1.0 for r in rows)  # auto's placement for that seed is among the policy's candidates


def test_vs_search_divides_geometric_means_on_the_pairs_both_placed(load_script, tmp_path):
    """Only pairs in both runs count; auto's row of the search run is the reference of both."""
    import csv
    import math

    bench = load_script("benchmarks.zeroshot")
    zeroshot = tmp_path / "zeroshot.json"
    zeroshot.write_text(json.dumps([
        # a run under another seed: its own auto took 2.5 s on a, so 0.72 of it is 0.9 of the search's 2.0 s
        {"group": "test", "graph": "a", "family": "ptb", "cluster": "k80x4", "policy": 0.72, "auto_ms": 2500.0},
        {"group": "test", "graph": "b", "family": "ptb", "cluster": "k80x4", "policy": 1.0, "auto_ms": 4000.0},
        {"group": "test", "graph": "c", "family": "ptb", "cluster": "k80x4", "policy": 0.5, "auto_ms": 1.0},  # not searched
        {"group": "real", "graph": "a", "family": "real", "cluster": "k80x4", "policy": 0.1, "auto_ms": 1.0},  # not test
        {"group": "train", "graph": "b", "family": "ptb", "cluster": "k80x4", "policy": 0.1, "auto_ms": 1.0},  # nor this
    ]))
    search = tmp_path / "results.csv"
    with search.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["graph", "cluster", "placer", "step_time_s", "oom", "error"])
        writer.writeheader()
        for graph, placer, step in (("a", "auto", 2.0), ("a", "ppo", 1.6), ("b", "auto", 4.0), ("b", "ppo", 4.0),
                                    ("b", "annealing", 1.0)):
            writer.writerow({"graph": graph, "cluster": "k80x4", "placer": placer, "step_time_s": step,
                             "oom": "False", "error": ""})
    table = bench.zeroshot_against_search(zeroshot, search)
    assert [(r["family"], r["pairs"]) for r in table] == [("ptb", 2), ("all", 2)]
    assert math.isclose(table[-1]["policy"], math.sqrt(0.9)) and math.isclose(table[-1]["search"], math.sqrt(0.8))
    assert math.isclose(table[-1]["ratio"], math.sqrt(0.9 / 0.8))
    assert math.isclose(table[-1]["share"], (1 - math.sqrt(0.9)) / (1 - math.sqrt(0.8)))
    tables = bench.zeroshot_tables([{**row, "greedy": 1.0, "plain": 1.0, "portfolio": None, "policy_oom": False,
                                     "auto_oom": False, "plain_oom": False, "place_s": 0.1, "plain_s": 0.1}
                                    for row in json.loads(zeroshot.read_text())])
    assert "**train**" in tables and tables.index("**test**") < tables.index("**train**")  # apart, never mixed


def test_vs_search_refuses_a_search_run_with_several_rows_per_pair(load_script, tmp_path):
    """Two budgets of one placer on one pair: refused unless --budget picks one, which is then used."""
    import csv
    import math

    bench = load_script("benchmarks.zeroshot")
    zeroshot = tmp_path / "zeroshot.json"
    zeroshot.write_text(json.dumps([{"group": "test", "graph": "a", "family": "ptb", "cluster": "k80x4",
                                     "policy": 0.9, "auto_ms": 2000.0}]))
    search = tmp_path / "results.csv"
    with search.open("w", newline="") as handle:
        fields = ["graph", "cluster", "placer", "step_time_s", "oom", "error", "budget", "seed", "options"]
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for placer, step, budget in (("auto", 2.0, ""), ("ppo", 1.6, "20000"), ("ppo", 1.8, "2000")):
            writer.writerow({"graph": "a", "cluster": "k80x4", "placer": placer, "step_time_s": step, "oom": "False",
                             "error": "", "budget": budget, "seed": "0", "options": "{}"})
    with pytest.raises(SystemExit, match="2 ppo rows for one pair"):
        bench.zeroshot_against_search(zeroshot, search)
    table = bench.zeroshot_against_search(zeroshot, search, budget=2000)
    assert math.isclose(table[-1]["search"], 0.9) and math.isclose(table[-1]["ratio"], 1.0)
    assert math.isclose(table[-1]["share"], 1.0)


@pytest.mark.parametrize("argv, message", [
    (["vs-search", "nosuch.json", "nosuch.csv"], "No such file or directory"),
    (["placers", "--cluster", "nosuch"], "unknown cluster 'nosuch'"),
    (["sim", "--ops", "-5"], "--ops must be at least 1, got -5"),
    (["sim", "--devices", "0"], "--devices must be at least 1, got 0"),
    (["ppo-speed", "--samples", "-1"], "--samples must be at least 0, got -1"),
    (["latency", "--checkpoint", "TRUNCATED", "--ops", "100"], "not a readable checkpoint"),
    (["apply", "--rounds", "0"], "--rounds must be at least 1, got 0"),
    (["apply", "--models", "gnplace.execute.examples:nosuch"], "nosuch"),
])
def test_bad_input_is_one_error_line_and_exit_2(load_script, tmp_path, capsys, argv, message):
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes((ROOT / "checkpoints" / "gnplace-base.ckpt").read_bytes()[:1000])
    bench = load_script("bench")
    code = bench.main([str(truncated) if a == "TRUNCATED" else a for a in argv])
    out, err = capsys.readouterr()
    assert code == 2 and not out and "Traceback" not in err
    assert err.startswith("bench: error: ") and err.count("\n") == 1 and message in err, err


def test_finetune_reuses_the_search_from_scratch_of_the_same_pair_budget_seed_and_options(tmp_path):
    """A second fine-tuning variant in the same folder times only fine-tuning; the first one's rows stay."""
    base = [sys.executable, "scripts/bench.py", "finetune", "--families", "ptb", "--per-family", "1",
            "--clusters", "k80x2", "--budget", "40", "--jobs", "1", "--out", str(tmp_path)]
    for extra in ([], ["-O", "finetune.prior=2"], ["-O", "scratch.prior=2"]):
        done = subprocess.run(base + extra, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    first, second, third = json.loads((tmp_path / "finetune.json").read_text())
    assert first["seed"] == second["seed"] == 0 and second["finetune_options"]["prior"] == 2
    for key in ("scratch_s", "scratch_final", "scratch_history", "scratch_revision"):  # reused: the same wall time too
        assert first[key] == second[key]
    assert third["scratch_options"] == {"prior": 2} and third["scratch_s"] != first["scratch_s"]  # searched anew
    assert done.stdout.count("| ptb_") == 1  # the table shows this run's variant only


def test_finetune_summary_reads_the_saving_on_each_groups_geometric_mean(load_script):
    """Means by cluster, by family and overall, and the evaluations after which each reaches scratch's final mean."""
    bench = load_script("benchmarks.finetune")

    def row(family, cluster, scratch, finetune):
        return {"family": family, "cluster": cluster, "scratch_history": scratch, "finetune_history": finetune,
                "scratch_final": scratch[-1][1], "finetune_final": finetune[-1][1]}

    rows = [row("ptb", "k80x4", [[1, 1.0], [400, 0.81]], [[1, 1.0], [40, 0.81]]),  # reached 10x sooner
            row("nmt", "k80x4", [[1, 1.0], [300, 0.64]], [[1, 1.0], [50, 0.9]])]  # never reached
    lines = bench.finetune_summary(rows, points=(100,)).splitlines()
    by_group = {line.split(" | ")[0].lstrip("| "): line for line in lines[2:]}
    assert set(by_group) == {"cluster k80x4", "family ptb", "family nmt", "all"}
    assert by_group["family ptb"].endswith("| 0.810 / 0.810 | 400 | 40 | 10.0x |")
    assert by_group["family nmt"].endswith("| 1.000 / 0.640 | 0.900 / 0.900 | 300 | never | - |")
    # all: scratch's final mean is sqrt(0.81 * 0.64) = 0.72, reached at 400; fine-tuning's, sqrt(0.81 * 0.9), never
    assert by_group["all"].endswith("| 1.000 / 0.720 | 0.854 / 0.854 | 400 | never | - |")


def test_screen_model_fine_tunes_each_pair_with_both_screens_on_mismatched_steps(tmp_path):
    """Both screens on one pair, timed by the stand-in for real steps; a second run resumes with nothing to do."""
    cmd = [sys.executable, "scripts/bench.py", "screen-model", "--families", "ptb", "--clusters", "k80x2",
           "--budget", "110", "--jobs", "1", "--mismatch", "0.3", "0.5", "2", "--out", str(tmp_path)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads((tmp_path / "screen_model.json").read_text())
    assert row["mismatch"] == [0.3, 0.5, 2.0] and row["cluster"] == "k80x2"
    for model in ("learned", "simulator"):
        history = row[f"{model}_history"]
        assert 0 < row[f"{model}_final"] <= 1.0 and history[-1][1] == row[f"{model}_final"] and history[-1][0] <= 110
    assert "| family ptb | 1 |" in done.stdout and "| all | 1 |" in done.stdout
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and len(json.loads((tmp_path / "screen_model.json").read_text())) == 1


def test_mismatched_steps_time_what_the_placer_does_not_know(load_script):
    bench = load_script("benchmarks.finetune")
    from gnplace.cluster import load_cluster
    from gnplace.sim.simulator import Simulator
    from gnplace.toy import mlp_training_graph

    graph, cluster = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2")
    split = np.arange(graph.num_ops) % 2
    same = bench.MismatchedSteps(graph, cluster, 0.0, 1.0, 1.0)
    assert same.time(graph, cluster, split).step_time == pytest.approx(Simulator().time(graph, cluster, split).step_time)
    slow_links = bench.MismatchedSteps(graph, cluster, 0.0, 0.1, 1.0)
    assert slow_links.time(graph, cluster, split).step_time > same.time(graph, cluster, split).step_time
    noisy = bench.MismatchedSteps(graph, cluster, 0.5, 1.0, 1.0)
    assert noisy.time_batch(graph, cluster, [split, split]).step_time[0] != same.time(graph, cluster, split).step_time


def test_learning_curves_are_read_at_a_budget_and_at_a_target(load_script):
    common = load_script("benchmarks.common")
    curve = [[1, 1.2], [17, 1.0], [33, 0.9]]
    assert common.first_reaching(curve, 1.0) == 17 and common.first_reaching([[1, 1.2]], 1.0) is None
    assert common.best_at(curve, 20) == 1.0 and common.best_at(curve, 0) == float("inf")
    assert [Path(p).stem for p in common.test_graphs("ptb", 2)] == ["ptb_002", "ptb_004"]
