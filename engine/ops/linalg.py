"""Matrix products: matmul (batched, broadcast), mm, bmm, mv, dot, outer. BLAS does the work."""
from __future__ import annotations

import numpy as np

from .. import _strides as S
from .. import dtypes as D
from ..amp import _state as _amp_state
from ..amp import autocast_cast
from ..autograd.function import Function
from ..autograd.naming import torch_node
from ..tensor import Tensor


def _check_same(a: Tensor, b: Tensor, name: str) -> None:
    if a._dtype is not b._dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{D.cpp_type_name(a._dtype)} != {D.cpp_type_name(b._dtype)}")
    if a._storage.device is not b._storage.device and a._storage.device != b._storage.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{a.device} and {b.device}!")


class Matmul(Function):
    """a @ b with NumPy's matmul rules (1-D operands, broadcast batch dims); the engine sums broadcast
    gradients back to each input's shape."""

    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        A, B = a._arr, b._arr
        if a._dtype is D.float16 and A.__class__ is np.ndarray:
            # NumPy has no half-precision BLAS: accumulate in float32 like PyTorch's CPU kernel, round once.
            return np.matmul(A.astype(np.float32), B.astype(np.float32)).astype(np.float16)
        return np.matmul(A, B)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        da, db = len(a._shape), len(b._shape)
        if da == 1 and db == 1:
            return (g * b if ctx.needs_input_grad[0] else None), (g * a if ctx.needs_input_grad[1] else None)
        if da == 1:  # a vector is a one-row matrix, b a vector a one-column matrix
            a, g = a.unsqueeze(0), g.unsqueeze(-2)
        if db == 1:
            b, g = b.unsqueeze(-1), g.unsqueeze(-1)
        ga = g @ b.mT if ctx.needs_input_grad[0] else None
        gb = a.mT @ g if ctx.needs_input_grad[1] else None
        if ga is not None and da == 1:
            ga = ga.squeeze(-2)
        if gb is not None and db == 1:
            gb = gb.squeeze(-1)
        return ga, gb


# PyTorch names the node after the kernel its matmul dispatches to (batched operands are folded into a
# matrix product and viewed back, or expanded and cloned)
_MATMUL_NODES = {n: torch_node(Matmul, n) for n in (
    "MmBackward0", "BmmBackward0", "DotBackward0", "MvBackward0", "SqueezeBackward4", "UnsafeViewBackward0",
    "CloneBackward0")}


def _matmul_node(sa, sb):
    da, db = len(sa), len(sb)
    if da <= 2 and db <= 2:
        names = ("DotBackward0", "SqueezeBackward4", "MvBackward0", "MmBackward0")
        return _MATMUL_NODES[names[(da - 1) * 2 + db - 1]]
    if da == 2 or (da >= 3 and db >= 3 and sa[:-2] != sb[:-2]):
        return _MATMUL_NODES["CloneBackward0"]
    return _MATMUL_NODES["UnsafeViewBackward0"]


def _prepare(input: Tensor, other: Tensor):
    """The operands of a matrix product after autocast, or PyTorch's error naming both shapes."""
    if not isinstance(other, Tensor) or not isinstance(input, Tensor):
        raise TypeError(f"matmul(): argument 'other' must be Tensor, not {type(other).__name__}")
    if _amp_state.any:  # autocast: run in half precision
        input, other = autocast_cast(input, other)
    _check_same(input, other, "matmul")
    da, db = len(input._shape), len(other._shape)
    if da == 0 or db == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    sa = (1,) + input._shape if da == 1 else input._shape
    sb = other._shape + (1,) if db == 1 else other._shape
    if sa[-1] != sb[-2]:
        if da <= 2 and db <= 2:
            if da == 1 and db == 1:
                raise RuntimeError(f"inconsistent tensor size, expected tensor [{input._shape[0]}] and src "
                                   f"[{other._shape[0]}] to have the same number of elements, but got "
                                   f"{input._shape[0]} and {other._shape[0]} elements respectively")
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, sa))} and "
                               f"{'x'.join(map(str, sb))})")
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{list(sb[:-2])}, {sa[-1]}] but got: {list(sb)}; matmul of "
                           f"{list(input._shape)} and {list(other._shape)}")
    if sa[:-2] != sb[:-2]:
        try:
            S.broadcast_shapes(sa[:-2], sb[:-2])
        except RuntimeError as e:
            raise RuntimeError(
                f"matmul: batch dimensions of {list(input._shape)} and {list(other._shape)} do not "
                f"broadcast: {e}"
            ) from None
    return input, other


