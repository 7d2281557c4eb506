"""``policy``'s decodes on a cluster's fastest devices (:mod:`gnplace.rl.zeroshot_decoding`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnplace.policy.features import decision_graph
from gnplace.policy.gnn import PlacementPolicy, PolicyConfig
from gnplace.rl.zeroshot_decoding import Decoder, by_speed, construct_on, device_set_input, subset_sizes
from gnplace.sim.costmodel import DEFAULT_COSTS
from gnplace.toy import layered_graph, mixed_cluster, toy_cluster


def test_past_16_devices_the_device_sets_are_a_ladder_not_every_k():
    """A decode on every k held D policy inputs: 1,024 devices took 240 s and 16.8 GB for a 3,197-op graph."""
    assert subset_sizes(16) == list(range(2, 16)) and subset_sizes(17) == list(range(2, 17))
    assert subset_sizes(18) == [*range(2, 17), 17]
    assert subset_sizes(4096) == [*range(2, 17), 32, 64, 128, 256, 512, 1024, 2048, 4095]


def test_devices_by_speed_fastest_first_ties_by_index():
    assert by_speed(mixed_cluster()).tolist() == [2, 1, 0]  # v100, k80, cpu
    assert by_speed(toy_cluster(3)).tolist() == [0, 1, 2]


@pytest.fixture(scope="module")
def small_policy():
    torch.manual_seed(0)
    return PlacementPolicy(PolicyConfig(hidden=16, layers=1))


def test_a_decoder_on_the_fastest_devices_places_on_them_alone_and_names_them(small_policy):
    graph, cluster = layered_graph(30, width=3, seed=0), mixed_cluster()
    whole = decision_graph(graph, cluster, max_nodes=1000, seed=0)
    keep, inp = device_set_input(graph, cluster, 2, whole, None, cost_model=DEFAULT_COSTS, max_nodes=1000)
    assert keep.tolist() == [2, 1]  # the two GPUs: input device i is cluster device keep[i]
    decoder = Decoder(small_policy, inp, keep, whole=False)
    assert decoder.name("greedy") == "greedy on the 2 fastest"
    greedy = decoder.greedy()
    drawn = decoder.sample(3, np.random.default_rng(0), np.full(3, 0.5))
    assert greedy.shape == (1, graph.num_ops) and drawn.shape == (3, graph.num_ops)
    assert set(np.unique(np.concatenate([greedy, drawn])).tolist()) <= {1, 2}
    keep, inp = device_set_input(graph, cluster, 3, whole, None, cost_model=DEFAULT_COSTS, max_nodes=1000)
    assert keep.tolist() == [0, 1, 2] and Decoder(small_policy, inp, keep, whole=True).name("greedy") == "greedy"


def test_a_constructor_places_greedily_then_samples_on_an_inputs_devices(small_policy):
    graph, cluster = layered_graph(30, width=3, seed=0), toy_cluster(3)
    _, inp = device_set_input(graph, cluster, 3, decision_graph(graph, cluster, max_nodes=1000, seed=0), None,
                              cost_model=DEFAULT_COSTS, max_nodes=1000)
    built = construct_on(small_policy, inp, np.random.default_rng(1), 4, 0.1)
    assert built.shape == (5, graph.num_ops) and built.min() >= 0 and built.max() < 3
    again = construct_on(small_policy, inp, np.random.default_rng(1), 4, 0.1)
    assert np.array_equal(built, again)  # the samples' generator alone draws them
    alone = construct_on(small_policy, inp, np.random.default_rng(1), 0, 0.1)
    assert np.array_equal(alone, built[:1])  # no samples: the greedy placement only
