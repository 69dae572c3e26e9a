"""L-BFGS with an optional strong-Wolfe line search, as PyTorch runs it: one call to step(closure) does up to
max_iter quasi-Newton iterations over all parameters seen as one flat vector.

Scalars (curvature products, step lengths) are host scalars of the parameters' dtype (numpy.float32 for
float32 parameters), so every comparison and product rounds where PyTorch's 0-d tensors do, and the iterates
follow PyTorch's. The state keeps PyTorch's names and kinds: tensors, lists of tensors, and plain numbers."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.inplace import bump
from ..tensor import Tensor, _wrap_array
from ._pointwise import array_module, check_lr
from .optimizer import Optimizer

# state entries holding flat vectors, lists of them, and scalars that PyTorch keeps as 0-d tensors
_TENSOR_STATE = ("d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "al")


class LBFGS(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ):
        check_lr(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(
            lr=lr,
            max_iter=max_iter,
            max_eval=max_eval,
            tolerance_grad=tolerance_grad,
            tolerance_change=tolerance_change,
            history_size=history_size,
            line_search_fn=line_search_fn,
        )
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ------------------------------------------------------------------ the parameters as one flat vector
    def _flat_grad(self):
        """All gradients concatenated (zeros for a parameter without one): a fresh array."""
        xp = array_module(self._params[0])
        parts = [
            p._grad._arr.reshape(-1) if p._grad is not None else xp.zeros(p.numel(), dtype=p._dtype.np)
            for p in self._params
        ]
        return xp.concatenate(parts)

    def _move(self, step_size, direction) -> None:
        """params += step_size * direction."""
        offset = 0
        for p in self._params:
            n = p.numel()
            P = p._arr
            P += direction[offset : offset + n].reshape(P.shape) * P.dtype.type(step_size)
            bump(p)
            offset += n

    def _copy_params(self) -> list:
        return [p._arr.copy() for p in self._params]

    def _restore_params(self, saved: list) -> None:
        for p, x in zip(self._params, saved):
            p._arr[...] = x
            bump(p)

    def _scalar(self, x):
        """A reduction's result as a host scalar of the parameters' dtype (numpy.float32 / numpy.float64)."""
        return self._params[0]._dtype.np.type(x.item())

    def _dot(self, a, b):
        return self._scalar(array_module(self._params[0]).dot(a, b))

    def _abs_max(self, a):
        return self._scalar(abs(a).max())

    # ------------------------------------------------------------------ the step
    def step(self, closure: Callable[[], Tensor]):  # type: ignore[override] - the closure is required
        """Up to max_iter L-BFGS iterations; closure() clears the gradients, computes and backpropagates the
        loss, and returns it. Returns the loss of the first evaluation."""
        if len(self.param_groups) != 1:
            raise AssertionError(f"Expected exactly one param_group, but got {len(self.param_groups)}")

        def evaluate():
            with enable_grad():
                return closure()

        with no_grad():
            return self._minimize(evaluate)

    def _minimize(self, evaluate: Callable[[], Tensor]):
        group = self.param_groups[0]
        lr = group["lr"]
        lr = float(lr) if isinstance(lr, Tensor) else lr
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = evaluate()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if self._abs_max(flat_grad) <= tolerance_grad:  # already at a stationary point
            return orig_loss

        kept = self._unpack(state)
        d, t = kept.get("d"), kept.get("t")
        old_dirs, old_stps, ro = kept.get("old_dirs"), kept.get("old_stps"), kept.get("ro")
        H_diag, prev_flat_grad = kept.get("H_diag"), kept.get("prev_flat_grad")
        prev_loss, al = state.get("prev_loss"), kept.get("al")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # the search direction: steepest descent at first, then the two-loop recursion over the history
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad  # change of gradient
                s = d * t  # change of parameters
                ys = self._dot(y, s)
                if ys > 1e-10:  # keep the pair only where the curvature is positive
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / self._dot(y, y)  # initial inverse-Hessian scale
                if al is None:
                    al = [None] * history_size
                    state["al"] = None  # its place among the keys, as PyTorch orders them
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = self._dot(old_stps[i], q) * ro[i]
                    q -= old_dirs[i] * q.dtype.type(al[i])
                d = r = q * H_diag
                for i in range(len(old_dirs)):
                    be_i = self._dot(old_dirs[i], r) * ro[i]
                    r += old_stps[i] * r.dtype.type(al[i] - be_i)

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.copy()
            else:
                prev_flat_grad[...] = flat_grad
            prev_loss = loss

            # the very first step is scaled down so that it moves no more than lr in the gradient's 1-norm
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / self._scalar(abs(flat_grad).sum())) * lr
            else:
                t = lr

            gtd = self._dot(flat_grad, d)  # directional derivative
            if gtd > -tolerance_change:
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = self._copy_params()

                def along(x, step, direction):
                    """Loss and gradient at x + step * direction; the parameters are put back to x."""
                    self._move(step, direction)
                    value = float(evaluate())
                    grad = self._flat_grad()
                    self._restore_params(x)
                    return value, grad

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    self, along, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals
                )
                self._move(t, d)
                opt_cond = self._abs_max(flat_grad) <= tolerance_grad
            else:
                self._move(t, d)  # fixed step length
                opt_cond = False
                if n_iter != max_iter:
                    loss = float(evaluate())
                    flat_grad = self._flat_grad()
                    opt_cond = self._abs_max(flat_grad) <= tolerance_grad
                    ls_func_evals = 1

            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            # stopping conditions
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if self._abs_max(d * d.dtype.type(t)) <= tolerance_change:  # the parameters barely moved
                break
            if abs(loss - prev_loss) < tolerance_change:  # the loss barely moved
                break

        kept = dict(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag)
        kept.update(prev_flat_grad=prev_flat_grad)
        for k, v in kept.items():
            state[k] = _pack(v)
        state["prev_loss"] = prev_loss
        if al is not None:
            state["al"] = _pack(al)
        return orig_loss

    def _unpack(self, state: dict) -> dict:
        """The kept tensors as arrays on the parameters' device and 0-d tensors as host scalars."""
        return {k: _unpack(self._params[0], state[k]) for k in _TENSOR_STATE if k in state}


