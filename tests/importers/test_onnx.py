"""Training graphs from ONNX files, against closed forms and against the PyTorch importer."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gnplace.exceptions import InvalidArgument, InvalidGraph, UnknownName, UnsupportedGraph
from gnplace.graph import BACKWARD, FORWARD, UPDATE
from gnplace.graph_io import load_graph, save_graph
from gnplace.importers import OPTIMIZERS
from gnplace.importers.onnx import from_onnx, parse_input_shape
from tests.importers.onnx_models import F, chain_model, conv_model, gemm_model, model, vi, weight


def kinds(g, phase):
    return sorted(g.op_types[i] for i in np.flatnonzero(g.phase == phase))


def phase_flops(g, phase):
    return float(g.flops[g.phase == phase].sum())


# ----------------------------------------------------------------------------- closed forms
def test_gemm_flops_gradients_and_updates():
    m, k, n = 8, 16, 4
    g = from_onnx(gemm_model(m, k, n))
    assert g.flops[g.index("fc")] == 2 * m * k * n + m * n
    # x is an input: no data gradient; the weight gradient costs the product, the bias a reduction
    assert g.flops[g.index("grad/fc/w")] == 2 * m * k * n
    assert g.flops[g.index("grad/fc/c")] == m * n
    assert not any(name.startswith("grad/fc/x") for name in g.node_names)
    assert sorted(g.node_names[i] for i in np.flatnonzero(g.phase == UPDATE)) == ["update/c", "update/w"]
    assert g.param_bytes[g.index("update/w")] == n * k * 4
    assert g.flops[g.index("update/w")] == 2 * n * k
    g.validate()


def test_conv_flops_and_backward_about_twice_forward():
    b, cin, cout, s, kk = 2, 3, 8, 10, 3
    g = from_onnx(conv_model(b, cin, cout, s, kk))
    out = b * cout * s * s
    assert g.flops[g.index("conv1")] == 2 * out * cin * kk * kk + out
    assert g.flops[g.index("conv2")] == 2 * out * cout * kk * kk
    assert g.flops[g.index("grad/conv2/r")] == g.flops[g.index("grad/conv2/w2")] == 2 * out * cout * kk * kk
    assert g.flops[g.index("grad/conv1/b1")] == out
    assert not any(n.startswith("grad/conv1/x") for n in g.node_names)  # the image needs no gradient
    ratio = phase_flops(g, BACKWARD) / phase_flops(g, FORWARD)
    assert 1.5 <= ratio <= 2.1


def test_matmul_add_relu_chain_ops_and_edges():
    batch, width = 8, 16
    g = from_onnx(chain_model(batch, width))
    # the add's gradient to mm0's output is relu's own (aten runs no op for it); to the bias, a reduction
    assert g.node_names == ("mm0", "input/x", "add0", "relu0", "loss", "grad/loss/r0", "grad/relu0/a0",
                            "grad/add0/b0", "grad/mm0/w0", "update/w0", "update/b0")
    f = dict(zip(g.node_names, g.flops.tolist()))
    assert f["mm0"] == 2 * batch * width * width and f["grad/mm0/w0"] == 2 * batch * width * width
    assert f["add0"] == f["relu0"] == f["grad/relu0/a0"] == batch * width
    assert f["grad/add0/b0"] == batch * width
    edges = {(g.node_names[u], g.node_names[v]): b for u, v, b in zip(g.edge_src, g.edge_dst, g.edge_bytes)}
    act = batch * width * 4
    assert edges[("input/x", "mm0")] == act and edges[("mm0", "add0")] == act
    # gradient edges run in reverse, plus the saved activations the gradients read
    assert edges[("grad/relu0/a0", "grad/mm0/w0")] == act and edges[("grad/relu0/a0", "grad/add0/b0")] == act
    assert edges[("relu0", "grad/relu0/a0")] == act  # relu's gradient reads its output
    assert edges[("input/x", "grad/mm0/w0")] == act  # the weight gradient reads the input
    assert edges[("grad/mm0/w0", "update/w0")] == width * width * 4


def test_a_norms_gradients_are_one_op_reading_its_input_and_a_bias_gradient_reads_no_other_input():
    """As aten runs them (native_batch_norm_backward; convolution_backward's bias sum): three norm gradient ops, each
    reading X, the scale and the output, and a bias gradient reading X and W, read 3-4.5x the PyTorch importer's bytes."""
    b, c, s = 2, 4, 6
    nodes = [helper.make_node("Conv", ["x", "w", "cb"], ["h"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["h", "gamma", "beta", "mean", "var"], ["n"], name="bn"),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "h"], ["y"], name="res")]
    inits = [weight("w", c, c, 3, 3), weight("cb", c), weight("gamma", c), weight("beta", c), weight("mean", c),
             numpy_helper.from_array(np.ones(c, dtype=np.float32), "var")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = from_onnx(model(nodes, [vi("x", [b, c, s, s])], [vi("y", [b, c, s, s])], inits))
    act = b * c * s * s * 4
    norm_grads = [n for n in g.node_names if n.startswith("grad/bn/")]
    assert norm_grads == ["grad/bn/h"]  # one op gives dX, dgamma and dbeta
    bn = g.index("grad/bn/h")
    assert g.flops[bn] == 8 * b * c * s * s and g.out_bytes[bn] == act + 2 * c * 4
    edges = {(g.node_names[u], g.node_names[v]): n for u, v, n in zip(g.edge_src, g.edge_dst, g.edge_bytes)}
    readers_of_bn = {u for (u, v) in edges if v == "grad/bn/h"}
    assert "conv" in readers_of_bn and "bn" not in readers_of_bn  # X read, the output not
    assert ("grad/bn/h", "update/gamma") in edges and ("grad/bn/h", "update/beta") in edges
    # the bias gradient reads h's gradient alone (the residual's and the norm's, summed), not x or w
    assert {u for (u, v) in edges if v == "grad/conv/cb"} == {"grad_sum/h"}
    assert not any(n.startswith("grad/res/") for n in g.node_names)  # the residual add passes both through
    g.validate()


def test_backward_about_twice_forward_for_deep_mlp():
    g = from_onnx(chain_model(64, 128, layers=6))
    ratio = phase_flops(g, BACKWARD) / phase_flops(g, FORWARD)
    assert ratio == pytest.approx(2.0, rel=0.15)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_one_update_per_initializer_holding_its_state(optimizer):
    onnx_model = conv_model()
    g = from_onnx(onnx_model, optimizer=optimizer)
    factor, per_element = OPTIMIZERS[optimizer]
    updates = {g.node_names[i]: i for i in np.flatnonzero(g.phase == UPDATE)}
    assert sorted(updates) == sorted(f"update/{t.name}" for t in onnx_model.graph.initializer)
    for t in onnx_model.graph.initializer:
        i = updates[f"update/{t.name}"]
        assert g.param_bytes[i] == np.prod(t.dims) * 4 * factor
        assert g.flops[i] == per_element * np.prod(t.dims)
        assert g.op_types[i] == f"{optimizer}_update"
    assert g.total_param_bytes == sum(np.prod(t.dims) * 4 for t in onnx_model.graph.initializer) * factor
    assert g.meta["optimizer"] == optimizer


def test_groups_hold_an_op_its_gradients_and_its_updates():
    g = from_onnx(conv_model())
    conv1 = g.group[g.index("conv1")]
    for name in ("grad/conv1/w1", "grad/conv1/b1", "update/w1", "update/b1"):
        assert g.group[g.index(name)] == conv1
    assert g.group[g.index("conv2")] == g.group[g.index("grad/conv2/r")] == g.group[g.index("update/w2")]
    assert len({int(g.group[g.index(n)]) for n in ("conv1", "relu", "conv2", "loss")}) == 4
    assert g.group[g.index("input/x")] == conv1  # an input joins its first reader


def test_shared_weight_gets_one_update_a_read_op_and_summed_gradients():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="first"),
             helper.make_node("Tanh", ["h"], ["t"], name="tanh"),
             helper.make_node("MatMul", ["t", "w"], ["y"], name="second")]
    g = from_onnx(model(nodes, [vi("x", [4, 8])], [vi("y", [4, 8])], [weight("w", 8, 8)]))
    assert [n for n in g.node_names if n.startswith("update/")] == ["update/w"]
    read, first, second = g.index("read/w"), g.index("first"), g.index("second")
    assert g.group[read] == g.group[first] == g.group[g.index("update/w")] != g.group[second]
    edges = set(zip(g.edge_src.tolist(), g.edge_dst.tolist()))
    assert (read, second) in edges and (read, g.index("grad/second/t")) in edges
    summed = g.index("grad_sum/w")
    assert (g.index("grad/first/w"), summed) in edges and (g.index("grad/second/w"), summed) in edges
    assert (summed, g.index("update/w")) in edges


def test_shape_computations_and_views_are_folded():
    # y = relu(reshape(transpose(x @ w), shape computed from Shape(x)))
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Transpose", ["h"], ["t"], name="tr", perm=[1, 0]),
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["s0"], name="gather_shape", axis=0),
        helper.make_node("Unsqueeze", ["s0", "axes"], ["s0u"], name="unsq"),
        helper.make_node("Concat", ["minus1", "s0u"], ["newshape"], name="concat_shape", axis=0),
        helper.make_node("Reshape", ["t", "newshape"], ["r"], name="reshape"),
        helper.make_node("Relu", ["r"], ["y"], name="relu"),
    ]
    inits = [weight("w", 6, 6), numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    g = from_onnx(model(nodes, [vi("x", [4, 6])], [vi("y", [6, 4])], inits))
    assert kinds(g, FORWARD) == ["MatMul", "Relu", "input", "loss"]
    assert (g.index("mm"), g.index("relu")) in set(zip(g.edge_src.tolist(), g.edge_dst.tolist()))
    assert [n for n in g.node_names if n.startswith("update/")] == ["update/w"]  # int constants are not trained


def _heads_model(batch, seq, baked_seq):
    """Attention scores of [batch, seq, 32] tokens whose key reshape holds a sequence length traced at ``baked_seq``."""
    const = numpy_helper.from_array
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"),
             helper.make_node("Reshape", ["h", "kshape"], ["k"], name="k_heads"),  # [batch, baked_seq, 4, 8]
             helper.make_node("Transpose", ["k"], ["kt"], name="k_t", perm=[0, 2, 3, 1]),
             helper.make_node("Reshape", ["h", "qshape"], ["q0"], name="q_heads"),  # [batch, seq, 4, 8] via 0 and -1
             helper.make_node("Transpose", ["q0"], ["q"], name="q_t", perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["q", "kt"], ["scores"], name="scores")]
    inits = [weight("w", 32, 32), const(np.array([0, baked_seq, 4, 8], np.int64), "kshape"),
             const(np.array([0, -1, 4, 8], np.int64), "qshape")]
    return model(nodes, [vi("x", [batch, seq, 32])], [vi("scores", None)], inits)


