"""The report's text in Markdown: what each section measured, its tables, and the seeds' claims measured."""

from __future__ import annotations

import math
import os
import platform
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
from benchmarks.common import best_at, first_reaching

from gnplace.sim.timer import geomean
from reporting.config import SEEDS, Config
from reporting.paths import BASELINE_FIGURE
from reporting.searches import curve_of


def fmt(value: float | None, digits: int = 3) -> str:
    """A number for a table (``-`` for none or nan)."""
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def learned_table(rows: list[dict[str, Any]], placers: list[str]) -> list[str]:
    """Markdown lines: per family and cluster, each learned placer's geometric means and totals."""
    lines = ["| family | cluster | placer | graphs | step / auto | step / bound | evaluations (mean) | updates (mean) "
             "| seconds (mean) | OOM |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for family in sorted({r["family"] for r in rows}):
        for cluster in sorted({r["cluster"] for r in rows}):
            for placer in placers:
                part = [r for r in rows if r["family"] == family and r["cluster"] == cluster and r["placer"] == placer]
                if not part:
                    continue
                ok = [r for r in part if not r["oom"]]
                lines.append(
                    f"| {family} | {cluster} | {placer} | {len(part)} | {fmt(geomean(r['vs_auto'] for r in ok))} "
                    f"| {fmt(geomean(r['vs_bound'] for r in ok))} | {np.mean([r['evaluations'] for r in part]):.0f} "
                    f"| {_mean_or_dash([r['updates'] for r in part])} | {np.mean([r['seconds'] for r in part]):.1f} "
                    f"| {sum(r['oom'] for r in part)} |")
    return lines


def _mean_or_dash(values: list[Any]) -> str:
    kept = [v for v in values if v is not None]
    return f"{np.mean(kept):.0f}" if kept else "-"


def direction(ratio: float, where: str = "") -> str:
    """The verdict on a published claim that a method's step is shorter, from the ratio of its step to the other's.

    A ratio that shows as 100.0% (:func:`fmt` of its percentage) is level, not a lead: 0.9996 said "The direction
    holds." beside "100.0%". ``where`` qualifies a verdict that it does not hold (``" at this budget"``).
    """
    if not math.isfinite(ratio):
        return "No pair to compare."
    if fmt(ratio * 100, 1) == "100.0":
        return "Level: neither leads at the precision shown."
    return "The direction holds." if ratio < 1 else f"The direction does not hold{where}."


def claims(rows: list[dict[str, Any]]) -> list[str]:
    """The seeds' claims measured on the learned runs (Markdown lines)."""
    by = {(r["graph"], r["cluster"], r["placer"]): r for r in rows}
    pairs = sorted({(r["graph"], r["cluster"]) for r in rows})

    def ratio(a: str, b: str) -> tuple[float, int]:
        values = [by[(g, c, a)]["step_s"] / by[(g, c, b)]["step_s"] for g, c in pairs
                  if (g, c, a) in by and (g, c, b) in by and not by[(g, c, a)]["oom"] and not by[(g, c, b)]["oom"]]
        return geomean(values), len(values)

    def reach(a: str, b: str) -> list[str]:
        """How many evaluations and updates ``a`` needed to reach ``b``'s final quality, per pair."""
        out = []
        for g, c in pairs:
            if (g, c, a) not in by or (g, c, b) not in by:
                continue
            ra, rb = by[(g, c, a)], by[(g, c, b)]
            target = rb["history"][-1][1]
            ea, eb = first_reaching(ra["history"], target), first_reaching(rb["history"], target)
            updates = ""
            if ea is not None and ra["evaluations"] and ra["updates"] is not None and rb["updates"] is not None:
                ua = ra["updates"] * ea / ra["evaluations"]
                ub = rb["updates"] * (eb or rb["evaluations"]) / max(rb["evaluations"], 1)
                updates = f" (about {ua:.1f} policy updates against {ub:.1f})"
            reached = f"{ea} evaluations" if ea is not None else "never"
            out.append(f"{ra['name']}@{c}: {reached} against {eb}{updates}")
        return out

    lines = []
    r, n = ratio("spotlight", "rnn_pg")
    lines += [f"- **Spotlight (PPO) against the policy gradient (rnn_pg).** Published: Spotlight's placements train "
              f"in 60.9% of the policy gradient's time. Measured: Spotlight's step time is {fmt(r * 100, 1)}% of "
              f"rnn_pg's (geometric mean over {n} graph-cluster pairs, equal budgets). "
              + direction(r, " at this budget")]
    r, n = ratio("post", "spotlight")
    lines += [f"- **Post against Spotlight.** Published: up to 63.7% shorter training times than the prior methods "
              f"for the same learning time. Measured: Post's step time is {fmt(r * 100, 1)}% of Spotlight's "
              f"({n} pairs, equal budgets). " + direction(r)]
    lines += ["- **Placeto's training steps against the RNN's.** Published: up to 6.1x fewer training steps to "
              "placements on par with the RNN method's. Measured: evaluations (and policy updates) Placeto needed to "
              "first reach rnn_pg's final step time, against rnn_pg's own: "
              + "; ".join(reach("placeto", "rnn_pg")) + "."]
    r, n = ratio("placeto", "rnn_pg")
    flat = sum(1 for g, c in pairs if (g, c, "rnn_pg") in by
               and by[(g, c, "rnn_pg")]["history"][-1][1] >= by[(g, c, "rnn_pg")]["history"][0][1] * (1 - 1e-9))
    lines += [f"  Placeto's final step time is {fmt(r * 100, 1)}% of rnn_pg's ({n} pairs). In {flat} of these pairs "
              "rnn_pg ended no better than the best of its first batch of samples from the uniform policy, so there "
              "its final step time is the quality of a few random placements, which Placeto's random starting "
              "placements can match before any update."]
    r_zs, n = ratio("placeto_zs", "placeto")
    # over the placements that fit, as section 2's table gives placeto_zs's step / auto
    r_zs_auto = geomean(by[(g, c, "placeto_zs")]["vs_auto"] for g, c in pairs
                        if (g, c, "placeto_zs") in by and not by[(g, c, "placeto_zs")]["oom"])
    lines += [f"- **Placeto zero-shot within a family.** Published: pretrained Placeto places unseen graphs of its "
              f"family without retraining. Measured: pretrained on each family's train graphs, its zero-shot "
              f"placement of the test graphs is {fmt(r_zs_auto)}x auto's step time and {fmt(r_zs * 100, 1)}% of "
              f"Placeto trained on the graph itself for the full budget ({n} pairs)."]
    return lines


def equal_budgets(rows: list[dict[str, Any]], seeds: list[str]) -> list[str]:
    """Gnplace zero-shot and fine-tuned against every comparator at the same evaluations, per family (Markdown).

    Each mean is over the runs whose placement fits (as section 2's tables); the runs left out are counted in
    the cell (`` (k OOM)``).
    """
    lines = ["| family | gnplace | its evaluations | gnplace / auto | "
             + " | ".join(f"{s} / auto" for s in seeds) + " | gnplace leads |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in seeds) + " | --- |"]
    for family in sorted({r["family"] for r in rows}):
        for ours in ("policy", "finetune"):
            mine = [r for r in rows if r["family"] == family and r["placer"] == ours]
            if not mine:
                continue
            budget = max(r["evaluations"] for r in mine)
            theirs, their_oom = [], []
            for seed in seeds:
                runs = [r for r in rows if r["family"] == family and r["placer"] == seed]
                # a run that ended out of memory found nothing that fits: its curve is of steps no device runs
                values = [best_at(r["history"], budget) for r in runs if not r["oom"]]
                theirs.append(geomean(values) if values and all(math.isfinite(v) for v in values) else math.inf)
                their_oom.append(sum(bool(r["oom"]) for r in runs))
            fits = [r for r in mine if not r["oom"]]  # as section 2's means: over the placements that fit
            own = geomean(r["history"][-1][1] for r in fits) if fits else math.nan
            worst = min(theirs) if theirs else math.inf
            verdict = ("no: every placement out of memory" if not fits else "yes" if own <= worst
                       else f"no: trails by {(own / worst - 1) * 100:.1f}%")
            cells = " | ".join(("none yet" if not math.isfinite(v) else fmt(v)) + _oom_text(k)
                               for v, k in zip(theirs, their_oom))
            lines.append(f"| {family} | {ours} | {budget} | {fmt(own)}{_oom_text(len(mine) - len(fits))} | {cells} "
                         f"| {verdict} |")
    return lines


def _oom_text(count: int) -> str:
    """`` (k OOM)`` after a table cell whose mean leaves out ``count`` runs out of memory; nothing where none is."""
    return f" ({count} OOM)" if count else ""


def curve_table(rows: list[dict[str, Any]]) -> list[str]:
    """Section 6's table: each placer's final best step over ``auto``'s and the evaluations it needed to reach each's.

    ``never`` where it did not reach that final, ``-`` where that placer did not run on the graph.
    """
    from benchmarks.search import evaluations_to_reach

    placers = list(dict.fromkeys(r["placer"] for r in rows))
    lines = ["| graph (cluster) | placer | best / auto | seconds | " + " | ".join(
        f"evaluations to {p}'s final" for p in placers) + " |", "| --- " * (4 + len(placers)) + "|"]
    for graph in dict.fromkeys(r["graph"] for r in rows):
        part = [r for r in rows if r["graph"] == graph]
        reach = evaluations_to_reach({r["placer"]: curve_of(r) for r in part})
        for r in part:
            mine = reach[r["placer"]]
            cells = ["-" if p not in mine else "never" if mine[p] is None else f"{mine[p]:,}" for p in placers]
            lines.append(f"| {r['name']} ({r['cluster']}) | {r['placer']} | {fmt(r['corners'][-1][1])} | "
                         f"{fmt(r['seconds'], 0)} | " + " | ".join(cells) + " |")
    return lines


def machine() -> str:
    """One line: the machine, Python and torch."""
    import torch

    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.system()} "
            f"{platform.release()}; Python {platform.python_version()}, torch {torch.__version__}")


