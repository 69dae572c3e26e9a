"""TransformerDecoderLayer, TransformerDecoder and Transformer against torch with torch's weights copied in:
outputs and every gradient (post- and pre-norm, batch_first, activations, masks), state_dict keys, reprs,
the causal-mask helper and argument errors."""

import numpy as np
import pytest
import torch
from torch_compare import close, copy_torch_into_engine, same_module_grads, to_engine

import engine
import engine.nn as nn
import engine.nn.functional as F


def _backward_and_compare(ours, theirs, out, eout, pairs):
    close(eout, out, atol=2e-5, rtol=1e-4)
    r = torch.randn(out.shape)
    (out * r).sum().backward()
    (eout * to_engine(r)).sum().backward()
    same_module_grads(ours, theirs, pairs, atol=2e-5, rtol=1e-4)


def _seq(L, N, E, batch_first, requires_grad=True):
    t = torch.randn(*((N, L, E) if batch_first else (L, N, E)), requires_grad=requires_grad)
    return t, to_engine(t, requires_grad)


ACTIVATIONS = {"relu": ("relu", "relu"), "gelu": ("gelu", "gelu"),
               "function": (F.gelu, torch.nn.functional.gelu),
               "module": (nn.GELU("tanh"), torch.nn.GELU("tanh"))}


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_matches_torch_with_causal_and_padding_masks(activation, norm_first, batch_first):
    torch.manual_seed(0)
    ea, ta = ACTIVATIONS[activation]
    kw = {"dim_feedforward": 12, "dropout": 0.0, "norm_first": norm_first, "batch_first": batch_first}
    theirs = torch.nn.TransformerDecoderLayer(8, 2, activation=ta, **kw)
    ours = nn.TransformerDecoderLayer(8, 2, activation=ea, **kw)
    copy_torch_into_engine(ours, theirs)
    assert repr(ours) == repr(theirs)
    tgt, etgt = _seq(4, 3, 8, batch_first)
    mem, emem = _seq(5, 3, 8, batch_first)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(4)
    mem_pad = torch.zeros(3, 5, dtype=torch.bool)
    mem_pad[1, -2:] = True
    out = theirs(tgt, mem, tgt_mask=mask, memory_key_padding_mask=mem_pad, tgt_is_causal=True)
    eout = ours(etgt, emem, tgt_mask=to_engine(mask), memory_key_padding_mask=to_engine(mem_pad),
                tgt_is_causal=True)
    _backward_and_compare(ours, theirs, out, eout, [(etgt, tgt), (emem, mem)])


def test_decoder_layer_unbatched_with_memory_mask_and_float_padding_matches_torch():
    torch.manual_seed(1)
    theirs = torch.nn.TransformerDecoderLayer(6, 3, dim_feedforward=10, dropout=0.0, bias=False)
    ours = nn.TransformerDecoderLayer(6, 3, dim_feedforward=10, dropout=0.0, bias=False)
    copy_torch_into_engine(ours, theirs)
    tgt = torch.randn(4, 6, requires_grad=True)
    etgt = to_engine(tgt, True)
    mem = torch.randn(5, 6, requires_grad=True)
    emem = to_engine(mem, True)
    memory_mask = torch.randn(4, 5)
    tgt_pad = torch.tensor([0.0, 0.0, 0.0, -1e4])
    out = theirs(tgt, mem, memory_mask=memory_mask, tgt_key_padding_mask=tgt_pad)
    eout = ours(etgt, emem, memory_mask=to_engine(memory_mask), tgt_key_padding_mask=to_engine(tgt_pad))
    _backward_and_compare(ours, theirs, out, eout, [(etgt, tgt), (emem, mem)])


def test_decoder_stack_with_final_norm_and_detected_causal_mask_matches_torch():
    torch.manual_seed(2)
    tl = torch.nn.TransformerDecoderLayer(8, 4, dim_feedforward=16, dropout=0.3)
    theirs = torch.nn.TransformerDecoder(tl, 3, norm=torch.nn.LayerNorm(8))
    ours = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 4, dim_feedforward=16, dropout=0.3), 3,
                                 norm=nn.LayerNorm(8))
    copy_torch_into_engine(ours, theirs)
    assert repr(ours) == repr(theirs)
    theirs.eval()
    ours.eval()  # dropout is the identity in eval mode: exact parity despite p=0.3
    tgt, etgt = _seq(5, 2, 8, False)
    mem, emem = _seq(3, 2, 8, False)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5)
    out = theirs(tgt, mem, tgt_mask=mask)  # tgt_is_causal=None: detected from the mask
    eout = ours(etgt, emem, tgt_mask=nn.Transformer.generate_square_subsequent_mask(5))
    _backward_and_compare(ours, theirs, out, eout, [(etgt, tgt), (emem, mem)])


