"""Tests of ``gnplace.graph_io``: the graph file format and the networkx conversion."""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import stat
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from gnplace.exceptions import InvalidArgument, InvalidGraph
from gnplace.graph import OpGraph
from gnplace.graph_io import from_networkx, graph_from_dict, graph_to_dict, load_graph, save_graph, to_networkx
from gnplace.toy import chain_graph, layered_graph, mlp_training_graph

EXAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "examples" / "mlp2x8w2048b512.gnpg"


def rich_graph() -> OpGraph:
    """A graph that uses every field, with awkward values."""
    return OpGraph(
        ["in", "mm", "relu", "grad", "upd"],
        [(0, 1), (1, 2), (2, 3), (0, 3), (3, 4)],
        flops=[0.0, 1 / 3, 2.0**60 + 1e3, 1e-300, 7.000000000000001],
        out_bytes=[12, 2**40, 8, 3, 0],
        param_bytes=[0, 0, 0, 0, 2**33 + 1],
        edge_bytes=[12, 2**40, 8, 5, 3],
        op_types=["input", "matmul", "relu", "matmul", "sgd_update"],
        phase=["forward", "forward", "forward", "backward", "update"],
        group=[4, 1, 1, 4, 4],
        module=["", "net.fc1", "net.fc1", "net.fc1", "net.fc1 ünïcode"],
        cost_s={"k80": [1e-5, np.nan, 1 / 7, 0.0, np.nan], "v100": [np.nan] * 5, "cpu": [1.0, 2.0, 3.0, 4.0, 5.0]},
        name="rich \"graph\"",
        meta={"family": "mlp", "seed": 7, "nested": {"a": [1, 2.5, None, "x"]}, "flag": True},
    )


