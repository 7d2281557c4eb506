"""Training graphs from ONNX files: ``from_onnx(model) -> OpGraph``.

An ONNX file holds the forward graph of a model. The importer reads it with static shapes
(``onnx.shape_inference.infer_shapes(model, data_prop=True)``, after fixing the sizes of dynamic
inputs from ``input_shapes``; a declared shape the op contradicts is refused, not trusted), and
builds the training graph of one step by the conventions of the PyTorch importer
(:mod:`gnplace.importers.torch`):

* shape computations (``Constant``, ``Shape``, ``Gather`` or ``Concat`` of constants, anything whose
  inputs are all constants) are dropped; view-like ops (``Reshape``, ``Transpose``, ``Squeeze``,
  ``Unsqueeze``, ``Flatten``, ``Identity``, ``Slice``, ``Split``, ``Expand``, and ``Dropout`` in inference
  mode) are folded into the op that produced the data; ops no output needs are dropped. A ``Dropout`` in
  training mode (its ``training_mode`` input a true constant, its ratio not 0: what ``torch.onnx.export`` of a
  module in ``train()`` mode writes; a ``training_mode`` a graph input gives is read as true, with a warning;
  before opset 7, its ``is_test`` attribute 0, as by default) is an op, as the PyTorch importer's
  ``bernoulli_``, ``div_`` and ``mul``: 2 FLOP per element, holding its output and the mask it keeps (a
  byte per element), whose gradient reads the output's gradient and the mask;
* forward FLOP come from :func:`~gnplace.importers.onnx_flops.forward_flops`; an op type with no
  rule is counted at one FLOP per output element and listed once in a warning;
* trainable parameters are the float initializers (at least two elements) read as weights: at an
  input where a gradient flows (not a shape, an index, a batch-norm running statistic or a quantization
  scale or zero point) and that holds no state (not the initial state of a recurrent layer, which
  exporters store as an initializer when it is zero); where the file holds torch.export's graph signature, its buffers
  are no weights, and neither are the constants the exporter folded that stand for no parameter
  (the unit scale and zero bias of a norm without weights or over ``GroupNorm``'s groups, an
  ``RNN``'s first step from its zero state); where the file also records what each folded constant was
  computed from (onnxscript's optimizer does), a constant folded from no parameter is no weight, one
  folded from a parameter the file holds (a tied weight's transpose) is read from that parameter, and
  one folded from a parameter the file no longer holds stands for it, with a warning when it may hold
  only a part of it (the model's own slice, ``self.pos[:, :7]``: export with ``optimize=False``);
* the graph outputs that depend on parameters feed one ``loss`` op (one FLOP per element), unless
  the model already returns a scalar, which is then the loss;
* the backward pass is synthesised: each forward op gets one gradient op per input that needs a
  gradient (:func:`~gnplace.importers.onnx_flops.grad_flops`: for ``Conv``, ``Gemm`` and ``MatMul``
  the data and the weight gradient each cost the forward product; the work all gradients share,
  back-propagation through time for recurrent layers, goes to the op's first gradient op), fed by
  the gradient of the op's outputs (gradient edges run in reverse) and by the activations the
  gradient reads (the op's other inputs for products, its input or output for activations). As
  aten runs them, a norm's gradients are one op reading its input and scale (not its output), a
  bias's gradient reads the output's gradient alone, and an ``Add`` or ``Sum`` input of the
  output's shape gets the output's gradient itself, with no op (a broadcast one gets a reduction).
  A value that several ops read gets its gradients summed by a ``grad_sum`` op; the parts of a ``Split`` (disjoint)
  get theirs concatenated, as aten's split backward does: a ``Split_grad`` op of 0 FLOP; so do the tensors of a
  ``SplitToSequence`` that ``SequenceAt`` reads at constant positions (torch's split, as the dynamo exporter writes
  it unoptimized; one read at a position no constant gives is summed into the data's gradient). A
  ``QuantizeLinear`` of a float a gradient reaches, read by ``DequantizeLinear`` (fake quantization, as
  ``torch.onnx.export`` writes torch's ``fake_quantize_per_tensor_affine`` and ``_per_channel_affine`` for
  quantization-aware training), passes the gradient straight through as aten does (its integers hold none): one
  ``QuantizeLinear_grad`` op of 1 FLOP per element of the float, in the group of ``QuantizeLinear``, reading the
  gradient of ``DequantizeLinear``'s output and the mask (a byte per element) that ``QuantizeLinear`` keeps for it,
  as aten's ``fake_quantize_*_cachemask``; a ``DequantizeLinear`` of integers the file holds (a
  post-training-quantized weight) trains nothing;
* each trainable initializer gets one update op holding its bytes times the optimizer's state
  factor (a default weight no gradient reaches, as one whose only path to the outputs runs through
  ``QuantizeLinear``'s integers and no ``DequantizeLinear`` of them, is read as a constant, as a ``frozen`` one);
  each forward op, its gradient ops and the updates of its initializers form one colocation group; an
  initializer read by ops of several groups is served to the others by a ``read`` op in the group of its first
  reader, as in the PyTorch importer;
* op kinds (:mod:`gnplace.opkinds`) follow from op type and phase, except that a ``Gather`` from a
  trainable initializer (and its gradient) is an ``embedding`` (``embedding_grad``): what PyTorch
  records as ``embedding``, ONNX exports as ``Gather``.

Only shapes and dtypes are read, never weight values: files with external data load without it, but for
the small values shape computations read (a ``Reshape``'s target shape), taken from the data file beside the model.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Container, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.defs
import onnx.inliner
from onnx import TensorProto, numpy_helper

from gnplace.exceptions import InvalidArgument, InvalidGraph, UnknownName, UnsupportedGraph, first_line
from gnplace.graph import BACKWARD, FORWARD, UPDATE, OpGraph
from gnplace.importers import OPTIMIZERS, check_optimizer
from gnplace.importers.onnx_flops import (
    BIAS_SLOT,
    FUSED_NORM_GRADS,
    NON_DIFFERENTIABLE,
    PASS_THROUGH_GRADS,
    SAVES_MASK,
    SAVES_OTHER_INPUTS,
    SAVES_OUTPUT,
    SAVES_OWN_INPUT,
    STATIC_OPS,
    TYPE_ONLY_INPUTS,
    VIEW_OPS,
    canonical_op_type,
    forward_flops,
    grad_flops,
    shared_grad_flops,
)
from gnplace.limits import MAX_COUNT
from gnplace.opkinds import canonical_kind

__all__ = ["from_onnx", "load_onnx", "parse_input_shape"]

Shape = tuple[int, ...]

_FLOAT_TYPES = frozenset({
    TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16,
    *(getattr(TensorProto, n) for n in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ")
      if hasattr(TensorProto, n)),
})


#: The element types ONNX defines (``TensorProto.DataType`` but ``UNDEFINED``).
_DEFINED_TYPES = frozenset(v for v in TensorProto.DataType.values() if v != TensorProto.UNDEFINED)


#: Bits per element of the sub-byte ONNX types, which files store packed (``raw_data`` of ``ceil(n * bits / 8)``
#: bytes): numpy's dtypes for them (ml_dtypes') take a byte per element.
_PACKED_BITS = {getattr(TensorProto, name): bits for name, bits in (
    ("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2), ("FLOAT6E2M3", 6), ("FLOAT6E3M2", 6),
) if hasattr(TensorProto, name)}


def _itemsize(elem_type: int) -> float:
    """Bytes per element of an ONNX tensor type (sub-byte types count a fraction: 4-bit 0.5, 2-bit 0.25, 6-bit 0.75)."""
    if elem_type in _PACKED_BITS:
        return _PACKED_BITS[elem_type] / 8
    try:
        return float(onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize)
    except (KeyError, TypeError, ValueError):
        return 4.0


def parse_input_shape(text: str) -> tuple[str, list[int]]:
    """Parse ``"name=1,3,224,224"`` into ``("name", [1, 3, 224, 224])``.

    Raises:
        InvalidArgument: if ``text`` is not ``name=d1,d2,...`` with positive integer sizes.

    Examples:
        >>> parse_input_shape("pixel_values=8,3,224,224")
        ('pixel_values', [8, 3, 224, 224])
        >>> parse_input_shape("scalar=")
        ('scalar', [])
    """
    name, sep, dims = text.partition("=")
    name = name.strip()
    hint = f"bad input shape {text!r}: expected NAME=D1,D2,... with positive integer sizes, e.g. input_ids=8,128"
    if not sep or not name:
        raise InvalidArgument(hint)
    parts = [p.strip() for p in dims.split(",")] if dims.strip() else []
    try:
        sizes = [int(p) for p in parts]
    except ValueError:
        raise InvalidArgument(hint) from None
    if any(s <= 0 for s in sizes):
        raise InvalidArgument(hint)
    if math.prod(sizes) > MAX_COUNT:
        raise InvalidArgument(f"bad input shape {text!r}: {math.prod(sizes):.3g} elements, over the limit of 2**62")
    return name, sizes


def load_onnx(model: str | os.PathLike[str] | onnx.ModelProto) -> onnx.ModelProto:
    """Read an ONNX model without its weight values, checking that it is a whole, readable model.

    Raises:
        InvalidGraph: if the file is missing, truncated, not ONNX, or names values nothing produces.
    """
    if isinstance(model, onnx.ModelProto):
        proto, source = model, "ONNX model"
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
    _refuse_control_flow(proto, source, _LOOPS)
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
#: the branch it takes (:func:`_inline_constant_branches`); one whose condition does not is refused after folding.
_LOOPS = ("Loop", "Scan", "SequenceMap")


def _refuse_control_flow(proto: onnx.ModelProto, source: str, kinds: Sequence[str] = _CONTROL_FLOW) -> None:
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
                value = _evaluate(node, {}, opsets)
        for init in proto.graph.initializer:
            if init.name == name and _held_values(init) is not None:
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


def _inline_constant_branches(proto: onnx.ModelProto, source: str) -> bool:
    """Replace, in ``proto``, each ``If`` whose condition is a constant by the branch it takes; whether any was.

    ``torch.onnx.export(dynamo=False)`` writes one for ``nn.LocalResponseNorm`` from opset 11 on (its
    ``squeeze(1)``, on whether that dim's size is 1), which :func:`_fold_shape_arithmetic` folds; the model was
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
    _refuse_control_flow(proto, source, _LOOPS)
    _sort_nodes(proto, source)
    return True


def _sort_nodes(proto: onnx.ModelProto, source: str) -> None:
    """Put the nodes of ``proto`` in an order where each value is made before it is read.

    Shape inference reads the nodes in file order.

    Raises:
        InvalidGraph: for a graph with a cycle.
    """
    graph = proto.graph
    order = _topological(graph.node, {i.name for i in graph.initializer} | {i.name for i in graph.input}, source)
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


def _check_inner_sizes(
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
        if numel > _KEEP_VALUES or init.data_location == TensorProto.EXTERNAL or not init.HasField("raw_data"):
            continue
        expected = math.ceil(numel * _itemsize(init.data_type))
        if len(init.raw_data) != expected:
            raise InvalidGraph(f"{source}: initializer {init.name!r} holds {len(init.raw_data)} bytes, its shape "
                               f"{list(init.dims)} needs {expected} (truncated or malformed file?)")


def _dims(type_proto: onnx.TypeProto) -> list[int | str | None] | None:
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
_KEEP_VALUES = 4096
_DATA_FIELDS = ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data",
                "external_data")


def _without_weights(proto: onnx.ModelProto, source: str, *, copy: bool) -> onnx.ModelProto:
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
                if _held_values(dense) is not None:
                    attribute.CopyFrom(onnx.helper.make_attribute("value", dense))
    for init in proto.graph.initializer:
        if math.prod(init.dims) > _KEEP_VALUES:
            for field in _DATA_FIELDS:
                init.ClearField(field)
            init.data_location = TensorProto.DEFAULT
    return proto


def _type_initializers(proto: onnx.ModelProto) -> None:
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
    :data:`_KEEP_VALUES` elements (a weight), or whose values or indices lie in external data, keeps only its
    name, type and dims; the second, small, is marked as external data of no file (:data:`_SPARSE_EXTERNAL`), so
    that shape inference, if it needs its value, is refused by :func:`_unread_external` naming it (it read as a
    tensor of 0 elements: "Reshape cannot take its inputs ... expected num elements 2 does not match the actual
    num elements 0").

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
    if math.prod(dims) > _KEEP_VALUES:
        return dense
    if external:
        dense.data_location = TensorProto.EXTERNAL
        dense.external_data.add(key=_SPARSE_EXTERNAL, value="1")
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
_SPARSE_EXTERNAL = "gnplace.sparse_external"


def _fix_input_shapes(g: onnx.GraphProto, input_shapes: Mapping[str, Sequence[int]], source: str) -> None:
    """Give the inputs of ``g`` the sizes of ``input_shapes``, and drop the shapes recorded for the old ones.

    A symbolic input dim (``"N"``) is bound to the size given for it, in every input that names it (the
    inputs not given included: ``mask [batch]`` gets the batch given for ``x [batch, 16]``). The declared
    shapes of the outputs of ops that ONNX has no schema for (inference cannot recompute them) are kept, with the
    bound dims replaced by their sizes; all other declared shapes of values are dropped.

    Raises:
        UnknownName: if ``input_shapes`` names no input of ``g``.
        InvalidArgument: for a size below 1, a rank or fixed size the model contradicts, or two sizes of one
            symbolic dim.
    """
    inits = {i.name for i in g.initializer}
    inputs = {i.name: i for i in g.input if i.name not in inits}
    bound: dict[str, tuple[int, str]] = {}  # symbolic dim name -> the size the inputs give it, and the first input
    for name, sizes in input_shapes.items():
        if name not in inputs:
            raise UnknownName(f"{source}: --input-shape names {name!r}, which is not an input of the model "
                              f"(inputs: {', '.join(inputs) or 'none'})")
        sizes = [int(s) for s in sizes]
        if any(s <= 0 for s in sizes):
            raise InvalidArgument(f"{source}: input shape {name}={','.join(map(str, sizes))} has a size below 1")
        if not inputs[name].type.HasField("tensor_type"):  # a sequence, a map or no type: sizes cannot make it one
            raise UnsupportedGraph(f"{source}: input {name!r} is not a tensor; only tensor inputs are supported")
        tensor_type = inputs[name].type.tensor_type
        declared = _dims(inputs[name].type)
        if declared is not None:
            if len(declared) != len(sizes):
                raise InvalidArgument(f"{source}: input {name!r} has {len(declared)} dimensions "
                                       f"{_show(declared)}, --input-shape gives {len(sizes)}")
            for axis, (d, s) in enumerate(zip(declared, sizes)):
                if isinstance(d, int) and d != s:
                    raise InvalidArgument(f"{source}: input {name!r} has fixed size {d} at dimension {axis} "
                                           f"{_show(declared)}, --input-shape gives {s}")
        tensor_type.ClearField("shape")
        for s in sizes:
            tensor_type.shape.dim.add().dim_value = s
        for d, s in zip(declared or (), sizes):
            if isinstance(d, str) and d in bound and bound[d][0] != s:  # ONNX: a dim name is one size in a graph
                raise InvalidArgument(f"{source}: --input-shape gives dimension {d!r} two sizes, {bound[d][0]} "
                                      f"(input {bound[d][1]!r}) and {s} (input {name!r}); ONNX holds a named "
                                      "dimension at one size across the graph")
            if isinstance(d, str):
                bound.setdefault(d, (s, name))
    sizes_of = {d: size for d, (size, _) in bound.items()}
    for name, value in inputs.items():  # an input not given, of a dim a given one names (mask [batch] of x's batch)
        if name not in input_shapes:
            _bind_dims(value.type, sizes_of)
    # shapes recorded for the old sizes would contradict the new ones: inference computes them again, except
    # those of outputs of ops it has no schema for (com.microsoft ...), whose declared shapes get the new sizes
    keep = _schemaless_outputs(g)
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


def _has_schema(node: onnx.NodeProto) -> bool:
    """Whether ONNX knows the node's op type, so that shape inference can compute its outputs."""
    return onnx.defs.has(node.op_type, "" if node.domain == "ai.onnx" else node.domain)


def _schemaless_outputs(g: onnx.GraphProto) -> set[str]:
    """Outputs of the nodes ONNX has no schema for (com.microsoft ops, ...): only the file declares their shapes."""
    return {out for node in g.node if not _has_schema(node) for out in node.output if out}


def _bind_dims(type_proto: onnx.TypeProto, sizes: Mapping[str, int]) -> None:
    """Replace, in a tensor type, each symbolic dim named in ``sizes`` by its size (in elements)."""
    if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.HasField("shape"):
        return
    for d in type_proto.tensor_type.shape.dim:
        if d.HasField("dim_param") and d.dim_param in sizes:
            d.dim_value = sizes[d.dim_param]  # dim_value and dim_param are one field: this clears the name


def _show(dims: Sequence[int | str | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _attributes(node: onnx.NodeProto) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for a in node.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            continue
        value = onnx.helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        attrs[a.name] = value
    return attrs


def _metadata_list(node: onnx.NodeProto, key: str) -> list[Any] | None:
    """The Python list literal the exporter recorded under ``key`` in the node's metadata, or :obj:`None`.

    A value that is not a list literal (``"5"``, a dict, text nested past the parser's depth) is read as
    absent: the metadata only names modules, it never decides the graph.
    """
    for prop in node.metadata_props:
        if prop.key == key:
            value = _literal(prop.value)
            return value if isinstance(value, list) else None
    return None


def _literal(text: str) -> Any:
    """The Python literal a model's metadata holds as ``text``, or :obj:`None` where it holds none readable.

    ``ast.literal_eval`` runs no code, but a file's text can still make it fail in more ways than a
    ``ValueError``: ``{[1]: 2}`` is a ``TypeError`` (an unhashable key), 200,000 signs before a number a
    ``MemoryError`` of the parser, deep nesting a ``RecursionError``.
    """
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None


def _module_of(node: onnx.NodeProto) -> str:
    """The owning module path recorded by the exporter (``pkg.torch.onnx.name_scopes`` or ``/a/b/Op``)."""
    if any(prop.key == "pkg.torch.onnx.name_scopes" for prop in node.metadata_props):
        scopes = _metadata_list(node, "pkg.torch.onnx.name_scopes")
        return str(scopes[-2]) if scopes is not None and len(scopes) >= 2 else ""
    if node.name.startswith("/"):
        return ".".join(p for p in node.name.split("/")[1:-1] if p)
    return ""


def _innermost_class(node: onnx.NodeProto) -> str:
    """The class of the innermost module whose forward ran the node (``pkg.torch.onnx.class_hierarchy``), or ``""``."""
    hierarchy = _metadata_list(node, "pkg.torch.onnx.class_hierarchy")
    return str(hierarchy[-2]) if hierarchy is not None and len(hierarchy) >= 2 else ""


def _topological(nodes: Sequence[onnx.NodeProto], ready: set[str], source: str) -> list[int]:
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


def from_onnx(
    model: str | os.PathLike[str] | onnx.ModelProto,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    optimizer: str = "sgd",
    name: str | None = None,
    trainable: Iterable[str] | None = None,
    meta: Mapping[str, Any] | None = None,
    allow_unknown_ops: bool = False,
    frozen: Iterable[str] | None = None,
) -> OpGraph:
    """The training graph of one step of the model in an ONNX file (see the module docstring).

    Args:
        model (str, Path or onnx.ModelProto): the ONNX file or a loaded model.
        input_shapes (Mapping[str, list[int]], optional): sizes of the graph inputs, needed for
            inputs with dynamic dimensions (default: the sizes the file declares).
        optimizer (str, optional): ``"sgd"``, ``"momentum"`` or ``"adam"`` (default: ``"sgd"``).
        name (str, optional): graph name (default: the file name without suffix, or the graph's name).
        trainable (Iterable[str], optional): names of the initializers to train (default: every float
            initializer of at least two elements read as a weight, not as a recurrent layer's initial state).
        frozen (Iterable[str], optional): names of initializers not to train, out of ``trainable`` or the
            default ones: buffers and frozen weights, which an ONNX file does not tell from weights
            (default: none).
        meta (Mapping, optional): extra facts to store with the graph.
        allow_unknown_ops (bool, optional): count an op that gnplace has no FLOP rule for, of a
            custom domain or of a type ONNX does not define (old experimental ops such as
            ``ImageScaler``), at 1 FLOP per output element, with a warning, instead of refusing the
            model (default: :obj:`False`). A standard ONNX op without a rule is always counted so,
            with a warning.

    Returns:
        OpGraph: forward, backward and update ops with FLOP, bytes and colocation groups.

    Raises:
        InvalidGraph: if the file is missing, truncated or not ONNX, declares a shape its op contradicts,
            or holds a view op (``Reshape``, ...) that changes the element count at these input sizes.
        InvalidArgument: if ``input_shapes`` gives a size below 1, a rank or fixed size the model contradicts, or
            two sizes of one named dimension (``x [batch, 16]`` at 8, ``mask [batch]`` at 4).
        UnsupportedGraph: if an input has a dynamic size that ``input_shapes`` does not give (the
            message names the input), or shapes cannot be inferred.
        UnknownName: for an unknown optimizer, or ``input_shapes``, ``trainable`` or ``frozen`` naming
            no input or initializer of the model.

    Examples:
        >>> from onnx import TensorProto, helper, numpy_helper
        >>> import numpy as np
        >>> w = numpy_helper.from_array(np.zeros((16, 4), np.float32), "w")
        >>> graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mlp",
        ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
        ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4])], [w])
        >>> g = from_onnx(helper.make_model(graph))
        >>> g.node_names
        ('mm', 'input/x', 'loss', 'grad/loss/y', 'grad/mm/w', 'update/w')
        >>> float(g.flops[g.index("mm")]), float(g.flops[g.index("grad/mm/w")]), int(g.param_bytes[g.index("update/w")])
        (1024.0, 1024.0, 256)
    """
    check_optimizer(optimizer)
    proto = load_onnx(model)
    folder: str | None = None  # where the file's external data lies: beside it
    if isinstance(model, onnx.ModelProto):
        source = f"ONNX model {proto.graph.name!r}" if proto.graph.name else "ONNX model"
        default_name = proto.graph.name or "onnx"
    else:
        source = str(model)
        default_name = Path(model).name.removesuffix(".onnx")
        folder = os.path.dirname(os.path.abspath(model))
    folded = _folded_sources(proto)  # before input_shapes drop the declared value_info that holds it
    proto = _without_weights(proto, source, copy=proto is model)
    _type_initializers(proto)
    if folder is not None:
        _read_small_external(proto, folder, source)
    _sort_nodes(proto, source)
    if input_shapes:
        _fix_input_shapes(proto.graph, input_shapes, source)
    _check_static_inputs(proto, source)
    inferred = _infer_shapes(proto, source)
    # Shape arithmetic data propagation leaves open (torch.chunk's Shape -> Div -> Slice), until nothing more folds:
    # a layer's sizes may be known only once the layer before it is folded (swin_t exported at opset 13 takes 27
    # rounds, one shifted window after another). Each round folds or inlines a node, so it ends.
    for _ in range(len(proto.graph.node) + 1):
        if _inline_constant_branches(proto, source):  # an If on a folded condition: the branch it takes
            inferred = _infer_shapes(proto, source)
            continue
        branching = any(node.op_type == "If" for node in proto.graph.node)
        if not (_unshaped(inferred) or branching) or not _fold_shape_arithmetic(proto, inferred, folder):
            break
        inferred = _infer_shapes(proto, source)
    _refuse_control_flow(proto, source)  # an If whose condition did not fold
    _check_declared_shapes(proto, inferred, source)
    builder = _Builder(inferred, source, OPTIMIZERS[optimizer], optimizer, trainable, bool(allow_unknown_ops),
                       frozen, shapes_given=bool(input_shapes), folded=folded)
    graph_meta = {
        "source": "onnx",
        "model": source if not isinstance(model, onnx.ModelProto) else "<ModelProto>",
        "producer": f"{proto.producer_name} {proto.producer_version}".strip(),
        "opset": max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0),
        "optimizer": optimizer,
        "input_shapes": {k: list(v) for k, v in builder.input_shapes.items()},
        **dict(meta or {}),
    }
    return builder.build(name or default_name, graph_meta)


def _infer_shapes(
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
        return _infer_shapes(proto, source)
    except Exception as err:  # noqa: BLE001 - onnx raises several types here
        raise UnsupportedGraph(f"{source}: ONNX shape inference failed: {first_line(err)}") from err


#: Strict data propagation's complaint about a tensor whose value lies in external data (onnx 1.17-1.23).
_EXTERNAL_VALUE = "Cannot parse data from external tensors"


def _unread_external(err: Exception, source: str, proto: onnx.ModelProto | None = None) -> str:
    """The refusal of a model whose small tensor shape inference needs lies in external data that was not read.

    A sparse initializer's (its stand-in in ``proto`` marked :data:`_SPARSE_EXTERNAL`) is refused as such: gnplace
    reads no sparse tensor's external data, whatever file holds it.
    """
    found = re.search(r"for tensor: ([^\s]+)", str(err))
    tensor = f"tensor {found.group(1)!r}" if found else "a tensor"
    if found is not None and proto is not None and any(
            init.name == found.group(1) and any(entry.key == _SPARSE_EXTERNAL for entry in init.external_data)
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
    dims: dict[str, Any] = {init.name: list(init.dims) for init in proto.graph.initializer} | _value_dims(proto)
    shapes = " and ".join("?" if dims.get(x) is None else _show(dims[x] or []) for x in node.input if x)
    return f"node {name or op_type!r} ({op_type}) cannot take its inputs (of shapes {shapes}): {complaint}"


def _check_declared_shapes(proto: onnx.ModelProto, inferred: onnx.ModelProto, source: str) -> None:
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
    keep = _schemaless_outputs(g)
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
    computed = _value_dims(_infer_shapes(bare, source, strict=True, shown=inferred))
    if not any(_dims(v.type) is not None for v in [*g.value_info, *g.output] if v.name in recheck):
        return  # nothing declared that inference computes: nothing to contradict it
    used = _value_dims(inferred)
    for node in g.node:
        for out in node.output:
            declared, own = used.get(out), computed.get(out)
            if out not in recheck or not _static(declared) or not _static(own) or declared == own:
                continue
            raise InvalidGraph(
                f"{source}: value {out!r} is declared with shape {_show(declared or [])}, but node "
                f"{node.name or node.op_type!r} ({node.op_type}) computes {_show(own or [])} (stale value_info or "
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
#: Ops whose result :meth:`_Builder.constant_value` computes when their inputs are constants (a ``Dropout``'s
#: ``training_mode`` as ``Not`` of a constant, its ratio as a ``Cast`` of one): shape arithmetic and logic.
_CONSTANT_OPS = _SHAPE_OPS | {"And", "Or", "Xor", "LessOrEqual", "GreaterOrEqual", "CastLike"}
#: Element types of shape arithmetic (whole numbers and flags): only these are folded.
_INDEX_TYPES = frozenset({TensorProto.INT64, TensorProto.INT32, TensorProto.INT16, TensorProto.INT8, TensorProto.UINT64,
                          TensorProto.UINT32, TensorProto.UINT16, TensorProto.UINT8, TensorProto.BOOL})
#: Most elements of a folded value: shape computations are small.
_FOLD_LIMIT = 4096


def _value_dims(inferred: onnx.ModelProto) -> dict[str, list[int | str | None] | None]:
    """The dims of every value whose type the (shape-inferred) model declares, by name."""
    g = inferred.graph
    return {v.name: _dims(v.type) for v in [*g.value_info, *g.output, *g.input]}


def _unshaped(inferred: onnx.ModelProto) -> bool:
    """Whether some node output has no static shape after inference."""
    dims = _value_dims(inferred)
    return any(out and (dims.get(out) is None or any(not isinstance(d, int) for d in dims[out] or ()))
               for node in inferred.graph.node for out in node.output)


def _fold_shape_arithmetic(proto: onnx.ModelProto, inferred: onnx.ModelProto, folder: str | None) -> bool:
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

    shapes = _value_dims(inferred)
    opsets = {o.domain or "": int(o.version) for o in proto.opset_import if o.domain in ("", "ai.onnx")}
    known: dict[str, Any] = {}
    for init in proto.graph.initializer:  # whole numbers only: a small float initializer may be a weight
        if init.data_type in _INDEX_TYPES and math.prod(init.dims) <= _FOLD_LIMIT:
            external = init.data_location == TensorProto.EXTERNAL
            if external and (folder is None or not _external_file_is_regular(init, folder)):
                continue
            try:
                known[init.name] = numpy_helper.to_array(init, base_dir=folder or "")
            except Exception:  # noqa: BLE001 - an initializer numpy cannot read is simply not known
                continue
    sized: set[str] = set()  # values computed from a Shape or Size: a float among them is a size, no weight
    folded = 0
    for index, node in enumerate(proto.graph.node):
        if node.domain not in ("", "ai.onnx") or len(node.output) != 1 or not node.output[0] or _external_value(node):
            continue
        out = str(node.output[0])
        value = None
        try:
            if node.op_type == "Constant":
                known[out] = _evaluate(node, {}, opsets)
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
                if _result_size(node, known) > _FOLD_LIMIT:
                    continue  # a Range or ConstantOfShape of 10**8 elements is no shape: never built
                value = _evaluate(node, {x: known[x] for x in node.input if x}, opsets)
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


#: Ops (of :data:`_CONSTANT_OPS`) whose output has the broadcast shape of their inputs.
_BROADCASTING = frozenset({"Add", "Sub", "Mul", "Div", "Mod", "Min", "Max", "Equal", "Less", "Greater", "Where", "And",
                           "Or", "Xor", "LessOrEqual", "GreaterOrEqual"})


def _result_size(node: onnx.NodeProto, known: Mapping[str, Any]) -> float:
    """An upper bound on the elements of a :data:`_CONSTANT_OPS` node's output on the ``known`` inputs.

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


def _external_value(node: onnx.NodeProto) -> bool:
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


def _read_small_external(proto: onnx.ModelProto, folder: str, source: str) -> None:
    """Read into ``proto`` the values of its small initializers kept in external data beside the model.

    Shape inference reads such values (a ``Reshape``'s target shape, a ``Resize``'s scales) from the model
    itself and cannot open external data: a model saved with ``onnx.save_model(..., save_as_external_data=True,
    size_threshold=0)`` was refused as though its ``Reshape`` could not take its inputs. Only initializers of
    at most :data:`_KEEP_VALUES` elements are read (weights never are), each from a regular file under
    ``folder`` (the model file's folder) through onnx's own checks of the location; one that cannot be read
    stays external, and is refused by name where shape inference needs it.

    Raises:
        InvalidGraph: if a value read holds another number of bytes than its shape needs.
    """
    from onnx.external_data_helper import load_external_data_for_tensor

    for init in proto.graph.initializer:
        if init.data_location != TensorProto.EXTERNAL or math.prod(init.dims) > _KEEP_VALUES:
            continue
        expected = math.ceil(math.prod(init.dims) * _itemsize(init.data_type))
        entries = {entry.key: entry.value for entry in init.external_data}
        if not _external_file_is_regular(init, folder) or entries.get("length", str(expected)) != str(expected):
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


def _external_file_is_regular(init: TensorProto, folder: str) -> bool:
    """Whether the external-data file of ``init`` is a regular file under ``folder`` (a FIFO would block the read)."""
    location = next((entry.value for entry in init.external_data if entry.key == "location"), "")
    return bool(location) and os.path.isfile(os.path.join(folder, location))


def _evaluate(node: onnx.NodeProto, feeds: dict[str, Any], opsets: dict[str, int]) -> Any:
    """The first output of one node on known inputs, under the model's ``opsets``, by ONNX's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    outputs: Any = ReferenceEvaluator(node, opsets=opsets or None).run(None, feeds)
    return np.asarray(outputs[0])


def _check_static_inputs(proto: onnx.ModelProto, source: str) -> None:
    g = proto.graph
    inits = {i.name for i in g.initializer}
    read = {x for n in g.node for x in n.input}
    for value in g.input:
        if value.name in inits or value.name not in read:
            continue
        dims = _dims(value.type)
        if not value.type.HasField("tensor_type"):
            raise UnsupportedGraph(f"{source}: input {value.name!r} is not a tensor; only tensor inputs are supported")
        if dims is not None and 0 in dims:
            raise UnsupportedGraph(f"{source}: input {value.name!r} has shape {_show(dims)}, with no elements; "
                                   "export the model with an example input of at least one element per dimension")
        if dims is None or any(not isinstance(d, int) or d <= 0 for d in dims):
            shown = _show(dims) if dims is not None else "of unknown rank"
            example = ",".join(str(d) if isinstance(d, int) and d > 0 else "N" for d in (dims or ["N"]))
            raise UnsupportedGraph(
                f"{source}: input {value.name!r} has a dynamic shape {shown}; give its sizes with "
                f"--input-shape {value.name}={example} (input_shapes={{{value.name!r}: [...]}} in Python)"
            )


class _NoGradient(Exception):  # noqa: N818 - a signal inside the builder, never raised out of it
    """Default parameters that no gradient reaches: the builder builds the graph again without them."""

    def __init__(self, parameters: set[str]) -> None:
        super().__init__(", ".join(sorted(parameters)))
        self.parameters = parameters


class _Builder:
    """Builds the training graph from a shape-inferred ONNX model (one use)."""

    def __init__(self, proto: onnx.ModelProto, source: str, rule: tuple[int, float], optimizer: str,
                 trainable: Iterable[str] | None, allow_unknown_ops: bool = False,
                 frozen: Iterable[str] | None = None, *, shapes_given: bool = False,
                 folded: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.proto = proto
        self.source = source
        self.shapes_given = shapes_given  # whether the caller gave input shapes: do not advise it to
        self.allow_unknown_ops = allow_unknown_ops
        self.state_factor, self.update_flops = rule
        self.optimizer = optimizer
        g = proto.graph
        self.inits = {i.name: i for i in g.initializer}
        self.types: dict[str, tuple[Shape | None, int]] = {}
        for vi in [*g.input, *g.value_info, *g.output]:
            dims = _dims(vi.type)
            shape = tuple(d for d in dims) if dims is not None and all(isinstance(d, int) for d in dims) else None
            self.types[vi.name] = (shape, vi.type.tensor_type.elem_type)  # type: ignore[assignment]
        for init in self.inits.values():
            self.types[init.name] = (tuple(int(d) for d in init.dims), init.data_type)
        self.input_shapes = {vi.name: list(self.types[vi.name][0] or ()) for vi in g.input if vi.name not in self.inits}
        self.nodes = list(g.node)
        self.constants = {out: n for n in self.nodes if n.op_type == "Constant" and n.domain in ("", "ai.onnx")
                          for out in n.output[:1] if out}
        self.read = {x for n in self.nodes for x in n.input} | {o.name for o in g.output}
        self._producer = {out: n for n in self.nodes for out in n.output if out}
        self._computed: dict[tuple[str, int], np.ndarray | None] = {}  # (value, depth) -> constant_value's
        self.order = _topological(self.nodes, set(self.inits) | {vi.name for vi in g.input}, source)
        self.trainable_override = set(trainable) if trainable is not None else None
        if self.trainable_override is not None:
            missing = sorted(self.trainable_override - set(self.inits))
            if missing:
                raise UnknownName(f"{source}: trainable names {missing[0]!r}, which is not an initializer of the model")
            whole = sorted(x for x in self.trainable_override if self.inits[x].data_type not in _FLOAT_TYPES)
            if whole:  # an int64 tensor got a gradient and an optimizer update
                kind = onnx.TensorProto.DataType.Name(self.inits[whole[0]].data_type).lower()
                raise InvalidArgument(f"{source}: trainable names {whole[0]!r}, an initializer of type {kind}: only "
                                      "floating-point tensors have gradients")
        self.frozen = set(frozen) if frozen is not None else set()
        if self.frozen - set(self.inits):
            raise UnknownName(f"{source}: frozen names {sorted(self.frozen - set(self.inits))[0]!r}, which is not "
                              "an initializer of the model")
        self.opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0)
        self.folded_from = dict(folded or {})
        self.alias, self.parameter_of, self.made = _fold_roles(proto, self.folded_from, set(self.inits))
        self._reset()

    def _reset(self) -> None:
        """Start the output graph afresh (no node, no edge)."""
        self.names: list[str] = []
        self.op_types: list[str] = []
        self.op_kinds: list[str] = []
        self.phase: list[int] = []
        self.flops: list[float] = []
        self.out_bytes: list[int] = []
        self.param_bytes: list[int] = []
        self.group: list[int] = []
        self.module: list[str] = []
        self.edges: dict[tuple[int, int], int] = {}
        self._counters: dict[str, int] = {}
        self._used: set[str] = set()
        self._groups = 0
        self.fed_modes: list[str] = []  # the Dropout nodes whose training mode a graph input gives

    # ------------------------------------------------------------------ helpers
    def shape(self, value: str) -> Shape | None:
        return self.types.get(value, (None, 0))[0]

    def is_float(self, value: str) -> bool:
        return self.types.get(value, (None, 0))[1] in _FLOAT_TYPES

    def nbytes(self, value: str) -> int:
        shape, elem = self.types.get(value, (None, 0))
        if shape is None:
            return 0
        size = math.ceil(math.prod(shape) * _itemsize(elem))
        if size > MAX_COUNT:
            raise UnsupportedGraph(f"{self.source}: value {value!r} of shape {_show(shape)} holds {size:.3g} bytes, "
                                   "over the limit of 2**62")
        return int(size)

    def small_value(self, value: str) -> np.ndarray | None:
        """The value of a small constant: an initializer or a ``Constant`` whose values the file holds; else ``None``.

        Only tensors of at most :data:`_KEEP_VALUES` elements held in the model are read (never external data).
        """
        tensor = self.inits.get(value)
        node = self.constants.get(value) if tensor is None else None
        for attribute in node.attribute if node is not None else ():
            if attribute.name == "value" and attribute.HasField("t"):
                tensor = attribute.t
            elif attribute.name in ("value_float", "value_int", "value_floats", "value_ints"):
                return np.asarray(onnx.helper.get_attribute_value(attribute))
        return None if tensor is None else _held_values(tensor)

    def constant_value(self, value: str, depth: int = 0) -> np.ndarray | None:
        """The value of a small constant, or of one that standard ops compute from constants alone; else ``None``.

        A constant is read by :meth:`small_value`; a value computed from constants alone (``Not`` of a ``Constant``,
        a ``Cast`` of one) is computed as ONNX would evaluate it. Only :data:`_CONSTANT_OPS` nodes are computed (by
        ONNX's reference evaluator), on inputs of at most :data:`_KEEP_VALUES` elements each, and results of at most
        as many; a chain deeper than 16 nodes is not. Each value is computed once at each depth (:attr:`_computed`):
        a chain of ``Max`` nodes each reading the one before four times was computed ``4 ** depth`` times.
        """
        key = (value, depth)
        if key not in self._computed:
            self._computed[key] = self._compute_constant(value, depth)
        return self._computed[key]

    def _compute_constant(self, value: str, depth: int) -> np.ndarray | None:
        """:meth:`constant_value` of ``value`` reached ``depth`` nodes down a chain, not looked up."""
        held = self.small_value(value)
        if held is not None or depth >= 16 or value in self.inits or value in self.constants:
            return held
        node = self._producer.get(value)
        if node is None or node.domain not in ("", "ai.onnx") or node.op_type not in _CONSTANT_OPS \
                or node.output[0] != value or _external_value(node):
            return None
        feeds = {}
        for x in node.input:
            if x:
                known = self.constant_value(x, depth + 1)
                if known is None:
                    return None
                feeds[x] = known
        if _result_size(node, feeds) > _KEEP_VALUES:
            return None
        try:
            result = _evaluate(node, feeds, {"": self.opset})
        except Exception:  # noqa: BLE001 - a node the evaluator cannot compute: not known
            return None
        return result if result.size <= _KEEP_VALUES else None

    def training_dropout(self, node: onnx.NodeProto, fed: Container[str] = ()) -> bool:
        """Whether a ``Dropout`` node drops elements: in training mode, its ``ratio`` not 0.

        Since opset 12 ``training_mode`` (input 2) is false by default, and ``ratio`` (input 1) 0.5; either computed
        from constants alone (``Not`` of a ``Constant``, a ``Cast`` of one) is read as ONNX evaluates it
        (:meth:`constant_value`); a ratio computed from the graph's inputs, or given as one, is taken for not 0. A
        ``training_mode`` that is no constant but ``fed`` (a graph input, or computed from one: a file made to switch
        between training and evaluation) is taken as true, the mode of the training step gnplace builds, and the
        node is named in :attr:`fed_modes` (for a warning). In opsets 7 to 11 Dropout has no training mode (ONNX's
        version converter turns only ``is_test=1`` into them, and its reference runs them as the identity): a view,
        as an inference-mode one. Before opset 7 its ``is_test`` attribute is 0 by default: a training dropout but
        for ``is_test=1`` or a ``ratio`` attribute of 0.
        """
        if self.opset < 7:
            attrs = _attributes(node)
            return not int(attrs.get("is_test", 0)) and float(attrs.get("ratio", 0.5)) != 0.0
        if len(node.input) < 3 or not node.input[2]:
            return False
        mode = self.constant_value(node.input[2])
        if mode is None and node.input[2] in fed and node.input[2] not in self.constants:
            self.fed_modes.append(node.name or node.op_type)
            mode = np.asarray(True)
        if mode is None or mode.size != 1 or not bool(mode.reshape(-1)[0]):
            return False
        ratio = self.constant_value(node.input[1]) if node.input[1] else np.asarray(0.5)
        return ratio is None or ratio.size != 1 or float(ratio.reshape(-1)[0]) != 0.0

    def mask_bytes(self, node: onnx.NodeProto) -> int:
        """Bytes of the mask a training ``Dropout`` keeps for its gradient, named as its second output or not.

        ONNX's mask is bool: a byte per element of the output.
        """
        return math.ceil(math.prod(self.shape(node.output[0]) or ()))

    def new_group(self) -> int:
        self._groups += 1
        return self._groups - 1

    def add_node(self, label: str, kind: str, phase: int, flops: float, out_bytes: int, group: int, module: str,
                 param_bytes: int = 0, op_kind: str | None = None) -> int:
        unique, count = label, self._counters.get(label, 0)
        while unique in self._used:
            count += 1
            unique = f"{label}_{count}"
        self._counters[label] = count
        self._used.add(unique)
        self.names.append(unique)
        self.op_types.append(kind)
        self.op_kinds.append(op_kind if op_kind is not None else canonical_kind(kind, phase))
        self.phase.append(phase)
        self.flops.append(float(flops))
        self.out_bytes.append(int(out_bytes))
        self.param_bytes.append(int(param_bytes))
        self.group.append(group)
        self.module.append(module)
        return len(self.names) - 1

    def edge(self, u: int, v: int, nbytes: int) -> None:
        if u != v:
            self.edges[(u, v)] = max(self.edges.get((u, v), 0), min(int(nbytes), self.out_bytes[u]))

    # ------------------------------------------------------------------ passes
    def _needed(self) -> list[bool]:
        producer = {out: i for i, n in enumerate(self.nodes) for out in n.output if out}
        needed = [False] * len(self.nodes)
        stack = [producer[o.name] for o in self.proto.graph.output if o.name in producer]
        while stack:
            i = stack.pop()
            if needed[i]:
                continue
            needed[i] = True
            stack.extend(producer[x] for x in self.nodes[i].input if x in producer and not needed[producer[x]])
        return needed

    def _trainable(self, needed: list[bool]) -> set[str]:
        return self._weights(needed) - self.frozen

    def _weights(self, needed: list[bool]) -> set[str]:
        if self.trainable_override is not None:
            return set(self.trainable_override)
        found: set[str] = set()
        no_weight = self._no_weight_reads()
        for i, node in enumerate(self.nodes):
            if not needed[i]:
                continue
            kind = canonical_op_type(node.op_type, node.domain)
            if kind in STATIC_OPS:
                continue
            skip = NON_DIFFERENTIABLE.get(kind, frozenset()) | _STATE_INPUTS.get(kind, frozenset())
            for pos, x in enumerate(node.input):
                init = self.inits.get(x)
                if init is None or pos in skip or init.data_type not in _FLOAT_TYPES or x in self.made:
                    continue
                if x in self.alias or x in self.parameter_of:  # folded from a parameter: its gradient is one
                    found.add(self.alias.get(x, x))
                elif (i, pos) not in no_weight and math.prod(init.dims) >= 2:
                    found.add(x)
        return found

    def _warn_folded_parameters(self, trainable: set[str]) -> None:
        """Warn once about parameters the exporter folded into constants that may hold only a part of them."""
        folds: dict[str, list[str]] = {}
        for x, parameter in sorted(self.parameter_of.items()):
            if x in trainable:
                folds.setdefault(parameter, []).append(x)
        partial = {p: xs for p, xs in folds.items()
                   if (len(xs) > 1 or any(self.folded_with_others(x) for x in xs)) and not self._read_by_torch_nn(xs)}
        if not partial:
            return
        listed = "; ".join(f"{p!r} into {', '.join(f'{x} {list(self.shape(x) or ())}' for x in xs)}"
                           for p, xs in partial.items())
        warnings.warn(
            f"{self.source}: the exporter folded parameters into constants computed with other values, which may "
            f"hold only a part of each (a slice); the file no longer holds the parameters, so their bytes and "
            f"gradients are counted at the constants' sizes: {listed} (export with torch.onnx.export(..., "
            "optimize=False) to count each parameter whole)",
            stacklevel=4,
        )

    def _read_by_torch_nn(self, values: Sequence[str]) -> bool:
        """Whether every reader of ``values`` runs in a ``torch.nn`` module's own forward (the export's class scopes).

        Those modules read their parameters whole (``GroupNorm`` reshapes its weight; ``MultiheadAttention`` splits
        its input projection into three, which together are the whole): a fold there loses no byte. A slice that
        may lose some is the model's own code (``self.pos[:, :7]``).
        """
        wanted = set(values)
        readers = [n for n in self.nodes if wanted & set(n.input)]
        return bool(readers) and all(_innermost_class(n).startswith("torch.nn.modules.") for n in readers)

    def folded_with_others(self, value: str) -> bool:
        """Whether the exporter folded ``value`` from other values besides one parameter (a slice, a reshape)."""
        return len(self.folded_from.get(value, ())) > 1

    def _no_weight_reads(self) -> set[tuple[int, int]]:
        """The (node, input position) reads of initializers that hold no weight though a gradient flows there.

        With the signature torch.export records (``pkg.torch.export.ExportedProgram.graph_signature``),
        an initializer it names as a parameter is read as a weight and one it names as a buffer or a
        constant is not. The initializers the exporter made (constants it folded, named by neither) are
        no weights where they are read:

        * by a node of a module that owns no parameter (a ``LayerNorm``, ``InstanceNorm`` or
          ``GroupNorm`` without affine weights gets a unit scale and a zero bias);
        * as the scale or bias of an ``InstanceNormalization`` over groups (its data is a view that
          changed the channel size, or the rank): ``GroupNorm``'s export, whose own weights follow as ``Mul``,
          ``Add``;
        * by ``Add``, ``Sub``, ``Mul`` or ``Div`` as large as the output (not broadcast over the batch,
          as a weight is) while holding a broadcast copy (its values repeat along an axis): a folded
          activation, such as an ``RNN``'s first step from its zero state (the hidden bias, once per
          example). Only the values of small initializers are kept: a large one stays a weight.
        """
        signature = _exported_tensors(self.proto)
        if signature is None:
            return set()
        parameters, others = signature
        owners = {p.rsplit(".", 1)[0] if "." in p else "" for p in parameters}
        producer = {out: i for i, n in enumerate(self.nodes) for out in n.output if out}
        reads: set[tuple[int, int]] = set()
        for i, node in enumerate(self.nodes):
            kind = canonical_op_type(node.op_type, node.domain)
            scoped = any(prop.key == "pkg.torch.onnx.name_scopes" for prop in node.metadata_props)
            for pos, x in enumerate(node.input):
                if x not in self.inits or x in parameters:
                    continue
                if x in others:
                    reads.add((i, pos))
                elif scoped and _module_of(node) not in owners:
                    reads.add((i, pos))
                elif kind == "InstanceNormalization" and pos in (1, 2) and self._regrouped(node.input[0], producer):
                    reads.add((i, pos))
                elif kind in ("Add", "Sub", "Mul", "Div") and node.output and self.shape(node.output[0]) is not None \
                        and math.prod(self.inits[x].dims) >= math.prod(self.shape(node.output[0]) or ()) > 1 \
                        and _repeats(self.inits[x]):
                    reads.add((i, pos))
        return reads

    def _regrouped(self, value: str, producer: Mapping[str, int]) -> bool:
        """Whether ``value`` is a view (through view ops) of a value of another shape.

        ``GroupNorm``'s export reshapes ``[N, C, *spatial]`` to ``[N, G, -1]``: the size in dimension 1 changes,
        or, with as many groups as channels, the rank (a 2-d or 3-d input).
        """
        shape = self.shape(value)
        seen = 0
        while value in producer and seen < len(self.nodes):
            node = self.nodes[producer[value]]
            if canonical_op_type(node.op_type, node.domain) not in VIEW_OPS or not node.input:
                return False
            value, seen = node.input[0], seen + 1
            before = self.shape(value)
            if shape is not None and before is not None and len(shape) > 1 and len(before) > 1 \
                    and (before[1] != shape[1] or len(before) != len(shape)):
                return True
        return False

    def build(self, graph_name: str, meta: dict[str, Any]) -> OpGraph:
        """The training graph, its trainable parameters those a gradient reaches.

        A default weight no gradient reaches (a quantization scale read by ``QuantizeLinear`` alone, a weight
        whose only path to the outputs is an integer tensor that no ``DequantizeLinear`` reads) is no parameter:
        it is read as a constant, as one ``--frozen`` names, and gets no update op (one holding its bytes and
        optimizer state, fed by nothing).
        """
        needed = self._needed()
        trainable = self._trainable(needed)
        while True:
            try:
                graph = self._build_step(graph_name, meta, needed, trainable)
                break
            except _NoGradient as ungraded:  # built again without them, as constants (each pass drops one or more)
                trainable -= ungraded.parameters
                self._reset()
        self._warn_folded_parameters(trainable)
        if self.fed_modes:
            shown = ", ".join(repr(n) for n in self.fed_modes[:5]) + (", ..." if len(self.fed_modes) > 5 else "")
            warnings.warn(f"{self.source}: {len(self.fed_modes)} Dropout nodes ({shown}) take training_mode from the "
                          "graph's inputs: read as training mode, that of the training step gnplace builds (export "
                          "the model with the mode a constant for another)", stacklevel=3)
        if not trainable:  # the torch importer refuses such a model; a forward pass alone may still be worth placing
            warnings.warn(f"{self.source}: no initializer is trained (none is a float weight of two elements or more "
                          "that a gradient reaches, or --frozen names them all): the graph holds the forward pass "
                          "alone, with no backward pass or updates", stacklevel=3)
        return graph

    def _build_step(self, graph_name: str, meta: dict[str, Any], needed: list[bool], trainable: set[str]) -> OpGraph:
        """The training graph with ``trainable`` as its parameters.

        Raises:
            _NoGradient: naming the default parameters no gradient reaches (never one ``trainable`` names).
        """
        graph_inputs = {vi.name for vi in self.proto.graph.input if vi.name not in self.inits}
        # where each value comes from: ("node", node index, producing value), ("param", name),
        # ("input", name); absent = a constant
        ref: dict[str, tuple[str, int, str]] = {}
        for x in graph_inputs:
            ref[x] = ("input", -1, x)
        for x in trainable:
            ref[x] = ("param", -1, x)
        requires_grad: dict[str, bool] = {x: True for x in trainable}
        for x, parameter in self.alias.items():  # a folded copy of a parameter (a tied weight's transpose)
            if parameter in trainable and x not in trainable and x not in self.frozen:
                ref[x] = ("param", -1, parameter)
                requires_grad[x] = True
        input_node: dict[str, int] = {}
        # fake quantization: a QuantizeLinear node of a float input a gradient reaches -> that input; a
        # DequantizeLinear node of its integers -> the QuantizeLinear node (their straight-through gradient)
        quantizes: dict[int, str] = {}
        fake_quant: dict[int, int] = {}
        masked: set[int] = set()  # the QuantizeLinear nodes that keep a mask for the gradient
        param_users: dict[str, list[int]] = {}
        forward: list[tuple[int, onnx.NodeProto, str, dict[str, Any]]] = []  # (node id, proto, kind, attrs)
        # a Split's output (or a view of one) a gradient reaches -> the key its gradients gather under, apart from
        # the other parts': they are concatenated, not summed (a Split is listed in ``forward`` with node id -1, and
        # its parts by position in its attributes' "parts"); the same for a SplitToSequence's tensors that SequenceAt
        # reads at a constant position, as torch.onnx's dynamo exporter writes torch's split
        parts: dict[str, tuple[str, int, str]] = {}
        sequences: dict[str, tuple[int, dict[int, str]]] = {}  # a sequence -> (its SplitToSequence, its parts)
        unknown: set[str] = set()
        for i in self.order:
            node = self.nodes[i]
            if not needed[i]:
                continue
            kind = canonical_op_type(node.op_type, node.domain)
            type_only = TYPE_ONLY_INPUTS.get(kind, frozenset())
            ins = [x for pos, x in enumerate(node.input) if x and pos not in type_only]
            if kind in STATIC_OPS or all(x not in ref for x in ins):
                continue  # a constant: computed once, before the step
            dropping = kind == "Dropout" and self.training_dropout(node, ref)
            if kind in VIEW_OPS and not dropping:
                data = node.input[0] if node.input else ""
                if data not in ref:
                    continue
                self._check_same_numel(node, kind)
                for out in node.output:
                    if out:
                        ref[out] = ref[data]
                        # a sequence (SplitToSequence) has no tensor type: it inherits its data's
                        requires_grad[out] = requires_grad.get(data, False) and (
                            self.is_float(out) or self.types.get(out, (None, 0))[1] == 0)
                        at = self._sequence_position(node, sequences) if requires_grad[out] else None
                        if kind == "Split" and requires_grad[out]:
                            parts[out] = ("part", i, out)
                        elif at is not None:  # a SplitToSequence's tensor: a part of its data, as a Split's
                            split, members = sequences[data]
                            parts[out] = ("part", split, f"{data}[{at}]")
                            members.setdefault(at, out)
                        elif data in parts:
                            parts[out] = parts[data]
                if kind == "Split" and any(out in parts for out in node.output):
                    forward.append((-1, node, kind, {"parts": {k: out for k, out in enumerate(node.output)
                                                               if out in parts}}))
                if kind == "SplitToSequence" and requires_grad.get(node.output[0], False):
                    sequences[node.output[0]] = (i, {})  # its parts, as SequenceAt nodes read them
                    forward.append((-1, node, kind, {"parts": sequences[node.output[0]][1]}))
                continue
            for x in ins:
                if self.shape(x) is None and x in ref:
                    raise self._no_shape(x)
            for out in node.output:
                if out and out in self.read and self.shape(out) is None:
                    raise self._no_shape(out, node)
            attrs = _attributes(node)
            out_bytes = sum(self.nbytes(o) for o in node.output if o)
            if dropping:  # its output, and the mask it keeps for the backward (counted once, named or not)
                attrs["training_mode"] = 1
                out_bytes = self.nbytes(node.output[0]) + self.mask_bytes(node)
            in_shapes = [self.shape(x) if x else None for x in node.input]
            out_shapes = [self.shape(x) if x else None for x in node.output]
            _check_inner_sizes(kind, attrs, in_shapes, node.name or node.op_type, self.source)
            if kind == "DFT" and "axis" not in attrs:  # opset 20 made the axis an input (default -2)
                attrs["axis"] = self._dft_axis(node)
            fl = forward_flops(kind, attrs, in_shapes, out_shapes)
            if fl is None:
                standard = node.domain in ("", "ai.onnx")
                if not self.allow_unknown_ops and (not standard or not onnx.defs.has(node.op_type)):
                    what = f"has op type {node.op_type!r}, which ONNX does not define" if standard else \
                        f"is {kind}, an op of a custom domain that gnplace has no FLOP rule for"
                    raise UnsupportedGraph(
                        f"{self.source}: node {node.name or node.op_type!r} {what} (`gnplace import "
                        "--allow-unknown-ops` counts it at 1 FLOP per output element, and the graph file it "
                        "writes places like any other)"
                    )
                unknown.add(kind)
                fl = float(sum(math.prod(s) for s in out_shapes if s is not None))
            label = node.name or f"{node.op_type}_{i}"
            lookup = kind in _LOOKUPS and bool(node.input) and ref.get(node.input[0], ("",))[0] == "param"
            v = self.add_node(label, kind, FORWARD, fl, out_bytes, self.new_group(), _module_of(node),
                              op_kind="embedding" if lookup else None)
            forward.append((v, node, kind, attrs))
            skip = NON_DIFFERENTIABLE.get(kind, frozenset())
            grad_in = any(requires_grad.get(x, False) for pos, x in enumerate(node.input) if x and pos not in skip)
            for out in node.output:
                if out:
                    ref[out] = ("node", v, out)
                    requires_grad[out] = grad_in and self.is_float(out)
            if kind == "QuantizeLinear" and node.input and requires_grad.get(node.input[0], False):
                quantizes[v] = node.input[0]
            if kind == "DequantizeLinear" and self._fake_quantized(node, ref, quantizes, fake_quant, masked, v):
                requires_grad[node.output[0]] = self.is_float(node.output[0])
            for x in ins:
                if x not in ref:
                    continue
                where, u, value = ref[x]
                if where == "node":
                    self.edge(u, v, self.nbytes(value))
                elif where == "input":
                    if value not in input_node:
                        input_node[value] = self.add_node(f"input/{value}", "input", FORWARD, 0.0, self.nbytes(value),
                                                          self.group[v], "")
                    self.edge(input_node[value], v, self.nbytes(value))
                elif v not in param_users.setdefault(value, []):
                    param_users[value].append(v)
        # ---- the loss: the outputs that depend on parameters
        outputs = list(dict.fromkeys(  # (a value the graph lists twice is one output: counted once)
            o.name for o in self.proto.graph.output
            if requires_grad.get(o.name, False) and ref.get(o.name, ("",))[0] == "node"
        ))
        for o in outputs:  # (a view's output, a Reshape to a shape the model is given, is checked nowhere else:
            if self.shape(o) is None:  # its unknown shape was read as a scalar, the loss, and the graph had none)
                raise self._no_shape(o)
        seeded: set[int] = set()
        contributions: dict[tuple[str, int, str], list[int]] = {}
        if len(outputs) == 1 and math.prod(self.shape(outputs[0]) or ()) == 1:
            seeded.add(ref[outputs[0]][1])  # the model returns its loss
        elif outputs:
            loss = self.add_node("loss", "loss", FORWARD, sum(math.prod(self.shape(o) or ()) for o in outputs), 4,
                                 self.new_group(), "")
            for o in outputs:
                _, u, value = ref[o]
                self.edge(u, loss, self.nbytes(value))
                g = self.add_node(f"grad/loss/{o}", "loss_grad", BACKWARD, math.prod(self.shape(o) or ()),
                                  self.nbytes(o), self.group[loss], "")
                self.edge(loss, g, 4)
                contributions.setdefault(parts.get(o, ref[o]), []).append(g)
        # ---- read ops for parameters used in several groups
        home = {p: self.group[users[0]] for p, users in param_users.items()}
        read_node: dict[str, int] = {}

        def param_source(p: str, consumer: int) -> None:
            if self.group[consumer] == home[p]:
                return
            if p not in read_node:
                read_node[p] = self.add_node(f"read/{p}", "read", FORWARD, 0.0, self.nbytes(p), home[p],
                                             self.module[param_users[p][0]])
            self.edge(read_node[p], consumer, self.nbytes(p))

        for p, users in param_users.items():
            for v in users:
                param_source(p, v)
        # ---- backward, in reverse topological order of the forward ops
        for v, node, kind, attrs in reversed(forward):
            if v < 0:  # a Split or SplitToSequence: the gradients of its parts, concatenated
                self._concatenated(node, attrs["parts"], ref, parts, contributions, param_users)
                continue
            sources = []
            for out in node.output:
                key = ("node", v, out)
                if out and key in contributions:
                    sources.append(self._summed(contributions.pop(key), out, self.group[v], self.module[v]))
            if not sources and v not in seeded:
                continue  # no gradient reaches this op
            if v in fake_quant:  # the straight-through estimator, to QuantizeLinear's float input
                self._straight_through(fake_quant[v], quantizes[fake_quant[v]], sources, ref, parts, contributions)
                continue
            skip = NON_DIFFERENTIABLE.get(kind, frozenset())
            in_shapes = [self.shape(x) if x else None for x in node.input]
            out_shapes = [self.shape(x) if x else None for x in node.output]
            positions: dict[str, list[int]] = {}
            for pos, x in enumerate(node.input):
                if x and pos not in skip and requires_grad.get(x, False):
                    positions.setdefault(x, []).append(pos)
            # back-propagation through time runs once whichever gradients are taken: charged to the first
            shared = shared_grad_flops(kind, attrs, in_shapes)
            # (input it is named for, the slots it is taken for, the inputs it gives the gradient of)
            units = [(x, slots, [x]) for x, slots in positions.items()]
            if kind in FUSED_NORM_GRADS and len(units) > 1:  # aten's native_*_norm_backward: one op, every gradient
                units = [(units[0][0], [pos for _, slots, _ in units for pos in slots], [x for _, _, (x,) in units])]
            for x, slots, targets in units:
                fl = sum(grad_flops(kind, attrs, in_shapes, out_shapes, pos, self.flops[v]) for pos in slots) + shared
                shared = 0.0
                if (kind in PASS_THROUGH_GRADS and len(slots) == 1 and fl == 0.0 and len(sources) == 1
                        and self.out_bytes[sources[0]] == self.nbytes(x)):
                    # the gradient is the output's own (an Add of equal shapes): no op, as aten runs none
                    contributions.setdefault(parts.get(x, ref[x]), []).append(sources[0])
                    continue
                g = self.add_node(f"grad/{self.names[v]}/{x}", f"{kind}_grad", BACKWARD, fl,
                                  sum(self.nbytes(t) for t in targets), self.group[v], self.module[v],
                                  op_kind="embedding_grad" if self.op_kinds[v] == "embedding" else None)
                for s in sources:
                    self.edge(s, g, self.out_bytes[s])
                saved = []
                if kind in FUSED_NORM_GRADS:  # dX reads X and the scale, dscale X, dbias neither (nor the output)
                    saved += [node.input[0]] if {0, 1} & set(slots) else []
                    saved += [node.input[1]] if 0 in slots and len(node.input) > 1 and node.input[1] else []
                elif kind in BIAS_SLOT and slots == [BIAS_SLOT[kind]]:
                    pass  # a bias's gradient sums the output's gradient alone
                else:
                    if kind in SAVES_OTHER_INPUTS or kind not in _KNOWN_SAVES:  # by position: Mul(h, h) reads h
                        saved += list(dict.fromkeys(z for pos in slots for q, z in enumerate(node.input)
                                                    if z and q != pos))
                    if kind in SAVES_OWN_INPUT or kind not in _KNOWN_SAVES:
                        saved.append(x)
                for z in dict.fromkeys(saved):
                    if z not in ref:
                        continue
                    where_z, u, value = ref[z]
                    if where_z == "node":
                        self.edge(u, g, self.nbytes(value))
                    elif where_z == "input":
                        self.edge(input_node[value], g, self.nbytes(value))
                    else:
                        param_source(value, g)
                if (kind in SAVES_OUTPUT or kind not in _KNOWN_SAVES) and kind not in FUSED_NORM_GRADS:
                    self.edge(v, g, self.out_bytes[v])
                if kind in SAVES_MASK:  # the mask the forward op kept, not its output
                    self.edge(v, g, self.mask_bytes(node))
                for t in targets:
                    contributions.setdefault(parts.get(t, ref[t]), []).append(g)
        # ---- one update op per trainable parameter, in the group of its first reader
        if param_users and not outputs and not seeded:  # (ArgMax or Shape of the outputs: an update of no gradient)
            raise UnsupportedGraph(f"{self.source}: no output of the model depends on a trainable parameter through "
                                   "differentiable ops: a training step has no gradient to compute")
        if self.trainable_override is not None:
            unread = sorted(self.trainable_override - self.frozen - set(param_users))
            if unread:  # dropped without a word
                raise InvalidArgument(f"{self.source}: trainable names {unread[0]!r}, which no op of the model reads "
                                      "where a gradient can reach it")
        ungraded = {p for p in param_users if ("param", -1, p) not in contributions}
        if self.trainable_override is None and ungraded:
            raise _NoGradient(ungraded)
        for p in sorted(param_users, key=lambda p: param_users[p][0]):
            pbytes = self.nbytes(p)
            module = self._param_module(p, param_users[p])
            grads = contributions.pop(("param", -1, p), [])
            source = self._summed(grads, p, home[p], module) if grads else None
            if source is None and self.trainable_override is not None and p in self.trainable_override:
                raise InvalidArgument(f"{self.source}: trainable names {p!r}, which no gradient reaches (it reaches "
                                      "the outputs only through non-differentiable inputs of ops)")
            numel = math.prod(self.shape(p) or ())
            up = self.add_node(f"update/{p}", f"{self.optimizer}_update", UPDATE, self.update_flops * numel, 0,
                               home[p], module, param_bytes=pbytes * self.state_factor)
            if source is not None:
                self.edge(source, up, pbytes)
        if unknown:
            warnings.warn(
                f"{self.source}: FLOP rules do not know {len(unknown)} op types, counted at 1 FLOP per output "
                f"element: {', '.join(sorted(unknown))}",
                stacklevel=4,
            )
        pairs = sorted(self.edges)
        return OpGraph(
            self.names, pairs, flops=self.flops, out_bytes=self.out_bytes, param_bytes=self.param_bytes,
            edge_bytes=[self.edges[p] for p in pairs], op_types=self.op_types, phase=self.phase, group=self.group,
            module=self.module, name=graph_name, meta=meta, op_kinds=self.op_kinds,
        )

    def _dft_axis(self, node: onnx.NodeProto) -> int:
        """The axis of a ``DFT`` without an ``axis`` attribute (opset 17's default, 1, before opset 20).

        From opset 20 on, its constant ``axis`` input; -2 without one, or where it is not a constant.
        """
        opset = max((o.version for o in self.proto.opset_import if o.domain in ("", "ai.onnx")), default=0)
        if opset < 20:
            return 1
        value = self.constant_value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        return int(value.reshape(-1)[0]) if value is not None and value.size == 1 else -2

    def _fake_quantized(self, node: onnx.NodeProto, ref: Mapping[str, tuple[str, int, str]],
                        quantizes: Mapping[int, str], fake_quant: dict[int, int], masked: set[int], v: int) -> bool:
        """Whether ``DequantizeLinear`` node ``v`` undoes a ``QuantizeLinear`` of a float a gradient reaches.

        That is, it reads (directly or through views) the integers of such a node: a fake quantization, as
        ``torch.onnx.export`` writes torch's ``fake_quantize_per_tensor_affine`` (or ``_per_channel_affine``). If
        so, it is noted in ``fake_quant``, and the ``QuantizeLinear`` node (noted in ``masked``) holds the mask its
        gradient reads (once, however many nodes dequantize it), as aten's ``fake_quantize_*_cachemask`` does: a
        bool per element of its input.
        """
        data = ref.get(node.input[0]) if node.input and node.output and node.output[0] else None
        if data is None or data[0] != "node" or data[1] not in quantizes:
            return False
        u = data[1]
        if u not in masked:
            masked.add(u)
            self.out_bytes[u] += math.prod(self.shape(quantizes[u]) or ())
        fake_quant[v] = u
        return True

    def _straight_through(self, u: int, x: str, sources: Sequence[int], ref: Mapping[str, tuple[str, int, str]],
                          parts: Mapping[str, tuple[str, int, str]],
                          contributions: dict[tuple[str, int, str], list[int]]) -> None:
        """The gradient of fake quantization (``QuantizeLinear`` node ``u`` of ``x``, then ``DequantizeLinear``).

        As aten's ``fake_quantize_per_tensor_affine_cachemask_backward``: the straight-through estimator, the
        output's gradient passed to ``x`` where ``x`` was inside the quantization range (1 FLOP per element of
        ``x``, a select), reading that gradient and the mask ``u`` holds (a byte per element). One op in the group
        of the ``QuantizeLinear`` node, named for its input, whatever ``DequantizeLinear`` read the integers.
        """
        numel = math.prod(self.shape(x) or ())
        g = self.add_node(f"grad/{self.names[u]}/{x}", "QuantizeLinear_grad", BACKWARD, numel, self.nbytes(x),
                          self.group[u], self.module[u], op_kind="elementwise_grad")
        for s in sources:
            self.edge(s, g, self.out_bytes[s])
        self.edge(u, g, numel)
        contributions.setdefault(parts.get(x, ref[x]), []).append(g)

    def _concatenated(self, node: onnx.NodeProto, members: Mapping[int, str], ref: Mapping[str, tuple[str, int, str]],
                      parts: Mapping[str, tuple[str, int, str]], contributions: dict[tuple[str, int, str], list[int]],
                      param_users: Mapping[str, Sequence[int]]) -> None:
        """The gradient of a ``Split`` or ``SplitToSequence``: its parts' gradients concatenated into its data's.

        ``members`` names each part a gradient may reach by its position (a ``Split``'s output; the first ``SequenceAt``
        output of a ``SplitToSequence``'s tensor). Each part's gradient is summed first if several ops read that part;
        then they are concatenated, as aten's split backward does (a ``cat``, zeros for a part no gradient reaches):
        data movement, 0 FLOP, one ``Split_grad`` op holding the data's bytes, in the group of the data's producer
        (the home group of a split parameter). Summing the parts (``grad_sum``) counted (parts - 1) FLOP per element
        of the data.
        """
        data = node.input[0]
        where, u, value = ref[data]
        if where == "node":
            group, module = self.group[u], self.module[u]
        else:  # a split parameter (a packed weight): its update's group and module
            group, module = self.group[param_users[value][0]], self._param_module(value, param_users[value])
        pieces = []
        for _, out in sorted(members.items()):
            if parts[out] in contributions:
                pieces.append(self._summed(contributions.pop(parts[out]), out, group, module))
        if not pieces:
            return
        g = self.add_node(f"grad/{node.name or node.op_type}/{data}", "Split_grad", BACKWARD, 0.0, self.nbytes(data),
                          group, module)
        for s in pieces:
            self.edge(s, g, self.out_bytes[s])
        contributions.setdefault(parts.get(data, ref[data]), []).append(g)

    def _sequence_position(self, node: onnx.NodeProto, sequences: Mapping[str, tuple[int, Any]]) -> int | None:
        """The position (from 0) of the tensor a ``SequenceAt`` node reads of a ``SplitToSequence``'s sequence.

        ``None`` for any other node, a sequence not in ``sequences``, or a position that is no constant (or outside
        the sequence, or negative where the sequence's length is not known).
        """
        if node.op_type != "SequenceAt" or len(node.input) < 2 or node.input[0] not in sequences:
            return None
        position = self.constant_value(node.input[1])
        if position is None or position.size != 1 or position.dtype.kind not in "iu":
            return None
        at = int(position.reshape(()))
        count = self._sequence_length(self.nodes[sequences[node.input[0]][0]])
        if count is None:
            return at if at >= 0 else None
        at += count if at < 0 else 0
        return at if 0 <= at < count else None

    def _sequence_length(self, node: onnx.NodeProto) -> int | None:
        """How many tensors a ``SplitToSequence`` node yields: ``None`` if its data's shape or its split is unknown."""
        shape = self.shape(node.input[0])
        axis = int(_attributes(node).get("axis", 0))
        if shape is None or not -len(shape) <= axis < len(shape):
            return None
        size = shape[axis]
        if len(node.input) < 2 or not node.input[1]:
            return size  # one tensor per index along the axis
        split = self.constant_value(node.input[1])
        if split is None or split.dtype.kind not in "iu":
            return None
        if split.ndim == 0:  # chunks of that size, the last one smaller
            return -(-size // int(split)) if int(split) > 0 else None
        return int(split.size)

    def _param_module(self, p: str, users: Sequence[int]) -> str:
        """The module of parameter ``p``'s update: its name's (``layer.weight``: ``layer``), else its first reader's.

        ``users`` are the forward ops that read it, in order.
        """
        return p.rsplit(".", 1)[0] if "." in p else self.module[users[0]]

    def _check_same_numel(self, node: onnx.NodeProto, kind: str) -> None:
        """Refuse a view op whose output does not hold as many elements as its data input.

        ONNX shape inference does not check that ``Reshape`` keeps the element count: a legacy
        export's shape constant that holds the traced sequence length gives the wrong sizes at any
        other input shape (the model itself cannot run there).

        Raises:
            InvalidGraph: naming the node and both shapes.
        """
        if kind not in _SAME_NUMEL_VIEWS or not node.input or not node.output or not node.output[0]:
            return
        before, after = self.shape(node.input[0]), self.shape(node.output[0])
        if before is None or after is None or math.prod(before) == math.prod(after):
            return
        raise InvalidGraph(
            f"{self.source}: node {node.name or node.op_type!r} ({node.op_type}) turns shape {list(before)} "
            f"({math.prod(before)} elements) into {list(after)} ({math.prod(after)} elements), so the model cannot "
            f"run at these sizes: a size was baked in by the exporter (re-export the model at this input shape)"
        )

    def _summed(self, grads: list[int], value: str, group: int, module: str) -> int:
        """The one node holding the gradient of ``value``: its only contribution, or their sum."""
        if len(grads) == 1:
            return grads[0]
        numel = math.prod(self.shape(value) or ())
        s = self.add_node(f"grad_sum/{value}", "grad_sum", BACKWARD, (len(grads) - 1) * numel, self.nbytes(value),
                          group, module)
        for g in grads:
            self.edge(g, s, self.out_bytes[g])
        return s

    def _no_shape(self, value: str, node: onnx.NodeProto | None = None) -> UnsupportedGraph:
        if node is None:
            producer = next((n for n in self.nodes if value in n.output), None)
            node = producer
        what = (
            f"output {value!r} of node {node.name or node.op_type!r} ({node.op_type})" if node else f"value {value!r}"
        )
        if node is not None and not _has_schema(node):
            why = f"ONNX has no shape inference for op {node.op_type!r} of domain {node.domain!r} and the file " \
                  "declares no static shape for it"
        else:
            why = "the op may be data-dependent or unknown to ONNX shape inference"
        fix = "re-export the model with static shapes at these input sizes" if self.shapes_given else \
            "fix the input sizes with --input-shape NAME=DIMS, or re-export the model with static shapes"
        return UnsupportedGraph(f"{self.source}: shape inference could not find a static shape for {what}; {why} "
                                f"({fix})")


#: The graph signature torch.export records, and the tensor kinds it names.
_SIGNATURE_KEY = "pkg.torch.export.ExportedProgram.graph_signature"
_SIGNED = re.compile(r"^\s*\S+:\s*(PARAMETER|BUFFER|CONSTANT_TENSOR)\s+target=(['\"])(.*?)\2", re.MULTILINE)


def _exported_tensors(proto: onnx.ModelProto) -> tuple[set[str], set[str]] | None:
    """The parameters, and the buffers and constants, that torch.export's signature names (by their target).

    ``None`` if the file records no signature (another exporter) or one that names no tensor.
    """
    texts = [prop.value for prop in getattr(proto.graph, "metadata_props", ()) if prop.key == _SIGNATURE_KEY]
    found = [m for text in texts for m in _SIGNED.finditer(text)]
    if not found:
        return None
    parameters = {m.group(3) for m in found if m.group(1) == "PARAMETER"}
    return parameters, {m.group(3) for m in found if m.group(1) != "PARAMETER"} - parameters


#: The metadata key under which onnxscript's optimizer records the values a constant it folded was computed from.
_FOLDED_FROM_KEY = "pkg.onnxscript.optimizer.folded_from"


def _folded_sources(proto: onnx.ModelProto) -> dict[str, tuple[str, ...]]:
    """The values each constant was folded from, by name, as onnxscript's optimizer records them (else empty).

    torch.onnx's optimised export folds computations on parameters (``self.pos[:, :7]``, ``weight.T``) into new
    initializers, and names their sources in the value's metadata.
    """
    g = proto.graph
    found: dict[str, tuple[str, ...]] = {}
    for value in [*g.value_info, *g.input, *g.output, *g.initializer]:
        for prop in getattr(value, "metadata_props", ()):
            if prop.key != _FOLDED_FROM_KEY:
                continue
            sources = _literal(prop.value)  # {[1]: 2} in a shared file was a TypeError traceback
            if isinstance(sources, (list, tuple)) and all(isinstance(x, str) for x in sources):
                found[value.name] = tuple(sources)
    return found


def _fold_roles(
    proto: onnx.ModelProto, folded: Mapping[str, tuple[str, ...]], inits: set[str]
) -> tuple[dict[str, str], dict[str, str], set[str]]:
    """What each folded initializer stands for, by torch.export's signature and the folds' sources.

    Returns:
        tuple: ``alias`` (a constant folded from one parameter the file still holds, e.g. the transpose of a weight
        tied to an embedding: a read of that parameter, which gets the gradient), ``parameter_of`` (a constant
        folded from one parameter the file no longer holds: it stands for that parameter, whatever its size) and
        ``made`` (constants folded from no parameter: a norm's unit scale, never weights). All empty for a file
        without the signature or the folds' sources.
    """
    signature = _exported_tensors(proto)
    if signature is None or not folded:
        return {}, {}, set()
    parameters = signature[0]
    alias: dict[str, str] = {}
    parameter_of: dict[str, str] = {}
    made: set[str] = set()
    for x, sources in folded.items():
        if x not in inits or x in parameters:
            continue
        used = sorted({s for s in sources if s in parameters})
        if not used:
            made.add(x)
        elif len(used) == 1 and used[0] in inits:
            alias[x] = used[0]
        elif len(used) == 1:
            parameter_of[x] = used[0]
    return alias, parameter_of, made


def _held_values(tensor: TensorProto) -> np.ndarray | None:
    """The values of a small tensor the model file holds (at most :data:`_KEEP_VALUES` elements, not external data).

    ``None`` where it is larger, kept in external data, or its values cannot be read (or were dropped).
    """
    if math.prod(tensor.dims) > _KEEP_VALUES or tensor.data_location == TensorProto.EXTERNAL:
        return None
    try:
        values = numpy_helper.to_array(tensor)
    except Exception:  # noqa: BLE001 - values numpy cannot read (or dropped) tell nothing
        return None
    return values if values.size == math.prod(tensor.dims) else None


def _repeats(init: TensorProto) -> bool:
    """Whether the values of ``init`` repeat along an axis of more than one element (``False`` if not held)."""
    values = _held_values(init)
    if values is None:
        return False
    return any(size > 1 and bool(np.all(values == values.take([0], axis=axis)))
               for axis, size in enumerate(values.shape))


#: View ops whose (first) output holds exactly the elements of their data input.
_SAME_NUMEL_VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Dropout"})

#: Ops that are table look-ups (``embedding``) when they read a trainable initializer as their data.
_LOOKUPS = frozenset({"Gather"})

#: Input positions that hold a state, never a weight: the initial hidden (and cell) state of a recurrent layer.
#: A gradient flows through them, but an initializer read only there is no parameter (torch.onnx's exporter
#: stores a zero initial state so); ``trainable`` still names one to train.
_STATE_INPUTS: dict[str, frozenset[int]] = {"LSTM": frozenset({5, 6}), "GRU": frozenset({5}), "RNN": frozenset({5})}

_KNOWN_SAVES = SAVES_OTHER_INPUTS | SAVES_OWN_INPUT | SAVES_OUTPUT | SAVES_MASK | frozenset({
    "Add", "Sub", "Neg", "Sum", "Mean", "Concat", "Cast", "CastLike", "Pad", "Tile", "ReduceMean", "ReduceSum",
    "CumSum", "Resize", "Upsample", "Trilu", "ScatterND", "ScatterElements", "Scatter", "TensorScatter", "loss",
    "DFT", "AffineGrid",  # linear in their one float input: the gradient is the transposed map, reading no value
})
