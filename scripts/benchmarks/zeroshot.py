"""Zero-shot placement by the pretrained policy: against ``auto`` and a search, its latency, its constructor."""

from __future__ import annotations

import argparse
import functools
import json
import math
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from gnplace.cli.common import whole_number
from gnplace.exceptions import InvalidArgument
from gnplace.graph_io import write_atomically
from gnplace.limits import json_text
from gnplace.sim import Simulator
from gnplace.sim.timer import geomean

from .common import (
    DATASETS,
    Store,
    add_command,
    add_per_family_argument,
    check_clusters,
    check_distinct_names,
    check_families,
    check_output_folder,
    large_graph,
    median_seconds,
    test_graphs,
)

#: One zero-shot row's task: graph file, cluster spec, checkpoint (None: the shipped one), samples, group,
#: the policy's other options and the seed.
ZeroShotTask = tuple[str, str, str | None, int, str, dict[str, Any], int]

#: Bumped when :func:`_zero_shot_row` measures something else: rows saved before are not reused.
ROW_REVISION = 1


def _zero_shot_row(task: ZeroShotTask) -> dict[str, Any]:
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
    # default: subsets, tempered; no progress in a worker's row
    placer = PolicyPlacer(checkpoint=checkpoint, samples=samples, timer=sim, progress=False, **options)
    start = time.perf_counter()
    ours = sim.time(graph, cluster, placer.place(graph, cluster, seed=seed))
    took = time.perf_counter() - start
    # the default before 2026-11-23: K samples of the policy itself (tau = 1) on the whole cluster
    plain = PolicyPlacer(checkpoint=checkpoint, samples=samples, timer=sim, subsets=False, temperatures=(1.0,),
                         op_level=0, around=False, constructor="none", progress=False, module_chain=0)
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


#: What :func:`_zero_shot_row` writes and the tables read, by type: a saved row without one of them, or with a value of
#: another type (a line edited by hand, a flipped byte), runs again rather than failing the tables with a traceback.
ROW_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("group", "graph", "family", "cluster", "auto_choice", "policy_choice"), (str,)),
    **dict.fromkeys(("ops", "seed"), (int,)),
    **dict.fromkeys(("auto_oom", "greedy_oom", "policy_oom", "plain_oom"), (bool,)),
    **dict.fromkeys(("auto_ms", "greedy", "policy", "place_s", "plain", "plain_s"), (int, float)),
    "portfolio": (int, float, type(None)),
}


def readable_row(row: dict[str, Any] | None) -> bool:
    """Whether ``row`` (a saved zero-shot row, None: none) holds every field of :data:`ROW_TYPES`, each of its type."""
    return row is not None and all(
        name in row and isinstance(row[name], types) and (bool in types or not isinstance(row[name], bool))
        for name, types in ROW_TYPES.items())


