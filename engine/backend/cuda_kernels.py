"""Python launchers for the fused CUDA kernels in kernels/*.cu, taking and returning CuPy arrays.

Each .cu file is compiled once, lazily, with `cupy.RawModule(options=nvrtc.compile_options())`. Launchers
allocate outputs with the inputs' array module, so tests run them on NumPy arrays through the CPU
emulator (`use_module_loader`) and check marshalling against the parsed kernel signatures."""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .. import dtypes as D
from . import nvrtc

BLOCK = 256
MAX_GRID = 65535 * 4  # grid-stride loops cover the rest; more blocks only add scheduling cost

_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
_modules: dict[str, object] = {}


# ----------------------------------------------------------------------------- module registry
def _compile_with_cupy(filename: str):
    """A cupy.RawModule for one kernel file, compiled by NVRTC with the options CI checks."""
    from . import cupy_backend

    cp = cupy_backend.require().xp
    source = (nvrtc.KERNEL_DIR / filename).read_text()
    return cp.RawModule(code=source, options=module_options())


def module_options() -> tuple[str, ...]:
    """NVRTC options for RawModule: ours minus -arch (CuPy picks the running GPU's architecture)."""
    return tuple(o for o in nvrtc.compile_options() if not o.startswith("-arch="))


_loader: Callable[[str], object] = _compile_with_cupy


def use_module_loader(loader: Callable[[str], object] | None) -> None:
    """Swap how kernel files become modules (None restores CuPy). A module needs `get_function(name)`
    returning `fn(grid, block, args)`, as cupy.RawModule does; tests plug in the CPU emulator."""
    global _loader
    _loader = loader or _compile_with_cupy
    _modules.clear()
    _functions.clear()


def module(filename: str):
    mod = _modules.get(filename)
    if mod is None:
        mod = _modules[filename] = _loader(filename)
    return mod


_functions: dict[tuple[str, str, int], object] = {}  # (file, kernel, GPU) -> launchable function


def _function(filename: str, kernel: str):
    """The kernel's launchable function, looked up once per GPU (a lookup per launch costs host time on
    every step: the CNN step launches ~20 kernels)."""
    from . import cupy_backend

    gpu = cupy_backend._cp.cuda.runtime.getDevice() if cupy_backend._cp is not None else -1
    key = (filename, kernel, gpu)
    fn = _functions.get(key)
    if fn is None:
        fn = _functions[key] = module(filename).get_function(kernel)
    return fn


def _launch(filename: str, kernel: str, n_threads: int, args: tuple) -> None:
    if n_threads <= 0:
        return
    grid = min(MAX_GRID, math.ceil(n_threads / BLOCK))
    _function(filename, kernel)((grid,), (BLOCK,), args)


def _launch_rows(filename: str, kernel: str, rows: int, cols: int, args: tuple) -> None:
    """A block per row (blocks stride over the rows) for the kernels that reduce a row in a block: as many
    threads as the row has elements, in whole warps, up to BLOCK (10 classes get one warp, not 256 threads
    of which 246 idle)."""
    if rows <= 0:
        return
    threads = 32
    while threads < cols and threads < BLOCK:
        threads *= 2
    _function(filename, kernel)((min(MAX_GRID, rows),), (min(threads, BLOCK),), args)


# ----------------------------------------------------------------------------- which tensors the kernels take
def takes(x, *others, f16: bool = True) -> bool:
    """Whether the kernels can take tensor x and `others` (weight, bias...; None for absent ones): float32,
    or float16 where the kernel has an _f16 variant. The caller has checked x.is_cuda; other dtypes run the
    NumPy/CuPy implementation. Tensors on two devices raise PyTorch's error."""
    for t in others:
        if t is not None and t._storage.device != x._storage.device:
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two "
                               f"devices, {x.device} and {t.device}!")
    ok = (D.float32, D.float16) if f16 else (D.float32,)
    return all(t is None or t._dtype in ok for t in (x,) + others)


