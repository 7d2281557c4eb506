"""``hierarchical``, the hierarchical planner."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.rl.hierarchical import HierarchicalPlacer
from gnplace.sim.simulator import Simulator
from tests.rl.update_limit import assert_refused_before_building, policy_features

SMALL = dict(samples=16, hidden=32, layers=1)


def test_registered_as_a_learned_budgeted_placer(seed_placer_checks):
    seed_placer_checks.registered("hierarchical", HierarchicalPlacer)


def test_learns_on_a_small_graph_and_beats_random_placements(two_chains):
    """The policy's own mean reward rises most of the way to the optimum's (a chain per device)."""
    g, c, sim = two_chains(8), load_cluster("k80x2"), Simulator()
    rng = np.random.default_rng(0)
    random_steps = [sim.time(g, c, rng.integers(2, size=g.num_ops)).step_time for _ in range(100)]
    optimum = sim.time(g, c, np.arange(g.num_ops) // 8).step_time  # _two_chains: ops 0-7 and 8-15
    # lr 0.05: at the default 0.01 the rise over 30 updates is a quarter of what is there to gain
    placer = HierarchicalPlacer(budget=480, lr=0.05, **SMALL)
    step = sim.time(g, c, placer.place(g, c, seed=0)).step_time
    assert step < np.median(random_steps) and step == pytest.approx(optimum, rel=1e-3)
    assert placer.last_evaluations == 480 and placer.last_updates == 30
    steps = [s for _, s in placer.last_history]
    assert steps == sorted(steps, reverse=True) and steps[-1] == pytest.approx(step)
    rewards, first = placer.last_mean_rewards, np.mean(placer.last_mean_rewards[:5])
    gain = -np.sqrt(optimum) - first  # R = -sqrt(T): all the first batches' mean could gain
    assert gain > 0.02 and np.mean(rewards[-5:]) > first + gain / 2


def test_deterministic_under_a_seed(seed_placer_checks):
    seed_placer_checks.deterministic(HierarchicalPlacer)


def test_divergence_is_one_error_naming_the_learning_rate(two_chains):
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"hierarchical diverged: .* \(lower hierarchical.lr, now 1e\+30\)"):
        HierarchicalPlacer(budget=160, lr=1e30, **SMALL).place(two_chains(4), load_cluster("k80x2"), seed=0)


def test_a_grouper_too_wide_to_allocate_is_refused():
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match="grouper_hidden must be at most 8192"):
        HierarchicalPlacer(grouper_hidden=10_000_000)


@pytest.mark.parametrize("bad", [dict(min_lr=1e300), dict(noise=float("inf")), dict(min_lr=float("inf")),
                                 dict(noise=1e39), dict(noise=1e31)])  # its product with a normal draw overflowed
def test_learning_rates_and_noise_that_break_the_run_are_refused(bad):
    """Accepted before, then a RuntimeError mid-run (Adam's float32 step overflowed, or nan probabilities)."""
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument) as err:
        HierarchicalPlacer(**bad)
    assert "\n" not in str(err.value)


def test_groups_and_max_nodes_are_capped():
    from gnplace.exceptions import InvalidArgument
    from gnplace.placers import make_placer
    from gnplace.rl.hierarchical import MAX_GROUPS, MAX_UNITS

    HierarchicalPlacer(groups=MAX_GROUPS, max_nodes=MAX_UNITS)  # the caps themselves are taken
    for options, cap in ((dict(groups=MAX_GROUPS + 1), f"groups must be at most {MAX_GROUPS}"),
                         (dict(max_nodes=MAX_UNITS + 1), f"max_nodes must be at most {MAX_UNITS}")):
        with pytest.raises(InvalidArgument, match=cap) as err:
            make_placer("hierarchical", **options)
        assert "\n" not in str(err.value)


def test_an_update_past_the_memory_limit_is_refused_before_the_networks_are_built(monkeypatch):
    """Each option within its cap, together tens of GiB for one update: it ran (and allocated) before."""
    from gnplace.limits import MAX_DRAWN
    from gnplace.policy import grouper, seq2seq

    placer = HierarchicalPlacer(budget=MAX_DRAWN, samples=MAX_DRAWN, hidden=1024, groups=1024, progress=False)
    assert_refused_before_building(placer, monkeypatch, [seq2seq.Seq2SeqPolicy, grouper.Grouper],
                                   r"^HierarchicalPlacer: one policy update would need about [0-9.]+ GiB, over the 8 "
                                   r"GiB limit; lower samples \(now 16384\), groups \(now \d+\), max_nodes \(now 256\), "
                                   r"hidden \(now 1024\) or layers \(now 2\)")


def test_the_defaults_fit_the_update_limit():
    from gnplace.limits import MAX_DEVICES
    from gnplace.rl.comparator import MAX_UPDATE_BYTES
    from gnplace.rl.hierarchical import MAX_GROUPS, default_groups, hierarchical_update_bytes

    features = policy_features()
    p = HierarchicalPlacer()
    for units, groups, devices in ((p.max_nodes, default_groups(MAX_DEVICES, p.max_nodes), MAX_DEVICES),
                                   (MAX_GROUPS, MAX_GROUPS, 8)):  # the default, and the groups cap itself
        assert hierarchical_update_bytes(units, groups, p.samples, devices, hidden=p.hidden, layers=p.layers,
                                         grouper_hidden=p.grouper_hidden, in_features=features) < MAX_UPDATE_BYTES


