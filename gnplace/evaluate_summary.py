"""The summary of an evaluation (:func:`gnplace.evaluate.evaluate`'s rows): one line per family, cluster and placer.

Per family, cluster and placer (and budget, where a placer was given one, and options, where it ran with several
sets), :func:`summarise` gives geometric means of the step time's ratio to the best non-learned placer on the
same graph and cluster, to the single-device placement and to the lower bound, the number of OOM placements and
the mean placement time in seconds (Placeto, Baechi and Spotlight report the same figures, see
``docs/evaluation.md``); :func:`write_markdown` writes them as the table of ``results.md``.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gnplace.graph_io import write_atomically
from gnplace.placers.registry import PLACERS
from gnplace.sim.timer import geomean, relative_step

if TYPE_CHECKING:
    from gnplace.evaluate import Row

__all__ = ["summarise", "write_markdown", "spent_budget", "summary_budget", "summary_label", "option_labels"]


def spent_budget(placer: str, budget: Any) -> Any:
    """``budget`` where ``placer`` takes one (or is not registered here), else None: the budget its row keeps.

    ``heft`` run beside ``annealing`` with ``--budget 200`` is given 200 and spends none: that one is not its own, and
    its row's key does not hold it (:func:`gnplace.evaluate.task_key`).
    """
    return None if placer in PLACERS and "budget" not in PLACERS.info(placer).accepts else budget


def summary_budget(row: Row) -> int | None:
    """The budget ``row`` is summarised under: the one its placer was given, None where it takes none or got none.

    Rows made in code may still hold a budget their placer does not spend (:func:`spent_budget`).
    """
    budget: int | None = spent_budget(row.placer, row.budget)
    return budget


def summary_label(placer: str, budget: int | None, options: str = "") -> str:
    """How a summary line names its placer: ``annealing@200`` where given a budget (evaluations), else the name.

    ``options`` (the text of :func:`option_labels`, empty where the placer ran with one option set) goes in
    brackets after the name: ``ppo[mode=refine]@2000``.

    Examples:
        >>> summary_label("annealing", 200), summary_label("heft", None), summary_label("ppo", 2000, "mode=refine")
        ('annealing@200', 'heft', 'ppo[mode=refine]@2000')
    """
    name = f"{placer}[{options}]" if options else placer
    return name if budget is None else f"{name}@{budget}"


def option_labels(rows: Sequence[Row]) -> dict[tuple[str, str], str]:
    """Short text of each placer's option set (``Row.options``), by ``(placer, options)``, to tell its lines apart.

    A placer whose rows all have one option set gets ``""`` (its lines are named as before). Otherwise each set
    shows the options that differ between the placer's sets, as ``name=value`` joined by commas, a path by its
    file name (``checkpoint=base.ckpt``); where two sets would read the same, their whole JSON is shown.

    Examples:
        >>> from gnplace.evaluate import Row
        >>> rows = [Row("g", "f", "g.gnpg", 1, 1, "c", "ppo", 0, 1.0, 1.0, 1.0, 0.0, False, 0.0, options=o)
        ...         for o in ('{"lr": 0.1}', '{"lr": 0.1, "mode": "refine"}')]
        >>> sorted(option_labels(rows).values())
        ['', 'mode=refine']
    """
    sets: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        sets[r.placer].add(r.options)
    labels: dict[tuple[str, str], str] = {}
    for placer, texts in sets.items():
        parsed = {text: {k: json.dumps(v, sort_keys=True) for k, v in json.loads(text).items()} for text in texts}
        keys = set().union(*parsed.values())
        differ = sorted(k for k in keys if len({values.get(k) for values in parsed.values()}) > 1)
        short = {text: ",".join(f"{k}={_option_text(json.loads(values[k]))}" for k in differ if k in values)
                 for text, values in parsed.items()}
        if len(set(short.values())) < len(short):  # two sets read the same (files of one name): show them whole
            short = {text: text for text in texts}
        labels.update({(placer, text): label for text, label in short.items()})
    return labels


def _option_text(value: Any) -> str:
    """An option's value as a label shows it: a string as it is (a path by its file name), else its JSON."""
    if isinstance(value, str) and ("/" in value or os.sep in value):
        return os.path.basename(value.rstrip("/" + os.sep)) or value
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def summarise(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One summary line per (family, cluster, placer, budget, options): geometric-mean ratios, OOMs, placement time.

    Rows of one placer given other budgets (:func:`summary_budget`) or other options (``-O ppo.mode=refine``, two
    checkpoints) are summarised apart: ``budget`` is the evaluations given (None: its own default, or a placer that
    takes none), ``options`` the rows' options (JSON) and ``label`` names the line (:func:`summary_label`:
    ``annealing@200``, ``ppo[mode=refine]@2000`` where the placer ran with several option sets
    (:func:`option_labels`), or ``heft`` as before); lines are sorted by family, cluster, placer, budget (its default
    first, then ascending) and label. ``runs`` counts the rows summarised, ``graphs`` their distinct graph files
    (a graph run with two seeds is one graph and two runs; every mean and count below is over runs),
    ``vs_best_graphs`` the runs whose ratio is in ``vs_best`` (not the out-of-memory or failed ones, nor those of
    a graph without a best); ``vs_single`` leaves out the runs of a graph that the single device cannot hold
    (its step is no step a device can run: ``step / single device`` of a memory-tight cluster was over a device
    that overflows on half its graphs); ``place_s`` is the mean seconds of the runs that placed (nan if none did).
    A ratio is ``inf`` where every run's is (a step of work against one of 0 s), nan where no run has one.

    "Best" is the fastest placement that fits among the non-learned placers' rows of the same graph
    and cluster (rows of learned placers are compared with it, never part of it). Clusters are told
    apart by :func:`gnplace.evaluate.cluster_slot`; where two share a name, each is shown with its file
    (``cluster (/path/cluster.yaml)``). Rows of another simulator mode are another cluster's
    (``k80x2 [placeto]``), never compared with the default mode's.
    """
    label = _cluster_labels(rows)
    best: dict[tuple[str, str], float] = {}
    for r in rows:
        if not r.learned and not r.oom and math.isfinite(r.step_time_s):
            key = (r.graph_path, label[id(r)])
            best[key] = min(best.get(key, math.inf), r.step_time_s)
    options = option_labels(rows)
    groups: dict[tuple[str, str, str, int | None, str], list[Row]] = defaultdict(list)
    for r in rows:
        groups[(r.family or "-", label[id(r)], r.placer, summary_budget(r), r.options)].append(r)
    summary = []
    for (family, cluster, placer, budget, given), members in sorted(groups.items(), key=_line_order(options)):
        ok = [r for r in members if not r.oom and math.isfinite(r.step_time_s)]
        vs_best = [relative_step(r.step_time_s, best[(r.graph_path, cluster)]) for r in ok
                   if (r.graph_path, cluster) in best]
        summary.append({
            "family": family, "cluster": cluster, "placer": placer, "budget": budget, "options": given,
            "label": summary_label(placer, budget, options[(placer, given)]), "runs": len(members),
            "graphs": len({r.graph_path for r in members}),
            "vs_best": _mean_ratio(vs_best),
            "vs_best_graphs": sum(math.isfinite(v) and v > 0 for v in vs_best),
            # where one device overflows there is no single-device step to compare with (as with the best's)
            "vs_single": _mean_ratio([relative_step(r.step_time_s, r.single_s) for r in ok
                                      if r.single_oom is not True]),
            "vs_bound": _mean_ratio([relative_step(r.step_time_s, r.bound_s) for r in ok]),
            "oom": sum(r.oom is True for r in members),
            "errors": sum(bool(r.error) for r in members),
            "best_count": sum(
                1 for r in ok if r.step_time_s <= best.get((r.graph_path, cluster), math.inf) * (1 + 1e-9)
            ),
            "place_s": _mean([r.place_seconds for r in members if math.isfinite(r.place_seconds)]),  # failed: none
        })
    return summary


def _mean_ratio(ratios: Sequence[float]) -> float:
    """A summary line's mean of step-time ratios: their :func:`~gnplace.sim.timer.geomean`, infinite where all are.

    A run of a step of work against a reference of 0 s (a best, single-device step or bound of no work: a cluster
    with no launch overhead) has an infinite ratio, which the geometric mean leaves out; a line of such runs only
    was ``nan``, as a line of no runs to compare is.

    Examples:
        >>> _mean_ratio([0.5, 2.0]), _mean_ratio([float("inf")]), _mean_ratio([])
        (1.0, inf, nan)
    """
    if ratios and all(math.isinf(r) and r > 0 for r in ratios):
        return math.inf
    return geomean(ratios)


def _line_order(
    options: Mapping[tuple[str, str], str],
) -> Callable[[tuple[tuple[str, str, str, int | None, str], Any]], tuple[str, str, str, int, str]]:
    """Sort key of a summary group: family, cluster, placer, budget (none, -1, before any given), option label."""
    def key(item: tuple[tuple[str, str, str, int | None, str], Any]) -> tuple[str, str, str, int, str]:
        (family, cluster, placer, budget, given), _ = item
        return family, cluster, placer, -1 if budget is None else budget, options[(placer, given)]
    return key


def _mean(values: Sequence[float]) -> float:
    """The mean of ``values``; nan if there are none."""
    return sum(values) / len(values) if values else math.nan


def _cluster_labels(rows: Sequence[Row]) -> dict[int, str]:
    """The cluster each row is summarised under (by ``id``): its name, with its file where names clash.

    A row simulated in another mode than ``default`` is labelled with it (``k80x2 [placeto]``): step
    times of two simulators are not compared.
    """
    slots: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        slots[r.cluster].add(r.cluster_spec or r.cluster)
    labels = {}
    for r in rows:
        label = r.cluster if len(slots[r.cluster]) == 1 else f"{r.cluster} ({r.cluster_spec})"
        labels[id(r)] = label if r.mode == "default" else f"{label} [{r.mode}]"
    told: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for r in rows:
        told[labels[id(r)]].add((r.cluster_spec or r.cluster, r.mode))
    for r in rows:  # a cluster named "k80x2 [placeto]" beside k80x2 in placeto's mode: two clusters, one label, and
        # their rows were compared; each is shown with its file then
        if len(told[labels[id(r)]]) > 1:
            label = f"{r.cluster} ({r.cluster_spec or r.cluster})"
            labels[id(r)] = label if r.mode == "default" else f"{label} [{r.mode}]"
    return labels


def write_markdown(summary: Sequence[dict[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write the summary as a Markdown table (ratios are geometric means; lower is better), atomically.

    The ``graphs`` column counts distinct graph files, with the runs where they differ (``1 (2 runs)``: two seeds
    of one graph); ratios, ``best on`` and OOM count runs.
    """
    lines = [
        "| family | cluster | placer | graphs | step / best non-learned | step / single device | step / bound "
        "| best on | OOM | errors | place s (mean) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in summary:
        lines.append(
            f"| {_cell(s['family'])} | {_cell(s['cluster'])} | {_cell(s.get('label', s['placer']))} "
            f"| {_graphs_cell(s)} "
            f"| {s['vs_best']:.3f} | {s['vs_single']:.3f} | {s['vs_bound']:.3f} | {s['best_count']} | {s['oom']} "
            f"| {s['errors']} | {s['place_s']:.3f} |"
        )
    # a failed write keeps the old table
    return write_atomically(path, ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))


def _cell(text: Any) -> str:
    """``text`` as one Markdown table cell: ``|`` escaped, line breaks as spaces (names come from graph files)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _graphs_cell(line: Mapping[str, Any]) -> str:
    """A summary line's graphs, and its runs where they are more (``1 (2 runs)``: one graph at two seeds)."""
    graphs, runs = line["graphs"], line.get("runs", line["graphs"])
    return str(graphs) if runs == graphs else f"{graphs} ({runs} runs)"
