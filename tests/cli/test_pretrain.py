"""``gnplace pretrain`` in-process: a tiny run, and one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gnplace.cli import main
from gnplace.cluster import load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph_io import save_graph
from gnplace.policy.checkpoint import load_policy
from gnplace.pretrain import load_pretrain_config, pretrain
from gnplace.rl.zeroshot import PolicyPlacer
from gnplace.sim.simulator import Simulator
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


def test_pretrain_runs_and_exports(tmp_path, capsys, documented_keys, monkeypatch):
    import gnplace.pretrain

    config = _config(tmp_path)
    export = tmp_path / "shipped" / "p.ckpt"
    real = gnplace.pretrain.pretrain

    def chatty(*args, **kwargs):  # as Lightning or a user's callback writes on stdout during the run
        print("a line of the run's on stdout")
        return real(*args, **kwargs)

    monkeypatch.setattr(gnplace.pretrain, "pretrain", chatty)
    code = main(["pretrain", "--config", str(config), "--out", str(tmp_path / "run"), "--no-progress",
                 "--export", str(export), "--set", "schedule.iterations=3", "--json"])
    assert code == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)  # the JSON alone: it was printed outside --json's guard (no --json at all)
    assert "a line of the run's on stdout" in captured.err
    documented_keys("pretrain-json", report)
    assert report["iterations"] == 3 and export.is_file()
    from gnplace.cli.pretrain import RUN_ENTRIES

    assert {p.name for p in (tmp_path / "run").iterdir()} <= RUN_ENTRIES  # what --export may not name
    # the export is the run's best policy, of the configured shape, and it places a graph zero-shot
    best = Path(report["best"]) if Path(report["best"]).is_file() else Path(report["policy"])
    assert export.read_bytes() == best.read_bytes()
    policy, meta = load_policy(export)
    assert (policy.config.hidden, policy.config.head, policy.config.layers) == (8, 4, 1)
    assert 1 <= meta["iterations"] <= 3
    graph, cluster = mlp_training_graph(layers=2, width=128, batch=16), load_cluster("k80x2")
    placer = PolicyPlacer(export, samples=2)
    placement = placer.place(graph, cluster, seed=0)
    assert placement.devices.shape == (graph.num_ops,) and set(placement.devices.tolist()) <= {0, 1}
    assert placer.last_evaluations > 0 and placer.last_step == Simulator().time(graph, cluster, placement).step_time


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


def test_a_bad_config_is_reported_before_lightning_is_imported(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from gnplace.cli import main\n"
        f"codes = [main(['pretrain', '--config', {str(tmp_path / 'missing.yaml')!r}]),\n"
        "         main(['pretrain', '--set', 'learner.lr=-1']), main(['pretrain', '--set', 'data.colour=red'])]\n"
        "print(codes, 'lightning' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[2, 2, 2] False", result.stderr
    assert result.stderr.splitlines() == [f"gnplace: error: {tmp_path / 'missing.yaml'}: no such config file",
                                          "gnplace: error: learner: need lr > 0, got -1.0",  # (the section unnamed before)
                                          result.stderr.splitlines()[2]]
    assert result.stderr.splitlines()[2].startswith("gnplace: error: pretrain config: unknown key data.colour")


def test_resume_with_nothing_to_resume_says_so_and_starts_a_new_run(tmp_path, capsys):
    config = _config(tmp_path)
    code = main(["pretrain", "--config", str(config), "--out", str(tmp_path / "run"), "--no-progress", "--resume"])
    assert code == 0
    captured = capsys.readouterr()
    assert "--resume: no " in captured.err and "so a new run starts" in captured.err
    lines = captured.out.splitlines()  # without --json, text: it printed the JSON whether asked or not
    assert lines[0].startswith("pretraining done: 2 iterations in ") and not captured.out.lstrip().startswith("{")
    assert lines[1] == f"  policy      {tmp_path / 'run' / 'policy.ckpt'}"
    assert any(line.startswith("  validation  val/") for line in lines)


def test_resume_beside_exported_files_but_no_checkpoint_says_one_thing(tmp_path, capsys):
    """It said "no last.ckpt yet, so a new run starts", then refused the folder for the same reason."""
    config = _config(tmp_path)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "policy.ckpt").write_bytes(b"exported")
    code = main(["pretrain", "--config", str(config), "--out", str(tmp_path / "run"), "--no-progress", "--resume"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "holds policy.ckpt of an earlier run" in err


def test_resume_of_a_run_killed_before_its_first_checkpoint_says_the_run_starts_again(tmp_path, capsys):
    """``--resume`` beside the policy.ckpt and best.ckpt of this config's first validation (a kill came before the
    checkpoint that follows them) started the run again without a word: it read as resumed."""
    config = _config(tmp_path)
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    args = ["pretrain", "--config", str(config), "--no-progress", "--set", "schedule.iterations=1"]
    assert main([*args, "--out", str(whole)]) == 0
    killed.mkdir()
    for name in ("policy.ckpt", "best.ckpt"):  # what the first validation exports, before its checkpoint
        (killed / name).write_bytes((whole / name).read_bytes())
    capsys.readouterr()
    assert main([*args, "--out", str(killed), "--resume"]) == 0
    last = killed / "checkpoints" / "last.ckpt"
    assert f"gnplace pretrain: --resume: no {last} yet, so a new run starts" in capsys.readouterr().err
    assert last.is_file()


def test_an_export_over_the_config_or_the_runs_own_files_is_refused_before_the_run(tmp_path, capsys):
    """``--export`` naming ``--config`` overwrote the user's YAML with a checkpoint once the whole run had ended."""
    config = _config(tmp_path)
    kept = config.read_bytes()
    run = tmp_path / "run"
    # --export --out (or a file in the folders the run makes) ran the whole pretraining, then "run: Is a directory"
    for export in (config, run / "policy.ckpt", run / "best.ckpt", run / "checkpoints" / "last.ckpt", run,
                   run / "logs", run / "checkpoints" / "mine.ckpt", run / "teacher" / "x", run / "ranks",
                   run / ".gnplace.lock"):  # (the lock: the export was removed with it at the end)
        code = main(["pretrain", "--config", str(config), "--out", str(run), "--no-progress", "--export", str(export)])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith(f"gnplace: error: --export {export}: ") and err.count("\n") == 1, err
    assert config.read_bytes() == kept and not run.exists()


