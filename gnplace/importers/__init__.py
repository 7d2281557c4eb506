"""Importers: turn a model (a PyTorch module, an ONNX file) into the training graph of one step.

Both importers share the optimizer conventions below: each trainable parameter gets one update op
holding the parameter and its optimizer state.
"""

from __future__ import annotations

from gnplace.exceptions import GnplaceError, UnknownName

__all__ = ["OPTIMIZERS", "check_optimizer"]

#: Optimizer name -> (state factor: resident bytes per parameter byte, FLOP per parameter element).
#: SGD keeps the parameter (1), momentum adds a velocity (2), Adam two moments (3); FLOP per element
#: are Paleo's and the spec's figures. AdamW (Loshchilov and Hutter, ICLR 2019) keeps Adam's state and
#: adds its decoupled weight decay, one multiply-add per element: 12.
OPTIMIZERS: dict[str, tuple[int, float]] = {
    "sgd": (1, 2.0), "momentum": (2, 4.0), "adam": (3, 10.0), "adamw": (3, 12.0),
}


def check_optimizer(optimizer: str, error: type[GnplaceError] = UnknownName) -> None:
    """Refuse an optimizer name not in :data:`OPTIMIZERS`, in one line that lists them.

    Examples:
        >>> check_optimizer("adam")
        >>> check_optimizer("lion")
        Traceback (most recent call last):
        ...
        gnplace.exceptions.UnknownName: unknown optimizer 'lion' (choose one of: sgd, momentum, adam, adamw)
    """
    if optimizer not in OPTIMIZERS:
        raise error(f"unknown optimizer {optimizer!r} (choose one of: {', '.join(OPTIMIZERS)})")