@dataclass(frozen=True)
class Sections:
    """What the report's sections measured, as its text reads them."""

    summary: list[dict[str, Any]]  #: section 1's table (``gnplace.evaluate_summary.summarise``'s lines)
    learned: list[dict[str, Any]]  #: section 2's rows
    placers: list[str]  #: section 2's placers that made a row, in the report's order
    exact: list[dict[str, Any]]  #: section 4's rows
    sampled: list[float]  #: section 4b's: each exact row's zero-shot step with samples over the exact placement's
    scale: list[dict[str, Any]]  #: section 5's rows
    searches: list[dict[str, Any]]  #: section 6's rows
    search_pngs: list[Path]  #: section 6's figures


def report_text(config: Config, sections: Sections, *, quick: bool, command: str, out_name: str, rel: str,
                minutes: float, spent: float) -> str:
    """The report in Markdown: each section's command, settings, tables and figures, and the seeds' claims.

    Args:
        config (Config): the settings the sections ran with (``FULL`` or ``QUICK``).
        sections (Sections): what they measured.
        quick (bool): whether it is the quick report (its title says so).
        command (str): the command that makes the report again, as the report says it.
        out_name (str): ``--out``, where the runs are saved.
        rel (str): the figures' folder, relative to the report's.
        minutes (float): the minutes this run took.
        spent (float): the minutes of every run that made the saved rows (``elapsed.json``'s), this one included.

    Returns:
        str: the report, its lines joined.
    """
    summary, learned, placers, exact = sections.summary, sections.learned, sections.placers, sections.exact
    sampled, scale, searches, search_pngs = sections.sampled, sections.scale, sections.searches, sections.search_pngs
    lines = [
        "# gnplace benchmark report" + (" (quick)" if quick else ""),
        "",
        f"Produced by `{command}` on {date.today().isoformat()}, on {machine()}, in {spent:.1f} minutes "
        f"(the runs saved under `{out_name}`, this last one {minutes:.1f} minutes: a rerun reuses what is saved). "
        "All step times are simulated (`gnplace.sim.Simulator`, default mode); ratios are geometric means, lower "
        "is better.",
        "",
        "## 1. Every placer on the test splits" + (" and the real models" if config.real else ""),
        "",
        f"`{command}` (section 1; rows in `{out_name}/table/results.csv`). 'step / best non-learned' is against the "
        "best of the fast placers on the same graph and cluster; `policy` is gnplace zero-shot (the shipped "
        "checkpoint: greedy on the whole cluster, on its fastest k devices alone and, up to 4,000 ops, with no "
        "coarsening; then `auto`'s placement, and the greedy decode and 16 samples around it; then the "
        "greedy placement and 16 samples of each of the two constructors, past 4 devices on the 4 fastest too; then "
        "4 last rounds, each 4 samples of the base policy (a greedy decode too in the first) and 8 of each "
        "constructor around the best placement so far; on a graph whose groups are calls of a few modules (ptb's, "
        "nmt's), 1,000 evaluations of simulated annealing over the module map; then simulated annealing from the "
        "best of all, 5,120,000 op-evaluations' worth (5,120,000 / ops evaluations, at least 320 and at most 1,280); "
        "best by the simulator; D + 133 evaluations on D devices besides `auto`'s own and the annealings', D + 167 "
        "past 4 devices).",
        "",
        "| family | cluster | placer | graphs | step / best non-learned | step / bound | best on | OOM | place s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in summary:
        lines.append(f"| {s['family']} | {s['cluster']} | {s['label']} | {s['graphs']} | {fmt(s['vs_best'])} "
                     f"| {fmt(s['vs_bound'])} | {s['best_count']} | {s['oom']} | {fmt(s['place_s'])} |")
    lines += [
        "",
        f"`{command}` (section 1; rows in `{out_name}/baselines/results.csv`): every non-learned placer "
        f"({', '.join(config.baseline_placers)}; the searches with {config.baseline_budget} evaluations, from `auto`'s "
        "placement) on the test splits, each cluster's step over the best of them, geometric mean over the "
        "families' graphs (`docs/baselines.md`'s figure).",
        "",
        f"![every non-learned placer]({rel}/{BASELINE_FIGURE})",
        "",
        f"## 2. Learned placers, {config.rl_budget} simulator evaluations each",
        "",
        f"`{command}` (section 2; rows in `{out_name}/learned.jsonl`). The first {config.rl_per_family} test graph(s) "
        f"of each family on {', '.join(config.rl_clusters)}, seed 0. `policy`: gnplace zero-shot (its candidates and `auto`'s own evaluations); "
        "`finetune`: PPO from the shipped checkpoint around `auto`'s placement, returning the checkpoint's "
        "zero-shot placement instead if that is faster (its zero-shot evaluations counted), each batch drawn 48 times and the 16 new placements a learned model of the step ranks fastest timed; `ppo`: gnplace's PPO from a fresh policy, after "
        "a fifth of the budget annealing from `auto`'s placement, imitating the best placement so far first "
        "(neither returns worse than its start; both time each distinct placement once, so a repeated "
        "sample costs no evaluation, and what a search leaves when its samples stop being new goes to "
        "annealing from its best placement); "
        "the seeds' methods start "
        "from a uniformly random policy, as in their papers. `placeto_zs`: Placeto pretrained on the family's "
        f"first {config.placeto_train_graphs} train graphs ({config.placeto_episodes} episodes, on "
        f"{config.rl_clusters[0]}), one greedy episode on the test graph. Evaluations count every placement the "
        "simulator timed (Placeto times one per MDP step); updates count policy-gradient steps on a batch.",
        "",
        *learned_table(learned, placers),
        "",
        "![step over auto per learned placer](" + f"{rel}/report_learned.png)",
        "",
        f"`{command}` (section 2): learning curves, best step time over `auto`'s against evaluations, "
        f"first graph of each family on {config.rl_clusters[0]} (a star: a placer that made one placement; "
        "each line held at its final best to its panel's right edge).",
        "",
        f"![learning curves]({rel}/report_curves.png)",
        "",
        "## 3. The seeds' claims, measured",
        "",
        f"`{command}` (from the runs of section 2).",
        "",
        *claims(learned),
        "",
        "**gnplace against every comparator at equal budgets.** Each comparator's best step time (over `auto`'s, "
        "geometric mean over the family's runs on both clusters) after at most as many evaluations as gnplace "
        "used: the evaluations column (zero-shot's candidates and `auto`'s), the whole budget for fine-tuning; 'none yet' "
        "where a comparator had timed "
        f"nothing by then. `{command}` (from the runs of section 2).",
        "",
        *equal_budgets([r for r in learned if r["placer"] != "placeto_zs"], [p for p in SEEDS if p in placers]),
        "",
        "## 4. Against the proved optimum",
        "",
        f"`{command}` (section 4; rows in `{out_name}/exact.jsonl`): the small graphs of `docs/exact_gap.md` "
        f"(test graphs coarsened to 12 groups, and the example graphs), CP-SAT with a limit of "
        f"{config.exact_time_limit:g}. Each cell is the step time over the exact placement's.",
        "",
        f"| graph | cluster | groups | exact status | exact ms | auto | gnplace zero-shot | zero-shot portfolio "
        f"| zero-shot, {config.exact_samples} samples |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r, k in zip(exact, sampled):
        lines.append(f"| {r['name']} | {r['cluster']} | {r['groups_placed']} | {r['status']} | {fmt(r['exact_ms'])} "
                     f"| {fmt(r['auto'])} | {fmt(r['policy'])} | {fmt(min(r['auto'], r['policy']))} | {fmt(k)} |")
    lines += ["", "'gnplace zero-shot' is the `policy` placer as everywhere in this report (greedy on every device "
              "subset and with no coarsening, `auto`'s placement and 16 samples around it); 'zero-shot portfolio' the "
              "better of it and `auto` by the simulator, what "
              f"`policy` with `portfolio=True` returns; the last column `policy` with {config.exact_samples} samples "
              "(still no training).", "",
              f"Geometric mean over {len(exact)} cases: auto {fmt(geomean(r['auto'] for r in exact))}, "
              f"gnplace zero-shot {fmt(geomean(r['policy'] for r in exact))}, zero-shot portfolio "
              f"{fmt(geomean(min(r['auto'], r['policy']) for r in exact))}, zero-shot with {config.exact_samples} "
              f"samples {fmt(geomean(sampled))} (target: within 1.05).", "",
              "## 5. Time to place against graph size", "",
              f"`{command}` (section 5; rows in `{out_name}/scale.jsonl`): ENAS cifar10 training graphs with more "
              f"cells stacked, on k80x4, one core; the learned search placers with a budget of {config.scale_budget} "
              f"evaluations; `auto` and `m_etf` place every op (no coarsening) up to {config.scale_auto_up_to:,} ops; "
              "`policy` with the shipped checkpoint runs `auto` and samples around its placement (16 samples). Each "
              "placer first places an 8-op graph, untimed: compiled kernels and checkpoints load once a process.", "",
              "| ops | " + " | ".join(config.scale_placers) + " |",
              "| --- | " + " | ".join("---" for _ in config.scale_placers) + " |"]
    for ops in sorted({r["ops"] for r in scale}):
        cells = [fmt(next((r["seconds"] for r in scale if r["ops"] == ops and r["placer"] == p), None), 2)
                 for p in config.scale_placers]
        lines.append(f"| {ops:,} | " + " | ".join(cells) + " |")
    lines += ["", f"![time to place]({rel}/report_scale.png)", ""]
    lines += ["## 6. The search placers' learning curves", "",
              f"`{command}` (section 6; rows in `{out_name}/curves.jsonl`): best step time over `auto`'s against "
              f"timer evaluations, {config.curve_budget:,} evaluations, seed 0, the first test graph of each family on "
              f"{config.curve_cluster}; `ppo` and `reinforce` alone (no annealing prelude), so that the three are "
              "separate searches (what `python scripts/bench.py curves` runs and draws; each figure's corners in the "
              "JSON beside it).", "", *curve_table(searches), "",
              *(f"![{png.stem}]({rel}/{png.name})" for png in search_pngs), ""]
    return "\n".join(lines)
