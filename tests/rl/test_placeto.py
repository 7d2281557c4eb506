"""``placeto``: progressive placement trained by REINFORCE, family pretraining, zero-shot placement, checkpoints."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from gnplace.cluster import load_cluster
from gnplace.exceptions import InvalidArgument, InvalidCheckpoint
from gnplace.graph import OpGraph
from gnplace.placers import PLACERS
from gnplace.policy.features import build_policy_input
from gnplace.policy.placeto_gnn import PlacetoConfig
from gnplace.rl import placeto
from gnplace.rl.placeto import (
    PlacetoHyper,
    PlacetoPlacer,
    estimate_starts,
    load_placeto,
    prepare_problem,
    pretrain_placeto,
    save_placeto,
)
from gnplace.sim.costmodel import DEFAULT_COSTS
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BatchResult, StepTimer
from gnplace.toy import chain_graph, layered_graph, mlp_training_graph, toy_cluster

SMALL = dict(hidden=16, rounds=4)


def grouped_layers(num_ops: int = 60, seed: int = 2) -> OpGraph:
    """A layered DAG in groups of three ops: 20 decisions where placement matters."""
    return layered_graph(num_ops, seed=seed).replace(group=np.arange(num_ops) // 3)


def random_steps(graph: OpGraph, cluster, count: int = 300) -> np.ndarray:
    """Step seconds of ``count`` uniformly random group placements of ``graph``."""
    inp = build_policy_input(graph, cluster, max_nodes=128)
    rng = np.random.default_rng(123)
    groups = rng.integers(cluster.num_devices, size=(count, inp.num_groups))
    return Simulator().time_batch(graph, cluster, inp.expand(groups)).step_time


@pytest.fixture(scope="module")
def family():
    """Two small training graphs, a third to place zero-shot, and a two-GPU cluster."""
    train = [mlp_training_graph(layers=3, width=256, batch=32), grouped_layers(30, seed=1)]
    return train, grouped_layers(36, seed=5), load_cluster("k80x2")


@pytest.fixture(scope="module")
def pretrained(family):
    train, _, cluster = family
    return pretrain_placeto(train, cluster, episodes=8, seed=3, batch=4, **SMALL)


def test_beats_random_placements_and_keeps_its_promises(counting_simulator):
    g, c = grouped_layers(), load_cluster("k80x4")
    random = random_steps(g, c)
    assert random.mean() > 1.2 * random.min()  # placement matters here
    placer = PlacetoPlacer(budget=300, timer=counting_simulator)
    placement = placer.place(g, c, seed=0)
    step = Simulator().time(g, c, placement).step_time
    assert step < np.median(random) and step < random.mean()
    assert not placement.splits_groups(g)
    # the budget, the counters and the learning curve
    assert placer.last_evaluations == counting_simulator.evaluations <= 300
    # training episodes cost 1 + G evaluations each (the last update may have fewer than 4), the greedy one 1
    assert placer.last_updates >= 3
    assert placer.last_evaluations == (placer.last_episodes - 1) * (1 + g.num_groups) + 1
    evals = [e for e, _ in placer.last_history]
    steps = [s for _, s in placer.last_history]
    assert evals == sorted(set(evals)) and evals[-1] == placer.last_evaluations
    assert steps == sorted(steps, reverse=True)
    assert placer.last_step == pytest.approx(steps[-1]) == pytest.approx(step)


def test_same_seed_same_placement():
    g, c = mlp_training_graph(layers=4, width=256, batch=32, branches=2), load_cluster("k80x4")
    runs = [PlacetoPlacer(budget=120, **SMALL).place(g, c, seed=s).devices for s in (5, 5, 6)]
    assert np.array_equal(runs[0], runs[1])
    placer = PlacetoPlacer(budget=120, **SMALL)
    first = placer.place(g, c, seed=np.random.default_rng(9))
    assert np.array_equal(placer.place(g, c, seed=np.random.default_rng(9)).devices, first.devices)


def test_budgets_below_one_episode_buy_random_placements(counting_simulator):
    g, c = grouped_layers(), load_cluster("k80x4")
    for budget in (1, 7):
        placer = PlacetoPlacer(budget=budget, timer=counting_simulator)
        placement = placer.place(g, c, seed=0)
        placement.check(g)
        assert placer.last_evaluations == budget and placer.last_updates == 0
    assert counting_simulator.evaluations == 8


def test_more_passes_cost_longer_episodes():
    """6 groups, K sweeps: a training episode is 1 + 6K evaluations, the final greedy episode 1."""
    g, c = chain_graph(6), toy_cluster(2)
    episodes = {}
    for passes in (1, 2):
        placer = PlacetoPlacer(budget=200, passes=passes, **SMALL)
        placer.place(g, c, seed=0)
        assert placer.last_evaluations == (placer.last_episodes - 1) * (1 + 6 * passes) + 1 <= 200
        assert placer.last_updates >= 3
        episodes[passes] = placer.last_episodes - 1
    assert episodes == {1: 199 // 7, 2: 199 // 13}  # as many whole episodes as the budget holds


def test_edge_cases_and_bad_options(counting_simulator):
    c = load_cluster("k80x2")
    assert PlacetoPlacer().place(OpGraph([], []), c).devices.tolist() == []
    placer = PlacetoPlacer(timer=counting_simulator)
    assert placer.place(chain_graph(4), toy_cluster(1), seed=0).devices.tolist() == [0, 0, 0, 0]
    assert counting_simulator.evaluations == 0 and placer.last_evaluations == 0
    assert PlacetoPlacer(budget=30).place(chain_graph(1), toy_cluster(3), seed=0).devices.shape == (1,)
    bad = (dict(budget=0), dict(budget=2.5), dict(budget=True), dict(episodes=0), dict(hidden=0), dict(rounds=0),
           dict(lr=0.0), dict(lr_end=-1.0), dict(entropy=-0.1), dict(clip=0.0), dict(max_nodes=0),
           dict(oom_penalty=float("nan")), dict(passes=0), dict(hidden=10_000_000), dict(rounds=65), dict(episodes=16385),
           dict(budget=10**9 + 1),  # past MAX_BUDGET: was accepted, a search that never ends
           dict(lr=1e300), dict(lr_end=1e300),  # were accepted, then Adam's float32 step overflowed mid-run
           dict(lr=10**400),  # an OverflowError of float()
           dict(entropy=10**20))  # within float32's range, then an OverflowError of torch ("int too big to convert")
    for options in bad:
        with pytest.raises(InvalidArgument) as err:
            PlacetoPlacer(**options)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("episodes", [0, True, 2.5, 16385])
def test_a_bad_episodes_is_refused_under_its_own_name(episodes):
    """The placer takes ``episodes``; its refusal named ``batch``, PlacetoHyper's field, an option it does not take."""
    with pytest.raises(InvalidArgument, match=r"^PlacetoPlacer needs episodes ") as err:
        PlacetoPlacer(episodes=episodes)
    assert "batch" not in str(err.value)


