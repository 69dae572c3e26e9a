"""bfloat16 against torch: the dtype's facts (finfo, promotion), conversions, printing, and arithmetic
computed in float32 and rounded once as torch's CPU kernels do (values, gradients, dtypes, errors)."""

import ml_dtypes
import numpy as np
import pytest
import torch
from torch_compare import close, same_outcome, to_engine, to_np, to_torch

import engine
from engine import dtypes as D

BF16 = np.dtype(ml_dtypes.bfloat16)
ALL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def _t(name):
    return getattr(torch, name)


def _e(name):
    return getattr(engine, name)


def test_finfo_equals_torchs():
    e, t = engine.finfo(engine.bfloat16), torch.finfo(torch.bfloat16)
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(e, attr) == getattr(t, attr), attr
    assert repr(e) == repr(t)
    assert engine.bfloat16.itemsize == 2 and engine.bfloat16.is_floating_point and engine.bfloat16.is_signed
    assert repr(engine.bfloat16) == "engine.bfloat16"


def test_promote_types_table_equals_torchs():
    for a in ALL:
        for b in ALL:
            assert (
                engine.promote_types(_e(a), _e(b)).name
                == str(torch.promote_types(_t(a), _t(b))).split(".")[-1]
            ), (a, b)


@pytest.mark.parametrize(
    "name, fn",
    [
        ("bf16 + f16", lambda T: T.ones(2).bfloat16() + T.ones(2).half()),
        ("bf16 + f32", lambda T: T.ones(2).bfloat16() + T.ones(2)),
        ("bf16 + 0-d f32", lambda T: T.ones(2).bfloat16() + T.tensor(1.5)),
        ("bf16 + int64", lambda T: T.ones(2).bfloat16() + T.ones(2, dtype=T.int64)),
        ("int64 + 0-d bf16", lambda T: T.ones(2, dtype=T.int64) + T.tensor(1.5).bfloat16()),
        ("bf16 * bool", lambda T: T.ones(2).bfloat16() * T.ones(2, dtype=T.bool)),
        ("int / 0-d bf16", lambda T: T.arange(3) / T.tensor(2.0).bfloat16()),
        ("result_type", lambda T: T.zeros(1, dtype=T.result_type(T.ones(1).bfloat16(), 2.5))),
        (
            "can_cast",
            lambda T: T.tensor(
                [
                    T.can_cast(T.bfloat16, T.float16),
                    T.can_cast(T.float32, T.bfloat16),
                    T.can_cast(T.bfloat16, T.int32),
                ]
            ),
        ),
        ("tensor(list)", lambda T: T.tensor([1, 2.7, -3e5, 1e39], dtype=T.bfloat16)),
        ("full", lambda T: T.full((2,), 3.3, dtype=T.bfloat16)),
        ("full overflow", lambda T: T.full((2,), 1e39, dtype=T.bfloat16)),
        ("arange", lambda T: T.arange(0, 300, 7, dtype=T.bfloat16)),
        ("linspace", lambda T: T.linspace(-1.3, 5.5, 7, dtype=T.bfloat16)),
        ("to int32", lambda T: T.tensor([1.7, -2.5, 300.2]).bfloat16().to(T.int32)),
        ("from int64", lambda T: T.tensor([257, 65535, -3]).bfloat16()),
        ("to half", lambda T: T.tensor([1e5, 1.001]).bfloat16().half()),
        ("from half", lambda T: T.tensor([1e-7, 1.001]).half().bfloat16()),
        ("to double", lambda T: T.tensor([1 / 3]).bfloat16().double()),
        ("from double", lambda T: T.tensor([1 / 3, 1.00390625, 1.01171875], dtype=T.float64).to(T.bfloat16)),
        ("to bool", lambda T: T.tensor([0.0, -0.0, 2]).bfloat16().bool()),
        ("type()", lambda T: T.ones(2).type(T.bfloat16)),
        ("view int16", lambda T: T.tensor([1.0, -2.0]).bfloat16().view(T.int16)),
        ("view back", lambda T: T.tensor([16256, -16384], dtype=T.int16).view(T.bfloat16)),
        ("item", lambda T: T.tensor([T.tensor(3.3).bfloat16().item()])),
        ("tolist", lambda T: T.tensor(T.tensor([3.3, 1 / 3]).bfloat16().tolist())),
        ("eq Python float", lambda T: T.tensor([0.1]).bfloat16() == 0.1),
        ("lt Python float", lambda T: T.tensor([0.1]).bfloat16() < 0.1),
        ("nan_to_num", lambda T: T.tensor([1.0, float("inf"), float("nan")]).bfloat16().nan_to_num()),
        ("setitem", lambda T: (lambda x: (x.__setitem__(0, 1.1), x)[1])(T.zeros(2).bfloat16())),
        ("masked_fill", lambda T: T.zeros(2).bfloat16().masked_fill(T.tensor([True, False]), 1.1)),
        ("mul_", lambda T: T.ones(2).bfloat16().mul_(1.1)),
        ("add_ float32", lambda T: T.ones(2).bfloat16().add_(T.full((2,), 1.001))),
        ("copy_", lambda T: T.zeros(2).bfloat16().copy_(T.tensor([1.001, 3.3]))),
        ("sum(dtype=)", lambda T: T.tensor([1, 2]).sum(dtype=T.bfloat16)),
        ("mean(dtype=)", lambda T: T.tensor([1.0, 2.0]).mean(dtype=T.bfloat16)),
        ("cumsum(dtype=)", lambda T: T.tensor([1, 2]).cumsum(0, dtype=T.bfloat16)),
        ("softmax(dtype=)", lambda T: T.tensor([1.0, 2.0]).softmax(0, dtype=T.bfloat16)),
        ("cdist refuses", lambda T: T.cdist(T.ones(2, 2).bfloat16(), T.ones(2, 2).bfloat16())),
        ("requires_grad", lambda T: T.ones(2, dtype=T.bfloat16, requires_grad=True) * 2),
    ],
)
def test_conversions_promotion_and_errors_as_torch(name, fn):
    same_outcome(fn, what=name)


