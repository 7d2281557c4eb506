"""``scripts/reporting/searches.py``: section 6's rows and figures, the search placers' learning curves."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("edit", [
    {"corners": []}, {"corners": [[1, 1.0], [1, 0.9]]}, {"corners": [[1, 1.0], [2, 1.1]]}, {"corners": [[1, None]]},
    {"corners": [[1, float("nan")]]}, {"corners": [[True, 1.0]]}, {"corners": [[1, 1.0, 3]]}, {"last_evaluation": 0},
    {"auto_s": None}, {"placer": None}, {"budget": 8.5},
], ids=lambda edit: json.dumps(edit))
def test_a_section_six_row_the_report_cannot_draw_is_made_again(tmp_path, load_script, edit):
    """Section 6 (the search placers' learning curves, the README's curve_*.png) keeps its rows as the others do:
    a saved row stands, one whose curve cannot be drawn (edited by hand) runs again, and the figure and its JSON
    are drawn from the rows: corners held to the last evaluation."""
    import dataclasses

    searches = load_script("reporting.searches")
    common = load_script("benchmarks.common")
    keys = load_script("reporting.keys")
    config = dataclasses.replace(load_script("reporting.config").QUICK, curve_placers=("annealing",), curve_budget=8)
    (task,) = searches.curve_tasks(config)
    ran: list[str] = []

    def fake_row(task):
        ran.append(task["placer"])
        return {**task, "name": "ptb_002", "auto_s": 0.01, "corners": [[1, 1.0], [3, 0.9]], "last_evaluation": 8,
                "seconds": 0.5}

    store = common.Store(tmp_path / "curves.jsonl")
    first = store.run([task], fake_row, 1, "section 6", keys.IDENTITY, None, searches.CURVE_FIELDS,
                      searches.curve_row_readable)
    assert ran == ["annealing"]
    store.run([task], fake_row, 1, "section 6", keys.IDENTITY, None, searches.CURVE_FIELDS, searches.curve_row_readable)
    assert ran == ["annealing"]  # saved: it stands
    store.add({**first[0], **edit})
    again = common.Store(tmp_path / "curves.jsonl").run([task], fake_row, 1, "section 6", keys.IDENTITY, None,
                                                        searches.CURVE_FIELDS, searches.curve_row_readable)
    assert ran == ["annealing", "annealing"] and again[0]["corners"] == [[1, 1.0], [3, 0.9]]
    (tmp_path / "figs").mkdir()
    (png,) = searches.draw_curves(again, tmp_path / "figs")
    assert png.name == "curve_ptb_002_k80x4.png" and png.read_bytes().startswith(b"\x89PNG")
    drawn = json.loads((tmp_path / "figs" / "curve_ptb_002_k80x4.json").read_text())
    assert drawn == {"auto_step_s": 0.01, "budget": 8, "best_over_auto": {"annealing": [[1, 1.0], [3, 0.9]]}}
