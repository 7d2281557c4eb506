"""Fine-tuning from the shipped checkpoint against PPO from scratch, and where fine-tuning's screen starts."""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gnplace.cli.common import add_option_argument, parse_placer_options, whole_number
from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument
from gnplace.limits import json_text
from gnplace.sim import Simulator
from gnplace.sim.timer import StepTimer, geomean

from .common import (
    add_command,
    add_per_family_argument,
    best_at,
    check_distinct_names,
    check_families,
    check_output_folder,
    first_reaching,
    held_out_graphs,
    recorded_uses,
    revisions_used,
    test_graphs,
)

#: A fine-tuning row's fields that come from the search from scratch alone (reused by a run of another fine-tuning).
_SCRATCH_FIELDS = ("scratch_s", "scratch_final", "scratch_history", "scratch_revision", "scratch_uses")


def search_fields(name: str, placer: Any, graph: Any, cluster: Any, seed: int) -> dict[str, Any]:
    """Run a search placer once: ``name_s`` (wall seconds), ``name_final`` and ``name_history`` (over its reference)."""
    start = time.perf_counter()
    placer.place(graph, cluster, seed=seed)
    reference, last = placer.last_reference_step, placer.last_step
    assert reference is not None and last is not None  # set by place()
    return {f"{name}_s": time.perf_counter() - start, f"{name}_final": last / reference,
            f"{name}_history": [[e, t / reference] for e, t in placer.last_history]}


def rows_file(folder: str, name: str) -> tuple[Path, list[dict[str, Any]]]:
    """``folder/name`` (the folder made) and the rows an earlier run left there (a run resumes).

    Called once every other argument of the run has been checked: a refused run leaves no empty folder behind.

    Raises:
        InvalidArgument: if ``folder`` is a file, or ``folder/name`` is not such a file (another program's, or not
            JSON), rather than a traceback or a file replaced by this run's rows.
    """
    from gnplace.exceptions import InvalidArgument

    out = check_output_folder(folder)
    out.mkdir(parents=True, exist_ok=True)
    done_file = out / name
    if not done_file.exists():
        return done_file, []
    try:
        rows = json.loads(done_file.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as err:  # not UTF-8, or not JSON ("[[[..." thousands deep: RecursionError)
        rows = err
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"graph", "cluster"} <= r.keys() for r in rows):
        raise InvalidArgument(f"{done_file}: not the rows of an earlier run (a JSON list of rows); move it away or "
                              "pick another --out")
    return done_file, rows


def cluster_names(specs: list[str]) -> dict[str, str]:
    """The name of each cluster spec (a preset or a YAML file), as rows keep it; an unknown one is refused here."""
    from gnplace.cluster import load_cluster

    return {spec: load_cluster(spec).name for spec in specs}


def cluster_fingerprints(specs: list[str]) -> dict[str, str]:
    """Each cluster's :meth:`~gnplace.cluster.Cluster.fingerprint` by the name rows keep.

    A row records its cluster's, so that a cluster file edited under the same name runs its pairs again.

    Raises:
        InvalidArgument: two specs of one name (their rows would be one pair's).
    """
    from gnplace.cluster import load_cluster

    check_distinct_names(specs)
    return {cluster.name: cluster.fingerprint() for cluster in map(load_cluster, specs)}


def graph_identities(paths: list[str]) -> dict[str, str]:
    """The SHA-256 (hex) of each graph file, by the name rows keep (its stem, the shipped graphs' name).

    A row records its graph file's SHA-256, so that a regenerated dataset runs its pairs again.
    """
    return {Path(path).stem: graph_sha256(path) for path in paths}


def same_graph(row: dict[str, Any], identities: dict[str, str]) -> bool:
    """Whether ``row`` was made on the graph file of its name this run places (a graph not placed here: no).

    A row of before 2026-11-30 records no SHA-256 of its graph: it runs again. Nothing it recorded tells the
    content: its ops are the same for a dataset regenerated with other costs, and its steps are over ``auto``'s
    (1.0 at its first evaluation), no absolute step time to compute again from today's file.
    """
    identity = identities.get(row["graph"])
    return identity is not None and row.get("graph_sha256") == identity


def same_cluster(row: dict[str, Any], fingerprints: dict[str, str]) -> bool:
    """Whether ``row`` was made on the cluster of its name this run places on (a row of before 2026-11-30: yes)."""
    return row.get("cluster_fingerprint", fingerprints.get(row["cluster"])) == fingerprints.get(row["cluster"])


