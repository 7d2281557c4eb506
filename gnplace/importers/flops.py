"""FLOP of aten ops from the shapes of their tensors.

Rules follow Paleo (Qi et al., ICLR 2017) and the usual conventions of FLOP counters: a
multiply-add is 2 FLOP; convolution ``2 N Ho Wo Cout (Cin / groups) Kh Kw``; matmul ``2 M K N``;
the backward of a convolution or matmul has a data-gradient and a weight-gradient part, each as
costly as the forward op; elementwise ops cost a few FLOP per output element, reductions one per
input element. View-like ops are not counted here: the importer folds them into their producers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["op_flops", "VIEW_OPS", "FREE_OPS"]

#: Ops that only re-describe memory (views, aliases) or detach: folded into their producer.
VIEW_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose", "permute", "expand", "squeeze",
    "unsqueeze", "detach", "alias", "slice", "select", "as_strided", "split", "split_with_sizes", "unbind",
    "chunk", "narrow", "lift_fresh", "diagonal", "view_as", "expand_as", "unsafe_split", "numpy_T", "movedim",
    "unflatten", "flatten", "_local_scalar_dense", "lift_fresh_copy",
    "view_as_real", "view_as_complex",  # a complex tensor's memory as pairs of reals [..., 2], and back
})

#: Ops that move or create data but do no arithmetic: 0 FLOP, counted as known.
FREE_OPS = frozenset({
    "cat", "stack", "clone", "copy", "copy_", "_to_copy", "contiguous", "empty", "empty_like", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_empty", "new_full", "scalar_tensor",
    "arange", "index_select", "gather", "embedding", "constant_pad_nd", "index", "slice_backward", "select_backward",
    "fill", "fill_", "zero_", "masked_fill", "masked_fill_", "where", "roll", "flip", "repeat",
    "select_scatter", "slice_scatter", "as_strided_scatter", "new_empty_strided",
    "empty_strided", "bernoulli", "bernoulli_", "rand_like", "randn_like", "native_dropout", "_to_dtype",
    "_unsafe_index", "detach_", "resize_", "set_", "split_copy", "unsqueeze_copy", "squeeze_copy", "view_copy",
    "expand_copy", "permute_copy", "t_copy", "transpose_copy", "sort", "topk", "argmax", "argmin",
    "max_pool2d_with_indices_backward_indices", "transpose_", "t_", "squeeze_", "unsqueeze_", "as_strided_",
    "tril", "triu", "tril_", "triu_",  # masks (causal attention): a copy that zeroes a triangle, as ONNX's Trilu
    # flip a tensor's conjugate (or negative) bit; the conjugation happens inside the op that reads it, or in a copy
    # that materialises it (:func:`_copy_flops`)
    "_conj", "_neg_view",
    # rearrangements of elements (ONNX's DepthToSpace, SpaceToDepth), padding by reflection or replication,
    # unfolding into patches, overwriting scatters: data movement
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle", "reflection_pad1d",
    "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d", "im2col",
    "scatter", "scatter_",
    # tensors made from a few numbers (an identity, a range, index lists, a diagonal), as arange and ONNX's EyeLike
    "eye", "linspace", "logspace", "tril_indices", "triu_indices", "diag", "diag_embed", "randint_like",
    # random numbers, counted as the dropout masks above are (bernoulli): generated, not computed
    "rand", "randn", "randint", "randperm", "uniform_", "normal_", "random_", "exponential_",
    # an LU factorization's triangles copied out and its pivots as a permutation matrix
    "lu_unpack",
    # a sparse COO tensor wrapping its indices and values (nn.Embedding(sparse=True)'s gradient): no arithmetic
    "_sparse_coo_tensor_with_dims_and_tensors",
})

# FLOP per output element of elementwise ops.
_ELEMENTWISE: dict[str, float] = {
    **dict.fromkeys(["add", "add_", "sub", "sub_", "rsub", "mul", "mul_", "div", "div_", "neg", "relu", "relu_",
                     "threshold_backward", "clamp", "clamp_min", "clamp_max", "maximum", "minimum", "abs", "sign",
                     "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "bitwise_and", "le_scalar",
                     "hardtanh", "hardtanh_backward", "leaky_relu", "leaky_relu_backward", "reciprocal", "square",
                     "native_dropout_backward", "masked_scale", "sign_", "floor", "ceil", "round", "fmod", "remainder",
                     "mul_scalar", "pow", "sqrt", "rsqrt", "lt_", "gt_", "clamp_",
                     "add_scalar", "isnan", "isinf", "logical_or", "bitwise_or", "bitwise_not", "sgn", "trunc",
                     "frac", "logical_and_", "logical_or_", "logical_xor", "bitwise_and_", "bitwise_or_",
                     "bitwise_xor", "_prelu_kernel", "clamp_min_", "clamp_max_", "hardtanh_", "leaky_relu_", "neg_",
                     "abs_", "sqrt_", "rsqrt_",
                     # a compare and a select (or a shift) per element, as ONNX's Shrink and ThresholdedRelu; rrelu
                     # is leaky_relu with a random slope (drawn, as dropout masks are)
                     "threshold", "threshold_", "hardshrink", "hardshrink_backward", "softshrink",
                     # fake quantization's backward: the gradient times the in-range mask
                     "fake_quantize_per_tensor_affine_cachemask_backward",
                     "softshrink_backward", "rrelu_with_noise", "rrelu_with_noise_", "rrelu_with_noise_backward"], 1.0),
    # _prelu_kernel_backward: grad_input (a select and a multiply) and the full-size grad_weight (a select and a
    # multiply), per element of each; aten sums grad_weight to the weight's shape in a separate op
    "_prelu_kernel_backward": 2.0,
    **dict.fromkeys(["sigmoid", "tanh", "exp", "log", "sigmoid_backward", "tanh_backward", "softplus", "elu",
                     "silu", "gelu", "log1p", "expm1", "erf", "sin", "cos", "silu_backward", "gelu_backward",
                     "elu_backward", "softplus_backward", "sigmoid_", "tanh_", "exp_", "log_sigmoid_forward",
                     "log_sigmoid_backward", "hardswish", "hardsigmoid", "mish", "atan", "asin", "acos", "tan",
                     "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2", "erfc", "erfinv", "atan2",
                     "hypot", "logaddexp", "logaddexp2", "xlogy", "logit", "logit_backward", "celu", "celu_",
                     # in-place forms (nn.SiLU(inplace=True), ...) cost as their out-of-place ones
                     "silu_", "elu_", "hardswish_", "hardsigmoid_", "mish_", "gelu_", "log_", "hardswish_backward",
                     "hardsigmoid_backward", "mish_backward"],
                    4.0),
    # glu(x) = a * sigmoid(b) for x = [a, b]: a sigmoid (4) and a multiply per output element
    "glu": 5.0,
    # lerp(a, b, w) = a + w * (b - a): a difference, a product and a sum (aten's lerp kernel; the in-place form too);
    # addcmul(a, t1, t2, value) = a + value * t1 * t2 and addcdiv's a + value * t1 / t2: two products (or a product and
    # a quotient) and a sum, as aten's kernels compute them
    **dict.fromkeys(["lerp", "lerp_", "addcmul", "addcmul_", "addcdiv", "addcdiv_"], 3.0),
}

#: FLOP per element of the elementary functions of a complex ``z = a + i b``, from their real and imaginary parts
#: (Abramowitz and Stegun 4.2-4.5; the square root as C99's ``csqrt``, Kahan's *Branch Cuts for Complex Elementary
#: Functions*), counting as :data:`_COMPLEX_ELEMENTWISE` does: a real function (``exp``, ``log``, ``sin``, ``sinh``,
#: ``atan2``) 4 FLOP as :data:`_ELEMENTWISE`'s, ``|z|`` 4, a real product, sum or quotient 1, a complex product 6, sum
#: 2, reciprocal 6, a conjugation 1 (it negates the imaginary part). ``exp`` ``e^a (cos b + i sin b)``: 3 functions, 2
#: products, 14; ``log`` ``log |z| + i atan2(b, a)``: 12, ``log2`` and ``log10`` that scaled (2 more); ``sin``,
#: ``cos``, ``sinh``, ``cosh`` (``sin a cosh b + i cos a sinh b``, ...): 4 functions, 2 products, 18; ``tan``, ``tanh``
#: (``(sinh 2a + i sin 2b) / (cosh 2a + cos 2b)``): 2 doublings, 4 functions, a sum, 2 quotients, 21; ``sqrt``
#: (``t = sqrt(2 (|z| + |a|))``, then ``t / 2`` and ``b / t``): 9, ``rsqrt`` its reciprocal (15); ``sigmoid``
#: ``1 / (1 + exp(-z))``: 24. aten's backward kernels of ``tanh`` and ``sigmoid`` compute ``g * conj(1 - y y)`` and
#: ``g * conj((1 - y) y)`` (BinaryOpsKernel): two products, a difference and a conjugation, 15. From those, the
#: inverse functions by their logarithmic forms (Abramowitz and Stegun 4.4.26-4.4.28, 4.6.20-4.6.22; a product by
#: ``i`` 1, it swaps the parts and negates one, by ``i / 2`` or ``1 / 2`` 2): ``asin`` ``-i log(i z + sqrt(1 - z^2))``
#: (a square, a difference, a root, a sum, a log, a product by ``-i``) 33, ``acos`` ``pi / 2 - asin z`` 35, ``atan``
#: ``(i / 2) (log(1 - i z) - log(1 + i z))`` 33, ``asinh`` ``log(z + sqrt(z^2 + 1))`` 31, ``acosh``
#: ``log(z + sqrt(z + 1) sqrt(z - 1))`` 42, ``atanh`` ``(log(1 + z) - log(1 - z)) / 2`` 32; ``log1p`` ``log(1 + z)``
#: 14, ``expm1`` ``exp z - 1`` 16, ``exp2`` ``exp(z log 2)`` (a product by a real, 2) 16.
_COMPLEX_FUNCTIONS: dict[str, float] = {
    **dict.fromkeys(["exp", "exp_"], 14.0),
    **dict.fromkeys(["log", "log_"], 12.0),
    **dict.fromkeys(["log2", "log10"], 14.0),
    **dict.fromkeys(["sin", "cos", "sinh", "cosh"], 18.0),
    **dict.fromkeys(["tan", "tanh", "tanh_"], 21.0),
    **dict.fromkeys(["sqrt", "sqrt_"], 9.0),
    **dict.fromkeys(["rsqrt", "rsqrt_"], 15.0),
    **dict.fromkeys(["sigmoid", "sigmoid_"], 24.0),
    **dict.fromkeys(["tanh_backward", "sigmoid_backward"], 15.0),
    "pow": 32.0,  # exp(w log z): a log, a complex product, an exp; see :func:`_complex_pow` for aten's special cases
    **dict.fromkeys(["asin", "atan"], 33.0),
    "acos": 35.0,
    "asinh": 31.0,
    "acosh": 42.0,
    "atanh": 32.0,
    "log1p": 14.0,
    **dict.fromkeys(["expm1", "exp2"], 16.0),
}

#: Complex ``pow(z, w)`` by a scalar exponent that aten's ``pow_tensor_scalar_kernel`` (PowKernel) does not run as
#: ``std::pow`` (``exp(w log z)``, 32 FLOP by :data:`_COMPLEX_FUNCTIONS`): ``0.5`` is ``sqrt``, ``-0.5`` ``rsqrt``,
#: ``-1`` ``reciprocal``, ``2`` ``z * z``, ``3`` ``z * z * z``, ``-2`` ``1 / (z * z)``; FLOP per element.
_COMPLEX_POW_SPECIAL: dict[float, float] = {0.5: 9.0, -0.5: 15.0, -1.0: 6.0, 2.0: 6.0, 3.0: 12.0, -2.0: 12.0}

#: FLOP per element of the common elementwise arithmetic on complex values, by LAPACK's convention for complex
#: operation counts (LAWN 41, Blackford and Dongarra, *Installation Guide for LAPACK*: a complex multiply is 6 real
#: FLOP, 4 multiplies and 2 adds; a complex add 2): a sum, difference or negation 2 (each part); a product 6; a
#: quotient ``((a c + b d) + i (b c - a d)) / (c^2 + d^2)`` 11 (6 multiplies, 3 adds, 2 divides); a reciprocal
#: ``(c - i d) / (c^2 + d^2)`` 6; ``abs`` ``sqrt(a^2 + b^2)`` 4 (as :data:`_ELEMENTWISE`'s ``hypot``); ``sgn``
#: ``z / |z|`` 6. An op is complex when any tensor it reads or writes is: aten promotes a real operand (a scalar too)
#: to complex and runs the complex kernel, so ``z * 2`` is a complex product. Counted per output element, as the real
#: rules are (``abs`` writes one real value per complex one).
_COMPLEX_ELEMENTWISE: dict[str, float] = {
    **dict.fromkeys(["add", "add_", "sub", "sub_", "rsub", "neg", "neg_"], 2.0),
    **dict.fromkeys(["mul", "mul_", "square"], 6.0),
    **dict.fromkeys(["div", "div_"], 11.0),
    **dict.fromkeys(["reciprocal", "sgn"], 6.0),
    **dict.fromkeys(["abs", "abs_"], 4.0),
    **_COMPLEX_FUNCTIONS,
}
#: Reductions that add complex values, per input element: a complex add (2 FLOP, :data:`_COMPLEX_ELEMENTWISE`).
_COMPLEX_SUMS = frozenset({"sum", "mean", "cumsum"})

#: Fake quantization (quantization-aware training), per element of the input: quantize with a scale and a zero point
#: (2 FLOP), dequantize (2), as ONNX's ``QuantizeLinear`` and ``DequantizeLinear``, which ``torch.onnx.export`` writes
#: for them; the ``_cachemask`` forms also keep the in-range mask their backward (a ``mul`` by it) reads. The
#: ``_tensor_qparams`` form reads a ``fake_quant_enabled`` flag as the fused observer below does: cleared, it copies.
_FAKE_QUANTIZE = frozenset({
    "fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine", "fake_quantize_per_tensor_affine_cachemask",
    "fake_quantize_per_channel_affine_cachemask", "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams",
    # learnable scale and zero point (torch.ao's _LearnableFakeQuantize): the same forward, no mask kept
    "_fake_quantize_learnable_per_tensor_affine", "_fake_quantize_learnable_per_channel_affine",
})
#: The backward of learnable fake quantization, per element of the input: it keeps no mask, so it quantizes and
#: dequantizes again (4 FLOP, as the forward), passes the gradient where the input was in range (a select, 1), and
#: takes each element's terms of the scale's gradient (``(x_fq - x) / scale * dy`` in range, ``dy * (bound -
#: zero_point)`` outside: 3) and of the zero point's (``-dy * scale`` outside: 1), then sums both over the elements
#: (per tensor or per channel: 1 each): 11 FLOP, as aten's ``_fake_quantize_grad_learnable_*_kernel``.
_LEARNABLE_FAKE_QUANTIZE_GRADS = frozenset({
    "_fake_quantize_learnable_per_tensor_affine_backward", "_fake_quantize_learnable_per_channel_affine_backward",
})
#: torch.ao's fused observer and fake quantization (``FusedMovingAvgObsFakeQuantize``), per element of the input:
#: the observer's running min and max (``aminmax``: a compare each, 2 FLOP; the moving averages and the scale and
#: zero point from them are a few scalars) if its ``observer_on`` flag is set, then the fake quantization keeping its
#: mask (4, as ``fake_quantize_per_tensor_affine_cachemask``) if ``fake_quant_on`` is, else a copy of the input and a
#: mask of ones (0); its backward is a ``mul`` by the mask. The flags are one-element tensors (the module's
#: ``observer_enabled`` and ``fake_quant_enabled`` buffers, which ``disable_observer()`` and ``disable_fake_quant()``
#: clear), read where their values are known, counted on where they are not (a fake tensor, one the step computes).
_FUSED_OBSERVER_FAKE_QUANTIZE = frozenset({"fused_moving_avg_obs_fake_quant", "_fused_moving_avg_obs_fq_helper"})

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


def _is_complex(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> bool:
    """Whether any tensor an op reads (positionally or by keyword) or writes holds complex values."""
    tensors = [*args, *kwargs.values(), *outputs]
    return any(isinstance(t, torch.Tensor) and t.is_complex() for t in tensors)


def _product_counts(name: str, args: tuple[Any, ...], out: Any) -> tuple[int, int] | None:
    """(multiply-adds, adds) of a matrix or vector product, ``None`` for other ops.

    ``mm`` and ``matmul`` ``M K N`` per matrix of the batch; ``mv`` ``M N``; ``dot`` ``N``; the ``add`` forms add
    their input once per output element (``addbmm``'s output is one matrix); ``addr``, an outer product added to its
    input, a multiply and an add per element. Each multiply-add is 2 FLOP of real values, 8 of complex ones.
    """
    if name in ("mm", "matmul"):
        m, k = _shape(args[0])[-2:]
        n = _shape(args[1])[-1]
        batch = math.prod(_shape(out)[:-2]) if out is not None and out.dim() > 2 else 1
        return batch * m * k * n, 0
    if name in ("mv", "addmv"):  # matrix [M, N] times vector [N]
        m, n = _shape(args[0] if name == "mv" else args[1])
        return m * n, (m if name == "addmv" else 0)
    if name in ("dot", "vdot"):
        return _numel(args[0]), 0
    if name == "addmm":  # bias + a @ b
        m, k = _shape(args[1])
        n = _shape(args[2])[1]
        return m * k * n, m * n
    if name in ("bmm", "baddbmm"):
        a, b = (args[0], args[1]) if name == "bmm" else (args[1], args[2])
        bsz, m, k = _shape(a)
        n = _shape(b)[-1]
        return bsz * m * k * n, (bsz * m * n if name == "baddbmm" else 0)
    if name == "addbmm":  # input + the sum of the batch's products: the add per output element, as addmm's bias
        bsz, m, k = _shape(args[1])
        n = _shape(args[2])[-1]
        return bsz * m * k * n, m * n
    if name == "addr":  # input + the outer product of two vectors [M] and [N]: a multiply and an add per element
        return _numel(args[1]) * _numel(args[2]), 0
    return None


#: Copies that materialise a lazy conjugation or negation of their source (``z.conj().clone()``, ``resolve_conj``,
#: ``x.to(...)`` of a conjugate view), and the position of the tensor they copy.
_COPIES: dict[str, int] = {
    **dict.fromkeys(["clone", "_to_copy", "contiguous", "resolve_conj", "resolve_neg", "lift_fresh_copy"], 0),
    **dict.fromkeys(["copy", "copy_"], 1),
}
#: Physical conjugations (``torch.conj_physical``): a copy that negates every imaginary part.
_CONJ_PHYSICAL = frozenset({"_conj_physical", "conj_physical", "conj_physical_"})


def _copy_flops(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """FLOP of a copy (:data:`_COPIES`, :data:`_CONJ_PHYSICAL`): the negations it makes, else nothing (data movement).

    A conjugate view (``_conj``) or a negative one (``_neg_view``) only sets a bit; a copy into a tensor without it
    negates: a conjugation 1 FLOP per complex element (its imaginary part, as :data:`_COMPLEX_ELEMENTWISE` counts a
    part), a negation 1 per real element and 2 per complex one (as ``neg``). ``conj_physical`` conjugates whatever it
    reads (a real tensor: a copy).
    """
    at = _COPIES.get(name, 0)
    source = args[at] if len(args) > at else kwargs.get("src")
    out = outputs[0] if outputs else None
    if not isinstance(source, torch.Tensor) or not isinstance(out, torch.Tensor):
        return 0.0
    conjugated = source.is_conj() != out.is_conj() or name in _CONJ_PHYSICAL
    negated = source.is_neg() != out.is_neg()
    per = float(conjugated and out.is_complex()) + (2.0 if out.is_complex() else 1.0) * negated
    return per * _numel(out)


def _complex_pow(args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
    """FLOP per element of a complex ``pow(self, exponent)``: :data:`_COMPLEX_POW_SPECIAL`'s, or ``std::pow``'s 32.

    A tensor exponent (or a tensor raised by a scalar base, ``pow.Scalar``) runs ``std::pow`` element by element.
    """
    exponent = args[1] if len(args) > 1 else kwargs.get("exponent")
    if isinstance(args[0], torch.Tensor) and isinstance(exponent, (int, float, complex)) and not isinstance(
            exponent, bool):
        value = complex(exponent)
        if value.imag == 0 and value.real in _COMPLEX_POW_SPECIAL:
            return _COMPLEX_POW_SPECIAL[value.real]
    return _COMPLEX_FUNCTIONS["pow"]


def _flag_on(x: Any) -> bool:
    """Whether a flag an op reads as a one-element tensor is set (not 0).

    Its value where the tensor is real (a module's buffer, which the importers pass as it is); ``True`` where its value
    is unknown (a fake or meta tensor, or none given).
    """
    from torch._subclasses.fake_tensor import FakeTensor

    if not isinstance(x, torch.Tensor) or isinstance(x, FakeTensor) or x.device.type == "meta" or x.numel() != 1:
        return True
    return bool(x.item())


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in x.shape)


def _conv_flops(x: Any, w: Any, out: Any, transposed: bool = False) -> float:
    # 2 * N * Cout * prod(out spatial) * (Cin / groups) * prod(kernel spatial); the weight is [Cout, Cin/groups, k...]
    # A transposed convolution's weight is [Cin, Cout/groups, k...] and its work is per *input* element:
    # 2 * N * Cin * prod(in spatial) * (Cout / groups) * prod(kernel spatial).
    per_group = _shape(w)[1]
    kernel = math.prod(_shape(w)[2:])
    return 2.0 * _numel(x if transposed else out) * per_group * kernel


def _reduction_mode(value: Any, default: int = 1) -> int:
    """The ``reduction`` argument of aten's losses: 0 none, 1 mean, 2 sum (default: mean, as the functional losses)."""
    return int(value) if isinstance(value, (int, bool)) else default


def _binary_cross_entropy(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``binary_cross_entropy(input, target, weight, reduction)``, per element of ``input``.

    ``-(t log x + (1 - t) log(1 - x))``: two logs (4 FLOP each, as :data:`_ELEMENTWISE`'s ``log``; aten clamps
    each at -100, one FLOP each), ``1 - x``, ``1 - t``, two products, a sum and a negation (6): 16 FLOP; one
    more for a ``weight``, one more for a mean or sum over the elements.
    """
    weight = args[2] if len(args) > 2 else kwargs.get("weight")
    reduction = _reduction_mode(args[3] if len(args) > 3 else kwargs.get("reduction", 1))
    per = 16.0 + (1.0 if isinstance(weight, torch.Tensor) else 0.0) + (1.0 if reduction else 0.0)
    return per * _numel(args[0])


def _binary_cross_entropy_backward(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``binary_cross_entropy_backward(grad_output, input, target, weight, reduction)``, per element of ``input``.

    aten's formula ``grad * (x - t) / max((1 - x) x, eps)``: a difference, ``1 - x``, a product, the clamp, a
    division and the product with the gradient (6 FLOP); one more for a ``weight``, one for a mean's ``1 / n``.
    """
    weight = args[3] if len(args) > 3 else kwargs.get("weight")
    reduction = _reduction_mode(args[4] if len(args) > 4 else kwargs.get("reduction", 1))
    per = 6.0 + (1.0 if isinstance(weight, torch.Tensor) else 0.0) + (1.0 if reduction == 1 else 0.0)
    return per * _numel(args[1])


#: Input points ``grid_sampler_2d`` reads per output element, by ``interpolation_mode``: bilinear 4 (0),
#: nearest 1 (1), bicubic 16 (2), as :data:`_UPSAMPLE_TAPS` counts interpolation.
_GRID_SAMPLE_TAPS = {0: 4, 1: 1, 2: 16}


def _grid_sample_sizes(x: Any, grid: Any, mode: Any) -> tuple[int, int, int]:
    """(output elements ``N C Ho Wo``, grid points ``N Ho Wo``, taps per output element) of a 2-d grid sample."""
    points = _numel(grid) // max(_shape(grid)[-1], 1)
    channels = _shape(x)[1] if len(_shape(x)) > 1 else 1
    taps = _GRID_SAMPLE_TAPS.get(int(mode) if isinstance(mode, (int, bool)) else 0, 4)
    return points * channels, points, taps


def _grid_sampler_2d(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners)``.

    Per grid point, the two coordinates are unnormalised (a multiply-add each, 4 FLOP) and, but for nearest,
    each tap's weight is a product of two distances (3 FLOP a tap); per output element (every channel of every
    grid point), one FLOP per tap read (:data:`_GRID_SAMPLE_TAPS`, fvcore's convention for interpolation).
    """
    mode = args[2] if len(args) > 2 else kwargs.get("interpolation_mode", 0)
    elements, points, taps = _grid_sample_sizes(args[0], args[1], mode)
    weights = 0 if taps == 1 else 3 * taps
    return float(elements * taps + points * (4 + weights))


def _grid_sampler_2d_backward(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners, mask)``.

    The input's gradient spreads each gradient element over its taps (a multiply-add, 2 FLOP a tap); the grid's
    gradient weighs each tap's value by the derivative of its weight and the gradient, and sums (2 FLOP a tap)
    per output element, then goes back through the unnormalisation (4 FLOP a grid point). Each is counted as
    ``output_mask`` asks; the coordinates and tap weights are recomputed once (the forward's per-point work).
    """
    mode = args[3] if len(args) > 3 else kwargs.get("interpolation_mode", 0)
    mask = args[6] if len(args) > 6 else kwargs.get("output_mask", [True, True])
    elements, points, taps = _grid_sample_sizes(args[1], args[2], mode)
    weights = 0 if taps == 1 else 3 * taps
    flops = points * (4 + weights)
    flops += 2 * elements * taps * bool(mask[0])
    flops += (2 * elements * taps + 4 * points) * bool(mask[1])
    return float(flops)


def _cdist_pairs(x1: Any, x2: Any) -> tuple[int, int]:
    """(pairs of rows ``B P R``, coordinates ``M``) of ``cdist(x1 [B, P, M], x2 [B, R, M])``."""
    shape1, shape2 = _shape(x1), _shape(x2)
    rows2 = shape2[-2] if len(shape2) > 1 else 1
    return _numel(x1) // max(shape1[-1], 1) * rows2, shape1[-1] if shape1 else 1


def _cdist_forward(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``_cdist_forward(x1, x2, p, compute_mode)``: the p-norm distance of every pair of rows.

    A difference, its ``|d|^p`` and an add per coordinate of each pair (3 FLOP), then the ``1/p`` root of the
    pair's sum (1 FLOP, as ``pow`` in :data:`_ELEMENTWISE`).
    """
    pairs, coordinates = _cdist_pairs(args[0], args[1])
    return float(pairs * (3 * coordinates + 1))


def _cdist_backward(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``_cdist_backward(grad, x1, x2, p, cdist)``: the gradient of ``x1`` (aten calls it again, swapped, for ``x2``).

    Per pair of rows, ``grad / dist^(p-1)`` (1 FLOP); per coordinate of each pair, the difference, its
    ``|d|^(p-2) d``, the product with the pair's factor and the sum over the other rows (4 FLOP).
    """
    pairs, coordinates = _cdist_pairs(args[1], args[2])
    return float(pairs * (4 * coordinates + 1))


def _embedding_bag(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``_embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights, ...)``.

    Each looked-up row of ``D`` values is added into its bag (one FLOP per value; a compare for ``max``, mode 2),
    multiplied first by its ``per_sample_weights`` (one more); a mean (mode 1) divides each bag by its size
    (``D`` FLOP per bag).
    """
    weight, indices = args[0], args[1]
    mode = args[4] if len(args) > 4 else kwargs.get("mode", 0)
    per_sample = args[6] if len(args) > 6 else kwargs.get("per_sample_weights")
    width = _shape(weight)[-1]
    looked_up = _numel(indices) * width
    flops = looked_up * (2 if isinstance(per_sample, torch.Tensor) else 1)
    if int(mode) == 1 and outputs and isinstance(outputs[0], torch.Tensor):
        flops += _numel(outputs[0])
    return float(flops)


def _bag_gradient(grad: Any, indices: Any, mode: Any, per_sample: Any) -> float:
    """FLOP of the gradient of an embedding bag's table.

    Each bag's gradient row is added to the row of every index of the bag (one FLOP per value), scaled first by
    ``1 / size`` of a mean bag (mode 1) or by the index's per-sample weight (one more); a max bag (mode 2) passes
    its row to the one index that won each value.
    """
    if int(mode) == 2:
        return float(_numel(grad))
    scaled = int(mode) == 1 or isinstance(per_sample, torch.Tensor)
    return float(_numel(indices) * _shape(grad)[-1] * (2 if scaled else 1))


def _embedding_bag_backward(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``_embedding_bag_backward``: :func:`_bag_gradient`.

    Arguments: ``(grad, indices, offsets, offset2bag, bag_size, max_indices, num_weights, scale_grad_by_freq,
    mode, sparse, per_sample_weights, ...)``.
    """
    mode = args[8] if len(args) > 8 else kwargs.get("mode", 0)
    return _bag_gradient(args[0], args[1], mode, args[10] if len(args) > 10 else kwargs.get("per_sample_weights"))


def _embedding_bag_dense_backward(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``_embedding_bag_dense_backward``: :func:`_bag_gradient`.

    Arguments: ``(grad, indices, offset2bag, bag_size, max_indices, num_weights, scale_grad_by_freq, mode,
    per_sample_weights, ...)``.
    """
    mode = args[7] if len(args) > 7 else kwargs.get("mode", 0)
    return _bag_gradient(args[0], args[1], mode, args[8] if len(args) > 8 else kwargs.get("per_sample_weights"))


def _embedding_bag_per_sample_weights_backward(
    args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]
) -> float:
    """``(grad, weight, indices, ...)``: per index, the dot product of its bag's gradient with its row (2 ``D``)."""
    return float(2 * _numel(args[2]) * _shape(args[1])[-1])


def _median(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``median`` and ``nanmedian``, of the whole tensor or along a dim: 2 FLOP per input element.

    A selection (introselect, ``nth_element``) makes about 2 comparisons per element on average, against 1 for
    ``max``.
    """
    return 2.0 * _numel(args[0])


def _trilinear(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim)``: ``nn.Bilinear`` and its backward.

    Each input gets size-1 dims at its ``expand`` positions; aten multiplies ``i1`` by ``i2`` (one FLOP per element
    of their broadcast) and sums the products with ``i3`` over ``sumdim`` (a multiply-add, 2 FLOP, per element of
    the three's broadcast): ``3 B O I J`` for a bilinear layer of ``I`` and ``J`` inputs and ``O`` outputs.
    """
    def expanded(x: Any, where: Any) -> list[int]:
        shape = list(_shape(x))
        for dim in sorted(int(d) for d in where):
            shape.insert(dim, 1)
        return shape

    shapes = [expanded(args[k], args[k + 3]) for k in range(3)]
    pair = [max(a, b) for a, b in zip(shapes[0], shapes[1])]
    full = [max(a, b) for a, b in zip(pair, shapes[2])]
    return float(math.prod(pair) + 2 * math.prod(full))


def _binary_cross_entropy_with_logits(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)``, per element of ``input``.

    aten's ``(1 - t) x - log_sigmoid(x)``: the log-sigmoid (4 FLOP, as :data:`_ELEMENTWISE`'s
    ``log_sigmoid_forward``), ``1 - t``, the product and the difference: 7 FLOP; 3 more for a ``pos_weight``
    (``(p - 1) t + 1`` and its product with the log-sigmoid), one for a ``weight``, one for a mean or sum.
    """
    weight = args[2] if len(args) > 2 else kwargs.get("weight")
    pos_weight = args[3] if len(args) > 3 else kwargs.get("pos_weight")
    reduction = _reduction_mode(args[4] if len(args) > 4 else kwargs.get("reduction", 1))
    per = (7.0 + (3.0 if isinstance(pos_weight, torch.Tensor) else 0.0)
           + (1.0 if isinstance(weight, torch.Tensor) else 0.0) + (1.0 if reduction else 0.0))
    return per * _numel(args[0])


def _ctc_loss(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``_ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity)``, the CTC forward pass.

    Graves et al. (2006)'s forward variables in log space, one per element of ``log_alpha`` (``[N, T, 2S + 1]``,
    the op's second output): the log-sum-exp of up to three predecessors (two ``logaddexp``, 4 FLOP each, as
    :data:`_ELEMENTWISE`) plus the emission's log-probability, 9 FLOP; each sequence's loss then joins its two last
    variables (a ``logaddexp``, 4).
    """
    return 9.0 * _numel(outputs[1]) + 4.0 * _numel(outputs[0])


def _ctc_loss_backward(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``_ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, nll, log_alpha, blank, ...)``.

    The backward variables (9 FLOP per element of ``log_alpha``, as the forward's), each ``alpha * beta`` gathered
    into its label's log-probability (a ``logaddexp`` and an add, 5), then per element of the gradient
    (``[T, N, C]``) ``(exp(lp) - exp(lab - nll - lp)) * grad``: two ``exp`` (4 each), three subtractions and a
    product, 12 FLOP.
    """
    return 14.0 * _numel(args[6]) + 12.0 * _numel(outputs[0])


def _matrices(x: Any) -> tuple[int, int, int]:
    """(matrices in the batch, rows ``m``, columns ``n``) of a tensor ``[*, m, n]``."""
    shape = _shape(x)
    m, n = (shape[-2], shape[-1]) if len(shape) > 1 else (1, shape[-1] if shape else 1)
    return math.prod(shape[:-2]), m, n


def _lu_flops(m: int, n: int) -> float:
    """Leading-order FLOP of an LU factorization with partial pivoting of one ``m x n`` matrix (LAPACK ``getrf``).

    ``m n^2 - n^3 / 3`` multiplies and adds for ``m >= n`` (LAWN 41, Blackford and Dongarra, table of ``xGETRF``),
    ``n m^2 - m^3 / 3`` else: ``2 n^3 / 3`` for a square matrix.
    """
    big, small = max(m, n), min(m, n)
    return big * small * small - small ** 3 / 3.0


def _linalg_matrix_exp(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``linalg_matrix_exp(A [*, n, n])``: aten's scaling and squaring with a Taylor polynomial of degree 18.

    aten (``mexp_impl`` in ``LinearAlgebra.cpp``, after Bader, Blanes and Casas, *Computing the matrix exponential
    with an optimized Taylor polynomial approximation*, Mathematics 7 (2019) 1174) picks per matrix, by its 1-norm,
    the least of the degrees 1, 2, 4, 8, 12, 18, which take 0, 1, 2, 3, 4, 5 matrix products; past the norm of
    degree 18 it scales ``A`` by ``2^-s`` and squares the result ``s`` times. The norm is data, so this counts the
    most a matrix takes without squaring: degree 18, its 5 products (``A^2``, ``A^3``, ``A^6``, then ``A^9`` and
    the result: ``2 n^3`` each), the 5 x 5 linear combination of ``I, A, A^2, A^3, A^6`` (a multiply-add per
    coefficient and element, ``50 n^2``), its three sums (``3 n^2``), the 1-norm (an abs and an add per element,
    ``2 n^2``) and the scaling (``n^2``): ``10 n^3 + 56 n^2`` per matrix. Each squaring, taken for a 1-norm past
    3.01 (float32; 1.09 for float64), would add ``2 n^3``.
    """
    batch, _, n = _matrices(args[0])
    return float(batch * (10 * n ** 3 + 56 * n ** 2))


def _linalg_householder_product(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``linalg_householder_product(A [*, m, n], tau [*, k])``: the first ``n`` columns of ``H_1 ... H_k``.

    LAPACK's ``orgqr`` (aten calls it, or cuSOLVER's), ``4 m n k - 2 (m + n) k^2 + 4 k^3 / 3`` FLOP per matrix
    (LAWN 41's ``xORGQR``): ``4 n^3 / 3`` for ``m = n = k``.
    """
    batch, m, n = _matrices(args[0])
    k = _shape(args[1])[-1] if _shape(args[1]) else 1
    return float(batch * (4 * m * n * k - 2 * (m + n) * k * k + 4 * k ** 3 / 3.0))


def _linalg_solve_ex(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``_linalg_solve_ex(A [*, n, n], B, left, check_errors) -> (X, LU, pivots, info)``: ``torch.linalg.solve``.

    An LU factorization of each matrix (``2 n^3 / 3``, :func:`_lu_flops`), then a forward and a back substitution
    per right-hand side (``getrs``: ``2 n^2`` per column of ``B``, ``2 n`` per element of ``X``).
    """
    systems, m, n = _matrices(outputs[1] if len(outputs) > 1 and outputs[1] is not None else args[0])
    return systems * _lu_flops(m, n) + 2.0 * n * _numel(outputs[0])


def _linalg_lu_solve(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``linalg_lu_solve(LU [*, n, n], pivots, B, left, adjoint)``: two triangular solves per right-hand side.

    ``getrs``: ``2 n^2`` FLOP per column of ``B`` (``n^2`` each for the forward and the back substitution), so
    ``2 n`` per element of the result.
    """
    return 2.0 * _shape(args[0])[-1] * _numel(outputs[0])


def _linalg_solve_triangular(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``linalg_solve_triangular(A [*, n, n], B, upper, left, unitriangular)``: ``trsm``, ``n^2`` per column of ``B``.

    (LAWN 41's ``xTRSM``: ``n^2 k / 2`` multiplies and as many adds): ``n`` per element of the result.
    """
    return float(_shape(args[0])[-1] * _numel(outputs[0]))


def _linalg_lu_factor_ex(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``linalg_lu_factor_ex(A [*, m, n], pivot, check_errors) -> (LU, pivots, info)``: :func:`_lu_flops` each."""
    batch, m, n = _matrices(args[0])
    return batch * _lu_flops(m, n)


def _linalg_det(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``_linalg_det(A [*, n, n]) -> (det, LU, pivots)``: an LU factorization and the product of its diagonal.

    ``2 n^3 / 3`` (:func:`_lu_flops`) and ``n`` multiplies (the pivots' sign, a parity, is free) per matrix.
    """
    batch, m, n = _matrices(args[0])
    return batch * (_lu_flops(m, n) + n)


def _weight_norm_interface(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``_weight_norm_interface(v, g, dim) -> (w, norm)``: ``w = v * g / ||v||``, the norm over all dims but ``dim``.

    aten's ``weight_norm`` kernels: per element of ``v``, a square and an add into its slice's norm and the product
    with the slice's factor (3 FLOP); per slice (element of ``g``), the square root and ``g / norm`` (2).
    """
    return 3.0 * _numel(args[0]) + 2.0 * _numel(args[1])


def _weight_norm_interface_backward(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``_weight_norm_interface_backward(grad_w, v, g, norm, dim) -> (grad_v, grad_g)``.

    aten's ``weight_norm_backward`` kernels: ``grad_g = sum(grad_w * v) / norm`` (a multiply-add per element of
    ``v``, a division per slice) and ``grad_v = g / norm * (grad_w - v * grad_g / norm)`` (a product, a difference
    and a product per element, two divisions per slice): 5 FLOP per element of ``v``, 3 per element of ``g``.
    """
    return 5.0 * _numel(args[1]) + 3.0 * _numel(args[2])


def _angle(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``angle(x)``, per element: ``atan2(imag, real)`` of a complex ``x``, or ``pi`` or 0 by the sign of a real one.

    4 FLOP for the complex form (as :data:`_ELEMENTWISE`'s ``atan2``), 1 for the real one (a compare, as ``sign``).
    """
    x = args[0]
    return (4.0 if isinstance(x, torch.Tensor) and x.is_complex() else 1.0) * sum(_numel(o) for o in outputs)


def _affine_grid_generator(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``affine_grid_generator(theta [N, s, s + 1], size, align_corners)``: the grid ``[N, *spatial, s]``.

    aten multiplies the base grid of homogeneous coordinates ``[N, prod(spatial), s + 1]`` by ``theta``'s transpose
    (a ``bmm``): ``s + 1`` multiply-adds, 2 FLOP each, per output coordinate; the base grid (``linspace``) is made
    from the size alone. Its backward is the same ``bmm`` transposed, which aten records as one.
    """
    out = outputs[0]
    terms = _shape(out)[-1] + 1 if isinstance(out, torch.Tensor) and out.dim() else 1
    return 2.0 * terms * _numel(out)


def _embedding_renorm(args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """``embedding_renorm_(weight, indices, max_norm, norm_type)``: ``nn.Embedding(max_norm=...)``'s rescaling.

    aten visits each distinct index's row of ``D`` values: its norm (a power and an add per value, 2 FLOP), then,
    if it is past ``max_norm``, ``max_norm / (norm + 1e-7)`` and the row's product with it (``D`` + 2). Which
    indices repeat and which rows are too long is data: counted as if every index were distinct and every row
    rescaled, ``3 D + 4`` FLOP per index (the root and the compare: 2 more), an upper bound; the sort that finds
    repeats is data movement, as ``sort``.
    """
    width = _shape(args[0])[-1] if _shape(args[0]) else 1
    return float(_numel(args[1]) * (3 * width + 4))


_Rule = Callable[[tuple[Any, ...], dict[str, Any], list[Any]], float]

#: Rules of linear algebra (factorizations, solves, the matrix exponential) from LAPACK's operation counts, and of
#: the reparametrizations and rescalings of ``torch.nn`` (weight norm, ``Embedding``'s ``max_norm``).
_LINEAR_ALGEBRA_RULES: dict[str, _Rule] = {
    "linalg_matrix_exp": _linalg_matrix_exp,
    "linalg_householder_product": _linalg_householder_product,
    "_linalg_solve_ex": _linalg_solve_ex,
    "linalg_lu_solve": _linalg_lu_solve,
    "linalg_solve_triangular": _linalg_solve_triangular,
    "linalg_lu_factor_ex": _linalg_lu_factor_ex,
    "_linalg_det": _linalg_det,
    "_weight_norm_interface": _weight_norm_interface,
    "_weight_norm_interface_backward": _weight_norm_interface_backward,
    "angle": _angle,
    "embedding_renorm_": _embedding_renorm,
}

#: Rules of one op each that need more than a shape or two: losses (CTC's too), sampling (and its affine grid),
#: pairwise distances, bags, medians, trilinear products.
_LOSS_AND_SAMPLING_RULES: dict[str, _Rule] = {
    "binary_cross_entropy": _binary_cross_entropy,
    "binary_cross_entropy_backward": _binary_cross_entropy_backward,
    "grid_sampler_2d": _grid_sampler_2d,
    "grid_sampler_2d_backward": _grid_sampler_2d_backward,
    "_cdist_forward": _cdist_forward,
    "_cdist_backward": _cdist_backward,
    "_embedding_bag": _embedding_bag,
    "_embedding_bag_forward_only": _embedding_bag,
    "_embedding_bag_backward": _embedding_bag_backward,
    "_embedding_bag_dense_backward": _embedding_bag_dense_backward,
    "_embedding_bag_per_sample_weights_backward": _embedding_bag_per_sample_weights_backward,
    "median": _median,
    "nanmedian": _median,
    "_trilinear": _trilinear,
    "binary_cross_entropy_with_logits": _binary_cross_entropy_with_logits,
    "affine_grid_generator": _affine_grid_generator,
    "_ctc_loss": _ctc_loss,
    "_ctc_loss_backward": _ctc_loss_backward,
}


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
    products = _product_counts(name, args, out)
    if products is not None:  # a complex multiply-add is 8 real FLOP (6 + 2), a complex add 2 (LAWN 41)
        multiply_adds, adds = products
        complex_values = _is_complex(args, kwargs, outputs)
        return (8.0 if complex_values else 2.0) * multiply_adds + (2.0 if complex_values else 1.0) * adds
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
    if name in ("index_put", "index_put_", "_index_put_impl_", "_unsafe_index_put"):
        # (self, indices, values, accumulate): with accumulate, one add per element of values, as index_add (the
        # backward of x[idx] is one); without, an overwrite: data movement, as scatter
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        return float(_numel(args[2] if len(args) > 2 else kwargs.get("values"))) if accumulate else 0.0
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
    rule = _LOSS_AND_SAMPLING_RULES.get(name) or _LINEAR_ALGEBRA_RULES.get(name)
    if rule is not None:
        return rule(args, kwargs, outputs)
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
    if name == "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams":  # its fake_quant_enabled flag cleared:
        quantize = _flag_on(args[3] if len(args) > 3 else kwargs.get("fake_quant_enabled"))  # a copy, a mask of ones
        return 4.0 * quantize * _numel(args[0])
    if name in _FAKE_QUANTIZE:
        return 4.0 * _numel(args[0])
    if name in _LEARNABLE_FAKE_QUANTIZE_GRADS:  # (grad, self, scale, zero_point, ...)
        return 11.0 * _numel(args[1])
    if name in _FUSED_OBSERVER_FAKE_QUANTIZE:  # (self, observer_on, fake_quant_on, running_min, ...)
        observe, quantize = (_flag_on(args[k] if len(args) > k else kwargs.get(key))
                             for k, key in ((1, "observer_on"), (2, "fake_quant_on")))
        return (2.0 * observe + 4.0 * quantize) * _numel(args[0])
    if name in _COPIES or name in _CONJ_PHYSICAL:
        return _copy_flops(name, args, kwargs, outputs)
    if (name in _COMPLEX_ELEMENTWISE or name in _COMPLEX_SUMS) and _is_complex(args, kwargs, outputs):
        if name in _COMPLEX_SUMS:
            return 2.0 * _numel(args[0])
        if name == "pow":
            return _complex_pow(args, kwargs) * out_numel
        return _COMPLEX_ELEMENTWISE[name] * out_numel
    if name in _ELEMENTWISE:
        return _ELEMENTWISE[name] * out_numel
    if name in _REDUCTIONS:
        return float(_numel(args[0]))
    if name in FREE_OPS or name in VIEW_OPS:
        return 0.0
    return None
