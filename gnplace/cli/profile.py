"""``gnplace profile MODULE:FACTORY [--timer dist|local] -o OUT``: calibrate the simulator on real devices."""

from __future__ import annotations

import argparse
import os
from typing import Any

from gnplace.cli.common import add_optimizer_argument, device_names, whole_number
from gnplace.limits import json_text


def add_parser(sub: Any) -> None:
    """Register ``profile`` on the subparsers ``sub``."""
    p = sub.add_parser(
        "profile", help="measure ops and links on real devices; write a calibrated graph and cluster",
        description="Time every op of the model's training step on each real device and the links between them, "
        "write OUT/graph.gnpg (measured op seconds) and OUT/cluster.yaml, then measure --placements placements "
        "(that split the step: each device kind's ops are scaled to the median of its measured one-device steps), "
        "each --rounds times in turn, and report the simulator's error against their medians (OUT/fidelity.json).",
    )
    p.add_argument("graph", help="MODULE:FACTORY (a function returning (module, example_inputs), or (module, "
                                 "example_inputs, loss))")
    add_optimizer_argument(p, onnx=False, graph_files=False, real_steps=True)  # MODULE:FACTORY alone
    p.add_argument("--timer", default="dist", choices=["dist", "local"],
                   help="dist: one torch.distributed rank per device (default); local: devices of this process")
    p.add_argument("--ranks", type=int, default=None, help="dist: ranks (devices) (default: 2)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads per device (default: 1)")
    p.add_argument("--devices", default=None, type=device_names,
                   help="local: torch devices, e.g. cuda:0,cpu (default: cpu, and cuda:0 where torch sees a GPU)")
    p.add_argument("--repeats", type=int, default=5, help="timed steps per measurement (default: 5)")
    p.add_argument("--placements", type=int, default=20,
                   help="placements to check the simulator on (0: none; default: 20)")
    p.add_argument("--rounds", type=int, default=None,
                   help="measurements of each checked placement, in turn; the median is its step (default: 3)")
    p.add_argument("--anchor-rounds", type=int, default=5,
                   help="measurements of each device kind's one-device step; its ops are scaled to the median "
                   "(default: 5)")
    p.add_argument("--probe-rounds", type=int, default=None,
                   help="dist: rounds of the link and message probes; their medians are kept (default: 5)")
    p.add_argument("--seed", type=whole_number, default=0,
                   help="seed of the placements checked (default: 0)")
    p.add_argument("-o", "--out", default="out/profile", help="output folder (default: out/profile)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(run=run)


def _check_measurement_flags(args: argparse.Namespace) -> None:
    """Refuse a measurement setting out of its range by its flag, before the model is traced or a rank started.

    One message named all six flags whichever was wrong, and --repeats past 10,000 or more --threads than cores
    failed once the model was traced, in the timers' words ("need warmup and repeats <= 10,000 steps").

    Raises:
        InvalidArgument: naming the flag, its range and the value given.
    """
    from gnplace.cli.common import check_count
    from gnplace.execute.base import MAX_REPEATS
    from gnplace.workers import available_cores

    check_count(args.ranks, "--ranks", minimum=1)
    check_count(args.threads, "--threads", minimum=1, maximum=available_cores())  # the timers' own bound
    check_count(args.repeats, "--repeats", minimum=1, maximum=MAX_REPEATS)
    for flag in ("--rounds", "--anchor-rounds", "--probe-rounds"):
        check_count(getattr(args, flag[2:].replace("-", "_")), flag, minimum=1)


def run(args: argparse.Namespace) -> int:
    """Run ``gnplace profile``, holding OUT's run lock (:mod:`gnplace.runlock`) while it runs.

    Two runs into one folder (``out/profile``, the default) left one model's graph and cluster beside the other's
    ``fidelity.json``; the second is refused in one line.
    """
    from gnplace.cli.common import check_output_folder
    from gnplace.runlock import folder_lock

    check_output_folder(args.out)  # a file or an empty name: its own line, before the lock makes the folder
    with folder_lock(args.out, "--out"):  # a refused run removes the folder it made
        return _profile(args)


def _profile(args: argparse.Namespace) -> int:
    """``gnplace profile`` in its output folder."""
    from pathlib import Path

    import numpy as np

    from gnplace.cli.common import check_count, check_output_file, check_output_folder, print_json, writing
    from gnplace.exceptions import InvalidArgument
    from gnplace.execute.base import real_timer
    from gnplace.execute.profile import (
        MAX_FIDELITY_PLACEMENTS,
        calibrate,
        fidelity_placements,
        parse_torch_devices,
        simulator_error,
    )
    from gnplace.graph_io import refuse_link, write_atomically
    from gnplace.importers.sources import load_step_source
    from gnplace.units import format_rate, format_seconds

    if args.timer == "local" and args.ranks is not None:  # each timer has its own way to say its devices
        raise InvalidArgument("--ranks is for --timer dist; --timer local runs on --devices")
    if args.timer == "dist" and args.devices is not None:
        raise InvalidArgument("--devices is for --timer local; --timer dist runs --ranks CPU ranks")
    if args.timer == "local" and args.probe_rounds is not None:  # never ignored silently
        raise InvalidArgument("--probe-rounds is for --timer dist (its link and message probes); --timer local has "
                              "none")
    if args.placements == 0 and args.rounds is not None:
        raise InvalidArgument("--rounds measures each placement --placements checks, and --placements is 0")
    from gnplace.execute.dist import launched_by_torchrun, serve_unless_rank_zero

    if args.timer == "dist" and launched_by_torchrun():
        # across hosts: rank 0 profiles and the others run its commands (rank 1 refused in one line, and rank 0
        # waited for it until killed); every rank refuses a --ranks that is not torchrun's count of them
        world = int(os.environ["WORLD_SIZE"])
        if args.ranks is not None and args.ranks != world:
            raise InvalidArgument(f"--ranks {args.ranks}: torchrun started {world} processes, one rank each; give "
                                  f"--ranks {world} or leave it out")
        args.ranks = world
    args.ranks = 2 if args.ranks is None else args.ranks
    args.rounds = 3 if args.rounds is None else args.rounds
    args.probe_rounds = 5 if args.probe_rounds is None else args.probe_rounds
    _check_measurement_flags(args)
    check_count(args.placements, "--placements", maximum=MAX_FIDELITY_PLACEMENTS)  # each measured --rounds times
    if args.timer == "dist" and serve_unless_rank_zero():
        return 0  # (served after the checks of the settings, which rank 0 makes too: a refused run starts no rank)
    check_output_folder(args.out)
    for name in ("graph.gnpg", "cluster.yaml", "fidelity.json"):  # before minutes of measuring, not after
        refuse_link(Path(args.out, name), "profile")  # a shared folder's link: written through, out of the folder
        check_output_file(Path(args.out, name), "--out")  # a folder of that name: refused here, not once measured
    devices = args.devices.split(",") if args.devices else None
    if devices is not None:
        parse_torch_devices(devices)  # fail early on a name torch does not know
    step, _ = load_step_source(args.graph, optimizer=args.optimizer or "sgd")
    timer = real_timer(args.timer, step, devices=devices, threads=args.threads, repeats=args.repeats)
    try:
        calibration = calibrate(step, timer=timer, devices=devices, ranks=args.ranks, threads=args.threads,
                                repeats=args.repeats, name=f"profiled-{args.timer}", anchor_rounds=args.anchor_rounds,
                                probe_rounds=args.probe_rounds)
        with writing(args.out):
            # an earlier run's fidelity.json describes another calibration: gone before this one is saved, so
            # that a failed or interrupted check does not leave it beside the new graph and cluster
            Path(args.out, "fidelity.json").unlink(missing_ok=True)
            graph_path, cluster_path = calibration.save(args.out)
        rows = []
        if args.placements > 0:
            wanted = fidelity_placements(calibration.graph, calibration.cluster, args.placements, seed=args.seed)
            rows = simulator_error(calibration, timer, wanted, rounds=args.rounds)
    finally:
        if hasattr(timer, "close"):
            timer.close()
    # a placement out of memory was not timed: no measured step, no error (simulator_error's None)
    timed = [r for r in rows if not r["oom"]]
    report = {"graph": str(graph_path), "cluster": str(cluster_path), "links": calibration.links,
              "one_device_scale": calibration.scale, "message_cpu_s": calibration.message_cpu, "placements": rows,
              "median_abs_error": float(np.median([r["error"] for r in timed])) if timed else None}
    with writing(Path(args.out, "fidelity.json")):
        write_atomically(Path(args.out, "fidelity.json"), (json_text(report, indent=1) + "\n").encode("utf-8"))
    if args.json:
        print_json(report)
        return 0
    print(f"wrote {graph_path} (measured op seconds) and {cluster_path}")
    for pair, link in calibration.links.items():
        print(f"  link {pair}: latency {format_seconds(link['latency'])}, bandwidth {format_rate(link['bandwidth'])}")
    overhead = {dev.kind: dev.launch_overhead for dev in calibration.cluster.devices}
    for kind, factor in calibration.scale.items():
        print(f"  {kind}: the one-device step measured {factor:.2f}x the ops timed one by one (ops scaled to it); "
              f"other models get {format_seconds(overhead[kind])} per op on top of the measured rates")
    if calibration.message_cpu:
        print(f"  a message costs each end {format_seconds(calibration.message_cpu)} of compute while the other end "
              "computes (both ranks' communication threads need a core)")
    if rows:
        print(f"{'placement':<16} {'measured':>13} {'simulated':>13} {'error':>7}")
        for r in rows:
            measured = f"{'out of memory' if r['oom'] else format_seconds(r['measured_s']):>13}"
            error = f"{'-':>7}" if r["oom"] else f"{r['error']:7.1%}"
            print(f"{r['name']:<16} {measured} {format_seconds(r['simulated_s']):>13} {error}")
        if timed:
            print(f"median absolute error of the simulator: {report['median_abs_error']:.1%} "
                  "(placements that split the step; one-device steps are what the calibration is scaled to)")
        else:
            print("every checked placement ran out of memory: nothing measured to compare the simulator with")
    elif args.placements > 0:
        print("no placement splits this step over these devices (one device, or one colocation group): "
              "the simulator's one-device step is the measured one by construction")
    return 0
