"""Which initializers of an ONNX model are weights: trained, each with a gradient, an update op and optimizer state.

An ONNX file holds parameters, buffers and constants alike as initializers. The importer
(:func:`gnplace.importers.onnx.from_onnx`) trains a float initializer of two elements or more that a
gradient can reach, unless what the exporter recorded beside the graph says it holds no weight:
torch.export's signature (:func:`~gnplace.importers.onnx_metadata.exported_tensors`) names parameters,
buffers and constants, and onnxscript's folds (:func:`~gnplace.importers.onnx_metadata.fold_roles`) tell
a constant folded from a parameter (a read of it, or the parameter itself) from one the exporter made.
:func:`no_weight_reads` lists the reads of made constants that a gradient reaches but no optimizer
updates (a norm's unit scale, an RNN's folded first step), :func:`find_weights` the weights, and
:func:`warn_folded_parameters` names the parameters whose bytes the file no longer holds whole.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto

from gnplace.importers.onnx_flops import NON_DIFFERENTIABLE, STATIC_OPS, VIEW_OPS, canonical_op_type
from gnplace.importers.onnx_metadata import exported_tensors, innermost_class, module_of
from gnplace.importers.onnx_model import held_values

__all__ = ["FLOAT_TYPES", "find_weights", "no_weight_reads", "read_by_torch_nn", "regrouped", "repeats",
           "warn_folded_parameters"]

Shape = tuple[int, ...]

#: The element types that have gradients (an initializer of another type is never trained).
FLOAT_TYPES = frozenset({
    TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16,
    *(getattr(TensorProto, n) for n in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ")
      if hasattr(TensorProto, n)),
})

#: Input positions that hold a state, never a weight: the initial hidden (and cell) state of a recurrent layer.
#: A gradient flows through them, but an initializer read only there is no parameter (torch.onnx's exporter
#: stores a zero initial state so); ``trainable`` still names one to train.
STATE_INPUTS: dict[str, frozenset[int]] = {"LSTM": frozenset({5, 6}), "GRU": frozenset({5}), "RNN": frozenset({5})}


def find_weights(nodes: Sequence[onnx.NodeProto], inits: Mapping[str, TensorProto], needed: Sequence[bool],
                 no_weight: set[tuple[int, int]], *, alias: Mapping[str, str], parameter_of: Mapping[str, str],
                 made: set[str]) -> set[str]:
    """The initializers the needed nodes read as weights (before any is frozen).

    A read is of a weight where a gradient can flow (not a static op, not an input that is not differentiable,
    not a recurrent layer's initial state), of a float initializer the exporter did not make, and either folded
    from a parameter (``alias``'s reads count as the parameter's; ``parameter_of``'s stand for theirs) or not in
    ``no_weight`` and of two elements or more.

    Args:
        nodes: The graph's nodes, in the file's order.
        inits: The initializers by name.
        needed: Per node, whether an output of the graph depends on it.
        no_weight: The (node, input position) reads of :func:`no_weight_reads`.
        alias: The constants folded from one parameter the file still holds, and that parameter
            (:func:`~gnplace.importers.onnx_metadata.fold_roles`, as the next two).
        parameter_of: The constants folded from one parameter the file no longer holds, and that parameter.
        made: The constants folded from no parameter.
    """
    found: set[str] = set()
    for i, node in enumerate(nodes):
        if not needed[i]:
            continue
        kind = canonical_op_type(node.op_type, node.domain)
        if kind in STATIC_OPS:
            continue
        skip = NON_DIFFERENTIABLE.get(kind, frozenset()) | STATE_INPUTS.get(kind, frozenset())
        for pos, x in enumerate(node.input):
            init = inits.get(x)
            if init is None or pos in skip or init.data_type not in FLOAT_TYPES or x in made:
                continue
            if x in alias or x in parameter_of:  # folded from a parameter: its gradient is one
                found.add(alias.get(x, x))
            elif (i, pos) not in no_weight and math.prod(init.dims) >= 2:
                found.add(x)
    return found


def no_weight_reads(proto: onnx.ModelProto, nodes: Sequence[onnx.NodeProto], inits: Mapping[str, TensorProto],
                    shape: Callable[[str], Shape | None]) -> set[tuple[int, int]]:
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

    Args:
        proto: The model (its signature is read).
        nodes: The graph's nodes, in the file's order.
        inits: The initializers by name.
        shape: A value's static shape (``None`` if not known).
    """
    signature = exported_tensors(proto)
    if signature is None:
        return set()
    parameters, others = signature
    owners = {p.rsplit(".", 1)[0] if "." in p else "" for p in parameters}
    producer = {out: i for i, n in enumerate(nodes) for out in n.output if out}
    reads: set[tuple[int, int]] = set()
    for i, node in enumerate(nodes):
        kind = canonical_op_type(node.op_type, node.domain)
        scoped = any(prop.key == "pkg.torch.onnx.name_scopes" for prop in node.metadata_props)
        for pos, x in enumerate(node.input):
            if x not in inits or x in parameters:
                continue
            if x in others:
                reads.add((i, pos))
            elif scoped and module_of(node) not in owners:
                reads.add((i, pos))
            elif kind == "InstanceNormalization" and pos in (1, 2) and regrouped(node.input[0], nodes, producer, shape):
                reads.add((i, pos))
            elif kind in ("Add", "Sub", "Mul", "Div") and node.output and shape(node.output[0]) is not None \
                    and math.prod(inits[x].dims) >= math.prod(shape(node.output[0]) or ()) > 1 \
                    and repeats(inits[x]):
                reads.add((i, pos))
    return reads


def regrouped(value: str, nodes: Sequence[onnx.NodeProto], producer: Mapping[str, int],
              shape: Callable[[str], Shape | None]) -> bool:
    """Whether ``value`` is a view (through view ops) of a value of another shape.

    ``GroupNorm``'s export reshapes ``[N, C, *spatial]`` to ``[N, G, -1]``: the size in dimension 1 changes,
    or, with as many groups as channels, the rank (a 2-d or 3-d input).

    Args:
        value: The value read as an ``InstanceNormalization``'s data.
        nodes: The graph's nodes, in the file's order.
        producer: The index in ``nodes`` of each value's producer.
        shape: A value's static shape (``None`` if not known).
    """
    viewed = shape(value)
    seen = 0
    while value in producer and seen < len(nodes):
        node = nodes[producer[value]]
        if canonical_op_type(node.op_type, node.domain) not in VIEW_OPS or not node.input:
            return False
        value, seen = node.input[0], seen + 1
        before = shape(value)
        if viewed is not None and before is not None and len(viewed) > 1 and len(before) > 1 \
                and (before[1] != viewed[1] or len(before) != len(viewed)):
            return True
    return False


def repeats(init: TensorProto) -> bool:
    """Whether the values of ``init`` repeat along an axis of more than one element (``False`` if not held)."""
    values = held_values(init)
    if values is None:
        return False
    return any(size > 1 and bool(np.all(values == values.take([0], axis=axis)))
               for axis, size in enumerate(values.shape))


def warn_folded_parameters(source: str, nodes: Sequence[onnx.NodeProto], parameter_of: Mapping[str, str],
                           folded_from: Mapping[str, tuple[str, ...]], trainable: set[str],
                           shape: Callable[[str], Shape | None]) -> None:
    """Warn once about parameters the exporter folded into constants that may hold only a part of them.

    A parameter folded into more than one trained constant, or into one computed with other values too (a slice,
    a reshape), may be held only in part, unless :func:`read_by_torch_nn`. The warning points at the caller of
    :func:`~gnplace.importers.onnx.from_onnx` (called from its builder).

    Args:
        source: The file's name, for the message.
        nodes: The graph's nodes, in the file's order.
        parameter_of: The constants folded from a parameter the file no longer holds, and that parameter.
        folded_from: Each folded constant's sources (onnxscript's ``folded_from``).
        trainable: The initializers the step trains.
        shape: A value's static shape (``None`` if not known).
    """
    folds: dict[str, list[str]] = {}
    for x, parameter in sorted(parameter_of.items()):
        if x in trainable:
            folds.setdefault(parameter, []).append(x)
    partial = {p: xs for p, xs in folds.items()
               if (len(xs) > 1 or any(len(folded_from.get(x, ())) > 1 for x in xs))
               and not read_by_torch_nn(nodes, xs)}
    if not partial:
        return
    listed = "; ".join(f"{p!r} into {', '.join(f'{x} {list(shape(x) or ())}' for x in xs)}"
                       for p, xs in partial.items())
    warnings.warn(
        f"{source}: the exporter folded parameters into constants computed with other values, which may "
        f"hold only a part of each (a slice); the file no longer holds the parameters, so their bytes and "
        f"gradients are counted at the constants' sizes: {listed} (export with torch.onnx.export(..., "
        "optimize=False) to count each parameter whole)",
        stacklevel=4,
    )


def read_by_torch_nn(nodes: Sequence[onnx.NodeProto], values: Sequence[str]) -> bool:
    """Whether every reader of ``values`` runs in a ``torch.nn`` module's own forward (the export's class scopes).

    Those modules read their parameters whole (``GroupNorm`` reshapes its weight; ``MultiheadAttention`` splits
    its input projection into three, which together are the whole): a fold there loses no byte. A slice that
    may lose some is the model's own code (``self.pos[:, :7]``).
    """
    wanted = set(values)
    readers = [n for n in nodes if wanted & set(n.input)]
    return bool(readers) and all(innermost_class(n).startswith("torch.nn.modules.") for n in readers)
