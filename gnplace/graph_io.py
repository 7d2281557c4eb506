"""Read and write :class:`~gnplace.graph.OpGraph` files, and convert to and from networkx.

File format (``*.gnpg``, version 2): gzip-compressed UTF-8 JSON with columnar fields::

    {"format": "gnplace-opgraph", "version": 2, "name": ..., "meta": {...},
     "nodes": {"name": [...], "op_type": [...], "op_kind": [...], "phase": [...], "flops": [...],
               "out_bytes": [...], "param_bytes": [...], "group": [...], "module": [...]},
     "edges": {"src": [...], "dst": [...], "bytes": [...]},
     "cost_s": {"<device kind>": [seconds or null, ...]}}

``op_type`` is the raw op type its importer gave (aten, ONNX, ...), ``op_kind`` the canonical kind
from :data:`gnplace.opkinds.KIND_VOCABULARY`, checked on reading. Version 1 is version 2 without
``op_kind``: it is still read, the kinds derived from op type and phase
(:func:`gnplace.opkinds.canonical_kind`); files are always written as version 2.

Sizes are integers (bytes), FLOP and seconds are floats written with Python's shortest exact
``repr``, so a round trip is exact. Files are written deterministically (sorted keys, gzip header
without a timestamp): the same graph always gives the same bytes. A path ending in ``.json`` is
written and read uncompressed.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import gzip
import json
import math
import numbers
import os
import re
import reprlib
import stat
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gnplace.exceptions import InvalidArgument, InvalidGraph
from gnplace.graph import PHASES, OpGraph, check_graph
from gnplace.limits import (
    MAX_COUNT,
    MAX_DEPTH,
    MAX_EDGES,
    MAX_FILE_BYTES,
    MAX_INFLATION,
    MAX_NODES,
    as_float,
    as_path,
    gunzip,
    inflation_limit,
    parse_json,
    read_file,
)
from gnplace.opkinds import canonical_kind
from gnplace.units import counted

__all__ = [
    "save_graph", "graph_file_bytes", "load_graph", "graph_to_dict", "graph_from_dict", "to_networkx", "from_networkx",
]

FORMAT = "gnplace-opgraph"
#: The version :func:`save_graph` writes.
VERSION = 2
#: The versions :func:`load_graph` reads (version 1 has no ``op_kind``: kinds are derived).
READABLE_VERSIONS = (1, 2)


def graph_to_dict(graph: OpGraph) -> dict[str, Any]:
    """The JSON-ready dictionary of ``graph`` in file format version 2."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": graph.name,
        "meta": graph.meta,
        "nodes": {
            "name": list(graph.node_names),
            "op_type": list(graph.op_types),
            "op_kind": list(graph.op_kinds),
            "phase": [PHASES[p] for p in graph.phase.tolist()],
            "flops": graph.flops.tolist(),
            "out_bytes": graph.out_bytes.tolist(),
            "param_bytes": graph.param_bytes.tolist(),
            "group": graph.group.tolist(),
            "module": list(graph.module),
        },
        "edges": {"src": graph.edge_src.tolist(), "dst": graph.edge_dst.tolist(), "bytes": graph.edge_bytes.tolist()},
        "cost_s": {k: [None if math.isnan(x) else x for x in v.tolist()] for k, v in sorted(graph.cost_s.items())},
    }


def _column(container: dict[str, Any], key: str, kind: str, length: int | None, limit: int = MAX_NODES) -> list[Any]:
    """``container[key]`` checked to be a list of ``length`` values of ``kind``.

    Kinds: ``"str"``; ``"str|int"`` (a name or an integer); ``"int"`` (whole numbers, floats with no
    fraction allowed, at most :data:`~gnplace.limits.MAX_COUNT` in size); ``"number"`` (finite int or
    float, no larger than that); ``"number?"`` (a number or ``None``). Booleans and strings are never
    numbers.

    Raises:
        KeyError: if the key is missing (reported by the caller as a missing field).
        InvalidGraph: naming the field, the position and the value found.
    """
    value = container[key]
    if not isinstance(value, list):
        raise InvalidGraph(f"field {key!r} must be a list, found {type(value).__name__}")
    if len(value) > limit:
        raise InvalidGraph(f"field {key!r} has {counted(len(value), 'entry', 'entries')}, over the limit of {limit}")
    if length is not None and len(value) != length:
        raise InvalidGraph(f"field {key!r} has {counted(len(value), 'entry', 'entries')}, expected {length}")
    if _plainly_valid(value, kind):  # else the checks below, item by item, name the first bad one
        return value
    if kind == "str":
        bad = next((i for i, x in enumerate(value) if not isinstance(x, str)), None)
        if bad is not None:
            raise InvalidGraph(f"field {key!r}[{bad}] must be a string, found {value[bad]!r}")
        return value
    if kind == "str|int":
        bad = next((i for i, x in enumerate(value) if type(x) not in (str, int)), None)
        if bad is not None:
            raise InvalidGraph(f"field {key!r}[{bad}] must be a name or an integer, found {value[bad]!r}")
        big = next((i for i, x in enumerate(value) if type(x) is int and abs(x) > MAX_COUNT), None)
        if big is not None:
            raise InvalidGraph(f"field {key!r}[{big}] is too large ({reprlib.repr(value[big])}; the limit is "
                               f"{MAX_COUNT})")
        return value
    for i, x in enumerate(value):
        if x is None and kind == "number?":
            continue
        if type(x) not in (int, float):
            raise InvalidGraph(f"field {key!r}[{i}] must be a number, found {x!r}")
        if abs(x) > MAX_COUNT or not math.isfinite(x):  # (an int past a float's range: isfinite overflowed)
            raise InvalidGraph(f"field {key!r}[{i}] is too large ({reprlib.repr(x)}; the limit is {MAX_COUNT})")
        if kind == "int" and isinstance(x, float) and not x.is_integer():
            raise InvalidGraph(f"field {key!r}[{i}] must be a whole number, found {x!r}")
    return value