def assert_identical(a: OpGraph, b: OpGraph) -> None:
    """Field-by-field equality, bit-exact for floats (NaN where NaN)."""
    assert a == b
    assert a.name == b.name and a.node_names == b.node_names
    for field in ("edge_src", "edge_dst", "out_bytes", "param_bytes", "edge_bytes", "phase", "group"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        assert getattr(a, field).dtype == getattr(b, field).dtype
    assert a.flops.tobytes() == b.flops.tobytes()
    assert sorted(a.cost_s) == sorted(b.cost_s)
    for kind in a.cost_s:
        assert a.cost_s[kind].tobytes() == b.cost_s[kind].tobytes(), kind
    assert a.meta == b.meta and a.module == b.module and a.op_types == b.op_types and a.op_kinds == b.op_kinds


# ------------------------------------------------------------------------------- round trip
@pytest.mark.parametrize("suffix", [".gnpg", ".json", ".json.gz"])
def test_round_trip_is_exact(tmp_path, suffix):
    g = rich_graph()
    path = save_graph(g, tmp_path / f"g{suffix}")
    assert path == tmp_path / f"g{suffix}"
    assert_identical(load_graph(path), g)


@pytest.mark.parametrize(
    "graph",
    [mlp_training_graph(layers=2, width=8, batch=4, branches=2), layered_graph(300, seed=5), OpGraph([], [])],
    ids=["mlp", "layered", "empty"],
)
def test_round_trip_of_generated_graphs(tmp_path, graph):
    assert_identical(load_graph(save_graph(graph, tmp_path / "g.gnpg")), graph)


def test_float_flops_written_exactly(tmp_path):
    g = OpGraph(["a", "b"], flops=[1 / 3, 0.1 + 0.2])
    back = load_graph(save_graph(g, tmp_path / "g.json"))
    assert back.flops[0] == 1 / 3
    assert back.flops[1] == 0.1 + 0.2 != 0.3


def test_unmeasured_cost_written_as_null(tmp_path):
    path = save_graph(rich_graph(), tmp_path / "g.json")
    data = json.loads(path.read_text())
    assert data["cost_s"]["k80"] == [1e-5, None, 1 / 7, 0.0, None]
    assert data["cost_s"]["v100"] == [None] * 5
    back = load_graph(path)
    assert np.isnan(back.cost_s["k80"][1]) and back.cost_s["k80"][2] == 1 / 7


def test_gnpg_is_gzip_and_json_is_plain(tmp_path):
    g = rich_graph()
    gz = save_graph(g, tmp_path / "g.gnpg").read_bytes()
    plain = save_graph(g, tmp_path / "g.json").read_bytes()
    assert gz[:2] == b"\x1f\x8b"
    assert gzip.decompress(gz) == plain
    data = json.loads(plain)
    assert data["format"] == "gnplace-opgraph" and data["version"] == 2
    assert data["nodes"]["phase"] == ["forward", "forward", "forward", "backward", "update"]
    assert data["nodes"]["op_kind"] == ["input", "matmul", "activation", "matmul_grad", "update"]
    assert data["nodes"]["group"] == [0, 1, 1, 0, 0]
    assert save_graph(g, tmp_path / "G.JSON").read_bytes() == plain  # its name read without case, as the CLI does
    assert data["edges"] == {"src": [0, 1, 2, 0, 3], "dst": [1, 2, 3, 3, 4], "bytes": [12, 2**40, 8, 5, 3]}
    assert data["meta"] == g.meta and data["name"] == g.name


def test_file_format_fields():
    data = graph_to_dict(rich_graph())
    assert set(data) == {"format", "version", "name", "meta", "nodes", "edges", "cost_s"}
    assert set(data["nodes"]) == {"name", "op_type", "op_kind", "phase", "flops", "out_bytes", "param_bytes", "group", "module"}
    assert list(data["cost_s"]) == sorted(data["cost_s"])
    assert graph_from_dict(json.loads(json.dumps(data))) == rich_graph()


@pytest.mark.parametrize("suffix", [".gnpg", ".json"])
def test_same_graph_saved_twice_gives_identical_bytes(tmp_path, suffix):
    a = save_graph(rich_graph(), tmp_path / f"a{suffix}").read_bytes()
    b = save_graph(rich_graph(), tmp_path / f"b{suffix}").read_bytes()
    assert a == b


def test_saved_bytes_do_not_depend_on_insertion_order_of_meta_or_cost(tmp_path):
    g1 = OpGraph(["x"], cost_s={"a": [1.0], "b": [2.0]}, meta={"p": 1, "q": 2})
    g2 = OpGraph(["x"], cost_s={"b": [2.0], "a": [1.0]}, meta={"q": 2, "p": 1})
    assert save_graph(g1, tmp_path / "1.gnpg").read_bytes() == save_graph(g2, tmp_path / "2.gnpg").read_bytes()


def test_save_creates_parent_folders(tmp_path):
    path = save_graph(rich_graph(), tmp_path / "a" / "b" / "g.gnpg")
    assert path.is_file()


def test_load_accepts_str_path(tmp_path):
    save_graph(rich_graph(), tmp_path / "g.gnpg")
    assert load_graph(str(tmp_path / "g.gnpg")) == rich_graph()


def test_save_over_existing_file_is_atomic(tmp_path):
    path = tmp_path / "g.gnpg"
    save_graph(mlp_training_graph(layers=1, width=4, batch=2), path)
    save_graph(rich_graph(), path)
    assert load_graph(path) == rich_graph()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.gnpg"]  # no temporary left behind


@pytest.mark.skipif(os.name != "posix", reason="permission bits")
def test_a_file_written_over_keeps_its_permissions(tmp_path):
    """A graph or placement file made private (chmod 600) was 644 again once written over (the rename brought the
    temporary file's umask permissions), where a write in place keeps the file's."""
    from gnplace.graph_io import write_atomically

    path = save_graph(rich_graph(), tmp_path / "g.gnpg")
    for mode in (0o600, 0o640, 0o444):
        path.chmod(mode)
        save_graph(rich_graph(), path)
        assert stat.S_IMODE(path.stat().st_mode) == mode
    fresh = write_atomically(tmp_path / "new.txt", b"x")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask


def test_interrupted_save_leaves_old_file_intact(tmp_path, monkeypatch):
    import gnplace.graph_io as graph_io

    path = tmp_path / "g.gnpg"
    save_graph(rich_graph(), path)
    before = path.read_bytes()

    def crash(src, dst):
        raise OSError("disk pulled out before the rename")

    monkeypatch.setattr(graph_io.os, "replace", crash)
    with pytest.raises(OSError, match="disk pulled out"):
        save_graph(layered_graph(50, seed=1), path)
    monkeypatch.undo()
    assert path.read_bytes() == before  # the target was never written in place
    assert load_graph(path) == rich_graph()


def test_failed_save_leaves_old_file_intact(tmp_path):
    path = tmp_path / "g.gnpg"
    save_graph(rich_graph(), path)
    before = path.read_bytes()
    with pytest.raises((TypeError, ValueError)):
        save_graph(OpGraph(["x"], meta={"bad": object()}), path)
    assert path.read_bytes() == before
    assert load_graph(path) == rich_graph()


@pytest.mark.parametrize(
    "meta, problem",
    [
        ({"batch": np.int64(8)}, r"meta\['batch'\] is (np.int64\(8\)|8) of type int64, not a JSON value"),  # TypeError; numpy<2 reprs 8
        ({"x": [1, {"y": math.nan}]}, r"meta\['x'\]\[1\]\['y'\] is nan, which JSON does not allow"),  # a ValueError
        ({1: "a", "b": 2}, r"meta has key 1, which is not a string"),  # a TypeError from sorting the keys
        ({1: "a"}, r"meta has key 1, which is not a string"),  # was written, and read back as {"1": "a"}
    ],
)
def test_a_meta_that_json_cannot_hold_as_it_is_is_one_clean_error(tmp_path, meta, problem):
    with pytest.raises(InvalidGraph, match=rf"^graph 'g' cannot be saved: {problem}"):
        save_graph(OpGraph(["x"], meta=meta, name="g"), tmp_path / "g.gnpg")
    assert not list(tmp_path.iterdir())
    kept = {"f": np.float64(0.5), "t": (1, "x"), "n": None}  # a float subclass and a tuple are JSON
    assert load_graph(save_graph(OpGraph(["x"], meta=kept), tmp_path / "ok.gnpg")).meta == {"f": 0.5, "t": [1, "x"],
                                                                                           "n": None}


def test_shipped_example_is_the_exact_toy_graph(tmp_path):
    g = load_graph(EXAMPLE)
    expected = mlp_training_graph(layers=8, width=2048, batch=512, branches=2)
    assert g.name == "mlp2x8w2048b512"
    assert g.num_ops == 98 and g.num_edges == 130 and g.num_groups == 17
    assert_identical(g, expected)
    # files are deterministic across processes: saving it again here gives the shipped bytes
    assert save_graph(expected, tmp_path / EXAMPLE.name).read_bytes() == EXAMPLE.read_bytes()


# ------------------------------------------------------------------------------- bad files
def test_missing_file(tmp_path):
    path = tmp_path / "nope.gnpg"
    with pytest.raises(InvalidGraph, match=rf"^{re.escape(str(path))}: no such graph file$"):
        load_graph(path)


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(InvalidGraph, match=rf"^{re.escape(str(tmp_path))}: is a folder, not a graph file$"):
        load_graph(tmp_path)


def corrupt_cases(good: bytes) -> dict[str, bytes]:
    flipped = bytearray(good)
    for i in range(20, min(60, len(good) - 10)):
        flipped[i] ^= 0xFF
    crc = bytearray(good)
    crc[-6] ^= 0xFF
    return {
        "truncated gzip": good[: len(good) // 2],
        "gzip header only": good[:10],
        "corrupt deflate stream": bytes(flipped),
        "bad crc": bytes(crc),
        "empty": b"",
        "binary garbage": bytes(range(256)),
        "truncated json": gzip.decompress(good)[:-7],
    }


@pytest.mark.parametrize(
    "case", ["truncated gzip", "gzip header only", "corrupt deflate stream", "bad crc", "empty", "binary garbage", "truncated json"]
)
def test_corrupt_file(tmp_path, case):
    good = save_graph(layered_graph(200, seed=0), tmp_path / "good.gnpg").read_bytes()
    path = tmp_path / "bad.gnpg"
    path.write_bytes(corrupt_cases(good)[case])
    with pytest.raises(InvalidGraph, match=rf"^{re.escape(str(path))}: not a readable gnplace graph file \(.+\)$") as info:
        load_graph(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "content",
    [{"nodes": [], "edges": []}, [1, 2, 3], "just a string", {"format": "gnplace-placement", "version": 1}, None],
    ids=["dict", "list", "string", "placement", "null"],
)
def test_non_gnplace_json(tmp_path, content):
    path = tmp_path / "other.json"
    path.write_text(json.dumps(content))
    with pytest.raises(InvalidGraph, match=rf"^{re.escape(str(path))}: not a gnplace graph file \(no 'format': 'gnplace-opgraph' field\)$"):
        load_graph(path)


@pytest.mark.parametrize("version", [3, 0, "1", "2", None, True, 2.5])
def test_wrong_version(tmp_path, version):
    data = graph_to_dict(rich_graph())
    data["version"] = version
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    with pytest.raises(
        InvalidGraph,
        match=rf"^{re.escape(str(path))}: graph file version {re.escape(repr(version))} is not supported "
              r"\(this gnplace reads versions 1 and 2\)$",
    ):
        load_graph(path)


# ------------------------------------------------------------------------------- versions and op kinds
def version_1(graph: OpGraph) -> dict:
    """``graph`` as a version 1 file would hold it: no ``op_kind``."""
    data = graph_to_dict(graph)
    data["version"] = 1
    del data["nodes"]["op_kind"]
    return data


def test_version_1_file_loads_with_derived_kinds(tmp_path):
    path = tmp_path / "old.gnpg"
    path.write_bytes(gzip.compress(json.dumps(version_1(rich_graph())).encode()))
    g = load_graph(path)
    assert_identical(g, rich_graph())
    assert g.op_kinds == ("input", "matmul", "activation", "matmul_grad", "update")


def test_version_1_file_ignores_given_kinds(tmp_path):
    data = version_1(rich_graph())
    data["nodes"]["op_kind"] = ["warp"] * 5  # not a field of version 1
    assert graph_from_dict(data).op_kinds == rich_graph().op_kinds


def test_version_2_round_trip_keeps_given_kinds(tmp_path):
    kinds = ["input", "embedding", "activation", "embedding_grad", "update"]
    g = rich_graph().replace(op_kinds=kinds)
    back = load_graph(save_graph(g, tmp_path / "g.gnpg"))
    assert_identical(back, g)
    assert back.op_kinds == tuple(kinds) != rich_graph().op_kinds
    assert back != rich_graph()


def test_resaving_a_version_1_file_gives_version_2_bytes(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps(version_1(rich_graph())))
    new = save_graph(load_graph(old), tmp_path / "new.json")
    assert new.read_bytes() == save_graph(rich_graph(), tmp_path / "direct.json").read_bytes()
    assert json.loads(new.read_text())["version"] == 2


def test_unknown_kind_in_version_2_file_is_a_one_line_error(tmp_path):
    data = graph_to_dict(rich_graph())
    data["nodes"]["op_kind"][2] = "relu"
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    with pytest.raises(
        InvalidGraph,
        match=rf"^{re.escape(str(path))}: graph 'rich \"graph\"': node 'relu' has unknown op kind 'relu' "
              r"\(expected one of gnplace\.opkinds\.KIND_VOCABULARY: input, read, .*\)$",
    ) as info:
        load_graph(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d["nodes"].pop("op_kind"), r"graph file lacks field 'op_kind'"),
        (lambda d: d["nodes"].__setitem__("op_kind", ["input"]), r"field 'op_kind' has 1 entry, expected 5"),
        (lambda d: d["nodes"].__setitem__("op_kind", None), r"field 'op_kind' must be a list, found NoneType"),
    ],
)
def test_malformed_op_kinds_in_version_2_file(tmp_path, mutate, match):
    data = graph_to_dict(rich_graph())
    mutate(data)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidGraph, match=rf"^{re.escape(str(path))}: .*{match}"):
        load_graph(path)



