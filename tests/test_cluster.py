"""Tests of ``gnplace.cluster``: presets, YAML files and their error messages."""

from __future__ import annotations

import dataclasses
import re
import textwrap

import numpy as np
import pytest

from gnplace.cluster import (
    DEVICE_KINDS,
    LINK_KINDS,
    Cluster,
    Device,
    cluster_from_dict,
    load_cluster,
    off_diagonal,
    preset_names,
)
from gnplace.exceptions import GnplaceError, InvalidCluster, UnknownName
from gnplace.placers import get_placer
from gnplace.sim import Simulator
from gnplace.toy import layered_graph

GiB = 2**30
PCIE3 = LINK_KINDS["pcie3"]
NVLINK = LINK_KINDS["nvlink2"]


def write(tmp_path, text: str, name: str = "c.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load_error(path) -> str:
    with pytest.raises(InvalidCluster) as info:
        load_cluster(path)
    message = str(info.value)
    assert "\n" not in message, message
    return message


# ------------------------------------------------------------------------------- presets
def test_preset_names():
    assert preset_names() == ["cpu_gpu", "k80x2", "k80x4", "tight4", "v100x8"]


@pytest.mark.parametrize(
    "preset, names, kind",
    [
        ("k80x2", ["gpu0", "gpu1"], ["k80"] * 2),
        ("k80x4", ["gpu0", "gpu1", "gpu2", "gpu3"], ["k80"] * 4),
        ("v100x8", [f"gpu{i}" for i in range(8)], ["v100"] * 8),
        ("cpu_gpu", ["cpu0", "gpu0"], ["cpu", "p100"]),
        ("tight4", ["gpu0", "gpu1", "gpu2", "gpu3"], ["k80"] * 4),
    ],
)
def test_presets_load(preset, names, kind):
    c = load_cluster(preset)
    assert isinstance(c, Cluster)
    assert c.name == preset
    assert c.num_devices == len(names)
    assert c.device_names == names
    assert c.kinds == kind
    assert repr(c) == f"Cluster(name={preset!r}, devices={names})"
    assert c.bandwidth.shape == c.latency.shape == (len(names), len(names))
    np.testing.assert_array_equal(c.bandwidth, c.bandwidth.T)
    np.testing.assert_array_equal(c.latency, c.latency.T)
    assert np.all(np.isinf(np.diag(c.bandwidth))) and np.all(np.diag(c.latency) == 0)
    assert not c.bandwidth.flags.writeable and not c.latency.flags.writeable


@pytest.mark.parametrize("preset", ["k80x2", "k80x4"])
def test_k80_presets_use_placeto_channel(preset):
    c = load_cluster(preset)
    off = ~np.eye(c.num_devices, dtype=bool)
    assert np.all(c.bandwidth[off] == 7.6e9)
    assert np.all(c.latency[off] == 25e-6)
    assert all(d.memory == 12 * GiB and d.peak_flops == 2.8e12 for d in c.devices)


def test_v100x8_nvlink_inside_groups_of_four_pcie_between():
    c = load_cluster("v100x8")
    for a in range(8):
        for b in range(8):
            if a == b:
                continue
            link = NVLINK if a // 4 == b // 4 else PCIE3
            assert c.bandwidth[a, b] == link["bandwidth"], (a, b)
            assert c.latency[a, b] == link["latency"], (a, b)
    assert c.bandwidth[0, 1] == 40e9 and c.bandwidth[0, 4] == 12e9
    assert c.bandwidth[3, 2] > c.bandwidth[3, 4]


def test_tight4_has_one_gib_per_device():
    c = load_cluster("tight4")
    assert c.memory.tolist() == [GiB] * 4
    assert all(d.peak_flops == DEVICE_KINDS["k80"]["peak_flops"] for d in c.devices)
    assert c.bandwidth[0, 1] == PCIE3["bandwidth"]


def test_cpu_gpu_devices():
    c = load_cluster("cpu_gpu")
    cpu, gpu = c.devices
    assert cpu.peak_flops == 289e9 and cpu.memory == 64 * GiB
    assert gpu.peak_flops == 9.3e12 and gpu.memory == 16 * GiB
    assert c.bandwidth[0, 1] == c.bandwidth[1, 0] == PCIE3["bandwidth"]


def test_preset_by_yaml_file_name_in_package(tmp_path):
    from importlib import resources

    text = (resources.files("gnplace") / "clusters" / "v100x8.yaml").read_text()
    path = tmp_path / "copy.yaml"
    path.write_text(text)
    a, b = load_cluster(path), load_cluster("v100x8")
    assert a.device_names == b.device_names
    np.testing.assert_array_equal(a.bandwidth, b.bandwidth)
    np.testing.assert_array_equal(a.latency, b.latency)


def test_load_cluster_passes_cluster_through():
    c = load_cluster("k80x2")
    assert load_cluster(c) is c


def test_a_cluster_loaded_twice_copied_or_unpickled_is_equal_and_hashes_alike():
    """Clusters compared by identity: ``load_cluster("k80x4") == load_cluster("k80x4")`` and a worker's unpickled
    copy were unequal, though their placements compare by the clusters' fingerprints."""
    import copy
    import pickle

    c = load_cluster("k80x4")
    for twin in (load_cluster("k80x4"), copy.deepcopy(c), pickle.loads(pickle.dumps(c))):
        assert twin == c and hash(twin) == hash(c) and {c: 1}[twin] == 1
    assert c != load_cluster("k80x2") and c != "k80x4"
    renamed = Cluster(list(c.devices), c.bandwidth, c.latency, name="other")
    slower = Cluster(list(c.devices), c.bandwidth / 2, c.latency, name="k80x4")
    assert c != renamed and c != slower and len({c, load_cluster("k80x4"), renamed, slower}) == 3


def test_a_folder_named_like_a_preset_does_not_hide_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k80x4").mkdir()  # one output folder per cluster
    assert load_cluster("k80x4").device_names == load_cluster("k80x2").device_names + ["gpu2", "gpu3"]
    (tmp_path / "results").mkdir()
    with pytest.raises(InvalidCluster, match="is a folder, not a cluster file"):
        load_cluster("results")


def test_unknown_keys_of_mixed_types_are_one_error(tmp_path):
    path = tmp_path / "c.yaml"  # YAML 1.1 reads `on` as True: a typo beside it compared a bool with a str
    path.write_text("name: c\ndevices:\n  - {name: gpu, count: 2, kind: k80}\nlinks:\n  default: pcie3\n"
                    "  on: nvlink2\n  group: []\n")
    with pytest.raises(InvalidCluster, match="links: unknown key True"):
        load_cluster(path)


def test_unknown_preset():
    message = load_error("k80x3")
    assert message == (
        "unknown cluster 'k80x3': give a YAML file or one of cpu_gpu, k80x2, k80x4, tight4, v100x8"
    )


# ------------------------------------------------------------------------------- cluster object
def test_cluster_helpers():
    c = load_cluster("cpu_gpu")
    assert c.index("gpu0") == 1
    with pytest.raises(UnknownName, match=r"^cluster 'cpu_gpu' has no device named 'gpu7' \(its devices: cpu0, gpu0\)$"):
        c.index("gpu7")  # it was a bare KeyError: 'gpu7'
    assert c.transfer_time(0, 0, 1e9) == 0.0
    assert c.transfer_time(0, 1, 12e9) == pytest.approx(1.0 + 10e-6)
    assert c.memory.dtype == np.float64
    assert c.devices[1].effective_flops == pytest.approx(9.3e12 * 0.55)


def test_transfer_time_placeto_channel():
    c = load_cluster("k80x2")
    assert c.transfer_time(1, 0, 7.6e9) == pytest.approx(1.000025)


@pytest.mark.parametrize("args, message", [
    ((0, 1, -5.0), "num_bytes must be a finite number >= 0 bytes, got -5.0"),  # took less than the latency
    ((0, 1, float("nan")), "num_bytes must be a finite number >= 0 bytes, got nan"),
    ((0, 1, "5"), "num_bytes must be a finite number >= 0 bytes, got '5'"),
    ((-1, 0, 5.0), "src must be a device index 0..1 of cluster 'k80x2', got -1"),  # read the last device's link
    ((0, 2, 5.0), "dst must be a device index 0..1 of cluster 'k80x2', got 2"),  # an IndexError
    ((0.0, 1, 5.0), "src must be a device index"),
    ((0, 1, 10**400), "num_bytes must be a finite number >= 0 bytes, got 1000"),  # an OverflowError of math.isfinite
])
def test_transfer_time_refuses_what_names_no_link_or_no_bytes(args, message):
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match=re.escape(message)):
        load_cluster("k80x2").transfer_time(*args)
    assert load_cluster("k80x2").transfer_time(np.int64(0), np.int64(1), np.float32(0)) == pytest.approx(25e-6)


def test_device_is_frozen():
    d = load_cluster("k80x2").devices[0]
    with pytest.raises(AttributeError):
        d.memory = 1  # type: ignore[misc]


def _dev(name: str) -> Device:
    return Device(name=name, kind="k80", peak_flops=1e12, mem_bandwidth=1e11, memory=1e9)


