"""What the real-device timers share: the step they run, devices, a cache of measurements and its journal, OOM."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from gnplace.cluster import Cluster
from gnplace.exceptions import ExecutionFailed, InvalidArgument, InvalidPlacement
from gnplace.execute.compiler import compile_step
from gnplace.execute.journal import Key, MeasurementJournal
from gnplace.execute.program import Program
from gnplace.graph import OpGraph
from gnplace.limits import finite_number, is_whole
from gnplace.placement import GraphKey, Placement, as_placement
from gnplace.sim.timer import StepResult, StepTimer, median_step
from gnplace.units import counted

__all__ = ["RealStepTimer", "real_timer", "torch_devices", "torch_device", "as_program", "oom_result", "MAX_REPEATS",
           "check_threads", "check_device_names"]


#: Most steps a real timer runs per measurement (``warmup``, ``repeats``; the shipped commands run 1 and 5).
MAX_REPEATS = 10_000


def check_threads(threads: Any, who: str = "threads") -> int:
    """``threads``, the CPU threads one device times with, checked: a whole number from 1 to the cores here.

    Raises:
        InvalidArgument: otherwise (4294967296 was torch's "Overflow when unpacking long" traceback, and more
            threads than cores time their contention, not the device).
    """
    from gnplace.workers import available_cores

    cores = available_cores()
    if not is_whole(threads) or not 1 <= threads <= cores:
        raise InvalidArgument(f"{who} must be a whole number from 1 to {cores} (the cores this process may run on), "
                              f"got {threads!r}")
    return int(threads)


def as_program(step: Any) -> Program:
    """``step`` as a :class:`Program`: a program already, or an imported step to compile."""
    if isinstance(step, Program):
        return step
    if hasattr(step, "trace") and hasattr(step, "node_of_op"):
        return compile_step(step)
    raise InvalidArgument(
        f"a real-device timer needs the recorded step (gnplace.importers.torch.import_step), got {type(step).__name__}"
    )


def check_device_names(names: Any) -> None:
    """Refuse torch device names given as one string: ``"cpu"`` was read as the three devices ``c``, ``p``, ``u``.

    Raises:
        InvalidArgument: if ``names`` is a string or not a sequence (``None`` passes: the default devices).
    """
    if names is None:
        return
    if isinstance(names, str | bytes) or not isinstance(names, Sequence | np.ndarray):  # (a set has no order)
        raise InvalidArgument(f"devices must be a list of torch device names, one per cluster device (e.g. "
                              f"['cuda:0', 'cpu']), got {names!r}")


def torch_devices(cluster: Cluster, names: Sequence[str] | None = None) -> list[torch.device]:
    """The torch device of every device of ``cluster``.

    Without ``names``: a CPU (:attr:`~gnplace.cluster.Device.is_cpu`: kind or name ``cpu...``, as the ``cpu-1t``
    ranks ``gnplace profile`` writes) is ``cpu``; the others are ``cuda:0``, ``cuda:1``, ... in cluster order.

    Raises:
        ExecutionFailed: if a device is not one torch can see here.
        InvalidArgument: if ``names`` is one string (:func:`check_device_names`) or not one per cluster device.

    Examples:
        >>> from gnplace.cluster import load_cluster
        >>> [str(d) for d in torch_devices(load_cluster("cpu_gpu"), ["cpu", "cpu"])]
        ['cpu', 'cpu']
    """
    check_device_names(names)
    if names is None:
        gpus = 0
        picked: list[str] = []
        for dev in cluster.devices:
            if dev.is_cpu:
                picked.append("cpu")
            else:
                picked.append(f"cuda:{gpus}")
                gpus += 1
        names = picked
    if len(names) != cluster.num_devices:
        raise InvalidArgument(
            f"{counted(len(names), 'torch device')} given for the {counted(cluster.num_devices, 'device')} of "
            f"{cluster.name!r}"
        )
    return [torch_device(name, f"cluster device {cluster_device.name!r} runs on {name}, but")
            for cluster_device, name in zip(cluster.devices, names)]


def torch_device(name: str, missing: str = "") -> torch.device:
    """The torch device ``name`` names: ``cpu`` (``cpu:0``) or a ``cuda`` device torch sees here.

    Args:
        name (str): the device's name (``"cpu"``, ``"cuda:1"``).
        missing (str, optional): the start of the message for a CUDA device torch does not see
            (default: ``"{name} was asked for, but"``).

    Raises:
        InvalidArgument: for a name torch does not know, or a device of another type (``mps`` was a traceback
            mid-run, ``meta`` a calibration of ops that do no work) or ``cpu:7`` (torch has one CPU device).
        ExecutionFailed: for a CUDA device this torch does not see (a CPU-only build, or too few GPUs).

    Examples:
        >>> torch_device("cpu")
        device(type='cpu')
    """
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError) as err:
        raise InvalidArgument(f"{name!r} is not a torch device ({' '.join(str(err).split())})") from None
    if device.type not in ("cpu", "cuda"):
        raise InvalidArgument(f"{name!r}: gnplace times cpu and cuda devices, not {device.type}")
    if device.type == "cpu" and (device.index or 0) > 0:
        raise InvalidArgument(f"{name!r}: torch has one cpu device (cpu or cpu:0)")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index or 0) >= count:
            raise ExecutionFailed(f"{missing or f'{name} was asked for, but'} torch sees {count} CUDA device(s) here")
    return device


def oom_result(graph: OpGraph, cluster: Cluster, placement: Any, device: int, needed: float) -> StepResult:
    """The result of a step that ran out of memory on ``device``: not timed, marked over capacity.

    Its step time is the simulator's estimate of the placement (finite, so that a learner's reward
    stays defined), and the device's peak is ``max(needed, 2 x capacity)``, so that the reward's
    overflow penalty applies and no search keeps it as its best.
    """
    from gnplace.sim.simulator import Simulator

    estimate = Simulator().time(graph, cluster, placement)
    peak = np.array(estimate.peak_memory, dtype=np.float64)
    capacity = cluster.memory
    peak[device] = max(float(needed) if np.isfinite(needed) else 0.0, 2.0 * float(capacity[device]))
    return StepResult(float(estimate.step_time), np.zeros(cluster.num_devices), peak, capacity, cluster.device_names)


class RealStepTimer(StepTimer):
    """A :class:`StepTimer` that runs the step on real devices; measurements are cached by placement.

    With a :class:`~gnplace.execute.journal.MeasurementJournal` attached (:meth:`attach`), each measurement
    :meth:`time` takes is also written to its file, and what the file holds is answered from it.

    A search keeps the placement measured fastest, and the fastest of many noisy measurements flatters
    itself: a lucky draw makes a placement the search's best and what it searches around. With ``confirm``
    (an attribute, 0 by default) set to ``k``, a placement that :meth:`time` measures faster than every
    placement that fits before it (on that cluster) is measured ``k`` more times, and the median of its
    ``k + 1`` measurements is what the cache, the journal and the caller get. The re-measurement of the
    incumbent that racing algorithms make (Hutter et al., *ParamILS*, JAIR 2009, and SMAC's intensification).

    Subclasses implement :meth:`_measure`.

    Args:
        step (ImportedStep or Program): the recorded training step of the graph to be timed.
        warmup (int): untimed steps before the timed ones.
        repeats (int): timed steps; the step time is their median.
        lr (float): learning rate of the update each step applies (to the executor's copy of the parameters),
            by the optimizer the graph's update nodes name (:attr:`Program.optimizer
            <gnplace.execute.program.Program.optimizer>`).
    """

    def __init__(self, step: Any, *, warmup: int = 1, repeats: int = 5, lr: float = 1e-3) -> None:
        # 2.5 was cut to 2 and True read as 1
        if not (is_whole(warmup) and is_whole(repeats)) or warmup < 0 or repeats < 1:
            raise InvalidArgument(f"need whole numbers warmup >= 0 and repeats >= 1, got {warmup!r} and {repeats!r}")
        if max(warmup, repeats) > MAX_REPEATS:  # 10**12 asked numpy for 189 TiB of step times (a traceback)
            raise InvalidArgument(f"need warmup and repeats <= {MAX_REPEATS:,} steps, got {warmup!r} and {repeats!r}")
        if not finite_number(lr) or lr < 0:  # "x" was a ValueError from float(), NaN turned the parameters NaN
            raise InvalidArgument(f"lr must be a finite number >= 0 (the learning rate of each timed step's update), "
                                  f"got {lr!r}")
        self.program = as_program(step)
        self.warmup = int(warmup)
        self.repeats = int(repeats)
        self.lr = float(lr)
        self.cache: dict[Key, StepResult] = {}  # by the cluster's fingerprint and the placement's devices
        self.measured = 0  # measurements taken (cache misses, their confirmations, measure())
        self.journal: MeasurementJournal | None = None
        self.confirm = 0  # more measurements of a placement measured faster than all before it (see above)

    def attach(self, journal: MeasurementJournal | None) -> None:
        """Keep every placement measured from now on in ``journal``, and answer from it what it holds already.

        ``None`` detaches the journal (what is measured next is neither kept nor answered from it; the cache
        keeps what it answered).
        """
        self.journal = journal
        if journal is not None:
            self.cache.update(journal.results)

    def settings(self) -> dict[str, Any]:
        """How this timer measures, as plain values: a search resumed under other settings would mix two kinds.

        The optimizer is named only when it is not SGD, so that a run saved before the executors ran any
        other still resumes (the graph's fingerprint, which holds its update ops, tells optimizers apart too).
        """
        measured: dict[str, Any] = {"warmup": self.warmup, "repeats": self.repeats, "lr": self.lr}
        if self.confirm:  # (named when on, so that a run saved before it existed still resumes without it)
            measured["confirm"] = self.confirm
        return measured if self.program.optimizer == "sgd" else {**measured, "optimizer": self.program.optimizer}

    def time(self, graph: OpGraph, cluster: Cluster, placement: Any, *, timeline: bool = False) -> StepResult:
        """Run ``placement`` ``warmup + repeats`` times and return the median step (cached by placement).

        A new fastest placement is measured ``confirm`` more times, and the median of its measurements kept.

        Raises:
            InvalidPlacement: if ``graph`` is not the graph of the recorded step, or the placement is malformed.
            ExecutionFailed: if the step cannot run (a device or a rank is missing or died).
        """
        placed = self._placed(graph, cluster, placement)
        key = (cluster.fingerprint(), placed.devices.astype(np.int64).tobytes())
        if key not in self.cache:
            result = self._measure(graph, cluster, placed)
            self.measured += 1
            if self.confirm and not result.is_oom and result.step_time < self._fastest(key[0]):
                draws = [result, *(self._measure(graph, cluster, placed) for _ in range(self.confirm))]
                self.measured += self.confirm
                result = median_step(draws)
            if self.journal is not None:  # on file before it is used: a resumed run answers it from there
                self.journal.append(key, result)
            self.cache[key] = result
        return self.cache[key]

    def _fastest(self, fingerprint: str) -> float:
        """The fastest step (seconds) cached for the cluster of ``fingerprint`` that fits; infinity if none."""
        return min((r.step_time for (fp, _), r in self.cache.items() if fp == fingerprint and not r.is_oom),
                   default=float("inf"))

    def measure(self, graph: OpGraph, cluster: Cluster, placement: Any) -> StepResult:
        """Run and time ``placement`` afresh, past the cache: one more sample of its step.

        The median of a few such samples, taken apart in time, is steadier than one. On this
        project's 2-vCPU VM one measurement of a placement (the median of 7 steps) varied by 9-16%
        (coefficient of variation) from one second to the next, in bursts that 21 steps per
        measurement did not average out (2026-11-28, fifteen interleaved measurements of each of four
        placements of ``examples:convnet`` on two ranks).

        Raises:
            InvalidPlacement: if ``graph`` is not the graph of the recorded step, or the placement is malformed.
            ExecutionFailed: if the step cannot run (a device or a rank is missing or died).
        """
        placed = self._placed(graph, cluster, placement)
        self.measured += 1
        return self._measure(graph, cluster, placed)

    def _placed(self, graph: OpGraph, cluster: Cluster, placement: Any) -> Placement:
        if graph.num_ops != self.program.num_nodes:
            raise InvalidPlacement(
                f"this timer runs the recorded step of {self.program.graph_name!r} ({self.program.num_nodes} nodes); "
                f"got graph {graph.name!r} with {graph.num_ops}"
            )
        if self.program.graph_digest and GraphKey.of(graph).digest != self.program.graph_digest:
            raise InvalidPlacement(
                f"this timer runs the recorded step of {self.program.graph_name!r}; graph {graph.name!r} has as many "
                "nodes but other op names or edges: time it with a timer of its own recorded step"
            )
        return as_placement(graph, cluster, placement)

    @abstractmethod
    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Any) -> StepResult:
        """Run and time one placement (no cache)."""


def real_timer(kind: str, step: Any, *, devices: Sequence[str] | None = None, threads: int = 1,
               repeats: int = 5) -> RealStepTimer:
    """The real-device timer called ``kind``: ``"dist"`` (one rank per device) or ``"local"`` (this process).

    Args:
        kind (str): ``"dist"``: a :class:`~gnplace.execute.dist.DistTimer` of ranks of ``threads`` threads;
            ``"local"``: a :class:`~gnplace.execute.local.LocalTimer` over ``devices``.
        step (ImportedStep or Program): the recorded step.
        devices (Sequence[str], optional): ``"local"``: the torch device of each cluster device.
        threads (int, optional): CPU threads of each rank, or of the ``cpu`` device (default: 1).
        repeats (int, optional): timed steps per measurement, the median reported (default: 5).

    Raises:
        InvalidArgument: for another ``kind``.
    """
    if kind == "dist":
        from gnplace.execute.dist import DistTimer

        return DistTimer(step, threads=threads, repeats=repeats)
    if kind == "local":
        from gnplace.execute.local import LocalTimer

        return LocalTimer(step, devices=devices, repeats=repeats, threads=threads)
    raise InvalidArgument(f"unknown real timer {kind!r} (choose dist or local)")
