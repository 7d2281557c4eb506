"""Benchmarks of gnplace: speed, and the quality of every placer; figures quoted in README.md come from here.

Usage::

    python scripts/bench.py sim [--ops 2000] [--devices 4] [--repeat 300] [--batch 256] [--json]
    python scripts/bench.py import [--layers 6 15 30]
    python scripts/bench.py scale [--ops 10000 50000 100000] [--groups 1000] [--cluster k80x4]
    python scripts/bench.py devices [--ops 100000] [--devices 4 256 4096] [--repeat 3]
    python scripts/bench.py devices-place [--ops 100000] [--devices 4 256 4096] [--placers heft m_etf m_sct] [--cache out/bench]
    python scripts/bench.py memory [--ops 10000 100000] [--clusters k80x4] [--placers single m_etf auto policy]
    python scripts/bench.py exact [--clusters k80x2 k80x4] [--groups 12] [--time-limit 20] [--per-family 2] [--families cifar10 ptb nmt]
    python scripts/bench.py placers [--ops 2000] [--cluster k80x4]
    python scripts/bench.py search [--placers ppo reinforce annealing] [--budget 20000] [--clusters k80x4 v100x8 tight4]
    python scripts/bench.py curves [--graphs ...] [--cluster k80x4] [--budget 20000] [--out docs/figures]
    python scripts/bench.py ppo-speed [--nodes 1000] [--samples 32] [--epochs 10]
    python scripts/bench.py zeroshot [--checkpoint PATH] [--samples 16] [--rounds 1] [--refine 4] [--split test] [--no-subsets] [--no-around] [--temperatures 0.1 0.2 0.3 0.5] [--op-level 4000] [--seed 0] [--jobs 2]
    python scripts/bench.py vs-search ZEROSHOT.json SEARCH/results.csv [--placer ppo] [--budget N] [--seed S]
    python scripts/bench.py zeroshot-seeds ZEROSHOT.json ZEROSHOT.json [...]
    python scripts/bench.py latency [--ops 10000 100000] [--samples 0] [--decoding greedy|policy]
    python scripts/bench.py constructor [--per-family 2] [--clusters k80x4 v100x8 cpu_gpu] [--op-level]
    python scripts/bench.py finetune [--budget 4000] [--clusters k80x4] [--per-family 2] [--jobs 2] [--ft-lr 1e-3] [--checkpoint PATH] [-O finetune.prior=0]
    python scripts/bench.py device-map [--families cifar10 ptb nmt] [--per-family 3] [--real-models gpt2 ...] [--placers auto policy]
    python scripts/bench.py screen-model [--mismatch 0.5 0.5 2] [--budget 400] [--clusters k80x4 v100x8 tight4] [--per-family 1] [--jobs 2]
    python scripts/bench.py noisy-steps [--budget 120] [--sigma 0.12] [--mismatch 0.3] [--confirm 0 2] [--seeds 0 1 2] [--jobs 2]
    python scripts/bench.py fidelity [--graphs MODULE:FACTORY ...] [--placements 8] [--repeats 7] [--rounds 5] [--anchor-rounds 5] [--probe-rounds 5] [--finetune-budget 60]
    python scripts/bench.py apply [--models MODULE:FACTORY ...] [--rounds 6] [--repeat 20]
    python scripts/bench.py report [--quick] [--out out/report] [--doc docs/RESULTS.md] [--figures docs/figures] [--jobs 2] [--cache out/bench]

``python scripts/bench.py NAME --help`` says what NAME measures and reports. ``--per-family N`` is the
first N test graphs of each family wherever it is taken, ``0`` all of them (``device-map`` draws N models
a family, at least one). The benchmarks live in
``scripts/benchmarks/``, one module per part of gnplace; ``report`` (``scripts/report.py``) runs every
placer side by side and writes ``docs/RESULTS.md`` and every figure of the documentation into ``docs/figures/``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

if os.path.dirname(os.path.realpath(__file__)) not in sys.path:  # python -P or -I: no script folder on the path
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))  # report and benchmarks/ live beside this file

import report
from benchmarks import execute, finetune, heuristics, search, speed, zeroshot

from gnplace.cli.common import run_reporting_errors, script_parser


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run the chosen benchmark; returns the exit status (bad input: one line and 2)."""
    parser = script_parser(__file__, __doc__)
    sub = parser.add_subparsers(dest="bench", required=True)
    for benchmarks in (speed, heuristics, search, zeroshot, finetune, execute):
        benchmarks.add_parsers(sub)
    report.add_parser(sub)
    args = parser.parse_args(argv)
    # the options of the chosen benchmark that take a list of things, each meant once (zeroshot-seeds' run files,
    # an argument, may name one run twice: a table of it against itself)
    lists = [(a.dest, a.option_strings[0]) for a in sub.choices[args.bench]._actions
             if a.nargs in ("+", "*") and a.option_strings]
    return run_reporting_errors(lambda parsed: run(parsed, lists), args, "bench")


