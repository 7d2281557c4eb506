"""Zero-shot placement of one graph with the pretrained policy, compared with ``single``, ``auto`` and the bound.

Usage::

    python scripts/place.py GRAPH --cluster C [--checkpoint PATH] [--samples K] [--rounds R] [--seed S] \\
        [-o placement.json] [--json] [--no-progress] [--portfolio] [--no-subsets] [--op-level OPS] [--no-around] [--temperatures T1,T2,...] [--input-shape NAME=D1,D2,...] \\
        [--optimizer sgd|momentum|adam|adamw]

GRAPH is a graph file (``.gnpg``), an ONNX file or a Python ``module:factory`` (a function returning a
``torch.nn.Module`` and example inputs, and a ``loss`` callable third where the module does not return its
loss); ``--optimizer`` is the optimizer a model is imported with (its update's FLOP and state bytes;
default sgd), which a graph file names itself. The policy (the shipped ``checkpoints/gnplace-base.ckpt``
unless ``--checkpoint`` names another) decodes its greedy placement and K samples (default 16), the
simulator scores them and the best is kept; its step time is printed beside ``single``, ``auto``
(the best fast heuristic) and the simulator's lower bound. Same as
``gnplace place GRAPH -c C -p policy``, with the comparison. Bad input exits 2 with one line.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _temperatures(text: str) -> list[float]:
    """``"0.1,0.2"`` as ``[0.1, 0.2]``; a malformed list is an :class:`InvalidArgument` (one line, exit 2)."""
    from gnplace.exceptions import InvalidArgument

    try:
        return [float(t) for t in text.split(",")]
    except ValueError:
        raise InvalidArgument(f"--temperatures needs numbers separated by commas, got {text!r}") from None


STEP_SECONDS = ("policy", "greedy", "auto", "single", "bound")
"""The step times (seconds) of ``--json`` written under their bare names, which scripts/bench.py's zero-shot rows
give to ratios to auto: ``--json`` also writes each as ``NAME_s``, as evaluate's rows and finetune name theirs."""


