"""The evaluation harness: tasks, resumable results, summary ratios."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gnplace.evaluate import Row, Task, collect_graphs, evaluate, run_task, task_key
from gnplace.evaluate_summary import summarise, write_markdown
from gnplace.exceptions import GnplaceError, InvalidArgument
from gnplace.graph_io import load_graph, save_graph
from gnplace.placers import PLACERS
from gnplace.toy import chain_graph, mlp_training_graph


@pytest.fixture()
def graphs(mlp_graph_folder):
    return mlp_graph_folder


def test_run_task_times_the_placement(graphs):
    row = run_task(Task(str(graphs / "mlp2.gnpg"), "k80x2", "round_robin"))
    assert row.cluster == "k80x2" and row.placer == "round_robin" and not row.oom and not row.error
    assert row.bound_s <= row.step_time_s and row.bound_s <= row.single_s
    single = run_task(Task(str(graphs / "mlp2.gnpg"), "k80x2", "single"))
    assert single.step_time_s == pytest.approx(single.single_s)


def test_evaluate_writes_rows_and_resumes(graphs, tmp_path):
    tasks = [Task(str(g), c, p) for g in collect_graphs([str(graphs)]) for c in ("k80x2", "tight4") for p in ("single", "round_robin")]
    out = tmp_path / "out"
    seen, counts = [], []
    rows = evaluate(tasks, out, progress=seen.append, reused=counts.append)
    assert len(rows) == len(seen) == 8
    again = []
    rows2 = evaluate(tasks, out, progress=again.append, reused=counts.append)
    assert again == [] and len(rows2) == 8  # nothing run twice
    assert counts == [0, 8]  # told before running: the saved rows that stand
    # a line cut short by an interruption is run again
    text = (out / "results.csv").read_text().splitlines()
    (out / "results.csv").write_text("\n".join(text[:-1] + [text[-1][:10]]) + "\n")
    redo = []
    evaluate(tasks, out, progress=redo.append)
    assert len(redo) == 1


def _set_in_the_first_saved_row(out, column, value):
    """``out/results.csv`` with ``column`` of its first row set to ``value``: a row edited or damaged."""
    import csv

    with (out / "results.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[0][column] = value
    with (out / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.parametrize("value", ["nan", "inf", "-5"])
def test_a_saved_step_time_no_run_writes_is_run_again(graphs, tmp_path, value):
    """A row edited or damaged to a nan, infinite or negative step time (and no error) is not reused."""
    tasks = [Task(str(g), "k80x2", "single") for g in collect_graphs([str(graphs)])][:2]
    out = tmp_path / "out"
    evaluate(tasks, out)
    _set_in_the_first_saved_row(out, "step_time_s", value)
    redo = []
    again = evaluate(tasks, out, progress=redo.append)
    assert len(redo) == 1 and all(r.step_time_s > 0 for r in again)


@pytest.fixture()
def added_placer():
    """``later_single``, registered at run time as a script's ``if __name__ == "__main__":`` would, then removed."""
    from gnplace.placers import register_placer

    register_placer("later_single", "gnplace.placers.single:SinglePlacer")
    yield "later_single"
    PLACERS.unregister("later_single")


def test_evaluate_in_worker_processes_matches_serial(graphs, tmp_path, added_placer):
    """A placer registered at run time is known to the workers too (they raised UnknownName out of evaluate)."""
    tasks = [Task(str(g), "k80x4", placer) for g in collect_graphs([str(graphs)])
             for placer in ("round_robin", added_placer)]
    serial = evaluate(tasks, tmp_path / "a")
    parallel = evaluate(tasks, tmp_path / "b", jobs=2)
    assert [r.step_time_s for r in serial] == [r.step_time_s for r in parallel]
    assert all(r.error == "" for r in parallel) and {r.placer for r in parallel} == {"round_robin", added_placer}


def test_a_placer_class_workers_cannot_import_is_refused_before_they_start(graphs, tmp_path):
    from gnplace.exceptions import InvalidArgument
    from gnplace.placers import register_placer
    from gnplace.placers.single import SinglePlacer

    class Local(SinglePlacer):
        """One device (a class defined in a function: no worker can import it)."""

    register_placer("local_single", Local)
    try:
        tasks = [Task(str(g), "k80x2", "local_single") for g in collect_graphs([str(graphs)])]
        with pytest.raises(InvalidArgument, match="placer 'local_single' is registered as a class that worker "
                                                  "processes cannot import"):
            evaluate(tasks, tmp_path / "out", jobs=2)
        assert len(evaluate(tasks, tmp_path / "serial")) == len(tasks)  # in this process it runs
    finally:
        PLACERS.unregister("local_single")


def test_an_interrupt_stops_the_worker_processes_and_keeps_the_rows_saved(graphs, tmp_path):
    """Ctrl-C used to leave evaluate waiting on its workers now and then; they are stopped, not awaited."""
    import multiprocessing

    tasks = [Task(str(g), c, "round_robin") for g in collect_graphs([str(graphs)]) for c in ("k80x2", "k80x4")]

    def interrupt(row):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        evaluate(tasks, tmp_path, jobs=2, progress=interrupt)
    assert multiprocessing.active_children() == []
    # the header, the row recorded and those of the tasks that had finished by then
    assert len((tmp_path / "results.csv").read_text().splitlines()) >= 2
    assert len(evaluate(tasks, tmp_path, jobs=2)) == len(tasks)  # and it resumes


def test_a_sigterm_stops_the_worker_processes_and_keeps_the_rows_saved(graphs, tmp_path):
    """SIGTERM (``kill``, ``timeout``, a scheduler) ended ``evaluate -j 2`` at once: the rows finished out of order
    were lost, and multiprocessing's resource tracker warned of leaked semaphores. It stops as Ctrl-C does."""
    import multiprocessing
    import signal

    from gnplace.exceptions import Terminated

    tasks = [Task(str(g), c, "round_robin") for g in collect_graphs([str(graphs)]) for c in ("k80x2", "k80x4")]

    with pytest.raises(Terminated):
        evaluate(tasks, tmp_path, jobs=2, progress=_sigterm_to_self)
    assert multiprocessing.active_children() == [] and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert len((tmp_path / "results.csv").read_text().splitlines()) >= 2  # the header and the row recorded
    assert len(evaluate(tasks, tmp_path, jobs=2)) == len(tasks)  # and it resumes


def _sigterm_to_self(row):
    """An evaluate ``progress`` callback that sends this process a SIGTERM (a handler must be set: it checks)."""
    import signal
    import time

    assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL  # else the kill would end the test run
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler runs at the next bytecode


def test_a_sigterm_to_a_run_in_this_process_stops_it_as_ctrl_c_does(graphs, tmp_path):
    """``evaluate -j 1`` set no SIGTERM handler: a kill ended the process at once, where ``-j 2`` raised Terminated
    (the command line's "gnplace: SIGTERM: interrupted" line). It stops as Ctrl-C does, the rows before saved."""
    import signal

    from gnplace.exceptions import Terminated

    tasks = [Task(str(g), "k80x2", "round_robin") for g in collect_graphs([str(graphs)])]

    with pytest.raises(Terminated):
        evaluate(tasks, tmp_path, jobs=1, progress=_sigterm_to_self)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert len((tmp_path / "results.csv").read_text().splitlines()) == 2  # the header and the row recorded
    ran = []
    assert len(evaluate(tasks, tmp_path, progress=ran.append)) == 2 and len(ran) == 1  # and it resumes


class _StoppedPool:
    """A process pool stopped by ``error`` (Ctrl-C, a dead worker) while its first task ran; the others finished."""

    def __init__(self, error: BaseException) -> None:
        self.error, self.submitted = error, 0

    def submit(self, fn, *args):
        from concurrent.futures import Future

        future = Future()
        if self.submitted == 0:
            future.set_exception(self.error)
        else:
            future.set_result(fn(*args))
        self.submitted += 1
        return future

    def shutdown(self, wait=True):
        pass


@pytest.mark.parametrize("stop", ["interrupt", "dead worker"])
def test_rows_finished_after_the_task_waited_on_are_kept_when_the_run_stops(graphs, tmp_path, monkeypatch, stop):
    """Rows came in task order, so a Ctrl-C or a dead worker lost every later task's finished row."""
    from concurrent.futures.process import BrokenProcessPool

    import gnplace.workers
    from gnplace.exceptions import ExecutionFailed

    error, raised = (KeyboardInterrupt(), KeyboardInterrupt) if stop == "interrupt" else \
        (BrokenProcessPool("killed"), ExecutionFailed)
    monkeypatch.setattr(gnplace.workers, "process_pool", lambda jobs, **kwargs: _StoppedPool(error))
    tasks = [Task(str(g), c, "round_robin") for g in collect_graphs([str(graphs)]) for c in ("k80x2", "k80x4")]
    with pytest.raises(raised):
        evaluate(tasks, tmp_path, jobs=2)
    monkeypatch.undo()
    redo = []
    assert len(evaluate(tasks, tmp_path, progress=redo.append)) == len(tasks)
    assert [r.task() for r in redo] == [tasks[0]]  # only the task that was stopped runs again


def row(path: str, placer: str, step: float, *, oom: bool = False, single: float = 4.0, bound: float = 1.0) -> Row:
    return Row(graph=path, family="f", graph_path=path, ops=1, groups=1, cluster="c", placer=placer, seed=0,
               step_time_s=step, bound_s=bound, single_s=single, peak_memory_bytes=0.0, oom=oom, place_seconds=0.5)


# ---------------------------------------------------------------------------------- rows that cannot lie
def test_a_rerun_at_a_new_budget_keeps_the_old_budgets_row_beside_its_own(graphs, tmp_path):
    """A rerun with another --budget replaced the earlier budget's row: annealing@5 and @400 could not both be kept
    in one folder (as an evaluation asking for both at once keeps them), nor summarised side by side."""
    path = str(graphs / "mlp3.gnpg")
    out = tmp_path / "out"
    small = evaluate([Task(path, "k80x4", "annealing", budget=5)], out)
    assert small[0].budget == 5 and small[0].key
    reran = []
    rows = evaluate([Task(path, "k80x4", "annealing", budget=400)], out, progress=reran.append)
    assert len(reran) == 1 and [r.budget for r in rows] == [5, 400]  # run, and the budget-5 row stands
    assert rows[1].step_time_s == run_task(Task(path, "k80x4", "annealing", budget=400)).step_time_s
    assert rows[1].step_time_s <= small[0].step_time_s
    assert len((out / "results.csv").read_text().splitlines()) == 3
    assert [s["label"] for s in summarise(rows)] == ["annealing@5", "annealing@400"]
    same = []
    evaluate([Task(path, "k80x4", "annealing", budget=400)], out, progress=same.append)
    assert same == []


