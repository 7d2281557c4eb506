"""Reading and checking an ONNX model before its import (:func:`gnplace.importers.onnx.from_onnx`).

:func:`load_onnx` reads a file (or takes a loaded model) and refuses one that is not a whole, readable
model: truncated or of another format, newer than the onnx package knows, naming values nothing produces,
with attributes of the wrong type or text where numbers belong, or holding loops. The steps that prepare
it for shape inference follow: :func:`without_weights` drops the weight values (only shapes and dtypes
are read, and the small values shape computations need), :func:`read_small_external` reads those small
values from external data beside the model file (never from the working folder), :func:`sort_nodes`
orders the nodes, :func:`fix_input_shapes` binds the sizes of dynamic inputs, :func:`check_static_inputs`
refuses an input whose sizes are still unknown, and :func:`inline_constant_branches` replaces an ``If``
on a constant condition by the branch it takes. Sizes are in elements; :func:`itemsize` gives bytes per
element.
"""

from __future__ import annotations

import math
import os
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.defs
import onnx.inliner
from onnx import TensorProto, numpy_helper

from gnplace.exceptions import InvalidArgument, InvalidGraph, UnknownName, UnsupportedGraph
from gnplace.limits import is_number, is_whole

__all__ = ["external_data_files", "load_onnx"]


#: The element types ONNX defines (``TensorProto.DataType`` but ``UNDEFINED``).
_DEFINED_TYPES = frozenset(v for v in TensorProto.DataType.values() if v != TensorProto.UNDEFINED)


