"""Matrix products: matmul (batched, broadcast), mm, bmm, mv, dot, outer, the add-a-product family (addmm,
baddbmm, addmv, addr, addbmm) and einsum. BLAS does the work. (torch.linalg is engine/linalg.py.)"""
from __future__ import annotations

import numpy as np

from .. import _strides as S
from .. import dtypes as D
from ..amp import _state as _amp_state
from ..amp import autocast_cast, in_float32, without_cpu_autocast
from ..autograd.function import Function, _NoGradCtx
from ..autograd.naming import torch_node
from ..tensor import Tensor, _wrap_array
from .creation import zeros_like
from .elementwise import _make_inplace


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
        if A.dtype in D.LOW_FLOATS and A.__class__ is np.ndarray:
            # NumPy has no half-precision BLAS: accumulate in float32 like PyTorch's CPU kernel, round once.
            return np.matmul(A.astype(np.float32), B.astype(np.float32)).astype(A.dtype)
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


def _check_bmm_dtypes(a: Tensor, b: Tensor) -> None:
    """torch's bmm kernel: no bool loop, and one dtype for both operands (autocast casts them first)."""
    if _amp_state.any:
        return
    if a._dtype is D.bool_:
        raise NotImplementedError("\"bmm\" not implemented for 'Bool'")
    if a._dtype is not b._dtype:
        raise RuntimeError(f"expected scalar type {D.scalar_type_name(a._dtype)} but found "
                           f"{D.scalar_type_name(b._dtype)}")


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    _check_bmm(input, mat2)
    _check_bmm_dtypes(input, mat2)
    return _MATMUL_NODES["BmmBackward0"].apply(*_prepare(input, mat2))


def mv(input, vec):
    return without_cpu_autocast(matmul, input, vec)  # not on torch's CPU autocast list (on its CUDA one)


def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return without_cpu_autocast(matmul, input, other)


vdot = dot


def inner(input, other):
    """Sum of products over the last dims: a.shape[:-1] + b.shape[:-1] (a dot product for vectors)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    rows = other.reshape(-1, other._shape[-1]).mT  # (k, every other index of b)
    return matmul(input, rows).reshape(input._shape[:-1] + other._shape[:-1])


class Trace(Function):
    """Sum of a matrix's main diagonal, one graph node as torch's TraceBackward0 (the gradient is g on the
    diagonal, zeros elsewhere)."""

    _raw = True

    @staticmethod
    def forward(ctx, x):
        ctx.shape = x._shape
        xp = x._storage.backend.xp
        floating = x._dtype.is_floating_point  # added in float64 (torch's CPU acc_type), integers in int64
        total = xp.sum(xp.diagonal(x._arr), dtype=np.float64 if floating else np.int64)
        return xp.asarray(total, dtype=x._dtype.np if floating else np.int64)

    @staticmethod
    def backward(ctx, g):
        from .creation import eye

        return g * eye(*ctx.shape, dtype=g.dtype, device=g.device)


TraceBackward0 = torch_node(Trace, "TraceBackward0")


def trace(input):
    """Sum of the main diagonal of a matrix."""
    if input.ndim != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim " + str(input.ndim))
    if input.dtype is D.bool_:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    return TraceBackward0.apply(in_float32(input))  # (torch's CPU autocast runs trace in float32)


def outer(input, vec2):
    return input.unsqueeze(1) * vec2.unsqueeze(0)



class Addmm(Function):
    """beta * input + alpha * (m1 @ m2), input broadcast to the product's shape (addmm, baddbmm)."""

    _raw = True

    @staticmethod
    def forward(ctx, input, m1, m2, beta, alpha):
        ctx.save_for_backward(m1, m2)
        ctx.beta, ctx.alpha = beta, alpha
        if m1._dtype is D.bfloat16:  # in float32, rounded once (torch's CPU kernel)
            f32 = [None if t is None else _wrap_array(D.upcast(t._arr)) for t in (input, m1, m2)]
            return Addmm.forward(_NoGradCtx(), *f32, beta, alpha).astype(m1._dtype.np)
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


