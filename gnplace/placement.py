"""``Placement``: the device of every op of a graph, and its file format.

A placement file is JSON::

    {"format": "gnplace-placement", "version": 1, "graph": "<graph name>",
     "graph_fingerprint": "<OpGraph.fingerprint()>", "cluster": "<cluster name>",
     "cluster_fingerprint": "<Cluster.fingerprint()>", "devices": [{"name": "gpu0", "kind": "k80"}, ...],
     "placer": "m_etf", "placement": {"<op name>": "<device name>", ...},
     "predicted": {"step_time_s": ..., "oom": false, "devices": [...], ...}}

``placement`` must name every op; ``predicted`` is informative (what the simulator or timer said when
the file was written: ``gnplace place`` writes :meth:`~gnplace.sim.timer.StepResult.to_dict`'s keys,
``place_seconds`` and ``mode``) and optional, as are ``cluster_fingerprint`` and ``devices`` (what the file is
checked against when used on another cluster, or on one of the same name) and ``graph_fingerprint`` (what it is
checked against when used on a graph of the same op names: another optimizer's, input shapes' or costs' is warned of).

A :class:`Placement` made from a graph (:meth:`Placement.from_groups`, :func:`as_placement`,
:func:`load_placement`) remembers which graph (:class:`GraphKey`: its name, a digest of its op
names and edges), and :meth:`Placement.check` refuses it for another graph of as many ops. One made
from bare device indices knows no graph and is checked by its length only.
"""

from __future__ import annotations

import hashlib
import json
import numbers
import os
import reprlib
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument, InvalidPlacement
from gnplace.graph import OpGraph, check_graph
from gnplace.readonly import ReadOnlyArrays
from gnplace.units import counted

if TYPE_CHECKING:
    from gnplace.sim.simulator import SimMode

__all__ = ["Placement", "GraphKey", "as_placement", "check_graph_and_cluster", "check_cluster", "check_placed",
           "check_whole_devices", "save_placement", "load_placement"]

FORMAT = "gnplace-placement"
VERSION = 1


#: id(graph) -> (a weak reference to the graph, its digest): worked out once per graph object. Not a
#: WeakKeyDictionary: its lookups compare graphs with ``==``, which reads every array of the graph.
_DIGESTS: dict[int, tuple[weakref.ref[OpGraph], str]] = {}


@dataclass(frozen=True)
class GraphKey:
    """Which graph a placement was made for.

    Args:
        name (str): the graph's name (for messages).
        digest (str): SHA-256 (hex) of the graph's op names and edges: what a placement by op index
            depends on. Its costs and its name are left out, so the same model imported again, or its
            graph with measured costs, is the same graph.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> GraphKey.of(chain_graph(3)) == GraphKey.of(chain_graph(3))
        True
    """

    name: str
    digest: str

    @classmethod
    def of(cls, graph: OpGraph) -> GraphKey:
        """The key of ``graph`` (its digest worked out once per graph object)."""
        known = _DIGESTS.get(id(graph))
        if known is not None and known[0]() is graph:
            return cls(graph.name, known[1])
        hasher = hashlib.sha256()
        if any("\0" in name for name in graph.node_names):
            # a name's own NUL ended it early: the names ("a\0b", "c") hashed as ("a", "b\0c"). These names are hashed
            # by length, after a byte no UTF-8 text holds, so that no other graph's digest changes or meets theirs
            hasher.update(b"\xff")
            for name in graph.node_names:
                raw = name.encode("utf-8", "surrogatepass")
                hasher.update(len(raw).to_bytes(8, "little") + raw)
        else:
            for name in graph.node_names:
                hasher.update(name.encode("utf-8", "surrogatepass") + b"\0")
        order = np.lexsort((graph.edge_dst, graph.edge_src))  # edges as a set: their order is no part of it
        hasher.update(np.ascontiguousarray(np.stack([graph.edge_src[order], graph.edge_dst[order]]),
                                           dtype=np.int64).tobytes())
        digest = hasher.hexdigest()
        key = id(graph)
        _DIGESTS[key] = (weakref.ref(graph, lambda _: _DIGESTS.pop(key, None)), digest)
        return cls(graph.name, digest)


