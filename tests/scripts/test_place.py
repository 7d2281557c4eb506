"""``scripts/place.py``: its flags are checked before the graph and the policy are loaded."""

from __future__ import annotations

import pytest


def test_a_negative_seed_is_refused_by_its_flag(load_script, capsys):
    """It was refused by the placer ("seed must be >= 0"), once the graph and the checkpoints were read."""
    with pytest.raises(SystemExit) as stop:
        load_script("place").main(["no-such-graph.gnpg", "--seed", "-1"])
    assert stop.value.code == 2
    assert "argument --seed: expected a whole number >= 0, got -1" in capsys.readouterr().err
