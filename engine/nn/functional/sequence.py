"""Functional forms of the sequence layers: fused recurrences (one graph node per layer and direction)
and scaled dot-product attention. Re-exported by engine.nn.functional."""

from __future__ import annotations

import math

import numpy as np

from ...autograd.function import Function
from ...autograd.grad_mode import state
from ...ops.creation import ones
from ...ops.elementwise import _relu_np, relu, sigmoid, tanh
from ...ops.shape import stack
from ...tensor import Tensor

__all__ = ["rnn_tanh_layer", "rnn_relu_layer", "lstm_layer", "gru_layer", "scaled_dot_product_attention"]


# ----------------------------------------------------------------------------- recurrences
# A layer's input projection xg = x @ W_ih^T + bias (all time steps, one matmul) is computed by the
# caller with ordinary ops; the fused ops below run only the recurrent part. Their forward and
# backward are NumPy loops over time (a handful of ufuncs per step instead of ~15 graph nodes).
# Under create_graph the backward instead differentiates a Tensor-op replay of the same recurrence,
# so double backward stays exact.


def _sigmoid_(a: np.ndarray) -> np.ndarray:
    """In-place logistic sigmoid via tanh: no overflow for large |a|."""
    np.multiply(a, 0.5, out=a)
    np.tanh(a, out=a)
    np.multiply(a, 0.5, out=a)
    np.add(a, 0.5, out=a)
    return a


def _time_order(T: int, reverse: bool) -> range:
    return range(T - 1, -1, -1) if reverse else range(T)


def _start(xg, w_hh, h0):
    """A fused forward's arrays: the input projections X (T, B, G), W_hh^T made contiguous (matmul(out=) is
    slow on transposed operands) and the hidden states hs (T + 1, B, H) in processing order, hs[0] = h0."""
    X = xg._arr
    hs = np.empty((X.shape[0] + 1,) + h0._arr.shape, X.dtype)
    hs[0] = h0._arr
    return X, np.ascontiguousarray(w_hh._arr.T), hs


def _replay_grads(ctx, reference, grads):
    """Gradients of a Tensor-op replay of the recurrence, recorded for double backward."""
    from ...autograd import grad as autograd_grad

    inputs = ctx.saved_tensors
    outs = reference(*inputs, ctx.reverse)
    want = [i for i, t in enumerate(inputs) if t is not None and ctx.needs_input_grad[i]]
    got = autograd_grad(outs, [inputs[i] for i in want], grads, create_graph=True, allow_unused=True)
    result = [None] * (len(inputs) + 1)  # + the non-tensor `reverse` argument
    for i, g in zip(want, got):
        result[i] = g
    return tuple(result)


def _lstm_reference(xg, w_hh, h, c, reverse, w_hr=None):
    """The LSTM recurrence in Tensor ops; w_hr (proj_size, H) projects each h (PyTorch's proj_size)."""
    wt = w_hh.t()
    outs = [None] * xg.shape[0]
    for t in _time_order(xg.shape[0], reverse):
        i, f, g, o = (xg[t] + h @ wt).chunk(4, 1)
        c = sigmoid(f) * c + sigmoid(i) * tanh(g)
        h = sigmoid(o) * tanh(c)
        if w_hr is not None:
            h = h @ w_hr.t()
        outs[t] = h
    return stack(outs), h, c