def test_the_decay_never_raises_a_learning_rate_below_its_floor(two_chains, monkeypatch):
    """lr=1e-4 under the default min_lr=1e-3 was raised to 1e-3 by the first decay (max(lr * 0.95, min_lr))."""
    import torch

    made = []

    class Recorded(torch.optim.Adam):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(torch.optim, "Adam", Recorded)
    placer = HierarchicalPlacer(budget=160, lr=1e-4, decay_every=1, **SMALL)
    placer.place(two_chains(4), load_cluster("k80x2"), seed=0)
    assert placer.last_updates >= 2 and made
    assert [group["lr"] for group in made[0].param_groups] == [1e-4] * len(made[0].param_groups)


def test_another_runs_start_on_the_same_placer_leaves_this_runs_decay_alone(two_chains, monkeypatch):
    """The decay counted the updates in ``last_updates``, which another thread's place() on the same placer resets
    to 0 at its start: this run's learning rate then decayed on another schedule (another placement)."""
    import torch

    made = []

    class Recorded(torch.optim.Adam):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    class Meanwhile(Simulator):  # another run starts on the placer before each batch is timed
        def time_batch(self, graph, cluster, placements):
            placer.last_updates = 0
            return super().time_batch(graph, cluster, placements)

    monkeypatch.setattr(torch.optim, "Adam", Recorded)
    g, c = two_chains(4), load_cluster("k80x2")
    alone = HierarchicalPlacer(budget=160, decay_every=2, lr=0.01, min_lr=1e-4, **SMALL)
    expected = alone.place(g, c, seed=0)
    decayed = [group["lr"] for group in made[-1].param_groups]
    assert alone.last_updates >= 4 and decayed[0] < 0.01
    placer = HierarchicalPlacer(budget=160, decay_every=2, lr=0.01, min_lr=1e-4, timer=Meanwhile(), **SMALL)
    assert placer.place(g, c, seed=0) == expected
    assert [group["lr"] for group in made[-1].param_groups] == decayed


@pytest.mark.parametrize("lr_decay", [0, 0.0, -1, 1.5, "x"])
def test_a_bad_lr_decay_is_refused_with_the_interval_it_is_checked_against(lr_decay):
    """1.5 was refused as outside [0, 1] and 0 as not > 0: the first message offered a value the second refused."""
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"^HierarchicalPlacer: lr_decay must be in \(0, 1\], got "):
        HierarchicalPlacer(lr_decay=lr_decay)
    assert HierarchicalPlacer(lr_decay=1.0).lr_decay == 1.0  # no decay: still taken


def test_explicit_groups_are_capped_at_the_units():
    from gnplace.rl.comparator import SequenceProblem
    from gnplace.toy import chain_graph, toy_cluster

    problem = SequenceProblem.build(chain_graph(3), toy_cluster(2), Simulator(), 10, max_nodes=256, seed=0)
    assert problem.units == 3
    assert HierarchicalPlacer(groups=50).groups_for(problem) == 3 == HierarchicalPlacer().groups_for(problem)
    assert HierarchicalPlacer(groups=2).groups_for(problem) == 2


def test_the_clip_and_the_baselines_decay_are_the_ones_given(two_chains, monkeypatch):
    import torch

    from gnplace.rl import hierarchical

    clips, decays = [], []
    clip_grad_norm = torch.nn.utils.clip_grad_norm_

    def recorded(parameters, max_norm, *args, **kwargs):
        clips.append(max_norm)
        return clip_grad_norm(parameters, max_norm, *args, **kwargs)

    class Baseline(hierarchical.MovingBaseline):
        def __init__(self, decay=0.9):
            decays.append(decay)
            super().__init__(decay)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recorded)
    monkeypatch.setattr(hierarchical, "MovingBaseline", Baseline)
    placer = HierarchicalPlacer(budget=32, clip=0.25, decay=0.5, **SMALL)
    placer.place(two_chains(4), load_cluster("k80x2"), seed=0)
    assert clips == [0.25] * placer.last_updates and placer.last_updates == 2 and decays == [0.5]


def test_hierarchical_update_bytes_follows_its_formula():
    from gnplace.policy.grouper import Grouper
    from gnplace.rl.comparator import seq2seq_update_bytes
    from gnplace.rl.hierarchical import hierarchical_update_bytes

    s, k, b, d, f, gh = 5, 3, 2, 2, 7, 6
    grouper = f * gh + gh + gh * k + k
    assert sum(p.numel() for p in Grouper(f, k, gh).parameters()) == grouper
    placer = seq2seq_update_bytes(k, b, d, hidden=4, layers=1, in_features=f + 1 + k, batched_encoder=True)
    expected = placer + 16 * grouper + 4 * (3 * b * k * (k + f + 1) + 6 * s * k + 3 * s * gh)
    assert hierarchical_update_bytes(s, k, b, d, hidden=4, layers=1, grouper_hidden=gh, in_features=f) == expected


def test_the_placers_adjacency_reads_group_edges_in_sequence_positions(monkeypatch):
    from gnplace.policy import grouper
    from gnplace.policy.seq2seq import group_edges
    from gnplace.rl.comparator import SequenceProblem
    from gnplace.toy import layered_graph

    g, c = layered_graph(30, seed=1), load_cluster("k80x2")
    problem = SequenceProblem.build(g, c, Simulator(), 16, max_nodes=256, seed=0)
    order = problem.order.tolist()
    assert order != sorted(order)  # sequence positions are not group numbers here
    expected = [(order.index(u), order.index(v)) for u, v in np.asarray(group_edges(problem.inp)).reshape(-1, 2)]
    seen = []
    group_inputs = grouper.group_inputs

    def recorded(x, grouping, groups, edges):
        seen.append(edges.tolist())
        return group_inputs(x, grouping, groups, edges)

    monkeypatch.setattr(grouper, "group_inputs", recorded)
    HierarchicalPlacer(budget=16, samples=16, hidden=8, layers=1).place(g, c, seed=0)
    assert seen and all(edges == [list(e) for e in expected] for edges in seen)
