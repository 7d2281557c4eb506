"""``scripts/benchmarks/zeroshot.py``. Benchmarks of zero-shot placement: one pair's row, the comparison with a search, the constructor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_constructor_compares_the_mdps_finish_time_with_the_simulator(load_script):
    """The list schedule's finish time of the greedy placement over the simulated step, coarse and op-level."""
    import argparse

    bench = load_script("benchmarks.zeroshot")
    args = argparse.Namespace(checkpoint=None, families=["ptb"], per_family=1, clusters=["k80x2"], op_level=True)
    rows = bench.bench_constructor(args)
    assert len(rows) == 1
    row = rows[0]
    assert row["op_nodes"] == row["ops"] > row["coarse_nodes"] > 0
    for level in ("coarse", "op"):
        # an estimate of the same step: within a factor of two, never a unit or scale slip
        assert 0.5 < row[f"{level}_mdp_over_sim"] < 2.0 and 0.5 < row[f"{level}_mdp_over_decision_sim"] < 2.0
    assert row["op_mdp_over_sim"] == row["op_mdp_over_decision_sim"]  # no coarsening: one graph


def test_zeroshot_row_places_policy_and_auto_under_its_seed(load_script):
    """``--seed`` reaches both placements, is recorded, and repeats; the policy is never slower than auto."""
    bench = load_script("benchmarks.zeroshot")
    path = str(ROOT / "datasets" / "ptb" / "ptb_029.gnpg")  # auto's metis partition differs under seeds 0 and 1
    rows = [bench._zero_shot_row((path, "tight4", None, 4, "test", {}, seed)) for seed in (0, 1, 1)]
    assert [r["seed"] for r in rows] == [0, 1, 1]
    assert rows[1] == {**rows[2], "place_s": rows[1]["place_s"], "plain_s": rows[1]["plain_s"]}  # same seed, same row
    assert rows[0]["auto_ms"] != rows[1]["auto_ms"]  # auto under each row's own seed (2.595 and 2.546 ms)
    assert all(0 < r["policy"] <= 1.0 for r in rows)  # auto's placement for that seed is among the policy's candidates


def test_zeroshot_finds_the_repositorys_graphs_from_another_folder(load_script, tmp_path, monkeypatch):
    """Started elsewhere, the run places the shipped test graphs and writes its rows under ``--out``."""
    import argparse

    bench = load_script("benchmarks.zeroshot")
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(
        checkpoint=None, samples=0, subsets=False, rounds=1, temperatures=None, around=None, op_level=None,
        constructor=["none"],
        constructor_samples=None, constructor_temperature=None, refine=0, constructor_sizes=None, prior=None,
        constructor_refine=None, constructor_prior=None, last_rounds=None, polish=None, polish_ops=None, module_chain=None,
        families=["ptb"], split="test", min_ops=10**9, clusters=["k80x2"], real_clusters=[], unseen_clusters=["k80x2"],
        unseen_per_family=1, seed=0, jobs=1, out="zs")
    (row,) = bench.bench_zeroshot(args)
    assert row["graph"] == "ptb_002" and row["group"] == "unseen"
    assert json.loads((tmp_path / "zs" / "zeroshot.json").read_text()) == [row]


