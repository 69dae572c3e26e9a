"""Convolutions (F.conv1d/2d/3d, F.conv_transpose1d/2d/3d): three bilinear Functions that close over each
other's derivatives, so every backward is itself differentiable (double backward): conv(x, w), its input
gradient convT(g, w) (also the user-facing transposed convolution) and its weight gradient wgrad(x, g).

Each Function exists once; its arrays come from engine/backend/windows.py, which runs NumPy/CuPy code or, for
a 2-D convolution on a GPU, our im2col/col2im kernels around cuBLAS GEMMs (the Geometry says which)."""

from __future__ import annotations

from ... import dtypes as D
from ...amp import _state as _amp_state
from ...amp import autocast_cast
from ...autograd.function import Function
from ...autograd.naming import torch_node
from ...backend import cuda_kernels as K
from ...backend import windows as W
from ...ops.shape import constant_pad
from ...tensor import Tensor
from .arguments import _batched, _check_dtypes, _tuple


def _rounded(y, like: Tensor):
    """A float32 result of bfloat16 operands back in bfloat16 (other results as they are)."""
    return y.astype(like._dtype.np) if like._dtype is D.bfloat16 else y


class Convolution(Function):
    """y = conv(x, w) + b over a Geometry."""

    _raw = True

    @staticmethod
    def forward(ctx, x, w, b, geom):
        U = D.upcast  # bfloat16 in float32 (NumPy has no bfloat16 GEMM), rounded once as torch's
        y, cols = W.conv_forward(U(x._arr), U(w._arr), None if b is None else U(b._arr), geom)
        y = _rounded(y, x)
        ctx.save_for_backward(x, w)
        ctx.geom = geom
        nig = ctx.needs_input_grad
        if nig and nig[1] and cols is not None and (geom.cuda or cols.nbytes <= 2 * x._arr.nbytes):
            # reused by the weight gradient; on CuPy only when small: a 3x3 convolution's are 9x its input,
            # most of a conv net's peak memory if every layer kept them (NumPy makes none: cols is None)
            ctx.cols = cols
        return y

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        geom = ctx.geom
        nig = ctx.needs_input_grad
        gy_t = W.conv_output_grad_layout(gy._arr, geom) if nig[0] or nig[1] else None  # once for both GEMMs
        gx = ConvTranspose.apply(gy, w, geom, gy_t) if nig[0] else None
        cols = ctx.__dict__.pop("cols", None)
        gw = ConvWeightGrad.apply(x, gy, geom, w._shape, cols, gy_t) if nig[1] else None
        gb = gy.sum((0, *range(2, gy.ndim))) if nig[2] else None
        return gx, gw, gb, None


class ConvTranspose(Function):
    """The input gradient of conv(., w) applied to gy: x-shaped (geom.in_shape). Also F.conv_transpose*d.
    `gy_t`: gy in W.conv_output_grad_layout, or None."""

    _raw = True

    @staticmethod
    def forward(ctx, gy, w, geom, gy_t):
        ctx.save_for_backward(gy, w)
        ctx.geom = geom
        return _rounded(W.conv_input_grad(D.upcast(gy._arr), D.upcast(w._arr), geom, gy_t), gy)

    @staticmethod
    def backward(ctx, gg):
        gy, w = ctx.saved_tensors
        nig = ctx.needs_input_grad
        dg = Convolution.apply(gg, w, None, ctx.geom) if nig[0] else None
        dw = ConvWeightGrad.apply(gg, gy, ctx.geom, w._shape, None, None) if nig[1] else None
        return dg, dw, None, None


class ConvWeightGrad(Function):
    """The weight gradient of conv(x, .) for output gradient gy: w-shaped. `cols` (x's columns) and `gy_t`
    are given when the caller already has them, else None."""

    _raw = True

    @staticmethod
    def forward(ctx, x, gy, geom, w_shape, cols, gy_t):
        ctx.save_for_backward(x, gy)
        ctx.geom = geom
        gw = W.conv_weight_grad(D.upcast(x._arr), D.upcast(gy._arr), geom, w_shape, cols, gy_t)
        return _rounded(gw, gy)

    @staticmethod
    def backward(ctx, ggw):
        x, gy = ctx.saved_tensors
        nig = ctx.needs_input_grad
        dx = ConvTranspose.apply(gy, ggw, ctx.geom, None) if nig[0] else None
        dg = Convolution.apply(x, ggw, None, ctx.geom) if nig[1] else None
        return dx, dg, None, None, None, None