def matmul(input: Tensor, other: Tensor) -> Tensor:
    input, other = _prepare(input, other)
    return _matmul_node(input._shape, other._shape).apply(input, other)


def _check_mm(input: Tensor, mat2: Tensor) -> None:
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"{'self' if input.ndim != 2 else 'mat2'} must be a matrix")


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    _check_mm(input, mat2)
    return matmul(input, mat2)


def _check_bmm(input: Tensor, mat2: Tensor) -> None:
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if input.ndim != 3 else "batch2 must be a 3D tensor")
    if input._shape[0] != mat2._shape[0]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{input._shape[0]}, "
            f"{input._shape[2]}] but got: [{mat2._shape[0]}, {mat2._shape[1]}]."
        )


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    _check_bmm(input, mat2)
    return _MATMUL_NODES["BmmBackward0"].apply(*_prepare(input, mat2))


def mv(input, vec):
    return matmul(input, vec)


def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return matmul(input, other)


vdot = dot


def inner(input, other):
    """Sum of products over the last dims: a.shape[:-1] + b.shape[:-1] (a dot product for vectors)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    rows = other.reshape(-1, other._shape[-1]).mT  # (k, every other index of b)
    return matmul(input, rows).reshape(input._shape[:-1] + other._shape[:-1])


def trace(input):
    """Sum of the main diagonal of a matrix."""
    if input.ndim != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim " + str(input.ndim))
    return input.diagonal().sum()


def outer(input, vec2):
    return input.unsqueeze(1) * vec2.unsqueeze(0)


ger = outer


class Addmm(Function):
    """beta * input + alpha * (m1 @ m2), input broadcast to the product's shape (addmm, baddbmm)."""

    _raw = True

    @staticmethod
    def forward(ctx, input, m1, m2, beta, alpha):
        ctx.save_for_backward(m1, m2)
        ctx.beta, ctx.alpha = beta, alpha
        p = np.matmul(m1._arr, m2._arr)
        if alpha != 1:
            p = p * alpha
        if beta == 0:  # PyTorch ignores input then, NaN included
            return np.broadcast_to(np.zeros((), p.dtype), p.shape) + p
        return p + (input._arr if beta == 1 else input._arr * beta)

    @staticmethod
    def backward(ctx, g):
        m1, m2 = ctx.saved_tensors
        nig = ctx.needs_input_grad
        gi = (g if ctx.beta == 1 else g * ctx.beta) if nig[0] else None
        ga = g @ m2.mT if nig[1] else None
        gb = m1.mT @ g if nig[2] else None
        if ctx.alpha != 1:
            ga = ga * ctx.alpha if ga is not None else None
            gb = gb * ctx.alpha if gb is not None else None
        return gi, ga, gb, None, None


AddmmBackward0, BaddbmmBackward0 = torch_node(Addmm, "AddmmBackward0"), torch_node(Addmm, "BaddbmmBackward0")


def _addmm(node, input, m1, m2, beta, alpha, check):
    check(m1, m2)  # the product's own shape errors
    m1, m2 = _prepare(m1, m2)
    if input._dtype is not m1._dtype and _amp_state.any:
        input = input.to(m1._dtype)
    out_shape = m1._shape[:-1] + m2._shape[-1:]
    if S.broadcast_shapes(input._shape, out_shape) != out_shape:
        raise RuntimeError(f"The expanded size of input {list(input._shape)} must match the product's size "
                           f"{list(out_shape)}")
    _check_same(m1, input, node.__name__[:-9].lower())
    return node.apply(input, m1, m2, beta, alpha)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    return _addmm(AddmmBackward0, input, mat1, mat2, beta, alpha, _check_mm)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    return _addmm(BaddbmmBackward0, input, batch1, batch2, beta, alpha, _check_bmm)


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