def test_vs_search_divides_geometric_means_on_the_pairs_both_placed(load_script, tmp_path):
    """Only pairs in both runs count; auto's row of the search run is the reference of both."""
    import csv
    import math

    bench = load_script("benchmarks.zeroshot")
    zeroshot = tmp_path / "zeroshot.json"
    zeroshot.write_text(json.dumps([
        # a run under another seed: its own auto took 2.5 s on a, so 0.72 of it is 0.9 of the search's 2.0 s
        {"group": "test", "graph": "a", "family": "ptb", "cluster": "k80x4", "policy": 0.72, "auto_ms": 2500.0},
        {"group": "test", "graph": "b", "family": "ptb", "cluster": "k80x4", "policy": 1.0, "auto_ms": 4000.0},
        {"group": "test", "graph": "c", "family": "ptb", "cluster": "k80x4", "policy": 0.5, "auto_ms": 1.0},  # not searched
        {"group": "real", "graph": "a", "family": "real", "cluster": "k80x4", "policy": 0.1, "auto_ms": 1.0},  # not test
        {"group": "train", "graph": "b", "family": "ptb", "cluster": "k80x4", "policy": 0.1, "auto_ms": 1.0},  # nor this
    ]))
    search = tmp_path / "results.csv"
    with search.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["graph", "cluster", "placer", "step_time_s", "oom", "error"])
        writer.writeheader()
        for graph, placer, step in (("a", "auto", 2.0), ("a", "ppo", 1.6), ("b", "auto", 4.0), ("b", "ppo", 4.0),
                                    ("b", "annealing", 1.0)):
            writer.writerow({"graph": graph, "cluster": "k80x4", "placer": placer, "step_time_s": step,
                             "oom": "False", "error": ""})
    table = bench.zeroshot_against_search(zeroshot, search)
    assert [(r["family"], r["pairs"]) for r in table] == [("ptb", 2), ("all", 2)]
    assert math.isclose(table[-1]["policy"], math.sqrt(0.9)) and math.isclose(table[-1]["search"], math.sqrt(0.8))
    assert math.isclose(table[-1]["ratio"], math.sqrt(0.9 / 0.8))
    assert math.isclose(table[-1]["share"], (1 - math.sqrt(0.9)) / (1 - math.sqrt(0.8)))
    tables = bench.zeroshot_tables([{**row, "greedy": 1.0, "plain": 1.0, "portfolio": None, "policy_oom": False,
                                     "auto_oom": False, "plain_oom": False, "place_s": 0.1, "plain_s": 0.1}
                                    for row in json.loads(zeroshot.read_text())])
    assert "**train**" in tables and tables.index("**test**") < tables.index("**train**")  # apart, never mixed


def _vs_search_files(tmp_path, rows):
    """A zeroshot.json of one ptb test pair (policy 0.9x an auto of 2 s) and a search results.csv of ``rows``.

    ``rows`` are ``(placer, step seconds, budget, seed)`` of graph ``a`` on k80x4.
    """
    import csv

    zeroshot = tmp_path / "zeroshot.json"
    zeroshot.write_text(json.dumps([{"group": "test", "graph": "a", "family": "ptb", "cluster": "k80x4",
                                     "policy": 0.9, "auto_ms": 2000.0}]))
    search = tmp_path / "results.csv"
    with search.open("w", newline="") as handle:
        fields = ["graph", "cluster", "placer", "step_time_s", "oom", "error", "budget", "seed", "options"]
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for placer, step, budget, seed in rows:
            writer.writerow({"graph": "a", "cluster": "k80x4", "placer": placer, "step_time_s": step, "oom": "False",
                             "error": "", "budget": budget, "seed": seed, "options": "{}"})
    return zeroshot, search


def test_vs_search_refuses_a_search_run_with_several_rows_per_pair(load_script, tmp_path):
    """Two budgets of one placer on one pair: refused unless --budget picks one, which is then used."""
    import math

    bench = load_script("benchmarks.zeroshot")
    zeroshot, search = _vs_search_files(tmp_path, [("auto", 2.0, "", "0"), ("ppo", 1.6, "20000", "0"),
                                                   ("ppo", 1.8, "2000", "0")])
    with pytest.raises(SystemExit, match="2 ppo rows for one pair"):
        bench.zeroshot_against_search(zeroshot, search)
    table = bench.zeroshot_against_search(zeroshot, search, budget=2000)
    assert math.isclose(table[-1]["search"], 0.9) and math.isclose(table[-1]["ratio"], 1.0)
    assert math.isclose(table[-1]["share"], 1.0)


def test_vs_search_divides_by_auto_under_the_seed_of_the_search_row(load_script, tmp_path):
    """A search folder of two seeds: the seed-0 search row is over seed 0's auto, whichever auto row comes last."""
    import math

    bench = load_script("benchmarks.zeroshot")
    zeroshot, search = _vs_search_files(tmp_path, [("auto", 2.0, "", "0"), ("ppo", 1.6, "2000", "0"),
                                                   ("auto", 2.5, "", "1"), ("ppo", 2.25, "2000", "1")])
    for seed, searched, policy in ((0, 0.8, 0.9), (1, 0.9, 0.72)):
        table = bench.zeroshot_against_search(zeroshot, search, seed=seed)
        assert math.isclose(table[-1]["search"], searched) and math.isclose(table[-1]["policy"], policy)


