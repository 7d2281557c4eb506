"""Whether and how a pretraining run in ``OUT`` resumes: its ``last.ckpt`` checked, its exported policies read.

:func:`check_resumable` refuses a training checkpoint that cannot continue this run (unreadable, foreign, another
config, other pairs or placer revisions, malformed state); :func:`resume_starts_afresh` tells a folder whose run
has written no checkpoint yet; :func:`finished_summary` is the summary of a run that has done its iterations.
:func:`gnplace.pretrain.pretrain` calls them before any work; none of them imports Lightning.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from gnplace.exceptions import InvalidCheckpoint
from gnplace.graph_io import write_atomically
from gnplace.limits import as_float, finite_number, is_whole
from gnplace.pretrain_config import PretrainConfig
from gnplace.pretrain_pairs import imitation_recipe

__all__ = ["RESUMABLE_CHANGES", "check_resumable", "exported_files", "exported_by", "resume_starts_afresh",
           "exported_meta", "check_best_readable", "finished_summary"]


#: Settings a resumed run may change: how long it runs and how often it checkpoints. Its exports then record the
#: changed config, ``best.ckpt`` too where its weights are an earlier session's
#: (:class:`~gnplace.pretrain_callbacks.ExportPolicy`).
RESUMABLE_CHANGES = frozenset({"iterations", "checkpoint_every_s"})


def check_resumable(path: Path, config: PretrainConfig, pairs: str | None = None, processes: int | None = None) -> int:
    """Refuse a training checkpoint that cannot continue this run: unreadable, foreign, or another config.

    Every setting but :data:`RESUMABLE_CHANGES` must be the checkpoint's, so that a resumed run is the
    run it continues; so must the number of ``processes``, where given (each rank draws its own share).

    Returns:
        int: the iterations the checkpoint has done.

    Raises:
        InvalidCheckpoint: with one line saying which.
    """
    from gnplace.policy.checkpoint import (
        check_training_state,
        check_training_weights,
        is_training_checkpoint,
        pretraining_state,
        read_checkpoint,
    )

    data = read_checkpoint(path)
    if not is_training_checkpoint(data):
        raise InvalidCheckpoint(f"{path}: not a gnplace training checkpoint (cannot resume from it)")
    from gnplace.rl.search import RUN_KEY

    if RUN_KEY in data:
        raise InvalidCheckpoint(f"{path}: a search or fine-tuning run's checkpoint, not pretraining's "
                                "(cannot resume from it)")
    saved = data.get("hyper_parameters", {})
    if not isinstance(saved, dict):
        raise InvalidCheckpoint(f"{path}: its learner settings are malformed; cannot resume from it")
    from gnplace.train import changed_settings

    differ = changed_settings(saved, config.learner)
    if differ:
        raise InvalidCheckpoint(f"{path}: made with other learner settings ({', '.join(differ)}); "
                                "resume with the same config or use another --out")
    exporter = pretraining_state(data)
    recorded = exporter.get("config")
    if recorded is not None:  # checkpoints before 2026-11-24 recorded the learner's settings alone
        for section in ("data", "schedule"):  # a section as a list was an AttributeError traceback
            if not isinstance(recorded.get(section, {}), dict):
                raise InvalidCheckpoint(f"{path}: its recorded config is damaged ({section} is not a mapping); "
                                        "cannot resume from it")
        wanted = config.to_dict()
        differ = [f"{section}.{key}" for section in ("data", "schedule")
                  for key, value in wanted[section].items()
                  if key not in RESUMABLE_CHANGES and recorded.get(section, {}).get(key, value) != value]
        if differ:
            raise InvalidCheckpoint(f"{path}: made with other settings ({', '.join(differ)}); "
                                    "resume with the same config or use another --out")
    ran = exporter.get("processes")  # recorded since 2026-11-29: each rank draws its own share of the pairs
    if processes is not None and isinstance(ran, int) and ran != processes:
        raise InvalidCheckpoint(f"{path}: a run of {ran} process{'es' if ran != 1 else ''}, resumed with {processes}; "
                                "resume it with as many (--devices, --num-nodes) or use another --out")
    if pairs is not None and exporter.get("pairs") not in (None, pairs):  # recorded since 2026-11-25
        _check_recipe(path, exporter.get("recipe"), imitation_recipe(config.data.teacher_budget))
        raise InvalidCheckpoint(f"{path}: made with other graphs or clusters (a dataset folder or a cluster file "
                                "changed since) or other revisions of auto's placers or of the teacher's search; "
                                "resume with the same data and placers or use another --out")
    iteration = data["gnplace"].get("iteration", 0)
    if isinstance(iteration, bool) or not isinstance(iteration, int) or not 0 <= iteration <= 2**62:
        raise InvalidCheckpoint(f"{path}: its iteration count is not a whole number of iterations ({iteration!r}); "
                                "cannot resume from it")
    check_training_weights(path, data["state_dict"], config.learner.policy, "the config's policy")
    check_training_state(path, data, config.learner.policy)
    _check_run_state(path, data, exporter)
    return iteration


def _check_recipe(path: Path, recorded: Any, recipe: dict[str, Any]) -> None:
    """Refuse a run whose imitation targets came from other placer revisions than today's (``recipe``).

    ``recorded`` is the checkpoint's :func:`~gnplace.pretrain_pairs.imitation_recipe` (recorded since 2026-11-30;
    None before).
    """
    if isinstance(recorded, dict) and recorded != recipe:
        def shown(found: dict[str, Any]) -> str:
            return json.dumps(found, sort_keys=True) if found else "those of before any change"

        raise InvalidCheckpoint(f"{path}: started under other placer revisions ({shown(recorded)}; now "
                                f"{shown(recipe)}): its imitation targets and auto's baselines would change; "
                                "resume with the placers it started with or use another --out")


def _check_run_state(path: Path, data: dict[str, Any], exporter: dict[str, Any]) -> None:
    """Refuse a checkpoint whose state beside the weights is malformed (an edited file; a damaged one fails its CRC).

    The learner's :math:`\\beta` and sampling generator, the optimizer's parameter groups, the exporter's
    wall seconds and best score: each is read on resume, and a bad value there is a traceback.
    """
    import numpy as np

    def refuse(what: str) -> InvalidCheckpoint:
        return InvalidCheckpoint(f"{path}: its {what} is malformed; cannot resume from it")

    learner = data["gnplace"]
    beta = learner.get("beta", 0.0)
    if not isinstance(beta, int | float) or not finite_number(beta) or beta < 0:  # (10**400: no float)
        raise refuse(f"KL weight beta ({beta!r})")
    if "rng" in learner:
        try:
            np.random.default_rng().bit_generator.state = learner["rng"]
        except (KeyError, TypeError, ValueError) as err:
            raise refuse("sampling generator's state") from err
    groups = [state.get("param_groups") if isinstance(state, dict) else None
              for state in data.get("optimizer_states", [])]
    if not all(isinstance(g, list) and g for g in groups):
        raise refuse("optimizer state")
    for key in ("elapsed", "best_score"):
        value = exporter.get(key, 0.0)
        number = as_float(value) if isinstance(value, int | float) else None
        if number is None or math.isnan(number):  # (10**400: no float, its comparisons an OverflowError)
            raise refuse(f"run's {key} ({value!r})")


def exported_files(out: str | os.PathLike[str]) -> list[str]:
    """The policies a run in ``out`` has exported (``policy.ckpt``, ``best.ckpt``), by name: those there."""
    return [name for name in ("policy.ckpt", "best.ckpt") if (Path(out) / name).exists()]


def exported_by(out: Path, exported: list[str], config: PretrainConfig) -> bool:
    """Whether every policy exported in ``out`` (``exported``: their names) is one ``config``'s run writes first.

    That is, before its first checkpoint: of that config (:data:`RESUMABLE_CHANGES` aside, as :func:`check_resumable`
    takes them), at most ``schedule.steps_per_epoch`` iterations in (the first validation's, or a shorter run's end).
    A file that cannot be read, records no config, or comes from further in (a finished run whose ``checkpoints/``
    was removed) is not.
    """
    def kept(recorded: Any) -> str | None:
        if not isinstance(recorded, dict) or not all(isinstance(recorded.get(s), dict) for s in ("data", "schedule")):
            return None
        schedule = {k: v for k, v in recorded["schedule"].items() if k not in RESUMABLE_CHANGES}
        return json.dumps({**recorded, "schedule": schedule}, sort_keys=True, default=str)

    wanted = kept(config.to_dict())
    try:
        metas = [exported_meta(out / name) for name in exported]
    except InvalidCheckpoint:
        return False
    return all(kept(meta.get("config")) == wanted and is_whole(meta.get("iterations"))
               and 0 <= meta["iterations"] <= config.schedule.steps_per_epoch for meta in metas)


def resume_starts_afresh(out: str | os.PathLike[str], config: PretrainConfig) -> bool:
    """Whether ``--resume`` in ``out`` starts ``config``'s run at its first iteration, rather than continue or refuse.

    It does where ``out`` holds no ``checkpoints/last.ckpt``, and no exported policy but those a run of ``config``
    writes before its first checkpoint (a kill came between its first validation's export and that checkpoint).
    """
    out = Path(out)
    exported = exported_files(out)
    return not (out / "checkpoints" / "last.ckpt").exists() and (not exported or exported_by(out, exported, config))


def exported_meta(path: Path) -> dict[str, Any]:
    """The meta of the policy exported at ``path`` (the meta alone: no network is built); ``{}`` if none is."""
    from gnplace.policy.checkpoint import read_checkpoint

    return read_checkpoint(path).get("meta", {}) if path.is_file() else {}


def check_best_readable(path: Path) -> None:
    """Refuse, before a resumed run trains, a ``best.ckpt`` that is no readable policy (truncated, damaged, foreign).

    The resumed run reads it at its first export (:meth:`~gnplace.pretrain_callbacks.ExportPolicy.name_config_in_best`),
    and a finished run's summary reads its meta: a damaged one ended the run there, after the iterations since its
    checkpoint, which were lost (no checkpoint follows), and every resume after it the same way.

    Raises:
        InvalidCheckpoint: naming the file.
    """
    from gnplace.policy.checkpoint import load_policy

    if path.exists():
        try:
            load_policy(path)
        except InvalidCheckpoint as err:
            raise InvalidCheckpoint(f"{err} (the run's best policy, which --resume keeps: put the run's own back, or "
                                    "move it away)") from err


def finished_summary(
    out: Path, export: str | os.PathLike[str] | None, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The summary of a run that has done its iterations already, read from its exported policies.

    ``meta`` is ``policy.ckpt``'s, where the caller has read it already. Where ``export`` is given, the run's best
    policy (its ``policy.ckpt`` where it has no ``best.ckpt``) is copied there. The keys are those of
    :func:`~gnplace.pretrain.pretrain`'s summary, with ``already_done`` True (nothing trained).
    """
    from gnplace.policy.checkpoint import pretraining_state, read_checkpoint

    meta = exported_meta(out / "policy.ckpt") if meta is None else meta
    best_path = out / "best.ckpt"
    best = read_checkpoint(best_path).get("meta", {}).get("validation", {}) if best_path.exists() else {}
    score = best.get("val/best_vs_auto", best.get("val/greedy_vs_auto"))
    if export is not None:
        write_atomically(export, (best_path if best_path.exists() else out / "policy.ckpt").read_bytes())
    last = out / "checkpoints" / "last.ckpt"
    elapsed = pretraining_state(read_checkpoint(last)).get("elapsed") if last.is_file() else None
    if not isinstance(elapsed, float):
        elapsed = meta.get("wall_seconds")  # exported policies before 2026-11-25 held it
    return {"iterations": int(meta.get("iterations", 0)),
            "wall_seconds": round(elapsed, 1) if isinstance(elapsed, float) else None,
            "validation": dict(meta.get("validation", {})), "policy": str(out / "policy.ckpt"),
            "best": str(best_path) if best_path.exists() else None,  # no validation ran: no best.ckpt
            "best_validation": float(score) if score is not None else None,
            "rank": 0, "already_done": True}