@dataclass(frozen=True, eq=False)
class Placement(ReadOnlyArrays):
    """The device index of every op, for one cluster.

    Args:
        devices (array-like): the device index of each op, ``[num_ops]``, kept as int64.
        cluster (Cluster): the cluster the indices refer to.
        made_for (GraphKey, optional): the graph the placement was made for (:meth:`GraphKey.of`); :meth:`check`
            refuses another (default: :obj:`None`, unknown: only the number of ops is checked).

    Raises:
        InvalidPlacement: if ``devices`` are not whole numbers (of int64); whether each names a device of ``cluster`` is
            checked where the placement is used (:meth:`check`).
        InvalidArgument: if ``cluster`` is no :class:`~gnplace.cluster.Cluster` or ``made_for`` no
            :class:`GraphKey` (the graph itself, or its name).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> g, c = chain_graph(3), load_cluster("k80x2")
        >>> p = Placement.from_groups(g, c, [0, 1, 1])
        >>> p.devices.tolist(), p.device_names(g)["op2"]
        ([0, 1, 1], 'gpu1')
    """

    devices: np.ndarray
    cluster: Cluster
    made_for: GraphKey | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_cluster(self.cluster)  # a preset's name was kept, and every use of it an AttributeError
        if self.made_for is not None and not isinstance(self.made_for, GraphKey):  # (the graph itself, its name)
            raise InvalidArgument(f"made_for must be a GraphKey (gnplace.placement.GraphKey.of(graph)) or None, got "
                                  f"{type(self.made_for).__name__} {reprlib.repr(self.made_for)}")
        check_whole_devices(self.devices)
        array = np.array(self.devices, dtype=np.int64, copy=True)
        array.flags.writeable = False
        object.__setattr__(self, "devices", array)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Placement):
            return NotImplemented
        return self.cluster == other.cluster and np.array_equal(self.devices, other.devices)  # (by fingerprint)

    def __hash__(self) -> int:
        return hash((self.devices.tobytes(), self.cluster.fingerprint()))

    @classmethod
    def from_groups(cls, graph: OpGraph, cluster: Cluster, group_devices: Any) -> Placement:
        """Expand a device per colocation group (``[num_groups]``) to a device per op.

        Raises:
            InvalidArgument: if ``graph`` is no :class:`~gnplace.graph.OpGraph` or ``cluster`` no
                :class:`~gnplace.cluster.Cluster`.
            InvalidPlacement: if ``group_devices`` is not one whole number per group.
        """
        check_graph(graph)  # None was an AttributeError ('num_groups')
        per_group = np.asarray(group_devices)  # no cast here: Placement refuses 0.7 rather than cut it to device 0
        if per_group.shape != (graph.num_groups,):
            raise InvalidPlacement(
                f"group placement has shape {per_group.shape}, graph {graph.name!r} has {graph.num_groups} groups"
            )
        return cls(per_group[graph.group], cluster, GraphKey.of(graph))

    def device_names(self, graph: OpGraph) -> dict[str, str]:
        """Mapping of op name to device name.

        Raises:
            InvalidPlacement: the placement is not one of ``graph`` (zip cut a short one's mapping short).
        """
        self.check(graph)
        names = self.cluster.device_names
        return {op: names[d] for op, d in zip(graph.node_names, self.devices.tolist())}

    def check(self, graph: OpGraph) -> None:
        """Raise :class:`InvalidPlacement` unless this places every op of ``graph`` on a device.

        A placement made for another graph (:attr:`made_for`: other op names or edges) is refused too,
        though it has as many ops.

        Raises:
            InvalidPlacement: if it does not place every op of ``graph`` on a device of its cluster.
            InvalidArgument: if ``graph`` is no :class:`~gnplace.graph.OpGraph` (as for :meth:`device_names`,
                :meth:`group_devices` and :meth:`splits_groups`, which call this).
        """
        check_graph(graph)  # None or a path was an AttributeError ('num_ops')
        if self.devices.shape != (graph.num_ops,):
            got = counted(self.devices.shape[0], "entry", "entries") if self.devices.ndim == 1 \
                else f"shape {self.devices.shape}"
            raise InvalidPlacement(f"placement has {got}, graph {graph.name!r} has {counted(graph.num_ops, 'op')}")
        if self.made_for is not None and self.made_for.digest != GraphKey.of(graph).digest:
            made_for = self.made_for.name
            other = f"graph {made_for!r}" if made_for != graph.name else "another graph of that name"
            raise InvalidPlacement(
                f"placement was made for {other}, not graph {graph.name!r} (their op names or edges differ, though "
                "both have as many ops): place this graph, or load a placement file of it (matched by op name)"
            )
        bad = np.flatnonzero((self.devices < 0) | (self.devices >= self.cluster.num_devices))
        if bad.size:
            i = int(bad[0])
            raise InvalidPlacement(
                f"op {graph.node_names[i]!r} is placed on device {int(self.devices[i])}, "
                f"but cluster {self.cluster.name!r} has devices 0..{self.cluster.num_devices - 1}"
            )

    def group_devices(self, graph: OpGraph) -> np.ndarray:
        """The device of each colocation group, ``[num_groups]``: the inverse of :meth:`from_groups`.

        Raises:
            InvalidPlacement: if some colocation group has ops on more than one device.

        Examples:
            >>> from gnplace.toy import mlp_training_graph, toy_cluster
            >>> g, c = mlp_training_graph(layers=2, width=8, batch=4), toy_cluster(2)
            >>> Placement.from_groups(g, c, [1, 0, 1]).group_devices(g).tolist()
            [1, 0, 1]
        """
        if self.splits_groups(graph):
            raise InvalidPlacement(f"placement splits a colocation group of graph {graph.name!r} across devices")
        per_group = np.zeros(graph.num_groups, dtype=np.int64)
        per_group[graph.group] = self.devices
        return per_group

    def splits_groups(self, graph: OpGraph) -> bool:
        """Whether some colocation group has ops on more than one device.

        Raises:
            InvalidPlacement: the placement is not one of ``graph`` (a numpy shape error before).
        """
        self.check(graph)
        first = np.full(graph.num_groups, -1, dtype=np.int64)
        first[graph.group[::-1]] = self.devices[::-1]
        return bool(np.any(first[graph.group] != self.devices))


