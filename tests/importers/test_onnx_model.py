"""Reading and checking ONNX files before import: bad files, input sizes, control flow, external and sparse data."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gnplace.exceptions import GnplaceError, InvalidArgument, InvalidGraph, UnknownName, UnsupportedGraph
from gnplace.graph import FORWARD, UPDATE
from gnplace.importers.onnx import from_onnx
from tests.importers.onnx_models import F, chain_model, conv_model, gemm_model, model, vi, weight


def test_dynamic_input_without_shape_names_the_input():
    with pytest.raises(UnsupportedGraph, match=r"input 'x' has a dynamic shape \[batch, 16\].*--input-shape x=N,16"):
        from_onnx(chain_model(dynamic=True))
    with pytest.raises(UnsupportedGraph, match=r"input 'x' has shape \[0, 16\], with no elements"):
        from_onnx(chain_model(batch=0))


def test_input_shapes_resolve_dynamic_dimensions():
    fixed = from_onnx(chain_model(8, 16, layers=2))
    resolved = from_onnx(chain_model(layers=2, dynamic=True), input_shapes={"x": [8, 16]})
    assert np.array_equal(resolved.flops, fixed.flops) and np.array_equal(resolved.out_bytes, fixed.out_bytes)
    assert resolved.meta["input_shapes"] == {"x": [8, 16]}


def test_input_shapes_reach_shapes_computed_from_the_input():
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Reshape", ["h", "s"], ["y"], name="reshape")]
    onnx_model = model(nodes, [vi("x", ["b", 8])], [vi("y", ["b", 8])], [weight("w", 8, 8)])
    g = from_onnx(onnx_model, input_shapes={"x": [32, 8]})
    assert g.flops[g.index("mm")] == 2 * 32 * 8 * 8


def _masked_model():
    """x [batch, 16] @ w, times mask [batch] (unsqueezed): two inputs of one named dimension."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Unsqueeze", ["mask", "axis"], ["m"], name="unsqueeze"),
             helper.make_node("Mul", ["h", "m"], ["y"], name="mul")]
    inits = [weight("w", 16, 4), numpy_helper.from_array(np.array([1], np.int64), "axis")]
    return model(nodes, [vi("x", ["batch", 16]), vi("mask", ["batch"])], [vi("y", ["batch", 4])], inits)


def test_a_named_dimension_given_for_one_input_binds_it_in_every_input():
    """x=8,16 left mask [batch] dynamic ('give its sizes with --input-shape mask=N'); x=8,16 and mask=4 bound neither."""
    both = from_onnx(_masked_model(), input_shapes={"x": [8, 16], "mask": [8]})
    one = from_onnx(_masked_model(), input_shapes={"x": [8, 16]})
    assert one.node_names == both.node_names and np.array_equal(one.flops, both.flops)
    assert np.array_equal(one.out_bytes, both.out_bytes) and one.meta["input_shapes"] == {"x": [8, 16], "mask": [8]}
    assert one.out_bytes[one.index("input/mask")] == 8 * 4
    with pytest.raises(InvalidArgument, match=r"gives dimension 'batch' two sizes, 8 \(input 'x'\) and 4 "
                       r"\(input 'mask'\)"):
        from_onnx(_masked_model(), input_shapes={"x": [8, 16], "mask": [4]})


