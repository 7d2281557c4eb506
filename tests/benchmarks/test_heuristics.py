"""``scripts/benchmarks/heuristics.py``: the fast placers against the exact one, and their speed."""

from __future__ import annotations

import argparse


def test_exact_reports_each_heuristic_over_the_proven_optimum(load_script):
    heuristics = load_script("benchmarks.heuristics")
    args = argparse.Namespace(clusters=["k80x2"], groups=5, per_family=0, time_limit=2.0, placers=["single", "heft"])
    rows = heuristics.bench_exact(args)  # the two shipped examples (9 and 17 groups); no dataset graph
    assert [r["graph"] for r in rows] == ["mlp1x8w6144b256", "mlp2x8w2048b512"]
    assert any(r["status"] == "optimal" for r in rows)
    for row in [r for r in rows if r["status"] == "optimal"]:
        assert row["gap"] == 0.0 and row["single"] >= 1.0 - 1e-9 and row["heft"] >= 1.0 - 1e-9  # none beats the optimum


def test_placers_times_each_placer(load_script, capsys):
    heuristics = load_script("benchmarks.heuristics")
    rows = heuristics.bench_placers(argparse.Namespace(ops=100, cluster="k80x2", repeat=1, placers=["single", "m_etf"]))
    assert [r["placer"] for r in rows] == ["single", "m_etf"] and all(r["seconds"] > 0 for r in rows)
    assert "m_etf: " in capsys.readouterr().out
