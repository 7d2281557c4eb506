"""``gnplace generate --family F --count N --seed S --out DIR``: draw a dataset of training graphs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gnplace.cli.common import check_count, check_output_folder, whole_number, writing
from gnplace.datasets import MAX_GRAPHS, generate_dataset
from gnplace.exceptions import InvalidArgument
from gnplace.importers import OPTIMIZERS
from gnplace.progress import count_bar


def add_parser(sub: Any) -> None:
    """Register ``generate`` on the subparsers ``sub``."""
    p = sub.add_parser("generate", help="draw training graphs of a family into a dataset folder",
                       description="Draw COUNT training graphs of FAMILY (seeded, byte-identical on rerun) into OUT, "
                       "with manifest.json and a train/test split. An interrupted run resumes where it stopped; "
                       "a finished dataset of other arguments in OUT is kept unless --overwrite.")
    p.add_argument("--family", "-f", required=True, help="cifar10, ptb or nmt")
    p.add_argument("--count", "-n", type=int, default=32, help="graphs to draw (default: 32)")
    p.add_argument("--seed", "-s", type=whole_number, default=0, help="dataset seed (default: 0)")
    p.add_argument("--test-count", type=int, default=None, help="graphs in the test split (default: count / 4)")
    p.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="sgd",
                   help="optimizer whose update and state the graphs hold (default: sgd)")
    p.add_argument("--out", "-o", required=True, help="output folder")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a dataset of other arguments in OUT (refused without it)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gnplace generate``."""
    from gnplace.families import get_family

    check_count(args.count, "--count", minimum=1, maximum=MAX_GRAPHS)
    check_count(args.test_count, "--test-count")
    if args.test_count is not None and args.test_count > args.count:
        raise InvalidArgument(f"--test-count {args.test_count} is more than --count {args.count}")
    check_output_folder(args.out)
    get_family(args.family)  # refused before the progress bar is drawn
    with count_bar(f"{args.family} graphs", args.count, "graphs") as bar:  # a log file: a line every half minute
        def advance(index: int, graph: Any) -> None:
            bar.advance(f"{args.family}: {graph.name} ({graph.num_ops} ops)")

        files = [Path(args.out) / f"{args.family}_{i:03d}.gnpg" for i in range(args.count)]
        before = [_stamp(f) for f in files]
        with writing(args.out):
            manifest = generate_dataset(args.family, args.count, args.out, seed=args.seed, test_count=args.test_count,
                                        optimizer=args.optimizer, progress=advance, overwrite=args.overwrite)
    # a rerun keeps the graphs already drawn there: "wrote 32 graphs" said so of a rerun that wrote none
    kept = sum(b is not None and b == _stamp(f) for f, b in zip(files, before, strict=True))
    wrote = args.count - kept
    print(f"wrote {wrote} graph{'' if wrote == 1 else 's'} and {manifest}"
          + (f" (kept {kept} drawn there before)" if kept else ""))
    return 0


def _stamp(path: Path) -> tuple[int, int] | None:
    """``path``'s inode and modification time (ns), which a graph written again (atomically) changes; None: no file."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns
