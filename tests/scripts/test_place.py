"""``scripts/place.py``: its flags are checked before the graph and the policy are loaded."""

from __future__ import annotations

import pytest


def test_a_negative_seed_is_refused_by_its_flag(load_script, capsys):
    """It was refused by the placer ("seed must be >= 0"), once the graph and the checkpoints were read."""
    with pytest.raises(SystemExit) as stop:
        load_script("place").main(["no-such-graph.gnpg", "--seed", "-1"])
    assert stop.value.code == 2
    assert "argument --seed: expected a whole number >= 0, got -1" in capsys.readouterr().err


def test_json_names_each_step_time_in_seconds_as_the_other_outputs_do(load_script, capsys, tmp_path,
                                                                      documented_keys):
    """``policy``, ``auto``, ``single``, ``bound`` and ``greedy`` are seconds here and ratios to auto in bench.py's
    zero-shot rows: each is also written as ``NAME_s`` (``single_s``, ``bound_s``: evaluate's and finetune's names)."""
    import json

    from gnplace.graph_io import save_graph
    from gnplace.toy import mlp_training_graph

    # 9 groups: 512 placements on two devices, past what the search times (a smaller graph has every one timed)
    graph = save_graph(mlp_training_graph(layers=8, width=16, batch=4), tmp_path / "g.gnpg")
    target = tmp_path / "p.json"
    assert load_script("place").main([str(graph), "-c", "k80x2", "--samples", "1", "--json", "-o", str(target)]) == 0
    row = json.loads(capsys.readouterr().out)
    documented_keys("scripts-place-json", row)
    for name in ("policy", "greedy", "auto", "single", "bound"):
        assert row[f"{name}_s"] == row[name] and row[name] > 0
    # its placement file's predicted holds what gnplace place's does (mode was missing)
    written = json.loads(target.read_text())
    documented_keys("placement-file", written)
    assert set(written["predicted"]) == {"step_time_s", "oom", "devices", "place_seconds", "mode"}
    assert written["predicted"]["mode"] == "default" and written["predicted"]["step_time_s"] == row["policy"]


def test_an_empty_graph_argument_is_refused_by_argparse_as_gnplace_place_refuses_it(load_script, capsys):
    """``place.py ""`` (an unset variable) read the current folder: ``place: error: .: is a folder, not a graph file``."""
    with pytest.raises(SystemExit) as exit_:
        load_script("place").main(["", "-c", "k80x2"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.endswith("place.py: error: argument graph: expected a file's path, got ''\n")


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--rounds", "0", "--rounds needs >= 1, a whole number, got 0"),
    ("--constructor-sizes", "0", "--constructor-sizes needs whole numbers >= 2 (devices), got [0]"),
])
def test_a_value_the_placer_refuses_is_named_by_its_flag(load_script, capsys, flag, value, said):
    """``--rounds 0`` said "PolicyPlacer needs rounds >= 1": a class and an argument the user never wrote."""
    code = load_script("place").main(["datasets/examples/mlp2x8w2048b512.gnpg", "-c", "k80x2", flag, value])
    err = capsys.readouterr().err
    assert code == 2 and err == f"place: error: {said}\n"
