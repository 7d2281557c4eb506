"""``gnplace evaluate`` end to end (``gnplace place`` is tested in ``test_place.py``)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from gnplace.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "datasets" / "examples"


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


def test_evaluate_examples_with_plots(tmp_path, capsys, documented_keys):
    out = tmp_path / "ev"
    code = main(["evaluate", "--graphs", str(EXAMPLES), "--clusters", "k80x2,tight4", "--placers", "single,round_robin",
                 "--jobs", "1", "--out", str(out), "--plot"])
    assert code == 0
    lines = (out / "results.csv").read_text().splitlines()
    assert len(lines) == 1 + 2 * 2 * 2
    documented_keys("evaluate-csv", next(csv.DictReader((out / "results.csv").open())))
    md = (out / "results.md").read_text()
    assert "tight4" in md and "round_robin" in md
    assert (out / "ratios.png").stat().st_size > 1000 and (out / "best_timeline.png").stat().st_size > 1000
    # the 1.1 GiB example cannot run on one 1 GiB GPU: the table must say so
    single_tight = [line for line in md.splitlines() if "| tight4 | single |" in line]
    assert single_tight and single_tight[0].split("|")[9].strip() == "1"


def test_evaluate_rejects_unknown_placer_and_cluster(tmp_path, capsys):
    assert main(["evaluate", "-g", str(EXAMPLES), "-p", "magic", "-o", str(tmp_path)]) == 2
    assert "unknown placer 'magic'" in capsys.readouterr().err
    assert main(["evaluate", "-g", str(EXAMPLES), "-c", "k80x99", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error: unknown cluster 'k80x99'") and err.count("\n") == 1


def test_evaluate_refuses_an_out_that_is_a_file_or_empty(tmp_path, capsys):
    taken = tmp_path / "results"
    taken.write_text("mine")
    assert main(["evaluate", "-g", str(EXAMPLES), "-p", "single", "-o", str(taken)]) == 2
    assert "is a file, expected a folder" in capsys.readouterr().err and taken.read_text() == "mine"
    assert main(["evaluate", "-g", str(EXAMPLES), "-p", "single", "-o", ""]) == 2
    assert "--out is empty" in capsys.readouterr().err


def test_evaluate_dataset_graphs_with_every_heuristic(tmp_path, capsys):
    out = tmp_path / "ev"
    graphs = [str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg"), str(ROOT / "datasets" / "nmt" / "nmt_002.gnpg")]
    placers = "single,round_robin,expert,metis,heft,m_etf,m_sct,random_search,annealing"
    assert main(["evaluate", "--graphs", *graphs, "--clusters", "k80x2", "--placers", placers, "--budget", "20",
                 "--jobs", "2", "--out", str(out)]) == 0
    rows = (out / "results.csv").read_text().splitlines()[1:]
    assert len(rows) == 2 * 9
    md = (out / "results.md").read_text()
    for family in ("ptb", "nmt"):
        lines = [line.split("|") for line in md.splitlines() if line.startswith(f"| {family} |")]
        assert len(lines) == 9
        assert all(float(cells[5]) >= 1.0 - 1e-9 for cells in lines)  # nobody beats the best
        assert sum(int(cells[8]) for cells in lines) >= 1  # and somebody is it


def test_in_a_log_file_evaluate_writes_progress_lines_counting_the_rows_a_rerun_reuses(tmp_path, capsys,
                                                                                        monkeypatch):
    import sys

    import gnplace.progress

    monkeypatch.setattr(gnplace.progress, "LINE_EVERY_S", 0.0)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)  # where the bar would be drawn
    out = tmp_path / "ev"
    common = ["evaluate", "--graphs", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "--clusters", "k80x4", "--jobs", "1",
              "--out", str(out)]
    assert main([*common, "--placers", "single,round_robin"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0] for line in lines] == ["evaluate: 1/2 rows (50%)", "evaluate: 2/2 rows (100%)"]
    assert lines[0].endswith("; mlp2x8w2048b512 k80x4 single")
    assert main([*common, "--placers", "single,round_robin,m_etf"]) == 0
    shown = capsys.readouterr()
    assert "reusing 2 saved rows" in shown.out and shown.err.startswith("evaluate: 3/3 rows (100%)")
    assert "left" not in shown.err  # nothing is left


def test_a_rerun_with_another_budget_gives_the_new_result(tmp_path, capsys):
    out = tmp_path / "ev"
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    common = ["evaluate", "--graphs", graph, "--clusters", "k80x4", "--placers", "annealing", "--jobs", "1", "--out", str(out)]
    assert main([*common, "--budget", "5"]) == 0
    assert "reusing" not in capsys.readouterr().out
    assert main([*common, "--budget", "5"]) == 0
    assert f"reusing 1 saved row of {out / 'results.csv'}" in capsys.readouterr().out
    assert main([*common, "--budget", "400"]) == 0
    shown = capsys.readouterr().out
    assert "reusing" not in shown  # another budget: run, and the budget-5 row kept beside it (it was replaced)
    assert "annealing@5 " in shown and "annealing@400 " in shown and "1 row of earlier runs kept" in shown
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [r["budget"] for r in rows] == ["5", "400"]
    from gnplace.evaluate import Task, run_task

    assert float(rows[1]["step_time_s"]) == run_task(Task(graph, "k80x4", "annealing", budget=400)).step_time_s


def test_a_rerun_says_how_many_saved_rows_of_changed_inputs_it_drops(tmp_path, capsys):
    """Rows timed on a graph file since changed were dropped without a word, a placer's not asked for again too."""
    from gnplace.graph_io import save_graph
    from gnplace.toy import mlp_training_graph

    out, graph = tmp_path / "ev", tmp_path / "g.gnpg"
    save_graph(mlp_training_graph(layers=2, width=512, batch=128), graph)
    common = ["evaluate", "-g", str(graph), "-c", "k80x2", "-j", "1", "-o", str(out)]
    assert main([*common, "-p", "single,round_robin"]) == 0
    assert main([*common, "-p", "single"]) == 0
    assert "dropping" not in capsys.readouterr().out
    save_graph(mlp_training_graph(layers=2, width=1024, batch=128), graph)
    assert main([*common, "-p", "single"]) == 0
    shown = capsys.readouterr().out
    assert (f"dropping 2 saved rows of {out / 'results.csv'} timed on inputs that changed since (a graph or cluster "
            "file's content, a placer's revision, a file an option names)") in shown
    assert len(list(csv.DictReader((out / "results.csv").open()))) == 1


