"""Which graph files a list of paths names: files, folders (their manifest's split, or every ``*.gnpg``).

:func:`collect_graphs` is what ``gnplace evaluate -g``, pretraining's ``data.families``, ``scripts/train.py`` and the
benchmarks read their graphs through; :func:`check_graph_file` says what a path that is no graph file is instead (a
folder, a device, nothing).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gnplace.exceptions import GnplaceError, InvalidArgument, InvalidGraph
from gnplace.graph_io import FORMAT as GRAPH_FORMAT
from gnplace.limits import check_regular_file

__all__ = ["check_graph_file", "collect_graphs"]


def collect_graphs(specs: Sequence[str | os.PathLike[str]] | str | os.PathLike[str], *,
                   split: str = "all") -> list[Path]:
    """Graph files named by ``specs``: files, or folders (their manifest's graphs of ``split``, or every ``*.gnpg``).

    ``specs`` is a list of paths, or one path.

    Raises:
        InvalidArgument: if ``specs`` is neither a path nor a list of paths (``None``).
        GnplaceError: if a path does not exist, a folder holds no graphs, or ``split`` is asked of a folder
            without a manifest.
        InvalidGraph: if a path named, listed by a manifest or matched by ``*.gnpg`` is a folder or not a regular
            file (a device such as ``/dev/null``, a pipe).
    """
    from gnplace.datasets import load_manifest

    if isinstance(specs, str | os.PathLike):  # one path: its characters were taken for paths ("g: no such ...")
        specs = [specs]
    specs = list(specs) if isinstance(specs, Iterable) else specs
    if not isinstance(specs, list) or not all(isinstance(spec, str | os.PathLike) for spec in specs):
        import reprlib

        raise InvalidArgument(f"graphs are given by paths (a str or os.PathLike, or a list of them), "
                              f"got {reprlib.repr(specs)}")
    paths: list[Path] = []
    for spec in specs:
        if not str(spec).strip():  # Path("") is the current folder: -g "" evaluated every graph found there
            raise GnplaceError("an empty graph path: name a graph file or a folder (. for the current one)")
        path = Path(spec)
        if path.is_dir():
            if (path / "manifest.json").exists():
                found = [path / f for f in _manifest_files(path, load_manifest(path), split)]
                where = f" (listed by {path / 'manifest.json'})"
            elif split != "all":
                raise GnplaceError(f"{path}: no manifest.json, so no {split!r} split to choose (--split all takes "
                                   "every graph of the folder)")
            else:
                found, where = sorted(path.glob("*.gnpg")), f" (matched by {path / '*.gnpg'})"
                left_out = _json_graph_files(path) if found else []
                if left_out:  # read without a word where .gnpg files were beside them
                    import warnings

                    count = f"{len(left_out)} plain-JSON graph file{'s' if len(left_out) != 1 else ''}"
                    warnings.warn(f"{path}: {count} left out ({left_out[0].name}"
                                  f"{', ...' if len(left_out) > 1 else ''}): a folder's graphs are its *.gnpg files; "
                                  "name them one by one, or save them as .gnpg", stacklevel=2)
            if not found and path.suffix == ".gnpg":  # named like a graph file, which it is not
                raise InvalidGraph(f"{path}: is a folder holding no graphs, not a graph file")
            if not found:
                raise GnplaceError(f"{path}: no graphs (split {split!r}){_json_graphs_note(path)}")
            for graph_path in found:
                check_graph_file(graph_path, where)
            paths.extend(found)
        elif path.exists():
            check_graph_file(path, "")
            paths.append(path)
        else:
            import re

            hint = ""
            if re.fullmatch(r"[\w.]+:\w+", str(spec)):  # a module:factory reference, which gnplace place takes
                hint = (" (a module:factory reference: evaluate reads graph files and folders; save the model's "
                        "graph first: gnplace.graph_io.save_graph(gnplace.importers.torch.from_module(...), PATH))")
            elif any(c in str(spec) for c in "*?["):  # quoted, so no shell expanded it: paths are taken as they are
                import glob

                matched = len(glob.glob(str(spec)))
                if matched:
                    hint = (f" (a pattern, which matches {matched} path{'s' if matched != 1 else ''} but is not "
                            "expanded here: leave it unquoted for the shell to expand, or name their folder)")
            raise GnplaceError(f"{path}: no such graph file or folder{hint}")
    unique: dict[Path, Path] = {}
    for path in paths:  # a file named twice (itself and in its folder) is one graph
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


#: Largest ``.json`` file :func:`_json_graph_files` reads to tell whether it holds a graph, bytes.
_JSON_SNIFF_BYTES = 64 * 2**20


def _json_graph_files(folder: Path) -> list[Path]:
    """The ``*.json`` files of ``folder`` (its manifest aside) that hold a gnplace graph (``gnplace import -o m.json``).

    Other JSON files (a placement, a summary) are none of them; a file past :data:`_JSON_SNIFF_BYTES` is not read.
    """
    graphs = []
    for path in sorted(folder.glob("*.json")):
        if path.name == "manifest.json" or not path.is_file() or path.stat().st_size > _JSON_SNIFF_BYTES:
            continue
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict) and data.get("format") == GRAPH_FORMAT:
            graphs.append(path)
    return graphs


def _json_graphs_note(folder: Path) -> str:
    """What to do with the ``*.json`` files of a ``folder`` of no ``*.gnpg`` file, which a folder's graphs never are.

    ``gnplace import -o model.json`` writes a graph as plain JSON, and every command reads such a file named alone;
    a folder of them said "no graphs" and nothing of its files.
    """
    count = sum(1 for f in folder.glob("*.json") if f.is_file()) if not (folder / "manifest.json").exists() else 0
    if not count:
        return ""
    files = f"its {count} .json file{'s are' if count != 1 else ' is'}"
    return (f": a folder's graphs are its *.gnpg files, and {files} read only where named one by one "
            "(or saved as .gnpg)")


def check_graph_file(path: Path, where: str) -> None:
    """Refuse a ``path`` that is not a regular file, saying what it is; ``where`` tells how it was found.

    Raises:
        GnplaceError: if ``path`` does not exist.
        InvalidGraph: if it is a folder or not a regular file (a device, a pipe or a socket).
    """
    check_regular_file(path, "graph file", InvalidGraph, missing=GnplaceError, where=where)


def _manifest_files(folder: Path, manifest: Any, split: str) -> list[str]:
    """The graph files of ``split`` listed by a dataset folder's manifest, each entry checked.

    Raises:
        InvalidGraph: if ``graphs`` is not a list of objects with a string ``file`` (and ``split``).
    """
    where = folder / "manifest.json"
    entries = manifest.get("graphs") if isinstance(manifest, dict) else None
    if not isinstance(entries, list):
        raise InvalidGraph(f"{where}: 'graphs' must be a list of entries, got {type(entries).__name__}")
    files = []
    for k, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str) or not entry["file"]:
            raise InvalidGraph(f"{where}: graph entry {k} needs a 'file' name (a string), got {entry!r:.80}")
        if split != "all" and not isinstance(entry.get("split"), str):
            raise InvalidGraph(f"{where}: graph entry {k} needs a 'split' (a string), got {entry.get('split')!r:.40}")
        if split == "all" or entry["split"] == split:
            files.append(entry["file"])
    return files
