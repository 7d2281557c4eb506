"""Bad input on every command: one ``gnplace: error:`` line, exit 2, no traceback, nothing saved lost."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from gnplace.cli import main
from gnplace.cli.common import parse_placer_options, run_reporting_errors
from gnplace.exceptions import InvalidArgument, Terminated
from gnplace.graph import OpGraph
from gnplace.graph_io import save_graph
from gnplace.toy import chain_graph

KEPT = b"an earlier result, not to be lost\n"


@pytest.fixture(autouse=True)
def plain_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture()
def graph(tmp_path) -> str:
    return str(save_graph(chain_graph(6), tmp_path / "chain.gnpg"))


@pytest.fixture()
def kept(tmp_path) -> Path:
    """A file that must stay byte-identical, and a file in the way of a folder."""
    path = tmp_path / "kept"
    path.write_bytes(KEPT)
    return path


def one_error(capsys, code: int, expected: int = 2, prefix: str = "gnplace: error: ") -> str:
    out, err = capsys.readouterr()
    assert code == expected, (out, err)
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith(prefix), err
    return err


def no_tmp_left(folder: Path) -> None:
    assert not [p for p in folder.rglob("*.tmp")], list(folder.rglob("*"))


# ------------------------------------------------------------------------------ 1: output paths
@pytest.mark.parametrize("where", ["under_file", "folder", "folder_slash"])
def test_place_output_that_cannot_be_written(tmp_path, capsys, graph, kept, where):
    (tmp_path / "dir").mkdir()
    target = {"under_file": str(kept / "out.json"), "folder": str(tmp_path / "dir"),
              "folder_slash": str(tmp_path / "dir") + "/"}[where]
    err = one_error(capsys, main(["place", graph, "-c", "k80x2", "-p", "single", "-o", target]))
    assert target in err
    assert kept.read_bytes() == KEPT
    no_tmp_left(tmp_path)


def test_place_device_map_under_a_file(tmp_path, capsys, graph, kept):
    code = main(["place", graph, "-c", "k80x2", "-p", "single", "--device-map", str(kept / "dm.json")])
    assert "--device-map" in one_error(capsys, code)
    assert kept.read_bytes() == KEPT


def test_place_device_map_of_a_graph_without_parameters_keeps_the_output_file(tmp_path, capsys, graph, kept):
    """The graph is refused before anything is placed or written: the earlier ``-o`` file stays."""
    code = main(["place", graph, "-c", "k80x2", "-p", "single", "-o", str(kept), "--device-map",
                 str(tmp_path / "dm.json")])
    assert "has no parameters: a device_map needs a model whose weights the graph holds (imported from PyTorch, or " \
           "from an ONNX file with its initializers)" in one_error(capsys, code)  # said "from PyTorch" alone, though
    # an ONNX file's weights export
    assert kept.read_bytes() == KEPT and not (tmp_path / "dm.json").exists()


def test_place_refuses_to_write_over_its_input_graph(tmp_path, capsys, graph):
    before = Path(graph).read_bytes()
    for flag in ("-o", "--device-map"):
        err = one_error(capsys, main(["place", graph, "-c", "k80x2", "-p", "single", flag, graph]))
        assert f"is the input {Path(graph).name}; write to another file" in err
    assert Path(graph).read_bytes() == before


def test_outputs_over_the_other_inputs_or_each_other_are_refused(tmp_path, capsys, graph):
    """A cluster file, a checkpoint or a placement read, or -o and --device-map on one file: refused, nothing lost."""
    import shutil

    root = Path(__file__).parents[2]
    cluster = shutil.copy(root / "gnplace" / "clusters" / "k80x2.yaml", tmp_path / "k80x2.yaml")
    checkpoint = shutil.copy(root / "checkpoints" / "gnplace-base.ckpt", tmp_path / "base.ckpt")
    placement = tmp_path / "p.json"
    assert main(["place", graph, "-c", str(cluster), "-p", "single", "-o", str(placement)]) == 0
    capsys.readouterr()
    kept = {path: Path(path).read_bytes() for path in (cluster, checkpoint, placement)}
    for args in (["place", graph, "-c", str(cluster), "-o", str(cluster)],
                 ["place", graph, "-c", str(cluster), "--device-map", str(cluster)],
                 ["place", graph, "-p", "policy", "--checkpoint", str(checkpoint), "-o", str(checkpoint)],
                 ["place", graph, "-o", str(tmp_path / "same.json"), "--device-map", str(tmp_path / "same.json")]):
        (tmp_path / "same.json").write_text("{}")
        err = one_error(capsys, main(args))
        assert "is the input" in err and "write to another file" in err
    (tmp_path / "same.json").unlink()
    err = one_error(capsys, main(["place", graph, "-o", str(tmp_path / "same.json"), "--device-map",
                                  str(tmp_path / "same.json")]))
    assert "is the --output file too" in err and not (tmp_path / "same.json").exists()
    svg = shutil.copy(placement, tmp_path / "p.svg")  # a placement file that happens to end in .svg
    kept[svg] = Path(svg).read_bytes()
    err = one_error(capsys, main(["simulate", graph, "-c", "k80x2", "-p", str(svg), "--timeline", str(svg)]))
    assert "--timeline" in err and "is the input p.svg" in err
    assert all(Path(path).read_bytes() == content for path, content in kept.items())


def test_outputs_over_a_factory_file_or_an_onnx_model_are_refused(tmp_path, capsys):
    """place -o / --device-map over FILE.py of FILE.py:factory, and import -o over the ONNX model it reads."""
    factory = tmp_path / "mymodel.py"
    factory.write_text("import torch\n\ndef make():\n    return torch.nn.Linear(4, 1), (torch.zeros(2, 4),)\n")
    before = factory.read_bytes()
    for flag in ("-o", "--device-map"):
        err = one_error(capsys, main(["place", f"{factory}:make", "-c", "k80x2", "-p", "single", flag, str(factory)]))
        assert "is the input mymodel.py; write to another file" in err
    assert factory.read_bytes() == before
    import onnx
    from onnx import TensorProto, helper

    model = tmp_path / "m.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])), model)
    before = model.read_bytes()
    err = one_error(capsys, main(["import", str(model), "-o", str(model)]))
    assert "is the input m.onnx; write to another file" in err
    assert model.read_bytes() == before


def test_outputs_over_the_module_file_of_a_module_factory_are_refused(tmp_path, capsys, monkeypatch):
    """place --device-map / -o over mymod.py of ``mymod:make`` (found in the working folder) wrote over it."""
    package = tmp_path / "dmap_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    factory = package / "dmap_model.py"
    factory.write_text("import torch\n\ndef make():\n    return torch.nn.Linear(4, 1), (torch.zeros(2, 4),)\n")
    before = factory.read_bytes()
    monkeypatch.chdir(tmp_path)
    for flag in ("-o", "--device-map"):
        for target in (str(factory), "dmap_pkg/dmap_model.py", "dmap_pkg/__init__.py"):
            source = "dmap_pkg:make" if target.endswith("__init__.py") else "dmap_pkg.dmap_model:make"
            err = one_error(capsys, main(["place", source, "-c", "k80x2", "-p", "single", flag, target]))
            assert f"is the input {Path(target).name}; write to another file" in err
    assert factory.read_bytes() == before and (package / "__init__.py").read_text() == ""


def test_place_device_map_is_written_atomically(tmp_path, capsys):
    target = tmp_path / "maps" / "dm.json"
    assert main(["place", "gnplace.execute.examples:tiny", "-c", "k80x2", "-p", "single", "--device-map", str(target)]) == 0
    assert isinstance(json.loads(target.read_text()), dict)
    no_tmp_left(tmp_path)


def test_a_write_that_fails_late_is_one_line_and_leaves_no_tmp(tmp_path, capsys, graph, kept, disk_full_at):
    """An OSError at write time (a full disk, /proc, ...) is one line; the old file and folder stay clean."""
    target = tmp_path / "p.json"
    target.write_bytes(KEPT)

    disk_full_at()  # after PATH.tmp is written
    err = one_error(capsys, main(["place", graph, "-c", "k80x2", "-p", "single", "-o", str(target)]))
    assert f"cannot write {target}: No space left on device" in err
    assert target.read_bytes() == KEPT
    no_tmp_left(tmp_path)


@pytest.mark.parametrize("name, message", [("t.xyz", "unsupported file type '.xyz'"), ("kept/t.png", "not a folder")])
def test_simulate_timeline_that_cannot_be_drawn(tmp_path, capsys, graph, kept, name, message):
    code = main(["simulate", graph, "-c", "k80x2", "--timeline", str(tmp_path / name)])
    assert message in one_error(capsys, code)
    assert kept.read_bytes() == KEPT and not (tmp_path / "t.xyz").exists()


def test_import_output_folder(tmp_path, capsys):
    (tmp_path / "dir").mkdir()
    model = _onnx_mlp(tmp_path / "m.onnx")
    assert "is a folder" in one_error(capsys, main(["import", str(model), "-o", str(tmp_path / "dir") + "/"]))


def test_generate_evaluate_profile_pretrain_out_is_a_file(capsys, graph, kept):
    for args in (["generate", "-f", "ptb", "-n", "1", "-o", str(kept)],
                 ["evaluate", "-g", graph, "-c", "k80x2", "-p", "single", "-j", "1", "-o", str(kept)],
                 ["profile", "gnplace.execute.examples:tiny", "--timer", "local", "-o", str(kept)],
                 ["pretrain", "--out", str(kept), "--no-progress"]):
        assert "is a file" in one_error(capsys, main(args)), args
        assert kept.read_bytes() == KEPT


def test_evaluate_results_csv_that_is_a_folder(tmp_path, capsys, graph):
    (tmp_path / "out" / "results.csv").mkdir(parents=True)
    code = main(["evaluate", "-g", graph, "-c", "k80x2", "-p", "single", "-j", "1", "-o", str(tmp_path / "out")])
    assert "results.csv: is a folder, expected a file" in one_error(capsys, code)  # refused before any run


def test_run_reporting_errors_reports_os_errors_but_not_programming_errors(capsys):
    def missing(args):
        open("/nonexistent/x")  # noqa: SIM115

    assert run_reporting_errors(missing, argparse.Namespace(), "tool") == 2
    assert capsys.readouterr().err == "tool: error: /nonexistent/x: No such file or directory\n"

    def stops(args):
        raise SystemExit("no pair in\ncommon")

    assert run_reporting_errors(stops, argparse.Namespace(), "tool") == 2
    assert capsys.readouterr().err == "tool: error: no pair in common\n"

    def bug(args):
        return {}["key"]

    with pytest.raises(KeyError):
        run_reporting_errors(bug, argparse.Namespace(), "tool")


@pytest.mark.parametrize("after", [lambda: SystemExit(1), lambda: SystemError("returned a result with an exception set")])
def test_a_ctrl_c_that_a_library_turned_into_another_exception_is_an_interrupt(capsys, after):
    """Lightning's trainer exits 1 after a Ctrl-C; numba's compiled loops raise SystemError."""
    def run(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise after() from None

    assert run_reporting_errors(run, argparse.Namespace(), "tool") == 130
    assert capsys.readouterr().err == "tool: interrupted\n"

    def plain(args):
        raise after()

    with pytest.raises(type(after())):
        run_reporting_errors(plain, argparse.Namespace(), "tool")


def test_a_sigterm_that_numba_turned_into_a_system_error_is_a_sigterm(capsys):
    """``gnplace evaluate -j 1`` raises a SIGTERM as Terminated in its own process, where numba's compiled loops hand
    it back as a SystemError: that was "interrupted" and 130, as for a Ctrl-C."""
    from gnplace.exceptions import Terminated

    def run(args):
        try:
            raise Terminated("SIGTERM")
        except Terminated:
            raise SystemError("returned a result with an exception set") from None

    assert run_reporting_errors(run, argparse.Namespace(), "tool") == 143
    assert capsys.readouterr().err == "tool: SIGTERM: interrupted\n"


def test_a_reader_that_closed_the_pipe_is_a_quiet_exit_not_an_error(capsys):
    def run(args):
        raise BrokenPipeError(32, "Broken pipe")  # `gnplace simulate --json | head`, head gone

    assert run_reporting_errors(run, argparse.Namespace(), "tool") == 141
    assert capsys.readouterr().err == ""


def test_the_console_command_piped_into_a_closed_reader_prints_nothing(tmp_path):
    graph = save_graph(chain_graph(40), tmp_path / "chain.gnpg")
    reader = subprocess.Popen([sys.executable, "-m", "gnplace.cli", "simulate", str(graph), "-c", "k80x2", "-p",
                               "round_robin", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader.stdout.close()  # the reader goes away before the command writes
    assert reader.wait(timeout=120) in (0, 141) and b"Broken pipe" not in reader.stderr.read()


@pytest.mark.parametrize("command", ["simulate", "inspect", "evaluate"])
def test_a_rich_table_piped_into_a_closed_reader_is_141_not_1(tmp_path, command):
    """rich's console exits 1 on a closed pipe (``| true``), which read as an error ("some runs failed")."""
    graph = save_graph(chain_graph(40), tmp_path / "chain.gnpg")
    argv = {"simulate": ["simulate", str(graph), "-c", "k80x2"], "inspect": ["inspect", str(graph)],
            "evaluate": ["evaluate", "--graphs", str(graph), "--clusters", "k80x2", "--placers", "single",
                         "--out", str(tmp_path / "out")]}[command]
    reader = subprocess.Popen([sys.executable, "-m", "gnplace.cli", *argv], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    reader.stdout.close()  # the reader goes away before the command writes
    assert (reader.wait(timeout=120), reader.stderr.read()) == (141, b"")


def test_a_run_stopped_by_sigterm_is_one_line_and_exit_143(capsys):
    def run(args):
        raise Terminated("SIGTERM")

    assert run_reporting_errors(run, argparse.Namespace(), "tool", "interrupted (--resume continues)") == 143
    assert capsys.readouterr().err == "tool: SIGTERM: interrupted (--resume continues)\n"


def test_a_run_stopped_by_ctrl_c_is_one_line_and_exit_130(capsys):
    def run(args):
        raise KeyboardInterrupt

    assert run_reporting_errors(run, argparse.Namespace(), "tool", "interrupted (--resume continues)") == 130
    assert capsys.readouterr().err == "tool: interrupted (--resume continues)\n"


# ------------------------------------------------------------------------------ 2: -O values
def test_unparsable_option_value_is_one_line(capsys, graph):
    with pytest.raises(InvalidArgument) as caught:
        parse_placer_options(["m_etf.x=[unclosed"], ["m_etf"])
    assert "\n" not in str(caught.value)
    one_error(capsys, main(["place", graph, "-c", "k80x2", "-p", "m_etf", "-O", "m_etf.x=[unclosed"]))


# ------------------------------------------------------------------------------ 3: empty graph
def test_empty_graph_is_refused_by_every_command_that_places_or_times_it(tmp_path, capsys):
    """As README says: one line from simulate, place, finetune and evaluate; the library answers 0 s and []."""
    import gnplace

    empty = str(save_graph(OpGraph([], name="empty"), tmp_path / "empty.json"))
    line = f"{empty}: graph 'empty' has no ops; there is nothing to place"
    for command in ("simulate", "place"):
        assert line in one_error(capsys, main([command, empty, "-c", "k80x2"]))
    assert line in one_error(capsys, main(["finetune", empty, "-c", "k80x2", "-o", str(tmp_path / "ft")]))
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "gnplace-dataset",
                                                        "graphs": [{"file": "empty.json", "split": "test"}]}))
    assert line in one_error(capsys, main(["evaluate", "-g", str(tmp_path), "-c", "k80x2", "-p", "single", "-o",
                                           str(tmp_path / "ev")]))
    graph, cluster = OpGraph([], name="empty"), gnplace.load_cluster("k80x2")
    placement = gnplace.get_placer("auto").place(graph, cluster)
    assert placement.devices.tolist() == [] and gnplace.simulate(graph, cluster, placement).step_time == 0.0