def test_an_export_over_a_graph_or_cluster_file_the_run_reads_is_refused_before_the_run(tmp_path, capsys):
    """The run trained, then wrote its checkpoint over a training graph (or the cluster file it read)."""
    config = _config(tmp_path)
    cluster = tmp_path / "two.yaml"
    cluster.write_text("name: two\ndevices:\n  - {name: gpu, count: 2, kind: k80}\nlinks: {default: pcie3}\n")
    graph = tmp_path / "data" / "alpha" / "g1.gnpg"
    kept = {path: path.read_bytes() for path in (graph, cluster)}
    run = tmp_path / "run"
    for export in (graph, cluster):
        code = main(["pretrain", "--config", str(config), "--out", str(run), "--no-progress", "--export", str(export),
                     "--set", f"data.presets=[{cluster}]"])
        assert (code, capsys.readouterr().err) == (
            2, f"gnplace: error: --export {export}: is the input {export.name}; write to another file\n")
    assert {path: path.read_bytes() for path in kept} == kept and not run.exists()


def test_no_devices_nodes_or_jobs_are_refused_by_their_flags(tmp_path, capsys):
    """The library's words were "devices and num_nodes must be >= 1, got 0, 1", naming no flag."""
    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), "--devices", "0"]) == 2
    assert capsys.readouterr().err == "gnplace: error: --devices must be at least 1, got 0\n"
    assert main(["pretrain", "--out", str(out), "--num-nodes", "-1"]) == 2
    assert capsys.readouterr().err == "gnplace: error: --num-nodes must be at least 1, got -1\n"
    assert main(["pretrain", "--out", str(out), "--jobs", "0"]) == 2
    assert capsys.readouterr().err == "gnplace: error: --jobs must be at least 1, got 0\n"
    assert not out.exists()
    # -o and -j as evaluate, generate, finetune and profile spell them (argparse refused both: exit 2, usage)
    assert main(["pretrain", "-o", str(out), "-j", "0"]) == 2
    assert capsys.readouterr().err == "gnplace: error: --jobs must be at least 1, got 0\n"
    assert not out.exists()
    with pytest.raises(InvalidArgument, match="devices, num_nodes and jobs must be >= 1, got 1, 1, 0"):
        pretrain(load_pretrain_config(), out, jobs=0)
    assert not out.exists()


