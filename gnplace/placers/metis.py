"""``metis``: a balanced partition of the group graph into one part per device with METIS.

METIS (Karypis & Kumar, SIAM J. Sci. Comput. 20(1), 1998, https://doi.org/10.1137/S1064827595287997)
splits a graph into :math:`k` parts of nearly equal vertex weight while keeping the weight of cut
edges small. It is the graph-partitioning baseline of the device-placement papers (e.g. Placeto,
NeurIPS 2019; GDP, 2019). gnplace partitions the *group graph*: each colocation group contracted
to one vertex weighted by its compute time on the fastest device, each pair of groups joined by an
edge weighted by the bytes between them, :math:`k` the number of usable devices:

.. math::
    \\min_{\\pi} \\sum_{\\pi(g) \\ne \\pi(h)} B_{gh}
    \\quad \\text{s.t.} \\quad \\sum_{\\pi(g) = j} t_g \\le (1 + \\epsilon) \\, \\tau_j \\sum_g t_g

with target fractions :math:`\\tau_j` proportional to each device's speed (METIS's ``tpwgts``). Up to
:data:`RECURSIVE_MAX_PARTS` (8) parts, every preset cluster, METIS bisects recursively
(``METIS_PartGraphRecursive``), whose default tolerance is 0.1% per bisection (measured on 3,000-group
graphs: at most 0.1%, 0.5% and 1.1% over the target on 2, 4 and 8 parts); past it the k-way method
(``METIS_PartGraphKway``), :math:`\\epsilon` = 3%. pymetis picks the method by the same rule when it is not told;
it is told, so that a pymetis with another rule does not change placements. Weights are scaled to integers,
as METIS needs.
Memory is not a METIS constraint here: an out-of-memory partition is repaired afterwards
(:func:`~gnplace.placers.groups.repair_memory`).
"""

from __future__ import annotations

import numpy as np
import pymetis

from gnplace.cluster import Cluster
from gnplace.cstdout import quiet_c_stdout
from gnplace.exceptions import MissingDependency
from gnplace.graph import OpGraph
from gnplace.placement import Placement, check_graph_and_cluster
from gnplace.placers.base import check_flag, check_fraction
from gnplace.placers.groups import device_sums, group_edges, group_times, memory_need, repair_memory, usable_devices
from gnplace.seed import SeedLike, as_generator
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import StepTimer

__all__ = ["MetisPlacer", "partition_groups", "check_pymetis", "PYMETIS_FLOOR", "RECURSIVE_MAX_PARTS"]

#: The first pymetis whose ``part_graph`` takes a ``CSRAdjacency`` and target shares (``tpwgts``), which
#: :func:`partition_groups` and :func:`gnplace.coarsen.metis_parts` pass: pyproject.toml's floor.
PYMETIS_FLOOR = "2025.2"
#: Most parts :func:`partition_groups` makes by recursive bisection; more go to METIS's k-way method (pymetis's
#: own default rule, passed explicitly).
RECURSIVE_MAX_PARTS = 8


def check_pymetis() -> None:
    """Refuse, in one line, a pymetis older than :data:`PYMETIS_FLOOR` (its ``part_graph`` lacks ``tpwgts``).

    Raises:
        MissingDependency: the pymetis installed has no ``CSRAdjacency`` (before 2025.2).

    Examples:
        >>> check_pymetis()  # the pymetis installed has the API
    """
    if not hasattr(pymetis, "CSRAdjacency"):
        raise MissingDependency(
            f"METIS partitions need pymetis {PYMETIS_FLOOR} or later, found "
            f"{getattr(pymetis, 'version', 'an older one')}: pip install -U 'pymetis>={PYMETIS_FLOOR}'"
        )


def _integer_weights(x: np.ndarray, total: float) -> np.ndarray:
    """Positive int64 weights proportional to ``x``, summing to about ``total``."""
    x = np.asarray(x, dtype=np.float64)
    scale = total / x.sum() if x.size and x.sum() > 0 else 0.0
    return (1 + np.floor(x * scale)).astype(np.int64)