def test_placer_options_reach_the_placer(tmp_path, capsys):
    out = tmp_path / "ev"
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    assert main(["evaluate", "-g", graph, "-c", "k80x2", "-p", "annealing,heft", "--budget", "10", "-j", "1", "-o", str(out),
                 "--option", "annealing.start=round_robin", "-O", "annealing.batch=2"]) == 0
    rows = {r["placer"]: r for r in csv.DictReader((out / "results.csv").open())}
    assert json.loads(rows["annealing"]["options"]) == {"batch": 2, "start": "round_robin"}
    assert rows["heft"]["options"] == "{}"
    assert main(["evaluate", "-g", graph, "-p", "heft", "-o", str(out), "-O", "annealing.batch=2"]) == 2
    assert "placer 'annealing' is not among those run" in capsys.readouterr().err
    assert main(["evaluate", "-g", graph, "-p", "heft", "-o", str(out), "-O", "heft=2"]) == 2
    assert "expected PLACER.NAME=VALUE" in capsys.readouterr().err


def test_an_option_may_share_a_task_field_name(tmp_path, capsys):
    """``-O ppo.mode=refine`` is the placer's MDP; the task's ``--mode`` stays the simulator's."""
    out = tmp_path / "ev"
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    assert main(["evaluate", "-g", graph, "-c", "k80x2", "-p", "ppo", "--budget", "64", "-j", "1", "-o", str(out),
                 "-O", "ppo.mode=refine", "-O", "ppo.samples=8", "-O", "ppo.imitation_steps=1", "-O", "ppo.epochs=1"]) == 0
    row = next(csv.DictReader((out / "results.csv").open()))
    assert json.loads(row["options"])["mode"] == "refine" and row["mode"] == "default" and not row["error"]


@pytest.mark.parametrize("name", ["budget", "seed", "timer", "checkpoint"])
def test_shared_options_are_not_per_placer(tmp_path, capsys, name):
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    assert main(["evaluate", "-g", graph, "-p", "annealing", "-o", str(tmp_path), "-O", f"annealing.{name}=5"]) == 2
    assert "shared by every placer" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["ppo.out=runs", "ppo.resume=true", "finetune.out=runs"])
