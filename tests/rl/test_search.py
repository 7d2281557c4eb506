"""``ppo`` and ``reinforce``: a fresh policy trained on one graph, the best placement seen returned."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.exceptions import InvalidArgument, InvalidCheckpoint, UnknownName
from gnplace.graph import OpGraph
from gnplace.limits import MAX_BUDGET
from gnplace.placers import PLACERS, get_placer, make_placer
from gnplace.placers.exact import brute_force
from gnplace.rl.search import RUN_KEY, FineTunePlacer, PPOSearchPlacer, ReinforceSearchPlacer
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import StepTimer
from gnplace.toy import layered_graph, mlp_training_graph


class StandIn(StepTimer):
    """A timer that is not the simulator (real steps' stand-in: it times with the simulator underneath)."""

    def time(self, graph, cluster, placement, *, timeline=False):
        return Simulator().time(graph, cluster, placement, timeline=timeline)

FAST = dict(samples=16, epochs=3, imitation_steps=3)
REINFORCE_FAST = dict(samples=16, imitation_steps=3)  # one step per batch: no epochs


def test_registered_as_learned_search_placers():
    for name, cls in (("ppo", PPOSearchPlacer), ("reinforce", ReinforceSearchPlacer)):
        info = PLACERS.info(name)
        assert PLACERS[name] is cls and info.learned and info.accepts == frozenset({"timer", "budget"})
    assert make_placer("reinforce", budget=10).config.algo == "reinforce"


def test_ppo_finds_the_best_placement_of_two_independent_chains(two_chains):
    g, c = two_chains(4), load_cluster("k80x2")
    best = Simulator().time(g, c, brute_force(g, c)).step_time
    # start from one device (not auto, which already splits the chains): the policy must find the split
    placer = PPOSearchPlacer(budget=161, reference="single", **FAST)
    p = placer.place(g, c, seed=0)
    assert Simulator().time(g, c, p).step_time == pytest.approx(best)
    assert placer.last_evaluations <= 161 and placer.last_history[0][0] == 1


@pytest.mark.parametrize("mode", ["construct", "refine"])
def test_never_worse_than_its_start(mode):
    g, c = layered_graph(60, seed=2).replace(group=np.arange(60) // 3), load_cluster("k80x4")
    sim = Simulator()
    auto = sim.time(g, c, make_placer("auto").place(g, c, seed=0)).step_time
    placer = PPOSearchPlacer(budget=97, mode=mode, **FAST)
    assert sim.time(g, c, placer.place(g, c, seed=0)).step_time <= auto + 1e-15
    steps = [s for _, s in placer.last_history]
    assert steps == sorted(steps, reverse=True) and steps[0] == pytest.approx(auto)


def test_same_seed_same_placement_and_budget_respected(counting_simulator):
    """The budget bounds the timer's real calls, ``auto``'s own six candidates aside (not counted)."""
    g, c = mlp_training_graph(layers=4, width=256, batch=32, branches=2), load_cluster("k80x4")
    runs = [PPOSearchPlacer(budget=65, **FAST).place(g, c, seed=s).devices.tolist() for s in (5, 5)]
    assert runs[0] == runs[1]
    placer = ReinforceSearchPlacer(budget=65, timer=counting_simulator, memo=False, **REINFORCE_FAST)
    placer.place(g, c, seed=1)
    by_auto = type(counting_simulator)()
    make_placer("auto", timer=by_auto).place(g, c, seed=1)  # the reference, under the caller's seed
    assert counting_simulator.evaluations - by_auto.evaluations == placer.last_evaluations <= 65
    assert placer.last_evaluations > 65 - FAST["samples"]  # and it is spent: less than one batch is left
    # (with the memo, repeats cost nothing and a search may end with budget left: the next test)


def test_polishing_spends_the_rest_of_the_budget_on_annealing(monkeypatch):
    """Half the budget goes to an annealing chain from the search's best placement, run last, with what the search left."""
    from gnplace.placers import annealing

    chains = []
    place = annealing.AnnealingPlacer.place

    def spy(self, graph, cluster, *, seed=None):
        chains.append((self.budget, Simulator().time(graph, cluster, self.start.place(graph, cluster)).step_time))
        return place(self, graph, cluster, seed=seed)

    monkeypatch.setattr(annealing.AnnealingPlacer, "place", spy)
    g, c = layered_graph(60, seed=3).replace(group=np.arange(60) // 3), load_cluster("k80x4")
    placer = PPOSearchPlacer(budget=100, polish=0.5, prelude=0.0, **FAST)
    placed = placer.place(g, c, seed=0)
    assert len(chains) == 1 and chains[0][0] >= 50  # its share, and what the memoised search did not spend
    assert placer.last_evaluations == 100 and placer.last_polish_evaluations == chains[0][0]
    unpolished = PPOSearchPlacer(budget=100, polish=0.5, prelude=0.0, memo=False, **FAST)
    unpolished.place(g, c, seed=0)
    assert [budget for budget, _ in chains[1:]] == [50]  # without the memo the search spends its own share
    assert 50 < unpolished.last_evaluations <= 100
    start = chains[0][1]  # the search's best, where the chain began
    assert start <= placer.last_reference_step * (1 + 1e-9)
    assert Simulator().time(g, c, placed).step_time <= start * (1 + 1e-9) and placer.last_step <= start * (1 + 1e-9)


def test_edge_cases_and_bad_options():
    c = load_cluster("k80x2")
    assert PPOSearchPlacer(budget=1).place(mlp_training_graph(layers=2, width=8, batch=4), c).devices.shape == (14,)
    assert PPOSearchPlacer().place(OpGraph([], []), c).devices.tolist() == []
    for bad in (dict(budget=0), dict(polish=1.0), dict(algo="dqn"), dict(mode="mcts"), dict(samples=1),
                dict(max_nodes=2.5), dict(max_nodes=0), dict(zero_shot_samples=2.7), dict(zero_shot_samples=True),
                # refused only after the reference and the prelude were timed (real steps on a real timer)
                dict(hidden=0), dict(layers=10**6), dict(screen=4, screen_model="simulator")):
        with pytest.raises(InvalidArgument):  # max_nodes=2.5 and zero_shot_samples=2.7 were cut to 2
            PPOSearchPlacer(**bad)


def test_the_reference_is_auto_under_the_callers_seed():
    """``ppo --seed s`` is never slower than ``auto --seed s`` (metis, one of auto's candidates, is seeded)."""
    g = layered_graph(120, width=6, seed=2).replace(group=[i // 2 for i in range(120)])
    c, sim = load_cluster("v100x8"), Simulator()  # auto picks metis here, and metis's partition moves with the seed
    for seed in range(2):
        auto = make_placer("auto").place(g, c, seed=seed)
        found = PPOSearchPlacer(budget=1).place(g, c, seed=seed)  # no budget to search: the reference itself
        np.testing.assert_array_equal(found.devices, auto.devices)
        assert sim.time(g, c, PPOSearchPlacer(budget=40, samples=8, epochs=1, imitation_steps=1).place(
            g, c, seed=seed)).step_time <= sim.time(g, c, auto).step_time


def test_fine_tuning_returns_the_better_of_its_search_and_the_zero_shot_placement():
    from gnplace.graph_io import load_graph
    from gnplace.rl.search import FineTunePlacer

    g, c = load_graph("datasets/examples/mlp2x8w2048b512.gnpg"), load_cluster("k80x4")
    sim = Simulator()
    placer = FineTunePlacer(budget=100, samples=8, epochs=1)
    found = sim.time(g, c, placer.place(g, c, seed=0)).step_time
    reference, zero_shot = placer.last_reference_step, placer.last_zero_shot_step
    assert zero_shot is not None and reference is not None
    (first, at_first), (spent, at_spent) = placer.last_history[:2]
    assert (first, at_first) == (1, reference)
    # greedy on 3 device sets, the fastest alone, at op level; auto (18 evaluations of its own), its placement, the
    # greedy decode and 16 samples around it (the shipped checkpoint was pretrained so); each of the two shipped
    # constructors' greedy placement and 4 samples; the last round's greedy decode and 4 samples; the winner timed again
    assert spent == 1 + 57 and at_spent == min(reference, zero_shot)  # counted from when it was timed
    assert found == placer.last_step <= min(reference, zero_shot) and placer.last_evaluations <= 100
    steps = [s for _, s in placer.last_history]
    assert steps == sorted(steps, reverse=True)
    centred = FineTunePlacer(budget=100, samples=8, epochs=1, zero_shot_start=True)  # revision 6's start
    centred.place(g, c, seed=0)
    assert centred.last_history[1] == (1 + 57, min(reference, zero_shot))
    plain = FineTunePlacer(budget=100, samples=8, epochs=1, zero_shot=False)
    plain.place(g, c, seed=0)
    assert plain.last_zero_shot_step is None and 1 < plain.last_history[1][0] <= 1 + 8  # new samples only
    short = FineTunePlacer(budget=50, samples=8, epochs=1)  # too small a budget for the zero-shot candidates
    short.place(g, c, seed=0)
    assert short.last_zero_shot_step is None
    needed = short.last_zero_shot_budget_needed  # the reference, the candidates (at most), one batch of 8
    assert needed is not None and 1 + 57 + 1 + 2 * 8 <= needed <= 100
    assert placer.last_zero_shot_budget_needed is None and plain.last_zero_shot_budget_needed is None
    short.place(g, load_cluster("k80x2"), seed=0)  # another call says its own, not the last one's
    assert short.last_zero_shot_budget_needed is not None and short.last_zero_shot_budget_needed < needed


def test_the_prelude_and_the_polish_keep_annealing_revision_4s_chain(monkeypatch):
    """``ppo`` revision 11 was measured with chains that never reheat; annealing's own default does since revision 5."""
    from gnplace.placers import annealing

    reheats = []
    place = annealing.AnnealingPlacer.place

    def spy(self, graph, cluster, *, seed=None):
        reheats.append(self.reheat_after)
        return place(self, graph, cluster, seed=seed)

    monkeypatch.setattr(annealing.AnnealingPlacer, "place", spy)
    g, c = layered_graph(60, seed=3).replace(group=np.arange(60) // 3), load_cluster("k80x4")
    PPOSearchPlacer(budget=100, prelude=0.3, polish=0.3, **FAST).place(g, c, seed=0)
    assert len(reheats) == 2 and reheats == [None, None]
    assert annealing.AnnealingPlacer().reheat_after == 0.2


def test_an_annealing_prelude_starts_the_search_from_annealings_best():
    g, c = layered_graph(60, seed=3).replace(group=np.arange(60) // 3), load_cluster("k80x4")
    sim = Simulator()
    placer = PPOSearchPlacer(budget=100, prelude=0.5, **FAST)
    found = sim.time(g, c, placer.place(g, c, seed=0)).step_time
    assert placer.last_evaluations <= 100
    evaluations, start = placer.last_history[1]
    assert evaluations == 1 + 50 and found <= start <= placer.last_history[0][1]
    with pytest.raises(InvalidArgument):
        PPOSearchPlacer(prelude=0.6, polish=0.5)


def test_search_checkpoint_records_its_run_and_a_resume_with_other_settings_is_refused(tmp_path):
    import torch

    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    placer = PPOSearchPlacer(budget=50, out=str(tmp_path), **FAST)
    placer.place(g, c, seed=0)
    last = tmp_path / "last.ckpt"
    saved = last.read_bytes()
    run = torch.load(last, weights_only=True)[RUN_KEY]
    expected = placer.run_identity(g, c)
    expected["settings"]["seed"] = 0
    start = run.pop("start")  # what the search timed before training: no zero-shot step, the prelude's evaluations
    assert start == {"zero_shot": None, "prelude": 10, "budget_needed": None}
    assert run == expected and run["cluster_name"] == "k80x2" and run["checkpoint"] is None
    again = PPOSearchPlacer(budget=50, out=str(tmp_path), resume=True, max_nodes=8, **FAST)
    with pytest.raises(InvalidCheckpoint, match=r"search run of other settings \(max_nodes\)"):
        again.place(g, c, seed=0)
    assert last.read_bytes() == saved
    narrow = PPOSearchPlacer(budget=50, out=str(tmp_path), resume=True, widen=False, **FAST)
    with pytest.raises(InvalidCheckpoint, match=r"search run of other settings \(widen\)"):
        narrow.place(g, c, seed=0)
    assert last.read_bytes() == saved
    placeto_mode = PPOSearchPlacer(budget=50, out=str(tmp_path), resume=True, timer=Simulator("placeto"), **FAST)
    with pytest.raises(InvalidCheckpoint, match=r"search run of other settings \(timer_mode\)"):  # other step times
        placeto_mode.place(g, c, seed=0)
    assert last.read_bytes() == saved
    edited = torch.load(last, weights_only=True)
    first = next(iter(edited["state_dict"]))
    edited["state_dict"][first] = torch.zeros(3)  # a whole file whose weights do not fit: a size mismatch traceback
    torch.save(edited, last)
    with pytest.raises(InvalidCheckpoint, match=rf"the weights do not fit the search's policy \({first} is"):
        PPOSearchPlacer(budget=50, out=str(tmp_path), resume=True, **FAST).place(g, c, seed=0)
    last.write_bytes(saved)
    PPOSearchPlacer(budget=50, out=str(tmp_path), resume=True, **FAST).place(g, c, seed=0)  # the same run resumes


def test_a_run_that_recorded_its_clusters_earlier_fingerprint_resumes(tmp_path, k80x2_written_out):
    """A run made before 2026-12-04 (32c87da) on a cluster file that writes the k80's memory out (12 GiB) recorded the
    fingerprint of then, and its resume was refused as 'another cluster (k80x2 with other devices)'."""
    import torch

    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster(k80x2_written_out)
    assert c.earlier_fingerprint() != c.fingerprint() == load_cluster("k80x2").fingerprint()
    out = tmp_path / "run"
    PPOSearchPlacer(budget=50, out=str(out), **FAST).place(g, c, seed=0)
    old = torch.load(out / "last.ckpt", weights_only=True)
    old[RUN_KEY]["cluster"] = c.earlier_fingerprint()  # as that gnplace recorded it
    torch.save(old, out / "last.ckpt")
    PPOSearchPlacer(budget=50, out=str(out), resume=True, **FAST).place(g, c, seed=0)
    old[RUN_KEY]["cluster"] = load_cluster("k80x4").earlier_fingerprint()  # what is another cluster still is
    torch.save(old, out / "last.ckpt")
    with pytest.raises(InvalidCheckpoint, match=r"another cluster \(k80x2 with other devices\)"):
        PPOSearchPlacer(budget=50, out=str(out), resume=True, **FAST).place(g, c, seed=0)


def test_a_policy_trained_in_one_mdp_is_refused_by_the_other(tmp_path):
    """A refine-mode run's weights read the refinement MDP's dynamic features (stay_cost first), of the same
    width as the constructive ones: zero-shot placement decoded them constructively, with no error."""
    from gnplace.rl.zeroshot import SHIPPED_CHECKPOINT, PolicyPlacer

    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    PPOSearchPlacer(budget=40, out=str(tmp_path), mode="refine", **FAST).place(g, c, seed=0)
    refined = str(tmp_path / "last.ckpt")
    with pytest.raises(InvalidCheckpoint, match="trained with mode=refine"):
        PolicyPlacer(checkpoint=refined)
    with pytest.raises(InvalidCheckpoint, match="trained with mode=refine"):
        PPOSearchPlacer(checkpoint=refined)  # a constructive search from it
    with pytest.raises(InvalidCheckpoint, match="trained with mode=construct"):
        PPOSearchPlacer(checkpoint=str(SHIPPED_CHECKPOINT), mode="refine")
    PPOSearchPlacer(checkpoint=refined, mode="refine", budget=40, **FAST).place(g, c, seed=0)  # the MDP it knows
    with pytest.raises(InvalidArgument, match="zero-shot placement decodes in the constructive MDP"):
        FineTunePlacer(checkpoint=refined, mode="refine")  # (its zero-shot candidates named the checkpoint's mode)
    FineTunePlacer(checkpoint=refined, mode="refine", zero_shot=False)


@pytest.mark.heavy
@pytest.mark.parametrize("cls", [PPOSearchPlacer, FineTunePlacer])
def test_a_resumed_search_takes_its_start_from_the_checkpoint(tmp_path, monkeypatch, cls):
    """The prelude (ppo) and the zero-shot candidates (finetune) are not timed again on resume: on a real
    timer they are real steps, and a new measurement of the zero-shot candidate would not be the run's."""
    import torch

    from gnplace.callbacks import TimedCheckpoint

    g, c = layered_graph(60, seed=1).replace(group=np.arange(60) // 3), load_cluster("k80x2")
    settings = dict(budget=300, samples=16, epochs=1, progress=False)
    straight = cls(**settings)
    expected = straight.place(g, c, seed=0)
    saves, original = [], TimedCheckpoint.on_train_batch_end

    def stop_after_three_saves(self, trainer, *args):
        original(self, trainer, *args)
        saves.append(trainer.global_step)
        if len(saves) == 3:
            raise KeyboardInterrupt

    out = str(tmp_path / "run")
    with monkeypatch.context() as patch:
        patch.setattr(TimedCheckpoint, "on_train_batch_end", stop_after_three_saves)
        with pytest.raises(KeyboardInterrupt):
            cls(out=out, checkpoint_every_s=1e-9, **settings).place(g, c, seed=0)
    saved_start = torch.load(tmp_path / "run" / "last.ckpt", weights_only=True)[RUN_KEY]["start"]
    is_ppo = cls is PPOSearchPlacer  # ppo anneals first; finetune times its zero-shot candidates
    assert (saved_start["zero_shot"] is None) == is_ppo and (saved_start["prelude"] > 0) == is_ppo

    def timed_again(*args):
        raise AssertionError("the resumed run timed its start again")

    monkeypatch.setattr(cls, "_zero_shot", timed_again)
    monkeypatch.setattr(cls, "_annealing_start", timed_again)
    resumed = cls(out=out, resume=True, checkpoint_every_s=1e-9, **settings)
    placement = resumed.place(g, c, seed=0)
    assert torch.load(tmp_path / "run" / "last.ckpt", weights_only=True)[RUN_KEY]["start"] == saved_start  # kept
    assert np.array_equal(placement.devices, expected.devices)
    assert resumed.last_history == straight.last_history and resumed.last_evaluations == straight.last_evaluations
    assert resumed.last_zero_shot_step == straight.last_zero_shot_step


@pytest.mark.parametrize("name", ["ppo", "reinforce", "finetune", "policy", "placeto", "rnn_pg"])
def test_a_step_of_no_work_places_without_dividing_by_zero(name):
    """Zero-FLOP ops on devices without launch overhead time 0 s: legal input (it was a ZeroDivisionError)."""
    import warnings

    from gnplace.toy import toy_cluster

    graph, cluster = OpGraph(["a", "b"], [(0, 1)]), toy_cluster(2, launch_overhead=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no log(0) or 0/0 in features and rewards either
        placer = make_placer(name, **({} if name == "policy" else {"budget": 50}))
        placement = placer.place(graph, cluster, seed=0)
    assert Simulator().time(graph, cluster, placement).step_time == 0.0


def test_only_fine_tuning_records_the_constructor_its_zero_shot_step_uses():
    from gnplace.graph_io import load_graph
    from gnplace.rl.search import ZERO_SHOT_CONSTRUCTOR_SAMPLES, FineTunePlacer, PPOSearchPlacer
    from gnplace.rl.zeroshot import PolicyPlacer

    g, c = load_graph("datasets/examples/mlp2x8w2048b512.gnpg"), load_cluster("k80x4")
    assert "constructor" not in PPOSearchPlacer(budget=100).run_identity(g, c)["settings"]  # older runs resume
    digests = FineTunePlacer(budget=100).run_identity(g, c)["settings"]["constructor"]
    assert [len(d) for d in digests] == [64, 64] and digests[0] != digests[1]  # both shipped constructors
    # the zero-shot step's revision, only where there is one: a run without it resumes across policy revisions
    # policy revision 11's candidates (4 constructor samples), whatever policy's own default since: runs resume;
    # "11.1": with revision 20's greedy decodes on the pretrained decision graph
    assert FineTunePlacer(budget=100).run_identity(g, c)["settings"]["zero_shot_revision"] == "11.1"
    assert PolicyPlacer.revision != "11" and PolicyPlacer().constructor_samples != ZERO_SHOT_CONSTRUCTOR_SAMPLES
    assert "zero_shot_revision" not in FineTunePlacer(budget=100, zero_shot=False).run_identity(g, c)["settings"]
    # revision 12 seeds the zero-shot step with the caller's seed: a revision 11 run does not resume under it
    assert FineTunePlacer(budget=100).run_identity(g, c)["settings"]["zero_shot_seed"] == "caller"
    assert "zero_shot_seed" not in FineTunePlacer(budget=100, zero_shot=False).run_identity(g, c)["settings"]
    # the screen, where a search screens: runs of before it, which screened none, resume with screen 1
    assert "screen" not in PPOSearchPlacer(budget=100).run_identity(g, c)["settings"]
    assert FineTunePlacer(budget=100).run_identity(g, c)["settings"]["screen"] == 48
    assert "screen" not in FineTunePlacer(budget=100, screen=1).run_identity(g, c)["settings"]
    # what the screen starts from: the simulator beside real steps ("auto"), nothing with the simulator as the timer
    assert "screen_model" not in FineTunePlacer(budget=100).run_identity(g, c)["settings"]
    real = FineTunePlacer(budget=100, timer=StandIn())
    assert real.config.screen_model == "simulator" and real.run_identity(g, c)["settings"]["screen_model"] == "simulator"
    assert FineTunePlacer(budget=100, timer=StandIn(), screen_model="learned").config.screen_model == "learned"


def test_fine_tuning_starts_from_the_placement_policy_gives_for_the_same_seed():
    from gnplace.graph_io import load_graph
    from gnplace.rl.search import ZERO_SHOT_CONSTRUCTOR_SAMPLES, ZERO_SHOT_REFINE, FineTunePlacer
    from gnplace.rl.zeroshot import PolicyPlacer

    g, c = load_graph("datasets/ptb/ptb_002.gnpg"), load_cluster("k80x4")  # its zero-shot step moves with the seed
    sim = Simulator()
    # what the budget pays for: policy revision 11's candidates (one last round of 4 samples, no annealing polish)
    zero_shot_placer = PolicyPlacer(constructor_samples=ZERO_SHOT_CONSTRUCTOR_SAMPLES, constructor_refine=0,
                                    last_rounds=1, refine=ZERO_SHOT_REFINE, polish=0, module_chain=0)
    for seed in (0, 1):
        placer = FineTunePlacer(budget=80, samples=8, epochs=1)
        placer.place(g, c, seed=seed)
        zero_shot = sim.time(g, c, zero_shot_placer.place(g, c, seed=seed)).step_time
        assert placer.last_zero_shot_step == zero_shot  # `gnplace place -p policy --seed S -O ...`'s placement
        assert placer.last_step is not None and placer.last_step <= zero_shot  # so never worse than it


def test_a_search_times_each_distinct_placement_once_and_spends_its_budget_on_new_ones():
    """``memo``: no placement reaches the timer twice, so every evaluation counted is a new placement."""
    from gnplace.rl.problem import placement_key

    class Recording(Simulator):
        def __init__(self) -> None:
            super().__init__()
            self.keys: list[bytes] = []

        def time_batch(self, graph, cluster, placements):
            self.keys += [placement_key(np.asarray(row)) for row in placements]
            return super().time_batch(graph, cluster, placements)

    g, c = mlp_training_graph(layers=4, width=256, batch=32, branches=2), load_cluster("k80x4")
    by_auto = Recording()
    make_placer("auto", timer=by_auto).place(g, c, seed=0)  # the reference's own candidates come first
    timer = Recording()
    placer = PPOSearchPlacer(budget=120, timer=timer, prelude=0.0, **FAST)
    placer.place(g, c, seed=0)
    assert timer.keys[:len(by_auto.keys)] == by_auto.keys
    searched = timer.keys[len(by_auto.keys):]
    policy = searched[:len(searched) - placer.last_polish_evaluations]  # the polish's chain comes last
    assert len(policy) == len(set(policy)) > 0
    assert placer.last_evaluations == 1 + len(searched) == 120  # the reference, new placements, then the polish
    unmemoised = PPOSearchPlacer(budget=120, memo=False, prelude=0.0, **FAST)
    unmemoised.place(g, c, seed=0)
    assert placer.last_step <= unmemoised.last_step  # the same search, its samples timed once each


@pytest.mark.heavy
def test_widen_lowers_the_prior_of_a_search_that_repeats_its_placements(monkeypatch):
    """``widen``: batches that bring few new placements lower kappa for the next one, never below the floor."""
    from gnplace.rl.problem import KAPPA_FLOOR, PlacementProblem

    seen: list[tuple[int, int, float]] = []
    widen = PlacementProblem.widen

    def recording(self, new, batch, ceiling):
        kappa = widen(self, new, batch, ceiling)
        seen.append((new, batch, kappa))
        return kappa

    monkeypatch.setattr(PlacementProblem, "widen", recording)
    g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2")  # few placements to find
    # a budget of 40 (8 batches) takes kappa from 6 down to the floor and holds it there for 4 batches; a budget of
    # 200 ran 40 batches more at the floor, two runs of 6 s where 40 takes 1.3 s
    placer = PPOSearchPlacer(budget=40, prelude=0.0, **FAST)  # on by default (revision 9)
    placer.place(g, c, seed=0)
    assert seen and all(batch == FAST["samples"] for _, batch, _ in seen)
    assert any(kappa < 6.0 for _, _, kappa in seen) and all(KAPPA_FLOOR <= kappa <= 6.0 for _, _, kappa in seen)
    assert [kappa for _, _, kappa in seen].count(KAPPA_FLOOR) >= 2  # batches at the floor, held there
    assert placer.last_evaluations <= 40
    seen.clear()
    PPOSearchPlacer(budget=40, prelude=0.0, widen=False, **FAST).place(g, c, seed=0)
    assert seen == []
    assert FineTunePlacer(budget=200).widen is False  # fine-tuning's default
    assert PPOSearchPlacer(budget=200, widen=True, memo=False).widen is False  # needs the memo


def test_a_search_that_timed_only_overflowing_placements_takes_the_polishs_placement_that_fits():
    from gnplace.toy import toy_cluster

    graph = mlp_training_graph(layers=4, width=4096, batch=256)
    cluster = toy_cluster(2, memory=0.3 * 2**30, bandwidth=2e8)  # one device cannot hold the step; two can
    placer = make_placer("ppo", timer=Simulator(), budget=40, reference="single", prelude=0.0, polish=0.9,
                         samples=8, epochs=2, imitation_steps=2, hidden=16, layers=1)
    result = Simulator().time(graph, cluster, placer.place(graph, cluster, seed=0))
    assert not result.is_oom  # the polish's fitting placement was dropped: its step exceeds the overflowing one's
    assert placer.last_step == pytest.approx(result.step_time)


@pytest.mark.parametrize("options, message", [
    (dict(zero_shot=True), "zero_shot places the graph with a checkpoint's policy first"),  # was off silently
    (dict(zero_shot_samples=4), "zero_shot_samples applies only with zero_shot=true .*; leave it out"),
    (dict(zero_shot_start=True), "zero_shot_start applies only with zero_shot=true .*; leave it out"),
    (dict(zero_shot_samples=4, zero_shot_start=True), "zero_shot_samples and zero_shot_start apply only .*leave them"),
    (dict(algo="reinforce", epochs=3), "algo=reinforce makes one step per batch"),
    (dict(screen_model="learned"), "screen_model is what the screen of screen > 1 starts from, and screen=1 screens"),
    (dict(screen=1, screen_model="simulator"), "screen=1 screens nothing"),  # (ppo's default screen is 1)
])
def test_options_set_to_no_effect_are_refused(options, message):
    with pytest.raises(InvalidArgument, match=message):
        PPOSearchPlacer(budget=100, **options)


def test_options_left_at_their_defaults_are_taken_whatever_the_algorithm():
    assert ReinforceSearchPlacer(budget=100, epochs=10).config.algo == "reinforce"  # its default, said again
    assert PPOSearchPlacer(budget=100, zero_shot=False, zero_shot_samples=16).zero_shot is False
    with pytest.raises(InvalidArgument, match="epochs counts PPO's gradient steps"):
        ReinforceSearchPlacer(budget=100, epochs=3)
    with pytest.raises(InvalidArgument, match="epochs counts PPO's gradient steps"):
        FineTunePlacer(budget=100, algo="reinforce", epochs=10)  # fine-tuning's default is 4
    assert FineTunePlacer(budget=100, algo="reinforce").config.algo == "reinforce"
    assert PPOSearchPlacer(budget=100, screen=1, screen_model="auto").config.screen == 1  # its default, said again
    assert FineTunePlacer(budget=100, screen=2, screen_model="learned").config.screen_model == "learned"


@pytest.mark.parametrize("name", ["ppo", "reinforce"])
def test_a_search_left_with_an_overflowing_best_repairs_it_outside_the_budget(name):
    """With reference=single on a cluster one device cannot hold and a budget too small to leave it (``place -p ppo
    --budget 2 -O ppo.reference=single`` on tight4), the search returned the reference's out-of-memory placement."""
    from gnplace.toy import toy_cluster

    graph = mlp_training_graph(layers=4, width=4096, batch=256)
    cluster = toy_cluster(2, memory=0.3 * 2**30, bandwidth=2e8)  # one device cannot hold the step; two can
    assert Simulator().time(graph, cluster, np.zeros(graph.num_ops, dtype=np.int64)).is_oom
    placer = make_placer(name, timer=Simulator(), budget=2, reference="single", prelude=0.0, samples=8,
                         imitation_steps=0, hidden=16, layers=1)
    result = Simulator().time(graph, cluster, placer.place(graph, cluster, seed=0))
    assert not result.is_oom and placer.last_repair_evaluations > 0 and placer.last_evaluations <= 2
    assert placer.last_step == pytest.approx(result.step_time)
    assert placer.last_history[-1] == (placer.last_evaluations, pytest.approx(result.step_time))


def test_fine_tuning_gives_up_a_zero_shot_placement_whose_memory_repairs_outrun_the_budget():
    from pathlib import Path

    from gnplace.cluster import cluster_from_dict
    from gnplace.graph_io import load_graph
    from gnplace.sim.timer import BudgetedTimer

    graph = load_graph(Path(__file__).resolve().parents[2] / "datasets" / "ptb" / "ptb_017.gnpg")
    tiny = cluster_from_dict({"name": "tiny4", "devices": [{"name": "gpu", "count": 4, "kind": "k80",
                                                            "memory": "50 MiB"}], "links": {"default": "pcie3"}})
    placer = make_placer("finetune", timer=Simulator(), budget=150, samples=4, epochs=1)
    assert placer.last_zero_shot_budget_needed is None
    # its estimate (82 timings) fits the budget, but every heuristic inside auto repairs memory (up to 36 each):
    # this was "timing 1 more placement(s) would exceed the budget of 150 evaluations"
    placement = placer.place(graph, tiny, seed=0)
    assert placement.devices.shape == (graph.num_ops,) and placer.last_evaluations <= 150
    assert placer.last_zero_shot_step is None and placer.last_zero_shot_budget_needed == 151
    counted = BudgetedTimer(Simulator())
    zero_shot = make_placer("policy", timer=counted)
    zero_shot.place(graph, tiny, seed=0)
    assert zero_shot.last_evaluations == counted.evaluations > zero_shot.evaluations_needed(tiny)  # repairs counted


@pytest.mark.parametrize("cls", [PPOSearchPlacer, FineTunePlacer, ReinforceSearchPlacer])
@pytest.mark.parametrize("budget", [MAX_BUDGET + 1, 2**62, 0, 2.5, True])
def test_a_budget_out_of_range_is_refused_in_one_line(cls, budget):
    """Budgets up to 2**62 were searches (``finetune --budget 4611686018427387904``): none ends; the cap is 10**9."""
    with pytest.raises(InvalidArgument, match=rf"^{cls.__name__} needs a budget >= 1 \(a whole number of timer "
                                              rf"evaluations, at most 1,000,000,000\), got {budget!r}$"):
        cls(budget=budget)
    assert cls(budget=np.int64(MAX_BUDGET)).budget == MAX_BUDGET


def test_a_budget_past_the_limit_is_refused_and_a_huge_one_searches():
    """A budget over the limit is one line; one within it, with two samples a batch, was an OverflowError of
    Lightning's (at 2**62, the limit then)."""
    from gnplace.sim.simulator import Simulator as Sim

    class Sampled(Sim):
        """Ends the search at its first batch of samples, once the trainer has started."""

        def time_batch(self, graph, cluster, placements):
            if len(placements) > 1:
                raise RuntimeError("sampling")
            return super().time_batch(graph, cluster, placements)

    with pytest.raises(InvalidArgument, match=rf"at most 1,000,000,000\), got {MAX_BUDGET + 1}$"):
        PPOSearchPlacer(budget=MAX_BUDGET + 1)
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    placer = PPOSearchPlacer(budget=MAX_BUDGET, samples=2, epochs=1, imitation_steps=0, prelude=0.0, timer=Sampled())
    with pytest.raises(RuntimeError, match="sampling"):  # 5 * 10**8 iterations, 4 times over: the trainer started
        placer.place(g, c, seed=0)


def test_a_resume_under_settings_recorded_only_off_their_defaults_is_refused(tmp_path):
    """A run of ``screen`` 48 resumed with ``screen`` 1 (recorded only above 1), or of other ``entropy`` or ``elite``,
    continued under the new settings; a run of ``screen`` 1 resumed with 48 was said to be an older gnplace's."""
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    settings = dict(budget=50, samples=4, epochs=1, imitation_steps=1, prelude=0.0, progress=False)
    screened, plain = tmp_path / "screened", tmp_path / "plain"
    PPOSearchPlacer(out=str(screened), screen=8, **settings).place(g, c, seed=0)
    PPOSearchPlacer(out=str(plain), **settings).place(g, c, seed=0)
    saved = {folder: (folder / "last.ckpt").read_bytes() for folder in (screened, plain)}
    for folder, other in ((screened, dict()), (plain, dict(screen=8)), (plain, dict(entropy=0.1)),
                          (plain, dict(elite=0.0))):
        with pytest.raises(InvalidCheckpoint, match=rf"search run of other settings \({next(iter(other), 'screen')}\)"):
            PPOSearchPlacer(out=str(folder), resume=True, **settings, **other).place(g, c, seed=0)
        assert (folder / "last.ckpt").read_bytes() == saved[folder]
    PPOSearchPlacer(out=str(screened), resume=True, screen=8, **settings).place(g, c, seed=0)  # the same runs resume
    PPOSearchPlacer(out=str(plain), resume=True, **settings).place(g, c, seed=0)


def test_an_empty_output_folder_is_refused_not_read_as_the_current_one(tmp_path, monkeypatch):
    """``-O ppo.out=`` wrote ``last.ckpt`` and ``logs/`` into the current folder, among the user's files."""
    monkeypatch.chdir(tmp_path)
    for out in ("", "  "):
        with pytest.raises(InvalidArgument, match="out is empty; name the folder to write into"):
            PPOSearchPlacer(budget=40, out=out, **FAST)
    for out in (["a"], 3):  # -O ppo.out=[a] made a folder "['a']"
        with pytest.raises(InvalidArgument, match="out must be a folder's path"):
            PPOSearchPlacer(budget=40, out=out, **FAST)
    assert list(tmp_path.iterdir()) == []


def test_a_zero_shot_placement_that_fits_is_the_best_so_far_over_an_overflowing_reference():
    """Fits first, as the best placement is kept: the history held the overflowing reference's shorter step from the
    zero-shot candidate's evaluation on, until the search found a placement that fits."""
    from gnplace.toy import toy_cluster

    graph = mlp_training_graph(layers=4, width=4096, batch=256)
    cluster = toy_cluster(2, memory=0.3 * 2**30, bandwidth=2e8)  # one device cannot hold the step; two can
    assert Simulator().time(graph, cluster, make_placer("single").place(graph, cluster)).is_oom
    placer = FineTunePlacer(budget=75, reference="single", samples=4, epochs=1)
    placer.place(graph, cluster, seed=0)
    zero_shot = placer.last_zero_shot_step
    assert zero_shot is not None and placer.last_history[0] == (1, placer.last_reference_step) < (1, zero_shot)
    timed_at, step = placer.last_history[1]  # the first point after the reference's: when the candidate was timed
    assert timed_at > 1 and step == zero_shot
    assert all(s <= zero_shot for _, s in placer.last_history[1:])


def test_zero_shot_candidates_given_up_count_against_an_unmemoised_search(monkeypatch):
    """Their evaluations were left out of what the search had spent: without the memo's stop it went on past the
    budget ("timing 8 more placement(s) would exceed the budget of 150 evaluations")."""
    from gnplace.rl.search import _SearchStart
    from gnplace.rl.zeroshot import PolicyPlacer

    def outrun(self, graph, cluster, *, seed=None):  # memory repairs on a tight cluster, each a timing, past the cap
        while True:
            self.timer.time(graph, cluster, np.zeros(graph.num_ops, dtype=np.int64))

    monkeypatch.setattr(PolicyPlacer, "place", outrun)
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    placer = FineTunePlacer(budget=150, samples=8, epochs=1, memo=False)
    placer.place(g, c, seed=0)
    assert placer.last_zero_shot_step is None and placer.last_zero_shot_budget_needed == 151
    assert placer.last_evaluations <= 150
    start = _SearchStart(None, 5, 151, given_up=140)  # a checkpoint keeps them
    assert start.spent == 145 and _SearchStart.restore(start.state(), g.num_ops) == start
    assert "given_up" not in _SearchStart(None, 5, None).state()  # (what checkpoints held before)


def test_a_resume_under_a_lowered_prior_is_refused_so_the_saved_kappa_never_exceeds_it(tmp_path):
    """``kappa`` (the widened prior, saved in the checkpoint) is bounded by the run's ``prior``; the prior is part of
    the run, so a resume under another is refused before anything is timed rather than sampling above it."""
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    settings = dict(budget=50, samples=4, epochs=1, imitation_steps=1, prelude=0.0, progress=False)
    PPOSearchPlacer(out=str(tmp_path), **settings).place(g, c, seed=0)
    saved = (tmp_path / "last.ckpt").read_bytes()
    with pytest.raises(InvalidCheckpoint, match=r"search run of other settings \(prior\)"):
        PPOSearchPlacer(out=str(tmp_path), resume=True, prior=2.0, **settings).place(g, c, seed=0)
    assert (tmp_path / "last.ckpt").read_bytes() == saved


@pytest.mark.parametrize("reference", ["ppo", "annealing", "rnn_pg"])
def test_a_reference_that_spends_its_own_budget_is_refused(reference):
    """Its evaluations are not the search's: reference=ppo timed 2,057 placements under a budget of 40."""
    with pytest.raises(InvalidArgument, match=rf"reference must be a fast placer that takes no budget .*{reference!r}"):
        make_placer("ppo", timer=Simulator(), budget=40, reference=reference)
    assert make_placer("ppo", timer=Simulator(), budget=40, reference="heft").reference == "heft"


def test_a_checkpoint_interval_past_a_floats_range_is_one_error():
    with pytest.raises(InvalidArgument, match="checkpoint_every_s must be a number of seconds > 0"):
        make_placer("ppo", timer=Simulator(), budget=40, checkpoint_every_s=10**400)
    for refused in (True, "60", float("nan"), 0):
        with pytest.raises(InvalidArgument, match="checkpoint_every_s must be a number of seconds > 0"):
            make_placer("ppo", timer=Simulator(), budget=40, checkpoint_every_s=refused)


@pytest.mark.parametrize("seconds", [np.int64(30), np.float32(30.0), np.float64(30.0), 30])
def test_a_checkpoint_interval_may_be_a_numpy_number(seconds):
    # np.int64(30) and np.float32(30) were refused as no number of seconds; np.float64, a float, was taken
    assert make_placer("ppo", timer=Simulator(), budget=40, checkpoint_every_s=seconds).checkpoint_every_s == 30.0


@pytest.mark.parametrize("cls", [PPOSearchPlacer, ReinforceSearchPlacer])
def test_a_small_search_where_nothing_fits_returns_its_best_flagged_not_a_budget_error(cls):
    """The prelude's annealing repaired its overflowing best on the search's own budgeted timer: where the
    repair needed more than was left, the search failed with "would exceed the budget of 16 evaluations"."""
    from gnplace.toy import toy_cluster

    graph = OpGraph(["a", "b"], [(0, 1)], flops=[1e9, 1e9], out_bytes=[150e6, 0])  # a's output fits no device
    cluster = toy_cluster(2, memory=100e6)
    for budget in (8, 16):
        placer = cls(budget=budget, samples=8, imitation_steps=2)
        placement = placer.place(graph, cluster, seed=0)
        assert Simulator().time(graph, cluster, placement).is_oom and placer.last_evaluations <= budget


def test_reinforces_repr_leaves_out_the_epochs_it_refuses():
    """``repr`` showed ``epochs=10`` for reinforce, which refuses ``epochs`` (one gradient step a batch)."""
    from gnplace.placers import make_placer

    assert "epochs" not in repr(make_placer("reinforce"))
    assert "epochs=10, " in repr(make_placer("ppo"))


def test_resume_without_an_output_folder_is_refused():
    """``-O ppo.resume=true`` with no ``-O ppo.out`` started a new search, exit 0: there was nothing to resume from."""
    with pytest.raises(InvalidArgument, match="resume continues the run checkpointed in out .* no out is given"):
        PPOSearchPlacer(budget=40, resume=True, **FAST)


def test_a_network_shape_beside_a_checkpoint_is_refused_not_ignored():
    """``-O finetune.hidden=8`` fine-tuned the shipped checkpoint's 64-wide network without a word."""
    from gnplace.rl.zeroshot import SHIPPED_CHECKPOINT, cached_policy

    shipped = cached_policy(str(SHIPPED_CHECKPOINT))[0].config
    for options in (dict(hidden=8), dict(layers=1), dict(hidden=8, layers=1)):
        with pytest.raises(InvalidArgument, match=r"FineTunePlacer: (hidden|layers).* starts from the checkpoint .*"
                                                  r"gnplace-base.ckpt, whose network is its own \((hidden|layers)="):
            make_placer("finetune", budget=100, **options)
    with pytest.raises(InvalidArgument, match=r"PPOSearchPlacer: hidden shape a new network.*\(hidden=64\)"):
        PPOSearchPlacer(budget=100, checkpoint=str(SHIPPED_CHECKPOINT), hidden=32)
    # the checkpoint's own shape, or the default, asks for nothing else; without a checkpoint both shape the network
    assert FineTunePlacer(budget=100, hidden=shipped.hidden, layers=shipped.layers).config.hidden == shipped.hidden
    assert PPOSearchPlacer(budget=100, hidden=8, layers=1).config.hidden == 8


def test_fine_tunings_docstring_names_the_zero_shot_candidates_and_the_evaluations_they_spend(monkeypatch):
    """It said ``D + 33`` evaluations on D devices, ``D + 43`` past 4, counted: the budget pays for ``auto``'s own
    timings of its candidates too (57 on four devices, as the search spends them); and it named the options of the
    placement ``policy`` gives without ``module_chain`` 0, which ``policy`` revision 21 runs by default."""
    import gnplace.rl.search as search
    from gnplace.graph_io import load_graph
    from gnplace.rl.problem import PlacementProblem
    from gnplace.sim.timer import BudgetedTimer

    given: dict = {}

    class Recording(search.PolicyPlacer):
        def __init__(self, *args, **kwargs):
            given.update(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(search, "PolicyPlacer", Recording)
    doc = " ".join((FineTunePlacer.__doc__ or "").split())
    g = load_graph("datasets/examples/mlp2x8w2048b512.gnpg")
    for cluster, words, count in (("k80x2", "two devices", 53), ("k80x4", "four", 57), ("v100x8", "eight", 75)):
        c = load_cluster(cluster)
        problem = PlacementProblem.build(g, c, Simulator(), modules=True)
        counted = BudgetedTimer(Simulator(), 10_000)
        counted.evaluations = 1  # the reference's
        start = FineTunePlacer(budget=10_000)._zero_shot(problem, counted, 0)
        assert start is not None and start[4] == count == counted.evaluations - 1, cluster
        assert f"{count} evaluations on {words}" in doc or f"{count} on {words}" in doc
    assert "D + 33" not in doc
    for name in ("constructor_samples", "constructor_refine", "last_rounds", "refine", "polish", "module_chain"):
        assert f"``{name}`` {given[name]}" in doc, name


def test_the_reinforce_placer_refuses_another_algorithm_rather_than_run_it_under_its_name():
    """``gnplace place -p reinforce --algo ppo`` ran PPO and printed and recorded it as ``reinforce``."""
    assert ReinforceSearchPlacer(budget=100, algo="reinforce").config.algo == "reinforce"  # its own, said again
    with pytest.raises(InvalidArgument, match="the REINFORCE ablation, and algo='ppo'.*use the 'ppo' placer"):
        ReinforceSearchPlacer(budget=100, algo="ppo")
    with pytest.raises(InvalidArgument, match="REINFORCE ablation"):
        make_placer("reinforce", budget=100, algo="ppo")


@pytest.mark.parametrize("name", ["ppo", "finetune"])
@pytest.mark.parametrize("algo", [False, "", 0, []])
def test_an_algo_that_is_false_is_refused_not_taken_as_the_default(name, algo):
    """``-O ppo.algo=false`` and ``-O ppo.algo=`` ran PPO without a word (``algo or "ppo"``)."""
    with pytest.raises(InvalidArgument, match=rf"algo must be 'ppo' or 'reinforce', got {re.escape(repr(algo))}"):
        make_placer(name, budget=100, algo=algo)


def test_the_reinforce_placer_names_no_placer_after_a_bad_algo():
    """``-O reinforce.algo=abc`` said "use the 'abc' placer", a placer there is none of."""
    with pytest.raises(InvalidArgument, match=r"algo='abc' would make .*: leave algo out") as caught:
        make_placer("reinforce", budget=100, algo="abc")
    assert "'abc' placer" not in str(caught.value)


@pytest.mark.parametrize("name", ["ppo", "reinforce", "finetune"])
@pytest.mark.parametrize("option", ["polish", "prelude"])
@pytest.mark.parametrize("value", [None, False, "0.1"])
def test_a_share_that_is_no_number_is_refused_naming_it(name, option, value):
    """``-O ppo.polish=null`` said "an option value of the wrong type (budget=60)", naming another option, and
    ``-O ppo.polish=false`` ran as 0."""
    with pytest.raises(InvalidArgument, match=rf"polish and prelude are shares .*got {option}={re.escape(repr(value))}$"):
        make_placer(name, budget=60, **{option: value})


@pytest.mark.parametrize("reference", ["nope", None, 0])
def test_an_unknown_reference_is_refused_naming_the_option(reference):
    """``-O ppo.reference=nope`` said "unknown placer 'nope'", naming no option the user gave."""
    with pytest.raises(UnknownName, match=rf"^PPOSearchPlacer: reference must be a registered placer's name "
                                          rf"\(choose one of: .*auto.*\), got {reference!r}$"):
        make_placer("ppo", budget=60, reference=reference)


@pytest.mark.parametrize("name", ["ppo", "finetune"])
def test_too_many_zero_shot_samples_are_refused_by_name_before_the_search(name):
    """``-O finetune.zero_shot_samples=10**20`` was refused mid-search, after the reference ran, as
    "PolicyPlacer needs samples <= 4096", an option the user did not give."""
    with pytest.raises(InvalidArgument, match=r"needs zero_shot_samples <= 4096 .*got 100000000000000000000$"):
        make_placer(name, budget=60, zero_shot_samples=10**20)
    assert make_placer("finetune", budget=60, zero_shot_samples=4096).zero_shot_samples == 4096


@pytest.mark.parametrize("checkpoint", ["", "  ", 0, False, [], 2.5])
def test_a_checkpoint_that_is_no_path_is_refused_not_read_as_the_shipped_one(checkpoint):
    """``make_placer("finetune", checkpoint="")`` (or 0, false, []) fine-tuned the shipped checkpoint without a word
    (``checkpoint or SHIPPED_CHECKPOINT``); ppo's read ``""`` as the current folder ("is a folder")."""
    for name in ("finetune", "ppo"):
        with pytest.raises(InvalidArgument, match=rf"Placer: checkpoint must be a policy checkpoint file's path, "
                                                  rf"got {re.escape(repr(checkpoint))}$"):
            get_placer(name, budget=60, checkpoint=checkpoint)
    assert get_placer("finetune", budget=60, checkpoint=None).checkpoint.endswith("gnplace-base.ckpt")


@pytest.mark.parametrize("name", ["ppo", "finetune", "reinforce"])
def test_a_learner_setting_out_of_range_names_the_placer_it_was_given_to(name):
    """"need samples >= 2, got 1" named no placer: in ``evaluate -p ppo,finetune -O ...`` either could have said it."""
    with pytest.raises(InvalidArgument, match=r"^\w+SearchPlacer: need samples >= 2, got 1$|^FineTunePlacer: need "
                                              r"samples >= 2, got 1$"):
        make_placer(name, budget=100, samples=1)


def _scripted_annealing(monkeypatch, *chains):
    """Replace the prelude's and the polish's annealing chains by ``chains``, run in order: each takes the placer and
    the start's devices and gives ``(trace, devices)``, the chain's ``(evaluations, overflow, step)`` best-so-far trace
    and its placement. A chain on the search's counted timer spends its whole budget. Returns the budgets asked for."""
    from gnplace.placement import GraphKey, Placement
    from gnplace.placers import annealing
    from gnplace.sim.timer import BudgetedTimer

    budgets = []

    def place(self, graph, cluster, *, seed=None):
        trace, devices = chains[len(budgets)](self, self.start.place(graph, cluster).devices)
        budgets.append(self.budget)
        if isinstance(self.timer, BudgetedTimer):
            self.timer.evaluations += self.budget
        self.last_trace = trace
        return Placement(np.asarray(devices, dtype=np.int64), cluster, GraphKey.of(graph))

    monkeypatch.setattr(annealing.AnnealingPlacer, "place", place)
    return budgets


def test_the_polish_counts_its_evaluations_after_the_search_and_keeps_a_tie_to_the_searchs_best(monkeypatch):
    """Budget 8, polish 0.75, no prelude, no imitation: int(8 * 0.75) = 6 for the polish, and the policy's
    8 - 1 (reference) - 6 - 1 (greedy check) = 0 makes no batch, so the polish anneals 8 - 1 = 7 evaluations from
    the reference. Its trace's evaluations count from the search's 1: an improvement at its 3rd is the 4th."""
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    for faster in (True, False):
        placer = PPOSearchPlacer(budget=8, polish=0.75, prelude=0.0, imitation_steps=0)
        starts = []

        def chain(annealer, start, placer=placer, faster=faster, starts=starts):
            starts.append(start)
            ref = placer.last_reference_step  # the chain starts at the reference, timed at 1
            return [(1, 0, ref)] + ([(3, 0, ref / 2)] if faster else []), 1 - start  # another placement

        budgets = _scripted_annealing(monkeypatch, chain)
        placed, ref = placer.place(g, c, seed=0), placer.last_reference_step
        assert budgets == [7] and placer.last_polish_evaluations == 7 and placer.last_evaluations == 8
        if faster:
            assert placer.last_history == [(1, ref), (4, ref / 2)]  # not (3, ...), and the start's tie left out
            assert placer.last_step == ref / 2 and placed.devices.tolist() == (1 - starts[0]).tolist()
        else:  # the polish found nothing faster: the search's best stands, not the chain's equal placement
            assert placer.last_history == [(1, ref)]
            assert placer.last_step == ref and placed.devices.tolist() == starts[0].tolist()


def test_a_prelude_of_one_evaluation_runs_and_an_overflowing_result_does_not_replace_a_fitting_reference(monkeypatch):
    """Budget 4, prelude 0.25: int(4 * 0.25) = 1 evaluation of annealing first. It ends on a placement twice as
    fast that overflows, which cannot replace the fitting reference; the policy's 4 - 1 - 1 - 2 = 0 makes no batch,
    and the polish anneals the 4 - 2 = 2 evaluations left from the reference."""
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    placer = PPOSearchPlacer(budget=4, prelude=0.25)
    starts = []

    def prelude(annealer, start):
        starts.append(start)
        return [(1, 1, placer.last_reference_step / 2)], 1 - start  # faster, but overflowing a device

    def polish(annealer, start):
        starts.append(start)
        return [(1, 0, placer.last_reference_step)], start  # nothing faster

    budgets = _scripted_annealing(monkeypatch, prelude, polish)
    placed, ref = placer.place(g, c, seed=0), placer.last_reference_step
    assert budgets == [1, 2] and placer.last_evaluations == 4 and placer.last_polish_evaluations == 2
    assert starts[1].tolist() == starts[0].tolist() == placed.devices.tolist()  # the reference, throughout
    assert placer.last_step == ref and placer.last_history == [(1, ref), (2, ref)]


def test_a_batch_left_short_by_the_budget_is_smaller_and_training_keeps_the_polish_and_greedy_check(monkeypatch):
    """Budget 40, polish 0.25, no prelude: the polish keeps int(40 * 0.25) = 10, and 40 - 1 (reference) - 10 - 2
    (greedy checks after imitation and at the end) = 27 for the policy, under the 32 samples asked for: one batch of
    27. Training stops once fewer than 27 + 10 + 1 = 38 evaluations are left (a batch, the polish, a greedy check)."""
    import gnplace.callbacks
    import gnplace.train

    seen = {}

    class Learner(gnplace.train.PlacementLearner):
        def __init__(self, config, timer):
            seen["samples"] = config.samples
            super().__init__(config, timer)

    class Stop(Exception):
        pass

    def stop_at_budget(timer, keep, spent):
        seen["keep"] = keep
        raise Stop  # the count is what this test checks: no need to train

    monkeypatch.setattr(gnplace.train, "PlacementLearner", Learner)
    monkeypatch.setattr(gnplace.callbacks, "StopAtBudget", stop_at_budget)
    with pytest.raises(Stop):
        PPOSearchPlacer(budget=40, polish=0.25, prelude=0.0, samples=32, hidden=8, layers=1).place(
            mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2"), seed=0)
    assert seen == {"samples": 27, "keep": 38}


def test_a_polish_and_prelude_that_fill_the_budget_are_refused():
    """Their shares must sum to less than 1: at 1 nothing is left for the reference and the policy."""
    with pytest.raises(InvalidArgument, match="sum to less than 1"):
        PPOSearchPlacer(polish=0.5, prelude=0.5)
    assert PPOSearchPlacer(polish=0.5, prelude=0.25).polish == 0.5


def test_a_step_of_no_work_spends_only_the_reference_timing():
    """Nothing is faster than 0 s: the search stops at the reference, one evaluation."""
    from gnplace.toy import toy_cluster

    placer = PPOSearchPlacer(budget=50)
    placer.place(OpGraph(["a", "b"], [(0, 1)]), toy_cluster(2, launch_overhead=0), seed=0)
    assert placer.last_evaluations == 1 and placer.last_history == [(1, 0.0)] and placer.last_step == 0.0


def test_the_budget_a_too_short_fine_tuning_says_it_needed_is_enough_for_its_zero_shot_candidates():
    """``last_zero_shot_budget_needed`` is a budget that fits them: at exactly that budget they are timed."""
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    short = FineTunePlacer(budget=50, samples=8, epochs=1)
    short.place(g, c, seed=0)
    needed = short.last_zero_shot_budget_needed
    assert short.last_zero_shot_step is None and needed is not None and needed > 50
    exact = FineTunePlacer(budget=needed, samples=8, epochs=1)
    exact.place(g, c, seed=0)
    assert exact.last_zero_shot_step is not None and exact.last_zero_shot_budget_needed is None
    assert exact.last_evaluations <= needed
