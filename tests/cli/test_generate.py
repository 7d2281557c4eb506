"""``gnplace generate`` end to end."""

from __future__ import annotations

import json

import pytest

from gnplace.cli import main

pytestmark = pytest.mark.usefixtures("short_ptb")  # what generate does with its graphs, not their size


def test_generate_writes_a_seeded_dataset_twice_identically(tmp_path, capsys):
    for name in ("a", "b"):
        assert main(["generate", "--family", "ptb", "--count", "1", "--seed", "4", "--test-count", "1",
                     "--out", str(tmp_path / name)]) == 0
    first = {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()}
    second = {p.name: p.read_bytes() for p in (tmp_path / "b").iterdir()}
    assert first == second and sorted(first) == ["manifest.json", "ptb_000.gnpg"]
    manifest = json.loads(first["manifest.json"])
    assert [e["split"] for e in manifest["graphs"]].count("test") == 1
    assert "wrote 1 graph and" in capsys.readouterr().out


def test_a_graph_the_disk_has_no_room_for_is_named_and_the_graphs_before_it_kept(tmp_path, capsys, disk_full_at):
    disk_full_at("ptb_001.gnpg")
    out = tmp_path / "ds"
    assert main(["generate", "--family", "ptb", "--count", "3", "--seed", "4", "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"gnplace: error: cannot write {out / 'ptb_001.gnpg'}: No space left on device\n"
    assert sorted(p.name for p in out.iterdir()) == ["ptb_000.gnpg"]


def test_generate_unknown_family_is_one_line(tmp_path, capsys):
    assert main(["generate", "--family", "imagenet", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error:") and "cifar10" in err and err.count("\n") == 1


def test_another_dataset_in_the_folder_is_kept_unless_overwrite(tmp_path, capsys):
    args = ["generate", "--family", "ptb", "--count", "1", "--test-count", "0", "--out", str(tmp_path)]
    assert main(args + ["--seed", "4"]) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    capsys.readouterr()
    assert main(args + ["--seed", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error:") and "holds another dataset" in err and err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert main(args + ["--seed", "5", "--overwrite"]) == 0
    assert json.loads((tmp_path / "manifest.json").read_text())["seed"] == 5


def test_an_empty_out_is_refused_not_read_as_the_current_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["generate", "--family", "ptb", "--count", "1", "--out", ""]) == 2
    err = capsys.readouterr().err
    assert "--out is empty" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_in_a_log_file_generate_writes_a_progress_line_per_graph_when_asked_often(tmp_path, capsys, monkeypatch):
    import sys

    import gnplace.progress

    monkeypatch.setattr(gnplace.progress, "LINE_EVERY_S", 0.0)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)  # where the bar would be drawn
    assert main(["generate", "--family", "ptb", "--count", "2", "--seed", "4", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0] for line in lines] == ["ptb graphs: 1/2 graphs (50%)", "ptb graphs: 2/2 graphs (100%)"]
    assert lines[0].endswith(" ops)") and "; ptb: " in lines[0]


@pytest.mark.parametrize("seed", ["-1", "x"])
def test_a_seed_that_is_no_whole_number_is_refused_as_every_command_refuses_it(tmp_path, capsys, seed):
    """generate alone read --seed as any int: "argument --seed/-s: invalid int value: 'x'", and -1 was refused
    after the family was checked, as "--seed must be at least 0"; the others say "expected a whole number >= 0"."""
    with pytest.raises(SystemExit) as stop:
        main(["generate", "--family", "ptb", "--count", "1", "--seed", seed, "--out", str(tmp_path / "d")])
    assert stop.value.code == 2 and not (tmp_path / "d").exists()
    shown = repr(seed) if seed == "x" else seed
    assert f"argument --seed/-s: expected a whole number >= 0, got {shown}" in capsys.readouterr().err


def test_a_rerun_says_it_kept_the_graphs_drawn_before_not_that_it_wrote_them(tmp_path, capsys):
    """A second ``generate`` of one dataset wrote nothing, yet printed ``wrote 2 graphs``."""
    args = ["generate", "--family", "ptb", "--count", "2", "--seed", "4", "--out", str(tmp_path)]
    assert main(args) == 0
    assert capsys.readouterr().out.endswith(f"wrote 2 graphs and {tmp_path / 'manifest.json'}\n")
    (tmp_path / "ptb_001.gnpg").unlink()  # an interrupted run's folder: one graph left to draw
    assert main(args) == 0
    assert capsys.readouterr().out.endswith(
        f"wrote 1 graph and {tmp_path / 'manifest.json'} (kept 1 drawn there before)\n")
    assert main(args) == 0
    assert capsys.readouterr().out.endswith(
        f"wrote 0 graphs and {tmp_path / 'manifest.json'} (kept 2 drawn there before)\n")