def _fast_gelu_model(batch, declare_gelu=True):
    """MatMul -> com.microsoft FastGelu -> MatMul, as an ORT-optimised export writes it, with its value_info."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="up"),
             helper.make_node("FastGelu", ["h"], ["a"], name="gelu", domain="com.microsoft"),
             helper.make_node("MatMul", ["a", "w2"], ["y"], name="down")]
    value_info = [vi("h", [batch, 32])] + ([vi("a", [batch, 32])] if declare_gelu else [])
    onnx_model = model(nodes, [vi("x", [batch, 16])], [vi("y", [batch, 4])], [weight("w", 16, 32), weight("w2", 32, 4)],
                       value_info=value_info)
    onnx_model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return onnx_model


def test_input_shapes_keep_the_declared_shapes_of_ops_onnx_has_no_schema_for():
    """--input-shape dropped all value_info, which ONNX cannot rebuild for com.microsoft ops: no dynamic batch ran."""
    fixed = from_onnx(_fast_gelu_model(8))
    resolved = from_onnx(_fast_gelu_model("N"), input_shapes={"x": [8, 16]})
    assert np.array_equal(resolved.flops, fixed.flops) and np.array_equal(resolved.out_bytes, fixed.out_bytes)
    assert resolved.flops[resolved.index("gelu")] == 4 * 8 * 32
    # without a declared shape nothing can size the op; the advice is not the --input-shape already given
    with pytest.raises(UnsupportedGraph, match="ONNX has no shape inference for op 'FastGelu'") as info:
        from_onnx(_fast_gelu_model("N", declare_gelu=False), input_shapes={"x": [8, 16]})
    assert "--input-shape" not in str(info.value) and "re-export the model with static shapes" in str(info.value)


@pytest.mark.parametrize(
    "shapes, error, match",
    [
        ({"y": [8, 16]}, UnknownName, r"input_shapes \(--input-shape\) names 'y', which is not an input .*inputs: x"),
        ({"x": [8, 16, 1]}, InvalidArgument, r"has 2 dimensions \[batch, 16\], input_shapes \(--input-shape\) gives 3"),
        ({"x": [8, 15]}, InvalidArgument, r"fixed size 16 at dimension 1"),
        ({"x": [0, 16]}, InvalidArgument, "below 1"),
        # each was cut, taken as 1, or a TypeError, ValueError or AttributeError from inside
        ({"x": [8.5, 16]}, InvalidArgument, r"input_shapes\['x'\] must hold whole numbers, got 8\.5 in \[8\.5, 16\]$"),
        ({"x": [True, 16]}, InvalidArgument, r"input_shapes\['x'\] must hold whole numbers, got True"),
        ({"x": [float("nan"), 16]}, InvalidArgument, r"must hold whole numbers, got nan"),
        ({"x": ["8", 16]}, InvalidArgument, r"must hold whole numbers, got '8'"),
        ({"x": "8,16"}, InvalidArgument, r"input_shapes\['x'\] must be a list of sizes, got '8,16'$"),
        ({"x": None}, InvalidArgument, r"input_shapes\['x'\] must be a list of sizes, got None$"),
        ([8, 16], InvalidArgument, r"input_shapes must be a mapping of input name to sizes \(\{'x': \[8, 16\]\}\), got "
                                   r"\[8, 16\]$"),
    ],
)
def test_bad_input_shapes(shapes, error, match):
    with pytest.raises(error, match=match):
        from_onnx(chain_model(dynamic=True), input_shapes=shapes)


def test_input_shapes_take_whole_numbers_of_any_kind():
    wanted = from_onnx(chain_model(dynamic=True), input_shapes={"x": [8, 16]})
    for sizes in ([8.0, 16], [np.int64(8), np.int32(16)], np.array([8, 16]), (8, 16)):
        assert from_onnx(chain_model(dynamic=True), input_shapes={"x": sizes}) == wanted


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: from_onnx(None), r"^an ONNX model is given by its file's path \(str or os\.PathLike\) or as an "
                                  r"onnx\.ModelProto, got NoneType None$"),
        (lambda: from_onnx(3), r"got int 3$"),
        # a str was its characters: trainable="wb" trained initializers 'w' and 'b'
        (lambda: from_onnx(gemm_model(), trainable="w"), r"^from_onnx: trainable must be a list of initializer names or "
                                                         r"None, got 'w'$"),
        (lambda: from_onnx(gemm_model(), frozen=3), r"^from_onnx: frozen must be a list of initializer names"),
        (lambda: from_onnx(gemm_model(), meta=[1]), r"^from_onnx: meta must be a mapping or None, got \[1\]$"),
        (lambda: from_onnx(gemm_model(), allow_unknown_ops="no"), r"^from_onnx: allow_unknown_ops must be true or "
                                                                  r"false, got 'no'$"),
    ],
)
def test_arguments_of_the_wrong_kind_are_refused_in_one_line(call, match):
    """Each was a TypeError from inside (pathlib's, iter's, dict's), or taken as something else."""
    with pytest.raises(InvalidArgument, match=match):
        call()
    assert from_onnx(gemm_model(), trainable=["w"], frozen=(), meta={"a": 1}, allow_unknown_ops=np.False_).num_ops


def test_bad_files_raise_one_line_errors(tmp_path):
    good = conv_model().SerializeToString()
    cases = {
        "truncated.onnx": good[: len(good) // 2],
        "text.onnx": b"this is not an ONNX model\n",
        "gzip.onnx": b"\x1f\x8b\x08\x00" + bytes(64),
        "empty.onnx": b"",
    }
    for name, payload in cases.items():
        (tmp_path / name).write_bytes(payload)
        with pytest.raises(InvalidGraph) as info:
            from_onnx(tmp_path / name)
        assert name in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(InvalidGraph, match="no such ONNX file"):
        from_onnx(tmp_path / "missing.onnx")
    (tmp_path / "folder.onnx").mkdir()
    with pytest.raises(InvalidGraph, match="is a folder, not an ONNX file$"):
        from_onnx(tmp_path / "folder.onnx")


@pytest.mark.parametrize("field", ["ir_version", "opset"])
def test_a_model_newer_than_the_onnx_package_is_refused(field):
    """Opset 99 or IR version 99 imported without a word, its ops read by older schemas."""
    proto = gemm_model()
    if field == "ir_version":
        proto.ir_version = onnx.IR_VERSION + 1
        expected = rf"IR version {onnx.IR_VERSION + 1} is newer than onnx .* reads \(up to {onnx.IR_VERSION}\)"
    else:
        proto.opset_import[0].version = onnx.defs.onnx_opset_version() + 1
        expected = rf"opset {onnx.defs.onnx_opset_version() + 1} is newer than onnx .*opset_version="
    with pytest.raises(UnsupportedGraph, match=expected):
        from_onnx(proto)
    proto.ir_version, proto.opset_import[0].version = onnx.IR_VERSION, onnx.defs.onnx_opset_version()
    assert from_onnx(proto).num_ops  # the newest both know still imports


def test_every_truncation_of_a_file_is_rejected_cleanly(tmp_path):
    good = chain_model(layers=2).SerializeToString()
    path = tmp_path / "cut.onnx"
    for cut in range(0, len(good), max(1, len(good) // 97)):
        path.write_bytes(good[:cut])
        try:
            g = from_onnx(path)
        except GnplaceError as err:
            assert "\n" not in str(err)
        else:  # a cut on a field boundary can leave a smaller, still consistent model
            g.validate()


def test_a_node_reading_a_missing_value_is_malformed():
    broken = model([helper.make_node("Relu", ["nowhere"], ["y"], name="relu")], [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(InvalidGraph, match="reads 'nowhere'"):
        from_onnx(broken)


def test_an_initializer_of_a_negative_size_is_malformed():
    """Its weight was silently taken for no weight (math.prod of its dims below 2): no backward pass."""
    bad = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[16, -4])
    broken = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [2, 16])], [vi("y", [2, 4])],
                   [bad])
    with pytest.raises(InvalidGraph, match=r"initializer 'w' has the shape \[16, -4\], with a negative dimension"):
        from_onnx(broken)


def test_local_functions_are_inlined():
    # a model whose MatMul + Relu sit inside a local function, as torch.onnx.export writes modules
    body = [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Relu", ["m"], ["out"])]
    function = helper.make_function("local", "LinearRelu", ["a", "b"], ["out"], body,
                                    opset_imports=[helper.make_opsetid("", 17)])
    call = helper.make_node("LinearRelu", ["x", "w"], ["y"], name="block", domain="local")
    graph = helper.make_graph([call], "test", [vi("x", [8, 16])], [vi("y", [8, 16])], [weight("w", 16, 16)])
    proto = helper.make_model(graph, functions=[function],
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    g = from_onnx(proto)
    assert {"MatMul", "Relu"} <= set(g.op_types)
    assert int((g.phase == UPDATE).sum()) == 1


def test_a_value_assigned_twice_is_malformed():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="first"), helper.make_node("Neg", ["x"], ["y"], name="again")]
    with pytest.raises(InvalidGraph, match="value 'y' is assigned twice \\(again by node 'again'\\)"):
        from_onnx(model(nodes, [vi("x", [2])], [vi("y", [2])]))


def test_optional_outputs_left_empty_by_two_nodes_are_no_value_assigned_twice():
    """ONNX names an optional output left out ``""``: two Dropouts each leaving their mask out assign no value
    twice (refused as "value '' is assigned twice" had every name been counted)."""
    chained = chain_model(width=2)
    nodes = [*chained.graph.node, helper.make_node("Dropout", ["r0"], ["h", ""], name="drop1"),
             helper.make_node("Dropout", ["h"], ["y", ""], name="drop2")]
    g = from_onnx(model(nodes, [vi("x", [8, 2])], [vi("y", [8, 2])], chained.graph.initializer))
    assert g.num_ops == from_onnx(chained).num_ops  # (a Dropout that drops nothing is its input, as a view)
    assert int((g.phase == UPDATE).sum()) == 2  # the weight's and the bias's


def test_control_flow_is_refused_not_dropped():
    """An If's branches are subgraphs: importing without them gave an empty graph and exit 0."""
    branch = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["t"])], "then", [], [vi("t", [8, 4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", [8, 4])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], name="choose", then_branch=branch, else_branch=other)]
    zero = numpy_helper.from_array(np.zeros((), np.float32), "zero")
    with pytest.raises(UnsupportedGraph, match="node 'choose' is control flow \\(If\\)"):
        from_onnx(model(nodes, [vi("x", [8, 4])], [vi("y", [8, 4])], [weight("w", 4, 4), zero]))


def _branching_model(rows: int):
    """y = If(x's first size == 8) then x @ w else -x, plus -x: the then branch makes a value named as an outer one."""
    const = numpy_helper.from_array
    then = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm")], "then", [], [vi("m", None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="neg_in_else")], "else", [], [vi("e", None)])
    nodes = [helper.make_node("Neg", ["x"], ["m"], name="neg"),
             helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["rows"]),
             helper.make_node("Equal", ["rows", "eight"], ["c"]),
             helper.make_node("If", ["c"], ["y"], name="choose", then_branch=then, else_branch=other),
             helper.make_node("Add", ["y", "m"], ["out"], name="add")]
    inits = [weight("w", 4, 4), const(np.array(0, np.int64), "zero"), const(np.array(8, np.int64), "eight")]
    return model(nodes, [vi("x", [rows, 4])], [vi("out", [rows, 4])], inits, opset=17)


def test_an_if_on_a_condition_that_folds_to_a_constant_is_its_taken_branch():
    """The condition Equal(Gather(Shape(x), 0), 8) folds; the model was refused as control flow."""
    g = from_onnx(_branching_model(8))
    assert g.flops[g.index("mm")] == 2 * 8 * 4 * 4 and "neg_in_else" not in g.node_names
    assert g.flops[g.index("grad/mm/w")] == 2 * 8 * 4 * 4
    # the taken branch's m (renamed) and the outer m both reach the Add
    add = g.index("add")
    assert {g.node_names[u] for u in g.edge_src[g.edge_dst == add]} == {"mm", "neg"}
    with pytest.warns(UserWarning, match="no initializer is trained"):
        other = from_onnx(_branching_model(6))  # the else branch, -x, reads no weight
    assert "neg_in_else" in other.node_names and "mm" not in other.node_names


def test_a_local_response_norm_exported_at_opset_11_imports():
    """torch.onnx.export(dynamo=False) writes LRN's squeeze(1) as an If on the size of a dim: it was refused."""
    torch = pytest.importorskip("torch")
    from gnplace.importers.torch import from_module

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.LocalResponseNorm(5))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.randn(2, 3, 32, 32),), buffer, opset_version=11, dynamo=False)
    proto = onnx.load_from_string(buffer.getvalue())
    assert "If" in [node.op_type for node in proto.graph.node]
    g = from_onnx(proto)
    assert "If" not in g.op_types
    traced = from_module(net, (torch.randn(2, 3, 32, 32),), loss=lambda out: out.sum())
    onnx_fwd, torch_fwd = (float(x.flops[x.phase == FORWARD].sum()) for x in (g, traced))
    assert onnx_fwd == pytest.approx(torch_fwd, rel=0.02)


