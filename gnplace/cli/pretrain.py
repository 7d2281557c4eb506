"""``gnplace pretrain [--config FILE] [--out DIR] [--resume] [--devices N --strategy ddp]``: pretrain a policy."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gnplace.cli.common import counted, print_json, whole_number
from gnplace.exceptions import InvalidArgument
from gnplace.runlock import LOCK_NAME


def add_parser(sub: Any) -> None:
    """Register ``pretrain`` on the subparsers ``sub``."""
    p = sub.add_parser(
        "pretrain", help="pretrain the placement policy across families and clusters",
        description="PPO (after imitation where learner.imitation_steps asks) over the training splits of every "
        "family on preset and random clusters (configs/pretrain.yaml holds every hyperparameter). Logs, "
        "checkpoints every few minutes, "
        "--resume after a kill, data-parallel with --devices N --strategy ddp.",
    )
    add_arguments(p)
    p.set_defaults(run=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``gnplace pretrain`` and ``scripts/pretrain.py``."""
    p.add_argument("--config", default=None,
                   help="YAML config (default: configs/pretrain.yaml); a key it leaves out takes the code's default, "
                   "not configs/pretrain.yaml's value (10 differ: change the shipped recipe with --set, or copy the "
                   "whole file)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one config value, e.g. schedule.iterations=100 (repeatable)")
    p.add_argument("--seed", type=whole_number, default=None, help="overrides learner.seed")
    p.add_argument("--out", "-o", default="out/pretrain", help="output folder (default: out/pretrain)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoints/last.ckpt")
    p.add_argument("--devices", type=int, default=1, help="data-parallel processes (default: 1)")
    p.add_argument("--strategy", default="auto",
                   help="Lightning strategy for --devices > 1: ddp or ddp_spawn (default: auto, Lightning's choice)")
    p.add_argument("--num-nodes", type=int, default=1,
                   help="machines of a multi-node run (Lightning reads MASTER_ADDR, MASTER_PORT, NODE_RANK; "
                        "default: 1)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="how long the processes of a run of several (--devices, --num-nodes) wait for each other, at "
                   "the start and in each exchange, before ending with an error (default: 1800, Lightning's)")
    p.add_argument("--jobs", "-j", type=int, default=None,
                   help="worker processes of the teacher searches (a config with data.teacher_budget), 1 for none "
                   "(default: one per core)")
    p.add_argument("--export", default=None,
                   help="copy the policy of the best validation (OUT/best.ckpt, else the final OUT/policy.ckpt) "
                   "here, e.g. checkpoints/gnplace-base.ckpt")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (nor, where stderr is not a terminal, progress lines)")
    p.add_argument("--json", action="store_true",
                   help="print the summary as one JSON object, alone on stdout (default: a few lines of text)")


#: What a pretraining run writes in ``--out`` (:func:`gnplace.pretrain.pretrain`): ``--export`` may name none of them.
RUN_ENTRIES = frozenset({"policy.ckpt", "best.ckpt", "checkpoints", "logs", "tensorboard", "teacher", "ranks",
                         LOCK_NAME})  # (its lock file while it runs)


def _check_export_is_not_the_runs(export: Path, out: Path) -> None:
    """Refuse an ``--export`` that is ``--out``, one of the files and folders the run writes there, or in one of them.

    Checked before the run: ``--export OUT`` (or ``OUT/logs``) ran the whole pretraining, then failed on the folder
    it had made; ``OUT/policy.ckpt`` is the run's own file. A new file beside them (``OUT/base.ckpt``) is fine.

    Raises:
        InvalidArgument: naming ``--export``.
    """
    target, folder = export.resolve(), out.resolve()
    if target == folder:
        raise InvalidArgument(f"--export {export}: is --out, the run's folder; name a file")
    if target.is_relative_to(folder) and target.relative_to(folder).parts[0] in RUN_ENTRIES:
        own = target.relative_to(folder).parts[0]
        raise InvalidArgument(f"--export {export}: is the run's own {own} in --out, or lies in it; "
                              "write to another file")


