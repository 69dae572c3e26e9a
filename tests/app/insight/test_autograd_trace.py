"""The autograd stepper's record: each node's gradients are the engine's (autograd.grad on the same graph) and
torch's (node hooks on torch's own graph), for the presets and one training step of a bundled example; a
second backward doubles .grad or fails with the engine's error; create_graph's second derivative is torch's;
a hook fires once per backward with its gradient; the parser runs no user code."""
from __future__ import annotations

import importlib.util
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import engine
from app.document import load_document
from app.export import generate_script
from app.insight.autograd_trace import (
    MAX_TRACE_LAYERS,
    PRESETS,
    ExpressionError,
    TraceOptions,
    build_expression,
    parse_values,
    trace_document,
    trace_expression,
    trace_training_step,
)
from app.training import Trainer
from app.training.session import load_training_modules
from engine.autograd.function import FREED_MSG

EXAMPLES = Path(__file__).resolve().parents[3] / "assets" / "examples"

# each preset written out in torch, to build torch's own graph of it
IN_TORCH = {
    "(x**2 + 1)**3": lambda x: (x ** 2 + 1) ** 3,
    "x*y + sin(x)": lambda x, y: x * y + torch.sin(x),
    "x**2": lambda x: x ** 2,
    "x**3": lambda x: x ** 3,
    "sigmoid(sum(w*v) + b)": lambda w, v, b: torch.sigmoid(torch.sum(w * v) + b),
}
EXPRESSIONS = [PRESETS[name] for name in PRESETS]


def test_every_preset_has_its_torch_twin():
    assert {e for e, _ in EXPRESSIONS} == set(IN_TORCH)


def _torch_leaves(values: str) -> dict[str, torch.Tensor]:
    return {k: torch.tensor(v, requires_grad=True) for k, v in parse_values(values).items()}


def _torch_log(expression: str, values: str):
    """torch's backward seen through post-hooks on every node: (name, grad_outputs, grad_inputs) in order."""
    leaves = _torch_leaves(values)
    out = IN_TORCH[expression](*leaves.values())
    log, seen, stack = [], set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        node.register_hook(lambda gi, go, n=node: log.append(
            (type(n).__name__, [g.detach().numpy().copy() for g in go],
             [None if g is None else g.detach().numpy().copy() for g in gi])))
        stack.extend(m for m, _ in node.next_functions)
    out.backward()
    return log, leaves


def _close(a, b, what=""):
    assert (a is None) == (b is None), what
    if a is not None:
        np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64),
                                   rtol=1e-5, atol=1e-7, err_msg=what)


@pytest.mark.parametrize("expression,values", EXPRESSIONS, ids=[e for e, _ in EXPRESSIONS])
def test_each_nodes_gradients_are_the_engines_autograd_grad_and_torchs(expression, values):
    trace = trace_expression(expression, values)
    steps = [s for s in trace.steps if s.phase == 0]
    # the engine: the gradient handed to each node is d(out)/d(its result), by autograd.grad on the same graph
    out, leaves, _, made = build_expression(expression, values)
    tensors = [t for _, t in made]
    expected = engine.autograd.grad(out, tensors + [t for _, t in leaves], retain_graph=True)
    by_label = {label: g for (label, _), g in zip(made, expected)}
    by_label.update({name: g for (name, _), g in zip(leaves, expected[len(made):])})
    for s in steps:
        if s.label in by_label:
            _close(s.grad_outputs[0], by_label[s.label].numpy(), f"{s.name} {s.label}")
    assert {s.label for s in steps} >= {label for label, _ in made}
    # torch: the same nodes in the same order, handed and passing the same gradients
    log, t_leaves = _torch_log(expression, values)
    assert [s.name for s in steps] == [name for name, _, _ in log]
    for s, (name, go, gi) in zip(steps, log):
        _close(s.grad_outputs[0], go[0], name)
        assert len(s.grad_inputs) == len(gi), name
        for (_, _, mine), theirs in zip(s.grad_inputs, gi):
            _close(mine, theirs, name)
    for name, t in t_leaves.items():
        _close(trace.phases[0].result[name], t.grad.numpy(), name)


def test_the_texts_chain_rule_example_reads_75_times_1_times_4():
    trace = trace_expression("(x**2 + 1)**3", "x=2")
    nodes = [s for s in trace.steps if s.kind == "node"]
    assert [s.label for s in nodes] == ["(x ** 2 + 1) ** 3", "x ** 2 + 1", "x ** 2"]
    assert [s.local_factors()[0] for s in nodes] == [75.0, 1.0, 4.0]
    leaf = trace.steps[-1]
    assert leaf.kind == "leaf" and leaf.leaf == "x" and float(leaf.grad_after) == 300.0


def _model_and_batch(name: str):
    load_training_modules()
    doc = load_document(EXAMPLES / f"{name}.json")
    t = Trainer(doc, doctor=False)
    x = t.data.x_train[:4].astype(np.float32)
    y = np.asarray(t.y_train[:4])
    return doc, t, x, y


