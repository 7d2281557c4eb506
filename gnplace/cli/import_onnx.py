"""``gnplace import MODEL.onnx -o GRAPH.gnpg``: the training graph of an ONNX model."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from gnplace.cli.common import counted, file_path
from gnplace.exceptions import InvalidArgument
from gnplace.graph import PHASES
from gnplace.importers import OPTIMIZERS
from gnplace.units import format_bytes, format_flops

GRAPH_SUFFIXES = (".gnpg", ".json", ".json.gz")
"""The names ``--output`` may end with: gzip JSON (``.gnpg``, ``.json.gz``) or plain JSON (``.json``)."""


def add_parser(sub: Any) -> None:
    """Register ``import`` on the subparsers ``sub``."""
    p = sub.add_parser("import", help="import an ONNX model as a training graph",
                       description="Read the forward graph of MODEL (an .onnx file), synthesise its backward pass and "
                       "one optimizer update per trainable initializer, and write the training graph to OUTPUT.")
    p.add_argument("model", type=file_path, help="ONNX file")
    p.add_argument("--output", "-o", required=True,
                   help="graph file to write (.gnpg or .json.gz, or .json for plain JSON)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                   help="sizes of an input with dynamic dimensions, e.g. pixel_values=8,3,224,224 (repeatable)")
    p.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="sgd",
                   help="optimizer whose state the update ops hold (default: sgd)")
    p.add_argument("--name", default=None, help="graph name (default: the file name)")
    p.add_argument("--allow-unknown-ops", action="store_true",
                   help="count ops of custom domains without a FLOP rule at 1 FLOP per output element (with a "
                        "warning) instead of refusing the model")
    p.add_argument("--trainable", action="append", default=None, metavar="NAME",
                   help="an initializer to train, the others not (repeatable; default: every float initializer "
                        "of at least two elements read as a weight)")
    p.add_argument("--frozen", action="append", default=None, metavar="NAME",
                   help="an initializer not to train (repeatable): a buffer or a frozen weight, which an ONNX file "
                        "does not tell from a weight")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gnplace import``."""
    from gnplace.cli.common import (
        check_not_input,
        check_output_file,
        collect_input_shapes,
        one_line,
        print_json,
        require_ops,
        writing,
    )
    from gnplace.graph_io import save_graph
    from gnplace.importers.onnx import from_onnx

    check_not_input(args.output, args.model)
    check_output_file(args.output, "--output")
    if Path(args.output).suffix.lower() == ".onnx":  # every command would read it back as an ONNX model
        raise InvalidArgument(f"--output {args.output}: a gnplace graph file, not an ONNX model; name it .gnpg "
                              "(or .json for plain JSON)")
    if not str(args.output).lower().endswith(GRAPH_SUFFIXES):  # m.txt was written as gzip: its name said text
        suffixes = Path(args.output).suffixes
        suffix = "".join(suffixes[-2:] if suffixes[-1:] == [".gz"] else suffixes[-1:])
        kind = f"unsupported file type {suffix!r}" if suffix else "no file type"  # ("'(none)'" before)
        raise InvalidArgument(f"--output {args.output}: {kind}; name it .gnpg or .json.gz (gzip JSON), or .json "
                              "(plain JSON)")
    if args.name is not None and not args.name.strip():  # "" (an unset variable) was dropped for the model's name,
        raise InvalidArgument(f"--name {args.name!r} names nothing; give the graph a name, or leave --name out for "
                              "the model's")  # and " " named the graph by a space
    both = sorted(set(args.trainable or ()) & set(args.frozen or ()))
    if both:  # frozen wins in the library: the initializer would be left untrained without a word
        raise InvalidArgument(f"--trainable and --frozen both name {both[0]!r}: give each initializer one of them")
    shapes = collect_input_shapes(args.input_shape)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = from_onnx(args.model, input_shapes=shapes or None, optimizer=args.optimizer, name=args.name,
                          allow_unknown_ops=args.allow_unknown_ops, trainable=args.trainable, frozen=args.frozen)
    require_ops(graph, args.model)  # a model with no nodes would write a graph nothing can place
    with writing(args.output):
        path = save_graph(graph, args.output)
    for w in caught:
        print(f"gnplace: warning: {one_line(str(w.message))}", file=sys.stderr)
    summary = {
        "graph": graph.name,
        "output": str(path),
        "ops": graph.num_ops,
        "ops_by_phase": {p: int((graph.phase == i).sum()) for i, p in enumerate(PHASES)},
        "edges": graph.num_edges,
        "groups": graph.num_groups,
        "flops_by_phase": {p: float(graph.flops[graph.phase == i].sum()) for i, p in enumerate(PHASES)},
        "param_bytes": graph.total_param_bytes,
        "input_shapes": graph.meta.get("input_shapes", {}),
    }
    if args.json:
        print_json(summary)
        return 0
    phases = ", ".join(f"{n} {p}" for p, n in summary["ops_by_phase"].items())
    flops = ", ".join(f"{p} {format_flops(f)}" for p, f in summary["flops_by_phase"].items())
    print(f"wrote {path}: {counted(graph.num_ops, 'op')} ({phases}), {counted(graph.num_edges, 'edge')}, "
          f"{counted(graph.num_groups, 'group')}; "
          f"{flops}; parameters + optimizer state {format_bytes(graph.total_param_bytes)}")
    return 0
