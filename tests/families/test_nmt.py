"""Tests of the nmt family (LSTM encoder-decoder with attention)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from gnplace.exceptions import InvalidArgument, UnknownName
from gnplace.families.nmt import (
    ATTENTIONS,
    Attention,
    LSTMCell,
    NMTConfig,
    NMTModel,
    estimate_size,
    num_parameters,
    random_knobs,
    sample,
)

TINY: dict[str, Any] = {"units": 8, "batch": 2, "src_steps": 3, "tgt_steps": 2, "vocab": 20}


def test_sampling_is_deterministic_under_a_seed() -> None:
    m1, x1 = sample(np.random.default_rng(3), **TINY)
    m2, x2 = sample(np.random.default_rng(3), **TINY)
    assert m1.config == m2.config
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert all(torch.equal(a, b) for a, b in zip(x1, x2))


def test_different_seeds_give_different_weights_and_knobs() -> None:
    m0, x0 = sample(np.random.default_rng(0), **TINY)
    m1, x1 = sample(np.random.default_rng(1), **TINY)
    assert not torch.equal(m0.projection, m1.projection)
    assert not torch.equal(x0[0], x1[0])
    # The architecture varies through the knobs (layers, units, attention, lengths, ...).
    knobs = [random_knobs(np.random.default_rng(s)) for s in range(5)]
    assert len({tuple(sorted(k.items())) for k in knobs}) == 5


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("layers,bidirectional", [(1, True), (3, True), (2, False)])
def test_loss_is_a_finite_scalar_and_every_parameter_gets_a_gradient(
    attention: str, layers: int, bidirectional: bool
) -> None:
    model, (src, tgt_in, tgt_out) = sample(
        np.random.default_rng(0), **dict(TINY, layers=layers, attention=attention, bidirectional=bidirectional)
    )
    assert src.shape == (2, 3) and tgt_in.shape == tgt_out.shape == (2, 2)
    assert torch.equal(tgt_in[:, 1:], tgt_out[:, :-1])
    loss = model(src, tgt_in, tgt_out)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []
    assert sum(p.numel() for p in model.parameters()) == num_parameters(model.config)


def test_parameter_count_of_the_iwslt15_configuration() -> None:
    h, v = 512, 17_000

    def cell(n: int) -> int:
        return 4 * h * (n + h) + 4 * h

    encoder = 2 * cell(h) + cell(2 * h)  # bidirectional layer 0, layer 1 reads 2H
    decoder = cell(2 * h) + cell(h)  # input feeding in layer 0
    attention = h * h + 2 * h * h + 1  # keys, W_c [c; h], scale
    expected = 2 * v * h + encoder + decoder + attention + h * v
    assert num_parameters(NMTConfig(layers=2, units=h, vocab=v)) == expected
    with torch.device("meta"):
        model = NMTModel(NMTConfig(layers=2, units=h, vocab=v))
    assert sum(p.numel() for p in model.parameters()) == expected


def test_lstm_cell_matches_torch_lstm_cell() -> None:
    torch.manual_seed(0)
    ours = LSTMCell(3, 4, forget_bias=0.0)
    ref = torch.nn.LSTMCell(3, 4)
    i, j, f, o = ours.weight.detach().t().chunk(4)  # TensorFlow gate order i, j, f, o
    bi, bj, bf, bo = ours.bias.detach().chunk(4)
    with torch.no_grad():
        weight = torch.cat([i, f, j, o])  # torch gate order i, f, g, o
        ref.weight_ih.copy_(weight[:, :3])
        ref.weight_hh.copy_(weight[:, 3:])
        ref.bias_ih.copy_(torch.cat([bi, bf, bj, bo]))
        ref.bias_hh.zero_()
    x, h, c = torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 4)
    h1, c1 = ours(x, h, c)
    h2, c2 = ref(x, (h, c))
    torch.testing.assert_close(h1, h2)
    torch.testing.assert_close(c1, c2)


def test_scaled_luong_attention_matches_a_hand_computation() -> None:
    att = Attention("scaled_luong", memory_features=6, units=4)
    with torch.no_grad():
        att.scale.fill_(0.5)
    memory, query = torch.randn(2, 5, 6), torch.randn(2, 4)
    keys = memory @ att.memory_layer
    weights = torch.softmax(0.5 * torch.einsum("bsh,bh->bs", keys, query), dim=1)
    context = torch.einsum("bs,bsm->bm", weights, memory)
    expected = torch.tanh(torch.cat([context, query], 1) @ att.attention_layer)
    torch.testing.assert_close(att(query, att.keys(memory), memory), expected)


def test_decoder_feeds_the_attention_vector_to_the_next_step() -> None:
    model, (src, tgt_in, tgt_out) = sample(np.random.default_rng(0), **dict(TINY, tgt_steps=3))
    fed: list[torch.Tensor] = []
    outputs: list[torch.Tensor] = []
    model.decoder.cells[0].register_forward_hook(lambda m, args, out: fed.append(args[0]))
    model.decoder.attention.register_forward_hook(lambda m, args, out: outputs.append(out))
    model(src, tgt_in, tgt_out)
    assert len(fed) == 3 and len(outputs) == 3
    assert torch.equal(fed[0][:, 8:], torch.zeros(2, 8))
    for t in (1, 2):
        assert torch.equal(fed[t][:, 8:], outputs[t - 1])


def test_torch_export_succeeds() -> None:
    model, inputs = sample(np.random.default_rng(0), **dict(TINY, layers=2))
    exported = torch.export.export(model, inputs)
    assert any(n.op == "call_function" for n in exported.graph.nodes)


def test_joint_training_graph_traces_under_fake_tensors(TupleLoss: type) -> None:  # noqa: N803
    from torch._functorch.aot_autograd import aot_export_module
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        model, inputs = sample(np.random.default_rng(0), layers=1, src_steps=2, tgt_steps=2)
    graph, _ = aot_export_module(TupleLoss(model), inputs, trace_joint=True, output_loss_index=0)
    assert 200 < sum(n.op == "call_function" for n in graph.graph.nodes) < 5000


def test_bad_knobs_are_rejected() -> None:
    with pytest.raises(UnknownName, match="scaled_luong"):
        sample(np.random.default_rng(0), attention="monotonic")
    with pytest.raises(ValueError, match="tgt_steps"):
        sample(np.random.default_rng(0), tgt_steps=0)


def test_random_knobs_stay_in_their_ranges() -> None:
    rng = np.random.default_rng(0)
    draws = [random_knobs(rng) for _ in range(300)]
    for d in draws:
        assert 1 <= d["layers"] <= 4
        assert 2 <= d["src_steps"] <= 30 and 2 <= d["tgt_steps"] <= 30
        assert d["layers"] * (d["src_steps"] + d["tgt_steps"]) <= 100
        assert 128 <= d["units"] <= 1024 and d["units"] % 32 == 0
        assert 16 <= d["batch"] <= 128 and 2000 <= d["vocab"] <= 32_000
        assert d["attention"] in ATTENTIONS
    assert {d["attention"] for d in draws} == set(ATTENTIONS)
    assert {d["bidirectional"] for d in draws} == {True, False}


def test_random_knobs_reach_both_ends_of_every_range() -> None:
    """Each documented range is drawn whole, and a bidirectional encoder 3 times in 4 (mutants never drawing 4 layers, a
    batch of 128 or the ends of the others, or bidirectional encoders half the time, passed)."""
    rng = np.random.default_rng(0)
    draws = [random_knobs(rng) for _ in range(3000)]
    assert {d["layers"] for d in draws} == {1, 2, 3, 4}
    assert {d["batch"] for d in draws} == set(range(16, 129, 16))
    for knob, low, high in (("units", 128, 1024), ("vocab", 2000, 32_000), ("src_steps", 2, 30), ("tgt_steps", 2, 30)):
        assert min(d[knob] for d in draws) == low and max(d[knob] for d in draws) == high, knob
    assert max(d["layers"] * (d["src_steps"] + d["tgt_steps"]) for d in draws) == 100
    assert 0.72 < np.mean([d["bidirectional"] for d in draws]) < 0.78


@pytest.mark.parametrize("value", ["False", "no", None, 1])
def test_a_non_boolean_bidirectional_is_rejected(value: Any) -> None:
    # bool("False") is True: the string built a bidirectional encoder without a word
    with pytest.raises(InvalidArgument, match="knob 'bidirectional' must be True or False"):  # was a TypeError
        sample(np.random.default_rng(0), **dict(TINY, bidirectional=value))


def test_a_numpy_bool_bidirectional_is_accepted() -> None:
    model, _ = sample(np.random.default_rng(0), **dict(TINY, bidirectional=np.False_))
    assert model.config.bidirectional is False


# ---------------------------------------------------------------------------------- size bound of the knobs
@pytest.mark.parametrize(("layers", "src_steps", "tgt_steps", "bidirectional", "attention", "tightness"), [
    (1, 1, 1, True, "normed_bahdanau", 0.7),
    (1, 3, 3, True, "normed_bahdanau", 0.8),
    (3, 1, 3, True, "normed_bahdanau", 0.8),
    (3, 3, 3, False, "normed_bahdanau", 0.8),
    (2, 2, 2, True, "luong", 0.7),  # the lightest attention
    (2, 3, 2, False, "bahdanau", 0.7),
])
def test_the_size_bound_holds_and_is_close(layers: int, src_steps: int, tgt_steps: int, bidirectional: bool,
                                          attention: str, tightness: float) -> None:
    from gnplace.importers.torch import from_module

    knobs: dict[str, Any] = {"layers": layers, "units": 8, "src_steps": src_steps, "tgt_steps": tgt_steps, "vocab": 20,
                             "attention": attention, "bidirectional": bidirectional}
    model, inputs = sample(np.random.default_rng(0), batch=2, **knobs)
    bound = estimate_size(**knobs)
    assert tightness * bound.ops <= from_module(model, inputs).num_ops <= bound.ops
    assert bound.param_bytes == sum(4 * p.numel() for p in model.parameters())


@pytest.mark.parametrize("knobs", [
    {"layers": 64, "src_steps": 1000, "tgt_steps": 1000},  # 4.7 million ops
    {"layers": 16, "src_steps": 1000, "tgt_steps": 1000},  # 33,000 cell steps: 1.3 million ops
    {"layers": 64, "units": 8192},  # 0.2 TB of LSTM weights
    {"units": 8192, "vocab": 1_000_000},  # 0.1 TB of embeddings and projection
])
def test_knobs_that_build_too_much_together_are_refused_before_building(knobs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument, match=r"^nmt knobs layers=\d+, units=\d+, src_steps=\d+, tgt_steps=\d+, "
                                              r"vocab=\d+ would build .* past the cap of [\d,]+ "
                                              r"\(gnplace\.families\.MAX_(GRAPH_OPS|PARAM_BYTES)\): lower them$"):
        sample(np.random.default_rng(0), **dict(TINY, **knobs))


def test_estimate_size_and_num_parameters_refuse_an_unknown_attention_and_a_bad_knob() -> None:
    """attention="dot" was a KeyError of num_parameters, and a negative length a negative bound."""
    with pytest.raises(UnknownName, match="unknown attention 'dot'"):
        estimate_size(attention="dot")
    with pytest.raises(UnknownName, match="unknown attention 'dot'"):
        num_parameters(NMTConfig(layers=1, units=4, vocab=5, attention="dot"))
    for knobs, message in (({"src_steps": -2}, "'src_steps' must be >= 1, got -2"),
                           ({"vocab": 1}, "'vocab' must be >= 2, got 1"),
                           ({"bidirectional": "False"}, "'bidirectional' must be True or False")):
        with pytest.raises(InvalidArgument, match=message):
            estimate_size(**knobs)


def test_the_backward_layer_reads_the_source_from_its_end() -> None:
    """Position t of a bidirectional layer's memory holds the forward state after x_0..x_t beside the backward one after
    x_{S-1}..x_t (a mutant running the backward cell forwards passed)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = NMTModel(NMTConfig(layers=1, units=4, vocab=10, bidirectional=True))
        x = torch.randn(2, 3, 4)
    with torch.no_grad():
        memory, _ = model.encoder(x)
        zeros = torch.zeros(2, 4)
        h, c = model.encoder.cells[0](x[:, 0], zeros, zeros)
        hb, cb = model.encoder.backward_cell(x[:, 2], zeros, zeros)
        assert torch.allclose(memory[:, 0, :4], h) and torch.allclose(memory[:, 2, 4:], hb)
        hb, cb = model.encoder.backward_cell(x[:, 1], hb, cb)
        hb, cb = model.encoder.backward_cell(x[:, 0], hb, cb)
        assert torch.allclose(memory[:, 0, 4:], hb)


def test_normed_bahdanau_starts_its_gain_at_the_square_root_of_one_over_the_units() -> None:
    """As tensorflow's normed Bahdanau attention (a mutant starting it at 1 passed)."""
    assert float(Attention("normed_bahdanau", 8, 16).g.detach()) == 0.25


def test_every_lstm_cell_adds_a_forget_bias_of_1() -> None:
    """tensorflow/nmt's BasicLSTMCell: c' = c sigmoid(f + 1) + ..., in the encoder's cells too (a mutant building them
    with a forget bias of 0 passed)."""
    model = NMTModel(NMTConfig(layers=2, units=4, vocab=10, bidirectional=True))
    cells = [m for m in model.modules() if isinstance(m, LSTMCell)]
    assert len(cells) == 5 and {cell.forget_bias for cell in cells} == {1.0}
    cell = cells[0]
    with torch.no_grad():
        cell.weight.zero_()  # every gate 0: c' = c sigmoid(1) + sigmoid(0) tanh(0)
        c = torch.ones(1, 4)
        _, c_next = cell(torch.zeros(1, cell.weight.shape[0] - 4), torch.zeros(1, 4), c)
    assert torch.allclose(c_next, torch.full((1, 4), 1 / (1 + math.exp(-1))))
