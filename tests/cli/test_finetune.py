"""``gnplace finetune`` and ``scripts/finetune.py``: a tiny run, a kill and resume, one-line errors."""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gnplace.cli import main
from gnplace.graph_io import save_graph
from gnplace.toy import layered_graph, mlp_training_graph

ROOT = Path(__file__).resolve().parents[2]


def test_finetune_prints_the_comparison_and_writes_json(tmp_path, capsys, documented_keys):
    graph = save_graph(mlp_training_graph(layers=3, width=128, batch=16), tmp_path / "g.gnpg")
    assert main(["finetune", str(graph), "-c", "k80x2", "--budget", "30", "--samples", "8", "--epochs", "1",
                 "-o", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    assert "fine-tuned" in text and "auto" in text and "round_robin" in text
    # 30 evaluations leave no room for the zero-shot candidates beside a PPO batch: said, with the budget that does
    needed = int(re.search(r"zero-shot +not timed: .* need --budget (\d+) or more", text).group(1))
    assert main(["finetune", str(graph), "-c", "k80x2", "--budget", "30", "--samples", "8", "--epochs", "1",
                 "-o", str(tmp_path / "run"), "--resume", "--json"]) == 0
    captured = capsys.readouterr()
    resumed = json.loads(captured.out)
    documented_keys("finetune-json", resumed)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())  # the same, and the history
    assert set(summary) == {*resumed, "history"}
    documented_keys("placement-file", json.loads((tmp_path / "run" / "placement.json").read_text()))
    assert "a new run starts" not in captured.err  # there was a run to resume
    assert resumed["evaluations"] <= 30 and resumed["zero_shot_s"] is None
    assert resumed["zero_shot_budget_needed"] == needed
    assert main(["finetune", str(graph), "-c", "k80x2", "--budget", str(needed), "--samples", "8", "--epochs", "1",
                 "-o", str(tmp_path / "enough"), "--json", "--resume"]) == 0
    captured = capsys.readouterr()
    enough = json.loads(captured.out)
    assert "--resume: no " in captured.err and "so a new run starts" in captured.err  # nothing there to resume
    assert enough["zero_shot_s"] is not None and enough["zero_shot_budget_needed"] is None


def test_a_folder_holding_a_run_names_the_flag_that_resumes_it(tmp_path, capsys):
    """Rerunning ``gnplace finetune`` into its folder said "resume it", naming no flag: it is ``--resume``."""
    graph = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "last.ckpt").write_bytes(b"an earlier run")
    assert main(["finetune", str(graph), "-c", "k80x2", "--budget", "30", "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.endswith("holds a run already (last.ckpt): resume it (--resume), or use another -o\n"), err
    assert err.count("\n") == 1 and (tmp_path / "run" / "last.ckpt").read_bytes() == b"an earlier run"


def test_a_quarter_of_the_budget_anneals_from_the_searchs_best_unless_polish_says_otherwise(tmp_path, capsys):
    graph = save_graph(layered_graph(120, width=6, seed=2), tmp_path / "g.gnpg")  # more placements than the budget
    base = ["finetune", str(graph), "-c", "k80x4", "--budget", "160", "--samples", "8", "--epochs", "1", "--json"]
    spent = {}
    for polish in (None, "0", "0.5"):
        extra = [] if polish is None else ["--polish", polish]
        assert main(base + extra + ["-o", str(tmp_path / f"run{polish}")]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["evaluations"] <= 160
        spent[polish] = summary["polish_evaluations"]
    assert 40 <= spent[None] < 80 <= spent["0.5"]  # its share, and what the memoised search left
    assert spent["0"] < 40  # only what the search left
    assert main(base + ["--polish", "1", "-o", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error:") and "polish" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()
    from gnplace.cli.finetune import add_arguments
    from gnplace.rl.search import FINETUNE_POLISH

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert f"(default: {FINETUNE_POLISH})" in next(a.help for a in parser._actions if a.dest == "polish")


def test_bad_checkpoint_and_real_timer_on_a_file_exit_2(tmp_path, capsys):
    graph = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"\x00" * 64)
    assert main(["finetune", str(graph), "-c", "k80x2", "--checkpoint", str(bad), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error:") and len(err.strip().splitlines()) == 1
    assert main(["finetune", str(graph), "-c", "k80x2", "--timer", "dist", "-o", str(tmp_path)]) == 2
    assert "MODULE:FACTORY" in capsys.readouterr().err
    assert main(["finetune", str(graph), "-c", "k80x2", "-o", str(bad)]) == 2  # a file where the folder goes
    assert "is a file, expected a folder" in capsys.readouterr().err and bad.read_bytes() == b"\x00" * 64
    assert main(["finetune", str(graph), "-c", "k80x2", "--samples", "1", "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "--samples must be at least 2, got 1" in err and "imitation_steps" not in err  # only what is wrong
    tiny = tmp_path / "tiny.yaml"  # k80x2 with one byte of memory a device: no placement fits
    tiny.write_text("name: tiny\ndevices:\n  - {name: gpu, count: 2, kind: k80, memory: 1}\nlinks:\n  default: pcie3\n")
    assert main(["finetune", str(graph), "-c", str(tiny), "--budget", "20", "-o", str(tmp_path / "tiny_run")]) == 2
    err = capsys.readouterr().err
    assert "fits the memory of" in err and not (tmp_path / "tiny_run").exists()


def test_script_runs_two_rank_fine_tuning(tmp_path, capsys, load_script, cpu_ranks):
    """The script's main in this process (its ranks are processes of their own; the kill tests run it as a script)."""
    assert load_script("finetune").main(
        ["gnplace.execute.examples:tiny", "-c", cpu_ranks(2), "--timer", "dist", "--budget", "12", "--samples", "4",
         "--epochs", "1", "--repeats", "1", "-o", str(tmp_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["timer"] == "dist" and summary["step_time_s"] > 0
    assert (tmp_path / "placement.json").exists()


@pytest.mark.heavy
def test_kill_and_resume(tmp_path, capsys):
    """A ``kill -9`` mid-run leaves a whole checkpoint; ``--resume`` finishes within the budget."""
    import os
    import signal
    import time

    # 20 groups on 4 devices: the search keeps finding new placements, so its budget, not its iterations, ends it
    graph = save_graph(layered_graph(60, seed=1).replace(group=np.arange(60) // 3), tmp_path / "g.gnpg")
    out = tmp_path / "run"
    command = [sys.executable, str(ROOT / "scripts" / "finetune.py"), str(graph), "-c", "k80x4", "--budget", "500",
               "--samples", "8", "--epochs", "1", "--checkpoint-every", "0.2", "-o", str(out), "--json"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (out / "last.ckpt").exists() and time.time() < deadline and process.poll() is None:
        time.sleep(0.1)
    time.sleep(0.5)
    assert process.poll() is None, "the run ended before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert (out / "last.ckpt").exists() and not (out / "summary.json").exists()
    saved = torch.load(out / "last.ckpt", weights_only=True)["gnplace"]["iteration"]  # what the kill left
    assert saved > 0
    # only the killed run needs a process of its own: the others run here, as the script's main would run them
    arguments = ["finetune", *command[2:]]
    capsys.readouterr()
    assert main(arguments + ["--resume"]) == 0
    finished = json.loads(capsys.readouterr().out)
    assert finished["evaluations"] <= 500
    # the resumed run is the run that was not killed: what it had spent before the kill counts against the budget
    # (it once spent the budget anew after the checkpoint), and every best-so-far lands where it did
    assert main(arguments[:arguments.index("-o")] + ["-o", str(tmp_path / "straight"), "--json"]) == 0
    uninterrupted = json.loads(capsys.readouterr().out)
    histories = [json.loads((folder / "summary.json").read_text())["history"] for folder in (out, tmp_path / "straight")]
    assert histories[0] == histories[1]
    assert (finished["evaluations"], finished["step_time_s"]) == (uninterrupted["evaluations"],
                                                                  uninterrupted["step_time_s"])
    newest = max((out / "logs").glob("version_*"), key=lambda v: int(v.name.split("_")[1]))
    with (newest / "metrics.csv").open(newline="") as handle:
        steps = [int(r["step"]) for r in csv.DictReader(handle)]
    assert steps[0] == saved  # the resumed session went on from the checkpoint, not from the start


#: scripts/finetune.py run with a Ctrl-C (SIGINT) sent to itself as its third iteration starts.
_CTRL_C_IN_ITERATION_2 = f"""
import os, runpy, signal, sys
from gnplace.train import PlacementLearner

step = PlacementLearner.training_step


def interrupted(self, *args, **kwargs):
    if self.iteration == 2:
        os.kill(os.getpid(), signal.SIGINT)
    return step(self, *args, **kwargs)


PlacementLearner.training_step = interrupted
sys.argv[0] = {str(ROOT / "scripts" / "finetune.py")!r}
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.heavy
def test_ctrl_c_saves_the_iteration_under_way_and_resume_finishes_the_run(tmp_path, capsys):
    """A first Ctrl-C lets the iteration finish and saves it (no checkpoint was due), then stops with 130.

    The Ctrl-C comes in the third iteration, from the run itself (:data:`_CTRL_C_IN_ITERATION_2`): sent from here a
    second after the logger's folder appeared, it came before training had started on a busy machine (the run
    stopped at once, nothing saved).
    """
    import signal

    graph = save_graph(layered_graph(60, seed=1).replace(group=np.arange(60) // 3), tmp_path / "g.gnpg")
    out = tmp_path / "run"
    script = tmp_path / "interrupted.py"
    script.write_text(_CTRL_C_IN_ITERATION_2)
    command = [sys.executable, str(script), str(graph), "-c", "k80x4", "--budget", "200",
               "--samples", "8", "--epochs", "1", "--checkpoint-every", "3600", "-o", str(out), "--json"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal's
    _, err = process.communicate(timeout=300)
    assert process.returncode == 130, err[-2000:]
    assert "stopping after this iteration, which is saved first" in err and "finetune: interrupted (--resume" in err
    saved = torch.load(out / "last.ckpt", weights_only=True)["gnplace"]["iteration"]
    assert saved > 0 and not (out / "summary.json").exists()
    capsys.readouterr()
    assert main(["finetune", *command[2:], "--resume"]) == 0  # in this process: only the interrupted run needs one
    assert json.loads(capsys.readouterr().out)["evaluations"] == 200


@pytest.mark.heavy
def test_torchrun_launch_rank_0_fine_tunes_and_rank_1_serves(tmp_path, cpu_ranks):
    """Across hosts the ranks are started by torchrun (MASTER_ADDR, RANK, ...): here two on one host."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "tmp").mkdir()  # (a TMPDIR that is not a folder is passed over for /tmp)
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(port),
         str(ROOT / "scripts" / "finetune.py"), "gnplace.execute.examples:tiny", "-c", cpu_ranks(2), "--timer", "dist",
         "--budget", "12", "--samples", "4", "--epochs", "1", "--repeats", "1", "-o", str(tmp_path), "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path / "tmp")},  # torchrun's logs (torchelastic_*) stay under tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["timer"] == "dist"
    # each run left a /tmp/torchelastic_* folder of its ranks' logs, which torchrun never removes
    assert any(p.name.startswith("torchelastic_") for p in (tmp_path / "tmp").iterdir())


def test_resume_into_another_clusters_run_exits_2_and_keeps_it(tmp_path, capsys):
    graph = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    run = ["finetune", str(graph), "--budget", "30", "--samples", "4", "--epochs", "1", "-o", str(tmp_path / "run")]
    assert main(run + ["-c", "k80x2"]) == 0
    capsys.readouterr()
    files = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    assert {"last.ckpt", "placement.json", "summary.json"} <= set(files)
    assert main(run + ["-c", "k80x4", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error:") and len(err.strip().splitlines()) == 1
    assert "run of another cluster" in err and "use another -o" in err
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()} == files


def test_a_screen_below_one_exits_2_before_anything_is_written(tmp_path, capsys):
    graph = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    out = tmp_path / "run"
    assert main(["finetune", str(graph), "-c", "k80x2", "--screen", "0", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == "gnplace: error: --screen must be at least 1, got 0\n" and not out.exists()
    # a screen past what one batch may draw is refused by its flags, also before the folder is made
    assert main(["finetune", str(graph), "-c", "k80x2", "--screen", "100000", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error: --samples x --screen must be at most 16384") and not out.exists()


@pytest.mark.parametrize("flag, value, wanted, default", [("--final-rounds", "0", "at least 1", "FINAL_ROUNDS"),
                                                          ("--confirm", "-1", "at least 0", "CONFIRM")])
def test_a_count_out_of_range_exits_2_before_anything_is_written_and_the_help_says_the_default(
        tmp_path, capsys, flag, value, wanted, default):
    import gnplace.finetune
    from gnplace.cli.finetune import add_arguments

    out, name = tmp_path / "run", flag[2:].replace("-", "_")
    assert main(["finetune", "gnplace.execute.examples:tiny", "-c", "k80x2", "--timer", "local", "--devices",
                 "cpu,cpu", flag, value, "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"gnplace: error: {flag} must be {wanted}, got {value}\n"  # by its flag
    assert not out.exists()
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert f"(default: {getattr(gnplace.finetune, default)})" in next(a.help for a in parser._actions if a.dest == name)


def test_resume_without_a_checkpoint_says_that_the_journal_answers_what_was_measured(tmp_path, capsys):
    # a budget too small for one PPO iteration writes no last.ckpt; auto's candidates were measured and journaled
    out = tmp_path / "run"
    run = ["finetune", "gnplace.execute.examples:tiny", "-c", "k80x2", "--timer", "local", "--devices", "cpu,cpu",
           "--budget", "1", "--repeats", "1", "--final-rounds", "1", "-o", str(out)]
    assert main(run) == 0 and not (out / "last.ckpt").exists() and (out / "measurements.jsonl").exists()
    capsys.readouterr()
    assert main(run + ["--resume"]) == 0
    assert (f"gnplace finetune: --resume: no {out / 'last.ckpt'} yet, so a new run starts, answering the steps "
            f"measured before from {out / 'measurements.jsonl'}") in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--threads", "--repeats", "--final-rounds", "--confirm"])
def test_a_real_timers_option_with_the_simulator_exits_2_before_anything_is_written(tmp_path, capsys, flag):
    """Each was taken and did nothing (the simulator is exact), while --devices was refused."""
    graph = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    out = tmp_path / "run"
    assert main(["finetune", str(graph), "-c", "k80x2", flag, "2", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (f"gnplace: error: {flag} is for the real timers (--timer local|dist); the "
                                       "simulator is exact and times each placement once\n")
    assert not out.exists()


@pytest.mark.parametrize("timer", ["sim", "dist"])
def test_devices_with_another_timer_than_local_is_refused_by_its_flag(tmp_path, capsys, timer):
    """The library's words named no flag: "devices name the torch devices of the local timer; the sim timer takes
    none"."""
    source = "gnplace.execute.examples:tiny" if timer == "dist" else str(
        save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg"))
    out = tmp_path / "run"
    assert main(["finetune", source, "-c", "k80x2", "--timer", timer, "--devices", "cpu,cpu", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gnplace: error: --devices is for the local timer (--timer local); the {timer} timer "
                          "takes none") and len(err.splitlines()) == 1
    assert not out.exists()


def test_the_dist_timer_on_a_gpu_cluster_exits_2_before_anything_is_written(tmp_path, capsys):
    """Its gloo ranks are CPUs: fine-tuning k80x2 on them timed CPU steps under the K80s' names and memory."""
    out = tmp_path / "run"
    code = main(["finetune", "gnplace.execute.examples:tiny", "-c", "k80x2", "--timer", "dist", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("gnplace: error: the distributed timer runs CPU ranks (gloo), but device "
                                        "'gpu0' of cluster 'k80x2' is a GPU") and not out.exists()
    assert len(err.strip().splitlines()) == 1


def test_more_ranks_than_cores_exits_2_before_anything_is_written(tmp_path, capsys, monkeypatch, cpu_ranks):
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    out = tmp_path / "run"
    code = main(["finetune", "gnplace.execute.examples:tiny", "-c", cpu_ranks(4), "--timer", "dist", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("gnplace: error: 4 ranks of 1 thread(s) need 4 cores") and not out.exists()


def test_local_devices_that_do_not_match_the_cluster_exit_2_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "run"
    for devices, message in (("cpu", "1 torch device given for the 2 devices of 'k80x2'"),
                             ("cuda:99,cpu", "cluster device 'gpu0' runs on cuda:99, but torch sees")):
        code = main(["finetune", "gnplace.execute.examples:tiny", "-c", "k80x2", "--timer", "local", "--devices",
                     devices, "-o", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith(f"gnplace: error: {message}") and not out.exists()


def test_a_simulator_screen_with_the_simulator_timer_exits_2_before_anything_is_written(tmp_path, capsys):
    graph = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    out = tmp_path / "run"
    assert main(["finetune", str(graph), "-c", "k80x2", "--screen-model", "simulator", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error: the simulator screen ranks a real timer's candidates") and err.count("\n") == 1
    assert not out.exists()


def test_a_screen_model_without_a_screen_exits_2_before_anything_is_written(tmp_path, capsys):
    """``--screen 1 --screen-model learned`` ran, and the model chose nothing: no screen, every sample timed."""
    graph = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    out = tmp_path / "run"
    assert main(["finetune", str(graph), "-c", "k80x2", "--screen", "1", "--screen-model", "learned", "-o",
                 str(out)]) == 2
    err = capsys.readouterr().err
    assert err == ("gnplace: error: --screen-model learned is what the screen starts from, and --screen 1 screens "
                   "nothing (every sample is timed): leave --screen-model out, or raise --screen\n")
    assert not out.exists()


@pytest.mark.parametrize("value", ["1", "1.5", "-0.1", "nan", "inf"])
def test_a_polish_share_out_of_range_is_refused_by_its_flag(tmp_path, capsys, value):
    """The fine-tuner's words were "FineTunePlacer: polish and prelude must be in [0, 1) ...", naming no flag."""
    graph = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    out = tmp_path / "run"
    assert main(["finetune", str(graph), "-c", "k80x2", "--polish", value, "-o", str(out)]) == 2
    assert capsys.readouterr().err == (f"gnplace: error: --polish must be a share of the budget in [0, 1), got "
                                       f"{float(value)}\n")
    assert not out.exists()


def test_a_budget_past_the_limit_exits_2_before_anything_is_written(tmp_path, capsys):
    """It was Lightning's OverflowError (the epoch's length is an index-sized integer), after the logs were made."""
    graph = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    out = tmp_path / "run"
    assert main(["finetune", str(graph), "-c", "k80x2", "--budget", str(10**20), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"gnplace: error: --budget must be at most 1000000000, got {10**20}\n"  # by its flag, as in place
    assert not out.exists()
    for budget in ("0", "-1"):  # "FineTunePlacer needs a budget >= 1 (...)", naming a class
        assert main(["finetune", str(graph), "-c", "k80x2", "--budget", budget, "-o", str(out)]) == 2
        assert capsys.readouterr().err == f"gnplace: error: --budget must be at least 1, got {budget}\n"
        assert not out.exists()


def test_the_optimizer_given_reaches_fine_tuning(tmp_path, monkeypatch):
    """``--optimizer`` had no way to fine-tuning's import of the model: every model was imported with SGD."""
    import gnplace.finetune

    seen = []
    monkeypatch.setattr(gnplace.finetune, "finetune", lambda source, cluster, **kwargs: seen.append(kwargs) or None)
    for extra in ([], ["--optimizer", "adamw"]):
        assert main(["finetune", "gnplace.execute.examples:tiny", "-c", "k80x2", "--timer", "local",
                     "-o", str(tmp_path / "run"), *extra]) == 0
    assert seen[0].get("optimizer") is None and seen[1]["optimizer"] == "adamw"  # none given: the source's own


def test_no_progress_reaches_fine_tuning(tmp_path, monkeypatch):
    """The README offers --no-progress for fine-tuning's bar and lines; the command refused the flag."""
    import gnplace.finetune

    seen = []
    monkeypatch.setattr(gnplace.finetune, "finetune", lambda source, cluster, **kwargs: seen.append(kwargs) or None)
    for extra in ([], ["--no-progress"]):
        assert main(["finetune", "gnplace.execute.examples:tiny", "-c", "k80x2", "-o", str(tmp_path / "run"),
                     *extra]) == 0
    assert seen[0]["progress"] is None and seen[1]["progress"] is False  # None: a bar on a terminal, else lines


def test_a_run_stopped_in_its_last_batch_resumes_to_the_run_that_was_not_stopped(tmp_path, capsys, monkeypatch):
    """The stop saved the last batch before the budget check could end training: the resumed run ran one batch more,
    past its budget (every resume refused: "timing 15 more placement(s) would exceed the budget")."""
    import os
    import signal

    from gnplace.sim.timer import BudgetedTimer

    graph = ROOT / "datasets" / "cifar10" / "cifar10_002.gnpg"  # its next batch has more new placements than fit
    command = ["finetune", str(graph), "-c", "k80x4", "--budget", "40", "--samples", "16", "--polish", "0",
               "--no-zero-shot", "--json"]
    time_batch, batches = BudgetedTimer.time_batch, []

    def spy(self, graph, cluster, placements):
        if self.budget is not None and len(placements) > 1:  # a batch of the search's samples
            batches.append(self.evaluations)
        return time_batch(self, graph, cluster, placements)

    monkeypatch.setattr(BudgetedTimer, "time_batch", spy)
    assert main([*command, "-o", str(tmp_path / "whole")]) == 0
    whole, last = json.loads(capsys.readouterr().out), max(batches)  # where the last batch started
    sent: list[None] = []

    def stopped_in_the_last_batch(self, graph, cluster, placements):
        if not sent and self.budget is not None and self.evaluations >= last:
            sent.append(os.kill(os.getpid(), signal.SIGTERM))  # a first SIGTERM: the batch ends and is saved
        return time_batch(self, graph, cluster, placements)

    monkeypatch.setattr(BudgetedTimer, "time_batch", stopped_in_the_last_batch)
    assert main([*command, "-o", str(tmp_path / "run")]) == 143 and sent
    monkeypatch.setattr(BudgetedTimer, "time_batch", time_batch)
    capsys.readouterr()
    assert main([*command, "-o", str(tmp_path / "run"), "--resume"]) == 0, capsys.readouterr().err
    resumed = json.loads(capsys.readouterr().out)
    for key in ("evaluations", "step_time_s"):
        assert resumed[key] == whole[key], key


@pytest.mark.parametrize("name", ["placement.json", "summary.json", "last.ckpt"])
def test_an_input_kept_in_out_under_an_output_name_is_refused_not_overwritten(tmp_path, capsys, name):
    """``finetune OUT/placement.json -o OUT --resume`` replaced the input graph with a placement."""
    source = Path(__file__).resolve().parents[2] / "datasets" / "examples" / "mlp2x8w2048b512.gnpg"
    graph = tmp_path / name
    graph.write_bytes(source.read_bytes())
    code = main(["finetune", str(graph), "-c", "k80x2", "--budget", "20", "-o", str(tmp_path), "--resume"])
    err = capsys.readouterr().err
    assert code == 2 and err.endswith(f"--out {graph}: is the input {name}; write to another file\n"), err
    assert graph.read_bytes() == source.read_bytes() and sorted(p.name for p in tmp_path.iterdir()) == [name]


def _dynamic_onnx(path: Path) -> Path:
    """``x @ w + b`` with a dynamic batch ``N``, saved to ``path``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.ones((4, 3), dtype=np.float32), "w"),
             numpy_helper.from_array(np.ones(3, dtype=np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_an_onnx_model_with_dynamic_sizes_is_fine_tuned_with_input_shape(tmp_path, capsys):
    """The error asked for ``--input-shape x=N,4``, which finetune did not take ("unrecognized arguments")."""
    model = _dynamic_onnx(tmp_path / "tiny.onnx")
    assert main(["finetune", str(model), "-c", "k80x2", "--budget", "4", "--no-progress", "--input-shape", "x=2,4",
                 "-o", str(tmp_path / "run"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["graph"] == "tiny"
    assert main(["finetune", "gnplace.execute.examples:mlp", "-c", "cpu_gpu", "--timer", "local", "--input-shape",
                 "x=2,4", "-o", str(tmp_path / "real")]) == 2  # a real step runs the factory's own inputs
    assert "input shapes (--input-shape) apply to ONNX models only" in capsys.readouterr().err
    assert not (tmp_path / "real").exists()


@pytest.mark.parametrize(("flags", "message"), [
    (["--samples", "1"], "--samples must be at least 2, got 1"),  # was "need samples >= 2, got 1"
    (["--epochs", "0"], "--epochs must be at least 1, got 0"),  # "need epochs >= 1, got 0"
    (["--screen", "0"], "--screen must be at least 1, got 0"),  # "screen must be a whole number >= 1, got 0"
    (["--lr", "nan"], "--lr must be a finite number > 0, got nan"),  # "need lr > 0, got nan"
    (["--checkpoint-every", "0"], "--checkpoint-every must be a positive number of seconds, got 0.0"),
    # above the most it takes too: "need epochs <= 1000, got 1001", "need samples x screen <= 16384, got 16400",
    # "lr must be a finite number within float32's range (+-3.4e38), got 1e+39"
    (["--epochs", "1001"], "--epochs must be at most 1000, got 1001"),
    (["--samples", "16400", "--screen", "1"], "--samples must be at most 16384, got 16400"),
    (["--samples", "400"], "--samples x --screen must be at most 16384 (placements drawn in one batch), "
                           "got 400 x 48 = 19200"),
    (["--screen", "1025"], "--samples x --screen must be at most 16384 (placements drawn in one batch), "
                           "got 16 x 1025 = 16400"),
    (["--lr", "1e39"], "--lr must be within float32's range (1.2e-38 to 3.4e+38), got 1e+39"),
    (["--lr", "1e-50"], "--lr must be within float32's range (1.2e-38 to 3.4e+38), got 1e-50"),
])
def test_a_search_setting_out_of_range_is_refused_by_its_flag(tmp_path, capsys, flags, message):
    """The library's words named its arguments (samples, checkpoint_every_s), not the flags given."""
    graph = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    assert main(["finetune", str(graph), "-c", "k80x2", *flags, "-o", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == f"gnplace: error: {message}\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("flags", "message"), [
    (["--repeats", "0"], "--repeats must be at least 1, got 0"),  # was "repeats must be a whole number >= 1, got 0"
    (["--repeats", "10001"], "--repeats must be at most 10000, got 10001"),  # "need warmup and repeats <= 10,000"
    (["--threads", "0"], "--threads must be at least 1, got 0"),  # "threads must be a whole number >= 1, got 0"
    (["--threads", "3"], "--threads must be at most 2, got 3"),  # the cores here (2, patched)
    (["--final-rounds", "0"], "--final-rounds must be at least 1, got 0"),  # "final_rounds must be ... >= 1"
    (["--confirm", "-1"], "--confirm must be at least 0, got -1"),  # "confirm must be a whole number >= 0"
])
@pytest.mark.parametrize("timer", ["local", "dist"])
@pytest.mark.parametrize("command", ["gnplace", "script"])
def test_a_real_timer_setting_out_of_range_is_refused_by_its_flag(tmp_path, capsys, monkeypatch, load_script, flags,
                                                                   message, timer, command):
    """The library refused them later, once the model was traced, in its own words naming no flag."""
    import gnplace.importers.sources
    import gnplace.workers

    def traced(*args, **kwargs):
        raise AssertionError("the model was loaded before the flags were checked")

    monkeypatch.setattr(gnplace.workers, "available_cores", lambda: 2)
    monkeypatch.setattr(gnplace.importers.sources, "load_step_source", traced)
    argv = ["gnplace.execute.examples:tiny", "-c", "k80x2", "--timer", timer, *flags, "-o", str(tmp_path / "run")]
    if command == "gnplace":
        assert main(["finetune", *argv]) == 2
        assert capsys.readouterr().err == f"gnplace: error: {message}\n"
    else:
        assert load_script("finetune").main(argv) == 2
        assert capsys.readouterr().err == f"finetune: error: {message}\n"
    assert not (tmp_path / "run").exists()


def test_the_summary_prints_the_runs_seconds_in_the_unit_that_fits(capsys):
    """The header printed the run's seconds by hand, "in 0.0 s" for a 40 ms run, where every other time of the
    CLI is units.format_seconds's ("40.000 ms")."""
    from gnplace.cli.finetune import _print_summary

    times = {f"{name}_s": 0.012 for name in ("auto", "single", "round_robin")}
    summary = {"graph": "g", "ops": 3, "cluster": "k80x2", "timer": "sim", "evaluations": 30, "polish_evaluations": 7,
               "seconds": 0.04, "step_time_s": 0.01, "oom": False, "final_rounds_s": {"search": [0.01]},
               "chosen": "search", "zero_shot_s": None, "zero_shot_budget_needed": None, "placement": "p.json",
               **times, **{f"{name}_oom": False for name in ("auto", "single", "round_robin")}}
    _print_summary(summary)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith("(7 of them annealing from the search's best) in 40.000 ms"), first
    _print_summary({**summary, "seconds": 3600.0})
    assert capsys.readouterr().out.splitlines()[0].endswith(" in 3600.000 s")
    _print_summary({**summary, "evaluations": 1, "polish_evaluations": 0})  # "1 evaluations (0 of them annealing"
    assert capsys.readouterr().out.splitlines()[0].endswith("timer sim, 1 evaluation in 40.000 ms")
    _print_summary({**summary, "ops": 1})  # "g (1 ops) on"
    assert capsys.readouterr().out.startswith("g (1 op) on k80x2, timer sim, 30 evaluations (7 of")


@pytest.mark.heavy
def test_a_rank_0_that_refuses_the_cluster_tells_the_ranks_on_other_hosts_at_once(two_hosts):
    """``finetune --timer dist -c k80x2`` under torchrun: rank 0 refused the GPU cluster (gloo ranks are CPUs) after
    the others went to serve it, and each of those, on its own host, waited GNPLACE_DIST_TIMEOUT (300 s) before it
    stopped. Now they stop at once, naming rank 0's error (here two processes given torchrun's variables by hand)."""
    codes, errors, seconds = two_hosts(["finetune", "gnplace.execute.examples:tiny", "-c", "k80x2", "--timer", "dist",
                                        "--budget", "4"])
    assert codes == [2, 2] and seconds < 100  # not the 200 s timeout
    said = errors[1].strip().splitlines()[-1]
    assert said.startswith("gnplace: error: ") and "CPU" in said, errors[1]
    assert errors[0].strip().splitlines()[-1] == ("gnplace: error: rank 1: rank 0 stopped before timing anything: "
                                                  + said.removeprefix("gnplace: error: ")), errors[0]


def test_the_summary_says_which_placement_won_the_race_and_which_ran_out_of_memory(capsys):
    """Where the search's best lost the race, the text says to which placement and whether it fit; a zero-shot
    placement over memory is flagged as the others are."""
    from gnplace.cli.finetune import _print_summary

    times = {f"{name}_s": 0.012 for name in ("auto", "single", "round_robin")}
    summary = {"graph": "g", "ops": 3, "cluster": "k80x2", "timer": "local", "evaluations": 30,
               "polish_evaluations": 0, "seconds": 0.04, "step_time_s": 0.01, "oom": False,
               "final_rounds_s": {"search": [0.02] * 3}, "chosen": "search_2", "search_step_s": 0.02,
               "search_oom": True, "zero_shot_s": 0.03, "zero_shot_oom": True, "zero_shot_budget_needed": None,
               "placement": "p.json", **times, **{f"{name}_oom": False for name in ("auto", "single", "round_robin")}}
    _print_summary(summary)
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == ("  (the search's best measured 20.000 ms afresh (median of 3 rounds) (OOM), slower than the "
                        "search's next fastest placement, which is returned)")
    assert lines[3].startswith("  zero-shot ") and lines[3].endswith("30.000 ms  (OOM)  (a candidate; the search "
                                                                      "starts from auto)")
    _print_summary({**summary, "chosen": "auto", "search_oom": False})
    assert capsys.readouterr().out.splitlines()[2] == (
        "  (the search's best measured 20.000 ms afresh (median of 3 rounds), slower than auto's placement, which is "
        "returned)")