class _LSTMLayer(Function):
    """LSTM recurrence over time, gates ordered i, f, g, o (PyTorch's)."""

    _raw = True

    @staticmethod
    def forward(ctx, xg, w_hh, h0, c0, reverse):
        X, W, hs = _start(xg, w_hh, h0)
        (T, B, H4), H, dt = X.shape, hs.shape[2], X.dtype
        cs = np.empty((T + 1, B, H), dt)
        tcs = np.empty((T, B, H), dt)  # tanh(c)
        gates = np.empty((T, B, H4), dt)  # activated i, f, g, o
        cs[0] = c0._arr
        # sigmoid(a) = 0.5 * tanh(a / 2) + 0.5: one tanh activates all four gates (g keeps plain tanh)
        half = np.full(H4, 0.5, dt)
        half[2 * H : 3 * H] = 1
        shift = np.full(H4, 0.5, dt)
        shift[2 * H : 3 * H] = 0
        ig = np.empty((B, H), dt)
        for k, t in enumerate(_time_order(T, reverse)):
            g = gates[k]
            np.matmul(hs[k], W, out=g)
            g += X[t]
            g *= half
            np.tanh(g, out=g)
            g *= half
            g += shift
            np.multiply(g[:, H : 2 * H], cs[k], out=cs[k + 1])
            np.multiply(g[:, :H], g[:, 2 * H : 3 * H], out=ig)
            cs[k + 1] += ig
            np.tanh(cs[k + 1], out=tcs[k])
            np.multiply(g[:, 3 * H :], tcs[k], out=hs[k + 1])
        ctx.save_for_backward(xg, w_hh, h0, c0)
        ctx.reverse = reverse
        ctx.hs, ctx.cs, ctx.tcs, ctx.gates = hs, cs, tcs, gates
        # copies: the outputs must not alias the states backward reads
        out = hs[:0:-1] if reverse else hs[1:].copy()
        return out, hs[T].copy(), cs[T].copy()

    @staticmethod
    def backward(ctx, g_out, g_hn, g_cn):
        if state.grad_enabled:
            return _replay_grads(ctx, _lstm_reference, (g_out, g_hn, g_cn))
        _, w_hh, _, _ = ctx.saved_tensors
        W = w_hh._arr
        hs, cs, tcs, gates = ctx.hs, ctx.cs, ctx.tcs, ctx.gates
        T, B, H = tcs.shape
        G_out = g_out._arr
        dh = np.array(g_hn._arr, copy=True)
        dc = np.array(g_cn._arr, copy=True)
        # Everything that does not depend on the incoming gradient, for all steps at once: per step, dc
        # (for i, f, g) or dh (for o) times M gives the pre-activation gate gradients.
        i, f, g, o = (gates[..., j * H : (j + 1) * H] for j in range(4))
        M = np.empty_like(gates)
        np.multiply(g, i * (1 - i), out=M[..., :H])
        np.multiply(cs[:-1], f * (1 - f), out=M[..., H : 2 * H])
        np.multiply(i, 1 - g * g, out=M[..., 2 * H : 3 * H])
        np.multiply(tcs, o * (1 - o), out=M[..., 3 * H :])
        P = o * (1 - tcs * tcs)  # d c_t / d h_t through h = o * tanh(c)
        M3 = M.reshape(T, B, 4, H)[:, :, :3]  # views: the i, f, g blocks side by side
        dG = np.empty_like(gates)  # pre-activation gate gradients, processing order
        dG3 = dG.reshape(T, B, 4, H)[:, :, :3]
        tmp = np.empty((B, H), gates.dtype)
        order = list(_time_order(T, ctx.reverse))
        for k in range(T - 1, -1, -1):
            dh += G_out[order[k]]
            np.multiply(dh, P[k], out=tmp)
            dc += tmp
            np.multiply(dc[:, None, :], M3[k], out=dG3[k])
            np.multiply(dh, M[k, :, 3 * H :], out=dG[k, :, 3 * H :])
            dc *= f[k]
            dh = dG[k] @ W
        dW = dG.reshape(T * B, 4 * H).T @ hs[:-1].reshape(T * B, H)
        dxg = dG[::-1] if ctx.reverse else dG
        return _t(dxg), _t(dW), _t(dh), _t(dc), None


def _gru_reference(xg, w_hh, b_hh, h, reverse):
    wt = w_hh.t()
    outs = [None] * xg.shape[0]
    for t in _time_order(xg.shape[0], reverse):
        xr, xz, xn = xg[t].chunk(3, 1)
        hh = h @ wt
        if b_hh is not None:
            hh = hh + b_hh
        hr, hz, hn = hh.chunk(3, 1)
        r, z = sigmoid(xr + hr), sigmoid(xz + hz)
        n = tanh(xn + r * hn)
        h = n + z * (h - n)
        outs[t] = h
    return stack(outs), h


