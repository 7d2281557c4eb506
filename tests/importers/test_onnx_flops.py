"""FLOP rules of ONNX ops and of their gradients, against closed forms."""

from __future__ import annotations

import pytest

from gnplace.importers.onnx_flops import (
    FREE_OPS,
    VIEW_OPS,
    canonical_op_type,
    forward_flops,
    grad_flops,
    shared_grad_flops,
)


@pytest.mark.parametrize(
    "op, attrs, inputs, outputs, expected",
    [
        ("MatMul", {}, [(3, 8, 16), (16, 4)], [(3, 8, 4)], 2 * 3 * 8 * 16 * 4),
        ("MatMul", {}, [(16,), (16, 4)], [(4,)], 2 * 16 * 4),
        ("Gemm", {"transA": 1}, [(16, 8), (16, 4), (4,)], [(8, 4)], 2 * 8 * 16 * 4 + 8 * 4),
        ("Gemm", {}, [(8, 16), (16, 4)], [(8, 4)], 2 * 8 * 16 * 4),
        ("Conv", {"group": 4}, [(2, 8, 10, 10), (8, 2, 3, 3)], [(2, 8, 8, 8)], 2 * 2 * 8 * 8 * 8 * 2 * 9),
        ("ConvTranspose", {}, [(1, 4, 5, 5), (4, 2, 3, 3), (2,)], [(1, 2, 11, 11)], 2 * 4 * 25 * 2 * 9 + 2 * 121),
        ("Einsum", {"equation": "bij,bjk->bik"}, [(2, 3, 4), (2, 4, 5)], [(2, 3, 5)], 2 * 2 * 3 * 4 * 5),
        ("Einsum", {"equation": "...ij,...jk->...ik"}, [(6, 3, 4), (6, 4, 5)], [(6, 3, 5)], 2 * 6 * 3 * 4 * 5),
        ("Einsum", {"equation": "ij->i"}, [(3, 4)], [(3,)], 12),
        ("MaxPool", {"kernel_shape": [3, 3]}, [(2, 4, 9, 9)], [(2, 4, 3, 3)], 2 * 4 * 9 * 9),
        ("GlobalAveragePool", {}, [(2, 4, 7, 7)], [(2, 4, 1, 1)], 2 * 4 * 49),
        ("ReduceMean", {}, [(5, 6)], [(5, 1)], 30),
        ("LayerNormalization", {}, [(4, 10), (10,), (10,)], [(4, 10)], 200),
        ("BatchNormalization", {}, [(2, 3, 4, 4)] + [(3,)] * 4, [(2, 3, 4, 4)], 5 * 96),
        ("Softmax", {}, [(4, 10)], [(4, 10)], 200),
        ("LRN", {"size": 5}, [(2, 8, 4, 4)], [(2, 8, 4, 4)], (5 + 5) * 256),
        ("Relu", {}, [(5, 5)], [(5, 5)], 25),
        ("Gelu", {}, [(5, 5)], [(5, 5)], 100),
        ("Add", {}, [(5, 5), (5,)], [(5, 5)], 25),
        ("Sum", {}, [(5,), (5,), (5,)], [(5,)], 10),
        ("Where", {}, [(5,), (5,), (5,)], [(5,)], 0),  # a selection: free, as aten's where
        ("Attention", {}, [(2, 4, 8, 16), (2, 4, 8, 16), (2, 4, 8, 16)], [(2, 4, 8, 16)],
         2 * 8 * 8 * 8 * 32 + 5 * 8 * 8 * 8),
        ("Concat", {}, [(2, 3), (2, 3)], [(4, 3)], 0),
        ("Gather", {}, [(100, 8), (4,)], [(4, 8)], 0),
    ],
)
def test_forward_closed_forms(op, attrs, inputs, outputs, expected):
    assert forward_flops(op, attrs, inputs, outputs) == expected


def test_a_training_dropout_costs_a_scale_and_a_product_and_its_gradient_one_product():
    """As aten's bernoulli_ (drawn), div_ and mul, and the gradient's mul; in inference mode a view, 0 FLOP."""
    x = (4, 8)
    assert forward_flops("Dropout", {"training_mode": 1}, [x, (), ()], [x]) == 64
    assert forward_flops("Dropout", {}, [x], [x]) == 0
    assert grad_flops("Dropout", {"training_mode": 1}, [x, (), ()], [x, x], 0, 64.0) == 32


