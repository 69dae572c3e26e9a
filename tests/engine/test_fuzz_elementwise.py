"""Seeded differential fuzzing of elementwise arithmetic and type promotion against torch.

Cases are drawn at random (fixed seeds): operand kinds (tensor, 0-d tensor, Python int/float/bool, in both
orders), dtypes, broadcastable (now and then incompatible) shapes, layouts, special values, integer division
by zero and negative numbers, in-place ops whose result type cannot be cast back. sweep_harness.check then
compares results, exceptions and gradients."""
from __future__ import annotations

import operator
import os

import numpy as np
import pytest
from fuzz_inputs import DTYPES, FLOATS, Drawn, rand_shape
from sweep_harness import check

# CI's fixed case count; set WIREGRAD_FUZZ_CASES higher to search further (same seeds, more of them)
CASES_PER_OP = int(os.environ.get("WIREGRAD_FUZZ_CASES", "60"))

SCALARS = (0, 1, 2, -3, 7, 0.5, -1.5, 2.0, -0.0, float("nan"), float("inf"), -float("inf"), True, False)


def rand_scalar(rng):
    return SCALARS[int(rng.integers(len(SCALARS)))]


def other_shape(rng, shape: tuple) -> tuple:
    """A shape that broadcasts with `shape` (fewer dims, 1s), the same one, or now and then one that does
    not."""
    r = rng.random()
    if r < 0.35:
        return shape
    if r < 0.55:
        return tuple(1 if rng.random() < 0.5 else n for n in shape)
    if r < 0.7 and shape:
        return shape[int(rng.integers(len(shape) + 1)):]
    if r < 0.8:
        return ()
    if r < 0.9:
        return (*(1 for _ in range(int(rng.integers(0, 2)))), *shape)
    return rand_shape(rng)  # usually incompatible: torch's RuntimeError names both sizes


class Operands:
    """The drawn operands: tensors (their arrays go to check) and Python scalars (baked into the call)."""

    def __init__(self, rng, n: int = 2, scalars: bool = True, dtypes=DTYPES):
        first = Drawn(rng, dtype=dtypes[int(rng.integers(len(dtypes)))])
        self.items = [first]
        for _ in range(n - 1):
            if scalars and rng.random() < 0.35:
                self.items.append(rand_scalar(rng))
            else:
                shape = other_shape(rng, first.shape)
                self.items.append(Drawn(rng, shape, dtype=dtypes[int(rng.integers(len(dtypes)))]))
        if scalars and rng.random() < 0.3:  # the scalar on the left: radd, rsub, rpow...
            self.items.reverse()
        self.arrays = [x.arr for x in self.items if isinstance(x, Drawn)]

    def bind(self, T, tensors):
        it = iter(tensors)
        return [x.view(T, next(it)) if isinstance(x, Drawn) else x for x in self.items]

    def __repr__(self) -> str:
        return ",".join(repr(x) for x in self.items)


BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
    "ge": operator.ge,
}
FUNCTIONS = {  # torch.<name>(input, other): the first operand must be a tensor
    "add_alpha": lambda T, a, b: T.add(a, b, alpha=2), "sub_alpha": lambda T, a, b: T.sub(a, b, alpha=-1),
    "div_floor": lambda T, a, b: T.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda T, a, b: T.div(a, b, rounding_mode="trunc"),
    "remainder": lambda T, a, b: T.remainder(a, b), "fmod": lambda T, a, b: T.fmod(a, b),
    "maximum": lambda T, a, b: T.maximum(a, b), "minimum": lambda T, a, b: T.minimum(a, b),
    "fmax": lambda T, a, b: T.fmax(a, b), "fmin": lambda T, a, b: T.fmin(a, b),
}
INPLACE = {
    "iadd": operator.iadd, "isub": operator.isub, "imul": operator.imul, "itruediv": operator.itruediv,
    "ifloordiv": operator.ifloordiv, "imod": operator.imod, "ipow": operator.ipow,
    "add_": lambda a, b: a.add_(b), "mul_": lambda a, b: a.mul_(b), "div_": lambda a, b: a.div_(b),
    "clamp_": lambda a, b: a.clamp_(min=b), "lt_": lambda a, b: a.lt_(b),
}
UNARY = {
    "round": lambda T, a: T.round(a), "round_dec": lambda T, a: T.round(a, decimals=1),
    "floor": lambda T, a: T.floor(a), "ceil": lambda T, a: T.ceil(a), "trunc": lambda T, a: T.trunc(a),
    "sign": lambda T, a: T.sign(a), "neg": lambda T, a: -a, "abs": lambda T, a: T.abs(a),
}
NOT_DIFFERENTIABLE = {"floordiv", "div_floor", "div_trunc", "ifloordiv", "lt_",
                      "eq", "ne", "lt", "le", "gt", "ge"}