def _untyped(name: str, value: int) -> object:
    attribute = helper.make_attribute(name, value)
    attribute.ClearField("type")  # a corrupt file: the value is there, its type is not
    return attribute


@pytest.mark.parametrize("attribute", [
    helper.make_attribute("transB", "yes"), helper.make_attribute("transB", [1, 1]), _untyped("transB", 1),
])
def test_an_attribute_of_the_wrong_type_is_malformed(attribute):
    # shape inference lets it pass; the FLOP rules read the attribute as the schema's type
    node = helper.make_node("Gemm", ["x", "w"], ["y"], name="fc")
    node.attribute.append(attribute)
    bad = model([node], [vi("x", [4, 8])], [vi("y", [4, 8])], [weight("w", 8, 8)])
    with pytest.raises(InvalidGraph, match="node 'fc' .*attribute 'transB'.* INT"):
        from_onnx(bad)


def _external_shape_model(folder, location="shape.bin"):
    """A Reshape whose target shape ``[8, 16]`` is an int64 initializer kept in ``location`` beside the model."""
    shape = TensorProto(name="s", data_type=TensorProto.INT64, dims=[2], data_location=TensorProto.EXTERNAL)
    shape.external_data.add(key="location", value=location)
    zero = numpy_helper.from_array(np.zeros(2, np.int64), "z")
    nodes = [helper.make_node("Add", ["s", "z"], ["s2"], name="target"), helper.make_node("Reshape", ["x", "s2"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["y"], name="mm")]
    proto = model(nodes, [vi("x", [8, 16])], [vi("y", None)], [shape, zero, weight("w", 16, 4)])
    folder.mkdir()
    onnx.save(proto, folder / "m.onnx")
    np.array([8, 16], np.int64).tofile(folder / location)
    return folder / "m.onnx"


def test_small_external_tensors_are_read_beside_the_model_not_in_the_working_folder(tmp_path, monkeypatch):
    """The shape folding read an external initializer relative to the working folder: run elsewhere the Reshape's
    shape was unknown (refused), or another file of that name gave it other sizes."""
    path = _external_shape_model(tmp_path / "model")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    g = from_onnx(path)
    assert g.flops[g.index("mm")] == 2 * 8 * 16 * 4
    np.array([4, 32], np.int64).tofile(elsewhere / "shape.bin")  # a file of that name where the command runs
    assert from_onnx(path) == g
    monkeypatch.chdir(tmp_path)
    assert from_onnx("model/m.onnx").flops.tolist() == g.flops.tolist()  # a relative path: beside it still


def test_a_loaded_model_never_reads_external_data_from_the_working_folder(tmp_path, monkeypatch):
    """A model loaded without its external data has no folder to read it from: its value stays unknown."""
    proto = onnx.load(_external_shape_model(tmp_path / "model"), load_external_data=False)
    monkeypatch.chdir(tmp_path)
    np.array([4, 32], np.int64).tofile(tmp_path / "shape.bin")
    with pytest.raises(UnsupportedGraph, match="static shape for output 'r'"):
        from_onnx(proto)


@pytest.mark.parametrize("data_type", [0, 999])
def test_an_initializer_of_an_element_type_onnx_does_not_define_is_refused(data_type):
    """Type 0 or 999 made the weight no weight: a graph of no backward and no update ops, silently."""
    w = weight("w", 16, 4)
    w.data_type = data_type
    proto = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [8, 16])], [vi("y", [8, 4])], [w])
    with pytest.raises(InvalidGraph, match=f"initializer 'w' has element type {data_type}, which ONNX does not define"):
        from_onnx(proto)


