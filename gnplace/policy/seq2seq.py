"""The sequence-to-sequence placement policy of Mirhoseini et al. (ICML 2017), and what it reads.

The seeds' recurrent placers (``rnn_pg``, ``spotlight``, ``post`` and the Placer of ``hierarchical``,
:mod:`gnplace.rl`) share one network. The units to place (colocation groups of the decision graph,
or the Grouper's groups) are read in topological order as a sequence :math:`x_1 \\dots x_S`, and one
device is emitted per unit:

.. math::
    e_{1..S} &= \\mathrm{BiLSTM}(W_x x_{1..S})  && \\text{encoder} \\\\
    h_t &= \\mathrm{LSTM}\\bigl([E a_{t-1} \\| e_t], h_{t-1}\\bigr)  && \\text{decoder, fed its last device} \\\\
    \\alpha_{ts} &= \\mathrm{softmax}_s\\bigl(h_t^\\top W_a e_s\\bigr), \\quad c_t = \\textstyle\\sum_s \\alpha_{ts} e_s
        && \\text{attention (Luong et al., 2015, "general")} \\\\
    \\pi(\\cdot \\mid a_{<t}) &= \\mathrm{softmax}\\bigl(W_o \\tanh(W_c [h_t \\| c_t])\\bigr)

:math:`W_o` starts at zero, so the untrained policy is uniformly random over the devices, as
Spotlight initialises its policy (Gao et al., ICML 2018). Because the attention is computed after the
recurrent step (no input feeding), a batch of placements whose devices are known is scored in one
pass of the LSTMs (:meth:`Seq2SeqPolicy.log_probs`); sampling runs the decoder a step at a time.

What a unit's input holds (:func:`sequence_features`; Mirhoseini et al. embed the op's type, its
output shapes and its adjacency; where their paper leaves the details open these are our choices):
the mean of the decision graph's node features over the group's nodes (op-kind histogram, FLOP,
output and parameter bytes, phase, depth and levels, degrees:
:data:`~gnplace.policy.features.NODE_FEATURES`), its compute seconds on the fastest device and the bytes
it pins (both log, standardised over the graph), its position in the sequence, and its adjacency as the
number of producer and consumer groups (log) and their mean position relative to its own.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from gnplace.placers.groups import group_memory
from gnplace.policy.features import PolicyInput, standardise

__all__ = ["SEQUENCE_EXTRA_FEATURES", "sequence_order", "sequence_features", "group_edges", "Seq2SeqPolicy"]

#: Names of the columns :func:`sequence_features` adds after the mean node features, in order.
SEQUENCE_EXTRA_FEATURES: tuple[str, ...] = (
    "log_time", "log_bytes", "position", "log_producers", "log_consumers", "producer_offset", "consumer_offset",
)


def sequence_order(inp: PolicyInput) -> np.ndarray:
    """The decision groups in the order their first node appears in the priority order, ``[G]``.

    Examples:
        >>> from gnplace.toy import chain_graph, toy_cluster
        >>> from gnplace.policy.features import build_policy_input
        >>> sequence_order(build_policy_input(chain_graph(4), toy_cluster(2))).tolist()
        [0, 1, 2, 3]
    """
    group = inp.decision.group[inp.order]
    first = np.full(inp.num_groups, len(group), dtype=np.int64)
    np.minimum.at(first, group, np.arange(len(group)))
    return np.argsort(first, kind="stable").astype(np.int64)


def group_edges(inp: PolicyInput) -> np.ndarray:
    """Distinct ``(producer group, consumer group)`` pairs of the decision graph's edges between groups, ``[E, 2]``."""
    g = inp.decision.group
    pairs = np.stack([g[inp.decision.edge_src], g[inp.decision.edge_dst]], axis=1)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    return np.unique(pairs, axis=0) if len(pairs) else np.zeros((0, 2), dtype=np.int64)


def sequence_features(inp: PolicyInput, order: np.ndarray | None = None) -> torch.Tensor:
    """The input of every decision group, in ``order`` (default: :func:`sequence_order`), ``[G, F]`` float32.

    ``F = len(NODE_FEATURES) + len(SEQUENCE_EXTRA_FEATURES)``; see the module docstring.

    Examples:
        >>> from gnplace.toy import chain_graph, toy_cluster
        >>> from gnplace.policy.features import NODE_FEATURES, build_policy_input
        >>> x = sequence_features(build_policy_input(chain_graph(4), toy_cluster(2)))
        >>> tuple(x.shape) == (4, len(NODE_FEATURES) + len(SEQUENCE_EXTRA_FEATURES))
        True
    """
    order = sequence_order(inp) if order is None else np.asarray(order, dtype=np.int64)
    groups = inp.num_groups
    node_group = inp.node_group.numpy()
    counts = np.bincount(node_group, minlength=groups).astype(np.float64)
    mean_x = np.zeros((groups, inp.node_x.shape[1]))
    np.add.at(mean_x, node_group, inp.node_x.numpy().astype(np.float64))
    mean_x /= np.maximum(counts, 1.0)[:, None]
    position = np.empty(groups)
    position[order] = np.arange(groups) / max(groups - 1, 1)
    pairs = group_edges(inp)
    producers = np.bincount(pairs[:, 1], minlength=groups).astype(np.float64)
    consumers = np.bincount(pairs[:, 0], minlength=groups).astype(np.float64)
    producer_pos = np.zeros(groups)
    consumer_pos = np.zeros(groups)
    np.add.at(producer_pos, pairs[:, 1], position[pairs[:, 0]])
    np.add.at(consumer_pos, pairs[:, 0], position[pairs[:, 1]])
    producer_offset = np.where(producers > 0, producer_pos / np.maximum(producers, 1) - position, 0.0)
    consumer_offset = np.where(consumers > 0, consumer_pos / np.maximum(consumers, 1) - position, 0.0)
    extra = np.stack([
        standardise(np.log(inp.group_time.min(axis=1) + 1e-12)),
        standardise(np.log1p(group_memory(inp.decision))),  # the group's size: params plus every output
        position, np.log1p(producers), np.log1p(consumers), producer_offset, consumer_offset,
    ], axis=1)
    return torch.as_tensor(np.concatenate([mean_x, extra], axis=1)[order], dtype=torch.float32)


