"""The placement policy network: encoder along the DAG, device-agnostic head."""

from __future__ import annotations

import pickle
import sys
import tempfile

import pytest
import torch
from torch_geometric.nn import MessagePassing

from gnplace.cluster import load_cluster
from gnplace.policy.features import build_policy_input
from gnplace.policy.gnn import DirectedConv, PlacementPolicy, PolicyConfig
from gnplace.toy import chain_graph, layered_graph, mixed_cluster


def test_directed_conv_averages_messages_from_sources():
    conv = DirectedConv(2, 1)
    with torch.no_grad():
        conv.lin.weight.copy_(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
        conv.lin.bias.zero_()
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]])
    out = conv(x, torch.tensor([[0, 1], [2, 2]]), torch.zeros(2, 1))
    assert out.tolist() == [[0.0, 0.0], [0.0, 0.0], [2.0, 3.0]]


@pytest.mark.parametrize("rebuild", ["construct", "unpickle"])
def test_the_rendered_propagate_leaves_no_file_in_the_temporary_directory(rebuild, tmp_path, monkeypatch):
    name = f"{DirectedConv.__module__}_DirectedConv_propagate"  # PyG renders it once a process: render it again
    built = pickle.dumps(DirectedConv(2, 1))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # Python compiles the rendered module into __pycache__
    monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(DirectedConv, "propagate", MessagePassing.propagate)
    conv = pickle.loads(built) if rebuild == "unpickle" else DirectedConv(2, 1)
    rendered = sys.modules[name].__file__
    assert rendered is not None and rendered.startswith(str(tmp_path))  # PyG wrote it there...
    assert list(tmp_path.iterdir()) == []  # ...and it is gone, with its bytecode
    assert conv.propagate.__module__ == name  # still the rendered code, and it runs
    out = conv(torch.ones(2, 2), torch.tensor([[0], [1]]), torch.zeros(1, 1))
    assert out.shape == (2, 2) and torch.equal(out[0], torch.zeros(2))


def test_the_encoder_passes_both_ways_along_the_dag():
    torch.manual_seed(0)
    policy = PlacementPolicy(PolicyConfig(layers=1))
    inp = build_policy_input(chain_graph(5), load_cluster("k80x2"))
    assert inp.decision.num_ops == 5
    base = policy.encoder(inp)
    x = inp.node_x.clone()
    x[2] += 1.0  # one round: the producer (1) and the consumer (3) of node 2 see it, nodes 0 and 4 do not
    changed = policy.encoder(type(inp)(**{**inp.__dict__, "node_x": x}))
    moved = [not torch.allclose(base[i], changed[i]) for i in range(5)]
    assert moved == [False, True, True, True, False]


def test_one_network_serves_any_number_of_devices():
    torch.manual_seed(0)
    policy = PlacementPolicy()
    g = layered_graph(80, seed=1)
    for cluster in (load_cluster("k80x2"), mixed_cluster(), load_cluster("v100x8")):
        inp = build_policy_input(g, cluster)
        enc = policy.encode(inp)
        d = cluster.num_devices
        dyn = torch.zeros(3, 2, d, policy.config.dynamic_features)
        logits = policy.logits(enc, torch.tensor([0, 1]), dyn, torch.ones(3, 2, d, dtype=torch.bool))
        assert logits.shape == (3, 2, d) and torch.isfinite(logits).all()


def test_untrained_logits_are_the_eft_rule_and_masked():
    torch.manual_seed(0)
    policy = PlacementPolicy(PolicyConfig(alpha=2.0))
    enc = policy.encode(build_policy_input(chain_graph(3), load_cluster("k80x4")))
    dyn = torch.zeros(1, 1, 4, policy.config.dynamic_features)
    dyn[0, 0, :, 0] = torch.tensor([0.0, 1.0, 2.0, 0.5])
    mask = torch.tensor([[[True, True, False, True]]])
    logits = policy.logits(enc, torch.tensor([0]), dyn, mask)[0, 0]
    assert logits[2] == float("-inf")
    allowed = logits[[0, 1, 3]] - logits[0]
    assert torch.allclose(allowed, torch.tensor([0.0, -2.0, -1.0]))


