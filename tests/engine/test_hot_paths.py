"""Training hot paths: leaves adopt fresh gradients without a copy, fast kernels agree with torch."""

import numpy as np
import pytest

import engine
from engine.autograd.function import Function
from engine.tensor import _wrap_array

_made = []


class _FreshGrads(Function):
    """y = a + b whose backward returns two brand-new gradient arrays (remembered in _made)."""

    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        return a._arr + b._arr

    @staticmethod
    def backward(ctx, g):
        ga, gb = np.array(g._arr), np.array(g._arr)
        _made[:] = [ga, gb]
        return _wrap_array(ga), _wrap_array(gb)


def test_leaf_adopts_a_fresh_gradient_without_copying_it():
    a = engine.ones(3, requires_grad=True)
    b = engine.ones(3, requires_grad=True)
    _FreshGrads.apply(a, b).sum().backward()
    # both the first and the last gradient returned by the node are stolen, not cloned
    assert np.shares_memory(a.grad._arr, _made[0])
    assert np.shares_memory(b.grad._arr, _made[1])


def test_gradient_shared_by_two_leaves_is_copied_for_each():
    a = engine.ones(3, requires_grad=True)
    b = engine.ones(3, requires_grad=True)
    (a + b).sum().backward()  # add's backward hands the same gradient to both inputs
    assert not np.shares_memory(a.grad._arr, b.grad._arr)
    a.grad.add_(1.0)
    assert b.grad.tolist() == [1.0, 1.0, 1.0]


def test_importing_the_engine_keeps_freed_host_memory_for_reuse_on_glibc():
    import os
    import sys

    from engine.backend import host_allocator

    if sys.platform.startswith("linux") and os.environ.get("WIREGRAD_MALLOC_TUNING", "1") != "0":
        import ctypes

        try:
            ctypes.CDLL("libc.so.6").mallopt  # noqa: B018 - glibc present?
        except (OSError, AttributeError):
            assert host_allocator.tune() is False
            return
        assert host_allocator.tuned
    else:
        assert not host_allocator.tuned


