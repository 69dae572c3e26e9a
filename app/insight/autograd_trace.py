"""The autograd stepper's record: backward run by the engine, written down node by node.

A small expression (the study texts' `(x**2 + 1)**3` at x=2, dw/dx = 300) or one training step of a document
is built from engine tensors; every node of its graph gets a post-hook (`Node.register_hook`, torch's: it
runs right after the node's backward with the gradients the node passes to each of its inputs and the ones
it was handed), and the engine's own backward runs. The hooks append one `Step` per node in the order the
engine ran them, so the record is what the engine did, never a re-derivation of the chain rule. Around the
first backward the record can show: a second backward (the `.grad` of each leaf doubling when the graph was
retained, the engine's error when it was freed), `create_graph=True` and the second derivative taken through
the first one's graph, and a tensor hook firing. Qt-free; the record is plain data (numpy arrays), picklable.

Expressions are parsed with `ast` and evaluated by walking the tree over a whitelist of operators and
functions: user text is never handed to eval or exec."""
from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import engine
from app.step_graph import StepGraph, capture_step_graph, graph_nodes
from engine.autograd.function import FREED_MSG

MAX_TEXT = 200  # characters of an expression or of its values
MAX_NODES = 60  # syntax-tree nodes of an expression: the drawing stays small
MAX_ELEMENTS = 16  # elements of one variable
# nodes (layers and block ports, expanded) of a graph whose training step the stepper traces: a step per
# backward node, each with its gradients; ResNet-18 (~70 layers) is 131 steps and a few seconds; a
# 2,000-layer graph would take minutes and make thousands of steps nobody can step through
MAX_TRACE_LAYERS = 400

# name -> (expression, values); the first is the study texts' chain-rule example
PRESETS: dict[str, tuple[str, str]] = {
    "chain rule: (x² + 1)³ at x = 2": ("(x**2 + 1)**3", "x=2"),
    "a leaf used twice: x·y + sin(x)": ("x*y + sin(x)", "x=1, y=3"),
    "accumulation: x² at x = 2": ("x**2", "x=2"),
    "higher order: x³ at x = 3": ("x**3", "x=3"),
    "one neuron: sigmoid(Σ w·v + b)": ("sigmoid(sum(w*v) + b)", "w=[0.5, -1], v=[1, 2], b=0.1"),
}

_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sin": engine.sin, "cos": engine.cos, "tan": engine.tan, "exp": engine.exp, "log": engine.log,
    "sqrt": engine.sqrt, "abs": engine.abs, "tanh": engine.tanh, "sigmoid": engine.sigmoid,
    "relu": engine.relu, "sum": engine.sum, "mean": engine.mean,
}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow, ast.MatMult: operator.matmul,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
# what people type from the texts: x², ×, ·, the minus sign
_SPELLINGS = {"²": "**2", "³": "**3", "×": "*", "·": "*", "−": "-", "^": "**"}


class ExpressionError(ValueError):
    """An expression or its values that can't be traced: one plain line saying what and where."""


@dataclass(frozen=True)
class TraceOptions:
    """What to show around the first backward. `retain_graph` keeps the graph's saved tensors after it;
    `second_backward` runs backward again (accumulating, or failing on a freed graph); `create_graph` builds
    the first backward's own graph and differentiates the first leaf's gradient again; `hook` registers a
    tensor hook on the first intermediate result (the model's output in a training step)."""

    retain_graph: bool = False
    second_backward: bool = False
    create_graph: bool = False
    hook: bool = False


