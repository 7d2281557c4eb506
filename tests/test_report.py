"""``scripts/bench.py report``: the benchmark report, its quick mode end to end, and its helpers."""

from __future__ import annotations

import argparse
import json
import math
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
    uses = r"\+uses expert@1,heft@1,m_etf@3,m_sct@3,metis@1"  # auto's candidates (policy samples around auto's placement) since 2026-12-04
    assert re.fullmatch(rf"policy@{PolicyPlacer.revision}\+[0-9a-f]{{8}}\+[0-9a-f]{{8}}{uses}", first)
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


def test_a_saved_row_without_a_field_the_report_reads_is_made_again(tmp_path, load_script):
    # a line edited by hand (its history cut out) was a KeyError once every task had run
    report = load_script("report")
    path = tmp_path / "learned.jsonl"
    full = {"key": "a", **{field: 1 for field in report.LEARNED_FIELDS}}
    path.write_text(json.dumps({k: v for k, v in full.items() if k != "history"}) + "\n" + json.dumps({**full, "key": "b"}))
    ran = []
    rows = report.Store(path).run([{"key": "a"}, {"key": "b"}], lambda t: ran.append(t["key"]) or {**full, **t}, 1,
                                  "test", fields=report.LEARNED_FIELDS)
    assert ran == ["a"] and all("history" in r for r in rows)


@pytest.mark.parametrize("history", [[], [[1, float("nan")]], [[1, 1.1], [8, -0.5]], [[0.5]], None])
def test_a_saved_row_whose_learning_curve_the_report_cannot_read_is_made_again(tmp_path, load_script, history):
    """A line edited by hand with ``"history": []`` stood, and the seeds' claims raised IndexError after every section
    had run (``rb["history"][-1][1]``); a curve with a point the figure leaves out is made again too."""
    report = load_script("report")
    path = tmp_path / "learned.jsonl"
    full = {"key": "a", **_learned_row(report), "history": [[1, 1.1], [8, 0.9]]}
    path.write_text(json.dumps({**full, "history": history}) + "\n" + json.dumps({**full, "key": "b"}) + "\n")
    ran = []
    rows = report.Store(path).run([{"key": "a"}, {"key": "b"}], lambda t: ran.append(t["key"]) or {**full, **t}, 1,
                                  "test", fields=report.LEARNED_FIELDS, readable=report.learned_row_readable)
    assert ran == ["a"] and [r["history"] for r in rows] == [full["history"]] * 2


def _learned_row(report):
    """A row of section 2 with each field the report reads, of the kind :func:`learned_row` writes."""
    return {**{field: 1 for field in report.LEARNED_FIELDS}, "graph": "g.gnpg", "cluster": "k80x4", "placer": "post",
            "family": "ptb", "name": "g", "step_s": 0.01, "vs_auto": 0.9, "vs_bound": 1.5, "oom": False,
            "seconds": 2.5, "evaluations": 64, "updates": None, "history": [[1, 1.1], [8, 0.9]]}


@pytest.mark.parametrize(("section", "field", "value"), [
    ("learned", "oom", None), ("learned", "evaluations", None), ("learned", "seconds", "2.5"),
    ("learned", "family", None), ("learned", "step_s", None), ("learned", "vs_auto", True),
    ("learned", "vs_bound", None), ("exact", "auto", None), ("exact", "exact_ms", "5.5"),
    ("scale", "placer", None)])
def test_a_saved_row_holding_a_value_of_another_kind_than_the_report_reads_is_made_again(tmp_path, load_script,
                                                                                          section, field, value):
    """A line edited by hand (``"oom": null``, ``"auto": null``) stood, and the report was a TypeError once every
    section had run (section 2's table, section 4's, the figures); it is made again, as a row without a field is."""
    report = load_script("report")
    full, fields, readable = {
        "learned": (_learned_row(report), report.LEARNED_FIELDS, report.learned_row_readable),
        "exact": ({"name": "g@12", "groups_placed": 12, "status": "optimal", "exact_ms": 5.5, "auto": 1.07,
                   "policy": 1.01}, report.EXACT_FIELDS, report.exact_row_readable),
        "scale": ({"ops": 500, "placer": "m_etf", "seconds": 0.4}, report.SCALE_FIELDS, report.scale_row_readable),
    }[section]
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"key": "a", **full, field: value}) + "\n" + json.dumps({"key": "b", **full}) + "\n")
    ran = []
    rows = report.Store(path).run([{"key": "a"}, {"key": "b"}], lambda t: ran.append(t["key"]) or {**full, **t}, 1,
                                  "test", fields=fields, readable=readable)
    assert ran == ["a"] and [r[field] for r in rows] == [full[field]] * 2


def test_a_row_the_disk_has_no_room_for_names_the_file_and_leaves_no_half_line(tmp_path, load_script, disk_fills_in):
    import errno

    report = load_script("report")
    path = tmp_path / "rows.jsonl"
    store = report.Store(path)
    store.add({"key": "a", "v": 1})
    before = path.read_bytes()
    disk_fills_in(path)
    with pytest.raises(OSError) as caught:
        store.add({"key": "b", "v": 2})
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(path))
    assert path.read_bytes() == before and set(store.rows) == {"a"}


def test_section_one_summarises_this_runs_tasks_alone(tmp_path, load_script):
    """An earlier run's rows of another placer stay in the folder: they are neither rows nor the best of this table."""
    from gnplace.evaluate import Task, evaluate
    from gnplace.evaluate_summary import summarise

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


@pytest.mark.parametrize("saved", ['{"minutes": NaN}', '{"minutes": Infinity}', '{"minutes": -5}'])
def test_minutes_that_are_no_count_count_as_none(tmp_path, load_script, saved):
    """An ``elapsed.json`` edited to ``"minutes": NaN`` made every later report say it took "nan minutes"."""
    report = load_script("report")
    path = tmp_path / "elapsed.json"
    path.write_text(saved)
    assert report.add_minutes(path, 1.5) == 1.5 and json.loads(path.read_text()) == {"minutes": 1.5}


