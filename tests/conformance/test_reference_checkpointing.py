"""Saving and loading behaviours the study texts teach (state_dict files, training checkpoints, resume,
map_location, safetensors), each run with torch and with the engine."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conformance_helpers import fill_deterministic
from torch_compare import both, both_raise

import engine

X = np.random.default_rng(11).standard_normal((16, 10)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int64)


def mlp(T):
    """ref 003 SimpleMLP shape, with a BatchNorm so buffers are part of the state."""
    nn = T.nn
    return nn.Sequential(nn.Linear(10, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))


# ref 000 §8.1 / ref 003 "state_dict vs Full Model": save the state_dict, load it into a fresh instance
def test_state_dict_file_roundtrip_reproduces_outputs(tmp_path):
    def ex(T):
        model = mlp(T)
        fill_deterministic(model, T)
        model(T.tensor(X))  # a training-mode pass moves the BatchNorm running stats
        path = tmp_path / f"{T.__name__}_model_weights.pth"
        T.save(model.state_dict(), path)
        fresh = mlp(T)
        result = fresh.load_state_dict(T.load(path))
        fresh.eval(), model.eval()
        with T.no_grad():
            same = bool((fresh(T.tensor(X)) == model(T.tensor(X))).all())
        return [same, list(result.missing_keys), list(T.load(path).keys()), fresh[1].num_batches_tracked]

    same, missing, keys, nbt = both(ex)
    assert same and missing == [] and nbt["values"] == 1
    assert keys[:3] == ["0.weight", "0.bias", "1.weight"] and "1.running_mean" in keys


# ref 002 §4: the state_dict holds references, so the early-stopping copy must clone()
def test_state_dict_values_share_storage_with_the_parameters():
    def ex(T):
        model = T.nn.Linear(3, 2)
        sd = model.state_dict()
        cloned = {k: v.clone() for k, v in sd.items()}
        with T.no_grad():
            model.weight.add_(1.0)
        return [bool((sd["weight"] == model.weight).all()), bool((cloned["weight"] == model.weight).any()),
                sd["weight"].requires_grad, sd["weight"].is_leaf]

    assert both(ex) == [True, False, False, True]


def make_training_state(T, steps: int):
    model = mlp(T)
    fill_deterministic(model, T)
    optimizer = T.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = T.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    return model, optimizer, scheduler


def run_steps(T, model, optimizer, scheduler, steps: int):
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = T.nn.functional.cross_entropy(model(T.tensor(X)), T.tensor(Y))
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(round(loss.item(), 5))
    return losses


# ref 000 §8.1 "Save checkpoint with training state" / ref 002 §7 save_checkpoint, load_checkpoint
def test_checkpoint_resume_continues_exactly_like_uninterrupted_training(tmp_path):
    def ex(T):
        model, optimizer, scheduler = make_training_state(T, 0)
        first = run_steps(T, model, optimizer, scheduler, 3)
        path = tmp_path / f"{T.__name__}_checkpoint.pth"
        T.save({
            "epoch": 3,
            "model_state_dict": model.state_dict(),
            "optimizer_state_dict": optimizer.state_dict(),
            "scheduler_state_dict": scheduler.state_dict(),
            "loss": first[-1],
            "best_acc": 0.5,
        }, path)
        uninterrupted = run_steps(T, model, optimizer, scheduler, 3)

        model2, optimizer2, scheduler2 = make_training_state(T, 0)
        checkpoint = T.load(path, map_location="cpu")
        model2.load_state_dict(checkpoint["model_state_dict"])
        optimizer2.load_state_dict(checkpoint["optimizer_state_dict"])
        scheduler2.load_state_dict(checkpoint["scheduler_state_dict"])
        start_epoch = checkpoint["epoch"] + 1
        resumed = run_steps(T, model2, optimizer2, scheduler2, 3)
        return [first, uninterrupted, resumed, start_epoch, checkpoint["best_acc"], checkpoint["loss"],
                optimizer2.param_groups[0]["lr"], sorted(checkpoint["optimizer_state_dict"]["state"][0])]

    first, uninterrupted, resumed, start, best, loss, lr, state_keys = both(ex, rtol=1e-4, atol=1e-5)
    assert resumed == uninterrupted and start == 4 and best == 0.5 and loss == first[-1]
    assert lr == pytest.approx(1e-2 * 0.5 ** 3) and state_keys == ["exp_avg", "exp_avg_sq", "step"]


def test_without_optimizer_state_resuming_diverges(tmp_path):
    # ref 002 §7: "Without it, resuming training resets these -- the first few resumed epochs behave
    # differently""
    def ex(T):
        model, optimizer, scheduler = make_training_state(T, 0)
        run_steps(T, model, optimizer, scheduler, 3)
        sd = {k: v.clone() for k, v in model.state_dict().items()}
        uninterrupted = run_steps(T, model, optimizer, scheduler, 2)
        model2, optimizer2, scheduler2 = make_training_state(T, 0)
        model2.load_state_dict(sd)
        fresh_opt = run_steps(T, model2, optimizer2, scheduler2, 2)
        return [uninterrupted[0] == fresh_opt[0], uninterrupted[1] != fresh_opt[1]]

    assert both(ex) == [True, True]


def test_optimizer_and_scheduler_state_dict_layout():
    def ex(T):
        model = T.nn.Linear(3, 2)
        opt = T.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        sched = T.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        model(T.ones(1, 3)).sum().backward()
        opt.step()
        sched.step()
        sd = opt.state_dict()
        group = {k: sd["param_groups"][0][k] for k in ("lr", "betas", "eps", "weight_decay", "amsgrad",
                                                        "params")}
        ssd = sched.state_dict()
        sched_keys = ("T_max", "eta_min", "base_lrs", "last_epoch", "_step_count", "_last_lr")
        sched_state = {k: ssd[k] for k in sched_keys}
        return [sorted(sd), sorted(sd["state"]), sd["state"][0]["step"], group, sched_state]

    obs = both(ex, rtol=1e-12, atol=0)
    assert obs[0] == ["param_groups", "state"] and obs[1] == [0, 1] and obs[2]["values"] == 1


# ref 002 §7: map_location ensures tensors land on the target device
@pytest.mark.parametrize("where", ["cpu", "device"])
def test_map_location_cpu(tmp_path, where):
    def ex(T):
        path = tmp_path / f"{T.__name__}_{where}.pt"
        T.save({"w": T.arange(3.0)}, path)
        loc = "cpu" if where == "cpu" else T.device("cpu")
        return T.load(path, map_location=loc)["w"]

    assert both(ex)["values"].tolist() == [0.0, 1.0, 2.0]


def test_saved_tensor_keeps_dtype_shape_and_requires_grad(tmp_path):
    # ref 000 §8.1 stores 'loss': loss (a tensor in the graph); a leaf that required grad still does
    def ex(T):
        path = tmp_path / f"{T.__name__}_misc.pt"
        w = T.ones(2, requires_grad=True)
        ints = T.tensor([1, 2], dtype=T.int32)
        T.save({"loss": (w * 2).sum(), "w": w, "i": ints, "t": (1, 2.5, "x", None)}, path)
        r = T.load(path)
        return [r["loss"], r["loss"].grad_fn is None, r["w"], r["i"], r["t"]]

    loss, no_fn, w, i, t = both(ex)
    assert loss["values"] == 4 and no_fn and w["requires_grad"] and i["dtype"] == "int32"
    assert t == (1, 2.5, "x", None)


def test_saving_a_whole_model_is_refused_by_the_engine(tmp_path):
    # ref 000 §8.1 / ref 003 "BAD: Save full model": torch pickles the object (and only loads it back with
    # weights_only=False, the pitfall ref 000 warns about); the engine's checkpoint format never pickles,
    # so it refuses up front and points at state_dict()
    path = tmp_path / "model_complete.pth"
    torch.save(torch.nn.Linear(2, 2), path)
    with pytest.raises(Exception, match="weights_only"):
        torch.load(path)
    assert isinstance(torch.load(path, weights_only=False), torch.nn.Linear)
    with pytest.raises(TypeError, match=r"state_dict\(\)"):
        engine.save(engine.nn.Linear(2, 2), tmp_path / "engine_model_complete.pth")


def test_engine_loads_a_pytorch_state_dict_file(tmp_path):
    # torch's .pt zip is read by a restricted unpickler (hostile files: tests/engine/test_serialization.py)
    path = tmp_path / "torch_weights.pt"
    sd = torch.nn.Linear(2, 2).state_dict()
    torch.save(sd, path)
    back = engine.load(path)
    assert list(back) == list(sd)
    for k, v in sd.items():
        assert back[k].dtype is engine.float32 and np.array_equal(back[k].numpy(), v.numpy())


def test_loading_a_missing_file_raises_file_not_found(tmp_path):
    both_raise(lambda T: T.load(tmp_path / "nope.pth"), FileNotFoundError, "nope.pth")


# ref 000 §8.2 "SafeTensors (recommended for security)": save_file / load_file, and the files interoperate
def test_safetensors_roundtrip_and_interop_with_torch(tmp_path):
    from safetensors.torch import load_file, save_file

    from engine.serialization import load_safetensors, save_safetensors

    tmodel = mlp(torch)
    fill_deterministic(tmodel, torch)
    save_file(tmodel.state_dict(), str(tmp_path / "torch.safetensors"))
    emodel = mlp(engine)
    emodel.load_state_dict(load_safetensors(tmp_path / "torch.safetensors"))
    save_safetensors(emodel.state_dict(), tmp_path / "engine.safetensors")
    back = mlp(torch)
    back.load_state_dict(load_file(str(tmp_path / "engine.safetensors")))
    tmodel.eval(), emodel.eval(), back.eval()
    with torch.no_grad():
        t_out = tmodel(torch.tensor(X)).numpy()
        b_out = back(torch.tensor(X)).numpy()
    with engine.no_grad():
        e_out = emodel(engine.tensor(X)).numpy()
    np.testing.assert_allclose(e_out, t_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(b_out, t_out)
    assert emodel[1].num_batches_tracked.dtype == engine.int64