def add_rows(job: Callable[[Any], dict[str, Any]], tasks: list[Any], jobs: int, done_file: Path,
             rows: list[dict[str, Any]]) -> None:
    """Run ``job`` on every task in ``jobs`` processes; each row joins ``rows``, saved to ``done_file`` as it comes.

    One job runs in this process (:func:`~gnplace.workers.task_mapper`); the rows' wall times are timed
    inside ``job`` either way.
    """
    from gnplace.graph_io import write_atomically
    from gnplace.workers import task_mapper

    with task_mapper(jobs) as mapper:
        for row in mapper(job, tasks):
            rows.append(row)
            write_atomically(done_file, json.dumps(rows, indent=1).encode())  # a kill never truncates it
            print(json_text({k: v for k, v in row.items() if not k.endswith("history")}), flush=True)


def _finetune_files(tuning: dict[str, Any]) -> dict[str, Any]:
    """The content (SHA-256) of the files fine-tuning loads: those ``tuning`` names, and its shipped defaults.

    The defaults are those ``tuning`` names no others for (:func:`gnplace.evaluate.default_files_identity`).
    A row records them, so that a checkpoint retrained at the same path (or a new shipped one) runs again.
    """
    from gnplace.evaluate import default_files_identity, value_identity

    identities = {k: value_identity(tuple(v) if isinstance(v, list) else v) for k, v in tuning.items()}
    given = {k: identity for k, identity in identities.items() if identity != tuning[k]}  # the options naming files
    return {**given, **default_files_identity("finetune", tuning)}


def _uses_fields(**placers: str) -> dict[str, dict[str, str]]:
    """``{FIELD: revisions}`` of the placers each ``FIELD=NAME`` uses (``auto``'s candidates, ``policy``), where not empty.

    A row records them beside its placer's own revision: a new revision of a placer used (``m_etf``'s changes
    ``auto``, the reference and start of both searches) is another result, and rows without the field were made
    under :data:`~benchmarks.common.REVISIONS_USED_BEFORE`.
    """
    found = {field: revisions_used(name) for field, name in placers.items()}
    return {field: used for field, used in found.items() if used}


def graph_sha256(path: str) -> str:
    """SHA-256 (hex) of a graph file, as a row records it."""
    from gnplace.evaluate import file_digest

    return str(file_digest(path))


def _finetune_row(task: tuple[str, str, int, int, dict[str, Any], dict[str, Any], dict[str, Any] | None]
                  ) -> dict[str, Any]:
    import torch

    from gnplace import load_cluster, load_graph
    from gnplace.rl.search import FineTunePlacer, PPOSearchPlacer

    torch.set_num_threads(1)
    path, cluster_name, budget, seed, tuning, scratch, scratch_done = task
    graph, cluster = load_graph(path), load_cluster(cluster_name)
    row: dict[str, Any] = {"graph": graph.name, "family": str(graph.meta.get("family", "")), "ops": graph.num_ops,
                           "graph_sha256": graph_sha256(path), "cluster": cluster.name,
                           "cluster_fingerprint": cluster.fingerprint(), "budget": budget,
                           "seed": seed, "finetune_options": tuning,
                           "scratch_options": scratch, "finetune_revision": FineTunePlacer.revision,
                           **_uses_fields(finetune_uses="finetune"), "finetune_files": _finetune_files(tuning)}
    placers: list[tuple[str, PPOSearchPlacer]] = [("finetune", FineTunePlacer(budget=budget, **tuning))]
    if scratch_done is not None:  # the same search from scratch ran in this folder already: deterministic, reused
        row.update({k: scratch_done[k] for k in _SCRATCH_FIELDS if k in scratch_done})
    else:
        placers.insert(0, ("scratch", PPOSearchPlacer(budget=budget, **{"prelude": 0.0, **scratch})))  # PPO alone
        row.update({"scratch_revision": PPOSearchPlacer.revision, **_uses_fields(scratch_uses="ppo")})
    for name, placer in placers:
        row.update(search_fields(name, placer, graph, cluster, seed))
    target = row["scratch_final"]
    row["scratch_evals_to_final"] = first_reaching(row["scratch_history"], target)
    row["finetune_evals_to_scratch_final"] = first_reaching(row["finetune_history"], target)
    return row


