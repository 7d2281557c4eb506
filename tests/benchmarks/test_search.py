"""``scripts/benchmarks/search.py``: search placers against ``auto``, their learning curves, PPO's speed."""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_search_summarises_each_placer_over_auto_per_family_and_cluster(load_script, tmp_path):
    search = load_script("benchmarks.search")
    args = argparse.Namespace(families=["ptb"], split="test", per_family=1, clusters=["k80x2"], seed=0,
                              placers=["annealing"], option=[], budget=60, jobs=1, out=str(tmp_path))
    (line,) = search.bench_search(args)
    assert line["family"] == "ptb" and line["cluster"] == "k80x2" and line["annealing_n"] == 1
    assert 0 < line["annealing"] <= 1.0 + 1e-9  # annealing starts from auto's placement
    assert (tmp_path / "results.csv").exists()  # a rerun resumes from it


def test_search_summary_keeps_to_this_runs_seed_when_the_folder_holds_another(load_script, tmp_path):
    """A run under seed 1 in the folder of a seed-0 run: its summary is seed 1's alone, against seed 1's auto."""
    search = load_script("benchmarks.search")

    def args(seed, out):
        return argparse.Namespace(families=["ptb"], split="test", per_family=1, clusters=["k80x2"], seed=seed,
                                  placers=["annealing"], option=[], budget=60, jobs=1, out=str(out))

    search.bench_search(args(0, tmp_path / "both"))
    (line,) = search.bench_search(args(1, tmp_path / "both"))
    (alone,) = search.bench_search(args(1, tmp_path / "alone"))
    assert line["annealing_n"] == 1 and line["annealing"] == alone["annealing"]


def test_search_keeps_two_cluster_files_of_one_name_apart(load_script, tmp_path):
    """Two files named ``lab`` (each ``gnplace profile`` writes one): each line had both clusters' rows over either's auto."""
    search = load_script("benchmarks.search")
    files = []
    for folder, (count, kind, link) in {"a": (2, "k80", "pcie3"), "b": (4, "v100", "nvlink2")}.items():
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "cluster.yaml"
        path.write_text(f"name: lab\ndevices:\n  - {{name: gpu, count: {count}, kind: {kind}}}\nlinks: {{default: {link}}}\n")
        files.append(str(path))

    def args(clusters, out):
        return argparse.Namespace(families=["ptb"], split="test", per_family=1, clusters=clusters, seed=0,
                                  placers=["annealing"], option=[], budget=10, jobs=1, out=str(out))

    both = search.bench_search(args(files, tmp_path / "both"))
    alone = [search.bench_search(args([f], tmp_path / f"alone{i}"))[0] for i, f in enumerate(files)]
    assert [line["annealing_n"] for line in both] == [1, 1]
    assert [line["annealing"] for line in both] == [line["annealing"] for line in alone]
    assert all(line["annealing"] <= 1.0 + 1e-9 for line in both)  # annealing starts from auto's placement


def test_curves_write_each_placers_curve_and_who_reached_whose_final(load_script, tmp_path):
    search = load_script("benchmarks.search")
    args = argparse.Namespace(graphs=["datasets/ptb/ptb_002.gnpg"], cluster="k80x2", placers=["annealing"],
                              budget=40, seed=0, out=str(tmp_path))
    (row,) = search.bench_curves(args)
    assert row["placer"] == "annealing" and row["final"] <= 1.0 + 1e-9
    assert row["evaluations_to_reach"]["annealing"] <= 40  # its own final, reached within the budget
    corners = json.loads((tmp_path / "curve_ptb_002_k80x2.json").read_text())["best_over_auto"]["annealing"]
    assert math.isclose(corners[-1][1], row["final"]) and (tmp_path / "curve_ptb_002_k80x2.png").exists()


def test_ppo_speed_times_one_iteration(load_script):
    search = load_script("benchmarks.search")
    result = search.bench_ppo_speed(argparse.Namespace(nodes=60, cluster="k80x2", samples=4, epochs=1, repeat=1))
    assert result["seconds_per_iteration"] > 0 and result["samples"] == 4 and 0 < result["nodes"] <= 60


