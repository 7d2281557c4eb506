"""Graph families: random training models of the ENAS and NMT search spaces, as plain PyTorch modules.

Placeto (Addanki et al., 2019) trained and tested its placer on three families of training
graphs; gnplace regenerates them from the facts in ``docs/families.md``:

========  ==========================================================  ======================
name      what one sample is                                          inputs
========  ==========================================================  ======================
cifar10   an ENAS CNN (micro cells, or the macro space) on CIFAR-10   images, labels
ptb       an ENAS recurrent cell unrolled into a language model       tokens, targets
nmt       an LSTM encoder-decoder with attention (tensorflow/nmt)     source, target in, out
========  ==========================================================  ======================

Each family module has ``sample(rng, **knobs) -> (module, example_inputs)`` (``module(*inputs)`` is the scalar
training loss) and ``random_knobs(rng) -> dict`` (knobs spanning training graphs of about 150 to 6,400 aten
ops; the datasets redraw those outside 200 to 5,000). ``rng`` is a seed as everywhere in gnplace (an int, a
``numpy.random.Generator`` or None; an int ``s`` samples as ``numpy.random.default_rng(s)``), and each size
knob has a cap, a ``MAX_*`` constant of its module far above every real use; since a graph grows with the
product of its knobs, each module's ``estimate_size(**knobs)`` also bounds the ops of the training graph and
the parameter bytes before anything is built, and ``sample`` refuses knobs past :data:`MAX_GRAPH_OPS`
(1,000,000 ops) or :data:`MAX_PARAM_BYTES` (16 GiB). Sampling is
deterministic: the same ``rng`` state gives the same architecture, weights and inputs. To trace
without computing, build under fake tensors::

    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        model, inputs = draw("ptb", seed=0)

The package also holds :mod:`gnplace.families.realmodels`: fixed real architectures (GPT-2,
BERT-base, T5-small, ViT-Base/16, ResNet-50) built from transformers configs, whose graphs ship in
``datasets/real/``. They are not in :data:`FAMILIES`: a real model has no knobs and no random draw
(``build_model(name)`` instead of ``sample(rng, **knobs)``), and building one needs the optional
``transformers``; import the module itself to use it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from torch import Tensor, nn

from gnplace.exceptions import UnknownName
from gnplace.families import cifar10, nmt, ptb
from gnplace.families._common import MAX_GRAPH_OPS, MAX_PARAM_BYTES, SizeEstimate
from gnplace.seed import SeedLike, as_generator

__all__ = ["FAMILIES", "RANDOM_KNOBS", "Sampler", "get_family", "random_knobs", "draw", "MAX_GRAPH_OPS",
           "MAX_PARAM_BYTES", "SizeEstimate"]

#: ``sample(rng, **knobs) -> (module, example_inputs)``, ``rng`` an int, a numpy generator or None.
Sampler = Callable[..., tuple[nn.Module, tuple[Tensor, ...]]]

#: The samplers by family name.
FAMILIES: dict[str, Sampler] = {"cifar10": cifar10.sample, "ptb": ptb.sample, "nmt": nmt.sample}

#: The knob samplers by family name.
RANDOM_KNOBS: dict[str, Callable[[SeedLike], dict[str, Any]]] = {
    "cifar10": cifar10.random_knobs,
    "ptb": ptb.random_knobs,
    "nmt": nmt.random_knobs,
}


def _check_name(name: str) -> None:
    """Raise :class:`UnknownName` if ``name`` is not a family."""
    if not isinstance(name, str) or name not in FAMILIES:  # (a list: "unhashable type", a TypeError)
        raise UnknownName(f"unknown family {name!r} (choose one of: {', '.join(sorted(FAMILIES))})")


def get_family(name: str) -> Sampler:
    """The sampler of family ``name``.

    Args:
        name (str): one of :data:`FAMILIES`.

    Returns:
        Sampler: ``sample(rng, **knobs) -> (module, example_inputs)``.

    Raises:
        UnknownName: if ``name`` is not a family; the message lists the choices.

    Examples:
        >>> get_family("ptb").__module__
        'gnplace.families.ptb'
    """
    _check_name(name)
    return FAMILIES[name]


def random_knobs(name: str, rng: SeedLike) -> dict[str, Any]:
    """Draw knobs of family ``name`` spanning small to large training graphs.

    Args:
        name (str): one of :data:`FAMILIES`.
        rng (int, numpy.random.Generator or None): the generator, or a seed of one.

    Returns:
        dict[str, Any]: keyword arguments of the family's ``sample``.

    Raises:
        UnknownName: if ``name`` is not a family.

    Examples:
        >>> sorted(random_knobs("ptb", 0))  # a seed, or a numpy Generator
        ['batch', 'hidden', 'num_nodes', 'steps', 'vocab']
    """
    _check_name(name)
    return RANDOM_KNOBS[name](rng)


def draw(name: str, seed: SeedLike = None, **knobs: Any) -> tuple[nn.Module, tuple[Tensor, ...]]:
    """Draw one member of family ``name``: random knobs (those given override them), then a sample.

    A given knob that the family's knob sampler also takes (cifar10's ``space``) steers the draw:
    ``draw("cifar10", space="macro")`` draws the macro space's layers and channels.

    Args:
        name (str): one of :data:`FAMILIES`.
        seed (int, numpy.random.Generator or None): the seed; ``None`` for a fresh one. (default: :obj:`None`)
        **knobs: knobs fixed instead of drawn (keyword arguments of the family's ``sample``).

    Returns:
        tuple[nn.Module, tuple[Tensor, ...]]: the module (``forward`` returns the scalar loss) and
        its example inputs.

    Raises:
        UnknownName: if ``name`` is not a family, or a knob is not one of its ``sample``'s (the message
            lists them).

    Examples:
        >>> model, inputs = draw("ptb", seed=0, hidden=8, vocab=20, batch=2)
        >>> model(*inputs).dim()
        0
    """
    rng = as_generator(seed)
    _check_name(name)
    known = list(inspect.signature(FAMILIES[name]).parameters)[1:]
    unknown = sorted(set(knobs) - set(known))
    if unknown:  # a misspelt knob was Python's own "unexpected keyword argument"
        raise UnknownName(f"family {name!r} has no knob {', '.join(map(repr, unknown))} (its knobs: "
                          f"{', '.join(known)})")
    # a fixed knob that steers the knob draw itself (cifar10's space) goes to the knob sampler too
    steering = {k: knobs[k] for k in list(inspect.signature(RANDOM_KNOBS[name]).parameters)[1:] if k in knobs}
    drawn = RANDOM_KNOBS[name](rng, **steering)
    drawn.update(knobs)
    return FAMILIES[name](rng, **drawn)