def test_where_is_free_as_atens_and_its_gradient_sums_a_broadcast_input_alone():
    """Where counted 1 FLOP per element forward and backward, where the PyTorch importer's where is free."""
    x, out = (4, 8), (4, 8)
    assert forward_flops("Where", {}, [x, x, (8,)], [out]) == 0
    assert grad_flops("Where", {}, [x, x, (8,)], [out], 1, 0.0) == 0
    assert grad_flops("Where", {}, [x, x, (8,)], [out], 2, 0.0) == 32  # the broadcast one's sum, as aten's


def test_an_lrns_gradient_is_atens_elementwise_steps_and_its_window_means_backward():
    """13 FLOP per element, and 3 per padded element of x * x (8 + 3 - 1 channels) for a window of 3."""
    x = (2, 8, 4, 4)
    assert grad_flops("LRN", {"size": 3}, [x], [x], 0, 0.0) == 13 * 256 + 3 * 2 * 10 * 16


def test_unknown_op_has_no_rule():
    assert forward_flops("NoSuchOp", {}, [(2,)], [(2,)]) is None
    assert forward_flops("Einsum", {"equation": "ij,jk->ik"}, [(2, 3)], [(2, 2)]) is None  # does not fit


def test_product_gradients_cost_the_forward_product():
    x, w, out = (2, 8, 10, 10), (16, 8, 3, 3), (2, 16, 10, 10)
    fwd = forward_flops("Conv", {}, [x, w], [out])
    assert grad_flops("Conv", {}, [x, w], [out], 0, fwd) == grad_flops("Conv", {}, [x, w], [out], 1, fwd) == fwd
    assert grad_flops("Conv", {}, [x, w, (16,)], [out], 2, fwd) == 2 * 16 * 100
    a, b, y = (4, 8, 16), (16, 32), (4, 8, 32)
    fwd = forward_flops("MatMul", {}, [a, b], [y])
    assert grad_flops("MatMul", {}, [a, b], [y], 0, fwd) == grad_flops("MatMul", {}, [a, b], [y], 1, fwd) == fwd


def test_elementwise_gradients_follow_aten():
    s = [(4, 8)]
    assert grad_flops("Add", {}, s * 2, s, 0, 32) == 0  # passes the gradient through
    assert grad_flops("Add", {}, [(4, 8), (8,)], s, 1, 32) == 32  # broadcast bias: a reduction
    assert grad_flops("Mul", {}, s * 2, s, 1, 32) == 32
    assert grad_flops("Relu", {}, s, s, 0, 32) == 32  # threshold_backward
    assert grad_flops("Tanh", {}, s, s, 0, 128) == 128  # tanh_backward
    assert grad_flops("Softmax", {}, s, s, 0, 160) == 3 * 32
    norm = [grad_flops("LayerNormalization", {}, [(4, 8), (8,), (8,)], s, i, 160) for i in range(3)]
    assert sum(norm) == 8 * 32  # native_layer_norm_backward
    assert grad_flops("Gather", {}, [(100, 8), (4,)], [(4, 8)], 0, 0) == 32  # embedding_dense_backward


def test_op_tables_are_disjoint_and_aliases_resolve():
    assert not VIEW_OPS & FREE_OPS
    assert canonical_op_type("FusedMatMul", "com.microsoft") == "FusedMatMul"
    assert canonical_op_type("FastGelu", "com.microsoft") == "Gelu"
    assert canonical_op_type("Attention", "com.microsoft") == "com.microsoft.Attention"  # not ONNX's inputs
    assert canonical_op_type("Relu", "ai.onnx") == "Relu"
    assert canonical_op_type("Relu", "custom") == "custom.Relu"


@pytest.mark.parametrize("layout", [0, 1])
def test_recurrent_layers_count_their_gate_matmuls(layout):
    """LSTM with 2 directions, 5 steps, batch 3, input 8, hidden 16: gates W x + R h per step and direction."""
    x = (5, 3, 8) if layout == 0 else (3, 5, 8)
    w, r, b = (2, 64, 8), (2, 64, 16), (2, 128)
    rows = 5 * 3 * 2
    expected = rows * (2 * 64 * (8 + 16) + 32 * 16)
    assert forward_flops("LSTM", {"layout": layout}, [x, w, r, b], [(5, 2, 3, 16)]) == expected
    grads = [grad_flops("LSTM", {"layout": layout}, [x, w, r, b], [(5, 2, 3, 16)], k, 0.0) for k in range(4)]
    assert grads[1] == rows * 2 * 64 * 8 and grads[2] == rows * 2 * 64 * 16 and grads[3] == rows * 2 * 64
    assert grads[0] == rows * 2 * 64 * 8  # dX = dgates W


