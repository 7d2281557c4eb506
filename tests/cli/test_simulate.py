"""Tests of the ``gnplace simulate`` command, run in-process and once as a subprocess."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gnplace.cli import main
from gnplace.cluster import Cluster, cluster_from_dict, load_cluster
from gnplace.graph import OpGraph
from gnplace.graph_io import graph_to_dict, load_graph, save_graph
from gnplace.placement import Placement, save_placement
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, mlp_training_graph

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "datasets" / "examples" / "mlp2x8w2048b512.gnpg"


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """A wide console (no colours whatever the environment says: conftest.py's ``console_as_piped``)."""
    monkeypatch.setenv("COLUMNS", "200")


def squash(text: str) -> str:
    """``text`` without any whitespace, so that line wrapping does not matter."""
    return "".join(text.split())


@pytest.fixture()
def graph_file(tmp_path) -> Path:
    return save_graph(mlp_training_graph(layers=2, width=8, batch=4, branches=2), tmp_path / "mlp.gnpg")


def run_ok(capsys, *args: str) -> str:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err
    return out


def run_error(capsys, *args: str) -> str:
    """Run a command that must fail on its input; return its one line of stderr."""
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gnplace: error: "), err
    assert err.endswith("\n")
    return lines[0]


# ------------------------------------------------------------------------------- success
def test_table_output(capsys, graph_file):
    out = run_ok(capsys, str(graph_file), "--cluster", "k80x4", "--placer", "round_robin")
    assert squash("mlp2x2w8b4 (26 ops, 5 groups) on k80x4, placer round_robin, mode default") in squash(out)
    assert "step time" in out and "bound" in out
    for col in ("device", "busy", "utilisation", "peak memory", "capacity", "OOM"):
        assert squash(col) in squash(out)
    for name in ("gpu0", "gpu1", "gpu2", "gpu3"):
        assert name in out
    assert "OUT OF MEMORY" not in out


def test_tiny_capacities_and_steps_print_in_a_unit_that_shows_them(capsys, tmp_path):
    """A 1 KiB device printed "0.0" MiB and a 3 ns step "0.000" ms: each is now shown in a unit that holds it."""
    cluster = tmp_path / "fast.yaml"
    cluster.write_text("name: fast\ndevices: [{name: gpu, count: 1, peak_flops: 1e18, mem_bandwidth: 1e18, "
                       "memory: 1 KiB, launch_overhead: 1 ns}]\n")
    graph = save_graph(chain_graph(1, flops=1e9, out_bytes=0), tmp_path / "one.gnpg")
    out = run_ok(capsys, str(graph), "-c", str(cluster))
    assert "step time 3.000 ns" in out and "critical path 3.000 ns" in out
    row = next(line for line in out.splitlines() if "gpu0" in line)
    assert row.split("│")[2:6] == [" 3.000 ns ", "      100.0% ", "         0 B ", " 1.00 KiB "]


def test_json_output(capsys, graph_file):
    out = run_ok(capsys, str(graph_file), "-c", "v100x8", "-p", "round_robin", "--json")
    report = json.loads(out)
    assert report["graph"] == "mlp2x2w8b4" and report["cluster"] == "v100x8"
    assert report["placer"] == "round_robin" and report["mode"] == "default"
    assert report["num_ops"] == 26 and report["num_groups"] == 5
    assert report["ops"] == 26 and report["groups"] == 5  # as inspect, import and evaluate's rows name them
    assert report["step_time_s"] > 0 and report["bound_s"] > 0
    assert report["step_time_s"] >= report["bound_s"] * (1 - 1e-9)
    assert report["ratio_to_bound"] == pytest.approx(report["step_time_s"] / report["bound_s"])
    assert report["bound_s"] == pytest.approx(max(report["critical_path_s"], report["work_bound_s"]))
    assert report["oom"] is False
    devices = report["devices"]
    assert [d["name"] for d in devices] == [f"gpu{i}" for i in range(8)]
    for d in devices:
        assert set(d) == {"name", "busy_s", "utilisation", "peak_memory_bytes", "memory_capacity_bytes", "oom"}
        assert 0 <= d["utilisation"] <= 1 + 1e-12
        assert d["memory_capacity_bytes"] == 16 * 2**30
    assert "timeline" not in report


def test_default_placer_and_cluster(capsys, graph_file):
    report = json.loads(run_ok(capsys, str(graph_file), "--json"))
    assert report["placer"] == "single" and report["cluster"] == "k80x4"
    busy = [d["busy_s"] for d in report["devices"]]
    assert sum(b > 0 for b in busy) == 1  # everything on one device


def test_placeto_mode(capsys, graph_file):
    default = json.loads(run_ok(capsys, str(graph_file), "-c", "k80x2", "-p", "round_robin", "--json"))
    placeto = json.loads(run_ok(capsys, str(graph_file), "-c", "k80x2", "-p", "round_robin", "--json", "--mode", "placeto"))
    assert placeto["mode"] == "placeto"
    assert placeto["step_time_s"] != default["step_time_s"]


def test_a_placement_file_placed_in_placeto_mode_is_timed_in_it_unless_mode_says_otherwise(capsys, graph_file, tmp_path):
    path = tmp_path / "p.json"
    assert main(["place", str(graph_file), "-c", "k80x2", "-p", "round_robin", "--mode", "placeto", "-o", str(path)]) == 0
    capsys.readouterr()
    recorded = json.loads(run_ok(capsys, str(graph_file), "-c", "k80x2", "-p", str(path), "--json"))
    assert recorded["mode"] == "placeto"
    assert recorded["step_time_s"] == json.loads(path.read_text())["predicted"]["step_time_s"]
    forced = json.loads(run_ok(capsys, str(graph_file), "-c", "k80x2", "-p", str(path), "--json", "--mode", "default"))
    assert forced["mode"] == "default" and forced["step_time_s"] != recorded["step_time_s"]
    # a placer name, and a file that records no mode, are timed in the default mode
    assert json.loads(run_ok(capsys, str(graph_file), "-c", "k80x2", "-p", "round_robin", "--json"))["mode"] == "default"
    g = load_graph(graph_file)
    bare = save_placement(tmp_path / "bare.json", g, Placement([0] * g.num_ops, load_cluster("k80x2")))
    assert json.loads(run_ok(capsys, str(graph_file), "-c", "k80x2", "-p", str(bare), "--json"))["mode"] == "default"


def test_json_graph_file(capsys, tmp_path):
    path = save_graph(chain_graph(3), tmp_path / "chain.json")
    report = json.loads(run_ok(capsys, str(path), "-c", "k80x2", "--json"))
    assert report["graph"] == "chain3" and report["num_ops"] == 3


def test_cluster_yaml_file(capsys, graph_file, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ndevices: [{name: acc, count: 3, kind: p100}]\nlinks: {default: nvlink2}\n")
    report = json.loads(run_ok(capsys, str(graph_file), "-c", str(path), "-p", "round_robin", "--json"))
    assert report["cluster"] == "mine"
    assert [d["name"] for d in report["devices"]] == ["acc0", "acc1", "acc2"]


def test_timeline_png(capsys, graph_file, tmp_path):
    png = tmp_path / "out" / "step.png"
    out = run_ok(capsys, str(graph_file), "-c", "k80x2", "-p", "round_robin", "--timeline", str(png))
    assert squash(f"timeline written to {png}") in squash(out)
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


def test_names_are_shown_as_they_are_in_the_table_and_the_chart(capsys, graph_file, tmp_path):
    """A device "gpu[/]" was a rich MarkupError traceback, "[red]gpu" shown as "gpu", and a cluster "a$\\frac$" a
    matplotlib maths error once the table was printed, with no chart written."""
    path = tmp_path / "odd.yaml"
    path.write_text("name: 'a$\\frac$ [red]c'\ndevices: [{name: 'gpu[/]', kind: k80}, {name: '[red]gpu', kind: k80}]\n"
                    "links: {default: pcie3}\n")
    png = tmp_path / "step.png"
    out = run_ok(capsys, str(graph_file), "-c", str(path), "-p", "round_robin", "--timeline", str(png))
    assert "gpu[/]" in out and "[red]gpu" in out and "a$\\frac$ [red]c" in out
    assert png.read_bytes().startswith(b"\x89PNG")


def test_timeline_with_json(capsys, graph_file, tmp_path):
    png = tmp_path / "step.png"
    report = json.loads(run_ok(capsys, str(graph_file), "-c", "k80x2", "--timeline", str(png), "--json"))
    assert report["timeline"] == str(png)
    assert png.stat().st_size > 0


def test_placement_file_as_placer(capsys, graph_file, tmp_path):
    g = load_graph(graph_file)
    c = load_cluster("k80x2")
    placement = Placement.from_groups(g, c, [1, 0, 0, 1, 1])
    path = save_placement(tmp_path / "mine.json", g, placement, placer="by_hand")
    report = json.loads(run_ok(capsys, str(graph_file), "-c", "k80x2", "-p", str(path), "--json"))
    assert (report["placer"], report["placement_file"]) == ("by_hand", str(path))  # it was the file's name
    assert report["step_time_s"] == Simulator().time(g, c, placement).step_time
    busy = Simulator().time(g, c, placement).busy_time.tolist()
    assert [d["busy_s"] for d in report["devices"]] == busy


def test_module_factory_and_its_placement_file(capsys, tmp_path):
    # gnplace place takes MODULE:FACTORY and writes a placement file; simulate takes the same pair
    path = tmp_path / "p.json"
    assert main(["place", "gnplace.execute.examples:tiny", "-c", "k80x2", "-p", "round_robin", "-o", str(path),
                 "--json"]) == 0
    placed = json.loads(capsys.readouterr().out)
    report = json.loads(run_ok(capsys, "gnplace.execute.examples:tiny", "-c", "k80x2", "-p", str(path), "--json"))
    assert (report["placer"], report["placement_file"]) == ("round_robin", str(path))
    assert report["step_time_s"] == placed["step_time_s"]


def test_a_placement_file_that_records_no_placer_is_named_as_a_file(capsys, graph_file, tmp_path):
    g, c = load_graph(graph_file), load_cluster("k80x2")
    path = save_placement(tmp_path / "mine.json", g, Placement.from_groups(g, c, [1, 0, 0, 1, 1]))
    report = json.loads(run_ok(capsys, str(graph_file), "-c", "k80x2", "-p", str(path), "--json"))
    assert (report["placer"], report["placement_file"]) == (None, str(path))
    assert f"on k80x2, placement {path}, mode default" in run_ok(capsys, str(graph_file), "-c", "k80x2", "-p",
                                                                 str(path)).replace("\n", " ")
    report = json.loads(run_ok(capsys, str(graph_file), "-c", "k80x2", "-p", "single", "--json"))
    assert (report["placer"], report["placement_file"]) == ("single", None)


def test_oom_shown_in_table(capsys, tmp_path):
    g = OpGraph(["w"], param_bytes=[2 * 2**30], name="fat")
    path = save_graph(g, tmp_path / "fat.gnpg")
    out = run_ok(capsys, str(path), "-c", "tight4")
    assert "OUT OF MEMORY" in out
    report = json.loads(run_ok(capsys, str(path), "-c", "tight4", "--json"))
    assert report["oom"] is True and report["devices"][0]["oom"] is True


# ------------------------------------------------------------------------------- errors
def test_missing_graph_file(capsys, tmp_path):
    path = tmp_path / "absent.gnpg"
    assert run_error(capsys, str(path)) == f"gnplace: error: {path}: no such graph file"


@pytest.mark.parametrize("content", [b"\x1f\x8b\x08\x00garbage", b"{not json", b"\xff\xfe\x00\x00"], ids=["gzip", "json", "binary"])
def test_corrupt_graph_file(capsys, tmp_path, content):
    path = tmp_path / "bad.gnpg"
    path.write_bytes(content)
    line = run_error(capsys, str(path))
    assert line.startswith(f"gnplace: error: {path}: not a readable gnplace graph file (")


def test_corrupt_deflate_stream(capsys, tmp_path, graph_file):
    raw = bytearray(graph_file.read_bytes())
    for i in range(20, 60):
        raw[i] ^= 0xFF
    path = tmp_path / "flipped.gnpg"
    path.write_bytes(bytes(raw))
    assert "not a readable gnplace graph file" in run_error(capsys, str(path))


def test_truncated_graph_file(capsys, tmp_path, graph_file):
    path = tmp_path / "half.gnpg"
    path.write_bytes(graph_file.read_bytes()[:100])
    assert "truncated compressed data" in run_error(capsys, str(path))


def test_non_gnplace_json(capsys, tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"hello": "world"}')
    assert run_error(capsys, str(path)) == (
        f"gnplace: error: {path}: not a gnplace graph file (no 'format': 'gnplace-opgraph' field)"
    )


def test_cyclic_graph_written_by_hand(capsys, tmp_path):
    data = {
        "format": "gnplace-opgraph", "version": 1, "name": "loop", "meta": {},
        "nodes": {
            "name": ["a", "b", "c"], "op_type": ["op"] * 3, "phase": ["forward"] * 3, "flops": [1.0] * 3,
            "out_bytes": [4, 4, 4], "param_bytes": [0, 0, 0], "group": [0, 1, 2], "module": [""] * 3,
        },
        "edges": {"src": [0, 1, 2], "dst": [1, 2, 0], "bytes": [4, 4, 4]},
        "cost_s": {},
    }
    path = tmp_path / "loop.json"
    path.write_text(json.dumps(data, indent=2))
    assert run_error(capsys, str(path)) == f"gnplace: error: {path}: graph 'loop' has a cycle: a -> b -> c -> a"


def test_graph_file_with_wrong_version(capsys, tmp_path):
    data = graph_to_dict(chain_graph(2))
    data["version"] = 99
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    assert "graph file version 99 is not supported" in run_error(capsys, str(path))


@pytest.mark.parametrize(
    "text, problem",
    [
        ("devices: [{name: g, kind: tpu}]\nlinks: {default: pcie3}\n", "devices[0].kind: unknown device kind 'tpu'"),
        ("devices: [{name: g, kind: k80}\nlinks: {default: pcie3}\n", "not valid YAML at line 2, column 1"),
        ("devices: [{name: g, kind: k80, memory: 12 parsecs}]\nlinks: {default: pcie3}\n", "devices[0].memory: "),
        ("- just\n- a list\n", "expected a mapping, got list"),
        ("devices: [{name: g, count: 2, kind: k80}]\nlinks: {default: pcie3, pairs: [{between: [g0, g1, g0], link: pcie2}]}\n",
         "links.pairs[0].between: expected two device names"),
    ],
)
def test_malformed_cluster_yaml(capsys, graph_file, tmp_path, text, problem):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    line = run_error(capsys, str(graph_file), "--cluster", str(path))
    assert line.startswith(f"gnplace: error: {path}: {problem}"), line


def test_binary_cluster_file(capsys, graph_file, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"\xff\xfe\x00\x80")
    assert run_error(capsys, str(graph_file), "-c", str(path)).startswith(f"gnplace: error: {path}: not valid YAML")


def test_missing_cluster_file(capsys, graph_file, tmp_path):
    path = tmp_path / "absent.yaml"
    assert run_error(capsys, str(graph_file), "-c", str(path)) == (
        f"gnplace: error: {path}: no such cluster file"
    )


def test_unknown_cluster(capsys, graph_file):
    assert run_error(capsys, str(graph_file), "--cluster", "k80x16") == (
        "gnplace: error: unknown cluster 'k80x16': give a YAML file or one of cpu_gpu, k80x2, k80x4, tight4, v100x8"
    )


def test_unknown_placer(capsys, graph_file):
    from gnplace.placers import PLACERS

    assert run_error(capsys, str(graph_file), "--placer", "m_etf_xyz") == (
        f"gnplace: error: unknown placer 'm_etf_xyz' (choose one of: {', '.join(sorted(PLACERS))})"
    )


def test_missing_placement_file(capsys, graph_file, tmp_path):
    path = tmp_path / "absent.json"
    assert run_error(capsys, str(graph_file), "-p", str(path)) == f"gnplace: error: {path}: no such placement file"


def test_placement_file_for_the_wrong_graph(capsys, graph_file, tmp_path):
    c = load_cluster("k80x2")
    path = save_placement(tmp_path / "chain.json", chain_graph(3), Placement([0, 1, 0], c))
    line = run_error(capsys, str(graph_file), "-c", "k80x2", "-p", str(path))
    assert line == f"gnplace: error: {path}: op 'op0' is not in graph 'mlp2x2w8b4' (the file was made for graph 'chain3')"


def test_placement_file_for_the_wrong_cluster(capsys, tmp_path):
    g = chain_graph(3)
    graph_path = save_graph(g, tmp_path / "chain.gnpg")
    path = save_placement(tmp_path / "p.json", g, Placement([0, 3, 2], load_cluster("k80x4")))
    line = run_error(capsys, str(graph_path), "-c", "k80x2", "-p", str(path))
    assert line == (f"gnplace: error: {path}: op 'op1' is placed on unknown device 'gpu3' (cluster 'k80x2' has gpu0, "
                    "gpu1); the file was made for cluster 'k80x4', not 'k80x2': give that cluster (its file)")


def test_without_cluster_a_placement_file_of_a_cluster_files_other_devices_names_that_cluster(capsys, tmp_path):
    """Timed on k80x4 by default, a file made on a cluster file of ranks said only "unknown device 'rank0'"."""
    g = chain_graph(3)
    graph_path = save_graph(g, tmp_path / "chain.gnpg")
    ranks = cluster_from_dict({"name": "profiled", "devices": [{"name": "rank", "count": 2, "kind": "cpu"}],
                               "links": {"default": "ethernet20g"}})
    path = save_placement(tmp_path / "p.json", g, Placement([0, 1, 0], ranks))
    line = run_error(capsys, str(graph_path), "-p", str(path))
    assert line.endswith("(cluster 'k80x4' has gpu0, gpu1, gpu2, gpu3); the file was made for cluster 'profiled', "
                         "not 'k80x4': give that cluster (its file)")


def test_placement_file_that_is_not_json(capsys, graph_file, tmp_path):
    path = tmp_path / "p.json"
    path.write_text("gpu0 gpu1")
    assert run_error(capsys, str(graph_file), "-p", str(path)).startswith(
        f"gnplace: error: {path}: not a readable placement file ("
    )


def test_bad_option_is_an_argparse_error(capsys, graph_file):
    with pytest.raises(SystemExit) as info:
        main(["simulate", str(graph_file), "--mode", "fastest"])
    assert info.value.code == 2
    assert "invalid choice: 'fastest'" in capsys.readouterr().err


# ------------------------------------------------------------------------------- subprocess
def test_module_entry_point_smoke(tmp_path):
    assert EXAMPLE.is_file(), f"{EXAMPLE} is missing: run scripts/make_datasets.py"
    png = tmp_path / "step.png"
    proc = subprocess.run(
        [sys.executable, "-m", "gnplace.cli", "simulate", str(EXAMPLE), "--cluster", "k80x4", "--placer", "round_robin",
         "--json", "--timeline", str(png)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["graph"] == "mlp2x8w2048b512" and report["num_ops"] == 98
    assert report["step_time_s"] > 0 and len(report["devices"]) == 4
    assert png.read_bytes().startswith(b"\x89PNG")


def test_module_entry_point_error_exit_code(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gnplace.cli", "simulate", str(tmp_path / "absent.gnpg")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == f"gnplace: error: {tmp_path / 'absent.gnpg'}: no such graph file\n"


def test_a_cluster_with_an_overflowing_launch_overhead_is_one_line(capsys, graph_file, tmp_path):
    """A launch overhead of 1e308 s was loaded: the lower bound's sum overflowed, an IndexError traceback."""
    cluster = tmp_path / "slow.yaml"
    cluster.write_text("devices: [{name: gpu, count: 2, kind: k80, launch_overhead: 1e308}]\nlinks: {default: pcie3}\n")
    assert main(["simulate", str(graph_file), "-c", str(cluster)]) == 2
    err = capsys.readouterr().err
    assert err == (f"gnplace: error: {cluster}: devices[0].launch_overhead: 1e+308 seconds is over the limit of "
                   "4.61e+15\n")


def test_a_placement_file_that_splits_a_group_is_timed_with_one_warning_line(capsys, graph_file, tmp_path):
    """It was simulated with exit 0 and no word; stdout is the report as before."""
    g, c = load_graph(graph_file), load_cluster("k80x2")
    devices = Placement.from_groups(g, c, [1, 0, 0, 1, 1]).devices.copy()
    second = int(next(i for i in range(g.num_ops) if (g.group[:i] == g.group[i]).any()))  # the 2nd op of a group
    devices[second] = 1 - devices[second]
    split = Placement(devices, c)
    path = save_placement(tmp_path / "split.json", g, split)
    assert main(["simulate", str(graph_file), "-c", "k80x2", "-p", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["step_time_s"] == Simulator().time(g, c, split).step_time
    assert err.count("\n") == 1 and err.startswith(f"gnplace: warning: {path} splits 1 colocation group (ops that "
                                                   "must share a device) over devices, e.g. op ")


def test_a_placement_file_of_another_cluster_is_refused_or_warned_of(capsys, graph_file, tmp_path):
    """A k80x2 file on ``-c k80x4`` is refused; one of the same devices is warned of."""
    g = load_graph(graph_file)
    path = save_placement(tmp_path / "p.json", g, Placement.from_groups(g, load_cluster("k80x2"), [1, 0, 0, 1, 1]))
    assert run_error(capsys, str(graph_file), "-c", "k80x4", "-p", str(path)) == (
        f"gnplace: error: {path}: was made for cluster 'k80x2', whose devices differ from those of 'k80x4' "
        "(2 devices there, 4 here): time it on 'k80x2', or place the graph on 'k80x4'")
    four = save_placement(tmp_path / "four.json", g, Placement.from_groups(g, load_cluster("k80x4"), [1, 0, 3, 1, 2]))
    assert main(["simulate", str(graph_file), "-c", "tight4", "-p", str(four), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["cluster"] == "tight4"
    assert err == (f"gnplace: warning: {four} was made for cluster 'k80x4', not 'tight4'; its devices are the same by "
                   "name and kind, so it is used as it is\n")


def test_without_cluster_a_placement_file_is_timed_on_the_preset_it_was_made_for(capsys, graph_file, tmp_path):
    """It was refused on k80x4, the default, though the file names its preset; stdout and stderr say nothing more."""
    g, c = load_graph(graph_file), load_cluster("k80x2")
    placement = Placement.from_groups(g, c, [1, 0, 0, 1, 1])
    path = save_placement(tmp_path / "p.json", g, placement)
    assert main(["simulate", str(graph_file), "-p", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert (report["cluster"], err) == ("k80x2", "")
    assert report["step_time_s"] == Simulator().time(g, c, placement).step_time


def test_without_cluster_a_placement_file_of_no_preset_is_timed_on_k80x4_as_before(capsys, graph_file, tmp_path):
    g, k80x4 = load_graph(graph_file), load_cluster("k80x4")
    mine = Cluster(list(k80x4.devices), k80x4.bandwidth, k80x4.latency, name="mine")
    path = save_placement(tmp_path / "p.json", g, Placement.from_groups(g, mine, [1, 0, 3, 1, 2]))
    assert main(["simulate", str(graph_file), "-p", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["cluster"] == "k80x4"
    assert err == (f"gnplace: warning: {path} was made for cluster 'mine', not 'k80x4'; its devices are the same by "
                   "name and kind, so it is used as it is\n")


def test_without_cluster_a_placement_file_of_a_cluster_file_under_a_presets_name_is_refused(capsys, graph_file,
                                                                                              tmp_path):
    """It was timed on the preset of that name, silently."""
    g, k80x2 = load_graph(graph_file), load_cluster("k80x2")
    tiny = Cluster([dataclasses.replace(d, memory=3 * 2**20) for d in k80x2.devices], k80x2.bandwidth,
                   k80x2.latency, name="k80x2")
    path = save_placement(tmp_path / "p.json", g, Placement.from_groups(g, tiny, [1, 0, 0, 1, 1]))
    assert run_error(capsys, str(graph_file), "-p", str(path)) == (
        f"gnplace: error: {path}: was made on a cluster file named 'k80x2', not on the preset of that name (other "
        "speeds, memories or links): give that cluster file")
    assert main(["simulate", str(graph_file), "-c", "k80x2", "-p", str(path), "--json"]) == 0  # asked for: warned
    out, err = capsys.readouterr()
    assert json.loads(out)["cluster"] == "k80x2"
    assert "was made for another cluster named 'k80x2'" in err


def test_help_names_the_default_cluster(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    assert "the preset a placement.json was made for, else k80x4" in " ".join(capsys.readouterr().out.split())


def test_a_seed_for_a_placement_file_is_refused_not_ignored(capsys, graph_file, tmp_path):
    graph, cluster = load_graph(graph_file), load_cluster("k80x2")
    placement = save_placement(tmp_path / "p.json", graph, Placement([0] * graph.num_ops, cluster))
    run_ok(capsys, str(graph_file), "-c", "k80x2", "-p", str(placement))
    line = run_error(capsys, str(graph_file), "-c", "k80x2", "-p", str(placement), "--seed", "5")
    assert "--seed seeds a placer" in line
    run_ok(capsys, str(graph_file), "-c", "k80x2", "-p", "metis", "--seed", "5")  # a placer's: taken


def test_device_names_too_long_for_the_table_are_wrapped_not_cut(tmp_path, capsys, monkeypatch):
    """Piped (80 columns), ``/job:worker/replica:0/task:0/device:GPU:0`` and ``...GPU:1`` both read
    ``/job:worker/replica…``: which device was busy could not be told."""
    from pathlib import Path

    from gnplace.cli import main

    monkeypatch.delenv("COLUMNS", raising=False)
    cluster = tmp_path / "long.yaml"
    cluster.write_text("name: long\ndevices:\n"
                       "  - {name: /job:worker/replica:0/task:0/device:GPU:0, kind: p100}\n"
                       "  - {name: /job:worker/replica:0/task:0/device:GPU:1, kind: p100}\n"
                       "links: {default: pcie3}\n")
    graph = str(Path(__file__).resolve().parents[2] / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    assert main(["simulate", graph, "-c", str(cluster), "-p", "heft"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "…" not in "".join(lines)
    cells = "".join(line.split("│")[1].strip() for line in lines if line.startswith("│"))
    assert "/job:worker/replica:0/task:0/device:GPU:0/job:worker/replica:0/task:0/device:GPU:1" == cells


def test_the_bound_reads_the_op_times_the_step_was_timed_with_not_a_second_matrix(capsys, graph_file, monkeypatch):
    """The bound asked the cost model for its own copy: two [ops, devices] matrices at once (3 GB each on 4,096)."""
    from gnplace.sim.bounds import lower_bound
    from gnplace.sim.costmodel import CostModel

    made, op_times = [], CostModel.op_times

    def counted(self, graph, cluster):
        made.append(graph.name)
        return op_times(self, graph, cluster)

    monkeypatch.setattr(CostModel, "op_times", counted)
    report = json.loads(run_ok(capsys, str(graph_file), "-c", "v100x8", "-p", "single", "--json"))
    assert made == []  # the simulator's distinct columns, spread: no matrix of the cost model's
    graph, cluster = load_graph(graph_file), load_cluster("v100x8")
    assert report["bound_s"] == lower_bound(graph, cluster).value  # the same bits


@pytest.mark.parametrize("placer", ["", " "])
def test_an_empty_placer_is_refused_as_empty_not_read_as_the_current_folder(capsys, graph_file, placer):
    """``-p ""`` (an unset variable) was read as a placement file's path, the current folder: '.: is a folder'."""
    assert main(["simulate", str(graph_file), "-p", placer]) == 2
    err = capsys.readouterr().err
    assert err == f"gnplace: error: --placer {placer!r} is empty; name a placer or a placement file\n"


def test_a_count_of_one_is_printed_in_the_singular(capsys, tmp_path):
    """A graph of one op and one group was "chain1 (1 ops, 1 groups)"."""
    path = save_graph(chain_graph(1), tmp_path / "one.gnpg")
    assert "chain1 (1 op, 1 group) on k80x4" in run_ok(capsys, str(path))
