"""``scripts/make_datasets.py``: its flags are checked before any graph is written."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(("flags", "error"), [
    (["--count", "0"], "--count must be at least 1, got 0"),
    (["--test-count", "-1"], "--test-count must be at least 0, got -1"),
    (["--count", "2", "--test-count", "3"], "--test-count 3 is more than --count 2"),
    (["--families", "ptb,nosuch"], "unknown family 'nosuch' (choose one of: cifar10, nmt, ptb)"),
])
def test_bad_flags_are_refused_before_anything_is_written(tmp_path, capsys, load_script, flags, error):
    """The examples were written first, and every family listed before a bad one was built (minutes each)."""
    script = load_script("make_datasets")
    out = tmp_path / "out"
    assert script.main(["--out", str(out), "--families", "ptb", "--count", "1", *flags]) == 2
    assert capsys.readouterr().err == f"make_datasets: error: {error}\n"
    assert not out.exists()


def test_a_family_list_with_spaces_names_each_family_once(tmp_path, load_script, monkeypatch):
    """``--families 'ptb, ptb'`` built ptb, then failed on the unknown family ' ptb'."""
    script = load_script("make_datasets")
    built: list[str] = []
    monkeypatch.setattr(script, "write_examples", lambda out: None)
    monkeypatch.setattr(script, "write_readme", lambda out, families: None)
    monkeypatch.setattr(script, "generate_dataset", lambda family, *args, **kwargs: built.append(family))
    assert script.main(["--out", str(tmp_path), "--families", "ptb, ptb", "--count", "1"]) == 0
    assert built == ["ptb"]


def test_a_negative_seed_is_refused_by_its_flag_as_every_command_refuses_it(tmp_path, capsys, load_script):
    """It was "--seed must be at least 0, got -1" here, "argument --seed: expected a whole number >= 0" elsewhere."""
    with pytest.raises(SystemExit) as stop:
        load_script("make_datasets").main(["--out", str(tmp_path / "out"), "--seed", "-1"])
    assert stop.value.code == 2 and not (tmp_path / "out").exists()
    assert "argument --seed: expected a whole number >= 0, got -1" in capsys.readouterr().err


def test_the_real_models_progress_prints_flop_bytes_and_seconds_as_gnplace_does(tmp_path, capsys, load_script,
                                                                                monkeypatch):
    """Each real model's line printed GFLOP, MiB and seconds by hand ("forward 0.000 GFLOP", "built in 0.0 s"); it
    prints units.format_flops, format_bytes and format_seconds's, as the CLI does."""
    import gnplace.families.realmodels as realmodels
    from gnplace.toy import mlp_training_graph

    script = load_script("make_datasets")
    graph = mlp_training_graph(layers=1, width=64, batch=8)
    monkeypatch.setattr(realmodels, "write_real_dataset",
                        lambda out, progress: progress("tiny.gnpg", graph, 0.04))
    script.write_real(tmp_path)
    line = capsys.readouterr().out
    assert " GFLOP" not in line and " MiB" not in line, line
    assert "FLOP, step " in line and line.rstrip().endswith(" KiB, built in 40.000 ms"), line


def test_an_interrupted_real_build_does_not_promise_that_its_models_are_kept(tmp_path, capsys, load_script,
                                                                             monkeypatch):
    """Ctrl-C during ``--real`` said "a rerun keeps the graphs written", and the rerun built every model again."""
    script = load_script("make_datasets")

    def interrupted(out):
        raise KeyboardInterrupt

    monkeypatch.setattr(script, "write_examples", lambda out: None)
    monkeypatch.setattr(script, "write_real", interrupted)
    assert script.main(["--out", str(tmp_path), "--families", "", "--real"]) == 130
    assert capsys.readouterr().err == ("make_datasets: interrupted (a rerun keeps the families' graphs written; "
                                       "--real builds its models again)\n")
