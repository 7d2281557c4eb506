"""Calibration: measure a step's ops and the links on real devices, so that the simulator predicts them.

:func:`calibrate` times every op of a recorded step on each kind of device (all ops on one device,
each op charged from the end of the previous one, so the executor's own per-op overhead is in it;
median of ``repeats`` steps), the update of every parameter by the graph's optimizer (SGD, momentum,
Adam or AdamW, as its update nodes name it: :mod:`gnplace.execute.optim`), and the links (half the round trip
of a ping-pong at several sizes, fitted to ``latency + bytes / bandwidth`` by least squares). The
ops' seconds of each kind are then scaled so that the simulated one-device step equals the step the
timer measures with every op on that device: the per-op times give each op's share, the timer's
executor the total (on a CUDA device each op is timed to its completion, which adds a
synchronisation per op and removes the overlap of launches with kernels, so the shares alone put a
one-GPU step up to 50% above the measured one). It
returns the graph with the measured seconds in ``cost_s`` (per device kind, summed per node) and a
cluster whose devices and links are the measured ones; :meth:`Calibration.save` writes both
(``graph.gnpg`` and ``cluster.yaml``) for ``gnplace simulate``, ``place`` and ``finetune``.

Another model placed on the calibrated cluster has no measured seconds: the simulator then models
its ops (Paleo) from each device's measured matmul FLOP/s and copy bandwidth plus a per-op overhead,
``launch_overhead``, which :func:`fitted_launch_overhead` sets so that the model gives the profiled
step's one-device total (0 where the rates alone already give more). Without it a one-GPU step of
a small model, launch-bound, was modelled 18-86 times too fast (H200, 2026-11-27).

Device kinds of a calibrated cluster are named after what was measured (``cpu-1t``: one CPU
thread; a GPU's name), so that measured costs never leak onto a preset's devices.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnplace.cluster import Cluster, cluster_from_dict
from gnplace.exceptions import InvalidArgument
from gnplace.execute.base import RealStepTimer, as_program, check_threads, torch_device
from gnplace.execute.optim import OptimizerState
from gnplace.execute.program import Program
from gnplace.graph import OpGraph
from gnplace.limits import is_whole
from gnplace.seed import torch_rng_kept

if TYPE_CHECKING:  # the distributed executor loads on first use
    from gnplace.execute.dist import DistTimer

__all__ = [
    "Calibration", "calibrate", "measure_op_seconds", "node_seconds", "fit_link", "probe_link", "LINK_SIZES",
    "fidelity_placements", "simulator_error", "fitted_launch_overhead", "MAX_FIDELITY_PLACEMENTS",
]

#: Message sizes of the link ping-pong, bytes.
LINK_SIZES = [4, 4096, 65536, 1 << 20, 4 << 20]


@dataclass
class Calibration:
    """What :func:`calibrate` measured.

    Attributes:
        graph (OpGraph): the step's graph with measured ``cost_s`` of every node per device kind.
        cluster (Cluster): the measured devices and links.
        node_seconds (dict[str, np.ndarray]): seconds of every node per device kind.
        links (dict[str, dict[str, float]]): fitted ``bandwidth`` (bytes/s) and ``latency`` (s) per pair.
        scale (dict[str, float]): per device kind, the one-device step the timer measured over the sum
            of the per-op seconds (the factor applied to them; 1 where the step ran out of memory).
        message_cpu (float): seconds of compute each message costs its sender and its receiver while
            the other end computes (:attr:`~gnplace.cluster.Device.message_cpu` of every rank of a
            gloo cluster, from :meth:`~gnplace.execute.dist.DistTimer.message_costs`; 0 otherwise).
    """

    graph: OpGraph
    cluster: Cluster
    node_seconds: dict[str, np.ndarray]
    links: dict[str, dict[str, float]] = field(default_factory=dict)
    cluster_spec: dict[str, Any] = field(default_factory=dict)
    scale: dict[str, float] = field(default_factory=dict)
    message_cpu: float = 0.0

    def save(self, out: str | os.PathLike[str]) -> tuple[Path, Path]:
        """Write ``OUT/graph.gnpg`` and ``OUT/cluster.yaml`` together; returns their paths.

        Both are written to temporary files before either is renamed into place
        (:func:`~gnplace.graph_io.write_together`): a run stopped while writing leaves the pair an earlier
        run wrote, not a new graph beside an old cluster (each file's costs were measured for the other). Only a
        stop in the microseconds between the two renames can still leave the new graph beside the old cluster.
        """
        import yaml

        from gnplace.graph_io import graph_file_bytes, write_together

        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        graph_path, cluster_path = folder / "graph.gnpg", folder / "cluster.yaml"
        graph_path, cluster_path = write_together([
            (graph_path, graph_file_bytes(self.graph, graph_path)),
            (cluster_path, yaml.safe_dump(self.cluster_spec, sort_keys=False).encode("utf-8")),
        ])
        return Path(graph_path), Path(cluster_path)


def measure_op_seconds(program: Program, device: torch.device, *, repeats: int = 5, threads: int = 1) -> np.ndarray:
    """Median seconds of every op of ``program`` with all of them on ``device``, ``[num_ops]``.

    Each op is charged from the end of the previous one (the executor's loop included); one
    untimed step warms up first.
    """
    from gnplace.execute.rank import run_rank

    plan = program.plan(np.zeros(program.num_nodes, dtype=np.int64))
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        params = {k: v.to(device, copy=True) for k, v in program.params.items()}
        runs = np.zeros((repeats, len(program.ops)))
        with torch_rng_kept([device]):  # the model's random ops (dropout) leave the caller's generators alone
            for r in range(repeats + 1):
                row = np.zeros(len(program.ops))
                run_rank(program, plan, 0, device, params, lr=0.0, op_seconds=row)
                if r:
                    runs[r - 1] = row
    finally:
        torch.set_num_threads(saved)
    return np.median(runs, axis=0)


def _update_seconds(program: Program, device: torch.device, repeats: int, threads: int) -> dict[str, float]:
    """Median seconds of the update of each parameter on ``device`` by the program's optimizer.

    SGD's is one ``sub_``; another optimizer's is its whole update (:meth:`OptimizerState.update
    <gnplace.execute.optim.OptimizerState.update>`), its state on ``device`` as the executors keep it.
    """
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        found = {}
        for name, p in program.params.items():
            param, grad = p.to(device, copy=True), torch.ones_like(p, device=device)
            state = None if program.optimizer == "sgd" else OptimizerState(program.optimizer, {name: param})
            times = []
            for _ in range(repeats + 1):
                start = time.perf_counter()
                if state is None:
                    param.sub_(grad, alpha=1e-3)
                else:
                    state.update(name, param, grad, 1e-3)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                times.append(time.perf_counter() - start)
            found[name] = float(np.median(times[1:]))
        return found
    finally:
        torch.set_num_threads(saved)


def node_seconds(program: Program, op_seconds: np.ndarray, update_seconds: dict[str, float]) -> np.ndarray:
    """Seconds of every node of the program's graph: its ops' seconds summed, ``[num_nodes]``.

    An op with no node (a view of a buffer) is charged to the next op that has one; an update node
    gets its parameter's update seconds.
    """
    seconds = np.zeros(program.num_nodes)
    carry = 0.0
    for i, op in enumerate(program.ops):
        if op.node < 0:
            carry += float(op_seconds[i])
            continue
        seconds[op.node] += float(op_seconds[i]) + carry
        carry = 0.0
    for name, node in program.param_node.items():
        seconds[node] += update_seconds.get(name, 0.0)
    return seconds


def fit_link(sizes: list[int], seconds: list[float]) -> tuple[float, float]:
    """``(bandwidth bytes/s, latency s)`` of ``seconds = latency + bytes / bandwidth``, least squares.

    Examples:
        >>> bw, lat = fit_link([0, 1000, 2000], [1e-5, 2e-5, 3e-5])
        >>> round(bw), round(lat * 1e6, 3)
        (100000000, 10.0)
    """
    slope, intercept = np.polyfit(np.asarray(sizes, dtype=np.float64), np.asarray(seconds, dtype=np.float64), 1)
    bandwidth = 1.0 / slope if slope > 0 else 1e12
    return float(bandwidth), float(max(intercept, 0.0))


class _Towers(torch.nn.Module):
    """Two chains of linear layers over one input, summed: the link probe's model."""

    def __init__(self, width: int, layers: int) -> None:
        super().__init__()
        self.a = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
        self.b = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.a(x) + self.b(x)).square().mean()


def probe_link(timer: DistTimer, peer: int, ranks: int, *, widths: tuple[int, ...] = (8, 128, 512, 1024),
               layers: int = 12, batch: int = 64) -> tuple[list[int], list[float]]:
    """Seconds per transfer between rank 0 and ``peer`` as the executor pays them under load, at several sizes.

    A probe: two chains of ``layers`` linear layers of width ``w`` (each edge ``batch x w`` float32),
    whose training step runs once with one chain on each rank (both busy, nothing crosses) and once
    with every layer crossing: layer ``k`` of the first chain on one rank and of the second on the
    other, swapping at every layer, so both ranks compute all the time and at every layer boundary
    each sends one tensor to the other. The extra seconds over the layer boundaries crossed is what one
    transfer of that size costs the step, with everything the executor adds to the wire while both
    ranks compute (the copy, the bookkeeping, a communication thread waiting for a core): on a
    host with as many cores as ranks that is several times the idle ping-pong time.

    Args:
        timer (DistTimer): the ranks to probe; each step is timed as its ``warmup`` and ``repeats`` say
            (the median of the slowest rank's seconds).
        peer (int): the rank that exchanges with rank 0.
        ranks (int): ranks of the cluster the probe runs on.
        widths (tuple[int, ...], optional): layer widths ``w`` of the probes, one transfer size each
            (default: ``(8, 128, 512, 1024)``).
        layers (int, optional): linear layers of each chain (default: 12).
        batch (int, optional): rows of each layer's input (default: 64).

    Returns:
        tuple: the bytes of each probe's transfers (``batch * w * 4``) and the seconds per transfer.
    """
    from gnplace.execute.device_map import module_paths
    from gnplace.importers.torch import import_step

    sizes, seconds = [], []
    generator = torch.Generator().manual_seed(0)
    cluster = cluster_from_dict({"name": "probe", "devices": [{"name": f"r{r}", "kind": "cpu"} for r in range(ranks)],
                                 "links": {"default": "pcie3"}})
    for width in widths:
        model = _Towers(width, layers)
        x = torch.randn(batch, width, generator=generator)
        step = import_step(model, (x,))
        program = as_program(step)
        graph = step.graph

        def rank_of(path: str, crossing: bool) -> int:
            parts = path.split(".")
            if len(parts) < 2 or parts[0] not in ("a", "b") or not parts[1].isdigit():
                return 0
            side = 0 if parts[0] == "a" else 1
            if crossing:
                side = (side + int(parts[1])) % 2
            return peer if side else 0

        paths = module_paths(graph)
        together = np.array([rank_of(p, False) for p in paths], dtype=np.int64)
        apart = np.array([rank_of(p, True) for p in paths], dtype=np.int64)
        with timer.using(program):
            one, two = (float(np.median(np.max([r[0] for r in timer.run(cluster, p)], axis=0)))
                        for p in (together, apart))
        crossings = max(program.plan(apart).num_moves - program.plan(together).num_moves, 2) / 2
        sizes.append(batch * width * 4)
        seconds.append(max(two - one, 0.0) / crossings)
    return sizes, seconds


def _device_kind(device: torch.device, threads: int) -> str:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return f"cpu-{threads}t"


def _device_rates(device: torch.device, threads: int) -> tuple[float, float, float]:
    """Measured ``(FLOP/s of a matmul, bytes/s of a copy, memory bytes)`` of ``device``."""
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        n = 512
        # drawn on the CPU from a generator of its own: the caller's global streams (the CPU's, a GPU's) are not
        # drawn from; the values do not matter, only the time of the matmul
        a = torch.empty(n, n, device=device).copy_(torch.randn(n, n, generator=torch.Generator().manual_seed(0)))
        b = torch.empty(8 << 20, device=device)

        def best(fn: Any) -> float:
            times = []
            for _ in range(4):
                start = time.perf_counter()
                fn()
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                times.append(time.perf_counter() - start)
            return min(times[1:])

        flops = 2 * n**3 / best(lambda: a @ a)
        bandwidth = 2 * b.numel() * b.element_size() / best(lambda: b.clone())
    finally:
        torch.set_num_threads(saved)
    if device.type == "cuda":
        memory = float(torch.cuda.get_device_properties(device).total_memory)
    else:
        try:
            memory = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):
            memory = 8.0 * 2**30
    return float(flops), float(bandwidth), memory


