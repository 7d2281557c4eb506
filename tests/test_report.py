"""``scripts/bench.py report`` (``scripts/report.py``): the command, its sections run in order, its quick mode end to
end; the tests of its jobs (``scripts/reporting/``) are in ``tests/reporting/``."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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


def test_a_report_cut_short_leaves_every_figure_of_the_report_before(tmp_path, load_script, monkeypatch):
    """A run cut short in section 4 or 5 had drawn section 2's figures anew beside the report of before."""
    bench = load_script("bench")
    report = bench.report
    drawn = []
    for name in ("plot_curves", "plot_learned_bars", "plot_scale"):
        monkeypatch.setattr(report, name, lambda *args, name=name: drawn.append(name))
    for module in (report, load_script("reporting.table")):  # section 1's placements, and its baselines'
        monkeypatch.setattr(module, "table_placements", lambda *args: [])
    monkeypatch.setattr(report, "placeto_zero_shot_tasks", lambda *args: [])
    monkeypatch.setattr(report.Store, "run", lambda *args: [])

    class Killed(Exception):
        pass

    def killed(*args):
        raise Killed

    monkeypatch.setattr(report, "scale_rows", killed)  # section 5, the last
    with pytest.raises(Killed):
        bench.main(["report", "--quick", "--jobs", "1", "--out", str(tmp_path / "out")])
    assert drawn == []


def test_running_report_py_alone_points_at_bench_py_and_fails():
    """``python scripts/report.py`` exited 0 having done nothing; it is a subcommand of ``bench.py``."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "report.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("report.py: error: run the report as `python scripts/bench.py report` (its options: "
                           "`python scripts/bench.py report --help`)\n")


def test_report_run_alone_under_python_p_names_the_command_to_run(tmp_path):
    # python -P leaves scripts/ off sys.path: `from benchmarks.common import ...` was a ModuleNotFoundError
    done = subprocess.run([sys.executable, "-P", str(ROOT / "scripts" / "report.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "python scripts/bench.py report" in done.stderr


def test_the_command_the_report_says_made_it_runs_as_written_with_any_path(load_script):
    """A path of a space was written bare: the command copied from the report gave the shell two words."""
    import shlex

    report = load_script("report")
    given = ["report", "--quick", "--out", "my runs", "--doc", "a b/R $HOME.md", "--figures", "figs'x", "--cache", "c"]
    args = argparse.Namespace(quick=True, out="my runs", doc="a b/R $HOME.md", figures="figs'x", cache="c")
    words = shlex.split(report.report_command(args))
    assert words[:3] == ["python", "scripts/bench.py", "report"] and words[3:] == given[1:]


