"""``scripts/reporting/elapsed.py``: the minutes of every run that made the saved rows."""

from __future__ import annotations

import json

import pytest


def test_minutes_spent_add_up_and_survive_a_file_cut_short(tmp_path, load_script):
    """A resumed report adds its minutes; an ``elapsed.json`` emptied by a kill counts as none, never a traceback."""
    elapsed = load_script("reporting.elapsed")
    path = tmp_path / "elapsed.json"
    assert elapsed.add_minutes(path, 1.5) == 1.5 and elapsed.add_minutes(path, 2.0) == 3.5
    path.write_text('{"minu')  # a kill while the file was written
    assert elapsed.add_minutes(path, 1.0) == 1.0 and json.loads(path.read_text()) == {"minutes": 1.0}
    assert [p.name for p in tmp_path.iterdir()] == ["elapsed.json"]  # no temporary file left


@pytest.mark.parametrize("saved", ['{"minutes": NaN}', '{"minutes": Infinity}', '{"minutes": -5}'])
def test_minutes_that_are_no_count_count_as_none(tmp_path, load_script, saved):
    """An ``elapsed.json`` edited to ``"minutes": NaN`` made every later report say it took "nan minutes"."""
    elapsed = load_script("reporting.elapsed")
    path = tmp_path / "elapsed.json"
    path.write_text(saved)
    assert elapsed.add_minutes(path, 1.5) == 1.5 and json.loads(path.read_text()) == {"minutes": 1.5}
