r"""The nmt family: LSTM encoder-decoder translation models with attention, as in Google's NMT.

Placeto (Addanki et al., 2019) placed training graphs of the attention model of `tensorflow/nmt
<https://github.com/tensorflow/nmt>`_ (Luong et al., 2017; GNMT, Wu et al., 2016), varying the
unrolled length and the batch size; layers, units and attention kind are further axes. The facts
below are those of ``docs/families.md``; the model is written from them, not ported.

Encoder: source embedding (width ``H``), ``layers`` LSTM layers of ``H`` units, the first one
bidirectional by default (GNMT's encoder; its output is ``2H`` wide). Decoder: target embedding,
``layers`` LSTM layers with *input feeding* (layer 0 reads the embedding concatenated with the
previous attention vector), each layer starting from the final state of the encoder layer at the
same depth (tensorflow/nmt's ``pass_hidden_state``; the forward direction for a bidirectional layer).
Per decoder step, with the top-layer output :math:`h_t` as query, memory :math:`m_s` and keys
:math:`k_s = m_s W_m`:

.. math::
    e_{ts} = g \, h_t^\top k_s \ (\text{scaled Luong}), \quad
    \alpha_t = \mathrm{softmax}(e_t), \quad c_t = \sum_s \alpha_{ts} m_s, \quad
    a_t = \tanh(W_c [c_t; h_t])

and :math:`a_t` is both the step's output and the next step's fed input. Then the output projection
``H x V`` and the mean softmax cross-entropy over every target token. Every LSTM cell is an explicit
module (TensorFlow's ``BasicLSTMCell``: one matmul of ``[x; h]``, forget bias 1) unrolled by Python
loops over the source and target steps, so that each (cell, step) is one module call. Dropout is
left out; source and target vocabularies have the same size ``V``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnplace.families._common import (
    MAX_GRAPH_OPS,
    MAX_PARAM_BYTES,
    SizeEstimate,
    check_bool,
    check_choice,
    check_int,
    check_size,
    log_uniform_int,
    seeded_float32,
)
from gnplace.seed import SeedLike, as_generator

__all__ = ["ATTENTIONS", "NMTConfig", "LSTMCell", "Attention", "Encoder", "Decoder", "NMTModel", "num_parameters",
           "sample", "random_knobs", "estimate_size", "MAX_GRAPH_OPS", "MAX_PARAM_BYTES",
           "MAX_LAYERS", "MAX_UNITS", "MAX_BATCH", "MAX_STEPS", "MAX_VOCAB"]

#: Attention kinds: Luong's dot score, scaled (tensorflow/nmt's ``scaled_luong``, iwslt15), Bahdanau's
#: additive score and its weight-normalised form (``normed_bahdanau``, wmt16).
ATTENTIONS: tuple[str, ...] = ("luong", "scaled_luong", "bahdanau", "normed_bahdanau")
#: Half-width of tensorflow/nmt's uniform initialisation (``init_weight``).
INIT_RANGE = 0.1

# Caps of the size knobs: a value past one is a typo or a script's overflow, which ran until killed (layers=10**30
# built its list of LSTM cells) or failed deep in torch with a traceback. Each is far above every real use.
#: Most LSTM ``layers`` of the encoder (and as many of the decoder; GNMT: 8).
MAX_LAYERS = 64
#: Most ``units`` (``H``; tensorflow/nmt's wmt16: 1,024).
MAX_UNITS = 8192
#: Most sentence pairs in a batch (tensorflow/nmt: 128).
MAX_BATCH = 65_536
#: Most ``src_steps`` and ``tgt_steps`` each (tensorflow/nmt's iwslt15 allows 50 tokens).
MAX_STEPS = 1000
#: Most words of the vocabulary (``V``; wmt16: 32,000 BPE tokens; the largest real vocabularies: about 256,000).
MAX_VOCAB = 1_000_000

State = tuple[Tensor, Tensor]

# Ops of the imported training graph per piece of the heaviest model, counted on built graphs
# (tests/families/test_nmt.py checks the bound against them); normalised Bahdanau attention is the heaviest.
#: Ops outside the unrolled loops (inputs, embeddings, projection, loss; measured: 50) and per layer (updates).
_FIXED_OPS = 60
_LAYER_OPS = 6
#: Ops of one LSTM cell step, forward and backward (measured: 30 to 35).
_CELL_STEP_OPS = 36
#: Ops of one decoder step's attention (measured: 55 normalised Bahdanau, 21 Luong).
_ATTENTION_STEP_OPS = 56


@dataclass(frozen=True)
class NMTConfig:
    """The architecture of an :class:`NMTModel`.

    Attributes:
        layers (int): LSTM layers of the encoder and, as many, of the decoder.
        units (int): ``H``: LSTM units, embedding and attention width.
        vocab (int): ``V``: source and target vocabulary size.
        bidirectional (bool): whether the first encoder layer is bidirectional.
        attention (str): one of :data:`ATTENTIONS`.
    """

    layers: int
    units: int
    vocab: int
    bidirectional: bool = True
    attention: str = "scaled_luong"

    @property
    def memory_features(self) -> int:
        """Width of the encoder output: ``2H`` for a single bidirectional layer, ``H`` otherwise."""
        return 2 * self.units if self.bidirectional and self.layers == 1 else self.units


def _uniform(*shape: int) -> nn.Parameter:
    """A parameter of ``shape`` drawn uniformly from ``[-INIT_RANGE, INIT_RANGE]``."""
    return nn.Parameter(torch.empty(*shape).uniform_(-INIT_RANGE, INIT_RANGE))


class LSTMCell(nn.Module):
    r"""One LSTM step, TensorFlow ``BasicLSTMCell`` style.

    .. math::
        [i; j; f; o] = [x; h] W + b, \quad c' = c \, \sigma(f + 1) + \sigma(i) \tanh(j),
        \quad h' = \tanh(c') \, \sigma(o)

    Args:
        in_features (int): width of ``x``.
        units (int): width of ``h`` and ``c``.
        forget_bias (float, optional): added to the forget gate. (default: :obj:`1.0`)
    """

    def __init__(self, in_features: int, units: int, forget_bias: float = 1.0) -> None:
        super().__init__()
        self.forget_bias = forget_bias
        self.weight = _uniform(in_features + units, 4 * units)
        self.bias = nn.Parameter(torch.zeros(4 * units))

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> State:
        """``x`` ``[B, in_features]``, state ``h, c`` ``[B, units]`` to the new ``(h, c)``."""
        gates = torch.addmm(self.bias, torch.cat([x, h], dim=1), self.weight)
        i, j, f, o = gates.chunk(4, dim=1)
        c = c * torch.sigmoid(f + self.forget_bias) + torch.sigmoid(i) * torch.tanh(j)
        return torch.tanh(c) * torch.sigmoid(o), c

    def extra_repr(self) -> str:
        """Widths."""
        units = self.weight.shape[1] // 4
        return f"{self.weight.shape[0] - units}, {units}"


class Attention(nn.Module):
    """Attention of one decoder step and the attention layer ``a = tanh(W_c [c; h])``.

    Args:
        kind (str): one of :data:`ATTENTIONS`.
        memory_features (int): width of the encoder memory.
        units (int): ``H``, width of the query, the keys and the attention vector.
    """

    def __init__(self, kind: str, memory_features: int, units: int) -> None:
        super().__init__()
        self.kind = check_choice("attention", kind, ATTENTIONS)
        self.memory_layer = _uniform(memory_features, units)
        if kind == "scaled_luong":
            self.scale = nn.Parameter(torch.ones(()))
        if kind in ("bahdanau", "normed_bahdanau"):
            self.query_layer = _uniform(units, units)
            self.v = _uniform(units)
        if kind == "normed_bahdanau":
            self.g = nn.Parameter(torch.full((), math.sqrt(1.0 / units)))
            self.b = nn.Parameter(torch.zeros(units))
        self.attention_layer = _uniform(memory_features + units, units)

    def keys(self, memory: Tensor) -> Tensor:
        """Memory ``[B, S, M]`` to keys ``[B, S, H]`` (computed once per sequence)."""
        return torch.matmul(memory, self.memory_layer)

    def forward(self, query: Tensor, keys: Tensor, memory: Tensor) -> Tensor:
        """Query ``[B, H]``, keys ``[B, S, H]`` and memory ``[B, S, M]`` to the attention vector ``[B, H]``."""
        if self.kind in ("luong", "scaled_luong"):
            score = torch.bmm(keys, query.unsqueeze(2)).squeeze(2)
            if self.kind == "scaled_luong":
                score = self.scale * score
        else:
            hidden = keys + torch.mm(query, self.query_layer).unsqueeze(1)
            v: Tensor = self.v
            if self.kind == "normed_bahdanau":
                hidden = hidden + self.b
                v = self.g * v * torch.rsqrt(torch.sum(v * v))
            score = torch.matmul(torch.tanh(hidden), v)
        alignments = torch.softmax(score, dim=1)
        context = torch.bmm(alignments.unsqueeze(1), memory).squeeze(1)
        return torch.tanh(torch.mm(torch.cat([context, query], dim=1), self.attention_layer))

    def extra_repr(self) -> str:
        """Kind."""
        return f"kind={self.kind!r}"


class Encoder(nn.Module):
    """Stacked LSTM encoder, the first layer optionally bidirectional.

    Args:
        config (NMTConfig): the architecture.
    """

    def __init__(self, config: NMTConfig) -> None:
        super().__init__()
        h = config.units
        self.bidirectional = config.bidirectional
        self.cells = nn.ModuleList(
            LSTMCell(2 * h if (layer == 1 and config.bidirectional) else h, h) for layer in range(config.layers)
        )
        self.backward_cell = LSTMCell(h, h) if config.bidirectional else None

    def forward(self, x: Tensor) -> tuple[Tensor, list[State]]:
        """Embedded source ``[B, S, H]`` to the memory ``[B, S, M]`` and each layer's final state."""
        batch, steps, units = x.shape
        inputs = [x[:, t] for t in range(steps)]
        finals: list[State] = []
        for layer, cell in enumerate(self.cells):
            h = c = x.new_zeros(batch, units)
            outputs = []
            for t in range(steps):
                h, c = cell(inputs[t], h, c)
                outputs.append(h)
            finals.append((h, c))
            if layer == 0 and self.backward_cell is not None:
                hb = cb = x.new_zeros(batch, units)
                backward: list[Tensor] = []
                for t in reversed(range(steps)):
                    hb, cb = self.backward_cell(inputs[t], hb, cb)
                    backward.append(hb)
                outputs = [torch.cat([f, b], dim=1) for f, b in zip(outputs, reversed(backward), strict=True)]
            inputs = outputs
        return torch.stack(inputs, dim=1), finals


