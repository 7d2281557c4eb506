"""The Lightning system: iterations, the stateful data stream, checkpoints and an exact resume."""

from __future__ import annotations

import re
from dataclasses import replace

import lightning as L
import numpy as np
import pytest
import torch

from gnplace.callbacks import StopAfter, quiet_lightning
from gnplace.cluster import Cluster, load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.placement import as_placement
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import StepTimer
from gnplace.toy import layered_graph, mlp_training_graph
from gnplace.train import LearnerConfig, PlacementDataModule, PlacementLearner, ProblemStream

CONFIG = LearnerConfig(samples=8, epochs=2, imitation_steps=2, elite=1.0)


def pairs():
    return [(mlp_training_graph(layers=3, width=128, batch=16), "k80x2"),
            (layered_graph(60, seed=1).replace(group=np.arange(60) // 3), load_cluster("k80x4"))]


def trainer(tmp_path, stop, **kw):
    return L.Trainer(max_epochs=-1, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                     enable_model_summary=False, enable_checkpointing=False, callbacks=[StopAfter(stop)],
                     default_root_dir=tmp_path, **kw)


def run(tmp_path, stop, ckpt=None, data=None, memo=False, config=CONFIG, widen=False):
    learner = PlacementLearner(config)
    data = data or PlacementDataModule(pairs(), pairs_per_step=2, steps_per_epoch=4, seed=3, memo=memo, widen=widen)
    with quiet_lightning():
        t = trainer(tmp_path, stop)
        t.fit(learner, datamodule=data, ckpt_path=ckpt)
    return t, learner, data


def test_a_seed_up_to_2_to_the_64_seeds_the_learner():
    assert PlacementLearner(LearnerConfig(seed=2**64 - 1)).config.seed == 2**64 - 1


def test_the_pairs_of_an_iteration_depend_only_on_seed_and_iteration():
    data = PlacementDataModule(pairs(), pairs_per_step=1, steps_per_epoch=3, seed=0)
    data._problems = {0: "a", 1: "b"}  # the draw only picks indices
    seq = [data.batch(i)[0] for i in range(8)]
    assert seq == [data.batch(i)[0] for i in range(8)] and set(seq) == {"a", "b"}
    assert len(ProblemStream(3)) == 3 and list(ProblemStream(3)) == [0, 1, 2]


def test_iterations_imitate_then_reinforce(tmp_path):
    _, learner, data = run(tmp_path, 5)
    assert learner.iteration == 5
    for i in range(2):
        p = data.problem(i)
        assert p.evaluations == 1 + 1 + 3 * CONFIG.samples  # the reference, the greedy policy after imitation, 3 iterations
        assert set(p.greedy_steps) == {CONFIG.imitation_steps - 1}
        steps = [step for _, step in p.history]  # the best so far after each timing, ending at the best
        assert steps == sorted(steps, reverse=True) and steps[-1] == p.best_step and steps[0] == p.reference_step


def test_a_diverging_run_stops_with_one_error_before_any_weight_it_saves_is_not_finite(tmp_path, monkeypatch):
    real_step = torch.optim.Adam.step

    def overflow(optimizer, *args, **kwargs):  # a step too large: what lr=100 does within a few iterations
        out = real_step(optimizer, *args, **kwargs)
        with torch.no_grad():
            optimizer.param_groups[0]["params"][0].fill_(float("nan"))
        return out

    monkeypatch.setattr(torch.optim.Adam, "step", overflow)
    with pytest.raises(InvalidArgument, match=r"^training diverged at iteration 0: the policy's weights are not finite "
                                              r"\(the loss was .*\); lower the learning rate \(lr = "):
        run(tmp_path, 3)  # it trained on, and exported NaN weights that gnplace place refused


@pytest.mark.parametrize("memo, widen, screen", [(False, False, 1), (True, False, 1), (True, True, 1),
                                                  (True, False, 4)])
def test_resume_from_a_checkpoint_continues_the_same_run(tmp_path, memo, widen, screen):
    config = replace(CONFIG, prior=2.0) if widen else CONFIG
    if screen > 1:  # 16 samples a batch: the screen learns from the first two and screens from the third on
        config = replace(CONFIG, samples=16, screen=screen)
    _, straight, straight_data = run(tmp_path / "a", 6, memo=memo, config=config, widen=widen)
    t, _, _ = run(tmp_path / "b", 3, memo=memo, config=config, widen=widen)
    path = tmp_path / "b" / "mid.ckpt"
    t.save_checkpoint(path)
    checkpoint = torch.load(path, weights_only=True)  # tensors and plain data only
    assert checkpoint["gnplace"]["iteration"] == 3
    _, resumed, resumed_data = run(tmp_path / "c", 6, ckpt=str(path), memo=memo, config=config, widen=widen)
    assert resumed.iteration == 6 and resumed.beta == straight.beta
    for key, value in straight.policy.state_dict().items():
        assert torch.equal(value, resumed.policy.state_dict()[key]), key
    for i in range(2):
        assert resumed_data.problem(i).best_step == straight_data.problem(i).best_step
        assert resumed_data.problem(i).evaluations == straight_data.problem(i).evaluations
        assert resumed_data.problem(i).timed.keys() == straight_data.problem(i).timed.keys()  # the memo comes back
        assert resumed_data.problem(i).kappa == straight_data.problem(i).kappa  # and widen's prior
        assert resumed_data.problem(i).greedy_steps == straight_data.problem(i).greedy_steps  # and the greedy steps
        assert (straight_data.problem(i).kappa is not None) == widen
        if screen > 1:  # and what the screen learned (the mlp on two devices has only 16 placements to learn from)
            assert resumed_data.problem(i).screen.state() == straight_data.problem(i).screen.state()
    assert screen == 1 or straight_data.problem(1).screen.ready


def test_a_refinement_run_resumes_its_chains_where_they_were(tmp_path):
    """mode=refine: the chains' placements, steps and pass are saved; a resume restarted them from the best."""
    config = replace(CONFIG, mode="refine")
    _, straight, straight_data = run(tmp_path / "a", 7, config=config)
    t, _, _ = run(tmp_path / "b", 3, config=config)
    path = tmp_path / "b" / "mid.ckpt"
    t.save_checkpoint(path)
    _, resumed, resumed_data = run(tmp_path / "c", 7, ckpt=str(path), config=config)
    for key, value in straight.policy.state_dict().items():
        assert torch.equal(value, resumed.policy.state_dict()[key]), key
    for i in range(2):
        assert resumed_data.problem(i).history == straight_data.problem(i).history


def test_a_screened_batch_times_the_new_placements_its_screen_ranks_fastest(tmp_path, monkeypatch):
    import gnplace.train as train
    from gnplace.rl.agent import Trajectories
    from gnplace.rl.screen import MoveScreen

    drawn, ranked, kept = [], [], []
    sample, rank, take = train.sample, MoveScreen.rank, Trajectories.take
    monkeypatch.setattr(train, "sample", lambda *a, **k: drawn.append(a[2]) or sample(*a, **k))
    monkeypatch.setattr(MoveScreen, "rank",
                        lambda self, x, base=None: ranked.append((x, rank(self, x, base))) or ranked[-1][1])
    monkeypatch.setattr(Trajectories, "take", lambda self, i: kept.append((self, i)) or take(self, i))
    config = LearnerConfig(samples=8, epochs=1, screen=4, prior=2.0)
    data = PlacementDataModule(pairs()[1:], steps_per_epoch=8, seed=3, memo=True)
    learner = PlacementLearner(config)
    evaluations = []
    monkeypatch.setattr(PlacementLearner, "_log_mean",
                        lambda self, stats: evaluations.append(data.problem(0).evaluations))
    with quiet_lightning():
        trainer(tmp_path, 8).fit(learner, datamodule=data)
    screen = data.problem(0).screen
    assert screen is not None and screen.ready and ranked and len(kept) == len(ranked)
    assert drawn == [8] * (8 - len(ranked)) + [32] * len(ranked)  # the batch alone until the screen is ready
    for (candidates, order), (whole, index) in zip(ranked, kept):
        best = candidates[order[:8]]  # the new placements ranked fastest, in that order, are the batch
        assert np.array_equal(whole.rollout.group_devices[index[:len(best)]], best)
    new = np.diff([1] + evaluations)[-len(ranked):]
    assert (new == 8).all()  # every placement of a screened batch is new: each is an evaluation


class MeasuredSteps(StepTimer):
    """A stand-in for real steps: the simulator on a cluster with slower links than the one placed on."""

    def __init__(self):
        self.sim, self.slow = Simulator(), {}

    def _slow(self, cluster):
        if cluster.name not in self.slow:
            self.slow[cluster.name] = Cluster(list(cluster.devices), cluster.bandwidth / 3, cluster.latency * 2,
                                              name=cluster.name)
        return self.slow[cluster.name]

    def time(self, graph, cluster, placement, *, timeline=False):
        return self.sim.time(graph, self._slow(cluster), as_placement(graph, cluster, placement).devices)

    def time_batch(self, graph, cluster, placements):
        return self.sim.time_batch(graph, self._slow(cluster), placements)


def test_a_simulator_screen_ranks_a_real_timers_first_batch_by_the_simulator(tmp_path, monkeypatch):
    import gnplace.train as train
    from gnplace.rl.agent import Trajectories

    kept, drawn = [], []
    take, sample = Trajectories.take, train.sample
    monkeypatch.setattr(train, "sample", lambda *a, **k: drawn.append(a[2]) or sample(*a, **k))
    monkeypatch.setattr(Trajectories, "take", lambda self, i: kept.append((self, i)) or take(self, i))
    config = LearnerConfig(samples=8, epochs=1, screen=4, prior=2.0, screen_model="simulator")
    data = PlacementDataModule(pairs()[1:], steps_per_epoch=3, seed=3, memo=True, timer=MeasuredSteps())
    learner = PlacementLearner(config, timer=data.timer)
    with quiet_lightning():
        trainer(tmp_path, 3).fit(learner, datamodule=data)
    problem = data.problem(0)
    assert drawn == [32] * 3 and len(kept) == 3  # screened from the first batch: the simulator needs no data
    assert problem.screen is not None and problem.screen.residual and len(problem.screen) > 0
    whole, index = kept[0]
    devices = problem.inp.expand(whole.rollout.group_devices)  # the first batch: the incumbent was the reference
    anchored = np.where(devices == problem.inp.expand(problem.reference_groups)[None, :],
                        problem.reference_devices[None, :], devices)
    step = Simulator().time_batch(problem.inp.graph, problem.inp.cluster, anchored).step_time
    first = {}  # each new placement's first row (the reference's was timed before)
    for i, row in enumerate(anchored):
        if not np.array_equal(row, problem.reference_devices):
            first.setdefault(row.tobytes(), i)
    new = sorted(first.values(), key=lambda i: step[i])
    assert len(new) > 8 and sorted(index.tolist()) == sorted(new[:8])  # the simulator's fastest new ones


class DriftingSteps(StepTimer):
    """Real steps' stand-in whose every timing is 1% slower than the one before: a new measurement differs."""

    def __init__(self):
        self.sim, self.calls = Simulator(), 0

    def time(self, graph, cluster, placement, *, timeline=False):
        self.calls += 1
        result = self.sim.time(graph, cluster, as_placement(graph, cluster, placement).devices)
        return replace(result, step_time=result.step_time * (1 + 0.01 * self.calls))


def test_a_pair_prepared_before_a_restore_takes_the_saved_state_without_timing_its_reference_again():
    first = PlacementDataModule(pairs()[:1], timer=DriftingSteps(), seed=3, memo=True)
    problem = first.problem(0)
    faster = problem.reference_step / 2
    problem.offer(np.zeros_like(problem.best_devices), faster, False, evaluations=5)
    saved = first.state_dict()
    timer = DriftingSteps()
    timer.calls = 100  # a later session's measurements
    again = PlacementDataModule(pairs()[:1], timer=timer, seed=3, memo=True)
    prepared = again.problem(0)  # a resumed search prepares its pair before the checkpoint is restored
    calls = timer.calls
    assert prepared.reference_step != problem.reference_step  # measured anew
    again.load_state_dict(saved)
    assert again.problem(0) is prepared and timer.calls == calls  # not prepared nor timed again
    assert prepared.reference_step == problem.reference_step  # the run's own measurement
    assert prepared.best_step == faster and prepared.evaluations == problem.evaluations
    assert prepared.history == problem.history and prepared.timed.keys() == problem.timed.keys()
    later = PlacementDataModule(pairs()[:1], timer=DriftingSteps(), seed=3, memo=True)
    later.load_state_dict(saved)  # a pair not prepared yet takes it when it is (pretraining)
    assert later.problem(0).reference_step == problem.reference_step and later.problem(0).best_step == faster


def test_a_simulator_screen_is_refused_with_the_simulator_as_the_timer():
    with pytest.raises(InvalidArgument, match="free"):
        PlacementLearner(LearnerConfig(screen=4, screen_model="simulator"))
    with pytest.raises(InvalidArgument, match="screen_model"):
        LearnerConfig(screen_model="oracle")
    PlacementLearner(LearnerConfig(screen=4, screen_model="simulator"), timer=MeasuredSteps())


def test_reinforce_and_refine_run(tmp_path):
    for config in (LearnerConfig(samples=8, algo="reinforce"), LearnerConfig(samples=8, epochs=2, mode="refine")):
        learner = PlacementLearner(config)
        data = PlacementDataModule(pairs()[:1], steps_per_epoch=3)
        with quiet_lightning():
            trainer(tmp_path, 3).fit(learner, datamodule=data)
        assert data.problem(0).evaluations == 1 + 3 * 8


@pytest.mark.parametrize("config", [
    LearnerConfig(samples=2, epochs=2, imitation_steps=1, elite=1.0, elite_target="samples", prior=2.0),
    LearnerConfig(samples=2, epochs=2, imitation_steps=1, mode="refine"),
    LearnerConfig(samples=2, imitation_steps=1, algo="reinforce", risk=0.5),
], ids=["ppo", "refine", "reinforce"])
def test_one_op_graphs_and_one_device_clusters_train_on(tmp_path, config):
    """The least a pair can be: one decision, or one device (every decision's mask one device, its entropy 0).

    Imitation and every update run on them: no 0/0 in an advantage, a normalisation or a masked entropy stops the
    run (``_update`` refuses weights that are not finite).
    """
    from gnplace.toy import chain_graph, toy_cluster

    learner = PlacementLearner(config)
    data = PlacementDataModule([(chain_graph(1), toy_cluster(1)), (chain_graph(1), toy_cluster(2)),
                                (chain_graph(3), toy_cluster(1))], pairs_per_step=3, steps_per_epoch=3)
    with quiet_lightning():
        trainer(tmp_path, 3).fit(learner, datamodule=data)
    assert learner.iteration == 3 and all(bool(torch.isfinite(p).all()) for p in learner.policy.parameters())
    assert [data.problem(i).evaluations for i in range(3)] == [1 + 1 + 2 * config.samples] * 3


def test_every_step_adam_takes_has_its_gradient_norm_bounded_by_grad_clip(tmp_path, monkeypatch):
    """Imitation's steps and each PPO epoch's: the gradient Adam steps on has norm at most ``grad_clip``."""
    norms = []
    real_step = torch.optim.Adam.step

    def step(optimizer, *args, **kwargs):
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        norms.append(float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))))
        return real_step(optimizer, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", step)
    run(tmp_path, 3, config=replace(CONFIG, grad_clip=1e-3))
    assert len(norms) == CONFIG.imitation_steps + CONFIG.epochs  # 2 imitation steps, then one batch of 2 epochs
    assert max(norms) <= 1e-3 * (1 + 1e-5) and min(norms) > 1e-3 / 2  # bounded, and every gradient reached it


def test_metrics_are_logged_to_csv(tmp_path):
    from lightning.pytorch.loggers import CSVLogger

    learner = PlacementLearner(CONFIG)
    data = PlacementDataModule(pairs()[:1], steps_per_epoch=4)
    with quiet_lightning():
        t = L.Trainer(max_epochs=1, accelerator="cpu", logger=CSVLogger(tmp_path), log_every_n_steps=1,
                      enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)
        t.fit(learner, datamodule=data)
    text = (tmp_path / "lightning_logs" / "version_0" / "metrics.csv").read_text()
    for name in ("reward/mean", "losses/approx_kl", "losses/entropy", "imitation/accuracy", "best/vs_reference"):
        assert name in text


def test_each_row_of_the_log_holds_only_what_its_own_iteration_measured(tmp_path):
    """Lightning wrote a metric logged earlier in an epoch again at every later step of it, with its old value: the
    PPO rows carried the last imitation step's loss and greedy ratio."""
    import csv

    from lightning.pytorch.loggers import CSVLogger

    learner = PlacementLearner(CONFIG)  # 2 imitation steps, then PPO, all in one epoch of 4
    data = PlacementDataModule(pairs()[:1], steps_per_epoch=4)
    with quiet_lightning():
        t = L.Trainer(max_epochs=1, accelerator="cpu", logger=CSVLogger(tmp_path), log_every_n_steps=1,
                      enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)
        t.fit(learner, datamodule=data)
    with (tmp_path / "lightning_logs" / "version_0" / "metrics.csv").open(newline="") as handle:
        rows = {int(r["step"]): {k for k, v in r.items() if v != ""} for r in csv.DictReader(handle)}
    assert sorted(rows) == [0, 1, 2, 3]
    assert [step for step, names in rows.items() if "imitation/loss" in names] == [0, 1]
    assert [step for step, names in rows.items() if "greedy/after_imitation" in names] == [1]  # the end of imitation
    assert [step for step, names in rows.items() if "reward/mean" in names] == [2, 3]


def test_the_training_script_logs_checkpoints_and_resumes(tmp_path, capsys, load_script):
    from pathlib import Path

    graph = Path(__file__).resolve().parents[1] / "datasets" / "examples" / "mlp2x8w2048b512.gnpg"
    args = ["--graphs", str(graph), "--split", "all", "--clusters", "k80x2", "--samples", "4", "--epochs", "1",
            "--imitation-steps", "1", "--out", str(tmp_path), "--no-progress"]
    script = load_script("train")  # the script's main in this process: no start-up of its own
    assert script.main([*args, "--iterations", "3"]) == 0
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()
    assert list((tmp_path / "tensorboard").rglob("events.out.tfevents.*"))
    assert "reward/mean" in next((tmp_path / "logs").rglob("metrics.csv")).read_text()
    capsys.readouterr()
    assert script.main([*args, "--iterations", "5", "--resume"]) == 0
    assert "trained 5 iterations" in capsys.readouterr().out
    assert script.main(["--graphs", str(tmp_path / "missing.gnpg")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("train: error:") and err.count("\n") == 1


def test_the_training_script_stopped_by_ctrl_c_says_how_to_resume_and_exits_130(tmp_path, capsys, load_script,
                                                                                   monkeypatch):
    from pathlib import Path

    import gnplace.train

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # as fit_interruptibly raises it once the iteration under way is saved

    monkeypatch.setattr(gnplace.train, "fit", interrupted)
    graph = Path(__file__).resolve().parents[1] / "datasets" / "examples" / "mlp2x8w2048b512.gnpg"
    assert load_script("train").main(["--graphs", str(graph), "--split", "all", "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert err == "train: interrupted (--resume continues from the last checkpoint written)\n"


def test_the_training_scripts_bad_flags_are_reported_before_lightning_is_imported(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "train.py"
    graph = script.parents[1] / "datasets" / "examples" / "mlp2x8w2048b512.gnpg"
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('train_script', {str(script)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        f"codes = [module.main(['--graphs', {str(tmp_path / 'missing.gnpg')!r}]),\n"
        f"         module.main(['--graphs', {str(graph)!r}, '--clusters', 'k80x9']),\n"
        f"         module.main(['--graphs', {str(graph)!r}, '--clusters', ',']),\n"
        f"         module.main(['--graphs', {str(graph)!r}, '--lr', '-1']),\n"
        # past an index-sized integer: an OverflowError traceback from Lightning
        f"         module.main(['--graphs', {str(graph)!r}, '--steps-per-epoch', str(10**20)]),\n"
        # one REINFORCE step per batch: --epochs was ignored
        f"         module.main(['--graphs', {str(graph)!r}, '--algo', 'reinforce', '--epochs', '3'])]\n"
        "print(codes, 'lightning' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[2, 2, 2, 2, 2, 2] False", result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 6 and all(line.startswith("train: error:") for line in lines)
    assert "unknown cluster 'k80x9'" in lines[1] and "names no cluster" in lines[2] and "need lr > 0" in lines[3]
    assert "--steps-per-epoch must be at most" in lines[4] and "--algo reinforce makes one step" in lines[5]


def test_the_training_script_has_no_validation_flag(capsys, load_script):
    """``--val-samples 8`` was accepted and did nothing: the script runs no validation (pretrain does)."""
    with pytest.raises(SystemExit) as stop:
        load_script("train").main(["--graphs", "g.gnpg", "--val-samples", "8"])
    assert stop.value.code == 2 and "unrecognized arguments: --val-samples 8" in capsys.readouterr().err


def test_fit_refuses_to_overwrite_a_run_or_to_resume_one_of_other_settings_or_pairs(tmp_path):
    from gnplace.exceptions import InvalidCheckpoint
    from gnplace.train import fit

    tiny = replace(CONFIG, samples=4, epochs=1, imitation_steps=1)
    pair = [(mlp_training_graph(layers=2, width=64, batch=8), "k80x2")]
    with quiet_lightning():
        fit(pair, tmp_path, config=tiny, iterations=2, steps_per_epoch=2, progress=False)
    saved = (tmp_path / "checkpoints" / "last.ckpt").read_bytes()
    with pytest.raises(InvalidArgument, match=r"holds a run already .*: resume it \(--resume\)"):  # it was overwritten
        fit(pair, tmp_path, config=tiny, iterations=3, progress=False)
    with pytest.raises(InvalidCheckpoint, match=r"other learner settings \(lr\)"):  # a size mismatch's traceback
        fit(pair, tmp_path, config=replace(tiny, lr=0.5), iterations=3, resume=True, progress=False)
    other = [(mlp_training_graph(layers=3, width=64, batch=8), "k80x4")]  # took the other run's placements by index
    with pytest.raises(InvalidCheckpoint, match="made with other graphs or clusters"):
        fit(other, tmp_path, config=tiny, iterations=3, resume=True, progress=False)
    with pytest.raises(InvalidCheckpoint, match="made with 1 pair an iteration, not 3"):  # drew other pairs
        fit(pair, tmp_path, config=tiny, iterations=3, pairs_per_step=3, resume=True, progress=False)
    assert (tmp_path / "checkpoints" / "last.ckpt").read_bytes() == saved
    edited = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    first = next(iter(edited["state_dict"]))
    edited["state_dict"][first] = torch.zeros(3)  # re-saved: a whole file whose weights do not fit
    torch.save(edited, tmp_path / "checkpoints" / "last.ckpt")
    with pytest.raises(InvalidCheckpoint, match=rf"the weights do not fit the learner's policy \({first} is \(3,\)"):
        fit(pair, tmp_path, config=tiny, iterations=3, resume=True, progress=False)  # a size mismatch traceback
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(saved[:5000])
    with pytest.raises(InvalidCheckpoint, match="not a readable checkpoint"):
        fit(pair, tmp_path, config=tiny, iterations=3, resume=True, progress=False)


def test_a_run_of_an_older_gnplace_that_recorded_no_screen_resumes_only_without_one(tmp_path):
    """Runs of before 2026-11-28 record no ``screen`` (their learner had none): a resume with ``screen=8`` went on
    silently, a setting the checkpoint did not record being taken for the same whatever its value."""
    from gnplace.exceptions import InvalidCheckpoint
    from gnplace.train import changed_settings, fit

    tiny = replace(CONFIG, samples=4, epochs=1, imitation_steps=1)
    pair = [(mlp_training_graph(layers=2, width=64, batch=8), "k80x2")]
    with quiet_lightning():
        fit(pair, tmp_path, config=tiny, iterations=2, steps_per_epoch=2, progress=False)
    last = tmp_path / "checkpoints" / "last.ckpt"
    older = torch.load(last, weights_only=True)
    for name in ("screen", "screen_model"):  # as an older gnplace's run has it
        del older["hyper_parameters"][name]
    torch.save(older, last)
    assert changed_settings(older["hyper_parameters"], tiny) == []
    assert changed_settings(older["hyper_parameters"], replace(tiny, screen=8, screen_model="simulator")) == [
        "screen", "screen_model"]
    saved = last.read_bytes()
    with pytest.raises(InvalidCheckpoint, match=r"made with other learner settings \(screen\); resume with the same "):
        fit(pair, tmp_path, config=replace(tiny, screen=8), iterations=3, resume=True, progress=False)
    assert last.read_bytes() == saved
    with quiet_lightning():  # at the settings' defaults: the run it was
        assert fit(pair, tmp_path, config=tiny, iterations=3, steps_per_epoch=2, resume=True,
                   progress=False).iteration == 3


def test_a_run_of_an_older_gnplace_that_recorded_no_pairs_is_refused_not_resumed_on_any_pair(tmp_path):
    """Runs of before 2026-11-29 record neither their pairs' names nor their fingerprints: one made on k80x2 resumed on
    tight4 with no word, its best placement and step on k80x2 taken for tight4's."""
    from gnplace.exceptions import InvalidCheckpoint
    from gnplace.train import fit

    tiny = replace(CONFIG, samples=4, epochs=1, imitation_steps=1)
    graph = mlp_training_graph(layers=2, width=64, batch=8)
    with quiet_lightning():
        fit([(graph, "k80x2")], tmp_path, config=tiny, iterations=2, steps_per_epoch=2, progress=False)
    last = tmp_path / "checkpoints" / "last.ckpt"
    older = torch.load(last, weights_only=True)
    for name in ("pairs", "pair_fingerprints", "pairs_per_step"):  # as an older gnplace's run has it
        del older["PlacementDataModule"][name]
    torch.save(older, last)
    saved = last.read_bytes()
    for cluster in ("tight4", "k80x2"):  # which pairs it ran cannot be told
        with pytest.raises(InvalidCheckpoint, match=rf"^{re.escape(str(last))}: records no graphs or clusters \(a run "
                                                   r"of an older gnplace\), so it cannot be checked: use another "
                                                   r"folder$"):
            fit([(graph, cluster)], tmp_path, config=tiny, iterations=3, resume=True, progress=False)
    assert last.read_bytes() == saved


def test_a_training_run_logged_to_a_file_writes_progress_lines_and_resumes_counting_from_its_checkpoint(
        tmp_path, capsys, monkeypatch):
    """Where stderr is not a terminal (``nohup ... > log``), rich drew its bar once, at the end: lines instead."""
    import sys

    import gnplace.progress
    from gnplace.train import fit

    monkeypatch.setattr(gnplace.progress, "LINE_EVERY_S", 0.0)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    tiny = replace(CONFIG, samples=4, epochs=1, imitation_steps=1)
    pair = [(mlp_training_graph(layers=2, width=64, batch=8), "k80x2")]
    with quiet_lightning():
        fit(pair, tmp_path, config=tiny, iterations=2, steps_per_epoch=2)
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines()[0].startswith("train: 1/2 iterations (50%)")
    with quiet_lightning():
        fit(pair, tmp_path, config=tiny, iterations=3, steps_per_epoch=2, resume=True)
    assert capsys.readouterr().err.splitlines()[0].startswith("train: 3/3 iterations (100%)")


def test_a_restored_pair_state_that_does_not_fit_its_graph_is_refused():
    from gnplace.exceptions import InvalidCheckpoint

    data = PlacementDataModule(pairs(), pairs_per_step=2, steps_per_epoch=4, seed=3)
    state = PlacementDataModule(pairs()[::-1], pairs_per_step=2, steps_per_epoch=4, seed=3)
    state.problem(0), state.problem(1)
    data.load_state_dict(state.state_dict())  # pair 0's state is the other graph's
    with pytest.raises(InvalidCheckpoint, match="does not fit it .* a checkpoint of other graphs or clusters"):
        data.problem(0)
    same = PlacementDataModule(pairs(), pairs_per_step=2, steps_per_epoch=4, seed=3)
    same.problem(0)
    edited = same.state_dict()
    edited["problems"][0]["best_step"] = "x"  # an edited file: was a ValueError traceback
    fresh = PlacementDataModule(pairs(), pairs_per_step=2, steps_per_epoch=4, seed=3)
    fresh.load_state_dict(edited)
    with pytest.raises(InvalidCheckpoint, match="state of pair .* is malformed \\(ValueError: could not convert"):
        fresh.problem(0)
    edited = same.state_dict()
    edited["problems"][0]["refiner"] = {"current": [[0, 7]], "step_time": [1.0], "busy": [[0.0, 0.0]], "steps": 1}
    fresh = PlacementDataModule(pairs(), pairs_per_step=2, steps_per_epoch=4, seed=3)
    fresh.load_state_dict(edited)
    with pytest.raises(InvalidCheckpoint, match="refinement chains of pair .* are malformed \\(ValueError"):
        fresh.problem(0)


@pytest.mark.parametrize("sampled, message", [
    # restored without a word: the elite target of elite_target: samples, of other ops or devices
    (lambda best: best[:-1], r"best sampled placement of pair .* does not fit it \(\d+ ops for \d+"),
    (lambda best: [7] * len(best), r"best sampled placement of pair .* or a device outside its 2\)"),
    # an OverflowError traceback
    (lambda best: [10**30] * len(best), r"state of pair .* is malformed \(OverflowError: "),
], ids=["short", "device", "overflow"])
def test_a_restored_best_sampled_placement_that_does_not_fit_its_pair_is_refused(sampled, message):
    from gnplace.exceptions import InvalidCheckpoint

    same = PlacementDataModule(pairs(), pairs_per_step=2, steps_per_epoch=4, seed=3)
    same.problem(0)
    edited = same.state_dict()
    best = edited["problems"][0]["best_devices"]
    edited["problems"][0].update(sample_best_devices=sampled(best), sample_best_step=1.0)
    fresh = PlacementDataModule(pairs(), pairs_per_step=2, steps_per_epoch=4, seed=3)
    fresh.load_state_dict(edited)
    with pytest.raises(InvalidCheckpoint, match=message):
        fresh.problem(0)


def test_beta_adapts_to_the_kl_of_every_pair_of_the_last_epoch(tmp_path, monkeypatch):
    """With two pairs a batch, beta followed the last pair's KL alone (a DDP run of one pair a rank averaged both)."""
    import gnplace.train as train

    infos, kls = [], []
    ppo_loss, adapt_beta = train.ppo_loss, train.adapt_beta
    monkeypatch.setattr(train, "ppo_loss", lambda *a, **k: (lambda out: infos.append(out[1]) or out)(ppo_loss(*a, **k)))
    monkeypatch.setattr(train, "adapt_beta", lambda beta, kl, target: kls.append(kl) or adapt_beta(beta, kl, target))
    run(tmp_path, 1, config=replace(CONFIG, imitation_steps=0, elite=0.0))
    assert len(kls) == 1 and len(infos) == 2 * CONFIG.epochs  # two pairs, each epoch
    last = [info["losses/approx_kl"] for info in infos[-2:]]  # the last epoch's two pairs
    assert last[0] != last[1] and kls[0] == pytest.approx(np.mean(last), rel=1e-12)


def test_the_incumbent_imitated_follows_a_new_best_of_the_same_step():
    """An overflowing reference gives way to the first fitting placement, whatever its step: one of the same step
    left imitation and the elite pull on the reference's trajectory (cached by the best step alone)."""
    from gnplace.rl.agent import teacher_forced

    learner = PlacementLearner(CONFIG)
    problem = PlacementDataModule(pairs()[:1], seed=3).problem(0)
    problem.best_oom = True  # as if the reference overflowed
    before = learner._incumbent(problem)
    mirrored = problem.inp.cluster.num_devices - 1 - problem.best_devices
    problem.offer(mirrored, problem.best_step, False, evaluations=1)  # fits, and times the same
    assert np.array_equal(problem.best_devices, mirrored) and not problem.best_oom
    expected = teacher_forced(problem.mdp, problem.best_groups()).actions
    assert not torch.equal(before.actions, expected)
    assert torch.equal(learner._incumbent(problem).actions, expected)


def test_a_malformed_screen_state_in_a_checkpoint_is_refused_with_one_error():
    from gnplace.exceptions import InvalidCheckpoint

    same = PlacementDataModule(pairs(), pairs_per_step=2, steps_per_epoch=4, seed=3)
    same.problem(1).start_screen()
    groups = same.problem(1).inp.num_groups
    for screen, found in (({"groups": [[0, 7] * (groups // 2)], "log_step": [0.5]}, "device 7 outside 0..3"),
                          ({"groups": [[0, 1]], "log_step": [0.5]}, f"2 devices for {groups} groups"),
                          ({"groups": [[0] * groups], "log_step": ["x"]}, "ValueError")):
        edited = same.state_dict()
        edited["problems"][1]["screen"] = screen  # an edited file: a traceback when the screen first ranked
        fresh = PlacementDataModule(pairs(), pairs_per_step=2, steps_per_epoch=4, seed=3)
        fresh.load_state_dict(edited)
        with pytest.raises(InvalidCheckpoint, match=f"screen of pair .* is malformed .*{found}"):
            fresh.problem(1)


@pytest.mark.parametrize("state, found", [({"iteration": "x"}, "iteration"), ({"beta": "x"}, "beta"),
                                          ({"beta": float("nan")}, "beta"), ({"beta": -1.0}, "beta"), ({"beta": 10**400}, "beta"),
                                          ({"rng": {"state": 3}}, "sampling generator"), ({"iteration": -2}, "iteration")])
def test_a_malformed_learner_state_in_a_checkpoint_is_one_error_and_changes_nothing(state, found):
    """fit(resume=True) and a search read it with no check of their own (pretraining checks it first)."""
    from gnplace.exceptions import InvalidCheckpoint

    learner = PlacementLearner(CONFIG)
    before = learner.rng.bit_generator.state
    with pytest.raises(InvalidCheckpoint, match=f"learner's {found} .* is malformed; cannot resume from it"):
        learner.on_load_checkpoint({"gnplace": {"iteration": 3, "beta": 0.5, **state}})
    assert learner.iteration == 0 and learner.beta == CONFIG.beta and learner.rng.bit_generator.state == before
    learner.on_load_checkpoint({"gnplace": {"iteration": 3, "beta": 0.5, "rng": before}})
    assert learner.iteration == 3 and learner.beta == 0.5


def test_a_resume_compares_the_pairs_files_by_content_not_by_the_path_typed(tmp_path, monkeypatch):
    """A graph file rewritten in place resumed with the old graph's reference step and incumbent; the same file
    named by another path (relative, from another folder) was refused."""
    from gnplace.exceptions import InvalidCheckpoint
    from gnplace.graph_io import save_graph
    from gnplace.train import fit

    tiny = replace(CONFIG, samples=4, epochs=1, imitation_steps=1)
    (tmp_path / "data").mkdir()
    save_graph(mlp_training_graph(layers=2, width=64, batch=8), tmp_path / "data" / "g.gnpg")
    monkeypatch.chdir(tmp_path / "data")
    with quiet_lightning():
        fit([("g.gnpg", "k80x2")], tmp_path / "run", config=tiny, iterations=2, steps_per_epoch=2, progress=False)
        monkeypatch.chdir(tmp_path)  # the same file by another path: it resumes
        fit([(str(tmp_path / "data" / "g.gnpg"), "k80x2")], tmp_path / "run", config=tiny, iterations=3,
            steps_per_epoch=2, resume=True, progress=False)
    saved = (tmp_path / "run" / "checkpoints" / "last.ckpt").read_bytes()
    save_graph(mlp_training_graph(layers=2, width=64, batch=64), tmp_path / "data" / "g.gnpg")  # as many ops
    with pytest.raises(InvalidCheckpoint, match="made with other graphs or clusters"):
        fit([("data/g.gnpg", "k80x2")], tmp_path / "run", config=tiny, iterations=4, resume=True, progress=False)
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").read_bytes() == saved


def _two_iterations(tmp_path):
    """A tiny search of one pair run for two iterations in ``tmp_path``: its pair, config and ``last.ckpt``."""
    from gnplace.train import fit

    tiny = replace(CONFIG, samples=4, epochs=1, imitation_steps=1)
    pair = [(mlp_training_graph(layers=2, width=64, batch=8), "k80x2")]
    with quiet_lightning():
        fit(pair, tmp_path, config=tiny, iterations=2, steps_per_epoch=2, progress=False)
    return pair, tiny, tmp_path / "checkpoints" / "last.ckpt"


@pytest.mark.parametrize("damage", ["loops", "adam", "pairs", "no_pairs"])
def test_a_resume_from_a_damaged_section_is_one_error_before_lightning(tmp_path, damage):
    """An empty loops was a KeyError, an Adam moment of another shape a RuntimeError, the pairs' state a list an
    AttributeError, all after the log folder was made; fine-tuning without its pairs' state spent its budget anew."""
    from gnplace.exceptions import InvalidCheckpoint
    from gnplace.train import fit

    pair, tiny, path = _two_iterations(tmp_path)
    data = torch.load(path, weights_only=True)
    if damage == "loops":
        data["loops"] = {}
    elif damage == "adam":
        state = data["optimizer_states"][0]["state"]
        state[0]["exp_avg"] = torch.zeros(3)
    elif damage == "pairs":
        data["PlacementDataModule"]["problems"] = []
    else:
        del data["PlacementDataModule"]
    torch.save(data, path)
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    with pytest.raises(InvalidCheckpoint, match="missing or damaged"):
        fit(pair, tmp_path, config=tiny, iterations=3, resume=True, progress=False)
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == logs  # no new log folder


def test_a_resume_from_damaged_pair_states_is_one_error_before_lightning(tmp_path):
    """A pair's state as a list, a pair key "x" or a rank's pairs as a list were an AttributeError or a ValueError
    traceback from inside Lightning's fit (check_training_state checked only that the pairs were a mapping)."""
    from gnplace.exceptions import InvalidCheckpoint
    from gnplace.train import fit

    pair, tiny, path = _two_iterations(tmp_path)
    good = torch.load(path, weights_only=True)
    assert set(good["PlacementDataModule"]["problems"]) == {0}
    for damaged in ({"problems": {0: [1, 2]}}, {"problems": {"x": {}}}, {"problems": {}, "ranks": [[1]]}):
        torch.save({**good, "PlacementDataModule": {**good["PlacementDataModule"], **damaged}}, path)
        logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
        with pytest.raises(InvalidCheckpoint, match=r"pairs' state \(PlacementDataModule\) is missing or damaged"):
            fit(pair, tmp_path, config=tiny, iterations=3, resume=True, progress=False)
        assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == logs


def test_imitation_times_only_the_greedy_placement_of_its_last_iterations_pairs(tmp_path):
    """The module docstring said that during imitation "no placement is timed"; the last imitation iteration times
    the greedy placement of each of its pairs (``greedy/after_imitation``), one evaluation each."""
    import gnplace.train as train_module
    from gnplace.sim.timer import BudgetedTimer

    counted = BudgetedTimer(Simulator())
    learner = PlacementLearner(replace(CONFIG, imitation_steps=3), counted)
    data = PlacementDataModule(pairs(), pairs_per_step=2, steps_per_epoch=4, seed=3)
    spent = []
    with quiet_lightning():
        t = L.Trainer(max_epochs=-1, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=False, default_root_dir=tmp_path,
                      callbacks=[StopAfter(3), _Spent(counted, spent)])
        t.fit(learner, datamodule=data)
    assert spent == [0, 0, 2]  # the two pairs of the last imitation iteration, greedily
    doc = " ".join((train_module.__doc__ or "").split())
    assert "no placement is timed" not in doc and "only the last imitation iteration times a placement" in doc


class _Spent(L.Callback):
    """Records the timer's evaluations after each iteration."""

    def __init__(self, timer, into):
        self.timer, self.into = timer, into

    def on_train_batch_end(self, *args, **kwargs):
        self.into.append(self.timer.evaluations)


def test_fit_logs_every_iteration_whatever_its_steps_per_epoch(tmp_path):
    """fit's docstring called steps_per_epoch "the logging cadence": the logs hold a row every iteration."""
    import csv

    from gnplace.train import fit

    fit(pairs()[:1], tmp_path / "run", config=replace(CONFIG, imitation_steps=1), iterations=3, steps_per_epoch=100,
        progress=False)
    (metrics,) = (tmp_path / "run" / "logs").glob("version_*/metrics.csv")
    with metrics.open(newline="") as handle:
        assert [int(r["step"]) for r in csv.DictReader(handle)] == [0, 1, 2]
    assert "logging cadence" not in (fit.__doc__ or "")


def test_an_iteration_draws_each_pair_at_most_once():
    """pairs_per_step of 4 pairs of 5 are 4 different pairs (a pair drawn twice weighed twice in the update)."""
    data = PlacementDataModule([(f"g{i}", "k80x2") for i in range(5)], pairs_per_step=4, seed=0)
    data._problems = dict(enumerate("abcde"))  # the draw only picks indices
    assert all(len(set(data.batch(i))) == 4 for i in range(20))
    assert len(data.batch(0)) == 4
