"""Document -> engine model: one engine module per node, run in topological order, so skip
connections and several heads work. State-dict keys read like the canvas: `fc1.weight`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import engine
from app.document import Document, DocumentError, format_problem, get_spec, infer_shapes, validate
from app.document.blocks import SEP, expand
from app.document.shapes import GraphInfo
from engine import nn

NO_MODULE = ("Input", "Output", "BlockPort")
_RECURRENT = ("RNN", "LSTM", "GRU")


class CompileError(DocumentError):
    """The document can't become a model; the message lists the problems, one per line."""


# --- the few node types PyTorch has no module for ------------------------------------------------
class Add(nn.Module):
    """Elementwise sum of its inputs (broadcasting)."""

    def forward(self, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out


class Multiply(nn.Module):
    """Elementwise product of its inputs (broadcasting)."""

    def forward(self, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = out * x
        return out


class Concat(nn.Module):
    """Joins its inputs along `dim`, in wiring order."""

    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, *xs):
        return engine.cat(list(xs), dim=self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Reshape(nn.Module):
    """Gives each sample a new shape; the batch dimension stays."""

    def __init__(self, shape: Sequence[int]) -> None:
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x):
        return x.reshape(x.shape[0], *self.shape)

    def extra_repr(self) -> str:
        return f"shape={self.shape}"


class Permute(nn.Module):
    """Reorders dimensions (dims start with 0, the batch)."""

    def __init__(self, dims: Sequence[int]) -> None:
        super().__init__()
        self.dims = tuple(dims)

    def forward(self, x):
        return x.permute(*self.dims)

    def extra_repr(self) -> str:
        return f"dims={self.dims}"


_LOCAL_CLASSES: dict[str, type] = {"Add": Add, "Multiply": Multiply, "Concat": Concat, "Reshape": Reshape,
                                   "Permute": Permute}


def _module_class(node_type: str, name: str | None) -> type:
    cls = _LOCAL_CLASSES.get(node_type) or (getattr(nn, name, None) if name else None)
    if cls is None:
        raise CompileError(f"the engine has no module for {node_type} yet")
    return cls


# --- initialisation -----------------------------------------------------------------------------
def apply_init(module: Any, params: Mapping[str, Any]) -> None:
    """Apply a node's `init` choice to its weight matrices (any tensor parameter of 2+ dims whose
    name says weight) and start its biases at zero. 'default' keeps PyTorch's scheme."""
    choice = params.get("init", "default")
    if choice == "default":
        return
    init = nn.init
    with engine.no_grad():
        for name, p in module.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if "bias" in leaf:
                init.zeros_(p)
                continue
            if "weight" not in leaf or p.dim() < 2:
                continue
            if choice == "xavier_uniform":
                init.xavier_uniform_(p, gain=params.get("init_gain", 1.0))
            elif choice == "xavier_normal":
                init.xavier_normal_(p, gain=params.get("init_gain", 1.0))
            elif choice == "kaiming_uniform":
                init.kaiming_uniform_(p, nonlinearity="relu")
            elif choice == "kaiming_normal":
                init.kaiming_normal_(p, nonlinearity="relu")
            elif choice == "orthogonal":
                init.orthogonal_(p, gain=params.get("init_gain", 1.0))
            elif choice == "normal":
                init.normal_(p, 0.0, params.get("init_std", 0.02))
            elif choice == "zeros":
                init.zeros_(p)
            elif choice == "constant":
                init.constant_(p, params.get("init_value", 0.0))


# --- the model ----------------------------------------------------------------------------------
class BlockModule(nn.Module):
    """One block instance (or one copy of a repeated one): holds its layers, so their parameters are named
    by path (`stage2.0.conv1.weight`) as PyTorch names those of nested modules. The CompiledModel runs the
    layers; this only groups them."""

    def __init__(self, block: str) -> None:
        super().__init__()
        self.block = block

    def extra_repr(self) -> str:
        return f"block={self.block}"


class Capture(dict):
    """What `CompiledModel.capture` saw: node id -> that node's output, plus `attention`: node id -> the
    attention weights (N, heads, L, S) of each MultiheadAttention node."""

    def __init__(self) -> None:
        super().__init__()
        self.attention: dict[str, Any] = {}


class CompiledModel(nn.Module):
    """The network a document describes. `forward(*inputs)` takes one tensor per Input node (in
    document order) and returns the prediction reaching the Output node — a tuple, in document
    order, when there are several Output nodes."""

    def __init__(self, doc: Document, info: GraphInfo) -> None:
        super().__init__()
        doc = expand(doc)
        self.instances: dict[str, str] = dict(getattr(doc, "instances", {}))  # block path -> definition
        self._node_modules: dict[str, Any] = {}
        self.input_ids = [n.id for n in doc.nodes.values() if n.type == "Input"]
        self.output_ids = [n.id for n in doc.nodes.values() if n.type == "Output"]
        self.node_types = {nid: doc.nodes[nid].type for nid in info.order}
        self.input_dtypes = {nid: info.nodes[nid].params["dtype"] for nid in self.input_ids}
        needed = set(self.output_ids)
        for out in self.output_ids:
            needed |= _ancestors(info, out)
        self.order = [nid for nid in info.order if nid in needed]
        # per node: [(port, [(src, src_port), ...], variadic)] in spec port order
        self.wiring: dict[str, list[tuple[str, list[tuple[str, str]], bool]]] = {}
        self.node_params: dict[str, dict[str, Any]] = {}
        self.out_shapes = {nid: info.nodes[nid].shape for nid in self.order}
        self._capture: dict[str, Any] | None = None
        # one pass over the wires: doc.incoming per node is quadratic (seconds at 2,000 layers)
        into: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for e in doc.edges:
            into.setdefault((e.dst, e.dst_port), []).append((e.src, e.src_port))
        for nid in self.order:
            node = doc.nodes[nid]
            spec = get_spec(node.type)
            node_info = info.nodes[nid]
            params = node_info.params or {}
            self.node_params[nid] = params
            self.wiring[nid] = [
                (port.name, into.get((nid, port.name), []), port.variadic)
                for port in spec.inputs]
            if node.type in NO_MODULE:
                continue
            try:
                cls = _module_class(node.type, spec.class_name(params))
            except CompileError as exc:  # name the node, so the training check can pin it there
                raise CompileError(f"node {nid}: {exc}") from None
            try:
                module = cls(**spec.engine_kwargs(params, node_info.in_shapes))
            except (TypeError, ValueError) as exc:
                raise CompileError(f"node {nid}: can't build {node.type}: {exc}") from None
            apply_init(module, params)
            module._scope_name = nid  # autograd nodes made in its forward carry the layer id
            self._add_node_module(nid, module)

    def _add_node_module(self, nid: str, module: Any) -> None:
        self._node_modules[nid] = module
        *path, leaf = nid.split(SEP)
        parent: Any = self
        for k in range(len(path)):  # a layer inside blocks hangs under one BlockModule per instance
            key = path[k]
            child = parent._modules.get(key)
            if child is None:
                child = BlockModule(self.instances.get(SEP.join(path[:k + 1]), ""))
                _register(parent, key, child)
            parent = child
        _register(parent, leaf, module)

    def node_module(self, nid: str) -> Any:
        """The engine module of a node (None for Input/Output and a block's ports)."""
        return self._node_modules.get(nid)

    def node_parameters(self) -> dict[str, list[tuple[str, Any]]]:
        """Trainable parameters grouped by node id (a path inside blocks), in topological order; each
        named as in the state dict (`fc1.weight`, `stage2.0.conv1.weight`)."""
        groups: dict[str, list[tuple[str, Any]]] = {}
        for nid in self.order:
            module = self._node_modules.get(nid)
            if module is None:
                continue
            prefix = nid.replace(SEP, ".")
            got = [(f"{prefix}.{name}", p) for name, p in module.named_parameters()]
            if got:
                groups[nid] = got
        return groups

    def capture(self, *inputs) -> Capture:
        """Run forward and return every node's output, keyed by node id (the Inputs included); its
        `attention` holds each MultiheadAttention node's weights (N, heads, L, S)."""
        self._capture = Capture()
        try:
            self.forward(*inputs)
        finally:
            captured, self._capture = self._capture, None
        return captured

    def forward(self, *inputs):
        if len(inputs) != len(self.input_ids):
            raise TypeError(f"the model takes {len(self.input_ids)} input(s) "
                            f"({', '.join(self.input_ids)}), got {len(inputs)}")
        values: dict[tuple[str, str], Any] = {
            (nid, "out"): x for nid, x in zip(self.input_ids, inputs)}
        preds = {}
        if self._capture is not None:
            self._capture.update({nid: x for nid, x in zip(self.input_ids, inputs)})
        for nid in self.order:
            kind = self.node_types[nid]
            if kind == "Input":
                continue
            args = []
            for _port, sources, variadic in self.wiring[nid]:
                got = [values[s] for s in sources]
                if variadic:
                    args.extend(got)
                elif got:
                    args.append(got[0])
            if kind == "Output":
                preds[nid] = args[0]
                continue
            self.running_node = nid  # names the layer when the device fails inside it (out of memory)
            out = values[(nid, "out")] = self._run_node(nid, kind, args)
            if self._capture is not None:
                self._capture[nid] = out
        if len(self.output_ids) == 1:
            return preds[self.output_ids[0]]
        return tuple(preds[o] for o in self.output_ids)

    def _run_node(self, nid: str, kind: str, args: list[Any]):
        if kind == "BlockPort":
            return args[0]
        module = self._node_modules[nid]
        if kind == "MultiheadAttention":  # self-attention: query = key = value
            x = args[0]
            if self._capture is None:  # training skips the weights: they cost memory and time
                return module(x, x, x, need_weights=False)[0]
            out, weights = module(x, x, x, need_weights=True, average_attn_weights=False)
            self._capture.attention[nid] = weights
            return out
        out = module(*args)
        if kind in _RECURRENT:
            return _recurrent_output(nid, kind, out, self.node_params[nid])
        return out


def _register(parent: Any, key: str, module: Any) -> None:
    try:
        parent.add_module(key, module)
    except KeyError:
        # an id like "train" shadows a Module method: keep it only in the registry, so the
        # state-dict key still reads "train.weight"
        parent._modules[key] = module


def _recurrent_output(nid: str, kind: str, out: Any, params: Mapping[str, Any]):
    """The sequence (N, L, H·dirs), or the final hidden state (N, H·dirs) like PyTorch's h_n."""
    seq, hidden = out
    if params.get("return", "sequence") == "sequence":
        return seq
    with engine.autograd.scope(nid):
        h_n = hidden[0] if kind == "LSTM" else hidden
        if params.get("bidirectional"):
            return engine.cat([h_n[-2], h_n[-1]], dim=1)
        return h_n[-1]


def _ancestors(info: GraphInfo, nid: str) -> set[str]:
    import networkx as nx

    return set(nx.ancestors(info.graph, nid))


# --- the loss -----------------------------------------------------------------------------------
class CompiledLoss:
    """The sum of every Output node's loss between its prediction and the target."""

    def __init__(self, losses: list[tuple[str, Any]], softmax_first: bool = False) -> None:
        self.losses = losses  # (output node id, engine loss module)
        self.softmax_first = softmax_first  # inject_bug double_softmax (app/training/bugs.py)

    @property
    def names(self) -> list[str]:
        return [type(fn).__name__ for _, fn in self.losses]

    def __call__(self, preds, target):
        if len(self.losses) == 1:
            preds = (preds,)
        total = None
        for (_nid, fn), pred in zip(self.losses, preds):
            if self.softmax_first and type(fn).__name__ == "CrossEntropyLoss":
                pred = nn.functional.softmax(pred, dim=1)  # inject_bug: CrossEntropyLoss log-softmaxes again
            value = fn(pred, target)
            total = value if total is None else total + value
        return total


def build_loss(doc: Document, info: GraphInfo | None = None) -> CompiledLoss:
    """One loss module per Output node; `training.loss`, when set, overrides the node's choice."""
    doc = expand(doc)
    override = doc.training.get("loss")
    losses = []
    for node in doc.nodes.values():
        if node.type != "Output":
            continue
        spec = get_spec("Output")
        params = dict(node.params)
        if override:
            params["loss"] = override
        resolved = spec.resolve_params(params)
        name = resolved["loss"]
        if resolved["reduction"] == "batchmean" and name != "KLDivLoss":
            resolved["reduction"] = "mean"
        cls = getattr(nn, name, None)
        if cls is None:
            raise CompileError(f"node {node.id}: the engine has no {name} yet")
        in_shapes = info.nodes[node.id].in_shapes if info is not None else {}
        losses.append((node.id, cls(**spec.engine_kwargs(resolved, in_shapes))))
    return CompiledLoss(losses, softmax_first=doc.training.get("inject_bug") == "double_softmax")


def compile_document(doc: Document, input_shape: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
                     *, info: GraphInfo | None = None) -> CompiledModel:
    """Build the model of a valid document; `input_shape` is the dataset's per-sample shape (for
    Input nodes that take theirs from the dataset). `info` is `infer_shapes(doc, input_shape)` when the
    caller has it already (the training check's), so shape inference runs once. Raises CompileError
    listing the problems."""
    doc = expand(doc)
    if info is None:
        info = infer_shapes(doc, input_shape)
    problems = [p for p in validate(doc, input_shape, info=info) if p.severity == "error"]
    if problems:
        raise CompileError("the graph has problems:\n" + "\n".join(format_problem(p) for p in problems))
    return CompiledModel(doc, info)


def compile(doc: Document, input_shape: Sequence[int] | Mapping[str, Sequence[int]] | None = None,  # noqa: A001
            ) -> tuple[CompiledModel, CompiledLoss]:
    """`compile(document) -> (model, loss_fn)` as DESIGN.md describes it."""
    info = infer_shapes(doc, input_shape)
    return compile_document(doc, input_shape, info=info), build_loss(doc, info)
