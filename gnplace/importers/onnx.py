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
Reading and checking the file is :mod:`gnplace.importers.onnx_model`'s job, its static shapes
:mod:`gnplace.importers.onnx_shapes`'s, what the exporter recorded beside the graph (modules, parameters, folded
constants) :mod:`gnplace.importers.onnx_metadata`'s, which initializers are weights
:mod:`gnplace.importers.onnx_weights`', the FLOP rules :mod:`gnplace.importers.onnx_flops`'; this module builds the
training graph from them.
"""

from __future__ import annotations

import math
import os
import reprlib
import warnings
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.defs
import onnx.inliner

from gnplace.exceptions import InvalidArgument, InvalidGraph, UnknownName, UnsupportedGraph
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
from gnplace.importers.onnx_metadata import fold_roles, folded_sources, module_of
from gnplace.importers.onnx_model import (
    KEEP_VALUES,
    check_inner_sizes,
    check_static_inputs,
    evaluate_node,
    fix_input_shapes,
    has_schema,
    held_values,
    holds_external_value,
    inline_constant_branches,
    itemsize,
    load_onnx,
    read_small_external,
    refuse_control_flow,
    shape_text,
    sort_nodes,
    topological_order,
    type_dims,
    type_initializers,
    without_weights,
)
from gnplace.importers.onnx_shapes import (
    CONSTANT_OPS,
    check_declared_shapes,
    fold_shape_arithmetic,
    infer_shapes,
    result_size,
    unshaped,
)
from gnplace.importers.onnx_weights import (
    FLOAT_TYPES,
    find_weights,
    no_weight_reads,
    warn_folded_parameters,
)
from gnplace.limits import MAX_COUNT
from gnplace.opkinds import canonical_kind

__all__ = ["from_onnx", "load_onnx", "parse_input_shape"]

Shape = tuple[int, ...]




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
        optimizer (str, optional): ``"sgd"``, ``"momentum"``, ``"adam"`` or ``"adamw"`` (default: ``"sgd"``).
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
        InvalidArgument: if ``input_shapes`` is no mapping, or gives a size below 1 or no whole number, a rank or
            fixed size the model contradicts, or two sizes of one named dimension (``x [batch, 16]`` at 8,
            ``mask [batch]`` at 4).
        UnsupportedGraph: if an input has a dynamic size that ``input_shapes`` does not give (the
            message names the input), or shapes cannot be inferred.
        UnknownName: for an unknown optimizer, or ``input_shapes``, ``trainable`` or ``frozen`` naming
            no input or initializer of the model.
        InvalidArgument: also if ``model`` is no path or ``onnx.ModelProto``, ``trainable`` or ``frozen`` no
            list of names (a single name as a ``str``), ``meta`` no mapping or ``allow_unknown_ops`` no bool.

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
    for label, names in (("trainable", trainable), ("frozen", frozen)):
        if names is not None and (isinstance(names, str | bytes | Mapping) or not isinstance(names, Iterable)):
            # a str was its characters (trainable="wb": initializers 'w' and 'b'), 3 a TypeError
            raise InvalidArgument(f"from_onnx: {label} must be a list of initializer names or None, got "
                                  f"{reprlib.repr(names)}")
    if meta is not None and not isinstance(meta, Mapping):  # a list was dict()'s TypeError
        raise InvalidArgument(f"from_onnx: meta must be a mapping or None, got {reprlib.repr(meta)}")
    if not isinstance(allow_unknown_ops, bool | np.bool_):  # "no" read as true
        raise InvalidArgument(f"from_onnx: allow_unknown_ops must be true or false, got "
                              f"{reprlib.repr(allow_unknown_ops)}")
    proto = load_onnx(model)
    folder: str | None = None  # where the file's external data lies: beside it
    if isinstance(model, onnx.ModelProto):
        source = f"ONNX model {proto.graph.name!r}" if proto.graph.name else "ONNX model"
        default_name = proto.graph.name or "onnx"
    else:
        source = str(model)
        default_name = Path(model).name.removesuffix(".onnx")
        folder = os.path.dirname(os.path.abspath(model))
    folded = folded_sources(proto)  # before input_shapes drop the declared value_info that holds it
    proto = without_weights(proto, source, copy=proto is model)
    type_initializers(proto)
    if folder is not None:
        read_small_external(proto, folder, source)
    sort_nodes(proto, source)
    if input_shapes:
        fix_input_shapes(proto.graph, input_shapes, source)
    check_static_inputs(proto, source)
    inferred = infer_shapes(proto, source)
    # Shape arithmetic data propagation leaves open (torch.chunk's Shape -> Div -> Slice), until nothing more folds:
    # a layer's sizes may be known only once the layer before it is folded (swin_t exported at opset 13 takes 27
    # rounds, one shifted window after another). Each round folds or inlines a node, so it ends.
    for _ in range(len(proto.graph.node) + 1):
        if inline_constant_branches(proto, source):  # an If on a folded condition: the branch it takes
            inferred = infer_shapes(proto, source)
            continue
        branching = any(node.op_type == "If" for node in proto.graph.node)
        if not (unshaped(inferred) or branching) or not fold_shape_arithmetic(proto, inferred, folder):
            break
        inferred = infer_shapes(proto, source)
    refuse_control_flow(proto, source)  # an If whose condition did not fold
    check_declared_shapes(proto, inferred, source)
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


class _NoGradient(Exception):  # noqa: N818 - a signal inside the builder, never raised out of it
    """Default parameters that no gradient reaches: the builder builds the graph again without them."""

    def __init__(self, parameters: set[str]) -> None:
        super().__init__(", ".join(sorted(parameters)))
        self.parameters = parameters


@dataclass
class _Step:
    """What :meth:`_Builder._build_step` knows of the values of the model while it builds one training step.

    A value's source (``ref``) is ``("node", op, value)`` (an op's output), ``("param", -1, name)`` or
    ``("input", -1, name)``; a value with none is a constant. Ops are numbered as in the graph being built.
    """

    ref: dict[str, tuple[str, int, str]] = field(default_factory=dict)  # value -> its source
    requires_grad: dict[str, bool] = field(default_factory=dict)  # value -> whether a gradient flows to it
    input_node: dict[str, int] = field(default_factory=dict)  # graph input -> its ``input/`` op
    # fake quantization: a QuantizeLinear op of a float input a gradient reaches -> that input; a
    # DequantizeLinear op of its integers -> the QuantizeLinear op (their straight-through gradient)
    quantizes: dict[int, str] = field(default_factory=dict)
    fake_quant: dict[int, int] = field(default_factory=dict)
    masked: set[int] = field(default_factory=set)  # the QuantizeLinear ops that keep a mask for the gradient
    param_users: dict[str, list[int]] = field(default_factory=dict)  # parameter -> the forward ops reading it
    # (op, node, kind, attributes) of each forward op, in topological order; op -1 for a Split whose parts'
    # gradients are concatenated (its parts by position in its attributes' "parts"), or a SplitToSequence
    forward: list[tuple[int, onnx.NodeProto, str, dict[str, Any]]] = field(default_factory=list)
    # a Split's output (or a view of one) a gradient reaches -> the key its gradients gather under, apart from
    # the other parts': they are concatenated, not summed; the same for a SplitToSequence's tensors that SequenceAt
    # reads at a constant position, as torch.onnx's dynamo exporter writes torch's split
    parts: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    sequences: dict[str, tuple[int, dict[int, str]]] = field(default_factory=dict)  # sequence -> (its split, parts)
    unknown: set[str] = field(default_factory=set)  # op types of no FLOP rule, counted at 1 FLOP per element
    outputs: list[str] = field(default_factory=list)  # the graph outputs the loss reads
    seeded: set[int] = field(default_factory=set)  # the op whose output is the model's own loss
    contributions: dict[tuple[str, int, str], list[int]] = field(default_factory=dict)  # source -> its gradient ops
    home: dict[str, int] = field(default_factory=dict)  # parameter -> its group (its first reader's)
    read_node: dict[str, int] = field(default_factory=dict)  # parameter -> its ``read`` op


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
            dims = type_dims(vi.type)
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
        self.order = topological_order(self.nodes, set(self.inits) | {vi.name for vi in g.input}, source)
        self.trainable_override = set(trainable) if trainable is not None else None
        if self.trainable_override is not None:
            missing = sorted(self.trainable_override - set(self.inits))
            if missing:
                raise UnknownName(f"{source}: trainable (--trainable) names {missing[0]!r}, which is not an "
                                  "initializer of the model")
            whole = sorted(x for x in self.trainable_override if self.inits[x].data_type not in FLOAT_TYPES)
            if whole:  # an int64 tensor got a gradient and an optimizer update
                kind = onnx.TensorProto.DataType.Name(self.inits[whole[0]].data_type).lower()
                raise InvalidArgument(f"{source}: trainable (--trainable) names {whole[0]!r}, an initializer of type "
                                      f"{kind}: only floating-point tensors have gradients")
        self.frozen = set(frozen) if frozen is not None else set()
        if self.frozen - set(self.inits):
            raise UnknownName(f"{source}: frozen (--frozen) names {sorted(self.frozen - set(self.inits))[0]!r}, which "
                              "is not an initializer of the model")
        self.opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0)
        self.folded_from = dict(folded or {})
        self.alias, self.parameter_of, self.made = fold_roles(proto, self.folded_from, set(self.inits))
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
        return self.types.get(value, (None, 0))[1] in FLOAT_TYPES

    def nbytes(self, value: str) -> int:
        shape, elem = self.types.get(value, (None, 0))
        if shape is None:
            return 0
        size = math.ceil(math.prod(shape) * itemsize(elem))
        if size > MAX_COUNT:
            raise UnsupportedGraph(f"{self.source}: value {value!r} of shape {shape_text(shape)} holds {size:.3g} "
                                   "bytes, over the limit of 2**62")
        return int(size)

    def small_value(self, value: str) -> np.ndarray | None:
        """The value of a small constant: an initializer or a ``Constant`` whose values the file holds; else ``None``.

        Only tensors of at most :data:`KEEP_VALUES` elements held in the model are read (never external data).
        """
        tensor = self.inits.get(value)
        node = self.constants.get(value) if tensor is None else None
        for attribute in node.attribute if node is not None else ():
            if attribute.name == "value" and attribute.HasField("t"):
                tensor = attribute.t
            elif attribute.name in ("value_float", "value_int", "value_floats", "value_ints"):
                return np.asarray(onnx.helper.get_attribute_value(attribute))
        return None if tensor is None else held_values(tensor)

    def constant_value(self, value: str, depth: int = 0) -> np.ndarray | None:
        """The value of a small constant, or of one that standard ops compute from constants alone; else ``None``.

        A constant is read by :meth:`small_value`; a value computed from constants alone (``Not`` of a ``Constant``,
        a ``Cast`` of one) is computed as ONNX would evaluate it. Only :data:`CONSTANT_OPS` nodes are computed (by
        ONNX's reference evaluator), on inputs of at most :data:`KEEP_VALUES` elements each, and results of at most
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
        if node is None or node.domain not in ("", "ai.onnx") or node.op_type not in CONSTANT_OPS \
                or node.output[0] != value or holds_external_value(node):
            return None
        feeds = {}
        for x in node.input:
            if x:
                known = self.constant_value(x, depth + 1)
                if known is None:
                    return None
                feeds[x] = known
        if result_size(node, feeds) > KEEP_VALUES:
            return None
        try:
            result = evaluate_node(node, feeds, {"": self.opset})
        except Exception:  # noqa: BLE001 - a node the evaluator cannot compute: not known
            return None
        return result if result.size <= KEEP_VALUES else None

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
        """The initializers the step trains: the caller's ``trainable`` or the weights found, less ``frozen``."""
        if self.trainable_override is not None:
            return self.trainable_override - self.frozen
        no_weight = no_weight_reads(self.proto, self.nodes, self.inits, self.shape)
        return find_weights(self.nodes, self.inits, needed, no_weight, alias=self.alias, parameter_of=self.parameter_of,
                            made=self.made) - self.frozen

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
        warn_folded_parameters(self.source, self.nodes, self.parameter_of, self.folded_from, trainable,
                               self.shape)
        if self.fed_modes:
            shown = ", ".join(repr(n) for n in self.fed_modes[:5]) + (", ..." if len(self.fed_modes) > 5 else "")
            warnings.warn(f"{self.source}: {len(self.fed_modes)} Dropout nodes ({shown}) take training_mode from the "
                          "graph's inputs: read as training mode, that of the training step gnplace builds (export "
                          "the model with the mode a constant for another)", stacklevel=3)
        if not trainable:  # the torch importer refuses such a model; a forward pass alone may still be worth placing
            warnings.warn(f"{self.source}: no initializer is trained (none is a float weight of two elements or more "
                          "that a gradient reaches, or frozen (--frozen) names them all): the graph holds the forward "
                          "pass alone, with no backward pass or updates", stacklevel=3)
        return graph

    def _build_step(self, graph_name: str, meta: dict[str, Any], needed: list[bool], trainable: set[str]) -> OpGraph:
        """The training graph with ``trainable`` as its parameters.

        Built in the order its ops are numbered: the forward ops (:meth:`_forward_node`, in topological order), the
        loss (:meth:`_loss`), the reads of parameters shared by several groups (:meth:`_parameter_reads`), the
        gradient ops (:meth:`_backward_node`, in reverse order of the forward ops), and the updates
        (:meth:`_updates`).

        Raises:
            _NoGradient: naming the default parameters no gradient reaches (never one ``trainable`` names).
        """
        step = self._step_sources(trainable)
        for i in self.order:
            if needed[i]:
                self._forward_node(step, i)
        self._loss(step)
        self._parameter_reads(step)
        for v, node, kind, attrs in reversed(step.forward):
            self._backward_node(step, v, node, kind, attrs)
        self._updates(step)
        if step.unknown:
            warnings.warn(
                f"{self.source}: FLOP rules do not know {len(step.unknown)} op types, counted at 1 FLOP per output "
                f"element: {', '.join(sorted(step.unknown))}",
                stacklevel=4,
            )
        pairs = sorted(self.edges)
        return OpGraph(
            self.names, pairs, flops=self.flops, out_bytes=self.out_bytes, param_bytes=self.param_bytes,
            edge_bytes=[self.edges[p] for p in pairs], op_types=self.op_types, phase=self.phase, group=self.group,
            module=self.module, name=graph_name, meta=meta, op_kinds=self.op_kinds,
        )

    # ------------------------------------------------------------------ the steps of _build_step
    def _step_sources(self, trainable: set[str]) -> _Step:
        """A step's values before any op: the graph inputs, and the parameters (with their folded copies).

        A folded copy of a parameter the file still holds (a tied weight's transpose) is a read of that parameter.
        No op is added.
        """
        step = _Step()
        for x in self.proto.graph.input:
            if x.name not in self.inits:
                step.ref[x.name] = ("input", -1, x.name)
        for x in trainable:
            step.ref[x] = ("param", -1, x)
            step.requires_grad[x] = True
        for x, parameter in self.alias.items():
            if parameter in trainable and x not in trainable and x not in self.frozen:
                step.ref[x] = ("param", -1, parameter)
                step.requires_grad[x] = True
        return step

    def _forward_node(self, step: _Step, i: int) -> None:
        """Node ``i``'s part of the forward pass: nothing for a constant, a view's data for a view, else one op.

        A shape computation (inputs all constants) adds nothing; a view op (or an inference-mode ``Dropout``)
        passes its data's source on (:meth:`_forward_view`); any other node is one forward op (:meth:`_forward_op`).
        """
        node = self.nodes[i]
        kind = canonical_op_type(node.op_type, node.domain)
        type_only = TYPE_ONLY_INPUTS.get(kind, frozenset())
        ins = [x for pos, x in enumerate(node.input) if x and pos not in type_only]
        if kind in STATIC_OPS or all(x not in step.ref for x in ins):
            return  # a constant: computed once, before the step
        dropping = kind == "Dropout" and self.training_dropout(node, step.ref)
        if kind in VIEW_OPS and not dropping:
            self._forward_view(step, i, node, kind)
        else:
            self._forward_op(step, i, node, kind, ins, dropping)

    def _forward_view(self, step: _Step, i: int, node: onnx.NodeProto, kind: str) -> None:
        """A view op (node ``i``): no op; each output is its data, and a ``Split``'s parts are noted as parts.

        The parts of a ``Split`` a gradient reaches, and the tensors of a ``SplitToSequence`` that ``SequenceAt`` reads
        at a constant position, are listed in :attr:`_Step.forward` (node id -1) for their gradients' concatenation.

        Raises:
            InvalidGraph: for a view that changes the element count (:meth:`_check_same_numel`).
        """
        data = node.input[0] if node.input else ""
        if data not in step.ref:
            return
        self._check_same_numel(node, kind)
        ref, requires_grad, parts, sequences = step.ref, step.requires_grad, step.parts, step.sequences
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
            step.forward.append((-1, node, kind, {"parts": {k: out for k, out in enumerate(node.output)
                                                            if out in parts}}))
        if kind == "SplitToSequence" and requires_grad.get(node.output[0], False):
            sequences[node.output[0]] = (i, {})  # its parts, as SequenceAt nodes read them
            step.forward.append((-1, node, kind, {"parts": sequences[node.output[0]][1]}))

    def _forward_op(self, step: _Step, i: int, node: onnx.NodeProto, kind: str, ins: Sequence[str],
                    dropping: bool) -> None:
        """The forward op of node ``i``, in a group of its own: its FLOP (:meth:`_node_flops`) and output bytes.

        Its output bytes are those of its outputs; a training ``Dropout`` (``dropping``) holds its output and the mask
        it keeps (a byte per element). It is fed by the ops (and ``input/`` ops) that produce ``ins``, the inputs that
        are not read for their type alone; the parameters it reads are noted in :attr:`_Step.param_users`.

        Raises:
            UnsupportedGraph: for an input, or an output some node reads, of no static shape (or an op of no FLOP rule
                :meth:`_node_flops` refuses).
            InvalidArgument: for inner sizes the op contradicts (:func:`check_inner_sizes`).
        """
        ref, requires_grad = step.ref, step.requires_grad
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
        check_inner_sizes(kind, attrs, in_shapes, node.name or node.op_type, self.source)
        if kind == "DFT" and "axis" not in attrs:  # opset 20 made the axis an input (default -2)
            attrs["axis"] = self._dft_axis(node)
        fl = self._node_flops(node, kind, attrs, in_shapes, out_shapes, step.unknown)
        label = node.name or f"{node.op_type}_{i}"
        lookup = kind in _LOOKUPS and bool(node.input) and ref.get(node.input[0], ("",))[0] == "param"
        v = self.add_node(label, kind, FORWARD, fl, out_bytes, self.new_group(), module_of(node),
                          op_kind="embedding" if lookup else None)
        step.forward.append((v, node, kind, attrs))
        skip = NON_DIFFERENTIABLE.get(kind, frozenset())
        grad_in = any(requires_grad.get(x, False) for pos, x in enumerate(node.input) if x and pos not in skip)
        for out in node.output:
            if out:
                ref[out] = ("node", v, out)
                requires_grad[out] = grad_in and self.is_float(out)
        if kind == "QuantizeLinear" and node.input and requires_grad.get(node.input[0], False):
            step.quantizes[v] = node.input[0]
        if kind == "DequantizeLinear" and self._fake_quantized(node, ref, step.quantizes, step.fake_quant,
                                                               step.masked, v):
            requires_grad[node.output[0]] = self.is_float(node.output[0])
        self._forward_edges(step, v, ins)

    def _node_flops(self, node: onnx.NodeProto, kind: str, attrs: Mapping[str, Any], in_shapes: list[Shape | None],
                    out_shapes: list[Shape | None], unknown: set[str]) -> float:
        """FLOP of a forward op by :func:`forward_flops`; for an op type of no rule, 1 FLOP per output element.

        An op type of no rule is noted in ``unknown`` (for one warning).

        Raises:
            UnsupportedGraph: for an op of no rule that is of a custom domain, or of a type ONNX does not define,
                unless :attr:`allow_unknown_ops`.
        """
        fl = forward_flops(kind, attrs, in_shapes, out_shapes)
        if fl is not None:
            return fl
        standard = node.domain in ("", "ai.onnx")
        if not self.allow_unknown_ops and (not standard or not onnx.defs.has(node.op_type)):
            what = f"has op type {node.op_type!r}, which ONNX does not define" if standard else \
                f"is {kind}, an op of a custom domain that gnplace has no FLOP rule for"
            raise UnsupportedGraph(
                f"{self.source}: node {node.name or node.op_type!r} {what} (allow_unknown_ops=True, `gnplace "
                "import --allow-unknown-ops`, counts it at 1 FLOP per output element, and the graph it "
                "makes places like any other)"
            )
        unknown.add(kind)
        return float(sum(math.prod(s) for s in out_shapes if s is not None))

    def _forward_edges(self, step: _Step, v: int, ins: Sequence[str]) -> None:
        """The edges into forward op ``v`` from what produces ``ins`` (bytes: each value's).

        An op's output feeds it directly; a graph input through its ``input/`` op (of 0 FLOP, holding the input's
        bytes, added in ``v``'s group at its first reader); a parameter is noted as read by ``v``
        (:attr:`_Step.param_users`), its edges added by :meth:`_parameter_reads`.
        """
        for x in ins:
            if x not in step.ref:
                continue
            where, u, value = step.ref[x]
            if where == "node":
                self.edge(u, v, self.nbytes(value))
            elif where == "input":
                if value not in step.input_node:
                    step.input_node[value] = self.add_node(f"input/{value}", "input", FORWARD, 0.0,
                                                           self.nbytes(value), self.group[v], "")
                self.edge(step.input_node[value], v, self.nbytes(value))
            elif v not in step.param_users.setdefault(value, []):
                step.param_users[value].append(v)

    def _loss(self, step: _Step) -> None:
        """The loss over the graph outputs that depend on parameters, and the gradient it seeds for each.

        One ``loss`` op (1 FLOP per output element, 4 bytes: a float32 scalar) fed by each output, and one
        ``loss_grad`` op per output (1 FLOP per element, holding the output's bytes). A model whose one such output
        is a scalar returns its loss: no op, that output's producer is seeded (:attr:`_Step.seeded`).

        Raises:
            UnsupportedGraph: for such an output of no static shape.
        """
        ref = step.ref
        step.outputs = list(dict.fromkeys(  # (a value the graph lists twice is one output: counted once)
            o.name for o in self.proto.graph.output
            if step.requires_grad.get(o.name, False) and ref.get(o.name, ("",))[0] == "node"
        ))
        outputs = step.outputs
        for o in outputs:  # (a view's output, a Reshape to a shape the model is given, is checked nowhere else:
            if self.shape(o) is None:  # its unknown shape was read as a scalar, the loss, and the graph had none)
                raise self._no_shape(o)
        if len(outputs) == 1 and math.prod(self.shape(outputs[0]) or ()) == 1:
            step.seeded.add(ref[outputs[0]][1])  # the model returns its loss
        elif outputs:
            loss = self.add_node("loss", "loss", FORWARD, sum(math.prod(self.shape(o) or ()) for o in outputs), 4,
                                 self.new_group(), "")
            for o in outputs:
                _, u, value = ref[o]
                self.edge(u, loss, self.nbytes(value))
                g = self.add_node(f"grad/loss/{o}", "loss_grad", BACKWARD, math.prod(self.shape(o) or ()),
                                  self.nbytes(o), self.group[loss], "")
                self.edge(loss, g, 4)
                step.contributions.setdefault(step.parts.get(o, ref[o]), []).append(g)

    def _parameter_reads(self, step: _Step) -> None:
        """Each parameter's home group (its first reader's), and the edges from it to the forward ops that read it.

        A reader in another group is served by the parameter's ``read`` op (:meth:`_parameter_to`).
        """
        step.home = {p: self.group[users[0]] for p, users in step.param_users.items()}
        for p, users in step.param_users.items():
            for v in users:
                self._parameter_to(step, p, v)

    def _parameter_to(self, step: _Step, p: str, consumer: int) -> None:
        """The edge that serves parameter ``p`` to op ``consumer`` outside ``p``'s home group (none inside it).

        From ``p``'s ``read`` op: 0 FLOP, holding ``p``'s bytes, in the home group and the module of ``p``'s first
        reader, added at its first use; the edge carries ``p``'s bytes.
        """
        if self.group[consumer] == step.home[p]:
            return
        if p not in step.read_node:
            step.read_node[p] = self.add_node(f"read/{p}", "read", FORWARD, 0.0, self.nbytes(p), step.home[p],
                                              self.module[step.param_users[p][0]])
        self.edge(step.read_node[p], consumer, self.nbytes(p))

    def _backward_node(self, step: _Step, v: int, node: onnx.NodeProto, kind: str, attrs: dict[str, Any]) -> None:
        """The gradient ops of forward op ``v`` (of ONNX ``node``), once the gradients of its outputs are known.

        A ``Split`` or ``SplitToSequence`` (``v`` -1) concatenates its parts' gradients (:meth:`_concatenated`); a
        fake quantization passes its gradient straight through (:meth:`_straight_through`); any other op gets one
        gradient op per input a gradient flows to (:meth:`_gradient_op`; one for all of a fused norm's), the first
        also charged the work they share (:func:`shared_grad_flops`: back-propagation through time), each fed by the
        gradient of the op's outputs (summed, :meth:`_summed`, where several ops read an output).
        """
        if v < 0:  # a Split or SplitToSequence: the gradients of its parts, concatenated
            self._concatenated(node, attrs["parts"], step.ref, step.parts, step.contributions, step.param_users)
            return
        sources = []
        for out in node.output:
            key = ("node", v, out)
            if out and key in step.contributions:
                sources.append(self._summed(step.contributions.pop(key), out, self.group[v], self.module[v]))
        if not sources and v not in step.seeded:
            return  # no gradient reaches this op
        if v in step.fake_quant:  # the straight-through estimator, to QuantizeLinear's float input
            u = step.fake_quant[v]
            self._straight_through(u, step.quantizes[u], sources, step.ref, step.parts, step.contributions)
            return
        skip = NON_DIFFERENTIABLE.get(kind, frozenset())
        in_shapes = [self.shape(x) if x else None for x in node.input]
        out_shapes = [self.shape(x) if x else None for x in node.output]
        positions: dict[str, list[int]] = {}
        for pos, x in enumerate(node.input):
            if x and pos not in skip and step.requires_grad.get(x, False):
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
                step.contributions.setdefault(step.parts.get(x, step.ref[x]), []).append(sources[0])
                continue
            self._gradient_op(step, v, node, kind, x, slots, targets, fl, sources)

    def _gradient_op(self, step: _Step, v: int, node: onnx.NodeProto, kind: str, x: str, slots: list[int],
                     targets: list[str], fl: float, sources: Sequence[int]) -> None:
        """One gradient op of forward op ``v``: of ``fl`` FLOP, holding the bytes of the gradients of ``targets``.

        Named for input ``x`` and taken for its input positions ``slots``, in ``v``'s group and module; fed by the
        gradient of ``v``'s outputs (``sources``) and by the activations it reads (:meth:`_saved_inputs`: ``v``'s
        inputs, by the parameter's ``read`` op outside its home group; ``v``'s output, or the mask ``v`` keeps, a
        byte per element). Its result is noted as a gradient of each of ``targets``.
        """
        g = self.add_node(f"grad/{self.names[v]}/{x}", f"{kind}_grad", BACKWARD, fl,
                          sum(self.nbytes(t) for t in targets), self.group[v], self.module[v],
                          op_kind="embedding_grad" if self.op_kinds[v] == "embedding" else None)
        for s in sources:
            self.edge(s, g, self.out_bytes[s])
        for z in dict.fromkeys(_saved_inputs(node, kind, x, slots)):
            if z not in step.ref:
                continue
            where_z, u, value = step.ref[z]
            if where_z == "node":
                self.edge(u, g, self.nbytes(value))
            elif where_z == "input":
                self.edge(step.input_node[value], g, self.nbytes(value))
            else:
                self._parameter_to(step, value, g)
        if (kind in SAVES_OUTPUT or kind not in _KNOWN_SAVES) and kind not in FUSED_NORM_GRADS:
            self.edge(v, g, self.out_bytes[v])
        if kind in SAVES_MASK:  # the mask the forward op kept, not its output
            self.edge(v, g, self.mask_bytes(node))
        for t in targets:
            step.contributions.setdefault(step.parts.get(t, step.ref[t]), []).append(g)

    def _updates(self, step: _Step) -> None:
        """One update op per trainable parameter, in its home group: the optimizer's FLOP per element, and bytes.

        Each holds the parameter's bytes times the optimizer's state factor (its ``param_bytes``), with
        :attr:`update_flops` FLOP per element, fed by the parameter's gradient (summed, :meth:`_summed`, where
        several ops give one; the edge carries the parameter's bytes), in the order of the parameters' first readers.

        Raises:
            UnsupportedGraph: if parameters are read but no output depends on them through differentiable ops.
            InvalidArgument: if ``trainable`` names a parameter that no op reads where a gradient can reach it.
            _NoGradient: naming the default parameters no gradient reaches.
        """
        param_users, contributions, outputs, seeded = step.param_users, step.contributions, step.outputs, step.seeded
        if param_users and not outputs and not seeded:  # (ArgMax or Shape of the outputs: an update of no gradient)
            raise UnsupportedGraph(f"{self.source}: no output of the model depends on a trainable parameter through "
                                   "differentiable ops: a training step has no gradient to compute")
        if self.trainable_override is not None:
            unread = sorted(self.trainable_override - self.frozen - set(param_users))
            if unread:  # dropped without a word
                raise InvalidArgument(f"{self.source}: trainable (--trainable) names {unread[0]!r}, which no op of the "
                                      "model reads where a gradient can reach it")
        ungraded = {p for p in param_users if ("param", -1, p) not in contributions}
        if self.trainable_override is None and ungraded:
            raise _NoGradient(ungraded)
        for p in sorted(param_users, key=lambda p: param_users[p][0]):
            pbytes = self.nbytes(p)
            module = self._param_module(p, param_users[p])
            grads = contributions.pop(("param", -1, p), [])
            source = self._summed(grads, p, step.home[p], module) if grads else None
            if source is None and self.trainable_override is not None and p in self.trainable_override:
                raise InvalidArgument(f"{self.source}: trainable (--trainable) names {p!r}, which no gradient reaches "
                                      "(it reaches the outputs only through non-differentiable inputs of ops)")
            numel = math.prod(self.shape(p) or ())
            up = self.add_node(f"update/{p}", f"{self.optimizer}_update", UPDATE, self.update_flops * numel, 0,
                               step.home[p], module, param_bytes=pbytes * self.state_factor)
            if source is not None:
                self.edge(source, up, pbytes)

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
        if node is not None and not has_schema(node):
            why = f"ONNX has no shape inference for op {node.op_type!r} of domain {node.domain!r} and the file " \
                  "declares no static shape for it"
        else:
            why = "the op may be data-dependent or unknown to ONNX shape inference"
        fix = "re-export the model with static shapes at these input sizes" if self.shapes_given else \
            "fix the input sizes with --input-shape NAME=DIMS, or re-export the model with static shapes"
        return UnsupportedGraph(f"{self.source}: shape inference could not find a static shape for {what}; {why} "
                                f"({fix})")


def _saved_inputs(node: onnx.NodeProto, kind: str, x: str, slots: Sequence[int]) -> list[str]:
    """The inputs of ``node`` that its gradient op for input ``x`` (at positions ``slots``) reads, as aten's backward.

    A fused norm's (dX reads X and the scale, dscale X, dbias neither); a bias's gradient none (it sums the
    output's gradient alone); else the other inputs (products, by position: ``Mul(h, h)`` reads ``h``) and its own
    (activations), as the op's type saves them, both for a type of unknown needs. Listed in order, possibly twice.
    """
    saved: list[str] = []
    if kind in FUSED_NORM_GRADS:  # dX reads X and the scale, dscale X, dbias neither (nor the output)
        saved += [node.input[0]] if {0, 1} & set(slots) else []
        saved += [node.input[1]] if 0 in slots and len(node.input) > 1 and node.input[1] else []
    elif kind in BIAS_SLOT and list(slots) == [BIAS_SLOT[kind]]:
        pass  # a bias's gradient sums the output's gradient alone
    else:
        if kind in SAVES_OTHER_INPUTS or kind not in _KNOWN_SAVES:  # by position: Mul(h, h) reads h
            saved += list(dict.fromkeys(z for pos in slots for q, z in enumerate(node.input) if z and q != pos))
        if kind in SAVES_OWN_INPUT or kind not in _KNOWN_SAVES:
            saved.append(x)
    return saved


#: View ops whose (first) output holds exactly the elements of their data input.
_SAME_NUMEL_VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Dropout"})

#: Ops that are table look-ups (``embedding``) when they read a trainable initializer as their data.
_LOOKUPS = frozenset({"Gather"})

_KNOWN_SAVES = SAVES_OTHER_INPUTS | SAVES_OWN_INPUT | SAVES_OUTPUT | SAVES_MASK | frozenset({
    "Add", "Sub", "Neg", "Sum", "Mean", "Concat", "Cast", "CastLike", "Pad", "Tile", "ReduceMean", "ReduceSum",
    "CumSum", "Resize", "Upsample", "Trilu", "ScatterND", "ScatterElements", "Scatter", "TensorScatter", "loss",
    "DFT", "AffineGrid",  # linear in their one float input: the gradient is the transposed map, reading no value
})
