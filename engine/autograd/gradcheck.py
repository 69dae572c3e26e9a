"""Finite-difference gradient checks (central differences in float64, PyTorch's default tolerances)."""
from __future__ import annotations

import numpy as np


class GradcheckError(RuntimeError):
    pass


def _tensor_inputs(inputs):
    from ..tensor import Tensor

    return [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]


def _flat_outputs(out):
    from ..tensor import Tensor

    if isinstance(out, Tensor):
        return [out]
    return [o for o in out if isinstance(o, Tensor) and o.requires_grad]


def _numerical_jacobian(fn, inputs, idx, out_index, eps):
    """d out[out_index] / d inputs[idx], by perturbing the input's storage through its own view."""
    from .grad_mode import enable_grad

    x = inputs[idx]
    arr = x._arr  # a view with the tensor's own strides: perturbing it perturbs exactly x's elements
    flat_positions = list(np.ndindex(*x._shape)) if x._shape else [()]
    # grad mode on, so _flat_outputs keeps the same (requires-grad) outputs as the analytical side
    with enable_grad():
        ref = _flat_outputs(fn(*inputs))[out_index]
    jac = np.zeros((len(flat_positions), ref.numel()), dtype=np.float64)
    seen = {}
    for k, pos in enumerate(flat_positions):
        # expanded (stride-0) inputs share memory: perturb each memory location once
        mem = sum(p * s for p, s in zip(pos, x._strides))
        if mem in seen:
            continue
        seen[mem] = k
        orig = arr[pos].copy()
        with enable_grad():
            arr[pos] = orig + eps
            plus = (
                _flat_outputs(fn(*inputs))[out_index].detach().numpy().astype(np.float64).reshape(-1).copy()
            )
            arr[pos] = orig - eps
            minus = (
                _flat_outputs(fn(*inputs))[out_index].detach().numpy().astype(np.float64).reshape(-1).copy()
            )
            arr[pos] = orig
        jac[k] = (plus - minus) / (2 * eps)
    return jac, seen, flat_positions


def _analytical_jacobian(fn, inputs, idx, out_index, n_out):
    from .. import autograd
    from .._memory_format import contiguous_format
    from ..ops.creation import zeros_like

    x = inputs[idx]
    rows = []
    for j in range(n_out):
        out = _flat_outputs(fn(*inputs))[out_index]
        g = zeros_like(out, memory_format=contiguous_format)  # flat-indexable, like torch's gradcheck
        g.view(-1)[j] = 1.0
        (gx,) = autograd.grad([out], [x], [g], allow_unused=True)
        rows.append(np.zeros(x.numel()) if gx is None else gx.detach().numpy().astype(np.float64).reshape(-1))
    return np.stack(rows, axis=1) if rows else np.zeros((x.numel(), 0))


def gradcheck(
    func,
    inputs,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    fast_mode: bool = False,
    **_ignored,
) -> bool:
    """Compare autograd's Jacobian with central differences for every input that requires grad."""
    from ..tensor import Tensor

    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    for i in _tensor_inputs(inputs):
        if inputs[i].dtype.itemsize != 8:
            import warnings

            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point. This "
                "check will likely fail if all the inputs are not of double precision floating point.",
                UserWarning,
                stacklevel=2,
            )
    outs = _flat_outputs(func(*inputs))
    for oi, out in enumerate(outs):
        for i in _tensor_inputs(inputs):
            num, seen, positions = _numerical_jacobian(func, inputs, i, oi, eps)
            ana = _analytical_jacobian(func, inputs, i, oi, out.numel())
            # expanded inputs: autograd gives each alias its share; compare memory-location sums
            if len(seen) != len(positions):
                x = inputs[i]
                summed = np.zeros_like(num)
                for k, pos in enumerate(positions):
                    mem = sum(p * s for p, s in zip(pos, x._strides))
                    summed[seen[mem]] += ana[k]
                ana = summed
                mask = np.zeros(len(positions), bool)
                mask[list(seen.values())] = True
                num, ana = num[mask], ana[mask]
            if not np.allclose(ana, num, rtol=rtol, atol=atol):
                diff = np.abs(ana - num).max()
                msg = (
                    f"Jacobian mismatch for output {oi} with respect to input {i},\nnumerical:{num}\n"
                    f"analytical:{ana}\nmax abs difference {diff}"
                )
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    **_ignored,
) -> bool:
    """Check second derivatives: gradcheck of (inputs, grad_outputs) -> grad(..., create_graph=True)."""
    from .. import autograd
    from ..ops.creation import randn
    from ..tensor import Tensor

    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    outs = _flat_outputs(func(*inputs))
    if grad_outputs is None:
        grad_outputs = tuple(randn(o._shape, dtype=o.dtype).requires_grad_(True) for o in outs)
    grad_outputs = tuple(grad_outputs)
    n_in = len(inputs)
    diff_idx = _tensor_inputs(inputs)

    def first_grad(*args):
        ins, gos = args[:n_in], args[n_in:]
        o = _flat_outputs(func(*ins))
        gs = autograd.grad(o, [ins[i] for i in diff_idx], gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None and g.requires_grad)

    return gradcheck(
        first_grad, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception
    )