def _plainly_valid(value: list[Any], kind: str) -> bool:
    """Whether ``_column`` would accept every item of ``value`` as ``kind``, told from whole-list checks in C.

    True only where the item-by-item checks pass: names all of type ``str``; whole numbers all of type ``int`` within
    :data:`~gnplace.limits.MAX_COUNT`; numbers all ``int`` so, or all ``float`` (``None`` beside them for
    ``"number?"``), finite, within it and, for ``"int"``, with no fraction. False is no verdict: the checks run.
    Those checks took 1.3 s of loading a 280,000-op graph.
    """
    kinds = set(map(type, value))
    if kind == "str" or kind == "str|int":
        return kinds <= {str}
    if kinds <= {int}:
        return not value or (min(value) >= -MAX_COUNT and max(value) <= MAX_COUNT)
    if not kinds <= ({float, type(None)} if kind == "number?" else {float}):
        return False
    numbers = np.array([x for x in value if x is not None] if type(None) in kinds else value, dtype=np.float64)
    within = bool(np.all(np.abs(numbers) <= MAX_COUNT))  # NaN compares False; so do infinities here
    return within and (kind != "int" or bool(np.all(numbers == np.floor(numbers))))


def graph_from_dict(data: Any, *, source: str = "graph") -> OpGraph:
    """Build an :class:`OpGraph` from the dictionary :func:`graph_to_dict` writes.

    Version 1 dictionaries (no ``op_kind``) are read too: their op kinds are derived from op type
    and phase.

    Raises:
        InvalidGraph: if the dictionary is not a gnplace graph of a known version, or the graph
            it describes is invalid (an ``op_kind`` outside the vocabulary, a cycle, ...).
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InvalidGraph(f"{source}: not a gnplace graph file (no 'format': {FORMAT!r} field)")
    version = data.get("version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise InvalidGraph(
            f"{source}: graph file version {version!r} is not supported "
            f"(this gnplace reads versions {' and '.join(map(str, READABLE_VERSIONS))})"
        )
    try:
        nodes, edges = data["nodes"], data["edges"]
        if not isinstance(nodes, dict) or not isinstance(edges, dict):
            raise InvalidGraph("'nodes' and 'edges' must be mappings of columns")
        names = _column(nodes, "name", "str", None, MAX_NODES)
        n = len(names)
        columns = {key: _column(nodes, key, kind, n) for key, kind in (
            ("op_type", "str"), ("phase", "str|int"), ("group", "int"), ("flops", "number"), ("out_bytes", "int"),
            ("param_bytes", "int"))}
        module = _column(nodes, "module", "str", n) if "module" in nodes else None
        op_kinds = _column(nodes, "op_kind", "str", n) if version >= 2 else None
        src = _column(edges, "src", "int", None, MAX_EDGES)
        dst = _column(edges, "dst", "int", len(src), MAX_EDGES)  # (the default limit is MAX_NODES: 20,000,000)
        edge_bytes = _column(edges, "bytes", "int", len(src), MAX_EDGES)
        raw_cost = data.get("cost_s", {})
        if not isinstance(raw_cost, dict):
            raise InvalidGraph("'cost_s' must map device kinds to lists of seconds")
        cost_s = {
            str(k): np.array([np.nan if x is None else x for x in _column(raw_cost, k, "number?", n)], dtype=np.float64)
            for k in raw_cost
        }
        name, meta = data.get("name", "graph"), data.get("meta", {})
        if not isinstance(name, str) or not isinstance(meta, dict):
            raise InvalidGraph("'name' must be a string and 'meta' a mapping")
        return OpGraph(
            names,
            np.stack([np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)], axis=1) if src else [],
            flops=columns["flops"],
            out_bytes=columns["out_bytes"],
            param_bytes=columns["param_bytes"],
            edge_bytes=edge_bytes,
            op_types=columns["op_type"],
            phase=columns["phase"],
            group=columns["group"],
            module=module,
            cost_s=cost_s,
            name=name,
            meta=meta,
            op_kinds=op_kinds,
        )
    except KeyError as err:
        raise InvalidGraph(f"{source}: graph file lacks field {err.args[0]!r}") from err
    except InvalidGraph as err:
        raise InvalidGraph(f"{source}: {err}") from err
    except (TypeError, ValueError, AttributeError, OverflowError) as err:  # (an int past a float's range)
        raise InvalidGraph(f"{source}: malformed graph file ({err})") from err


def save_graph(graph: OpGraph, path: str | os.PathLike[str]) -> Path:
    """Write ``graph`` to ``path`` atomically: ``.json`` as plain JSON, any other name (``.gnpg``) as gzip JSON.

    :func:`load_graph` tells the two apart by the file's bytes, not its name. (``gnplace import -o`` takes only
    ``.gnpg``, ``.json.gz`` and ``.json``: a command's output named otherwise is refused.) A ``.onnx`` name is
    refused: :func:`load_graph` reads it as an ONNX model.

    The file is first written beside its target and then renamed, so an interrupted save never
    leaves a truncated graph where a good one was. Missing parent folders are made.

    Args:
        graph (OpGraph): the graph to write.
        path (str or os.PathLike): the file to write.

    Returns:
        Path: the path written.

    Raises:
        InvalidArgument: if ``graph`` is no graph, or ``path`` no ``str`` or ``os.PathLike`` (None) or a ``.onnx`` name.
        InvalidGraph: if the graph's ``meta`` cannot be written as JSON that :func:`load_graph` reads back as it
            is (a numpy integer or float32, NaN, a key that is not a string, nesting past the file's depth
            limit), or the file would pass what :func:`load_graph` reads (:data:`~gnplace.limits.MAX_NODES` ops,
            its size, a gzip file that unpacks more than :data:`~gnplace.limits.MAX_INFLATION` times); nothing is
            written then.
        OSError: naming ``path``, if it cannot be written (``IsADirectoryError`` for a folder,
            ``NotADirectoryError`` under a file, a read-only or full disk); a file there before stays as it was.
    """
    return write_atomically(path, graph_file_bytes(graph, path))


def graph_file_bytes(graph: OpGraph, path: str | os.PathLike[str]) -> bytes:
    """The bytes :func:`save_graph` writes to ``path`` (for a command that writes it with other files, all or none).

    Raises:
        InvalidArgument, InvalidGraph: as :func:`save_graph`.
    """
    check_graph(graph)  # (path, graph) the wrong way round was pathlib's TypeError
    path = as_path(path, "graph file")  # None too
    if path.suffix.lower() == ".onnx":  # written, and load_graph refused it by its name as an ONNX model
        raise InvalidArgument(f"graph file {path}: a .onnx name is read as an ONNX model, not a gnplace graph; "
                              "name it .gnpg, .json.gz or .json")
    _check_meta(graph.meta, graph.name)
    for count, limit, what in ((graph.num_ops, MAX_NODES, "ops"), (graph.num_edges, MAX_EDGES, "edges")):
        if count > limit:
            raise InvalidGraph(f"graph {graph.name!r} cannot be saved: it has {count:,} {what}, past the {limit:,} a "
                               "graph file may hold (load_graph would refuse the file)")
    text = json.dumps(graph_to_dict(graph), sort_keys=True, separators=(",", ":"), allow_nan=False)
    payload = text.encode("utf-8")  # (ASCII: json escapes the rest)
    if path.suffix.lower() != ".json":  # (OUT.JSON too: the names are matched without case)
        payload = gzip.compress(payload, compresslevel=9, mtime=0)
        if len(text) > inflation_limit(len(payload)):  # load_graph refuses it as a gzip bomb
            raise InvalidGraph(f"graph {graph.name!r} cannot be saved compressed: its {len(text):,} bytes of JSON "
                               f"pack into {len(payload):,}, more than the {MAX_INFLATION} times load_graph unpacks "
                               "(past 64 MiB; a meta of repeated text?); save it as .json, or shorten what repeats")
    if len(payload) > MAX_FILE_BYTES:
        raise InvalidGraph(f"graph {graph.name!r} cannot be saved: its file would be {len(payload):,} bytes, past the "
                           f"{MAX_FILE_BYTES:,} load_graph reads")
    return payload


def _check_meta(meta: Any, name: str) -> None:
    """Refuse a ``meta`` that JSON cannot hold as it is, or that :func:`load_graph` would refuse, before any write.

    That is a key that is not a string (written as one, so read back changed), a value of no JSON type (a numpy
    integer), NaN or an infinity, an integer of more digits than Python converts to text (10**5000: json's
    ValueError), or lists and mappings nested deeper than a graph file may be (:data:`~gnplace.limits.MAX_DEPTH`
    levels, the file's own object the first: the file was written, and ``load_graph`` refused it).

    Raises:
        InvalidGraph: naming the graph and the first such key or value.
    """
    stack: list[tuple[str, Any, int]] = [("meta", meta, 2)]  # (meta is the second level of the file)
    while stack:
        where, value, depth = stack.pop()
        if isinstance(value, dict | list | tuple) and depth > MAX_DEPTH:
            raise InvalidGraph(f"graph {name!r} cannot be saved: {where} is nested deeper than a graph file may be "
                               f"({MAX_DEPTH} levels, meta itself the second; load_graph would refuse the file)")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidGraph(f"graph {name!r} cannot be saved: {where} has key {key!r}, which is not a "
                                       "string (JSON would read it back as one)")
                stack.append((f"{where}[{key!r}]", item, depth + 1))
        elif isinstance(value, list | tuple):
            stack.extend((f"{where}[{i}]", item, depth + 1) for i, item in enumerate(value))
        elif value is not None and not isinstance(value, str | int | float):  # bool is an int
            raise InvalidGraph(f"graph {name!r} cannot be saved: {where} is {value!r} of type {type(value).__name__}, "
                               "not a JSON value (str, int, float, bool, None, list or mapping)")
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidGraph(f"graph {name!r} cannot be saved: {where} is {value!r}, which JSON does not allow")
        elif isinstance(value, int) and value.bit_length() > _INT_TEXT_BITS and not _int_as_text(value):
            raise InvalidGraph(f"graph {name!r} cannot be saved: {where} is an integer of more than "
                               f"{sys.get_int_max_str_digits()} digits, which Python's JSON cannot write or read")


#: Bits of an integer below which it converts to text whatever Python's digit limit (at least 640 digits).
_INT_TEXT_BITS = 2000


def _int_as_text(value: int) -> bool:
    """Whether ``value`` converts to text under Python's limit of digits (``sys.set_int_max_str_digits``)."""
    try:
        str(value)
    except ValueError:
        return False
    return True


def check_writable(path: str | os.PathLike[str], what: str = "output file", suffixes: Sequence[str] = ()) -> None:
    """Refuse an output file ``path`` that cannot be written, before any work is done.

    ``path`` must not be a folder (nor end with ``/``), its nearest existing ancestor must be a
    writable folder (the others are made when it is written), and when ``suffixes`` are given its
    suffix must be one of them.

    Raises:
        InvalidArgument: naming ``what`` (e.g. ``--output``), the path and what is wrong.
    """
    text = os.fspath(path)
    target = Path(text)
    if text.endswith(("/", os.sep)) or target.is_dir():
        raise InvalidArgument(f"{what} {text}: is a folder, expected a file")
    try:
        regular_target(target)
    except OSError:
        raise InvalidArgument(f"{what} {text}: is not a regular file (a device, pipe or socket), expected a file") \
            from None
    if suffixes and target.suffix.lower() not in suffixes:
        kind = f"unsupported file type {target.suffix!r}" if target.suffix else "no file type"  # ("'(none)'" before)
        raise InvalidArgument(f"{what} {text}: {kind}; expected one of {', '.join(suffixes)}")
    parent = check_parent_folder(text, what)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidArgument(f"{what} {text}: cannot write there, {parent} is not writable")


def check_parent_folder(path: str | os.PathLike[str], what: str) -> Path:
    """The nearest existing ancestor of ``path``, where a write makes the missing folders; refused unless a folder.

    Raises:
        InvalidArgument: naming ``what`` and the path, if that ancestor is a file (``FILE/sub``).
    """
    parent = Path(path).absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InvalidArgument(f"{what} {os.fspath(path)}: cannot write there, {parent} is not a folder")
    return parent


def fitting_name(name: str, room: int) -> str:
    """``name``, or a 16-digit digest of it where ``name`` and ``room`` more bytes would not fit a file name.

    File names hold 255 bytes: a legal 250-byte output name failed "File name too long" on the
    temporary file an atomic write goes through (``NAME.PID.RANDOM.tmp``), before anything was written.

    Examples:
        >>> fitting_name("p.json", 10)
        'p.json'
        >>> len(fitting_name("p" * 250, 10))
        16
    """
    if len(name.encode("utf-8", "surrogateescape")) + room <= 255:
        return name
    import hashlib

    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def name_in_file(text: str, room: int = 0) -> str:
    """``text`` (a graph's, cluster's or device's name) made a part of a file name that is never a path.

    Every character but ASCII letters, digits and ``_.+@-`` becomes ``_`` (a ``/``, a NUL, a newline) and
    leading dots go (no hidden file, no ``..``): a graph named ``x/../../y`` wrote its outputs outside the
    folder asked for. Where the result and ``room`` more bytes (a suffix) would not fit a file name, it is
    a digest (:func:`fitting_name`).

    Examples:
        >>> name_in_file("../../etc/x@k80x4")
        '_.._etc_x@k80x4'
        >>> len(name_in_file("g" * 300, 5))
        16
    """
    import re

    return fitting_name(re.sub(r"[^A-Za-z0-9_.+@-]", "_", text).lstrip("."), room)


def refuse_link(path: Path, command: str) -> None:
    """Refuse an output that ``command`` names inside its output folder (not one the user named) being a link.

    An output folder someone shared held ``results.md`` linked to a file elsewhere, ``placements`` to another
    folder: ``evaluate`` wrote its table over that file (a link to a path not there yet created it) and its
    placements into that folder; ``finetune`` so its summary and placement. A command writes in its output
    folder itself.

    Raises:
        InvalidArgument: naming the link and where it leads.
    """
    if path.is_symlink():
        raise InvalidArgument(f"{path}: is a symbolic link (to {os.readlink(path)}), and {command} writes its "
                              "outputs in the output folder itself: move it away or pick another output folder")


def regular_target(path: Path) -> Path:
    """The file a write to ``path`` replaces: the target of a symbolic link, written through, not replaced.

    Raises:
        OSError: if ``path`` is a folder (EISDIR), or a device, pipe or socket (a rename over it would replace it
            by a file).
    """
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if target.is_dir():  # (said "not a regular file (a device, pipe or socket)" of a folder)
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
    if target.exists() and not target.is_file():
        raise OSError(errno.EINVAL, "not a regular file (a device, pipe or socket)", os.fspath(path))
    return target


#: Age (seconds) from which a temporary file of a process gone is stale: no write takes an hour, also one of a
#: process of the same id on another host of a shared folder (the id tells nothing there).
STALE_TEMPORARY_S = 3600.0
#: The temporary files :func:`write_together` makes: ``NAME.PID.RANDOM.tmp``, RANDOM 8 hex digits.
_TEMPORARY = re.compile(r"(?P<name>.+)\.(?P<pid>[0-9]+)\.[0-9a-f]{8}\.tmp")
#: The temporary files found in each folder, by the name they were for, when this process first wrote there (a
#: folder is listed once: 10 ms for 10,000 graphs, each write's own listing would have cost a dataset minutes).
_FOUND_TEMPORARIES: dict[Path, dict[str, list[str]]] = {}


def _process_gone(pid: int) -> bool:
    """Whether no process ``pid`` runs on this host (one of another user's runs: :obj:`False`)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OverflowError, OSError):  # another user's (EPERM), or an id past the system's
        return False
    return False


def keep_permissions(tmp: Path, target: Path) -> None:
    """Give ``tmp``, about to be renamed over ``target``, the permission bits of the file at ``target``, if any.

    A file replaced keeps its permissions: a ``placement.json`` or ``last.ckpt`` made private (``chmod 600``) was
    644 again after a rerun, as the umask gives a new file, where a write in place keeps them. Where there is no
    file yet, or the filesystem has no modes, ``tmp`` keeps its own and the write goes on.
    """
    with contextlib.suppress(OSError):
        os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove the temporary files a write of ``target`` left where its process was killed (``kill -9``) mid-write.

    Only files of :func:`write_together`'s exact name for ``target`` (``NAME.PID.RANDOM.tmp`` beside it), whose
    process runs no more on this host and which are at least :data:`STALE_TEMPORARY_S` old; they stayed forever.
    The folder is listed once per process (:data:`_FOUND_TEMPORARIES`); what cannot be removed is left.

    Returns:
        list[Path]: the files removed.
    """
    folder = Path(os.path.abspath(target.parent))  # (the working folder may change between writes)
    found = _FOUND_TEMPORARIES.get(folder)
    if found is None:
        found = {}
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                match = _TEMPORARY.fullmatch(entry.name)
                if match:
                    found.setdefault(match["name"], []).append(entry.name)
        _FOUND_TEMPORARIES[folder] = found
    removed = []
    for name in {target.name, fitting_name(target.name, 255)}:  # (a long name's temporaries carry its digest)
        for temporary in found.pop(name, []):
            path = folder / temporary
            match = _TEMPORARY.fullmatch(temporary)
            try:
                stale = time.time() - path.lstat().st_mtime >= STALE_TEMPORARY_S
                if stale and match and _process_gone(int(match["pid"])):
                    path.unlink()
                    removed.append(path)
            except OSError:
                continue
    return removed


def append_to(path: str | os.PathLike[str], payload: bytes) -> None:
    """Append ``payload`` to the file ``path`` (made if missing); a write that fails takes back what it wrote.

    A results file that grows a line a run (``evaluate``'s ``results.csv``, a benchmark's rows) was appended
    through a file object: where the disk filled up, its write raised an ``OSError`` that named no file
    (``gnplace: error: [Errno 28] No space left on device``) and left the line half written. Here the file is cut
    back to its length before, and the error names ``path``.

    Raises:
        OSError: naming ``path``, if it cannot be opened or written (the file as it was before).

    Examples:
        >>> import tempfile, os
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "rows.jsonl")
        ...     append_to(path, b"1\\n")
        ...     append_to(path, b"2\\n")
        ...     open(path, "rb").read()
        b'1\\n2\\n'
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        start = os.lseek(fd, 0, os.SEEK_END)
        left = memoryview(payload)
        try:
            while left:
                left = left[os.write(fd, left):]
        except OSError as err:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
            raise OSError(err.errno, err.strerror or str(err), os.fspath(path)) from err
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike[str], payload: bytes) -> Path:
    """Write ``payload`` to ``path`` through ``PATH.PID.RANDOM.tmp`` and a rename; a failed write leaves no ``.tmp``.

    The temporary name carries the process id and 8 random hex digits, so two processes writing the same file
    (ranks filling one cache) never move each other's temporary file, also where they have the same process id
    (containers on two hosts of a multi-node run often do).

    The parent folders are made. What was at ``path`` before stays as it was when the write fails, and a file
    replaced keeps its permission bits (a file made anew has the umask's). A
    symbolic link is written through (its target is replaced, the link stays). A ``.tmp`` of ``path`` that a
    killed write left (``kill -9``: its process gone, the file an hour old) is removed
    (:func:`remove_stale_temporaries`).

    Raises:
        IsADirectoryError: if ``path`` is a folder (or ends with ``/``).
        OSError: if ``path`` is a device, pipe or socket.
        NotADirectoryError: if one of its parents is a file.
        OSError: if the file cannot be written.
    """
    return write_together([(path, payload)])[0]


def write_together(files: Sequence[tuple[str | os.PathLike[str], bytes]]) -> list[Path]:
    """Write several files as :func:`write_atomically` does: every ``.tmp`` first, then the renames.

    A command with two outputs (``place -o P --device-map M``) replaced ``P`` and then failed on ``M``;
    here a file that cannot be written is met before any is replaced, and every ``.tmp`` is removed. A
    rename that fails after another succeeded (the folder's permissions changed in between) leaves the
    files renamed before it written: all or none up to the renames.

    Raises:
        the errors of :func:`write_atomically`, for the first file that cannot be written.
        InvalidArgument: if a path is no ``str`` or ``os.PathLike`` (None); no file is replaced then.
    """
    staged: list[tuple[Path, Path, Path]] = []  # (.tmp, the file it replaces, the path as given)
    try:
        for path, payload in files:
            given = as_path(path, "output file")  # None was os.fspath's TypeError
            text = os.fspath(path)  # (as given: a trailing / names a folder)
            if text.endswith(("/", os.sep)) or given.is_dir():
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), text)
            target = regular_target(given)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), text) from None
            tag = f".{os.getpid()}.{os.urandom(4).hex()}.tmp"  # the pid alone is shared by other hosts' processes
            tmp = target.with_name(fitting_name(target.name, len(tag)) + tag)
            staged.append((tmp, target, given))
            try:
                tmp.write_bytes(payload)
            except OSError as err:  # named by the file asked for, not its .tmp
                raise OSError(err.errno, err.strerror or str(err), text) from err
            keep_permissions(tmp, target)
        for tmp, target, given in staged:
            try:
                os.replace(tmp, target)
            except OSError as err:  # named by the file asked for, not its .tmp
                raise OSError(err.errno, err.strerror or str(err), os.fspath(given)) from err
    except BaseException:
        for tmp, _, _ in staged:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        raise
    for _, target, _ in staged:  # what a killed write of these files left
        remove_stale_temporaries(target)
    return [given for _, _, given in staged]


def load_graph(path: str | os.PathLike[str]) -> OpGraph:
    """Read a graph written by :func:`save_graph` (``.gnpg``, ``.json.gz`` or ``.json``).

    Raises:
        InvalidGraph: if the file is missing, truncated, not a gnplace graph, or holds an invalid graph.
        InvalidArgument: if ``path`` is no ``str`` or ``os.PathLike`` (None).

    Examples:
        >>> import tempfile, os
        >>> from gnplace.toy import chain_graph
        >>> g = chain_graph(3)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     load_graph(save_graph(g, os.path.join(folder, "chain.gnpg"))) == g
        True
    """
    path = as_path(path, "graph file")  # None was pathlib's TypeError
    if path.suffix.lower() == ".onnx":
        raise InvalidGraph(f"{path}: an ONNX model, not a gnplace graph file; read it with "
                           f"gnplace.importers.onnx.from_onnx, or convert it with `gnplace import {path} -o "
                           "GRAPH.gnpg` (gnplace place reads ONNX files directly)")
    if path.is_dir() and ((path / "manifest.json").is_file() or any(path.glob("*.gnpg"))):
        # was "is a folder, not a graph file": no word of which file, or of the commands that read a folder
        raise InvalidGraph(f"{path}: is a folder of graphs, not a graph file: give one of its graph files, or the "
                           "folder to a command that reads one (gnplace evaluate -g FOLDER)")
    raw = read_file(path, InvalidGraph, "graph file")
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gunzip(raw, InvalidGraph, str(path))
        data = parse_json(raw, InvalidGraph, str(path))
    except InvalidGraph as err:
        problem = str(err).removeprefix(f"{path}: ")
        raise InvalidGraph(f"{path}: not a readable gnplace graph file ({problem})") from err
    if isinstance(data, dict) and data.get("format") == "gnplace-dataset":
        # a dataset's manifest.json was "not a gnplace graph file (no 'format' field)"
        raise InvalidGraph(f"{path}: a dataset's manifest, not a graph file: give one of the graph files it lists, "
                           "or its folder to a command that reads one (gnplace evaluate -g FOLDER)")
    return graph_from_dict(data, source=str(path))


# ---------------------------------------------------------------------------------- networkx
def to_networkx(graph: OpGraph) -> Any:
    """A ``networkx.DiGraph`` copy of ``graph``, nodes keyed by name (a change to it leaves ``graph`` as it is).

    Node attributes: ``flops`` (FLOP), ``out_bytes`` and ``param_bytes`` (bytes), ``group``, ``op_type``, ``op_kind``,
    ``phase`` (name), ``module`` and, where measured, ``cost_s`` (dict of device kind to seconds).
    Edge attributes: ``bytes`` and ``index``, the edge's position in ``graph``'s edge list (networkx lists edges by
    source node; :func:`from_networkx` keeps this order, so the round trip is ``==`` and has ``graph``'s
    fingerprint). Graph attributes: ``name``, ``meta`` and, where the graph has measured costs, ``cost_kinds``
    (every kind, also one no op was measured on).

    Args:
        graph (OpGraph): the graph.

    Returns:
        networkx.DiGraph: the graph as networkx holds it.

    Raises:
        InvalidArgument: if ``graph`` is no :class:`OpGraph` (None).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> G = to_networkx(chain_graph(2))
        >>> sorted(G.nodes["op0"])
        ['flops', 'group', 'module', 'op_kind', 'op_type', 'out_bytes', 'param_bytes', 'phase']
    """
    import networkx as nx

    check_graph(graph)
    G = nx.DiGraph(name=graph.name, meta=copy.deepcopy(graph.meta))
    if graph.cost_s:  # the kinds measured, also one measured on no op (all NaN), which no node's cost_s names
        G.graph["cost_kinds"] = list(graph.cost_s)
    for i, name in enumerate(graph.node_names):
        attrs: dict[str, Any] = dict(
            flops=float(graph.flops[i]),
            out_bytes=int(graph.out_bytes[i]),
            param_bytes=int(graph.param_bytes[i]),
            group=int(graph.group[i]),
            op_type=graph.op_types[i],
            op_kind=graph.op_kinds[i],
            phase=PHASES[int(graph.phase[i])],
            module=graph.module[i],
        )
        measured = {k: float(v[i]) for k, v in graph.cost_s.items() if not math.isnan(v[i])}
        if measured:
            attrs["cost_s"] = measured
        G.add_node(name, **attrs)
    for index, (s, d, b) in enumerate(zip(graph.edge_src.tolist(), graph.edge_dst.tolist(), graph.edge_bytes.tolist())):
        G.add_edge(graph.node_names[s], graph.node_names[d], bytes=b, index=index)
    return G


def _edge_order(edges: list[tuple[Any, Any, dict[str, Any]]]) -> list[tuple[Any, Any, dict[str, Any]]]:
    """``edges`` (networkx's, by source node) in the order of their ``index`` attributes (:func:`to_networkx`'s).

    Edges without a whole-number ``index`` (added by hand) follow, in networkx's order.
    """
    def index(edge: tuple[Any, Any, dict[str, Any]]) -> float:
        given = edge[2].get("index")
        return float(given) if isinstance(given, numbers.Integral) and not isinstance(given, bool) else math.inf

    return sorted(edges, key=index)  # (stable: networkx's order among edges of no index)


def _groups(data: list[dict[str, Any]]) -> list[Any]:
    """The ``group`` of each node, a group of its own (an id no node gives) where a node gives none.

    Whole-number ids are compared as they are: through a float, a node's 2**53 + 1 was read as 2**53, and the
    node without a group got 2**53 + 1, the other's group. The fresh ids lie above every id given, or below
    them where above would pass :data:`~gnplace.limits.MAX_COUNT` (a node's group 2**62 refused the graph).
    """
    ids: list[int] = []
    for attrs in data:
        if "group" not in attrs:
            continue
        given = attrs["group"]
        if isinstance(given, numbers.Integral) and not isinstance(given, bool):
            ids.append(int(given))
            continue
        value = as_float(given)  # (10**400: None, not OverflowError)
        if value is not None and math.isfinite(value):
            ids.append(math.floor(value))  # (1.5 is refused later; no fresh id may meet it before)
    missing = sum("group" not in attrs for attrs in data)
    fresh = max(ids) + 1 if ids else 0  # a node's index could be another node's group
    if ids and fresh + missing - 1 > MAX_COUNT:
        fresh = min(ids) - missing
    groups: list[Any] = []
    for attrs in data:
        if "group" in attrs:
            groups.append(attrs["group"])
        else:
            groups.append(fresh)
            fresh += 1
    return groups


def from_networkx(G: Any, *, name: str | None = None) -> OpGraph:
    """Build an :class:`OpGraph` from a ``networkx.DiGraph`` with the attributes of :func:`to_networkx`.

    Missing attributes take defaults: ``flops`` 0, ``out_bytes`` the largest outgoing edge,
    ``param_bytes`` 0, ``group`` one per node, ``phase`` forward, ``op_type`` ``"op"``, ``op_kind``
    derived from op type and phase (:func:`gnplace.opkinds.canonical_kind`), edge ``bytes`` the
    producer's ``out_bytes``. Edges are in the order of their ``index`` (:func:`to_networkx`'s), those without
    one after, in networkx's order.

    Args:
        G (networkx.DiGraph): the graph; its nodes' names become the op names (as ``str``).
        name (str, optional): the graph's name (default: ``G.graph["name"]``, else ``"graph"``).

    Returns:
        OpGraph: the graph.

    Raises:
        InvalidGraph: if the graph is undirected, cyclic, has invalid sizes or an unknown op kind.
        InvalidArgument: if ``G`` is no networkx graph (None, a dict).

    Examples:
        >>> import networkx as nx
        >>> G = nx.DiGraph([("x", "y")])
        >>> G.nodes["x"].update(op_type="mm")
        >>> G.nodes["y"].update(op_type="Gather", op_kind="embedding")
        >>> from_networkx(G).op_kinds
        ('matmul', 'embedding')
    """
    if not callable(getattr(G, "is_directed", None)):  # None or a dict was an AttributeError
        raise InvalidArgument(f"from_networkx needs a networkx.DiGraph, got {reprlib.repr(G)}")
    if not G.is_directed():
        raise InvalidGraph("from_networkx needs a directed graph (networkx.DiGraph)")
    nodes = list(G.nodes)
    index = {v: i for i, v in enumerate(nodes)}
    data = [G.nodes[v] for v in nodes]
    edge_list = _edge_order(list(G.edges(data=True)))  # the graph's order, where to_networkx made G
    out_bytes: list[float] = []
    for v, attrs in zip(nodes, data):
        if "out_bytes" in attrs:
            out_bytes.append(attrs["out_bytes"])
            continue
        sizes = [e.get("bytes", 0) for _, _, e in G.out_edges(v, data=True)]
        bad = [b for b in sizes if as_float(b) is None]  # max() of "5" and 3 was a TypeError
        if bad:
            raise InvalidGraph(f"node {str(v)!r}: an edge from it carries bytes {reprlib.repr(bad[0])}; bytes must "
                               "be whole numbers")
        out_bytes.append(max(sizes, default=0))
    for v, attrs in zip(nodes, data):
        if not isinstance(attrs.get("cost_s", {}), Mapping):  # a number was a TypeError ("not iterable")
            raise InvalidGraph(f"node {str(v)!r}: cost_s must map device kinds to seconds (e.g. {{'k80': 1e-3}}), "
                               f"got {reprlib.repr(attrs['cost_s'])}")
    listed = G.graph.get("cost_kinds", [])
    if not isinstance(listed, list | tuple) or not all(isinstance(k, str) for k in listed):
        raise InvalidGraph(f"graph attribute cost_kinds must list device kinds, got {reprlib.repr(listed)}")
    kinds = sorted({k for attrs in data for k in attrs.get("cost_s", {})} | set(listed), key=str)  # (5 and "k80")
    cost_s = {k: [attrs.get("cost_s", {}).get(k, math.nan) for attrs in data] for k in kinds}
    op_types = [attrs.get("op_type", "op") for attrs in data]
    phases = [attrs.get("phase", "forward") for attrs in data]
    op_kinds = None
    if any("op_kind" in attrs for attrs in data):
        op_kinds = [
            attrs["op_kind"] if "op_kind" in attrs else canonical_kind(str(t), PHASES.index(p) if p in PHASES else p)
            for attrs, t, p in zip(data, op_types, phases)
        ]
    return OpGraph(
        [str(v) for v in nodes],
        [(index[u], index[v]) for u, v, _ in edge_list],
        flops=[attrs.get("flops", 0.0) for attrs in data],
        out_bytes=out_bytes,
        param_bytes=[attrs.get("param_bytes", 0) for attrs in data],
        edge_bytes=[e.get("bytes", out_bytes[index[u]]) for u, _, e in edge_list],
        op_types=op_types,
        phase=phases,
        group=_groups(data),
        module=[attrs.get("module", "") for attrs in data],
        cost_s=cost_s,
        name=name if name is not None else str(G.graph.get("name") or "graph"),
        meta=G.graph.get("meta", {}),
        op_kinds=op_kinds,
    )
