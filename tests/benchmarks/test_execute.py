"""``scripts/benchmarks/execute.py``. Benchmarks of real steps: the simulator's fidelity after calibration, and ``gnplace.apply``'s cost."""

from __future__ import annotations

import json

import pytest


@pytest.mark.heavy
def test_fidelity_with_fine_tuning_covers_every_graph(tmp_path, load_script, capsys):
    """Calibration, the simulator's error and fine-tuning on real steps, for two models in one run (the bench's
    main in this process: the local timer needs no process of its own)."""
    graphs = [f"gnplace.execute.examples:{name}" for name in ("tiny", "branchy")]
    assert load_script("bench").main(["fidelity", "--timer", "local", "--devices", "cpu,cpu", "--graphs", *graphs,
                                      "--placements", "3", "--repeats", "1", "--finetune-budget", "4",
                                      "--out", str(tmp_path)]) == 0
    stdout = capsys.readouterr().out
    summary = json.loads((tmp_path / "fidelity.json").read_text())
    assert set(summary["graphs"]) == {"tiny", "branchy"} and summary["placements"] == 6
    for entry in summary["graphs"].values():
        assert len(entry["placements"]) == 3 and entry["finetune"]["step_time_s"] > 0
        signed = sorted(r["simulated_s"] / r["measured_s"] - 1 for r in entry["placements"])
        assert entry["median_signed_error"] == pytest.approx(signed[1])  # > 0: the simulator too slow
        assert not any(r["name"].startswith("single") for r in entry["placements"])  # calibration's own
    assert "median signed error" in stdout


def test_fidelity_leaves_placements_out_of_memory_out_of_the_error(tmp_path, load_script, capsys, monkeypatch):
    """An out-of-memory placement is not timed (its "measured" step is the simulator's): no error of 0 in the median."""
    import gnplace.execute.profile as profile

    real = profile.simulator_error

    def first_out_of_memory(*args, **kwargs):
        rows = real(*args, **kwargs)
        rows[0].update(measured_s=rows[0]["simulated_s"], error=0.0, oom=True)  # what an OOM row holds
        return rows

    monkeypatch.setattr(profile, "simulator_error", first_out_of_memory)
    bench = load_script("bench")
    assert bench.main(["fidelity", "--timer", "local", "--devices", "cpu,cpu", "--graphs", "gnplace.execute.examples:tiny",
                       "--placements", "3", "--repeats", "1", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "fidelity.json").read_text())
    rows = summary["graphs"]["tiny"]["placements"]
    timed = sorted(r["error"] for r in rows if not r["oom"])
    assert len(rows) == 3 and len(timed) == 2 and summary["placements"] == 2
    assert summary["median_abs_error"] == pytest.approx((timed[0] + timed[1]) / 2)  # was the median with the 0


def test_apply_times_a_placed_step_beside_eager(load_script, capsys):
    """The placed module's step and eager PyTorch's, both real and both on this CPU."""
    import argparse

    bench = load_script("benchmarks.execute")
    rows = bench.bench_apply(argparse.Namespace(models=["gnplace.execute.examples:tiny"], rounds=2, repeat=2))
    assert len(rows) == 1 and rows[0]["ops"] > 0 and rows[0]["eager_s"] > 0 and rows[0]["placed_s"] > 0
    assert rows[0]["ratio"] == rows[0]["placed_s"] / rows[0]["eager_s"]
    assert "| tiny |" in capsys.readouterr().out


def test_apply_times_a_factory_that_gives_its_loss(load_script, capsys, tmp_path):
    """A factory returning (module, inputs, loss), its module giving logits: the eager step ran
    ``module(*inputs).backward()``, a RuntimeError traceback (grad of a non-scalar output)."""
    import argparse

    (tmp_path / "logits.py").write_text("import torch\n\ndef make():\n    torch.manual_seed(0)\n"
                                        "    return torch.nn.Linear(4, 3), (torch.randn(8, 4),), lambda y: y.square().mean()\n")
    bench = load_script("benchmarks.execute")
    rows = bench.bench_apply(argparse.Namespace(models=[f"{tmp_path / 'logits.py'}:make"], rounds=1, repeat=1))
    assert len(rows) == 1 and rows[0]["eager_s"] > 0 and rows[0]["placed_s"] > 0
    assert "| make |" in capsys.readouterr().out


