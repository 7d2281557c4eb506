"""What the seeds' recurrent placers share: the sequence problem, the reward and the budget loop."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.limits import MAX_BUDGET
from gnplace.placers import PLACERS
from gnplace.rl.comparator import (
    FAIL_FACTOR,
    SequenceProblem,
    check_finite_weights,
    check_nonnegative,
    check_positive,
    sqrt_reward,
)
from gnplace.rl.config import FLOAT32_MAX
from gnplace.rl.rnn_pg import RnnPGPlacer
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, layered_graph, mlp_training_graph, toy_cluster
from tests.rl.update_limit import assert_refused_before_building, policy_features


def test_sqrt_reward_charges_a_fixed_time_to_failures():
    r = sqrt_reward(np.array([0.5, 2.0, 0.1]), np.array([False, False, True]), 2.0)
    assert r.tolist() == pytest.approx([-0.5, -1.0, -np.sqrt(FAIL_FACTOR)])


def test_an_overflow_is_charged_more_than_any_serial_step_on_a_mixed_cluster():
    """T_fail was 10 T_ser, all on the fastest devices: on a CPU + GPU cluster a feasible placement took longer,
    and the policies learned to overflow (19 of 25 batches of rnn_pg all out of memory)."""
    g, c = mlp_training_graph(layers=3, width=1024, batch=256), load_cluster("cpu_gpu")
    problem = SequenceProblem.build(g, c, Simulator(), 10, max_nodes=1000, seed=0)
    assert problem.slowest > FAIL_FACTOR * problem.serial  # the CPU is that much slower here (30x)
    on_cpu = problem.inp.cluster.kinds.index("cpu")
    result, rewards = problem.score(np.full((2, problem.units), on_cpu))
    assert not result.oom.any()
    overflow = sqrt_reward(np.zeros(1), np.ones(1, dtype=bool), problem.serial, problem.slowest)
    assert overflow[0] < rewards.min()  # worse than the slowest placement that fits
    assert sqrt_reward(np.zeros(1), np.ones(1, dtype=bool), 2.0)[0] == pytest.approx(-np.sqrt(FAIL_FACTOR))


def test_problem_maps_sequence_actions_to_every_op_and_counts_evaluations():
    g, c = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2")
    problem = SequenceProblem.build(g, c, Simulator(), 10, max_nodes=1000, seed=0)
    actions = np.zeros((2, problem.units), dtype=np.int64)
    actions[1, 0] = 1
    devices = problem.devices(actions)
    assert devices.shape == (2, g.num_ops) and devices[0].sum() == 0
    for group in np.unique(g.group):  # ops of one group share a device
        assert len(set(devices[1][g.group == group].tolist())) == 1
    assert devices[1].sum() > 0
    result, rewards = problem.score(actions)
    assert problem.remaining == 8 and problem.history == [(2, problem.best_step)] and rewards.shape == (2,)
    assert problem.best_step == pytest.approx(result.step_time[~result.oom].min())


def test_the_learning_curve_holds_no_overflowing_best_once_a_placement_fits(heavy_groups, small_gpus):
    """All on one GPU overflows and is fastest; the spread placement fits. The curve went down to the overflowing
    step, then back up: a best step time that was never a placement's to reach."""
    g, c = heavy_groups([0.6, 0.6, 0.6]), small_gpus(3, memory=1 * 2**30)
    problem = SequenceProblem.build(g, c, Simulator(), 10, max_nodes=1000, seed=0)
    crammed, _ = problem.score(np.zeros((1, problem.units), dtype=np.int64))
    assert crammed.oom[0] and problem.history == [(1, crammed.step_time[0])]  # nothing fits yet: the least overflow
    spread, _ = problem.score(np.arange(problem.units)[None, :])
    assert not spread.oom[0] and spread.step_time[0] > crammed.step_time[0]
    assert problem.history == [(2, spread.step_time[0])] and problem.best_step == spread.step_time[0]


def test_single_device_and_empty_graphs_are_trivial():
    placer = RnnPGPlacer(budget=16, samples=4, hidden=8, layers=1)
    assert placer.place(chain_graph(3), toy_cluster(1), seed=0).devices.tolist() == [0, 0, 0]
    assert placer.last_evaluations == 0
    assert placer.place(chain_graph(0), toy_cluster(2), seed=0).devices.tolist() == []


