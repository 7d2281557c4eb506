"""The canonical op-kind vocabulary (``gnplace.opkinds``) and its use on the shipped graphs."""

from __future__ import annotations

from collections import Counter, defaultdict
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gnplace.graph import BACKWARD, FORWARD, UPDATE, OpGraph
from gnplace.graph_io import load_graph
from gnplace.opkinds import (
    KIND_VOCABULARY,
    NO_GRADIENT_FORM,
    OP_KINDS,
    RAW_TYPES,
    base_kind,
    canonical_kind,
    gradient_form,
)
from gnplace.toy import layered_graph, mlp_training_graph

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT / "datasets"
REAL_MODELS = ("resnet50", "gpt2", "bert_base", "t5_small", "vit_base")

#: The vocabulary as first released. It is append-only: this prefix must never change.
RELEASED_VOCABULARY = (
    "input", "read", "matmul", "matmul_grad", "conv", "conv_grad", "attention", "attention_grad", "norm",
    "norm_grad", "activation", "activation_grad", "elementwise", "elementwise_grad", "reduction", "reduction_grad",
    "softmax", "softmax_grad", "embedding", "embedding_grad", "pool", "pool_grad", "loss", "loss_grad", "dropout",
    "dropout_grad", "data_movement", "data_movement_grad", "update", "other", "other_grad",
)


@cache
def shipped() -> dict[str, OpGraph]:
    return {str(p.relative_to(DATASETS)): load_graph(p) for p in sorted(DATASETS.glob("*/*.gnpg"))}


# ------------------------------------------------------------------------------- vocabulary
def test_vocabulary_is_small_unique_and_append_only():
    assert 12 <= len(OP_KINDS) <= 20 and len(set(OP_KINDS)) == len(OP_KINDS)
    assert len(set(KIND_VOCABULARY)) == len(KIND_VOCABULARY)
    assert KIND_VOCABULARY[: len(RELEASED_VOCABULARY)] == RELEASED_VOCABULARY


def test_every_base_kind_has_its_forms_in_the_vocabulary():
    for kind in OP_KINDS:
        assert kind in KIND_VOCABULARY
        if kind in NO_GRADIENT_FORM:
            assert gradient_form(kind) == kind and f"{kind}_grad" not in KIND_VOCABULARY
        else:
            assert gradient_form(kind) == f"{kind}_grad" in KIND_VOCABULARY
    forms = {k for k in OP_KINDS} | {gradient_form(k) for k in OP_KINDS}
    assert forms == set(KIND_VOCABULARY)
    assert NO_GRADIENT_FORM == {"input", "read", "update"}


def test_table_names_only_base_kinds():
    assert set(RAW_TYPES.values()) <= set(OP_KINDS)
    assert set(RAW_TYPES.values()) == set(OP_KINDS)  # every kind has at least one raw type


def test_unknown_base_kind_is_an_error():
    with pytest.raises(ValueError, match=r"unknown base op kind 'conv_grad'"):
        gradient_form("conv_grad")