def test_search_progress_counts_the_rows_an_earlier_run_saved(load_script, tmp_path, capsys):
    """A rerun with another budget reuses auto's row: its one placement is the last of two, not the first."""
    search = load_script("benchmarks.search")

    def args(budget):
        return argparse.Namespace(families=["ptb"], split="test", per_family=1, clusters=["k80x2"], seed=0,
                                  placers=["annealing", "auto"], option=[], budget=budget, jobs=1, out=str(tmp_path))

    search.bench_search(args(40))
    first = capsys.readouterr().out
    assert "0 of 2 placements saved" in first and "[2/2] ptb_002 k80x2 " in first  # auto asked twice runs once
    search.bench_search(args(30))
    again = capsys.readouterr().out
    assert "1 of 2 placements saved" in again and "[2/2] ptb_002 k80x2 annealing" in again, again


def test_search_rerun_with_another_budget_keeps_the_earlier_budgets_rows(load_script, tmp_path, capsys):
    """A rerun at budget 30 into a budget-40 run's folder dropped the budget-40 rows: the two budgets could not be
    kept (and summarised, each run its own budget's) in one folder; a rerun at 40 then placed them all again."""
    search = load_script("benchmarks.search")

    def args(budget):
        return argparse.Namespace(families=["ptb"], split="test", per_family=1, clusters=["k80x2"], seed=0,
                                  placers=["annealing"], option=[], budget=budget, jobs=1, out=str(tmp_path))

    (first,) = search.bench_search(args(40))
    search.bench_search(args(30))
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert sorted((r["placer"], r["budget"]) for r in rows) == [("annealing", "30"), ("annealing", "40"), ("auto", "")]
    capsys.readouterr()
    (again,) = search.bench_search(args(40))
    assert "2 of 2 placements saved" in capsys.readouterr().out and again == first


def test_search_says_how_many_saved_rows_of_a_changed_cluster_file_it_drops(load_script, tmp_path, capsys):
    """The rows of a cluster file edited since were dropped and run again without a word."""
    search = load_script("benchmarks.search")
    cluster = tmp_path / "mine.yaml"
    cluster.write_text("name: mine\ndevices: [{name: gpu, count: 2, kind: k80}]\nlinks: {default: pcie3}\n")
    args = argparse.Namespace(families=["ptb"], split="test", per_family=1, clusters=[str(cluster)], seed=0,
                              placers=["annealing"], option=[], budget=5, jobs=1, out=str(tmp_path / "out"))
    search.bench_search(args)
    assert "dropping" not in capsys.readouterr().out
    cluster.write_text("name: mine\ndevices: [{name: gpu, count: 2, kind: v100}]\nlinks: {default: pcie3}\n")
    search.bench_search(args)
    assert f"dropping 2 saved rows of {tmp_path / 'out' / 'results.csv'} timed on inputs" in capsys.readouterr().out


def test_search_compares_auto_run_with_options_against_the_plain_auto(load_script, tmp_path):
    """``--placers auto -O auto.candidates=round_robin``: the reference was that run of auto itself (1.000 where its
    step is 8.094 ms against the plain auto's 5.436 ms on ptb_002 on k80x2)."""
    search = load_script("benchmarks.search")
    args = argparse.Namespace(families=["ptb"], split="test", per_family=1, clusters=["k80x2"], seed=0,
                              placers=["auto"], option=["auto.candidates=round_robin"], budget=5, jobs=1,
                              out=str(tmp_path))
    (line,) = search.bench_search(args)
    steps = {r["options"]: float(r["step_time_s"]) for r in csv.DictReader((tmp_path / "results.csv").open())}
    assert line["auto_n"] == 1 and line["auto"] == pytest.approx(steps['{"candidates": "round_robin"}'] / steps["{}"])
    assert line["auto"] > 1.0


