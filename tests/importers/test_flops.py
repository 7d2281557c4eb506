"""FLOP rules of aten ops against closed forms."""

from __future__ import annotations

import pytest
import torch

from gnplace.importers.flops import FREE_OPS, VIEW_OPS, op_flops


@pytest.mark.parametrize(
    "name, args, out_shape, expected",
    [
        ("mm", (torch.zeros(8, 16), torch.zeros(16, 4)), (8, 4), 2 * 8 * 16 * 4),
        ("addmm", (torch.zeros(4), torch.zeros(8, 16), torch.zeros(16, 4)), (8, 4), 2 * 8 * 16 * 4 + 8 * 4),
        ("bmm", (torch.zeros(3, 8, 16), torch.zeros(3, 16, 4)), (3, 8, 4), 2 * 3 * 8 * 16 * 4),
        ("mv", (torch.zeros(8, 16), torch.zeros(16)), (8,), 2 * 8 * 16),
        ("relu", (torch.zeros(5, 5),), (5, 5), 25),
        ("tanh", (torch.zeros(5, 5),), (5, 5), 100),
        ("sum", (torch.zeros(5, 6),), (), 30),
        ("_softmax", (torch.zeros(4, 10), -1, False), (4, 10), 200),
        ("nll_loss_forward", (torch.zeros(4, 10),), (), 4),
        ("nll_loss2d_forward", (torch.zeros(2, 5, 16, 16),), (), 2 * 16 * 16),  # a pick per pixel (was 2)
    ],
)
def test_closed_forms(name, args, out_shape, expected):
    assert op_flops(name, args, {}, [torch.zeros(out_shape)]) == expected


def test_convolution_and_its_backward():
    x, w = torch.zeros(2, 8, 10, 10), torch.zeros(16, 8, 3, 3)
    out = torch.zeros(2, 16, 5, 5)
    args = (x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1)
    fwd = op_flops("convolution", args, {}, [out])
    assert fwd == 2 * 2 * 16 * 5 * 5 * 8 * 9
    grad_args = (out, x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
    assert op_flops("convolution_backward", grad_args, {}, [x, w, None]) == 2 * fwd


def test_transposed_convolution_works_per_input_element_as_the_onnx_importer_counts_it():
    # ConvTranspose2d(16 -> 8, k=4, stride 2, padding 1) on 8x8: each input pixel does 16 x 8 x 16 multiply-adds
    x, w, out = torch.zeros(2, 16, 8, 8), torch.zeros(16, 8, 4, 4), torch.zeros(2, 8, 16, 16)
    fwd = op_flops("convolution", (x, w, None, [2, 2], [1, 1], [1, 1], True, [0, 0], 1), {}, [out])
    assert fwd == 2 * 2 * 8 * 8 * 16 * 8 * 16  # counted from the output, it was 2x higher (4x at 16 -> 16)
    grad_args = (out, x, w, None, [2, 2], [1, 1], [1, 1], True, [0, 0], 1, [True, True, False])
    assert op_flops("convolution_backward", grad_args, {}, [x, w, None]) == 2 * fwd
    # conv2d's seventh argument is its groups, not a transposed flag
    plain = op_flops("conv2d", (out, torch.zeros(4, 8, 3, 3), None, [1, 1], [1, 1], [1, 1], 1), {},
                     [torch.zeros(2, 4, 16, 16)])
    assert plain == 2 * 2 * 4 * 16 * 16 * 8 * 9


def test_a_transposed_convolution_imports_with_the_onnx_importers_flops():
    import numpy as np
    from onnx import TensorProto, numpy_helper
    from onnx import helper as oh

    from gnplace.importers.onnx import from_onnx
    from gnplace.importers.torch import from_module

    module = torch.nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1, bias=False)
    graph = from_module(module, (torch.zeros(2, 16, 8, 8),), loss=lambda out: out.sum())
    model = oh.make_model(oh.make_graph(
        [oh.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])], "g",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 8, 8])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 16, 16])],
        [numpy_helper.from_array(np.zeros((16, 8, 4, 4), np.float32), "w")]), opset_imports=[oh.make_opsetid("", 17)])
    onnx_graph = from_onnx(model)
    assert graph.flops[graph.node_names.index("root/convolution")] == \
        onnx_graph.flops[onnx_graph.node_names.index("ConvTranspose_0")] == 2 * 2 * 8 * 8 * 16 * 8 * 16


def test_depthwise_convolution_counts_one_input_channel_per_group():
    x, w = torch.zeros(1, 8, 6, 6), torch.zeros(8, 1, 3, 3)
    out = torch.zeros(1, 8, 6, 6)
    assert op_flops("convolution", (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 8), {}, [out]) == 2 * 8 * 36 * 9


def test_views_and_data_movement_are_free_and_unknown_ops_are_none():
    assert not VIEW_OPS & {"mm", "add"}
    assert op_flops("cat", ([torch.zeros(2)],), {}, [torch.zeros(4)]) == 0.0
    assert "cat" in FREE_OPS
    assert op_flops("special_zeta", (torch.zeros(3),), {}, [torch.zeros(3)]) is None


def test_fake_quantization_counts_a_quantize_and_a_dequantize_and_imports_without_an_unknown_op_warning():
    """fake_quantize_per_tensor_affine (and _per_channel_) had no rule: 1 FLOP per output element, its values and its
    mask (2 per element), with a warning; ONNX counts its export, QuantizeLinear + DequantizeLinear, at 4."""
    import warnings

    from gnplace.importers.torch import from_module

    class Fake(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(6, 5, bias=False)

        def forward(self, x):
            w = torch.fake_quantize_per_channel_affine(self.proj.weight, torch.full((5,), 0.1),
                                                       torch.zeros(5, dtype=torch.int32), 0, -128, 127)
            return torch.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127) @ w.t()

    mask = torch.zeros(4, 6, dtype=torch.bool)
    assert op_flops("fake_quantize_per_tensor_affine_cachemask", (torch.zeros(4, 6), 0.1, 0, -128, 127), {},
                    [torch.zeros(4, 6), mask]) == 4 * 24
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the FLOP-rule warning would fail the import
        graph = from_module(Fake(), (torch.randn(4, 6),), loss=lambda y: y.sum())
    fake = [i for i, t in enumerate(graph.op_types) if t.startswith("fake_quantize")]
    assert sorted(graph.flops[fake].tolist()) == [4.0 * 4 * 6, 4.0 * 5 * 6]  # x, the weight