def test_missing_version(tmp_path):
    data = graph_to_dict(rich_graph())
    del data["version"]
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidGraph, match=r"graph file version None is not supported"):
        load_graph(path)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d.pop("nodes"), r"graph file lacks field 'nodes'"),
        (lambda d: d.pop("edges"), r"graph file lacks field 'edges'"),
        (lambda d: d["nodes"].pop("flops"), r"graph file lacks field 'flops'"),
        (lambda d: d["edges"].pop("bytes"), r"graph file lacks field 'bytes'"),
        (lambda d: d.__setitem__("nodes", []), r"'nodes' and 'edges' must be mappings of columns"),
        (lambda d: d.__setitem__("edges", None), r"'nodes' and 'edges' must be mappings of columns"),
        (lambda d: d.__setitem__("cost_s", []), r"'cost_s' must map device kinds to lists of seconds"),
        (lambda d: d.__setitem__("cost_s", {"k80": 3}), r"field 'k80' must be a list, found int"),
        (lambda d: d.__setitem__("cost_s", {"k80": ["fast"] * 5}), r"field 'k80'\[0\] must be a number, found 'fast'"),
        (lambda d: d.__setitem__("meta", "x"), r"'name' must be a string and 'meta' a mapping"),
        (lambda d: d["nodes"].__setitem__("flops", [1.0]), r"field 'flops' has 1 entry, expected 5"),
        (lambda d: d["nodes"].__setitem__("flops", [1.0, "3", 1, 1, 1]), r"field 'flops'\[1\] must be a number, found '3'"),
        (lambda d: d["nodes"].__setitem__("out_bytes", [1, True, 1, 1, 1]), r"field 'out_bytes'\[1\] must be a number, found True"),
        (lambda d: d["nodes"].__setitem__("out_bytes", [1, 1e40, 1, 1, 1]), r"field 'out_bytes'\[1\] is too large"),
        # an int past a float's range: an OverflowError traceback (isfinite, float())
        (lambda d: d["nodes"].__setitem__("flops", [1, 10**400, 1, 1, 1]), r"field 'flops'\[1\] is too large \(1000"),
        (lambda d: d["nodes"].__setitem__("phase", [0, 10**400, 0, 0, 0]), r"field 'phase'\[1\] is too large"),
        # just past the limit of any size (2**62): a bound of twice that passed it
        (lambda d: d["nodes"].__setitem__("flops", [1, 2**62 + 1, 1, 1, 1]), r"field 'flops'\[1\] is too large"),
        (lambda d: d.__setitem__("cost_s", {"k80": [10**400] * 5}), r"field 'k80'\[0\] is too large"),
        (lambda d: d["nodes"].__setitem__("out_bytes", [1, 2.5, 1, 1, 1]), r"field 'out_bytes'\[1\] must be a whole number"),
        (lambda d: d["nodes"].__setitem__("phase", ["forward"] * 4 + ["sideways"]), r"unknown phase 'sideways'"),
        # a phase is a name or an integer, read strictly: a float one (which OpGraph would take) was read as 1
        (lambda d: d["nodes"].__setitem__("phase", [0, 1.0, 0, 0, 0]), r"field 'phase'\[1\] must be a name or an integer, found 1\.0"),
        (lambda d: d["edges"].__setitem__("dst", [1, 2, 3, 3, 9]), r"names consumer 9, which is not a node"),
        (lambda d: d["nodes"].__setitem__("out_bytes", [12, -1, 8, 3, 0]), r"node 'mm' has negative out_bytes"),
        (lambda d: d["nodes"]["name"].__setitem__(1, "in"), r"node name 'in' is used twice"),
    ],
)
def test_malformed_graph_file(tmp_path, mutate, match):
    data = graph_to_dict(rich_graph())
    mutate(data)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidGraph, match=rf"^{re.escape(str(path))}: .*{match}") as info:
        load_graph(path)
    assert "\n" not in str(info.value)


