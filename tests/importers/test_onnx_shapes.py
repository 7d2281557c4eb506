"""Static shapes of imported ONNX models: shape inference, folding of shape arithmetic, declared shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from gnplace.exceptions import InvalidGraph, UnsupportedGraph
from gnplace.importers.onnx import from_onnx
from gnplace.importers.onnx_shapes import check_declared_shapes, fold_shape_arithmetic, infer_shapes
from tests.importers.onnx_models import F, model, vi, weight


def _conv_relu():
    return [helper.make_node("Conv", ["x", "w"], ["h"], name="conv"),
            helper.make_node("Relu", ["h"], ["y"], name="relu")]


@pytest.mark.parametrize("declared, inferred_as", [
    ("output", r"value 'y' is declared with shape \[1, 4, 100, 100\], but node 'relu' \(Relu\) computes \[1, 4, 6,"),
    ("value_info", r"value 'h' is declared with shape \[1, 4, 9, 9\], but node 'conv' \(Conv\) computes \[1, 4, 6, 6"),
], ids=["output", "value_info"])
def test_a_declared_shape_the_op_contradicts_is_malformed(declared, inferred_as):
    """Shape inference kept a stale declared shape over the one the op computes: a Conv counted 277x off."""
    nodes = _conv_relu()
    out = [1, 4, 100, 100] if declared == "output" else [1, 4, 6, 6]
    stale = [vi("h", [1, 4, 9, 9])] if declared == "value_info" else []
    with pytest.raises(InvalidGraph, match=inferred_as):
        from_onnx(model(nodes, [vi("x", [1, 3, 8, 8])], [vi("y", out)], [weight("w", 4, 3, 3, 3)], value_info=stale))


def test_declared_shapes_less_specific_than_inferred_ones_import():
    onnx_model = model(_conv_relu(), [vi("x", [1, 3, 8, 8])], [vi("y", ["n", 4, "H", "W"])], [weight("w", 4, 3, 3, 3)],
                       value_info=[vi("h", ["n", "c", 6, "w"])])
    g = from_onnx(onnx_model)
    assert g.flops[g.index("conv")] == 2 * 4 * 6 * 6 * 27 and g.out_bytes[g.index("relu")] == 4 * 6 * 6 * 4


@pytest.mark.parametrize("node, shape", [
    (helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"), (5, 4)),
    (helper.make_node("Gemm", ["x", "w"], ["y"], name="mm", transB=1), (4, 5)),
])
def test_a_product_of_mismatched_shapes_is_malformed(node, shape):
    """Shape inference (not strict) lets x[8, 16] @ w[5, 4] through; the importer names the node and the sizes.

    onnx 1.17's strict inference lets the Gemm through too: the importer's own check of inner sizes refuses it.
    """
    with pytest.raises(InvalidGraph, match=r"node 'mm' \((MatMul|Gemm)\) (cannot take its inputs \(of shapes|multiplies"
                                           r" shapes) \[8, 16\] and"):
        from_onnx(model([node], [vi("x", [8, 16])], [vi("y", [8, 4])], [weight("w", *shape)]))


def test_shape_arithmetic_past_data_propagation_is_folded():
    """torch.chunk exports its split size as Shape -> Gather -> Div -> Slice; ONNX's data propagation stops at Div."""
    const = numpy_helper.from_array
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
             helper.make_node("Shape", ["y"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["width"], axis=0),
             helper.make_node("Div", ["width", "two"], ["half"]),
             helper.make_node("Unsqueeze", ["half", "zero"], ["end"]),
             helper.make_node("Slice", ["y", "start", "end", "one_axis"], ["left"], name="slice"),
             helper.make_node("Unsqueeze", ["b", "zero"], ["b2"]),  # a small weight is no shape arithmetic
             helper.make_node("Add", ["left", "b2"], ["biased"], name="bias"),
             helper.make_node("Relu", ["biased"], ["out"], name="relu")]
    inits = [weight("w", 16, 8), weight("b", 4), const(np.array(1, np.int64), "one"), const(np.array(2, np.int64), "two"),
             const(np.array([0], np.int64), "zero"), const(np.array([0], np.int64), "start"),
             const(np.array([1], np.int64), "one_axis")]
    g = from_onnx(model(nodes, [vi("x", [8, 16])], [vi("out", [8, 4])], inits))
    assert {"MatMul", "Relu"} <= set(g.op_types)
    assert float(g.flops[g.index("mm")]) == 2 * 8 * 16 * 8
    assert int(g.out_bytes[g.index("relu")]) == 8 * 4 * 4
    assert {"update/w", "update/b"} <= set(g.node_names)


