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
end of the graph (HEFT's upward rank).
"""

from __future__ import annotations

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.placers.listsched import ListSchedule, etf_schedule, place_by_schedule, static_rank
from gnplace.seed import SeedLike
from gnplace.sim.simulator import Simulator

__all__ = ["METFPlacer"]


class METFPlacer:
    """Place ops by memory-constrained ETF list scheduling (Baechi's m-ETF).

    Each colocation group goes where ETF schedules its first op; a group only goes to a device
    with room for it (:func:`~gnplace.placers.groups.group_memory`) when some device has room, and
    the result is checked with the simulator and repaired if it runs out of memory.

    Args:
        memory_aware (bool, optional): respect device memory (default: :obj:`True`).
        min_speed (float, optional): a group only goes to devices that run it at least this
            fraction as fast as its fastest device: ETF compares start times, as if devices were
            alike, and would hand heavy groups to an idle CPU beside a GPU (default: ``0.5``).
        simulator (Simulator, optional): op times and the memory check (default: ``Simulator()``).

    Examples:
        >>> from gnplace.toy import fork_graph
        >>> from gnplace.cluster import load_cluster
        >>> METFPlacer().place(fork_graph(flops=1e11, out_bytes=1000), load_cluster("k80x2")).devices.tolist()
        [0, 0, 1, 1]
    """

    name = "m_etf"

    def __init__(self, *, memory_aware: bool = True, min_speed: float = 0.5, simulator: Simulator | None = None) -> None:
        self.memory_aware = memory_aware
        self.min_speed = min_speed
        self.simulator = simulator or Simulator()

    def __repr__(self) -> str:
        return f"METFPlacer(memory_aware={self.memory_aware}, min_speed={self.min_speed})"

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Place ``graph`` on ``cluster`` (``seed`` is unused: this placer is deterministic)."""

        def run(schedule: ListSchedule) -> None:
            etf_schedule(schedule, static_rank(graph, schedule.op_time, cluster))

        return place_by_schedule(
            graph, cluster, run, simulator=self.simulator, memory_aware=self.memory_aware, min_speed=self.min_speed
        )