@pytest.mark.parametrize("bad", [dict(hidden=-5), dict(hidden="8"), dict(layers=0), dict(head=True), dict(alpha=float("inf")),
                                 dict(alpha=0.0), dict(alpha=-3.0),  # log(alpha) is a weight: was a math domain error
                                 dict(hidden=10**6), dict(head=10**9), dict(layers=10**5)])  # not allocated, not run
def test_a_shape_no_network_has_is_refused(bad):
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match="the policy's"):
        PolicyConfig(**bad)


def test_numpy_numbers_make_a_config_of_plain_numbers_whose_checkpoint_loads(tmp_path):
    """hidden=np.int64(8) was kept as a numpy integer: save_policy wrote the checkpoint, and load_policy refused it
    ("not a readable checkpoint (... unsafe ...)"); alpha=np.float32(2.0) was refused as no number."""
    import numpy as np

    from gnplace.policy.checkpoint import load_policy, save_policy

    config = PolicyConfig(hidden=np.int64(8), layers=np.int32(1), head=np.int64(4), alpha=np.float32(2.0))
    assert config == PolicyConfig(hidden=8, layers=1, head=4, alpha=2.0)
    assert [type(v) for v in (config.hidden, config.layers, config.head, config.alpha)] == [int, int, int, float]
    assert type(PolicyConfig(alpha=3).alpha) is int  # a plain number is kept as it is
    path = save_policy(tmp_path / "p.ckpt", PlacementPolicy(config))
    assert load_policy(path)[0].config == config


def test_the_lines_of_the_module_equations_carry_their_symbols():
    """As CleanRL's ppo.py (STYLE.md habit 9): each line implementing the encoder's and the head's equations names
    the docstring's symbols beside it, so that it can be checked against them (it named none)."""
    import inspect

    from gnplace.policy.gnn import GraphEncoder

    encoder = inspect.getsource(GraphEncoder.forward)
    assert "h_v^(l+1) = h_v^(l) + ReLU(LN(" in encoder
    assert "mean_{u in P(v)} W_f [h_u || e_uv]" in encoder and "mean_{w in S(v)} W_b [h_w || e_vw]" in encoder
    head = inspect.getsource(PlacementPolicy.logits)
    assert "ReLU(A z_g + B y_d + C s_gd)" in head and "l_gd = -alpha Delta^EFT_gd + w^T ReLU(...)" in head