def check_whole_devices(devices: Any, source: str = "", *, names_hint: bool = True) -> None:
    """Refuse device indices that are not whole numbers (:class:`InvalidPlacement`, ``source`` its prefix).

    A cast to int64 would cut 0.7 to device 0 and (1+1j) to device 1, and make infinity a negative index;
    NaN, unequal to itself, is refused too, and so are names,
    None and booleans, also among numbers (``["gpu0"]`` was a numpy ValueError, ``["0", "1"]`` and
    ``[0, True]`` read as indices). ``names_hint`` adds that a mapping places ops by device name (where
    one is taken).
    """
    if isinstance(devices, np.ndarray) and devices.dtype.kind in "iu":  # the usual case, at no cost
        if devices.dtype.kind == "u" and devices.size and int(devices.max()) > 2**62:  # int64 would wrap it negative
            raise InvalidPlacement(f"{source}device index {int(devices.max())} names no device")
        return
    if not isinstance(devices, np.ndarray) or devices.dtype.kind not in "iufc":  # the elements as given
        items = np.asarray(devices, dtype=object).reshape(-1).tolist()
        for x in items:
            if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real):
                hint = " (to place ops by device name, give a mapping of op name to device name)" if names_hint else ""
                raise InvalidPlacement(f"{source}device indices must be whole numbers, got {reprlib.repr(x)}{hint}")
            if isinstance(x, numbers.Integral) and not -2**62 <= int(x) <= 2**62:
                raise InvalidPlacement(f"{source}device index {reprlib.repr(x)} names no device")
    given = np.asarray(devices).reshape(-1)
    if given.dtype.kind == "c" and given.size:  # the cast to int64 dropped the imaginary part, with a warning
        raise InvalidPlacement(f"{source}device indices must be whole numbers, got {given[0]}")
    if given.dtype.kind == "O":  # numbers of several kinds (an int past int64 refused above)
        given = given.astype(np.float64)
    if given.dtype.kind == "f":
        off = np.flatnonzero(given != np.round(given))
        if off.size:
            raise InvalidPlacement(f"{source}device indices must be whole numbers, got {given[off[0]]}")
        far = np.flatnonzero(np.abs(given) > 2**62)  # inf too: int64 made it device -9223372036854775808
        if far.size:
            raise InvalidPlacement(f"{source}device index {given[far[0]]} names no device")


def check_graph_and_cluster(graph: Any, cluster: Any) -> None:
    """Refuse a ``graph`` that is no :class:`OpGraph` or a ``cluster`` that is no :class:`Cluster`.

    A preset's name or a file path where the object belongs (``sim.time(g, "k80x2", p)``) was an
    AttributeError deep inside.

    Raises:
        InvalidArgument: naming what was given and how to load it.
    """
    check_graph(graph)
    check_cluster(cluster)


def check_cluster(cluster: Any) -> None:
    """Refuse a ``cluster`` that is no :class:`Cluster` (:class:`InvalidArgument`, naming how to load one)."""
    if not isinstance(cluster, Cluster):
        raise InvalidArgument(f"cluster must be a Cluster (gnplace.load_cluster(preset or path)), "
                              f"got {reprlib.repr(cluster)}")