# ----------------------------------------------------------------------------- add a product, checked outer
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (mat @ vec)."""
    if mat.ndim != 2 or vec.ndim != 1 or input.ndim > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {mat.ndim}, {vec.ndim}")
    if mat._shape[1] != vec._shape[0] or input._shape not in ((), (1,), mat._shape[:1]):
        raise RuntimeError(f"size mismatch, got input ({', '.join(map(str, input._shape))}), mat "
                           f"({mat._shape[0]}x{mat._shape[1]}), vec ({vec._shape[0]})")
    if len({input._dtype, mat._dtype, vec._dtype}) > 1:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{D.scalar_type_name(input._dtype)}, {D.scalar_type_name(mat._dtype)}, and "
                           f"{D.scalar_type_name(vec._dtype)}")
    m = input.unsqueeze(1) if input.ndim else input
    product = without_cpu_autocast(lambda: addmm(m, mat, vec.unsqueeze(1), beta=beta, alpha=alpha))
    return product.squeeze(1)


def _check_1d(t: Tensor, op: str, name: str) -> None:
    if t.ndim != 1:
        raise RuntimeError(f"{op}: Expected 1-D argument {name}, but got {t.ndim}-D")


def ger(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two vectors."""
    _check_1d(input, "outer", "self")
    _check_1d(vec2, "outer", "vec2")
    return outer(input, vec2)


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * outer(vec1, vec2) (for bool: input and beta, or vec1 x vec2 and alpha)."""
    _check_1d(vec1, "addr", "vec1")
    _check_1d(vec2, "addr", "vec2")
    prod = outer(vec1, vec2)
    base = input.expand(prod._shape)
    if D.result_type(input, prod) is D.bool_:
        return (base & bool(beta)) | (prod & bool(alpha))
    scaled = prod * alpha if alpha != 1 else prod
    if beta == 0:  # input ignored, NaN included
        return scaled + zeros_like(base)
    return (base * beta if beta != 1 else base) + scaled


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * sum_b batch1[b] @ batch2[b]: one matmul of the batches laid side by side."""
    for t, name in ((batch1, "batch1"), (batch2, "batch2")):
        if t.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    b, n, m = batch1._shape
    if batch2._shape[0] != b:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {b} and "
                           f"{batch2._shape[0]}")
    if batch2._shape[1] != m:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({n}x{m} and {batch2._shape[1]}x"
                           f"{batch2._shape[2]})")
    if batch1._dtype is not batch2._dtype:
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                           f"{D.scalar_type_name(batch1._dtype)} and {D.scalar_type_name(batch2._dtype)}")
    input.expand(n, batch2._shape[2])  # torch's broadcast error
    side_by_side = batch1.transpose(0, 1).reshape(n, b * m)
    return addmm(input, side_by_side, batch2.reshape(b * m, -1), beta=beta, alpha=alpha)


addmv_ = _make_inplace(addmv, "addmv_")
addr_ = _make_inplace(addr, "addr_")
addbmm_ = _make_inplace(addbmm, "addbmm_")


# ----------------------------------------------------------------------------- einsum
# torch.einsum step for step (torch/functional.py's wrapper, ATen's Linear.cpp): the same parse and errors,
# the same diagonal / unsqueeze / permute alignment, contraction left to right through the same bmm, sum and
# view nodes, so values, dtypes (a sum promotes integers), grad_fn names and strides come out as torch's.
_LETTERS = 26
_ELLIPSIS = 2 * _LETTERS  # the code of "..." among the labels 0..51 (A-Z, then a-z)


def _label_code(c: str) -> int:
    return ord(c) - 65 if c <= "Z" else ord(c) - 97 + _LETTERS


def _code_label(s: int) -> str:
    return chr(65 + s) if s < _LETTERS else chr(97 + s - _LETTERS)


def _is_label(c: str) -> bool:
    return "a" <= c <= "z" or "A" <= c <= "Z"


def _invalid_subscript(index: int):
    raise RuntimeError(f"einsum(): invalid subscript given at index {index} in the equation string, "
                       "subscripts must be in [a-zA-Z]")


def _is_ellipsis(text: str, i: int) -> bool:
    return i + 2 < len(text) and text[i + 1] == "." and text[i + 2] == "."


def _sublist_label(n) -> str:
    if n == Ellipsis:
        return "..."
    if n >= 0 and n < _LETTERS:  # (torch's comparisons, so a non-int raises its TypeError)
        return chr(65 + n)
    if n >= _LETTERS and n < 2 * _LETTERS:
        return chr(97 + n - _LETTERS)
    raise ValueError("einsum(): subscript in subscript list is not within the valid range [0, 52)")


def _einsum_parse_inputs(lhs: str, num_ops: int) -> list:
    """Each operand's label codes (_ELLIPSIS for "..."), with torch's errors in torch's order."""
    labels = [[] for _ in range(num_ops)]
    cur, ell, i = 0, False, 0
    while i < len(lhs):
        c = lhs[i]
        if c == ".":
            if ell:
                raise RuntimeError(f"einsum(): found '.' for operand {cur} for which an ellipsis was already "
                                   "found")
            if not _is_ellipsis(lhs, i):
                raise RuntimeError(f"einsum(): found '.' for operand {cur} that is not part of any ellipsis")
            labels[cur].append(_ELLIPSIS)
            ell, i = True, i + 2
        elif c == ",":
            cur += 1
            if cur >= num_ops:
                raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
            ell = False
        elif c != " ":
            if not _is_label(c):
                _invalid_subscript(i)
            labels[cur].append(_label_code(c))
        i += 1
    if cur != num_ops - 1:
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    return labels


