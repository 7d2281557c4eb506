"""Tests of the cifar10 family (ENAS micro and macro CNNs)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from gnplace.exceptions import InvalidArgument, UnknownName
from gnplace.families import cifar10
from gnplace.families.cifar10 import (
    Cell,
    FactorizedReduction,
    MacroArch,
    MacroNet,
    MicroArch,
    MicroNet,
    SepConv,
    estimate_size,
    random_knobs,
    sample,
    sample_macro_arch,
    sample_micro_arch,
)

TINY: dict[str, Any] = {"layers": 1, "channels": 4, "batch": 2}


def _num_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("space", ["micro", "macro"])
def test_sampling_is_deterministic_under_a_seed(space: str) -> None:
    knobs = dict(TINY, layers=3, space=space)
    m1, x1 = sample(np.random.default_rng(5), **knobs)
    m2, x2 = sample(np.random.default_rng(5), **knobs)
    assert m1.arch == m2.arch
    assert repr(m1) == repr(m2)
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert s1.keys() == s2.keys()
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert all(torch.equal(a, b) for a, b in zip(x1, x2))


def test_different_seeds_give_different_architectures() -> None:
    micro = {sample_micro_arch(np.random.default_rng(s)) for s in range(5)}
    macro = {sample_macro_arch(np.random.default_rng(s), 8) for s in range(5)}
    assert len(micro) == 5 and len(macro) == 5
    m0, _ = sample(np.random.default_rng(0), **TINY)
    m1, _ = sample(np.random.default_rng(1), **TINY)
    assert m0.arch != m1.arch


def test_sampled_architectures_follow_the_enas_rules() -> None:
    arch = sample_micro_arch(np.random.default_rng(0), num_blocks=5)
    for cell in (arch.normal, arch.reduce):
        assert len(cell) == 5
        for j, (x_id, x_op, y_id, y_op) in enumerate(cell):
            assert 0 <= x_id < j + 2 and 0 <= y_id < j + 2
            assert 0 <= x_op < len(cifar10.MICRO_OPS) and 0 <= y_op < len(cifar10.MICRO_OPS)
    macro = sample_macro_arch(np.random.default_rng(0), 30, skip_prob=0.4)
    assert all(all(j < i for j in skips) for i, skips in enumerate(macro.skips))
    density = sum(len(s) for s in macro.skips) / sum(range(30))
    assert 0.25 < density < 0.55


@pytest.mark.parametrize("space,seed", [("micro", 0), ("micro", 1), ("macro", 0), ("macro", 1)])
def test_loss_is_a_finite_scalar_and_every_parameter_gets_a_gradient(space: str, seed: int) -> None:
    model, (images, labels) = sample(np.random.default_rng(seed), **dict(TINY, layers=3, space=space))
    assert images.shape == (2, 3, 32, 32) and images.dtype == torch.float32
    assert labels.shape == (2,) and labels.dtype == torch.int64
    assert model.training
    loss = model(images, labels)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None]
    assert missing == []


def test_reduction_cells_sit_at_l_div_3_and_2_l_div_3_plus_1_and_double_channels() -> None:
    model, _ = sample(np.random.default_rng(0), layers=6, channels=4, batch=2)
    assert isinstance(model, MicroNet)
    kinds = {int(k): cell.reduction for k, cell in model.cells.items()}
    assert [i for i, red in kinds.items() if red] == [i for i in (2, 5) if i in kinds]
    widths = {int(k): cell.out_channels // len(cell.concat) for k, cell in model.cells.items()}
    assert all(w == 4 * 2 ** sum(i >= r for r in (2, 5)) for i, w in widths.items())


def test_output_of_the_cells_is_8x8_after_two_reductions() -> None:
    model, (images, _) = sample(np.random.default_rng(0), layers=3, channels=4, batch=2)
    seen: list[tuple[int, ...]] = []
    model.head.register_forward_hook(lambda mod, args, out: seen.append(tuple(args[0].shape)))
    model(images, torch.zeros(2, dtype=torch.int64))
    assert seen[0][2:] == (8, 8)


def test_cells_nobody_reads_are_left_out() -> None:
    # Every block reads input 0 only: cell i's output is read by cell i + 2, never by cell i + 1,
    # so the second-to-last cell is dead.
    blocks = ((0, 0, 0, 2), (2, 1, 0, 4))
    model = MicroNet(MicroArch(normal=blocks, reduce=blocks), layers=3, channels=4)
    assert model.live == (True, False, True, False, True)
    assert sorted(model.cells.keys()) == ["0", "2", "4"]
    loss = model(torch.randn(2, 3, 32, 32), torch.tensor([1, 2]))
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_parameter_counts_of_the_building_blocks() -> None:
    c, k = 6, 5
    assert _num_params(SepConv(c, k)) == 2 * (c * k * k + c * c + 2 * c)
    assert _num_params(FactorizedReduction(5, 7)) == 5 * 3 + 5 * 4 + 2 * 7
    cell = Cell(((0, 2, 1, 3), (2, 0, 0, 4)), c_pp=8, c_p=4, c_out=4, reduce_pp=False, reduction=False)
    # pre0: ReLU-1x1 conv(8 -> 4)-BN; pre1: identity; block 1: sep conv 3x3 on 4 channels.
    assert _num_params(cell) == (8 * 4 + 2 * 4) + 2 * (4 * 9 + 4 * 4 + 2 * 4)
    assert cell.concat == (3,) and cell.out_channels == 4


def test_parameter_count_of_a_hand_built_micro_net() -> None:
    identity = ((0, 4, 1, 4),)  # one block: identity(input 0) + identity(input 1)
    model = MicroNet(MicroArch(normal=identity, reduce=identity), layers=1, channels=4)
    stem = 3 * 12 * 9 + 2 * 12
    cell0 = 2 * (12 * 8 + 2 * 8) + 2 * (8 * 4 + 8 * 4 + 2 * 8)  # reduction: calibrate both, two FR(8)
    cell1 = (12 * 8 * 2 + 2 * 16) + (8 * 16 + 2 * 16) + 2 * (16 * 8 * 2 + 2 * 16)  # reduction after reduction
    cell2 = 8 * 8 * 2 + 2 * 16  # normal: FR of the older input, identities
    head = 16 * 10 + 10
    assert _num_params(model) == stem + cell0 + cell1 + cell2 + head


def test_macro_net_reduces_every_read_output_and_doubles_channels() -> None:
    arch = MacroArch(ops=(0, 1, 2, 3, 4, 5), skips=((), (0,), (), (0, 1), (), (2, 4)))
    model = MacroNet(arch, channels=4)
    assert model.pool_layers == (1, 3)
    assert sorted(model.pools["1"].keys()) == ["0", "1"]  # layer 0 is read by layer 3
    assert sorted(model.pools["3"].keys()) == ["2", "3"]  # layer 2 is read by layer 5
    assert model.head.linear.in_features == 16
    loss = model(torch.randn(2, 3, 32, 32), torch.tensor([0, 9]))
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("space", ["micro", "macro"])
def test_torch_export_succeeds(space: str) -> None:
    model, inputs = sample(np.random.default_rng(0), **dict(TINY, space=space))
    exported = torch.export.export(model, inputs)
    assert any(n.op == "call_function" for n in exported.graph.nodes)


def test_joint_training_graph_traces_under_fake_tensors(TupleLoss: type) -> None:  # noqa: N803
    from torch._functorch.aot_autograd import aot_export_module
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        model, inputs = sample(np.random.default_rng(0), **TINY)
    graph, signature = aot_export_module(TupleLoss(model), inputs, trace_joint=True, output_loss_index=0)
    assert len(signature.backward_signature.gradients_to_parameters) == len(list(model.parameters()))
    assert 200 < sum(n.op == "call_function" for n in graph.graph.nodes) < 5000


def test_bad_knobs_are_rejected() -> None:
    with pytest.raises(UnknownName, match="micro, macro"):
        sample(np.random.default_rng(0), space="nasnet")
    with pytest.raises(ValueError, match="channels"):
        sample(np.random.default_rng(0), channels=1)
    with pytest.raises(ValueError, match="layers"):
        sample(np.random.default_rng(0), layers=0)


@pytest.mark.parametrize("space", ["micro", "macro"])
def test_random_knobs_stay_in_their_ranges(space: str) -> None:
    rng = np.random.default_rng(0)
    draws = [random_knobs(rng, space=space) for _ in range(200)]
    layers = [d["layers"] for d in draws]
    channels = [d["channels"] for d in draws]
    assert all(d["space"] == space for d in draws)
    assert all(32 <= d["batch"] <= 160 and d["batch"] % 16 == 0 for d in draws)
    if space == "micro":
        assert min(layers) == 1 and max(layers) == 30
        assert all(8 <= c <= 48 and c % 2 == 0 for c in channels)
    else:
        assert min(layers) == 4 and max(layers) == 24
        assert all(16 <= c <= 96 for c in channels)


@pytest.mark.parametrize("space, channels", [("micro", (8, 48)), ("macro", (16, 96))])
def test_random_knobs_reach_both_ends_of_the_channels_and_batches(space: str, channels: tuple[int, int]) -> None:
    """Mutants never drawing a batch of 160, or 48 micro channels, passed the test above."""
    rng = np.random.default_rng(0)
    draws = [random_knobs(rng, space=space) for _ in range(3000)]
    assert {d["batch"] for d in draws} == set(range(32, 161, 16))
    assert (min(d["channels"] for d in draws), max(d["channels"] for d in draws)) == channels


@pytest.mark.parametrize(("knob", "value"), [
    ("skip_prob", "0.4"), ("skip_prob", True), ("skip_prob", float("nan")), ("skip_prob", 1.5), ("dropout", 1.5),
    ("dropout", -0.1), ("dropout", None),
])
def test_bad_probabilities_are_rejected_naming_the_knob(knob: str, value: Any) -> None:
    # skip_prob="0.4" was a numpy UFuncTypeError, nan silently meant no skips, dropout=1.5 failed inside torch;
    # then a TypeError or plain ValueError, not a GnplaceError
    with pytest.raises(InvalidArgument, match=f"^knob '{knob}' must be .*, got "):
        sample(np.random.default_rng(0), **dict(TINY, space="macro", **{knob: value}))


def test_probabilities_at_the_ends_are_accepted() -> None:
    model, _ = sample(np.random.default_rng(0), **dict(TINY, layers=3, space="macro", skip_prob=1, dropout=0.0))
    assert isinstance(model, MacroNet) and model.arch.skips == ((), (0,), (0, 1))


# ---------------------------------------------------------------------------------- size bound of the knobs
def _imported_ops(model: torch.nn.Module, batch: int = 2) -> int:
    from gnplace.importers.torch import from_module

    images, labels = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
    return from_module(model, (images, labels)).num_ops


def _params_bytes(model: torch.nn.Module) -> int:
    return sum(4 * p.numel() for p in model.parameters())


@pytest.mark.parametrize(("layers", "num_blocks"), [(1, 1), (3, 1), (1, 3), (4, 2)])
def test_the_micro_size_bound_holds_and_is_tight_on_the_heaviest_cells(layers: int, num_blocks: int) -> None:
    """Every op a 5x5 separable convolution reading a cell input: the architecture the bound assumes."""
    heaviest = tuple((0, 1, 1, 1) for _ in range(num_blocks))
    model = MicroNet(MicroArch(heaviest, heaviest), layers, 4)
    bound = cifar10.estimate_size(layers=layers, channels=4, num_blocks=num_blocks)
    assert 0.8 * bound.ops <= _imported_ops(model) <= bound.ops
    assert _params_bytes(model) <= bound.param_bytes


@pytest.mark.parametrize("layers", [1, 3, 6])
def test_the_macro_size_bound_holds_and_is_tight_when_every_skip_is_taken(layers: int) -> None:
    every_skip = tuple(tuple(range(i)) for i in range(layers))
    bound = cifar10.estimate_size(layers=layers, channels=4, space="macro")
    # the most ops: separable convolutions (op 3); the most parameters: 5x5 convolutions (op 1)
    assert 0.8 * bound.ops <= _imported_ops(MacroNet(MacroArch(ops=(3,) * layers, skips=every_skip), 4)) <= bound.ops
    heaviest = _params_bytes(MacroNet(MacroArch(ops=(1,) * layers, skips=every_skip), 4))
    assert 0.8 * bound.param_bytes <= heaviest <= bound.param_bytes


@pytest.mark.parametrize(("space", "seed"), [("micro", 0), ("micro", 1), ("macro", 2), ("macro", 3)])
def test_the_size_bound_holds_on_drawn_networks(space: str, seed: int) -> None:
    knobs: dict[str, Any] = {"layers": 2 if space == "micro" else 5, "channels": 4, "space": space}
    model, (images, _) = sample(np.random.default_rng(seed), batch=2, **knobs)
    bound = cifar10.estimate_size(**knobs)
    assert 0.3 * bound.ops <= _imported_ops(model) <= bound.ops  # drawn ops are lighter than the heaviest
    assert _params_bytes(model) <= bound.param_bytes


@pytest.mark.parametrize("knobs", [
    {"layers": 10_000, "num_blocks": 64},  # 34 million ops: ran for days
    {"layers": 3_300},  # past the cap at the default 5 blocks, as a cheap check that the op cap is what refuses
    {"layers": 500, "channels": 1024, "space": "macro"},  # terabytes of projection weights
    {"layers": 30, "channels": 1024, "num_blocks": 64},  # 1.2 TB of separable convolutions
])
def test_knobs_that_build_too_much_together_are_refused_before_building(knobs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument, match=r"^cifar10 knobs layers=\d+, channels=\d+.* would build .* past the cap "
                                              r"of [\d,]+ \(gnplace\.families\.MAX_(GRAPH_OPS|PARAM_BYTES)\): lower them$"):
        sample(np.random.default_rng(0), batch=2, **knobs)


def test_the_benchmarks_largest_graph_is_within_the_caps() -> None:
    """scripts/benchmarks builds 840 micro layers (about 100,000 ops); 3,223 layers is the last of the op cap."""
    assert cifar10.estimate_size(layers=840, channels=16).ops * 3 <= cifar10.MAX_GRAPH_OPS
    assert cifar10.estimate_size(layers=3_223, channels=16).ops <= cifar10.MAX_GRAPH_OPS


def test_estimate_size_refuses_an_unknown_space_and_a_count_below_its_least() -> None:
    """space="Micro" was estimated as the macro space, and layers=-3 gave a bound of -270 ops."""
    with pytest.raises(UnknownName, match="unknown search space 'Micro'"):
        cifar10.estimate_size(space="Micro")
    for knobs, message in (({"layers": -3}, "'layers' must be >= 1, got -3"),
                           ({"channels": 1}, "'channels' must be >= 2, got 1"),
                           ({"num_blocks": 2.5}, "'num_blocks' must be an integer >= 1, got 2.5"),
                           ({"skip_prob": 1.5}, "'skip_prob' must be in \\[0, 1\\], got 1.5")):
        with pytest.raises(InvalidArgument, match=message):
            cifar10.estimate_size(**knobs)
    assert cifar10.estimate_size(layers=cifar10.MAX_LAYERS + 1).ops > cifar10.MAX_GRAPH_OPS  # no cap: it says how big


def test_a_micro_block_may_read_the_block_just_before_it() -> None:
    """Block j reads any of ids 0..j+1, the last one the block before it (a mutant drawing from 0..j passed)."""
    rng = np.random.default_rng(0)
    cells = [cell for _ in range(20) for cell in (lambda a: (a.normal, a.reduce))(sample_micro_arch(rng, 5))]
    reads = {(j, i) for cell in cells for j, (x_id, _, y_id, _) in enumerate(cell) for i in (x_id, y_id)}
    assert reads == {(j, i) for j in range(5) for i in range(j + 2)}


def test_a_macro_net_without_skips_is_bounded_without_them() -> None:
    """52 + 32 (L - 1) + 60 (L // 3) ops where skip_prob is 0, L (L - 1) / 2 more otherwise (a mutant counting the skips
    always passed)."""
    assert estimate_size(layers=6, space="macro", skip_prob=0.0).ops == 52 + 32 * 5 + 60 * 2
    assert estimate_size(layers=6, space="macro", skip_prob=0.4).ops == 52 + 32 * 5 + 15 + 60 * 2