def _memory_of(device: torch.device) -> tuple[str, int]:
    """Which memory ``device`` allocates from: ``("cpu", 0)`` for the host's, ``("cuda", i)`` for GPU ``i``'s."""
    if device.type == "cpu":
        return ("cpu", 0)
    if device.type == "cuda" and device.index is None:
        return ("cuda", torch.cuda.current_device())
    return (device.type, device.index or 0)


def _devices_sharing_memory(device: torch.device, devices: Sequence[torch.device]) -> int:
    """How many of ``devices`` allocate from the memory ``device`` does (itself included; at least 1).

    CPU devices all share the host's memory; CUDA devices share a GPU's where they name the same one
    (``cuda`` is the current GPU), so that each cluster device gets its share of the bytes, not all of them.
    """
    mine = _memory_of(device)
    return max(1, sum(_memory_of(d) == mine for d in devices))


def parse_torch_devices(names: Sequence[str]) -> list[torch.device]:
    """``names`` as torch devices (:func:`~gnplace.execute.base.torch_device`).

    Raises:
        InvalidArgument: naming the first one torch does not know (``"bogus"``, ``"cuda:x"``, ...), or of a type
            gnplace does not time (``mps``, ``meta``).
        ExecutionFailed: for a CUDA device this torch does not see (a CPU-only build, or too few GPUs).
    """
    return [torch_device(name) for name in names]


