"""``MeasurementJournal``: a real timer's measurements, appended to a file as they are taken and replayed on resume.

A real step costs seconds to measure, and a search resumed after a kill asks again for the placements it
measured before it: annealing (fine-tuning's polish) retakes its seeded path from the same start, and PPO
retakes the iterations after its last checkpoint with the sampling generator that checkpoint saved. With
the journal attached (:meth:`~gnplace.execute.base.RealStepTimer.attach`), each of those is answered from the
file with the very numbers measured before, so the resumed run follows the path the killed one took and
runs only the steps that run never measured.

The file is JSON lines: a header naming what was measured (the caller's ``identity``: the graph, the timer
and how it measures), then one line per placement measured (the cluster's fingerprint, the placement,
and its :class:`~gnplace.sim.timer.StepResult` in seconds and bytes). Each line is flushed and synced before
the measurement is used, so a kill loses at most the measurement under way; a line cut short by one is
dropped when the file is read, and overwritten by the next append. The file is written only when a
measurement is appended: a journal opened and refused, or never used, leaves the file as it was.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import zlib
from pathlib import Path
from typing import IO, Any

import numpy as np

from gnplace.exceptions import InvalidArgument, InvalidCheckpoint
from gnplace.limits import MAX_NODES
from gnplace.sim.timer import StepResult

__all__ = ["MeasurementJournal", "JOURNAL_FORMAT"]

#: The header's ``format`` field.
JOURNAL_FORMAT = "gnplace-measurements/1"

#: A cache key of :class:`~gnplace.execute.base.RealStepTimer`: the cluster's fingerprint and the placement's
#: devices as ``int64`` bytes.
Key = tuple[str, bytes]


def _encode_devices(devices: bytes) -> str:
    """A placement's ``int64`` device bytes, deflated and base64-encoded (a long placement compresses well)."""
    return base64.b64encode(zlib.compress(devices)).decode("ascii")


#: Most bytes a line's devices inflate to: an ``int64`` device for each of the most ops a graph may have.
MAX_DEVICE_BYTES = 8 * MAX_NODES


def _decode_devices(text: Any) -> bytes:
    """The ``int64`` device bytes of :func:`_encode_devices`, inflated to at most :data:`MAX_DEVICE_BYTES`.

    Raises:
        TypeError: if ``text`` is no string.
        ValueError: if it is no base64 (``binascii.Error``), inflates past the limit (a 2.8 MB line of a shared
            journal took 4.4 GB and two minutes), is cut short, or its bytes are no ``int64`` values.
        zlib.error: if it is no deflated data.
    """
    if not isinstance(text, str):  # null or a number where the encoded devices belong
        raise TypeError("devices are not text")
    inflate = zlib.decompressobj()
    raw = inflate.decompress(base64.b64decode(text.encode("ascii"), validate=True), MAX_DEVICE_BYTES + 1)
    if len(raw) > MAX_DEVICE_BYTES or inflate.unconsumed_tail:
        raise ValueError(f"devices inflate past {MAX_DEVICE_BYTES} bytes")
    if not inflate.eof:
        raise ValueError("device bytes are cut short")
    if len(raw) % 8:
        raise ValueError("device bytes are not int64")
    return raw


def _differences(saved: Any, mine: dict[str, Any], prefix: str = "") -> list[str]:
    """The keys whose values differ between two identities, a nested dictionary's as ``outer.inner``."""
    if not isinstance(saved, dict):
        return [prefix.rstrip(".") or "identity"]
    differ = []
    for key in sorted(set(saved) | set(mine)):
        if saved.get(key) != mine.get(key):
            if isinstance(saved.get(key), dict) and isinstance(mine.get(key), dict):
                differ += _differences(saved[key], mine[key], f"{prefix}{key}.")
            else:
                differ.append(f"{prefix}{key}")
    return differ


def _result_fields(result: StepResult) -> dict[str, Any]:
    # floats go through repr in JSON, so every value reads back bit for bit
    return {"step_s": float(result.step_time), "busy_s": [float(x) for x in result.busy_time],
            "peak_bytes": [float(x) for x in result.peak_memory],
            "capacity_bytes": [float(x) for x in result.memory_capacity], "names": list(result.device_names)}


def _read_result(entry: dict[str, Any]) -> StepResult:
    names = entry["names"]
    columns = [np.asarray(entry[k], dtype=np.float64) for k in ("busy_s", "peak_bytes", "capacity_bytes")]
    if not isinstance(names, list) or any(c.shape != (len(names),) for c in columns):
        raise ValueError("per-device columns of unequal length")
    return StepResult(float(entry["step_s"]), columns[0], columns[1], columns[2], [str(n) for n in names])


