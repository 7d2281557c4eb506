"""Fixtures shared by the family tests."""

from __future__ import annotations

import pytest
import torch


class _TupleLoss(torch.nn.Module):
    """Wraps a family model so that forward returns ``(loss,)``, as ``aot_export_module`` wants."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.inner(*args),)


@pytest.fixture()
def TupleLoss() -> type:  # noqa: N802 - used like the class it returns
    """The wrapper class that makes a model's forward return a one-tuple."""
    return _TupleLoss