#: The benchmarks that keep their rows in ``--out`` and resume from them: one run at a time there (two runs into one
#: folder each wrote its own rows over the file, and one run's rows were lost, both exiting 0).
HOLD_OUT = ("search", "zeroshot", "finetune", "screen-model", "noisy-steps", "fidelity")


def run(args: argparse.Namespace, lists: Sequence[tuple[str, str]] = ()) -> int:
    """Run the benchmark ``args.bench`` names (its handler), after checking its counts and its ``lists``.

    ``lists``: the ``(dest, flag)`` of each option that takes a list, whose values must be distinct. A benchmark of
    :data:`HOLD_OUT` holds its ``--out``'s run lock (:mod:`gnplace.runlock`) while it runs: a second run into that
    folder is refused in one line.
    """
    _check_counts(args)
    _check_distinct(args, lists)
    if args.bench not in HOLD_OUT:
        status: int = args.handler(args)
        return status
    from benchmarks.common import check_output_folder

    from gnplace.runlock import folder_lock

    check_output_folder(args.out)  # a file there: its own line, before the lock would make the folder
    with folder_lock(args.out, "--out"):  # a refused run removes the folder it made
        status = args.handler(args)
    return status


def _check_counts(args: argparse.Namespace) -> None:
    """Refuse negative sizes, counts and budgets (and fewer than one device or repeat) as one error line."""
    from benchmarks.common import LARGE_GRAPH_BENCHMARKS, large_graph_max_ops

    from gnplace.cli.common import check_count
    from gnplace.limits import MAX_DEVICES, MAX_DRAWN, MAX_NODES

    minimum_one = {"devices", "repeat", "repeats", "rounds", "jobs", "batch", "nodes", "epochs", "ft_epochs", "ops",
                   "layers", "groups", "threads",
                   "placements"}  # fidelity --placements 0 calibrated for minutes, then said no placement splits the step
    minimum = {"ft_samples": 2}  # PPO's advantage needs two placements a batch: 1 was "FineTunePlacer: need samples
    # >= 2", naming no flag
    # sim --devices 100000: a traceback from numpy's 75 GiB link matrix; sim --batch 10**8: numpy's 74.5 GiB one
    # (placements x ops); sim --ops 10**11 (ppo-speed --nodes): numpy's 745 GiB one
    maximum = {"devices": MAX_DEVICES, "batch": MAX_DRAWN, "nodes": MAX_NODES}
    if "ops" in vars(args):  # scale --ops 10**8: "knob 'layers' must be at most 10,000", once the --ops before it ran
        maximum["ops"] = large_graph_max_ops() if args.bench in LARGE_GRAPH_BENCHMARKS else MAX_NODES
    for name, value in sorted(vars(args).items()):
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, int) and not isinstance(v, bool) and name not in ("seed",):
                check_count(v, "--" + name.replace("_", "-"),
                            minimum=minimum.get(name, 1 if name in minimum_one else 0), maximum=maximum.get(name))


def _check_distinct(args: argparse.Namespace, lists: Sequence[tuple[str, str]]) -> None:
    """Refuse a value given twice to an option that takes a list of things (seeds, clusters, families, placers).

    ``noisy-steps --seeds 0 0`` fine-tuned each pair twice under seed 0 and counted both runs in its table, and
    ``search --placers ppo ppo`` printed each family's ``ppo / auto`` column twice.
    """
    from gnplace.exceptions import InvalidArgument

    for dest, flag in lists:
        seen = set()
        for value in getattr(args, dest, None) or []:
            if value in seen:
                raise InvalidArgument(f"{flag} names {value} twice: give each once")
            seen.add(value)


if __name__ == "__main__":
    sys.exit(main())