def test_pads_transposed_from_constants_are_folded():
    """torch.onnx.export(dynamo=False) writes F.pad's pads as ConstantOfShape -> Concat -> Reshape -> Slice ->
    Transpose -> Reshape -> Cast; data propagation stops at Transpose, and every such pad was refused."""
    const = numpy_helper.from_array
    nodes = [helper.make_node("Transpose", ["pairs"], ["by_axis"], perm=[1, 0]),
             helper.make_node("Reshape", ["by_axis", "flat"], ["pads"]),
             helper.make_node("Pad", ["x", "pads"], ["padded"], name="pad"),
             helper.make_node("Conv", ["padded", "w"], ["y"], name="conv")]
    inits = [const(np.array([[0, 0], [0, 0], [0, 1], [0, 1]], np.int64), "pairs"),  # (begin, end) by axis
             const(np.array([-1], np.int64), "flat"), weight("w", 4, 3, 3, 3)]
    g = from_onnx(model(nodes, [vi("x", [1, 3, 8, 8])], [vi("y", [1, 4, 7, 7])], inits))
    assert int(g.out_bytes[g.index("pad")]) == 3 * 9 * 9 * 4
    assert float(g.flops[g.index("conv")]) == 2 * 4 * 7 * 7 * 27


def test_shape_arithmetic_chained_through_many_layers_is_folded():
    """A layer's sizes may be known only once the layer before it is folded: torchvision's swin_t exported at opset 13
    (each shifted window's pads from the sizes the last one gave) takes 27 rounds and was refused after 8."""
    const = numpy_helper.from_array
    stages = 12
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y0"], name="mm")]
    for i in range(1, stages + 1):  # y_i = y_{i-1}[:, :width - 1], the width read through Div
        nodes += [helper.make_node("Shape", [f"y{i - 1}"], [f"s{i}"]),
                  helper.make_node("Gather", [f"s{i}", "one"], [f"width{i}"], axis=0),
                  helper.make_node("Div", [f"width{i}", "one"], [f"same{i}"]),
                  helper.make_node("Sub", [f"same{i}", "one"], [f"less{i}"]),
                  helper.make_node("Unsqueeze", [f"less{i}", "zero"], [f"end{i}"]),
                  helper.make_node("Slice", [f"y{i - 1}", "start", f"end{i}", "axis"], [f"y{i}"])]
    nodes.append(helper.make_node("Relu", [f"y{stages}"], ["out"], name="relu"))
    inits = [weight("w", 16, 32), const(np.array(1, np.int64), "one"), const(np.array([0], np.int64), "zero"),
             const(np.array([0], np.int64), "start"), const(np.array([1], np.int64), "axis")]
    g = from_onnx(model(nodes, [vi("x", [8, 16])], [vi("out", [8, 32 - stages])], inits))
    assert int(g.out_bytes[g.index("relu")]) == 8 * (32 - stages) * 4


def test_float_scales_computed_from_sizes_are_folded():
    """``F.interpolate(size=...)`` exported with opset 9 writes Upsample's scales as ``target / float(Shape(x)[2:])``
    (torchvision's lraspp_mobilenet_v3_large): a float result was never folded, and the model was refused."""
    const = numpy_helper.from_array
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv"),
             helper.make_node("Shape", ["y"], ["s"]),
             helper.make_node("Slice", ["s"], ["hw"], starts=[2], ends=[4], axes=[0]),
             helper.make_node("Cast", ["hw"], ["hw_float"], to=F),
             helper.make_node("Div", ["target", "hw_float"], ["spatial"]),
             helper.make_node("Concat", ["unit", "spatial"], ["scales"], axis=0),
             helper.make_node("Upsample", ["y", "scales"], ["up"], name="up", mode="linear"),
             helper.make_node("Relu", ["up"], ["out"], name="relu")]
    nodes[4:4] = [helper.make_node("Constant", [], ["target"], value=const(np.array([12.0, 12.0], np.float32))),
                  helper.make_node("Constant", [], ["unit"], value=const(np.array([1.0, 1.0], np.float32)))]
    g = from_onnx(model(nodes, [vi("x", [1, 3, 8, 8])], [vi("out", [1, 4, 12, 12])], [weight("w", 4, 3, 3, 3)], opset=9))
    assert int(g.out_bytes[g.index("up")]) == 4 * 12 * 12 * 4
    assert set(g.op_types) >= {"Conv", "Upsample", "Relu"}


