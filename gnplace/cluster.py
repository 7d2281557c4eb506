"""``Cluster``: the devices a graph is placed on and the links between every pair of them.

A cluster is described in YAML (see ``gnplace/clusters/*.yaml`` for the shipped presets)::

    name: k80x4
    devices:
      - {name: gpu, count: 4, kind: k80}          # gpu0 .. gpu3, specs from the k80 kind
      - {name: cpu0, kind: cpu, memory: 64 GiB}   # any field of a kind can be overridden
    links:
      default: pcie3                              # every pair: a link kind or {bandwidth, latency}
      groups:                                     # all pairs inside a group
        - {devices: [gpu0, gpu1], link: nvlink2}
      pairs:                                      # single pairs, last word
        - {between: [cpu0, gpu0], link: {bandwidth: 12 GB/s, latency: 10 us}}

A cluster of one device may leave ``links`` out: it has no pair to link.

Device fields (SI units, or strings with units): ``peak_flops`` (FLOP/s), ``mem_bandwidth``
(bytes/s), ``memory`` (bytes), ``flops_efficiency`` and ``mem_efficiency`` (Paleo's "platform
percent of peak", 0 to 1), ``launch_overhead`` (seconds added to every op), ``message_cpu`` (seconds
of compute each message sent or received costs while the other end computes, in the simulator's default
mode; 0 but for measured CPU ranks, see :mod:`gnplace.sim._kernel`). Link bandwidths are
effective bytes/s (nominal rate times Paleo's PPP_comm); latencies are seconds per transfer.

A kind names one device model: measured op seconds and coarse graphs keep op times per kind, so
the devices of one kind must agree on the fields op times depend on (all but ``memory`` and
``message_cpu``); a device overridden to another speed needs a kind of its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import numbers
import os
import reprlib
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np

from gnplace.exceptions import InvalidArgument, InvalidCluster, UnknownName
from gnplace.limits import (
    MAX_COUNT,
    MAX_DEVICES,
    MAX_SECONDS,
    MIN_RATE,
    finite_number,
    is_whole,
    parse_yaml,
    read_file,
)
from gnplace.readonly import ReadOnlyArrays, ReadOnlyAttributes
from gnplace.units import parse_bytes, parse_flops, parse_rate, parse_seconds

# MAX_SECONDS (gnplace.limits, with the other limits) stays importable from here, where clusters are checked against it
__all__ = ["Device", "Cluster", "load_cluster", "preset_names", "off_diagonal", "DEVICE_KINDS", "LINK_KINDS",
           "MAX_SECONDS"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Device:
    """One device of a cluster.

    Args:
        name (str): unique name in its cluster, e.g. ``"gpu0"``.
        kind (str): device kind, e.g. ``"k80"``; measured op costs are keyed by kind.
        peak_flops (float): peak compute rate in FLOP/s.
        mem_bandwidth (float): memory bandwidth in bytes/s.
        memory (float): memory capacity in bytes.
        flops_efficiency (float): fraction of ``peak_flops`` reached (Paleo's PPP) (default: 0.5).
        mem_efficiency (float): fraction of ``mem_bandwidth`` reached (default: 0.7).
        launch_overhead (float): seconds added to every op on this device (default: 5e-6).
        message_cpu (float): seconds of this device's compute that each transfer it sends or receives
            takes while the other end computes (default: 0), in the simulator's default mode (its
            ``"placeto"`` mode, Placeto's simulator, charges none). ``gnplace profile`` measures it for CPU
            ranks whose communication threads share the cores with their compute.

    A :class:`Cluster` checks its devices against the limits a cluster file is held to
    (:mod:`gnplace.limits`: rates reached of at least ``MIN_RATE``, memory of at most ``MAX_COUNT`` bytes,
    durations of at most ``MAX_SECONDS``).
    """

    name: str
    kind: str
    peak_flops: float
    mem_bandwidth: float
    memory: float
    flops_efficiency: float = 0.5
    mem_efficiency: float = 0.7
    launch_overhead: float = 5e-6
    message_cpu: float = 0.0

    @property
    def is_cpu(self) -> bool:
        """Whether this is a CPU: its kind or its name starts with ``cpu`` (``cpu``, ``cpu-1t``, ``cpu0``).

        ``gnplace profile`` names the kind of a CPU rank ``cpu-<threads>t``. Real execution runs a CPU on torch's
        ``cpu``, and a ``device_map`` names it ``"cpu"``.

        Examples:
            >>> load_cluster("cpu_gpu").devices[0].is_cpu, load_cluster("cpu_gpu").devices[1].is_cpu
            (True, False)
        """
        return self.kind.startswith("cpu") or self.name.startswith("cpu")

    @property
    def effective_flops(self) -> float:
        """FLOP/s this device reaches: ``peak_flops * flops_efficiency``."""
        return self.peak_flops * self.flops_efficiency


# Device kinds. Peak figures from Paleo's table and vendor data sheets (Qi et al., ICLR 2017;
# NVIDIA K80/P100/V100 data sheets); one TensorFlow-visible K80 GPU is half the board.
DEVICE_KINDS: dict[str, dict[str, Any]] = {
    "k80": dict(peak_flops=2.8e12, mem_bandwidth=240e9, memory=12 * 2**30, flops_efficiency=0.45,
                mem_efficiency=0.7, launch_overhead=5.7e-6),
    "k40": dict(peak_flops=4.29e12, mem_bandwidth=288e9, memory=12 * 2**30, flops_efficiency=0.45,
                mem_efficiency=0.7, launch_overhead=5.7e-6),
    "titanx": dict(peak_flops=6.144e12, mem_bandwidth=336.5e9, memory=12 * 2**30, flops_efficiency=0.5,
                   mem_efficiency=0.7, launch_overhead=5e-6),
    "p100": dict(peak_flops=9.3e12, mem_bandwidth=732e9, memory=16 * 2**30, flops_efficiency=0.55,
                 mem_efficiency=0.75, launch_overhead=5e-6),
    "v100": dict(peak_flops=15.7e12, mem_bandwidth=900e9, memory=16 * 2**30, flops_efficiency=0.6,
                 mem_efficiency=0.8, launch_overhead=4e-6),
    "cpu": dict(peak_flops=289e9, mem_bandwidth=68e9, memory=64 * 2**30, flops_efficiency=0.5,
                mem_efficiency=0.6, launch_overhead=1e-6),
}

#: The defaults of :class:`Device`'s optional fields (what a kind not in :data:`DEVICE_KINDS` falls back to).
_FIELD_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(Device)
                                   if f.default is not dataclasses.MISSING}

# Link kinds: effective bandwidth (bytes/s) and latency (s). PCIe and network rates from Paleo's
# table times a PPP_comm of 0.75; "placeto" is the channel of Placeto's simulator (7,600 B/us, 25 us).
LINK_KINDS: dict[str, dict[str, float]] = {
    "placeto": dict(bandwidth=7.6e9, latency=25e-6),
    "pcie3": dict(bandwidth=128e9 / 8 * 0.75, latency=10e-6),
    "pcie2": dict(bandwidth=64e9 / 8 * 0.75, latency=10e-6),
    "nvlink2": dict(bandwidth=50e9 * 0.8, latency=5e-6),
    "infiniband": dict(bandwidth=70e9 / 8 * 0.75, latency=20e-6),
    "ethernet20g": dict(bandwidth=20e9 / 8 * 0.75, latency=50e-6),
}


def _fraction(value: Any) -> float:
    """A cluster file's efficiency as a float; YAML's ``true`` and ``yes`` are no fraction (``float`` made them 1.0).

    Raises:
        TypeError: for a boolean.
    """
    if isinstance(value, bool):
        raise TypeError(f"must be a number in (0, 1], got {value!r}")
    try:
        return float(value)
    except OverflowError:  # an int of 310 digits
        raise ValueError(f"must be a number in (0, 1], got one of {len(str(abs(value)))} digits") from None
    except (TypeError, ValueError):  # null, 'half': float()'s words ("could not convert string to float")
        raise ValueError(f"must be a number in (0, 1] such as 0.5, got {value!r}") from None


_DEVICE_PARSERS: dict[str, Callable[[Any], float]] = {
    "peak_flops": parse_flops,
    "mem_bandwidth": parse_rate,
    "memory": parse_bytes,
    "flops_efficiency": _fraction,
    "mem_efficiency": _fraction,
    "launch_overhead": parse_seconds,
    "message_cpu": parse_seconds,
}


class Cluster(ReadOnlyAttributes, ReadOnlyArrays):
    """Devices and the bandwidth and latency between every ordered pair of them.

    Args:
        devices (Iterable[Device]): the devices (a list, a tuple such as another cluster's ``devices``),
            ``num_devices`` of them, unique names.
        bandwidth (array-like): ``[num_devices, num_devices]`` effective bytes/s from row to
            column; the diagonal is ignored (no transfer on one device).
        latency (array-like): ``[num_devices, num_devices]`` seconds per transfer.
        name (str, optional): cluster name (default: ``"cluster"``).

    Raises:
        InvalidCluster: in one line naming the cluster, for devices that are no list of Device, none or more
            than ``MAX_DEVICES``, a device twice or outside a cluster file's limits (:func:`_check_device`),
            matrices of another shape or not of numbers, or a link of no positive finite bandwidth or of a
            latency < 0 or past ``MAX_SECONDS``.

    Examples:
        >>> c = load_cluster("k80x2")
        >>> c
        Cluster(name='k80x2', devices=['gpu0', 'gpu1'])
        >>> float(c.transfer_time(0, 1, 7.6e9))  # 1 s of data + 25 us latency
        1.000025
    """

    _fields = ("name", "devices", "bandwidth", "latency")  # (ReadOnlyAttributes) what __init__ binds, once each

    def _refusal(self, name: str) -> str:
        what = "is read-only" if name in self._fields else "cannot be set: a cluster is immutable"
        return f"a cluster's {name} {what} (make another with Cluster(devices, bandwidth, latency, name=...))"

    def __init__(self, devices: Iterable[Device], bandwidth: Any, latency: Any, *, name: str = "cluster") -> None:
        if not isinstance(name, str) or not name.strip():  # as a cluster file's name: is checked
            raise InvalidCluster(f"cluster name: expected a non-empty string, got {name!r}")
        self.name = name
        if isinstance(devices, str | Mapping) or not isinstance(devices, Iterable):  # None was a TypeError
            raise InvalidCluster(f"cluster {name!r}: devices must be a list of Device, got {reprlib.repr(devices)}")
        self.devices = tuple(devices)
        d = len(self.devices)
        if d == 0:
            raise InvalidCluster(f"cluster {name!r} has no devices")
        if d > MAX_DEVICES:  # the limit of a cluster file's devices; the models' features are sized for it
            raise InvalidCluster(f"cluster {name!r}: {d} devices is over the limit of {MAX_DEVICES}")
        for dev in self.devices:  # YAML checks these per field; a Device made in Python is checked here
            _check_device(dev, name)
        names = [dev.name for dev in self.devices]
        if len(set(names)) != d:
            dup = next(x for x in names if names.count(x) > 1)
            raise InvalidCluster(f"cluster {name!r}: device name {dup!r} is used twice")
        _check_kinds(self.devices, f"cluster {name!r}")
        try:  # a ragged or textual matrix was numpy's ValueError
            self.bandwidth = _numeric_matrix(bandwidth, "bandwidth")
            self.latency = _numeric_matrix(latency, "latency")
        except (TypeError, ValueError) as err:
            raise InvalidCluster(f"cluster {name!r}: bandwidth and latency must be [{d}, {d}] matrices of numbers "
                                 f"({' '.join(str(err).split())})") from None
        for label, matrix in (("bandwidth", self.bandwidth), ("latency", self.latency)):
            if matrix.shape != (d, d):
                raise InvalidCluster(f"cluster {name!r}: {label} matrix has shape {matrix.shape}, expected ({d}, {d})")
            np.fill_diagonal(matrix, np.inf if label == "bandwidth" else 0.0)
            matrix.flags.writeable = False
        _check_links(self.bandwidth, self.latency, self.devices, name)

    @property
    def num_devices(self) -> int:
        """Number of devices."""
        return len(self.devices)

    @property
    def device_names(self) -> list[str]:
        """Device names in index order."""
        return [d.name for d in self.devices]

    @property
    def memory(self) -> np.ndarray:
        """Memory capacity of each device in bytes, ``[num_devices]``."""
        return np.array([d.memory for d in self.devices], dtype=np.float64)

    @property
    def kinds(self) -> list[str]:
        """Device kind of each device."""
        return [d.kind for d in self.devices]

    def index(self, device_name: str) -> int:
        """Index of the device called ``device_name``.

        Raises:
            UnknownName: if no device has that name (it was a bare ``KeyError: 'gpu7'``, naming no cluster).

        Examples:
            >>> load_cluster("cpu_gpu").index("gpu7")
            Traceback (most recent call last):
            ...
            gnplace.exceptions.UnknownName: cluster 'cpu_gpu' has no device named 'gpu7' (its devices: cpu0, gpu0)
        """
        names = self.device_names
        try:
            return names.index(device_name)
        except ValueError:
            shown = ", ".join(names[:8]) + (f", ... ({len(names)} devices)" if len(names) > 8 else "")
            raise UnknownName(f"cluster {self.name!r} has no device named {reprlib.repr(device_name)} (its devices: "
                              f"{shown})") from None

    def subset(self, indices: Any, *, name: str | None = None) -> Cluster:
        """The cluster of the devices at ``indices``, in that order, with the links between them.

        Examples:
            >>> c = load_cluster("k80x4").subset([2, 0])
            >>> c.device_names, c.name
            (['gpu2', 'gpu0'], 'k80x4[2,0]')
        """
        given = np.asarray(indices).reshape(-1)
        # 0.5 was cut to device 0, a boolean mask read as [0, 1]; an int past int64 (an object) is whole, no device
        if given.size and given.dtype.kind not in "iu" and not (given.dtype.kind == "O" and all(
                isinstance(i, numbers.Integral) and not isinstance(i, bool | np.bool_) for i in given.tolist())):
            raise InvalidCluster(f"cluster {self.name!r}: device indices must be whole numbers, got {given.tolist()}")
        if given.size == 0 or given.min() < 0 or given.max() >= self.num_devices:  # (2**63 as uint64 was -2**63)
            raise InvalidCluster(f"cluster {self.name!r} has no devices {given.tolist()} (it has {self.num_devices})")
        keep = given.astype(np.int64)
        label = name if name is not None else f"{self.name}[{','.join(map(str, keep.tolist()))}]"
        return Cluster([self.devices[i] for i in keep], self.bandwidth[np.ix_(keep, keep)],
                       self.latency[np.ix_(keep, keep)], name=label)

    def transfer_time(self, src: int, dst: int, num_bytes: float) -> float:
        """Seconds to move ``num_bytes`` from device ``src`` to device ``dst`` (0 on one device).

        Raises:
            InvalidArgument: if ``src`` or ``dst`` is not a device index of this cluster (-1 read the last
                device's link) or ``num_bytes`` is negative or not finite (-5 bytes took less than the latency; an int
                past a float's range, 10**400, was an OverflowError).
        """
        for label, index in (("src", src), ("dst", dst)):
            if isinstance(index, bool | np.bool_) or not isinstance(index, numbers.Integral) \
                    or not 0 <= int(index) < self.num_devices:
                raise InvalidArgument(f"transfer_time's {label} must be a device index 0..{self.num_devices - 1} "
                                      f"of cluster {self.name!r}, got {reprlib.repr(index)}")
        if isinstance(num_bytes, bool | np.bool_) or not isinstance(num_bytes, numbers.Real) \
                or not (finite_number(num_bytes) and num_bytes >= 0):
            raise InvalidArgument(f"transfer_time's num_bytes must be a finite number >= 0 bytes, "
                                  f"got {reprlib.repr(num_bytes)}")
        if src == dst:
            return 0.0
        return float(self.latency[src, dst] + num_bytes / self.bandwidth[src, dst])

    def __repr__(self) -> str:
        return f"Cluster(name={self.name!r}, devices={self.device_names})"

    def __eq__(self, other: object) -> bool:
        """Equal when the fingerprints are (name, devices and links), as placements compare their clusters.

        So a preset or file loaded twice, or a cluster copied or unpickled, is the same cluster.
        """
        if not isinstance(other, Cluster):
            return NotImplemented
        return self is other or self.fingerprint() == other.fingerprint()

    def __hash__(self) -> int:
        """Of the name and device names: cheap, and shared by equal clusters."""
        return hash((self.name, tuple(self.device_names)))

    def fingerprint(self) -> str:
        """SHA-256 (hex) of everything that shapes a step on this cluster: name, devices, links.

        Two clusters with the same fingerprint time every placement alike; evaluation uses it to
        tell whether a saved result is still valid. It is computed once and kept while the name, the
        devices and the (read-only) link matrices are the objects it was computed from.

        Examples:
            >>> load_cluster("k80x2").fingerprint() == load_cluster("k80x2").fingerprint()
            True
            >>> load_cluster("k80x2").fingerprint() == load_cluster("k80x4").fingerprint()
            False
        """
        return self.kept("_fingerprint", (self.name, self.devices), None, lambda: self._digest(_canonical))

    def inverse_bandwidth(self) -> np.ndarray:
        """Seconds per byte of each link, ``1 / bandwidth``, 0 on the diagonal (no transfer on one device), read-only.

        ``[num_devices, num_devices]``, kept (:meth:`kept`): each list schedule divided the bandwidths anew, 134 MB
        and 0.1-0.4 s at 4,096 devices, three times in ``auto``.

        Examples:
            >>> c = load_cluster("k80x2")
            >>> c.inverse_bandwidth().tolist() == [[0.0, 1 / 7.6e9], [1 / 7.6e9, 0.0]]
            True
            >>> c.inverse_bandwidth() is c.inverse_bandwidth(), c.inverse_bandwidth().flags.writeable
            (True, False)
        """

        def compute() -> np.ndarray:
            with np.errstate(divide="ignore"):
                inverse = 1.0 / self.bandwidth
            inverse.flags.writeable = False  # shared by every caller
            return inverse

        return self.kept("_inverse_bandwidth", (), None, compute)

    def kept(self, slot: str, inputs: tuple[object, ...], key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()``, kept in the attribute ``slot`` while it would give the same.

        That is while ``inputs`` and the link matrices are the objects it was computed from, the link matrices
        read-only (else they may change in place), and ``key`` (compared by ``==``) the one it was last computed for.

        Examples:
            >>> c = load_cluster("k80x2")
            >>> c.kept("_answer", (), 1, lambda: 42), c.kept("_answer", (), 1, lambda: 0)
            (42, 42)
        """
        inputs = (*inputs, self.bandwidth, self.latency)
        cached = self.__dict__.get(slot)
        if cached is not None and len(cached[0]) == len(inputs) and all(a is b for a, b in zip(cached[0], inputs)) \
                and cached[1] == key:
            return cast(_T, cached[2])
        value = compute()
        if not (self.bandwidth.flags.writeable or self.latency.flags.writeable):
            self.__dict__[slot] = (inputs, key, value)
        return value

    def earlier_fingerprint(self) -> str:
        """The fingerprint gnplace recorded before 2026-12-04 (commit 32c87da): each number hashed as it was given.

        A cluster file that restates a default in another form (the k80's ``memory: 12 GiB``, a float where the
        preset's is an int) had another fingerprint then, which a search's or fine-tuning's checkpoint of those
        days records; their ``resume`` accepts it. It is :meth:`fingerprint` wherever the numbers were written
        as the defaults are (the presets, the clusters drawn for pretraining).

        Examples:
            >>> load_cluster("k80x2").earlier_fingerprint() == load_cluster("k80x2").fingerprint()
            True
        """
        return self._digest(getattr)

    def _digest(self, value: Callable[[Device, str], Any]) -> str:
        """SHA-256 (hex) of the name, each device's fields as ``value(device, field)`` gives them, and the links.

        About 0.4 s on 4,096 devices (256 MiB of links): :meth:`fingerprint` keeps its own.
        """
        # message_cpu joins a device's tuple only where it is set, so clusters without it keep the
        # fingerprints that saved results and pretraining runs recorded before the field existed
        older = [f.name for f in dataclasses.fields(Device) if f.name != "message_cpu"]
        devices = [tuple(value(d, key) for key in older) + ((d.message_cpu,) if d.message_cpu else ())
                   for d in self.devices]
        digest = hashlib.sha256(repr((self.name, devices)).encode())
        digest.update(np.ascontiguousarray(self.bandwidth).tobytes())
        digest.update(np.ascontiguousarray(self.latency).tobytes())
        return digest.hexdigest()


def off_diagonal(matrix: np.ndarray, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Rows ``start`` to ``stop`` of a square ``matrix``'s entries off its diagonal, ``[stop - start, D - 1]``.

    Row ``k`` holds device ``k``'s links to every other device, in order: the elements a ``~np.eye(D)`` mask picks,
    in its order, in a new C-ordered array, without the ``[D, D]`` mask or a gather by it (16.8 million booleans at
    4,096 devices). Past the first entry, each diagonal entry ends a run of ``D + 1``: the runs without their last
    entries, ``[D - 1, D]``, hold the rows' entries back to back.

    Args:
        matrix (np.ndarray): ``[D, D]``, a cluster's bandwidth (bytes/s) or latency (seconds).
        start (int, optional): the first row (default: 0).
        stop (int, optional): past the last row (default: None, ``D``).

    Examples:
        >>> m = np.arange(9.0).reshape(3, 3)
        >>> off_diagonal(m).tolist(), off_diagonal(m, 1, 2).tolist()
        ([[1.0, 2.0], [3.0, 5.0], [6.0, 7.0]], [[3.0, 5.0]])
    """
    d = matrix.shape[0]
    stop = d if stop is None else stop
    if d < 2 or stop <= start:
        return np.empty((max(stop - start, 0), max(d - 1, 0)), dtype=matrix.dtype)
    runs = matrix.reshape(-1)[1:].reshape(d - 1, d + 1)[:, :d]
    first, last = start * (d - 1), stop * (d - 1)  # the rows' entries, counted along the runs
    top, bottom = first // d, -(-last // d)
    return runs[top:bottom].copy().reshape(-1)[first - top * d:last - top * d].reshape(stop - start, d - 1)


def _numeric_matrix(given: Any, label: str) -> np.ndarray:
    """``given`` (a link matrix, ``label``: bandwidth or latency) as a new float64 array, where it holds numbers.

    ``np.array(..., dtype=float64)`` alone read ``"1e9"`` as 1e9 B/s, ``True`` as a latency of 1 s, ``1e9+1j`` as
    1e9 (with numpy's ComplexWarning) and a ``timedelta64`` as its count, without a word. ``None`` (NaN) is left
    to the link checks, which refuse it off the diagonal (the diagonal is ignored). A float array is checked by
    its dtype alone; a list's elements by the set of their types, made in C.

    Raises:
        ValueError: naming ``label`` and what it holds (:class:`Cluster` makes it one InvalidCluster line); or
            numpy's, for a ragged matrix.
    """
    if isinstance(given, np.ndarray) and given.dtype.kind != "O":
        kind = given.dtype.kind
    else:
        items = np.asarray(given, dtype=object).reshape(-1).tolist()
        kind = _element_kind(set(map(type, items)))
    if kind not in "iuf":
        what = {"b": "booleans", "c": "complex numbers", "m": "durations", "M": "dates"}.get(kind, "text")
        raise ValueError(f"the {label} matrix holds {what}")
    return np.array(given, dtype=np.float64)


def _element_kind(types: set[type]) -> str:
    """The numpy kind letter of a matrix of elements of ``types``, ``f`` where all are numbers (or None)."""
    for kind, classes in (("b", (bool, np.bool_)), ("U", (str, bytes, np.str_, np.bytes_)),
                          ("c", (complex, np.complexfloating)), ("M", (np.datetime64,)), ("m", (np.timedelta64,))):
        if any(issubclass(t, classes) for t in types):
            return kind
    return "f"


def _check_links(bandwidth: np.ndarray, latency: np.ndarray, devices: tuple[Device, ...], name: str) -> None:
    """Refuse a link (an off-diagonal entry) of no, infinite or too little bandwidth (bytes/s) or a bad latency (s).

    The diagonal is already set (bandwidth ``inf``, latency 0), so each matrix is compared whole, the diagonal's
    bandwidth excused: gathering the off-diagonal entries by a ``[D, D]`` mask copied a 128 MiB matrix per pass at
    4,096 devices (three passes, 0.3 s of Cluster's 0.39 s, and 432 MiB at its peak, 288 MiB now).
    """
    usable = (bandwidth > 0) & (bandwidth < np.inf)
    np.fill_diagonal(usable, True)  # no transfer on one device
    if not usable.all():
        raise InvalidCluster(f"cluster {name!r}: every link needs a positive, finite bandwidth")
    del usable
    slow = bandwidth < MIN_RATE  # 1e-320 B/s made transfer times infinite
    if slow.any():
        src, dst = (int(i) for i in np.argwhere(slow)[0])
        raise InvalidCluster(f"cluster {name!r}: the link {devices[src].name!r} -> {devices[dst].name!r} "
                             f"has bandwidth {bandwidth[src, dst]:.3g} B/s, under the limit of {MIN_RATE:g}")
    del slow
    if not ((latency >= 0) & (latency <= MAX_SECONDS)).all():
        raise InvalidCluster(f"cluster {name!r}: every link needs a finite latency >= 0, at most "
                             f"{MAX_SECONDS:.3g} seconds")


def _canonical(device: Device, field: str) -> Any:
    """``device``'s ``field`` as :meth:`Cluster.fingerprint` hashes it: one written form per value.

    The fingerprint hashes ``repr``, and equal numbers can print apart: a file's ``memory: 12 GiB`` is
    ``12884901888.0`` where the preset's k80 default is ``12 * 2**30``, ``10**12`` is not ``1e12``, and a numpy
    float prints its type. A number equal to its kind's default (:data:`DEVICE_KINDS`, else the field's) is
    hashed as that default, any other as a float, so the presets and the clusters drawn for pretraining keep
    the fingerprints their saved results recorded.
    """
    value = getattr(device, field)
    if field in ("name", "kind"):
        return value
    default = DEVICE_KINDS.get(device.kind, {}).get(field, _FIELD_DEFAULTS.get(field))
    return default if default is not None and value == default else float(value)


# ---------------------------------------------------------------------------------- loading
def preset_names() -> list[str]:
    """Names of the shipped cluster presets (``gnplace/clusters/*.yaml``)."""
    folder = resources.files("gnplace") / "clusters"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_cluster(spec: str | os.PathLike[str] | Cluster) -> Cluster:
    """Load a cluster by preset name (``"k80x4"``) or from a YAML file path.

    Args:
        spec (str, os.PathLike or Cluster): a preset's name (:func:`preset_names`), a YAML cluster file (a
            ``.yaml`` or ``.yml`` name, or any file that exists), or a :class:`Cluster`, given back as it is.

    Returns:
        Cluster: its devices (FLOP/s, bytes/s, bytes) and links (bytes/s, seconds).

    Raises:
        InvalidCluster: with one line naming the file, the key and the problem, if the name is
            unknown or the file is malformed.
        InvalidArgument: if ``spec`` is no name, path or cluster (None).

    Examples:
        >>> load_cluster("k80x2")
        Cluster(name='k80x2', devices=['gpu0', 'gpu1'])
        >>> load_cluster("k80x2").devices[0].memory / 2**30  # bytes, 12 GiB
        12.0
    """
    if isinstance(spec, Cluster):
        return spec
    if not isinstance(spec, str | os.PathLike):  # None read as the unknown cluster 'None'
        raise InvalidArgument(f"a cluster is given by a preset's name, a YAML file's path or a Cluster, "
                              f"got {reprlib.repr(spec)}")
    text_spec = str(spec)
    if not text_spec.strip():  # Path("") is the current folder, which the message would name instead
        raise InvalidCluster(f"cluster name is empty: give a YAML file or one of {', '.join(preset_names())}")
    path = Path(text_spec)
    # a file, else a preset, whatever folder of that name is here (one output folder per cluster is common)
    if not (text_spec.endswith((".yaml", ".yml")) or path.is_file()
            or (path.exists() and text_spec not in preset_names())):
        if text_spec not in preset_names():
            raise InvalidCluster(
                f"unknown cluster {text_spec!r}: give a YAML file or one of {', '.join(preset_names())}"
            )
        source = f"{text_spec}.yaml"
        text = (resources.files("gnplace") / "clusters" / source).read_text()
    else:
        source = text_spec
        raw = read_file(path, InvalidCluster, "cluster file")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InvalidCluster(
                f"{source}: not valid YAML: not UTF-8 text ({err.reason} at byte {err.start})"
            ) from err
    return cluster_from_dict(parse_yaml(text, InvalidCluster, source), source=source)


#: The fields of a :class:`Device` that hold a number (FLOP/s, bytes/s, bytes, fractions, seconds).
_NUMBER_FIELDS = tuple(_DEVICE_PARSERS)

#: The defaults of the fields of :data:`_NUMBER_FIELDS` that have one (efficiencies, overheads).
_NUMBER_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Device)
                    if f.name in _NUMBER_FIELDS and f.default is not dataclasses.MISSING}


def _check_device(dev: Device, cluster: str) -> None:
    """Refuse a device outside the limits a cluster file's device is held to (:func:`_device_limit`, the file reader's).

    Args:
        dev (Device): the device, made in Python or read from a file.
        cluster (str): the name of its cluster, the start of the message.

    Raises:
        InvalidCluster: one line naming the cluster, the device, the field, its value and the limit; or
            that ``dev`` is no :class:`Device`, or has no name (an empty one, or one with surrounding
            spaces), a kind that is no string or a field that is no number (``"1e11"``, :obj:`True`).
    """
    if not isinstance(dev, Device):
        raise InvalidCluster(f"cluster {cluster!r}: expected a Device, got {type(dev).__name__} {dev!r}")
    if not isinstance(dev.name, str) or not dev.name.strip() or dev.name != dev.name.strip():
        raise InvalidCluster(f"cluster {cluster!r}: device name must be a non-empty name without surrounding "
                             f"spaces, got {dev.name!r}")
    if not isinstance(dev.kind, str):
        raise InvalidCluster(f"cluster {cluster!r}: device {dev.name!r} has kind {dev.kind!r}; it must be a string")
    for field in _NUMBER_FIELDS:  # a string or None failed in a comparison below, with a TypeError
        value = getattr(dev, field)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InvalidCluster(f"cluster {cluster!r}: device {dev.name!r} has {field} {value!r} "
                                 f"({type(value).__name__}); it must be a number")
        if isinstance(value, int) and abs(value) > sys.float_info.max:  # 10**400: an OverflowError below
            raise InvalidCluster(f"cluster {cluster!r}: device {dev.name!r} has {field} of {len(str(abs(value)))} "
                                 "digits, past a float's range")
    problem = _device_limit({field: getattr(dev, field) for field in _NUMBER_FIELDS})
    if problem is not None:
        raise InvalidCluster(f"cluster {cluster!r}: device {dev.name!r}: {problem[0]} {problem[1]}")


def _device_limit(values: Mapping[str, float]) -> tuple[str, str] | None:
    """The first field of a device's numbers outside the limits a device is held to, and why; None if none is.

    The one rule a cluster file's device (``_devices``, naming its key) and a :class:`Device` made in Python
    (:func:`_check_device`, naming its cluster) are held to: rates (FLOP/s, bytes/s) and memory (bytes) positive
    and finite, memory at most ``MAX_COUNT`` bytes, efficiencies in (0, 1], rates reached of at least ``MIN_RATE``,
    overheads (seconds) finite, >= 0 and at most ``MAX_SECONDS``.

    Args:
        values (Mapping[str, float]): every field of :data:`_NUMBER_FIELDS`, a real number each.

    Examples:
        >>> _device_limit({**DEVICE_KINDS["k80"], "mem_efficiency": 0.0})
        ('mem_efficiency', 'must be in (0, 1], got 0.0')
    """
    values = {field: float(value) for field, value in {**_NUMBER_DEFAULTS, **values}.items()}  # np.float64(...) shown
    for field in ("peak_flops", "mem_bandwidth", "memory"):  # an infinite one gave NaN policy features
        if not 0 < values[field] < np.inf:
            return field, f"must be positive and finite, got {values[field]!r}"
    if values["memory"] > MAX_COUNT:
        return "memory", f"{values['memory']:.4g} bytes is over the limit of 2**62"
    for field in ("flops_efficiency", "mem_efficiency"):  # 0 would make op times infinite, NaN or negative
        if not 0 < values[field] <= 1:
            return field, f"must be in (0, 1], got {values[field]!r}"
    # slower, op times overflow float64 within the graph limits
    for rate, efficiency, unit in (("peak_flops", "flops_efficiency", "FLOP/s"),
                                   ("mem_bandwidth", "mem_efficiency", "B/s")):
        reached = values[rate] * values[efficiency]
        if reached < MIN_RATE:
            return rate, f"{values[rate]!r} reaches {reached:.3g} {unit}, under the limit of {MIN_RATE:g}"
    for field in ("launch_overhead", "message_cpu"):  # a negative one would end ops before they start
        if not values[field] >= 0:
            return field, f"must be >= 0, got {values[field]!r}"
        if values[field] > MAX_SECONDS:
            return field, f"{values[field]:.3g} seconds is over the limit of {MAX_SECONDS:.3g}"
    return None


#: The fields of a :class:`Device` that its op times depend on: devices of one kind must agree on them.
_OP_TIME_FIELDS = ("peak_flops", "mem_bandwidth", "flops_efficiency", "mem_efficiency", "launch_overhead")


def _check_kinds(devices: tuple[Device, ...], where: str) -> None:
    """Refuse two devices of one kind whose op times differ (:data:`_OP_TIME_FIELDS`).

    A kind names one device model: measured op seconds (a graph's ``cost_s``) and a coarse graph's
    summed op times are kept per kind, so a faster device of the same kind would be timed as the first.
    """
    first: dict[str, Device] = {}
    for dev in devices:
        other = first.setdefault(dev.kind.lower(), dev)  # measured costs read kinds without case: "K80" is "k80"
        for field in _OP_TIME_FIELDS:
            if getattr(dev, field) != getattr(other, field):
                raise InvalidCluster(
                    f"{where}: devices {other.name!r} and {dev.name!r} are both of kind {dev.kind!r} but "
                    f"differ in {field} ({getattr(other, field):.4g} and {getattr(dev, field):.4g}); op times are "
                    "kept per kind, so give each its own kind (kind: NAME with every field)"
                )


def _keys(entry: Any, where: str, allowed: set[str], required: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    if not isinstance(entry, dict):
        got = "nothing (empty)" if entry is None else type(entry).__name__  # an empty file or list item: NoneType
        raise InvalidCluster(f"{where}: expected a mapping, got {got}")
    unknown = sorted(set(entry) - allowed, key=str)  # YAML 1.1 reads keys as booleans and numbers too (on: True)
    if unknown:
        raise InvalidCluster(f"{where}: unknown key {unknown[0]!r} (expected one of {', '.join(sorted(allowed))})")
    missing = sorted(required - set(entry))
    if missing:
        raise InvalidCluster(f"{where}: missing key {missing[0]!r}")
    return entry


def _devices(entries: Any, source: str) -> list[Device]:
    if not isinstance(entries, list) or not entries:
        raise InvalidCluster(f"{source}: 'devices' must be a non-empty list")
    allowed = {"name", "count", "kind"} | set(_DEVICE_PARSERS)
    devices: list[Device] = []
    for i, raw in enumerate(entries):
        where = f"{source}: devices[{i}]"
        entry = _keys(raw, where, allowed, {"name"})
        if not isinstance(entry["name"], str) or not entry["name"].strip() or entry["name"] != entry["name"].strip():
            raise InvalidCluster(f"{where}.name: must be a non-empty name without surrounding spaces, "
                                 f"got {entry['name']!r}")
        if "kind" in entry and (not isinstance(entry["kind"], str) or not entry["kind"].strip()):
            raise InvalidCluster(f"{where}.kind: expected a device kind's name, got {entry['kind']!r}")
        kind = str(entry.get("kind", "custom")).lower()
        if "kind" in entry and kind not in DEVICE_KINDS and not {"peak_flops", "mem_bandwidth", "memory"} <= set(entry):
            raise InvalidCluster(
                f"{where}.kind: unknown device kind {kind!r} (known: {', '.join(DEVICE_KINDS)}; or give every field)"
            )
        spec: dict[str, Any] = dict(DEVICE_KINDS.get(kind, {}))
        for key, parse in _DEVICE_PARSERS.items():
            if key in entry:
                try:
                    spec[key] = parse(entry[key])
                except (TypeError, ValueError) as err:
                    raise InvalidCluster(f"{where}.{key}: {err}") from err
        for key in ("peak_flops", "mem_bandwidth", "memory"):
            if key not in spec:
                raise InvalidCluster(
                    f"{where}: missing key {key!r} (give it, or a known kind: {', '.join(DEVICE_KINDS)})"
                )
        problem = _device_limit(spec)
        if problem is not None:
            raise InvalidCluster(f"{where}.{problem[0]}: {problem[1]}")
        count = entry.get("count", None)
        if count is not None and (not is_whole(count) or count < 1):  # a numpy integer is whole too, a bool is not
            raise InvalidCluster(f"{where}.count: must be a positive integer, got {count!r}")
        count = None if count is None else int(count)
        if len(devices) + (count or 1) > MAX_DEVICES:
            raise InvalidCluster(f"{where}.count: more than {MAX_DEVICES} devices in all, the limit")
        names = [f"{entry['name']}{j}" for j in range(count)] if count is not None else [str(entry["name"])]
        devices.extend(Device(name=name, kind=kind, **spec) for name in names)
    return devices


def _link(raw: Any, where: str) -> tuple[float, float]:
    if isinstance(raw, str):
        if raw not in LINK_KINDS:
            raise InvalidCluster(f"{where}: unknown link kind {raw!r} (known: {', '.join(LINK_KINDS)})")
        return LINK_KINDS[raw]["bandwidth"], LINK_KINDS[raw]["latency"]
    entry = _keys(raw, where, {"bandwidth", "latency"}, {"bandwidth"})
    try:
        bandwidth = parse_rate(entry["bandwidth"])
        latency = parse_seconds(entry.get("latency", 0.0))
    except (TypeError, ValueError) as err:
        raise InvalidCluster(f"{where}: {err}") from err
    if not bandwidth > 0:
        raise InvalidCluster(f"{where}.bandwidth: must be positive, got {bandwidth}")
    if bandwidth < MIN_RATE:
        raise InvalidCluster(f"{where}.bandwidth: {bandwidth:.3g} B/s is under the limit of {MIN_RATE:g}")
    if latency < 0:
        raise InvalidCluster(f"{where}.latency: must be >= 0, got {latency}")
    if latency > MAX_SECONDS:
        raise InvalidCluster(f"{where}.latency: {latency:.3g} seconds is over the limit of {MAX_SECONDS:.3g}")
    return bandwidth, latency


def cluster_from_dict(data: Any, *, source: str = "cluster") -> Cluster:
    """Build a :class:`Cluster` from the parsed YAML mapping (see the module docstring).

    Raises:
        InvalidCluster: naming ``source``, the key and the problem.
    """
    top = _keys(data, source, {"name", "description", "devices", "links"}, {"devices"})
    devices = _devices(top["devices"], source)
    names = [d.name for d in devices]
    if len(set(names)) != len(names):
        dup = next(x for x in names if names.count(x) > 1)
        raise InvalidCluster(f"{source}: device name {dup!r} is used twice")
    _check_kinds(tuple(devices), f"{source}: devices")  # the file's name, which the Cluster's own check lacks
    index = {n: i for i, n in enumerate(names)}
    d = len(devices)
    if "links" not in top:
        if d > 1:
            raise InvalidCluster(f"{source}: missing key 'links' (the {d} devices need at least links.default, "
                                 "a link kind such as pcie3 or {bandwidth, latency})")
        return Cluster(devices, np.full((1, 1), np.inf), np.zeros((1, 1)), name=_cluster_name(top, source))
    links = _keys(top["links"], f"{source}: links", {"default", "groups", "pairs"}, {"default"})
    bw0, lat0 = _link(links["default"], f"{source}: links.default")
    bandwidth = np.full((d, d), bw0)
    latency = np.full((d, d), lat0)

    def lookup(name: Any, where: str) -> int:
        if not isinstance(name, str) or name not in index:
            raise InvalidCluster(f"{where}: unknown device {name!r} (devices: {', '.join(names)})")
        return index[name]

    for key, members_key in (("groups", "devices"), ("pairs", "between")):
        entries = links.get(key) if links.get(key) is not None else []  # `groups:` with nothing after it: none
        if not isinstance(entries, list):
            raise InvalidCluster(f"{source}: links.{key} must be a list, got {entries!r}")
        for j, raw in enumerate(entries):
            where = f"{source}: links.{key}[{j}]"
            entry = _keys(raw, where, {members_key, "link"}, {members_key, "link"})
            members = entry[members_key]
            if not isinstance(members, list) or len(members) < 2 or (key == "pairs" and len(members) != 2):
                want = "two device names" if key == "pairs" else "a list of at least two device names"
                raise InvalidCluster(f"{where}.{members_key}: expected {want}, got {members!r}")
            idx = [lookup(m, f"{where}.{members_key}") for m in members]
            if len(set(idx)) != len(idx):
                twice = next(m for m in members if members.count(m) > 1)
                raise InvalidCluster(f"{where}.{members_key}: names device {twice!r} twice (a link joins two devices)")
            bw, lat = _link(entry["link"], f"{where}.link")
            block = np.ix_(idx, idx)  # every pair of the members at once (a group may list 4,096); the diagonal
            bandwidth[block], latency[block] = bw, lat  # is Cluster's own (no transfer on one device)
    return Cluster(devices, bandwidth, latency, name=_cluster_name(top, source))


def _cluster_name(top: dict[str, Any], source: str) -> str:
    """The cluster's ``name``, else the file's stem."""
    name = top.get("name", Path(source).stem)
    if not isinstance(name, str) or not name.strip():
        raise InvalidCluster(f"{source}: name: expected a non-empty string, got {name!r}")
    return name