#: Bits per element of the sub-byte ONNX types, which files store packed (``raw_data`` of ``ceil(n * bits / 8)``
#: bytes): numpy's dtypes for them (ml_dtypes') take a byte per element.
_PACKED_BITS = {getattr(TensorProto, name): bits for name, bits in (
    ("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2), ("FLOAT6E2M3", 6), ("FLOAT6E3M2", 6),
) if hasattr(TensorProto, name)}


def itemsize(elem_type: int) -> float:
    """Bytes per element of an ONNX tensor type (sub-byte types count a fraction: 4-bit 0.5, 2-bit 0.25, 6-bit 0.75)."""
    if elem_type in _PACKED_BITS:
        return _PACKED_BITS[elem_type] / 8
    try:
        return float(onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize)
    except (KeyError, TypeError, ValueError):
        return 4.0


def load_onnx(model: str | os.PathLike[str] | onnx.ModelProto) -> onnx.ModelProto:
    """Read an ONNX model without its weight values, checking that it is a whole, readable model.

    Raises:
        InvalidGraph: if the file is missing, truncated, not ONNX, or names values nothing produces.
        InvalidArgument: if ``model`` is neither a path (``str`` or ``os.PathLike``) nor an ``onnx.ModelProto``.
    """
    if isinstance(model, onnx.ModelProto):
        proto, source = model, "ONNX model"
    elif not isinstance(model, str | os.PathLike):  # None was pathlib's TypeError
        raise InvalidArgument(f"an ONNX model is given by its file's path (str or os.PathLike) or as an "
                              f"onnx.ModelProto, got {type(model).__name__} {reprlib.repr(model)}")
    else:
        path = Path(model)
        source = str(path)
        from gnplace.limits import read_file

        raw = read_file(path, InvalidGraph, "ONNX file")
        proto = onnx.ModelProto()
        try:
            proto.ParseFromString(raw)
        except Exception as err:  # noqa: BLE001 - protobuf raises DecodeError and, on some inputs, others
            raise InvalidGraph(f"{path}: not a readable ONNX model (corrupt, truncated or another format)") from err
    if not proto.HasField("graph") or (not proto.graph.node and not proto.graph.output):
        raise InvalidGraph(f"{source}: not an ONNX model (it holds no graph)")
    if proto.ir_version <= 0 or not proto.opset_import:
        raise InvalidGraph(f"{source}: not a readable ONNX model (no IR version or opset; corrupt or truncated?)")
    _check_versions(proto, source)
    _check_text(proto, source)
    if proto.functions:
        try:
            proto = onnx.inliner.inline_local_functions(proto)
        except Exception as err:  # noqa: BLE001
            raise UnsupportedGraph(f"{source}: cannot inline the model's local functions ({err})") from err
    _check_complete(proto, source)
    _check_attribute_types(proto, source)
    refuse_control_flow(proto, source, _LOOPS)
    return proto


def external_data_files(path: str | os.PathLike[str]) -> set[Path]:
    """The files beside the ONNX file ``path`` that hold its tensors' external data (resolved paths).

    Read from the file's tensors (initializers, sparse initializers, ``Constant`` values); a file that is
    not a readable model has none. Used to refuse an output that would overwrite a model's weights.
    """
    from gnplace.limits import read_file

    try:
        proto = onnx.ModelProto.FromString(read_file(path, InvalidGraph, "ONNX file"))
    except Exception:  # noqa: BLE001 - not a readable model (or past the size limit): the importer says why
        return set()
    tensors = [*proto.graph.initializer, *(t for sp in proto.graph.sparse_initializer for t in (sp.values, sp.indices))]
    tensors += [a.t for node in proto.graph.node for a in node.attribute if a.HasField("t")]
    folder = Path(path).resolve().parent
    return {
        (folder / entry.value).resolve()
        for tensor in tensors if tensor.data_location == TensorProto.EXTERNAL
        for entry in tensor.external_data if entry.key == "location" and entry.value
    }


def _check_versions(proto: onnx.ModelProto, source: str) -> None:
    """Refuse a model stamped with an IR version or a default-domain opset newer than the onnx package knows.

    Its ops' meaning (inputs, attributes, shapes) is then unknown to shape inference and the FLOP rules,
    which read them by the newest schema they have; ONNX Runtime refuses such a model too.

    Raises:
        UnsupportedGraph: naming the version, the newest known and the installed onnx.
    """
    if proto.ir_version > onnx.IR_VERSION:
        raise UnsupportedGraph(f"{source}: IR version {proto.ir_version} is newer than onnx {onnx.__version__} reads "
                               f"(up to {onnx.IR_VERSION}); upgrade onnx, or export the model again with it")
    newest = onnx.defs.onnx_opset_version()
    opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset > newest:
        raise UnsupportedGraph(f"{source}: opset {opset} is newer than onnx {onnx.__version__} knows (up to {newest}); "
                               f"upgrade onnx, or export the model again with opset_version={newest} or below")


def _check_attribute_types(proto: onnx.ModelProto, source: str) -> None:
    """Refuse an attribute without a type, or of another type than its op's schema gives it.

    Shape inference lets both pass; the FLOP rules read the attribute as the schema's type
    (``Gemm``'s ``transB`` as an integer), which raised a bare ``TypeError`` or ``ValueError``.

    Raises:
        InvalidGraph: naming the node, the attribute and both types.
    """
    names = onnx.AttributeProto.AttributeType.Name
    opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0)
    for node in proto.graph.node:
        schema = None
        if node.domain in ("", "ai.onnx") and onnx.defs.has(node.op_type):
            try:
                schema = onnx.defs.get_schema(node.op_type, opset)
            except onnx.defs.SchemaError:  # an op newer than the model's opset: shape inference says so
                schema = None
        for attribute in node.attribute:
            want = schema.attributes.get(attribute.name) if schema is not None else None
            expected = int(getattr(want.type, "value", 0)) if want is not None else None
            if attribute.type != onnx.AttributeProto.UNDEFINED and expected in (None, attribute.type):
                continue
            label = node.name or node.op_type
            untyped = attribute.type == onnx.AttributeProto.UNDEFINED
            got = "with no type" if untyped else f"of type {names(attribute.type)}"
            want_text = f", where ONNX's {node.op_type} takes type {names(expected)}" if expected is not None else ""
            raise InvalidGraph(f"{source}: node {label!r} ({node.op_type}) has attribute {attribute.name!r} {got}"
                               f"{want_text} (corrupt or hand-edited file?)")


#: ONNX ops whose work lies in subgraphs run a data-dependent number of times (or on a chosen branch).
_CONTROL_FLOW = ("If", "Loop", "Scan", "SequenceMap")
#: Of those, the loops: refused as the model is read. An ``If`` whose condition folds to a constant is replaced by
#: the branch it takes (:func:`inline_constant_branches`); one whose condition does not is refused after folding.
_LOOPS = ("Loop", "Scan", "SequenceMap")


def refuse_control_flow(proto: onnx.ModelProto, source: str, kinds: Sequence[str] = _CONTROL_FLOW) -> None:
    """Refuse a graph with control flow of ``kinds``: the work of its subgraphs is neither timed nor differentiated.

    Raises:
        UnsupportedGraph: naming the first such node.
    """
    for node in proto.graph.node:
        if node.op_type in kinds and node.domain in ("", "ai.onnx"):
            label = node.name or node.op_type
            unknown = " on a condition that is not a constant" if node.op_type == "If" else ""
            raise UnsupportedGraph(
                f"{source}: node {label!r} is control flow ({node.op_type}){unknown}, whose subgraphs gnplace cannot "
                "import: export the model with its branches and loops traced out (torch.onnx.export records "
                "the path the example input takes)"
            )


