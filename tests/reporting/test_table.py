"""``scripts/reporting/table.py``: section 1, every placer through ``gnplace.evaluate``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_section_one_summarises_this_runs_tasks_alone(tmp_path, load_script):
    """An earlier run's rows of another placer stay in the folder: they are neither rows nor the best of this table."""
    from gnplace.evaluate import Task, evaluate
    from gnplace.evaluate_summary import summarise

    table = load_script("reporting.table")
    graph = str(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    evaluate([Task(graph, "k80x2", "single"), Task(graph, "k80x2", "heft")], tmp_path)  # the earlier run
    tasks = [Task(graph, "k80x2", "single")]
    rows = evaluate(tasks, tmp_path)
    assert len(rows) == 2  # the folder's rows: the other placer's too
    (line,) = summarise(table.rows_of(tasks, rows))
    assert line["placer"] == "single" and line["vs_best"] == 1.0 and line["best_count"] == 1


def test_section_one_prints_each_placement_and_what_an_earlier_run_saved(tmp_path, load_script, capsys):
    """Section 1 (a thousand placements in a full report) says how many are saved and each one as it finishes."""
    from gnplace.evaluate import Task

    table = load_script("reporting.table")
    graph = str(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    tasks = [Task(graph, "k80x2", "single"), Task(graph, "k80x2", "heft"), Task(graph, "k80x2", "single")]
    assert len(table.table_placements(tasks, tmp_path, 1)) == 2
    out = capsys.readouterr().out
    assert "[report] section 1: 0 saved, 2 to run" in out
    assert "[report] section 1 1/2: mlp1x8w6144b256|k80x2|single" in out and "section 1 2/2: " in out
    rows = table.table_placements([*tasks, Task(graph, "k80x2", "m_etf")], tmp_path, 1)
    out = capsys.readouterr().out
    assert len(rows) == 3 and "section 1: 2 saved, 1 to run" in out and "section 1 1/1: mlp1x8w6144b256|k80x2|m_etf" in out


def test_section_one_says_how_many_saved_rows_of_a_changed_cluster_file_it_drops(tmp_path, load_script, capsys):
    """A cluster file edited between two reports: its saved rows went without a word, where gnplace evaluate and
    bench.py search print stale_note's line."""
    import shutil

    from gnplace.evaluate import Task

    table = load_script("reporting.table")
    graph = str(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    cluster = tmp_path / "c.yaml"
    shutil.copy2(ROOT / "gnplace" / "clusters" / "k80x2.yaml", cluster)
    tasks = [Task(graph, str(cluster), "single"), Task(graph, str(cluster), "heft")]
    table.table_placements(tasks, tmp_path / "out", 1)
    cluster.write_text(cluster.read_text().replace("count: 2", "count: 3"))
    capsys.readouterr()
    assert len(table.table_placements(tasks[:1], tmp_path / "out", 1)) == 1
    out = capsys.readouterr().out
    assert f"[report] section 1: dropping 2 saved rows of {tmp_path / 'out' / 'results.csv'} timed on inputs" in out


def test_section_one_leaves_out_the_rows_of_a_copy_of_a_graph_file(tmp_path, load_script):
    """A copy of a graph file at another path has the same key: by key alone, the rows an earlier run saved of the
    copy were this table's rows too (two rows of single for one task)."""
    import shutil

    from gnplace.evaluate import Task, evaluate

    table = load_script("reporting.table")
    graph = ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg"
    copy = tmp_path / "copy" / graph.name
    copy.parent.mkdir()
    shutil.copy2(graph, copy)
    evaluate([Task(str(copy), "k80x2", "single")], tmp_path / "out")  # the earlier run, of the copy
    tasks = [Task(str(graph), "k80x2", "single")]
    rows = evaluate(tasks, tmp_path / "out")
    assert len(rows) == 2 and len({r.key for r in rows}) == 1
    (mine,) = table.rows_of(tasks, rows)
    assert Path(mine.graph_path) == graph.resolve()