def _torch_model(doc, state, tmp_path):
    path = tmp_path / "model_for_trace.py"
    path.write_text(generate_script(doc), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("model_for_trace", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["model_for_trace"] = module
    spec.loader.exec_module(module)
    net = module.Model()
    net.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in state.items()})
    return net, module


def test_one_training_step_of_a_bundled_example_matches_autograd_grad_and_torch(tmp_path):
    doc, t, x, y = _model_and_batch("mlp_digits")
    trace = trace_training_step(t.model, t.loss_fn, engine.tensor(x), engine.tensor(y), t.node_params,
                                TraceOptions(hook=True))
    params = [(name, p) for ps in t.node_params.values() for name, p in ps]
    assert all(p.grad is None for _, p in params)  # the trace leaves .grad as it was
    leaf_steps = {s.leaf: s for s in trace.steps if s.kind == "leaf"}
    assert set(leaf_steps) == {name for name, _ in params}
    # the engine: autograd.grad of the same loss, recomputed
    pred = t.model(engine.tensor(x))
    expected = engine.autograd.grad(t.loss_fn(pred, engine.tensor(y)), [p for _, p in params] + [pred])
    for (name, _), g in zip(params, expected):
        _close(leaf_steps[name].grad_after, g.numpy(), name)
    hook = next(s for s in trace.steps if s.kind == "hook")
    _close(hook.grad_outputs[0], expected[-1].numpy(), "the model's output")
    # torch: the exported model with the same weights, the same batch
    net, module = _torch_model(doc, t.model.state_dict(), tmp_path)
    t_pred = net(torch.from_numpy(x))
    t_pred.retain_grad()
    module.compute_loss(module.build_loss(), t_pred, torch.from_numpy(y)).backward()
    their = dict(net.named_parameters())
    for name, s in leaf_steps.items():
        _close(s.grad_after, their[name].grad.numpy(), name)
    _close(hook.grad_outputs[0], t_pred.grad.numpy(), "the model's output (torch)")
    # every node's step names the graph view's op of the same key
    graph = trace.phases[0].graph
    for s in trace.steps:
        if s.kind in ("node", "leaf"):
            assert graph.ops[s.key].name == s.name


def test_a_second_backward_with_retain_graph_doubles_grad():
    trace = trace_expression("(x**2 + 1)**3", "x=2", TraceOptions(retain_graph=True, second_backward=True))
    first, second = trace.phases
    assert first.call == "w.backward(retain_graph=True)" and first.freed == []
    assert second.error is None
    np.testing.assert_allclose(second.result["x"], 2 * first.result["x"])
    leaf = [s for s in trace.steps if s.kind == "leaf"]
    seen = [(None if s.grad_before is None else float(s.grad_before), float(s.grad_after)) for s in leaf]
    assert seen == [(None, float(first.result["x"])), (float(first.result["x"]), float(second.result["x"]))]


def test_a_second_backward_without_retain_graph_records_the_engines_error():
    trace = trace_expression("(x**2 + 1)**3", "x=2", TraceOptions(second_backward=True))
    x = engine.tensor(2.0, requires_grad=True)
    w = (x ** 2 + 1) ** 3
    w.backward()
    with pytest.raises(RuntimeError) as err:
        w.backward()
    first, second = trace.phases
    assert second.error == str(err.value) == FREED_MSG
    assert trace.steps[-1].kind == "error" and trace.steps[-1].message == str(err.value)
    # what the first call freed: the two powers' saved tensors (x**2 saved x, (..)**3 saved x**2 + 1)
    assert sorted(first.graph.ops[k].name for k in first.freed) == ["PowBackward0", "PowBackward0"]
    assert first.saved  # (described before the call)
    np.testing.assert_allclose(second.result["x"], first.result["x"])  # nothing was added


@pytest.mark.parametrize("expression,values", EXPRESSIONS, ids=[e for e, _ in EXPRESSIONS])
def test_create_graph_gives_torchs_second_derivative(expression, values):
    trace = trace_expression(expression, values, TraceOptions(create_graph=True))
    phase = trace.phases[1]
    leaves = _torch_leaves(values)
    out = IN_TORCH[expression](*leaves.values())
    name, first_leaf = next(iter(leaves.items()))
    (g,) = torch.autograd.grad(out, first_leaf, create_graph=True)
    (g2,) = torch.autograd.grad(g.sum(), first_leaf, allow_unused=True)
    assert phase.error is None
    _close(phase.result[name], g2.detach().numpy(), expression)
    assert any(s.phase == 1 and s.kind == "node" for s in trace.steps)


def test_the_second_derivative_of_the_texts_example_is_630():
    trace = trace_expression("(x**2 + 1)**3", "x=2", TraceOptions(create_graph=True))
    x = torch.tensor(2.0, requires_grad=True)
    (g,) = torch.autograd.grad((x ** 2 + 1) ** 3, x, create_graph=True)
    (g2,) = torch.autograd.grad(g, x)
    assert float(trace.phases[1].result["x"]) == pytest.approx(float(g2)) == pytest.approx(630.0)


