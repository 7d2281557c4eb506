"""Tests of the ``gnplace inspect`` command."""

from __future__ import annotations

import json

import pytest

from gnplace.cli import main
from gnplace.graph_io import save_graph
from gnplace.toy import chain_graph, mlp_training_graph


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


def test_inspect_json_counts_phases_and_costs(tmp_path, capsys, documented_keys):
    w, b = 1024, 256  # large enough for the GPU to beat the CPU
    g = mlp_training_graph(layers=3, width=w, batch=b)
    path = save_graph(g, tmp_path / "g.gnpg")
    assert main(["inspect", str(path), "--cluster", "cpu_gpu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    documented_keys("inspect-json", report)
    assert report["ops"] == g.num_ops and report["groups"] == g.num_groups
    assert report["ops_by_phase"] == {"forward": 8, "backward": 9, "update": 3}
    assert report["flops_by_phase"]["backward"] == pytest.approx(3 * (2 * 2 * b * w * w + b * w))
    assert report["single_device"] == "gpu0"
    assert 0 < report["critical_path_s"] <= report["single_device_step_s"]
    # the bytes the edges carry apart from the outputs' (the larger: an output feeds several ops), and the largest
    # colocation group's ops (of groups of 2 to 6)
    assert (report["edge_bytes"], report["activation_bytes"]) == (int(g.edge_bytes.sum()), int(g.out_bytes.sum()))
    assert report["edge_bytes"] != report["activation_bytes"] and report["largest_group_ops"] == 6
    assert main(["inspect", str(path), "--cluster", "cpu_gpu", "--json", "--top", "2"]) == 0
    top = json.loads(capsys.readouterr().out)["top_op_types"]
    assert len(top) == 2 and (top[0]["type"], top[0]["count"]) == ("matmul", 9)
    assert top[0]["flops"] == pytest.approx(sum(f for t, f in zip(g.op_types, g.flops.tolist()) if t == "matmul"))


def test_inspect_table(tmp_path, capsys):
    path = save_graph(mlp_training_graph(layers=2, width=32, batch=4), tmp_path / "g.gnpg")
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "by phase" in out and "matmul" in out and "single device" in out
    # each FLOP count in the unit that shows it: the 2 updates of 2 x 32 x 32 FLOP printed as "0.000 GFLOP"
    assert "update 2 ops / 4.096 kFLOP" in out and "0.000" not in out


def test_inspect_shows_names_as_they_are(tmp_path, capsys):
    """A cluster 'a[/]b' was a rich MarkupError traceback, as in simulate."""
    path = save_graph(mlp_training_graph(layers=2, width=32, batch=4).replace(name="[red]g"), tmp_path / "g.gnpg")
    cluster = tmp_path / "odd.yaml"
    cluster.write_text("name: 'a[/]b'\ndevices: [{name: 'gpu[/]', count: 2, kind: k80}]\nlinks: {default: pcie3}\n")
    assert main(["inspect", str(path), "-c", str(cluster)]) == 0
    out = capsys.readouterr().out
    assert "on a[/]b:" in out and "[red]g" in out


def test_inspect_a_module_factory(capsys):
    assert main(["inspect", "gnplace.execute.examples:tiny", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ops"] > 0 and report["ops_by_phase"]["update"] > 0


def _dynamic_batch_onnx(path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
        [numpy_helper.from_array(np.ones((4, 2), dtype=np.float32), "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def test_inspect_and_simulate_read_an_onnx_file_of_a_dynamic_batch_with_input_shape(tmp_path, capsys):
    model = _dynamic_batch_onnx(tmp_path / "dyn.onnx")
    assert main(["inspect", model, "--json"]) == 2
    assert "--input-shape x=N,4" in capsys.readouterr().err  # which both commands now take
    assert main(["inspect", model, "--input-shape", "x=8,4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {t["type"]: t["flops"] for t in report["top_op_types"]}["MatMul"] == 2 * 8 * 4 * 2  # at batch 8
    assert main(["simulate", model, "--input-shape", "x=8,4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_ops"] == report["ops"]


def test_inspect_bad_graph_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.gnpg"
    bad.write_bytes(b"\x1f\x8b\x08\x00broken")
    assert main(["inspect", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error:") and err.count("\n") == 1 and "Traceback" not in err


def test_a_name_the_terminal_cannot_encode_prints_escaped(tmp_path):
    import os
    import subprocess
    import sys

    from gnplace.graph_io import save_graph
    from gnplace.toy import chain_graph

    graph = chain_graph(3)
    path = save_graph(type(graph)(graph.node_names, list(zip(graph.edge_src, graph.edge_dst)), flops=graph.flops,
                                  name="модель", op_types=graph.op_types), tmp_path / "g.gnpg")
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = subprocess.run([sys.executable, "-m", "gnplace.cli", "inspect", str(path)], capture_output=True, env=env,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("\\u043c")  # the name, escaped


def test_a_graph_of_no_ops_is_summarised_not_a_traceback(tmp_path, capsys):
    """The text report passed the single device, None for no ops, to rich's escape: a TypeError."""
    from gnplace.graph import OpGraph

    save_graph(OpGraph([], [], name="empty"), tmp_path / "empty.gnpg")
    assert main(["inspect", str(tmp_path / "empty.gnpg")]) == 0
    out = capsys.readouterr().out
    assert "no ops, so no step to time" in out
    assert out.endswith("op types: none (no ops)\n") and "count" not in out  # not a table of headers alone


def test_top_0_lists_no_op_type_and_prints_no_empty_table(tmp_path, capsys):
    path = save_graph(mlp_training_graph(layers=2, width=32, batch=4), tmp_path / "g.gnpg")
    assert main(["inspect", str(path), "--top", "0"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("op types: none listed\n") and "FLOP \u2503" not in out and "matmul" not in out


def test_a_module_factory_is_counted_with_the_optimizer_asked_for(capsys):
    """inspect and simulate took no --optimizer: a MODULE:FACTORY was counted with SGD's state."""
    reports = {}
    for optimizer in ("sgd", "adam"):
        assert main(["inspect", "gnplace.execute.examples:mlp", "--optimizer", optimizer, "--json"]) == 0
        reports[optimizer] = json.loads(capsys.readouterr().out)
    assert reports["adam"]["param_bytes"] == 3 * reports["sgd"]["param_bytes"]
    steps = {}
    for optimizer in ("sgd", "adam"):
        assert main(["simulate", "gnplace.execute.examples:mlp", "-c", "k80x2", "--optimizer", optimizer, "--json"]) == 0
        steps[optimizer] = json.loads(capsys.readouterr().out)["step_time_s"]
    assert steps["adam"] > steps["sgd"]


def test_a_count_of_one_is_printed_in_the_singular(tmp_path, capsys):
    """A graph of one op printed "1 ops, 0 edges, 1 groups (largest 1 ops)" and "forward 1 ops"."""
    path = save_graph(chain_graph(1), tmp_path / "one.gnpg")
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "chain1: 1 op, 0 edges, 1 group (largest 1 op)" in out
    assert "by phase: forward 1 op / 1.000 GFLOP, backward 0 ops / 0 FLOP, update 0 ops / 0 FLOP" in out
