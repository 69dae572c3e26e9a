"""nn.Module behaviours the study texts teach (registration, parameters, buffers, state_dict, hooks,
train/eval, init, printing), each run with torch and with the engine."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conformance_helpers import LIBS, fill_deterministic
from torch_compare import both, both_raise, same_repr

import engine

X8 = np.random.default_rng(1).standard_normal((8, 10)).astype(np.float32)


def custom_linear(T):
    """ref 000 §5.2 "Custom Layer Implementation"."""
    nn, F = T.nn, T.nn.functional

    class CustomLinear(nn.Module):
        def __init__(self, in_features, out_features, bias=True):
            super().__init__()
            self.weight = nn.Parameter(T.randn(out_features, in_features))
            if bias:
                self.bias = nn.Parameter(T.zeros(out_features))
            else:
                self.register_parameter("bias", None)

        def forward(self, x):
            return F.linear(x, self.weight, self.bias)

    return CustomLinear


def deep_net(T):
    """ref 000 §5.3 "Complete Network Architecture"."""
    nn, F = T.nn, T.nn.functional

    class DeepNet(nn.Module):
        def __init__(self, input_dim, hidden_dim, output_dim, num_layers=4, dropout=0.1):
            super().__init__()
            self.input_proj = nn.Linear(input_dim, hidden_dim)
            self.layers = nn.ModuleList([
                nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.LayerNorm(hidden_dim), nn.GELU(),
                              nn.Dropout(dropout))
                for _ in range(num_layers)
            ])
            self.output_proj = nn.Linear(hidden_dim, output_dim)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            h = self.input_proj(x)
            h = F.gelu(h)
            for layer in self.layers:
                h = h + layer(h)
            h = self.dropout(h)
            return self.output_proj(h)

    return DeepNet


def two_layer_mlp(T):
    """ref 002 §3 "nn.Module Anatomy"."""
    nn = T.nn

    class TwoLayerMLP(nn.Module):
        def __init__(self, in_features, hidden, out_features):
            super().__init__()
            self.fc1 = nn.Linear(in_features, hidden)
            self.relu = nn.ReLU()
            self.drop = nn.Dropout(p=0.3)
            self.fc2 = nn.Linear(hidden, out_features)
            self.scale = nn.Parameter(T.ones(1))
            self.register_buffer("bias_correction", T.zeros(out_features))

        def forward(self, x):
            x = self.fc1(x)
            x = self.relu(x)
            x = self.drop(x)
            x = self.fc2(x)
            x = x * self.scale
            x = x + self.bias_correction
            return x

    return TwoLayerMLP


def simple_mlp(T):
    """ref 003 "Basic Module Structure"."""
    nn = T.nn

    class SimpleMLP(nn.Module):
        def __init__(self, input_dim, hidden_dim, output_dim):
            super().__init__()
            self.fc1 = nn.Linear(input_dim, hidden_dim)
            self.relu = nn.ReLU()
            self.fc2 = nn.Linear(hidden_dim, output_dim)

        def forward(self, x):
            x = self.fc1(x)
            x = self.relu(x)
            x = self.fc2(x)
            return x

    return SimpleMLP


# ref 000 §5.2: weight (64, 128), bias (64,), y (32, 64); bias=False registers None
def test_custom_linear_shapes_and_optional_bias():
    def ex(T):
        CustomLinear = custom_linear(T)
        layer = CustomLinear(128, 64)
        y = layer(T.randn(32, 128))
        nobias = CustomLinear(4, 3, bias=False)
        return [layer.weight.shape, layer.bias.shape, y.shape, y.requires_grad, nobias.bias,
                [n for n, _ in nobias.named_parameters()], [n for n, _ in layer.named_parameters()],
                type(layer.weight).__name__, layer.weight.is_leaf]

    obs = both(ex)
    assert obs[:3] == [("Size", (64, 128)), ("Size", (64,)), ("Size", (32, 64))]
    assert obs[4] is None and obs[5] == ["weight"] and obs[7] == "Parameter"


def test_custom_linear_forward_and_gradients_match():
    def ex(T):
        layer = custom_linear(T)(5, 3)
        fill_deterministic(layer, T)
        x = T.tensor(X8[:, :5])
        y = layer(x)
        y.pow(2).mean().backward()
        return [y, layer.weight.grad, layer.bias.grad]

    both(ex)


# ref 000 §5.3 "Count parameters" and §5.4 "Parameter Management" (names, freezing, apply(init))
def test_deep_net_parameter_count_names_and_freezing():
    def ex(T):
        model = deep_net(T)(input_dim=784, hidden_dim=256, output_dim=10)
        total = sum(p.numel() for p in model.parameters())
        names = [(n, tuple(p.shape), p.requires_grad) for n, p in model.named_parameters()]
        for param in model.layers[:2].parameters():
            param.requires_grad = False
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        return [total, trainable, names, type(model.layers[:2]).__name__, len(model.layers)]

    total, trainable, names, sliced, n = both(ex)
    assert total == 784 * 256 + 256 + 4 * (256 * 256 + 256 + 2 * 256) + 256 * 10 + 10
    assert trainable == total - 2 * (256 * 256 + 256 + 2 * 256)
    assert names[2][0] == "layers.0.0.weight" and sliced == "ModuleList" and n == 4
    assert f"{total:,}" == "468,746"


@LIBS
def test_apply_with_kaiming_init_and_zero_bias(T):
    # ref 000 §5.4 "Custom weight initialization"
    nn = T.nn

    def init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    model = nn.Sequential(nn.Linear(400, 300), nn.ReLU(), nn.Linear(300, 200))
    assert model.apply(init_weights) is model
    w = model[0].weight.detach().numpy()
    assert abs(w.std() - np.sqrt(2 / 400)) < 0.05 * np.sqrt(2 / 400)
    assert abs(w.mean()) < 0.005
    assert (model[2].bias.detach().numpy() == 0).all()
    assert model[0].weight.requires_grad  # init under the hood does not detach the parameter


# ref 002 §3: named_parameters / named_buffers / counts of TwoLayerMLP(10, 64, 4)
def test_two_layer_mlp_parameters_buffers_and_counts():
    def ex(T):
        model = two_layer_mlp(T)(10, 64, 4)
        params = [(n, tuple(p.shape), p.requires_grad) for n, p in model.named_parameters()]
        buffers = [(n, tuple(b.shape), b.requires_grad) for n, b in model.named_buffers()]
        total = sum(p.numel() for p in model.parameters())
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        return [params, buffers, total, trainable, list(model.state_dict())]

    params, buffers, total, trainable, keys = both(ex)
    # real PyTorch lists the module's own parameter ("scale") before its children's (the text puts it last)
    assert [p[0] for p in params] == ["scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert buffers == [("bias_correction", (4,), False)]
    assert total == trainable == 10 * 64 + 64 + 64 * 4 + 4 + 1
    assert "bias_correction" in keys and "scale" in keys


# ref 002 §3 "register_buffer ... saved/loaded with state_dict"; non-persistent buffers are not
def test_buffers_are_state_but_not_parameters():
    def ex(T):
        model = two_layer_mlp(T)(3, 4, 2)
        model.register_buffer("mask", T.ones(2), persistent=False)
        sd = model.state_dict()
        return [list(sd), "mask" in dict(model.named_buffers()),
                any(p is model.bias_correction for p in model.parameters()),
                sd["bias_correction"].requires_grad, sd["fc1.weight"].requires_grad]

    keys, has_mask, is_param, buf_rg, w_rg = both(ex)
    assert "mask" not in keys and has_mask and not is_param and not buf_rg and not w_rg


def test_state_dict_roundtrip_into_a_fresh_model_and_strict_errors():
    # ref 003 "Parameter Management and state_dict": load into a fresh model
    def ex(T):
        a, b = two_layer_mlp(T)(3, 4, 2), two_layer_mlp(T)(3, 4, 2)
        fill_deterministic(a, T)
        with T.no_grad():
            a.bias_correction.fill_(0.5)
        result = b.load_state_dict(a.state_dict())
        x = T.tensor(X8[:, :3])
        a.eval(), b.eval()
        return [list(result.missing_keys), list(result.unexpected_keys), b(x), bool((a(x) == b(x)).all())]

    obs = both(ex)
    assert obs[0] == [] and obs[1] == [] and obs[3] is True

    def missing(T):
        sd = two_layer_mlp(T)(3, 4, 2).state_dict()
        del sd["fc2.bias"]
        sd["extra"] = T.zeros(1)
        two_layer_mlp(T)(3, 4, 2).load_state_dict(sd)

    both_raise(missing, RuntimeError, "Missing key(s) in state_dict", '"fc2.bias"', "Unexpected key(s)",
               '"extra"')

    def wrong_size(T):
        two_layer_mlp(T)(3, 4, 2).load_state_dict(two_layer_mlp(T)(3, 5, 2).state_dict())

    both_raise(wrong_size, RuntimeError, "size mismatch for fc1.weight", "[5, 3]", "[4, 3]")

    def non_strict(T):
        sd = two_layer_mlp(T)(3, 4, 2).state_dict()
        del sd["scale"]
        r = two_layer_mlp(T)(3, 4, 2).load_state_dict(sd, strict=False)
        return [r.missing_keys, r.unexpected_keys]

    assert both(non_strict) == [["scale"], []]


# ref 002 §3 "Forward Hooks for Debugging"
def test_forward_hook_captures_activation_until_removed():
    def ex(T):
        model = two_layer_mlp(T)(10, 64, 4)
        fill_deterministic(model, T)
        model.eval()
        activations = {}

        def capture_activation(module, input, output):
            activations[module] = output.detach().cpu()
            activations["input_type"] = type(input).__name__

        hook = model.fc1.register_forward_hook(capture_activation)
        model(T.tensor(X8))
        first = activations[model.fc1]
        hook.remove()
        model(T.tensor(X8 * 2))
        return [first.shape, first.mean(), activations["input_type"], activations[model.fc1] is first,
                first.requires_grad]

    obs = both(ex)
    assert obs[0] == ("Size", (8, 64)) and obs[2] == "tuple" and obs[3] is True and obs[4] is False


def test_full_backward_hook_sees_output_gradients():
    # ref 002 §3 "Gradient hooks for debugging vanishing/exploding gradients"
    def ex(T):
        model = two_layer_mlp(T)(10, 64, 4)
        fill_deterministic(model, T)
        model.eval()
        log = []

        def log_grad_norm(module, grad_input, grad_output):
            for g in grad_output:
                if g is not None:
                    log.append(f"{module.__class__.__name__} grad norm: {g.norm().item():.4f}")

        h = model.fc1.register_full_backward_hook(log_grad_norm)
        model(T.tensor(X8, requires_grad=True)).pow(2).sum().backward()
        h.remove()
        model(T.tensor(X8)).pow(2).sum().backward()
        return log

    log = both(ex)
    assert len(log) == 1 and log[0].startswith("Linear grad norm: ")


# ref 003 "print(model) # shows layer structure", output shape [32, 10]
def test_print_model_shows_the_layer_structure():
    printed = same_repr(lambda T: simple_mlp(T)(128, 256, 10))
    assert "(fc1): Linear(in_features=128, out_features=256, bias=True)" in printed
    same_repr(lambda T: deep_net(T)(8, 16, 2, num_layers=2))
    same_repr(lambda T: T.nn.Sequential(T.nn.Conv2d(1, 4, 3, padding=1), T.nn.BatchNorm2d(4), T.nn.ReLU(),
                                        T.nn.MaxPool2d(2), T.nn.Flatten(), T.nn.Dropout(0.2)))

    def ex(T):
        model = simple_mlp(T)(128, 256, 10)
        return [model(T.randn(32, 128)).shape, [(n, tuple(p.shape)) for n, p in model.named_parameters()]]

    assert both(ex)[0] == ("Size", (32, 10))


# ref 003 "Freeze parameters": fc1 frozen, trainable count drops, frozen grads stay None
def test_freezing_fc1_keeps_its_grad_none():
    def ex(T):
        model = simple_mlp(T)(6, 5, 3)
        fill_deterministic(model, T)
        for param in model.fc1.parameters():
            param.requires_grad = False
        total = sum(p.numel() for p in model.parameters())
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        model(T.tensor(X8[:, :6])).sum().backward()
        return [total, trainable, model.fc1.weight.grad is None, model.fc2.weight.grad]

    total, trainable, frozen_none, g = both(ex)
    assert (total, trainable, frozen_none) == (6 * 5 + 5 + 5 * 3 + 3, 5 * 3 + 3, True)


# ref 003 "Custom Layers and Modules": GateLayer
def test_gate_layer_forward_and_grads():
    def ex(T):
        nn = T.nn

        class GateLayer(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                self.weight = nn.Parameter(T.randn(out_features, in_features))
                self.gate_weight = nn.Parameter(T.randn(out_features, in_features))
                self.bias = nn.Parameter(T.zeros(out_features))

            def forward(self, x):
                gate = T.sigmoid(x @ self.gate_weight.t())
                return (x @ self.weight.t() + self.bias) * gate

        layer = GateLayer(10, 4)
        fill_deterministic(layer, T)
        y = layer(T.tensor(X8))
        y.sum().backward()
        return [y] + [p.grad for p in layer.parameters()]

    both(ex)


# ref 002 Problem 1: a GLU layer; param.grad is non-None after backward for every parameter
def test_glu_layer_gradients_flow_to_every_parameter():
    def ex(T):
        nn = T.nn

        class GatedLinearUnit(nn.Module):
            def __init__(self, d_in, d_out):
                super().__init__()
                self.proj = nn.Linear(d_in, 2 * d_out)

            def forward(self, x):
                a, b = self.proj(x).chunk(2, dim=-1)
                return a * T.sigmoid(b)

        glu = GatedLinearUnit(10, 3)
        fill_deterministic(glu, T)
        y = glu(T.tensor(X8))
        y.sum().backward()
        return [y, [p.grad is not None for p in glu.parameters()], glu.proj.weight.grad,
                T.nn.functional.glu(glu.proj(T.tensor(X8)), dim=-1)]

    obs = both(ex)
    assert obs[1] == [True, True]
    np.testing.assert_allclose(obs[0]["values"], obs[3]["values"], rtol=1e-6)


# ref 002 Bug 5 / ref 003 "Training vs Evaluation": Dropout in train vs eval
def test_dropout_train_zeroes_and_rescales_eval_is_identity():
    def ex(T):
        T.manual_seed(0)
        drop = T.nn.Dropout(p=0.3)
        x = T.ones(2000)
        y = drop(x)
        kept = y[y != 0]
        frac_zero = float((y == 0).float().mean())
        drop.eval()
        return [drop.training, bool((drop(x) == x).all()), sorted(set(kept.tolist())), round(frac_zero, 1)]

    training, identity, kept_values, frac = both(ex)
    assert training is False and identity is True
    np.testing.assert_allclose(kept_values, [1 / 0.7], rtol=1e-6)
    assert frac == 0.3


# ref 002 Bug 5: BatchNorm uses batch stats in train (predictions depend on the batch), running stats in eval
def test_batchnorm_train_vs_eval_and_running_stats():
    def ex(T):
        bn = T.nn.BatchNorm1d(3)
        x = T.tensor(X8[:, :3] * 2 + 1)
        y_train = bn(x)
        alone_train = bn(x[:2])[0]  # same sample, different batch -> different output
        stats = [bn.running_mean.clone(), bn.running_var.clone(), bn.num_batches_tracked.clone()]
        bn.eval()
        y_eval_full = bn(x)[0]
        y_eval_alone = bn(x[:1])[0]
        return [y_train, alone_train, stats, y_eval_full, y_eval_alone, list(bn.state_dict())]

    y_train, alone_train, stats, full, alone, keys = both(ex, atol=1e-5)
    assert not np.allclose(y_train["values"][0], alone_train["values"])
    np.testing.assert_allclose(full["values"], alone["values"])  # eval: batch-independent
    assert stats[2]["values"] == 2
    assert keys == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]


# ref 002 §4 / Bug 3: train()/eval() flip .training recursively, return self; eval alone still builds a graph
def test_train_eval_flags_and_eval_does_not_disable_autograd():
    def ex(T):
        model = T.nn.Sequential(T.nn.Linear(4, 4), T.nn.Dropout(0.2), T.nn.Sequential(T.nn.BatchNorm1d(4)))
        r1 = model.eval() is model
        flags_eval = [m.training for m in model.modules()]
        out = model(T.ones(2, 4))
        with T.no_grad():
            out_ng = model(T.ones(2, 4))
        r2 = model.train() is model
        return [r1, r2, flags_eval, [m.training for m in model.modules()], out.requires_grad,
                out.grad_fn is not None, out_ng.requires_grad]

    obs = both(ex)
    assert obs[2] == [False] * 5 and obs[3] == [True] * 5 and obs[4:] == [True, True, False]


# ref 000 §4.2 / ref 002 §6: model.to(device) moves parameters and buffers and returns the model
def test_module_to_cpu_returns_self_and_keeps_parameters():
    def ex(T):
        model = two_layer_mlp(T)(3, 4, 2)
        w = model.fc1.weight
        moved = model.to(T.device("cpu"))
        return [moved is model, model.fc1.weight is w, model.bias_correction.device,
                model.to(T.float64).fc1.weight.dtype, model.bias_correction.dtype]

    assert both(ex) == [True, True, ("device", "cpu"), ("dtype", "float64"), ("dtype", "float64")]


# ref 003 "Memory Management": checkpoint(self._inner_forward, x, use_reentrant=False)
def test_gradient_checkpointing_matches_plain_backward():
    def ex(T):
        nn = T.nn
        checkpoint = T.utils.checkpoint.checkpoint

        class CheckpointedBlock(nn.Module):
            def __init__(self, use_ckpt):
                super().__init__()
                self.layer1, self.layer2, self.relu = nn.Linear(10, 10), nn.Linear(10, 10), nn.ReLU()
                self.use_ckpt = use_ckpt

            def forward(self, x):
                if self.use_ckpt:
                    return checkpoint(self._inner_forward, x, use_reentrant=False)
                return self._inner_forward(x)

            def _inner_forward(self, x):
                return self.layer2(self.relu(self.layer1(x)))

        out = []
        for use in (True, False):
            block = CheckpointedBlock(use)
            fill_deterministic(block, T)
            x = T.tensor(X8, requires_grad=True)
            y = block(x)
            y.sum().backward()
            out.append([y, x.grad, block.layer1.weight.grad])
        return out

    ck, plain = both(ex)
    for a, b in zip(ck, plain):
        np.testing.assert_allclose(a["values"], b["values"], rtol=1e-6)


def test_assigning_a_plain_tensor_is_not_a_parameter():
    # ref 002 §3: only nn.Parameter registers; a plain tensor attribute is not in parameters()
    def ex(T):
        m = T.nn.Module()
        m.w = T.nn.Parameter(T.ones(2))
        m.t = T.ones(3)
        m.sub = T.nn.Linear(2, 2)
        names = [n for n, _ in m.named_parameters()]
        return [names, list(m.state_dict()), [n for n, _ in m.named_children()]]

    assert both(ex) == [["w", "sub.weight", "sub.bias"], ["w", "sub.weight", "sub.bias"], ["sub"]]


def test_parameter_repr_and_module_zero_grad():
    same_repr(lambda T: T.nn.Parameter(T.tensor([1.0, 2.0])))

    def ex(T):
        m = T.nn.Linear(2, 1)
        m(T.ones(1, 2)).sum().backward()
        had = m.weight.grad is not None
        m.zero_grad()
        return [had, m.weight.grad is None]

    assert both(ex) == [True, True]


@pytest.mark.parametrize("name", ["Linear", "ReLU", "GELU", "LayerNorm", "Dropout", "BatchNorm1d"])
def test_layer_reprs_match(name):
    args = {"Linear": (3, 2), "LayerNorm": (4,), "Dropout": (0.1,), "BatchNorm1d": (4,)}.get(name, ())
    same_repr(lambda T: getattr(T.nn, name)(*args))


def test_engine_module_classes_exist_for_every_text_layer():
    for name in ("Linear", "ReLU", "Dropout", "GELU", "LayerNorm", "ModuleList", "Sequential", "MSELoss",
                 "CrossEntropyLoss", "BatchNorm1d", "BatchNorm2d", "Parameter"):
        assert hasattr(engine.nn, name) and hasattr(torch.nn, name)
