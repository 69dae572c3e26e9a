"""What Adamax, NAdam, RAdam, Adadelta, ASGD, Rprop and Adafactor share: option checks in PyTorch's wording
and in-place pointwise updates written against the parameter's own array module (NumPy on the CPU, CuPy on a
GPU), so one code path serves both devices. Scalar state (step, mu_product, eta, mu) stays on the host, as
PyTorch keeps it when capturable=False."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..tensor import Tensor, _wrap_array
from .optimizer import Optimizer, _state_tensor


# ---------------------------------------------------------------------- option checks
def check_lr(lr) -> None:
    """PyTorch's first two checks of every optimiser: a tensor lr has one element, and lr >= 0."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def check_betas(betas) -> None:
    for i in (0, 1):
        if not 0.0 <= betas[i] < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")


def reject_unsupported(name: str, group: dict) -> None:
    """capturable (CUDA-graph capture) and differentiable (autograd through the update) need machinery the
    engine does not have: accept False, refuse True in words rather than computing something else."""
    if group.get("capturable"):
        raise RuntimeError(
            f"{name}(capturable=True) is not supported: Wiregrad has no CUDA graph capture; "
            "leave capturable=False"
        )
    if group.get("differentiable"):
        raise RuntimeError(
            f"{name}(differentiable=True) is not supported: Wiregrad's optimisers update parameters in place "
            "outside autograd; leave differentiable=False"
        )


# ---------------------------------------------------------------------- arrays
def array_module(p: Tensor):
    """numpy or cupy: the module that owns p's storage."""
    return p._storage.backend.xp


def zeros_like_param(p: Tensor, shape: tuple[int, ...] | None = None) -> Tensor:
    """Zeros in p's dtype on p's device, shaped like p unless `shape` is given."""
    return _wrap_array(array_module(p).zeros(p._shape if shape is None else shape, dtype=p._dtype.np))


def full_like_param(p: Tensor, value: float) -> Tensor:
    return _wrap_array(array_module(p).full(p._shape, value, dtype=p._dtype.np))


def scratch(opt: Optimizer, p: Tensor, name: str):
    """An array shaped like p on p's device, reused across steps (not part of the state)."""
    xp = array_module(p)
    key = (id(p), "pw-" + name)
    buf = opt._scratch.get(key)
    if buf is None or buf.shape != p._shape or buf.dtype != p._dtype.np or not isinstance(buf, xp.ndarray):
        buf = opt._scratch[key] = xp.empty(p._shape, dtype=p._dtype.np)
    return buf


def params_with_state(opt: Optimizer, group: dict, new_state: Callable[[Tensor], dict]) -> Iterator:
    """(p, xp, state) for each parameter of `group` that has a gradient: xp its array module, and its state
    made on first use as `step` (0, on the host) followed by new_state(p)'s entries, torch's key order."""
    for p in group["params"]:
        if p._grad is None:
            continue
        st = opt.state[p]
        if not st:
            st["step"] = _state_tensor(0.0)
            st.update(new_state(p))
        yield p, array_module(p), st


def place_state_on(p: Tensor, st: dict) -> None:
    """Array state onto p's device (load_state_dict brings it back on the host); scalar state stays there."""
    dev = p._storage.device
    for k, v in st.items():
        if isinstance(v, Tensor) and v._shape and v._storage.device != dev:
            st[k] = v.to(dev)


def advance_step(p: Tensor, st: dict):
    """The start of every parameter's update: state onto p's device, then the `step` counter (a 0-d host
    array, as torch keeps it) moved on by one; returns that array."""
    place_state_on(p, st)
    step_arr = st["step"]._arr
    step_arr += 1
    return step_arr


def update_direction(opt: Optimizer, p: Tensor, maximize: bool, weight_decay: float):
    """p's gradient, negated when maximizing, plus weight_decay * p (coupled L2). The gradient array itself
    when there is nothing to change, otherwise scratch memory: callers must not write into the result."""
    g = p._grad._arr
    if not maximize and weight_decay == 0:
        return g
    xp = array_module(p)
    d = scratch(opt, p, "direction")
    if maximize:
        xp.negative(g, out=d)
        g = d
    if weight_decay != 0:
        t = scratch(opt, p, "decay")
        xp.multiply(p._arr, weight_decay, out=t)
        xp.add(g, t, out=d)
    return d


def lerp_(xp, start, end, weight: float, tmp) -> None:
    """start += weight * (end - start) in place, with PyTorch's two-sided formula (exact at weight 1)."""
    w = start.dtype.type(weight)
    xp.subtract(end, start, out=tmp)
    if abs(w) < 0.5:
        xp.multiply(tmp, w, out=tmp)
        xp.add(start, tmp, out=start)
    else:
        xp.multiply(tmp, start.dtype.type(1) - w, out=tmp)
        xp.subtract(end, tmp, out=start)


def decay_and_add_product_(xp, acc, decay: float, a, b, value: float, tmp) -> None:
    """acc = acc * decay + value * a * b: the exponential moving average of a product (a * a for squares)."""
    xp.multiply(acc, decay, out=acc)
    xp.multiply(a, value, out=tmp)
    xp.multiply(tmp, b, out=tmp)
    xp.add(acc, tmp, out=acc)


def add_scaled_(xp, acc, x, alpha: float, tmp) -> None:
    """acc += alpha * x (PyTorch's add_(x, alpha=...))."""
    xp.multiply(x, alpha, out=tmp)
    xp.add(acc, tmp, out=acc)
