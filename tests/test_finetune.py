import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from gnplace.cluster import cluster_from_dict, load_cluster
from gnplace.exceptions import InvalidArgument, InvalidCheckpoint
from gnplace.finetune import finetune
from gnplace.graph_io import save_graph
from gnplace.toy import mlp_training_graph

TINY = "gnplace.execute.examples:tiny"


@pytest.fixture
def tight_k80s(tmp_path):
    """An MLP's graph, its file, and a cluster file of two k80s that each hold 90% of its one-device step."""
    from gnplace.placers import get_placer
    from gnplace.sim.simulator import Simulator

    graph = mlp_training_graph(layers=3, width=512, batch=64)
    path = save_graph(graph, tmp_path / "g.gnpg")
    single = Simulator().time(graph, load_cluster("k80x2"), get_placer("single").place(graph, load_cluster("k80x2")))
    memory = int(single.peak_memory.max() * 0.9)  # one device cannot hold the step, two can
    cluster = tmp_path / "small.yaml"
    cluster.write_text(f"devices: [{{name: gpu, count: 2, kind: k80, memory: {memory}}}]\nlinks: {{default: pcie3}}\n")
    return graph, path, cluster


def searched_on_one_device(monkeypatch):
    """Fine-tuning's search returns all on one device, in one evaluation."""
    from gnplace.placers import get_placer
    from gnplace.rl.search import FineTunePlacer

    def on_one(self, graph, cluster, *, seed=None):
        self.last_evaluations, self.last_zero_shot_step, self.last_history = 1, None, [(1, 0.0)]
        return get_placer("single").place(graph, cluster, seed=seed)

    monkeypatch.setattr(FineTunePlacer, "place", on_one)


def test_finetune_with_the_simulator_writes_the_best_placement_and_resumes(tmp_path):
    path = save_graph(mlp_training_graph(layers=3, width=256, batch=32), tmp_path / "g.gnpg")
    out = tmp_path / "run"
    summary = finetune(str(path), "k80x2", budget=80, samples=8, epochs=1, out=out, progress=False)
    assert summary is not None and summary["evaluations"] <= 80
    assert summary["step_time_s"] <= summary["auto_s"] * (1 + 1e-9)  # never worse than the reference...
    assert summary["zero_shot_s"] is not None  # ...nor than the checkpoint's zero-shot placement it started from
    assert summary["step_time_s"] <= summary["zero_shot_s"] * (1 + 1e-9)
    assert (out / "placement.json").exists() and (out / "last.ckpt").exists()
    assert json.loads((out / "summary.json").read_text())["timer"] == "sim"
    placed = json.loads((out / "placement.json").read_text())  # it recorded no placer and no prediction
    assert placed["placer"].startswith("finetune") and placed["predicted"] == {
        "step_time_s": summary["step_time_s"], "oom": False, "timer": "sim"}
    logged = _logged_iterations(out)
    assert logged == list(range(len(logged))) and logged  # one session, from the start
    for _ in range(2):  # resuming a finished run trains nothing more, and saves its state again whole
        again = finetune(str(path), "k80x2", budget=80, samples=8, epochs=1, out=out, resume=True, progress=False)
        assert again is not None and again["step_time_s"] == pytest.approx(summary["step_time_s"])
        assert again["evaluations"] == summary["evaluations"]
        assert _logged_iterations(out) == logged


def test_a_search_best_that_measures_slower_afresh_is_not_returned(tmp_path, monkeypatch):
    """Real timers keep the least of noisy measurements; re-measured beside auto's and single's, it may lose."""
    from gnplace.cluster import load_cluster
    from gnplace.placement import load_placement
    from gnplace.placers import get_placer
    from gnplace.rl.search import FineTunePlacer

    graph = mlp_training_graph(layers=3, width=256, batch=32)
    path = save_graph(graph, tmp_path / "g.gnpg")

    def lucky_noise(self, graph, cluster, *, seed=None):  # a placement that only a lucky measurement favoured
        self.last_evaluations, self.last_zero_shot_step, self.last_history = 1, None, [(1, 0.0)]
        return get_placer("round_robin").place(graph, cluster, seed=seed)

    monkeypatch.setattr(FineTunePlacer, "place", lucky_noise)
    summary = finetune(str(path), "k80x2", budget=8, out=tmp_path / "run", progress=False)
    assert summary is not None and summary["search_step_s"] > summary["auto_s"]
    assert summary["chosen"] in ("auto", "single")
    assert summary["step_time_s"] == min(summary["auto_s"], summary["single_s"])
    cluster = load_cluster("k80x2")
    kept = get_placer(summary["chosen"]).place(graph, cluster, seed=0)
    assert (load_placement(tmp_path / "run" / "placement.json", graph, cluster).devices == kept.devices).all()
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["chosen"] == summary["chosen"]


def test_the_zero_shot_placement_is_reported_as_measured_afresh_not_as_the_search_drew_it(tmp_path, monkeypatch):
    """On real steps the search's timing of the zero-shot placement is one (possibly lucky) draw."""
    from gnplace.placers import get_placer
    from gnplace.rl.search import FineTunePlacer

    path = save_graph(mlp_training_graph(layers=3, width=256, batch=32), tmp_path / "g.gnpg")

    def lucky_zero_shot(self, graph, cluster, *, seed=None):
        self.last_evaluations, self.last_history = 1, [(1, 0.0)]
        self.last_zero_shot_step = 1e-9  # a measurement no later one repeats
        self.last_zero_shot_placement = get_placer("round_robin").place(graph, cluster, seed=seed).devices
        return get_placer("auto").place(graph, cluster, seed=seed)

    monkeypatch.setattr(FineTunePlacer, "place", lucky_zero_shot)
    summary = finetune(str(path), "k80x2", budget=8, out=tmp_path / "run", progress=False)
    assert summary is not None and summary["zero_shot_s"] == summary["round_robin_s"] > 1e-6


def _logged_iterations(out):
    """The iterations every session of a fine-tuning run logged (Lightning's CSV logs), in order."""
    import csv

    steps = []
    for metrics in sorted((out / "logs").glob("version_*/metrics.csv"), key=lambda m: int(m.parent.name[8:])):
        with metrics.open(newline="") as handle:
            steps += [int(r["step"]) for r in csv.DictReader(handle)]
    return steps


@pytest.mark.parametrize("timer", ["local", "dist"])
def test_finetune_on_real_steps(tmp_path, timer, cpu_ranks):
    summary = finetune(TINY, "k80x2" if timer == "local" else cpu_ranks(2), timer=timer, budget=12, samples=4, epochs=1, repeats=1, out=tmp_path,
                       devices=["cpu", "cpu"] if timer == "local" else None, progress=False)
    assert summary is not None and summary["timer"] == timer
    assert summary["step_time_s"] > 0 and np.isfinite(summary["single_s"])
    assert summary["evaluations"] <= 12
    from gnplace.finetune import CONFIRM, JOURNAL

    header = json.loads((tmp_path / JOURNAL).read_text().splitlines()[0])  # the search confirmed its new fastest ones
    assert header["identity"]["settings"]["confirm"] == CONFIRM > 0 and header["identity"]["timer"] == timer
    journaled = len((tmp_path / JOURNAL).read_text().splitlines()) - 1
    assert summary["measured_steps"] >= journaled + 3 * 2  # and the race: 3 rounds of at least the search's two