def test_a_report_cut_short_counts_the_minutes_it_spent(tmp_path, load_script, monkeypatch, capsys):
    """Ctrl-C in a section booked none of the run's minutes: the resumed report said the last run's alone."""
    import time

    import gnplace.evaluate

    def interrupted(*args, **kwargs):  # section 1's placements, a while in
        time.sleep(0.06)
        raise KeyboardInterrupt

    monkeypatch.setattr(gnplace.evaluate, "evaluate", interrupted)
    out = tmp_path / "out"
    bench = load_script("bench")
    assert bench.main(["report", "--quick", "--jobs", "1", "--out", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err
    saved = json.loads((out / "elapsed.json").read_text())
    assert saved["quick"] is True and saved["minutes"] >= 0.06 / 60  # was 0.0


@pytest.mark.heavy
def test_quick_report_runs_end_to_end_and_resumes(tmp_path, capsys, load_script):
    doc, figures, out = tmp_path / "RESULTS.md", tmp_path / "figures", tmp_path / "out"
    # the bench's main in this process (``--jobs 1`` runs here): no start-up of its own
    command = ["report", "--quick", "--out", str(out), "--doc", str(doc), "--figures", str(figures), "--jobs", "1",
               "--cache", str(tmp_path / "graphs")]
    bench = load_script("bench")
    assert bench.main(command) == 0
    text = doc.read_text()
    for heading in ("## 1. Every placer", "## 2. Learned placers", "## 3. The seeds' claims",
                    "## 4. Against the proved optimum", "## 5. Time to place", "## 6. The search placers' learning curves"):
        assert heading in text
    # the command as given, the machine
    assert f"python scripts/bench.py report --quick --out {out} --doc {doc} --figures {figures} --cache" in text
    assert "cores" in text
    for placer in ("rnn_pg", "hierarchical", "spotlight", "post", "placeto", "placeto_zs", "policy", "finetune"):
        assert f"| {placer} |" in text
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    # every figure the documentation shows: the report's three, docs/baselines.md's and the README's search curves
    assert [Path(image).name for image in images] == ["baselines_ratios.png", "report_learned.png",
                                                      "report_curves.png", "report_scale.png", "curve_ptb_002_k80x4.png"]
    assert all((doc.parent / image).is_file() for image in images) and (figures / "curve_ptb_002_k80x4.json").is_file()
    assert "| ptb_002 (k80x4) | ppo |" in text and "| ptb_002 (k80x4) | annealing |" in text
    # a rerun finds every run saved and places nothing again; without --doc and --figures a quick report is
    # written under --out, never over the committed docs/RESULTS.md
    committed = (ROOT / "docs" / "RESULTS.md").read_bytes()
    capsys.readouterr()
    rerun = [c for c in command if c not in (str(doc), str(figures), "--doc", "--figures")]
    assert bench.main(rerun) == 0
    second = capsys.readouterr().out
    assert (ROOT / "docs" / "RESULTS.md").read_bytes() == committed
    assert "(quick)" in (out / "RESULTS.md").read_text() and list((out / "figures").glob("report_*.png"))
    assert re.search(r"section 1: \d+ saved, 0 to run", second)
    assert re.search(r"section 2: \d+ saved, 0 to run", second)
    assert re.search(r"section 4: \d+ saved, 0 to run", second)
    assert re.search(r"section 5: \d+ saved, 0 to run", second) and "placeto pretrained on ptb: saved" in second
    assert "section 1, every non-learned placer: 10 saved, 0 to run" in second
    assert "section 6: 3 saved, 0 to run" in second


def test_sections_five_and_placetos_pretraining_say_what_they_reused(tmp_path, load_script, monkeypatch, capsys):
    """A rerun said what sections 1, 2 and 4 reused, and nothing of section 5's rows or Placeto's saved model; a saved
    section 5 row without seconds, or whose seconds are NaN, is made again."""
    from gnplace.toy import layered_graph

    report = load_script("report")
    graph = layered_graph(8, width=2, seed=0)
    monkeypatch.setattr(report, "large_graph", lambda ops, cache: graph)
    config = report.Config(scale_ops=(500,), scale_placers=("m_etf", "single"), scale_budget=4)
    store = report.Store(tmp_path / "scale.jsonl")
    store.add({"key": f"scale|500|{report.revised('m_etf')}|4", "ops": graph.num_ops, "placer": "m_etf",
               "seconds": 0.25, "budget": None, "graph_fingerprint": graph.fingerprint()})
    rows = report.scale_rows(config, tmp_path, store)
    assert [(r["placer"], r["seconds"] == 0.25) for r in rows] == [("m_etf", True), ("single", False)]
    assert "[report] section 5: 1 saved, 1 to run" in capsys.readouterr().out
    edited = {k: v for k, v in store.rows[f"scale|500|{report.revised('m_etf')}|4"].items() if k != "seconds"}
    store.add(edited)  # a line edited by hand: its seconds were a KeyError in the report's table
    rows = report.scale_rows(config, tmp_path, store)
    assert all("seconds" in r for r in rows) and "[report] section 5: 1 saved, 1 to run" in capsys.readouterr().out
    store.add({**edited, "seconds": math.nan})  # saved as JSON's NaN, read back as one: reused, a "-" in the table
    rows = report.scale_rows(config, tmp_path, store)
    assert all(math.isfinite(r["seconds"]) for r in rows)
    assert "[report] section 5: 1 saved, 1 to run" in capsys.readouterr().out
    assert report.Store(tmp_path / "scale.jsonl").rows[edited["key"]]["seconds"] > 0  # the row made again, saved
    quick = report.QUICK
    saved = report.placeto_checkpoint("ptb", quick, "k80x4", tmp_path)
    saved.write_bytes(b"the model pretrained before")
    assert report.pretrain_placeto_family("ptb", quick, "k80x4", tmp_path) == str(saved)
    assert f"placeto pretrained on ptb: saved, {saved}" in capsys.readouterr().out


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


def test_the_curves_legend_hides_no_panel_and_names_every_placer(tmp_path, load_script, monkeypatch):
    """The legend sat over the last panel's upper right, where the seeds' curves run (ptb's in docs/figures)."""
    report = load_script("report")
    drawn = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: drawn.append(fig))
    rows = [dict(family=family, cluster="k80x4", name=f"{family}_002", placer=placer, history=history)
            for family, placers in (("nmt", ("rnn_pg", "placeto")), ("ptb", ("rnn_pg", "spotlight")))
            for placer in placers for history in ([[1, 1.2], [20, 1.15], [64, 1.1]],)]
    report.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    (fig,) = drawn
    renderer = FigureCanvasAgg(fig).get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 1 and sorted(t.get_text() for t in legends[0].get_texts()) == [
        "placeto", "rnn_pg", "spotlight"]  # placeto is in the first panel alone
    box = legends[0].get_window_extent(renderer)
    assert not any(box.overlaps(ax.get_window_extent(renderer)) for ax in fig.axes)
    assert box.x1 <= fig.bbox.x1  # and inside the image


def test_a_claim_measured_at_100_percent_is_level_not_held(load_script):
    """Post at 99.96% of Spotlight's step printed "100.0% of Spotlight's ... The direction holds." (docs/RESULTS.md)."""
    report = load_script("report")
    rows = [dict(graph="g.gnpg", cluster="k80x4", placer=placer, name="g", step_s=step, oom=False, vs_auto=step,
                 history=[[64, step]], evaluations=64, updates=4)
            for placer, step in (("rnn_pg", 1.0), ("spotlight", 0.99), ("post", 0.99 * 0.9996))]
    text = "\n".join(report.claims(rows))
    assert "Spotlight's step time is 99.0% of rnn_pg's" in text and "The direction holds." in text
    assert "Post's step time is 100.0% of Spotlight's (1 pairs, equal budgets). Level" in text
    assert report.direction(1.0004) == report.direction(0.9996) and report.direction(1.01).endswith("not hold.")
    assert report.direction(float("nan")) == "No pair to compare."


class _Stop(Exception):
    """Raised in place of section 1's placements: the test is about what comes before them."""


def _stop_at_the_runs(monkeypatch):
    import gnplace.evaluate

    def stop(*args, **kwargs):
        raise _Stop

    monkeypatch.setattr(gnplace.evaluate, "evaluate", stop)


def test_a_quick_report_keeps_its_runs_apart_from_the_full_reports(tmp_path, load_script, monkeypatch, capsys):
    """``--quick`` with no ``--out`` saved its rows and minutes into ``out/report``, the full report's folder."""
    monkeypatch.chdir(tmp_path)
    _stop_at_the_runs(monkeypatch)
    bench = load_script("bench")
    with pytest.raises(_Stop):
        bench.main(["report", "--quick", "--jobs", "1"])
    assert not (tmp_path / "out" / "report").exists()
    saved = json.loads((tmp_path / "out" / "report_quick" / "elapsed.json").read_text())
    assert saved["quick"] is True and 0.0 <= saved["minutes"] < 1.0  # the run stopped: its seconds booked
    # and a folder holding one kind's runs is refused to the other, in one line, before any run
    for argv, theirs in ((["--out", "out/report_quick"], "--quick"), (["--quick", "--out", "out/report"], "full")):
        (tmp_path / "out" / "report").mkdir(exist_ok=True)
        (tmp_path / "out" / "report" / "elapsed.json").write_text(json.dumps({"minutes": 21.0, "quick": False}))
        capsys.readouterr()
        assert bench.main(["report", "--jobs", "1", "--doc", "R.md", "--figures", "figs", *argv]) == 2
        out, err = capsys.readouterr()
        assert err.count("\n") == 1 and f"holds the runs of a {theirs} report" in err and not out, err
    assert json.loads((tmp_path / "out" / "report" / "elapsed.json").read_text()) == {"minutes": 21.0, "quick": False}


def test_report_figures_killed_while_written_stay_as_before(tmp_path, load_script, monkeypatch):
    """A kill while ``docs/figures/report_scale.png`` was written left it cut short; now the one of before stays."""
    import io

    import matplotlib.figure

    report = load_script("report")
    figure = tmp_path / "report_scale.png"
    figure.write_bytes(b"the figure of before")
    real_savefig = matplotlib.figure.Figure.savefig

    def savefig_halfway(fig, target, *args, **kwargs):  # half the image reaches its target, then the kill
        image = io.BytesIO()
        real_savefig(fig, image, *args, **{"format": "png", **kwargs})
        half = image.getvalue()[: len(image.getvalue()) // 2]
        target.write(half) if hasattr(target, "write") else Path(target).write_bytes(half)
        raise KeyboardInterrupt

    rows = [{"ops": ops, "placer": "m_etf", "seconds": ops / 1e4, "budget": None} for ops in (500, 2000)]
    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(matplotlib.figure.Figure, "savefig", savefig_halfway)
        report.plot_scale(rows, figure)
    assert [p.name for p in tmp_path.iterdir()] == ["report_scale.png"]
    assert figure.read_bytes() == b"the figure of before"
    report.plot_scale(rows, figure)
    assert figure.read_bytes().startswith(b"\x89PNG")


def test_a_report_cut_short_leaves_every_figure_of_the_report_before(tmp_path, load_script, monkeypatch):
    """A run cut short in section 4 or 5 had drawn section 2's figures anew beside the report of before."""
    bench = load_script("bench")
    report = bench.report
    drawn = []
    for name in ("plot_curves", "plot_learned_bars", "plot_scale"):
        monkeypatch.setattr(report, name, lambda *args, name=name: drawn.append(name))
    monkeypatch.setattr(report, "table_placements", lambda *args: [])
    monkeypatch.setattr(report, "placeto_zero_shot_tasks", lambda *args: [])
    monkeypatch.setattr(report.Store, "run", lambda *args: [])

    def killed(*args):
        raise _Stop

    monkeypatch.setattr(report, "scale_rows", killed)  # section 5, the last
    with pytest.raises(_Stop):
        bench.main(["report", "--quick", "--jobs", "1", "--out", str(tmp_path / "out")])
    assert drawn == []


def test_report_keys_of_today_stand(load_script, monkeypatch, revisions_of_before):
    """auto's candidates are at today's revisions, exact at 5 and placeto at 1, finetune's policy as before: today's keys.

    2026-11-30: m_etf and m_sct revision 2 (the ETF fix) moved every key over auto; 2026-12-04: the memory repair's
    last resort (expert, heft, metis 1, m_etf and m_sct 3) did again, and exact's descent by the simulator and
    placeto's repair gave those two revision 1; 2026-12-06: exact's CP-SAT parameters gave it 2, its descent from auto
    3, its wide descent where nothing is proved 4 and its wall-clock net far past the deterministic limit 5. Without
    those revisions, no placer used or measured against declares one (finetune's policy as before) and the keys are those
    of before.
    """
    from gnplace.placers.exact import ExactPlacer
    from gnplace.rl.placeto import PlacetoPlacer
    from gnplace.rl.search import FineTunePlacer, PPOSearchPlacer
    from gnplace.rl.zeroshot import PolicyPlacer

    report = load_script("report")
    assert report.revised("ppo") == f"ppo@{PPOSearchPlacer.revision}+uses expert@1,heft@1,m_etf@3,m_sct@3,metis@1"
    assert report.revised("finetune").startswith(f"finetune@{FineTunePlacer.revision}+")
    assert report.revised("finetune").endswith("+uses expert@1,heft@1,m_etf@3,m_sct@3,metis@1,policy@13")
    policy = report.revised("policy")
    assert policy.endswith("+uses expert@1,heft@1,m_etf@3,m_sct@3,metis@1")
    graph = str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg")
    against = "|against expert@1,heft@1,m_etf@3,m_sct@3,metis@1"
    assert report.learned_key(graph, "k80x4", "rnn_pg", 64) == f"ptb_002|k80x4|{report.revised('rnn_pg')}|64{against}"
    assert report.placeto_zero_shot_key(graph, "k80x4", 400) == f"ptb_002|k80x4|placeto_zs@1|400{against}"
    assert report.exact_key(graph, 12, "k80x2", 20.0) == f"ptb_002@12|k80x2|20.0|{policy}|against exact@6,expert@1,heft@1,m_etf@3,m_sct@3,metis@1"
    revisions_of_before()  # as before 2026-11-30
    monkeypatch.setattr(ExactPlacer, "revision", "")
    monkeypatch.setattr(PlacetoPlacer, "revision", "")
    monkeypatch.setattr(PolicyPlacer, "revision", "12")
    monkeypatch.setattr(FineTunePlacer, "uses", ("auto", "policy"))  # not pinned before 2026-11-30
    assert report.revised("ppo") == f"ppo@{PPOSearchPlacer.revision}" and "uses" not in report.revised("finetune")
    assert report.revised("finetune").startswith(f"finetune@{FineTunePlacer.revision}+")
    assert report.learned_key(graph, "k80x4", "rnn_pg", 64) == f"ptb_002|k80x4|{report.revised('rnn_pg')}|64"
    assert report.placeto_zero_shot_key(graph, "k80x4", 400) == "ptb_002|k80x4|placeto_zs|400"
    assert report.exact_key(graph, 12, "k80x2", 20.0) == f"ptb_002@12|k80x2|20.0|{report.revised('policy')}"


def test_a_new_revision_of_a_placer_used_or_measured_against_changes_the_keys(load_script, monkeypatch):
    """m_etf's new revision changes auto: ppo (which starts from it) and every step over auto's run again."""
    from gnplace.placers.exact import ExactPlacer
    from gnplace.placers.m_etf import METFPlacer
    from gnplace.rl.placeto import PlacetoPlacer
    from gnplace.rl.search import FineTunePlacer
    from gnplace.rl.zeroshot import PolicyPlacer

    report = load_script("report")
    graph = str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg")
    before = {"ppo": report.revised("ppo"), "finetune": report.revised("finetune"),
              "rnn_pg": report.learned_key(graph, "k80x4", "rnn_pg", 64),
              "placeto_zs": report.placeto_zero_shot_key(graph, "k80x4", 400),
              "exact": report.exact_key(graph, 12, "k80x2", 20.0)}
    monkeypatch.setattr(METFPlacer, "revision", "4")  # the next one (3 since 2026-12-04)
    revised = {"ppo": report.revised("ppo"), "finetune": report.revised("finetune"),
               "rnn_pg": report.learned_key(graph, "k80x4", "rnn_pg", 64),  # over auto's
               "placeto_zs": report.placeto_zero_shot_key(graph, "k80x4", 400)}
    for name, key in revised.items():  # "+uses ...,m_etf@3,..." and "|against ...,m_etf@3,..." of today: m_etf@4
        assert key == before[name].replace("m_etf@3", "m_etf@4") != before[name], name
    assert report.exact_key(graph, 12, "k80x2", 20.0) != before["exact"]
    monkeypatch.undo()
    monkeypatch.setattr(PolicyPlacer, "revision", "99")  # finetune pins the revision of its zero-shot candidates
    assert report.revised("finetune") == before["finetune"]
    monkeypatch.setattr(FineTunePlacer, "uses", ("auto", "policy@98"))  # their next one
    assert report.revised("finetune") == before["finetune"].replace("policy@13", "policy@98") != before["finetune"]
    monkeypatch.setattr(ExactPlacer, "revision", "6", raising=False)  # its next one (5 since 2026-12-06)
    assert report.exact_key(graph, 12, "k80x2", 20.0).endswith("|against exact@6,expert@1,heft@1,m_etf@3,m_sct@3,metis@1")  # and auto's
    monkeypatch.setattr(PlacetoPlacer, "revision", "2", raising=False)
    assert "|placeto_zs@2|" in report.placeto_zero_shot_key(graph, "k80x4", 400)


def test_section_two_and_four_rows_run_again_on_a_regenerated_graph_or_an_edited_cluster(tmp_path, load_script):
    """Their keys name the graph file by its stem and the cluster by its name: old rows answered new inputs."""
    import shutil

    from gnplace.graph_io import load_graph, save_graph

    report = load_script("report")
    graph = tmp_path / "mlp.gnpg"
    shutil.copy(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg", graph)
    cluster = tmp_path / "pair.yaml"
    cluster.write_text((ROOT / "gnplace" / "clusters" / "k80x2.yaml").read_text().replace("name: k80x2", "name: pair"))
    store, ran = report.Store(tmp_path / "learned.jsonl"), []

    def row(task):
        ran.append(task["key"])
        auto, bound = report._references(task["graph"], task["cluster"])
        return {**task, "auto_s": auto, "bound_s": bound}

    def run():
        task = {"key": report.learned_key(str(graph), str(cluster), "single", 4), "graph": str(graph),
                "cluster": str(cluster), **report.inputs_identity(str(graph), str(cluster))}
        return store.run([task], row, 1, "section 2", report.IDENTITY, report.learned_row_stands)[0]

    first = run()
    assert run() == first and len(ran) == 1  # the same inputs: resumed
    save_graph(load_graph(graph).replace(name="regenerated"), graph)  # the dataset made again
    assert run()["graph_sha256"] != first["graph_sha256"] and len(ran) == 2
    cluster.write_text(cluster.read_text().replace("default: placeto", "default: {bandwidth: 1 GB/s, latency: 5 us}"))
    assert run()["cluster_fingerprint"] != first["cluster_fingerprint"] and len(ran) == 3
    # a row saved before rows recorded their inputs stands where auto's step and the bound are today's
    legacy = {k: v for k, v in run().items() if k not in report.IDENTITY}
    assert report.learned_row_stands(legacy, legacy)
    assert not report.learned_row_stands({**legacy, "auto_s": legacy["auto_s"] * 1.01}, legacy)


def test_a_section_four_row_saved_before_is_checked_by_autos_step(tmp_path, load_script):
    """Section 4's rows of before record auto's step over the exact one's and the exact ms: auto's is computed again."""
    from gnplace.cluster import load_cluster
    from gnplace.graph_io import load_graph
    from gnplace.placers.registry import make_placer
    from gnplace.sim.simulator import Simulator

    report = load_script("report")
    path = str(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    graph, cluster, sim = load_graph(path), load_cluster("k80x2"), Simulator()
    auto_s = sim.time(graph, cluster, make_placer("auto", timer=sim).place(graph, cluster, seed=0)).step_time
    row = {"graph": path, "groups": 0, "cluster": "k80x2", "groups_placed": graph.num_groups, "exact_ms": 200.0,
           "auto": auto_s / 0.2}
    assert report.exact_row_stands(row, row)
    assert not report.exact_row_stands({**row, "auto": row["auto"] * 1.01}, row)
    assert report.sampled_row_stands({"exact_ms": 200.0}, {"exact_ms": 200.0})
    assert not report.sampled_row_stands({"exact_ms": 200.0}, {"exact_ms": 210.0})


def test_a_section_four_b_row_over_another_exact_step_than_todays_is_made_again(tmp_path, load_script, monkeypatch):
    """Section 4 run again (its rows deleted, a line cut) times CP-SAT anew, stopped at its limit maybe elsewhere: 4b's
    saved row, its ratio over the exact step of before, stood beside the others' over today's (0.506 for 1.013)."""
    report = load_script("report")
    identity = {"graph_sha256": "g", "cluster_fingerprint": "c"}
    path = tmp_path / "exact_sampled.jsonl"
    path.write_text(json.dumps({"key": "a", "exact_ms": 400.0, "ratio": 0.5, **identity}) + "\n"
                    + json.dumps({"key": "b", "exact_ms": 300.0, "ratio": 0.9, **identity}) + "\n")
    ran = []
    monkeypatch.setattr(report, "sampled_row", lambda t: ran.append(t["key"]) or {**t, "ratio": 1.0})
    tasks = [{"key": "a", "exact_ms": 200.0, **identity}, {"key": "b", "exact_ms": 300.0, **identity}]
    rows = report.sampled_rows(tasks, report.Store(path))
    assert ran == ["a"] and [r["ratio"] for r in rows] == [1.0, 0.9]
    assert [r["ratio"] for r in report.sampled_rows(tasks, report.Store(path))] == [1.0, 0.9] and ran == ["a"]


@pytest.fixture
def toy_family(tmp_path, load_script, monkeypatch):
    """``report`` with a family ``toy`` of two train graphs and one test graph in ``tmp_path``; a quick config."""
    import dataclasses

    from gnplace.graph_io import save_graph
    from gnplace.toy import mlp_training_graph

    report = load_script("report")
    train = [str(save_graph(mlp_training_graph(layers=k, width=64, batch=8), tmp_path / f"train{k}.gnpg"))
             for k in (2, 3)]
    test = [str(save_graph(mlp_training_graph(layers=4, width=64, batch=8), tmp_path / "test.gnpg"))]
    monkeypatch.setattr(report, "train_graphs", lambda family, count: train[:count])
    monkeypatch.setattr(report, "test_graphs", lambda family, count: test[:count])
    config = dataclasses.replace(report.QUICK, rl_clusters=("k80x2",), placeto_train_graphs=2, placeto_episodes=2)
    return report, config, train


def _regenerate(path):
    """The graph at ``path`` made again with other costs (the same ops and name)."""
    from gnplace.graph_io import load_graph, save_graph

    graph = load_graph(path)
    save_graph(graph.replace(flops=graph.flops * 2), path)


def test_placeto_is_pretrained_again_on_a_changed_train_split(toy_family, tmp_path, monkeypatch):
    """The checkpoint was named by family, cluster, episodes and revision: a regenerated train graph reused it."""
    import gnplace.rl.placeto

    report, config, train = toy_family
    pretrained = []
    real = gnplace.rl.placeto.pretrain_placeto
    monkeypatch.setattr(gnplace.rl.placeto, "pretrain_placeto",
                        lambda graphs, *args, **kwargs: (pretrained.append(graphs), real(graphs, *args, **kwargs))[1])
    out = tmp_path / "out"
    out.mkdir()
    first = report.pretrain_placeto_family("toy", config, "k80x2", out)
    assert report.pretrain_placeto_family("toy", config, "k80x2", out) == first and len(pretrained) == 1  # cached
    _regenerate(train[1])  # the same graphs by name and ops, other costs
    second = report.pretrain_placeto_family("toy", config, "k80x2", out)
    assert second != first and len(pretrained) == 2 and Path(second).is_file()
    assert second.endswith(f"_{report.training_digest(train)[:12]}.pt")


def test_placeto_zero_shot_rows_run_again_with_the_model_of_a_changed_train_split(toy_family, tmp_path):
    """Its rows stood on the test graph and cluster alone, whatever the model placing them was pretrained on."""
    report, config, train = toy_family
    out = tmp_path / "out"
    out.mkdir()
    store, ran = report.Store(out / "learned.jsonl"), []

    def row(task):
        ran.append(task["checkpoint"])
        return dict(task)

    def run():
        tasks = report.placeto_zero_shot_tasks("toy", config, out)
        return store.run(tasks, row, 1, "section 2", report.LEARNED_IDENTITY, report.learned_row_stands)[0]

    first = run()
    assert run() == first and len(ran) == 1  # the same train split: resumed
    _regenerate(train[0])
    second = run()
    assert second["checkpoint"] != first["checkpoint"] and ran == [first["checkpoint"], second["checkpoint"]]
    assert second["placeto_train_sha256"] == report.training_digest(train) != first["placeto_train_sha256"]
    # a row saved before rows recorded the train split: nothing in it tells the model's graphs, it runs again
    legacy = {k: v for k, v in second.items() if k not in report.LEARNED_IDENTITY}
    assert not report.learned_row_stands(legacy, second)


def test_rows_of_the_other_learned_placers_stand_as_before_beside_the_train_split(tmp_path, load_script):
    """They record no train split (None in their tasks): a row that recorded :data:`IDENTITY` alone still stands."""
    report = load_script("report")
    store = report.Store(tmp_path / "learned.jsonl")
    identity = {"graph_sha256": "abc", "cluster_fingerprint": "def"}
    store.add({"key": "g|k80x4|rnn_pg|64", **identity, "vs_auto": 0.9})
    assert store.saved("g|k80x4|rnn_pg|64", {**identity, "placeto_train_sha256": None}) is not None
    assert store.saved("g|k80x4|rnn_pg|64", {**identity, "placeto_train_sha256": "0123"}) is None


@pytest.mark.parametrize("doc", ["nonexistent/dir/x.md", "FILE.md/x.md"])
def test_report_refuses_a_doc_in_a_missing_folder_before_any_run_or_folder(tmp_path, load_script, capsys, monkeypatch,
                                                                          doc):
    """``--doc /nonexistent/dir/x.md`` made ``--out`` and ran every section before the report met its folder."""
    _stop_at_the_runs(monkeypatch)
    (tmp_path / "FILE.md").write_text("a file")
    given, out = tmp_path / doc, tmp_path / "out"
    argv = ["report", "--out", str(out), "--cache", str(tmp_path / "cache"), "--figures", str(tmp_path / "figs"),
            "--jobs", "1", "--doc", str(given)]
    assert load_script("bench").main(argv) == 2
    printed, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith(f"bench: error: --doc {given}: "), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE.md"]  # no --out, --figures or --doc folder made


@pytest.mark.parametrize("doc", ["out/learned.jsonl", "out/elapsed.json", "out/table/results.md", "cache/x.md"])
def test_report_refuses_a_doc_that_is_one_of_its_run_files(tmp_path, load_script, capsys, monkeypatch, doc):
    """``--doc OUT/learned.jsonl`` wrote the report over section 2's saved runs, which the next run did again."""
    _stop_at_the_runs(monkeypatch)
    (tmp_path / "out" / "table").mkdir(parents=True)
    (tmp_path / "cache").mkdir()
    argv = ["report", "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"), "--figures",
            str(tmp_path / "figs"), "--jobs", "1", "--doc", str(tmp_path / doc)]
    assert load_script("bench").main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"bench: error: --doc {tmp_path / doc}: "), err


@pytest.mark.parametrize("name", ["report_curves.png", "report_learned.png", "report_scale.png", "baselines_ratios.png",
                                  "curve_cifar10_002_k80x4.png", "curve_nmt_002_k80x4.json"])
def test_report_refuses_a_doc_that_is_one_of_its_figures(tmp_path, load_script, capsys, monkeypatch, name):
    """``--doc FIGURES/report_scale.png`` wrote the report over the figure it links to, once every section had run."""
    _stop_at_the_runs(monkeypatch)
    figures = tmp_path / "figs"
    figures.mkdir()
    (figures / name).write_bytes(b"a figure of before")
    argv = ["report", "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"), "--figures", str(figures),
            "--jobs", "1", "--doc", str(figures / name)]
    assert load_script("bench").main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"bench: error: --doc {figures / name}: the report draws"), err
    assert (figures / name).read_bytes() == b"a figure of before" and not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["--out", "--figures"])
