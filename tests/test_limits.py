"""Every reader against hostile input: generated mutations of valid files end in a valid object or one
``GnplaceError`` line (exit 2 through the CLI), never another exception, a hang or a memory blow-up.

The default run tries a few dozen inputs per reader; ``make test-slow`` (``pytest -m slow``) runs the
same generators for over a thousand inputs across all readers and the CLI.
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import io
import json
import math
import random
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnplace.cli import main
from gnplace.cluster import load_cluster
from gnplace.exceptions import GnplaceError, InvalidArgument, InvalidCluster, InvalidGraph, InvalidPlacement
from gnplace.graph_io import graph_to_dict, load_graph, save_graph
from gnplace.limits import (
    MAX_DEPTH,
    check_depth,
    check_regular_file,
    gunzip,
    is_number,
    is_whole,
    parse_json,
    parse_yaml,
    scalar_loader,
)
from gnplace.placement import load_placement
from gnplace.toy import mlp_training_graph

ROOT = Path(__file__).resolve().parents[1]
GRAPH = mlp_training_graph(layers=2, width=32, batch=4)
GRAPH_DOC = graph_to_dict(GRAPH)
CLUSTER_TEXT = (ROOT / "gnplace" / "clusters" / "k80x4.yaml").read_text()
CONFIG_DOC = yaml.safe_load((ROOT / "configs" / "pretrain.yaml").read_text())
CHECKPOINT = (ROOT / "checkpoints" / "gnplace-base.ckpt").read_bytes()
WEIRD = [None, True, False, "3", "", -1, 0, 1e40, -1e40, 2**70, [], {}, [1, 2], "x" * 40, 1.5, "1e9", {"a": 1},
         "__DEEP__"]
FAST = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SLOW = settings(max_examples=250, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


# ------------------------------------------------------------------ mutations of valid inputs
def mutate_doc(doc, rng: random.Random):
    """One structural mutation: a weird value, a missing key, deep nesting or a huge list, somewhere."""
    doc = copy.deepcopy(doc)
    paths: list[list] = []

    def walk(x, path):
        paths.append(path)
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, [*path, k])
        elif isinstance(x, list) and x:
            for i in rng.sample(range(len(x)), min(3, len(x))):
                walk(x[i], [*path, i])

    walk(doc, [])
    path = rng.choice(paths)
    if not path:
        return rng.choice(WEIRD)
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    action = rng.choice(["weird", "weird", "delete", "deep", "grow"])
    if action == "weird":
        parent[key] = rng.choice(WEIRD)
    elif action == "delete":
        parent.pop(key)
    elif action == "deep":
        parent[key] = "__DEEP__"
    elif isinstance(parent[key], list):
        parent[key] = parent[key] * rng.choice([2, 500])
    return doc


def to_json(doc, rng: random.Random) -> str:
    depth = rng.choice([MAX_DEPTH + 1, 5_000, 200_000])
    return json.dumps(doc).replace('"__DEEP__"', "[" * depth + "]" * depth)


def mutate_bytes(raw: bytes, rng: random.Random) -> bytes:
    """Truncation, byte flips or inserted garbage."""
    data = bytearray(raw)
    action = rng.choice(["truncate", "flip", "insert"])
    if action == "truncate":
        return bytes(data[: rng.randrange(len(data))])
    if action == "flip":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    at = rng.randrange(len(data))
    return bytes(data[:at]) + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + bytes(data[at:])


def hostile_yaml(rng: random.Random) -> str:
    cases = [
        lambda: CLUSTER_TEXT.replace("count: 4", "count: " + rng.choice(
            ["10000000", "true", "4.5", '"4"', "-3", "1e40", "[]", "null"])),
        lambda: "a: &a [1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b]\n",
        lambda: "devices: " + "[" * 100_000 + "]" * 100_000 + "\nlinks: {default: pcie3}\n",
        lambda: "devices:\n" + "".join("  " * i + "- \n" for i in range(200)),
        lambda: mutate_bytes(CLUSTER_TEXT.encode(), rng).decode("latin-1"),
        lambda: CLUSTER_TEXT.replace("k80", rng.choice(["", "K80 ", "v100\x00", "nope"])),
        lambda: CLUSTER_TEXT + "\n" + rng.choice(["links: 5", "devices: {}", "name: [1]", "- x", "links: {default: {bandwidth: -1}}"]),
    ]
    return rng.choice(cases)()


def run_cli(argv) -> tuple[int, str]:
    """The CLI's exit status and stderr; any exception escaping ``main`` fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, err.getvalue()


