"""The fused CPU fast paths of the Transformer and LSTM (issue 22) against torch: unmasked self-attention
on the packed projection (MultiheadAttention with need_weights=False), scaled_dot_product_attention's fused
node, layer norm by rows, and the LSTM recurrence's exp-based gates at saturating inputs. Each checks that the
fused node ran, its outputs and gradients, and double backward (create_graph), which replays the composite
form."""
import warnings

import numpy as np
import pytest
import torch
from torch_compare import close, copy_torch_into_engine, same_module_grads, to_engine

import engine
import engine.nn as nn
import engine.nn.functional as F


def _node_names(t) -> set[str]:
    """The class names of every node in t's backward graph."""
    seen, names, todo = set(), set(), [t.grad_fn]
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        names.add(type(n).__name__)
        todo.extend(f for f, _ in n.next_functions)
    return names


@pytest.mark.parametrize("batch_first", [True, False])
def test_fused_self_attention_matches_torch_and_the_composite_form(batch_first):
    torch.manual_seed(0)
    E, h, L, N = 16, 4, 7, 3
    ours = nn.MultiheadAttention(E, h, batch_first=batch_first)
    theirs = torch.nn.MultiheadAttention(E, h, batch_first=batch_first)
    copy_torch_into_engine(ours, theirs)
    x = torch.randn(*((N, L, E) if batch_first else (L, N, E)), requires_grad=True)
    ex = to_engine(x, True)
    out = theirs(x, x, x, need_weights=False)[0]
    eout = ours(ex, ex, ex, need_weights=False)[0]
    assert "_PackedSelfAttention" in _node_names(eout)
    close(eout, out)
    # the general form (it returns the weights) gives the same output
    close(ours(ex, ex, ex)[0], out)
    r = torch.randn(out.shape)
    (out * r).sum().backward()
    (eout * to_engine(r)).sum().backward()
    same_module_grads(ours, theirs, [(ex, x)])


def test_fused_self_attention_is_not_taken_with_a_mask_or_training_dropout():
    m = nn.MultiheadAttention(8, 2, batch_first=True, dropout=0.5)
    x = engine.randn(2, 5, 8, requires_grad=True)
    m.eval()
    assert "_PackedSelfAttention" in _node_names(m(x, x, x, need_weights=False)[0])
    m.train()
    assert "_PackedSelfAttention" not in _node_names(m(x, x, x, need_weights=False)[0])
    m.eval()
    mask = engine.zeros(5, 5)
    assert "_PackedSelfAttention" not in _node_names(m(x, x, x, need_weights=False, attn_mask=mask)[0])


def test_fused_self_attention_double_backward_matches_torch():
    torch.manual_seed(1)
    ours, theirs = nn.MultiheadAttention(8, 2, batch_first=True, dtype=engine.float64), \
        torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    copy_torch_into_engine(ours, theirs)
    x = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    ex = to_engine(x, True)
    # torch's own fused kernel has no double backward: the reference is its explicit-softmax form
    (gx,) = torch.autograd.grad((theirs(x, x, x)[0] ** 2).sum(), x, create_graph=True)
    (egx,) = engine.autograd.grad((ours(ex, ex, ex, need_weights=False)[0] ** 2).sum(), ex, create_graph=True)
    close(egx, gx)
    (gx * gx).sum().backward()
    (egx * egx).sum().backward()
    same_module_grads(ours, theirs, [(ex, x)])


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_fused_node_matches_torch_with_gradients_and_double_backward(causal):
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 3, 6, 5, dtype=torch.float64, requires_grad=True) for _ in range(3))
    eq, ek, ev = (to_engine(t, True) for t in (q, k, v))
    # torch's math form (its flash kernel has no double backward)
    scores = q @ k.transpose(-2, -1) / 5 ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))
    out = scores.softmax(-1) @ v
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(out, sdpa)
    eout = F.scaled_dot_product_attention(eq, ek, ev, is_causal=causal)
    assert "_Attention" in _node_names(eout)
    close(eout, out)
    gt = torch.autograd.grad((out * out).sum(), (q, k, v), create_graph=True)
    ge = engine.autograd.grad((eout * eout).sum(), (eq, ek, ev), create_graph=True)
    for a, b in zip(ge, gt):
        close(a, b)
    sum((g ** 2).sum() for g in gt).backward()
    sum((g ** 2).sum() for g in ge).backward()
    for a, b in ((eq, q), (ek, k), (ev, v)):
        close(a.grad, b.grad)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_layer_norm_rows_match_torch_in_value_gradients_and_double_backward(affine, dtype):
    torch.manual_seed(3)
    x = (torch.randn(4, 5, 6, 7, dtype=dtype) * 3 + 2).requires_grad_()
    w = torch.randn(6, 7, dtype=dtype, requires_grad=True) if affine else None
    b = torch.randn(6, 7, dtype=dtype, requires_grad=True) if affine else None
    ex, ew, eb = (None if t is None else to_engine(t, True) for t in (x, w, b))
    y = torch.nn.functional.layer_norm(x, (6, 7), w, b)
    ey = F.layer_norm(ex, (6, 7), ew, eb)
    close(ey, y)
    r = torch.randn(y.shape, dtype=dtype)
    (y * r).sum().backward()
    (ey * to_engine(r)).sum().backward()
    for a, t in ((ex, x), (ew, w), (eb, b)):
        if t is not None:
            close(a.grad, t.grad)
    # double backward: the gradient of x's gradient norm
    y = torch.nn.functional.layer_norm(x, (6, 7), w, b)
    ey = F.layer_norm(ex, (6, 7), ew, eb)
    (gx,) = torch.autograd.grad((y * r).sum(), x, create_graph=True)
    (egx,) = engine.autograd.grad((ey * to_engine(r)).sum(), ex, create_graph=True)
    close(egx, gx)
    x.grad = None
    ex.grad = None
    (gx * gx).sum().backward()
    (egx * egx).sum().backward()
    close(ex.grad, x.grad)


