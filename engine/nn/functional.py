"""torch.nn.functional for the engine: layers, activations and losses as functions (fused where it pays)."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import dtypes as D
from .._strides import wrap_dim
from ..amp import _state as _amp_state
from ..amp import autocast_cast, autocast_fp32
from ..autograd.grad_mode import no_grad
from ..autograd.grad_mode import state as _grad_state
from ..autograd.naming import torch_node
from ..ops import elementwise as E
from ..ops.reduce import _softmax_dim
from ..ops.reduce import log_softmax as _log_softmax
from ..ops.reduce import softmax as _softmax
from ..ops.shape import constant_pad
from ..random import default_generator
from ..tensor import Tensor, _wrap_array
from . import _conv as C
from . import _cuda
from . import _fused as FU

# The fused nodes are named like the PyTorch nodes a user sees for the same call (`y.grad_fn`, the graph
# view): torch's linear is an addmm (mm without bias) viewed back for other ranks; its cross-entropy ends in
# nll_loss.
_LINEAR_NODES = {(2, True): torch_node(FU.Linear, "AddmmBackward0"),
                 (2, False): torch_node(FU.Linear, "MmBackward0"),
                 (1, True): torch_node(FU.Linear, "ViewBackward0"),
                 (1, False): torch_node(FU.Linear, "SqueezeBackward4"),
                 (3, True): torch_node(FU.Linear, "ViewBackward0"),
                 (3, False): torch_node(FU.Linear, "UnsafeViewBackward0")}
_RELU = torch_node(FU.Relu, "ReluBackward0")
_LEAKY_RELU = torch_node(FU.LeakyRelu, "LeakyReluBackward0")
_ELU = torch_node(FU.Elu, "EluBackward0")
_GELU = torch_node(FU.Gelu, "GeluBackward0")
_SILU = torch_node(FU.Silu, "SiluBackward0")
_SOFTPLUS = torch_node(FU.Softplus, "SoftplusBackward0")
_HARDTANH = torch_node(FU.Hardtanh, "HardtanhBackward0")
_DROPOUT = torch_node(FU.MaskMul, "MulBackward0")
_BATCH_NORM = torch_node(FU.Normalize, "NativeBatchNormBackward0")
_LAYER_NORM = torch_node(FU.Normalize, "NativeLayerNormBackward0")
_GROUP_NORM = torch_node(FU.Normalize, "NativeGroupNormBackward0")
_EMBEDDING = torch_node(FU.Embedding, "EmbeddingBackward0")
_NLL_LOSS = torch_node(FU.CrossEntropy, "NllLossBackward0")
_NLL_LOSS_DEFAULT = torch_node(FU.CrossEntropyDefault, "NllLossBackward0")
_NLL_LOSS_2D = torch_node(FU.CrossEntropy, "NllLoss2DBackward0")  # torch's name for (N, C, d1, ...) scores
_NLL = {False: torch_node(FU.NllLoss, "NllLossBackward0"), True: torch_node(FU.NllLoss, "NllLoss2DBackward0")}
_POINTWISE_LOSS = {kind: torch_node(FU.PointwiseLoss, name) for kind, name in (
    ("mse", "MseLossBackward0"), ("smooth_l1", "SmoothL1LossBackward0"), ("huber", "HuberLossBackward0"))}
_SMOOTHED_NLL_LOSS = torch_node(FU.CrossEntropy, "AddBackward0")  # torch adds the smoothing term
_BCE = torch_node(FU.BinaryCrossEntropy, "BinaryCrossEntropyBackward0")
_BCE_LOGITS = torch_node(FU.BinaryCrossEntropyWithLogits, "BinaryCrossEntropyWithLogitsBackward0")
_CONVOLUTION = torch_node(C.Convolution, "ConvolutionBackward0")
_CONV_TRANSPOSE = torch_node(C.ConvTranspose, "ConvolutionBackward0")
_MAX_POOL = {d: torch_node(C.MaxPool, f"MaxPool{d}DWithIndicesBackward0") for d in (2, 3)}
_AVG_POOL = {d: torch_node(C.WindowSum, f"AvgPool{d}DBackward0") for d in (2, 3)}


def sigmoid(input: Tensor) -> Tensor:
    if input.is_cuda and _cuda.takes(input):  # fused kernel, kernels/activations.cu
        return _cuda.sigmoid(input)
    return E.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    if input.is_cuda and _cuda.takes(input):
        return _cuda.tanh(input)
    return E.tanh(input)


def softmax(input: Tensor, dim=None, dtype=None) -> Tensor:
    dim = _softmax_dim(input, dim)  # warns about an implicit dim here, pointing at the caller
    if input.is_cuda:  # one kernel per row, kernels/softmax.cu
        return _cuda.softmax(input, dim, dtype)
    return _softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim=None, dtype=None) -> Tensor:
    dim = _softmax_dim(input, dim)
    if input.is_cuda:
        return _cuda.softmax(input, dim, dtype, log=True)
    return _log_softmax(input, dim, dtype)


def _tuple(v, n: int, name: str = "kernel_size") -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) == 1 and n > 1:
            return tuple(int(v[0]) for _ in range(n))
        if len(v) != n:
            raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {v}")
        return tuple(int(i) for i in v)
    return (int(v),) * n


def _check_dtypes(x: Tensor, w: Tensor, b: Tensor | None, what: str = "weight") -> None:
    if x._dtype is not w._dtype:
        raise RuntimeError(
            f"Input type ({x._dtype.name}) and {what} type ({w._dtype.name}) should be the same"
        )
    if b is not None and b._dtype is not x._dtype:
        raise RuntimeError(f"Input type ({x._dtype.name}) and bias type ({b._dtype.name}) should be the same")


# ----------------------------------------------------------------------------- linear
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x W^T + b, one fused node (forward one GEMM; backward gx = g W, gW = g^T x, gb = sum g)."""
    shape = input._shape
    nd = len(shape)
    if nd == 0 or shape[-1] != weight._shape[-1]:
        lead = int(np.prod(shape[:-1])) if nd > 1 else 1
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({lead}x{shape[-1] if nd else 0} "
            f"and {weight._shape[-1]}x{weight._shape[0]})"
        )
    if _amp_state.any:  # autocast: the GEMM runs in half precision, like torch's autocast op list
        input, weight, bias = autocast_cast(input, weight, bias)
    dt = input._dtype
    if weight._dtype is not dt or (bias is not None and bias._dtype is not dt):
        _check_dtypes(input, weight, bias)
    node = _LINEAR_NODES[nd if nd < 3 else 3, bias is not None]
    if _grad_state.grad_enabled and (weight._rg or input._rg or (bias is not None and bias._rg)):
        return node._apply_recorded((input, weight, bias))  # apply()'s own test, without its loop
    return node.apply(input, weight, bias)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y[..., o] = x1 A[o] x2 + b[o], as one GEMM and a batched reduction."""
    out_f, in1, in2 = weight._shape
    if input1._shape[-1] != in1 or input2._shape[-1] != in2:
        raise RuntimeError(
            f"bilinear: expected input1 [*, {in1}] and input2 [*, {in2}], got {list(input1._shape)} "
            f"and {list(input2._shape)}"
        )
    lead = input1._shape[:-1]
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(-1, in2)
    t = (x1 @ weight.permute(1, 0, 2).reshape(in1, out_f * in2)).reshape(-1, out_f, in2)
    y = (t * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, out_f)


# ----------------------------------------------------------------------------- convolution
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


def _batched(input: Tensor, dims: int, name: str):
    """(input as a batch, whether to squeeze the batch dim afterwards)."""
    if input.ndim == dims + 2:
        return input, False
    if input.ndim == dims + 1:
        return input.unsqueeze(0), True
    raise RuntimeError(
        f"Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to {name}, but got input of "
        f"size: {list(input._shape)}"
    )


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
    geom = C.Geometry(x._shape, kernel, stride, dilation, pads, groups)
    if min(geom.out_hw) <= 0:
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, geom.padded_hw))}). Kernel "
            "size: "
            f"({' x '.join(str((k - 1) * d + 1) for k, d in zip(kernel, dilation))}). Kernel size can't be "
            "greater than actual input size"
        )
    if dims == 2 and x.is_cuda and _cuda.takes(x, weight, bias):  # im2col kernel + cuBLAS, kernels/im2col.cu
        y = _cuda.conv2d(x, weight, bias, geom)
        return y.squeeze(0) if unbatched else y
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
    geom = C.Geometry((n, cout) + out_size, kernel, stride, dilation, pads, groups, out_hw=tuple(size))
    if dims == 2 and x.is_cuda and _cuda.takes(x, weight, bias):  # cuBLAS GEMM + col2im, kernels/im2col.cu
        y = _cuda.conv_transpose2d(x, weight, bias, geom)
        return y.squeeze(0) if unbatched else y
    y = _CONV_TRANSPOSE.apply(x, weight, geom)
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


# ----------------------------------------------------------------------------- pooling
def _pool_out(size, k, s, p, d, ceil_mode):
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1  # the last window must start inside the input or its left padding
    return out


_PLURAL = {2: "two", 3: "three"}


def _pool_tuple(v, dims: int, message: str) -> tuple:
    """An int or a 1- or `dims`-sequence as a `dims`-tuple; torch's RuntimeError `message` otherwise."""
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return (int(v[0]),) * dims
        if len(v) != dims:
            raise RuntimeError(message)
        return tuple(int(i) for i in v)
    return (int(v),) * dims


