"""Training-loop behaviours the study texts teach (zero_grad, accumulation, optimisers, schedulers, clipping,
evaluation, early stopping), each run with torch and with the engine from the same initial weights."""
from __future__ import annotations

import numpy as np
import pytest
from conformance_helpers import LIBS, data_of, fill_deterministic
from torch_compare import both

_rng = np.random.default_rng(5)
X32 = _rng.standard_normal((32, 10)).astype(np.float32)
Y32 = _rng.standard_normal((32, 1)).astype(np.float32)
XC = _rng.standard_normal((48, 6)).astype(np.float32)
YC = (XC[:, 0] + XC[:, 1] > 0).astype(np.int64) + (XC[:, 2] > 1).astype(np.int64)


def silent_bug_loop(T, zero_grad: bool):
    """ref 002 "The Silent Bug": five epochs of SGD on one batch, with or without optimizer.zero_grad()."""
    nn = T.nn
    model = nn.Linear(10, 1)
    fill_deterministic(model, T)
    optimizer = T.optim.SGD(model.parameters(), lr=0.01)
    criterion = nn.MSELoss()
    X, y = T.tensor(X32), T.tensor(Y32)
    losses, grads = [], []
    for _ in range(5):
        if zero_grad:
            optimizer.zero_grad()
        pred = model(X)
        loss = criterion(pred, y)
        loss.backward()
        grads.append(model.weight.grad.clone())
        optimizer.step()
        losses.append(round(loss.item(), 4))
    return losses, grads, model.weight


def test_missing_zero_grad_accumulates_gradients_and_the_loss_still_changes():
    # README: the text's "loss identical every epoch" is a slip; the loss changes and the updates grow
    losses, grads, w = both(lambda T: silent_bug_loop(T, zero_grad=False), atol=1e-5)
    assert len(set(losses)) == 5
    fresh_losses, fresh_grads, fw = both(lambda T: silent_bug_loop(T, zero_grad=True), atol=1e-5)
    # without zero_grad, .grad after epoch k is the sum of the first k fresh-style gradients (on its own path)
    assert np.linalg.norm(grads[-1]["values"]) > 2 * np.linalg.norm(fresh_grads[-1]["values"])
    assert losses[0] == fresh_losses[0] and losses[1] == fresh_losses[1]  # epoch 1's grad is not yet stale
    assert losses[2] != fresh_losses[2]


def test_accumulated_grad_is_the_running_sum():
    def ex(T):
        model = T.nn.Linear(10, 1)
        fill_deterministic(model, T)
        X, y = T.tensor(X32), T.tensor(Y32)
        singles = []
        for i in range(3):
            loss = T.nn.functional.mse_loss(model(X[i * 8:(i + 1) * 8]), y[i * 8:(i + 1) * 8])
            singles.append(T.autograd.grad(loss, model.weight)[0])
            loss = T.nn.functional.mse_loss(model(X[i * 8:(i + 1) * 8]), y[i * 8:(i + 1) * 8])
            loss.backward()
        return [model.weight.grad, singles[0] + singles[1] + singles[2]]

    acc, summed = both(ex)
    np.testing.assert_allclose(acc["values"], summed["values"], rtol=1e-5)


