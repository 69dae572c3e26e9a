"""PyTorch -> document: trace an nn.Module with torch.fx and turn its layers into catalogue nodes.
Modules the catalogue does not know become `Unknown` nodes that validation flags; nothing is dropped.
"""
from __future__ import annotations

import importlib.util
import operator
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.document import Document, DocumentError, ParamError, get_spec
from app.document.document import OPTIMIZER_OPTIONS

from .graph import ExportError

_ACTIVATIONS = ("ReLU", "LeakyReLU", "ELU", "GELU", "SiLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax",
                "Softplus", "Hardtanh", "GLU", "ReLU6", "SELU", "CELU", "PReLU", "Mish", "Hardswish",
                "Hardsigmoid", "Softsign", "LogSigmoid", "Softmin", "Tanhshrink", "Softshrink", "Hardshrink")
_SAME_NAME = (*_ACTIVATIONS, "Linear", "Bilinear", "Embedding", "Conv1d", "Conv2d", "ConvTranspose1d",
              "ConvTranspose2d",
              "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
              "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "BatchNorm1d", "BatchNorm2d", "InstanceNorm1d",
              "InstanceNorm2d", "LayerNorm", "RMSNorm", "GroupNorm", "Dropout", "Dropout2d", "Flatten",
              "Unflatten", "PixelShuffle", "PixelUnshuffle", "Upsample", "ZeroPad2d", "ReflectionPad2d",
              "ReplicationPad2d", "RNN", "LSTM", "GRU", "MultiheadAttention", "TransformerEncoderLayer")
# torch.relu, F.relu, x.relu() ... -> the node type (Softmax-like ones also read their dim)
_FUNCTIONS = {"relu": "ReLU", "sigmoid": "Sigmoid", "tanh": "Tanh", "gelu": "GELU", "silu": "SiLU",
              "elu": "ELU", "leaky_relu": "LeakyReLU", "softmax": "Softmax", "log_softmax": "LogSoftmax",
              "relu6": "ReLU6", "selu": "SELU", "mish": "Mish", "hardswish": "Hardswish",
              "hardsigmoid": "Hardsigmoid", "softsign": "Softsign", "logsigmoid": "LogSigmoid",
              "softmin": "Softmin", "tanhshrink": "Tanhshrink"}
_LAYER_SPACING = (200.0, 110.0)


class ImportErrorInUserTerms(ExportError):
    """The module can't be traced or loaded; the message says why."""


def load_module_class(target: str) -> type:
    """`path/to/model.py:ClassName` (or `package.module:ClassName`) -> the class. This runs the file:
    only import code you trust."""
    if ":" not in target:
        raise ImportErrorInUserTerms(f"expected FILE.py:ClassName, got {target!r}")
    where, class_name = target.rsplit(":", 1)
    if where.endswith(".py"):
        path = Path(where).resolve()
        if not path.exists():
            raise ImportErrorInUserTerms(f"{where}: file not found")
        name = f"wiregrad_import_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ImportErrorInUserTerms(f"{where} has no {class_name}")
    return cls


