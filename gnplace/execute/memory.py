"""Bytes resident on each device as a placed step runs: the count the executors report and check capacity by.

A :class:`Ledger` counts storages, not values: a view or an in-place result shares the storage of the
tensor it shows or writes, so its bytes stay on the device until the last value sharing them is
freed (a gradient returned as ``t(t(mm))`` keeps the ``mm``'s bytes). Both the local executor, as it
runs (:func:`~gnplace.execute.runner.run_step`), and the static count of a plan
(:meth:`~gnplace.execute.program.Program.peak_bytes`) keep one.

What it leaves out: the memory an op's kernel allocates and frees inside the op (its workspace), which no value
holds. On a CPU, oneDNN's convolutions copy their input, output and gradients into its blocked layout and back,
and batch norm's backward makes a temporary of its input's size; on a GPU, cuDNN picks workspaces of its own.
Measured with ``torch.profiler`` (``profile_memory=True``) on ``gnplace.execute.examples:convnet`` run on one CPU
(torch 2.13 with oneDNN, 1 or 2 threads): torch's allocator peaks at 6,063,976 bytes, 561,920 (10.2%) above the
count's 5,502,056, inside the second convolution's backward (``aten.convolution_backward``), which holds 2,078,592
bytes beyond its outputs while it runs (the first convolution's forward 1,048,576, each batch norm's backward
524,288 to 1,048,576). 640 bytes of the gap are the target ``y``: the count lets an input go after its last use,
but on a CPU device the step reads the program's own tensor (copied only to another device), which stays. The
count keeps the lifetime of the step's own copy on every device, so that CPU devices standing in for GPUs count as
GPUs do and as the simulator does; an input read early is undercounted by its bytes on a real CPU device alone.
The distributed executor's count (``Program.peak_bytes(..., ranks=True)``) holds the inputs a rank reads all step,
as the rank does: on both gloo ranks of six random 2-rank splits of ``examples:branchy`` on CPUs it is torch's
peak to the byte (``tests/execute/test_dist.py`` follows a rank's count and torch's allocator op by op).
Between ops the count is torch's to the byte but for those inputs (``tests/execute/test_memory.py``); a model of
linear layers alone (``examples:mlp``, ``branchy``, ``transformer``) shows no other gap. The simulator does not
count workspaces either. On a GPU, running out inside an op is a real ``torch.OutOfMemoryError``, reported as out
of memory; a CPU device's capacity is checked against the count (and the allocator's own failure) alone.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

__all__ = ["DeviceOutOfMemory", "Ledger"]


class DeviceOutOfMemory(Exception):
    """A step needs more bytes on a device than it holds (raised inside the executor, reported as OOM)."""

    def __init__(self, device: int, needed: float) -> None:
        super().__init__(f"device {device} out of memory ({needed:.0f} bytes needed)")
        self.device = device
        self.needed = needed


class Ledger:
    """Live and peak bytes of each device, counted by storage.

    Args:
        num_devices (int): devices counted.
        capacity (np.ndarray, optional): bytes each device may hold, ``[num_devices]``; going over
            raises :class:`DeviceOutOfMemory` (default: no limit).

    Examples:
        >>> ledger = Ledger(1)
        >>> ledger.make("x", 0, 100)
        >>> ledger.share("view of x", "x")
        >>> ledger.release("x")  # the view still holds the storage
        >>> float(ledger.live[0]), float(ledger.peak[0])
        (100.0, 100.0)
        >>> ledger.release("view of x")
        >>> float(ledger.live[0])
        0.0
    """

    def __init__(self, num_devices: int, capacity: np.ndarray | None = None) -> None:
        self.capacity = None if capacity is None else [float(c) for c in capacity]
        self._live = [0.0] * num_devices  # plain floats: the executor updates them on every op, in its timed loop
        self._peak = [0.0] * num_devices
        self._storage: dict[Hashable, list[int]] = {}  # value -> [values sharing it, device, bytes], one per storage

    @property
    def live(self) -> np.ndarray:
        """Bytes resident on each device now, ``[num_devices]``."""
        return np.array(self._live)

    @property
    def peak(self) -> np.ndarray:
        """The most bytes resident on each device so far, ``[num_devices]``."""
        return np.array(self._peak)

    def hold(self, device: int, size: int, *, check: bool = True) -> None:
        """Count ``size`` bytes on ``device`` until the step ends (parameters, inputs, buffers' copies).

        Raises:
            DeviceOutOfMemory: if ``check`` and the device goes over its capacity.
        """
        live = self._live[device] + size
        self._live[device] = live
        if live > self._peak[device]:
            self._peak[device] = live
        if check and self.capacity is not None and live > self.capacity[device]:
            raise DeviceOutOfMemory(device, live)

    def make(self, key: Hashable, device: int, size: int) -> None:
        """Count a new storage of ``size`` bytes on ``device``, held by the value ``key``.

        Raises:
            DeviceOutOfMemory: if the device goes over its capacity.
        """
        self._storage[key] = [1, device, size]
        self.hold(device, size)

    def share(self, key: Hashable, source: Hashable) -> None:
        """The value ``key`` shares the storage of ``source`` (a view, an in-place result): no new bytes.

        A ``source`` not counted by storage (a parameter, a buffer, a constant) leaves nothing to share.
        """
        storage = self._storage.get(source)
        if storage is not None:
            storage[0] += 1
            self._storage[key] = storage

    def release(self, key: Hashable) -> None:
        """Drop the value ``key``; its storage's bytes leave the device with the last value sharing it."""
        storage = self._storage.pop(key, None)
        if storage is None:
            return
        storage[0] -= 1
        if storage[0] == 0:
            self._live[storage[1]] -= storage[2]

    def check(self) -> None:
        """Raise :class:`DeviceOutOfMemory` for the first device over its capacity, if any."""
        if self.capacity is not None:
            for device, (live, capacity) in enumerate(zip(self._live, self.capacity)):
                if live > capacity:
                    raise DeviceOutOfMemory(device, live)