def test_report_refuses_a_doc_that_is_a_folder_it_makes(tmp_path, load_script, capsys, monkeypatch, flag):
    """``--doc X --out X`` (X not there yet) made X, ran every section and failed writing the report over it."""
    _stop_at_the_runs(monkeypatch)
    folders = {"--out": tmp_path / "out", "--figures": tmp_path / "figs", "--cache": tmp_path / "cache"}
    folders[flag] = tmp_path / "same"
    argv = ["report", *[a for f, path in folders.items() for a in (f, str(path))], "--jobs", "1",
            "--doc", str(tmp_path / "same")]
    assert load_script("bench").main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"bench: error: --doc {tmp_path / 'same'}: the folder {flag} names, which the report makes; " \
                  "name a file\n"
    assert list(tmp_path.iterdir()) == []  # refused before any folder was made


def test_report_accepts_a_doc_in_a_new_folder_under_out(tmp_path, load_script, monkeypatch):
    """``--out`` is made before the runs, so a report in it (or a folder under it) is written at the end."""
    _stop_at_the_runs(monkeypatch)
    out = tmp_path / "out"
    argv = ["report", "--out", str(out), "--cache", str(tmp_path / "cache"), "--figures", str(tmp_path / "figs"),
            "--jobs", "1", "--doc", str(out / "sub" / "RESULTS.md")]
    with pytest.raises(_Stop):
        load_script("bench").main(argv)
    assert out.is_dir()


