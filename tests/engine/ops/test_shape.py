"""engine/ops/shape.py against torch: cat/stack (gradients split back, dtype promotion, legacy empties),
tril/triu, flip/roll/repeat/tile/repeat_interleave (values, gradients, result dtypes and errors)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sweep_harness import check
from torch_compare import arr, check_op, same_outcome

import engine


# ----------------------------------------------------------------------------- joining and shaping
def test_cat_stack_match_torch_and_split_gradients():
    for dim in (0, 1, -1):
        check_op(
            lambda a, b, d=dim: (
                (engine if isinstance(a, engine.Tensor) else torch).cat([a, b.t()], d)
                if d != 0
                else (engine if isinstance(a, engine.Tensor) else torch).cat([a, b.t()[:2]], d)
            ),
            arr(3, 3),
            arr(3, 3, seed=2),
        )
        check_op(
            lambda a, b, d=dim: (engine if isinstance(a, engine.Tensor) else torch).stack([a, b], d),
            arr(2, 3),
            arr(2, 3, seed=2),
        )
    check_op(
        lambda a, b: (engine if isinstance(a, engine.Tensor) else torch).cat([a, b]),
        arr(2, 3),
        arr(2, 3).astype(np.int64),
    )


def test_cat_promotes_dtypes_and_skips_legacy_empty_like_torch():
    for mod, tensors in (
        (engine, (engine.tensor([1, 2]), engine.tensor([0.5]), engine.zeros(0))),
        (torch, (torch.tensor([1, 2]), torch.tensor([0.5]), torch.zeros(0))),
    ):
        out = mod.cat(tensors)
        assert out.tolist() == [1.0, 2.0, 0.5]
        assert str(out.dtype).split(".")[-1] == "float32"


@pytest.mark.parametrize("diag", [-1, 0, 2])
def test_tril_triu_match_torch(diag):
    check_op(lambda t: t.tril(diag), arr(4, 5))
    check_op(lambda t: t.triu(diag), arr(2, 4, 3))


def test_flip_roll_repeat_tile_repeat_interleave_match_torch():
    check_op(lambda t: t.flip(0), arr(3, 4))
    check_op(lambda t: t.flip((0, -1)), arr(2, 3, 4))
    check_op(lambda t: t.roll(1), arr(3, 4))
    check_op(lambda t: t.roll(-2, 1), arr(3, 4))
    check_op(lambda t: t.roll((1, 2), (0, 1)), arr(3, 4))
    check_op(lambda t: t.repeat(2, 1, 3), arr(3, 4))
    check_op(lambda t: t.tile((2,)), arr(3, 4))
    check_op(lambda t: t.repeat_interleave(2, dim=1), arr(3, 4))
    check_op(lambda t: t.repeat_interleave(2), arr(3, 4))
    check_op(lambda t: t.diag(), arr(3, 4))
    check_op(lambda t: t.diag(1), arr(4))


# ----------------------------------------------------------------------------- repeat_interleave dtypes
@pytest.mark.parametrize("build", [
    lambda lib: lib.repeat_interleave(lib.tensor([1, 2], dtype=lib.int32)),
    lambda lib: lib.repeat_interleave(lib.tensor([], dtype=lib.int32)),
    lambda lib: lib.repeat_interleave(lib.tensor([3, 0, 2])),
    lambda lib: lib.repeat_interleave(lib.tensor([1, 2], dtype=lib.int16)),
    lambda lib: lib.repeat_interleave(lib.tensor([1.0, 2.0])),
    lambda lib: lib.repeat_interleave(lib.tensor(3, dtype=lib.int32)),
    lambda lib: lib.repeat_interleave(lib.tensor([1, -2], dtype=lib.int32)),
    lambda lib: lib.tensor([1, 2], dtype=lib.int32).repeat_interleave(lib.tensor([1, 2], dtype=lib.int32)),
    lambda lib: lib.tensor([1.0, 2.0]).repeat_interleave(lib.tensor([1, 2], dtype=lib.int32)),
    lambda lib: lib.tensor([1.0, 2.0]).repeat_interleave(lib.tensor([2], dtype=lib.int16)),
    lambda lib: lib.tensor([1.0, 2.0]).repeat_interleave(lib.tensor([2.0])),
    lambda lib: lib.tensor([1.0, 2.0]).repeat_interleave(lib.tensor([1, -2])),
    lambda lib: lib.tensor([[1, 2]], dtype=lib.int32).repeat_interleave(lib.tensor([1, 2], dtype=lib.int32),
                                                                        dim=1),
])
def test_repeat_interleave_result_dtype_and_repeats_checks_match_torch(build):
    same_outcome(build)


# ----------------------------------------------------------------------------- roll
@pytest.mark.parametrize("args", [
    ((1, 2), (0,)), ((1,), (0, 1)), ((1, 2), 0), (1, (0, 1)), ((1, 2), None), ((), ()), ((), None),
    ((), (0,)),
    ((1,), ()), (1, ()), ((7,), None), ([1, 2], [0, 1]), ((1, 2), (1, 0)), (1, 2), (1, -3), ((1, 2), (0, 5)),
    (1.5, 0), ((1.5,), (0,)), (1, 0.5), (1, (0.5,)), (True, 0), (None, 0), ((-4, 5), (-1, -2)),
])
def test_roll_values_and_errors_match_torch(args):
    same_outcome(lambda T: T.roll(T.arange(6.0).reshape(2, 3), *args))


@pytest.mark.parametrize("args", [(1, 0), (1, -1), ((1,), (0,)), (1, None), (2, ())])
def test_roll_of_a_0d_tensor_matches_torch(args):
    same_outcome(lambda T: T.roll(T.tensor(3.0), *args))


@pytest.mark.parametrize("args", [((1, -2), (1, 0)), (4, None), ((2,), (-1,))])
def test_roll_gradients_match_torch(args):
    check(lambda T, x: x.roll(*args), arr(2, 3, seed=1), grad=True)
