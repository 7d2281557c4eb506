"""The ``gnplace`` command: one module per subcommand, each parsing options and calling the library.

Errors caused by input (a bad graph, cluster, placement or option, an output path that cannot be
written) print one line on stderr and exit with status 2; they never print a traceback, and a file
written before stays as it was. Warnings print as one ``gnplace: warning:`` line each. ``evaluate``
exits with status 1 when some of its runs failed (their errors are in ``results.csv``), and 2 when no placement can
fit a graph's memory on a cluster (its rows are written); a graph that every placer ran out of memory is a warning.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gnplace.cli import evaluate as evaluate_cmd
from gnplace.cli import finetune as finetune_cmd
from gnplace.cli import generate as generate_cmd
from gnplace.cli import import_onnx as import_cmd
from gnplace.cli import inspect as inspect_cmd
from gnplace.cli import place as place_cmd
from gnplace.cli import pretrain as pretrain_cmd
from gnplace.cli import profile as profile_cmd
from gnplace.cli import simulate as simulate_cmd
from gnplace.cli.common import escaped_streams, run_reporting_errors

__all__ = ["main", "build_parser"]

SUBCOMMANDS = (simulate_cmd, place_cmd, evaluate_cmd, inspect_cmd, generate_cmd, import_cmd, pretrain_cmd, finetune_cmd,
               profile_cmd)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``gnplace`` command with every subcommand."""
    from gnplace import __version__

    parser = argparse.ArgumentParser(prog="gnplace", description="Place training graphs on devices and time them.")
    parser.add_argument("--version", action="version", version=f"gnplace {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``gnplace`` command with ``argv`` (default: ``sys.argv[1:]``); returns the exit status.

    The streams print a name their encoding lacks escaped, never a crash, while it runs, parsing included
    (:func:`~gnplace.cli.common.escaped_streams`); a program that calls it finds them as they were after.
    """
    with escaped_streams():
        args = build_parser().parse_args(argv)
        return run_reporting_errors(args.run, args, "gnplace")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