def test_conversions_round_to_nearest_even_and_keep_the_bits():
    # halfway cases: 1 + 2^-8 ties to 1, 1 + 3 * 2^-8 ties up to 1 + 2^-6; NaN stays NaN, inf stays inf
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), np.nan, np.inf, 3.4e38, 1e-40], np.float32)
    ours, theirs = engine.tensor(x).bfloat16(), torch.tensor(x).bfloat16()
    assert ours.dtype is engine.bfloat16 and ours.element_size() == 2
    finite = ~np.isnan(x)  # (NaN's payload bits are torch's own: 0xFFFF, ml_dtypes' 0x7FC0; both NaN)
    np.testing.assert_array_equal(to_np(ours).view(np.int16)[finite], to_np(theirs).view(np.int16)[finite])
    assert np.isnan(ours.float().numpy()[~finite]).all() and np.isnan(theirs.float().numpy()[~finite]).all()
    # the helpers hand bfloat16 across unchanged both ways
    back = to_engine(to_torch(to_np(ours)))
    np.testing.assert_array_equal(back.float().numpy(), ours.float().numpy())
    np.testing.assert_array_equal(
        engine.tensor(x, dtype=engine.bfloat16).float().numpy(), ours.float().numpy()
    )
    m = engine.nn.Linear(3, 2).bfloat16()
    assert (
        m.weight.dtype is engine.bfloat16
        and m(engine.ones(4, 3, dtype=engine.bfloat16)).dtype is engine.bfloat16
    )


@pytest.mark.parametrize(
    "values",
    [
        [1.2345, 100.5, 1e-3],
        [1.0, 2.0],
        [3.5],
        [1e10, 1.0],
        [0.1, 0.2, -0.3],
        [float("nan"), float("inf"), 1.5],
        [1e-5, 2e-6],
        [123456.0, 7.0],
        [],
    ],
)
def test_printing_as_torch(values):
    assert repr(engine.tensor(values, dtype=engine.bfloat16)).replace("engine.", "") == repr(
        torch.tensor(values, dtype=torch.bfloat16)
    ).replace("torch.", "")