def _params_of(module: Any, kind: str) -> dict[str, Any]:
    """The catalogue params of a torch module (all of them; defaults are dropped later)."""
    spec = get_spec(kind)
    params: dict[str, Any] = {}
    for p in spec.params:
        if not p.ctor:
            continue
        if hasattr(module, p.name):
            value = getattr(module, p.name)
            if p.name == "bias" and not isinstance(value, bool):
                value = value is not None
            params[p.name] = list(value) if isinstance(value, tuple) else value
    if kind in ("RNN", "LSTM", "GRU"):
        params["return"] = "sequence"
        if kind == "RNN":
            params["nonlinearity"] = module.nonlinearity
    elif kind == "LayerNorm":
        params["normalized_dims"] = len(module.normalized_shape)
        params["bias"] = module.bias is not None if module.elementwise_affine else True
    elif kind == "MultiheadAttention":
        params["bias"] = module.in_proj_bias is not None
    elif kind == "TransformerEncoderLayer":
        params["nhead"] = module.self_attn.num_heads
        params["dim_feedforward"] = module.linear1.out_features
        params["dropout"] = float(module.dropout.p)
        params["layer_norm_eps"] = float(module.norm1.eps)
        params["bias"] = module.linear1.bias is not None
        act = module.activation
        act_name = getattr(act, "__name__", type(act).__name__).lower()
        params["activation"] = "gelu" if "gelu" in act_name else "relu"
    elif kind == "RMSNorm":
        params["normalized_dims"] = len(module.normalized_shape)
    elif kind == "PReLU":
        params["per_channel"] = module.num_parameters > 1
        params["init_slope"] = float(module.init)
    elif kind == "Upsample":
        scale = module.scale_factor
        if isinstance(scale, tuple) and len(set(scale)) == 1:
            params["scale_factor"] = scale[0]  # (2.0, 2.0) reads as 2.0
        params["align_corners"] = bool(module.align_corners)
    elif kind in ("Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"):
        if isinstance(module.padding, str):
            params["padding"] = module.padding
    elif kind.startswith(("MaxPool", "AvgPool")) and params.get("stride") == params.get("kernel_size"):
        params["stride"] = None
    return params


