"""conv_transpose1d / nn.ConvTranspose1d against torch: values, gradients, output_size, errors, parameters."""

import numpy as np
import pytest
import torch

import engine
from engine.nn import functional as F

CASES = [
    # (in, out, k, stride, padding, output_padding, groups, dilation, length, batched)
    (4, 3, 3, 1, 0, 0, 1, 1, 7, True),
    (4, 6, 5, 2, 1, 1, 2, 1, 6, True),
    (2, 2, 3, 3, 2, 2, 1, 2, 5, True),
    (3, 5, 1, 2, 0, 0, 1, 1, 4, False),
    (6, 3, 4, 2, 3, 0, 3, 3, 9, True),
]


@pytest.mark.parametrize("cin,cout,k,s,p,op,g,d,length,batched", CASES)
def test_conv_transpose1d_matches_torch_forward_and_backward(cin, cout, k, s, p, op, g, d, length, batched):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, cin, length) if batched else (cin, length))
    w = rng.standard_normal((cin, cout // g, k))
    b = rng.standard_normal(cout)
    outs, grads = [], []
    for lib, fn in ((engine, F.conv_transpose1d), (torch, torch.nn.functional.conv_transpose1d)):
        xs = [lib.tensor(a, requires_grad=True) for a in (x, w, b)]
        y = fn(*xs, stride=s, padding=p, output_padding=op, groups=g, dilation=d)
        seed = lib.tensor(np.linspace(-1, 1, int(np.prod(tuple(y.shape)))).reshape(tuple(y.shape)))
        (y * seed).sum().backward()
        outs.append(y.detach().numpy())
        grads.append([t.grad.numpy() for t in xs])
    assert outs[0].shape == outs[1].shape
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-10, atol=1e-10)
    for ge, gt in zip(*grads):
        np.testing.assert_allclose(ge, gt, rtol=1e-10, atol=1e-10)


def test_conv_transpose1d_gradcheck_on_a_strided_input():
    rng = np.random.default_rng(1)
    x = engine.tensor(rng.standard_normal((1, 6, 10)), requires_grad=True)[:, ::2, ::2]
    w = engine.tensor(rng.standard_normal((3, 2, 3)), requires_grad=True)
    assert engine.autograd.gradcheck(lambda a, b: F.conv_transpose1d(a, b, stride=2, padding=1), (x, w))


def test_conv_transpose1d_module_matches_torch_with_output_size_and_state_dict():
    tm = torch.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, groups=2, dtype=torch.float64)
    em = engine.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, groups=2, dtype=engine.float64)
    assert repr(em) == repr(tm)
    assert {k: tuple(v.shape) for k, v in em.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in tm.state_dict().items()}
    em.load_state_dict({k: engine.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(2).standard_normal((2, 4, 5))
    for size in (None, [10], (2, 6, 9)):
        ye = em(engine.tensor(x), output_size=size)
        yt = tm(torch.tensor(x), output_size=size)
        np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="requested an output size of"):
        em(engine.tensor(x), output_size=[12])
    with pytest.raises(ValueError, match="requested an output size of"):
        tm(torch.tensor(x), output_size=[12])


@pytest.mark.parametrize("x_shape,w_shape,kwargs", [
    ((1, 5, 10), (4, 3, 3), {}),  # channels
    ((1, 4, 2), (4, 3, 5), {"padding": 4}),  # output too small
    ((1, 4, 6), (4, 3, 3), {"stride": 2, "output_padding": 2}),  # output padding too large
])
def test_conv_transpose1d_errors_match_torch(x_shape, w_shape, kwargs):
    def outcome(lib, fn):
        try:
            fn(lib.ones(*x_shape), lib.ones(*w_shape), **kwargs)
        except Exception as e:  # noqa: BLE001 - the exception is what is compared
            return type(e).__name__, str(e)
        return None

    assert outcome(engine, F.conv_transpose1d) == outcome(torch, torch.nn.functional.conv_transpose1d)
    assert outcome(engine, F.conv_transpose1d) is not None
