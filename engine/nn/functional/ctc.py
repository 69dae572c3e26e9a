"""Connectionist temporal classification loss: log-space alpha/beta recursions over the blank-extended labels,
vectorised over the batch and label positions (a loop over time steps only)."""

from __future__ import annotations

import numpy as np

from ... import dtypes as D
from ...autograd.function import Function
from ...autograd.naming import torch_node
from ...tensor import Tensor, _wrap_array

_WHERE = " (while checking arguments for ctc_loss_allocate_outputs)"


def _logaddexp3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """log(e^a + e^b + e^c), -inf where all three are -inf."""
    m = np.maximum(np.maximum(a, b), c)
    safe = np.where(np.isneginf(m), 0, m)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.exp(a - safe) + np.exp(b - safe) + np.exp(c - safe))


def _shift(a: np.ndarray, k: int) -> np.ndarray:
    """a moved k positions along the last axis (right for k > 0, left for k < 0), -inf filling in (copies)."""
    out = np.full_like(a, -np.inf)
    if k > 0:
        out[..., k:] = a[..., :-k]
    else:
        out[..., :k] = a[..., -k:]
    return out


class _Lattice:
    """The CTC lattice of a batch: extended labels l' = (blank, l1, blank, l2, ..., blank), per sample 2 L + 1
    of them (padded to the longest), and log-probabilities of each l' at each time step."""

    def __init__(self, lp: np.ndarray, targets: np.ndarray, in_lens: np.ndarray, tg_lens: np.ndarray,
                 blank: int):
        t, n, _ = lp.shape
        s = targets.shape[1]
        ext = np.full((n, 2 * s + 1), blank, np.int64)
        ext[:, 1::2] = targets
        self.ext, self.in_lens, self.tg_lens = ext, in_lens, tg_lens
        positions = np.arange(2 * s + 1)
        self.inside = positions[None, :] <= 2 * tg_lens[:, None]  # (N, S') label positions each sample has
        # a label (odd position) may be reached from the previous label unless it repeats it; by position, as
        # torch decides, so a target label equal to blank still counts as a label
        self.skip = np.zeros(ext.shape, bool)
        self.skip[:, 3::2] = targets[:, 1:] != targets[:, :-1]
        self.lp_ext = np.take_along_axis(lp, np.broadcast_to(ext[None], (t, n, 2 * s + 1)), axis=2)

    def alpha(self) -> np.ndarray:
        """log alpha[t, n, s]: all prefixes of paths ending at label position s at time t (including t)."""
        lpe = self.lp_ext
        alpha = np.full(lpe.shape, -np.inf, lpe.dtype)
        alpha[0, :, 0] = lpe[0, :, 0]
        alpha[0, :, 1] = np.where(self.tg_lens > 0, lpe[0, :, 1], -np.inf)
        for t in range(1, len(lpe)):
            prev = alpha[t - 1]
            a = _logaddexp3(prev, _shift(prev, 1), np.where(self.skip, _shift(prev, 2), -np.inf)) + lpe[t]
            alpha[t] = np.where(self.inside, a, -np.inf)
        return alpha

    def beta(self) -> np.ndarray:
        """log beta[t, n, s]: all suffixes of paths from label position s at time t (including t)."""
        lpe = self.lp_ext
        n = lpe.shape[1]
        beta = np.full(lpe.shape, -np.inf, lpe.dtype)
        last = 2 * self.tg_lens
        rows = np.arange(n)
        skip_from = _shift(np.where(self.skip, 0.0, -np.inf), -2).astype(lpe.dtype)  # s -> s + 2 allowed
        nxt = np.full(lpe.shape[1:], -np.inf, lpe.dtype)
        for t in range(len(lpe) - 1, -1, -1):
            b = _logaddexp3(nxt, _shift(nxt, -1), _shift(nxt, -2) + skip_from) + lpe[t]
            ends = self.in_lens - 1 == t  # samples whose paths end here
            b[ends] = -np.inf
            b[rows[ends], last[ends]] = lpe[t, rows[ends], last[ends]]
            ends &= self.tg_lens > 0
            b[rows[ends], last[ends] - 1] = lpe[t, rows[ends], last[ends] - 1]
            beta[t] = nxt = b
        return beta

    def nll(self, alpha: np.ndarray) -> np.ndarray:
        """-log p(target | input) per sample, from alpha at each sample's last time step."""
        n = alpha.shape[1]
        rows, last = np.arange(n), 2 * self.tg_lens
        final = alpha[np.maximum(self.in_lens - 1, 0), rows]  # (N, S')
        end = final[rows, last]
        end_label = np.where(self.tg_lens > 0, final[rows, np.maximum(last - 1, 0)], -np.inf)
        ll = np.logaddexp(end, end_label)
        # no time steps: only the empty target is reachable (probability 1)
        ll = np.where(self.in_lens == 0, np.where(self.tg_lens == 0, 0, -np.inf), ll)
        return -ll.astype(alpha.dtype)