def _constant_condition(name: str, proto: onnx.ModelProto) -> bool | None:
    """The value of an ``If``'s condition where a ``Constant`` node or a held initializer gives it, else ``None``."""
    from onnx import numpy_helper

    opsets = {o.domain or "": int(o.version) for o in proto.opset_import if o.domain in ("", "ai.onnx")}
    value: Any = None
    try:
        for node in proto.graph.node:
            if list(node.output) == [name] and node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                value = evaluate_node(node, {}, opsets)
        for init in proto.graph.initializer:
            if init.name == name and held_values(init) is not None:
                value = numpy_helper.to_array(init)
    except Exception:  # noqa: BLE001 - a value the evaluator cannot read: not known
        return None
    if value is None or np.asarray(value).size != 1:
        return None
    return bool(np.asarray(value).reshape(-1)[0])


def _branch_nodes(node: onnx.NodeProto, branch: onnx.GraphProto, taken: set[str]) -> list[onnx.NodeProto] | None:
    """The nodes that stand for ``node`` (an ``If``) taking ``branch``, or ``None`` where they cannot.

    The branch's nodes read the outer graph's values as they are; a value the branch makes whose name the outer
    graph (or a branch inlined before) already holds is renamed; each branch output becomes the ``If``'s output
    through an ``Identity`` (a view, folded). A branch with initializers, or a renamed value read inside a subgraph
    of the branch, is left as it is (the ``If`` is then refused).
    """
    if branch.initializer or branch.sparse_initializer or len(branch.output) != len(node.output):
        return None
    made = [out for inner in branch.node for out in inner.output if out]
    renamed: dict[str, str] = {}
    for out in (out for out in made if out in taken):
        fresh, k = f"{out}/{node.name or 'If'}", 0
        while fresh in taken or fresh in made or fresh in renamed.values():
            k += 1
            fresh = f"{out}/{node.name or 'If'}_{k}"
        renamed[out] = fresh
    nodes = []
    for inner in branch.node:
        if renamed and any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in inner.attribute):
            return None  # its subgraphs may read a renamed value
        copy = onnx.NodeProto()
        copy.CopyFrom(inner)
        for field in (copy.input, copy.output):
            for i, x in enumerate(field):
                field[i] = renamed.get(x, x)
        nodes.append(copy)
    label = node.name or "If"
    for out, inner_out in zip(node.output, branch.output):
        if out:
            nodes.append(onnx.helper.make_node("Identity", [renamed.get(inner_out.name, inner_out.name)], [out],
                                               name=f"{label}/{out}"))
    taken.update(renamed.get(out, out) for out in made)
    return nodes


def inline_constant_branches(proto: onnx.ModelProto, source: str) -> bool:
    """Replace, in ``proto``, each ``If`` whose condition is a constant by the branch it takes; whether any was.

    ``torch.onnx.export(dynamo=False)`` writes one for ``nn.LocalResponseNorm`` from opset 11 on (its
    ``squeeze(1)``, on whether that dim's size is 1), which :func:`fold_shape_arithmetic` folds; the model was
    refused as control flow. The graph is then put back in topological order and checked as a read model is.
    """
    graph = proto.graph
    taken = ({i.name for i in graph.initializer} | {i.name for i in graph.input}
             | {out for n in graph.node for out in n.output if out})
    nodes: list[onnx.NodeProto] = []
    inlined = False
    for node in graph.node:
        condition = (_constant_condition(node.input[0], proto)
                     if node.op_type == "If" and node.domain in ("", "ai.onnx") and node.input else None)
        branches = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
        branch = branches.get("then_branch" if condition else "else_branch") if condition is not None else None
        taken_nodes = _branch_nodes(node, branch, taken) if branch is not None else None
        if taken_nodes is None:
            nodes.append(node)
            continue
        nodes.extend(taken_nodes)
        inlined = True
    if not inlined:
        return False
    del graph.node[:]
    graph.node.extend(nodes)
    _check_text(proto, source)
    _check_complete(proto, source)
    _check_attribute_types(proto, source)
    refuse_control_flow(proto, source, _LOOPS)
    sort_nodes(proto, source)
    return True


def sort_nodes(proto: onnx.ModelProto, source: str) -> None:
    """Put the nodes of ``proto`` in an order where each value is made before it is read.

    Shape inference reads the nodes in file order.

    Raises:
        InvalidGraph: for a graph with a cycle.
    """
    graph = proto.graph
    order = topological_order(graph.node, {i.name for i in graph.initializer} | {i.name for i in graph.input}, source)
    if order != sorted(order):
        nodes = [onnx.NodeProto.FromString(graph.node[i].SerializeToString()) for i in order]
        del graph.node[:]
        graph.node.extend(nodes)


