"""Benchmarks of gnplace's hot paths; figures quoted in README.md come from here.

Usage::

    python scripts/bench.py sim [--ops 2000] [--devices 4] [--repeat 300] [--batch 256] [--json]
    python scripts/bench.py import [--layers 6 15 30]
    python scripts/bench.py scale [--ops 10000 50000 100000] [--groups 1000] [--cluster k80x4]
    python scripts/bench.py exact [--clusters k80x2 k80x4] [--groups 12] [--time-limit 20]
    python scripts/bench.py placers [--ops 2000] [--cluster k80x4]
    python scripts/bench.py search [--placers ppo annealing] [--budget 20000] [--clusters k80x4 v100x8 tight4]
    python scripts/bench.py curves [--graphs ...] [--cluster k80x4] [--budget 20000] [--out docs/figures]
    python scripts/bench.py ppo-speed [--nodes 1000] [--samples 32] [--epochs 10]
    python scripts/bench.py zeroshot [--checkpoint PATH] [--samples 16] [--rounds 1] [--refine 4] [--split test] [--no-subsets] [--temperatures 0.1 0.2 0.3 0.5] [--op-level 4000] [--seed 0] [--jobs 2]
    python scripts/bench.py vs-search ZEROSHOT.json SEARCH/results.csv [--placer ppo] [--budget N] [--seed S]
    python scripts/bench.py latency [--ops 10000 100000] [--samples 0]
    python scripts/bench.py constructor [--per-family 2] [--clusters k80x4 v100x8 cpu_gpu] [--op-level]
    python scripts/bench.py finetune [--budget 4000] [--clusters k80x4] [--per-family 2] [--jobs 2] [--ft-lr 1e-3] [--checkpoint PATH] [-O finetune.prior=0]
    python scripts/bench.py device-map [--families cifar10 ptb nmt] [--per-family 3] [--placers auto policy]
    python scripts/bench.py screen-model [--mismatch 0.5 0.5 2] [--budget 400] [--clusters k80x4 v100x8 tight4] [--per-family 1] [--jobs 2]
    python scripts/bench.py fidelity [--graphs MODULE:FACTORY ...] [--placements 8] [--repeats 7] [--rounds 5] [--anchor-rounds 5] [--probe-rounds 5] [--finetune-budget 60]
    python scripts/bench.py report [--quick] [--out out/report] [--doc docs/RESULTS.md] [--figures docs/figures] [--jobs 2] [--cache out/bench]

``report``: every placer side by side, the seeds' learned placers included, written to
``docs/RESULTS.md`` and ``docs/figures/report_*.png`` (``scripts/report.py`` says what each section holds).

``sim``: median seconds of one simulator evaluation of a random layered graph (``gnplace.toy.
layered_graph``) on a K80 cluster, for three placements (all on one device, contiguous blocks of
the topological order, uniformly random: the worst case, most transfers), in both simulator
modes, plus the throughput of the batched call. Single evaluations run on one core (the kernel
is serial); the batched call uses every core numba is allowed.

``import``: seconds to extract the training graph of ENAS cifar10 networks of growing depth with
``gnplace.importers.torch.from_module`` on one core.

``scale``: for ENAS cifar10 training graphs of about 10k, 50k and 100k ops (cells stacked), the
seconds to coarsen to 1,000 groups, place the coarse graph with m_etf, expand and simulate the full
graph; up to ``--full-up-to`` ops also m_etf on the full graph and the step-time cost of coarsening.

``search``: the search placers (by default ``ppo``, ``reinforce``, ``annealing``) with one budget of
timer evaluations on the test graphs of each family, against ``auto`` (the best fast placer):
geometric mean of step time over ``auto``'s per family and cluster, through ``gnplace.evaluate`` (its
``results.csv`` in ``--out`` resumes an interrupted run; ``--jobs`` processes of one thread each;
``-O PLACER.NAME=VALUE`` passes an option, e.g. ``-O ppo.prelude=0`` for PPO alone).

``curves``: best step time over ``auto``'s against evaluations for ``ppo``, ``reinforce`` (both with
no annealing prelude: the algorithms alone) and ``annealing`` on a few graphs: one PNG per graph and
cluster, the curves' corners as JSON beside it, and the evaluations each placer needed to first
reach each other's final quality.

``zeroshot``: the pretrained policy on every test graph of each family on the five presets, the real
models, and a few test graphs on four clusters no pretraining saw (``configs/clusters/``): geometric
mean of step time over ``auto``'s of its greedy placement on the whole cluster, of greedy plus K
samples at temperature 1 on the whole cluster (the default before 2026-11-23), of what ``policy``
returns (greedy also on the fastest k devices alone, K tempered samples on the best of those device
sets), and of the portfolio (the better of the policy's and auto's placement); rows in
``OUT/zeroshot.json``. ``--seed S`` places the policy and ``auto`` under seed S (default 0).

``vs-search``: a ``zeroshot`` run against a ``search`` run on the test pairs both placed (by default
the first two test graphs of each family on k80x4, v100x8 and tight4): geometric means of step time
over the search run's ``auto`` per family and cluster and for all pairs, and their quotient (the "within 5% of a
20,000-evaluation search" target is a quotient of at most 1.05). A search run holding several rows of
the placer for one pair (several budgets or seeds) is refused unless ``--budget`` and ``--seed`` pick one.

``latency``: seconds of the policy's greedy placement (coarsening, features, encoding, decoding,
expansion and scoring included) of ENAS cifar10 graphs of about 10k and 100k ops, on one core.

``constructor``: how well the placement MDP's list schedule (the source of the policy's dynamic
features: earliest start and finish per device) predicts the simulator, for the policy's greedy
placement of test graphs: its finish time over the simulated step on the decision graph it plays
and on the original graph; ``--op-level`` repeats it with no coarsening (every op a node).

``finetune``: sample efficiency of fine-tuning. On the first test graphs of each family, PPO from a
fresh policy (``ppo`` with no annealing prelude; ``-O scratch.NAME=VALUE`` changes it) and PPO from
the shipped checkpoint (``finetune``; its zero-shot placement a candidate unless ``--no-ft-zero-shot``;
``-O finetune.NAME=VALUE`` sets any other option) each spend ``--budget`` simulator evaluations; reported per graph: both final step times over ``auto``'s, and the
evaluations each needed to first reach PPO-from-scratch's final quality (their quotient is the
saving); then, by cluster, by family and over all pairs, the geometric means after 100, 400 and 1,000
evaluations and at the end, and the same saving read on each group's mean. Rows in ``OUT/finetune.json`` (an interrupted run resumes); a run with other fine-tuning
options or revision in the same ``OUT`` reuses the searches from scratch of the same pair, budget,
seed, options and revision (deterministic on one machine) and adds its rows.

``screen-model``: what fine-tuning's screen should start from when the timer is not the simulator,
measured against a stand-in for real steps (:class:`MismatchedSteps`): the simulator on the same
graph and cluster with every op's seconds on each device kind scaled by ``exp(sigma * N(0, 1))`` and
link bandwidth and latency scaled, none of which the placer knows (``--mismatch SIGMA BANDWIDTH
LATENCY``). Each pair is fine-tuned twice with the same budget and seed, its screen starting from
nothing (``learned``) and from the simulator of the placer's own view (``simulator``); reported: the
geometric means of the best step so far over ``auto``'s (``auto`` timed by the stand-in) after 100, 200
and 400 evaluations and at the end, and the evaluations after which the simulator screen's mean first
reaches the learned screen's final mean. Rows in ``OUT/screen_model.json`` (an interrupted run resumes).

``fidelity``: the simulator against real steps on a two-rank CPU cluster (``torch.distributed``,
gloo, one thread a rank). For each of ``--graphs`` small models: ``gnplace profile`` calibration
(op seconds measured per op and scaled to the median of ``--anchor-rounds`` measurements of the
one-device step, link bandwidth, and link latency and message cost from the medians of
``--probe-rounds`` probes), then ``--placements`` placements that split the step
(the fast placers', random ones) measured ``--rounds`` times each, in turn, with
:class:`~gnplace.execute.dist.DistTimer`, and simulated: median absolute relative error of the
simulator against each placement's median measurement; with ``--finetune-budget``, whether fine-tuning's best measured placement beats ``single``
and ``round_robin``.

``device-map``: models drawn from the three families, placed by ``auto`` and ``policy``; each
placement's step time as a module-level ``device_map`` (what accelerate would run) and that of
accelerate's own ``"auto"`` and ``"balanced"`` maps for the cluster's devices and memories, over
the placement at op granularity (simulator).

``apply``: what running a step op by op costs. For each of ``--models`` (``module:factory``), the
training step (zero the gradients, loss, backward) of the module eagerly and of
``gnplace.apply(module, placement)`` with every op on one CPU, in ``--rounds`` alternating rounds
of ``--repeat`` steps each, one thread; reported per model: the best round's median step of each
and their quotient (placed over eager).

``ppo-speed``: seconds of one PPO iteration (rollout of ``--samples`` placements, timing, ``--epochs``
policy steps) on a random layered graph of about ``--nodes`` decision nodes.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np
import report

from gnplace.cli.common import add_option_argument, parse_placer_options, run_reporting_errors
from gnplace.cluster import Cluster, Device
from gnplace.sim import Simulator
from gnplace.sim.timer import StepTimer
from gnplace.toy import layered_graph


def median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    """Median wall seconds of ``fn()`` over ``repeat`` calls, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


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