def test_a_view_that_changes_the_element_count_is_malformed():
    """A Reshape that keeps a traced size gave [4, 64, 10] attention scores instead of [4, 64, 64], and exit 0."""
    traced = from_onnx(_heads_model(2, 10, baked_seq=10))  # consistent at the traced length
    assert traced.flops[traced.index("scores")] == 2 * 2 * 4 * 10 * 10 * 8
    with pytest.raises(InvalidGraph, match=r"node 'k_heads' \(Reshape\) turns shape \[2, 64, 32\] \(4096 elements\) "
                       r"into \[2, 10, 4, 8\] \(640 elements\).*baked in by the exporter"):
        from_onnx(_heads_model(2, 64, baked_seq=10))
    # the same file exported with a dynamic sequence, imported at another length
    with pytest.raises(InvalidGraph, match=r"node 'k_heads' \(Reshape\) turns shape \[2, 64, 32\]"):
        from_onnx(_heads_model(2, "T", baked_seq=10), input_shapes={"x": [2, 64, 32]})
    g = from_onnx(_heads_model(2, "T", baked_seq=10), input_shapes={"x": [2, 10, 32]})
    assert g.flops[g.index("scores")] == 2 * 2 * 4 * 10 * 10 * 8


def test_model_returning_a_scalar_is_its_own_loss():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("ReduceMean", ["h"], ["loss_value"], name="mean", keepdims=0)]
    g = from_onnx(model(nodes, [vi("x", [4, 8])], [vi("loss_value", [])], [weight("w", 8, 2)]))
    assert "loss" not in g.op_types
    assert g.flops[g.index("mean")] == 4 * 2 and g.flops[g.index("grad/mean/h")] == 4 * 2


def test_batch_norm_statistics_are_not_trained():
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], name="conv"),
             helper.make_node("BatchNormalization", ["h", "scale", "bias", "mean", "var"], ["y"], name="bn")]
    inits = [weight("w", 4, 3, 3, 3), weight("scale", 4), weight("bias", 4), weight("mean", 4), weight("var", 4)]
    g = from_onnx(model(nodes, [vi("x", [2, 3, 8, 8])], [vi("y", [2, 4, 6, 6])], inits))
    assert sorted(n for n in g.node_names if n.startswith("update/")) == ["update/bias", "update/scale", "update/w"]
    assert g.flops[g.index("bn")] == 5 * 2 * 4 * 6 * 6
    assert from_onnx(model(nodes, [vi("x", [2, 3, 8, 8])], [vi("y", [2, 4, 6, 6])], inits),
                     trainable=["w"]).total_param_bytes == 4 * 3 * 3 * 3 * 4


def test_op_types_without_a_rule_are_counted_per_output_element_and_warned_once():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             # a standard op (opset 27) without a rule, its state output unread
             helper.make_node("LinearAttention", ["h3", "h3", "h3"], ["n", "state"], name="linear_attention",
                              q_num_heads=1, kv_num_heads=1, update_rule="linear"),
             helper.make_node("Reshape", ["h", "shape3"], ["h3"], name="to3d"),
             helper.make_node("Mystery", ["n"], ["m1"], name="mystery1", domain="my.ops"),
             helper.make_node("Mystery", ["m1"], ["y"], name="mystery2", domain="my.ops")]
    inits = [weight("w", 8, 8), numpy_helper.from_array(np.array([2, 4, 8], np.int64), "shape3")]
    onnx_model = model(nodes, [vi("x", [8, 8])], [vi("y", [2, 2])], inits, value_info=[vi("m1", [2, 2])], opset=27)
    onnx_model.opset_import.append(helper.make_opsetid("my.ops", 1))
    with pytest.raises(UnsupportedGraph, match="node 'mystery1' is my.ops.Mystery, an op of a custom domain"):
        from_onnx(onnx_model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = from_onnx(onnx_model, allow_unknown_ops=True)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "2 op types" in messages[0]
    assert "LinearAttention" in messages[0] and "my.ops.Mystery" in messages[0]
    # its output [2, 4, 8] and its state [batch 2, 1 head, 8, 8]
    assert g.flops[g.index("mystery1")] == 4 and g.flops[g.index("linear_attention")] == 2 * 4 * 8 + 2 * 8 * 8


def test_the_ops_of_opsets_23_to_28_import_with_rules_and_gradients():
    """Swish, SwiGLU, CumProd, RotaryEmbedding, TensorScatter and BitCast were counted at 1 FLOP per output element
    and warned of; now each has its rule, the differentiable ones a gradient, and RotaryEmbedding's cosine and sine
    caches (initializers, as an exporter writes them) are no weights, nor are its positions."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Swish", ["h"], ["s"], name="swish", alpha=1.5),
             helper.make_node("SwiGLU", ["s", "h"], ["g"], name="swiglu"),
             helper.make_node("CumProd", ["g", "axis"], ["c"], name="cumprod"),
             helper.make_node("RotaryEmbedding", ["c", "cos", "sin", "positions"], ["r"], name="rope", num_heads=4,
                              rotary_embedding_dim=4),
             helper.make_node("TensorScatter", ["past", "r"], ["y"], name="cache", axis=1),
             helper.make_node("BitCast", ["y"], ["bits"], name="bitcast", to=TensorProto.INT32)]
    inits = [weight("w", 32, 32), weight("cos", 16, 2), weight("sin", 16, 2),
             numpy_helper.from_array(np.zeros((2, 6), np.int64), "positions"),
             numpy_helper.from_array(np.array(1, np.int64), "axis")]
    proto = model(nodes, [vi("x", [2, 6, 32]), vi("past", [2, 10, 32])],
                  [vi("y", [2, 10, 32]), vi("bits", [2, 10, 32], TensorProto.INT32)], inits, opset=28)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 'FLOP rules do not know 6 op types'
        g = from_onnx(proto)
    n, rotated = 2 * 6 * 32, 2 * 6 * 4 * 4  # 4 heads of 8 values, 4 of them rotated
    assert [g.flops[g.index(name)] for name in ("swish", "swiglu", "cumprod", "rope", "cache", "bitcast")] == [
        4 * n, 5 * n, n, 3 * rotated, 0, 0]
    assert [g.flops[g.index(f"grad/{name}")] for name in ("swish/h", "swiglu/s", "swiglu/h", "cumprod/g", "rope/c",
                                                          "cache/r")] == [4 * n, 5 * n, 5 * n, 3 * n, 3 * rotated, 0]
    assert [name for name in g.node_names if name.startswith("update/")] == ["update/w"]
    assert not any(name.startswith("grad/bitcast") for name in g.node_names)


def _zoo_lrn_model(opset: int) -> onnx.ModelProto:
    """Conv, then LRN(size 5), as the ONNX model zoo's AlexNet and GoogLeNet write it: opset 7 or 9 files of IR
    version 3 or 4, whose weights are also graph inputs (IR 3 requires it)."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["h"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("LRN", ["h"], ["y"], name="lrn", size=5, alpha=1e-4, beta=0.75, bias=1.0)]
    inits = [weight("w", 8, 3, 3, 3), weight("b", 8)]
    proto = model(nodes, [vi("x", [2, 3, 8, 8]), vi("w", [8, 3, 3, 3]), vi("b", [8])], [vi("y", [2, 8, 8, 8])],
                  inits, opset=opset)
    proto.ir_version = 3 if opset < 9 else 4
    return proto


@pytest.mark.parametrize("opset", [7, 9])
def test_an_lrn_counts_as_the_torch_importer_counts_local_response_norm(opset):
    """LRN had no FLOP rule: counted at 1 FLOP per output element (1,024 forward, 1,024 backward) with a warning,
    where torch's LocalResponseNorm(5) runs 10 per element forward (x * x, a window mean of 5, * alpha, + k, ** beta,
    x / that) and 13 per element plus the window mean's backward (5 per element of x * x padded by 4 channels)."""
    import torch
    from torch import nn

    from gnplace.importers.torch import from_module

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = from_onnx(_zoo_lrn_model(opset))
    numel = 2 * 8 * 8 * 8
    assert g.flops[g.index("lrn")] == 10 * numel
    assert g.flops[g.index("grad/lrn/h")] == 13 * numel + 5 * 2 * 12 * 8 * 8
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.LocalResponseNorm(5, 1e-4, 0.75, 1.0))
    torch_graph = from_module(net, (torch.randn(2, 3, 8, 8),), loss=lambda y: y.sum())
    in_lrn = [k for k, module in enumerate(torch_graph.module) if module == "1"]
    for phase in (FORWARD, BACKWARD):
        mine = sum(float(torch_graph.flops[k]) for k in in_lrn if torch_graph.phase[k] == phase)
        assert mine == g.flops[g.index("lrn" if phase == FORWARD else "grad/lrn/h")]


def test_an_ir_3_file_that_does_not_list_its_initializers_as_inputs_imports_as_one_that_does():
    """Shape inference of IR version 3 reads the types of listed initializers alone: conv's output had no static
    shape, and the file was refused with advice to give --input-shape; the caller's model stays at IR 3."""
    listed = _zoo_lrn_model(7)
    unlisted = onnx.ModelProto()
    unlisted.CopyFrom(listed)
    del unlisted.graph.input[1:]
    g, expected = from_onnx(unlisted), from_onnx(listed)
    assert g.node_names == expected.node_names and list(g.flops) == list(expected.flops)
    assert g.flops[g.index("conv")] == 2 * 2 * 8 * 64 * 27 + 2 * 8 * 64
    assert unlisted.ir_version == 3


def test_onnx_runtimes_attention_is_not_read_as_the_standard_one():
    """com.microsoft Attention (input, packed QKV weights, bias) got the rule of ONNX's (Q, K, V): an IndexError."""
    nodes = [helper.make_node("Attention", ["x", "qkv_w", "qkv_b"], ["y"], name="attn", domain="com.microsoft",
                              num_heads=4)]
    inits = [weight("qkv_w", 16, 48), numpy_helper.from_array(np.zeros(48, np.float32), "qkv_b")]
    onnx_model = model(nodes, [vi("x", [2, 8, 16])], [vi("y", [2, 8, 16])], inits)
    onnx_model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(UnsupportedGraph, match="node 'attn' is com.microsoft.Attention, an op of a custom domain"):
        from_onnx(onnx_model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert "attn" in from_onnx(onnx_model, allow_unknown_ops=True).node_names


def test_round_trip_through_a_graph_file(tmp_path):
    g = from_onnx(conv_model(), name="conv_net")
    assert load_graph(save_graph(g, tmp_path / "conv.gnpg")) == g
    assert g.name == "conv_net" and g.meta["source"] == "onnx" and g.meta["input_shapes"] == {"x": [2, 3, 10, 10]}


def test_reads_files_and_names_the_graph_after_them(tmp_path):
    path = tmp_path / "chain.onnx"
    path.write_bytes(chain_model().SerializeToString())
    g = from_onnx(path)
    assert g.name == "chain" and g == from_onnx(str(path))


def _lstm_model(x_needs_grad, steps=5, batch=4, size_in=16, hidden=32):
    """An LSTM reading the model input, or reading it through a MatMul (then X needs a gradient)."""
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["x1"], name="pre")] if x_needs_grad else []
    nodes.append(helper.make_node("LSTM", ["x1" if x_needs_grad else "x", "W", "R", "B"], ["y"], name="lstm",
                                  hidden_size=hidden))
    inits = [weight("W", 1, 4 * hidden, size_in), weight("R", 1, 4 * hidden, hidden), weight("B", 1, 8 * hidden)]
    inits += [weight("w0", size_in, size_in)] if x_needs_grad else []
    return model(nodes, [vi("x", [steps, batch, size_in])], [vi("y", [steps, 1, batch, hidden])], inits)