#: Environment variables of which one tells that a multi-node run was launched: ``MASTER_ADDR``, which the user (or
#: torchrun, Kubeflow) sets on every machine, or one of the cluster schedulers' that Lightning reads (SLURM, LSF, MPI).
LAUNCHED_BY = ("MASTER_ADDR", "SLURM_NTASKS", "LSB_JOBID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


def _check_nodes_launched(num_nodes: int) -> None:
    """Refuse ``--num-nodes`` above 1 where nothing launched the other machines' ranks (:data:`LAUNCHED_BY`).

    Without ``MASTER_ADDR`` Lightning takes 127.0.0.1 for node 0 and waits for the others there: the run hung
    (half an hour, Lightning's timeout, then a traceback) where the user had forgotten the variables.

    Raises:
        InvalidArgument: naming the variables to set.
    """
    import os

    if num_nodes > 1 and not any(name in os.environ for name in LAUNCHED_BY):
        raise InvalidArgument(f"--num-nodes {num_nodes}: a run over several machines needs MASTER_ADDR (node 0's "
                              "address), MASTER_PORT and NODE_RANK set on each, or a cluster launcher (SLURM); none "
                              "is set, and the run would wait for the other machines; on one machine use --devices")


def _check_timeout(timeout: float | None) -> None:
    """Refuse a ``--timeout`` that is not a number of seconds above 0 and at most a day, naming the flag.

    Raises:
        InvalidArgument: naming ``--timeout`` and the value.
    """
    from gnplace.limits import MAX_TIMEOUT_S, check_timeout

    if timeout is None:
        return
    try:
        check_timeout(timeout)
    except InvalidArgument:  # (the library's words name its argument, timeout_s)
        raise InvalidArgument(f"--timeout must be seconds above 0 and at most {MAX_TIMEOUT_S:,}, got {timeout:g}") \
            from None


def _check_overrides_once(overrides: list[str], seed: int | None) -> None:
    """Refuse a config value that ``--set`` gives twice, or ``--seed`` and ``--set learner.seed=`` give, differently.

    The last one won without a word (``--seed`` over any ``--set learner.seed``), as it would of an ``--option``
    given twice; the same value given twice is accepted. A malformed override is left to the config's reader.

    Raises:
        InvalidArgument: naming the key and both values.
    """
    from gnplace.pretrain_config import override_parts, override_value

    def value(section: str, key: str, text: str) -> Any:
        """The value the config takes (1e-3 and 0.001 are one: YAML reads the first as a string, and they differed)."""
        try:
            return override_value(section, key, text)
        except InvalidArgument:  # reported by load_pretrain_config
            return text

    given: dict[str, tuple[str, Any]] = {}
    for item in overrides:
        parts = override_parts(item)  # as load_pretrain_config reads it ("learner . lr" is learner.lr)
        if parts is None:
            continue
        key, text = f"{parts[0]}.{parts[1]}", parts[2]
        if key in given and given[key][1] != value(*parts):
            raise InvalidArgument(f"--set {key} is given twice, as {given[key][0]!r} and {text!r}: give it once")
        given[key] = (text, value(*parts))
    if seed is not None and "learner.seed" in given and given["learner.seed"][1] != seed:
        raise InvalidArgument(f"--seed {seed} and --set learner.seed={given['learner.seed'][0]} differ: give one")


def run(args: argparse.Namespace) -> int:
    """Run ``gnplace pretrain``."""
    from gnplace.cli.common import (
        check_count,
        check_not_input,
        check_output_file,
        check_output_folder,
        note_nothing_to_resume,
    )
    from gnplace.pretrain_config import DEFAULT_CONFIG, load_pretrain_config

    check_count(args.devices, "--devices", minimum=1)  # named by flag, not as the library's argument
    check_count(args.num_nodes, "--num-nodes", minimum=1)
    check_count(args.jobs, "--jobs", minimum=1)
    _check_timeout(args.timeout)
    if args.timeout is not None and args.devices * args.num_nodes == 1:  # it was taken, and nothing waited
        raise InvalidArgument(f"--timeout {args.timeout:g}: how long the processes of a run wait for each other, and "
                              "this run is one process (--devices 1, --num-nodes 1): leave --timeout out")
    _check_nodes_launched(args.num_nodes)  # (a hang, before)
    check_output_folder(args.out)
    if args.export is not None:  # refused now: the copy is made after the whole run, over what it names
        check_output_file(args.export, "--export")
        check_not_input(args.export, str(args.config or DEFAULT_CONFIG), "--export")
        _check_export_is_not_the_runs(Path(args.export), Path(args.out))
    _check_overrides_once(args.set, args.seed)
    config = load_pretrain_config(args.config, args.set, seed=args.seed)
    if args.jobs is not None and not config.data.teacher_budget:  # it was taken, and ran nothing
        raise InvalidArgument(f"--jobs {args.jobs}: the processes of the teacher searches, and this config runs none "
                              "(data.teacher_budget is 0): leave --jobs out")
    # Lightning's import (about 10 s) once the config is read
    from gnplace.pretrain import cluster_spec, pretrain, pretrain_pairs, resume_starts_afresh

    if args.export is not None:  # nor over a graph or cluster file the run reads (the dataset was lost with it)
        pairs, val_pairs = pretrain_pairs(config)
        read = [*dict.fromkeys(graph for graph, _ in pairs + val_pairs)]
        specs = (cluster_spec(config, spec) for spec in (*config.data.presets, *config.data.val_clusters))
        read += [spec for spec in specs if Path(spec).is_file()]
        check_not_input(args.export, str(args.config or DEFAULT_CONFIG), "--export", others=read)

    # (beside another run's exported files pretrain refuses: no new run starts; beside this config's first validation's
    # it starts again, which was said nowhere: the run read as resumed)
    if args.resume and resume_starts_afresh(args.out, config):
        note_nothing_to_resume(Path(args.out) / "checkpoints" / "last.ckpt", "gnplace pretrain", slurm=True)
    result = pretrain(config, args.out, resume=args.resume, devices=args.devices, strategy=args.strategy,
                      num_nodes=args.num_nodes, progress=False if args.no_progress else None, export=args.export,
                      jobs=args.jobs, timeout_s=args.timeout)
    if result["rank"] != 0:  # the other ranks of a data-parallel run print nothing
        return 0
    summary = {k: v for k, v in result.items() if k != "rank"}
    if args.json:
        print_json(summary)
    else:
        _print_summary(summary, args.export)
    return 0


def _print_summary(summary: dict[str, Any], export: str | None) -> None:
    """The summary of a pretraining run as lines of text (``--json`` prints its keys, docs/outputs.md)."""
    from gnplace.cli.common import printable_name
    from gnplace.units import format_seconds

    done = "had finished before: nothing trained" if summary["already_done"] else "done"
    # the run's seconds as every time of the CLI's ("in 20.0 s" was by hand); None where neither a finished run's
    # last.ckpt nor its policy.ckpt holds its wall time (pretrain_resume.finished_summary): that raised "unsupported
    # format string passed to NoneType.__format__"
    seconds = summary["wall_seconds"]
    took = f" in {format_seconds(seconds)}" if seconds is not None else \
        " (its wall time is unknown: its checkpoints hold none)"
    print(f"pretraining {done}: {counted(summary['iterations'], 'iteration')}{took}")
    print(f"  policy      {printable_name(summary['policy'])}")
    if summary["best"] is not None:
        score = summary["best_validation"]
        print(f"  best        {printable_name(summary['best'])}"
              + (f" (validation {score:.4f})" if score is not None else ""))
    else:
        # a run's last validation competes only on schedule (every schedule.steps_per_epoch iterations)
        print("  best        none: no validation every schedule.steps_per_epoch iterations ran")
    if summary["validation"]:
        print("  validation  " + ", ".join(f"{printable_name(str(k))} {_figure(v)}"
                                           for k, v in summary["validation"].items()))
    if export is not None:
        print(f"  exported to {printable_name(export)}")


def _figure(value: Any) -> str:
    """A validation figure: a number with four decimals, anything else as it is."""
    return f"{value:.4f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
