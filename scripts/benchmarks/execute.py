"""Real steps and exports: the simulator's fidelity after calibration, ``gnplace.apply``'s cost, ``device_map``."""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np

from gnplace.cli.common import device_names, whole_number
from gnplace.limits import json_text
from gnplace.sim.timer import geomean

from .common import (
    add_command,
    check_clusters,
    check_output_folder,
    check_placers,
    check_step_sources,
    median_seconds,
)


def check_graph_names(sources: list[str]) -> None:
    """Refuse two ``--graphs`` of one factory name (``a:mlp b:mlp``), and resolve each, before any run.

    A graph's calibration, fine-tuning and entry in ``fidelity.json`` are kept under its factory's name
    (``OUT/mlp``, ``graphs.mlp``): a second ``mlp`` would overwrite the first's. The names stay the
    folders' (what ``docs/`` and ``gnplace profile`` show), so a second model of a name runs in another ``--out``.

    Raises:
        InvalidArgument: two sources of one name, or a source that is not ``MODULE:FACTORY`` or not found.
    """
    from gnplace.exceptions import InvalidArgument

    by_name: dict[str, str] = {}
    for source in sources:
        name = source.rpartition(":")[2]
        if name in by_name:
            raise InvalidArgument(f"--graphs {by_name[name]} {source}: both are named {name!r}, and each graph's "
                                  f"results go to OUT/{name}: run the second with another --out")
        by_name[name] = source
    check_step_sources(sources)


def bench_fidelity(args: argparse.Namespace) -> dict[str, Any]:
    """The simulator against real two-rank steps after calibration, and fine-tuning on real steps."""
    from gnplace.execute.base import real_timer
    from gnplace.execute.profile import calibrate, fidelity_placements, simulator_error
    from gnplace.finetune import finetune
    from gnplace.graph_io import write_atomically
    from gnplace.importers.sources import load_step_source

    check_graph_names(args.graphs)  # refused before the first calibration, not after it
    if args.devices is not None and args.timer != "local":  # taken, recorded in fidelity.json, and never used
        from gnplace.exceptions import InvalidArgument

        raise InvalidArgument("--devices is for the local timer (--timer local); the dist timer takes none (its "
                              "ranks are this machine's CPUs)")
    out = check_output_folder(args.out)
    devices = args.devices.split(",") if args.devices else None
    if devices is not None:  # a bad name refused here, not once the folder is made and the first step recorded
        from gnplace.execute.profile import parse_torch_devices

        parse_torch_devices(devices)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"graphs": {}, "timer": args.timer, "devices": devices}
    errors: list[float] = []
    biases: list[float] = []
    for source in args.graphs:
        step, _ = load_step_source(source)
        name = source.rpartition(":")[2]
        timer = real_timer(args.timer, step, devices=devices, threads=args.threads, repeats=args.repeats)
        try:
            calibration = calibrate(step, timer=timer, devices=devices, repeats=args.repeats,
                                    threads=args.threads, name=f"{args.timer}-{name}", anchor_rounds=args.anchor_rounds,
                                    probe_rounds=args.probe_rounds)
            calibration.save(out / name)
            wanted = fidelity_placements(calibration.graph, calibration.cluster, args.placements, seed=args.seed)
            rows = simulator_error(calibration, timer, wanted, rounds=args.rounds)
        finally:
            if hasattr(timer, "close"):
                timer.close()
        # a placement out of memory was not timed: no measured step, no error (simulator_error's None)
        timed = [r for r in rows if not r["oom"]]
        errors += [r["error"] for r in timed]
        signed = [r["simulated_s"] / r["measured_s"] - 1.0 for r in timed]  # > 0: the simulator predicts too slow
        biases += signed
        entry: dict[str, Any] = {"links": calibration.links, "message_cpu_s": calibration.message_cpu, "placements": rows,
                                 "median_abs_error": statistics.median(r["error"] for r in timed) if timed else None,
                                 "median_signed_error": statistics.median(signed) if signed else None}
        if args.finetune_budget:
            shutil.rmtree(out / name / "finetune", ignore_errors=True)  # this run's calibration: fine-tune anew
            tuned = finetune(source, str(out / name / "cluster.yaml"), timer=args.timer, budget=args.finetune_budget,
                             samples=8, epochs=2, repeats=args.repeats, costs=str(out / name / "graph.gnpg"),
                             devices=devices if args.timer == "local" else None, out=out / name / "finetune",
                             progress=False)
            assert tuned is not None
            entry["finetune"] = {k: v for k, v in tuned.items() if k != "history"}
        summary["graphs"][name] = entry
        print(json_text({"graph": name, "median_abs_error": entry["median_abs_error"],
                          "median_signed_error": entry["median_signed_error"],
                          **({"finetune_s": entry["finetune"]["step_time_s"], "single_s": entry["finetune"]["single_s"],
                              "round_robin_s": entry["finetune"]["round_robin_s"], "auto_s": entry["finetune"]["auto_s"]}
                             if "finetune" in entry else {})}), flush=True)
    summary["median_abs_error"] = statistics.median(errors) if errors else None
    summary["median_signed_error"] = statistics.median(biases) if biases else None
    summary["placements"] = len(errors)
    write_atomically(out / "fidelity.json", json.dumps(summary, indent=1).encode())  # a kill never truncates it
    return summary