def bench_finetune(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Fine-tuning from the shipped checkpoint against PPO from scratch, same budget (:func:`run_finetune` says more)."""
    from gnplace.placers import make_placer
    from gnplace.rl.search import FineTunePlacer, PPOSearchPlacer

    check_output_folder(args.out)
    check_families(args.families)
    check_positive(args.ft_lr, "--ft-lr")
    options = parse_placer_options(args.option, ["scratch", "finetune"])
    tuning = {"samples": args.ft_samples, "epochs": args.ft_epochs, "lr": args.ft_lr,
              "imitation_steps": args.ft_imitation, "zero_shot": args.ft_zero_shot, **options.get("finetune", {})}
    if args.checkpoint:  # another policy to fine-tune from (an untrained one: the control)
        tuning["checkpoint"] = args.checkpoint
    scratch = options.get("scratch", {})
    files = _finetune_files(tuning)
    for name, given in (("finetune", tuning), ("ppo", {"prelude": 0.0, **scratch})):  # as each row makes them
        make_placer(name, budget=args.budget, **given)  # a bad -O option: one error line here, not a traceback

    prints = cluster_fingerprints(args.clusters)
    pick = held_out_graphs if args.split == "val" else test_graphs
    paths = [path for family in args.families for path in pick(family, args.per_family)]
    graphs = graph_identities(paths)
    scratch_uses, finetune_uses = revisions_used("ppo"), revisions_used("finetune")
    done_file, rows = rows_file(args.out, "finetune.json")  # every argument checked: the folder is made

    def same_scratch(r: dict[str, Any]) -> bool:  # rows of before 2026-11-25 record no seed or revisions: seed 0, 7
        return (r.get("scratch_options", {}) == scratch and r.get("seed", 0) == args.seed
                and r.get("scratch_revision", "7") == PPOSearchPlacer.revision
                and recorded_uses(r, "scratch_uses", "ppo") == scratch_uses and same_cluster(r, prints)
                and same_graph(r, graphs))

    def this_run(r: dict[str, Any]) -> bool:  # a row of this very variant (other variants' rows stay in the file)
        return (same_scratch(r) and r.get("finetune_options") == tuning and r.get("budget") == args.budget
                and r.get("finetune_revision") == FineTunePlacer.revision
                and recorded_uses(r, "finetune_uses", "finetune") == finetune_uses and r.get("finetune_files") == files)

    done = {(r["graph"], r["cluster"], r["budget"]) for r in rows if this_run(r)}
    scratch_rows = {(r["graph"], r["cluster"], r["budget"]): r for r in rows if same_scratch(r)}
    names = cluster_names(args.clusters)
    tasks, wanted = [], set()
    for path in paths:
        for cluster in args.clusters:
            key = (Path(path).stem, names[cluster], args.budget)
            wanted.add(key)
            if key not in done:
                tasks.append((path, cluster, args.budget, args.seed, tuning, scratch, scratch_rows.get(key)))
    add_rows(_finetune_row, tasks, args.jobs, done_file, rows)
    return [r for r in rows if this_run(r) and (r["graph"], r["cluster"], r["budget"]) in wanted]


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
    form :func:`~benchmarks.common.first_reaching` reads.
    """
    histories = [r[f"{name}_history"] for r in rows]
    counts = sorted({int(e) for h in histories for e, _ in h})
    return [[e, geomean(min(1.0, best_at(h, e)) for h in histories)] for e in counts]


def finetune_summary(rows: list[dict[str, Any]], points: tuple[int, ...] = (100, 400, 1000)) -> str:
    """Markdown table of :func:`bench_finetune`'s rows by cluster, by family and over all of them.

    For each group: the geometric mean of the best step so far over ``auto``'s after each of ``points``
    evaluations and at the end, for PPO from scratch and for fine-tuning; then the evaluations after
    which each mean first reaches scratch's final mean, and their ratio (the issue's "10x fewer
    evaluations", read on the group's mean). A pair counts as ``auto``'s step (1.0) before its first
    evaluation. A point at or past the rows' budget is left out (its column would repeat the final).
    """
    budget = max((int(r.get("budget") or 0) for r in rows), default=0)
    points = tuple(p for p in points if p < budget) if budget else points
    head = " / ".join([*(f"{p:,}" for p in points), "final"])
    lines = [f"| group | pairs | scratch {head} | finetune {head} | scratch reaches its final mean after | "
             "finetune after | saving |", "| --- " * 7 + "|"]
    groups = [(f"{field} {value}", [r for r in rows if r[field] == value])
              for field in ("cluster", "family") for value in dict.fromkeys(r[field] for r in rows)]
    for title, part in [*groups, ("all", rows)]:
        if not part:
            continue
        cells, reach = [], []
        target = geomean(r["scratch_final"] for r in part)
        for name in ("scratch", "finetune"):
            curve = _mean_curve(part, name)  # non-increasing: its best up to p is its value at p
            at = [min(1.0, best_at(curve, p)) for p in points]
            cells.append(" / ".join(f"{v:.3f}" for v in [*at, geomean(r[f"{name}_final"] for r in part)]))
            reach.append(first_reaching(curve, target))
        saving = f"{reach[0] / reach[1]:.1f}x" if reach[0] and reach[1] else "-"
        lines.append(f"| {title} | {len(part)} | {cells[0]} | {cells[1]} | {reach[0] if reach[0] else '-'} | "
                     f"{reach[1] if reach[1] else 'never'} | {saving} |")
    return "\n".join(lines)


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

#: Largest ``--mismatch`` SIGMA: at four standard deviations ``exp(10 * z)`` scales an op's seconds by 1e-17 to
#: 1e17 already (the shipped runs use 0.5); larger, the noise is no stand-in for real steps, only overflow.
MAX_SIGMA = 10.0


def check_positive(value: float, flag: str) -> float:
    """``value`` if it is a finite number > 0, else an :class:`~gnplace.exceptions.InvalidArgument` naming ``flag``."""
    import math

    from gnplace.exceptions import InvalidArgument

    if not (math.isfinite(value) and value > 0):
        raise InvalidArgument(f"{flag} must be a finite number > 0, got {value}")
    return value


def check_mismatch(values: list[float], clusters: list[str]) -> list[float]:
    """``--mismatch SIGMA BANDWIDTH LATENCY`` checked by name, and every cluster it scales: the values as floats.

    SIGMA (the op seconds' log-normal noise) must be finite, 0 to :data:`MAX_SIGMA`; BANDWIDTH (a factor of every
    link's bandwidth, in bytes per second) finite and > 0; LATENCY (a factor of every link's latency, in seconds)
    finite and >= 0; and the links they scale within a cluster file's limits (at least
    :data:`~gnplace.limits.MIN_RATE` bytes per second, at most :data:`~gnplace.limits.MAX_SECONDS`). A bad value was
    blamed on the cluster (``cluster 'k80x4': every link needs a positive, finite bandwidth``), or, for a negative
    SIGMA, ran.

    Raises:
        InvalidArgument: naming ``--mismatch``, the value and its range.
    """
    import math

    from gnplace.cluster import load_cluster
    from gnplace.exceptions import InvalidArgument, InvalidCluster
    from gnplace.limits import MAX_SECONDS, MIN_RATE

    sigma, bandwidth, latency = (float(v) for v in values)
    given = f"--mismatch {sigma:g} {bandwidth:g} {latency:g}"
    ranges = (("SIGMA", sigma, f"0 to {MAX_SIGMA:g}", 0 <= sigma <= MAX_SIGMA),
              ("BANDWIDTH", bandwidth, "> 0", bandwidth > 0), ("LATENCY", latency, ">= 0", latency >= 0))
    for name, value, wanted, fits in ranges:
        if not (math.isfinite(value) and fits):
            raise InvalidArgument(f"{given}: {name} must be a finite number {wanted}, got {value:g}")
    for spec in dict.fromkeys(clusters):
        cluster = load_cluster(spec)  # an unknown cluster: the loader's own line
        slowest, longest = float((cluster.bandwidth * bandwidth).min()), float((cluster.latency * latency).max())
        if slowest < MIN_RATE:  # the limit of a cluster file: a worker crashed on a factor of 1e-320
            raise InvalidArgument(f"{given}: BANDWIDTH slows a link of cluster {spec!r} to {slowest:.3g} B/s, under "
                                  f"the limit of {MIN_RATE:g} B/s")
        if longest > MAX_SECONDS:
            raise InvalidArgument(f"{given}: LATENCY makes a link of cluster {spec!r} take {longest:.3g} s, over the "
                                  f"limit of {MAX_SECONDS:.3g} s")
        try:
            Cluster(list(cluster.devices), cluster.bandwidth * bandwidth, cluster.latency * latency, name=cluster.name)
        except InvalidCluster as err:
            raise InvalidArgument(f"{given}: scales cluster {spec!r} to no cluster ({err})") from None
    return [sigma, bandwidth, latency]


def _screen_model_row(task: tuple[str, str, int, int, tuple[float, float, float]]) -> dict[str, Any]:
    import torch

    from gnplace import load_cluster, load_graph
    from gnplace.rl.search import FineTunePlacer

    torch.set_num_threads(1)
    path, cluster_name, budget, seed, mismatch = task
    graph, cluster = load_graph(path), load_cluster(cluster_name)
    row: dict[str, Any] = {"graph": graph.name, "family": str(graph.meta.get("family", "")), "ops": graph.num_ops,
                           "graph_sha256": graph_sha256(path), "cluster": cluster.name,
                           "cluster_fingerprint": cluster.fingerprint(), "budget": budget, "seed": seed,
                           "mismatch": list(mismatch),
                           "finetune_revision": FineTunePlacer.revision, **_uses_fields(finetune_uses="finetune"),
                           "finetune_files": _finetune_files({})}
    for model in SCREEN_MODELS:
        placer = FineTunePlacer(budget=budget, timer=MismatchedSteps(graph, cluster, *mismatch), screen_model=model,
                                progress=False)
        row.update(search_fields(model, placer, graph, cluster, seed))
    return row


def bench_screen_model(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Fine-tuning with its screen learned alone and started from the simulator, on mismatched steps (:func:`run_screen_model`)."""
    from gnplace.placers import make_placer
    from gnplace.rl.search import FineTunePlacer

    check_output_folder(args.out)
    check_families(args.families)
    mismatch = check_mismatch(args.mismatch, args.clusters)
    make_placer("finetune", budget=args.budget)  # a bad --budget: one error line here, not from the first pair
    files = _finetune_files({})
    prints = cluster_fingerprints(args.clusters)
    paths = [path for family in args.families for path in test_graphs(family, args.per_family)]
    graphs = graph_identities(paths)
    uses = revisions_used("finetune")
    done_file, rows = rows_file(args.out, "screen_model.json")  # every argument checked: the folder is made

    def this_run(r: dict[str, Any]) -> bool:
        return (r["budget"] == args.budget and r["seed"] == args.seed and r["mismatch"] == mismatch
                and r["finetune_revision"] == FineTunePlacer.revision and r.get("finetune_files") == files
                and recorded_uses(r, "finetune_uses", "finetune") == uses and same_cluster(r, prints)
                and same_graph(r, graphs))

    done = {(r["graph"], r["cluster"]) for r in rows if this_run(r)}
    names = cluster_names(args.clusters)
    tasks, wanted = [], set()
    for path in paths:
        for cluster in args.clusters:
            wanted.add((Path(path).stem, names[cluster]))
            if (Path(path).stem, names[cluster]) not in done:
                tasks.append((path, cluster, args.budget, args.seed, tuple(mismatch)))
    add_rows(_screen_model_row, tasks, args.jobs, done_file, rows)
    return [r for r in rows if this_run(r) and (r["graph"], r["cluster"]) in wanted]


def screen_model_summary(rows: list[dict[str, Any]], points: tuple[int, ...] = (100, 200, 400)) -> str:
    """Markdown table of :func:`bench_screen_model`'s rows: each screen's geometric mean curve, by family and in all.

    A point at or past the rows' budget is left out, as :func:`finetune_summary` leaves it out: ``--budget 60`` printed
    "learned 100 / 200 / 400 / final" columns, each the final, after evaluations no run made.
    """
    budget = max((int(r.get("budget") or 0) for r in rows), default=0)
    points = tuple(p for p in points if p < budget) if budget else points
    head = " / ".join([*(f"{p:,}" for p in points), "final"])
    lines = [f"| group | pairs | learned {head} | simulator {head} | simulator reaches learned's final mean after |"
             f" better / worse |", "| --- " * 6 + "|"]
    groups = [(f"family {f}", [r for r in rows if r["family"] == f]) for f in dict.fromkeys(r["family"] for r in rows)]
    for title, part in [*groups, ("all", rows)]:
        if not part:
            continue
        cells = []
        for model in SCREEN_MODELS:
            curve = _mean_curve(part, model)
            at = [min(1.0, best_at(curve, p)) for p in points]
            cells.append(" / ".join(f"{v:.3f}" for v in [*at, geomean(r[f"{model}_final"] for r in part)]))
        reach = first_reaching(_mean_curve(part, "simulator"), geomean(r["learned_final"] for r in part))
        better = sum(r["simulator_final"] < r["learned_final"] for r in part)
        worse = sum(r["simulator_final"] > r["learned_final"] for r in part)
        lines.append(f"| {title} | {len(part)} | {cells[0]} | {cells[1]} | {reach if reach else 'never'} | "
                     f"{better} / {worse} |")
    return "\n".join(lines)


@functools.cache
def _noisy_steps_class() -> type[Any]:
    """:class:`NoisySteps`, made on first use: it subclasses the real-device timer, whose package imports torch.

    Defined at the module's top, it had every ``bench.py`` run import torch (3.4 s of ``-X importtime`` on the 2-core
    VM), ``bench.py sim`` and ``bench.py --help`` included; only ``noisy-steps`` uses it.
    """
    from gnplace.execute.base import RealStepTimer

    class NoisySteps(RealStepTimer):
        """A stand-in for a real timer: :class:`MismatchedSteps`' step, each measurement times ``exp(sigma * N(0, 1))``.

        A real timer's cache and ``confirm`` (:class:`~gnplace.execute.base.RealStepTimer`) over a known true step, so
        that what the noise makes a search keep can be told apart from what it found. No recorded step is run.
        """

        def __init__(self, truth: MismatchedSteps, sigma: float, seed: int) -> None:  # (no step: RealStepTimer's state)
            self.truth, self.sigma, self.rng = truth, sigma, np.random.default_rng(seed)
            self.warmup, self.repeats, self.lr = 0, 1, 0.0
            self.cache, self.measured, self.journal, self.confirm = {}, 0, None, 0

        def settings(self) -> dict[str, Any]:
            """How this stand-in measures: its noise and ``confirm``."""
            return {"sigma": self.sigma, "confirm": self.confirm}

        def _placed(self, graph: Any, cluster: Cluster, placement: Any) -> Any:
            from gnplace.placement import as_placement

            return as_placement(graph, cluster, placement)

        def _measure(self, graph: Any, cluster: Cluster, placement: Any) -> Any:
            from dataclasses import replace

            true = self.truth.time(graph, cluster, placement)
            return replace(true, step_time=true.step_time * float(np.exp(self.sigma * self.rng.standard_normal())))

    return NoisySteps


def __getattr__(name: str) -> Any:
    """``NoisySteps``, made on first use (:func:`_noisy_steps_class`)."""
    if name == "NoisySteps":
        return _noisy_steps_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _noisy_steps_row(task: tuple[str, str, int, int, float, float, int]) -> dict[str, Any]:
    import torch

    from gnplace import load_cluster, load_graph
    from gnplace.placers import get_placer
    from gnplace.rl.search import FineTunePlacer

    torch.set_num_threads(1)
    path, cluster_name, budget, seed, sigma, mismatch, confirm = task
    graph, cluster = load_graph(path), load_cluster(cluster_name)
    truth = MismatchedSteps(graph, cluster, mismatch, 1.0, 1.0)
    timer = _noisy_steps_class()(truth, sigma, 1000 + seed)
    timer.confirm = confirm
    best = FineTunePlacer(budget=budget, timer=timer, progress=False).place(graph, cluster, seed=seed)
    auto = get_placer("auto", timer=truth).place(graph, cluster, seed=seed)
    return {"graph": graph.name, "family": str(graph.meta.get("family", "")), "graph_sha256": graph_sha256(path),
            "cluster": cluster.name, "cluster_fingerprint": cluster.fingerprint(), "budget": budget, "seed": seed,
            "sigma": sigma, "mismatch": mismatch, "confirm": confirm, "finetune_revision": FineTunePlacer.revision,
            "finetune_files": _finetune_files({}), "measured": timer.measured,
            "search_true": truth.time(graph, cluster, best).step_time / truth.time(graph, cluster, auto).step_time}


def bench_noisy_steps(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Fine-tuning's search on noisy steps with and without ``confirm`` (:func:`run_noisy_steps`)."""
    from gnplace.placers import make_placer
    from gnplace.rl.search import FineTunePlacer

    check_output_folder(args.out)
    check_families(args.families)
    check_mismatch([args.mismatch, 1.0, 1.0], args.clusters)
    if not 0 <= args.sigma <= MAX_SIGMA:  # (NaN fails too)
        raise InvalidArgument(f"--sigma must be a finite number from 0 to {MAX_SIGMA:g}, got {args.sigma:g}")
    if any(c < 0 for c in args.confirm):
        raise InvalidArgument(f"--confirm takes whole numbers >= 0, got {args.confirm}")
    make_placer("finetune", budget=args.budget)  # a bad --budget: one error line here, not from the first pair
    files, prints = _finetune_files({}), cluster_fingerprints(args.clusters)
    paths = [path for family in args.families for path in test_graphs(family, args.per_family)]
    graphs = graph_identities(paths)
    done_file, rows = rows_file(args.out, "noisy_steps.json")  # every argument checked: the folder is made
    names = cluster_names(args.clusters)
    wanted = {(Path(p).stem, names[c], s, k) for p in paths for c in args.clusters for s in args.seeds
              for k in args.confirm}

    def this_run(r: dict[str, Any]) -> bool:
        return (r["budget"] == args.budget and r["sigma"] == args.sigma and r["mismatch"] == args.mismatch
                and r["finetune_revision"] == FineTunePlacer.revision and r.get("finetune_files") == files
                and same_cluster(r, prints) and same_graph(r, graphs)
                and (r["graph"], r["cluster"], r["seed"], r["confirm"]) in wanted)

    done = {(r["graph"], r["cluster"], r["seed"], r["confirm"]) for r in rows if this_run(r)}
    tasks = [(p, c, args.budget, s, args.sigma, args.mismatch, k) for p in paths for c in args.clusters
             for s in args.seeds for k in args.confirm if (Path(p).stem, names[c], s, k) not in done]
    add_rows(_noisy_steps_row, tasks, args.jobs, done_file, rows)
    return [r for r in rows if this_run(r)]


def noisy_steps_summary(rows: list[dict[str, Any]]) -> str:
    """Markdown table of :func:`bench_noisy_steps`' rows: by ``confirm``, the search's best over ``auto``'s, true steps."""
    lines = ["| budget | confirm | runs | search's best / auto (true steps, geometric mean) | measurements a run |",
             "| --- " * 5 + "|"]
    for budget, confirm in sorted({(r["budget"], r["confirm"]) for r in rows}):
        part = [r for r in rows if (r["budget"], r["confirm"]) == (budget, confirm)]
        lines.append(f"| {budget} | {confirm} | {len(part)} | {geomean(r['search_true'] for r in part):.4f} | "
                     f"{statistics.mean(r['measured'] for r in part):.1f} |")
    return "\n".join(lines)


def run_noisy_steps(args: argparse.Namespace) -> int:
    """``noisy-steps``: what re-measuring a new fastest placement (``finetune --confirm``) does to a noisy search.

    The stand-in for real steps (:class:`NoisySteps`): :class:`MismatchedSteps` with op seconds off by
    ``exp(--mismatch * N(0, 1))`` (the simulator screen's error) as the true step, and each measurement of it
    off by ``exp(--sigma * N(0, 1))`` (one measurement on this project's VM varied by 9-16%). Fine-tuning's search
    runs on it with each ``--confirm`` and reports its best placement's true step over ``auto``'s (``auto`` picked
    on true steps). Rows go to ``OUT/noisy_steps.json`` (an interrupted run resumes).
    """
    print(noisy_steps_summary(bench_noisy_steps(args)))
    return 0


def run_finetune(args: argparse.Namespace) -> int:
    """``finetune``: sample efficiency of fine-tuning, against PPO from scratch with the same budget.

    On the first test graphs of each family (``--split val``: the training graphs no shipped checkpoint
    trained on, for choosing fine-tuning's options), PPO from a fresh policy (``ppo`` with no annealing
    prelude; ``-O scratch.NAME=VALUE`` changes it) and PPO from the shipped checkpoint (``finetune``;
    its zero-shot placement a candidate unless ``--no-ft-zero-shot``; ``-O finetune.NAME=VALUE`` sets
    any other option) each spend ``--budget`` simulator evaluations. Reported per graph: both final
    step times over ``auto``'s, and the evaluations each needed to first reach PPO-from-scratch's
    final quality (their quotient is the saving); then, by cluster, by family and over all pairs, the
    geometric means after 100, 400 and 1,000 evaluations and at the end, and the same saving read on
    each group's mean. Rows in ``OUT/finetune.json`` (an interrupted run resumes); a run with other
    fine-tuning options, revision or checkpoint content in the same ``OUT`` reuses the searches from
    scratch of the same pair, budget, seed, options and revision (deterministic on one machine) and
    adds its rows; a cluster file edited under the same name runs its pairs again, and so do a regenerated graph
    file (a row records its SHA-256; one of before 2026-11-30, none, runs again) and a new revision of a placer
    either search uses (``auto`` or one of its candidates, ``policy``).
    """
    rows = bench_finetune(args)
    print(finetune_table(rows))
    print("\ngeometric means of the best step so far over auto's:\n")
    print(finetune_summary(rows))
    return 0


def run_screen_model(args: argparse.Namespace) -> int:
    """``screen-model``: what fine-tuning's screen should start from when the timer is not the simulator.

    Measured against a stand-in for real steps (:class:`MismatchedSteps`): the simulator on the same
    graph and cluster with every op's seconds on each device kind scaled by ``exp(sigma * N(0, 1))``
    and link bandwidth and latency scaled, none of which the placer knows (``--mismatch SIGMA
    BANDWIDTH LATENCY``). Each pair is fine-tuned twice with the same budget and seed, its screen
    starting from nothing (``learned``) and from the simulator of the placer's own view
    (``simulator``). Reported: the geometric means of the best step so far over ``auto``'s (``auto``
    timed by the stand-in) after 100, 200 and 400 evaluations (those under ``--budget``) and at the end, and the
    evaluations after which the simulator screen's mean first reaches the learned screen's final mean. Rows in
    ``OUT/screen_model.json`` (an interrupted run resumes; a row stands on the SHA-256 of its graph file).
    """
    print(screen_model_summary(bench_screen_model(args)))
    return 0


def add_parsers(sub: Any) -> None:
    """The ``finetune``, ``screen-model`` and ``noisy-steps`` subcommands."""
    ft = add_command(sub, "finetune", run_finetune, "fine-tuning from the checkpoint against PPO from scratch")
    ft.add_argument("--budget", type=int, default=4000,
                    help="simulator evaluations of each search, from scratch and fine-tuned (default: 4000)")
    ft.add_argument("--clusters", nargs="+", default=["k80x4"],
                    help="cluster presets or YAML files, each searched on (default: k80x4)")
    ft.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt"],
                    help="shipped families whose graphs are searched (default: cifar10 ptb nmt)")
    add_per_family_argument(ft, 2, "graphs of --split")
    ft.add_argument("--split", choices=("test", "val"), default="test",
                    help="the graphs searched: test, or val for tuning fine-tuning's options: the training graphs "
                         "every shipped checkpoint held out (default: test)")
    ft.add_argument("--seed", type=whole_number, default=0, help="seed of both searches (default: 0)")
    ft.add_argument("--jobs", "-j", type=int, default=2,
                    help="worker processes (default: 2; 1: no worker, the pairs run in this process)")
    ft.add_argument("--out", "-o", default="out/bench_finetune",
                    help="folder of finetune.json, from which a rerun resumes (default: out/bench_finetune)")
    ft.add_argument("--checkpoint", default=None, help="fine-tune from this policy (default: the shipped one)")
    ft.add_argument("--ft-samples", type=int, default=16,
                    help="fine-tuning: placements per PPO iteration (default: 16)")
    ft.add_argument("--ft-epochs", type=int, default=4, help="fine-tuning: PPO epochs per batch (default: 4)")
    ft.add_argument("--ft-lr", type=float, default=1e-3, help="fine-tuning: learning rate (default: 1e-3)")
    ft.add_argument("--ft-imitation", type=int, default=0,
                    help="fine-tuning: imitation steps on auto's placement first (default: 0, none)")
    ft.add_argument("--no-ft-zero-shot", dest="ft_zero_shot", action="store_false",
                    help="fine-tuning skips the checkpoint's zero-shot placement (auto's and the search's alone; "
                         "default: the zero-shot placement is a candidate)")
    add_option_argument(ft)  # -O finetune.prior=6, -O scratch.modules=false
    sm = add_command(sub, "screen-model", run_screen_model,
                     "fine-tuning's screen from nothing or from the simulator, mismatched steps")
    sm.add_argument("--mismatch", nargs=3, type=float, default=[0.5, 0.5, 2.0], metavar=("SIGMA", "BANDWIDTH", "LATENCY"),
                    help="the stand-in for real steps: op seconds' lognormal noise, and factors of every link's "
                         "bandwidth and latency (default: 0.5 0.5 2)")
    sm.add_argument("--budget", type=int, default=400,
                    help="timer evaluations (stand-in steps) of each fine-tuning (default: 400)")
    sm.add_argument("--clusters", nargs="+", default=["k80x4", "v100x8", "tight4"],
                    help="cluster presets or YAML files, each fine-tuned on (default: k80x4 v100x8 tight4)")
    sm.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt"],
                    help="shipped families whose test graphs are fine-tuned on (default: cifar10 ptb nmt)")
    add_per_family_argument(sm, 1)
    sm.add_argument("--seed", type=whole_number, default=0, help="seed of both fine-tunings of a pair (default: 0)")
    sm.add_argument("--jobs", "-j", type=int, default=2,
                    help="worker processes (default: 2; 1: no worker, the pairs run in this process)")
    sm.add_argument("--out", "-o", default="out/bench_screen_model",
                    help="folder of screen_model.json, from which a rerun resumes (default: out/bench_screen_model)")
    ns = add_command(sub, "noisy-steps", run_noisy_steps,
                     "fine-tuning's search on noisy steps, a new fastest placement measured again or not")
    ns.add_argument("--budget", type=int, default=120,
                    help="timer evaluations (noisy steps) of each fine-tuning search (default: 120)")
    ns.add_argument("--sigma", type=float, default=0.12, help="noise of one measurement, lognormal (default: 0.12)")
    ns.add_argument("--mismatch", type=float, default=0.3,
                    help="op-seconds error of the simulator against the true step, lognormal (default: 0.3)")
    ns.add_argument("--confirm", type=int, nargs="+", default=[0, 2],
                    help="values of finetune --confirm compared: the extra measurements of a new fastest placement, "
                         "a search each (default: 0 2)")
    ns.add_argument("--clusters", nargs="+", default=["k80x4", "v100x8", "tight4"],
                    help="cluster presets or YAML files, each searched on (default: k80x4 v100x8 tight4)")
    ns.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt"],
                    help="shipped families whose test graphs are searched (default: cifar10 ptb nmt)")
    add_per_family_argument(ns, 1)
    ns.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                    help="seeds of the searches and of their noise, a search each (default: 0 1 2)")
    ns.add_argument("--jobs", "-j", type=int, default=2,
                    help="worker processes (default: 2; 1: no worker, the pairs run in this process)")
    ns.add_argument("--out", "-o", default="out/bench_noisy_steps",
                    help="folder of noisy_steps.json, from which a rerun resumes (default: out/bench_noisy_steps)")