def test_a_rerun_in_another_mode_or_with_other_options_keeps_the_rows_of_before(graphs, tmp_path):
    """A rerun with another --mode (or -O option) replaced the rows of the placer's earlier runs."""
    path = str(graphs / "mlp3.gnpg")
    evaluate([Task(path, "k80x2", "round_robin")], tmp_path)
    evaluate([Task(path, "k80x2", "round_robin", mode="placeto")], tmp_path)
    rows = evaluate([Task.with_options(path, "k80x2", "heft", {"min_speed": 0.2}), Task(path, "k80x2", "heft")],
                    tmp_path)
    assert [(r.placer, r.mode, r.options) for r in rows] == [
        ("round_robin", "default", "{}"), ("round_robin", "placeto", "{}"), ("heft", "default", '{"min_speed": 0.2}'),
        ("heft", "default", "{}")]
    again = []
    rows = evaluate([Task(path, "k80x2", "heft")], tmp_path, progress=again.append)
    assert again == [] and len(rows) == 4


def test_budget_only_counts_for_placers_that_take_one(graphs):
    path = str(graphs / "mlp2.gnpg")
    assert task_key(Task(path, "k80x2", "heft", budget=5)) == task_key(Task(path, "k80x2", "heft", budget=400))
    assert task_key(Task(path, "k80x2", "annealing", budget=5)) != task_key(Task(path, "k80x2", "annealing", budget=400))


def test_every_input_that_shapes_a_row_changes_its_key(graphs, tmp_path):
    path = str(graphs / "mlp2.gnpg")
    base = Task(path, "k80x2", "annealing", budget=10)
    keys = {
        task_key(base),
        task_key(Task(path, "k80x2", "annealing", budget=10, seed=1)),
        task_key(Task(path, "k80x2", "annealing", budget=10, mode="placeto")),
        task_key(Task.with_options(path, "k80x2", "annealing", dict(start="single"), budget=10)),
        task_key(Task(path, "k80x4", "annealing", budget=10)),
        task_key(Task(str(graphs / "mlp3.gnpg"), "k80x2", "annealing", budget=10)),
    }
    assert len(keys) == 6
    assert task_key(base) == task_key(Task(path, "k80x2", "annealing", budget=10))


def test_one_relative_path_in_two_working_folders_is_two_graphs(tmp_path, monkeypatch):
    """``g.gnpg`` of two folders, the same size and mtime (copies that keep mtimes), was one cache entry: the
    second folder's row had the first's key and graph."""
    stamp_ns = 1_700_000_000_123_456_789
    for folder, name in (("a", "ga"), ("b", "gb")):
        path = tmp_path / folder / "g.gnpg"
        save_graph(mlp_training_graph(layers=2, width=64).replace(name=name), path)
        os.utime(path, ns=(stamp_ns, stamp_ns))
    assert (tmp_path / "a" / "g.gnpg").stat().st_size == (tmp_path / "b" / "g.gnpg").stat().st_size
    found = []
    for folder in ("a", "b"):
        monkeypatch.chdir(tmp_path / folder)
        task = Task("g.gnpg", "k80x2", "single")
        found.append((task_key(task), run_task(task).graph))
    assert found[0][1] == "ga" and found[1][1] == "gb"
    assert found[0][0] != found[1][0]


def test_a_placer_revision_changes_its_key(graphs, monkeypatch):
    from gnplace.placers.heft import HeftPlacer

    task = Task(str(graphs / "mlp2.gnpg"), "k80x2", "heft")
    before = task_key(task)
    monkeypatch.setattr(HeftPlacer, "revision", "2", raising=False)
    assert task_key(task) != before


@pytest.mark.parametrize("placer", ["auto", "annealing", "ppo", "policy", "finetune"])
def test_a_new_revision_of_a_placer_used_changes_the_key(graphs, monkeypatch, placer):
    """``auto`` with a candidate's new revision is a new ``auto``, and so is a search that starts from it."""
    from gnplace.placers.m_etf import METFPlacer

    task = Task(str(graphs / "mlp2.gnpg"), "k80x2", placer, budget=10 if "budget" in PLACERS.info(placer).accepts
                else None)
    heft = Task(str(graphs / "mlp2.gnpg"), "k80x2", "heft")
    before, heft_before = task_key(task), task_key(heft)
    monkeypatch.setattr(METFPlacer, "revision", str(int(METFPlacer.revision) + 1))  # the next one (2 since 2026-11-30)
    assert task_key(task) != before
    assert task_key(heft) == heft_before  # heft uses none: its key stands


@pytest.mark.parametrize("name, module, cls", [("policy", "gnplace.rl.zeroshot", "PolicyPlacer"),
                                                ("finetune", "gnplace.rl.search", "FineTunePlacer")])
def test_a_new_default_checkpoint_changes_the_key(graphs, tmp_path, monkeypatch, name, module, cls):
    import importlib

    placer = getattr(importlib.import_module(module), cls)
    ckpt = tmp_path / "shipped.ckpt"
    ckpt.write_bytes(b"old weights")
    monkeypatch.setattr(placer, "default_checkpoint", ckpt)
    task = Task(str(graphs / "mlp2.gnpg"), "k80x2", name, budget=50)
    first = task_key(task)
    assert task_key(task) == first
    ckpt.write_bytes(b"new weights")  # a newly shipped checkpoint: the saved row is stale
    assert task_key(task) != first
    explicit = Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", name, dict(checkpoint=str(ckpt)), budget=50)
    before = task_key(explicit)
    ckpt.write_bytes(b"newer weights")
    assert task_key(explicit) != before


def test_a_new_shipped_constructor_changes_the_policys_key(graphs, tmp_path, monkeypatch):
    from gnplace.rl.zeroshot import PolicyPlacer

    built = tmp_path / "construct.ckpt"
    built.write_bytes(b"old constructor")
    monkeypatch.setattr(PolicyPlacer, "default_files", {"constructor": built})
    task = Task(str(graphs / "mlp2.gnpg"), "k80x2", "policy")
    first = task_key(task)
    built.write_bytes(b"new constructor")
    assert task_key(task) != first
    told = Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", "policy", dict(constructor="none"))
    before = task_key(told)
    built.write_bytes(b"newer constructor")  # not read when the option names another
    assert task_key(told) == before


def test_a_changed_graph_file_is_run_again(graphs, tmp_path):
    path = graphs / "g.gnpg"
    save_graph(mlp_training_graph(layers=2, width=512, batch=128), path)
    out = tmp_path / "out"
    first = evaluate([Task(str(path), "k80x2", "single")], out)
    save_graph(mlp_training_graph(layers=2, width=1024, batch=128).replace(name="mlp"), path)
    again = []
    rows = evaluate([Task(str(path), "k80x2", "single")], out, progress=again.append)
    assert len(again) == 1 and len(rows) == 1
    assert rows[0].step_time_s > first[0].step_time_s  # the wider graph, not the stale row or cached graph


def test_a_changed_cluster_file_is_run_again(graphs, tmp_path):
    yaml_path = tmp_path / "mine.yaml"
    yaml_path.write_text("name: mine\ndevices: [{name: gpu, count: 2, kind: k80}]\nlinks: {default: pcie3}\n")
    task = Task(str(graphs / "mlp2.gnpg"), str(yaml_path), "round_robin")
    out = tmp_path / "out"
    first = evaluate([task], out)
    yaml_path.write_text("name: mine\ndevices: [{name: gpu, count: 2, kind: v100}]\nlinks: {default: pcie3}\n")
    again = []
    rows = evaluate([task], out, progress=again.append)
    assert len(again) == 1 and rows[0].step_time_s < first[0].step_time_s  # V100s are faster than K80s


def test_saved_rows_of_inputs_since_changed_are_counted_before_any_run(graphs, tmp_path):
    """Rows timed on a graph file since changed were dropped without a word, those of placers not asked for again
    too; ``stale`` now hands their count over (a failed row runs again, uncounted, and a copy of a row is no row)."""
    path = graphs / "g.gnpg"
    save_graph(mlp_training_graph(layers=2, width=512, batch=128), path)
    tasks = [Task(str(path), "k80x2", p) for p in ("single", "round_robin", "heft")]
    evaluate(tasks, tmp_path)
    with (tmp_path / "results.csv").open(newline="") as handle:
        saved = list(csv.DictReader(handle))
    saved[2].update(error="boom", oom="", step_time_s="nan")  # heft failed
    with (tmp_path / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(saved[0]))
        writer.writeheader()
        writer.writerows([*saved, saved[0]])  # and single's row twice
    counts, ran = [], []
    evaluate(tasks, tmp_path, stale=counts.append, progress=ran.append)
    assert counts == [] and [r.placer for r in ran] == ["heft"]  # nothing changed: no call
    save_graph(mlp_training_graph(layers=2, width=1024, batch=128), path)
    rows = evaluate(tasks[:1], tmp_path, stale=counts.append)
    assert counts == [3] and [r.placer for r in rows] == ["single"]  # single's, round_robin's and heft's


def test_an_option_naming_a_file_is_keyed_by_its_content(graphs, tmp_path):
    ckpt = tmp_path / "weights.bin"
    ckpt.write_bytes(b"one")
    task = Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", "annealing", dict(start=str(ckpt)), budget=5)
    first = task_key(task)
    ckpt.write_bytes(b"two!")
    assert task_key(task) != first
    listed = Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", "policy", dict(constructor=f"{ckpt}, {ckpt}"))
    first = task_key(listed)  # several files, comma-separated (policy's constructors): each keyed by its content too
    ckpt.write_bytes(b"three")
    assert task_key(listed) != first