def test_a_graph_of_one_node_past_the_limit_is_refused_and_one_at_it_read(monkeypatch):
    """``MAX_NODES`` nodes are read; one more is refused by count (a limit of 4 nodes here, a 5-node graph)."""
    from gnplace import graph_io

    data = graph_to_dict(rich_graph())
    assert len(data["nodes"]["name"]) == 5
    monkeypatch.setattr(graph_io, "MAX_NODES", 5)
    assert graph_from_dict(data).num_ops == 5
    monkeypatch.setattr(graph_io, "MAX_NODES", 4)
    with pytest.raises(InvalidGraph, match=r"^graph: field 'name' has 5 entries, over the limit of 4$"):
        graph_from_dict(data)


def test_cyclic_graph_in_file(tmp_path):
    data = graph_to_dict(OpGraph(["a", "b", "c"], [(0, 1), (1, 2)], name="loop"))
    data["edges"] = {"src": [0, 1, 2], "dst": [1, 2, 0], "bytes": [0, 0, 0]}
    path = tmp_path / "loop.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidGraph, match=rf"^{re.escape(str(path))}: graph 'loop' has a cycle: a -> b -> c -> a$"):
        load_graph(path)


def test_graph_from_dict_defaults_for_optional_fields():
    data = graph_to_dict(rich_graph())
    for key in ("name", "meta", "cost_s"):
        del data[key]
    del data["nodes"]["module"]
    g = graph_from_dict(data)
    assert g.name == "graph" and g.meta == {} and g.cost_s == {} and g.module == ("",) * 5


# ------------------------------------------------------------------------------- networkx
def edge_set(g: OpGraph) -> set[tuple[str, str, int]]:
    return {(g.node_names[s], g.node_names[d], int(b)) for s, d, b in zip(g.edge_src, g.edge_dst, g.edge_bytes)}


def test_to_networkx_attributes():
    G = to_networkx(rich_graph())
    assert isinstance(G, nx.DiGraph)
    assert list(G.nodes) == ["in", "mm", "relu", "grad", "upd"]
    assert G.graph["name"] == 'rich "graph"' and G.graph["meta"]["seed"] == 7
    mm = G.nodes["mm"]
    assert mm == {
        "flops": 1 / 3, "out_bytes": 2**40, "param_bytes": 0, "group": 1, "op_type": "matmul", "op_kind": "matmul",
        "phase": "forward", "module": "net.fc1", "cost_s": {"cpu": 2.0},
    }
    assert G.nodes["in"]["cost_s"] == {"k80": 1e-5, "cpu": 1.0}
    assert G.nodes["upd"]["phase"] == "update" and G.nodes["upd"]["param_bytes"] == 2**33 + 1
    assert G.edges["in", "grad"] == {"bytes": 5, "index": 3}
    assert G.number_of_edges() == 5


def test_to_networkx_is_a_copy_down_to_the_meta():
    """Changing the networkx copy's nested meta leaves the graph's as it was (its meta was the graph's own dict)."""
    g = OpGraph(["a"], meta={"knobs": {"layers": 2}})
    G = to_networkx(g)
    G.graph["meta"]["knobs"]["layers"] = 9
    G.graph["meta"]["family"] = "x"
    assert g.meta == {"knobs": {"layers": 2}}


def test_to_networkx_omits_cost_when_unmeasured():
    G = to_networkx(OpGraph(["a", "b"], cost_s={"k80": [np.nan, 1.0]}))
    assert "cost_s" not in G.nodes["a"]
    assert G.nodes["b"]["cost_s"] == {"k80": 1.0}


def test_networkx_round_trip_preserves_everything():
    g = rich_graph()
    back = from_networkx(to_networkx(g))
    assert back.name == g.name and back.meta == g.meta
    assert back.node_names == g.node_names
    assert back.flops.tobytes() == g.flops.tobytes()
    for field in ("out_bytes", "param_bytes", "phase", "group"):
        assert getattr(back, field).tolist() == getattr(g, field).tolist(), field
    assert back.op_types == g.op_types and back.module == g.module and back.op_kinds == g.op_kinds
    assert edge_set(back) == edge_set(g)
    # kinds measured on at least one op survive, with NaN where unmeasured
    for kind in ("k80", "cpu"):
        assert back.cost_s[kind].tobytes() == g.cost_s[kind].tobytes()


def test_from_networkx_gives_a_node_without_a_group_a_group_of_its_own():
    # the default was the node's index, which another node may give as its group: 1 here, so a and b were colocated
    G = nx.DiGraph([("a", "b"), ("b", "c")])
    G.nodes["a"]["group"] = 1
    G.nodes["c"]["group"] = 1
    assert from_networkx(G).group.tolist() == [0, 1, 0]
    assert from_networkx(nx.DiGraph([("a", "b"), ("b", "c")])).group.tolist() == [0, 1, 2]


def test_from_networkx_gives_fresh_groups_by_exact_ids_within_the_limit():
    G = nx.DiGraph([("a", "b")])
    G.nodes["a"]["group"] = 2**53 + 1  # read as the float 2**53, so b's fresh group was 2**53 + 1: a's
    assert from_networkx(G).group.tolist() == [0, 1]
    G.nodes["a"]["group"] = np.int64(2**62)  # the largest group a graph holds: b's 2**62 + 1 was refused
    G.add_edge("b", "c")
    assert from_networkx(G).group.tolist() == [0, 1, 2]


def test_networkx_round_trip_is_equal_for_sorted_edges():
    g = mlp_training_graph(layers=2, width=8, batch=4)
    order = np.lexsort((g.edge_dst, g.edge_src))
    g = g.replace(edges=np.stack([g.edge_src[order], g.edge_dst[order]], axis=1), edge_bytes=g.edge_bytes[order])
    assert from_networkx(to_networkx(g)) == g


def test_networkx_round_trip_keeps_the_edge_order():
    """networkx lists edges by source node: the graph read back had them in another order, was not == the graph and
    had another fingerprint (datasets/examples' mlp2x8w2048b512)."""
    g = mlp_training_graph(layers=2, width=8, batch=4)
    order = np.random.default_rng(0).permutation(g.num_edges)
    g = g.replace(edges=np.stack([g.edge_src[order], g.edge_dst[order]], axis=1), edge_bytes=g.edge_bytes[order])
    back = from_networkx(to_networkx(g))
    assert back == g and back.fingerprint() == g.fingerprint()
    G = to_networkx(g)
    G.add_edge(g.node_names[0], g.node_names[-1], bytes=1)  # added by hand, no index: after the others
    assert from_networkx(G).edge_dst.tolist() == [*g.edge_dst.tolist(), g.num_ops - 1]


