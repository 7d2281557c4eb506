"""The evaluation harness: tasks, resumable results, summary ratios."""

from __future__ import annotations

import math

import pytest

from gnplace.evaluate import Row, Task, collect_graphs, evaluate, run_task, summarise, write_markdown
from gnplace.exceptions import GnplaceError
from gnplace.graph_io import save_graph
from gnplace.toy import mlp_training_graph


@pytest.fixture()
def graphs(tmp_path):
    folder = tmp_path / "graphs"
    for layers in (2, 3):
        save_graph(mlp_training_graph(layers=layers, width=512, batch=128, branches=2), folder / f"mlp{layers}.gnpg")
    return folder


def test_collect_graphs(graphs, tmp_path):
    assert [p.name for p in collect_graphs([str(graphs)])] == ["mlp2.gnpg", "mlp3.gnpg"]
    assert len(collect_graphs([str(graphs / "mlp2.gnpg")])) == 1
    with pytest.raises(GnplaceError, match="no such graph file or folder"):
        collect_graphs([str(tmp_path / "missing")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(GnplaceError, match="no graphs"):
        collect_graphs([str(tmp_path / "empty")])


def test_run_task_times_the_placement(graphs):
    row = run_task(Task(str(graphs / "mlp2.gnpg"), "k80x2", "round_robin"))
    assert row.cluster == "k80x2" and row.placer == "round_robin" and not row.oom and not row.error
    assert row.bound_s <= row.step_time_s and row.bound_s <= row.single_s
    single = run_task(Task(str(graphs / "mlp2.gnpg"), "k80x2", "single"))
    assert single.step_time_s == pytest.approx(single.single_s)


def test_evaluate_writes_rows_and_resumes(graphs, tmp_path):
    tasks = [Task(str(g), c, p) for g in collect_graphs([str(graphs)]) for c in ("k80x2", "tight4") for p in ("single", "round_robin")]
    out = tmp_path / "out"
    seen = []
    rows = evaluate(tasks, out, progress=seen.append)
    assert len(rows) == len(seen) == 8
    again = []
    rows2 = evaluate(tasks, out, progress=again.append)
    assert again == [] and len(rows2) == 8  # nothing run twice
    # a line cut short by an interruption is run again
    text = (out / "results.csv").read_text().splitlines()
    (out / "results.csv").write_text("\n".join(text[:-1] + [text[-1][:10]]) + "\n")
    redo = []
    evaluate(tasks, out, progress=redo.append)
    assert len(redo) == 1


def test_evaluate_in_worker_processes_matches_serial(graphs, tmp_path):
    tasks = [Task(str(g), "k80x4", "round_robin") for g in collect_graphs([str(graphs)])]
    serial = evaluate(tasks, tmp_path / "a")
    parallel = evaluate(tasks, tmp_path / "b", jobs=2)
    assert [r.step_time_s for r in serial] == [r.step_time_s for r in parallel]


def row(path: str, placer: str, step: float, *, oom: bool = False, single: float = 4.0, bound: float = 1.0) -> Row:
    return Row(graph=path, family="f", graph_path=path, ops=1, groups=1, cluster="c", placer=placer, seed=0,
               step_time_s=step, bound_s=bound, single_s=single, peak_memory_bytes=0.0, oom=oom, place_seconds=0.5)


def test_summary_ratios_are_geometric_means_against_the_best_feasible(tmp_path):
    rows = [
        row("g1", "a", 2.0), row("g1", "b", 1.0), row("g1", "c", 0.5, oom=True),
        row("g2", "a", 1.0), row("g2", "b", 4.0), row("g2", "c", 1.0),
    ]
    by = {s["placer"]: s for s in summarise(rows)}
    assert by["a"]["vs_best"] == pytest.approx(math.sqrt(2.0 * 1.0))
    assert by["b"]["vs_best"] == pytest.approx(math.sqrt(1.0 * 4.0))
    assert by["c"]["vs_best"] == pytest.approx(1.0) and by["c"]["oom"] == 1  # OOM rows excluded from ratios
    assert by["a"]["vs_single"] == pytest.approx(math.sqrt(0.5 * 0.25))
    assert by["b"]["best_count"] == 1 and by["a"]["best_count"] == 1
    md = write_markdown(summarise(rows), tmp_path / "r.md").read_text()
    assert md.count("\n") == 2 + 3 and "| f | c | a | 2 |" in md
