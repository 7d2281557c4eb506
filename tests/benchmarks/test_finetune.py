"""``scripts/benchmarks/finetune.py``. Benchmarks of fine-tuning: against PPO from scratch, its summary, and its screen on mismatched steps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_finetune_reuses_the_search_from_scratch_of_the_same_pair_budget_seed_and_options(tmp_path, load_script,
                                                                                      capsys):
    """A second fine-tuning variant in the same folder times only fine-tuning; the first one's rows stay."""
    bench = load_script("bench")  # in this process: three runs of a new interpreter spent half their time importing
    base = ["finetune", "--families", "ptb", "--per-family", "1", "--clusters", "k80x2", "--budget", "40",
            "--jobs", "1", "--out", str(tmp_path)]
    for extra in ([], ["-O", "finetune.prior=2"], ["-O", "scratch.prior=2"]):
        capsys.readouterr()
        assert bench.main(base + extra) == 0, capsys.readouterr().err[-2000:]
    out = capsys.readouterr().out
    first, second, third = json.loads((tmp_path / "finetune.json").read_text())
    assert first["seed"] == second["seed"] == 0 and second["finetune_options"]["prior"] == 2
    for key in ("scratch_s", "scratch_final", "scratch_history", "scratch_revision"):  # reused: the same wall time too
        assert first[key] == second[key]
    assert third["scratch_options"] == {"prior": 2} and third["scratch_s"] != first["scratch_s"]  # searched anew
    assert out.count("| ptb_") == 1  # the table shows this run's variant only


def test_finetune_resumes_a_cluster_file_and_reports_only_the_pairs_asked_for(tmp_path, load_script, capsys):
    """Rows keep a cluster file's name, not its path: a rerun finds them; other clusters' rows stay out of the table."""
    bench = load_script("bench")
    base = ["finetune", "--families", "ptb", "--per-family", "1", "--budget", "20", "--jobs", "1",
            "--out", str(tmp_path)]
    unseen = ["--clusters", str(ROOT / "configs" / "clusters" / "newkind4.yaml")]
    for clusters in (unseen, unseen, ["--clusters", "k80x2"]):
        capsys.readouterr()
        assert bench.main(base + clusters) == 0, capsys.readouterr().err[-2000:]
    out = capsys.readouterr().out
    assert [r["cluster"] for r in json.loads((tmp_path / "finetune.json").read_text())] == ["newkind4", "k80x2"]
    assert out.count("| ptb_") == 1 and "newkind4" not in out  # the last run's pair alone


def test_finetune_runs_again_when_its_checkpoint_changes_at_the_same_path(tmp_path, load_script, capsys):
    """A checkpoint retrained in place is another fine-tuning: its rows are not the old ones; scratch's are reused."""
    from gnplace.policy.checkpoint import load_policy, save_policy

    bench = load_script("bench")
    policy, meta = load_policy(ROOT / "checkpoints" / "gnplace-base.ckpt")
    ckpt = tmp_path / "mine.ckpt"
    save_policy(ckpt, policy, meta)
    cmd = ["finetune", "--families", "ptb", "--per-family", "1", "--clusters", "k80x2", "--budget", "20", "--jobs", "1",
           "--checkpoint", str(ckpt), "--out", str(tmp_path / "out")]
    assert bench.main(cmd) == 0 and bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    assert len(json.loads((tmp_path / "out" / "finetune.json").read_text())) == 1  # the same checkpoint: resumed
    save_policy(ckpt, policy, {**meta, "note": "retrained"})
    assert bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    first, second = json.loads((tmp_path / "out" / "finetune.json").read_text())
    assert first["finetune_files"]["checkpoint"] != second["finetune_files"]["checkpoint"]
    assert second["scratch_s"] == first["scratch_s"]  # the search from scratch loads no checkpoint: reused


def test_screen_model_resumes_a_cluster_file(tmp_path, load_script, capsys):
    bench = load_script("bench")
    cmd = ["screen-model", "--families", "ptb", "--clusters", str(ROOT / "configs" / "clusters" / "newkind4.yaml"),
           "--budget", "20", "--jobs", "1", "--out", str(tmp_path)]
    assert bench.main(cmd) == 0 and bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    assert len(json.loads((tmp_path / "screen_model.json").read_text())) == 1
    assert "| all | 1 |" in capsys.readouterr().out


