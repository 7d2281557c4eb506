"""``scripts/demo.py``: the clusters its flags name."""

from __future__ import annotations

from pathlib import Path

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
