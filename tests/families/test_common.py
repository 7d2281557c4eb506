"""Family sampler helpers: knob checks, size caps, log-uniform draws (seeded torch: tests/test_seed.py)."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.exceptions import InvalidArgument, UnknownName
from gnplace.families._common import (
    SizeEstimate,
    check_bool,
    check_choice,
    check_int,
    check_probability,
    check_size,
    log_uniform_int,
)


# ---------------------------------------------------------------------------------- check_int
@pytest.mark.parametrize(("value", "low", "high"), [(1, 1, None), (7, 1, 7), (4, 1, 7), (10**9, 0, None), (-3, -5, -1)])
def test_check_int_accepts_the_closed_range(value, low, high):
    assert check_int("layers", value, low, high) == value


def test_check_int_returns_a_python_int_for_numpy_integers():
    out = check_int("width", np.int64(64), 1)
    assert out == 64 and type(out) is int


@pytest.mark.parametrize("value", [True, False, 3.0, "3", None, np.float32(2)])
def test_check_int_rejects_non_integers(value):
    # a TypeError before: not a GnplaceError, so the command line printed a traceback
    with pytest.raises(InvalidArgument, match=r"^knob 'layers' must be an integer >= 0, got "):
        check_int("layers", value, 0)


def test_check_int_names_the_knob_and_the_bound():
    # a plain ValueError before; InvalidArgument is still one, for callers that catch that
    with pytest.raises(InvalidArgument, match=r"^knob 'layers' must be >= 1, got 0$"):
        check_int("layers", 0, 1)
    with pytest.raises(ValueError, match=r"knob 'cells' must be in \[2, 5\], got 6"):
        check_int("cells", 6, 2, 5)
    with pytest.raises(InvalidArgument, match=r"knob 'cells' must be in \[2, 5\], got 1"):
        check_int("cells", 1, 2, 5)
    with pytest.raises(InvalidArgument, match=r"^knob 'cells' must be an integer in \[2, 5\], got 2.5$"):
        check_int("cells", 2.5, 2, 5)


# ---------------------------------------------------------------------------------- check_choice
def test_check_choice_returns_a_known_name():
    assert check_choice("space", "macro", ["micro", "macro"]) == "macro"


def test_check_choice_lists_the_choices_of_an_unknown_name():
    with pytest.raises(UnknownName, match=r"^unknown attention 'sparse' \(choose one of: dot, additive\)$"):
        check_choice("attention", "sparse", ("dot", "additive"))


@pytest.mark.parametrize("value", [np.array(["micro", "macro"]), np.array(["micro"]), ["micro"], 3, None])
def test_check_choice_refuses_what_is_not_a_string(value):
    # an array of two names was numpy's "truth value of an array ... is ambiguous" (a plain ValueError), and an
    # array of one name passed as that name
    with pytest.raises(UnknownName, match=r"^unknown space .* \(choose one of: micro, macro\)$"):
        check_choice("space", value, ("micro", "macro"))


def test_check_choice_accepts_a_numpy_string():
    assert check_choice("space", np.str_("macro"), ("micro", "macro")) == "macro"


def test_check_choice_is_case_sensitive_and_a_value_error():
    with pytest.raises(ValueError, match="unknown space 'Micro'"):
        check_choice("space", "Micro", ("micro",))


# ---------------------------------------------------------------------------------- log_uniform_int
@pytest.mark.parametrize(("low", "high", "multiple"), [(16, 512, 16), (1, 1000, 1), (8, 64, 8), (100, 300, 50)])
def test_log_uniform_int_stays_in_range_on_the_grid(low, high, multiple):
    rng = np.random.default_rng(0)
    values = np.array([log_uniform_int(rng, low, high, multiple=multiple) for _ in range(2000)])
    assert values.min() >= low and values.max() <= high
    assert np.all(values % multiple == 0)
    assert all(type(log_uniform_int(rng, low, high, multiple)) is int for _ in range(3))


def test_log_uniform_int_reaches_both_ends_of_a_coarse_grid():
    rng = np.random.default_rng(0)
    values = {log_uniform_int(rng, 16, 512, multiple=16) for _ in range(3000)}
    assert min(values) == 16 and max(values) == 512
    assert len(values) > 20  # most multiples of 16 in between show up, not only the two ends


def test_log_uniform_int_is_log_uniform_not_uniform():
    rng = np.random.default_rng(1)
    values = np.array([log_uniform_int(rng, 1, 10_000) for _ in range(4000)])
    # log-uniform: each decade holds a quarter; a uniform draw would put 90% in the last one
    decades = np.histogram(np.log10(values), bins=[0, 1, 2, 3, 4.01])[0] / values.size
    assert np.allclose(decades, 0.25, atol=0.04)


def test_log_uniform_int_with_equal_bounds_and_one_draw():
    rng = np.random.default_rng(2)
    assert log_uniform_int(rng, 32, 32, multiple=32) == 32
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    log_uniform_int(a, 1, 100)
    b.random()
    assert a.random() == b.random()  # it took exactly one draw


# ---------------------------------------------------------------------------------- check_probability
@pytest.mark.parametrize("value", [0, 1, 0.0, 0.4, 1.0, np.float32(0.5), np.int64(1)])
def test_check_probability_accepts_the_unit_interval(value):
    out = check_probability("dropout", value)
    assert out == float(value) and type(out) is float


@pytest.mark.parametrize("value", [True, "0.4", None, -0.1, 1.01, float("nan")])
def test_check_probability_rejects_the_rest_naming_the_knob(value):
    # TypeError (a bool, a string, None) or plain ValueError before, neither a GnplaceError
    with pytest.raises(InvalidArgument, match=r"^knob 'dropout' must be .*, got "):
        check_probability("dropout", value)


# ---------------------------------------------------------------------------------- check_bool
@pytest.mark.parametrize("value", [True, False, np.bool_(True)])
def test_check_bool_accepts_booleans(value):
    out = check_bool("bidirectional", value)
    assert out is bool(value)


@pytest.mark.parametrize("value", ["False", "true", 1, 0, None, 1.0])
def test_check_bool_rejects_the_rest_naming_the_knob(value):
    with pytest.raises(InvalidArgument, match=r"^knob 'bidirectional' must be True or False, got "):
        check_bool("bidirectional", value)


def test_check_int_names_the_cap_a_value_is_past():
    with pytest.raises(InvalidArgument, match=r"^knob 'layers' must be at most 10,000 \(cifar10\.MAX_LAYERS\), got 10001$"):
        check_int("layers", 10_001, 1, 10_000, cap="cifar10.MAX_LAYERS")
    # below the range, or not an integer, the message gives the lower bound alone, as without a cap
    with pytest.raises(InvalidArgument, match=r"^knob 'layers' must be >= 1, got 0$"):
        check_int("layers", 0, 1, 10_000, cap="cifar10.MAX_LAYERS")
    with pytest.raises(InvalidArgument, match=r"^knob 'layers' must be an integer >= 1, got 2.5$"):
        check_int("layers", 2.5, 1, 10_000, cap="cifar10.MAX_LAYERS")
    assert check_int("layers", 10_000, 1, 10_000, cap="cifar10.MAX_LAYERS") == 10_000


# ---------------------------------------------------------------------------------- check_size
def test_check_size_passes_a_size_at_both_caps_as_it_is():
    # 1,000,000 ops and 16 GiB (2**34 = 17,179,869,184 bytes) are still allowed; the size comes back unchanged
    at_caps = SizeEstimate(ops=1_000_000, param_bytes=17_179_869_184)
    assert check_size("nmt", {"units": 8192}, at_caps) == SizeEstimate(ops=1_000_000, param_bytes=17_179_869_184)


def test_check_size_refuses_one_op_or_one_parameter_byte_past_its_cap():
    # the parameter cap had no test: a check_size without it, or with a cap of 15 or 32 GiB, passed
    ops = (r"^ptb knobs steps=10 would build a training graph of up to 1,000,001 ops, past the cap of 1,000,000 "
           r"\(gnplace\.families\.MAX_GRAPH_OPS\): lower them$")
    with pytest.raises(InvalidArgument, match=ops):
        check_size("ptb", {"steps": 10}, SizeEstimate(ops=1_000_001, param_bytes=0))
    params = (r"^nmt knobs units=8192, layers=4 would build up to 17,179,869,185 bytes of parameters, past the cap of "
              r"17,179,869,184 \(gnplace\.families\.MAX_PARAM_BYTES\): lower them$")
    with pytest.raises(InvalidArgument, match=params):
        check_size("nmt", {"units": 8192, "layers": 4}, SizeEstimate(ops=1, param_bytes=17_179_869_185))
