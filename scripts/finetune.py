"""Fine-tune the pretrained policy on one graph and cluster (``gnplace finetune``).

Usage::

    python scripts/finetune.py GRAPH --cluster C [--checkpoint checkpoints/gnplace-base.ckpt] \\
        [--timer sim|local|dist] [--budget 1000] [-o out/finetune] [--resume]

Real timers take the model as ``MODULE:FACTORY`` (a function returning ``(module, example_inputs)``, or
``(module, example_inputs, loss)`` where the module returns logits):
``--timer local`` runs each step in this process over the devices torch sees (``--devices cuda:0,cpu``);
``--timer dist`` runs one torch.distributed rank per cluster device (started here; across hosts,
launch this script with ``torchrun`` and every rank but 0 serves the timer); its gloo ranks are CPUs, so
a cluster with GPU devices is refused. Profile the cluster
first (``gnplace profile``) and pass its ``cluster.yaml`` and ``--costs graph.gnpg``. Errors print one
line and exit 2.
"""

from __future__ import annotations

import sys

from gnplace.cli.common import run_reporting_errors, script_parser
from gnplace.cli.finetune import add_arguments, run


def main(argv: list[str] | None = None) -> int:
    """Parse the flags and fine-tune; returns the exit status."""
    parser = script_parser(__file__, __doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run_reporting_errors(run, args, "finetune", "interrupted (--resume continues from the last checkpoint written, if any)")


if __name__ == "__main__":
    sys.exit(main())