def _checked(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Keep the params the catalogue accepts and that differ from its defaults."""
    spec = get_spec(kind)
    out = {}
    for name, value in params.items():
        p = spec.param(name)
        if p is None:
            continue
        value = p.check(value)
        if isinstance(value, list) and len(set(value)) == 1 and p.kind == "int-tuple" and p.length:
            value = value[0]  # (3, 3) reads as 3, like the palette writes it
        if value != p.default:
            out[name] = value
    return out


class _Importer:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.modules = dict(root.named_modules())
        self.doc = Document()
        self.value_of: dict[Any, str] = {}  # fx node -> document node id producing it
        self.special: dict[Any, tuple[Any, ...]] = {}  # fx node -> (what, node id, data): tuple plumbing
        self.depth: dict[str, int] = {}
        self.current: Any = None  # the fx node being turned into document nodes
        self.scope: dict[str, list[str]] = {}  # node id -> the user's modules it runs inside (qualnames)
        self.qual: dict[str, str] = {}  # node id -> the qualname of its module (layers, block instances)
        self.fx_name: dict[str, str] = {}  # node id -> the fx node's name (add_1)
        self.classes: dict[str, type] = {}  # qualname of a user's module -> its class

    # --- building ---------------------------------------------------------------------------------
    def add(self, kind: str, params: Mapping[str, Any], inputs: Sequence[str], want_id: str | None = None,
            port_names: Sequence[str] | None = None) -> str:
        spec = get_spec(kind)
        nid = self._id(want_id or spec.id_prefix, spec.id_prefix)
        self.doc.add_node(kind, _checked(kind, params) if kind != "Unknown" else dict(params), node_id=nid)
        ports = port_names or [spec.inputs[0].name] * len(inputs) if spec.inputs else []
        for src, port in zip(inputs, ports):
            self.doc.connect(src, "out", nid, port)
        self.depth[nid] = 1 + max((self.depth[s] for s in inputs), default=-1)
        if self.current is not None:
            self.scope[nid] = self.scope_of(self.current)
            self.fx_name[nid] = self.current.name
            if self.current.op == "call_module":
                self.qual[nid] = self.current.target
        return nid

    def _id(self, want: str, prefix: str) -> str:
        want = want.replace(".", "_")
        if not want or not (want[0].isalpha() or want[0] == "_"):
            want = prefix + want
        want = "".join(c if c.isalnum() or c == "_" else "_" for c in want)[:64]
        return want if want not in self.doc.nodes else self.doc.fresh_id(want + "_")

    def unknown(self, what: str, inputs: Sequence[str], want_id: str | None = None) -> str:
        return self.add("Unknown", {"module": what[:200]}, inputs[:1], want_id)

    # --- fx nodes ---------------------------------------------------------------------------------
    def inputs_of(self, args: Sequence[Any]) -> list[str]:
        import torch.fx

        out = []
        for a in args:
            if isinstance(a, list | tuple):
                out += self.inputs_of(a)
            elif isinstance(a, torch.fx.Node) and a in self.value_of:
                out.append(self.value_of[a])
        return out

    def run(self, traced: Any, input_shape: Sequence[int] | Mapping[str, Sequence[int]] | None) -> Document:
        for node in traced.graph.nodes:
            self.current = node
            if node.op in ("call_function", "call_method", "get_attr") and not node.users:
                continue  # a value nobody uses (e.g. the `_` in `_, (h_n, _) = lstm(x)`)
            if node.op == "placeholder":
                shape = input_shape.get(node.name) if isinstance(input_shape, Mapping) else input_shape
                params = {"shape": list(shape)} if shape is not None else {}
                self.value_of[node] = self.add("Input", params, [], node.name)
            elif node.op == "call_module":
                self.call_module(node)
            elif node.op in ("call_function", "call_method"):
                self.call(node)
            elif node.op == "output":
                self.output(node)
            elif node.op == "get_attr":
                self.value_of[node] = self.unknown(f"parameter {node.target}", [], node.name)
        self.current = None
        self.make_blocks()
        self.layout()
        return self.doc

    def call_module(self, node: Any) -> None:
        module = self.modules[node.target]
        kind = type(module).__name__
        inputs = self.inputs_of(node.args)
        if kind in _SAME_NAME and type(module).__module__.startswith("torch.nn"):
            params = _params_of(module, kind)
            if kind == "MultiheadAttention":
                inputs = inputs[:1]  # self-attention: query = key = value
            ports = ["in1", "in2"] if kind == "Bilinear" else None
            try:
                nid = self.add(kind, params, inputs, node.target, ports)
            except ParamError as exc:  # a setting the catalogue can't hold, e.g. Upsample mode "bicubic"
                self.value_of[node] = self.unknown(f"{type(module).__module__}.{kind} ({exc})", inputs,
                                                   node.target)
                return
            if kind in ("RNN", "LSTM", "GRU", "MultiheadAttention"):
                self.special[node] = ("layer_out", nid, kind)
            else:
                self.value_of[node] = nid
            return
        if kind == "Identity":
            self.value_of[node] = inputs[0]
            return
        self.value_of[node] = self.unknown(f"{type(module).__module__}.{kind}", inputs, node.target)

    def call(self, node: Any) -> None:
        import torch

        target = node.target
        name = target if isinstance(target, str) else getattr(target, "__name__", str(target))
        inputs = self.inputs_of(node.args)
        if target is operator.getitem:
            self.getitem(node)
            return
        # x * 2 is no Multiply node, and a document can't wire x twice into one port (x + x)
        tensors_only = len(set(inputs)) == len(node.args) >= 2
        if (target in (operator.add, torch.add) or name in ("add", "__add__")) and tensors_only:
            self.value_of[node] = self.add("Add", {}, inputs)
        elif (target in (operator.mul, torch.mul) or name in ("mul", "__mul__")) and tensors_only:
            self.value_of[node] = self.add("Multiply", {}, inputs)
        elif target in (torch.cat, torch.concat):
            dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
            last = self._bidirectional_last(node.args[0])
            if last is not None:
                self.value_of[node] = last
            else:
                self.value_of[node] = self.add("Concat", {"dim": dim}, inputs)
        elif name == "flatten":
            start = node.kwargs.get("start_dim", node.args[1] if len(node.args) > 1 else 0)
            end = node.kwargs.get("end_dim", node.args[2] if len(node.args) > 2 else -1)
            self.value_of[node] = self.add("Flatten", {"start_dim": start, "end_dim": end}, inputs)
        elif name in ("reshape", "view") and node.op == "call_method":
            shape = [a for a in node.args[2:]] if len(node.args) > 2 else None
            if shape is not None and all(isinstance(d, int) for d in shape):
                self.value_of[node] = self.add("Reshape", {"shape": shape}, inputs[:1])
            else:
                self.value_of[node] = self.unknown(f"{name}{tuple(node.args[1:])}", inputs)
        elif name == "permute":
            dims = node.args[1:] if not isinstance(node.args[1], list | tuple) else node.args[1]
            self.value_of[node] = self.add("Permute", {"dims": list(dims)}, inputs[:1])
        elif name in ("size", "dim"):
            self.special[node] = ("size", None, None)  # only keeps the batch size in a reshape
        elif name in _FUNCTIONS:
            kind = _FUNCTIONS[name]
            params = {}
            if kind in ("Softmax", "LogSoftmax", "Softmin"):
                params["dim"] = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else -1)
            self.value_of[node] = self.add(kind, params, inputs[:1])
        elif name == "contiguous":
            self.value_of[node] = inputs[0]
        else:
            self.value_of[node] = self.unknown(f"function {name}", inputs)

    def getitem(self, node: Any) -> None:
        """Tuple plumbing of recurrent layers and attention: `out, (h_n, c_n) = lstm(x)`; out[0] is
        the sequence, h_n[-1] (or cat(h_n[-2], h_n[-1])) the last state."""
        src, index = node.args
        what, nid, kind = self.special.get(src, (None, None, None))
        if what == "layer_out" and index == 0:
            self.value_of[node] = nid
        elif what == "layer_out" and index == 1 and kind != "MultiheadAttention":
            self.special[node] = ("lstm_state" if kind == "LSTM" else "h_n", nid, kind)
        elif what == "lstm_state" and index == 0:
            self.special[node] = ("h_n", nid, kind)
        elif what == "h_n":
            self.doc.set_param(nid, "return", "last")
            self.special[node] = ("h_index", nid, index)
            if index == -1 and not self.doc.resolved_params(nid)["bidirectional"]:
                self.value_of[node] = nid
        elif what is not None or src in self.value_of:
            feeds = [self.value_of[src]] if src in self.value_of else [nid]
            self.value_of[node] = self.unknown(f"indexing [{index}]", feeds)

    def _bidirectional_last(self, parts: Any) -> str | None:
        if not isinstance(parts, list | tuple) or len(parts) != 2:
            return None
        found = [self.special.get(p, (None, None, None)) for p in parts]
        if all(f[0] == "h_index" for f in found) and found[0][1] == found[1][1] \
                and [f[2] for f in found] == [-2, -1]:
            return found[0][1]
        return None

    def output(self, node: Any) -> None:
        results = node.args[0]
        results = list(results) if isinstance(results, list | tuple) else [results]
        for i, r in enumerate(results):
            src = self.inputs_of([r])
            if src:
                self.add("Output", {}, src[:1], "loss" if len(results) == 1 else f"loss{i + 1}")

    # --- blocks: a submodule class used more than once ---------------------------------------------------
    def scope_of(self, node: Any) -> list[str]:
        """The qualified names of the user's own modules (not torch.nn's) an fx node runs inside,
        outermost first; a call of such a module kept whole is not inside itself."""
        stack = node.meta.get("nn_module_stack") or {}
        out = []
        for qualname, (_path, cls) in stack.items():
            cls = cls if isinstance(cls, type) else type(self.modules.get(qualname))
            if qualname and not cls.__module__.startswith("torch.") and qualname != node.target:
                out.append(qualname)
                self.classes[qualname] = cls
        return out

    def make_blocks(self) -> None:
        """Every instance of a module class used more than once becomes a block instance (innermost
        first); instances alike in structure share one definition named after the class, the settings
        they differ in become its parameters, and a run of equal instances in a row one instance that
        repeats."""
        from app.document import blocks as B

        counts: dict[type, int] = {}
        for cls in self.classes.values():
            counts[cls] = counts.get(cls, 0) + 1
        chosen = [q for q, cls in self.classes.items() if counts[cls] > 1]
        made: dict[str, str] = {}  # instance qualname -> its definition (one each, until merged)
        for q in sorted(chosen, key=lambda q: -q.count(".")):  # innermost first
            ids = [nid for nid in self.doc.nodes if q in self.scope.get(nid, ())]
            if not ids or any(self.doc.nodes[n].type in ("Input", "Output") for n in ids):
                continue
            quals = [self.qual[n] for n in ids if n in self.qual]
            if len(quals) != len(set(quals)):  # the module runs twice: one instance can't hold both calls
                continue
            try:
                inst = B.group(self.doc, ids, name=f"tmp_{len(made)}")
            except DocumentError:  # it stays a run of layers: still the same computation
                continue
            d = self.doc.blocks[self.doc.nodes[inst].params["block"]]
            self._localize(d.graph, q)
            new = self._id(q, "block")
            self.doc.rename_node(inst, new)
            self.qual[new] = q
            self.scope[new] = [s for s in self.scope[ids[0]] if q.startswith(s + ".")]
            made[q] = d.name
        if not made:
            return
        self._merge_definitions(made)
        for graph in [self.doc, *(d.graph for d in self.doc.blocks.values())]:
            self._repeat_runs(graph)

    def _localize(self, graph: Any, q: str) -> None:
        """Inner ids: the path inside the module (`conv1`, `downsample_0`); a function (add, relu) its fx
        name without fx's counter, numbered in order (`relu`, `relu_2`), so alike instances read alike."""
        from app.document import blocks as B

        layers = [nid for nid in graph.nodes if graph.nodes[nid].type not in B.PORT_TYPES]
        taken = set(graph.nodes) - set(layers)
        wants: dict[str, str] = {}
        q = q.split("@", 1)[0]  # fx names a module's second call `a@1`; its layers are still a.fc
        for nid in layers:
            qual = self.qual.get(nid)
            if qual is not None and qual.startswith(q + "."):
                want = qual[len(q) + 1:].replace(".", "_")
            else:
                want = self.fx_name.get(nid, nid).rstrip("0123456789").rstrip("_") or "node"
            want = base = self._safe(want, "node")
            n = 1
            while want in taken:
                n += 1
                want = f"{base}_{n}"
            taken.add(want)
            wants[nid] = want
        for i, nid in enumerate(layers):  # through ids nobody has, so no rename meets a taken one
            graph.rename_node(nid, f"__import_{i}")
        for i, nid in enumerate(layers):
            graph.rename_node(f"__import_{i}", wants[nid])

    @staticmethod
    def _safe(want: str, prefix: str) -> str:
        want = "".join(c if c.isalnum() or c == "_" else "_" for c in want)[:60]
        return want if want and (want[0].isalpha() or want[0] == "_") else prefix + want

    def _merge_definitions(self, made: Mapping[str, str]) -> None:
        """One definition per class and kind of structure; differing settings become block parameters."""
        import networkx as nx

        from app.document import blocks as B

        by_class: dict[type, list[str]] = {}
        for q in made:
            by_class.setdefault(self.classes[q], []).append(q)
        inner = nx.DiGraph()  # class A before class B when an A sits inside a B
        inner.add_nodes_from(by_class)
        for q in made:
            for p in made:
                if q.startswith(p + ".") and self.classes[q] is not self.classes[p]:
                    inner.add_edge(self.classes[q], self.classes[p])
        try:
            order = list(nx.topological_sort(inner))
        except nx.NetworkXUnfeasible:
            order = sorted(by_class, key=lambda c: -max(q.count(".") for q in by_class[c]))
        root = self.doc
        for cls in order:
            groups: dict[tuple, list[str]] = {}
            for q in by_class[cls]:
                groups.setdefault(self._structure(root.blocks[made[q]]), []).append(made[q])
            for k, names in enumerate(groups.values()):
                base = self._safe(cls.__name__, "block") + (f"_{k + 1}" if k else "")
                final = B.fresh_block_name(root, base)
                keep = root.blocks[names[0]]
                values = [self._settings(root.blocks[n]) for n in names]
                varying: dict[tuple, list[tuple[str, str]]] = {}
                for slot in values[0]:
                    vector = tuple(repr(v[slot]) for v in values)
                    if len(set(vector)) > 1:
                        varying.setdefault(vector, []).append(slot)
                params: dict[str, list[Any]] = {}
                taken_names = [slot[1] for slots in varying.values() for slot in slots[:1]]
                for slots in varying.values():
                    node_id, param = slots[0]
                    pname = param if taken_names.count(param) == 1 else f"{node_id}_{param}"
                    pname = self._safe(pname, "p")
                    if pname in ("block", "repeat") or pname in params:
                        pname = f"{slots[0][0]}_{pname}"
                    for node_id, param in slots:
                        B.expose_param(root, names[0], pname, node_id, param)
                    params[pname] = [v[slots[0]] for v in values]
                B.rename_block(root, names[0], final)
                for i, name in enumerate(names):
                    (owner, nid), = B.instances_of(root, name if i else final)
                    graph = root if owner is None else root.blocks[owner].graph
                    node = graph.nodes[nid]
                    node.params["block"] = final
                    for pname, vals in params.items():
                        if vals[i] != keep.params[pname].default:
                            node.params[pname] = vals[i]
                    if i:
                        del root.blocks[name]

    @staticmethod
    def _structure(d: Any) -> tuple:
        """What two instances must share to be one definition: nodes, their types (and which block), wires."""
        nodes = tuple((n.id, n.type, n.params.get("block") if n.type == "Block" else None)
                      for n in d.graph.nodes.values())
        edges = tuple((e.src, e.src_port, e.dst, e.dst_port) for e in d.graph.edges)
        return nodes, edges

    @staticmethod
    def _settings(d: Any) -> dict[tuple[str, str], Any]:
        """(node, parameter) -> value for every parameter of every layer inside (defaults filled in)."""
        out: dict[tuple[str, str], Any] = {}
        for n in d.graph.nodes.values():
            if n.type in ("BlockInput", "BlockOutput"):
                continue
            for key, value in d.graph.resolved_params(n.id).items():
                if key != "block":
                    out[(n.id, key)] = value
        return out

    def _repeat_runs(self, graph: Any) -> None:
        """Instances of one definition with equal settings, each feeding only the next: one instance that
        repeats. When the run is the copies of an nn.Sequential, the instance takes its name (`layer1`), so
        the weights read `layer1.0.conv1.weight` as in PyTorch."""
        root = self.doc
        ids = list(graph.nodes)
        done: set[str] = set()
        for start in ids:
            if start in done or start not in graph.nodes or graph.nodes[start].type != "Block":
                continue
            node = graph.nodes[start]
            d = root.blocks[node.params["block"]]
            if len(d.input_ports()) != 1 or len(d.output_ports()) != 1 or node.params.get("repeat", 1) != 1:
                continue
            run = [start]
            while True:
                out = graph.outgoing(run[-1])
                if len(out) != 1:
                    break
                nxt = graph.nodes[out[0].dst]
                if nxt.type != "Block" or nxt.params != node.params or len(graph.incoming(nxt.id)) != 1:
                    break
                run.append(nxt.id)
            done |= set(run)
            if len(run) < 2:
                continue
            for nid in run[1:]:
                removed = graph.outgoing(nid)
                graph.remove_node(nid)
            for e in removed:
                graph.connect(start, e.src_port, e.dst, e.dst_port)
            graph.set_param(start, "repeat", len(run))
            # the copies of an nn.Sequential (layer1_0, layer1_1): the instance takes its name, layer1
            base = start[:-2] if start.endswith("_0") else ""
            if base and run == [f"{base}_{i}" for i in range(len(run))] and base not in graph.nodes:
                graph.rename_node(start, base)

    def layout(self) -> None:
        """Columns by depth from the inputs, rows in the order nodes were made; inside each block too."""
        import networkx as nx

        for graph in [self.doc, *(d.graph for d in self.doc.blocks.values())]:
            dag = nx.DiGraph()
            dag.add_nodes_from(graph.nodes)
            dag.add_edges_from((e.src, e.dst) for e in graph.edges)
            depth: dict[str, int] = {}
            for nid in nx.topological_sort(dag):
                depth[nid] = 1 + max((depth[p] for p in dag.predecessors(nid)), default=-1)
            rows: dict[int, int] = {}
            for nid in graph.nodes:
                d = depth.get(nid, 0)
                graph.move_node(nid, [d * _LAYER_SPACING[0], rows.get(d, 0) * _LAYER_SPACING[1]])
                rows[d] = rows.get(d, 0) + 1


