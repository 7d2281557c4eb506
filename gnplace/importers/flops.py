"""FLOP of aten ops from the shapes of their tensors.

Rules follow Paleo (Qi et al., ICLR 2017) and the usual conventions of FLOP counters: a
multiply-add is 2 FLOP; convolution ``2 N Ho Wo Cout (Cin / groups) Kh Kw``; matmul ``2 M K N``;
the backward of a convolution or matmul has a data-gradient and a weight-gradient part, each as
costly as the forward op; elementwise ops cost a few FLOP per output element, reductions one per
input element. View-like ops are not counted here: the importer folds them into their producers.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["op_flops", "VIEW_OPS", "FREE_OPS"]

#: Ops that only re-describe memory (views, aliases) or detach: folded into their producer.
VIEW_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose", "permute", "expand", "squeeze",
    "unsqueeze", "detach", "alias", "slice", "select", "as_strided", "split", "split_with_sizes", "unbind",
    "chunk", "narrow", "lift_fresh", "diagonal", "view_as", "expand_as", "unsafe_split", "numpy_T", "movedim",
    "unflatten", "flatten", "_local_scalar_dense", "lift_fresh_copy",
})

#: Ops that move or create data but do no arithmetic: 0 FLOP, counted as known.
FREE_OPS = frozenset({
    "cat", "stack", "clone", "copy", "copy_", "_to_copy", "contiguous", "empty", "empty_like", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_empty", "new_full", "scalar_tensor",
    "arange", "index_select", "gather", "embedding", "constant_pad_nd", "index", "slice_backward", "select_backward",
    "fill", "fill_", "zero_", "masked_fill", "masked_fill_", "clamp_min_", "where", "roll", "flip", "repeat",
    "index_put", "index_put_", "select_scatter", "slice_scatter", "as_strided_scatter", "new_empty_strided",
    "empty_strided", "bernoulli", "bernoulli_", "rand_like", "randn_like", "native_dropout", "_to_dtype",
    "_unsafe_index", "detach_", "resize_", "set_", "split_copy", "unsqueeze_copy", "squeeze_copy", "view_copy",
    "expand_copy", "permute_copy", "t_copy", "transpose_copy", "sort", "topk", "argmax", "argmin",
    "max_pool2d_with_indices_backward_indices", "transpose_", "t_", "squeeze_", "unsqueeze_", "as_strided_",
    "tril", "triu", "tril_", "triu_",  # masks (causal attention): a copy that zeroes a triangle, as ONNX's Trilu
    "_conj",  # flips a complex tensor's conjugate bit; the conjugation happens inside the op that reads it
    # rearrangements of elements (ONNX's DepthToSpace, SpaceToDepth), padding by reflection or replication,
    # unfolding into patches, overwriting scatters: data movement
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle", "reflection_pad1d",
    "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d", "im2col",
    "scatter", "scatter_",
})

# FLOP per output element of elementwise ops.
_ELEMENTWISE: dict[str, float] = {
    **dict.fromkeys(["add", "add_", "sub", "sub_", "rsub", "mul", "mul_", "div", "div_", "neg", "relu", "relu_",
                     "threshold_backward", "clamp", "clamp_min", "clamp_max", "maximum", "minimum", "abs", "sign",
                     "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "bitwise_and", "le_scalar",
                     "hardtanh", "hardtanh_backward", "leaky_relu", "leaky_relu_backward", "reciprocal", "square",
                     "native_dropout_backward", "masked_scale", "sign_", "floor", "ceil", "round", "fmod", "remainder",
                     "mul_scalar", "addcmul", "addcdiv", "lerp", "pow", "sqrt", "rsqrt", "lt_", "gt_", "clamp_",
                     "add_scalar", "isnan", "isinf", "logical_or", "bitwise_or", "bitwise_not", "sgn", "trunc",
                     "frac", "logical_and_", "logical_or_", "logical_xor", "bitwise_and_", "bitwise_or_",
                     "bitwise_xor", "_prelu_kernel"], 1.0),
    # _prelu_kernel_backward: grad_input (a select and a multiply) and the full-size grad_weight (a select and a
    # multiply), per element of each; aten sums grad_weight to the weight's shape in a separate op
    "_prelu_kernel_backward": 2.0,
    **dict.fromkeys(["sigmoid", "tanh", "exp", "log", "sigmoid_backward", "tanh_backward", "softplus", "elu",
                     "silu", "gelu", "log1p", "expm1", "erf", "sin", "cos", "silu_backward", "gelu_backward",
                     "elu_backward", "softplus_backward", "sigmoid_", "tanh_", "exp_", "log_sigmoid_forward",
                     "log_sigmoid_backward", "hardswish", "hardsigmoid", "mish", "atan", "asin", "acos", "tan",
                     "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2", "erfc", "erfinv", "atan2",
                     "hypot", "logaddexp", "logaddexp2", "xlogy", "logit", "logit_backward"], 4.0),
    # glu(x) = a * sigmoid(b) for x = [a, b]: a sigmoid (4) and a multiply per output element
    "glu": 5.0,
}

# Input points read per output element by interpolation, one FLOP each (fvcore's convention: nearest 1,
# bilinear 4): 2 per resized axis for linear, 4 for cubic. The backward spreads each element of grad_output
# over the same points, so it costs its forward (grad_output is the forward's output).
_UPSAMPLE_TAPS: dict[str, int] = {
    **dict.fromkeys(["upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact1d",
                     "_upsample_nearest_exact2d", "_upsample_nearest_exact3d"], 1),
    "upsample_linear1d": 2, "upsample_bilinear2d": 4, "upsample_trilinear3d": 8, "upsample_bicubic2d": 16,
}

# Poolings by their window: the FLOP are the elements of every window (forward: per output element; backward:
# per input element, as the 2-d rules count them). Their number of spatial dims, for a kernel given as one size.
_WINDOW_POOLS: dict[str, int] = {
    "avg_pool2d": 2, "max_pool2d_with_indices": 2, "avg_pool2d_backward": 2, "max_pool2d_with_indices_backward": 2,
    "max_pool2d": 2, "avg_pool1d": 1, "max_pool1d": 1, "max_pool1d_with_indices": 1, "avg_pool3d": 3,
    "max_pool3d_with_indices": 3, "avg_pool3d_backward": 3, "max_pool3d_with_indices_backward": 3, "max_pool3d": 3,
}

# Adaptive poolings: one FLOP per input element (each falls in one window, when windows do not overlap), forward
# and backward, as global pooling is counted; args[0] is the input, or grad_output then the input for a backward.
_ADAPTIVE_POOLS = frozenset({
    "_adaptive_avg_pool2d", "adaptive_avg_pool2d", "mean_dim", "_adaptive_avg_pool2d_backward", "_adaptive_avg_pool3d",
    "adaptive_avg_pool3d", "_adaptive_avg_pool3d_backward", "adaptive_avg_pool1d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool2d_backward", "adaptive_max_pool3d", "adaptive_max_pool3d_backward",
})

# FLOP per *input* element of reductions.
_REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "linalg_vector_norm", "var",
                         "std", "var_mean", "std_mean", "any", "all", "logsumexp", "count_nonzero", "cumsum",
                         "cumprod", "cummax", "cummin", "logcumsumexp"})


def _numel(x: Any) -> int:
    return int(x.numel()) if isinstance(x, torch.Tensor) else 0


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in x.shape)


def _conv_flops(x: Any, w: Any, out: Any, transposed: bool = False) -> float:
    # 2 * N * Cout * prod(out spatial) * (Cin / groups) * prod(kernel spatial); the weight is [Cout, Cin/groups, k...]
    # A transposed convolution's weight is [Cin, Cout/groups, k...] and its work is per *input* element:
    # 2 * N * Cin * prod(in spatial) * (Cout / groups) * prod(kernel spatial).
    per_group = _shape(w)[1]
    kernel = math.prod(_shape(w)[2:])
    return 2.0 * _numel(x if transposed else out) * per_group * kernel


def op_flops(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float | None:
    """FLOP of one aten op, or ``None`` if no rule knows ``name``.

    Args:
        name (str): the aten op name without overload, e.g. ``"convolution"``.
        args (tuple): the op's positional arguments (fake or real tensors and scalars).
        kwargs (dict): its keyword arguments.
        outputs (list): its output tensors, flattened (``None`` for non-tensors).

    Examples:
        >>> a, b = torch.zeros(8, 16), torch.zeros(16, 4)
        >>> op_flops("mm", (a, b), {}, [torch.zeros(8, 4)])
        1024.0
    """
    out = next((o for o in outputs if isinstance(o, torch.Tensor)), None)
    out_numel = sum(_numel(o) for o in outputs)
    if name in ("mm", "matmul"):
        m, k = _shape(args[0])[-2:]
        n = _shape(args[1])[-1]
        batch = math.prod(_shape(out)[:-2]) if out is not None and out.dim() > 2 else 1
        return 2.0 * batch * m * k * n
    if name in ("mv", "addmv"):  # matrix [M, N] times vector [N]
        m, n = _shape(args[0] if name == "mv" else args[1])
        return 2.0 * m * n + (m if name == "addmv" else 0)
    if name in ("dot", "vdot"):
        return 2.0 * _numel(args[0])
    if name == "addmm":  # bias + a @ b
        m, k = _shape(args[1])
        n = _shape(args[2])[1]
        return 2.0 * m * k * n + m * n
    if name in ("bmm", "baddbmm"):
        a, b = (args[0], args[1]) if name == "bmm" else (args[1], args[2])
        bsz, m, k = _shape(a)
        n = _shape(b)[-1]
        return 2.0 * bsz * m * k * n + (bsz * m * n if name == "baddbmm" else 0)
    if name == "addbmm":
        bsz, m, k = _shape(args[1])
        return 2.0 * bsz * m * k * _shape(args[2])[-1]
    if name in ("convolution", "_convolution", "conv2d", "conv1d", "cudnn_convolution"):
        # convolution(input, weight, bias, stride, padding, dilation, transposed, ...); conv2d's 7th is groups
        transposed = name in ("convolution", "_convolution") and bool(args[6] if len(args) > 6
                                                                      else kwargs.get("transposed", False))
        flops = _conv_flops(args[0], args[1], out, transposed)
        if len(args) > 2 and isinstance(args[2], torch.Tensor):
            flops += _numel(out)
        return flops
    if name == "convolution_backward":
        grad_out, x, w = args[0], args[1], args[2]
        transposed = bool(args[7]) if len(args) > 7 else False
        mask = args[10] if len(args) > 10 else [True, True, True]
        one = _conv_flops(x, w, grad_out, transposed)  # dX and dW each cost as much as the forward
        return one * bool(mask[0]) + one * bool(mask[1]) + _numel(grad_out) * bool(mask[2])
    if name in _WINDOW_POOLS:
        kernel = args[1] if name.endswith("backward") is False else args[2]
        spatial = _WINDOW_POOLS[name]
        try:
            k = math.prod(int(s) for s in kernel) if len(kernel) > 1 else int(kernel[0]) ** spatial
        except TypeError:
            k = 3 ** spatial
        ref = args[0] if not name.endswith("backward") else args[1]
        count = _numel(out) if not name.endswith("backward") else _numel(ref)
        return float(count * k)
    if name in _ADAPTIVE_POOLS:
        return float(_numel(args[0] if name.endswith("backward") is False else args[1]))
    if name.removesuffix("_backward") in _UPSAMPLE_TAPS:
        return float(_UPSAMPLE_TAPS[name.removesuffix("_backward")] * _numel(args[0] if name.endswith("backward")
                                                                              else out))
    if name in ("reflection_pad1d_backward", "reflection_pad2d_backward", "reflection_pad3d_backward",
                "replication_pad1d_backward", "replication_pad2d_backward", "replication_pad3d_backward"):
        # (grad_output, input, padding): the gradient of each padded element is added to the element it copied
        return float(max(_numel(args[0]) - _numel(args[1]), 0))
    if name == "col2im":  # (columns, output_size, ...): sums the overlapping patches, one add per column element
        return float(_numel(args[0]))
    if name == "glu_backward":  # (grad_output, input, dim): sigmoid(b) again (4), both halves' products (5)
        return 9.0 * _numel(args[0])
    if name in ("scatter_add", "scatter_add_", "index_add", "index_add_", "scatter_reduce", "scatter_reduce_",
                "index_reduce"):
        # (self, dim, index, src, ...): one add (or reduction step) per element of src
        return float(_numel(args[3]) if len(args) > 3 else _numel(kwargs.get("src", kwargs.get("source"))))
    if name in ("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
                "_native_batch_norm_legit_no_training", "native_layer_norm", "native_group_norm", "batch_norm",
                "layer_norm"):
        return 5.0 * _numel(args[0])
    if name in ("native_batch_norm_backward", "native_layer_norm_backward", "native_group_norm_backward"):
        return 8.0 * _numel(args[0])
    if name in ("_softmax", "_log_softmax", "softmax", "log_softmax", "_safe_softmax"):
        return 5.0 * _numel(args[0])
    if name in ("_softmax_backward_data", "_log_softmax_backward_data"):
        return 3.0 * _numel(args[0])
    if name in ("nll_loss_forward", "nll_loss2d_forward"):
        # one pick per target: N of [N, C], N * H * W of nll_loss2d's [N, C, H, W]
        return float(_numel(args[0]) // _shape(args[0])[1] if args[0].dim() > 1 else 1)
    if name in ("nll_loss_backward", "nll_loss2d_backward"):
        return float(_numel(args[1]))
    if name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):  # difference, square (or abs), sum
        return 3.0 * _numel(args[0])
    if name in ("mse_loss_backward", "l1_loss_backward", "smooth_l1_loss_backward", "huber_loss_backward"):
        return 3.0 * _numel(args[1])
    if name in ("embedding_dense_backward", "embedding_backward"):
        return float(_numel(args[0]))
    if name in ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
                "_scaled_dot_product_flash_attention_for_cpu", "scaled_dot_product_attention"):
        q, k = args[0], args[1]
        *lead, lq, d = _shape(q)
        lk = _shape(k)[-2]
        return 4.0 * math.prod(lead) * lq * lk * d + 5.0 * math.prod(lead) * lq * lk
    if name in ("_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_flash_attention_backward",
                "_scaled_dot_product_flash_attention_for_cpu_backward"):
        q, k = args[1], args[2]
        *lead, lq, d = _shape(q)
        lk = _shape(k)[-2]
        return 8.0 * math.prod(lead) * lq * lk * d + 10.0 * math.prod(lead) * lq * lk
    if name in ("_fft_r2c", "_fft_c2r", "_fft_c2c"):  # FFTW's benchmark convention: 5 N log2 N per complex
        signal = args[0] if name != "_fft_c2r" else out  # transform of N points, half that for a real one
        dims = [int(d) % max(len(_shape(signal)), 1) for d in args[1]]
        points = math.prod(_shape(signal)[d] for d in dims)
        per = (5.0 if name == "_fft_c2c" else 2.5) * points * math.log2(max(points, 2))
        return per * _numel(signal) / max(points, 1)
    if name in _ELEMENTWISE:
        return _ELEMENTWISE[name] * out_numel
    if name in _REDUCTIONS:
        return float(_numel(args[0]))
    if name in FREE_OPS or name in VIEW_OPS:
        return 0.0
    return None
