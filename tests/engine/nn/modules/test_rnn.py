"""RNN, LSTM, GRU and their cells against torch: outputs, final states and every gradient, after loading
torch's state_dict by name; gradchecks in float64; an LSTM that learns a toy sequence task."""
import numpy as np
import pytest
import torch
from torch_compare import close, copy_torch_into_engine, to_engine

import engine
import engine.nn as nn
from engine.autograd import gradcheck, gradgradcheck
from engine.nn.functional import sequence as FS


def _pair(kind: str, **kw):
    if kind in ("tanh", "relu"):
        return nn.RNN(nonlinearity=kind, **kw), torch.nn.RNN(nonlinearity=kind, **kw)
    return getattr(nn, kind)(**kw), getattr(torch.nn, kind)(**kw)


@pytest.mark.parametrize("kind", ["tanh", "relu", "LSTM", "GRU"])
def test_parameter_names_shapes_and_order_match_torch(kind):
    ours, theirs = _pair(kind, input_size=3, hidden_size=5, num_layers=2, bidirectional=True)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    ours_nb, theirs_nb = _pair(kind, input_size=3, hidden_size=5, bias=False)
    assert list(ours_nb.state_dict()) == list(theirs_nb.state_dict())


def test_parameters_start_uniform_within_one_over_sqrt_hidden():
    engine.manual_seed(0)
    lstm = nn.LSTM(4, 16, num_layers=2)
    values = np.concatenate([p.detach().numpy().ravel() for p in lstm.parameters()])
    bound = 1 / np.sqrt(16)
    assert values.min() >= -bound and values.max() <= bound
    assert values.min() < -0.9 * bound and values.max() > 0.9 * bound  # spread over the interval
    assert abs(values.mean()) < 0.02


@pytest.mark.parametrize("kind", ["tanh", "relu", "LSTM", "GRU"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first,initial_state", [(False, False), (True, True), (False, True),
                                                       (True, False)])
def test_forward_states_and_all_gradients_match_torch(kind, num_layers, bidirectional, batch_first,
                                                      initial_state):
    torch.manual_seed(0)
    T, B, I, H = 5, 3, 4, 6
    ours, theirs = _pair(kind, input_size=I, hidden_size=H, num_layers=num_layers,
                         bidirectional=bidirectional, batch_first=batch_first)
    copy_torch_into_engine(ours, theirs)
    D = 2 if bidirectional else 1
    x = torch.randn(*((B, T, I) if batch_first else (T, B, I)), requires_grad=True)
    n_states = 2 if kind == "LSTM" else 1
    states = [torch.randn(num_layers * D, B, H, requires_grad=True) for _ in range(n_states)]
    ex = to_engine(x, True)
    estates = [to_engine(s, True) for s in states]
    if initial_state:
        hx = tuple(states) if kind == "LSTM" else states[0]
        ehx = tuple(estates) if kind == "LSTM" else estates[0]
        out, st = theirs(x, hx)
        eout, est = ours(ex, ehx)
    else:
        out, st = theirs(x)
        eout, est = ours(ex)
    finals = list(st) if kind == "LSTM" else [st]
    efinals = list(est) if kind == "LSTM" else [est]
    close(eout, out)
    for a, b in zip(efinals, finals):
        close(a, b)

    # a loss that weighs every output element differently, so each gradient path is checked
    weights = [torch.randn(out.shape)] + [torch.randn(f.shape) for f in finals]
    loss = sum((w * t).sum() for w, t in zip(weights, [out] + finals))
    eloss = sum((to_engine(w) * t).sum() for w, t in zip(weights, [eout] + efinals))
    loss.backward()
    eloss.backward()
    close(ex.grad, x.grad)
    if initial_state:
        for a, b in zip(estates, states):
            close(a.grad, b.grad)
    ep = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        close(ep[name].grad, p.grad, atol=1e-4)


@pytest.mark.parametrize("kind", ["relu", "LSTM", "GRU"])
def test_layers_without_bias_match_torch(kind):
    torch.manual_seed(4)
    ours, theirs = _pair(kind, input_size=3, hidden_size=4, num_layers=2, bias=False, bidirectional=True)
    copy_torch_into_engine(ours, theirs)
    x = torch.randn(5, 2, 3, requires_grad=True)
    ex = to_engine(x, True)
    out, eout = theirs(x)[0], ours(ex)[0]
    close(eout, out)
    r = torch.randn(out.shape)
    (out * r).sum().backward()
    (eout * to_engine(r)).sum().backward()
    close(ex.grad, x.grad)
    ep = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        close(ep[name].grad, p.grad, atol=1e-4)


