"""``scripts/bench.py``: its subcommands, bad input as one error line; the benchmarks themselves in ``tests/benchmarks/``."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Every benchmark ``bench.py`` offers (``report`` besides: ``tests/test_report.py``).
BENCHMARKS = {"sim", "import", "scale", "exact", "placers", "search", "curves", "ppo-speed", "zeroshot", "vs-search",
              "latency", "constructor", "finetune", "screen-model", "fidelity", "apply", "device-map", "report"}


def test_every_benchmark_is_a_subcommand_documented_by_its_handler(load_script, capsys):
    bench = load_script("bench")
    with pytest.raises(SystemExit):
        bench.main(["--help"])
    listed = capsys.readouterr().out
    assert all(f"python scripts/bench.py {name}" in listed for name in BENCHMARKS)  # the usage lines
    for name in BENCHMARKS - {"report"}:
        with pytest.raises(SystemExit):
            bench.main([name, "--help"])
        assert f"``{name}``: " in capsys.readouterr().out  # the handler's docstring is the --help text


@pytest.mark.parametrize("argv, message", [
    (["vs-search", "nosuch.json", "nosuch.csv"], "No such file or directory"),
    (["placers", "--cluster", "nosuch"], "unknown cluster 'nosuch'"),
    (["sim", "--ops", "-5"], "--ops must be at least 1, got -5"),
    (["sim", "--devices", "0"], "--devices must be at least 1, got 0"),
    (["ppo-speed", "--samples", "-1"], "--samples must be at least 0, got -1"),
    (["latency", "--checkpoint", "TRUNCATED", "--ops", "100"], "not a readable checkpoint"),
    (["apply", "--rounds", "0"], "--rounds must be at least 1, got 0"),
    (["apply", "--models", "gnplace.execute.examples:nosuch"], "nosuch"),
])
def test_bad_input_is_one_error_line_and_exit_2(load_script, tmp_path, capsys, argv, message):
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes((ROOT / "checkpoints" / "gnplace-base.ckpt").read_bytes()[:1000])
    bench = load_script("bench")
    code = bench.main([str(truncated) if a == "TRUNCATED" else a for a in argv])
    out, err = capsys.readouterr()
    assert code == 2 and not out and "Traceback" not in err
    assert err.startswith("bench: error: ") and err.count("\n") == 1 and message in err, err