def test_a_budget_below_one_batch_buys_random_placements():
    placer = RnnPGPlacer(budget=5, samples=8, hidden=8, layers=1)
    p = placer.place(mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2"), seed=0)
    assert placer.last_evaluations == 5 and placer.last_updates == 0 and p.devices.shape == (14,)


@pytest.mark.parametrize("bad", [dict(budget=0), dict(budget=1.5), dict(samples=1), dict(hidden=7), dict(lr=0.0),
                                 dict(max_nodes=0), dict(layers=True),
                                 # allocated before: a traceback of 8 TB asked of the allocator
                                 dict(hidden=1_000_000), dict(layers=65), dict(samples=16385),
                                 # accepted before, then a RuntimeError mid-run: Adam's float32 step overflowed, or
                                 # the probabilities were nan
                                 dict(lr=1e300), dict(lr=float("inf")), dict(clip=float("inf")),
                                 dict(clip=10**400),  # a whole number past a float: float() an OverflowError
                                 dict(clip=1e39)])  # past float32's range, which every option enters
def test_bad_arguments_are_one_line_errors(bad):
    with pytest.raises(InvalidArgument) as err:
        RnnPGPlacer(**bad)
    assert "\n" not in str(err.value) and len(str(err.value)) < 200  # 10**400 is shown by its length


def test_numbers_are_checked_against_float32s_range():
    check_positive("me", x=FLOAT32_MAX)
    check_nonnegative("me", x=0)
    with pytest.raises(InvalidArgument, match=r"^me: x must be > 0 and finite within float32's range \(3.4e38\), "
                                              r"got 1e\+39$"):
        check_positive("me", x=1e39)
    with pytest.raises(InvalidArgument, match=r"^me: y must be >= 0 .*, got a number of 401 digits$"):
        check_nonnegative("me", y=10**400)


def test_weights_that_are_not_finite_stop_the_run_naming_the_options_to_lower():
    import torch

    from gnplace.rl.post import PostPlacer

    finite, broken = [torch.zeros(3)], [torch.zeros(3), torch.tensor([0.0, float("nan")])]
    check_finite_weights("me", finite, 1, "me.lr")
    with pytest.raises(InvalidArgument, match=r"^me diverged: the policy's weights are not finite after 2 update\(s\) "
                                              r"\(lower me.lr\)$"):
        check_finite_weights("me", broken, 2, "me.lr")
    with pytest.raises(InvalidArgument, match=r"^rnn_pg diverged: .* after 0 update\(s\) \(lower rnn_pg.lr, now 0.5\)$"):
        RnnPGPlacer(lr=0.5).check_weights(broken)
    with pytest.raises(InvalidArgument, match=r"\(lower one of post.lr, now 0.003; post.beta, now 1; post.entropy, now 0; "
                                              r"post.cross_entropy, now 2\)$"):
        PostPlacer(cross_entropy=2.0).check_weights(broken)


@pytest.mark.parametrize("name", ["rnn_pg", "hierarchical", "spotlight", "post"])
@pytest.mark.parametrize("budget", [MAX_BUDGET + 1, 2**62])
def test_a_budget_past_the_limit_is_refused_in_one_line(name, budget):
    """Budgets past MAX_BUDGET were accepted (``place -p rnn_pg --budget 100000000000``): a search that never ends."""
    cls = PLACERS[name]
    with pytest.raises(InvalidArgument, match=rf"^{cls.__name__} needs a budget >= 1 \(a whole number of timer "
                                              rf"evaluations, at most 1,000,000,000\), got {budget!r}$"):
        cls(budget=budget)
    assert cls(budget=np.int64(MAX_BUDGET)).budget == MAX_BUDGET


def test_an_overflowing_best_is_repaired_outside_the_budget(heavy_groups, small_gpus):
    g, c = heavy_groups([0.6, 0.6, 0.6]), small_gpus(3, memory=1 * 2**30)  # fits only one group per device
    placer = RnnPGPlacer(budget=1, samples=2, hidden=8, layers=1)
    repaired = 0
    for seed in range(8):  # one random placement each: most overflow
        p = placer.place(g, c, seed=seed)
        assert placer.last_evaluations == 1
        result = Simulator().time(g, c, p)
        assert not result.is_oom and sorted(p.devices.tolist()) == [0, 1, 2]
        # the curve ends at the placement returned, not at the overflowing best (it did after a repair)
        assert placer.last_history[-1] == (1, pytest.approx(result.step_time))
        assert placer.last_step == pytest.approx(result.step_time)  # the step of the placement returned
        repaired += placer.last_repair_evaluations > 0
    assert repaired >= 1


@pytest.mark.parametrize("name", ["rnn_pg", "spotlight", "post"])
def test_max_nodes_is_capped(name):
    """``max_nodes`` was uncapped for the seq2seq placers, whose attention is quadratic in the units."""
    from gnplace.rl.comparator import MAX_UNITS

    cls = PLACERS[name]
    assert cls(max_nodes=MAX_UNITS).max_nodes == MAX_UNITS  # the cap itself is taken
    with pytest.raises(InvalidArgument, match=rf"^{cls.__name__}: max_nodes must be at most {MAX_UNITS}, got "
                                              rf"{MAX_UNITS + 1}$"):
        cls(max_nodes=MAX_UNITS + 1)


def test_seq2seq_parameters_counts_the_policy_weights():
    from gnplace.policy.seq2seq import Seq2SeqPolicy
    from gnplace.rl.comparator import seq2seq_parameters

    for features, devices, hidden, layers in ((40, 4, 128, 2), (7, 3, 16, 1), (50, 8, 64, 3)):
        policy = Seq2SeqPolicy(features, devices, hidden=hidden, layers=layers)
        assert seq2seq_parameters(features, devices, hidden, layers) == sum(p.numel() for p in policy.parameters())


@pytest.mark.parametrize("name", ["rnn_pg", "spotlight", "post"])
def test_an_update_past_the_memory_limit_is_refused_before_the_policy_is_built(name, monkeypatch):
    """Each option within its cap, together about 10 GiB for one update: it ran (and allocated) before."""
    from gnplace.limits import MAX_DRAWN
    from gnplace.policy import seq2seq

    cls = PLACERS[name]
    placer = cls(budget=MAX_DRAWN, samples=MAX_DRAWN, hidden=1024, progress=False)
    assert_refused_before_building(placer, monkeypatch, [seq2seq.Seq2SeqPolicy],
                                   rf"^{cls.__name__}: one policy update would need about [0-9.]+ GiB, over the 8 GiB "
                                   r"limit; lower samples \(now 16384\), max_nodes \(now 256\), hidden \(now 1024\) or "
                                   r"layers \(now 2\) \(over \d+ units and 2 devices\)$")


def test_the_defaults_fit_the_update_limit():
    """At the defaults (and at the cap of max_nodes with the other defaults) an update fits, on any cluster."""
    from gnplace.limits import MAX_DEVICES
    from gnplace.rl.comparator import MAX_UNITS, MAX_UPDATE_BYTES, seq2seq_update_bytes

    features = policy_features()
    default = RnnPGPlacer()
    for units, devices in ((default.max_nodes, MAX_DEVICES), (MAX_UNITS, 8)):
        assert seq2seq_update_bytes(units, default.samples, devices, hidden=default.hidden, layers=default.layers,
                                    in_features=features) < MAX_UPDATE_BYTES
    placer = RnnPGPlacer(budget=32, progress=False)  # the default policy, a short run
    assert placer.place(mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x4"), seed=0)
    assert placer.last_updates == 2


def test_search_hook_is_typed_as_what_place_passes():
    """``search``'s ``tick`` was ``Any``; it is the no-argument callable ``place`` passes, in every comparator."""
    import inspect

    from gnplace.rl.comparator import ComparatorPlacer
    from gnplace.rl.hierarchical import HierarchicalPlacer
    from gnplace.rl.post import PostPlacer
    from gnplace.rl.rnn_pg import RnnPGPlacer
    from gnplace.rl.spotlight import SpotlightPlacer

    for cls in (ComparatorPlacer, RnnPGPlacer, HierarchicalPlacer, SpotlightPlacer, PostPlacer):
        assert inspect.signature(cls.search).parameters["tick"].annotation == "Callable[[], None]", cls.__name__


def test_a_run_draws_its_initial_weights_with_the_global_generator_to_itself():
    """The run seeded torch's global generator for the policy's initial weights (fork_rng, manual_seed) while other
    threads could seed and draw from it too: a comparator placer in threads trained other weights than alone. It
    holds the generator (seeded_torch) for its run: another thread cannot enter meanwhile."""
    import threading

    from gnplace import seed

    free: list[bool] = []

    class Probing(Simulator):
        def time_batch(self, graph, cluster, placements):
            def probe() -> None:
                got = seed._GLOBAL_GENERATOR.acquire(blocking=False)
                free.append(got)
                if got:
                    seed._GLOBAL_GENERATOR.release()

            other = threading.Thread(target=probe)
            other.start()
            other.join()
            return super().time_batch(graph, cluster, placements)

    RnnPGPlacer(budget=32, samples=16, hidden=16, timer=Probing()).place(chain_graph(4), load_cluster("k80x2"), seed=0)
    assert free and not any(free)


def test_check_unit_states_the_interval_it_checks():
    from gnplace.rl.comparator import check_unit

    for kwargs, interval, refused, taken in (({}, "[0, 1)", (1.0, -0.5), (0.0, 0.5)),
                                             ({"closed": True}, "[0, 1]", (1.5,), (0.0, 1.0)),
                                             ({"positive": True}, "(0, 1)", (0.0, 1.0), (0.5,)),
                                             ({"closed": True, "positive": True}, "(0, 1]", (0.0, 2.0), (1.0,))):
        for value in refused:
            with pytest.raises(InvalidArgument, match=rf"^me: x must be in {re.escape(interval)}, got "):
                check_unit("me", x=value, **kwargs)
        for value in taken:
            check_unit("me", x=value, **kwargs)
    with pytest.raises(InvalidArgument, match=r"got a number of 401 digits$"):  # not its digits
        check_unit("me", x=10**400)


def test_each_placers_docstring_states_the_reward_it_computes():
    """rnn_pg's, hierarchical's and spotlight's said R = -sqrt(T), the papers' reward in seconds; sqrt_reward
    computes -sqrt(T / T_ser), the step time over the graph's serial step (a step of 8 s over 2 s: -2, not -2.83)."""
    from gnplace.rl import hierarchical, rnn_pg, spotlight

    assert sqrt_reward(np.array([8.0]), np.array([False]), 2.0)[0] == pytest.approx(-2.0)
    for module in (rnn_pg, hierarchical, spotlight):
        assert module.__doc__ is not None and ":math:`R = -\\sqrt{T / T_{ser}}`" in module.__doc__, module.__name__


def test_the_action_at_each_position_of_the_sequence_places_that_positions_group():
    g, c = layered_graph(30, seed=1), load_cluster("k80x2")
    problem = SequenceProblem.build(g, c, Simulator(), 10, max_nodes=1000, seed=0)
    assert problem.order.tolist() != list(range(problem.units))  # the sequence is not the groups' numbering
    actions = np.eye(problem.units, dtype=np.int64)  # sample i: position i on device 1, the rest on device 0
    per_group = np.zeros_like(actions)
    per_group[np.arange(problem.units), problem.order] = 1  # position i is group order[i]
    assert np.array_equal(problem.devices(actions), problem.inp.expand(per_group))


def test_score_records_the_mean_sqrt_reward_of_each_batch():
    g, c = chain_graph(4), toy_cluster(2)
    problem = SequenceProblem.build(g, c, Simulator(), 10, max_nodes=256, seed=0)
    actions = np.array([[0] * problem.units, [0, 1] * (problem.units // 2)])
    result, rewards = problem.score(actions)
    expected = -np.sqrt(result.step_time / problem.serial)  # R = -sqrt(T / T_ser), nothing overflows
    assert not result.oom.any() and rewards == pytest.approx(expected)
    assert problem.mean_rewards == [pytest.approx(expected.mean())]


def test_seq2seq_update_bytes_follows_its_formula():
    from gnplace.rl.comparator import seq2seq_parameters, seq2seq_update_bytes

    s, b, d, h, layers = 6, 3, 2, 8, 2
    weights = 16 * seq2seq_parameters(5, d, h, layers)
    for batched, lstm in ((False, 8 * layers), (True, 16 * layers)):  # 8 L (1 + [batched]) H
        expected = weights + 4 * b * s * (3 * s + (24 + lstm) * h + 8 * d)
        assert seq2seq_update_bytes(s, b, d, hidden=h, layers=layers, in_features=5,
                                    batched_encoder=batched) == expected


def test_the_rate_and_sign_checks_refuse_just_past_their_bounds():
    from gnplace.rl.comparator import MAX_LR, check_rate

    check_rate("me", lr=MAX_LR)
    with pytest.raises(InvalidArgument, match="lr must be at most"):
        check_rate("me", lr=2 * MAX_LR)
    check_nonnegative("me", noise=0.0)
    with pytest.raises(InvalidArgument, match="noise must be >= 0"):
        check_nonnegative("me", noise=-1e-9)


def test_a_huge_int_is_shown_by_its_length_in_a_refusal():
    with pytest.raises(InvalidArgument, match=r"got a number of 31 digits$"):
        check_positive("me", x=-10**30)