# ------------------------------------------------------------------------------- the table
@pytest.mark.parametrize(
    "op_type, phase, kind",
    [
        # aten (PyTorch importer)
        ("convolution", FORWARD, "conv"), ("convolution_backward", BACKWARD, "conv_grad"),
        ("addmm", FORWARD, "matmul"), ("mm", BACKWARD, "matmul_grad"), ("bmm", FORWARD, "matmul"),
        ("native_batch_norm", FORWARD, "norm"), ("native_batch_norm_backward", BACKWARD, "norm_grad"),
        ("native_layer_norm_backward", BACKWARD, "norm_grad"),
        ("relu", FORWARD, "activation"), ("threshold_backward", BACKWARD, "activation_grad"),
        ("gelu_backward", BACKWARD, "activation_grad"), ("sigmoid_backward", BACKWARD, "activation_grad"),
        ("add_", FORWARD, "elementwise"), ("mul", BACKWARD, "elementwise_grad"),
        ("sum", BACKWARD, "reduction_grad"), ("mean", FORWARD, "reduction"),
        ("_softmax", FORWARD, "softmax"), ("_log_softmax_backward_data", BACKWARD, "softmax_grad"),
        ("embedding", FORWARD, "embedding"), ("embedding_dense_backward", BACKWARD, "embedding_grad"),
        ("max_pool2d_with_indices_backward", BACKWARD, "pool_grad"), ("avg_pool2d", FORWARD, "pool"),
        ("nll_loss_forward", FORWARD, "loss"), ("nll_loss_backward", BACKWARD, "loss_grad"),
        ("bernoulli_", FORWARD, "dropout"), ("native_dropout_backward", BACKWARD, "dropout_grad"),
        ("cat", FORWARD, "data_movement"), ("select_backward", BACKWARD, "data_movement_grad"),
        ("_to_copy", FORWARD, "data_movement"), ("ones_like", FORWARD, "data_movement"),
        ("_scaled_dot_product_flash_attention_backward", BACKWARD, "attention_grad"),
        ("_scaled_dot_product_efficient_attention", FORWARD, "attention"),
        # ONNX (ONNX importer)
        ("Conv", FORWARD, "conv"), ("Conv_grad", BACKWARD, "conv_grad"), ("Gemm", FORWARD, "matmul"),
        ("MatMul_grad", BACKWARD, "matmul_grad"), ("BatchNormalization_grad", BACKWARD, "norm_grad"),
        ("Relu_grad", BACKWARD, "activation_grad"), ("Softmax", FORWARD, "softmax"),
        ("ReduceMean_grad", BACKWARD, "reduction_grad"), ("MaxPool", FORWARD, "pool"),
        ("Gather", FORWARD, "data_movement"), ("Cast_grad", BACKWARD, "data_movement_grad"),
        ("Attention", FORWARD, "attention"), ("com.microsoft.FusedMatMul", FORWARD, "matmul"),
        # gnplace's own types and the toy graphs'
        ("input", FORWARD, "input"), ("read", FORWARD, "read"), ("loss", FORWARD, "loss"),
        ("loss_grad", BACKWARD, "loss_grad"), ("grad_sum", BACKWARD, "elementwise_grad"),
        ("sgd_update", UPDATE, "update"), ("momentum_update", UPDATE, "update"), ("adam_update", UPDATE, "update"),
        ("lamb_update", UPDATE, "update"), ("matmul", BACKWARD, "matmul_grad"), ("relu_grad", BACKWARD, "activation_grad"),
        # a name ending in _update is an update in any phase; aten's weight gradient of a convolution; one suffix
        # is dropped, not two (mutants without the _update rule, without _backward_weight, or stripping on passed)
        ("lamb_update", FORWARD, "update"), ("convolution_backward_weight", BACKWARD, "conv_grad"),
        ("relu_forward_grad", BACKWARD, "other_grad"),
    ],
)
def test_canonical_kind_of_raw_types(op_type, phase, kind):
    assert canonical_kind(op_type, phase) == kind


def test_both_importers_share_gradient_forms():
    assert canonical_kind("mm", BACKWARD) == canonical_kind("MatMul_grad", BACKWARD) == "matmul_grad"
    assert canonical_kind("convolution_backward", BACKWARD) == canonical_kind("Conv_grad", BACKWARD) == "conv_grad"
    assert canonical_kind("threshold_backward", BACKWARD) == canonical_kind("Relu_grad", BACKWARD)


def test_phase_decides_the_form_not_the_name():
    assert canonical_kind("convolution_backward", FORWARD) == "conv"
    assert canonical_kind("convolution", BACKWARD) == "conv_grad"
    assert canonical_kind("convolution", UPDATE) == canonical_kind("input", UPDATE) == "update"
    assert canonical_kind("input", BACKWARD) == "input" and canonical_kind("sgd_update", FORWARD) == "update"


def test_table_is_case_sensitive():
    assert base_kind("max") == "reduction" and base_kind("Max") == "elementwise"  # torch reduces, ONNX is n-ary
    assert base_kind("sum") == "reduction" and base_kind("Sum") == "elementwise"
    assert base_kind("CONV") == "other"


@pytest.mark.parametrize("op_type", ["op", "cluster", "warp_drive", "i0", "", "_", "__and__", "my.domain.Thing"])
def test_unknown_types_are_other(op_type):
    assert canonical_kind(op_type, FORWARD) == "other"
    assert canonical_kind(op_type, BACKWARD) == "other_grad"


