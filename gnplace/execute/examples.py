"""Small PyTorch models as ``module:factory`` references, for real-device tests, calibration and the docs.

Each factory returns ``(module, example_inputs)`` with a module whose output is the training loss,
built from a fixed seed, so that ``gnplace profile gnplace.execute.examples:mlp`` and friends are
the same model in every process. The seed is torch's global generator's only while the factory runs
(:func:`gnplace.seed.seeded_torch`): the caller's random stream is where it was before the call.
"""

from __future__ import annotations

import torch
from torch import nn

from gnplace.seed import seeded_torch

__all__ = ["mlp", "convnet", "branchy", "transformer", "tiny", "Regression"]


class Regression(nn.Module):
    """``body(x)`` scored by the mean squared error against ``y``: a model whose output is its loss."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The loss of one batch."""
        return nn.functional.mse_loss(self.body(x), y)


class _Branches(nn.Module):
    """Four parallel towers over one input, summed: work that two devices can share."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.towers = nn.ModuleList(
            nn.Sequential(*[layer for _ in range(depth) for layer in (nn.Linear(width, width), nn.Tanh())])
            for _ in range(4)
        )
        self.head = nn.Linear(width, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(sum(t(x) for t in self.towers))


def _made(body: nn.Module, x: torch.Tensor, out: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """``body`` as a regression on ``x`` with ``out`` targets, drawn from a generator of seed 1."""
    generator = torch.Generator().manual_seed(1)
    y = torch.randn(x.shape[0], out, generator=generator)
    return Regression(body), (x, y)


def tiny() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Two linear layers on a batch of 16 (tests)."""
    with seeded_torch(0):
        return _made(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), torch.randn(16, 8), 4)


def mlp() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Six ReLU layers of width 512 on a batch of 128."""
    with seeded_torch(0):
        layers = [m for _ in range(6) for m in (nn.Linear(512, 512), nn.ReLU())]
        return _made(nn.Sequential(*layers, nn.Linear(512, 10)), torch.randn(128, 512), 10)


def convnet() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A small convolutional network (three conv-BN-ReLU blocks, pooling, a linear head) on 32x32 images."""
    with seeded_torch(0):
        body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
        )
        return _made(body, torch.randn(16, 3, 32, 32), 10)


def branchy() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Four parallel towers of three tanh layers (width 384) on a batch of 128: parallel work."""
    with seeded_torch(0):
        return _made(_Branches(384, 3), torch.randn(128, 384), 8)


class _Tokens(nn.Module):
    """Token embedding, a transformer encoder and a per-token head: a language-model-shaped body."""

    def __init__(self, vocab: int, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, 16)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)))


def transformer() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Two encoder layers (width 256, 4 heads) over 32 sequences of 64 tokens: real-device runs on a GPU."""
    with seeded_torch(0):
        body = _Tokens(1000, 256, 2, 4)
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 1000, (32, 64), generator=generator)
    return Regression(body), (tokens, torch.randn(32, 64, 16, generator=generator))