def _pool_batched(input: Tensor, dims: int):
    """(input as a batch, whether to squeeze the batch dim afterwards), with torch's pooling checks."""
    if input.ndim not in (dims + 1, dims + 2) or 0 in input._shape[-dims - 1:]:
        raise RuntimeError(f"non-empty {dims + 1}D or {dims + 2}D (batch mode) tensor expected for input")
    return (input.unsqueeze(0), True) if input.ndim == dims + 1 else (input, False)


def _pool_geometry(x: Tensor, kernel_size, stride, padding, dilation, ceil_mode, name, dims: int = 2):
    """Window geometry of an (N, C, *spatial) input for max/avg pooling, with torch's argument checks."""
    w, either = _PLURAL[dims], "" if name == "avg_pool3d" else "either "  # torch words avg_pool3d differently
    k = _pool_tuple(
        kernel_size, dims, f"{name}: kernel_size must {either}be a single int, or a tuple of {w} ints"
    )
    s = _pool_tuple(
        stride if (stride is not None and stride != []) else kernel_size, dims,
        f"{name}: stride must {either}be omitted, a single int, or a tuple of {w} ints",
    )
    p = _pool_tuple(padding, dims, f"{name}: padding must {either}be a single int, or a tuple of {w} ints")
    d = _pool_tuple(dilation, dims, f"{name}: dilation must be either a single int, or a tuple of {w} ints")
    letters = "THW"[-dims:]
    if min(k) <= 0:
        got = " ".join(f"k{a}: {v}" for a, v in zip(letters, k))
        raise RuntimeError(f"kernel size should be greater than zero, but got {got}")
    if min(s) == 0:
        raise RuntimeError("stride should not be zero")
    if min(d) <= 0:
        got = " ".join(f"dilation{a}: {v}" for a, v in zip(letters, d))
        raise RuntimeError(f"dilation should be greater than zero, but got {got}")
    if min(p) < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {min(p)}")
    for kk, pp, dd in zip(k, p, d):
        if pp > (dd * (kk - 1) + 1) // 2:
            raise RuntimeError(
                f"pad should be at most half of effective kernel size, but got pad={pp}, "
                f"kernel_size={kk} and dilation={dd}"
            )
    c, size = x._shape[1], x._shape[2:]
    if name == "avg_pool3d" and any(i < kk for i, kk in zip(size, k)):
        raise RuntimeError(
            f"input image ({' '.join(f'{a}: {i}' for a, i in zip(letters, size))}) smaller than kernel size "
            f"({' '.join(f'k{a}: {v}' for a, v in zip(letters, k))})"
        )
    out = tuple(_pool_out(i, kk, ss, pp, dd, ceil_mode) for i, kk, ss, pp, dd in zip(size, k, s, p, d))
    if min(out) <= 0:
        raise RuntimeError(
            f"Given input size: ({'x'.join(map(str, (c, *size)))}). Calculated output size: "
            f"({'x'.join(map(str, (c, *out)))}). Output size is too small"
        )
    # ceil mode may pad past the input's end: windows there see -inf (max) or are not counted (avg)
    pads = []
    for i, o, kk, ss, pp, dd in zip(size, out, k, s, p, d):
        pads += [pp, max(pp, (o - 1) * ss + dd * (kk - 1) + 1 - i - pp)]
    return C.Geometry(x._shape, k, s, d, pads, 1, out_hw=out), (k, s, p)


