"""The benchmark report: every placer side by side, written to ``docs/RESULTS.md`` and ``docs/figures/``.

Run by ``python scripts/bench.py report [--quick] [--out out/report] [--doc docs/RESULTS.md]
[--figures docs/figures] [--jobs 2] [--cache out/bench]`` (``--doc`` and ``--figures`` default to the
project's ``docs/``, wherever it runs from). Sections (each table and figure says the
command above it):

1. **Every placer** on the test splits and the real models on the cluster presets (``gnplace.evaluate``):
   step time over the best fast placer and over the lower bound, OOM count, seconds to place.
2. **Learned placers** (gnplace zero-shot and fine-tuned, gnplace PPO from scratch, and the seeds'
   methods ``rnn_pg``, ``hierarchical``, ``spotlight``, ``post``, ``placeto``) with one budget of
   simulator evaluations on a few test graphs per family: step over ``auto``'s and over the bound,
   evaluations used, policy updates, seconds, OOM; their learning curves.
3. **The seeds' claims** measured on those runs: Spotlight against the policy gradient, Post against
   Spotlight, Placeto's training steps against the RNN's, Placeto's zero-shot placement within a family
   (pretrained on the family's train split).
4. **Against the proved optimum**: the small graphs of ``docs/exact_gap.md``, the exact CP-SAT
   placement against ``auto`` and gnplace zero-shot.
5. **Time to place** against graph size (ENAS cifar10 graphs up to 100,000 ops).
6. **The search placers' learning curves**: ``ppo`` and ``reinforce`` alone (no annealing prelude) beside
   ``annealing``, 20,000 evaluations on the first test graph of each family on k80x4 (the README's
   ``curve_*.png``, as ``bench.py curves`` draws them).

Section 1 also draws every non-learned placer's step over the best of them on the test splits
(``baselines_ratios.png``, the figure of ``docs/baselines.md``), so that the report makes every figure the
documentation shows.

Every run is saved under ``--out`` as it finishes (JSON lines, and ``gnplace.evaluate``'s
``results.csv``), so an interrupted report resumes; ``--quick`` runs a small version of every section
(about a minute on 2 cores; the tests run it) and writes it under ``--out`` unless ``--doc`` and
``--figures`` say otherwise. The two keep their runs apart: ``--out`` is ``out/report`` by default and
``out/report_quick`` with ``--quick``, and a folder holding one kind's runs is refused to the other.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

if os.path.dirname(os.path.realpath(__file__)) not in sys.path:  # python -P or -I: no script folder on the path
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))  # reporting/ and benchmarks/ live beside this file

from benchmarks.common import Store, test_graphs
from reporting.config import FULL, QUICK, ROOT
from reporting.curves import plot_curves
from reporting.elapsed import Elapsed, add_minutes
from reporting.exact import EXACT_FIELDS, exact_row, exact_row_readable, exact_row_stands, sampled_rows
from reporting.keys import IDENTITY, LEARNED_IDENTITY, exact_key, inputs_identity, learned_key
from reporting.learned import (
    LEARNED_FIELDS,
    learned_row,
    learned_row_readable,
    learned_row_stands,
    placeto_zero_shot_tasks,
)
from reporting.paths import BASELINE_FIGURE, FIGURES, check_paths
from reporting.plots import plot_learned_bars, plot_scale
from reporting.scale import scale_rows
from reporting.searches import CURVE_FIELDS, curve_row, curve_row_readable, curve_tasks, draw_curves
from reporting.table import baseline_summary, rows_of, table_placements
from reporting.text import Sections, report_text

from gnplace.graph_io import write_atomically


def run(args: argparse.Namespace) -> Path:
    """Run every section (resuming from ``--out``), then write the report and its figures.

    The minutes spent are booked in ``--out``'s ``elapsed.json`` (:class:`Elapsed`) however the run ends.
    """
    out_name, doc, figures, cache = check_paths(args)
    out = Path(out_name)
    out.mkdir(parents=True, exist_ok=True)
    add_minutes(out / "elapsed.json", 0.0, args.quick)  # the folder is this kind of report's from now on
    figures.mkdir(parents=True, exist_ok=True)
    clock = Elapsed(out / "elapsed.json")
    try:
        return _run_sections(args, out_name, doc, figures, cache, clock)
    except BaseException:  # Ctrl-C, an error: the minutes this run spent on the rows it saved count too
        clock.book()
        raise


def report_command(args: argparse.Namespace) -> str:
    """The command that makes the report again, as the report says it: each path quoted as a shell reads it.

    A path of a space or a shell's character (``--out "my runs"``) was written bare: the command copied from the
    report gave the shell two words (``unrecognized arguments: runs``). ``--jobs`` changes no figure: left out.

    Examples:
        >>> report_command(argparse.Namespace(quick=True, out="my runs", doc=None, figures=None, cache="c"))
        "python scripts/bench.py report --quick --out 'my runs' --cache c"
    """
    import shlex

    given = (("--out", args.out), ("--doc", args.doc), ("--figures", args.figures), ("--cache", args.cache))
    return " ".join(["python scripts/bench.py report", *(["--quick"] if args.quick else []),
                     *(f"{flag} {shlex.quote(str(value))}" for flag, value in given if value is not None)])


def _run_sections(args: argparse.Namespace, out_name: str, doc: Path, figures: Path, cache: str,
                  clock: Elapsed) -> Path:
    """:func:`run`'s sections and report, booking the minutes spent on ``clock`` after each section."""
    config = QUICK if args.quick else FULL
    out = Path(out_name)
    command = report_command(args)
    sys.path.insert(0, str(ROOT / "scripts"))

    # 1. every placer on the test splits (and real models) on the presets
    from gnplace.evaluate import Task
    from gnplace.evaluate_summary import summarise

    paths = [p for f in config.families for p in test_graphs(f, config.table_per_family)]
    if config.real:
        paths += sorted(str(p) for p in (ROOT / "datasets" / "real").glob("*.gnpg"))
    tasks = [Task.with_options(p, c, name, {"samples": 16} if name == "policy" else None)
             for p in paths for c in config.table_clusters for name in config.table_placers]
    table_rows = table_placements(tasks, out / "table", args.jobs)
    summary = summarise(rows_of(tasks, table_rows))  # not a full report's rows in a quick one's table
    baselines = baseline_summary(config, out / "baselines", args.jobs)
    clock.book()

    # 2. learned placers with one budget
    store = Store(out / "learned.jsonl")
    rl_graphs = [p for f in config.families for p in test_graphs(f, config.rl_per_family)]
    learned_tasks = [
        {"key": learned_key(p, c, name, config.rl_budget), "graph": p, "cluster": c, "placer": name,
         "budget": config.rl_budget, "seed": 0, **inputs_identity(p, c), "placeto_train_sha256": None}
        for p in rl_graphs for c in config.rl_clusters for name in config.rl_placers]
    for family in config.families:  # Placeto pretrained per family, placing the family's test graphs zero-shot
        learned_tasks += placeto_zero_shot_tasks(family, config, out)
    learned = store.run(learned_tasks, learned_row, args.jobs, "section 2", LEARNED_IDENTITY, learned_row_stands,
                        LEARNED_FIELDS, learned_row_readable)
    placers = [p for p in (*config.rl_placers, "placeto_zs") if any(r["placer"] == p for r in learned)]
    clock.book()

    # 4. the proved optimum
    exact_store = Store(out / "exact.jsonl")
    exact_paths = [str(p) for p in sorted((ROOT / "datasets" / "examples").glob("*.gnpg"))] if config.exact_examples \
        else []
    exact_graphs = [(p, 0) for p in exact_paths] + [
        (p, 12) for f in config.families for p in test_graphs(f, config.exact_per_family)]
    exact_tasks = [{"key": exact_key(p, g, c, config.exact_time_limit), "graph": p, "groups": g,
                    "cluster": c, "time_limit": config.exact_time_limit, **inputs_identity(p, c)}
                   for c in config.exact_clusters for p, g in exact_graphs]
    exact = exact_store.run(exact_tasks, exact_row, args.jobs, "section 4", IDENTITY, exact_row_stands, EXACT_FIELDS,
                            exact_row_readable)
    sampled_tasks = [{"key": f"{r['key']}|samples={config.exact_samples}", "graph": r["graph"], "groups": r["groups"],
                      "cluster": r["cluster"], "samples": config.exact_samples, "exact_ms": r["exact_ms"],
                      **{field: r[field] for field in IDENTITY}} for r in exact]
    sampled = [r["ratio"] for r in sampled_rows(sampled_tasks, Store(out / "exact_sampled.jsonl"))]
    clock.book()

    # 5. time to place against size
    scale = scale_rows(config, Path(cache), Store(out / "scale.jsonl"))
    clock.book()

    # 6. the search placers' learning curves
    searches = Store(out / "curves.jsonl").run(curve_tasks(config), curve_row, args.jobs, "section 6", IDENTITY,
                                               None, CURVE_FIELDS, curve_row_readable)

    # the figures after every run, just before the report: one cut short leaves the figures of the report before
    bars_png, curves_png, scale_png = (figures / name for name in FIGURES)
    plot_curves([r for r in learned if r["placer"] != "placeto_zs"], curves_png, config.rl_clusters[0])
    plot_learned_bars(learned, bars_png, placers)
    plot_scale(scale, scale_png)
    from gnplace.viz import plot_ratios

    plot_ratios(baselines, figures / BASELINE_FIGURE)
    search_pngs = draw_curves(searches, figures)

    minutes, spent = clock.minutes, clock.book()
    rel = os.path.relpath(figures, doc.parent)
    text = report_text(config, Sections(summary, learned, placers, exact, sampled, scale, searches, search_pngs),
                       quick=args.quick, command=command, out_name=out_name, rel=rel, minutes=minutes, spent=spent)
    write_atomically(doc, text.encode())  # a kill leaves the report before, not half of it
    print(f"[report] wrote {doc} and its figures in {figures} in {minutes:.1f} min", flush=True)
    return doc


