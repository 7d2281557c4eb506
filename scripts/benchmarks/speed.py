"""Speed of the simulator, the importer and coarsening, and the commands' peak memory, on up to 100,000 ops."""

from __future__ import annotations

import argparse
import functools
import time
from typing import Any

import numba
import numpy as np

from gnplace.cli.common import print_json
from gnplace.cluster import Cluster, Device
from gnplace.limits import json_text
from gnplace.sim import Simulator
from gnplace.toy import layered_graph

from .common import add_command, check_clusters, check_output_folder, check_placers, large_graph, median_seconds


def k80_cluster(num_devices: int) -> Cluster:
    """``num_devices`` K80 GPUs on Placeto's channel (the k80x4 preset generalised)."""
    from gnplace.cluster import DEVICE_KINDS, LINK_KINDS

    devices = [Device(f"gpu{k}", "k80", **DEVICE_KINDS["k80"]) for k in range(num_devices)]
    link = LINK_KINDS["placeto"]
    return Cluster(devices, np.full((num_devices,) * 2, link["bandwidth"]), np.full((num_devices,) * 2, link["latency"]),
                   name=f"k80x{num_devices}")


def bench_sim(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Time single and batched simulator evaluations."""
    graph = layered_graph(args.ops, seed=0)
    cluster = k80_cluster(args.devices)
    rng = np.random.default_rng(0)
    order = graph.topological_order()
    blocks = np.empty(graph.num_ops, dtype=np.int64)
    blocks[order] = np.arange(graph.num_ops) * args.devices // graph.num_ops
    placements = {
        "one device": np.zeros(graph.num_ops, dtype=np.int64),
        "blocks": blocks,
        "random": rng.integers(0, args.devices, graph.num_ops),
    }
    rows = []
    for mode in ("default", "placeto"):
        sim = Simulator(mode)
        for name, placement in placements.items():
            seconds = median_seconds(functools.partial(sim.time, graph, cluster, placement), args.repeat)
            rows.append(dict(mode=mode, placement=name, call="time", ms_per_eval=seconds * 1e3))
        batch = rng.integers(0, args.devices, (args.batch, graph.num_ops))
        seconds = median_seconds(functools.partial(sim.time_batch, graph, cluster, batch), max(3, args.repeat // 50))
        rows.append(dict(mode=mode, placement=f"random x{args.batch}", call=f"time_batch ({numba.get_num_threads()} threads)",
                         ms_per_eval=seconds * 1e3 / args.batch))
    return rows


def bench_import(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Time ``from_module`` (record + convert) on a cifar10 network of about ``--ops`` ops."""
    import torch

    from gnplace.families import cifar10
    from gnplace.importers.torch import from_module

    torch.set_num_threads(1)
    rows = []
    for layers in args.layers:
        model, inputs = cifar10.sample(np.random.default_rng(0), layers=layers, channels=20, batch=32)
        start = time.perf_counter()
        graph = from_module(model, inputs)
        seconds = time.perf_counter() - start
        rows.append(dict(family="cifar10", layers=layers, ops=graph.num_ops, seconds=seconds))
    return rows


def bench_scale(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Coarsen to ``--groups`` groups, place with m_etf, expand and simulate, for growing graphs."""
    from gnplace.cluster import load_cluster
    from gnplace.coarsen import coarsen
    from gnplace.placers import get_placer

    cluster = load_cluster(args.cluster)
    cache = check_output_folder(args.cache, "--cache")  # a file there said only "FILE: File exists"
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    for ops in args.ops:
        graph = large_graph(ops, cache)
        sim = Simulator()
        sim.time(graph, cluster, np.zeros(graph.num_ops, dtype=np.int64))  # compile and prepare outside the clock
        t0 = time.perf_counter()
        coarse = coarsen(graph, args.groups, cluster)
        t1 = time.perf_counter()
        placement = get_placer("m_etf").place(coarse.graph, cluster)
        t2 = time.perf_counter()
        full = coarse.expand(placement)
        result = sim.time(graph, cluster, full)
        t3 = time.perf_counter()
        row = dict(ops=graph.num_ops, units=graph.num_groups, groups=coarse.graph.num_groups, coarse_nodes=coarse.graph.num_ops,
                   coarsen_s=t1 - t0, place_s=t2 - t1, expand_simulate_s=t3 - t2, total_s=t3 - t0,
                   step_ms=result.step_time * 1e3, oom=result.is_oom)
        if graph.num_ops <= args.full_up_to:
            t4 = time.perf_counter()
            direct = get_placer("m_etf").place(graph, cluster)
            row["full_m_etf_s"] = time.perf_counter() - t4
            row["full_m_etf_step_ms"] = sim.time(graph, cluster, direct).step_time * 1e3
            row["coarsening_cost_pct"] = (row["step_ms"] / row["full_m_etf_step_ms"] - 1) * 100
        rows.append(row)
        print(json_text(row), flush=True)
    return rows


def bench_devices(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Seconds of what every placement on a K80 cluster makes first, for growing device counts.

    Per count of ``--devices``: the op-time matrix (``op_times``), a new simulator's first step (its prepared
    arrays and one simulation, every op on one device), the list scheduler's setup as the placers make it
    (``ListSchedule`` on the distinct op-time columns, group times included) and coarsening to 1,000 decision nodes (``coarsen_within``), medians of ``--repeat`` calls.
    """
    from gnplace.coarsen import coarsen_within
    from gnplace.placers.listsched import ListSchedule
    from gnplace.sim.costmodel import op_time_columns, op_times

    graph = layered_graph(args.ops, seed=0)
    rows = []
    for num_devices in args.devices:
        cluster = k80_cluster(num_devices)
        columns, column = op_time_columns(graph, cluster)
        one_device = np.zeros(graph.num_ops, dtype=np.int64)
        row = dict(ops=graph.num_ops, devices=num_devices,
                   op_times_s=median_seconds(functools.partial(op_times, graph, cluster), args.repeat),
                   simulator_s=median_seconds(functools.partial(_first_step, graph, cluster, one_device), args.repeat),
                   list_schedule_s=median_seconds(
                       functools.partial(ListSchedule, graph, cluster, columns, min_speed=0.5, column=column),
                       args.repeat),
                   coarsen_s=median_seconds(functools.partial(coarsen_within, graph, 1000, cluster), args.repeat))
        rows.append(row)
        print(json_text(row), flush=True)
    return rows


def bench_devices_place(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Seconds of each of ``--placers`` on :func:`large_graph`'s graph of about ``--ops`` ops, per count of ``--devices``.

    One call each, after one on a small graph (numba's compilation is not counted); each row also holds the step time
    (ms) and a digest of the placement (the first 16 hex digits of the SHA-256 of its devices as int64), so that two
    versions of a placer can be checked for the same result, and how many devices it uses.
    """
    import hashlib

    from gnplace.placers.registry import make_placer

    check_placers(args.placers)  # a later unknown one was met after the first ones were timed
    cache = check_output_folder(args.cache, "--cache")
    cache.mkdir(parents=True, exist_ok=True)
    graph, sim = large_graph(args.ops, cache), Simulator()
    rows = []
    for name in args.placers:
        make_placer(name, timer=sim).place(layered_graph(50, seed=0), k80_cluster(4))
        for num_devices in args.devices:
            cluster = k80_cluster(num_devices)
            start = time.perf_counter()
            devices = make_placer(name, timer=sim).place(graph, cluster).devices
            seconds = time.perf_counter() - start
            digest = hashlib.sha256(np.ascontiguousarray(devices, dtype=np.int64).tobytes()).hexdigest()[:16]
            row = dict(ops=graph.num_ops, devices=num_devices, placer=name, seconds=seconds,
                       step_ms=sim.time(graph, cluster, devices).step_time * 1e3, used=len(np.unique(devices)),
                       placement=digest)
            rows.append(row)
            print(json_text(row), flush=True)
    return rows


def _first_step(graph: Any, cluster: Cluster, placement: np.ndarray) -> float:
    """Seconds of one step by a new simulator: its arrays of ``(graph, cluster)`` are made for it."""
    return Simulator().time(graph, cluster, placement).step_time


def run_sim(args: argparse.Namespace) -> int:
    """``sim``: median seconds of one simulator evaluation of a random layered graph.

    The graph is ``gnplace.toy.layered_graph`` on a K80 cluster, timed for three placements (all on
    one device, contiguous blocks of the topological order, uniformly random: the worst case, most
    transfers), in both simulator modes, plus the throughput of the batched call. Single evaluations
    run on one core (the kernel is serial); the batched call uses every core numba is allowed.
    """
    rows = bench_sim(args)
    if args.json:
        print_json(rows)  # alone on stdout: under --json everything else printed goes to stderr
        return 0
    from rich.table import Table

    from gnplace.cli.common import stdout_console

    table = Table(title=f"simulator: {args.ops}-op layered graph on {args.devices} K80s (median)")
    for col in ("mode", "placement", "call", "ms per evaluation"):
        table.add_column(col)
    for row in rows:
        table.add_row(row["mode"], row["placement"], row["call"], f"{row['ms_per_eval']:.3f}")
    stdout_console().print(table)
    return 0


def run_import(args: argparse.Namespace) -> int:
    """``import``: seconds to extract the training graph of ENAS cifar10 networks of growing depth.

    Each network goes through ``gnplace.importers.torch.from_module`` on one core.
    """
    rows = bench_import(args)
    if args.json:
        print_json(rows)
        return 0
    print("\n".join(f"cifar10 L={r['layers']}: {r['ops']} ops extracted in {r['seconds']:.1f} s" for r in rows))
    return 0


def run_scale(args: argparse.Namespace) -> int:
    """``scale``: coarsening, placing and simulating ENAS cifar10 training graphs of about 10k, 50k and 100k ops.

    For graphs of growing size (cells stacked): the seconds to coarsen to ``--groups`` groups, place
    the coarse graph with m_etf, expand and simulate the full graph; up to ``--full-up-to`` ops also
    m_etf on the full graph and the step-time cost of coarsening.
    """
    bench_scale(args)
    return 0


def run_devices(args: argparse.Namespace) -> int:
    """``devices``: op times, the simulator's first step, the list scheduler's setup and coarsening on 4 to 4,096 K80s.

    On a layered graph of ``--ops`` ops (default 100,000): what grows with the device count before any placer
    runs. 2026-12-04, 93,567 ops on 4,096 K80s: the simulator made a 3 GiB [ops, devices] matrix for one distinct
    column, group times summed every column; each now works on the distinct columns. 2026-12-05: the list schedulers
    made that matrix and [groups, devices] group times (1 GiB) to schedule on; they take the distinct columns and each
    device's column (``list_schedule_s``: that setup).
    """
    bench_devices(args)
    return 0


def run_devices_place(args: argparse.Namespace) -> int:
    """``devices-place``: seconds of the list schedulers on a cifar10 graph of ``--ops`` ops on 4 to 4,096 K80s.

    2026-12-04, 93,567 ops on 4,096 K80s: m_etf took 47.5 s, ETF's kernel 40 s of it, listing every ready op on
    every device's heaps; now on those in use and one idle device of each class of interchangeable ones, with the
    same placements (the ``placement`` digests).
    """
    bench_devices_place(args)
    return 0


#: ``python -c`` program running ``gnplace ARGS`` and writing its own peak resident memory (KiB) last on stderr: Linux's
#: VmHWM (``ru_maxrss`` of a process its parent forked reported the parent's: a bench process of 396 MB read 396 MB for
#: every command), else ``ru_maxrss`` (KiB on Linux).
_PEAK_RSS = ("import resource, runpy, sys\n"
             "sys.argv = ['gnplace', *sys.argv[1:]]\n"
             "try:\n"
             "    runpy.run_module('gnplace', run_name='__main__', alter_sys=True)\n"
             "finally:\n"
             "    try:\n"
             "        kib = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
             "    except (OSError, StopIteration):\n"
             "        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
             "    sys.stderr.write(f'\\npeak_rss_kib {kib}\\n')\n")


def peak_rss(command: list[str]) -> tuple[float, int]:
    """Peak resident memory (MiB) and exit status of ``gnplace COMMAND`` run in a process of its own."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _PEAK_RSS, *command], capture_output=True, text=True, check=False)
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    kib = float(last.split()[1]) if last.startswith("peak_rss_kib ") else float("nan")
    return kib / 1024, done.returncode


def bench_memory(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Peak RSS of ``gnplace simulate`` and ``gnplace place -p P``, each in its own process, on large cifar10 graphs."""
    # an unknown name was each command's exit status 2, recorded in its row, and the benchmark exited 0
    check_placers(args.placers)
    check_clusters(args.clusters)
    cache = check_output_folder(args.cache, "--cache")
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    for ops in args.ops:
        graph = large_graph(ops, cache)
        path = str(cache / f"{graph.name}.gnpg")
        for cluster in args.clusters:
            commands = {"simulate": ["simulate", path, "-c", cluster, "-p", "single", "--json"]}
            commands.update({f"place -p {p}": ["place", path, "-c", cluster, "-p", p, "--json"] for p in args.placers})
            for name, command in commands.items():
                mib, status = peak_rss(command)
                row = dict(ops=graph.num_ops, cluster=cluster, command=name, peak_rss_mib=round(mib, 1), status=status)
                rows.append(row)
                print(json_text(row), flush=True)
    return rows


def run_memory(args: argparse.Namespace) -> int:
    """``memory``: peak resident memory of gnplace's commands on ENAS cifar10 graphs of about 10k and 100k ops.

    Each command runs in a process of its own, which reports its peak (Linux's VmHWM, else ``ru_maxrss``): ``gnplace simulate`` (the single
    placement, its bound included) and ``gnplace place -p P`` for each ``--placers``, on each ``--clusters``. On
    2026-12-04 (93,567 ops, k80x4): simulate 212 MB, place -p auto 259 MB, -p policy 719 MB; ``python -c 'import
    gnplace'`` alone is 97 MB. Exit status 1 where a command failed (its row holds its status), each named on stderr.
    """
    import sys

    # a command that failed (killed for memory, a checkpoint it could not read) was a row among the others and the
    # benchmark exited 0, so that a script reading its status took the run for a complete one
    failed = [row for row in bench_memory(args) if row["status"] != 0]
    for row in failed:
        print(f"bench memory: {row['command']} on {row['ops']:,} ops and {row['cluster']} failed with exit status "
              f"{row['status']}", file=sys.stderr)
    return 1 if failed else 0


def add_parsers(sub: Any) -> None:
    """The ``sim``, ``import``, ``scale``, ``devices`` and ``memory`` subcommands."""
    sim = add_command(sub, "sim", run_sim, "simulator evaluations")
    sim.add_argument("--ops", type=int, default=2000, help="ops of the random layered graph (default: 2000)")
    sim.add_argument("--devices", type=int, default=4, help="K80 GPUs of the cluster (default: 4)")
    sim.add_argument("--repeat", type=int, default=300,
                     help="single evaluations timed per placement, the median reported; the batched call is timed "
                          "--repeat / 50 times, at least 3 (default: 300)")
    sim.add_argument("--batch", type=int, default=256,
                     help="random placements of one time_batch call, at most 16384 (default: 256)")
    sim.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    imp = add_command(sub, "import", run_import, "training-graph extraction from PyTorch (one core)")
    imp.add_argument("--layers", type=int, nargs="+", default=[6, 15, 30],
                     help="depths (layers L) of the ENAS cifar10 networks extracted, one row each (default: 6 15 30)")
    imp.add_argument("--json", action="store_true", help="print the rows as JSON instead of one line each")
    scale = add_command(sub, "scale", run_scale, "coarsen + m_etf + expand + simulate on 10k..100k-op graphs")
    scale.add_argument("--ops", type=int, nargs="+", default=[10_000, 50_000, 100_000],
                       help="approximate ops of each ENAS cifar10 graph (cells stacked) (default: 10000 50000 100000)")
    scale.add_argument("--groups", type=int, default=1000, help="groups the graphs are coarsened to (default: 1000)")
    scale.add_argument("--cluster", default="k80x4", help="cluster preset or YAML file (default: k80x4)")
    scale.add_argument("--cache", default="out/bench",
                       help="folder the large generated graphs are cached in, reused while their recipe holds "
                            "(default: out/bench)")
    scale.add_argument("--full-up-to", type=int, default=20_000,
                       help="also run m_etf on the full graph of at most this many ops, and the step-time cost of "
                            "coarsening (default: 20000)")
    devices = add_command(sub, "devices", run_devices, "op times, simulator, list-scheduler setup, coarsening per device count")
    devices.add_argument("--ops", type=int, default=100_000, help="ops of the random layered graph (default: 100000)")
    devices.add_argument("--devices", type=int, nargs="+", default=[4, 256, 4096],
                         help="K80 counts of the clusters, one row each (default: 4 256 4096)")
    devices.add_argument("--repeat", type=int, default=3, help="calls timed of each, the median reported (default: 3)")
    place = add_command(sub, "devices-place", run_devices_place, "the list schedulers' seconds per device count")
    place.add_argument("--ops", type=int, default=100_000,
                       help="approximate ops of the ENAS cifar10 graph (default: 100000)")
    place.add_argument("--devices", type=int, nargs="+", default=[4, 256, 4096],
                       help="K80 counts of the clusters, one row each (default: 4 256 4096)")
    place.add_argument("--placers", nargs="+", default=["heft", "m_etf", "m_sct"],
                       help="placers timed (default: heft m_etf m_sct)")
    place.add_argument("--cache", default="out/bench",
                       help="folder the large generated graph is cached in, reused while its recipe holds "
                            "(default: out/bench)")
    mem = add_command(sub, "memory", run_memory, "peak RSS of simulate and place on 10k and 100k-op graphs")
    mem.add_argument("--ops", type=int, nargs="+", default=[10_000, 100_000],
                     help="approximate ops of each ENAS cifar10 graph (default: 10000 100000)")
    mem.add_argument("--clusters", nargs="+", default=["k80x4"],
                     help="cluster presets or YAML files, each measured (default: k80x4)")
    mem.add_argument("--placers", nargs="+", default=["single", "m_etf", "auto", "policy"],
                     help="placers of `gnplace place -p P`, each in a process of its own (default: single m_etf auto "
                          "policy)")
    mem.add_argument("--cache", default="out/bench",
                     help="folder the large generated graphs are cached in, reused while their recipe holds "
                          "(default: out/bench)")