# ref 002 §2 / ref 003 "Gradient accumulation": 4 micro-batches of loss / 4 == one full-batch step
@LIBS
def test_gradient_accumulation_equals_the_large_batch_gradient(T):
    nn = T.nn
    ACCUMULATION_STEPS = 4
    models = [nn.Linear(10, 1), nn.Linear(10, 1)]
    for m in models:
        fill_deterministic(m, T)
    criterion = nn.MSELoss()
    X, y = T.tensor(X32), T.tensor(Y32)
    loader = data_of(T).DataLoader(data_of(T).TensorDataset(X, y), batch_size=8)
    optimizer = T.optim.SGD(models[0].parameters(), lr=0.1)
    optimizer.zero_grad()
    for i, (X_batch, y_batch) in enumerate(loader):
        loss = criterion(models[0](X_batch), y_batch) / ACCUMULATION_STEPS
        loss.backward()
        if (i + 1) % ACCUMULATION_STEPS == 0:
            grad_at_step = models[0].weight.grad.clone()
            optimizer.step()
            optimizer.zero_grad()
    criterion(models[1](X), y).backward()
    np.testing.assert_allclose(grad_at_step.numpy(), models[1].weight.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert models[0].weight.grad is None  # zero_grad() sets grads to None by default (PyTorch 2.x)


def train_epoch(T, model, loader, criterion, optimizer, grad_clip=None):
    """ref 002 §4 "The Training Loop" (device moves are no-ops on the CPU)."""
    device = T.device("cpu")
    model.train()
    total_loss = 0.0
    norms = []
    for X_batch, y_batch in loader:
        X_batch = X_batch.to(device, non_blocking=True)
        y_batch = y_batch.to(device, non_blocking=True)
        optimizer.zero_grad()
        logits = model(X_batch)
        loss = criterion(logits, y_batch)
        loss.backward()
        if grad_clip is not None:
            norms.append(float(T.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_clip)))
        optimizer.step()
        total_loss += loss.item()
    return total_loss / len(loader), norms


def evaluate(T, model, loader, criterion):
    """ref 002 §4 evaluate(), decorated with no_grad as in the text."""

    @T.no_grad()
    def run():
        model.eval()
        total_loss, correct, total = 0.0, 0, 0
        for X_batch, y_batch in loader:
            logits = model(X_batch)
            total_loss += criterion(logits, y_batch).item()
            preds = logits.argmax(dim=1)
            correct += (preds == y_batch).sum().item()
            total += y_batch.size(0)
        return total_loss / len(loader), correct / total

    return run()


@pytest.mark.parametrize("opt", ["SGD", "Adam", "AdamW", "RMSprop"])
def test_training_loop_with_each_optimizer_and_clipping_matches_torch(opt):
    # ref 000 §7.3 "Optimizer Selection Guide" settings, ref 002 §4 loop with clipping
    settings = {
        "SGD": dict(lr=0.1, momentum=0.9, weight_decay=5e-4),
        "Adam": dict(lr=1e-2),
        "AdamW": dict(lr=1e-2, weight_decay=0.01),
        "RMSprop": dict(lr=1e-3, alpha=0.9, momentum=0.5),
    }[opt]

    def ex(T):
        d = data_of(T)
        model = T.nn.Sequential(T.nn.Linear(6, 16), T.nn.ReLU(), T.nn.Linear(16, 3))
        fill_deterministic(model, T)
        loader = d.DataLoader(d.TensorDataset(T.tensor(XC), T.tensor(YC)), batch_size=16, shuffle=False)
        optimizer = getattr(T.optim, opt)(model.parameters(), **settings)
        criterion = T.nn.CrossEntropyLoss()
        history = []
        for _ in range(3):
            train_loss, norms = train_epoch(T, model, loader, criterion, optimizer, grad_clip=1.0)
            val_loss, val_acc = evaluate(T, model, loader, criterion)
            history.append([round(train_loss, 4), round(val_loss, 4), val_acc, [round(n, 4) for n in norms]])
        return history, list(model.parameters()), [len(s) for s in optimizer.state_dict()["state"].values()]

    history, params, state_sizes = both(ex, rtol=2e-4, atol=2e-5)
    assert history[-1][1] < history[0][1]


def test_clip_grad_norm_returns_the_total_norm_and_rescales():
    # ref 002 §4 step 4 "Optional gradient clipping"
    def ex(T):
        model = T.nn.Linear(10, 1)
        fill_deterministic(model, T, scale=3.0)
        T.nn.functional.mse_loss(model(T.tensor(X32)), T.tensor(Y32)).backward()
        before = T.cat([p.grad.flatten() for p in model.parameters()]).norm()
        total = T.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        after = T.cat([p.grad.flatten() for p in model.parameters()]).norm()
        return [before, total, after]

    before, total, after = both(ex, rtol=1e-4)
    assert before["values"] > 1 and abs(after["values"] - 1) < 1e-4
    np.testing.assert_allclose(total["values"], before["values"])