def _einsum_count(operands, op_labels) -> tuple[list, int]:
    """How many operands name each label, and the most dims any ellipsis covers."""
    count, ell_dims = [0] * _ELLIPSIS, 0
    for i, (op, labels) in enumerate(zip(operands, op_labels)):
        ndim, n, has_ell = op.ndim, len(labels), False
        for s in labels:
            if s == _ELLIPSIS:
                n, has_ell = n - 1, True
                ell_dims = max(ell_dims, ndim - n)
            else:
                count[s] += 1
        if (n > ndim) if has_ell else (n != ndim):
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({n}) "
                f"{'is more than' if has_ell else 'does not match'} the number of dimensions ({ndim}) for "
                f"operand {i}{'' if has_ell else ' and no ellipsis was given'}")
    return count, ell_dims


def _einsum_layout(equation: str, arrow: int, count: list, ell_dims: int) -> tuple[list, int, int, int]:
    """(the aligned position of each label, where the ellipsis dims start, how many dims the output has, how
    many the aligned operands have): output dims first (the ellipsis, then the labels), summed ones last."""
    perm_of = [-1] * _ELLIPSIS
    ell_index, ell_out = 0, arrow < 0
    if arrow < 0:  # implicit output: the ellipsis, then the labels named once, in label order
        n = ell_dims
        for s in range(_ELLIPSIS):
            if count[s] == 1:
                perm_of[s], n = n, n + 1
    else:
        rhs, n, i = equation[arrow + 2:], 0, 0
        while i < len(rhs):
            c = rhs[i]
            if c == ".":
                if ell_out:
                    raise RuntimeError("einsum(): found '.' for output but an ellipsis (...) was already "
                                       "found")
                if not _is_ellipsis(rhs, i):
                    raise RuntimeError("einsum(): found '.' for output that is not part of any ellipsis "
                                       "(...)")
                ell_index, n, ell_out, i = n, n + ell_dims, True, i + 2
            elif c != " ":
                if not _is_label(c):
                    _invalid_subscript(arrow + 2 + i)
                s = _label_code(c)
                if count[s] == 0 or perm_of[s] != -1:
                    why = "appears more than once in the output" if perm_of[s] != -1 else \
                        "does not appear in the equation for any input operand"
                    raise RuntimeError(f"einsum(): output subscript {c} {why}")
                perm_of[s], n = n, n + 1
            i += 1
    out_dims = n
    if not ell_out:
        ell_index, n = n, n + ell_dims
    for s in range(_ELLIPSIS):
        if count[s] and perm_of[s] == -1:
            perm_of[s], n = n, n + 1
    return perm_of, ell_index, out_dims, n


def _einsum_size_error(i: int, dim: int, size: int, seen: int, label: int | None) -> RuntimeError:
    """torch's error for an operand's dim that does not broadcast with the size seen before (label None: the
    ellipsis; torch's message then lacks a space after the operand)."""
    if label is None:
        return RuntimeError(f"einsum(): dimension {dim} covered by ellipsis in operand {i}has size {size} "
                            "which does not broadcast with previously seen ellipsis with size "
                            f"{seen} for the respective dimension")
    return RuntimeError(f"einsum(): subscript {_code_label(label)} has size {size} for operand {i} which "
                        f"does not broadcast with previously seen size {seen}")


def _einsum_align(operands, op_labels, perm_of, ell_index, ell_dims, n):
    """Each operand with its repeated labels' diagonals taken, a size-1 dim for each label it lacks, permuted
    to the common order; and per aligned dim, how many operands have it larger than 1."""
    sizes, dim_counts, aligned = [1] * n, [0] * n, []  # per aligned dim: the size seen (not 1), operands
    for i, (op, labels) in enumerate(zip(operands, op_labels)):
        perm, dim = [-1] * n, 0
        covered = op.ndim - (len(labels) - 1)  # dims the ellipsis covers in this operand
        for s in labels:
            if s != _ELLIPSIS and perm[perm_of[s]] != -1:  # a label repeated within the operand: a diagonal
                prev = perm[perm_of[s]]
                if op._shape[dim] != op._shape[prev]:
                    raise RuntimeError(
                        f"einsum(): subscript {_code_label(s)} is repeated for operand {i} but the sizes "
                        f"don't match, {op._shape[dim]} != {op._shape[prev]}")
                op = op.diagonal(0, prev, dim).movedim(-1, prev)
                continue
            targets = range(ell_index + ell_dims - covered, ell_index + ell_dims) if s == _ELLIPSIS else \
                (perm_of[s],)
            for k in targets:
                size = op._shape[dim]
                if size != 1:
                    if sizes[k] != 1 and sizes[k] != size:
                        raise _einsum_size_error(i, dim, size, sizes[k], None if s == _ELLIPSIS else s)
                    sizes[k] = size
                    dim_counts[k] += 1
                perm[k], dim = dim, dim + 1
        for k in range(n):
            if perm[k] == -1:
                op = op.unsqueeze(dim)
                perm[k], dim = dim, dim + 1
        aligned.append(op.permute(perm))
    return aligned, dim_counts


