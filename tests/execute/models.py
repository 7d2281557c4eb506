"""Small modules the executor tests share: each exercises a case of placed execution (not a test file)."""

from __future__ import annotations

import torch


class Net(torch.nn.Module):
    """Batch norm (buffers, copied to each device that reads them), a shared weight used twice, a residual."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        self.b = torch.nn.Linear(8, 2)

    def forward(self, x):
        h = torch.relu(self.bn(self.a(x)))
        h = self.a(h) + x  # the same layer twice, and a skip
        return self.b(h).square().mean()


class SharedGrad(torch.nn.Module):
    """Two full-shape parameters added to an activation: both get the add's incoming gradient, which mm reads too."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(8, 8)
        self.p = torch.nn.Parameter(torch.randn(16, 8))
        self.q = torch.nn.Parameter(torch.randn(16, 8))

    def forward(self, x):
        return torch.tanh(self.w(x) + self.p + self.q).square().mean()
