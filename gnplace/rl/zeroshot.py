"""``policy``: zero-shot placement by a pretrained policy, no training on the graph at hand.

The pretrained :class:`~gnplace.policy.gnn.PlacementPolicy` (the shipped
``checkpoints/gnplace-base.ckpt`` unless another is given) encodes the graph once, decodes its
greedy placement and ``samples`` sampled ones in one batched rollout of the placement MDP
(:mod:`gnplace.rl.agent`), has them all timed together (``time_batch``) and returns the best: fitting
placements by step time first, then the least memory overflow; when none fits, the best is
repaired (:func:`~gnplace.placers.groups.repair_memory`) as every memory-aware placer's is. This is
the "sample K and keep the
best" wrapper of the learned-placer literature (SLIM, EAS); with ``portfolio`` the fast heuristics'
placements (``auto``'s candidates) join the candidates as well, so the result is never worse than
``auto``'s, at the cost of running them.

Graphs past the policy's node limit are coarsened first (:mod:`gnplace.policy.features`), so a
100,000-op graph places in seconds.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument, InvalidCheckpoint
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.seed import SeedLike, as_generator
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import StepTimer, overflow

__all__ = ["PolicyPlacer", "SHIPPED_CHECKPOINT", "cached_policy"]

#: The pretrained policy gnplace ships.
SHIPPED_CHECKPOINT = Path(__file__).resolve().parent.parent.parent / "checkpoints" / "gnplace-base.ckpt"


@functools.lru_cache(maxsize=4)
def _load(path: str, stamp: tuple[int, int]) -> tuple[Any, dict[str, Any]]:
    from gnplace.policy.checkpoint import load_policy

    return load_policy(path)


def cached_policy(path: str | os.PathLike[str]) -> tuple[Any, dict[str, Any]]:
    """The policy in ``path`` and its meta, loaded once per file version (size and mtime).

    Raises:
        InvalidCheckpoint: if the file is missing or unreadable (see :func:`~gnplace.policy.checkpoint.load_policy`).
    """
    path = Path(path)
    try:
        stat = path.stat()
    except OSError:
        hint = " (the shipped checkpoint is missing: reinstall, or pretrain one with scripts/pretrain.py)" \
            if path == SHIPPED_CHECKPOINT else ""
        raise InvalidCheckpoint(f"{path}: no such checkpoint file{hint}") from None
    return _load(str(path.resolve()), (stat.st_size, stat.st_mtime_ns))


class PolicyPlacer:
    """Zero-shot placement with a pretrained policy: greedy plus ``samples`` sampled placements, best by the timer.

    Args:
        checkpoint (str, optional): a policy checkpoint, or a pretraining run's ``last.ckpt``
            (default: the shipped ``checkpoints/gnplace-base.ckpt``).
        samples (int, optional): sampled placements beside the greedy one, ``K`` (default: 16).
        portfolio (bool, optional): also time the fast heuristics' placements (``auto``'s candidates)
            and keep the best of all (default: :obj:`False`).
        max_nodes (int, optional): most nodes of the decision graph; larger graphs are coarsened
            (default: 1,000).
        timer (StepTimer, optional): scores the candidates (default: ``Simulator()``).
        subsets (bool, optional): also decode greedily on the fastest ``k`` devices alone, for every
            ``k`` from 2 to ``D - 1``, and time those ``D - 2`` placements with the rest: a placement
            that leaves slow or surplus devices idle, which the per-node decoder rarely finds on many
            devices (default: :obj:`False`).

    After :meth:`place`: ``last_greedy_step`` and ``last_step`` (seconds, by the timer), ``last_greedy_oom``,
    ``last_choice`` (``"greedy"``, ``"sample"``, ``"greedy on the k fastest"``, ``"repaired"`` or a heuristic's
    name), ``last_evaluations``.

    Examples:
        >>> from gnplace.graph_io import load_graph
        >>> from gnplace.cluster import load_cluster
        >>> g = load_graph("datasets/examples/mlp2x8w2048b512.gnpg")
        >>> placer = PolicyPlacer(samples=4)
        >>> placer.place(g, load_cluster("k80x2"), seed=0).devices.shape == (g.num_ops,)
        True
        >>> placer.last_evaluations
        5
    """

    name = "policy"
    learned = True
    accepts = frozenset({"timer", "checkpoint"})

    def __init__(
        self, checkpoint: str | os.PathLike[str] | None = None, samples: int = 16, portfolio: bool = False,
        max_nodes: int = 1000, timer: StepTimer | None = None, subsets: bool = False,
    ) -> None:
        if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 0:
            raise InvalidArgument(f"PolicyPlacer needs samples >= 0, got {samples!r}")
        if max_nodes < 1:
            raise InvalidArgument(f"PolicyPlacer needs max_nodes >= 1, got {max_nodes}")
        self.checkpoint = Path(checkpoint) if checkpoint is not None else SHIPPED_CHECKPOINT
        self.samples = int(samples)
        self.portfolio = bool(portfolio)
        self.subsets = bool(subsets)
        self.max_nodes = int(max_nodes)
        self.timer = timer or Simulator()
        self.policy, self.meta = cached_policy(self.checkpoint)  # fail early on a bad checkpoint
        self.last_greedy_step: float | None = None
        self.last_greedy_oom = False
        self.last_step: float | None = None
        self.last_choice: str | None = None
        self.last_evaluations = 0

    def __repr__(self) -> str:
        return (f"PolicyPlacer(checkpoint={str(self.checkpoint)!r}, samples={self.samples}, "
                f"portfolio={self.portfolio}, subsets={self.subsets})")

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Place ``graph`` on ``cluster`` with the policy (see the class docstring).

        Args:
            graph (OpGraph): the graph.
            cluster (Cluster): the devices.
            seed (int, np.random.Generator or None, optional): seed of the samples and of the
                coarsening (default: None). The same seed gives the same placement.
        """
        import torch

        from gnplace.policy.features import build_policy_input
        from gnplace.rl.agent import sample
        from gnplace.rl.env import PlacementMDP

        self.last_evaluations = 0
        if graph.num_ops == 0 or cluster.num_devices == 1:
            self.last_choice, self.last_step = "greedy", None
            return Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster)
        rng = as_generator(seed)
        coarsen_seed = int(rng.integers(2**31 - 1))
        inp = build_policy_input(graph, cluster, cost_model=self.timer.cost_model, max_nodes=self.max_nodes,
                                 seed=coarsen_seed)
        mdp = PlacementMDP(inp)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # small tensors: one thread is fastest
        try:
            with torch.no_grad():
                enc = self.policy.encode(inp)
                groups = [sample(self.policy, mdp, 1, greedy=True, enc=enc).rollout.group_devices]
                if self.samples > 0:
                    groups.append(sample(self.policy, mdp, self.samples, rng, enc=enc).rollout.group_devices)
                candidates = inp.expand(np.concatenate(groups, axis=0))
                names = ["greedy"] + ["sample"] * self.samples
                if self.subsets:
                    extra, extra_names = self._greedy_on_fastest(graph, cluster, coarsen_seed)
                    candidates = np.concatenate([candidates, extra], axis=0)
                    names += extra_names
        finally:
            torch.set_num_threads(threads)
        if self.portfolio:
            from gnplace.placers.auto import FAST_PLACERS
            from gnplace.placers.registry import make_placer

            for name in FAST_PLACERS:
                placed = make_placer(name, timer=self.timer).place(graph, cluster, seed=coarsen_seed)
                candidates = np.concatenate([candidates, placed.devices[None, :]], axis=0)
                names.append(name)
        result = self.timer.time_batch(graph, cluster, candidates)
        self.last_evaluations = int(candidates.shape[0])
        excess = overflow(result.peak_memory, cluster.memory)
        # fitting placements by step time first, then the least overflow
        order = np.lexsort((result.step_time, excess, result.oom))
        best = int(order[0])
        self.last_greedy_step, self.last_greedy_oom = float(result.step_time[0]), bool(result.oom[0])
        self.last_step = float(result.step_time[best])
        self.last_choice = names[best]
        chosen = candidates[best].copy()
        if result.oom[best]:  # nothing fits: move groups off overflowing devices, as every memory-aware placer does
            from gnplace.placers.groups import repair_memory

            per_group = np.zeros(graph.num_groups, dtype=np.int64)
            per_group[graph.group] = chosen
            fixed = Placement.from_groups(graph, cluster, repair_memory(graph, cluster, per_group, timer=self.timer))
            repaired = self.timer.time(graph, cluster, fixed)
            self.last_evaluations += 1
            if not repaired.is_oom:
                chosen, self.last_step, self.last_choice = fixed.devices, float(repaired.step_time), "repaired"
        return Placement(chosen, cluster)


    def _greedy_on_fastest(self, graph: OpGraph, cluster: Cluster, seed: int) -> tuple[np.ndarray, list[str]]:
        """Greedy placements on the fastest ``k`` devices, ``k = 2 .. D-1``: ``([D-2, num_ops], names)``.

        Devices are ranked by effective FLOP/s (ties by index) and the policy decodes on the cluster of
        the ``k`` first, its devices' indices mapped back to ``cluster``'s.
        """
        from gnplace.policy.features import build_policy_input
        from gnplace.rl.agent import sample
        from gnplace.rl.env import PlacementMDP

        by_speed = np.argsort([-d.effective_flops for d in cluster.devices], kind="stable")
        found, names = [], []
        for size in range(2, cluster.num_devices):
            keep = by_speed[:size]
            inp = build_policy_input(graph, cluster.subset(keep), cost_model=self.timer.cost_model,
                                     max_nodes=self.max_nodes, seed=seed)
            greedy = sample(self.policy, PlacementMDP(inp), 1, greedy=True).rollout.group_devices
            found.append(keep[inp.expand(greedy)])
            names.append(f"greedy on the {size} fastest")
        if not found:
            return np.zeros((0, graph.num_ops), dtype=np.int64), []
        return np.concatenate(found, axis=0), names