def test_vs_search_refuses_files_swapped_or_of_another_kind_in_one_line(load_script, tmp_path, capsys):
    bench = load_script("bench")
    zeroshot, search, other = tmp_path / "zeroshot.json", tmp_path / "results.csv", tmp_path / "other.json"
    zeroshot.write_text(json.dumps([{"group": "test", "graph": "a", "family": "ptb", "cluster": "k80x4",
                                     "policy": 0.9, "auto_ms": 2.0}]))
    search.write_text("graph,cluster,placer,step_time_s,oom,error\na,k80x4,auto,0.002,False,\n")
    other.write_text(json.dumps({"rows": []}))
    for argv, message in (([search, zeroshot], "zeroshot.json: not a results.csv of `bench.py search`"),
                          ([search, search], "results.csv: not a zeroshot.json of `bench.py zeroshot`"),
                          ([other, search], "other.json: not a zeroshot.json")):
        assert bench.main(["vs-search", *map(str, argv)]) == 2
        out, err = capsys.readouterr()
        assert not out and err.startswith("bench: error: ") and err.count("\n") == 1 and message in err, err


def _seed_run(path, seed, rows):
    """A zeroshot.json under ``seed`` of ``rows``: ``(group, graph, family, policy, auto ms, auto oom, policy oom)``."""
    path.write_text(json.dumps([{"group": group, "graph": graph, "family": family, "cluster": "k80x2", "seed": seed,
                                 "policy": policy, "auto_ms": auto_ms, "auto_oom": auto_oom, "policy_oom": policy_oom}
                                for group, graph, family, policy, auto_ms, auto_oom, policy_oom in rows]))
    return path


def test_zeroshot_seeds_divides_by_each_runs_auto_and_by_the_fastest_auto_that_fits(load_script, tmp_path):
    """Seed 1's auto is slower on a: over its own auto the cell gains, over the fastest it does not."""
    import math

    bench = load_script("benchmarks.zeroshot")
    first = _seed_run(tmp_path / "s0.json", 0, [
        ("test", "a", "nmt", 0.9, 10.0, False, False),
        ("test", "b", "nmt", 0.8, 5.0, True, False),  # auto out of memory here: its 5 ms is no reference
        ("test", "c", "nmt", 0.5, 1.0, False, True),  # the policy out of memory in one run: left out
        ("real", "a", "real", 1.0, 2.0, False, False),
        ("test", "d", "ptb", 0.7, 1.0, False, False),  # in one run only: left out
    ])
    second = _seed_run(tmp_path / "s1.json", 1, [
        ("test", "a", "nmt", 0.75, 12.0, False, False),  # the same 9 ms step as seed 0's
        ("test", "b", "nmt", 1.0, 8.0, False, False),
        ("test", "c", "nmt", 0.5, 1.0, False, False),
        ("real", "a", "real", 0.55, 4.0, False, False),
    ])
    table = bench.zeroshot_across_seeds([first, second])
    assert [(r["family"], r["cluster"], r["pairs"]) for r in table] == [("nmt", "k80x2", 2), ("real", "k80x2", 1),
                                                                        ("all", "", 2)]
    nmt = table[0]
    assert nmt["seeds"] == ["0", "1"]
    assert math.isclose(nmt["own"][0], math.sqrt(0.9 * 0.8)) and math.isclose(nmt["own"][1], math.sqrt(0.75 * 1.0))
    # a's fastest auto is seed 0's 10 ms; b's is seed 1's 8 ms, the only one that fits
    assert math.isclose(nmt["fastest"][0], math.sqrt(0.9 * 0.5)) and math.isclose(nmt["fastest"][1], math.sqrt(0.9))
    assert math.isclose(nmt["spread"], 2.0)  # b: 4 ms under seed 0, 8 ms under seed 1
    assert math.isclose(table[1]["fastest"][1], 1.1) and math.isclose(table[1]["spread"], 1.1)
    assert table[-1]["own"] == nmt["own"]  # all is over the test pairs alone