def test_divergence_is_one_error_naming_the_learning_rate():
    """At lr 1e30 the weights went nan within two updates; the network then sampled device 0 for every group
    ((nan < u).sum() is 0), trained on, and the placer returned as if nothing had happened."""
    with pytest.raises(InvalidArgument, match=r"^placeto diverged: .* after \d+ update\(s\) \(lower placeto.lr, now 1e\+30\)$"):
        PlacetoPlacer(budget=200, lr=1e30, **SMALL).place(mlp_training_graph(layers=3, width=256, batch=32),
                                                          load_cluster("k80x4"), seed=0)


def test_out_of_memory_placements_are_repaired(heavy_groups, small_gpus):
    g, c = heavy_groups([0.6, 0.6, 0.6, 0.6]), small_gpus(2, memory=1.3 * 2**30)  # two groups per GPU fit
    repaired = 0
    for seed in range(4):
        placer = PlacetoPlacer(budget=1)  # one random placement: often three groups on one GPU
        result = Simulator().time(g, c, placer.place(g, c, seed=seed))
        assert not result.is_oom and placer.last_step == pytest.approx(result.step_time)
        assert placer.last_history[-1] == (1, pytest.approx(result.step_time))  # the curve ends at what is returned
        assert placer.last_evaluations == 1  # the repair's evaluations are outside the budget
        repaired += placer.last_repair_evaluations > 0
    assert repaired >= 1


def test_list_schedule_start_times():
    g, c = chain_graph(3), load_cluster("k80x2")
    problem = prepare_problem(g, c, cost_model=DEFAULT_COSTS)
    order = problem.inp.order
    cost = problem.op_time[order]
    same = estimate_starts(problem, np.zeros((1, 3), dtype=np.int64))[0, order]
    assert same.tolist() == pytest.approx([0.0, cost[0, 0], cost[0, 0] + cost[1, 0]])
    split = np.zeros((1, 3), dtype=np.int64)
    split[0, order[1]] = 1  # the middle op on the other GPU: its input crosses the link first
    starts = estimate_starts(problem, split)[0, order]
    delay = c.transfer_time(0, 1, float(g.edge_bytes[0]))
    assert starts[1] == pytest.approx(cost[0, 0] + delay)
    assert starts[2] == pytest.approx(starts[1] + cost[1, 1] + delay)


def test_decisions_visit_groups_in_priority_order_with_masks_outside_the_group():
    g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2")
    problem = prepare_problem(g, c, cost_model=DEFAULT_COSTS)
    group = problem.node_group
    position = np.empty(problem.num_nodes, dtype=np.int64)
    position[problem.inp.order] = np.arange(problem.num_nodes)
    firsts = [position[group == k].min() for k in problem.visit]
    assert sorted(problem.visit.tolist()) == list(range(problem.num_groups)) and firsts == sorted(firsts)
    members = problem.members.numpy()
    assert members.sum(axis=0).tolist() == [1] * problem.num_nodes  # every node in exactly one group
    for mask in (problem.parents, problem.children, problem.parallel):
        assert not (mask.numpy() & members).any()