# ------------------------------------------------------------------------------- shipped graphs
def raw_type_shares() -> dict[str, tuple[int, float]]:
    """Every raw op type in the shipped graphs and the toy graphs: (op count, share of FLOP)."""
    count: Counter[str] = Counter()
    flops: defaultdict[str, float] = defaultdict(float)
    graphs = [*shipped().values(), mlp_training_graph(layers=2, width=8, batch=4), layered_graph(40)]
    for g in graphs:
        for t, f in zip(g.op_types, g.flops.tolist()):
            count[t] += 1
            flops[t] += f
    total = sum(flops.values())
    return {t: (count[t], flops[t] / total) for t in count}


def test_every_frequent_raw_type_of_the_shipped_graphs_has_a_real_kind():
    shares = raw_type_shares()
    assert len(shares) > 100  # torch, ONNX and gnplace types
    frequent = {t for t, (n, share) in shares.items() if n > 5 or share > 1e-4}
    assert frequent >= {"convolution_backward", "Conv_grad", "mm", "MatMul_grad", "native_batch_norm", "Gather"}
    assert sorted(t for t in frequent if base_kind(t) == "other") == ["op"]  # the default type of hand-made graphs


def test_shipped_graphs_store_the_derived_kinds_but_onnx_embeddings():
    for file, g in shipped().items():
        derived = [canonical_kind(t, p) for t, p in zip(g.op_types, g.phase.tolist())]
        differ = {(t, derived[i], g.op_kinds[i]) for i, t in enumerate(g.op_types) if g.op_kinds[i] != derived[i]}
        if g.meta.get("importer") == "onnx" and g.meta.get("model") in ("gpt2", "bert_base", "t5_small"):
            assert differ == {("Gather", "data_movement", "embedding"), ("Gather_grad", "data_movement_grad", "embedding_grad")}, file
        else:
            assert not differ, file


def test_toy_training_graph_kinds():
    g = mlp_training_graph(layers=2, width=8, batch=4)
    assert Counter(g.op_kinds) == {
        "input": 1, "matmul": 2, "activation": 2, "reduction": 1, "activation_grad": 2, "matmul_grad": 4, "update": 2,
    }


# ------------------------------------------------------------------------------- ONNX embeddings
def test_onnx_gather_of_a_parameter_is_an_embedding():
    from onnx import TensorProto, helper, numpy_helper

    from gnplace.importers.onnx import from_onnx

    table = numpy_helper.from_array(np.ones((10, 4), dtype=np.float32), "table")
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"], name="lookup"),
        helper.make_node("Relu", ["e"], ["r"], name="relu"),
        helper.make_node("Gather", ["r", "zero"], ["y"], name="pick", axis=1),
    ]
    zero = numpy_helper.from_array(np.array(0, dtype=np.int64), "zero")
    graph = helper.make_graph(
        nodes, "emb", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [table, zero],
    )
    g = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    kinds = dict(zip(g.node_names, g.op_kinds))
    assert kinds["lookup"] == "embedding" and kinds["grad/lookup/table"] == "embedding_grad"
    assert kinds["pick"] == "data_movement" and kinds["grad/pick/r"] == "data_movement_grad"
    assert kinds["relu"] == "activation" and kinds["update/table"] == "update"


# ------------------------------------------------------------------------------- torch vs ONNX
def flop_share_by_kind(g: OpGraph) -> dict[str, float]:
    share: defaultdict[str, float] = defaultdict(float)
    for kind, f in zip(g.op_kinds, g.flops.tolist()):
        share[kind] += f / g.total_flops
    return dict(share)


def heavy_kinds(g: OpGraph, fraction: float = 0.99) -> set[str]:
    """The fewest kinds that together carry ``fraction`` of the graph's FLOP."""
    kinds, covered = set(), 0.0
    for kind, share in sorted(flop_share_by_kind(g).items(), key=lambda kv: (-kv[1], kv[0])):
        if covered >= fraction:
            break
        kinds.add(kind)
        covered += share
    return kinds