def _training_step(module: Any, run: Any, inputs: tuple[Any, ...]) -> None:
    """Zero ``module``'s gradients, then ``run(*inputs).backward()``."""
    module.zero_grad(set_to_none=True)
    run(*inputs).backward()


def bench_apply(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Seconds of a training step of each model eagerly and placed on one CPU by ``gnplace.apply`` (one thread).

    The eager step is the factory's loss of the module's output where the factory gives one (a module that
    returns logits): ``module(*inputs).backward()`` was a RuntimeError traceback there (its output no scalar).
    """
    import torch

    from gnplace.cluster import load_cluster
    from gnplace.execute.apply import apply
    from gnplace.importers.sources import load_model_source
    from gnplace.importers.torch import import_step
    from gnplace.placement import Placement

    check_step_sources(args.models)  # refused before the first model is timed, not after it
    torch.set_num_threads(1)
    rows = []
    for source in args.models:
        module, inputs, loss = load_model_source(source)
        step = import_step(module, inputs, loss=loss, name=source.rpartition(":")[2])
        one_device = Placement(np.zeros(step.graph.num_ops, dtype=np.int64), load_cluster("cpu_gpu"))
        placed = apply(module, one_device, inputs, loss=loss, devices=["cpu", "cpu"], step=step)  # all on device 0

        def eager(*x: Any, module: Any = module, loss: Any = loss) -> Any:
            return module(*x) if loss is None else loss(module(*x))

        eager_step = functools.partial(_training_step, module, eager, inputs)
        placed_step = functools.partial(_training_step, module, placed, inputs)
        best = {"eager": np.inf, "placed": np.inf}
        steps: list[tuple[str, Callable[[], None]]] = [("eager", eager_step), ("placed", placed_step)]
        for r in range(args.rounds):  # alternate, so that the machine's drift falls on both alike
            for name, fn in steps if r % 2 == 0 else steps[::-1]:
                best[name] = min(best[name], median_seconds(fn, args.repeat))
        row = dict(model=source, ops=len(placed.program.ops), eager_s=best["eager"], placed_s=best["placed"],
                   ratio=best["placed"] / best["eager"])
        rows.append(row)
        print(json_text(row), flush=True)
    print("\n| model | ops run | eager step (ms) | placed on one CPU (ms) | placed / eager |\n| --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['model'].rpartition(':')[2]} | {row['ops']} | {row['eager_s'] * 1e3:.2f} | "
              f"{row['placed_s'] * 1e3:.2f} | {row['ratio']:.2f} |")
    return rows


def bench_device_map(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Gnplace's placements as module-level device_maps against accelerate's and transformers' own (simulator)."""
    import warnings

    from gnplace import load_cluster
    from gnplace.exceptions import InvalidArgument
    from gnplace.execute.device_map import compare_device_maps
    from gnplace.families import draw
    from gnplace.families.realmodels import REAL_MODELS, build_model
    from gnplace.graph_io import load_graph
    from gnplace.importers.torch import import_step
    from gnplace.placers import get_placer
    from gnplace.shipped import shipped_path

    if args.per_family < 1:  # models are drawn, not read: there is no "all of them" (--per-family 0 of the others)
        raise InvalidArgument(f"--per-family must be at least 1 (models drawn per family), got {args.per_family}")
    unknown = [name for name in args.real_models if name not in REAL_MODELS]
    if unknown:
        raise InvalidArgument(f"unknown --real-models {', '.join(unknown)} (choose from: {', '.join(REAL_MODELS)})")
    if not args.families and not args.real_models:
        raise InvalidArgument("no models: no --families and no --real-models")
    check_placers(args.placers)  # refused before the first model is drawn, not after it
    check_clusters(args.clusters)

    def family_model(family: str, seed: int) -> tuple[str, Any, Any]:
        module, inputs = draw(family, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "families", module, import_step(module, inputs, name=f"{family}_{seed}").graph

    def real_model(name: str) -> tuple[str, Any, Any]:  # the shipped graph is this module's import
        return "real", build_model(name)[0], load_graph(shipped_path(f"datasets/real/{name}.gnpg"))

    makers: list[Callable[[], tuple[str, Any, Any]]] = [
        functools.partial(family_model, family, seed) for family in args.families for seed in range(args.per_family)]
    makers += [functools.partial(real_model, name) for name in args.real_models]
    rows = []
    for make in makers:
        models, module, graph = make()
        for cluster_name in args.clusters:
            cluster = load_cluster(cluster_name)
            for placer_name in args.placers:
                placement = get_placer(placer_name).place(graph, cluster, seed=0)
                found = compare_device_maps(graph, cluster, placement, module)
                row = {"models": models, "graph": graph.name, "ops": graph.num_ops, "cluster": cluster.name,
                       "placer": placer_name, **found}
                rows.append(row)
                print(json_text(row), flush=True)
    return rows


def device_map_table(rows: list[dict[str, Any]]) -> str:
    """Geometric means over the placement at op granularity, per model set, cluster and placer.

    A column some rows lack (transformers' map of a model that is not a transformers model, a map
    accelerate offloads to disk) is the mean over the rows that have it, with their count.
    """
    columns = ("device_map", "accelerate_auto", "accelerate_sequential", "transformers_auto")
    lines = ["| models | cluster | placer | graphs | its device_map | accelerate auto (= balanced) | "
             "accelerate sequential | from_pretrained auto |", "| --- " * 8 + "|"]
    for key in sorted({(r.get("models", "families"), r["cluster"], r["placer"]) for r in rows}):
        sel = [r for r in rows if (r.get("models", "families"), r["cluster"], r["placer"]) == key]
        cells = []
        for column in columns:
            have = [r[column] / r["placement"] for r in sel if column in r]
            cell = "-" if not have else f"{geomean(have):.3f}"
            cells.append(cell if len(have) in (0, len(sel)) else f"{cell} ({len(have)})")
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {len(sel)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_fidelity(args: argparse.Namespace) -> int:
    """``fidelity``: the simulator against real steps on a two-rank CPU cluster (gloo, one thread a rank).

    For each of ``--graphs`` small models: ``gnplace profile`` calibration (op seconds measured per op
    and scaled to the median of ``--anchor-rounds`` measurements of the one-device step, link
    bandwidth, and link latency and message cost from the medians of ``--probe-rounds`` probes), then
    ``--placements`` placements that split the step (the fast placers', random ones) measured
    ``--rounds`` times each, in turn, with :class:`~gnplace.execute.dist.DistTimer`, and simulated.
    Reported: the median absolute relative error of the simulator against each placement's median
    measurement; with ``--finetune-budget``, whether fine-tuning's best measured placement beats
    ``single`` and ``round_robin``. ``--timer local --devices cuda:0,cpu`` measures the devices of
    this process instead.
    """
    fidelity = bench_fidelity(args)
    if fidelity["median_abs_error"] is None:
        print("no placement splits these steps over these devices: nothing to check the simulator on")
    else:
        print(f"median absolute error over {fidelity['placements']} placements that split the step: "
              f"{fidelity['median_abs_error']:.1%} (median signed error {fidelity['median_signed_error']:+.1%}: "
              "simulated over measured, minus 1)")
    return 0


def run_apply(args: argparse.Namespace) -> int:
    """``apply``: what running a training step op by op costs.

    For each of ``--models`` (``module:factory``), the training step (zero the gradients, loss,
    backward) of the module eagerly and of ``gnplace.apply(module, placement)`` with every op on one
    CPU, in ``--rounds`` alternating rounds of ``--repeat`` steps each, one thread. Reported per
    model: the best round's median step of each and their quotient (placed over eager).
    """
    bench_apply(args)
    return 0


def run_device_map(args: argparse.Namespace) -> int:
    """``device-map``: placements exported as module-level ``device_map`` dicts, against accelerate's own.

    Models drawn from the three families, and the real models (transformers' GPT-2, BERT, T5, ViT and
    ResNet-50 with their shipped graphs), are placed by ``auto`` and ``policy``; reported: each
    placement's step time as a module-level ``device_map`` (what accelerate would run) and that of
    the maps accelerate makes for the cluster's devices and memories, over the placement at op
    granularity (simulator): ``"auto"``, which is ``"balanced"`` (what ``from_pretrained(device_map="auto")``
    and ``load_checkpoint_and_dispatch`` make: memory spread evenly over the GPUs, the model's
    ``_no_split_modules`` kept whole), ``"sequential"`` (each device filled in module order), and for
    a transformers model the map ``from_pretrained(device_map="auto")`` makes (transformers' own balancing).
    """
    print(device_map_table(bench_device_map(args)))
    return 0


def add_parsers(sub: Any) -> None:
    """The ``fidelity``, ``apply`` and ``device-map`` subcommands."""
    fid = add_command(sub, "fidelity", run_fidelity, "simulator against real two-rank steps after calibration")
    fid.add_argument("--graphs", nargs="+", default=[f"gnplace.execute.examples:{n}" for n in ("mlp", "convnet", "branchy")],
                     metavar="MODULE:FACTORY",
                     help="the models measured, each a function returning (module, example_inputs) or (module, "
                          "example_inputs, loss) (default: gnplace.execute.examples:mlp, :convnet and :branchy)")
    fid.add_argument("--placements", type=int, default=8,
                     help="placements per graph that split the step, the fast placers' and random ones (default: 8)")
    fid.add_argument("--repeats", type=int, default=7,
                     help="timed steps per measurement, the median kept (default: 7)")
    fid.add_argument("--rounds", type=int, default=5,
                     help="measurements of each placement, in turn; the median is its step (default: 5)")
    fid.add_argument("--anchor-rounds", type=int, default=5,
                     help="calibration: measurements of the one-device step, the median anchored to (default: 5)")
    fid.add_argument("--probe-rounds", type=int, default=5,
                     help="calibration: rounds of the link and message probes, the medians kept (default: 5)")
    fid.add_argument("--finetune-budget", type=int, default=60,
                     help="real-step evaluations of fine-tuning on each graph (default: 60; 0: no fine-tuning)")
    fid.add_argument("--seed", type=whole_number, default=0,
                     help="seed of the placements measured (default: 0)")
    fid.add_argument("--timer", default="dist", choices=["dist", "local"],
                     help="dist: two gloo ranks of one thread (default); local: --devices of this process")
    fid.add_argument("--devices", default=None, type=device_names,
                     help="local: torch devices, e.g. cuda:0,cpu (default: cpu + cuda:0, cpu alone without a GPU)")
    fid.add_argument("--threads", type=int, default=1,
                     help="torch CPU threads of each dist rank, or of the local cpu device (default: 1)")
    fid.add_argument("--out", "-o", default="out/bench_fidelity",
                     help="folder of fidelity.json and of each graph's calibration and fine-tuning "
                          "(default: out/bench_fidelity)")
    app = add_command(sub, "apply", run_apply, "a step placed by gnplace.apply on one CPU against eager PyTorch's")
    app.add_argument("--models", nargs="+", default=[f"gnplace.execute.examples:{name}" for name in
                                                      ("mlp", "convnet", "branchy", "transformer")],
                     metavar="MODULE:FACTORY",
                     help="the models timed, each a function returning (module, example_inputs) or (module, "
                          "example_inputs, loss) (default: gnplace.execute.examples:mlp, :convnet, :branchy and "
                          ":transformer)")
    app.add_argument("--rounds", type=int, default=6,
                     help="rounds, eager and placed in turn, the best round's median kept (default: 6)")
    app.add_argument("--repeat", type=int, default=20,
                     help="training steps timed per round, the median kept (default: 20)")
    dm = add_command(sub, "device-map", run_device_map, "placements as device_maps against accelerate's and from_pretrained's")
    dm.add_argument("--families", nargs="*", default=["cifar10", "ptb", "nmt"],
                    help="families models are drawn from (default: all three; none: no name)")
    dm.add_argument("--per-family", type=int, default=3, metavar="N",
                    help="models drawn per family, seeds 0 to N - 1 (default: 3; at least 1)")
    dm.add_argument("--real-models", nargs="*", default=["gpt2", "bert_base", "t5_small", "vit_base", "resnet50"],
                    metavar="NAME", help="real models, with their shipped graphs (default: all five; none: no name)")
    dm.add_argument("--clusters", nargs="+", default=["k80x4", "v100x8", "tight4"],
                    help="cluster presets or YAML files, each placed on (default: k80x4 v100x8 tight4)")
    dm.add_argument("--placers", nargs="+", default=["auto", "policy"],
                    help="placers whose placements are exported as device_maps (default: auto policy)")