def _max_pool_nd(input: Tensor, kernel_size, stride, padding, dilation, ceil_mode, return_indices, dims: int):
    x, unbatched = _pool_batched(input, dims)
    geom, _ = _pool_geometry(x, kernel_size, stride, padding, dilation, ceil_mode, f"max_pool{dims}d", dims)
    if dims == 2 and x.is_cuda and _cuda.takes(x):  # kernels/pool.cu; indices are h * W + w
        y, idx = _cuda.max_pool2d(x, geom, ceil_mode)
        y, idx = (y.squeeze(0), idx.squeeze(0)) if unbatched else (y, idx)
        return (y, idx) if return_indices else y
    y, arg = _MAX_POOL[dims].apply(x, geom)
    if unbatched:
        y = y.squeeze(0)
    if return_indices:
        idx = _wrap_array(C.max_indices(arg._arr, geom))
        return y, (idx.squeeze(0) if unbatched else idx)
    return y


def max_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    return _max_pool_nd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2)


def max_pool3d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """Max over (kT, kH, kW) windows of an (N, C, D, H, W) or (C, D, H, W) input; indices are flat
    (d * H + h) * W + w positions, like torch's."""
    return _max_pool_nd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3)


def max_pool1d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    x, unbatched = _batched(input, 1, "max_pool1d")
    k = _tuple(kernel_size, 1)[0]
    s = _tuple(stride, 1, "stride")[0] if stride is not None and stride != [] else k
    r = max_pool2d(
        x.unsqueeze(2),
        (1, k),
        (1, s),
        (0, _tuple(padding, 1)[0]),
        (1, _tuple(dilation, 1)[0]),
        ceil_mode,
        return_indices,
    )
    if return_indices:
        y, idx = r[0].squeeze(2), r[1].squeeze(2)
        return (y.squeeze(0), idx.squeeze(0)) if unbatched else (y, idx)
    y = r.squeeze(2)
    return y.squeeze(0) if unbatched else y


def _avg_pool_nd(input: Tensor, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                 dims: int) -> Tensor:
    x, unbatched = _pool_batched(input, dims)
    name = f"avg_pool{dims}d"
    dt = x._dtype
    if dt is D.bool_ or (not dt.is_floating_point and dt is not D.int64) or (dims == 3 and dt is D.float16):
        raise NotImplementedError(  # torch's CPU kernels: floats and int64 (and no float16 in 3-D)
            f"\"{name if dims == 2 else 'avg_pool3d_out_frame'}\" not implemented for "
            f"'{D.scalar_type_name(dt)}'"
        )
    geom, (k, s, p) = _pool_geometry(x, kernel_size, stride, padding, 1, ceil_mode, name, dims)
    if dims == 2 and x.is_cuda and _cuda.takes(x):  # kernels/pool.cu, divisors in the kernel
        y = _cuda.avg_pool2d(x, geom, ceil_mode, count_include_pad, divisor_override)
        return y.squeeze(0) if unbatched else y
    fdt = dt.np if dt.is_floating_point else np.float64
    if divisor_override is not None:
        if divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        divisor = np.asarray(float(divisor_override), dtype=fdt)
    else:
        divisor = np.ones((), dtype=fdt)
        for i, o, kk, ss, pp in zip(x._shape[2:], geom.out_hw, k, s, p):
            start = np.arange(o) * ss - pp
            end = np.minimum(start + kk, i + pp)
            part = end - start if count_include_pad else np.minimum(end, i) - np.maximum(start, 0)
            divisor = np.multiply.outer(divisor, part.astype(fdt))  # (o1, ..., od): one per output element
    if dt.is_floating_point:
        y = _AVG_POOL[dims].apply(x, geom, divisor)
    else:  # int64: torch divides the integer window sums, truncating towards zero
        with no_grad():
            y = _AVG_POOL[dims].apply(x.to(D.float64), geom, divisor).trunc().to(dt)
    return y.squeeze(0) if unbatched else y