@pytest.mark.parametrize("op, gates, per_unit", [("LSTM", 4, 32), ("GRU", 3, 24), ("RNN", 1, 6)])
def test_recurrent_backward_through_time_is_shared_by_all_gradients(op, gates, per_unit):
    """dh_{t-1} = dgates R and the cell's backward run once per op, whichever gradients are taken."""
    x, w, r = (5, 3, 8), (2, gates * 16, 8), (2, gates * 16, 16)
    rows = 5 * 3 * 2
    assert shared_grad_flops(op, {}, [x, w, r]) == rows * (2 * gates * 16 * 16 + 2 * per_unit * 16)
    # dX plus the shared work is what the X gradient alone used to charge
    dx = grad_flops(op, {}, [x, w, r], [(5, 2, 3, 16)], 0, 0.0)
    assert dx + shared_grad_flops(op, {}, [x, w, r]) == rows * (2 * gates * 16 * (8 + 16) + 2 * per_unit * 16)
    assert shared_grad_flops("MatMul", {}, [(8, 16), (16, 4)]) == shared_grad_flops(op, {}, [x, None, r]) == 0


@pytest.mark.parametrize("mode, x, y, taps", [
    ("nearest", (2, 3, 4, 4), (2, 3, 8, 8), 1),
    ("linear", (2, 3, 4), (2, 3, 8), 2),  # was 4, as bilinear
    ("linear", (2, 3, 4, 4), (2, 3, 8, 8), 4),
    ("linear", (2, 3, 4, 4, 4), (2, 3, 8, 8, 8), 8),  # was 4
    ("cubic", (2, 3, 4, 4), (2, 3, 8, 8), 16),  # was 4
])
def test_resize_reads_its_points_per_output_element_as_the_torch_importer_counts_upsampling(mode, x, y, taps):
    """Its gradient, spreading each output gradient over the same points, was 1 FLOP per output element."""
    n_out = 1
    for s in y:
        n_out *= s
    assert forward_flops("Resize", {"mode": mode}, [x, None, (4,)], [y]) == taps * n_out
    assert grad_flops("Resize", {"mode": mode}, [x, None, (4,)], [y], 0, 0.0) == taps * n_out


def test_grid_sample_counts_as_the_torch_importer_counts_grid_sampler_2d():
    """GridSample had no rule (1 FLOP per output element, a warning): its taps per output element and the
    coordinates of each grid point, forward; a multiply-add per tap for each gradient, the coordinates once."""
    x, grid, y = (2, 4, 7, 7), (2, 5, 6, 2), (2, 4, 5, 6)  # 60 grid points, 240 output elements
    assert forward_flops("GridSample", {}, [x, grid], [y]) == 240 * 4 + 60 * (4 + 12)
    assert forward_flops("GridSample", {"mode": "nearest"}, [x, grid], [y]) == 240 + 60 * 4
    assert forward_flops("GridSample", {"mode": "bicubic"}, [x, grid], [y]) == 240 * 16 + 60 * (4 + 48)
    gradients = [grad_flops("GridSample", {}, [x, grid], [y], position, 0.0) for position in (0, 1)]
    assert gradients == [2 * 240 * 4, 2 * 240 * 4 + 4 * 60]
    assert shared_grad_flops("GridSample", {}, [x, grid]) == 60 * 16


def test_a_scatter_with_a_reduction_counts_one_flop_per_update_as_atens_scatter_add():
    """A ``ScatterElements`` or ``ScatterND`` with ``reduction`` add (what ``torch.scatter_add`` and an accumulating
    ``index_put`` export to) was free, where the torch importer counts aten's ``scatter_add`` one add per update."""
    import torch

    from gnplace.importers.flops import op_flops

    data, indices, updates = (10, 8), (6, 8), (6, 8)
    scattered = forward_flops("ScatterElements", {"reduction": "add"}, [data, indices, updates], [data])
    aten = op_flops("scatter_add", (torch.zeros(data), 0, torch.zeros(indices, dtype=torch.long),
                                    torch.zeros(updates)), {}, [torch.zeros(data)])
    assert scattered == aten == 48
    assert forward_flops("ScatterND", {"reduction": "mul"}, [(10, 8), (6, 1), (6, 8)], [(10, 8)]) == 48
    assert forward_flops("ScatterElements", {}, [data, indices, updates], [data]) == 0  # an overwrite moves data
    assert forward_flops("ScatterND", {"reduction": "none"}, [(10, 8), (6, 1), (6, 8)], [(10, 8)]) == 0