def test_search_leaves_out_rows_of_another_simulator_mode_in_its_folder(load_script, tmp_path):
    """``gnplace evaluate --mode placeto -p auto,annealing --budget 5`` into the folder: its rows stay beside the
    search's (a row's slot holds its mode), and were summarised with them: annealing / auto 0.930 over 2 runs of one
    graph, against the placeto auto (6.015 ms, not the 5.436 ms of the auto the search runs) on ptb_002, k80x2."""
    from gnplace.evaluate import Task, evaluate

    search = load_script("benchmarks.search")
    graph = str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg")
    evaluate([Task(graph, "k80x2", "auto", mode="placeto"),
              Task(graph, "k80x2", "annealing", budget=5, mode="placeto")], tmp_path)
    args = argparse.Namespace(families=["ptb"], split="test", per_family=1, clusters=["k80x2"], seed=0,
                              placers=["annealing"], option=[], budget=5, jobs=1, out=str(tmp_path))
    (line,) = search.bench_search(args)
    steps = {(r["placer"], r["mode"]): float(r["step_time_s"])
             for r in csv.DictReader((tmp_path / "results.csv").open())}
    assert line["annealing_n"] == 1
    assert line["annealing"] == pytest.approx(steps[("annealing", "default")] / steps[("auto", "default")])


def test_curves_refuse_a_placer_with_no_budget_before_placing(load_script, tmp_path, capsys):
    bench = load_script("bench")
    code = bench.main(["curves", "--graphs", "datasets/ptb/ptb_002.gnpg", "--cluster", "k80x2", "--placers",
                       "annealing", "single", "--budget", "10", "--out", str(tmp_path / "curves")])
    out, err = capsys.readouterr()
    assert code == 2 and not out and err.count("\n") == 1
    assert err.startswith("bench: error: --placers single: takes no budget") and "annealing" in err
    assert not (tmp_path / "curves").exists()  # refused before any work