class _GRULayer(Function):
    """GRU recurrence, gates r, z, n with PyTorch's n = tanh(W_in x + b_in + r * (W_hn h + b_hn))."""

    _raw = True

    @staticmethod
    def forward(ctx, xg, w_hh, b_hh, h0, reverse):
        X, W, hs = _start(xg, w_hh, h0)
        (T, B, H3), H, dt = X.shape, hs.shape[2], X.dtype
        acts = np.empty((T, B, H3), dt)  # activated r, z, n
        hns = np.empty((T, B, H), dt)  # W_hn h + b_hn, needed for dr
        hh = np.empty((B, H3), dt)
        for k, t in enumerate(_time_order(T, reverse)):
            np.matmul(hs[k], W, out=hh)
            if b_hh is not None:
                hh += b_hh._arr
            a = acts[k]
            np.add(X[t, :, : 2 * H], hh[:, : 2 * H], out=a[:, : 2 * H])
            _sigmoid_(a[:, : 2 * H])
            hns[k] = hh[:, 2 * H :]
            n = a[:, 2 * H :]
            np.multiply(a[:, :H], hh[:, 2 * H :], out=n)
            n += X[t, :, 2 * H :]
            np.tanh(n, out=n)
            np.subtract(hs[k], n, out=hs[k + 1])
            hs[k + 1] *= a[:, H : 2 * H]
            hs[k + 1] += n
        ctx.save_for_backward(xg, w_hh, b_hh, h0)
        ctx.reverse = reverse
        ctx.hs, ctx.acts, ctx.hns = hs, acts, hns
        out = hs[:0:-1] if reverse else hs[1:].copy()  # reversed slice is copied by the wrapper
        return out, hs[T].copy()

    @staticmethod
    def backward(ctx, g_out, g_hn):
        if state.grad_enabled:
            return _replay_grads(ctx, _gru_reference, (g_out, g_hn))
        _, w_hh, b_hh, _ = ctx.saved_tensors
        W = w_hh._arr
        hs, acts, hns = ctx.hs, ctx.acts, ctx.hns
        T, B, H = hns.shape
        G_out = g_out._arr
        dh = np.array(g_hn._arr, copy=True)
        # step-independent factors for all steps at once (see the LSTM backward)
        r, z, n = acts[..., :H], acts[..., H : 2 * H], acts[..., 2 * H :]
        A = (1 - z) * (1 - n * n)  # dh -> pre-activation of n
        Br = hns * r * (1 - r)  # that -> pre-activation of r
        Bz = (hs[:-1] - n) * z * (1 - z)  # dh -> pre-activation of z
        dX = np.empty_like(acts)  # grads of xg, processing order
        dHH = np.empty_like(acts)  # grads of h @ W_hh^T + b_hh, processing order
        order = list(_time_order(T, ctx.reverse))
        for k in range(T - 1, -1, -1):
            dh += G_out[order[k]]
            dn = dX[k, :, 2 * H :]
            np.multiply(dh, A[k], out=dn)
            np.multiply(dn, Br[k], out=dX[k, :, :H])
            np.multiply(dh, Bz[k], out=dX[k, :, H : 2 * H])
            dHH[k, :, : 2 * H] = dX[k, :, : 2 * H]
            np.multiply(dn, r[k], out=dHH[k, :, 2 * H :])
            dh = dh * z[k] + dHH[k] @ W
        flat = dHH.reshape(T * B, 3 * H)
        dW = flat.T @ hs[:-1].reshape(T * B, H)
        db = flat.sum(0) if b_hh is not None else None
        dxg = dX[::-1] if ctx.reverse else dX
        return _t(dxg), _t(dW), _t(db), _t(dh), None


def _rnn_reference(xg, w_hh, h, relu_, reverse):
    wt = w_hh.t()
    act = relu if relu_ else tanh
    outs = [None] * xg.shape[0]
    for t in _time_order(xg.shape[0], reverse):
        h = act(xg[t] + h @ wt)
        outs[t] = h
    return stack(outs), h


class _RNNLayer(Function):
    """Elman recurrence h' = act(xg_t + W_hh h), act tanh or relu."""

    _raw = True

    @staticmethod
    def forward(ctx, xg, w_hh, h0, relu_, reverse):
        X, W, hs = _start(xg, w_hh, h0)
        T = X.shape[0]
        for k, t in enumerate(_time_order(T, reverse)):
            h = hs[k + 1]
            np.matmul(hs[k], W, out=h)
            h += X[t]
            if relu_:
                _relu_np(h, out=h)
            else:
                np.tanh(h, out=h)
        ctx.save_for_backward(xg, w_hh, h0)
        ctx.reverse, ctx.relu, ctx.hs = reverse, relu_, hs
        out = hs[:0:-1] if reverse else hs[1:].copy()  # reversed slice is copied by the wrapper
        return out, hs[T].copy()

    @staticmethod
    def backward(ctx, g_out, g_hn):
        if state.grad_enabled:
            replay = lambda x, w, h, rev: _rnn_reference(x, w, h, ctx.relu, rev)
            grads = _replay_grads(ctx, replay, (g_out, g_hn))
            return grads[:3] + (None, None)
        _, w_hh, _ = ctx.saved_tensors
        W, hs = w_hh._arr, ctx.hs
        T = hs.shape[0] - 1
        G_out = g_out._arr
        dh = np.array(g_hn._arr, copy=True)
        dA = np.empty((T,) + hs.shape[1:], hs.dtype)
        order = list(_time_order(T, ctx.reverse))
        for k in range(T - 1, -1, -1):
            dh += G_out[order[k]]
            h = hs[k + 1]
            da = dA[k]
            if ctx.relu:
                np.multiply(dh, h != 0, out=da)  # torch passes the gradient at NaN
            else:
                np.multiply(dh, 1 - h * h, out=da)
            dh = da @ W
        B, H = hs.shape[1:]
        dW = dA.reshape(T * B, H).T @ hs[:-1].reshape(T * B, H)
        dxg = dA[::-1] if ctx.reverse else dA
        return _t(dxg), _t(dW), _t(dh), None, None