class Decoder(nn.Module):
    """Stacked LSTM decoder with attention and input feeding.

    Args:
        config (NMTConfig): the architecture.
    """

    def __init__(self, config: NMTConfig) -> None:
        super().__init__()
        h = config.units
        self.cells = nn.ModuleList(LSTMCell(2 * h if layer == 0 else h, h) for layer in range(config.layers))
        self.attention = Attention(config.attention, config.memory_features, h)

    def forward(self, y: Tensor, memory: Tensor, states: list[State]) -> Tensor:
        """Embedded targets ``[B, T, H]``, memory ``[B, S, M]``, initial states to attention vectors ``[B, T, H]``."""
        batch, steps, units = y.shape
        keys = self.attention.keys(memory)
        states = list(states)
        attention = y.new_zeros(batch, units)
        outputs = []
        for t in range(steps):
            inp = torch.cat([y[:, t], attention], dim=1)  # input feeding
            for layer, cell in enumerate(self.cells):
                states[layer] = cell(inp, *states[layer])
                inp = states[layer][0]
            attention = self.attention(inp, keys, memory)
            outputs.append(attention)
        return torch.stack(outputs, dim=1)


class NMTModel(nn.Module):
    """Attention encoder-decoder with loss.

    ``forward(source, target_in, target_out)`` is the mean cross-entropy (nats per target token).

    Args:
        config (NMTConfig): the architecture.
    """

    def __init__(self, config: NMTConfig) -> None:
        super().__init__()
        self.config = config
        self.source_embedding = nn.Embedding(config.vocab, config.units)
        self.target_embedding = nn.Embedding(config.vocab, config.units)
        for emb in (self.source_embedding, self.target_embedding):
            nn.init.uniform_(emb.weight, -INIT_RANGE, INIT_RANGE)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.projection = _uniform(config.units, config.vocab)  # output layer, no bias

    def forward(self, source: Tensor, target_in: Tensor, target_out: Tensor) -> Tensor:
        """Source ids ``[B, S]``, target input and output ids ``[B, T]`` (int64) to the scalar loss."""
        memory, finals = self.encoder(self.source_embedding(source))
        out = self.decoder(self.target_embedding(target_in), memory, finals)
        batch, steps, units = out.shape
        logits = torch.mm(out.reshape(batch * steps, units), self.projection)
        # on the logits' device, as transformers' losses move them: accelerate's root hook puts inputs on its main GPU
        return F.cross_entropy(logits, target_out.to(logits.device).reshape(batch * steps))