def partition_groups(
    graph: OpGraph, weight: np.ndarray, parts: int, *, fractions: np.ndarray | None = None, seed: int | None = None
) -> np.ndarray:
    """Partition the colocation groups of ``graph`` into ``parts`` with METIS.

    By recursive bisection up to :data:`RECURSIVE_MAX_PARTS` parts, else by METIS's k-way method.

    Args:
        graph (OpGraph): the graph; edges between groups are weighted by their bytes.
        weight (np.ndarray): vertex weight of each group, e.g. seconds, ``[num_groups]``.
        parts (int): number of parts.
        fractions (np.ndarray, optional): target share of the total weight of each part,
            ``[parts]`` (default: equal shares).
        seed (int, optional): METIS's random seed (default: METIS's own).

    Returns:
        np.ndarray: part of each group, ``[num_groups]``.

    Raises:
        MissingDependency: a pymetis older than :data:`PYMETIS_FLOOR` (:func:`check_pymetis`).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> partition_groups(chain_graph(4), np.ones(4), 2).tolist()
        [1, 1, 0, 0]
    """
    if parts <= 1 or graph.num_groups <= 1:
        return np.zeros(graph.num_groups, dtype=np.int64)
    if graph.num_groups <= parts:  # METIS refuses; one group a part is the balanced answer
        return np.arange(graph.num_groups, dtype=np.int64)
    src, dst, size = group_edges(graph)
    a, b = np.concatenate([src, dst]), np.concatenate([dst, src])
    w = np.concatenate([size, size])
    key = a * graph.num_groups + b  # merge the two directions of a pair into one undirected edge
    uniq, inverse = np.unique(key, return_inverse=True)
    a, b = uniq // graph.num_groups, uniq % graph.num_groups
    w = np.bincount(inverse, weights=w, minlength=uniq.shape[0])
    xadj = np.zeros(graph.num_groups + 1, dtype=np.int64)
    np.cumsum(np.bincount(a, minlength=graph.num_groups), out=xadj[1:])
    options = pymetis.Options()
    if seed is not None:
        options.seed = seed
    tpwgts = None if fractions is None else (np.asarray(fractions, float) / np.sum(fractions)).tolist()
    kwargs = dict(vweights=_integer_weights(weight, 1e7).tolist(), tpwgts=tpwgts, options=options)
    if w.size:
        kwargs["eweights"] = _integer_weights(w, 1e8).tolist()
    check_pymetis()
    with quiet_c_stdout():  # METIS's notes on bisections with a small target share, printed from C
        result = pymetis.part_graph(parts, pymetis.CSRAdjacency(xadj.tolist(), b.tolist()),
                                    recursive=parts <= RECURSIVE_MAX_PARTS, **kwargs)
    return np.asarray(result[1], dtype=np.int64)


class MetisPlacer:
    """Place colocation groups by a METIS partition balanced by compute, one part per device, then fix memory.

    Up to :data:`RECURSIVE_MAX_PARTS` devices METIS bisects recursively, past them it partitions k-way
    (:func:`partition_groups`).

    Args:
        min_speed (float, optional): leave out devices slower than this fraction of the fastest
            (on this graph) unless memory needs them; the rest get shares of the work in
            proportion to their speed (default: ``0.1``).
        memory_aware (bool, optional): repair a partition that runs out of memory (default: :obj:`True`).
        timer (StepTimer, optional): checks memory; op-time estimates come from its cost model
            (default: ``Simulator()``).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> p = MetisPlacer().place(chain_graph(6), load_cluster("k80x2"), seed=0)
        >>> sorted(np.bincount(p.devices).tolist())  # two contiguous halves
        [3, 3]
    """

    name = "metis"
    accepts = frozenset({"timer"})
    #: Changes when results under the same options change. 1 (2026-12-04): where the memory repair's moves left a
    #: placement over memory, it tries the largest device and a descent by the simulated overflow
    #: (:func:`~gnplace.placers.groups.repair_memory`); placements that fitted are as before.
    revision = "1"

    def __init__(self, *, min_speed: float = 0.1, memory_aware: bool = True, timer: StepTimer | None = None) -> None:
        self.min_speed = check_fraction(self.name, "min_speed", min_speed)
        self.memory_aware = check_flag(self.name, "memory_aware", memory_aware)
        self.timer = timer or Simulator()

    def __repr__(self) -> str:
        return f"MetisPlacer(min_speed={self.min_speed}, memory_aware={self.memory_aware})"

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Place ``graph`` on ``cluster``; ``seed`` (int, np.random.Generator or None) seeds METIS."""
        check_graph_and_cluster(graph, cluster)
        op_time, column = self.timer.cost_model.op_time_columns(graph, cluster)  # distinct columns: the same bits
        devices = usable_devices(op_time, cluster, memory_need(graph, cluster, self.timer), min_speed=self.min_speed,
                                 column=column)
        times = group_times(graph, op_time)  # of the distinct columns
        speed = 1.0 / np.maximum(device_sums(times, column, devices), 1e-300)
        fastest = devices[int(np.argmax(speed))]
        metis_seed = None if seed is None else int(as_generator(seed).integers(2**31 - 1))
        parts = partition_groups(graph, times[:, column[fastest]], devices.size, fractions=speed, seed=metis_seed)
        per_group = devices[parts]
        if self.memory_aware:
            per_group = repair_memory(graph, cluster, per_group, timer=self.timer)
        return Placement.from_groups(graph, cluster, per_group)