def as_placement(graph: OpGraph, cluster: Cluster, placement: Any) -> Placement:
    """Coerce ``placement`` (a :class:`Placement`, device indices, or op name to device name) and check it.

    Raises:
        InvalidArgument: if ``graph`` is no :class:`OpGraph` or ``cluster`` no :class:`Cluster`.
        InvalidPlacement: if it does not place every op of ``graph`` on a device of ``cluster``, or is a
            :class:`Placement` made for another graph.
    """
    check_graph_and_cluster(graph, cluster)
    if isinstance(placement, Placement):
        if placement.cluster is not cluster:
            _check_same_devices(placement, cluster)
        result = placement if placement.cluster is cluster else Placement(placement.devices, cluster,
                                                                          placement.made_for)
    elif isinstance(placement, dict):
        result = _from_names(graph, cluster, placement, source="placement")
    else:
        check_whole_devices(placement)  # as given: np.asarray made [0, True] numbers and [1, "gpu1"] text
        result = Placement(np.asarray(placement), cluster, GraphKey.of(graph))
    result.check(graph)
    return result


def _check_same_devices(placement: Placement, cluster: Cluster) -> None:
    """Refuse to read ``placement`` on ``cluster`` unless each device it uses is, by index, the same there.

    Indices name devices by position: ``single``'s ``[0, 0]`` on ``k80x2`` (a K80) read on ``cpu_gpu`` put
    every op on its CPU, 8x slower, without a word. Where every device used has the same name and kind at
    its index (``k80x2``'s placement on ``k80x4``, another cluster file of those devices, a placeto-mode
    copy), it is read as it is, as placement files are read by device name. A device index past the cluster
    it was made for is refused too, where ``cluster`` has that index (``check()`` there would not see it).

    Raises:
        InvalidPlacement: naming the first device that differs, or the index its own cluster lacks.
    """
    made_on = placement.cluster
    for index in np.unique(placement.devices).tolist():
        if made_on.num_devices <= index < cluster.num_devices:  # check() on cluster would find it there
            raise InvalidPlacement(f"placement uses device {index}, but cluster {made_on.name!r}, which it was made "
                                   f"for, has devices 0..{made_on.num_devices - 1}")
        if not 0 <= index < min(made_on.num_devices, cluster.num_devices):
            continue  # off either cluster: check() names the op
        was, now = made_on.devices[index], cluster.devices[index]
        if (was.name, was.kind) != (now.name, now.kind):
            raise InvalidPlacement(f"placement was made for cluster {made_on.name!r}, whose device {index} is "
                                   f"{reprlib.repr(was.name)} ({was.kind}), not for cluster {cluster.name!r}, whose "
                                   f"device {index} is {reprlib.repr(now.name)} ({now.kind}): place the graph on "
                                   f"{cluster.name!r}")


def _listed(names: list[str], shown: int = 8) -> str:
    """``names`` joined by commas, the first ``shown`` alone where there are more (a cluster of 4,096 devices)."""
    return ", ".join(names) if len(names) <= shown else f"{', '.join(names[:shown])}, ... ({len(names)} devices)"


def _from_names(
    graph: OpGraph, cluster: Cluster, mapping: dict[str, Any], *, source: str, made_for: Any = None,
    graph_name: Any = None,
) -> Placement:
    """The placement a file's op-to-device-name ``mapping`` gives on ``cluster``.

    ``made_for`` is the name of the cluster the file records: where it is not ``cluster``'s, a device
    ``cluster`` lacks is refused with a pointer to that cluster. ``graph_name`` is the name of the graph it
    records: where it is not ``graph``'s, an op missing on either side is refused naming it (an ONNX import's
    placement read with the torch import of the model).
    """
    names = cluster.device_names
    elsewhere = (f"; the file was made for cluster {made_for!r}, not {cluster.name!r}: give that cluster (its file)"
                 if isinstance(made_for, str) and made_for and made_for != cluster.name else "")
    other_graph = (f" (the file was made for graph {graph_name!r})"
                   if isinstance(graph_name, str) and graph_name and graph_name != graph.name else "")
    devices = np.full(graph.num_ops, -1, dtype=np.int64)
    op_index = graph._name_index
    # a device's index by its name: ``names.index`` per op took O(ops x devices), 4 s for 100,000 ops on 4,096
    device_index = {name: d for d, name in reversed(list(enumerate(names)))}  # the first of a repeated name
    for op, device in mapping.items():
        if op not in op_index:
            raise InvalidPlacement(f"{source}: op {op!r} is not in graph {graph.name!r}{other_graph}")
        d = device_index.get(device) if isinstance(device, str) else None
        if d is None:
            raise InvalidPlacement(
                f"{source}: op {op!r} is placed on unknown device {device!r} (cluster {cluster.name!r} has "
                f"{_listed(names)}){elsewhere}"
            )
        devices[op_index[op]] = d
    missing = np.flatnonzero(devices < 0)
    if missing.size:
        raise InvalidPlacement(
            f"{source}: {missing.size} {'op' if missing.size == 1 else 'ops'} of graph {graph.name!r} "
            f"{'has' if missing.size == 1 else 'have'} no device, "
            f"e.g. {graph.node_names[int(missing[0])]!r}{other_graph}"
        )
    return Placement(devices, cluster, GraphKey.of(graph))