def num_parameters(config: NMTConfig) -> int:
    """Parameters of :class:`NMTModel` for ``config``, in closed form.

    Embeddings ``2 V H``; an LSTM cell reading ``n`` features ``4H (n + H) + 4H``; encoder layer 0
    reads ``H`` (twice if bidirectional), layer 1 ``2H`` after a bidirectional layer, others ``H``;
    decoder layer 0 reads ``2H`` (input feeding), others ``H``; attention ``M H`` (keys) + ``(M + H) H``
    (attention layer) + 1 (scaled Luong), + ``H^2 + H`` (Bahdanau), + ``H + 1`` (normalised);
    projection ``H V``; ``M`` is the memory width.

    Args:
        config (NMTConfig): the architecture.

    Returns:
        int: the number of scalars.

    Raises:
        UnknownName: for an unknown ``config.attention`` (it was a KeyError).

    Examples:
        >>> num_parameters(NMTConfig(layers=2, units=512, vocab=17_000))
        39491585
    """
    check_choice("attention", config.attention, ATTENTIONS)
    h, v, m = config.units, config.vocab, config.memory_features

    def cell(n: int) -> int:
        return 4 * h * (n + h) + 4 * h

    enc = cell(h) * (2 if config.bidirectional else 1)
    enc += sum(cell(2 * h if (layer == 1 and config.bidirectional) else h) for layer in range(1, config.layers))
    dec = cell(2 * h) + (config.layers - 1) * cell(h)
    att = m * h + (m + h) * h
    extra = {"luong": 0, "scaled_luong": 1, "bahdanau": h * h + h, "normed_bahdanau": h * h + 2 * h + 1}
    att += extra[config.attention]
    return 2 * v * h + enc + dec + att + h * v


