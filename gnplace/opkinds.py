"""One op vocabulary for every importer: the canonical *kind* of an op.

Op types depend on where a graph came from: the PyTorch importer names ops by aten
(``convolution``, ``convolution_backward``, ``addmm``, ``threshold_backward``), the ONNX importer by
ONNX (``Conv``, ``Conv_grad``, ``Gemm``, ``Relu_grad``), gnplace adds its own (``input``, ``read``,
``sgd_update``, ``loss``, ``grad_sum``) and hand-built graphs use anything. A learned policy that
embeds op types would see unknown tokens on a graph from another importer, so every
:class:`~gnplace.graph.OpGraph` also carries the canonical kind of each op
(:attr:`~gnplace.graph.OpGraph.op_kinds`), from this small fixed vocabulary.

Base kinds (:data:`OP_KINDS`), each with its meaning:

=============  =================================================================================
kind           what the op does
=============  =================================================================================
input          a user input of the step (data fed from the host)
read           a parameter sent from its home group to ops of another group (tied weights)
matmul         matrix products: ``mm``, ``addmm``, ``bmm``, ``mv``, ``linear``, ``MatMul``, ``Gemm``
conv           convolutions: ``convolution``, ``conv2d``, ``Conv``, ``ConvTranspose``
attention      fused attention: ``_scaled_dot_product_*_attention``, ``Attention``
norm           normalisations: batch, layer, group, instance and RMS norm
activation     nonlinearities: ReLU (``threshold_backward`` too), sigmoid, tanh, GELU, SiLU, ...
elementwise    per-element arithmetic, comparisons and selections: ``add``, ``mul``, ``pow``, ``Where``
reduction      reductions along axes: ``sum``, ``mean``, ``amax``, ``cumsum``, ``ReduceMean``
softmax        softmax and log-softmax
embedding      table look-ups: ``embedding`` (an ONNX ``Gather`` of a parameter, set by the importer)
pool           pooling: max, average, adaptive and global pools
loss           loss functions: ``nll_loss``, ``mse_loss``, gnplace's synthesised ``loss``
dropout        dropout and its random masks: ``native_dropout``, ``bernoulli``
data_movement  no arithmetic: copy, cast, concatenate, pad, index, gather, scatter, views, creation
update         a parameter's optimizer update (every op of the update phase)
other          an op type the table does not know
=============  =================================================================================

Each base kind but ``input``, ``read`` and ``update`` has a forward form (``conv``) and a gradient
form (``conv_grad``): an op of the backward phase (``phase == 1``) takes the gradient form of its
base kind, so aten's backward ``mm`` and ONNX's ``MatMul_grad`` are both ``matmul_grad``, aten's
``convolution_backward`` and ONNX's ``Conv_grad`` both ``conv_grad``. Every op of the update phase
(``phase == 2``) is ``update``. :data:`KIND_VOCABULARY` lists every form in a fixed order: graph files
store each op's kind by name, and a kind's position is a stable index for an embedding of kinds
(``KIND_VOCABULARY.index(kind)``), so the vocabulary is **append-only**: new kinds go at its end, and no
kind is ever removed, renamed or moved.

How a raw op type finds its base kind (:func:`base_kind`), case-sensitively, so that torch's
reduction ``max`` and ONNX's elementwise ``Max`` stay apart:

1. a raw type that the table names is looked up as it is;
2. otherwise it is normalised and looked up again: a trailing ``_`` (aten's in-place variants,
   ``add_``) is dropped, then a domain prefix (``com.microsoft.FusedMatMul``), then one of the
   suffixes ``_grad`` (ONNX and gnplace gradient ops), ``_backward_data``, ``_backward_input``,
   ``_backward_weight``, ``_backward`` or ``_forward`` (aten), then leading underscores
   (``_softmax_backward_data`` -> ``softmax``); a name ending in ``_update`` is an ``update``;
3. anything else is ``other``.

The phase decides the form, not the name: an op named ``convolution_backward`` placed in the
forward phase is ``conv``.

Examples:
    >>> canonical_kind("mm", 1), canonical_kind("MatMul_grad", 1), canonical_kind("addmm", 0)
    ('matmul_grad', 'matmul_grad', 'matmul')
    >>> canonical_kind("_softmax_backward_data", 1), canonical_kind("add_", 0)
    ('softmax_grad', 'elementwise')
    >>> canonical_kind("sgd_update", 2), canonical_kind("warp_drive", 0)
    ('update', 'other')
"""

