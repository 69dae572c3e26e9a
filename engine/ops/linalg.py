"""Matrix products: matmul (batched, broadcast), mm, bmm, mv, dot, outer. BLAS does the work."""
from __future__ import annotations

import numpy as np

from .. import _strides as S
from ..amp import _state as _amp_state
from ..amp import autocast_cast
from ..autograd.function import Function
from ..tensor import Tensor


def _check_same(a: Tensor, b: Tensor, name: str) -> None:
    if a._dtype is not b._dtype:
        raise RuntimeError(f"{name}: expected m1 and m2 to have the same dtype, but got: {a._dtype.name} != "
                           f"{b._dtype.name}")
    if a._storage.device != b._storage.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{a.device} and {b.device}!")


class Matmul(Function):
    """a @ b for a, b of >= 2 dims with broadcast batch dims; the engine sums broadcast grads back."""

    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        A, B = a._arr, b._arr
        if A.dtype == np.float16 and A.__class__ is np.ndarray:
            # NumPy has no half-precision BLAS: accumulate in float32 like PyTorch's CPU kernel, round once.
            return np.matmul(A.astype(np.float32), B.astype(np.float32)).astype(np.float16)
        return np.matmul(A, B)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = g @ b.mT if ctx.needs_input_grad[0] else None
        gb = a.mT @ g if ctx.needs_input_grad[1] else None
        return ga, gb

    def name(self):
        return "MmBackward0" if len(self._input_meta[0][0]) == 2 and len(self._input_meta[1][0]) == 2 \
            else "BmmBackward0"


def matmul(input: Tensor, other: Tensor) -> Tensor:
    if not isinstance(other, Tensor) or not isinstance(input, Tensor):
        raise TypeError(f"matmul(): argument 'other' must be Tensor, not {type(other).__name__}")
    if _amp_state.any:  # autocast: run in half precision
        input, other = autocast_cast(input, other)
    _check_same(input, other, "matmul")
    da, db = input.ndim, other.ndim
    if da == 0 or db == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    a = input.unsqueeze(0) if da == 1 else input
    b = other.unsqueeze(-1) if db == 1 else other
    if a._shape[-1] != b._shape[-2]:
        if da <= 2 and db <= 2:
            sa = "x".join(map(str, a._shape))
            sb = "x".join(map(str, b._shape))
            if da == 1 and db == 1:
                raise RuntimeError(f"inconsistent tensor size, expected tensor [{input._shape[0]}] and src "
                                   f"[{other._shape[0]}] to have the same number of elements, but got "
                                   f"{input._shape[0]} and {other._shape[0]} elements respectively")
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({sa} and {sb})")
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{list(b._shape[:-2])}, {a._shape[-1]}] but got: {list(b._shape)}; matmul of "
                           f"{list(input._shape)} and {list(other._shape)}")
    if a._shape[:-2] != b._shape[:-2]:
        try:
            S.broadcast_shapes(a._shape[:-2], b._shape[:-2])
        except RuntimeError as e:
            raise RuntimeError(
                f"matmul: batch dimensions of {list(input._shape)} and {list(other._shape)} do not "
                f"broadcast: {e}"
            ) from None
    out = Matmul.apply(a, b)
    if da == 1:
        out = out.squeeze(-2)
    if db == 1:
        out = out.squeeze(-1)
    return out


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"{'self' if input.ndim != 2 else 'mat2'} must be a matrix")
    return matmul(input, mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if input.ndim != 3 else "batch2 must be a 3D tensor")
    if input._shape[0] != mat2._shape[0]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{input._shape[0]}, "
            f"{input._shape[2]}] but got: [{mat2._shape[0]}, {mat2._shape[1]}]."
        )
    return matmul(input, mat2)


def mv(input, vec):
    return matmul(input, vec)


def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return matmul(input, other)


vdot = inner = dot


def outer(input, vec2):
    return input.unsqueeze(1) * vec2.unsqueeze(0)


ger = outer


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    r = mm(mat1, mat2)
    if alpha != 1:
        r = r * alpha
    return r + (input if beta == 1 else input * beta)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    r = bmm(batch1, batch2)
    if alpha != 1:
        r = r * alpha
    return r + (input if beta == 1 else input * beta)


def einsum(equation: str, *operands):
    """Einsum by reduction to broadcast multiply + sum (differentiable through those ops)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs = eq
        letters = [c for c in lhs.replace(",", "")]
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ins = lhs.split(",")
    if len(ins) != len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    if "." in eq:
        raise RuntimeError("einsum(): ellipsis is not supported here")
    all_letters = []
    for s in ins + [out]:
        for c in s:
            if c not in all_letters:
                all_letters.append(c)
    sizes = {}
    aligned = []
    for spec, t in zip(ins, operands):
        if len(spec) != t.ndim:
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({len(spec)}) does not match "
                f"the number of dimensions ({t.ndim}) for operand"
            )
        # repeated letters in one operand: take the diagonal
        while len(set(spec)) != len(spec):
            for c in spec:
                if spec.count(c) > 1:
                    i = spec.index(c)
                    j = spec.index(c, i + 1)
                    t = t.diagonal(0, i, j)
                    spec = spec[:i] + spec[i + 1 : j] + spec[j + 1 :] + c
                    break
        for c, n in zip(spec, t._shape):
            sizes[c] = max(sizes.get(c, 1), n)
        perm = [spec.index(c) for c in all_letters if c in spec]
        t = t.permute(perm) if perm else t
        shape = [
            t._shape[[c for c in all_letters if c in spec].index(c)] if c in spec else 1 for c in all_letters
        ]
        aligned.append(t.reshape(shape))
    prod = aligned[0]
    for t in aligned[1:]:
        prod = prod * t
    red = tuple(i for i, c in enumerate(all_letters) if c not in out)
    r = prod.sum(dim=red) if red else prod
    kept = [c for c in all_letters if c in out]
    return r.permute([kept.index(c) for c in out]) if out else r