def zero_shot_key(task: ZeroShotTask) -> str:
    """SHA-256 (hex) of what determines a zero-shot row, so that a rerun reuses the rows saved before.

    The policy's and ``auto``'s :func:`gnplace.evaluate.task_key` (the graph file's content, the cluster's
    fingerprint, each placer's revision, the policy's options, samples and checkpoint content, the shipped
    files it reads, the seed), the row's group and :data:`ROW_REVISION`.

    Raises:
        GnplaceError: if the graph file or the cluster cannot be found.
    """
    import hashlib

    from gnplace.evaluate import Task, task_key

    path, cluster, checkpoint, samples, group, options, seed = task
    given = {**options, "samples": samples, **({"checkpoint": checkpoint} if checkpoint else {})}
    identity = {"group": group, "revision": ROW_REVISION, "auto": task_key(Task(path, cluster, "auto", seed=seed)),
                "policy": task_key(Task.with_options(path, cluster, "policy", given, seed=seed))}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def bench_zeroshot(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Zero-shot placement of the test splits, the real models and unseen clusters against auto.

    Each row is saved to ``OUT/zeroshot_rows.jsonl`` as it is made, keyed by :func:`zero_shot_key`: a run
    killed midway and started again with the same arguments places only the pairs not saved (nor those whose
    saved row is not :func:`readable_row`). The
    rows of this run, in the order of its tasks, go to ``OUT/zeroshot.json`` at its end.
    """
    from gnplace.datasets import load_manifest
    from gnplace.rl.zeroshot import PolicyPlacer
    from gnplace.rl.zeroshot_cli import DECODING_ARGUMENTS, named_by_flag
    from gnplace.workers import task_mapper

    out = check_output_folder(args.out)
    check_families(args.families)
    for flag in ("clusters", "real_clusters", "unseen_clusters"):  # the tables group rows by cluster name
        check_distinct_names(getattr(args, flag), "--" + flag.replace("_", "-"))
    options: dict[str, Any] = {"subsets": args.subsets, "rounds": args.rounds}
    if args.temperatures:
        options["temperatures"] = tuple(args.temperatures)
    for name in ("op_level", "constructor", "prior", "around", *DECODING_ARGUMENTS):
        if getattr(args, name) is not None:  # given: else the placer's default
            options[name] = getattr(args, name)
    # the policy's settings and checkpoints refused here (one line), not by the first row's worker
    try:
        PolicyPlacer(checkpoint=args.checkpoint, samples=args.samples, **options)
    except InvalidArgument as err:
        raise named_by_flag(err, args) from err

    def task(graph: str, cluster: str, group: str) -> ZeroShotTask:
        return graph, cluster, args.checkpoint, args.samples, group, options, args.seed

    tasks = []
    test_graphs = []  # the unseen clusters place test graphs whatever the split
    for family in args.families:
        folder = DATASETS / family  # the repository's, from whatever folder the run starts in
        entries = load_manifest(folder)["graphs"]
        graphs = [str(folder / e["file"]) for e in entries if e["split"] == args.split and e["ops"] > args.min_ops]
        test_graphs.append([str(folder / e["file"]) for e in entries if e["split"] == "test"])
        # rows of training graphs are grouped "train", so that tables and vs-search never take them for test pairs
        tasks += [task(g, c, args.split) for c in args.clusters for g in graphs]
    real = sorted(str(p) for p in (DATASETS / "real").glob("*.gnpg"))
    tasks += [task(g, c, "real") for c in args.real_clusters for g in real]
    few = [g for graphs in test_graphs for g in graphs[: args.unseen_per_family]]
    tasks += [task(g, c, "unseen") for c in args.unseen_clusters for g in few]
    if not tasks:  # --min-ops past every graph, no clusters: an empty table and status 0 said nothing was wrong
        raise InvalidArgument(f"no pair to place: no {args.split} graph of {', '.join(args.families) or 'no family'} "
                              f"has more than {args.min_ops:,} ops on the clusters given, and no real or unseen "
                              "clusters are given")
    keys = [zero_shot_key(t) for t in tasks]  # every graph and cluster found before the first placement
    out.mkdir(parents=True, exist_ok=True)  # every argument checked: a refused run leaves no empty folder
    store = Store(out / "zeroshot_rows.jsonl")
    # a task asked twice runs once; a saved row the tables cannot read runs again, its new row replacing it
    todo = {key: t for key, t in zip(keys, tasks) if not readable_row(store.rows.get(key))}
    total = len(set(keys))
    print(f"{total - len(todo)} of {total} rows saved in {args.out}, {len(todo)} to run", flush=True)
    with task_mapper(args.jobs) as mapper:  # no worker starts when every row is saved
        for done, (key, row) in enumerate(zip(todo, mapper(_zero_shot_row, todo.values())), start=total - len(todo) + 1):
            store.add({"key": key, **row})  # a kill loses the pairs under way, never those done
            print(f"[{done}/{total}] {json.dumps(row)}", flush=True)
    rows = [{k: v for k, v in store.rows[key].items() if k != "key"} for key in keys]
    write_atomically(out / "zeroshot.json", json.dumps(rows, indent=1).encode())  # a kill never truncates it
    return rows


def _zeroshot_cells(rows: list[dict[str, Any]]) -> str:
    """Greedy, greedy + K at tau 1, policy and portfolio geometric means, and OOM counts, as table cells.

    Each mean is over the rows whose placement fits: the step of a placement out of memory is no step a device
    can run, so its ratio is left out and counted instead (as ``gnplace evaluate`` leaves OOM runs out of its
    means; a greedy decode over memory on tight4 at 0.79x ``auto`` pulled the greedy mean under its fitting rows').
    The OOM cell counts the policy's, then in brackets greedy + K's and the greedy decode's, where ``auto`` fits.
    A row whose ``auto`` overflows memory has no reference step: it is left out of every mean and counted
    after the OOM counts (``; auto k``).
    """
    referenced = [r for r in rows if not r["auto_oom"]]
    port = [r["portfolio"] for r in referenced if r["portfolio"] is not None]

    def fitting(name: str) -> float:
        return geomean([r[name] for r in referenced if not r.get(f"{name}_oom")])

    def over(name: str) -> int:
        return sum(bool(r.get(f"{name}_oom")) for r in referenced)

    unreferenced = len(rows) - len(referenced)
    return (f"{fitting('greedy'):.3f} | {fitting('plain'):.3f} | {fitting('policy'):.3f} | "
            f"{geomean(port) if port else float('nan'):.3f} | {over('policy')} ({over('plain')}, {over('greedy')})"
            + (f"; auto {unreferenced}" if unreferenced else ""))


def zeroshot_tables(rows: list[dict[str, Any]]) -> str:
    """Markdown tables of :func:`bench_zeroshot`'s rows: geometric means over auto of what fits, OOM counts, seconds."""
    lines = []
    for group in ("test", "train", "real", "unseen"):
        part = [r for r in rows if r["group"] == group]
        if not part:
            continue
        lines += [f"\n**{group}** (geometric mean of step time over auto's, of the placements that fit; OOM where "
                  "auto fits)\n",
                  "| family | cluster | graphs | greedy | greedy + K, tau 1 | policy | portfolio | "
                  "OOM: policy (greedy + K, greedy) | place s | greedy + K s |",
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
    """Zero-shot against a search on the pairs both placed within memory: step times over ``auto``'s, their quotient.

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

    try:
        with search.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = {"graph", "cluster", "placer", "step_time_s", "oom", "error"} - set(reader.fieldnames or [])
            rows = [] if missing else [r for r in reader if not r["error"] and r["oom"] != "True"]
    except (UnicodeDecodeError, csv.Error) as err:
        missing = {f"readable text ({err})"}
    if missing:  # the two files swapped, or not a search run's
        raise SystemExit(f"{search}: not a results.csv of `bench.py search` (no {', '.join(sorted(missing))})")
    saved = _zeroshot_rows(zeroshot, {"group", "graph", "family", "cluster", "policy", "auto_ms"})
    # a folder holds a row per seed, auto's too (it depends on the seed): a search row is over auto's of its seed
    auto = {(r["graph"], r["cluster"], r.get("seed", "")): float(r["step_time_s"])
            for r in rows if r["placer"] == "auto"}
    searched_rows = [r for r in rows if r["placer"] == placer and (r["graph"], r["cluster"], r.get("seed", "")) in auto
                     and (budget is None or r.get("budget") == str(budget))
                     and (seed is None or r.get("seed") == str(seed))]
    runs = Counter((r["graph"], r["cluster"]) for r in searched_rows)
    if runs and max(runs.values()) > 1:
        settings = sorted({(r.get("budget", ""), r.get("seed", ""), r.get("options", "")) for r in searched_rows})
        raise SystemExit(f"{search} holds {max(runs.values())} {placer} rows for one pair (budget, seed, options: "
                         f"{settings}); choose one with --budget and --seed")
    reference = {(r["graph"], r["cluster"]): auto[(r["graph"], r["cluster"], r.get("seed", ""))] for r in searched_rows}
    found = {(r["graph"], r["cluster"]): float(r["step_time_s"]) / reference[(r["graph"], r["cluster"])]
             for r in searched_rows}
    # the policy's step time over the search run's auto (a zero-shot run under another seed divides by another auto);
    # a placement out of memory has no step to compare, as the search's rows out of memory are left out above
    ours = {(r["graph"], r["cluster"]):
            (r["family"], r["policy"] * r["auto_ms"] / 1e3 / reference[(r["graph"], r["cluster"])])
            for r in saved if r["group"] == "test" and (r["graph"], r["cluster"]) in found and not r.get("policy_oom")}
    if not ours:
        raise SystemExit(f"no test pair of {zeroshot} is in {search}'s {placer} rows")
    cells = sorted({(fam, cluster) for (_, cluster), (fam, _) in ours.items()}) + [("all", "")]
    table = []
    for fam, cluster in cells:
        keys = [k for k, (f, _) in ours.items() if fam == "all" or (f == fam and k[1] == cluster)]
        policy, searched = geomean([ours[k][1] for k in keys]), geomean([found[k] for k in keys])
        share = (1.0 - policy) / (1.0 - searched) if searched < 1.0 else float("nan")
        table.append({"family": fam, "cluster": cluster, "pairs": len(keys), "policy": policy,
                      "search": searched, "ratio": policy / searched, "share": share})
    return table


def _zeroshot_rows(path: Path, fields: set[str]) -> list[dict[str, Any]]:
    """The rows of a ``zeroshot.json`` of :func:`bench_zeroshot` (or of the folder holding one), each with ``fields``.

    Raises:
        SystemExit: the file is not a list of such rows.
        OSError: the file cannot be read (``bench.py`` prints it as one line).
    """
    if path.is_dir():  # the run's --out folder
        path = path / "zeroshot.json"
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, or not JSON, or "[[[..." thousands deep (a missing file is
        # the caller's one-line OSError)
        saved = None
    if not isinstance(saved, list) or not all(isinstance(r, dict) and fields <= r.keys() for r in saved):
        raise SystemExit(f"{path}: not a zeroshot.json of `bench.py zeroshot` (a list of rows with "
                         f"{', '.join(sorted(fields))})")
    return saved


def zeroshot_across_seeds(runs: list[Path]) -> list[dict[str, Any]]:
    """The same pairs placed under several seeds: the policy over each run's own ``auto``, and over the fastest.

    ``auto`` depends on the seed through ``metis``'s partition (nmt_011 on k80x2: 16.5 ms under seeds 0
    and 1, 23.0 ms under seed 2), so a ratio over a run's own ``auto`` moves with the seed even where the
    policy's step does not. Over the fastest ``auto`` that fits in any run, the reference of a pair is the
    same under every seed and at least as fast as each run's own.

    Args:
        runs (list of Path): two or more ``zeroshot.json`` files of :func:`bench_zeroshot` (or their folders),
            the same pairs placed under other seeds (or settings).

    Raises:
        SystemExit: fewer than two runs, a file that is not a ``zeroshot.json``, or no pair that every run
            placed with ``auto`` fitting in at least one and the policy fitting in all.

    Returns:
        list of dict: per (family, cluster) of the test pairs, then per (group, cluster) of the others, then
        ``all`` for the test pairs (where there are any): ``pairs``; ``seeds``, each run's seed; ``own`` and
        ``fastest``, one geometric mean per run of the policy's step time over that run's ``auto`` and over
        the fastest ``auto`` of all runs; ``spread``, the largest quotient over the pairs of the policy's
        slowest step across the runs by its fastest.
    """
    if len(runs) < 2:
        raise SystemExit(f"zeroshot-seeds compares two or more runs, got {len(runs)}")
    fields = {"group", "graph", "family", "cluster", "policy", "policy_oom", "auto_ms", "auto_oom"}
    loaded = [_zeroshot_rows(path, fields) for path in runs]
    seeds = [", ".join(sorted({str(r.get("seed", "?")) for r in rows})) for rows in loaded]  # one each, normally
    placed = [{(r["group"], r["graph"], r["cluster"]): r for r in rows} for rows in loaded]
    pairs = {}
    for key in sorted(set.intersection(*(set(run) for run in placed))):
        rows = [run[key] for run in placed]
        fitting = [r["auto_ms"] for r in rows if not r["auto_oom"]]
        if fitting and not any(r["policy_oom"] for r in rows):  # a placement out of memory has no step to compare
            pairs[key] = (rows, min(fitting))
    if not pairs:
        raise SystemExit("no pair is in every run with auto fitting in one and the policy in all")

    # a test pair's cell is its family's, another's its group's (real, unseen)
    cell_of = {k: ((rows[0]["family"] if k[0] == "test" else k[0]), k[2]) for k, (rows, _) in pairs.items()}
    tested = sorted({c for k, c in cell_of.items() if k[0] == "test"})
    cells = tested + sorted({c for k, c in cell_of.items() if k[0] != "test"}) + ([("all", "")] if tested else [])
    table = []
    for name, cluster in cells:
        keys = [k for k, c in cell_of.items() if (k[0] == "test" if name == "all" else c == (name, cluster))]
        steps = [[r["policy"] * r["auto_ms"] for r in pairs[k][0]] for k in keys]  # ms, one per run
        table.append({
            "family": name, "cluster": cluster, "pairs": len(keys), "seeds": seeds,
            "own": [geomean([pairs[k][0][i]["policy"] for k in keys]) for i in range(len(runs))],
            "fastest": [geomean([s[i] / pairs[k][1] for k, s in zip(keys, steps)]) for i in range(len(runs))],
            "spread": max(max(s) / min(s) for s in steps),
        })
    return table


#: ``latency --decoding``: the placer's options beyond ``samples`` and ``subsets``. ``greedy`` is the issue's
#: target, the policy's greedy decode alone (no constructor, no last rounds, no polish); ``policy`` is what
#: ``gnplace place -p policy`` runs, the placer's defaults (its constructors, last rounds and polish).
LATENCY_DECODINGS: dict[str, dict[str, Any]] = {"greedy": {"constructor": "none", "refine": 0, "polish": 0,
                                                           "module_chain": 0},
                                                "policy": {}}


def bench_latency(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Seconds of the policy's placement (coarsening and features included) of large graphs, one core.

    ``args.decoding`` picks what is timed (:data:`LATENCY_DECODINGS`): the greedy decode alone, or the placer's
    whole default pipeline; ``args.samples`` samples around ``auto`` join either.
    """
    import torch

    from gnplace.cluster import load_cluster
    from gnplace.rl.zeroshot import PolicyPlacer

    torch.set_num_threads(1)
    cluster = load_cluster(args.cluster)
    cache = check_output_folder(args.cache, "--cache")
    placer = PolicyPlacer(checkpoint=args.checkpoint, samples=args.samples, subsets=args.subsets, progress=False,
                          **LATENCY_DECODINGS[args.decoding])  # timed: no bar drawn meanwhile
    cache.mkdir(parents=True, exist_ok=True)  # once the placer's arguments are checked
    rows = []
    for ops in args.ops:
        graph = large_graph(ops, cache)
        placer.place(graph, cluster, seed=0)  # warm: compile the simulator, load the policy
        seconds = median_seconds(functools.partial(placer.place, graph, cluster, seed=0), args.repeat)
        row = dict(ops=graph.num_ops, cluster=cluster.name, decoding=args.decoding, samples=args.samples, seconds=seconds,
                   step_ms=placer.last_step * 1e3 if placer.last_step else None)
        rows.append(row)
        print(json_text(row), flush=True)
    return rows


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
    from gnplace.rl.policy_files import SHIPPED_CHECKPOINT, cached_policy, pretraining
    from gnplace.sim.simulator import Simulator

    check_clusters(args.clusters)  # refused before the first graph is placed, not after it
    check_families(args.families)
    torch.set_num_threads(1)
    policy, meta = cached_policy(args.checkpoint or SHIPPED_CHECKPOINT, mode="construct")  # decoded constructively
    modules = pretraining(meta)["modules"]  # the decision graph it was pretrained on
    sim = Simulator()
    rows = []
    for family in args.families:
        for path in test_graphs(family, args.per_family):
            graph = load_graph(path)
            for name in args.clusters:
                cluster = load_cluster(name)
                row: dict[str, Any] = {"graph": graph.name, "ops": graph.num_ops, "cluster": cluster.name}
                levels: list[tuple[str, Coarsening | None]] = [("coarse", None)]
                if args.op_level:
                    levels.append(("op", ops_alone(graph)))
                for label, coarsening in levels:
                    inp = build_policy_input(graph, cluster, coarsening=coarsening, modules=modules)
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
                print(json_text(row), flush=True)
    return rows


def run_zeroshot(args: argparse.Namespace) -> int:
    """``zeroshot``: the pretrained policy on every test graph of each family, the real models and unseen clusters.

    The test graphs are placed on the five presets, the real models on ``--real-clusters``, and a few
    test graphs on four clusters no pretraining saw (``configs/clusters/``). Reported per family and
    cluster: the geometric mean of step time over ``auto``'s of the policy's greedy placement on the
    whole cluster, of greedy plus K samples at temperature 1 on the whole cluster (the default
    before 2026-11-23), of what ``policy`` returns (greedy also on the fastest k devices alone, K
    tempered samples on the best of those device sets), and of the portfolio (the better of the
    policy's and auto's placement), each over the placements that fit, and the OOM counts of the policy,
    greedy + K and greedy where auto fits; rows in ``OUT/zeroshot.json``. ``--seed S`` places the policy and
    ``auto`` under seed S (default 0). Each row is saved to ``OUT/zeroshot_rows.jsonl`` as it is made:
    a run killed midway resumes, placing only the pairs not saved (rows of other arguments stay there).
    """
    print(zeroshot_tables(bench_zeroshot(args)))
    return 0


def run_vs_search(args: argparse.Namespace) -> int:
    """``vs-search``: a ``zeroshot`` run against a ``search`` run on the test pairs both placed.

    By default the search run holds the first two test graphs of each family on k80x4, v100x8 and
    tight4. Reported: the geometric means of step time over the search run's ``auto`` per family and
    cluster and for all pairs, their quotient (the "within 5% of a 20,000-evaluation search"
    target is a quotient of at most 1.05), and the share of the search's gain over ``auto`` the policy gets
    (``-`` where the search gains nothing). A search run holding several rows of the placer for one
    pair (several budgets or seeds) is refused unless ``--budget`` and ``--seed`` pick one.
    """
    lines = zeroshot_against_search(args.zeroshot, args.search, args.placer, args.budget, args.seed)
    print(f"| family | cluster | pairs | policy / auto | {args.placer} / auto | policy / {args.placer} "
          f"| policy's share of {args.placer}'s gain |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for line in lines:  # a search that gains nothing over auto has no gain to share: "-", not "nan%"
        share = "-" if math.isnan(line["share"]) else f"{line['share']:.0%}"
        print(f"| {line['family']} | {line['cluster']} | {line['pairs']} | {line['policy']:.3f} | "
              f"{line['search']:.3f} | {line['ratio']:.3f} | {share} |")
    return 0


def run_zeroshot_seeds(args: argparse.Namespace) -> int:
    """``zeroshot-seeds``: ``zeroshot`` runs of the same pairs under other seeds, over their own and the fastest auto.

    ``auto``, the reference of every zero-shot ratio, depends on the seed through ``metis``: this says how
    much of a cell's move between seeds is the reference's and how much the policy's. Reported per family
    and cluster: the geometric mean over each run's own ``auto``, over the fastest ``auto`` of all the runs
    (a reference that no seed moves), and the policy's largest spread of step time across the runs.
    """
    table = zeroshot_across_seeds(args.runs)
    seeds = " / ".join(table[0]["seeds"])
    print(f"| family | cluster | pairs | over its own auto (seeds {seeds}) | over the fastest auto of the runs "
          "| policy's largest spread |")
    print("| --- | --- | --- | --- | --- | --- |")
    for line in table:
        own = " / ".join(f"{v:.3f}" for v in line["own"])
        fastest = " / ".join(f"{v:.3f}" for v in line["fastest"])
        print(f"| {line['family']} | {line['cluster']} | {line['pairs']} | {own} | {fastest} | "
              f"{line['spread']:.3f} |")
    return 0


def run_latency(args: argparse.Namespace) -> int:
    """``latency``: seconds of the policy's greedy placement of ENAS cifar10 graphs of about 10k and 100k ops.

    Coarsening, features, encoding, decoding, expansion and scoring included, on one core; ``--decoding policy``
    times the placer's whole default pipeline instead.
    """
    bench_latency(args)
    return 0


def run_constructor(args: argparse.Namespace) -> int:
    """``constructor``: how well the placement MDP's list schedule predicts the simulator.

    The list schedule is the source of the policy's dynamic features (earliest start and finish per
    device). For the policy's greedy placement of test graphs: its finish time over the simulated
    step on the decision graph it plays and on the original graph; ``--op-level`` repeats it with no
    coarsening (every op a node).
    """
    rows = bench_constructor(args)
    for key in [k for k in rows[0] if k.endswith(("_mdp_over_decision_sim", "_mdp_over_sim"))] if rows else []:
        values = [r[key] for r in rows]
        print(f"{key}: {min(values):.3f} .. {max(values):.3f} (median {float(np.median(values)):.3f})")
    return 0


def add_parsers(sub: Any) -> None:
    """The ``zeroshot``, ``vs-search``, ``zeroshot-seeds``, ``latency`` and ``constructor`` subcommands."""
    from gnplace.rl.zeroshot_cli import add_decoding_arguments

    zs = add_command(sub, "zeroshot", run_zeroshot, "zero-shot placement by the pretrained policy against auto")
    zs.add_argument("--checkpoint", default=None, help="policy checkpoint (default: the shipped one)")
    zs.add_argument("--samples", type=int, default=16,
                    help="K: samples beside the greedy placement, the policy's and those of greedy + K at temperature 1 "
                         "(default: 16)")
    zs.add_argument("--constructor", nargs="+", default=None, metavar="PATH",
                    help="the policy's constructor checkpoints, or none (default: the shipped ones)")
    add_decoding_arguments(zs)
    zs.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt"],
                    help="shipped families whose graphs of --split are placed (default: cifar10 ptb nmt)")
    zs.add_argument("--split", choices=("test", "train"), default="test",
                    help="the split placed: train for tuning decoding settings on graphs other than the test "
                         "graphs (default: test)")
    zs.add_argument("--min-ops", type=int, default=0, metavar="OPS",
                    help="only graphs of more than OPS ops of --families (default: 0, every graph)")
    zs.add_argument("--clusters", nargs="+", default=["k80x2", "k80x4", "v100x8", "tight4", "cpu_gpu"],
                    help="cluster presets or YAML files the families' graphs are placed on (default: k80x2 k80x4 "
                         "v100x8 tight4 cpu_gpu)")
    zs.add_argument("--real-clusters", nargs="*", default=["k80x4", "v100x8"],
                    help="clusters the real models (datasets/real/) are placed on (default: k80x4 v100x8; none: no "
                         "real model)")
    zs.add_argument("--unseen-clusters", nargs="*", default=[str(DATASETS.parent / "configs" / "clusters" / f"{n}.yaml")
                                                             for n in ("mixed_generations", "hosts3x4", "p100x16",
                                                                       "newkind4")],
                    help="clusters no pretraining saw, a few test graphs placed on each (default: the YAML files "
                         "mixed_generations, hosts3x4, p100x16 and newkind4 of configs/clusters/; none: no unseen "
                         "cluster)")
    zs.add_argument("--unseen-per-family", type=int, default=3,
                    help="the first N test graphs of each family placed on the unseen clusters (default: 3)")
    zs.add_argument("--seed", type=whole_number, default=0,
                    help="seed of the policy's and auto's placements (default: 0)")
    zs.add_argument("--jobs", "-j", type=int, default=2,
                    help="worker processes (default: 2; 1: no worker, the pairs placed in this process)")
    zs.add_argument("--out", "-o", default="out/bench_zeroshot",
                    help="folder of zeroshot.json and of the rows saved as they are made, from which a rerun "
                         "resumes (default: out/bench_zeroshot)")
    zs.add_argument("--no-subsets", dest="subsets", action="store_false",
                    help="the policy decodes on the whole cluster only (ablation; default: also on the fastest k "
                         "devices alone)")
    zs.add_argument("--op-level", type=int, default=None, metavar="OPS",
                    help="policy's op_level: also decode graphs of at most OPS ops with no coarsening (default: 4000)")
    zs.add_argument("--around", action=argparse.BooleanOptionalAction, default=None,
                    help="draw the samples around auto's placement (default: as the checkpoint was pretrained; the "
                         "shipped one does); --no-around samples the policy itself, at --temperatures")
    zs.add_argument("--temperatures", type=float, nargs="+", default=None,
                    help="sampling temperatures of a policy that does not sample around auto (default: its own, "
                         "0.1 0.2 0.3 0.5; refused for one that does, as the shipped one)")
    zs.add_argument("--prior", type=float, default=None, metavar="KAPPA",
                    help="the logit bonus of the policy's samples on auto's devices (default: the checkpoint's "
                         "pretraining prior)")
    zs.add_argument("--rounds", type=int, default=1,
                    help="the policy's rounds: samples drawn around the best placement so far (default: 1)")
    vs = add_command(sub, "vs-search", run_vs_search, "a zeroshot run against a search run on the pairs both placed")
    vs.add_argument("zeroshot", type=Path, help="zeroshot.json of `bench.py zeroshot`")
    vs.add_argument("search", type=Path, help="results.csv of `bench.py search`")
    vs.add_argument("--placer", default="ppo", help="the search placer to compare with (default: ppo)")
    vs.add_argument("--budget", type=int, default=None, help="only the search rows of this budget (evaluations)")
    vs.add_argument("--seed", type=whole_number, default=None, help="only the search rows of this seed")
    seeds = add_command(sub, "zeroshot-seeds", run_zeroshot_seeds,
                        "zeroshot runs under other seeds, over their own auto and over the fastest auto of all")
    seeds.add_argument("runs", type=Path, nargs="+", metavar="ZEROSHOT.json",
                       help="zeroshot.json (or its folder) of two or more `bench.py zeroshot` runs of the same "
                            "pairs")
    lat = add_command(sub, "latency", run_latency, "seconds of the policy's greedy placement of 10k and 100k-op graphs")
    lat.add_argument("--ops", type=int, nargs="+", default=[10_000, 100_000],
                     help="approximate ops of each ENAS cifar10 graph (default: 10000 100000)")
    lat.add_argument("--cluster", default="k80x4", help="cluster preset or YAML file (default: k80x4)")
    lat.add_argument("--checkpoint", default=None, help="policy checkpoint (default: the shipped one)")
    lat.add_argument("--subsets", action="store_true",
                     help="also decode on the fastest k devices alone (default: one greedy placement on all)")
    lat.add_argument("--samples", type=int, default=0, help="samples beside the greedy placement (default: 0)")
    lat.add_argument("--decoding", choices=sorted(LATENCY_DECODINGS), default="greedy",
                     help="greedy: the greedy decode alone, the target's figure; policy: what `-p policy` runs, with "
                          "its constructors, last rounds and polish (default: greedy)")
    lat.add_argument("--repeat", type=int, default=3,
                     help="placements timed of each graph, after a warm-up one, the median reported (default: 3)")
    lat.add_argument("--cache", default="out/bench",
                     help="folder the large generated graphs are cached in, reused while their recipe holds "
                          "(default: out/bench)")
    con = add_command(sub, "constructor", run_constructor, "the placement MDP's finish time against the simulator")
    con.add_argument("--checkpoint", default=None, help="policy checkpoint (default: the shipped one)")
    con.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt"],
                     help="shipped families whose test graphs are placed (default: cifar10 ptb nmt)")
    add_per_family_argument(con, 2)
    con.add_argument("--clusters", nargs="+", default=["k80x4", "v100x8", "cpu_gpu"],
                     help="cluster presets or YAML files, each placed on (default: k80x4 v100x8 cpu_gpu)")
    con.add_argument("--op-level", action="store_true", help="also with every op its own decision node")