from __future__ import annotations

from gnplace.exceptions import UnknownName

__all__ = [
    "KIND_VOCABULARY",
    "NO_GRADIENT_FORM",
    "OP_KINDS",
    "RAW_TYPES",
    "base_kind",
    "canonical_kind",
    "gradient_form",
]

# Phases by value, as in gnplace.graph (kept here so that graph.py can import this module).
_BACKWARD, _UPDATE = 1, 2

#: The base kinds, in a fixed order (see the module docstring for each one's meaning).
OP_KINDS: tuple[str, ...] = (
    "input", "read", "matmul", "conv", "attention", "norm", "activation", "elementwise", "reduction",
    "softmax", "embedding", "pool", "loss", "dropout", "data_movement", "update", "other",
)

#: Base kinds that have no gradient form: they are never differentiated.
NO_GRADIENT_FORM: frozenset[str] = frozenset({"input", "read", "update"})

#: Every kind an op can have, forward and gradient forms. A kind's position is a stable index:
#: this tuple is append-only (add new kinds at the end; never remove, rename or reorder one).
KIND_VOCABULARY: tuple[str, ...] = (
    "input", "read",
    "matmul", "matmul_grad",
    "conv", "conv_grad",
    "attention", "attention_grad",
    "norm", "norm_grad",
    "activation", "activation_grad",
    "elementwise", "elementwise_grad",
    "reduction", "reduction_grad",
    "softmax", "softmax_grad",
    "embedding", "embedding_grad",
    "pool", "pool_grad",
    "loss", "loss_grad",
    "dropout", "dropout_grad",
    "data_movement", "data_movement_grad",
    "update",
    "other", "other_grad",
)