# ------------------------------------------------------------------------------ 4: evaluate
@pytest.mark.parametrize("graphs", [[{"file": 5, "split": "train"}], "x", [7]])
def test_evaluate_malformed_manifest(tmp_path, capsys, graphs):
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "manifest.json").write_text(json.dumps({"format": "gnplace-dataset", "graphs": graphs}))
    code = main(["evaluate", "-g", str(tmp_path / "ds"), "-c", "k80x2", "-p", "single", "-o", str(tmp_path / "o")])
    assert "manifest.json" in one_error(capsys, code)


def test_evaluate_binary_results_file_is_kept(tmp_path, capsys, graph):
    out = tmp_path / "out"
    out.mkdir()
    binary = bytes(range(128, 256)) * 3
    (out / "results.csv").write_bytes(binary)
    code = main(["evaluate", "-g", graph, "-c", "k80x2", "-p", "single", "-j", "1", "-o", str(out)])
    assert "not a results file" in one_error(capsys, code)
    assert (out / "results.csv").read_bytes() == binary
    no_tmp_left(out)


@pytest.mark.parametrize("args, message", [
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--jobs", "-3"], "--jobs must be at least 1"),
    (["-c", ","], "names no cluster"),
    (["-p", ","], "names no placer"),
    (["--budget", "-5"], "--budget must be at least 1"),
])
def test_evaluate_refuses_bad_counts_and_empty_lists(tmp_path, capsys, graph, args, message):
    code = main(["evaluate", "-g", graph, "-c", "k80x2", "-p", "single", "-o", str(tmp_path / "o"), *args])
    assert message in one_error(capsys, code)


