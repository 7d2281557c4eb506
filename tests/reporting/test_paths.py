"""``scripts/reporting/paths.py``: where the report writes, each path refused before any run where it cannot be used."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class _Stop(Exception):
    """Raised in place of section 1's placements: the test is about what comes before them."""


def _stop_at_the_runs(monkeypatch):
    import gnplace.evaluate

    def stop(*args, **kwargs):
        raise _Stop

    monkeypatch.setattr(gnplace.evaluate, "evaluate", stop)


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


@pytest.mark.parametrize("doc", ["out/learned.jsonl", "out/elapsed.json", "out/table/results.md", "cache/x.md",
                                 "out/curves.jsonl", "out/baselines/results.csv",
                                 "out/placeto_ptb_k80x4_2_r1_b252571f413d.pt"])
def test_report_refuses_a_doc_that_is_one_of_its_run_files(tmp_path, load_script, capsys, monkeypatch, doc):
    """``--doc OUT/learned.jsonl`` wrote the report over section 2's saved runs, which the next run did again; then
    ``OUT/curves.jsonl`` (section 6's runs), ``OUT/baselines/results.csv`` (section 1's non-learned placers') and a
    Placeto checkpoint of section 2 were still taken, and written over."""
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


def test_a_quick_report_keeps_everything_under_out_and_the_full_one_writes_the_projects_docs(load_script, tmp_path,
                                                                                              monkeypatch):
    """``--quick --out DIR`` made ``./out/bench`` in the working folder for its large graphs; the full report's
    default ``docs/RESULTS.md`` was the working folder's."""
    paths = load_script("reporting.paths")
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(quick=True, out="q", doc=None, figures=None, cache=None)
    assert paths.report_paths(args) == ("q", Path("q/RESULTS.md"), Path("q/figures"), str(Path("q/cache")))
    args = argparse.Namespace(quick=False, out=None, doc=None, figures=None, cache=None)
    assert paths.report_paths(args) == ("out/report", ROOT / "docs" / "RESULTS.md", ROOT / "docs" / "figures",
                                         "out/bench")
    args = argparse.Namespace(quick=True, out=None, doc="r.md", figures="f", cache="c")
    assert paths.report_paths(args) == ("out/report_quick", Path("r.md"), Path("f"), "c")


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