def test_the_policy_loads_where_warnings_are_errors():
    """``PYTHONWARNINGS=error``: torch-geometric's import warns that ``torch.jit.script`` is deprecated, a traceback
    from every command that loads the policy (``place -p policy``, ``evaluate``, ``finetune``)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONWARNINGS": "error", "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", "import gnplace.policy.gnn"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_where_a_group_fits_on_no_device_the_ones_with_the_most_memory_left_are_allowed():
    """The module docstring (and the README) said devices a group does not fit on are masked: where it fits on none,
    the MDP allows the devices with the most memory left, the group overflowing one of them."""
    import numpy as np

    import gnplace.policy.gnn as gnn
    from gnplace.rl.env import PlacementMDP
    from gnplace.toy import mlp_training_graph, toy_cluster

    inp = build_policy_input(mlp_training_graph(layers=3, width=64, batch=8), toy_cluster(3, memory=1.0))  # 1 byte
    rollout = PlacementMDP(inp).rollout(1, lambda s, g, dynamic, mask: np.zeros(1, dtype=np.int64))  # all on 0
    assert (inp.group_bytes > 1.0).all()  # no group fits anywhere
    assert rollout.mask[0, 0].tolist() == [True, True, True]  # every device as empty as the others
    assert rollout.mask[0, 1].tolist() == [False, True, True]  # device 0 holds the first group: less memory left
    doc = " ".join((gnn.__doc__ or "").split())
    assert "where it fits on none, only the devices with the most memory left are allowed" in doc


def test_directed_conv_messages_carry_the_edge_features():
    """``W [h_u || e_uv]``: the edge's features enter each message beside its source's embedding."""
    conv = DirectedConv(2, 1)
    with torch.no_grad():
        conv.lin.weight.copy_(torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))
        conv.lin.bias.zero_()
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]])
    out = conv(x, torch.tensor([[0, 1], [2, 2]]), torch.tensor([[2.0], [4.0]]))
    assert out[2].tolist() == [(1.0 + 2.0 + 3.0 + 4.0) / 2, 3.0]


def test_a_round_that_adds_nothing_keeps_the_lifted_features():
    """h^(l+1) = h^(l) + ReLU(LN(...)): with the rounds' weights zero the update is 0 and the residual is what is left."""
    torch.manual_seed(0)
    policy = PlacementPolicy(PolicyConfig(layers=2, hidden=8))
    encoder = policy.encoder
    with torch.no_grad():
        for module in (*encoder.self_lin, *encoder.forward_conv, *encoder.backward_conv):
            for p in module.parameters():
                p.zero_()
    inp = build_policy_input(chain_graph(4), load_cluster("k80x2"))
    with torch.no_grad():
        lifted = encoder.lift(inp.node_x)
        assert float(lifted.abs().sum()) > 0 and torch.allclose(encoder(inp), lifted)


def test_a_group_is_the_mean_of_its_nodes_beside_the_graphs_mean():
    """``encode``: each group's embedding is the mean over its nodes, the context the mean over all nodes."""
    torch.manual_seed(0)
    policy = PlacementPolicy(PolicyConfig(layers=1, hidden=8, head=4))
    from gnplace.policy.features import ops_alone

    graph = layered_graph(12, seed=1).replace(group=[0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4, 4])
    inp = build_policy_input(graph, load_cluster("k80x2"), coarsening=ops_alone(graph))  # a node per op
    with torch.no_grad():
        nodes = policy.encoder(inp)
        group = inp.node_group
        means = torch.stack([nodes[group == g].mean(0) for g in range(inp.num_groups)])
        context = nodes.mean(0).expand_as(means)
        expected = policy.group_proj(torch.cat([means, context], dim=-1))
        enc = policy.encode(inp)
    assert torch.allclose(enc.group, expected, atol=1e-6)
    assert torch.allclose(enc.device, policy.device_proj(policy.device_mlp(inp.device_x)))


def test_the_logits_are_the_module_equation_for_any_weights():
    """l_gd = -alpha Delta^EFT_gd + w^T ReLU(A z_g + B y_d + C s_gd), with a trained-looking head (w not 0)."""
    torch.manual_seed(0)
    policy = PlacementPolicy(PolicyConfig(alpha=2.0))
    with torch.no_grad():
        policy.out.weight.normal_()
        policy.out.bias.fill_(0.5)
    enc = policy.encode(build_policy_input(chain_graph(3), mixed_cluster()))
    d = enc.device.shape[0]
    dynamic = torch.rand(2, 3, d, policy.config.dynamic_features)
    groups = torch.tensor([2, 0, 1])
    mask = torch.ones(2, 3, d, dtype=torch.bool)
    mask[1, 2, 0] = False
    with torch.no_grad():
        logits = policy.logits(enc, groups, dynamic, mask)
        for b in range(2):
            for s in range(3):
                for k in range(d):
                    z = torch.relu(enc.group[groups[s]] + enc.device[k] + policy.dynamic_proj(dynamic[b, s, k]))
                    expected = float(policy.out(z)) - 2.0 * float(dynamic[b, s, k, 0])
                    got = float(logits[b, s, k])
                    assert got == (float("-inf") if not mask[b, s, k] else pytest.approx(expected, abs=1e-5))
