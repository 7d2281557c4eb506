"""``scripts/demo.py``: the clusters its flags name."""

from __future__ import annotations

from pathlib import Path

import pytest

GRAPH = Path(__file__).resolve().parents[2] / "datasets" / "examples" / "mlp1x8w6144b256.gnpg"


def test_baselines_place_on_a_cluster_named_twice_once(load_script, capsys):
    """``--clusters 'k80x2, k80x2'`` was refused (' k80x2' is no preset), and 'k80x2,k80x2' gave each row twice."""
    demo = load_script("demo")
    for clusters in ("k80x2,k80x2", "k80x2, k80x2"):
        assert demo.main(["--baselines", str(GRAPH), "--clusters", clusters, "--placers", "single"]) == 0
        rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│ k80x2")]
        assert len(rows) == 1


def test_an_empty_chart_folder_is_refused_before_placing(tmp_path, load_script, capsys, monkeypatch):
    """``--out ""`` (an unset variable) drew the Gantt chart into the working folder, among the user's files."""
    demo = load_script("demo")

    def no_placements(jobs):
        raise AssertionError("placed before the options were checked")

    monkeypatch.setattr(demo, "task_mapper", no_placements)
    monkeypatch.chdir(tmp_path)
    assert demo.main(["--clusters", "k80x2", "--jobs", "1", "--out", ""]) == 2
    assert capsys.readouterr().err == \
        "demo: error: --out is empty; name the folder to write into (. for the current one)\n"
    assert list(tmp_path.iterdir()) == []


def test_baselines_place_with_a_placer_named_twice_once(load_script, capsys):
    """``--placers single,heft,single`` printed single's row twice."""
    demo = load_script("demo")
    assert demo.main(["--baselines", str(GRAPH), "--clusters", "k80x2", "--placers", "single,heft,single"]) == 0
    placers = [line.split("│")[2].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("│ k80x2")]
    assert placers == ["single", "heft"]