def test_a_search_checkpoint_folder_is_refused_as_many_searches_would_share_it(tmp_path, capsys, option):
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    placer = option.split(".")[0]  # every task after the first failed: "runs holds a run already (last.ckpt)"
    assert main(["evaluate", "-g", graph, "-c", "k80x2,k80x4", "-p", placer, "-o", str(tmp_path / "ev"),
                 "-O", option]) == 2
    assert f"-O {option.split('=')[0]}: evaluate runs {placer} on every graph and cluster" in capsys.readouterr().err
    assert not (tmp_path / "ev").exists()  # refused before any work


def test_the_policy_is_compared_like_any_placer_and_its_checkpoint_keys_the_rows(tmp_path, capsys):
    import torch

    from gnplace.policy.checkpoint import save_policy
    from gnplace.policy.gnn import PlacementPolicy

    torch.manual_seed(0)
    checkpoint = save_policy(tmp_path / "a.ckpt", PlacementPolicy())
    out = tmp_path / "ev"
    args = ["evaluate", "--graphs", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "--clusters", "k80x4", "--placers",
            "auto,policy", "--jobs", "1", "--out", str(out), "--checkpoint", str(checkpoint)]
    assert main(args) == 0
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert {r["placer"] for r in rows} == {"auto", "policy"}
    before = {r["placer"]: r["key"] for r in rows}
    torch.manual_seed(1)
    save_policy(checkpoint, PlacementPolicy())  # new weights in the same file: the policy's row is redone
    assert main(args) == 0
    after = {r["placer"]: r["key"] for r in csv.DictReader((out / "results.csv").open())}
    assert after["auto"] == before["auto"] and after["policy"] != before["policy"]