def test_the_local_timer_times_every_step_on_the_threads_given(tmp_path, monkeypatch):
    """The search's PPO sets torch to one thread, and its steps were timed so; the rest of the run on all the cores."""
    import gnplace.execute.local

    threads, run_step = [], gnplace.execute.local.run_step

    def counted(*args, **kwargs):
        threads.append(torch.get_num_threads())
        return run_step(*args, **kwargs)

    monkeypatch.setattr(gnplace.execute.local, "run_step", counted)
    finetune(TINY, "k80x2", timer="local", budget=12, samples=4, epochs=1, repeats=1, out=tmp_path,
             devices=["cpu", "cpu"], threads=2, progress=False)
    assert len(threads) > 12 and set(threads) == {2}


def test_bad_inputs_are_one_clear_error(tmp_path):
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    with pytest.raises(InvalidArgument, match="MODULE:FACTORY"):
        finetune(str(path), "k80x2", timer="local", out=tmp_path)
    with pytest.raises(InvalidArgument, match="unknown timer"):
        finetune(str(path), "k80x2", timer="gpu", out=tmp_path)
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(InvalidCheckpoint):
        finetune(str(path), "k80x2", checkpoint=str(bad), out=tmp_path)


def test_a_source_that_is_no_file_or_reference_is_one_clear_error(tmp_path):
    """An ``OpGraph`` in hand (or None) as ``source`` was a ``TypeError`` from pathlib, deep inside."""
    graph = mlp_training_graph(layers=2, width=64, batch=8)
    with pytest.raises(InvalidArgument, match=r"^a finetune source \(a graph file, .*got OpGraph 'mlp.*' "
                                              r"\(save it with gnplace.save_graph and give the file\)$"):
        finetune(graph, "k80x2", out=tmp_path / "run", progress=False)
    with pytest.raises(InvalidArgument, match="got None$"):
        finetune(None, "k80x2", out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished fine-tuning run of a tiny graph on k80x2, and the bytes of each file it wrote."""
    root = tmp_path_factory.mktemp("finished")
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), root / "a.gnpg")
    out = root / "run"
    finetune(str(path), "k80x2", budget=40, samples=4, epochs=1, out=out, progress=False)
    saved = {name: (out / name).read_bytes() for name in ("last.ckpt", "placement.json", "summary.json")}
    return path, out, saved


def _unchanged(out, saved):
    for name, data in saved.items():
        assert (out / name).read_bytes() == data, f"{name} was overwritten"


def test_resume_into_another_graphs_or_clusters_run_is_refused_and_keeps_it(finished_run, tmp_path):
    path, out, saved = finished_run
    other = save_graph(mlp_training_graph(layers=3, width=64, batch=8), tmp_path / "b.gnpg")
    with pytest.raises(InvalidCheckpoint, match="run of another graph.*use another -o"):
        finetune(str(other), "k80x2", budget=40, samples=4, epochs=1, out=out, resume=True, progress=False)
    _unchanged(out, saved)
    with pytest.raises(InvalidCheckpoint, match=r"run of another cluster \(k80x2; here k80x4\)"):
        finetune(str(path), "k80x4", budget=40, samples=4, epochs=1, out=out, resume=True, progress=False)
    _unchanged(out, saved)
    for other_settings, name in ((dict(seed=5), "seed"), (dict(budget=60), "budget"), (dict(lr=1e-2), "lr"),
                                 (dict(zero_shot=False), "zero_shot")):
        arguments = {"budget": 40, "samples": 4, "epochs": 1, **other_settings}
        with pytest.raises(InvalidCheckpoint, match=rf"run of other settings \({name}\)"):
            finetune(str(path), "k80x2", out=out, resume=True, progress=False, **arguments)
        _unchanged(out, saved)
    # fine-tuning another policy (here the run's own fine-tuned one) is another run too
    with pytest.raises(InvalidCheckpoint, match="another policy checkpoint to start from"):
        finetune(str(path), "k80x2", checkpoint=str(out / "last.ckpt"), budget=40, samples=4, epochs=1, out=out,
                 resume=True, progress=False)
    _unchanged(out, saved)


@pytest.mark.parametrize("kind", ["truncated", "foreign", "unrecorded", "directory", "no_pairs", "loops", "loop_count",
                                  "loop_text", "epochs", "version", "callbacks"])
def test_resume_from_a_bad_last_checkpoint_is_refused_and_keeps_it(finished_run, tmp_path, kind):
    path, finished, saved = finished_run
    out = tmp_path / "run"
    out.mkdir()
    for name in ("placement.json", "summary.json"):
        (out / name).write_bytes(saved[name])
    last = out / "last.ckpt"
    if kind == "truncated":
        last.write_bytes(saved["last.ckpt"][: len(saved["last.ckpt"]) // 2])
    elif kind == "foreign":  # the shipped policy checkpoint copied there: a torch file, but no Lightning run
        last.write_bytes((Path(__file__).parents[1] / "checkpoints" / "gnplace-base.ckpt").read_bytes())
    elif kind == "unrecorded":  # a Lightning run that does not say what it placed (pretraining's, an older one)
        import torch

        from gnplace.rl.search import RUN_KEY

        data = torch.load(finished / "last.ckpt", weights_only=True)
        del data[RUN_KEY]
        torch.save(data, last)
    elif kind != "directory":  # a section Lightning restores (or the run's own) damaged
        import torch

        data = torch.load(finished / "last.ckpt", weights_only=True)
        fit_loop = data["loops"]["fit_loop"]
        if kind == "no_pairs":  # resumed with no best placement and evaluations: the budget spent anew
            del data["PlacementDataModule"]
        elif kind == "loops":
            data["loops"] = {}  # a KeyError traceback from Lightning
        elif kind == "loop_count":  # each a traceback from Lightning in fit: a KeyError 'total'
            del fit_loop["epoch_progress"]["total"]
        elif kind == "loop_text":  # a TypeError at the next step (a count as text)
            fit_loop["epoch_loop.batch_progress"]["current"]["ready"] = "28"
        elif kind == "epochs":  # a MisconfigurationException (the search runs one epoch)
            fit_loop["epoch_progress"]["current"]["completed"] = 50
        elif kind == "version":  # packaging's InvalidVersion
            data["pytorch-lightning_version"] = 3
        else:  # an AttributeError ('list' object has no attribute 'keys')
            data["callbacks"] = [1]
        torch.save(data, last)
    else:
        last.mkdir()
    before = None if kind == "directory" else last.read_bytes()
    message = {"truncated": "not a readable checkpoint", "foreign": "not a fine-tuning run's checkpoint",
               "unrecorded": "records no graph or cluster", "directory": "not a checkpoint file",
               "no_pairs": "pairs. state .PlacementDataModule. is missing or damaged",
               "loops": "loops.fit_loop. is missing or damaged",
               "loop_count": r"loops.fit_loop, epoch_progress\) is missing or damaged",
               "loop_text": r"loops.fit_loop, epoch_loop.batch_progress\) is missing or damaged",
               "epochs": r"loops.fit_loop: 50 epochs done, the run has 1\)",
               "version": r"Lightning version \(pytorch-lightning_version\) is missing or damaged",
               "callbacks": "callbacks' state is missing or damaged"}[kind]
    with pytest.raises(InvalidCheckpoint, match=message):
        finetune(str(path), "k80x2", budget=40, samples=4, epochs=1, out=out, resume=True, progress=False)
    assert last.is_dir() if before is None else last.read_bytes() == before
    _unchanged(out, {k: v for k, v in saved.items() if k != "last.ckpt"})
    assert not (out / "logs").exists()  # refused before Lightning started


@pytest.mark.parametrize("bad, message", [
    (dict(lr=float("inf")), "lr must be a finite number"),
    (dict(checkpoint_every_s=-1.0), "checkpoint_every_s must be a number of seconds > 0"),
    (dict(checkpoint_every_s=float("nan")), "checkpoint_every_s"),
    (dict(repeats=0), "repeats must be a whole number >= 1"),
    (dict(threads=0), "threads must be a whole number >= 1"),
    (dict(repeats=True), "repeats must be a whole number >= 1, got True"),
    # read by their truth: resume="no" resumed, progress="no" showed the bar; out=None was pathlib's TypeError
    (dict(resume="no"), r"^finetune: resume must be true or false, got 'no'$"),
    (dict(zero_shot="no"), r"^finetune: zero_shot must be true or false, got 'no'$"),
    (dict(progress="no"), r"^finetune: progress must be true or false, got 'no'$"),
    (dict(out=None), r"^a finetune output folder is given by its path \(str or os\.PathLike\), got None$"),
])
def test_settings_out_of_range_are_refused_before_any_work(tmp_path, bad, message):
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    settings = {"out": tmp_path / "run", "progress": False, **bad}
    with pytest.raises(InvalidArgument, match=message):
        finetune(str(path), "k80x2", budget=20, **settings)
    assert not (tmp_path / "run" / "last.ckpt").exists()


def test_a_bad_step_size_or_devices_for_another_timer_is_refused_before_anything_runs(tmp_path):
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    with pytest.raises(InvalidArgument, match="need lr > 0, got -1.0"):
        finetune(str(path), "k80x2", lr=-1.0, out=tmp_path / "a", progress=False)
    with pytest.raises(InvalidArgument, match="the sim timer takes none"):
        finetune(str(path), "k80x2", devices=["cpu", "cpu"], out=tmp_path / "b", progress=False)
    assert not (tmp_path / "b").exists()


def test_a_run_of_an_older_gnplace_is_refused_as_unrecorded_not_as_changed(finished_run, tmp_path):
    """A setting an older gnplace did not record cannot be checked: said so, not "other settings"."""
    import shutil

    import torch

    path, out, _ = finished_run
    old = tmp_path / "old"
    shutil.copytree(out, old)
    state = torch.load(old / "last.ckpt", weights_only=True)
    del state["gnplace_run"]["settings"]["prior"]
    torch.save(state, old / "last.ckpt")
    with pytest.raises(InvalidCheckpoint, match=r"run of an older gnplace, which did not record prior, so it cannot"):
        finetune(str(path), "k80x2", budget=40, samples=4, epochs=1, out=old, resume=True, progress=False)


def test_a_run_whose_zero_shot_had_another_constructor_is_refused(finished_run, tmp_path):
    """The zero-shot candidates include the shipped constructor's: a run made with another is not continued."""
    import shutil

    import torch

    path, out, _ = finished_run
    other = tmp_path / "other"
    shutil.copytree(out, other)
    state = torch.load(other / "last.ckpt", weights_only=True)
    assert state["gnplace_run"]["settings"]["constructor"] is not None
    state["gnplace_run"]["settings"]["constructor"] = "0" * 64
    torch.save(state, other / "last.ckpt")
    with pytest.raises(InvalidCheckpoint, match=r"other settings \(constructor\)"):
        finetune(str(path), "k80x2", budget=40, samples=4, epochs=1, out=other, resume=True, progress=False)


def test_the_summary_says_which_compared_placements_run_out_of_memory(tmp_path, tight_k80s, capsys):
    from gnplace.cli import main

    graph, path, cluster = tight_k80s
    summary = finetune(str(path), str(cluster), budget=8, out=tmp_path / "run", progress=False)
    assert summary is not None and summary["single_oom"] and not summary["oom"]
    assert summary["auto_oom"] is False and summary["search_oom"] is False
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["single_oom"] is True
    assert main(["finetune", str(path), "-c", str(cluster), "--budget", "8", "-o", str(tmp_path / "cli")]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert lines["single"].endswith("(OOM)") and not lines["auto"].endswith("(OOM)")


def test_a_graph_without_ops_is_refused(tmp_path):
    from gnplace.exceptions import InvalidGraph
    from gnplace.graph import OpGraph

    path = save_graph(OpGraph([], [], name="empty"), tmp_path / "empty.gnpg")
    with pytest.raises(InvalidGraph, match="has no ops; there is nothing to place"):
        finetune(str(path), "k80x2", budget=8, out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_a_real_timers_run_resumed_with_other_measurement_settings_is_refused(tmp_path):
    # the repeats (threads, devices) shape every measurement: a resume under others would mix two kinds of them
    run = dict(timer="local", devices=["cpu", "cpu"], budget=12, samples=4, epochs=1, zero_shot=False, out=tmp_path,
               progress=False)
    finetune(TINY, "k80x2", repeats=1, **run)
    assert (tmp_path / "last.ckpt").exists()
    with pytest.raises(InvalidCheckpoint, match=r"another run.s measurements \(settings.repeats differ\)"):
        finetune(TINY, "k80x2", repeats=2, resume=True, **run)
    assert finetune(TINY, "k80x2", repeats=1, resume=True, **run) is not None


def test_a_finished_run_without_a_checkpoint_is_not_overwritten_by_a_new_one(tmp_path):
    # a budget too small for one PPO iteration writes no last.ckpt, only its results
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "a.gnpg")
    out = tmp_path / "run"
    finetune(str(path), "k80x2", budget=1, out=out, progress=False)
    assert not (out / "last.ckpt").exists()
    saved = {name: (out / name).read_bytes() for name in ("placement.json", "summary.json")}
    with pytest.raises(InvalidArgument, match=r"holds a finished run \(summary.json\): use another -o, or --resume"):
        finetune(str(path), "k80x4", budget=1, out=out, progress=False)
    _unchanged(out, saved)


def test_finetune_on_real_steps_runs_the_optimizer_given(tmp_path, monkeypatch):
    """``optimizer=`` reaches the model's import: the timer runs, and the placement holds, Adam's update ops."""
    import gnplace.execute.local

    programs = []
    real = gnplace.execute.local.LocalTimer.__init__

    def keep(self, step, *args, **kwargs):
        real(self, step, *args, **kwargs)
        programs.append(self.program)

    monkeypatch.setattr(gnplace.execute.local.LocalTimer, "__init__", keep)
    summary = finetune(TINY, "k80x2", timer="local", budget=6, samples=4, epochs=1, repeats=1, out=tmp_path,
                       devices=["cpu", "cpu"], progress=False, optimizer="adam")
    assert summary is not None and summary["step_time_s"] > 0
    assert programs and all(program.optimizer == "adam" for program in programs)


def test_a_real_timers_run_killed_in_its_polish_resumes_without_running_a_measured_step_again(tmp_path, monkeypatch):
    """The polish is not in ``last.ckpt``; the measurement journal answers what it measured before the kill."""
    import gnplace.execute.local
    from gnplace.finetune import JOURNAL
    from gnplace.placers.annealing import AnnealingPlacer
    from gnplace.sim.simulator import Simulator

    runs: list[bytes] = []
    kill_at: list[int] = []
    polish_from: list[int] = []

    def simulated(self, graph, cluster, placement):  # a real timer's path, with steps as repeatable as the simulator's
        runs.append(placement.devices.tobytes())
        if kill_at and len(runs) == kill_at[0]:
            raise KeyboardInterrupt  # a kill while this step runs: its measurement is never kept
        return Simulator().time(graph, cluster, placement)

    anneal = AnnealingPlacer.place

    def polish(self, graph, cluster, *, seed=None):
        polish_from.append(len(runs))
        return anneal(self, graph, cluster, seed=seed)

    monkeypatch.setattr(gnplace.execute.local.LocalTimer, "_measure", simulated)
    monkeypatch.setattr(AnnealingPlacer, "place", polish)
    run = dict(timer="local", devices=["cpu", "cpu"], budget=48, samples=4, epochs=1, zero_shot=False, repeats=1,
               progress=False, confirm=0)  # (one measurement a placement: a journal line per step run)
    whole = finetune(TINY, "k80x2", out=tmp_path / "whole", **run)
    assert whole is not None and whole["polish_evaluations"] >= 12  # (and what the search left on 18 ops)
    whole_runs = len(runs)
    assert polish_from == [polish_from[0]] and whole_runs > polish_from[0] + 4  # (the polish measures several)

    runs.clear()
    kill_at.append(polish_from[0] + 4)  # the polish's fourth step of its own
    with pytest.raises(KeyboardInterrupt):
        finetune(TINY, "k80x2", out=tmp_path / "killed", **run)
    journaled = (tmp_path / "killed" / JOURNAL).read_text().splitlines()
    assert len(journaled) == 1 + kill_at[0] - 1  # the header and every step measured before the kill
    runs.clear()
    kill_at.clear()
    resumed = finetune(TINY, "k80x2", out=tmp_path / "killed", resume=True, **run)
    assert resumed is not None
    assert len(runs) == whole_runs - (polish_from[0] + 3)  # only what the killed run never measured
    for key in ("step_time_s", "evaluations", "polish_evaluations", "history", "single_s", "auto_s"):
        assert resumed[key] == whole[key], key
    assert (tmp_path / "killed" / "placement.json").read_bytes() == (tmp_path / "whole" / "placement.json").read_bytes()
    searched = len((tmp_path / "whole" / JOURNAL).read_text().splitlines()) - 1
    runs.clear()  # resuming the finished run runs only the comparison afresh: the search's steps, all answered
    finetune(TINY, "k80x2", out=tmp_path / "killed", resume=True, **run)
    assert len(runs) == whole_runs - searched


def test_a_real_timers_run_resumed_with_a_damaged_journal_is_refused_and_keeps_it(tmp_path):
    from gnplace.finetune import JOURNAL

    run = dict(timer="local", devices=["cpu", "cpu"], budget=12, samples=4, epochs=1, zero_shot=False, repeats=1,
               out=tmp_path, progress=False)
    finetune(TINY, "k80x2", **run)
    journal = tmp_path / JOURNAL
    lines = journal.read_bytes().split(b"\n")
    journal.write_bytes(b"\n".join(lines[:2] + [b"{oops"] + lines[2:]))
    saved = {name: (tmp_path / name).read_bytes() for name in (JOURNAL, "last.ckpt", "summary.json")}
    with pytest.raises(InvalidCheckpoint, match=rf"{JOURNAL}: line 3 is damaged"):
        finetune(TINY, "k80x2", resume=True, **run)
    _unchanged(tmp_path, saved)
    with pytest.raises(InvalidArgument, match=r"holds a run's measurements \(measurements.jsonl\): resume it"):
        finetune(TINY, "k80x2", **run)  # a new run would drop them
    _unchanged(tmp_path, saved)


def test_real_steps_race_the_searchs_two_fastest_placements_with_auto_and_single_in_rounds(tmp_path, monkeypatch):
    """A lucky first draw made round_robin's placement the search's best: measured afresh in rounds, it loses."""
    import gnplace.execute.local
    from gnplace.cluster import load_cluster
    from gnplace.placement import Placement, load_placement
    from gnplace.placers import get_placer
    from gnplace.rl.search import FineTunePlacer
    from gnplace.sim.simulator import Simulator

    cluster = load_cluster("k80x2")
    drawn: list[bytes] = []
    lucky = set()

    def measured(self, graph, cluster, placement):  # steps as the simulator has them, but a lucky first draw
        key = placement.devices.tobytes()
        drawn.append(key)
        result = Simulator().time(graph, cluster, placement)
        if key in lucky:
            lucky.discard(key)
            return replace(result, step_time=result.step_time / 10)
        return result

    def search(self, graph, cluster, *, seed=None):  # times round_robin's placement (lucky), then single's
        rr, single = (get_placer(name).place(graph, cluster, seed=seed) for name in ("round_robin", "single"))
        lucky.add(rr.devices.tobytes())
        steps = [self.timer.time(graph, cluster, p).step_time for p in (rr, single)]
        # a third as fast as single's, all on the other device (its bytes sort after single's): not a finalist
        self.timer.time(graph, cluster, Placement(np.ones_like(single.devices), cluster))
        assert steps[0] < steps[1]
        self.last_evaluations, self.last_polish_evaluations, self.last_history = 2, 0, [(1, steps[0])]
        self.last_zero_shot_placement = self.last_zero_shot_budget_needed = None
        return rr

    raced: list[bytes] = []
    afresh = gnplace.execute.local.LocalTimer.measure

    def measure(self, graph, cluster, placement):
        raced.append(np.asarray(getattr(placement, "devices", placement), dtype=np.int64).tobytes())
        return afresh(self, graph, cluster, placement)

    monkeypatch.setattr(gnplace.execute.local.LocalTimer, "_measure", measured)
    monkeypatch.setattr(gnplace.execute.local.LocalTimer, "measure", measure)
    monkeypatch.setattr(FineTunePlacer, "place", search)
    summary = finetune(TINY, cluster, timer="local", devices=["cpu", "cpu"], budget=12, repeats=1, out=tmp_path,
                       progress=False, confirm=0)  # (confirm would measure the lucky one again in the search)
    assert summary is not None and summary["chosen"] == "search_2"  # single's placement, the search's next fastest
    graph = _tiny_graph()
    single = get_placer("single").place(graph, cluster).devices
    assert (load_placement(tmp_path / "placement.json", graph, cluster).devices == single).all()
    assert json.loads((tmp_path / "placement.json").read_text())["placer"] == "finetune"  # a search's placement
    rounds = summary["final_rounds_s"]
    assert set(rounds) == {"search", "search_2", "auto", "single", "round_robin"}
    assert all(len(r) == 3 for r in rounds.values())
    assert summary["search_step_s"] == summary["round_robin_s"] > summary["step_time_s"] == summary["single_s"]
    # each placement raced is measured afresh once a round, in turn (one placement under two names, once)
    assert single.astype(np.int64).tobytes() in raced
    per_round = len(set(raced))
    assert len(raced) == 3 * per_round and raced[:per_round] == raced[per_round:2 * per_round]


def _tiny_graph():
    from gnplace.importers.sources import load_step_source

    return load_step_source(TINY, optimizer="sgd")[0].graph


def test_costs_profiled_with_another_optimizer_are_refused(tmp_path):
    """Only the op names were compared: an Adam graph's updates took the seconds measured for SGD's."""
    from gnplace.exceptions import InvalidArgument
    from gnplace.finetune import _with_costs
    from gnplace.graph_io import save_graph
    from gnplace.importers.sources import load_graph_source

    sgd = load_graph_source("gnplace.execute.examples:tiny", optimizer="sgd")
    profiled = save_graph(sgd.replace(cost_s={"cpu-1t": np.full(sgd.num_ops, 1e-5)}), tmp_path / "graph.gnpg")
    ranks = cluster_from_dict({"name": "ranks", "devices": [{"name": "rank", "count": 2, "kind": "cpu-1t",
                                                              "peak_flops": 1e10, "mem_bandwidth": 1e10, "memory": 1e9}],
                               "links": {"default": "ethernet20g"}})
    assert float(_with_costs(sgd, str(profiled), ranks).cost_s["cpu-1t"][0]) == 1e-5
    adam = load_graph_source("gnplace.execute.examples:tiny", optimizer="adam")
    assert adam.node_names == sgd.node_names
    with pytest.raises(InvalidArgument, match=r"graph.gnpg: profiled for another graph \(the same op names, other "
                                              r"op_types: another optimizer"):
        _with_costs(adam, str(profiled), ranks)


def test_costs_measured_on_no_device_kind_of_the_cluster_are_refused(tmp_path):
    """``--costs`` of cpu-1t ranks with ``-c k80x2`` ran with the seconds ignored, without a word."""
    from gnplace.exceptions import InvalidArgument
    from gnplace.finetune import _with_costs
    from gnplace.graph_io import save_graph
    from gnplace.importers.sources import load_graph_source

    sgd = load_graph_source("gnplace.execute.examples:tiny", optimizer="sgd")
    profiled = save_graph(sgd.replace(cost_s={"cpu-1t": np.full(sgd.num_ops, 1e-5)}), tmp_path / "graph.gnpg")
    with pytest.raises(InvalidArgument, match=r"graph.gnpg: measured seconds on device kinds cpu-1t, of which cluster "
                                              r"'k80x2' \(k80\) has none"):
        _with_costs(sgd, str(profiled), load_cluster("k80x2"))
    with pytest.raises(InvalidArgument, match="of which cluster 'k80x2' .k80. has none"):
        finetune("gnplace.execute.examples:tiny", "k80x2", out=tmp_path / "ft", costs=str(profiled), budget=20)
    assert not (tmp_path / "ft").exists()


def test_a_summary_that_cannot_be_written_leaves_no_tmp(tmp_path, disk_full_at):
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    out = tmp_path / "run"
    disk_full_at("summary.json")
    with pytest.raises(OSError, match="No space left"):
        finetune(str(path), "k80x2", budget=30, samples=4, epochs=1, out=out, progress=False)
    assert not list(out.glob("*.tmp")) and not (out / "summary.json").exists()  # a summary.json.tmp was left


@pytest.mark.parametrize("name", ["summary.json", "placement.json", "last.ckpt", "measurements.jsonl"])
def test_an_output_linked_out_of_the_folder_is_refused_and_its_target_kept(tmp_path, name):
    """A shared run folder's summary.json linked to a file elsewhere had the summary written over that file."""
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "a.gnpg")
    outside = tmp_path / "notes.txt"
    outside.write_text("mine")
    out = tmp_path / "run"
    out.mkdir()
    (out / name).symlink_to(outside)
    with pytest.raises(InvalidArgument, match=rf"{name}: is a symbolic link \(to {outside}\), and finetune writes"):
        finetune(str(path), "k80x2", budget=1, out=out, progress=False, resume=True)
    assert outside.read_text() == "mine" and sorted(p.name for p in out.iterdir()) == [name]


def test_numpy_integer_settings_are_whole_numbers(tmp_path):
    """``repeats=np.int64(3)`` (a count computed with numpy) was refused as not a whole number; the summary holds 3."""
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    summary = finetune(str(path), "k80x2", budget=8, samples=4, epochs=1, out=tmp_path / "run", progress=False,
                       repeats=np.int64(3), threads=np.int32(1))
    assert summary is not None
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == json.loads(json.dumps(summary))


def test_a_run_inside_a_slurm_job_of_several_tasks_is_one_process_of_its_own(tmp_path, monkeypatch):
    """Inside ``sbatch --ntasks=2`` Lightning took the job's variables for its ranks' and raised a RuntimeError."""
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_JOB_ID", "5")
    monkeypatch.delenv("SLURM_NTASKS_PER_NODE", raising=False)
    monkeypatch.delenv("SLURM_JOB_NAME", raising=False)
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    summary = finetune(str(path), "k80x2", budget=8, samples=4, epochs=1, out=tmp_path / "run", progress=False)
    assert summary is not None and (tmp_path / "run" / "placement.json").exists()


def test_a_rank_variable_left_in_the_shell_does_not_silence_the_logs(tmp_path, monkeypatch):
    """With ``LOCAL_RANK=1`` left from an earlier job, Lightning took the run for rank 1 and wrote no logs."""
    import lightning.fabric.utilities.rank_zero  # noqa: F401 - its import gives rank_zero_only its rank
    from lightning_utilities.core.rank_zero import rank_zero_only

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.setenv("LOCAL_RANK", "1")
    # what Lightning read at its import (alone, the test was an AttributeError: Lightning came with an earlier test)
    monkeypatch.setattr(rank_zero_only, "rank", 1)
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    finetune(str(path), "k80x2", budget=8, samples=4, epochs=1, out=tmp_path / "run", progress=False)
    assert list((tmp_path / "run" / "logs").glob("version_*/metrics.csv"))


def test_single_is_returned_where_it_measures_faster_than_the_search_and_auto(tmp_path, monkeypatch):
    """The race's eligible placements are the search's, auto's and single's: with the search and auto both spreading
    the step round robin, single's one device is the fastest and is the one returned."""
    from gnplace.placers import get_placer
    from gnplace.placers.auto import AutoPlacer
    from gnplace.rl.search import FineTunePlacer

    graph = mlp_training_graph(layers=3, width=256, batch=32)
    path = save_graph(graph, tmp_path / "g.gnpg")

    def spread(self, graph, cluster, *, seed=None):
        self.last_evaluations, self.last_zero_shot_step, self.last_history = 1, None, [(1, 0.0)]
        return get_placer("round_robin").place(graph, cluster, seed=seed)

    monkeypatch.setattr(FineTunePlacer, "place", spread)
    monkeypatch.setattr(AutoPlacer, "place", lambda self, graph, cluster, *, seed=None:
                        get_placer("round_robin").place(graph, cluster, seed=seed))
    summary = finetune(str(path), "k80x2", budget=8, out=tmp_path / "run", progress=False)
    assert summary is not None and summary["single_s"] < summary["auto_s"] == summary["search_step_s"]
    assert summary["chosen"] == "single" and summary["step_time_s"] == summary["single_s"]
    # (docs/outputs.md) the ratio is the step returned over auto's, and the file says which placement it holds and
    # what it measured, not what the search's best did
    assert summary["vs_auto"] == summary["single_s"] / summary["auto_s"] < 1
    placed = json.loads((tmp_path / "run" / "placement.json").read_text())
    assert placed["placer"] == "finetune (single)"
    assert placed["predicted"] == {"step_time_s": summary["single_s"], "oom": False, "timer": "sim"}


def test_a_fitting_placement_is_returned_over_a_faster_one_that_runs_out_of_memory(tmp_path, tight_k80s, monkeypatch):
    """On two k80s that each hold 90% of the step, the search's pick of all on one device (faster, no transfers) runs
    out of memory: auto's fitting placement is returned."""
    graph, path, cluster = tight_k80s
    searched_on_one_device(monkeypatch)
    summary = finetune(str(path), str(cluster), budget=8, out=tmp_path / "run", progress=False)
    assert summary is not None and summary["search_oom"] and summary["search_step_s"] < summary["auto_s"]
    assert summary["chosen"] == "auto" and not summary["oom"]
    # (docs/outputs.md) single's step over the one returned, faster than a time that does not fit
    assert summary["speedup_vs_single"] == summary["single_s"] / summary["auto_s"] < 1


def test_resume_into_another_graphs_or_clusters_finished_run_without_a_checkpoint_is_refused_and_keeps_it(tmp_path):
    """A run too short for a checkpoint left only its results; ``resume`` into that folder with another graph or
    cluster ran and overwrote them, where such a ``last.ckpt`` is refused (--help: refused if another graph's run)."""
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "a.gnpg")
    other = save_graph(mlp_training_graph(layers=3, width=64, batch=8), tmp_path / "b.gnpg")
    out = tmp_path / "run"
    finetune(str(path), "k80x2", budget=1, out=out, progress=False)
    assert not (out / "last.ckpt").exists()
    saved = {name: (out / name).read_bytes() for name in ("placement.json", "summary.json")}
    with pytest.raises(InvalidArgument, match=r"holds a finished run of another graph \('mlp1x2w64b8'; here "
                                              r"'mlp1x3w64b8'\) \(placement.json\): resume with the same inputs"):
        finetune(str(other), "k80x2", budget=1, out=out, resume=True, progress=False)
    with pytest.raises(InvalidArgument, match=r"finished run of another cluster \(k80x2; here k80x4\)"):
        finetune(str(path), "k80x4", budget=1, out=out, resume=True, progress=False)
    _unchanged(out, saved)
    assert finetune(str(path), "k80x2", budget=1, out=out, resume=True, progress=False) is not None  # its own: again