def test_zeroshot_seeds_refuses_one_run_or_a_file_of_another_kind_in_one_line(load_script, tmp_path, capsys):
    bench = load_script("bench")
    run = _seed_run(tmp_path / "s0.json", 0, [("test", "a", "nmt", 0.9, 10.0, False, False)])
    other = tmp_path / "results.csv"
    other.write_text("graph,cluster,placer\n")
    for argv, message in (([run], "compares two or more runs, got 1"),
                          ([run, other], "results.csv: not a zeroshot.json of `bench.py zeroshot`"),
                          ([run, tmp_path / "missing.json"], "missing.json: No such file or directory")):
        assert bench.main(["zeroshot-seeds", *map(str, argv)]) == 2
        out, err = capsys.readouterr()
        assert not out and err.startswith("bench: error: ") and err.count("\n") == 1 and message in err, err
    assert bench.main(["zeroshot-seeds", str(run), str(run)]) == 0
    assert "| nmt | k80x2 | 1 | 0.900 / 0.900 | 0.900 / 0.900 | 1.000 |" in capsys.readouterr().out


def test_zeroshot_seeds_reads_run_folders_and_needs_no_test_pair(load_script, tmp_path):
    """A run's --out folder stands for its zeroshot.json; real-model pairs alone make a table without ``all``."""
    bench = load_script("benchmarks.zeroshot")
    folders = [tmp_path / "s0", tmp_path / "s1"]
    for seed, (folder, policy) in enumerate(zip(folders, (0.8, 0.9))):
        folder.mkdir()
        _seed_run(folder / "zeroshot.json", seed, [("real", "gpt2", "real", policy, 10.0, False, False)])
    table = bench.zeroshot_across_seeds(folders)
    assert [(r["family"], r["pairs"], r["seeds"]) for r in table] == [("real", 1, ["0", "1"])]
    assert table[0]["own"] == pytest.approx([0.8, 0.9]) and table[0]["fastest"] == pytest.approx([0.8, 0.9])


def test_latency_times_the_greedy_placement_of_a_generated_graph(load_script, tmp_path, monkeypatch):
    """The greedy decode alone by default (it timed ``policy``'s constructors, last rounds and polish too: 1.40 s on
    9,651 ops where the greedy decode takes 0.19 s), and the placer's whole default with ``--decoding policy``."""
    import argparse

    import gnplace.rl.zeroshot

    made, original = [], gnplace.rl.zeroshot.PolicyPlacer

    class Recorded(original):
        def __init__(self, **options):
            super().__init__(**options)
            made.append(self)

    monkeypatch.setattr(gnplace.rl.zeroshot, "PolicyPlacer", Recorded)
    bench = load_script("benchmarks.zeroshot")
    args = argparse.Namespace(ops=[300], cluster="k80x2", checkpoint=None, samples=0, subsets=False, repeat=1,
                              cache=str(tmp_path), decoding="greedy")
    (row,) = bench.bench_latency(args)
    assert row["ops"] > 300 and row["seconds"] > 0 and row["step_ms"] > 0 and row["decoding"] == "greedy"
    assert (tmp_path / "cifar10_L3.gnpg").exists()  # 300 ops: three cells, cached for the next run
    assert (made[0].constructors, made[0].refine, made[0].polish) == ((), 0, 0)
    (row,) = bench.bench_latency(argparse.Namespace(**{**vars(args), "decoding": "policy"}))
    assert row["decoding"] == "policy"
    default = original(samples=0)  # the placer as `-p policy` makes it
    assert made[1].constructors and (made[1].refine, made[1].polish) == (default.refine, default.polish) != (0, 0)


def _tiny_zeroshot_args(out, unseen_clusters, seed=0):
    """``bench.py zeroshot`` arguments placing ptb_002 alone (no sample, no constructor) on ``unseen_clusters``."""
    import argparse

    return argparse.Namespace(
        checkpoint=None, samples=0, subsets=False, rounds=1, temperatures=None, around=None, op_level=None,
        constructor=["none"],
        constructor_samples=None, constructor_temperature=None, refine=0, constructor_sizes=None, prior=None,
        constructor_refine=None, constructor_prior=None, last_rounds=None, polish=None, polish_ops=None, module_chain=None,
        families=["ptb"], split="test", min_ops=10**9, clusters=[], real_clusters=[], unseen_clusters=unseen_clusters,
        unseen_per_family=1, seed=seed, jobs=1, out=str(out))


