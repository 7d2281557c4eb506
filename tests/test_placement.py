"""Tests of ``gnplace.placement``: the Placement object and placement files."""

from __future__ import annotations

import dataclasses
import json
import re
import warnings

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.exceptions import GnplaceError, InvalidArgument, InvalidPlacement
from gnplace.graph import OpGraph
from gnplace.placement import GraphKey, Placement, as_placement, load_placement, save_placement
from gnplace.toy import chain_graph, mlp_training_graph


@pytest.fixture(scope="module")
def k80x2():
    return load_cluster("k80x2")


@pytest.fixture(scope="module")
def k80x4():
    return load_cluster("k80x4")


def grouped() -> OpGraph:
    """Five ops in groups ``[0, 0, 1, 2, 1]`` (ids renumbered from 9, 9, 4, 7, 4)."""
    return OpGraph([f"o{i}" for i in range(5)], [(0, 1), (1, 2), (2, 3), (3, 4)], group=[9, 9, 4, 7, 4], name="grouped")


# ------------------------------------------------------------------------------- object
def test_devices_are_read_only_int64_copy(k80x2):
    source = np.array([0, 1, 1], dtype=np.int32)
    p = Placement(source, k80x2)
    source[0] = 1
    assert p.devices.tolist() == [0, 1, 1]
    assert p.devices.dtype == np.int64
    assert not p.devices.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        p.devices[0] = 1


def test_fractional_device_indices_are_refused_not_cut(k80x2):
    assert Placement([0.0, 1.0], k80x2).devices.tolist() == [0, 1]  # whole floats, as a JSON reader may give
    for bad in ([0, 0.7], [np.nan, 0]):
        with pytest.raises(InvalidPlacement, match="whole numbers"):
            Placement(bad, k80x2)


def test_placement_is_frozen(k80x2):
    p = Placement([0, 0], k80x2)
    with pytest.raises(AttributeError):
        p.devices = np.zeros(2)  # type: ignore[misc]


def test_from_groups_expands_per_op(k80x4):
    g = grouped()
    p = Placement.from_groups(g, k80x4, [3, 1, 2])
    assert p.devices.tolist() == [3, 3, 1, 2, 1]
    assert p.cluster is k80x4
    assert not p.splits_groups(g)


@pytest.mark.parametrize("group_devices", [[0, 1], [0, 1, 2, 3], [[0, 1, 2]]])
def test_from_groups_wrong_shape(k80x4, group_devices):
    shape = np.asarray(group_devices).shape
    with pytest.raises(
        InvalidPlacement, match=rf"^group placement has shape {re.escape(str(shape))}, graph 'grouped' has 3 groups$"
    ):
        Placement.from_groups(grouped(), k80x4, group_devices)


def test_from_groups_refuses_a_fractional_device_index(k80x4):
    # Placement refuses 0.7; from_groups cast it to device 0 first
    with pytest.raises(InvalidPlacement, match="whole numbers, got 0.7"):
        Placement.from_groups(grouped(), k80x4, [0.7, 1.0, 2.0])
    assert Placement.from_groups(grouped(), k80x4, [3.0, 1.0, 2.0]).devices.tolist() == [3, 3, 1, 2, 1]


@pytest.mark.parametrize("devices, message", [
    (np.array([1 + 1j, 0, 1]), "whole numbers, got (1+1j)"),  # cast to device 1, the imaginary part dropped
    (np.array([1 + 0j, 0, 1]), "whole numbers, got (1+0j)"),
    (np.array([np.inf, 0.0, 1.0]), "device index inf names no device"),  # was device -9223372036854775808
    (np.array([0.0, -np.inf, 1.0]), "device index -inf names no device"),
    (np.array([0.0, 1e30, 1.0]), "device index 1e+30 names no device"),
])
def test_complex_and_infinite_device_indices_are_refused(k80x2, devices, message):
    from gnplace.placement import as_placement
    from gnplace.sim.simulator import Simulator

    with pytest.raises(InvalidPlacement, match=re.escape(message)):
        as_placement(chain_graph(3), k80x2, devices)
    with pytest.raises(InvalidPlacement, match=re.escape(message)):
        Simulator().time_batch(chain_graph(3), k80x2, devices[None, :])


@pytest.mark.parametrize("devices, shown", [(["gpu0", "gpu1", "gpu0"], "'gpu0'"), ([0, None, 1], "None"),
                                            (["0", "1", "1"], "'0'"), ([True, False, True], "True"),
                                            ([0, 1, True], "True"), ([1.0, True, 0], "True"),
                                            ([1, "gpu1", 0], "'gpu1'")])
def test_device_indices_that_are_no_numbers_are_refused(k80x2, devices, shown):
    """Names were a numpy ValueError traceback; "0" and True were read as indices, also among numbers; the value
    shown was numpy's conversion of another element ('1' for [1, "gpu1", 0])."""
    from gnplace.placement import as_placement
    from gnplace.sim.simulator import Simulator

    with pytest.raises(InvalidPlacement, match=rf"whole numbers, got {re.escape(shown)} \(to place ops by device name"):
        as_placement(chain_graph(3), k80x2, devices)
    with pytest.raises(InvalidPlacement, match=rf"^batch of placements: .* got {re.escape(shown)}$"):  # no mapping there
        Simulator().time_batch(chain_graph(3), k80x2, [devices])
    with pytest.raises(InvalidPlacement, match=r"device index 1180591620717411303424 names no device"):
        as_placement(chain_graph(3), k80x2, [0, 2**70, 1])


def test_device_names(k80x2):
    g = chain_graph(3)
    assert Placement([0, 1, 1], k80x2).device_names(g) == {"op0": "gpu0", "op1": "gpu1", "op2": "gpu1"}


def test_check_accepts_valid(k80x4):
    Placement([0, 3, 2], k80x4).check(chain_graph(3))


@pytest.mark.parametrize(
    "devices, match",
    [
        ([0, 1], r"^placement has 2 entries, graph 'chain3' has 3 ops$"),
        ([0, 1, 1, 0], r"^placement has 4 entries, graph 'chain3' has 3 ops$"),
        ([[0, 1, 1]], r"^placement has shape \(1, 3\), graph 'chain3' has 3 ops$"),
        (0, r"^placement has shape \(\), graph 'chain3' has 3 ops$"),
        ([0, 2, 1], r"^op 'op1' is placed on device 2, but cluster 'k80x2' has devices 0\.\.1$"),
        ([0, 1, -1], r"^op 'op2' is placed on device -1, but cluster 'k80x2' has devices 0\.\.1$"),
    ],
)
def test_check_errors(k80x2, devices, match):
    with pytest.raises(InvalidPlacement, match=match):
        Placement(devices, k80x2).check(chain_graph(3))