def _check_text(proto: onnx.ModelProto, source: str) -> None:
    """Raise if a name or op type of the graph is not UTF-8 text (protobuf then hands out bytes).

    Raises:
        InvalidGraph: naming the node, for a corrupt file whose strings do not decode.
    """
    graph = proto.graph
    named = [*graph.input, *graph.output, *graph.value_info, *graph.initializer]
    if any(not isinstance(item.name, str) for item in named):
        raise InvalidGraph(f"{source}: not a readable ONNX model (a tensor name is not UTF-8 text; corrupt?)")
    for i, node in enumerate(graph.node):
        texts = [node.name, node.op_type, node.domain, *node.input, *node.output]
        if any(not isinstance(t, str) for t in texts):
            raise InvalidGraph(f"{source}: not a readable ONNX model (node {i} has a name that is not UTF-8 text)")


def check_inner_sizes(
    kind: str, attrs: dict[str, Any], shapes: Sequence[tuple[int, ...] | None], label: str, source: str
) -> None:
    """Refuse a ``MatMul`` or ``Gemm`` whose operands' inner sizes differ (shape inference lets it pass).

    Raises:
        InvalidGraph: naming the node and both shapes.
    """
    if kind not in ("MatMul", "Gemm") or len(shapes) < 2 or shapes[0] is None or shapes[1] is None:
        return
    a, b = shapes[0], shapes[1]
    if len(a) < 1 or len(b) < 1:
        return
    if kind == "MatMul":
        inner_a, inner_b = a[-1], (b[-2] if len(b) >= 2 else b[0])
    elif len(a) == 2 and len(b) == 2:
        inner_a = a[0] if int(attrs.get("transA", 0)) else a[1]
        inner_b = b[1] if int(attrs.get("transB", 0)) else b[0]
    else:
        return
    if inner_a != inner_b:
        raise InvalidGraph(f"{source}: node {label!r} ({kind}) multiplies shapes {list(a)} and {list(b)}, whose "
                           f"inner sizes differ ({inner_a} against {inner_b})")


def _check_complete(proto: onnx.ModelProto, source: str) -> None:
    g = proto.graph
    made: set[str] = {i.name for i in g.initializer} | {i.name for i in g.input}
    for node in g.node:
        for name in node.output:
            if name and name in made:
                label = node.name or node.op_type
                raise InvalidGraph(f"{source}: value {name!r} is assigned twice (again by node {label!r}); an ONNX "
                                   "graph assigns each value once")
            made.add(name)
    known = made | {i.values.name for i in g.sparse_initializer} | {""}
    for node in g.node:
        for name in node.input:
            if name not in known:
                label = node.name or node.op_type
                raise InvalidGraph(f"{source}: node {label!r} ({node.op_type}) reads {name!r}, which no node, "
                                   f"initializer or input produces (truncated or malformed file?)")
    for out in g.output:
        if out.name not in known:
            raise InvalidGraph(
                f"{source}: graph output {out.name!r} is produced by no node (truncated or malformed file?)"
            )
    for init in g.initializer:
        if init.data_type not in _DEFINED_TYPES:  # (type 0 or 999: its weight was taken for no weight, silently)
            raise InvalidGraph(f"{source}: initializer {init.name!r} has element type {init.data_type}, which ONNX "
                               "does not define (malformed file?)")
        if any(d < 0 for d in init.dims):  # (a negative size: its weight was taken for no weight, silently)
            raise InvalidGraph(f"{source}: initializer {init.name!r} has the shape {list(init.dims)}, with a negative "
                               "dimension (malformed file?)")
        # the values of small initializers feed shape inference: check they are whole (weights are never read)
        numel = math.prod(init.dims)
        if numel > KEEP_VALUES or init.data_location == TensorProto.EXTERNAL or not init.HasField("raw_data"):
            continue
        expected = math.ceil(numel * itemsize(init.data_type))
        if len(init.raw_data) != expected:
            raise InvalidGraph(f"{source}: initializer {init.name!r} holds {len(init.raw_data)} bytes, its shape "
                               f"{list(init.dims)} needs {expected} (truncated or malformed file?)")


