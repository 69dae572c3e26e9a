"""Document -> one readable, self-contained PyTorch training script: an nn.Module with one named
layer per node, the dataset pipeline, the document's loss/optimiser/schedule, and a training loop
that also runs under `torchrun` with DistributedDataParallel.
"""
from __future__ import annotations

import ast
import functools
import inspect
import json
import keyword
import math
import numbers
import re
import shutil
import textwrap
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.document import Document
from app.document.blocks import SEP
from app.document.catalogue import CLASS_LOSSES, FLOAT_TARGET_LOSSES
from app.training.optim_setup import OPTIMIZERS, optimizer_source, schedule_source

from .data_source import DATA_OPTIONS, bundled_files, data_source, resolved_dataset
from .graph import ExportError, ExportGraph, ExportNode, load_split, plan_export

_RECURRENT = ("RNN", "LSTM", "GRU")
# names the script itself uses at module level or inside forward()
_RESERVED = {"self", "torch", "nn", "np", "math", "os", "dist", "argparse", "Path", "F"}
_ASCII_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INIT_OPTIONS = {"xavier_uniform": ("init_gain", "gain"), "xavier_normal": ("init_gain", "gain"),
                 "orthogonal": ("init_gain", "gain"), "normal": ("init_std", "std"),
                 "constant": ("init_value", "value")}


