"""Mixed precision: autocast output dtypes, and GradScaler step-skipping and scale updates as torch.amp's."""

import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import engine
import engine.optim as optim
from engine.amp import GradScaler, autocast, autocast_cast, get_autocast_dtype, is_autocast_enabled


def test_autocast_runs_matmul_in_half_and_leaves_reductions_in_float32():
    a = engine.randn(3, 4, requires_grad=True)
    b = engine.randn(4, 5)
    with autocast("cpu", dtype=engine.float16):
        assert is_autocast_enabled("cpu") and get_autocast_dtype("cpu") is engine.float16
        y = a @ b
        s = a.sum()
        sm = engine.softmax(a, dim=1)
    assert y.dtype is engine.float16 and s.dtype is engine.float32 and sm.dtype is engine.float32
    assert not is_autocast_enabled("cpu")
    ref = (a @ b).detach().numpy()
    np.testing.assert_allclose(y.detach().numpy().astype(np.float32), ref, rtol=2e-3, atol=2e-3)
    y.float().sum().backward()
    assert a.grad.dtype is engine.float32  # gradients reach float32 parameters in float32
    np.testing.assert_allclose(
        a.grad.numpy(), np.broadcast_to(b.numpy().sum(1), (3, 4)), rtol=2e-3, atol=2e-3
    )


def test_autocast_disabled_nested_and_as_decorator():
    a, b = engine.randn(2, 2), engine.randn(2, 2)
    with autocast("cpu"):
        with autocast("cpu", enabled=False):
            assert (a @ b).dtype is engine.float32
        assert (a @ b).dtype is engine.bfloat16  # torch's CPU default

    @autocast("cpu", dtype=engine.float16)
    def f():
        return a @ b

    assert f().dtype is engine.float16 and (a @ b).dtype is engine.float32
    assert autocast_cast(engine.arange(3))[0].dtype is engine.int64


def test_autocast_state_is_thread_local():
    seen = []
    with autocast("cpu"):
        t = threading.Thread(target=lambda: seen.append(is_autocast_enabled("cpu")))
        t.start()
        t.join()
    assert seen == [False]


def _train(lib, steps_x, **kw):
    """A few SGD steps of loss = sum(w * x) through a GradScaler; x may hold inf/NaN."""
    if lib == "torch":
        w = torch.ones(3, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.1)
        scaler = torch.amp.GradScaler("cpu", **kw)
        X = torch.tensor
    else:
        w = engine.ones(3, requires_grad=True)
        opt = optim.SGD([w], lr=0.1)
        scaler = GradScaler("cpu", **kw)
        X = engine.tensor
    log = []
    for x in steps_x:
        opt.zero_grad()
        loss = (w * X(x, dtype=w.dtype)).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        log.append((scaler.get_scale(), scaler._get_growth_tracker(), w.detach().numpy().tolist()))
    return log, scaler


STEPS = [
    [1.0, 2.0, 3.0],
    [0.5, 0.5, 0.5],
    [np.inf, 1.0, 1.0],
    [1.0, 1.0, 1.0],
    [np.nan, 0.0, 0.0],
    [2.0, 0.0, -1.0],
    [1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0],
    [-1.0, 3.0, 1e-3],
    [1.0, 1.0, 1.0],
]


@pytest.mark.parametrize(
    "kw",
    [
        dict(init_scale=16.0, growth_interval=3),
        dict(init_scale=2.0**16, growth_factor=4.0, backoff_factor=0.25, growth_interval=2),
    ],
)
def test_grad_scaler_matches_torch_skipping_inf_steps_with_growth_and_backoff(kw):
    ours, _ = _train("engine", STEPS, **kw)
    theirs, _ = _train("torch", STEPS, **kw)
    assert [o[:2] for o in ours] == [t[:2] for t in theirs]
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o[2], t[2], rtol=1e-6)
    assert ours[2][2] == ours[1][2]  # the inf step was skipped
    assert ours[2][0] < ours[1][0]  # and the scale backed off


def test_unscale_then_clip_then_step_does_not_unscale_twice():
    w = engine.ones(2, requires_grad=True)
    opt = optim.SGD([w], lr=1.0)
    scaler = GradScaler("cpu", init_scale=8.0)
    scaler.scale((w * engine.tensor([1.0, 2.0])).sum()).backward()
    scaler.unscale_(opt)
    assert w.grad.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    assert w.tolist() == [0.0, -1.0]
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    scaler.update()
    scaler.unscale_(opt)  # a new iteration may unscale again


def test_update_needs_inf_checks_and_accepts_a_new_scale():
    scaler = GradScaler("cpu")
    scaler.scale(engine.ones(1))
    with pytest.raises(RuntimeError, match="No inf checks"):
        scaler.update()
    scaler.update(new_scale=3.0)
    assert scaler.get_scale() == 3.0