class Seq2SeqPolicy(nn.Module):
    """The encoder-decoder LSTM with attention of the module docstring, ``S`` units to ``num_devices`` devices.

    Args:
        in_features (int): width of a unit's input :math:`x_t`.
        num_devices (int): devices to choose from, ``D``.
        hidden (int, optional): width of :math:`e_t`, :math:`h_t` and :math:`c_t` (default: 128).
        layers (int, optional): stacked LSTM layers in the encoder and the decoder (Spotlight: 2) (default: 2).

    Examples:
        >>> policy = Seq2SeqPolicy(5, 3, hidden=8)
        >>> actions, logp = policy.sample(torch.zeros(4, 5), batch=2, generator=torch.Generator().manual_seed(0))
        >>> tuple(actions.shape), tuple(logp.shape)
        ((2, 4), (2, 4, 3))
        >>> bool(torch.allclose(logp.exp(), torch.full_like(logp, 1 / 3)))  # W_o = 0: uniform
        True
    """

    def __init__(self, in_features: int, num_devices: int, *, hidden: int = 128, layers: int = 2) -> None:
        super().__init__()
        if hidden % 2:
            raise ValueError(f"hidden must be even (two directions of hidden / 2), got {hidden}")
        self.num_devices = int(num_devices)
        self.hidden = int(hidden)
        self.layers = int(layers)
        self.embed = nn.Linear(in_features, hidden)  # W_x
        self.encoder = nn.LSTM(hidden, hidden // 2, num_layers=layers, batch_first=True, bidirectional=True)
        self.device_embed = nn.Embedding(num_devices + 1, hidden)  # E; index D is "no device yet"
        self.decoder = nn.LSTM(2 * hidden, hidden, num_layers=layers, batch_first=True)
        self.attend = nn.Linear(hidden, hidden, bias=False)  # W_a
        self.combine = nn.Linear(2 * hidden, hidden)  # W_c
        self.out = nn.Linear(hidden, num_devices)  # W_o
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def encode(self, x: torch.Tensor, batch: int) -> torch.Tensor:
        """:math:`e_{1..S}` of ``x`` (``[S, F]``, shared by the batch, or ``[B, S, F]``), ``[B, S, H]``."""
        if x.dim() == 2:
            enc, _ = self.encoder(self.embed(x).unsqueeze(0))
            return enc.expand(batch, -1, -1)
        enc, _ = self.encoder(self.embed(x))
        return enc

    def _logits(self, h: torch.Tensor, enc: torch.Tensor) -> torch.Tensor:
        """Device logits from decoder states ``[B, T, H]`` attending over ``enc`` ``[B, S, H]``: ``[B, T, D]``."""
        scores = torch.bmm(self.attend(h), enc.transpose(1, 2))  # h_t^T W_a e_s
        context = torch.bmm(scores.softmax(-1), enc)  # c_t
        return self.out(torch.tanh(self.combine(torch.cat([h, context], -1))))  # W_o tanh(W_c [h_t | c_t])

    def log_probs(self, x: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """:math:`\\log\\pi(\\cdot \\mid a_{<t})` at each step of placements ``actions`` (``[B, S]``): ``[B, S, D]``."""
        batch, steps = actions.shape
        enc = self.encode(x, batch)
        previous = torch.cat([torch.full((batch, 1), self.num_devices, dtype=torch.long), actions[:, :-1]], 1)
        h, _ = self.decoder(torch.cat([self.device_embed(previous), enc], -1))  # teacher-forced a_{t-1}
        return self._logits(h, enc).log_softmax(-1)

    @torch.no_grad()
    def sample(
        self, x: torch.Tensor, batch: int, generator: torch.Generator, *, greedy: bool = False, noise: float = 0.0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``batch`` placements step by step: devices ``[B, S]`` and :math:`\\log\\pi` at each step ``[B, S, D]``.

        ``greedy`` takes the most likely device; ``noise`` adds Gaussian noise of that standard
        deviation to the logits before sampling (the hierarchical planner's exploration); the returned
        log-probabilities are the policy's own, without noise.
        """
        enc = self.encode(x, batch)
        steps = enc.shape[1]
        previous = torch.full((batch,), self.num_devices, dtype=torch.long)
        state: tuple[torch.Tensor, torch.Tensor] | None = None
        actions = torch.empty(batch, steps, dtype=torch.long)
        log_probs = torch.empty(batch, steps, self.num_devices)
        for t in range(steps):
            step_in = torch.cat([self.device_embed(previous), enc[:, t]], -1).unsqueeze(1)
            h, state = self.decoder(step_in, state)
            logp = self._logits(h, enc)[:, 0].log_softmax(-1)
            log_probs[:, t] = logp
            if greedy:
                previous = logp.argmax(-1)
            else:
                logits = logp + noise * torch.randn(logp.shape, generator=generator) if noise > 0 else logp
                previous = torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(1)
            actions[:, t] = previous
        return actions, log_probs