@pytest.mark.parametrize("name", ["placement.json", "summary.json", "logs"])
def test_an_output_of_the_wrong_kind_is_refused_before_the_search(tmp_path, name):
    """A folder named placement.json (or summary.json) let a resumed run search to the end, then fail on
    "Is a directory"; a file named logs failed on "File exists" after the run's start was timed."""
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "a.gnpg")
    out = tmp_path / "run"
    out.mkdir()
    if name == "logs":
        (out / name).write_text("mine\n")
    else:
        (out / name).mkdir()
    with pytest.raises(InvalidArgument, match=rf"{name}: is (a|not a) folder, where finetune writes its .*use "
                                              "another -o"):
        finetune(str(path), "k80x2", budget=40, samples=4, epochs=1, out=out, resume=True, progress=False)
    assert sorted(p.name for p in out.iterdir()) == [name]


def test_a_full_disk_at_the_searchs_last_checkpoint_still_writes_its_placement(tmp_path, monkeypatch):
    """The finished search was lost with the last ``last.ckpt`` (hundreds of KiB) that found the disk full: no
    ``placement.json`` (a few KiB) was written. It is now a warning, and the placement is written."""
    import errno

    from gnplace.callbacks import AtomicCheckpointIO

    def full(self, checkpoint, filepath, storage_options=None):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(AtomicCheckpointIO, "save_checkpoint", full)
    path = save_graph(mlp_training_graph(layers=3, width=256, batch=32), tmp_path / "g.gnpg")
    with pytest.warns(UserWarning, match="last checkpoint could not be written"):
        summary = finetune(str(path), "k80x2", budget=24, samples=8, epochs=1, out=tmp_path / "run", progress=False)
    assert summary is not None and (tmp_path / "run" / "placement.json").exists()
    assert not (tmp_path / "run" / "last.ckpt").exists()