def test_pretraining_zero_shot_and_checkpoint_round_trip(family, pretrained, tmp_path, counting_simulator):
    train, test_graph, cluster = family
    assert pretrained.num_devices == 2 and pretrained.meta["episodes"] == 8 and pretrained.meta["updates"] == 2
    again = pretrain_placeto(train, cluster, episodes=8, seed=3, batch=4, **SMALL)
    for name, tensor in pretrained.network.state_dict().items():
        assert torch.equal(tensor, again.network.state_dict()[name]), f"{name}: same seed, same weights"
    first = save_placeto(pretrained, tmp_path / "a.pt")
    loaded = load_placeto(first)
    assert loaded.meta["graphs"] == [g.name for g in train] and loaded.network.config == pretrained.network.config
    second = save_placeto(loaded, tmp_path / "b.pt")
    # zero-shot: one greedy episode from a random start, one evaluation
    zero = PlacetoPlacer(budget=1, checkpoint=str(first), timer=counting_simulator)
    placed = zero.place(test_graph, cluster, seed=0)
    placed.check(test_graph)
    assert zero.last_evaluations == counting_simulator.evaluations == 1 and zero.last_episodes == 1
    assert zero.last_updates == 0
    twin = PlacetoPlacer(budget=1, checkpoint=str(second)).place(test_graph, cluster, seed=0)
    assert np.array_equal(placed.devices, twin.devices)
    # fine-tuning from the checkpoint with a budget of a few episodes
    tuned = PlacetoPlacer(budget=150, checkpoint=str(first))
    tuned.place(test_graph, cluster, seed=0)
    assert tuned.last_updates >= 1 and tuned.last_evaluations <= 150
    assert tuned.hyper.hidden == SMALL["hidden"]  # the checkpoint's shape wins


@pytest.mark.parametrize("bad", [dict(hidden=-5), dict(hidden="abc"), dict(rounds=0), dict(rounds=10_000)])
def test_bad_hidden_or_rounds_are_refused_with_a_checkpoint_too(pretrained, tmp_path, bad):
    """The checkpoint's shape replaced them before they were checked: -O placeto.hidden=-5 placed as if unsaid."""
    path = save_placeto(pretrained, tmp_path / "p.pt")
    name = next(iter(bad))
    with pytest.raises(InvalidArgument, match=rf"^PlacetoPlacer needs {name} ") as err:
        PlacetoPlacer(budget=1, checkpoint=str(path), **bad)
    assert "\n" not in str(err.value)
    good = PlacetoPlacer(budget=1, checkpoint=str(path), hidden=64, rounds=2)  # valid: the checkpoint's shape wins
    assert (good.hyper.hidden, good.hyper.rounds) == (SMALL["hidden"], SMALL["rounds"])


def test_a_checkpoint_places_zero_shot_at_any_budget_up_to_one_episode_of_every_pass(family, pretrained, tmp_path):
    """One episode is 1 + K G evaluations: the placer's docstring said 1 + G, the README "a larger budget [than 1]
    fine-tunes", where with passes=2 a budget of 1 + G + 1 still placed zero-shot, for one evaluation."""
    _, graph, cluster = family
    path = save_placeto(pretrained, tmp_path / "p.pt")
    groups = build_policy_input(graph, cluster, max_nodes=128).num_groups
    for budget in (2, 1 + groups + 1, 1 + 2 * groups):
        zero = PlacetoPlacer(budget=budget, checkpoint=str(path), passes=2)
        zero.place(graph, cluster, seed=0)
        assert (zero.last_evaluations, zero.last_updates, zero.last_episodes) == (1, 0, 1)
    tuned = PlacetoPlacer(budget=2 + 2 * groups, checkpoint=str(path), passes=2)
    tuned.place(graph, cluster, seed=0)
    assert tuned.last_updates == 1
    assert "``1 + K G``" in (PlacetoPlacer.__doc__ or "")
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "as does any budget up to one episode, 1 + groups x passes" in readme


def test_a_checkpoint_places_only_on_its_number_of_devices(pretrained, tmp_path):
    path = save_placeto(pretrained, tmp_path / "two.pt")
    with pytest.raises(InvalidArgument, match="trained for 2 devices") as err:
        PlacetoPlacer(budget=1, checkpoint=str(path)).place(chain_graph(4), load_cluster("k80x4"), seed=0)
    assert "\n" not in str(err.value)