def test_curves_refuse_a_cluster_of_one_device_before_placing(load_script, tmp_path, capsys):
    """The placers return at once on one device, with no curve: unpacking it was a ValueError traceback."""
    bench = load_script("bench")
    cluster = tmp_path / "one.yaml"
    cluster.write_text("devices: [{name: gpu, kind: k80}]\n")
    code = bench.main(["curves", "--graphs", "datasets/examples/mlp2x8w2048b512.gnpg", "--cluster", str(cluster),
                       "--placers", "rnn_pg", "--budget", "8", "--out", str(tmp_path / "curves")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "one device, so no search and no learning curve" in err
    assert not (tmp_path / "curves").exists()


def kill_midway(monkeypatch, *, files=True, figures=True):
    """Writes stop halfway through, as under a kill: ``Path.write_text``/``write_bytes`` (``files``) and figures."""
    import io
    import pathlib

    import matplotlib.figure

    def halfway(write):
        def halted(self, data, *args, **kwargs):
            write(self, data[: len(data) // 2], *args, **kwargs)
            raise KeyboardInterrupt

        return halted

    real_savefig = matplotlib.figure.Figure.savefig

    def savefig_halfway(figure, target, *args, **kwargs):
        image = io.BytesIO()
        real_savefig(figure, image, *args, **{"format": "png", **kwargs})
        data = image.getvalue()[: len(image.getvalue()) // 2]
        if hasattr(target, "write"):
            target.write(data)
        else:
            pathlib.Path(target).open("wb").write(data)
        raise KeyboardInterrupt

    if files:
        monkeypatch.setattr(pathlib.Path, "write_text", halfway(pathlib.Path.write_text))
        monkeypatch.setattr(pathlib.Path, "write_bytes", halfway(pathlib.Path.write_bytes))
    if figures:
        monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig_halfway)


@pytest.mark.parametrize("files, figures", [(True, False), (False, True)])
def test_curves_killed_while_writing_leave_the_files_of_before(load_script, tmp_path, monkeypatch, files, figures):
    """A kill while a curve's JSON or PNG was written left it cut short; now the one of before stays whole."""
    search = load_script("benchmarks.search")
    before = {name: f"before: {name}".encode() for name in ("curve_ptb_002_k80x2.json", "curve_ptb_002_k80x2.png")}
    for name, content in before.items():
        (tmp_path / name).write_bytes(content)
    args = argparse.Namespace(graphs=[str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg")], cluster="k80x2",
                              placers=["annealing"], budget=10, seed=0, out=str(tmp_path))
    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        kill_midway(patched, files=files, figures=figures)
        search.bench_curves(args)
    written = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    if files:  # the JSON comes first: the figure was never reached
        assert written == before
    else:
        assert written["curve_ptb_002_k80x2.png"] == before["curve_ptb_002_k80x2.png"] and len(written) == 2


def test_curves_of_a_graph_whose_name_is_a_path_stay_in_the_out_folder(load_script, tmp_path, capsys):
    """A shared graph named x/../../../../pwned had its curve's JSON and PNG written three folders above --out; its
    progress line printed the name's newline and escape as they were (a line in two, a terminal escape)."""
    from gnplace.graph_io import load_graph, save_graph

    search = load_script("benchmarks.search")
    graph = load_graph(ROOT / "datasets" / "examples" / "mlp2x8w2048b512.gnpg")
    graph = graph.replace(name="x/../../../../pwned\n\x1b[2J")
    save_graph(graph, tmp_path / "shared.gnpg")
    out = tmp_path / "a" / "b" / "out"
    args = argparse.Namespace(graphs=[str(tmp_path / "shared.gnpg")], cluster="k80x2", placers=["annealing"],
                              budget=10, seed=0, out=str(out))
    search.bench_curves(args)
    assert sorted(p.name for p in out.iterdir()) == ["curve_x_.._.._.._.._pwned___2J_k80x2.json",
                                                     "curve_x_.._.._.._.._pwned___2J_k80x2.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "shared.gnpg"]
    printed = capsys.readouterr().out
    assert "x/../../../../pwned\\x0a\\x1b[2J k80x2 annealing: " in printed and "\x1b" not in printed


def test_curves_refuse_an_empty_graph_path_by_argparse(load_script, capsys):
    """``--graphs ""`` said '.: is a folder, not a graph file' (the current folder, Path(""))."""
    bench = load_script("bench")
    try:
        code = bench.main(["curves", "--graphs", ""])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    assert "argument --graphs: expected a file's path, got ''" in capsys.readouterr().err


class _FailingPlacer:
    """A placer that always raises: its rows are failed runs."""

    name = "always_fails"

    def place(self, graph, cluster, *, seed=None):
        raise RuntimeError("no placement")


def test_search_means_leave_out_runs_out_of_memory_and_failed_and_count_them(load_script, tmp_path, capsys):
    """round_robin overflows tight4 on cifar10_004 (its step was averaged in) and a failed run counted as a run."""
    from gnplace.placers import register_placer
    from gnplace.placers.registry import PLACERS

    search = load_script("benchmarks.search")
    register_placer(_FailingPlacer.name, _FailingPlacer)
    try:
        args = argparse.Namespace(families=["cifar10"], split="test", per_family=2, clusters=["tight4"], seed=0,
                                  placers=["round_robin", _FailingPlacer.name], option=[], budget=None, jobs=1,
                                  out=str(tmp_path))
        (line,) = search.bench_search(args)
        search.run_search(args)
    finally:
        PLACERS.unregister(_FailingPlacer.name)
    rows = {(r["graph"], r["placer"]): r for r in csv.DictReader((tmp_path / "results.csv").open())}
    assert rows[("cifar10_004", "round_robin")]["oom"] == "True"  # the case this test is about
    fits = float(rows[("cifar10_002", "round_robin")]["step_time_s"]) / float(rows[("cifar10_002", "auto")]["step_time_s"])
    assert math.isclose(line["round_robin"], fits) and line["round_robin_n"] == 1 and line["round_robin_oom"] == 1
    assert math.isnan(line["always_fails"]) and line["always_fails_n"] == 0 and line["always_fails_failed"] == 2
    assert f"| {fits:.3f} (1; 1 OOM) | nan (0; 2 failed) |" in capsys.readouterr().out


def test_search_means_leave_out_graphs_on_which_auto_overflows_and_say_so(load_script, tmp_path, capsys):
    """A cluster too small for the graph: auto's step, over memory, is no reference; the line says it left it out."""
    search = load_script("benchmarks.search")
    small = tmp_path / "small.yaml"
    small.write_text("name: small\ndevices:\n  - {name: gpu, count: 2, kind: k80, memory: 1 MiB}\nlinks:\n"
                     "  default: pcie3\n")
    args = argparse.Namespace(families=["ptb"], split="test", per_family=1, clusters=[str(small)], seed=0,
                              placers=["round_robin"], option=[], budget=None, jobs=1, out=str(tmp_path / "out"))
    (line,) = search.bench_search(args)
    rows = {r["placer"]: r for r in csv.DictReader((tmp_path / "out" / "results.csv").open())}
    assert rows["auto"]["oom"] == "True"  # the case this test is about
    assert line["no_auto"] == 1 and line["round_robin_n"] == 0 and math.isnan(line["round_robin"])
    search.run_search(args)
    assert f"| ptb | {small} (1 graph left out: auto out of memory or failed)" in capsys.readouterr().out


def test_a_curves_figure_is_laid_out_at_the_resolution_it_is_written_at(load_script, tmp_path, figure_dpis):
    """A learning curve's figure was laid out at pyplot's 100 dpi and written at 110 (save_figure's)."""
    search = load_script("benchmarks.search")
    laid_out, written = figure_dpis
    args = argparse.Namespace(graphs=[str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg")], cluster="k80x2",
                              placers=["annealing"], budget=10, seed=0, out=str(tmp_path))
    search.bench_curves(args)
    assert laid_out == written == [110]


def test_a_curve_of_one_point_is_drawn_as_a_star(load_script, tmp_path, monkeypatch):
    """A budget of one batch left each curve one point, which ``ax.step`` drew as a line of no length: the figure
    was empty but for its legend. Such a curve is now a star, in the colour its line would have had."""
    from matplotlib.colors import to_hex

    from gnplace.graph_io import save_graph
    from gnplace.toy import layered_graph

    search = load_script("benchmarks.search")
    drawn = []
    monkeypatch.setattr(search, "save_figure", lambda fig, path: drawn.append(fig))
    save_graph(layered_graph(8, width=2, seed=0), tmp_path / "toy.gnpg")
    args = argparse.Namespace(graphs=[str(tmp_path / "toy.gnpg")], cluster="k80x4", placers=["annealing", "rnn_pg"],
                              budget=1, seed=0, out=str(tmp_path / "out"))
    search.bench_curves(args)
    (ax,) = drawn[0].axes
    stars = {dots.get_label(): (dots.get_offsets().tolist(), to_hex(dots.get_facecolor()[0])) for dots in ax.collections}
    assert sorted(stars) == ["annealing", "rnn_pg"]
    assert [stars[name][1] for name in ("annealing", "rnn_pg")] == ["#1f77b4", "#ff7f0e"]  # C0, C1: as lines
    assert all(len(points) == 1 and points[0][0] == 1 for points, _ in stars.values())


def test_a_curve_hidden_under_another_is_said_so_in_the_legend(load_script, tmp_path, monkeypatch):
    """A budget of one batch left annealing and random search each one star at auto's step, the second over the
    first: the legend named annealing, whose star no one could see. Its entry now says what hides it."""
    from gnplace.graph_io import save_graph
    from gnplace.toy import layered_graph

    search = load_script("benchmarks.search")
    drawn = []
    monkeypatch.setattr(search, "save_figure", lambda fig, path: drawn.append(fig))
    save_graph(layered_graph(8, width=2, seed=0), tmp_path / "toy.gnpg")
    args = argparse.Namespace(graphs=[str(tmp_path / "toy.gnpg")], cluster="k80x4",
                              placers=["annealing", "random_search"], budget=1, seed=0, out=str(tmp_path / "out"))
    rows = search.bench_curves(args)
    assert [row["final"] for row in rows] == [1.0, 1.0]
    (ax,) = drawn[0].axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["annealing (hidden under random_search)",
                                                                   "random_search"]


def test_a_curves_title_draws_the_graphs_name_as_written_within_the_figure(load_script, tmp_path, monkeypatch):
    """A graph named ``a$\\frac$b`` was read as maths: a ValueError after every search, no figure; a newline split the
    title; a name of 138 characters ran off both edges. Each is drawn as written, a long one shortened to fit."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from gnplace.graph_io import save_graph
    from gnplace.toy import layered_graph

    search = load_script("benchmarks.search")
    drawn = []
    monkeypatch.setattr(search, "save_figure", lambda fig, path: drawn.append(fig))
    names = ["a$\\frac$b", "two\nlines", "a_very_long_graph_name_" * 6]
    for k, name in enumerate(names):
        graph = layered_graph(8, width=2, seed=0).replace(name=name)
        save_graph(graph, tmp_path / f"{k}.gnpg")
    args = argparse.Namespace(graphs=[str(tmp_path / f"{k}.gnpg") for k in range(3)], cluster="k80x4",
                              placers=["annealing"], budget=1, seed=0, out=str(tmp_path / "out"))
    search.bench_curves(args)
    titles = [fig.axes[0].get_title() for fig in drawn]
    assert titles[:2] == ["a\\$\\frac\\$b on k80x4", "two\\x0alines on k80x4"]
    assert "…" in titles[2] and titles[2].startswith("a_very_long") and titles[2].endswith("_ on k80x4")
    fig = drawn[2]
    box = fig.axes[0].title.get_window_extent(FigureCanvasAgg(fig).get_renderer())
    assert 0 <= box.x0 and box.x1 <= fig.bbox.x1


def test_curves_write_into_the_projects_docs_figures_by_default_wherever_they_run(load_script, tmp_path, monkeypatch):
    """``--out`` defaulted to ``docs/figures`` of the working folder (a ``docs/`` made wherever it ran), where the
    report's section 6 writes the project's: both draw the README's figures into the project's docs/figures."""
    search = load_script("bench").search
    monkeypatch.chdir(tmp_path)
    parser = argparse.ArgumentParser()
    search.add_parsers(parser.add_subparsers(dest="bench"))
    args = parser.parse_args(["curves"])
    assert Path(args.out) == Path(__file__).resolve().parents[2] / "docs" / "figures"


def test_search_refuses_a_split_the_shipped_families_have_not_as_a_usage_error(load_script, tmp_path, capsys):
    """``--split nosuch`` was taken, then every family refused as "no graphs (split 'nosuch')"."""
    bench = load_script("bench")
    with pytest.raises(SystemExit) as exit_status:
        bench.main(["search", "--split", "nosuch", "--out", str(tmp_path / "s")])
    assert exit_status.value.code == 2 and "invalid choice: 'nosuch'" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_curves_refuses_two_graph_files_of_one_name_before_any_search(load_script, tmp_path, capsys):
    """Two files of graphs named alike drew their curves into one ``curve_NAME_CLUSTER.png``: the second's replaced
    the first's, without a word."""
    import shutil

    first = ROOT / "datasets" / "ptb" / "ptb_002.gnpg"
    second = shutil.copy(first, tmp_path / "copy.gnpg")
    out = tmp_path / "out"
    argv = ["curves", "--graphs", str(first), str(second), "--placers", "annealing", "--budget", "10", "--out", str(out)]
    assert load_script("bench").main(argv) == 2
    assert capsys.readouterr().err == (f"bench: error: --graphs {first} {second}: both are graphs named 'ptb_002', "
                                       "whose curves go to curve_ptb_002_k80x4.png: run the second with another --out\n")
    assert not out.exists()