def test_running_report_py_alone_points_at_bench_py_and_fails():
    """``python scripts/report.py`` exited 0 having done nothing; it is a subcommand of ``bench.py``."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "report.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("report.py: error: run the report as `python scripts/bench.py report` (its options: "
                           "`python scripts/bench.py report --help`)\n")


def test_a_quick_report_keeps_everything_under_out_and_the_full_one_writes_the_projects_docs(load_script, tmp_path,
                                                                                              monkeypatch):
    """``--quick --out DIR`` made ``./out/bench`` in the working folder for its large graphs; the full report's
    default ``docs/RESULTS.md`` was the working folder's."""
    report = load_script("report")
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(quick=True, out="q", doc=None, figures=None, cache=None)
    assert report.report_paths(args) == ("q", Path("q/RESULTS.md"), Path("q/figures"), str(Path("q/cache")))
    args = argparse.Namespace(quick=False, out=None, doc=None, figures=None, cache=None)
    assert report.report_paths(args) == ("out/report", ROOT / "docs" / "RESULTS.md", ROOT / "docs" / "figures",
                                         "out/bench")
    args = argparse.Namespace(quick=True, out=None, doc="r.md", figures="f", cache="c")
    assert report.report_paths(args) == ("out/report_quick", Path("r.md"), Path("f"), "c")