def _pack(v):
    """Arrays and numpy scalars as engine tensors (lists element by element); plain numbers stay numbers."""
    if isinstance(v, list):
        return [_pack(x) for x in v]
    if isinstance(v, np.generic):
        return _wrap_array(np.array(v))
    if v is None or isinstance(v, (int, float)):
        return v
    return _wrap_array(v)


def _unpack(p: Tensor, v):
    if isinstance(v, list):
        return [_unpack(p, x) for x in v]
    if isinstance(v, Tensor):
        if v._shape == ():
            return v._dtype.np.type(v.item())
        if v._storage.device != p._storage.device:
            v = v.to(p.device)
        return v._arr
    return v


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2, clamped to bounds (default:
    between x1 and x2); the middle of the bounds when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if not d2_square >= 0:  # (also when it is NaN)
        return (lo + hi) / 2.0
    d2 = np.sqrt(d2_square)
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, lo), hi)


def _strong_wolfe(opt, along, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """Line search along d from x (loss f, gradient g, slope gtd) for a step t meeting the strong Wolfe
    conditions: sufficient decrease (c1) and a small enough slope (c2). Bracketing, then zooming by cubic
    interpolation (More-Thuente style, as minFunc and PyTorch do). Returns (loss, grad, t, evaluations)."""
    d_norm = opt._abs_max(d)
    f_new, g_new = along(x, t, d)
    evals = 1
    gtd_new = opt._dot(g_new, d)

    # bracketing phase: grow t until the interval [t_prev, t] must contain an acceptable step
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    bracket_gtd = None
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):  # too long: no decrease
            bracket, bracket_f, bracket_g = [t_prev, t], [f_prev, f_new], [g_prev, g_new]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:  # both conditions hold
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:  # passed a minimum
            bracket, bracket_f, bracket_g = [t_prev, t], [f_prev, f_new], [g_prev, g_new]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        # extrapolate, between 1.01 and 10 times the current step
        bounds = (t + 0.01 * (t - t_prev), t * 10)
        t_next = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=bounds)
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = along(x, t, d)
        evals += 1
        gtd_new = opt._dot(g_new, d)
        ls_iter += 1
    if ls_iter == max_ls:  # ran out of evaluations while extrapolating
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # zoom phase: shrink the bracket around a point that satisfies both conditions
    insufficient_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # keep t away from the bracket's ends, unless that is where it keeps landing
        b_max, b_min = max(bracket), min(bracket)
        margin = 0.1 * (b_max - b_min)
        if min(b_max - t, t - b_min) < margin:
            if insufficient_progress or t >= b_max or t <= b_min:
                t = b_max - margin if abs(t - b_max) < abs(t - b_min) else b_min + margin
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = along(x, t, d)
        evals += 1
        gtd_new = opt._dot(g_new, d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:  # not lower: t is the new high end
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:  # the minimum lies on the other side of low
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new, gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals
