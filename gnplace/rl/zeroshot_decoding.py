"""``policy``'s decodes: the policy on a cluster's fastest devices, and a constructor's placements on a policy input.

The pretrained policy decodes greedily on the whole cluster and on its ``k`` fastest devices alone
(:func:`subset_sizes`, :func:`by_speed`), each device set one policy input (:func:`device_set_input`) and one
:class:`Decoder`, whose placements come back as device indices of the whole cluster; a constructor's greedy placement
and tempered samples on one input are :func:`construct_on`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph

if TYPE_CHECKING:
    from gnplace.coarsen import Coarsening
    from gnplace.sim.costmodel import CostModel

__all__ = ["SUBSETS_EVERY_K", "subset_sizes", "by_speed", "Decoder", "device_set_input", "construct_on"]


#: Clusters of at most this many devices get a greedy decode on the fastest ``k`` for every ``k`` (``subsets``);
#: a larger one on ``k = 2 .. 16`` and then on doubling ``k`` (32, 64, ...) below its size: a decode on every
#: ``k`` held ``D`` policy inputs, and 1,024 devices took 240 s and 16.8 GB to place a 3,197-op graph.
SUBSETS_EVERY_K = 16


def subset_sizes(num_devices: int) -> list[int]:
    """The device counts ``k`` (from 2, below ``num_devices``) the policy also decodes on, the ``k`` fastest alone.

    Examples:
        >>> subset_sizes(4), subset_sizes(2)
        ([2, 3], [])
        >>> subset_sizes(100)[-5:]
        [15, 16, 32, 64, 99]
    """
    sizes = list(range(2, min(num_devices, SUBSETS_EVERY_K + 1)))
    k = SUBSETS_EVERY_K * 2
    while k < num_devices:
        sizes.append(k)
        k *= 2
    if num_devices - 1 > SUBSETS_EVERY_K and sizes[-1] != num_devices - 1:
        sizes.append(num_devices - 1)  # every device but the slowest, as on a small cluster
    return sizes


def by_speed(cluster: Cluster) -> np.ndarray:
    """Device indices from the fastest (effective FLOP/s) to the slowest, ties by index."""
    return np.argsort([-d.effective_flops for d in cluster.devices], kind="stable")


class Decoder:
    """The policy's decoding of one graph on a set of a cluster's devices, placements mapped back to the cluster."""

    def __init__(self, policy: Any, inp: Any, keep: np.ndarray, whole: bool) -> None:
        from gnplace.rl.env import PlacementMDP

        self.policy, self.inp, self.keep, self.whole = policy, inp, keep, whole
        self.mdp = PlacementMDP(inp)
        self.enc = policy.encode(inp)

    def name(self, kind: str) -> str:
        """A candidate's name: ``kind``, with ``" on the k fastest"`` on a device subset."""
        return kind if self.whole else f"{kind} on the {self.keep.size} fastest"

    def greedy(self) -> np.ndarray:
        """The greedy placement, ``[1, num_ops]`` device indices of the whole cluster."""
        from gnplace.rl.agent import sample

        greedy = sample(self.policy, self.mdp, 1, greedy=True, enc=self.enc)
        return self.keep[self.inp.expand(greedy.rollout.group_devices)]

    def sample(self, count: int, rng: np.random.Generator, temperature: np.ndarray) -> np.ndarray:
        """``count`` placements drawn at the given temperatures (``[count]``), ``[count, num_ops]``."""
        from gnplace.rl.agent import sample

        drawn = sample(self.policy, self.mdp, count, rng, enc=self.enc, temperature=temperature)
        return self.keep[self.inp.expand(drawn.rollout.group_devices)]


def device_set_input(
    graph: OpGraph, cluster: Cluster, size: int, coarsening: Coarsening, held: np.ndarray | None, *,
    cost_model: CostModel, max_nodes: int,
) -> tuple[np.ndarray, Any]:
    """The ``size`` fastest devices' indices (all of them for ``size = D``) and a policy input on them alone.

    The input decides on ``coarsening`` (the decision graph made for the whole cluster, or
    :func:`~gnplace.policy.features.ops_alone`) with ``held``, the bytes each op holds at the memory peak
    (:func:`~gnplace.placers.groups.held_at_peak` of the whole cluster; None: computed for the device set), and the
    timer's ``cost_model`` and ``max_nodes``; device ``i`` of the input is device ``keep[i]`` of ``cluster``.
    """
    from gnplace.policy.features import build_policy_input

    if size == cluster.num_devices:
        keep, sub = np.arange(size), cluster
    else:
        keep = by_speed(cluster)[:size]
        sub = cluster.subset(keep)
    return keep, build_policy_input(graph, sub, cost_model=cost_model, max_nodes=max_nodes, coarsening=coarsening,
                                    held=held)


def construct_on(policy: Any, inp: Any, rng: np.random.Generator, samples: int, temperature: float) -> np.ndarray:
    """A constructor's greedy placement and ``samples`` samples at ``temperature`` on ``inp``'s devices.

    ``[1 + samples, num_ops]`` device indices of ``inp``'s devices.
    """
    from gnplace.rl.agent import sample
    from gnplace.rl.env import PlacementMDP

    mdp, enc = PlacementMDP(inp), policy.encode(inp)
    groups = sample(policy, mdp, 1, greedy=True, enc=enc).rollout.group_devices
    if samples:
        taus = np.full(samples, temperature)  # softmax(logits / tau)
        drawn = sample(policy, mdp, samples, rng, enc=enc, temperature=taus).rollout.group_devices
        groups = np.concatenate([groups, drawn])
    return inp.expand(groups)  # type: ignore[no-any-return]
