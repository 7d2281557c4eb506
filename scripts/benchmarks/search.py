"""The search placers (``ppo``, ``reinforce``, ``annealing``) against ``auto``, their learning curves, PPO's speed."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from gnplace.cli.common import add_option_argument, file_path, parse_placer_options, printable_name, whole_number
from gnplace.limits import json_text
from gnplace.sim import Simulator
from gnplace.sim.timer import geomean
from gnplace.toy import layered_graph

from .common import (
    DATASETS,
    FIGURE_DPI,
    add_command,
    add_per_family_argument,
    check_families,
    check_output_folder,
    hidden_curves,
    median_seconds,
    save_figure,
)


def bench_search(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Search placers against ``auto`` on the test split, through the evaluation harness."""
    from gnplace.evaluate import Task, cluster_slot, evaluate, rows_made_by, stale_note, task_key
    from gnplace.evaluate_summary import spent_budget, summary_budget
    from gnplace.graph_files import collect_graphs
    from gnplace.placers import make_placer

    check_output_folder(args.out)
    check_families(args.families)
    graphs = []
    for family in args.families:
        found = collect_graphs([str(DATASETS / family)], split=args.split)
        graphs += found[: args.per_family] if args.per_family else found
    tasks = [Task(str(g), c, "auto", seed=args.seed) for g in graphs for c in args.clusters]
    options = parse_placer_options(args.option, args.placers)
    for placer in dict.fromkeys(args.placers):  # a bad -O option, budget or checkpoint: refused before OUT is made
        make_placer(placer, budget=args.budget, **options.get(placer, {}))
    tasks += [Task.with_options(str(g), c, p, options.get(p), budget=args.budget, seed=args.seed)
              for g in graphs for c in args.clusters for p in args.placers]
    total = len({task_key(t) for t in tasks})  # a task asked twice (--placers auto) runs once
    done = [0]

    def reused(count: int) -> None:  # rows saved by an earlier run count as done: the count ends at the total
        done[0] = count
        print(f"{count} of {total} placements saved in {args.out}, {total - count} to run", flush=True)

    def progress(row: Any) -> None:
        done[0] += 1
        print(f"[{done[0]}/{total}] {printable_name(row.graph)} {printable_name(row.cluster)} {row.placer}: "
              f"{row.step_time_s * 1e3:.3f} ms "
              f"in {row.place_seconds:.0f} s{' ERROR ' + row.error if row.error else ''}", flush=True)

    def stale(count: int) -> None:  # rows of a cluster file since changed went without a word
        print(stale_note(count, Path(args.out) / "results.csv"), flush=True)

    # the rows these tasks made: the folder keeps rows of other simulator modes beside them (gnplace evaluate
    # --mode placeto into it), which were summarised with these, against the placeto auto where it came last
    rows = rows_made_by(tasks, evaluate(tasks, args.out, jobs=args.jobs, progress=progress, reused=reused,
                                        stale=stale))

    def slot(row: Any) -> str:
        return str(row.cluster_spec or cluster_slot(row.cluster))

    # each placer's options as rows keep them (files by their real paths: -O ppo.checkpoint=my.ckpt)
    asked = {p: Task.with_options("", "", p, options.get(p)).options_dict for p in args.placers}
    # the budget each placer's rows record: none for one that spends none (auto, heft), whatever --budget was
    given = {p: spent_budget(p, args.budget) for p in args.placers}

    wanted = {(os.path.realpath(g), c) for g in graphs for c in args.clusters}  # rows keep graph files by real path
    # rows of other seeds stay in the folder (a run per seed): this run's seed alone, its auto the reference
    # clusters by slot (a file's real path, a preset's name), not by name: two files may share one (README)
    # a pair whose auto overflows memory or failed has no reference step: left out of every mean, counted per line
    # the reference is auto as the tasks run it, with no options: -O auto.candidates=... in --placers auto was a row of
    # auto too, and the reference whichever of the two came last (that auto over itself, 1.000)
    auto_rows = [r for r in rows if r.placer == "auto" and r.seed == args.seed and json.loads(r.options) == {}]
    auto = {(r.graph_path, slot(r)): r.step_time_s for r in auto_rows if not r.error and not r.oom}
    summary = []
    families = {r.graph_path: r.family for r in rows}
    for family in args.families:
        for cluster in args.clusters:
            line: dict[str, Any] = {"family": family, "cluster": cluster}
            line["no_auto"] = sum(1 for r in auto_rows if (r.error or r.oom) and families[r.graph_path] == family
                                  and slot(r) == cluster_slot(cluster) and (r.graph_path, cluster) in wanted)
            for placer in args.placers:
                mine = [r for r in rows
                        if r.placer == placer and summary_budget(r) == given[placer] and r.seed == args.seed
                        and families[r.graph_path] == family
                        and json.loads(r.options) == asked[placer]
                        and slot(r) == cluster_slot(cluster) and (r.graph_path, cluster) in wanted
                        and (r.graph_path, slot(r)) in auto]
                # a placement out of memory has no step to compare, a failed run none at all (as gnplace evaluate)
                ratios = [r.step_time_s / auto[(r.graph_path, slot(r))] for r in mine if not r.error and not r.oom]
                line[placer] = geomean(ratios)
                line[f"{placer}_n"] = len(ratios)
                line[f"{placer}_oom"] = sum(r.oom is True for r in mine)
                line[f"{placer}_failed"] = sum(bool(r.error) for r in mine)
            summary.append(line)
    return summary