def test_placer_options_pass_through_the_task_and_the_row(graphs, tmp_path):
    task = Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", "annealing", dict(start="round_robin", batch=4), budget=10)
    assert task.options == (("batch", 4), ("start", "round_robin")) and task.options_dict["batch"] == 4
    rows = evaluate([task], tmp_path / "out")
    assert json.loads(rows[0].options) == {"batch": 4, "start": "round_robin"}
    reread = evaluate([task], tmp_path / "out")
    assert reread[0].task() == task
    bad = run_task(Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", "annealing", dict(batch=0), budget=10))
    assert "batch" in bad.error and math.isnan(bad.step_time_s)
    with pytest.raises(GnplaceError, match="not a JSON value"):
        Task.with_options("g", "k80x2", "annealing", dict(start=object()))


def test_placers_are_built_once_per_worker(graphs, monkeypatch):
    import gnplace.evaluate as ev

    ev._placer.cache_clear()
    built = []
    real = ev.make_placer

    def counting(name, **kw):
        built.append(name)
        return real(name, **kw)

    monkeypatch.setattr(ev, "make_placer", counting)
    for g in ("mlp2.gnpg", "mlp3.gnpg"):
        run_task(Task(str(graphs / g), "k80x2", "heft"))
    assert built.count("heft") == 1
    ev._placer.cache_clear()


def test_rows_of_an_older_results_file_are_run_again(graphs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.csv").write_text(
        "graph,family,graph_path,ops,groups,cluster,placer,seed,step_time_s,bound_s,single_s,peak_memory_bytes,oom,"
        f"place_seconds,error\nmlp,,{graphs / 'mlp2.gnpg'},1,1,k80x2,single,0,1.0,1.0,1.0,0.0,False,0.1,\n"
    )
    ran = []
    rows = evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")], out, progress=ran.append)
    assert len(ran) == 1 and len(rows) == 1 and rows[0].step_time_s != 1.0


def test_a_graph_named_twice_is_one_graph(graphs):
    assert collect_graphs([str(graphs), str(graphs / "mlp2.gnpg")]) == collect_graphs([str(graphs)])


def test_bad_options_or_seeds_are_refused_before_saved_rows_are_touched(graphs, tmp_path):
    out = tmp_path / "out"
    evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "annealing", budget=20)], out)
    saved = (out / "results.csv").read_bytes()
    bad_option = Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", "annealing", {"initial_temperature": "abc"},
                                   budget=20)
    with pytest.raises(GnplaceError):
        evaluate([bad_option], out)
    with pytest.raises(GnplaceError, match="seed must be >= 0"):
        evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "annealing", seed=-5, budget=20)], out)
    assert (out / "results.csv").read_bytes() == saved


def test_an_input_refused_leaves_no_empty_output_folder(graphs, tmp_path):
    """A placer option refused by the placer itself (``batch=0``), a start placer unknown or a bad seed left an
    empty ``--out`` behind."""
    out = tmp_path / "new" / "out"
    graph = str(graphs / "mlp2.gnpg")
    for bad in (Task.with_options(graph, "k80x2", "annealing", {"batch": 0}, budget=20),
                Task.with_options(graph, "k80x2", "annealing", {"start": "bogus"}, budget=20),
                Task(graph, "k80x2", "annealing", seed=-5, budget=20)):
        with pytest.raises(GnplaceError):
            evaluate([bad], out)
        assert not (tmp_path / "new").exists()