def test_finetune_refuses_an_option_neither_search_takes_in_one_line(tmp_path, load_script, capsys):
    bench = load_script("bench")
    for option in ("finetune.nosuch=1", "scratch.nosuch=1"):
        assert bench.main(["finetune", "-O", option, "--families", "ptb", "--per-family", "1", "--clusters", "k80x2",
                           "--budget", "20", "--jobs", "1", "--out", str(tmp_path)]) == 2
        out, err = capsys.readouterr()
        assert not out and err.startswith("bench: error: placer '") and err.count("\n") == 1, err
        assert "does not take these options: nosuch" in err and not (tmp_path / "finetune.json").exists()


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


def test_screen_model_fine_tunes_each_pair_with_both_screens_on_mismatched_steps(tmp_path, load_script, capsys):
    """Both screens on one pair, timed by the stand-in for real steps; a second run resumes with nothing to do."""
    bench = load_script("bench")
    cmd = ["screen-model", "--families", "ptb", "--clusters", "k80x2", "--budget", "110", "--jobs", "1",
           "--mismatch", "0.3", "0.5", "2", "--out", str(tmp_path)]
    assert bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    out = capsys.readouterr().out
    (row,) = json.loads((tmp_path / "screen_model.json").read_text())
    assert row["mismatch"] == [0.3, 0.5, 2.0] and row["cluster"] == "k80x2"
    for model in ("learned", "simulator"):
        history = row[f"{model}_history"]
        assert 0 < row[f"{model}_final"] <= 1.0 and history[-1][1] == row[f"{model}_final"] and history[-1][0] <= 110
    assert "| family ptb | 1 |" in out and "| all | 1 |" in out
    assert bench.main(cmd) == 0 and len(json.loads((tmp_path / "screen_model.json").read_text())) == 1


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


@pytest.mark.parametrize("bench_name, rows_file", [("finetune", "finetune.json"), ("screen-model", "screen_model.json")])
def test_a_cluster_file_edited_under_the_same_name_runs_its_pairs_again(tmp_path, load_script, capsys, bench_name,
                                                                          rows_file):
    """Rows were found by the cluster's name alone: faster links in the same file reused the old cluster's rows."""
    bench = load_script("bench")
    cluster = tmp_path / "mine.yaml"
    text = (ROOT / "configs" / "clusters" / "newkind4.yaml").read_text()
    cluster.write_text(text)
    cmd = [bench_name, "--families", "ptb", "--per-family", "1", "--clusters", str(cluster), "--budget", "20",
           "--jobs", "1", "--out", str(tmp_path / "out")]
    assert bench.main(cmd) == 0 and bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    assert len(json.loads((tmp_path / "out" / rows_file).read_text())) == 1  # the same file: resumed
    cluster.write_text(text.replace("bandwidth: 240 GB/s", "bandwidth: 24 GB/s"))
    capsys.readouterr()
    assert bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    first, second = json.loads((tmp_path / "out" / rows_file).read_text())
    assert first["cluster"] == second["cluster"] == "newkind4"
    assert first["cluster_fingerprint"] != second["cluster_fingerprint"]
    if bench_name == "finetune":
        assert second["scratch_s"] != first["scratch_s"]  # the search from scratch ran again on the new links
        assert capsys.readouterr().out.count("| ptb_") == 1  # the table shows the new cluster's row alone


def test_noisy_steps_runs_the_search_with_each_confirm_on_known_true_steps_and_resumes(tmp_path, load_script, capsys):
    """Each --confirm on one pair and seed; confirm 2 takes more measurements; a second run has nothing to do."""
    bench = load_script("bench")
    cmd = ["noisy-steps", "--families", "ptb", "--clusters", "k80x2", "--budget", "40", "--seeds", "0", "--jobs", "1",
           "--confirm", "0", "2", "--out", str(tmp_path)]
    assert bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    out = capsys.readouterr().out
    rows = sorted(json.loads((tmp_path / "noisy_steps.json").read_text()), key=lambda r: r["confirm"])
    assert [r["confirm"] for r in rows] == [0, 2] and all(r["sigma"] == 0.12 and r["budget"] == 40 for r in rows)
    assert all(0 < r["search_true"] <= 1.3 for r in rows)  # the search's best, timed truly, beside auto's
    assert rows[1]["measured"] > rows[0]["measured"]  # the first placement at least was measured 3 times
    assert "| 40 | 0 | 1 |" in out and "| 40 | 2 | 1 |" in out
    assert bench.main(cmd) == 0 and len(json.loads((tmp_path / "noisy_steps.json").read_text())) == 2


