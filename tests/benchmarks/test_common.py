"""``scripts/benchmarks/common.py``. What the benchmarks share: learning curves read at a budget and at a target, the test graphs."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_learning_curves_are_read_at_a_budget_and_at_a_target(load_script):
    common = load_script("benchmarks.common")
    curve = [[1, 1.2], [17, 1.0], [33, 0.9]]
    assert common.first_reaching(curve, 1.0) == 17 and common.first_reaching([[1, 1.2]], 1.0) is None
    assert common.best_at(curve, 20) == 1.0 and common.best_at(curve, 0) == float("inf")
    assert [Path(p).stem for p in common.test_graphs("ptb", 2)] == ["ptb_002", "ptb_004"]


def test_a_rows_file_of_another_program_is_one_error_not_a_traceback(load_script, tmp_path, capsys):
    """``zeroshot_rows.jsonl`` (or the report's ``learned.jsonl``) holding other JSON lines was a KeyError."""
    import json

    import pytest

    from gnplace.exceptions import InvalidArgument

    common = load_script("benchmarks.common")
    rows = tmp_path / "zeroshot_rows.jsonl"
    rows.write_text(json.dumps([1, 2]) + "\n")
    with pytest.raises(InvalidArgument, match="zeroshot_rows.jsonl: not the rows of an earlier run"):
        common.Store(rows)
    out = tmp_path / "zs"
    out.mkdir()
    (out / "zeroshot_rows.jsonl").write_text(json.dumps({"graph": "ptb_002"}) + "\n")  # rows with no key
    code = load_script("bench").main(["zeroshot", "--families", "ptb", "--clusters", "k80x2", "--real-clusters",
                                      "--unseen-clusters", "--out", str(out)])  # refused before the first placement
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("bench: error: ") and err.count("\n") == 1 and "move it away" in err, err


def test_a_rows_file_it_refuses_is_left_as_it_was(load_script, tmp_path):
    """A refused rows file without a last newline had one appended (as to a line cut by a kill) before the refusal."""
    import json

    from gnplace.exceptions import InvalidArgument

    common = load_script("benchmarks.common")
    rows = tmp_path / "zeroshot_rows.jsonl"
    for data in (bytes(range(128, 256)) * 4, json.dumps([1, 2]).encode()):  # not UTF-8; JSON but not a row
        rows.write_bytes(data)
        with pytest.raises(InvalidArgument, match="not the rows of an earlier run"):
            common.Store(rows)
        assert rows.read_bytes() == data
    cut = json.dumps({"key": "a", "x": 1}) + "\n" + '{"key": "b", "x'  # rows, the last cut by a kill
    rows.write_text(cut)
    store = common.Store(rows)
    store.add({"key": "c", "x": 3})
    assert set(common.Store(rows).rows) == {"a", "c"}  # the new row on a line of its own


def test_a_cached_large_graph_is_made_again_when_its_generator_changes(load_script, tmp_path, monkeypatch):
    """``cifar10_L1.gnpg`` was kept by name: a changed family generator was answered with the graph of before."""
    import numpy as np

    import gnplace.evaluate
    import gnplace.importers.torch
    from gnplace.families import cifar10
    from gnplace.importers.torch import from_module

    common = load_script("benchmarks.common")
    before = common.large_graph(119, tmp_path)  # one cell
    assert common.large_graph(119, tmp_path).fingerprint() == before.fingerprint()  # cached: the same graph
    real_sample, real_digest = cifar10.sample, gnplace.evaluate.file_digest

    def edited_sample(rng, **knobs):  # the generator as edited: other channels
        return real_sample(rng, **{**knobs, "channels": 8})

    def edited_digest(path):  # ... and its source with it
        return "edited" if str(path).endswith("cifar10.py") else real_digest(path)

    monkeypatch.setattr(cifar10, "sample", edited_sample)
    monkeypatch.setattr(gnplace.evaluate, "file_digest", edited_digest)
    model, inputs = edited_sample(np.random.default_rng(0), layers=1, channels=16, batch=32)
    expected = from_module(model, inputs, name="cifar10_L1").fingerprint()
    assert expected != before.fingerprint()
    assert common.large_graph(119, tmp_path).fingerprint() == expected  # made again, not the stale one
    monkeypatch.setattr(gnplace.importers.torch, "from_module", lambda *a, **k: pytest.fail("made again"))
    assert common.large_graph(119, tmp_path).fingerprint() == expected  # and cached from then on


def test_a_large_graph_cached_without_its_record_or_replaced_is_made_again(load_script, tmp_path):
    """A cache of before (no record beside the graph), or a graph file replaced under its record, is not trusted."""
    from gnplace.graph_io import save_graph
    from gnplace.toy import layered_graph

    common = load_script("benchmarks.common")
    path = tmp_path / "cifar10_L1.gnpg"
    save_graph(layered_graph(4, width=2, seed=0), path)  # a stale graph of that name, cached before records
    made = common.large_graph(119, tmp_path)
    assert made.num_ops > 8 and (tmp_path / "cifar10_L1.json").exists()
    save_graph(layered_graph(4, width=2, seed=0), path)  # replaced under its record
    assert common.large_graph(119, tmp_path).fingerprint() == made.fingerprint()


def test_store_reruns_a_row_whose_inputs_changed_and_checks_one_saved_before(load_script, tmp_path):
    """Rows record what determines them beside their key; a row of before is judged by ``legacy``, then upgraded."""
    import json

    common = load_script("benchmarks.common")
    store = common.Store(tmp_path / "rows.jsonl")
    ran = []

    def fn(task):
        ran.append(task["key"])
        return {**task, "v": len(ran)}

    task = {"key": "g|c", "graph_sha256": "aaa"}
    assert store.run([task], fn, 1, "t", ("graph_sha256",))[0]["v"] == 1
    assert store.run([task], fn, 1, "t", ("graph_sha256",))[0]["v"] == 1 and ran == ["g|c"]  # the same inputs
    assert store.run([{**task, "graph_sha256": "bbb"}], fn, 1, "t", ("graph_sha256",))[0]["v"] == 2  # another file
    (tmp_path / "old.jsonl").write_text(json.dumps({"key": "g|c", "v": 0, "auto_s": 1.0}) + "\n")  # before records
    old = common.Store(tmp_path / "old.jsonl")
    rows = old.run([task], fn, 1, "t", ("graph_sha256",), lambda row, t: row["auto_s"] == 1.0)
    assert rows[0]["v"] == 0 and rows[0]["graph_sha256"] == "aaa"  # it stands, and records them from now on
    assert common.Store(tmp_path / "old.jsonl").rows["g|c"]["graph_sha256"] == "aaa"
    (tmp_path / "old.jsonl").write_text(json.dumps({"key": "g|c", "v": 0, "auto_s": 2.0}) + "\n")
    assert common.Store(tmp_path / "old.jsonl").run([task], fn, 1, "t", ("graph_sha256",),
                                                    lambda row, t: row["auto_s"] == 1.0)[0]["v"] == 3  # does not: runs


def test_a_rows_file_that_is_not_utf8_is_one_error_and_a_line_cut_inside_a_character_runs_again(load_script,
                                                                                                  tmp_path):
    """Bytes that are not UTF-8 were a UnicodeDecodeError traceback from every benchmark that keeps rows."""
    import json

    import pytest

    from gnplace.exceptions import InvalidArgument

    common = load_script("benchmarks.common")
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_bytes(b"\xff\xfe not rows\n")
    with pytest.raises(InvalidArgument, match=r"foreign.jsonl: not the rows of an earlier run \(1 line\(s\) not UTF-8"):
        common.Store(foreign)
    cut = tmp_path / "cut.jsonl"
    whole = json.dumps({"key": "b", "x": "é"}, ensure_ascii=False).encode()
    assert whole[-3:-2] == b"\xa9"  # cut after é's first byte: the line does not decode
    cut.write_bytes(json.dumps({"key": "a"}).encode() + b"\n" + whole[:-3])
    store = common.Store(cut)
    assert list(store.rows) == ["a"]
    store.add({"key": "c"})
    for _ in range(2):  # the cut line, no longer last, is still skipped: a third load refused the file
        assert list(common.Store(cut).rows) == ["a", "c"]


@pytest.mark.parametrize("command", [["latency", "--ops", "50", "--repeat", "1", "--cache"],
                                     ["search", "--out"], ["zeroshot", "--out"]])
def test_an_empty_output_folder_is_refused_not_read_as_the_working_folder(load_script, tmp_path, capsys, monkeypatch,
                                                                         command):
    """``bench.py latency --cache ""`` (an unset variable) wrote its generated graph into the working folder."""
    monkeypatch.chdir(tmp_path)
    assert load_script("bench").main([*command, ""]) == 2
    flag = command[-1]
    assert capsys.readouterr().err == f"bench: error: {flag} is empty; name the folder to write into (. for the " \
                                      "current one)\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["zeroshot", "search", "curves", "finetune", "screen-model", "fidelity"])
def test_a_negative_seed_is_refused_by_its_flag_before_any_run(load_script, tmp_path, capsys, command):
    """``zeroshot --seed -1`` made its folder and started its workers, whose first row failed ("seed must be >= 0")."""
    with pytest.raises(SystemExit) as stop:
        load_script("bench").main([command, "--seed", "-1", "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    assert "argument --seed: expected a whole number >= 0, got -1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_placer_named_twice_is_refused(load_script):
    """``bench.py placers --placers single single`` timed single twice and printed two rows of it."""
    from gnplace.exceptions import InvalidArgument

    common = load_script("benchmarks.common")
    common.check_placers(["single", "heft"])
    with pytest.raises(InvalidArgument, match="--placers names single twice"):
        common.check_placers(["single", "heft", "single"])


def test_a_rows_line_nested_thousands_deep_is_no_row_not_a_traceback(load_script, tmp_path):
    """A rows file's line of "[[[..." (another's run folder) was json's RecursionError: it is skipped as a cut line is."""
    import json

    common = load_script("benchmarks.common")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"key": "a", "x": 1}) + "\n" + "[" * 200_000 + "\n")
    assert list(common.Store(rows).rows) == ["a"]


