"""Compare placers on graphs and clusters: run every (graph, cluster, placer), then summarise.

Each run places the graph, times the placement with the simulator and records one row: step
time (s), lower bound (s), peak memory (bytes), OOM, and the seconds the placer took. Rows are
appended to ``results.csv`` as they finish, so an interrupted evaluation resumes where it stopped.

A saved row is reused only when every input that shapes it is the same: the graph file's content,
the cluster (its devices and links, not only its name), the placer, its revision and its options
(with the content of any option that names a file, such as a checkpoint), the budget (for placers that take
one), the seed and the simulator mode; these make the row's ``key``. Per graph file, cluster (a
preset's name, or a cluster file's path), placer, seed, budget, mode and options (a row's slot), a folder holds
one row: a task whose inputs changed since (a file's content, a placer's revision) replaces the old row, runs of
other budgets, modes or options keep a row each (``annealing@200`` beside ``annealing@2000``), and a failed row
runs again. Paths are stored absolute, so a rerun from another folder finds them.

Their summary, one line per family, cluster and placer, is :mod:`gnplace.evaluate_summary`'s.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import reprlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from gnplace.cluster import Cluster, load_cluster
from gnplace.evaluate_summary import spent_budget
from gnplace.exceptions import (
    ExecutionFailed,
    GnplaceError,
    InvalidArgument,
    after_interrupt,
    first_line,
)
from gnplace.graph import OpGraph, require_ops
from gnplace.graph_files import check_graph_file, collect_graphs
from gnplace.graph_io import append_to, load_graph, refuse_link, write_atomically
from gnplace.limits import as_path, check_budget, is_whole, parse_json
from gnplace.placement import Placement, check_placed, save_placement
from gnplace.placers.registry import PLACERS, added_placers, adopt_placers, check_placer_options, make_placer
from gnplace.runlock import holds_folder
from gnplace.seed import as_generator
from gnplace.sim.bounds import lower_bound
from gnplace.sim.simulator import Simulator
from gnplace.units import counted as _counted
from gnplace.workers import check_main_guarded

__all__ = [
    "Task", "Row", "collect_graphs", "file_digest", "value_identity", "default_files_identity", "task_key", "run_task",
    "place_task", "evaluate", "cluster_slot", "kept_placement", "placers_in_options", "is_learned", "unplaced",
    "rows_made_by", "stale_note",
]


@dataclass(frozen=True)
class Task:
    """One placement to make and time.

    Attributes:
        graph_path (str): graph file.
        cluster (str): preset name or YAML file.
        placer (str): registered placer name.
        budget (int | None): timer evaluations for placers that take a budget (None: their default).
        seed (int): seed of the placer.
        mode (str): simulator mode, ``"default"`` or ``"placeto"``.
        options (tuple[tuple[str, Any], ...]): further placer options as sorted ``(name, value)``
            pairs of JSON values, e.g. ``(("checkpoint", "ckpt/base.ckpt"),)``; see :meth:`with_options`.
    """

    graph_path: str
    cluster: str
    placer: str
    budget: int | None = None
    seed: int = 0
    mode: str = "default"
    options: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        """Refuse a graph or cluster given as an object, not as a file or name (a TypeError from ``os.stat``)."""
        as_path(self.graph_path, "task's graph file")
        as_path(self.cluster, "task's cluster (a preset's name or a cluster file)")

    @classmethod
    def with_options(cls, graph_path: str, cluster: str, placer: str, options: Mapping[str, Any] | None = None, *,
                     budget: int | None = None, seed: int = 0, mode: str = "default") -> Task:
        """A task whose placer gets ``options`` (names to JSON values: numbers, strings, booleans, lists, None).

        The options are a mapping, not keywords, so a placer option may share a name with a task field
        (``ppo``'s ``mode`` is its MDP, the task's ``mode`` the simulator's). The files a
        :data:`FILE_OPTIONS` option names are kept by their real paths, as graph and cluster files are,
        so that a rerun from another folder finds them (and ``my.ckpt`` and ``./my.ckpt`` are one setting).

        Raises:
            InvalidArgument: if an option value cannot be written as JSON.
        """
        options = dict(options or {})
        for name, value in options.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError) as err:
                raise InvalidArgument(f"placer option {name}={value!r} is not a JSON value ({err})") from err
            if name in FILE_OPTIONS:
                options[name] = _real_paths(value)
        frozen = tuple(sorted((k, _freeze(v)) for k, v in options.items()))
        return cls(graph_path, cluster, placer, budget, seed, mode, frozen)

    @property
    def options_dict(self) -> dict[str, Any]:
        """The placer options as a dictionary."""
        return {k: _thaw(v) for k, v in self.options}


#: Placer options that name files (``policy``'s constructor checkpoints may be several, comma-separated or a list).
FILE_OPTIONS = frozenset({"checkpoint", "constructor"})


def _real_paths(value: Any) -> Any:
    """``value`` with each file it names given by its real path (other values as they are).

    Examples:
        >>> _real_paths(4), _real_paths("no-such-file")
        (4, 'no-such-file')
    """
    if isinstance(value, list):
        return [_real_paths(v) for v in value]
    if not isinstance(value, str) or not value:
        return value
    if os.path.isfile(value):
        return os.path.realpath(value)
    parts = [part.strip() for part in value.split(",")]
    if len(parts) > 1 and all(os.path.isfile(part) for part in parts):
        return ",".join(os.path.realpath(part) for part in parts)
    return value


def _names_missing_files(value: Any) -> bool:
    """Whether ``value`` (a :data:`FILE_OPTIONS` option as saved) names a file not found here.

    That is a relative path of another folder's run, or a file since gone (an absolute path): a row that names one
    cannot be checked. A part counts as a path where it looks like one (a folder in it, or a ``.ckpt`` name):
    ``none`` is a setting.
    """
    if isinstance(value, list):
        return any(_names_missing_files(v) for v in value)
    if not isinstance(value, str) or not value:
        return False
    return any(part and (os.sep in part or part.endswith(".ckpt")) and not os.path.isfile(part)
               for part in (p.strip() for p in value.split(",")))


def _freeze(value: Any) -> Any:
    return tuple(_freeze(v) for v in value) if isinstance(value, list) else value


def _thaw(value: Any) -> Any:
    return [_thaw(v) for v in value] if isinstance(value, tuple) else value


@dataclass
class Row:
    """The result of one :class:`Task` (seconds, bytes) and the inputs that made it.

    A run that failed (``error`` says why) timed nothing: its step time, peak memory and placing time are nan and
    its ``oom`` None (an empty cell of ``results.csv``), never False beside a step time of nan. ``single_oom`` says
    whether the single-device placement of ``single_s`` runs out of memory (None: a row saved before it was kept).
    """

    graph: str
    family: str
    graph_path: str
    ops: int
    groups: int
    cluster: str
    placer: str
    seed: int
    step_time_s: float
    bound_s: float
    single_s: float
    peak_memory_bytes: float
    oom: bool | None
    place_seconds: float
    error: str = ""
    learned: bool = False
    budget: int | None = None
    mode: str = "default"
    options: str = "{}"
    cluster_spec: str = ""
    key: str = ""
    single_oom: bool | None = None

    def task(self) -> Task:
        """The task that made this row."""
        options = json.loads(self.options)
        return Task.with_options(self.graph_path, self.cluster_spec or self.cluster, self.placer, options,
                                 budget=self.budget, seed=self.seed, mode=self.mode)


# ---------------------------------------------------------------------------------- what shapes a row
#: What :func:`_stamp` tells a file by: ``(size in bytes, mtime in ns, device, inode)``.
Stamp = tuple[int, int, int, int]


def _stamp(path: str) -> Stamp | None:
    """``(size, mtime_ns, device, inode)`` of a file, or None if ``path`` names no file: a cheap change detector.

    The caches below are keyed by the path as given and this stamp. The file's device and inode tell two files of
    one relative path apart: ``g.gnpg`` in two working folders (a process that changed folder, or a link swapped to
    another dataset) was one cache entry where both files had the same size and mtime (copies that keep mtimes,
    archives that fix them), and the second folder's rows were keyed, named and timed with the first's graph.
    """
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns, stat.st_dev, stat.st_ino) if os.path.isfile(path) else None


@lru_cache(maxsize=256)
def _file_digest(path: str, stamp: Stamp) -> str:
    """SHA-256 (hex) of a file's bytes (cached while the file, its size and its modification time stay)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str | None:
    """SHA-256 (hex) of the file at ``path``, or None if it names no file (cached while the file is unchanged)."""
    stamp = _stamp(os.fspath(path))
    return None if stamp is None else _file_digest(os.fspath(path), stamp)


def value_identity(value: Any) -> Any:
    """An option value, with the content digest added where it names an existing file (or several, comma-separated)."""
    if isinstance(value, str):
        digest = file_digest(value)
        if digest is not None:
            return {"file": value, "sha256": digest}
        parts = [part.strip() for part in value.split(",")]
        if len(parts) > 1 and any(file_digest(part) is not None for part in parts):
            return {"files": [value_identity(part) for part in parts]}
    if isinstance(value, tuple):
        return [value_identity(v) for v in value]
    return value


def task_key(task: Task) -> str:
    """SHA-256 (hex) of every input that shapes the row of ``task``.

    The graph file's content, the cluster's :meth:`~gnplace.cluster.Cluster.fingerprint`, the
    placer and its ``revision`` (where it declares one) and those of the placers it uses
    (:meth:`~gnplace.placers.registry.PlacerRegistry.revisions_used`), its options (the content of options that
    name files, and of the placer's default checkpoint when none is given), the budget where the
    placer takes one, the seed and the simulator mode.

    Raises:
        GnplaceError: if the graph file, the cluster or the placer cannot be found.
    """
    stamp = _stamp(task.graph_path)
    if stamp is None:
        check_graph_file(Path(task.graph_path), "")  # says what it is instead: a folder, a device, nothing
        raise GnplaceError(f"{task.graph_path}: no such graph file")
    info = PLACERS.info(task.placer)
    accepts = info.accepts
    identity: dict[str, Any] = {
        "graph": _file_digest(task.graph_path, stamp),
        "cluster": _cluster(task.cluster, _stamp(task.cluster)).fingerprint(),
        "placer": task.placer,
        "options": {k: value_identity(v) for k, v in task.options},
        "budget": task.budget if "budget" in accepts else None,
        "seed": task.seed,
        "mode": task.mode,
    }
    if info.revision:  # a placer whose defaults changed: rows saved before are not reused
        identity["revision"] = info.revision
    used = PLACERS.revisions_used(task.placer)
    if used:  # a placer it uses changed (auto's candidates, or auto for the searches that start from it)
        identity["uses"] = used
    identity.update(default_files_identity(task.placer, dict(task.options)))
    started = {}
    known = {task.placer, *used, *(u.partition("@")[0] for u in info.uses)}  # in its identity already
    for name in placers_in_options(task.options_dict):  # -O annealing.start=policy runs policy: its revision and
        # shipped weights shape the row as its own do (a retrained checkpoint reused the old annealing rows)
        if name in known:
            continue
        entry = {"revision": PLACERS.info(name).revision, "uses": PLACERS.revisions_used(name),
                 **default_files_identity(name, {})}
        entry = {k: v for k, v in entry.items() if v}
        if entry:  # (a placer of no revision and no files: rows saved before stand)
            started[name] = entry
    if started:
        identity["started"] = started
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def placers_in_options(options: Mapping[str, Any]) -> list[str]:
    """The registered placers ``options`` name, sorted (auto's ``candidates``, annealing's ``start``, ...).

    A placer runs them, so they are part of its row (:func:`task_key`, :func:`is_learned`).

    Examples:
        >>> placers_in_options({"start": "policy", "budget": 3, "candidates": ("heft", "single")})
        ['heft', 'policy', 'single']
    """
    names: set[str] = set()
    for value in options.values():
        for item in value if isinstance(value, tuple | list) else (value,):
            if isinstance(item, str) and item in PLACERS:
                names.add(item)
    return sorted(names)


def is_learned(task: Task) -> bool:
    """Whether ``task``'s row is a learned placer's: its own, or one its options start.

    ``auto.candidates=[ppo]`` and ``annealing.start=policy`` are learned rows, compared with the best non-learned
    row, never part of it.
    """
    return PLACERS.info(task.placer).learned or any(
        PLACERS.info(name).learned for name in placers_in_options(task.options_dict))


def default_files_identity(placer: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The content of the shipped files ``placer`` reads because ``options`` name no others.

    ``"checkpoint"``: its default checkpoint (the shipped weights, as they are now); ``"default <option>"``:
    each other shipped file it reads unless told otherwise (the constructors), one or a list.
    """
    info = PLACERS.info(placer)
    identity: dict[str, Any] = {}
    if info.default_checkpoint and "checkpoint" not in options:
        identity["checkpoint"] = value_identity(info.default_checkpoint)
    shipped: dict[str, list[Any]] = {}
    for option, path in info.default_files:
        if option not in options:
            shipped.setdefault(option, []).append(value_identity(path))
    for option, files in shipped.items():
        identity[f"default {option}"] = files[0] if len(files) == 1 else files
    return identity


# ---------------------------------------------------------------------------------- one task (in a worker)
#: Most characters of a row's ``error`` (a message cut there ends with ``…``): :mod:`csv` reads no field longer than
#: 131,072 characters back, and one crash's message past that made ``results.csv`` unreadable to every rerun.
MAX_ERROR_CHARS = 1000
#: Longest field of ``results.csv`` read back (csv's default is 131,072 characters): a graph's name and family come
#: from its file, whose reader bounds them only by the file's size.
MAX_FIELD_CHARS = 2**31 - 1


@lru_cache(maxsize=8)
def _graph(path: str, stamp: Stamp | None) -> OpGraph:
    return load_graph(path)


@lru_cache(maxsize=16)
def _cluster(spec: str, stamp: Stamp | None) -> Cluster:
    return load_cluster(spec)


@lru_cache(maxsize=4)
def _timer(mode: str) -> Simulator:
    return Simulator(mode)  # type: ignore[arg-type]


@lru_cache(maxsize=32)
def _placer(name: str, budget: int | None, mode: str, options: str) -> Any:
    """A placer per (name, budget, mode, options) and worker, so that a checkpoint loads once.

    Its own progress bar is turned off: evaluation shows one bar of its rows, and several worker
    processes drawing their own on one terminal garble it.
    """
    placer = make_placer(name, timer=_timer(mode), budget=budget, **json.loads(options))
    if hasattr(placer, "progress"):
        placer.progress = False
    return placer


@lru_cache(maxsize=32)
def _references(path: str, stamp: Any, cluster_spec: str, cluster_stamp: Any, mode: str) -> tuple[float, float, bool]:
    """Lower bound and single-device step (seconds) of a graph on a cluster, and whether it overflows; once a worker."""
    graph, cluster, sim = _graph(path, stamp), _cluster(cluster_spec, cluster_stamp), _timer(mode)
    bound = lower_bound(graph, cluster, times=sim.op_times(graph, cluster)).value
    single = sim.time(graph, cluster, make_placer("single", timer=sim).place(graph, cluster))
    return bound, single.step_time, bool(single.is_oom)


def place_task(task: Task) -> tuple[OpGraph, Cluster, Placement, float]:
    """Make the placement of ``task``: ``(graph, cluster, placement, seconds the placer took)``.

    Raises:
        GnplaceError: if the graph, cluster or placer is bad, or the placer fails on bad input.
    """
    graph = _graph(task.graph_path, _stamp(task.graph_path))
    cluster = _cluster(task.cluster, _stamp(task.cluster))
    placer = _placer(task.placer, task.budget, task.mode, json.dumps(task.options_dict, sort_keys=True))
    start = time.perf_counter()
    placement = check_placed(placer.place(graph, cluster, seed=task.seed), graph, cluster, task.placer)
    return graph, cluster, placement, time.perf_counter() - start


def run_task(task: Task, key: str = "") -> Row:
    """Place and time one graph on one cluster with one placer, in this process (workers run :func:`_run_task`)."""
    return _run_task(task, key)[0]


def _run_task(task: Task, key: str) -> tuple[Row, Placement | None]:
    """The row of ``task`` and the placement it timed (None where placing or timing failed)."""
    graph_stamp, cluster_stamp = _stamp(task.graph_path), _stamp(task.cluster)
    graph, cluster = _graph(task.graph_path, graph_stamp), _cluster(task.cluster, cluster_stamp)
    bound, single_s, single_oom = _references(task.graph_path, graph_stamp, task.cluster, cluster_stamp, task.mode)
    base: dict[str, Any] = dict(
        graph=graph.name, family=str(graph.meta.get("family", "")), graph_path=os.path.realpath(task.graph_path),
        ops=graph.num_ops,
        groups=graph.num_groups, cluster=cluster.name, placer=task.placer, seed=task.seed, bound_s=bound,
        single_s=single_s, single_oom=single_oom, learned=is_learned(task),
        # a placer that spends none was given none (its key leaves it out): heft run beside annealing --budget 20 had
        # a row of budget 20, and kept it when run again with none
        budget=spent_budget(task.placer, task.budget), mode=task.mode,
        options=json.dumps(task.options_dict, sort_keys=True), cluster_spec=cluster_slot(task.cluster), key=key,
    )
    try:
        _, _, placement, took = place_task(task)
        result = _timer(task.mode).time(graph, cluster, placement)
    except Exception as err:  # noqa: BLE001 - one placer's failure is its row; the others' rows are kept
        if after_interrupt(err):  # Ctrl-C, handed back by numba's loops as a SystemError: not the placer's failure
            raise
        message = first_line(err)
        if not isinstance(err, GnplaceError) and str(err).strip():  # a crash: name its kind
            message = f"{type(err).__name__}: {message}"
        if len(message) > MAX_ERROR_CHARS:  # a longer field than csv reads back made the file unreadable
            message = message[: MAX_ERROR_CHARS - 1] + "…"
        return Row(**base, step_time_s=math.nan, peak_memory_bytes=math.nan, oom=None, place_seconds=math.nan,
                   error=message), None
    return Row(**base, step_time_s=result.step_time, peak_memory_bytes=float(result.peak_memory.max()),
               oom=result.is_oom, place_seconds=took), placement


def _run_keyed(
    item: tuple[Task, str, bool], added: Mapping[str, type | str] | None = None
) -> tuple[Row, Placement | None]:
    """Run ``(task, key, keep)`` in a worker: its row, and its placement where ``keep`` asks for it (else None).

    ``added`` are the placers the parent registered beyond the shipped ones (:func:`added_placers`): a
    spawned worker starts without them.
    """
    if added:
        adopt_placers(added)
    task, key, keep = item
    row, placement = _run_task(task, key)
    return row, placement if keep else None


# ---------------------------------------------------------------------------------- kept placements
#: Folder of an evaluation's output folder that holds the placements kept (:func:`kept_placement`).
PLACEMENTS_FOLDER = "placements"


def kept_placement(out: str | os.PathLike[str], key: str) -> Path:
    """The file in which :func:`evaluate` keeps the placement of the row whose key is ``key`` (a placement file).

    Only the rows of the tasks ``evaluate``'s ``keep_placements`` chose have one; read it with
    :func:`~gnplace.placement.load_placement` and the row's graph and cluster.
    """
    return Path(out) / PLACEMENTS_FOLDER / f"{key}.json"


# ---------------------------------------------------------------------------------- the results file
_INT_FIELDS = {"ops", "groups", "seed"}
_FLOAT_FIELDS = {"step_time_s", "bound_s", "single_s", "peak_memory_bytes", "place_seconds"}
_BOOL_FIELDS = {"learned"}


def _read_rows(path: Path) -> list[Row]:
    """Rows of ``results.csv``; a line cut short or written before keys existed is dropped (its task runs again)."""
    if not path.exists():
        return []
    if not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file"
        raise InvalidArgument(f"{path}: not a results file ({kind}); move it away or pick another output folder")
    limit = csv.field_size_limit()
    try:  # a field as long as a run writes: a graph's name or family from its file (a 200,000-character name
        # made the folder unreadable to every later run)
        csv.field_size_limit(max(limit, MAX_FIELD_CHARS))
        with path.open(newline="", encoding="utf-8", errors="surrogateescape") as handle:
            reader = csv.DictReader(handle)
            raws = list(reader)
            header = reader.fieldnames or []
    except (UnicodeDecodeError, csv.Error) as err:
        raise InvalidArgument(
            f"{path}: not a results file of gnplace evaluate ({' '.join(str(err).split())[:120]}); "
            "move it away or pick another output folder"
        ) from None
    finally:
        csv.field_size_limit(limit)
    # another tool's table: not ours to rewrite (nor a file whose first line is blank: read as no header, it was
    # taken for an empty results file and overwritten)
    if (header or raws) and not {"graph", "cluster", "placer"} <= set(header):
        # each cut to 40 characters: a binary file's first line filled the error line with bytes
        shown = ", ".join(name if len(name) <= 40 else name[:40] + "..." for name in header[:5])
        raise InvalidArgument(f"{path}: not a results file of gnplace evaluate (columns {shown}); "
                              "move it away or pick another output folder")
    rows = []
    for raw in raws:
        try:
            values: dict[str, Any] = {}
            for f in fields(Row):
                text = raw.get(f.name, "") if f.name == "single_oom" else raw[f.name]  # (none in a file of before)
                if text is None:
                    raise ValueError(f"missing {f.name}")
                if f.name in _INT_FIELDS:
                    values[f.name] = int(text)
                elif f.name in _FLOAT_FIELDS:
                    values[f.name] = float(text)
                elif f.name in _BOOL_FIELDS:
                    values[f.name] = text == "True"
                elif f.name in ("oom", "single_oom"):  # empty: not timed (single_oom: not kept)
                    values[f.name] = {"True": True, "False": False}.get(text)
                elif f.name == "budget":
                    values[f.name] = int(text) if text else None
                else:
                    values[f.name] = text
            if not values["key"]:
                continue
            # an empty cell is no options, for the row's task() and the summary as for its key (they failed on it)
            values["options"] = values["options"] or "{}"
            # a run before 2026-12-07 wrote --budget in the rows of placers spending none
            values["budget"] = spent_budget(values["placer"], values["budget"])
            try:  # within the limits: a field nested 100,000 deep was json's RecursionError, a traceback
                options = parse_json(values["options"], InvalidArgument, "options")
            except InvalidArgument:
                continue
            if not isinstance(options, dict):  # written as a JSON object by every run
                continue
            if values["error"]:  # a failed run timed nothing (a file written before 2026-12-05 said False)
                values["oom"] = None
            elif values["oom"] is None:
                continue  # a row that ran without its answer: run that task again
            measured = ("bound_s", "single_s") if values["error"] else ("step_time_s", "bound_s", "single_s")
            if not all(math.isfinite(values[name]) and values[name] >= 0 for name in measured):
                continue  # a value no run writes (nan, inf, negative without an error): run that task again
            rows.append(Row(**values))
        except (KeyError, ValueError, TypeError):
            continue  # a line cut short by an interruption, or an older file: run that task again
    return rows


def cluster_slot(spec: str) -> str:
    """Which cluster ``spec`` names, as rows keep it: a cluster file's absolute path, else the preset's name.

    Two cluster files may share a name (every ``gnplace profile`` writes ``cluster.yaml``, whose name
    is its file's): their rows are kept apart by path, not merged by name.
    """
    return os.path.realpath(spec) if os.path.isfile(spec) else spec


#: A row's slot (:func:`_identity`): graph file, cluster, placer, seed, budget, simulator mode and options (JSON).
Slot = tuple[str, str, str, int, Any, str, str]


def _identity(graph_path: str, cluster: str, placer: str, seed: int, budget: Any, mode: str,
              options: str) -> Slot:
    """The slot a row fills: what a run asks for (graph file, cluster, placer, seed, budget, mode and options).

    The cluster is :func:`cluster_slot`'s, the budget :func:`~gnplace.evaluate_summary.spent_budget`'s (none for a
    placer that spends none), the options their JSON with sorted keys. A slot holds one row: a row of the slot whose
    key is another (a graph or cluster file's content, a placer's revision, a file an option names changed) is
    replaced; rows of other budgets, modes or options are other slots, kept beside it (``annealing@200`` and
    ``annealing@2000`` in one folder: a rerun with another ``--budget`` replaced the first).
    """
    try:  # (a row read back keeps its options as written: the same JSON, sorted again where it was not; the files
        # they name by real path, as a task's are, so that a row saved before they were still fills its task's slot)
        given = json.loads(options or "{}")
        options = json.dumps({k: _real_paths(v) if k in FILE_OPTIONS else v for k, v in given.items()}, sort_keys=True)
    except (ValueError, AttributeError):
        pass
    return (os.path.realpath(graph_path), cluster_slot(cluster), placer, seed, spent_budget(placer, budget), mode,
            options)


@holds_folder("out", "--out")  # one run at a time in a folder
def evaluate(
    tasks: Iterable[Task], out: str | os.PathLike[str], *, jobs: int = 1,
    progress: Callable[[Row], None] | None = None, reused: Callable[[int], None] | None = None,
    keep_placements: Callable[[Task], bool] | None = None, stale: Callable[[int], None] | None = None,
) -> list[Row]:
    """Run ``tasks`` (in ``jobs`` processes), appending rows to ``out/results.csv``; returns all rows.

    A task whose :func:`task_key` matches a saved row is not run again; a saved row of the same
    graph, cluster, placer, seed, budget, mode and options whose key none of ``tasks`` has (its inputs changed: a
    file's content, a placer's revision) is replaced. Rows of other tasks in the file are kept (an evaluation can be
    extended placer by placer, budget by budget: ``annealing@200`` stays beside ``annealing@2000``) while their key is
    still what their inputs make: one timed on a graph or cluster file since changed is dropped, not compared with
    rows of the new contents. Two graph (or cluster) files of the same content each get their rows. ``progress`` is
    called with each row as it finishes, ``reused`` once, before any runs, with the number of ``tasks`` whose saved
    rows stand, and ``stale`` once, before any runs, with the number of saved rows whose inputs changed since they
    were timed (dropped, or replaced by the run of their task), where there are any.

    Args:
        tasks (Iterable[Task]): the placements to make and time.
        out (str or Path): the output folder.
        jobs (int, optional): worker processes; at most one per task to run is started, and those started share
            the cores (default: :obj:`1`, every task in this process).
        progress (callable, optional): called with each row run, as it finishes (default: :obj:`None`).
        reused (callable, optional): called once, before any run, with the number of saved rows that stand
            (default: :obj:`None`).
        stale (callable, optional): called once, before any run, with the number of saved rows timed on inputs
            that changed since (a graph or cluster file's content, a placer's revision, a file an option names),
            where that is not 0 (default: :obj:`None`).
        keep_placements (callable, optional): the tasks (those it returns True for) whose placements are kept in
            :func:`kept_placement` files, written before their rows; a saved row of such a task without its file runs
            again, so that the placement drawn is the one its row timed (default: :obj:`None`, none kept).

    Raises:
        GnplaceError: if a graph file, cluster or placer of ``tasks`` cannot be found, a graph file to run
            cannot be read, or a budget is not 1 to :data:`~gnplace.limits.MAX_BUDGET` (before any run).
        InvalidArgument: if ``jobs`` is not a whole number >= 1, or ``out`` (or its placements folder, when
            placements are kept) is a file, or ``jobs`` > 1 is asked from a script's top level, outside ``if
            __name__ == "__main__":`` (:func:`~gnplace.workers.check_main_guarded`).
        Terminated: on a SIGTERM while the tasks run (where no other SIGTERM handler is set), once the workers are
            stopped and the rows that finished are saved, as on Ctrl-C (``jobs`` of 1: the rows before the task under
            way; a Lightning fit in it stops as Lightning stops on SIGTERM, at the end of its iteration).
    """
    out = as_path(out, "output folder")
    if not is_whole(jobs) or jobs < 1:  # a numpy integer is whole too, a bool is not
        raise InvalidArgument(f"evaluate needs jobs >= 1 (a whole number), got {jobs!r}")
    jobs = int(jobs)
    if jobs > 1:  # before the output folder is touched, not once the workers are about to start
        check_main_guarded()
    if out.exists() and not out.is_dir():
        raise InvalidArgument(f"{out}: the output folder is a file")
    folder = out / PLACEMENTS_FOLDER
    if keep_placements is not None and folder.exists() and not folder.is_dir():
        raise InvalidArgument(f"{folder}: the folder of the kept placements is a file; move it away")
    if isinstance(tasks, str | Mapping) or not isinstance(tasks, Iterable):
        raise InvalidArgument(f"evaluate's tasks are an iterable of Task, got {reprlib.repr(tasks)}")
    tasks = list(tasks)
    for task in tasks:  # a dict or a tuple of fields was an AttributeError deep inside
        if not isinstance(task, Task):
            raise InvalidArgument(f"evaluate's tasks must each be a Task (Task(graph_path, cluster, placer), "
                                  f"Task.with_options(...)), got {reprlib.repr(task)}")
    for budget in dict.fromkeys(t.budget for t in tasks if t.budget is not None):
        check_budget(budget, "evaluate")  # whichever placers run: 0 or -5 is no budget, even where none takes one
    for placer, options in {(t.placer, json.dumps(t.options_dict, sort_keys=True)) for t in tasks}:
        check_placer_options(placer, json.loads(options))  # as gnplace place does, before OUT is made or a file read
    csv_path = out / "results.csv"
    # a task asked twice runs once; two files of one content are two slots, each with its row
    keyed = list({(k, _task_slot(t)): (t, k) for t, k in ((t, task_key(t)) for t in tasks)}.values())
    for t in {(t.placer, t.budget, t.mode, json.dumps(t.options_dict, sort_keys=True)) for t, _ in keyed}:
        _placer(*t)  # bad options or a bad checkpoint are refused here, before saved rows are replaced
    for seed in {t.seed for t, _ in keyed}:
        as_generator(seed)
    keep = {k for t, k in keyed if keep_placements is not None and keep_placements(t)}
    saved = _read_rows(csv_path)  # (a link to a device or another table: refused as no results file)
    for output in (csv_path, folder):
        refuse_link(output, "evaluate")
    done, changed = _rows_that_stand(saved, keyed, keep, out)
    _fill_single_oom(done)  # rows of a file written before the column: as a fresh run's, in the file too
    have = {(r.key, _row_slot(r)) for r in done}
    todo = [(t, k, k in keep) for t, k in keyed if (k, _task_slot(t)) not in have]
    for path in dict.fromkeys(t.graph_path for t, _, _ in todo):  # keys read the bytes only: a bad file fails here,
        # before any run, not once the runs before it are done; a graph of no ops scored 1.000 against every
        # reference and pulled the geometric means toward 1, where place and simulate refuse it
        require_ops(_graph(path, _stamp(path)), path)
    if reused is not None:
        reused(len({(k, _task_slot(t)) for t, k in keyed} & have))
    if stale is not None and changed:
        stale(changed)
    names = [f.name for f in fields(Row)]
    out.mkdir(parents=True, exist_ok=True)  # once every input is checked: a refused one leaves no empty folder
    # the rows of the slots to run again stay in the file until their new rows replace them: an interrupted
    # rerun dropped them (a new revision's, a failed one) before it had anything in their place
    replaced = _rows_replaced(saved, done, todo)
    kept = {id(r) for r in done} | {id(r) for r in replaced.values()}
    # id(row) -> (row, its line), in the file's order: each row is formatted once, not on every rewrite (a rerun
    # replacing every row of 960 formatted 960 rows per row, twice the run's time with cheap placers)
    on_file = {id(r): (r, _row_text(r, names)) for r in saved if id(r) in kept}
    _rewrite(csv_path, names, on_file)  # drops stale rows of other slots and a line cut short by an interruption
    _drop_kept_placements(out, folder, saved, [r for r, _ in on_file.values()])  # their kept placements go with them
    rows = list(done)

    def save(item: tuple[Task, str, bool], result: tuple[Row, Placement | None]) -> None:
        row, placement = result
        if placement is not None:  # before its row: a row saved is never without the placement it timed
            graph = _graph(item[0].graph_path, _stamp(item[0].graph_path))
            # its mode as gnplace place records it: gnplace simulate times a file of --mode placeto in that mode
            save_placement(kept_placement(out, row.key), graph, placement, placer=row.placer,
                           predicted={"step_time_s": row.step_time_s, "oom": row.oom, "mode": row.mode})
        text = _row_text(row, names)
        append_to(csv_path, text.encode("utf-8", "surrogateescape"))  # (a full disk: the line taken back, named)
        on_file[id(row)] = (row, text)
        old = replaced.pop(_row_slot(row), None)
        if old is not None:  # one row a slot in the file: the row it replaces goes now
            del on_file[id(old)]
            _rewrite(csv_path, names, on_file)
            if not any(r.key == old.key for r, _ in on_file.values()):
                _drop_kept_placements(out, folder, [old], [])
        rows.append(row)

    def record(item: tuple[Task, str, bool], result: tuple[Row, Placement | None]) -> None:
        save(item, result)
        if progress is not None:
            progress(result[0])

    if jobs <= 1 or not todo:
        from gnplace.workers import sigterm_as_interrupt

        with sigterm_as_interrupt():  # a SIGTERM stops the run (the rows so far are saved) as Ctrl-C does
            for item in todo:
                record(item, _run_keyed(item))
    else:
        from concurrent.futures.process import BrokenProcessPool

        try:
            _run_in_workers(todo, min(jobs, len(todo)), record, save)
        except BrokenProcessPool as err:  # a worker was killed (out of memory, a signal): the rows so far are saved
            raise ExecutionFailed(f"an evaluation worker process died ({err}); the {len(rows)} rows finished "
                                  "are saved: run again to resume") from None
    return rows


def _rows_replaced(saved: list[Row], done: list[Row], todo: list[tuple[Task, str, bool]]) -> dict[Any, Row]:
    """The saved row of each slot ``todo`` runs again (by slot): another key's, failed, or without its placement.

    Only the last row of a slot counts (as in :func:`_rows_that_stand`); a slot nothing runs in keeps no row
    that does not stand.
    """
    running = {_task_slot(t) for t, _, _ in todo}
    standing = {id(r) for r in done}
    replaced: dict[Any, Row] = {}
    for row in reversed(saved):
        if id(row) in standing:
            continue
        slot = _row_slot(row)
        if slot in running and slot not in replaced:
            replaced[slot] = row
    return replaced


def _row_text(row: Row, names: list[str]) -> str:
    """``row``'s line of the results file, its columns ``names``: what :class:`csv.DictWriter` writes of it."""
    text = io.StringIO(newline="")
    csv.writer(text).writerow([getattr(row, name) for name in names])  # (asdict copied each value deeply first)
    return text.getvalue()


def _rewrite(path: Path, names: list[str], on_file: Mapping[int, tuple[Row, str]]) -> None:
    """Write the rows ``on_file`` (by id: the row and its line, :func:`_row_text`) as the results file ``path``."""
    text = io.StringIO(newline="")
    csv.writer(text).writerow(names)
    text.writelines(line for _, line in on_file.values())
    write_atomically(path, text.getvalue().encode("utf-8", "surrogateescape"))


def _drop_kept_placements(out: Path, folder: Path, dropped: list[Row], on_file: list[Row]) -> None:
    """Remove the kept placements of the rows ``dropped`` whose key no row ``on_file`` has."""
    if folder.is_dir():
        for key in {r.key for r in dropped} - {r.key for r in on_file}:
            kept_placement(out, key).unlink(missing_ok=True)


def _rows_that_stand(saved: list[Row], keyed: list[tuple[Task, str]], keep: set[str],
                     out: Path) -> tuple[list[Row], int]:
    """The saved rows kept, and how many saved rows are stale.

    The rows kept are those of other slots, and those whose key is asked for (not failed, placement kept). A slot
    (:func:`_identity`) holds the row of the key asked for in it; a saved row of the slot that no task asks for is
    stale (its inputs changed: a file's content, a placer's revision), as is a row of a slot not asked for whose key
    its inputs no longer make (:func:`_still_made_so`). A failed row of unchanged inputs runs again and a copy of a
    row is dropped, as before: neither counts as stale.
    """
    wanted: dict[Slot, set[str]] = defaultdict(set)
    for t, k in keyed:
        wanted[_task_slot(t)].add(k)
    done = []
    changed = 0
    seen: set[tuple[str, Slot]] = set()
    for row in reversed(saved):  # the last row of a (key, slot) stands: two runs into one folder both appended it,
        # and the copy was counted twice (best on 2/2 of one graph)
        slot = _row_slot(row)  # (a real path: resolved once)
        if (row.key, slot) in seen:
            continue
        seen.add((row.key, slot))
        current = wanted.get(slot)
        # a failed row of a task asked for again runs again (the failure may have passed), as one whose placement is
        # to be kept and is not (its row was saved before placements were kept)
        if current is None:
            if _still_made_so(row):
                done.append(row)
            else:
                changed += 1
        elif row.key not in current:
            changed += 1
        elif not row.error and (row.key not in keep or _kept_placement_reads(kept_placement(out, row.key))):
            done.append(row)
    return done[::-1], changed


def _kept_placement_reads(path: Path) -> bool:
    """Whether the kept placement file ``path`` is there and reads as a placement file (JSON of its format).

    A file cut short or damaged was taken for the placement, and every later ``--plot`` stopped on it until it
    was deleted by hand; its row now runs again and writes it anew.
    """
    from gnplace.placement import FORMAT

    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):  # missing, unreadable, not JSON (UnicodeDecodeError is a ValueError)
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT and isinstance(data.get("placement"), dict)


def _fill_single_oom(rows: Sequence[Row]) -> None:
    """Give the rows saved before ``single_oom`` was kept (None) theirs, where their graph and cluster still give it.

    A resumed evaluation averaged such a row's step / single device over a single device that overflows (on tight4,
    heft's 0.680 where a fresh run says 0.506). The single-device placement is timed again (once a graph and
    cluster, as a run does): a row whose single-device step it matches gets its ``single_oom``; one whose files are
    gone, unreadable or changed keeps None (its step / single device is averaged in, as before the column).
    """
    for row in rows:
        if row.single_oom is not None:
            continue
        cluster = row.cluster_spec or row.cluster
        graph_stamp = _stamp(row.graph_path)
        if graph_stamp is None:
            continue
        try:
            _, single_s, single_oom = _references(row.graph_path, graph_stamp, cluster, _stamp(cluster), row.mode)
        except (GnplaceError, OSError, ValueError):
            continue
        if single_s == row.single_s:  # the reference the row was compared with
            row.single_oom = single_oom


def _task_slot(task: Task) -> Slot:
    return _identity(task.graph_path, task.cluster, task.placer, task.seed, task.budget, task.mode,
                     json.dumps(task.options_dict, sort_keys=True))


def _row_slot(row: Row) -> Slot:
    return _identity(row.graph_path, row.cluster_spec or row.cluster, row.placer, row.seed, row.budget, row.mode,
                     row.options)


def _still_made_so(row: Row) -> bool:
    """Whether ``row``'s key is what its inputs make now (its graph file, cluster, placer revisions, option files).

    A row whose graph file, cluster file, checkpoint or placer is gone, or whose files cannot be read, cannot be
    checked, and stands (as every saved row did before rows were checked). Rows saved before option files were
    kept by real path name them as given, relative to the folder of that run: from another folder, unchecked
    (asked for again, such a row runs once more, now keyed by the real path).
    """
    try:
        task = row.task()
        # the options as saved: a checkpoint kept by a relative path keys as it did (with_options resolves it)
        saved = json.loads(row.options)
        task = dataclasses.replace(task, options=tuple(sorted((k, _freeze(v)) for k, v in saved.items())))
        if any(_names_missing_files(v) for k, v in task.options_dict.items() if k in FILE_OPTIONS):
            return True  # a relative path of another folder, or a checkpoint gone: the row cannot be checked
        return task_key(task) == row.key
    except (GnplaceError, OSError):
        return True


def _run_in_workers(
    todo: list[tuple[Task, str, bool]], workers: int,
    record: Callable[[tuple[Task, str, bool], tuple[Row, Placement | None]], None],
    save: Callable[[tuple[Task, str, bool], tuple[Row, Placement | None]], None],
) -> None:
    """Run ``todo`` in ``workers`` processes, handing each result to ``record`` in task order.

    When the run stops (Ctrl-C, a SIGTERM, a failure, a worker killed), the workers are stopped and the results of
    the tasks that finished out of order are handed to ``save``.

    Raises:
        BrokenProcessPool: if a worker process died (killed for memory, by a signal), once the results are saved.
    """
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    from gnplace.workers import process_pool, sigterm_as_interrupt, terminate_workers

    def save_finished(start: int) -> None:
        """Save the results of the tasks from ``start`` on that finished (out of order) before the run stopped."""
        for item, future in zip(todo[start:], futures[start:], strict=True):
            if future.done() and not future.cancelled() and future.exception() is None:
                save(item, future.result())

    # ``workers`` is at most the tasks to run: the cores are shared among the workers started (16 jobs for 2 tasks gave
    # each of the 2 workers a 16th of them). Ctrl-C reaches the parent alone; it stops the workers.
    added = _added_placers_for_workers()
    pool = process_pool(workers, ignore_interrupts=True)
    futures: list[Future[tuple[Row, Placement | None]]] = [pool.submit(_run_keyed, item, added) for item in todo]
    taken = 0  # futures whose results were handed to record (in order; never cancelled, see below)
    try:
        with sigterm_as_interrupt():  # a SIGTERM stops the workers and saves what finished, as Ctrl-C
            for item, future in zip(todo, futures, strict=True):
                result = future.result()
                taken += 1
                record(item, result)
    except BrokenProcessPool:  # a worker was killed: save what finished, and the caller says so
        save_finished(taken)
        raise
    except BaseException:  # Ctrl-C or a failure: stop the workers now (waiting on them could take long)
        terminate_workers(pool)
        save_finished(taken)  # tasks after the one waited on may have finished: keep their rows
        raise
    finally:
        pool.shutdown(wait=True)


def _added_placers_for_workers() -> dict[str, type | str]:
    """The placers registered in this process beyond the shipped ones, to hand to worker processes.

    Raises:
        InvalidArgument: for a class that a worker cannot import (defined inside a function).
    """
    import pickle

    added = added_placers()
    for name, target in added.items():
        try:
            pickle.dumps(target)
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            raise InvalidArgument(
                f"placer {name!r} is registered as a class that worker processes cannot import ({first_line(err)}): "
                "define it at a module's top level, or register it as 'module:Class', or run with jobs=1"
            ) from err
    return added


def rows_made_by(tasks: Sequence[Task], rows: Sequence[Row]) -> list[Row]:
    """The rows of ``rows`` that ``tasks`` made (a results file keeps earlier runs' rows too), in their order.

    Told by key, graph file and cluster: a copy of a graph file at another path has the same key, and the rows an
    earlier run saved of it were counted as this run's ("2 of 2 runs failed" where one had).
    """
    made = {(task_key(t), os.path.realpath(t.graph_path), cluster_slot(t.cluster)) for t in tasks}
    return [r for r in rows
            if (r.key, os.path.realpath(r.graph_path), cluster_slot(r.cluster_spec or r.cluster)) in made]


def stale_note(count: int, csv_path: Path) -> str:
    """The line that says how many saved rows of ``csv_path`` were timed on inputs that changed since, and why they go.

    ``count`` is what :func:`evaluate` hands its ``stale``; the command line and ``scripts/bench.py search`` print it.

    Examples:
        >>> stale_note(1, Path("out/results.csv"))[:57]
        'dropping 1 saved row of out/results.csv timed on inputs t'
    """
    return (f"dropping {_counted(count, 'saved row')} of {csv_path} timed on inputs that changed since (a graph or "
            "cluster file's content, a placer's revision, a file an option names): not compared with new rows; "
            "those asked for again run anew")


def unplaced(rows: Sequence[Row]) -> list[tuple[Row, str | None]]:
    """The graph and cluster pairs of ``rows`` that no row placed within memory: one row of each, and why.

    A pair (graph file, cluster, simulator mode) is unplaced when at least one of its rows ran out of memory
    and none fits (the others failed). The reason is
    :func:`~gnplace.sim.bounds.memory_shortfall`'s where no placement can fit, an impossible memory budget
    (``gnplace place`` refuses it before any placer runs), else None: every placer tried ran it out of memory.

    Args:
        rows (Sequence[Row]): the rows of one evaluation.

    Returns:
        list[tuple[Row, str | None]]: an out-of-memory row of each unplaced pair, in the order of ``rows``, and
        the shortfall that no placement can fit, or None.

    Examples:
        >>> unplaced([])
        []
    """
    from gnplace.sim.bounds import memory_shortfall

    pairs: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        pairs[(r.graph_path, r.cluster_spec or r.cluster, r.mode)].append(r)
    found = []
    for members in pairs.values():
        over = [r for r in members if r.oom and not r.error]
        if not over or any(not r.error and not r.oom and math.isfinite(r.step_time_s) for r in members):
            continue  # one fits, or none was timed (every run failed: counted as failed runs)
        first = over[0]
        spec = first.cluster_spec or first.cluster
        try:
            short = memory_shortfall(_graph(first.graph_path, _stamp(first.graph_path)), _cluster(spec, _stamp(spec)))
        except GnplaceError:  # the file changed or went since the run: the row still says what happened
            short = None
        found.append((first, short))
    return found
