"""Train a placement policy with PPO on graphs and clusters, under Lightning (logs, checkpoints, resume).

Usage::

    python scripts/train.py --graphs datasets/ptb --split train --clusters k80x4,v100x8 \\
        --iterations 2000 --out out/train [--resume] [--algo reinforce] [--samples 32] [--epochs 10]

Every hyperparameter of :class:`gnplace.rl.config.LearnerConfig` is a flag (``--lr``, ``--entropy``, ...),
but ``val_samples``: this script runs no validation (``gnplace pretrain`` does).
Metrics go to ``OUT/logs/.../metrics.csv`` and ``OUT/tensorboard``; ``OUT/checkpoints/last.ckpt``
is written every ``--checkpoint-every`` seconds, at the end and on Ctrl-C (after the iteration under
way; exit 130), and ``--resume`` continues from it. Bad input is one ``train: error:`` line and exit 2,
reported before Lightning is imported where the flags alone say it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

#: Settings of :class:`~gnplace.rl.config.LearnerConfig` with no effect here, so not flags: ``val_samples``
#: samples the held-out pairs of a validation, which only ``gnplace pretrain`` runs (it was accepted, and inert).
NOT_FLAGS = frozenset({"val_samples"})

#: The help of each flag of :class:`~gnplace.rl.config.LearnerConfig` (its docstring says more); its default follows.
FLAG_HELP = {
    "algo": "ppo (Spotlight's) or reinforce (the policy-gradient ablation)",
    "mode": "the MDP: construct (every group placed each episode, Spotlight's) or refine (chains moving one group "
            "per step from the best placement seen, Placeto's and GiPH's)",
    "samples": "placements sampled per (graph, cluster) per iteration",
    "epochs": "PPO gradient steps per batch (leave it out with --algo reinforce: one step per batch)",
    "clip": "PPO's ratio clip epsilon",
    "beta": "initial KL coefficient beta",
    "kl_target": "KL per decision the adaptive beta aims at",
    "entropy": "entropy bonus",
    "elite": "weight of a cross-entropy pull toward the best placement seen so far (0: off)",
    "elite_target": "what --elite pulls toward: best (the best placement seen) or samples (the best the policy "
                    "itself sampled)",
    "prior": "logit bonus kappa of the best placement's device for every group while sampling (0: the policy alone)",
    "screen": "candidates drawn per placement timed, M: each batch draws M x --samples and times the --samples the "
              "screen ranks fastest, once it has learned enough (1: every sample timed)",
    "screen_model": "what the screen starts from: learned (nothing) or simulator (needs --screen above 1)",
    "risk": "share of each pair's samples whose advantage is kept, the best ones (1: all, normalised)",
    "lr": "Adam's learning rate",
    "grad_clip": "gradient norm bound",
    "oom_penalty": "reward penalty per unit of relative memory overflow",
    "imitation_steps": "iterations of imitation before reinforcement",
    "hidden": "embedding width of the policy",
    "head": "width of the policy head's hidden layer",
    "layers": "message-passing rounds of the policy",
    "alpha": "initial weight of the EFT rule in the logits",
    "seed": "seed of the policy's weights and of the sampling",
}


def main(argv: list[str] | None = None) -> int:
    """Parse the flags and train; returns the exit status (2: bad input, one line; 130: Ctrl-C, after a save)."""
    from gnplace.cli.common import run_reporting_errors, script_parser, whole_number
    from gnplace.rl.config import LearnerConfig

    parser = script_parser(__file__, __doc__)
    parser.add_argument("--graphs", nargs="+", required=True, help="graph files or dataset folders")
    parser.add_argument("--split", choices=("all", "train", "test"), default="train",
                        help="manifest split of dataset folders (default: train)")
    parser.add_argument("--clusters", default="k80x4", help="comma-separated presets or YAML files (default: k80x4)")
    parser.add_argument("--iterations", type=int, default=1000,
                        help="training iterations in all, imitation included (default: 1000)")
    parser.add_argument("--pairs-per-step", type=int, default=1,
                        help="(graph, cluster) pairs per iteration (default: 1)")
    parser.add_argument("--steps-per-epoch", type=int, default=100,
                        help="iterations per Lightning epoch, the logs' epoch column (default: 100)")
    parser.add_argument("--checkpoint-every", type=float, default=300.0,
                        help="seconds between checkpoints (default: 300)")
    parser.add_argument("--out", "-o", default="out/train",
                        help="folder of the logs and checkpoints (default: out/train)")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoints/last.ckpt")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (nor, where stderr is not a terminal, progress lines)")
    for f in dataclasses.fields(LearnerConfig):
        if f.name not in NOT_FLAGS:
            kind = whole_number if f.name == "seed" else type(f.default)  # --seed as every command reads it
            explained = FLAG_HELP.get(f.name)  # a new setting without its words: no help (tests/scripts catches it)
            parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=f.default,
                                help=explained and f"{explained} (default: {f.default})")
    args = parser.parse_args(argv)
    return run_reporting_errors(run, args, "train", "interrupted (--resume continues from the last checkpoint written)")


def run(args: argparse.Namespace) -> int:
    """Check the flags, then train (Lightning is imported only once they hold)."""
    import math

    from gnplace.cli.common import check_count, check_output_folder, cluster_list, note_nothing_to_resume
    from gnplace.cluster import load_cluster
    from gnplace.exceptions import InvalidArgument
    from gnplace.graph_files import collect_graphs
    from gnplace.limits import MAX_COUNT
    from gnplace.rl.config import LearnerConfig

    for flag, value in (("--iterations", args.iterations), ("--pairs-per-step", args.pairs_per_step),
                        ("--steps-per-epoch", args.steps_per_epoch)):
        check_count(value, flag, minimum=1, maximum=MAX_COUNT)  # (Lightning holds them as index-sized integers)
    if not (math.isfinite(args.checkpoint_every) and args.checkpoint_every > 0):
        raise InvalidArgument(f"--checkpoint-every must be a positive number of seconds, got {args.checkpoint_every}")
    check_output_folder(args.out)
    graphs = collect_graphs(args.graphs, split=args.split)
    clusters = cluster_list(args.clusters)  # "k80x2,k80x2" trained on its pairs twice as often
    if not clusters:
        raise InvalidArgument(f"--clusters {args.clusters!r} names no cluster (presets, or YAML files)")
    for cluster in clusters:  # a typo is reported now, not after Lightning's import
        load_cluster(cluster)
    pairs = [(str(g), c) for g in graphs for c in clusters]
    from gnplace.graph import require_ops
    from gnplace.graph_io import load_graph

    for graph in graphs:  # as pretrain's check_graph_files (whose module imports Lightning): one of no ops was
        require_ops(load_graph(graph), str(graph))  # trained on, its 0 s over 0 s a NaN ratio
    if args.algo == "reinforce" and args.epochs != LearnerConfig.epochs:  # inert: never ignored silently
        raise InvalidArgument(f"--epochs counts PPO's gradient steps per batch; --algo reinforce makes one step per "
                              f"batch, so leave --epochs out (got {args.epochs})")
    if args.screen <= 1 and args.screen_model != LearnerConfig.screen_model:  # inert: no screen, every sample timed
        raise InvalidArgument(f"--screen-model {args.screen_model} is what the screen starts from, and --screen "
                              f"{args.screen} screens nothing (every sample is timed): leave --screen-model out, or "
                              "raise --screen")
    config = LearnerConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(LearnerConfig)
                              if f.name not in NOT_FLAGS})
    if args.resume:
        note_nothing_to_resume(Path(args.out) / "checkpoints" / "last.ckpt", "train")
    from gnplace.train import fit  # Lightning's import (about 10 s) once the flags have been checked

    learner = fit(pairs, args.out, config=config, iterations=args.iterations, pairs_per_step=args.pairs_per_step,
                  steps_per_epoch=args.steps_per_epoch, checkpoint_every_s=args.checkpoint_every,
                  resume=args.resume, progress=False if args.no_progress else None)
    print(f"trained {learner.iteration} iterations; checkpoint {args.out}/checkpoints/last.ckpt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