def test_the_runners_up_are_the_fastest_fitting_placements_measured_on_this_cluster_after_the_best():
    """The race's ``search_N`` are the placements the search measured fastest after its best, fastest first: not its
    best again, none that ran out of memory (however fast), none measured on another cluster."""
    from gnplace.finetune import _runners_up
    from gnplace.placement import Placement
    from gnplace.sim.timer import StepResult

    cluster = load_cluster("k80x2")

    def measured(step: float, oom: bool = False) -> StepResult:
        peak = np.array([2.0 if oom else 0.5, 0.5])
        return StepResult(step, np.zeros(2), peak, np.ones(2), list(cluster.device_names))

    def key(devices, fingerprint=None):
        return fingerprint or cluster.fingerprint(), np.asarray(devices, dtype=np.int64).tobytes()

    timed = {key([0, 0, 0]): measured(1.0),  # the best
             key([1, 1, 1]): measured(0.5, oom=True),  # faster, but out of memory
             key([0, 1, 1], "another cluster"): measured(0.7),
             key([1, 0, 0]): measured(3.0), key([0, 1, 0]): measured(2.0), key([0, 0, 1]): measured(4.0)}
    best = Placement(np.zeros(3, dtype=np.int64), cluster)
    assert [list(d) for d in _runners_up(timed, cluster, best, 2)] == [[0, 1, 0], [1, 0, 0]]
    assert [list(d) for d in _runners_up(timed, cluster, best, 1)] == [[0, 1, 0]]


