"""Tests of the family registry (``gnplace.families``)."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest
import torch

from gnplace.exceptions import GnplaceError, InvalidArgument, UnknownName
from gnplace.families import (
    FAMILIES,
    MAX_GRAPH_OPS,
    MAX_PARAM_BYTES,
    RANDOM_KNOBS,
    cifar10,
    draw,
    get_family,
    nmt,
    ptb,
    random_knobs,
)

#: Tiny overrides that keep each family fast on CPU.
TINY: dict[str, dict[str, Any]] = {
    "cifar10": {"layers": 1, "channels": 4, "batch": 2},
    "ptb": {"hidden": 8, "steps": 2, "batch": 2, "vocab": 20},
    "nmt": {"units": 8, "batch": 2, "src_steps": 2, "tgt_steps": 2, "vocab": 20},
}


def test_the_three_families_are_registered() -> None:
    assert FAMILIES == {"cifar10": cifar10.sample, "ptb": ptb.sample, "nmt": nmt.sample}
    assert set(RANDOM_KNOBS) == set(FAMILIES)
    for name in FAMILIES:
        assert get_family(name) is FAMILIES[name]


def test_unknown_family_lists_the_choices() -> None:
    with pytest.raises(UnknownName, match=r"'imagenet'.*cifar10, nmt, ptb"):
        get_family("imagenet")
    with pytest.raises(GnplaceError):
        random_knobs("imagenet", np.random.default_rng(0))
    with pytest.raises(ValueError):
        draw("imagenet", seed=0)
    for name in (["ptb"], {"a": 1}):  # "unhashable type", a bare TypeError
        with pytest.raises(UnknownName, match="unknown family"):
            get_family(name)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_random_knobs_are_deterministic_and_accepted_by_the_sampler(name: str) -> None:
    a = random_knobs(name, np.random.default_rng(7))
    b = random_knobs(name, np.random.default_rng(7))
    assert a == b == random_knobs(name, 7)  # a seed, as everywhere (an int was an AttributeError)
    assert random_knobs(name, None).keys() == a.keys()
    # Every drawn knob is a keyword of the family's sampler, with a plain Python value.
    model, inputs = FAMILIES[name](np.random.default_rng(0), **dict(a, **TINY[name]))
    assert all(isinstance(v, (bool, int, str)) for v in a.values())
    assert model(*inputs).dim() == 0


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_draw_is_deterministic_and_overrides_win(name: str) -> None:
    m1, x1 = draw(name, seed=11, **TINY[name])
    m2, x2 = draw(name, seed=11, **TINY[name])
    assert repr(m1) == repr(m2)
    assert all(torch.equal(a, b) for a, b in zip(x1, x2))
    loss = m1(*x1)
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert x1[0].shape[0] == 2  # the batch override won over the drawn batch


def test_sampling_leaves_the_global_torch_generator_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    for name in FAMILIES:
        draw(name, seed=0, **TINY[name])
    assert torch.equal(torch.rand(3), expected)


def test_same_generator_state_gives_the_same_module() -> None:
    rng = np.random.default_rng(4)
    state = rng.bit_generator.state
    m1, _ = ptb.sample(rng, **TINY["ptb"])
    rng.bit_generator.state = state
    m2, _ = ptb.sample(rng, **TINY["ptb"])
    assert m1.cell.arch == m2.cell.arch
    assert torch.equal(m1.embedding.weight, m2.embedding.weight)


def test_draw_of_the_macro_space_uses_the_macro_knob_ranges() -> None:
    # cifar10.random_knobs draws macro nets from layers 4..24 and channels 16..96 (multiples of 4);
    # draw(space="macro") drew the micro ranges (layers 1..30, channels 8..48) and only then switched space.
    for seed in range(6):
        model, _ = draw("cifar10", seed=seed, space="macro", batch=1)
        assert isinstance(model, cifar10.MacroNet)
        assert 4 <= len(model.arch.ops) <= 24
        width = model.stem[0].out_channels
        assert 16 <= width <= 96 and width % 4 == 0


def test_draw_of_the_default_space_is_unchanged() -> None:
    rng = np.random.default_rng(3)
    knobs = cifar10.random_knobs(rng)
    expected, _ = cifar10.sample(rng, **dict(knobs, batch=1))
    model, _ = draw("cifar10", seed=3, batch=1)
    assert model.arch == expected.arch and repr(model) == repr(expected)


def test_a_misspelt_knob_is_one_error_naming_the_knobs():
    from gnplace.exceptions import UnknownName

    with pytest.raises(UnknownName, match=r"family 'ptb' has no knob 'hiden' \(its knobs: .*hidden"):
        draw("ptb", seed=0, hiden=8)


#: For every knob of every family, values its sampler must refuse (a wrong type, or out of range).
BAD_KNOBS: list[tuple[str, str, Any]] = [
    ("cifar10", "layers", 0), ("cifar10", "layers", 2.0), ("cifar10", "channels", 1), ("cifar10", "batch", "2"),
    ("cifar10", "num_blocks", None), ("cifar10", "skip_prob", "0.4"), ("cifar10", "dropout", True),
    ("cifar10", "space", "nasnet"),
    ("ptb", "hidden", 2.5), ("ptb", "steps", 0), ("ptb", "batch", True), ("ptb", "vocab", 1), ("ptb", "num_nodes", "4"),
    ("nmt", "layers", 0), ("nmt", "units", 8.0), ("nmt", "batch", None), ("nmt", "src_steps", -1),
    ("nmt", "tgt_steps", "2"), ("nmt", "vocab", 1), ("nmt", "attention", "monotonic"), ("nmt", "bidirectional", "no"),
]


def test_bad_knobs_cover_every_knob() -> None:
    covered = {(name, knob) for name, knob, _ in BAD_KNOBS}
    for name, sampler in FAMILIES.items():
        for knob in list(inspect.signature(sampler).parameters)[1:]:
            assert (name, knob) in covered


@pytest.mark.parametrize(("name", "knob", "value"), BAD_KNOBS)
def test_every_bad_knob_is_one_gnplace_error_naming_knob_and_value(name: str, knob: str, value: Any) -> None:
    # a wrong type was a TypeError and a value out of range a plain ValueError: the command line and library
    # callers catching GnplaceError got a traceback
    with pytest.raises(GnplaceError) as info:
        FAMILIES[name](np.random.default_rng(0), **dict(TINY[name], **{knob: value}))
    assert isinstance(info.value, (InvalidArgument, UnknownName))
    message = str(info.value)
    assert "\n" not in message and repr(value) in message
    if isinstance(info.value, InvalidArgument):
        assert message.startswith(f"knob {knob!r} must be ")
    with pytest.raises(type(info.value)):  # and draw, which passes the knob on, raises the same
        draw(name, seed=0, **dict(TINY[name], **{knob: value}))


# ---------------------------------------------------------------------------------- seeds
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_sampler_takes_what_every_seed_argument_takes(name: str) -> None:
    """cifar10.sample(0) and ptb.sample(0) were AttributeError ('int' object has no attribute 'integers')."""
    model, inputs = FAMILIES[name](3, **TINY[name])
    expected, expected_inputs = FAMILIES[name](np.random.default_rng(3), **TINY[name])  # an int s: default_rng(s)
    assert repr(model) == repr(expected)
    assert all(torch.equal(a, b) for a, b in zip(inputs, expected_inputs, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), expected.state_dict().values()))
    assert FAMILIES[name](np.int64(3), **TINY[name])[0].state_dict().keys() == model.state_dict().keys()
    assert FAMILIES[name](None, **TINY[name])[0](*inputs).dim() == 0  # None: a fresh seed


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("seed", [2.5, "0", -1, True, [0]])
def test_a_bad_seed_is_one_invalid_argument(name: str, seed: Any) -> None:
    with pytest.raises(InvalidArgument, match=r"^seed must be ") as info:
        FAMILIES[name](seed, **TINY[name])
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------- caps of the size knobs
#: Every integer knob of every family (with the knobs that select its cap) and the constant that caps it.
CAPS: list[tuple[str, dict[str, Any], str, str]] = [
    ("cifar10", {}, "layers", "cifar10.MAX_LAYERS"),
    ("cifar10", {"space": "macro"}, "layers", "cifar10.MAX_MACRO_LAYERS"),
    ("cifar10", {}, "channels", "cifar10.MAX_CHANNELS"),
    ("cifar10", {}, "batch", "cifar10.MAX_BATCH"),
    ("cifar10", {}, "num_blocks", "cifar10.MAX_NUM_BLOCKS"),
    ("ptb", {}, "hidden", "ptb.MAX_HIDDEN"),
    ("ptb", {}, "steps", "ptb.MAX_STEPS"),
    ("ptb", {}, "batch", "ptb.MAX_BATCH"),
    ("ptb", {}, "vocab", "ptb.MAX_VOCAB"),
    ("ptb", {}, "num_nodes", "ptb.MAX_NUM_NODES"),
    ("nmt", {}, "layers", "nmt.MAX_LAYERS"),
    ("nmt", {}, "units", "nmt.MAX_UNITS"),
    ("nmt", {}, "batch", "nmt.MAX_BATCH"),
    ("nmt", {}, "src_steps", "nmt.MAX_STEPS"),
    ("nmt", {}, "tgt_steps", "nmt.MAX_STEPS"),
    ("nmt", {}, "vocab", "nmt.MAX_VOCAB"),
]


def _cap(constant: str) -> int:
    """The value of ``constant`` (``"cifar10.MAX_LAYERS"``)."""
    family, name = constant.split(".")
    return int(getattr({"cifar10": cifar10, "ptb": ptb, "nmt": nmt}[family], name))


def test_every_integer_knob_has_a_cap() -> None:
    capped = {(name, knob) for name, _, knob, _ in CAPS}
    for name, sampler in FAMILIES.items():
        for knob, parameter in list(inspect.signature(sampler).parameters.items())[1:]:
            if type(parameter.default) is int:
                assert (name, knob) in capped


@pytest.mark.parametrize(("name", "fixed", "knob", "constant"), CAPS)
@pytest.mark.parametrize("past", [1, 10**30], ids=["cap+1", "cap+1e30"])
def test_a_size_knob_past_its_cap_is_one_line_naming_the_cap(name, fixed, knob, constant, past) -> None:
    """Past any bound, layers=10**30 ran until killed and channels=10**30 was a traceback from deep in torch."""
    cap = _cap(constant)
    value = cap + past
    for call in (lambda: FAMILIES[name](0, **dict(TINY[name], **fixed, **{knob: value})),
                 lambda: draw(name, seed=0, **dict(TINY[name], **fixed, **{knob: value}))):
        with pytest.raises(InvalidArgument) as info:
            call()
        assert str(info.value) == f"knob {knob!r} must be at most {cap:,} ({constant}), got {value}"


def test_the_caps_are_far_above_every_real_use() -> None:
    # scripts/benchmarks builds cifar10 graphs of about 100,000 ops from round(ops / 119) = 840 micro layers
    assert _cap("cifar10.MAX_LAYERS") >= 10 * round(100_000 / 119)
    # and every knob drawn for the shipped datasets (either cifar10 space) lies 8 times under its cap, or more
    draws = [(name, {}) for name in FAMILIES] + [("cifar10", {"space": "macro"})]
    for name, steering in draws:
        for seed in range(50):
            drawn = RANDOM_KNOBS[name](np.random.default_rng(seed), **steering)
            for family, fixed, knob, constant in CAPS:
                if family == name and knob in drawn and fixed.items() <= drawn.items():
                    assert drawn[knob] * 8 <= _cap(constant)


# ---------------------------------------------------------------------------------- caps of what the knobs build together
def _estimate(name: str, knobs: dict[str, Any]) -> Any:
    estimate = {"cifar10": cifar10, "ptb": ptb, "nmt": nmt}[name].estimate_size
    accepted = inspect.signature(estimate).parameters  # once a call: per knob, it was most of 40,000 estimates' time
    return estimate(**{k: v for k, v in knobs.items() if k in accepted})


@pytest.mark.heavy
def test_the_size_caps_are_8_times_above_10000_random_draws_of_each_family() -> None:
    """The bounds of the families' knob draws, as MAX_GRAPH_OPS and MAX_PARAM_BYTES document them."""
    largest = {}
    for name, steering in [("cifar10", {}), ("cifar10", {"space": "macro"}), ("ptb", {}), ("nmt", {})]:
        sizes = [_estimate(name, RANDOM_KNOBS[name](np.random.default_rng(seed), **steering)) for seed in range(10_000)]
        largest[name + steering.get("space", "")] = (max(s.ops for s in sizes), max(s.param_bytes for s in sizes))
    assert largest == {"cifar10": (9960, 73291624), "cifar10macro": (1544, 289630120), "ptb": (6304, 87327744),
                       "nmt": (6072, 704626688)}
    assert max(ops for ops, _ in largest.values()) * 8 <= MAX_GRAPH_OPS
    assert max(param_bytes for _, param_bytes in largest.values()) * 8 <= MAX_PARAM_BYTES