def test_lstm_backward_through_time_is_counted_when_x_needs_no_gradient():
    """Back-propagation through time was charged to dX only, so it vanished when the LSTM read the model input."""
    rows, gates, size_in, hidden = 5 * 4, 4 * 32, 16, 32
    d_w, d_r, d_b = rows * 2 * gates * size_in, rows * 2 * gates * hidden, rows * 2 * gates
    through_time = rows * (2 * gates * hidden + 2 * 32 * hidden)  # dh_{t-1} = dgates R, and the cell's backward
    g = from_onnx(_lstm_model(x_needs_grad=False))
    grads = {n: float(g.flops[i]) for i, n in enumerate(g.node_names) if g.op_types[i] == "LSTM_grad"}
    assert sorted(grads) == ["grad/lstm/B", "grad/lstm/R", "grad/lstm/W"]
    assert sum(grads.values()) == d_w + d_r + d_b + through_time
    assert grads["grad/lstm/W"] == d_w + through_time  # on the first gradient op, once
    # with a gradient for X the totals are unchanged: dX = dgates W plus the way back through time
    g = from_onnx(_lstm_model(x_needs_grad=True))
    grads = {n: float(g.flops[i]) for i, n in enumerate(g.node_names) if g.op_types[i] == "LSTM_grad"}
    d_x = rows * 2 * gates * size_in
    assert grads["grad/lstm/x1"] == d_x + through_time
    assert grads["grad/lstm/W"] == d_w and sum(grads.values()) == d_x + d_w + d_r + d_b + through_time


def _rnn_with_initial_state(kind, shared=False, steps=5, batch=3, size_in=8, hidden=16):
    """Two stacked LSTM or GRU layers whose zero initial state is one initializer, as torch.onnx's exporter writes it.

    With ``shared`` the state is also added to the output (a read that is no state: it makes the initializer a weight).
    """
    gates = 4 if kind == "LSTM" else 3
    states = ["h0", "h0"] if kind == "LSTM" else ["h0"]
    nodes, inits = [], [weight("h0", 1, batch, hidden)]
    x = "x"
    for layer in range(2):
        nodes += [helper.make_node(kind, [x, f"W{layer}", f"R{layer}", f"B{layer}", "", *states], [f"y{layer}"],
                                   name=f"{kind.lower()}{layer}", hidden_size=hidden),
                  helper.make_node("Squeeze", [f"y{layer}", "axis"], [f"s{layer}"])]
        inits += [weight(f"W{layer}", 1, gates * hidden, size_in if layer == 0 else hidden),
                  weight(f"R{layer}", 1, gates * hidden, hidden), weight(f"B{layer}", 1, 2 * gates * hidden)]
        x = f"s{layer}"
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "axis"))
    if shared:
        nodes.append(helper.make_node("Add", [x, "h0"], ["out"], name="add"))
        x = "out"
    return model(nodes, [vi("x", [steps, batch, size_in])], [vi(x, [steps, batch, hidden])], inits)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_a_recurrent_layers_initial_state_is_no_trainable_weight(kind):
    """The initial state (LSTM inputs 5 and 6, GRU input 5) got an update op and 192 parameter bytes."""
    proto = _rnn_with_initial_state(kind)
    weights = [t for t in proto.graph.initializer if t.name not in ("h0", "axis")]
    g = from_onnx(proto)
    assert sorted(n for n in g.node_names if n.startswith("update/")) == sorted(f"update/{t.name}" for t in weights)
    assert g.total_param_bytes == sum(np.prod(t.dims) * 4 for t in weights)
    # named, it is trained (its gradient flows through both layers); read as a weight elsewhere too, it is one
    for g in (from_onnx(proto, trainable=[t.name for t in weights] + ["h0"]), from_onnx(_rnn_with_initial_state(
            kind, shared=True))):
        assert "update/h0" in g.node_names
        assert g.total_param_bytes == sum(np.prod(t.dims) * 4 for t in weights) + 3 * 16 * 4


def _signed(proto, parameters, buffers=(), scope=None):
    """``proto`` with the graph signature torch.export records, and each node in module ``scope`` (its metadata)."""
    lines = [f"p_{t.replace('.', '_')}: PARAMETER target='{t}'" for t in parameters]
    lines += [f"b_{t.replace('.', '_')}: BUFFER target='{t}' persistent=True" for t in buffers]
    proto.graph.metadata_props.add(key="pkg.torch.export.ExportedProgram.graph_signature",
                                   value="\n# inputs\n" + "\n".join(lines) + "\nx: USER_INPUT\n")
    if scope is not None:
        for node in proto.graph.node:
            node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(["", scope, node.op_type.lower()]))
    return proto


def _constant(name, value, *shape):
    return numpy_helper.from_array(np.full(shape, value, np.float32), name)


def _group_norm(signed=True, groups=2, channels=8):
    """GroupNorm(groups, channels) on [2, channels, 4, 4] as torch.onnx's optimised export writes it: an
    InstanceNormalization over the groups with a unit scale and zero bias it made (val_8, val_11), then the module's
    weight and bias, reshaped (val_21, val_23). With as many groups as channels (GroupNorm(4, 4)) the regrouping keeps
    the channel size but not the rank ([2, 4, 4, 4] -> [2, 4, 16])."""
    nodes = [helper.make_node("Reshape", ["x", "grouped"], ["g"], name="regroup"),
             helper.make_node("InstanceNormalization", ["g", "val_8", "val_11"], ["n"], name="norm"),
             helper.make_node("Reshape", ["n", "back"], ["r"], name="ungroup"),
             helper.make_node("Mul", ["r", "val_21"], ["m"], name="scale"),
             helper.make_node("Add", ["m", "val_23"], ["y"], name="shift")]
    inits = [_constant("val_8", 1, groups), _constant("val_11", 0, groups), _constant("val_21", 1, channels, 1, 1),
             _constant("val_23", 0, channels, 1, 1),
             numpy_helper.from_array(np.array([2, groups, -1], np.int64), "grouped"),
             numpy_helper.from_array(np.array([2, channels, 4, 4], np.int64), "back")]
    proto = model(nodes, [vi("x", [2, channels, 4, 4])], [vi("y", [2, channels, 4, 4])], inits)
    return _signed(proto, ["gn.weight", "gn.bias"], scope="gn") if signed else proto


def _unrolled_rnn(signed=True, batch=3, hidden=16):
    """The first two steps of an exported nn.RNN: the first step from the zero state is folded to the constant
    ``linear_1`` (the hidden bias once per example); the hidden weight is folded to its transpose (``val_39``)."""
    bias = np.arange(hidden, dtype=np.float32)
    nodes = [helper.make_node("Add", ["linear_1", "x"], ["a1"], name="step1"),
             helper.make_node("Tanh", ["a1"], ["h1"], name="tanh1"),
             helper.make_node("MatMul", ["h1", "val_39"], ["m2"], name="hidden2"),
             helper.make_node("Add", ["m2", "rnn.bias_hh_l0"], ["l2"], name="bias2"),
             helper.make_node("Tanh", ["l2"], ["y"], name="tanh2")]
    inits = [numpy_helper.from_array(np.broadcast_to(bias, (1, batch, hidden)).copy(), "linear_1"),
             weight("val_39", hidden, hidden), numpy_helper.from_array(bias, "rnn.bias_hh_l0")]
    proto = model(nodes, [vi("x", [batch, hidden])], [vi("y", [1, batch, hidden])], inits)
    return _signed(proto, ["rnn.weight_hh_l0", "rnn.bias_hh_l0"], scope="rnn") if signed else proto


def updates(g):
    return sorted(n.removeprefix("update/") for n in g.node_names if n.startswith("update/"))


def test_a_group_norms_unit_scale_and_zero_bias_are_no_trainable_weights():
    """GroupNorm's export made a unit scale and zero bias for the groups: they were trained (+16 B)."""
    g = from_onnx(_group_norm())
    assert updates(g) == ["val_21", "val_23"] and g.total_param_bytes == 2 * 8 * 4
    # without torch.export's signature nothing tells a made constant from a weight: all are trained, as before
    assert updates(from_onnx(_group_norm(signed=False))) == ["val_11", "val_21", "val_23", "val_8"]


def test_an_rnns_folded_first_step_is_no_trainable_weight():
    """nn.RNN's first step from the zero state, folded to a constant, was trained (+192 B a layer)."""
    g = from_onnx(_unrolled_rnn())
    assert updates(g) == ["rnn.bias_hh_l0", "val_39"]  # the transposed weight stands for rnn.weight_hh_l0
    assert g.total_param_bytes == (16 * 16 + 16) * 4
    assert updates(from_onnx(_unrolled_rnn(signed=False))) == ["linear_1", "rnn.bias_hh_l0", "val_39"]


def test_the_signature_decides_parameters_buffers_and_the_constants_of_modules_without_weights():
    # LayerNorm(16, elementwise_affine=False) gets a made unit scale; a float buffer multiplies; a parameter of
    # one element is still too small to count (as before)
    nodes = [helper.make_node("LayerNormalization", ["x", "val_2"], ["n"], name="ln"),
             helper.make_node("Mul", ["n", "mask"], ["m"], name="masked"),
             helper.make_node("MatMul", ["m", "fc.weight"], ["y"], name="fc")]
    inits = [_constant("val_2", 1, 16), _constant("mask", 1, 16), weight("fc.weight", 16, 4)]
    proto = model(nodes, [vi("x", [8, 16])], [vi("y", [8, 4])], inits)
    for node, scope in zip(proto.graph.node, ["ln", "", "fc"]):
        node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(["", scope, node.op_type]))
    assert updates(from_onnx(proto)) == ["fc.weight", "mask", "val_2"]
    assert updates(from_onnx(_signed(proto, ["fc.weight"], buffers=["mask"]))) == ["fc.weight"]
    # named by the caller, they are trained
    assert updates(from_onnx(proto, trainable=["val_2", "mask", "fc.weight"])) == ["fc.weight", "mask", "val_2"]


@pytest.mark.parametrize("make", ["GroupNorm", "RNN", "LayerNorm", "InstanceNorm2d"])
def test_an_optimised_export_has_the_parameter_bytes_of_the_torch_importer(make):
    """torch.onnx's optimised export folds constants into initializers that were trained (+16 B for GroupNorm,
    +384 B for a two-layer RNN, the unit scale of a LayerNorm or InstanceNorm without affine weights)."""
    import torch
    from torch import nn

    from gnplace.importers.torch import from_module

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.layer = {"GroupNorm": lambda: nn.GroupNorm(2, 8), "RNN": lambda: nn.RNN(8, 16, num_layers=2),
                          "LayerNorm": lambda: nn.LayerNorm(4, elementwise_affine=False),
                          "InstanceNorm2d": lambda: nn.InstanceNorm2d(8)}[make]()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.conv(x)
            return self.layer(h.flatten(2).permute(2, 0, 1))[0] if make == "RNN" else self.layer(h)

    torch.manual_seed(0)
    net, inputs = Net(), (torch.randn(2, 3, 6, 6),)
    proto = _export(net, inputs, "dynamo-optimized")
    torch_graph = from_module(net, inputs, loss=lambda out: out.square().mean())
    assert from_onnx(proto).total_param_bytes == torch_graph.total_param_bytes