def test_a_checkpoint_goes_to_the_placers_that_read_its_format(tmp_path, capsys):
    """placeto reads its own format: without --checkpoint it trains from scratch beside the shipped policy."""
    import torch

    from gnplace.policy.checkpoint import save_policy
    from gnplace.policy.gnn import PlacementPolicy

    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    base = ["evaluate", "-g", graph, "-c", "k80x2", "-p", "policy,placeto", "--budget", "20", "-j", "1",
            "-O", "placeto.hidden=8", "-O", "placeto.rounds=2", "-O", "policy.samples=2"]
    assert main([*base, "-o", str(tmp_path / "a")]) == 0
    rows = list(csv.DictReader((tmp_path / "a" / "results.csv").open()))
    assert {r["placer"]: r["error"] for r in rows} == {"policy": "", "placeto": ""}
    torch.manual_seed(0)
    checkpoint = save_policy(tmp_path / "p.ckpt", PlacementPolicy())
    assert main([*base, "-o", str(tmp_path / "b"), "--checkpoint", str(checkpoint)]) == 0
    options = {r["placer"]: json.loads(r["options"]) for r in csv.DictReader((tmp_path / "b" / "results.csv").open())}
    assert options["policy"]["checkpoint"] == str(checkpoint) and "checkpoint" not in options["placeto"]
    capsys.readouterr()
    assert main(["evaluate", "-g", graph, "-c", "k80x2", "-p", "placeto", "--checkpoint", str(checkpoint),
                 "-o", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "is a 'gnplace-policy' checkpoint; of the placers run, these take one: placeto (gnplace-placeto)" in err
    assert main(["evaluate", "-g", graph, "-c", "k80x2", "-p", "single", "--checkpoint", str(checkpoint),
                 "-o", str(tmp_path / "d")]) == 2
    assert "none of the placers run takes a checkpoint" in capsys.readouterr().err


def test_the_timeline_is_of_this_runs_first_graph_not_an_older_runs(tmp_path, capsys):
    import shutil

    out = tmp_path / "ev"
    graphs = sorted(EXAMPLES.glob("*.gnpg"))
    old = tmp_path / "old.gnpg"
    shutil.copy(graphs[0], old)
    assert main(["evaluate", "-g", str(old), "-c", "k80x2", "-p", "single", "-j", "1", "-o", str(out)]) == 0
    old.unlink()  # its row stays in the results file; drawing it would need the file
    assert main(["evaluate", "-g", str(graphs[1]), "-c", "k80x2", "-p", "single,round_robin", "-j", "1", "-o", str(out),
                 "--plot"]) == 0
    assert (out / "best_timeline.png").stat().st_size > 1000 and "no such graph file" not in capsys.readouterr().err


def test_a_cluster_file_named_by_two_paths_is_one_cluster(tmp_path, capsys, monkeypatch):
    """`-c c.yaml,./c.yaml` ran every task twice: two rows of one graph and cluster, summarised as two graphs."""
    import shutil

    from gnplace.graph_io import save_graph
    from gnplace.toy import chain_graph

    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "gnplace" / "clusters" / "k80x2.yaml", "c.yaml")
    save_graph(chain_graph(3), "chain.gnpg")
    code = main(["evaluate", "-g", "chain.gnpg", "-c", f"c.yaml,./c.yaml,{tmp_path / 'c.yaml'}", "-p", "single",
                 "-j", "1", "-o", "ev"])
    assert code == 0
    assert len((tmp_path / "ev" / "results.csv").read_text().splitlines()) == 2  # the header and one row
    assert "| 1 | 1.000 |" in (tmp_path / "ev" / "results.md").read_text()  # one graph


@pytest.mark.parametrize("name, plot", [("results.md", False), ("results.csv", False), ("ratios.png", True),
                                        ("best_timeline.png", True)])
def test_an_output_file_taken_by_a_folder_is_refused_before_any_run(tmp_path, capsys, name, plot):
    """A folder ``results.md`` failed the run with exit 2 once every run was done (their rows saved)."""
    out = tmp_path / "ev"
    (out / name).mkdir(parents=True)
    args = ["evaluate", "-g", str(EXAMPLES), "-c", "k80x2", "-p", "single", "-j", "1", "-o", str(out)]
    assert main([*args, *(["--plot"] if plot else [])]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"gnplace: error: --out {out / name}: is a folder, expected a file\n"
    assert sorted(p.name for p in out.iterdir()) == [name] and "single" not in captured.out  # nothing run
    if plot:  # a figure's name is free when no figure is drawn
        assert main(args) == 0 and (out / "results.csv").is_file()


@pytest.mark.parametrize("budget, placers, message", [
    ("0", "single", "--budget must be at least 1, got 0"),  # was accepted: no placer run took it
    ("-5", "single,heft", "--budget must be at least 1, got -5"),
    ("0", "annealing", "--budget must be at least 1, got 0"),
    (str(10**9 + 1), "annealing", "--budget must be at most 1000000000, got 1000000001"),
    ("5", "single,heft", "--budget: none of the placers run (single, heft) spends an evaluation budget (these do: "),
])
def test_a_budget_is_a_positive_number_of_evaluations_a_placer_run_spends(tmp_path, capsys, monkeypatch, budget,
                                                                          placers, message):
    """As ``gnplace place --budget``: a budget no placer spends is refused, not ignored silently."""
    from gnplace.placers.annealing import AnnealingPlacer

    def ran(self, graph, cluster, *, seed=None):  # a budget of 10**9 + 1 was annealing for hours
        raise AssertionError("refused before any run")

    monkeypatch.setattr(AnnealingPlacer, "place", ran)
    out = tmp_path / "ev"
    assert main(["evaluate", "-g", str(EXAMPLES), "-c", "k80x2", "-p", placers, "--budget", budget, "-j", "1",
                 "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gnplace: error: {message}") and err.count("\n") == 1
    assert not out.exists()


def test_spaces_around_the_names_of_placers_and_clusters_are_dropped(tmp_path, capsys):
    """``-p "single, round_robin"`` was ``unknown placer ' round_robin'``."""
    out = tmp_path / "ev"
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    assert main(["evaluate", "-g", graph, "-c", "k80x2, k80x4", "-p", "single, round_robin ,", "-j", "1",
                 "-o", str(out)]) == 0
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert sorted((r["cluster"], r["placer"]) for r in rows) == [
        ("k80x2", "round_robin"), ("k80x2", "single"), ("k80x4", "round_robin"), ("k80x4", "single")]


def test_a_graph_file_that_cannot_be_read_exits_2_before_any_run(tmp_path, capsys):
    bad = tmp_path / "bad.gnpg"
    bad.write_text("not a graph")
    out = tmp_path / "ev"
    assert main(["evaluate", "-g", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), str(bad), "-c", "k80x2", "-p", "single",
                 "-j", "1", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gnplace: error: {bad}: not a readable gnplace graph file") and err.count("\n") == 1
    assert not (out / "results.csv").exists()


def test_the_timeline_draws_the_placement_the_run_made_without_placing_again(tmp_path, capsys, monkeypatch):
    """--plot placed the best placer's graph a second time to draw it (minutes, and not the same for a learned one)."""
    from gnplace.placers.round_robin import RoundRobinPlacer

    placed = []
    original = RoundRobinPlacer.place

    def counting(self, graph, cluster, *, seed=None):
        placed.append(graph.name)
        return original(self, graph, cluster, seed=seed)

    monkeypatch.setattr(RoundRobinPlacer, "place", counting)
    out = tmp_path / "ev"
    command = ["evaluate", "-g", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "-c", "k80x2", "-p", "round_robin", "-j", "1",
               "-o", str(out), "--plot"]
    assert main(command) == 0
    assert placed == ["mlp2x8w2048b512"] and (out / "best_timeline.png").stat().st_size > 1000
    (out / "best_timeline.png").unlink()
    assert main(command) == 0  # a rerun reuses the row and the placement kept with it
    assert placed == ["mlp2x8w2048b512"] and (out / "best_timeline.png").stat().st_size > 1000


def test_rows_of_a_placer_at_two_budgets_are_summarised_apart(tmp_path, capsys):
    """A run at budget 5 on one graph and one at 20 on another (both rows kept) printed one ``annealing`` line."""
    out = tmp_path / "ev"
    common = ["evaluate", "--clusters", "k80x4", "--placers", "annealing,heft", "--jobs", "1", "--out", str(out),
              "--plot"]
    graphs = [str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg"), str(ROOT / "datasets" / "ptb" / "ptb_005.gnpg")]
    assert main([*common, "--graphs", graphs[0], "--budget", "5"]) == 0
    capsys.readouterr()
    assert main([*common, "--graphs", graphs[1], "--budget", "20"]) == 0
    printed = capsys.readouterr().out  # the second run's table
    md = (out / "results.md").read_text().splitlines()[2:]
    assert [tuple(line.split(" | ")[2:4]) for line in md] == [("annealing@5", "1"), ("annealing@20", "1"), ("heft", "2")]
    assert all(f" {label} " in printed for label in ("annealing@5", "annealing@20", "heft"))
    assert (out / "ratios.png").read_bytes().startswith(b"\x89PNG")


def test_rows_of_a_placer_with_two_option_sets_are_summarised_apart(tmp_path, capsys):
    """A run with ``-O annealing.start=heft`` on one graph and one without on another printed one ``annealing@5``."""
    out = tmp_path / "ev"
    common = ["evaluate", "--clusters", "k80x2", "--placers", "annealing", "--budget", "5", "--jobs", "1",
              "--out", str(out)]
    assert main([*common, "--graphs", str(EXAMPLES / "mlp1x8w6144b256.gnpg"), "-O", "annealing.start=heft"]) == 0
    capsys.readouterr()
    assert main([*common, "--graphs", str(EXAMPLES / "mlp2x8w2048b512.gnpg")]) == 0
    printed = capsys.readouterr().out
    md = (out / "results.md").read_text().splitlines()[2:]
    assert [tuple(line.split(" | ")[2:4]) for line in md] == [("annealing@5", "1"), ("annealing[start=heft]@5", "1")]
    assert " annealing[start=heft]@5 " in printed


def test_two_seeds_of_one_graph_are_one_graph_and_two_runs(tmp_path, capsys):
    """Rows of seeds 0 and 1 of one graph were summarised as 2 graphs."""
    out = tmp_path / "ev"
    common = ["evaluate", "--graphs", str(EXAMPLES / "mlp1x8w6144b256.gnpg"), "--clusters", "k80x2", "--placers",
              "single", "--jobs", "1", "--out", str(out)]
    assert main([*common, "--seed", "0"]) == 0
    capsys.readouterr()
    assert main([*common, "--seed", "1"]) == 0
    printed = capsys.readouterr().out
    (line,) = (out / "results.md").read_text().splitlines()[2:]
    assert line.split(" | ")[2:4] == ["single", "1 (2 runs)"] and " 2/2 " in printed  # best on 2 of 2 runs


def test_the_printed_table_shows_bracketed_names_as_they_are(tmp_path, capsys):
    """rich read the cluster label ``k80x2 [placeto]`` as markup and printed ``k80x2``."""
    assert main(["evaluate", "--graphs", str(EXAMPLES / "mlp1x8w6144b256.gnpg"), "--clusters", "k80x2", "--placers",
                 "single", "--mode", "placeto", "--jobs", "1", "--out", str(tmp_path / "ev")]) == 0
    assert " k80x2 [placeto] " in capsys.readouterr().out


def test_a_row_made_with_a_relative_checkpoint_stands_in_a_rerun_from_another_folder(tmp_path, capsys, monkeypatch):
    """The checkpoint was keyed by its path as typed: from another folder it named no file, so the row was dropped."""
    from gnplace.policy import PlacementPolicy
    from gnplace.policy.checkpoint import save_policy

    (tmp_path / "A").mkdir()
    save_policy(tmp_path / "A" / "my.ckpt", PlacementPolicy())
    out = tmp_path / "out"
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")

    def run(placers, *extra):
        assert main(["evaluate", "--graphs", graph, "--clusters", "k80x2", "--placers", placers, "--jobs", "1",
                     "--out", str(out), *extra]) == 0
        capsys.readouterr()
        with open(out / "results.csv", newline="") as f:
            return list(csv.DictReader(f))

    monkeypatch.chdir(tmp_path / "A")
    (row,) = run("policy", "--checkpoint", "my.ckpt", "-O", "policy.polish=0")
    assert json.loads(row["options"])["checkpoint"] == str((tmp_path / "A" / "my.ckpt").resolve())
    monkeypatch.chdir(tmp_path)
    assert [r["placer"] for r in run("single")] == ["policy", "single"]
    monkeypatch.chdir(tmp_path / "A")  # ./my.ckpt is my.ckpt: the policy's row is reused, not run again
    rows = run("policy", "--checkpoint", "./my.ckpt", "-O", "policy.polish=0")
    assert [r for r in rows if r["placer"] == "policy"] == [row]


@pytest.mark.parametrize("command", ["evaluate", "place"])
@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_checkpoint_path_is_refused_not_dropped(tmp_path, capsys, command, value):
    """``evaluate --checkpoint ""`` (an unset variable) was dropped silently; ``place`` said ": no such checkpoint
    file" of a path of spaces."""
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    args = (["evaluate", "-g", graph, "-c", "k80x2", "-p", "single", "-o", str(tmp_path / "out")]
            if command == "evaluate" else ["place", graph, "-c", "k80x2", "-p", "policy"])
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--checkpoint", value])
    assert exit_.value.code == 2 and "expected a file's path" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_split_of_graph_files_alone_is_refused(tmp_path, capsys):
    """``--split test`` with graph files and no folder was ignored (exit 0)."""
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    args = ["evaluate", "-g", graph, "-c", "k80x2", "-p", "single", "-o", str(tmp_path / "out")]
    assert main([*args, "--split", "test"]) == 2
    assert "--split test chooses among a folder's graphs" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_input_kept_in_out_under_an_output_name_is_refused_not_overwritten(tmp_path, capsys):
    """``evaluate -g OUT/results.md -o OUT`` replaced the input graph with the markdown table."""
    graph = tmp_path / "results.md"
    graph.write_bytes((EXAMPLES / "mlp2x8w2048b512.gnpg").read_bytes())
    kept = graph.read_bytes()
    code = main(["evaluate", "-g", str(graph), "-c", "k80x2", "-p", "single", "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err == f"gnplace: error: --out {graph}: is the input results.md; write to another file\n"
    assert graph.read_bytes() == kept and not (tmp_path / "results.csv").exists()


def test_the_default_jobs_are_the_cores_this_process_may_run_on(monkeypatch):
    """Under ``taskset -c 0`` or a container's cpuset, ``--jobs`` was the machine's core count: a worker per core
    of the host, each importing torch, on the one core there is."""
    import os

    from gnplace.cli import build_parser

    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert build_parser().parse_args(["evaluate", "-g", "x.gnpg"]).jobs == 1


def test_a_results_md_that_is_a_link_is_refused_before_any_run(tmp_path, capsys):
    """--out of a shared folder whose results.md linked to a file elsewhere: evaluate wrote its table over that file."""
    outside = tmp_path / "notes.md"
    outside.write_text("mine")
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.md").symlink_to(outside)
    assert main(["evaluate", "-g", str(EXAMPLES), "-p", "single", "-c", "k80x2", "-o", str(out)]) == 2
    assert "results.md: is a symbolic link" in capsys.readouterr().err
    assert outside.read_text() == "mine" and sorted(p.name for p in out.iterdir()) == ["results.md"]


def test_an_impossible_memory_budget_writes_the_rows_and_exits_2_with_one_line(tmp_path, capsys):
    """It exited 0 with a row out of memory per placer, where ``gnplace place`` refuses the same budget (2)."""
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text("name: tiny\ndevices:\n  - {name: gpu, count: 2, kind: k80, memory: 1 KiB}\nlinks: {default: placeto}\n")
    out = tmp_path / "ev"
    code = main(["evaluate", "-g", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "-c", f"k80x2,{tiny}",
                 "-p", "single,round_robin", "-j", "1", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("gnplace: error: no placement of 'mlp2x8w2048b512' fits the memory of 'tiny': its parameters")
    assert f"the rows are in {out / 'results.csv'}" in err
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == 4  # every row measured is written, those that fit k80x2 too
    assert {r["oom"] for r in rows if r["cluster"] == "tiny"} == {"True"}
    assert {r["oom"] for r in rows if r["cluster"] == "k80x2"} == {"False"}


def test_every_placer_out_of_memory_is_one_warning_line(tmp_path, capsys):
    """The 1.1 GiB example fits tight4 split (round robin), not on one of its 1 GiB GPUs: single alone fits none.

    Its rows are measurements (out of memory), not failures: status 0, and a warning that nothing asked fit."""
    out = tmp_path / "ev"
    args = ["evaluate", "-g", str(EXAMPLES / "mlp1x8w6144b256.gnpg"), "-c", "tight4", "-j", "1", "-o", str(out)]
    code = main([*args, "-p", "single"])
    err = capsys.readouterr().err
    assert code == 0 and err.count("\n") == 1, err
    assert err.startswith("gnplace: warning: no placer fit 'mlp1x8w6144b256' in the memory of 'tight4'")
    assert len((out / "results.csv").read_text().splitlines()) == 2
    assert main([*args, "-p", "single,round_robin"]) == 0  # one placement fits: nothing failed
    assert capsys.readouterr().err == ""


def test_the_failed_runs_line_escapes_the_names_it_quotes(tmp_path, capsys):
    """A graph named with ESC's sequences and a newline (a file someone shared) failed a run: the line that counts the
    failures printed the name as it was, recolouring the terminal and going on on a second line."""
    from gnplace.graph_io import load_graph, save_graph

    graph = load_graph(EXAMPLES / "mlp2x8w2048b512.gnpg")
    graph = graph.replace(name="g\x1b[31mred\nnext")
    path = save_graph(graph, tmp_path / "evil.gnpg")
    code = main(["evaluate", "-g", str(path), "-c", "k80x2", "-p", "single,exact", "-O", "exact.max_groups=2",
                 "-j", "1", "-o", str(tmp_path / "ev")])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "\x1b" not in err, err
    assert "first: exact on g\\x1b[31mred\\x0anext k80x2: " in err


def test_evaluate_with_no_placers_runs_every_non_learned_one_but_exact_and_succeeds_on_a_shipped_graph(tmp_path,
                                                                                                      capsys):
    """With exact among them (it refuses graphs of more than 60 groups) the default run of a shipped family's graph
    ended "1 of 11 runs failed", exit 1."""
    from gnplace.cli.evaluate import default_placers
    from gnplace.placers.registry import PLACERS

    assert default_placers() == [name for name in PLACERS.names(learned=False) if name != "exact"]
    assert main(["evaluate", "-g", "datasets/examples/mlp2x8w2048b512.gnpg", "-c", "k80x2", "--budget", "5",
                 "-o", str(tmp_path / "ev")]) == 0
    rows = (tmp_path / "ev" / "results.csv").read_text().splitlines()
    assert len(rows) == 1 + len(default_placers()) and not any(",exact," in row for row in rows)


def test_a_placer_progress_bar_asked_for_is_refused_as_evaluate_turns_it_off(tmp_path, capsys):
    """``-O ppo.progress=true`` was accepted and did nothing: every run's own bar is off (one bar of the rows)."""
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    assert main(["evaluate", "-g", graph, "-c", "k80x2", "-p", "ppo", "--budget", "60", "-o", str(tmp_path / "ev"),
                 "-O", "ppo.progress=true"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error: -O ppo.progress=true: evaluate shows one bar of its rows") and err.count(
        "\n") == 1
    assert not (tmp_path / "ev").exists()


def test_the_table_title_counts_in_words_and_says_when_it_holds_rows_of_earlier_runs(tmp_path, capsys):
    """A rerun with another placer printed "1 graphs x 1 clusters x 1 placers" over a table of two placers' lines."""
    out = tmp_path / "ev"
    common = ["evaluate", "--graphs", str(EXAMPLES / "mlp1x8w6144b256.gnpg"), "--clusters", "k80x2", "--jobs", "1",
              "--out", str(out)]
    assert main([*common, "--placers", "single,round_robin"]) == 0
    assert "1 graph x 1 cluster x 2 placers (geometric means)" in capsys.readouterr().out
    assert main([*common, "--placers", "heft"]) == 0
    printed = capsys.readouterr().out
    assert "1 graph x 1 cluster x 1 placer, and 2 rows of earlier runs kept in results.csv (geometric" in printed
    assert all(f" {name} " in printed for name in ("heft", "round_robin", "single"))


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_a_sigterm_to_a_run_of_workers_is_one_line_and_143(tmp_path):
    """``kill`` of ``gnplace evaluate -j 2`` printed only multiprocessing's warning of "leaked semaphore objects"
    (the process ended at once, its workers' finished rows unsaved)."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("finds the workers in Linux's /proc")
    graphs = [str(ROOT / "datasets" / "ptb" / f"ptb_{i:03d}.gnpg") for i in (2, 5)]
    arguments = ["-g", *graphs, "-c", "k80x2", "-p", "annealing", "--budget", "1000000", "-j", "2",
                 "-o", str(tmp_path / "out")]
    # two workers and the resource tracker started
    assert _killed_once(arguments, tmp_path, lambda run: len(_children(run.pid)) >= 3) == (
        143, "gnplace: SIGTERM: interrupted\n")


def _killed_once(arguments, cwd, ready):
    """``(exit status, stderr)`` of ``gnplace evaluate ARGUMENTS`` sent a SIGTERM a second after ``ready(run)``."""
    import signal
    import subprocess
    import sys
    import time

    run = subprocess.Popen([sys.executable, "-m", "gnplace", "evaluate", *arguments],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        began = time.monotonic()
        while not ready(run) and time.monotonic() - began < 120:
            time.sleep(0.2)
        time.sleep(1.0)
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=60)
    finally:
        run.kill()
    return run.returncode, err


def test_the_printed_table_counts_each_lines_failed_runs_as_results_md_does(tmp_path, capsys):
    """A failed run was a row of results.csv and counted in results.md's errors column, but the printed table had no
    such column: exact's line read "nan ... 0/1 0" beside single's, a failure shown as a run that found nothing."""
    out = tmp_path / "ev"
    argv = ["evaluate", "-g", str(EXAMPLES / "mlp1x8w6144b256.gnpg"), "-c", "k80x2", "-p", "exact,single", "-O",
            "exact.max_groups=1", "-j", "1", "-o", str(out)]
    assert main(argv) == 1
    table = [[c.strip() for c in re.split("[│┃]", line)[1:-1]] for line in capsys.readouterr().out.splitlines()
             if line.startswith(("│", "┃"))]
    columns, cells = table[0], {line[2]: line for line in table[1:]}
    assert columns[-3:] == ["OOM", "errors", "place s"]
    assert cells["exact"][columns.index("errors")] == "1" and cells["single"][columns.index("errors")] == "0"
    assert "| 1 | nan |" in (out / "results.md").read_text()  # (its errors column and place s, as before)


def test_a_sigterm_to_a_run_in_one_process_is_one_line_and_143(tmp_path):
    """``kill`` of ``gnplace evaluate -j 1`` ended it with 143 and no word, where ``-j 2`` says "SIGTERM"."""
    graph, out = str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg"), tmp_path / "out"
    arguments = ["-g", graph, "-c", "k80x2", "-p", "single,annealing", "--budget", "1000000", "-j", "1", "-o", str(out)]

    def saved(run):  # single's row is saved: annealing runs
        return (out / "results.csv").exists() and len((out / "results.csv").read_text().splitlines()) >= 2

    assert _killed_once(arguments, tmp_path, saved) == (143, "gnplace: SIGTERM: interrupted\n")
    assert [row["placer"] for row in csv.DictReader((out / "results.csv").open())] == ["single"]


def test_rows_of_a_copy_of_the_graph_run_before_are_not_this_runs(tmp_path, capsys):
    """A copy of a graph file elsewhere has the same row keys: its saved rows were counted as this run's.

    The second run said "2 of 2 runs failed" (one had) and its title left the copy's rows out of those of earlier runs.
    """
    out = tmp_path / "ev"
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "g.gnpg").write_bytes((EXAMPLES / "mlp1x8w6144b256.gnpg").read_bytes())
    argv = ["evaluate", "-c", "k80x2", "-p", "exact,single", "-O", "exact.max_groups=1", "-j", "1", "-o", str(out)]
    assert main([*argv, "-g", str(tmp_path / "a" / "g.gnpg")]) == 1
    assert "1 of 2 runs failed" in capsys.readouterr().err
    assert main([*argv, "-g", str(tmp_path / "b" / "g.gnpg")]) == 1
    captured = capsys.readouterr()
    assert "1 of 2 runs failed" in captured.err, captured.err
    assert "and 2 rows of earlier runs kept" in captured.out, captured.out