def assert_clean(code: int, err: str) -> None:
    assert code in (0, 2), (code, err)
    if code == 2:
        lines = [line for line in err.strip().splitlines() if "Warning" not in line and not line.startswith("  ")]
        assert len(lines) == 1 and lines[0].startswith("gnplace: error: "), err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    save_graph(GRAPH, folder / "good.json")
    assert run_cli(["place", folder / "good.json", "-c", "k80x2", "-p", "m_etf", "-o", folder / "placement.json"])[0] == 0
    return folder


# ------------------------------------------------------------------------- the readers
def graph_case(rng: random.Random, folder: Path) -> list:
    kind = rng.choice(["json", "gnpg", "bytes"])
    if kind == "json":
        (folder / "g.json").write_text(to_json(mutate_doc(GRAPH_DOC, rng), rng))
        return ["simulate", folder / "g.json", "-c", "k80x2"]
    if kind == "gnpg":
        (folder / "g.gnpg").write_bytes(gzip.compress(to_json(mutate_doc(GRAPH_DOC, rng), rng).encode()))
    else:
        good = gzip.compress(json.dumps(GRAPH_DOC).encode())
        (folder / "g.gnpg").write_bytes(mutate_bytes(good, rng))
    return ["simulate", folder / "g.gnpg", "-c", "k80x2"]


def cluster_case(rng: random.Random, folder: Path) -> list:
    (folder / "c.yaml").write_text(hostile_yaml(rng), encoding="latin-1")
    return ["simulate", folder / "good.json", "-c", folder / "c.yaml"]


def placement_case(rng: random.Random, folder: Path) -> list:
    doc = json.loads((folder / "placement.json").read_text())
    (folder / "p.json").write_text(to_json(mutate_doc(doc, rng), rng))
    return ["simulate", folder / "good.json", "-c", "k80x2", "-p", folder / "p.json"]


def checkpoint_case(rng: random.Random, folder: Path) -> list:
    (folder / "bad.ckpt").write_bytes(mutate_bytes(CHECKPOINT, rng))
    return ["place", folder / "good.json", "-c", "k80x2", "-p", "policy", "--checkpoint", folder / "bad.ckpt"]


def onnx_case(rng: random.Random, folder: Path) -> list:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.zeros((16, 4), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
                               helper.make_node("Relu", ["y"], ["z"], name="relu")], "mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [8, 4])], [w])
    good = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    (folder / "m.onnx").write_bytes(mutate_bytes(good, rng))
    return ["place", folder / "m.onnx", "-c", "k80x2"]


READERS = {"graph": graph_case, "cluster": cluster_case, "placement": placement_case,
           "checkpoint": checkpoint_case, "onnx": onnx_case}


def check_reader(name: str, rng: random.Random, folder: Path) -> None:
    argv = READERS[name](rng, folder)
    output = folder / "kept.json"
    output.write_text('{"keep": "me"}')
    if argv[0] == "place":
        argv = [*argv, "-o", output]
    assert_clean(*run_cli(argv))
    if argv[0] == "place" and output.read_text() != '{"keep": "me"}':  # only a successful run may replace it
        assert json.loads(output.read_text())["format"] == "gnplace-placement"


@pytest.mark.parametrize("reader", sorted(READERS))
@FAST
@given(rng=st.randoms(use_true_random=False))
def test_reader_survives_hostile_input(files, reader, rng):
    check_reader(reader, rng, files)


@pytest.mark.slow
@pytest.mark.parametrize("reader", sorted(READERS))
@SLOW
@given(rng=st.randoms(use_true_random=False))
def test_reader_survives_hostile_input_long(files, reader, rng):
    check_reader(reader, rng, files)


