"""NumPy references for the CUDA kernels in engine/backend/kernels, written for clarity, not speed.

Each function states the math the matching kernel must reproduce, in float64 unless noted.
"""

from __future__ import annotations

import math

import numpy as np

# ---------------------------------------------------------------- activations: y = f(x), dx = dy * f'(.)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def gelu_tanh_inner(x):
    return math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)


# name -> (forward(x), backward(dy, x, y)); the kernel's backward reads y for relu/sigmoid/tanh, x otherwise.
ACTIVATIONS = {
    "relu": (lambda x: np.maximum(x, 0.0), lambda dy, x, y: np.where(y <= 0, 0.0, dy)),
    "leaky_relu": (
        lambda x, s=0.1: np.where(x > 0, x, x * s),
        lambda dy, x, y, s=0.1: np.where(x > 0, dy, dy * s),
    ),
    "gelu": (
        lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
        lambda dy, x, y: (
            dy * (0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))
        ),
    ),
    "gelu_tanh": (
        lambda x: 0.5 * x * (1 + np.tanh(gelu_tanh_inner(x))),
        lambda dy, x, y: (
            dy
            * (
                0.5 * (1 + np.tanh(gelu_tanh_inner(x)))
                + 0.5
                * x
                * (1 - np.tanh(gelu_tanh_inner(x)) ** 2)
                * math.sqrt(2 / math.pi)
                * (1 + 3 * 0.044715 * x * x)
            )
        ),
    ),
    "silu": (lambda x: x * sigmoid(x), lambda dy, x, y: dy * sigmoid(x) * (1 + x * (1 - sigmoid(x)))),
    "sigmoid": (sigmoid, lambda dy, x, y: dy * y * (1 - y)),
    "tanh": (np.tanh, lambda dy, x, y: dy * (1 - y * y)),
}
LEAKY_SLOPE = 0.1

# ---------------------------------------------------------------- softmax family, along the last axis


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax_backward(dy, y):
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))


def log_softmax_backward(dy, y):
    return dy - np.exp(y) * dy.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------- Philox-4x32-10 and dropout
_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
_MASK32 = 0xFFFFFFFF


def philox4x32_10(counter: np.ndarray, key: np.ndarray) -> np.ndarray:
    """counter (..., 4) and key (..., 2) uint32 -> (..., 4) uint32, vectorised over the leading axes."""
    c = [counter[..., j].astype(np.uint64) for j in range(4)]
    k0, k1 = key[..., 0].astype(np.uint64), key[..., 1].astype(np.uint64)
    for _ in range(10):
        p0, p1 = np.uint64(_M0) * c[0], np.uint64(_M1) * c[2]
        c = [
            (p1 >> np.uint64(32)) ^ c[1] ^ k0,
            p1 & np.uint64(_MASK32),
            (p0 >> np.uint64(32)) ^ c[3] ^ k1,
            p0 & np.uint64(_MASK32),
        ]
        k0, k1 = (k0 + np.uint64(_W0)) & np.uint64(_MASK32), (k1 + np.uint64(_W1)) & np.uint64(_MASK32)
    return np.stack(c, axis=-1).astype(np.uint32)