def test_jobs_without_teacher_searches_are_refused_before_the_run(tmp_path, capsys):
    """``--jobs 4`` with the shipped base config (no teacher searches) was taken, and set nothing."""
    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), "--jobs", "2"]) == 2
    assert capsys.readouterr().err == ("gnplace: error: --jobs 2: the processes of the teacher searches, and this "
                                       "config runs none (data.teacher_budget is 0): leave --jobs out\n")
    assert not out.exists()


@pytest.fixture
def no_pretraining(monkeypatch):
    """A pretraining the CLI starts fails at once: a refusal test whose refusal were taken out would otherwise train
    the shipped config (minutes) before failing."""
    import gnplace.pretrain

    def started(*args, **kwargs):
        raise AssertionError("pretraining started where the command line should have been refused")

    monkeypatch.setattr(gnplace.pretrain, "pretrain", started)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "86401"])
def test_a_timeout_that_is_no_wait_is_refused_by_its_flag(tmp_path, capsys, value):
    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), "--timeout", value]) == 2
    assert capsys.readouterr().err == (f"gnplace: error: --timeout must be seconds above 0 and at most 86,400, "
                                       f"got {float(value):g}\n")
    assert not out.exists()
    with pytest.raises(InvalidArgument, match=r"^timeout_s must be a number of seconds above 0 and at most 86,400"):
        pretrain(load_pretrain_config(), out, timeout_s=float(value))
    assert not out.exists()


def test_a_timeout_for_a_run_of_one_process_is_refused(tmp_path, capsys, no_pretraining):
    """--timeout with --devices 1 --num-nodes 1 was taken and waited for nothing."""
    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), "--timeout", "60"]) == 2
    assert capsys.readouterr().err == ("gnplace: error: --timeout 60: how long the processes of a run wait for each "
                                       "other, and this run is one process (--devices 1, --num-nodes 1): leave "
                                       "--timeout out\n")
    assert not out.exists()


@pytest.mark.parametrize(("flags", "error"), [
    (["--set", "schedule.iterations=1", "--set", "schedule.iterations=2"],
     "--set schedule.iterations is given twice, as '1' and '2': give it once"),
    (["--seed", "3", "--set", "learner.seed=4"], "--seed 3 and --set learner.seed=4 differ: give one"),
    # spaces around the key are no part of it, as the config's reader takes it: the second won without a word
    (["--set", "learner.lr=1e-3", "--set", "learner . lr =0.5"],
     "--set learner.lr is given twice, as '1e-3' and '0.5': give it once"),
    (["--seed", "3", "--set", "learner.seed =4"], "--seed 3 and --set learner.seed=4 differ: give one"),
])
def test_a_config_value_given_twice_differently_is_refused(tmp_path, capsys, flags, error, no_pretraining):
    """The last one won without a word (a run of 2 iterations; --seed over --set learner.seed)."""
    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), *flags]) == 2
    assert capsys.readouterr().err == f"gnplace: error: {error}\n"
    assert not out.exists()


