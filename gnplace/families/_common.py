"""Helpers shared by the family samplers: checking knobs, drawing sizes.

Every sampler draws its architecture from a ``numpy.random.Generator`` first and then builds the
module (and its example inputs) inside :func:`seeded_float32` ``(rng)``: torch's global
generator seeded from one draw of the same ``rng`` and restored afterwards, so that one ``rng``
state gives one module, weights included, and the caller's torch random state is left untouched;
and torch's default dtype float32 meanwhile, whatever the caller set it to.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from gnplace.exceptions import InvalidArgument, UnknownName
from gnplace.limits import is_number, is_whole
from gnplace.seed import SeedLike, seeded_torch

__all__ = ["check_int", "check_probability", "check_bool", "check_choice", "log_uniform_int", "SizeEstimate",
           "check_size", "seeded_float32", "MAX_GRAPH_OPS", "MAX_PARAM_BYTES"]

# Caps of what the knobs build together. Each knob has its own cap, but a graph grows with their product (cifar10's
# layers x blocks, ptb's steps x nodes, nmt's layers x steps; parameters with hidden^2 x nodes or layers): every knob
# at its cap would build for days or allocate terabytes. A family's ``estimate_size`` bounds both from the knobs
# alone, before anything is drawn or built, and ``sample`` refuses past these caps.
#: Most ops (forward, backward and update nodes of the imported training graph, as bounded by ``estimate_size``):
#: about 40 minutes of importing. The largest bound of 10,000 ``random_knobs`` draws of each family is 9,960 ops
#: (cifar10 micro; macro 1,544, ptb 6,304, nmt 6,072), 100 times under it; the benchmarks' 100,000-op cifar10 graph
#: (840 micro layers) is bounded by 261,060. Micro nets of 5 blocks stop at 3,223 layers.
MAX_GRAPH_OPS = 1_000_000
#: Most bytes of float32 parameters (as bounded by ``estimate_size``), which ``sample`` allocates. The largest bound of
#: 10,000 ``random_knobs`` draws of each family is 0.70 GB (nmt; cifar10 macro 0.29 GB, micro 0.07 GB, ptb 0.09 GB),
#: 24 times under it. Each knob at its own cap, the others at their defaults, stays under it (nmt's 8,192 units:
#: 15.4 GB).
MAX_PARAM_BYTES = 16 * 2**30


@dataclass(frozen=True)
class SizeEstimate:
    """Upper bounds on what a family's knobs build, computed from the knobs alone.

    Attributes:
        ops (int): ops of the imported training graph (``from_module(...).num_ops``: inputs, forward, backward and
            one update per parameter), for the heaviest architecture the knobs allow.
        param_bytes (int): bytes of the module's float32 parameters, for the largest architecture the knobs allow.
    """

    ops: int
    param_bytes: int


def check_size(family: str, knobs: Mapping[str, object], size: SizeEstimate) -> SizeEstimate:
    """``size``, or one :class:`~gnplace.exceptions.InvalidArgument` line if it is past a cap.

    Args:
        family (str): the family's name, for the message.
        knobs (Mapping[str, object]): the knobs the size grows with, named in the message as the ones to lower.
        size (SizeEstimate): the family's estimate for those knobs.

    Returns:
        SizeEstimate: ``size``.

    Raises:
        InvalidArgument: if ``size.ops`` exceeds :data:`MAX_GRAPH_OPS` or ``size.param_bytes`` exceeds
            :data:`MAX_PARAM_BYTES`.

    Examples:
        >>> check_size("ptb", {"steps": 10}, SizeEstimate(ops=2_000_000, param_bytes=0))
        Traceback (most recent call last):
        ...
        gnplace.exceptions.InvalidArgument: ptb knobs steps=10 would build a training graph of up to 2,000,000 ops, \
