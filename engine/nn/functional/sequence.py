"""Functional forms of the sequence layers: fused recurrences (one graph node per layer and direction)
and scaled dot-product attention. Re-exported by engine.nn.functional."""

from __future__ import annotations

import math

import numpy as np

from ...autograd.function import Function
from ...autograd.grad_mode import state
from ...backend import parallel
from ...ops.creation import ones
from ...ops.elementwise import _relu_np, relu, sigmoid, tanh
from ...ops.shape import stack
from ...tensor import Tensor

__all__ = ["rnn_tanh_layer", "rnn_relu_layer", "lstm_layer", "gru_layer", "scaled_dot_product_attention",
           "packed_self_attention"]


# ----------------------------------------------------------------------------- recurrences
# A layer's input projection xg = x @ W_ih^T + bias (all time steps, one matmul) is computed by the
# caller with ordinary ops; the fused ops below run only the recurrent part. Their forward and
# backward are NumPy loops over time (a handful of ufuncs per step instead of ~15 graph nodes).
# Under create_graph the backward instead differentiates a Tensor-op replay of the same recurrence,
# so double backward stays exact.


# One BLAS thread in the loops over time (parallel.single_blas, marked "one BLAS thread" below): the per-step
# GEMMs ((B, H) x (H, G), ~70 us) are too small to share, and with two OpenBLAS threads on the shared 2-core
# machine each call's hand-off and spin-wait made an LSTM layer's forward+backward 3-7x slower (24-76 ms
# against 168-262 ms). The one GEMM after a backward loop (the weight gradient) keeps the cap.


def _sigmoid_(a: np.ndarray) -> np.ndarray:
    """In-place logistic sigmoid 1 / (1 + exp(-a)) (NumPy's float32 exp costs ~60% of its tanh). exp(-a)
    overflows to inf for a < -88 (float32), giving exactly 0: callers silence NumPy's overflow warning."""
    np.negative(a, out=a)
    np.exp(a, out=a)
    a += 1
    np.reciprocal(a, out=a)
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


def _replay_grads(ctx, reference, grads, settings=None):
    """Gradients of a Tensor-op replay of a fused op (reference(*saved tensors, *settings); settings default
    to the recurrence's `reverse`), recorded for double backward."""
    from ...autograd import grad as autograd_grad

    inputs = ctx.saved_tensors
    settings = (ctx.reverse,) if settings is None else settings
    outs = reference(*inputs, *settings)
    want = [i for i, t in enumerate(inputs) if t is not None and ctx.needs_input_grad[i]]
    got = autograd_grad(outs, [inputs[i] for i in want], grads, create_graph=True, allow_unused=True)
    result = [None] * (len(inputs) + len(settings))  # + the non-tensor settings
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
        cs[0] = c0._arr
        # All four gates by one exp on contiguous rows: sigmoid(a) = 1 / (1 + exp(-a)) for i, f, o and
        # tanh(a) = 2 / (1 + exp(-2a)) - 1 for g. NumPy's float32 exp costs ~60% of its tanh, and the
        # scales -1 / -2 ride on W_hh^T and on the one pass that lays X out in processing order.
        scale, num, shift = (np.full(H4, v, dt) for v in (-1, 1, 0))
        scale[2 * H : 3 * H], num[2 * H : 3 * H], shift[2 * H : 3 * H] = -2, 2, -1
        W = W * scale
        gates = np.multiply(X[::-1] if reverse else X, scale)  # becomes the activated i, f, g, o

        hw = np.empty((B, H4), dt)
        ig = np.empty((B, H), dt)
        # exp(-a) = inf for a < -88 (float32): the gate is exactly 0 (or -1); one BLAS thread
        with np.errstate(over="ignore"), parallel.single_blas():
            for k in range(T):
                g = gates[k]
                np.matmul(hs[k], W, out=hw)
                g += hw
                np.exp(g, out=g)
                g += 1
                np.divide(num, g, out=g)
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
        # Everything that does not depend on the incoming gradient, for all steps at once, in place in
        # few whole-array passes (no temporaries): per step, dc (for i, f, g) or dh (for o) times M gives
        # the pre-activation gate gradients, which then overwrite M's step.
        i, f, g, o = (gates[..., j * H : (j + 1) * H] for j in range(4))
        M = np.subtract(1, gates)
        M *= gates  # s (1 - s) of the sigmoid gates; the g block is redone below
        Mi, Mf, Mg, Mo = (M[..., j * H : (j + 1) * H] for j in range(4))
        Mi *= g
        Mf *= cs[:-1]
        Mo *= tcs
        np.multiply(g, g, out=Mg)
        np.subtract(1, Mg, out=Mg)
        Mg *= i
        P = np.multiply(tcs, tcs)  # d c_t / d h_t through h = o * tanh(c): o (1 - tanh(c)^2)
        np.subtract(1, P, out=P)
        P *= o
        F = np.ascontiguousarray(f)  # the loop's forget gates as whole (B, H) blocks
        M3 = M.reshape(T, B, 4, H)[:, :, :3]  # views: the i, f, g blocks side by side
        tmp = np.empty((B, H), gates.dtype)
        order = list(_time_order(T, ctx.reverse))
        with parallel.single_blas():  # one BLAS thread
            for k in range(T - 1, -1, -1):
                dh += G_out[order[k]]
                np.multiply(dh, P[k], out=tmp)
                dc += tmp
                np.multiply(dc[:, None, :], M3[k], out=M3[k])
                np.multiply(dh, Mo[k], out=Mo[k])
                dc *= F[k]
                np.matmul(M[k], W, out=dh)
        dW = M.reshape(T * B, 4 * H).T @ hs[:-1].reshape(T * B, H)
        dxg = M[::-1] if ctx.reverse else M
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
        # the sigmoids' exp(-a) at a < -88: the gate is exactly 0; one BLAS thread
        with np.errstate(over="ignore"), parallel.single_blas():
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
        with parallel.single_blas():  # one BLAS thread
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
        with parallel.single_blas():  # one BLAS thread
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
        with parallel.single_blas():  # one BLAS thread
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
    fused: bool = True,
):
    """softmax(q k^T * scale + mask) [dropout] @ v; returns (output, weights). Bool masks: True attends.
    safe: a query whose every key is masked gets zero weights (PyTorch's SDPA) instead of NaN (the
    explicit softmax MultiheadAttention uses when it returns its weights); safe callers discard the weights,
    and without a mask or dropout get one fused node (_Attention) and weights None."""
    L, S = query.shape[-2], key.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    if (fused and safe and attn_mask is None and (dropout_p == 0.0 or not training)
            and _fusable(query, key, value)):
        return _Attention.apply(query, key, value, float(scale), bool(is_causal)), None
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