@pytest.mark.parametrize("method", ["check", "device_names", "group_devices", "splits_groups"])
@pytest.mark.parametrize("graph", [None, "chain3.gnpg"])
def test_methods_refuse_what_is_no_graph(k80x2, method, graph):
    # each was an AttributeError ('num_ops') from inside check
    with pytest.raises(InvalidArgument, match=r"^graph must be an OpGraph \(gnplace\.load_graph\(path\)\), got "):
        getattr(Placement([0, 1, 1], k80x2), method)(graph)


def test_from_groups_refuses_what_is_no_graph(k80x2):
    with pytest.raises(InvalidArgument, match=r"^graph must be an OpGraph"):  # an AttributeError ('num_groups')
        Placement.from_groups(None, k80x2, [0, 1, 1])


@pytest.mark.parametrize(
    "devices, splits",
    [
        ([0, 0, 1, 2, 1], False),
        ([1, 1, 1, 1, 1], False),
        ([0, 1, 1, 2, 1], True),  # group 0 on devices 0 and 1
        ([0, 0, 1, 2, 3], True),  # group 1 on devices 1 and 3
        ([0, 0, 1, 1, 1], False),  # two groups may share a device
    ],
)
def test_splits_groups(k80x4, devices, splits):
    assert Placement(devices, k80x4).splits_groups(grouped()) is splits


def test_splits_groups_of_mlp(k80x4):
    g = mlp_training_graph(layers=3, width=8, batch=4)
    per_group = np.arange(g.num_groups) % 4
    p = Placement.from_groups(g, k80x4, per_group)
    assert not p.splits_groups(g)
    devices = p.devices.copy()
    first_matmul = g.index("t0.l0.matmul")
    devices[g.index("t0.l0.update")] = (devices[first_matmul] + 1) % 4
    assert Placement(devices, k80x4).splits_groups(g)


# ------------------------------------------------------------------------------- as_placement
def test_as_placement_from_list_and_array(k80x2):
    g = chain_graph(3)
    for value in ([0, 1, 0], np.array([0, 1, 0]), (0, 1, 0)):
        p = as_placement(g, k80x2, value)
        assert isinstance(p, Placement) and p.cluster is k80x2
        assert p.devices.tolist() == [0, 1, 0]


def test_as_placement_from_dict(k80x2):
    g = chain_graph(3)
    p = as_placement(g, k80x2, {"op2": "gpu0", "op0": "gpu1", "op1": "gpu1"})
    assert p.devices.tolist() == [1, 1, 0]


def test_as_placement_keeps_placement_of_same_cluster(k80x2):
    p = Placement([0, 1, 0], k80x2)
    assert as_placement(chain_graph(3), k80x2, p) is p


def test_as_placement_rebinds_placement_to_given_cluster(k80x2, k80x4):
    p = Placement([0, 1, 0], k80x2)
    q = as_placement(chain_graph(3), k80x4, p)
    assert q.cluster is k80x4 and q.devices.tolist() == [0, 1, 0]


def test_a_placement_is_not_read_on_a_cluster_whose_devices_at_its_indices_differ(k80x2):
    """``single``'s [0, 0, 0] on k80x2 was timed on cpu_gpu's CPU (device 0 there), 8x slower, without a word."""
    from gnplace.cluster import load_cluster
    from gnplace.sim import simulate

    cpu_gpu = load_cluster("cpu_gpu")
    with pytest.raises(InvalidPlacement, match=r"^placement was made for cluster 'k80x2', whose device 0 is 'gpu0' "
                                               r"\(k80\), not for cluster 'cpu_gpu', whose device 0 is 'cpu0' \(cpu\)"):
        simulate(chain_graph(3), cpu_gpu, Placement([0, 0, 0], k80x2))
    with pytest.raises(InvalidPlacement, match="whose device 0 is 'gpu1'"):  # a subset renumbers the devices
        as_placement(chain_graph(3), k80x2, Placement([0, 0, 0], k80x2.subset([1, 0])))
    assert simulate(chain_graph(3), load_cluster("k80x2"), Placement([0, 1, 0], k80x2)).step_time > 0


def test_a_placement_is_not_read_where_a_device_of_the_same_name_is_of_another_kind(k80x2):
    """Devices are the same at an index when both their names and their kinds are: a gpu0 that is a V100 is not."""
    from gnplace.cluster import Cluster

    v100s = Cluster([dataclasses.replace(d, kind="v100") for d in k80x2.devices], k80x2.bandwidth, k80x2.latency,
                    name="v100s")
    with pytest.raises(InvalidPlacement, match=r"^placement was made for cluster 'k80x2', whose device 0 is 'gpu0' "
                                               r"\(k80\), not for cluster 'v100s', whose device 0 is 'gpu0' \(v100\)"):
        as_placement(chain_graph(3), v100s, Placement([0, 0, 0], k80x2))


@pytest.mark.parametrize(
    "value, match",
    [
        ([0, 1], r"placement has 2 entries, graph 'chain3' has 3 ops"),
        ([0, 1, 5], r"op 'op2' is placed on device 5, but cluster 'k80x2' has devices 0\.\.1"),
        ({"op0": "gpu0", "op1": "gpu1"}, r"^placement: 1 op of graph 'chain3' has no device, e\.g\. 'op2'$"),
        ({"op0": "gpu0", "op1": "gpu0", "op2": "gpu7"}, r"^placement: op 'op2' is placed on unknown device 'gpu7' \(cluster 'k80x2' has gpu0, gpu1\)$"),
        ({"op0": "gpu0", "op1": "gpu0", "op2": "gpu0", "op9": "gpu0"}, r"^placement: op 'op9' is not in graph 'chain3'$"),
        ({"op0": 0, "op1": 0, "op2": 0}, r"placed on unknown device 0"),
    ],
)
def test_as_placement_errors(k80x2, value, match):
    with pytest.raises(InvalidPlacement, match=match):
        as_placement(chain_graph(3), k80x2, value)


def test_as_placement_checks_a_placement_object(k80x2):
    with pytest.raises(InvalidPlacement, match="placement has 2 entries"):
        as_placement(chain_graph(3), k80x2, Placement([0, 0], k80x2))


def test_invalid_placement_is_a_gnplace_value_error():
    assert issubclass(InvalidPlacement, GnplaceError) and issubclass(InvalidPlacement, ValueError)


# ------------------------------------------------------------------------------- files
def test_save_load_round_trip(tmp_path, k80x4):
    g = mlp_training_graph(layers=2, width=8, batch=4)
    p = Placement.from_groups(g, k80x4, [3, 0, 2])
    path = save_placement(tmp_path / "sub" / "p.json", g, p, placer="round_robin", predicted={"step_time_s": 0.25})
    assert path == tmp_path / "sub" / "p.json"
    back = load_placement(path, g, k80x4)
    assert back.devices.tolist() == p.devices.tolist()
    assert back.cluster is k80x4
    data = json.loads(path.read_text())
    assert data["format"] == "gnplace-placement" and data["version"] == 1
    assert data["graph"] == g.name and data["cluster"] == "k80x4" and data["placer"] == "round_robin"
    assert data["predicted"] == {"step_time_s": 0.25}
    assert data["placement"] == p.device_names(g)
    assert list(data["placement"]) == list(g.node_names)