@dataclass
class Step:
    """One thing backward did. kind: "node" (an op's backward ran), "leaf" (AccumulateGrad added into a
    leaf's .grad), "hook" (a tensor hook fired), "error" (backward raised; `message` is the engine's text).

    grad_outputs: the gradients handed to the node (one per output of its op); grad_inputs: per edge of
    torch's next_functions, (the key of the node it goes to or None, that node's label, the gradient
    passed)."""

    phase: int
    kind: str
    key: int | None
    name: str
    label: str
    grad_outputs: list[np.ndarray | None] = field(default_factory=list)
    grad_inputs: list[tuple[int | None, str, np.ndarray | None]] = field(default_factory=list)
    leaf: str | None = None
    grad_before: np.ndarray | None = None
    grad_after: np.ndarray | None = None
    message: str = ""

    def local_factors(self) -> list[float | None]:
        """For one-element gradients: each passed gradient over the incoming one, the node's local derivative
        (75 → 300 through x**2 at x=2 is × 4). None where either is not a single number, or the incoming
        is 0."""
        g = self.grad_outputs[0] if len(self.grad_outputs) == 1 else None
        if g is None or g.size != 1 or float(g.ravel()[0]) == 0.0:
            return [None] * len(self.grad_inputs)
        return [float(gi.ravel()[0]) / float(g.ravel()[0]) if gi is not None and gi.size == 1 else None
                for _, _, gi in self.grad_inputs]


@dataclass
class Phase:
    """One backward call: its code, the graph it walked (keys as in `Step.key`), the gradients it left
    (each leaf's .grad after backward, or what autograd.grad returned), the engine's error if it raised,
    what each node had saved for backward before the call and which of those the call freed."""

    title: str
    call: str
    graph: StepGraph
    result: dict[str, np.ndarray | None] = field(default_factory=dict)
    error: str | None = None
    saved: dict[int, str] = field(default_factory=dict)
    freed: list[int] = field(default_factory=list)


@dataclass
class AutogradTrace:
    """The whole record: the leaves' values, the output, the phases and their steps in the engine's order."""

    source: str
    output: str
    leaves: dict[str, np.ndarray]
    phases: list[Phase]
    steps: list[Step]
    hooked: str | None = None  # the tensor that carries the hook, by label
    training: bool = False

    def leaf_grads_at(self, index: int) -> dict[str, np.ndarray | None]:
        """Each leaf's .grad once steps[index] has happened (before the first step: None each)."""
        grads: dict[str, np.ndarray | None] = {name: None for name in self.leaves}
        for step in self.steps[: index + 1]:
            if step.kind == "leaf" and step.leaf in grads:
                grads[step.leaf] = step.grad_after
        return grads

    def done_keys(self, index: int) -> set[int]:
        """The nodes of steps[index]'s phase that have run by then (the current one included)."""
        if not self.steps:
            return set()
        phase = self.steps[index].phase
        return {s.key for s in self.steps[: index + 1]
                if s.phase == phase and s.kind in ("node", "leaf") and s.key is not None}


# ----------------------------------------------------------------------------- parsing (no eval)
def normalise(text: str) -> str:
    """The texts' spellings (x², ×, ^) as Python operators."""
    for a, b in _SPELLINGS.items():
        text = text.replace(a, b)
    return text.strip()


def _parse(text: str, what: str) -> ast.Expression:
    if len(text) > MAX_TEXT:
        raise ExpressionError(f"the {what} is too long ({len(text)} characters; at most {MAX_TEXT})")
    if not text:
        raise ExpressionError(f"the {what} is empty")
    try:
        return ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"the {what} has a syntax error at column {exc.offset or 1}") from None


def _number(node: ast.AST, where: str) -> float:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _number(node.operand, where)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    raise ExpressionError(f"{where}: expected a number or a list of numbers, got {ast.unparse(node)!r}")


def _array(node: ast.AST, where: str) -> Any:
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_array(e, where) for e in node.elts]
    return _number(node, where)


def parse_values(text: str) -> dict[str, np.ndarray]:
    """`x=2, w=[0.5, -1]` as {name: float32 array}. Names, numbers and (nested) lists of numbers only."""
    text = normalise(text).replace(";", ",")
    tree = _parse(f"_({text})", "values")
    call = tree.body
    if not isinstance(call, ast.Call) or call.args or any(k.arg is None for k in call.keywords):
        raise ExpressionError("the values should read like x=2, w=[0.5, -1]")
    values: dict[str, np.ndarray] = {}
    for kw in call.keywords:
        if kw.arg in _FUNCTIONS:
            raise ExpressionError(f"{kw.arg!r} is a function name; call the variable something else")
        items = _array(kw.value, f"value of {kw.arg}")
        try:
            arr = np.asarray(items, dtype=np.float32)
        except ValueError:
            raise ExpressionError(f"value of {kw.arg}: the nested lists are ragged") from None
        if arr.size > MAX_ELEMENTS or arr.size == 0:
            raise ExpressionError(f"value of {kw.arg}: {arr.size} elements (1 to {MAX_ELEMENTS})")
        values[kw.arg] = arr
    if not values:
        raise ExpressionError("give each variable a value, like x=2")
    return values