class MeasurementJournal:
    """The measurements of one run's real timer, kept in ``path`` (see the module docstring).

    Args:
        path (str or Path): the JSON-lines file (fine-tuning's is ``OUT/measurements.jsonl``).
        identity (dict): plain data naming what is measured (graph, timer, how it measures); a resumed
            run's must equal the file's header.
        resume (bool, optional): read the measurements in ``path``; otherwise ``path`` must hold none,
            and the first append starts it afresh (default: :obj:`False`).

    Raises:
        InvalidArgument: without ``resume``, if ``path`` holds measurements (another run's, not ours to drop).
        InvalidCheckpoint: with ``resume``, if ``path`` is not a journal, is damaged before its last line, or
            records another graph or timer settings (one line; the file is left as it was).
    """

    def __init__(self, path: str | os.PathLike[str], identity: dict[str, Any], *, resume: bool = False) -> None:
        self.path = Path(path)
        self.header = {"format": JOURNAL_FORMAT, "identity": json.loads(json.dumps(identity))}
        self.results: dict[Key, StepResult] = {}
        self._valid_bytes = 0  # of the file, what the next append keeps (0: it starts the file afresh)
        self._handle: IO[bytes] | None = None
        if self.path.exists() and not self.path.is_file():
            raise InvalidCheckpoint(f"{self.path}: not a measurement journal file (move it away or use another -o)")
        if not self.path.exists():
            return
        if not resume:
            if self._holds_measurements():
                raise InvalidArgument(f"{self.path.parent} holds a run's measurements ({self.path.name}): resume it "
                                      "(--resume), or use another -o")
            return
        self._read()

    def __len__(self) -> int:
        return len(self.results)

    def _holds_measurements(self) -> bool:
        with self.path.open("rb") as handle:
            return sum(1 for line in handle if line.endswith(b"\n")) > 1

    def _read(self) -> None:
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        complete = lines[:-1]  # the last piece has no newline: empty, or a line a kill cut short
        if not complete:
            return  # nothing whole yet: the first append starts the file afresh
        try:
            header = json.loads(complete[0])
        except (UnicodeDecodeError, ValueError, RecursionError):  # ("[[[..." thousands deep: RecursionError)
            header = None
        if not isinstance(header, dict) or header.get("format") != JOURNAL_FORMAT:
            raise InvalidCheckpoint(f"{self.path}: not a gnplace measurement journal (move it away or use another -o)")
        if header.get("identity") != self.header["identity"]:
            differ = ", ".join(_differences(header.get("identity"), self.header["identity"]))
            raise InvalidCheckpoint(f"{self.path} holds another run's measurements ({differ} differ): resume with "
                                    "the same inputs or use another -o")
        for number, line in enumerate(complete[1:], start=2):
            try:
                entry = json.loads(line)
                key = (str(entry["cluster"]), _decode_devices(entry["devices"]))
                self.results[key] = _read_result(entry)
            # binascii.Error is a ValueError; "[[[..." thousands deep a RecursionError
            except (KeyError, TypeError, ValueError, RecursionError, zlib.error) as err:
                raise InvalidCheckpoint(f"{self.path}: line {number} is damaged ({type(err).__name__}); cannot "
                                        "resume from it (move it away or use another -o)") from None
        self._valid_bytes = len(data) - len(lines[-1])  # every whole line read

    def append(self, key: Key, result: StepResult) -> None:
        """Write one measurement (synced before this returns); the first append starts or repairs the file.

        Raises:
            OSError: naming the file, if it cannot be written (a full disk): what this append wrote of its line is
                taken back, and the next append starts from the measurements saved before.
        """
        line = json.dumps({"cluster": key[0], "devices": _encode_devices(key[1]), **_result_fields(result)})
        try:
            if self._handle is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                handle = self.path.open("r+b" if self._valid_bytes else "wb")
                self._handle = handle
                handle.truncate(self._valid_bytes)  # drops a line a kill cut short
                handle.seek(self._valid_bytes)
                if not self._valid_bytes:
                    handle.write(json.dumps(self.header).encode() + b"\n")
            self._handle.write(line.encode() + b"\n")
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as err:  # a file object's write names no file: the line was "[Errno 28] No space left ..."
            self._take_back()
            raise OSError(err.errno, err.strerror or str(err), os.fspath(self.path)) from err
        self._valid_bytes = self._handle.tell()
        self.results[key] = result

    def _take_back(self) -> None:
        """Close the file after a write that failed, cut back to the measurements saved before it."""
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self._handle.close()  # (closed even where the flush of its unwritten bytes fails)
            self._handle = None
        with contextlib.suppress(OSError):
            os.truncate(self.path, self._valid_bytes)

    def close(self) -> None:
        """Close the file (appending again reopens it)."""
        if self._handle is not None:
            self._handle.close()
            self._valid_bytes = self.path.stat().st_size
            self._handle = None
