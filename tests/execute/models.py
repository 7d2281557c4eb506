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


class ScalesItsInput(torch.nn.Module):
    """Writes its input in place, as ``x.mul_(2)`` does: each run must start from the recorded input."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2.0)
        return self.linear(x).square().mean()


class ReadsItsRunningMean(torch.nn.Module):
    """Batch norm updates its running mean, which the loss then reads: on another rank, that rank's copy was stale."""

    def __init__(self):
        super().__init__()
        self.linear, self.norm = torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6)
        self.weight = torch.nn.Parameter(torch.ones(6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.linear(x))
        return h.square().mean() + (self.norm.running_mean * self.weight).sum()


class ReadsTheStatisticsAfterTheirUpdate(torch.nn.Module):
    """Ops that read batch norm's running mean after its update, which needs another rank's tensor first: a rank
    ran a reader that was ready before the update that was not (the update is no marked in-place write)."""

    def __init__(self):
        super().__init__()
        self.a, self.bn, self.b = torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.bn(self.a(x))
        r = self.bn.running_mean * 2
        return self.b(h * r + self.bn.running_mean).square().mean()


class ViewsATransposedResult(torch.nn.Module):
    """A view of a result kept in a transposed layout: the view is recorded against that layout, which a tensor
    that crosses ranks loses (it arrives contiguous), and the view failed there."""

    def __init__(self):
        super().__init__()
        self.lin, self.out = torch.nn.Linear(4, 4), torch.nn.Linear(12, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x).transpose(1, 2) * 2  # the product keeps the transposed layout
        return self.out(y.transpose(1, 2).reshape(2, 12)).square().mean()  # recorded as aten.view


class ViewsBeforeWrites(torch.nn.Module):
    """Views of ``h`` made before in-place writes to ``h`` and read after them: eager reads them written."""

    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = torch.nn.Linear(4, 6), torch.nn.Linear(6, 1), torch.nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.l1(x)
        v = h.view(6, 3)
        h.mul_(2.0)
        w = v.t().t()  # a view of the view, made after the first write
        h.add_(1.0)
        return self.l2(h).square().mean() + self.l3(v).square().mean() + self.l3(w).sum()


class ConjugatesAcross(torch.nn.Module):
    """A lazily conjugated complex tensor (``conj()`` only marks it), and its gradient conjugated twice: gloo views a
    complex tensor as real, which a marked one cannot be, and a rank failed where such a tensor crossed."""

    def __init__(self):
        super().__init__()
        self.inp, self.out = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.complex(self.inp(x), x).conj()
        return self.out((z * z).real).square().mean()


class DropsOut(torch.nn.Module):
    """Dropout between two layers: each step draws its mask from torch's global generator, as eager does."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.drop = torch.nn.Dropout(0.5)
        self.b = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.b(self.drop(self.a(x))).square().mean()


class MakesItsOwnConstants(torch.nn.Module):
    """Tensors made in the forward without a dtype (``torch.ones(n, n)``, an integer ``arange`` divided): of the default."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 4)

    def forward(self, x):
        y = self.fc(x) @ torch.ones(4, 4) + torch.arange(4) / 7
        return y.square().mean()


class WritesIntoAView(torch.nn.Module):
    """Sets a column of a fresh tensor (``y[:, 0] = v``) and adds into a slice of an activation, then reads both
    whole: each write goes through a view, and the readers follow the tensor the recording ties to its maker."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 6)
        self.b = torch.nn.Linear(4, 2)
        self.w = torch.nn.Parameter(torch.randn(6))

    def forward(self, x):
        y = torch.zeros(x.shape[0], 6)
        y[:, 0] = self.b(x)[:, 0]
        h = self.a(x)
        h[..., :2] += self.b(x)
        return ((y + h).tanh() * self.w).sum()


class WritesInPlace(torch.nn.Module):
    """``y = linear(x)`` written in place: into a view of it (``y[:, 0] = 0``), on the tensor itself, or
    into its halves as the LSTM cell activates its gates, the loss then reading the halves or ``y``."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 6)
        self.how = how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if self.how == "view":
            y[:, 0] = 0.0  # the later users of y read the write through the view
        elif self.how == "itself":
            y.add_(1.0).relu_()  # in place on the tensor itself: its users follow the writes
        else:
            first, second = y.unsafe_chunk(2, dim=1)  # disjoint pieces: a write into one leaves the other
            first.sigmoid_()
            second.tanh_()
            if self.how == "pieces":
                return (first * second).sum()
        return (y * y).sum()


class CheckpointedDropout(torch.nn.Module):
    """A checkpointed segment with dropout: eager recomputes it in the backward with the forward's mask."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.drop = torch.nn.Linear(4, 4), torch.nn.Dropout(0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        segment = lambda h: self.drop(torch.tanh(self.a(h)))  # noqa: E731
        return torch.utils.checkpoint.checkpoint(segment, x, use_reentrant=False).square().sum()
