"""engine.nn.utils.rnn against torch.nn.utils.rnn: padding, packing and unpacking (values, indices, gradients,
errors), and RNN/LSTM/GRU on PackedSequence inputs (outputs, final states at each sequence's own length, and
every gradient), with unsorted lengths and enforce_sorted both ways."""

import numpy as np
import pytest
import torch
from torch.nn.utils import rnn as trnn
from torch_compare import backward_both, close, pairs, raised, to_engine, to_torch

import engine
import engine.nn as nn
from engine.autograd import gradcheck
from engine.nn.utils import rnn as ernn


def _seqs(lengths, *trailing, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, *trailing)) for n in lengths]


# ----------------------------------------------------------------------------- pad_sequence
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_values_and_gradients_match_torch(batch_first, padding_side):
    e_in, t_in = pairs(_seqs([3, 5, 1, 5], 2, 3), requires_grad=True)
    kw = {"batch_first": batch_first, "padding_value": -2.5, "padding_side": padding_side}
    e_out, t_out = ernn.pad_sequence(e_in, **kw), trnn.pad_sequence(t_in, **kw)
    close(e_out, t_out, "padded")
    backward_both(e_out, t_out, seed=1)
    for i, (a, b) in enumerate(zip(e_in, t_in)):
        close(a.grad, b.grad, f"grad of sequence {i}")


def test_pad_sequence_takes_the_first_sequence_dtype_and_any_iterable():
    first_double = ernn.pad_sequence([engine.randn(2).double(), engine.randn(3)])
    first_float = ernn.pad_sequence(engine.randn(2 + i) for i in range(2))
    assert first_double.dtype == engine.float64 and first_float.dtype == engine.float32
    assert first_float.shape == (3, 2)


def test_pad_sequence_is_differentiable_by_gradcheck():
    xs = [engine.randn(n, 2, dtype=engine.float64, requires_grad=True) for n in (2, 4, 3)]
    assert gradcheck(lambda *s: ernn.pad_sequence(s, batch_first=True, padding_side="left"), xs)


PAD_ERRORS = [
    ("empty list", lambda lib: lib.pad_sequence([])),
    ("not iterable", lambda lib: lib.pad_sequence(5)),
    ("bad side", lambda lib, t=None: lib.pad_sequence([_mk(lib, 2, 3)], padding_side="up")),
]


def _mk(lib, *shape):
    return (engine if lib is ernn else torch).zeros(*shape)


@pytest.mark.parametrize("case", PAD_ERRORS, ids=[c[0] for c in PAD_ERRORS])
def test_pad_sequence_errors_match_torch(case):
    _, fn = case
    assert raised(fn, ernn) == raised(fn, trnn) is not None


