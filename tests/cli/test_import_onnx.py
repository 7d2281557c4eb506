"""``gnplace import MODEL.onnx -o GRAPH``: end to end, and every bad input as one line with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gnplace.cli import main
from gnplace.graph_io import load_graph


def write_mlp(path, *, batch="batch", width=16, extra_nodes=(), extra_opsets=()):
    """``relu(x @ w + b)`` with a dynamic (``"batch"``) or fixed batch, saved to ``path``."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(width).astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["y"], name="relu"), *extra_nodes]
    out = nodes[-1].output[0]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), *extra_opsets])
    path.write_bytes(model.SerializeToString())
    return path


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error:") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_import_writes_the_training_graph(tmp_path, capsys):
    model = write_mlp(tmp_path / "mlp.onnx", batch=8)
    assert main(["import", str(model), "-o", str(tmp_path / "mlp.gnpg")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {tmp_path / 'mlp.gnpg'}: 11 ops (5 forward, 4 backward, 2 update)")
    assert "; forward 4.480 kFLOP, backward 4.480 kFLOP, update 544 FLOP;" in out  # was "GFLOP forward 0.000, ..."
    g = load_graph(tmp_path / "mlp.gnpg")
    assert g.name == "mlp" and g.flops[g.index("mm")] == 2 * 8 * 16 * 16


def test_import_puts_a_count_of_one_in_the_singular(tmp_path, capsys):
    """A model of one Relu printed "1 edges, 1 groups"."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    relu = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    (tmp_path / "r.onnx").write_bytes(relu.SerializeToString())
    assert main(["import", str(tmp_path / "r.onnx"), "-o", str(tmp_path / "r.gnpg")]) == 0
    captured = capsys.readouterr()
    assert f"wrote {tmp_path / 'r.gnpg'}: 2 ops (2 forward, 0 backward, 0 update), 1 edge, 1 group; " in captured.out
    assert "no initializer is trained" in captured.err  # (the forward pass alone)


def test_import_with_input_shape_optimizer_and_json(tmp_path, capsys, documented_keys):
    model = write_mlp(tmp_path / "mlp.onnx")
    assert main(["import", str(model), "-o", str(tmp_path / "g.gnpg"), "--input-shape", "x=32,16",
                 "--optimizer", "adam", "--name", "net", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    documented_keys("import-json", report)
    assert report["graph"] == "net" and report["input_shapes"] == {"x": [32, 16]}
    assert report["ops_by_phase"] == {"forward": 5, "backward": 4, "update": 2}  # the add passes h its gradient: no op
    assert report["param_bytes"] == 3 * (16 * 16 + 16) * 4
    assert report["flops_by_phase"]["forward"] == 2 * 32 * 16 * 16 + 3 * 32 * 16
    assert load_graph(tmp_path / "g.gnpg").meta["optimizer"] == "adam"


@pytest.mark.parametrize("args", [["--frozen", "b"], ["--trainable", "w"]], ids=["frozen", "trainable"])
def test_an_initializer_left_untrained_gets_no_gradient_and_no_update(tmp_path, capsys, args):
    """A buffer or frozen weight, which an ONNX file does not tell from a weight, named on the command line."""
    model = write_mlp(tmp_path / "mlp.onnx", batch=8)
    assert main(["import", str(model), "-o", str(tmp_path / "g.gnpg"), "--json", *args]) == 0
    assert json.loads(capsys.readouterr().out)["ops_by_phase"]["update"] == 1
    g = load_graph(tmp_path / "g.gnpg")
    assert "update/w" in g.node_names and "update/b" not in g.node_names
    assert int(g.param_bytes.sum()) == 16 * 16 * 4


def test_unknown_op_types_are_one_warning_line(tmp_path, capsys):
    # a standard op (opset 27) with no FLOP rule
    unknown = helper.make_node("LinearAttention", ["y3", "y3", "y3"], ["n", "state"], name="linear_attention",
                               q_num_heads=1, kv_num_heads=1, update_rule="linear")
    unsq = helper.make_node("Unsqueeze", ["y", "axes"], ["y3"], name="unsq")
    model = write_mlp(tmp_path / "linear_attention.onnx", batch=4, extra_nodes=[unsq, unknown])
    proto = onnx.load(str(model))
    proto.graph.initializer.append(numpy_helper.from_array(np.array([2], np.int64), "axes"))
    proto.opset_import[0].version = 27
    model.write_bytes(proto.SerializeToString())
    assert main(["import", str(model), "-o", str(tmp_path / "g.gnpg")]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gnplace: warning:") and "LinearAttention" in err


@pytest.mark.parametrize(
    "case, args, message",
    [
        ("truncated", [], "not a readable ONNX model"),
        ("text", [], "not a readable ONNX model"),
        ("missing", [], "no such ONNX file"),
        ("dynamic", [], "input 'x' has a dynamic shape [batch, 16]; give its sizes with --input-shape x=N,16"),
        ("dynamic", ["--input-shape", "x8,16"], "bad input shape 'x8,16'"),
        ("dynamic", ["--input-shape", "x=8,sixteen"], "bad input shape 'x=8,sixteen'"),
        ("dynamic", ["--input-shape", "x=8,0"], "bad input shape 'x=8,0'"),
        ("dynamic", ["--input-shape", "y=8,16"], "input_shapes (--input-shape) names 'y', which is not an input of the model (inputs: x)"),
        ("dynamic", ["--input-shape", "x=8,16,1"], "has 2 dimensions [batch, 16], input_shapes (--input-shape) gives 3"),
        ("fixed", ["--frozen", "bias"], "frozen (--frozen) names 'bias', which is not an initializer of the model"),
        ("fixed", ["--trainable", "bias"], "trainable (--trainable) names 'bias', which is not an initializer of the model"),
        ("empty", [], "has no ops; there is nothing to place"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, case, args, message):
    good = write_mlp(tmp_path / "good.onnx").read_bytes()
    path = tmp_path / f"{case}.onnx"
    if case == "truncated":
        path.write_bytes(good[: len(good) * 2 // 3])
    elif case == "text":
        path.write_text("graph { node { op_type: 'Relu' } }\n")
    elif case == "dynamic":
        path.write_bytes(good)
    elif case == "fixed":
        write_mlp(path, batch=8)
    elif case == "empty":
        graph = helper.make_graph([], "empty", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])])
        path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    assert main(["import", str(path), "-o", str(tmp_path / "g.gnpg"), *args]) == 2
    assert message in one_line_error(capsys)
    assert not (tmp_path / "g.gnpg").exists()


def test_console_command_prints_no_traceback(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07\x12\x04nope" + bytes(range(256)))
    run = subprocess.run([sys.executable, "-m", "gnplace.cli", "import", str(bad), "-o", str(tmp_path / "g.gnpg")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.startswith("gnplace: error:") and run.stderr.count("\n") == 1


def test_a_custom_op_is_refused_unless_allowed(tmp_path, capsys):
    path = write_mlp(tmp_path / "custom.onnx", batch=4, extra_nodes=[
        helper.make_node("Mystery", ["y"], ["z"], name="mystery", domain="my.ops")],
        extra_opsets=[helper.make_opsetid("my.ops", 1)])
    model = onnx.load(str(path))
    del model.graph.output[:]  # a custom op's output shape is declared: shape inference cannot know it
    model.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 16]))
    path.write_bytes(model.SerializeToString())
    out = tmp_path / "g.gnpg"
    assert main(["import", str(path), "-o", str(out)]) == 2
    assert "my.ops.Mystery, an op of a custom domain" in one_line_error(capsys) and not out.exists()
    assert main(["import", str(path), "-o", str(out), "--allow-unknown-ops"]) == 0
    assert "mystery" in load_graph(out).node_names


@pytest.mark.parametrize("name", ["graph.onnx", "graph.ONNX"])
def test_an_output_named_onnx_is_refused(tmp_path, capsys, name):
    """`-o graph.onnx` wrote a gnplace graph that every command then read as an ONNX model, and refused."""
    model = write_mlp(tmp_path / "mlp.onnx", batch=8)
    assert main(["import", str(model), "-o", str(tmp_path / name)]) == 2
    assert "a gnplace graph file, not an ONNX model; name it .gnpg" in one_line_error(capsys)
    assert not (tmp_path / name).exists()


def test_an_initializer_both_trainable_and_frozen_is_refused(tmp_path, capsys):
    """Frozen won silently: ``--trainable w --frozen w`` wrote a graph with no backward pass and exit status 0."""
    model = write_mlp(tmp_path / "mlp.onnx", batch=8)
    out = tmp_path / "g.gnpg"
    assert main(["import", str(model), "-o", str(out), "--trainable", "w", "--frozen", "b", "--frozen", "w"]) == 2
    assert "--trainable and --frozen both name 'w': give each initializer one of them" in one_line_error(capsys)
    assert not out.exists()


@pytest.mark.parametrize("command", ["import", "place"])
def test_an_output_that_holds_the_models_external_data_is_refused(tmp_path, capsys, monkeypatch, command):
    """``-o weights.bin`` where the model keeps its weights overwrote them with the graph (or placement) file."""
    model = onnx.load_from_string(write_mlp(tmp_path / "mlp.onnx", batch=8).read_bytes())
    (tmp_path / "mlp.onnx").unlink()
    (tmp_path / "sub").mkdir()
    onnx.save(model, tmp_path / "mlp.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="sub/weights.bin", size_threshold=0)
    weights = (tmp_path / "sub" / "weights.bin").read_bytes()
    monkeypatch.chdir(tmp_path / "sub")
    args = ["-c", "k80x2", "-p", "single"] if command == "place" else []
    assert main([command, "../mlp.onnx", *args, "-o", "weights.bin"]) == 2
    assert "--output weights.bin: holds the external data (weights) of the input mlp.onnx" in one_line_error(capsys)
    assert (tmp_path / "sub" / "weights.bin").read_bytes() == weights
    assert main([command, "../mlp.onnx", *args, "-o", "other.bin" if command == "place" else "g.gnpg"]) == 0


@pytest.mark.parametrize("name", ["", " "])
def test_an_empty_graph_name_is_refused(tmp_path, capsys, name):
    """``--name ""`` (an unset variable) was dropped for the model's name, and ``--name " "`` named the graph " "."""
    model = write_mlp(tmp_path / "mlp.onnx", batch=8)
    out = tmp_path / "g.gnpg"
    assert main(["import", str(model), "-o", str(out), "--name", name]) == 2
    assert f"--name {name!r} names nothing; give the graph a name, or leave --name out for the model's" in \
        one_line_error(capsys)
    assert not out.exists()


@pytest.mark.parametrize(("name", "said"), [("m.txt", "unsupported file type '.txt'"), ("m", "no file type"),
                                            ("m.gz", "unsupported file type '.gz'"),
                                            ("m.yaml.gz", "unsupported file type '.yaml.gz'")])
def test_an_output_of_no_graph_file_type_is_refused(tmp_path, capsys, name, said):
    """`-o m.txt` wrote gzip, which its name does not say; only the names the file's format has are taken. A name
    with no suffix was said to be of file type '(none)'."""
    model = write_mlp(tmp_path / "mlp.onnx", batch=8)
    assert main(["import", str(model), "-o", str(tmp_path / name)]) == 2
    assert f"--output {tmp_path / name}: {said}; name it .gnpg" in one_line_error(capsys)
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize(("name", "gzipped"), [("m.gnpg", True), ("m.json.gz", True), ("m.JSON", False)])
def test_an_output_is_written_as_its_name_says(tmp_path, capsys, name, gzipped):
    model = write_mlp(tmp_path / "mlp.onnx", batch=8)
    assert main(["import", str(model), "-o", str(tmp_path / name)]) == 0
    assert ((tmp_path / name).read_bytes()[:2] == b"\x1f\x8b") == gzipped
    assert load_graph(tmp_path / name).num_ops > 0