def _binary_case(name, op, rng):
    ops = Operands(rng)
    if name == "pow" and isinstance(ops.items[0], bool):
        # torch bug: `True ** tensor` fails an internal assert (c10/core/Scalar.cpp "unknown ivalue tag 4")
        ops.items[0] = int(ops.items[0])

    def fn(T, *tensors):
        return op(*ops.bind(T, tensors))
    return fn, ops


def _function_case(name, op, rng):
    ops = Operands(rng)
    if not isinstance(ops.items[0], Drawn):
        ops.items.reverse()
    if name.startswith(("maximum", "minimum", "fmax", "fmin")) and not isinstance(ops.items[1], Drawn):
        # tensors only (else torch's TypeError)
        ops.items[1] = Drawn(rng, other_shape(rng, ops.items[0].shape))
        ops.arrays = [x.arr for x in ops.items]

    def fn(T, *tensors):
        return op(T, *ops.bind(T, tensors))
    return fn, ops


def _inplace_case(name, op, rng):
    ops = Operands(rng)
    if not isinstance(ops.items[0], Drawn):
        ops.items.reverse()
    raw = rng.random() < 0.25  # straight into the (maybe expanded) view, not a copy of it

    def fn(T, *tensors):
        a, b = ops.bind(T, tensors)
        target = a if raw else a.clone()
        r = op(target, b)
        return r, target
    return fn, ops, raw


def _unary_case(name, op, rng):
    ops = Operands(rng, n=1)

    def fn(T, *tensors):
        return op(T, *ops.bind(T, tensors))
    return fn, ops


def _broadcasts_into(shape, others) -> bool:
    try:
        return np.broadcast_shapes(shape, *others) == tuple(shape)
    except ValueError:
        return True  # the forward raises; there is no backward to run


def _grad_ok(rng, ops, name) -> bool:
    if name == "mod" and not isinstance(ops.items[0], Drawn):
        # torch has no derivative for remainder(Scalar, Tensor) (its node is NotImplemented and backward
        # raises); the engine differentiates it (-floor(s / x)), which is no bug to copy
        return False
    tensors = [x for x in ops.items if isinstance(x, Drawn)]
    if len({x.dtype for x in tensors if x.dtype in FLOATS}) > 1:
        # mixed precisions: the gradient of the wider operand is computed (and summed over broadcast dims)
        # in the result's narrower dtype, so summation order shows at the wider dtype's tolerance
        return False
    if name in ("pow", "ipow") and tensors[0].dtype not in FLOATS:
        # torch takes log(base) of an integer base in the default dtype, float32, even for a float64
        # result: its exponent gradient is float32-accurate only (the engine's is more accurate)
        return False
    if name == "clamp" and not _broadcasts_into(tensors[0].shape, [x.shape for x in tensors[1:]]):
        # torch bug: clamp's backward with tensor bounds combines its masks in place (logical_and_), so a
        # bound that broadcasts x to a bigger shape raises "output with shape [2] doesn't match the
        # broadcast shape [1, 2]" in backward (the forward works)
        return False
    if name in ("pow", "ipow") and isinstance(ops.items[1], Drawn) and ops.items[1].dtype == "bool":
        # torch bug: the backward of x ** bool_tensor computes `exponent - 1` on the bool tensor and raises
        # "Subtraction ... with a bool tensor is not supported" (the forward works)
        return False
    return (name not in NOT_DIFFERENTIABLE and rng.random() < 0.5
            and any(x.dtype in ("float32", "float64") for x in tensors))


