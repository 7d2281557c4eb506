"""Pretrain the placement policy across the three families and many clusters (``gnplace pretrain``).

Usage::

    python scripts/pretrain.py [--config configs/pretrain.yaml] [--set schedule.iterations=100] \\
        [--out out/pretrain] [--resume] [--devices 2 --strategy ddp] [--export checkpoints/gnplace-base.ckpt]

The defaults of ``configs/pretrain.yaml`` reproduce the shipped ``checkpoints/gnplace-base.ckpt``
(see its model card, ``checkpoints/README.md``). Errors in the config or a corrupt checkpoint under
``--resume`` print one line and exit 2.
"""

from __future__ import annotations

import sys

from gnplace.cli.common import run_reporting_errors, script_parser
from gnplace.cli.pretrain import add_arguments, run


def main(argv: list[str] | None = None) -> int:
    """Parse the flags and pretrain; returns the exit status."""
    parser = script_parser(__file__, __doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run_reporting_errors(run, args, "pretrain", "interrupted (--resume continues from the last checkpoint written, if any)")


if __name__ == "__main__":
    sys.exit(main())
