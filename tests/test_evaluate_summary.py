"""The summary of an evaluation's rows: geometric-mean ratios per family, cluster and placer, and its table."""

from __future__ import annotations

import math

import pytest

from gnplace.evaluate import Row
from gnplace.evaluate_summary import summarise, write_markdown


def row(path: str, placer: str, step: float, *, oom: bool = False, single: float = 4.0, bound: float = 1.0) -> Row:
    return Row(graph=path, family="f", graph_path=path, ops=1, groups=1, cluster="c", placer=placer, seed=0,
               step_time_s=step, bound_s=bound, single_s=single, peak_memory_bytes=0.0, oom=oom, place_seconds=0.5)


def test_summary_ratios_are_geometric_means_against_the_best_feasible(tmp_path):
    rows = [
        row("g1", "a", 2.0), row("g1", "b", 1.0), row("g1", "c", 0.5, oom=True),
        row("g2", "a", 1.0), row("g2", "b", 4.0), row("g2", "c", 1.0),
    ]
    by = {s["placer"]: s for s in summarise(rows)}
    assert by["a"]["vs_best"] == pytest.approx(math.sqrt(2.0 * 1.0))
    assert by["b"]["vs_best"] == pytest.approx(math.sqrt(1.0 * 4.0))
    assert by["c"]["vs_best"] == pytest.approx(1.0) and by["c"]["oom"] == 1  # OOM rows excluded from ratios
    assert by["a"]["vs_single"] == pytest.approx(math.sqrt(0.5 * 0.25))
    assert by["b"]["best_count"] == 1 and by["a"]["best_count"] == 1
    md = write_markdown(summarise(rows), tmp_path / "r.md").read_text()
    assert md.count("\n") == 2 + 3 and "| f | c | a | 2 |" in md


def test_learned_rows_are_compared_with_but_not_part_of_the_best():
    rows = [row("g1", "a", 2.0), row("g1", "b", 1.0)]
    rows[1].learned = True
    by = {s["placer"]: s for s in summarise(rows)}
    assert by["a"]["vs_best"] == pytest.approx(1.0) and by["b"]["vs_best"] == pytest.approx(0.5)