@pytest.mark.parametrize("given", [False, True])
@pytest.mark.parametrize("kind", ["sequence", "untyped"])
def test_an_input_that_is_no_tensor_is_refused_as_such_with_or_without_input_shapes(kind, given):
    """``--input-shape`` on a sequence or untyped input made it a tensor, so the refusal named a shape it lacked."""
    x = (helper.make_tensor_sequence_value_info("x", F, [8, 16]) if kind == "sequence"
         else onnx.ValueInfoProto(name="x"))
    proto = model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [vi("y", [8, 16])])
    with pytest.raises(UnsupportedGraph, match="input 'x' is not a tensor; only tensor inputs are supported"):
        from_onnx(proto, input_shapes={"x": [8, 16]} if given else None)


@pytest.mark.parametrize("op", ["Constant", "ConstantOfShape"])
def test_a_nodes_external_value_is_never_read_from_the_working_folder(tmp_path, monkeypatch, op):
    """ONNX's reference evaluator read a Constant's external value from the folder gnplace ran in, not the model's:
    a shared model naming .ssh/id_rsa had its bytes read as shape values."""
    import onnx.external_data_helper as external

    value = TensorProto(name="v", data_type=TensorProto.INT64, dims=[2], data_location=TensorProto.EXTERNAL)
    value.external_data.add(key="location", value="secret.bin")
    (tmp_path / "model").mkdir()
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "secret.bin").write_bytes(np.array([2, 8], dtype=np.int64).tobytes())
    if op == "Constant":
        nodes = [helper.make_node("Constant", [], ["s"], value=value)]
    else:
        nodes = [helper.make_node("Constant", [], ["n"], value=numpy_helper.from_array(np.array([2]), "n")),
                 helper.make_node("ConstantOfShape", ["n"], ["s"], value=value)]
    nodes += [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Reshape", ["h", "s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.5] * 16)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "model" / "m.onnx")
    opened = []
    real = external._open_external_data_fd
    monkeypatch.setattr(external, "_open_external_data_fd",
                        lambda base, location, *rest: opened.append((base, location)) or real(base, location, *rest))
    monkeypatch.chdir(tmp_path / "cwd")
    try:  # imported or refused (its shape unknown: the value is in no file beside the model), never read
        from_onnx(tmp_path / "model" / "m.onnx")
    except GnplaceError:
        pass
    assert opened == []