def test_load_looks_devices_up_by_name_not_by_a_scan_per_op(tmp_path, monkeypatch):
    """Each op's device was found by ``list.index`` over the cluster's names: O(ops x devices), 4 s for a
    100,000-op placement on 4,096 devices; the names are now looked up in a mapping made once."""
    from gnplace.cluster import Cluster
    from gnplace.toy import toy_cluster

    g, cluster = chain_graph(200), toy_cluster(64)
    p = Placement(np.arange(200) % 64, cluster)
    path = save_placement(tmp_path / "p.json", g, p)
    scans = []

    class Names(list):
        def index(self, *args):
            scans.append(args)
            return super().index(*args)

        def __contains__(self, item):
            scans.append(item)
            return super().__contains__(item)

    plain = Cluster.device_names
    monkeypatch.setattr(Cluster, "device_names", property(lambda self: Names(plain.fget(self))))
    assert load_placement(path, g, cluster).devices.tolist() == p.devices.tolist()
    assert as_placement(g, cluster, p.device_names(g)).devices.tolist() == p.devices.tolist()
    assert len(scans) < 10  # none per op


def test_load_takes_the_cluster_the_file_names_or_the_one_given(tmp_path, k80x4):
    g = mlp_training_graph(layers=2, width=8, batch=4)
    path = save_placement(tmp_path / "p.json", g, Placement.from_groups(g, k80x4, [3, 0, 2]))
    by_name = load_placement(path, g)  # the preset the file names
    assert by_name.cluster.name == "k80x4" and by_name.devices.tolist() == load_placement(path, g, k80x4).devices.tolist()
    assert load_placement(path, g, "k80x4").cluster.name == "k80x4"
    data = json.loads(path.read_text())
    data["cluster"] = "my_lab"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidPlacement, match="made for cluster 'my_lab', which is not a preset; give its cluster file"):
        load_placement(path, g)
    del data["cluster"]
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidPlacement, match="names no cluster"):
        load_placement(path, g)
    assert load_placement(path, g, k80x4).devices.tolist() == by_name.devices.tolist()


def test_save_defaults_and_overwrite(tmp_path, k80x2):
    g = chain_graph(3)
    path = tmp_path / "p.json"
    save_placement(path, g, Placement([0, 0, 0], k80x2))
    save_placement(path, g, Placement([1, 1, 0], k80x2))
    data = json.loads(path.read_text())
    assert data["placer"] == "" and data["predicted"] == {}
    assert load_placement(path, g, k80x2).devices.tolist() == [1, 1, 0]
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]


def test_another_graphs_placement_is_not_saved(tmp_path, k80x2):
    """A 3-op placement saved for a 5-op graph was cut short without a word (refused only when loaded)."""
    placement = Placement.from_groups(chain_graph(3), k80x2, [0, 1, 1])
    with pytest.raises(InvalidPlacement):
        save_placement(tmp_path / "bad.json", chain_graph(5), placement)
    assert not (tmp_path / "bad.json").exists()


def test_load_ignores_key_order_and_extra_fields(tmp_path, k80x2):
    g = chain_graph(3)
    path = tmp_path / "hand.json"
    path.write_text(json.dumps({
        "placement": {"op2": "gpu1", "op1": "gpu0", "op0": "gpu1"}, "version": 1,
        "format": "gnplace-placement", "note": "written by hand",
    }))
    assert load_placement(path, g, k80x2).devices.tolist() == [1, 0, 1]


def write_placement(tmp_path, mapping) -> object:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "gnplace-placement", "version": 1, "placement": mapping}))
    return path


@pytest.mark.parametrize(
    "mapping, problem",
    [
        ({"op0": "gpu0", "op1": "gpu1"}, r"1 op of graph 'chain3' has no device, e\.g\. 'op2'"),
        ({}, r"3 ops of graph 'chain3' have no device, e\.g\. 'op0'"),
        ({"op0": "gpu0", "op1": "gpu1", "op2": "tpu0"}, r"op 'op2' is placed on unknown device 'tpu0' \(cluster 'k80x2' has gpu0, gpu1\)"),
        ({"op0": "gpu0", "op1": "gpu1", "op2": "gpu1", "extra": "gpu0"}, r"op 'extra' is not in graph 'chain3'"),
    ],
)
def test_bad_placement_file_contents(tmp_path, k80x2, mapping, problem):
    path = write_placement(tmp_path, mapping)
    with pytest.raises(InvalidPlacement, match=rf"^{re.escape(str(path))}: {problem}$"):
        load_placement(path, chain_graph(3), k80x2)


def test_placement_file_for_another_graph(tmp_path, k80x2):
    """The error named the graph given alone: an ONNX import's file read with the torch import said an op was missing."""
    path = save_placement(tmp_path / "p.json", chain_graph(4), Placement([0, 1, 0, 1], k80x2))
    with pytest.raises(InvalidPlacement, match=r"op 'op3' is not in graph 'chain3' \(the file was made for graph "
                                               r"'chain4'\)$"):
        load_placement(path, chain_graph(3), k80x2)
    with pytest.raises(InvalidPlacement, match=r"1 op of graph 'chain5' has no device, e\.g\. 'op4' \(the file was "
                                               r"made for graph 'chain4'\)$"):
        load_placement(path, chain_graph(5), k80x2)


def test_placement_file_for_another_cluster(tmp_path, k80x2, k80x4):
    g = chain_graph(3)
    path = save_placement(tmp_path / "p.json", g, Placement([0, 3, 2], k80x4))
    with pytest.raises(InvalidPlacement, match=r"op 'op1' is placed on unknown device 'gpu3' \(cluster 'k80x2' has gpu0, gpu1\); the file was made "
                                                  r"for cluster 'k80x4', not 'k80x2': give that cluster \(its file\)$"):
        load_placement(path, g, k80x2)


@pytest.mark.parametrize(
    "content",
    ["not json at all", '{"format": "gnplace-placement", "placement": {', "", "\x00\x01"],
    ids=["text", "truncated", "empty", "binary"],
)
def test_placement_file_not_json(tmp_path, k80x2, content):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(InvalidPlacement, match=rf"^{re.escape(str(path))}: not a readable placement file \(.+\)$"):
        load_placement(path, chain_graph(3), k80x2)


def test_placement_file_not_utf8(tmp_path, k80x2):
    path = tmp_path / "p.json"
    path.write_bytes(b"\xff\xfe\xfa")
    with pytest.raises(InvalidPlacement, match=r"not a readable placement file"):
        load_placement(path, chain_graph(3), k80x2)