@pytest.mark.parametrize(
    "devices, bandwidth, latency, match",
    [
        ([], [], [], r"^cluster 'c' has no devices$"),
        ([_dev("a"), _dev("a")], np.ones((2, 2)), np.zeros((2, 2)), r"^cluster 'c': device name 'a' is used twice$"),
        ([_dev("a"), _dev("b")], np.ones((3, 3)), np.zeros((2, 2)), r"bandwidth matrix has shape \(3, 3\), expected \(2, 2\)"),
        ([_dev("a"), _dev("b")], np.ones((2, 2)), np.zeros(2), r"latency matrix has shape \(2,\), expected \(2, 2\)"),
        ([_dev("a"), _dev("b")], [[1, 0], [1, 1]], np.zeros((2, 2)), r"every link needs a positive, finite bandwidth"),
        ([_dev("a"), _dev("b")], [[1, np.nan], [1, 1]], np.zeros((2, 2)), r"every link needs a positive, finite bandwidth"),
        ([_dev("a"), _dev("b")], np.full((2, 2), 1e9), [[0, -1], [0, 0]], r"every link needs a finite latency >= 0"),
        ([_dev("a"), _dev("b")], np.full((2, 2), 1e9), [[0, np.inf], [0, 0]], r"every link needs a finite latency >= 0"),
        ([_dev("a"), _dev("b")], [[1, np.inf], [1, 1]], np.zeros((2, 2)), r"every link needs a positive, finite band"),
        ([_dev("a"), dataclasses.replace(_dev("b"), memory=np.inf)], np.ones((2, 2)), np.zeros((2, 2)),
         r"^cluster 'c': device 'b': memory must be positive and finite, got inf$"),
        ([dataclasses.replace(_dev("a"), peak_flops=np.inf), _dev("b")], np.ones((2, 2)), np.zeros((2, 2)),
         r"^cluster 'c': device 'a': peak_flops must be positive and finite, got inf$"),
    ],
)
def test_cluster_constructor_validation(devices, bandwidth, latency, match):
    with pytest.raises(InvalidCluster, match=match):
        Cluster(devices, bandwidth, latency, name="c")


def test_cluster_constructor_ignores_diagonal():
    c = Cluster([_dev("a"), _dev("b")], [[0, 2e9], [3e9, 0]], [[5, 1], [1, 5]])
    assert c.bandwidth[0, 0] == np.inf and c.latency[0, 0] == 0
    assert c.bandwidth[0, 1] == 2e9 and c.bandwidth[1, 0] == 3e9


# ------------------------------------------------------------------------------- YAML files
def test_yaml_with_unit_strings(tmp_path):
    path = write(
        tmp_path,
        """
        name: mine
        description: two custom devices and a host
        devices:
          - {name: acc, count: 2, kind: custom, peak_flops: 2.8 TFLOP/s, mem_bandwidth: 240 GB/s,
             memory: 12 GiB, flops_efficiency: 0.45, mem_efficiency: 0.7, launch_overhead: 5.7 us}
          - {name: host, kind: CPU, memory: 32 GiB, message_cpu: 0.6 ms}
        links:
          default: {bandwidth: 128 Gbit/s, latency: 25 us}
          groups:
            - {devices: [acc0, acc1], link: nvlink2}
          pairs:
            - {between: [host, acc1], link: {bandwidth: 7.6 GB/s}}
        """,
    )
    c = load_cluster(path)
    assert c.name == "mine"
    assert c.device_names == ["acc0", "acc1", "host"]
    assert c.kinds == ["custom", "custom", "cpu"]
    acc = c.devices[0]
    assert acc == Device("acc0", "custom", 2.8e12, 240e9, 12 * GiB, 0.45, 0.7, 5.7e-6)
    host = c.devices[2]
    assert host.memory == 32 * GiB and host.peak_flops == DEVICE_KINDS["cpu"]["peak_flops"]
    assert host.launch_overhead == DEVICE_KINDS["cpu"]["launch_overhead"]
    assert host.message_cpu == pytest.approx(6e-4) and acc.message_cpu == 0.0
    assert c.bandwidth[0, 1] == c.bandwidth[1, 0] == NVLINK["bandwidth"]
    assert c.latency[0, 1] == NVLINK["latency"]
    assert c.bandwidth[0, 2] == c.bandwidth[2, 0] == 16e9
    assert c.latency[0, 2] == 25e-6
    assert c.bandwidth[1, 2] == c.bandwidth[2, 1] == 7.6e9
    assert c.latency[1, 2] == 0.0


def test_yaml_numbers_without_units(tmp_path):
    path = write(
        tmp_path,
        """
        devices:
          - {name: d, count: 2, peak_flops: 1e12, mem_bandwidth: 1e11, memory: 1073741824}
        links:
          default: {bandwidth: 1e9, latency: 1e-5}
        """,
        name="plain.yml",
    )
    c = load_cluster(str(path))
    assert c.name == "plain"  # from the file name
    assert c.kinds == ["custom", "custom"]
    assert c.devices[0].memory == GiB and c.devices[0].flops_efficiency == 0.5
    assert c.bandwidth[0, 1] == 1e9 and c.latency[1, 0] == 1e-5


def test_pairs_override_groups(tmp_path):
    path = write(
        tmp_path,
        """
        devices: [{name: g, count: 3, kind: v100}]
        links:
          default: pcie3
          groups: [{devices: [g0, g1, g2], link: nvlink2}]
          pairs: [{between: [g2, g0], link: pcie2}]
        """,
    )
    c = load_cluster(path)
    assert c.bandwidth[0, 1] == NVLINK["bandwidth"]
    assert c.bandwidth[0, 2] == c.bandwidth[2, 0] == LINK_KINDS["pcie2"]["bandwidth"]


def test_empty_groups_and_pairs_are_fine(tmp_path):
    path = write(tmp_path, "devices: [{name: g0, kind: k80}]\nlinks: {default: placeto, groups: [], pairs:}\n")
    assert load_cluster(path).num_devices == 1


def test_one_device_needs_no_links_and_more_devices_do(tmp_path):
    """A cluster of one device has no pair to link: without ``links`` it is the same cluster as with them."""
    alone = load_cluster(write(tmp_path, "name: one\ndevices: [{name: g0, kind: v100}]\n"))
    linked = load_cluster(write(tmp_path, "name: one\ndevices: [{name: g0, kind: v100}]\nlinks: {default: pcie3}\n",
                                name="linked.yaml"))
    assert alone.device_names == ["g0"] and alone.fingerprint() == linked.fingerprint()
    graph = layered_graph(40)
    placement = get_placer("auto").place(graph, alone, seed=0)
    assert Simulator().time(graph, alone, placement).step_time == Simulator().time(graph, linked, placement).step_time
    with pytest.raises(InvalidCluster, match=r"missing key 'links' \(the 2 devices need at least links.default"):
        load_cluster(write(tmp_path, "devices: [{name: g, count: 2, kind: v100}]\n", name="two.yaml"))


def test_path_without_yaml_suffix_is_read_if_it_exists(tmp_path):
    path = write(tmp_path, "devices: [{name: g0, kind: k80}]\nlinks: {default: placeto}\n", name="cluster.txt")
    assert load_cluster(path).device_names == ["g0"]


# ------------------------------------------------------------------------------- malformed YAML
GOOD_DEVICES = "devices: [{name: gpu, count: 2, kind: k80}]\n"
GOOD_LINKS = "links: {default: pcie3}\n"