def test_noisy_steps_draw_around_the_true_step_and_are_cached_as_a_real_timers(load_script):
    bench = load_script("benchmarks.finetune")
    from gnplace.cluster import load_cluster
    from gnplace.toy import mlp_training_graph

    graph, cluster = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2")
    truth = bench.MismatchedSteps(graph, cluster, 0.0, 1.0, 1.0)
    timer = bench.NoisySteps(truth, 0.1, seed=0)
    split = np.arange(graph.num_ops) % 2
    true = truth.time(graph, cluster, split).step_time
    draws = [timer.measure(graph, cluster, split).step_time for _ in range(200)]
    assert len(set(draws)) == 200 and np.median(draws) == pytest.approx(true, rel=0.03)
    assert timer.time(graph, cluster, split) is timer.time(graph, cluster, split) and timer.measured == 201


@pytest.mark.parametrize("argv, message", [(["--sigma", "-1"], "--sigma"), (["--confirm", "-1"], "--confirm"),
                                           (["--mismatch", "11"], "--mismatch")])
def test_noisy_steps_refuses_a_bad_argument_in_one_line(tmp_path, load_script, capsys, argv, message):
    code = load_script("bench").main(["noisy-steps", "--families", "ptb", "--clusters", "k80x2", "--budget", "20",
                                      "--jobs", "1", "--out", str(tmp_path / "o"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("bench: error:") and message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("bench_name, rows_file", [("finetune", "finetune.json"), ("screen-model", "screen_model.json")])
@pytest.mark.parametrize("content", [b"{", b"\xff\xfe", b'{"graph": "ptb_002"}', b"[1, 2]"])
def test_a_rows_file_of_something_else_is_one_error_line(tmp_path, load_script, capsys, bench_name, rows_file, content):
    (tmp_path / rows_file).write_bytes(content)
    code = load_script("bench").main([bench_name, "--families", "ptb", "--per-family", "1", "--clusters", "k80x2",
                                      "--budget", "20", "--jobs", "1", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and not out and err.count("\n") == 1
    assert err.startswith(f"bench: error: {tmp_path / rows_file}: not the rows of an earlier run"), err
    assert (tmp_path / rows_file).read_bytes() == content  # left as it was


@pytest.mark.parametrize("bench_name", ["finetune", "screen-model"])
def test_per_family_zero_runs_every_test_graph_as_search_does(tmp_path, load_script, monkeypatch, bench_name):
    """``--per-family 0`` planned no pair here while ``search --per-family 0`` placed every test graph."""
    finetune = load_script("benchmarks.finetune")
    planned = []
    monkeypatch.setattr(finetune, "add_rows", lambda job, tasks, *rest: planned.extend(t[0] for t in tasks))
    bench = load_script("bench")
    assert bench.main([bench_name, "--families", "ptb", "--per-family", "0", "--clusters", "k80x2", "--budget", "20",
                       "--jobs", "1", "--out", str(tmp_path)]) == 0
    assert [Path(p).name for p in planned] == [Path(p).name for p in finetune.test_graphs("ptb", None)]
    assert len(planned) == 8


def test_finetune_split_val_searches_the_training_graphs_no_shipped_checkpoint_trained_on(tmp_path, load_script,
                                                                                           monkeypatch):
    """``--split val``: the last training graphs of each family, which every shipped pretraining config held out."""
    finetune = load_script("benchmarks.finetune")
    planned = []
    monkeypatch.setattr(finetune, "add_rows", lambda job, tasks, *rest: planned.extend(t[0] for t in tasks))
    bench = load_script("bench")
    assert bench.main(["finetune", "--split", "val", "--families", "ptb", "nmt", "--clusters", "k80x2", "--budget",
                       "20", "--jobs", "1", "--out", str(tmp_path)]) == 0
    assert [Path(p).name for p in planned] == ["ptb_030.gnpg", "ptb_031.gnpg", "nmt_030.gnpg", "nmt_031.gnpg"]
    from gnplace.pretrain import load_pretrain_config, pretrain_pairs

    for config in ("pretrain.yaml", "constructor.yaml", "constructor-cifar10-ptb.yaml"):
        trained = {Path(g).name for g, _ in pretrain_pairs(load_pretrain_config(ROOT / "configs" / config))[0]}
        assert trained and not trained & {Path(p).name for p in planned}
    assert all(e["split"] == "train" for e in json.loads((ROOT / "datasets/ptb/manifest.json").read_text())["graphs"]
               if e["file"] in {"ptb_030.gnpg", "ptb_031.gnpg"})


@pytest.mark.parametrize("bench_name, rows_file", [("finetune", "finetune.json"), ("screen-model", "screen_model.json")])
def test_a_new_revision_of_a_placer_the_searches_use_runs_the_pairs_again(tmp_path, load_script, capsys, monkeypatch,
                                                                          bench_name, rows_file, auto_uses):
    """Rows compared finetune's and ppo's own revisions: m_etf's new one (auto's candidate) reused the old rows."""
    from gnplace.placers.m_etf import METFPlacer
    from gnplace.placers.registry import PLACERS
    from gnplace.rl.search import FineTunePlacer
    from gnplace.rl.zeroshot import PolicyPlacer

    bench = load_script("bench")
    cmd = [bench_name, "--families", "ptb", "--per-family", "1", "--clusters", "k80x2", "--budget", "20",
           "--jobs", "1", "--out", str(tmp_path)]
    assert bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    saved = tmp_path / rows_file
    made = saved.read_text()
    (row,) = json.loads(made)
    candidates = auto_uses  # auto's candidates' revisions of today (2026-11-30: the ETF fix; 2026-12-04: the repair)
    assert row["finetune_uses"] == {**candidates, "policy": "13"}
    assert row.get("scratch_uses") == (candidates if bench_name == "finetune" else None)  # ppo's from scratch
    del row["finetune_uses"]  # a row saved before rows recorded what they used ...
    row.pop("scratch_uses", None)
    saved.write_text(json.dumps([row]))
    with pytest.MonkeyPatch.context() as then:  # ... was made while auto's candidates declared no revision
        for placer in candidates:
            then.setattr(PLACERS.resolve(placer), "revision", "")
        then.setattr(PolicyPlacer, "revision", "12")  # and policy's was 12 (REVISIONS_USED_BEFORE), not pinned
        then.setattr(FineTunePlacer, "uses", ("auto", "policy"))
        assert bench.main(cmd) == 0 and len(json.loads(saved.read_text())) == 1, capsys.readouterr().err[-2000:]
    saved.write_text(made)  # today's row again
    monkeypatch.setattr(METFPlacer, "revision", "4")  # the next one
    capsys.readouterr()
    assert bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    first, second = json.loads(saved.read_text())
    assert second["finetune_uses"] == {**candidates, "m_etf": "4", "policy": "13"}
    monkeypatch.setattr(PolicyPlacer, "revision", "99")  # finetune pins the policy revision whose candidates it uses
    capsys.readouterr()
    assert bench.main(cmd) == 0 and len(json.loads(saved.read_text())) == 2, capsys.readouterr().err[-2000:]
    if bench_name == "finetune":
        assert second["scratch_uses"] == {**candidates, "m_etf": "4"}
        assert second["scratch_s"] != first["scratch_s"]  # searched anew
        assert capsys.readouterr().out.count("| ptb_") == 1  # the new revision's row alone


def _regenerable_family(tmp_path, monkeypatch, load_script):
    """``ptb`` copied to ``tmp_path/ptb`` (manifest and its first test graph), the benches reading it from there."""
    import shutil

    from gnplace.datasets import load_manifest

    common = load_script("benchmarks.common")
    manifest = load_manifest(ROOT / "datasets" / "ptb")
    entry = next(e for e in manifest["graphs"] if e["split"] == "test")
    (tmp_path / "ptb").mkdir()
    (tmp_path / "ptb" / "manifest.json").write_text(json.dumps({**manifest, "graphs": [entry]}))
    shutil.copy(ROOT / "datasets" / "ptb" / entry["file"], tmp_path / "ptb" / entry["file"])
    monkeypatch.setattr(common, "DATASETS", tmp_path)
    return tmp_path / "ptb" / entry["file"]


def _regenerate(path):
    """The graph at ``path`` made again with other costs (the same ops and name)."""
    from gnplace.graph_io import load_graph, save_graph

    graph = load_graph(path)
    save_graph(graph.replace(flops=graph.flops * 2), path)


@pytest.mark.parametrize("bench_name, rows_name", [("finetune", "finetune.json"), ("screen-model", "screen_model.json")])
def test_a_regenerated_graph_runs_its_pairs_again(tmp_path, load_script, monkeypatch, capsys, bench_name, rows_name):
    """Rows were kept by the graph file's stem: a dataset made again was answered with the rows of the old one."""
    bench = load_script("bench")
    graph = _regenerable_family(tmp_path, monkeypatch, load_script)
    cmd = [bench_name, "--families", "ptb", "--clusters", "k80x2", "--budget", "12", "--jobs", "1",
           "--out", str(tmp_path / "out")]
    assert bench.main(cmd) == 0 and bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    assert len(json.loads((tmp_path / "out" / rows_name).read_text())) == 1  # the same file: resumed
    _regenerate(graph)
    capsys.readouterr()
    assert bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    first, second = json.loads((tmp_path / "out" / rows_name).read_text())
    assert first["graph_sha256"] != second["graph_sha256"] and first["ops"] == second["ops"]
    if bench_name == "finetune":
        assert second["scratch_s"] != first["scratch_s"]  # the search from scratch ran again on the new graph too
        assert capsys.readouterr().out.count("| ptb_") == 1  # the table: the new row alone


def test_a_finetune_row_saved_before_rows_recorded_their_graph_stands_on_nothing_but_its_sha256(load_script):
    """Such a row recorded the ops of its graph and nothing else of it: the same ops are no proof of the same file."""
    finetune = load_script("benchmarks.finetune")
    identities = {"ptb_002": "abc"}
    assert not finetune.same_graph({"graph": "ptb_002", "ops": 500}, identities)
    assert not finetune.same_graph({"graph": "ptb_002"}, identities)  # a screen-model row of before: no ops either
    assert finetune.same_graph({"graph": "ptb_002", "ops": 1, "graph_sha256": "abc"}, identities)
    assert not finetune.same_graph({"graph": "ptb_002", "ops": 500, "graph_sha256": "abd"}, identities)
    assert not finetune.same_graph({"graph": "ptb_004", "graph_sha256": "abc"}, identities)


@pytest.mark.parametrize("bench_name, rows_name", [("finetune", "finetune.json"), ("screen-model", "screen_model.json")])
def test_a_row_saved_before_rows_recorded_their_graph_runs_again_on_a_regenerated_graph_of_the_same_ops(
        tmp_path, load_script, monkeypatch, capsys, bench_name, rows_name):
    """A row of before 2026-11-30 stood where its graph's ops were today's: a dataset with other costs passed."""
    bench = load_script("bench")
    graph = _regenerable_family(tmp_path, monkeypatch, load_script)
    cmd = [bench_name, "--families", "ptb", "--clusters", "k80x2", "--budget", "12", "--jobs", "1",
           "--out", str(tmp_path / "out")]
    assert bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    rows_path = tmp_path / "out" / rows_name
    (made,) = json.loads(rows_path.read_text())
    legacy = {k: v for k, v in made.items() if k not in ("graph_sha256", "cluster_fingerprint")}
    legacy["ops"] = made["ops"]  # a screen-model row of before recorded none: the finetune rows' check at its best
    rows_path.write_text(json.dumps([legacy]))
    _regenerate(graph)  # other costs, the same ops and name
    assert bench.main(cmd) == 0, capsys.readouterr().err[-2000:]
    first, second = json.loads(rows_path.read_text())
    assert "graph_sha256" not in first and second["graph_sha256"] != made["graph_sha256"]
    assert first["ops"] == second["ops"]


def test_finetune_summary_leaves_out_the_points_past_the_budget(load_script):
    """``--budget 60`` printed "scratch 100 / 400 / 1,000 / final" columns, each the final, never reached."""
    bench = load_script("benchmarks.finetune")
    rows = [{"family": "ptb", "cluster": "k80x4", "budget": 60, "scratch_history": [[1, 1.0], [50, 0.9]],
             "finetune_history": [[1, 1.0], [20, 0.9]], "scratch_final": 0.9, "finetune_final": 0.9}]
    lines = bench.finetune_summary(rows).splitlines()
    assert lines[0].startswith("| group | pairs | scratch final | finetune final |")
    assert lines[2] == "| cluster k80x4 | 1 | 0.900 | 0.900 | 50 | 20 | 2.5x |"
    rows[0]["budget"] = 400
    assert bench.finetune_summary(rows).splitlines()[0].startswith("| group | pairs | scratch 100 / final | ")


def test_screen_model_summary_leaves_out_the_points_past_the_budget(load_script):
    """``screen-model --budget 60`` printed "learned 100 / 200 / 400 / final" columns, each the final, after
    evaluations no run made (``finetune``'s table already left them out)."""
    bench = load_script("benchmarks.finetune")
    rows = [{"family": "ptb", "cluster": "k80x4", "budget": 60, "learned_history": [[1, 1.0], [50, 0.9]],
             "simulator_history": [[1, 1.0], [20, 0.9]], "learned_final": 0.9, "simulator_final": 0.9}]
    lines = bench.screen_model_summary(rows).splitlines()
    assert lines[0].startswith("| group | pairs | learned final | simulator final |"), lines[0]
    assert lines[2] == "| family ptb | 1 | 0.900 | 0.900 | 20 | 0 / 0 |", lines[2]
    rows[0]["budget"] = 300
    assert bench.screen_model_summary(rows).splitlines()[0].startswith(
        "| group | pairs | learned 100 / 200 / final | simulator 100 / 200 / final |")
