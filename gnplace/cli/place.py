"""``gnplace place GRAPH --cluster C --placer NAME [-o placement.json]``: place a graph and save it.

GRAPH is a graph file, an ONNX file or ``module:factory`` (:mod:`gnplace.importers.sources`);
``-p policy`` places it zero-shot with the pretrained policy (``--checkpoint``, ``-O policy.samples=K``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from gnplace.cli.common import (
    add_input_shape_argument,
    add_optimizer_argument,
    add_option_argument,
    check_count,
    check_not_input,
    check_not_run_output,
    check_output_file,
    check_output_folder,
    check_shared_options,
    counted,
    file_path,
    input_shapes,
    option_files,
    parse_placer_options,
    print_json,
    printable_name,
    require_ops,
    whole_number,
)
from gnplace.cluster import load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph_io import write_together
from gnplace.limits import MAX_BUDGET
from gnplace.placement import check_placed, placement_file_bytes
from gnplace.placers import PLACERS, make_placer
from gnplace.placers.registry import check_placer_options
from gnplace.shipped import shipped_files
from gnplace.sim.bounds import require_memory
from gnplace.sim.simulator import Simulator
from gnplace.units import format_bytes, format_seconds


def add_parser(sub: Any) -> None:
    """Register ``place`` on the subparsers ``sub``."""
    p = sub.add_parser("place", help="place a graph with a placer and write the placement file",
                       description="Place GRAPH on a cluster with a registered placer; write op -> device with the "
                       "step time and memory the simulator predicts.")
    p.add_argument("graph", type=file_path,
                   help="graph file, ONNX file or MODULE:FACTORY (a function returning a module and inputs)")
    p.add_argument("--cluster", "-c", default="k80x4", help="preset or YAML file (default: k80x4)")
    p.add_argument("--placer", "-p", default="m_etf", help="placer name (default: m_etf)")
    p.add_argument("--budget", type=int, default=None,
                   help=f"timer evaluations for search placers (1 to {MAX_BUDGET:,}; default: the placer's own)")
    p.add_argument("--checkpoint", default=None, type=file_path,
                   help="policy checkpoint of learned placers (default: the shipped one)")
    add_input_shape_argument(p)
    add_optimizer_argument(p)
    p.add_argument("--seed", type=whole_number, default=0, help="seed (default: 0)")
    p.add_argument("--mode", choices=("default", "placeto"), default="default",
                   help="simulator mode (default: default)")
    p.add_argument("--output", "-o", default=None, help="placement file to write (default: print only)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (nor, where stderr is not a terminal, progress lines) of the placers that "
                   "show one (the searches, policy)")
    p.add_argument("--device-map", default=None, metavar="FILE",
                   help="also write the placement as a module-level device_map (JSON) for transformers' "
                   "from_pretrained and accelerate's dispatch_model; with MODULE:FACTORY, compare with accelerate's")
    p.add_argument("--device-map-root", default="", metavar="MODULE",
                   help="make the device_map's keys relative to this submodule, e.g. 'model' when the factory wraps "
                   "a transformers model in a module that computes its loss (default: the imported module)")
    p.add_argument("--algo", choices=("ppo", "reinforce"), default=None,
                   help="learning algorithm of a learned search placer (ppo's REINFORCE ablation: --algo reinforce)")
    add_option_argument(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gnplace place``."""
    from gnplace.importers.sources import load_graph_source

    # past MAX_BUDGET a search would run until killed; below 1 every placer that takes one refused it by its class
    check_count(args.budget, "--budget", minimum=1, maximum=MAX_BUDGET)
    PLACERS.resolve(args.placer)  # an unknown name first, before its --option items or the graph are read
    check_shared_options(args.placer, args.budget, args.checkpoint)  # never ignored silently
    options = parse_placer_options(args.option, [args.placer]).get(args.placer, {})
    if args.algo is not None and options.get("algo", args.algo) != args.algo:  # one would win silently
        raise InvalidArgument(f"--algo {args.algo} and -O {args.placer}.algo={options['algo']} differ: give one")
    if args.no_progress and options.get("progress") is True:  # --no-progress won silently
        raise InvalidArgument(f"--no-progress and -O {args.placer}.progress=true differ: give one")
    flags = {"algo": "--algo"} if args.algo is not None and "algo" not in options else {}
    check_placer_options(args.placer, {**options, **dict.fromkeys(flags)}, flags)  # before the graph is read
    if isinstance(options.get("out"), str) and options["out"]:  # a search's folder: refused before it runs
        check_output_folder(options["out"], f"-O {args.placer}.out")
        for flag, path in (("--output", args.output), ("--device-map", args.device_map)):
            check_not_run_output(path, options["out"], flag, f"-O {args.placer}.out")
    if args.output is not None:
        check_output_file(args.output, "--output")
        check_not_input(args.output, args.graph,  # the shipped checkpoints too: policy reads them by default
                        others=(args.cluster, args.checkpoint, args.device_map, *option_files(options),
                                *shipped_files()))
    if args.device_map_root and args.device_map is None:
        raise InvalidArgument("--device-map-root needs --device-map")
    if args.device_map is not None:
        check_output_file(args.device_map, "--device-map")
        if args.output and Path(args.output).resolve() == Path(args.device_map).resolve():
            raise InvalidArgument(f"--device-map {args.device_map}: is the --output file too; write to another file")
        check_not_input(args.device_map, args.graph, "--device-map",
                        others=(args.cluster, args.checkpoint, *option_files(options), *shipped_files()))
    shapes = input_shapes(args)
    module = None
    if args.device_map and ":" in args.graph and not Path(args.graph).exists():
        from gnplace.importers.sources import load_step_source, refuse_input_shapes

        if shapes:  # the step is loaded here, not through load_graph_source, which refuses them
            refuse_input_shapes(args.graph)
        step, module = load_step_source(args.graph, optimizer=args.optimizer or "sgd")
        graph = step.graph
    else:
        graph = load_graph_source(args.graph, input_shapes=shapes, optimizer=args.optimizer)
    require_ops(graph, args.graph)
    if args.device_map:  # refused before placing, and before --output is written
        from gnplace.execute.device_map import require_parameters

        require_parameters(graph, args.device_map_root)
    cluster = load_cluster(args.cluster)
    require_memory(graph, cluster)  # an impossible memory budget: refused before any placer runs
    sim = Simulator(args.mode)
    if args.algo is not None:
        options["algo"] = args.algo
    placer = make_placer(args.placer, timer=sim, budget=args.budget, checkpoint=args.checkpoint, **options)
    if args.no_progress and hasattr(placer, "progress"):  # as evaluate turns its rows' off
        placer.progress = False
    if hasattr(placer, "out_option"):  # its messages name its folder as typed here: -o is the placement file
        placer.out_option = f"-O {args.placer}.out"
        placer.resume_option = f"-O {args.placer}.resume=true"
    start = time.perf_counter()
    placement = check_placed(placer.place(graph, cluster, seed=args.seed), graph, cluster, args.placer)
    took = time.perf_counter() - start
    result = sim.time(graph, cluster, placement)
    predicted = {**result.to_dict(), "place_seconds": took, "mode": args.mode}
    outputs: list[tuple[str, bytes]] = []  # written together, all or none
    if args.output:
        outputs.append((args.output, placement_file_bytes(graph, placement, placer=args.placer, predicted=predicted)))
    compared: dict[str, float] = {}
    map_oom = False  # whether the device_map's simulated step runs a device out of memory
    if args.device_map:
        from gnplace.execute.device_map import to_device_map

        device_map = to_device_map(graph, placement, cluster, root=args.device_map_root, module=module)
        outputs.append((args.device_map, (json.dumps(device_map, indent=1) + "\n").encode("utf-8")))
    try:
        write_together(outputs)  # -o was replaced before a --device-map that could not be written failed
    except OSError as err:
        raise InvalidArgument(f"cannot write {os.fsdecode(err.filename)}: {err.strerror or err}") from err
    if args.device_map:
        from gnplace.exceptions import MissingDependency
        from gnplace.execute.device_map import compare_device_maps, from_device_map

        root = args.device_map_root  # the map as written, its keys as full paths again
        exported = {(f"{root}.{key}" if key else root) if root else key: value for key, value in device_map.items()}
        try:
            compared = compare_device_maps(graph, cluster, placement, module, sim, exported, root)
        except MissingDependency:
            compared = compare_device_maps(graph, cluster, placement, None, sim, exported, root)
        map_oom = sim.time(graph, cluster, from_device_map(graph, cluster, exported, root)).is_oom
    if args.json:
        extra = {"device_map": args.device_map, "device_map_step_s": compared, "device_map_oom": map_oom} \
            if args.device_map else {}
        print_json({"graph": graph.name, "ops": graph.num_ops, "groups": graph.num_groups, "cluster": cluster.name,
                    "placer": args.placer, "output": args.output,
                    **predicted, **extra})
        return 0
    counts = np.bincount(placement.devices, minlength=cluster.num_devices)
    shown = [k for k in range(cluster.num_devices) if counts[k] or cluster.num_devices <= 16]
    per_device = ", ".join(f"{printable_name(cluster.device_names[k])} {counted(int(counts[k]), 'op')} / "
                           f"{format_bytes(result.peak_memory[k])}" for k in shown)
    if len(shown) < cluster.num_devices:  # a large cluster: the devices used, and how many are not
        per_device += f"; {cluster.num_devices - len(shown)} of {cluster.num_devices} devices unused"
    oom = "  OUT OF MEMORY" if result.is_oom else ""
    print(f"{printable_name(graph.name)} on {printable_name(cluster.name)} by {printable_name(args.placer)} in "
          f"{format_seconds(took)}: step {format_seconds(result.step_time)}{oom}")
    print(f"  {per_device}")
    needed = getattr(placer, "last_zero_shot_budget_needed", None)
    if needed is not None:  # fine-tuning's zero-shot candidate, skipped without a word (gnplace finetune says it)
        print(f"  zero-shot placement not timed: its candidates and one PPO batch need --budget {needed} or more")
    if args.output:
        print(f"  written to {args.output}")
    if args.device_map:
        print(f"  device_map written to {args.device_map}; simulated step times:")
        width = max(20, *(len(name) for name in compared))  # accelerate_sequential is 21 characters
        for name, seconds in compared.items():
            over = "  OUT OF MEMORY" if name == "device_map" and map_oom else ""
            print(f"    {name:<{width}} {format_seconds(seconds)}{over}")
        if module is None and len(device_map) > 1:  # t5_small.gnpg split T5Block into its layers without a word
            print("  from a graph file, which keeps no module: a block the model keeps on one device "
                  "(its _no_split_modules) may be split; place MODULE:FACTORY to keep such blocks whole")
        wrapper = _single_top_module(device_map) if not args.device_map_root else None
        if wrapper:
            print(f"  every key is under {wrapper!r}: --device-map-root {wrapper} writes them relative to it, "
                  "as from_pretrained of that submodule names them")
    return 0


def _single_top_module(device_map: dict[str, Any]) -> str | None:
    """The first path component every key of a split ``device_map`` shares (a loss wrapper's model), if any."""
    tops = {key.split(".")[0] for key in device_map}
    if len(device_map) < 2 or len(tops) != 1 or "" in device_map:
        return None
    return next(iter(tops))