def save_placement(
    path: str | os.PathLike[str],
    graph: OpGraph,
    placement: Placement,
    *,
    placer: str = "",
    predicted: dict[str, Any] | None = None,
) -> Path:
    """Write ``placement`` of ``graph`` as a JSON placement file (atomically; a failed write leaves no ``.tmp``).

    Args:
        path (str | os.PathLike): the file to write.
        graph (OpGraph): the graph placed; the file names its ops.
        placement (Placement): the placement to write.
        placer (str, optional): the name of the placer that made it, recorded in the file (default: none).
        predicted (dict, optional): what a timer said of it (:meth:`~gnplace.sim.timer.StepResult.to_dict`:
            seconds and bytes), recorded as the file's ``"predicted"`` (default: none).

    Returns:
        Path: the file written.

    Raises:
        InvalidPlacement: if ``placement`` is not one of ``graph`` (another graph's was cut short, or written
            under this graph's op names), before anything is written.
        InvalidArgument: if ``placer`` is no ``str``, ``predicted`` no ``dict`` or one that holds what JSON cannot
            (NaN, infinity, a numpy integer), or ``path`` no ``str`` or ``os.PathLike`` (None); nothing is
            written then.
        OSError: naming ``path``, if it cannot be written (``IsADirectoryError`` for a folder,
            ``NotADirectoryError`` under a file, a read-only or full disk); a file there before stays as it was.
            Missing parent folders are made.
    """
    from gnplace.graph_io import write_atomically

    return write_atomically(path, placement_file_bytes(graph, placement, placer=placer, predicted=predicted))