@pytest.mark.parametrize("kind", ["tanh", "LSTM", "GRU"])
def test_unbatched_input_gives_unbatched_output_like_torch(kind):
    torch.manual_seed(1)
    ours, theirs = _pair(kind, input_size=3, hidden_size=4, num_layers=2, bidirectional=True)
    copy_torch_into_engine(ours, theirs)
    x = torch.randn(6, 3)
    h = torch.randn(4, 4)
    hx = (h, torch.randn(4, 4)) if kind == "LSTM" else h
    out, st = theirs(x, hx)
    eout, est = ours(to_engine(x), tuple(to_engine(s) for s in hx) if kind == "LSTM" else to_engine(hx))
    assert tuple(eout.shape) == (6, 8)
    close(eout, out)
    for a, b in zip(est if kind == "LSTM" else [est], st if kind == "LSTM" else [st]):
        close(a, b)


def test_wrong_input_size_and_hidden_shape_are_explained():
    lstm = nn.LSTM(4, 6, num_layers=2)
    with pytest.raises(RuntimeError, match="Expected 4, got 3"):
        lstm(engine.randn(5, 2, 3))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(2, 2, 6\), got \[1, 2, 6\]"):
        lstm(engine.randn(5, 2, 4), (engine.zeros(1, 2, 6), engine.zeros(2, 2, 6)))
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D"):
        lstm(engine.randn(5))


def test_dropout_between_layers_acts_only_in_training_and_follows_the_seed():
    torch.manual_seed(0)
    ours, theirs = _pair("LSTM", input_size=3, hidden_size=8, num_layers=2, dropout=0.5)
    copy_torch_into_engine(ours, theirs)
    x = torch.randn(4, 2, 3)
    ours.eval()
    close(ours(to_engine(x))[0], theirs.eval()(x)[0])
    ours.train()
    engine.manual_seed(3)
    a = ours(to_engine(x))[0].detach().numpy()
    b = ours(to_engine(x))[0].detach().numpy()
    engine.manual_seed(3)
    c = ours(to_engine(x))[0].detach().numpy()
    assert not np.allclose(a, b)
    np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("kind", ["tanh", "relu", "LSTM", "GRU"])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_state", [True, False])
def test_cells_match_torch_including_gradients(kind, batched, with_state):
    torch.manual_seed(2)
    name = {"tanh": "RNNCell", "relu": "RNNCell", "LSTM": "LSTMCell", "GRU": "GRUCell"}[kind]
    kw = {"nonlinearity": kind} if name == "RNNCell" else {}
    ours, theirs = getattr(nn, name)(3, 5, **kw), getattr(torch.nn, name)(3, 5, **kw)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    copy_torch_into_engine(ours, theirs)
    x = torch.randn(*((4, 3) if batched else (3,)), requires_grad=True)
    sshape = (4, 5) if batched else (5,)
    states = [torch.randn(*sshape, requires_grad=True) for _ in range(2 if name == "LSTMCell" else 1)]
    ex, estates = to_engine(x, True), [to_engine(s, True) for s in states]
    args, eargs = (x,), (ex,)
    if with_state:
        args += (tuple(states) if name == "LSTMCell" else states[0],)
        eargs += (tuple(estates) if name == "LSTMCell" else estates[0],)
    out, eout = theirs(*args), ours(*eargs)
    outs, eouts = (list(out), list(eout)) if name == "LSTMCell" else ([out], [eout])
    for a, b in zip(eouts, outs):
        assert tuple(a.shape) == tuple(b.shape)
        close(a, b)
    ws = [torch.randn(o.shape) for o in outs]
    sum((w * o).sum() for w, o in zip(ws, outs)).backward()
    sum((to_engine(w) * o).sum() for w, o in zip(ws, eouts)).backward()
    close(ex.grad, x.grad)
    if with_state:
        for a, b in zip(estates, states):
            close(a.grad, b.grad)
    ep = dict(ours.named_parameters())
    for pname, p in theirs.named_parameters():
        close(ep[pname].grad, p.grad)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "tanh"])