def comparison_lines(row: dict[str, Any]) -> list[str]:
    """The text table of ``row`` (:func:`gnplace.rl.zeroshot_cli.compare_with_references`' row: step times in seconds).

    Each step time is printed in the largest unit that keeps it at least 1, as ``gnplace place`` prints its own
    (:func:`gnplace.units.format_seconds`: ``"9.912 ms"``, ``"115.000 us"``), beside its ratio to ``auto``'s.
    """
    from gnplace.units import format_seconds

    lines = []
    for label, key in (("policy", "policy"), ("greedy", "greedy"), (f"auto ({row['auto_choice']})", "auto"),
                       ("single", "single"), ("lower bound", "bound")):
        if row[key] is None:  # nothing decoded (one device, no ops, every placement timed)
            lines.append(f"  {label:<18} {'-':>12}")
            continue
        ratio = f"{row[key] / row['auto']:6.3f}x auto" if row["auto"] else ""
        oom = "  OUT OF MEMORY" if row.get("oom" if key == "policy" else f"{key}_oom") else ""
        lines.append(f"  {label:<18} {format_seconds(row[key]):>12}   {ratio}{oom}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, place and print; returns the exit status."""
    from gnplace.cli.common import add_optimizer_argument, file_path, script_parser, whole_number
    from gnplace.rl.zeroshot_cli import add_decoding_arguments

    parser = script_parser(__file__, __doc__)
    parser.add_argument("graph", type=file_path, help="graph file, ONNX file or MODULE:FACTORY")
    parser.add_argument("--cluster", "-c", default="k80x4", help="preset or YAML file (default: k80x4)")
    parser.add_argument("--checkpoint", default=None, type=file_path, help="policy checkpoint (default: the shipped one)")
    parser.add_argument("--samples", type=int, default=16, help="sampled placements beside the greedy one (default: 16)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="draw the samples in this many rounds, each around the best placement so far (default: 1)")
    parser.add_argument("--constructor", nargs="+", default=None, metavar="PATH",
                        help="the search-distilled constructors' checkpoints, or none (default: the two shipped ones)")
    add_decoding_arguments(parser)
    parser.add_argument("--seed", type=whole_number, default=0, help="seed (default: 0)")
    parser.add_argument("--portfolio", action="store_true", help="also consider the fast heuristics' placements")
    parser.add_argument("--subsets", action=argparse.BooleanOptionalAction, default=True,
                        help="also decode greedily on the fastest k devices alone, k = 2 .. D-1 (default: on)")
    parser.add_argument("--op-level", type=int, default=None, metavar="OPS",
                        help="on graphs of at most OPS ops, also decode with no coarsening (default: 4000; 0: never)")
    parser.add_argument("--around", action=argparse.BooleanOptionalAction, default=None,
                        help="draw the samples around auto's placement (default: as the checkpoint was pretrained; "
                             "the shipped one does); --no-around samples the policy itself, at --temperatures")
    parser.add_argument("--temperatures", default=None, metavar="T1,T2,...",
                        help="sampling temperatures, cycled over the samples, for checkpoints that do not sample "
                             "around auto (default: 0.1,0.2,0.3,0.5); refused for those that do, as the shipped one, "
                             "which samples at 1")
    parser.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                        help="ONNX input sizes for dynamic dimensions (repeatable)")
    add_optimizer_argument(parser)
    parser.add_argument("--output", "-o", default=None, help="placement file to write")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar of the placement (nor, where stderr is not a terminal, progress lines)")
    args = parser.parse_args(argv)
    from gnplace.cli.common import run_reporting_errors

    return run_reporting_errors(run, args, "place")


def run(args: argparse.Namespace) -> int:
    """Place ``args.graph`` with the policy, compare with the references and print; returns the exit status."""
    from gnplace.cli.common import (
        check_count,
        check_not_input,
        check_output_file,
        collect_input_shapes,
        print_json,
        printable_name,
        require_ops,
        writing,
    )
    from gnplace.cluster import load_cluster
    from gnplace.exceptions import InvalidArgument
    from gnplace.importers.sources import load_graph_source
    from gnplace.limits import MAX_BUDGET
    from gnplace.placement import save_placement
    from gnplace.rl.policy_files import SHIPPED_CHECKPOINT, SHIPPED_CONSTRUCTORS
    from gnplace.rl.zeroshot import MAX_SAMPLES, PolicyPlacer
    from gnplace.rl.zeroshot_cli import DECODING_ARGUMENTS, compare_with_references, named_by_flag
    from gnplace.sim.bounds import require_memory
    from gnplace.sim.simulator import Simulator
    from gnplace.units import format_seconds

    for count, flag in ((args.samples, "--samples"), (args.constructor_samples, "--constructor-samples"),
                        (args.refine, "--refine"), (args.constructor_refine, "--constructor-refine")):
        check_count(count, flag, maximum=MAX_SAMPLES)
    check_count(args.op_level, "--op-level")
    check_count(args.last_rounds, "--last-rounds", minimum=1)
    check_count(args.polish, "--polish", maximum=MAX_BUDGET)
    check_count(args.polish_ops, "--polish-ops")
    if args.output is not None:  # "" and "-" are refused, as by gnplace place (they wrote nothing, or a file "-")
        check_output_file(args.output, "--output")
        # the checkpoints read when none is named too: the shipped ones, which -o must not overwrite either
        checkpoint = SHIPPED_CHECKPOINT if args.checkpoint is None else args.checkpoint
        constructors = SHIPPED_CONSTRUCTORS if args.constructor is None else args.constructor
        check_not_input(args.output, args.graph, others=(args.cluster, checkpoint, *constructors))
    shapes = collect_input_shapes(args.input_shape)  # a name given two sizes is refused, not the last one taken
    graph = require_ops(load_graph_source(args.graph, input_shapes=shapes or None, optimizer=args.optimizer),
                        args.graph)
    cluster = load_cluster(args.cluster)
    require_memory(graph, cluster)
    sim = Simulator()
    options: dict[str, Any] = {} if args.temperatures is None else {"temperatures": _temperatures(args.temperatures)}
    for name in ("op_level", "around", *DECODING_ARGUMENTS):  # else the placer's default
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    try:
        placer = PolicyPlacer(checkpoint=args.checkpoint, samples=args.samples, portfolio=args.portfolio,
                              subsets=args.subsets, timer=sim, rounds=args.rounds, constructor=args.constructor,
                              progress=False if args.no_progress else None, **options)
    except InvalidArgument as err:
        raise named_by_flag(err, args) from err
    placement, row = compare_with_references(graph, cluster, placer, seed=args.seed, timer=sim)
    if args.output:
        predicted = {**sim.time(graph, cluster, placement).to_dict(), "place_seconds": row["place_seconds"],
                     "mode": sim.mode}  # as gnplace place writes it
        with writing(args.output):
            save_placement(args.output, graph, placement, placer="policy", predicted=predicted)
    if args.json:
        seconds = {f"{key}_s": row[key] for key in STEP_SECONDS}  # named as evaluate's rows and finetune name them
        print_json({**row, **seconds, "checkpoint": str(placer.checkpoint), "output": args.output})
        return 0
    # auto's placement is a candidate where the samples are drawn around it, or in the portfolio (zeroshot.place), or
    # where every placement was timed
    with_auto = (placer.samples > 0 and placer.around) or placer.portfolio or row["choice"] == "every placement"
    among = ", auto's included" if with_auto else "; auto's not among them"
    how = (f"{row['choice']}: the fastest of {row['evaluations']} placements simulated{among}"
           if row["evaluations"] else "one device or no ops: the only placement")
    print(f"{printable_name(graph.name)} ({graph.num_ops} ops) on {printable_name(cluster.name)}: policy placed it in "
          f"{format_seconds(row['place_seconds'])} "
          f"({how})")
    for line in comparison_lines(row):
        print(line)
    if args.output:
        print(f"  written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