def placement_file_bytes(
    graph: OpGraph, placement: Placement, *, placer: str = "", predicted: dict[str, Any] | None = None
) -> bytes:
    """The bytes :func:`save_placement` writes (for a command that writes it with other files, all or none).

    Raises:
        InvalidPlacement: if ``placement`` is not one of ``graph``.
        InvalidArgument: if ``placer`` is no ``str``, or ``predicted`` no ``dict`` or one that holds what JSON
            cannot (NaN, infinity, a numpy integer).
    """
    check_graph(graph)
    if not isinstance(placement, Placement):  # device indices or a mapping were an AttributeError ('check')
        raise InvalidArgument(f"placement must be a Placement (a placer's place(), load_placement or "
                              f"Placement.from_groups), got {reprlib.repr(placement)}")
    # a numpy integer placer was blamed on predicted ('predicted must hold JSON values ..., got None'), and a
    # placer of None or a predicted of 3 were written as they were, into fields that readers take as a name, a dict
    if not isinstance(placer, str):
        raise InvalidArgument(f"placement file: placer must be the placer's name (a str), got {reprlib.repr(placer)}")
    if predicted is not None and not isinstance(predicted, dict):
        raise InvalidArgument(f"placement file: predicted must be a dict (StepResult.to_dict()) or None, got "
                              f"{reprlib.repr(predicted)}")
    placement.check(graph)
    data = {
        "format": FORMAT,
        "version": VERSION,
        "graph": graph.name,
        "graph_fingerprint": graph.fingerprint(),  # the same op names may be another optimizer's or shapes' graph
        "cluster": placement.cluster.name,
        "cluster_fingerprint": placement.cluster.fingerprint(),  # a cluster file may borrow a preset's name
        "devices": [{"name": d.name, "kind": d.kind} for d in placement.cluster.devices],  # to compare where used
        "placer": placer,
        "placement": placement.device_names(graph),
        "predicted": predicted or {},
    }
    try:  # NaN and Infinity are no JSON: load_placement refused the file written with them
        text = json.dumps(data, indent=1, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidArgument(f"placement file: predicted must hold JSON values (strings, finite numbers, lists, "
                              f"mappings), got {reprlib.repr(predicted)} ({err})") from None
    return (text + "\n").encode("utf-8")


def load_placement(
    path: str | os.PathLike[str], graph: OpGraph, cluster: Cluster | str | os.PathLike[str] | None = None, *,
    warn_other_name: bool = True,
) -> Placement:
    """Read a placement file written by :func:`save_placement` for ``graph`` on ``cluster``.

    Args:
        path (str or Path): the placement file.
        graph (OpGraph): the graph it places.
        cluster (Cluster, str or Path, optional): the cluster it was made for, or its preset name or YAML
            file (default: the preset the file names).
        warn_other_name (bool, optional): warn when the file names another graph, or records another version of
            this one (default: :obj:`True`).

    Raises:
        InvalidPlacement: if the file is missing, not JSON, not a placement, or does not fit; without
            ``cluster``, if the cluster the file names is not a preset; with it, if the file names a preset
            whose devices (their number, names or kinds) are not those of ``cluster``.
        InvalidCluster: if ``cluster`` is a name or file that does not load.
        InvalidArgument: if ``path`` is no ``str`` or ``os.PathLike`` (None), ``graph`` no graph, or
            ``warn_other_name`` no bool.

    Warns (:class:`UserWarning`, one line each) when the file was written for a graph of another name
    whose op names are all the same, or for another version of this graph (the same name and op names,
    another fingerprint: imported with another optimizer or input shapes, or with measured costs), or for
    a cluster of another name (a preset of the same devices, or a cluster file, which cannot be compared):
    such a placement applies, but may not be the one meant;
    and when it splits a colocation group over devices, which the simulator times as given.
    """
    from gnplace.limits import as_path, parse_json, read_file

    check_graph(graph)
    if not isinstance(warn_other_name, bool | np.bool_):  # "no" warned
        raise InvalidArgument(f"load_placement: warn_other_name must be true or false, got "
                              f"{reprlib.repr(warn_other_name)}")
    path = as_path(path, "placement file")  # None was pathlib's TypeError
    raw = read_file(path, InvalidPlacement, "placement file")
    try:
        data = parse_json(raw, InvalidPlacement, str(path))
    except InvalidPlacement as err:
        raise InvalidPlacement(f"{path}: not a readable placement file ({str(err).removeprefix(f'{path}: ')})") from err
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("placement"), dict):
        raise InvalidPlacement(f"{path}: not a gnplace placement file (no 'format': {FORMAT!r} and 'placement' map)")
    version = data.get("version")
    if type(version) is not int or version != VERSION:  # (true and 1.0 are == 1)
        raise InvalidPlacement(
            f"{path}: placement file version {version!r}; this gnplace reads version {VERSION} (write it again)"
        )
    if cluster is None:
        cluster = _recorded_cluster(data, path)
    elif not isinstance(cluster, Cluster):
        from gnplace.cluster import load_cluster

        cluster = load_cluster(cluster)
    placement = _from_names(graph, cluster, data["placement"], source=str(path), made_for=data.get("cluster"),
                            graph_name=data.get("graph"))
    written_for = data.get("graph")
    if warn_other_name and isinstance(written_for, str) and written_for and written_for != graph.name:
        # every op name matched, so the placement applies; the user may still have picked the wrong file
        warnings.warn(f"{path} was written for graph {written_for!r}, not {graph.name!r}; its op names all match, "
                      "so it is used as it is", stacklevel=2)
    elif warn_other_name and isinstance(data.get("graph_fingerprint"), str) and \
            data["graph_fingerprint"] != graph.fingerprint():
        # an --optimizer adam placement read with the sgd graph of the same model was timed without a word
        warnings.warn(f"{path} was made for another version of graph {graph.name!r} (other op kinds, sizes or costs: "
                      "another --optimizer or --input-shape, or measured costs?); its op names all match, so it is "
                      "used as it is, on this graph", stacklevel=2)
    other_cluster = _other_cluster(data.get("cluster"), cluster, path, data.get("devices"),
                                   data.get("cluster_fingerprint"))
    if other_cluster:
        warnings.warn(other_cluster, stacklevel=2)
    split = _split_group(graph, placement)
    if split:
        warnings.warn(f"{path} {split}; it is used as it is", stacklevel=2)
    return placement