# ---------------------------------------------------------------------------------------------
# small formatting helpers
# ---------------------------------------------------------------------------------------------
class _Arg:
    """A constructor argument of a block's class, written by its (checked) name where a value would be."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = _identifier(name, "block class argument")


def _py(value: Any) -> str:
    """A Python literal for a JSON-ish value (lists become tuples, as PyTorch's signatures show)."""
    if isinstance(value, _Arg):
        return value.name
    if isinstance(value, list | tuple):
        items = [_py(v) for v in value]
        return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        # a plain double-quoted literal when nothing in it needs escaping; else repr(), which
        # escapes quotes, backslashes, line breaks (\n, \u2028...) and every unprintable character
        plain = value.isprintable() and '"' not in value and "\\" not in value
        return f'"{value}"' if plain else repr(value)
    if value is None or isinstance(value, bool | int):
        return repr(value)
    if isinstance(value, numbers.Integral):
        return repr(int(value))
    if isinstance(value, numbers.Real):
        return _py(float(value))
    raise ExportError(f"can't write {type(value).__name__} value {value!r:.40} into the script")


def _text(value: Any) -> str:
    """Any text (a file name, a dataset name) made safe for a docstring or a comment of the script:
    one printable line without double quotes or backslashes, so it can't end the docstring or the
    comment and run as code. Other characters show as <U+XXXX>."""
    return "".join(ch if ch.isprintable() and ch not in '"\\' else f"<U+{ord(ch):04X}>" for ch in str(value))


def _identifier(name: Any, what: str) -> str:
    """`name` if it is a plain ASCII Python identifier (and no keyword) the script may write as
    code; otherwise ExportError naming `what`: nothing from a document becomes code unchecked."""
    if isinstance(name, str) and _ASCII_NAME.fullmatch(name) and not keyword.iskeyword(name):
        return name
    raise ExportError(f"{what}: {name!r:.60} is not a valid Python name")


def _py_dict_lines(value: Mapping[str, Any], width: int = 100) -> str:
    """A dict literal, one entry per line when it does not fit on one."""
    flat = _py(dict(value))
    if len(flat) <= width:
        return flat
    return "{\n" + "".join(f"    {_py(k)}: {_py(v)},\n" for k, v in value.items()) + "}"


_P = inspect.Parameter
# torch's recurrent layers take *args/**kwargs; these are their documented arguments and defaults
_RNN_SIGNATURE = [_P(n, _P.KEYWORD_ONLY, default=d) for n, d in (
    ("input_size", _P.empty), ("hidden_size", _P.empty), ("num_layers", 1), ("nonlinearity", "tanh"),
    ("bias", True), ("batch_first", False), ("dropout", 0.0), ("bidirectional", False))]


def _torch_signature(class_name: str) -> list[inspect.Parameter]:
    """Constructor parameters of torch.nn.<class_name>: the script writes arguments in their order
    and omits those left at their defaults. Without torch installed every argument is written out
    in the catalogue's order, which is just as correct."""
    try:
        import torch.nn
    except ImportError:  # pragma: no cover - torch is installed wherever the tests run
        return []
    if class_name in ("RNN", "LSTM", "GRU"):
        return _RNN_SIGNATURE
    cls = getattr(torch.nn, class_name, None)
    return list(inspect.signature(cls).parameters.values()) if cls is not None else []


def _same(a: Any, b: Any) -> bool:
    norm = lambda v: tuple(v) if isinstance(v, list | tuple) else v
    return type(a) is type(b) and norm(a) == norm(b) or (
        isinstance(a, list | tuple) and isinstance(b, list | tuple) and tuple(a) == tuple(b))


def _constructor(module: str, class_name: str, kwargs: Mapping[str, Any]) -> str:
    _identifier(class_name, f"{module} class")
    for key in kwargs:
        _identifier(key, f"{module}.{class_name} argument")
    signature = _torch_signature(class_name)
    defaults = {p.name: p.default for p in signature if p.default is not inspect.Parameter.empty}
    rank = {p.name: i for i, p in enumerate(signature)}
    names = sorted(kwargs, key=lambda k: rank.get(k, len(rank)))
    args = [f"{k}={_py(kwargs[k])}" for k in names if not (k in defaults and _same(kwargs[k], defaults[k]))]
    return f"{module}.{class_name}({', '.join(args)})"


def _wrap_call(prefix: str, call: str, width: int = 100) -> list[str]:
    """`prefix + call` split after commas so no line passes `width` (continuations align with the
    opening parenthesis)."""
    if len(prefix) + len(call) <= width or "(" not in call:
        return [prefix + call]
    head, rest = call.split("(", 1)
    pad = " " * (len(prefix) + len(head) + 1)
    lines, line = [], prefix + head + "("
    for i, arg in enumerate(rest[:-1].split(", ")):
        piece = arg + (", " if i < rest.count(", ") else ")")
        if len(line) + len(piece.rstrip()) > width and line.strip():
            lines.append(line.rstrip())
            line = pad
        line += piece
    lines.append(line.rstrip())
    return lines


class _Names:
    """Python names for node ids (or any keys, each with the name it wants): the id itself unless it
    is a keyword, one the script uses or one given already. The document only allows ASCII identifiers
    as ids; anything else (a file edited by hand, a future id rule) is mangled to one, never written as
    code."""

    def __init__(self, ids: Sequence[Any], wants: Sequence[str] | None = None,
                 reserved: frozenset[str] | set[str] = frozenset()) -> None:
        wants = list(ids) if wants is None else list(wants)
        taken = set(wants)
        used: set[str] = set()
        self.var: dict[Any, str] = {}
        for key, want in zip(ids, wants):
            name = want if _ASCII_NAME.fullmatch(want) else "node_" + re.sub(r"[^A-Za-z0-9_]", "_", want)
            while (keyword.iskeyword(name) or name in _RESERVED or name in reserved or name in used
                   or (name != want and name in taken)):
                name += "_"
            self.var[key] = name
            taken.add(name)
            used.add(name)

    def __getitem__(self, nid: Any) -> str:
        return self.var[nid]


# torch.nn.Module's attributes (torch 2.13) that the engine's Module, which has the rest, lacks: a node
# id equal to one of them would shadow it in the script
_TORCH_ONLY_MODULE_ATTRS = frozenset((
    "T_destination", "_call_impl", "_compiled_call_impl", "_get_backward_hooks",
    "_get_backward_pre_hooks", "_maybe_warn_non_full_backward_hook",
    "_register_load_state_dict_pre_hook", "_register_state_dict_hook", "_replicate_for_data_parallel",
    "_slow_forward", "_wrapped_call_impl", "call_super_init", "compile", "dump_patches", "forward",
    "get_buffer", "get_extra_state", "ipu", "mtia", "register_full_backward_pre_hook",
    "register_load_state_dict_post_hook", "register_load_state_dict_pre_hook",
    "register_state_dict_post_hook", "register_state_dict_pre_hook", "set_extra_state", "set_submodule",
    "share_memory", "to_empty", "xpu"))


@functools.lru_cache(maxsize=1)
def _module_attrs() -> frozenset[str]:
    """The names a node id must not take as an attribute: nn.Module's, known without torch (exporting needs
    no torch here; the script runs where it is), and the installed torch's too when there is one (newer)."""
    import engine.nn

    names = set(dir(engine.nn.Module)) | _TORCH_ONLY_MODULE_ATTRS
    try:
        import torch.nn
    except ImportError:
        return frozenset(names)
    return frozenset(names | set(dir(torch.nn.Module)))


def _module_attr(nid: str) -> str:
    """How forward() reaches a node's layer. The attribute is the node id, so state-dict keys are
    the ids; an id that is a keyword or shadows an nn.Module method goes through `_modules`."""
    if _ASCII_NAME.fullmatch(nid) and not keyword.iskeyword(nid) and nid not in _module_attrs():
        return f"self.{nid}"
    return f"self._modules[{nid!r}]"


# ---------------------------------------------------------------------------------------------
# the model class
# ---------------------------------------------------------------------------------------------
_EXPRESSIONS = ("Input", "Output", "Add", "Multiply", "Concat", "Reshape", "Permute", "BlockPort")


def _layer_class(node: ExportNode) -> str | None:
    """The torch.nn class of a node that owns a module; None for expression nodes."""
    if node.type in _EXPRESSIONS:
        return None
    class_name = node.spec.class_name(node.params, torch=True)
    if class_name is None:
        raise ExportError(f"node {node.id}: {node.type} has no PyTorch equivalent; "
                          "replace it before exporting")
    return class_name


def _init_line(node: ExportNode, attr: str | None = None) -> str | None:
    """`init_weights(self.fc1, ...)` for a node with an init choice; `attr` is its attribute (the id)."""
    choice = node.params.get("init", "default")
    if choice == "default":
        return None
    extra = ""
    if choice in _INIT_OPTIONS:
        param, arg = _INIT_OPTIONS[choice]
        extra = f", {arg}={_py(float(node.params[param]))}"
    return f"init_weights({_module_attr(attr or node.id)}, {_py(choice)}{extra})"


_INIT_HELPER = '''
def init_weights(layer, scheme, gain=1.0, std=0.02, value=0.0):
    """The initialisation chosen in Wiregrad: weight matrices get `scheme`, biases start at zero."""
    with torch.no_grad():
        for name, p in layer.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if "bias" in leaf:
                nn.init.zeros_(p)
            elif "weight" not in leaf or p.dim() < 2:
                continue
            elif scheme == "xavier_uniform":
                nn.init.xavier_uniform_(p, gain=gain)
            elif scheme == "xavier_normal":
                nn.init.xavier_normal_(p, gain=gain)
            elif scheme == "kaiming_uniform":
                nn.init.kaiming_uniform_(p, nonlinearity="relu")
            elif scheme == "kaiming_normal":
                nn.init.kaiming_normal_(p, nonlinearity="relu")
            elif scheme == "orthogonal":
                nn.init.orthogonal_(p, gain=gain)
            elif scheme == "normal":
                nn.init.normal_(p, 0.0, std)
            elif scheme == "zeros":
                nn.init.zeros_(p)
            elif scheme == "constant":
                nn.init.constant_(p, value)
'''


def _forward_lines(node: ExportNode, names: Mapping[str, str] | _Names, attr: str | None = None) -> list[str]:
    """The statement(s) computing a node's output into the variable named after it; `attr` is its
    layer's attribute (the id, or the last part of its path inside a block)."""
    out = names[node.id]
    args = [names[s] for s in node.inputs]
    kind = node.type
    p = node.params
    if kind == "Add":
        return [f"{out} = {' + '.join(args)}"]
    if kind == "Multiply":
        return [f"{out} = {' * '.join(args)}"]
    if kind == "Concat":
        return _wrap_call(f"{out} = ", f"torch.cat([{', '.join(args)}], dim={_py(int(p['dim']))})", width=92)
    if kind == "Reshape":
        shape = p["shape"] if isinstance(p["shape"], list) else [p["shape"]]
        return [f"{out} = {args[0]}.reshape({args[0]}.size(0), {', '.join(_py(int(d)) for d in shape)})"]
    if kind == "Permute":
        return [f"{out} = {args[0]}.permute({', '.join(_py(int(d)) for d in p['dims'])})"]
    call = _module_attr(attr or node.id)
    if kind == "MultiheadAttention":  # self-attention: query = key = value
        x = args[0]
        return [f"{out}, _ = {call}({x}, {x}, {x}, need_weights=False)"]
    if kind in _RECURRENT:
        if p["return"] == "sequence":
            return [f"{out}, _ = {call}({args[0]})"]
        h = f"{out}_h_n"
        state = f"({h}, _)" if kind == "LSTM" else h
        pick = f"torch.cat([{h}[-2], {h}[-1]], dim=1)" if p["bidirectional"] else f"{h}[-1]"
        return [f"_, {state} = {call}({args[0]})",
                f"{out} = {pick}  # the final hidden state of the last layer"]
    return [f"{out} = {call}({', '.join(args)})"]


@dataclass
class _Variant:
    """One class written for a block definition (a definition whose instances differ in structure, e.g.
    in a layer's class, gets one class per kind of instance): its name and constructor arguments."""

    name: str
    args: list[str]


@dataclass
class _Call:
    """How a parent builds one instance (or one copy of a repeat): its class and argument values."""

    variant: _Variant
    values: dict[str, Any]

    def expr(self) -> str:
        return f"{self.variant.name}({', '.join(f'{k}={_py(v)}' for k, v in self.values.items())})"


@dataclass
class _Scope:
    """What one instance (or the top model) builds and runs, written with local names. `items` are its
    children, each ("layer", attr, node, torch class, kwargs) | ("block", attr, _Call) | ("repeat", attr,
    [_Call]); `forward` the body of its forward(); `slots` every value its constructor passes on."""

    args: list[str]
    forward: list[str]
    items: list[tuple]
    init: list[str]

    def key(self) -> tuple:
        """Equal for instances one class can build: the same children of the same classes, the same
        forward()."""
        parts: list[Any] = [tuple(self.args), tuple(self.forward), tuple(self.init)]
        for item in self.items:
            if item[0] == "layer":
                parts.append(("layer", item[1], item[3], tuple(item[4])))
            elif item[0] == "block":
                parts.append(("block", item[1], item[2].variant.name, tuple(item[2].variant.args)))
            else:
                copies = tuple((c.variant.name, tuple(c.variant.args)) for c in item[2])
                parts.append(("repeat", item[1], copies))
        return tuple(parts)

    def slots(self) -> list[tuple[tuple, Any]]:
        """((child attr, [copy,] argument), value) for every value passed to a child's constructor."""
        out: list[tuple[tuple, Any]] = []
        for item in self.items:
            if item[0] == "layer":
                out += [((item[1], k), v) for k, v in item[4].items()]
            elif item[0] == "block":
                out += [((item[1], k), v) for k, v in item[2].values.items()]
            else:
                out += [((item[1], i, k), v) for i, c in enumerate(item[2]) for k, v in c.values.items()]
        return out


def _is_repeat(instances: Mapping[str, str], path: str) -> bool:
    return f"{path}{SEP}0" in instances  # ids start with a letter: a number in a path is a repeat's copy


def _scope(graph: ExportGraph, path: str, calls: Mapping[str, _Call]) -> _Scope:
    """The children, forward() and outputs of the instance at `path` ("" for the top model)."""
    import networkx as nx

    prefix = f"{path}{SEP}" if path else ""
    members = [n for n in graph.nodes if n.id.startswith(prefix)]
    index = {n.id: i for i, n in enumerate(members)}
    inside = {n.id for n in members}

    def head(fid: str) -> str:
        return fid[len(prefix):].split(SEP, 1)[0]

    def sub_path(child: str) -> str:
        return prefix + child

    if path:
        d = graph.source.root.blocks[graph.instances[path]]
        own_in = [prefix + p for p in d.input_ports() if prefix + p in inside]
        own_out = [prefix + p for p in d.output_ports() if prefix + p in inside]
        returns = [graph.node(o).inputs[0] for o in own_out]
    else:
        own_in = list(graph.input_ids)
        own_out = []
        returns = [graph.prediction_of[o] for o in graph.output_ids]
    skip = set(own_in) | set(own_out) | set(graph.output_ids)
    # the children in an order their inputs allow: a block instance runs as one call
    dag = nx.DiGraph()
    first: dict[str, int] = {}
    for n in members:
        if n.id in skip:
            continue
        child = head(n.id)
        first.setdefault(child, index[n.id])
        dag.add_node(child)
        for src in n.inputs:
            if src in inside and src not in own_in and head(src) != child:
                dag.add_edge(head(src), child)
    try:
        order = list(nx.lexicographical_topological_sort(dag, key=lambda c: first[c]))
    except nx.NetworkXUnfeasible:
        loop = " → ".join(e[0] for e in nx.find_cycle(dag))
        raise ExportError(f"{path or 'the graph'}: block instances feed each other in a loop ({loop}); "
                          "PyTorch needs each instance to run as one call") from None
    # local variable names: the forward() arguments, the layers, each instance's outputs
    keys: list[Any] = []
    wants: list[str] = []
    for fid in own_in:
        keys.append(fid)
        wants.append(fid[len(prefix):])
    outs_of: dict[str, list[str]] = {}
    for child in order:
        sub = sub_path(child)
        if sub in graph.instances:
            if _is_repeat(graph.instances, sub):
                outs_of[child] = [child]
                keys.append(("out", child, None))
                wants.append(child)
            else:
                d = graph.source.root.blocks[graph.instances[sub]]
                ports = [p for p in d.output_ports() if f"{sub}{SEP}{p}" in inside]
                outs_of[child] = ports
                for p in ports:
                    keys.append(("out", child, p))
                    wants.append(child if len(ports) == 1 else f"{child}_{p}")
        else:
            keys.append(sub)
            wants.append(child)
    names = _Names(keys, wants)

    class Resolve:
        """The local variable holding a node's output (a path inside an instance: that instance's output)."""

        def __getitem__(self, fid: str) -> str:
            if fid in names.var:
                return names[fid]
            parts = fid[len(prefix):].split(SEP)
            repeated = _is_repeat(graph.instances, prefix + parts[0])
            return names[("out", parts[0], None if repeated else parts[1])]

    var = Resolve()
    items: list[tuple] = []
    init: list[str] = []
    forward: list[str] = []
    for child in order:
        sub = sub_path(child)
        if sub not in graph.instances:
            node = graph.node(sub)
            cls = _layer_class(node)
            if cls is not None:
                kwargs = node.spec.engine_kwargs(node.params, node.in_shapes)
                items.append(("layer", child, node, cls, kwargs))
            line = _init_line(node, child)
            if line is not None:
                init.append(line)
            forward += _forward_lines(node, var, child)
            continue
        if _is_repeat(graph.instances, sub):
            copies = []
            while f"{sub}{SEP}{len(copies)}" in calls:
                copies.append(calls[f"{sub}{SEP}{len(copies)}"])
            items.append(("repeat", child, copies))
            first_copy = f"{sub}{SEP}0{SEP}"
        else:
            items.append(("block", child, calls[sub]))
            first_copy = f"{sub}{SEP}"
        d = graph.source.root.blocks[graph.instances[sub]]
        feeds = [graph.node(first_copy + p).inputs[0] for p in d.input_ports() if first_copy + p in inside]
        repeated = items[-1][0] == "repeat"
        outs = ", ".join(names[("out", child, None if repeated else p)] for p in outs_of[child])
        forward += _wrap_call(f"{outs} = ", f"{_module_attr(child)}({', '.join(var[f] for f in feeds)})", 92)
    forward.append(f"return {', '.join(var[r] for r in returns)}")
    return _Scope([names[f] for f in own_in], forward, items, init)


def _block_order(source: Document) -> list[str]:
    """The document's definitions, each after the ones it uses."""
    from app.document.blocks import uses

    order: list[str] = []

    def visit(name: str) -> None:
        if name in order or name not in source.root.blocks:
            return
        for used in uses(source.root.blocks[name]):
            visit(used)
        order.append(name)

    for name in source.root.blocks:
        visit(name)
    return order


def _class_source(name: str, doc: str, scope: _Scope, exprs: Mapping[tuple, Any], args: Sequence[str]) -> str:
    """The text of one nn.Module class; `exprs` gives each slot's value or _Arg."""
    text = "\n    ".join(textwrap.wrap(doc, 96)) or name
    lines = [f"class {name}(nn.Module):", f'    """{text}"""', "",
             f"    def __init__(self{''.join(f', {a}' for a in args)}):", "        super().__init__()"]
    for item in scope.items:
        attr = _module_attr(item[1])
        if item[0] == "layer":
            kwargs = {k: exprs[(item[1], k)] for k in item[4]}
            body = _wrap_call(f"{attr} = ", _constructor("nn", item[3], kwargs), width=92)
        elif item[0] == "block":
            call = _Call(item[2].variant, {k: exprs[(item[1], k)] for k in item[2].values})
            body = _wrap_call(f"{attr} = ", call.expr(), width=92)
        else:
            calls = [_Call(c.variant, {k: exprs[(item[1], i, k)] for k in c.values}).expr()
                     for i, c in enumerate(item[2])]
            if len(set(calls)) == 1:  # the copies alike: one expression, made N times (each its own weights)
                body = [f"{attr} = nn.Sequential(*({calls[0]} for _ in range({len(calls)})))"]
            else:
                body = [f"{attr} = nn.Sequential("] + [f"    {c}," for c in calls] + [")"]
            if len(body[0]) > 92:
                body = [f"{attr} = nn.Sequential("] + [f"    {c}," for c in calls] + [")"]
        lines += [f"        {line}" for line in body]
    if not scope.items:
        lines.append("        pass")
    if scope.init:
        lines += ["        # the initialisation chosen in Wiregrad (other layers keep PyTorch's default)"]
        lines += [f"        {line}" for line in scope.init]
    lines += ["", f"    def forward(self, {', '.join(scope.args)}):"]
    lines += [f"        {line}" for line in scope.forward]
    return "\n".join(lines) + "\n"


def _arg_names(d: Any, slots: Sequence[tuple], reserved: set[str]) -> list[str]:
    """A name for each varying constructor value of a block's class: the block parameter that sets it
    when there is one (`channels`), else `<layer>_<argument>` (`conv1_in_channels`)."""
    exposed = {(node, param): name for name, ep in d.params.items() for node, param in ep.targets}
    wants = []
    for slot in slots:
        child, key = slot[0], slot[-1]
        want = exposed.get((child, key)) if len(slot) == 2 else None
        wants.append(want or "_".join(str(s) for s in slot))
    return list(_Names(list(range(len(wants))), wants, reserved).var.values())


def model_source(graph: ExportGraph, class_name: str = "Model", taken: Sequence[str] | set[str] = ()
                 ) -> tuple[str, bool]:
    """The nn.Module classes for the graph, and whether they use the init_weights helper: one class per
    block definition (more when its instances differ in structure), then `class_name`, which holds the
    top-level layers and instances by id (a repeated instance is an nn.Sequential of its copies), so the
    state_dict keys are the engine's: `stage2.0.conv1.weight`. `taken`: names the script defines besides."""
    import builtins

    reserved = {*taken, *dir(builtins), class_name, "self", "init_weights"}
    _identifier(class_name, "the model class")
    calls: dict[str, _Call] = {}
    classes: list[str] = []
    uses_init = False
    instances = graph.instances
    for block in _block_order(graph.source) if instances else []:
        d = graph.source.root.blocks[block]
        base = _identifier(f"{block}_" if keyword.iskeyword(block) else block, f"block {block}")
        scopes = {p: _scope(graph, p, calls) for p, b in instances.items()
                  if b == block and not _is_repeat(instances, p) and any(
                      n.id.startswith(f"{p}{SEP}") for n in graph.nodes)}
        groups: dict[tuple, list[str]] = {}
        for p, sc in scopes.items():
            groups.setdefault(sc.key(), []).append(p)
        for k, paths in enumerate(groups.values()):
            name = base if k == 0 else f"{base}_{k + 1}"
            while name in reserved:
                name += "_"
            reserved.add(name)
            scope = scopes[paths[0]]
            table = [dict(scopes[p].slots()) for p in paths]
            slots = list(table[0])
            # a value that differs between instances becomes an argument; values that always agree share one
            vectors: dict[tuple, list[tuple]] = {}
            for slot in slots:
                vector = tuple(_py(t[slot]) for t in table)
                if len(set(vector)) > 1:
                    vectors.setdefault(vector, []).append(slot)
            arg_names = _arg_names(d, [group[0] for group in vectors.values()], reserved | {name})
            exprs: dict[tuple, Any] = {slot: table[0][slot] for slot in slots}
            for arg, group in zip(arg_names, vectors.values()):
                for slot in group:
                    exprs[slot] = _Arg(arg)
            variant = _Variant(name, arg_names)
            for row, p in zip(table, paths):
                calls[p] = _Call(variant, {a: row[g[0]] for a, g in zip(arg_names, vectors.values())})
            n = len(paths)
            what = f"Block {_text(block)}: {n} instance{'s' if n > 1 else ''} ({_text(', '.join(paths[:4]))}"
            what += f" and {n - 4} more)" if n > 4 else ")"
            if d.description:
                what += f". {_text(d.description[:200])}"
            classes.append(_class_source(name, what, scope, exprs, arg_names))
            uses_init = uses_init or bool(scope.init)
    top = _scope(graph, "", calls)
    doc = "The Wiregrad graph as PyTorch layers; attribute names are the node ids."
    classes.append(_class_source(class_name, doc, top, {s: v for s, v in top.slots()}, []))
    return "\n\n".join(classes), uses_init or bool(top.init)


# ---------------------------------------------------------------------------------------------
# loss, optimiser, schedule
# ---------------------------------------------------------------------------------------------
def _loss_constructor(graph: ExportGraph, out_id: str) -> str:
    from app.document import get_spec

    params = graph.output_params(out_id)
    node = graph.node(out_id)
    return _constructor("nn", params["loss"], get_spec("Output").engine_kwargs(params, node.in_shapes))


def _optimizer_source(training: Mapping[str, Any]) -> str:
    """The expression building the optimiser: the Trainer's class and keywords (`optim_setup`'s table)."""
    kind = training["optimizer"]["type"]
    if kind not in OPTIMIZERS:
        raise ExportError(f"training: unknown optimizer {kind!r:.40}")
    torch_class, kwargs = optimizer_source(training, _py)
    args = "".join(f", {k}={v}" for k, v in kwargs)
    call = f"{torch_class}(parameters, lr=lr{args})"
    if len(call) <= 96:  # fits after "    return " within the script's 110 columns
        return call
    return f"{torch_class}(\n        parameters,\n        lr=lr," + "".join(
        f"\n        {k}={v}," for k, v in kwargs) + "\n    )"


def _scheduler_source(training: Mapping[str, Any]) -> tuple[str, str]:
    """(the expression building the scheduler, when it steps: "none" | "batch" | "epoch" | "plateau").
    The defaults the Trainer fills in are `optim_setup`'s expressions of the run's length, written as they
    are: `build_scheduler` in the script takes `lr`, `epochs`, `steps_per_epoch` and `accumulate`."""
    sched = training["lr_schedule"]
    kind = sched["type"]
    if kind == "constant":
        return "None", "none"
    _identifier(kind, "training: lr_schedule type")
    options = {_identifier(k, f"training: lr_schedule {kind} option"): _py(v)
               for k, v in (sched.get("options") or {}).items()}
    torch_class, options, when = schedule_source(kind, options)
    args = "".join(f", {k}={v}" for k, v in options.items())
    return f"{torch_class}(optimizer{args})", when


def _targets_mode(graph: ExportGraph, dataset_task: str | None, classes: int | None) -> str:
    """How the script prepares targets, mirroring the Trainer: class indices, one-hot, a 0/1 column
    or plain floats."""
    losses = [graph.output_params(o)["loss"] for o in graph.output_ids]
    if any(name in CLASS_LOSSES for name in losses):
        return "index"
    if dataset_task == "classification" and any(name in FLOAT_TARGET_LOSSES for name in losses):
        pred = graph.node(graph.output_ids[0]).in_shapes.get("in")
        width = pred[-1] if pred else None
        if width == classes and width and width > 1:
            return "one_hot"
        if width == 1 and classes == 2:
            return "column"
    return "float"


_ACCURACY = {
    "index": "(pred.argmax(dim=1) == y).sum()",
    "one_hot": "(pred.argmax(dim=1) == y.argmax(dim=1)).sum()",
    "column": "((pred[:, 0] > {threshold}).long() == y[:, 0].long()).sum()",
}


# ---------------------------------------------------------------------------------------------
# the script
# ---------------------------------------------------------------------------------------------
_TRAINING = '''
# ---------------------------------------------------------------------------------------------
# Training: the document's loss, optimiser, schedule, clipping and mixed precision
# ---------------------------------------------------------------------------------------------
def build_loss():
    return @LOSS@


def compute_loss(loss_fn, pred, y):
@COMPUTE_LOSS@


def count_correct(pred, y):
    """How many predictions name the right class (None for regression)."""
@COUNT_CORRECT@


def build_optimizer(parameters, lr):
    return @OPTIMIZER@


def build_scheduler(optimizer, lr, epochs, steps_per_epoch, accumulate=ACCUMULATION_STEPS):
    return @SCHEDULER@


def load_weights(model, path):
    """Load weights saved by Wiregrad (a .safetensors file whose names are the node ids)."""
    from safetensors.torch import load_file

    state = load_file(str(path))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise RuntimeError(f"{path} does not fit the model: missing {missing}, unexpected {unexpected}")


def save_weights(model, path):
    """The weights as .safetensors, named like Wiregrad's (written whole, then renamed into place)."""
    from safetensors.torch import save_file

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}, str(tmp))
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# The Wiregrad run folder (--run-dir): what Wiregrad's Runs panel lists and its monitor follows
# ---------------------------------------------------------------------------------------------
GRAPH_NAME = @GRAPH_NAME@
# node id -> the path of its module in Model
NODE_MODULES = @NODE_MODULES@
DETAIL_EVERY = 1  # per-layer gradient norms and update ratios every this many optimiser steps
PROBE_SAMPLES = 256  # training samples whose layer outputs the epoch statistics describe
CONTROL_WORDS = {"run": 0, "resume": 0, "pause": 1, "stop": 2}
DOCUMENT_JSON = @DOCUMENT_JSON@


def json_safe(value):
    """JSON has no NaN/Inf: Wiregrad writes them as "nan", "inf" and "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class RunFolder:
    """The run folder Wiregrad's own trainer writes, written by rank 0 only: run.json (name, state, engine,
    world size), document.json, metrics.jsonl with the same records (a "run" record, a "batch" per
    optimiser step with per-layer gradient norms and update ratios keyed by node id, an "epoch" per epoch,
    "event"s, a closing "summary"), and the weights as model.safetensors. Nothing is written without
    --run-dir, nor by the other ranks."""

    def __init__(self, path, rank, world_size):
        self.path = Path(path) if path and rank == 0 else None
        self.world_size = world_size
        self._file = None
        self._lock = None
        if self.path is None:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        if not (self.path / "document.json").exists():
            (self.path / "document.json").write_text(DOCUMENT_JSON, encoding="utf-8")
        self._hold_lock()
        self._file = open(self.path / "metrics.jsonl", "a", encoding="utf-8")

    @property
    def active(self):
        return self.path is not None

    def _hold_lock(self):
        """run.lock: an OS lock held while this process trains. Wiregrad tells a live run from a killed one
        by it (the system drops it however the process ends)."""
        try:
            import fcntl
        except ImportError:  # Windows: Wiregrad tells a live run by how recently it wrote
            return
        fd = os.open(self.path / "run.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise SystemExit(f"{self.path} is trained by another process (its run.lock is held)") from None
        self._lock = fd
        self._touch_lock()

    def _touch_lock(self):
        """Rewrite the holder's line: the lock is then newer than run.json (the lock says the run lives)."""
        if self._lock is not None:
            os.ftruncate(self._lock, 0)
            os.lseek(self._lock, 0, os.SEEK_SET)
            os.write(self._lock, f"{os.getpid()} {socket.gethostname()} pytorch".encode())

    def note(self, **fields):
        """Merge `fields` into run.json (written whole, then renamed: never half a file)."""
        if not self.active:
            return
        path = self.path / "run.json"
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        meta = {**(meta if isinstance(meta, dict) else {}), **fields}
        tmp = path.with_name(".run.json.tmp")
        tmp.write_text(json.dumps(json_safe(meta)), encoding="utf-8")
        os.replace(tmp, path)
        self._touch_lock()

    def record(self, kind, flush=False, **fields):
        """One line of metrics.jsonl, as Wiregrad's records (app/training/metrics.py) are written."""
        if self._file is not None:
            self._file.write(json.dumps({"kind": kind, **json_safe(fields)}, allow_nan=False) + chr(10))
            if flush:
                self._file.flush()

    def event(self, name, epoch, batch, step, **detail):
        self.record("event", True, event=name, detail=detail, epoch=epoch, step=step, batch=batch)

    def save_weights(self, model):
        if self.active:
            save_weights(model, self.path / "model.safetensors")

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._lock is not None:
            (self.path / "run.lock").unlink(missing_ok=True)
            os.close(self._lock)  # closing the descriptor drops the lock
            self._lock = None


class Control:
    """Pause, resume and stop at batch boundaries, the same on every process. Rank 0 reads the run
    folder's `control` file (one word: pause, resume or stop; Wiregrad's Pause and Stop write it); every
    process takes signals: SIGTERM and SIGINT stop the run (its checkpoint and weights are saved; a second
    SIGINT interrupts at once), SIGUSR1 pauses, SIGUSR2 resumes. The strongest wish of any process wins:
    one all-reduce of one number per batch."""

    def __init__(self, run, world_size, device):
        self.file = run.path / "control" if run.active else None
        self.world_size, self.device = world_size, device
        self.signalled = 0
        self._word, self._seen = 0, None
        if self.file is not None:
            self.file.unlink(missing_ok=True)  # a wish left from an earlier segment of the run
        wishes = [("SIGTERM", 2), ("SIGINT", 2), ("SIGUSR1", 1), ("SIGUSR2", 0)]
        for name, wish in wishes:
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), self._handler(wish))

    def _handler(self, wish):
        def handle(signum, frame):
            if signum == signal.SIGINT and self.signalled == 2:
                raise KeyboardInterrupt  # asked twice: stop now
            self.signalled = wish if wish == 2 or self.signalled != 2 else 2
        return handle

    def _file_wish(self):
        if self.file is None:
            return 0
        try:
            stat = self.file.stat()
        except OSError:
            return self._word
        if (stat.st_mtime_ns, stat.st_size) != self._seen:
            self._seen = (stat.st_mtime_ns, stat.st_size)
            try:
                word = self.file.read_text(encoding="utf-8").strip().lower()
            except OSError:
                word = ""
            self._word = CONTROL_WORDS.get(word, self._word)
        return self._word

    def wish(self):
        """0 train on, 1 pause, 2 stop: agreed by every process."""
        mine = max(self.signalled, self._file_wish())
        if self.world_size == 1:
            return mine
        agreed = torch.tensor([mine], dtype=torch.int64, device=self.device)
        dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
        return int(agreed.item())

    def gate(self, run, epoch, batch, step):
        """True: train the next batch; False: stop here. While paused every process waits here."""
        wish = self.wish()
        if wish == 1:
            run.event("paused", epoch, batch, step)
            run.note(status="paused")
            while wish == 1:
                time.sleep(0.2)
                wish = self.wish()
            if wish == 0:
                run.event("resumed", epoch, batch, step)
                run.note(status="running")
        if wish == 2:
            run.event("stopped", epoch, batch, step)
            return False
        return True


def node_parameters(model):
    """Each canvas node's trainable parameters, keyed by node id (Wiregrad's per-layer records)."""
    groups = {}
    for nid, path in NODE_MODULES.items():
        params = [p for p in model.get_submodule(path).parameters() if p.requires_grad]
        if params:
            groups[nid] = params
    return groups


def grad_norms(layers):
    """Each layer's gradient L2 norm (after DDP's average, before clipping)."""
    with torch.no_grad():
        return {nid: math.sqrt(sum(float(p.grad.float().pow(2).sum()) for p in ps if p.grad is not None))
                for nid, ps in layers.items()}


def update_ratios(layers, before):
    """||step|| / ||weights before|| per layer."""
    out = {}
    with torch.no_grad():
        for nid, ps in layers.items():
            pairs = zip(ps, before[nid], strict=True)
            delta = sum(float((p.detach().float() - b).pow(2).sum()) for p, b in pairs)
            weight = sum(float(b.pow(2).sum()) for b in before[nid])
            out[nid] = math.sqrt(delta) / math.sqrt(weight) if weight > 0 else math.inf
    return out


def tensor_stats(values):
    values = values.detach().double().reshape(-1).cpu()
    if values.numel() == 0:
        return {}
    return {"mean": values.mean().item(), "std": values.std(unbiased=False).item(),
            "min": values.min().item(), "max": values.max().item(), "abs_mean": values.abs().mean().item(),
            "norm": values.norm().item()}


def histogram(values, bins=30):
    values = values.detach().double().reshape(-1).cpu().numpy()
    counts, edges = np.histogram(values[np.isfinite(values)], bins=bins)
    return {"counts": counts.tolist(), "edges": edges.tolist()}


def epoch_stats(model, layers, probe, device):
    """Each layer's weight statistics, and each layer's output statistics on the probe samples (with the
    fraction of zeros and of units that are zero for every sample: dead ReLUs); histograms of both."""
    flat = {nid: torch.cat([p.detach().reshape(-1) for p in ps]) for nid, ps in layers.items()}
    weights = {nid: tensor_stats(w) for nid, w in flat.items()}
    histograms = {nid: {"weights": histogram(w)} for nid, w in flat.items()}
    outputs, hooks = {}, []
    for nid, path in NODE_MODULES.items():
        def keep(module, inputs, output, nid=nid):
            outputs[nid] = (output[0] if isinstance(output, tuple) else output).detach()
        hooks.append(model.get_submodule(path).register_forward_hook(keep))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(torch.from_numpy(probe).to(device))
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    activations = {}
    for nid, a in outputs.items():
        if not torch.is_floating_point(a):
            continue
        s = tensor_stats(a)
        flat = a.reshape(a.shape[0], -1) if a.dim() > 1 else a.reshape(-1, 1)
        s["zero_fraction"] = (flat == 0).double().mean().item()
        s["dead_fraction"] = (flat == 0).all(dim=0).double().mean().item()
        activations[nid] = s
        histograms.setdefault(nid, {})["activations"] = histogram(a)
    return weights, activations, histograms


def confusion(model, x_val, y_val, device, batch_size, limit=50):
    """[true, predicted] counts on the validation set, for Wiregrad's confusion matrix: classifiers with
    class-index targets and at most `limit` classes (else None)."""
    if not CLASSIFY or y_val.ndim != 1 or not np.issubdtype(y_val.dtype, np.integer) or not len(y_val):
        return None
    guesses = []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(x_val), max(batch_size, 512)):
            pred = model(torch.from_numpy(x_val[start:start + max(batch_size, 512)]).to(device))
            pred = pred[0] if isinstance(pred, tuple) else pred
            if pred.dim() != 2:
                return None
            guesses.append(pred.argmax(dim=1).cpu().numpy())
    model.train()
    classes = max(int(y_val.max()) + 1, pred.shape[1])
    if classes > limit:
        return None
    counts = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(counts, (y_val.astype(np.int64), np.concatenate(guesses)), 1)
    return counts.tolist()


def setup(args):
    """(rank, world_size, device). Under torchrun, join the process group: NCCL on GPUs, Gloo on CPUs."""
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if not args.distributed:
        return 0, 1, torch.device("cuda" if use_cuda else "cpu")
    if "RANK" not in os.environ:
        raise SystemExit(f"--distributed needs torchrun: torchrun --nproc_per_node=2 {Path(__file__).name} "
                         "--distributed")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if use_cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    return dist.get_rank(), dist.get_world_size(), device


def autocast(device):
    """Mixed precision when the document asks for it: float16 on GPUs, bfloat16 on CPUs."""
    dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    return torch.autocast(device_type=device.type, dtype=dtype, enabled=AMP)


def evaluate(model, loss_fn, x_val, y_val, device, rank, world_size, batch_size):
    """Validation loss and accuracy over the whole validation set (each process takes a share)."""
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64, device=device)  # loss sum, correct, samples
    mine = np.arange(rank, len(x_val), world_size)
    with torch.no_grad():
        for start in range(0, len(mine), max(batch_size, 512)):
            idx = mine[start:start + max(batch_size, 512)]
            x, y = torch.from_numpy(x_val[idx]).to(device), torch.from_numpy(y_val[idx]).to(device)
            with autocast(device):
                pred = model(x)
                loss = compute_loss(loss_fn, pred, y)
            totals[0] += loss.float() * len(idx)
            correct = count_correct(pred, y)
            totals[1] += 0 if correct is None else correct
            totals[2] += len(idx)
    if world_size > 1:
        dist.all_reduce(totals)
    model.train()
    n = max(totals[2].item(), 1)
    return totals[0].item() / n, (totals[1].item() / n if CLASSIFY else None)


def train(args):
    rank, world_size, device = setup(args)
    run = RunFolder(args.run_dir, rank, world_size)
    control = Control(run, world_size, device)
    started = time.perf_counter()
    try:
        return _train(args, rank, world_size, device, run, control, started)
    except BaseException as exc:  # a crash, a second Ctrl-C: the run folder says so, then it propagates
        if run.active:
            error = f"{type(exc).__name__}: {exc}"
            run.record("summary", True, status="failed", epochs=0, train_loss=None, val_loss=None,
                       val_accuracy=None, seconds=time.perf_counter() - started, error=error)
            run.note(status="failed")
        raise
    finally:
        run.close()


def _train(args, rank, world_size, device, run, control, started):
    torch.manual_seed(SEED)  # every process builds the same initial weights
    model = Model()
    weights = args.weights if args.weights is not None else WEIGHTS
    if weights:
        load_weights(model, weights)
    model.to(device)
    x_train, y_train, x_val, y_val = load_data(args.data)
    x_train, x_val = x_train.astype(INPUT_DTYPE), x_val.astype(INPUT_DTYPE)
    train_set = TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train))
    if args.distributed:
        sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True, seed=SEED)
        loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    else:
        sampler = None
        loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(SEED))
        net = model
    loss_fn = build_loss()
    optimizer = build_optimizer(net.parameters(), args.lr)
    scheduler = build_scheduler(optimizer, args.lr, args.epochs, len(loader))
    scaler = torch.amp.GradScaler(device.type, enabled=AMP and device.type == "cuda")
    out = Path(args.out or args.run_dir or "runs/pytorch")
    start_epoch, best_val = 0, math.inf
    if args.resume:
        state = torch.load(args.resume, map_location=device, weights_only=True)  # tensors and numbers only
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        start_epoch, best_val = state["epoch"], state["best_val_loss"]
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        print(f"{len(x_train)} training / {len(x_val)} validation samples; {world_size} process(es) on "
              f"{device.type}, global batch {args.batch_size * world_size}")
    if world_size > 1:
        print(f"process {rank} of {world_size} training on {device}")
    layers = node_parameters(model)
    steps_per_epoch = math.ceil(len(loader) / ACCUMULATION_STEPS)
    global_step = start_epoch * steps_per_epoch
    if run.active:
        run.note(engine="pytorch", world_size=world_size, status="running", device=str(device),
                 script=Path(__file__).name)
        run.record("run", True, run_dir=str(run.path.resolve()), seed=SEED, device=str(device),
                   versions={"torch": torch.__version__, "numpy": np.__version__, "engine": "pytorch"},
                   determinism={"device": str(device), "deterministic": False, "world_size": world_size,
                                "note": f"DistributedDataParallel over {world_size} process(es)"},
                   dataset={"name": DATASET["name"], "task": "classification" if CLASSIFY else "regression",
                            "train": len(x_train), "val": len(x_val), "input_shape": list(INPUT_SHAPE),
                            "num_classes": int(y_train.max()) + 1 if CLASSIFY and len(y_train) else None},
                   parameters=sum(p.numel() for p in model.parameters()), epochs=args.epochs,
                   start_epoch=start_epoch, resumed_from=args.resume, engine="pytorch", world_size=world_size,
                   batch_size=args.batch_size, steps_per_epoch=len(loader))  # batches a process trains

    status, last = "finished", None
    epoch = start_epoch
    for epoch in range(start_epoch, args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)  # a different shuffle every epoch, the same on every process
        net.train()
        loss_sum, seen, correct_sum = 0.0, 0, 0
        epoch_start = tick = time.perf_counter()
        for step, (x, y) in enumerate(loader):
            if step % ACCUMULATION_STEPS == 0 and not control.gate(run, epoch, step, global_step):
                status = "stopped"  # every process stops at this same batch
                break
            x, y = x.to(device), y.to(device)
            with autocast(device):
                pred = net(x)
                loss = compute_loss(loss_fn, pred, y)
            scaler.scale(loss / ACCUMULATION_STEPS).backward()
            loss_value = loss.item()
            loss_sum += loss_value * len(x)
            seen += len(x)
            correct = count_correct(pred, y) if run.active else None
            correct = None if correct is None else int(correct)
            correct_sum += correct or 0
            record = {"epoch": epoch, "batch": step, "loss": loss_value, "stepped": False,
                      "lr": optimizer.param_groups[0]["lr"],
                      "accuracy": None if correct is None else correct / len(x)}
            if (step + 1) % ACCUMULATION_STEPS == 0 or step + 1 == len(loader):
                if GRAD_CLIP is not None or run.active:
                    scaler.unscale_(optimizer)
                detail = run.active and global_step % DETAIL_EVERY == 0
                norms = grad_norms(layers) if run.active else {}
                total = math.sqrt(sum(v * v for v in norms.values())) if norms else None
                factor = 1.0
                if GRAD_CLIP is not None:
                    nn.utils.clip_grad_norm_(net.parameters(), GRAD_CLIP)
                    if total is not None and math.isfinite(total):
                        factor = min(1.0, GRAD_CLIP / (total + 1e-6))
                before = None
                if detail:  # the weights before the step, for the update ratios
                    before = {nid: [p.detach().float().clone() for p in ps] for nid, ps in layers.items()}
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                global_step += 1
                if SCHEDULE_STEPS == "batch":
                    scheduler.step()
                clipped = {k: v * factor for k, v in norms.items()} if detail else {}
                record.update(stepped=True, grad_norm=total,
                              grad_norm_clipped=None if total is None else total * factor,
                              layer_grad_norms=norms if detail else {}, layer_grad_norms_clipped=clipped,
                              update_ratios=update_ratios(layers, before) if detail else {})
            if run.active:
                now = time.perf_counter()
                speed = len(x) * world_size / max(now - tick, 1e-9)  # samples a second, all processes
                run.record("batch", step=global_step, samples_per_second=speed, **record)
                tick = now
        if status == "stopped":
            break
        val_loss, val_acc = evaluate(net, loss_fn, x_val, y_val, device, rank, world_size, args.batch_size)
        lr = optimizer.param_groups[0]["lr"]
        if SCHEDULE_STEPS == "epoch":
            scheduler.step()
        elif SCHEDULE_STEPS == "plateau":
            scheduler.step(val_loss)
        if rank == 0:
            acc = f" val_acc {val_acc:.4f}" if val_acc is not None else ""
            train_loss = loss_sum / max(seen, 1)
            print(f"epoch {epoch + 1}/{args.epochs} loss {train_loss:.4f} val_loss {val_loss:.4f}{acc}")
            checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                          "scheduler": scheduler.state_dict() if scheduler is not None else None,
                          "scaler": scaler.state_dict(), "epoch": epoch + 1,
                          "best_val_loss": min(best_val, val_loss)}
            torch.save(checkpoint, out / "last.pt")
            if val_loss < best_val:
                torch.save(checkpoint, out / "best.pt")
            if run.active:
                probe = x_train[:PROBE_SAMPLES]
                weight_stats, activation_stats, histograms = epoch_stats(model, layers, probe, device)
                last = {"epoch": epoch, "train_loss": train_loss, "val_loss": val_loss,
                        "train_accuracy": correct_sum / max(seen, 1) if CLASSIFY else None,
                        "val_accuracy": val_acc, "lr": lr, "seconds": time.perf_counter() - epoch_start,
                        "steps": global_step, "weight_stats": weight_stats,
                        "activation_stats": activation_stats, "histograms": histograms,
                        "best": val_loss < best_val,
                        "confusion": confusion(model, x_val, y_val, device, args.batch_size)}
                run.record("epoch", True, **last)
                run.save_weights(model)
        best_val = min(best_val, val_loss)

    if rank == 0:
        if status == "stopped":  # the epoch it stopped in starts again on --resume
            checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                          "scheduler": scheduler.state_dict() if scheduler is not None else None,
                          "scaler": scaler.state_dict(), "epoch": epoch, "best_val_loss": best_val}
            torch.save(checkpoint, out / "last.pt")
            print(f"stopped at epoch {epoch + 1}; checkpoint saved to {out / 'last.pt'}")
        save_weights(model, out / "model.safetensors")
        print(f"weights saved to {out / 'model.safetensors'}")
    if run.active:
        run.save_weights(model)
        done = args.epochs if status == "finished" else epoch
        run.event("checkpoint", done, 0, global_step, path=str(out / "last.pt"))
        run.record("summary", True, status=status, epochs=done, train_loss=last and last["train_loss"],
                   val_loss=last and last["val_loss"], val_accuracy=last and last["val_accuracy"],
                   seconds=time.perf_counter() - started,
                   best_val_loss=best_val if math.isfinite(best_val) else None, error=None)
        run.note(status=status)
    if args.save_every_rank:
        save_weights(model, out / f"model_rank{rank}.safetensors")
    if args.distributed:
        dist.destroy_process_group()
    return model


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--lr", type=float, default=LEARNING_RATE)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="samples per batch and process")
    parser.add_argument("--data", default=None,
                        help=@DATA_HELP@)
    parser.add_argument("--weights", default=None, help="start from these weights (.safetensors)")
    parser.add_argument("--out", default=None,
                        help="where checkpoints and weights go (default: --run-dir, else runs/pytorch)")
    parser.add_argument("--run-dir", default=None,
                        help="write a Wiregrad run folder here (rank 0): run.json, document.json, "
                        "metrics.jsonl and model.safetensors; Wiregrad lists it in Runs and can follow it "
                        "as it grows; write pause, resume or stop into RUN_DIR/control to act at the next "
                        "batch")
    parser.add_argument("--resume", default=None, help="continue from a checkpoint (last.pt)")
    parser.add_argument("--distributed", action="store_true",
                        help="DistributedDataParallel; start with torchrun --nproc_per_node=N")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default=@DEVICE@)
    parser.add_argument("--save-every-rank", action="store_true",
                        help="each process also writes its final weights (to check the replicas agree)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    train(parse_args())
'''


def _indent(code: str, by: str = "    ") -> str:
    return "\n".join(by + line if line else line for line in code.splitlines())


def _dataset_facts(doc: Document, base_dir: str | Path | None) -> tuple[str | None, int | None,
                                                                        tuple[int, ...] | None]:
    """(task, classes, input shape) of the document's dataset, when it loads here (the checker's cached
    copy, as the Trainer reads it)."""
    split = load_split(doc, base_dir)
    if split is None:
        return None, None, None
    return split.task, split.num_classes, split.input_shape


# what the script's docstring and section title say of its model: (without blocks, with blocks)
_MODEL_DOCS = {
    False: ("""`Model` has one layer per node of the graph, named by the node ids, so its state_dict keys are
Wiregrad's weight names (e.g. "fc1.weight") and `--weights model.safetensors` loads them.""",
            "Model: one layer per node of the graph"),
    True: ("""`Model` holds the top-level layers and block instances by node id; each block is a class of its
own (a repeated one an nn.Sequential of copies), so the state_dict keys are Wiregrad's weight
names (e.g. "stage2.0.conv1.weight") and `--weights model.safetensors` loads them.""",
           "Model: one class per block, one layer per node of the graph"),
}


def generate_script(doc: Document, *, weights_file: str | None = None, base_dir: str | Path | None = None,
                    source_name: str | None = None, script_name: str = "train_model.py") -> str:
    """The training script for a document, as text. `weights_file` (a path relative to the
    script's folder, or absolute) becomes the default `--weights`. Data Wiregrad ships is read from
    the script's folder (`bundled_files` says which; `export_pytorch` puts it there). Every name
    and string from the document is escaped or checked, and the text is parsed before it is
    returned: a file name or a data path can never run as code."""
    task, classes, shape = _dataset_facts(doc, base_dir)
    graph = plan_export(doc, shape)
    if len(graph.input_ids) != 1:
        raise ExportError(f"the training script feeds one dataset into one Input node; the graph has "
                          f"{len(graph.input_ids)} ({', '.join(graph.input_ids)})")
    training = doc.training
    dataset = resolved_dataset(training, base_dir)
    targets = _targets_mode(graph, task, classes)
    scheduler, when = _scheduler_source(training)

    losses = [_loss_constructor(graph, o) for o in graph.output_ids]
    if len(losses) == 1:
        loss_expr, compute = losses[0], "    return loss_fn(pred, y)"
    else:  # one loss per Output node, summed, each against the same targets (as Wiregrad does)
        loss_expr = "[" + ", ".join(losses) + "]"
        compute = "    return sum(fn(p, y) for fn, p in zip(loss_fn, pred))"
    if targets in _ACCURACY and task == "classification":
        threshold = 0.5 if any(graph.output_params(o)["loss"] == "BCELoss" for o in graph.output_ids) else 0.0
        pick = "    pred = pred[0] if isinstance(pred, tuple) else pred\n"
        correct = pick + "    return " + _ACCURACY[targets].replace("{threshold}", str(threshold))
    else:
        correct = "    return None"
    data_option = DATA_OPTIONS.get(dataset["name"])
    # argparse %-formats help texts: a "%" in the path must reach it doubled
    data_help = ('f"your copy of the data (default: {DATASET[DATA_OPTION]})".replace("%", "%%")'
                 if data_option else '"not used: this dataset is generated"')
    int_input = graph.node(graph.input_ids[0]).params.get("dtype") == "int64"
    input_shape = graph.input_shapes[graph.input_ids[0]][1:]
    device = training["device"]
    seed, epochs, batch_size, accumulate = (_py(int(training[k])) for k in (
        "seed", "epochs", "batch_size", "grad_accumulation"))

    model_doc, model_title = _MODEL_DOCS[bool(graph.instances)]
    # the file name and script name are the user's text: _text() keeps them inside the docstring
    title = _text(source_name) if source_name else "A Wiregrad graph"
    header = f'''"""{title}: a PyTorch training script exported from Wiregrad on {time.strftime("%Y-%m-%d")}.

    One CPU or GPU:       python {{script}}
    Several processes:    torchrun --nproc_per_node=4 {{script}} --distributed
    A quick check:        python {{script}} --epochs 1 --device cpu
    As a Wiregrad run:    add --run-dir DIR to either (Wiregrad's Runs panel lists the folder and
                          Training > Follow run folder watches it as it grows)

Under torchrun it uses DistributedDataParallel (NCCL on GPUs, Gloo on CPUs) and a DistributedSampler.

{model_doc}
"""
import argparse
import json
import math
import os
import signal
import socket
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

# ---------------------------------------------------------------------------------------------
# Settings from the Wiregrad document
# ---------------------------------------------------------------------------------------------
SEED = {seed}
EPOCHS = {epochs}
BATCH_SIZE = {batch_size}  # per process: under torchrun the global batch is this x processes
LEARNING_RATE = {_py(training["optimizer"]["lr"])}
GRAD_CLIP = {_py(training["grad_clip"])}  # clip the global gradient norm to this (None: no clipping)
ACCUMULATION_STEPS = {accumulate}  # batches whose gradients add up per optimiser step
AMP = {_py(bool(training["amp"]))}  # mixed precision
SCHEDULE_STEPS = {_py(when)}  # when the learning-rate schedule steps
CLASSIFY = {task == "classification"}
INPUT_SHAPE = {_py([int(d) for d in input_shape])}  # one sample, without the batch dimension
INPUT_DTYPE = {"np.int64" if int_input else "np.float32"}
WEIGHTS = {_weights_default(weights_file)}  # the default for --weights
DATASET = {_py_dict_lines(dataset)}
DATA_OPTION = {_py(data_option)}  # which dataset option --data replaces
'''
    header = header.replace("{script}", _text(script_name))
    title = f"Data: Wiregrad's {_text(dataset['name'])!r} dataset, split and normalised the same way"
    data_code = "\n" + _section(title) + data_source(dataset, targets, classes)
    # one pass, so nothing filled in (a string parameter) is searched for placeholders again
    fill = {"LOSS": loss_expr, "COMPUTE_LOSS": compute, "COUNT_CORRECT": correct,
            "OPTIMIZER": _optimizer_source(training), "SCHEDULER": scheduler, "DATA_HELP": data_help,
            "DEVICE": _py(device), "GRAPH_NAME": _py(Path(source_name).stem if source_name else "untitled"),
            "NODE_MODULES": _py_dict_lines({n.id: n.id.replace(SEP, ".") for n in graph.nodes
                                            if n.type not in _EXPRESSIONS}, width=94),
            "DOCUMENT_JSON": _long_text(json.dumps(doc.to_dict(), indent=1))}
    training_code = "\n" + re.sub(r"@([A-Z_]+)@", lambda m: fill[m.group(1)], _TRAINING)
    # a block's class must not take a name the rest of the script defines (`train`, `DATASET`, ...)
    model_code, uses_init = model_source(graph, taken=_defined_names(header + data_code + training_code))
    parts = [header, _section(model_title)]
    if uses_init:
        parts.append(_INIT_HELPER.strip("\n") + "\n\n")
    parts += [model_code, data_code, training_code]
    text = "".join(parts)
    try:  # every piece above is escaped; a script that does not parse must never be written
        ast.parse(text, filename=script_name)
    except SyntaxError as exc:
        raise ExportError(f"the generated script does not parse (line {exc.lineno}): {exc.msg}; "
                          "please report this") from None
    return text


def _long_text(value: str, width: int = 96) -> str:
    """A long string for the script: a parenthesised run of repr() pieces, each line within `width`
    (a character's cost is its length inside repr: escapes count double or more)."""
    pieces, piece, size = [], [], 0
    for ch in value:
        cost = 2 if ch in "'\"" else len(repr(ch)) - 2
        if size + cost > width - 6 and piece:
            pieces.append("".join(piece))
            piece, size = [], 0
        piece.append(ch)
        size += cost
    pieces.append("".join(piece))
    return "(\n" + "".join(f"    {p!r}\n" for p in pieces) + ")"


def _defined_names(code: str) -> set[str]:
    """The names a piece of the script binds at module level (functions, classes, constants, imports)."""
    names: set[str] = set()
    for stmt in ast.parse(code).body:
        if isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return names


def _section(title: str) -> str:
    rule = "# " + "-" * 93
    return f"\n{rule}\n# {title}\n{rule}\n"


def _weights_default(weights_file: str | None) -> str:
    if weights_file is None:
        return "None"
    if Path(weights_file).is_absolute():
        return f"Path({weights_file!r})"
    return f"Path(__file__).with_name({weights_file!r})"


def export_pytorch(doc: Document, path: str | Path, *, weights: str | Path | None = None,
                   base_dir: str | Path | None = None, source_name: str | None = None) -> Path:
    """Write the training script to `path`. With `weights` (a .safetensors file, a Wiregrad
    checkpoint or a run directory) the trained weights go next to it as <script>.safetensors and
    become the script's default `--weights`. Data Wiregrad ships (digits.npz) is copied next to it
    too, so the folder runs anywhere; the user's own data stays where it is (`--data` points
    elsewhere)."""
    from .weights import read_state_dict, save_weights

    path = Path(path)
    weights_file = None
    if weights is not None:
        state = read_state_dict(weights)
        target = path.with_suffix(".safetensors")
        _check_weights_fit(doc, state)
        save_weights(state, target)
        weights_file = target.name
    text = generate_script(doc, weights_file=weights_file, base_dir=base_dir, source_name=source_name,
                           script_name=path.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    for name, source in bundled_files(doc.training["dataset"]["name"]).items():
        shutil.copyfile(source, path.with_name(name))
    return path


def _check_weights_fit(doc: Document, state: Mapping[str, Any]) -> None:
    """Every weight must belong to a node of the document (names are node ids; inside blocks, paths:
    `stage2.0.conv1.weight` belongs to the layer stage2/0/conv1)."""
    from app.document.blocks import expand, module_path

    paths = {module_path(nid) for nid in expand(doc).nodes}

    def fits(key: str) -> bool:
        parts = key.split(".")
        return any(".".join(parts[:i]) in paths for i in range(1, len(parts)))

    strangers = sorted({k.rsplit(".", 1)[0] for k in state if not fits(k)})
    if strangers:
        raise ExportError(f"the weights hold layers the graph does not have: {', '.join(strangers[:5])}; "
                          "were they trained from another graph?")


__all__ = ["bundled_files", "export_pytorch", "generate_script", "model_source"]