def check_expression(text: str, names: set[str]) -> ast.Expression:
    """Parse `text` and check that it uses only numbers, the variables `names`, + - * / ** @, unary minus and
    the functions of _FUNCTIONS (as f(t) or t.f())."""
    tree = _parse(normalise(text), "expression")
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise ExpressionError(f"the expression is too big to draw ({len(nodes)} parts; at most {MAX_NODES})")
    for node in nodes:
        col = f"column {getattr(node, 'col_offset', 0) + 1}"
        if isinstance(node, (ast.Expression, ast.Load, ast.operator, ast.unaryop)):
            if isinstance(node, ast.operator) and type(node) not in _BINARY:
                raise ExpressionError(f"{col}: the operator {type(node).__name__} is not supported "
                                      "(use + - * / ** @)")
            if isinstance(node, ast.unaryop) and type(node) not in _UNARY:
                raise ExpressionError(f"{col}: only unary minus is supported")
            continue
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            continue
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float):
                raise ExpressionError(f"{col}: {node.value!r} is not a number")
            continue
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
            if name not in _FUNCTIONS:
                raise ExpressionError(f"{col}: unknown function {ast.unparse(fn)!r} (known: "
                                      f"{', '.join(sorted(_FUNCTIONS))})")
            if node.keywords or len(node.args) != (0 if isinstance(fn, ast.Attribute) else 1):
                raise ExpressionError(f"{col}: {name} takes one tensor and nothing else")
            continue
        if isinstance(node, ast.Attribute):  # only as a method call (checked with its Call)
            if not any(isinstance(c, ast.Call) and c.func is node for c in nodes):
                raise ExpressionError(f"{col}: {ast.unparse(node)!r} is not a method call")
            continue
        if isinstance(node, ast.Name):
            called = any(isinstance(c, ast.Call) and c.func is node for c in nodes)
            if not called and node.id not in names:
                raise ExpressionError(f"{col}: {node.id!r} has no value (add {node.id}=... to the values)")
            continue
        raise ExpressionError(f"{col}: {type(node).__name__} is not allowed in an expression "
                              f"({ast.unparse(node)!r})")
    return tree