# ref 000 §7.3 "Learning rate schedulers" and ref 002 §4 (scheduler.step() once per epoch)
@pytest.mark.parametrize("kind", ["StepLR", "CosineAnnealingLR", "ReduceLROnPlateau"])
def test_learning_rate_schedules_match_torch(kind):
    def ex(T):
        p = T.nn.Parameter(T.zeros(1))
        optimizer = T.optim.SGD([p], lr=0.1, momentum=0.9)
        sched = T.optim.lr_scheduler
        if kind == "StepLR":
            s = sched.StepLR(optimizer, step_size=30, gamma=0.1)
        elif kind == "CosineAnnealingLR":
            s = sched.CosineAnnealingLR(optimizer, T_max=100)
        else:
            s = sched.ReduceLROnPlateau(optimizer, mode="min", patience=5)
        lrs = []
        for epoch in range(100):
            optimizer.step()
            if kind == "ReduceLROnPlateau":
                s.step(1.0 if epoch > 10 else 1.0 - epoch * 0.01)
            else:
                s.step()
            lrs.append(optimizer.param_groups[0]["lr"])
        return lrs, (s.get_last_lr() if kind != "ReduceLROnPlateau" else s.get_last_lr())

    lrs, last = both(ex, rtol=1e-9, atol=1e-12)
    if kind == "StepLR":
        assert lrs[28] == 0.1 and abs(lrs[29] - 0.01) < 1e-12
    if kind == "CosineAnnealingLR":
        assert lrs[49] == pytest.approx(0.05) and lrs[-1] == pytest.approx(0.0)
    if kind == "ReduceLROnPlateau":
        assert lrs[15] == 0.1 and lrs[17] == pytest.approx(0.01)


def test_early_stopping_restores_the_best_cloned_state():
    # ref 002 §4 "Early stopping": best_state = {k: v.clone() ...}; model.load_state_dict(best_state)
    def ex(T):
        model = T.nn.Linear(10, 1)
        fill_deterministic(model, T)
        opt = T.optim.SGD(model.parameters(), lr=1.2)  # too large: the loss blows up after a while
        X, y = T.tensor(X32), T.tensor(Y32)
        best, best_state, no_improve, patience, stopped = float("inf"), None, 0, 2, None
        for epoch in range(1, 30):
            opt.zero_grad()
            loss = T.nn.functional.mse_loss(model(X), y)
            loss.backward()
            opt.step()
            val = T.nn.functional.mse_loss(model(X), y).item()
            if val < best:
                best, no_improve = val, 0
                best_state = {k: v.clone() for k, v in model.state_dict().items()}
            else:
                no_improve += 1
                if no_improve >= patience:
                    stopped = epoch
                    break
        model.load_state_dict(best_state)
        with T.no_grad():
            restored = T.nn.functional.mse_loss(model(X), y).item()
        return [stopped, round(best, 4), round(restored, 4)]

    stopped, best, restored = both(ex)
    assert stopped is not None and best == restored


def test_loss_item_is_a_float_and_detached_epoch_accumulator_has_no_graph():
    # ref 002 Bug 4: epoch_loss += loss.detach(); (epoch_loss / len(loader)).item()
    def ex(T):
        model = T.nn.Linear(10, 1)
        fill_deterministic(model, T)
        epoch_loss = T.tensor(0.0)
        n = 0
        for i in range(4):
            batch = slice(i * 8, (i + 1) * 8)
            loss = T.nn.functional.mse_loss(model(T.tensor(X32[batch])), T.tensor(Y32[batch]))
            epoch_loss += loss.detach()
            n += 1
        avg = (epoch_loss / n).item()
        return [type(loss.item()).__name__, epoch_loss.requires_grad, round(avg, 5)]

    obs = both(ex)
    assert obs[:2] == ["float", False]