# ----------------------------------------------------------------------------- helpers
def _xp(a):
    if isinstance(a, np.ndarray):
        return np
    from . import cupy_backend

    return cupy_backend.require().xp


def _suffix(a, what: str, f16: bool = True) -> str:
    s = _SUFFIX.get(np.dtype(a.dtype))
    if s is None or (s == "f16" and not f16):
        allowed = "float32 or float16" if f16 else "float32"
        raise TypeError(f"{what}: the CUDA kernel takes {allowed}, got {a.dtype}")
    return s


def _c(a):
    return _xp(a).ascontiguousarray(a)


def _i64(v) -> np.int64:
    return np.int64(v)


def _f32(v) -> np.float32:
    return np.float32(v)


def _flag(v) -> np.int32:
    return np.int32(1 if v else 0)


def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if np.isscalar(v) else (int(v[0]), int(v[1]))


# ----------------------------------------------------------------------------- activations
ACTIVATIONS = ("relu", "leaky_relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh")
# the backward reads the output for these (as PyTorch saves it), the input for the others
BACKWARD_READS_OUTPUT = ("relu", "sigmoid", "tanh")


def activation_forward(op: str, x, negative_slope: float = 0.01):
    """y = f(x), one pass. op in ACTIVATIONS."""
    x = _c(x)
    y = _xp(x).empty_like(x)
    args = (x, y, _i64(x.size)) + ((_f32(negative_slope),) if op == "leaky_relu" else ())
    _launch("activations.cu", f"{op}_forward_{_suffix(x, op)}", x.size, args)
    return y


def activation_backward(op: str, dy, saved, negative_slope: float = 0.01):
    """dx = dy * f'(.) in one pass; `saved` is y for BACKWARD_READS_OUTPUT, x otherwise."""
    dy, saved = _c(dy), _c(saved)
    dx = _xp(dy).empty_like(dy)
    args = (dy, saved, dx, _i64(dy.size)) + ((_f32(negative_slope),) if op == "leaky_relu" else ())
    _launch("activations.cu", f"{op}_backward_{_suffix(dy, op)}", dy.size, args)
    return dx


def relu_forward(x):
    return activation_forward("relu", x)


def relu_backward(dy, y):
    return activation_backward("relu", dy, y)


# ----------------------------------------------------------------------------- softmax family
def _rows_last(x, dim: int):
    """x with `dim` moved last, contiguous, and (rows, cols)."""
    xp = _xp(x)
    moved = xp.ascontiguousarray(xp.moveaxis(x, dim, -1))
    cols = moved.shape[-1]
    return moved, moved.size // max(cols, 1), cols


def softmax(x, dim: int = -1, log: bool = False):
    """softmax (or log_softmax) along `dim`; max, log-sum-exp and normalisation in one pass per row."""
    xp = _xp(x)
    moved, rows, cols = _rows_last(x, dim)
    y = xp.empty_like(moved)
    name = "log_softmax" if log else "softmax"
    _launch_rows("softmax.cu", f"{name}_forward_{_suffix(x, name)}", rows, cols,
                 (moved, y, _i64(rows), _i64(cols)))
    return xp.moveaxis(y, -1, dim)


def softmax_backward(dy, y, dim: int = -1, log: bool = False):
    """Gradient of softmax/log_softmax from its output y: y*(dy - Σdy·y) or dy - e^y·Σdy, per row."""
    xp = _xp(dy)
    mdy, rows, cols = _rows_last(dy, dim)
    my, _, _ = _rows_last(y, dim)
    dx = xp.empty_like(mdy)
    name = "log_softmax" if log else "softmax"
    _launch_rows("softmax.cu", f"{name}_backward_{_suffix(dy, name)}", rows, cols,
                 (mdy, my, dx, _i64(rows), _i64(cols)))
    return xp.moveaxis(dx, -1, dim)