def large_graph(ops: int, cache: Path) -> Any:
    """An ENAS cifar10 training graph of about ``ops`` ops (more cells stacked), cached in ``cache``."""
    from gnplace.families import cifar10
    from gnplace.graph_io import load_graph, save_graph
    from gnplace.importers.torch import from_module

    layers = max(1, round(ops / 119))
    path = cache / f"cifar10_L{layers}.gnpg"
    if path.exists():
        return load_graph(path)
    model, inputs = cifar10.sample(np.random.default_rng(0), layers=layers, channels=16, batch=32)
    graph = from_module(model, inputs, name=f"cifar10_L{layers}")
    save_graph(graph, path)
    return graph


def bench_scale(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Coarsen to ``--groups`` groups, place with m_etf, expand and simulate, for growing graphs."""
    from gnplace.cluster import load_cluster
    from gnplace.coarsen import coarsen
    from gnplace.placers import get_placer

    cluster = load_cluster(args.cluster)
    cache = Path(args.cache)
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
        print(json.dumps(row), flush=True)
    return rows


def bench_exact(args: argparse.Namespace) -> list[dict[str, Any]]:
    """How far each heuristic is from the exact placer on small graphs (coarsened dataset graphs, examples)."""
    from gnplace.cluster import load_cluster
    from gnplace.coarsen import coarsen
    from gnplace.datasets import load_manifest
    from gnplace.graph_io import load_graph
    from gnplace.placers import get_placer

    root = Path(__file__).resolve().parent.parent / "datasets"
    rows = []
    for cluster_name in args.clusters:
        cluster = load_cluster(cluster_name)
        graphs = [load_graph(p) for p in sorted((root / "examples").glob("*.gnpg"))]
        for family in ("cifar10", "ptb", "nmt"):
            manifest = load_manifest(root / family)
            for entry in [e for e in manifest["graphs"] if e["split"] == "test"][: args.per_family]:
                graphs.append(coarsen(load_graph(root / family / entry["file"]), args.groups, cluster).graph)
        for graph in graphs:
            sim = Simulator()
            exact = get_placer("exact", time_limit=args.time_limit, timer=sim)
            exact_step = sim.time(graph, cluster, exact.place(graph, cluster, seed=0)).step_time
            row: dict[str, Any] = dict(graph=graph.name, cluster=cluster.name, groups=graph.num_groups,
                                       status=exact.last_status, gap=exact.last_gap, exact_ms=exact_step * 1e3)
            for name in args.placers:
                step = sim.time(graph, cluster, get_placer(name).place(graph, cluster, seed=0)).step_time
                row[name] = step / exact_step
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def bench_placers(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Median wall seconds of each placer on a random layered graph (first call excluded)."""
    from gnplace.cluster import load_cluster
    from gnplace.placers import get_placer

    graph = layered_graph(args.ops, seed=0)
    cluster = load_cluster(args.cluster)
    rows = []
    for name in args.placers:
        placer = get_placer(name)
        seconds = median_seconds(functools.partial(placer.place, graph, cluster, seed=0), args.repeat)
        rows.append(dict(placer=name, ops=graph.num_ops, cluster=cluster.name, seconds=seconds))
        print(f"{name}: {graph.num_ops} ops on {cluster.name} placed in {seconds:.3f} s (median of {args.repeat})", flush=True)
    return rows


def _geomean(values: list[float]) -> float:
    values = [v for v in values if np.isfinite(v) and v > 0]
    return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def bench_search(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Search placers against ``auto`` on the test split, through the evaluation harness."""
    from gnplace.evaluate import Task, collect_graphs, evaluate

    root = Path(__file__).resolve().parent.parent / "datasets"
    graphs = []
    for family in args.families:
        found = collect_graphs([str(root / family)], split=args.split)
        graphs += found[: args.per_family] if args.per_family else found
    tasks = [Task(str(g), c, "auto", seed=args.seed) for g in graphs for c in args.clusters]
    options = parse_placer_options(args.option, args.placers)
    tasks += [Task.with_options(str(g), c, p, options.get(p), budget=args.budget, seed=args.seed)
              for g in graphs for c in args.clusters for p in args.placers]
    done = [0]

    def progress(row: Any) -> None:
        done[0] += 1
        print(f"[{done[0]}/{len(tasks)}] {row.graph} {row.cluster} {row.placer}: {row.step_time_s * 1e3:.3f} ms "
              f"in {row.place_seconds:.0f} s{' ERROR ' + row.error if row.error else ''}", flush=True)

    rows = evaluate(tasks, args.out, jobs=args.jobs, progress=progress)
    wanted = {(str(g), c) for g in graphs for c in args.clusters}
    auto = {(r.graph_path, r.cluster): r.step_time_s for r in rows if r.placer == "auto"}
    summary = []
    families = {r.graph_path: r.family for r in rows}
    for family in args.families:
        for cluster in args.clusters:
            line: dict[str, Any] = {"family": family, "cluster": cluster}
            for placer in args.placers:
                ratios = [r.step_time_s / auto[(r.graph_path, r.cluster)] for r in rows
                          if r.placer == placer and r.budget == args.budget and families[r.graph_path] == family
                          and json.loads(r.options) == options.get(placer, {})
                          and r.cluster == load_cluster_name(cluster) and (r.graph_path, cluster) in wanted
                          and (r.graph_path, r.cluster) in auto]
                line[placer] = _geomean(ratios)
                line[f"{placer}_n"] = len(ratios)
            summary.append(line)
    return summary


def load_cluster_name(spec: str) -> str:
    """The name of the cluster ``spec`` (a preset or a YAML file)."""
    from gnplace.cluster import load_cluster

    return load_cluster(spec).name


def bench_curves(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Learning curves (best step over auto's against evaluations) of the search placers; PNGs in ``--out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gnplace.cluster import load_cluster
    from gnplace.graph_io import load_graph
    from gnplace.placers import make_placer

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for path in args.graphs:
        graph, cluster = load_graph(path), load_cluster(args.cluster)
        sim = Simulator()
        auto = sim.time(graph, cluster, make_placer("auto").place(graph, cluster, seed=args.seed)).step_time
        curves: dict[str, tuple[list[int], list[float]]] = {}
        for name in args.placers:
            # the learning algorithms alone: no annealing prelude, so PPO, REINFORCE and annealing stay apart
            alone: dict[str, Any] = {"prelude": 0.0} if name in ("ppo", "reinforce") else {}
            placer = make_placer(name, budget=args.budget, **alone)
            start = time.perf_counter()
            placer.place(graph, cluster, seed=args.seed)
            seconds = time.perf_counter() - start
            if hasattr(placer, "last_history"):
                evals, best = map(list, zip(*placer.last_history))
            else:
                evals, _, best = map(list, zip(*placer.last_trace))
            curves[name] = (evals, [b / auto for b in best])
            row = {"graph": graph.name, "cluster": cluster.name, "placer": name, "final": best[-1] / auto,
                   "seconds": seconds}
            for attr in ("last_greedy_after_imitation", "last_greedy_after_search"):
                if getattr(placer, attr, None) is not None:  # greedy policy's step over auto's (learned placers)
                    row[attr.removeprefix("last_")] = getattr(placer, attr)
            rows.append(row)
            print(f"{graph.name} {cluster.name} {name}: {best[-1] / auto:.4f} of auto in {seconds:.0f} s", flush=True)
        for row in rows[-len(args.placers):]:
            evals, ratio = curves[row["placer"]]
            # evaluations this placer needed to first reach each placer's final quality (None: never reached)
            row["evaluations_to_reach"] = {
                other: next((e for e, q in zip(evals, ratio) if q <= curve[1][-1] + 1e-12), None)
                for other, curve in curves.items()}
        changes = {name: [(e, q) for i, (e, q) in enumerate(zip(*curve)) if i == 0 or q < curve[1][i - 1]]
                   for name, curve in curves.items()}  # the step function's corners
        (out / f"curve_{graph.name}_{cluster.name}.json").write_text(json.dumps(
            {"auto_step_s": auto, "budget": args.budget, "best_over_auto": changes}) + "\n")
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for name, (evals, ratio) in curves.items():
            ax.step(evals, ratio, where="post", label=name)
        ax.set_xlabel("timer evaluations")
        ax.set_ylabel("best step time / auto")
        ax.set_title(f"{graph.name} on {cluster.name}")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / f"curve_{graph.name}_{cluster.name}.png", dpi=110)
        plt.close(fig)
    return rows


def bench_ppo_speed(args: argparse.Namespace) -> dict[str, float]:
    """Seconds of one PPO iteration (rollout, timing, epochs) on a graph of about ``--nodes`` decision nodes."""
    import torch

    from gnplace.cluster import load_cluster
    from gnplace.rl.agent import log_probs, sample
    from gnplace.rl.ppo import normalise_advantages, ppo_loss
    from gnplace.rl.problem import PlacementProblem
    from gnplace.train import LearnerConfig, PlacementLearner

    graph = layered_graph(args.nodes, width=8, seed=0)
    cluster = load_cluster(args.cluster)
    sim = Simulator()
    problem = PlacementProblem.build(graph, cluster, sim, max_nodes=args.nodes)
    learner = PlacementLearner(LearnerConfig(samples=args.samples, epochs=args.epochs))
    optimizer = torch.optim.Adam(learner.policy.parameters(), lr=1e-3)

    def iteration() -> None:
        traj = sample(learner.policy, problem.mdp, args.samples, learner.rng)
        _, reward = problem.score(traj.rollout.group_devices, sim, 4.0)
        adv = normalise_advantages(reward)
        for _ in range(args.epochs):
            new = log_probs(learner.policy, learner.policy.encode(problem.inp), traj)
            loss, _ = ppo_loss(new, traj.old_log_probs, traj.actions, adv, traj.mask, clip=0.2, beta=1.0, entropy=0.01)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    seconds = median_seconds(iteration, args.repeat)
    result = {"nodes": problem.inp.decision.num_ops, "groups": problem.inp.num_groups, "samples": args.samples,
              "epochs": args.epochs, "seconds_per_iteration": seconds, "threads": torch.get_num_threads()}
    print(json.dumps(result))
    return result


def _zero_shot_row(task: tuple[str, str, str | None, int, str, dict[str, Any], int]) -> dict[str, Any]:
    """One (graph, cluster): the policy's greedy and best-of-K placements, auto, and the portfolio of both.

    Both the policy and ``auto``, the reference of every ratio, place under the task's seed: ``policy``
    samples around ``auto``'s placement for that seed, and ``auto`` itself depends on it through
    ``metis``'s partition (ptb_029 on cpu_gpu: 2.18 ms under seeds 0, 2 and 3, 2.59 under seed 1).
    ``vs-search`` divides absolute step times by the search run's own ``auto``.
    """
    import torch

    from gnplace.cluster import load_cluster
    from gnplace.graph_io import load_graph
    from gnplace.placers.auto import AutoPlacer
    from gnplace.rl.zeroshot import PolicyPlacer

    torch.set_num_threads(1)
    path, cluster_spec, checkpoint, samples, group, options, seed = task
    graph, cluster = load_graph(path), load_cluster(cluster_spec)
    sim = Simulator()
    placer = PolicyPlacer(checkpoint=checkpoint, samples=samples, timer=sim, **options)  # default: subsets, tempered
    start = time.perf_counter()
    ours = sim.time(graph, cluster, placer.place(graph, cluster, seed=seed))
    took = time.perf_counter() - start
    # the default before 2026-11-23: K samples of the policy itself (tau = 1) on the whole cluster
    plain = PolicyPlacer(checkpoint=checkpoint, samples=samples, timer=sim, subsets=False, temperatures=(1.0,),
                         op_level=0, around=False, constructor="none")
    start = time.perf_counter()
    untempered = sim.time(graph, cluster, plain.place(graph, cluster, seed=seed))
    took_plain = time.perf_counter() - start
    auto = AutoPlacer(timer=sim)
    theirs = sim.time(graph, cluster, auto.place(graph, cluster, seed=seed))
    fits_auto = not theirs.is_oom
    portfolio = min(ours.step_time if not ours.is_oom else np.inf, theirs.step_time if fits_auto else np.inf)
    assert placer.last_greedy_step is not None  # set by place()
    return dict(
        group=group, graph=graph.name, family=str(graph.meta.get("family", group)), ops=graph.num_ops,
        cluster=cluster.name, seed=seed, auto_ms=theirs.step_time * 1e3, auto_choice=auto.last_choice, auto_oom=theirs.is_oom,
        greedy=placer.last_greedy_step / theirs.step_time, greedy_oom=placer.last_greedy_oom,
        policy=ours.step_time / theirs.step_time, policy_oom=ours.is_oom, policy_choice=placer.last_choice,
        portfolio=float(portfolio / theirs.step_time) if np.isfinite(portfolio) else None, place_s=took,
        plain=untempered.step_time / theirs.step_time, plain_oom=untempered.is_oom, plain_s=took_plain,
    )


def bench_zeroshot(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Zero-shot placement of the test splits, the real models and unseen clusters against auto."""
    from gnplace.datasets import load_manifest
    from gnplace.workers import process_pool

    options: dict[str, Any] = {"subsets": args.subsets, "rounds": args.rounds}
    if args.temperatures:
        options["temperatures"] = tuple(args.temperatures)
    for name in ("op_level", "constructor", "constructor_samples", "constructor_temperature", "refine",
                 "constructor_sizes"):
        if getattr(args, name) is not None:  # given: else the placer's default
            options[name] = getattr(args, name)
    def task(graph: str, cluster: str, group: str) -> tuple[str, str, str | None, int, str, dict[str, Any], int]:
        return graph, cluster, args.checkpoint, args.samples, group, options, args.seed

    tasks = []
    test_graphs = []  # the unseen clusters place test graphs whatever the split
    for family in args.families:
        folder = Path("datasets") / family
        entries = load_manifest(folder)["graphs"]
        graphs = [str(folder / e["file"]) for e in entries if e["split"] == args.split and e["ops"] > args.min_ops]
        test_graphs.append([str(folder / e["file"]) for e in entries if e["split"] == "test"])
        # rows of training graphs are grouped "train", so that tables and vs-search never take them for test pairs
        tasks += [task(g, c, args.split) for c in args.clusters for g in graphs]
    real = sorted(str(p) for p in Path("datasets/real").glob("*.gnpg"))
    tasks += [task(g, c, "real") for c in args.real_clusters for g in real]
    few = [g for graphs in test_graphs for g in graphs[: args.unseen_per_family]]
    tasks += [task(g, c, "unseen") for c in args.unseen_clusters for g in few]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with process_pool(args.jobs) as pool:
        for row in pool.map(_zero_shot_row, tasks):
            rows.append(row)
            print(json.dumps(row), flush=True)
    (out / "zeroshot.json").write_text(json.dumps(rows, indent=1))
    return rows


def _zeroshot_cells(rows: list[dict[str, Any]]) -> str:
    """Greedy, greedy + K at tau 1, policy and portfolio geometric means, and OOM counts (the tau-1 one in brackets)."""
    port = [r["portfolio"] for r in rows if r["portfolio"] is not None]
    oom = sum(r["policy_oom"] and not r["auto_oom"] for r in rows)
    oom_plain = sum(r["plain_oom"] and not r["auto_oom"] for r in rows)
    return (f"{_geomean([r['greedy'] for r in rows]):.3f} | {_geomean([r['plain'] for r in rows]):.3f} | "
            f"{_geomean([r['policy'] for r in rows]):.3f} | {_geomean(port) if port else float('nan'):.3f} | "
            f"{oom} ({oom_plain})")


def zeroshot_tables(rows: list[dict[str, Any]]) -> str:
    """Markdown tables of :func:`bench_zeroshot`'s rows: geometric means over auto, OOM counts, seconds."""
    lines = []
    for group in ("test", "train", "real", "unseen"):
        part = [r for r in rows if r["group"] == group]
        if not part:
            continue
        lines += [f"\n**{group}** (geometric mean of step time over auto's; OOM where auto fits)\n",
                  "| family | cluster | graphs | greedy | greedy + K, tau 1 | policy | portfolio | OOM | place s | "
                  "greedy + K s |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        keys = sorted({(r["family"] if group in ("test", "train") else group, r["cluster"]) for r in part})
        for fam, cluster in keys:
            sel = [r for r in part
                   if (r["family"] if group in ("test", "train") else group) == fam and r["cluster"] == cluster]
            lines.append(f"| {fam} | {cluster} | {len(sel)} | " + _zeroshot_cells(sel)
                         + f" | {np.mean([r['place_s'] for r in sel]):.2f} | {np.mean([r['plain_s'] for r in sel]):.2f} |")
        lines.append(f"| all | | {len(part)} | " + _zeroshot_cells(part) + " | | |")
    return "\n".join(lines)


def zeroshot_against_search(zeroshot: Path, search: Path, placer: str = "ppo", budget: int | None = None,
                            seed: int | None = None) -> list[dict[str, Any]]:
    """Zero-shot against a search on the pairs both placed: step times over ``auto``'s, and their quotient.

    Args:
        zeroshot (Path): a :func:`bench_zeroshot` run's ``zeroshot.json``.
        search (Path): a :func:`bench_search` run's ``results.csv`` (``auto`` and ``placer`` rows).
        placer (str, optional): the search placer of ``search`` to compare with (default: ``"ppo"``).
        budget (int, optional): keep only the ``placer`` rows of this budget (evaluations).
        seed (int, optional): keep only the ``placer`` rows of this seed.

    Raises:
        SystemExit: no pair in common, or ``search`` holds several ``placer`` rows for one pair (several
            budgets, seeds or options) and ``budget`` and ``seed`` do not single one out.

    Returns:
        list of dict: per (family, cluster) and for all pairs: ``pairs``, geometric means ``policy``
        and ``search`` (step time over ``auto``'s), ``ratio`` (``policy / search``: at most 1.05 is
        the "within 5% of the search" target) and ``share``, the share of the search's gain over
        ``auto`` that zero-shot placement gets, ``(1 - policy) / (1 - search)`` (``nan`` where the
        search gains nothing).
    """
    import csv

    with search.open(newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if not r["error"] and r["oom"] != "True"]
    auto = {(r["graph"], r["cluster"]): float(r["step_time_s"]) for r in rows if r["placer"] == "auto"}
    searched_rows = [r for r in rows if r["placer"] == placer and (r["graph"], r["cluster"]) in auto
                     and (budget is None or r.get("budget") == str(budget))
                     and (seed is None or r.get("seed") == str(seed))]
    runs = Counter((r["graph"], r["cluster"]) for r in searched_rows)
    if runs and max(runs.values()) > 1:
        settings = sorted({(r.get("budget", ""), r.get("seed", ""), r.get("options", "")) for r in searched_rows})
        raise SystemExit(f"{search} holds {max(runs.values())} {placer} rows for one pair (budget, seed, options: "
                         f"{settings}); choose one with --budget and --seed")
    found = {(r["graph"], r["cluster"]): float(r["step_time_s"]) / auto[(r["graph"], r["cluster"])]
             for r in searched_rows}
    # the policy's step time over the search run's auto (a zero-shot run under another seed divides by another auto)
    ours = {(r["graph"], r["cluster"]): (r["family"], r["policy"] * r["auto_ms"] / 1e3 / auto[(r["graph"], r["cluster"])])
            for r in json.loads(zeroshot.read_text()) if r["group"] == "test" and (r["graph"], r["cluster"]) in found}
    if not ours:
        raise SystemExit(f"no test pair of {zeroshot} is in {search}'s {placer} rows")
    cells = sorted({(fam, cluster) for (_, cluster), (fam, _) in ours.items()}) + [("all", "")]
    table = []
    for fam, cluster in cells:
        keys = [k for k, (f, _) in ours.items() if fam == "all" or (f == fam and k[1] == cluster)]
        policy, searched = _geomean([ours[k][1] for k in keys]), _geomean([found[k] for k in keys])
        share = (1.0 - policy) / (1.0 - searched) if searched < 1.0 else float("nan")
        table.append({"family": fam, "cluster": cluster, "pairs": len(keys), "policy": policy,
                      "search": searched, "ratio": policy / searched, "share": share})
    return table


#: A fine-tuning row's fields that come from the search from scratch alone (reused by a run of another fine-tuning).
_SCRATCH_FIELDS = ("scratch_s", "scratch_final", "scratch_history", "scratch_revision")


def _search_fields(name: str, placer: Any, graph: Any, cluster: Any, seed: int) -> dict[str, Any]:
    """Run a search placer once: ``name_s`` (wall seconds), ``name_final`` and ``name_history`` (over its reference)."""
    start = time.perf_counter()
    placer.place(graph, cluster, seed=seed)
    reference, last = placer.last_reference_step, placer.last_step
    assert reference is not None and last is not None  # set by place()
    return {f"{name}_s": time.perf_counter() - start, f"{name}_final": last / reference,
            f"{name}_history": [[e, t / reference] for e, t in placer.last_history]}


def _rows_file(folder: str, name: str) -> tuple[Path, list[dict[str, Any]]]:
    """``folder/name`` (the folder made) and the rows an earlier run left there (a run resumes)."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    done_file = out / name
    return done_file, json.loads(done_file.read_text()) if done_file.exists() else []


def _add_rows(job: Callable[[Any], dict[str, Any]], tasks: list[Any], jobs: int, done_file: Path,
              rows: list[dict[str, Any]]) -> None:
    """Run ``job`` on every task in ``jobs`` processes; each row joins ``rows``, saved to ``done_file`` as it comes."""
    from gnplace.workers import process_pool

    with process_pool(jobs) as pool:
        for row in pool.map(job, tasks):
            rows.append(row)
            done_file.write_text(json.dumps(rows, indent=1))
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("history")}), flush=True)


def _finetune_row(task: tuple[str, str, int, int, dict[str, Any], dict[str, Any], dict[str, Any] | None]
                  ) -> dict[str, Any]:
    import torch

    from gnplace import load_cluster, load_graph
    from gnplace.rl.search import FineTunePlacer, PPOSearchPlacer

    torch.set_num_threads(1)
    path, cluster_name, budget, seed, tuning, scratch, scratch_done = task
    graph, cluster = load_graph(path), load_cluster(cluster_name)
    row: dict[str, Any] = {"graph": graph.name, "family": str(graph.meta.get("family", "")), "ops": graph.num_ops,
                           "cluster": cluster.name, "budget": budget, "seed": seed, "finetune_options": tuning,
                           "scratch_options": scratch, "finetune_revision": FineTunePlacer.revision}
    placers: list[tuple[str, PPOSearchPlacer]] = [("finetune", FineTunePlacer(budget=budget, **tuning))]
    if scratch_done is not None:  # the same search from scratch ran in this folder already: deterministic, reused
        row.update({k: scratch_done[k] for k in _SCRATCH_FIELDS if k in scratch_done})
    else:
        placers.insert(0, ("scratch", PPOSearchPlacer(budget=budget, **{"prelude": 0.0, **scratch})))  # PPO alone
        row["scratch_revision"] = PPOSearchPlacer.revision
    for name, placer in placers:
        row.update(_search_fields(name, placer, graph, cluster, seed))
    target = row["scratch_final"]
    row["scratch_evals_to_final"] = report.first_reaching(row["scratch_history"], target)
    row["finetune_evals_to_scratch_final"] = report.first_reaching(row["finetune_history"], target)
    return row


def bench_finetune(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Fine-tuning from the shipped checkpoint against PPO from scratch, same budget (see the module docstring)."""
    from gnplace.datasets import load_manifest
    from gnplace.rl.search import FineTunePlacer, PPOSearchPlacer

    done_file, rows = _rows_file(args.out, "finetune.json")
    options = parse_placer_options(args.option, ["scratch", "finetune"])
    tuning = {"samples": args.ft_samples, "epochs": args.ft_epochs, "lr": args.ft_lr,
              "imitation_steps": args.ft_imitation, "zero_shot": args.ft_zero_shot, **options.get("finetune", {})}
    if args.checkpoint:  # another policy to fine-tune from (an untrained one: the control)
        tuning["checkpoint"] = args.checkpoint
    scratch = options.get("scratch", {})

    def same_scratch(r: dict[str, Any]) -> bool:  # rows of before 2026-11-25 record no seed or revisions: seed 0, 7
        return (r.get("scratch_options", {}) == scratch and r.get("seed", 0) == args.seed
                and r.get("scratch_revision", "7") == PPOSearchPlacer.revision)

    def this_run(r: dict[str, Any]) -> bool:  # a row of this very variant (other variants' rows stay in the file)
        return (same_scratch(r) and r.get("finetune_options") == tuning and r.get("budget") == args.budget
                and r.get("finetune_revision") == FineTunePlacer.revision)

    done = {(r["graph"], r["cluster"], r["budget"]) for r in rows if this_run(r)}
    scratch_rows = {(r["graph"], r["cluster"], r["budget"]): r for r in rows if same_scratch(r)}
    tasks = []
    for family in args.families:
        folder = Path("datasets") / family
        graphs = [e for e in load_manifest(folder)["graphs"] if e["split"] == "test"][: args.per_family]
        for entry in graphs:
            for cluster in args.clusters:
                key = (Path(entry["file"]).stem, cluster, args.budget)
                if key not in done:
                    tasks.append((str(folder / entry["file"]), cluster, args.budget, args.seed, tuning, scratch,
                                  scratch_rows.get(key)))
    _add_rows(_finetune_row, tasks, args.jobs, done_file, rows)
    return [r for r in rows if this_run(r)]


def finetune_table(rows: list[dict[str, Any]]) -> str:
    """Markdown table of :func:`bench_finetune`'s rows."""
    lines = ["| graph | cluster | scratch / auto | finetune / auto | scratch evals to its final | "
             "finetune evals to that | saving |", "| --- " * 7 + "|"]
    savings = []
    for r in rows:
        a, b = r["scratch_evals_to_final"], r["finetune_evals_to_scratch_final"]
        saving = (a / b) if (a and b) else None
        if saving is not None:
            savings.append(saving)
        lines.append(f"| {r['graph']} | {r['cluster']} | {r['scratch_final']:.3f} | {r['finetune_final']:.3f} | {a} | "
                     f"{b if b is not None else 'never'} | {f'{saving:.1f}x' if saving else '-'} |")
    reached = sum(r["finetune_evals_to_scratch_final"] is not None for r in rows)
    lines.append(f"\nfine-tuning reached PPO-from-scratch's final quality on {reached}/{len(rows)} pairs"
                 + (f"; median saving {statistics.median(savings):.1f}x" if savings else ""))
    return "\n".join(lines)


def _mean_curve(rows: list[dict[str, Any]], name: str) -> list[list[float]]:
    """The geometric mean over ``rows`` of ``name``'s best step so far over ``auto``'s, as a learning curve.

    Returns ``[[evaluations, ratio]]`` at every evaluation count where one of the rows improved, the
    form :func:`report.first_reaching` reads.
    """
    histories = [r[f"{name}_history"] for r in rows]
    counts = sorted({int(e) for h in histories for e, _ in h})
    return [[e, report.geomean(min(1.0, report.best_at(h, e)) for h in histories)] for e in counts]


def finetune_summary(rows: list[dict[str, Any]], points: tuple[int, ...] = (100, 400, 1000)) -> str:
    """Markdown table of :func:`bench_finetune`'s rows by cluster, by family and over all of them.

    For each group: the geometric mean of the best step so far over ``auto``'s after each of ``points``
    evaluations and at the end, for PPO from scratch and for fine-tuning; then the evaluations after
    which each mean first reaches scratch's final mean, and their ratio (the issue's "10x fewer
    evaluations", read on the group's mean). A pair counts as ``auto``'s step (1.0) before its first
    evaluation.
    """
    head = " / ".join(f"{p:,}" for p in points) + " / final"
    lines = [f"| group | pairs | scratch {head} | finetune {head} | scratch reaches its final mean after | "
             "finetune after | saving |", "| --- " * 7 + "|"]
    groups = [(f"{field} {value}", [r for r in rows if r[field] == value])
              for field in ("cluster", "family") for value in dict.fromkeys(r[field] for r in rows)]
    for title, part in [*groups, ("all", rows)]:
        if not part:
            continue
        cells, reach = [], []
        target = report.geomean(r["scratch_final"] for r in part)
        for name in ("scratch", "finetune"):
            curve = _mean_curve(part, name)  # non-increasing: its best up to p is its value at p
            at = [min(1.0, report.best_at(curve, p)) for p in points]
            cells.append(" / ".join(f"{v:.3f}" for v in [*at, report.geomean(r[f"{name}_final"] for r in part)]))
            reach.append(report.first_reaching(curve, target))
        saving = f"{reach[0] / reach[1]:.1f}x" if reach[0] and reach[1] else "-"
        lines.append(f"| {title} | {len(part)} | {cells[0]} | {cells[1]} | {reach[0] if reach[0] else '-'} | "
                     f"{reach[1] if reach[1] else 'never'} | {saving} |")
    return "\n".join(lines)


def bench_fidelity(args: argparse.Namespace) -> dict[str, Any]:
    """The simulator against real two-rank steps after calibration, and fine-tuning on real steps."""
    from gnplace.execute.base import real_timer
    from gnplace.execute.profile import calibrate, fidelity_placements, simulator_error
    from gnplace.finetune import finetune
    from gnplace.importers.sources import load_step_source

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    devices = args.devices.split(",") if args.devices else None
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
        errors += [r["error"] for r in rows]
        signed = [r["simulated_s"] / r["measured_s"] - 1.0 for r in rows]  # > 0: the simulator predicts too slow
        biases += signed
        entry: dict[str, Any] = {"links": calibration.links, "message_cpu_s": calibration.message_cpu, "placements": rows,
                                 "median_abs_error": statistics.median(r["error"] for r in rows) if rows else None,
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
        print(json.dumps({"graph": name, "median_abs_error": entry["median_abs_error"],
                          "median_signed_error": entry["median_signed_error"],
                          **({"finetune_s": entry["finetune"]["step_time_s"], "single_s": entry["finetune"]["single_s"],
                              "round_robin_s": entry["finetune"]["round_robin_s"], "auto_s": entry["finetune"]["auto_s"]}
                             if "finetune" in entry else {})}), flush=True)
    summary["median_abs_error"] = statistics.median(errors) if errors else None
    summary["median_signed_error"] = statistics.median(biases) if biases else None
    summary["placements"] = len(errors)
    (out / "fidelity.json").write_text(json.dumps(summary, indent=1))
    return summary


class MismatchedSteps(StepTimer):
    """A stand-in for real steps: the simulator on op seconds and links that the placer does not know.

    Every op's seconds on each device kind are the cost model's times ``exp(sigma * N(0, 1))``
    (measured ``cost_s``, drawn once under ``seed``), link bandwidths are multiplied by ``bandwidth``
    and latencies by ``latency``; the graph and cluster a placer passes in are replaced by these.
    """

    def __init__(self, graph: Any, cluster: Cluster, sigma: float, bandwidth: float, latency: float,
                 seed: int = 1234) -> None:
        from gnplace.sim.costmodel import DEFAULT_COSTS

        rng = np.random.default_rng(seed)
        seconds = DEFAULT_COSTS.op_times(graph, cluster)  # [ops, devices]
        kinds = cluster.kinds
        cost = {kind: seconds[:, kinds.index(kind)] * np.exp(sigma * rng.standard_normal(graph.num_ops))
                for kind in sorted(set(kinds))}
        self.graph = graph.replace(cost_s=cost)
        self.cluster = Cluster(list(cluster.devices), cluster.bandwidth * bandwidth, cluster.latency * latency,
                               name=cluster.name)
        self.sim = Simulator()

    def time(self, graph: Any, cluster: Cluster, placement: Any, *, timeline: bool = False) -> Any:
        """One step of the mismatched graph and cluster under ``placement`` (``graph`` and ``cluster`` ignored)."""
        return self.sim.time(self.graph, self.cluster, placement, timeline=timeline)

    def time_batch(self, graph: Any, cluster: Cluster, placements: Any) -> Any:
        """Many placements of the mismatched graph and cluster (``graph`` and ``cluster`` ignored)."""
        return self.sim.time_batch(self.graph, self.cluster, placements)


SCREEN_MODELS = ("learned", "simulator")


def _screen_model_row(task: tuple[str, str, int, int, tuple[float, float, float]]) -> dict[str, Any]:
    import torch

    from gnplace import load_cluster, load_graph
    from gnplace.rl.search import FineTunePlacer

    torch.set_num_threads(1)
    path, cluster_name, budget, seed, mismatch = task
    graph, cluster = load_graph(path), load_cluster(cluster_name)
    row: dict[str, Any] = {"graph": graph.name, "family": str(graph.meta.get("family", "")), "cluster": cluster.name,
                           "budget": budget, "seed": seed, "mismatch": list(mismatch),
                           "finetune_revision": FineTunePlacer.revision}
    for model in SCREEN_MODELS:
        placer = FineTunePlacer(budget=budget, timer=MismatchedSteps(graph, cluster, *mismatch), screen_model=model,
                                progress=False)
        row.update(_search_fields(model, placer, graph, cluster, seed))
    return row


def bench_screen_model(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Fine-tuning with its screen learned alone and started from the simulator, on mismatched steps (module docstring)."""
    from gnplace.datasets import load_manifest
    from gnplace.rl.search import FineTunePlacer

    done_file, rows = _rows_file(args.out, "screen_model.json")
    mismatch = [float(v) for v in args.mismatch]

    def this_run(r: dict[str, Any]) -> bool:
        return (r["budget"] == args.budget and r["seed"] == args.seed and r["mismatch"] == mismatch
                and r["finetune_revision"] == FineTunePlacer.revision)

    done = {(r["graph"], r["cluster"]) for r in rows if this_run(r)}
    tasks = []
    for family in args.families:
        folder = Path("datasets") / family
        for entry in [e for e in load_manifest(folder)["graphs"] if e["split"] == "test"][: args.per_family]:
            for cluster in args.clusters:
                if (Path(entry["file"]).stem, cluster) not in done:
                    tasks.append((str(folder / entry["file"]), cluster, args.budget, args.seed, tuple(mismatch)))
    _add_rows(_screen_model_row, tasks, args.jobs, done_file, rows)
    return [r for r in rows if this_run(r)]


def screen_model_summary(rows: list[dict[str, Any]], points: tuple[int, ...] = (100, 200, 400)) -> str:
    """Markdown table of :func:`bench_screen_model`'s rows: each screen's geometric mean curve, by family and in all."""
    head = " / ".join(f"{p:,}" for p in points) + " / final"
    lines = [f"| group | pairs | learned {head} | simulator {head} | simulator reaches learned's final mean after |"
             f" better / worse |", "| --- " * 6 + "|"]
    groups = [(f"family {f}", [r for r in rows if r["family"] == f]) for f in dict.fromkeys(r["family"] for r in rows)]
    for title, part in [*groups, ("all", rows)]:
        if not part:
            continue
        cells = []
        for model in SCREEN_MODELS:
            curve = _mean_curve(part, model)
            at = [min(1.0, report.best_at(curve, p)) for p in points]
            cells.append(" / ".join(f"{v:.3f}" for v in [*at, report.geomean(r[f"{model}_final"] for r in part)]))
        reach = report.first_reaching(_mean_curve(part, "simulator"), report.geomean(r["learned_final"] for r in part))
        better = sum(r["simulator_final"] < r["learned_final"] for r in part)
        worse = sum(r["simulator_final"] > r["learned_final"] for r in part)
        lines.append(f"| {title} | {len(part)} | {cells[0]} | {cells[1]} | {reach if reach else 'never'} | "
                     f"{better} / {worse} |")
    return "\n".join(lines)


def bench_device_map(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Gnplace's placements as module-level device_maps against accelerate's "auto" and "balanced" (simulator)."""
    import warnings

    from gnplace import load_cluster
    from gnplace.execute.device_map import compare_device_maps
    from gnplace.families import draw
    from gnplace.importers.torch import import_step
    from gnplace.placers import get_placer

    rows = []
    models = [(family, seed) for family in args.families for seed in range(args.per_family)]
    for family, seed in models:
        module, inputs = draw(family, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = import_step(module, inputs, name=f"{family}_{seed}").graph
        for cluster_name in args.clusters:
            cluster = load_cluster(cluster_name)
            for placer_name in args.placers:
                placement = get_placer(placer_name).place(graph, cluster, seed=0)
                found = compare_device_maps(graph, cluster, placement, module)
                row = {"graph": graph.name, "ops": graph.num_ops, "cluster": cluster.name, "placer": placer_name,
                       **{k: v for k, v in found.items()}}
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def device_map_table(rows: list[dict[str, Any]]) -> str:
    """Geometric means over the placement at op granularity, per cluster and placer."""
    lines = ["| cluster | placer | graphs | its device_map | accelerate auto | accelerate balanced |",
             "| --- " * 6 + "|"]
    for key in sorted({(r["cluster"], r["placer"]) for r in rows}):
        sel = [r for r in rows if (r["cluster"], r["placer"]) == key]

        def gm(column: str, sel: list[dict[str, Any]] = sel) -> float:
            return float(np.exp(np.mean([np.log(r[column] / r["placement"]) for r in sel])))

        lines.append(f"| {key[0]} | {key[1]} | {len(sel)} | {gm('device_map'):.3f} | {gm('accelerate_auto'):.3f} | "
                     f"{gm('accelerate_balanced'):.3f} |")
    return "\n".join(lines)


def bench_constructor(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The placement MDP's own finish time against the simulator, for the policy's greedy placement.

    Per test graph and cluster: the list schedule's finish time of the greedy placement (what the
    policy's dynamic features are computed from) over the simulated step of the same placement on the
    decision graph (the coarse graph the MDP plays), and over the simulated step on the original graph
    (what the reward scores); with ``--op-level``, the same with every op its own decision node.
    """
    import torch

    from gnplace.cluster import load_cluster
    from gnplace.coarsen import Coarsening
    from gnplace.graph_io import load_graph
    from gnplace.policy.features import build_policy_input, ops_alone
    from gnplace.rl.agent import sample
    from gnplace.rl.env import PlacementMDP
    from gnplace.rl.zeroshot import SHIPPED_CHECKPOINT, cached_policy
    from gnplace.sim.simulator import Simulator

    torch.set_num_threads(1)
    policy, _ = cached_policy(args.checkpoint or SHIPPED_CHECKPOINT)
    sim = Simulator()
    rows = []
    for family in args.families:
        for path in report.test_graphs(family, args.per_family):
            graph = load_graph(path)
            for name in args.clusters:
                cluster = load_cluster(name)
                row: dict[str, Any] = {"graph": graph.name, "ops": graph.num_ops, "cluster": cluster.name}
                levels: list[tuple[str, Coarsening | None]] = [("coarse", None)]
                if args.op_level:
                    levels.append(("op", ops_alone(graph)))
                for label, coarsening in levels:
                    inp = build_policy_input(graph, cluster, coarsening=coarsening)
                    with torch.no_grad():
                        greedy = sample(policy, PlacementMDP(inp), 1, greedy=True, enc=policy.encode(inp)).rollout
                    on_decision = greedy.group_devices[:, inp.decision.group]
                    decision_step = float(sim.time_batch(inp.decision, cluster, on_decision).step_time[0])
                    step = float(sim.time_batch(graph, cluster, inp.expand(greedy.group_devices)).step_time[0])
                    row[f"{label}_nodes"] = inp.decision.num_ops
                    row[f"{label}_mdp_over_decision_sim"] = float(greedy.finish[0]) / decision_step
                    row[f"{label}_mdp_over_sim"] = float(greedy.finish[0]) / step
                    row[f"{label}_step_ms"] = step * 1e3
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def _training_step(module: Any, run: Any, inputs: tuple[Any, ...]) -> None:
    """Zero ``module``'s gradients, then ``run(*inputs).backward()``."""
    module.zero_grad(set_to_none=True)
    run(*inputs).backward()


def bench_apply(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Seconds of a training step of each model eagerly and placed on one CPU by ``gnplace.apply`` (one thread)."""
    import torch
    from torch.utils._pytree import tree_unflatten

    from gnplace.cluster import load_cluster
    from gnplace.execute.apply import apply
    from gnplace.importers.sources import load_step_source
    from gnplace.placement import Placement

    torch.set_num_threads(1)
    rows = []
    for source in args.models:
        step, module = load_step_source(source)
        inputs = tuple(tree_unflatten(step.trace.inputs, step.trace.input_spec))  # the factory's example inputs
        one_device = Placement(np.zeros(step.graph.num_ops, dtype=np.int64), load_cluster("cpu_gpu"))
        placed = apply(module, one_device, inputs, devices=["cpu", "cpu"], step=step)  # all on device 0
        eager_step = functools.partial(_training_step, module, module, inputs)
        placed_step = functools.partial(_training_step, module, placed, inputs)
        best = {"eager": np.inf, "placed": np.inf}
        steps: list[tuple[str, Callable[[], None]]] = [("eager", eager_step), ("placed", placed_step)]
        for r in range(args.rounds):  # alternate, so that the machine's drift falls on both alike
            for name, fn in steps if r % 2 == 0 else steps[::-1]:
                best[name] = min(best[name], median_seconds(fn, args.repeat))
        row = dict(model=source, ops=len(placed.program.ops), eager_s=best["eager"], placed_s=best["placed"],
                   ratio=best["placed"] / best["eager"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| model | ops run | eager step (ms) | placed on one CPU (ms) | placed / eager |\n| --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['model'].rpartition(':')[2]} | {row['ops']} | {row['eager_s'] * 1e3:.2f} | "
              f"{row['placed_s'] * 1e3:.2f} | {row['ratio']:.2f} |")
    return rows


def bench_latency(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Seconds of the policy's greedy placement (coarsening and features included) of large graphs, one core."""
    import torch

    from gnplace.cluster import load_cluster
    from gnplace.rl.zeroshot import PolicyPlacer

    torch.set_num_threads(1)
    cluster = load_cluster(args.cluster)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    placer = PolicyPlacer(checkpoint=args.checkpoint, samples=args.samples, subsets=args.subsets)
    rows = []
    for ops in args.ops:
        graph = large_graph(ops, cache)
        placer.place(graph, cluster, seed=0)  # warm: compile the simulator, load the policy
        seconds = median_seconds(functools.partial(placer.place, graph, cluster, seed=0), args.repeat)
        row = dict(ops=graph.num_ops, cluster=cluster.name, samples=args.samples, seconds=seconds,
                   step_ms=placer.last_step * 1e3 if placer.last_step else None)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run the chosen benchmark; returns the exit status (bad input: one line and 2)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="bench", required=True)
    sim = sub.add_parser("sim", help="simulator evaluations")
    sim.add_argument("--ops", type=int, default=2000)
    sim.add_argument("--devices", type=int, default=4)
    sim.add_argument("--repeat", type=int, default=300)
    sim.add_argument("--batch", type=int, default=256)
    sim.add_argument("--json", action="store_true")
    imp = sub.add_parser("import", help="training-graph extraction from PyTorch (one core)")
    imp.add_argument("--layers", type=int, nargs="+", default=[6, 15, 30])
    imp.add_argument("--json", action="store_true")
    scale = sub.add_parser("scale", help="coarsen + m_etf + expand + simulate on 10k..100k-op graphs")
    scale.add_argument("--ops", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    scale.add_argument("--groups", type=int, default=1000)
    scale.add_argument("--cluster", default="k80x4")
    scale.add_argument("--cache", default="out/bench")
    scale.add_argument("--full-up-to", type=int, default=20_000, help="also run m_etf on the full graph up to this size")
    exact = sub.add_parser("exact", help="heuristics against the exact placer on small graphs")
    exact.add_argument("--clusters", nargs="+", default=["k80x2", "k80x4"])
    exact.add_argument("--groups", type=int, default=12, help="coarsen dataset graphs to this many groups")
    exact.add_argument("--per-family", type=int, default=2)
    exact.add_argument("--time-limit", type=float, default=20.0)
    exact.add_argument("--placers", nargs="+", default=["single", "round_robin", "expert", "metis", "heft", "m_etf", "m_sct"])
    placers = sub.add_parser("placers", help="placement time of the fast placers")
    placers.add_argument("--ops", type=int, default=2000)
    placers.add_argument("--cluster", default="k80x4")
    placers.add_argument("--repeat", type=int, default=5)
    placers.add_argument("--placers", nargs="+", default=["single", "round_robin", "expert", "metis", "heft", "m_etf", "m_sct"])
    search = sub.add_parser("search", help="search placers against auto on the test split")
    search.add_argument("--placers", nargs="+", default=["ppo", "reinforce", "annealing"])
    search.add_argument("--budget", type=int, default=20_000)
    search.add_argument("--clusters", nargs="+", default=["k80x4", "v100x8", "tight4"])
    search.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt"])
    search.add_argument("--split", default="test")
    search.add_argument("--per-family", type=int, default=0, help="graphs per family (0: all)")
    search.add_argument("--seed", type=int, default=0)
    search.add_argument("--jobs", type=int, default=2)
    search.add_argument("--out", default="out/bench_search")
    add_option_argument(search)  # e.g. -O ppo.prelude=0: PPO alone
    curves = sub.add_parser("curves", help="learning curves of the search placers")
    curves.add_argument("--graphs", nargs="+", default=["datasets/cifar10/cifar10_002.gnpg", "datasets/ptb/ptb_002.gnpg",
                                                         "datasets/nmt/nmt_002.gnpg"])
    curves.add_argument("--cluster", default="k80x4")
    curves.add_argument("--placers", nargs="+", default=["ppo", "reinforce", "annealing"])
    curves.add_argument("--budget", type=int, default=20_000)
    curves.add_argument("--seed", type=int, default=0)
    curves.add_argument("--out", default="docs/figures")
    speed = sub.add_parser("ppo-speed", help="seconds of one PPO iteration")
    speed.add_argument("--nodes", type=int, default=1000)
    speed.add_argument("--cluster", default="k80x4")
    speed.add_argument("--samples", type=int, default=32)
    speed.add_argument("--epochs", type=int, default=10)
    speed.add_argument("--repeat", type=int, default=5)
    zs = sub.add_parser("zeroshot", help="zero-shot placement by the pretrained policy against auto")
    zs.add_argument("--checkpoint", default=None, help="policy checkpoint (default: the shipped one)")
    zs.add_argument("--samples", type=int, default=16)
    zs.add_argument("--constructor", nargs="+", default=None, metavar="PATH",
                    help="the policy's constructor checkpoints, or none (default: the shipped ones)")
    zs.add_argument("--constructor-samples", type=int, default=None, metavar="N",
                    help="the constructor's samples beside its greedy placement (default: 4)")
    zs.add_argument("--constructor-temperature", type=float, default=None, metavar="TAU",
                    help="sampling temperature of the constructor's samples (default: 0.1)")
    zs.add_argument("--constructor-sizes", type=int, nargs="*", default=None, metavar="K",
                    help="device counts k: on larger clusters each constructor also places on the k fastest "
                         "devices alone (default: the placer's, 4; none given: the whole cluster only)")
    zs.add_argument("--refine", type=int, default=None, metavar="N",
                    help="samples of the policy's last round, around the best of all its other candidates "
                         "(default: 4; 0: none)")
    zs.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt"])
    zs.add_argument("--split", choices=("test", "train"), default="test",
                    help="the split placed: train for tuning decoding settings on graphs other than the test "
                         "graphs (default: test)")
    zs.add_argument("--min-ops", type=int, default=0, metavar="OPS", help="only graphs of more than OPS ops")
    zs.add_argument("--clusters", nargs="+", default=["k80x2", "k80x4", "v100x8", "tight4", "cpu_gpu"])
    zs.add_argument("--real-clusters", nargs="*", default=["k80x4", "v100x8"])
    zs.add_argument("--unseen-clusters", nargs="*", default=[f"configs/clusters/{n}.yaml" for n in (
        "mixed_generations", "hosts3x4", "p100x16", "newkind4")])
    zs.add_argument("--unseen-per-family", type=int, default=3, help="test graphs per family on unseen clusters")
    zs.add_argument("--seed", type=int, default=0,
                    help="seed of the policy's and auto's placements (default: 0)")
    zs.add_argument("--jobs", type=int, default=2)
    zs.add_argument("--out", default="out/bench_zeroshot")
    zs.add_argument("--no-subsets", dest="subsets", action="store_false",
                    help="the policy decodes on the whole cluster only (ablation)")
    zs.add_argument("--op-level", type=int, default=None, metavar="OPS",
                    help="policy's op_level: also decode graphs of at most OPS ops with no coarsening (default: 4000)")
    zs.add_argument("--temperatures", type=float, nargs="+", default=None,
                    help="sampling temperatures of the policy (default: its own, 0.1 0.2 0.3 0.5)")
    zs.add_argument("--rounds", type=int, default=1,
                    help="the policy's rounds: samples drawn around the best placement so far (default: 1)")
    con = sub.add_parser("constructor", help="the placement MDP's finish time against the simulator")
    con.add_argument("--checkpoint", default=None, help="policy checkpoint (default: the shipped one)")
    con.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt"])
    con.add_argument("--per-family", type=int, default=2)
    con.add_argument("--clusters", nargs="+", default=["k80x4", "v100x8", "cpu_gpu"])
    con.add_argument("--op-level", action="store_true", help="also with every op its own decision node")
    app = sub.add_parser("apply", help="a step placed by gnplace.apply on one CPU against eager PyTorch's")
    app.add_argument("--models", nargs="+", default=[f"gnplace.execute.examples:{name}" for name in
                                                      ("mlp", "convnet", "branchy", "transformer")])
    app.add_argument("--rounds", type=int, default=6)
    app.add_argument("--repeat", type=int, default=20)
    lat = sub.add_parser("latency", help="seconds of the policy's greedy placement of 10k and 100k-op graphs")
    lat.add_argument("--ops", type=int, nargs="+", default=[10_000, 100_000])
    lat.add_argument("--cluster", default="k80x4")
    lat.add_argument("--checkpoint", default=None)
    lat.add_argument("--subsets", action="store_true",
                     help="also decode on the fastest k devices alone (default: one greedy placement on all)")
    lat.add_argument("--samples", type=int, default=0, help="samples beside the greedy placement (default: 0)")
    lat.add_argument("--repeat", type=int, default=3)
    lat.add_argument("--cache", default="out/bench")
    ft = sub.add_parser("finetune", help="fine-tuning from the checkpoint against PPO from scratch")
    ft.add_argument("--budget", type=int, default=4000)
    ft.add_argument("--clusters", nargs="+", default=["k80x4"])
    ft.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt"])
    ft.add_argument("--per-family", type=int, default=2)
    ft.add_argument("--seed", type=int, default=0)
    ft.add_argument("--jobs", type=int, default=2)
    ft.add_argument("--out", default="out/bench_finetune")
    ft.add_argument("--checkpoint", default=None, help="fine-tune from this policy (default: the shipped one)")
    ft.add_argument("--ft-samples", type=int, default=16, help="fine-tuning: placements per iteration")
    ft.add_argument("--ft-epochs", type=int, default=4, help="fine-tuning: PPO epochs per batch")
    ft.add_argument("--ft-lr", type=float, default=1e-3, help="fine-tuning: learning rate")
    ft.add_argument("--ft-imitation", type=int, default=0, help="fine-tuning: imitation steps on auto first")
    ft.add_argument("--no-ft-zero-shot", dest="ft_zero_shot", action="store_false",
                    help="fine-tuning skips the checkpoint's zero-shot placement (auto's and the search's alone)")
    add_option_argument(ft)  # -O finetune.prior=6, -O scratch.modules=false
    sm = sub.add_parser("screen-model", help="fine-tuning's screen from nothing or from the simulator, mismatched steps")
    sm.add_argument("--mismatch", nargs=3, type=float, default=[0.5, 0.5, 2.0], metavar=("SIGMA", "BANDWIDTH", "LATENCY"),
                    help="op-seconds noise and link bandwidth and latency factors of the stand-in for real steps")
    sm.add_argument("--budget", type=int, default=400)
    sm.add_argument("--clusters", nargs="+", default=["k80x4", "v100x8", "tight4"])
    sm.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt"])
    sm.add_argument("--per-family", type=int, default=1)
    sm.add_argument("--seed", type=int, default=0)
    sm.add_argument("--jobs", type=int, default=2)
    sm.add_argument("--out", default="out/bench_screen_model")
    fid = sub.add_parser("fidelity", help="simulator against real two-rank steps after calibration")
    fid.add_argument("--graphs", nargs="+", default=[f"gnplace.execute.examples:{n}" for n in ("mlp", "convnet", "branchy")])
    fid.add_argument("--placements", type=int, default=8, help="placements per graph")
    fid.add_argument("--repeats", type=int, default=7, help="timed steps per measurement (median)")
    fid.add_argument("--rounds", type=int, default=5,
                     help="measurements of each placement, in turn; the median is its step (default: 5)")
    fid.add_argument("--anchor-rounds", type=int, default=5,
                     help="calibration: measurements of the one-device step, the median anchored to (default: 5)")
    fid.add_argument("--probe-rounds", type=int, default=5,
                     help="calibration: rounds of the link and message probes, the medians kept (default: 5)")
    fid.add_argument("--finetune-budget", type=int, default=60, help="real-step evaluations of fine-tuning (0: skip)")
    fid.add_argument("--seed", type=int, default=0)
    fid.add_argument("--timer", default="dist", choices=["dist", "local"],
                     help="dist: two gloo ranks of one thread (default); local: --devices of this process")
    fid.add_argument("--devices", default=None, help="local: torch devices, e.g. cuda:0,cpu (default: cpu + cuda:0)")
    fid.add_argument("--threads", type=int, default=1, help="local: torch CPU threads of the cpu device (default: 1)")
    fid.add_argument("--out", default="out/bench_fidelity")
    report.add_parser(sub)
    vs = sub.add_parser("vs-search", help="a zeroshot run against a search run on the pairs both placed")
    vs.add_argument("zeroshot", type=Path, help="zeroshot.json of `bench.py zeroshot`")
    vs.add_argument("search", type=Path, help="results.csv of `bench.py search`")
    vs.add_argument("--placer", default="ppo", help="the search placer to compare with (default: ppo)")
    vs.add_argument("--budget", type=int, default=None, help="only the search rows of this budget (evaluations)")
    vs.add_argument("--seed", type=int, default=None, help="only the search rows of this seed")
    dm = sub.add_parser("device-map", help="placements as device_maps against accelerate's auto and balanced")
    dm.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt"])
    dm.add_argument("--per-family", type=int, default=3)
    dm.add_argument("--clusters", nargs="+", default=["k80x4", "v100x8", "tight4"])
    dm.add_argument("--placers", nargs="+", default=["auto", "policy"])
    args = parser.parse_args(argv)
    return run_reporting_errors(run, args, "bench")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark ``args.bench`` names."""
    _check_counts(args)
    if args.bench == "report":
        report.run(args)
        return 0
    if args.bench == "vs-search":
        lines = list(zeroshot_against_search(args.zeroshot, args.search, args.placer, args.budget, args.seed))
        print(f"| family | cluster | pairs | policy / auto | {args.placer} / auto | policy / {args.placer} "
              f"| policy's share of {args.placer}'s gain |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for line in lines:
            print(f"| {line['family']} | {line['cluster']} | {line['pairs']} | {line['policy']:.3f} | "
                  f"{line['search']:.3f} | {line['ratio']:.3f} | {line['share']:.0%} |")
        return 0
    if args.bench == "device-map":
        print(device_map_table(bench_device_map(args)))
        return 0
    if args.bench == "fidelity":
        fidelity = bench_fidelity(args)
        if fidelity["median_abs_error"] is None:
            print("no placement splits these steps over these devices: nothing to check the simulator on")
        else:
            print(f"median absolute error over {fidelity['placements']} placements that split the step: "
                  f"{fidelity['median_abs_error']:.1%} (median signed error {fidelity['median_signed_error']:+.1%}: "
                  "simulated over measured, minus 1)")
        return 0
    if args.bench == "screen-model":
        print(screen_model_summary(bench_screen_model(args)))
        return 0
    if args.bench == "finetune":
        rows = bench_finetune(args)
        print(finetune_table(rows))
        print("\ngeometric means of the best step so far over auto's:\n")
        print(finetune_summary(rows))
        return 0
    if args.bench == "zeroshot":
        print(zeroshot_tables(bench_zeroshot(args)))
        return 0
    if args.bench == "latency":
        bench_latency(args)
        return 0
    if args.bench == "apply":
        bench_apply(args)
        return 0
    if args.bench == "constructor":
        rows = bench_constructor(args)
        for key in [k for k in rows[0] if k.endswith(("_mdp_over_decision_sim", "_mdp_over_sim"))] if rows else []:
            values = [r[key] for r in rows]
            print(f"{key}: {min(values):.3f} .. {max(values):.3f} (median {float(np.median(values)):.3f})")
        return 0
    if args.bench == "search":
        summary = bench_search(args)
        head = "| family | cluster | " + " | ".join(f"{p} / auto" for p in args.placers) + " |"
        print(f"budget {args.budget} evaluations; geometric mean of step time over auto's")
        print(head)
        print("| --- " * (2 + len(args.placers)) + "|")
        for line in summary:
            cells = " | ".join(f"{line[p]:.3f} ({line[p + '_n']})" for p in args.placers)
            print(f"| {line['family']} | {line['cluster']} | {cells} |")
        return 0
    if args.bench == "curves":
        print(json.dumps(bench_curves(args), indent=1))
        return 0
    if args.bench == "ppo-speed":
        bench_ppo_speed(args)
        return 0
    if args.bench == "placers":
        bench_placers(args)
        return 0
    if args.bench == "exact":
        rows = bench_exact(args)
        for name in args.placers:
            ratios = [r[name] for r in rows]
            print(f"{name}: geometric mean step / exact {float(np.exp(np.mean(np.log(ratios)))):.3f}, worst {max(ratios):.3f}")
        return 0
    if args.bench == "scale":
        bench_scale(args)
        return 0
    if args.bench == "import":
        rows = bench_import(args)
        print(json.dumps(rows, indent=1) if args.json else "\n".join(
            f"cifar10 L={r['layers']}: {r['ops']} ops extracted in {r['seconds']:.1f} s" for r in rows))
        return 0
    rows = bench_sim(args)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"simulator: {args.ops}-op layered graph on {args.devices} K80s (median)")
    for col in ("mode", "placement", "call", "ms per evaluation"):
        table.add_column(col)
    for row in rows:
        table.add_row(row["mode"], row["placement"], row["call"], f"{row['ms_per_eval']:.3f}")
    Console().print(table)
    return 0


def _check_counts(args: argparse.Namespace) -> None:
    """Refuse negative sizes, counts and budgets (and fewer than one device or repeat) as one error line."""
    from gnplace.cli.common import check_count

    minimum_one = {"devices", "repeat", "repeats", "rounds", "jobs", "batch", "nodes", "epochs", "ft_samples", "ft_epochs", "ops",
                   "layers", "groups"}
    for name, value in sorted(vars(args).items()):
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, int) and not isinstance(v, bool) and name not in ("seed",):
                check_count(v, "--" + name.replace("_", "-"), minimum=1 if name in minimum_one else 0)


if __name__ == "__main__":
    sys.exit(main())