def test_printing_scalars_summaries_and_grad_flags_as_torch():
    x = np.random.default_rng(0).standard_normal((30, 40)).astype(np.float32)
    for make in (
        lambda T: T.tensor(2.5).bfloat16(),
        lambda T: T.tensor(x).bfloat16(),
        lambda T: T.tensor(x[:2, :2]).bfloat16().requires_grad_(),
        lambda T: T.tensor(x[:2, :2]).bfloat16().requires_grad_() * 2,
    ):
        assert repr(make(engine)).replace("engine.", "") == repr(make(torch)).replace("torch.", "")


# ----------------------------------------------------------------------------- arithmetic and gradients
def _f(T):
    return T.nn.functional


# (function of the library and bf16 leaves, number of (4, 12) inputs, exact: bit for bit equal to torch)
OPS = {
    "add": (lambda T, a, b: a + b, 2, True),
    "sub": (lambda T, a, b: a - b, 2, True),
    "mul": (lambda T, a, b: a * b, 2, True),
    "div": (lambda T, a, b: a / b, 2, True),
    "mul 1.1": (lambda T, a: a * 1.1, 1, True),
    "2 - x": (lambda T, a: 2 - a, 1, True),
    "x / 3": (lambda T, a: a / 3, 1, True),
    "add alpha": (lambda T, a, b: a.add(b, alpha=0.3), 2, False),
    "pow 2": (lambda T, a: a**2, 1, True),
    "pow": (lambda T, a, b: a.abs() ** b, 2, True),
    "exp": (lambda T, a: a.exp(), 1, True),
    "log": (lambda T, a: a.abs().log(), 1, True),
    "sqrt": (lambda T, a: a.abs().sqrt(), 1, True),
    "sin": (lambda T, a: a.sin(), 1, True),
    "tanh": (lambda T, a: a.tanh(), 1, True),
    "erf": (lambda T, a: T.erf(a), 1, True),
    "rsqrt": (lambda T, a: a.abs().rsqrt(), 1, False),
    "sigmoid": (lambda T, a: a.sigmoid(), 1, False),
    "relu": (lambda T, a: _f(T).relu(a), 1, True),
    "gelu": (lambda T, a: _f(T).gelu(a), 1, True),
    "silu": (lambda T, a: _f(T).silu(a), 1, False),
    "leaky_relu": (lambda T, a: _f(T).leaky_relu(a, 0.1), 1, True),
    "elu": (lambda T, a: _f(T).elu(a), 1, True),
    "softplus": (lambda T, a: _f(T).softplus(a), 1, True),
    "hardswish": (lambda T, a: _f(T).hardswish(a), 1, False),
    "mish": (lambda T, a: _f(T).mish(a), 1, False),
    "clamp": (lambda T, a: a.clamp(-0.5, 0.7), 1, True),
    "maximum": (lambda T, a, b: T.maximum(a, b), 2, True),
    "where": (lambda T, a: T.where(a > 0, a, 0.0), 1, True),
    "lerp": (lambda T, a, b: T.lerp(a, b, 0.3), 2, False),
    "fmod": (lambda T, a: T.fmod(a * 5, 1.5), 1, True),
    "remainder": (lambda T, a: T.remainder(a * 5, 1.5), 1, True),
    "sum": (lambda T, a: a.sum(), 1, True),
    "sum dim": (lambda T, a: a.sum(1), 1, True),
    "mean": (lambda T, a: a.mean(), 1, True),
    "mean dim": (lambda T, a: a.mean(0), 1, True),
    "var": (lambda T, a: a.var(1), 1, True),
    "std": (lambda T, a: a.std(), 1, True),
    "norm": (lambda T, a: a.norm(), 1, True),
    "logsumexp": (lambda T, a: a.logsumexp(1), 1, False),
    "cumsum": (lambda T, a: a.cumsum(1), 1, True),
    "cumprod": (lambda T, a: (a[:, :6] * 0.5 + 1).cumprod(1), 1, False),
    "prod": (lambda T, a: a[:2, :6].prod(1), 1, True),
    "amax": (lambda T, a: a.amax(1), 1, True),
    "softmax": (lambda T, a: a.softmax(1), 1, True),
    "log_softmax": (lambda T, a: a.log_softmax(1), 1, False),
    "matmul": (lambda T, a, b: a @ b.t(), 2, True),
    "matvec": (lambda T, a, b: a @ b[0], 2, True),
    "dot": (lambda T, a, b: T.dot(a[0], b[0]), 2, True),
    "bmm": (lambda T, a, b: T.bmm(a[None], b.t()[None]), 2, True),
    "einsum": (lambda T, a, b: T.einsum("ij,kj->ik", a, b), 2, True),
    "addmm": (lambda T, a, b: T.addmm(a[:, :4], a, b.t()[:, :4]), 2, False),
    "linear": (lambda T, a, b: _f(T).linear(a, b[:3], b[0, :3]), 2, False),
    "conv2d": (
        lambda T, a, b: _f(T).conv2d(
            a.reshape(2, 2, 3, 4), b.reshape(-1)[:36].reshape(2, 2, 3, 3), b[0, :2], padding=1
        ),
        2,
        False,
    ),
    "conv1d": (
        lambda T, a, b: _f(T).conv1d(a.reshape(2, 4, 6), b.reshape(-1)[:24].reshape(2, 4, 3)),
        2,
        False,
    ),
    "max_pool2d": (lambda T, a: _f(T).max_pool2d(a.reshape(2, 2, 3, 4), 2), 1, True),
    "avg_pool2d": (lambda T, a: _f(T).avg_pool2d(a.reshape(2, 2, 3, 4), 2), 1, False),
    "layer_norm": (lambda T, a, b: _f(T).layer_norm(a, (12,), b[0], b[1]), 2, False),
    "batch_norm": (lambda T, a, b: _f(T).batch_norm(a, None, None, b[0], b[1], training=True), 2, False),
    "group_norm": (lambda T, a, b: _f(T).group_norm(a.reshape(2, 4, 6), 2, b[0, :4], b[1, :4]), 2, False),
    "mse_loss": (lambda T, a, b: _f(T).mse_loss(a, b), 2, False),
    "l1_loss": (lambda T, a, b: _f(T).l1_loss(a, b), 2, False),
    "cross_entropy": (lambda T, a: _f(T).cross_entropy(a, T.arange(4) % 12), 1, True),
    "nll_loss": (lambda T, a: _f(T).nll_loss(a.log_softmax(1), T.arange(4) % 3), 1, False),
    "bce_with_logits": (lambda T, a, b: _f(T).binary_cross_entropy_with_logits(a, b.sigmoid()), 2, False),
    "embedding": (lambda T, a: _f(T).embedding(T.tensor([0, 2, 1]), a), 1, True),
    "cat": (lambda T, a, b: T.cat([a, b]), 2, True),
    "gather": (lambda T, a: a.gather(1, T.tensor([[0, 1]] * 4)), 1, True),
    "sort": (lambda T, a: a.sort(1)[0], 1, True),
    "topk": (lambda T, a: a.topk(3, 1)[0], 1, True),
    "median": (lambda T, a: a.median(1)[0], 1, True),
    "cosine_similarity": (lambda T, a, b: _f(T).cosine_similarity(a, b), 2, False),
    "sdpa": (
        lambda T, a, b: _f(T).scaled_dot_product_attention(
            a.reshape(1, 4, 12), b.reshape(1, 4, 12), a.reshape(1, 4, 12)
        ),
        2,
        False,
    ),
    "interpolate": (
        lambda T, a: _f(T).interpolate(a.reshape(2, 2, 3, 4), scale_factor=2, mode="bilinear"),
        1,
        False,
    ),
}


