"""``heft``: Heterogeneous Earliest Finish Time list scheduling.

HEFT (Topcuoglu, Hariri & Wu, IEEE TPDS 13(3), 2002, https://doi.org/10.1109/71.993206) takes ops
in decreasing *upward rank*, the longest path (mean op and transfer times) from the op to the end
of the graph, and puts each on the device where it would *finish* earliest:

.. math::
    \\mathrm{rank}_u(v) = \\bar t_v + \\max_{(v, s) \\in E} \\left(\\bar c_{vs} + \\mathrm{rank}_u(s)\\right),
    \\qquad d(v) = \\arg\\min_d \\max\\Big(F_d,\\ \\max_{(u, v) \\in E} f_u + c_{uv}(d_u, d)\\Big) + t_{v,d}

with :math:`F_d` the time device :math:`d` is next free and :math:`c_{uv}(a, b)` the transfer
seconds (0 on one device). Finishing times weigh device speed, so HEFT suits heterogeneous
clusters and uses every device by default. Two adaptations to placement: the first op of a
colocation group places the whole group, so its finish there is counted as the group's (start
plus all the group's seconds on that device), which keeps a group whose first op is small but
whose gradient ops are heavy off a slow device; and ops are appended to devices without HEFT's
insertion into idle gaps (the simulator replays the placement with its own queues anyway): on the 24 test graphs
under datasets/, insertion changed 14 placements on ``k80x4``, 16 on ``v100x8`` and none on ``cpu_gpu``, and made
steps 1.005 and 1.010 times these, geometric mean (0.953 to 1.064, 0.939 to 1.112). Mean
transfer times :math:`\\bar c` are averaged over ordered pairs of distinct devices
(:func:`~gnplace.placers.listsched.mean_comm_time`: mean latency plus bytes times the mean of
1/bandwidth), where the paper writes :math:`\\bar L + \\text{bytes} / \\bar B` with :math:`\\bar B` the mean
bandwidth; the two differ where links differ (on ``v100x8`` the paper's byte term is 1/1.4 of this one):
there, on the 108 graphs under datasets/, the paper's form changed 38 placements and made their steps 1.011 times
these, geometric mean (0.952 to 1.479), so the mean of transfer times is kept.
Memory is handled as in Baechi's memory-constrained schedulers (:mod:`gnplace.placers.listsched`).
"""

from __future__ import annotations

import numpy as np

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placers._listsched_kernel import heft_kernel
from gnplace.placers.listsched import ListSchedule, ListSchedulingPlacer, interchangeable_devices, static_rank
from gnplace.sim.timer import StepTimer

__all__ = ["HeftPlacer", "heft_schedule"]


def heft_schedule(schedule: ListSchedule, rank: np.ndarray) -> None:
    """Schedule every op, highest ``rank`` first among ready ops, on its earliest-finish device.

    The first op of a colocation group places the whole group, so its finish is counted as that
    of the whole group's work started there (start plus the group's seconds on the device); later
    ops of the group follow it. An op may use the devices that
    :meth:`~gnplace.placers.listsched.ListSchedule.candidates` allows when it
    is taken, so room taken by other groups since it became ready counts. Ops are appended to a
    device, never fitted into an idle gap. Ties of rank go to the lower op index, ties of finish to the
    lower device index. Of interchangeable devices without ops
    (:func:`~gnplace.placers.listsched.interchangeable_devices`) only the first is weighed: the
    others would finish the op when it does and lose the tie. Fills ``schedule`` in place; the loop
    is compiled (:func:`~gnplace.placers._listsched_kernel.heft_kernel`).
    """
    state = (*schedule.arrays(), interchangeable_devices(schedule))
    heft_kernel(schedule.op_time, schedule.group_time, -np.asarray(rank, dtype=np.float64), *state)


class HeftPlacer(ListSchedulingPlacer):
    """Place ops by HEFT list scheduling, keeping colocation groups together and within memory.

    Args:
        memory_aware (bool, optional): respect device memory (default: :obj:`True`).
        min_speed (float, optional): a group only goes to devices that run it at least this
            fraction as fast as its fastest device (default: ``0``: HEFT weighs speed itself).
        timer (StepTimer, optional): checks memory; op-time estimates come from its cost model
            (default: ``Simulator()``).

    Examples:
        >>> from gnplace.toy import fork_graph
        >>> from gnplace.cluster import load_cluster
        >>> HeftPlacer().place(fork_graph(flops=1e11, out_bytes=1000), load_cluster("k80x2")).devices.tolist()
        [0, 0, 1, 1]
    """

    name = "heft"
    #: Changes when results under the same options change. 1 (2026-12-04): where the memory repair's moves left a
    #: placement over memory, it tries the largest device and a descent by the simulated overflow
    #: (:func:`~gnplace.placers.groups.repair_memory`); placements that fitted are as before.
    revision = "1"

    def __init__(
        self, *, memory_aware: bool = True, min_speed: float = 0.0, timer: StepTimer | None = None
    ) -> None:
        super().__init__(memory_aware=memory_aware, min_speed=min_speed, timer=timer)

    def fill_schedule(self, graph: OpGraph, cluster: Cluster, schedule: ListSchedule) -> None:
        """HEFT: :func:`heft_schedule` by :func:`~gnplace.placers.listsched.static_rank`."""
        heft_schedule(schedule, static_rank(graph, schedule.op_time, cluster, schedule.column))
