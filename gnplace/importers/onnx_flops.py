"""FLOP of ONNX ops, and of the gradient ops a training step would run for them, from shapes.

The rules are those of :mod:`gnplace.importers.flops` (Paleo's conventions) restated for ONNX op
types, so that a model imported from an ONNX file and the same model imported from PyTorch get
the same forward FLOP: a multiply-add is 2 FLOP; ``Conv`` ``2 N Ho Wo Cout (Cin / groups) Kh Kw``
(plus one per output element for a bias); ``MatMul`` and ``Gemm`` ``2 M K N``; elementwise ops a
few FLOP per output element (1 for arithmetic, 4 for transcendental functions); reductions and
global pooling one per input element; normalisations and softmax 5 per element; ``LRN`` as the steps of
``torch.nn.LocalResponseNorm`` (its window sum plus 5 per element). Quantized products
(``MatMulInteger``, ``QLinearMatMul``, ``ConvInteger``, ``QLinearConv``) count as their float forms, and
``QuantizeLinear`` and ``DequantizeLinear`` 2 per element (a scale and a zero point). ``DFT`` and ``STFT`` count
FFTW's ``5 n log2 n`` per complex transform (half for real input), as aten's ``_fft_*``; ``AffineGrid`` its product
by the base grid, as aten's ``affine_grid_generator``; ``DeformConv`` its convolution plus ``GridSample``'s sampling.
The ops of opsets 23-28: ``Swish`` as aten's ``silu`` and ``SwiGLU`` as its ``silu(a) * b``; ``CumProd`` one
multiply per element, as ``CumSum`` one add; ``RotaryEmbedding`` the rotation of its rotated pairs (4 products, 2
sums); ``TensorScatter`` (a cache update) and ``BitCast`` (a reinterpretation) move data.

ONNX files hold only the forward graph, so the importer synthesises the backward pass.
:func:`grad_flops` gives the FLOP of the gradient with respect to one input: for ``Conv``,
``ConvTranspose``, ``Gemm``, ``MatMul`` and ``Einsum`` the data and weight gradients each cost the
forward product; a bias gradient is a reduction over the output; elementwise gradients cost a few
FLOP per output element (plus a reduction when the input was broadcast), mirroring the aten
backward ops PyTorch runs (``threshold_backward``, ``tanh_backward``, ``native_layer_norm_backward``,
...). Work that every gradient of an op needs and that runs once whichever gradients are taken
(back-propagation through time in ``LSTM``, ``GRU`` and ``RNN``) is :func:`shared_grad_flops`,
charged once per op.

Shapes are tuples of ints (``()`` for a scalar); ``None`` marks an absent optional input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "forward_flops",
    "grad_flops",
    "shared_grad_flops",
    "VIEW_OPS",
    "FREE_OPS",
    "STATIC_OPS",
    "TYPE_ONLY_INPUTS",
    "NON_DIFFERENTIABLE",
    "SAVES_OTHER_INPUTS",
    "SAVES_OWN_INPUT",
    "SAVES_OUTPUT",
    "SAVES_MASK",
    "canonical_op_type",
]

Shape = tuple[int, ...]

#: Ops that only re-describe their first input (views, aliases, inference-mode dropout): folded into
#: the op that produced the data, as the PyTorch importer folds aten views. A ``Dropout`` in training mode
#: (its ``training_mode`` input true, its ratio not 0) is no view: the importer keeps it as an op, and passes
#: it here with ``training_mode`` among its attributes.
VIEW_OPS = frozenset({
    "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Expand", "Slice", "Split",
    "Dropout", "Optional", "OptionalGetElement", "SplitToSequence", "SequenceAt",
})

#: Ops whose output depends only on shapes (known once the input shapes are), or that make data
#: from nothing: their values are compile-time constants, so they are dropped like ``Constant``.
STATIC_OPS = frozenset({
    "Constant", "Shape", "Size", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
    "Multinomial", "Bernoulli", "EyeLike",
})

#: Input positions whose type or shape an op reads, never the values: constants for the op's purposes.
TYPE_ONLY_INPUTS: dict[str, frozenset[int]] = {"CastLike": frozenset({1})}

#: Ops that move or create data but do no arithmetic: 0 FLOP, kept as nodes (like aten ``cat``); a scatter with a
#: ``reduction`` (:data:`_SCATTERS`) does arithmetic, one FLOP per update.
FREE_OPS = frozenset({
    "Concat", "Gather", "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Scatter", "Pad", "Tile",
    "Cast", "CastLike", "Range", "ConstantOfShape", "OneHot", "Trilu", "NonZero", "ArgMax", "ArgMin", "TopK",
    "Compress", "DepthToSpace", "SpaceToDepth", "ReverseSequence", "Unique", "CenterCropPad", "ConcatFromSequence",
    "SequenceConstruct", "SequenceInsert", "SequenceLength", "Col2Im",
    # MaxUnpool writes each value at its index into zeros (its gradient gathers from there): data movement
    "MaxUnpool",
    # TensorScatter (opset 24) writes its update into the cache at the write indices, as ScatterND without a
    # reduction (its gradients: the cache's with the written rows zeroed, the update's gathered from them); BitCast
    # (opset 26) reinterprets the bits as another type of the same width, no value conversion
    "TensorScatter", "BitCast",
})

#: Scatters whose ``reduction`` attribute (``add``, ``mul``, ``max``, ``min``; ``none`` by default) combines each
#: update with the element it lands on, as aten's ``scatter_add`` and ``scatter_reduce``.
_SCATTERS = frozenset({"ScatterElements", "ScatterND"})

# FLOP per output element of elementwise ops.
_ELEMENTWISE: dict[str, float] = {
    **dict.fromkeys(["Add", "Sub", "Mul", "Div", "Neg", "Relu", "LeakyRelu", "PRelu", "Clip", "Abs", "Sign", "Floor",
                     "Ceil", "Round", "Reciprocal", "Sqrt", "Pow", "Mod", "Equal", "Less", "LessOrEqual", "Greater",
                     "GreaterOrEqual", "Not", "And", "Or", "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
                     "BitwiseNot", "BitShift", "IsNaN", "IsInf", "ThresholdedRelu", "Shrink"], 1.0),
    # a selection, no arithmetic: free, as aten's where and masked_fill (its gradient too, but for the sum of
    # a broadcast input's)
    "Where": 0.0,
    **dict.fromkeys(["Sigmoid", "Tanh", "Exp", "Log", "Erf", "Gelu", "Softplus", "Softsign", "Elu", "Selu", "Celu",
                     "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
                     "HardSigmoid", "HardSwish", "Mish",
                     # Swish (opset 24): x * sigmoid(alpha x), as aten's silu (its gradient, silu_backward's 4, too)
                     "Swish"], 4.0),
    # SwiGLU (opset 28): Swish(A) * B, a Swish and a product, as aten's silu(a) * b and its glu (a * sigmoid(b));
    # each gradient 5 (its default here): dA the product with B and silu_backward's 4, dB Swish(A) again times the
    # output's gradient (the fused op keeps no Swish(A))
    "SwiGLU": 5.0,
}

# n-ary elementwise ops: (inputs - 1) FLOP per output element.
_VARIADIC = frozenset({"Sum", "Mean", "Max", "Min"})

# FLOP per output element of the gradient of elementwise ops (per input), after aten's backward ops:
# add passes the gradient through, mul multiplies by the other factor, relu is threshold_backward, ...
_ELEMENTWISE_GRAD: dict[str, float] = {
    **dict.fromkeys(["Add", "Sum", "Where"], 0.0),
    **dict.fromkeys(["Sub", "Neg", "Mul", "Relu", "LeakyRelu", "Clip", "Abs", "Max", "Min", "Mean", "Exp",
                     "Log", "ThresholdedRelu", "Shrink", "Sign", "Floor", "Ceil", "Round"], 1.0),
    **dict.fromkeys(["Div", "Sqrt", "Reciprocal", "PRelu"], 2.0),
    "Pow": 3.0,
}

_NORMS = frozenset({"BatchNormalization", "LayerNormalization", "InstanceNormalization", "GroupNormalization",
                    "RMSNormalization", "MeanVarianceNormalization", "LpNormalization", "SkipLayerNormalization"})
_SOFTMAX = frozenset({"Softmax", "LogSoftmax", "Hardmax"})
_REDUCTIONS = frozenset({"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "CumSum"})
_POOLS = frozenset({"MaxPool", "AveragePool", "LpPool", "MaxRoiPool"})
_GLOBAL_POOLS = frozenset({"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
_MATMULS = frozenset({"MatMul", "MatMulInteger", "FusedMatMul", "QLinearMatMul"})
#: Quantized convolutions: (weight's input position, bias's input position or None). ``ConvInteger`` is
#: ``(x, w, x_zero_point, w_zero_point)``, ``QLinearConv`` ``(x, x_scale, x_zero_point, w, w_scale, w_zero_point,
#: y_scale, y_zero_point, B)``: the rule of ``Conv`` with the weight and bias where they are.
_QUANTIZED_CONVS: dict[str, tuple[int, int | None]] = {"ConvInteger": (1, None), "QLinearConv": (3, 8)}
#: (De)quantization, per element: a scale and a zero point (``x / scale + zero_point``, ``(x - zero_point) * scale``).
_QUANTIZE = frozenset({"QuantizeLinear", "DequantizeLinear"})
#: Recurrent layers: FLOP per hidden unit, time step and sequence of everything but the gate
#: matmuls (the two bias adds per gate, the gate activations at 4 FLOP, the cell and state updates).
_RECURRENT: dict[str, float] = {"LSTM": 32.0, "GRU": 24.0, "RNN": 6.0}

#: Input positions through which no gradient flows (indices, shapes, masks, running statistics).
NON_DIFFERENTIABLE: dict[str, frozenset[int]] = {
    **dict.fromkeys(["Reshape", "Expand", "Tile", "Upsample", "TopK", "Split", "Squeeze", "Unsqueeze", "CumSum",
                     "Trilu", "Gather", "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Scatter",
                     "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                     "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "Compress"], frozenset({1})),
    "BatchNormalization": frozenset({3, 4}),
    "Slice": frozenset({1, 2, 3, 4}),
    "Pad": frozenset({1, 2, 3}),
    "Resize": frozenset({1, 2, 3}),
    "Clip": frozenset({1, 2}),
    "Dropout": frozenset({1, 2}),
    "Where": frozenset({0}),
    "Attention": frozenset({3}),
    "SoftmaxCrossEntropyLoss": frozenset({1, 2}),
    "NegativeLogLikelihoodLoss": frozenset({1, 2}),
    "CastLike": frozenset({1}),  # read for its type alone (TYPE_ONLY_INPUTS)
    "MaxUnpool": frozenset({1, 2}),  # the indices and the output shape
    "RoiAlign": frozenset({1, 2}),  # the boxes and their batch indices (torchvision's roi_align takes no gradient)
    # a transform's length and axis, a frame's step and length, a grid's size: integers
    "DFT": frozenset({1, 2}),
    "STFT": frozenset({1, 3}),
    "AffineGrid": frozenset({1}),
    # quantization scales and zero points: fixed parameters of the format (buffers of torch's observers), no weights
    **dict.fromkeys(["QuantizeLinear", "DequantizeLinear"], frozenset({1, 2})),
    **dict.fromkeys(["QLinearConv", "QLinearMatMul"], frozenset({1, 2, 4, 5, 6, 7})),
    **dict.fromkeys(["ConvInteger", "MatMulInteger"], frozenset({2, 3})),
    "CumProd": frozenset({1}),  # the axis
    "TensorScatter": frozenset({2}),  # the write indices
    # the cosine and sine caches (functions of the positions, buffers in torch's rotary modules) and the positions
    "RotaryEmbedding": frozenset({1, 2, 3}),
    **dict.fromkeys(["Shape", "Size", "OneHot", "Range", "ConstantOfShape", "EyeLike", "ArgMax", "ArgMin", "NonZero",
                     "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial",
                     # comparisons and logic: a boolean result, no gradient to any input (a float threshold
                     # read by Less is no weight)
                     "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal", "And", "Or", "Xor", "Not",
                     "IsNaN", "IsInf",
                     # selections and quantization to integers: index or integer results
                     "NonMaxSuppression", "DynamicQuantizeLinear",
                     # a reinterpretation of bits has no derivative (the spec marks BitCast's input non-differentiable)
                     "BitCast"],
                    frozenset(range(8))),
}

#: Ops whose gradient with respect to one input reads the *other* inputs (products, selections).
SAVES_OTHER_INPUTS = frozenset({"Conv", "ConvTranspose", "Gemm", "Einsum", "Mul", "Div", "Pow", "Where", "Attention",
                                "Gather", "GatherElements", "GatherND", "Max", "Min", "PRelu",
                                "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss", "GridSample", "DeformConv",
                                "STFT", "SwiGLU", "RotaryEmbedding"} | _MATMULS
                               | _NORMS)
#: Ops whose gradient reads the input it is taken for (gelu, erf, log, norms, pooling, ...).
SAVES_OWN_INPUT = frozenset({"Gelu", "Erf", "Log", "Sin", "Cos", "Tan", "Softplus", "LeakyRelu", "Abs", "Clip",
                             "Pow", "Div", "Reciprocal", "Max", "Min", "HardSigmoid", "HardSwish", "Mish", "Selu",
                             "Celu", "PRelu", "Shrink", "ThresholdedRelu", "GridSample", "LRN", "Swish", "SwiGLU",
                             "CumProd"} | _NORMS | _POOLS
                            | _GLOBAL_POOLS | {"ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceLogSumExp"})
#: Ops whose gradient reads their own output (relu, sigmoid, tanh, softmax, exp, sqrt, norms).
SAVES_OUTPUT = frozenset({"Relu", "Sigmoid", "Tanh", "Exp", "Sqrt", "Elu", "Softsign", "Attention", "LRN", "CumProd"}
                         | _SOFTMAX
                         | _NORMS)

#: Ops whose gradient reads the mask they keep (not their input or output): a training ``Dropout``'s gradient is
#: the output's gradient times its mask and scale (aten's ``native_dropout_backward``, or ``mul`` by the mask).
SAVES_MASK = frozenset({"Dropout"})

#: Norms laid out (X, scale, bias, ...) whose gradients aten computes in one op (``native_batch_norm_backward``,
#: ``native_layer_norm_backward``, ...): one gradient op reading X and the scale, not the output (the
#: PyTorch importer's; three ops, each reading X, the scale and the output, read 3-4.5x the bytes).
FUSED_NORM_GRADS = frozenset({"BatchNormalization", "LayerNormalization", "InstanceNormalization",
                              "GroupNormalization", "RMSNormalization"})
#: Where an op's bias is: its gradient sums the output's gradient and reads no other input.
BIAS_SLOT = {"Conv": 2, "ConvTranspose": 2, "Gemm": 2}
#: Ops whose gradient, for an input of the output's shape, is the output's gradient itself: no op
#: (aten's add runs no backward op; a broadcast input's gradient is a reduction, and stays an op).
PASS_THROUGH_GRADS = frozenset({"Add", "Sum"})

# ops of other domains that behave like a standard op for FLOP counting
_ALIASES = {"FastGelu": "Gelu", "BiasGelu": "Gelu", "QuickGelu": "Gelu", "BiasAdd": "Add",
            "SimplifiedLayerNormalization": "LayerNormalization",
            "SkipSimplifiedLayerNormalization": "SkipLayerNormalization"}


#: ONNX Runtime's contrib ops named as a standard op of other inputs: ``com.microsoft`` ``Attention`` takes
#: the input, packed QKV weights and their bias where the standard one (opset 23) takes Q, K and V; the
#: standard rules do not apply, so they stay custom-domain ops (refused, or costed as unknown).
_CONTRIB_CLASHES = frozenset({"Attention"})


def canonical_op_type(op_type: str, domain: str = "") -> str:
    """The op type whose rules apply: the type itself in the standard domains, a known alias else.

    Examples:
        >>> canonical_op_type("FastGelu", "com.microsoft"), canonical_op_type("Conv")
        ('Gelu', 'Conv')
        >>> canonical_op_type("Conv", "my.domain"), canonical_op_type("Attention", "com.microsoft")
        ('my.domain.Conv', 'com.microsoft.Attention')
    """
    if domain in ("", "ai.onnx"):
        return op_type
    if domain == "com.microsoft" and op_type not in _CONTRIB_CLASHES:
        return _ALIASES.get(op_type, op_type)
    return f"{domain}.{op_type}"


def _numel(shape: Shape | None) -> int:
    return math.prod(shape) if shape is not None else 0


def _kernel(attrs: Mapping[str, Any]) -> int:
    """Taps of a pool's window: the product of its ``kernel_shape`` (1 without one)."""
    kernel = attrs.get("kernel_shape")
    return math.prod(int(k) for k in kernel) if kernel else 1


