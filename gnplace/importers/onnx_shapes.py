"""Static shapes of an ONNX model being imported (:func:`gnplace.importers.onnx.from_onnx`).

:func:`infer_shapes` runs ONNX shape inference with data propagation and says in one line why it
fails; :func:`fold_shape_arithmetic` replaces the shape computations inference leaves open (``Div``,
``Transpose`` of sizes, floats computed from sizes) by constants, bounding each value before it is built;
:func:`check_declared_shapes` refuses a shape the file declares that its op contradicts. Shapes are in
elements per dimension.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto

from gnplace.exceptions import InvalidGraph, UnsupportedGraph, first_line
from gnplace.importers.onnx_model import (
    SPARSE_EXTERNAL,
    evaluate_node,
    external_file_is_regular,
    holds_external_value,
    schemaless_outputs,
    shape_text,
    type_dims,
)

__all__ = ["check_declared_shapes", "fold_shape_arithmetic", "infer_shapes", "unshaped"]


def infer_shapes(
    proto: onnx.ModelProto, source: str, *, strict: bool = False, shown: onnx.ModelProto | None = None
) -> onnx.ModelProto:
    """ONNX shape inference with data propagation (shape computations on static shapes).

    Not ``strict``, a node inference cannot type (a ``MatMul`` of a scalar) keeps the shape the file
    declares for its output; ``strict``, it is refused, with its input shapes as ``shown`` (a model
    inferred before; default: ``proto``) holds them. Strict data propagation cannot read a small
    tensor whose value lies in external data: there the nodes are checked without it, and the shapes
    come from inference that is not strict.

    Raises:
        UnsupportedGraph: if inference fails (not ``strict``), with its first line.
        InvalidGraph: if a node's inputs do not fit its op (``strict``), with inference's words.
    """
    try:
        return onnx.shape_inference.infer_shapes(proto, strict_mode=strict, data_prop=True)
    except onnx.shape_inference.InferenceError as err:
        if not strict:
            raise UnsupportedGraph(f"{source}: ONNX shape inference failed: {first_line(err)}") from err
        if _EXTERNAL_VALUE not in str(err):
            raise InvalidGraph(f"{source}: {_inference_errors(err, shown or proto)}") from err
        try:
            onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=False)
        except onnx.shape_inference.InferenceError as without_values:
            if _EXTERNAL_VALUE in str(without_values):  # the op reads the value itself (a Reshape's shape)
                raise InvalidGraph(_unread_external(without_values, source, proto)) from without_values
            raise InvalidGraph(f"{source}: {_inference_errors(without_values, shown or proto)}") from without_values
        return infer_shapes(proto, source)
    except Exception as err:  # noqa: BLE001 - onnx raises several types here
        raise UnsupportedGraph(f"{source}: ONNX shape inference failed: {first_line(err)}") from err


#: Strict data propagation's complaint about a tensor whose value lies in external data (onnx 1.17-1.23).
_EXTERNAL_VALUE = "Cannot parse data from external tensors"


def _unread_external(err: Exception, source: str, proto: onnx.ModelProto | None = None) -> str:
    """The refusal of a model whose small tensor shape inference needs lies in external data that was not read.

    A sparse initializer's (its stand-in in ``proto`` marked :data:`SPARSE_EXTERNAL`) is refused as such: gnplace
    reads no sparse tensor's external data, whatever file holds it.
    """
    found = re.search(r"for tensor: ([^\s]+)", str(err))
    tensor = f"tensor {found.group(1)!r}" if found else "a tensor"
    if found is not None and proto is not None and any(
            init.name == found.group(1) and any(entry.key == SPARSE_EXTERNAL for entry in init.external_data)
            for init in proto.graph.initializer):
        return (f"{source}: sparse initializer {found.group(1)!r} keeps its values or indices in external data, "
                "which gnplace does not read for sparse tensors, and shape inference needs its value (save the model "
                "without external data for it, or store it as a dense initializer)")
    return (f"{source}: the value of {tensor}, which shape inference needs, lies in external data that cannot be "
            "read (its file is missing, truncated or outside the model's folder, or the model was loaded without "
            "it: keep the data file beside the ONNX file, as saved, and give the ONNX file's path)")


def _inference_errors(err: Exception, proto: onnx.ModelProto) -> str:
    """Strict shape inference's first complaint, with the node's input shapes as the file gives them.

    ``node 'mm' (MatMul) cannot take inputs of shapes [] and [16, 4]: Input tensors of wrong rank (0).``
    """
    text = re.sub(r"^\[ShapeInferenceError\] Inference error\(s\):\s*", "", first_line(err))
    found = re.match(r"\(op_type:(\w+)(?:, node name: ([^)]*))?\):\s*(?:\[\w+\]\s*)?(.*)", text)
    if found is None:
        return f"a node's inputs do not fit its op: {text}"
    op_type, name, complaint = found.groups()
    node = next((n for n in proto.graph.node if (n.name or n.op_type) == (name or op_type) and n.op_type == op_type),
                None)
    if node is None:
        return f"node {name or op_type!r} ({op_type}) cannot take its inputs: {complaint}"
    dims: dict[str, Any] = {init.name: list(init.dims) for init in proto.graph.initializer} | value_dims(proto)
    shapes = " and ".join("?" if dims.get(x) is None else shape_text(dims[x] or []) for x in node.input if x)
    return f"node {name or op_type!r} ({op_type}) cannot take its inputs (of shapes {shapes}): {complaint}"


def check_declared_shapes(proto: onnx.ModelProto, inferred: onnx.ModelProto, source: str) -> None:
    """Refuse a file whose declared shape of a value contradicts the shape its op computes.

    ONNX shape inference, when not strict, keeps a declared ``value_info`` or graph output shape
    that conflicts with the op (one left over from model surgery), and the FLOP would be counted
    at it. The shapes of ``inferred`` are compared with those inferred again with the declared
    shapes of node outputs dropped (but for ops ONNX has no schema for, whose declared shapes are
    the only ones); only values static in both are compared, so a declared shape that is merely
    less specific (symbolic dims) passes. That second inference is strict: a node whose inputs its op
    cannot take (a ``Gemm`` of a vector), which the first left at the shape the file declares, is refused.

    Raises:
        InvalidGraph: naming the first such value in graph order, its node and both shapes; or a node
            whose inputs do not fit its op.
    """
    g = proto.graph
    produced = {out for node in g.node for out in node.output if out}
    keep = schemaless_outputs(g)
    recheck = produced - keep
    bare = onnx.ModelProto()
    bare.CopyFrom(proto)
    kept = [v for v in bare.graph.value_info if v.name not in recheck]
    del bare.graph.value_info[:]
    bare.graph.value_info.extend(kept)
    for out in bare.graph.output:
        if out.name in recheck and out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    # strict: a node whose inputs do not fit its op is refused
    computed = value_dims(infer_shapes(bare, source, strict=True, shown=inferred))
    if not any(type_dims(v.type) is not None for v in [*g.value_info, *g.output] if v.name in recheck):
        return  # nothing declared that inference computes: nothing to contradict it
    used = value_dims(inferred)
    for node in g.node:
        for out in node.output:
            declared, own = used.get(out), computed.get(out)
            if out not in recheck or not _static(declared) or not _static(own) or declared == own:
                continue
            raise InvalidGraph(
                f"{source}: value {out!r} is declared with shape {shape_text(declared or [])}, but node "
                f"{node.name or node.op_type!r} ({node.op_type}) computes {shape_text(own or [])} (stale value_info or "
                "output shape, left by an edit after export? re-export the model or drop the declared shapes)"
            )


def _static(dims: Sequence[int | str | None] | None) -> bool:
    """Whether ``dims`` is a known shape with every size a number."""
    return dims is not None and all(isinstance(d, int) for d in dims)


#: Ops folded to constants when all their inputs are known small tensors: the arithmetic of shape computations.
_SHAPE_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Mod", "Neg", "Abs", "Floor", "Ceil", "Min", "Max", "Gather", "Concat",
    "Unsqueeze", "Squeeze", "Slice", "Cast", "Reshape", "Equal", "Less", "Greater", "Not", "Where", "Range",
    "ConstantOfShape", "Identity", "ReduceProd", "ReduceSum", "Expand", "Tile", "Transpose",
})
#: Ops whose result the ONNX importer computes when their inputs are constants (``_Builder.constant_value``: a
#: ``Dropout``'s ``training_mode`` as ``Not`` of a constant, its ratio as a ``Cast`` of one):
#: shape arithmetic and logic.
CONSTANT_OPS = _SHAPE_OPS | {"And", "Or", "Xor", "LessOrEqual", "GreaterOrEqual", "CastLike"}
#: Element types of shape arithmetic (whole numbers and flags): only these are folded.
_INDEX_TYPES = frozenset({TensorProto.INT64, TensorProto.INT32, TensorProto.INT16, TensorProto.INT8, TensorProto.UINT64,
                          TensorProto.UINT32, TensorProto.UINT16, TensorProto.UINT8, TensorProto.BOOL})
#: Most elements of a folded value: shape computations are small.
_FOLD_LIMIT = 4096


def value_dims(inferred: onnx.ModelProto) -> dict[str, list[int | str | None] | None]:
    """The dims of every value whose type the (shape-inferred) model declares, by name."""
    g = inferred.graph
    return {v.name: type_dims(v.type) for v in [*g.value_info, *g.output, *g.input]}


def unshaped(inferred: onnx.ModelProto) -> bool:
    """Whether some node output has no static shape after inference."""
    dims = value_dims(inferred)
    return any(out and (dims.get(out) is None or any(not isinstance(d, int) for d in dims[out] or ()))
               for node in inferred.graph.node for out in node.output)


def fold_shape_arithmetic(proto: onnx.ModelProto, inferred: onnx.ModelProto, folder: str | None) -> bool:
    """Replace, in ``proto``, the shape computations on static shapes by constants; whether any was.

    ``Shape`` and ``Size`` of a value whose shape is inferred become its sizes, and then each
    :data:`_SHAPE_OPS` node whose inputs are all known small tensors (constants, small initializers,
    values folded before it) becomes a ``Constant`` of its value, computed by ONNX's reference
    evaluator. Shape inference's data propagation covers part of this; it stops at ``Div``, so the
    split sizes of ``torch.chunk`` exports (``Shape -> Gather -> Add -> Div -> Mul -> Slice``) were
    left unknown, and at ``Transpose``, so the pads of every ``F.pad`` (``nn.ZeroPad2d``) that
    ``torch.onnx.export(dynamo=False)`` writes (``ConstantOfShape -> Concat -> Reshape -> Slice -> Transpose ->
    Reshape -> Cast -> Pad``) were too, and the model was refused. Results are whole numbers, or floats computed
    from a ``Shape`` or ``Size`` (the scales of opset 9's ``Upsample``, ``target / float(Shape(x)[2:])``); a float
    from no size may be a weight, and is left as it is.

    A small initializer kept in a file beside the model (external data) is read from ``folder``, the
    model file's folder, never from the working directory; a loaded model's (``folder`` :obj:`None`)
    is not known.
    """
    from onnx import helper, numpy_helper

    shapes = value_dims(inferred)
    opsets = {o.domain or "": int(o.version) for o in proto.opset_import if o.domain in ("", "ai.onnx")}
    known: dict[str, Any] = {}
    for init in proto.graph.initializer:  # whole numbers only: a small float initializer may be a weight
        if init.data_type in _INDEX_TYPES and math.prod(init.dims) <= _FOLD_LIMIT:
            external = init.data_location == TensorProto.EXTERNAL
            if external and (folder is None or not external_file_is_regular(init, folder)):
                continue
            try:
                known[init.name] = numpy_helper.to_array(init, base_dir=folder or "")
            except Exception:  # noqa: BLE001 - an initializer numpy cannot read is simply not known
                continue
    sized: set[str] = set()  # values computed from a Shape or Size: a float among them is a size, no weight
    folded = 0
    for index, node in enumerate(proto.graph.node):
        if node.domain not in ("", "ai.onnx") or len(node.output) != 1 or not node.output[0]:
            continue
        if holds_external_value(node):
            continue
        out = str(node.output[0])
        value = None
        try:
            if node.op_type == "Constant":
                known[out] = evaluate_node(node, {}, opsets)
                continue
            if node.op_type in ("Shape", "Size") and node.input:
                dims = shapes.get(node.input[0])
                if dims is None or any(not isinstance(d, int) for d in dims):
                    continue
                sizes = [int(d) for d in dims if isinstance(d, int)]
                if node.op_type == "Size":
                    value = np.asarray(math.prod(sizes), dtype=np.int64)
                else:
                    attrs = {str(a.name): int(helper.get_attribute_value(a)) for a in node.attribute}
                    value = np.asarray(sizes, dtype=np.int64)[attrs.get("start", 0):attrs.get("end", len(sizes))]
            elif node.op_type in _SHAPE_OPS and node.input and all(x == "" or x in known for x in node.input):
                if result_size(node, known) > _FOLD_LIMIT:
                    continue  # a Range or ConstantOfShape of 10**8 elements is no shape: never built
                value = evaluate_node(node, {x: known[x] for x in node.input if x}, opsets)
            else:
                continue
        except Exception:  # noqa: BLE001 - a node the evaluator cannot compute stays as it is
            continue
        from_sizes = node.op_type in ("Shape", "Size") or any(x in sized for x in node.input)
        if value is None or value.size > _FOLD_LIMIT or (value.dtype.kind not in "iub" and not from_sizes):
            continue  # shape arithmetic is in whole numbers, or floats of sizes (Upsample's scales at opset 9)
        if from_sizes:
            sized.add(out)
        known[out] = value
        constant = helper.make_node("Constant", [], [out], name=node.name, value=numpy_helper.from_array(value, out))
        proto.graph.node[index].CopyFrom(constant)
        folded += 1
    return folded > 0


#: Ops (of :data:`CONSTANT_OPS`) whose output has the broadcast shape of their inputs.
_BROADCASTING = frozenset({"Add", "Sub", "Mul", "Div", "Mod", "Min", "Max", "Equal", "Less", "Greater", "Where", "And",
                           "Or", "Xor", "LessOrEqual", "GreaterOrEqual"})


def result_size(node: onnx.NodeProto, known: Mapping[str, Any]) -> float:
    """An upper bound on the elements of a :data:`CONSTANT_OPS` node's output on the ``known`` inputs.

    Read from the inputs' shapes and, for ``Range``, ``ConstantOfShape``, ``Expand`` and ``Tile``,
    their values, before anything is computed; ``inf`` where it cannot be bounded.
    """
    try:
        given = {i: np.asarray(known[x]) for i, x in enumerate(node.input) if x}  # an absent optional input: none
        shapes = [v.shape for v in given.values()]
        op = node.op_type
        if op == "Range":
            start, limit, delta = (float(given[i].reshape(-1)[0]) for i in range(3))
            return max(0.0, math.ceil((limit - start) / delta)) if delta != 0 else math.inf
        if op == "ConstantOfShape":
            return float(math.prod(max(0, int(d)) for d in given[0].reshape(-1)))
        if op == "Expand":
            target = tuple(int(d) for d in given[1].reshape(-1))
            return float(math.prod(np.broadcast_shapes(given[0].shape, target)))
        if op == "Tile":
            repeats = [int(r) for r in given[1].reshape(-1)]
            return float(math.prod(d * max(0, r) for d, r in zip(given[0].shape, repeats, strict=True)))
        if op == "Gather":
            axis = next((int(a.i) for a in node.attribute if a.name == "axis"), 0)
            data, indices = shapes[0], shapes[1]
            return float(math.prod(data) // max(1, data[axis]) * math.prod(indices))
        if op == "Concat":
            return float(sum(math.prod(shape) for shape in shapes))
        if op in _BROADCASTING:
            return float(math.prod(np.broadcast_shapes(*shapes)))
        return float(max((math.prod(shape) for shape in shapes), default=0))  # the same elements or fewer
    except Exception:  # noqa: BLE001 - shapes or values that cannot be read: not folded
        return math.inf
