"""Small ONNX models the ONNX importer's tests build (shared by ``test_onnx*.py``)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def weight(name: str, *shape: int) -> TensorProto:
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def model(nodes, inputs, outputs, inits=(), value_info=(), opset=17):
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(inits), value_info=list(value_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def vi(name: str, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def gemm_model(m=8, k=16, n=4):
    node = helper.make_node("Gemm", ["x", "w", "c"], ["y"], name="fc", transB=1)
    return model([node], [vi("x", [m, k])], [vi("y", [m, n])], [weight("w", n, k), weight("c", n)])


def conv_model(batch=2, cin=3, cout=8, size=10, kernel=3):
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["h"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Conv", ["r", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1]),
    ]
    inits = [weight("w1", cout, cin, kernel, kernel), weight("b1", cout), weight("w2", cout, cout, kernel, kernel)]
    return model(nodes, [vi("x", [batch, cin, size, size])], [vi("y", [batch, cout, size, size])], inits)


def chain_model(batch=8, width=16, layers=1, dynamic=False):
    """``layers`` x (MatMul -> Add bias -> Relu)."""
    nodes, inits, h = [], [], "x"
    for i in range(layers):
        nodes += [helper.make_node("MatMul", [h, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"relu{i}")]
        inits += [weight(f"w{i}", width, width), weight(f"b{i}", width)]
        h = f"r{i}"
    x = vi("x", ["batch", width] if dynamic else [batch, width])
    return model(nodes, [x], [vi(h, ["batch", width] if dynamic else [batch, width])], inits)