@pytest.mark.parametrize("option, message", [("--doc", "--doc is empty; name the file to write"),
                                             ("--figures", "--figures is empty; name the folder to write into")])
def test_report_refuses_an_empty_doc_or_figures_not_taken_for_the_default(tmp_path, load_script, capsys,
                                                                          monkeypatch, option, message):
    """``--doc ""`` (an unset variable) was no --doc: a full report wrote the project's docs/RESULTS.md."""
    import gnplace.evaluate

    def no_runs(*args, **kwargs):
        raise AssertionError("placed before the report's files were checked")

    monkeypatch.setattr(gnplace.evaluate, "evaluate", no_runs)
    argv = ["report", "--quick", "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"), "--jobs", "1",
            option, ""]
    assert load_script("bench").main(argv) == 2
    assert capsys.readouterr().err.startswith(f"bench: error: {message}")
    assert not (tmp_path / "out").exists()


def test_report_run_alone_under_python_p_names_the_command_to_run(tmp_path):
    # python -P leaves scripts/ off sys.path: `from benchmarks.common import ...` was a ModuleNotFoundError
    done = subprocess.run([sys.executable, "-P", str(ROOT / "scripts" / "report.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "python scripts/bench.py report" in done.stderr


def test_placeto_zero_shot_over_auto_leaves_out_placements_out_of_memory(load_script):
    """Section 3 averaged a Placeto zero-shot placement out of memory into its 'x auto's step time', which section 2's
    table (and the pairs counted beside it) leave out."""
    report = load_script("report")
    rows = [dict(graph=graph, cluster="tight4", placer=placer, name=graph, step_s=step, oom=oom, vs_auto=step,
                 vs_bound=2 * step, family="ptb", history=[[64, step]], evaluations=64, updates=4, seconds=1.0)
            for graph, placer, step, oom in (("a", "placeto", 1.0, False), ("a", "placeto_zs", 1.2, False),
                                             ("b", "placeto", 1.0, False), ("b", "placeto_zs", 0.3, True))]
    text = "\n".join(report.claims(rows))
    assert "test graphs is 1.200x auto's step time and 120.0% of Placeto trained on the graph itself" in text
    assert "(1 pairs)" in text
    table = "\n".join(report.learned_table(rows, ["placeto_zs"]))
    assert "| placeto_zs | 2 | 1.200 |" in table  # the same figure


def test_equal_budgets_leave_runs_out_of_memory_out_of_the_means_and_count_them(load_script):
    """The equal-budgets table averaged gnplace's placement over memory (and a comparator's run that never fit)."""
    report = load_script("report")

    def row(graph, placer, step, oom):
        return dict(graph=graph, cluster="tight4", placer=placer, name=graph, step_s=step, oom=oom, vs_auto=step,
                    family="ptb", history=[[8, step]], evaluations=8, updates=1, seconds=1.0)

    rows = [row("a", "policy", 0.9, False), row("b", "policy", 0.2, True),
            row("a", "spotlight", 1.0, False), row("b", "spotlight", 0.1, True)]
    (_, _, line) = report.equal_budgets(rows, ["spotlight"])
    assert line == "| ptb | policy | 8 | 0.900 (1 OOM) | 1.000 (1 OOM) | yes |"


def test_each_report_figure_is_laid_out_at_the_resolution_it_is_written_at(tmp_path, load_script, figure_dpis):
    """The report's figures were laid out at pyplot's 100 dpi and written at 110 (save_figure's): their margins were
    measured on text of other widths. Each is made at FIGURE_DPI, laid out and written at 110."""
    report = load_script("report")
    laid_out, written = figure_dpis
    rows = [dict(family=family, cluster="k80x4", name=f"{family}_002", placer=placer, history=[[1, 1.2], [64, 1.1]],
                 vs_auto=1.1, oom=False)
            for family in ("nmt", "ptb") for placer in ("rnn_pg", "spotlight")]
    report.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    report.plot_learned_bars(rows, tmp_path / "learned.png", ["rnn_pg", "spotlight"])
    report.plot_scale([dict(placer="auto", ops=ops, seconds=ops / 1e4) for ops in (100, 1000)], tmp_path / "s.png")
    assert laid_out == written == [110, 110, 110]


def test_curves_draw_what_a_history_holds_and_say_what_they_leave_out(tmp_path, load_script, monkeypatch):
    """A history of none was an IndexError (a 1-D array indexed [:, 0]); a nan point broke the line and hid the final
    value, a ratio below 0 was drawn as it was, and a point at 0 evaluations lay off the log axis. Each point that
    can be drawn now is; what is left out is written under the panel's title."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    report = load_script("report")
    drawn = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: drawn.append(fig))
    base = dict(family="ptb", cluster="k80x4", name="ptb_002")
    rows = [dict(base, placer="ppo", history=[]), dict(base, placer="heft", history=[[1, 1.0], [5, 0.95]]),
            dict(base, placer="rnn_pg", history=[[1, -0.5], [10, float("nan")], [100, 0.8], [200, 0.7]]),
            dict(base, placer="policy", history=[[0, 0.9]])]
    report.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    (fig,) = drawn
    FigureCanvasAgg(fig).draw()
    (ax,) = fig.axes
    assert ax.get_title().splitlines() == ["ptb_002 on k80x4", "ppo: no points",
                                           "rnn_pg: 2 of 4 points left out (1 not finite, 1 ratio <= 0)"]
    lines = {line.get_label(): line.get_xydata().tolist() for line in ax.get_lines()
             if not line.get_label().startswith("_")}
    assert lines["rnn_pg"][-2:] == [[200.0, 0.7], [ax.get_xlim()[1], 0.7]]  # the final value, held to the edge
    assert min(y for _, y in lines["rnn_pg"]) == 0.7
    (star,) = ax.collections
    assert star.get_label() == "policy" and star.get_offsets().tolist() == [[0.0, 0.9]]
    assert ax.get_xscale() == "symlog" and ax.get_xlim()[0] == 0  # 0 evaluations drawn at the axis' start
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["heft", "policy", "rnn_pg"]


def test_a_step_curve_holds_its_final_level_to_the_panels_right_edge(tmp_path, load_script, monkeypatch):
    """A curve of steps ended at its last point: ``post``'s final value, reached at its budget's last batch, showed as
    the foot of a drop alone, and ``finetune``'s, found 17 evaluations before the end of its run, as a level of one
    evaluation. Each line is held at its final value to the panel's right edge, the axes' limits as they were (a
    star stays a star)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    report = load_script("report")
    drawn = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: drawn.append(fig))
    base = dict(family="ptb", cluster="k80x4", name="ptb_002")
    rows = [dict(base, placer="post", history=[[16, 1.15], [48, 1.15], [64, 1.14]], evaluations=64),
            dict(base, placer="finetune", history=[[0, 1.0], [46, 0.9], [47, 0.9]], evaluations=64),
            dict(base, placer="policy", history=[[40, 0.95]], evaluations=40)]
    report.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    report.plot_curves([dict(rows[0], history=[[1, 1.2], *rows[0]["history"]])], tmp_path / "curves.png", "k80x4")
    for fig in drawn:
        (ax,) = fig.axes
        FigureCanvasAgg(fig).draw()
        right = ax.get_xlim()[1]
        assert right > 64
        lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
        assert lines["post"].get_xydata()[-2:].tolist() == [[64.0, 1.14], [right, 1.14]]
        level = ax.transData.transform([[64.0, 1.14], [right, 1.14]])
        assert level[1, 0] - level[0, 0] > 10  # pixels: the final level reads
    assert drawn[0].axes[0].get_xlim()[0] == 0.0  # symlog from 0, as before
    finetune = drawn[0].axes[0].get_lines()[0].get_xydata().tolist()
    assert finetune[-1] == [drawn[0].axes[0].get_xlim()[1], 0.9] and {y for x, y in finetune if x >= 46} == {0.9}
    assert drawn[0].axes[0].collections[0].get_offsets().tolist() == [[40.0, 0.95]]


def test_curves_say_so_where_a_family_or_every_row_has_nothing_to_draw(tmp_path, load_script, monkeypatch):
    """A family with no run on the cluster drawn (an IndexError), and no row at all (a ValueError: 0 columns)."""
    report = load_script("report")
    drawn = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: drawn.append(fig))
    rows = [dict(family="nmt", cluster="k80x4", name="nmt_002", placer="ppo", history=[[1, 1.0], [8, 0.9]]),
            dict(family="ptb", cluster="tight4", name="ptb_002", placer="ppo", history=[[1, 1.0]]),
            dict(family="yelp", cluster="k80x4", name="yelp_002", placer="ppo", history=[[1, float("inf")]])]
    report.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    report.plot_curves([], tmp_path / "none.png", "k80x4")
    texts = [[t.get_text() for t in ax.texts] for fig in drawn for ax in fig.axes]
    assert texts == [[], ["no run of ptb on k80x4"], ["no point to draw:\nppo: no points (1 not finite)"],
                     ["no learned placer's run to draw"]]
    assert drawn[1].axes[0].get_legend() is None


def test_a_learned_bar_with_no_mean_is_written_n_a_within_the_axes(tmp_path, load_script, monkeypatch):
    """A placer whose every run of a family was out of memory (tight4) had a nan mean: no bar, and nothing said so;
    alone, the axes ran 0.95 to 1.05 about the line at 1. It is written ``n/a`` at its foot, the axes from 0."""
    report = load_script("report")
    drawn = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: drawn.append(fig))
    report.plot_learned_bars([dict(family="f", placer="ppo", vs_auto=1.1, oom=True)], tmp_path / "b.png", ["ppo"])
    rows = [dict(family=family, placer=placer, vs_auto=0.9, oom=placer == "policy" or (family, placer) == ("ptb", "ppo"))
            for family in ("nmt", "ptb") for placer in ("policy", "ppo")]
    report.plot_learned_bars(rows, tmp_path / "b.png", ["policy", "ppo"])
    alone, both = (fig.axes[0] for fig in drawn)
    assert [(t.get_text(), t.get_position()) for t in alone.texts] == [(" n/a", (0.0, 0.0))]
    assert alone.get_ylim()[0] == 0.0 and alone.get_xlim()[0] < -0.4 and alone.get_xlim()[1] > 0.4
    # nmt's bars at k, ptb's at k + 0.4: policy's both, ptb's ppo
    assert [(t.get_text(), t.get_position()) for t in both.texts] == [(" n/a", (0.0, 0.0)), (" n/a", (0.4, 0.0)),
                                                                     (" n/a", (1.4, 0.0))]
    assert both.get_xlim()[0] < -0.2 and both.get_xlim()[1] > 1.6