def test_bad_checkpoint_files_are_one_line_errors(pretrained, tmp_path):
    good = save_placeto(pretrained, tmp_path / "good.pt")
    raw = good.read_bytes()
    (tmp_path / "truncated.pt").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "garbage.pt").write_bytes(b"not a checkpoint at all" * 10)
    torch.save({"format": "gnplace-policy", "version": 1}, tmp_path / "foreign.pt")
    torch.save({"format": "gnplace-placeto", "version": 99}, tmp_path / "future.pt")
    torch.save({"format": "gnplace-placeto", "version": 1, "config": {"num_devices": 2, "hidden": 16, "rounds": 4,
                "features": ["other"]}, "state_dict": {}}, tmp_path / "features.pt")
    torch.save({"format": "gnplace-placeto", "version": 1, "config": {"num_devices": 3, "hidden": 16, "rounds": 4,
                "features": ["run_time", "out_bytes", "device_0", "device_1", "device_2", "visited", "current",
                             "start"]}, "state_dict": pretrained.network.state_dict()}, tmp_path / "shape.pt")
    for name, edit in (("infinite", lambda d: d["config"].update(num_devices=float("inf"))),  # int(inf): OverflowError
                       ("listless", lambda d: d["config"].update(features=5)),  # list(5): TypeError
                       ("nan", lambda d: next(iter(d["state_dict"].values())).fill_(float("nan")))):  # loaded as is
        edited = torch.load(good, weights_only=True)
        edit(edited)
        torch.save(edited, tmp_path / f"{name}.pt")
    for name in ("missing", "truncated", "garbage", "foreign", "future", "features", "shape", "infinite", "listless",
                 "nan"):
        with pytest.raises(InvalidCheckpoint) as err:
            load_placeto(tmp_path / f"{name}.pt")
        assert "\n" not in str(err.value), name
    with pytest.raises(InvalidCheckpoint):
        PlacetoPlacer(checkpoint=str(tmp_path / "garbage.pt"))


@pytest.mark.parametrize("shape", [dict(num_devices=2, hidden=10**6, rounds=2), dict(num_devices=2, hidden=8, rounds=65),
                                   dict(num_devices=4097, hidden=8, rounds=2)])
def test_a_checkpoint_too_large_to_build_is_refused_before_allocating(tmp_path, shape):
    """A hidden of 10**6 was a RuntimeError traceback of the allocator (4 TB asked); one of 20,000 would allocate 13 GB."""
    from gnplace.policy.placeto_gnn import placeto_features

    path = tmp_path / "huge.pt"
    torch.save({"format": "gnplace-placeto", "version": 1, "state_dict": {},
                "config": {**shape, "features": list(placeto_features(shape["num_devices"]))}}, path)
    with pytest.raises(InvalidCheckpoint, match=r"huge.pt: the network's \w+ is \d+, more than the \d+ gnplace allows$"):
        load_placeto(path)


def test_pretraining_refuses_bad_input(family):
    train, _, cluster = family
    for args, options in (((train, toy_cluster(1)), {}), (([], cluster), {}), (([OpGraph([], [])], cluster), {}),
                          ((train, cluster), {"batch": 0}), ((train, cluster), {"gamma": 2.0}),
                          ((train, cluster), {"unknown": 1})):
        with pytest.raises(InvalidArgument):
            pretrain_placeto(*args, episodes=4, **options)
    with pytest.raises(InvalidArgument):
        pretrain_placeto(train, cluster, episodes=0)


def test_progress_bar_on_request(capsys, monkeypatch):
    """gnplace's one evaluation bar, drawn on stderr as on a terminal; stdout and the placement untouched."""
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich draws as on a terminal
    shown = PlacetoPlacer(budget=40, progress=True, **SMALL).place(chain_graph(4), toy_cluster(2), seed=0)
    drawn = capsys.readouterr()
    assert "placeto chain4" in drawn.err and "/40" in drawn.err and drawn.out == ""
    hidden = PlacetoPlacer(budget=40, progress=False, **SMALL).place(chain_graph(4), toy_cluster(2), seed=0)
    assert capsys.readouterr().err == "" and (shown.devices == hidden.devices).all()


def test_registered_as_a_learned_placer():
    info = PLACERS.info("placeto")
    assert PLACERS["placeto"] is PlacetoPlacer and info.learned
    assert info.accepts == frozenset({"timer", "budget", "checkpoint"})


def test_a_checkpoint_is_refused_on_one_device_too(pretrained, tmp_path):
    """A 2-device checkpoint on a one-device cluster returned the only placement, where 4 devices are refused."""
    path = save_placeto(pretrained, tmp_path / "two.pt")
    for graph in (chain_graph(4), OpGraph([], [])):
        with pytest.raises(InvalidArgument, match="trained for 2 devices, cluster 'one' has 1") as err:
            PlacetoPlacer(budget=1, checkpoint=str(path)).place(graph, toy_cluster(1, name="one"), seed=0)
        assert "\n" not in str(err.value)
    assert PlacetoPlacer(budget=1).place(chain_graph(4), toy_cluster(1), seed=0).devices.tolist() == [0] * 4


def test_max_nodes_and_passes_are_capped():
    from gnplace.placers import make_placer
    from gnplace.rl.placeto import MAX_DECISION_NODES, MAX_PASSES

    PlacetoPlacer(max_nodes=MAX_DECISION_NODES, passes=MAX_PASSES)  # the caps themselves are taken
    for options, cap in ((dict(max_nodes=MAX_DECISION_NODES + 1), f"max_nodes <= {MAX_DECISION_NODES}"),
                         (dict(max_nodes=4096), f"max_nodes <= {MAX_DECISION_NODES}"),
                         (dict(passes=MAX_PASSES + 1), f"passes <= {MAX_PASSES}")):
        with pytest.raises(InvalidArgument, match=cap) as err:
            make_placer("placeto", **options)
        assert "\n" not in str(err.value)
    with pytest.raises(InvalidArgument, match=f"passes <= {MAX_PASSES}"):
        pretrain_placeto([chain_graph(3)], load_cluster("k80x2"), episodes=1, passes=MAX_PASSES + 1)