def test_a_zero_shot_placement_out_of_memory_is_reported_so(tmp_path, tight_k80s, monkeypatch):
    """``zero_shot_oom`` is the zero-shot placement's own measurement afresh: all on one of two k80s that each hold 90%
    of the step runs out of memory, where the fitting placement returned does not."""
    from gnplace.placers import get_placer
    from gnplace.rl.search import FineTunePlacer

    graph, path, cluster = tight_k80s

    def on_one_zero_shot(self, graph, cluster, *, seed=None):
        self.last_evaluations, self.last_history = 1, [(1, 0.0)]
        self.last_zero_shot_step = 1e-9
        self.last_zero_shot_placement = get_placer("single").place(graph, cluster, seed=seed).devices
        return get_placer("round_robin").place(graph, cluster, seed=seed)

    monkeypatch.setattr(FineTunePlacer, "place", on_one_zero_shot)
    summary = finetune(str(path), str(cluster), budget=8, out=tmp_path / "run", progress=False)
    assert summary is not None and summary["zero_shot_oom"] is True and summary["single_oom"] is True
    assert summary["zero_shot_s"] == summary["single_s"] and summary["oom"] is False


def test_a_returned_placement_out_of_memory_says_so_in_its_file(tmp_path, tight_k80s, monkeypatch):
    """Where every placement raced runs out of memory (the search's, auto's and single's all on one of two k80s that
    each hold 90% of the step), the one returned is written with ``oom`` true, as the summary has it."""
    from gnplace.placement import load_placement
    from gnplace.placers import get_placer
    from gnplace.placers.auto import AutoPlacer

    graph, path, cluster = tight_k80s
    searched_on_one_device(monkeypatch)
    monkeypatch.setattr(AutoPlacer, "place", lambda self, graph, cluster, *, seed=None:
                        get_placer("single").place(graph, cluster, seed=seed))
    summary = finetune(str(path), str(cluster), budget=8, out=tmp_path / "run", progress=False)
    assert summary is not None and summary["oom"] is True and summary["chosen"] == "search"
    placed = json.loads((tmp_path / "run" / "placement.json").read_text())
    assert placed["placer"] == "finetune" and placed["predicted"]["oom"] is True
    load_placement(tmp_path / "run" / "placement.json", graph, load_cluster(str(cluster)))  # (a file it reads back)