def test_device_map_compares_the_placement_with_its_module_map_and_accelerates(load_script):
    import argparse

    bench = load_script("benchmarks.execute")
    args = argparse.Namespace(families=["ptb"], per_family=1, real_models=[], clusters=["k80x2"], placers=["auto"])
    (row,) = bench.bench_device_map(args)
    assert row["placer"] == "auto" and row["cluster"] == "k80x2"
    for column in ("placement", "device_map", "accelerate_auto", "accelerate_sequential"):
        assert row[column] > 0
    assert "| families | k80x2 | auto | 1 |" in bench.device_map_table([row])


def test_device_map_compares_a_real_model_with_from_pretrained_and_counts_columns_some_rows_lack(load_script):
    import argparse

    pytest.importorskip("transformers")
    bench = load_script("benchmarks.execute")
    args = argparse.Namespace(families=[], per_family=1, real_models=["resnet50"], clusters=["k80x2"], placers=["single"])
    (row,) = bench.bench_device_map(args)
    assert row["models"] == "real" and row["graph"] == "resnet50" and row["transformers_auto"] > 0
    family = {**row, "models": "real", "graph": "drawn"}
    del family["transformers_auto"]
    table = bench.device_map_table([row, family])
    assert f"| {row['transformers_auto'] / row['placement']:.3f} (1) |" in table


def test_fidelity_refuses_two_graphs_of_one_name_before_any_calibration(tmp_path, load_script, capsys):
    """``a:tiny b:tiny`` calibrated both into OUT/tiny and kept the second's entry alone in fidelity.json."""
    (tmp_path / "mine.py").write_text("from gnplace.execute.examples import tiny  # another module's tiny\n")
    bench = load_script("bench")
    code = bench.main(["fidelity", "--timer", "local", "--devices", "cpu,cpu", "--graphs", "gnplace.execute.examples:tiny",
                       f"{tmp_path / 'mine.py'}:tiny", "--placements", "1", "--repeats", "1", "--rounds", "1",
                       "--anchor-rounds", "1", "--probe-rounds", "1", "--finetune-budget", "0",
                       "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 2 and not out and err.count("\n") == 1, err
    assert err.startswith("bench: error: --graphs gnplace.execute.examples:tiny ") and "both are named 'tiny'" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("devices", ["cpu,cpu", ""])
def test_fidelity_refuses_devices_for_the_dist_timer_before_any_step(tmp_path, load_script, capsys, monkeypatch,
                                                                      devices):
    """``--devices`` with the default ``--timer dist`` was taken, recorded in fidelity.json and never used (the ranks
    are the CPUs); ``--devices ''`` (an unset variable) was read as no ``--devices`` at all."""
    import gnplace.execute.base

    def no_timer(*args, **kwargs):
        raise AssertionError("measured steps")

    monkeypatch.setattr(gnplace.execute.base, "real_timer", no_timer)
    bench = load_script("bench")
    argv = ["fidelity", "--graphs", "gnplace.execute.examples:tiny", "--devices", devices, "--out", str(tmp_path / "o")]
    if devices:
        assert bench.main(argv) == 2
        assert capsys.readouterr().err == ("bench: error: --devices is for the local timer (--timer local); the dist "
                                           "timer takes none (its ranks are this machine's CPUs)\n")
    else:
        with pytest.raises(SystemExit) as stop:
            bench.main([*argv, "--timer", "local"])
        assert stop.value.code == 2 and "argument --devices: expected torch devices" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