def _same_within_bf16(e, t, what: str, exact: bool) -> None:
    """Same dtype and shape; values bit for bit when `exact`, else within torch's bfloat16 tolerance (rtol
    1.6e-2) of the result's scale: a few bfloat16 ulps where the two round at different places."""
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (what, e.dtype, t.dtype)
    a, b = to_np(e).astype(np.float32), to_np(t).astype(np.float32)
    assert a.shape == b.shape, what
    if exact:
        np.testing.assert_array_equal(a, b, err_msg=what)
    else:
        np.testing.assert_allclose(
            a, b, rtol=1.6e-2, atol=1.6e-2 * float(np.nanmax(np.abs(b), initial=1e-3)), err_msg=what
        )


@pytest.mark.parametrize("name", list(OPS))
def test_op_values_and_gradients_against_torch(name):
    fn, n, exact = OPS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    base = [rng.standard_normal((4, 12)).astype(np.float32).astype(BF16) for _ in range(n)]
    t_in = [to_torch(a).requires_grad_() for a in base]
    e_in = [to_engine(a).requires_grad_() for a in base]
    to, eo = fn(torch, *t_in), fn(engine, *e_in)
    _same_within_bf16(eo, to, name, exact)
    if not to.requires_grad:
        return
    g = rng.standard_normal(tuple(to.shape)).astype(np.float32).astype(BF16)
    to.backward(to_torch(g))
    eo.backward(to_engine(g))
    for i, (e, t) in enumerate(zip(e_in, t_in)):
        if t.grad is not None:
            assert e.grad is not None and e.grad.dtype is engine.bfloat16, (name, i)
            _same_within_bf16(e.grad, t.grad, f"{name} grad {i}", exact=False)