def calibrate(
    step: Any,
    *,
    timer: Any = None,
    devices: list[str] | None = None,
    ranks: int = 2,
    threads: int = 1,
    repeats: int = 5,
    name: str = "calibrated",
    probe_widths: tuple[int, ...] = (8, 32, 64),
    anchor_rounds: int = 5,
    probe_rounds: int = 5,
) -> Calibration:
    """Measure ``step``'s ops and the links of the real cluster that ``timer`` runs on.

    Args:
        step (ImportedStep or Program): the recorded step (with its graph: an ImportedStep).
        timer (DistTimer or LocalTimer, optional): the executor whose cluster is measured: a
            :class:`~gnplace.execute.dist.DistTimer` (``ranks`` ranks of ``threads`` threads) or a
            :class:`~gnplace.execute.local.LocalTimer` over ``devices`` (default: a DistTimer).
        devices (list[str], optional): torch devices of a local cluster (default: ``["cpu"]`` and
            ``cuda:0`` when there is one).
        ranks (int, optional): ranks of a distributed cluster (default: 2).
        threads (int, optional): CPU threads per device (default: 1).
        repeats (int, optional): timed steps per measurement (default: 5).
        name (str, optional): the cluster's name (default: ``"calibrated"``).
        probe_widths (tuple[int, ...], optional): layer widths of the link probe (:func:`probe_link`).
        anchor_rounds (int, optional): measurements of each kind's one-device step, whose median the
            kind's op seconds are scaled to (default: 5; see :meth:`RealStepTimer.measure
            <gnplace.execute.base.RealStepTimer.measure>` for why one is not enough).
        probe_rounds (int, optional): rounds of the loaded-link probe (:func:`probe_link`) and of the
            message probe (:meth:`DistTimer.message_costs <gnplace.execute.dist.DistTimer.message_costs>`),
            in turn, whose medians give each link's latency and ``message_cpu`` (default: 5; from one
            round to the next on a 2-vCPU VM the latency varied by 16% and ``message_cpu`` by 8%).

    Returns:
        Calibration: the measured graph and cluster. Devices that share a memory (the CPU devices the
        host's, several devices on one GPU that GPU's) each get an equal share of its bytes.
    """
    from gnplace.execute.dist import DistTimer
    from gnplace.execute.local import LocalTimer

    if anchor_rounds < 1 or probe_rounds < 1:
        raise InvalidArgument(
            f"anchor_rounds and probe_rounds must be at least 1, got {anchor_rounds} and {probe_rounds}"
        )
    threads = check_threads(threads)  # each device's ops are timed with this many torch threads
    message_cpu = 0.0
    graph = getattr(step, "graph", None)
    if graph is None:
        raise InvalidArgument("calibrate needs the imported step (import_step), which carries the graph")
    program = as_program(step)
    if timer is None:
        timer = DistTimer(program, threads=threads)
    if isinstance(timer, DistTimer):
        threads = timer.threads
        kinds = [_device_kind(torch.device("cpu") if timer.backend == "gloo" else torch.device("cuda", r), threads)
                 for r in range(ranks)]
        torch_devs = [torch.device("cpu") if timer.backend == "gloo" else torch.device("cuda", r) for r in range(ranks)]
        names = [f"rank{r}" for r in range(ranks)]
        links = {}
        wire = timer.link_times(ranks, LINK_SIZES)  # idle ping-pong: the wire's bandwidth
        loaded: dict[int, list[float]] = {peer: [] for peer in range(1, ranks)}
        per_message: list[float] = []
        for _ in range(probe_rounds):  # the loaded link and the message cost in turn, medians kept
            for peer in range(1, ranks):
                loaded[peer] += probe_link(timer, peer, ranks, widths=probe_widths)[1]
            if timer.backend == "gloo" and ranks > 1:  # communication threads sharing the cores: see exchange_cost
                per_message += list(timer.message_costs(ranks).values())
        for peer in range(1, ranks):
            bandwidth, _ = fit_link(LINK_SIZES[1:], wire[peer][1:])
            links[f"rank0-rank{peer}"] = {"bandwidth": bandwidth, "latency": float(np.median(loaded[peer]))}
        if per_message:
            message_cpu = float(np.median(per_message))
    elif isinstance(timer, LocalTimer):
        wanted = devices or timer.devices or (["cpu", "cuda:0"] if torch.cuda.is_available() else ["cpu"])
        torch_devs = parse_torch_devices(wanted)
        kinds = [_device_kind(d, threads) for d in torch_devs]
        names = [f"{d.type}{k}" for k, d in enumerate(torch_devs)]
        links = {}
        for a in range(len(torch_devs)):
            for b in range(len(torch_devs)):
                if a < b and torch_devs[a] != torch_devs[b]:
                    secs = [_copy_seconds(n, torch_devs[a], torch_devs[b]) for n in LINK_SIZES]
                    bw, lat = fit_link(LINK_SIZES, secs)
                    links[f"{names[a]}-{names[b]}"] = {"bandwidth": bw, "latency": lat}
    else:
        raise InvalidArgument(f"calibrate measures a DistTimer or a LocalTimer, got {type(timer).__name__}")
    seconds: dict[str, np.ndarray] = {}
    rates: dict[str, tuple[float, float, float]] = {}
    spec_devices = []
    for dev_name, kind, dev in zip(names, kinds, torch_devs):
        if kind not in seconds:  # once per kind: a kind is one device model (its devices' op times agree)
            ops = measure_op_seconds(program, dev, repeats=repeats, threads=threads)
            updates = _update_seconds(program, dev, repeats, threads)
            seconds[kind] = node_seconds(program, ops, updates)
            rates[kind] = _device_rates(dev, threads)
        flops, bandwidth, memory = rates[kind]
        memory = memory / _devices_sharing_memory(dev, torch_devs)
        spec_devices.append({"name": dev_name, "kind": kind, "peak_flops": flops, "mem_bandwidth": bandwidth,
                             "memory": memory, "flops_efficiency": 1.0, "mem_efficiency": 1.0, "launch_overhead": 0.0,
                             **({"message_cpu": message_cpu} if message_cpu else {})})
    default = {"bandwidth": 1e12, "latency": 0.0}
    if links:
        default = {"bandwidth": float(np.mean([v["bandwidth"] for v in links.values()])),
                   "latency": float(np.mean([v["latency"] for v in links.values()]))}
    pairs = [{"between": key.split("-", 1), "link": value} for key, value in links.items()]
    spec = {"name": name, "description": f"measured by gnplace profile on {graph.name}",
            "devices": spec_devices, "links": {"default": default, "pairs": pairs}}
    cluster = cluster_from_dict(spec, source=name)
    scale = _anchor_to_one_device_steps(graph.replace(cost_s={**graph.cost_s, **seconds}), cluster, timer, kinds,
                                        rounds=anchor_rounds)
    seconds = {kind: values * scale[kind] for kind, values in seconds.items()}
    for k, (device, kind) in enumerate(zip(spec_devices, kinds)):
        device["launch_overhead"] = fitted_launch_overhead(graph, cluster, k, seconds[kind])
    cluster = cluster_from_dict(spec, source=name)
    measured = graph.replace(cost_s={**graph.cost_s, **seconds})
    return Calibration(measured, cluster, seconds, links, spec, scale, message_cpu)