def _dropout_model(mode=True, ratio: float | str | None = 0.1, mask: str = "", opset=17, attrs=None):
    """MatMul -> Dropout -> MatMul; ``mode`` and ``ratio`` as Constant nodes (``None``: the input left out), ``"r"``
    a graph input, ``"init"`` an initializer of 0.2; ``mode`` ``"input"`` a graph input, ``"not"`` the Not of one,
    ``"not false"`` the Not of a Constant false, ``"cast"`` a Cast to bool of a Constant int64 1 (``"cast 0"``: of 0);
    ``mask``: ``""`` no mask output, ``"named"`` one nothing reads, ``"read"`` one a Cast reads; ``attrs`` the
    Dropout's (``is_test`` and ``ratio`` before opset 7: an attribute there)."""
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1")]
    extra, outputs, inits = [], [vi("y", [8, 4])], [weight("w1", 16, 32), weight("w2", 32, 4)]
    inputs = ["h", "ratio" if ratio is not None else "", "mode" if mode is not None else ""]
    if isinstance(ratio, float):
        nodes.append(helper.make_node("Constant", [], ["ratio"], value=numpy_helper.from_array(np.float32(ratio))))
    elif ratio == "r":
        inputs[1] = "r"
        extra.append(vi("r", [], elem=F))
    elif ratio == "init":
        inits.append(numpy_helper.from_array(np.float32(0.2), "ratio"))
    if mode in ("input", "not"):
        extra.append(vi("train" if mode == "input" else "evaluating", [], elem=TensorProto.BOOL))
        if mode == "not":
            nodes.append(helper.make_node("Not", ["evaluating"], ["mode"], name="not"))
        else:
            inputs[2] = "train"
    elif mode == "not false":
        nodes += [helper.make_node("Constant", [], ["false"], value=numpy_helper.from_array(np.bool_(False))),
                  helper.make_node("Not", ["false"], ["mode"], name="not")]
    elif mode in ("cast", "cast 0"):
        one = np.int64(mode == "cast")
        nodes += [helper.make_node("Constant", [], ["flag"], value=numpy_helper.from_array(one)),
                  helper.make_node("Cast", ["flag"], ["mode"], name="cast_mode", to=TensorProto.BOOL)]
    elif mode is not None:
        nodes.append(helper.make_node("Constant", [], ["mode"], value=numpy_helper.from_array(np.bool_(mode))))
    drop_out = ["d", "m"] if mask else ["d"]
    nodes += [helper.make_node("Dropout", [x for x in inputs if opset >= 12 or x == "h"], drop_out, name="drop",
                               **(attrs or {})),
              helper.make_node("MatMul", ["d", "w2"], ["y"], name="mm2")]
    if mask == "read":
        nodes.append(helper.make_node("Cast", ["m"], ["mf"], name="cast", to=F))
        outputs.append(vi("mf", [8, 32]))
    return model(nodes, [vi("x", [8, 16]), *extra], outputs, inits, opset=opset)


@pytest.mark.parametrize("mode, ratio, mask, opset", [
    (True, 0.1, "", 17), (True, None, "", 17), (True, 0.5, "named", 17), (True, 0.1, "read", 17),
    (True, "r", "", 17), (True, "init", "", 17),
])
def test_a_training_dropout_is_an_op_keeping_its_mask_whose_gradient_reads_the_mask(mode, ratio, mask, opset):
    """A training-mode Dropout (torch.onnx.export of a module in train()) was folded as a view: no op, no mask, no
    gradient, where the PyTorch importer has bernoulli_, div_ and mul (2 FLOP per element) and a mul's gradient."""
    g = from_onnx(_dropout_model(mode, ratio, mask, opset))
    numel = 8 * 32
    drop, grad = g.index("drop"), g.index("grad/drop/h")
    assert g.op_types[drop] == "Dropout" and g.op_kinds[drop] == "dropout" and g.op_kinds[grad] == "dropout_grad"
    assert g.flops[drop] == 2 * numel and g.flops[grad] == numel
    assert g.out_bytes[drop] == numel * 4 + numel  # the output and its bool mask, named or not
    edges = {(g.node_names[u], g.node_names[v]): b for u, v, b in zip(g.edge_src, g.edge_dst, g.edge_bytes)}
    assert edges[("drop", "mm2")] == numel * 4 and edges[("mm1", "drop")] == numel * 4
    # the gradient reads the output's gradient and the mask, not the input (nor the output)
    assert {u for (u, v) in edges if v == "grad/drop/h"} == {"drop", "grad/mm2/d"}
    assert edges[("drop", "grad/drop/h")] == numel and g.out_bytes[grad] == numel * 4
    assert edges[("grad/drop/h", "grad/mm1/w1")] == numel * 4
    if mask == "read":
        assert edges[("drop", "cast")] == numel
    g.validate()


@pytest.mark.parametrize("mode, opset, attrs", [("input", 17, {}), ("not", 17, {}), (None, 6, {}),
                                               (None, 6, {"ratio": 0.1, "is_test": 0})])
def test_a_dropout_whose_mode_a_graph_input_gives_or_before_opset_7_trains(mode, opset, attrs):
    """A training_mode fed by a graph input, and an opset-6 Dropout (is_test 0 by default), were views: the first is
    the mode of the training step (with one warning), the second a training dropout by the opset's spec."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = from_onnx(_dropout_model(mode, None, opset=opset, attrs=attrs))
    drop = g.index("drop")
    assert g.op_types[drop] == "Dropout" and g.flops[drop] == 2 * 8 * 32 and g.out_bytes[drop] == 8 * 32 * 5
    assert g.flops[g.index("grad/drop/h")] == 8 * 32
    said = [str(w.message) for w in caught]
    if mode is None:
        assert said == []
    else:
        assert len(said) == 1 and "1 Dropout nodes ('drop') take training_mode from the graph's inputs" in said[0]


@pytest.mark.parametrize("mode", ["not false", "cast"])
def test_a_dropout_whose_mode_is_computed_from_constants_reads_it_as_onnx_evaluates_it(mode):
    """training_mode = Not(Constant false), or Cast(Constant 1) to bool, is true; it was read as inference mode (a
    view: no Dropout op, no 512 FLOP forward nor 256 backward); no warning, as for a constant mode."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = from_onnx(_dropout_model(mode, 0.1))
    drop = g.index("drop")
    assert g.op_types[drop] == "Dropout" and g.flops[drop] == 2 * 8 * 32 and g.out_bytes[drop] == 8 * 32 * 5
    assert g.flops[g.index("grad/drop/h")] == 8 * 32


def test_a_dropout_mode_computed_by_a_chain_that_reads_each_value_several_times_computes_each_once(monkeypatch):
    """training_mode = Cast(v8), v(k+1) = Max(vk, vk, vk, vk), v0 a Constant 1: each node is computed once (9
    evaluations); each was computed once per path to it, 4 ** 8 / 3 = 21,845 evaluations (4.0 s), and a chain of 15 such
    nodes (the depth allowed) about 4 ** 15 / 3, 358 million (some 18 hours at the 0.18 ms each took)."""
    import gnplace.importers.onnx as onnx_importer

    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Constant", [], ["v0"], value=numpy_helper.from_array(np.int64(1)))]
    nodes += [helper.make_node("Max", [f"v{k}"] * 4, [f"v{k + 1}"], name=f"max{k}") for k in range(8)]
    nodes += [helper.make_node("Cast", ["v8"], ["mode"], name="cast_mode", to=TensorProto.BOOL),
              helper.make_node("Constant", [], ["ratio"], value=numpy_helper.from_array(np.float32(0.1))),
              helper.make_node("Dropout", ["h", "ratio", "mode"], ["d"], name="drop"),
              helper.make_node("MatMul", ["d", "w2"], ["y"], name="mm2")]
    evaluated = []
    evaluate = onnx_importer.evaluate_node
    monkeypatch.setattr(onnx_importer, "evaluate_node", lambda node, *args: evaluated.append(node.name) or evaluate(
        node, *args))
    g = from_onnx(model(nodes, [vi("x", [8, 16])], [vi("y", [8, 4])], [weight("w1", 16, 32), weight("w2", 32, 4)]))
    assert g.op_types[g.index("drop")] == "Dropout"
    assert sorted(evaluated) == sorted(["cast_mode", *(f"max{k}" for k in range(8))])


@pytest.mark.parametrize("mode, ratio, opset, attrs", [
    (False, 0.1, 17, {}), (None, 0.1, 17, {}), (True, 0.0, 17, {}), (True, 0.1, 11, {}), (True, 0.1, 7, {}),
    ("cast 0", 0.1, 17, {}),
    (None, None, 6, {"is_test": 1}), (None, None, 6, {"ratio": 0.0}),
])
def test_an_inference_mode_or_ratio_0_dropout_stays_a_view(mode, ratio, opset, attrs):
    g = from_onnx(_dropout_model(mode, ratio, opset=opset, attrs=attrs))
    assert "Dropout" not in g.op_types and "Dropout_grad" not in g.op_types
    edges = {(g.node_names[u], g.node_names[v]) for u, v in zip(g.edge_src, g.edge_dst)}
    assert ("mm1", "mm2") in edges


# ----------------------------------------------------------------------------- sizes (input sizes and what they bind: test_onnx_model.py)
@pytest.mark.parametrize("text", ["x", "x=", "=1,2", "x=1,a", "x=1,-2", "x=1,,2"])
def test_parse_input_shape_rejects_malformed_text(text):
    if text == "x=":
        assert parse_input_shape(text) == ("x", [])  # a scalar input
        return
    with pytest.raises(InvalidArgument, match="NAME=D1,D2"):
        parse_input_shape(text)


@pytest.mark.parametrize("text", ["x=99999999999999999999,16", "x=4611686018427387904,16"])
def test_parse_input_shape_refuses_sizes_past_the_limit(text):
    with pytest.raises(InvalidArgument, match=r"elements, over the limit of 2\*\*62"):
        parse_input_shape(text)


def test_a_value_too_large_to_count_is_refused_not_wrapped():
    huge = chain_model(dynamic=True)
    dim = huge.graph.input[0].type.tensor_type.shape.dim[0]
    dim.ClearField("dim_param")
    dim.dim_value = 2**61  # 2**61 x 16 float32: 2**67 bytes
    with pytest.raises(UnsupportedGraph, match=r"holds 1\.48e\+20 bytes, over the limit of 2\*\*62"):
        from_onnx(huge)


# ----------------------------------------------------------------------------- what trains (bad files: test_onnx_model.py)
def test_inputs_no_gradient_reaches_are_not_weights():
    """CastLike's second input (read for its type) and a threshold read by Less were updated as weights."""
    typed = model([helper.make_node("CastLike", ["x", "like"], ["c"], name="cl"),
                   helper.make_node("MatMul", ["c", "w"], ["y"], name="mm")],
                  [vi("x", [2, 4])], [vi("y", [2, 3])], [weight("like", 4), weight("w", 4, 3)])
    masked = model([helper.make_node("Less", ["x", "th"], ["b"], name="less"),
                    helper.make_node("Cast", ["b"], ["bf"], name="cast", to=F),
                    helper.make_node("Mul", ["x", "bf"], ["xm"], name="mul"),
                    helper.make_node("MatMul", ["xm", "w"], ["y"], name="mm")],
                   [vi("x", [2, 4])], [vi("y", [2, 3])], [weight("th", 4), weight("w", 4, 3)])
    for onnx_model in (typed, masked):
        g = from_onnx(onnx_model)
        assert [n for n in g.node_names if n.startswith("update/")] == ["update/w"]


def test_a_product_of_a_value_with_itself_saves_it_for_its_gradient():
    """Mul(h, h): the gradient 2 h dy reads h, and its edge from h's producer was dropped (picked by name, not slot)."""
    square = model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                    helper.make_node("Mul", ["h", "h"], ["y"], name="sq")],
                   [vi("x", [2, 4])], [vi("y", [2, 3])], [weight("w", 4, 3)])
    g = from_onnx(square)
    edges = {(g.node_names[a], g.node_names[b]) for a, b in zip(g.edge_src, g.edge_dst)}
    assert ("mm", "grad/sq/h") in edges