def test_zero_grad_set_to_none_true_and_false():
    # ref 004 "optimizer.zero_grad(set_to_none=True)"
    def ex(T):
        model = T.nn.Linear(3, 1)
        opt = T.optim.AdamW(model.parameters(), lr=1e-3)
        model(T.ones(2, 3)).sum().backward()
        opt.zero_grad(set_to_none=False)
        zeros = model.weight.grad.clone()
        model(T.ones(2, 3)).sum().backward()
        opt.zero_grad(set_to_none=True)
        return [zeros, model.weight.grad is None]

    zeros, none = both(ex)
    assert (zeros["values"] == 0).all() and none is True


def test_step_skips_parameters_without_gradients():
    # a frozen / unused parameter has grad None and is left alone by step()
    def ex(T):
        a, b = T.nn.Parameter(T.ones(2)), T.nn.Parameter(T.ones(2))
        opt = T.optim.Adam([a, b], lr=0.1, weight_decay=0.1)
        (a * 3).sum().backward()
        opt.step()
        return [a, b, len(opt.state)]

    a, b, n_state = both(ex)
    assert (b["values"] == 1).all() and n_state == 1


def test_outputs_max_and_predicted_eq_targets_accuracy():
    # ref 000 §7.2: _, predicted = outputs.max(1); correct += predicted.eq(targets).sum().item()
    def ex(T):
        outputs = T.tensor([[0.1, 2.0, -1.0], [3.0, 0.0, 0.5], [0.2, 0.1, 0.9]])
        targets = T.tensor([1, 2, 2])
        values, predicted = outputs.max(1)
        correct = predicted.eq(targets).sum().item()
        acc = (outputs.argmax(1) == targets).float().mean().item()
        return [values, predicted, correct, targets.size(0), round(100.0 * correct / targets.size(0), 4),
                round(acc, 4)]

    obs = both(ex)
    assert obs[1]["values"].tolist() == [1, 0, 2] and obs[2] == 2 and obs[3] == 3


def test_complete_minimal_example_learns():
    # ref 002 §9 "A Complete Minimal Example" (fewer epochs): both libraries reach high validation accuracy
    def ex(T):
        d = data_of(T)
        T.manual_seed(0)
        rng = np.random.default_rng(42)
        n = 400
        X_np = rng.normal(size=(n, 20)).astype(np.float32)
        w = rng.normal(size=(20,)).astype(np.float32)
        y_np = (X_np @ w > 0).astype(np.int64)
        X_train_t, y_train_t = T.from_numpy(X_np[:320]), T.from_numpy(y_np[:320])
        X_val_t, y_val_t = T.from_numpy(X_np[320:]), T.from_numpy(y_np[320:])
        train_loader = d.DataLoader(d.TensorDataset(X_train_t, y_train_t), batch_size=64, shuffle=True)
        device = T.device("cuda" if T.cuda.is_available() else "cpu")
        nn = T.nn
        model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 32), nn.ReLU(),
                              nn.Linear(32, 2)).to(device)
        optimizer = T.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-4)
        criterion = nn.CrossEntropyLoss()
        for _ in range(8):
            model.train()
            for X_b, y_b in train_loader:
                X_b, y_b = X_b.to(device), y_b.to(device)
                optimizer.zero_grad()
                loss = criterion(model(X_b), y_b)
                loss.backward()
                optimizer.step()
            model.eval()
            with T.no_grad():
                logits = model(X_val_t.to(device))
                val_acc = (logits.argmax(1) == y_val_t.to(device)).float().mean().item()
        return val_acc > 0.85

    assert both(ex) is True


def test_criterion_values_match():
    # the texts' criteria: MSELoss and CrossEntropyLoss (mean reduction), on the same inputs
    def ex(T):
        logits = T.tensor(XC[:5, :3], requires_grad=True)
        ce = T.nn.CrossEntropyLoss()(logits, T.tensor([0, 2, 1, 1, 0]))
        mse = T.nn.MSELoss()(T.tensor(X32[:4]), T.tensor(X32[4:8]))
        ce.backward()
        return [ce, mse, logits.grad]

    both(ex)