@pytest.mark.parametrize(
    "text, key, problem",
    [
        # top level
        (GOOD_DEVICES + GOOD_LINKS + "colour: red\n", "", r"unknown key 'colour' \(expected one of description, devices, links, name\)"),
        (GOOD_LINKS, "", r"missing key 'devices'"),
        (GOOD_DEVICES, "", r"missing key 'links'"),
        ("- {name: gpu0}\n- {name: gpu1}\n", "", r"expected a mapping, got list"),
        ("", "", r"expected a mapping, got nothing \(empty\)"),
        ("just text\n", "", r"expected a mapping, got str"),
        # devices
        ("devices: []\n" + GOOD_LINKS, "", r"'devices' must be a non-empty list"),
        ("devices: {name: gpu}\n" + GOOD_LINKS, "", r"'devices' must be a non-empty list"),
        ("devices: [gpu0]\n" + GOOD_LINKS, "devices[0]", r"expected a mapping, got str"),
        ("devices: [{kind: k80}]\n" + GOOD_LINKS, "devices[0]", r"missing key 'name'"),
        ("devices: [{name: g, kind: k80, colour: red}]\n" + GOOD_LINKS, "devices[0]", r"unknown key 'colour' \(expected one of "),
        ("devices: [{name: g, kind: tpu}]\n" + GOOD_LINKS, "devices[0].kind", r"unknown device kind 'tpu' \(known: k80, k40, titanx, p100, v100, cpu; or give every field\)"),
        ("devices: [{name: g, kind: k80}, {name: h, kind: a100}]\n" + GOOD_LINKS, "devices[1].kind", r"unknown device kind 'a100'"),
        ("devices: [{name: g, peak_flops: 1e12, memory: 1e9}]\n" + GOOD_LINKS, "devices[0]", r"missing key 'mem_bandwidth' \(give it, or a known kind: "),
        ("devices: [{name: g, kind: k80, memory: -1 GiB}]\n" + GOOD_LINKS, "devices[0].memory", r"must be positive and finite, got -1073741824\.0"),
        ("devices: [{name: g, kind: k80, memory: 0}]\n" + GOOD_LINKS, "devices[0].memory", r"must be positive and finite, got 0\.0"),
        ("devices: [{name: g, kind: k80, memory: 12 GB/s}]\n" + GOOD_LINKS, "devices[0].memory", r"expected a size such as '16 GiB', got '12 GB/s' \(unknown unit 'GB/s'\)"),
        ("devices: [{name: g, kind: k80, memory: lots}]\n" + GOOD_LINKS, "devices[0].memory", r"expected a size such as 16e9 or '16 GiB', got 'lots'"),
        ("devices: [{name: g, kind: k80, peak_flops: 3 TB}]\n" + GOOD_LINKS, "devices[0].peak_flops", r"expected a compute rate such as '2\.8 TFLOP/s', got '3 TB' \(unknown unit 'TB'\)$"),
        ("devices: [{name: g, kind: k80, mem_bandwidth: 240 GB}]\n" + GOOD_LINKS, "devices[0].mem_bandwidth", r"expected a bandwidth such as '16 GB/s', got '240 GB' \(unknown unit 'GB'\)$"),
        ("devices: [{name: g, kind: k80, launch_overhead: 5 min}]\n" + GOOD_LINKS, "devices[0].launch_overhead", r"expected a duration such as '25 us', got '5 min' \(unknown unit 'min'\)$"),
        ("devices: [{name: g, kind: k80, launch_overhead: -5 us}]\n" + GOOD_LINKS, "devices[0].launch_overhead", r"must be >= 0, got -5e-06"),
        ("devices: [{name: g, kind: k80, message_cpu: -5 us}]\n" + GOOD_LINKS, "devices[0].message_cpu", r"must be >= 0, got -5e-06"),
        ("devices: [{name: g, kind: k80, message_cpu: soon}]\n" + GOOD_LINKS, "devices[0].message_cpu", r"expected a duration"),
        ("devices: [{name: g, kind: k80, flops_efficiency: 1.5}]\n" + GOOD_LINKS, "devices[0].flops_efficiency", r"must be in \(0, 1\], got 1\.5"),
        ("devices: [{name: g, kind: k80, mem_efficiency: 0}]\n" + GOOD_LINKS, "devices[0].mem_efficiency", r"must be in \(0, 1\], got 0\.0"),
        ("devices: [{name: g, kind: k80, flops_efficiency: half}]\n" + GOOD_LINKS, "devices[0].flops_efficiency", r"must be a number in \(0, 1\] such as 0\.5, got 'half'$"),
        ("devices: [{name: g, kind: k80, mem_efficiency: null}]\n" + GOOD_LINKS, "devices[0].mem_efficiency", r"must be a number in \(0, 1\] such as 0\.5, got None$"),
        ("devices: [{name: g, kind: k80, count: 0}]\n" + GOOD_LINKS, "devices[0].count", r"must be a positive integer, got 0"),
        ("devices: [{name: g, kind: k80, count: two}]\n" + GOOD_LINKS, "devices[0].count", r"must be a positive integer, got 'two'"),
        ("devices: [{name: g, kind: k80, count: 1.5}]\n" + GOOD_LINKS, "devices[0].count", r"must be a positive integer, got 1\.5"),
        ("devices: [{name: g, kind: k80, count: true}]\n" + GOOD_LINKS, "devices[0].count", r"must be a positive integer, got True"),
        ("devices: [{name: gpu, count: 2, kind: k80}, {name: gpu1, kind: k80}]\n" + GOOD_LINKS, "", r"device name 'gpu1' is used twice"),
        ("devices: [{name: a, kind: k80}, {name: a, kind: v100}]\n" + GOOD_LINKS, "", r"device name 'a' is used twice"),
        ("devices: [{name: '', kind: k80}]\n" + GOOD_LINKS, "devices[0].name", r"must be a non-empty name without surrounding spaces, got ''"),
        ("devices: [{name: ' gpu', kind: k80}]\n" + GOOD_LINKS, "devices[0].name", r"must be a non-empty name without surrounding spaces, got ' gpu'"),
        ("devices: [{name: 7, kind: k80}]\n" + GOOD_LINKS, "devices[0].name", r"must be a non-empty name without surrounding spaces, got 7"),
        ("devices: [{name: g, kind: k80, memory: 1e19}]\n" + GOOD_LINKS, "devices[0].memory", r"1e\+19 bytes is over the limit of 2\*\*62"),
        ("name: [a, b]\n" + GOOD_DEVICES + GOOD_LINKS, "name", r"expected a non-empty string, got \['a', 'b'\]"),
        ("name: ''\n" + GOOD_DEVICES + GOOD_LINKS, "name", r"expected a non-empty string, got ''"),
        # links
        (GOOD_DEVICES + "links: pcie3\n", "links", r"expected a mapping, got str"),
        (GOOD_DEVICES + "links:\n", "links", r"expected a mapping, got nothing \(empty\)"),
        (GOOD_DEVICES + "links: {groups: []}\n", "links", r"missing key 'default'"),
        (GOOD_DEVICES + "links: {default: pcie3, extra: 1}\n", "links", r"unknown key 'extra' \(expected one of default, groups, pairs\)"),
        (GOOD_DEVICES + "links: {default: pcie9}\n", "links.default", r"unknown link kind 'pcie9' \(known: placeto, pcie3, pcie2, nvlink2, infiniband, ethernet20g\)"),
        (GOOD_DEVICES + "links: {default: {latency: 1 us}}\n", "links.default", r"missing key 'bandwidth'"),
        (GOOD_DEVICES + "links: {default: {bandwidth: 1 GB/s, jitter: 1}}\n", "links.default", r"unknown key 'jitter'"),
        (GOOD_DEVICES + "links: {default: {bandwidth: 1 GB}}\n", "links.default", r"expected a bandwidth such as '16 GB/s', got '1 GB' \(unknown unit 'GB'\)$"),
        (GOOD_DEVICES + "links: {default: {bandwidth: 0 GB/s}}\n", "links.default.bandwidth", r"must be positive, got 0\.0"),
        (GOOD_DEVICES + "links: {default: {bandwidth: 1 GB/s, latency: -2 us}}\n", "links.default.latency", r"must be >= 0, got -2e-06"),
        (GOOD_DEVICES + "links: {default: {bandwidth: 1 B/s}}\n", "links.default.bandwidth", r"1 B/s is under the limit of 1000"),
        ("devices: [{name: g, peak_flops: 1e-300, mem_bandwidth: 1e9, memory: 1e9}]\n" + GOOD_LINKS, "devices[0].peak_flops", r"1e-300 reaches 5e-301 FLOP/s, under the limit of 1000"),
        ("devices: [{name: g, kind: k80, mem_efficiency: 1e-12}]\n" + GOOD_LINKS, "devices[0].mem_bandwidth", r"240000000000\.0 reaches 0\.24 B/s, under the limit"),
        (GOOD_DEVICES + "links: {default: pcie3, groups: {devices: [gpu0]}}\n", "", r"links\.groups must be a list, got \{.devices.: \[.gpu0.\]\}$"),
        (GOOD_DEVICES + "links: {default: pcie3, groups: [{devices: [gpu0, gpu9], link: nvlink2}]}\n", "links.groups[0].devices", r"unknown device 'gpu9' \(devices: gpu0, gpu1\)"),
        (GOOD_DEVICES + "links: {default: pcie3, groups: [{devices: [gpu0], link: nvlink2}]}\n", "links.groups[0].devices", r"expected a list of at least two device names, got \['gpu0'\]"),
        (GOOD_DEVICES + "links: {default: pcie3, groups: [{devices: [gpu0, gpu1]}]}\n", "links.groups[0]", r"missing key 'link'"),
        (GOOD_DEVICES + "links: {default: pcie3, groups: [{}]}\n", "links.groups[0]", r"missing key 'devices'$"),  # the first
        (GOOD_DEVICES + "links: {default: pcie3, groups: [{devices: [gpu0, gpu1], link: warp}]}\n", "links.groups[0].link", r"unknown link kind 'warp'"),
        (GOOD_DEVICES + "links: {default: pcie3, pairs: [{between: [gpu0, gpu1, gpu0], link: pcie2}]}\n", "links.pairs[0].between", r"expected two device names, got \['gpu0', 'gpu1', 'gpu0'\]"),
        (GOOD_DEVICES + "links: {default: pcie3, pairs: [{between: gpu0, link: pcie2}]}\n", "links.pairs[0].between", r"expected two device names, got 'gpu0'"),
        (GOOD_DEVICES + "links: {default: pcie3, pairs: [{between: [gpu0, gpu0], link: pcie2}]}\n", "links.pairs[0].between", r"names device 'gpu0' twice \(a link joins two devices\)"),
        (GOOD_DEVICES + "links: {default: pcie3, groups: [{devices: [gpu0, gpu1, gpu1], link: nvlink2}]}\n", "links.groups[0].devices", r"names device 'gpu1' twice"),
        (GOOD_DEVICES + "links: {default: pcie3, pairs: [{between: [gpu0, cpu0], link: pcie2}]}\n", "links.pairs[0].between", r"unknown device 'cpu0'"),
        (GOOD_DEVICES + "links: {default: pcie3, groups: [{devices: [gpu0, [gpu1]], link: nvlink2}]}\n", "links.groups[0].devices", r"unknown device \['gpu1'\]"),
        (GOOD_DEVICES + "links: {default: pcie3, pairs: [{between: [{a: 1}, gpu1], link: pcie2}]}\n", "links.pairs[0].between", r"unknown device \{'a': 1\}"),
        (GOOD_DEVICES + "links: {default: pcie3, pairs: [{devices: [gpu0, gpu1], link: pcie2}]}\n", "links.pairs[0]", r"unknown key 'devices' \(expected one of between, link\)"),
    ],
)
def test_malformed_cluster_file(tmp_path, text, key, problem):
    path = write(tmp_path, text, name="bad.yaml")
    message = load_error(path)
    where = re.escape(f"{path}: {key}: " if key else f"{path}: ")
    assert re.match(where + problem, message), message