def test_python_float_operands_are_kept_in_float32_as_torch_does():
    # torch computes bf16 * 1.1 as float32(x) * float32(1.1), rounded once; rounding 1.1 to bfloat16 first
    # (1.1015625) would differ in most elements
    x = np.linspace(-3, 3, 257, dtype=np.float32).astype(BF16)
    ours, theirs = to_engine(x) * 1.1, to_torch(x) * 1.1
    np.testing.assert_array_equal(to_np(ours).view(np.int16), to_np(theirs).view(np.int16))
    first_rounded = (x.astype(np.float32) * np.float32(BF16.type(1.1))).astype(BF16)
    assert (first_rounded != to_np(theirs)).any()  # the check above could tell the two apart


def test_sums_accumulate_in_float32_like_torch():
    # 4096 ones plus one: a bfloat16 accumulator stops at 256; torch's float32 one reaches 4097 (rounded 4096)
    x = np.ones(4097, np.float32).astype(BF16)
    close(to_engine(x).sum(), to_torch(x).sum(), rtol=0, atol=0)
    assert to_engine(x).sum().item() == 4096.0
    assert float(np.add.reduce(x)) != 4096.0  # what NumPy's bfloat16 loop gives instead


def test_matmul_and_conv_compute_in_float32_and_round_once():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 256)).astype(np.float32).astype(BF16)
    b = rng.standard_normal((256, 32)).astype(np.float32).astype(BF16)
    expected = (a.astype(np.float32) @ b.astype(np.float32)).astype(BF16)
    got = to_engine(a) @ to_engine(b)
    assert got.dtype is engine.bfloat16
    np.testing.assert_array_equal(to_np(got).astype(np.float32), expected.astype(np.float32))
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32).astype(BF16)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32).astype(BF16)
    ref = engine.nn.functional.conv2d(to_engine(x).float(), to_engine(w).float()).numpy().astype(BF16)
    np.testing.assert_array_equal(to_np(engine.nn.functional.conv2d(to_engine(x), to_engine(w))), ref)


