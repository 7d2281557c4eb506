"""How the report knows a saved row: its key (with the revisions of the placers behind it) and the inputs it records.

A row is saved under a key naming its graph file by its stem, its cluster by its name, its placer with its registry
revisions (:func:`revised`) and the revisions of what it is measured against (:func:`against`), and its budget: a
key changed runs the row again; these keys are those of every report before, so that saved rows stand. Beside its
key a row records its inputs' content (:data:`IDENTITY`), and holds values of the kinds the report reads
(:func:`holds_kinds`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchmarks.common import revisions_used, uses_changed


def revised(name: str) -> str:
    """``name``, with the placer's registry ``revision`` where it declares one: rows saved before it are not reused.

    A placer that loads the shipped checkpoint by default also carries the first 8 hex digits of the
    checkpoint's SHA-256, and of each other file it loads by default (``policy``'s constructor), so that a
    new checkpoint runs its rows again; and one whose placers used declare other revisions than when the
    report's keys began to carry them (:func:`~benchmarks.common.uses_changed`: ``m_etf``'s new revision
    changes ``auto``, where ``ppo`` starts) carries them as ``+uses m_etf@2,...``.
    """
    from gnplace.evaluate import file_digest
    from gnplace.placers.registry import PLACERS

    if name not in PLACERS:
        return name
    info = PLACERS.info(name)
    label = f"{name}@{info.revision}" if info.revision else name
    digest = file_digest(info.default_checkpoint) if info.default_checkpoint else None
    label = f"{label}+{digest[:8]}" if digest else label
    for _, path in info.default_files:
        extra = file_digest(path)
        label = f"{label}+{extra[:8]}" if extra else label
    used = uses_changed(name)
    return f"{label}+uses {_revisions_text(used)}" if used else label


def _revisions_text(revisions: dict[str, str]) -> str:
    """``a@1,b@2``: placer names and their revisions, sorted by name."""
    return ",".join(f"{name}@{revision}" for name, revision in sorted(revisions.items()))


def against(*references: str) -> str:
    """``|against auto@1,m_etf@2``: the revisions of the placers a row is measured against and of those they use.

    A row's step over ``auto``'s (section 2) or the exact placement's (section 4) changes with their revisions as
    much as with the placer's own. Empty while none of them declares a revision, so that the keys of before stand.
    """
    from gnplace.placers.registry import PLACERS

    found: dict[str, str] = {}
    for name in references:
        if PLACERS.info(name).revision:
            found[name] = PLACERS.info(name).revision
        found.update(revisions_used(name))
    return f"|against {_revisions_text(found)}" if found else ""


def learned_key(path: str, cluster: str, name: str, budget: int) -> str:
    """The key of section 2's row of learned placer ``name`` on a graph file and cluster (its step over ``auto``'s)."""
    return f"{Path(path).stem}|{cluster}|{revised(name)}|{budget}{against('auto')}"


def placeto_zero_shot_key(path: str, cluster: str, episodes: int) -> str:
    """The key of section 2's row of Placeto pretrained for ``episodes`` episodes placing a graph file zero-shot."""
    label = revised("placeto").replace("placeto", "placeto_zs", 1)
    return f"{Path(path).stem}|{cluster}|{label}|{episodes}{against('auto')}"


def exact_key(path: str, groups: int, cluster: str, time_limit: float) -> str:
    """The key of section 4's row: a graph file coarsened to ``groups`` (0: not), ``auto`` and ``policy`` over ``exact``."""
    return f"{Path(path).stem}@{groups}|{cluster}|{time_limit}|{revised('policy')}{against('auto', 'exact')}"


def curve_key(path: str, cluster: str, name: str, budget: int, seed: int) -> str:
    """The key of section 6's row: search placer ``name``'s learning curve, alone, on a graph file and cluster."""
    return f"{Path(path).stem}|{cluster}|{revised(name)}|{budget}|seed {seed}|alone{against('auto')}"


#: What a row of sections 2 and 4 records of its inputs beside its key (which names the graph file by its stem and
#: the cluster by its name): a regenerated graph file or an edited cluster runs the row again.
IDENTITY = ("graph_sha256", "cluster_fingerprint")
#: What a row of section 2 records: :data:`IDENTITY`, and the content of the graphs that Placeto placing zero-shot
#: was pretrained on (:func:`training_digest`; None in the rows of the other placers), so that a changed train
#: split runs its rows again with the model pretrained on it.
LEARNED_IDENTITY = (*IDENTITY, "placeto_train_sha256")


def inputs_identity(path: str, cluster: str) -> dict[str, str]:
    """:data:`IDENTITY` of a graph file and a cluster (preset or YAML file): the file's SHA-256, the fingerprint."""
    from gnplace.cluster import load_cluster
    from gnplace.evaluate import file_digest

    return {"graph_sha256": str(file_digest(path)), "cluster_fingerprint": load_cluster(cluster).fingerprint()}


def training_digest(paths: list[str]) -> str:
    """SHA-256 (hex) of the content of training graph files, in their order (the order pretraining cycles through).

    Hashes each file's SHA-256 (:func:`~gnplace.evaluate.file_digest`, as rows record ``graph_sha256``), one a line.
    """
    import hashlib

    from gnplace.evaluate import file_digest

    return hashlib.sha256("\n".join(str(file_digest(path)) for path in paths).encode()).hexdigest()


def same(recorded: Any, today: float) -> bool:
    """Whether a value a row recorded is ``today``'s (to 1e-9, relative)."""
    return isinstance(recorded, (int, float)) and math.isclose(recorded, today, rel_tol=1e-9)


#: The kinds of a number in a saved row (a bool is none: :func:`holds_kinds`).
NUMBER: tuple[type, ...] = (int, float)


def holds_kinds(row: dict[str, Any], kinds: dict[str, tuple[type, ...]]) -> bool:
    """Whether each field ``kinds`` names holds a value of one of its types in ``row`` (a bool is no number).

    A line edited by hand, or an older program's, may hold another: ``"oom": null`` stood and was a ``TypeError``
    in section 2's table (``sum``) after every section had run, ``"auto": null`` one in section 4's.

    Examples:
        >>> holds_kinds({"a": 1.5, "b": None}, {"a": (int, float), "b": (str, type(None))})
        True
        >>> holds_kinds({"a": True}, {"a": (int, float)}), holds_kinds({}, {"a": (int, float)})
        (False, False)
    """
    return all(field in row and isinstance(row[field], types) and (bool in types or not isinstance(row[field], bool))
               for field, types in kinds.items())
