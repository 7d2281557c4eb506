"""Paleo-style cost model: seconds of each op on each device, and of each transfer.

Following Paleo (Qi, Sparks & Talwalkar, ICLR 2017, https://openreview.net/forum?id=SyVVJ85lg),
an op's time on a device is a compute term plus a memory-traffic term, each at a fitted fraction
("platform percent of peak") of the device's peak, plus a per-op launch overhead:

.. math::
    t(v, k) = \\frac{\\mathrm{FLOP}_v}{F_k \\, \\eta^F_k}
            + \\frac{B^{in}_v + B^{out}_v + 2 P_v}{M_k \\, \\eta^M_k} + o_k

with :math:`F_k` peak FLOP/s, :math:`M_k` memory bandwidth (bytes/s), :math:`\\eta` the efficiencies,
:math:`B^{in}, B^{out}` bytes read from producers and written, :math:`P_v` resident parameter and
optimizer-state bytes (read and written by an update op) and :math:`o_k` the launch overhead (s).
A transfer of :math:`b` bytes from device :math:`a` to :math:`c` takes
:math:`\\lambda_{ac} + b / W_{ac}` seconds (latency plus bytes over effective bandwidth; Paleo has no
latency term, gnplace adds one). Where a graph carries measured seconds for a device kind, those win.
"""

from __future__ import annotations

import numpy as np

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph

__all__ = ["op_times", "transfer_time"]


def op_times(graph: OpGraph, cluster: Cluster, *, launch_overhead: bool = True) -> np.ndarray:
    """Seconds of every op on every device, ``[num_ops, num_devices]``.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the devices.
        launch_overhead (bool, optional): add each device's per-op launch overhead to modelled
            (not measured) times; Placeto's mode models it as a gap after the op instead
            (default: :obj:`True`).

    Returns:
        np.ndarray: float64 seconds; measured ``graph.cost_s[kind]`` where present, else the model.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> t = op_times(chain_graph(2), load_cluster("cpu_gpu"))
        >>> t.shape, bool(t[0, 0] > t[0, 1])  # the CPU is slower than the GPU
        ((2, 2), True)
    """
    traffic = graph.in_bytes + graph.out_bytes + 2.0 * graph.param_bytes
    times = np.empty((graph.num_ops, cluster.num_devices), dtype=np.float64)
    for k, dev in enumerate(cluster.devices):
        modelled = graph.flops / (dev.peak_flops * dev.flops_efficiency) + traffic / (dev.mem_bandwidth * dev.mem_efficiency)
        if launch_overhead:
            modelled = modelled + dev.launch_overhead
        measured = graph.measured_cost(dev.kind)
        times[:, k] = modelled if measured is None else np.where(np.isnan(measured), modelled, measured)
    return times


def transfer_time(cluster: Cluster, src: int, dst: int, num_bytes: float) -> float:
    """Seconds to send ``num_bytes`` from device ``src`` to ``dst``: latency + bytes / bandwidth."""
    return cluster.transfer_time(src, dst, num_bytes)