def cross_entropy(logits, targets, ignore_index: int = -100, label_smoothing: float = 0.0):
    """Per-row loss (float32) of logits (rows, classes) and int64 class targets: log-softmax, NLL and label
    smoothing fused; ignored rows give 0 (the caller's mean divides by the other rows' count)."""
    xp = _xp(logits)
    logits, targets = _c(logits), xp.ascontiguousarray(targets, dtype=np.int64)
    rows, classes = logits.shape
    loss = xp.empty((rows,), np.float32)
    _launch_rows("softmax.cu", f"cross_entropy_forward_{_suffix(logits, 'cross_entropy')}", rows, classes,
                 (logits, targets, loss, _i64(rows), _i64(classes), _i64(ignore_index),
                  _f32(label_smoothing)))
    return loss


def cross_entropy_backward(logits, targets, grad_loss, ignore_index: int = -100,
                           label_smoothing: float = 0.0):
    """grad_logits = grad_loss[r] * (softmax - (1-ε)·onehot - ε/C), 0 on ignored rows; grad_loss per row."""
    xp = _xp(logits)
    logits, targets = _c(logits), xp.ascontiguousarray(targets, dtype=np.int64)
    rows, classes = logits.shape
    grad_loss = xp.ascontiguousarray(xp.broadcast_to(xp.asarray(grad_loss, dtype=np.float32), (rows,)))
    grad = xp.empty_like(logits)
    _launch_rows("softmax.cu", f"cross_entropy_backward_{_suffix(logits, 'cross_entropy')}", rows, classes,
                 (logits, targets, grad_loss, grad, _i64(rows), _i64(classes), _i64(ignore_index),
                  _f32(label_smoothing)))
    return grad


# ----------------------------------------------------------------------------- dropout
def dropout(x, p: float, seed: int, offset: int):
    """(y, mask): element i kept when Philox(counter (i, offset), key seed) >= p, scaled by 1/(1-p).
    The mask (uint8) depends only on (seed, offset, i), so a saved (seed, offset) reproduces it."""
    x = _c(x)
    xp = _xp(x)
    y = xp.empty_like(x)
    mask = xp.empty(x.shape, np.uint8)
    _launch("dropout.cu", f"dropout_forward_{_suffix(x, 'dropout')}", x.size,
            (x, y, mask, _i64(x.size), _f32(p), np.uint64(seed), np.uint64(offset)))
    return y, mask


def dropout_backward(dy, mask, p: float):
    dy = _c(dy)
    dx = _xp(dy).empty_like(dy)
    _launch("dropout.cu", f"dropout_backward_{_suffix(dy, 'dropout')}", dy.size,
            (dy, _c(mask), dx, _i64(dy.size), _f32(p)))
    return dx


