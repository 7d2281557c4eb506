"""What an exporter recorded beside an ONNX graph: text that is not what it writes is read as absent."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from gnplace.importers.onnx import from_onnx
from gnplace.importers.onnx_metadata import FOLDED_FROM_KEY
from tests.importers.onnx_models import model, vi, weight


@pytest.mark.parametrize("key", ["pkg.torch.onnx.name_scopes", "pkg.torch.onnx.class_hierarchy"])
@pytest.mark.parametrize("value", ["5", "{'a': 1, 'b': 2}", "'text'", "[" * 5000 + "]" * 5000, "[1, 2"])
def test_exporter_metadata_that_is_not_a_list_names_no_module(key, value):
    """An int, a dict, a string or text nested past the parser's depth where the exporter writes a list of
    module names was a TypeError or KeyError traceback; it is read as no module, as unparsable text was."""
    proto = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [8, 16])], [vi("y", [8, 4])],
                  [weight("w", 16, 4)])
    proto.graph.node[0].metadata_props.add(key=key, value=value)
    g = from_onnx(proto)
    assert g.module[g.node_names.index("mm")] == ""


@pytest.mark.parametrize("text", ["{[1]: 2}", "-" * 200_000 + "1", "[" * 100_000, "['w', 'v']"])
def test_metadata_no_literal_can_read_is_ignored_not_a_traceback(tmp_path, text):
    """A folded initializer's sources ({[1]: 2}: a TypeError; 200,000 signs: the parser's MemoryError) in a shared
    model were a traceback; the metadata only names what a value was folded from."""
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.5] * 16)])
    graph.initializer[0].metadata_props.add(key=FOLDED_FROM_KEY, value=text)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    assert from_onnx(tmp_path / "m.onnx").num_ops > 0
