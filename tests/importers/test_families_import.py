"""The sanity facts of the spec, checked on imported family graphs (small instances)."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.families import cifar10, nmt, ptb
from gnplace.graph import BACKWARD, FORWARD, UPDATE
from gnplace.importers.torch import OPTIMIZERS, from_module

SMALL = {
    "cifar10": (cifar10, dict(layers=2, channels=8, batch=8)),
    "ptb": (ptb, dict(hidden=32, steps=3, batch=4, vocab=100, num_nodes=4)),
    "nmt": (nmt, dict(layers=2, units=32, batch=4, src_steps=3, tgt_steps=3, vocab=100)),
}


@pytest.mark.parametrize("family", sorted(SMALL))
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_family_training_graph_facts(family, optimizer):
    module, knobs = SMALL[family]
    model, inputs = module.sample(np.random.default_rng(0), **knobs)
    g = from_module(model, inputs, optimizer=optimizer)
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    updates = [g.node_names[i] for i in np.flatnonzero(g.phase == UPDATE)]
    assert sorted(updates) == sorted(f"update/{k}" for k in params)  # exactly one per trainable parameter
    total = sum(p.numel() * p.element_size() for p in params.values())
    assert int(g.param_bytes.sum()) == total * OPTIMIZERS[optimizer][0]
    ratio = g.flops[g.phase == BACKWARD].sum() / g.flops[g.phase == FORWARD].sum()
    assert ratio == pytest.approx(2.0, rel=0.25)  # conv- and matmul-dominated
    assert len(g.topological_order()) == g.num_ops  # a DAG


def test_unrolled_rnn_gives_a_group_per_step():
    model, inputs = ptb.sample(np.random.default_rng(1), hidden=16, steps=4, batch=2, vocab=50, num_nodes=3)
    g = from_module(model, inputs)
    cell_calls = {(m, int(gid)) for m, gid in zip(g.module, g.group) if m.startswith("cell")}
    steps_seen = len({gid for _, gid in cell_calls})
    assert steps_seen >= 4