@pytest.mark.parametrize("elem, bits", [(TensorProto.INT2, 2), (TensorProto.UINT2, 2), (TensorProto.FLOAT6E2M3, 6),
                                        (TensorProto.FLOAT6E3M2, 6), (TensorProto.INT4, 4)])
def test_packed_sub_byte_tensors_count_their_bits(elem, bits):
    """ONNX stores 2-bit and 6-bit elements packed, as 4-bit ones: a quantised weight of INT2 or FLOAT6 (16 or 48
    bytes for 64 elements) was refused as a truncated file ('needs 64'), and an input of them counted a byte each."""
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    q = helper.make_tensor("q", elem, [16, 4], np.zeros((16, 4), dtype), raw=True)
    assert len(q.raw_data) == 64 * bits // 8
    nodes = [helper.make_node("DequantizeLinear", ["q", "s"], ["w"]), helper.make_node("MatMul", ["x", "w"], ["y"]),
             helper.make_node("Cast", ["z"], ["zf"], to=F), helper.make_node("Add", ["y", "zf"], ["out"])]
    graph = model(nodes, [vi("x", [8, 16]), vi("z", [8, 4], elem)], [vi("out", [8, 4])],
                  [q, numpy_helper.from_array(np.ones((), np.float32), "s")], opset=25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no weight is trained: the forward pass alone
        g = from_onnx(graph)
    assert int(g.out_bytes[g.index("input/z")]) == 32 * bits // 8


def test_a_shape_saved_as_external_data_beside_the_model_is_read(tmp_path):
    """onnx.save_model(..., save_as_external_data=True, size_threshold=0) keeps a Reshape's target shape in the data
    file, where shape inference cannot read it: the model was refused as though the Reshape could not take its
    inputs. Its data file missing, the tensor is named."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="rs"), helper.make_node("MatMul", ["r", "w"], ["y"],
                                                                                         name="mm")]
    shape = numpy_helper.from_array(np.array([4, 32], np.int64), "s")
    proto = model(nodes, [vi("x", [8, 16])], [vi("y", None)], [shape, weight("w", 32, 4)])
    inline = from_onnx(proto)
    onnx.save_model(proto, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    g = from_onnx(tmp_path / "m.onnx")
    assert g.flops[g.index("mm")] == 2 * 4 * 32 * 4
    assert g.flops.tolist() == inline.flops.tolist() and g.out_bytes.tolist() == inline.out_bytes.tolist()
    (tmp_path / "m.data").unlink()
    with pytest.raises(InvalidGraph, match="value of tensor 's', which shape inference needs, lies in external data"):
        from_onnx(tmp_path / "m.onnx")


def _sparse_model(shape_values, shape_indices, dense_shape, weight_as_sparse=False):
    """x [8, 8] -> Reshape to a shape held in a sparse initializer ([4, 16]) -> MatMul by w [16, 4]."""
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array(shape_values, np.int64), "shape"),
                                       numpy_helper.from_array(np.array(shape_indices, np.int64), "shape_idx"),
                                       dense_shape)
    w = weight("w", 16, 4)
    sparse_inits = [sparse]
    if weight_as_sparse:  # every element of w, as a sparse tensor of [NNZ, rank] coordinates
        coords = np.argwhere(np.ones((16, 4), bool)).astype(np.int64)
        sparse_inits.append(helper.make_sparse_tensor(w, numpy_helper.from_array(coords, "w_idx"), [16, 4]))
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="rs"),
             helper.make_node("MatMul", ["r", "w"], ["y"], name="mm")]
    graph = helper.make_graph(nodes, "test", [vi("x", [8, 8])], [vi("y", [4, 4])], [] if weight_as_sparse else [w],
                              sparse_initializer=sparse_inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("indices", [[0, 1], [[0], [1]]])  # linear indices, or [NNZ, rank] coordinates
def test_a_shape_held_in_a_sparse_initializer_is_read(indices):
    """A Reshape's shape in a sparse initializer was refused as 'expected num elements 2 ... actual num elements 0'."""
    g = from_onnx(_sparse_model([4, 16], indices, [2]))
    assert g.flops[g.index("mm")] == 2 * 4 * 16 * 4
    dense = from_onnx(_sparse_model([4, 16], indices, [2], weight_as_sparse=True))  # a sparse weight: its bytes
    assert dense.node_names == g.node_names and int(dense.param_bytes[dense.index("update/w")]) == 16 * 4 * 4


@pytest.mark.parametrize("indices", [[0, 2], [0], [[0, 0], [0, 1]], [-1, 0]])
def test_a_sparse_initializer_whose_indices_do_not_fit_is_malformed(indices):
    with pytest.raises(InvalidGraph, match=r"sparse initializer 'shape' of shape \[2\] holds 2 values at indices"):
        from_onnx(_sparse_model([4, 16], indices, [2]))


@pytest.mark.parametrize("part", ["values", "indices"])
def test_a_sparse_initializer_in_external_data_that_shape_inference_needs_is_refused_by_name(tmp_path, part):
    """Its stand-in held no values: refused as "node 'rs' (Reshape) cannot take its inputs (...): Data size mismatch
    ... expected num elements 2 does not match the actual num elements 0", the data file beside it or not. A sparse
    weight in external data (its values never read) still imports."""
    proto = _sparse_model([4, 16], [0, 1], [2])
    tensor = getattr(proto.graph.sparse_initializer[0], part)
    (tmp_path / "shape.bin").write_bytes(tensor.raw_data)
    length = len(tensor.raw_data)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="shape.bin")
    tensor.external_data.add(key="length", value=str(length))
    onnx.save_model(proto, tmp_path / "m.onnx")
    for source in (str(tmp_path / "m.onnx"), proto):
        with pytest.raises(InvalidGraph) as caught:
            from_onnx(source)
        said = str(caught.value)
        assert "\n" not in said and said.endswith(
            ": sparse initializer 'shape' keeps its values or indices in external data, which gnplace does not read "
            "for sparse tensors, and shape inference needs its value (save the model without external data for it, or "
            "store it as a dense initializer)")
    weights = _sparse_model([4, 16], [0, 1], [2], weight_as_sparse=True)
    values = weights.graph.sparse_initializer[1].values
    values.ClearField("raw_data")
    values.ClearField("float_data")
    values.data_location = TensorProto.EXTERNAL
    values.external_data.add(key="location", value="w.bin")
    assert int(from_onnx(weights).param_bytes[-1]) == 16 * 4 * 4


