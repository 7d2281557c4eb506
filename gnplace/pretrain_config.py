"""Pretraining's config: the pairs (``data``), the schedule and the learner's hyperparameters, from YAML.

Read and checked before :mod:`gnplace.pretrain` imports Lightning (about 10 s), so that a missing or
malformed config, or a bad ``--set``, is one line at once (``gnplace pretrain``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gnplace.exceptions import InvalidArgument
from gnplace.limits import finite_number
from gnplace.rl.config import LearnerConfig
from gnplace.shipped import shipped_path

__all__ = ["DataConfig", "ScheduleConfig", "PretrainConfig", "load_pretrain_config", "override_parts",
           "override_value", "DEFAULT_CONFIG", "MAX_RANDOM_CLUSTERS"]


#: The config of the shipped checkpoint (``configs/pretrain.yaml``; a wheel's copy: :mod:`gnplace.shipped`).
DEFAULT_CONFIG = shipped_path("configs/pretrain.yaml")


#: Most random clusters a pretraining run draws (the shipped config: 12).
MAX_RANDOM_CLUSTERS = 10_000


@dataclass(frozen=True)
class DataConfig:
    """Which (graph, cluster) pairs pretraining sees.

    Attributes:
        root (str): folder of the datasets: absolute, or relative to the working directory if it is
            there, else to the parent of the config file's folder (the repository, for
            ``configs/pretrain.yaml``) (default: ``"datasets"``).
        families (tuple[str, ...]): dataset folders under ``root`` (default: the three families).
        val_per_family (int): training graphs of each family held out for validation (default: 2).
        presets (tuple[str, ...]): cluster presets, or cluster files found as ``root`` is (default: all five).
        random_clusters (int): random clusters (default: 12).
        random_cluster_seed (int): seed of the first random cluster; the others follow (default: 1000).
        val_clusters (tuple[str, ...]): clusters of the validation pairs, presets or files as in ``presets``
            (default: k80x4, v100x8, tight4).
        max_nodes (int): most nodes of a decision graph (default: 1,000).
        modules (bool): coarsen graphs along their module hierarchy first, as the ``ppo`` search does
            (:func:`~gnplace.policy.features.decision_graph`) (default: :obj:`False`).
        anchored (bool): score each pair's placements relative to its best seen, as the ``ppo`` search
            does (:meth:`~gnplace.rl.problem.PlacementProblem.anchor`); with ``learner.prior`` this is
            pretraining in the search's regime: the policy learns which moves from a good placement pay
            (default: :obj:`False`).
        teacher_budget (int): simulator evaluations of the annealing search whose placement of each
            training pair is its best before training, the imitation target
            (:func:`~gnplace.rl.teacher.search_placement`); 0: ``auto``'s placement (default: 0).
        max_ops (int): train only on graphs of at most this many ops (the held-out ones are kept); 0: all
            (default: 0).
        val_left_out (bool): the training graphs that ``max_ops`` leaves out join the validation graphs.
            They are never trained on, and they are the larger graphs, as a test split's are; validation
            then weighs many pairs instead of a handful (default: :obj:`False`).
    """

    root: str = "datasets"
    families: tuple[str, ...] = ("cifar10", "ptb", "nmt")
    val_per_family: int = 2
    presets: tuple[str, ...] = ("k80x2", "k80x4", "v100x8", "tight4", "cpu_gpu")
    random_clusters: int = 12
    random_cluster_seed: int = 1000
    val_clusters: tuple[str, ...] = ("k80x4", "v100x8", "tight4")
    max_nodes: int = 1000
    modules: bool = False
    anchored: bool = False
    teacher_budget: int = 0
    max_ops: int = 0
    val_left_out: bool = False


@dataclass(frozen=True)
class ScheduleConfig:
    """How long pretraining runs and how often it validates and checkpoints.

    Attributes:
        iterations (int): iterations in all, imitation included (default: 550).
        pairs_per_step (int): pairs drawn per iteration (default: 4).
        steps_per_epoch (int): iterations between validations (default: 50).
        checkpoint_every_s (float): seconds between checkpoints (default: 120).
    """

    iterations: int = 550
    pairs_per_step: int = 4
    steps_per_epoch: int = 50
    checkpoint_every_s: float = 120.0


@dataclass(frozen=True)
class PretrainConfig:
    """Every hyperparameter of pretraining: data, schedule and the learner's.

    Attributes:
        data (DataConfig): the pairs.
        schedule (ScheduleConfig): length and cadence.
        learner (LearnerConfig): the learner's hyperparameters (:class:`gnplace.rl.config.LearnerConfig`).
        base (str): folder that relative data paths start from (the config file's repository).
    """

    data: DataConfig = field(default_factory=DataConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    learner: Any = None
    base: str = str(DEFAULT_CONFIG.parent.parent)

    def __post_init__(self) -> None:
        if self.learner is None:
            object.__setattr__(self, "learner", LearnerConfig())
        least = {"schedule": (self.schedule, {"iterations": 1, "pairs_per_step": 1, "steps_per_epoch": 1}),
                 "data": (self.data, {"val_per_family": 0, "random_clusters": 0, "random_cluster_seed": 0,
                                      "teacher_budget": 0, "max_ops": 0})}
        for section, (values, bounds) in least.items():  # the key at fault and its value: it named a group of three
            for key, bound in bounds.items():
                if getattr(values, key) < bound:
                    raise InvalidArgument(f"{section}: {key} must be >= {bound}, got {getattr(values, key)}")
        if self.data.random_clusters > MAX_RANDOM_CLUSTERS:  # each is drawn and digested before the first step
            raise InvalidArgument(f"data: random_clusters must be at most {MAX_RANDOM_CLUSTERS:,}, got "
                                  f"{self.data.random_clusters}")
        if self.data.val_left_out and not self.data.max_ops:
            raise InvalidArgument("data: val_left_out needs max_ops (the graphs it leaves out are validated on)")
        if self.data.max_nodes < 1:
            raise InvalidArgument(f"data: max_nodes must be >= 1, got {self.data.max_nodes}")
        if not self.data.val_clusters and self.data.val_per_family:  # they were held out of training, validated on none
            raise InvalidArgument(f"data: val_clusters is empty, so the {self.data.val_per_family} graphs of each "
                                  "family held out for validation (val_per_family) would be neither validated nor "
                                  "trained on; name a cluster, or set val_per_family: 0 to validate nothing")
        if not self.data.families:  # else refused later as "0 training pairs", which names no setting
            raise InvalidArgument("data: families is empty; name at least one dataset folder under data.root")
        if not self.data.root.strip():  # "" would be the working directory, where the families are not
            raise InvalidArgument("data: root is empty; name the folder of the datasets (default: datasets)")
        for name in ("families", "presets", "val_clusters"):
            listed = getattr(self.data, name)
            blank = [x for x in listed if not x.strip()]
            if blank:
                raise InvalidArgument(f"data: {name} holds an empty name ({list(listed)!r})")
            twice = sorted({x for x in listed if listed.count(x) > 1})
            if twice:
                raise InvalidArgument(f"data: {name} names {', '.join(map(str, twice))} more than once")
        taken = sorted(set(self.data.families) & RESERVED_FAMILY_NAMES)
        if taken:  # val/<family> would overwrite the overall metric, and val/best_vs_auto picks best.ckpt
            raise InvalidArgument(f"data: families names {taken[0]!r}, which validation logs as an overall figure "
                                  f"(val/{taken[0]}); rename that folder")
        every = self.schedule.checkpoint_every_s
        if not (isinstance(every, (int, float)) and finite_number(every) and every > 0):  # (10**400: no float)
            raise InvalidArgument(f"schedule: checkpoint_every_s must be a positive number of seconds, got {every!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain values (what a YAML config holds, and what checkpoints record)."""
        return {"data": _plain(dataclasses.asdict(self.data)), "schedule": _plain(dataclasses.asdict(self.schedule)),
                "learner": _plain(dataclasses.asdict(self.learner))}

    def digest(self) -> str:
        """SHA-256 of :meth:`to_dict`: two runs with the same digest (and seed) train the same policy."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()


#: Names no family may have: validation logs ``val/<family>`` beside the overall ``val/greedy_vs_auto``,
#: ``val/oom`` and ``val/best_vs_auto`` (:meth:`gnplace.train.PlacementLearner.on_validation_epoch_end`).
RESERVED_FAMILY_NAMES = frozenset({"greedy_vs_auto", "oom", "best_vs_auto"})


def _plain(value: Any) -> Any:
    """``value`` as a YAML file and a weights-only checkpoint hold it: lists for tuples, Python numbers for numpy's."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):  # np.int64(3) iterations: a checkpoint torch.load(weights_only=True) refuses
        return value.item()
    return value


def _section(cls: type, raw: Any, name: str) -> Any:
    if raw is None:
        return cls()
    if not isinstance(raw, Mapping):
        raise InvalidArgument(f"pretrain config: {name!r} must be a mapping, got {type(raw).__name__}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(known), key=str)  # (YAML keys may be numbers, null: mixed types)
    if unknown:
        raise InvalidArgument(f"pretrain config: unknown key {name}.{unknown[0]} (known: {', '.join(known)})")
    values = {key: _field_value(name, key, value, known[key].default) for key, value in raw.items()}
    try:
        return cls(**values)
    except InvalidArgument as err:  # the section's own checks (LearnerConfig's "need lr > 0"): named by the section
        said = str(err)
        raise InvalidArgument(said if said.startswith(f"{name}") else f"{name}: {said}") from None


def _field_value(name: str, key: str, value: Any, default: Any) -> Any:
    """``value`` as field ``name.key`` of default ``default`` holds it (a list as a tuple, 3e-4 as a float).

    Raises:
        InvalidArgument: naming the key, where ``value`` is of another type or out of range.
    """
    if isinstance(default, tuple):
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, list):
            raise InvalidArgument(f"pretrain config: {name}.{key} must be a list, got {value!r}")
        # a number may name a folder or file ("1"); null, true, a list or a mapping names none: [null] was refused
        # 10 s later as "datasets/None: no such graph file or folder", [[cifar10]] as "datasets/['cifar10']"
        odd = [v for v in value if isinstance(v, (bool, list, dict)) or v is None]
        if odd:
            raise InvalidArgument(f"pretrain config: {name}.{key} must be a list of names, got {odd[0]!r} in it")
        value = tuple(str(v) for v in value)
    elif isinstance(default, bool):
        if not isinstance(value, bool):
            raise InvalidArgument(f"pretrain config: {name}.{key} must be true or false, got {value!r}")
    elif isinstance(default, (int, float)) and not isinstance(default, bool):
        if isinstance(value, str):  # YAML 1.1 reads 3e-4 as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgument(f"pretrain config: {name}.{key} must be a number, got {value!r}")
        if isinstance(value, float) and value != value:  # NaN: no size at all ("too large" before)
            raise InvalidArgument(f"pretrain config: {name}.{key} must be a number, got nan")
        if not finite_number(value) or abs(value) > 2**62:  # (an int past a float's range: too large too)
            raise InvalidArgument(f"pretrain config: {name}.{key} is too large, got {value!r}")
        if isinstance(default, int) and not isinstance(default, bool) and value != int(value):
            raise InvalidArgument(f"pretrain config: {name}.{key} must be an integer, got {value!r}")
        value = type(default)(value)
    elif isinstance(default, str) and not isinstance(value, str):
        raise InvalidArgument(f"pretrain config: {name}.{key} must be a string, got {value!r}")
    return value


def override_parts(item: str) -> tuple[str, str, str] | None:
    """``SECTION.KEY=VALUE`` (a ``--set``) as ``(section, key, value text)``, or None where it has no ``=``.

    Spaces around the section and the key are dropped, as YAML reads ``lr : 3`` (``"learner.lr =3"`` was an
    unknown key ``learner.lr``); the key is ``""`` where the target has no dot.

    Examples:
        >>> override_parts("learner . lr =3e-4"), override_parts("learner"), override_parts("seed=1")
        (('learner', 'lr', '3e-4'), None, ('seed', '', '1'))
    """
    target, sep, text = item.partition("=")
    if not sep:
        return None
    section, _, key = target.partition(".")
    return section.strip(), key.strip(), text


def override_value(section: str, key: str, text: str) -> Any:
    """The value ``--set SECTION.KEY=TEXT`` gives ``SECTION.KEY``, as :func:`load_pretrain_config` reads it.

    ``learner.lr=1e-3`` and ``learner.lr=0.001`` give one value (YAML reads the first as a string), and so do
    ``data.families=ptb`` and ``data.families=[ptb]``.

    Raises:
        InvalidArgument: if the section or key is unknown, or the text is no value of the key.

    Examples:
        >>> override_value("learner", "lr", "1e-3") == override_value("learner", "lr", "0.001")
        True
    """
    from gnplace.limits import parse_yaml

    classes = {"data": DataConfig, "schedule": ScheduleConfig, "learner": LearnerConfig}
    if section not in classes:
        raise InvalidArgument(f"unknown section {section!r} (sections: data, schedule, learner)")
    known = {f.name: f for f in dataclasses.fields(classes[section])}
    if key not in known:
        raise InvalidArgument(f"pretrain config: unknown key {section}.{key} (known: {', '.join(known)})")
    value = parse_yaml(text, InvalidArgument, f"override {section}.{key}={text}")
    return _field_value(section, key, value, known[key].default)


def load_pretrain_config(
    path: str | os.PathLike[str] | None = None, overrides: Sequence[str] = (), *, seed: int | None = None
) -> PretrainConfig:
    """Read a pretraining config (YAML: sections ``data``, ``schedule``, ``learner``), then apply overrides.

    A key the file leaves out takes its class's default (:class:`DataConfig`, :class:`ScheduleConfig`,
    :class:`~gnplace.rl.config.LearnerConfig`), not ``configs/pretrain.yaml``'s value: the two differ in
    ``data.modules``, ``data.anchored``, ``schedule.iterations``, ``schedule.steps_per_epoch``,
    ``learner.samples``, ``learner.epochs``, ``learner.elite``, ``learner.elite_target``, ``learner.prior`` and
    ``learner.val_samples``. To change a few values of the shipped recipe, pass ``configs/pretrain.yaml`` (the
    default) with overrides, or copy the whole file. A file with no setting at all is refused.

    Args:
        path (str or Path, optional): the YAML file (default: ``configs/pretrain.yaml`` of the repository).
        overrides (Sequence[str], optional): ``SECTION.KEY=VALUE`` strings (YAML values), applied in order.
        seed (int, optional): overrides ``learner.seed``.

    Raises:
        InvalidArgument: if the file is missing or malformed, or names an unknown key.

    Examples:
        >>> c = load_pretrain_config(overrides=["schedule.iterations=5", "learner.samples=8"])
        >>> c.schedule.iterations, c.learner.samples
        (5, 8)
    """
    from gnplace.limits import parse_yaml, read_file

    if path is not None and not os.fspath(path).strip():  # Path("") is the working directory
        raise InvalidArgument("config path is empty; name the YAML config file (default: configs/pretrain.yaml)")
    path = Path(path) if path is not None else DEFAULT_CONFIG
    if path.is_dir():
        raise InvalidArgument(f"{path}: is a folder, not a config file")
    if path.exists() and not path.is_file():  # (it said "no such config file" of a pipe that is there)
        raise InvalidArgument(f"{path}: is not a regular file (a device or a pipe), not a config file")
    if not path.is_file():
        raise InvalidArgument(f"{path}: no such config file")
    try:
        text = read_file(path, InvalidArgument, "config file").decode("utf-8")
    except UnicodeDecodeError as err:
        raise InvalidArgument(f"{path}: not a readable YAML config (not UTF-8 text)") from err
    raw = parse_yaml(text, InvalidArgument, str(path)) or {}
    if not isinstance(raw, dict):
        raise InvalidArgument(f"{path}: a pretraining config is a mapping of sections data, schedule, learner")
    unknown = sorted(set(raw) - {"data", "schedule", "learner"}, key=str)  # (1: and foo: are no order otherwise)
    if unknown:
        raise InvalidArgument(f"{path}: unknown section {unknown[0]!r} (sections: data, schedule, learner)")
    for k in ("data", "schedule", "learner"):
        if raw.get(k) is not None and not isinstance(raw[k], Mapping):
            raise InvalidArgument(f"{path}: section {k!r} must be a mapping of keys, got {type(raw[k]).__name__}")
    sections = {k: dict(raw.get(k) or {}) for k in ("data", "schedule", "learner")}
    if not any(sections.values()):  # a truncated file ran as the code's defaults, which are not the shipped recipe's
        raise InvalidArgument(f"{path}: holds no settings (empty, or comments or empty sections alone); name the "
                              "values to run with, as configs/pretrain.yaml does")
    for item in overrides:
        parts = override_parts(item)
        if parts is None or parts[0] not in sections or not parts[1]:
            raise InvalidArgument(
                f"override {item!r}: expected SECTION.KEY=VALUE with SECTION data, schedule or learner"
            )
        section, key, text = parts
        sections[section][key] = parse_yaml(text, InvalidArgument, f"override {item!r}")
    if seed is not None:
        sections["learner"]["seed"] = int(seed)
    learner = _section(LearnerConfig, sections["learner"], "learner")
    return PretrainConfig(
        data=_section(DataConfig, sections["data"], "data"),
        schedule=_section(ScheduleConfig, sections["schedule"], "schedule"),
        learner=learner, base=str(path.resolve().parent.parent),
    )