def test_an_update_past_the_memory_limit_is_refused_before_the_network_is_built(monkeypatch):
    """max_nodes, passes and episodes each within its cap, together over 100 GiB for one update: it ran before."""
    import gnplace.rl.placeto as placeto

    def built(*args, **kwargs):
        raise AssertionError("the network was built")

    monkeypatch.setattr(placeto, "_network", built)
    graph, cluster = layered_graph(1500, width=8, seed=0), load_cluster("k80x4")
    placer = PlacetoPlacer(budget=10**7, max_nodes=placeto.MAX_DECISION_NODES, passes=placeto.MAX_PASSES,
                           episodes=512, progress=False)
    with pytest.raises(InvalidArgument, match=r"^PlacetoPlacer: one policy update would need about [0-9.]+ GiB, over "
                                              r"the 8 GiB limit; lower episodes \(now 512\), passes \(now 4\), "
                                              r"max_nodes \(now 1024\), hidden \(now 32\) or rounds \(now 8\) \(over "
                                              r"\d+ nodes, \d+ groups and 4 devices\)$") as err:
        placer.place(graph, cluster, seed=0)
    assert "\n" not in str(err.value) and placer.last_evaluations == 0
    with pytest.raises(InvalidArgument, match=r"^pretrain_placeto: one policy update would need about"):
        pretrain_placeto([graph], cluster, episodes=512, batch=512, max_nodes=1024, passes=4)


def test_the_defaults_fit_the_update_limit():
    from gnplace.limits import MAX_DEVICES
    from gnplace.rl.comparator import MAX_UPDATE_BYTES
    from gnplace.rl.placeto import MAX_DECISION_NODES, MAX_PASSES, placeto_update_bytes

    h = PlacetoPlacer().hyper
    for nodes, devices, passes in ((h.max_nodes, MAX_DEVICES, h.passes), (MAX_DECISION_NODES, 8, h.passes),
                                   (MAX_DECISION_NODES, 8, MAX_PASSES)):  # the caps, each alone
        assert placeto_update_bytes(nodes, nodes, devices, episodes=h.batch, passes=passes, hidden=h.hidden,
                                    rounds=h.rounds) < MAX_UPDATE_BYTES


def test_the_edge_delays_are_counted_and_refused_before_they_are_allocated(monkeypatch):
    """At 4,096 devices each decision-graph edge's delays take 128 MiB: 323 edges asked for 40 GiB before the check."""
    import gnplace.rl.placeto as placeto
    from gnplace.sim.costmodel import CostModel

    def allocated(*args, **kwargs):
        raise AssertionError("the [E, D, D] edge delays were allocated")

    monkeypatch.setattr(CostModel, "edge_delays", allocated)
    monkeypatch.setattr(placeto, "_network", allocated)
    graph, cluster = layered_graph(300, seed=0), toy_cluster(4096)
    inp = build_policy_input(graph, cluster, max_nodes=128, seed=0)
    edges = inp.decision.num_edges
    update = placeto.placeto_update_bytes(inp.decision.num_ops, inp.num_groups, 4096, episodes=4, passes=1,
                                          hidden=32, rounds=8)
    assert update < 8 * 2**30 < update + edges * 4096**2 * 8  # the update alone fits: only the delays do not
    pattern = (r"^{}: the transfer delays of the \d+ decision-graph edges between 4096 devices would take about "
               r"[0-9.]+ GiB, over the 8 GiB limit; lower max_nodes \(now 128\) or the number of devices$")
    placer = PlacetoPlacer(budget=10**5, progress=False)
    with pytest.raises(InvalidArgument, match=pattern.format("PlacetoPlacer")) as err:
        placer.place(graph, cluster, seed=0)
    assert "\n" not in str(err.value) and placer.last_evaluations == 0
    with pytest.raises(InvalidArgument, match=pattern.format("pretrain_placeto")):
        pretrain_placeto([graph], cluster, episodes=4)