_CONVOLUTION = torch_node(Convolution, "ConvolutionBackward0")
_CONV_TRANSPOSE = torch_node(ConvTranspose, "ConvolutionBackward0")
_CONVOLUTION._torch_edges = _CONV_TRANSPOSE._torch_edges = (0, 1, 2)  # input, weight, bias (None: (None, 0))


def _same_pads(k, d):
    total = d * (k - 1)
    return total // 2, total - total // 2  # PyTorch puts the odd extra pixel at the end


def _conv_pads(padding, kernel, stride, dilation, n: int):
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * (2 * n)
        if padding == "same":
            if any(s != 1 for s in stride):  # (nn.Conv*d raises ValueError at construction; F.conv*d this)
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            pads = []
            for k, d in zip(kernel, dilation):
                pads.extend(_same_pads(k, d))
            return tuple(pads)
        raise RuntimeError(f"Invalid padding string: '{padding}'")
    p = _tuple(padding, n, "padding")
    if any(v < 0 for v in p):
        raise RuntimeError("negative padding is not supported")
    return tuple(v for v in p for _ in range(2))


def _conv_nd(input: Tensor, weight: Tensor, bias, stride, padding, dilation, groups: int, dims: int,
             name: str) -> Tensor:
    """Cross-correlation over `dims` spatial dims: im2col through a strided view + one batched GEMM."""
    x, unbatched = _batched(input, dims, name)
    if weight.ndim != dims + 2:
        raise RuntimeError(
            f"Expected {dims + 2}-dimensional weight for {dims + 2}-dimensional input {list(x._shape)}, but "
            "got "
            f"{weight.ndim}-dimensional weight of size {list(weight._shape)} instead"
        )
    kernel = weight._shape[2:]
    stride, dilation = _tuple(stride, dims, "stride"), _tuple(dilation, dims, "dilation")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    pads = _conv_pads(padding, kernel, stride, dilation, dims)
    c = x._shape[1]
    if weight._shape[0] % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got "
            "weight "
            f"of size [{list(weight._shape)}] instead"
        )
    if c != weight._shape[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(weight._shape)}, expected input{list(x._shape)} "
            f"to have {weight._shape[1] * groups} channels, but got {c} channels instead"
        )
    if _amp_state.any:  # autocast: the convolution GEMM runs in half precision
        x, weight, bias = autocast_cast(x, weight, bias)
    _check_dtypes(x, weight, bias)
    geom = W.Geometry(x._shape, kernel, stride, dilation, pads, groups)
    if min(geom.out_hw) <= 0:
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, geom.padded_hw))}). Kernel "
            "size: "
            f"({' x '.join(str((k - 1) * d + 1) for k, d in zip(kernel, dilation))}). Kernel size can't be "
            "greater than actual input size"
        )
    geom.cuda = dims == 2 and x.is_cuda and K.takes(x, weight, bias)  # im2col kernel + cuBLAS
    y = _CONVOLUTION.apply(x, weight, bias, geom)
    return y.squeeze(0) if unbatched else y


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
) -> Tensor:
    """2-D cross-correlation: im2col through a strided view + one batched GEMM."""
    return _conv_nd(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
) -> Tensor:
    """3-D cross-correlation over (N, C, D, H, W): conv2d's im2col + GEMM, with one more window dim."""
    return _conv_nd(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
) -> Tensor:
    """1-D cross-correlation, run as conv2d over a height-1 image (views, no copies)."""
    x, unbatched = _batched(input, 1, "conv1d")
    if weight.ndim != 3:
        raise RuntimeError(
            f"Expected 3-dimensional weight for 3-dimensional input {list(x._shape)}, but got "
            f"{weight.ndim}-dimensional weight of size {list(weight._shape)} instead"
        )
    s, d = _tuple(stride, 1, "stride")[0], _tuple(dilation, 1, "dilation")[0]
    if isinstance(padding, str):
        pads = _conv_pads(padding, weight._shape[2:], (s,), (d,), 1)
        p2 = padding
    else:
        p = _tuple(padding, 1, "padding")[0]
        pads, p2 = (p, p), (0, p)
    if isinstance(p2, str) and p2 == "same" and pads[0] != pads[1]:
        # asymmetric "same": pad explicitly, then convolve without padding
        x = constant_pad(x, pads)
        p2 = 0
    y = conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, s), p2, (1, d), groups).squeeze(2)
    return y.squeeze(0) if unbatched else y


