r"""The ptb family: random ENAS recurrent cells (Pham et al., 2018) unrolled into a language model.

`Efficient Neural Architecture Search via Parameter Sharing <https://arxiv.org/abs/1802.03268>`_
(section 2.1) searched a recurrent cell of ``N = 12`` nodes on Penn Treebank; Placeto (Addanki et
al., 2019) placed the unrolled training graphs of cells drawn from that space. The facts below are
those of ``docs/families.md``.

Node 0 reads the input embedding and the previous hidden state through one ``2H x 2H`` matrix; node
``i > 0`` reads one earlier node ``j`` through an ``H x 2H`` matrix. Every node is a highway layer
whose carry input is what it reads (``h_{t-1}`` for node 0, ``s_j`` for node ``i``):

.. math::
    [h; t] = \mathrm{in} \, W, \qquad s = c + \sigma(t) \odot (f(h) - c),
    \qquad f \in \{\tanh, \mathrm{ReLU}, \mathrm{id}, \sigma\}

The new hidden state is the mean of the nodes that no other node reads. The cell is unrolled over
``steps`` time steps by a Python loop (the placed graph is the unrolled one), the embedding has size
``H``, the softmax is tied (logits are ``h E^T`` with the embedding matrix ``E``), and the loss is
the mean cross-entropy over every step and sequence. Neither the cell nor the decoder has biases,
as in the ENAS code, so the model has exactly :math:`4H^2 + 2(N-1)H^2 + VH` parameters. Dropout
(ENAS uses variational dropout masks) is left out.

A node is its own module and the cell is called once per step, so each (node, step) is one module
call: the unit a colocation group is made of.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnplace.families._common import (
    MAX_GRAPH_OPS,
    MAX_PARAM_BYTES,
    SizeEstimate,
    check_int,
    check_size,
    log_uniform_int,
    seeded_float32,
)
from gnplace.seed import SeedLike, as_generator

__all__ = ["ACTIVATIONS", "RNNArch", "sample_arch", "Node", "ENASCell", "PTBModel", "sample", "random_knobs",
           "num_parameters", "estimate_size", "MAX_GRAPH_OPS", "MAX_PARAM_BYTES",
           "MAX_HIDDEN", "MAX_STEPS", "MAX_BATCH", "MAX_VOCAB", "MAX_NUM_NODES"]

#: Node activations, in the order of the ENAS code's function ids 0..3.
ACTIVATIONS: tuple[str, ...] = ("tanh", "relu", "identity", "sigmoid")
#: Half-width of the uniform initialisation of the weights.
INIT_RANGE = 0.04

# Caps of the size knobs: a value past one is a typo or a script's overflow, which failed deep in torch with a
# traceback or ran until killed. Each is far above every real use.
#: Most ``hidden`` (``H``; ENAS: 720 to 748; the node weights are ``2H x 2H`` and ``H x 2H``).
MAX_HIDDEN = 8192
#: Most unrolled ``steps`` (``T``; ENAS unrolled 35, about 8k ops of a training graph).
MAX_STEPS = 1000
#: Most sequences in a batch (ENAS: 64).
MAX_BATCH = 65_536
#: Most words of the vocabulary (``V``; Penn Treebank: 10,000; the largest real vocabularies: about 256,000).
MAX_VOCAB = 1_000_000
#: Most nodes of the cell (``N``; ENAS: 12).
MAX_NUM_NODES = 1000

# Ops of the imported training graph per piece of the heaviest cell, counted on built graphs (tests/families/test_ptb.py
# checks the bound against them): every node a tanh, ReLU or sigmoid one reading node 0 (the most averaged outputs and
# the most gradient sums).
#: Ops outside the unrolled cell (inputs, embedding, softmax, loss; measured: 11) and per node (its update).
_FIXED_OPS = 12
_NODE_OPS = 2
#: Ops of one step (measured: 5) and of one node of a step (measured: 19).
_STEP_OPS = 6
_STEP_NODE_OPS = 19


@dataclass(frozen=True)
class RNNArch:
    """An ENAS recurrent cell.

    Attributes:
        activations (tuple[int, ...]): activation id (into :data:`ACTIVATIONS`) of each node.
        inputs (tuple[int, ...]): the node each node reads; ``-1`` for node 0 (which reads
            ``[x_t; h_{t-1}]``), ``inputs[i] < i`` otherwise.
    """

    activations: tuple[int, ...]
    inputs: tuple[int, ...]

    @property
    def outputs(self) -> tuple[int, ...]:
        """The nodes no other node reads, averaged into the new hidden state."""
        read = set(self.inputs)
        return tuple(i for i in range(len(self.inputs)) if i not in read)


def sample_arch(rng: np.random.Generator, num_nodes: int = 12) -> RNNArch:
    """Draw a cell uniformly, as the untrained ENAS controller would.

    Args:
        rng (numpy.random.Generator): the generator.
        num_nodes (int, optional): nodes, ``N``. (default: :obj:`12`)

    Returns:
        RNNArch: the cell.

    Examples:
        >>> arch = sample_arch(np.random.default_rng(0), 4)
        >>> arch.inputs[0], len(arch.activations)
        (-1, 4)
    """
    activations = tuple(int(a) for a in rng.integers(0, len(ACTIVATIONS), size=num_nodes))
    inputs = (-1,) + tuple(int(rng.integers(0, i)) for i in range(1, num_nodes))
    return RNNArch(activations=activations, inputs=inputs)


def _activate(name: str, h: Tensor) -> Tensor:
    """Apply activation ``name`` to ``h``."""
    if name == "tanh":
        return torch.tanh(h)
    if name == "relu":
        return torch.relu(h)
    if name == "sigmoid":
        return torch.sigmoid(h)
    return h


class Node(nn.Module):
    """One highway node: ``[h; t] = x W``, ``s = c + sigmoid(t) * (f(h) - c)``.

    Args:
        in_features (int): width of ``x`` (``2H`` for node 0, ``H`` otherwise).
        hidden (int): ``H``.
        activation (str): ``f``, one of :data:`ACTIVATIONS`.
    """

    def __init__(self, in_features: int, hidden: int, activation: str) -> None:
        super().__init__()
        self.activation = activation
        self.hidden = hidden
        self.weight = nn.Parameter(torch.empty(in_features, 2 * hidden).uniform_(-INIT_RANGE, INIT_RANGE))

    def forward(self, x: Tensor, carry: Tensor) -> Tensor:
        """``x`` ``[B, in_features]`` and carry ``c`` ``[B, H]`` to the node state ``[B, H]``."""
        h, t = torch.mm(x, self.weight).chunk(2, dim=1)
        return carry + torch.sigmoid(t) * (_activate(self.activation, h) - carry)

    def extra_repr(self) -> str:
        """Shape of the weight and activation."""
        return f"{self.weight.shape[0]}, {2 * self.hidden}, activation={self.activation!r}"


class ENASCell(nn.Module):
    """An ENAS recurrent cell with a fixed architecture: ``(x_t, h_{t-1}) -> h_t``.

    Args:
        arch (RNNArch): the cell.
        hidden (int): ``H``, width of the input, of the state and of every node.
    """

    def __init__(self, arch: RNNArch, hidden: int) -> None:
        super().__init__()
        self.arch = arch
        self.nodes = nn.ModuleList(
            Node(2 * hidden if i == 0 else hidden, hidden, ACTIVATIONS[a]) for i, a in enumerate(arch.activations)
        )

    def forward(self, x: Tensor, h_prev: Tensor) -> Tensor:
        """Input ``[B, H]`` and previous state ``[B, H]`` to the new state ``[B, H]``."""
        states = [self.nodes[0](torch.cat([x, h_prev], dim=1), h_prev)]
        for i in range(1, len(self.nodes)):
            s = states[self.arch.inputs[i]]
            states.append(self.nodes[i](s, s))
        outs = [states[i] for i in self.arch.outputs]
        return outs[0] if len(outs) == 1 else torch.stack(outs).mean(dim=0)


class PTBModel(nn.Module):
    """ENAS language model: embedding, unrolled cell, tied softmax, cross-entropy.

    ``forward(tokens, targets)`` returns the mean cross-entropy (nats per token) of predicting
    ``targets[:, t]`` after reading ``tokens[:, :t + 1]``, starting from a zero state.

    Args:
        arch (RNNArch): the cell.
        hidden (int): ``H``, embedding and state width.
        vocab (int): ``V``, vocabulary size.
    """

    def __init__(self, arch: RNNArch, hidden: int, vocab: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.embedding = nn.Embedding(vocab, hidden)
        nn.init.uniform_(self.embedding.weight, -INIT_RANGE, INIT_RANGE)
        self.cell = ENASCell(arch, hidden)

    def forward(self, tokens: Tensor, targets: Tensor) -> Tensor:
        """Token ids ``[B, T]`` and next-token ids ``[B, T]`` (int64) to the scalar loss."""
        batch, steps = tokens.shape
        x = self.embedding(tokens)
        h = x.new_zeros(batch, self.hidden)
        outputs = []
        for t in range(steps):  # unrolled: every step is its own subgraph
            h = self.cell(x[:, t], h)
            outputs.append(h)
        out = torch.stack(outputs, dim=1).reshape(batch * steps, self.hidden)
        logits = torch.mm(out, self.embedding.weight.t())  # tied softmax
        # on the logits' device, as transformers' losses move them: accelerate's root hook puts inputs on its main GPU
        return F.cross_entropy(logits, targets.to(logits.device).reshape(batch * steps))


def num_parameters(hidden: int, vocab: int, num_nodes: int = 12) -> int:
    """Parameters of :class:`PTBModel`: :math:`4H^2 + 2(N-1)H^2 + VH`.

    Args:
        hidden (int): ``H``.
        vocab (int): ``V``.
        num_nodes (int, optional): ``N``. (default: :obj:`12`)

    Returns:
        int: the number of scalars.

    Examples:
        >>> num_parameters(720, 10_000)
        20678400
    """
    return 4 * hidden**2 + 2 * (num_nodes - 1) * hidden**2 + vocab * hidden


def estimate_size(*, hidden: int = 720, steps: int = 10, vocab: int = 10_000, num_nodes: int = 12) -> SizeEstimate:
    """Upper bounds on the training graph's ops and the parameter bytes of any model :func:`sample` can draw.

    Computed from the knobs alone, before anything is drawn or built: at most ``12 + 2N + T (6 + 19 N)`` ops (the
    drawn cells have about 0.9 of it) and exactly 4 bytes per parameter of :func:`num_parameters`.

    Args:
        hidden (int, optional): ``H``. (default: :obj:`720`)
        steps (int, optional): ``T``, unrolled time steps. (default: :obj:`10`)
        vocab (int, optional): ``V``. (default: :obj:`10000`)
        num_nodes (int, optional): ``N``. (default: :obj:`12`)

    Returns:
        SizeEstimate: ops of the imported training graph and bytes of float32 parameters.

    Raises:
        InvalidArgument: for a knob that is no integer or below its least (``vocab`` 2, the others 1; a negative
            one gave negative ops, a fraction fractional ones). The caps of :func:`sample` are not checked: an
            estimate says how large knobs past them would build.

    Examples:
        >>> estimate_size()
        SizeEstimate(ops=2376, param_bytes=82713600)
    """
    hidden, steps = check_int("hidden", hidden, 1), check_int("steps", steps, 1)
    vocab, num_nodes = check_int("vocab", vocab, 2), check_int("num_nodes", num_nodes, 1)
    ops = _FIXED_OPS + _NODE_OPS * num_nodes + steps * (_STEP_OPS + _STEP_NODE_OPS * num_nodes)
    return SizeEstimate(ops=ops, param_bytes=4 * num_parameters(hidden, vocab, num_nodes))


def sample(
    rng: SeedLike,
    *,
    hidden: int = 720,
    steps: int = 10,
    batch: int = 64,
    vocab: int = 10_000,
    num_nodes: int = 12,
) -> tuple[PTBModel, tuple[Tensor, Tensor]]:
    """Draw a random ENAS recurrent cell, its language model and a batch of token ids.

    The defaults are ENAS's PTB setting (H = 720, V = 10k, N = 12, batch 64) except the unrolled
    length: ENAS unrolled 35 steps (about 8k ops in a training graph); 10 keeps it mid-size.

    Args:
        rng (int, numpy.random.Generator or None): the seed (an int ``s`` draws as ``numpy.random.default_rng(s)``;
            ``None`` a fresh one): draws the cell, then the torch seed for weights and inputs.
        hidden (int, optional): ``H``, embedding and state width (at most :data:`MAX_HIDDEN`). (default: :obj:`720`)
        steps (int, optional): ``T``, unrolled time steps (at most :data:`MAX_STEPS`). (default: :obj:`10`)
        batch (int, optional): sequences per batch (at most :data:`MAX_BATCH`). (default: :obj:`64`)
        vocab (int, optional): ``V``, vocabulary size (at most :data:`MAX_VOCAB`). (default: :obj:`10000`)
        num_nodes (int, optional): ``N``, nodes of the cell (at most :data:`MAX_NUM_NODES`). (default: :obj:`12`)

    Returns:
        tuple[PTBModel, tuple[Tensor, Tensor]]: the model (``forward`` returns the scalar loss) and
        its inputs: tokens and targets, both ``[batch, steps]`` int64 in ``[0, vocab)``.

    Raises:
        InvalidArgument: for a knob out of range (a size past its cap) or a non-integer count knob; for knobs
            whose :func:`estimate_size` is past :data:`MAX_GRAPH_OPS` ops or :data:`MAX_PARAM_BYTES` bytes of
            parameters; or a seed that is not an int >= 0, a numpy generator or None.

    Examples:
        >>> model, (tokens, targets) = sample(np.random.default_rng(0), hidden=8, steps=3, batch=2, vocab=20)
        >>> tuple(tokens.shape), model(tokens, targets).dim()
        ((2, 3), 0)
    """
    rng = as_generator(rng)
    hidden = check_int("hidden", hidden, 1, MAX_HIDDEN, cap="ptb.MAX_HIDDEN")
    steps = check_int("steps", steps, 1, MAX_STEPS, cap="ptb.MAX_STEPS")
    batch = check_int("batch", batch, 1, MAX_BATCH, cap="ptb.MAX_BATCH")
    vocab = check_int("vocab", vocab, 2, MAX_VOCAB, cap="ptb.MAX_VOCAB")
    num_nodes = check_int("num_nodes", num_nodes, 1, MAX_NUM_NODES, cap="ptb.MAX_NUM_NODES")
    check_size("ptb", {"hidden": hidden, "steps": steps, "vocab": vocab, "num_nodes": num_nodes},
               estimate_size(hidden=hidden, steps=steps, vocab=vocab, num_nodes=num_nodes))
    arch = sample_arch(rng, num_nodes)
    with seeded_float32(rng):
        model = PTBModel(arch, hidden, vocab)
        sequence = torch.randint(0, vocab, (batch, steps + 1))
        inputs = (sequence[:, :-1].contiguous(), sequence[:, 1:].contiguous())  # (in the block: no inference tensors)
    return model, inputs


def random_knobs(rng: SeedLike) -> dict[str, Any]:
    """Draw knobs for :func:`sample` spanning small to large training graphs.

    ``num_nodes`` 4..12, ``steps`` 2..35 with ``num_nodes * steps <= 320`` (about 150 to 5,800
    ops of the imported training graph), ``hidden`` 64..748 (log-uniform, multiple of 4), ``batch``
    16..64 (multiple of 4), ``vocab`` 1,000..10,000 (multiple of 1,000).

    Args:
        rng (int, numpy.random.Generator or None): the generator, or a seed of one.

    Returns:
        dict[str, Any]: keyword arguments of :func:`sample`.

    Examples:
        >>> sorted(random_knobs(np.random.default_rng(0)))
        ['batch', 'hidden', 'num_nodes', 'steps', 'vocab']
    """
    rng = as_generator(rng)  # a seed too, as the package says (an int was an AttributeError)
    num_nodes = int(rng.integers(4, 13))
    steps = int(rng.integers(2, min(35, 320 // num_nodes) + 1))
    return {
        "hidden": log_uniform_int(rng, 64, 748, multiple=4),
        "steps": steps,
        "batch": 4 * int(rng.integers(4, 17)),
        "vocab": 1000 * int(rng.integers(1, 11)),
        "num_nodes": num_nodes,
    }