@pytest.mark.parametrize("indices", [[0, 1], [0, 2]])
def test_a_constants_sparse_value_holding_a_shape_is_read(indices):
    """A Constant(sparse_value=...) as a Reshape's shape was refused: 'could not find a static shape ... data-dependent'."""
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([4, 16], np.int64), "v"),
                                       numpy_helper.from_array(np.array(indices, np.int64), "i"), [2])
    nodes = [helper.make_node("Constant", [], ["shape"], name="shape_const", sparse_value=sparse),
             helper.make_node("Reshape", ["x", "shape"], ["r"], name="rs"),
             helper.make_node("MatMul", ["r", "w"], ["y"], name="mm")]
    onnx_model = model(nodes, [vi("x", [8, 8])], [vi("y", [4, 4])], [weight("w", 16, 4)])
    if indices == [0, 2]:
        with pytest.raises(InvalidGraph, match=r"node 'shape_const''s value 'v' of shape \[2\] holds 2 values at"):
            from_onnx(onnx_model)
        return
    g = from_onnx(onnx_model)
    assert g.flops[g.index("mm")] == 2 * 4 * 16 * 4 and g.node_names == from_onnx(_sparse_model([4, 16], [0, 1], [2])).node_names


def test_a_graph_of_no_node_whose_output_is_its_input_is_read_and_a_loop_of_the_ai_onnx_domain_is_refused():
    """A graph with an output and no node is a model (its output is an input); ``ai.onnx`` is the default domain."""
    from gnplace.importers.onnx_model import load_onnx, refuse_control_flow

    passthrough = model([], [vi("x", [2, 3])], [vi("x", [2, 3])])
    assert list(load_onnx(passthrough).graph.output)[0].name == "x"
    loop = helper.make_node("Loop", ["n", "c"], ["y"], name="loop", domain="ai.onnx")
    with pytest.raises(UnsupportedGraph, match=r"^m\.onnx: node 'loop' is control flow \(Loop\), whose subgraphs"):
        refuse_control_flow(model([loop], [vi("n", [])], [vi("y", [])]), "m.onnx")