# The raw op types of each base kind, after normalisation (see the module docstring): aten names
# (lower case), ONNX names (CamelCase) and gnplace's own. Case-sensitive.
_TABLE: dict[str, tuple[str, ...]] = {
    "input": ("input",),
    "read": ("read",),
    "matmul": (
        "mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "matmul", "linear", "dot", "vdot", "outer", "ger",
        "addr", "einsum", "addmm_activation", "int_mm", "scaled_mm",
        "MatMul", "Gemm", "Einsum", "FusedMatMul", "FusedGemm", "MatMulInteger", "QLinearMatMul",
    ),
    "conv": (
        "conv", "convolution", "convolution_overrideable", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
        "conv_transpose2d", "conv_transpose3d", "cudnn_convolution", "cudnn_convolution_transpose",
        "mkldnn_convolution", "slow_conv2d", "slow_conv3d", "slow_conv_dilated2d", "slow_conv_dilated3d",
        "slow_conv_transpose2d", "slow_conv_transpose3d", "thnn_conv2d", "conv_depthwise2d",
        "Conv", "ConvTranspose", "ConvInteger", "QLinearConv",
    ),
    "attention": (
        "scaled_dot_product_attention", "scaled_dot_product_flash_attention",
        "scaled_dot_product_flash_attention_for_cpu", "scaled_dot_product_efficient_attention",
        "scaled_dot_product_cudnn_attention", "scaled_dot_product_attention_math",
        "scaled_dot_product_fused_attention_overrideable", "flash_attention", "efficient_attention",
        "native_multi_head_attention",
        "Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention",
    ),
    "norm": (
        "native_batch_norm", "native_batch_norm_legit", "native_batch_norm_legit_functional",
        "native_batch_norm_legit_no_training", "batch_norm", "cudnn_batch_norm", "miopen_batch_norm",
        "native_layer_norm", "layer_norm", "native_group_norm", "group_norm", "instance_norm", "rms_norm",
        "fused_rms_norm", "local_response_norm",
        "BatchNormalization", "LayerNormalization", "InstanceNormalization", "GroupNormalization",
        "RMSNormalization", "MeanVarianceNormalization", "LpNormalization", "SkipLayerNormalization",
        "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization", "LRN",
    ),
    "activation": (
        "relu", "relu6", "threshold", "sigmoid", "tanh", "gelu", "silu", "elu", "selu", "celu", "leaky_relu",
        "rrelu_with_noise", "hardtanh", "hardsigmoid", "hardswish", "softplus", "softshrink", "hardshrink", "mish",
        "log_sigmoid", "prelu", "prelu_kernel", "glu", "logit",
        "Relu", "Sigmoid", "Tanh", "Gelu", "FastGelu", "BiasGelu", "QuickGelu", "Elu", "Selu", "Celu", "LeakyRelu",
        "PRelu", "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Mish", "ThresholdedRelu", "Shrink",
    ),
    "elementwise": (
        "add", "sub", "rsub", "mul", "div", "neg", "abs", "sign", "sgn", "pow", "sqrt", "rsqrt", "reciprocal", "square",
        "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "erf", "erfc", "erfinv", "sin", "cos", "tan", "asin",
        "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "round", "trunc", "frac",
        "fmod", "remainder", "clamp", "clamp_min", "clamp_max", "clip", "maximum", "minimum", "fmax", "fmin", "lerp",
        "addcmul", "addcdiv", "where", "masked_fill", "masked_scale", "eq", "ne", "lt", "le", "gt", "ge",
        "logical_not", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
        "bitwise_not", "isnan", "isinf", "isfinite", "nan_to_num", "xlogy", "hypot", "copysign", "mul_scalar",
        "add_scalar", "le_scalar", "grad_sum",
        "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Sign", "Pow", "Sqrt", "Reciprocal", "Exp", "Log", "Erf", "Sin",
        "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Floor", "Ceil", "Round",
        "Mod", "Clip", "Max", "Min", "Sum", "Mean", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
        "Not", "And", "Or", "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitShift", "Where",
        "IsNaN", "IsInf", "BiasAdd",
    ),
    "reduction": (
        "sum", "mean", "amax", "amin", "max", "min", "aminmax", "prod", "norm", "linalg_vector_norm", "var", "std",
        "var_mean", "std_mean", "any", "all", "logsumexp", "count_nonzero", "cumsum", "cumprod", "argmax", "argmin",
        "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
        "ReduceLogSumExp", "ReduceSumSquare", "CumSum", "ArgMax", "ArgMin",
    ),
    "softmax": ("softmax", "log_softmax", "safe_softmax", "Softmax", "LogSoftmax", "Hardmax"),
    "embedding": ("embedding", "embedding_dense", "embedding_sparse", "embedding_bag", "embedding_renorm"),
    "pool": (
        "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
        "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
        "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
        "adaptive_max_pool3d", "mkldnn_max_pool2d", "max_unpool2d", "max_unpool3d", "fractional_max_pool2d",
        "fractional_max_pool3d",
        "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "MaxRoiPool",
        "MaxUnpool", "RoiAlign",
    ),
    "loss": (
        "loss", "nll_loss", "nll_loss2d", "nll_loss_nd", "cross_entropy_loss", "mse_loss", "l1_loss",
        "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
        "soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss", "ctc_loss", "cosine_embedding_loss",
        "margin_ranking_loss", "hinge_embedding_loss", "poisson_nll_loss",
        "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss",
    ),
    "dropout": (
        "dropout", "native_dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "fused_dropout",
        "bernoulli", "Dropout", "Bernoulli",
    ),
    "data_movement": (
        # concatenation, copies and casts
        "cat", "concat", "concatenate", "stack", "hstack", "vstack", "clone", "copy", "to_copy", "contiguous",
        "to_dtype", "to", "lift_fresh_copy",
        # indexing, gathering, scattering, padding, rearranging
        "index", "unsafe_index", "index_select", "gather", "take", "masked_select", "scatter", "scatter_add",
        "scatter_reduce", "index_put", "index_put_impl", "index_add", "index_copy", "index_fill", "masked_scatter",
        "select", "slice", "select_scatter", "slice_scatter", "as_strided_scatter", "diagonal_scatter",
        "constant_pad_nd", "pad", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
        "replication_pad2d", "replication_pad3d", "roll", "flip", "repeat", "repeat_interleave", "tile", "tril",
        "triu", "sort", "topk", "unique", "nonzero", "unfold", "im2col", "col2im", "pixel_shuffle",
        "pixel_unshuffle", "channel_shuffle", "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
        "upsample_bilinear2d", "upsample_bicubic2d", "upsample_trilinear3d", "upsample_linear1d",
        # views and aliases (the importers fold them away; a hand-built graph may keep them)
        "view", "unsafe_view", "reshape", "reshape_alias", "t", "transpose", "permute", "expand", "expand_as",
        "squeeze", "unsqueeze", "flatten", "unflatten", "detach", "alias", "as_strided", "split",
        "split_with_sizes", "unbind", "chunk", "narrow", "diagonal", "view_as", "movedim", "lift_fresh",
        "view_copy", "expand_copy", "permute_copy", "t_copy", "transpose_copy", "unsqueeze_copy", "squeeze_copy",
        "split_copy",
        # tensors made from nothing (shapes, constants, random numbers)
        "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "ones",
        "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "scalar_tensor", "arange",
        "linspace", "fill", "zero", "rand", "randn", "rand_like", "randn_like", "randint", "randint_like",
        "randperm", "eye",
        "Concat", "Gather", "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Scatter", "Pad", "Tile",
        "Cast", "CastLike", "Range", "ConstantOfShape", "OneHot", "Trilu", "NonZero", "TopK", "Compress",
        "DepthToSpace", "SpaceToDepth", "ReverseSequence", "Unique", "CenterCropPad", "ConcatFromSequence",
        "SequenceConstruct", "SequenceInsert", "SequenceLength", "Col2Im", "Resize", "Upsample", "Reshape",
        "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Expand", "Slice", "Split", "SplitToSequence",
        "SequenceAt", "Constant", "Shape", "Size", "EyeLike", "RandomNormal", "RandomUniform", "RandomNormalLike",
        "RandomUniformLike",
    ),
    "update": ("update", "sgd_update", "momentum_update", "adam_update"),
    "other": ("op",),
}


