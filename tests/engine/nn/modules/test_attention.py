"""MultiheadAttention, TransformerEncoderLayer/Encoder and scaled_dot_product_attention against torch:
outputs, attention weights and every gradient, with bool and float masks; gradcheck in float64."""
import numpy as np
import pytest
import torch
from torch_compare import close, copy_torch_into_engine, same_module_grads, to_engine

import engine
import engine.nn as nn
from engine.autograd import gradcheck
from engine.nn.functional import sequence as FS


def test_parameter_names_match_torch_for_shared_and_separate_projections():
    for kw in ({}, {"kdim": 3, "vdim": 5}, {"bias": False}):
        ours, theirs = nn.MultiheadAttention(8, 2, **kw), torch.nn.MultiheadAttention(8, 2, **kw)
        assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
               [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]


def _masks(kind, L, S, N, h):
    """(torch attn_mask, key_padding_mask, is_causal) for each masking scenario."""
    g = torch.Generator().manual_seed(0)
    pad = torch.zeros(N, S, dtype=torch.bool)
    pad[0, -1] = True
    pad[-1, 2:4] = True
    return {
        "none": (None, None, False),
        "bool_2d": (torch.rand(L, S, generator=g) < 0.3, None, False),
        "float_2d": (torch.randn(L, S, generator=g), None, False),
        "float_3d": (torch.randn(N * h, L, S, generator=g), None, False),
        "key_padding": (None, pad, False),
        "float_key_padding": (None, torch.where(pad, -1e4, 0.0), False),
        "bool_both": (torch.triu(torch.ones(L, S, dtype=torch.bool), 1), pad, False),
        "causal": (torch.triu(torch.ones(L, S, dtype=torch.bool), 1), None, True),
    }[kind]


