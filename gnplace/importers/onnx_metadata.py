"""What an exporter recorded in an ONNX file beside its graph: modules, parameters, folded constants.

Read from the metadata of nodes and values, never from the graph itself, and only ever a hint: text that is not
what the exporter writes (not a list literal, not readable) is read as absent, never an error.

* ``pkg.torch.onnx.name_scopes`` and ``pkg.torch.onnx.class_hierarchy`` (torch.onnx's dynamo exporter) on each node:
  the module whose forward ran it (:func:`module_of`; else the ``/a/b/Op`` path of the node's name, as the
  TorchScript exporter writes it) and that module's class (:func:`innermost_class`);
* ``pkg.torch.export.ExportedProgram.graph_signature`` on the graph: which initializers are parameters, and which
  buffers or constants (:func:`exported_tensors`);
* ``pkg.onnxscript.optimizer.folded_from`` on a value: what a constant onnxscript's optimizer folded was computed
  from (:func:`folded_sources`), and from these what each folded initializer stands for (:func:`fold_roles`).

:mod:`gnplace.importers.onnx` reads them to name each op's module and to tell weights from the rest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import onnx

__all__ = ["FOLDED_FROM_KEY", "SIGNATURE_KEY", "exported_tensors", "fold_roles", "folded_sources", "innermost_class",
           "module_of"]


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


def module_of(node: onnx.NodeProto) -> str:
    """The owning module path recorded by the exporter (``pkg.torch.onnx.name_scopes`` or ``/a/b/Op``).

    Examples:
        >>> from onnx import helper
        >>> module_of(helper.make_node("MatMul", ["x", "w"], ["y"], name="/encoder/layer.0/MatMul"))
        'encoder.layer.0'
        >>> module_of(helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"))
        ''
    """
    if any(prop.key == "pkg.torch.onnx.name_scopes" for prop in node.metadata_props):
        scopes = _metadata_list(node, "pkg.torch.onnx.name_scopes")
        return str(scopes[-2]) if scopes is not None and len(scopes) >= 2 else ""
    if node.name.startswith("/"):
        return ".".join(p for p in node.name.split("/")[1:-1] if p)
    return ""


def innermost_class(node: onnx.NodeProto) -> str:
    """The class of the innermost module whose forward ran the node (``pkg.torch.onnx.class_hierarchy``), or ``""``."""
    hierarchy = _metadata_list(node, "pkg.torch.onnx.class_hierarchy")
    return str(hierarchy[-2]) if hierarchy is not None and len(hierarchy) >= 2 else ""


#: The graph signature torch.export records, and the tensor kinds it names.
SIGNATURE_KEY = "pkg.torch.export.ExportedProgram.graph_signature"
_SIGNED = re.compile(r"^\s*\S+:\s*(PARAMETER|BUFFER|CONSTANT_TENSOR)\s+target=(['\"])(.*?)\2", re.MULTILINE)


def exported_tensors(proto: onnx.ModelProto) -> tuple[set[str], set[str]] | None:
    """The parameters, and the buffers and constants, that torch.export's signature names (by their target).

    ``None`` if the file records no signature (another exporter) or one that names no tensor.
    """
    texts = [prop.value for prop in getattr(proto.graph, "metadata_props", ()) if prop.key == SIGNATURE_KEY]
    found = [m for text in texts for m in _SIGNED.finditer(text)]
    if not found:
        return None
    parameters = {m.group(3) for m in found if m.group(1) == "PARAMETER"}
    return parameters, {m.group(3) for m in found if m.group(1) != "PARAMETER"} - parameters


#: The metadata key under which onnxscript's optimizer records the values a constant it folded was computed from.
FOLDED_FROM_KEY = "pkg.onnxscript.optimizer.folded_from"


def folded_sources(proto: onnx.ModelProto) -> dict[str, tuple[str, ...]]:
    """The values each constant was folded from, by name, as onnxscript's optimizer records them (else empty).

    torch.onnx's optimised export folds computations on parameters (``self.pos[:, :7]``, ``weight.T``) into new
    initializers, and names their sources in the value's metadata.
    """
    g = proto.graph
    found: dict[str, tuple[str, ...]] = {}
    for value in [*g.value_info, *g.input, *g.output, *g.initializer]:
        for prop in getattr(value, "metadata_props", ()):
            if prop.key != FOLDED_FROM_KEY:
                continue
            sources = _literal(prop.value)  # {[1]: 2} in a shared file was a TypeError traceback
            if isinstance(sources, (list, tuple)) and all(isinstance(x, str) for x in sources):
                found[value.name] = tuple(sources)
    return found


def fold_roles(
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
    signature = exported_tensors(proto)
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