def test_a_summary_that_fails_to_write_keeps_the_table_there_before(tmp_path):
    """results.md was written in place, so a write cut short (a full disk, Ctrl-C) left half a table."""
    resource = pytest.importorskip("resource")
    path = tmp_path / "results.md"
    before = write_markdown(summarise([row("g", "single", 1.0)]), path).read_text()
    many = summarise([Row(**{**row("g", "single", 1.0).__dict__, "family": f"family{k}"}) for k in range(100)])
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 100, hard))  # writes past it fail (EFBIG): a full disk
    try:
        with pytest.raises(OSError):
            write_markdown(many, path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert path.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["results.md"]


def test_rows_of_another_simulator_mode_are_not_compared():
    """A folder's rows of `--mode placeto` were compared with its default-mode rows: best of two simulators."""
    rows = [row("g", "single", 2.0), row("g", "heft", 1.5), Row(**{**row("g", "heft", 1.0).__dict__, "mode": "placeto"})]
    summary = {(s["cluster"], s["placer"]): s for s in summarise(rows)}
    assert sorted(summary) == [("c", "heft"), ("c", "single"), ("c [placeto]", "heft")]
    assert summary[("c", "single")]["vs_best"] == pytest.approx(2.0 / 1.5)  # not over placeto's 1.0
    assert summary[("c [placeto]", "heft")]["vs_best"] == 1.0


def test_a_cluster_named_like_another_modes_label_is_not_compared_with_it():
    """A cluster file named "c [placeto]" beside c in placeto's mode: one label, and their rows were compared."""
    placeto = Row(**{**row("g", "heft", 1.0).__dict__, "mode": "placeto", "cluster_spec": "c"})
    named = Row(**{**row("g", "single", 9.0).__dict__, "cluster": "c [placeto]", "cluster_spec": "/w/weird.yaml"})
    summary = {(s["cluster"], s["placer"]): s for s in summarise([placeto, named])}
    assert sorted(summary) == [("c (c) [placeto]", "heft"), ("c [placeto] (/w/weird.yaml)", "single")]
    assert all(s["vs_best"] == 1.0 for s in summary.values())  # each the best of its own cluster


def test_the_mean_placement_time_is_over_the_runs_that_placed():
    """A failed run (no placement time) counted as 0 s in the mean: 10 s and a failure gave 5 s."""
    failed = Row(**{**row("g2", "heft", math.nan).__dict__, "place_seconds": math.nan, "error": "boom"})
    (line,) = summarise([Row(**{**row("g1", "heft", 1.0).__dict__, "place_seconds": 10.0}), failed])
    assert line["place_s"] == 10.0 and line["errors"] == 1
    (none,) = summarise([failed])
    assert math.isnan(none["place_s"])


def _row(graph: str, placer: str, step: float, *, options: str = "{}", budget=None, seed: int = 0) -> Row:
    """A finished row of ``graph`` (family ``toy``) on k80x2: step time ``step`` s, single device 2 s."""
    return Row(graph, "toy", f"/g/{graph}.gnpg", 10, 5, "k80x2", placer, seed, step, 0.5, 2.0, 0.0, False, 0.1,
               budget=budget, options=options, cluster_spec="k80x2")


def test_a_placer_run_with_two_option_sets_is_summarised_once_per_set():
    """Rows of annealing with and without ``start=heft`` (two checkpoints of policy) were one line and one mean."""
    rows = [_row("a", "annealing", 1.0, budget=200), _row("a", "annealing", 1.5, options='{"start": "heft"}', budget=200),
            _row("a", "heft", 1.2, options='{"x": 1}'),  # one option set: its label as before
            _row("a", "policy", 2.0, options='{"checkpoint": "/ckpt/base.ckpt", "samples": 16}'),
            _row("a", "policy", 1.0, options='{"checkpoint": "/ckpt/tuned.ckpt", "samples": 16}'),
            _row("a", "metis", 1.0, options='{"checkpoint": "/x/p.ckpt"}'),
            _row("a", "metis", 1.1, options='{"checkpoint": "/y/p.ckpt"}')]  # one file name: shown whole
    summary = summarise(rows)
    assert [(s["label"], s["vs_best"]) for s in summary] == [
        ("annealing@200", 1.0), ("annealing[start=heft]@200", 1.5), ("heft", 1.2),
        ('metis[{"checkpoint": "/x/p.ckpt"}]', 1.0), ('metis[{"checkpoint": "/y/p.ckpt"}]', 1.1),
        ("policy[checkpoint=base.ckpt]", 2.0), ("policy[checkpoint=tuned.ckpt]", 1.0)]
    assert [s["options"] for s in summary][:3] == ["{}", '{"start": "heft"}', '{"x": 1}']


def test_graphs_counts_graph_files_and_runs_counts_rows():
    """Two seeds of one graph counted as two 'graphs'; the means stay over every run."""
    rows = [_row("a", "heft", 1.0, seed=0), _row("a", "heft", 4.0, seed=1), _row("b", "heft", 2.0)]
    (line,) = summarise(rows)
    assert (line["graphs"], line["runs"], line["vs_single"]) == (2, 3, pytest.approx(1.0))  # (1/2 * 2 * 1)^(1/3)


def test_the_markdown_table_shows_runs_where_they_outnumber_graphs(tmp_path):
    rows = [_row("a", "heft", 1.0, seed=0), _row("a", "heft", 4.0, seed=1), _row("b", "single", 2.0)]
    md = write_markdown(summarise(rows), tmp_path / "r.md").read_text().splitlines()[2:]
    assert [line.split(" | ")[2:4] for line in md] == [["heft", "1 (2 runs)"], ["single", "1"]]


def test_names_with_bars_or_line_breaks_stay_in_their_markdown_cell(tmp_path):
    row = _row("a", "heft", 1.0)
    row.family = "a|b\nc"
    md = write_markdown(summarise([row]), tmp_path / "r.md").read_text().splitlines()
    assert len(md) == 3 and md[2].startswith("| a\\|b c | k80x2 | heft |")


def test_a_line_with_some_infinite_ratios_is_the_mean_of_the_others():
    """Only a line whose every ratio is infinite is infinite; beside finite ones an infinite ratio is left out."""
    from gnplace.evaluate_summary import _mean_ratio

    assert _mean_ratio([math.inf, 2.0, 0.5]) == 1.0
    assert _mean_ratio([math.inf, math.inf]) == math.inf
    assert math.isnan(_mean_ratio([]))


def test_the_mean_placement_time_counts_runs_out_of_memory():
    """A placement over memory was made, in its time: it is left out of the ratios, not of ``place_s``."""
    over = Row(**{**row("g2", "heft", 1.0, oom=True).__dict__, "place_seconds": 3.0})
    (line,) = summarise([Row(**{**row("g1", "heft", 1.0).__dict__, "place_seconds": 1.0}), over])
    assert line["place_s"] == 2.0 and line["oom"] == 1


def test_best_on_counts_no_run_out_of_memory():
    """A run over memory faster than the best is not on the best (``best_count``), as it is not in the ratios."""
    rows = [row("g1", "a", 1.0), row("g1", "c", 0.5, oom=True), row("g2", "a", 2.0), row("g2", "c", 1.0)]
    by = {s["placer"]: s for s in summarise(rows)}
    assert by["c"]["best_count"] == 1 and by["a"]["best_count"] == 1


def test_a_budget_is_shown_only_for_placers_that_take_one():
    """heft run beside annealing with a budget records it, but spends none: its line is heft's, not heft@200."""
    rows = [_row("a", "annealing", 2.0, budget=200), _row("a", "heft", 1.0, budget=200),
            _row("a", "unregistered", 1.5, budget=5)]  # a placer not registered here: its budget as recorded
    assert [(s["label"], s["budget"]) for s in summarise(rows)] == [
        ("annealing@200", 200), ("heft", None), ("unregistered@5", 5)]


def test_option_labels_show_a_folder_by_its_name_and_a_list_without_spaces():
    """A checkpoint folder ``/runs/a/`` is labelled ``a`` (its name before the slash), a list as compact JSON."""
    rows = [_row("a", "policy", 1.0, options='{"checkpoint": "/runs/a/"}'),
            _row("a", "policy", 1.0, options='{"checkpoint": "/runs/b/"}'),
            _row("a", "heft", 1.0, options='{"order": [1, 2]}'), _row("a", "heft", 1.0, options='{"order": [2, 1]}')]
    assert [s["label"] for s in summarise(rows)] == [
        "heft[order=[1,2]]", "heft[order=[2,1]]", "policy[checkpoint=a]", "policy[checkpoint=b]"]


def test_a_ratio_against_a_best_of_no_work_is_no_ratio_counted_and_a_failed_run_none_at_all():
    """On g1 the best step is 0 s (a step of no work): a step of 1 s against it is an infinite ratio, left out of
    the mean beside g2's finite 4 / 2 and not counted in ``vs_best_graphs``; a run that failed on g1 timed nothing
    and has no ratio (nan), not the infinite one its step of nan against 0 s would give."""
    failed = Row(**{**row("g1", "failed", math.nan).__dict__, "oom": None, "error": "boom",
                    "place_seconds": math.nan})
    rows = [row("g1", "zero", 0.0), row("g1", "slow", 1.0), failed, row("g2", "zero", 2.0), row("g2", "slow", 4.0)]
    by = {s["placer"]: s for s in summarise(rows)}
    assert (by["slow"]["vs_best"], by["slow"]["vs_best_graphs"], by["slow"]["best_count"]) == (2.0, 1, 0)
    assert (by["zero"]["vs_best"], by["zero"]["vs_best_graphs"], by["zero"]["best_count"]) == (1.0, 2, 2)
    assert math.isnan(by["failed"]["vs_best"]) and by["failed"]["vs_best_graphs"] == 0
    assert by["failed"]["best_count"] == 0 and by["failed"]["errors"] == 1


def test_a_step_within_rounding_of_the_best_is_on_the_best():
    """1 s and 1 s plus a millionth of a microsecond tie: both placers are best on the graph."""
    by = {s["placer"]: s for s in summarise([row("g", "a", 1.0), row("g", "b", 1.0 + 1e-12)])}
    assert by["a"]["best_count"] == 1 and by["b"]["best_count"] == 1


def test_a_placers_lines_are_ordered_its_default_budget_first_then_ascending():
    rows = [_row("a", "annealing", 1.0, budget=200), _row("a", "annealing", 1.0),
            _row("a", "annealing", 1.0, budget=50)]
    assert [s["label"] for s in summarise(rows)] == ["annealing", "annealing@50", "annealing@200"]


def test_two_cluster_files_of_one_name_in_two_modes_are_each_shown_with_their_file():
    """Their labels differ by the mode already, but they are two clusters of one name: each shows its file."""
    a = Row(**{**row("g", "heft", 1.0).__dict__, "cluster_spec": "/a/c.yaml"})
    b = Row(**{**row("g", "heft", 2.0).__dict__, "cluster_spec": "/b/c.yaml", "mode": "placeto"})
    assert sorted(s["cluster"] for s in summarise([a, b])) == ["c (/a/c.yaml)", "c (/b/c.yaml) [placeto]"]


def test_two_graph_files_of_one_graph_name_are_two_graphs():
    rows = [Row(**{**row("/x/g.gnpg", "heft", 1.0).__dict__, "graph": "g"}),
            Row(**{**row("/y/g.gnpg", "heft", 1.0).__dict__, "graph": "g"})]
    (line,) = summarise(rows)
    assert (line["graphs"], line["runs"]) == (2, 2)


def test_a_graph_of_no_family_is_summarised_under_a_dash():
    (line,) = summarise([Row(**{**row("g", "heft", 1.0).__dict__, "family": ""})])
    assert line["family"] == "-"


def test_step_over_single_device_leaves_out_the_graphs_one_device_cannot_hold():
    """A graph the single device overflows on has no single-device step to compare with: its run is left out."""
    rows = [row("g1", "a", 2.0, single=4.0), row("g2", "a", 2.0, single=1.0)]
    rows[1].single_oom = True
    (line,) = summarise(rows)
    assert line["vs_single"] == pytest.approx(0.5)  # g1's 2 / 4 alone, not the mean with g2's 2 / 1


def test_a_name_with_a_byte_that_is_not_utf8_is_written_as_that_byte(tmp_path):
    """A graph imported from ``caf\\xe9.onnx`` is named ``caf\\udce9``: its table cell holds the file name's byte."""
    rows = [row("g1", "a", 1.0)]
    rows[0].family = "caf\udce9"
    data = write_markdown(summarise(rows), tmp_path / "r.md").read_bytes()
    assert b"| caf\xe9 | c | a | 1 |" in data
