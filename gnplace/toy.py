"""Small graphs for examples, doctests, tests and benchmarks.

``chain_graph`` and ``fork_graph`` are hand-sized; ``mlp_training_graph`` is a real training
graph of a multi-layer perceptron with exact FLOP and byte counts (forward, data- and
weight-gradient ops, SGD updates, colocation groups); ``layered_graph`` draws a random DAG of a
chosen size for benchmarks.
"""

from __future__ import annotations

import numpy as np

from gnplace.graph import BACKWARD, FORWARD, UPDATE, OpGraph
from gnplace.seed import SeedLike, as_generator

__all__ = ["chain_graph", "fork_graph", "mlp_training_graph", "layered_graph"]


def chain_graph(num_ops: int, *, flops: float = 1e9, out_bytes: int = 4_000_000) -> OpGraph:
    """A chain ``op0 -> op1 -> ...`` of equal ops.

    Examples:
        >>> chain_graph(3)
        OpGraph(name='chain3', num_ops=3, num_edges=2, num_groups=3)
    """
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

    Examples:
        >>> g = mlp_training_graph(layers=2, width=8, batch=4)
        >>> g.num_ops, g.num_groups
        (14, 3)
    """
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
        seed (int, np.random.Generator or None, optional): seed (default: 0).

    Examples:
        >>> layered_graph(100, seed=1).num_ops
        100
    """
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