def test_a_finished_run_that_recorded_its_clusters_earlier_fingerprint_resumes(tmp_path, k80x2_written_out):
    """A run too short for a checkpoint, made before 2026-12-04 (32c87da) on a cluster file that writes the k80's
    memory out, recorded that day's fingerprint in its placement.json: it is this cluster's, and ``resume`` runs."""
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "a.gnpg")
    cluster = load_cluster(k80x2_written_out)
    assert cluster.earlier_fingerprint() != cluster.fingerprint()
    out = tmp_path / "run"
    finetune(str(path), cluster, budget=1, out=out, progress=False)
    assert not (out / "last.ckpt").exists()
    placed = json.loads((out / "placement.json").read_text())
    placed["cluster_fingerprint"] = cluster.earlier_fingerprint()  # as that gnplace wrote it
    (out / "placement.json").write_text(json.dumps(placed))
    assert finetune(str(path), cluster, budget=1, out=out, resume=True, progress=False) is not None


def test_costs_of_another_graph_or_of_other_sizes_are_refused_and_measured_seconds_win(tmp_path):
    """Each check of ``--costs`` against the graph: another node count says so, each of its sizes is compared (a mutant
    that left out edge_bytes passed), and the file's measured seconds replace the graph's own of that kind."""
    from gnplace.finetune import _with_costs

    graph = mlp_training_graph(layers=2, width=64, batch=8)  # 14 ops
    cluster = load_cluster("k80x2")
    bigger = mlp_training_graph(layers=3, width=64, batch=8)
    bigger = save_graph(bigger.replace(cost_s={"k80": np.full(bigger.num_ops, 1e-5)}), tmp_path / "bigger.gnpg")
    with pytest.raises(InvalidArgument, match=r"bigger.gnpg: profiled for another graph \(\d+ nodes, this one 14\)$"):
        _with_costs(graph, str(bigger), cluster)
    measured = {"k80": np.full(graph.num_ops, 1e-5)}
    for field, scale in (("flops", 2), ("out_bytes", 2), ("param_bytes", 2), ("edge_bytes", 0.5)):  # (edges <= out)
        other = graph.replace(**{field: np.asarray(getattr(graph, field)) * scale + 1}, cost_s=measured)
        path = save_graph(other, tmp_path / f"{field}.gnpg")
        with pytest.raises(InvalidArgument, match=rf"profiled for another graph \(the same op names, other {field}:"):
            _with_costs(graph, str(path), cluster)
    own = graph.replace(cost_s={"k80": np.full(graph.num_ops, 1.0), "cpu": np.full(graph.num_ops, 2.0)})
    profiled = save_graph(graph.replace(cost_s=measured), tmp_path / "profiled.gnpg")
    merged = _with_costs(own, str(profiled), cluster).cost_s
    assert sorted(merged) == ["cpu", "k80"]
    assert merged["k80"].tolist() == [1e-5] * 14 and merged["cpu"].tolist() == [2.0] * 14