def test_a_truncated_initializer_of_exactly_the_kept_size_is_malformed_and_its_values_are_kept():
    """4,096 elements (64 x 64) is the most whose values are kept, and checked: 16,384 bytes of float32 needed."""
    from gnplace.importers.onnx_model import without_weights

    kept = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    truncated = TensorProto()
    truncated.CopyFrom(kept)
    truncated.raw_data = truncated.raw_data[:-4]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    with pytest.raises(InvalidGraph, match=r"initializer 'w' holds 16380 bytes, its shape \[64, 64\] needs 16384"):
        from_onnx(model(nodes, [vi("x", [2, 64])], [vi("y", [2, 64])], [truncated]))
    dropped = numpy_helper.from_array(np.ones(4097, np.float32), "big")
    light = without_weights(model(nodes, [vi("x", [2, 64])], [vi("y", [2, 64])], [kept, dropped]), "m", copy=True)
    assert len(light.graph.initializer[0].raw_data) == 16384 and not light.graph.initializer[1].raw_data


def test_an_initializer_of_size_minus_one_is_malformed():
    bad = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[16, -1])
    broken = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [2, 16])], [vi("y", [2, 4])],
                   [bad])
    with pytest.raises(InvalidGraph, match=r"initializer 'w' has the shape \[16, -1\], with a negative dimension"):
        from_onnx(broken)