def test_the_learned_bars_legend_covers_no_bar(tmp_path, load_script, monkeypatch):
    """With every family's bars about as tall, matplotlib's best place inside the axes still covered the first three
    (its lower left, over policy's bars). The legend moves beside the axes, clear of every bar and in the image; a
    legend with a free spot inside stays there."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    report = load_script("report")
    drawn = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: drawn.append(fig))
    placers = ["policy", "finetune", "ppo", "rnn_pg", "hierarchical", "spotlight", "post", "placeto", "placeto_zs"]
    rows = [dict(family=family, placer=placer, vs_auto=1.2, oom=False)
            for family in ("cifar10", "nmt", "ptb") for placer in placers]
    report.plot_learned_bars(rows, tmp_path / "b.png", placers)
    free = [dict(row, vs_auto=0.5 if row["placer"] == "policy" else 1.2) for row in rows]
    report.plot_learned_bars(free, tmp_path / "b.png", placers)
    for fig in drawn:
        (ax,) = fig.axes
        renderer = FigureCanvasAgg(fig).get_renderer()
        box = ax.get_legend().get_window_extent(renderer)
        assert len(ax.patches) == 27
        assert not any(bar.get_window_extent(renderer).overlaps(box) for bar in ax.patches)
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1
    full, free_spot = (fig.axes[0].get_legend().get_window_extent(FigureCanvasAgg(fig).get_renderer())
                       for fig in drawn)
    assert full.x0 > drawn[0].axes[0].get_window_extent().x1 and free_spot.x1 < drawn[1].axes[0].get_window_extent().x1


def test_the_bars_and_the_scale_say_so_where_they_have_nothing_to_draw(tmp_path, load_script, monkeypatch):
    """No row drew empty axes: the bars' with a legend of none, the scale's with an empty legend (and a warning)."""
    import warnings

    report = load_script("report")
    drawn = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: drawn.append(fig))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "No artists with labels found to put in legend"
        report.plot_learned_bars([], tmp_path / "b.png", [])
        report.plot_scale([], tmp_path / "s.png")
    texts = [[t.get_text() for t in fig.axes[0].texts] for fig in drawn]
    assert texts == [["no learned placer's run to draw"], ["no placement timed to draw"]]
    assert all(fig.axes[0].get_legend() is None for fig in drawn)


def test_a_learning_curve_hidden_under_another_is_said_so_under_the_title(tmp_path, load_script, monkeypatch):
    """Curves of the same steps (PPO and the policy gradient flat at auto's, or two stars at one point) were drawn one
    over another: the legend named a placer whose curve no one could see. Each hidden one is said so."""
    report = load_script("report")
    drawn = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: drawn.append(fig))
    base = dict(family="ptb", cluster="k80x4", name="ptb_002")
    rows = [dict(base, placer="ppo", history=[[1, 1.0], [64, 1.0]]),
            dict(base, placer="rnn_pg", history=[[1, 1.0], [16, 1.0], [64, 1.0]]),
            dict(base, placer="heft", history=[[1, 1.0], [8, 0.9], [64, 0.9]]),
            dict(base, placer="finetune", history=[[16, 0.95]]), dict(base, placer="policy", history=[[16, 0.95]])]
    report.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    assert drawn[0].axes[0].get_title().splitlines() == ["ptb_002 on k80x4", "finetune: hidden under policy",
                                                         "heft: under rnn_pg over 1-8 evaluations",
                                                         "ppo: hidden under rnn_pg"]


def test_a_learning_curve_under_another_over_a_stretch_is_said_so_under_the_title(tmp_path, load_script, monkeypatch):
    """Fine-tuning and PPO flat at auto's step until their first better placements (60 and 200 evaluations), and the
    seeds' first batches timed alike, were drawn one over another with nothing said: fine-tuning's curve seemed to
    start at 60, post's at 32. Each stretch under a later curve is said so; a curve hidden wholly, as before."""
    report = load_script("report")
    drawn = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: drawn.append(fig))
    base = dict(family="ptb", cluster="k80x4", name="ptb_002")
    rows = [dict(base, placer="annealing", history=[[1, 1.0], [60, 0.95], [300, 0.9], [1000, 0.9]]),
            dict(base, placer="finetune", history=[[1, 1.0], [60, 0.95], [1000, 0.95]]),
            dict(base, placer="ppo", history=[[1, 1.0], [200, 0.9], [1000, 0.88]]),
            dict(base, placer="post", history=[[16, 1.15], [32, 1.12], [500, 1.1], [1000, 1.1]]),
            dict(base, placer="rnn_pg", history=[[16, 1.15], [1000, 1.15]]),
            dict(base, placer="spotlight", history=[[16, 1.15], [48, 1.13], [500, 1.1], [1000, 1.1]])]
    report.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    assert drawn[0].axes[0].get_title().splitlines() == [
        "ptb_002 on k80x4", "annealing: under ppo over 1-60, 300-1,000 evaluations",
        "annealing: under finetune over 60-300 evaluations",
        "finetune: under ppo over 1-60 evaluations", "post: under spotlight over 16-32, 500-1,000 evaluations",
        "rnn_pg: under spotlight over 16-48 evaluations"]