@pytest.mark.parametrize("norm_first,batch_first", [(False, False), (True, True)])
def test_full_transformer_matches_torch(norm_first, batch_first):
    torch.manual_seed(3)
    kw = {"d_model": 8, "nhead": 2, "num_encoder_layers": 2, "num_decoder_layers": 2, "dim_feedforward": 16,
          "dropout": 0.0, "norm_first": norm_first, "batch_first": batch_first}
    theirs, ours = torch.nn.Transformer(**kw), nn.Transformer(**kw)
    copy_torch_into_engine(ours, theirs)
    assert repr(ours) == repr(theirs)
    src, esrc = _seq(6, 2, 8, batch_first)
    tgt, etgt = _seq(4, 2, 8, batch_first)
    src_pad = torch.zeros(2, 6, dtype=torch.bool)
    src_pad[0, -1] = True
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4)
    out = theirs(src, tgt, tgt_mask=tmask, src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad,
                 tgt_is_causal=True)
    eout = ours(esrc, etgt, tgt_mask=to_engine(tmask), src_key_padding_mask=to_engine(src_pad),
                memory_key_padding_mask=to_engine(src_pad), tgt_is_causal=True)
    _backward_and_compare(ours, theirs, out, eout, [(esrc, src), (etgt, tgt)])


def test_transformer_reinitialises_every_matrix_xavier_uniform():
    engine.manual_seed(0)
    m = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32)
    for name, p in m.named_parameters():
        if p.dim() > 1:
            fan_out, fan_in = p.shape[:2]
            bound = (6 / (fan_in + fan_out)) ** 0.5
            w = p.detach().numpy()
            assert np.abs(w).max() <= bound + 1e-7, name
            assert np.abs(w).max() > 0.8 * bound, name  # uniform over the whole range, not the Linear default


def test_custom_encoder_and_decoder_are_used_as_given():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 1)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16), 1)
    m = nn.Transformer(d_model=8, nhead=2, custom_encoder=enc, custom_decoder=dec)
    assert m.encoder is enc and m.decoder is dec
    assert (m.d_model, m.nhead, m.batch_first) == (8, 2, False)


def test_square_subsequent_mask_is_a_static_method_matching_torch():
    ours = nn.Transformer.generate_square_subsequent_mask(5, dtype=engine.float64)
    theirs = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert nn.Transformer.generate_square_subsequent_mask(2).dtype == engine.float32


def test_argument_errors_match_torch():
    kw = {"d_model": 8, "nhead": 2, "num_encoder_layers": 1, "num_decoder_layers": 1, "dim_feedforward": 8}
    ours, theirs = nn.Transformer(**kw), torch.nn.Transformer(**kw)
    for src, tgt in (((5, 2, 8), (4, 3, 8)), ((5, 2, 8), (4, 2, 6))):
        with pytest.raises(RuntimeError) as t:
            theirs(torch.randn(*src), torch.randn(*tgt))
        with pytest.raises(RuntimeError, match=str(t.value)):
            ours(engine.randn(*src), engine.randn(*tgt))
    with pytest.raises(RuntimeError) as t:
        torch.nn.TransformerDecoderLayer(8, 2, activation="tanh")
    with pytest.raises(RuntimeError, match=str(t.value)):
        nn.TransformerDecoderLayer(8, 2, activation="tanh")
    layer = nn.TransformerDecoderLayer(8, 2, 8)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        layer(engine.randn(3, 1, 8), engine.randn(2, 1, 8), memory_is_causal=True)


def test_decoder_layer_dropout_in_training_is_seeded_and_stops_in_eval():
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.5)
    tgt, mem = engine.randn(4, 2, 8), engine.randn(3, 2, 8)
    engine.manual_seed(5)
    a = layer(tgt, mem)
    engine.manual_seed(5)
    b = layer(tgt, mem)
    c = layer(tgt, mem)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert not np.allclose(a.detach().numpy(), c.detach().numpy())
    layer.eval()
    np.testing.assert_array_equal(layer(tgt, mem).detach().numpy(), layer(tgt, mem).detach().numpy())