def philox_uint32(n: int, seed: int, offset: int, xp=None):
    """n random uint32 words: Philox-4x32-10 blocks j = 0, 1, ... of counter (j, offset), key seed, 4 words
    each. Word 0 of block j is the word dropout draws for element j, so both share one verified generator."""
    xp = xp or _xp(None)
    m = max(1, -(-n // 4))
    j = xp.arange(m, dtype=np.uint64)
    ctr = xp.empty((m, 4), np.uint32)
    ctr[:, 0] = (j & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    ctr[:, 1] = (j >> np.uint64(32)).astype(np.uint32)
    ctr[:, 2] = np.uint32(offset & 0xFFFFFFFF)
    ctr[:, 3] = np.uint32((offset >> 32) & 0xFFFFFFFF)
    key = xp.empty((m, 2), np.uint32)
    key[:, 0] = np.uint32(seed & 0xFFFFFFFF)
    key[:, 1] = np.uint32((seed >> 32) & 0xFFFFFFFF)
    out = xp.empty((m, 4), np.uint32)
    _launch("dropout.cu", "philox4x32_10_blocks", m, (ctr, key, out, _i64(m)))
    return out.reshape(-1)[:n]


# ----------------------------------------------------------------------------- im2col / col2im
def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _geometry(kernel_size, stride, padding, dilation) -> tuple[int, ...]:
    (kh, kw), (sh, sw) = _pair(kernel_size), _pair(stride)
    (ph, pw), (dh, dw) = _pair(padding), _pair(dilation)
    return kh, kw, sh, sw, ph, pw, dh, dw


def _column_shape(n, c, kh, kw, oh, ow, channel_major: bool) -> tuple[int, int, int]:
    return (c * kh * kw, n, oh * ow) if channel_major else (n, c * kh * kw, oh * ow)


def _kernel_name(op: str, a, channel_major: bool) -> str:
    return f"{op}_{'kn_' if channel_major else ''}{_suffix(a, op)}"


def im2col(x, kernel_size, stride=1, padding=0, dilation=1, channel_major=False):
    """(N, C, H, W) -> (N, C*KH*KW, OH*OW) in F.unfold's layout; out-of-image taps read 0. channel_major:
    (C*KH*KW, N, OH*OW) instead, whose (C*KH*KW, N*OH*OW) view is an ungrouped conv's single GEMM operand."""
    x = _c(x)
    n, c, h, w = x.shape
    kh, kw, sh, sw, ph, pw, dh, dw = _geometry(kernel_size, stride, padding, dilation)
    oh, ow = conv_output_size(h, kh, sh, ph, dh), conv_output_size(w, kw, sw, pw, dw)
    cols = _xp(x).empty(_column_shape(n, c, kh, kw, oh, ow, channel_major), x.dtype)
    _launch("im2col.cu", _kernel_name("im2col", x, channel_major), cols.size,
            (x, cols) + tuple(_i64(v) for v in (n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)))
    return cols


def col2im(cols, input_shape, kernel_size, stride=1, padding=0, dilation=1, channel_major=False):
    """The adjoint of im2col (F.fold): sums each column entry back into its image pixel, deterministically.
    `cols` is in im2col's layout for the same `channel_major`."""
    cols = _c(cols)
    n, c, h, w = (int(v) for v in input_shape)
    kh, kw, sh, sw, ph, pw, dh, dw = _geometry(kernel_size, stride, padding, dilation)
    oh, ow = conv_output_size(h, kh, sh, ph, dh), conv_output_size(w, kw, sw, pw, dw)
    expected = _column_shape(n, c, kh, kw, oh, ow, channel_major)
    if cols.shape != expected:
        raise ValueError(f"col2im: columns of shape {tuple(cols.shape)} do not match an input of shape "
                         f"{(n, c, h, w)}, expected {expected}")
    image = _xp(cols).empty((n, c, h, w), cols.dtype)
    _launch("im2col.cu", _kernel_name("col2im", cols, channel_major), image.size,
            (cols, image) + tuple(_i64(v) for v in (n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)))
    return image


# ----------------------------------------------------------------------------- pooling
def pool_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int,
                     ceil_mode: bool) -> int:
    """PyTorch's pooling output size: with ceil_mode, the last window must start inside the padded input."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def _pool_geometry(x_shape, kernel_size, stride, padding, dilation, ceil_mode):
    n, c, h, w = x_shape
    kh, kw, sh, sw, ph, pw, dh, dw = _geometry(kernel_size, stride or kernel_size, padding, dilation)
    oh = pool_output_size(h, kh, sh, ph, dh, ceil_mode)
    ow = pool_output_size(w, kw, sw, pw, dw, ceil_mode)
    return n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False):
    """(y, argmax) of (N, C, H, W) float32 or float16; argmax = h*W + w in its plane, as return_indices."""
    x = _c(x)
    g = _pool_geometry(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    n, c, oh, ow = g[0], g[1], g[-2], g[-1]
    xp = _xp(x)
    y = xp.empty((n, c, oh, ow), x.dtype)
    argmax = xp.empty((n, c, oh, ow), np.int64)
    _launch("pool.cu", f"max_pool2d_forward_{_suffix(x, 'max_pool2d')}", y.size,
            (x, y, argmax) + tuple(_i64(v) for v in g))
    return y, argmax


def max_pool2d_backward(dy, argmax, input_shape, kernel_size, stride=None, padding=0, dilation=1,
                        ceil_mode: bool = False):
    dy = _c(dy)
    g = _pool_geometry(tuple(input_shape), kernel_size, stride, padding, dilation, ceil_mode)
    dx = _xp(dy).empty(tuple(input_shape), dy.dtype)
    _launch("pool.cu", f"max_pool2d_backward_{_suffix(dy, 'max_pool2d')}", dx.size,
            (dy, _c(argmax), dx) + tuple(_i64(v) for v in g))
    return dx


def _avg_args(g, count_include_pad, divisor_override):
    n, c, h, w, kh, kw, sh, sw, ph, pw, _dh, _dw, oh, ow = g
    return tuple(_i64(v) for v in (n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow)) + (
        _flag(count_include_pad), _i64(divisor_override or 0))


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None):
    x = _c(x)
    g = _pool_geometry(x.shape, kernel_size, stride, padding, 1, ceil_mode)
    y = _xp(x).empty((g[0], g[1], g[-2], g[-1]), x.dtype)
    _launch("pool.cu", f"avg_pool2d_forward_{_suffix(x, 'avg_pool2d')}", y.size,
            (x, y) + _avg_args(g, count_include_pad, divisor_override))
    return y


def avg_pool2d_backward(dy, input_shape, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                        count_include_pad: bool = True, divisor_override: int | None = None):
    dy = _c(dy)
    g = _pool_geometry(tuple(input_shape), kernel_size, stride, padding, 1, ceil_mode)
    dx = _xp(dy).empty(tuple(input_shape), dy.dtype)
    _launch("pool.cu", f"avg_pool2d_backward_{_suffix(dy, 'avg_pool2d')}", dx.size,
            (dy, dx) + _avg_args(g, count_include_pad, divisor_override))
    return dx


# ----------------------------------------------------------------------------- normalisation
def batch_norm_backward(dy, x, mean, invstd, weight=None, training: bool = True):
    """(dx, grad_weight, grad_bias) of batch norm over x (N, C, *) float32: per-channel Σdy and Σdy·x̂, then
    dx in one elementwise pass. Eval mode (running statistics) gives dx = dy·weight·invstd."""
    dy, x = _c(dy), _c(x)
    _suffix(x, "batch_norm", f16=False)
    xp = _xp(x)
    n, c = x.shape[0], x.shape[1]
    s = x.size // max(n * c, 1)
    mean, invstd = _c(mean.astype(np.float32, copy=False)), _c(invstd.astype(np.float32, copy=False))
    weight = None if weight is None else _c(weight)
    gw, gb = xp.empty((c,), np.float32), xp.empty((c,), np.float32)
    dims = (_i64(n), _i64(c), _i64(s))
    _launch_rows("norm.cu", "batch_norm_backward_reduce_f32", c, n * s, (dy, x, mean, invstd, gw, gb) + dims)
    dx = xp.empty_like(x)
    _launch("norm.cu", "batch_norm_backward_elemt_f32", x.size,
            (dy, x, mean, invstd, weight, gw, gb, dx) + dims + (_flag(training),))
    return dx, gw, gb


def layer_norm_forward(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """(y, mean, rstd) over the trailing `normalized_shape` dims of float32 x; mean/rstd have one per row."""
    x = _c(x)
    _suffix(x, "layer_norm", f16=False)
    xp = _xp(x)
    cols = int(np.prod(normalized_shape, dtype=np.int64))
    rows = x.size // max(cols, 1)
    y = xp.empty_like(x)
    mean, rstd = xp.empty((rows,), np.float32), xp.empty((rows,), np.float32)
    _launch_rows("norm.cu", "layer_norm_forward_f32", rows, cols,
            (x, None if weight is None else _c(weight), None if bias is None else _c(bias), y, mean, rstd,
             _i64(rows), _i64(cols), _f32(eps)))
    return y, mean, rstd


def layer_norm_backward(dy, x, mean, rstd, weight=None):
    """(dx, grad_weight, grad_bias) of layer norm; a block per row for dx, a thread per column for the
    parameters."""
    dy, x = _c(dy), _c(x)
    xp = _xp(x)
    rows = mean.size
    cols = x.size // max(rows, 1)
    mean, rstd = _c(mean), _c(rstd)
    dx = xp.empty_like(x)
    _launch_rows("norm.cu", "layer_norm_backward_f32", rows, cols,
            (dy, x, mean, rstd, None if weight is None else _c(weight), dx, _i64(rows), _i64(cols)))
    gw, gb = xp.empty((cols,), np.float32), xp.empty((cols,), np.float32)
    _launch("norm.cu", "layer_norm_backward_params_f32", cols,
            (dy, x, mean, rstd, gw, gb, _i64(rows), _i64(cols)))
    return dx, gw, gb


# ----------------------------------------------------------------------------- fused optimiser updates
# Each updates param (float32 or float16, contiguous) and its float32 state buffers in place.
def _check_param(param, grad, what: str) -> str:
    if not param.flags.c_contiguous:
        raise ValueError(f"{what}: the fused update writes the parameter in place and needs it contiguous")
    if grad.shape != param.shape or grad.dtype != param.dtype:
        raise ValueError(f"{what}: grad {grad.dtype}{list(grad.shape)} does not match the parameter "
                         f"{param.dtype}{list(param.shape)}")
    return _suffix(param, what)


def sgd_step(param, grad, momentum_buffer, *, lr: float, momentum: float = 0.0, dampening: float = 0.0,
             weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False,
             first_step: bool = False):
    """torch.optim.SGD's update in one pass; momentum_buffer (float32) may be None when momentum == 0."""
    sfx = _check_param(param, grad, "sgd_step")
    _launch("optim.cu", f"sgd_step_{sfx}", param.size,
            (param, _c(grad), momentum_buffer, _i64(param.size), _f32(lr), _f32(momentum), _f32(dampening),
             _f32(weight_decay), _flag(nesterov), _flag(maximize), _flag(first_step)))


def adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, *, step: int, lr: float, beta1: float = 0.9,
              beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False,
              decoupled_weight_decay: bool = False, maximize: bool = False):
    """torch.optim.Adam (AdamW: decoupled_weight_decay) fused; `step` counts from 1, this one included."""
    sfx = _check_param(param, grad, "adam_step")
    _launch("optim.cu", f"adam_step_{sfx}", param.size,
            (param, _c(grad), exp_avg, exp_avg_sq, max_exp_avg_sq, _i64(param.size), _f32(lr), _f32(beta1),
             _f32(beta2), _f32(eps), _f32(weight_decay), _i64(step), _flag(amsgrad),
             _flag(decoupled_weight_decay), _flag(maximize)))


def rmsprop_step(param, grad, square_avg, grad_avg, momentum_buffer, *, lr: float, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 maximize: bool = False):
    """torch.optim.RMSprop in one pass; grad_avg only if centered, momentum_buffer only if momentum > 0."""
    sfx = _check_param(param, grad, "rmsprop_step")
    _launch("optim.cu", f"rmsprop_step_{sfx}", param.size,
            (param, _c(grad), square_avg, grad_avg, momentum_buffer, _i64(param.size), _f32(lr), _f32(alpha),
             _f32(eps), _f32(weight_decay), _f32(momentum), _flag(centered), _flag(maximize)))
