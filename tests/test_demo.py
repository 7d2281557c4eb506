"""``scripts/demo.py`` (``make demo``): zero-shot placement of every family and the real models, end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "scripts/demo.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.heavy
def test_demo_places_each_familys_test_graphs_and_the_real_models_and_draws_a_gantt_chart(tmp_path, load_script, capsys):
    """The main job on one cluster, greedy decoding alone, two test graphs a family (``make demo``: two clusters,
    16 samples, all 8, about 2 minutes); the demo's main in this process (``--jobs 1`` places here)."""
    argv = ["--clusters", "k80x2", "--samples", "0", "--per-family", "2", "--jobs", "1", "--out", str(tmp_path)]
    assert load_script("demo").main(argv) == 0
    stdout = capsys.readouterr().out
    placed = [line.split("│")[2].strip() for line in stdout.splitlines() if line.startswith("│ k80x2")]
    assert placed == ["cifar10_002", "cifar10_004", "ptb_002", "ptb_004", "nmt_002", "nmt_004", "gpt2", "resnet50"]
    means = stdout[stdout.index("policy / auto"):]
    for family in ("cifar10", "ptb", "nmt", "real"):
        line = next(line for line in means.splitlines() if f" {family} " in line)
        assert 0.5 < float(line.split("│")[2]) <= 1.05, line  # a geometric mean over auto, beside 1
    assert "gpt2" in stdout and "resnet50" in stdout
    assert [p.name for p in tmp_path.glob("*.png")] == ["gantt_cifar10_002_k80x2.png"]


def test_baselines_runs_each_placer_on_each_cluster(tmp_path):
    done = _demo("--baselines", "datasets/examples/mlp1x8w6144b256.gnpg", "--clusters", "k80x2,k80x4",
                 "--placers", "single,heft,annealing", "--budget", "20")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("│ k80x")]
    assert [(r.split("│")[1].strip(), r.split("│")[2].strip()) for r in rows] == [
        (c, p) for c in ("k80x2", "k80x4") for p in ("single", "heft", "annealing")]