def _evaluate(node: ast.AST, env: dict[str, Any], labels: dict[int, str], made: list) -> Any:
    """Walk the checked tree, calling engine ops; labels[id(grad_fn)] is the text of the part it computes."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, env, labels, made)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    try:
        if isinstance(node, ast.BinOp):
            out = _BINARY[type(node.op)](_evaluate(node.left, env, labels, made),
                                         _evaluate(node.right, env, labels, made))
        elif isinstance(node, ast.UnaryOp):
            out = _UNARY[type(node.op)](_evaluate(node.operand, env, labels, made))
        else:  # a Call, checked
            fn = node.func
            if isinstance(fn, ast.Attribute):
                arg = _evaluate(fn.value, env, labels, made)
                name = fn.attr
            else:
                arg = _evaluate(node.args[0], env, labels, made)
                name = fn.id
            if not isinstance(arg, engine.Tensor):
                arg = engine.tensor(float(arg))
            out = _FUNCTIONS[name](arg)
    except ExpressionError:
        raise
    except (RuntimeError, ValueError, TypeError, ZeroDivisionError, OverflowError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ExpressionError(f"{ast.unparse(node)}: {first}") from None
    if isinstance(out, engine.Tensor) and out.grad_fn is not None:
        labels.setdefault(id(out.grad_fn), ast.unparse(node))
        made.append((ast.unparse(node), out))
    return out


# ----------------------------------------------------------------------------- tracing
def _np(t: Any) -> np.ndarray | None:
    if t is None:
        return None
    return np.array(t.detach().to("cpu").numpy(), copy=True)


def _short(t: Any) -> str:
    if t.numel() == 1:
        return f"{float(t.detach().to('cpu').reshape(()).item()):.6g}"
    return f"({'×'.join(map(str, t.shape))}) {str(t.dtype).replace('engine.', '')}"


def _saved(node: Any) -> str | None:
    """What `node` keeps for its backward (saved tensors, and its output where the op keeps that), or None
    once backward freed it (the engine's saved_tensors raises FREED_MSG then)."""
    if not hasattr(type(node), "saved_tensors"):
        return ""
    try:
        items = [t for t in node.saved_tensors if t is not None]
        if getattr(type(node), "_save_output", False) and "_out" in node.__dict__:
            items.append(node.saved_output)
    except RuntimeError as exc:
        if str(exc) == FREED_MSG:
            return None
        return str(exc).splitlines()[0]
    return ", ".join(_short(t) for t in items)


class _Recorder:
    """Post-hooks on every node of a graph, appending a Step per node as backward runs it."""

    def __init__(self, root: Any, labels: dict[int, str], leaf_names: dict[int, str], steps: list[Step],
                 phase: int) -> None:
        self.nodes = graph_nodes(root)
        self.keys = {id(n): k for k, n in enumerate(self.nodes)}
        self.labels, self.leaf_names, self.steps, self.phase = labels, leaf_names, steps, phase
        self.before: dict[int, np.ndarray | None] = {}
        for node in self.nodes:
            var = getattr(node, "variable", None)
            if var is not None:
                self.before[id(node)] = _np(var.grad)
        self.handles = [n.register_hook(self._hook_for(n)) for n in self.nodes]

    def label(self, node: Any) -> str:
        var = getattr(node, "variable", None)
        if var is not None:
            return self.leaf_names.get(id(var), "leaf")
        return self.labels.get(id(node), node.name())

    def _hook_for(self, node: Any) -> Callable[[tuple, tuple], None]:
        def post(grad_inputs: tuple, grad_outputs: tuple) -> None:
            key = self.keys[id(node)]
            var = getattr(node, "variable", None)
            if var is not None:
                self.steps.append(Step(self.phase, "leaf", key, type(node).__name__, self.label(node),
                                       [_np(g) for g in grad_outputs], [], self.label(node),
                                       self.before.get(id(node)), _np(var.grad)))
                return
            passed = []
            for (target, _), g in zip(node.next_functions, grad_inputs):
                tk = self.keys.get(id(target)) if target is not None else None
                passed.append((tk, self.label(target) if target is not None else "", _np(g)))
            self.steps.append(Step(self.phase, "node", key, type(node).__name__, self.label(node),
                                   [_np(g) for g in grad_outputs], passed))
        return post

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _run_phase(phase_no: int, title: str, call: str, root: Any, run: Callable[[], Any], named: dict,
               labels: dict[int, str], leaf_names: dict[int, str], steps: list[Step],
               recorders: list[_Recorder]) -> tuple[Phase, Any]:
    """Run one backward call (`run`) on the graph of `root` with every node observed; its Phase record and
    what `run` returned (autograd.grad's gradients)."""
    graph = capture_step_graph(root, named, grads=False)
    rec = _Recorder(root.grad_fn, labels, leaf_names, steps, phase_no)
    recorders.append(rec)
    for key, node in enumerate(rec.nodes):
        op = graph.ops[key]
        if op.param is None:
            op.scope = labels.get(id(node), op.scope)
    phase = Phase(title, call, graph)
    phase.saved = {k: s for k, n in enumerate(rec.nodes) if (s := _saved(n))}
    answer = None
    try:
        answer = run()
    except Exception as exc:  # noqa: BLE001 - the engine's error is part of what the stepper shows
        phase.error = str(exc)
        steps.append(Step(phase_no, "error", None, type(exc).__name__, call, message=str(exc)))
    finally:
        rec.remove()
    phase.freed = [k for k, n in enumerate(rec.nodes) if k in phase.saved and _saved(n) is None]
    return phase, answer


def _trace(output: Any, leaves: list[tuple[str, Any]], labels: dict[int, str],
           hook_on: tuple[str, Any] | None, options: TraceOptions, source: str,
           training: bool) -> AutogradTrace:
    """Backward from scalar `output` to `leaves` [(name, tensor)], observed, with the options' extras."""
    leaf_names = {id(t): name for name, t in leaves}
    named = {name: [(name, t)] for name, t in leaves}
    steps: list[Step] = []
    phases: list[Phase] = []
    recorders: list[_Recorder] = []  # one per phase, the running one last (where a hook's node is found)
    handle = None
    hooked = None
    if options.hook and hook_on is not None:
        hooked, tensor = hook_on

        def fire(grad: Any) -> None:  # records and leaves the gradient as it is
            rec = recorders[-1]
            steps.append(Step(rec.phase, "hook", rec.keys.get(id(tensor.grad_fn)), "hook", hooked,
                              [_np(grad)], message=f"the hook on {hooked} fired with its gradient"))

        handle = tensor.register_hook(fire)
    out_name = "loss" if training else ("w" if "w" not in leaf_names.values() else "out")
    kwargs = []
    if options.retain_graph:
        kwargs.append("retain_graph=True")
    if options.create_graph:
        kwargs.append("create_graph=True")
    try:
        def first() -> None:
            output.backward(retain_graph=True if options.retain_graph else None,
                            create_graph=options.create_graph)

        phase, _ = _run_phase(0, "backward", f"{out_name}.backward({', '.join(kwargs)})", output, first,
                              named, labels, leaf_names, steps, recorders)
        phase.result = {name: _np(t.grad) for name, t in leaves}
        phases.append(phase)
        if options.create_graph:
            name, leaf = leaves[0]
            phases.append(_second_derivative(len(phases), name, leaf, leaf.grad, options.retain_graph, named,
                                             labels, leaf_names, steps, recorders))
        if options.second_backward:
            phase, _ = _run_phase(len(phases), "second backward (accumulates into .grad)",
                                  f"{out_name}.backward()", output, output.backward, named, labels,
                                  leaf_names, steps, recorders)
            phase.result = {name: _np(t.grad) for name, t in leaves}
            phases.append(phase)
    finally:
        if handle is not None:
            handle.remove()
    value = output.detach().to("cpu").numpy()
    return AutogradTrace(source, f"{out_name} = {float(value):.6g}",
                         {name: np.array(t.detach().to("cpu").numpy(), copy=True) for name, t in leaves},
                         phases, steps, hooked, training)


def _second_derivative(phase_no: int, name: str, leaf: Any, first_grad: Any, retain: bool, named: dict,
                       labels: dict[int, str], leaf_names: dict[int, str], steps: list[Step],
                       recorders: list[_Recorder]) -> Phase:
    """autograd.grad of the first leaf's gradient (built with create_graph=True) with respect to that leaf:
    the second derivative, through the graph the first backward recorded (which shares the forward's nodes:
    without `retain` the call frees them, as torch's does)."""
    target = first_grad if first_grad is None or first_grad.numel() == 1 else first_grad.sum()
    call = (f"autograd.grad({name}.grad{'.sum()' if target is not first_grad else ''}, {name}"
            f"{', retain_graph=True' if retain else ''})")
    if target is None or target.grad_fn is None:
        # (no graph to walk: the engine says why, as the call would)
        phase = Phase("second derivative (create_graph=True)", call, StepGraph())
        try:
            engine.autograd.grad(target, leaf)
        except Exception as exc:  # noqa: BLE001
            phase.error = str(exc)
            steps.append(Step(phase_no, "error", None, type(exc).__name__, call, message=str(exc)))
        return phase
    phase, answer = _run_phase(phase_no, "second derivative (create_graph=True)", call, target,
                               lambda: engine.autograd.grad(target, leaf, retain_graph=retain or None,
                                                            allow_unused=True), named, labels,
                               leaf_names, steps, recorders)
    if answer is not None:
        phase.result = {name: _np(answer[0])}
    return phase


def build_expression(expression: str, values: str) -> tuple[Any, list[tuple[str, Any]], dict[int, str], list]:
    """Evaluate `expression` at `values` (`x=2, w=[1, 2]`) on engine tensors that require grad: (the scalar
    result, the leaves [(name, tensor)] it uses, each node's text by id(grad_fn), the intermediate results
    [(text, tensor)] in the order they were made). Raises ExpressionError (one plain line)."""
    arrays = parse_values(values)
    tree = check_expression(expression, set(arrays))
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} & set(arrays)
    leaves = [(name, engine.tensor(arr, requires_grad=True)) for name, arr in arrays.items() if name in used]
    if not leaves:
        raise ExpressionError("the expression uses none of the variables")
    labels: dict[int, str] = {}
    made: list[tuple[str, Any]] = []
    out = _evaluate(tree, dict(leaves), labels, made)
    if not isinstance(out, engine.Tensor) or not out.requires_grad:
        raise ExpressionError("the expression does not depend on a variable")
    if out.numel() != 1:
        raise ExpressionError(f"the expression gives shape {tuple(out.shape)}: backward needs one number "
                              "(wrap it in sum(...))")
    return (out.reshape(()) if out.dim() else out), leaves, labels, made


