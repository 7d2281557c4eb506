"""``m_etf``: memory-constrained Earliest Task First list scheduling, as in Baechi.

Baechi (Jeon et al., SoCC 2020, https://doi.org/10.1145/3419111.3421302) adapts ETF (Hwang, Chow,
Anger & Lee, SIAM J. Comput. 1989) to device placement under memory limits: at every step, of all
pairs of a ready op and a device with room for it, the pair that can *start* earliest is scheduled,
where the start accounts for the transfers of the op's inputs to that device:

.. math::
    s(v, d) = \\max\\Big(F_d,\\ \\max_{(u, v) \\in E} f_u + c_{uv}(d_u, d)\\Big)

with :math:`F_d` the time device :math:`d` is next free, :math:`f_u` the finish of producer
:math:`u` on device :math:`d_u` and :math:`c_{uv}(a, b)` the seconds to move the edge's bytes
from :math:`a` to :math:`b` (0 when :math:`a = b`). Ties go to the op with the longer path to the
end of the graph (HEFT's upward rank, mean transfer times included). ETF breaks them by the static level, the path
of op times alone, and Baechi's code by a breadth-first topological order: on the 24 test graphs under datasets/, the
static level changed 10 placements on ``k80x4`` and 13 on ``v100x8``, steps 0.990 and 0.989 times these, geometric
mean (0.907 to 1.010, 0.820 to 1.039); Baechi's order changed all 24 on both, 1.067 and 1.041 (0.921 to 1.349,
0.829 to 1.316).
"""

from __future__ import annotations

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placers.listsched import ETF_REVISION, ListSchedule, ListSchedulingPlacer, etf_schedule, static_rank

__all__ = ["METFPlacer"]


class METFPlacer(ListSchedulingPlacer):
    """Place ops by memory-constrained ETF list scheduling (Baechi's m-ETF).

    Each colocation group goes where ETF schedules its first op; a group only goes to a device
    with room for it (:func:`~gnplace.placers.groups.group_memory`) when some device has room, and
    the result is checked with the timer and repaired if it runs out of memory. Options
    (``memory_aware``, ``min_speed``, default ``0.5``, and ``timer``) are those of
    :class:`~gnplace.placers.listsched.ListSchedulingPlacer`.

    Examples:
        >>> from gnplace.toy import fork_graph
        >>> from gnplace.cluster import load_cluster
        >>> METFPlacer().place(fork_graph(flops=1e11, out_bytes=1000), load_cluster("k80x2")).devices.tolist()
        [0, 0, 1, 1]
    """

    name = "m_etf"
    revision = ETF_REVISION

    def fill_schedule(self, graph: OpGraph, cluster: Cluster, schedule: ListSchedule) -> None:
        """ETF: :func:`~gnplace.placers.listsched.etf_schedule` by :func:`~gnplace.placers.listsched.static_rank`."""
        etf_schedule(schedule, static_rank(graph, schedule.op_time, cluster, schedule.column))