def type_dims(type_proto: onnx.TypeProto) -> list[int | str | None] | None:
    """The dims of a tensor type (int, symbolic name or None), or None if it has no shape."""
    if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.HasField("shape"):
        return None
    dims: list[int | str | None] = []
    for d in type_proto.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_value") and d.dim_value == 0:
            dims.append(0)
        else:
            dims.append(d.dim_param or None)
    return dims


#: Initializers up to this many elements keep their values (shape computations may read them);
#: larger ones are weights, whose values the importer never reads.
KEEP_VALUES = 4096
_DATA_FIELDS = ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data",
                "external_data")


def without_weights(proto: onnx.ModelProto, source: str, *, copy: bool) -> onnx.ModelProto:
    """``proto`` with the values of large initializers dropped (their names, types and dims stay).

    Sparse initializers become dense ones (:func:`_dense_of_sparse`), and so does the ``sparse_value`` of a
    ``Constant`` where it is small and held.

    Raises:
        InvalidGraph: for a sparse initializer whose indices do not fit its shape or its values.
    """
    if copy:
        light = onnx.ModelProto()
        light.CopyFrom(proto)
        proto = light
    for sparse in proto.graph.sparse_initializer:  # a dense one, holding its values where it is small
        proto.graph.initializer.add().CopyFrom(_dense_of_sparse(sparse, source))
    proto.graph.ClearField("sparse_initializer")
    for node in proto.graph.node:  # a small Constant's sparse_value, which shape inference does not read: dense
        if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
            continue
        for attribute in node.attribute:
            if attribute.name == "sparse_value" and attribute.HasField("sparse_tensor"):
                dense = _dense_of_sparse(attribute.sparse_tensor, source, f"node {node.name or 'Constant'!r}'s value")
                if held_values(dense) is not None:
                    attribute.CopyFrom(onnx.helper.make_attribute("value", dense))
    for init in proto.graph.initializer:
        if math.prod(init.dims) > KEEP_VALUES:
            for field in _DATA_FIELDS:
                init.ClearField(field)
            init.data_location = TensorProto.DEFAULT
    return proto


def type_initializers(proto: onnx.ModelProto) -> None:
    """Let shape inference read the initializers of an IR version 3 file that are not graph inputs.

    IR version 3 lists every initializer among the graph inputs, and ONNX's shape inference reads the types of
    those alone: an initializer the file does not list (which onnx.checker refuses) was
    of no type, and the first op reading it had no static shape ("the op may be data-dependent", with advice to give
    ``--input-shape``). IR version 4 reads every initializer, listed or not, and means the same for one listed: the
    version of ``proto`` is raised to 4 where it holds an initializer it does not list.
    """
    listed = {value.name for value in proto.graph.input}
    if proto.ir_version < 4 and any(init.name not in listed for init in proto.graph.initializer):
        proto.ir_version = 4


def _dense_of_sparse(sparse: onnx.SparseTensorProto, source: str, what: str = "sparse initializer") -> TensorProto:
    """The dense initializer a sparse one stands for, with its values where it is small and holds them.

    Shape inference reads the values of small tensors (a ``Reshape``'s target shape) from dense initializers
    alone: a sparse one's, stood for by a dense one of no values, was refused as a ``Reshape`` that cannot
    take its inputs ("expected num elements 2 does not match the actual num elements 0"). One of more than
    :data:`KEEP_VALUES` elements (a weight), or whose values or indices lie in external data, keeps only its
    name, type and dims; the second, small, is marked as external data of no file (:data:`SPARSE_EXTERNAL`), so
    that shape inference, if it needs its value, is refused naming it
    (:func:`gnplace.importers.onnx_shapes.infer_shapes`; it read as a tensor of 0 elements: "Reshape cannot take
    its inputs ... expected num elements 2 does not match the actual num elements 0").

    Raises:
        InvalidGraph: if its shape has a negative dimension, or its indices are not one per value, each
            inside its shape (as ``[NNZ]`` linear or ``[NNZ, rank]`` coordinates).
    """
    values, dims, name = sparse.values, [int(d) for d in sparse.dims], sparse.values.name
    if any(d < 0 for d in dims):
        raise InvalidGraph(f"{source}: {what} {name!r} has the shape {dims}, with a negative dimension "
                           "(malformed file?)")
    dense = TensorProto(name=name, data_type=values.data_type, dims=dims)
    external = TensorProto.EXTERNAL in (values.data_location, sparse.indices.data_location)
    if math.prod(dims) > KEEP_VALUES:
        return dense
    if external:
        dense.data_location = TensorProto.EXTERNAL
        dense.external_data.add(key=SPARSE_EXTERNAL, value="1")
        return dense
    try:
        held = numpy_helper.to_array(values).reshape(-1)
        indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
    except Exception:  # noqa: BLE001 - values numpy cannot read tell nothing: its dims stay
        return dense
    numel = math.prod(dims)
    try:
        if indices.ndim == 2 and dims and indices.shape[1] == len(dims):
            linear = np.ravel_multi_index(tuple(indices.T), dims) if indices.size else indices.reshape(-1)
        elif indices.ndim == 1:
            linear = indices
        else:
            raise ValueError("indices neither [NNZ] nor [NNZ, rank]")
        if len(linear) != held.size or (linear.size and (linear.min() < 0 or linear.max() >= numel)):
            raise ValueError("indices outside the shape, or not one per value")
    except ValueError:
        raise InvalidGraph(f"{source}: {what} {name!r} of shape {dims} holds {held.size} values at "
                           f"indices of shape {list(indices.shape)} that do not fit it (one index per value, each "
                           "inside the shape; malformed file?)") from None
    flat = np.zeros(numel, dtype=held.dtype)
    flat[linear] = held
    filled = numpy_helper.from_array(flat.reshape(dims), name)
    return filled if filled.data_type == values.data_type else dense