def estimate_size(
    *, layers: int = 2, units: int = 512, src_steps: int = 10, tgt_steps: int = 10, vocab: int = 17_000,
    attention: str = "scaled_luong", bidirectional: bool = True,
) -> SizeEstimate:
    """Upper bounds on the training graph's ops and the parameter bytes of the model :func:`sample` builds.

    Computed from the knobs alone, before anything is built: at most ``60 + 6 L + 36 c + 56 T`` ops, ``c`` the
    LSTM cell steps (``L S`` of the encoder, ``S`` more for a bidirectional first layer, ``L T`` of the decoder;
    0.7 to 0.9 of it for the heaviest attention), and exactly 4 bytes per parameter of :func:`num_parameters`.

    Args:
        layers (int, optional): ``L``, LSTM layers of the encoder and of the decoder. (default: :obj:`2`)
        units (int, optional): ``H``. (default: :obj:`512`)
        src_steps (int, optional): ``S``, source length. (default: :obj:`10`)
        tgt_steps (int, optional): ``T``, target length. (default: :obj:`10`)
        vocab (int, optional): ``V``. (default: :obj:`17000`)
        attention (str, optional): one of :data:`ATTENTIONS`. (default: :obj:`"scaled_luong"`)
        bidirectional (bool, optional): whether the first encoder layer is bidirectional. (default: :obj:`True`)

    Returns:
        SizeEstimate: ops of the imported training graph and bytes of float32 parameters.

    Raises:
        UnknownName: for an unknown ``attention`` (it was a KeyError).
        InvalidArgument: for a count knob that is no integer or below its least (``vocab`` 2, the others 1; a
            negative one gave negative ops) or a non-boolean ``bidirectional``. The caps of :func:`sample` are not
            checked: an estimate says how large knobs past them would build.

    Examples:
        >>> estimate_size()
        SizeEstimate(ops=2432, param_bytes=157966340)
    """
    check_choice("attention", attention, ATTENTIONS)
    layers, units, vocab = check_int("layers", layers, 1), check_int("units", units, 1), check_int("vocab", vocab, 2)
    src_steps, tgt_steps = check_int("src_steps", src_steps, 1), check_int("tgt_steps", tgt_steps, 1)
    bidirectional = check_bool("bidirectional", bidirectional)
    cell_steps = layers * src_steps + (src_steps if bidirectional else 0) + layers * tgt_steps
    ops = _FIXED_OPS + _LAYER_OPS * layers + _CELL_STEP_OPS * cell_steps + _ATTENTION_STEP_OPS * tgt_steps
    config = NMTConfig(layers=layers, units=units, vocab=vocab, bidirectional=bidirectional, attention=attention)
    return SizeEstimate(ops=ops, param_bytes=4 * num_parameters(config))