@pytest.mark.parametrize(
    "text, line, column",
    [
        (GOOD_DEVICES + GOOD_LINKS + "links: {default: nvlink2}\n", 3, 1),  # a key twice: not the last silently
        ("devices: [{name: g0, kind: k80}\nlinks: {default: pcie3}\n", 2, 1),
        ("devices: [{name: g0 kind: k80}]\n", 1, 25),
        ("links: {default: pcie3}\n\tdevices: []\n", 2, 1),
        ("name: 'unterminated\n", 2, 1),
    ],
)
def test_yaml_syntax_error(tmp_path, text, line, column):
    path = write(tmp_path, text, name="syntax.yaml")
    message = load_error(path)
    assert message.startswith(f"{path}: not valid YAML at line {line}, column {column}: "), message


def test_yaml_with_python_tag_is_rejected(tmp_path):
    path = write(tmp_path, "devices: !!python/object/apply:os.system ['true']\nlinks: {default: pcie3}\n")
    message = load_error(path)
    assert message.startswith(f"{path}: not valid YAML"), message


def test_binary_file(tmp_path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00\x01garbage\x80")
    message = load_error(path)
    assert message.startswith(f"{path}: not valid YAML: not UTF-8 text"), message


def test_missing_yaml_file(tmp_path):
    path = tmp_path / "absent.yaml"
    assert load_error(path) == f"{path}: no such cluster file"


def test_directory_named_like_yaml(tmp_path):
    path = tmp_path / "dir.yaml"
    path.mkdir()
    assert load_error(path) == f"{path}: is a folder, not a cluster file"


def test_cluster_from_dict_default_source():
    with pytest.raises(InvalidCluster, match=r"^cluster: missing key 'devices'$"):
        cluster_from_dict({"links": {"default": "pcie3"}})


def test_invalid_cluster_is_a_gnplace_value_error():
    assert issubclass(InvalidCluster, GnplaceError) and issubclass(InvalidCluster, ValueError)


def test_fingerprint_changes_with_devices_and_links(tmp_path):
    base = "name: mine\ndevices: [{name: gpu, count: 2, kind: k80}]\nlinks: {default: pcie3}\n"
    (tmp_path / "a.yaml").write_text(base)
    (tmp_path / "b.yaml").write_text(base.replace("k80", "v100"))
    (tmp_path / "c.yaml").write_text(base.replace("pcie3", "nvlink2"))
    (tmp_path / "d.yaml").write_text(base)
    prints = [load_cluster(tmp_path / f"{x}.yaml").fingerprint() for x in "abcd"]
    assert len(set(prints[:3])) == 3 and prints[0] == prints[3]
    assert len(prints[0]) == 64


def test_equal_numbers_written_apart_give_one_fingerprint(k80x2_written_out):
    """The fingerprint hashed ``repr``: a file writing the k80's default memory out (``12 GiB``, a float) was
    another cluster than the preset (``12 * 2**30``), and its placement files were refused on the preset."""
    import dataclasses

    import numpy as np

    written = k80x2_written_out
    preset = load_cluster("k80x2")
    assert load_cluster(written).fingerprint() == preset.fingerprint()
    for values in ({"memory": 10**9}, {"peak_flops": 10**12, "launch_overhead": 1e-5}):
        ints = Cluster([dataclasses.replace(d, **values) for d in preset.devices], preset.bandwidth,
                       preset.latency, name="k80x2")
        floats = Cluster([dataclasses.replace(d, **{k: float(v) for k, v in values.items()}) for d in preset.devices],
                         preset.bandwidth, preset.latency, name="k80x2")
        numpy = Cluster([dataclasses.replace(d, **{k: np.float64(v) for k, v in values.items()})
                         for d in preset.devices], preset.bandwidth, preset.latency, name="k80x2")
        assert ints.fingerprint() == floats.fingerprint() == numpy.fingerprint() != preset.fingerprint()
    # what differs still differs
    assert load_cluster(written).fingerprint() != Cluster(
        [dataclasses.replace(d, memory=12 * 2**30 + 1) for d in preset.devices], preset.bandwidth, preset.latency,
        name="k80x2").fingerprint()


def test_the_presets_and_the_drawn_clusters_keep_their_fingerprints():
    """Saved results, teacher searches and pretraining runs recorded them: hashing numbers canonically kept them."""
    import hashlib

    from gnplace.cluster_sampler import random_cluster

    prints = [load_cluster(name).fingerprint() for name in ("k80x2", "k80x4", "v100x8", "cpu_gpu", "tight4")]
    assert prints[0] == "256f334bb6adc03b00bc6d526cae729624db009d3bc81600d5a793520758b257"
    assert prints[4] == "fc07be942ea8417e0a8f7cf10a4bdfb71d70b97b10be41cf12017b7c70e3be8b"  # memory 1 GiB: a float
    drawn = hashlib.sha256("".join(random_cluster(seed).fingerprint() for seed in range(200)).encode()).hexdigest()
    assert drawn == "bc4c5adce2aa03bdcd4ce586e3140d2905bd8bb61fd4e1c634cba118cb55d686"


def test_a_subset_keeps_its_devices_and_the_links_between_them():
    c = load_cluster("v100x8")
    sub = c.subset([5, 0, 4])
    assert sub.device_names == ["gpu5", "gpu0", "gpu4"] and sub.name == "v100x8[5,0,4]"
    for i, a in enumerate([5, 0, 4]):
        for j, b in enumerate([5, 0, 4]):
            if i != j:
                assert sub.bandwidth[i, j] == c.bandwidth[a, b] and sub.latency[i, j] == c.latency[a, b]
    with pytest.raises(InvalidCluster, match="has no devices"):
        c.subset([0, 8])
    with pytest.raises(InvalidCluster, match="has no devices"):
        c.subset([])


@pytest.mark.parametrize("indices, shown", [([2**70], "[1180591620717411303424]"),
                                            (np.array([1, 2**63], dtype=np.uint64), "[1, 9223372036854775808]")])
def test_a_subset_names_whole_indices_past_int64_as_no_devices_as_given(indices, shown):
    """2**70 (numpy's object array) was called no whole number; 2**63 as uint64 was shown as -2**63, cast first."""
    with pytest.raises(InvalidCluster, match=re.escape(f"cluster 'k80x2' has no devices {shown} (it has 2)") + "$"):
        load_cluster("k80x2").subset(indices)


def test_message_cpu_changes_the_fingerprint_only_where_it_is_set():
    import dataclasses

    base = load_cluster("k80x2")
    same = Cluster([dataclasses.replace(d, message_cpu=0.0) for d in base.devices], base.bandwidth, base.latency,
                   name=base.name)
    charged = Cluster([dataclasses.replace(d, message_cpu=5e-4) for d in base.devices], base.bandwidth,
                      base.latency, name=base.name)
    # clusters without it keep the fingerprint that saved results recorded before the field existed
    assert same.fingerprint() == base.fingerprint() == (
        "256f334bb6adc03b00bc6d526cae729624db009d3bc81600d5a793520758b257")
    assert charged.fingerprint() != base.fingerprint()


def test_devices_of_one_kind_must_agree_on_their_op_times(tmp_path):
    # op times are kept per kind (measured cost_s, coarse graphs): a second speed under one kind was timed as the first
    two = """
        devices:
          - {name: slow, peak_flops: 1 TFLOP/s, mem_bandwidth: 100 GB/s, memory: 64 GiB}
          - {name: fast, peak_flops: 10 TFLOP/s, mem_bandwidth: 500 GB/s, memory: 64 GiB}
        links: {default: pcie3}
        """
    with pytest.raises(InvalidCluster, match=r"two\.yaml: devices: devices 'slow' and 'fast' are both of kind 'custom' "
                                             r"but differ in peak_flops"):  # the file named, as every file error
        load_cluster(str(write(tmp_path, two, name="two.yaml")))
    own = two.replace("{name: fast,", "{name: fast, kind: fast,")
    assert load_cluster(str(write(tmp_path, own, name="own.yaml"))).kinds == ["custom", "fast"]
    memories = """
        devices:
          - {name: big, kind: v100, memory: 32 GiB}
          - {name: small, kind: v100, memory: 16 GiB}
        links: {default: pcie3}
        """
    assert load_cluster(str(write(tmp_path, memories, name="mem.yaml"))).kinds == ["v100", "v100"]


def test_kinds_that_differ_in_case_alone_are_one_kind():
    """Measured costs read kinds without case: 'K80' and 'k80' at two speeds were accepted, then coarsening failed
    ("cost_s gives device kind 'k80' twice")."""
    from gnplace.coarsen import coarsen
    from gnplace.toy import layered_graph

    def cluster(fast: float) -> Cluster:
        devices = [Device("a", "K80", 2.8e12, 240e9, 10**10), Device("b", "k80", fast, 240e9, 10**10)]
        return Cluster(devices, np.full((2, 2), 1e10), np.zeros((2, 2)))

    with pytest.raises(InvalidCluster, match=r"'a' and 'b' are both of kind 'k80' but differ in peak_flops"):
        cluster(1e12)
    assert list(coarsen(layered_graph(100, seed=0), 5, cluster(2.8e12)).graph.cost_s) == ["k80"]


@pytest.mark.parametrize("value", ["true", "yes"])
def test_an_efficiency_of_yes_is_refused(tmp_path, value):
    """float(True) read flops_efficiency: yes as 1.0, where memory: true is refused."""
    text = f"devices: [{{name: g, kind: k80, flops_efficiency: {value}}}]\nlinks: {{default: pcie3}}\n"
    with pytest.raises(InvalidCluster, match=r"devices\[0\].flops_efficiency: must be a number in \(0, 1\], got True"):
        load_cluster(str(write(tmp_path, text, name="yes.yaml")))


def test_a_device_made_in_python_with_no_memory_is_refused():
    # YAML refuses it per field; made in Python it gave nan overflows and bare AssertionErrors in the searches
    good = Device("gpu0", "k80", 2.8e12, 240e9, 12 * GiB)
    empty = Device("gpu1", "k80", 2.8e12, 240e9, 0.0)
    with pytest.raises(InvalidCluster, match="^cluster 'cluster': device 'gpu1': memory must be positive and finite, got 0.0$"):
        Cluster([good, empty], np.full((2, 2), 1e10), np.zeros((2, 2)))
    numpy_empty = dataclasses.replace(empty, memory=np.float64(0.0))  # shown as 0.0, not np.float64(0.0)
    with pytest.raises(InvalidCluster, match="^cluster 'cluster': device 'gpu1': memory must be positive and finite, got 0.0$"):
        Cluster([good, numpy_empty], np.full((2, 2), 1e10), np.zeros((2, 2)))


@pytest.mark.parametrize(
    "field, value, problem",
    [
        ("flops_efficiency", 0.0, "must be in \\(0, 1\\]"),  # op times were inf (nan for ops of no FLOP)
        ("mem_efficiency", -0.5, "must be in \\(0, 1\\]"),  # negative op times
        ("flops_efficiency", np.nan, "must be in \\(0, 1\\]"),  # was reported as two devices that differ
        ("mem_efficiency", 1.5, "must be in \\(0, 1\\]"),  # a device faster than its own peak
        ("launch_overhead", -1.0, "must be >= 0"),  # a step of 0 s with negative busy time
        ("message_cpu", -1e-3, "must be >= 0"),
    ],
)
def test_a_device_made_in_python_with_a_bad_efficiency_or_overhead_is_refused(field, value, problem):
    # YAML refuses these per field; a Device made in Python reached the simulator with them
    bad = Device("gpu0", "custom", 2.8e12, 240e9, 12 * GiB, **{field: value})
    with pytest.raises(InvalidCluster, match=f"^cluster 'cluster': device 'gpu0': {field} {problem}, got {value!r}$"):
        Cluster([bad], np.ones((1, 1)), np.zeros((1, 1)))


@pytest.mark.parametrize(
    "text, key",
    [
        ("devices: [{name: g, kind: k80, launch_overhead: 1e308}]\n" + GOOD_LINKS, "devices[0].launch_overhead"),
        ("devices: [{name: g, kind: k80, message_cpu: 1e20}]\n" + GOOD_LINKS, "devices[0].message_cpu"),
        (GOOD_DEVICES + "links: {default: {bandwidth: 1 GB/s, latency: 1e308}}\n", "links.default.latency"),
    ],
)
def test_a_duration_past_the_limit_is_refused(tmp_path, text, key):
    """A launch overhead of 1e308 s loaded, and summed over a step's ops overflowed: a traceback in the lower bound."""
    path = tmp_path / "slow.yaml"
    path.write_text(text)
    with pytest.raises(InvalidCluster, match=re.escape(f"{path}: {key}: ") + r".* seconds is over the limit of 4.61e\+15"):
        load_cluster(path)


def test_a_device_or_link_made_in_python_with_a_duration_past_the_limit_is_refused():
    slow = Device("gpu0", "custom", 2.8e12, 240e9, 12 * GiB, launch_overhead=1e308)
    with pytest.raises(InvalidCluster, match="device 'gpu0': launch_overhead 1e[+]308 seconds is over the limit of 4.61e[+]15$"):
        Cluster([slow], np.ones((1, 1)), np.zeros((1, 1)))
    with pytest.raises(InvalidCluster, match="every link needs a finite latency >= 0, at most 4.61e"):
        Cluster([_dev("a"), _dev("b")], np.full((2, 2), 1e9), [[0, 1e308], [0, 0]])


def test_the_longest_durations_allowed_keep_every_time_finite():
    from gnplace.cluster import MAX_SECONDS
    from gnplace.placers import make_placer
    from gnplace.sim.bounds import lower_bound
    from gnplace.sim.simulator import Simulator
    from gnplace.toy import mlp_training_graph

    dev = Device("gpu0", "custom", 1e3, 1e3, 12 * GiB, flops_efficiency=1.0, mem_efficiency=1.0,  # the slowest rates
                 launch_overhead=MAX_SECONDS, message_cpu=MAX_SECONDS)
    cluster = Cluster([dev, dataclasses.replace(dev, name="gpu1")], np.full((2, 2), 1e3), np.full((2, 2), MAX_SECONDS))
    graph, sim = mlp_training_graph(layers=4), Simulator()
    step = sim.time(graph, cluster, make_placer("round_robin").place(graph, cluster)).step_time
    bound = lower_bound(graph, cluster, times=sim.cost_model.op_times(graph, cluster)).value
    assert np.isfinite(step) and np.isfinite(bound) and bound > 0


@pytest.mark.parametrize("spec", ["", "  "])
def test_an_empty_cluster_name_is_named_as_empty_not_as_the_current_folder(spec):
    with pytest.raises(InvalidCluster, match="^cluster name is empty: give a YAML file or one of cpu_gpu, k80x2"):
        load_cluster(spec)


@pytest.mark.parametrize(
    "changes, match",
    [
        (dict(peak_flops=1e-320), "peak_flops 1e-320 reaches 5e-321 FLOP/s, under the limit of 1000$"),
        (dict(peak_flops=1500.0), "peak_flops 1500.0 reaches 750 FLOP/s, under the limit of 1000$"),
        (dict(mem_bandwidth=1e-320), "mem_bandwidth 1e-320 reaches 7e-321 B/s, under the limit of 1000$"),
        (dict(memory=2.0**63), "memory 9.223e[+]18 bytes is over the limit of 2[*][*]62$"),
    ],
)
def test_a_device_made_in_python_past_a_limit_a_cluster_file_has_is_refused(changes, match):
    """A cluster file refuses a rate reached under MIN_RATE and memory over MAX_COUNT; so does the constructor."""
    good = Device("gpu0", "custom", 2.8e12, 240e9, 12 * GiB, flops_efficiency=0.5, mem_efficiency=0.7)
    bad = dataclasses.replace(good, **changes)
    with pytest.raises(InvalidCluster, match="^cluster 'c': device 'gpu0': " + match) as info:
        Cluster([bad], np.ones((1, 1)), np.zeros((1, 1)), name="c")
    assert "\n" not in str(info.value)


def test_the_slowest_device_a_cluster_file_allows_is_allowed_in_python_too():
    slowest = Device("gpu0", "custom", 2e3, 1e3 / 0.7, 2.0**62, flops_efficiency=0.5, mem_efficiency=0.7)
    assert Cluster([slowest], np.ones((1, 1)), np.zeros((1, 1))).devices == (slowest,)


@pytest.mark.parametrize("bandwidth", [1e-320, 999.0])
def test_a_link_made_in_python_under_the_bandwidth_limit_is_refused(bandwidth):
    """A bandwidth of 1e-320 B/s, passed to the constructor, crashed a simulator worker; a file refuses it."""
    matrix = np.full((3, 3), 1e9)
    matrix[2, 1] = bandwidth
    with pytest.raises(InvalidCluster, match=re.escape(f"cluster 'c': the link 'gpu2' -> 'gpu1' has bandwidth "
                                                       f"{bandwidth:.3g} B/s, under the limit of 1000")):
        Cluster([_dev("gpu0"), _dev("gpu1"), _dev("gpu2")], matrix, np.zeros((3, 3)), name="c")
    matrix[2, 1] = 1e3  # the limit itself is allowed, as in a file
    assert Cluster([_dev("gpu0"), _dev("gpu1"), _dev("gpu2")], matrix, np.zeros((3, 3))).bandwidth[2, 1] == 1e3


def test_a_cluster_made_in_python_with_more_devices_than_a_file_allows_is_refused():
    from gnplace.limits import MAX_DEVICES

    devices = [_dev(f"gpu{i}") for i in range(MAX_DEVICES + 1)]
    with pytest.raises(InvalidCluster, match=f"^cluster 'big': {MAX_DEVICES + 1} devices is over the limit of "
                                             f"{MAX_DEVICES}$"):
        Cluster(devices, np.ones((1, 1)), np.zeros((1, 1)), name="big")


@pytest.mark.parametrize(
    "changes, match",
    [
        (dict(peak_flops="1e11"), r"^cluster 'c': device 'a' has peak_flops '1e11' \(str\); it must be a number$"),
        (dict(memory=None), r"^cluster 'c': device 'a' has memory None \(NoneType\); it must be a number$"),
        (dict(launch_overhead=True), r"^cluster 'c': device 'a' has launch_overhead True \(bool\); it must be a "),
        (dict(name=""), r"^cluster 'c': device name must be a non-empty name without surrounding spaces, got ''$"),
        (dict(name=" a"), r"^cluster 'c': device name must be a non-empty name without surrounding spaces, got ' a'$"),
        (dict(name=["a"]), r"^cluster 'c': device name must be a non-empty name without surrounding spaces, got \["),
        (dict(kind=None), r"^cluster 'c': device 'a' has kind None; it must be a string$"),
    ],
)
def test_a_device_made_in_python_with_a_field_of_the_wrong_type_or_a_bad_name_is_one_line(changes, match):
    # a string where a number goes was a TypeError from a comparison inside Cluster; names were not checked
    with pytest.raises(InvalidCluster, match=match):
        Cluster([dataclasses.replace(_dev("a"), **changes), _dev("b")], np.ones((2, 2)), np.zeros((2, 2)), name="c")


def test_a_cluster_made_in_python_needs_a_device_and_a_name_as_a_file_does():
    with pytest.raises(InvalidCluster, match=r"^cluster 'c': expected a Device, got dict \{'name': 'a'\}$"):
        Cluster([{"name": "a"}], np.ones((1, 1)), np.zeros((1, 1)), name="c")  # type: ignore[list-item]
    for name in ("", "  ", None, 3):
        with pytest.raises(InvalidCluster, match=rf"^cluster name: expected a non-empty string, got {name!r}$"):
            Cluster([_dev("a")], np.ones((1, 1)), np.zeros((1, 1)), name=name)  # type: ignore[arg-type]
    numpy_fields = dataclasses.replace(_dev("a"), peak_flops=np.float32(1e12), memory=np.int64(10**9))
    assert Cluster([numpy_fields], np.ones((1, 1)), np.zeros((1, 1)), name="c").devices == (numpy_fields,)


@pytest.mark.parametrize("indices", [[0.5], np.array([False, True]), ["gpu1"]])
def test_a_subset_refuses_indices_that_are_not_whole_numbers(indices):
    """0.5 was cut to device 0, a boolean mask read as the indices 0 and 1, a name a ValueError."""
    with pytest.raises(InvalidCluster, match="device indices must be whole numbers"):
        load_cluster("k80x2").subset(indices)


def test_a_number_past_a_floats_range_is_one_cluster_error(tmp_path):
    """An int of 310 digits was an ``OverflowError`` traceback, in a file's efficiency and in a ``Device``."""
    path = tmp_path / "big.yaml"
    path.write_text("devices:\n  - {name: gpu, count: 2, kind: k80, mem_efficiency: 1" + "0" * 310 + "}\n"
                    "links: {default: pcie3}\n")
    with pytest.raises(InvalidCluster, match=r"mem_efficiency: must be a number in \(0, 1\], got one of 311 digits"):
        load_cluster(path)
    for field in ("peak_flops", "mem_bandwidth", "memory", "launch_overhead"):
        spec = {"name": "g", "kind": "x", "peak_flops": 1e12, "mem_bandwidth": 1e9, "memory": 1e9, field: -(10**400)}
        with pytest.raises(InvalidCluster, match=rf"has {field} of 401 digits, past a float's range"):
            Cluster([Device(**spec)], [[0]], [[0]])


@pytest.mark.parametrize("value", ["description: 2024-02-30\n", f"description: {'9' * 5000}\n", "description: !!int abc\n"])
def test_a_value_yamls_own_builders_cannot_read_is_one_line(tmp_path, value):
    """PyYAML's date and int builders raise a plain ValueError: it was a traceback, exit 1."""
    path = write(tmp_path, GOOD_DEVICES + GOOD_LINKS + value, name="value.yaml")
    message = load_error(path)
    assert message.startswith(f"{path}: a value YAML cannot read: ") and "\n" not in message, message


@pytest.mark.parametrize("field, value, message", [
    ("kind", "[k80]", r"devices\[0\]\.kind: expected a device kind's name, got \['k80'\]"),
    ("kind", "''", r"devices\[0\]\.kind: expected a device kind's name, got ''"),
])
def test_a_device_kind_that_is_not_a_name_is_refused(tmp_path, field, value, message):
    """``kind: [a]`` was read as the kind "['a']" (a custom device, when every field was given)."""
    path = write(tmp_path, f"""
        devices:
          - {{name: g, {field}: {value}, peak_flops: 1 TFLOP/s, mem_bandwidth: 100 GB/s, memory: 1 GiB}}
        """)
    with pytest.raises(InvalidCluster, match=message):
        load_cluster(path)


@pytest.mark.parametrize("value", ["false", "{}", "0", "''", "a"])
def test_links_groups_or_pairs_that_are_no_list_are_refused(tmp_path, value):
    """``groups: false`` or ``pairs: {}`` passed as no links at all; an empty ``groups:`` still means none."""
    for key in ("groups", "pairs"):
        path = write(tmp_path, f"""
            devices:
              - {{name: g, count: 2, kind: k80}}
            links:
              default: pcie3
              {key}: {value}
            """)
        with pytest.raises(InvalidCluster, match=f"links.{key} must be a list, got"):
            load_cluster(path)
    path = write(tmp_path, """
        devices:
          - {name: g, count: 2, kind: k80}
        links:
          default: pcie3
          groups:
        """)
    assert load_cluster(path).bandwidth[0, 1] == LINK_KINDS["pcie3"]["bandwidth"]


def test_a_group_sets_every_ordered_pair_of_its_members_and_no_other(tmp_path):
    """Groups are filled as blocks (a group of 4,096 devices took 4 s pair by pair); a later group or pair wins."""
    path = write(tmp_path, """
        devices:
          - {name: g, count: 5, kind: k80}
        links:
          default: {bandwidth: 1 GB/s, latency: 1 us}
          groups:
            - {devices: [g3, g0, g2], link: {bandwidth: 2 GB/s, latency: 2 us}}
            - {devices: [g2, g4], link: {bandwidth: 3 GB/s, latency: 3 us}}
          pairs:
            - {between: [g0, g3], link: {bandwidth: 4 GB/s, latency: 4 us}}
        """)
    c = load_cluster(path)
    expected = np.full((5, 5), 1e9)
    for a, b, bw in [(0, 2, 2e9), (2, 3, 2e9), (0, 3, 4e9), (2, 4, 3e9)]:
        expected[a, b] = expected[b, a] = bw
    np.fill_diagonal(expected, np.inf)
    assert c.bandwidth.tolist() == expected.tolist()
    assert (c.latency * 1e6).round(6).tolist() == (np.where(np.isinf(expected), 0, expected / 1e9)).tolist()


def test_a_cluster_made_in_python_of_malformed_parts_is_one_clear_error():
    """``Cluster(None, ...)`` was a TypeError and a ragged or textual matrix numpy's ValueError."""
    c = load_cluster("k80x2")
    for devices in (None, "gpu0", 3):
        with pytest.raises(InvalidCluster, match="devices must be a list of Device"):
            Cluster(devices, c.bandwidth, c.latency)
    for matrix in ([[1e9, 2e9], [3e9]], [["a", "b"], ["c", "d"]]):
        with pytest.raises(InvalidCluster, match=r"^cluster 'cluster': bandwidth and latency must be \[2, 2\] matrices"):
            Cluster(list(c.devices), matrix, c.latency)


@pytest.mark.parametrize("label", ["bandwidth", "latency"])
@pytest.mark.parametrize(
    "off, what",
    [
        ("1e9", "text"),  # numpy's cast read the string as 1e9 B/s (or s)
        (True, "booleans"),  # a latency of 1 s
        (1e-5 + 1j, "complex numbers"),  # its imaginary part dropped, with numpy's ComplexWarning
        (np.timedelta64(10, "us"), "durations"),  # read as its count, 10
    ],
)
def test_a_link_matrix_of_text_booleans_complex_numbers_or_durations_is_refused(label, off, what):
    """A link matrix of no numbers was cast to float64 without a word; each is one InvalidCluster line."""
    c = load_cluster("k80x2")
    given = {"bandwidth": c.bandwidth.tolist(), "latency": c.latency.tolist()}
    given[label][0][1] = off  # in a list among numbers, and as a whole array of its kind
    whole = np.full((2, 2), off)
    for matrix in (given[label], whole):
        with pytest.raises(InvalidCluster, match=rf"^cluster 'cluster': bandwidth and latency must be \[2, 2\] "
                           rf"matrices of numbers \(the {label} matrix holds {what}\)$"):
            Cluster(c.devices, **{**given, label: matrix})


def test_a_link_matrix_of_numbers_with_none_on_the_diagonal_is_taken():
    """None is NaN, on the diagonal ignored (an object array of numbers and None, or a list of them)."""
    c = load_cluster("k80x2")
    for matrix in ([[None, 7.6e9], [7.6e9, None]], np.array([[None, 7.6e9], [7.6e9, None]], dtype=object)):
        assert Cluster(c.devices, matrix, c.latency, name="k80x2") == c


def test_transfer_time_uses_the_link_of_its_direction():
    """1 MB from device 1 to device 0 crosses the 1->0 link (0.5 MB/s and 3 ms: 2.003 s), not the 0->1 one."""
    devices = [Device(f"d{k}", "gpu", 1e12, 1e11, 1e9) for k in range(2)]
    c = Cluster(devices, np.array([[np.inf, 1e6], [5e5, np.inf]]), np.array([[0.0, 1e-3], [3e-3, 0.0]]), name="asym")
    assert c.transfer_time(1, 0, 1e6) == pytest.approx(3e-3 + 2.0)
    assert c.transfer_time(0, 1, 1e6) == pytest.approx(1e-3 + 1.0)


@pytest.mark.parametrize("given", [None, 4, ["k80x2"]])
def test_a_cluster_that_is_no_name_path_or_cluster_is_one_clear_error(given):
    """load_cluster(None) was refused as the unknown cluster 'None', and a list as "unknown cluster \\"['k80x2']\\""."""
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"^a cluster is given by a preset's name, a YAML file's path or a "
                       r"Cluster, got "):
        load_cluster(given)