def test_a_finished_run_on_a_cluster_of_the_same_name_with_other_devices_says_so(tmp_path):
    """Same name, other memory: the message says the devices differ, not "(k80x2; here k80x2)"."""
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "a.gnpg")
    out = tmp_path / "run"
    finetune(str(path), "k80x2", budget=1, out=out, progress=False)
    smaller = cluster_from_dict({"name": "k80x2", "devices": [{"name": "gpu", "count": 2, "kind": "k80",
                                                               "memory": "1GiB"}], "links": {"default": "pcie3"}})
    with pytest.raises(InvalidArgument, match=r"holds a finished run of another cluster \(k80x2 with other devices\) "
                                              r"\(placement.json\)"):
        finetune(str(path), smaller, budget=1, out=out, resume=True, progress=False)


def test_the_simulators_comparison_times_each_placement_once_and_the_summary_names_the_checkpoint(tmp_path, monkeypatch):
    """The simulator is exact: one round whatever ``final_rounds`` says (a mutant ran three); the summary names the
    checkpoint the run started from (the shipped one), not the ``None`` it was given."""
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "a.gnpg")
    searched_on_one_device(monkeypatch)
    summary = finetune(str(path), "k80x2", budget=8, out=tmp_path / "run", progress=False, final_rounds=3)
    assert summary is not None
    assert set(summary["final_rounds_s"]) == {"search", "auto", "single", "round_robin"}
    assert all(len(seconds) == 1 for seconds in summary["final_rounds_s"].values())
    assert summary["checkpoint"].endswith("gnplace-base.ckpt")
    assert summary["measured_steps"] is None  # (a real timer's count of measurements)