@pytest.mark.parametrize("op, inputs, outputs, expected", [
    # (a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point): a MatMul of a and b
    ("QLinearMatMul", [(8, 16), (), (), (16, 32), (), (), (), ()], [(8, 32)], 2 * 8 * 16 * 32),
    ("MatMulInteger", [(8, 16), (16, 32)], [(8, 32)], 2 * 8 * 16 * 32),
    # (x, w, x_zero_point): no bias, though an input is third
    ("ConvInteger", [(2, 3, 8, 8), (4, 3, 3, 3), ()], [(2, 4, 6, 6)], 2 * 2 * 4 * 36 * 27),
    ("QLinearConv", [(2, 3, 8, 8), (), (), (4, 3, 3, 3), (), (), (), ()], [(2, 4, 6, 6)], 2 * 2 * 4 * 36 * 27),
    ("QLinearConv", [(2, 3, 8, 8), (), (), (4, 3, 3, 3), (), (), (), (), (4,)], [(2, 4, 6, 6)],
     2 * 2 * 4 * 36 * 27 + 2 * 4 * 36),
    ("QuantizeLinear", [(8, 16), (), ()], [(8, 16)], 2 * 8 * 16),
    ("DequantizeLinear", [(8, 16), (), ()], [(8, 16)], 2 * 8 * 16),
])
def test_quantized_products_count_as_their_float_forms(op, inputs, outputs, expected):
    """QLinearMatMul, QLinearConv and ConvInteger had no rule: counted at 1 FLOP per output element (with a warning)
    where MatMulInteger counted as a MatMul, and opkinds names all four products."""
    assert forward_flops(op, {}, inputs, outputs) == expected


def test_a_transposed_fused_matmul_reduces_over_its_first_inputs_rows():
    """FusedMatMul's transA takes A [16, 8] as [8, 16]: 16 products per output element, not 8."""
    assert forward_flops("FusedMatMul", {"transA": 1}, [(16, 8), (16, 4)], [(8, 4)]) == 2 * 8 * 4 * 16
    assert forward_flops("FusedMatMul", {}, [(8, 16), (16, 4)], [(8, 4)]) == 2 * 8 * 4 * 16


@pytest.mark.parametrize("layout", [0, 1])
def test_a_recurrent_layers_initial_state_gradient_is_one_step_of_its_batch(layout):
    """5 steps, batch 3, 2 directions, hidden 16: initial_h's gradient is batch x directions x hidden under either
    layout (batch first under layout 1), not seq x directions x hidden."""
    x = (5, 3, 8) if layout == 0 else (3, 5, 8)
    inputs = [x, (2, 64, 8), (2, 64, 16), (2, 128), None, (2, 3, 16)]
    assert grad_flops("LSTM", {"layout": layout}, inputs, [(5, 2, 3, 16)], 5, 0.0) == 3 * 2 * 16


def test_softmax_cross_entropy_counts_the_softmax_and_one_pick_per_sample():
    assert forward_flops("SoftmaxCrossEntropyLoss", {}, [(4, 10), (4,)], [()]) == 5 * 40 + 4


def test_a_3d_attention_splits_its_hidden_size_over_its_heads():
    """q, k, v of [2, 8, 32] with 4 heads: 8 batch-heads of head size 8, as the 4-d [2, 4, 8, 8] form."""
    three = [(2, 8, 32)] * 3
    heads = {"q_num_heads": 4, "kv_num_heads": 4}
    expected = 2 * 8 * 8 * 8 * (8 + 8) + 5 * 8 * 8 * 8
    assert forward_flops("Attention", heads, three, [(2, 8, 32)]) == expected
    assert forward_flops("Attention", {}, [(2, 4, 8, 8)] * 3, [(2, 4, 8, 8)]) == expected


def test_an_attentions_three_gradients_share_atens_backward():
    """aten's attention backward is 8 B Lq Lk d + 10 B Lq Lk for all three gradients: a third each."""
    inputs, out = [(2, 4, 8, 16)] * 3, [(2, 4, 8, 16)]
    grads = [grad_flops("Attention", {}, inputs, out, k, 0.0) for k in range(3)]
    assert grads[0] == grads[1] == grads[2]
    assert sum(grads) == pytest.approx(8 * 8 * 8 * 8 * 16 + 10 * 8 * 8 * 8)