def test_networkx_round_trip_of_layered_graph():
    g = layered_graph(150, seed=2)
    back = from_networkx(to_networkx(g))
    assert back == g  # layered graph edges come sorted


def test_from_networkx_defaults():
    G = nx.DiGraph()
    G.add_edge("a", "b", bytes=40)
    G.add_edge("a", "c", bytes=10)
    G.add_edge("b", "c")
    G.add_node("d")
    g = from_networkx(G)
    assert g.name == "graph"
    assert g.node_names == ("a", "b", "c", "d")
    assert g.flops.tolist() == [0.0] * 4
    assert g.out_bytes.tolist() == [40, 0, 0, 0]  # largest outgoing edge
    assert g.param_bytes.tolist() == [0] * 4
    assert g.group.tolist() == [0, 1, 2, 3]
    assert g.phase.tolist() == [0] * 4
    assert g.op_types == ("op",) * 4 and g.module == ("",) * 4 and g.op_kinds == ("other",) * 4
    assert g.cost_s == {} and g.meta == {}
    assert edge_set(g) == {("a", "b", 40), ("a", "c", 10), ("b", "c", 0)}


def test_from_networkx_edge_bytes_default_to_out_bytes():
    G = nx.DiGraph()
    G.add_node("a", out_bytes=64)
    G.add_node("b")
    G.add_edge("a", "b")
    g = from_networkx(G, name="given")
    assert g.name == "given"
    assert g.edge_bytes.tolist() == [64]


def test_from_networkx_names_and_partial_costs():
    G = nx.DiGraph(name="net")
    G.add_node(1, flops=5.0, phase="backward", group=3, cost_s={"K80": 0.5})
    G.add_node(2, flops=6.0, phase=2, group=3)
    G.add_edge(1, 2)
    g = from_networkx(G)
    assert g.name == "net"
    assert g.node_names == ("1", "2")
    assert g.phase.tolist() == [1, 2]
    assert g.group.tolist() == [0, 0]
    assert g.cost_s["k80"][0] == 0.5 and np.isnan(g.cost_s["k80"][1])


def test_networkx_round_trip_keeps_given_kinds():
    g = rich_graph().replace(op_kinds=["input", "embedding", "activation", "embedding_grad", "update"])
    G = to_networkx(g)
    assert G.nodes["mm"]["op_kind"] == "embedding"
    assert from_networkx(G).op_kinds == g.op_kinds


def test_from_networkx_derives_missing_kinds():
    G = nx.DiGraph()
    G.add_node("a", op_type="convolution")
    G.add_node("b", op_type="convolution_backward", phase="backward")
    G.add_node("c", op_type="Gather", op_kind="embedding")
    G.add_node("d", op_type="adam_update", phase=2)
    G.add_edge("a", "b")
    assert from_networkx(G).op_kinds == ("conv", "conv_grad", "embedding", "update")
    del G.nodes["c"]["op_kind"]
    assert from_networkx(G).op_kinds == ("conv", "conv_grad", "data_movement", "update")


def test_from_networkx_rejects_unknown_kind():
    G = nx.DiGraph(name="net")
    G.add_node("a", op_kind="teleport")
    with pytest.raises(InvalidGraph, match=r"^graph 'net': node 'a' has unknown op kind 'teleport' \("):
        from_networkx(G)


def test_from_networkx_rejects_undirected():
    with pytest.raises(InvalidGraph, match=r"^from_networkx needs a directed graph \(networkx\.DiGraph\)$"):
        from_networkx(nx.path_graph(3))


def test_from_networkx_rejects_cycle():
    G = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a")], name="ring")
    with pytest.raises(InvalidGraph, match=r"^graph 'ring' has a cycle: a -> b -> c -> a$"):
        from_networkx(G)


def test_from_networkx_rejects_parallel_edges_of_multigraph():
    G = nx.MultiDiGraph()
    G.add_edge("a", "b")
    G.add_edge("a", "b")
    with pytest.raises(InvalidGraph, match=r"edge 'a' -> 'b' appears twice"):
        from_networkx(G)


def test_from_networkx_rejects_invalid_sizes():
    G = nx.DiGraph()
    G.add_node("a", out_bytes=4)
    G.add_node("b")
    G.add_edge("a", "b", bytes=5)
    with pytest.raises(InvalidGraph, match=r"edge 'a' -> 'b' carries 5 bytes, more than its producer writes"):
        from_networkx(G)
    G.nodes["a"]["flops"] = math.nan
    G.edges["a", "b"]["bytes"] = 4
    with pytest.raises(InvalidGraph, match=r"node 'a' has NaN flops"):
        from_networkx(G)



def test_failed_save_keeps_the_old_file_and_leaves_no_tmp(tmp_path, disk_full_at):
    """A write that fails (a folder in the way, a parent that is a file, the rename) loses nothing, leaves no .tmp."""

    g = layered_graph(5, seed=0)
    target = save_graph(g, tmp_path / "g.gnpg")
    before = target.read_bytes()
    (tmp_path / "dir").mkdir()
    with pytest.raises(IsADirectoryError):
        save_graph(g, tmp_path / "dir")
    with pytest.raises(NotADirectoryError):
        save_graph(g, target / "inner.gnpg")

    disk_full_at()
    with pytest.raises(OSError, match="No space left"):
        save_graph(mlp_training_graph(layers=2, width=4, batch=2), target)
    assert target.read_bytes() == before
    assert not list(tmp_path.rglob("*.tmp"))


