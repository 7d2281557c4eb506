"""The policy checkpoints ``policy`` and the searches load: the shipped ones, a cached load, how one was pretrained.

:data:`SHIPPED_CHECKPOINT` is the pretrained policy (``checkpoints/gnplace-base.ckpt``) and
:data:`SHIPPED_CONSTRUCTORS` the constructors distilled from long searches that
:class:`~gnplace.rl.zeroshot.PolicyPlacer` consults beside it; :func:`cached_policy` loads a checkpoint once per file
version, :func:`pretraining` reads how it was trained from its meta, and :func:`constructor_paths` reads the
``constructor`` option (a path, several, or none).
"""

from __future__ import annotations

import copy
import functools
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gnplace.exceptions import InvalidArgument, InvalidCheckpoint
from gnplace.limits import as_float
from gnplace.shipped import shipped_path

__all__ = ["SHIPPED_CHECKPOINT", "SHIPPED_CONSTRUCTOR", "SHIPPED_CONSTRUCTORS", "cached_policy", "constructor_paths",
           "pretraining"]

#: The pretrained policy gnplace ships (``checkpoints/gnplace-base.ckpt``; a wheel's copy: :mod:`gnplace.shipped`).
SHIPPED_CHECKPOINT = shipped_path("checkpoints/gnplace-base.ckpt")

#: The constructor gnplace ships: a policy distilled from long searches (``configs/constructor.yaml``).
SHIPPED_CONSTRUCTOR = shipped_path("checkpoints/gnplace-construct.ckpt")

#: The constructors ``policy`` consults by default: the first, and a second taught on the searches of the cifar10 and
#: ptb training graphs (``configs/constructor-cifar10-ptb.yaml``); their placements differ, and the best of both
#: beats either alone (model card).
SHIPPED_CONSTRUCTORS = (SHIPPED_CONSTRUCTOR, shipped_path("checkpoints/gnplace-construct-cifar10-ptb.ckpt"))


@functools.lru_cache(maxsize=4)
def _load(path: str, stamp: tuple[int, int]) -> tuple[Any, dict[str, Any]]:
    from gnplace.policy.checkpoint import load_policy

    return load_policy(path)


def cached_policy(path: str | os.PathLike[str], mode: str | None = None) -> tuple[Any, dict[str, Any]]:
    """The policy in ``path`` and its meta, loaded once per file version (size and mtime).

    The policy is the cache's own (every caller decodes with the one module: train a copy, not it); the meta is
    each caller's copy, so a caller changing it changes no other caller's.

    ``mode`` (``"construct"`` or ``"refine"``; default: either) is the MDP the caller runs the policy in:
    a policy trained in the other one read other dynamic features, of the same width, in its weights.

    Raises:
        InvalidCheckpoint: if the file is missing or unreadable (see :func:`~gnplace.policy.checkpoint.load_policy`),
            or its policy was trained in another ``mode``.
    """
    path = Path(path)
    try:
        stat = path.stat()
    except OSError:
        hint = " (the shipped checkpoint is missing from this install: reinstall gnplace, or pass another checkpoint)" \
            if path in (SHIPPED_CHECKPOINT, *SHIPPED_CONSTRUCTORS) else ""
        raise InvalidCheckpoint(f"{path}: no such checkpoint file{hint}") from None
    policy, meta = _load(str(path.resolve()), (stat.st_size, stat.st_mtime_ns))
    trained = pretraining(meta)["mode"]
    if mode is not None and trained != mode:
        raise InvalidCheckpoint(f"{path}: a policy trained with mode={trained}, whose dynamic features are not "
                                f"those of mode={mode}; use a checkpoint trained with mode={mode}")
    return policy, copy.deepcopy(meta)


def pretraining(meta: dict[str, Any]) -> dict[str, Any]:
    """How a checkpoint was trained, from its meta: the sampling ``prior``, ``modules``, ``anchored`` and ``mode``.

    ``mode`` is the learner's MDP, ``"construct"`` unless the meta says ``"refine"`` (runs of gnplace that
    did not record it trained constructively).
    """
    def section(parent: Any, key: str) -> dict[str, Any]:
        value = parent.get(key) if isinstance(parent, dict) else None
        return value if isinstance(value, dict) else {}

    config = section(meta, "config")
    learner, data = section(config, "learner"), section(config, "data")
    prior = as_float(learner.get("prior", 0.0))  # None: no number (10**400 in a corrupt file)
    return {"prior": prior if prior is not None and math.isfinite(prior) and prior > 0 else 0.0,
            "modules": data.get("modules") is True, "anchored": data.get("anchored") is True,
            "mode": "refine" if learner.get("mode") == "refine" else "construct"}


def constructor_paths(constructor: Any) -> tuple[Path, ...]:
    """The constructor checkpoints named by ``constructor``, :class:`~gnplace.rl.zeroshot.PolicyPlacer`'s option.

    ``None``: the shipped ones (:data:`SHIPPED_CONSTRUCTORS`); ``"none"``: ``()``.

    Examples:
        >>> [p.name for p in constructor_paths("a.ckpt, b.ckpt")], constructor_paths("none")
        (['a.ckpt', 'b.ckpt'], ())
    """
    if constructor is None:
        return SHIPPED_CONSTRUCTORS
    if isinstance(constructor, (str, os.PathLike)):
        text = os.fspath(constructor)
        parts = [text] if isinstance(constructor, os.PathLike) else [part.strip() for part in text.split(",")]
    elif isinstance(constructor, Sequence):
        parts = [os.fspath(part) if isinstance(part, (str, os.PathLike)) else part for part in constructor]
    else:
        raise InvalidArgument(f"PolicyPlacer's constructor must be a checkpoint path, several, or none; "
                              f"got {constructor!r}")
    if not all(isinstance(part, str) for part in parts):
        raise InvalidArgument(f"PolicyPlacer's constructors must be checkpoint paths, got {constructor!r}")
    if len(parts) == 1 and parts[0].strip().lower() in ("none", "false", "off"):
        return ()
    if any(not part.strip() for part in parts):  # "" (an unset variable) was read as none, without a word
        raise InvalidArgument(f"PolicyPlacer's constructor names an empty path: {constructor!r} (give 'none' for "
                              "no constructor)")
    return tuple(Path(part) for part in parts)
