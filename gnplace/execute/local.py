"""``LocalTimer``: time placed training steps in this process, over the devices torch sees (``cuda:0..n``, ``cpu``).

Each cluster device is a torch device (:func:`~gnplace.execute.base.torch_devices`: CPUs are ``cpu``,
GPUs ``cuda:0``, ``cuda:1``, ... in order, or given). One thread walks the ops in recorded order and
launches each on its device; CUDA queues its kernels, so GPUs and the CPU overlap as they would in
an eager training step. A step is timed from its first op to its last with every device
synchronised; the result is the median of ``repeats`` steps after ``warmup`` untimed ones.

Each step ends with the update of the graph's optimizer on each parameter's device (SGD, momentum, Adam
or AdamW, as its update nodes name it: :mod:`gnplace.execute.optim`); the optimizer's state lives
there across the steps of a measurement, made afresh (zeroed) for each placement measured.

Memory: the bytes resident on each device (parameters and their optimizer state, inputs, buffers'
copies, live tensors by storage, copies received, gradients and their copies on the parameters'
devices) are counted as the step runs (no op's workspace, which its kernel allocates and frees inside it:
561,920 bytes more at torch's peak on ``examples:convnet``, :mod:`gnplace.execute.memory` says where);
a device that would hold more than its capacity in the cluster, or a real ``torch.OutOfMemoryError``,
ends the step, which is reported as out of memory (:func:`~gnplace.execute.base.oom_result`), never
raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from gnplace.cluster import Cluster
from gnplace.exceptions import ExecutionFailed, first_line
from gnplace.execute.base import RealStepTimer, check_device_names, check_threads, oom_result, torch_devices
from gnplace.execute.runner import DeviceOutOfMemory, optimizer_state, place_params, run_step
from gnplace.graph import OpGraph
from gnplace.seed import torch_rng_kept
from gnplace.sim.timer import StepResult

__all__ = ["LocalTimer"]


class LocalTimer(RealStepTimer):
    """Times a placed training step on the devices of this process (a :class:`~gnplace.sim.timer.StepTimer`).

    Args:
        step (ImportedStep or Program): the recorded step (:func:`~gnplace.importers.torch.import_step`).
        devices (Sequence[str], optional): torch device of each cluster device (default: CPUs ``cpu``,
            GPUs ``cuda:0..``).
        warmup (int, optional): untimed steps first (default: 1).
        repeats (int, optional): timed steps, the median is reported (default: 5).
        lr (float, optional): learning rate of each step's update, by the graph's optimizer (default: 1e-3).
        threads (int, optional): torch CPU threads while timing (default: unchanged).

    Attributes:
        last_moves (int): tensors that crossed devices in the last measured step.
        last_moved_bytes (float): their bytes.

    Examples:
        >>> import torch
        >>> from gnplace.importers.torch import import_step
        >>> from gnplace.cluster import load_cluster
        >>> step = import_step(torch.nn.Linear(8, 4), (torch.randn(16, 8),), loss=lambda y: y.square().mean())
        >>> timer = LocalTimer(step, devices=["cpu", "cpu"], repeats=3)
        >>> result = timer.time(step.graph, load_cluster("k80x2"), [0] * step.graph.num_ops)
        >>> result.step_time > 0, result.is_oom
        (True, False)
    """

    def __init__(
        self, step: Any, devices: Sequence[str] | None = None, *, warmup: int = 1, repeats: int = 5, lr: float = 1e-3,
        threads: int | None = None,
    ) -> None:
        super().__init__(step, warmup=warmup, repeats=repeats, lr=lr)
        check_device_names(devices)  # ("cpu,cpu" was read as seven devices, one a letter)
        self.devices = None if devices is None else list(devices)
        self.threads = None if threads is None else check_threads(threads)
        self.last_moves = 0
        self.last_moved_bytes = 0.0

    def settings(self) -> dict[str, Any]:
        """How this timer measures (see :meth:`RealStepTimer.settings`), with its torch devices and threads."""
        return {**super().settings(), "devices": self.devices, "threads": self.threads}

    def __repr__(self) -> str:
        return f"LocalTimer({self.program.graph_name!r}, devices={self.devices}, repeats={self.repeats})"

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Any) -> StepResult:
        devices = torch_devices(cluster, self.devices)
        plan = self.program.plan(placement)
        capacity = cluster.memory
        threads = torch.get_num_threads()
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        # the model's random ops (dropout) draw from generators of their own here: how many steps were timed does
        # not move the caller's random stream
        with torch_rng_kept(devices):
            try:
                params = place_params(self.program.params, plan, devices, copy=True)  # a real OOM here is an OOM too
                state = optimizer_state(self.program, params, plan)  # kept across the steps, as an optimizer keeps it
                seconds, busy = [], []
                peak = np.zeros(cluster.num_devices)
                for r in range(self.warmup + self.repeats):
                    out = run_step(self.program, plan, devices, params=params, lr=self.lr, capacity=capacity,
                                   keep_outputs=False, state=state)
                    peak = np.maximum(peak, out.peak_bytes)
                    if r >= self.warmup:
                        seconds.append(out.seconds)
                        busy.append(out.busy)
                self.last_moves, self.last_moved_bytes = out.moves, out.moved_bytes
            except DeviceOutOfMemory as err:
                for dev in {d for d in devices if d.type == "cuda"}:
                    with torch.cuda.device(dev):
                        torch.cuda.empty_cache()
                return oom_result(graph, cluster, placement, err.device, err.needed)
            except ExecutionFailed:
                raise
            except Exception as err:  # noqa: BLE001 - a failing op becomes one clear line
                first = first_line(err)
                raise ExecutionFailed(f"the placed step of {graph.name!r} failed: {first}") from err
            finally:
                torch.set_num_threads(threads)
        return StepResult(
            float(np.median(seconds)), np.median(np.stack(busy), axis=0), peak, capacity, cluster.device_names,
        )
