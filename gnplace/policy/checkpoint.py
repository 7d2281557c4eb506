"""Policy checkpoints: the weights, the network's shape and the features it was trained with.

A gnplace policy checkpoint is a ``torch.save`` file of plain data only, so it loads with
``torch.load(..., weights_only=True)`` (no pickled code runs)::

    {"format": "gnplace-policy", "version": 1,
     "policy": {hidden, layers, head, dynamic_features, alpha},   # PolicyConfig
     "features": {"node": [...], "edge": [...], "device": [...], "dynamic": [...], "op_kinds": [...]},
     "state_dict": {name: tensor},
     "meta": {...}}                                                # how it was made: plain values

A policy works only with the features it was trained with, so loading compares the feature lists
with this gnplace's and refuses a checkpoint made for others. :func:`load_policy` also reads the
Lightning checkpoints that training writes (``last.ckpt``: the learner's ``state_dict`` under
``policy.`` and its hyperparameters), so a run's checkpoint can be used before it is exported.

Writes are atomic: the file is written next to its destination and renamed over it, so a kill
leaves either the old checkpoint or the new one, never half of one. Reads check every entry of the file
against the CRC-32 that ``torch.save`` recorded for it (``torch.load`` does not), so a flipped byte in
the weights is refused as corrupt rather than loaded as a slightly different policy.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import torch

from gnplace.exceptions import InvalidCheckpoint
from gnplace.opkinds import OP_KINDS
from gnplace.policy.features import DEVICE_FEATURES, DYNAMIC_FEATURES, EDGE_FEATURES, NODE_FEATURES
from gnplace.policy.gnn import PlacementPolicy, PolicyConfig

__all__ = ["FORMAT", "VERSION", "feature_set", "save_policy", "load_policy", "read_checkpoint", "atomic_torch_save",
           "is_training_checkpoint", "pretraining_state", "check_training_weights", "check_training_state",
           "weights_mismatch"]

FORMAT = "gnplace-policy"
VERSION = 1


def feature_set() -> dict[str, list[str]]:
    """The names of every feature the policy sees in this version of gnplace, by kind."""
    return {"node": list(NODE_FEATURES), "edge": list(EDGE_FEATURES), "device": list(DEVICE_FEATURES),
            "dynamic": list(DYNAMIC_FEATURES), "op_kinds": list(OP_KINDS)}


def atomic_torch_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """``torch.save(obj)`` to a temporary file beside ``path``, then rename it over ``path`` (a link's target).

    What was at ``path`` stays as it was when the write fails, and the temporary file is removed; a file replaced
    keeps its permission bits (a file made anew has the umask's). The temporary
    file is named as :func:`~gnplace.graph_io.write_atomically` names its own (``NAME.PID.RANDOM.tmp``), so that
    one a ``kill -9`` left mid-write (an interval's ``last.ckpt``: megabytes, one more each kill) is removed by
    a later write of ``path`` (:func:`~gnplace.graph_io.remove_stale_temporaries`); ``.NAME.RANDOM`` stayed forever.

    Raises:
        OSError: naming ``path``, if the file cannot be written (a full disk: ``No space left on device``), also
            where torch's archive writer met the error and raised its own ``RuntimeError`` (``unexpected pos``).
    """
    from gnplace.graph_io import fitting_name, keep_permissions, regular_target, remove_stale_temporaries

    given, path = path, regular_target(Path(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = f".{os.getpid()}.{os.urandom(4).hex()}.tmp"  # the pid alone is shared by other hosts' processes
    tmp = path.with_name(fitting_name(path.name, len(tag)) + tag)
    try:
        # an ordinary file's mode (the umask's), made here alone (O_EXCL: never another's file, nor a link's target)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as handle:
            torch.save(obj, handle)
            handle.flush()
            os.fsync(handle.fileno())
        keep_permissions(tmp, path)  # a private last.ckpt stays so
        os.replace(tmp, path)
    except BaseException as err:
        if not isinstance(err, FileExistsError):  # (the name another write took: not ours to remove)
            tmp.unlink(missing_ok=True)
        failed = _write_error(err)
        if failed is None:
            raise
        raise OSError(failed.errno, failed.strerror or str(failed), os.fspath(given)) from err
    remove_stale_temporaries(path)  # what a killed write of this file left
    return path


def _write_error(err: BaseException) -> OSError | None:
    """The :class:`OSError` that failed a write: ``err`` itself, or the one a ``RuntimeError`` of torch's met.

    torch's archive writer, given a file that a full disk stopped taking bytes, checks its position as it closes
    and raises ``RuntimeError: [enforce fail at inline_container.cc] . unexpected pos 704 vs 598`` while the
    ``OSError`` (``No space left on device``) is handled: a traceback, status 1, nothing named the disk.
    """
    if isinstance(err, OSError):
        return err
    if isinstance(err, RuntimeError) and isinstance(err.__context__, OSError):
        return err.__context__
    return None


def save_policy(path: str | os.PathLike[str], policy: PlacementPolicy, meta: dict[str, Any] | None = None) -> Path:
    """Write ``policy`` as a gnplace policy checkpoint (atomically); ``meta`` must be plain values.

    Examples:
        >>> import tempfile, torch
        >>> _ = torch.manual_seed(0)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = save_policy(f"{d}/p.ckpt", PlacementPolicy(), {"steps": 3})
        ...     policy, meta = load_policy(f"{d}/p.ckpt")
        >>> meta["steps"], policy.config.hidden
        (3, 64)
    """
    state = {k: v.detach().cpu().clone() for k, v in policy.state_dict().items()}
    return atomic_torch_save({
        "format": FORMAT, "version": VERSION, "policy": asdict(policy.config), "features": feature_set(),
        "state_dict": state, "meta": dict(meta or {}),
    }, path)


def is_training_checkpoint(data: dict[str, Any]) -> bool:
    """Whether checkpoint ``data`` is a training run's Lightning checkpoint (``last.ckpt``), not a policy file.

    Such a file holds its weights under ``state_dict`` and the run's own ``gnplace`` record: training's,
    pretraining's, a search's or fine-tuning's. ``load_policy`` reads its policy, ``--checkpoint`` takes it as a
    ``gnplace-policy`` one, and resuming needs it.

    Examples:
        >>> is_training_checkpoint({"state_dict": {}, "gnplace": {"iteration": 3}})
        True
        >>> is_training_checkpoint({"format": FORMAT, "state_dict": {}})
        False
    """
    return isinstance(data.get("state_dict"), dict) and isinstance(data.get("gnplace"), dict)


def read_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load any checkpoint file with ``weights_only=True``; a missing, truncated or corrupt one is one clear error.

    Raises:
        InvalidCheckpoint: if the file is missing, is not a torch checkpoint in the zip format (the legacy one
            has no checksums), or holds anything but plain data.
    """
    from gnplace.limits import MAX_FILE_BYTES, check_regular_file

    path = Path(path)
    check_regular_file(path, "checkpoint file", InvalidCheckpoint)
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InvalidCheckpoint(f"{path}: {size} bytes is over the limit of {MAX_FILE_BYTES} for a checkpoint")
    entries = _check_crc(path)
    if entries is None:  # torch's legacy format carries no checksums: a flipped byte loaded as other weights
        raise InvalidCheckpoint(f"{path}: not a readable checkpoint (truncated, corrupt or unsafe: not a zip archive; "
                                "gnplace reads torch's zip format, whose CRC-32 it checks)")
    if not any(name == "data.pkl" or name.endswith("/data.pkl") for name in entries):
        held = f"{len(entries)} {'entry' if len(entries) == 1 else 'entries such as'} {entries[0]!r}" if entries \
            else "no entries at all"
        raise InvalidCheckpoint(f"{path}: a zip archive, not a torch checkpoint (it holds no data.pkl; {held})")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises many kinds (UnpicklingError, RuntimeError, EOFError, ...)
        text = str(err).strip()
        reason = text.splitlines()[0].split(". ")[0] if text else type(err).__name__
        raise InvalidCheckpoint(
            f"{path}: not a readable checkpoint (truncated, corrupt or unsafe: {reason[:120]})"
        ) from err
    if not isinstance(data, dict):
        raise InvalidCheckpoint(f"{path}: not a gnplace checkpoint (holds a {type(data).__name__})")
    return data


def _check_crc(path: Path) -> list[str] | None:
    """Refuse a zip-format torch checkpoint any of whose entries fails the CRC-32 recorded for it.

    A file that is not a readable zip archive (truncated, or torch's legacy format) is refused by the caller;
    an entry of an archive that zipfile cannot read at all (flagged encrypted, not the compressed data its
    header says: a ``RuntimeError`` or ``zlib.error``) is refused as corrupt too.

    Returns:
        list[str] or None: the names of the archive's entries, or None if the file is no readable zip archive.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            _refuse_packed_entries(path, archive)
            bad = archive.testzip()
            names = archive.namelist()
    except InvalidCheckpoint:  # (a ValueError too)
        raise
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError):
        return None
    except (RuntimeError, zlib.error) as err:
        text = str(err).strip()
        reason = text.splitlines()[0][:120] if text else type(err).__name__
        raise InvalidCheckpoint(f"{path}: corrupt checkpoint (an entry cannot be read: {reason}); use another copy "
                                "or retrain") from err
    if bad is not None:
        raise InvalidCheckpoint(f"{path}: corrupt checkpoint (its entry {bad} fails its CRC-32 check); use another "
                                "copy or retrain")
    return names


def _refuse_packed_entries(path: Path, archive: zipfile.ZipFile) -> None:
    """Refuse an archive whose entries unpack to more bytes than the file holds, before any is read.

    ``torch.save`` stores its entries uncompressed, and ``torch.load`` allocates each entry's unpacked size: a
    1 MB file of deflated zeros was a 1 GiB tensor (a 20 MB one, 20 GiB: the machine out of memory), and its
    CRC check alone inflated all of it first.

    Raises:
        InvalidCheckpoint: naming both sizes.
    """
    unpacked = sum(entry.file_size for entry in archive.infolist())
    size = path.stat().st_size
    if unpacked > size:
        raise InvalidCheckpoint(f"{path}: its entries unpack to {unpacked} bytes, more than the file's {size}: not "
                                "a checkpoint torch wrote (it stores them uncompressed); refused unread")


def _unseeded_policy(config: PolicyConfig) -> PlacementPolicy:
    """A :class:`PlacementPolicy` of ``config`` whose initial weights do not matter (shapes, or loaded over).

    Built under a fixed seed and with torch's global generator restored after, so that reading a
    checkpoint does not advance the caller's random stream (``get_placer("policy")`` did, by the
    draws of its layers' initialisation).
    """
    from gnplace.seed import seeded_torch

    with seeded_torch(0):
        return PlacementPolicy(config)


def weights_mismatch(build: Callable[[], torch.nn.Module], state: dict[str, torch.Tensor]) -> str:
    """How the weights ``state`` read from a file miss those of the network ``build`` makes; ``""`` where they fit.

    The network is built on the meta device (shapes, no values, no memory), so that a file's recorded shape is
    checked against the weights it holds before anything of that shape is allocated: a policy's ``hidden: 8192,
    layers: 64`` in a 300 KB file was 13 billion weights (48.5 GiB) made before its weights were compared, a
    Placeto network's 3.9 GiB. Once they fit, the network is no larger than the weights already read.
    """
    with torch.device("meta"):
        expected = build().state_dict()
    return _state_mismatch(expected, state)


def check_training_weights(path: Path, state: dict[str, Any], config: PolicyConfig, whose: str) -> None:
    """Refuse a training checkpoint's weights (``policy.*`` of its ``state_dict``) that do not fit ``config``.

    Checked before Lightning loads them, which would raise a size mismatch traceback. ``whose`` names the
    policy in the message (``"the config's policy"``).

    Raises:
        InvalidCheckpoint: one line: a weight missing, of another shape or dtype, non-finite, or extra.
    """
    mine = _unseeded_policy(config).state_dict()
    for name, tensor in mine.items():
        saved = state.get(f"policy.{name}")
        if not isinstance(saved, torch.Tensor) or saved.shape != tensor.shape or saved.dtype != tensor.dtype:
            found = "missing" if saved is None else \
                f"{tuple(getattr(saved, 'shape', ()))} {getattr(saved, 'dtype', type(saved).__name__)}"
            raise InvalidCheckpoint(f"{path}: the weights do not fit {whose} (policy.{name} is {found}, "
                                    f"expected {tuple(tensor.shape)} {tensor.dtype}); cannot resume from it")
        if tensor.is_floating_point() and not bool(torch.isfinite(saved).all()):
            raise InvalidCheckpoint(f"{path}: policy.{name} holds non-finite weights (a run that diverged); cannot "
                                    "resume from it")
    extra = sorted(k for k in state if isinstance(k, str) and k.startswith("policy.")
                   and k.removeprefix("policy.") not in mine)
    if extra:
        raise InvalidCheckpoint(f"{path}: the weights do not fit {whose} ({extra[0]} is not one of its weights); "
                                "cannot resume from it")


def _pair_states(problems: Any) -> bool:
    """Whether ``problems`` maps pair indices (ints, or their digits) to mappings, as the pairs' state does.

    A list of pairs, a key ``"x"`` or a pair's state as a list were an ``AttributeError`` or ``ValueError``
    traceback on resuming.
    """
    return isinstance(problems, dict) and all(
        (isinstance(key, int) and not isinstance(key, bool) or isinstance(key, str) and key.isdigit())
        and isinstance(state, dict) for key, state in problems.items())


def check_training_state(path: Path, data: dict[str, Any], config: PolicyConfig,
                         max_epochs: int | None = None) -> None:
    """Refuse a training checkpoint whose loop or optimizer state Lightning could not restore, in one line.

    Lightning restores them inside ``fit``, after the run's log folder is made: a damaged ``loops``
    was a ``KeyError`` traceback, an Adam moment of another shape a ``RuntimeError`` at the first step,
    the pairs' state a list an ``AttributeError``; without the pairs' state a search spent its budget
    anew. The optimizer is Adam over the policy's parameters, in their order.

    Args:
        path: the checkpoint's file, named in the error.
        data: what it holds (``torch.load``'s dictionary).
        config: the policy's shape, which Adam's moments must have.
        max_epochs: the run's ``Trainer(max_epochs=...)``, past which its loop's epoch count is damaged
            (Lightning's ``MisconfigurationException``); ``None`` for a run of no epoch limit.

    Raises:
        InvalidCheckpoint: naming the damaged section.
    """
    def damaged(section: str) -> InvalidCheckpoint:
        return InvalidCheckpoint(f"{path}: its {section} is missing or damaged; cannot resume from it")

    loops = data.get("loops")
    if not isinstance(loops, dict) or not isinstance(loops.get("fit_loop"), dict):
        raise damaged("training loop's state (loops.fit_loop)")
    section = _damaged_loop_section(loops["fit_loop"])
    if section is not None:
        raise damaged(f"training loop's state (loops.fit_loop, {section})")
    epochs = loops["fit_loop"].get("epoch_progress", {}).get("current", {}).get("completed", 0)
    if max_epochs is not None and epochs > max_epochs:
        raise damaged(f"training loop's state (loops.fit_loop: {epochs} epochs done, the run has {max_epochs})")
    version = data.get("pytorch-lightning_version")
    if not isinstance(version, str) or not _parses_as_version(version):  # an InvalidVersion traceback
        raise damaged("Lightning version (pytorch-lightning_version)")
    callbacks = data.get("callbacks")  # Lightning reads each callback's state by its key: a list was a traceback
    if callbacks is not None and not (isinstance(callbacks, dict) and all(isinstance(state, dict)
                                                                           for state in callbacks.values())):
        raise damaged("callbacks' state")
    pairs = data.get("PlacementDataModule")  # each pair's best placement and evaluations (gnplace.train)
    ranks = pairs.get("ranks") if isinstance(pairs, dict) else None
    if not isinstance(pairs, dict) or not _pair_states(pairs.get("problems", {})) or (
            ranks is not None and not (isinstance(ranks, list) and all(_pair_states(rank) for rank in ranks))):
        raise damaged("pairs' state (PlacementDataModule)")
    states = data.get("optimizer_states")
    if not isinstance(states, list) or len(states) != 1:
        raise damaged("optimizer state")
    shapes = [tuple(p.shape) for p in _unseeded_policy(config).parameters()]
    state, groups = states[0].get("state") if isinstance(states[0], dict) else None, \
        states[0].get("param_groups") if isinstance(states[0], dict) else None
    if not isinstance(state, dict) or not isinstance(groups, list):
        raise damaged("optimizer state")
    for index, entry in state.items():
        if not isinstance(index, int) or not 0 <= index < len(shapes) or not isinstance(entry, dict):
            raise damaged(f"optimizer state (entry {index!r})")
        for name, value in entry.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and tuple(value.shape) != shapes[index]:
                raise damaged(f"optimizer state ({name} of parameter {index} is {tuple(value.shape)}, "
                              f"the parameter {shapes[index]})")
        # Adam's moments and step count: one missing, or no tensor, was a KeyError or AttributeError traceback
        # ('dict' object has no attribute 'lerp_') at the resumed run's first step
        for name in ADAM_STATE:
            value = entry.get(name)
            if not (isinstance(value, torch.Tensor) and value.is_floating_point()
                    and tuple(value.shape) == (shapes[index] if name != "step" else ())):
                shown = "missing" if value is None else f"a {type(value).__name__}" \
                    if not isinstance(value, torch.Tensor) else f"{tuple(value.shape)} {value.dtype}"
                raise damaged(f"optimizer state ({name} of parameter {index} is {shown})")
    # the parameters' indices, each once in a group: another list was a TypeError or ValueError traceback in torch
    listed = [group.get("params") if isinstance(group, dict) else None for group in groups]
    indices = [i for params in listed for i in (params if isinstance(params, list) else [None])]
    whole = [i for i in indices if isinstance(i, int) and not isinstance(i, bool)]
    if len(whole) != len(indices) or sorted(whole) != list(range(len(shapes))):
        raise damaged(f"optimizer state (its parameter groups do not list each of the {len(shapes)} parameters' "
                      "indices once)")
    for group in groups:  # what Adam's step reads of its group (a KeyError 'lr' traceback; torch fills in the rest)
        betas = group.get("betas")
        if not (all(_finite_real(group.get(key)) for key in ("lr", "eps", "weight_decay"))
                and isinstance(betas, list | tuple) and len(betas) == 2 and all(map(_finite_real, betas))):
            raise damaged("optimizer state (a parameter group's lr, betas, eps or weight_decay)")
    learner = data.get("gnplace")  # (train.fit's resume has not checked it is there)
    features = learner.get("features") if isinstance(learner, dict) else None
    if features is not None and features != feature_set():  # resumed, the weights learnt under others trained on
        mine = feature_set()
        diff = sorted(str(k) for k in {*mine, *features} if features.get(k) != mine.get(k)) \
            if isinstance(features, dict) else []
        raise InvalidCheckpoint(f"{path}: made for other policy features ({', '.join(diff) or 'all'} differ); cannot "
                                "resume from it with this gnplace version")


def _damaged_loop_section(saved: dict[str, Any]) -> str | None:
    """The first section of a saved ``fit_loop`` state that Lightning could not restore, or ``None``.

    Each section saved must hold what this Lightning's fit loop holds (a fresh ``_FitLoop``'s ``state_dict()`` is
    the template): the same nested mappings, and counts where it has counts (whole numbers >= 0). A section left
    out is one Lightning itself skips (an older checkpoint's); a count missing was a ``KeyError`` traceback, a
    mapping as a list a ``TypeError``, and a count as text a ``TypeError`` at the resumed run's next step.
    """
    import types

    from lightning.pytorch.loops import _FitLoop

    try:  # a loop of no trainer: what Lightning 2.6 builds from its arguments alone
        template = _FitLoop(types.SimpleNamespace(), min_epochs=None, max_epochs=None).state_dict()  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - a later Lightning's loop that needs its trainer: Lightning's own checks then
        return None

    def fits(value: Any, expected: Any) -> bool:
        if isinstance(expected, dict):
            return isinstance(value, dict) and all(key in value and fits(value[key], entry)
                                                   for key, entry in expected.items())
        if isinstance(expected, bool):
            return isinstance(value, bool)
        if isinstance(expected, int):
            return isinstance(value, int) and not isinstance(value, bool) and value >= 0
        return True

    for name, expected in template.items():
        if name in saved and not fits(saved[name], expected):
            return name
    return None


def _parses_as_version(text: str) -> bool:
    """Whether ``text`` is a version ``packaging`` reads (Lightning compares the checkpoint's with its own)."""
    from packaging.version import InvalidVersion, Version

    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def _finite_real(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (not a bool; 10**400 is none)."""
    from gnplace.limits import finite_number

    return isinstance(value, int | float) and not isinstance(value, bool) and finite_number(value)


#: What Adam keeps of each parameter (torch 2.x): its step count and its two moments, of the parameter's shape.
ADAM_STATE = ("step", "exp_avg", "exp_avg_sq")


def _state_mismatch(expected: dict[str, torch.Tensor], given: dict[str, torch.Tensor]) -> str:
    """How the weights ``given`` miss the policy's ``expected`` ones: missing and extra names, another shape; ``""``.

    Examples:
        >>> _state_mismatch({"a": torch.zeros(2), "b": torch.zeros(1)}, {"a": torch.zeros(3), "c": torch.zeros(1)})
        'missing b; unexpected c; a has shape [3], the policy needs [2]'
    """
    def listed(names: list[str]) -> str:
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")

    problems = []
    missing = [name for name in expected if name not in given]
    if missing:
        problems.append(f"missing {listed(missing)}")
    unexpected = [name for name in given if name not in expected]
    if unexpected:
        problems.append(f"unexpected {listed(unexpected)}")
    for name, tensor in expected.items():
        found = given.get(name)
        if found is not None and found.shape != tensor.shape and not (tensor.dim() == 0 and found.shape == (1,)):
            problems.append(f"{name} has shape {list(found.shape)}, the policy needs {list(tensor.shape)}")
            break
    return "; ".join(problems)


def _policy_config(raw: Any, path: Path) -> PolicyConfig:
    names = {f.name for f in fields(PolicyConfig)}
    if not isinstance(raw, dict):
        raise InvalidCheckpoint(f"{path}: the policy's shape is missing")
    try:
        return PolicyConfig(**{k: raw[k] for k in names if k in raw})
    except (TypeError, ValueError) as err:
        raise InvalidCheckpoint(f"{path}: the policy's shape is malformed ({err})") from err


def pretraining_state(data: dict[str, Any]) -> dict[str, Any]:
    """What a pretraining run keeps in its Lightning checkpoint ``data`` beside the weights, or ``{}``.

    The state of its exporter callback (:class:`gnplace.pretrain_callbacks.ExportPolicy`): the run's ``config``,
    its ``elapsed`` wall seconds, its ``best_score``, its ``pairs`` digest and the ``recipe`` of its imitation
    targets (:func:`gnplace.pretrain_pairs.imitation_recipe`; absent in runs made before it was kept).
    """
    callbacks = data.get("callbacks")
    states = callbacks.values() if isinstance(callbacks, dict) else []
    return next((s for s in states if isinstance(s, dict) and isinstance(s.get("config"), dict)), {})


def _training_config(data: dict[str, Any], hyper: Any) -> dict[str, Any]:
    """How a training run's Lightning checkpoint was trained, as an exported policy's ``meta["config"]`` says.

    A pretraining run records its whole config (in its exporter's callback state); a search or fine-tuning
    run records its learner's settings (Lightning's hyperparameters) and its problem's (``gnplace_run``).
    Zero-shot placement reads the sampling prior and the decision graph's settings from it, so a run's
    ``last.ckpt`` decodes as the policy exported from the same run does.
    """
    recorded = pretraining_state(data).get("config")
    if recorded is not None:
        return dict(recorded)
    run = data.get("gnplace_run")
    settings = run.get("settings") if isinstance(run, dict) else None
    settings = settings if isinstance(settings, dict) else {}
    return {"learner": dict(hyper) if isinstance(hyper, dict) else {},
            "data": {"modules": settings.get("modules") is True, "anchored": settings.get("anchor") is True}}


def load_policy(path: str | os.PathLike[str]) -> tuple[PlacementPolicy, dict[str, Any]]:
    """The policy in ``path`` (a gnplace policy checkpoint or a training run's Lightning checkpoint), and its meta.

    The policy is in evaluation mode.

    Raises:
        InvalidCheckpoint: if the file is unreadable, foreign (neither kind), made for other features or
            for another network shape.
    """
    path = Path(path)
    data = read_checkpoint(path)
    if data.get("format") == FORMAT:
        if data.get("version") != VERSION:
            raise InvalidCheckpoint(
                f"{path}: checkpoint version {data.get('version')!r}; this gnplace reads {VERSION}"
            )
        trained = data.get("features")
        if not isinstance(trained, dict) or "state_dict" not in data:
            raise InvalidCheckpoint(f"{path}: an incomplete gnplace policy checkpoint (no feature list or weights)")
        if trained != feature_set():
            mine = feature_set()
            diff = sorted(str(k) for k in {*mine, *trained} if trained.get(k) != mine.get(k))  # extra kinds too
            raise InvalidCheckpoint(
                f"{path}: made for other policy features ({', '.join(diff) or 'all'} differ); retrain or use a "
                "checkpoint of this gnplace version"
            )
        config, state, meta = _policy_config(data.get("policy"), path), data.get("state_dict"), data.get("meta", {})
    elif is_training_checkpoint(data):
        hp = data.get("hyper_parameters", {})
        config = _policy_config(hp, path)
        state = {k.removeprefix("policy."): v for k, v in data["state_dict"].items()
                 if isinstance(k, str) and k.startswith("policy.")}
        meta = {"source": "training checkpoint", "iteration": data["gnplace"].get("iteration"),
                "config": _training_config(data, hp)}
        trained = data["gnplace"].get("features")
        if trained is not None and trained != feature_set():
            raise InvalidCheckpoint(f"{path}: made for other policy features; retrain with this gnplace version")
    elif isinstance(data.get("format"), str) and data["format"].startswith("gnplace-"):
        # another of gnplace's files (a Placeto checkpoint): "not a gnplace checkpoint", as a foreign file, was wrong
        raise InvalidCheckpoint(f"{path}: a {data['format'][:60]!r} checkpoint, not a policy one ({FORMAT!r}, or a "
                                "training run's last.ckpt)")
    else:
        raise InvalidCheckpoint(f"{path}: not a gnplace checkpoint (no policy weights in it)")
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              and v.layout == torch.strided and v.is_floating_point()
                                              and v.device.type == "cpu"  # loaded there: not "meta", no data
                                              for k, v in state.items()):  # dense real tensors by name, as saved
        raise InvalidCheckpoint(f"{path}: the policy weights are missing or malformed")
    if config.dynamic_features != len(DYNAMIC_FEATURES):  # the features' names match; their count is the shape's
        raise InvalidCheckpoint(f"{path}: the policy's shape has {config.dynamic_features} dynamic features; this "
                                f"gnplace computes {len(DYNAMIC_FEATURES)}")
    broken = sorted(k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all()))
    if broken:
        raise InvalidCheckpoint(f"{path}: the policy weights are not finite (NaN or infinity in {broken[0]}"
                                f"{f' and {len(broken) - 1} more' if len(broken) > 1 else ''}); retrain or use "
                                "another checkpoint")
    mismatch = weights_mismatch(lambda: PlacementPolicy(config), state)  # before the policy is built
    if mismatch:
        raise InvalidCheckpoint(f"{path}: the weights do not fit the policy's shape ({mismatch})")
    policy = _unseeded_policy(config)  # its weights are the checkpoint's, of the sizes read from the file
    try:
        policy.load_state_dict(state)
    except RuntimeError as err:
        text = " ".join(str(err).split())
        raise InvalidCheckpoint(f"{path}: the weights do not fit the policy's shape ({text[:160]})") from err
    log_alpha = policy.log_alpha.detach()
    if not bool(torch.isfinite(log_alpha.exp())):  # finite, but its exp (the EFT rule's weight) made NaN logits
        raise InvalidCheckpoint(f"{path}: the policy's log_alpha is {float(log_alpha):.4g}, so its EFT weight "
                                "exp(log_alpha) overflows; retrain or use another checkpoint")
    policy.eval()
    return policy, dict(meta) if isinstance(meta, dict) else {}