def test_a_figure_is_written_at_the_resolution_it_is_made_and_laid_out_at(load_script, tmp_path):
    """pyplot's figures were laid out at its 100 dpi and written at 110: a figure made at another resolution than
    FIGURE_DPI is refused, one made at it is written at it (6x3.6 inches: 660x396 pixels)."""
    from gnplace.viz import agg_pyplot

    common = load_script("benchmarks.common")
    plt = agg_pyplot()
    at_100, _ = plt.subplots(figsize=(6, 3.6), dpi=100)
    at_110, _ = plt.subplots(figsize=(6, 3.6), dpi=common.FIGURE_DPI)
    try:
        with pytest.raises(ValueError, match="a figure of 100 dpi: make it at FIGURE_DPI"):
            common.save_figure(at_100, tmp_path / "a.png")
        assert not (tmp_path / "a.png").exists()
        data = common.save_figure(at_110, tmp_path / "b.png").read_bytes()
        assert common.FIGURE_DPI == 110 and data[16:24] == (660).to_bytes(4, "big") + (396).to_bytes(4, "big")
    finally:
        plt.close(at_100)
        plt.close(at_110)


def test_a_curve_drawn_wholly_under_a_later_one_is_found_hidden(load_script):
    """Curves of the same steps (or a span of them) were drawn one over another: the legend named a curve not seen."""
    common = load_script("benchmarks.common")
    flat = [[1, 1.0], [16, 1.0]]
    assert common.hidden_curves({"a": flat, "b": [[1, 1.0], [4, 1.0], [16, 1.0]]}) == {"a": "b"}  # the same steps
    assert common.hidden_curves({"a": [[8, 1.0], [12, 1.0]], "b": flat}) == {"a": "b"}  # a span of them
    assert common.hidden_curves({"a": flat, "b": [[8, 1.0], [16, 1.0]]}) == {}  # the later is shorter: a seen
    assert common.hidden_curves({"a": flat, "b": [[1, 1.0], [12, 0.9], [16, 0.9]]}) == {}  # apart past 12
    assert common.hidden_curves({"a": [[1, 1.0], [8, 0.9]], "b": [[1, 1.0], [9, 0.9]]}) == {}  # drops apart
    # stars: under a star at their point, under the last of several; never under a line, nor a line under a star
    assert common.hidden_curves({"a": [[1, 1.0]], "b": [[1, 1.0]], "c": [[1, 1.0]], "d": [[2, 1.0]]}) == {
        "a": "c", "b": "c"}
    assert common.hidden_curves({"a": [[1, 1.0]], "b": flat}) == common.hidden_curves({"a": flat, "b": [[1, 1.0]]}) == {}
    assert common.hidden_curves({"a": [], "b": [], "c": flat}) == {}