def test_an_einsum_of_three_operands_counts_its_products_left_to_right_as_torch_runs_them():
    """ij,jk,kl->il over i=2, j=3, k=4, l=5 is (ij,jk->ik) then (ik,kl->il): 2 (2 3 4 + 2 4 5) FLOP, as the two
    bmm torch.einsum runs, not two products over the nest of all 120 points (2 2 120, 3.75x as many)."""
    assert forward_flops("Einsum", {"equation": "ij,jk,kl->il"}, [(2, 3), (3, 4), (4, 5)], [(2, 5)]) == 2 * (24 + 40)
    # nn.Bilinear's form: b i o j multiply-adds, then b o j; 1.85x as many when each product looped over all four
    bilinear = forward_flops("Einsum", {"equation": "bi,oij,bj->bo"}, [(4, 12), (6, 12, 12), (4, 12)], [(4, 6)])
    assert bilinear == 2 * (4 * 12 * 6 * 12 + 4 * 6 * 12)
    # an index of one operand that nothing after reads is summed out before the product
    assert forward_flops("Einsum", {"equation": "ij,jk->k"}, [(5, 3), (3, 4)], [(4,)]) == 2 * 3 * 4
    assert forward_flops("Einsum", {"equation": "ij,jk"}, [(2, 3), (3, 4)], [(2, 4)]) == 2 * 2 * 3 * 4


def test_roi_align_nms_dynamic_quantization_and_det_get_rules():
    """Each was 1 FLOP per output element with a warning (RoiAlign 72, its boxes a trainable weight; Det 8)."""
    out = (3, 4, 2, 3)  # 3 boxes, 4 channels, 2 x 3 bins; 2 x 2 samples a bin: 5 FLOP a sample, a divide, 16 a point
    assert forward_flops("RoiAlign", {"sampling_ratio": 2}, [(2, 4, 8, 8), (3, 4), (3,)], [out]) == 72 * 21 + 18 * 64
    assert forward_flops("RoiAlign", {"mode": "max"}, [(2, 4, 8, 8), (3, 4), (3,)], [out]) == 72 * 20 + 18 * 64
    assert grad_flops("RoiAlign", {"sampling_ratio": 1}, [(2, 4, 8, 8), (3, 4), (3,)], [out], 0, 0.0) == 72 * 8 + 18 * 16
    # 2 images, 3 classes, 10 boxes: a threshold and an area per box, an IoU (13) per pair of the 45
    nms = forward_flops("NonMaxSuppression", {}, [(2, 10, 4), (2, 3, 10), (1,)], [(6, 3)])
    assert nms == 2 * 3 * (4 * 10 + 13 * 45)
    assert forward_flops("DynamicQuantizeLinear", {}, [(4, 5)], [(4, 5), (), ()]) == 4 * 20
    assert forward_flops("Det", {}, [(3, 6, 6)], [(3,)]) == 3 * (2 * 6 ** 3 / 3 + 6)  # as aten's _linalg_det
    assert grad_flops("Det", {}, [(3, 6, 6)], [(3,)], 0, 0.0) == 3 * (2 * 6 ** 3 + 36 + 6 + 1)
    assert forward_flops("MaxUnpool", {"kernel_shape": [2, 2]}, [(1, 2, 4, 4), (1, 2, 4, 4)], [(1, 2, 8, 8)]) == 0
    assert "MaxUnpool" in FREE_OPS


