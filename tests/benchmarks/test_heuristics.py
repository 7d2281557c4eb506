"""``scripts/benchmarks/heuristics.py``: the fast placers against the exact one, and their speed."""

from __future__ import annotations

import argparse


def test_exact_reports_each_heuristic_over_the_proven_optimum(load_script, tmp_path, monkeypatch):
    from gnplace.graph_io import save_graph
    from gnplace.toy import mlp_training_graph

    heuristics = load_script("benchmarks.heuristics")
    save_graph(mlp_training_graph(layers=3, width=256, batch=32), tmp_path / "examples" / "mlp3.gnpg")
    monkeypatch.setattr(heuristics, "DATASETS", tmp_path)  # one small example graph, and no dataset graph
    args = argparse.Namespace(clusters=["k80x2"], groups=5, families=[], per_family=0, time_limit=5.0,
                              placers=["single", "heft"])
    (row,) = heuristics.bench_exact(args)
    assert row["status"] == "optimal" and row["gap"] == 0.0  # four groups on two devices: proven optimal
    assert row["single"] >= 1.0 - 1e-9 and row["heft"] >= 1.0 - 1e-9  # no heuristic beats the optimum


def test_placers_times_each_placer(load_script, capsys):
    heuristics = load_script("benchmarks.heuristics")
    rows = heuristics.bench_placers(argparse.Namespace(ops=100, cluster="k80x2", repeat=1, placers=["single", "m_etf"]))
    assert [r["placer"] for r in rows] == ["single", "m_etf"] and all(r["seconds"] > 0 for r in rows)
    assert "m_etf: " in capsys.readouterr().out


def test_the_exact_summary_is_over_the_proved_placements_alone(load_script, monkeypatch, capsys):
    """An unproved exact placement (``feasible`` at a short time limit) put metis at 0.974 of "exact" on average."""
    heuristics = load_script("benchmarks.heuristics")
    rows = [{"status": "optimal", "metis": 1.2}, {"status": "feasible", "metis": 0.5}]
    monkeypatch.setattr(heuristics, "bench_exact", lambda args: rows)
    args = argparse.Namespace(placers=["metis"], time_limit=2.0)
    assert heuristics.run_exact(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["1 of 2 exact placements proved optimal within --time-limit 2: the summary is over those 1",
                   "metis: geometric mean step / exact 1.200, worst 1.200"]
    rows[0]["status"] = "feasible"
    heuristics.run_exact(args)
    assert capsys.readouterr().out.splitlines() == [
        "0 of 2 exact placements proved optimal within --time-limit 2: the summary is over those 0, none: no summary"]


def test_the_exact_summary_leaves_a_heuristics_placement_out_of_memory_out_and_counts_it(load_script, monkeypatch,
                                                                                         capsys):
    """round_robin's step over memory (0.5x exact: no step a device runs) was averaged in with the others."""
    heuristics = load_script("benchmarks.heuristics")
    rows = [{"status": "optimal", "round_robin": 1.2, "round_robin_oom": False},
            {"status": "optimal", "round_robin": 0.5, "round_robin_oom": True}]
    monkeypatch.setattr(heuristics, "bench_exact", lambda args: rows)
    assert heuristics.run_exact(argparse.Namespace(placers=["round_robin"], time_limit=2.0)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "round_robin: geometric mean step / exact 1.200, worst 1.200 (1 out of memory, left out)"]
    rows.pop(0)
    heuristics.run_exact(argparse.Namespace(placers=["round_robin"], time_limit=2.0))
    assert capsys.readouterr().out.splitlines() == ["round_robin: each of its 1 placements out of memory, no mean"]