@pytest.mark.parametrize("node, x, w, declared, complaint", [
    (helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"), [], [16, 4], [4], "shapes \\[\\] and \\[16, 4\\]"),
    (helper.make_node("Gemm", ["x", "w"], ["y"], name="mm"), [16], [16, 4], [4], "shapes \\[16\\] and \\[16, 4\\]"),
    # an absent optional input ('') is no shape of the node's: "[16] and [16, 4]", not "... and ?"
    (helper.make_node("Gemm", ["x", "w", ""], ["y"], name="mm"), [16], [16, 4], [4], "shapes \\[16\\] and \\[16, 4\\]\\)"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="mm"), [], [4, 4, 3, 3], [1, 4, 1, 1], "shapes \\[\\] and \\[4,"),
])
def test_a_node_whose_inputs_its_op_cannot_take_is_refused_not_trusted_at_its_declared_shape(
        node, x, w, declared, complaint):
    """Inference that is not strict leaves such a node at the output shape the file declares: the FLOP rules then
    raised IndexError (MatMul of a scalar, Gemm of a vector), or a Conv of a scalar was costed at ``[1, 4, 1, 1]``."""
    proto = model([node], [vi("x", x)], [vi("y", declared)], [weight("w", *w)])
    with pytest.raises(InvalidGraph, match=f"node 'mm' \\(\\w+\\) cannot take its inputs \\(of {complaint}"):
        from_onnx(proto)


@pytest.mark.parametrize("limit, built", [(10, True), (10**9, False)])
def test_shape_folding_never_builds_a_value_past_its_limit(monkeypatch, limit, built):
    """A ``Range`` to 10**9 was built (8 GB) before its size was checked; it is bounded from its inputs first."""
    import gnplace.importers.onnx_shapes as onnx_shapes

    evaluated: list[str] = []
    real = onnx_shapes.evaluate_node
    monkeypatch.setattr(onnx_shapes, "evaluate_node",
                        lambda node, feeds, opsets: evaluated.append(node.op_type) or real(node, feeds, opsets))
    ints = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("start", 0), ("limit", limit), ("one", 1))]
    nodes = [helper.make_node("Range", ["start", "limit", "one"], ["r"], name="range"),
             helper.make_node("Shape", ["r"], ["n"]), helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
             helper.make_node("NonZero", ["x"], ["nz"])]  # left unshaped by inference: folding runs
    proto = model(nodes, [vi("x", [8, 16])], [vi("y", [8, 4]), vi("nz", None, elem=TensorProto.INT64)],
                  [weight("w", 16, 4), *ints])
    with pytest.raises(UnsupportedGraph, match="'NonZero'"):
        from_onnx(proto)
    assert ("Range" in evaluated) == built


@pytest.mark.parametrize("op, inputs, attrs, bound", [
    ("Where", [np.zeros((64, 1, 1), bool), np.zeros((1, 64, 1)), np.zeros((1, 1, 64))], {}, 64**3),
    ("Expand", [np.zeros(3), np.array([10**6, 3])], {}, 3 * 10**6),
    ("Tile", [np.zeros((2, 3)), np.array([1000, 1000])], {}, 6 * 10**6),
    ("ConstantOfShape", [np.array([10**5, 10**5])], {}, 10**10),
    ("Gather", [np.zeros((64, 64)), np.zeros(100, np.int64)], {"axis": 1}, 6400),
    ("Range", [np.array(0), np.array(10), np.array(0)], {}, math.inf),  # a step of 0: unbounded
    ("Expand", [np.zeros(3), np.array([-1, 3])], {}, math.inf),  # a negative size: not folded
    ("Reshape", [np.zeros(4096), np.array([64, 64])], {}, 4096),
    ("Range", [np.array(0), np.array(10), np.array(3)], {}, 4),  # 0, 3, 6, 9
    ("Concat", [np.zeros(4096), np.zeros(4096)], {"axis": 0}, 8192),
    # a negative size or repeat builds nothing: a bound of 0, never a negative count
    ("ConstantOfShape", [np.array([-1, 10**5])], {}, 0),
    ("Tile", [np.zeros((2, 3)), np.array([-1, 1000])], {}, 0),
    # constant_value's logic ops broadcast too: bounded by their larger input (64), a Dropout's training_mode of 4,096
    *[(op, [np.zeros((64, 1), bool), np.zeros((1, 64), bool)], {}, 4096) for op in ("And", "Or", "Xor")],
    *[(op, [np.zeros((64, 1)), np.zeros((1, 64))], {}, 4096) for op in ("LessOrEqual", "GreaterOrEqual")],
])
def test_the_bound_of_a_folded_value_is_read_before_it_is_computed(op, inputs, attrs, bound):
    from gnplace.importers.onnx_shapes import result_size

    names = [f"in{i}" for i in range(len(inputs))]
    node = helper.make_node(op, names, ["out"], **attrs)
    assert result_size(node, dict(zip(names, inputs))) == bound


