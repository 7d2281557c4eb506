"""Regenerate the shipped graph files; the same code always writes byte-identical files.

Usage::

    python scripts/make_datasets.py [--out datasets]

Writes ``datasets/examples/``: exact MLP training graphs used by the demo and the README.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gnplace.graph_io import save_graph
from gnplace.toy import mlp_training_graph

EXAMPLES = [
    dict(layers=8, width=2048, batch=512, branches=2),  # two towers: parallelism for 2+ devices
    dict(layers=8, width=6144, batch=256, branches=1),  # 1.1 GiB of weights: only fits tight4 when split
]


def main() -> None:
    """Write every shipped graph under ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "datasets"))
    args = parser.parse_args()
    for knobs in EXAMPLES:
        graph = mlp_training_graph(**knobs)
        path = save_graph(graph, Path(args.out) / "examples" / f"{graph.name}.gnpg")
        print(f"{path}: {graph.num_ops} ops, {graph.num_groups} groups")


if __name__ == "__main__":
    main()
