"""``scripts/benchmarks/speed.py``: the simulator's, the importer's and coarsening's timings, on small sizes."""

from __future__ import annotations

import argparse


def test_sim_times_each_placement_in_both_modes_and_the_batched_call(load_script):
    speed = load_script("benchmarks.speed")
    rows = speed.bench_sim(argparse.Namespace(ops=200, devices=2, repeat=3, batch=8))
    assert [(r["mode"], r["placement"]) for r in rows[:4]] == [
        ("default", "one device"), ("default", "blocks"), ("default", "random"), ("default", "random x8")]
    assert len(rows) == 8 and all(r["ms_per_eval"] > 0 for r in rows)


def test_scale_coarsens_places_and_simulates_and_compares_with_the_full_graph(load_script, tmp_path):
    speed = load_script("benchmarks.speed")
    args = argparse.Namespace(ops=[300], groups=20, cluster="k80x2", cache=str(tmp_path), full_up_to=1000)
    (row,) = speed.bench_scale(args)
    assert row["groups"] <= 20 < row["units"] and row["step_ms"] > 0 and not row["oom"]
    assert row["total_s"] >= row["coarsen_s"] and "coarsening_cost_pct" in row  # small enough for m_etf on all ops
    assert list(tmp_path.glob("cifar10_L*.gnpg"))  # the generated graph is cached for the next run


def test_devices_times_what_each_device_count_makes_before_placing(load_script):
    speed = load_script("benchmarks.speed")
    rows = speed.bench_devices(argparse.Namespace(ops=300, devices=[2, 300], repeat=1))
    assert [(row["ops"], row["devices"]) for row in rows] == [(300, 2), (300, 300)]
    assert all(row[k] > 0 for row in rows for k in ("op_times_s", "simulator_s", "list_schedule_s", "coarsen_s"))


def test_devices_place_times_each_placer_and_digests_its_placement(load_script, tmp_path):
    speed = load_script("benchmarks.speed")
    args = argparse.Namespace(ops=300, devices=[2, 64], placers=["m_etf", "heft"], cache=str(tmp_path))
    rows = speed.bench_devices_place(args)
    assert [(row["placer"], row["devices"]) for row in rows] == [("m_etf", 2), ("m_etf", 64), ("heft", 2), ("heft", 64)]
    assert all(row["seconds"] > 0 and row["step_ms"] > 0 and 1 <= row["used"] <= row["devices"] for row in rows)
    assert all(len(row["placement"]) == 16 for row in rows)


def test_import_times_the_extraction_of_a_cifar10_network(load_script):
    speed = load_script("benchmarks.speed")
    (row,) = speed.bench_import(argparse.Namespace(layers=[1]))
    assert row["layers"] == 1 and row["ops"] > 50 and row["seconds"] > 0


def test_sim_json_is_alone_on_stdout(load_script, capsys):
    """``bench.py sim --json`` printed its JSON with print(), which --json sends to stderr: stdout was empty."""
    import json

    bench = load_script("bench")
    assert bench.main(["sim", "--ops", "50", "--devices", "2", "--repeat", "1", "--batch", "2", "--json"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)) == 8 and "[" not in err


def test_memory_reports_each_commands_peak_rss_from_its_own_process(load_script, tmp_path, capsys):
    speed = load_script("benchmarks.speed")
    args = argparse.Namespace(ops=[300], clusters=["k80x2"], placers=["single"], cache=str(tmp_path))
    rows = speed.bench_memory(args)
    assert [r["command"] for r in rows] == ["simulate", "place -p single"]
    assert all(r["status"] == 0 and r["cluster"] == "k80x2" and 30 < r["peak_rss_mib"] < 4096 for r in rows)
    assert speed.peak_rss(["place", str(tmp_path / "missing.gnpg")])[1] == 2  # bad input: its status, still measured


def test_a_command_killed_before_it_reports_its_peak_prints_a_json_line_with_null(load_script, capsys, monkeypatch,
                                                                                    tmp_path):
    """A command the kernel killed (SIGKILL: no peak line) had a peak of NaN, printed as ``NaN``, which is not JSON
    (jq and strict parsers refuse the line); the benchmarks' lines are written as the commands' JSON: null."""
    import json
    import subprocess

    from gnplace.toy import chain_graph

    speed = load_script("benchmarks.speed")
    monkeypatch.setattr(speed, "large_graph", lambda ops, cache: chain_graph(3))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, -9, "", ""))
    args = argparse.Namespace(ops=[3], clusters=["k80x2"], placers=["single"], cache=str(tmp_path))
    rows = speed.bench_memory(args)
    assert [r["status"] for r in rows] == [-9, -9]
    lines = capsys.readouterr().out.splitlines()

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    assert [json.loads(line, parse_constant=refuse)["peak_rss_mib"] for line in lines] == [None, None]


def test_memory_exits_1_naming_each_command_that_failed(load_script, capsys, monkeypatch, tmp_path):
    """A command that failed (here killed, as for memory) was a row like the others and the benchmark exited 0."""
    import subprocess

    from gnplace.toy import chain_graph

    bench = load_script("bench")
    speed = load_script("benchmarks.speed")
    monkeypatch.setattr(speed, "large_graph", lambda ops, cache: chain_graph(3))
    monkeypatch.setattr(subprocess, "run", lambda a, **k: subprocess.CompletedProcess(a, -9 if "auto" in a else 0, "", ""))
    assert bench.main(["memory", "--ops", "3", "--clusters", "k80x2", "--placers", "single", "auto",
                       "--cache", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "place -p auto on 3 ops and k80x2 failed with exit status -9" in err and "single" not in err
    monkeypatch.setattr(subprocess, "run", lambda a, **k: subprocess.CompletedProcess(a, 0, "", ""))
    assert bench.main(["memory", "--ops", "3", "--clusters", "k80x2", "--placers", "single", "--cache", str(tmp_path)]) == 0