def test_state_dict_round_trip_and_disabled_scaler():
    _, scaler = _train("engine", STEPS[:4], init_scale=16.0, growth_interval=3)
    sd = scaler.state_dict()
    _, ref = _train("torch", STEPS[:4], init_scale=16.0, growth_interval=3)
    assert sd == {
        k: (v if not isinstance(v, torch.Tensor) else v.item()) for k, v in ref.state_dict().items()
    }
    fresh = GradScaler("cpu")
    fresh.load_state_dict(sd)
    assert fresh.get_scale() == sd["scale"] and fresh._get_growth_tracker() == sd["_growth_tracker"]
    off = GradScaler("cpu", enabled=False)
    loss = engine.tensor(2.0)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(RuntimeError, match="empty"):
        fresh.load_state_dict({})


# ----------------------------------------------------------------------------- CPU autocast: bfloat16
def _autocast_ops(T):
    """Ops on float32 `a` and bfloat16 `b` whose output dtype under CPU autocast tells which list (lower
    precision, float32, or neither) torch puts them on."""
    F = T.nn.functional
    a = T.tensor([[0.5, -1.0, 2.0, 0.25]] * 4) + T.arange(4.0)[:, None] * 0.1
    b, t, d = a.bfloat16(), T.tensor([0, 1, 2, 3]), a.double()
    img, k = a.reshape(1, 1, 4, 4), a[:2, :2].reshape(1, 1, 2, 2)
    return {
        "matmul": lambda: a @ a, "matmul 1-D": lambda: a[0] @ a[0], "mm": lambda: a.mm(a),
        "bmm": lambda: T.bmm(a[None], a[None]), "addmm": lambda: T.addmm(a, a, a),
        "baddbmm": lambda: T.baddbmm(a[None], a[None], a[None]),
        "addbmm": lambda: T.addbmm(a, a[None], a[None]),
        "einsum": lambda: T.einsum("ij,jk->ik", a, a), "linear": lambda: F.linear(a, a, a[0]),
        "conv2d": lambda: F.conv2d(img, k), "conv_transpose2d": lambda: F.conv_transpose2d(img, k),
        "prelu": lambda: F.prelu(a, T.ones(1)), "vecdot": lambda: T.linalg.vecdot(a, a),
        "multi_dot": lambda: T.linalg.multi_dot([a, a]), "tensordot": lambda: T.tensordot(a, a, 1),
        "sdpa": lambda: F.scaled_dot_product_attention(a[None], a[None], a[None]),
        "Linear": lambda: T.nn.Linear(4, 3)(a), "Conv2d": lambda: T.nn.Conv2d(1, 2, 3)(img),
        "dot": lambda: a[0].dot(a[0]), "mv": lambda: a.mv(a[0]), "addmv": lambda: T.addmv(a[0], a, a[0]),
        "addr": lambda: T.addr(a, a[0], a[0]), "outer": lambda: T.outer(a[0], a[0]),
        "matmul float64": lambda: d @ d, "mse float64": lambda: F.mse_loss(d, d),
        "matmul mixed": lambda: a @ b, "add mixed": lambda: a + b, "cat mixed": lambda: T.cat([a, b]),
        "softmax float32": lambda: a.softmax(0), "softmax bf16": lambda: b.softmax(0), "sum": lambda: b.sum(),
        "log_softmax": lambda: b.log_softmax(0), "layer_norm": lambda: F.layer_norm(b, (4,)),
        "group_norm": lambda: F.group_norm(b.reshape(1, 4, 4), 2), "relu": lambda: F.relu(b),
        "gelu": lambda: F.gelu(b), "exp": lambda: b.exp(), "norm": lambda: b.norm(), "mean": lambda: b.mean(),
        "max_pool2d": lambda: F.max_pool2d(b.reshape(1, 1, 4, 4), 2),
        "batch_norm": lambda: F.batch_norm(b.reshape(2, 2, 4), None, None, training=True),
        "embedding": lambda: F.embedding(t, a), "cosine_similarity": lambda: F.cosine_similarity(b, b),
        "prod": lambda: b.prod(), "trace": lambda: b.trace(), "cdist": lambda: T.cdist(b, b),
        "cross_entropy": lambda: F.cross_entropy(b, t), "mse": lambda: F.mse_loss(b, a),
        "nll": lambda: F.nll_loss(b, t), "l1": lambda: F.l1_loss(b, b),
        "smooth_l1": lambda: F.smooth_l1_loss(b, b),
        "huber": lambda: F.huber_loss(b, b), "kl_div": lambda: F.kl_div(b, b, reduction="batchmean"),
        "bce": lambda: F.binary_cross_entropy(b.sigmoid(), b.sigmoid()),
        "bce_with_logits": lambda: F.binary_cross_entropy_with_logits(b, b.sigmoid()),
        "multi_margin": lambda: F.multi_margin_loss(b, t), "poisson_nll": lambda: F.poisson_nll_loss(b, b),
        "soft_margin": lambda: F.soft_margin_loss(b, b), "triplet": lambda: F.triplet_margin_loss(b, b, b),
    }