def test_baselines_divide_by_single_whatever_the_order_of_the_placers(load_script, capsys):
    """``step / single`` is over the single-device step, also when single runs later or not at all."""
    demo = load_script("demo")
    graph = str(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    ratios = {}
    for placers in ("single,round_robin", "round_robin,single", "round_robin"):
        assert demo.main(["--baselines", graph, "--clusters", "k80x4", "--placers", placers]) == 0
        rows = [line.split("│") for line in capsys.readouterr().out.splitlines() if line.startswith("│ k80x4")]
        ratios[placers] = {r[2].strip(): r[6].strip() for r in rows}
    assert ratios["single,round_robin"] == ratios["round_robin,single"]
    assert ratios["round_robin"]["round_robin"] == ratios["single,round_robin"]["round_robin"] != "1.000"


def test_demo_refuses_no_cluster_and_an_out_that_is_a_file_in_one_line(load_script, capsys):
    demo = load_script("demo")
    assert demo.main(["--clusters", ",", "--jobs", "1"]) == 2
    err = capsys.readouterr().err
    assert err == "demo: error: --clusters names no cluster: ','\n"
    assert demo.main(["--clusters", "k80x2", "--per-family", "-1"]) == 2
    assert capsys.readouterr().err == "demo: error: --per-family must be at least 0, got -1\n"
    assert demo.main(["--clusters", "k80x2", "--samples", "-1"]) == 2  # said "PolicyPlacer needs samples >= 0"
    assert capsys.readouterr().err == "demo: error: --samples needs >= 0, a whole number, got -1\n"
    chart = ROOT / "README.md"  # a file where the chart's folder goes: refused before any placement
    assert demo.main(["--clusters", "k80x2", "--jobs", "1", "--out", str(chart)]) == 2
    err = capsys.readouterr().err
    assert err == f"demo: error: --out {chart}: a file, not a folder (the Gantt chart goes into it)\n"


@pytest.mark.parametrize("args, message", [
    (["--clusters", "nosuch"], "unknown cluster 'nosuch'"),
    (["--clusters", "k80x2", "--samples", "-2"], "--samples needs >= 0"),
    (["--baselines", "nosuch.gnpg"], "no such graph file"),
])
def test_bad_input_is_one_error_line_and_exit_2(args, message):
    done = _demo(*args)
    assert done.returncode == 2 and done.stderr.startswith("demo: error: ") and message in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize("args, message", [
    (["--out", "FILE/sub"], "--out FILE/sub: cannot write there, FILE is not a folder"),
    (["--jobs", "0"], "--jobs must be at least 1, got 0"),
])
def test_demo_refuses_a_chart_folder_under_a_file_and_no_worker_before_placing(tmp_path, load_script, capsys,
                                                                              monkeypatch, args, message):
    """Both were found only once every graph was placed (the first a traceback, the second ran as one job)."""
    demo = load_script("demo")

    def no_placements(jobs):
        raise AssertionError("placed before the options were checked")

    monkeypatch.setattr(demo, "task_mapper", no_placements)
    (tmp_path / "FILE").write_text("a file where the chart's folder goes")
    argv = ["--clusters", "k80x2", "--jobs", "1", *[str(tmp_path / a) if "FILE" in a else a for a in args]]
    assert demo.main(argv) == 2
    assert capsys.readouterr().err == "demo: error: " + message.replace("FILE", str(tmp_path / "FILE")) + "\n"


def test_baselines_refuse_no_cluster_in_one_line(load_script, capsys):
    demo = load_script("demo")
    assert demo.main(["--baselines", str(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg"), "--clusters", ""]) == 2
    assert capsys.readouterr().err == "demo: error: --clusters names no cluster: ''\n"


def test_baselines_read_placers_as_evaluate_does_and_refuse_an_unknown_one_before_placing(load_script, capsys):
    """``--placers "single, heft"`` was refused as the placer ' heft' (evaluate and --clusters drop the spaces), and
    only after single had placed the graph; ``single,,heft`` asked for a placer ''."""
    demo = load_script("demo")
    graph = str(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    assert demo.main(["--baselines", graph, "--clusters", "k80x2", "--placers", " single, heft,,single"]) == 0
    rows = [line.split("│") for line in capsys.readouterr().out.splitlines() if line.startswith("│ k80x2")]
    assert [r[2].strip() for r in rows] == ["single", "heft"]
    assert demo.main(["--baselines", graph, "--clusters", "k80x2", "--placers", "single,nosuch"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("demo: error: unknown placer 'nosuch'")
    assert demo.main(["--baselines", graph, "--clusters", "k80x2", "--placers", " , "]) == 2
    assert capsys.readouterr().err == "demo: error: --placers names no placer: ' , '\n"


def test_baselines_of_a_graph_without_ops_is_one_line(load_script, capsys, tmp_path):
    """A graph of no ops reached the table's step / bound: a ZeroDivisionError traceback."""
    from gnplace.graph import OpGraph
    from gnplace.graph_io import save_graph

    empty = save_graph(OpGraph([], name="empty"), tmp_path / "empty.gnpg")
    demo = load_script("demo")
    assert demo.main(["--baselines", str(empty), "--clusters", "k80x2", "--placers", "single"]) == 2
    assert capsys.readouterr().err == f"demo: error: {empty}: graph 'empty' has no ops; there is nothing to place\n"


def test_baselines_of_zero_cost_ops_on_devices_without_launch_overhead_show_no_ratio(load_script, capsys, tmp_path):
    """Every op free and no launch overhead: bound and single step are 0, and step / bound a ZeroDivisionError."""
    from gnplace.graph import OpGraph
    from gnplace.graph_io import save_graph

    zero = save_graph(OpGraph(["a", "b", "c"], [(0, 1), (1, 2)], name="zero"), tmp_path / "zero.gnpg")
    cluster = tmp_path / "z.yaml"
    cluster.write_text("name: z\ndevices:\n  - {name: gpu, count: 2, kind: k80, launch_overhead: 0 s}\n"
                       "links: {default: pcie3}\n")
    demo = load_script("demo")
    assert demo.main(["--baselines", str(zero), "--clusters", str(cluster), "--placers", "single,round_robin"]) == 0
    rows = [line.split("│") for line in capsys.readouterr().out.splitlines() if line.startswith("│ z ")]
    assert len(rows) == 2 and all(r[5].strip() == r[6].strip() == "-" for r in rows)


@pytest.mark.parametrize("baselines", [True, False], ids=["baselines", "demo"])
def test_ctrl_c_is_one_line_and_exit_130(load_script, capsys, monkeypatch, baselines):
    """Ctrl-C inside numba's compiled loop comes back as a SystemError: the demo printed its 40-line traceback."""
    demo = load_script("demo")

    def interrupted(*args, **kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("CPUDispatcher(<function simulate_many>) returned a result with an exception set")  # noqa: B904 - as numba: the interrupt its context only

    monkeypatch.setattr(demo, "make_placer" if baselines else "load_cluster", interrupted)
    argv = (["--baselines", str(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg"), "--clusters", "k80x2",
             "--placers", "single"] if baselines else ["--clusters", "k80x2", "--jobs", "1"])
    assert demo.main(argv) == 130
    assert capsys.readouterr().err == "demo: interrupted\n"