def test_evaluate_runs_a_duplicated_placer_once(tmp_path, capsys, graph):
    out = tmp_path / "o"
    assert main(["evaluate", "-g", graph, "-c", "k80x2,k80x2", "-p", "single,single", "-j", "1", "-o", str(out)]) == 0
    assert len((out / "results.csv").read_text().splitlines()) == 2  # header and one row
    assert "1 graph x 1 cluster x 1 placer (geometric means)" in capsys.readouterr().out  # and its table counts each once


@pytest.mark.parametrize("plot", [False, True])
def test_evaluate_with_failed_runs_exits_1_with_a_count(tmp_path, capsys, graph, plot):
    out = tmp_path / "o"
    args = ["evaluate", "-g", graph, "-c", "k80x2", "-p", "single,exact", "-O", "exact.max_groups=2",
            "-j", "1", "-o", str(out), *(["--plot"] if plot else [])]
    err = one_error(capsys, main(args), expected=1, prefix="gnplace: 1 of 2 runs failed")
    assert "exact" in err
    rows = (out / "results.csv").read_text().splitlines()
    assert len(rows) == 3 and "max_groups=2" in "".join(rows)


def test_evaluate_with_a_bad_checkpoint_exits_2_and_keeps_saved_rows(tmp_path, capsys, graph):
    out = tmp_path / "o"
    assert main(["evaluate", "-g", graph, "-c", "k80x2", "-p", "single,policy", "-j", "1", "-o", str(out)]) == 0
    saved = (out / "results.csv").read_bytes()
    capsys.readouterr()
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    args = ["evaluate", "-g", graph, "-c", "k80x2", "-p", "single,policy", "--checkpoint", str(bad), "-j", "1",
            "-o", str(out)]
    assert "not a readable checkpoint" in one_error(capsys, main(args))  # refused before anything runs
    assert (out / "results.csv").read_bytes() == saved


