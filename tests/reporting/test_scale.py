"""``scripts/reporting/scale.py``: section 5's rows, seconds to place graphs of growing size."""

from __future__ import annotations

import math


def test_section_five_says_what_it_reused_and_makes_a_row_without_seconds_again(tmp_path, load_script, monkeypatch,
                                                                                capsys):
    """A rerun said what sections 1, 2 and 4 reused, and nothing of section 5's rows; a saved section 5 row without
    seconds, or whose seconds are NaN, is made again."""
    from gnplace.toy import layered_graph

    scale = load_script("reporting.scale")
    common = load_script("benchmarks.common")
    keys = load_script("reporting.keys")
    graph = layered_graph(8, width=2, seed=0)
    monkeypatch.setattr(scale, "large_graph", lambda ops, cache: graph)
    config = load_script("reporting.config").Config(scale_ops=(500,), scale_placers=("m_etf", "single"),
                                                    scale_budget=4)
    store = common.Store(tmp_path / "scale.jsonl")
    store.add({"key": f"scale|500|{keys.revised('m_etf')}|4", "ops": graph.num_ops, "placer": "m_etf",
               "seconds": 0.25, "budget": None, "graph_fingerprint": graph.fingerprint()})
    rows = scale.scale_rows(config, tmp_path, store)
    assert [(r["placer"], r["seconds"] == 0.25) for r in rows] == [("m_etf", True), ("single", False)]
    assert "[report] section 5: 1 saved, 1 to run" in capsys.readouterr().out
    edited = {k: v for k, v in store.rows[f"scale|500|{keys.revised('m_etf')}|4"].items() if k != "seconds"}
    store.add(edited)  # a line edited by hand: its seconds were a KeyError in the report's table
    rows = scale.scale_rows(config, tmp_path, store)
    assert all("seconds" in r for r in rows) and "[report] section 5: 1 saved, 1 to run" in capsys.readouterr().out
    store.add({**edited, "seconds": math.nan})  # saved as JSON's NaN, read back as one: reused, a "-" in the table
    rows = scale.scale_rows(config, tmp_path, store)
    assert all(math.isfinite(r["seconds"]) for r in rows)
    assert "[report] section 5: 1 saved, 1 to run" in capsys.readouterr().out
    assert common.Store(tmp_path / "scale.jsonl").rows[edited["key"]]["seconds"] > 0  # the row made again, saved