def dropout_uniform(n: int, seed: int, offset: int) -> np.ndarray:
    """The kernel's uniform draws: top 24 bits of Philox word 0 for counter (i, offset), key seed."""
    i = np.arange(n, dtype=np.uint64)
    counter = np.stack(
        [
            i & np.uint64(_MASK32),
            i >> np.uint64(32),
            np.full(n, offset & _MASK32, np.uint64),
            np.full(n, offset >> 32, np.uint64),
        ],
        axis=-1,
    )
    key = np.broadcast_to(np.array([seed & _MASK32, seed >> 32], np.uint64), (n, 2))
    word = philox4x32_10(counter, key)[:, 0]
    return (word >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def dropout_mask(n: int, p: float, seed: int, offset: int) -> np.ndarray:
    return (dropout_uniform(n, seed, offset) >= np.float32(p)).astype(np.uint8)


# ---------------------------------------------------------------- im2col / col2im (layout of F.unfold)


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def im2col(x, kernel, stride, padding, dilation):
    """(N, C, H, W) -> (N, C*KH*KW, OH*OW); out-of-image taps read 0."""
    N, C, H, W = x.shape
    (KH, KW), (SH, SW), (PH, PW), (DH, DW) = kernel, stride, padding, dilation
    OH, OW = conv_output_size(H, KH, SH, PH, DH), conv_output_size(W, KW, SW, PW, DW)
    padded = np.pad(x, ((0, 0), (0, 0), (PH, PH), (PW, PW)))
    cols = np.empty((N, C, KH, KW, OH, OW), x.dtype)
    for ki in range(KH):
        for kj in range(KW):
            cols[:, :, ki, kj] = padded[
                :, :, ki * DH : ki * DH + SH * (OH - 1) + 1 : SH, kj * DW : kj * DW + SW * (OW - 1) + 1 : SW
            ]
    return cols.reshape(N, C * KH * KW, OH * OW)


def col2im(cols, image_shape, kernel, stride, padding, dilation):
    """The adjoint of im2col: every column entry is added back to the pixel it was read from."""
    N, C, H, W = image_shape
    (KH, KW), (SH, SW), (PH, PW), (DH, DW) = kernel, stride, padding, dilation
    OH, OW = conv_output_size(H, KH, SH, PH, DH), conv_output_size(W, KW, SW, PW, DW)
    cols = cols.reshape(N, C, KH, KW, OH, OW)
    padded = np.zeros((N, C, H + 2 * PH, W + 2 * PW), np.float64)
    for ki in range(KH):
        for kj in range(KW):
            padded[
                :, :, ki * DH : ki * DH + SH * (OH - 1) + 1 : SH, kj * DW : kj * DW + SW * (OW - 1) + 1 : SW
            ] += cols[:, :, ki, kj]
    return padded[:, :, PH : PH + H, PW : PW + W]


# ---------------------------------------------------------------- 2-D pooling (PyTorch semantics)


def _window(o, stride, padding, kernel, dilation, size):
    return [t for t in (o * stride - padding + k * dilation for k in range(kernel)) if 0 <= t < size]


def max_pool2d(x, kernel, stride, padding, dilation, out_size):
    """Returns (y, argmax) with argmax the flat h*W + w index of the first maximum in the window."""
    N, C, H, W = x.shape
    OH, OW = out_size
    y, argmax = np.empty((N, C, OH, OW), x.dtype), np.empty((N, C, OH, OW), np.int64)
    for oh in range(OH):
        for ow in range(OW):
            taps = [
                (h, w)
                for h in _window(oh, stride[0], padding[0], kernel[0], dilation[0], H)
                for w in _window(ow, stride[1], padding[1], kernel[1], dilation[1], W)
            ]
            values = np.stack([x[:, :, h, w] for h, w in taps], axis=-1)
            best = values.argmax(axis=-1)
            y[:, :, oh, ow] = np.take_along_axis(values, best[..., None], -1)[..., 0]
            argmax[:, :, oh, ow] = np.array([h * W + w for h, w in taps])[best]
    return y, argmax


def max_pool2d_backward(dy, argmax, input_shape):
    N, C, H, W = input_shape
    dx = np.zeros((N * C, H * W), np.float64)
    rows = np.repeat(np.arange(N * C), dy[0, 0].size)
    np.add.at(dx, (rows, argmax.reshape(-1)), dy.reshape(-1))
    return dx.reshape(input_shape)


def avg_pool_divisor(oh, ow, H, W, kernel, stride, padding, count_include_pad, divisor_override):
    if divisor_override:
        return divisor_override
    h0, w0 = oh * stride[0] - padding[0], ow * stride[1] - padding[1]
    h1, w1 = min(h0 + kernel[0], H + padding[0]), min(w0 + kernel[1], W + padding[1])
    if count_include_pad:
        return (h1 - h0) * (w1 - w0)
    return (min(h1, H) - max(h0, 0)) * (min(w1, W) - max(w0, 0))


def avg_pool2d(x, kernel, stride, padding, out_size, count_include_pad=True, divisor_override=0):
    N, C, H, W = x.shape
    y = np.empty((N, C) + tuple(out_size))
    for oh in range(out_size[0]):
        for ow in range(out_size[1]):
            hs, ws = (
                _window(oh, stride[0], padding[0], kernel[0], 1, H),
                _window(ow, stride[1], padding[1], kernel[1], 1, W),
            )
            divisor = avg_pool_divisor(
                oh, ow, H, W, kernel, stride, padding, count_include_pad, divisor_override
            )
            y[:, :, oh, ow] = x[:, :, hs][:, :, :, ws].sum(axis=(2, 3)) / divisor
    return y


def avg_pool2d_backward(dy, input_shape, kernel, stride, padding, count_include_pad=True, divisor_override=0):
    N, C, H, W = input_shape
    dx = np.zeros(input_shape)
    for oh in range(dy.shape[2]):
        for ow in range(dy.shape[3]):
            hs, ws = (
                _window(oh, stride[0], padding[0], kernel[0], 1, H),
                _window(ow, stride[1], padding[1], kernel[1], 1, W),
            )
            divisor = avg_pool_divisor(
                oh, ow, H, W, kernel, stride, padding, count_include_pad, divisor_override
            )
            for h in hs:
                dx[:, :, h, ws] += (dy[:, :, oh, ow] / divisor)[:, :, None]
    return dx


# ---------------------------------------------------------------- normalisation


def batch_norm_backward(dy, x, weight, eps):
    """Training-mode batch norm over (N, C, S): returns (dx, grad_weight, grad_bias, mean, invstd)."""
    mean = x.mean(axis=(0, 2))
    invstd = 1.0 / np.sqrt(x.var(axis=(0, 2)) + eps)
    xhat = (x - mean[None, :, None]) * invstd[None, :, None]
    grad_bias, grad_weight = dy.sum(axis=(0, 2)), (dy * xhat).sum(axis=(0, 2))
    M = x.shape[0] * x.shape[2]
    dx = (weight * invstd)[None, :, None] * (
        dy - grad_bias[None, :, None] / M - xhat * grad_weight[None, :, None] / M
    )
    return dx, grad_weight, grad_bias, mean, invstd


def layer_norm(x, weight, bias, eps):
    mean = x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    return (x - mean) * rstd * weight + bias, mean[..., 0], rstd[..., 0]


def layer_norm_backward(dy, x, weight, eps):
    """Returns (dx, grad_weight, grad_bias) over the last axis of a 2-D x."""
    _, mean, rstd = layer_norm(x, weight, 0.0, eps)
    xhat = (x - mean[:, None]) * rstd[:, None]
    g = dy * weight
    dx = rstd[:, None] * (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    return dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)
