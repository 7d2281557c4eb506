"""Tests of the ptb family (ENAS recurrent cells unrolled into a language model)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from gnplace.exceptions import InvalidArgument
from gnplace.families.ptb import (
    ACTIVATIONS,
    PTBModel,
    RNNArch,
    estimate_size,
    num_parameters,
    random_knobs,
    sample,
    sample_arch,
)

TINY: dict[str, Any] = {"hidden": 8, "steps": 3, "batch": 2, "vocab": 20}


def test_sampling_is_deterministic_under_a_seed() -> None:
    m1, x1 = sample(np.random.default_rng(3), **TINY)
    m2, x2 = sample(np.random.default_rng(3), **TINY)
    assert m1.cell.arch == m2.cell.arch
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert all(torch.equal(a, b) for a, b in zip(x1, x2))


def test_different_seeds_give_different_architectures() -> None:
    archs = {sample_arch(np.random.default_rng(s), 12) for s in range(10)}
    assert len(archs) == 10
    m0, _ = sample(np.random.default_rng(0), **TINY)
    m1, _ = sample(np.random.default_rng(1), **TINY)
    assert m0.cell.arch != m1.cell.arch


def test_sampled_cells_follow_the_enas_rules() -> None:
    arch = sample_arch(np.random.default_rng(0), 12)
    assert arch.inputs[0] == -1
    assert all(0 <= j < i for i, j in enumerate(arch.inputs) if i > 0)
    assert all(0 <= a < len(ACTIVATIONS) for a in arch.activations)
    assert arch.outputs and arch.outputs[-1] == 11  # the last node is never read
    assert not set(arch.outputs) & set(arch.inputs)


@pytest.mark.parametrize("seed,num_nodes", [(0, 12), (1, 5), (2, 1)])
def test_loss_is_a_finite_scalar_and_every_parameter_gets_a_gradient(seed: int, num_nodes: int) -> None:
    model, (tokens, targets) = sample(np.random.default_rng(seed), **dict(TINY, num_nodes=num_nodes))
    assert tokens.shape == targets.shape == (2, 3) and tokens.dtype == torch.int64
    assert torch.equal(tokens[:, 1:], targets[:, :-1])  # targets are the next tokens
    loss = model(tokens, targets)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []


@pytest.mark.parametrize("hidden,vocab,num_nodes", [(8, 20, 12), (16, 50, 4), (720, 10_000, 12)])
def test_parameter_count_is_4h2_plus_2_n_minus_1_h2_plus_vh(hidden: int, vocab: int, num_nodes: int) -> None:
    expected = 4 * hidden**2 + 2 * (num_nodes - 1) * hidden**2 + vocab * hidden
    assert num_parameters(hidden, vocab, num_nodes) == expected
    model = PTBModel(sample_arch(np.random.default_rng(0), num_nodes), hidden, vocab)
    assert sum(p.numel() for p in model.parameters()) == expected


def test_softmax_is_tied_to_the_embedding() -> None:
    model, _ = sample(np.random.default_rng(0), **TINY)
    tokens = torch.zeros(2, 3, dtype=torch.int64)  # only row 0 of the embedding is looked up
    model(tokens, torch.ones(2, 3, dtype=torch.int64)).backward()
    grad = model.embedding.weight.grad
    assert grad is not None and grad[1:].abs().sum() > 0  # other rows learn through the decoder


def test_cell_matches_a_hand_computation() -> None:
    hidden = 3
    arch = RNNArch(activations=(0, 1, 3), inputs=(-1, 0, 0))  # tanh; relu(node 0); sigmoid(node 0)
    model = PTBModel(arch, hidden, vocab=5)
    x, h_prev = torch.randn(2, hidden), torch.randn(2, hidden)
    w = [node.weight.detach() for node in model.cell.nodes]

    def highway(
        inp: torch.Tensor, carry: torch.Tensor, weight: torch.Tensor, f: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        h, t = (inp @ weight).split(hidden, dim=1)
        return carry + torch.sigmoid(t) * (f(h) - carry)

    s0 = highway(torch.cat([x, h_prev], 1), h_prev, w[0], torch.tanh)
    s1 = highway(s0, s0, w[1], torch.relu)
    s2 = highway(s0, s0, w[2], torch.sigmoid)
    assert arch.outputs == (1, 2)
    torch.testing.assert_close(model.cell(x, h_prev), (s1 + s2) / 2)


def test_loss_matches_a_step_by_step_computation() -> None:
    model, (tokens, targets) = sample(np.random.default_rng(0), **TINY)
    h = torch.zeros(2, 8)
    losses = []
    for t in range(3):
        h = model.cell(model.embedding(tokens[:, t]), h)
        logits = h @ model.embedding.weight.t()
        losses.append(torch.nn.functional.cross_entropy(logits, targets[:, t]))
    torch.testing.assert_close(model(tokens, targets), torch.stack(losses).mean())


def test_torch_export_succeeds() -> None:
    model, inputs = sample(np.random.default_rng(0), **dict(TINY, num_nodes=4))
    exported = torch.export.export(model, inputs)
    mms = [n for n in exported.graph.nodes if n.op == "call_function" and "mm" in str(n.target)]
    assert len(mms) == 4 * 3 + 1  # one matmul per node and step, plus the tied softmax


def test_joint_training_graph_traces_under_fake_tensors(TupleLoss: type) -> None:  # noqa: N803
    from torch._functorch.aot_autograd import aot_export_module
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        model, inputs = sample(np.random.default_rng(0), num_nodes=4, steps=2)
    graph, _ = aot_export_module(TupleLoss(model), inputs, trace_joint=True, output_loss_index=0)
    assert 200 < sum(n.op == "call_function" for n in graph.graph.nodes) < 5000


def test_bad_knobs_are_rejected() -> None:
    with pytest.raises(ValueError, match="steps"):
        sample(np.random.default_rng(0), steps=0)
    with pytest.raises(InvalidArgument, match=r"^knob 'hidden' must be an integer >= 1, got 2.5$"):  # was a TypeError
        sample(np.random.default_rng(0), hidden=2.5)  # type: ignore[arg-type]


def test_random_knobs_stay_in_their_ranges() -> None:
    rng = np.random.default_rng(0)
    draws = [random_knobs(rng) for _ in range(300)]
    assert all(4 <= d["num_nodes"] <= 12 for d in draws)
    assert all(2 <= d["steps"] <= 35 and d["num_nodes"] * d["steps"] <= 320 for d in draws)
    assert all(64 <= d["hidden"] <= 748 and d["hidden"] % 4 == 0 for d in draws)
    assert all(16 <= d["batch"] <= 64 and 1000 <= d["vocab"] <= 10_000 for d in draws)
    assert {d["num_nodes"] for d in draws} == set(range(4, 13))


def test_random_knobs_reach_both_ends_of_every_range() -> None:
    """Each documented range is drawn whole (mutants never drawing a batch of 64, or the ends of the others, passed)."""
    rng = np.random.default_rng(0)
    draws = [random_knobs(rng) for _ in range(3000)]
    assert {d["batch"] for d in draws} == set(range(16, 65, 4))
    assert {d["vocab"] for d in draws} == set(range(1000, 10_001, 1000))
    assert min(d["hidden"] for d in draws) == 64 and max(d["hidden"] for d in draws) == 748
    assert min(d["steps"] for d in draws) == 2 and max(d["steps"] for d in draws) == 35
    assert max(d["num_nodes"] * d["steps"] for d in draws) == 320


# ---------------------------------------------------------------------------------- size bound of the knobs
def _imported_ops(model: torch.nn.Module, steps: int) -> int:
    from gnplace.importers.torch import from_module

    tokens = torch.randint(0, 20, (2, steps))
    return from_module(model, (tokens, tokens.roll(1, dims=1))).num_ops


@pytest.mark.parametrize(("num_nodes", "steps"), [(1, 1), (3, 2), (5, 2), (12, 3)])
@pytest.mark.parametrize("activation", [0, 2])  # tanh (as heavy as ReLU and sigmoid) and identity, the lightest
def test_the_size_bound_holds_and_is_tight_on_the_heaviest_cell(num_nodes: int, steps: int, activation: int) -> None:
    """Every node reading node 0: the most averaged outputs and gradient sums, the cell the bound assumes."""
    arch = RNNArch(activations=(activation,) * num_nodes, inputs=(-1,) + (0,) * (num_nodes - 1))
    model = PTBModel(arch, 8, 20)
    bound = estimate_size(hidden=8, steps=steps, vocab=20, num_nodes=num_nodes)
    assert (0.8 if activation == 0 else 0.7) * bound.ops <= _imported_ops(model, steps) <= bound.ops
    assert bound.param_bytes == sum(4 * p.numel() for p in model.parameters())


@pytest.mark.parametrize("seed", [0, 1])
def test_the_size_bound_holds_on_drawn_cells(seed: int) -> None:
    knobs = {"hidden": 8, "steps": 4, "vocab": 20, "num_nodes": 8}
    model, (tokens, targets) = sample(np.random.default_rng(seed), batch=2, **knobs)
    bound = estimate_size(**knobs)
    assert 0.7 * bound.ops <= _imported_ops(model, 4) <= bound.ops


@pytest.mark.parametrize("knobs", [
    {"hidden": 8192, "num_nodes": 1000},  # 537 GB of node weights
    {"hidden": 8192, "num_nodes": 40},  # 22 GB: the cap, not the machine, refuses it
    {"steps": 1000, "num_nodes": 1000},  # 19 million ops
    {"steps": 1000, "num_nodes": 60},  # 1.1 million ops
])
def test_knobs_that_build_too_much_together_are_refused_before_building(knobs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument, match=r"^ptb knobs hidden=\d+, steps=\d+, vocab=\d+, num_nodes=\d+ would build "
                                              r".* past the cap of [\d,]+ \(gnplace\.families\.MAX_(GRAPH_OPS|PARAM_BYTES)\)"
                                              r": lower them$"):
        sample(np.random.default_rng(0), **dict(TINY, **knobs))


@pytest.mark.parametrize("knobs, message", [
    ({"steps": 2.5}, "'steps' must be an integer >= 1, got 2.5"),
    ({"num_nodes": -1}, "'num_nodes' must be >= 1, got -1"),
    ({"vocab": 1}, "'vocab' must be >= 2, got 1"),
    ({"hidden": 0}, "'hidden' must be >= 1, got 0"),
])
def test_estimate_size_refuses_a_knob_below_its_least(knobs: dict[str, Any], message: str) -> None:
    """steps=2.5 gave a bound of 621.0 ops and num_nodes=-1 a negative one."""
    with pytest.raises(InvalidArgument, match=message):
        estimate_size(**knobs)


def test_weights_are_uniform_in_plus_minus_0_04_and_the_vocabulary_at_least_2() -> None:
    """ENAS's initialisation range, reached from inside (a mutant of 0.05 passed), and the least vocabulary."""
    model, _ = sample(0, hidden=32, steps=2, batch=2, vocab=50, num_nodes=3)
    for name, weight in model.named_parameters():
        assert 0.039 < float(weight.detach().abs().max()) <= 0.04, name
    assert sample(0, **{**TINY, "vocab": 2})[0].embedding.num_embeddings == 2
    with pytest.raises(InvalidArgument, match=r"^knob 'vocab' must be >= 2, got 1$"):
        sample(0, **{**TINY, "vocab": 1})
