"""``scripts/reporting/exact.py``: sections 4 and 4b's rows, against the proved optimum."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_section_four_row_saved_before_is_checked_by_autos_step(tmp_path, load_script):
    """Section 4's rows of before record auto's step over the exact one's and the exact ms: auto's is computed again."""
    from gnplace.cluster import load_cluster
    from gnplace.graph_io import load_graph
    from gnplace.placers.registry import make_placer
    from gnplace.sim.simulator import Simulator

    exact = load_script("reporting.exact")
    path = str(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    graph, cluster, sim = load_graph(path), load_cluster("k80x2"), Simulator()
    auto_s = sim.time(graph, cluster, make_placer("auto", timer=sim).place(graph, cluster, seed=0)).step_time
    row = {"graph": path, "groups": 0, "cluster": "k80x2", "groups_placed": graph.num_groups, "exact_ms": 200.0,
           "auto": auto_s / 0.2}
    assert exact.exact_row_stands(row, row)
    assert not exact.exact_row_stands({**row, "auto": row["auto"] * 1.01}, row)
    assert exact.sampled_row_stands({"exact_ms": 200.0}, {"exact_ms": 200.0})
    assert not exact.sampled_row_stands({"exact_ms": 200.0}, {"exact_ms": 210.0})


def test_a_section_four_b_row_over_another_exact_step_than_todays_is_made_again(tmp_path, load_script, monkeypatch):
    """Section 4 run again (its rows deleted, a line cut) times CP-SAT anew, stopped at its limit maybe elsewhere: 4b's
    saved row, its ratio over the exact step of before, stood beside the others' over today's (0.506 for 1.013)."""
    exact = load_script("reporting.exact")
    common = load_script("benchmarks.common")
    identity = {"graph_sha256": "g", "cluster_fingerprint": "c"}
    path = tmp_path / "exact_sampled.jsonl"
    path.write_text(json.dumps({"key": "a", "exact_ms": 400.0, "ratio": 0.5, **identity}) + "\n"
                    + json.dumps({"key": "b", "exact_ms": 300.0, "ratio": 0.9, **identity}) + "\n")
    ran = []
    monkeypatch.setattr(exact, "sampled_row", lambda t: ran.append(t["key"]) or {**t, "ratio": 1.0})
    tasks = [{"key": "a", "exact_ms": 200.0, **identity}, {"key": "b", "exact_ms": 300.0, **identity}]
    rows = exact.sampled_rows(tasks, common.Store(path))
    assert ran == ["a"] and [r["ratio"] for r in rows] == [1.0, 0.9]
    assert [r["ratio"] for r in exact.sampled_rows(tasks, common.Store(path))] == [1.0, 0.9] and ran == ["a"]