def test_a_det_imports_as_torchs_det_and_roi_aligns_boxes_are_no_weights():
    import warnings

    import numpy as np
    import torch
    from onnx import TensorProto, helper, numpy_helper

    from gnplace.importers.onnx import from_onnx
    from gnplace.importers.torch import from_module

    def vi(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    w = numpy_helper.from_array(np.ones((3, 5, 5), np.float32), "w")
    rois = numpy_helper.from_array(np.array([[0, 0, 4, 4], [1, 1, 7, 7]], np.float32), "rois")
    batch = numpy_helper.from_array(np.array([0, 1], np.int64), "batch")
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"], name="mul"), helper.make_node("Det", ["m"], ["d"], name="det"),
             helper.make_node("Unsqueeze", ["m", "axis"], ["img"]),
             helper.make_node("RoiAlign", ["img", "rois", "batch"], ["r"], name="roi", sampling_ratio=2)]
    axis = numpy_helper.from_array(np.array([1], np.int64), "axis")
    graph = helper.make_graph(nodes, "g", [vi("x", [3, 5, 5])], [vi("d", [3]), vi("r", [2, 1, 1, 1])],
                              [w, rois, batch, axis])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 'FLOP rules do not know 2 op types: Det, RoiAlign'
        g = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert "update/rois" not in g.node_names  # the boxes were trained as a weight

    class Det(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3, 5, 5))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.det(self.w * x).sum()

    traced = from_module(Det(), (torch.randn(3, 5, 5),))
    assert g.flops[g.index("det")] == traced.flops[traced.index("root/_linalg_det")]


def test_dft_stft_affine_grid_and_deform_conv_get_rules_as_torchs():
    """DFT 5 n log2 n per complex transform of n points, half that of real input (FFTW's convention, as aten's
    _fft_r2c and _fft_c2c); STFT that per frame plus its window's products; AffineGrid 2 (s + 1) per output
    coordinate, as aten's affine_grid_generator; DeformConv its conv plus bilinear sampling. Each had no rule (1 FLOP
    per output element, and a warning)."""
    import torch

    from gnplace.importers.flops import op_flops

    real, half = torch.zeros(2, 16), torch.zeros(2, 9, dtype=torch.complex64)
    r2c = op_flops("_fft_r2c", (real, [1], 0, True), {}, [half])
    assert forward_flops("DFT", {"axis": 1, "onesided": 1}, [(2, 16, 1)], [(2, 9, 2)]) == r2c == 2 * 2.5 * 16 * 4
    assert forward_flops("DFT", {"axis": -2}, [(3, 2, 16, 2)], [(3, 2, 16, 2)]) == 3 * 2 * 5 * 16 * 4
    frames, bins = 2 * 6, 9  # a 16-point window: each frame's 16 products and its real DFT
    assert forward_flops("STFT", {}, [(2, 100, 1), (), (16,)], [(2, 6, bins, 2)]) == frames * (16 + 2.5 * 16 * 4)
    theta, grid = torch.zeros(2, 2, 3), torch.zeros(2, 5, 6, 2)
    affine = op_flops("affine_grid_generator", (theta, [2, 3, 5, 6], False), {}, [grid])
    assert forward_flops("AffineGrid", {}, [(2, 2, 3), (4,)], [(2, 5, 6, 2)]) == affine == 2 * 3 * 120
    x, w, offset, b, mask, out = (1, 4, 8, 8), (6, 4, 3, 3), (1, 18, 6, 6), (6,), (1, 9, 6, 6), (1, 6, 6, 6)
    conv = forward_flops("Conv", {}, [x, w, b], [out])
    values, points = 36 * 4 * 9, 18 * 36 // 2  # per output location C kernel values, per offset pair a point
    sampling = values * (4 + 1) + points * (2 * 2 + 3 * 4)
    assert forward_flops("DeformConv", {}, [x, w, offset, b, mask], [out]) == conv + sampling
    grads = [grad_flops("DeformConv", {}, [x, w, offset, b, mask], [out], k, 0.0) for k in range(5)]
    assert grads == [2 * values * 4, conv - 216 + values * 5, 2 * values * 4 + 2 * 2 * points, 216, values * 6]
    assert shared_grad_flops("DeformConv", {}, [x, w, offset, b, mask]) == conv - 216 + points * 16