def _sumproduct_pair(left: Tensor, right: Tensor, sum_dims: list) -> Tensor:
    """(left * right).sum(sum_dims, keepdim=True) for aligned operands: a bmm of permuted, flattened views."""
    if not sum_dims:
        return left * right
    lro, lo, ro = [], [], []
    lro_size = lo_size = ro_size = sum_size = 1
    for i in range(left.ndim):
        sl, sr = left._shape[i] != 1, right._shape[i] != 1
        if i in sum_dims:
            if sl and sr:
                sum_size *= left._shape[i]
            elif sl:
                left = left.sum(i, True)
            elif sr:
                right = right.sum(i, True)
        elif sl and sr:
            lro.append(i)
            lro_size *= left._shape[i]
        elif sl:
            lo.append(i)
            lo_size *= left._shape[i]
        else:
            ro.append(i)
            ro_size *= right._shape[i]
    out_size = [left._shape[d] for d in lro + lo] + [1] * len(sum_dims) + [right._shape[d] for d in ro]
    order = lro + lo + sum_dims + ro
    operm = [0] * len(order)
    for k, d in enumerate(order):
        operm[d] = k
    left = left.permute(order).reshape(lro_size, lo_size, sum_size)
    right = right.permute(lro + sum_dims + ro + lo).reshape(lro_size, sum_size, ro_size)
    return bmm(left, right).view(out_size).permute(operm)


def einsum(*args):
    """torch.einsum: an equation and operands (or one list of them), or the sublist form
    einsum(a, [0, 1], b, [1, 2], [0, 2]); "..." broadcasts, a repeated label takes a diagonal."""
    if len(args) < 2:
        raise ValueError("einsum(): must specify the equation string and at least one operand, or at least "
                         "one operand and its subscripts list")
    if isinstance(args[0], Tensor):  # sublist form: operand, labels, operand, labels, ..., [output labels]
        equation = ",".join("".join(_sublist_label(s) for s in sub) for sub in args[1::2])
        if len(args) % 2 == 1:
            equation += "->" + "".join(_sublist_label(s) for s in args[-1])
            operands = args[:-1:2]
        else:
            operands = args[::2]
    else:
        equation, operands = args[0], args[1:]
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        return einsum(equation, *operands[0])
    if not isinstance(equation, str):
        raise TypeError("einsum(): argument 'equation' (position 1) must be str, not "
                        f"{type(equation).__name__}")
    for i, op in enumerate(operands):
        if not isinstance(op, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 1, but got {type(op).__name__}")
    arrow = equation.find("->")
    op_labels = _einsum_parse_inputs(equation if arrow < 0 else equation[:arrow], len(operands))
    count, ell_dims = _einsum_count(operands, op_labels)
    perm_of, ell_index, out_dims, n = _einsum_layout(equation, arrow, count, ell_dims)
    ops, dim_counts = _einsum_align(operands, op_labels, perm_of, ell_index, ell_dims, n)
    while len(ops) > 1:  # contract left to right; a dim is summed once no later operand has it
        a, b = ops[0], ops[1]
        sum_dims, a_sum, b_sum = [], [], []
        for d in range(out_dims, n):
            if a._shape[d] != 1 and b._shape[d] != 1:
                dim_counts[d] -= 1
                if dim_counts[d] == 1:
                    sum_dims.append(d)
                    dim_counts[d] = 0
            elif dim_counts[d] == 1:
                if a._shape[d] != 1:
                    a_sum.append(d)
                    dim_counts[d] = 0
                elif b._shape[d] != 1:
                    b_sum.append(d)
                    dim_counts[d] = 0
        if a_sum:
            a = a.sum(a_sum, True)
        if b_sum:
            b = b.sum(b_sum, True)
        ops[:2] = [_sumproduct_pair(a, b, sum_dims)]
    result = ops[0]
    if n == out_dims:
        return result
    if len(operands) > 1:  # the summed dims are all size 1 by now
        return result.view(list(result._shape[:out_dims]))
    return result.sum(list(range(out_dims, n)))