def trace_expression(expression: str, values: str, options: TraceOptions = TraceOptions()) -> AutogradTrace:
    """Record backward of `expression` at `values` node by node (build_expression's graph). Raises
    ExpressionError (one plain line) for what can't be traced."""
    out, leaves, labels, made = build_expression(expression, values)
    arrays = parse_values(values)
    source = (f"{ast.unparse(check_expression(expression, set(arrays)))}  at  "
              f"{', '.join(f'{k}={_value_text(v)}' for k, v in arrays.items())}")
    return _trace(out, leaves, labels, made[0] if made else None, options, source, training=False)


def _value_text(a: np.ndarray) -> str:
    return f"{float(a):g}" if a.ndim == 0 else np.array2string(a, separator=", ", precision=4)


def trace_training_step(model: Any, loss_fn: Any, x: Any, y: Any,
                        node_params: dict[str, list[tuple[str, Any]]], options: TraceOptions = TraceOptions(),
                        source: str = "one training step") -> AutogradTrace:
    """One training step's backward (forward on batch x, loss against y), recorded node by node; leaves are
    the parameters, named `node.param` as the computation-graph view labels them; the hook (if asked)
    goes on the model's output. The parameters' .grad is left as it was."""
    params = [(name, p) for ps in node_params.values() for name, p in ps if p.requires_grad]
    saved = [(p, p.grad) for _, p in params]
    for _, p in params:
        p.grad = None
    try:
        pred = model(x)
        loss = loss_fn(pred, y)
        labels = {id(n): n.scope for n in graph_nodes(loss.grad_fn) if getattr(n, "scope", None)}
        hook_on = ("the model's output", pred) if isinstance(pred, engine.Tensor) and pred.requires_grad \
            else None
        return _trace(loss, params, labels, hook_on, options, source, training=True)
    finally:
        for p, g in saved:
            p.grad = g


def trace_document(doc: Any, options: TraceOptions = TraceOptions(), batch: int = 4) -> AutogradTrace:
    """One training step of a fresh model built from `doc` (as the computation-graph view's Refresh does), on
    its dataset's first `batch` training samples."""
    from app.document.blocks import expanded_size
    from app.training import Trainer
    from app.training.session import load_training_modules

    layers = expanded_size(doc)
    if layers > MAX_TRACE_LAYERS:
        raise ExpressionError(f"the graph expands to {layers:,} nodes; the stepper traces graphs of up to "
                              f"{MAX_TRACE_LAYERS} (try a smaller graph, or one of its blocks on its own)")
    load_training_modules()
    t = Trainer(doc, doctor=False)
    n = min(batch, len(t.data.x_train))
    x = t._tensor(t.data.x_train[:n], t._input_dtype)
    y = t._tensor(t.y_train[:n])
    title = (doc.meta or {}).get("title") if hasattr(doc, "meta") else None
    return trace_training_step(t.model, t.loss_fn, x, y, t.node_params, options,
                               f"one training step of {title or 'the open graph'} (batch of {n})")