def test_the_fingerprint_is_hashed_once_and_again_when_a_field_is_rebound(monkeypatch):
    import gnplace.cluster

    c = load_cluster("k80x4")
    sha256 = gnplace.cluster.hashlib.sha256
    calls = []
    monkeypatch.setattr(gnplace.cluster.hashlib, "sha256", lambda *a: calls.append(1) or sha256(*a))
    first = c.fingerprint()
    assert c.fingerprint() == first and c == load_cluster("k80x4") and len(calls) == 2  # this one's once, the twin's
    twin = load_cluster("k80x4")
    object.__setattr__(twin, "name", "renamed")  # (refused as twin.name = ...) a stale fingerprint would still say k80x4
    assert twin.fingerprint() != first
    assert twin.fingerprint() == Cluster(list(twin.devices), twin.bandwidth, twin.latency, name="renamed").fingerprint()


def test_a_numpy_integer_count_builds_the_devices_as_a_python_one_does():
    """``count: np.int64(2)`` in a mapping built in code was refused as not a positive integer."""
    spec = {"name": "c", "devices": [{"name": "gpu", "kind": "k80", "count": np.int64(2)}], "links": {"default": "pcie3"}}
    cluster = cluster_from_dict(spec)
    assert [d.name for d in cluster.devices] == ["gpu0", "gpu1"]
    assert cluster == cluster_from_dict({**spec, "devices": [{"name": "gpu", "kind": "k80", "count": 2}]})