def sample(
    rng: SeedLike,
    *,
    layers: int = 2,
    units: int = 512,
    batch: int = 128,
    src_steps: int = 10,
    tgt_steps: int = 10,
    vocab: int = 17_000,
    attention: str = "scaled_luong",
    bidirectional: bool = True,
) -> tuple[NMTModel, tuple[Tensor, Tensor, Tensor]]:
    """Build an NMT attention model and draw its weights and a batch of token ids.

    The defaults are tensorflow/nmt's iwslt15 configuration (2 + 2 layers, 512 units, bidirectional
    encoder, scaled Luong attention, batch 128, vocabulary about 17k) with sentences shortened to 10
    tokens (iwslt15 allows 50; 2 layers and 30 steps give about 4k TensorFlow ops). The
    architecture is fixed by the knobs; ``rng`` draws the weights and the inputs (draw the knobs
    with :func:`random_knobs` to vary the architecture).

    Args:
        rng (int, numpy.random.Generator or None): the seed (an int ``s`` draws as ``numpy.random.default_rng(s)``;
            ``None`` a fresh one): draws the torch seed for weights and inputs.
        layers (int, optional): LSTM layers of the encoder and of the decoder (at most :data:`MAX_LAYERS`).
            (default: :obj:`2`)
        units (int, optional): ``H``: LSTM units, embedding and attention width (at most :data:`MAX_UNITS`).
            (default: :obj:`512`)
        batch (int, optional): sentence pairs per batch (at most :data:`MAX_BATCH`). (default: :obj:`128`)
        src_steps (int, optional): source length, unrolled encoder steps (at most :data:`MAX_STEPS`).
            (default: :obj:`10`)
        tgt_steps (int, optional): target length, unrolled decoder steps (at most :data:`MAX_STEPS`).
            (default: :obj:`10`)
        vocab (int, optional): ``V``: source and target vocabulary size (at most :data:`MAX_VOCAB`).
            (default: :obj:`17000`)
        attention (str, optional): one of :data:`ATTENTIONS`. (default: :obj:`"scaled_luong"`)
        bidirectional (bool, optional): make the first encoder layer bidirectional. (default: :obj:`True`)

    Returns:
        tuple[NMTModel, tuple[Tensor, Tensor, Tensor]]: the model (``forward`` returns the scalar
        loss) and its inputs, int64 ids in ``[0, vocab)``: source ``[batch, src_steps]``, target
        input and target output ``[batch, tgt_steps]`` (the output is the input shifted by one).

    Raises:
        UnknownName: for an unknown ``attention``.
        InvalidArgument: for a knob out of range (a size past its cap), a non-integer count knob or a non-boolean
            ``bidirectional``; for knobs whose :func:`estimate_size` is past :data:`MAX_GRAPH_OPS` ops or
            :data:`MAX_PARAM_BYTES` bytes of parameters; or a seed that is not an int >= 0, a numpy generator or None.

    Examples:
        >>> model, (src, tgt_in, tgt_out) = sample(0, units=8, batch=2, src_steps=3, tgt_steps=2,
        ...                                        vocab=20)
        >>> tuple(src.shape), tuple(tgt_in.shape), model(src, tgt_in, tgt_out).dim()
        ((2, 3), (2, 2), 0)
    """
    generator = as_generator(rng)  # an int seeds numpy first, as in the other families (it was the torch seed)
    check_choice("attention", attention, ATTENTIONS)
    config = NMTConfig(
        layers=check_int("layers", layers, 1, MAX_LAYERS, cap="nmt.MAX_LAYERS"),
        units=check_int("units", units, 1, MAX_UNITS, cap="nmt.MAX_UNITS"),
        vocab=check_int("vocab", vocab, 2, MAX_VOCAB, cap="nmt.MAX_VOCAB"),
        bidirectional=check_bool("bidirectional", bidirectional),
        attention=attention,
    )
    batch = check_int("batch", batch, 1, MAX_BATCH, cap="nmt.MAX_BATCH")
    src_steps = check_int("src_steps", src_steps, 1, MAX_STEPS, cap="nmt.MAX_STEPS")
    tgt_steps = check_int("tgt_steps", tgt_steps, 1, MAX_STEPS, cap="nmt.MAX_STEPS")
    check_size("nmt", {"layers": config.layers, "units": config.units, "src_steps": src_steps, "tgt_steps": tgt_steps,
                       "vocab": config.vocab},
               estimate_size(layers=config.layers, units=config.units, src_steps=src_steps, tgt_steps=tgt_steps,
                             vocab=config.vocab, attention=attention, bidirectional=config.bidirectional))
    with seeded_float32(generator):
        model = NMTModel(config)
        source = torch.randint(0, vocab, (batch, src_steps))
        target = torch.randint(0, vocab, (batch, tgt_steps + 1))
        inputs = (source, target[:, :-1].contiguous(), target[:, 1:].contiguous())  # (no inference tensors)
    return model, inputs