@pytest.mark.parametrize("path", ["training", "pretraining", "random", "zero-shot"])
def test_every_path_refuses_edge_delays_past_the_limit_before_allocating_them(path, family, pretrained, tmp_path,
                                                                               monkeypatch):
    """Random and zero-shot placement build the same ``[E, D, D]`` delays as training: all check them first."""
    import gnplace.rl.comparator as comparator
    import gnplace.rl.placeto as placeto
    from gnplace.sim.costmodel import CostModel

    _, graph, cluster = family
    placers = {"training": PlacetoPlacer(budget=10**5, progress=False),
               "random": PlacetoPlacer(budget=1, progress=False),
               "zero-shot": PlacetoPlacer(budget=1, checkpoint=str(save_placeto(pretrained, tmp_path / "p.pt")),
                                          progress=False)}

    def allocated(*args, **kwargs):
        raise AssertionError("the [E, D, D] edge delays were allocated")

    edges = build_policy_input(graph, cluster, max_nodes=128, seed=0).decision.num_edges
    monkeypatch.setattr(comparator, "MAX_UPDATE_BYTES", 8 * edges * 2 * 2 - 1)  # one byte short of the delays
    monkeypatch.setattr(CostModel, "edge_delays", allocated)
    monkeypatch.setattr(placeto, "_network", allocated)
    who = "pretrain_placeto" if path == "pretraining" else "PlacetoPlacer"
    pattern = (rf"^{who}: the transfer delays of the {edges} decision-graph edges between 2 devices would take about "
               r"0\.0 GiB, over the [0-9.e-]+ GiB limit; lower max_nodes \(now 128\) or the number of devices$")
    with pytest.raises(InvalidArgument, match=pattern) as err:
        if path == "pretraining":
            pretrain_placeto([graph], cluster, episodes=4)
        else:
            placers[path].place(graph, cluster, seed=0)
    assert "\n" not in str(err.value)
    if path != "pretraining":
        assert placers[path].last_evaluations == 0


def test_placeto_update_bytes_counts_the_edge_delays():
    from gnplace.rl.placeto import placeto_update_bytes

    base = placeto_update_bytes(100, 50, 8, episodes=4, passes=1, hidden=32, rounds=8)
    assert placeto_update_bytes(100, 50, 8, episodes=4, passes=1, hidden=32, rounds=8, edges=300) == base + 300 * 64 * 8


def test_a_shape_within_the_limits_its_weights_do_not_fit_is_refused_before_allocating(pretrained, tmp_path,
                                                                                         monkeypatch):
    """hidden 8192 and 64 rounds (within the limits) in a small file was a network of 3.9 GiB built, then refused."""
    from gnplace.policy import placeto_gnn

    good = save_placeto(pretrained, tmp_path / "good.pt")
    data = torch.load(good, weights_only=True)
    data["config"].update(hidden=1024, rounds=8)
    torch.save(data, tmp_path / "huge.pt")
    built = []

    class Recorded(placeto_gnn.PlacetoGNN):
        def __init__(self, config):
            super().__init__(config)
            built.append((config.hidden, next(self.parameters()).device.type))

    monkeypatch.setattr(placeto_gnn, "PlacetoGNN", Recorded)
    with pytest.raises(InvalidCheckpoint, match=r"huge.pt: the weights do not fit the network's shape \(.*has shape "
                                                r"\[.*\], the policy needs \[.*\]\)$"):
        load_placeto(tmp_path / "huge.pt")
    assert built == [(1024, "meta")]  # shapes only: nothing of that size was allocated


class Ledger(StepTimer):
    """T(p) = 2 + k seconds and overflow(p) = k / 4 for k ops on device 1; records every placement timed."""

    def __init__(self, cluster):
        self.cluster, self.timed = cluster, []

    def time(self, graph, cluster, placement, *, timeline=False):
        raise NotImplementedError  # only batches are timed

    def time_batch(self, graph, cluster, placements):
        rows = np.asarray(placements)
        self.timed.append(rows.copy())
        k = (rows == 1).sum(axis=1).astype(float)
        cap = cluster.memory
        peak = np.stack([np.zeros_like(k), cap[1] + k / 4 * cap.max()], axis=1)
        return BatchResult(2.0 + k, np.zeros_like(peak), peak, k > 0)


def test_rewards_are_drops_of_the_normalised_cost_and_returns_their_discounted_sums():
    g, c = chain_graph(3), toy_cluster(2)
    problem = prepare_problem(g, c, cost_model=DEFAULT_COSTS)
    n, lam, gamma = problem.num_groups, 2.0, 0.5
    net = placeto._network(PlacetoConfig(num_devices=2, hidden=8, rounds=2), 0)
    ledger = Ledger(c)
    start = np.array([[0] * n, [1] * n])  # T(p_0) = 2 and 2 + num_ops: the normalisation differs per episode
    ep = placeto._play(net, problem, start, passes=2, rng=np.random.default_rng(0), timer=ledger, penalty=lam,
                       gamma=gamma)
    length = 2 * n
    assert len(ledger.timed) == 1 + length  # c(p_0), then c(p_{t+1}) after each step
    k = np.array([(rows == 1).sum(axis=1) for rows in ledger.timed], dtype=float)  # [L + 1, B]
    cost = (2.0 + k) / (2.0 + k[0]) + lam * k / 4  # c(p) = T(p) / T(p_0) + lambda over(p)
    reward = cost[:-1] - cost[1:]  # r_t = c(p_t) - c(p_{t+1})
    expected = np.array([sum(gamma ** (u - t) * reward[u] for u in range(t, length)) for t in range(length)])
    assert ep.returns == pytest.approx(expected)
    assert ep.final_cost == pytest.approx(cost[-1])
    undiscounted = placeto._play(net, problem, start, passes=1, rng=np.random.default_rng(1), timer=Ledger(c),
                                 penalty=lam)
    assert undiscounted.returns is not None and undiscounted.final_cost is not None
    c0 = 1.0 + lam * k[0] / 4  # gamma = 1: R_0 = c(p_0) - c(p_L)
    assert undiscounted.returns[0] == pytest.approx(c0 - undiscounted.final_cost)


