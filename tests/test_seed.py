"""Tests of ``gnplace.seed``: numpy generators from seeds, and seeded torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from gnplace.exceptions import InvalidArgument
from gnplace.seed import as_generator, seeded_torch, torch_generator, torch_seed


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
    with pytest.raises(InvalidArgument, match=r"seed must be an int, a numpy Generator or None, got "):
        as_generator(seed)


def test_a_negative_seed_is_a_clear_error():
    from gnplace.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match="seed must be >= 0, got -1"):
        as_generator(-1)


def test_importing_gnplace_seed_does_not_import_torch():
    code = "import sys, gnplace.seed; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------------------- torch_seed
def test_torch_seed_uses_an_int_as_is():
    assert torch_seed(0) == 0 and torch_seed(np.int64(12)) == 12
    assert isinstance(torch_seed(np.int64(12)), int)


def test_torch_seed_takes_one_draw_from_a_generator():
    rng, twin = np.random.default_rng(4), np.random.default_rng(4)
    assert torch_seed(rng) == int(twin.integers(2**31))
    assert rng.random() == twin.random()  # both advanced by exactly one draw


@pytest.mark.parametrize("seed", [1.5, "3", True])
def test_torch_seed_rejects_bad_seeds(seed):
    with pytest.raises(InvalidArgument, match=r"seed must be an int, a numpy Generator or None, got "):
        torch_seed(seed)


# ---------------------------------------------------------------------------------- torch_generator
def test_torch_generator_same_seed_same_draws():
    a = torch.randn(5, generator=torch_generator(0))
    b = torch.randn(5, generator=torch_generator(0))
    c = torch.randn(5, generator=torch_generator(1))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_torch_generator_matches_a_manually_seeded_generator():
    expected = torch.randint(0, 100, (8,), generator=torch.Generator().manual_seed(0))
    assert torch.equal(torch.randint(0, 100, (8,), generator=torch_generator(0)), expected)


def test_torch_generator_leaves_the_global_generator_alone():
    before = torch.get_rng_state()
    torch.rand(10, generator=torch_generator(3))
    assert torch.equal(torch.get_rng_state(), before)


# ---------------------------------------------------------------------------------- seeded_torch
def test_seeded_torch_is_deterministic_in_the_rng_state():
    with seeded_torch(np.random.default_rng(0)) as seed_a:
        a = torch.randn(5)
        layer_a = torch.nn.Linear(3, 2).weight.detach().clone()
    with seeded_torch(np.random.default_rng(0)) as seed_b:
        b = torch.randn(5)
        layer_b = torch.nn.Linear(3, 2).weight.detach().clone()
    with seeded_torch(np.random.default_rng(1)) as seed_c:
        c = torch.randn(5)
    assert seed_a == seed_b != seed_c
    assert torch.equal(a, b) and torch.equal(layer_a, layer_b)
    assert not torch.equal(a, c)


def test_seeded_torch_with_an_int_draws_as_after_manual_seed():
    torch.manual_seed(0)
    expected = torch.randn(5)
    with seeded_torch(0) as seed:
        assert seed == 0
        assert torch.equal(torch.randn(5), expected)


def test_seeded_torch_yields_the_seed_it_set():
    expected = int(np.random.default_rng(7).integers(2**31))
    with seeded_torch(np.random.default_rng(7)) as seed:
        assert seed == expected and isinstance(seed, int)
        assert torch.initial_seed() == seed


def test_seeded_torch_advances_the_numpy_generator_by_one_draw():
    rng, twin = np.random.default_rng(4), np.random.default_rng(4)
    with seeded_torch(rng) as first:
        pass
    with seeded_torch(rng) as second:
        pass
    assert first != second
    twin.integers(2**31)
    assert int(twin.integers(2**31)) == second


@pytest.mark.parametrize("seed", [0, np.random.default_rng(0)], ids=["int", "generator"])
def test_seeded_torch_leaves_the_global_torch_state_as_it_was(seed):
    torch.manual_seed(123)
    before = torch.get_rng_state()
    with seeded_torch(seed):
        torch.rand(1000)
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.initial_seed() == 123
    after = torch.rand(3)
    torch.manual_seed(123)
    assert torch.equal(after, torch.rand(3))


def test_seeded_torch_restores_the_state_when_the_body_raises():
    before = torch.get_rng_state()
    with pytest.raises(RuntimeError, match="boom"), seeded_torch(np.random.default_rng(0)):
        torch.rand(10)
        raise RuntimeError("boom")
    assert torch.equal(torch.get_rng_state(), before)


def test_seeded_torch_rejects_a_bad_seed_before_touching_torch():
    before = torch.get_rng_state()
    with pytest.raises(InvalidArgument, match=r"seed must be an int"), seeded_torch(2.5):  # type: ignore[arg-type]
        pass
    assert torch.equal(torch.get_rng_state(), before)


def test_threads_in_seeded_torch_take_turns():
    """torch's global generator is the process's: a second thread seeding it inside the first's body changed the
    first's draws (a comparator placer in threads trained other weights than alone)."""
    import threading

    with seeded_torch(1):
        expected = torch.rand(2)
    entered, drawn = threading.Event(), []

    def first():
        with seeded_torch(1):
            drawn.append(torch.rand(1))
            entered.set()
            second_in.wait(0.5)  # (with turns, the second thread waits for this one: no signal comes)
            drawn.append(torch.rand(1))

    def second():
        entered.wait()
        with seeded_torch(2):
            second_in.set()
            torch.rand(5)

    second_in = threading.Event()
    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert torch.equal(torch.cat(drawn), expected)


@pytest.mark.parametrize("body", ["seeded_torch", "torch_rng_kept"])
def test_the_global_generators_lock_is_held_in_the_body_and_free_after_it(body):
    """Another thread cannot take the lock while a body runs (its seeding or restoring would interleave with this
    one's draws), whatever the timing of the threads."""
    import threading

    from gnplace import seed

    def another_thread_takes_it() -> bool:
        taken = []

        def take():
            taken.append(seed.global_generators_lock().acquire(blocking=False))
            if taken[0]:
                seed.global_generators_lock().release()

        thread = threading.Thread(target=take)
        thread.start()
        thread.join()
        return taken[0]

    with getattr(seed, body)():
        assert not another_thread_takes_it()
    assert another_thread_takes_it()


def test_seeded_torch_seeds_the_cpu_generator_alone(monkeypatch):
    """Only the CPU generator is seeded, and restored: a CUDA generator seeded in the body would stay so after it."""
    seeded = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", seeded.append)
    monkeypatch.setattr(torch.cuda, "manual_seed", seeded.append)
    with seeded_torch(3):
        drawn = torch.rand(2)
    assert seeded == [] and torch.equal(drawn, torch.rand(2, generator=torch.Generator().manual_seed(3)))