def _other_cluster(recorded: Any, cluster: Cluster, path: Path, devices: Any = None, fingerprint: Any = None) -> str:
    """What to warn of a placement file made for a cluster named ``recorded`` and used on ``cluster`` (``""``: none).

    Its device names all exist on ``cluster`` (:func:`_from_names` checked them). The cluster it was made
    for is compared device by device (by name: the order a cluster lists them in does not matter), by the
    devices the file records (``devices``: name and kind of each, written since 2026-11-30), else by the preset
    it names: other devices (in number, name or kind) time another placement than the one made, so the file
    is refused; the same devices under another name
    (another memory or links, say) are warned of, and so are the same devices under the same name when the
    file records the fingerprint of another cluster (``fingerprint``, written since 2026-12-04: a cluster
    file that borrows a preset's name, say). A file that records no devices and names no preset cannot be
    compared, and is warned of when its cluster's name is not ``cluster``'s.

    Raises:
        InvalidPlacement: if the devices it was made for differ from those of ``cluster``, or the devices it
            records are not a list of ``{"name": ..., "kind": ...}``.
    """
    from gnplace.cluster import load_cluster, preset_names

    recorded = recorded if isinstance(recorded, str) and recorded else None
    mine = [(d.name, d.kind) for d in cluster.devices]
    if devices is not None:  # the devices it was made for, whatever their cluster's name
        if not isinstance(devices, list) or not all(
                isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("kind"), str)
                for d in devices):
            raise InvalidPlacement(f"{path}: 'devices' is not a list of {{\"name\": ..., \"kind\": ...}} (write "
                                   "the file again)")
        theirs = [(d["name"], d["kind"]) for d in devices]
    elif recorded is None or recorded == cluster.name:
        return ""
    elif recorded not in preset_names():
        return f"{path} was made for cluster {recorded!r}, not {cluster.name!r}; its device names all exist there, " \
            "so it is used as it is"
    else:
        theirs = [(d.name, d.kind) for d in load_cluster(recorded).devices]
    made_for = f"cluster {recorded!r}" if recorded else "an unnamed cluster"
    if sorted(theirs) == sorted(mine):  # the file places ops by device name: a cluster that lists them in another
        # order (a cluster file edited, cpu0 moved first) has the devices it was made for, and times the same placement
        if recorded not in (None, cluster.name):
            return f"{path} was made for {made_for}, not {cluster.name!r}; its devices are the same by name " \
                "and kind, so it is used as it is"
        # (None: written before fingerprints; this cluster's earlier one: before 2026-12-04's, Cluster.fingerprint)
        this_cluster = (cluster.fingerprint(), cluster.earlier_fingerprint())
        other = isinstance(fingerprint, str) and fingerprint not in this_cluster
        how = "other speeds, memories or links" if theirs == mine else \
            "listed in another order, and perhaps other speeds, memories or links"
        return "" if not other else \
            f"{path} was made for another cluster named {cluster.name!r} (the same devices by name and kind, " \
            f"{how}); it is used as it is, timed on this {cluster.name!r}"
    if len(theirs) != len(mine):
        differ = f"{len(theirs)} device{'' if len(theirs) == 1 else 's'} there, {len(mine)} here"  # "1 devices" before
    else:
        k = next(k for k in range(len(mine)) if theirs[k] != mine[k])
        differ = f"device {k} is {theirs[k][0]} ({theirs[k][1]}) there, {mine[k][0]} ({mine[k][1]}) here"
    borrowed = _borrows_preset_name(recorded, fingerprint)  # then the preset of that name is no place to time it
    if not recorded or recorded == cluster.name or borrowed:
        there = "the cluster it was made for"
    elif recorded in preset_names():
        there = f"{recorded!r}"
    else:  # made on a cluster file: "time it on 'lab2'" sent the user to `-c lab2`, which finds no preset
        there = f"the cluster file of {recorded!r}"
    raise InvalidPlacement(f"{path}: was made for {made_for}, whose devices differ from those of "
                           f"{cluster.name!r} ({differ}): time it on {there}, or place the graph on "
                           f"{cluster.name!r}")


def check_placed(result: Any, graph: OpGraph, cluster: Cluster, placer: str) -> Placement:
    """``result`` of ``placer``'s ``place(graph, cluster)``, held to the :class:`~gnplace.placers.base.Placer` contract.

    A placer registered by the user that returned a list of devices crashed ``evaluate`` when it kept the
    placement (after its row was written as a success), and one that split a colocation group was timed
    and ranked as if it had not.

    Raises:
        InvalidPlacement: naming ``placer``, if ``result`` is no :class:`Placement`, is one of another graph
            or cluster, or splits a colocation group over devices.
    """
    if not isinstance(result, Placement):
        raise InvalidPlacement(f"placer {placer!r} returned {type(result).__name__}, not a Placement")
    if result.cluster is not cluster and result.cluster.fingerprint() != cluster.fingerprint():
        raise InvalidPlacement(f"placer {placer!r} returned a placement on cluster {result.cluster.name!r}, not on "
                               f"{cluster.name!r}")
    try:
        result.check(graph)
    except InvalidPlacement as err:
        raise InvalidPlacement(f"placer {placer!r} returned a bad placement: {err}") from None
    split = _split_group(graph, result)
    if split:
        raise InvalidPlacement(f"placer {placer!r} returned a placement that {split}")
    return result