def bench_curves(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Learning curves (best step over auto's against evaluations) of the search placers; PNGs in ``--out``."""
    from gnplace.cluster import load_cluster
    from gnplace.exceptions import InvalidArgument
    from gnplace.graph_io import load_graph
    from gnplace.placers import make_placer
    from gnplace.placers.registry import PLACERS

    for name in args.placers:  # refused before any placement: a placer with no budget draws no curve
        if "budget" not in PLACERS.info(name).accepts:
            searches = ", ".join(n for n in PLACERS.names() if "budget" in PLACERS.info(n).accepts)
            raise InvalidArgument(f"--placers {name}: takes no budget and has no learning curve; curves draws "
                                  f"the search placers' ({searches})")
    from gnplace.graph import require_ops

    # a missing graph refused before the first search; one of no ops too (auto's 0 s step: an empty trace, a
    # ValueError traceback after the graphs before it were searched)
    graphs = [require_ops(load_graph(path), path) for path in args.graphs]
    cluster = load_cluster(args.cluster)
    if cluster.num_devices < 2:  # nothing to search: the placers return at once, with no curve to draw
        raise InvalidArgument(f"--cluster {args.cluster}: one device, so no search and no learning curve; give a "
                              "cluster of two or more devices")
    stems: dict[str, str] = {}
    for path, graph in zip(args.graphs, graphs):  # two files of one graph name: the second's figure replaced the first's
        stem = curve_stem(graph.name, cluster.name)
        if stem in stems:
            raise InvalidArgument(f"--graphs {stems[stem]} {path}: both are graphs named {graph.name!r}, whose curves "
                                  f"go to {stem}.png: run the second with another --out")
        stems[stem] = path
    out = check_output_folder(args.out)  # a file there: said so, not "File exists" from mkdir
    for name in args.placers:  # a bad --budget: refused before the folder is made and the first search
        make_placer(name, budget=args.budget)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for graph in graphs:
        auto = auto_step(graph, cluster, args.seed)
        curves: dict[str, tuple[list[int], list[float]]] = {}
        for name in args.placers:
            run = search_curve(graph, cluster, name, args.budget, args.seed, auto)
            evals, ratio = run.pop("evaluations"), run.pop("best_over_auto")
            curves[name] = (evals, ratio)
            rows.append({"graph": graph.name, "cluster": cluster.name, "placer": name, "final": ratio[-1], **run})
            print(f"{printable_name(graph.name)} {printable_name(cluster.name)} {name}: {ratio[-1]:.4f} of auto "
                  f"in {run['seconds']:.0f} s", flush=True)  # names as written: a newline or an escape in one is shown
        reach = evaluations_to_reach(curves)
        for row in rows[-len(args.placers):]:
            row["evaluations_to_reach"] = reach[row["placer"]]
        write_curves(curves, graph.name, cluster.name, auto, args.budget, out)
    return rows


#: The options ``curves`` runs a search placer with: ``ppo`` and ``reinforce`` with no annealing prelude, the
#: learning algorithms alone, so that PPO, REINFORCE and annealing stay three separate searches.
CURVE_OPTIONS: dict[str, dict[str, Any]] = {"ppo": {"prelude": 0.0}, "reinforce": {"prelude": 0.0}}


def auto_step(graph: Any, cluster: Any, seed: int) -> float:
    """``auto``'s simulated step (seconds) on ``graph`` and ``cluster``: the reference of every learning curve."""
    from gnplace.placers import make_placer

    return float(Simulator().time(graph, cluster, make_placer("auto").place(graph, cluster, seed=seed)).step_time)


def search_curve(graph: Any, cluster: Any, name: str, budget: int, seed: int, auto: float) -> dict[str, Any]:
    """One search placer's learning curve on ``graph`` and ``cluster`` (:data:`CURVE_OPTIONS`, ``budget`` evaluations).

    Args:
        graph (OpGraph): the graph placed.
        cluster (Cluster): the cluster it is placed on.
        name (str): the search placer (one that takes a budget).
        budget (int): its budget of timer evaluations.
        seed (int): its seed.
        auto (float): ``auto``'s step (seconds, :func:`auto_step`), which the curve is over.

    Returns:
        dict: ``evaluations`` (timer evaluations so far, one entry a point of the curve), ``best_over_auto`` (the
        best step so far over ``auto``'s at each), ``seconds`` (wall seconds of the search), and the greedy policy's
        step over ``auto``'s after imitation and after the search where the placer records them
        (``greedy_after_imitation``, ``greedy_after_search``).
    """
    from gnplace.placers import make_placer

    placer: Any = make_placer(name, budget=budget, **CURVE_OPTIONS.get(name, {}))  # last_history or last_trace
    start = time.perf_counter()
    placer.place(graph, cluster, seed=seed)
    seconds = time.perf_counter() - start
    if hasattr(placer, "last_history"):
        evals, best = map(list, zip(*placer.last_history))
    else:
        evals, _, best = map(list, zip(*placer.last_trace))
    run: dict[str, Any] = {"evaluations": [int(e) for e in evals], "best_over_auto": [b / auto for b in best],
                           "seconds": seconds}
    for attr in ("last_greedy_after_imitation", "last_greedy_after_search"):
        if getattr(placer, attr, None) is not None:  # greedy policy's step over auto's (learned placers)
            run[attr.removeprefix("last_")] = getattr(placer, attr)
    return run


def curve_corners(evals: list[int], ratio: list[float]) -> list[list[float]]:
    """The corners of a best-so-far curve: its first point and each point where it improves ([evaluations, ratio]).

    Examples:
        >>> curve_corners([1, 2, 3, 4], [1.0, 0.9, 0.9, 0.8])
        [[1, 1.0], [2, 0.9], [4, 0.8]]
    """
    return [[e, q] for i, (e, q) in enumerate(zip(evals, ratio)) if i == 0 or q < ratio[i - 1]]


def evaluations_to_reach(curves: dict[str, tuple[list[int], list[float]]]) -> dict[str, dict[str, int | None]]:
    """Per placer, the evaluations it needed to first reach each placer's final quality (None: never).

    Examples:
        >>> evaluations_to_reach({"a": ([1, 10], [1.0, 0.8]), "b": ([1, 5], [1.0, 0.9])})
        {'a': {'a': 10, 'b': 10}, 'b': {'a': None, 'b': 5}}
    """
    return {name: {other: next((e for e, q in zip(evals, ratio) if q <= curve[1][-1] + 1e-12), None)
                   for other, curve in curves.items()}
            for name, (evals, ratio) in curves.items()}


def curve_stem(graph: str, cluster: str) -> str:
    """The file name (no suffix) of a graph's learning curves on a cluster: ``curve_GRAPH_CLUSTER``, never a path."""
    from gnplace.graph_io import name_in_file

    return name_in_file(f"curve_{graph}_{cluster}", len(".json"))


def write_curves(curves: dict[str, tuple[list[int], list[float]]], graph: str, cluster: str, auto: float,
                 budget: int, out: Path) -> Path:
    """One graph's learning curves into ``out``: the figure (``curve_GRAPH_CLUSTER.png``) and its corners as JSON.

    ``curves`` holds each placer's (evaluations, best step over ``auto``'s); the JSON holds ``auto``'s step
    (seconds), the budget and each curve's corners (:func:`curve_corners`). Both are written atomically.

    Returns:
        Path: the figure.
    """
    from gnplace.graph_io import write_atomically

    stem = curve_stem(graph, cluster)
    corners = {name: curve_corners(*curve) for name, curve in curves.items()}
    write_atomically(out / f"{stem}.json", (json.dumps(  # a kill never truncates it
        {"auto_step_s": auto, "budget": budget, "best_over_auto": corners}) + "\n").encode())
    _draw_curves(curves, graph, cluster, out / f"{stem}.png")
    return out / f"{stem}.png"


def _draw_curves(curves: dict[str, tuple[list[int], list[float]]], graph: str, cluster: str, path: Path) -> None:
    """:func:`bench_curves`' figure of one graph's ``curves`` (evaluations, best over auto's; by placer), to ``path``.

    The graph's and the cluster's names are drawn as they are written (:func:`gnplace.plot_text.plain`): a ``$``
    pair was read as maths (``a$\\frac$`` a ValueError after every search), a newline split the title and a
    control character was a missing glyph. A title wider than the figure is shortened in its middle: it ran off
    both edges.
    """
    from gnplace.plot_text import dollars, drawable, fonts_for
    from gnplace.viz import agg_pyplot, fit_title, title_room

    plt = agg_pyplot()
    heading = f"{drawable(graph)} on {drawable(cluster)}"
    with fonts_for([graph, cluster]):  # a character the default font lacks drawn in an installed one that has it
        fig, ax = plt.subplots(figsize=(6, 3.6), dpi=FIGURE_DPI)
        # a curve wholly under a later one (the same steps) is named beside its cover: it was in the legend alone
        under = hidden_curves({name: list(zip(*curve)) for name, curve in curves.items()})
        for i, (name, (evals, ratio)) in enumerate(curves.items()):
            label = name + (f" (hidden under {under[name]})" if name in under else "")
            if len(evals) == 1:  # one batch timed (a budget of one): a step of one point is a line of no length
                ax.scatter(evals, ratio, label=label, marker="*", s=80, zorder=3, color=f"C{i % 10}")
            else:
                ax.step(evals, ratio, where="post", label=label, color=f"C{i % 10}")
        ax.set_xlabel("timer evaluations")
        ax.set_ylabel("best step time / auto")
        ax.set_title(dollars(heading))
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fit_title(ax, heading, room=title_room(fig, ax, whole_figure=True))
        save_figure(fig, path)
        plt.close(fig)


def bench_ppo_speed(args: argparse.Namespace) -> dict[str, float]:
    """Seconds of one PPO iteration (rollout, timing, epochs) on a graph of about ``--nodes`` decision nodes."""
    import torch

    from gnplace.cluster import load_cluster
    from gnplace.exceptions import InvalidArgument
    from gnplace.rl.agent import log_probs, sample
    from gnplace.rl.ppo import normalise_advantages, ppo_loss
    from gnplace.rl.problem import PlacementProblem
    from gnplace.train import LearnerConfig, PlacementLearner

    if args.samples < 2:  # PPO's advantages compare the samples of an iteration
        raise InvalidArgument(f"--samples must be at least 2 (PPO compares the samples of an iteration), got "
                              f"{args.samples}")
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
    print(json_text(result))
    return result


def run_search(args: argparse.Namespace) -> int:
    """``search``: the search placers with one budget of timer evaluations on the test graphs, against ``auto``.

    By default ``ppo``, ``reinforce`` and ``annealing`` on the test graphs of each family; reported:
    the geometric mean of step time over ``auto``'s (the best fast placer) per family and cluster, over
    the runs that fit (in brackets: their count, then the runs out of memory and failed, where any are;
    a graph on which ``auto`` overflows memory or failed has no reference and is left out, counted beside its cluster),
    through ``gnplace.evaluate`` (its ``results.csv`` in ``--out`` resumes an interrupted run;
    ``--jobs`` processes of one thread each; ``-O PLACER.NAME=VALUE`` passes an option, e.g.
    ``-O ppo.prelude=0`` for PPO alone).
    """
    summary = bench_search(args)
    head = "| family | cluster | " + " | ".join(f"{p} / auto" for p in args.placers) + " |"
    print(f"budget {args.budget} evaluations; geometric mean of step time over auto's of the runs that fit (runs)")
    print(head)
    print("| --- " * (2 + len(args.placers)) + "|")
    for line in summary:
        cells = " | ".join(f"{line[p]:.3f} ({_runs_text(line, p)})" for p in args.placers)
        left = line["no_auto"]
        unreferenced = f" ({left} graph{'s' * (left != 1)} left out: auto out of memory or failed)" if left else ""
        print(f"| {line['family']} | {line['cluster']}{unreferenced} | {cells} |")
    return 0


def _runs_text(line: dict[str, Any], placer: str) -> str:
    """What a ``search`` cell's mean is over: its runs that fit, then those out of memory and failed, where any are.

    Examples:
        >>> _runs_text({"ppo_n": 5, "ppo_oom": 1, "ppo_failed": 0}, "ppo"), _runs_text({"ppo_n": 6}, "ppo")
        ('5; 1 OOM', '6')
    """
    parts = [str(line[f"{placer}_n"])]
    for field, what in (("oom", "OOM"), ("failed", "failed")):
        if line.get(f"{placer}_{field}"):
            parts.append(f"{line[f'{placer}_{field}']} {what}")
    return "; ".join(parts)


def run_curves(args: argparse.Namespace) -> int:
    """``curves``: best step time over ``auto``'s against evaluations, for the search placers on a few graphs.

    ``ppo`` and ``reinforce`` run with no annealing prelude (the algorithms alone), beside
    ``annealing``: one PNG per graph and cluster, the curves' corners as JSON beside it, and the
    evaluations each placer needed to first reach each other's final quality.
    """
    print(json_text(bench_curves(args), indent=1))
    return 0


def run_ppo_speed(args: argparse.Namespace) -> int:
    """``ppo-speed``: seconds of one PPO iteration on a random layered graph of about ``--nodes`` decision nodes.

    One iteration is a rollout of ``--samples`` placements, their timing, and ``--epochs`` policy steps.
    """
    bench_ppo_speed(args)
    return 0


def add_parsers(sub: Any) -> None:
    """The ``search``, ``curves`` and ``ppo-speed`` subcommands."""
    search = add_command(sub, "search", run_search, "search placers against auto on the test split")
    search.add_argument("--placers", nargs="+", default=["ppo", "reinforce", "annealing"],
                        help="search placers run beside auto (default: ppo reinforce annealing)")
    search.add_argument("--budget", type=int, default=20_000,
                        help="timer evaluations of each search placer's run (default: 20000)")
    search.add_argument("--clusters", nargs="+", default=["k80x4", "v100x8", "tight4"],
                        help="cluster presets or YAML files, each placed on (default: k80x4 v100x8 tight4)")
    search.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt"],
                        help="shipped families whose graphs are placed (default: cifar10 ptb nmt)")
    search.add_argument("--split", choices=("test", "train", "all"), default="test",
                        help="the split of each family's manifest placed: test, train or all (default: test)")
    add_per_family_argument(search, None, "graphs of --split")
    search.add_argument("--seed", type=whole_number, default=0,
                        help="seed of every run, auto's included; rows of other seeds in --out are left out of the "
                             "summary (default: 0)")
    search.add_argument("--jobs", "-j", type=int, default=2,
                        help="worker processes, one thread each (default: 2)")
    search.add_argument("--out", "-o", default="out/bench_search",
                        help="folder of gnplace evaluate's results.csv, from which a rerun resumes "
                             "(default: out/bench_search)")
    add_option_argument(search)  # e.g. -O ppo.prelude=0: PPO alone
    curves = add_command(sub, "curves", run_curves, "learning curves of the search placers")
    curves.add_argument("--graphs", nargs="+", type=file_path, help="graph files (default: the first test graph of each family)",
                        default=[str(DATASETS / family / f"{family}_002.gnpg") for family in ("cifar10", "ptb", "nmt")])
    curves.add_argument("--cluster", default="k80x4",
                        help="cluster preset or YAML file, of two devices or more (default: k80x4)")
    curves.add_argument("--placers", nargs="+", default=["ppo", "reinforce", "annealing"],
                        help="search placers (those that take a budget), ppo and reinforce with no annealing prelude "
                             "(default: ppo reinforce annealing)")
    curves.add_argument("--budget", type=int, default=20_000,
                        help="timer evaluations of each search (default: 20000)")
    curves.add_argument("--seed", type=whole_number, default=0,
                        help="seed of each search and of auto's reference placement (default: 0)")
    curves.add_argument("--out", "-o", default=str(DATASETS.parent / "docs" / "figures"),
                        help="folder of the figures and their JSON (default: the project's docs/figures, wherever it "
                             "runs from, as the report's section 6)")
    speed = add_command(sub, "ppo-speed", run_ppo_speed, "seconds of one PPO iteration")
    speed.add_argument("--nodes", type=int, default=1000,
                       help="decision nodes (ops) of the random layered graph, about 8 a layer (default: 1000)")
    speed.add_argument("--cluster", default="k80x4", help="cluster preset or YAML file (default: k80x4)")
    speed.add_argument("--samples", type=int, default=32,
                       help="placements sampled and timed per iteration, at least 2 (default: 32)")
    speed.add_argument("--epochs", type=int, default=10, help="PPO gradient steps per iteration (default: 10)")
    speed.add_argument("--repeat", type=int, default=5,
                       help="iterations timed, the median reported (default: 5)")
