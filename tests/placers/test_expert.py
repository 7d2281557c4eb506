"""Tests of the ``expert`` placer: one layer per device for recurrent stacks, else compute-balanced blocks.

The memory guarantee on random graphs is tested for every heuristic placer in ``test_groups.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.graph import OpGraph
from gnplace.placers.expert import ExpertPlacer, group_layers
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, mlp_training_graph


def stacked_rnn(layers: int = 3, steps: int = 4, **meta: str) -> OpGraph:
    """An unrolled RNN language model: ``embedding``, ``rnn.<l>`` per step and layer, ``softmax``.

    Each (layer, step) is its own group, as the torch importer makes one group per module call.
    """
    names, modules, edges = ["embed"], ["embedding"], []
    cell: dict[tuple[int, int], int] = {}
    for t in range(steps):
        for layer in range(layers):
            cell[layer, t] = len(names)
            names.append(f"l{layer}t{t}")
            modules.append(f"rnn.{layer}")
            edges.append((cell[layer - 1, t] if layer else 0, cell[layer, t]))
            if t:
                edges.append((cell[layer, t - 1], cell[layer, t]))
    names.append("softmax")
    modules.append("")
    edges += [(cell[layers - 1, t], len(names) - 1) for t in range(steps)]
    return OpGraph(names, edges, flops=[1e9] * len(names), out_bytes=[10**5] * len(names), module=modules,
                   name="stacked_rnn", meta=meta)


def test_name_and_repr():
    assert ExpertPlacer.name == "expert"
    assert repr(ExpertPlacer()) == "ExpertPlacer(strategy='auto', memory_aware=True)"
    assert repr(ExpertPlacer(strategy="blocks", memory_aware=False)) == "ExpertPlacer(strategy='blocks', memory_aware=False)"


def test_unknown_strategy_names_the_choices():
    with pytest.raises(ValueError, match=r"unknown strategy 'pipeline' \(choose 'auto', 'layers' or 'blocks'\)"):
        ExpertPlacer(strategy="pipeline")


def test_chain_is_cut_into_compute_balanced_contiguous_blocks():
    assert ExpertPlacer().place(chain_graph(6), load_cluster("k80x2")).devices.tolist() == [0, 0, 0, 1, 1, 1]
    assert ExpertPlacer().place(chain_graph(8), load_cluster("k80x4")).devices.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_blocks_follow_compute_not_op_count():
    g = OpGraph([f"n{i}" for i in range(4)], [(0, 1), (1, 2), (2, 3)], flops=[3e11, 1e11, 1e11, 1e11])
    assert ExpertPlacer().place(g, load_cluster("k80x2")).devices.tolist() == [0, 1, 1, 1]


def test_two_independent_chains_get_one_device_each(two_chains):
    assert ExpertPlacer().place(two_chains(), load_cluster("k80x2")).devices.tolist() == [0] * 4 + [1] * 4


def test_a_cpu_beside_a_gpu_is_left_idle():
    g = mlp_training_graph(layers=4, width=256, batch=64)
    assert set(ExpertPlacer().place(g, load_cluster("cpu_gpu")).devices.tolist()) == {1}


def test_group_layers_reads_module_paths():
    layers, recurrent = group_layers(stacked_rnn(layers=2, steps=2))
    assert layers.tolist() == [-1, 0, 1, 0, 1, -1] and recurrent
    g = OpGraph(["f", "b", "x"], module=["encoder.backward_cell", "encoder.cells.1", "decoder.attention"])
    layers, recurrent = group_layers(g)
    assert layers.tolist() == [0, 1, -1] and not recurrent


def test_stacked_rnn_puts_layer_i_on_device_i_mod_d():
    g = stacked_rnn(layers=3, steps=4)
    devices = ExpertPlacer().place(g, load_cluster("k80x2")).devices
    for layer in range(3):
        assert set(devices[[i for i, m in enumerate(g.module) if m == f"rnn.{layer}"]].tolist()) == {layer % 2}
    assert devices[0] == 0 and devices[-1] == 2 % 2  # embedding with the first layer, softmax with the last
    devices = ExpertPlacer().place(g, load_cluster("k80x4")).devices
    assert devices[0] == 0 and devices[-1] == 2


def test_family_meta_selects_layers_and_strategy_overrides():
    g = stacked_rnn(layers=2, steps=1, family="ptb")  # one step: no recurrence, the family decides
    c = load_cluster("k80x4")
    assert ExpertPlacer().place(g, c).devices.tolist() == [0, 0, 1, 1]
    assert ExpertPlacer(strategy="blocks").place(g, c).devices.tolist() == [0, 1, 2, 3]


def test_recurrent_family_without_layer_names_stays_on_one_device():
    g = chain_graph(6).replace(meta={"family": "ptb"}, module=["cell.nodes.0"] * 6)  # one-layer ENAS cell
    assert set(ExpertPlacer().place(g, load_cluster("k80x4")).devices.tolist()) == {0}


def test_real_nmt_graph_gets_one_layer_per_device():
    from gnplace.families import nmt
    from gnplace.importers.torch import from_module

    model, inputs = nmt.sample(np.random.default_rng(0), units=8, batch=2, src_steps=2, tgt_steps=2, vocab=20, layers=3)
    g = from_module(model, inputs, meta={"family": "nmt"})
    devices = ExpertPlacer().place(g, load_cluster("k80x4")).devices
    where = {m: set(devices[[i for i, x in enumerate(g.module) if x == m]].tolist()) for m in set(g.module)}
    for layer in range(3):
        assert where[f"encoder.cells.{layer}"] == where[f"decoder.cells.{layer}"] == {layer}
    assert where["encoder.backward_cell"] == where["source_embedding"] == where["target_embedding"] == {0}
    assert where["decoder.attention"] == {2}


def test_graph_that_only_fits_split_is_not_oom(only_fits_split):
    g, c = only_fits_split
    p = ExpertPlacer().place(g, c)
    assert not p.splits_groups(g)
    assert not Simulator().time(g, c, p).is_oom


def test_is_deterministic():
    g, c = mlp_training_graph(layers=5, width=64, batch=8, branches=2), load_cluster("k80x4")
    assert ExpertPlacer().place(g, c, seed=0) == ExpertPlacer().place(g, c, seed=1)


@pytest.mark.parametrize("cluster", ["k80x2", "k80x4"])
def test_against_single_and_round_robin_on_the_example(cluster, example_step_times):
    ours, single, robin = example_step_times(ExpertPlacer(), cluster)
    assert ours <= single
    # one tower per GPU on two GPUs; on four, each tower is cut into two blocks, which overlap less
    # of the backward pass than round robin's alternating layers
    assert ours <= robin * (1 + 1e-9) if cluster == "k80x2" else ours <= 1.3 * robin


def test_a_recurrence_of_one_layer_is_cut_into_blocks():
    """Layers go one per device only where several recur: one recurring layer would put everything on device 0."""
    g = stacked_rnn(layers=1, steps=4)  # rnn.0 runs at four steps, no family named
    assert group_layers(g)[1]
    assert ExpertPlacer().place(g, load_cluster("k80x2")).devices.tolist() == [0, 0, 0, 1, 1, 1]


def test_a_group_of_ops_of_several_layers_is_the_deepest():
    g = OpGraph(["a", "b"], [(0, 1)], module=["rnn.1", "rnn.0"], group=[0, 0])
    assert group_layers(g)[0].tolist() == [1]


def test_a_group_without_a_layer_joins_the_shallowest_layer_feeding_its_ops():
    """``attn``'s op ``x`` is fed by layer 0 and ``y`` by layer 1: the group goes with layer 0."""
    g = OpGraph(["l0", "l1", "x", "y"], [(0, 1), (0, 2), (1, 3)], module=["rnn.0", "rnn.1", "attn", "attn"],
                group=[0, 1, 2, 2])
    assert ExpertPlacer(strategy="layers").place(g, load_cluster("k80x2")).devices.tolist() == [0, 1, 0, 0]


def test_blocks_on_devices_of_two_speeds_follow_their_speeds():
    """An MLP over the GPU's memory brings cpu_gpu's CPU in; the CPU, many times slower, gets the one block every device
    gets, where shares alike gave it half the layers."""
    g, c = mlp_training_graph(layers=8, width=24576, batch=256), load_cluster("cpu_gpu")
    placed = ExpertPlacer(memory_aware=False).place(g, c)  # the blocks as cut, not moved off the full GPU
    assert placed.group_devices(g).tolist() == [0] + [1] * 8