def test_cpu_autocast_defaults_to_bfloat16_with_torchs_op_lists():
    seen = {}
    for lib in (torch, engine):
        with lib.autocast("cpu"):
            assert str(lib.get_autocast_dtype("cpu")).endswith("bfloat16")
            seen[lib.__name__] = {k: str(f().dtype).split(".")[-1] for k, f in _autocast_ops(lib).items()}
        assert not lib.is_autocast_enabled("cpu")
    assert seen["engine"] == seen["torch"]
    assert seen["engine"]["linear"] == "bfloat16" and seen["engine"]["cross_entropy"] == "float32"


def test_cpu_autocast_float16_still_works_and_other_dtypes_disable_it_as_torch():
    a = engine.randn(3, 4)
    with autocast("cpu", dtype=engine.float16):
        assert (a @ a.t()).dtype is engine.float16
    for e_dt, t_dt in ((engine.float32, torch.float32), (engine.float64, torch.float64)):
        with pytest.warns(UserWarning) as ours:
            with autocast("cpu", dtype=e_dt):
                assert not is_autocast_enabled("cpu") and (a @ a.t()).dtype is engine.float32
        with pytest.warns(UserWarning) as theirs:
            with torch.autocast("cpu", dtype=t_dt):
                pass
        assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]


def test_autocast_gradients_reach_float32_parameters_as_torch():
    x, w = (np.random.default_rng(i).standard_normal((5, 4)).astype(np.float32) for i in range(2))
    grads = []
    for lib in (torch, engine):
        xt, wt = lib.tensor(x), lib.tensor(w, requires_grad=True)
        with lib.autocast("cpu"):
            y = lib.nn.functional.linear(xt, wt)
            loss = lib.nn.functional.cross_entropy(y, lib.tensor([0, 1, 2, 3, 4]))
        assert str(y.dtype).endswith("bfloat16") and str(loss.dtype).endswith("float32")
        loss.backward()
        assert str(wt.grad.dtype).endswith("float32")
        grads.append((loss.item(), wt.grad.numpy()))
    assert grads[1][0] == pytest.approx(grads[0][0], rel=1e-6)  # the same bfloat16 logits, lse in float32
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=2e-2, atol=1e-3)


def _train_bf16_params(lib, steps):
    """SGD on bfloat16 parameters through a CPU GradScaler (allowed, though bfloat16 needs no scaling)."""
    w = lib.ones(3, dtype=lib.bfloat16, requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.1)
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0**16, growth_interval=2)
    log = []
    for x in steps:
        opt.zero_grad()
        scaled = scaler.scale((w * lib.tensor(x, dtype=lib.bfloat16)).sum())
        scaled.backward()
        grad = w.grad.float().tolist()
        scaler.step(opt)
        scaler.update()
        log.append((str(scaled.dtype).split(".")[-1], grad, w.float().tolist(), scaler.get_scale()))
    return log


def test_grad_scaler_with_bfloat16_gradients_as_torch():
    steps = [[1.0, 2.0, 3.0], [1e38, 2.0, 3.0], [0.5, -1.0, 0.25], [1.0, 1.0, 1.0], [np.nan, 1.0, 1.0]]
    ours, theirs = _train_bf16_params(engine, steps), _train_bf16_params(torch, steps)
    assert repr(ours) == repr(theirs)  # (repr: NaN gradients compare equal)
    assert ours[1][2] == ours[0][2] and ours[1][3] < ours[0][3]  # the inf step skipped, the scale backed off


def test_cnn_example_trains_under_bfloat16_autocast_to_float32_accuracy(tmp_path):
    """assets/examples/cnn_digits.json as the app trains it, with `amp` on (CPU autocast: bfloat16) and off:
    the same final validation accuracy within a point, and the convolutions really ran in bfloat16."""
    from app.document.document import load_document
    from app.training.trainer import Trainer

    accuracy, conv_dtypes = {}, {}
    for amp in (False, True):
        doc = load_document(Path(__file__).parents[2] / "assets" / "examples" / "cnn_digits.json")
        doc.training["amp"] = amp
        trainer = Trainer(doc, tmp_path / f"amp-{amp}", device="cpu", epochs=4, doctor=False, blas_threads=1)
        convs = [m for m in trainer.model.modules() if isinstance(m, engine.nn.Conv2d)]
        seen = set()
        for m in convs:
            m.register_forward_hook(lambda mod, inp, out, seen=seen: seen.add(out.dtype))
        summary = trainer.run()
        assert summary.status == "finished"
        accuracy[amp], conv_dtypes[amp] = summary.val_accuracy, seen
    # (the epoch's activation statistics run outside autocast, in float32, as before)
    assert conv_dtypes[False] == {engine.float32} and engine.bfloat16 in conv_dtypes[True]
    assert accuracy[False] > 0.9
    assert abs(accuracy[True] - accuracy[False]) <= 0.01, accuracy
