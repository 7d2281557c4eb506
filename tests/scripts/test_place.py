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

    # 11 groups: 2,048 placements on two devices, past the 1,436 the search times (a smaller graph has every one timed)
    graph = save_graph(mlp_training_graph(layers=10, width=16, batch=4), tmp_path / "g.gnpg")
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
    # these said "PolicyPlacer's module_chain needs a budget ..." and "PolicyPlacer's constructor names ..."
    ("--module-chain", "99999999999",
     "--module-chain needs a budget >= 1 (a whole number of timer evaluations, at most 1,000,000,000), got 99999999999"),
    ("--constructor", "", "--constructor names an empty path: [''] (give 'none' for no constructor)"),
])
def test_a_value_the_placer_refuses_is_named_by_its_flag(load_script, capsys, flag, value, said):
    """``--rounds 0`` said "PolicyPlacer needs rounds >= 1": a class and an argument the user never wrote (and
    ``--module-chain 99999999999`` "PolicyPlacer's module_chain needs a budget", ``--constructor ''`` "PolicyPlacer's
    constructor names an empty path")."""
    code = load_script("place").main(["datasets/examples/mlp2x8w2048b512.gnpg", "-c", "k80x2", flag, value])
    err = capsys.readouterr().err
    assert code == 2 and err == f"place: error: {said}\n"


def test_the_table_prints_each_step_time_in_the_unit_that_keeps_it_at_least_1(load_script):
    """It printed every step in milliseconds, as gnplace did before 7dee48b: a 115 us step as ``0.115 ms``, a 3 ns
    one as ``0.000 ms``; it now prints them as ``gnplace place`` does (``115.000 us``, ``3.000 ns``)."""
    import re

    row = {"policy": 115e-6, "greedy": 160e-6, "auto": 115e-6, "auto_choice": "single", "single": 2.5,
           "bound": 3e-9, "oom": False, "greedy_oom": False, "auto_oom": False, "single_oom": True}
    lines = load_script("place").comparison_lines(row)
    assert [re.search(r" (\S+ \S+) +\S+x auto", line).group(1) for line in lines[:4]] == [
        "115.000 us", "160.000 us", "115.000 us", "2.500 s"]
    assert lines[3].endswith("  OUT OF MEMORY") and " 3.000 ns " in lines[4]
    assert load_script("place").comparison_lines({**row, "greedy": None})[1] == f"  {'greedy':<18} {'-':>12}"