def compare_with_references(
    graph: OpGraph, cluster: Cluster, placer: PolicyPlacer, *, seed: int = 0, timer: StepTimer | None = None
) -> tuple[Placement, dict[str, Any]]:
    """Place with ``placer`` and time the result beside ``single``, ``auto`` and the simulator's lower bound.

    Returns:
        tuple: the policy's placement, and a row of seconds (``policy``, ``greedy``, ``auto``,
        ``single``, ``bound``), ``policy_vs_auto``, ``auto_choice``, ``choice``, ``oom`` and
        ``place_seconds`` (the policy's wall time, coarsening included).
    """
    import time

    from gnplace.placers.auto import AutoPlacer
    from gnplace.sim.bounds import lower_bound

    timer = timer or placer.timer
    start = time.perf_counter()
    placement = placer.place(graph, cluster, seed=seed)
    took = time.perf_counter() - start
    result = timer.time(graph, cluster, placement)
    auto = AutoPlacer(timer=timer)
    auto.place(graph, cluster, seed=seed)  # times every candidate, single among them
    assert auto.last_choice is not None
    auto_step, single_step = auto.last_step_times[auto.last_choice], auto.last_step_times["single"]
    bound = float(lower_bound(graph, cluster, times=timer.cost_model.op_times(graph, cluster)).value)
    row = {
        "graph": graph.name, "ops": graph.num_ops, "cluster": cluster.name, "policy": float(result.step_time),
        "greedy": placer.last_greedy_step, "choice": placer.last_choice, "auto": auto_step,
        "auto_choice": auto.last_choice, "single": single_step, "bound": bound,
        "policy_vs_auto": float(result.step_time) / auto_step, "oom": bool(result.is_oom), "place_seconds": took,
    }
    return placement, row
