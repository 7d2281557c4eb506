"""Which initializers are weights, read from the nodes alone (the whole importer's cases: ``test_onnx.py``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from gnplace.importers.onnx_weights import (
    FLOAT_TYPES,
    find_weights,
    no_weight_reads,
    read_by_torch_nn,
    regrouped,
    repeats,
    warn_folded_parameters,
)
from tests.importers.onnx_models import model, vi, weight

SHAPES = {"x": (2, 8, 4, 4), "g": (2, 2, 64), "n": (2, 2, 64), "r": (2, 8, 4, 4), "t": (2, 8, 4, 4)}


def shape(value):
    return SHAPES.get(value)


def _array(name, values):
    return numpy_helper.from_array(np.asarray(values, np.float32), name)


def test_repeats_along_an_axis_of_more_than_one_element():
    assert repeats(_array("a", [[1.0, 2.0], [1.0, 2.0]]))  # rows equal: axis 0
    assert repeats(_array("a", [[1.0, 1.0], [2.0, 2.0]]))  # columns equal: axis 1
    assert not repeats(_array("a", [[1.0, 2.0], [3.0, 4.0]]))
    assert not repeats(_array("a", [[1.0, 2.0]]))  # an axis of one element repeats nothing
    assert not repeats(_array("a", [5.0]))
    assert repeats(_array("a", [5.0, 5.0]))


def test_regrouped_follows_views_to_a_value_of_another_channel_size_or_rank():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["g"]), helper.make_node("Relu", ["x"], ["t"])]
    producer = {"g": 0, "t": 1}
    assert regrouped("g", nodes, producer, shape)  # [2, 8, 4, 4] -> [2, 2, 64]: dimension 1 changed
    assert not regrouped("t", nodes, producer, shape)  # a Relu is no view
    assert not regrouped("x", nodes, producer, shape)  # no producer: a graph input
    same = dict(SHAPES, g=(2, 8, 16))  # as many groups as channels: the rank changed
    assert regrouped("g", nodes, producer, same.get)
    kept = dict(SHAPES, g=(2, 8, 4, 4))
    assert not regrouped("g", nodes, producer, kept.get)
    assert not regrouped("g", nodes, producer, lambda value: None)  # shapes unknown: no claim


def test_find_weights_skips_static_reads_state_inputs_small_and_made_constants():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"]),
             helper.make_node("Add", ["a", "one"], ["b"]),  # one element: no weight
             helper.make_node("Mul", ["b", "made"], ["c"]),
             helper.make_node("Mul", ["c", "folded"], ["d"]),
             helper.make_node("Reshape", ["d", "shape"], ["e"]),  # input 1 is not differentiable
             helper.make_node("Mul", ["e", "unneeded"], ["f"])]
    inits = {t.name: t for t in [weight("w", 4, 4), weight("one", 1), weight("made", 4), weight("folded", 4),
                                  weight("shape", 2), weight("unneeded", 4)]}
    needed = [True] * 5 + [False]
    found = find_weights(nodes, inits, needed, set(), alias={}, parameter_of={}, made={"made"})
    assert found == {"w", "folded"}
    # a folded copy counts as the parameter it reads, a constant standing for a parameter as itself
    assert find_weights(nodes, inits, needed, set(), alias={"folded": "w"}, parameter_of={}, made=set()) == {"w",
                                                                                                             "made"}
    assert "one" in find_weights(nodes, inits, needed, set(), alias={}, parameter_of={"one": "p"}, made=set())
    # a read listed as holding no weight
    assert find_weights(nodes, inits, needed, {(0, 1)}, alias={}, parameter_of={}, made={"made"}) == {"folded"}


@pytest.mark.parametrize(("kind", "state"), [("LSTM", [5, 6]), ("GRU", [5]), ("RNN", [5])])
def test_a_recurrent_layers_initial_state_is_no_weight(kind, state):
    inputs = ["x", "W", "R", "B", "", "h0", "c0"][: 7 if kind == "LSTM" else 6]
    node = helper.make_node(kind, inputs, ["y"], hidden_size=2)
    inits = {n: weight(n, 2, 2) for n in ["W", "R", "B", "h0", "c0"]}
    found = find_weights([node], inits, [True], set(), alias={}, parameter_of={}, made=set())
    assert found == {"W", "R", "B"} and not {inputs[p] for p in state} & found


def test_an_integer_initializer_is_never_a_weight():
    ids = numpy_helper.from_array(np.arange(4, dtype=np.int64), "ids")
    node = helper.make_node("Mul", ["x", "ids"], ["y"])
    assert find_weights([node], {"ids": ids}, [True], set(), alias={}, parameter_of={}, made=set()) == set()
    assert TensorProto.INT64 not in FLOAT_TYPES and {TensorProto.FLOAT, TensorProto.BFLOAT16} <= FLOAT_TYPES


def _signature(proto, parameters, buffers=()):
    lines = [f"p_{t}: PARAMETER target='{t}'" for t in parameters]
    lines += [f"b_{t}: BUFFER target='{t}' persistent=True" for t in buffers]
    proto.graph.metadata_props.add(key="pkg.torch.export.ExportedProgram.graph_signature",
                                   value="\n# inputs\n" + "\n".join(lines) + "\nx: USER_INPUT\n")
    return proto


def test_no_weight_reads_need_the_signature_and_name_buffers_and_broadcast_copies():
    nodes = [helper.make_node("Mul", ["x", "mask"], ["a"]), helper.make_node("Add", ["a", "copy"], ["b"]),
             helper.make_node("Add", ["b", "w"], ["y"]), helper.make_node("Add", ["y", "bias"], ["z"])]
    inits = [weight("w", 2, 3), weight("mask", 2, 3), _array("copy", [[1.0, 2.0, 3.0]] * 2), weight("bias", 3)]
    proto = model(nodes, [vi("x", [2, 3])], [vi("z", [2, 3])], inits)
    by_name = {t.name: t for t in inits}
    sizes = {"a": (2, 3), "b": (2, 3), "y": (2, 3), "z": (2, 3)}.get
    assert no_weight_reads(proto, list(proto.graph.node), by_name, sizes) == set()  # no signature: no claim
    signed = _signature(proto, ["w"], buffers=["mask"])
    # the buffer; the made constant as large as the output whose rows repeat; not the bias, broadcast over the batch
    assert no_weight_reads(signed, list(signed.graph.node), by_name, sizes) == {(0, 1), (1, 1)}


def test_read_by_torch_nn_needs_every_reader_in_a_torch_nn_module():
    def node(name, cls):
        made = helper.make_node("Mul", ["x", name], [f"{name}_out"])
        made.metadata_props.add(key="pkg.torch.onnx.class_hierarchy", value=repr(["__main__.Net", cls, "aten.mul"]))
        return made

    norm, own = node("a", "torch.nn.modules.normalization.GroupNorm"), node("b", "__main__.Net")
    assert read_by_torch_nn([norm, own], ["a"])
    assert not read_by_torch_nn([norm, own], ["a", "b"])
    assert not read_by_torch_nn([norm, own], ["c"])  # read by no node: not known to be whole


def test_a_parameter_folded_twice_or_with_other_values_is_named_once():
    reader = helper.make_node("Add", ["x", "slice_1"], ["y"])
    sizes = {"slice_1": (1, 7, 8), "slice_2": (1, 1, 8)}.get
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # folded from the parameter alone, once: nothing to say
        warn_folded_parameters("m.onnx", [reader], {"slice_1": "pos"}, {"slice_1": ("pos",)}, {"slice_1"}, sizes)
        # not trained (frozen): nothing to say either
        warn_folded_parameters("m.onnx", [reader], {"slice_1": "pos"}, {"slice_1": ("pos", "val_0")}, set(), sizes)
    with pytest.warns(UserWarning, match=r"^m\.onnx: .* 'pos' into slice_1 \[1, 7, 8\] \(export"):
        warn_folded_parameters("m.onnx", [reader], {"slice_1": "pos"}, {"slice_1": ("pos", "val_0")}, {"slice_1"},
                               sizes)
    with pytest.warns(UserWarning, match=r"'pos' into slice_1 \[1, 7, 8\], slice_2 \[1, 1, 8\]"):
        warn_folded_parameters("m.onnx", [reader], {"slice_1": "pos", "slice_2": "pos"}, {}, {"slice_1", "slice_2"},
                               sizes)
