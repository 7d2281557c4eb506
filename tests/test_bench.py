"""``scripts/bench.py``: its subcommands, bad input as one error line; the benchmarks themselves in ``tests/benchmarks/``."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Every benchmark ``bench.py`` offers (``report`` besides: ``tests/test_report.py``).
BENCHMARKS = {"sim", "import", "scale", "devices", "devices-place", "exact", "placers", "search", "curves", "ppo-speed", "zeroshot",
              "vs-search", "latency", "memory", "constructor", "finetune", "screen-model", "fidelity", "apply", "device-map",
              "report"}


def test_every_benchmark_is_a_subcommand_documented_by_its_handler(load_script, capsys):
    bench = load_script("bench")
    with pytest.raises(SystemExit):
        bench.main(["--help"])
    listed = capsys.readouterr().out
    assert all(f"python scripts/bench.py {name}" in listed for name in BENCHMARKS)  # the usage lines
    for name in BENCHMARKS - {"report"}:
        with pytest.raises(SystemExit):
            bench.main([name, "--help"])
        assert f"``{name}``: " in capsys.readouterr().out  # the handler's docstring is the --help text


@pytest.mark.parametrize("argv, message", [
    (["vs-search", "nosuch.json", "nosuch.csv"], "No such file or directory"),
    (["placers", "--cluster", "nosuch"], "unknown cluster 'nosuch'"),
    (["sim", "--ops", "-5"], "--ops must be at least 1, got -5"),
    (["sim", "--devices", "0"], "--devices must be at least 1, got 0"),
    (["ppo-speed", "--samples", "-1"], "--samples must be at least 0, got -1"),
    (["latency", "--checkpoint", "TRUNCATED", "--ops", "100"], "not a readable checkpoint"),
    (["apply", "--rounds", "0"], "--rounds must be at least 1, got 0"),
    (["apply", "--models", "gnplace.execute.examples:nosuch"], "nosuch"),
    (["apply", "--models", "os.path:join"], "'os.path:join': the factory raised TypeError: join() missing"),
    (["apply", "--models", "os:getcwd"], "'os:getcwd': the factory must return (module, example_inputs) or"),
    (["apply", "--models", "sys:exit"], "'sys:exit': the factory raised SystemExit (sys.exit(None)"),  # (was status 0)
])
def test_bad_input_is_one_error_line_and_exit_2(load_script, tmp_path, capsys, argv, message):
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes((ROOT / "checkpoints" / "gnplace-base.ckpt").read_bytes()[:1000])
    bench = load_script("bench")
    code = bench.main([str(truncated) if a == "TRUNCATED" else a for a in argv])
    out, err = capsys.readouterr()
    assert code == 2 and not out and "Traceback" not in err
    assert err.startswith("bench: error: ") and err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("argv, message", [
    # each placed, timed or solved something (and printed it) before it met the bad argument
    (["zeroshot", "--families", "ptb", "--clusters", "k80x2", "--min-ops", "1000000000", "--real-clusters",
      "--unseen-clusters", "k80x2", "nosuch", "--unseen-per-family", "1", "--samples", "0", "--refine", "0",
      "--constructor", "none", "--no-subsets", "--jobs", "1", "--out", "OUT"], "unknown cluster 'nosuch'"),
    (["curves", "--graphs", str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg"), "NOSUCH.gnpg", "--cluster", "k80x2",
      "--placers", "annealing", "--budget", "10", "--out", "OUT"], "NOSUCH.gnpg: no such graph file"),
    (["exact", "--clusters", "k80x2", "--per-family", "1", "--groups", "4", "--time-limit", "0.5", "--placers",
      "single", "nosuch"], "--placers nosuch: unknown placer"),
    (["placers", "--placers", "single", "nosuch", "--ops", "50", "--repeat", "1"], "--placers nosuch: unknown placer"),
    (["constructor", "--families", "ptb", "--per-family", "1", "--clusters", "k80x2", "nosuch"],
     "unknown cluster 'nosuch'"),
    (["apply", "--models", "gnplace.execute.examples:tiny", "gnplace.execute.examples:nosuch", "--rounds", "1",
      "--repeat", "1"], "has no callable 'nosuch'"),
    # devices-place timed the placers before the unknown one; memory ran each command, recorded its status 2, exit 0
    (["devices-place", "--ops", "50", "--devices", "2", "--placers", "heft", "nosuch", "--cache", "OUT"],
     "--placers nosuch: unknown placer"),
    (["memory", "--ops", "50", "--placers", "single", "nosuch", "--cache", "OUT"], "--placers nosuch: unknown placer"),
    (["memory", "--ops", "50", "--clusters", "k80x2", "nosuch", "--placers", "single", "--cache", "OUT"],
     "unknown cluster 'nosuch'"),
    (["device-map", "--families", "ptb", "--per-family", "0"], "--per-family must be at least 1 (models drawn"),
    (["device-map", "--families", "--real-models", "gpt3"], "unknown --real-models gpt3 (choose from: gpt2,"),
    (["device-map", "--families", "--real-models"], "no models: no --families and no --real-models"),
    # two cluster files of one name: these benchmarks' rows and tables name clusters by name, and merged the two
    (["zeroshot", "--families", "ptb", "--clusters", "LAB_A", "LAB_B", "--real-clusters", "--unseen-clusters",
      "--jobs", "1", "--out", "OUT"], "both clusters are named 'lab'"),
    (["finetune", "--families", "ptb", "--per-family", "1", "--clusters", "LAB_A", "LAB_B", "--budget", "8",
      "--jobs", "1", "--out", "OUT"], "both clusters are named 'lab'"),
    # a value given twice: noisy-steps ran each pair twice and counted both runs, search printed a column twice
    (["noisy-steps", "--seeds", "0", "1", "0", "--out", "OUT"], "--seeds names 0 twice: give each once"),
    (["search", "--placers", "ppo", "ppo", "--out", "OUT"], "--placers names ppo twice: give each once"),
    (["zeroshot", "--families", "ptb", "ptb", "--out", "OUT"], "--families names ptb twice: give each once"),
    (["memory", "--ops", "50", "50", "--cache", "OUT"], "--ops names 50 twice: give each once"),
    (["device-map", "--real-models", "gpt2", "gpt2"], "--real-models names gpt2 twice: give each once"),
])
def test_bad_arguments_are_refused_before_any_work(load_script, tmp_path, capsys, argv, message):
    """An argument the run would meet minutes in (a later cluster, graph, placer or model) is one line at the start."""
    bench = load_script("bench")
    for folder, count in (("LAB_A", 2), ("LAB_B", 4)):  # two files named lab, as gnplace profile writes them
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "cluster.yaml").write_text(
            f"name: lab\ndevices:\n  - {{name: gpu, count: {count}, kind: k80}}\nlinks: {{default: pcie3}}\n")
    lab = {name: str(tmp_path / name / "cluster.yaml") for name in ("LAB_A", "LAB_B")}
    code = bench.main([str(tmp_path / a) if a in ("OUT", "NOSUCH.gnpg") else lab.get(a, a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2 and not out, out  # nothing placed or printed first
    assert err.startswith("bench: error: ") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "OUT").exists()


def test_per_family_zero_means_every_test_graph_wherever_it_is_taken(load_script, capsys):
    """``search --per-family 0`` ran every test graph and ``finetune --per-family 0`` none; now all, and said in --help."""
    bench = load_script("bench")
    for name in ("search", "finetune", "screen-model", "constructor", "exact"):
        with pytest.raises(SystemExit):
            bench.main([name, "--help"])
        assert "0: all of them" in " ".join(capsys.readouterr().out.split()), name
    common = load_script("benchmarks.common")
    assert common.test_graphs("ptb", 0) == common.test_graphs("ptb", None) and len(common.test_graphs("ptb", 0)) == 8


_ZEROSHOT_SMALL = ["--families", "ptb", "--clusters", "k80x2", "--real-clusters", "--unseen-clusters", "--jobs", "1",
                   "--out", "OUT"]
_FINETUNE_SMALL = ["--families", "ptb", "--per-family", "1", "--clusters", "k80x2", "--jobs", "1", "--out", "OUT"]


@pytest.mark.parametrize("argv, message", [
    # each made its output folder (OUT) before it met the bad argument, and a refused run left it behind empty
    (["finetune", *_FINETUNE_SMALL, "--ft-lr", "nan"], "--ft-lr must be a finite number > 0, got nan"),  # "need lr > 0"
    (["finetune", *_FINETUNE_SMALL, "-O", "nosuch.x=1"], "placer 'nosuch' is not among those run"),
    (["finetune", *_FINETUNE_SMALL, "--budget", "0"], "needs a budget >= 1"),
    (["finetune", *_FINETUNE_SMALL, "--checkpoint", "NOSUCH.ckpt"], "no such checkpoint file"),
    (["finetune", *_FINETUNE_SMALL, "--families", "nosuch"], "--families nosuch: no such family in"),
    # --mismatch: blamed on the cluster ("cluster 'k80x4': every link needs a positive, finite bandwidth"), or ran
    (["screen-model", "--out", "OUT", "--mismatch", "nan", "nan", "nan"],
     "--mismatch nan nan nan: SIGMA must be a finite number 0 to 10, got nan"),
    (["screen-model", "--out", "OUT", "--mismatch", "-1", "0.5", "2"], "SIGMA must be a finite number 0 to 10, got -1"),
    (["screen-model", "--out", "OUT", "--mismatch", "0.5", "0", "2"], "BANDWIDTH must be a finite number > 0, got 0"),
    (["screen-model", "--out", "OUT", "--mismatch", "0.5", "1e-320", "2"],  # a worker crashed on it
     "BANDWIDTH slows a link of cluster 'k80x4' to"),
    (["screen-model", "--out", "OUT", "--mismatch", "0.5", "0.5", "inf"],
     "LATENCY must be a finite number >= 0, got inf"),
    (["screen-model", "--out", "OUT", "--budget", "0"], "needs a budget >= 1"),
    (["zeroshot", *_ZEROSHOT_SMALL, "--temperatures", "-1"], "--temperatures needs > 0"),
    (["zeroshot", *_ZEROSHOT_SMALL, "--checkpoint", "NOSUCH.ckpt"], "no such checkpoint file"),
    (["zeroshot", *_ZEROSHOT_SMALL, "--constructor", "NOSUCH.ckpt"], "no such checkpoint file"),
    (["zeroshot", "--families", "nosuch", "--out", "OUT"], "--families nosuch: no such family in"),  # a manifest path
    (["curves", "--graphs", str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg"), "--placers", "annealing", "--budget", "0",
      "--out", "OUT"], "budget >= 1"),
    (["search", "--families", "ptb", "-O", "ppo.nosuch=1", "--out", "OUT"], "does not take these options: nosuch"),
    (["latency", "--ops", "100", "--samples", "100000", "--cache", "OUT"], "samples <= 4096"),
    (["fidelity", "--timer", "local", "--devices", ",", "--out", "OUT"], "'' is not a torch device"),
    # a traceback (torch.set_num_threads), a misleading line, or a 75 GiB link matrix (numpy's traceback)
    (["fidelity", "--timer", "local", "--threads", "0", "--out", "OUT"], "--threads must be at least 1, got 0"),
    (["exact", "--time-limit", "nan", "--clusters", "k80x2", "--families", "ptb", "--per-family", "1"],
     # "... and max_groups >= 1, got nan, 60"; then "a finite number of seconds", where the help says it is no seconds
     "--time-limit must be a finite number > 0 of CP-SAT deterministic time units (not wall seconds), got nan"),
    (["sim", "--devices", "100000"], "--devices must be at most 4096, got 100000"),
    # numpy's "Unable to allocate 745. GiB" traceback
    (["sim", "--ops", "100000000000"], "--ops must be at most 20000000, got 100000000000"),
    (["ppo-speed", "--nodes", "100000000000"], "--nodes must be at most 20000000, got 100000000000"),
    (["sim", "--ops", "100", "--batch", "100000000"], "--batch must be at most 16384, got 100000000"),
    # "knob 'layers' must be at most 10,000 (cifar10.MAX_LAYERS)", once the graphs of the --ops before were placed
    (["scale", "--ops", "1000", "100000000", "--groups", "10", "--cache", "OUT"],
     "--ops must be at most 1190000, got 100000000"),
    (["ppo-speed", "--nodes", "10", "--samples", "1"], "--samples must be at least 2"),  # "need samples >= 2"
    (["finetune", "--ft-samples", "1", "--out", "OUT"], "--ft-samples must be at least 2, got 1"),  # "FineTunePlacer:
    # need samples >= 2", after the first search; and minutes of calibration before "no placement splits the step"
    (["fidelity", "--placements", "0", "--out", "OUT"], "--placements must be at least 1, got 0"),
    # mkdir said "FILE: File exists" alone
    (["curves", "--graphs", str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg"), "--placers", "annealing", "--budget",
      "10", "--out", "FILE"], "--out FILE: a file, not a folder; name a folder for the results"),
    (["finetune", "--out", "FILE"], "--out FILE: a file, not a folder"),
    (["scale", "--ops", "1000", "--cache", "FILE"], "--cache FILE: a file, not a folder"),
    # an empty table and status 0
    (["zeroshot", *_ZEROSHOT_SMALL, "--min-ops", "100000000"], "no pair to place: no test graph of ptb has more than"),
])
def test_a_refused_benchmark_names_the_argument_and_leaves_no_folder(load_script, tmp_path, capsys, monkeypatch,
                                                                      argv, message):
    """Every argument is checked before a benchmark makes its output folder: a refused run leaves nothing behind."""
    monkeypatch.chdir(tmp_path)  # FILE and NOSUCH.ckpt are here
    (tmp_path / "FILE").write_text("mine\n")
    bench = load_script("bench")
    code = bench.main([str(tmp_path / "OUT") if a == "OUT" else a for a in argv])
    out, err = capsys.readouterr()
    assert code == 2 and not out, out
    assert err.startswith("bench: error: ") and err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE"] and (tmp_path / "FILE").read_text() == "mine\n"


HOLD = """
import sys, time
from gnplace.runlock import folder_lock
with folder_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("argv", [
    ["noisy-steps", "--budget", "20", "--families", "cifar10", "--clusters", "k80x4", "--seeds", "0", "--confirm", "0"],
    ["finetune", "--budget", "20", "--families", "cifar10", "--clusters", "k80x4", "--per-family", "1"],
    ["zeroshot", *_ZEROSHOT_SMALL[:-2]],
    ["report", "--quick"],  # each ran every section again and wrote elapsed.json over the other's
])
def test_a_benchmark_into_a_folder_another_run_writes_into_is_refused(load_script, tmp_path, capsys, argv):
    """Two ``noisy-steps`` (seeds 0 and 1) into one ``--out`` at once each wrote its rows over the file: seed 0's rows
    were lost, both exiting 0. The second is refused at once, and writes nothing beside the first."""
    import subprocess
    import sys

    pytest.importorskip("fcntl")
    from gnplace.runlock import LOCK_NAME

    out = tmp_path / "OUT"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        code = load_script("bench").main([*argv, "--out", str(out)])
        stdout, err = capsys.readouterr()
        assert code == 2 and not stdout, stdout
        assert err == f"bench: error: --out {out}: another gnplace run is writing into this folder (it holds " \
                      f"{LOCK_NAME}): wait for it to end, or use another folder\n"
        assert [p.name for p in out.iterdir()] == [LOCK_NAME]
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("flag", ["-P", "-I"])
def test_bench_runs_with_no_script_folder_on_the_path(tmp_path, flag):
    # python -P (PYTHONSAFEPATH=1) and -I leave the script's folder off sys.path: `import report` failed
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # -I ignores it: the installed gnplace is used there
    done = subprocess.run([sys.executable, flag, str(ROOT / "scripts" / "bench.py"), "--help"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "zeroshot-seeds" in done.stdout


def test_bench_imports_torch_only_for_a_benchmark_that_uses_it(tmp_path):
    """Every ``bench.py`` run imported torch (2.1-2.9 s of ``-X importtime``), ``--help`` and ``sim`` included:
    ``benchmarks/finetune.py`` subclassed the real-device timer, whose package imports torch, at its top; its
    ``NoisySteps`` is made on first use now."""
    import os
    import subprocess
    import sys

    script = str(ROOT / "scripts" / "bench.py")
    code = ("import runpy, sys\n"
            f"sys.argv = [{script!r}, '--help']\n"
            "try:\n"
            f"    runpy.run_path({script!r}, run_name='__main__')\n"
            "except SystemExit:\n"
            "    pass\n"
            "print(sorted(m for m in ('torch', 'lightning', 'torch_geometric', 'onnx') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "zeroshot-seeds" in done.stdout and done.stdout.splitlines()[-1] == "[]"


def test_curves_refuse_a_graph_of_no_ops_before_the_first_search(load_script, tmp_path, capsys):
    """Its search's empty trace was a ValueError traceback (not enough values to unpack), after the graphs
    before it were searched; gnplace place, simulate, evaluate and finetune refuse such a graph in one line."""
    from gnplace.graph import OpGraph
    from gnplace.graph_io import save_graph

    empty = save_graph(OpGraph([], name="empty"), tmp_path / "empty.gnpg")
    code = load_script("bench").main(["curves", "--graphs", str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg"),
                                      str(empty), "--cluster", "k80x2", "--placers", "annealing", "--budget", "8",
                                      "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 2 and not out and not (tmp_path / "out").exists()
    assert err == f"bench: error: {empty}: graph 'empty' has no ops; there is nothing to place\n"


def test_search_counts_the_rows_of_placers_that_spend_no_budget(load_script, tmp_path, capsys):
    """``search --placers auto heft annealing --budget 5``: auto's and heft's rows, which record no budget (they spend
    none), must still be counted, not left out of their columns as ``nan (0)``."""
    code = load_script("bench").main(["search", "--families", "ptb", "--per-family", "1", "--clusters", "k80x2",
                                      "--placers", "auto", "heft", "annealing", "--budget", "5", "--jobs", "1",
                                      "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("| ptb | k80x2 |"))
    assert "nan" not in line and line.count("(1)") == 3, line
