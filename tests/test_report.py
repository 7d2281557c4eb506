"""``scripts/bench.py report``: the benchmark report, its quick mode end to end, and its helpers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_revised_names_carry_the_revision_and_the_shipped_checkpoint(tmp_path, monkeypatch, load_script):
    from gnplace.rl.zeroshot import PolicyPlacer

    report = load_script("report")
    assert report.revised("single") == "single" and report.revised("no_such_placer") == "no_such_placer"
    ckpt = tmp_path / "shipped.ckpt"
    ckpt.write_bytes(b"old weights")
    monkeypatch.setattr(PolicyPlacer, "default_checkpoint", ckpt)
    built = tmp_path / "construct.ckpt"
    built.write_bytes(b"old constructor")
    monkeypatch.setattr(PolicyPlacer, "default_files", {"constructor": built})
    first = report.revised("policy")
    assert re.fullmatch(rf"policy@{PolicyPlacer.revision}\+[0-9a-f]{{8}}\+[0-9a-f]{{8}}", first)
    ckpt.write_bytes(b"new weights")
    assert report.revised("policy") != first  # a new checkpoint: the report runs the policy's rows again
    second = report.revised("policy")
    built.write_bytes(b"new constructor")
    assert report.revised("policy") != second  # so does a new constructor


def test_store_resumes_and_skips_a_line_cut_short(tmp_path, load_script):
    report = load_script("report")
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"key": "a", "v": 1}) + "\n" + '{"key": "b", "v"')
    store = report.Store(path)
    assert set(store.rows) == {"a"}
    ran = []
    rows = store.run([{"key": "a"}, {"key": "b"}], lambda t: ran.append(t["key"]) or {**t, "v": 2}, 1, "test")
    assert ran == ["b"] and [r["v"] for r in rows] == [1, 2]
    assert set(report.Store(path).rows) == {"a", "b"}


def test_section_one_summarises_this_runs_tasks_alone(tmp_path, load_script):
    """An earlier run's rows of another placer stay in the folder: they are neither rows nor the best of this table."""
    from gnplace.evaluate import Task, evaluate, summarise

    report = load_script("report")
    graph = str(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    evaluate([Task(graph, "k80x2", "single"), Task(graph, "k80x2", "heft")], tmp_path)  # the earlier run
    tasks = [Task(graph, "k80x2", "single")]
    rows = evaluate(tasks, tmp_path)
    assert len(rows) == 2  # the folder's rows: the other placer's too
    (line,) = summarise(report.rows_of(tasks, rows))
    assert line["placer"] == "single" and line["vs_best"] == 1.0 and line["best_count"] == 1


def test_section_one_prints_each_placement_and_what_an_earlier_run_saved(tmp_path, load_script, capsys):
    """Section 1 (a thousand placements in a full report) says how many are saved and each one as it finishes."""
    from gnplace.evaluate import Task

    report = load_script("report")
    graph = str(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    tasks = [Task(graph, "k80x2", "single"), Task(graph, "k80x2", "heft"), Task(graph, "k80x2", "single")]
    assert len(report.table_placements(tasks, tmp_path, 1)) == 2
    out = capsys.readouterr().out
    assert "[report] section 1: 0 saved, 2 to run" in out
    assert "[report] section 1 1/2: mlp1x8w6144b256|k80x2|single" in out and "section 1 2/2: " in out
    rows = report.table_placements([*tasks, Task(graph, "k80x2", "m_etf")], tmp_path, 1)
    out = capsys.readouterr().out
    assert len(rows) == 3 and "section 1: 2 saved, 1 to run" in out and "section 1 1/1: mlp1x8w6144b256|k80x2|m_etf" in out


@pytest.mark.parametrize("option, value, message", [
    ("--doc", "FOLDER", "--doc FOLDER: is a folder, expected a file"),
    ("--doc", "FILE/RESULTS.md", "--doc FILE/RESULTS.md: cannot write there"),
    ("--cache", "FILE", "--cache FILE: is a file, expected a folder"),
    ("--figures", "FILE/figures", "--figures FILE/figures: cannot write there"),
])
def test_report_refuses_where_it_cannot_write_before_any_run(tmp_path, load_script, capsys, monkeypatch, option,
                                                              value, message):
    """A report that could not be written once its runs are done (21 minutes in) is one error line at the start."""
    import gnplace.evaluate

    def no_runs(*args, **kwargs):
        raise AssertionError("placed before the report's files were checked")

    monkeypatch.setattr(gnplace.evaluate, "evaluate", no_runs)
    (tmp_path / "FILE").write_text("a file")
    (tmp_path / "FOLDER").mkdir()
    given = str(tmp_path / value)
    argv = ["report", "--quick", "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"), "--jobs", "1",
            option, given]
    code = load_script("bench").main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("bench: error: " + message.replace(value, given)), err
    assert not (tmp_path / "out").exists()


def test_minutes_spent_add_up_and_survive_a_file_cut_short(tmp_path, load_script):
    """A resumed report adds its minutes; an ``elapsed.json`` emptied by a kill counts as none, never a traceback."""
    report = load_script("report")
    path = tmp_path / "elapsed.json"
    assert report.add_minutes(path, 1.5) == 1.5 and report.add_minutes(path, 2.0) == 3.5
    path.write_text('{"minu')  # a kill while the file was written
    assert report.add_minutes(path, 1.0) == 1.0 and json.loads(path.read_text()) == {"minutes": 1.0}
    assert [p.name for p in tmp_path.iterdir()] == ["elapsed.json"]  # no temporary file left


def test_quick_report_runs_end_to_end_and_resumes(tmp_path):
    doc, figures, out = tmp_path / "RESULTS.md", tmp_path / "figures", tmp_path / "out"
    command = [sys.executable, str(ROOT / "scripts" / "bench.py"), "report", "--quick", "--out", str(out),
               "--doc", str(doc), "--figures", str(figures), "--jobs", "1", "--cache", str(tmp_path / "graphs")]
    first = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    text = doc.read_text()
    for heading in ("## 1. Every placer", "## 2. Learned placers", "## 3. The seeds' claims",
                    "## 4. Against the proved optimum", "## 5. Time to place"):
        assert heading in text
    assert "python scripts/bench.py report --quick" in text and "cores" in text  # the command, the machine
    for placer in ("rnn_pg", "hierarchical", "spotlight", "post", "placeto", "placeto_zs", "policy", "finetune"):
        assert f"| {placer} |" in text
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(images) == 3 and all((doc.parent / image).is_file() for image in images)
    # a rerun finds every run saved and places nothing again; without --doc and --figures a quick report is
    # written under --out, never over the committed docs/RESULTS.md
    committed = (ROOT / "docs" / "RESULTS.md").read_bytes()
    second = subprocess.run([c for c in command if c not in (str(doc), str(figures), "--doc", "--figures")],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert (ROOT / "docs" / "RESULTS.md").read_bytes() == committed
    assert "(quick)" in (out / "RESULTS.md").read_text() and list((out / "figures").glob("report_*.png"))
    assert re.search(r"section 1: \d+ saved, 0 to run", second.stdout)
    assert re.search(r"section 2: \d+ saved, 0 to run", second.stdout)
    assert re.search(r"section 4: \d+ saved, 0 to run", second.stdout)


def test_a_placer_keeps_one_colour_whether_drawn_as_a_line_or_a_star(tmp_path, load_script, monkeypatch):
    import matplotlib.figure
    from matplotlib.colors import to_hex

    report = load_script("report")
    colours = {}
    real_savefig = matplotlib.figure.Figure.savefig

    def keep_colours(figure, *args, **kwargs):
        for ax in figure.axes:
            colours.update({line.get_label(): to_hex(line.get_color()) for line in ax.get_lines()
                            if not line.get_label().startswith("_")})
            colours.update({dots.get_label(): to_hex(dots.get_facecolor()[0]) for dots in ax.collections})
        return real_savefig(figure, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep_colours)
    rows = [dict(family=family, cluster="k80x4", name=f"{family}_002", placer=placer, history=history)
            for family in ("ptb", "nmt")
            for placer, history in (("finetune", [[1, 1.0], [60, 0.92]]), ("policy", [[80, 0.91]]),
                                    ("ppo", [[1, 1.0], [200, 0.9]]))]
    report.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    assert len(set(colours.values())) == 3  # the policy's star was drawn in finetune's colour