class CtcLoss(Function):
    """Per-sample CTC negative log-likelihood. Its gradient is torch's: with respect to the logits beneath a
    log_softmax, exp(log_probs) - (posterior occupancy of each class), so it is right through log_softmax."""

    _raw = True

    @staticmethod
    def forward(ctx, log_probs, targets, in_lens, tg_lens, blank, zero_infinity):
        lp = log_probs._arr
        lattice = _Lattice(lp, targets, in_lens, tg_lens, blank)
        alpha = lattice.alpha()
        nll = lattice.nll(alpha)
        ctx.lattice, ctx.alpha, ctx.nll, ctx.zero_infinity = lattice, alpha, nll, zero_infinity
        ctx.save_for_backward(log_probs)
        return np.where(np.isinf(nll), 0, nll).astype(nll.dtype) if zero_infinity else nll

    @staticmethod
    def backward(ctx, g):
        (log_probs,) = ctx.saved_tensors
        lp, lattice, nll = log_probs._arr, ctx.lattice, ctx.nll
        t_steps, n, c = lp.shape
        with np.errstate(invalid="ignore", over="ignore"):
            # occupancy[t, n, s]: probability that a path is at label position s at time t, given the target
            occupancy = np.exp(ctx.alpha + lattice.beta() - lattice.lp_ext + nll[None, :, None])
        onehot = (lattice.ext[:, :, None] == np.arange(c)) & lattice.inside[:, :, None]  # (N, S', C)
        per_class = np.matmul(occupancy.transpose(1, 0, 2), onehot.astype(lp.dtype)).transpose(1, 0, 2)
        grad = (np.exp(lp) - per_class) * g._arr[None, :, None]
        running = np.arange(t_steps)[:, None] < lattice.in_lens[None, :]  # (T, N)
        if ctx.zero_infinity:
            running &= ~np.isinf(nll)[None, :]
        grad = np.where(running[:, :, None], grad, 0).astype(lp.dtype)
        return _wrap_array(grad), None, None, None, None, None


_CTC = torch_node(CtcLoss, "CtcLossBackward0")


def _lengths(value, name: str) -> np.ndarray:
    if isinstance(value, Tensor):
        if value._dtype.is_floating_point or value._dtype is D.bool_:
            raise RuntimeError(f"{name} must be integral")
        return np.asarray(value.detach().cpu().numpy(), np.int64).reshape(-1)
    if isinstance(value, (int, np.integer)):
        return np.array([int(value)], np.int64)
    return np.array([int(v) for v in value], np.int64).reshape(-1)


def _padded_targets(targets: Tensor, tg_lens: np.ndarray, n: int) -> np.ndarray:
    """(N, S) labels from padded or concatenated targets, checked as torch checks them."""
    a = np.asarray(targets.detach().cpu().numpy())
    for length in tg_lens:
        if length < 0:
            raise RuntimeError(
                f"Expected target_lengths to have value at least 0, but got value {length}{_WHERE}"
            )
    longest = int(tg_lens.max()) if len(tg_lens) else 0
    if a.ndim == 1:
        total = int(tg_lens.sum())
        if a.shape[0] != total:
            raise RuntimeError(
                f"Expected tensor to have size {total} at dimension 0, but got size {a.shape[0]} for "
                f"argument #2 'targets'{_WHERE}"
            )
        out = np.zeros((n, longest), np.int64)
        starts = np.concatenate([[0], np.cumsum(tg_lens)[:-1]])
        cols = np.arange(longest)
        mask = cols[None, :] < tg_lens[:, None]
        out[mask] = a[(starts[:, None] + cols[None, :])[mask]].astype(np.int64)
        return out
    if a.ndim != 2:
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {a.ndim}-dimensional tensor for argument #2 "
                           f"'targets'{_WHERE}")
    if a.shape[1] < longest:
        raise RuntimeError(
            f"Expected tensor to have size at least {longest} at dimension 1, but got size {a.shape[1]} for "
            f"argument #2 'targets'{_WHERE}"
        )
    out = a[:, :longest].astype(np.int64)
    out[np.arange(longest)[None, :] >= tg_lens[:, None]] = 0  # padding past each target: never read
    return out


def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths,
    target_lengths,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """torch's F.ctc_loss. log_probs (T, N, C) or unbatched (T, C); targets padded (N, S) (unbatched (S,)) or
    concatenated (sum(target_lengths),); lengths as tensors or sequences of ints."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if not log_probs._dtype.is_floating_point or log_probs._dtype not in (D.float32, D.float64):
        name = D.scalar_type_name(log_probs._dtype)
        raise NotImplementedError(f"\"ctc_loss_cpu\" not implemented for '{name}'")
    if log_probs.is_cuda:
        raise NotImplementedError("ctc_loss: the engine computes the CTC loss on the CPU only (NumPy)")
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    if lp.ndim != 3:
        raise RuntimeError(
            f"Expected 3-dimensional tensor, but got {lp.ndim}-dimensional tensor for argument #1 'log_probs'"
            f"{_WHERE}"
        )
    in_lens = _lengths(input_lengths, "input_lengths")
    tg_lens = _lengths(target_lengths, "target_lengths")
    t_steps, n, c = lp._shape
    if not 0 <= blank < c:
        raise RuntimeError("blank must be in label range")
    if len(in_lens) != n:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(tg_lens) != n:
        raise RuntimeError("target_lengths must be of size batch_size")
    padded = _padded_targets(targets if batched else targets.unsqueeze(0), tg_lens, n)
    for length in in_lens:
        if length < 0:
            raise RuntimeError(
                f"Expected input_lengths to have value at least 0, but got value {length}{_WHERE}"
            )
        if length > t_steps:
            raise RuntimeError(
                f"Expected input_lengths to have value at most {t_steps}, but got value {length}{_WHERE}"
            )
    if padded.size and (padded.min() < 0 or padded.max() >= c):
        raise IndexError(f"ctc_loss: target labels must be in [0, {c}), but got labels in "
                         f"[{padded.min()}, {padded.max()}]")
    losses = _CTC.apply(lp, padded, in_lens, tg_lens, int(blank), bool(zero_infinity))
    if reduction == "none":
        return losses if batched else losses.squeeze(0)
    if reduction == "sum":
        return losses.sum()
    divisor = _wrap_array(np.maximum(tg_lens, 1).astype(lp._dtype.np))
    return (losses / divisor).mean()