def test_unknown_optimizer():
    with pytest.raises(UnknownName, match="sgd, momentum, adam, adamw"):
        from_onnx(chain_model(), optimizer="lbfgs")


# ----------------------------------------------------------------------------- against the PyTorch importer
def _export(module, inputs, exporter: str):
    torch = pytest.importorskip("torch")
    import contextlib
    import logging

    import onnx

    logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)
    buffer = io.BytesIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if exporter.startswith("dynamo"):  # "dynamo-optimized": with its constant folding, the default
            pytest.importorskip("onnxscript")
            return torch.onnx.export(module, inputs, dynamo=True, optimize=exporter != "dynamo").model_proto
        try:
            torch.onnx.export(module, inputs, buffer, dynamo=False, training=torch.onnx.TrainingMode.TRAINING)
        except Exception as err:  # noqa: BLE001 - the legacy exporter may be gone in a later torch
            pytest.skip(f"legacy ONNX exporter unavailable: {err}")
    return onnx.load_from_string(buffer.getvalue())


def _small_cnn():
    import torch
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(32, 10))
    return net, (torch.randn(4, 3, 16, 16),)


def _small_mlp():
    import torch
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.LayerNorm(256), nn.Linear(256, 256), nn.Tanh(),
                        nn.Linear(256, 10))
    return net, (torch.randn(32, 64),)


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
@pytest.mark.parametrize("make", [_small_cnn, _small_mlp], ids=["cnn", "mlp"])
def test_forward_flops_agree_with_the_torch_importer(make, exporter):
    from gnplace.importers.torch import from_module

    net, inputs = make()
    torch_graph = from_module(net, inputs, loss=lambda out: out.square().mean())
    onnx_graph = from_onnx(_export(net, inputs, exporter))
    fwd_torch, fwd_onnx = phase_flops(torch_graph, FORWARD), phase_flops(onnx_graph, FORWARD)
    assert fwd_onnx == pytest.approx(fwd_torch, rel=0.05)
    assert phase_flops(onnx_graph, BACKWARD) == pytest.approx(phase_flops(torch_graph, BACKWARD), rel=0.10)
    assert onnx_graph.total_param_bytes == torch_graph.total_param_bytes
    assert int((onnx_graph.phase == UPDATE).sum()) == int((torch_graph.phase == UPDATE).sum())


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_a_training_dropouts_flops_agree_with_the_torch_importer(exporter):
    """An exported Dropout in train() mode was a view: the PyTorch importer's bernoulli_, div_ and mul (512 FLOP here)
    and the gradient's mul (256) were missing from the ONNX import of the same model."""
    import torch
    from torch import nn

    from gnplace.importers.torch import from_module

    torch.manual_seed(0)
    net, inputs = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.1), nn.Linear(32, 4)).train(), (torch.randn(8, 16),)
    torch_graph = from_module(net, inputs, loss=lambda out: out.sum())
    onnx_graph = from_onnx(_export(net, inputs, exporter))

    def dropout(g, phase):  # the ops of the Dropout module "1" (torch), or the Dropout op (ONNX)
        return [i for i in np.flatnonzero(g.phase == phase)
                if g.module[i] == "1" or g.op_types[i] in ("Dropout", "Dropout_grad")]

    for phase in (FORWARD, BACKWARD):
        ours, theirs = dropout(onnx_graph, phase), dropout(torch_graph, phase)
        assert ours and float(onnx_graph.flops[ours].sum()) == float(torch_graph.flops[theirs].sum())
    assert phase_flops(onnx_graph, FORWARD) == phase_flops(torch_graph, FORWARD)
    # the gradient reads the output's gradient and the mask: bool in ONNX (a byte per element), float in aten
    (forward,), (grad,) = dropout(onnx_graph, FORWARD), dropout(onnx_graph, BACKWARD)
    read = {int(u): int(b) for u, v, b in zip(onnx_graph.edge_src, onnx_graph.edge_dst, onnx_graph.edge_bytes)
            if v == grad}
    assert onnx_graph.out_bytes[forward] == 8 * 32 * 4 + 8 * 32 and read.pop(forward) == 8 * 32
    assert list(read.values()) == [8 * 32 * 4]  # the output's gradient


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_a_where_is_free_as_the_torch_importers(exporter):
    """ONNX's Where counted 1 FLOP per element forward and backward; aten's where (and its gradients) count none."""
    import torch
    from torch import nn

    from gnplace.importers.torch import from_module

    class Select(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.floor = nn.Linear(16, 32), nn.Parameter(torch.zeros(32))

        def forward(self, x):
            h = self.fc(x)
            return torch.where(h > 0, h, self.floor)  # the floor broadcast: its gradient is a sum

    torch.manual_seed(0)
    net, inputs = Select(), (torch.randn(8, 16),)
    torch_graph = from_module(net, inputs, loss=lambda out: out.sum())
    onnx_graph = from_onnx(_export(net, inputs, exporter))
    assert phase_flops(onnx_graph, FORWARD) == phase_flops(torch_graph, FORWARD)
    where = [i for i, t in enumerate(onnx_graph.op_types) if t.startswith("Where")]
    assert float(onnx_graph.flops[where].sum()) == 8 * 32  # the broadcast floor's gradient, as aten's sum
    torch_where = [i for i, t in enumerate(torch_graph.op_types) if t == "where"]
    assert float(torch_graph.flops[torch_where].sum()) == 0


def test_a_splits_gradient_is_a_concatenation_of_its_parts():
    """A Split's gradient summed its parts' gradients (grad_sum: (parts - 1) FLOP per element of its data, 2 x 96
    here); the parts are disjoint, so aten concatenates them (a cat, 0 FLOP): one Split_grad op, 0 FLOP, the data's
    bytes, reading each part's gradient (part a read twice: its two gradients summed first, 32 FLOP; part c read by
    nothing: zeros, written by the concatenation)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Split", ["h"], ["a", "b", "c"], name="split", axis=1, num_outputs=3),
             helper.make_node("Tanh", ["a"], ["t"], name="tanh"),
             helper.make_node("Mul", ["t", "a"], ["p"], name="mul"),
             helper.make_node("Add", ["p", "b"], ["y"], name="add")]
    g = from_onnx(model(nodes, [vi("x", [8, 16])], [vi("y", [8, 4])], [weight("w", 16, 12)], opset=18))
    split = g.index("grad/split/h")
    assert (g.op_types[split], float(g.flops[split]), int(g.out_bytes[split])) == ("Split_grad", 0.0, 8 * 12 * 4)
    assert _reads(g, split) == {"grad_sum/a": 8 * 4 * 4, "grad/loss/y": 8 * 4 * 4}  # b's: the loss's, passed through
    assert float(g.flops[g.index("grad_sum/a")]) == 8 * 4
    assert [g.node_names[i] for i, t in enumerate(g.op_types) if t == "grad_sum"] == ["grad_sum/a"]
    assert _reads(g, g.index("grad/mm/w")) == {"grad/split/h": 8 * 12 * 4, "input/x": 8 * 16 * 4}


def test_a_split_to_sequences_gradient_is_a_concatenation_of_its_parts_as_a_splits():
    """torch.onnx's dynamo exporter (unoptimized) writes torch's split as SplitToSequence and a SequenceAt per part:
    the parts' gradients were summed into the data's (grad_sum: (3 - 1) x 8 x 12 = 192 FLOP), where the same model
    written with Split (and torch) concatenates them: one Split_grad op, 0 FLOP, the data's bytes, reading each
    part's gradient (part 0 read twice, at position 0 and -3: its two gradients summed first, 32 FLOP)."""
    def build(split):
        if split:
            nodes = [helper.make_node("Split", ["h"], ["a", "b", "c"], name="split", axis=1, num_outputs=3)]
        else:
            nodes = [helper.make_node("SplitToSequence", ["h", "four"], ["seq"], name="split", axis=1),
                     *(helper.make_node("Constant", [], [f"at{k}"], value=helper.make_tensor(f"at{k}", TensorProto.INT64,
                                                                                            [], [k]))
                       for k in (0, 1, -3)),
                     helper.make_node("SequenceAt", ["seq", "at0"], ["a"], name="a"),
                     helper.make_node("SequenceAt", ["seq", "at1"], ["b"], name="b"),
                     helper.make_node("SequenceAt", ["seq", "at-3"], ["a2"], name="a2")]
        nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), *nodes,
                 helper.make_node("Tanh", ["a"], ["t"], name="tanh"),
                 helper.make_node("Mul", ["t", "a" if split else "a2"], ["p"], name="mul"),
                 helper.make_node("Add", ["p", "b"], ["y"], name="add")]
        four = numpy_helper.from_array(np.array(4, np.int64), "four")
        return from_onnx(model(nodes, [vi("x", [8, 16])], [vi("y", [8, 4])], [weight("w", 16, 12), four], opset=18))

    g, by_split = build(split=False), build(split=True)
    concat = g.index("grad/split/h")
    assert (g.op_types[concat], float(g.flops[concat]), int(g.out_bytes[concat])) == ("Split_grad", 0.0, 8 * 12 * 4)
    assert _reads(g, concat) == {"grad_sum/a": 8 * 4 * 4, "grad/loss/y": 8 * 4 * 4}
    assert [(g.node_names[i], float(g.flops[i])) for i, t in enumerate(g.op_types) if t == "grad_sum"] == [
        ("grad_sum/a", 8 * 4)]
    assert _reads(g, g.index("grad/mm/w")) == {"grad/split/h": 8 * 12 * 4, "input/x": 8 * 16 * 4}
    assert phase_flops(g, BACKWARD) == phase_flops(by_split, BACKWARD)
    assert float(g.out_bytes[g.index("grad_sum/a")]) == float(by_split.out_bytes[by_split.index("grad_sum/a")])


