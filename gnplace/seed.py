"""One place that turns a ``seed`` argument into a random generator, numpy's or torch's.

torch is imported inside the torch helpers only, so ``import gnplace.seed`` stays light.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from gnplace.limits import is_whole

if TYPE_CHECKING:
    import torch

__all__ = ["SeedLike", "as_generator", "check_seed", "global_generators_lock", "seeded_torch", "torch_generator",
           "torch_rng_kept", "torch_seed"]

#: seed (int, np.random.Generator or None): what every stochastic function of gnplace accepts.
SeedLike = int | np.random.Generator | None


def as_generator(seed: SeedLike = None) -> np.random.Generator:
    """A ``numpy.random.Generator`` from an int seed, an existing generator (returned as is) or None.

    Raises:
        InvalidArgument: if ``seed`` is none of these (a float, a string: one line, as every bad input), or a
            negative int (numpy seeds are non-negative).

    Examples:
        >>> bool(as_generator(3).integers(100) == as_generator(3).integers(100))
        True
    """
    if isinstance(seed, np.random.Generator):
        return seed
    check_seed(seed)
    return np.random.default_rng(seed)


def check_seed(seed: SeedLike) -> None:
    """Refuse what :func:`as_generator` refuses, for a placer that draws nothing from its seed.

    A deterministic placer took ``seed="abc"`` or ``-1`` without a word, where every stochastic one
    refused it: the same call now fails alike whichever placer it names.

    Raises:
        InvalidArgument: if ``seed`` is not an int >= 0, a numpy Generator or None.
    """
    if seed is None or isinstance(seed, np.random.Generator):
        return
    from gnplace.exceptions import InvalidArgument

    if not is_whole(seed):
        raise InvalidArgument(f"seed must be an int, a numpy Generator or None, got {seed!r}")
    if seed < 0:
        raise InvalidArgument(f"seed must be >= 0, got {seed}")


def torch_seed(seed: SeedLike = None) -> int:
    """The int that seeds torch for ``seed``: an int as is, else one draw from its numpy generator.

    Args:
        seed (int, numpy.random.Generator or None): an int is used as the torch seed itself; a
            generator gives one draw in ``[0, 2**31)`` (and so advances by one draw); ``None`` a fresh
            seed. (default: :obj:`None`)

    Returns:
        int: the torch seed.

    Raises:
        InvalidArgument: if ``seed`` is none of these.

    Examples:
        >>> torch_seed(5)
        5
        >>> torch_seed(np.random.default_rng(0)) == torch_seed(np.random.default_rng(0))
        True
    """
    if is_whole(seed):
        return int(seed)
    return int(as_generator(seed).integers(2**31))


def torch_generator(seed: SeedLike = None) -> torch.Generator:
    """A new CPU ``torch.Generator`` seeded with :func:`torch_seed` of ``seed``; the global one is untouched.

    Args:
        seed (int, numpy.random.Generator or None): the seed, as for :func:`torch_seed`. (default: :obj:`None`)

    Returns:
        torch.Generator: the generator, to pass as ``generator=`` to torch's sampling functions.

    Raises:
        InvalidArgument: if ``seed`` is not an int, a numpy generator or None.

    Examples:
        >>> import torch
        >>> bool((torch.rand(3, generator=torch_generator(0)) == torch.rand(3, generator=torch_generator(0))).all())
        True
    """
    import torch

    return torch.Generator().manual_seed(torch_seed(seed))


#: Held while a thread runs the body of :func:`seeded_torch` (torch's global CPU generator is the process's).
_GLOBAL_GENERATOR = threading.RLock()


def global_generators_lock() -> threading.RLock:
    """The lock that :func:`seeded_torch` and :func:`torch_rng_kept` hold while they run their body.

    Other code that saves and restores the process's generators (Lightning's ``isolate_rng``) holds it too, so
    that it never saves one body's seeded state and restores it after that body has ended.
    """
    return _GLOBAL_GENERATOR


@contextmanager
def seeded_torch(seed: SeedLike = None) -> Iterator[int]:
    """Run the body with torch's global CPU generator seeded; restore its previous state afterwards.

    Inside the body, ``torch.rand``, module initialisation and the like draw as after
    ``torch.manual_seed(torch_seed(seed))``; on exit (normal or by an exception) the CPU generator is
    back where it was, so the caller's random stream does not depend on what the body drew. Only the
    CPU generator is seeded and restored (what the family samplers and real models build on); CUDA
    and other accelerator generators are left alone. The generator is one per process, so threads in
    the body take turns (two threads' bodies drew from one stream, each seeded and restored by the
    other: a comparator placer in threads trained other weights than alone).

    Args:
        seed (int, numpy.random.Generator or None): the seed, as for :func:`torch_seed` (a numpy
            generator advances by one draw). (default: :obj:`None`)

    Yields:
        int: the torch seed used.

    Raises:
        InvalidArgument: if ``seed`` is not an int, a numpy generator or None.

    Examples:
        >>> import torch
        >>> with seeded_torch(np.random.default_rng(0)):
        ...     a = torch.rand(2)
        >>> with seeded_torch(np.random.default_rng(0)):
        ...     b = torch.rand(2)
        >>> bool((a == b).all())
        True
    """
    import torch

    value = torch_seed(seed)
    with _GLOBAL_GENERATOR, torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(value)
        yield value


@contextmanager
def torch_rng_kept(devices: Iterable[torch.device | str] = ()) -> Iterator[None]:
    """Run the body; torch's global generators (the CPU's, the CUDA ``devices``') are as they were after it.

    For code that runs the user's model only to time it (the timers' steps, a calibration's op timings): a model's
    random ops (dropout) drew from the caller's generators, so that how many steps were timed moved the caller's
    random stream. Threads take turns in the body, as in :func:`seeded_torch` (the generators are the process's).

    Args:
        devices (iterable of torch.device or str): the devices the body runs on; only CUDA ones matter
            (default: none, the CPU's generator alone).

    Examples:
        >>> import torch
        >>> state = torch.random.get_rng_state()
        >>> with torch_rng_kept():
        ...     _ = torch.rand(3)
        >>> bool(torch.equal(torch.random.get_rng_state(), state))
        True
    """
    import torch

    cuda = sorted({torch.cuda.current_device() if d.index is None else d.index
                   for d in map(torch.device, devices) if d.type == "cuda"})
    with _GLOBAL_GENERATOR, torch.random.fork_rng(devices=cuda):
        yield