def import_module(module: Any, input_shape: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
                  *, training: Mapping[str, Any] | None = None, keep_whole: Sequence[type] = ()) -> Document:
    """A torch nn.Module (or its class, built without arguments) as a document: one node per layer
    the catalogue knows, `Unknown` nodes for the rest. `input_shape` is one sample's shape.
    Custom submodules are traced through; those of the `keep_whole` classes become one node each."""
    try:
        import torch.fx
    except ImportError:
        raise ImportErrorInUserTerms("importing a PyTorch model needs torch installed") from None
    if isinstance(module, type):
        module = module()
    try:
        traced = torch.fx.GraphModule(module, _Tracer(tuple(keep_whole)).trace(module))
    except Exception as exc:  # fx explains what it could not follow (data-dependent control flow, ...)
        raise ImportErrorInUserTerms(f"torch.fx can't trace {type(module).__name__}: {exc}") from None
    doc = _Importer(module).run(traced, input_shape)
    if training:
        for key, value in training.items():
            doc.set_training(key, value)
    return doc


class _Tracer:
    """torch.fx's tracer, keeping the `keep_whole` module classes as single calls."""

    def __new__(cls, keep_whole: tuple[type, ...]) -> Any:
        import torch.fx

        class Tracer(torch.fx.Tracer):
            def is_leaf_module(self, m: Any, qualname: str) -> bool:
                return isinstance(m, keep_whole) or super().is_leaf_module(m, qualname)

        return Tracer()