def _split_group(graph: OpGraph, placement: Placement) -> str:
    """What to warn of a ``placement`` that splits colocation groups of ``graph`` over devices (``""``: none)."""
    devices, group = placement.devices, graph.group
    groups, lead_op = np.unique(group, return_index=True)  # each group's first op
    first = np.full(graph.num_groups, -1, dtype=np.int64)
    first[groups] = devices[lead_op]  # the device of each group's first op
    off = np.flatnonzero(first[group] != devices)
    if not off.size:
        return ""
    op = int(off[0])
    lead = int(np.flatnonzero(group == group[op])[0])
    names, count = placement.cluster.device_names, np.unique(group[off]).size
    return (f"splits {count} colocation group{'s' if count > 1 else ''} (ops that must share a device) over devices, "
            f"e.g. op {graph.node_names[lead]!r} on {names[devices[lead]]} and {graph.node_names[op]!r} of its group "
            f"on {names[devices[op]]}")


def recorded_preset(path: str | os.PathLike[str]) -> str | None:
    """The preset name a placement file records as its cluster, or :obj:`None`.

    :obj:`None` too when ``path`` does not read as a placement file: :func:`load_placement` then says why.

    Raises:
        InvalidPlacement: if the file names a preset but records another cluster's fingerprint (it was made
            on a cluster file that borrows the preset's name, whose speeds, memories or links differ).

    Examples:
        >>> recorded_preset("no/such/placement.json") is None
        True
    """
    from gnplace.cluster import preset_names

    data = _placement_file_data(path)
    name = None if data is None else data.get("cluster")
    if data is None or not isinstance(name, str) or name not in preset_names():
        return None
    _check_preset_fingerprint(data, name, Path(path))
    return name


def recorded_mode(path: str | os.PathLike[str]) -> SimMode | None:
    """The simulator mode (``"default"`` or ``"placeto"``) a placement file says it was timed in, or :obj:`None`.

    ``gnplace place --mode placeto`` records it in ``predicted``; :obj:`None` for a file that records none
    (or another value), or that does not read as a placement file (:func:`load_placement` then says why).

    Examples:
        >>> recorded_mode("no/such/placement.json") is None
        True
    """
    from gnplace.sim.simulator import MODE_COSTS

    data = _placement_file_data(path)
    predicted = None if data is None else data.get("predicted")
    mode = predicted.get("mode") if isinstance(predicted, dict) else None
    return cast("SimMode", mode) if isinstance(mode, str) and mode in MODE_COSTS else None


def recorded_placer(path: str | os.PathLike[str]) -> str | None:
    """The placer a placement file says made it (its ``placer``), or :obj:`None` where it records none.

    :obj:`None` too for an empty or non-string ``placer`` (:func:`save_placement` writes ``""`` when not told),
    and for a file that does not read as a placement file (:func:`load_placement` then says why).

    Examples:
        >>> recorded_placer("no/such/placement.json") is None
        True
    """
    data = _placement_file_data(path)
    placer = None if data is None else data.get("placer")
    return placer if isinstance(placer, str) and placer else None


def _placement_file_data(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The JSON object of placement file ``path``, or :obj:`None` where it does not read as one."""
    from gnplace.limits import parse_json, read_file

    try:
        data = parse_json(read_file(path, InvalidPlacement, "placement file"), InvalidPlacement, os.fspath(path))
    except InvalidPlacement:
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def _borrows_preset_name(name: str | None, fingerprint: Any) -> bool:
    """Whether a placement file for cluster ``name`` of ``fingerprint`` was made on a file borrowing a preset's name.

    ``False`` for a file that records no fingerprint (written before 2026-12-04).
    """
    from gnplace.cluster import load_cluster, preset_names

    return name in preset_names() and isinstance(fingerprint, str) and fingerprint != load_cluster(name).fingerprint()


def _check_preset_fingerprint(data: dict[str, Any], name: str, path: Path) -> None:
    """Refuse a placement file that names preset ``name`` but records another cluster's fingerprint."""
    if _borrows_preset_name(name, data.get("cluster_fingerprint")):
        raise InvalidPlacement(f"{path}: was made on a cluster file named {name!r}, not on the preset of that name "
                               "(other speeds, memories or links): give that cluster file")


def _recorded_cluster(data: dict[str, Any], path: Path) -> Cluster:
    """The preset that a placement file names as its cluster (:class:`InvalidPlacement` if it names none)."""
    from gnplace.cluster import load_cluster, preset_names

    name = data.get("cluster")
    if not isinstance(name, str) or not name:
        raise InvalidPlacement(f"{path}: names no cluster; give the cluster it was made for")
    if name not in preset_names():
        raise InvalidPlacement(f"{path}: was made for cluster {name!r}, which is not a preset; give its cluster file")
    _check_preset_fingerprint(data, name, path)
    return load_cluster(name)