def config_check(rng: random.Random, folder: Path) -> None:
    from gnplace.pretrain import load_pretrain_config

    doc = mutate_doc(CONFIG_DOC, rng)
    text = yaml.safe_dump(doc).replace("__DEEP__", "[" * 3000 + "]" * 3000)
    if rng.random() < 0.2:
        text = mutate_bytes(text.encode(), rng).decode("latin-1")
    path = folder / "cfg.yaml"
    path.write_text(text, encoding="latin-1")
    override = rng.choice(["learner.lr=1e-3", "schedule.iterations=1e99", "schedule.iterations=.inf", "data.presets=[",
                           "learner.samples=true", "data.families=cifar10"])
    try:
        load_pretrain_config(path, [override])
    except GnplaceError as err:
        assert "\n" not in str(err)


@FAST
@given(rng=st.randoms(use_true_random=False))
def test_pretraining_config_survives_hostile_input(files, rng):
    config_check(rng, files)


@pytest.mark.slow
@SLOW
@given(rng=st.randoms(use_true_random=False))
def test_pretraining_config_survives_hostile_input_long(files, rng):
    config_check(rng, files)


# --------------------------------------------------------------------- the limits themselves
def test_deep_json_and_yaml_are_refused_before_recursing():
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(InvalidGraph, match="nested more than 64 levels deep"):
        parse_json(deep, InvalidGraph, "g.json")
    with pytest.raises(InvalidGraph, match="nested more than 64 levels deep"):
        parse_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), InvalidGraph, "g.json")
    with pytest.raises(InvalidCluster, match="nested more than 64 levels deep"):
        parse_yaml("a: " + deep, InvalidCluster, "c.yaml")
    check_depth([[1]], InvalidGraph, "ok")
    with pytest.raises(InvalidCluster, match="nested more than 64 levels deep"):
        parse_yaml("a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), InvalidCluster, "c.yaml")


def test_yaml_brackets_in_text_and_comments_are_no_nesting():
    """A bracket count refused a cluster file whose description held 70 "[" (quoted, plain or in a comment)."""
    many = "[" * 70
    for text in (f"description: '{many}'\n", f'description: "{many}"\n', f"description: a{many}\n",
                 f"a: 1  # {many}\n"):
        assert isinstance(parse_yaml(text, InvalidCluster, "c.yaml"), dict)


def test_yaml_aliases_and_json_constants_are_refused():
    with pytest.raises(InvalidCluster, match="anchors"):
        parse_yaml("a: &x [1]\nb: *x\n", InvalidCluster, "c.yaml")
    with pytest.raises(InvalidGraph, match="NaN is not a number JSON allows"):
        parse_json('{"a": NaN}', InvalidGraph, "g.json")


@pytest.mark.parametrize("text", ['{"a": 1e400}', "[-1E+309]", '{"meta": {"x": [2.5e99999]}}'])
def test_a_json_number_beyond_any_float_is_refused_not_read_as_an_infinity(tmp_path, text):
    """``1e400`` was read as inf, the infinity ``Infinity`` is refused as: a graph's meta then could not be saved."""
    with pytest.raises(InvalidGraph, match=r"^g.json: not valid JSON \(.* is not a finite number\)$"):
        parse_json(text, InvalidGraph, "g.json")
    assert parse_json("[1e308, -2.5e-400, 0.5, 7]", InvalidGraph, "g.json") == [1e308, -0.0, 0.5, 7]
    doc = json.dumps(GRAPH_DOC).replace('"meta": {}', '"meta": {"accuracy": 1e400}')
    assert '"accuracy": 1e400' in doc
    (tmp_path / "g.gnpg").write_text(doc)
    with pytest.raises(InvalidGraph, match="is not a finite number"):
        load_graph(tmp_path / "g.gnpg")


def test_a_yaml_key_given_twice_is_refused_not_overwritten():
    # PyYAML keeps the last of two equal keys: a second `links:` would silently replace the first
    text = "devices: [{name: a, count: 2, kind: v100}]\nlinks: {default: pcie3}\nlinks: {default: nvlink2}\n"
    with pytest.raises(InvalidCluster, match="^c.yaml: not valid YAML at line 3, column 1: key 'links' is given twice$"):
        parse_yaml(text, InvalidCluster, "c.yaml")
    with pytest.raises(InvalidCluster, match="key 'kind' is given twice"):
        parse_yaml("devices: [{name: a, kind: v100, kind: k80}]\n", InvalidCluster, "c.yaml")
    assert parse_yaml("a: {x: 1}\nb: {x: 2}\n", InvalidCluster, "c.yaml") == {"a": {"x": 1}, "b": {"x": 2}}


def test_json_bytes_may_start_with_a_utf8_byte_order_mark_as_yaml_may(tmp_path):
    """A placement or graph file saved by an editor that writes a BOM was refused ("Unexpected UTF-8 BOM (decode
    using utf-8-sig)"), where a cluster YAML file with one was read."""
    from gnplace.graph_io import load_graph, save_graph
    from gnplace.toy import chain_graph

    assert parse_json(b'\xef\xbb\xbf{"a": [1, "\xc3\xbc"]}', InvalidGraph, "g.json") == {"a": [1, "\u00fc"]}
    assert parse_yaml("\ufeffa: 1", InvalidGraph, "c.yaml") == {"a": 1}
    g = chain_graph(3)
    path = save_graph(g, tmp_path / "g.json")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_graph(path) == g
    with pytest.raises(InvalidGraph, match=r"^g\.json: not UTF-8 text"):
        parse_json("{}".encode("utf-16"), InvalidGraph, "g.json")  # UTF-16 (its own BOM) stays refused


def test_a_json_key_given_twice_is_refused_not_overwritten():
    # json keeps the last of two equal keys: a placement file naming an op twice silently used the second device
    with pytest.raises(InvalidPlacement, match=r"^p.json: not valid JSON \(key 'op0' is given twice in one object\)$"):
        parse_json('{"placement": {"op0": "gpu0", "op1": "gpu0", "op0": "gpu1"}}', InvalidPlacement, "p.json")
    assert parse_json('{"a": {"x": 1}, "b": {"x": 2}}', InvalidPlacement, "p.json") == {"a": {"x": 1}, "b": {"x": 2}}


def test_a_gzip_bomb_stops_at_the_limit(monkeypatch):
    import gnplace.limits as limits

    monkeypatch.setattr(limits, "MAX_TEXT_BYTES", 1000)
    with pytest.raises(InvalidGraph, match="decompresses to more than 1000 bytes"):
        gunzip(gzip.compress(b"0" * 100_000), InvalidGraph, "g.gnpg")
    assert gunzip(gzip.compress(b"0" * 10), InvalidGraph, "g.gnpg") == b"0" * 10


def test_every_member_of_a_multi_member_gzip_is_read_and_trailing_data_refused(monkeypatch):
    # only the first member was read: `cat a.gnpg b.gnpg` loaded as a, a block-wise compressed file failed as JSON
    whole = gzip.compress(b"[1, 2]")
    assert gunzip(gzip.compress(b"[1, ") + gzip.compress(b"2]"), InvalidGraph, "g.gnpg") == b"[1, 2]"
    assert gunzip(whole + b"\0\0", InvalidGraph, "g.gnpg") == b"[1, 2]"  # padding, as gzip reads it
    assert gunzip(whole + whole, InvalidGraph, "g.gnpg") == b"[1, 2][1, 2]"  # then refused as JSON
    with pytest.raises(InvalidGraph, match=r"^g.gnpg: corrupt compressed data \(4 bytes after its end are not gzip"):
        gunzip(whole + b"junk", InvalidGraph, "g.gnpg")
    with pytest.raises(InvalidGraph, match="truncated compressed data"):
        gunzip(whole + whole[:12], InvalidGraph, "g.gnpg")
    import gnplace.limits as limits

    monkeypatch.setattr(limits, "MAX_TEXT_BYTES", 1000)  # the limit holds over all members together
    with pytest.raises(InvalidGraph, match="decompresses to more than 1000 bytes"):
        gunzip(gzip.compress(b"0" * 600) + gzip.compress(b"0" * 600), InvalidGraph, "g.gnpg")


def test_a_huge_device_count_fails_before_allocating(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text(CLUSTER_TEXT.replace("count: 4", "count: 10000000"))
    with pytest.raises(InvalidCluster, match="more than 4096 devices in all"):
        load_cluster(path)


def test_numbers_are_checked_not_coerced(tmp_path):
    for mutate, message in [
        (lambda d: d["nodes"]["out_bytes"].__setitem__(0, 1e40), "is too large"),
        (lambda d: d["nodes"]["flops"].__setitem__(0, "3"), "must be a number, found '3'"),
        (lambda d: d["nodes"]["group"].__setitem__(0, True), "must be a number, found True"),
    ]:
        doc = copy.deepcopy(GRAPH_DOC)
        mutate(doc)
        path = tmp_path / "g.json"
        path.write_text(json.dumps(doc))
        with pytest.raises(InvalidGraph, match=message):
            load_graph(path)


def test_a_failing_command_leaves_an_existing_output_untouched(files, tmp_path):
    output = tmp_path / "placement.json"
    output.write_bytes(b"precious")
    bad = tmp_path / "bad.yaml"
    bad.write_text("devices: [")
    assert run_cli(["place", files / "good.json", "-c", bad, "-o", output])[0] == 2
    assert run_cli(["place", tmp_path / "absent.gnpg", "-c", "k80x2", "-o", output])[0] == 2
    assert output.read_bytes() == b"precious"
    placement = load_placement(files / "placement.json", GRAPH, load_cluster("k80x2"))
    assert placement.devices.shape == (GRAPH.num_ops,)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_devices_and_pipes_are_refused_before_reading(tmp_path, capsys):
    """/dev/zero reports a size of 0 and never ends, a pipe blocks: neither is read (they ran out of memory or hung)."""
    import os

    fifo = tmp_path / "graph.gnpg"
    os.mkfifo(fifo)
    for args in (["inspect", "/dev/zero"], ["inspect", str(fifo)], ["inspect", str(fifo), "-c", "/dev/zero"]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is not a regular file (a device or a pipe)" in err


@pytest.mark.parametrize("budget", [0, -1, 10**9 + 1, 2**62, 2.0, "5", True, None])
def test_a_budget_is_a_whole_number_of_evaluations_up_to_the_limit(budget):
    import numpy as np

    from gnplace.exceptions import InvalidArgument
    from gnplace.limits import MAX_BUDGET, check_budget

    with pytest.raises(InvalidArgument, match=rf"^AnnealingPlacer needs a budget >= 1 \(a whole number of timer "
                                              rf"evaluations, at most 1,000,000,000\), got {budget!r}$"):
        check_budget(budget, "AnnealingPlacer")
    assert check_budget(1, "x") == 1 and check_budget(np.int64(MAX_BUDGET), "x") == MAX_BUDGET == 10**9
    assert type(check_budget(np.int64(5), "x")) is int


def test_the_longest_duration_a_cluster_may_give_is_a_limit_beside_the_others():
    """``MAX_SECONDS`` lives with the limits it derives from, and ``gnplace.cluster`` still exports it."""
    import gnplace.cluster
    import gnplace.limits

    assert "MAX_SECONDS" in gnplace.limits.__all__ and "MAX_SECONDS" in gnplace.cluster.__all__
    assert gnplace.limits.MAX_SECONDS == gnplace.limits.MAX_COUNT / gnplace.limits.MIN_RATE
    assert gnplace.cluster.MAX_SECONDS is gnplace.limits.MAX_SECONDS
    assert "``MAX_SECONDS``" in (gnplace.limits.__doc__ or "")  # in the table of every limit


def test_check_regular_file_names_what_the_path_is_instead(tmp_path):
    from gnplace.exceptions import InvalidCheckpoint

    (tmp_path / "f").write_text("x")
    check_regular_file(tmp_path / "f", "graph file", InvalidArgument)  # a regular file passes
    with pytest.raises(InvalidArgument, match=r": is a folder, not a graph file \(found in d\)$"):
        check_regular_file(tmp_path, "graph file", InvalidArgument, where=" (found in d)")
    with pytest.raises(InvalidCheckpoint, match=r"nothing: no such checkpoint file$"):
        check_regular_file(tmp_path / "nothing", "checkpoint file", InvalidArgument, missing=InvalidCheckpoint)
    with pytest.raises(InvalidArgument, match=r"^/dev/null: not a regular file \(a device, pipe or socket\), so not an "
                                              r"ONNX file$"):
        check_regular_file(Path("/dev/null"), "ONNX file", InvalidArgument)


def test_an_int_past_a_floats_range_is_no_number_not_an_overflow():
    """``math.isfinite(10**400)`` raised OverflowError: a checkpoint's beta, a placer option, a config value of that
    size was a traceback where the checks meant a one-line refusal."""
    import numpy as np

    from gnplace.limits import as_float, finite_number

    assert as_float(10**400) is None and not finite_number(10**400) and not finite_number(-(10**400))
    assert as_float(np.int64(3)) == 3.0 and finite_number(np.float32(2.5)) and as_float(float("nan")) != 0.0
    assert not finite_number(float("inf")) and not finite_number(True) and not finite_number("1") and not finite_number(None)


def test_a_yaml_merge_key_is_refused_in_words():
    """``<<: {...}`` was "could not determine a constructor for the tag 'tag:yaml.org,2002:merge'"."""
    with pytest.raises(InvalidCluster, match=r"^c.yaml: not valid YAML at line 2, column 3: merge keys \(<<\) are not "
                                             r"allowed$"):
        parse_yaml("a:\n  <<: {b: 1}\n  c: 2\n", InvalidCluster, "c.yaml")
    assert parse_yaml("a: {'<<': 1}\n", InvalidCluster, "c.yaml") == {"a": {"<<": 1}}  # a quoted key is a key


def test_json_text_writes_non_finite_numbers_as_null():
    """json wrote NaN and Infinity, which are not JSON (finetune --json's speed-up over a 0 s reference)."""
    import json

    import numpy as np

    from gnplace.limits import json_text

    text = json_text({"a": float("inf"), "b": [float("nan"), 1.5, (np.float64(-np.inf), 2)], "c": "x"}, indent=1)
    assert json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in the output")) == \
        {"a": None, "b": [None, 1.5, [None, 2]], "c": "x"}


def test_a_small_gzip_bomb_stops_at_a_hundred_times_its_size_past_the_floor(monkeypatch, tmp_path):
    """A 408 KB graph file of "0," inflated to 400 MB (2.5 GB and 77 s to parse); 4 MB of it reached the 4 GiB limit."""
    import gnplace.limits as limits
    from gnplace.graph_io import load_graph, save_graph
    from gnplace.toy import chain_graph

    monkeypatch.setattr(limits, "MIN_INFLATED", 10_000)  # the floor's 64 MiB made small
    packed = gzip.compress(b"0" * 1_000_000)  # about 1 KB: a thousand times
    with pytest.raises(InvalidGraph, match=rf"^g.gnpg: decompresses to more than {100 * len(packed)} bytes, the limit for "
                                           rf"{len(packed)} compressed ones \(past 10000 bytes, 100 times as many"):
        gunzip(packed, InvalidGraph, "g.gnpg")
    assert gunzip(gzip.compress(b"0" * 5000), InvalidGraph, "g.gnpg") == b"0" * 5000  # under the floor: any ratio
    graph = chain_graph(2000)  # a graph file inflates about ten times: read whole
    assert load_graph(save_graph(graph, tmp_path / "chain.gnpg")) == graph


@pytest.mark.parametrize("value, whole, number", [
    (3, True, True), (np.int64(3), True, True), (np.uint8(0), True, True), (2.0, False, True),
    (np.float32(0.5), False, True), (True, False, False), (np.bool_(False), False, False), ("1", False, False),
    (None, False, False), (1 + 0j, False, False),
])
def test_is_whole_and_is_number_refuse_bools_and_strings(value: object, whole: bool, number: bool) -> None:
    assert is_whole(value) is whole
    assert is_number(value) is number


def test_check_depth_reads_a_flat_lists_item_types_not_each_item():
    """A list of scalars is not walked item by item (1.3 s of loading a 280,000-op graph); nesting still counts."""

    class Probe:
        seen = 0

        @property  # type: ignore[misc]
        def __class__(self) -> type:  # isinstance(item, ...) asks each item for it; type(item) does not
            Probe.seen += 1
            return Probe

    check_depth({"column": [Probe() for _ in range(1000)], "names": ["a"] * 1000}, InvalidGraph, "ok")
    assert Probe.seen == 0
    nested: list[object] = [1.5, "x"]
    for _ in range(MAX_DEPTH - 1):
        nested = [0, nested, "y"]
    check_depth(nested, InvalidGraph, "ok")
    with pytest.raises(InvalidGraph, match="nested more than 64 levels deep"):
        check_depth({"a": [1, (2, nested)]}, InvalidGraph, "g")


def test_yaml_numbers_read_as_written_not_as_yaml_1_1_octal_binary_or_sexagesimal(tmp_path):
    # YAML 1.1 read `memory: 010` as 8 (and `08` as text), `0b101` as 5, `1:30` as 90: a number typed with a
    # leading zero or a colon became another number without a word
    data = parse_yaml("a: 010\nb: 1:30\nc: 0b101\nd: 08\ne: [10, 0x1f, 1_000, -2, 2.5, .5, 1:30.5]\n",
                      InvalidCluster, "c.yaml")
    assert data == {"a": "010", "b": "1:30", "c": "0b101", "d": "08", "e": [10, 31, 1000, -2, 2.5, 0.5, "1:30.5"]}
    assert yaml.safe_load("010") == 8  # what the stricter loader is there for
    loader = scalar_loader()
    assert [yaml.load(t, Loader=loader) for t in ("true", "~", ".inf", "0", "+0", "-0")] == [True, None, math.inf, 0, 0, 0]
    assert yaml.load("010", Loader=yaml.SafeLoader) == 8  # SafeLoader itself is left as it was
    # a cluster's memory typed with a leading zero is its decimal value, as a size in text is
    cluster = tmp_path / "c.yaml"
    cluster.write_text("devices: [{name: g, kind: gpu, peak_flops: 1e12, memory: 010, mem_bandwidth: 1e10}]\n")
    assert load_cluster(cluster).devices[0].memory == 10


def test_the_module_table_gives_each_limit_its_value():
    """The table atop gnplace.limits (which docs and messages quote) is what the readers enforce: a mutant of MAX_NODES
    20,000,001 passed every test."""
    import re

    import gnplace.limits as limits

    table = dict(re.findall(r"^``(\w+)``\s+(.+?)\s*$", limits.__doc__ or "", flags=re.M))
    expected = {"MAX_FILE_BYTES": 4 * 2**30, "MAX_TEXT_BYTES": 4 * 2**30, "MAX_INFLATION": 100, "MAX_DEPTH": 64,
                "MAX_NODES": 20_000_000, "MAX_EDGES": 100_000_000, "MAX_DEVICES": 4096, "MAX_COUNT": 2**62,
                "MIN_RATE": 1000, "MAX_WIDTH": 8192, "MAX_LAYERS": 64, "MAX_DRAWN": 16384, "MAX_BUDGET": 10**9,
                "MAX_EPOCHS": 1000, "MIN_INFLATED": 64 * 2**20}
    assert set(table) == set(expected) - {"MIN_INFLATED"} | {"MAX_SECONDS"}
    # outside the table, each beside what it limits: a mutant of either (1e-5, 86,401) passed every test
    assert limits.MIN_TEMPERATURE == 1e-6 and limits.MAX_TIMEOUT_S == 86_400
    for name, value in expected.items():
        assert getattr(limits, name) == value, name
    assert limits.MAX_SECONDS == limits.MAX_COUNT / limits.MIN_RATE
    assert table["MAX_NODES"].startswith("20,000,000 ") and table["MAX_EDGES"].startswith("100,000,000 ")
    assert table["MAX_INFLATION"].startswith("100 times") and "(64 MiB)" in table["MAX_INFLATION"]


def test_read_file_refuses_a_file_past_the_limit_by_its_size_before_reading(tmp_path, monkeypatch):
    """The size check had no test (a read_file without it, or refusing a file of the limit itself, passed)."""
    import gnplace.limits as limits
    from gnplace.limits import read_file

    huge = tmp_path / "huge.gnpg"
    with huge.open("wb") as f:
        f.truncate(4 * 2**30 + 1)  # sparse: no disk used, and reading it would take 4 GiB
    with monkeypatch.context() as patch, pytest.raises(InvalidGraph, match=r"^.*huge\.gnpg: 4294967297 bytes is over "
                                                                          r"the limit of 4294967296 for a graph file$"):
        patch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"{self} was read"))
        read_file(huge, InvalidGraph, "graph file")
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", 10)
    (tmp_path / "ten").write_bytes(b"0123456789")
    assert read_file(tmp_path / "ten", InvalidGraph, "graph file") == b"0123456789"  # the limit itself is read
    (tmp_path / "eleven").write_bytes(b"0123456789A")
    with pytest.raises(InvalidGraph, match=r"eleven: 11 bytes is over the limit of 10 for a graph file$"):
        read_file(tmp_path / "eleven", InvalidGraph, "graph file")


def test_gunzip_reads_up_to_its_limit_and_names_the_limit_one_byte_past_it(monkeypatch):
    """Data of exactly the limit is read, one member or several; one byte more is the gzip-bomb refusal (a mutant
    refusing the limit itself, and one reading a byte less than the limit plus one, which then said 'truncated
    compressed data', passed)."""
    import gnplace.limits as limits

    monkeypatch.setattr(limits, "MAX_TEXT_BYTES", 1000)
    assert gunzip(gzip.compress(b"0" * 1000), InvalidGraph, "g.gnpg") == b"0" * 1000
    assert gunzip(gzip.compress(b"0" * 600) + gzip.compress(b"1" * 400), InvalidGraph, "g.gnpg") == \
        b"0" * 600 + b"1" * 400
    for packed in (gzip.compress(b"0" * 1001), gzip.compress(b"0" * 600) + gzip.compress(b"1" * 401)):
        with pytest.raises(InvalidGraph, match=r"^g.gnpg: decompresses to more than 1000 bytes, the limit for "):
            gunzip(packed, InvalidGraph, "g.gnpg")


def test_gunzip_reads_no_more_of_a_member_after_members_that_reached_the_limit(monkeypatch):
    """A first member of exactly the limit leaves room for 0 bytes, and zlib reads a max_length of 0 as no limit: a
    second member is read one byte into it, never whole (5 MB of zeros here, in 5 KB)."""
    import tracemalloc

    import gnplace.limits as limits

    monkeypatch.setattr(limits, "MAX_TEXT_BYTES", 1000)
    packed = gzip.compress(b"0" * 1000) + gzip.compress(b"0" * 5_000_000)
    tracemalloc.start()
    try:
        with pytest.raises(InvalidGraph, match=r"^g.gnpg: decompresses to more than 1000 bytes"):
            gunzip(packed, InvalidGraph, "g.gnpg")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


@pytest.mark.parametrize("timeout_s", [0, -1, 0.0, 86_400.5, 86_401, float("nan"), float("inf"), True, "60", None])
def test_check_timeout_refuses_what_is_no_number_of_seconds_above_0_and_at_most_a_day(timeout_s):
    from gnplace.limits import check_timeout

    message = rf"^timeout_s must be a number of seconds above 0 and at most 86,400, got {re.escape(repr(timeout_s))}$"
    with pytest.raises(InvalidArgument, match=message):
        check_timeout(timeout_s)


def test_check_timeout_takes_a_day_and_a_fraction_of_a_second_as_floats():
    from gnplace.limits import check_timeout

    for timeout_s, seconds in [(86_400, 86_400.0), (0.001, 0.001), (np.float32(0.5), 0.5), (np.int64(60), 60.0)]:
        out = check_timeout(timeout_s)
        assert out == seconds and type(out) is float