def test_zeroshot_saves_each_row_as_made_and_a_rerun_places_only_the_pairs_not_saved(load_script, tmp_path,
                                                                                      monkeypatch, capsys):
    """Killed while placing its second pair, a run kept its first row (it kept none: zeroshot.json came at the end)."""
    bench = load_script("benchmarks.zeroshot")
    real_row = bench._zero_shot_row
    placed = []

    def killed_at_the_second_pair(task):
        if placed:
            raise KeyboardInterrupt  # a kill while the second pair is placed
        placed.append(task[1])
        return real_row(task)

    monkeypatch.setattr(bench, "_zero_shot_row", killed_at_the_second_pair)
    args = _tiny_zeroshot_args(tmp_path / "zs", ["k80x2", "k80x4"])
    with pytest.raises(KeyboardInterrupt):
        bench.bench_zeroshot(args)
    assert not (tmp_path / "zs" / "zeroshot.json").exists()  # the report of a run comes at its end
    capsys.readouterr()
    placed.clear()
    monkeypatch.setattr(bench, "_zero_shot_row", lambda task: placed.append(task[1]) or real_row(task))
    rows = bench.bench_zeroshot(args)
    assert placed == ["k80x4"] and [r["cluster"] for r in rows] == ["k80x2", "k80x4"]
    assert "1 of 2 rows saved" in capsys.readouterr().out
    assert json.loads((tmp_path / "zs" / "zeroshot.json").read_text()) == rows  # the same format: this run's rows
    # other arguments (here the seed) run their own rows in the same folder; its zeroshot.json holds those alone
    placed.clear()
    (row,) = bench.bench_zeroshot(_tiny_zeroshot_args(tmp_path / "zs", ["k80x2"], seed=1))
    assert placed == ["k80x2"] and row["seed"] == 1
    assert json.loads((tmp_path / "zs" / "zeroshot.json").read_text()) == [row]
    assert [r["cluster"] for r in bench.bench_zeroshot(args)] == ["k80x2", "k80x4"] and placed == ["k80x2"]


def test_a_zeroshot_json_nested_thousands_deep_is_one_line_not_a_traceback(load_script, tmp_path, capsys):
    """``bench.py zeroshot-seeds`` of another's run folders: a zeroshot.json of "[[[..." was json's RecursionError."""
    bench = load_script("bench")
    deep = tmp_path / "zeroshot.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    assert bench.main(["zeroshot-seeds", str(tmp_path), str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("bench: error: ") and err.count("\n") == 1 and "not a zeroshot.json" in err, err