@pytest.mark.parametrize(
    "content",
    [
        {"placement": {"op0": "gpu0"}},
        {"format": "gnplace-opgraph", "placement": {}},
        {"format": "gnplace-placement"},
        {"format": "gnplace-placement", "placement": ["gpu0", "gpu1", "gpu0"]},
        [1, 2],
    ],
)
def test_json_that_is_not_a_placement(tmp_path, k80x2, content):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(content))
    with pytest.raises(
        InvalidPlacement,
        match=rf"^{re.escape(str(path))}: not a gnplace placement file \(no 'format': 'gnplace-placement' and 'placement' map\)$",
    ):
        load_placement(path, chain_graph(3), k80x2)


def test_missing_placement_file(tmp_path, k80x2):
    path = tmp_path / "absent.json"
    with pytest.raises(InvalidPlacement, match=rf"^{re.escape(str(path))}: no such placement file$"):
        load_placement(path, chain_graph(3), k80x2)


def test_placement_path_is_directory(tmp_path, k80x2):
    with pytest.raises(InvalidPlacement, match=r"is a folder, not a placement file$"):
        load_placement(tmp_path, chain_graph(3), k80x2)


def test_placements_compare_by_devices_and_cluster():
    from gnplace.cluster import load_cluster
    from gnplace.placement import Placement

    c = load_cluster("k80x2")
    assert Placement([0, 1], c) == Placement([0, 1], c)
    assert Placement([0, 1], c) != Placement([1, 1], c)
    assert Placement([0, 1], c) == Placement([0, 1], load_cluster("k80x2"))  # another object of that cluster
    assert len({Placement([0, 1], c), Placement([0, 1], load_cluster("k80x2"))}) == 1
    assert Placement([0, 1], c) != Placement([0, 1], load_cluster("k80x4"))
    assert Placement([0, 1], c) != Placement([0, 1], c.subset([1, 0]))


def test_group_devices_inverts_from_groups():
    from gnplace.toy import toy_cluster

    g, c = mlp_training_graph(layers=3, width=8, batch=4), toy_cluster(3)
    per_group = np.array([2, 0, 1, 2])
    assert Placement.from_groups(g, c, per_group).group_devices(g).tolist() == per_group.tolist()
    split = np.zeros(g.num_ops, dtype=np.int64)
    split[np.flatnonzero(g.group == 1)[0]] = 1
    with pytest.raises(InvalidPlacement, match="splits a colocation group"):
        Placement(split, c).group_devices(g)


def test_failed_save_keeps_the_old_placement_and_leaves_no_tmp(tmp_path, disk_full_at):

    g, c = chain_graph(3), load_cluster("k80x2")
    target = save_placement(tmp_path / "p.json", g, Placement([0, 1, 1], c))
    before = target.read_bytes()
    with pytest.raises(IsADirectoryError):
        save_placement(str(tmp_path) + "/", g, Placement([0, 0, 0], c))
    with pytest.raises(NotADirectoryError):
        save_placement(target / "p.json", g, Placement([0, 0, 0], c))

    disk_full_at()
    with pytest.raises(OSError, match="No space left"):
        save_placement(target, g, Placement([0, 0, 0], c))
    assert target.read_bytes() == before
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("version", [2, "1", None, True, 1.0])  # true and 1.0 were read as 1
def test_placement_file_of_another_version_is_refused(tmp_path, k80x2, version):
    path = tmp_path / "p.json"
    content = {"format": "gnplace-placement", "placement": {"op0": "gpu0", "op1": "gpu1", "op2": "gpu0"}}
    if version is not None:
        content["version"] = version
    path.write_text(json.dumps(content))
    with pytest.raises(InvalidPlacement, match=rf"^{re.escape(str(path))}: placement file version {version!r}; "
                                               r"this gnplace reads version 1 \(write it again\)$"):
        load_placement(path, chain_graph(3), k80x2)


def test_a_placement_written_for_another_graph_warns_but_applies(tmp_path, k80x2):
    g = chain_graph(3)
    path = save_placement(tmp_path / "p.json", g, Placement([1, 0, 1], k80x2))
    other = chain_graph(3, flops=2e9).replace(name="another")
    with pytest.warns(UserWarning, match=r"written for graph 'chain3', not 'another'; its op names all match"):
        assert load_placement(path, other, k80x2).devices.tolist() == [1, 0, 1]


def test_a_placement_made_for_another_graph_of_as_many_ops_is_refused(tmp_path, k80x2, k80x4):
    """Only the number of ops was checked: a placement of one graph simulated, timed or applied another."""
    import pickle

    from gnplace.sim.simulator import Simulator

    mine = grouped()
    other = OpGraph([f"p{i}" for i in range(5)], [(0, 1), (1, 2), (2, 3), (3, 4)], name="other")
    rewired = OpGraph([f"o{i}" for i in range(5)], [(0, 1), (0, 2), (2, 3), (3, 4)], name="grouped")
    placement = Placement.from_groups(mine, k80x2, [0, 1, 1])
    with pytest.raises(InvalidPlacement, match=r"^placement was made for graph 'grouped', not graph 'other' "
                                               r"\(their op names or edges differ, though both have as many ops\): "):
        placement.check(other)
    with pytest.raises(InvalidPlacement, match=r"^placement was made for another graph of that name, not graph "):
        as_placement(rewired, k80x2, placement)
    with pytest.raises(InvalidPlacement, match="made for graph 'grouped'"):
        Simulator().time(other, k80x2, placement)
    with pytest.raises(InvalidPlacement, match="made for graph 'grouped'"):  # the graph goes along to another cluster
        as_placement(other, k80x4, placement)
    path = save_placement(tmp_path / "p.json", mine, placement)
    with pytest.raises(InvalidPlacement, match="made for graph 'grouped'"):
        load_placement(path, mine, k80x2).check(other)
    # the same graph built again, or with other costs and name, is the same graph; bare indices know no graph
    same = grouped().replace(flops=np.full(5, 3e9), name="renamed")
    assert as_placement(same, k80x2, placement) is placement
    assert Placement(placement.devices, k80x2).made_for is None
    Placement(placement.devices, k80x2).check(other)
    from gnplace.placement import GraphKey

    assert pickle.loads(pickle.dumps(placement)).made_for == GraphKey.of(mine)
    old = Placement([0, 1, 0], k80x2)
    object.__delattr__(old, "made_for")  # as unpickled from before the field existed
    assert old.made_for is None
    old.check(chain_graph(3))