# ------------------------------------------------------------------------------ 5: counts
@pytest.mark.parametrize("args, message", [
    (["-n", "-2"], "--count must be at least 1"),
    (["-n", "0"], "--count must be at least 1"),
    (["-n", "99999999999"], "--count must be at most 1000000"),  # drawing the split needed 745 GiB
    (["-n", "4", "--test-count", "-1"], "--test-count must be at least 0"),
    (["-n", "4", "--test-count", "5"], "--test-count 5 is more than --count 4"),
])
def test_generate_refuses_bad_counts(tmp_path, capsys, args, message):
    assert message in one_error(capsys, main(["generate", "-f", "ptb", "-o", str(tmp_path / "ds"), *args]))
    assert not (tmp_path / "ds").exists()


def test_profile_refuses_negative_placements(tmp_path, capsys):
    code = main(["profile", "gnplace.execute.examples:tiny", "--placements", "-1", "-o", str(tmp_path / "p")])
    assert "--placements must be at least 0" in one_error(capsys, code)


@pytest.mark.parametrize(("placer", "budget"), [("policy", "-5"), ("annealing", "0"), ("random_search", "0")])
def test_place_refuses_a_budget_below_one_by_its_flag(capsys, graph, placer, budget):
    """-5 was "--budget must be at least 0" (0 was refused too) and 0 "AnnealingPlacer needs integers budget >= 1
    and batch >= 1", naming a class; evaluate says "--budget must be at least 1"."""
    code = main(["place", graph, "-c", "k80x2", "-p", placer, "--budget", budget])
    assert one_error(capsys, code) == f"gnplace: error: --budget must be at least 1, got {budget}\n"