def run_report(args: argparse.Namespace) -> int:
    """``bench.py report``: :func:`run`, holding ``--out``'s run lock (:mod:`gnplace.runlock`); exit status 0.

    Two reports into one folder each ran every section again and wrote ``elapsed.json`` over the other's: the
    second is refused in one line while the first runs.
    """
    from gnplace.runlock import folder_lock

    out_name = check_paths(args)[0]  # refused before the lock would make the folder
    with folder_lock(out_name, "--out"):
        run(args)
    return 0


def add_parser(sub: Any) -> None:
    """The ``report`` subcommand's options (``args.handler`` runs it)."""
    report = sub.add_parser("report", help="every placer side by side: docs/RESULTS.md and docs/figures/report_*.png",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    report.set_defaults(handler=run_report)
    report.add_argument("--quick", action="store_true",
                        help="a small version of every section (about a minute on 2 cores), written under --out")
    report.add_argument("--out", "-o", default=None,
                        help="where runs are saved, a rerun resuming (default: out/report; with --quick "
                             "out/report_quick: a folder holds one kind of report's runs, the other refused)")
    report.add_argument("--doc", default=None,
                        help="the report (default: docs/RESULTS.md; with --quick OUT/RESULTS.md, so the "
                             "committed report stays as it is)")
    report.add_argument("--figures", default=None, help="its figures (default: docs/figures; with --quick OUT/figures)")
    report.add_argument("--jobs", "-j", type=int, default=2,
                        help="processes running the placements, one thread each (default: 2)")
    report.add_argument("--cache", default=None, help="large generated graphs (default: out/bench, shared with "
                                                        "`bench.py scale`; with --quick OUT/cache)")


if __name__ == "__main__":  # the report is a subcommand of bench.py; run alone, this file did nothing and exited 0
    print("report.py: error: run the report as `python scripts/bench.py report` (its options: "
          "`python scripts/bench.py report --help`)", file=sys.stderr)
    sys.exit(2)