def test_baselines_print_a_graphs_and_clusters_names_as_they_are_on_one_line(tmp_path, load_script, capsys):
    """A graph named ``g\\n[red]x`` lost its ``[red]`` as rich markup and split the table's title in two."""
    from gnplace.graph_io import load_graph, save_graph

    graph = load_graph(GRAPH)
    graph = graph.replace(name="g\n[red]x")
    save_graph(graph, tmp_path / "g.gnpg")
    (tmp_path / "c.yaml").write_text('name: "c\\n[/]"\ndevices:\n  - {name: gpu, count: 2, kind: k80}\n'
                                     "links: {default: pcie3}\n")
    demo = load_script("demo")
    assert demo.main(["--baselines", str(tmp_path / "g.gnpg"), "--clusters", str(tmp_path / "c.yaml"),
                      "--placers", "single"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.strip().startswith("g\\x0a[red]x: ") for line in lines), lines
    assert any(line.startswith("│ c\\x0a[/] ") for line in lines), lines


def test_the_summary_leaves_a_placement_out_of_memory_out_of_its_mean_and_counts_it(load_script):
    """Where nothing fits, the policy's overflowing step was averaged in as if a device could run it."""
    demo = load_script("demo")
    rows = [{"family": "cifar10", "cluster": "tight4", "policy_vs_auto": v, "oom": o}
            for v, o in ((0.8, False), (0.2, True))]
    assert demo.summary_cell(rows, "cifar10", "tight4") == "0.800 (1 OOM)"
    assert demo.summary_cell(rows[1:], "cifar10", "tight4") == "none fits"
    assert demo.summary_cell(rows, "ptb", "tight4") == "-"


def test_baselines_title_prints_the_graphs_flop_in_the_unit_that_fits(tmp_path, load_script, capsys):
    """The title printed a step's FLOP in GFLOP with one decimal by hand: a 206 kFLOP graph's "0.0 GFLOP per step",
    where gnplace prints units.format_flops's ("206.336 kFLOP")."""
    from gnplace.graph_io import save_graph
    from gnplace.toy import mlp_training_graph
    from gnplace.units import format_flops

    graph = mlp_training_graph(layers=1, width=64, batch=8)
    save_graph(graph, tmp_path / "g.gnpg")
    demo = load_script("demo")
    assert demo.main(["--baselines", str(tmp_path / "g.gnpg"), "--clusters", "k80x2", "--placers", "single"]) == 0
    out = capsys.readouterr().out
    assert f"{graph.num_groups} groups, {format_flops(graph.total_flops)} per step" in out, out
    assert "GFLOP" not in out


def test_help_names_baselines_and_its_usage_names_the_flag(load_script, capsys):
    """``demo.py --help`` left out ``--baselines``, which the README shows, and ``--baselines --help`` gave a usage
    line without it (``demo.py [-h] ... [graphs ...]``), which run as written is the zero-shot demo refusing GRAPH."""
    demo = load_script("demo")
    with pytest.raises(SystemExit):
        demo.main(["--help"])
    assert "--baselines" in capsys.readouterr().out.split("options:")[1]
    with pytest.raises(SystemExit):
        demo.main(["--baselines", "--help"])
    assert capsys.readouterr().out.startswith("usage: demo.py --baselines [-h]")


def test_an_abbreviated_baselines_flag_runs_the_baselines_not_the_demo(load_script, capsys, monkeypatch):
    """``--base`` (argparse's abbreviation of ``--baselines``) went to the demo's parser, which read it as the flag
    it ignores: ``demo.py --base --clusters k80x2`` ran the whole zero-shot demo, and ``--base GRAPH`` was refused."""
    demo = load_script("demo")

    def no_demo(jobs):
        raise AssertionError("ran the zero-shot demo")

    monkeypatch.setattr(demo, "task_mapper", no_demo)
    for flag in ("--base", "--b"):
        assert demo.main([flag, str(GRAPH), "--clusters", "k80x2", "--placers", "single"]) == 0
        assert [line.split("│")[2].strip() for line in capsys.readouterr().out.splitlines()
                if line.startswith("│ k80x2")] == ["single"]


def test_the_demo_shows_its_progress_while_it_places(load_script, capsys, monkeypatch, tmp_path):
    """The demo's placements (two minutes of them in ``make demo``) showed nothing until the table at the end."""
    import contextlib

    import gnplace.progress

    demo = load_script("demo")
    row = {"family": "real", "cluster": "k80x2", "graph": "g", "path": str(GRAPH), "ops": 50, "policy": 0.2,
           "auto": 0.25, "auto_choice": "heft", "single": 0.4, "bound": 0.1, "policy_vs_auto": 0.8, "oom": False,
           "place_seconds": 1.0}

    @contextlib.contextmanager
    def mapper(jobs):
        yield lambda fn, tasks: iter([row] * len(tasks))

    monkeypatch.setattr(demo, "task_mapper", mapper)
    monkeypatch.setattr(gnplace.progress, "LINE_EVERY_S", 0.0)  # a line each placement, not each half minute
    assert demo.main(["--clusters", "k80x2", "--per-family", "1", "--samples", "0", "--jobs", "1",
                      "--out", str(tmp_path)]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("demo: ")]
    assert [line.split(" (")[0] for line in lines] == [f"demo: {i}/5 placements" for i in range(1, 6)], lines
    assert lines[-1].endswith("; g on k80x2"), lines


@pytest.mark.parametrize("budget", ["-1", "0"])
@pytest.mark.parametrize("placers", ["single", "annealing"])
def test_baselines_refuse_a_budget_below_one_by_its_flag(load_script, capsys, budget, placers):
    """``--budget -1`` was taken without a word with ``--placers single``, and with a search refused as
    "AnnealingPlacer needs ...", naming no flag."""
    demo = load_script("demo")
    assert demo.main(["--baselines", str(GRAPH), "--clusters", "k80x2", "--placers", placers, "--budget", budget]) == 2
    assert capsys.readouterr().err == f"demo: error: --budget must be at least 1, got {budget}\n"


def test_baselines_take_graphs_on_either_side_of_an_option(load_script, capsys):
    """``--baselines G1 --clusters k80x2 G2`` was "unrecognized arguments: G2" (argparse ends positionals at an
    option unless it parses them intermixed)."""
    demo = load_script("demo")
    assert demo.main(["--baselines", str(GRAPH), "--clusters", "k80x2", str(GRAPH.with_name("mlp2x8w2048b512.gnpg")),
                      "--placers", "single"]) == 0
    out = capsys.readouterr().out
    assert out.count("k80x2") == 2, out