def _params(table, make, seed0):
    params = []
    for k, (name, op) in enumerate(table.items()):
        for i in range(CASES_PER_OP):
            rng = np.random.default_rng([seed0, k, i])
            made = make(name, op, rng)
            fn, ops = made[0], made[1]
            grad = _grad_ok(rng, ops, name)
            if len(made) > 2 and made[2]:
                grad = False  # an in-place op on a view of a leaf that requires grad: torch refuses it
            params.append(pytest.param(fn, ops.arrays, grad, id=f"{name}-{i}-{ops}"))
    return params


@pytest.mark.parametrize("fn, arrays, grad", _params(BINARY, _binary_case, 11))
def test_operator_matches_torch(fn, arrays, grad):
    check(fn, *arrays, grad=grad)


@pytest.mark.parametrize("fn, arrays, grad", _params(FUNCTIONS, _function_case, 12))
def test_binary_function_matches_torch(fn, arrays, grad):
    check(fn, *arrays, grad=grad)


@pytest.mark.parametrize("fn, arrays, grad", _params(INPLACE, _inplace_case, 13))
def test_inplace_op_matches_torch(fn, arrays, grad):
    check(fn, *arrays, grad=grad, node_names=False)


@pytest.mark.parametrize("fn, arrays, grad", _params(UNARY, _unary_case, 14))
def test_rounding_and_sign_match_torch(fn, arrays, grad):
    check(fn, *arrays, grad=grad)


# --------------------------------------------------------------------------- clamp and where
def _clamp_bound(rng, shape):
    r = rng.random()
    if r < 0.3:
        return None
    if r < 0.7:
        return rand_scalar(rng)
    return Drawn(rng, other_shape(rng, shape), dtype=DTYPES[int(rng.integers(len(DTYPES)))])


def _clamp_case(name, op, rng):
    ops = Operands(rng, n=1)
    ops.items += [_clamp_bound(rng, ops.items[0].shape), _clamp_bound(rng, ops.items[0].shape)]
    ops.arrays = [x.arr for x in ops.items if isinstance(x, Drawn)]

    def fn(T, *tensors):
        x, lo, hi = ops.bind(T, tensors)
        return T.clamp(x, min=lo, max=hi)
    return fn, ops


def _where_case(name, op, rng):
    cond = Drawn(rng, dtype="bool" if rng.random() < 0.9 else str(rng.choice(["uint8", "float32"])))
    ops = Operands(rng, n=3)
    ops.items = [cond] + ops.items[:2]
    for j in (1, 2):
        if isinstance(ops.items[j], Drawn) and rng.random() < 0.6:
            ops.items[j] = Drawn(rng, other_shape(rng, cond.shape), dtype=ops.items[j].dtype)
    ops.arrays = [x.arr for x in ops.items if isinstance(x, Drawn)]

    def fn(T, *tensors):
        c, a, b = ops.bind(T, tensors)
        return T.where(c, a, b)
    return fn, ops


@pytest.mark.parametrize("fn, arrays, grad", _params({"clamp": None}, _clamp_case, 15)
                         + _params({"where": None}, _where_case, 16))
def test_clamp_and_where_match_torch(fn, arrays, grad):
    check(fn, *arrays, grad=grad)


def test_fuzz_draws_every_operand_kind():
    """The drawn operands include each dtype, Python scalars of each type on either side, and 0-d tensors."""
    seen = set()
    for p in _params(BINARY, _binary_case, 11):
        seen.update(part.split("[")[0] for part in p.id.split("-", 2)[2].split(","))
    assert {*FLOATS, "int32", "int64", "uint8", "bool", "True", "False", "nan", "0.5", "7"} <= seen