def fitted_launch_overhead(graph: OpGraph, cluster: Cluster, device: int, seconds: np.ndarray) -> float:
    """Seconds per op that the cost model adds on ``device`` so that its ops sum to ``seconds``'s total.

    Args:
        graph (OpGraph): the profiled step's graph.
        cluster (Cluster): the calibrated cluster (its measured FLOP/s and bandwidth per device).
        device (int): the device's index.
        seconds (np.ndarray): the measured seconds of every node on that device, ``[num_ops]``.

    Returns:
        float: ``(sum(seconds) - sum(modelled)) / num_ops`` seconds, at least 0, where ``modelled`` is
        the cost model's time of each op from the device's rates alone (no overhead).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> from gnplace.sim.costmodel import op_times
        >>> graph, cluster = chain_graph(4), load_cluster("k80x2")
        >>> modelled = op_times(graph, cluster, launch_overhead=False)[:, 0]
        >>> round(fitted_launch_overhead(graph, cluster, 0, modelled + 50e-6) * 1e6, 6)
        50.0
    """
    from gnplace.sim.costmodel import op_times

    if graph.num_ops == 0:
        return 0.0
    modelled = op_times(graph.replace(cost_s={}), cluster, launch_overhead=False)[:, device]
    return max(0.0, float((np.sum(seconds) - np.sum(modelled)) / graph.num_ops))