def test_layer_norm_of_a_transposed_input_matches_torch():
    torch.manual_seed(4)
    base = torch.randn(5, 3, 8, requires_grad=True)
    ebase = to_engine(base, True)
    y = torch.nn.functional.layer_norm(base.transpose(0, 1), (8,))
    ey = F.layer_norm(ebase.transpose(0, 1), (8,))
    close(ey, y)
    r = torch.randn(y.shape)
    (y * r).sum().backward()
    (ey * to_engine(r)).sum().backward()
    close(ebase.grad, base.grad)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_saturated_gates_match_torch_without_overflow_warnings(kind):
    """Pre-activations far beyond exp's float32 range: exp(-a) overflows to inf, the gate is exactly 0
    (or tanh -1), and nothing warns or turns NaN."""
    torch.manual_seed(5)
    ours, theirs = getattr(nn, kind)(3, 4, batch_first=True), getattr(torch.nn, kind)(3, 4, batch_first=True)
    copy_torch_into_engine(ours, theirs)
    x = (torch.randn(2, 6, 3) * 200).requires_grad_()
    ex = to_engine(x, True)
    out, state = theirs(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eout, estate = ours(ex)
        assert np.isfinite(eout.detach().numpy()).all()
        close(eout, out)
        if kind == "LSTM":
            close(estate[1], state[1])
        r = torch.randn(out.shape)
        (out * r).sum().backward()
        (eout * to_engine(r)).sum().backward()
    # the input-weight gradients sum products with inputs of ~200: float32 round-off (torch's own is ~1.5e-5
    # from float64 here) scales with them
    same_module_grads(ours, theirs, [(ex, x)], atol=1e-4)


def test_fused_attention_gives_the_same_bits_on_one_thread_and_on_two(monkeypatch):
    """Scores big enough to be split across threads (one batch share each, BLAS held at one thread) give
    exactly the single-thread output and gradients, and the split really ran on two threads."""
    from threadpoolctl import threadpool_limits

    from engine.backend import parallel

    engine.manual_seed(6)
    m = nn.MultiheadAttention(32, 4, batch_first=True)
    x0 = engine.randn(4, 96, 32)
    results, shares = [], []
    real_run = parallel.run

    def counting_run(ranges, setup, n_threads=None, blas=False):
        shares.append(len(list(ranges)))
        return real_run(ranges, setup, n_threads, blas)

    monkeypatch.setattr(parallel, "run", counting_run)
    monkeypatch.setattr(parallel, "MIN_BYTES", 1 << 18)  # these 576 KiB of scores are split
    for n in (1, 2):
        with threadpool_limits(n, user_api="blas"):
            x = x0.detach().requires_grad_()
            m.zero_grad()
            out = m(x, x, x, need_weights=False)[0]
            (out * out).sum().backward()
            results.append([out.detach().numpy(), x.grad.numpy()] + [p.grad.numpy() for p in m.parameters()])
    assert shares and all(s == 2 for s in shares)  # only the two-thread pass split, forward and backward
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)



def test_recurrences_run_their_loops_over_time_at_one_blas_thread(monkeypatch):
    """With BLAS at two threads, each recurrence's forward and backward loop runs at one (its per-step GEMMs
    are too small to share: two OpenBLAS threads made an LSTM step several times slower on a busy machine),
    and the cap is back at two afterwards."""
    from contextlib import contextmanager

    from threadpoolctl import threadpool_info, threadpool_limits

    from engine.backend import parallel

    def blas_threads():
        return max(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas")

    seen = []
    real = parallel.single_blas

    @contextmanager
    def watched():
        with real():
            seen.append(blas_threads())
            yield

    monkeypatch.setattr(parallel, "single_blas", watched)
    with threadpool_limits(2, user_api="blas"):
        for kind in ("LSTM", "GRU", "RNN"):
            out = getattr(nn, kind)(3, 5)(engine.randn(4, 2, 3, requires_grad=True))[0]
            out.sum().backward()
        after = blas_threads()
    assert seen == [1] * 6  # three forwards and three backwards
    assert after == 2