def test_each_knob_at_its_own_cap_fits_the_size_caps_but_micro_layers() -> None:
    """Only the product of knobs is refused; micro layers alone stop at 3,223 with the default 5 blocks."""
    for name, fixed, knob, constant in CAPS:
        if knob == "batch":
            continue
        size = _estimate(name, dict(fixed, **{knob: _cap(constant)}))
        fits = size.ops <= MAX_GRAPH_OPS and size.param_bytes <= MAX_PARAM_BYTES
        assert fits == (constant != "cifar10.MAX_LAYERS"), constant
    assert _estimate("cifar10", {"layers": 3_223}).ops <= MAX_GRAPH_OPS < _estimate("cifar10", {"layers": 3_224}).ops


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_sampler_refuses_what_its_knobs_build_together_in_one_line(name: str) -> None:
    """Each knob under its cap, together past the op cap: this ran for days (cifar10, nmt) or ended out of memory."""
    together = {"cifar10": {"layers": 10_000, "num_blocks": 64}, "ptb": {"steps": 1000, "num_nodes": 1000},
                "nmt": {"layers": 64, "src_steps": 1000, "tgt_steps": 1000}}[name]
    for call in (lambda: FAMILIES[name](0, **dict(TINY[name], **together)),
                 lambda: draw(name, seed=0, **dict(TINY[name], **together))):
        with pytest.raises(InvalidArgument, match=r"past the cap of 1,000,000 \(gnplace\.families\.MAX_GRAPH_OPS\)") as info:
            call()
        assert "\n" not in str(info.value)