def test_a_config_value_given_twice_alike_is_accepted():
    from gnplace.cli.pretrain import _check_overrides_once

    _check_overrides_once(["schedule.iterations=2", "schedule.iterations=2.0 ", "learner.seed=3"], 3)
    # one value as the config reads it, where YAML reads one of them as a string: refused as "given twice" before
    _check_overrides_once(["learner.lr=1e-3", "learner.lr=0.001", "data.families=ptb", "data.families=[ptb]",
                           "learner.seed=3e0"], 3)


def test_several_nodes_with_no_launcher_are_refused_not_a_hang(tmp_path, capsys, monkeypatch):
    """Lightning took 127.0.0.1 for node 0 and waited there for the other nodes (half an hour)."""
    import gnplace.pretrain_config

    for name in ("MASTER_ADDR", "SLURM_NTASKS", "LSB_JOBID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        monkeypatch.delenv(name, raising=False)

    def past_the_flags(*args, **kwargs):
        raise AssertionError("the run went on, to wait for the other nodes")

    monkeypatch.setattr(gnplace.pretrain_config, "load_pretrain_config", past_the_flags)
    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), "--num-nodes", "2"]) == 2
    assert capsys.readouterr().err.startswith("gnplace: error: --num-nodes 2: a run over several machines needs "
                                              "MASTER_ADDR (node 0's address), MASTER_PORT and NODE_RANK set on each")
    assert not out.exists()
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")  # set by the user on each machine: the run goes on
    with pytest.raises(AssertionError, match="went on"):
        main(["pretrain", "--out", str(out), "--num-nodes", "2"])


def test_a_summary_without_a_best_checkpoint_does_not_deny_the_validation_it_shows(capsys):
    """A 2-iteration run (validation every 25) validates at its end, but that validation does not compete for
    best.ckpt: the summary said "best  none: no validation ran" above the line of that validation's figures."""
    from gnplace.cli.pretrain import _print_summary

    _print_summary({"already_done": False, "iterations": 2, "wall_seconds": 20.0, "policy": "out/policy.ckpt",
                    "best": None, "best_validation": None, "validation": {"val/greedy_vs_auto": 0.9949}}, None)
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "  best        none: no validation every schedule.steps_per_epoch iterations ran"
    assert lines[3] == "  validation  val/greedy_vs_auto 0.9949"


def test_the_summary_prints_the_runs_wall_time_as_the_cli_prints_times_and_says_when_it_is_unknown(capsys):
    """It printed "in 20.0 s" by hand where every other time of the CLI is units.format_seconds's, and raised a
    TypeError on the None wall time of a finished run whose checkpoints hold none (pretrain_resume.finished_summary)."""
    from gnplace.cli.pretrain import _print_summary

    summary = {"already_done": False, "iterations": 2, "wall_seconds": 0.04, "policy": "out/policy.ckpt",
               "best": None, "best_validation": None, "validation": {}}
    _print_summary(summary, None)
    assert capsys.readouterr().out.splitlines()[0] == "pretraining done: 2 iterations in 40.000 ms"
    _print_summary({**summary, "iterations": 1}, None)  # "1 iterations"
    assert capsys.readouterr().out.splitlines()[0] == "pretraining done: 1 iteration in 40.000 ms"
    _print_summary({**summary, "already_done": True, "wall_seconds": None}, None)
    assert capsys.readouterr().out.splitlines()[0] == ("pretraining had finished before: nothing trained: 2 iterations "
                                                       "(its wall time is unknown: its checkpoints hold none)")


def test_no_progress_reaches_pretraining(tmp_path, monkeypatch):
    """--no-progress turns off the bar and the lines; without it the run shows a bar on a terminal, else lines."""
    import gnplace.pretrain

    seen = []
    monkeypatch.setattr(gnplace.pretrain, "pretrain", lambda config, out, **kwargs: seen.append(kwargs) or {"rank": 1})
    for extra in ([], ["--no-progress"]):
        assert main(["pretrain", "--config", str(_config(tmp_path)), "-o", str(tmp_path / "run"), *extra]) == 0
    assert seen[0]["progress"] is None and seen[1]["progress"] is False