def _anchor_to_one_device_steps(graph: OpGraph, cluster: Cluster, timer: Any, kinds: list[str],
                                rounds: int = 1) -> dict[str, float]:
    """Per device kind, the timer's one-device step (seconds) over the simulator's from the per-op seconds.

    The first device of each kind runs the whole step under ``timer``, ``rounds`` times (the kinds in
    turn, each measurement afresh), and the median measured step is the kind's; a step that runs
    out of memory there leaves that kind's factor at 1.
    """
    from gnplace.sim.simulator import Simulator

    sim = Simulator()
    singles = {kind: np.full(graph.num_ops, kinds.index(kind), dtype=np.int64) for kind in dict.fromkeys(kinds)}
    measured = _measure_in_turn(timer, graph, cluster, singles, rounds)
    scale: dict[str, float] = {}
    for kind, single in singles.items():
        predicted = sim.time(graph, cluster, single).step_time
        real, _, oom = measured[kind]
        scale[kind] = real / predicted if not oom and predicted > 0 else 1.0
    return scale


def _results_in_turn(timer: Any, graph: OpGraph, cluster: Cluster, placements: dict[str, np.ndarray],
                     rounds: int) -> dict[str, list[Any]]:
    """Every placement's step results (``StepResult``s of ``timer.measure``), ``rounds`` of them, taken in turn."""
    samples: dict[str, list[Any]] = {name: [] for name in placements}
    for _ in range(rounds):
        for name, devices in placements.items():
            samples[name].append(timer.measure(graph, cluster, devices))
    return samples