def test_the_gpu_path_refuses_bfloat16_cleanly():
    from engine.backend import cuda_kernels as K
    from engine.backend import cupy_backend

    x = engine.ones(4, dtype=engine.bfloat16)
    assert not K.takes(x)  # the kernels take float32 and float16 only: bfloat16 never reaches them
    with pytest.raises(TypeError, match="CUDA kernel takes float32 or float16, got bfloat16"):
        K._suffix(x.numpy(), "softmax")
    with pytest.raises(TypeError, match="bfloat16 tensors live on the CPU only"):
        cupy_backend.from_numpy(x.numpy())
    with pytest.raises(TypeError, match="bfloat16 tensors live on the CPU only"):
        cupy_backend.new("zeros", (2,), D.bfloat16.np)


def test_bfloat16_files_round_trip_with_torch(tmp_path):
    from engine import serialization as S

    x = engine.tensor([1.5, -2.25, 3.3, float("inf")]).bfloat16()
    engine.save({"x": x}, tmp_path / "a.pt")
    theirs = torch.load(tmp_path / "a.pt", weights_only=True)["x"]
    assert theirs.dtype is torch.bfloat16 and theirs.float().tolist() == x.float().tolist()
    S.save_safetensors({"x": x}, tmp_path / "a.safetensors")
    back = S.load_safetensors(tmp_path / "a.safetensors")["x"]
    assert back.dtype is engine.bfloat16 and back.float().tolist() == x.float().tolist()


MODULES = {
    "LSTM": (lambda nn: nn.LSTM(6, 5, batch_first=True), (2, 4, 6)),
    "GRU": (lambda nn: nn.GRU(6, 5, batch_first=True), (2, 4, 6)),
    "BatchNorm2d": (lambda nn: nn.BatchNorm2d(3), (2, 3, 4, 4)),
    "LayerNorm": (lambda nn: nn.LayerNorm(6), (2, 4, 6)),
    "TransformerEncoderLayer": (
        lambda nn: nn.TransformerEncoderLayer(6, 2, 12, dropout=0.0, batch_first=True),
        (2, 4, 6),
    ),
    "ConvTranspose2d": (lambda nn: nn.ConvTranspose2d(3, 2, 3), (2, 3, 4, 4)),
    "GroupNorm": (lambda nn: nn.GroupNorm(1, 3), (2, 3, 4, 4)),
    "Conv2d": (lambda nn: nn.Conv2d(3, 2, 3, padding=1), (2, 3, 4, 4)),
    "PReLU": (lambda nn: nn.PReLU(), (2, 6)),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_bfloat16_modules_forward_and_backward_as_torch(name):
    """module.bfloat16(): outputs, input and parameter gradients in bfloat16, within a few bfloat16 ulps of
    torch's (of the largest value: normalisation gradients cancel)."""
    from torch_compare import copy_torch_into_engine

    make, shape = MODULES[name]
    torch.manual_seed(0)
    tm, em = make(torch.nn), make(engine.nn)
    copy_torch_into_engine(em, tm)
    tm, em = tm.bfloat16(), em.bfloat16()
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape).astype(np.float32).astype(BF16)
    ti, ei = to_torch(a).requires_grad_(), to_engine(a).requires_grad_()
    to, eo = tm(ti), em(ei)
    to, eo = (to[0], eo[0]) if isinstance(to, tuple) else (to, eo)
    _same_within_bf16(eo, to, name, exact=False)
    g = rng.standard_normal(tuple(to.shape)).astype(np.float32).astype(BF16)
    to.backward(to_torch(g))
    eo.backward(to_engine(g))
    pairs = [("input", ei, ti)] + [(n, p, dict(tm.named_parameters())[n]) for n, p in em.named_parameters()]
    for what, e, t in pairs:
        assert e.grad.dtype is engine.bfloat16, what
        b = to_np(t.grad).astype(np.float32)
        np.testing.assert_allclose(to_np(e.grad).astype(np.float32), b, rtol=0,
                                   atol=3e-2 * float(np.abs(b).max(initial=1e-3)), err_msg=f"{name} {what}")