def test_a_files_device_count_over_the_limit_is_refused_at_its_entry(tmp_path):
    """One entry of MAX_DEVICES + 1 devices: refused at that entry's count, as the file says it, before any is made."""
    from gnplace.limits import MAX_DEVICES

    text = f"devices: [{{name: g, kind: k80, count: {MAX_DEVICES + 1}}}]\n" + GOOD_LINKS
    with pytest.raises(InvalidCluster, match=rf"devices\[0\]\.count: more than {MAX_DEVICES} devices in all, the limit"):
        load_cluster(write(tmp_path, text, name="big.yaml"))


def test_a_cluster_is_typed_to_take_another_clusters_devices():
    """``Cluster(c.devices[:2], ...)`` runs, and is typed to: ``devices`` was annotated ``list[Device]``, so
    ``mypy --strict`` refused another cluster's ``devices`` (a tuple), which the constructor takes."""
    import collections.abc
    import typing

    hints = typing.get_type_hints(Cluster.__init__)
    assert typing.get_origin(hints["devices"]) in (collections.abc.Iterable, collections.abc.Sequence)
    c = load_cluster("k80x4")
    half = Cluster(c.devices[:2], c.bandwidth[:2, :2], c.latency[:2, :2], name="half")
    assert half.device_names == ["gpu0", "gpu1"]