class _Attention(Function):
    """softmax(q k^T * scale [+ causal mask]) @ v as one node on NumPy arrays of any batch shape: two
    batched GEMMs, the softmax in place on the scores, and a backward that reads only the saved
    probabilities, q, k, v and the output (the softmax's row sums as rowsum(dO * O), FlashAttention's
    identity), against ~10 nodes and their temporaries of the composite form. Under create_graph the
    backward differentiates the composite form instead (double backward stays exact)."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, q, k, v, scale, causal):
        Q, K, V = q._arr, k._arr, v._arr
        O = np.empty(Q.shape[:-1] + V.shape[-1:], Q.dtype)
        P = _attend(Q, K, V, scale, causal, O)
        ctx.save_for_backward(q, k, v)
        ctx.P, ctx.scale, ctx.causal = P, scale, causal
        return O

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            return _replay_grads(ctx, _attention_reference, (g,), (ctx.scale, ctx.causal))
        q, k, v = ctx.saved_tensors
        Q, K, V = q._arr, k._arr, v._arr
        nig = ctx.needs_input_grad
        dQ, dK, dV = (np.empty(A.shape, A.dtype) if need else None for A, need in zip((Q, K, V), nig))
        O = ctx._saved_output_unlinked()._arr
        _attend_backward(g._arr, O, ctx.P, Q, K, V, ctx.scale, dQ, dK, dV)
        return _t(dQ), _t(dK), _t(dV), None, None


def _heads(M: np.ndarray, heads: int, batch_first: bool) -> np.ndarray:
    """(N, L, E) (batch_first) or (L, N, E) -> its heads (N, h, L, E / h) as a view, for any strides."""
    A, B, E = M.shape
    M4 = M.reshape(A, B, heads, E // heads)
    return M4.transpose(0, 2, 1, 3) if batch_first else M4.transpose(1, 2, 0, 3)


def _packed_heads(Y: np.ndarray, heads: int, batch_first: bool) -> tuple[np.ndarray, ...]:
    """The q, k and v thirds of a packed (N, L, 3E) or (L, N, 3E) array, each split into heads (views)."""
    E = Y.shape[2] // 3
    return tuple(_heads(Y[..., j * E : (j + 1) * E], heads, batch_first) for j in range(3))


class _PackedSelfAttention(Function):
    """Multi-head self-attention (no mask, no dropout) from the packed projection y = x W_in^T + b_in,
    (N, L, 3E) or (L, N, 3E): q, k and v are views of y split into heads, the output (laid out like x) and the
    gradient of y are written through such views by the GEMMs, so no head is ever copied (the composite form
    copies q, k, v and the output for its reshapes, and their gradients back, and scatters the chunks'
    gradients into zeros). Arithmetic as _Attention; under create_graph the composite form's backward."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, y, heads, batch_first, scale):
        Y = y._arr
        Q, K, V = _packed_heads(Y, heads, batch_first)
        O = np.empty(Y.shape[:2] + (Y.shape[2] // 3,), Y.dtype)
        P = _attend(Q, K, V, scale, False, _heads(O, heads, batch_first))
        ctx.save_for_backward(y)
        ctx.P, ctx.heads, ctx.batch_first, ctx.scale = P, heads, batch_first, scale
        return O

    @staticmethod
    def backward(ctx, g):
        heads, bf, scale = ctx.heads, ctx.batch_first, ctx.scale
        if state.grad_enabled:
            return _replay_grads(ctx, _packed_reference, (g,), (heads, bf, scale))
        (y,) = ctx.saved_tensors
        Y = y._arr
        Q, K, V = _packed_heads(Y, heads, bf)
        dY = np.empty(Y.shape, Y.dtype)
        dQ, dK, dV = _packed_heads(dY, heads, bf)
        O = _heads(ctx._saved_output_unlinked()._arr, heads, bf)
        _attend_backward(_heads(g._arr, heads, bf), O, ctx.P, Q, K, V, scale, dQ, dK, dV)
        return _t(dY), None, None, None


def _over_batch(A: np.ndarray, fn) -> None:
    """fn(s, e) over the leading (batch) axis of the scores A, in one call, or with several threads one
    contiguous share each (BLAS held at one thread) when A is large: each batch element's result is its
    own, so the split changes no value."""
    n = A.shape[0] if A.ndim > 2 else 1
    parallel.map_rows(fn, n, A.nbytes // n, blas=True)


def _attend(Q, K, V, scale: float, causal: bool, O: np.ndarray) -> np.ndarray:
    """O = P V (written into O, any strides) with P = softmax(Q K^T * scale [+ causal mask]) over the last
    axis, computed in place on the scores; returns P."""
    L, S = Q.shape[-2], K.shape[-2]
    P = np.empty(Q.shape[:-1] + (S,), Q.dtype)
    mask = np.where(np.tri(L, S, dtype=bool), 0, -np.inf).astype(P.dtype) if causal else None
    batched = P.ndim > 2

    def piece(s, e):
        q, k, v, p, o = (X[s:e] for X in (Q, K, V, P, O)) if batched else (Q, K, V, P, O)
        np.matmul(q, k.swapaxes(-1, -2), out=p)
        p *= scale
        if mask is not None:
            p += mask
        p -= p.max(-1, keepdims=True)
        np.exp(p, out=p)
        total = p.sum(-1, keepdims=True)
        p *= np.divide(1, total, out=total)
        np.matmul(p, v, out=o)

    _over_batch(P, piece)
    return P


def _attend_backward(G, O, P, Q, K, V, scale: float, dQ, dK, dV) -> None:
    """_attend's gradients from the output's G into dQ, dK, dV (each None when not wanted): the softmax
    backward P * (dP - rowsum(dP * P)) with dP = G V^T and rowsum(dP * P) = rowsum(G * O)."""
    batched = P.ndim > 2

    def piece(s, e):
        g, o, p, q, k, v = (X[s:e] for X in (G, O, P, Q, K, V)) if batched else (G, O, P, Q, K, V)
        if dV is not None:
            np.matmul(p.swapaxes(-1, -2), g, out=dV[s:e] if batched else dV)
        if dQ is None and dK is None:
            return
        dS = np.matmul(g, v.swapaxes(-1, -2))
        dS -= np.multiply(g, o).sum(-1, keepdims=True)
        dS *= p
        dS *= scale
        if dQ is not None:
            np.matmul(dS, k, out=dQ[s:e] if batched else dQ)
        if dK is not None:
            np.matmul(dS.swapaxes(-1, -2), q, out=dK[s:e] if batched else dK)

    _over_batch(P, piece)


def _packed_reference(y, heads, batch_first, scale):
    A, B, E3 = y.shape
    E = E3 // 3

    def split(t):
        t4 = t.reshape(A, B, heads, E // heads)
        return t4.permute(0, 2, 1, 3) if batch_first else t4.permute(1, 2, 0, 3)

    q, k, v = (split(t) for t in y.chunk(3, -1))
    o = _attention(q, k, v, None, 0.0, False, scale, fused=False)[0]
    return (o.permute(0, 2, 1, 3) if batch_first else o.permute(2, 0, 1, 3)).reshape(A, B, E)


def packed_self_attention(y: Tensor, heads: int, batch_first: bool) -> Tensor | None:
    """Self-attention of the packed projection y (N, L, 3E) or (L, N, 3E) with `heads` heads, no mask and
    no dropout, laid out like y with E features; None where the fused op does not take y (the caller then
    runs the composite form)."""
    if y.ndim != 3 or y.shape[2] % (3 * heads) or not _fusable(y, y, y):
        return None
    scale = 1.0 / math.sqrt(y.shape[2] // 3 // heads)
    return _PackedSelfAttention.apply(y, heads, batch_first, scale)


def _attention_reference(q, k, v, scale, causal):
    return _attention(q, k, v, None, 0.0, causal, scale, fused=False)[0]


def _fusable(query: Tensor, key: Tensor, value: Tensor) -> bool:
    """Whether _Attention takes these: float32/float64 NumPy arrays of one dtype, outside autocast."""
    from ...amp import _state as amp_state

    dt = query._arr.dtype
    return (
        not amp_state.any
        and dt in (np.float32, np.float64)
        and all(t._arr.dtype == dt and isinstance(t._arr, np.ndarray) for t in (key, value))
        and isinstance(query._arr, np.ndarray)
        and query.ndim >= 2
        and query.shape[:-2] == key.shape[:-2] == value.shape[:-2]  # no broadcast batch dimensions
        and query._arr.size > 0
        and key._arr.size > 0
    )


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