def test_max_pool_picks_the_first_of_tied_maxima_and_propagates_nan_like_torch():
    import torch

    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = 2.0  # a tie inside the first window
    x[0, 0, 3, 3] = np.nan
    xe, xt = engine.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ye, ie = engine.nn.functional.max_pool2d(xe, 2, return_indices=True)
    yt, it = torch.nn.functional.max_pool2d(xt, 2, return_indices=True)
    np.testing.assert_array_equal(ye.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(ie.numpy(), it.numpy())
    ye.sum().backward()
    yt.sum().backward()
    np.testing.assert_array_equal(xe.grad.numpy(), xt.grad.numpy())


def test_max_pool_with_a_kernel_of_more_than_256_offsets_matches_torch():
    import torch

    x = np.random.default_rng(3).standard_normal((2, 2, 20, 20)).astype(np.float32)
    xe, xt = engine.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ye, ie = engine.nn.functional.max_pool2d(xe, 17, stride=3, return_indices=True)
    yt, it = torch.nn.functional.max_pool2d(xt, 17, stride=3, return_indices=True)
    np.testing.assert_array_equal(ie.numpy(), it.numpy())
    ye.sum().backward()
    yt.sum().backward()
    np.testing.assert_array_equal(xe.grad.numpy(), xt.grad.numpy())


def test_lenet_conv_input_gradient_stays_float32_and_matches_torch():
    import torch

    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 6, 12, 12)).astype(np.float32)
    w = rng.standard_normal((16, 6, 5, 5)).astype(np.float32)
    xe, we = engine.tensor(x, requires_grad=True), engine.tensor(w, requires_grad=True)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    g = rng.standard_normal((8, 16, 8, 8)).astype(np.float32)
    engine.nn.functional.conv2d(xe, we).backward(engine.tensor(g))
    torch.nn.functional.conv2d(xt, wt).backward(torch.tensor(g))
    assert xe.grad.dtype == engine.float32 and xe.grad._arr.dtype == np.float32
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(we.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_a_second_backward_accumulates_into_the_same_grad_tensor_in_place_like_torch():
    import torch

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    pe, pt = engine.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for p in (pe, pt):
        (p * p).sum().backward()
    ge, gt = pe.grad, pt.grad
    version = ge._version
    for p in (pe, pt):
        (p * 3).sum().backward()
    assert pe.grad is ge and pt.grad is gt
    assert ge._version > version
    np.testing.assert_array_equal(pe.grad.numpy(), pt.grad.numpy())


def test_backward_of_a_float64_scalar_seeds_a_float64_gradient():
    p = engine.tensor([1.0, 2.0], dtype=engine.float64, requires_grad=True)
    (p * p).sum().backward()
    assert p.grad.dtype == engine.float64
    assert p.grad.tolist() == [2.0, 4.0]


def test_plain_mean_cross_entropy_matches_torch_and_survives_a_retained_second_backward():
    import torch

    rng = np.random.default_rng(5)
    x = (rng.standard_normal((16, 7)) * 4).astype(np.float32)
    y = rng.integers(0, 7, 16)
    xe, xt = engine.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    le = engine.nn.functional.cross_entropy(xe, engine.tensor(y))
    lt = torch.nn.functional.cross_entropy(xt, torch.tensor(y))
    np.testing.assert_allclose(le.item(), lt.item(), rtol=1e-6)
    le.backward(retain_graph=True)
    first = xe.grad.numpy().copy()
    le.backward()
    lt.backward()
    np.testing.assert_allclose(first, xt.grad.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(xe.grad.numpy(), 2 * first, rtol=1e-6)


def test_default_cross_entropy_node_records_two_inputs_and_agrees_with_the_general_node_to_second_order():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 4))
    y = engine.tensor(rng.integers(0, 4, 5))
    xa, xb = engine.tensor(x, requires_grad=True), engine.tensor(x, requires_grad=True)
    default = engine.nn.functional.cross_entropy(xa, y)
    general = engine.nn.functional.cross_entropy(xb, y, weight=engine.ones(4, dtype=engine.float64))
    assert default.grad_fn.name() == general.grad_fn.name() == "NllLossBackward0"
    assert len(default.grad_fn._next) == 2 and default.grad_fn._next[1] is None  # recorded: logits, targets
    assert len(default.grad_fn.next_functions) == 1  # shown as torch's node: the logits' edge only
    ga, = engine.autograd.grad(default, xa, create_graph=True)
    gb, = engine.autograd.grad(general, xb, create_graph=True)
    np.testing.assert_allclose(ga.detach().numpy(), gb.detach().numpy(), rtol=1e-12)
    hess_a, = engine.autograd.grad(ga.square().sum(), xa)
    hess_b, = engine.autograd.grad(gb.square().sum(), xb)
    np.testing.assert_allclose(hess_a.numpy(), hess_b.numpy(), rtol=1e-10, atol=1e-14)
    assert engine.autograd.gradcheck(lambda t: engine.nn.functional.cross_entropy(t, y), (xa,))


# ---------------------------------------------------------------------- arithmetic's inline common case
_ARITH = [("add", "AddBackward0", np.add), ("sub", "SubBackward0", np.subtract),
          ("mul", "MulBackward0", np.multiply), ("div", "DivBackward0", np.true_divide)]


def _node_fields(node):
    """What the scheduler and the graph views read of a node, with tensors by identity."""
    return (type(node), node.next_functions, node._input_meta, node.needs_input_grad,
            [id(t) if t is not None else None for t in node._saved], list(node._saved_versions), node.scope)


@pytest.mark.parametrize("op,node_name,ufunc", _ARITH)
@pytest.mark.parametrize("ra,rb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4)), ((3, 1), (1, 4)),
                                    ((2, 1, 4), (3, 1)), ((0, 4), (4,))])
