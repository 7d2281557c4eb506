"""``m_sct``: memory-constrained Small Communication Time list scheduling, as in Baechi.

SCT (Hanen & Munier, 1995) is ETF that keeps an op with its *favourite child*, the consumer whose
edge is the most expensive to cut, so that the transfer between them disappears. Baechi
(Jeon et al., SoCC 2020, https://doi.org/10.1145/3419111.3421302) picks favourite children by
solving a linear-program relaxation; gnplace uses the LP-free rule: the favourite child of op
:math:`u` is its consumer with the largest edge (bytes), and an op claimed as favourite by several
producers belongs to the one with the largest edge. Baechi's LP (the makespan bound with a variable per edge, 0
where the child is the favourite, rounded at 0.5 and its conflicts settled as Baechi's code does), solved with
OR-Tools' GLOP on the 24 test graphs under datasets/ on ``k80x4`` in 0.2 to 6.4 s a graph, chose other favourites
for 7% to 38% of the ops that have one and changed 23 placements, steps 0.989 times these, geometric mean (0.860 to
1.113); its optimum is degenerate, so its favourites depend on the solver. ETF (see :mod:`gnplace.placers.m_etf`) then
runs unchanged except that a favourite child :math:`v` of :math:`u` goes to :math:`u`'s device
:math:`d_u` instead of the ETF choice :math:`d` whenever

.. math::
    s(v, d_u) \\le s(v, d) + c_{uv}(d_u, d),

that is, whenever waiting for :math:`d_u` costs no more than the transfer it saves. This rule is gnplace's, not
Baechi's: there, a device whose last op's favourite child is ready, and would start earliest on it, waits for that
child and meanwhile runs only an *urgent* op, one that could start by then on every device. So a sibling of higher
rank that ETF starts first on the parent's device here goes elsewhere there: in the m-SCT example of
``tests/placers/test_listsched.py`` (``p`` feeds ``u`` and its favourite ``v``, 1 s each; links of 0.25 s latency,
``v``'s edge 0.5 s in all) Baechi would start ``v`` after ``p`` at 1 s and ``u`` on the other device at 1.25 s,
where this rule runs ``u`` then ``v`` on ``p``'s device.
"""

from __future__ import annotations

import numpy as np

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placers._listsched_kernel import favourite_children_kernel
from gnplace.placers.listsched import ETF_REVISION, ListSchedule, ListSchedulingPlacer, etf_schedule, static_rank

__all__ = ["MSCTPlacer", "favourite_children"]


def favourite_children(graph: OpGraph) -> tuple[np.ndarray, np.ndarray]:
    """Each op's favourite parent (the producer it is the favourite child of) and that edge's bytes.

    The favourite child of an op is its consumer over the largest edge (first in edge order on
    ties); an op that is the favourite of several producers keeps the one with the largest edge.

    Returns:
        tuple[np.ndarray, np.ndarray]: producer index or -1, and bytes (0 where none), ``[num_ops]`` each.

    Examples:
        >>> from gnplace.toy import fork_graph
        >>> parent, _ = favourite_children(fork_graph())
        >>> parent.tolist()  # src favours left; left and right favour sink, left wins the tie
        [-1, 0, -1, 1]
    """
    ptr, dst, size = graph.out_csr
    return favourite_children_kernel(ptr, dst, np.asarray(size, dtype=np.float64))  # type: ignore[no-any-return]


class MSCTPlacer(ListSchedulingPlacer):
    """Place ops by memory-constrained SCT list scheduling (Baechi's m-SCT, LP-free favourite children).

    Options (``memory_aware``, ``min_speed``, default ``0.5``, and ``timer``) are those of
    :class:`~gnplace.placers.listsched.ListSchedulingPlacer`.

    Examples:
        >>> from gnplace.toy import fork_graph
        >>> from gnplace.cluster import load_cluster
        >>> g = fork_graph(flops=1e11, out_bytes=10**9)  # transfers cost more than waiting
        >>> MSCTPlacer().place(g, load_cluster("k80x2")).devices.tolist()
        [0, 0, 0, 0]
    """

    name = "m_sct"
    revision = ETF_REVISION

    def fill_schedule(self, graph: OpGraph, cluster: Cluster, schedule: ListSchedule) -> None:
        """ETF that keeps each op's favourite child with it where waiting costs no more than the transfer."""
        parent, size = favourite_children(graph)
        rank = static_rank(graph, schedule.op_time, cluster, schedule.column)
        etf_schedule(schedule, rank, favourite_parent=parent, favourite_bytes=size)