def _measure_in_turn(timer: Any, graph: OpGraph, cluster: Cluster, placements: dict[str, np.ndarray],
                     rounds: int) -> dict[str, tuple[float, list[float], bool]]:
    """Measure every placement afresh ``rounds`` times, the placements in turn (one each per round).

    Returns:
        dict: per placement, its median step (seconds), every measured step (seconds) and whether
        any measurement ran out of memory.
    """
    found = {}
    for name, results in _results_in_turn(timer, graph, cluster, placements, rounds).items():
        seconds = [r.step_time for r in results]
        found[name] = (float(np.median(seconds)), seconds, any(r.is_oom for r in results))
    return found


def _copy_seconds(num_bytes: int, src: torch.device, dst: torch.device, repeats: int = 10) -> float:
    """Median seconds to copy ``num_bytes`` from ``src`` to ``dst`` (devices synchronised)."""
    x = torch.zeros(max(1, num_bytes // 4), device=src)
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        x.to(dst)
        for d in (src, dst):
            if d.type == "cuda":
                torch.cuda.synchronize(d)
        times.append(time.perf_counter() - start)
    return float(np.median(times[1:]))


#: Most placements :func:`fidelity_placements` gives (``gnplace profile --placements``): each is measured ``rounds``
#: times on the devices.
MAX_FIDELITY_PLACEMENTS = 10_000
#: Random draws per placement asked for before :func:`fidelity_placements` stops looking for new ones.
RANDOM_DRAWS = 100


def fidelity_placements(graph: OpGraph, cluster: Cluster, count: int, *, seed: int = 0) -> dict[str, np.ndarray]:
    """``count`` placements that split the step, to check the simulator on: the fast placers', then random ones.

    One-device placements are left out, the fast placers' too when they put everything on one
    device: :func:`calibrate` scales each kind's ops to the one-device step it measured, so there
    the simulator agrees with the measurement by construction. Random placements put each
    colocation group on a uniform device, as every placer places groups, each placement once; fewer
    than ``count`` come back when the graph cannot be split (one group, or one device) or has fewer
    ways to split it (3 groups on 2 devices: 6), at most :data:`MAX_FIDELITY_PLACEMENTS`.

    Raises:
        InvalidArgument: if ``count`` is not a whole number from 0 to :data:`MAX_FIDELITY_PLACEMENTS`.
    """
    from gnplace.placers import get_placer

    if not is_whole(count) or not 0 <= count <= MAX_FIDELITY_PLACEMENTS:
        # (10**12 drew random placements until memory ran out: each is measured, so none of them ever would be)
        raise InvalidArgument(f"need a number of placements from 0 to {MAX_FIDELITY_PLACEMENTS:,}, got {count!r}")
    singles = [np.full(graph.num_ops, d, dtype=np.int64) for d in range(cluster.num_devices)]
    found: dict[str, np.ndarray] = {}
    for name in ("round_robin", "metis", "heft", "m_etf", "m_sct", "expert"):
        devices = np.asarray(get_placer(name).place(graph, cluster, seed=seed).devices, dtype=np.int64)
        if not any(np.array_equal(devices, v) for v in [*singles, *found.values()]):
            found[name] = devices
    if cluster.num_devices > 1 and graph.num_groups > 1:
        rng = np.random.default_rng(seed)
        seen = {v.tobytes() for v in [*singles, *found.values()]}
        k = draws = 0
        while len(found) < count and draws < RANDOM_DRAWS * count:  # (a graph of few ways to split it has no more)
            devices = rng.integers(0, cluster.num_devices, graph.num_groups)[graph.group]
            draws += 1
            if devices.tobytes() not in seen:  # a repeat was measured again and counted twice in the error
                seen.add(devices.tobytes())
                found[f"random{k}"] = devices
                k += 1
    return dict(list(found.items())[:count])


def simulator_error(calibration: Calibration, timer: RealStepTimer, placements: dict[str, np.ndarray], *,
                    rounds: int = 1) -> list[dict[str, Any]]:
    """Measured (by ``timer``) and simulated step seconds of each placement on the calibrated cluster.

    Args:
        calibration (Calibration): the calibrated graph and cluster the simulator runs on.
        timer (RealStepTimer): the real-device timer.
        placements (dict[str, np.ndarray]): the placements to check, by name.
        rounds (int, optional): measurements of each placement, afresh and in turn (every
            placement once per round), so that each placement's samples fall at different moments
            of the machine; the median is its measured step (default: 1).

    Returns:
        list[dict]: per placement ``name``, ``measured_s`` (the median), ``rounds_s`` (every
        measurement), ``simulated_s``, ``error`` (relative, ``|simulated - measured| / measured``)
        and ``oom`` (out of memory in any round). A placement out of memory was not measured: its
        ``measured_s`` and ``error`` are None, and so is each round of ``rounds_s`` that ran out of
        memory (the timer's step there is the simulator's estimate, which read as an error of 0).

    Raises:
        InvalidArgument: if ``rounds`` is less than 1.
    """
    from gnplace.sim.simulator import Simulator

    if rounds < 1:
        raise InvalidArgument(f"rounds must be at least 1, got {rounds}")
    graph, cluster = calibration.graph, calibration.cluster
    sim = Simulator()
    samples = _results_in_turn(timer, graph, cluster, placements, rounds)
    rows = []
    for name, devices in placements.items():
        results = samples[name]
        oom = any(r.is_oom for r in results)
        median = None if oom else float(np.median([r.step_time for r in results]))
        simulated = sim.time(graph, cluster, devices).step_time
        rows.append({"name": name, "measured_s": median,
                     "rounds_s": [None if r.is_oom else r.step_time for r in results], "simulated_s": simulated,
                     "error": None if median is None else abs(simulated - median) / median, "oom": oom})
    return rows