def test_learnable_and_observed_fake_quantization_have_rules_and_their_gradients_reach_scale_and_zero_point():
    """_fake_quantize_learnable_per_tensor_affine / _per_channel_ and torch.ao's fused observer
    (fused_moving_avg_obs_fake_quant, recorded as _fused_moving_avg_obs_fq_helper) had no rule: 1 FLOP per output
    element, with an unknown-op warning. The forward is 4 per input element as fake_quantize_*, the observer's min
    and max 2 more; the learnable backward 11 (dX, and the scale's and zero point's gradients), feeding their updates."""
    import warnings

    from gnplace.graph import BACKWARD, FORWARD
    from gnplace.importers.torch import from_module

    class Learnable(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(6, 5, bias=False)
            self.scale, self.zero = torch.nn.Parameter(torch.tensor([0.1])), torch.nn.Parameter(torch.tensor([0.0]))
            self.w_scale, self.w_zero = torch.nn.Parameter(torch.full((5,), 0.1)), torch.nn.Parameter(torch.zeros(5))
            self.observer = torch.ao.quantization.FusedMovingAvgObsFakeQuantize()

        def forward(self, x):
            w = torch._fake_quantize_learnable_per_channel_affine(self.proj.weight, self.w_scale, self.w_zero, 0,
                                                                  -128, 127, 1.0)
            x = torch._fake_quantize_learnable_per_tensor_affine(x, self.scale, self.zero, -128, 127, 1.0)
            return self.observer(x @ w.t())

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the FLOP-rule warning would fail the import
        graph = from_module(Learnable(), (torch.randn(4, 6),), loss=lambda y: y.sum())
    flops = {(int(graph.phase[i]), t): float(graph.flops[i]) for i, t in enumerate(graph.op_types)}
    assert flops[FORWARD, "_fake_quantize_learnable_per_tensor_affine"] == 4 * 4 * 6
    assert flops[FORWARD, "_fake_quantize_learnable_per_channel_affine"] == 4 * 5 * 6
    assert flops[FORWARD, "_fused_moving_avg_obs_fq_helper"] == 6 * 4 * 5
    assert flops[BACKWARD, "_fake_quantize_learnable_per_tensor_affine_backward"] == 11 * 4 * 6
    assert flops[BACKWARD, "_fake_quantize_learnable_per_channel_affine_backward"] == 11 * 5 * 6
    assert flops[BACKWARD, "mul"] == 4 * 5  # the observer's fake quantization: the gradient times its mask
    fed = {graph.node_names[v]: graph.op_types[u] for u, v in zip(graph.edge_src, graph.edge_dst)
           if graph.node_names[v].startswith("update/")}
    assert fed == {"update/scale": "_fake_quantize_learnable_per_tensor_affine_backward",
                   "update/zero": "_fake_quantize_learnable_per_tensor_affine_backward",
                   "update/w_scale": "_fake_quantize_learnable_per_channel_affine_backward",
                   "update/w_zero": "_fake_quantize_learnable_per_channel_affine_backward",
                   "update/proj.weight": "_fake_quantize_learnable_per_channel_affine_backward"}
    assert op_flops("fused_moving_avg_obs_fake_quant", (torch.zeros(3, 7),), {}, [torch.zeros(3, 7)]) == 6 * 21


@pytest.mark.parametrize("observe, quantize", [(True, True), (True, False), (False, True), (False, False)])
def test_the_fused_observer_counts_only_what_its_flags_turn_on(observe, quantize):
    """torch.ao's fused observer was counted at 6 FLOP per element whatever its flags: disable_observer() drops the
    running min and max (2), disable_fake_quant() the fake quantization (4: the input is copied, its mask all
    ones). The flags are the module's buffers, whose values the importer holds; a fake one is counted on."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gnplace.importers.torch import from_module

    class Observed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(6, 5, bias=False)
            self.observer = torch.ao.quantization.FusedMovingAvgObsFakeQuantize()

        def forward(self, x):
            return self.observer(self.proj(x))

    net = Observed()
    if not observe:
        net.observer.disable_observer()
    if not quantize:
        net.observer.disable_fake_quant()
    graph = from_module(net, (torch.randn(4, 6),), loss=lambda y: y.sum())
    (fused,) = [i for i, t in enumerate(graph.op_types) if t == "_fused_moving_avg_obs_fq_helper"]
    assert float(graph.flops[fused]) == (2 * observe + 4 * quantize) * 4 * 5
    off, x = torch.zeros(1, dtype=torch.long), torch.zeros(3, 7)
    qparams = (torch.ones(1), torch.zeros(1, dtype=torch.int32))
    assert op_flops("_fake_quantize_per_tensor_affine_cachemask_tensor_qparams", (x, *qparams, off, -8, 7), {},
                    [x, x.bool()]) == 0.0
    with FakeTensorMode() as mode:
        unknown = mode.from_tensor(off)
    assert op_flops("_fused_moving_avg_obs_fq_helper", (x, unknown, off), {}, [x]) == 2 * 21
    assert op_flops("_fake_quantize_per_tensor_affine_cachemask_tensor_qparams", (x, *qparams, unknown, -8, 7), {},
                    [x, x.bool()]) == 4 * 21


def test_a_causal_mask_imports_without_an_unknown_op_warning():
    """transformers 5 builds GPT-2's causal mask with ``torch.tril``: a masking copy, free as ONNX's ``Trilu`` is."""
    import warnings

    from gnplace.importers.torch import from_module

    class Masked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(6, 6)

        def forward(self, x):
            return self.proj(x) @ torch.tril(torch.ones(6, 6)) + torch.triu(x)

    assert op_flops("tril", (torch.zeros(6, 6),), {}, [torch.zeros(6, 6)]) == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the FLOP-rule warning would fail the import
        graph = from_module(Masked(), (torch.randn(6, 6),), loss=lambda y: y.sum())
    assert {"tril", "triu"} <= set(graph.op_types)


def test_fourier_transforms_cost_fftws_5_n_log2_n_and_import_without_an_unknown_op_warning():
    """A complex transform of N points is 5 N log2 N FLOP, a real one half that, per transformed signal."""
    import warnings

    from gnplace.importers.torch import from_module

    x, spectrum = torch.zeros(3, 4, 8), torch.zeros(3, 4, 5, dtype=torch.cfloat)
    assert op_flops("_fft_r2c", (x, [2], 0, True), {}, [spectrum]) == 3 * 4 * 2.5 * 8 * 3
    assert op_flops("_fft_c2r", (spectrum, [2], 0, 8), {}, [x]) == 3 * 4 * 2.5 * 8 * 3
    both = torch.zeros(3, 4, 8, dtype=torch.cfloat)
    assert op_flops("_fft_c2c", (both, [1, 2], 0, True), {}, [both]) == 3 * 5 * 32 * 5

    class Spectral(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(5, dtype=torch.cfloat))

        def forward(self, x):
            return torch.fft.irfft(torch.fft.rfft(x, dim=-1) * self.weight, n=8, dim=-1).square().mean()

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the FLOP-rule warning would fail the import
        graph = from_module(Spectral(), (torch.randn(3, 8),))
    assert {"_fft_r2c", "_fft_c2r"} <= set(graph.op_types)


def _flops_by_op(module, *inputs):
    """The FLOP of each op type of the training step of ``module``, failing on a FLOP-rule warning."""
    import warnings

    from gnplace.importers.torch import from_module

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # an op without a rule warns: that would fail the import
        graph = from_module(module, inputs, loss=lambda y: y.square().mean())
    totals: dict[str, float] = {}
    for op_type, flops in zip(graph.op_types, graph.flops):
        totals[op_type] = totals.get(op_type, 0.0) + float(flops)
    return totals


class _Scaled(torch.nn.Module):
    """``f(x * p)`` with one trainable scale ``p``, so that a function without weights gets a backward."""

    def __init__(self, f):
        super().__init__()
        self.f, self.p = f, torch.nn.Parameter(torch.ones(1))

    def forward(self, x):
        return self.f(x * self.p)


@pytest.mark.parametrize("mode, op, taps", [
    ("nearest", "upsample_nearest1d", 1), ("linear", "upsample_linear1d", 2),
    ("nearest", "upsample_nearest2d", 1), ("bilinear", "upsample_bilinear2d", 4), ("bicubic", "upsample_bicubic2d", 16),
    ("nearest-exact", "_upsample_nearest_exact2d", 1),
    ("nearest", "upsample_nearest3d", 1), ("trilinear", "upsample_trilinear3d", 8),
])
def test_upsampling_reads_its_points_per_output_element_and_its_backward_spreads_them_back(mode, op, taps):
    """Interpolation had no rule: 1 FLOP per output element (so bilinear a quarter of fvcore's 4), with a warning."""
    dims = 1 if op.endswith("1d") else 3 if op.endswith("3d") else 2
    x = torch.randn(2, 3, *[4] * dims)
    totals = _flops_by_op(_Scaled(lambda x: torch.nn.functional.interpolate(x, scale_factor=2, mode=mode)), x)
    out = 2 * 3 * 8 ** dims
    assert totals[op] == totals[f"{op}_backward"] == taps * out


@pytest.mark.parametrize("f, op", [
    (lambda x: torch.nn.functional.pixel_shuffle(x, 2), "pixel_shuffle"),
    (lambda x: torch.nn.functional.pixel_unshuffle(x, 2), "pixel_unshuffle"),
    (lambda x: torch.nn.functional.channel_shuffle(x, 2), "channel_shuffle"),
    (lambda x: torch.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"), "reflection_pad2d"),
    (lambda x: torch.nn.functional.pad(x, (1, 1, 1, 1), mode="replicate"), "replication_pad2d"),
])
def test_rearranging_and_padding_move_data_and_a_pads_backward_adds_the_border_back(f, op):
    totals = _flops_by_op(_Scaled(f), torch.randn(2, 4, 6, 6))
    assert totals[op] == 0.0
    if op.endswith("pad2d"):
        assert totals[f"{op}_backward"] == 2 * 4 * (8 * 8 - 6 * 6)


@pytest.mark.parametrize("f, forward, backward", [
    (lambda x: torch.nn.functional.max_pool3d(x, 2), "max_pool3d_with_indices", "max_pool3d_with_indices_backward"),
    (lambda x: torch.nn.functional.avg_pool3d(x, 2), "avg_pool3d", "avg_pool3d_backward"),
])
def test_3d_poolings_and_their_backwards_count_every_window_element(f, forward, backward):
    """The 3-d backwards had no rule (1 FLOP per input element, with a warning); the forward 8 per output."""
    x = torch.randn(2, 3, 4, 8, 8)
    totals = _flops_by_op(_Scaled(f), x)
    assert totals[forward] == 2 * 3 * 2 * 4 * 4 * 8
    assert totals[backward] == x.numel() * 8


def test_a_pooling_kernel_given_as_one_size_is_a_window_of_its_dimensions():
    """A one-size kernel was squared whatever the pooling's dimensions: 9 for a 1-d window of 3, 4 for 2x2x2."""
    assert op_flops("avg_pool1d", (torch.zeros(2, 4, 9), [3]), {}, [torch.zeros(2, 4, 3)]) == 2 * 4 * 3 * 3
    assert op_flops("max_pool3d_with_indices", (torch.zeros(1, 1, 4, 4, 4), [2]), {},
                    [torch.zeros(1, 1, 2, 2, 2), torch.zeros(1, 1, 2, 2, 2)]) == 2 * 2 * 2 * 8
    assert op_flops("avg_pool2d", (torch.zeros(1, 1, 4, 4), [2]), {}, [torch.zeros(1, 1, 2, 2)]) == 4 * 4


@pytest.mark.parametrize("f, ops", [
    (lambda x: torch.nn.functional.adaptive_max_pool2d(x[:, :, 0], 3), ["adaptive_max_pool2d"]),
    (lambda x: torch.nn.functional.adaptive_avg_pool3d(x, 3), ["_adaptive_avg_pool3d"]),
    (lambda x: torch.nn.functional.adaptive_max_pool3d(x, 3), ["adaptive_max_pool3d"]),
])
def test_adaptive_poolings_read_each_input_element_once_forward_and_backward(f, ops):
    x = torch.randn(2, 3, 4, 6, 6)
    totals = _flops_by_op(_Scaled(f), x)
    for op in ops:
        numel = x[:, :, 0].numel() if op.endswith("2d") else x.numel()
        assert totals[op] == totals[f"{op}_backward"] == numel


def test_other_common_ops_get_their_rules():
    x = torch.randn(2, 4, 6, 6)
    n = x.numel()
    assert _flops_by_op(torch.nn.PReLU(4), x)["_prelu_kernel_backward"] == 2 * 2 * n  # grad_input, grad_weight
    glu = _flops_by_op(_Scaled(lambda x: torch.nn.functional.glu(x, 1)), x)
    assert glu["glu"] == 5 * n / 2 and glu["glu_backward"] == 9 * n / 2
    folded = _flops_by_op(_Scaled(lambda x: torch.nn.functional.fold(torch.nn.functional.unfold(x, 3), (6, 6), 3)), x)
    # fold and the backward of unfold: one add per patch element each; unfold and the backward of fold: copies
    assert folded["im2col"] == 0 and folded["col2im"] == 2 * (2 * 4 * 9 * 16)
    assert _flops_by_op(_Scaled(torch.atan), x)["atan"] == 4 * n
    assert op_flops("scatter_add", (x, 1, torch.zeros(2, 2, 6, 6, dtype=torch.long), torch.zeros(2, 2, 6, 6)), {},
                    [x]) == n / 2


def test_binary_cross_entropy_and_its_backward_get_rules():
    """Both had no rule (1 FLOP per output element, a warning): the loss is 2 logs, their clamps and 6 arithmetic
    FLOP per element, plus its mean; the backward 6 per element, plus the mean's 1 / n."""
    x, t = torch.zeros(8, 3), torch.zeros(8, 3)
    assert op_flops("binary_cross_entropy", (x, t, None, 1), {}, [torch.zeros(())]) == 17 * 24
    assert op_flops("binary_cross_entropy", (x, t, torch.ones(3), 0), {}, [x]) == 17 * 24
    assert op_flops("binary_cross_entropy_backward", (torch.zeros(()), x, t, None, 1), {}, [x]) == 7 * 24


def test_grid_sampling_counts_its_taps_and_the_coordinates_of_each_point():
    x, grid = torch.zeros(2, 4, 7, 7), torch.zeros(2, 5, 6, 2)  # 60 grid points, 240 output elements
    out = torch.zeros(2, 4, 5, 6)
    assert op_flops("grid_sampler_2d", (x, grid, 0, 0, False), {}, [out]) == 240 * 4 + 60 * (4 + 12)
    assert op_flops("grid_sampler_2d", (x, grid, 1, 0, False), {}, [out]) == 240 * 1 + 60 * 4
    both = op_flops("grid_sampler_2d_backward", (out, x, grid, 0, 0, False, [True, True]), {}, [x, grid])
    assert both == 60 * 16 + 2 * 240 * 4 + (2 * 240 * 4 + 4 * 60)
    grid_only = op_flops("grid_sampler_2d_backward", (out, x, grid, 0, 0, False, [False, True]), {}, [None, grid])
    assert grid_only == 60 * 16 + 2 * 240 * 4 + 4 * 60


def test_pairwise_distances_embedding_bags_and_medians_get_rules():
    x1, x2 = torch.zeros(8, 6), torch.zeros(5, 6)  # 40 pairs of 6 coordinates
    assert op_flops("_cdist_forward", (x1, x2, 2.0, None), {}, [torch.zeros(8, 5)]) == 40 * (3 * 6 + 1)
    assert op_flops("_cdist_backward", (torch.zeros(8, 5), x1, x2, 2.0, torch.zeros(8, 5)), {}, [x1]) == 40 * 25
    weight, indices, offsets = torch.zeros(20, 6), torch.zeros(12, dtype=torch.long), torch.zeros(4, dtype=torch.long)
    bags = [torch.zeros(4, 6), indices, offsets, offsets]
    assert op_flops("_embedding_bag", (weight, indices, offsets, False, 0, False, None), {}, bags) == 12 * 6
    assert op_flops("_embedding_bag", (weight, indices, offsets, False, 1, False, None), {}, bags) == 12 * 6 + 4 * 6
    backward = (torch.zeros(4, 6), indices, offsets, indices, offsets, offsets, 20, False, 1, False, None)
    assert op_flops("_embedding_bag_backward", backward, {}, [weight]) == 2 * 12 * 6
    assert op_flops("median", (torch.zeros(8, 6),), {}, [torch.zeros(())]) == 2 * 48
    assert op_flops("median", (torch.zeros(8, 6), 1), {}, [torch.zeros(8), torch.zeros(8)]) == 2 * 48


def test_a_step_with_these_ops_imports_without_an_unknown_op_warning():
    import warnings

    import torch.nn.functional as F
    from torch import nn

    from gnplace.importers.torch import from_module

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 1)
            self.grid = nn.Parameter(torch.rand(2, 5, 6, 2) * 2 - 1)
            self.bag = nn.EmbeddingBag(20, 4, mode="mean")

        def forward(self, x: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
            h = F.grid_sample(self.conv(x), self.grid, align_corners=False).flatten(2).mean(2)  # [2, 4]
            d = torch.cdist(h, self.bag(tokens), compute_mode="donot_use_mm_for_euclid_dist")
            p = torch.sigmoid(d + d.median())
            return F.binary_cross_entropy(p, torch.full_like(p, 0.5))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_module(Net(), (torch.randn(2, 3, 7, 7), torch.randint(0, 20, (3, 5))))


def test_random_numbers_are_free_as_dropout_masks_are_and_import_without_an_unknown_op_warning():
    """``rand`` fell to the one-FLOP-per-element fallback (with a warning) while ``bernoulli_`` was free."""
    import warnings

    from gnplace.importers.torch import from_module

    class Noisy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(6, 6)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            noise = torch.rand(4, 6) + torch.randn(4, 6) + torch.empty(4, 6).uniform_() + torch.empty(4, 6).normal_()
            return self.proj(x + noise)

    for name in ("rand", "randn", "uniform_", "normal_", "randint", "bernoulli_"):
        assert op_flops(name, (), {}, [torch.zeros(4, 6)]) == 0.0, name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = from_module(Noisy(), (torch.randn(4, 6),), loss=lambda y: y.sum())
    assert {"rand", "randn"} <= set(graph.op_types)


@pytest.mark.parametrize("act", ["silu", "elu", "hardswish", "hardsigmoid", "relu", "hardtanh", "leaky_relu", "mish"])
def test_an_in_place_activation_costs_as_its_out_of_place_form(act):
    """silu_, elu_, hardswish_ and hardsigmoid_ were unknown ops at 1 FLOP an element (a quarter of their cost), and
    so was mish_backward, the gradient of every nn.Mish (ONNX's Mish gradient: 4)."""
    import warnings

    import torch

    from gnplace.importers.torch import from_module

    def forward_flops(inplace):
        f = getattr(torch.nn.functional, act)

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(64, 64)

            def forward(self, x):
                return f(self.fc(x), inplace=inplace)

        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an op the FLOP rules do not know warns
            g = from_module(Net(), (torch.randn(4, 64),), loss=lambda y: y.sum())
        return [float(fl) for name, fl in zip(g.node_names, g.flops) if name.rstrip("_").endswith("/" + act)]

    assert forward_flops(True) == forward_flops(False) and len(forward_flops(True)) == 1


def test_an_identity_a_range_and_index_lists_are_made_free_and_import_without_an_unknown_op_warning():
    """``torch.eye`` fell to the one-FLOP-per-element fallback with a warning, where ONNX's ``EyeLike`` is free."""
    import warnings

    from gnplace.importers.torch import from_module

    class Made(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(6, 6)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            rows, cols = torch.tril_indices(6, 6)
            made = torch.eye(6) + torch.linspace(0, 1, 6) + torch.diag(torch.ones(6)) + torch.diag_embed(x)[0]
            return self.proj(x @ made)[:, rows % 6].sum() + cols.sum()

    for name in ("eye", "linspace", "logspace", "tril_indices", "triu_indices", "diag", "diag_embed", "randint_like"):
        assert op_flops(name, (), {}, [torch.zeros(6, 6)]) == 0.0, name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = from_module(Made(), (torch.randn(6, 6),), loss=lambda y: y)
    assert {"eye", "linspace", "tril_indices"} <= set(graph.op_types)


def test_an_accumulating_index_put_adds_each_value_as_index_add_does():
    """The backward of ``w[idx]`` is ``index_put(zeros, [idx], grad, accumulate=True)``: it was free (0 FLOP) where
    the backward of ``w.index_select(0, idx)`` (``index_add``) and of ``w.gather`` (``scatter_add``) add each value."""
    w, idx, values = torch.zeros(10, 4), torch.zeros(3, 5, dtype=torch.long), torch.zeros(3, 5, 4)
    assert op_flops("index_put", (w, [idx], values, True), {}, [w]) == 60
    assert op_flops("index_put_", (w, [idx], values), {"accumulate": True}, [w]) == 60
    assert op_flops("index_put", (w, [idx], values), {}, [w]) == 0  # an overwrite moves data

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(10, 4))

        def forward(self, i: torch.Tensor) -> torch.Tensor:
            return self.w[i].sum() + self.w.index_select(0, i.flatten()).sum()

    totals = _flops_by_op(Net(), torch.randint(0, 10, (3, 5)))
    assert totals["index_put"] == totals["index_add"] == 60


def test_a_bilinear_layer_and_a_loss_with_logits_get_rules():
    """``_trilinear`` (``nn.Bilinear``, forward and backward) and ``binary_cross_entropy_with_logits``
    (``nn.BCEWithLogitsLoss``) had no rule: one FLOP per output element, with a warning; the loss over a batch
    was 1 FLOP, the bilinear layer 28 of its 2,520 (i1 * i2, then a multiply-add with i3 per element)."""
    x1, w, x2 = torch.zeros(4, 5), torch.zeros(7, 5, 6), torch.zeros(4, 6)
    assert op_flops("_trilinear", (x1, w, x2, [1, 3], [0], [1, 2], [2, 3], 1), {}, [torch.zeros(4, 7)]) == 3 * 840
    x, t = torch.zeros(8, 3), torch.zeros(8, 3)
    assert op_flops("binary_cross_entropy_with_logits", (x, t), {}, [torch.zeros(())]) == 8 * 24
    assert op_flops("binary_cross_entropy_with_logits", (x, t, torch.ones(3), torch.ones(3), 0), {}, [x]) == 11 * 24

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bilinear = torch.nn.Bilinear(5, 6, 7)

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            logits = self.bilinear(a, b)
            return torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.full_like(logits, 0.5))

    totals = _flops_by_op(Net(), torch.randn(4, 5), torch.randn(4, 6))  # fails on an unknown-op warning
    assert totals["_trilinear"] == 3 * 840 + 140 + 2 * 840  # forward; weight gradient (the inputs need none)
    assert totals["binary_cross_entropy_with_logits"] == 8 * 28


def test_addbmm_adds_its_input_as_addmm_and_baddbmm_do_and_addr_gets_a_rule():
    """``addbmm`` counted its products but not the add of its input (``addmm`` and ``baddbmm`` count one per output
    element); ``addr`` had no rule (one FLOP per output element, with a warning)."""
    b1, b2 = torch.zeros(3, 6, 8), torch.zeros(3, 8, 5)
    assert op_flops("addbmm", (torch.zeros(6, 5), b1, b2), {}, [torch.zeros(6, 5)]) == 2 * 3 * 6 * 8 * 5 + 6 * 5
    assert op_flops("addr", (torch.zeros(6, 5), torch.zeros(6), torch.zeros(5)), {}, [torch.zeros(6, 5)]) == 2 * 30


def test_shrinks_thresholds_rrelu_and_celu_import_without_an_unknown_op_warning():
    """They had no rule (one FLOP per output element, with a warning); celu costs elu's 4, as ONNX's Celu."""
    from torch.nn import functional as F

    x = torch.randn(4, 8)
    totals = _flops_by_op(_Scaled(lambda a: F.celu(a) + F.hardshrink(a) + F.softshrink(a) + F.threshold(a, 0.1, 0.0)
                                  + F.rrelu(a, training=True)), x)
    assert totals["celu"] == 4 * 32
    assert totals["hardshrink"] == totals["softshrink"] == totals["threshold"] == totals["rrelu_with_noise"] == 32


def test_only_a_mean_adds_its_one_over_n_to_the_binary_cross_entropy_backward():
    """A sum (reduction 2) divides by nothing: 6 FLOP per element, as with no reduction; a weight adds one."""
    x, t, grad = torch.zeros(8, 3), torch.zeros(8, 3), torch.zeros(())
    assert op_flops("binary_cross_entropy_backward", (grad, x, t, None, 2), {}, [x]) == 6 * 24
    assert op_flops("binary_cross_entropy_backward", (grad, x, t, None, 0), {}, [x]) == 6 * 24
    assert op_flops("binary_cross_entropy_backward", (grad, x, t, torch.ones(3), 2), {}, [x]) == 7 * 24


def test_an_embedding_bags_per_sample_weights_cost_one_product_per_looked_up_value():
    weight, indices, offsets = torch.zeros(20, 6), torch.zeros(12, dtype=torch.long), torch.zeros(4, dtype=torch.long)
    bags = [torch.zeros(4, 6), indices, offsets, offsets]
    scaled = op_flops("_embedding_bag", (weight, indices, offsets, False, 0, False, torch.ones(12)), {}, bags)
    assert scaled == 2 * 12 * 6


def test_a_padding_backward_adds_each_padded_elements_gradient_once_and_no_padding_costs_nothing():
    x = torch.zeros(2, 3, 4, 4)
    padded = torch.zeros(2, 3, 6, 6)  # one element each side: 2 * 3 * (36 - 16) copies added back
    assert op_flops("reflection_pad2d_backward", (padded, x, [1, 1, 1, 1]), {}, [x]) == 2 * 3 * 20
    assert op_flops("replication_pad2d_backward", (x, x, [0, 0, 0, 0]), {}, [x]) == 0.0


def test_scaled_dot_product_attentions_backward_is_twice_its_forward():
    """Forward 4 B Lq Lk d + 5 B Lq Lk (two products, the softmax); backward 8 and 10: B = 2 x 4 heads, 8 x 8, d 16."""
    q = k = v = torch.zeros(2, 4, 8, 16)
    fwd = op_flops("_scaled_dot_product_flash_attention", (q, k, v), {}, [q])
    assert fwd == 4 * 8 * 8 * 8 * 16 + 5 * 8 * 8 * 8
    grad = op_flops("_scaled_dot_product_flash_attention_backward", (q, q, k, v), {}, [q, k, v])
    assert grad == 2 * fwd


def test_ctc_loss_and_its_backward_get_rules():
    """The forward variables (9 FLOP per element of log_alpha, 4 per loss) and the backward's (14, 12 per gradient)."""
    log_probs, alpha, nll = torch.zeros(7, 2, 5), torch.zeros(2, 7, 9), torch.zeros(2)  # T=7, N=2, C=5, S=4
    targets = torch.zeros(2, 4, dtype=torch.long)
    assert op_flops("_ctc_loss", (log_probs, targets, (7, 7), (4, 4), 0, False), {}, [nll, alpha]) == 9 * 126 + 4 * 2
    grad = op_flops("_ctc_loss_backward", (torch.ones(2), log_probs, targets, (7, 7), (4, 4), nll, alpha, 0, False),
                    {}, [torch.zeros(7, 2, 5)])
    assert grad == 14 * 126 + 12 * 70


def test_a_ctc_model_imports_with_no_unknown_op_types():
    import warnings

    from gnplace.importers.torch import import_step

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(3, 5)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            lp = self.proj(x).log_softmax(-1)
            return torch.nn.functional.ctc_loss(lp, y, (6, 6), (2, 3))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 'FLOP rules do not know 2 op types' without the rules
        graph = import_step(Net(), (torch.randn(6, 2, 3), torch.tensor([[1, 2, 0], [3, 4, 1]]))).graph
    assert graph.num_ops > 0


def test_linear_algebra_rules_follow_lapacks_operation_counts():
    """LU 2 n^3 / 3, getrs 2 n^2 per column, trsm n^2, orgqr 4 m n k - 2 (m + n) k^2 + 4 k^3 / 3, the matrix
    exponential's degree-18 Taylor polynomial 10 n^3 + 56 n^2: each was 1 FLOP per output element."""
    a, b = torch.zeros(4, 6, 6), torch.zeros(4, 6, 3)
    lu, pivots, info = torch.zeros(4, 6, 6), torch.zeros(4, 6, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    x = torch.zeros(4, 6, 3)
    assert op_flops("_linalg_solve_ex", (a, b), {}, [x, lu, pivots, info]) == 4 * (2 * 6 ** 3 / 3 + 2 * 6 ** 2 * 3)
    assert op_flops("linalg_lu_solve", (lu, pivots, b), {}, [x]) == 4 * 2 * 6 ** 2 * 3
    assert op_flops("linalg_solve_triangular", (a, b), {"upper": True}, [x]) == 4 * 6 ** 2 * 3
    assert op_flops("linalg_lu_factor_ex", (a,), {}, [lu, pivots, info]) == 4 * 2 * 6 ** 3 / 3
    assert op_flops("linalg_lu_factor_ex", (torch.zeros(8, 4),), {}, [torch.zeros(8, 4)]) == 8 * 16 - 64 / 3
    assert op_flops("_linalg_det", (a,), {}, [torch.zeros(4), lu, pivots]) == 4 * (2 * 6 ** 3 / 3 + 6)
    assert op_flops("linalg_matrix_exp", (a,), {}, [a]) == 4 * (10 * 6 ** 3 + 56 * 6 ** 2)
    q = op_flops("linalg_householder_product", (torch.zeros(2, 8, 6), torch.zeros(2, 5)), {}, [torch.zeros(2, 8, 6)])
    assert q == pytest.approx(2 * (4 * 8 * 6 * 5 - 2 * (8 + 6) * 25 + 4 * 125 / 3))
    square = op_flops("linalg_householder_product", (a, torch.zeros(4, 6)), {}, [a])
    assert square == pytest.approx(4 * 4 * 6 ** 3 / 3)  # forming Q of a square QR: 4 n^3 / 3


def test_weight_norm_angle_lerp_and_embedding_renorm_get_rules():
    """w = v g / ||v||: 3 per element of v, 2 per norm; its backward 5 and 3; angle atan2 (4) of a complex tensor,
    a compare (1) of a real one; lerp a + w (b - a), 3; max_norm's renorm 3 D + 4 per index."""
    v, g = torch.zeros(6, 5), torch.zeros(6, 1)
    assert op_flops("_weight_norm_interface", (v, g, 0), {}, [v, g]) == 3 * 30 + 2 * 6
    assert op_flops("_weight_norm_interface_backward", (v, v, g, g, 0), {}, [v, g]) == 5 * 30 + 3 * 6
    z = torch.zeros(4, 5, dtype=torch.complex64)
    assert op_flops("angle", (z,), {}, [torch.zeros(4, 5)]) == 4 * 20
    assert op_flops("angle", (torch.zeros(4, 5),), {}, [torch.zeros(4, 5)]) == 20
    for name in ("lerp", "lerp_"):
        assert op_flops(name, (v, v, 0.3), {}, [v]) == 3 * 30
    table, tokens = torch.zeros(50, 8), torch.zeros(2, 3, dtype=torch.long)
    assert op_flops("embedding_renorm_", (table, tokens, 1.0, 2.0), {}, [table]) == 6 * (3 * 8 + 4)


def test_a_step_through_these_ops_has_no_unknown_op_types():
    """Recorded with torch, every op of these layers has a rule: no 'FLOP rules do not know' warning."""
    import warnings

    from gnplace.importers.torch import import_step

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 4, 4) * 0.1)
            self.emb = torch.nn.Embedding(20, 4, max_norm=1.0)
            self.lin = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a = self.w + 3 * torch.eye(4)
            out = torch.linalg.matrix_exp(self.w) + torch.linalg.solve(a, x) + torch.lerp(self.w, x, 0.3)
            out = out + torch.linalg.householder_product(self.w, x[..., 0, :3].contiguous())
            out = out + torch.linalg.lu_solve(*torch.linalg.lu_factor(a), x) + torch.det(a)[:, None, None]
            out = out + torch.angle(self.w - x)
            return out.sum() + self.emb(torch.tensor([1, 2, 2])).sum() + self.lin(x).sum()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = import_step(Net(), (torch.randn(3, 4, 4),)).graph
    assert {"_weight_norm_interface", "_weight_norm_interface_backward", "embedding_renorm_"} <= set(graph.op_types)


def test_complex_elementwise_arithmetic_counts_real_flop_by_lapacks_convention():
    """A complex product is 6 real FLOP (4 multiplies, 2 adds), a sum 2, a quotient 11, |z| 4, a complex sum 2 per
    element; each was counted as one real FLOP per element. A real operand (or scalar) makes no difference: aten
    promotes it and runs the complex kernel. Real tensors keep their counts."""
    z, r = torch.zeros(4, 5, dtype=torch.complex64), torch.zeros(4, 5)
    for name, per in (("mul", 6), ("mul_", 6), ("add", 2), ("sub", 2), ("neg", 2), ("div", 11), ("reciprocal", 6),
                      ("sgn", 6)):
        assert op_flops(name, (z, z), {}, [z]) == per * 20, name
        assert op_flops(name, (r, r), {}, [r]) == 20, name
    assert op_flops("mul", (z, 2.0), {}, [z]) == 6 * 20
    assert op_flops("mul", (r, z), {}, [z]) == 6 * 20
    assert op_flops("abs", (z,), {}, [r]) == 4 * 20 and op_flops("abs", (r,), {}, [r]) == 20
    assert op_flops("sum", (z,), {}, [torch.zeros((), dtype=torch.complex64)]) == 2 * 20
    assert op_flops("sum", (r,), {}, [torch.zeros(())]) == 20
    assert op_flops("relu", (r,), {}, [r]) == 20


def test_complex_products_count_a_multiply_add_as_8_real_flop():
    """A complex multiply-add is a product (6) and a sum (2): ``mm`` of complex matrices is 8 M K N, ``addmm``'s
    bias a complex add per output element; each was counted as the real product's 2 M K N (+ M N)."""
    c = torch.complex64
    a, b, out = torch.zeros(8, 16, dtype=c), torch.zeros(16, 4, dtype=c), torch.zeros(8, 4, dtype=c)
    assert op_flops("mm", (a, b), {}, [out]) == 8 * 8 * 16 * 4
    assert op_flops("addmm", (torch.zeros(4, dtype=c), a, b), {}, [out]) == 8 * 8 * 16 * 4 + 2 * 8 * 4
    batch = (torch.zeros(3, 8, 16, dtype=c), torch.zeros(3, 16, 4, dtype=c))
    assert op_flops("bmm", batch, {}, [torch.zeros(3, 8, 4, dtype=c)]) == 8 * 3 * 8 * 16 * 4
    assert op_flops("vdot", (torch.zeros(16, dtype=c), torch.zeros(16, dtype=c)), {}, [torch.zeros((), dtype=c)]) \
        == 8 * 16
    real = (torch.zeros(4), torch.zeros(8, 16), torch.zeros(16, 4))
    assert op_flops("addmm", real, {}, [torch.zeros(8, 4)]) == 2 * 8 * 16 * 4 + 8 * 4


def test_affine_grid_counts_its_bmm_and_addcmul_addcdiv_their_three_flop():
    """affine_grid is a bmm of the base grid [N, H W, 3] by theta's transpose: 2 x 3 FLOP per output coordinate, as
    the bmm its backward records (it had no rule: 1 per element); addcmul a + v t1 t2 and addcdiv a + v t1 / t2 are
    two products and a sum (were 1)."""
    import warnings

    import torch.nn.functional as F

    from gnplace.importers.torch import import_step

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.theta = torch.nn.Parameter(torch.randn(2, 2, 3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            grid = F.affine_grid(self.theta, [2, 3, 5, 6], align_corners=False)
            return F.grid_sample(x, grid, align_corners=False).sum()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = import_step(Net(), (torch.randn(2, 3, 5, 6),)).graph
    flops = dict(zip(graph.op_types, graph.flops))
    assert flops["affine_grid_generator"] == 2 * 3 * (2 * 5 * 6 * 2) == flops["bmm"]
    x = torch.zeros(4, 5)
    for name in ("addcmul", "addcmul_", "addcdiv", "addcdiv_"):
        assert op_flops(name, (x, x, x), {"value": 0.5}, [x]) == 3 * 20, name


def test_complex_elementary_functions_count_their_real_and_imaginary_parts():
    """exp, log, sin, cos, tanh, sqrt, pow of a complex z = a + i b were counted as real ones (4 FLOP an element,
    sqrt and pow 1). They count the real functions and arithmetic of their parts at the convention's rates: exp
    e^a (cos b + i sin b) 14, log log|z| + i atan2(b, a) 12, sin and cos 18, tanh 21, sqrt 9; pow as aten runs it
    (exp(w log z), 32, but z * z for 2, sqrt for 0.5, ...). Real tensors keep their counts."""
    z, r = torch.zeros(4, 5, dtype=torch.complex64), torch.zeros(4, 5)
    for name, per, real in (("exp", 14, 4), ("log", 12, 4), ("sin", 18, 4), ("cos", 18, 4), ("tanh", 21, 4),
                            ("sqrt", 9, 1), ("rsqrt", 15, 1), ("sigmoid", 24, 4), ("exp_", 14, 4)):
        assert op_flops(name, (z,), {}, [z]) == per * 20, name
        assert op_flops(name, (r,), {}, [r]) == real * 20, name
    assert op_flops("tanh_backward", (z, z), {}, [z]) == 15 * 20  # g * conj(1 - y y)
    assert op_flops("pow", (z, 1.7), {}, [z]) == op_flops("pow", (z, z), {}, [z]) == 32 * 20
    assert op_flops("pow", (z, 2), {}, [z]) == op_flops("mul", (z, z), {}, [z]) == 6 * 20
    assert op_flops("pow", (z, 0.5), {}, [z]) == op_flops("sqrt", (z,), {}, [z])
    assert op_flops("pow", (r, 1.7), {}, [r]) == 20


def test_complex_inverse_functions_and_log1p_expm1_exp2_count_their_logarithmic_forms():
    """asin, acos, atan, their hyperbolic kin, log1p, expm1 and exp2 of a complex z were counted as real ones (4
    FLOP an element): each counts the roots, logs and complex arithmetic of its logarithmic form. Real ones keep 4."""
    z, r = torch.zeros(4, 5, dtype=torch.complex64), torch.zeros(4, 5)
    for name, per in (("asin", 33), ("acos", 35), ("atan", 33), ("asinh", 31), ("acosh", 42), ("atanh", 32),
                      ("log1p", 14), ("expm1", 16), ("exp2", 16)):
        assert op_flops(name, (z,), {}, [z]) == per * 20, name
        assert op_flops(name, (r,), {}, [r]) == 4 * 20, name
    # each at least the log (12) or exp (14) its form is built on, and the inverse's form dearer than the function's
    assert op_flops("log1p", (z,), {}, [z]) > op_flops("log", (z,), {}, [z])
    assert op_flops("asin", (z,), {}, [z]) > op_flops("sin", (z,), {}, [z])


def test_a_copy_that_materialises_a_conjugate_or_negative_view_counts_its_negations():
    """z.conj() and x._neg_view() only set a bit; the copy that resolves it (clone, resolve_conj, copy_, .to) negates
    every imaginary part (1 FLOP a complex element) or every value (1 a real one, 2 a complex one, as neg), and was
    counted free; _neg_view (z.conj().imag) had no rule. A plain copy stays free, conj_physical conjugates."""
    import warnings

    from gnplace.importers.torch import import_step

    z, r = torch.zeros(4, 5, dtype=torch.complex64), torch.zeros(4, 5)
    assert op_flops("clone", (z.conj(),), {}, [z]) == op_flops("copy_", (z, z.conj()), {}, [z]) == 20
    assert op_flops("_to_copy", (z.conj(),), {"dtype": torch.complex128}, [z.to(torch.complex128)]) == 20
    assert op_flops("clone", (torch._neg_view(r),), {}, [r]) == 20
    assert op_flops("clone", (torch._neg_view(z),), {}, [z]) == 2 * 20
    assert op_flops("clone", (z,), {}, [z]) == op_flops("clone", (r,), {}, [r]) == op_flops("copy_", (r, r), {}, [r]) == 0
    assert op_flops("_conj_physical", (z,), {}, [z]) == 20 and op_flops("_conj_physical", (r,), {}, [r]) == 0
    assert op_flops("_neg_view", (r,), {}, [torch._neg_view(r)]) == 0

    class Conjugate(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(4, dtype=torch.complex64))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            z = x * self.w
            return (z.conj().clone().abs() + z.conj().imag.clone()).sum()

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 'FLOP rules do not know 1 op types: _neg_view'
        g = import_step(Conjugate(), (torch.ones(3, 4, dtype=torch.complex64),)).graph
    clones = [g.flops[i] for i, name in enumerate(g.node_names) if name.startswith("root/clone")]
    assert sorted(clones) == [12.0, 12.0]


@pytest.mark.parametrize(
    "name, args, out_shape, expected",
    [
        # a batched matmul: 2 M K N per matrix of the batch (a mutant counting one matrix passed)
        ("matmul", (torch.zeros(3, 8, 16), torch.zeros(3, 16, 4)), (3, 8, 4), 2 * 3 * 8 * 16 * 4),
        # addmv and baddbmm add their input once per output element (mutants dropping the add passed)
        ("addmv", (torch.zeros(8), torch.zeros(8, 16), torch.zeros(16)), (8,), 2 * 8 * 16 + 8),
        ("baddbmm", (torch.zeros(3, 8, 4), torch.zeros(3, 8, 16), torch.zeros(3, 16, 4)), (3, 8, 4),
         2 * 3 * 8 * 16 * 4 + 3 * 8 * 4),
        # normalisations 5 FLOP per element, their backwards 8, softmax's backward 3 (each untested)
        ("native_batch_norm", (torch.zeros(2, 3, 4, 4),), (2, 3, 4, 4), 5 * 96),
        ("native_layer_norm", (torch.zeros(4, 10),), (4, 10), 5 * 40),
        ("native_batch_norm_backward", (torch.zeros(2, 3, 4, 4), torch.zeros(2, 3, 4, 4)), (2, 3, 4, 4), 8 * 96),
        ("native_layer_norm_backward", (torch.zeros(4, 10), torch.zeros(4, 10)), (4, 10), 8 * 40),
        ("_softmax_backward_data", (torch.zeros(4, 10), torch.zeros(4, 10), -1), (4, 10), 3 * 40),
        # a mean loss's backward reads a scalar gradient: 3 FLOP per element of the input, not of the gradient
        ("mse_loss_backward", (torch.zeros(()), torch.zeros(4, 10), torch.zeros(4, 10), 1), (4, 10), 3 * 40),
    ],
)
def test_more_closed_forms(name, args, out_shape, expected):
    assert op_flops(name, args, {}, [torch.zeros(out_shape)]) == expected


def test_a_convolutions_bias_and_each_gradient_its_backward_takes_are_counted():
    """The bias adds one FLOP per output element; the backward counts dX, dW (each the forward's products) and the
    bias's sum (one per output element) as its output mask asks: a first layer, its input needing no gradient, takes
    no dX. Mutants dropping the bias, or ignoring any entry of the mask, passed."""
    x, w, b = torch.zeros(2, 8, 10, 10), torch.zeros(16, 8, 3, 3), torch.zeros(16)
    out = torch.zeros(2, 16, 5, 5)
    products = 2 * 2 * 16 * 5 * 5 * 8 * 9
    assert op_flops("convolution", (x, w, b, [2, 2], [1, 1], [1, 1], False, [0, 0], 1), {}, [out]) == \
        products + out.numel()
    grad_args = (out, x, w, [16], [2, 2], [1, 1], [1, 1], False, [0, 0], 1)
    for mask, expected in [([True, True, True], 2 * products + out.numel()),
                           ([False, True, True], products + out.numel()),
                           ([True, False, False], products),
                           ([False, False, True], out.numel())]:
        assert op_flops("convolution_backward", (*grad_args, mask), {}, [x, w, b]) == expected


def test_a_transposed_convolution_given_by_keyword_is_counted_per_input_element():
    x, w, out = torch.zeros(2, 16, 8, 8), torch.zeros(16, 8, 4, 4), torch.zeros(2, 8, 16, 16)
    assert op_flops("convolution", (x, w, None), {"transposed": True}, [out]) == 2 * 2 * 8 * 8 * 16 * 8 * 16


def test_attentions_backward_counts_the_keys_length_apart_from_the_queries():
    """Lq = 8 queries over Lk = 32 keys: backward 8 B Lq Lk d + 10 B Lq Lk (a mutant using Lq twice passed)."""
    q, k = torch.zeros(2, 4, 8, 16), torch.zeros(2, 4, 32, 16)
    fwd = op_flops("_scaled_dot_product_flash_attention", (q, k, k), {}, [q])
    assert fwd == 4 * 8 * 8 * 32 * 16 + 5 * 8 * 8 * 32
    assert op_flops("_scaled_dot_product_flash_attention_backward", (q, q, k, k), {}, [q, k, k]) == 2 * fwd
    assert op_flops("_scaled_dot_product_flash_attention_backward", (q, q, k, k), {}, [q, k, k]) == 2 * fwd


def test_an_absent_output_counts_no_element():
    """Outputs are flattened with None for non-tensors (a gradient its mask leaves out): None holds no element."""
    x = torch.zeros(4, 5)
    assert op_flops("add", (x, x), {}, [x, None]) == 20
