"""Small graphs and clusters for examples, doctests, tests and benchmarks.

``chain_graph`` and ``fork_graph`` are hand-sized; ``mlp_training_graph`` is a real training
graph of a multi-layer perceptron with exact FLOP and byte counts (forward, data- and
weight-gradient ops, SGD updates, colocation groups); ``layered_graph`` draws a random DAG of a
chosen size for benchmarks. ``toy_cluster`` builds a cluster of identical devices on uniform links,
``uniform_cluster`` one of given devices, and ``mixed_cluster`` a CPU with two GPU generations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from gnplace.cluster import Cluster, Device
from gnplace.exceptions import InvalidArgument
from gnplace.graph import BACKWARD, FORWARD, UPDATE, OpGraph
from gnplace.limits import is_whole
from gnplace.seed import SeedLike, as_generator

__all__ = [
    "chain_graph", "fork_graph", "mlp_training_graph", "layered_graph", "toy_cluster", "uniform_cluster",
    "mixed_cluster",
]

GiB = 2**30


def _check_size(owner: str, name: str, value: int, minimum: int) -> None:
    """Raise :class:`InvalidArgument` unless ``value`` is an int (not a bool) of at least ``minimum``."""
    if not is_whole(value) or value < minimum:
        raise InvalidArgument(f"{owner}: {name} must be a whole number >= {minimum}, got {value!r}")


def chain_graph(num_ops: int, *, flops: float = 1e9, out_bytes: int = 4_000_000) -> OpGraph:
    """A chain ``op0 -> op1 -> ...`` of equal ops.

    Raises:
        InvalidArgument: if ``num_ops`` is not a whole number >= 0.

    Examples:
        >>> chain_graph(3)
        OpGraph(name='chain3', num_ops=3, num_edges=2, num_groups=3)
    """
    _check_size("chain_graph", "num_ops", num_ops, 0)
    return OpGraph(
        [f"op{i}" for i in range(num_ops)],
        [(i, i + 1) for i in range(num_ops - 1)],
        flops=[flops] * num_ops,
        out_bytes=[out_bytes] * num_ops,
        name=f"chain{num_ops}",
    )


def fork_graph(*, flops: float = 1e9, out_bytes: int = 4_000_000) -> OpGraph:
    """``src`` feeds two branches ``left`` and ``right`` that join in ``sink``.

    Examples:
        >>> fork_graph().node_names
        ('src', 'left', 'right', 'sink')
    """
    return OpGraph(
        ["src", "left", "right", "sink"],
        [(0, 1), (0, 2), (1, 3), (2, 3)],
        flops=[flops] * 4,
        out_bytes=[out_bytes] * 4,
        name="fork",
    )


def mlp_training_graph(
    layers: int = 4, width: int = 1024, batch: int = 256, *, branches: int = 1, dtype_bytes: int = 4
) -> OpGraph:
    """Training graph of ``branches`` parallel MLP towers of ``layers`` Linear+ReLU layers, summed.

    Per layer: ``matmul`` (2 B W W FLOP), ``relu``; backward ``relu_grad``, ``matmul_dgrad`` and
    ``matmul_wgrad`` (2 B W W FLOP each, Paleo's rule); one SGD ``update`` (2 W W FLOP) holding the
    weights. Each layer's ops form one colocation group.

    Raises:
        InvalidArgument: if a size (``layers``, ``width``, ``batch``, ``branches``, ``dtype_bytes``) is not a
            whole number >= 1.

    Examples:
        >>> g = mlp_training_graph(layers=2, width=8, batch=4)
        >>> g.num_ops, g.num_groups
        (14, 3)
    """
    for arg, value in (("layers", layers), ("width", width), ("batch", batch), ("branches", branches),
                       ("dtype_bytes", dtype_bytes)):
        _check_size("mlp_training_graph", arg, value, 1)
    names: list[str] = []
    op_types: list[str] = []
    phase: list[int] = []
    flops: list[float] = []
    out_b: list[int] = []
    param_b: list[int] = []
    group: list[int] = []
    edges: list[tuple[int, int]] = []
    act = batch * width * dtype_bytes
    weight = width * width * dtype_bytes

    def op(name: str, kind: str, ph: int, fl: float, ob: int, grp: int, pb: int = 0) -> int:
        names.append(name)
        op_types.append(kind)
        phase.append(ph)
        flops.append(fl)
        out_b.append(ob)
        param_b.append(pb)
        group.append(grp)
        return len(names) - 1

    inp = op("input", "input", FORWARD, 0.0, act, 0)
    tops: list[int] = []
    chains: list[list[tuple[int, int, int]]] = []
    gid = 1
    for b in range(branches):
        x = inp
        chain = []
        for layer in range(layers):
            mm = op(f"t{b}.l{layer}.matmul", "matmul", FORWARD, 2.0 * batch * width * width, act, gid)
            relu = op(f"t{b}.l{layer}.relu", "relu", FORWARD, float(batch * width), act, gid)
            edges += [(x, mm), (mm, relu)]
            chain.append((mm, relu, gid))
            x = relu
            gid += 1
        tops.append(x)
        chains.append(chain)
    loss = op("loss", "sum", FORWARD, float(batch * width * branches), act, 0)
    edges += [(t, loss) for t in tops]
    for b, chain in enumerate(chains):
        grad = loss
        for layer in reversed(range(layers)):
            mm, relu, grp = chain[layer]
            rg = op(f"t{b}.l{layer}.relu_grad", "relu_grad", BACKWARD, float(batch * width), act, grp)
            dg = op(f"t{b}.l{layer}.matmul_dgrad", "matmul", BACKWARD, 2.0 * batch * width * width, act, grp)
            wg = op(f"t{b}.l{layer}.matmul_wgrad", "matmul", BACKWARD, 2.0 * batch * width * width, weight, grp)
            up = op(f"t{b}.l{layer}.update", "sgd_update", UPDATE, 2.0 * width * width, 0, grp, pb=weight)
            src_act = chain[layer - 1][1] if layer > 0 else inp
            edges += [(grad, rg), (relu, rg), (rg, dg), (rg, wg), (src_act, wg), (wg, up)]
            grad = dg
    return OpGraph(
        names, edges, flops=flops, out_bytes=out_b, param_bytes=param_b, op_types=op_types, phase=phase,
        group=group, name=f"mlp{branches}x{layers}w{width}b{batch}",
    )


def layered_graph(num_ops: int, *, width: int = 8, seed: SeedLike = 0, name: str | None = None) -> OpGraph:
    """A random layered DAG of ``num_ops`` ops, about ``width`` per layer, for benchmarks.

    Each op reads one to three ops of the previous two layers; FLOP are log-uniform in
    [1e6, 1e10] and output bytes in [1e4, 1e7]; every fourth op holds parameters.

    Args:
        num_ops (int): how many ops.
        width (int, optional): ops per layer (default: 8).
        seed (int, np.random.Generator or None, optional): seed (default: 0).
        name (str, optional): graph name (default: ``"layered{num_ops}"``).

    Raises:
        InvalidArgument: if ``num_ops`` is not a whole number >= 0 or ``width`` not one >= 1.

    Examples:
        >>> layered_graph(100, seed=1).num_ops
        100
    """
    _check_size("layered_graph", "num_ops", num_ops, 0)
    _check_size("layered_graph", "width", width, 1)
    rng = as_generator(seed)
    layer_of = np.arange(num_ops) // width
    edges: set[tuple[int, int]] = set()
    for v in range(width, num_ops):
        lo = max(0, (layer_of[v] - 2) * width)
        hi = layer_of[v] * width
        for u in rng.choice(np.arange(lo, hi), size=min(int(rng.integers(1, 4)), hi - lo), replace=False):
            edges.add((int(u), v))
    flops = 10.0 ** rng.uniform(6, 10, num_ops)
    out_bytes = np.round(10.0 ** rng.uniform(4, 7, num_ops))
    param_bytes = np.where(np.arange(num_ops) % 4 == 0, np.round(10.0 ** rng.uniform(4, 7, num_ops)), 0)
    return OpGraph(
        [f"n{i}" for i in range(num_ops)], sorted(edges), flops=flops, out_bytes=out_bytes,
        param_bytes=param_bytes, name=name or f"layered{num_ops}",
    )


def uniform_cluster(
    devices: Sequence[Device], *, bandwidth: float = 12e9, latency: float = 10e-6, name: str = "toy"
) -> Cluster:
    """A cluster of ``devices`` where every link has the same ``bandwidth`` (bytes/s) and ``latency`` (s).

    Examples:
        >>> uniform_cluster([Device("a", "cpu", 1e11, 1e10, 1e9), Device("b", "cpu", 1e11, 1e10, 1e9)])
        Cluster(name='toy', devices=['a', 'b'])
    """
    if isinstance(devices, str | Mapping) or not isinstance(devices, Iterable):  # uniform_cluster(2): a TypeError
        raise InvalidArgument(f"uniform_cluster: devices must be a list of Device (toy_cluster takes a count), "
                              f"got {devices!r}")
    devices = list(devices)
    d = len(devices)
    # views of one number each, which Cluster copies into its matrices: two filled [D, D] matrices more were
    # 256 MiB to write at 4,096 devices (0.7 s of toy_cluster's 2 s in a fresh process on the loaded VM)
    return Cluster(devices, np.broadcast_to(bandwidth, (d, d)), np.broadcast_to(latency, (d, d)), name=name)


def toy_cluster(
    num_devices: int = 2,
    *,
    memory: float = 12 * GiB,
    kind: str = "k80",
    peak_flops: float = 2.8e12,
    mem_bandwidth: float = 240e9,
    launch_overhead: float = 5e-6,
    bandwidth: float = 12e9,
    latency: float = 10e-6,
    prefix: str = "gpu",
    name: str | None = None,
) -> Cluster:
    """``num_devices`` identical devices (K80-like by default) on uniform links.

    Args:
        num_devices (int, optional): how many devices, named ``{prefix}0``, ``{prefix}1``, ... (default: 2).
        memory (float, optional): bytes per device (default: 12 GiB).
        kind (str, optional): device kind, the key of measured op costs (default: ``"k80"``).
        peak_flops (float, optional): FLOP/s per device (default: 2.8e12).
        mem_bandwidth (float, optional): memory bytes/s per device (default: 240e9).
        launch_overhead (float, optional): seconds added to every modelled op (default: 5e-6).
        bandwidth (float, optional): bytes/s of every link (default: 12e9).
        latency (float, optional): seconds per transfer on every link (default: 10e-6).
        prefix (str, optional): device name prefix (default: ``"gpu"``).
        name (str, optional): cluster name (default: ``"toy{num_devices}"``).

    Raises:
        InvalidArgument: if ``num_devices`` is not a whole number >= 1.

    Examples:
        >>> c = toy_cluster(3, memory=GiB)
        >>> c, c.memory.tolist()
        (Cluster(name='toy3', devices=['gpu0', 'gpu1', 'gpu2']), [1073741824.0, 1073741824.0, 1073741824.0])
    """
    _check_size("toy_cluster", "num_devices", num_devices, 1)
    devices = [
        Device(f"{prefix}{k}", kind, peak_flops=peak_flops, mem_bandwidth=mem_bandwidth, memory=memory,
               launch_overhead=launch_overhead)
        for k in range(num_devices)
    ]
    return uniform_cluster(devices, bandwidth=bandwidth, latency=latency, name=name or f"toy{num_devices}")


def mixed_cluster(*, memory: float = 16 * GiB, bandwidth: float = 12e9, latency: float = 10e-6) -> Cluster:
    """A heterogeneous cluster: ``cpu0`` (0.3 TFLOP/s), ``gpu0`` (K80, 2.8 TFLOP/s) and ``gpu1`` (V100, 15 TFLOP/s).

    Examples:
        >>> mixed_cluster().kinds
        ['cpu', 'k80', 'v100']
    """
    devices = [
        Device("cpu0", "cpu", peak_flops=3e11, mem_bandwidth=7e10, memory=memory),
        Device("gpu0", "k80", peak_flops=2.8e12, mem_bandwidth=2.4e11, memory=memory),
        Device("gpu1", "v100", peak_flops=1.5e13, mem_bandwidth=9e11, memory=memory),
    ]
    return uniform_cluster(devices, bandwidth=bandwidth, latency=latency, name="mixed")
