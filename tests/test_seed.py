"""Tests of ``gnplace.seed.as_generator``."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.seed import as_generator


def test_int_seed_is_reproducible():
    a = as_generator(3).integers(0, 1_000_000, size=10)
    b = as_generator(3).integers(0, 1_000_000, size=10)
    c = as_generator(4).integers(0, 1_000_000, size=10)
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist()


def test_numpy_integer_seed_matches_int_seed():
    assert as_generator(np.int64(7)).random() == as_generator(7).random()


def test_generator_is_returned_as_is():
    rng = np.random.default_rng(0)
    assert as_generator(rng) is rng


def test_none_gives_a_fresh_generator():
    a, b = as_generator(None), as_generator()
    assert isinstance(a, np.random.Generator) and isinstance(b, np.random.Generator)
    assert a is not b


@pytest.mark.parametrize("seed", [1.5, "3", True, False, [1], np.random.RandomState(0)])
def test_bad_seed(seed):
    with pytest.raises(TypeError, match=r"seed must be an int, a numpy Generator or None, got "):
        as_generator(seed)
