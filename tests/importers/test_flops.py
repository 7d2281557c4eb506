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