def test_inline_arithmetic_makes_the_general_paths_result_and_node(op, node_name, ufunc, ra, rb, shapes):
    from engine.ops import elementwise as E

    rng = np.random.default_rng(1)
    av, bv = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1]) + 3.0
    a = engine.tensor(av, dtype=engine.float32, requires_grad=ra)
    b = engine.tensor(bv, dtype=engine.float32, requires_grad=rb)
    a0 = (a * 1.0) if ra else a  # a non-leaf input too: its edge is a node, not an AccumulateGrad
    node_cls = getattr(E, node_name)
    saves = {"add": E._SAVES_NOTHING, "sub": E._SAVES_NOTHING, "mul": E._SAVES_LIKE_MUL,
             "div": E._SAVES_LIKE_DIV}[op]
    fast = E._plain_pair(node_cls, ufunc, a0, b, saves)
    assert fast is not None  # the inline path took this case
    general = node_cls.apply(a0, b, *((1,) if op in ("add", "sub") else (None,) if op == "div" else ()))
    assert getattr(engine, op)(a0, b).__class__ is engine.Tensor
    np.testing.assert_array_equal(fast.detach().numpy(), general.detach().numpy())
    assert (fast._shape, fast._strides, fast._offset, fast._dtype) == (
        general._shape, general._strides, general._offset, general._dtype)
    import torch

    assert fast.stride() == getattr(torch, op)(torch.tensor(av), torch.tensor(bv)).stride()
    assert fast.requires_grad == general.requires_grad == (ra or rb)
    if not (ra or rb):
        assert fast.grad_fn is None and general.grad_fn is None
        return
    assert _node_fields(fast.grad_fn) == _node_fields(general.grad_fn)
    assert len(fast.grad_fn.next_functions) == 2  # as torch's: one edge per operand, none for alpha
    assert fast.grad_fn._seq > max(e[0]._seq for e in fast.grad_fn.next_functions if e[0] is not None)
    # the same gradients, first and second order, through either node
    leaves = [t for t, r in ((a, ra), (b, rb)) if r]
    g_fast = engine.autograd.grad((fast * fast).sum(), leaves, create_graph=True)
    g_general = engine.autograd.grad((general * general).sum(), leaves, create_graph=True)
    for x, y in zip(g_fast, g_general):
        np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy())
    gg_fast, gg_general = (engine.autograd.grad(sum(g.sum() for g in gs), leaves, allow_unused=True,
                                                retain_graph=True) for gs in (g_fast, g_general))
    for x, y in zip(gg_fast, gg_general):
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_inline_arithmetic_records_the_module_scope_and_respects_no_grad():
    a = engine.ones(2, 3, requires_grad=True)
    b = engine.ones(2, 3)

    class Scale(engine.nn.Module):
        def forward(self, x):
            return x * b

    m = Scale()
    m._scope_name = "fc1"
    assert m(a).grad_fn.scope == "fc1"
    assert (a * b).grad_fn.scope is None
    with engine.no_grad():
        y = a * b
    assert y.grad_fn is None and not y.requires_grad


def test_inline_arithmetic_keeps_the_version_check_on_saved_inputs():
    a = engine.ones(2, 3, requires_grad=True)
    b = engine.full((2, 3), 2.0, requires_grad=True)
    h = a * 1.0
    y = h * b  # saves h (for b's gradient) and b (for h's)
    with engine.no_grad():
        h.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("case", ["mismatch", "transposed", "dtypes", "integers", "zero-d", "number",
                                  "anomaly"])
def test_inline_arithmetic_leaves_other_cases_to_the_general_path(case):
    from engine.ops import elementwise as E

    a = engine.ones(3, 4, requires_grad=True)
    b = engine.ones(3, 4)
    if case == "mismatch":
        b = engine.ones(5)
    elif case == "transposed":
        b = engine.ones(4, 3).t()
    elif case == "dtypes":
        b = engine.ones(3, 4, dtype=engine.float64)
    elif case == "integers":
        a, b = engine.ones(3, 4, dtype=engine.int64), engine.ones(3, 4, dtype=engine.int64)
    elif case == "zero-d":
        a, b = engine.tensor(1.0, requires_grad=True), engine.tensor(2.0)
    elif case == "number":
        b = np.float64(2.0)  # a NumPy scalar: the general path (a Python float or int is taken inline)
    if case == "anomaly":
        with engine.autograd.detect_anomaly():
            assert E._plain_pair(E.MulBackward0, np.multiply, a, b, E._SAVES_LIKE_MUL) is None
            assert (a * b).grad_fn._trace is not None
        return
    assert E._plain_pair(E.MulBackward0, np.multiply, a, b, E._SAVES_LIKE_MUL) is None
    import torch

    ta = torch.tensor(a.detach().numpy(), requires_grad=a.requires_grad) if case != "zero-d" else \
        torch.tensor(1.0, requires_grad=True)
    tb = torch.tensor(b.numpy()) if not isinstance(b, float) else float(b)
    if case == "transposed":
        tb = torch.ones(4, 3).t()
    if case == "mismatch":  # the general path raises torch's error
        with pytest.raises(RuntimeError) as got:
            a * b
        with pytest.raises(RuntimeError) as want:
            ta * tb
        assert str(got.value).startswith(str(want.value))  # the engine names both shapes too
        return
    y, ty = a * b, ta * tb
    assert y.stride() == ty.stride() and str(y.dtype).split(".")[1] == str(ty.dtype).split(".")[1]
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())


