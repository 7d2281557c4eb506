"""Output paths that name no file (empty, or ``-`` taken for stdout) and repeated ``--input-shape``: one error line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnplace.cli import main
from tests.cli.test_import_onnx import write_mlp

ROOT = Path(__file__).resolve().parents[2]
GRAPH = str(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")


def one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("gnplace: error:") and err.count("\n") == 1 and "Traceback" not in err, err
    assert captured.out == ""
    return err


@pytest.mark.parametrize("argv, flag", [
    (["place", GRAPH, "-c", "k80x2", "-p", "single", "-o", ""], "--output"),
    (["place", GRAPH, "-c", "k80x2", "-p", "single", "--device-map", ""], "--device-map"),
    (["simulate", GRAPH, "-c", "k80x2", "--timeline", ""], "--timeline"),
    (["place", GRAPH, "-c", "k80x2", "-p", "single", "-o", "-", "--json"], "--output"),
    (["place", GRAPH, "-c", "k80x2", "-p", "single", "--device-map", "-"], "--device-map"),
])
def test_an_output_that_names_no_file_is_refused(argv, flag, tmp_path, capsys, monkeypatch):
    """`-o ""` (an unset variable) wrote nothing and exited 0; `-o -` wrote a file named '-', not stdout."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = one_line_error(capsys)
    assert flag in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["evaluate", "-g", GRAPH, "-c", "k80x2", "-p", "single", "-j", "1", "-o", "-"],
    ["generate", "-f", "ptb", "-n", "1", "--out", "-"],
])
def test_an_output_folder_named_dash_is_refused(argv, tmp_path, capsys, monkeypatch):
    """`evaluate -o -` made a folder named '-' and wrote results.csv in it, where a file output's `-` is refused."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert "-: writes a folder, not stdout" in one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("output", ["", "-"])
def test_import_to_no_file_is_refused(output, tmp_path, capsys, monkeypatch):
    model = write_mlp(tmp_path / "mlp.onnx", batch=8)
    monkeypatch.chdir(tmp_path)
    assert main(["import", str(model), "-o", output]) == 2
    assert "--output" in one_line_error(capsys)
    assert [p.name for p in tmp_path.iterdir()] == ["mlp.onnx"]


def test_pretrain_export_to_stdout_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["pretrain", "--out", str(tmp_path / "run"), "--export", "-"]) == 2
    assert "--export" in one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["import", "inspect"])
def test_an_input_given_two_shapes_is_refused(command, tmp_path, capsys):
    """`--input-shape x=8,16 --input-shape x=4,16`: the last won silently, as --option's twice-given value does not."""
    model = write_mlp(tmp_path / "dyn.onnx")
    out = ["-o", str(tmp_path / "g.gnpg")] if command == "import" else []
    argv = [command, str(model), *out, "--input-shape", "x=8,16", "--input-shape", "x=4,16"]
    assert main(argv) == 2
    assert "--input-shape" in one_line_error(capsys)
    assert not (tmp_path / "g.gnpg").exists()
    # the same sizes twice are one shape
    assert main([command, str(model), *out, "--input-shape", "x=8,16", "--input-shape", "x=8,16", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["input_shapes" if command == "import" else "meta"] is not None


def test_algo_and_an_option_of_another_algo_are_refused(capsys):
    """`--algo ppo -O ppo.algo=reinforce`: --algo won silently, as a twice-given --option is refused."""
    argv = ["place", GRAPH, "-c", "k80x2", "-p", "ppo", "--budget", "2", "--algo", "ppo", "-O", "ppo.algo=reinforce"]
    assert main(argv) == 2
    assert "--algo" in one_line_error(capsys)