def _check_transposed_weight(x: Tensor, weight: Tensor) -> None:
    """A transposed convolution's weight is (in_channels, out_channels / groups, *kernel), as many dims as the
    batched input x; torch's error otherwise (its message for a wrong rank too)."""
    if weight.ndim != x.ndim or weight._shape[0] != x._shape[1]:
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(weight._shape)}, expected input{list(x._shape)} "
            f"to have {weight._shape[0]} channels, but got {x._shape[1]} channels instead"
        )


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """1-D transposed convolution, run as conv_transpose2d over a height-1 image (views, no copies)."""
    x, unbatched = _batched(input, 1, "conv_transpose1d")
    _check_transposed_weight(x, weight)
    s, p = _tuple(stride, 1, "stride")[0], _tuple(padding, 1, "padding")[0]
    o, d = _tuple(output_padding, 1, "output_padding")[0], _tuple(dilation, 1, "dilation")[0]
    y = conv_transpose2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, s), (0, p), (0, o), groups, (1, d))
    y = y.squeeze(2)
    return y.squeeze(0) if unbatched else y


def _conv_transpose_nd(input: Tensor, weight: Tensor, bias, stride, padding, output_padding, groups: int,
                       dilation, dims: int, name: str) -> Tensor:
    """Transposed convolution: the input gradient of a convolution, computed as one GEMM + col2im."""
    if _amp_state.any:  # autocast: in the lower precision, as the convolution
        input, weight, bias = autocast_cast(input, weight, bias)
    x, unbatched = _batched(input, dims, name)
    n, cin, *size = x._shape
    _check_transposed_weight(x, weight)
    kernel = weight._shape[2:]
    stride, dilation = _tuple(stride, dims, "stride"), _tuple(dilation, dims, "dilation")
    pad, opad = _tuple(padding, dims, "padding"), _tuple(output_padding, dims, "output_padding")
    if any(o >= s and o >= d for o, s, d in zip(opad, stride, dilation)):
        names = ("depth", "height", "width")[-dims:]
        raise RuntimeError(
            "output padding must be smaller than either stride or dilation, but got "
            + " ".join(f"{what}_{dim}: {v}" for what, vals in (("output_padding", opad), ("stride", stride),
                                                                 ("dilation", dilation))
                       for dim, v in zip(names, vals))
        )
    _check_dtypes(x, weight, bias)
    cout = weight._shape[1] * groups
    out_size = tuple(
        (i - 1) * s - 2 * p + d * (k - 1) + o + 1
        for i, s, p, d, k, o in zip(size, stride, pad, dilation, kernel, opad)
    )
    if min(out_size) <= 0:
        raise RuntimeError(
            f"Given input size per channel: ({' x '.join(map(str, size))}). Calculated output size per "
            "channel: "
            f"({' x '.join(map(str, out_size))}). Output size is too small"
        )
    pads = tuple(p for p in pad for _ in range(2))
    geom = W.Geometry((n, cout) + out_size, kernel, stride, dilation, pads, groups, out_hw=tuple(size))
    geom.cuda = dims == 2 and x.is_cuda and K.takes(x, weight, bias)  # cuBLAS GEMM + col2im kernel
    y = _CONV_TRANSPOSE.apply(x, weight, geom, None)
    if bias is not None:
        y = y + bias.reshape((1, -1) + (1,) * dims)
    return y.squeeze(0) if unbatched else y


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """Transposed convolution: the input gradient of a conv2d, computed as one GEMM + col2im."""
    return _conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                              "conv_transpose2d")


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """3-D transposed convolution: the input gradient of a conv3d, computed as one GEMM + col2im."""
    return _conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                              "conv_transpose3d")