def test_the_link_checks_copy_no_matrix_of_pairs():
    """The checks gathered the off-diagonal links by a [D, D] mask, a copy of a matrix per pass: at 4,096 devices
    Cluster() peaked at 432 MiB beside its two 128 MiB matrices and took 0.39 s, 0.34 s of it in three gathers;
    the matrices are compared whole now (the diagonal is set first), 288 MiB and 0.09 s, the same checks."""
    import tracemalloc

    devices = [_dev(f"gpu{i}") for i in range(512)]
    bandwidth, latency = np.full((512, 512), 12e9), np.full((512, 512), 1e-5)
    Cluster(devices, bandwidth, latency)  # numpy's own first-use allocations, not counted below
    tracemalloc.start()
    try:
        cluster = Cluster(devices, bandwidth, latency)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2.5 * bandwidth.nbytes  # its two matrices, and a few [D, D] booleans (1/8 of one each)
    assert np.isinf(cluster.bandwidth.diagonal()).all() and not cluster.latency.diagonal().any()


def test_a_uniform_cluster_fills_no_matrices_of_its_own():
    """toy_cluster / uniform_cluster filled a [D, D] matrix of each number that Cluster then copied: two matrices
    more to write (256 MiB at 4,096 devices, 0.7 s of toy_cluster's 2 s in a fresh process on the loaded VM)."""
    import tracemalloc

    from gnplace.toy import toy_cluster

    toy_cluster(512)
    tracemalloc.start()
    try:
        cluster = toy_cluster(512, bandwidth=3e9, latency=2e-5)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2.5 * cluster.bandwidth.nbytes  # the cluster's two matrices, and a few [D, D] booleans
    off = ~np.eye(512, dtype=bool)
    assert (cluster.bandwidth[off] == 3e9).all() and (cluster.latency[off] == 2e-5).all()
    assert cluster.bandwidth.flags.c_contiguous and not cluster.bandwidth.flags.writeable


@pytest.mark.parametrize("where, value, match", [
    ((3, 1), 0.0, "positive, finite bandwidth"), ((0, 2), np.nan, "positive, finite bandwidth"),
    ((1, 0), np.inf, "positive, finite bandwidth"), ((2, 3), 10.0, "'gpu2' -> 'gpu3' has bandwidth 10 B/s"),
])
def test_every_off_diagonal_bandwidth_is_checked_and_the_diagonal_is_not(where, value, match):
    bandwidth = np.full((4, 4), 1e9)
    np.fill_diagonal(bandwidth, np.nan)  # ignored: no transfer on one device
    assert np.isinf(Cluster([_dev(f"gpu{i}") for i in range(4)], bandwidth, np.zeros((4, 4))).bandwidth[1, 1])
    bandwidth[where] = value
    bandwidth[3, 2] = 20.0 if where == (2, 3) else 1e9  # another slow link after it: the first one is named
    with pytest.raises(InvalidCluster, match=match):
        Cluster([_dev(f"gpu{i}") for i in range(4)], bandwidth, np.zeros((4, 4)))


@pytest.mark.parametrize("value", [-1e-9, np.nan, np.inf, 1e19])
def test_every_off_diagonal_latency_is_checked_and_the_diagonal_is_not(value):
    latency = np.zeros((3, 3))
    np.fill_diagonal(latency, value)  # ignored: no transfer on one device
    assert not Cluster([_dev(f"gpu{i}") for i in range(3)], np.ones((3, 3)) * 1e9, latency).latency.any()
    latency[2, 0] = value
    with pytest.raises(InvalidCluster, match="every link needs a finite latency >= 0"):
        Cluster([_dev(f"gpu{i}") for i in range(3)], np.ones((3, 3)) * 1e9, latency)


@pytest.mark.parametrize("d", [1, 2, 3, 7])
def test_off_diagonal_is_what_a_mask_picks_row_by_row_in_a_new_array(d):
    """Each row's links to the others in order, as ``matrix[~np.eye(D)]`` gives them, in an array of its own (at two
    devices the entries kept are one contiguous run, which a view would have written through), whole or a block of
    rows."""
    matrix = np.arange(float(d * d)).reshape(d, d)
    matrix.flags.writeable = False
    for m in (matrix, matrix.T):
        got = off_diagonal(m)
        assert got.shape == (d, d - 1) and got.flags.c_contiguous and got.flags.writeable
        assert not np.shares_memory(got, m)
        want = m[~np.eye(d, dtype=bool)].reshape(d, d - 1)
        assert got.tolist() == want.tolist()
        for start in range(d + 1):  # every block of rows
            for stop in range(start, d + 1):
                block = off_diagonal(m, start, stop)
                assert block.shape == (stop - start, d - 1) and block.tolist() == want[start:stop].tolist()
                assert block.flags.c_contiguous and not np.shares_memory(block, m)