#: The key that marks, in its ``external_data``, the dense stand-in of a small sparse initializer whose values or
#: indices lie in external data (which gnplace does not read).
SPARSE_EXTERNAL = "gnplace.sparse_external"


def _whole_sizes(name: str, sizes: Any, source: str) -> list[int]:
    """The sizes given for input ``name`` as ints: whole numbers (8 or 8.0; not 8.5, which int() cut to 8, nor True)."""
    if isinstance(sizes, str | bytes | Mapping) or not isinstance(sizes, Iterable):  # None: 'not iterable'
        raise InvalidArgument(f"{source}: input_shapes[{name!r}] must be a list of sizes, got {reprlib.repr(sizes)}")
    sizes = list(sizes)
    for size in sizes:
        if not (is_whole(size) or (is_number(size) and float(size).is_integer())):
            raise InvalidArgument(f"{source}: input_shapes[{name!r}] must hold whole numbers, got "
                                  f"{reprlib.repr(size)} in {reprlib.repr(sizes)}")
    return [int(size) for size in sizes]


def fix_input_shapes(g: onnx.GraphProto, input_shapes: Mapping[str, Sequence[int]], source: str) -> None:
    """Give the inputs of ``g`` the sizes of ``input_shapes``, and drop the shapes recorded for the old ones.

    A symbolic input dim (``"N"``) is bound to the size given for it, in every input that names it (the
    inputs not given included: ``mask [batch]`` gets the batch given for ``x [batch, 16]``). The declared
    shapes of the outputs of ops that ONNX has no schema for (inference cannot recompute them) are kept, with the
    bound dims replaced by their sizes; all other declared shapes of values are dropped.

    Raises:
        UnknownName: if ``input_shapes`` names no input of ``g``.
        InvalidArgument: for a size below 1 or no whole number (8.5 was cut to 8), a rank or fixed size the model
            contradicts, two sizes of one symbolic dim, or ``input_shapes`` no mapping of input name to sizes.
    """
    if not isinstance(input_shapes, Mapping):  # a list was an AttributeError ('items')
        raise InvalidArgument(f"{source}: input_shapes must be a mapping of input name to sizes ({{'x': [8, 16]}}), "
                              f"got {reprlib.repr(input_shapes)}")
    inits = {i.name for i in g.initializer}
    inputs = {i.name: i for i in g.input if i.name not in inits}
    bound: dict[str, tuple[int, str]] = {}  # symbolic dim name -> the size the inputs give it, and the first input
    for name, sizes in input_shapes.items():
        if name not in inputs:
            raise UnknownName(f"{source}: input_shapes (--input-shape) names {name!r}, which is not an input of the "
                              f"model (inputs: {', '.join(inputs) or 'none'})")
        sizes = _whole_sizes(name, sizes, source)
        if any(s <= 0 for s in sizes):
            raise InvalidArgument(f"{source}: input shape {name}={','.join(map(str, sizes))} has a size below 1")
        if not inputs[name].type.HasField("tensor_type"):  # a sequence, a map or no type: sizes cannot make it one
            raise UnsupportedGraph(f"{source}: input {name!r} is not a tensor; only tensor inputs are supported")
        tensor_type = inputs[name].type.tensor_type
        declared = type_dims(inputs[name].type)
        if declared is not None:
            if len(declared) != len(sizes):
                raise InvalidArgument(f"{source}: input {name!r} has {len(declared)} dimensions "
                                       f"{shape_text(declared)}, input_shapes (--input-shape) gives {len(sizes)}")
            for axis, (d, s) in enumerate(zip(declared, sizes)):
                if isinstance(d, int) and d != s:
                    raise InvalidArgument(f"{source}: input {name!r} has fixed size {d} at dimension {axis} "
                                           f"{shape_text(declared)}, input_shapes (--input-shape) gives {s}")
        tensor_type.ClearField("shape")
        for s in sizes:
            tensor_type.shape.dim.add().dim_value = s
        for d, s in zip(declared or (), sizes):
            if isinstance(d, str) and d in bound and bound[d][0] != s:  # ONNX: a dim name is one size in a graph
                raise InvalidArgument(f"{source}: input_shapes (--input-shape) gives dimension {d!r} two sizes, "
                                      f"{bound[d][0]} (input {bound[d][1]!r}) and {s} (input {name!r}); ONNX holds a "
                                      "named dimension at one size across the graph")
            if isinstance(d, str):
                bound.setdefault(d, (s, name))
    sizes_of = {d: size for d, (size, _) in bound.items()}
    for name, value in inputs.items():  # an input not given, of a dim a given one names (mask [batch] of x's batch)
        if name not in input_shapes:
            _bind_dims(value.type, sizes_of)
    # shapes recorded for the old sizes would contradict the new ones: inference computes them again, except
    # those of outputs of ops it has no schema for (com.microsoft ...), whose declared shapes get the new sizes
    keep = schemaless_outputs(g)
    kept = [vi for vi in g.value_info if vi.name in keep]
    for vi in kept:
        _bind_dims(vi.type, sizes_of)
    del g.value_info[:]
    g.value_info.extend(kept)
    for out in g.output:
        if out.name in keep:
            _bind_dims(out.type, sizes_of)
        elif out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")