def real_pair(model: str) -> tuple[OpGraph, OpGraph]:
    return shipped()[f"real/{model}.gnpg"], shipped()[f"real/{model}_onnx.gnpg"]


def test_resnet50_torch_and_onnx_imports_share_their_kinds():
    """The acceptance test of the shared vocabulary.

    The sets are equal but for the loss: PyTorch records ResNet-50's own cross-entropy, a
    ``_log_softmax`` (``softmax``, and ``softmax_grad`` for its backward) feeding ``nll_loss`` and
    seeded by ``ones_like`` (``data_movement``), while the ONNX file stops at the logits and its
    importer synthesises a single ``loss`` op. A vocabulary cannot make a log-softmax a loss, so
    the test asserts the largest overlap: every kind of the ONNX import is in the torch import, the
    three extra torch kinds are those three loss ops, and the kinds carrying 99.9% of FLOP agree.
    """
    torch_graph, onnx_graph = real_pair("resnet50")
    torch_kinds, onnx_kinds = set(torch_graph.op_kinds), set(onnx_graph.op_kinds)
    assert onnx_kinds <= torch_kinds
    assert torch_kinds - onnx_kinds == {"softmax", "softmax_grad", "data_movement"}
    extra = [i for i, k in enumerate(torch_graph.op_kinds) if k not in onnx_kinds]
    assert sorted(torch_graph.op_types[i] for i in extra) == ["_log_softmax", "_log_softmax_backward_data", "ones_like"]
    assert float(torch_graph.flops[extra].sum()) < 1e-6 * torch_graph.total_flops
    assert "other" not in torch_kinds | onnx_kinds and "other_grad" not in torch_kinds | onnx_kinds
    assert heavy_kinds(torch_graph, 0.999) == heavy_kinds(onnx_graph, 0.999) == {
        "conv", "conv_grad", "norm", "norm_grad", "activation", "activation_grad", "matmul_grad", "pool_grad",
    }
    torch_share, onnx_share = flop_share_by_kind(torch_graph), flop_share_by_kind(onnx_graph)
    for kind in ("conv", "conv_grad"):
        assert torch_share[kind] == pytest.approx(onnx_share[kind], abs=1e-3)


@pytest.mark.parametrize("model", REAL_MODELS)
def test_real_models_onnx_kinds_are_a_subset_of_torch_kinds(model):
    """Every real model: the ONNX import's kinds are among the torch import's, but for ``dropout_grad``, and the
    kinds that carry 99% of FLOP agree (``matmul`` and ``matmul_grad``; ``conv`` and ``conv_grad`` for
    ResNet-50). The ONNX files of GPT-2, BERT and T5 hold training-mode ``Dropout`` nodes: a ``dropout`` op and
    its ``dropout_grad`` (as aten's ``native_dropout_backward``), where the torch import's trace records
    ``bernoulli_`` (``dropout``), ``div_`` and ``mul`` (``elementwise``) and a ``mul`` (``elementwise_grad``).
    What only the torch imports have (not asserted beyond ResNet-50):

    * GPT-2, BERT, T5: ``data_movement``/``data_movement_grad`` (``clone``, ``cat``, mask and
      position tensors made inside the step: ``arange``, ``ones_like``, ``new_zeros``, ``index``);
    * GPT-2, BERT, ViT: ``reduction_grad``: aten sums a bias gradient over the batch with ``sum``,
      where the ONNX importer's ``Gemm_grad``/``Add_grad`` does it inside one gradient op (GPT-2's
      ``reduction`` is a ``cumsum`` of its position ids);
    * ResNet-50: the loss ops (see the test above); the transformers have a ``softmax`` in every
      attention layer anyway, so their log-softmax adds no kind.
    """
    torch_graph, onnx_graph = real_pair(model)
    assert set(onnx_graph.op_kinds) - {"dropout_grad"} <= set(torch_graph.op_kinds)
    assert ("dropout_grad" in onnx_graph.op_kinds) == ("dropout" in torch_graph.op_kinds)
    assert heavy_kinds(torch_graph) == heavy_kinds(onnx_graph)
    assert not {"other", "other_grad"} & (set(torch_graph.op_kinds) | set(onnx_graph.op_kinds))