def test_the_inverse_bandwidths_are_kept_read_only_while_the_links_are_the_same():
    """1 / bandwidth (seconds per byte, 0 on the diagonal), divided once a cluster: each list schedule divided the
    4,096 K80s' 16.8 million links anew (0.1-0.4 s and 134 MB, three in ``auto``)."""
    c = load_cluster("v100x8")
    inverse = c.inverse_bandwidth()
    with np.errstate(divide="ignore"):
        assert inverse.tobytes() == (1.0 / c.bandwidth).tobytes() and np.all(np.diag(inverse) == 0)
    assert c.inverse_bandwidth() is inverse and not inverse.flags.writeable
    faster = c.bandwidth * 2
    faster.flags.writeable = False
    object.__setattr__(c, "bandwidth", faster)  # rebound (around the refusal of c.bandwidth = ...): divided again
    assert c.inverse_bandwidth() is not inverse and c.inverse_bandwidth()[0, 1] == inverse[0, 1] / 2
    loose = load_cluster("v100x8")
    object.__setattr__(loose, "bandwidth", np.array(loose.bandwidth))  # writable: it may change in place, so it is not kept
    first = loose.inverse_bandwidth()
    loose.bandwidth[0, 1] = 1e9
    assert loose.inverse_bandwidth()[0, 1] == 1e-9 != first[0, 1] and not first.flags.writeable


def test_a_subset_keeps_each_links_direction():
    """Links of another bandwidth and latency each way: a subset's row-to-column link is the one between those
    devices, not its reverse (v100x8's links are the same both ways; a transposed latency passed)."""
    base = load_cluster("k80x4")
    bandwidth = np.arange(1.0, 17.0).reshape(4, 4) * 1e9
    latency = np.arange(1.0, 17.0).reshape(4, 4) * 1e-6
    c = Cluster(base.devices, bandwidth, latency, name="skew")
    sub = c.subset([3, 1])
    assert sub.bandwidth[0, 1] == 14e9 and sub.bandwidth[1, 0] == 8e9
    assert sub.latency[0, 1] == 14e-6 and sub.latency[1, 0] == 8e-6


def test_a_device_is_a_cpu_by_its_kind_or_its_name():
    """``is_cpu`` reads the kind (``cpu``, ``cpu-4t``) or the name (``cpu0``); a mutant that read the kind alone
    passed."""
    gpu = load_cluster("k80x2").devices[0]
    assert not gpu.is_cpu
    assert dataclasses.replace(gpu, name="cpu0").is_cpu
    assert dataclasses.replace(gpu, kind="cpu-4t").is_cpu
    assert not dataclasses.replace(gpu, name="gpu-cpu").is_cpu


def test_a_devices_defaults_are_the_documented_ones():
    """Efficiencies 0.5 and 0.7, a launch overhead of 5 us and no message CPU, as Device's docstring says (mutants of
    the memory efficiency's and the launch overhead's defaults passed)."""
    d = Device("d", "custom", peak_flops=1e12, mem_bandwidth=1e11, memory=2**30)
    assert (d.flops_efficiency, d.mem_efficiency, d.launch_overhead, d.message_cpu) == (0.5, 0.7, 5e-6, 0.0)


def test_a_cluster_file_at_every_limit_loads(tmp_path):
    """Each limit is allowed itself (a mutant of each of these comparisons, < for <= or > for >=, passed): rates
    reached of exactly MIN_RATE (1,000 FLOP/s, 1,000 B/s, a link of 1,000 B/s), efficiencies of 1, 2**62 bytes of
    memory, and durations of MAX_SECONDS = 2**62 / 1,000 s (a launch overhead, a message CPU, a link's latency)."""
    from gnplace.limits import MAX_SECONDS

    at_limit = f"{{bandwidth: 1000, latency: {MAX_SECONDS!r}}}"
    path = write(tmp_path, f"""\
        devices:
          - {{name: slow, peak_flops: 1000, mem_bandwidth: 1000, memory: {2**62}, flops_efficiency: 1,
              mem_efficiency: 1, launch_overhead: {MAX_SECONDS!r}, message_cpu: {MAX_SECONDS!r}}}
          - {{name: gpu, kind: k80}}
        links: {{default: {at_limit}}}
    """)
    c = load_cluster(path)
    slow = c.devices[0]
    assert (slow.peak_flops, slow.mem_bandwidth, slow.memory, slow.flops_efficiency, slow.mem_efficiency) == (
        1000, 1000, 2**62, 1, 1)
    assert slow.launch_overhead == slow.message_cpu == 2**62 / 1000
    assert (c.bandwidth[0, 1], c.bandwidth[1, 0], c.latency[0, 1], c.latency[1, 0]) == (1000, 1000, 2**62 / 1000,
                                                                                          2**62 / 1000)


def test_a_cluster_of_as_many_devices_as_the_limit_is_taken(monkeypatch):
    """MAX_DEVICES devices are allowed, one more is not, from a file's count and in Python alike (mutants that
    refused the limit itself passed). The limit is made 3 here: 4,096 devices took 1.6 s to build."""
    import gnplace.cluster

    monkeypatch.setattr(gnplace.cluster, "MAX_DEVICES", 3)
    spec = {"name": "c", "devices": [{"name": "g", "kind": "k80", "count": 3}], "links": {"default": "pcie3"}}
    assert cluster_from_dict(spec).device_names == ["g0", "g1", "g2"]
    devices = [_dev(f"g{i}") for i in range(3)]
    assert Cluster(devices, np.full((3, 3), 1e9), np.zeros((3, 3)), name="c").num_devices == 3
    with pytest.raises(InvalidCluster, match=r"devices\[0\]\.count: more than 3 devices in all, the limit"):
        cluster_from_dict({**spec, "devices": [{"name": "g", "kind": "k80", "count": 4}]})
    with pytest.raises(InvalidCluster, match="^cluster 'c': 4 devices is over the limit of 3$"):
        Cluster([*devices, _dev("g3")], np.full((4, 4), 1e9), np.zeros((4, 4)), name="c")


def test_an_unknown_device_names_eight_devices_and_counts_more():
    """The message lists up to 8 devices in full; past 8 it names the first 8 and the count (a mutant that counted
    at 8 passed)."""
    with pytest.raises(UnknownName, match=re.escape("cluster 'v100x8' has no device named 'gpu9' (its devices: gpu0, "
                                                    "gpu1, gpu2, gpu3, gpu4, gpu5, gpu6, gpu7)") + "$"):
        load_cluster("v100x8").index("gpu9")
    nine = cluster_from_dict({"name": "nine", "devices": [{"name": "g", "kind": "k80", "count": 9}],
                              "links": {"default": "pcie3"}})
    with pytest.raises(UnknownName, match=re.escape("(its devices: g0, g1, g2, g3, g4, g5, g6, g7, ... (9 devices))")
                       + "$"):
        nine.index("gpu9")


def test_a_kept_value_is_computed_again_for_another_key():
    """``kept`` keeps one value per slot for the key it was computed for (listsched's link costs are keyed by the
    devices in use); a mutant that ignored the key gave the first key's value for every other."""
    c = load_cluster("k80x2")
    assert c.kept("_answer", (), 1, lambda: 42) == 42
    assert c.kept("_answer", (), 2, lambda: 0) == 0
    assert c.kept("_answer", (), 2, lambda: 7) == 0


def test_a_clusters_attributes_are_not_rebound_or_deleted():
    """``cluster.devices = ...`` was taken without a word: a simulator that had timed the cluster went on timing
    the old devices, and ``cluster.name = ...`` changed its hash. Each is refused in one line."""
    import copy
    import dataclasses
    import pickle

    from gnplace.sim.simulator import Simulator
    from gnplace.toy import chain_graph

    g, c = chain_graph(4), load_cluster("k80x2")
    sim = Simulator()
    before, fingerprint, hashed = sim.time(g, c, [0, 1, 0, 1]).step_time, c.fingerprint(), hash(c)
    faster = tuple(dataclasses.replace(d, peak_flops=d.peak_flops * 100) for d in c.devices)
    for name, value in (("devices", faster), ("name", "other"), ("bandwidth", c.bandwidth * 2),
                        ("latency", c.latency + 1)):
        with pytest.raises(AttributeError, match=rf"^a cluster's {name} is read-only \(make another with "
                                                 r"Cluster\(devices, bandwidth, latency, name=\.\.\.\)\)$"):
            setattr(c, name, value)
        with pytest.raises(AttributeError, match=rf"^a cluster's {name} is read-only"):
            delattr(c, name)
    for name in ("num_devices", "memory", "new_field"):
        with pytest.raises(AttributeError, match=rf"^a cluster's {name} cannot be set: a cluster is immutable"):
            setattr(c, name, 1)
    assert sim.time(g, c, [0, 1, 0, 1]).step_time == before == Simulator().time(g, c, [0, 1, 0, 1]).step_time
    assert c.fingerprint() == fingerprint and hash(c) == hashed
    c.inverse_bandwidth()  # kept in a private attribute, as before
    for again in (pickle.loads(pickle.dumps(c)), copy.deepcopy(c), copy.copy(c), c.subset([0, 1], name="k80x2")):
        assert again == c and again.fingerprint() == fingerprint
        with pytest.raises(AttributeError, match="read-only"):
            again.devices = faster
