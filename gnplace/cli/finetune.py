"""``gnplace finetune GRAPH --cluster C [--checkpoint P] --timer sim|local|dist --budget N``: fine-tune the policy."""

from __future__ import annotations

import argparse
from typing import Any

from gnplace.cli.common import (
    add_input_shape_argument,
    add_optimizer_argument,
    counted,
    device_names,
    file_path,
    input_shapes,
    print_json,
    whole_number,
)
from gnplace.exceptions import InvalidArgument


def add_parser(sub: Any) -> None:
    """Register ``finetune`` on the subparsers ``sub``."""
    p = sub.add_parser(
        "finetune", help="fine-tune the pretrained policy on one graph and cluster",
        description="PPO from the policy checkpoint on GRAPH placed on the cluster, each placement scored by the "
        "simulator (--timer sim), real steps in this process (local) or one torch.distributed rank per device "
        "(dist). Checkpoints every minute, --resume after a kill, the best placement in OUT/placement.json.",
    )
    add_arguments(p)
    p.set_defaults(run=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``gnplace finetune`` and ``scripts/finetune.py``."""
    p.add_argument("graph", type=file_path,
                   help="graph file, ONNX file or MODULE:FACTORY (real timers need MODULE:FACTORY)")
    p.add_argument("-c", "--cluster", required=True, help="cluster preset or YAML file (e.g. gnplace profile's)")
    p.add_argument("--checkpoint", default=None, type=file_path, help="policy checkpoint (default: the shipped one)")
    p.add_argument("--timer", default="sim", choices=["sim", "local", "dist"],
                   help="what scores a placement (default: sim)")
    add_optimizer_argument(p, real_steps=True)  # --timer local and dist run them
    add_input_shape_argument(p)  # a dynamic ONNX model's sizes: the error asked for --input-shape, which was none
    p.add_argument("--budget", type=int, default=1000, help="timer evaluations (default: 1000)")
    p.add_argument("--samples", type=int, default=16, help="placements per PPO iteration (default: 16)")
    p.add_argument("--epochs", type=int, default=4, help="PPO epochs per batch (default: 4)")
    p.add_argument("--lr", type=float, default=1e-3, help="learning rate (default: 1e-3)")
    p.add_argument("--screen", type=int, default=48,
                   help="candidates drawn per placement timed: a model fit on the placements timed so far picks "
                        "which to time; 1 times every sample (default: 48)")
    p.add_argument("--screen-model", default="auto", choices=["auto", "learned", "simulator"],
                   help="what that model starts from: the simulator's step of each candidate, corrected by what is "
                        "measured (simulator), or nothing (learned) (default: auto, the simulator with a real timer "
                        "and learned with --timer sim)")
    p.add_argument("--polish", type=float, default=None, metavar="SHARE",
                   help="share of the budget spent last on simulated annealing from the search's best placement; "
                        "0: PPO spends it all, but for what it leaves by drawing placements timed already "
                        "(default: 0.25)")
    p.add_argument("--no-zero-shot", dest="zero_shot", action="store_false",
                   help="skip the checkpoint's zero-shot placement (default: timed first, its evaluations "
                        "counted, and returned if the search from auto's placement ends slower)")
    p.add_argument("--seed", type=whole_number, default=0, help="seed of the search (default: 0)")
    p.add_argument("--devices", default=None, type=device_names,
                   help="local timer: torch devices per cluster device, e.g. cuda:0,cpu (default: cpu for each CPU "
                        "of the cluster, cuda:0, cuda:1, ... for its other devices in order)")
    p.add_argument("--threads", type=int, default=None,
                   help="real timers: torch CPU threads per rank (dist) or while timing (local), at most the "
                        "cores this process may run on (default: 1)")
    p.add_argument("--repeats", type=int, default=None,
                   help="real timers: timed steps per measurement, the median kept, 1 to 10,000 (default: 5)")
    p.add_argument("--final-rounds", type=int, default=None, metavar="N",
                   help="real timers: rounds of the comparison after the search (the search's two fastest "
                        "placements, auto, single, round_robin, zero-shot), each measured afresh in turn, medians "
                        "kept (default: 3)")
    p.add_argument("--confirm", type=int, default=None, metavar="N",
                   help="real timers: a placement the search measures faster than every one before it is measured N "
                        "more times and the median kept (real steps beyond --budget); 0: none (default: 2)")
    p.add_argument("--costs", default=None, type=file_path,
                   help="graph file from gnplace profile: plan with its measured op seconds")
    p.add_argument("-o", "--out", default="out/finetune", help="output folder (default: out/finetune)")
    p.add_argument("--resume", action="store_true",
                   help="continue from OUT/last.ckpt (refused if it is another graph's, cluster's or checkpoint's "
                        "run); real timers: the steps OUT/measurements.jsonl holds are answered from it, not run again")
    p.add_argument("--checkpoint-every", type=float, default=60.0, help="seconds between checkpoints (default: 60)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (nor, where stderr is not a terminal, progress lines)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def _check_learning_flags(args: argparse.Namespace) -> None:
    """Refuse a search setting the fine-tuner cannot run with, by its flag.

    The library's words named its argument: "need samples >= 2", "FineTunePlacer: checkpoint_every_s must be a
    number of seconds > 0", and above the least value too: "need epochs <= 1000", "need samples x screen <= 16384",
    "lr must be a finite number within float32's range".

    Raises:
        InvalidArgument: naming the flag, its least value and the value given.
    """
    import math

    from gnplace.cli.common import check_count
    from gnplace.limits import MAX_DRAWN, MAX_EPOCHS
    from gnplace.rl.config import FLOAT32_MAX, FLOAT32_TINY

    check_count(args.samples, "--samples", minimum=2)  # PPO's advantages need two placements of a batch
    check_count(args.epochs, "--epochs", minimum=1, maximum=MAX_EPOCHS)  # (above: "need epochs <= 1000")
    check_count(args.screen, "--screen", minimum=1)
    if args.screen == 1:  # (one placement drawn per sample)
        check_count(args.samples, "--samples", maximum=MAX_DRAWN)
    if args.samples * args.screen > MAX_DRAWN:  # the library's words: "need samples x screen <= 16384"
        raise InvalidArgument(f"--samples x --screen must be at most {MAX_DRAWN} (placements drawn in one batch), "
                              f"got {args.samples} x {args.screen} = {args.samples * args.screen}")
    if args.screen == 1 and args.screen_model != "auto":  # (the fine-tuner's own words named no flag)
        raise InvalidArgument(f"--screen-model {args.screen_model} is what the screen starts from, and --screen 1 "
                              "screens nothing (every sample is timed): leave --screen-model out, or raise --screen")
    if not (math.isfinite(args.lr) and args.lr > 0):  # as bench.py finetune's --ft-lr
        raise InvalidArgument(f"--lr must be a finite number > 0, got {args.lr}")
    if not FLOAT32_TINY <= args.lr <= FLOAT32_MAX:  # the policy's float32 tensors: 0 or inf (the library: "lr must")
        raise InvalidArgument(f"--lr must be within float32's range ({FLOAT32_TINY:.2g} to {FLOAT32_MAX:.2g}), "
                              f"got {args.lr:.4g}")
    if args.polish is not None and not 0 <= args.polish < 1:  # (NaN too) the library's words named its "prelude"
        raise InvalidArgument(f"--polish must be a share of the budget in [0, 1), got {args.polish}")
    if not (math.isfinite(args.checkpoint_every) and args.checkpoint_every > 0):  # as train.py's
        raise InvalidArgument(f"--checkpoint-every must be a positive number of seconds, got {args.checkpoint_every}")


def _check_real_timer_flags(args: argparse.Namespace) -> None:
    """Refuse a real timer's setting out of its range, by its flag, before the model is traced or a rank started.

    The library refused them later in its own words, naming no flag: "repeats must be a whole number >= 1, got 0",
    "need warmup and repeats <= 10,000 steps, got 1 and 20000".

    Raises:
        InvalidArgument: naming the flag, its range and the value given.
    """
    from gnplace.cli.common import check_count
    from gnplace.execute.base import MAX_REPEATS
    from gnplace.workers import available_cores

    # more threads than cores time their contention, not the device (the timers' own bound)
    check_count(args.threads, "--threads", minimum=1, maximum=available_cores())
    check_count(args.repeats, "--repeats", minimum=1, maximum=MAX_REPEATS)  # steps a measurement runs
    check_count(args.final_rounds, "--final-rounds", minimum=1)
    check_count(args.confirm, "--confirm", minimum=0)  # 0: no confirmation


def run(args: argparse.Namespace) -> int:
    """Run ``gnplace finetune``."""
    from pathlib import Path

    from gnplace.cli.common import check_count, check_not_input, check_output_folder, note_nothing_to_resume
    from gnplace.finetune import JOURNAL, finetune
    from gnplace.limits import MAX_BUDGET

    check_count(args.budget, "--budget", minimum=1, maximum=MAX_BUDGET)  # by its flag, as place and evaluate do
    _check_learning_flags(args)
    check_output_folder(args.out, "--out")
    for name in ("placement.json", "summary.json", "last.ckpt", JOURNAL):  # an input kept there was overwritten
        check_not_input(Path(args.out) / name, args.graph, "--out",
                        others=(args.cluster, args.checkpoint, args.costs))
    real_only = {name: value for name in ("threads", "repeats", "final_rounds", "confirm")
                 if (value := getattr(args, name)) is not None}  # the real timers' options given (else defaults)
    if args.timer == "sim" and real_only:  # each was taken and did nothing
        flag = "--" + next(iter(real_only)).replace("_", "-")
        raise InvalidArgument(f"{flag} is for the real timers (--timer local|dist); the simulator is exact "
                              "and times each placement once")
    if args.devices and args.timer != "local":  # the library's words named no flag: "devices name the torch ..."
        why = " (its ranks are this machine's CPUs)" if args.timer == "dist" else ""
        raise InvalidArgument(f"--devices is for the local timer (--timer local); the {args.timer} timer takes "
                              f"none{why}")
    _check_real_timer_flags(args)
    if args.resume:
        note_nothing_to_resume(Path(args.out) / "last.ckpt", "gnplace finetune",
                               Path(args.out) / JOURNAL if args.timer != "sim" else None)
    summary = finetune(
        args.graph, args.cluster, checkpoint=args.checkpoint, timer=args.timer, budget=args.budget, out=args.out,
        resume=args.resume, seed=args.seed, samples=args.samples, epochs=args.epochs, lr=args.lr,
        screen=args.screen, screen_model=args.screen_model,
        devices=args.devices.split(",") if args.devices else None, **real_only,
        costs=args.costs, checkpoint_every_s=args.checkpoint_every, zero_shot=args.zero_shot, polish=args.polish,
        progress=False if args.no_progress else None,  # None: a bar on a terminal, else lines
        input_shapes=input_shapes(args),
        **({"optimizer": args.optimizer} if args.optimizer is not None else {}),  # None: the source's own (sgd)
    )
    if summary is None:  # a serving rank of a torchrun launch
        return 0
    if args.json:
        print_json({k: v for k, v in summary.items() if k != "history"})
        return 0
    _print_summary(summary)
    return 0


def _print_summary(summary: dict[str, Any]) -> None:
    """The summary of a fine-tuning run as lines of text (``--json`` prints its keys, docs/outputs.md).

    Every time is :func:`~gnplace.units.format_seconds`'s, the run's own too: its "in 0.0 s" of a run under
    50 ms, or "in 3600.0 s", was the CLI's one time in hand-formatted seconds.
    """
    from gnplace.units import format_seconds

    count, annealed = summary["evaluations"], summary["polish_evaluations"]
    of_them = f" ({annealed} of them annealing from the search's best)" if annealed else ""  # ("1 evaluations (0 of")
    print(f"{summary['graph']} ({counted(summary['ops'], 'op')}) on {summary['cluster']}, timer {summary['timer']}, "
          f"{counted(count, 'evaluation')}{of_them} in {format_seconds(summary['seconds'])}")
    print(f"  fine-tuned   {format_seconds(summary['step_time_s']):>12}{'  (OOM)' if summary['oom'] else ''}")
    rounds = len(summary["final_rounds_s"]["search"])
    afresh = "afresh" if rounds == 1 else f"afresh (median of {rounds} rounds)"
    if summary["chosen"] != "search":
        winner = "the search's next fastest" if summary["chosen"].startswith("search_") else f"{summary['chosen']}'s"
        print(f"  (the search's best measured {format_seconds(summary['search_step_s'])} {afresh}"
              f"{' (OOM)' if summary['search_oom'] else ''}, slower than {winner} placement, which is returned)")
    elif rounds > 1:
        print(f"  (each step below measured {afresh})")
    if summary.get("zero_shot_s") is not None:
        oom = "  (OOM)" if summary["zero_shot_oom"] else ""
        print(f"  zero-shot    {format_seconds(summary['zero_shot_s']):>12}{oom}"
              "  (a candidate; the search starts from auto)")
    elif summary.get("zero_shot_budget_needed") is not None:
        print(f"  zero-shot    not timed: its candidates and one PPO batch need --budget "
              f"{summary['zero_shot_budget_needed']} or more")
    for name in ("auto", "single", "round_robin"):
        print(f"  {name:<12} {format_seconds(summary[name + '_s']):>12}{'  (OOM)' if summary[name + '_oom'] else ''}")
    print(f"  best placement: {summary['placement']}")