past the cap of 1,000,000 (gnplace.families.MAX_GRAPH_OPS): lower them
    """
    named = ", ".join(f"{k}={v}" for k, v in knobs.items())
    if size.ops > MAX_GRAPH_OPS:
        raise InvalidArgument(f"{family} knobs {named} would build a training graph of up to {size.ops:,} ops, past "
                              f"the cap of {MAX_GRAPH_OPS:,} (gnplace.families.MAX_GRAPH_OPS): lower them")
    if size.param_bytes > MAX_PARAM_BYTES:
        raise InvalidArgument(f"{family} knobs {named} would build up to {size.param_bytes:,} bytes of parameters, "
                              f"past the cap of {MAX_PARAM_BYTES:,} (gnplace.families.MAX_PARAM_BYTES): lower them")
    return size


def check_int(name: str, value: int, low: int, high: int | None = None, *, cap: str | None = None) -> int:
    """``value`` as an int, or :class:`~gnplace.exceptions.InvalidArgument` naming the knob if not in ``[low, high]``.

    Args:
        name (str): the knob's name, for the message.
        value (int): the value given.
        low (int): smallest allowed value.
        high (int, optional): largest allowed value; ``None`` for no bound. (default: :obj:`None`)
        cap (str, optional): the constant ``high`` is (``"cifar10.MAX_LAYERS"``): a value above ``high`` is then
            refused as past that cap, and the other messages give the lower bound alone. (default: :obj:`None`)

    Returns:
        int: ``value`` converted to a Python int.

    Raises:
        InvalidArgument: if ``value`` is not an integer, or lies outside the range.

    Examples:
        >>> check_int("layers", 3, 1)
        3
        >>> check_int("layers", 20_000, 1, 10_000, cap="cifar10.MAX_LAYERS")
        Traceback (most recent call last):
        ...
        gnplace.exceptions.InvalidArgument: knob 'layers' must be at most 10,000 (cifar10.MAX_LAYERS), got 20000
    """
    bound = f">= {low}" if high is None or cap is not None else f"in [{low}, {high}]"
    if not is_whole(value):
        raise InvalidArgument(f"knob {name!r} must be an integer {bound}, got {value!r}")
    if cap is not None and high is not None and value > high:
        raise InvalidArgument(f"knob {name!r} must be at most {high:,} ({cap}), got {value}")
    if value < low or (high is not None and value > high):
        raise InvalidArgument(f"knob {name!r} must be {bound}, got {value}")
    return int(value)


def check_probability(name: str, value: float) -> float:
    """``value`` as a float, or an error naming the knob if it is not a number in ``[0, 1]``.

    Args:
        name (str): the knob's name, for the message.
        value (float): the value given.

    Returns:
        float: ``value`` converted to a Python float.

    Raises:
        InvalidArgument: if ``value`` is not a real number (a bool is not), lies outside ``[0, 1]`` or is NaN.

    Examples:
        >>> check_probability("dropout", 0.1)
        0.1
    """
    if not is_number(value):
        raise InvalidArgument(f"knob {name!r} must be a probability (a number in [0, 1]), got {value!r}")
    if not 0.0 <= value <= 1.0:  # NaN fails both comparisons
        raise InvalidArgument(f"knob {name!r} must be in [0, 1], got {value}")
    return float(value)


def check_bool(name: str, value: bool) -> bool:
    """``value`` as a bool, or :class:`~gnplace.exceptions.InvalidArgument` naming the knob if it is not a bool.

    Args:
        name (str): the knob's name, for the message.
        value (bool): the value given (a Python or numpy bool).

    Returns:
        bool: ``value`` as a Python bool.

    Raises:
        InvalidArgument: if ``value`` is not a bool (``"False"`` would otherwise read as true).

    Examples:
        >>> check_bool("bidirectional", True)
        True
    """
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidArgument(f"knob {name!r} must be True or False, got {value!r}")
    return bool(value)


def check_choice(kind: str, value: str, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``, else :class:`~gnplace.exceptions.UnknownName`.

    Args:
        kind (str): what the name designates (``"search space"``, ``"attention"``), for the message.
        value (str): the name given.
        choices (Sequence[str]): the names allowed.

    Returns:
        str: ``value``.

    Raises:
        UnknownName: if ``value`` is not a string among ``choices``; the message lists them.

    Examples:
        >>> check_choice("space", "micro", ("micro", "macro"))
        'micro'
    """
    # a non-string is refused before ``in``: a numpy array compared with each choice has no truth value
    if not isinstance(value, str) or value not in choices:
        raise UnknownName(f"unknown {kind} {value!r} (choose one of: {', '.join(choices)})")
    return value


def log_uniform_int(rng: np.random.Generator, low: int, high: int, multiple: int = 1) -> int:
    """An integer in ``[low, high]`` drawn log-uniformly, rounded to a multiple of ``multiple``.

    Args:
        rng (numpy.random.Generator): the generator (one draw).
        low (int): smallest value, a multiple of ``multiple``.
        high (int): largest value, a multiple of ``multiple``.
        multiple (int, optional): granularity of the result. (default: :obj:`1`)

    Returns:
        int: the value.

    Examples:
        >>> import numpy as np
        >>> 16 <= log_uniform_int(np.random.default_rng(0), 16, 512, multiple=16) <= 512
        True
    """
    value = float(np.exp(rng.uniform(np.log(low), np.log(high))))
    return int(min(high, max(low, multiple * round(value / multiple))))


@contextmanager
def seeded_float32(seed: SeedLike) -> Iterator[int]:
    """:func:`gnplace.seed.seeded_torch` ``(seed)``, with torch's default dtype float32 while the body runs.

    A sampler builds its module and inputs in the body: the documented float32 weights and images, and the same
    graph for the same seed whatever the caller's default dtype. After ``torch.set_default_dtype(torch.float64)``
    the modules were built in float64, and the datasets drawn with the shipped seed were other files (parameters
    and activations of 8 bytes). The caller's default dtype is back after the body (an exception too).

    The body runs outside inference mode too: a module built under the caller's ``torch.inference_mode()`` had
    inference tensors for parameters, which no training step can use (``generate_graph`` there was an
    UnsupportedGraph, "Setting requires_grad=True on inference tensor").

    Args:
        seed (int, numpy.random.Generator or None): the seed, as for :func:`gnplace.seed.seeded_torch`.

    Yields:
        int: the torch seed used.

    Examples:
        >>> import torch
        >>> with seeded_float32(0):
        ...     torch.rand(1).dtype
        torch.float32
    """
    import torch

    with seeded_torch(seed) as value, torch.inference_mode(False):
        before = torch.get_default_dtype()
        torch.set_default_dtype(torch.float32)
        try:
            yield value
        finally:
            torch.set_default_dtype(before)
