"""engine/nn/functional/ctc.py against torch: ctc_loss / CTCLoss, values, gradients, float64 gradchecks and
torch's errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_compare import backward_both, close, same_error

import engine
import engine.nn.functional as F
from engine.autograd import gradcheck


# ----------------------------------------------------------------------------- ctc_loss
def _ctc_pair(t, n, c, seed=0, dtype=np.float64):
    """log_softmax outputs (as leaves) of the same random logits."""
    logits = np.random.default_rng(seed).standard_normal((t, n, c)).astype(dtype)
    lp = torch.tensor(logits).log_softmax(-1).detach()
    return engine.tensor(lp.numpy(), requires_grad=True), lp.requires_grad_()


def _check_ctc(t, n, c, targets, in_lens, tg_lens, tol=1e-10, dtype=np.float64, **kw):
    le, lt = _ctc_pair(t, n, c, dtype=dtype)
    ye = F.ctc_loss(le, engine.tensor(targets), in_lens, tg_lens, **kw)
    yt = TF.ctc_loss(lt, torch.tensor(targets), in_lens, tg_lens, **kw)
    close(ye, yt, atol=tol, rtol=tol)
    backward_both(ye, yt)
    close(le.grad, lt.grad, atol=tol, rtol=tol)
    return ye, le.grad


PADDED = np.array([[1, 2, 2, 3], [3, 3, 1, 0], [2, 1, 3, 1]])  # repeated labels; padding past each length


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("blank", [0, 4])
def test_ctc_loss_padded_targets_match_torch(reduction, blank):
    targets = PADDED if blank == 0 else np.where(PADDED == 4, 0, PADDED)
    _check_ctc(9, 3, 5, targets, (9, 7, 8), (4, 3, 2), blank=blank, reduction=reduction)


def test_ctc_loss_blank_in_the_middle_of_the_alphabet_matches_torch():
    targets = np.array([[0, 1, 3, 3], [4, 0, 4, 4]])  # blank=2 never appears as a label
    _check_ctc(8, 2, 5, targets, (8, 8), (4, 4), blank=2, reduction="none")


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_ctc_loss_concatenated_targets_and_tensor_lengths_match_torch(reduction):
    le, lt = _ctc_pair(7, 3, 4, seed=2)
    flat = np.array([1, 1, 2, 3, 2, 1])
    lens_in, lens_tg = np.array([7, 5, 6]), np.array([3, 1, 2])
    ye = F.ctc_loss(le, engine.tensor(flat), engine.tensor(lens_in), engine.tensor(lens_tg),
                    reduction=reduction)
    yt = TF.ctc_loss(lt, torch.tensor(flat), torch.tensor(lens_in), torch.tensor(lens_tg),
                     reduction=reduction)
    close(ye, yt, atol=1e-10)
    backward_both(ye, yt)
    close(le.grad, lt.grad, atol=1e-10)


def test_ctc_loss_unbatched_input_matches_torch():
    le, lt = _ctc_pair(6, 1, 4, seed=3)
    target = np.array([2, 2, 1])
    for lens in ((6,), 6):
        le.grad = None
        lt.grad = None
        ye = F.ctc_loss(le[:, 0], engine.tensor(target), lens, (3,), reduction="none")
        yt = TF.ctc_loss(lt[:, 0], torch.tensor(target), torch.tensor(lens), torch.tensor(3),
                         reduction="none")
        assert ye.shape == yt.shape == ()
        close(ye, yt, atol=1e-12)
        backward_both(ye, yt)
        close(le.grad, lt.grad, atol=1e-12)


def test_ctc_loss_impossible_alignment_is_inf_with_nan_gradient_like_torch():
    # three repeated labels need five frames (blanks between repeats); sample 0 has three
    ye, grad = _check_ctc(6, 2, 4, np.array([[1, 1, 1], [3, 1, 0]]), (3, 5), (3, 2), reduction="none")
    assert np.isinf(ye.detach().numpy()[0]) and np.isfinite(ye.detach().numpy()[1])
    g = grad.numpy()
    assert np.isnan(g[:3, 0]).all() and not g[3:, 0].any() and np.isfinite(g[:, 1]).all()


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_ctc_loss_zero_infinity_zeroes_impossible_samples_and_their_gradients(reduction):
    ye, grad = _check_ctc(6, 2, 4, np.array([[1, 1, 1], [3, 1, 0]]), (3, 5), (3, 2), reduction=reduction,
                          zero_infinity=True)
    assert np.isfinite(ye.detach().numpy()).all()
    assert not grad.numpy()[:, 0].any() and grad.numpy()[:5, 1].any()


def test_ctc_loss_empty_targets_and_zero_lengths_match_torch():
    targets = np.array([[1, 2], [0, 0], [0, 0], [3, 0]])
    _check_ctc(5, 4, 4, targets, (5, 4, 0, 0), (2, 0, 0, 1), reduction="none")


def test_ctc_loss_float32_longer_sequences_match_torch():
    rng = np.random.default_rng(4)
    targets = rng.integers(1, 10, (4, 12))
    _check_ctc(50, 4, 10, targets, (50, 40, 33, 20), (12, 7, 5, 0), tol=2e-5, dtype=np.float32)


def test_ctc_loss_gradcheck_through_log_softmax_float64():
    # torch's gradient is d loss / d logits beneath a log_softmax, so check the composite
    logits = engine.tensor(np.random.default_rng(5).standard_normal((5, 2, 4)), requires_grad=True)
    targets = engine.tensor(np.array([[1, 1], [2, 3]]))
    for reduction in ("none", "mean"):
        def loss(x, reduction=reduction):
            return F.ctc_loss(F.log_softmax(x, -1), targets, (5, 4), (2, 2), reduction=reduction)

        assert gradcheck(loss, (logits,))


def test_ctc_loss_module_matches_torch_module():
    le, lt = _ctc_pair(7, 3, 5, seed=6)
    me, mt = engine.nn.CTCLoss(blank=4, zero_infinity=True), torch.nn.CTCLoss(blank=4, zero_infinity=True)
    args = (np.array([[1, 2, 0], [3, 3, 3], [0, 1, 2]]), (7, 4, 6), (3, 3, 2))
    ye = me(le, engine.tensor(args[0]), *args[1:])
    yt = mt(lt, torch.tensor(args[0]), *args[1:])
    close(ye, yt, atol=1e-10)
    backward_both(ye, yt)
    close(le.grad, lt.grad, atol=1e-10)
    assert type(me(le, engine.tensor(args[0]), *args[1:]).grad_fn).__name__ == "MeanBackward0"


@pytest.mark.parametrize(
    "targets, in_lens, tg_lens, kw",
    [(PADDED[:2, :3], (7, 5), (3, 2), {}), (PADDED[:2, :3], (6, 5), (4, 2), {}),
     (PADDED[:2, :3], (6, 5), (-1, 2), {}), (PADDED[:2, :3], (-1, 5), (1, 2), {}),
     (PADDED[:2, :3], (6, 5), (3, 2), dict(blank=5)),
     (PADDED[:2, :3], (6, 5, 4), (3, 2), {}), (PADDED[:2, :3], (6, 5), (3, 2, 1), {}),
     (np.array([1, 2, 2, 3]), (6, 5), (3, 2), {}), (PADDED[None, :2, :3], (6, 5), (3, 2), {}),
     (PADDED[:2, :3], (6, 5), (3, 2), dict(reduction="foo"))],
)
def test_ctc_loss_errors_match_torch(targets, in_lens, tg_lens, kw):
    le, lt = _ctc_pair(6, 2, 5)
    same_error(lambda: F.ctc_loss(le, engine.tensor(targets), in_lens, tg_lens, **kw),
               lambda: TF.ctc_loss(lt, torch.tensor(targets), in_lens, tg_lens, **kw))


def test_ctc_loss_dtype_errors_match_torch():
    le, lt = _ctc_pair(6, 2, 5)
    tg = PADDED[:2, :3]
    same_error(lambda: F.ctc_loss(le, engine.tensor(tg), engine.tensor([6.0, 5.0]), (3, 2)),
               lambda: TF.ctc_loss(lt, torch.tensor(tg), torch.tensor([6.0, 5.0]), torch.tensor([3, 2])))
    same_error(lambda: F.ctc_loss(le.detach().long(), engine.tensor(tg), (6, 5), (3, 2)),
               lambda: TF.ctc_loss(lt.detach().long(), torch.tensor(tg), (6, 5), (3, 2)))
    same_error(lambda: F.ctc_loss(le[None], engine.tensor(tg), (6, 5), (3, 2)),
               lambda: TF.ctc_loss(lt[None], torch.tensor(tg), (6, 5), (3, 2)))