def test_the_curves_notes_leave_the_axes_their_height(tmp_path, load_script, monkeypatch):
    """Seven lines of notes over a panel (curves hidden under another) left its axes half the height of a panel
    without notes. The figure grows by the notes' lines; one without notes is as it was, 3.6 inches high."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    report = load_script("report")
    drawn = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: drawn.append(fig))
    base = dict(family="ptb", cluster="k80x4", name="ptb_002")
    placers = ("a2c", "annealing", "finetune", "hierarchical", "placeto", "post", "ppo", "rnn_pg")
    report.plot_curves([dict(base, placer=p, history=[[1, 1.0 + k / 10], [64, 1.0 + k / 10]])
                        for k, p in enumerate(placers)], tmp_path / "curves.png", "k80x4")
    report.plot_curves([dict(base, placer=p, history=[[1, 1.0], [64, 1.0]]) for p in placers], tmp_path / "c.png",
                       "k80x4")
    heights = []
    for fig in drawn:
        FigureCanvasAgg(fig).draw()
        heights.append(fig.axes[0].get_window_extent().height)
    assert drawn[0].get_figheight() == 3.6 and drawn[1].axes[0].get_title().count("\n") == 7
    assert heights[1] >= 0.95 * heights[0]


def test_the_scale_draws_the_points_log_axes_can_and_says_what_it_leaves_out(tmp_path, load_script, monkeypatch):
    """A saved section 5 row edited by hand: a nan broke its placer's line, a 0 ran it off the axes' foot, and a
    placer with no drawable point was a legend entry alone; with none at all, the log axes raised ValueError."""
    from matplotlib.colors import to_hex

    report = load_script("report")
    drawn = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: drawn.append(fig))
    report.plot_scale([dict(placer="policy", ops=100, seconds=math.nan, budget=None)], tmp_path / "s.png")
    assert [t.get_text() for t in drawn[0].axes[0].texts] == [
        "no placement timed to draw\npolicy: no points (1 not finite)"]
    rows = [dict(placer=placer, ops=ops, seconds=seconds, budget=None)
            for placer, points in (("auto", ((100, 0.01), (1000, math.nan), (10000, 1.0))),
                                   ("m_etf", ((100, 0.0), (1000, 0.02), (10000, 0.2))),
                                   ("policy", ((100, math.nan), (1000, None))), ("rnn_pg", ((100, 0.1), (1000, 1.0))))
            for ops, seconds in points]
    report.plot_scale(rows, tmp_path / "s.png")
    (ax,) = drawn[-1].axes
    assert ax.get_title().splitlines() == ["auto: 1 of 3 points left out (1 not finite)",
                                           "m_etf: 1 of 3 points left out (1 <= 0)",
                                           "policy: no points (1 not a number, 1 not finite)"]
    lines = {line.get_label(): (line.get_xydata().tolist(), to_hex(line.get_color())) for line in ax.get_lines()}
    assert lines == {"auto": ([[100, 0.01], [10000, 1.0]], "#1f77b4"),  # C0, C1, C3: each its colour of before
                     "m_etf": ([[1000, 0.02], [10000, 0.2]], "#ff7f0e"), "rnn_pg": ([[100, 0.1], [1000, 1.0]], "#d62728")}


def test_the_command_the_report_says_made_it_runs_as_written_with_any_path(load_script):
    """A path of a space was written bare: the command copied from the report gave the shell two words."""
    import shlex

    report = load_script("report")
    given = ["report", "--quick", "--out", "my runs", "--doc", "a b/R $HOME.md", "--figures", "figs'x", "--cache", "c"]
    args = argparse.Namespace(quick=True, out="my runs", doc="a b/R $HOME.md", figures="figs'x", cache="c")
    words = shlex.split(report.report_command(args))
    assert words[:3] == ["python", "scripts/bench.py", "report"] and words[3:] == given[1:]


@pytest.mark.parametrize("edit", [
    {"corners": []}, {"corners": [[1, 1.0], [1, 0.9]]}, {"corners": [[1, 1.0], [2, 1.1]]}, {"corners": [[1, None]]},
    {"corners": [[1, float("nan")]]}, {"corners": [[True, 1.0]]}, {"corners": [[1, 1.0, 3]]}, {"last_evaluation": 0},
    {"auto_s": None}, {"placer": None}, {"budget": 8.5},
], ids=lambda edit: json.dumps(edit))
def test_a_section_six_row_the_report_cannot_draw_is_made_again(tmp_path, load_script, edit):
    """Section 6 (the search placers' learning curves, the README's curve_*.png) keeps its rows as the others do:
    a saved row stands, one whose curve cannot be drawn (edited by hand) runs again, and the figure and its JSON
    are drawn from the rows: corners held to the last evaluation."""
    import dataclasses

    report = load_script("report")
    config = dataclasses.replace(report.QUICK, curve_placers=("annealing",), curve_budget=8)
    (task,) = report.curve_tasks(config)
    ran: list[str] = []

    def fake_row(task):
        ran.append(task["placer"])
        return {**task, "name": "ptb_002", "auto_s": 0.01, "corners": [[1, 1.0], [3, 0.9]], "last_evaluation": 8,
                "seconds": 0.5}

    store = report.Store(tmp_path / "curves.jsonl")
    first = store.run([task], fake_row, 1, "section 6", report.IDENTITY, None, report.CURVE_FIELDS,
                      report.curve_row_readable)
    assert ran == ["annealing"]
    store.run([task], fake_row, 1, "section 6", report.IDENTITY, None, report.CURVE_FIELDS, report.curve_row_readable)
    assert ran == ["annealing"]  # saved: it stands
    store.add({**first[0], **edit})
    again = report.Store(tmp_path / "curves.jsonl").run([task], fake_row, 1, "section 6", report.IDENTITY, None,
                                                        report.CURVE_FIELDS, report.curve_row_readable)
    assert ran == ["annealing", "annealing"] and again[0]["corners"] == [[1, 1.0], [3, 0.9]]
    (tmp_path / "figs").mkdir()
    (png,) = report.draw_curves(again, tmp_path / "figs")
    assert png.name == "curve_ptb_002_k80x4.png" and png.read_bytes().startswith(b"\x89PNG")
    drawn = json.loads((tmp_path / "figs" / "curve_ptb_002_k80x4.json").read_text())
    assert drawn == {"auto_step_s": 0.01, "budget": 8, "best_over_auto": {"annealing": [[1, 1.0], [3, 0.9]]}}
