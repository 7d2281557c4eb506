"""One place that turns a ``seed`` argument into a random generator."""

from __future__ import annotations

from typing import Union

import numpy as np

__all__ = ["SeedLike", "as_generator"]

#: seed (int, np.random.Generator or None): what every stochastic function of gnplace accepts.
SeedLike = Union[int, np.random.Generator, None]


def as_generator(seed: SeedLike = None) -> np.random.Generator:
    """A ``numpy.random.Generator`` from an int seed, an existing generator (returned as is) or None.

    Examples:
        >>> bool(as_generator(3).integers(100) == as_generator(3).integers(100))
        True
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise TypeError(f"seed must be an int, a numpy Generator or None, got {seed!r}")
    return np.random.default_rng(seed)