def test_a_split_to_sequence_read_at_a_position_that_is_no_constant_still_sums_into_its_data():
    """A SequenceAt whose position a graph input gives reads a part no one can name: its gradient is summed into the
    data's with the concatenation of the parts read at constant positions (8 x 12 FLOP)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("SplitToSequence", ["h"], ["seq"], name="split", axis=0, keepdims=0),
             helper.make_node("Constant", [], ["at"], value=helper.make_tensor("at", TensorProto.INT64, [], [-1])),
             helper.make_node("SequenceAt", ["seq", "at"], ["last"], name="last"),
             helper.make_node("SequenceAt", ["seq", "k"], ["any"], name="any"),
             helper.make_node("Mul", ["last", "any"], ["y"], name="mul")]
    g = from_onnx(model(nodes, [vi("x", [8, 16]), vi("k", [], TensorProto.INT64)], [vi("y", [12])],
                        [weight("w", 16, 12)], opset=18))
    concat = g.index("grad/split/h")
    assert (float(g.flops[concat]), int(g.out_bytes[concat])) == (0.0, 8 * 12 * 4)
    assert _reads(g, concat) == {"grad/mul/last": 12 * 4}
    total = g.index("grad_sum/h")
    assert float(g.flops[total]) == 8 * 12
    assert sorted(_reads(g, total)) == ["grad/mul/any", "grad/split/h"]


def test_a_split_of_a_value_read_elsewhere_sums_its_concatenation_with_the_other_gradient():
    """h is split and read whole: its gradient is the parts' concatenation (0 FLOP) plus the other reader's (one
    FLOP per element of h), as aten's cat then the accumulating add."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Split", ["h"], ["a", "b"], name="split", axis=1, num_outputs=2),
             helper.make_node("Mul", ["a", "b"], ["p"], name="mul"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Concat", ["p", "r"], ["y"], name="cat", axis=1)]
    g = from_onnx(model(nodes, [vi("x", [8, 16])], [vi("y", [8, 18])], [weight("w", 16, 12)], opset=18))
    total = g.index("grad_sum/h")
    assert float(g.flops[total]) == 8 * 12
    assert sorted(_reads(g, total)) == ["grad/relu/h", "grad/split/h"]
    assert float(g.flops[g.index("grad/split/h")]) == 0.0


def test_a_split_parameters_concatenated_gradient_is_in_its_updates_module():
    """A split parameter's Split_grad (and the sum of a part's gradients) is in the module of the update it feeds: for
    a parameter named without a module (``w``, the update's module that of its first reader, ``gate``) it was in
    none (``""``), apart from its update."""
    nodes = [helper.make_node("Split", ["w"], ["w0", "w1", "w2"], name="split", axis=1, num_outputs=3),
             helper.make_node("MatMul", ["x", "w0"], ["a"], name="/gate/MatMul"),
             helper.make_node("MatMul", ["x", "w1"], ["b"], name="/gate/MatMul_1"),
             helper.make_node("Mul", ["a", "b"], ["p"], name="/gate/Mul"),
             helper.make_node("MatMul", ["x", "w1"], ["c"], name="/out/MatMul"),
             helper.make_node("Add", ["p", "c"], ["y"], name="/out/Add")]
    g = from_onnx(model(nodes, [vi("x", [4, 16])], [vi("y", [4, 4])], [weight("w", 16, 12)], opset=18))
    split, summed, update = g.index("grad/split/w"), g.index("grad_sum/w1"), g.index("update/w")
    assert g.op_types[split] == "Split_grad" and _reads(g, update) == {"grad/split/w": 16 * 12 * 4}
    assert g.module[split] == g.module[summed] == g.module[update] == "gate"
    assert g.group[split] == g.group[summed] == g.group[update]


@pytest.mark.parametrize("exporter, written", [("legacy", "Split"), ("dynamo", "SplitToSequence")])
def test_a_splits_backward_agrees_with_the_torch_importers_cat(exporter, written):
    """torch's split exported as an ONNX Split (the legacy exporter) or SplitToSequence and SequenceAt (the dynamo
    exporter, unoptimized): its gradient, a grad_sum of its parts' gradients, counted (3 - 1) x 8 x 48 = 768 FLOP
    that aten's cat of them does not."""
    import torch
    from torch import nn

    from gnplace.importers.torch import from_module

    class Gated(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.out = nn.Linear(16, 48), nn.Linear(16, 4)

        def forward(self, x):
            a, b, c = self.fc(x).split(16, dim=-1)
            return self.out(torch.tanh(a) * b + c)

    torch.manual_seed(0)
    net, inputs = Gated(), (torch.randn(8, 16),)
    torch_graph = from_module(net, inputs, loss=lambda out: out.sum())
    onnx_graph = from_onnx(_export(net, inputs, exporter))
    assert [n.op_type for n in _export(net, inputs, exporter).graph.node].count(written) == 1
    (ours,) = [i for i, t in enumerate(onnx_graph.op_types) if t == "Split_grad"]
    (theirs,) = [i for i in np.flatnonzero(torch_graph.phase == BACKWARD) if torch_graph.op_types[i] == "cat"]
    assert (float(onnx_graph.flops[ours]), int(onnx_graph.out_bytes[ours])) == (
        float(torch_graph.flops[theirs]), int(torch_graph.out_bytes[theirs])) == (0.0, 8 * 48 * 4)
    assert "grad_sum" not in onnx_graph.op_types
    # the rest of the backward but the loss's gradient: aten's ones_like (0 FLOP), ONNX's loss_grad (1 per element)
    assert phase_flops(onnx_graph, BACKWARD) == phase_flops(torch_graph, BACKWARD) + 8 * 4
    assert phase_flops(onnx_graph, FORWARD) == phase_flops(torch_graph, FORWARD)


@pytest.mark.parametrize("layer", ["LSTM", "GRU"])
def test_an_exported_recurrent_layer_has_the_parameter_bytes_of_the_torch_importer(layer):
    """torch.onnx's default exporter stores the zero initial state as an initializer: it was trained (+192 B)."""
    import torch

    from gnplace.importers.torch import from_module

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = getattr(torch.nn, layer)(8, 16, num_layers=2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.rnn(x)[0]

    torch.manual_seed(0)
    net, inputs = Net(), (torch.randn(5, 3, 8),)
    proto = _export(net, inputs, "dynamo-optimized")
    torch_graph = from_module(net, inputs, loss=lambda out: out.square().mean())
    assert from_onnx(proto).total_param_bytes == torch_graph.total_param_bytes


def test_an_op_type_onnx_does_not_define_is_refused_unless_allowed():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("FrobnicateOp", ["h"], ["y"], name="frob")]
    onnx_model = model(nodes, [vi("x", [4, 8])], [vi("y", [4, 8])], [weight("w", 8, 8)], value_info=[vi("h", [4, 8])])
    with pytest.raises(UnsupportedGraph, match="node 'frob' has op type 'FrobnicateOp', which ONNX does not define "
                       r"\(allow_unknown_ops=True, `gnplace import --allow-unknown-ops`, counts it"):
        from_onnx(onnx_model)
    with pytest.warns(UserWarning, match="FrobnicateOp"):
        assert "frob" in from_onnx(onnx_model, allow_unknown_ops=True).node_names


def _group_norm_per_channel(signed=True):
    """GroupNorm(4, 4), as many groups as channels; the unit scale and zero bias are its own."""
    return _group_norm(signed, groups=4, channels=4)


def test_a_group_norm_with_as_many_groups_as_channels_trains_no_made_scale():
    """The regrouping kept the channel size, so the made unit scale and zero bias were trained (+32 B)."""
    g = from_onnx(_group_norm_per_channel())
    assert updates(g) == ["val_21", "val_23"] and g.total_param_bytes == 2 * 4 * 4
    assert updates(from_onnx(_group_norm_per_channel(signed=False))) == ["val_11", "val_21", "val_23", "val_8"]


def _folded(proto, sources):
    """``proto`` with the folds' sources onnxscript's optimizer records (``{constant: [values]}``)."""
    for name, values in sources.items():
        entry = next((v for v in proto.graph.value_info if v.name == name), None)
        if entry is None:
            init = next(i for i in proto.graph.initializer if i.name == name)
            entry = proto.graph.value_info.add()
            entry.CopyFrom(vi(name, list(init.dims)))
        entry.metadata_props.add(key="pkg.onnxscript.optimizer.folded_from", value=repr(list(values)))
    return proto


def _in_class(proto, cls):
    for node in proto.graph.node:
        node.metadata_props.add(key="pkg.torch.onnx.class_hierarchy", value=repr(["__main__.Net", cls, "aten.op"]))
    return proto


def test_a_folded_copy_of_a_parameter_the_file_holds_is_that_parameter():
    """A tied weight: the embedding reads ``emb.weight``, the output projection its transpose ``val_0``, which the
    optimised export folded into a constant; both were trained (twice the bytes). Now ``val_0`` is read from
    ``emb.weight``, which gets both gradients, summed, as the torch importer's one tied parameter does."""
    nodes = [helper.make_node("Gather", ["emb.weight", "ids"], ["e"], name="embed"),
             helper.make_node("Tanh", ["e"], ["h"], name="tanh"),
             helper.make_node("MatMul", ["h", "val_0"], ["y"], name="project")]
    proto = model(nodes, [vi("ids", [2, 5], TensorProto.INT64)], [vi("y", [2, 5, 10])],
                  [weight("emb.weight", 10, 8), weight("val_0", 8, 10)])
    assert updates(from_onnx(_signed(proto, ["emb.weight"]))) == ["emb.weight", "val_0"]  # no sources: as before
    g = from_onnx(_folded(proto, {"val_0": ["emb.weight"]}))
    assert updates(g) == ["emb.weight"] and g.total_param_bytes == 10 * 8 * 4
    assert "grad_sum/emb.weight" in g.node_names  # the lookup's and the projection's gradients
    with pytest.warns(UserWarning, match="no initializer is trained"):
        assert updates(from_onnx(proto, frozen=["emb.weight"])) == []


def test_a_constant_folded_from_no_parameter_is_no_weight_and_one_from_a_parameter_always_is():
    """With the folds' sources, a made constant is known as one (GroupNorm's unit scale over groups, whatever
    its shape), and a one-element constant folded from a parameter (``self.pos.sum()``) gets its gradient."""
    proto = _folded(_group_norm_per_channel(signed=False), {"val_8": ["val_0", "val_6"], "val_11": ["val_0", "val_9"],
                                                            "val_21": ["gn.weight", "val_15"],
                                                            "val_23": ["gn.bias", "val_15"]})
    proto = _in_class(_signed(proto, ["gn.weight", "gn.bias"]), "torch.nn.modules.normalization.GroupNorm")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a torch.nn module reads its parameters whole: nothing to warn about
        assert updates(from_onnx(proto)) == ["val_21", "val_23"]
    nodes = [helper.make_node("Add", ["x", "sum_1"], ["y"], name="shift")]
    scalar = model(nodes, [vi("x", [2, 4])], [vi("y", [2, 4])], [_constant("sum_1", 0, *())])
    with pytest.warns(UserWarning, match="no initializer is trained"):
        assert updates(from_onnx(scalar)) == []  # one element, no sources: a constant, as before
    assert updates(from_onnx(_folded(_signed(scalar, ["pos"]), {"sum_1": ["pos"]}))) == ["sum_1"]


def test_a_parameter_sliced_by_the_model_and_folded_by_the_exporter_is_named_in_a_warning():
    """``x + self.pos[:, :7]``, exported optimised: the file holds the slice as a constant, not ``pos`` [1, 16, 8];
    its bytes were silently counted at the slice's (224 B of 512 B). The file cannot tell the parameter's size:
    the importer says which parameter and how to export it whole."""
    nodes = [helper.make_node("Add", ["x", "slice_1"], ["y"], name="add")]
    proto = model(nodes, [vi("x", [2, 7, 8])], [vi("y", [2, 7, 8])], [weight("slice_1", 1, 7, 8)])
    proto = _in_class(_folded(_signed(proto, ["pos"]), {"slice_1": ["pos", "val_0", "val_1"]}), "__main__.Net")
    with pytest.warns(UserWarning, match=r"folded parameters .* 'pos' into slice_1 \[1, 7, 8\] .*optimize=False"):
        g = from_onnx(proto)
    assert updates(g) == ["slice_1"] and g.total_param_bytes == 7 * 8 * 4


@pytest.mark.parametrize("make", ["tied", "GroupNorm(8, 8)"])
def test_an_optimised_export_of_a_tied_weight_or_a_per_channel_group_norm_has_the_torch_importers_bytes(make):
    """Tied embedding and output weights counted twice (+320 B); GroupNorm(8, 8)'s made scale and bias (+64 B)."""
    import torch
    from torch import nn

    from gnplace.importers.torch import from_module

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if make == "tied":
                self.emb, self.out = nn.Embedding(10, 8), nn.Linear(8, 10, bias=False)
                self.out.weight = self.emb.weight
            else:
                self.conv, self.gn = nn.Conv2d(3, 8, 3), nn.GroupNorm(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(torch.tanh(self.emb(x))) if make == "tied" else self.gn(self.conv(x))

    torch.manual_seed(0)
    net = Net()
    inputs = (torch.randint(0, 10, (2, 5)),) if make == "tied" else (torch.randn(2, 3, 6, 6),)
    proto = _export(net, inputs, "dynamo-optimized")
    torch_graph = from_module(net, inputs, loss=lambda out: out.square().mean())
    assert from_onnx(proto).total_param_bytes == torch_graph.total_param_bytes


def test_trainable_names_a_gradient_cannot_reach_are_refused():
    """An int64 initializer got a gradient and an optimizer update; one read only by Resize's scales got an update of
    no gradient; one no op reads was dropped without a word."""
    nodes = [helper.make_node("Cast", ["wi"], ["wf"], to=F), helper.make_node("Add", ["x", "wf"], ["h"]),
             helper.make_node("Resize", ["h", "", "scales"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["y"])]
    inits = [numpy_helper.from_array(np.ones((8, 16), np.int64), "wi"),
             numpy_helper.from_array(np.ones(2, np.float32), "scales"), weight("w", 16, 4), weight("unused", 4, 4)]
    proto = model(nodes, [vi("x", [8, 16])], [vi("y", [8, 4])], inits, opset=13)
    assert updates(from_onnx(proto, trainable=["w"])) == ["w"]
    with pytest.raises(InvalidArgument, match=r"trainable \(--trainable\) names 'wi', an initializer of type int64: only floating-point"):
        from_onnx(proto, trainable=["wi", "w"])
    with pytest.raises(InvalidArgument, match=r"trainable \(--trainable\) names 'scales', which no gradient reaches"):
        from_onnx(proto, trainable=["scales", "w"])
    with pytest.raises(InvalidArgument, match=r"trainable \(--trainable\) names 'unused', which no op of the model reads"):
        from_onnx(proto, trainable=["unused", "w"])


@pytest.mark.parametrize("op", ["ArgMax", "Shape"])
def test_a_model_of_no_differentiable_output_is_refused(op):
    """Its outputs an ArgMax or a Shape: a graph of an update with no gradient, no loss and no backward."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node(op, ["y"], ["out"])]
    proto = model(nodes, [vi("x", [8, 16])], [vi("out", None, TensorProto.INT64)], [weight("w", 16, 4)], opset=17)
    with pytest.raises(UnsupportedGraph, match="no output of the model depends on a trainable parameter"):
        from_onnx(proto)


@pytest.mark.parametrize("elem", [TensorProto.STRING, 999])
def test_an_input_of_text_or_an_undefined_type_into_a_product_is_refused(elem):
    """A STRING (or type 999) input of a MatMul was costed as floats and given a backward pass."""
    proto = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [8, 16], elem=elem)],
                  [vi("y", [8, 4])], [weight("w", 16, 4)])
    with pytest.raises(InvalidGraph, match="node 'mm' \\(MatMul\\) cannot take its inputs \\(of shapes \\[8, 16\\] and "
                                           "\\[16, 4\\]\\): Inferred elem type differs"):
        from_onnx(proto)


def test_a_model_with_nothing_to_train_is_imported_with_a_warning():
    """A forward pass alone (every weight frozen, or none) was written with no word; the torch importer refuses it."""
    proto = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [8, 16])], [vi("y", [8, 4])],
                  [weight("w", 16, 4)])
    with pytest.warns(UserWarning, match="no initializer is trained .*: the graph holds the forward pass alone"):
        g = from_onnx(proto, frozen=["w"])
    assert int((g.phase == BACKWARD).sum()) == 0 and int((g.phase == UPDATE).sum()) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_onnx(proto)  # trained: no warning


def test_an_output_of_unknown_shape_is_refused_not_taken_for_the_loss():
    """A view's output is checked by no op that reads it: a Reshape to a shape the model is given, returned, had
    no shape, which was read as a scalar, the model's own loss: the graph had no loss op and no gradient of it."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Reshape", ["h", "s"], ["y"])]
    proto = model(nodes, [vi("x", [8, 16]), vi("s", [2], TensorProto.INT64)], [vi("y", None)], [weight("w", 16, 4)])
    with pytest.raises(UnsupportedGraph, match="static shape for output 'y' of node 'Reshape'"):
        from_onnx(proto)


def test_an_output_the_graph_lists_twice_is_one_output():
    """Its elements were counted twice in the loss's FLOP, and a scalar listed twice got a loss op of its own."""
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    twice = from_onnx(model([node], [vi("x", [8, 16])], [vi("y", [8, 4])] * 2, [weight("w", 16, 4)]))
    assert twice == from_onnx(model([node], [vi("x", [8, 16])], [vi("y", [8, 4])], [weight("w", 16, 4)]))
    assert twice.flops[twice.index("loss")] == 8 * 4
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    scalar = from_onnx(model([node], [vi("x", [16])], [vi("y", [])] * 2, [weight("w", 16)]))
    assert "loss" not in scalar.node_names


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_a_resizes_gradient_reads_the_outputs_gradient_alone(mode):
    """As aten's upsample_*_backward (and the importer's Upsample): it read Resize's input as well."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], name="c1", pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["h", "", "scales"], ["r"], name="rs", mode=mode),
             helper.make_node("Conv", ["r", "w2"], ["y"], name="c2", pads=[1, 1, 1, 1])]
    inits = [weight("w1", 4, 3, 3, 3), numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
             weight("w2", 2, 4, 3, 3)]
    g = from_onnx(model(nodes, [vi("x", [2, 3, 8, 8])], [vi("y", None)], inits))
    into = [g.node_names[u] for u, v in zip(g.edge_src, g.edge_dst) if g.node_names[v] == "grad/rs/h"]
    assert into == ["grad/c2/r"]


def _quantized_model(scale_shape=(), integers=False):
    """x @ w1 -> QuantizeLinear -> DequantizeLinear (scale of ``scale_shape``, on axis 1) -> @ w2.

    With ``integers``, the integers are cast to floats (``Cast``) instead of dequantized: no gradient passes.
    """
    scale = numpy_helper.from_array(np.full(scale_shape, 0.05, np.float32), "scale")
    zero = numpy_helper.from_array(np.zeros(scale_shape, np.int8), "zero")
    back = helper.make_node("Cast", ["q"], ["d"], name="dequant", to=F) if integers else \
        helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["d"], name="dequant", axis=1)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("QuantizeLinear", ["h", "scale", "zero"], ["q"], name="quant", axis=1),
             back, helper.make_node("MatMul", ["d", "w2"], ["y"], name="mm2")]
    return model(nodes, [vi("x", [8, 16])], [vi("y", [8, 4])], [weight("w1", 16, 32), weight("w2", 32, 4), scale, zero])


def _updates_fed(g):
    """Each update op's name, with whether a gradient feeds it."""
    fed = set(g.edge_dst.tolist())
    return {g.node_names[i]: i in fed for i in np.flatnonzero(g.phase == UPDATE)}


def test_a_weight_no_gradient_reaches_gets_no_update():
    """w1 reaches the loss through QuantizeLinear's integers alone: it had an update op that nothing fed."""
    g = from_onnx(_quantized_model(integers=True))
    assert _updates_fed(g) == {"update/w2": True}
    frozen = from_onnx(_quantized_model(integers=True), frozen=["w1"])  # as a weight --frozen names: a constant
    assert g.node_names == frozen.node_names and np.array_equal(g.flops, frozen.flops)
    assert np.array_equal(g.edge_src, frozen.edge_src) and np.array_equal(g.edge_dst, frozen.edge_dst)
    with pytest.raises(InvalidArgument, match=r"trainable \(--trainable\) names 'w1', which no gradient reaches"):
        from_onnx(_quantized_model(integers=True), trainable=["w1", "w2"])  # named: refused, as before


def test_quantization_scales_and_zero_points_are_no_weights():
    """A per-channel scale (32 floats) read by DequantizeLinear was trained, with a data gradient of mm2 for it alone."""
    g = from_onnx(_quantized_model(scale_shape=(32,)))
    assert _updates_fed(g) == {"update/w1": True, "update/w2": True}  # (w1 through the straight-through gradient)
    assert not any(n.startswith(("grad/dequant", "read/scale")) or n.endswith(("/scale", "/zero"))
                   for n in g.node_names)
    per_tensor = from_onnx(_quantized_model())  # the same graph as of a scalar scale
    assert g.node_names == per_tensor.node_names and np.array_equal(g.flops, per_tensor.flops)
    # a weight-only quantised product: the int8 weight and its per-row scale train nothing (the forward pass alone)
    nodes = [helper.make_node("DequantizeLinear", ["q", "s"], ["w"], name="dq", axis=0),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    inits = [numpy_helper.from_array(np.ones((16, 4), np.int8), "q"), numpy_helper.from_array(np.ones(16, np.float32), "s")]
    with pytest.warns(UserWarning, match="no initializer is trained"):
        weight_only = from_onnx(model(nodes, [vi("x", [8, 16])], [vi("y", [8, 4])], inits, opset=21))
    assert not (weight_only.phase == UPDATE).any()


def _fake_quantized_model(post_training=False):
    """QAT as torch.onnx.export writes it: x, w1 (per tensor), h = x @ w1 and w2 (per channel) each through
    QuantizeLinear -> DequantizeLinear, then d @ w2. With ``post_training``, w1 is held as int8 (dequantized alone)."""
    def pair(value, out, axis=None, scale=()):
        inits = [numpy_helper.from_array(np.full(scale, 0.05, np.float32), f"s_{value}"),
                 numpy_helper.from_array(np.zeros(scale, np.int8), f"z_{value}")]
        args = {} if axis is None else {"axis": axis}
        return [helper.make_node("QuantizeLinear", [value, *(i.name for i in inits)], [f"q_{value}"], name=f"q{value}",
                                 **args),
                helper.make_node("DequantizeLinear", [f"q_{value}", *(i.name for i in inits)], [out],
                                 name=f"dq{value}", **args)], inits

    nodes, inits = [], []
    for value, out, axis, scale in (("x", "dx", None, ()), ("w1", "dw1", None, ()), ("h", "dh", None, ()),
                                    ("w2", "dw2", 1, (4,))):
        made, held = pair(value, out, axis, scale)
        if value == "w1" and post_training:
            made = made[1:]
            held.append(numpy_helper.from_array(np.ones((16, 32), np.int8), "q_w1"))
        nodes += made
        inits += held
        if value == "w1":
            nodes.append(helper.make_node("MatMul", ["dx", "dw1"], ["h"], name="mm1"))
    nodes.append(helper.make_node("MatMul", ["dh", "dw2"], ["y"], name="mm2"))
    inits += [weight("w2", 32, 4)] + ([] if post_training else [weight("w1", 16, 32)])
    return model(nodes, [vi("x", [8, 16])], [vi("y", [8, 4])], inits, opset=13)


def _reads(g, node):
    """The bytes each producer's edge into ``node`` carries, by producer name."""
    return {g.node_names[u]: int(b) for u, v, b in zip(g.edge_src, g.edge_dst, g.edge_bytes) if v == node}


def test_fake_quantization_passes_the_gradient_straight_through():
    """A QAT export (float -> QuantizeLinear -> DequantizeLinear) trained no weight: the integers stopped the gradient,
    so its weights were constants and its activations' backward was missing. The pair's gradient is the
    straight-through estimator of torch's fake_quantize backward: one op of 1 FLOP per element reading the gradient
    and the mask QuantizeLinear keeps (a byte per element)."""
    g = from_onnx(_fake_quantized_model())
    assert _updates_fed(g) == {"update/w1": True, "update/w2": True}
    for value, numel in (("w1", 16 * 32), ("h", 8 * 32), ("w2", 32 * 4)):
        quant, grad = g.index(f"q{value}"), g.index(f"grad/q{value}/{value}")
        assert g.flops[grad] == numel and g.out_bytes[grad] == 4 * numel and g.phase[grad] == BACKWARD
        assert g.op_kinds[grad] == "elementwise_grad" and g.group[grad] == g.group[quant]
        assert g.out_bytes[quant] == numel + numel  # int8, and the mask
        assert _reads(g, grad) == {f"q{value}": numel, f"grad/mm{2 if value != 'w1' else 1}/d{value}": 4 * numel}
    assert _reads(g, g.index("update/w1")) == {"grad/qw1/w1": 4 * 16 * 32}
    assert g.out_bytes[g.index("qx")] == 8 * 16 and not any(n.startswith("grad/qx") for n in g.node_names)
    # a post-training-quantized weight (int8 held in the file): no float to pass a gradient to, forward-only
    ptq = from_onnx(_fake_quantized_model(post_training=True))
    assert _updates_fed(ptq) == {"update/w2": True}
    assert not any(n.startswith(("grad/qh", "grad/dqw1", "grad/mm1")) for n in ptq.node_names)
    assert ptq.out_bytes[ptq.index("qh")] == 8 * 32  # no gradient reaches h: no mask kept


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_fake_quantization_agrees_with_the_torch_importer(exporter):
    """torch.fake_quantize_per_tensor_affine and _per_channel_ export as QuantizeLinear -> DequantizeLinear: their
    straight-through gradients (aten's mul of the gradient by the cached mask) were missing from the ONNX import, and
    with them both weights' updates."""
    import torch
    from torch import nn

    from gnplace.importers.torch import from_module

    class Fake(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(16, 32, bias=False), nn.Linear(32, 4, bias=False)

        def forward(self, x):
            w1 = torch.fake_quantize_per_channel_affine(self.fc1.weight, torch.full((32,), 0.05),
                                                        torch.zeros(32, dtype=torch.int32), 0, -128, 127)
            h = torch.fake_quantize_per_tensor_affine(x @ w1.t(), 0.1, 0, -128, 127)
            return h @ torch.fake_quantize_per_tensor_affine(self.fc2.weight, 0.05, 0, -128, 127).t()

    torch.manual_seed(0)
    net, inputs = Fake(), (torch.randn(8, 16),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch_graph = from_module(net, inputs, loss=lambda out: out.sum())
    onnx_graph = from_onnx(_export(net, inputs, exporter))

    def straight_through(g, types):  # (FLOP, bytes, bytes read from each producer) of each straight-through op
        return sorted((float(g.flops[i]), int(g.out_bytes[i]), sorted(_reads(g, i).values()))
                      for i in np.flatnonzero(g.phase == BACKWARD) if g.op_types[i] in types)

    ours = straight_through(onnx_graph, ("QuantizeLinear_grad",))
    assert ours == straight_through(torch_graph, ("mul",))
    assert [flops for flops, _, _ in ours] == [32 * 4, 8 * 32, 32 * 16]  # fc2.weight, h, fc1.weight
    # the rest of the backward but the loss's gradient: aten's ones_like (0 FLOP), ONNX's loss_grad (1 per element)
    assert phase_flops(onnx_graph, BACKWARD) == phase_flops(torch_graph, BACKWARD) + 8 * 4
    assert phase_flops(onnx_graph, UPDATE) == phase_flops(torch_graph, UPDATE)
    assert onnx_graph.total_param_bytes == torch_graph.total_param_bytes
    # forward: QuantizeLinear + DequantizeLinear count 2 + 2 FLOP per element, as fake_quantize_*_cachemask
    assert phase_flops(onnx_graph, FORWARD) == phase_flops(torch_graph, FORWARD)


def test_dft_reads_its_axis_input_from_opset_20_and_deform_conv_imports_with_its_gradients():
    """Opset 20 made DFT's axis an input (default -2): the transform runs along it, 16 points, not the 8 of the
    default axis; a DeformConv of trainable weights and offsets gets a rule forward and backward, no warning (both
    were counted at 1 FLOP per output element)."""
    def dft_model(axis: int | None) -> onnx.ModelProto:
        inputs = ["h", "", "axis"] if axis is not None else ["h"]
        nodes = [helper.make_node("Mul", ["x", "s"], ["h"], name="scale"),
                 helper.make_node("DFT", inputs, ["y"], name="dft")]
        inits = [weight("s", 2, 16, 8, 1)]
        inits += [numpy_helper.from_array(np.array(axis, np.int64), "axis")] if axis is not None else []
        return model(nodes, [vi("x", [2, 16, 8, 1])], [vi("y", [2, 16, 8, 2])], inits, opset=20)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        along_1 = from_onnx(dft_model(1))
        along_default = from_onnx(dft_model(None))
        deform = from_onnx(model(
            [helper.make_node("Conv", ["x", "wo"], ["offset"], name="offsets", pads=[1, 1, 1, 1]),
             helper.make_node("DeformConv", ["x", "w", "offset"], ["y"], name="deform", pads=[1, 1, 1, 1])],
            [vi("x", [1, 4, 6, 6])], [vi("y", [1, 6, 6, 6])], [weight("wo", 18, 4, 3, 3), weight("w", 6, 4, 3, 3)],
            opset=22))
    assert along_1.flops[along_1.index("dft")] == 2 * 8 * 2.5 * 16 * 4  # 16 transforms of 16 real points
    assert along_default.flops[along_default.index("dft")] == 2 * 16 * 2.5 * 8 * 3
    conv, values, points = 2 * 216 * 36, 36 * 4 * 9, 18 * 36 // 2
    assert deform.flops[deform.index("deform")] == conv + values * 4 + points * 16
    grads = {name: deform.flops[k] for k, name in enumerate(deform.node_names) if name.startswith("grad/deform/")}
    shared = conv + points * 16  # the sampled values' gradient and the points, once, with the first gradient
    assert grads == {"grad/deform/w": conv + values * 4 + shared, "grad/deform/offset": 2 * values * 4 + 2 * 2 * points}


def test_each_gradient_reads_the_tensors_its_op_saves():
    """Mul's weight gradient reads the other factor (x), Gelu's its input, Tanh's and Relu's their output, Gemm's
    weight gradient the data and its bias gradient the output's gradient alone: every edge of the step, by hand
    (mutants leaving Mul, Gelu, Tanh or Relu out of its saves set, or Gemm out of BIAS_SLOT, passed the importer's
    other tests)."""
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"], name="mul"), helper.make_node("Gelu", ["m"], ["g"], name="gelu"),
             helper.make_node("Tanh", ["g"], ["t"], name="tanh"), helper.make_node("Relu", ["t"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "v", "c"], ["y"], name="fc", transB=1)]
    g = from_onnx(model(nodes, [vi("x", [4, 8])], [vi("y", [4, 2])], [weight("w", 4, 8), weight("v", 2, 8),
                                                                        weight("c", 2)], opset=20))
    act = 4 * 8 * 4
    assert {(g.node_names[u], g.node_names[v]): int(b) for u, v, b in zip(g.edge_src, g.edge_dst, g.edge_bytes)} == {
        ("input/x", "mul"): act, ("mul", "gelu"): act, ("gelu", "tanh"): act, ("tanh", "relu"): act,
        ("relu", "fc"): act, ("fc", "loss"): 32, ("loss", "grad/loss/y"): 4, ("grad/loss/y", "grad/fc/r"): 32,
        ("grad/loss/y", "grad/fc/v"): 32, ("grad/loss/y", "grad/fc/c"): 32, ("grad/fc/r", "grad/relu/t"): act,
        ("grad/relu/t", "grad/tanh/g"): act, ("grad/tanh/g", "grad/gelu/m"): act, ("grad/gelu/m", "grad/mul/w"): act,
        ("grad/fc/v", "update/v"): 64, ("grad/fc/c", "update/c"): 8, ("grad/mul/w", "update/w"): act,
        # the saved tensors
        ("input/x", "grad/mul/w"): act, ("mul", "grad/gelu/m"): act, ("tanh", "grad/tanh/g"): act,
        ("relu", "grad/relu/t"): act, ("relu", "grad/fc/v"): act,
    }


def test_only_a_gather_from_a_parameter_is_an_embedding():
    """A Gather of a trained table by the input's ids is an embedding look-up (and its gradient an embedding's); a
    Gather of rows of an activation moves data (a mutant making every Gather an embedding passed)."""
    idx = numpy_helper.from_array(np.array([0, 2], np.int64), "idx")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="lookup"),
             helper.make_node("MatMul", ["e", "w"], ["m"], name="mm"),
             helper.make_node("Gather", ["m", "idx"], ["y"], name="pick")]
    g = from_onnx(model(nodes, [vi("ids", [4], TensorProto.INT64)], [vi("y", [2, 8])],
                        [weight("table", 10, 8), weight("w", 8, 8), idx]))
    kinds = dict(zip(g.node_names, g.op_kinds))
    assert (kinds["lookup"], kinds["grad/lookup/table"]) == ("embedding", "embedding_grad")
    assert (kinds["pick"], kinds["grad/pick/m"]) == ("data_movement", "data_movement_grad")


def test_a_weight_read_by_two_groups_is_served_by_a_read_op_holding_its_bytes():
    """w [8, 8] is read by mm1 and mm2: mm2's group gets it from a read op in mm1's, which holds and passes its 256 B
    to mm2 and to mm2's gradients (a mutant giving the read op no bytes, so every edge from it 0 B, passed)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm1"),
             helper.make_node("MatMul", ["h", "w"], ["y"], name="mm2")]
    g = from_onnx(model(nodes, [vi("x", [4, 8])], [vi("y", [4, 8])], [weight("w", 8, 8)]))
    read = g.index("read/w")
    assert g.group[read] == g.group[g.index("mm1")] != g.group[g.index("mm2")]
    assert g.out_bytes[read] == 8 * 8 * 4
    assert g.index("mm2") in g.edge_dst[g.edge_src == read].tolist()
    assert set(g.edge_bytes[g.edge_src == read].tolist()) == {8 * 8 * 4}


def test_every_docstring_that_lists_the_optimizers_lists_them_all():
    """from_onnx's (and write_dataset's) said "sgd", "momentum" or "adam", though both take "adamw" too."""
    import pathlib
    import re

    import gnplace

    root = pathlib.Path(gnplace.__file__).parent
    listed = re.compile(r'optimizer \(str[^)]*\): (``"[a-z]+"``(?:, ``"[a-z]+"``)*(?:,)? or ``"[a-z]+"``)')
    found = {}
    for path in sorted(root.rglob("*.py")):
        for match in listed.finditer(path.read_text(encoding="utf-8")):
            found[f"{path.relative_to(root)}"] = sorted(re.findall(r'"([a-z]+)"', match.group(1)))
    assert "importers/onnx.py" in found and "datasets.py" in found
    assert {where: names for where, names in found.items() if names != sorted(OPTIMIZERS)} == {}