def test_a_curve_drawn_under_later_ones_over_stretches_names_them(load_script):
    """A curve under a later one over a stretch of its evaluations alone (PPO and fine-tuning flat at auto's step
    until their first better placements) was said nowhere: it seemed to start where it came out from under."""
    common = load_script("benchmarks.common")
    finetune = [[1, 1.0], [60, 0.95], [1000, 0.95]]
    ppo = [[1, 1.0], [200, 0.9], [1000, 0.9]]
    assert common.covered_stretches({"finetune": finetune, "ppo": ppo}) == {"finetune": [(1.0, 60.0, "ppo")]}
    assert common.covered_stretches({"ppo": ppo, "finetune": finetune}) == {"ppo": [(1.0, 60.0, "finetune")]}
    # under the topmost of several; a stretch as long as one cover stays on top, each cover's stretches apart
    seeds = {"a": [[16, 1.2], [32, 1.1], [64, 1.0], [128, 1.0]], "b": [[16, 1.2], [48, 1.2], [128, 1.2]],
             "c": [[16, 1.2], [32, 1.1], [48, 1.1]], "d": [[64, 1.0], [100, 1.0]]}
    assert common.covered_stretches(seeds) == {"a": [(16.0, 48.0, "c"), (64.0, 100.0, "d")], "b": [(16.0, 32.0, "c")]}
    # no stretch: curves apart, touching at a point or a drop, a later curve starting after, stars
    assert common.covered_stretches({"a": [[1, 1.0], [8, 0.9]], "b": [[1, 1.1], [8, 0.9]]}) == {}
    assert common.covered_stretches({"a": [[1, 1.0], [8, 1.0]], "b": [[8, 1.0], [16, 1.0]]}) == {}
    assert common.covered_stretches({"a": [[1, 1.0], [8, 1.0]], "b": [[1, 1.0]], "c": [[4, 1.0]]}) == {}
    assert common.covered_stretches({"a": [[1, 1.0]], "b": [[1, 1.0], [8, 1.0]], "c": []}) == {}