def _t(arr):
    from ...tensor import _wrap_array

    return None if arr is None else _wrap_array(arr)


def lstm_layer(
    xg: Tensor, w_hh: Tensor, h0: Tensor, c0: Tensor, reverse: bool = False, w_hr: Tensor | None = None
):
    """One LSTM layer direction. xg: (T, B, 4H) input projections incl. both biases; h0, c0: (B, H).
    Returns (output (T, B, H), h_n, c_n). With a projection w_hr (P, H), h0, h_n and the output have P
    features; that case runs as ordinary Tensor ops (one graph node per op and step)."""
    if w_hr is not None:
        return _lstm_reference(xg, w_hh, h0, c0, reverse, w_hr)
    return _LSTMLayer.apply(xg, w_hh, h0, c0, reverse)


def gru_layer(xg: Tensor, w_hh: Tensor, b_hh: Tensor | None, h0: Tensor, reverse: bool = False):
    """One GRU layer direction. xg: (T, B, 3H) = x W_ih^T + b_ih; b_hh stays inside (r gates it).
    Returns (output (T, B, H), h_n)."""
    return _GRULayer.apply(xg, w_hh, b_hh, h0, reverse)


def rnn_tanh_layer(xg: Tensor, w_hh: Tensor, h0: Tensor, reverse: bool = False):
    """One tanh-RNN layer direction. xg: (T, B, H) input projections incl. both biases."""
    return _RNNLayer.apply(xg, w_hh, h0, False, reverse)


def rnn_relu_layer(xg: Tensor, w_hh: Tensor, h0: Tensor, reverse: bool = False):
    """One ReLU-RNN layer direction. xg: (T, B, H) input projections incl. both biases."""
    return _RNNLayer.apply(xg, w_hh, h0, True, reverse)


# ----------------------------------------------------------------------------- attention
def _attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    training: bool = True,
    safe: bool = True,
):
    """softmax(q k^T * scale + mask) [dropout] @ v; returns (output, weights). Bool masks: True attends.
    safe: a query whose every key is masked gets zero weights (PyTorch's SDPA) instead of NaN (the
    explicit softmax MultiheadAttention uses when it returns its weights)."""
    L, S = query.shape[-2], key.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = (query * scale) @ key.transpose(-2, -1)
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError(
                "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"
            )
        attn_mask = ones(L, S, dtype=_bool_dtype(), device=query.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype is _bool_dtype():
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    dead = None
    if safe and attn_mask is not None:
        dead = (scores == float("-inf")).all(-1, keepdim=True)
        if dead.any():
            scores = scores.masked_fill(dead, 0.0)  # finite, so no NaN reaches the gradients either
        else:
            dead = None
    weights = scores.softmax(-1)
    if dead is not None:
        weights = weights.masked_fill(dead, 0.0)
    if dropout_p > 0.0 and training:
        from .dropout import dropout

        weights = dropout(weights, dropout_p, True)
    return weights @ value, weights


def _bool_dtype():
    from ... import dtypes

    return dtypes.bool_


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """PyTorch's F.scaled_dot_product_attention: (..., L, E) x (..., S, E) x (..., S, Ev) -> (..., L, Ev).
    A bool attn_mask marks the positions that take part (True); a float mask is added to the scores."""
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(
            f"scaled_dot_product_attention: query and key must have the same embedding size, "
            f"got query {list(query.shape)} and key {list(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(
            f"scaled_dot_product_attention: key and value must have the same sequence length, "
            f"got key {list(key.shape)} and value {list(value.shape)}"
        )
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(rep, -3)
        value = value.repeat_interleave(rep, -3)
    return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale)[0]