def _invert(table: dict[str, tuple[str, ...]]) -> dict[str, str]:
    kind_of: dict[str, str] = {}
    for kind, names in table.items():
        for name in names:
            if kind_of.setdefault(name, kind) != kind:
                raise AssertionError(f"op type {name!r} is listed under {kind_of[name]!r} and {kind!r}")
    return kind_of


#: Raw op type (after normalisation) -> base kind: the explicit table behind :func:`base_kind`.
RAW_TYPES: dict[str, str] = _invert(_TABLE)

_SUFFIXES = ("_grad", "_backward_data", "_backward_input", "_backward_weight", "_backward", "_forward")


def _normalised(op_type: str) -> str:
    """``op_type`` with the naming decorations of the importers removed (see the module docstring)."""
    name = op_type.rstrip("_") or op_type
    name = name.rsplit(".", 1)[-1]
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    return name.lstrip("_") or name


def base_kind(op_type: str) -> str:
    """The base kind of a raw op type, ignoring the phase: one of :data:`OP_KINDS`.

    Args:
        op_type (str): an op type as an importer names it, e.g. ``"convolution_backward"``.

    Returns:
        str: its base kind, ``"other"`` if the table does not know it.

    Examples:
        >>> base_kind("convolution_backward"), base_kind("Conv_grad"), base_kind("threshold_backward")
        ('conv', 'conv', 'activation')
        >>> base_kind("max"), base_kind("Max")
        ('reduction', 'elementwise')
    """
    kind = RAW_TYPES.get(op_type)
    if kind is not None:
        return kind
    name = _normalised(op_type)
    kind = RAW_TYPES.get(name)
    if kind is not None:
        return kind
    if name.endswith("_update"):
        return "update"
    return "other"


def gradient_form(kind: str) -> str:
    """The gradient form of a base kind (``"conv"`` -> ``"conv_grad"``).

    ``input``, ``read`` and ``update`` have none and stay as they are.

    Raises:
        UnknownName: if ``kind`` is not a base kind (a ``ValueError``).
    """
    if kind not in OP_KINDS:
        raise UnknownName(f"unknown base op kind {kind!r} (expected one of {', '.join(OP_KINDS)})")
    return kind if kind in NO_GRADIENT_FORM else f"{kind}_grad"


def canonical_kind(op_type: str, phase: int) -> str:
    """The canonical kind of an op: its base kind in the form its phase asks for.

    Args:
        op_type (str): the raw op type, e.g. ``"mm"`` or ``"MatMul_grad"``.
        phase (int): 0 forward, 1 backward, 2 update (as :attr:`gnplace.graph.OpGraph.phase`).

    Returns:
        str: an entry of :data:`KIND_VOCABULARY`: ``"update"`` for every update-phase op, the
        gradient form of the base kind for a backward op, the base kind otherwise.

    Examples:
        >>> canonical_kind("convolution", 0), canonical_kind("convolution_backward", 1)
        ('conv', 'conv_grad')
        >>> canonical_kind("Relu_grad", 1), canonical_kind("input", 0), canonical_kind("mul", 2)
        ('activation_grad', 'input', 'update')
    """
    if phase == _UPDATE:
        return "update"
    kind = base_kind(op_type)
    if phase == _BACKWARD:
        return gradient_form(kind)
    return kind