def _resize_taps(attrs: Mapping[str, Any], x: Shape | None, out: Shape | None) -> int:
    """Input points a ``Resize`` reads per output element, one FLOP each (as aten's ``upsample_*`` rules).

    Nearest reads 1; linear 2 and cubic 4 per resized axis (an axis whose size changes; at least one):
    bilinear 4, trilinear 8, bicubic 16.
    """
    mode = str(attrs.get("mode", "nearest"))
    if mode == "nearest":
        return 1
    resized = sum(a != b for a, b in zip(x, out)) if x is not None and out is not None and len(x) == len(out) else 2
    return (4 if mode == "cubic" else 2) ** max(resized, 1)


def _lrn_reads(attrs: Mapping[str, Any], x: Shape | None) -> tuple[int, int]:
    """(elements of the input, window reads of its padded square) of an ``LRN`` over ``x`` ``[N, C, ...]``.

    As ``torch.nn.LocalResponseNorm`` runs it: ``x * x`` is padded by ``size - 1`` channels and averaged over a
    window of ``size`` channels (``avg_pool3d``), so its backward spreads each gradient over the ``size`` windows of
    every padded element (``avg_pool3d_backward``, :mod:`gnplace.importers.flops`' rule).
    """
    size = int(attrs.get("size", 1))
    numel = _numel(x)
    if x is None or len(x) < 2 or x[1] == 0:
        return numel, size * numel
    return numel, size * (numel // x[1]) * (x[1] + size - 1)


def _grid_sample_sizes(attrs: Mapping[str, Any], grid: Shape | None, out: Shape | None) -> tuple[int, int, int, int]:
    """(output elements, grid points, spatial dims, taps per output element) of a ``GridSample``.

    As aten's ``grid_sampler_2d`` rule: the grid ``[N, *out_spatial, dims]`` holds one point per output location;
    nearest reads 1 input point per output element, linear 2 and cubic 4 per spatial dim (bilinear 4, bicubic 16).
    """
    mode = str(attrs.get("mode", "linear"))  # "bilinear" before opset 20
    spatial = grid[-1] if grid else 2
    points = _numel(grid) // max(spatial, 1) if grid is not None else 0
    taps = 1 if mode == "nearest" else (4 if mode in ("bicubic", "cubic") else 2) ** spatial
    return _numel(out), points, spatial, taps


def _grid_sample_points(attrs: Mapping[str, Any], grid: Shape | None) -> float:
    """FLOP of a ``GridSample`` per grid point, all points together; the backward recomputes them once.

    Unnormalising each coordinate is a multiply-add (2 FLOP); but for nearest, each tap's weight is a product of
    distances (3 FLOP a tap).
    """
    _, points, spatial, taps = _grid_sample_sizes(attrs, grid, None)
    return float(points * (2 * spatial + (0 if taps == 1 else 3 * taps)))


#: Sample points per axis of a ``RoiAlign`` bin whose ``sampling_ratio`` is 0 (adaptive: ``ceil(roi size / output
#: size)``, set by the boxes' values, data): 2, the ratio torchvision's Mask R-CNN and most exports fix.
_ROI_ALIGN_ADAPTIVE_SAMPLES = 2
#: FLOP per sample point of a ``RoiAlign`` (shared by the channels): its two coordinates (a multiply-add each for the
#: bin's start and the sample's offset) and its four bilinear tap weights (3 FLOP a tap), as ``GridSample``'s per-point
#: work (:func:`_grid_sample_points`).
_ROI_ALIGN_POINT = 16


def _roi_align_sizes(attrs: Mapping[str, Any], out: Shape | None) -> tuple[int, int]:
    """(output elements ``R C Ho Wo``, sample points per bin) of a ``RoiAlign`` with output ``[R, C, Ho, Wo]``."""
    ratio = int(attrs.get("sampling_ratio", 0))
    per_axis = ratio if ratio > 0 else _ROI_ALIGN_ADAPTIVE_SAMPLES
    return _numel(out), per_axis * per_axis


def _roi_align_forward(attrs: Mapping[str, Any], out: Shape | None) -> float:
    """FLOP of a ``RoiAlign`` (ONNX spec: each output element pools the bilinear samples of its bin).

    Per output element and sample, its 4 taps read (1 FLOP each, as ``Resize``'s linear taps) and the pooling step
    (an add for ``avg``, a compare for ``max``); one divide per element for ``avg``; per sample point of the boxes'
    bins, :data:`_ROI_ALIGN_POINT` for the coordinates and tap weights.
    """
    elements, samples = _roi_align_sizes(attrs, out)
    channels = out[1] if out is not None and len(out) > 1 and out[1] else 1
    average = str(attrs.get("mode", "avg")) == "avg"
    return float(elements * (5 * samples + average) + elements // channels * samples * _ROI_ALIGN_POINT)


def _rotated_elements(attrs: Mapping[str, Any], inputs: Sequence[Shape | None]) -> int:
    """Elements of a ``RotaryEmbedding``'s input ``X`` that it rotates (ONNX spec, opset 23).

    ``X`` is ``[B, heads, S, head size]``, or ``[B, S, hidden]`` of ``num_heads`` heads; the first
    ``rotary_embedding_dim`` values of each head (all by default) are rotated, the others copied. The caches'
    last dim, ``rotary_embedding_dim / 2``, says how many where the attribute does not.
    """
    x = inputs[0] if inputs else None
    if not x:
        return 0
    heads = int(attrs.get("num_heads", 0) or 0)
    head = x[-1] if len(x) != 3 or heads <= 0 else x[-1] // heads
    cache = inputs[1] if len(inputs) > 1 else None
    rotated = int(attrs.get("rotary_embedding_dim", 0) or 0) or (2 * cache[-1] if cache else head)
    return min(_numel(x), _numel(x) // max(head, 1) * rotated)


def _nms_flops(inputs: Sequence[Shape | None]) -> float:
    """FLOP of a ``NonMaxSuppression`` of ``boxes [B, N, 4]`` and ``scores [B, C, N]`` (ONNX spec).

    Per class of each batch, each box's score is compared with ``score_threshold`` and its area taken (1 + 3 FLOP);
    the boxes then are visited by score (the sort is data movement, as ``TopK``) and each is compared with the boxes
    kept so far: an IoU (the intersection's corners, 4; its sides, clamped, and area, 5; the union, 2; the ratio and
    the compare with ``iou_threshold``, 2: 13 FLOP) per pair. Which boxes are kept is data: counted as if every box
    were, ``N (N - 1) / 2`` pairs, an upper bound (``max_output_boxes_per_class`` stops it sooner).
    """
    boxes = inputs[0] if inputs else None
    scores = inputs[1] if len(inputs) > 1 else None
    if boxes is None or scores is None or len(scores) != 3:
        return 0.0
    batch, classes, n = scores
    return float(batch * classes * (4 * n + 13 * n * (n - 1) // 2))


def _det_sizes(x: Shape | None) -> tuple[int, int]:
    """(matrices, size ``n``) of a ``Det`` input ``[*, n, n]``."""
    if x is None or len(x) < 2:
        return 1, 1
    return math.prod(x[:-2]), x[-1]



def _fft_flops(points: int, transforms: int, real: bool) -> float:
    """FLOP of ``transforms`` discrete Fourier transforms of ``points`` points each, by FFTW's benchmark convention.

    ``5 n log2 n`` per complex transform of ``n`` points (the radix-2 Cooley-Tukey count: ``n/2 log2 n`` butterflies
    of a complex multiply (6 FLOP) and two complex adds (4); FFTW's "mflops" use it for every size), half that for a
    real one, as :mod:`gnplace.importers.flops` counts aten's ``_fft_r2c``, ``_fft_c2r`` and ``_fft_c2c``.
    """
    return (2.5 if real else 5.0) * points * math.log2(max(points, 2)) * transforms


def _dft_flops(attrs: Mapping[str, Any], x: Shape | None, out: Shape | None) -> float:
    """FLOP of a ``DFT`` of ``x`` ``[batch, ..., 1 or 2]`` (real or complex values) along its ``axis``.

    The transform's length is ``dft_length`` (the output's size on the axis), or, of a one-sided transform, the
    input's size on the axis where its half spectrum is the output's (else ``2 (bins - 1)``). The importer passes the
    ``axis`` input of opset 20 as an attribute; without one, 1 (opset 17's default).
    """
    if x is None or out is None or len(x) < 2 or len(out) != len(x):
        return 0.0
    axis = int(attrs.get("axis", 1)) % len(x)
    bins = out[axis]
    points = bins
    if int(attrs.get("onesided", 0)) and not int(attrs.get("inverse", 0)):
        points = x[axis] if x[axis] // 2 + 1 == bins else 2 * max(bins - 1, 0)
    transforms = _numel(x) // max(x[axis] * x[-1], 1)
    return _fft_flops(points, transforms, x[-1] == 1)


def _stft_flops(inputs: Sequence[Shape | None], attrs: Mapping[str, Any], out: Shape | None) -> float:
    """FLOP of an ``STFT`` of ``signal [batch, length, 1 or 2]`` into ``[batch, frames, bins, 2]``.

    Per frame, the window's product (one FLOP per point, 2 of a complex signal) and the frame's DFT
    (:func:`_fft_flops`). The frame's length is the window's, or, without one, the bins' (``2 (bins - 1)`` of a
    one-sided transform).
    """
    signal = inputs[0] if inputs else None
    window = inputs[2] if len(inputs) > 2 else None
    if signal is None or out is None or len(out) != 4 or len(signal) != 3:
        return 0.0
    frames, bins = out[0] * out[1], out[2]
    onesided = int(attrs.get("onesided", 1)) and signal[-1] == 1
    points = window[0] if window else (2 * max(bins - 1, 0) if onesided else bins)
    windowing = points * signal[-1] if window is not None else 0
    return frames * windowing + _fft_flops(points, frames, signal[-1] == 1)


def _deform_conv_sizes(inputs: Sequence[Shape | None], out: Shape | None) -> tuple[int, int, int, int, int, bool]:
    """(output elements, multiply-adds per output element, sampled values, sample points, taps, masked).

    Of a ``DeformConv`` of ``X [N, C, *in]``, ``W [Cout, C / group, *kernel]`` and ``offset [N, og 2 prod(kernel),
    *out]``: each output location reads ``C prod(kernel)`` values (sampled values), each of ``2^s`` bilinear taps
    over ``s`` spatial dims; the points sampled are one per offset group, kernel tap and output location.
    """
    x, w = inputs[0], inputs[1] if len(inputs) > 1 else None
    offset = inputs[2] if len(inputs) > 2 else None
    mask = inputs[4] if len(inputs) > 4 else None
    if x is None or w is None or out is None or len(out) < 3:
        return 0, 0, 0, 0, 1, False
    spatial = len(out) - 2
    kernel = math.prod(w[2:])
    locations = _numel(out) // max(out[1], 1)
    points = _numel(offset) // spatial if offset is not None else 0
    return _numel(out), _numel(w[1:]), locations * x[1] * kernel, points, 2 ** spatial, mask is not None


def _deform_conv_flops(attrs: Mapping[str, Any], inputs: Sequence[Shape | None], out: Shape | None) -> float:
    """FLOP of a ``DeformConv``: a ``Conv`` of the sampled values plus their bilinear sampling (``GridSample``'s rule).

    The convolution ``2 N Cout *out (C / group) *kernel`` (and a bias add per output element); per sampled value, one
    FLOP per tap read and one for the ``mask``'s product; per sample point, its coordinates (an add of the offset
    to the kernel tap's position, and the position's multiply-add: 2 per dim) and its tap weights (3 FLOP a tap).
    """
    elements, per, values, points, taps, masked = _deform_conv_sizes(inputs, out)
    bias = elements if len(inputs) > 3 and inputs[3] is not None else 0
    spatial = len(out) - 2 if out is not None else 2
    return 2.0 * elements * per + bias + values * (taps + masked) + points * (2 * spatial + 3 * taps)



def _deform_conv_output(inputs: Sequence[Shape | None]) -> Shape | None:
    """The output shape ``[N, Cout, *out]`` of a ``DeformConv``, from ``X``, ``W`` and ``offset`` (``None`` unknown)."""
    x, w = inputs[0] if inputs else None, inputs[1] if len(inputs) > 1 else None
    offset = inputs[2] if len(inputs) > 2 else None
    if x is None or w is None or offset is None or len(offset) < 3:
        return None
    return (x[0], w[0], *offset[2:])


def _deform_conv_grad(inputs: Sequence[Shape | None], out: Shape | None, position: int) -> float:
    """FLOP of a ``DeformConv``'s gradient for its input at ``position``, after :func:`shared_grad_flops`' share.

    The sampled values' gradient (``W``'s transpose by the output's gradient) and the sample points are shared: the
    ``X`` gradient spreads each value's gradient over its taps (a multiply-add a tap, as ``GridSample``'s); ``W``'s
    is the conv's weight gradient over the values sampled again (:func:`_deform_conv_flops`' sampling); the
    ``offset``'s weighs each tap by its weight's derivative (a multiply-add a tap) and goes back through each point's
    coordinates (2 per dim); the ``mask``'s samples each value again and takes its product with the value's gradient
    (a multiply-add); the bias's sums the output's gradient.
    """
    elements, per, values, points, taps, masked = _deform_conv_sizes(inputs, out)
    spatial = len(out) - 2 if out is not None else 2
    by_position = {
        0: 2.0 * values * taps,
        1: 2.0 * elements * per + values * (taps + masked),
        2: 2.0 * values * taps + 2.0 * spatial * points,
        3: float(elements),
        4: values * (taps + 2.0),
    }
    return by_position.get(position, 0.0)


def _gemm_mkn(attrs: Mapping[str, Any], a: Shape, out: Shape) -> tuple[int, int, int]:
    k = a[0] if attrs.get("transA", 0) else a[-1]
    return out[0], k, out[1]


def _matmul_k(attrs: Mapping[str, Any], a: Shape) -> int:
    if len(a) == 1:
        return a[0]
    return a[-2] if attrs.get("transA", 0) else a[-1]


def _einsum_size(inputs: Sequence[Shape | None], attrs: Mapping[str, Any]) -> int | None:
    """Points of the loop nest an einsum runs (``None`` if the equation does not fit the shapes).

    One operand: the product of the sizes of its indices. Several: the multiply-adds of contracting them left
    to right, as ``torch.einsum`` (without opt_einsum) and aten's ``bmm`` decomposition run it: each pair loops
    over the indices of both operands that are shared or still needed (by a later operand or the output); an
    index of one side that nothing later reads is summed out first. ``bi,oij,bj->bo`` is ``b o i j + b o j``
    multiply-adds, not the ``2 b o i j`` of a nest over every index for each product.
    """
    equation = str(attrs.get("equation", "")).replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(inputs):
        return None
    sizes: dict[str, int] = {}
    ellipsis = 1
    for term, shape in zip(terms, inputs):
        if shape is None:
            return None
        letters = term.replace("...", "")
        if "..." in term:
            head = term.index("...")
            tail = len(letters) - head
            if len(shape) < len(letters):
                return None
            ellipsis = max(ellipsis, math.prod(shape[head: len(shape) - tail]))
            shape = shape[:head] + shape[len(shape) - tail:]
        if len(letters) != len(shape):
            return None
        for letter, size in zip(letters, shape):
            sizes[letter] = max(sizes.get(letter, 1), size)
    if len(terms) == 1:
        return math.prod(sizes.values()) * ellipsis
    letters_of = [set(term.replace("...", "")) for term in terms]
    output = set(rhs.replace("...", "")) if arrow else {c for c in sizes if lhs.count(c) == 1}
    current, points = letters_of[0], 0
    for k in range(1, len(terms)):
        after = output.union(*letters_of[k + 1:])
        other = letters_of[k]
        loop = (current & other) | (current & after) | (other & after)
        points += math.prod(sizes[c] for c in loop)
        current = (current | other) & after
    return points * ellipsis


def _attention_sizes(attrs: Mapping[str, Any], q: Shape, k: Shape, v: Shape) -> tuple[int, int, int, int, int]:
    """``(batch x heads, Lq, Lk, head size of q/k, head size of v)`` of an ``Attention`` op."""
    if len(q) == 4:
        return math.prod(q[:2]), q[2], k[2], q[3], v[3]
    heads = int(attrs.get("q_num_heads", 1)) or 1
    kv_heads = int(attrs.get("kv_num_heads", heads)) or heads
    return q[0] * heads, q[1], k[1], q[2] // heads, v[2] // kv_heads


def _recurrent_sizes(
    op_type: str, attrs: Mapping[str, Any], inputs: Sequence[Shape | None]
) -> tuple[int, int, int, int, int] | None:
    """The sizes of an ``LSTM``, ``GRU`` or ``RNN`` node, or ``None`` for other ops and unknown shapes.

    ``X`` is ``[seq, batch, input]`` (``[batch, seq, input]`` under ``layout=1``), ``W`` is
    ``[directions, gates x hidden, input]`` and ``R`` is ``[directions, gates x hidden, hidden]``.

    Returns:
        tuple: steps x batch x directions, gates x hidden, input size, hidden size, batch x directions.
    """
    if op_type not in _RECURRENT or len(inputs) < 3:
        return None
    x, w, r = inputs[:3]
    if x is None or w is None or r is None or len(x) != 3 or len(w) != 3 or len(r) != 3:
        return None
    seq, batch = (x[1], x[0]) if int(attrs.get("layout", 0)) == 1 else (x[0], x[1])
    return seq * batch * w[0], w[1], w[2], r[2], batch * w[0]


def forward_flops(
    op_type: str, attrs: Mapping[str, Any], inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]
) -> float | None:
    """FLOP of one ONNX op, or ``None`` if no rule knows ``op_type``.

    Args:
        op_type (str): the op type after :func:`canonical_op_type`, e.g. ``"Conv"``.
        attrs (Mapping): the node's attributes by name (strings as :class:`str`); for ``Dropout``, the importer
            adds ``training_mode`` (the value of that input: in training mode it is an op, else a view).
        inputs (Sequence): shape of each input (``None`` for an absent optional input).
        outputs (Sequence): shape of each output.

    Examples:
        >>> forward_flops("MatMul", {}, [(8, 16), (16, 4)], [(8, 4)])
        1024.0
        >>> forward_flops("Conv", {}, [(1, 3, 8, 8), (16, 3, 3, 3)], [(1, 16, 8, 8)])
        55296.0
        >>> forward_flops("Relu", {}, [(4, 5)], [(4, 5)]), forward_flops("Tanh", {}, [(4, 5)], [(4, 5)])
        (20.0, 80.0)
    """
    out = outputs[0] if outputs else None
    n_out = _numel(out)
    x = inputs[0] if inputs else None
    if op_type in _MATMULS:
        return 2.0 * n_out * _matmul_k(attrs, x or ())
    if op_type == "Gemm":
        m, k, n = _gemm_mkn(attrs, x or (1, 1), out or (1, 1))
        return 2.0 * m * k * n + (m * n if len(inputs) > 2 and inputs[2] is not None else 0)
    if op_type == "Conv":
        w = inputs[1]
        flops = 2.0 * n_out * _numel(w[1:] if w is not None else None)
        return flops + (n_out if len(inputs) > 2 and inputs[2] is not None else 0)
    if op_type in _QUANTIZED_CONVS:
        at, bias = _QUANTIZED_CONVS[op_type]
        w = inputs[at] if at < len(inputs) else None
        flops = 2.0 * n_out * _numel(w[1:] if w is not None else None)
        return flops + (n_out if bias is not None and bias < len(inputs) and inputs[bias] is not None else 0)
    if op_type in _QUANTIZE:
        return 2.0 * n_out
    if op_type == "ConvTranspose":
        w = inputs[1]
        flops = 2.0 * _numel(x) * _numel(w[1:] if w is not None else None)
        return flops + (n_out if len(inputs) > 2 and inputs[2] is not None else 0)
    if op_type == "Einsum":
        size = _einsum_size(inputs, attrs)
        if size is None:
            return None
        return float(size) * (2.0 if len(inputs) > 1 else 1.0)
    if op_type == "Attention" and len(inputs) >= 3:
        q_shape, k_shape, v_shape = inputs[:3]
        if q_shape is not None and k_shape is not None and v_shape is not None:
            bh, lq, lk, d, dv = _attention_sizes(attrs, q_shape, k_shape, v_shape)
            return 2.0 * bh * lq * lk * (d + dv) + 5.0 * bh * lq * lk
    sizes = _recurrent_sizes(op_type, attrs, inputs)
    if sizes is not None:
        rows, gates, size_in, hidden, _ = sizes
        # per step: gates = W x_t + R h_{t-1} + b (2 FLOP per multiply-add), then the cell's elementwise update
        return rows * (2.0 * gates * (size_in + hidden) + _RECURRENT[op_type] * hidden)
    if op_type in _POOLS:
        return float(n_out * _kernel(attrs))
    if op_type in _GLOBAL_POOLS or op_type in _REDUCTIONS:
        return float(_numel(x))
    if op_type in _NORMS or op_type in _SOFTMAX:
        return 5.0 * _numel(x)
    if op_type == "LRN":  # x * x, the window mean (size FLOP), then * alpha, + bias, ** beta and x / that: 5
        return (int(attrs.get("size", 1)) + 5.0) * _numel(x)
    if op_type == "SoftmaxCrossEntropyLoss":
        return 5.0 * _numel(x) + (x[0] if x else 0)
    if op_type == "NegativeLogLikelihoodLoss":
        return float(x[0] if x else 0)
    if op_type in ("Resize", "Upsample"):
        return float(n_out * _resize_taps(attrs, x, out))
    if op_type == "GridSample":  # one FLOP per tap read per output element, plus the per-point coordinates
        grid = inputs[1] if len(inputs) > 1 else None
        elements, _, _, taps = _grid_sample_sizes(attrs, grid, out)
        return elements * taps + _grid_sample_points(attrs, grid)
    if op_type in _VARIADIC:
        return float(n_out * max(1, sum(s is not None for s in inputs) - 1))
    if op_type in _ELEMENTWISE:
        return _ELEMENTWISE[op_type] * n_out
    if op_type == "Dropout" and attrs.get("training_mode"):
        # the mask scaled by 1 / (1 - ratio), then the product with it: 2 FLOP per element, as aten's
        # bernoulli_ (drawn, free), div_ and mul; in inference mode a view
        return 2.0 * n_out
    if op_type == "RoiAlign":
        return _roi_align_forward(attrs, out)
    if op_type == "DFT":
        return _dft_flops(attrs, x, out)
    if op_type == "STFT":
        return _stft_flops(inputs, attrs, out)
    if op_type == "AffineGrid":  # theta [N, s, s + 1] by the base grid's homogeneous coordinates: s + 1 multiply-adds
        return 2.0 * ((out[-1] if out else 0) + 1) * n_out  # per output coordinate, as aten's affine_grid_generator
    if op_type == "DeformConv":
        return _deform_conv_flops(attrs, inputs, out)
    if op_type == "CumProd":  # one multiply per element (opset 26), as CumSum one add
        return float(_numel(x))
    if op_type == "RotaryEmbedding":
        # (opset 23) each rotated pair (x1, x2) becomes (cos x1 - sin x2, sin x1 + cos x2): 4 products and 2 sums,
        # 3 FLOP per rotated element; gathering the caches by position and the concatenations move data
        return 3.0 * _rotated_elements(attrs, inputs)
    if op_type == "NonMaxSuppression":
        return _nms_flops(inputs)
    if op_type == "DynamicQuantizeLinear":
        # the range: min and max of x with 0 (2 FLOP per element; the scale and zero point are a few scalars), then
        # QuantizeLinear's 2 per element (a scale and a zero point; the rounding and saturation, as there, free)
        return 4.0 * _numel(x)
    if op_type == "Det":
        # an LU factorization (2 n^3 / 3, LAPACK's getrf as aten's _linalg_det runs it) and the product of its
        # diagonal (n) per matrix
        matrices, n = _det_sizes(x)
        return matrices * (2.0 * n ** 3 / 3.0 + n)
    if op_type in _SCATTERS and str(attrs.get("reduction", "none")) != "none":
        # (data, indices, updates): one add, multiply, max or min per update, as aten's scatter_add and scatter_reduce
        return float(_numel(inputs[2] if len(inputs) > 2 else None))
    if op_type in FREE_OPS or op_type in VIEW_OPS or op_type in STATIC_OPS:
        return 0.0
    return None


def grad_flops(
    op_type: str, attrs: Mapping[str, Any], inputs: Sequence[Shape | None], outputs: Sequence[Shape | None],
    position: int, forward: float,
) -> float:
    """FLOP of the gradient of one ONNX op with respect to its input at ``position``.

    Args:
        op_type (str): the op type after :func:`canonical_op_type`.
        attrs (Mapping): the node's attributes.
        inputs (Sequence): shape of each input.
        outputs (Sequence): shape of each output.
        position (int): which input the gradient is taken for.
        forward (float): the op's forward FLOP (used by ops without a rule of their own).

    Examples:
        >>> x, w, b, y = (8, 16), (16, 4), (4,), (8, 4)
        >>> [grad_flops("Gemm", {}, [x, w, b], [y], i, 0.0) for i in range(3)]
        [1024.0, 1024.0, 32.0]
        >>> grad_flops("Add", {}, [(8, 4), (4,)], [(8, 4)], 1, 32.0)  # a broadcast bias: a reduction
        32.0
    """
    out = outputs[0] if outputs else None
    n_out = _numel(out)
    x = inputs[0] if inputs else None
    mine = inputs[position] if position < len(inputs) else None
    if op_type in _MATMULS:
        return 2.0 * n_out * _matmul_k(attrs, x or ())
    if op_type == "Gemm":
        if position == 2:
            return float(n_out)
        m, k, n = _gemm_mkn(attrs, x or (1, 1), out or (1, 1))
        return 2.0 * m * k * n
    if op_type in ("Conv", "ConvTranspose"):
        if position == 2:
            return float(n_out)
        w = inputs[1]
        spatial = n_out if op_type == "Conv" else _numel(x)
        return 2.0 * spatial * _numel(w[1:] if w is not None else None)
    if op_type == "Einsum":
        return forward
    sizes = _recurrent_sizes(op_type, attrs, inputs)
    if sizes is not None:
        rows, gates, size_in, hidden, rows_per_step = sizes
        if position == 0:  # dX = dgates W; the way back through time is shared_grad_flops
            return rows * 2.0 * gates * size_in
        if position in (1, 2):  # dW = sum_t dgates_t x_t^T, dR = sum_t dgates_t h_{t-1}^T
            return rows * 2.0 * gates * (size_in if position == 1 else hidden)
        if position == 3:  # both biases: a reduction of the gates' gradient over steps and batch
            return rows * 2.0 * gates
        return float(rows_per_step * hidden)  # initial states and peepholes: one step's worth
    if op_type == "Attention" and len(inputs) >= 3:
        q_shape, k_shape, v_shape = inputs[:3]
        if q_shape is not None and k_shape is not None and v_shape is not None:
            bh, lq, lk, d, dv = _attention_sizes(attrs, q_shape, k_shape, v_shape)
            # aten's attention backward (all three gradients): 8 B Lq Lk d + 10 B Lq Lk; a third each
            return (2.0 * bh * lq * lk * (2 * d + 2 * dv) + 10.0 * bh * lq * lk) / 3.0
    if op_type in _NORMS:
        # native_*_norm_backward: 8 FLOP per element for all gradients; the data gradient the most
        return (5.0 if position == 0 else 2.0 if position == 1 else 1.0) * _numel(x)
    if op_type in _SOFTMAX:
        return 3.0 * _numel(x)
    if op_type == "LRN":  # aten's 13 elementwise backward ops of the forward steps, and the window mean's backward
        numel, window = _lrn_reads(attrs, x)
        return 13.0 * numel + window
    if op_type == "SoftmaxCrossEntropyLoss":
        return 3.0 * _numel(x)
    if op_type in _POOLS:
        return float(_numel(x) * _kernel(attrs))
    if op_type in _GLOBAL_POOLS or op_type in _REDUCTIONS:
        return float(_numel(x))
    if op_type in ("Resize", "Upsample"):  # each gradient element spread back over the points it was read from
        return float(n_out * _resize_taps(attrs, x, out))
    if op_type == "GridSample":  # a multiply-add per tap and output element for either gradient (aten's rule)
        grid = inputs[1] if len(inputs) > 1 else None
        elements, points, spatial, taps = _grid_sample_sizes(attrs, grid, out)
        return 2.0 * elements * taps + (2.0 * spatial * points if position == 1 else 0.0)
    if op_type == "RoiAlign":  # each gradient element spread over its samples' taps (a multiply-add a tap, as
        elements, samples = _roi_align_sizes(attrs, out)  # GridSample's), the sample points recomputed
        channels = out[1] if out is not None and len(out) > 1 and out[1] else 1
        return float(8 * elements * samples + elements // channels * samples * _ROI_ALIGN_POINT)
    if op_type == "DeformConv":
        return _deform_conv_grad(inputs, out, position)
    if op_type == "CumProd":
        # aten's cumprod_backward for an input without zeros: the reversed cumsum of grad * y, divided by x (3 FLOP
        # per element; zeros take a longer way, which the values decide)
        return 3.0 * _numel(x)
    if op_type == "RotaryEmbedding":  # the rotation by the opposite angle, 3 per rotated element; the rest passes
        return 3.0 * _rotated_elements(attrs, inputs)
    if op_type == "Det":  # aten's linalg_det_backward: det * grad (1), the LU's diagonal checked for a zero (n), the
        matrices, n = _det_sizes(x)  # scaled identity (n^2) and an adjoint LU solve of n columns (2 n^3)
        return float(matrices * (2 * n ** 3 + n * n + n + 1))
    if op_type == "Dropout":  # the output's gradient times the mask (scaled): native_dropout_backward
        return float(n_out)
    if op_type in ("Gather", "GatherElements", "GatherND", "Tile"):
        return float(n_out)  # scatter-add (embedding_dense_backward) or a reduction
    if op_type in FREE_OPS:
        return 0.0
    if op_type in _ELEMENTWISE or op_type in _VARIADIC:
        per = _ELEMENTWISE_GRAD.get(op_type, _ELEMENTWISE.get(op_type, 1.0))
        broadcast = n_out if mine is not None and _numel(mine) < n_out else 0
        return per * n_out + broadcast
    return forward


def shared_grad_flops(op_type: str, attrs: Mapping[str, Any], inputs: Sequence[Shape | None]) -> float:
    """FLOP of the backward work of one ONNX op that all its gradients need, run once per op.

    For ``LSTM``, ``GRU`` and ``RNN`` this is back-propagation through time: at each step, the
    gradient of the gates goes back through ``R`` to the previous hidden state and through the cell's
    elementwise update. ``dW``, ``dR``, ``dB`` and ``dX`` all read the gates' gradient, so it runs
    whichever of them are taken, even when ``X`` is a model input that needs no gradient. For ``GridSample``
    it is the sampling coordinates and tap weights, which aten's backward recomputes once for both gradients.
    Other ops share nothing: 0.

    Args:
        op_type (str): the op type after :func:`canonical_op_type`.
        attrs (Mapping): the node's attributes.
        inputs (Sequence): shape of each input.

    Returns:
        float: FLOP, to add once to the op's gradient FLOP of :func:`grad_flops`.

    Examples:
        >>> x, w, r = (5, 3, 8), (1, 64, 8), (1, 64, 16)  # 5 steps, batch 3, input 8, hidden 16
        >>> shared_grad_flops("LSTM", {}, [x, w, r]) == 5 * 3 * (2 * 64 * 16 + 2 * 32 * 16)
        True
        >>> shared_grad_flops("MatMul", {}, [(8, 16), (16, 4)])
        0.0
    """
    if op_type == "GridSample":  # the coordinates and tap weights, recomputed once for both gradients
        return _grid_sample_points(attrs, inputs[1] if len(inputs) > 1 else None)
    if op_type == "DeformConv":  # the sampled values' gradient (the conv's data gradient), the points recomputed
        out = _deform_conv_output(inputs)
        elements, per, _, points, taps, _ = _deform_conv_sizes(inputs, out)
        spatial = len(out) - 2 if out is not None else 2
        return 2.0 * elements * per + points * (2 * spatial + 3 * taps)
    sizes = _recurrent_sizes(op_type, attrs, inputs)
    if sizes is None:
        return 0.0
    rows, gates, _, hidden, _ = sizes
    # dh_{t-1} = dgates_t R (2 FLOP per multiply-add), then the cell's backward at twice its forward cost
    return rows * (2.0 * gates * hidden + 2.0 * _RECURRENT[op_type] * hidden)