def test_an_onnx_file_given_as_a_graph_file_points_to_the_importer(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07")  # whatever it holds: the suffix says it is a model
    with pytest.raises(InvalidGraph, match="an ONNX model, not a gnplace graph file; read it with "
                                           r"gnplace\.importers\.onnx\.from_onnx, or convert it with `gnplace import"):
        load_graph(model)


def test_writes_go_through_links_and_never_replace_devices_or_pipes(tmp_path):
    import os

    from gnplace.graph_io import check_writable, write_atomically

    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to("real.json")
    assert write_atomically(tmp_path / "link.json", b"new") == tmp_path / "link.json"  # the path given
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_text() == "new"
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(InvalidArgument, match="pipe: is not a regular file"):
        check_writable(tmp_path / "pipe", "--output")
    with pytest.raises(OSError, match="not a regular file"):
        write_atomically(tmp_path / "pipe", b"x")
    assert not (tmp_path / "pipe").is_file()


def test_files_written_together_are_all_or_none(tmp_path):
    """``place -o P --device-map M`` replaced P, then failed on M: now a file that cannot be written is met first."""
    from gnplace.graph_io import write_together

    first = tmp_path / "p.json"
    first.write_text("OLD")
    (tmp_path / "file").write_text("a file, not a folder")
    with pytest.raises(NotADirectoryError):
        write_together([(first, b"NEW"), (tmp_path / "file" / "m.json", b"MAP")])
    assert first.read_text() == "OLD" and sorted(p.name for p in tmp_path.iterdir()) == ["file", "p.json"]
    assert write_together([(first, b"NEW"), (tmp_path / "m.json", b"MAP")]) == [first, tmp_path / "m.json"]
    assert first.read_text() == "NEW" and (tmp_path / "m.json").read_text() == "MAP"


def test_edge_columns_take_the_edge_limit_not_the_op_limit(monkeypatch):
    """``dst`` and ``bytes`` were read with the limit of ops (20,000,000), ``src`` alone with that of edges."""
    import gnplace.graph_io as graph_io

    data = graph_to_dict(layered_graph(12, width=3))
    edges = len(data["edges"]["src"])
    monkeypatch.setattr(graph_io, "MAX_NODES", edges - 1)  # more edges than ops allowed, as in a real graph
    assert graph_from_dict(data).num_edges == edges


def test_from_networkx_refuses_a_cost_s_that_is_no_mapping():
    """``cost_s=3.0`` on a node was a TypeError ("'float' object is not iterable")."""
    import networkx as nx

    from gnplace.graph_io import from_networkx

    G = nx.DiGraph([("x", "y")])
    G.nodes["x"]["cost_s"] = 3.0
    with pytest.raises(InvalidGraph, match=r"^node 'x': cost_s must map device kinds to seconds .*got 3\.0$"):
        from_networkx(G)
    G.nodes["x"]["cost_s"] = {"k80": 3.0}
    assert from_networkx(G).cost_s["k80"][0] == 3.0


def test_from_networkx_refuses_malformed_attributes_in_one_line():
    """A group of 10**400 was an OverflowError, an out-edge's bytes of "5" (beside 3) or None with no out_bytes a
    TypeError of max(), and cost kinds of two types (5 and "k80") a TypeError of sorted()."""
    G = nx.DiGraph([("a", "b"), ("b", "c")])
    G.nodes["a"]["group"] = 10**400
    with pytest.raises(InvalidGraph, match=r"^field 'group' is not numeric: int too large"):
        from_networkx(G)
    del G.nodes["a"]["group"]
    G.add_edge("a", "c")
    for bad in ("5", None, [4]):
        G.edges["a", "b"]["bytes"], G.edges["a", "c"]["bytes"] = bad, 3
        with pytest.raises(InvalidGraph, match=rf"^node 'a': an edge from it carries bytes {re.escape(repr(bad))}; "
                           "bytes must be whole numbers$"):
            from_networkx(G)
    G.edges["a", "b"]["bytes"] = 4
    assert from_networkx(G).out_bytes.tolist() == [4, 0, 0]
    G.nodes["a"]["cost_s"], G.nodes["b"]["cost_s"] = {5: 1e-3}, {"k80": 2e-3}
    assert sorted(from_networkx(G).cost_s) == ["5", "k80"]


def test_networkx_round_trip_keeps_a_kind_measured_on_no_op():
    """A kind whose every entry is NaN vanished (no node's cost_s names it): the graph and its fingerprint changed."""
    g = OpGraph(["a", "b"], [(0, 1)], cost_s={"k80": [np.nan, 1.0], "v100": [np.nan, np.nan]})
    back = from_networkx(to_networkx(g))
    assert sorted(back.cost_s) == ["k80", "v100"] and back == g and back.fingerprint() == g.fingerprint()
    G = to_networkx(g)
    G.graph["cost_kinds"] = "k80"
    with pytest.raises(InvalidGraph, match="graph attribute cost_kinds must list device kinds"):
        from_networkx(G)


def test_a_file_name_of_255_bytes_is_written(tmp_path):
    """A legal 250-byte name failed "File name too long" on its temporary file ``NAME.PID.tmp``."""
    from gnplace.graph_io import write_together

    long = tmp_path / ("p" * 250 + ".json")
    short = tmp_path / "q.json"
    write_together([(long, b"1"), (short, b"2")])
    assert long.read_bytes() == b"1" and short.read_bytes() == b"2"
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([long.name, short.name])  # no .tmp left


def test_a_name_is_kept_while_it_and_its_room_fit_255_bytes():
    """``fitting_name`` keeps a name up to 255 bytes with its room and digests one byte more."""
    from gnplace.graph_io import fitting_name

    assert fitting_name("p" * 245, 10) == "p" * 245
    assert fitting_name("\u00e9" * 120 + "p" * 5, 10) == "\u00e9" * 120 + "p" * 5  # 245 bytes in UTF-8
    for name in ("p" * 246, "\u00e9" * 123):
        digest = fitting_name(name, 10)
        assert len(digest) == 16 and digest != name[:16]


def test_two_writers_of_one_process_id_never_move_each_others_temporary_file(tmp_path):
    """Ranks of a multi-node run filling one cache (containers on two hosts often give them the same process id)
    went through one ``NAME.PID.tmp``: one rank renamed the other's half-written file into place, and the other's
    rename then failed "No such file or directory". Two threads of one process stand in for them here."""
    import threading

    from gnplace.graph_io import write_atomically

    target = tmp_path / "cached.json"
    failures: list[BaseException] = []

    def write(payload: bytes) -> None:
        for _ in range(150):
            try:
                write_atomically(target, payload)
            except OSError as err:
                failures.append(err)

    writers = [threading.Thread(target=write, args=(letter * 400_000,)) for letter in (b"a", b"b")]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert not failures, failures[:2]
    assert target.read_bytes() in (b"a" * 400_000, b"b" * 400_000)
    assert [path.name for path in tmp_path.iterdir()] == ["cached.json"]  # no .tmp left


def test_what_is_no_graph_is_one_clear_error(tmp_path):
    """save_graph(path, graph), the wrong way round, was pathlib's TypeError; to_networkx(None) and
    from_networkx of no networkx graph were AttributeErrors."""
    g = layered_graph(4, seed=0)
    with pytest.raises(InvalidArgument, match=re.escape("graph must be an OpGraph (gnplace.load_graph(path)), got")):
        save_graph(tmp_path / "g.gnpg", g)
    assert list(tmp_path.iterdir()) == []
    for given in (None, "g.gnpg"):
        with pytest.raises(InvalidArgument, match="^graph must be an OpGraph"):
            to_networkx(given)
    for given in (None, {}, g):
        with pytest.raises(InvalidArgument, match=r"^from_networkx needs a networkx\.DiGraph, got"):
            from_networkx(given)


@pytest.mark.parametrize("given", [None, 3, b"g.gnpg"])
def test_a_graph_path_that_is_no_path_is_one_clear_error(given):
    """load_graph(None) was pathlib's TypeError ('expected str, bytes or os.PathLike object, not NoneType')."""
    with pytest.raises(InvalidArgument, match=r"^a graph file is given by its path \(str or os\.PathLike\), got "):
        load_graph(given)


def test_a_killed_writes_temporary_file_is_removed_by_the_next_write_of_its_file(tmp_path):
    """kill -9 between a .tmp's write and its rename left NAME.PID.RANDOM.tmp beside the file, forever."""
    import os
    import subprocess
    import sys
    import time

    from gnplace.graph_io import STALE_TEMPORARY_S, write_atomically

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a process id no process has now
    old = time.time() - STALE_TEMPORARY_S - 60
    left = {
        f"p.json.{gone.pid}.0123abcd.tmp": old,  # a killed write's: removed
        f"p.json.{gone.pid}.4567abcd.tmp": time.time(),  # as young as a write of another host's same id: kept
        f"p.json.{os.getpid()}.89abcdef.tmp": old,  # this process's (another thread's write): kept
        "p.json.1.0123abcd.tmp": old,  # a running process's: kept
        f"q.json.{gone.pid}.0123abcd.tmp": old,  # another file's: kept (until that file is written)
        f"p.json.{gone.pid}.notours.tmp": old,  # not a name of ours: kept
    }
    for name, mtime in left.items():
        (tmp_path / name).write_bytes(b"partial")
        os.utime(tmp_path / name, (mtime, mtime))
    write_atomically(tmp_path / "p.json", b"whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*list(left)[1:], "p.json"])
    write_atomically(tmp_path / "q.json", b"whole")
    assert not (tmp_path / f"q.json.{gone.pid}.0123abcd.tmp").exists()


def test_an_output_path_that_is_no_path_is_one_clear_error(tmp_path):
    """save_graph(g, None) and write_atomically(None, ...) were os.fspath's TypeError ('expected str, bytes or
    os.PathLike object, not NoneType')."""
    from gnplace.graph_io import write_together

    with pytest.raises(InvalidArgument, match=r"^a graph file is given by its path \(str or os\.PathLike\), got None$"):
        save_graph(layered_graph(4, seed=0), None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match=r"^an output file is given by its path \(str or os\.PathLike\), got 3$"):
        write_together([(tmp_path / "first.json", b"{}"), (3, b"{}")])  # type: ignore[list-item]
    assert list(tmp_path.iterdir()) == []  # the first's .tmp removed, nothing written


@pytest.mark.parametrize("kind", ["str", "str|int", "int", "number", "number?"])
def test_a_column_checked_whole_reads_as_one_checked_item_by_item(monkeypatch, kind):
    """Columns are told valid by whole-list checks (1.3 s of loading a 280,000-op graph): the same verdicts, errors."""
    from gnplace import graph_io

    odd = [0, 1, -3, 2**62, -(2**62), 2**62 + 1, 10**400, 0.0, -2.5, 1e40, 4.0, 2.0**62, 2.0**63, math.inf, math.nan,
           None, True, "a", "", np.float64(1.0), np.int64(3), [1], "b"]
    rng = np.random.default_rng(0)
    columns = [[], [None], ["a", "b"], [1, 2, 3], [1.0, 2.5], [1.0, None, 3.0], [1, 2.0], [2**62, -(2**62)],
               [float(2**62), 3.0]]
    columns += [[odd[i] for i in rng.integers(0, len(odd), size=int(rng.integers(1, 4)))] for _ in range(400)]
    columns += [[odd[i]] * 3 for i in range(len(odd))]

    def outcome(values: list[object]) -> object:
        try:
            return graph_io._column({"c": values}, "c", kind, None)
        except InvalidGraph as err:
            return str(err)

    whole = [outcome(c) for c in columns]
    monkeypatch.setattr(graph_io, "_plainly_valid", lambda value, kind: False)  # item by item only
    assert [outcome(c) for c in columns] == whole
    assert sum(isinstance(w, list) for w in whole) > 9  # (each column passed is returned as given)


def test_an_output_without_a_file_type_is_said_to_have_none(tmp_path):
    """``simulate --timeline t`` said "unsupported file type '(none)'"."""
    from gnplace.graph_io import check_writable

    with pytest.raises(InvalidArgument, match=r"^--timeline .*/t: no file type; expected one of \.png, \.svg$"):
        check_writable(str(tmp_path / "t"), "--timeline", suffixes=(".png", ".svg"))
    with pytest.raises(InvalidArgument, match=r"unsupported file type '\.txt'"):
        check_writable(str(tmp_path / "t.txt"), "--timeline", suffixes=(".png", ".svg"))


def _nested(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_a_meta_load_graph_would_refuse_is_refused_when_saved(tmp_path):
    # meta is the file's second level: a list under it of 62 levels is the deepest a file holds (MAX_DEPTH, 64)
    path = tmp_path / "g.gnpg"
    deepest = OpGraph(["x"], meta={"x": _nested(62)}, name="g")
    assert load_graph(save_graph(deepest, path)) == deepest
    with pytest.raises(InvalidGraph, match=r"^graph 'g' cannot be saved: meta\['x'\](\[0\])+ is nested deeper than a "
                                           r"graph file may be \(64 levels"):
        save_graph(OpGraph(["x"], meta={"x": _nested(63)}, name="g"), path)  # was written, and load_graph refused it
    with pytest.raises(InvalidGraph, match=r"^graph 'g' cannot be saved: meta\['n'\] is an integer of more than "):
        save_graph(OpGraph(["x"], meta={"n": 10**5000}, name="g"), path)  # was json's ValueError
    assert load_graph(path) == deepest
    big = OpGraph(["x"], meta={"n": 10**4000, "m": -(2**3000)})  # within the digits Python writes and reads
    assert load_graph(save_graph(big, tmp_path / "big.gnpg")) == big


def test_a_graph_is_not_saved_under_a_name_load_graph_reads_as_an_onnx_model(tmp_path):
    with pytest.raises(InvalidArgument, match=r"^graph file .*g\.ONNX: a \.onnx name is read as an ONNX model"):
        save_graph(chain_graph(2), tmp_path / "g.ONNX")  # was written, and load_graph refused the file
    assert not list(tmp_path.iterdir())


def test_a_graph_file_load_graph_would_refuse_is_not_written(tmp_path, monkeypatch):
    import gnplace.graph_io as graph_io

    padded = OpGraph(["x"], meta={"pad": "a" * 70 * 2**20}, name="g")  # packs 1,000 to 1: "a gzip bomb?" on loading
    with pytest.raises(InvalidGraph, match=r"^graph 'g' cannot be saved compressed: its [\d,]+ bytes of JSON pack into "):
        save_graph(padded, tmp_path / "g.gnpg")
    assert not list(tmp_path.iterdir())
    assert load_graph(save_graph(padded, tmp_path / "g.json")) == padded  # plain JSON reads back
    monkeypatch.setattr(graph_io, "MAX_NODES", 2)  # (20,000,000 ops: too many to build here)
    with pytest.raises(InvalidGraph, match=r"^graph 'chain3' cannot be saved: it has 3 ops, past the 2 a graph file"):
        save_graph(chain_graph(3), tmp_path / "c.gnpg")
    with pytest.raises(InvalidGraph, match=r"field 'name' has 3 entries, over the limit of 2"):  # what load_graph said
        graph_from_dict(graph_to_dict(chain_graph(3)))


def test_a_name_or_integer_column_refuses_an_integer_past_the_limit_by_its_field():
    from gnplace.limits import MAX_COUNT

    data = graph_to_dict(chain_graph(2))
    data["nodes"]["phase"] = [MAX_COUNT + 1, 0]
    with pytest.raises(InvalidGraph, match=r"field 'phase'\[0\] is too large"):
        graph_from_dict(data)


def test_a_graph_file_of_the_size_limit_is_saved_and_one_byte_over_refused(tmp_path, monkeypatch):
    from gnplace import graph_io

    graph = chain_graph(3)
    size = len(graph_io.graph_file_bytes(graph, tmp_path / "g.gnpg"))
    monkeypatch.setattr(graph_io, "MAX_FILE_BYTES", size)
    assert save_graph(graph, tmp_path / "g.gnpg").stat().st_size == size
    monkeypatch.setattr(graph_io, "MAX_FILE_BYTES", size - 1)
    with pytest.raises(InvalidGraph, match="cannot be saved: its file would be"):
        save_graph(graph, tmp_path / "h.gnpg")
    assert not (tmp_path / "h.gnpg").exists()


def test_a_graph_file_named_onnx_in_capitals_is_refused_as_an_onnx_model(tmp_path):
    (tmp_path / "MODEL.ONNX").write_bytes(save_graph(chain_graph(2), tmp_path / "g.gnpg").read_bytes())
    with pytest.raises(InvalidGraph, match="an ONNX model, not a gnplace graph file"):
        load_graph(tmp_path / "MODEL.ONNX")


def test_from_networkx_takes_a_boolean_edge_index_for_none():
    """``index=True`` is no position: that edge follows the one of index 5, though networkx lists it first."""
    G = nx.DiGraph()
    G.add_edge("a", "b", index=True)
    G.add_edge("a", "c", index=5)
    g = from_networkx(G)
    assert [(g.node_names[s], g.node_names[d]) for s, d in zip(g.edge_src, g.edge_dst)] == [("a", "c"), ("a", "b")]


def test_from_networkx_keeps_a_name_given_even_an_empty_one():
    G = nx.DiGraph([("a", "b")], name="from graph")
    assert from_networkx(G, name="").name == ""
    assert from_networkx(G).name == "from graph"


def test_a_failed_append_takes_back_what_it_wrote_and_names_the_file(tmp_path):
    """A full disk (here a limit on file size) left half a line at the end of the file."""
    resource = pytest.importorskip("resource")
    from gnplace.graph_io import append_to

    path = tmp_path / "rows.csv"
    path.write_bytes(b"first\n")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (10, hard))  # 4 more bytes fit, the fifth fails (EFBIG)
    try:
        with pytest.raises(OSError) as raised:
            append_to(path, b"second line\n")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert raised.value.filename == str(path) and path.read_bytes() == b"first\n"


def test_an_output_file_type_is_matched_without_case_and_its_folders_may_be_missing(tmp_path):
    from gnplace.graph_io import check_writable

    check_writable(tmp_path / "OUT.GNPG", "--output", (".gnpg", ".json"))
    check_writable(tmp_path / "new" / "sub" / "out.gnpg", "--output", (".gnpg",))  # made when written
    with pytest.raises(InvalidArgument, match=r"--output .*out\.txt: unsupported file type '\.txt'"):
        check_writable(tmp_path / "out.txt", "--output", (".gnpg", ".json"))


def test_a_killed_writes_temporary_file_of_a_long_name_is_removed_too(tmp_path):
    """A name too long for its .tmp beside it writes through a temporary named by its digest: that one goes too."""
    import hashlib
    import subprocess
    import sys
    import time

    from gnplace.graph_io import STALE_TEMPORARY_S, write_atomically

    name = "p" * 246 + ".json"  # 251 bytes: NAME.PID.RANDOM.tmp would not fit 255
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = tmp_path / f"{hashlib.sha256(name.encode()).hexdigest()[:16]}.{gone.pid}.0123abcd.tmp"
    left.write_bytes(b"partial")
    old = time.time() - STALE_TEMPORARY_S - 60
    os.utime(left, (old, old))
    write_atomically(tmp_path / name, b"whole")
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_a_dataset_folder_or_its_manifest_given_as_a_graph_names_what_to_give(tmp_path):
    """``place datasets/real`` said only "is a folder, not a graph file", and ``place datasets/real/manifest.json``
    "not a gnplace graph file (no 'format' field)": neither named a graph file of it or ``evaluate -g``."""
    from gnplace.shipped import shipped_path

    folder = shipped_path("datasets/real")
    with pytest.raises(InvalidGraph, match=r"real: is a folder of graphs, not a graph file: give one of its graph "
                                           r"files, or the folder to a command that reads one \(gnplace evaluate -g"):
        load_graph(folder)
    with pytest.raises(InvalidGraph, match=r"manifest.json: a dataset's manifest, not a graph file: give one of the "
                                           r"graph files it lists"):
        load_graph(folder / "manifest.json")
    with pytest.raises(InvalidGraph, match=r": is a folder, not a graph file$"):  # a folder of no graphs: as before
        load_graph(tmp_path)