# ----------------------------------------------------------------------------- packing
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize(
    "lengths,enforce_sorted", [([5, 3, 3, 1], True), ([2, 5, 1, 3], False), ([4, 4], True)]
)
def test_pack_padded_sequence_matches_torch_and_round_trips(batch_first, lengths, enforce_sorted):
    T, B = max(lengths), len(lengths)
    x = np.random.default_rng(3).standard_normal((B, T, 2) if batch_first else (T, B, 2))
    ex, tx = to_engine(x, True), to_torch(x, True)
    ep = ernn.pack_padded_sequence(ex, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    tp = trnn.pack_padded_sequence(tx, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    assert isinstance(ep, ernn.PackedSequence) and isinstance(ep, tuple)
    close(ep.data, tp.data, "data")
    for field in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        a, b = getattr(ep, field), getattr(tp, field)
        assert (a is None) == (b is None), field
        if b is not None:
            assert a.tolist() == b.tolist() and a.dtype == engine.int64, field
    # gradient through packing: zero on the padding
    backward_both(ep.data, tp.data, seed=1)
    close(ex.grad, tx.grad, "grad of the padded input")
    # and back, with extra steps
    e_pad, e_len = ernn.pad_packed_sequence(
        ep, batch_first=batch_first, padding_value=7.0, total_length=T + 2
    )
    t_pad, t_len = trnn.pad_packed_sequence(
        tp, batch_first=batch_first, padding_value=7.0, total_length=T + 2
    )
    close(e_pad, t_pad, "re-padded")
    assert e_len.tolist() == t_len.tolist() == lengths and e_len.dtype == engine.int64


def test_pad_packed_sequence_gradients_match_torch():
    data = np.random.default_rng(4).standard_normal((9, 3))
    sizes, order = [4, 3, 1, 1], [2, 0, 3, 1]
    ed, td = to_engine(data, True), to_torch(data, True)
    ep = ernn.PackedSequence(ed, engine.tensor(sizes), engine.tensor(order))
    tp = trnn.PackedSequence(td, torch.tensor(sizes), torch.tensor(order))
    e_out, _ = ernn.pad_packed_sequence(ep, batch_first=True)
    t_out, _ = trnn.pad_packed_sequence(tp, batch_first=True)
    close(e_out, t_out, "padded")
    backward_both(e_out, t_out, seed=1)
    close(ed.grad, td.grad, "grad of packed data")


def test_packing_and_unpacking_pass_gradcheck():
    x = engine.randn(4, 3, 2, dtype=engine.float64, requires_grad=True)

    def round_trip(x):
        packed = ernn.pack_padded_sequence(x, [2, 4, 1], enforce_sorted=False)
        return ernn.pad_packed_sequence(packed, batch_first=True, padding_value=1.5)[0] * 2.0

    assert gradcheck(round_trip, (x,))
    assert gradcheck(lambda x: ernn.pack_padded_sequence(x, [4, 2, 1]).data, (x,))


def test_pack_sequence_unpack_sequence_and_unpad_sequence_match_torch():
    e_in, t_in = pairs(_seqs([2, 4, 3], 2), requires_grad=True)
    ep, tp = ernn.pack_sequence(e_in, enforce_sorted=False), trnn.pack_sequence(t_in, enforce_sorted=False)
    close(ep.data, tp.data, "packed")
    e_back, t_back = ernn.unpack_sequence(ep), trnn.unpack_sequence(tp)
    assert len(e_back) == len(t_back) == 3
    for a, b in zip(e_back, t_back):
        close(a, b, "unpacked")
    padded = np.random.default_rng(5).standard_normal((5, 3, 2))
    for batch_first, lengths in ((False, [5, 2, 3]), (True, [1, 3, 2, 3, 1])):
        e_un = ernn.unpad_sequence(to_engine(padded), engine.tensor(lengths), batch_first=batch_first)
        t_un = trnn.unpad_sequence(to_torch(padded), torch.tensor(lengths), batch_first=batch_first)
        assert len(e_un) == len(t_un)
        for a, b in zip(e_un, t_un):
            close(a, b, "unpadded")
    too_few = lambda L, R: R.unpad_sequence(L.zeros(5, 3, 2), L.tensor([5, 2]))
    assert raised(too_few, *_lib("engine")) == raised(too_few, *_lib("torch")) is not None
    backward_both(engine.cat(e_back), torch.cat(t_back), seed=1)
    for a, b in zip(e_in, t_in):
        close(a.grad, b.grad, "grad through pack_sequence + unpack_sequence")


def _lib(lib):
    return (engine, ernn) if lib == "engine" else (torch, trnn)


PACK_ERRORS = [
    ("unsorted", lambda L, R: R.pack_padded_sequence(L.zeros(4, 3, 2), [4, 2, 3])),
    ("zero length", lambda L, R: R.pack_padded_sequence(L.zeros(4, 3, 2), [4, 2, 0], enforce_sorted=False)),
    ("length count", lambda L, R: R.pack_padded_sequence(L.zeros(4, 3, 2), [4, 3])),
    ("2-D lengths", lambda L, R: R.pack_padded_sequence(L.zeros(4, 3, 2), [[4, 3, 1]])),
    ("empty", lambda L, R: R.pack_padded_sequence(L.zeros(0, 3, 2), [0, 0, 0])),
    ("unsorted list", lambda L, R: R.pack_sequence([L.zeros(1, 2), L.zeros(3, 2)])),
    ("total_length", lambda L, R: R.pad_packed_sequence(R.pack_sequence([L.zeros(3, 2)]), total_length=2)),
    ("no batch_sizes", lambda L, R: R.PackedSequence(L.zeros(3))),
]


@pytest.mark.parametrize("case", PACK_ERRORS, ids=[c[0] for c in PACK_ERRORS])
def test_packing_errors_match_torch(case):
    _, fn = case
    assert raised(fn, *_lib("engine")) == raised(fn, *_lib("torch")) is not None


def test_packed_sequence_is_a_namedtuple_with_torchs_conversions():
    ep = ernn.PackedSequence((engine.randn(3, 2), engine.tensor([2, 1])))  # (data, batch_sizes) form
    assert ep._fields == trnn.PackedSequence._fields
    assert ep.sorted_indices is None and ep.unsorted_indices is None
    assert ep.to(engine.float32) is ep and not ep.is_cuda
    packed = ernn.pack_sequence([engine.randn(1, 2), engine.randn(3, 2)], enforce_sorted=False)
    doubled = packed.double()
    assert type(doubled) is ernn.PackedSequence and doubled.data.dtype == engine.float64
    assert doubled.batch_sizes.tolist() == [2, 1, 1] and doubled.sorted_indices.tolist() == [1, 0]
    assert packed.long().data.dtype == engine.int64
    assert ernn.invert_permutation(engine.tensor([2, 0, 1])).tolist() == [1, 2, 0]
    assert ernn.invert_permutation(None) is None


# ----------------------------------------------------------------------------- packed recurrent layers
def _rnn_pair(kind, **kw):
    mk = {"tanh": ("RNN", {"nonlinearity": "tanh"}), "relu": ("RNN", {"nonlinearity": "relu"})}
    name, extra = mk.get(kind, (kind, {}))
    torch.manual_seed(0)
    t = getattr(torch.nn, name)(**extra, **kw).double()
    e = getattr(nn, name)(**extra, **kw).double()
    e.load_state_dict({k: to_engine(v) for k, v in t.state_dict().items()})
    return e, t


def _flat_states(h):
    return list(h) if isinstance(h, tuple) else [h]


@pytest.mark.parametrize(
    "kind,extra",
    [
        ("tanh", {}),
        ("relu", {"bidirectional": True}),
        ("GRU", {}),
        ("GRU", {"bidirectional": True}),
        ("LSTM", {}),
        ("LSTM", {"bidirectional": True}),
        ("LSTM", {"proj_size": 2}),
    ],
)
@pytest.mark.parametrize("lengths,enforce_sorted", [([5, 3, 3, 1], True), ([2, 5, 1, 3], False)])
@pytest.mark.parametrize("with_hx", [False, True])
def test_packed_rnn_lstm_gru_forward_and_backward_match_torch(kind, extra, lengths, enforce_sorted, with_hx):
    e, t = _rnn_pair(kind, input_size=3, hidden_size=4, num_layers=2, **extra)
    T, B = max(lengths), len(lengths)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((T, B, 3))
    ex, tx = to_engine(x, True), to_torch(x, True)
    D = 2 if extra.get("bidirectional") else 1
    h_size = extra.get("proj_size", 4)
    e_hx = t_hx = None
    leaves = []
    if with_hx:
        shapes = [(2 * D, B, h_size)] + ([(2 * D, B, 4)] if kind == "LSTM" else [])
        pairs = [(to_engine(a, True), to_torch(a, True)) for a in (rng.standard_normal(s) for s in shapes)]
        leaves = pairs
        e_hx = tuple(p[0] for p in pairs) if kind == "LSTM" else pairs[0][0]
        t_hx = tuple(p[1] for p in pairs) if kind == "LSTM" else pairs[0][1]
    e_out, e_h = e(ernn.pack_padded_sequence(ex, lengths, enforce_sorted=enforce_sorted), e_hx)
    t_out, t_h = t(trnn.pack_padded_sequence(tx, lengths, enforce_sorted=enforce_sorted), t_hx)
    assert isinstance(e_out, ernn.PackedSequence)
    assert e_out.batch_sizes.tolist() == t_out.batch_sizes.tolist()
    close(e_out.data, t_out.data, "packed output")
    e_states, t_states = _flat_states(e_h), _flat_states(t_h)
    for i, (a, b) in enumerate(zip(e_states, t_states)):
        close(a, b, f"final state {i}")
    e_pad, _ = ernn.pad_packed_sequence(e_out)
    t_pad, _ = trnn.pad_packed_sequence(t_out)
    e_all = engine.cat([e_pad.reshape(-1)] + [s.reshape(-1) for s in e_states])
    t_all = torch.cat([t_pad.reshape(-1)] + [s.reshape(-1) for s in t_states])
    backward_both(e_all, t_all, seed=1)
    close(ex.grad, tx.grad, "input grad")
    for i, (a, b) in enumerate(leaves):
        close(a.grad, b.grad, f"initial state {i} grad")
    t_params = dict(t.named_parameters())
    for name, p in e.named_parameters():
        close(p.grad, t_params[name].grad, f"grad of {name}")


def test_packed_final_state_is_each_sequence_at_its_own_length():
    gru = nn.GRU(2, 3, bidirectional=True)
    seqs = [engine.randn(n, 2) for n in (3, 5, 1)]
    _, h = gru(ernn.pack_sequence(seqs, enforce_sorted=False))
    for i, s in enumerate(seqs):
        out_i, h_i = gru(s.unsqueeze(1))  # the sequence alone, no padding
        np.testing.assert_allclose(h[:, i].detach().numpy(), h_i[:, 0].detach().numpy(), atol=1e-6)


def test_packed_gru_passes_gradcheck():
    gru = nn.GRU(2, 3, bidirectional=True).double()
    # gradcheck perturbs these in place, so the module sees the perturbation
    weights = [gru.weight_hh_l0, gru.bias_hh_l0_reverse, gru.weight_ih_l0_reverse]
    x = engine.randn(4, 3, 2, dtype=engine.float64, requires_grad=True)

    def run(x, *_):
        out, h = gru(ernn.pack_padded_sequence(x, [2, 4, 1], enforce_sorted=False))
        return engine.cat([ernn.pad_packed_sequence(out)[0].reshape(-1), h.reshape(-1)])

    assert gradcheck(run, (x, *weights))


PACKED_ERRORS = [
    ("hidden size", lambda L, R, m: m(R.pack_sequence([L.zeros(3, 3), L.zeros(2, 3)]), L.zeros(1, 3, 4))),
    ("input size", lambda L, R, m: m(R.pack_sequence([L.zeros(3, 2), L.zeros(2, 2)]))),
]


@pytest.mark.parametrize("case", PACKED_ERRORS, ids=[c[0] for c in PACKED_ERRORS])
def test_packed_gru_argument_errors_match_torch(case):
    _, fn = case
    e, t = _rnn_pair("GRU", input_size=3, hidden_size=4)
    e.float()
    t.float()
    assert raised(fn, engine, ernn, e) == raised(fn, torch, trnn, t) is not None