# ------------------------------------------------------------------------------ 6, 7: pretrain, profile
def test_pretrain_unknown_strategy_and_unwritable_export(tmp_path, capsys, kept):
    out = str(tmp_path / "run")
    err = one_error(capsys, main(["pretrain", "--out", out, "--no-progress", "--strategy", "nosuch"]))
    assert "--strategy 'nosuch' is not a Lightning strategy" in err and "ddp_spawn" in err
    (tmp_path / "dir").mkdir()
    for export in (str(tmp_path / "dir") + "/", str(kept / "p.ckpt")):
        err = one_error(capsys, main(["pretrain", "--out", out, "--no-progress", "--export", export]))
        assert "export path" in err or err.startswith(f"gnplace: error: --export {export}")
    assert not (tmp_path / "run").exists()  # refused before training started


def test_profile_unknown_torch_device(tmp_path, capsys):
    code = main(["profile", "gnplace.execute.examples:tiny", "--timer", "local", "--devices", "cpu,bogus",
                 "-o", str(tmp_path / "p")])
    assert "'bogus' is not a torch device" in one_error(capsys, code)


# ------------------------------------------------------------------------------ 9: warnings
def _onnx_mlp(path: Path, unknown_op: bool = False) -> Path:
    """``relu(x @ w)``, with a LinearAttention op (a standard op of opset 27 with no FLOP rule) after it when
    ``unknown_op``."""
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"])]
    inits = [w]
    if unknown_op:
        nodes += [helper.make_node("Unsqueeze", ["y", "axes"], ["y3"], name="unsq"),
                  helper.make_node("LinearAttention", ["y3", "y3", "y3"], ["n", "state"], name="linear_attention",
                                   q_num_heads=1, kv_num_heads=1, update_rule="linear")]
        inits.append(numpy_helper.from_array(np.array([2], np.int64), "axes"))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)], inits)
    opset = 27 if unknown_op else 17
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString())
    return path