# ----------------------------------------------------------------------------- other per-op shortcuts
def test_sigmoid_matches_torch_in_the_tails_at_every_float_dtype():
    import torch

    x = np.concatenate([np.linspace(-120, 120, 4001), [np.nan, np.inf, -np.inf, 0.0, -0.0]])
    for dt in (np.float16, np.float32, np.float64):
        xs = x.astype(dt)
        got = engine.tensor(xs).sigmoid().numpy()
        want = torch.sigmoid(torch.tensor(xs)).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dt).eps, atol=0)  # exact 0 where torch's is
    y = engine.tensor(-3.0, dtype=engine.float64, requires_grad=True)
    s = y.sigmoid()
    s.backward()
    assert s.shape == () and abs(s.item() - 1 / (1 + np.exp(3.0))) < 1e-15
    assert abs(y.grad.item() - s.item() * (1 - s.item())) < 1e-15


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_sum_and_mean_match_torch_for_every_dim_form(dtype):
    import torch

    rng = np.random.default_rng(3)
    for shape in [(), (0,), (3,), (2, 0, 3), (2, 3, 4)]:
        a = (rng.standard_normal(shape) * 5).astype(dtype)
        e, t = engine.tensor(a), torch.tensor(a)
        dims = [None] + [d for n in range(len(shape)) for d in (n, (n,), (0, n) if n else (-1,))] + [()]
        for dim in dims:
            for keep in (False, True):
                args = () if dim is None else (dim, keep)
                got, want = e.sum(*args), t.sum(*args)
                assert got.shape == tuple(want.shape) and str(got.dtype)[7:] == str(want.dtype)[6:]
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
                if dtype.startswith("float"):
                    got, want = e.mean(*args), t.mean(*args)
                    assert got.shape == tuple(want.shape)
                    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    full = engine.ones(2, 3).sum()
    full.add_(1.0)  # a full reduction is a writable 0-d tensor of its own
    assert full.item() == 7.0