def test_visited_marks_this_sweeps_groups_and_is_reset_at_each_sweep():
    g, c = chain_graph(3), toy_cluster(2)
    problem = prepare_problem(g, c, cost_model=DEFAULT_COSTS)
    n, d = problem.num_groups, 2
    net = placeto._network(PlacetoConfig(num_devices=d, hidden=8, rounds=2), 0)
    ep = placeto._play(net, problem, np.zeros((1, n), dtype=np.int64), passes=2, rng=np.random.default_rng(0),
                       timer=Ledger(c))
    assert ep.states is not None
    visited = ep.states[..., 2 + d].numpy()  # [L, B, N]: the column after the device one-hot
    node_group = problem.node_group
    for t in range(2 * n):
        done = set(ep.steps[t - t % n:t].tolist())  # groups decided earlier in this sweep
        assert visited[t, 0].tolist() == [float(int(x) in done) for x in node_group], t


def _episodes(problem, net, returns):
    ep = placeto._play(net, problem, np.zeros((returns.shape[1], problem.num_groups), dtype=np.int64), passes=1,
                       rng=np.random.default_rng(0), timer=Ledger(problem.inp.cluster))
    ep.returns = returns
    return ep


def _objective(net, problem, ep, advantage, entropy):
    """-(1 / BL) sum (R - bar R) log pi(a | s) - c_H / (BL) sum H(pi(. | s)), and its two terms."""
    length, count = ep.actions.shape
    x = ep.states.reshape(-1, *ep.states.shape[2:])
    logp = torch.log_softmax(net(x, problem.edge_index, *placeto._masks(problem, ep.steps, count)), -1)
    logp = logp.view(length, count, -1)
    chosen = logp.gather(-1, torch.as_tensor(ep.actions)[..., None]).squeeze(-1)
    pg = -(torch.as_tensor(advantage, dtype=torch.float32) * chosen).sum() / (length * count)
    ent = -(logp.exp() * logp).sum() / (length * count)
    return pg - entropy * ent, float(pg.detach()), float(ent.detach())


def test_the_update_is_reinforce_with_a_windowed_per_step_baseline_and_a_geometric_learning_rate():
    g, c = chain_graph(3), toy_cluster(2)
    problem = prepare_problem(g, c, cost_model=DEFAULT_COSTS)
    hyper = PlacetoHyper(hidden=8, rounds=2, entropy=0.1, clip=1e9, baseline_window=3, lr=1e-3, lr_end=1e-4)
    net = placeto._network(PlacetoConfig(num_devices=2, hidden=8, rounds=2), 0)
    net.train()
    learner = placeto._Learner(net, hyper, total_updates=3)
    length = problem.num_groups
    r1 = np.arange(2 * length, dtype=float).reshape(length, 2) ** 2 / 7  # [L, B]
    r2 = -np.arange(2 * length, dtype=float).reshape(length, 2) / 3 + 1
    baselines = [r1.mean(axis=1), (r1[:, 1] + r2[:, 0] + r2[:, 1]) / 3]  # the last 3 episodes, this update's included
    for returns, baseline, lr in zip((r1, r2), baselines, (1e-3, 1e-3 * 0.1 ** 0.5)):
        ep = _episodes(problem, net, returns)
        ref = copy.deepcopy(net)
        loss, pg, ent = _objective(ref, problem, ep, returns - baseline[:, None], 0.1)
        loss.backward()
        info = learner.update(problem, ep, key=0)
        assert info["losses/policy"] == pytest.approx(pg, rel=1e-5, abs=1e-7)
        assert info["losses/entropy"] == pytest.approx(ent, rel=1e-5)
        assert info["lr"] == pytest.approx(lr)
        for mine, theirs in zip(net.parameters(), ref.parameters()):  # the gradient of L(theta), unclipped
            assert mine.grad is not None and theirs.grad is not None
            assert torch.allclose(mine.grad, theirs.grad, rtol=1e-4, atol=1e-7)
    learner.updates = 2
    assert learner.learning_rate() == pytest.approx(1e-4)  # lr_end at the last update
    ep = _episodes(problem, net, r1)  # another graph: its own baseline, from its own episodes only
    _, pg, _ = _objective(copy.deepcopy(net), problem, ep, r1 - r1.mean(axis=1)[:, None], 0.1)
    assert learner.update(problem, ep, key=1)["losses/policy"] == pytest.approx(pg, rel=1e-5, abs=1e-7)


def test_pretraining_keeps_one_baseline_per_graph(monkeypatch):
    keys = []
    update = placeto._Learner.update

    def recorded(self, problem, episodes, key):
        keys.append(key)
        return update(self, problem, episodes, key)

    monkeypatch.setattr(placeto._Learner, "update", recorded)
    placeto.pretrain_placeto([chain_graph(2), chain_graph(3)], toy_cluster(2), episodes=3, batch=1, hidden=4,
                             rounds=1)
    assert keys == [0, 1, 0]