@pytest.mark.parametrize("mask_kind", ["none", "bool_2d", "float_2d", "float_3d", "key_padding",
                                       "float_key_padding", "bool_both", "causal"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_self_attention_output_weights_and_grads_match_torch(mask_kind, batch_first):
    torch.manual_seed(0)
    E, h, L, N = 8, 2, 5, 3
    ours, theirs = nn.MultiheadAttention(E, h, batch_first=batch_first), \
        torch.nn.MultiheadAttention(E, h, batch_first=batch_first)
    copy_torch_into_engine(ours, theirs)
    x = torch.randn(*((N, L, E) if batch_first else (L, N, E)), requires_grad=True)
    mask, kpm, causal = _masks(mask_kind, L, L, N, h)
    ex = to_engine(x, True)
    out, w = theirs(x, x, x, key_padding_mask=kpm, attn_mask=mask, is_causal=causal)
    eout, ew = ours(ex, ex, ex, key_padding_mask=None if kpm is None else to_engine(kpm),
                    attn_mask=None if mask is None else to_engine(mask), is_causal=causal)
    close(eout, out)
    assert tuple(ew.shape) == (N, L, L)
    close(ew, w)
    r = torch.randn(out.shape)
    (out * r).sum().backward()
    (eout * to_engine(r)).sum().backward()
    same_module_grads(ours, theirs, [(ex, x)])


@pytest.mark.parametrize("average", [True, False])
def test_cross_attention_with_other_key_value_dims_and_per_head_weights(average):
    torch.manual_seed(1)
    E, h, L, S, N = 6, 3, 4, 7, 2
    ours = nn.MultiheadAttention(E, h, kdim=3, vdim=5)
    theirs = torch.nn.MultiheadAttention(E, h, kdim=3, vdim=5)
    copy_torch_into_engine(ours, theirs)
    q, k, v = (torch.randn(L, N, E, requires_grad=True), torch.randn(S, N, 3, requires_grad=True),
               torch.randn(S, N, 5, requires_grad=True))
    eq, ek, ev = to_engine(q, True), to_engine(k, True), to_engine(v, True)
    out, w = theirs(q, k, v, average_attn_weights=average)
    eout, ew = ours(eq, ek, ev, average_attn_weights=average)
    close(eout, out)
    assert tuple(ew.shape) == ((N, L, S) if average else (N, h, L, S))
    close(ew, w)
    (out.sum() + (w * w).sum()).backward()
    (eout.sum() + (ew * ew).sum()).backward()
    same_module_grads(ours, theirs, [(eq, q), (ek, k), (ev, v)])


def test_need_weights_false_returns_none_and_same_output():
    torch.manual_seed(2)
    ours, theirs = nn.MultiheadAttention(4, 2, bias=False), torch.nn.MultiheadAttention(4, 2, bias=False)
    copy_torch_into_engine(ours, theirs)
    q, kv = torch.randn(3, 2, 4), torch.randn(5, 2, 4)
    out, w = ours(to_engine(q), to_engine(kv), to_engine(kv), need_weights=False)
    assert w is None
    close(out, theirs(q, kv, kv, need_weights=False)[0])


def test_unbatched_query_gives_unbatched_output_and_weights():
    torch.manual_seed(3)
    ours, theirs = nn.MultiheadAttention(4, 2), torch.nn.MultiheadAttention(4, 2)
    copy_torch_into_engine(ours, theirs)
    q, kv = torch.randn(3, 4), torch.randn(5, 4)
    kpm = torch.tensor([False, False, True, False, False])
    out, w = theirs(q, kv, kv, key_padding_mask=kpm)
    eout, ew = ours(to_engine(q), to_engine(kv), to_engine(kv), key_padding_mask=to_engine(kpm))
    assert tuple(eout.shape) == (3, 4) and tuple(ew.shape) == (3, 5)
    close(eout, out)
    close(ew, w)


def test_dropout_on_attention_weights_only_in_training():
    engine.manual_seed(0)
    m = nn.MultiheadAttention(4, 1, dropout=0.5)
    x = engine.randn(6, 2, 4)
    m.eval()
    _, w = m(x, x, x)
    np.testing.assert_allclose(w.sum(-1).detach().numpy(), 1.0, rtol=1e-5)
    m.train()
    _, w = m(x, x, x)
    assert (w.detach().numpy() == 0).any()


def test_mask_shape_errors_and_is_causal_without_mask_are_explained():
    m = nn.MultiheadAttention(4, 2)
    x = engine.randn(3, 2, 4)
    with pytest.raises(RuntimeError, match=r"attn_mask is engine.Size\(\[3, 4\]\), but should be \(3, 3\)"):
        m(x, x, x, attn_mask=engine.zeros(3, 4))
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        m(x, x, x, is_causal=True)
    with pytest.raises(AssertionError, match="divisible"):
        nn.MultiheadAttention(6, 4)


def test_gradcheck_multihead_attention_in_float64():
    engine.manual_seed(0)
    m = nn.MultiheadAttention(4, 2, kdim=3, vdim=2, dtype=engine.float64)
    q = engine.randn(2, 1, 4, dtype=engine.float64, requires_grad=True)
    k = engine.randn(3, 1, 3, dtype=engine.float64, requires_grad=True)
    v = engine.randn(3, 1, 2, dtype=engine.float64, requires_grad=True)
    mask = engine.tensor([[False, True, False], [False, False, False]])

    def f(q, k, v, *params):
        return m(q, k, v, attn_mask=mask)

    assert gradcheck(f, (q, k, v, *m.parameters()))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_encoder_layer_matches_torch_in_eval_mode(norm_first, activation, batch_first):
    torch.manual_seed(0)
    kw = dict(d_model=8, nhead=2, dim_feedforward=16, activation=activation, batch_first=batch_first,
              norm_first=norm_first)
    ours, theirs = nn.TransformerEncoderLayer(**kw), torch.nn.TransformerEncoderLayer(**kw)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    copy_torch_into_engine(ours, theirs)
    ours.eval()
    theirs.eval()
    L, N = 5, 3
    x = torch.randn(*((N, L, 8) if batch_first else (L, N, 8)), requires_grad=True)
    mask = torch.triu(torch.full((L, L), float("-inf")), 1)
    ex = to_engine(x, True)
    out = theirs(x, src_mask=mask)
    eout = ours(ex, src_mask=to_engine(mask))
    close(eout, out)
    r = torch.randn(out.shape)
    (out * r).sum().backward()
    (eout * to_engine(r)).sum().backward()
    same_module_grads(ours, theirs, [(ex, x)], atol=1e-4)


def test_transformer_encoder_stacks_independent_copies_and_final_norm_like_torch():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    theirs = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(8), enable_nested_tensor=False)
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2, norm=nn.LayerNorm(8))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    copy_torch_into_engine(ours, theirs)
    assert ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight
    x = torch.randn(4, 2, 8, requires_grad=True)
    pad = torch.tensor([[False, False, False, True], [False, False, False, False]])
    ex = to_engine(x, True)
    out = theirs(x, src_key_padding_mask=pad)
    eout = ours(ex, src_key_padding_mask=to_engine(pad))
    close(eout, out)
    out.sum().backward()
    eout.sum().backward()
    same_module_grads(ours, theirs, [(ex, x)], atol=1e-4)


@pytest.mark.parametrize("case", ["plain", "bool", "float", "causal", "scale"])
def test_scaled_dot_product_attention_matches_torch(case):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 4, 5, requires_grad=True), torch.randn(2, 3, 6, 5, requires_grad=True),
               torch.randn(2, 3, 6, 7, requires_grad=True))
    kw = {"bool": {"attn_mask": torch.rand(4, 6) > 0.3}, "float": {"attn_mask": torch.randn(4, 6)},
          "causal": {"is_causal": True}, "scale": {"scale": 0.3}}.get(case, {})
    if case == "bool":
        kw["attn_mask"][:, 0] = True  # every query attends somewhere
    ekw = {key: (to_engine(val) if isinstance(val, torch.Tensor) else val) for key, val in kw.items()}
    eq, ek, ev = to_engine(q, True), to_engine(k, True), to_engine(v, True)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
    eout = FS.scaled_dot_product_attention(eq, ek, ev, **ekw)
    close(eout, out)
    out.sum().backward()
    eout.sum().backward()
    for a, b in [(eq, q), (ek, k), (ev, v)]:
        close(a.grad, b.grad)


def test_square_subsequent_mask_matches_torch_and_drives_causal_attention():
    from engine.nn.modules.attention import generate_square_subsequent_mask

    mask = generate_square_subsequent_mask(4)
    expected = torch.nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(mask.numpy(), expected.numpy())
    m = nn.MultiheadAttention(4, 2)
    _, w = m(*(engine.randn(4, 1, 4),) * 3, attn_mask=mask, is_causal=True)
    assert (np.triu(w.detach().numpy()[0], 1) == 0).all()