def test_indexing_with_an_int_makes_the_general_paths_view_and_node():
    import torch

    from engine.ops import views as V

    x = engine.arange(24.0).reshape(2, 3, 4).requires_grad_()
    t = torch.arange(24.0).reshape(2, 3, 4).requires_grad_()
    for i in (0, 1, -1, -2):
        got, want = x[i], t[i]
        general = V.basic_getitem(x, (i,))
        assert (got.shape, got.stride(), got.storage_offset()) == (
            tuple(want.shape), want.stride(), want.storage_offset()) == (
            general.shape, general.stride(), general.storage_offset())
        assert type(got.grad_fn) is type(general.grad_fn) and type(got.grad_fn).__name__ == "SelectBackward0"
    with pytest.raises(IndexError, match="index 2 is out of bounds for dimension 0 with size 2"):
        x[2]
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        engine.tensor(1.0)[0]
    (x[1][2] * 3).sum().backward()
    (t[1][2] * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("requires_grad", [False, True])
def test_views_made_from_the_tensors_own_array_share_its_memory_and_geometry(requires_grad):
    """transpose, permute and basic indexing take NumPy's view of the tensor's array instead of building one
    over the storage: the same memory, the engine's geometry, and writes land in the base (as torch)."""
    import torch

    ops = [lambda t: t.t(), lambda t: t.transpose(0, -1), lambda t: t.permute(1, 0), lambda t: t[:, 1:3],
           lambda t: t[1, ::2], lambda t: t[None, 0], lambda t: t[..., 2], lambda t: t[2:, :][0],
           lambda t: t[5:9]]
    for i, op in enumerate(ops):
        base = engine.arange(12.0).reshape(3, 4)
        x = base.clone().requires_grad_(requires_grad)
        h = x * 1.0 if requires_grad else x
        tx = torch.arange(12.0).reshape(3, 4)
        got, want = op(h), op(tx)
        assert (got.shape, got.stride(), got.storage_offset()) == (
            tuple(want.shape), want.stride(), want.storage_offset()), i
        assert got._arr.shape == got.shape and (got.numel() == 0 or np.shares_memory(got._arr, h._arr)), i
        for n, s, b in zip(got.shape, got.stride(), got._arr.strides):
            assert n <= 1 or s * got.element_size() == b, i
        with engine.no_grad():
            got.fill_(-1.0)
        want.fill_(-1.0)
        np.testing.assert_array_equal(h.detach().numpy(), tx.numpy())


def test_inline_arithmetic_takes_parameters_and_views_with_the_general_paths_node():
    """x @ W + b with parameters, and a row slice of an intermediate: inline, with the edges apply() makes (a
    parameter's AccumulateGrad, a view's grad_fn rebuilt after an in-place write)."""
    from engine.ops import elementwise as E

    w = engine.nn.Parameter(engine.randn(3, 4))
    b = engine.nn.Parameter(engine.randn(4))
    h = engine.randn(5, 4, requires_grad=True) * 1.0
    v = h[1:4]  # a recorded view, contiguous
    with engine.no_grad():
        h.add_(1.0)  # the view's grad_fn is now rebuilt from h's new history
    for x, y in ((w, b), (v, w), (v, b)):
        fast = E._plain_pair(E.AddBackward0, np.add, x, y, E._SAVES_NOTHING)
        assert fast is not None
        general = E.AddBackward0.apply(x, y, 1)
        assert _node_fields(fast.grad_fn) == _node_fields(general.grad_fn)
    import torch

    tw = torch.tensor(w.detach().numpy(), requires_grad=True)
    tb = torch.tensor(b.detach().numpy(), requires_grad=True)
    ((w * b + w) * w).sum().backward()
    ((tw * tb + tw) * tw).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("op,node_name,ufunc", _ARITH)
@pytest.mark.parametrize("number", [2.0, 3, -0.5, 0])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_inline_arithmetic_with_a_number_makes_the_general_paths_result_and_node(op, node_name, ufunc, number,
                                                                                dtype):
    import torch

    from engine.ops import elementwise as E

    a = engine.tensor(np.random.default_rng(2).standard_normal((3, 4)), dtype=getattr(engine, dtype),
                      requires_grad=True)
    h = a * 1.0
    saves = {"add": E._SAVES_NOTHING, "sub": E._SAVES_NOTHING, "mul": E._SAVES_LIKE_MUL,
             "div": E._SAVES_LIKE_DIV}[op]
    node_cls = getattr(E, node_name)
    fast = E._plain_pair(node_cls, ufunc, h, number, saves)
    assert fast is not None
    general = node_cls.apply(h, number, *((1,) if op in ("add", "sub") else (None,) if op == "div" else ()))
    np.testing.assert_array_equal(fast.detach().numpy(), general.detach().numpy())
    assert fast.dtype == general.dtype == getattr(engine, dtype) and fast.stride() == general.stride()
    assert _node_fields(fast.grad_fn) == _node_fields(general.grad_fn)
    assert (fast.grad_fn.sa, fast.grad_fn.sb) == (general.grad_fn.sa, general.grad_fn.sb) if op in (
        "mul", "div") else True
    (ga,) = engine.autograd.grad(fast.sum(), [a])
    t = torch.tensor(a.detach().numpy(), requires_grad=True)
    (gt,) = torch.autograd.grad(getattr(torch, op)(t * 1.0, number).sum(), [t])
    np.testing.assert_array_equal(ga.numpy(), gt.numpy())