@pytest.mark.parametrize(("name", "knobs"), [("cifar10", {"space": "micro"}), ("cifar10", {"space": "macro"}),
                                             ("ptb", {}), ("nmt", {})])
def test_the_loss_reads_the_labels_on_the_logits_device(name: str, knobs: dict[str, Any]) -> None:
    """accelerate's ``dispatch_model`` puts every input on its main device, where the root's loss read the labels
    beside a head's logits on another GPU: each family moves them to the logits' device, as transformers' losses do
    (a model on "meta" here, its labels left on the CPU; the import records no op for it, the datasets are unchanged)."""
    model, inputs = draw(name, seed=0, **TINY[name], **knobs)
    model.to("meta")
    loss = model(*[x.to("meta") for x in inputs[:-1]], inputs[-1])
    assert loss.device.type == "meta" and loss.dim() == 0


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_sample_is_float32_and_the_same_whatever_the_default_dtype(name: str) -> None:
    model, inputs = FAMILIES[name](5, **TINY[name])
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # a caller's: the modules were built in float64, other graphs
    try:
        again, again_inputs = FAMILIES[name](5, **TINY[name])
        assert torch.get_default_dtype() == torch.float64  # the caller's, back
    finally:
        torch.set_default_dtype(before)
    assert {p.dtype for p in again.parameters()} == {torch.float32}
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    assert all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(inputs, again_inputs))


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_sample_drawn_in_inference_mode_is_a_trainable_module(name: str) -> None:
    with torch.inference_mode():
        model, inputs = FAMILIES[name](5, **TINY[name])
    assert not any(p.is_inference() for p in model.parameters())  # were inference tensors: no step could train them
    assert not any(x.is_inference() for x in inputs)
    model(*inputs).backward()