def test_unknown_onnx_op_in_place_is_one_warning_line(tmp_path, capsys):
    model = _onnx_mlp(tmp_path / "linear_attention.onnx", unknown_op=True)
    assert main(["place", str(model), "-c", "k80x2", "-p", "single"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gnplace: warning:") and "LinearAttention" in err, err


def test_warnings_are_single_lines_and_torch_unsafe_load_warning_is_silenced(capsys):
    def warns(args):
        warnings.warn("first line\nsecond line", UserWarning, stacklevel=1)
        warnings.warn("You are using `torch.load` with `weights_only=False` ... \n arbitrary code", UserWarning,
                      stacklevel=1)
        raise InvalidArgument("refused")

    assert run_reporting_errors(warns, argparse.Namespace(), "tool") == 2
    assert capsys.readouterr().err == "tool: warning: first line second line\ntool: error: refused\n"


def test_refused_pickled_checkpoint_is_one_line(tmp_path, capsys, graph):
    import torch

    evil = tmp_path / "evil.ckpt"
    torch.save({"x": argparse.Namespace(a=1)}, evil)
    code = main(["place", graph, "-c", "k80x2", "-p", "policy", "--checkpoint", str(evil)])
    assert "not a readable checkpoint" in one_error(capsys, code)


# ------------------------------------------------------------------------------ scripts/place.py
def test_place_script_reports_like_the_command(tmp_path, capsys, load_script, kept):
    place = load_script("place")
    empty = str(save_graph(OpGraph([], name="empty"), tmp_path / "empty.json"))
    assert "has no ops" in one_error(capsys, place.main([empty, "-c", "k80x2"]), prefix="place: error: ")
    (tmp_path / "dir").mkdir()
    graph = str(save_graph(chain_graph(4), tmp_path / "g.gnpg"))
    for target in (str(tmp_path / "dir") + "/", str(kept / "p.json")):
        code = place.main([graph, "-c", "k80x2", "--samples", "0", "-o", target])
        assert target in one_error(capsys, code, prefix="place: error: --output")
    assert kept.read_bytes() == KEPT
    code = place.main([graph, "-c", "k80x2", "--samples", "0", "--checkpoint", str(kept), "-o", str(kept)])
    assert "is the input kept" in one_error(capsys, code, prefix="place: error: --output")
    assert kept.read_bytes() == KEPT


def test_place_script_passes_refine_and_the_constructor_temperature_and_refuses_bad_ones(
        tmp_path, capsys, load_script, monkeypatch):
    from gnplace.rl import zeroshot

    place = load_script("place")
    # 11 groups: 2,048 placements on two devices, past the 1,436 the search times (a smaller graph has every one timed)
    graph = str(save_graph(chain_graph(11), tmp_path / "g.gnpg"))
    made: list[zeroshot.PolicyPlacer] = []
    original = zeroshot.PolicyPlacer.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(zeroshot.PolicyPlacer, "__init__", record)
    assert place.main([graph, "-c", "k80x2", "--samples", "2", "--refine", "1", "--constructor-temperature", "0.5",
                       "--json"]) == 0
    counted = json.loads(capsys.readouterr().out)["evaluations"]
    assert (made[-1].refine, made[-1].constructor_temperature) == (1, 0.5) and counted == made[-1].last_evaluations
    assert place.main([graph, "-c", "k80x2", "--samples", "2", "--refine", "1", "--constructor-refine", "3",
                       "--constructor-prior", "2", "--json"]) == 0
    rounds = zeroshot.DEFAULT_LAST_ROUNDS
    assert json.loads(capsys.readouterr().out)["evaluations"] == \
        counted - 2 * rounds * (zeroshot.DEFAULT_CONSTRUCTOR_REFINE - 3)
    assert (made[-1].constructor_refine, made[-1].constructor_prior) == (3, 2.0)
    assert place.main([graph, "-c", "k80x2", "--samples", "2", "--refine", "1", "--last-rounds", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["evaluations"] == \
        counted - (rounds - 2) * (1 + 2 * zeroshot.DEFAULT_CONSTRUCTOR_REFINE)  # 1 + 2 x 8 a round
    assert made[-1].last_rounds == 2
    assert place.main([graph, "-c", "k80x2", "--samples", "2", "--refine", "1", "--constructor-temperature", "0.5"]) == 0
    assert f"the fastest of {counted} placements simulated, auto's included)" in capsys.readouterr().out.splitlines()[0]
    from gnplace.rl.zeroshot import SHIPPED_CONSTRUCTOR

    assert place.main([graph, "-c", "k80x2", "--samples", "2", "--constructor", str(SHIPPED_CONSTRUCTOR),
                       "--constructor-sizes", "--json"]) == 0
    capsys.readouterr()
    assert (made[-1].constructors, made[-1].constructor_sizes) == ((SHIPPED_CONSTRUCTOR,), ())
    assert "--constructor-sizes needs whole numbers >= 2" in one_error(
        capsys, place.main([graph, "-c", "k80x2", "--constructor-sizes", "1"]), prefix="place: error: ")
    for flag, value, message in (("--refine", "-1", "--refine must be at least 0, got -1"),
                                 ("--constructor-temperature", "0", "--constructor-temperature needs > 0"),
                                 ("--samples", "100000000", "--samples must be at most 4096, got 100000000"),
                                 ("--constructor-samples", "5000", "--constructor-samples must be at most 4096"),
                                 ("--refine", "4097", "--refine must be at most 4096"),
                                 ("--constructor-refine", "-2", "--constructor-refine must be at least 0"),
                                 ("--constructor-prior", "-1", "--constructor-prior needs >= 0"),
                                 ("--last-rounds", "0", "--last-rounds must be at least 1, got 0")):
        assert message in one_error(capsys, place.main([graph, "-c", "k80x2", flag, value]), prefix="place: error: ")
    # the same limit through the library and --option: one batch of rollouts, not an allocation of gigabytes
    err = one_error(capsys, main(["place", graph, "-c", "k80x2", "-p", "policy", "-O", "policy.samples=100000000"]))
    assert "PolicyPlacer needs samples <= 4096 (one batch of rollouts), got 100000000" in err


def test_option_values_in_exponent_notation_are_numbers_and_must_be_finite():
    assert parse_placer_options(["rnn_pg.lr=1e-3", "rnn_pg.name='x'"], ["rnn_pg"]) == {"rnn_pg": {"lr": 1e-3, "name": "x"}}
    for value in (".inf", "-.inf", ".nan"):
        with pytest.raises(InvalidArgument, match="value must be a finite number"):
            parse_placer_options([f"rnn_pg.lr={value}"], ["rnn_pg"])
    with pytest.raises(InvalidArgument, match="'checkpoint' is shared by every placer, not per placer; use --checkpoint"):
        parse_placer_options(["placeto.checkpoint=x.pt"], ["placeto"])
    with pytest.raises(InvalidArgument, match=r"'timer' is shared by every placer, not per placer; every placer here is "
                                              r"timed on the simulator of -c \(gnplace finetune --timer times real "
                                              r"steps\)$"):  # it named no way to set it
        parse_placer_options(["annealing.timer=x"], ["annealing"])


def test_an_unknown_option_of_a_comparator_is_named_as_unknown(capsys, graph):
    err = one_error(capsys, main(["place", graph, "-c", "k80x2", "-p", "rnn_pg", "--budget", "8", "-O", "rnn_pg.bogus=1"]))
    assert "placer 'rnn_pg' does not take these options" in err and "bogus" in err


@pytest.mark.parametrize("command", [
    ["place", "G", "-c", "k80x2", "-p", "heft", "--seed", "-1"],
    ["simulate", "G", "-c", "k80x2", "-p", "heft", "--seed", "-1"],
    ["inspect", "G", "--top", "-1"],
    ["evaluate", "-g", "G", "-c", "k80x2", "-p", "heft", "--seed", "x"],
])
def test_a_negative_seed_or_count_is_refused_by_the_parser(command, capsys, tmp_path):
    """heft ignores its seed, so -1 used to pass; inspect --top -1 listed all but one op type."""
    path = save_graph(chain_graph(3), tmp_path / "g.gnpg")
    with pytest.raises(SystemExit) as caught:
        main([str(path) if part == "G" else part for part in command])
    assert caught.value.code == 2
    assert "expected a whole number >= 0" in capsys.readouterr().err


@pytest.mark.parametrize("command, message", [
    (["place", "G", "-c", "k80x2", "-p", "policy", "--checkpoint", "D"], "is a folder, not a checkpoint file"),
    (["pretrain", "--config", "D", "--out", "D/run"], "is a folder, not a config file"),
    (["simulate", "G", "-c", "k80x2", "-p", "D"], "is a folder, not a placement file"),
])
def test_a_folder_where_a_file_is_expected_is_named_as_one(command, message, capsys, tmp_path):
    path = save_graph(chain_graph(3), tmp_path / "g.gnpg")
    folder = tmp_path / "folder"
    folder.mkdir()
    assert main([str(path) if p == "G" else p.replace("D", str(folder)) if p.startswith("D") else p
                 for p in command]) == 2
    assert message in capsys.readouterr().err


def test_an_option_given_twice_with_two_values_is_refused(capsys, graph):
    with pytest.raises(InvalidArgument, match=r"--option annealing.batch is given twice, as 8 and 16: give it once"):
        parse_placer_options(["annealing.batch=8", "annealing.batch=16"], ["annealing"])
    assert parse_placer_options(["annealing.batch=8", "annealing.batch=8"], ["annealing"]) == {"annealing": {"batch": 8}}
    err = one_error(capsys, main(["place", graph, "-c", "k80x2", "-p", "annealing", "--budget", "8",
                                  "-O", "annealing.batch=8", "-O", "annealing.batch=16"]))
    assert "given twice" in err


def test_place_refuses_a_budget_past_the_limit(capsys, graph):
    code = main(["place", graph, "-c", "k80x2", "-p", "annealing", "--budget", str(10**10)])
    assert "--budget must be at most 1000000000, got 10000000000" in one_error(capsys, code)


def test_evaluate_with_every_run_failed_leaves_no_older_runs_figures(tmp_path, capsys, graph):
    """A --plot run whose runs all failed kept an earlier run's timeline in its folder, as if its own.

    ratios.png is of the whole results file, the earlier run's row included: it is drawn again."""
    out = tmp_path / "o"
    assert main(["evaluate", "-g", graph, "-c", "k80x2", "-p", "single", "-j", "1", "-o", str(out), "--plot"]) == 0
    assert (out / "ratios.png").exists() and (out / "best_timeline.png").exists()
    args = ["evaluate", "-g", graph, "-c", "k80x2", "-p", "exact", "-O", "exact.max_groups=2", "-j", "1",
            "-o", str(out), "--plot"]
    one_error(capsys, main(args), expected=1, prefix="gnplace: 1 of 1 runs failed")
    assert (out / "ratios.png").exists() and not (out / "best_timeline.png").exists()
    assert len((out / "results.csv").read_text().splitlines()) == 3  # the earlier run's row is kept


def test_place_script_says_autos_placement_is_not_among_the_candidates_with_no_samples(load_script, capsys):
    """With --samples 0 no auto placement is drawn (README), yet the summary said "auto's included"."""
    place = load_script("place")
    graph = str(Path(__file__).parents[2] / "datasets" / "examples" / "mlp2x8w2048b512.gnpg")
    assert place.main([graph, "-c", "k80x2", "--samples", "0"]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("placements simulated; auto's not among them)")


# ------------------------------------------------------------------------------ long numbers in a message
def test_a_number_of_hundreds_of_digits_is_shown_by_its_head_and_length(capsys, graph):
    """``-O m_etf.min_speed=10**400`` is refused on one readable line, not one of 400 digits."""
    code = main(["place", graph, "-c", "k80x2", "-p", "m_etf", "-O", f"m_etf.min_speed={10**400}"])
    err = one_error(capsys, code)
    assert err == "gnplace: error: m_etf: min_speed must be a number in [0, 1], got 100000000000...(401 digits)\n"


def test_one_line_keeps_numbers_of_forty_digits_whole():
    from gnplace.cli.common import LONG_DIGITS, one_line

    forty = "9" * LONG_DIGITS
    assert one_line(f"got {forty}\n  and 12.5") == f"got {forty} and 12.5"
    assert one_line(f"got -{forty}1.5") == "got -999999999999...(41 digits).5"


@pytest.mark.parametrize("argv", [["simulate", ""], ["inspect", " "], ["place", ""], ["import", "", "-o", "g.gnpg"],
                                  ["finetune", "", "-c", "k80x2"],
                                  ["finetune", "datasets/examples/mlp1x8w6144b256.gnpg", "-c", "k80x2", "--costs", ""]])
def test_an_empty_input_path_is_refused_as_such(capsys, argv):
    """``gnplace simulate ""`` said ".: is a folder, not a graph file", of a folder the user never named."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert "expected a file's path, got" in capsys.readouterr().err