def test_a_hook_fires_once_per_backward_with_the_gradient_of_its_tensor():
    trace = trace_expression("(x**2 + 1)**3", "x=2", TraceOptions(retain_graph=True, second_backward=True,
                                                                  hook=True))
    seen = []
    x = torch.tensor(2.0, requires_grad=True)
    y = x ** 2
    y.register_hook(lambda g: seen.append(float(g)))
    w = (y + 1) ** 3
    w.backward(retain_graph=True)
    w.backward()
    hooks = [s for s in trace.steps if s.kind == "hook"]
    assert trace.hooked == "x ** 2"
    assert [s.phase for s in hooks] == [0, 1]
    assert [float(s.grad_outputs[0]) for s in hooks] == seen == [75.0, 75.0]
    # it fires as the gradient reaches x**2's node: just before that node's backward runs
    for h in hooks:
        after = trace.steps[trace.steps.index(h) + 1]
        assert after.key == h.key and after.label == "x ** 2"


def test_tracing_leaves_no_hook_behind():
    from engine.autograd.function import AccumulateGrad

    before = AccumulateGrad._hooked
    trace_expression("x*y + sin(x)", "x=1, y=3",
                     TraceOptions(hook=True, retain_graph=True, second_backward=True))
    assert AccumulateGrad._hooked == before


def test_the_record_pickles():
    trace = trace_expression("sigmoid(sum(w*v) + b)", "w=[0.5, -1], v=[1, 2], b=0.1",
                             TraceOptions(create_graph=True, hook=True, second_backward=True))
    again = pickle.loads(pickle.dumps(trace))
    assert [s.name for s in again.steps] == [s.name for s in trace.steps]
    _close(again.phases[0].result["w"], trace.phases[0].result["w"])


def test_the_texts_spellings_are_read():
    trace = trace_expression("(x² + 1)³", "x=2")
    assert float(trace.phases[0].result["x"]) == 300.0


@pytest.mark.parametrize("expression,values,says", [
    ("__import__('os').system('true')", "x=1", "unknown function"),
    ("x.__class__", "x=1", "not a method call"),
    ("(lambda: 1)()", "x=1", "unknown function 'lambda: 1'"),
    ("lambda: x", "x=1", "Lambda is not allowed"),
    ("x if x else x", "x=1", "IfExp is not allowed"),
    ("'a' * x", "x=1", "is not a number"),
    ("x + q", "x=1", "'q' has no value"),
    ("x +", "x=1", "syntax error at column"),
    ("x * 2", "x=[1, 2]", "backward needs one number"),
    ("x * 2", "x=open('f')", "expected a number"),
    ("2 * 3", "x=1", "uses none of the variables"),
    ("x" + " + x" * 100, "x=1", "too long"),
    ("sum(x, 1)", "x=[1, 2]", "takes one tensor"),
    ("sum(x * y)", "x=[1, 2], y=[1, 2, 3]", "x * y:"),
])
def test_bad_input_is_one_plain_line_and_runs_nothing(expression, values, says):
    with pytest.raises(ExpressionError) as err:
        trace_expression(expression, values)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_the_hook_fires_again_in_the_second_derivatives_walk_like_torchs():
    trace = trace_expression("(x**2 + 1)**3", "x=2", TraceOptions(create_graph=True, hook=True))
    seen = []
    x = torch.tensor(2.0, requires_grad=True)
    y = x ** 2
    y.register_hook(lambda g: seen.append(float(g.detach())))
    ((y + 1) ** 3).backward(create_graph=True)
    torch.autograd.grad(x.grad, x)
    hooks = [s for s in trace.steps if s.kind == "hook"]
    assert [float(s.grad_outputs[0]) for s in hooks] == seen == [75.0, 120.0]


def test_a_graph_past_the_layer_cap_is_refused_in_one_line_before_anything_is_built():
    from app.document import blocks as B

    doc = load_document(EXAMPLES / "cnn_digits.json")
    inst = B.group(doc, ["conv2", "act2"], name="stage")
    doc.set_param(inst, "repeat", MAX_TRACE_LAYERS)  # two layers (and two ports) per copy
    layers = B.expanded_size(doc)
    assert layers > MAX_TRACE_LAYERS
    with pytest.raises(ExpressionError) as err:
        trace_document(doc)
    assert str(err.value) == (f"the graph expands to {layers:,} nodes; the stepper traces graphs of up to "
                              f"{MAX_TRACE_LAYERS} (try a smaller graph, or one of its blocks on its own)")
    doc.set_param(inst, "repeat", 2)  # under the cap it traces: every parameter of every copy gets a step
    trace = trace_document(doc)
    assert {f"{inst}.{r}.conv2.weight" for r in range(2)} <= {s.leaf for s in trace.steps if s.kind == "leaf"}