def test_the_gradient_norm_is_clipped():
    g, c = chain_graph(3), toy_cluster(2)
    problem = prepare_problem(g, c, cost_model=DEFAULT_COSTS)
    net = placeto._network(PlacetoConfig(num_devices=2, hidden=8, rounds=2), 0)
    learner = placeto._Learner(net, PlacetoHyper(hidden=8, rounds=2, clip=1e-6), total_updates=1)
    returns = np.arange(2 * problem.num_groups, dtype=float).reshape(problem.num_groups, 2)
    info = learner.update(problem, _episodes(problem, net, returns), key=0)
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in net.parameters() if p.grad is not None))
    assert info["grad_norm"] > 1e-6 and float(norm) == pytest.approx(1e-6, rel=1e-3)


class Fixed(torch.nn.Module):
    """A policy whose logits are ``logits`` in every state."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.tensor(logits, dtype=torch.float32)

    def forward(self, x, edge_index, *masks):
        return self.logits.expand(x.shape[0], -1)


def test_greedy_steps_take_the_argmax_and_sampled_ones_follow_the_softmax():
    g, c = chain_graph(3), toy_cluster(3)
    problem = prepare_problem(g, c, cost_model=DEFAULT_COSTS)
    start = np.zeros((1, problem.num_groups), dtype=np.int64)
    greedy = placeto._play(Fixed([0.0, 5.0, 1.0]), problem, start, passes=1, rng=np.random.default_rng(0),
                           greedy=True)
    assert greedy.final.tolist() == [[1] * problem.num_groups]
    many = np.zeros((4000, problem.num_groups), dtype=np.int64)
    drawn = placeto._play(Fixed([0.0, np.log(2.0), np.log(5.0)]), problem, many, passes=1,
                          rng=np.random.default_rng(0)).final
    assert np.bincount(drawn.ravel(), minlength=3) / drawn.size == pytest.approx([0.125, 0.25, 0.625], abs=0.01)


def test_the_list_schedule_runs_one_node_at_a_time_per_device():
    from gnplace.graph import OpGraph

    g, c = OpGraph(["a", "b", "c"], [], flops=[1e9, 2e9, 3e9]), toy_cluster(2)  # no edges: only devices wait
    problem = prepare_problem(g, c, cost_model=DEFAULT_COSTS)
    order, seconds = problem.inp.order, problem.op_time[:, 0]
    start = placeto.estimate_starts(problem, np.zeros((1, problem.num_nodes), dtype=np.int64))[0]
    assert start[order] == pytest.approx(np.concatenate([[0.0], np.cumsum(seconds[order])[:-1]]))


def test_a_budget_of_one_episode_and_one_more_trains_once_then_refines_greedily():
    g, c = chain_graph(3), toy_cluster(2)
    per_episode = 1 + prepare_problem(g, c, cost_model=DEFAULT_COSTS).num_groups
    placer = PlacetoPlacer(budget=per_episode + 1, hidden=4, rounds=1)
    placer.place(g, c, seed=0)
    assert (placer.last_updates, placer.last_episodes, placer.last_evaluations) == (1, 2, per_episode + 1)
    placer = PlacetoPlacer(budget=4 * per_episode + 1, episodes=4, hidden=4, rounds=1)
    placer.place(g, c, seed=0)  # one update of the 4 episodes, then the greedy one
    assert (placer.last_updates, placer.last_episodes, placer.last_evaluations) == (1, 5, 4 * per_episode + 1)


def test_a_bad_baseline_window_is_refused():
    with pytest.raises(InvalidArgument, match="baseline_window >= 1"):
        placeto.pretrain_placeto([chain_graph(2)], toy_cluster(2), episodes=1, baseline_window=0)


def test_the_defaults_are_the_documented_ones():
    assert PlacetoHyper() == PlacetoHyper(batch=4, hidden=32, rounds=8, lr=1e-3, lr_end=1e-4, entropy=0.01, clip=1.25,
                                          max_nodes=128, oom_penalty=4.0, passes=1, baseline_window=16, gamma=1.0)


def test_pretraining_reports_the_mean_final_cost_of_each_graphs_last_window_of_episodes():
    c = toy_cluster(2)
    ledger = Ledger(c)
    model = placeto.pretrain_placeto([chain_graph(2)], c, episodes=3, batch=1, baseline_window=2, hidden=4,
                                     rounds=1, timer=ledger)
    length = 1 + len(ledger.timed) // 3 - 1  # 1 + L timings an episode
    finals = []
    for e in range(3):
        k0, k = ((ledger.timed[e * length + i] == 1).sum() for i in (0, length - 1))
        finals.append((2.0 + k) / (2.0 + k0) + 4.0 * k / 4)  # c(p_L), oom_penalty 4
    assert model.meta["final_cost"] == pytest.approx([np.mean(finals[1:])])