def test_a_results_file_of_another_tool_is_refused_and_kept(graphs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.csv").write_text("a,b,c\n1,2,3\n")
    with pytest.raises(GnplaceError, match="not a results file of gnplace evaluate"):
        evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")], out)
    assert (out / "results.csv").read_text() == "a,b,c\n1,2,3\n"


def test_a_refused_results_file_shows_its_columns_cut_short(graphs, tmp_path):
    """A binary file's first line, its "columns", filled the error line with hundreds of characters of bytes."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.csv").write_text("x" * 300 + ",b\n1,2\n")
    with pytest.raises(GnplaceError) as refused:
        evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")], out)
    assert f"(columns {'x' * 40}..., b)" in str(refused.value) and "x" * 41 not in str(refused.value)


def test_a_file_whose_first_line_is_blank_is_refused_and_kept(graphs, tmp_path):
    """Its blank first line read as no header, so it was taken for an empty results file and overwritten."""
    out = tmp_path / "out"
    out.mkdir()
    for text in ("\na,b,c\n1,2,3\n", "\n\x96t\x9d\x02E\n"):  # a table, or bytes, after a blank line
        (out / "results.csv").write_text(text, encoding="latin-1")
        with pytest.raises(GnplaceError, match="not a results file of gnplace evaluate"):
            evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")], out)
        assert (out / "results.csv").read_text(encoding="latin-1") == text
    (out / "results.csv").write_text("\n\n")  # blank lines alone: no rows, as an empty file
    (row,) = evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")], out)
    assert row.placer == "single" and not row.error


def test_a_placer_that_crashes_fails_its_row_alone(graphs, tmp_path, monkeypatch):
    from gnplace.placers.heft import HeftPlacer

    def crash(self, graph, cluster, *, seed=None):
        raise IndexError("index 0 is out of bounds")

    monkeypatch.setattr(HeftPlacer, "place", crash)
    rows = evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", p) for p in ("heft", "single")], tmp_path / "out")
    by = {r.placer: r for r in rows}
    assert by["heft"].error == "IndexError: index 0 is out of bounds" and math.isnan(by["heft"].step_time_s)
    assert not by["single"].error and by["single"].step_time_s > 0


    monkeypatch.undo()  # the failure has passed: a rerun runs the failed row again, and reuses the other
    again = []
    rows = evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", p) for p in ("heft", "single")], tmp_path / "out",
                    progress=again.append)
    assert [r.placer for r in again] == ["heft"] and all(not r.error for r in rows) and len(rows) == 2


def test_a_failed_row_says_nothing_was_timed_in_every_field(graphs, tmp_path, monkeypatch):
    """results.csv wrote ``oom=False`` beside a step time of ``nan`` for a failed run: now its ``oom`` is empty."""
    from gnplace.evaluate import _read_rows
    from gnplace.placers.heft import HeftPlacer

    def crash(self, graph, cluster, *, seed=None):
        raise IndexError("index 0 is out of bounds")

    monkeypatch.setattr(HeftPlacer, "place", crash)
    rows = evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", p) for p in ("heft", "single")], tmp_path / "out")
    assert [(r.placer, r.oom) for r in rows] == [("heft", None), ("single", False)]
    path = tmp_path / "out" / "results.csv"
    with path.open(newline="") as handle:
        cells = {r["placer"]: r for r in csv.DictReader(handle)}
    assert (cells["heft"]["oom"], cells["heft"]["step_time_s"], cells["single"]["oom"]) == ("", "nan", "False")
    assert [(r.placer, r.oom) for r in _read_rows(path)] == [("heft", None), ("single", False)]
    text = path.read_text()  # a file written before: False beside the error, read as not timed
    path.write_text(text.replace(",nan,,nan,", ",nan,False,nan,"))
    assert ",nan,False,nan," in path.read_text()
    assert [(r.placer, r.oom) for r in _read_rows(path)] == [("heft", None), ("single", False)]
    path.write_text(text.replace(",False,", ",,"))  # a row that ran with no answer on memory: run again
    assert [r.placer for r in _read_rows(path)] == ["heft"]


def test_two_cluster_files_of_one_name_are_two_clusters(graphs, tmp_path):
    # every `gnplace profile` writes a cluster.yaml named after its file: rows were merged by that name
    for folder, kind in (("a", "k80"), ("b", "v100")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "cluster.yaml").write_text(f"devices: [{{name: gpu, count: 2, kind: {kind}}}]\n"
                                                        "links: {default: pcie3}\n")
    tasks = [Task(str(graphs / "mlp2.gnpg"), str(tmp_path / f / "cluster.yaml"), p)
             for f in ("a", "b") for p in ("single", "round_robin")]
    rows = evaluate(tasks, tmp_path / "out")
    assert len(rows) == 4 and {r.cluster for r in rows} == {"cluster"}
    again = []
    assert len(evaluate(tasks, tmp_path / "out", progress=again.append)) == 4 and again == []  # all four reused
    summary = summarise(rows)
    assert sorted({s["cluster"] for s in summary}) == [f"cluster ({(tmp_path / f / 'cluster.yaml').resolve()})"
                                                       for f in ("a", "b")]
    assert all(s["graphs"] == 1 for s in summary)


def test_rows_keep_absolute_paths_so_a_rerun_from_elsewhere_reuses_them(graphs, tmp_path, monkeypatch):
    monkeypatch.chdir(graphs)
    first = evaluate([Task("mlp2.gnpg", "k80x2", "single")], tmp_path / "out")
    assert first[0].graph_path == str((graphs / "mlp2.gnpg").resolve())
    monkeypatch.chdir(tmp_path)
    again = []
    rows = evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")], tmp_path / "out", progress=again.append)
    assert again == [] and len(rows) == 1 and rows[0].task().graph_path == first[0].graph_path


def test_steps_of_no_work_summarise_as_ratios_of_one(tmp_path):
    """A 0 s step beside a 0 s best, single and bound is 1.0 of each (it was a ZeroDivisionError)."""
    from gnplace.graph import OpGraph
    path = save_graph(OpGraph(["a", "b"], [(0, 1)], name="idle"), tmp_path / "idle.gnpg")
    cluster = tmp_path / "z2.yaml"
    cluster.write_text("name: z2\ndevices:\n  - {name: gpu, count: 2, kind: k80, launch_overhead: 0}\n"
                       "links:\n  default: pcie3\n")
    rows = evaluate([Task(str(path), str(cluster), p) for p in ("single", "m_etf")], tmp_path / "ev")
    assert [r.step_time_s for r in rows] == [0.0, 0.0]
    summary = summarise(rows)
    assert [(s["vs_best"], s["vs_single"], s["vs_bound"]) for s in summary] == [(1.0, 1.0, 1.0)] * 2


def test_a_step_of_work_beside_a_best_of_no_work_summarises_as_infinite_not_nan(tmp_path):
    """round_robin's 25 us transfer beside single's 0 s step (a graph of no work, no launch overhead) showed nan."""
    from gnplace.graph import OpGraph
    path = save_graph(OpGraph(["a", "b", "c"], [(0, 1), (0, 2)], name="idle"), tmp_path / "idle.gnpg")
    cluster = tmp_path / "z2.yaml"
    cluster.write_text("name: z2\ndevices: [{name: gpu, count: 2, kind: k80, launch_overhead: 0}]\n"
                       "links: {default: placeto}\n")
    rows = evaluate([Task(str(path), str(cluster), p) for p in ("single", "round_robin")], tmp_path / "ev")
    steps = {r.placer: r.step_time_s for r in rows}
    assert steps["round_robin"] > 0 and steps["single"] == 0.0
    by_placer = {s["placer"]: s for s in summarise(rows)}
    assert [by_placer["round_robin"][k] for k in ("vs_best", "vs_single", "vs_bound")] == [math.inf] * 3
    assert by_placer["round_robin"]["vs_best_graphs"] == 0
    assert [by_placer["single"][k] for k in ("vs_best", "vs_single", "vs_bound")] == [1.0] * 3
    write_markdown(summarise(rows), tmp_path / "table.md")
    assert "| round_robin | 1 | inf | inf | inf |" in (tmp_path / "table.md").read_text()


def test_placers_run_by_evaluate_draw_no_bar_of_their_own():
    """Evaluation shows one bar; workers drawing their own on one terminal garbled it."""
    from gnplace.evaluate import _placer

    assert _placer("annealing", 100, "default", "{}").progress is False
    assert _placer("ppo", 100, "default", "{}").progress is False


def test_the_checkpoint_formats_placers_declare_are_the_files_formats():
    from gnplace.placers.registry import PLACERS
    from gnplace.policy.checkpoint import FORMAT
    from gnplace.rl.placeto import FORMAT as PLACETO_FORMAT

    formats = {name: PLACERS.info(name).checkpoint_format for name in ("policy", "finetune", "placeto")}
    assert formats == {"policy": FORMAT, "finetune": FORMAT, "placeto": PLACETO_FORMAT}


def test_every_one_of_several_shipped_constructors_is_in_the_policys_key(graphs, tmp_path, monkeypatch):
    from gnplace.rl.zeroshot import PolicyPlacer

    first_file, second_file = tmp_path / "a.ckpt", tmp_path / "b.ckpt"
    first_file.write_bytes(b"first constructor")
    second_file.write_bytes(b"second constructor")
    monkeypatch.setattr(PolicyPlacer, "default_files", {"constructor": (first_file, second_file)})
    task = Task(str(graphs / "mlp2.gnpg"), "k80x2", "policy")
    before = task_key(task)
    second_file.write_bytes(b"second constructor, retrained")
    assert task_key(task) != before  # the second file counts as much as the first


def test_a_task_asked_twice_runs_once(graphs, tmp_path, monkeypatch):
    """Two spellings of one cluster file gave two tasks of one key: both ran and both rows were kept."""
    import shutil
    from pathlib import Path

    import gnplace

    monkeypatch.chdir(tmp_path)
    shutil.copy(Path(gnplace.__file__).parent / "clusters" / "k80x2.yaml", "c.yaml")
    graph = str(graphs / "mlp2.gnpg")
    tasks = [Task(graph, spec, "single") for spec in ("c.yaml", "./c.yaml", str(tmp_path / "c.yaml"))]
    seen = []
    assert len(evaluate(tasks, tmp_path / "out", progress=seen.append)) == 1 and len(seen) == 1


@pytest.mark.parametrize("budget", [0, -5, 10**9 + 1])
def test_a_budget_out_of_range_is_refused_whichever_placers_run(graphs, tmp_path, budget):
    """``single`` takes no budget: a budget of 0 went through, to be stored in its row, where ``annealing`` refused it."""
    from gnplace.exceptions import InvalidArgument

    out = tmp_path / "out"
    for placer in ("single", "annealing"):
        with pytest.raises(InvalidArgument, match=rf"evaluate needs a budget >= 1 .*, at most 1,000,000,000\), got {budget}$"):
            evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", placer, budget=budget)], out)
    assert not (out / "results.csv").exists()


def test_a_graph_file_that_cannot_be_read_is_refused_before_any_run(graphs, tmp_path):
    """The rows of the graphs before it were run, then the evaluation stopped at the bad one."""
    bad = tmp_path / "bad.gnpg"
    bad.write_text("not a graph")
    out = tmp_path / "out"
    seen = []
    tasks = [Task(str(g), "k80x2", "single") for g in (graphs / "mlp2.gnpg", bad)]
    with pytest.raises(GnplaceError, match="bad.gnpg: not a readable gnplace graph file"):
        evaluate(tasks, out, progress=seen.append)
    assert seen == [] and not (out / "results.csv").exists()
    assert len(evaluate(tasks[:1], out, progress=seen.append)) == len(seen) == 1


def test_a_results_file_that_is_not_a_regular_file_is_named_so(graphs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.csv").symlink_to("/dev/null")
    with pytest.raises(GnplaceError, match=r"results.csv: not a results file \(not a regular file\)"):
        evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")], out)


def test_a_crash_with_a_long_message_leaves_a_results_file_a_rerun_reads(graphs, tmp_path, monkeypatch):
    """A message over csv's field limit (131,072 characters) was saved whole: every rerun refused the file."""
    from gnplace.placers.heft import HeftPlacer

    def crash(self, graph, cluster, *, seed=None):
        raise ValueError("x" * 200_000)

    tasks = [Task(str(graphs / "mlp2.gnpg"), "k80x2", p) for p in ("heft", "single")]
    monkeypatch.setattr(HeftPlacer, "place", crash)
    failed = {r.placer: r for r in evaluate(tasks, tmp_path / "out")}["heft"]
    assert len(failed.error) == 1000 and failed.error.startswith("ValueError: xxx") and failed.error.endswith("…")
    monkeypatch.undo()
    again = []
    rows = evaluate(tasks, tmp_path / "out", progress=again.append)
    assert [r.placer for r in again] == ["heft"] and not any(r.error for r in rows)  # the saved single row stands


def test_tasks_of_one_slot_that_differ_in_budget_each_keep_their_row(graphs, tmp_path):
    """Tasks of one graph, cluster, placer and seed at two budgets shared a row slot: every rerun ran one again."""
    path = str(graphs / "mlp2.gnpg")
    tasks = [Task(path, "k80x4", "annealing", budget=5), Task(path, "k80x4", "annealing", budget=50)]
    assert sorted(r.budget for r in evaluate(tasks, tmp_path)) == [5, 50]
    ran, counts = [], []
    rows = evaluate(tasks, tmp_path, progress=ran.append, reused=counts.append)
    assert ran == [] and counts == [2] and sorted(r.budget for r in rows) == [5, 50]
    assert len((tmp_path / "results.csv").read_text().splitlines()) == 1 + 2
    # an evaluation that asks for one budget alone keeps the row of the other
    assert [r.budget for r in evaluate(tasks[1:], tmp_path)] == [5, 50]


class _InlinePool:
    """A process pool that runs each task at once, in this process."""

    def submit(self, fn, *args):
        from concurrent.futures import Future

        future = Future()
        future.set_result(fn(*args))
        return future

    def shutdown(self, wait=True):
        pass


def test_no_more_workers_are_started_than_tasks_to_run(graphs, tmp_path, monkeypatch):
    """-j 16 for 2 tasks started a pool of 16, whose 2 busy workers got a 16th of the cores each."""
    import gnplace.workers

    started = []
    monkeypatch.setattr(gnplace.workers, "process_pool", lambda jobs, **kwargs: started.append(jobs) or _InlinePool())
    tasks = [Task(str(g), "k80x2", "single") for g in collect_graphs([str(graphs)])]
    assert len(evaluate(tasks, tmp_path, jobs=16)) == 2
    assert started == [2]
    assert len(evaluate(tasks, tmp_path, jobs=16)) == 2 and started == [2]  # nothing to run: no pool at all


def test_kept_placements_are_those_the_rows_timed(graphs, tmp_path):
    from gnplace.cluster import load_cluster
    from gnplace.evaluate import kept_placement
    from gnplace.placement import load_placement
    from gnplace.sim.simulator import Simulator

    path = str(graphs / "mlp3.gnpg")
    tasks = [Task(path, "k80x2", p) for p in ("single", "round_robin")]
    keep = lambda task: task.placer == "round_robin"  # noqa: E731
    by = {r.placer: r for r in evaluate(tasks, tmp_path, keep_placements=keep)}
    assert not kept_placement(tmp_path, by["single"].key).exists()
    graph, cluster = load_graph(path), load_cluster("k80x2")
    placement = load_placement(kept_placement(tmp_path, by["round_robin"].key), graph, cluster)
    assert Simulator().time(graph, cluster, placement).step_time == by["round_robin"].step_time_s
    # a saved row whose placement is to be kept and is not (saved before placements were kept) runs again
    kept_placement(tmp_path, by["round_robin"].key).unlink()
    ran = []
    evaluate(tasks, tmp_path, keep_placements=keep, progress=ran.append)
    assert [r.placer for r in ran] == ["round_robin"] and kept_placement(tmp_path, by["round_robin"].key).is_file()
    # a row replaced (by one of a new revision of its placer) takes its kept placement with it
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PLACERS.resolve("round_robin"), "revision", "next", raising=False)
        evaluate([Task(path, "k80x2", "round_robin")], tmp_path, keep_placements=keep)
    assert not kept_placement(tmp_path, by["round_robin"].key).exists()


