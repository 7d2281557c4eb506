"""Datasets of training graphs drawn from the families, with a manifest and a seeded split.

A dataset folder holds one ``.gnpg`` file per graph and ``manifest.json``::

    {"format": "gnplace-dataset", "version": 1, "family": "cifar10", "seed": 0, "optimizer": "sgd",
     "graphs": [{"file": "cifar10_000.gnpg", "name": ..., "family": ..., "ops": ..., "groups": ...,
                 "edges": ..., "total_flops": ..., "param_bytes": ..., "knobs": {...},
                 "split": "train" | "test"}, ...]}

Everything is a function of ``(family, count, seed)``: graph ``i`` is drawn with the generator
``numpy.random.default_rng([seed, i])``, redrawn (with the same generator) until its op count lies
in ``[min_ops, max_ops]``, and the test split is the first ``test_count`` entries of a permutation
drawn from ``default_rng(seed)``. The same arguments always write byte-identical files.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gnplace.exceptions import GnplaceError, InvalidArgument
from gnplace.graph import OpGraph
from gnplace.graph_io import save_graph, write_atomically
from gnplace.limits import as_path, is_whole

__all__ = ["generate_graph", "generate_dataset", "load_manifest", "write_manifest", "graph_summary"]


#: Most graphs one dataset holds: a million files of a few hundred KiB each is already past most disks.
MAX_GRAPHS = 1_000_000
#: The ``version`` of the manifests :func:`write_manifest` writes and :func:`load_manifest` reads.
MANIFEST_VERSION = 1


def _family(name: str) -> Any:
    from gnplace.families import get_family

    get_family(name)  # raises UnknownName with the choices
    return importlib.import_module(f"gnplace.families.{name}")


#: The fields of a manifest entry that :func:`graph_summary` gives.
SUMMARY_KEYS = ("name", "ops", "groups", "edges", "total_flops", "param_bytes")


def graph_summary(graph: OpGraph) -> dict[str, Any]:
    """Size statistics of a graph, as stored in a manifest (FLOP and bytes per step): :data:`SUMMARY_KEYS`."""
    return {
        "name": graph.name,
        "ops": graph.num_ops,
        "groups": graph.num_groups,
        "edges": graph.num_edges,
        "total_flops": graph.total_flops,
        "param_bytes": graph.total_param_bytes,
    }


def generate_graph(
    family: str, index: int, *, seed: int = 0, optimizer: str = "sgd", min_ops: int = 200, max_ops: int = 5000,
    max_draws: int = 20,
) -> tuple[OpGraph, dict[str, Any]]:
    """Graph ``index`` of ``family`` under ``seed``, and the knobs it was drawn with.

    Raises:
        GnplaceError: if no draw within ``max_draws`` has an op count in ``[min_ops, max_ops]``.
        InvalidArgument: if ``seed``, ``index`` or ``min_ops`` is not a whole number >= 0 (numpy's own errors named
            neither), ``max_ops`` is no whole number >= ``min_ops`` (no draw could be kept: every draw was built
            before the error came) or ``max_draws`` no whole number >= 1.
    """
    from gnplace.importers.torch import from_module

    module = _family(family)
    for name, value, low in (("seed", seed, 0), ("index", index, 0), ("min_ops", min_ops, 0),
                             ("max_ops", max_ops, min_ops), ("max_draws", max_draws, 1)):
        if not is_whole(value) or value < low:
            at_least = f"min_ops ({min_ops})" if name == "max_ops" else low
            raise InvalidArgument(f"generate_graph: {name} must be a whole number >= {at_least}, got {value!r}")
    seed, index = int(seed), int(index)  # numpy integers too: they go into the graph's JSON meta, which refused them
    rng = np.random.default_rng([seed, index])
    for _ in range(max_draws):
        knobs = module.random_knobs(rng)
        model, inputs = module.sample(rng, **knobs)
        graph = from_module(
            model, inputs, optimizer=optimizer, name=f"{family}_{index:03d}",
            meta={"family": family, "seed": seed, "index": index, "optimizer": optimizer, "knobs": _jsonable(knobs)},
        )
        if min_ops <= graph.num_ops <= max_ops:
            return graph, knobs
    raise GnplaceError(f"{family}: no graph with {min_ops}..{max_ops} ops in {max_draws} draws for index {index}")


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def generate_dataset(
    family: str, count: int, out: str | os.PathLike[str], *, seed: int = 0, test_count: int | None = None,
    optimizer: str = "sgd", progress: Callable[[int, OpGraph], None] | None = None, resume: bool = True,
    overwrite: bool = False,
) -> Path:
    """Write ``count`` graphs of ``family`` and their manifest to ``out``; returns the manifest path.

    Args:
        family (str): one of :data:`gnplace.families.FAMILIES`.
        count (int): how many graphs to write.
        out (str or os.PathLike): folder to write the graphs and ``manifest.json`` to (created if missing).
        seed (int, optional): seed of the graphs and of the split (default: 0).
        test_count (int, optional): graphs in the test split (default: a quarter of ``count``).
        optimizer (str, optional): ``"sgd"``, ``"momentum"``, ``"adam"`` or ``"adamw"`` (default: ``"sgd"``).
        progress (callable, optional): called with ``(index, graph)`` after each graph.
        resume (bool, optional): keep graph files that already exist from an interrupted run with
            the same arguments instead of drawing them again (default: :obj:`True`). Graphs of
            ``family`` an interrupted run of a larger ``count`` left beyond this one's are deleted once
            the manifest is written, so the folder holds the dataset the manifest lists.
        overwrite (bool, optional): replace a finished dataset of other arguments in ``out`` (its graph
            files that the new one does not name are deleted); without it, that is refused, and a
            finished dataset of the same arguments is written again byte for byte: a graph file that no
            longer matches its manifest entry (edited since) is drawn again (default: :obj:`False`).

    Raises:
        InvalidArgument: if ``out`` holds a finished dataset of other arguments (family, count, seed,
            optimizer or test split) and ``overwrite`` is off, ``seed`` is negative, ``count`` is
            not from 1 to :data:`MAX_GRAPHS`, ``test_count`` not from 0 to ``count``, or another run
            writes into ``out`` (it holds its :mod:`~gnplace.runlock` lock).
        UnknownName: for an unknown family or optimizer (before any folder is made).
        InvalidArgument: if ``out`` is no ``str`` or ``os.PathLike`` (None).
    """
    from gnplace.families import get_family
    from gnplace.importers import check_optimizer

    get_family(family)  # an unknown family is refused before any folder is made
    check_optimizer(optimizer)  # so is an unknown optimizer (once refused after an old manifest was deleted)
    if not is_whole(seed) or seed < 0:
        raise InvalidArgument(f"seed must be a whole number >= 0, got {seed!r}")
    if not is_whole(count) or not 1 <= count <= MAX_GRAPHS:
        raise InvalidArgument(f"count must be a whole number from 1 to {MAX_GRAPHS:,}, got {count!r}")
    seed, count = int(seed), int(count)  # numpy integers too: they go into the graphs' JSON meta
    test_count = count // 4 if test_count is None else test_count
    if not is_whole(test_count) or not 0 <= test_count <= count:
        raise InvalidArgument(f"test_count must be a whole number from 0 to count ({count}), got {test_count!r}")
    out = as_path(out, "dataset folder")  # None was pathlib's TypeError
    test = set(np.random.default_rng(seed).permutation(count)[:test_count].tolist())
    names = [f"{family}_{i:03d}.gnpg" for i in range(count)]
    wanted = {"family": family, "seed": seed, "optimizer": optimizer, "files": names,
              "test": sorted(names[i] for i in test)}
    from gnplace.runlock import folder_lock

    with folder_lock(out, "--out"):  # two runs into one folder left a manifest that named the other's graphs
        stale = _other_dataset(out, wanted, overwrite)
        listed = _listed_entries(out)  # a manifest left now is a finished dataset of these arguments: its entries
        if not (out / "manifest.json").exists():
            if not overwrite:
                _refuse_other_graphs(out, names, family, seed, optimizer)
            stale += _interrupted_leftovers(out, family, set(names), None if overwrite else (seed, optimizer))
        out.mkdir(parents=True, exist_ok=True)
        entries = []
        for i in range(count):
            path = out / f"{family}_{i:03d}.gnpg"
            _drop_link(path)
            graph = None
            if resume and path.exists():
                from gnplace.graph_io import load_graph

                try:
                    cached = load_graph(path)
                    drawn = tuple(cached.meta.get(key) for key in ("family", "seed", "index", "optimizer"))
                    entry = listed.get(path.name)
                    as_listed = entry is None or {k: entry.get(k) for k in SUMMARY_KEYS} == graph_summary(cached)
                    if drawn == (family, seed, i, optimizer) and as_listed:  # graph i of this dataset, not another's
                        graph = cached  # file of that name, nor one edited since the manifest was written
                except GnplaceError:
                    graph = None
            if graph is None:
                graph, _ = generate_graph(family, i, seed=seed, optimizer=optimizer)
                save_graph(graph, path)
            entries.append({"file": path.name, "family": family, **graph_summary(graph),
                            "knobs": graph.meta.get("knobs", {}), "split": "test" if i in test else "train"})
            if progress is not None:
                progress(i, graph)
        manifest = write_manifest(out, family=family, seed=seed, optimizer=optimizer, entries=entries)
        for name in stale:  # the replaced dataset's graphs that the new one does not name
            if (out / name).is_file():  # (a folder of that name is not a graph: left alone)
                (out / name).unlink()
    return manifest


def _refuse_other_graphs(out: Path, names: list[str], family: str, seed: int, optimizer: str) -> None:
    """Refuse to draw over graph files that another run drew (another family, seed or optimizer), with no manifest.

    Without a manifest the folder holds an interrupted run, whose graphs this one keeps or draws again;
    a graph of the same name drawn with other arguments is another dataset's, not to be lost. A file
    that does not load is an interrupted write, drawn again.

    Raises:
        InvalidArgument: naming the first such file.
    """
    from gnplace.graph_io import load_graph

    for name in names:
        path = out / name
        if not path.is_file():
            continue
        try:
            meta = load_graph(path).meta
        except GnplaceError:
            continue
        drawn = (meta.get("family"), meta.get("seed"), meta.get("optimizer"))
        if drawn != (family, seed, optimizer):
            raise InvalidArgument(f"{path} holds a graph drawn with other arguments ({drawn[0]}, seed {drawn[1]}, "
                                  f"{drawn[2]}): use another folder, or overwrite it (overwrite=True; --overwrite of "
                                  "gnplace generate and scripts/make_datasets.py)")


def _interrupted_leftovers(
    out: Path, family: str, names: set[str], drawn_with: tuple[int, str] | None = None
) -> list[str]:
    """Graph files an interrupted, larger run of ``family`` left in ``out`` that ``names`` does not hold.

    Only files named as this function's graphs (``family_NNN.gnpg``) whose graph says it was drawn for
    ``family`` count (and, given ``drawn_with``, with that seed and optimizer: a graph of another seed is
    another dataset's, deleted only under ``overwrite``): a finished dataset would not list them, so
    they go once the manifest is written.
    """
    import re

    from gnplace.graph_io import load_graph

    pattern = re.compile(rf"{re.escape(family)}_\d{{3,}}\.gnpg")
    leftovers = []
    for path in sorted(out.glob(f"{family}_*.gnpg")) if out.is_dir() else []:
        if path.name in names or not pattern.fullmatch(path.name):
            continue
        try:
            meta = load_graph(path).meta
        except GnplaceError:
            continue
        drawn = meta.get("family") == family and (
            drawn_with is None or (meta.get("seed"), meta.get("optimizer")) == drawn_with)
        if drawn:
            leftovers.append(path.name)
    return leftovers


def _listed_entries(out: Path) -> dict[str, dict[str, Any]]:
    """The entries of the manifest in ``out`` by file name (``{}`` where there is none, or none readable)."""
    try:
        return {str(e["file"]): e for e in load_manifest(out)["graphs"] if isinstance(e, dict)}
    except (GnplaceError, KeyError, TypeError):
        return {}


def _other_dataset(out: Path, wanted: dict[str, Any], overwrite: bool) -> list[str]:
    """The graph files of a finished dataset in ``out`` that ``wanted`` would not write again.

    A dataset of other arguments that ``overwrite`` replaces loses its ``manifest.json`` at once: the
    folder is then an interrupted run's until the new manifest is written, never a manifest listing
    graphs that were replaced.

    Raises:
        InvalidArgument: if that dataset was drawn with other arguments and ``overwrite`` is off.
    """
    if not (out / "manifest.json").exists():
        return []  # nothing there, or an interrupted run (the manifest is written last)
    try:
        old = load_manifest(out)
        entries = old["graphs"]
        files = [str(e["file"]) for e in entries]
        tests = sorted(str(e["file"]) for e in entries if e.get("split") == "test")
        have = {"family": old.get("family"), "seed": old.get("seed"), "optimizer": old.get("optimizer"),
                "files": files, "test": tests}
    except (GnplaceError, KeyError, TypeError) as err:
        if overwrite:
            (out / "manifest.json").unlink()
            return []
        raise InvalidArgument(f"{out} holds a manifest.json that is not a gnplace dataset's ({err}): use another "
                              "folder, or overwrite it (overwrite=True; --overwrite of gnplace generate and "
                              "scripts/make_datasets.py)") from err
    if have == wanted:
        return []
    if not overwrite:
        raise InvalidArgument(
            f"{out} holds another dataset ({have['family']}, {len(files)} graph{'' if len(files) == 1 else 's'}, "
            f"seed {have['seed']}, {have['optimizer']}, {len(tests)} in the test split): use another folder, or "
            "overwrite it (overwrite=True; --overwrite of gnplace generate and scripts/make_datasets.py)"
        )
    keep = set(wanted["files"])
    (out / "manifest.json").unlink()  # an interruption from here on leaves no manifest over a mix of two datasets
    # only graph files: a manifest listing itself or notes.txt had the new manifest and the notes deleted
    return [name for name in files if name not in keep and Path(name).name == name and name.endswith(".gnpg")]


def _drop_link(path: Path) -> None:
    """Remove ``path`` if it is a symbolic link, so that the file written there replaces the link, not its target.

    A dataset folder someone shared held ``ptb_000.gnpg`` linked to a file elsewhere (``~/.bashrc``, or a path that
    did not exist yet): ``generate`` into it wrote the graph through the link, over that file, and its manifest
    listed a link out of the folder, which :func:`load_manifest` refuses. Graphs and the manifest are files of
    the folder itself.
    """
    if path.is_symlink():
        path.unlink()


def write_manifest(out: Path, *, family: str, seed: int, optimizer: str, entries: list[dict[str, Any]]) -> Path:
    """Write ``out/manifest.json`` (atomically) for graph ``entries``; returns its path."""
    manifest = {"format": "gnplace-dataset", "version": MANIFEST_VERSION, "family": family, "seed": seed,
                "optimizer": optimizer, "graphs": entries}
    target = out / "manifest.json"
    _drop_link(target)
    write_atomically(target, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())  # a failure: no .tmp
    return target


def load_manifest(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a dataset folder's ``manifest.json``.

    A manifest written by hand may leave ``version`` out; one that gives it must give version 1.

    Raises:
        GnplaceError: if it is missing, not a gnplace dataset manifest, of another version (a newer gnplace's), or
            names a graph file outside ``folder`` (an absolute path, a ``..``, a symbolic link leading out).
        InvalidArgument: if ``folder`` is no ``str`` or ``os.PathLike`` (None).
    """
    from gnplace.limits import parse_json, read_file

    path = as_path(folder, "dataset folder") / "manifest.json"  # None was pathlib's TypeError
    try:  # within the readers' limits: a pipe named manifest.json hung generate and evaluate
        data = parse_json(read_file(path, GnplaceError, "dataset manifest"), GnplaceError, str(path))
    except GnplaceError as err:
        raise GnplaceError(f"{path}: not a readable dataset manifest ({str(err).removeprefix(f'{path}: ')})") from err
    if not isinstance(data, dict) or data.get("format") != "gnplace-dataset":
        raise GnplaceError(f"{path}: not a gnplace dataset manifest")
    version = data.get("version", MANIFEST_VERSION)
    if type(version) is not int or version != MANIFEST_VERSION:  # (true and 1.0 are == 1)
        raise GnplaceError(f"{path}: dataset manifest version {version!r}; this gnplace reads version "
                           f"{MANIFEST_VERSION} (a newer gnplace's dataset: generate it again with this one)")
    _check_entry_files(Path(folder), data.get("graphs"), path)
    return data  # type: ignore[no-any-return]


def _check_entry_files(folder: Path, entries: Any, path: Path) -> None:
    """Refuse a manifest whose entries name graph files outside ``folder``, its dataset folder.

    A manifest lists the graphs beside it: an absolute path, a ``..`` or a symbolic link leading out of the
    folder made ``evaluate`` (and the scripts that read a dataset) read a file the user never named, such as
    a graph of their own elsewhere, from a dataset someone shared. Entries that are no mapping or name no file
    are left to their readers, which say what is missing.

    Raises:
        GnplaceError: naming the entry, the file it names and ``path``, the manifest.
    """
    if not isinstance(entries, list):
        return
    inside = folder.resolve()
    for k, entry in enumerate(entries):
        name = entry.get("file") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            continue
        if not _inside(folder, name, inside):
            raise GnplaceError(f"{path}: graph entry {k} names {name!r:.80}, which is not a file inside the dataset's "
                               "folder (an absolute path, a '..' or a symbolic link leading out of it or in a loop); "
                               "a manifest lists the graphs beside it")


def _inside(folder: Path, name: str, resolved: Path) -> bool:
    """Whether ``folder / name`` stays in ``folder`` (``resolved``: its real path), symbolic links followed."""
    given = Path(name)
    if "\x00" in name or given.is_absolute() or ".." in given.parts:  # (a NUL: no path at all)
        return False
    try:
        return (folder / given).resolve().is_relative_to(resolved)
    except (OSError, RuntimeError):  # a loop of symbolic links (RuntimeError before Python 3.13)
        return False