def test_a_comparison_that_fails_leaves_the_searchs_placement_written(tmp_path, monkeypatch):
    """The search's best is written before the comparison: a failure there (a real step that fails, a kill) keeps
    the search's result, single's placement here, and writes no summary."""
    import gnplace.finetune
    from gnplace.placement import load_placement
    from gnplace.placers import get_placer

    def failing(*args, **kwargs):
        raise KeyboardInterrupt

    graph = mlp_training_graph(layers=2, width=64, batch=8)
    path = save_graph(graph, tmp_path / "a.gnpg")
    searched_on_one_device(monkeypatch)
    monkeypatch.setattr(gnplace.finetune, "_race", failing)
    with pytest.raises(KeyboardInterrupt):
        finetune(str(path), "k80x2", budget=8, out=tmp_path / "run", progress=False)
    cluster = load_cluster("k80x2")
    kept = load_placement(tmp_path / "run" / "placement.json", graph, cluster).devices
    assert kept.tolist() == get_placer("single").place(graph, cluster).devices.tolist() == [0] * graph.num_ops
    assert not (tmp_path / "run" / "summary.json").exists()


def test_a_finished_runs_placement_file_that_is_no_json_object_is_taken_as_this_runs(tmp_path):
    """As an unreadable one is: a JSON list there was an AttributeError under a mutant."""
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "a.gnpg")
    out = tmp_path / "run"
    finetune(str(path), "k80x2", budget=1, out=out, progress=False)
    (out / "placement.json").write_text("[1, 2]")
    assert finetune(str(path), "k80x2", budget=1, out=out, resume=True, progress=False) is not None


@pytest.mark.parametrize("bad, message", [
    (dict(final_rounds=0), r"final_rounds must be a whole number >= 1, got 0"),
    (dict(screen=0), r"screen must be a whole number >= 1, got 0"),
    (dict(confirm=-1), r"confirm must be a whole number >= 0, got -1"),
    (dict(screen_model="simulator"), r"the simulator screen ranks a real timer's candidates; with --timer sim"),
    (dict(timer="local", source=TINY, input_shapes={"x": [4]}), r"input shapes \(--input-shape\) apply to ONNX models"),
])
def test_settings_refused_before_the_output_folder_is_made(tmp_path, bad, message):
    """final_rounds=0 (with the simulator, taken as one round), screen=0, confirm=-1, the simulator screen with the
    simulator, input shapes for a factory's real steps: each refused before anything is written."""
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    source = bad.pop("source", str(path))
    with pytest.raises(InvalidArgument, match=message):
        finetune(source, "k80x2", budget=8, out=tmp_path / "run", progress=False, **bad)
    assert not (tmp_path / "run").exists()


def test_one_torch_device_for_a_cluster_of_two_is_refused_before_the_search(tmp_path, monkeypatch):
    """A mutant that left the check to the local timer refused it at the search's first step, after the policy was
    loaded and Lightning set up (the folder it made was then removed): no step is tried now."""
    import gnplace.execute.local

    tried = []
    monkeypatch.setattr(gnplace.execute.local.LocalTimer, "_measure", lambda self, *args: tried.append(args))
    with pytest.raises(InvalidArgument, match=r"^1 torch device given for the 2 devices of 'k80x2'$"):
        finetune(TINY, "k80x2", timer="local", devices=["cpu"], budget=8, out=tmp_path / "run", progress=False)
    assert tried == [] and not (tmp_path / "run").exists()


def test_polish_zero_reaches_the_search_as_none(tmp_path, monkeypatch):
    """``polish=0`` is no share of the budget set aside for annealing (a mutant read it as the default, 0.25); left out,
    it is :data:`~gnplace.rl.search.FINETUNE_POLISH`."""
    from gnplace.placers import get_placer
    from gnplace.rl.search import FINETUNE_POLISH, FineTunePlacer

    shares = []

    def on_one(self, graph, cluster, *, seed=None):
        shares.append(self.polish)
        self.last_evaluations, self.last_zero_shot_step, self.last_history = 1, None, [(1, 0.0)]
        return get_placer("single").place(graph, cluster, seed=seed)

    monkeypatch.setattr(FineTunePlacer, "place", on_one)
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    for polish, out in ((0.0, "a"), (None, "b")):
        assert finetune(str(path), "k80x2", budget=8, out=tmp_path / out, progress=False, polish=polish) is not None
    assert shares == [0.0, FINETUNE_POLISH] and FINETUNE_POLISH > 0


def test_auto_is_measured_afresh_after_the_search_not_answered_from_the_searchs_cache(tmp_path, monkeypatch):
    """The search timed auto's candidates (as it does, starting from auto's placement); after it, auto places with the
    cache cleared, so its pick is by fresh measurements: its placement is measured once by auto, then once in each of
    the race's 3 rounds, 4 in all (a mutant that kept the cache measured it 3 times)."""
    import gnplace.execute.local
    from gnplace.placers import get_placer
    from gnplace.rl.search import FineTunePlacer
    from gnplace.sim.simulator import Simulator

    searched = []
    after: list[bytes] = []

    def simulated(self, graph, cluster, placement):
        if searched:
            after.append(np.asarray(placement.devices, dtype=np.int64).tobytes())
        return Simulator().time(graph, cluster, placement)

    def search(self, graph, cluster, *, seed=None):
        best = get_placer("auto", timer=self.timer).place(graph, cluster, seed=seed)
        self.last_evaluations, self.last_polish_evaluations, self.last_history = 1, 0, [(1, 0.0)]
        self.last_zero_shot_placement = self.last_zero_shot_budget_needed = None
        searched.append(best.devices.astype(np.int64).tobytes())
        return best

    monkeypatch.setattr(gnplace.execute.local.LocalTimer, "_measure", simulated)
    monkeypatch.setattr(FineTunePlacer, "place", search)
    summary = finetune(TINY, "k80x2", timer="local", devices=["cpu", "cpu"], budget=12, repeats=1, out=tmp_path,
                       progress=False, confirm=0)
    assert summary is not None and summary["chosen"] in ("search", "search_2", "auto", "single")
    assert after.count(searched[0]) == 4


def test_costs_with_no_measured_seconds_are_refused(tmp_path):
    """``--costs`` given the plain graph file (not the one gnplace profile wrote) planned with the cost model, without a
    word, as seconds of another device kind did."""
    path = save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "g.gnpg")
    with pytest.raises(InvalidArgument, match=r"g.gnpg: holds no measured op seconds \(a graph file gnplace profile "
                                              r"wrote has them\): give that file, or leave --costs out$"):
        finetune(str(path), "k80x2", budget=8, out=tmp_path / "run", progress=False, costs=str(path))
    assert not (tmp_path / "run").exists()