def has_schema(node: onnx.NodeProto) -> bool:
    """Whether ONNX knows the node's op type, so that shape inference can compute its outputs."""
    return onnx.defs.has(node.op_type, "" if node.domain == "ai.onnx" else node.domain)


def schemaless_outputs(g: onnx.GraphProto) -> set[str]:
    """Outputs of the nodes ONNX has no schema for (com.microsoft ops, ...): only the file declares their shapes."""
    return {out for node in g.node if not has_schema(node) for out in node.output if out}


def _bind_dims(type_proto: onnx.TypeProto, sizes: Mapping[str, int]) -> None:
    """Replace, in a tensor type, each symbolic dim named in ``sizes`` by its size (in elements)."""
    if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.HasField("shape"):
        return
    for d in type_proto.tensor_type.shape.dim:
        if d.HasField("dim_param") and d.dim_param in sizes:
            d.dim_value = sizes[d.dim_param]  # dim_value and dim_param are one field: this clears the name


def shape_text(dims: Sequence[int | str | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def topological_order(nodes: Sequence[onnx.NodeProto], ready: set[str], source: str) -> list[int]:
    """Node indices in an order where every value is produced before it is read."""
    producer = {out: i for i, n in enumerate(nodes) for out in n.output if out}
    waiting = [sum(1 for x in set(n.input) if x and x not in ready and x in producer) for n in nodes]
    readers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for x in set(n.input):
            if x and x not in ready and x in producer:
                readers.setdefault(x, []).append(i)
    order = [i for i, w in enumerate(waiting) if w == 0]
    head = 0
    while head < len(order):
        i = order[head]
        head += 1
        for out in nodes[i].output:
            for j in readers.get(out, []):
                waiting[j] -= 1
                if waiting[j] == 0:
                    order.append(j)
    if len(order) != len(nodes):
        stuck = next(n for i, n in enumerate(nodes) if waiting[i] > 0)
        raise InvalidGraph(f"{source}: the graph has a cycle through node {stuck.name or stuck.op_type!r}")
    return order


def holds_external_value(node: onnx.NodeProto) -> bool:
    """Whether a tensor in ``node``'s attributes (a ``Constant``'s value, ``ConstantOfShape``'s) is external data.

    ONNX's reference evaluator reads such a tensor from the working directory, whatever folder the model is
    in: a shared model's ``Constant`` naming ``.ssh/id_rsa`` had its bytes read from the folder gnplace ran
    in as shape values. Such a node is not computed (a shape that small is stored in the model).
    """
    for attribute in node.attribute:
        tensors = [*attribute.tensors, *(t for s in attribute.sparse_tensors for t in (s.values, s.indices))]
        if attribute.HasField("t"):
            tensors.append(attribute.t)
        if attribute.HasField("sparse_tensor"):
            tensors += [attribute.sparse_tensor.values, attribute.sparse_tensor.indices]
        if any(tensor.data_location == TensorProto.EXTERNAL for tensor in tensors):
            return True
    return False


def read_small_external(proto: onnx.ModelProto, folder: str, source: str) -> None:
    """Read into ``proto`` the values of its small initializers kept in external data beside the model.

    Shape inference reads such values (a ``Reshape``'s target shape, a ``Resize``'s scales) from the model
    itself and cannot open external data: a model saved with ``onnx.save_model(..., save_as_external_data=True,
    size_threshold=0)`` was refused as though its ``Reshape`` could not take its inputs. Only initializers of
    at most :data:`KEEP_VALUES` elements are read (weights never are), each from a regular file under
    ``folder`` (the model file's folder) through onnx's own checks of the location; one that cannot be read
    stays external, and is refused by name where shape inference needs it.

    Raises:
        InvalidGraph: if a value read holds another number of bytes than its shape needs.
    """
    from onnx.external_data_helper import load_external_data_for_tensor

    for init in proto.graph.initializer:
        if init.data_location != TensorProto.EXTERNAL or math.prod(init.dims) > KEEP_VALUES:
            continue
        expected = math.ceil(math.prod(init.dims) * itemsize(init.data_type))
        entries = {entry.key: entry.value for entry in init.external_data}
        if not external_file_is_regular(init, folder) or entries.get("length", str(expected)) != str(expected):
            continue  # (without a length onnx reads to the end of the file: only the shape's bytes are taken)
        inlined = TensorProto()
        inlined.CopyFrom(init)
        if "length" not in entries:
            inlined.external_data.add(key="length", value=str(expected))
        try:
            load_external_data_for_tensor(inlined, folder)
        except Exception:  # noqa: BLE001 - a location outside the folder, a short file: left external
            continue
        if len(inlined.raw_data) != expected:
            raise InvalidGraph(f"{source}: initializer {init.name!r} holds {len(inlined.raw_data)} bytes in its "
                               f"external data, its shape {list(init.dims)} needs {expected} (truncated file?)")
        init.CopyFrom(inlined)


def external_file_is_regular(init: TensorProto, folder: str) -> bool:
    """Whether the external-data file of ``init`` is a regular file under ``folder`` (a FIFO would block the read)."""
    location = next((entry.value for entry in init.external_data if entry.key == "location"), "")
    return bool(location) and os.path.isfile(os.path.join(folder, location))


def evaluate_node(node: onnx.NodeProto, feeds: dict[str, Any], opsets: dict[str, int]) -> Any:
    """The first output of one node on known inputs, under the model's ``opsets``, by ONNX's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    outputs: Any = ReferenceEvaluator(node, opsets=opsets or None).run(None, feeds)
    return np.asarray(outputs[0])


def check_static_inputs(proto: onnx.ModelProto, source: str) -> None:
    g = proto.graph
    inits = {i.name for i in g.initializer}
    read = {x for n in g.node for x in n.input}
    for value in g.input:
        if value.name in inits or value.name not in read:
            continue
        dims = type_dims(value.type)
        if not value.type.HasField("tensor_type"):
            raise UnsupportedGraph(f"{source}: input {value.name!r} is not a tensor; only tensor inputs are supported")
        if dims is not None and 0 in dims:
            raise UnsupportedGraph(f"{source}: input {value.name!r} has shape {shape_text(dims)}, with no elements; "
                                   "export the model with an example input of at least one element per dimension")
        if dims is None or any(not isinstance(d, int) or d <= 0 for d in dims):
            shown = shape_text(dims) if dims is not None else "of unknown rank"
            example = ",".join(str(d) if isinstance(d, int) and d > 0 else "N" for d in (dims or ["N"]))
            raise UnsupportedGraph(
                f"{source}: input {value.name!r} has a dynamic shape {shown}; give its sizes with "
                f"--input-shape {value.name}={example} (input_shapes={{{value.name!r}: [...]}} in Python)"
            )


def held_values(tensor: TensorProto) -> np.ndarray | None:
    """The values of a small tensor the model file holds (at most :data:`KEEP_VALUES` elements, not external data).

    ``None`` where it is larger, kept in external data, or its values cannot be read (or were dropped).
    """
    if math.prod(tensor.dims) > KEEP_VALUES or tensor.data_location == TensorProto.EXTERNAL:
        return None
    try:
        values = numpy_helper.to_array(tensor)
    except Exception:  # noqa: BLE001 - values numpy cannot read (or dropped) tell nothing
        return None
    return values if values.size == math.prod(tensor.dims) else None
