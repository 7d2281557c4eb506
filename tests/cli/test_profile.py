"""``gnplace profile``: calibration on two ranks, and one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gnplace.cli import main
from gnplace.cluster import load_cluster


@pytest.mark.heavy
def test_profile_writes_cluster_graph_and_the_simulator_error(tmp_path, capsys, documented_keys):
    out = tmp_path / "prof"
    assert main(["profile", "gnplace.execute.examples:tiny", "--placements", "3", "--repeats", "2",
                 "--rounds", "2", "--anchor-rounds", "2", "--probe-rounds", "1", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "median absolute error" in text and "link rank0-rank1" in text
    report = json.loads((out / "fidelity.json").read_text())
    assert (out / "fidelity.json").read_text().endswith("}\n")  # its last line ends, as the cluster file's
    documented_keys("profile-json", report)
    rows = report["placements"]
    assert len(rows) == 3
    for row in rows:  # each error is the relative gap between the simulated and the measured step
        assert row["measured_s"] > 0 and row["simulated_s"] > 0
        assert len(row["rounds_s"]) == 2 and row["measured_s"] == pytest.approx(np.median(row["rounds_s"]))
        assert row["error"] == pytest.approx(abs(row["simulated_s"] - row["measured_s"]) / row["measured_s"])
    assert report["median_abs_error"] == pytest.approx(float(np.median([row["error"] for row in rows])))
    assert f"median absolute error of the simulator: {report['median_abs_error']:.1%}" in text
    assert load_cluster(out / "cluster.yaml").num_devices == 2
    assert not any(row["name"].startswith("single") for row in rows)  # calibration is scaled to those
    assert set(report["one_device_scale"]) == {"cpu-1t"} and "cpu-1t: the one-device step measured" in text


def test_profile_of_one_device_says_nothing_splits(tmp_path, capsys):
    out = tmp_path / "one"
    assert main(["profile", "gnplace.execute.examples:tiny", "--timer", "local", "--devices", "cpu",
                 "--placements", "3", "--repeats", "2", "-o", str(out)]) == 0
    assert "no placement splits this step" in capsys.readouterr().out
    assert json.loads((out / "fidelity.json").read_text())["median_abs_error"] is None


def test_placements_out_of_memory_do_not_count_as_simulated_exactly(tmp_path, capsys, monkeypatch):
    """An OOM step is not timed: its "measured" step is the simulator's estimate, an error of 0 that is no error."""
    import gnplace.execute.profile as profile

    monkeypatch.setattr(profile, "_device_rates", lambda device, threads: (1e10, 1e10, 1024.0))  # 1 KiB each
    out = tmp_path / "small"
    assert main(["profile", "gnplace.execute.examples:tiny", "--timer", "local", "--devices", "cpu,cpu",
                 "--placements", "2", "--repeats", "1", "--rounds", "1", "--anchor-rounds", "1", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    report = json.loads((out / "fidelity.json").read_text())
    assert report["placements"] and all(row["oom"] for row in report["placements"])
    # nothing measured says so in every field: it wrote the estimate as measured_s beside an error of 0.0
    assert [(r["measured_s"], r["rounds_s"], r["error"]) for r in report["placements"]] == [(None, [None], None)] * 2
    assert report["median_abs_error"] is None
    assert "every checked placement ran out of memory" in text and "median absolute error" not in text


def test_a_check_that_fails_leaves_no_earlier_runs_fidelity_beside_the_new_calibration(tmp_path, capsys,
                                                                                       monkeypatch):
    """Interrupted after the new graph and cluster were saved, a re-profile kept the old fidelity.json, whose errors,
    scale and links describe another calibration."""
    import gnplace.execute.profile as profile

    out = tmp_path / "prof"
    argv = ["profile", "gnplace.execute.examples:tiny", "--timer", "local", "--devices", "cpu,cpu", "--placements",
            "2", "--repeats", "1", "--rounds", "1", "--anchor-rounds", "1", "-o", str(out)]
    assert main(argv) == 0 and (out / "fidelity.json").exists()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(profile, "simulator_error", interrupted)
    assert main(argv) == 130  # "gnplace: interrupted"
    assert (out / "graph.gnpg").exists() and (out / "cluster.yaml").exists() and not (out / "fidelity.json").exists()


@pytest.mark.parametrize("argv, message", [
    (["--timer", "dist", "--devices", "cuda:0,cpu"], "--devices is for --timer local"),  # were ignored: two CPU ranks
    (["--timer", "local", "--ranks", "4"], "--ranks is for --timer dist"),
])
def test_an_option_of_the_other_timer_is_one_error(tmp_path, capsys, argv, message):
    assert main(["profile", "gnplace.execute.examples:tiny", *argv, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_profile_needs_a_factory(tmp_path, capsys):
    assert main(["profile", "datasets/examples/mlp2x8w2048b512.gnpg", "-o", str(tmp_path)]) == 2
    assert "MODULE:FACTORY" in capsys.readouterr().err
    assert main(["profile", "no_such_module:f", "-o", str(tmp_path)]) == 2


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--rounds", "0", "--rounds must be at least 1, got 0"),  # one message named all six flags, whichever was wrong
    ("--anchor-rounds", "0", "--anchor-rounds must be at least 1, got 0"),
    ("--probe-rounds", "0", "--probe-rounds must be at least 1, got 0"),
    ("--repeats", "0", "--repeats must be at least 1, got 0"),
    ("--ranks", "0", "--ranks must be at least 1, got 0"),
    ("--threads", "0", "--threads must be at least 1, got 0"),
    ("--repeats", "10001", "--repeats must be at most 10000, got 10001"),  # "need warmup and repeats <= 10,000 ..."
    ("--threads", "3", "--threads must be at most 2, got 3"),  # "threads must be a whole number from 1 to 2 ..."
])
def test_profile_refuses_a_measurement_setting_out_of_range_by_its_flag(tmp_path, capsys, monkeypatch, flag, value,
                                                                        message):
    import gnplace.workers

    monkeypatch.setattr(gnplace.workers, "available_cores", lambda: 2)
    assert main(["profile", "gnplace.execute.examples:tiny", flag, value, "-o", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err == f"gnplace: error: {message}\n"
    assert not (tmp_path / "x").exists()


def test_profile_imports_the_model_with_the_optimizer_given_and_times_its_update(tmp_path, capsys, monkeypatch):
    """The factory was always imported with SGD: an Adam model's update nodes were calibrated with SGD's update."""
    from gnplace.execute.optim import OptimizerState, graph_optimizer
    from gnplace.graph_io import load_graph

    timed = []
    update = OptimizerState.update

    def spy(self, name, param, grad, lr):
        timed.append(self.optimizer)
        update(self, name, param, grad, lr)

    monkeypatch.setattr(OptimizerState, "update", spy)
    out = tmp_path / "adam"
    assert main(["profile", "gnplace.execute.examples:tiny", "--optimizer", "adam", "--timer", "local",
                 "--devices", "cpu", "--placements", "0", "--repeats", "1", "--anchor-rounds", "1", "-o", str(out)]) == 0
    assert graph_optimizer(load_graph(out / "graph.gnpg")) == "adam"
    assert timed and set(timed) == {"adam"}  # the update nodes' seconds and the anchoring steps ran Adam's update
    with pytest.raises(SystemExit) as info:
        main(["profile", "gnplace.execute.examples:tiny", "--optimizer", "lion", "-o", str(tmp_path / "x")])
    assert info.value.code == 2 and "invalid choice: 'lion'" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--timer", "local", "--devices", "cpu", "--probe-rounds", "3"], "--probe-rounds is for --timer dist"),
    (["--placements", "0", "--rounds", "9"], "--rounds measures each placement --placements checks"),
])
def test_profile_refuses_rounds_it_would_not_run(tmp_path, capsys, flags, message):
    """Both were accepted and ignored (exit 0): local has no probes, and no placement is measured with 0."""
    assert main(["profile", "gnplace.execute.examples:tiny", *flags, "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and not (tmp_path / "x").exists()


@pytest.mark.parametrize("command", [["profile", "gnplace.execute.examples:mlp", "--timer", "local"],
                                     ["finetune", "datasets/examples/mlp1x8w6144b256.gnpg", "-c", "k80x2"]])
@pytest.mark.parametrize("devices", ["", " "])
def test_an_empty_devices_list_is_refused_not_read_as_the_default(tmp_path, capsys, command, devices):
    """``--devices ""`` (an unset variable) was no --devices: profile timed its default devices, exit 0."""
    with pytest.raises(SystemExit) as stop:
        main([*command, "--devices", devices, "-o", str(tmp_path / "out")])
    assert stop.value.code == 2
    assert f"argument --devices: expected torch devices separated by commas, e.g. cuda:0,cpu, got {devices!r}" in \
        capsys.readouterr().err
    assert not (tmp_path / "out").exists()


HOLD = """
import sys, time
from gnplace.runlock import folder_lock
with folder_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_folder_another_profile_writes_into_is_refused(tmp_path, capsys):
    """Two profiles into one folder (out/profile, the default) left one model's graph.gnpg and cluster.yaml beside
    the fidelity.json of the other's check, both exiting 0. The second is refused in one line, writing nothing."""
    import subprocess
    import sys

    pytest.importorskip("fcntl")
    from gnplace.runlock import LOCK_NAME

    out = tmp_path / "prof"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert main(["profile", "gnplace.execute.examples:tiny", "--timer", "local", "--devices", "cpu,cpu",
                     "--placements", "0", "--repeats", "1", "--anchor-rounds", "1", "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err == f"gnplace: error: --out {out}: another gnplace run is writing into this folder (it holds " \
                      f"{LOCK_NAME}): wait for it to end, or use another folder\n"
        assert [p.name for p in out.iterdir()] == [LOCK_NAME]
    finally:
        holder.kill()
        holder.wait()


def test_an_output_linked_out_of_the_folder_is_refused_before_measuring(tmp_path, capsys):
    """A shared profile folder's cluster.yaml linked to a file elsewhere had the calibrated cluster written over it."""
    outside = tmp_path / "notes.yaml"
    outside.write_text("mine")
    out = tmp_path / "prof"
    out.mkdir()
    (out / "cluster.yaml").symlink_to(outside)
    assert main(["profile", "gnplace.execute.examples:tiny", "--placements", "0", "--repeats", "1",
                 "--timer", "local", "--devices", "cpu,cpu", "-o", str(out)]) == 2
    assert "cluster.yaml: is a symbolic link" in capsys.readouterr().err
    assert outside.read_text() == "mine" and sorted(p.name for p in out.iterdir()) == ["cluster.yaml"]


@pytest.mark.parametrize("name", ["graph.gnpg", "cluster.yaml", "fidelity.json"])
def test_a_folder_in_place_of_an_output_file_is_refused_before_measuring(tmp_path, capsys, monkeypatch, name):
    """OUT/graph.gnpg (or cluster.yaml, fidelity.json) a folder: 'cannot write OUT/graph.gnpg: Is a directory' once
    every op and link had been measured (minutes on real devices), where evaluate refuses its outputs first."""
    import gnplace.execute.profile

    def measured(*args, **kwargs):
        raise AssertionError("measured before the outputs were checked")

    monkeypatch.setattr(gnplace.execute.profile, "calibrate", measured)
    out = tmp_path / "prof"
    (out / name).mkdir(parents=True)
    assert main(["profile", "gnplace.execute.examples:tiny", "--placements", "0", "--repeats", "1",
                 "--timer", "local", "--devices", "cpu,cpu", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"gnplace: error: --out {out / name}: is a folder, expected a file\n", err
    assert sorted(p.name for p in out.iterdir()) == [name]


@pytest.mark.heavy
def test_torchrun_launch_rank_0_profiles_and_rank_1_serves(tmp_path):
    """Across hosts torchrun starts the ranks: rank 1 refused ('torchrun started 2 processes (this is rank 1)') and
    rank 0 waited for it until killed. Here two on one host."""
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "tmp").mkdir()
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(port),
         "-m", "gnplace", "profile", "gnplace.execute.examples:tiny", "--timer", "dist", "--placements", "1",
         "--rounds", "1", "--probe-rounds", "1", "--anchor-rounds", "1", "-o", str(tmp_path / "out"), "--json"],
        capture_output=True, text=True, cwd=root, timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path / "tmp"),
             "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert list(report["links"]) == ["rank0-rank1"] and len(report["placements"]) == 1
    assert load_cluster(tmp_path / "out" / "cluster.yaml").num_devices == 2


@pytest.mark.heavy
def test_a_rank_0_that_refuses_the_model_tells_the_ranks_on_other_hosts_at_once(two_hosts):
    """The ranks > 0 serve once the settings pass, before the model is loaded; rank 0 then refused the model (a
    factory its module lacks) and exited, and a rank started on another host (here: another process given torchrun's
    variables by hand, with its own folder) waited GNPLACE_DIST_TIMEOUT before it stopped. Now it stops at once,
    naming rank 0's error."""
    codes, errors, seconds = two_hosts(["profile", "gnplace.execute.examples:no_such_model", "--timer", "dist"])
    assert codes == [2, 2] and seconds < 100  # not the 200 s timeout
    said = errors[1].strip()
    assert said.startswith("gnplace: error: ") and said.count("\n") == 0, errors[1]
    assert errors[0].strip() == ("gnplace: error: rank 1: rank 0 stopped before timing anything: "
                                 + said.removeprefix("gnplace: error: ")), errors[0]
    assert "no_such_model" in said


def test_under_torchrun_ranks_other_than_its_count_are_refused_on_every_rank(tmp_path, capsys, monkeypatch):
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert main(["profile", "gnplace.execute.examples:tiny", "--timer", "dist", "--ranks", "3",
                     "-o", str(tmp_path / "out")]) == 2
        assert capsys.readouterr().err == ("gnplace: error: --ranks 3: torchrun started 2 processes, one rank each; "
                                           "give --ranks 2 or leave it out\n")


def test_help_says_the_local_devices_default_to_the_cpu_alone_without_a_gpu(capsys):
    """``--devices`` said its default was "cpu + cuda:0"; on a machine torch sees no GPU on, it profiles the CPU alone
    (:func:`gnplace.execute.profile.calibrate`)."""
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: cpu, and cuda:0 where torch sees a GPU)" in text and "cpu + cuda:0" not in text
