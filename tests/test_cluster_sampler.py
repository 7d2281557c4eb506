"""Random clusters for pretraining: reproducible, varied, valid."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import LINK_KINDS
from gnplace.cluster_sampler import GPU_KINDS, TIGHT_MEMORY, random_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.sim.simulator import Simulator
from gnplace.toy import mlp_training_graph


def test_the_same_seed_gives_the_same_cluster_and_others_differ():
    assert random_cluster(7).fingerprint() == random_cluster(7).fingerprint()
    assert len({random_cluster(s).fingerprint() for s in range(20)}) == 20


def test_clusters_cover_sizes_kinds_memories_and_links():
    clusters = [random_cluster(s) for s in range(200)]
    sizes = {c.num_devices for c in clusters}
    assert sizes == set(range(2, 9))
    kinds = {k for c in clusters for k in c.kinds}
    assert set(GPU_KINDS) | {"cpu"} == kinds
    assert any(len(set(c.kinds) - {"cpu"}) > 1 for c in clusters)  # mixed GPU generations
    tight = [c for c in clusters if any(m in TIGHT_MEMORY for m in c.memory)]
    assert 0.1 < len(tight) / len(clusters) < 0.4
    speeds = {round(d.peak_flops / 1e9) for c in clusters for d in c.devices if d.kind == "v100"}
    assert len(speeds) > 10  # speeds are scaled, not only the table's
    bandwidths = {float(b) for c in clusters for b in c.bandwidth[~np.eye(c.num_devices, dtype=bool)]}
    assert {LINK_KINDS["nvlink2"]["bandwidth"], LINK_KINDS["ethernet20g"]["bandwidth"]} <= bandwidths


def test_a_cpu_talks_to_its_gpus_over_pcie_or_the_network():
    for seed in range(100):
        c = random_cluster(seed, cpu_probability=1.0)
        cpu = c.kinds.index("cpu")
        others = np.delete(c.bandwidth[cpu], cpu)
        assert set(others.tolist()) <= {LINK_KINDS[k]["bandwidth"] for k in ("pcie3", "infiniband", "ethernet20g")}


def test_device_range_is_respected_and_checked():
    assert all(random_cluster(s, min_devices=3, max_devices=3).num_devices == 3 for s in range(10))
    with pytest.raises(InvalidArgument):
        random_cluster(0, min_devices=4, max_devices=2)


def test_a_random_cluster_times_a_placement():
    graph = mlp_training_graph(layers=3, width=256, batch=32)
    cluster = random_cluster(11)
    devices = np.arange(graph.num_ops) % cluster.num_devices
    assert Simulator().time(graph, cluster, devices).step_time > 0


def test_a_cluster_does_not_depend_on_the_string_hash_seed():
    """Each process hashes strings with its own seed: nothing drawn may follow a set of names' order."""
    import os
    import subprocess
    import sys

    script = ("from gnplace.cluster_sampler import random_cluster; "
              "print([random_cluster(1000 + i).fingerprint() for i in range(12)])")
    prints = {
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": str(hash_seed)}).stdout
        for hash_seed in (0, 1, 2, 3)
    }
    assert len(prints) == 1


@pytest.mark.parametrize("seed", [-1, True, None, 1.5, "3", np.random.default_rng(0)])
def test_a_seed_that_is_not_a_whole_number_from_0_is_refused(seed):
    # -1 and 1.5 were numpy errors; True named the cluster 'randTrue', None drew a fresh 'randNone' every call
    with pytest.raises(InvalidArgument, match="random_cluster: seed must be a whole number >= 0"):
        random_cluster(seed)


def test_a_numpy_integer_seed_is_the_same_as_an_int():
    assert random_cluster(np.int64(5)).fingerprint() == random_cluster(5).fingerprint()
    assert random_cluster(np.int64(5)).name == "rand5"


@pytest.mark.parametrize("kwargs", [{"min_devices": 2.5, "max_devices": 4}, {"min_devices": True, "max_devices": True},
                                    {"max_devices": 4.0}, {"tight_probability": "0.25"},
                                    {"cpu_probability": float("nan")}, {"cpu_probability": -0.5},
                                    {"tight_probability": 2}, {"min_devices": 0, "max_devices": 0}])
def test_bad_device_counts_and_probabilities_are_refused(kwargs):
    with pytest.raises(InvalidArgument, match="random_cluster"):
        random_cluster(0, **kwargs)


def test_a_one_device_cluster_is_a_gpu_however_likely_a_cpu_is():
    """A CPU is one device among at least two: a cluster of one device is a GPU, never a lone CPU."""
    for seed in range(10):
        (device,) = random_cluster(seed, min_devices=1, max_devices=1, cpu_probability=1.0).devices
        assert device.kind in GPU_KINDS


def test_a_cpu_reaches_its_gpus_over_pcie3_or_the_network_never_nvlink():
    allowed = {LINK_KINDS[k]["bandwidth"] for k in ("pcie3", "infiniband", "ethernet20g")}
    for seed in range(20):
        c = random_cluster(seed, min_devices=2, max_devices=8, cpu_probability=1.0)
        cpu = c.device_names.index("cpu0")
        for other in range(c.num_devices):
            if other != cpu:
                assert c.bandwidth[cpu, other] in allowed and c.bandwidth[other, cpu] in allowed


def test_devices_kinds_speeds_memories_and_hosts_are_drawn_as_documented():
    """The module docstring's ranges, each at its ends: one to three GPU kinds sitting in runs, each kind's peak FLOP/s
    and memory bandwidth scaled by two factors of [0.7, 1.3], tight memories of 0.75 to 3 GiB, and hosts of
    consecutive devices (mutants drawing at most two kinds, interleaving them, one factor for both rates, wider
    factors, a 0.5 GiB tight memory or unsorted hosts passed)."""
    from gnplace.cluster import DEVICE_KINDS

    assert TIGHT_MEMORY == (0.75 * 2**30, 2**30, 1.5 * 2**30, 2 * 2**30, 3 * 2**30)
    clusters = [random_cluster(s) for s in range(200)]
    assert max(len(set(c.kinds) - {"cpu"}) for c in clusters) == 3
    flops, bandwidth, tight = [], [], set()
    for c in clusters:
        gpus = [d for d in c.devices if d.kind != "cpu"]
        changes = sum(a.kind != b.kind for a, b in zip(gpus, gpus[1:]))
        assert changes <= 2, c.kinds  # at most three runs of one kind each
        for d in gpus:
            flops.append(d.peak_flops / DEVICE_KINDS[d.kind]["peak_flops"])
            bandwidth.append(d.mem_bandwidth / DEVICE_KINDS[d.kind]["mem_bandwidth"])
            if d.memory != DEVICE_KINDS[d.kind]["memory"]:
                tight.add(d.memory)
        remote = c.latency >= LINK_KINDS["infiniband"]["latency"]  # another host (intra-host links are faster)
        for a in range(c.num_devices):
            for b in range(a + 1, c.num_devices):
                if not remote[a, b]:
                    assert not remote[a, a:b + 1].any(), c.name  # a host's devices are consecutive
    for factors in (flops, bandwidth):
        assert 0.7 <= min(factors) < 0.72 and 1.28 < max(factors) <= 1.3
    assert not np.allclose(flops, bandwidth)
    assert tight == set(TIGHT_MEMORY)
