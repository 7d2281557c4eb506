"""Random clusters for pretraining: 2 to 8 devices of mixed kinds, speeds, memories and links.

A policy that should place graphs on clusters it has never seen is pretrained on many clusters,
not only the presets. :func:`random_cluster` draws one from a seed:

* **devices**: ``min_devices`` to ``max_devices`` of one to three GPU kinds of
  :data:`~gnplace.cluster.DEVICE_KINDS`, plus at most one CPU, each kind's peak FLOP/s and memory
  bandwidth scaled by a factor in ``[0.7, 1.3]`` so that speeds are not only the table's;
* **memory**: the kind's, or with probability ``tight_probability`` a small one (0.75 to 3 GiB per
  GPU) so that the larger shipped graphs fit only when split, as on the ``tight4`` preset;
* **links**: devices spread over one to three hosts; inside a host one of PCIe 2, PCIe 3 or
  NVLink 2, between hosts InfiniBand or 20 Gb Ethernet (:data:`~gnplace.cluster.LINK_KINDS`).

The same seed gives the same cluster (the name is ``rand<seed>``).
"""

from __future__ import annotations

import numpy as np

from gnplace.cluster import DEVICE_KINDS, LINK_KINDS, Cluster, Device
from gnplace.exceptions import InvalidArgument
from gnplace.limits import is_number, is_whole

__all__ = ["random_cluster", "GPU_KINDS", "TIGHT_MEMORY"]

#: GPU kinds random clusters draw from.
GPU_KINDS: tuple[str, ...] = ("k80", "k40", "titanx", "p100", "v100")
#: Memory per GPU of a memory-tight random cluster, bytes.
TIGHT_MEMORY: tuple[float, ...] = (0.75 * 2**30, 2**30, 1.5 * 2**30, 2 * 2**30, 3 * 2**30)
_INTRA = ("pcie2", "pcie3", "nvlink2")
_INTER = ("infiniband", "ethernet20g")


def random_cluster(
    seed: int, *, min_devices: int = 2, max_devices: int = 8, tight_probability: float = 0.25,
    cpu_probability: float = 0.25,
) -> Cluster:
    """A random cluster drawn from ``seed`` (see the module docstring).

    Args:
        seed (int): the draw; also names the cluster ``rand<seed>``.
        min_devices (int, optional): fewest devices (default: 2).
        max_devices (int, optional): most devices (default: 8).
        tight_probability (float, optional): chance that GPUs get a small memory (default: 0.25).
        cpu_probability (float, optional): chance that one device is a CPU (default: 0.25).

    Raises:
        InvalidArgument: if ``seed`` is not a whole number >= 0, the device range is not of whole numbers,
            is empty or starts below 1, or a probability is not a number in ``[0, 1]``.

    Examples:
        >>> c = random_cluster(3)
        >>> c.name, 2 <= c.num_devices <= 8
        ('rand3', True)
        >>> random_cluster(3).fingerprint() == c.fingerprint()
        True
    """
    if not is_whole(seed) or seed < 0:
        raise InvalidArgument(f"random_cluster: seed must be a whole number >= 0, got {seed!r}")
    if not is_whole(min_devices) or not is_whole(max_devices) or not 1 <= min_devices <= max_devices:
        raise InvalidArgument(f"random_cluster needs 1 <= min_devices <= max_devices (whole numbers), got "
                              f"{min_devices!r}, {max_devices!r}")
    for name, p in (("tight_probability", tight_probability), ("cpu_probability", cpu_probability)):
        numeric = is_number(p)
        if not numeric or not 0 <= p <= 1:  # NaN fails the comparison
            raise InvalidArgument(f"random_cluster: {name} must be a number in [0, 1], got {p!r}")
    seed, min_devices, max_devices = int(seed), int(min_devices), int(max_devices)
    rng = np.random.default_rng(seed)
    count = int(rng.integers(min_devices, max_devices + 1))
    with_cpu = count >= 2 and rng.random() < cpu_probability
    gpus = count - int(with_cpu)
    kinds = [str(k) for k in rng.choice(GPU_KINDS, size=int(rng.integers(1, 4)), replace=True)]
    tight = rng.random() < tight_probability
    tight_memory = float(rng.choice(TIGHT_MEMORY))
    # per kind, in order of first appearance (iterating a set of strings would follow PYTHONHASHSEED)
    scale = {k: (float(rng.uniform(0.7, 1.3)), float(rng.uniform(0.7, 1.3))) for k in dict.fromkeys(kinds)}
    devices: list[Device] = []
    for i in range(gpus):
        kind = kinds[i * len(kinds) // gpus]  # kinds in runs, as GPUs of one generation sit together
        spec = dict(DEVICE_KINDS[kind])
        spec["peak_flops"] *= scale[kind][0]
        spec["mem_bandwidth"] *= scale[kind][1]
        if tight:
            spec["memory"] = tight_memory
        devices.append(Device(name=f"gpu{i}", kind=kind, **spec))
    if with_cpu:
        devices.append(Device(name="cpu0", kind="cpu", **DEVICE_KINDS["cpu"]))
    hosts = int(rng.integers(1, min(3, count) + 1))
    host = np.sort(rng.integers(0, hosts, size=count))
    intra = [LINK_KINDS[str(rng.choice(_INTRA))] for _ in range(hosts)]
    inter = LINK_KINDS[str(rng.choice(_INTER))]
    pcie = LINK_KINDS["pcie3"]
    bandwidth = np.empty((count, count))
    latency = np.empty((count, count))
    for a in range(count):
        for b in range(count):
            if host[a] != host[b]:
                link = inter
            elif devices[a].kind == "cpu" or devices[b].kind == "cpu":
                link = pcie  # a CPU reaches its GPUs over PCIe, never NVLink
            else:
                link = intra[host[a]]
            bandwidth[a, b], latency[a, b] = link["bandwidth"], link["latency"]
    return Cluster(devices, bandwidth, latency, name=f"rand{seed}")