def random_knobs(rng: SeedLike) -> dict[str, Any]:
    """Draw knobs for :func:`sample` spanning small to large training graphs.

    ``layers`` 1..4; ``src_steps`` and ``tgt_steps`` 2..30, with
    ``layers * (src_steps + tgt_steps) <= 100`` (about 200 to 5,500 ops of the imported
    training graph); ``units`` 128..1024 (log-uniform, multiple of 32);
    ``batch`` 16..128 (multiple of 16); ``vocab`` 2,000..32,000 (log-uniform, multiple of 1,000);
    ``attention`` uniform among :data:`ATTENTIONS`; ``bidirectional`` with probability 3/4.

    Args:
        rng (int, numpy.random.Generator or None): the generator, or a seed of one.

    Returns:
        dict[str, Any]: keyword arguments of :func:`sample`.

    Examples:
        >>> sorted(random_knobs(0))[:3]
        ['attention', 'batch', 'bidirectional']
    """
    rng = as_generator(rng)  # a seed too, as the package says (an int was an AttributeError)
    layers = int(rng.integers(1, 5))
    budget = 100 // layers  # src_steps + tgt_steps
    src_steps = int(rng.integers(2, min(30, budget - 2) + 1))
    tgt_steps = int(rng.integers(2, min(30, budget - src_steps) + 1))
    return {
        "layers": layers,
        "units": log_uniform_int(rng, 128, 1024, multiple=32),
        "batch": 16 * int(rng.integers(1, 9)),
        "src_steps": src_steps,
        "tgt_steps": tgt_steps,
        "vocab": log_uniform_int(rng, 2000, 32_000, multiple=1000),
        "attention": str(ATTENTIONS[int(rng.integers(len(ATTENTIONS)))]),
        "bidirectional": bool(rng.random() < 0.75),
    }