def import_target(target: str, input_shape: Sequence[int] | None = None) -> Document:
    """`model.py:ClassName` -> document. A script exported by Wiregrad also brings back its input
    shape, loss, dataset and training settings (its INPUT_SHAPE, build_loss, DATASET, ...)."""
    cls = load_module_class(target)
    owner = sys.modules.get(cls.__module__)
    if input_shape is None and owner is not None and hasattr(owner, "INPUT_SHAPE"):
        input_shape = tuple(owner.INPUT_SHAPE)
    doc = import_module(cls, input_shape)
    if owner is not None:
        _settings_from_script(doc, owner)
    return doc


_SCRIPT_SETTINGS = {"SEED": "seed", "EPOCHS": "epochs", "BATCH_SIZE": "batch_size", "GRAD_CLIP": "grad_clip",
                    "ACCUMULATION_STEPS": "grad_accumulation", "AMP": "amp", "LEARNING_RATE": "optimizer.lr"}


def _settings_from_script(doc: Document, owner: Any) -> None:
    """Read back what an exported script records: plain settings, the dataset, loss and optimiser."""
    import torch

    for const, path in _SCRIPT_SETTINGS.items():
        if hasattr(owner, const):
            doc.set_training(path, getattr(owner, const))
    dataset = getattr(owner, "DATASET", None)
    if isinstance(dataset, dict):
        spec = {k: v for k, v in dataset.items() if k != "val_fraction"}
        if spec.get("name") == "digits":
            spec.pop("path", None)  # the built-in file, wherever Wiregrad is installed
        doc.set_training("dataset", spec)
        if "val_fraction" in dataset:
            doc.set_training("val_fraction", dataset["val_fraction"])
    if callable(getattr(owner, "build_loss", None)):
        loss = owner.build_loss()
        outputs = [n for n in doc.nodes.values() if n.type == "Output"]
        losses = loss if isinstance(loss, list) else [loss]
        for node, fn in zip(outputs, losses):
            spec = get_spec("Output")
            values = {"loss": type(fn).__name__, **{p.name: getattr(fn, p.name) for p in spec.params
                                                     if p.name != "loss" and hasattr(fn, p.name)}}
            for name, value in _checked("Output", values).items():
                doc.set_param(node.id, name, value)
    if callable(getattr(owner, "build_optimizer", None)):
        opt = owner.build_optimizer([torch.nn.Parameter(torch.zeros(1))], 1e-3)
        kind = type(opt).__name__
        doc.set_training("optimizer.type", kind)
        group = opt.param_groups[0]
        for name in OPTIMIZER_OPTIONS.get(kind, ()):
            if name in group:
                value = list(group[name]) if isinstance(group[name], tuple) else group[name]
                doc.set_training(f"optimizer.{name}", value)


__all__ = ["import_module", "import_target", "load_module_class"]