def test_a_decoding_value_the_placer_refuses_is_named_by_its_flag(load_script, tmp_path, capsys):
    """``--last-rounds 0`` said "PolicyPlacer needs last_rounds from 1 ...", an argument the user never wrote."""
    bench = load_script("bench")
    assert bench.main(["zeroshot", "--families", "cifar10", "--clusters", "k80x2", "--out", str(tmp_path / "z"),
                       "--last-rounds", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: --last-rounds needs from 1 to ") and "PolicyPlacer" not in err


def test_zeroshot_tables_leave_placements_out_of_memory_out_of_the_means(load_script):
    """A greedy decode over memory is counted as OOM, not averaged: 0.5x auto on an overflowing device is no gain."""
    bench = load_script("benchmarks.zeroshot")
    base = {"group": "test", "family": "cifar10", "cluster": "tight4", "auto_ms": 1.0, "auto_oom": False,
            "policy_oom": False, "plain_oom": False, "place_s": 1.0, "plain_s": 1.0}
    rows = [{**base, "graph": "a", "greedy": 0.5, "greedy_oom": True, "plain": 0.9, "policy": 0.8, "portfolio": 0.8},
            {**base, "graph": "b", "greedy": 1.2, "greedy_oom": False, "plain": 2.0, "plain_oom": True, "policy": 0.9,
             "portfolio": 0.9}]
    line = next(row for row in bench.zeroshot_tables(rows).splitlines() if row.startswith("| cifar10 "))
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    # greedy: b's alone (a's 0.5 made the mean 0.775); greedy + K: a's alone (b's 2.0 made it 1.342)
    assert cells[3:8] == ["1.200", "0.900", "0.849", "0.849", "0 (1, 1)"]


def test_vs_search_leaves_out_a_zero_shot_placement_out_of_memory(load_script, tmp_path):
    """The search's rows out of memory were left out, the policy's kept: a pair is compared where both fit."""
    import math

    bench = load_script("benchmarks.zeroshot")
    zeroshot, search = _vs_search_files(tmp_path, [("auto", 2.0, "", "0"), ("ppo", 1.6, "", "0")])
    (row,) = json.loads(zeroshot.read_text())  # a: 0.9x auto, fits; b: 0.5x auto on a device it overflows
    zeroshot.write_text(json.dumps([{**row, "policy_oom": False}, {**row, "graph": "b", "policy": 0.5,
                                                                    "policy_oom": True}]))
    with search.open("a", newline="") as handle:
        handle.write("b,k80x4,auto,2.0,False,,,0,{}\nb,k80x4,ppo,1.6,False,,,0,{}\n")
    table = bench.zeroshot_against_search(zeroshot, search)
    assert table[-1]["pairs"] == 1 and math.isclose(table[-1]["policy"], 0.9)


def test_zeroshot_tables_leave_out_rows_whose_auto_overflows_and_count_them(load_script):
    """A ratio over a step of auto's that overflows memory is over no step a device runs: left out, counted."""
    bench = load_script("benchmarks.zeroshot")
    base = {"group": "test", "family": "cifar10", "cluster": "tight4", "auto_ms": 1.0, "greedy_oom": False,
            "policy_oom": False, "plain_oom": False, "place_s": 1.0, "plain_s": 1.0}
    rows = [{**base, "graph": "a", "auto_oom": False, "greedy": 1.0, "plain": 0.9, "policy": 0.8, "portfolio": 0.8},
            {**base, "graph": "b", "auto_oom": True, "greedy": 0.1, "plain": 0.1, "policy": 0.1, "portfolio": 0.1}]
    line = next(row for row in bench.zeroshot_tables(rows).splitlines() if row.startswith("| cifar10 "))
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[3:8] == ["1.000", "0.900", "0.800", "0.800", "0 (0, 0); auto 1"]


def test_a_saved_zeroshot_row_the_tables_cannot_read_runs_again(load_script, tmp_path, monkeypatch, capsys):
    """A saved row with a field renamed or of another type (a flipped byte) was reused, then a traceback in the tables."""
    bench = load_script("benchmarks.zeroshot")
    good = {"group": "test", "graph": "ptb_002", "family": "ptb", "ops": 888, "cluster": "k80x2", "seed": 0,
            "auto_ms": 5.4, "auto_choice": "heft", "auto_oom": False, "greedy": 1.07, "greedy_oom": False,
            "policy": 0.96, "policy_oom": False, "policy_choice": "greedy", "portfolio": 0.96, "place_s": 5.3,
            "plain": 0.98, "plain_oom": False, "plain_s": 1.4}
    assert set(bench.ROW_TYPES) == set(good) and bench.readable_row(good)
    placed = []
    monkeypatch.setattr(bench, "_zero_shot_row", lambda task: placed.append(task[1]) or dict(good))
    args = _tiny_zeroshot_args(tmp_path / "zs", ["k80x2"])
    assert bench.bench_zeroshot(args) == [good] and placed == ["k80x2"]
    path = tmp_path / "zs" / "zeroshot_rows.jsonl"
    (saved,) = [json.loads(line) for line in path.read_text().splitlines()]
    for edited in ({k: v for k, v in saved.items() if k != "auto_oom"}, {**saved, "policy": "x"},
                   {**saved, "auto_oom": 0}, {**saved, "ops": True}):
        path.write_text(json.dumps(edited) + "\n")
        placed.clear()
        rows = bench.bench_zeroshot(args)
        assert rows == [good] and placed == ["k80x2"], edited  # placed again, the new row read
        assert "Traceback" not in bench.zeroshot_tables(rows)
    placed.clear()
    assert bench.bench_zeroshot(args) == [good] and placed == []  # the row made again stands


def test_vs_search_prints_no_share_where_the_search_gains_nothing(load_script, tmp_path, capsys):
    """A search that ended at auto's step (a small budget) printed "nan%" as the policy's share of its gain."""
    zeroshot, search = _vs_search_files(tmp_path, [("auto", 2.0, "", "0"), ("ppo", 2.0, "20", "0")])
    assert load_script("bench").main(["vs-search", str(zeroshot), str(search)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ptb") or line.startswith("| all")]
    assert rows == ["| ptb | k80x4 | 1 | 0.900 | 1.000 | 0.900 | - |", "| all |  | 1 | 0.900 | 1.000 | 0.900 | - |"]