def test_a_placement_file_that_splits_a_colocation_group_is_timed_but_warned_of(tmp_path, k80x2):
    """It loaded with no word, though its ops of one group must share a device."""
    g = grouped()  # groups [0, 0, 1, 2, 1]
    path = tmp_path / "split.json"
    path.write_text(json.dumps({"format": "gnplace-placement", "version": 1, "cluster": "k80x2",
                                "placement": {"o0": "gpu0", "o1": "gpu1", "o2": "gpu1", "o3": "gpu0", "o4": "gpu0"}}))
    with pytest.warns(UserWarning, match=rf"^{re.escape(str(path))} splits 2 colocation groups \(ops that must share a "
                                         r"device\) over devices, e\.g\. op 'o0' on gpu0 and 'o1' of its group on gpu1; "
                                         r"it is used as it is$"):
        assert load_placement(path, g, k80x2).devices.tolist() == [0, 1, 1, 0, 0]
    whole = save_placement(tmp_path / "whole.json", g, Placement.from_groups(g, k80x2, [1, 0, 1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a placement that keeps its groups whole, on its own cluster: no word
        load_placement(whole, g, k80x2)


def test_a_placement_file_of_another_version_of_the_graph_is_warned_of(tmp_path, k80x2):
    """An --optimizer adam placement read with the sgd graph of that model (the same op names) was timed silently."""
    sgd = mlp_training_graph(layers=2, width=8, batch=4)
    adam = sgd.replace(param_bytes=sgd.param_bytes * 3)  # the same names and edges, three times the state
    path = save_placement(tmp_path / "adam.json", adam, Placement.from_groups(adam, k80x2, [1, 0, 1]))
    assert json.loads(path.read_text())["graph_fingerprint"] == adam.fingerprint()
    with pytest.warns(UserWarning, match=r"adam\.json was made for another version of graph 'mlp1x2w8b4' \(other op kinds, "
                                         r"sizes or costs: another --optimizer or --input-shape, or measured costs\?\); "
                                         r"its op names all match, so it is used as it is, on this graph$"):
        assert load_placement(path, sgd, k80x2).devices.tolist() == load_placement(path, adam, k80x2).devices.tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_placement(path, adam, k80x2)  # its own graph, or one without its name: no word
        load_placement(path, sgd, k80x2, warn_other_name=False)
        data = json.loads(path.read_text())
        del data["graph_fingerprint"]  # written before files recorded it: by op names alone, as before
        path.write_text(json.dumps(data))
        load_placement(path, sgd, k80x2)


def test_a_placement_file_made_for_another_cluster_is_refused_or_warned_of(tmp_path, k80x2, k80x4):
    """It ran silently on any cluster that has its device names: k80x2's file on k80x4 timed another placement."""
    from gnplace.cluster import Cluster

    g = chain_graph(3)
    two = save_placement(tmp_path / "two.json", g, Placement([1, 0, 1], k80x2))
    with pytest.raises(InvalidPlacement, match=rf"^{re.escape(str(two))}: was made for cluster 'k80x2', whose devices "
                                               r"differ from those of 'k80x4' \(2 devices there, 4 here\): time it on "
                                               r"'k80x2', or place the graph on 'k80x4'$"):
        load_placement(two, g, k80x4)
    renamed = Cluster(list(k80x2.devices), k80x2.bandwidth, k80x2.latency, name="lab2")
    with pytest.warns(UserWarning, match=r"two\.json was made for cluster 'k80x2', not 'lab2'; its devices are the "
                                         r"same by name and kind, so it is used as it is$"):
        assert load_placement(two, g, renamed).devices.tolist() == [1, 0, 1]
    faster = Cluster([dataclasses.replace(d, kind="v100") for d in k80x2.devices], k80x2.bandwidth, k80x2.latency,
                     name="fast2")
    with pytest.raises(InvalidPlacement, match=r"differ from those of 'fast2' \(device 0 is gpu0 \(k80\) there, gpu0 "
                                               r"\(v100\) here\)"):
        load_placement(two, g, faster)
    # no preset: compared by the devices the file records (name and kind of each)
    mine = save_placement(tmp_path / "mine.json", g, Placement([1, 0, 1], renamed))
    assert json.loads(mine.read_text())["devices"] == [{"name": d.name, "kind": d.kind} for d in k80x2.devices]
    with pytest.warns(UserWarning, match=r"mine\.json was made for cluster 'lab2', not 'k80x2'; its devices are the "
                                         r"same by name and kind, so it is used as it is$"):
        load_placement(mine, g, k80x2)
    fast = save_placement(tmp_path / "fast.json", g, Placement([1, 0, 1], faster))
    with pytest.raises(InvalidPlacement, match=r"fast\.json: was made for cluster 'fast2', whose devices differ from "
                                               r"those of 'k80x2' \(device 0 is gpu0 \(v100\) there, gpu0 \(k80\) "
                                               r"here\): time it on the cluster file of 'fast2', or place the graph "
                                               r"on 'k80x2'$"):  # no preset: 'time it on fast2' sent to -c fast2
        load_placement(fast, g, k80x2)
    same_name = Cluster(list(k80x2.devices), k80x2.bandwidth, k80x2.latency, name="fast2")  # other devices, one name
    with pytest.raises(InvalidPlacement, match=r"time it on the cluster it was made for, or place the graph on "):
        load_placement(fast, g, same_name)
    data = json.loads(fast.read_text())
    del data["devices"]  # a file written before files recorded their devices: its name alone, as before
    fast.write_text(json.dumps(data))
    with pytest.warns(UserWarning, match=r"fast\.json was made for cluster 'fast2', not 'k80x2'; its device names "
                                         r"all exist there, so it is used as it is$"):
        load_placement(fast, g, k80x2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_placement(fast, g, same_name)  # and one of the same name is taken as the same, as before
    for bad in ("k80", [{"name": "gpu0"}], [["gpu0", "k80"]]):
        data["devices"] = bad
        fast.write_text(json.dumps(data))
        with pytest.raises(InvalidPlacement, match=r"fast\.json: 'devices' is not a list of \{\"name\": \.\.\., "
                                                   r"\"kind\": \.\.\.\} \(write the file again\)$"):
            load_placement(fast, g, k80x2)


def test_recorded_preset_names_the_preset_a_placement_file_was_made_for_else_none(tmp_path):
    from gnplace.cluster import Cluster
    from gnplace.placement import recorded_preset

    g, k80x2 = chain_graph(3), load_cluster("k80x2")
    assert recorded_preset(save_placement(tmp_path / "p.json", g, Placement([0, 1, 0], k80x2))) == "k80x2"
    mine = Cluster(list(k80x2.devices), k80x2.bandwidth, k80x2.latency, name="mine")
    assert recorded_preset(save_placement(tmp_path / "mine.json", g, Placement([0, 1, 0], mine))) is None
    (tmp_path / "bad.json").write_text("gpu0 gpu1")
    (tmp_path / "other.json").write_text(json.dumps({"cluster": "k80x2"}))  # no placement file
    for path in (tmp_path / "bad.json", tmp_path / "other.json", tmp_path / "missing.json", tmp_path):
        assert recorded_preset(path) is None


def test_recorded_placer_is_the_placer_a_placement_file_records_else_none(tmp_path):
    from gnplace.placement import recorded_placer

    g, p = chain_graph(3), Placement([0, 1, 0], load_cluster("k80x2"))
    assert recorded_placer(save_placement(tmp_path / "p.json", g, p, placer="heft")) == "heft"
    assert recorded_placer(save_placement(tmp_path / "n.json", g, p)) is None  # written as ""
    data = json.loads((tmp_path / "p.json").read_text())
    data["placer"] = ["heft"]
    (tmp_path / "odd.json").write_text(json.dumps(data))
    (tmp_path / "bad.json").write_text("gpu0 gpu1")
    for path in (tmp_path / "odd.json", tmp_path / "bad.json", tmp_path / "missing.json", tmp_path):
        assert recorded_placer(path) is None


def test_recorded_mode_is_the_simulator_mode_a_placement_file_records_else_none(tmp_path):
    from gnplace.placement import recorded_mode

    g, k80x2 = chain_graph(3), load_cluster("k80x2")
    p = Placement([0, 1, 0], k80x2)
    assert recorded_mode(save_placement(tmp_path / "p.json", g, p, predicted={"mode": "placeto"})) == "placeto"
    assert recorded_mode(save_placement(tmp_path / "d.json", g, p, predicted={"mode": "default"})) == "default"
    for predicted in (None, {"mode": "fastest"}, {"mode": ["placeto"]}, {"step_time_s": 1.0}):
        assert recorded_mode(save_placement(tmp_path / "x.json", g, p, predicted=predicted)) is None
    (tmp_path / "bad.json").write_text("gpu0 gpu1")
    for path in (tmp_path / "bad.json", tmp_path / "missing.json", tmp_path):
        assert recorded_mode(path) is None


def test_a_placement_file_made_on_a_cluster_file_borrowing_a_presets_name_is_not_taken_for_the_preset(tmp_path):
    """Files recorded the cluster's name only: one made on a ``name: k80x2`` file of 3 MiB devices was timed on
    the preset k80x2 with no word (``simulate -p FILE``)."""
    from gnplace.cluster import Cluster
    from gnplace.placement import recorded_preset

    g, k80x2 = chain_graph(3), load_cluster("k80x2")
    tiny = Cluster([dataclasses.replace(d, memory=3 * 2**20) for d in k80x2.devices], k80x2.bandwidth,
                   k80x2.latency, name="k80x2")
    path = save_placement(tmp_path / "p.json", g, Placement([1, 0, 1], tiny))
    assert json.loads(path.read_text())["cluster_fingerprint"] == tiny.fingerprint()
    refused = (rf"^{re.escape(str(path))}: was made on a cluster file named 'k80x2', not on the preset of that name "
               r"\(other speeds, memories or links\): give that cluster file$")
    with pytest.raises(InvalidPlacement, match=refused):
        recorded_preset(path)
    with pytest.raises(InvalidPlacement, match=refused):
        load_placement(path, g)  # the cluster it names, taken from the file
    with pytest.warns(UserWarning, match=r"p\.json was made for another cluster named 'k80x2' \(the same devices by "
                                         r"name and kind, other speeds, memories or links\); it is used as it is, "
                                         r"timed on this 'k80x2'$"):
        assert load_placement(path, g, k80x2).devices.tolist() == [1, 0, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_placement(path, g, tiny)  # the very cluster: nothing to say
        preset = save_placement(tmp_path / "preset.json", g, Placement([1, 0, 1], k80x2))
        assert recorded_preset(preset) == "k80x2"
        load_placement(preset, g)
    k80x4 = load_cluster("k80x4")
    with pytest.raises(InvalidPlacement, match=r"\(2 devices there, 4 here\): time it on the cluster it was made "
                                               r"for, or place"):  # not on the preset k80x2
        load_placement(path, g, k80x4)


def test_group_devices_and_device_names_refuse_a_placement_of_another_length():
    """A numpy shape error, and a mapping cut short by zip, before."""
    g, c = chain_graph(4), load_cluster("k80x2")
    short = Placement(np.zeros(3, dtype=np.int64), c)
    for call in (short.group_devices, short.device_names, short.splits_groups):
        with pytest.raises(InvalidPlacement, match="3 entries"):
            call(g)


def test_unsigned_indices_past_int64_are_refused_as_given():
    """uint64 2**63 was reported as device -9223372036854775808."""
    g, c = chain_graph(4), load_cluster("k80x2")
    with pytest.raises(InvalidPlacement, match="device index 9223372036854775808 names no device"):
        as_placement(g, c, np.array([0, 0, 0, 2**63], dtype=np.uint64))


@pytest.mark.parametrize("predicted", [{"step_time_s": float("inf")}, {"step_time_s": float("nan")},
                                       {"n": np.int64(1)}])
def test_save_placement_refuses_what_load_placement_would_refuse(tmp_path, k80x2, predicted):
    """``predicted={"step_time_s": inf}`` wrote ``Infinity``, a file load_placement then refused."""
    from gnplace.exceptions import InvalidArgument

    path = tmp_path / "p.json"
    with pytest.raises(InvalidArgument, match=r"^placement file: predicted must hold JSON values"):
        save_placement(path, chain_graph(3), Placement([0, 1, 0], k80x2), predicted=predicted)
    assert not path.exists()


@pytest.mark.parametrize("given, message", [
    ({"placer": np.int64(3)}, "placer must be the placer's name (a str), got np.int64(3)"),
    ({"placer": None}, "placer must be the placer's name (a str), got None"),
    ({"predicted": 3}, "predicted must be a dict (StepResult.to_dict()) or None, got 3"),
    ({"predicted": "placeto"}, "predicted must be a dict (StepResult.to_dict()) or None, got 'placeto'"),
])
def test_save_placement_refuses_a_placer_or_predicted_of_another_type(tmp_path, k80x2, given, message):
    """A numpy integer placer was blamed on predicted ('predicted must hold JSON values ..., got None'); a placer of
    None and a predicted of 3 were written as given, where the file's readers look for a name and a dict."""
    from gnplace.exceptions import InvalidArgument

    path = tmp_path / "p.json"
    with pytest.raises(InvalidArgument, match=f"^placement file: {re.escape(message)}$"):
        save_placement(path, chain_graph(3), Placement([0, 1, 0], k80x2), **given)
    assert not path.exists()


def test_a_cluster_or_graph_given_by_name_is_one_clear_error(k80x2):
    """``sim.time(g, "k80x2", p)`` was an AttributeError ('str' object has no attribute 'num_devices')."""
    from gnplace.exceptions import InvalidArgument
    from gnplace.placement import as_placement
    from gnplace.sim.simulator import Simulator

    graph = chain_graph(3)
    with pytest.raises(InvalidArgument, match=re.escape("cluster must be a Cluster (gnplace.load_cluster(preset or "
                                                        "path)), got 'k80x2'")):
        Simulator().time(graph, "k80x2", [0, 0, 1])
    with pytest.raises(InvalidArgument, match="cluster must be a Cluster"):
        Simulator().time_batch(graph, "k80x2", [[0, 0, 1]])
    with pytest.raises(InvalidArgument, match=re.escape("graph must be an OpGraph (gnplace.load_graph(path)), got 'g'")):
        as_placement("g", k80x2, [0, 0, 1])


@pytest.mark.parametrize("made_for", [chain_graph(3), "chain3", 3])
def test_a_placement_made_for_what_is_no_graph_key_is_refused_when_made(k80x2, made_for):
    """``Placement(devices, cluster, made_for=graph)`` was taken, and every use of it (simulate, save_placement) an
    AttributeError ('OpGraph' object has no attribute 'digest')."""
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"^made_for must be a GraphKey \(gnplace.placement.GraphKey.of\(graph\)\)"):
        Placement([0, 1, 0], k80x2, made_for=made_for)
    placement = Placement([0, 1, 0], k80x2, made_for=GraphKey.of(chain_graph(3)))
    placement.check(chain_graph(3))


def test_placement_files_and_placements_refuse_what_is_no_graph_placement_or_cluster(k80x2, tmp_path):
    """Each was an AttributeError inside: a placement's devices given to save_placement ('check'), a graph's path
    to load_placement ('num_ops'), and a preset's name as a Placement's cluster was kept (its every use failed)."""
    from gnplace.exceptions import InvalidArgument

    graph = chain_graph(3)
    placement = Placement([0, 1, 0], k80x2)
    path = save_placement(tmp_path / "p.json", graph, placement)
    for given in (placement.devices, [0, 1, 0], {"op0": "gpu0", "op1": "gpu1", "op2": "gpu0"}):
        with pytest.raises(InvalidArgument, match=r"^placement must be a Placement \(a placer's place\(\)"):
            save_placement(tmp_path / "q.json", graph, given)
    with pytest.raises(InvalidArgument, match="^graph must be an OpGraph"):
        save_placement(tmp_path / "q.json", None, placement)
    assert not (tmp_path / "q.json").exists()
    with pytest.raises(InvalidArgument, match=re.escape("graph must be an OpGraph (gnplace.load_graph(path)), got 'g.gnpg'")):
        load_placement(path, "g.gnpg")
    with pytest.raises(InvalidArgument, match=re.escape("cluster must be a Cluster (gnplace.load_cluster(preset or "
                                                        "path)), got 'k80x2'")):
        Placement([0, 1, 0], "k80x2")
    with pytest.raises(InvalidArgument, match="cluster must be a Cluster"):
        Placement.from_groups(graph, "k80x2", [0, 1, 0])


def test_check_placed_holds_a_placers_result_to_the_contract():
    from gnplace.placement import check_placed
    from gnplace.toy import mlp_training_graph

    g, k80x2 = mlp_training_graph(layers=2, width=8, batch=4), load_cluster("k80x2")
    whole = Placement.from_groups(g, k80x2, [1, 0, 1])
    assert check_placed(whole, g, k80x2, "mine") is whole
    assert check_placed(Placement(whole.devices, load_cluster("k80x2")), g, k80x2, "mine").devices.tolist() == \
        whole.devices.tolist()  # an equal cluster loaded again
    for result, message in (
        (whole.devices.tolist(), "placer 'mine' returned list, not a Placement"),
        (None, "placer 'mine' returned NoneType, not a Placement"),
        (Placement(whole.devices, load_cluster("k80x4")), "placer 'mine' returned a placement on cluster 'k80x4', "
                                                          "not on 'k80x2'"),
        (Placement([0] * 3, k80x2), "placer 'mine' returned a bad placement: placement has 3 entries"),
        (Placement([i % 2 for i in range(g.num_ops)], k80x2), "placer 'mine' returned a placement that splits"),
    ):
        with pytest.raises(InvalidPlacement, match=message):
            check_placed(result, g, k80x2, "mine")


def test_a_placement_file_on_a_cluster_listing_its_devices_in_another_order_is_used(tmp_path, k80x2):
    """A file places ops by device name: a cluster file edited to list the same devices in another order was refused
    ("whose devices differ ... device 0 is gpu0 (k80) there, fast (v100) here")."""
    from gnplace.cluster import Cluster, Device

    g = chain_graph(3)
    gpu, fast = Device("gpu0", "k80", 1e12, 1e11, 2**30), Device("fast", "v100", 4e12, 4e11, 2**30)
    links = np.full((2, 2), 1e9)
    made = Cluster([gpu, fast], links, np.zeros((2, 2)), name="mine")
    path = save_placement(tmp_path / "p.json", g, Placement([1, 0, 1], made))
    reordered = Cluster([fast, gpu], links, np.zeros((2, 2)), name="mine")
    with pytest.warns(UserWarning, match=r"p\.json was made for another cluster named 'mine' \(the same devices by "
                                         r"name and kind, listed in another order, and perhaps other speeds, "
                                         r"memories or links\); it is used as it is, timed on this 'mine'$"):
        placed = load_placement(path, g, reordered)
    assert [reordered.devices[d].name for d in placed.devices.tolist()] == ["fast", "gpu0", "fast"]
    renamed = Cluster([fast, gpu], links, np.zeros((2, 2)), name="lab")
    with pytest.warns(UserWarning, match=r"p\.json was made for cluster 'mine', not 'lab'; its devices are the same "
                                         r"by name and kind, so it is used as it is$"):
        load_placement(path, g, renamed)
    other = Cluster([dataclasses.replace(fast, kind="a100"), gpu], links, np.zeros((2, 2)), name="mine")
    with pytest.raises(InvalidPlacement, match=r"whose devices differ from those of 'mine' \(device 0 is gpu0 \(k80\) "
                                               r"there, fast \(a100\) here\)"):
        load_placement(path, g, other)


def test_a_placement_path_that_is_no_path_is_one_clear_error():
    """load_placement(None, graph) and save_placement(None, ...) were pathlib's and os.fspath's TypeError
    ('expected str, bytes or os.PathLike object')."""
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"^a placement file is given by its path \(str or os\.PathLike\), got None"):
        load_placement(None, chain_graph(3))  # type: ignore[arg-type]
    g = chain_graph(3)
    with pytest.raises(InvalidArgument, match=r"^an output file is given by its path \(str or os\.PathLike\), got None"):
        save_placement(None, g, Placement([0, 1, 0], load_cluster("k80x2")))  # type: ignore[arg-type]


def test_a_placement_file_with_its_clusters_earlier_fingerprint_is_used_on_it_without_a_word(tmp_path, k80x2_written_out):
    """A file made before 2026-12-04's fingerprints (32c87da) on a cluster file that writes the k80's memory out
    (12 GiB) recorded the fingerprint of then: timed on that very file it was said to be another cluster's."""
    g = chain_graph(3)
    cluster = load_cluster(k80x2_written_out)
    path = save_placement(tmp_path / "p.json", g, Placement([1, 0, 1], cluster))
    data = json.loads(path.read_text())
    data["cluster_fingerprint"] = cluster.earlier_fingerprint()  # as that gnplace wrote it
    path.write_text(json.dumps(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_placement(path, g, cluster).devices.tolist() == [1, 0, 1]
    data["cluster_fingerprint"] = load_cluster("k80x4").fingerprint()  # another cluster's still is
    path.write_text(json.dumps(data))
    with pytest.warns(UserWarning, match=r"p\.json was made for another cluster named 'k80x2'"):
        load_placement(path, g, cluster)


def test_a_placement_refuses_a_graph_whose_op_names_differ_only_in_where_a_nul_falls():
    """Names hashed NUL-terminated: ("a\\0b", "c") and ("a", "b\\0c") had one digest, and each took the other's
    placement; every other graph's digest (what compiled programs record) is the one of before."""
    from gnplace.placement import GraphKey

    k80x2 = load_cluster("k80x2")
    one, other = OpGraph(["a\0b", "c"], [(0, 1)]), OpGraph(["a", "b\0c"], [(0, 1)])
    with pytest.raises(InvalidPlacement, match="made for another graph of that name"):
        as_placement(other, k80x2, Placement.from_groups(one, k80x2, [0, 1]))
    assert GraphKey.of(OpGraph(["a\0b", "c"], [(0, 1)])) == GraphKey.of(one)
    assert GraphKey.of(chain_graph(3)).digest == "deb452d03c411c904ba03c4039ed5dc38db31feba24fc345a452e94787129020"


def test_a_placement_read_on_a_smaller_cluster_names_the_device_it_lacks():
    """A k80x4 placement on device 2 read on k80x2: device 2 is off k80x2, so no device is compared there and
    ``check`` names the op (a mutant that compared it too was an IndexError)."""
    g = chain_graph(2)
    with pytest.raises(InvalidPlacement, match=r"^op 'op1' is placed on device 2, but cluster 'k80x2' has devices 0\.\.1$"):
        as_placement(g, load_cluster("k80x2"), Placement(np.array([0, 2]), load_cluster("k80x4")))


def test_a_placement_on_a_device_its_own_cluster_lacks_is_refused_on_a_larger_one():
    """Device 2 of a k80x2 placement (invalid there) was read on k80x4 without a word: check() ran on k80x4."""
    g = chain_graph(2)
    with pytest.raises(InvalidPlacement, match=r"^placement uses device 2, but cluster 'k80x2', which it was made "
                                               r"for, has devices 0\.\.1$"):
        as_placement(g, load_cluster("k80x4"), Placement(np.array([0, 2]), load_cluster("k80x2")))
    assert as_placement(g, load_cluster("k80x4"), Placement(np.array([0, 1]), load_cluster("k80x2"))).devices.tolist() \
        == [0, 1]


def test_an_unknown_device_lists_all_eight_devices_of_a_cluster_of_eight():
    """Up to eight device names are listed in full, more are cut short (a mutant that cut eight short passed)."""
    g = chain_graph(1)
    names = ", ".join(f"gpu{k}" for k in range(8))
    with pytest.raises(InvalidPlacement, match=rf"unknown device 'tpu0' \(cluster 'v100x8' has {names}\)$"):
        as_placement(g, load_cluster("v100x8"), {"op0": "tpu0"})


def test_an_index_of_two_to_the_62_is_kept_alike_from_every_integer_type(k80x2):
    """2**62 is the largest index kept as given (a list's, an int64's): a uint64's too, named by ``check``."""
    for devices in ([2**62], np.array([2**62], dtype=np.int64), np.array([2**62], dtype=np.uint64)):
        assert Placement(devices, k80x2).devices.tolist() == [4611686018427387904]
    with pytest.raises(InvalidPlacement, match=r"^op 'op0' is placed on device 4611686018427387904, but cluster "
                                               r"'k80x2' has devices 0\.\.1$"):
        as_placement(chain_graph(1), k80x2, np.array([2**62], dtype=np.uint64))


def test_a_placement_file_of_an_empty_graph_name_is_not_warned_of_as_another_graphs(tmp_path, k80x2):
    """A file whose ``graph`` is ``""`` names no graph: it is no other graph's, so no warning names ``''``."""
    g = chain_graph(3)
    path = save_placement(tmp_path / "p.json", g, Placement([0, 1, 0], k80x2))
    data = json.loads(path.read_text())
    data["graph"] = ""
    path.write_text(json.dumps(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_placement(path, g).devices.tolist() == [0, 1, 0]


def test_a_placement_that_splits_one_colocation_group_says_one_group(k80x2):
    """One split group is "1 colocation group", in the singular (two are "2 colocation groups")."""
    from gnplace.placement import check_placed

    g = grouped()  # groups [0, 0, 1, 2, 1]: only group 0 (o0, o1) is split
    with pytest.raises(InvalidPlacement, match=r"^placer 'mine' returned a placement that splits 1 colocation group "
                                               r"\(ops that must share a device\) over devices, e\.g\. op 'o0' on gpu0 "
                                               r"and 'o1' of its group on gpu1$"):
        check_placed(Placement([0, 1, 0, 0, 0], k80x2, GraphKey.of(g)), g, k80x2, "mine")


def test_a_placement_file_whose_cluster_is_empty_names_no_cluster(tmp_path, k80x4):
    """``"cluster": ""`` names no cluster (it was "made for cluster '', which is not a preset")."""
    g = chain_graph(2)
    path = save_placement(tmp_path / "p.json", g, Placement([0, 3], k80x4))
    data = json.loads(path.read_text())
    data["cluster"] = ""
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidPlacement, match=r": names no cluster; give the cluster it was made for$"):
        load_placement(path, g)


def test_load_placement_refuses_a_warn_other_name_that_is_no_bool(tmp_path, k80x2):
    # "no" was read by its truth: the warnings it asked to leave out came
    g = chain_graph(3)
    path = save_placement(tmp_path / "p.json", g, Placement([0, 1, 1], k80x2))
    with pytest.raises(InvalidArgument, match=r"^load_placement: warn_other_name must be true or false, got 'no'$"):
        load_placement(path, g, warn_other_name="no")
    assert load_placement(path, g, warn_other_name=np.False_).devices.tolist() == [0, 1, 1]


def test_a_placement_file_of_one_device_refused_elsewhere_counts_its_device_in_the_singular(tmp_path, k80x4):
    """The refusal of a one-device cluster's file read "(1 devices there, 4 here)"."""
    from gnplace.cluster import Cluster

    one = load_cluster("k80x2").subset([0], name="one")
    assert isinstance(one, Cluster)
    g = chain_graph(3)
    path = save_placement(tmp_path / "one.json", g, Placement([0, 0, 0], one))
    with pytest.raises(InvalidPlacement, match=r"\(1 device there, 4 here\)"):
        load_placement(path, g, k80x4)