def test_a_graph_output_no_node_produces_is_malformed():
    broken = model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [2])], [vi("y", [2]), vi("z", [2])])
    with pytest.raises(InvalidGraph, match="graph output 'z' is produced by no node"):
        from_onnx(broken)


def test_a_declared_output_shape_of_the_old_sizes_is_dropped_with_input_shapes():
    """``y`` declared ``[8, 4]`` for the batch of 8 exported; given a batch of 2, the op computes ``[2, 4]``: the old
    declared shape is dropped, not taken for a stale one."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    g = from_onnx(model(nodes, [vi("x", ["N", 16])], [vi("y", [8, 4])], [weight("w", 16, 4)]),
                  input_shapes={"x": [2, 16]})
    assert float(g.flops[g.index("mm")]) == 2 * 2 * 16 * 4


def test_the_small_helpers_of_onnx_model():
    """Gemm's transA, an ``ai.onnx`` node's schema, a cycle, a Constant's external sparse value, values fewer than
    the dims, a dim of unknown size and an IR version 3 file's unlisted initializer."""
    from gnplace.importers.onnx_model import (
        check_inner_sizes,
        has_schema,
        held_values,
        holds_external_value,
        shape_text,
        topological_order,
        type_initializers,
    )

    check_inner_sizes("Gemm", {"transA": 1}, [(16, 8), (16, 4)], "fc", "m")  # A^T: [8, 16] @ [16, 4]
    with pytest.raises(InvalidGraph, match=r"node 'fc' \(Gemm\) multiplies shapes \[8, 16\] and \[16, 4\], whose "
                                           r"inner sizes differ \(8 against 16\)"):
        check_inner_sizes("Gemm", {"transA": 1}, [(8, 16), (16, 4)], "fc", "m")
    assert has_schema(helper.make_node("Relu", ["x"], ["y"], domain="ai.onnx"))
    cycle = [helper.make_node("Relu", ["b"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"], name="second")]
    with pytest.raises(InvalidGraph, match="the graph has a cycle through node 'first'"):
        topological_order(cycle, set(), "m")
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.ones(1, np.int64), "v"),
                                       numpy_helper.from_array(np.zeros(1, np.int64), "i"), [4])
    sparse.values.data_location = TensorProto.EXTERNAL
    assert holds_external_value(helper.make_node("Constant", [], ["c"], sparse_value=sparse))
    assert held_values(TensorProto(name="t", data_type=TensorProto.INT64, dims=[4], int64_data=[1, 2])) is None
    assert shape_text([None, 4, "N"]) == "[?, 4, N]"
    old = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [2, 16])], [vi("y", [2, 4])],
                [weight("w", 16, 4)])
    old.ir_version = 3
    type_initializers(old)
    assert old.ir_version == 4