def test_a_damaged_kept_placement_runs_its_row_again(graphs, tmp_path):
    """A kept placement cut short (a kill, a full disk) was taken for one, and every --plot stopped on it."""
    from gnplace.cluster import load_cluster
    from gnplace.evaluate import kept_placement
    from gnplace.placement import load_placement

    path = str(graphs / "mlp3.gnpg")
    tasks = [Task(path, "k80x2", p) for p in ("single", "round_robin")]
    keep = lambda task: True  # noqa: E731
    by = {r.placer: r for r in evaluate(tasks, tmp_path, keep_placements=keep)}
    file = kept_placement(tmp_path, by["round_robin"].key)
    whole = file.read_bytes()
    for damaged in (whole[: len(whole) // 2], b"\x96\x9d", b"[1, 2]"):
        file.write_bytes(damaged)
        ran = []
        evaluate(tasks, tmp_path, keep_placements=keep, progress=ran.append)
        assert [r.placer for r in ran] == ["round_robin"]  # single's stands
        load_placement(file, load_graph(path), load_cluster("k80x2"))  # written anew


def test_a_kept_placement_of_placeto_mode_is_timed_in_that_mode_by_simulate(graphs, tmp_path, capsys,
                                                                            documented_keys):
    """Its predicted had no mode: gnplace simulate timed a --mode placeto row's placement in the default mode."""
    from gnplace.cli import main
    from gnplace.evaluate import kept_placement

    path = str(graphs / "mlp3.gnpg")
    (row,) = evaluate([Task(path, "k80x2", "round_robin", mode="placeto")], tmp_path, keep_placements=lambda t: True)
    kept = kept_placement(tmp_path, row.key)
    documented_keys("placement-file", json.loads(kept.read_text()))
    assert json.loads(kept.read_text())["predicted"] == {"step_time_s": row.step_time_s, "oom": row.oom,
                                                         "mode": "placeto"}
    capsys.readouterr()
    assert main(["simulate", path, "-p", str(kept), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["mode"] == "placeto" and report["step_time_s"] == row.step_time_s


def test_a_file_in_the_place_of_the_kept_placements_is_refused_before_any_run(graphs, tmp_path):
    (tmp_path / "placements").write_text("")
    with pytest.raises(GnplaceError, match="placements: the folder of the kept placements is a file"):
        evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")], tmp_path, keep_placements=lambda task: True)
    assert not (tmp_path / "results.csv").exists()


@pytest.mark.parametrize("jobs", [0, 2.5, True])
def test_jobs_must_be_a_whole_number_of_at_least_one(graphs, tmp_path, jobs):
    with pytest.raises(GnplaceError, match=r"evaluate needs jobs >= 1 \(a whole number\), got "):
        evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")], tmp_path, jobs=jobs)


def test_a_numpy_integer_of_jobs_is_a_whole_number(graphs, tmp_path):
    """``jobs=np.int64(1)`` (a count computed with numpy) was refused as not a whole number."""
    rows = evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")], tmp_path, jobs=np.int64(1))
    assert [row.placer for row in rows] == ["single"]


def test_no_output_folder_is_refused_in_one_line(graphs):
    """``evaluate(tasks, None)`` was pathlib's TypeError."""
    with pytest.raises(GnplaceError, match=r"output folder is given by its path \(str or os.PathLike\), got None"):
        evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")], None)


def test_a_placer_given_two_budgets_is_summarised_once_per_budget(tmp_path):
    """Rows of annealing at 5 and 40 evaluations of one graph gave one line of 2 'graphs' and one geometric mean."""
    graph = str(save_graph(mlp_training_graph(layers=2, width=64, batch=8).replace(meta={"family": "toy"}),
                           tmp_path / "g.gnpg"))
    tasks = [Task.with_options(graph, "k80x4", "annealing", budget=b) for b in (40, 5)]
    tasks.append(Task.with_options(graph, "k80x4", "heft", budget=5))  # spends no budget: its line as before
    tasks.append(Task.with_options(graph, "k80x4", "annealing"))  # its own default budget
    summary = summarise(evaluate(tasks, tmp_path / "out"))
    assert [(s["placer"], s["budget"], s["label"], s["graphs"]) for s in summary] == [
        ("annealing", None, "annealing", 1), ("annealing", 5, "annealing@5", 1), ("annealing", 40, "annealing@40", 1),
        ("heft", None, "heft", 1)]
    md = write_markdown(summary, tmp_path / "r.md").read_text()
    assert [line.split(" | ")[2] for line in md.splitlines()[2:]] == ["annealing", "annealing@5", "annealing@40",
                                                                      "heft"]


def test_an_option_a_placer_does_not_take_is_refused_before_the_output_folder_is_made(graphs, tmp_path):
    """evaluate and ``gnplace place`` refuse it with one check (gnplace.placers.registry.check_placer_options)."""
    from gnplace.exceptions import InvalidArgument

    task = Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", "m_etf", {"algo": "reinforce"})
    with pytest.raises(InvalidArgument, match=r"^placer 'm_etf' does not take these options: algo; it takes: "
                                              r"memory_aware, min_speed \(shared: timer\)$"):
        evaluate([Task(str(graphs / "mlp2.gnpg"), "k80x2", "heft"), task], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_task_of_a_folder_or_of_nothing_says_which(tmp_path):
    """A ``Task`` made in Python of a folder said "no such graph file", as of a missing file."""
    from gnplace.exceptions import InvalidGraph

    (tmp_path / "x.gnpg").mkdir()
    with pytest.raises(InvalidGraph, match=r"x.gnpg: is a folder, not a graph file$"):
        task_key(Task(str(tmp_path / "x.gnpg"), "k80x2", "single"))
    with pytest.raises(GnplaceError, match=r"y.gnpg: no such graph file$"):
        task_key(Task(str(tmp_path / "y.gnpg"), "k80x2", "single"))


def test_two_graph_files_of_one_content_each_get_their_rows(graphs, tmp_path):
    """Tasks were merged by key, which holds the content, not the path: one file's rows went missing."""
    import shutil

    for name in ("a", "b"):
        shutil.copy(graphs / "mlp2.gnpg", graphs / f"{name}.gnpg")
    out, ran = tmp_path / "out", []
    rows = evaluate([Task(str(graphs / "a.gnpg"), "k80x2", "single")], out, progress=ran.append)
    tasks = [Task(str(graphs / f"{name}.gnpg"), "k80x2", "single") for name in ("a", "b")]
    rows = evaluate(tasks, out, progress=ran.append)  # b's task was taken for a's saved row, and never ran
    assert sorted(Path(r.graph_path).name for r in rows) == ["a.gnpg", "b.gnpg"] and len(ran) == 2
    assert len(evaluate(tasks, out, progress=ran.append)) == 2 and len(ran) == 2  # both stand


def test_rows_timed_on_a_cluster_file_since_changed_are_dropped_not_compared(graphs, tmp_path):
    """A placer not asked again kept its row of the old cluster, and the summary ranked it beside the new rows."""
    cluster = tmp_path / "mine.yaml"
    cluster.write_text("name: mine\ndevices: [{name: gpu, count: 2, kind: k80}]\nlinks: {default: nvlink2}\n")
    graph, out = str(graphs / "mlp2.gnpg"), tmp_path / "out"
    evaluate([Task(graph, str(cluster), p) for p in ("single", "round_robin", "heft")], out)
    evaluate([Task(graph, "k80x2", "single")], out)  # another cluster's row, which stands
    cluster.write_text("name: mine\ndevices: [{name: gpu, count: 2, kind: k80}]\n"
                       "links: {default: {bandwidth: 10 MB/s, latency: 1 ms}}\n")
    rows = evaluate([Task(graph, str(cluster), "heft")], out)
    assert sorted((r.cluster, r.placer) for r in rows) == [("k80x2", "single"), ("mine", "heft")]


@pytest.mark.parametrize("options", ["{bad", "[]", "[" * 100_000, "{\"a\": " * 100_000 + "1" + "}" * 100_000])
def test_a_saved_row_whose_options_are_not_a_json_object_is_run_again(graphs, tmp_path, options):
    """``{bad`` stopped the command with a JSONDecodeError once its runs were done, the summary not written."""
    task, out = Task(str(graphs / "mlp2.gnpg"), "k80x2", "single"), tmp_path / "out"
    evaluate([task], out)
    _set_in_the_first_saved_row(out, "options", options)
    ran = []
    rows = evaluate([task], out, progress=ran.append)
    assert len(ran) == 1 and [r.options for r in rows] == ["{}"]
    assert summarise(rows)


def test_a_graph_of_a_very_long_name_leaves_a_results_file_a_rerun_reads(tmp_path):
    """A 200,000-character name (from the graph file) was a field past csv's limit: every rerun refused the folder."""
    g = mlp_training_graph(layers=2, width=64, batch=8)
    g = g.replace(name="n" * 200_000)
    save_graph(g, tmp_path / "long.gnpg")
    tasks = [Task(str(tmp_path / "long.gnpg"), "k80x2", "single")]
    evaluate(tasks, tmp_path / "out")
    again, reused = [], []
    rows = evaluate(tasks, tmp_path / "out", progress=again.append, reused=reused.append)
    assert again == [] and reused == [1] and rows[0].graph == g.name


def test_a_row_saved_twice_is_read_and_counted_once(graphs, tmp_path):
    """Two runs into one folder both appended a row: the copy was kept, counted (best on 2/2 of one graph) and
    written back."""
    tasks = [Task(str(graphs / "mlp2.gnpg"), "k80x2", p) for p in ("single", "heft")]
    evaluate(tasks, tmp_path / "out")
    csv_path = tmp_path / "out" / "results.csv"
    lines = csv_path.read_text().splitlines()
    csv_path.write_text("\n".join([*lines, lines[-1]]) + "\n")
    reused = []
    rows = evaluate(tasks, tmp_path / "out", reused=reused.append)
    assert reused == [2] and sorted(r.placer for r in rows) == ["heft", "single"]
    assert csv_path.read_text().splitlines() == lines
    assert all(line["runs"] == 1 for line in summarise(rows))


def test_a_graph_of_no_ops_is_refused_before_any_run(graphs, tmp_path):
    """It scored 1.000 against every reference (best on 1/1) and pulled the geometric means toward 1."""
    from gnplace.exceptions import InvalidGraph
    from gnplace.toy import chain_graph

    save_graph(chain_graph(0), tmp_path / "empty.gnpg")
    tasks = [Task(str(p), "k80x2", "single") for p in (graphs / "mlp2.gnpg", tmp_path / "empty.gnpg")]
    with pytest.raises(InvalidGraph, match=r"empty\.gnpg: graph .* has no ops"):
        evaluate(tasks, tmp_path / "out")
    assert not (tmp_path / "out" / "results.csv").exists()


def test_a_placer_an_option_starts_is_part_of_the_row(graphs, tmp_path, monkeypatch):
    """``-O annealing.start=policy`` runs policy: a new revision or retrained shipped weights reused the old rows,
    and ``auto.candidates=[ppo]`` was counted among the non-learned placers' best."""
    from gnplace.evaluate import is_learned, placers_in_options
    from gnplace.rl.zeroshot import PolicyPlacer

    weights = tmp_path / "w.ckpt"
    weights.write_bytes(b"weights")
    monkeypatch.setattr(PolicyPlacer, "default_checkpoint", str(weights))
    started = Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", "annealing", {"start": "policy"})
    plain = Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", "annealing", {"start": "heft"})
    keys = task_key(started), task_key(plain)
    weights.write_bytes(b"weights, retrained")
    assert task_key(started) != keys[0] and task_key(plain) == keys[1]
    monkeypatch.setattr(PolicyPlacer, "revision", "99")
    assert task_key(started) not in keys
    assert placers_in_options(started.options_dict) == ["policy"]
    assert is_learned(started) and not is_learned(plain)
    assert is_learned(Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", "auto", {"candidates": ["ppo", "heft"]}))


class ListPlacer:
    """Returns a list of devices, not a Placement (a third-party placer's mistake)."""

    name = "list_devices"

    def place(self, graph, cluster, *, seed=None):
        return [0] * graph.num_ops


class SplitPlacer:
    """Alternates ops over two devices, splitting colocation groups."""

    name = "splitter"

    def place(self, graph, cluster, *, seed=None):
        from gnplace.placement import Placement

        return Placement([i % 2 for i in range(graph.num_ops)], cluster)


@pytest.mark.parametrize(("cls", "message"), [
    (ListPlacer, "placer 'list_devices' returned list, not a Placement"),
    (SplitPlacer, r"placer 'splitter' returned a placement that splits \d+ colocation groups \(ops that must share"),
])
def test_a_placer_breaking_the_placer_contract_fails_its_row_alone(graphs, tmp_path, cls, message):
    """A list crashed evaluate when its placement was kept (after its row was written as a success); a placement
    splitting colocation groups was timed and ranked with no word."""
    import re

    from gnplace.evaluate import kept_placement
    from gnplace.placers import register_placer

    register_placer(cls.name, cls)
    try:
        path = str(graphs / "mlp3.gnpg")
        tasks = [Task(path, "k80x2", p) for p in (cls.name, "round_robin")]
        rows = {r.placer: r for r in evaluate(tasks, tmp_path, keep_placements=lambda task: True)}
    finally:
        PLACERS.unregister(cls.name)
    assert re.search(message, rows[cls.name].error) and math.isnan(rows[cls.name].step_time_s)
    assert not kept_placement(tmp_path, rows[cls.name].key).exists()
    assert rows["round_robin"].error == "" and kept_placement(tmp_path, rows["round_robin"].key).is_file()


class InterruptedPlacer:
    """Ctrl-C in a numba loop: handed back as a SystemError whose context is the KeyboardInterrupt."""

    name = "interrupted"

    def place(self, graph, cluster, *, seed=None):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("CPUDispatcher(<function simulate_many>) returned a result with an exception set")  # noqa: B904 - as numba does


def test_ctrl_c_inside_a_placer_stops_the_run_and_saves_no_row_for_it(graphs, tmp_path):
    """It was recorded as the placer's failure ("SystemError: ..."), and the run went on (exit 0 for bench.py)."""
    from gnplace.evaluate import _read_rows
    from gnplace.exceptions import after_interrupt
    from gnplace.placers import register_placer

    register_placer("interrupted", InterruptedPlacer)
    try:
        path = str(graphs / "mlp3.gnpg")
        tasks = [Task(path, "k80x2", "single"), Task(path, "k80x2", "interrupted"), Task(path, "k80x2", "round_robin")]
        with pytest.raises(SystemError) as caught:
            evaluate(tasks, tmp_path)
    finally:
        PLACERS.unregister("interrupted")
    assert after_interrupt(caught.value)
    assert [r.placer for r in _read_rows(tmp_path / "results.csv")] == ["single"]


def test_an_interrupted_rerun_keeps_the_rows_it_had_not_replaced_yet(graphs, tmp_path, monkeypatch):
    """A rerun of a new revision dropped the saved rows of the slots it ran again before it had their new rows:
    Ctrl-C then left results.csv without them."""
    from gnplace.evaluate import _read_rows

    paths = [str(p) for p in collect_graphs([str(graphs)])]
    tasks = [Task(p, "k80x2", placer, budget=20) for p in paths for placer in ("single", "annealing")]
    before = evaluate(tasks, tmp_path)
    assert len(before) == 4

    def interrupt(row):
        raise KeyboardInterrupt

    monkeypatch.setattr(PLACERS.resolve("annealing"), "revision", "next")
    with pytest.raises(KeyboardInterrupt):
        evaluate(tasks, tmp_path, progress=interrupt)  # stopped after the first new row is saved
    saved = _read_rows(tmp_path / "results.csv")
    old = {r.key for r in before}
    annealing = sorted(r.key in old for r in saved if r.placer == "annealing")
    assert len(saved) == 4 and annealing == [False, True]  # one row a slot: the old one where the new has not run
    after = evaluate(tasks, tmp_path)  # (single's rows stand)
    saved = _read_rows(tmp_path / "results.csv")
    assert len(after) == 4 and len(saved) == 4 and [(r.placer, r.key in old) for r in saved] == [
        ("single", True), ("single", True), ("annealing", False), ("annealing", False)]


def test_a_rerun_replacing_rows_formats_each_row_once(graphs, tmp_path, monkeypatch):
    """Each row a rerun replaced rewrote results.csv from every row on file, each formatted again (asdict): a rerun
    replacing all 960 rows of single and round_robin took twice as long as the run itself. The file is the same."""
    import csv

    paths = [str(p) for p in collect_graphs([str(graphs)])]
    tasks = [Task(p, c, placer) for p in paths for c in ("k80x2", "k80x4") for placer in ("single", "round_robin")]
    evaluate(tasks, tmp_path)
    formatted = []
    real_writer = csv.writer

    class Counting:
        def __init__(self, *args, **kwargs):
            self.writer = real_writer(*args, **kwargs)

        def writerow(self, row):
            row = list(row)
            formatted.append(row)
            return self.writer.writerow(row)

        def writerows(self, rows):
            for row in rows:
                self.writerow(row)

    monkeypatch.setattr(csv, "writer", Counting)
    for placer in ("single", "round_robin"):  # new revisions: every row is replaced
        monkeypatch.setattr(PLACERS.resolve(placer), "revision", "next", raising=False)
    again = evaluate(tasks, tmp_path)
    rows = [r for r in formatted if r[0] != "graph"]  # (not the header)
    assert len(again) == len(tasks) == 8 and len(rows) <= 2 * len(tasks)  # the rows on file, and the new ones
    monkeypatch.setattr(csv, "writer", real_writer)
    with (tmp_path / "results.csv").open(newline="", encoding="utf-8") as handle:
        assert [r["key"] for r in csv.DictReader(handle)] == [r.key for r in again]


def test_a_graph_file_whose_name_is_not_utf8_is_evaluated_and_its_row_reused(tmp_path):
    """A file named in Latin-1 (``lat_\\xe9.gnpg``) on a UTF-8 system: writing its path in results.csv was a traceback."""
    import os

    path = os.fsdecode(os.fsencode(str(tmp_path)) + b"/lat_\xe9.gnpg")
    save_graph(mlp_training_graph(layers=2, width=512, batch=128), path)
    out = tmp_path / "out"
    first = evaluate([Task(path, "k80x2", "single")], out)
    assert first[0].error == "" and first[0].graph_path == path
    assert b"/lat_\xe9.gnpg" in (out / "results.csv").read_bytes()  # the name's own bytes
    again = []
    rows = evaluate([Task(path, "k80x2", "single")], out, progress=again.append)
    assert again == [] and rows == first  # read back as the same path: not run again
    write_markdown(summarise(rows), out / "results.md")


@pytest.mark.parametrize("name", ["results.csv", "placements"])
def test_an_output_that_is_a_link_out_of_the_folder_is_refused_and_nothing_written_through_it(graphs, tmp_path, name):
    """A shared output folder's results.csv linked to a path elsewhere had the rows written there (the file made),
    its placements folder linked to another folder had the kept placements written into that one."""
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    if name == "placements":
        elsewhere.mkdir()
    (out / name).symlink_to(elsewhere)
    task = Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")
    with pytest.raises(InvalidArgument, match=rf"{name}: is a symbolic link \(to {elsewhere}\), and evaluate writes "
                                              "its outputs in the output folder itself"):
        evaluate([task], out, keep_placements=lambda t: True)
    assert sorted(p.name for p in out.iterdir()) == [name]
    assert not elsewhere.exists() if name == "results.csv" else list(elsewhere.iterdir()) == []


def test_jobs_from_a_scripts_unguarded_top_level_are_refused_before_the_output_folder_is_made(tmp_path):
    # a spawned worker runs the script again: a traceback in each worker, then "a worker died; run again to resume"
    out = tmp_path / "out"
    script = tmp_path / "user.py"
    script.write_text("from gnplace.evaluate import Task, evaluate\n"
                      f"evaluate([Task('g.gnpg', 'k80x2', 'single')], {str(out)!r}, jobs=2)\n")
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert "InvalidArgument" in result.stderr and "if __name__ ==" in result.stderr, result.stderr[-2000:]
    assert not out.exists()


def test_unplaced_names_the_pairs_no_row_fits_and_why(tmp_path):
    from gnplace.evaluate import unplaced

    graph = save_graph(chain_graph(6), tmp_path / "chain.gnpg")
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text("name: tiny\ndevices:\n  - {name: gpu, count: 2, kind: k80, memory: 1 B}\nlinks: {default: placeto}\n")
    rows = [run_task(Task(str(graph), c, p)) for c in ("k80x2", str(tiny)) for p in ("single", "round_robin")]
    assert [(r.cluster, r.oom) for r in rows] == [("k80x2", False)] * 2 + [("tiny", True)] * 2
    [(row, short)] = unplaced(rows)
    assert row is rows[2] and short is None  # no parameters: a placement might fit, and every one tried is over
    assert unplaced(rows[:2]) == []
    failed = dataclasses.replace(rows[3], error="boom", oom=None, step_time_s=math.nan)
    assert unplaced([rows[2], failed]) == [(rows[2], None)]  # a failed run fits nothing
    assert unplaced([failed]) == []  # no run timed: a failed run, counted as such
    mlp = save_graph(mlp_training_graph(), tmp_path / "mlp.gnpg")  # its parameters alone are over 2 B
    [(row, short)] = unplaced([run_task(Task(str(mlp), str(tiny), "single"))])
    assert short is not None and "hold 2 B in all" in short


def test_a_row_the_disk_has_no_room_for_names_the_file_and_leaves_no_half_line(graphs, tmp_path, monkeypatch,
                                                                                disk_fills_in):
    import errno

    tasks = [Task(str(g), "k80x2", p) for g in collect_graphs([str(graphs)]) for p in ("single", "round_robin")]
    out = tmp_path / "out"
    evaluate(tasks[:1], out)
    before = (out / "results.csv").read_bytes()
    disk_fills_in(out / "results.csv")
    with pytest.raises(OSError) as caught:
        evaluate(tasks, out)
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(out / "results.csv"))
    assert (out / "results.csv").read_bytes() == before  # the half row taken back
    monkeypatch.undo()
    seen = []
    assert len(evaluate(tasks, out, progress=seen.append)) == 4 and len(seen) == 3


def test_step_over_single_leaves_out_graphs_the_single_device_cannot_hold(tmp_path):
    """On tight4 the 1.1 GiB example overflows one device: heft's step / single device was averaged over that
    device's step too, while the single line itself left it out (1.000 over the other graph)."""
    examples = Path(__file__).resolve().parents[1] / "datasets" / "examples"
    tasks = [Task(str(examples / name), "tight4", placer) for name in ("mlp1x8w6144b256.gnpg", "mlp2x8w2048b512.gnpg")
             for placer in ("single", "heft")]
    rows = evaluate(tasks, tmp_path)
    over = {r.graph: r.single_oom for r in rows}
    assert over == {"mlp1x8w6144b256": True, "mlp2x8w2048b512": False}  # the case this test is about
    fits = next(r for r in rows if r.placer == "heft" and r.graph == "mlp2x8w2048b512")
    by = {s["placer"]: s for s in summarise(rows)}
    assert by["heft"]["vs_single"] == pytest.approx(fits.step_time_s / fits.single_s)
    assert by["single"]["vs_single"] == pytest.approx(1.0) and by["single"]["oom"] == 1
    # read back from results.csv
    assert {r.graph: r.single_oom for r in evaluate(tasks, tmp_path)} == over


@pytest.mark.parametrize("column", ["absent", "empty"])
def test_rows_saved_before_single_oom_was_kept_get_it_when_resumed(tmp_path, column):
    """A file written before the column (none, or left empty) was resumed with single_oom None on every row: heft's
    step / single device on tight4 averaged in the graph one device cannot hold (0.680 where a fresh run says 0.506)."""
    examples = Path(__file__).resolve().parents[1] / "datasets" / "examples"
    tasks = [Task(str(examples / name), "tight4", placer) for name in ("mlp1x8w6144b256.gnpg", "mlp2x8w2048b512.gnpg")
             for placer in ("single", "heft")]
    rows = evaluate(tasks, tmp_path)
    fresh = (tmp_path / "results.csv").read_bytes()
    with (tmp_path / "results.csv").open(newline="") as handle:
        old = [{k: v for k, v in line.items() if k != "single_oom"} for line in csv.DictReader(handle)]
    if column == "empty":
        old = [{**line, "single_oom": ""} for line in old]
    with (tmp_path / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(old[0]))
        writer.writeheader()
        writer.writerows(old)
    reused = []
    again = evaluate(tasks, tmp_path, progress=reused.append)
    assert reused == []  # nothing ran again
    assert {r.graph: r.single_oom for r in again} == {"mlp1x8w6144b256": True, "mlp2x8w2048b512": False}
    assert summarise(again) == summarise(rows)
    assert (tmp_path / "results.csv").read_bytes() == fresh  # the file as a fresh run writes it


def test_tasks_that_are_no_tasks_are_one_clear_error(graphs, tmp_path):
    """A dict for a task, or an OpGraph or Cluster in a task, was an AttributeError or os.stat's TypeError."""
    from gnplace.cluster import load_cluster

    graph_file = str(graphs / "mlp2.gnpg")
    with pytest.raises(InvalidArgument, match=r"^evaluate's tasks must each be a Task .*got \{'graph': 'g'\}$"):
        evaluate([{"graph": "g"}], tmp_path / "out")
    with pytest.raises(InvalidArgument, match=r"^evaluate's tasks are an iterable of Task, got 'heft'$"):
        evaluate("heft", tmp_path / "out")
    with pytest.raises(InvalidArgument, match=r"^a task's graph file is given by its path .*got OpGraph 'chain3' \(save it with gnplace.save_graph"):
        Task(chain_graph(3), "k80x2", "heft")
    with pytest.raises(InvalidArgument, match=r"^a task's cluster \(a preset's name or a cluster file\) is given .*got Cluster 'k80x2' \(give"):
        Task.with_options(graph_file, load_cluster("k80x2"), "heft")
    assert not (tmp_path / "out").exists()


def test_of_two_rows_saved_for_one_task_the_later_stands(graphs, tmp_path):
    """Two runs into one folder both appended a row of one key: the one written last is the one kept and counted."""
    tasks = [Task(str(graphs / "mlp2.gnpg"), "k80x2", p) for p in ("single", "heft")]
    evaluate(tasks, tmp_path / "out")
    csv_path = tmp_path / "out" / "results.csv"
    with csv_path.open(newline="") as f:
        header, *lines = list(csv.reader(f))
    later = dict(zip(header, lines[-1]))
    assert later["placer"] == "heft"
    later["place_seconds"] = "123.0"
    with csv_path.open("a", newline="") as f:
        csv.writer(f).writerow([later[name] for name in header])
    rows = evaluate(tasks, tmp_path / "out")
    assert [r.place_seconds for r in rows if r.placer == "heft"] == [123.0]


def test_a_rows_peak_memory_is_that_of_its_fullest_device(graphs):
    from gnplace.cluster import load_cluster
    from gnplace.placers import make_placer
    from gnplace.sim.simulator import Simulator

    row = run_task(Task(str(graphs / "mlp2.gnpg"), "k80x2", "single"))  # device 1 holds nothing
    g, c = load_graph(graphs / "mlp2.gnpg"), load_cluster("k80x2")
    peak = Simulator().time(g, c, make_placer("single").place(g, c)).peak_memory
    assert peak.min() < peak.max() and row.peak_memory_bytes == peak.max()


def test_a_row_saved_before_single_oom_whose_single_step_changed_keeps_none(graphs, tmp_path):
    """``single_oom`` is filled in only where the single-device step the row was compared with is the one timed now."""
    tasks = [Task(str(graphs / "mlp2.gnpg"), "k80x2", "heft")]
    evaluate(tasks, tmp_path)
    with (tmp_path / "results.csv").open(newline="") as handle:
        old = [{**line, "single_oom": "", "single_s": "9.0"} for line in csv.DictReader(handle)]
    with (tmp_path / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(old[0]))
        writer.writeheader()
        writer.writerows(old)
    ran = []
    (row,) = evaluate(tasks, tmp_path, progress=ran.append)
    assert ran == [] and row.single_s == 9.0 and row.single_oom is None


def test_a_rerun_keeps_the_last_saved_row_of_its_slot_until_its_new_row_replaces_it(graphs, tmp_path, monkeypatch):
    """Of two saved rows of a slot whose keys no task asks for (stale inputs), the last stays while the slot runs."""
    import gnplace.evaluate as evaluation

    path = str(graphs / "mlp2.gnpg")
    task = Task.with_options(path, "k80x2", "heft", {"min_speed": 0.2})
    (saved,) = evaluate([task], tmp_path)
    lines = (tmp_path / "results.csv").read_text().splitlines()
    stale = [lines[1].replace(saved.key, digit * 64) for digit in "01"]  # two runs of inputs since changed
    (tmp_path / "results.csv").write_text("\n".join([lines[0], *stale]) + "\n")
    during = []
    run = evaluation._run_keyed

    def reading(item, added=None):
        with (tmp_path / "results.csv").open(newline="") as handle:
            during.append([line["key"][0] for line in csv.DictReader(handle)])
        return run(item, added)

    monkeypatch.setattr(evaluation, "_run_keyed", reading)
    (row,) = evaluate([task], tmp_path)
    assert during == [["1"]] and row.key == saved.key


def test_a_row_saved_with_a_relative_checkpoint_path_fills_its_tasks_slot(tmp_path, monkeypatch):
    """Rows saved before option files were kept by real path name them as given (``my.ckpt``): once rows of other
    options were kept beside a task's, such a row stood beside the new row of the same checkpoint, two lines of it."""
    from gnplace.evaluate import _row_slot, _task_slot

    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.ckpt").write_bytes(b"weights")
    task = Task.with_options("g.gnpg", "k80x2", "policy", {"checkpoint": "my.ckpt"})
    saved = Row(graph="g", family="", graph_path="g.gnpg", ops=1, groups=1, cluster="k80x2", placer="policy", seed=0,
                step_time_s=1.0, bound_s=1.0, single_s=1.0, peak_memory_bytes=0.0, oom=False, place_seconds=0.0,
                options='{"checkpoint": "my.ckpt"}', cluster_spec="k80x2")
    assert _row_slot(saved) == _task_slot(task)
    other = dataclasses.replace(saved, options='{"checkpoint": "b.ckpt"}')  # another file (here, none): another slot
    assert _row_slot(other) != _task_slot(task)


def test_an_option_naming_files_is_kept_by_their_real_paths(tmp_path, monkeypatch):
    """``my.ckpt`` and ``./my.ckpt`` are one setting; several files, comma-separated or listed, each by its real path;
    a value naming no file, or naming files and a setting, stays as given, as does an option that names no file."""
    monkeypatch.chdir(tmp_path)
    for name in ("my.ckpt", "b.ckpt"):
        (tmp_path / name).write_bytes(b"weights")
    real = os.path.realpath(tmp_path)

    def kept(**options):
        return Task.with_options("g.gnpg", "k80x2", "policy", options).options_dict

    assert kept(checkpoint="my.ckpt") == kept(checkpoint="./my.ckpt") == {"checkpoint": f"{real}/my.ckpt"}
    assert kept(constructor="my.ckpt, b.ckpt") == {"constructor": f"{real}/my.ckpt,{real}/b.ckpt"}
    assert kept(constructor="my.ckpt,none") == {"constructor": "my.ckpt,none"}
    assert kept(constructor=["my.ckpt", "none"]) == {"constructor": [f"{real}/my.ckpt", "none"]}
    assert kept(start="my.ckpt") == {"start": "my.ckpt"}


def test_an_option_naming_a_file_beside_a_setting_is_keyed_by_that_files_content(graphs, tmp_path, monkeypatch):
    """``constructor=x.ckpt,none``: x.ckpt's content is part of the key, though ``none`` names no file."""
    import hashlib

    from gnplace.evaluate import value_identity

    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.ckpt").write_bytes(b"one")
    assert value_identity("x.ckpt,none") == {"files": [{"file": "x.ckpt", "sha256": hashlib.sha256(b"one").hexdigest()},
                                                       "none"]}
    task = Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", "policy", dict(constructor="x.ckpt,none"))
    first = task_key(task)
    (tmp_path / "x.ckpt").write_bytes(b"two")
    assert task_key(task) != first


def test_the_default_checkpoint_is_not_in_the_key_of_a_task_that_names_its_own(graphs, tmp_path, monkeypatch):
    """New shipped weights leave the rows of a checkpoint given by hand as they are: that placer never read them."""
    from gnplace.rl.zeroshot import PolicyPlacer

    shipped, own = tmp_path / "shipped.ckpt", tmp_path / "own.ckpt"
    shipped.write_bytes(b"old weights")
    own.write_bytes(b"my weights")
    monkeypatch.setattr(PolicyPlacer, "default_checkpoint", shipped)
    task = Task.with_options(str(graphs / "mlp2.gnpg"), "k80x2", "policy", dict(checkpoint=str(own)))
    first = task_key(task)
    shipped.write_bytes(b"new weights")
    assert task_key(task) == first


@pytest.mark.parametrize(("raised", "error"), [
    (RuntimeError(), "RuntimeError"),  # no message: its kind, once
    (RuntimeError("  \n "), "RuntimeError"),  # a blank one too
    (GnplaceError("bad input"), "bad input"),  # gnplace's own: its message alone
    (ValueError("x" * 988), "ValueError: " + "x" * 988),  # 1000 characters: whole
    (ValueError("x" * 989), "ValueError: " + "x" * 987 + "…"),  # 1001: cut to 1000, the last an ellipsis
])
def test_a_failed_rows_error_names_the_crash_once_and_within_1000_characters(graphs, monkeypatch, raised, error):
    from gnplace.placers.heft import HeftPlacer

    def crash(self, graph, cluster, *, seed=None):
        raise raised

    monkeypatch.setattr(HeftPlacer, "place", crash)
    row = run_task(Task(str(graphs / "mlp2.gnpg"), "k80x2", "heft"))
    assert row.error == error and len(row.error) <= 1000


def _append_saved_row(out, **changes):
    """Append to ``out/results.csv`` a copy of its first row with ``changes``."""
    with (out / "results.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        rows, names = list(reader), reader.fieldnames
    with (out / "results.csv").open("a", newline="") as handle:
        csv.DictWriter(handle, fieldnames=names).writerow({**rows[0], **changes})


def test_a_saved_row_without_a_key_is_dropped_even_where_its_graph_is_gone(graphs, tmp_path):
    """A row written before keys existed runs again; one whose graph file is gone cannot, and is not kept either."""
    task, out = Task(str(graphs / "mlp2.gnpg"), "k80x2", "single"), tmp_path / "out"
    evaluate([task], out)
    _append_saved_row(out, key="", placer="heft", graph_path=str(tmp_path / "gone.gnpg"))
    assert [(r.placer, Path(r.graph_path).name) for r in evaluate([task], out)] == [("single", "mlp2.gnpg")]


def test_a_saved_row_of_a_step_of_no_work_is_reused(graphs, tmp_path):
    """0 s is a time a run writes (a bound of no work): its row is not taken for a damaged one and run again."""
    task, out = Task(str(graphs / "mlp2.gnpg"), "k80x2", "single"), tmp_path / "out"
    evaluate([task], out)
    _set_in_the_first_saved_row(out, "bound_s", "0.0")
    ran = []
    (row,) = evaluate([task], out, progress=ran.append)
    assert ran == [] and row.bound_s == 0.0


def test_reused_counts_the_tasks_asked_for_not_the_other_rows_kept(graphs, tmp_path):
    path, out = str(graphs / "mlp2.gnpg"), tmp_path / "out"
    evaluate([Task(path, "k80x2", p) for p in ("single", "heft")], out)
    reused = []
    rows = evaluate([Task(path, "k80x2", "single")], out, reused=reused.append)
    assert reused == [1] and sorted(r.placer for r in rows) == ["heft", "single"]  # heft's row kept, not reused


def test_a_graph_over_memory_in_one_mode_and_placed_in_another_is_unplaced_in_the_first():
    """Pairs are (graph, cluster, mode): a placement in placeto's mode does not place the default mode's graph."""
    from gnplace.evaluate import unplaced

    over = row("/no/such/g.gnpg", "single", 1.0, oom=True)
    fits = dataclasses.replace(row("/no/such/g.gnpg", "heft", 1.0), mode="placeto")
    assert unplaced([over, fits]) == [(over, None)]  # (its graph file gone: no shortfall to tell)


def test_a_kept_placement_whose_placement_is_no_mapping_runs_its_row_again(graphs, tmp_path):
    from gnplace.evaluate import kept_placement
    from gnplace.placement import FORMAT

    tasks = [Task(str(graphs / "mlp3.gnpg"), "k80x2", p) for p in ("single", "round_robin")]
    keep = lambda task: True  # noqa: E731
    by = {r.placer: r for r in evaluate(tasks, tmp_path, keep_placements=keep)}
    file = kept_placement(tmp_path, by["round_robin"].key)
    file.write_text(json.dumps({"format": FORMAT, "placement": [0, 1]}))
    ran = []
    evaluate(tasks, tmp_path, keep_placements=keep, progress=ran.append)
    assert [r.placer for r in ran] == ["round_robin"]
    assert isinstance(json.loads(file.read_text())["placement"], dict)  # written anew


def test_a_saved_row_whose_graph_file_is_gone_stands(graphs, tmp_path):
    """It cannot be checked (nor run again): it stays, as every saved row did before rows were checked."""
    import shutil

    shutil.copy(graphs / "mlp2.gnpg", tmp_path / "copy.gnpg")
    tasks = [Task(str(graphs / "mlp2.gnpg"), "k80x2", "single"), Task(str(tmp_path / "copy.gnpg"), "k80x2", "single")]
    evaluate(tasks, tmp_path / "out")
    (tmp_path / "copy.gnpg").unlink()
    rows = evaluate(tasks[:1], tmp_path / "out")
    assert sorted(Path(r.graph_path).name for r in rows) == ["copy.gnpg", "mlp2.gnpg"]


def test_a_folder_named_like_a_preset_leaves_the_preset_its_name(graphs, tmp_path, monkeypatch):
    """``k80x2`` is the preset, whatever folder of that name the run starts in: rows keep it by name."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k80x2").mkdir()
    assert run_task(Task(str(graphs / "mlp2.gnpg"), "k80x2", "single")).cluster_spec == "k80x2"


def test_a_saved_row_of_an_empty_options_cell_reads_as_one_of_no_options(graphs, tmp_path):
    """The cell was read as no options for the key, but kept empty: the row's task() and the summary failed on it
    with a JSONDecodeError traceback, the evaluation of another placer too."""
    path, out = str(graphs / "mlp2.gnpg"), tmp_path / "out"
    tasks = [Task(path, "k80x2", p) for p in ("single", "heft")]
    evaluate(tasks, out)
    _set_in_the_first_saved_row(out, "options", "")
    rows = evaluate(tasks[1:], out)  # single's row, of another slot, is checked against its inputs: it stands
    assert sorted((r.placer, r.options) for r in rows) == [("heft", "{}"), ("single", "{}")]
    _set_in_the_first_saved_row(out, "options", "")
    ran = []
    rows = evaluate(tasks, out, progress=ran.append)
    assert ran == [] and [r.options for r in rows] == ["{}", "{}"] and len(summarise(rows)) == 2


def test_a_saved_row_whose_checkpoint_is_gone_stands_and_one_whose_checkpoint_changed_is_dropped(graphs, tmp_path):
    """A row naming a checkpoint by its absolute path since deleted was dropped by the next run of another placer: it
    cannot be checked, and stands, as a row whose graph file is gone does (a relative path of another folder did)."""
    ckpt = tmp_path / "weights.ckpt"
    ckpt.write_bytes(b"weights")
    task, out = Task(str(graphs / "mlp2.gnpg"), "k80x2", "single"), tmp_path / "out"
    evaluate([task], out)
    policy = Task.with_options(task.graph_path, "k80x2", "policy", dict(checkpoint=str(ckpt)))
    _append_saved_row(out, placer="policy", learned="True", options=json.dumps(policy.options_dict),
                      key=task_key(policy))
    assert sorted(r.placer for r in evaluate([task], out)) == ["policy", "single"]  # its key checked: it stands
    ckpt.unlink()
    assert sorted(r.placer for r in evaluate([task], out)) == ["policy", "single"]  # not to be checked: it stands
    ckpt.write_bytes(b"other weights")
    assert [r.placer for r in evaluate([task], out)] == ["single"]  # timed with weights no longer there: dropped


def test_a_placer_that_spends_no_budget_records_none(graphs, tmp_path):
    """heft run beside annealing with a budget had a row of that budget, which it never spent (nor keyed)."""
    path = str(graphs / "mlp2.gnpg")
    rows = evaluate([Task(path, "k80x2", "heft", budget=5), Task(path, "k80x2", "annealing", budget=5)], tmp_path)
    assert [(r.placer, r.budget) for r in rows] == [("heft", None), ("annealing", 5)]
    saved = {r["placer"]: r["budget"] for r in csv.DictReader((tmp_path / "results.csv").open())}
    assert saved == {"heft": "", "annealing": "5"}


def test_a_saved_row_of_a_placer_that_spends_no_budget_loses_the_budget_written(graphs, tmp_path):
    """A file written before such rows recorded none kept heft's ``--budget`` in every rerun that reused the row."""
    path = str(graphs / "mlp2.gnpg")
    evaluate([Task(path, "k80x2", "heft")], tmp_path)
    results = tmp_path / "results.csv"
    saved = list(csv.DictReader(results.open()))
    saved[0]["budget"] = "20"  # as such a run wrote it (the key leaves heft's budget out)
    with results.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(saved[0]))
        writer.writeheader()
        writer.writerows(saved)
    reran = []
    rows = evaluate([Task(path, "k80x2", "heft")], tmp_path, progress=reran.append)
    assert not reran and rows[0].budget is None  # reused, without the budget it never spent
    assert next(csv.DictReader(results.open()))["budget"] == ""