def test_a_failure_of_inference_that_is_not_strict_says_the_graph_is_unsupported(monkeypatch):
    """Not strict, inference's own failure is no proof the file is malformed: UnsupportedGraph, with its first line."""
    import onnx

    def fail(*args, **kwargs):
        raise onnx.shape_inference.InferenceError("[ShapeInferenceError] cannot infer\nsecond line")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", fail)
    with pytest.raises(UnsupportedGraph, match=r"^m\.onnx: ONNX shape inference failed: \[ShapeInferenceError\] cannot "
                                               r"infer$") as raised:
        infer_shapes(model(_conv_relu(), [vi("x", [1, 3, 8, 8])], [vi("y", None)], [weight("w", 4, 3, 3, 3)]), "m.onnx")
    assert not isinstance(raised.value, InvalidGraph)


def test_a_refused_node_is_named_with_the_shapes_of_its_own_inputs():
    """The second of two MatMuls is refused; its input ``r`` is computed (no value the file declares), and inference
    before the check knew its shape: ``[] and [16, 4]``, not the first MatMul's sizes nor ``?``."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="fine"),
             helper.make_node("Relu", ["s"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "v"], ["y"], name="bad")]
    proto = model(nodes, [vi("x", [8, 16]), vi("s", [])], [vi("h", [8, 4]), vi("y", [4])],
                  [weight("w", 16, 4), weight("v", 16, 4)])
    with pytest.raises(InvalidGraph, match=r"node 'bad' \(MatMul\) cannot take its inputs \(of shapes \[\] and \[16, 4\]\)"):
        from_onnx(proto)


def test_a_declared_shape_is_checked_against_a_custom_ops_declared_output():
    """An op ONNX has no schema for (``com.x:Foo``) has only its declared shape ``[8, 16]``: the Relu after it computes
    ``[8, 16]``, which contradicts the ``[8, 99]`` its output declares."""
    nodes = [helper.make_node("Foo", ["x"], ["h"], name="foo", domain="com.x"),
             helper.make_node("Relu", ["h"], ["y"], name="relu")]
    proto = model(nodes, [vi("x", [8, 16])], [vi("y", [8, 99])], value_info=[vi("h", [8, 16])])
    proto.opset_import.append(helper.make_opsetid("com.x", 1))
    with pytest.raises(InvalidGraph, match=r"value 'y' is declared with shape \[8, 99\], but node 'relu' \(Relu\) "
                                           r"computes \[8, 16\]"):
        check_declared_shapes(proto, infer_shapes(proto, "m"), "m")


def test_declared_shapes_that_differ_in_symbolic_dims_alone_pass():
    """``[n, 4, 6, 6]`` declared where inference computes ``[batch, 4, 6, 6]``: the names of unknown sizes are no
    contradiction (only shapes static in both are compared)."""
    proto = model(_conv_relu(), [vi("x", ["batch", 3, 8, 8])], [vi("y", ["n", 4, "H", "W"])], [weight("w", 4, 3, 3, 3)])
    check_declared_shapes(proto, infer_shapes(proto, "m"), "m")


def test_folding_computes_sizes_and_leaves_floats_of_no_size():
    """``Size`` of a ``[8, 4]`` value folds to 32 (elements, not 8 + 4); ``1.5 * 1.5`` from constants may be a weight and
    stays a ``Mul``; a model with nothing to fold says so (``False``)."""
    const = numpy_helper.from_array
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"), helper.make_node("Size", ["y"], ["n"], name="size"),
             helper.make_node("Constant", [], ["a"], value=const(np.array(1.5, np.float32))),
             helper.make_node("Mul", ["a", "a"], ["b"], name="mul")]
    proto = model(nodes, [vi("x", [8, 16])], [vi("y", [8, 4]), vi("n", []), vi("b", [])], [weight("w", 16, 4)])
    assert fold_shape_arithmetic(proto, infer_shapes(proto, "m"), None)
    assert [n.op_type for n in proto.graph.node] == ["MatMul", "Constant", "Constant", "Mul"]
    assert int(numpy_helper.to_array(proto.graph.node[1].attribute[0].t)) == 32
    plain = model(nodes[:1], [vi("x", [8, 16])], [vi("y", [8, 4])], [weight("w", 16, 4)])
    assert not fold_shape_arithmetic(plain, infer_shapes(plain, "m"), None)