def avg_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    return _avg_pool_nd(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                        2)


def avg_pool3d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Average over (kT, kH, kW) windows of an (N, C, D, H, W) or (C, D, H, W) input."""
    return _avg_pool_nd(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                        3)


def avg_pool1d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    x, unbatched = _batched(input, 1, "avg_pool1d")
    k = _tuple(kernel_size, 1)[0]
    s = _tuple(stride, 1, "stride")[0] if stride is not None and stride != [] else k
    y = avg_pool2d(
        x.unsqueeze(2), (1, k), (1, s), (0, _tuple(padding, 1)[0]), ceil_mode, count_include_pad
    ).squeeze(2)
    return y.squeeze(0) if unbatched else y


def _adaptive_matrix(n_in: int, n_out: int, dtype) -> np.ndarray:
    m = np.zeros((n_out, n_in), dtype=dtype)
    for i in range(n_out):
        start = (i * n_in) // n_out
        end = -((-(i + 1) * n_in) // n_out)  # ceil
        m[i, start:end] = 1.0 / (end - start)
    return m


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Averages over PyTorch's adaptive windows; separable, so two small matmuls (Ph @ x @ Pw^T)."""
    x, unbatched = _batched(input, 2, "adaptive_avg_pool2d")
    h, w = x._shape[2:]
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 2:
            raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
        oh, ow = (
            (h if output_size[0] is None else output_size[0]),
            (w if output_size[1] is None else output_size[1]),
        )
    else:
        oh = ow = output_size
    if oh < 0 or ow < 0:
        raise RuntimeError(
            "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received "
            f"{{{oh}, {ow}}}"
        )
    if (oh, ow) == (1, 1):
        y = x.mean((2, 3), keepdim=True)
    elif oh and ow and h % oh == 0 and w % ow == 0:
        y = avg_pool2d(x, (h // oh, w // ow))
    else:
        ph = _wrap_array(_adaptive_matrix(h, oh, x._dtype.np))
        pw = _wrap_array(_adaptive_matrix(w, ow, x._dtype.np).T.copy())
        y = (ph @ x) @ pw
    return y.squeeze(0) if unbatched else y


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Averages over PyTorch's adaptive windows of the last three dims; separable: a small matmul per dim."""
    if input.ndim not in (4, 5):
        raise RuntimeError(f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(input._shape)}")
    size = input._shape[-3:]
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 3:
            raise RuntimeError("adaptive_avg_pool3d: output_size must be 3")
        out = tuple(i if o is None else int(o) for o, i in zip(output_size, size))
    else:
        out = (int(output_size),) * 3
    for d in range(input.ndim - 4, input.ndim):
        if input._shape[d] == 0:
            raise RuntimeError(
                "adaptive_avg_pool3d(): Expected input to have non-zero size for non-batch dimensions, but "
                "input "
                f"has sizes {list(input._shape)} with dimension {d} being empty"
            )
    if min(out) < 0:
        raise RuntimeError(
            "adaptive_avg_pool3d: elements of output_size must be greater than or equal to 0 but received "
            f"{{{out[0]}, {out[1]},{out[2]}}}"
        )
    if not input._dtype.is_floating_point:
        raise NotImplementedError(
            f"\"adaptive_avg_pool3d_cpu\" not implemented for '{D.scalar_type_name(input._dtype)}'"
        )
    lead = input._shape[:-3]
    if 0 in out:
        return input.narrow(-1, 0, 0).reshape(*lead, *out)
    if out == (1, 1, 1):
        return input.mean((-3, -2, -1), keepdim=True)
    if all(i % o == 0 for i, o in zip(size, out)):
        return avg_pool3d(input, tuple(i // o for i, o in zip(size, out)))
    d, h, w = size
    pd, ph = (_wrap_array(_adaptive_matrix(i, o, input._dtype.np)) for i, o in zip(size[:2], out[:2]))
    pw = _wrap_array(_adaptive_matrix(w, out[2], input._dtype.np).T.copy())
    y = (pd @ input.reshape(*lead, d, h * w)).reshape(*lead, out[0], h, w)  # depth, then height and width
    return (ph @ y) @ pw


# ----------------------------------------------------------------------------- normalisation
def _check_same_dtype(input: Tensor, params) -> None:
    """torch's CPU batch norm takes float32 statistics with a float16/bfloat16 input, other mixes not."""
    dtypes = {t._dtype for t in params if t is not None}
    if input.is_cuda or not dtypes or dtypes == {input._dtype} or input._dtype not in (D.float32, D.float64):
        return
    if input._dtype is D.float32:
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
    raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch statistics (training) in one fused node with a closed-form backward; running stats otherwise."""
    if input.ndim < 2:
        raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")
    c = input._shape[1]
    per_channel = running_mean, running_var, weight, bias
    for name, t in zip(("running_mean", "running_var", "weight", "bias"), per_channel):
        if t is not None and t._shape != (c,) and t.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    _check_same_dtype(input, per_channel)
    pshape = (1, c) + (1,) * (input.ndim - 2)
    if training:
        count = input.numel() // c
        if count <= 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input size {input.shape}"
            )
        axes = (0,) + tuple(range(2, input.ndim))
        running = (running_mean, running_var, momentum) if running_mean is not None else None
        if input.is_cuda and _cuda.takes(input, weight, bias, f16=False):  # kernels/norm.cu backward
            return _cuda.batch_norm(input, weight, bias, axes, eps, running, pshape)
        return _BATCH_NORM.apply(input, weight, bias, axes, eps, running, pshape)
    if running_mean is None or running_var is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    scale = (running_var + eps).rsqrt()
    if weight is not None:
        scale = scale * weight
    shift = -running_mean * scale
    if bias is not None:
        shift = shift + bias
    return input * scale.reshape(pshape) + shift.reshape(pshape)


def layer_norm(
    input: Tensor,
    normalized_shape,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    shape = (
        tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (int(normalized_shape),)
    )
    k = len(shape)
    if tuple(input._shape[input.ndim - k :]) != shape or input.ndim < k:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape [*, "
            f"{', '.join(map(str, shape))}], but got input of size{list(input._shape)}"
        )
    axes = tuple(range(input.ndim - k, input.ndim))
    if input.is_cuda and _cuda.takes(input, weight, bias, f16=False):  # kernels/norm.cu
        return _cuda.layer_norm(input, weight, bias, axes, eps, shape)
    return _LAYER_NORM.apply(input, weight, bias, axes, eps, None, shape)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, c = input._shape[:2]
    size = [n * c // num_groups, num_groups, *input._shape[2:]]  # torch's _verify_batch_size
    if size[0] * math.prod(size[2:]) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")
    if c % num_groups:
        raise RuntimeError(
            f"Expected number of channels in input to be divisible by num_groups, but got input of "
            f"shape {list(input._shape)} and num_groups={num_groups}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in input, but got "
                f"{name} of shape {list(t._shape)} and input of shape {list(input._shape)}"
            )
    x = input.reshape(n, num_groups, c // num_groups, -1)
    y = _GROUP_NORM.apply(x, weight, bias, (2, 3), eps, None, (1, num_groups, c // num_groups, 1))
    return y.reshape(input._shape)


# ----------------------------------------------------------------------------- dropout
def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_mask(shape, p: float, dtype) -> np.ndarray:
    if p == 1.0:
        return np.zeros(shape, dtype=dtype)
    keep = default_generator.uniform(shape, np.float32 if dtype != np.float64 else np.float64) < (1.0 - p)
    return keep.astype(dtype) * np.asarray(1.0 / (1.0 - p), dtype=dtype)


def _apply_mask(input: Tensor, mask: np.ndarray, inplace: bool) -> Tensor:
    if inplace:
        return E.inplace(input, lambda s: _DROPOUT.apply(s, mask), op_name="dropout_", needs_old=False)
    return _DROPOUT.apply(input, mask)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability p (engine generator), scale survivors by 1 / (1 - p)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    if input.is_cuda and _cuda.takes(input):  # Philox mask in the kernel, kernels/dropout.cu
        return _cuda.dropout(input, p, inplace)
    return _apply_mask(input, _dropout_mask(input._shape, p, input._dtype.np), inplace)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels: one draw per (sample, channel)."""
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will result "
            "in an error in a future release.",
            UserWarning,
            stacklevel=2,
        )
    if not training or p == 0.0:
        return input
    shape = input._shape[:2] + (1,) * (input.ndim - 2)
    return _apply_mask(input, _dropout_mask(shape, p, input._dtype.np), inplace)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of an (N, C, L) or (C, L) input: one draw per (sample, channel)."""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that dropout1d "
            "exists "
            "to provide channel-wise dropout on inputs with 1 spatial dimension, a channel dimension, and an "
            "optional batch dimension (i.e. 2D or 3D inputs)."
        )
    return _feature_dropout(input, p, training, inplace, batched=input.ndim == 3)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input: one draw per (sample, channel)."""
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(
            f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will result "
            "in an "
            "error in a future release. To retain the behavior and silence this warning, please use dropout "
            "instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 spatial "
            "dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D inputs).",
            UserWarning,
            stacklevel=2,
        )
    return _feature_dropout(input, p, training, inplace, batched=input.ndim == 5)


def _feature_dropout(input: Tensor, p: float, training: bool, inplace: bool, batched: bool) -> Tensor:
    """One keep/drop draw per channel (dim 1 of a batch, dim 0 of an unbatched input), broadcast over the
    rest."""
    if not training or p == 0.0:
        return input
    lead = 2 if batched else 1
    shape = input._shape[:lead] + (1,) * (input.ndim - lead)
    xp = input._storage.backend.xp
    mask = xp.asarray(_dropout_mask(shape, p, input._dtype.np))
    return _apply_mask(input, mask, inplace)


# ----------------------------------------------------------------------------- activations
def _maybe_inplace(input: Tensor, inplace: bool, fn, name: str) -> Tensor:
    if inplace:
        return E.inplace(input, fn, op_name=name)
    return fn(input)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    if input.is_cuda and _cuda.takes(input):  # fused kernel, kernels/activations.cu
        return _cuda.relu(input, inplace)
    if inplace:
        return E.relu_(input)
    if input._dtype is D.bool_:
        raise RuntimeError("Boolean inputs not supported for relu")
    return _RELU.apply(input)


def relu_(input: Tensor) -> Tensor:
    return E.relu_(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    if input.is_cuda and _cuda.takes(input):
        return _cuda.leaky_relu(input, negative_slope, inplace)
    _check_dtype(input, "leaky_relu_cpu")
    return _maybe_inplace(input, inplace, lambda s: _LEAKY_RELU.apply(s, negative_slope), "leaky_relu_")


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    _check_dtype(input, "elu_cpu")
    return _maybe_inplace(input, inplace, lambda s: _ELU.apply(s, alpha), "elu_")


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got '{approximate}'")
    if input.is_cuda and _cuda.takes(input):
        return _cuda.gelu(input, approximate)
    _check_dtype(input, "GeluKernelImpl")
    return _GELU.apply(input, approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    if input.is_cuda and _cuda.takes(input):
        return _cuda.silu(input, inplace)
    _check_dtype(input, "silu_cpu")
    return _maybe_inplace(input, inplace, _SILU.apply, "silu_")


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    _check_dtype(input, "softplus_cpu")
    return _SOFTPLUS.apply(input, beta, threshold)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if input._dtype is D.bool_:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    return _maybe_inplace(input, inplace, lambda s: _HARDTANH.apply(s, min_val, max_val), "hardtanh_")


def glu(input: Tensor, dim: int = -1) -> Tensor:
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    _check_dtype(input, "glu_cpu")
    d = wrap_dim(dim, input.ndim)
    if input._shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {input._shape[d]}")
    a, b = input.chunk(2, d)
    return a * b.sigmoid()


# ----------------------------------------------------------------------------- padding, one-hot, embedding
def _pad_index(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    i = np.arange(-lo, n + hi)
    if mode == "reflect":
        period = 2 * (n - 1) if n > 1 else 1
        i = np.abs(i) % period
        return np.where(i >= n, period - i, i)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    # circular, as torch: negative padding crops first, then the kept part wraps around
    start, m = max(-lo, 0), n - max(-lo, 0) - max(-hi, 0)
    return start + np.arange(-max(lo, 0), m + max(hi, 0)) % m


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """PyTorch's F.pad: (last_lo, last_hi, prev_lo, prev_hi, ...); constant, reflect, replicate, circular."""
    if mode == "constant":
        return constant_pad(input, pad, 0.0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) > 2 * input.ndim:
        raise RuntimeError(
            "Padding length should be less than or equal to two times the input dimension but got padding "
            f"length {len(pad)} and input of dimension {input.ndim}"
        )
    k = len(pad) // 2
    if not 1 <= k <= 3 or input.ndim not in (k + 1, k + 2):  # (C, *spatial) or (N, C, *spatial) only
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
        )
    out = input
    for k in range(len(pad) // 2):
        dim = input.ndim - 1 - k
        lo, hi = int(pad[2 * k]), int(pad[2 * k + 1])
        n = input._shape[dim]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input dimension, but "
                f"got: padding ({lo}, {hi}) at dimension {dim} of input {list(input._shape)}"
            )
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        out = out.index_select(dim, _wrap_array(_pad_index(n, lo, hi, mode)))
    return out


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    if tensor._dtype.is_floating_point or tensor._dtype is D.bool_:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    a = tensor._arr.astype(np.int64)
    if a.size and a.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        if not a.size:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(a.max()) + 1
    elif a.size and a.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    return _wrap_array((a[..., None] == np.arange(num_classes)).astype(np.int64))


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of `weight` picked by integer `input`; the gradient of padding_idx's row stays zero."""
    if input._dtype.is_floating_point:
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, "
            f"Int; but got {input._dtype.name} instead (while checking arguments for embedding)"
        )
    num = weight._shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= num
    idx = input._arr
    if idx.size and (idx.min() < 0 or idx.max() >= num):
        raise IndexError("index out of range in self")
    if max_norm is not None:
        with no_grad():
            rows = np.unique(idx)
            w = weight._arr
            norms = np.linalg.norm(w[rows].astype(np.float64), ord=norm_type, axis=1)
            scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
            w[rows] = (w[rows] * scale[:, None]).astype(w.dtype)
            weight._storage.version += 1
    rows = _EMBEDDING.apply(input, weight, padding_idx)
    if scale_grad_by_freq:
        from .modules.sparse import scale_grad_by_freq as scale  # the module imports this one

        return scale(rows, input)
    return rows


# ----------------------------------------------------------------------------- losses
def _reduction(size_average, reduce, reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _warn_size(input: Tensor, target: Tensor) -> None:
    if target._shape != input._shape:
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
            "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
            "same size.",
            UserWarning,
            stacklevel=3,
        )


def _float_kernel(input: Tensor, target: Tensor, kernel: str) -> tuple[Tensor, Tensor]:
    """torch's pointwise-loss kernels have no integer or bool loop: a non-floating promoted dtype raises. A
    bool operand beside a floating one is taken as that float type (the kernel promotes; the `-` operator
    the composite forms use would refuse a bool)."""
    a, b = input._dtype, target._dtype
    if not (a.is_floating_point or b.is_floating_point):
        E._not_implemented(kernel, D.result_type(input, target))
    if a is D.bool_:
        input = input.to(b)
    elif b is D.bool_:
        target = target.to(a)
    return input, target


def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    _warn_size(input, target)
    input, target = _float_kernel(input, target, "mse_cpu")
    if _amp_state.any:  # autocast: losses are computed in float32
        input, target = autocast_fp32(input, target)
    red = _reduction(size_average, reduce, reduction)
    if weight is None and _fusable_loss(input, target, red):
        return _POINTWISE_LOSS["mse"].apply(input, target, "mse", 0.0, red)
    d = input - target
    loss = d * d
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, red)


def _fusable_loss(input: Tensor, target: Tensor, reduction: str) -> bool:
    """One fused node (named like torch's) for same-dtype floating CPU tensors; else the composite ops."""
    return (reduction in ("mean", "sum", "none") and input._dtype is target._dtype
            and input._dtype.is_floating_point and not input.is_cuda and not target.is_cuda)


def l1_loss(
    input: Tensor,
    target: Tensor,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    _warn_size(input, target)
    loss = (input - target).abs()
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, _reduction(size_average, reduce, reduction))


def smooth_l1_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0
) -> Tensor:
    _warn_size(input, target)
    input, target = _float_kernel(input, target, "smooth_l1_cpu")
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    red = _reduction(size_average, reduce, reduction)
    if beta != 0.0 and _fusable_loss(input, target, red):  # beta 0 is l1_loss, composite in torch too
        return _POINTWISE_LOSS["smooth_l1"].apply(input, target, "smooth_l1", float(beta), red)
    d = (input - target).abs()
    if beta == 0.0:
        return _reduce(d, red)
    loss = E.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, red)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta): smooth_l1 with beta = delta, times delta."""
    _warn_size(input, target)
    input, target = _float_kernel(input, target, "huber_cpu")
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    if weight is None and _fusable_loss(input, target, reduction):
        return _POINTWISE_LOSS["huber"].apply(input, target, "huber", float(delta), reduction)
    d = (input - target).abs()
    loss = E.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _class_last(input: Tensor, target: Tensor):
    """(M, C) scores and (M,) targets from (N, C, d1, ...) / (N, d1, ...) or unbatched (C,) / ()."""
    shape, tshape = input._shape, target._shape
    if len(shape) == 2 and len(tshape) == 1 and shape[0] == tshape[0]:
        return input, target  # (M, C) and (M,): the training case, nothing to check further or reshape
    if input.ndim == 1:
        if target.ndim != 0:
            raise RuntimeError(
                f"Expected target to be 0-D for a 1-D input, got target of size {list(target._shape)}"
            )
        return input.unsqueeze(0), target.reshape(1)
    if input.ndim < 1 or input._shape[0] != (target._shape[0] if target.ndim else -1):
        raise ValueError(
            f"Expected input batch_size ({input._shape[0]}) to match target batch_size "
            f"({target._shape[0] if target.ndim else 0})."
        )
    if tuple(target._shape[1:]) != tuple(input._shape[2:]):
        raise RuntimeError(
            f"Expected target size {[input._shape[0]] + list(input._shape[2:])}, got {list(target._shape)}"
        )
    if len(input._shape) == 2:
        return input, target
    c = input._shape[1]
    return input.movedim(1, -1).reshape(-1, c), target.reshape(-1)


def _check_class_weight(weight: Tensor | None, n_classes: int) -> None:
    if weight is not None and (weight.ndim != 1 or weight.numel() != n_classes):
        raise RuntimeError(
            f"weight tensor should be defined either for all {n_classes} classes or no classes but got "
            f"weight tensor of shape: {list(weight._shape)}"
        )


def _check_class_target(target: Tensor) -> None:
    """Class indices are int64 or uint8, as torch's nll_loss kernels take."""
    if target._dtype is not D.int64 and target._dtype is not D.uint8:
        raise RuntimeError(
            f"expected target dtype to be Long or Byte, but got {D.scalar_type_name(target._dtype)}"
        )


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Class indices: fused log-softmax + NLL node (backward softmax - one-hot); probabilities: composite."""
    red = reduction
    if size_average is not None or reduce is not None:  # the deprecated spellings
        red = _reduction(size_average, reduce, reduction)
    if red not in ("mean", "sum", "none"):
        raise ValueError(f"{red} is not a valid value for reduction")
    if _amp_state.any:  # autocast: losses are computed in float32
        input, target = autocast_fp32(input, target)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    cdim = 0 if len(input._shape) == 1 else 1
    n_classes = input._shape[cdim]
    if weight is not None:
        _check_class_weight(weight, n_classes)
    if target._dtype.is_floating_point:
        if target._shape != input._shape:
            raise RuntimeError(
                f"Expected target of the same shape as input {list(input._shape)} for class "
                f"probabilities, got {list(target._shape)}"
            )
        logp = log_softmax(input, cdim)
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / n_classes
        prod = logp * target
        if weight is not None:
            prod = prod * weight.reshape((n_classes,) + (1,) * (input.ndim - 1 - cdim))
        loss = -prod.sum(cdim)
        if red == "mean":
            return loss.sum() / (input.numel() // n_classes) if input.numel() else loss.sum() * float("nan")
        return _reduce(loss, red)
    if target._dtype is not D.int64:
        _check_class_target(target)
    x, t = _class_last(input, target)
    if x.is_cuda and weight is None and _cuda.takes(x):  # fused kernels, kernels/softmax.cu
        loss = _cuda.cross_entropy(x, t, ignore_index, label_smoothing, red)
        return loss.reshape(target._shape) if red == "none" else loss
    if red == "mean" and weight is None and not label_smoothing and ignore_index == -100 and x is input:
        return _NLL_LOSS_DEFAULT.apply(x, t)  # the training default (2-D scores), recorded with two inputs
    node = _SMOOTHED_NLL_LOSS if label_smoothing else _NLL_LOSS_2D if len(input._shape) >= 3 else _NLL_LOSS
    loss = node.apply(x, t, weight, ignore_index, float(label_smoothing), red)
    return loss.reshape(target._shape) if red == "none" and loss._shape != target._shape else loss


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    red = _reduction(size_average, reduce, reduction)
    _check_class_target(target)
    _check_class_weight(weight, input._shape[0 if input.ndim == 1 else 1])
    x, t = _class_last(input, target)
    c = x._shape[1]
    ta = t._arr
    valid = ta != ignore_index
    tt = np.where(valid, ta, 0).astype(np.int64, copy=False)  # uint8 targets index too
    if tt.size and (tt.min() < 0 or tt.max() >= c):
        raise IndexError(f"Target {tt[(tt < 0) | (tt >= c)][0]} is out of bounds.")
    wy = (weight._arr[tt] if weight is not None else np.ones(tt.shape, x._dtype.np)) * valid
    if red not in ("mean", "sum", "none"):
        raise ValueError(f"{red} is not a valid value for reduction")
    if not x.is_cuda:  # one node named like torch's
        loss = _NLL[input.ndim >= 3].apply(x, tt, valid, wy.astype(x._dtype.np), red)
        return loss.reshape(target._shape) if red == "none" and loss._shape != target._shape else loss
    picked = x.gather(1, _wrap_array(tt.reshape(-1, 1))).reshape(-1)
    loss = picked * _wrap_array(-wy.astype(x._dtype.np))
    if red == "none":
        return loss.reshape(target._shape)
    if red == "sum":
        return loss.sum()
    return loss.sum() / float(wy.sum())


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    if target._shape != input._shape:
        raise ValueError(
            f"Using a target size ({target.shape}) that is different to the input size ({input.shape}) "
            "is deprecated. Please ensure they have the same size."
        )
    if target._dtype is not input._dtype:
        raise RuntimeError(f"Found dtype {D.scalar_type_name(target._dtype)} but expected "
                           f"{D.scalar_type_name(input._dtype)}")
    if not input._dtype.is_floating_point:
        E._not_implemented("binary_cross_entropy", input._dtype)
    red = _reduction(size_average, reduce, reduction)
    if weight is None and red in ("mean", "sum", "none"):
        return _BCE.apply(input, target, red)  # one node, reduction included, as torch's
    loss = _BCE.apply(input, target, "none")
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, red)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    if target._shape != input._shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    red = _reduction(size_average, reduce, reduction)
    if weight is None and red in ("mean", "sum", "none"):
        return _BCE_LOGITS.apply(input, target, pos_weight, red)  # one node, reduction included, as torch's
    loss = _BCE_LOGITS.apply(input, target, pos_weight, "none")
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, red)


def kl_div(
    input: Tensor,
    target: Tensor,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """Pointwise target * (log target - input), input given as log-probabilities."""
    if not (input._dtype.is_floating_point and target._dtype.is_floating_point):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    red = _reduction(size_average, reduce, reduction)
    if red == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support size."
            "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
            "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
            UserWarning,
            stacklevel=2,
        )
    if log_target:
        loss = target.exp() * (target - input)
    else:
        safe = E.where(target > 0, target, 1.0)
        loss = target * safe.log() - target * input
    if red == "batchmean":
        return loss.sum() / (input._shape[0] if input.ndim else 1)
    return _reduce(loss, red)


_ = math


# the rest of torch's activations and their in-place forms (a star import: a named `threshold` would be
# shadowed by softplus's argument of that name)
from ._activations import *  # noqa: E402, F403
from ._activations import _check_dtype  # noqa: E402  (the dtype check of torch's CPU kernels)
from ._ctc import ctc_loss  # noqa: E402, F401

# distances and the margin, embedding and likelihood losses (imported last: they use _reduce from above)
from ._distance_losses import (  # noqa: E402, F401
    cosine_embedding_loss,
    cosine_similarity,
    gaussian_nll_loss,
    hinge_embedding_loss,
    margin_ranking_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    normalize,
    pairwise_distance,
    pdist,
    poisson_nll_loss,
    soft_margin_loss,
    triplet_margin_loss,
    triplet_margin_with_distance_loss,
)

# resampling, extra pooling and extra normalisation live in their own files (imported last: they call back in)
from ._embedding_bag import embedding_bag  # noqa: E402, F401
from ._norm_extra import instance_norm, local_response_norm, rms_norm  # noqa: E402, F401
from ._pool_extra import (  # noqa: E402, F401
    adaptive_avg_pool1d,
    adaptive_max_pool1d,
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d,
    adaptive_max_pool3d_with_indices,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_pool1d_with_indices,
    max_pool2d_with_indices,
    max_pool3d_with_indices,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
)
from ._resample import (  # noqa: E402, F401
    channel_shuffle,
    fold,
    interpolate,
    pixel_shuffle,
    pixel_unshuffle,
    unfold,
    upsample,
    upsample_bilinear,
    upsample_nearest,
)
from ._sampling import affine_grid, grid_sample  # noqa: E402, F401
from ._stochastic import alpha_dropout, feature_alpha_dropout, gumbel_softmax  # noqa: E402, F401
from .functional_seq import scaled_dot_product_attention  # noqa: E402, F401  (attention lives beside the RNNs)