def test_the_ops_of_opsets_23_to_28_get_rules_as_torchs():
    """Swish counts as aten's silu (4 a element, its gradient too), SwiGLU as silu(a) * b (5, each gradient 5);
    CumProd a multiply per element, its gradient aten's reversed cumsum of grad * y over x (3); RotaryEmbedding 6 per
    rotated pair (4 products, 2 sums), its gradient the opposite rotation; TensorScatter and BitCast move data. Each
    was 1 FLOP per output element with a warning."""
    import torch

    from gnplace.importers.flops import op_flops

    a = torch.zeros(4, 5)
    silu = op_flops("silu", (a,), {}, [a])
    assert forward_flops("Swish", {"alpha": 1.5}, [(4, 5)], [(4, 5)]) == silu == 4 * 20
    assert grad_flops("Swish", {}, [(4, 5)], [(4, 5)], 0, 0.0) == op_flops("silu_backward", (a, a), {}, [a]) == 80
    assert forward_flops("SwiGLU", {}, [(4, 5), (4, 5)], [(4, 5)]) == silu + op_flops("mul", (a, a), {}, [a])
    assert [grad_flops("SwiGLU", {}, [(4, 5), (4, 5)], [(4, 5)], k, 0.0) for k in (0, 1)] == [5 * 20, 5 * 20]
    assert forward_flops("CumProd", {}, [(4, 5), ()], [(4, 5)]) == op_flops("cumprod", (a, 1), {}, [a]) == 20
    assert grad_flops("CumProd", {}, [(4, 5), ()], [(4, 5)], 0, 0.0) == 3 * 20
    x, cache, positions = (2, 4, 6, 8), (16, 4), (2, 6)  # 4 heads of 8: all rotated by default, 4 of 8 when told
    assert forward_flops("RotaryEmbedding", {}, [x, cache, cache, positions], [x]) == 3 * 384
    half = [x, (16, 2), (16, 2), positions]
    assert forward_flops("RotaryEmbedding", {"rotary_embedding_dim": 4}, half, [x]) == 3 * 192
    packed = [(2, 6, 32), (2, 6, 2), (2, 6, 2)]  # [B, S, hidden] of 4 heads, caches by batch and position
    assert forward_flops("RotaryEmbedding", {"num_heads": 4}, packed, [(2, 6, 32)]) == 3 * 192
    assert grad_flops("RotaryEmbedding", {"num_heads": 4}, packed, [(2, 6, 32)], 0, 0.0) == 3 * 192
    assert forward_flops("TensorScatter", {"axis": 2}, [(2, 4, 16, 8), (2, 4, 3, 8)], [(2, 4, 16, 8)]) == 0
    assert forward_flops("BitCast", {"to": 6}, [(4, 5)], [(4, 5)]) == 0


def test_an_attention_counts_the_values_head_size_and_its_own_heads():
    """Scores use q's head size, the weighted sum v's: d 16, dv 32 is 2 B Lq Lk (16 + 32) + 5 B Lq Lk (a mutant using
    d twice passed); grouped-query attention (4 query heads, 2 key/value heads, head size 16 each) splits v's hidden
    size over its kv_num_heads (a mutant splitting it over the query heads passed)."""
    four = [(2, 4, 8, 16), (2, 4, 8, 16), (2, 4, 8, 32)]
    assert forward_flops("Attention", {}, four, [(2, 4, 8, 32)]) == 2 * 8 * 8 * 8 * (16 + 32) + 5 * 8 * 8 * 8
    grouped = {"q_num_heads": 4, "kv_num_heads": 2}
    three = [(2, 8, 64), (2, 8, 32), (2, 8, 32)]
    assert forward_flops("Attention", grouped, three, [(2, 8, 64)]) == 2 * 8 * 8 * 8 * (16 + 16) + 5 * 8 * 8 * 8


def test_a_transposed_convolutions_gradients_work_per_input_element_as_its_forward():
    """ConvTranspose's data and weight gradients each cost its forward products, 2 N Cin H W (Cout / group) Kh Kw
    counted over the input (a mutant counting them over the larger output, 4.84x here, passed)."""
    inputs, out = [(1, 4, 5, 5), (4, 2, 3, 3), (2,)], [(1, 2, 11, 11)]
    products = 2 * 4 * 25 * 2 * 9
    assert [grad_flops("ConvTranspose", {}, inputs, out, k, 0.0) for k in range(3)] == [products, products, 2 * 121]


def test_division_power_and_pooling_gradients_follow_aten():
    """Div's, Sqrt's gradients 2 FLOP per element, Pow's 3; a pool's gradient spreads each input element's window
    (MaxPool 3 x 3: 9 per input element). Mutants of 1 for Div, 2 for Pow and 1 per input element passed."""
    s = [(4, 8)]
    assert grad_flops("Div", {}, s * 2, s, 0, 32) == grad_flops("Sqrt", {}, s, s, 0, 32) == 2 * 32
    assert grad_flops("Pow", {}, s * 2, s, 0, 32) == 3 * 32
    pool = {"kernel_shape": [3, 3], "strides": [3, 3]}
    assert grad_flops("MaxPool", pool, [(2, 4, 9, 9)], [(2, 4, 3, 3)], 0, 2 * 4 * 81) == 2 * 4 * 81 * 9