def test_gradcheck_tiny_bidirectional_two_layer_module_in_float64(kind):
    engine.manual_seed(0)
    cls = nn.RNN if kind == "tanh" else getattr(nn, kind)
    m = cls(1, 2, num_layers=2, bidirectional=True, dtype=engine.float64)
    r = lambda *s: engine.randn(*s, dtype=engine.float64, requires_grad=True)  # noqa: E731
    x, h0, c0 = r(2, 1, 1), r(4, 1, 2), r(4, 1, 2)

    def f(x, h0, c0, *params):  # one output vector holding output, h_n (and c_n): fewer Jacobian passes
        out, st = m(x, (h0, c0) if kind == "LSTM" else h0)
        parts = [out] + (list(st) if kind == "LSTM" else [st])
        return engine.cat([p.reshape(-1) for p in parts])

    inputs = (x, h0, c0 if kind == "LSTM" else c0.detach(), *m.parameters())
    assert gradcheck(f, inputs)


@pytest.mark.parametrize("reverse", [False, True])
def test_fused_recurrences_support_double_backward(reverse):
    engine.manual_seed(1)
    r = lambda *s: engine.randn(*s, dtype=engine.float64, requires_grad=True)  # noqa: E731
    # two steps are enough for the second derivative to flow through the carried state (h, c) from one
    # step into the next; each more step adds inputs to perturb and ops to differentiate twice
    T, B, H = 2, 2, 2
    h0, c0 = r(B, H), r(B, H)
    assert gradgradcheck(lambda xg, w, h, c: FS.lstm_layer(xg, w, h, c, reverse),
                         (r(T, B, 4 * H), r(4 * H, H), h0, c0))
    assert gradgradcheck(lambda xg, w, b, h: FS.gru_layer(xg, w, b, h, reverse),
                         (r(T, B, 3 * H), r(3 * H, H), r(3 * H), h0))
    assert gradgradcheck(lambda xg, w, h: FS.rnn_tanh_layer(xg, w, h, reverse), (r(T, B, H), r(H, H), h0))


def test_gradcheck_compares_every_output_of_a_multi_output_function():
    # regression: the numerical side used to evaluate under no_grad and drop tuple outputs
    x = engine.randn(3, dtype=engine.float64, requires_grad=True)
    assert gradcheck(lambda x: (x * 2, x.exp()), (x,))


def test_lstm_learns_whether_a_plus_minus_one_sequence_sums_positive():
    engine.manual_seed(0)
    rng = np.random.default_rng(0)

    def batch(n):
        x = rng.choice([-1.0, 1.0], size=(n, 10, 1)).astype(np.float32)
        return engine.tensor(x), engine.tensor((x.sum(axis=(1, 2)) > 0).astype(np.float32))

    lstm, head = nn.LSTM(1, 16, batch_first=True), nn.Linear(16, 1)
    params = list(lstm.parameters()) + list(head.parameters())
    m = [engine.zeros_like(p) for p in params]
    v = [engine.zeros_like(p) for p in params]
    lr, b1, b2 = 0.02, 0.9, 0.999
    for step in range(1, 201):
        x, y = batch(64)
        _, (h, _) = lstm(x)
        logit = head(h[-1]).squeeze(1)
        loss = (1 + (-(2 * y - 1) * logit).exp()).log().mean()  # logistic loss
        for p in params:
            p.grad = None
        loss.backward()
        with engine.no_grad():  # Adam, written out so this test does not depend on engine.optim
            for p, mi, vi in zip(params, m, v):
                mi.mul_(b1).add_(p.grad * (1 - b1))
                vi.mul_(b2).add_(p.grad * p.grad * (1 - b2))
                p.sub_(lr * (mi / (1 - b1 ** step)) / ((vi / (1 - b2 ** step)).sqrt() + 1e-8))
    x, y = batch(1000)
    with engine.no_grad():
        _, (h, _) = lstm(x)
        pred = (head(h[-1]).squeeze(1) > 0).to(engine.float32)
    accuracy = (pred == y).to(engine.float32).mean().item()
    assert accuracy > 0.9
