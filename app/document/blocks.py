"""Blocks: a group of layers defined once in a document and used by any number of instances.

A *definition* (`BlockDef`) is a small graph of its own (a `Document` whose `root` is the document
that holds it) whose `BlockInput` and `BlockOutput` nodes are the block's ports, named by their ids.
An *instance* is a node of type `Block` whose `block` parameter names the definition; it may repeat
the definition `repeat` times in series (each copy with its own weights) and set the parameters the
definition exposes (`ExposedParam`: one value written into one or more inner nodes' parameters).
Definitions may use other definitions, never themselves.

Everything downstream of the canvas (shape inference, validation, the training check, the compiler,
the exporters) reads the *expanded* graph, `expand(doc)`: every instance replaced by its layers, with
ids that are paths (`stage2/block1/conv2`; a repeated instance numbers its copies, `stage2/0/conv1`)
and every port a `BlockPort` node that passes its input on. The compiler nests one engine module per
instance along those paths, so state-dict keys read `stage2.0.conv1.weight`, as a PyTorch model of
nested modules (an `nn.Sequential` for a repeat) names them.
"""
from __future__ import annotations

import copy as _copy
import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .catalogue import NodeSpec, ParamSpec, PortSpec, check_json_value, get_spec
from .errors import DocumentError, ParamError, Problem

if TYPE_CHECKING:
    from .document import Document

SEP = "/"
MAX_EXPANDED_NODES = 100_000
MAX_BLOCKS = 1_000
COLOR_PATTERN = re.compile(r"#[0-9a-fA-F]{6}\Z")
DEFAULT_COLOR = "#5b8def"
PORT_TYPES = ("BlockInput", "BlockOutput")
_DEF_KEYS = {"nodes", "edges", "params", "color", "description"}


# ---------------------------------------------------------------------------------------------
# records
# ---------------------------------------------------------------------------------------------
@dataclass
class ExposedParam:
    """A parameter of the block, set per instance: its value goes to each (inner node, parameter) in
    `targets`; its kind and range are the first target's."""

    targets: list[tuple[str, str]]
    default: Any
    help: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"targets": [list(t) for t in self.targets],
                             "default": _copy.deepcopy(self.default)}
        if self.help:
            d["help"] = self.help
        return d


@dataclass
class BlockDef:
    """One definition: its graph (ports are its BlockInput/BlockOutput nodes), exposed parameters,
    colour and description."""

    name: str
    graph: Document
    params: dict[str, ExposedParam] = field(default_factory=dict)
    color: str = DEFAULT_COLOR
    description: str = ""

    def input_ports(self) -> list[str]:
        return [n.id for n in self.graph.nodes.values() if n.type == "BlockInput"]

    def output_ports(self) -> list[str]:
        return [n.id for n in self.graph.nodes.values() if n.type == "BlockOutput"]

    def layers(self) -> list[str]:
        """The ids of its nodes that are not ports."""
        return [n.id for n in self.graph.nodes.values() if n.type not in PORT_TYPES]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "nodes": [n.to_dict() for n in self.graph.nodes.values()],
            "edges": [e.to_dict() for e in self.graph.edges],
        }
        if self.params:
            d["params"] = {k: p.to_dict() for k, p in self.params.items()}
        d["color"] = self.color
        if self.description:
            d["description"] = self.description
        return d


def has_blocks(doc: Document) -> bool:
    return any(n.type == "Block" for n in doc.nodes.values())


def uses(d: BlockDef) -> list[str]:
    """The names of the definitions this one's instances name, in node order."""
    names = [n.params.get("block") for n in d.graph.nodes.values() if n.type == "Block"]
    return [n for n in names if isinstance(n, str)]


def block_cycle(blocks: Mapping[str, BlockDef], start: str) -> list[str] | None:
    """A chain of definitions from `start` back to itself (`[a, b, a]`), or None."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        name, path = stack.pop()
        d = blocks.get(name)
        if d is None:
            continue
        for used in uses(d):
            if used == start:
                return [*path, used]
            if used not in seen:
                seen.add(used)
                stack.append((used, [*path, used]))
    return None


def contains(blocks: Mapping[str, BlockDef], name: str, target: str) -> bool:
    """Whether an instance of `name` would hold `target` (itself, or through the blocks it uses)."""
    stack, seen = [name], set()
    while stack:
        current = stack.pop()
        if current == target:
            return True
        if current in seen or current not in blocks:
            continue
        seen.add(current)
        stack.extend(uses(blocks[current]))
    return False


# ---------------------------------------------------------------------------------------------
# the spec of an instance: ports and parameters from its definition
# ---------------------------------------------------------------------------------------------
def exposed_spec(root: Document, d: BlockDef, pname: str, _depth: int = 0) -> ParamSpec | None:
    """The ParamSpec of an exposed parameter: the first target's, renamed, with the block's default."""
    ep = d.params.get(pname)
    if ep is None or not ep.targets or _depth > 64:
        return None
    node_id, param = ep.targets[0]
    node = d.graph.nodes.get(node_id)
    if node is None:
        return None
    if node.type == "Block":
        inner = root.blocks.get(node.params.get("block"))
        if inner is None:
            return None
        base = exposed_spec(root, inner, param, _depth + 1)
        if base is None and param == "repeat":
            base = get_spec("Block").param("repeat")
    else:
        base = get_spec(node.type).param(param)
    if base is None:
        return None
    return dataclasses.replace(base, name=pname, default=ep.default, help=ep.help or base.help, ctor=False,
                               only_when=None)


def instance_spec(root: Document, params: Mapping[str, Any]) -> NodeSpec:
    """The NodeSpec of a Block node: its definition's ports, `block`, `repeat` and the exposed parameters.
    An instance of a definition the document lacks has no ports."""
    base = get_spec("Block")
    name = params.get("block")
    d = root.blocks.get(name) if isinstance(name, str) else None
    choices = tuple(root.blocks) or ("",)
    block_param = ParamSpec("block", "choice", name if d is not None else choices[0], choices=choices,
                            ctor=False, help="The definition this instance uses")
    if d is None:
        return dataclasses.replace(base, params=(block_param, base.param("repeat")))
    exposed = tuple(s for s in (exposed_spec(root, d, p) for p in d.params) if s is not None)
    return dataclasses.replace(
        base,
        description=d.description or f"Block {d.name}",
        inputs=tuple(PortSpec(p) for p in d.input_ports()),
        outputs=tuple(d.output_ports()),
        params=(block_param, base.param("repeat"), *exposed),
    )


def check_instance_params(root: Document, node_id: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The stored form of a Block node's params, each checked against its definition; DocumentError."""
    name = params.get("block")
    if not isinstance(name, str) or name not in root.blocks:
        known = ", ".join(root.blocks) or "none"
        raise DocumentError(f"node {node_id}: uses block {name!r}, which this document does not define "
                            f"(its blocks: {known})")
    spec = instance_spec(root, params)
    out: dict[str, Any] = {}
    for key, value in params.items():
        try:
            out[key] = spec.check_param(key, value)
        except ParamError as exc:
            raise DocumentError(f"node {node_id}: {exc}") from None
    return out


# ---------------------------------------------------------------------------------------------
# parsing and checking definitions
# ---------------------------------------------------------------------------------------------
def parse_blocks(root: Document, raw: Any, parse_graph) -> dict[str, BlockDef]:
    """The `blocks` object of a document: {name: {nodes, edges, params, color, description}}.
    `parse_graph(data, where)` parses one definition's nodes and edges into a Document."""
    from .document import ID_PATTERN, _json_type, _short, check_fields

    if not isinstance(raw, dict):
        raise DocumentError(f"'blocks' must be an object, got {_json_type(raw)}")
    if len(raw) > MAX_BLOCKS:
        raise DocumentError(f"the document defines {len(raw)} blocks; at most {MAX_BLOCKS} are allowed")
    blocks: dict[str, BlockDef] = {}
    for name, body in raw.items():
        if not isinstance(name, str) or not ID_PATTERN.match(name):
            raise DocumentError(f"block name {_short(name)} is not allowed: use letters, digits and _, "
                                "starting with a letter or _, at most 64 characters")
        where = f"block {name}"
        if not isinstance(body, dict):
            raise DocumentError(f"{where} must be an object, got {_json_type(body)}")
        check_fields(body, _DEF_KEYS, f"{where}: unknown field")
        graph = parse_graph({"nodes": body.get("nodes", []), "edges": body.get("edges", [])}, where)
        graph._root = root
        graph._block = name
        color = body.get("color", DEFAULT_COLOR)
        if not isinstance(color, str) or not COLOR_PATTERN.match(color):
            raise DocumentError(f"{where}: color must look like \"#4a90d9\", got {_short(color)}")
        description = body.get("description", "")
        if not isinstance(description, str) or len(description) > 2_000:
            raise DocumentError(f"{where}: description must be a text of at most 2000 characters")
        params = _parse_exposed(body.get("params", {}), where)
        blocks[name] = BlockDef(name, graph, params, color, description)
    return blocks


def _parse_exposed(raw: Any, where: str) -> dict[str, ExposedParam]:
    from .document import ID_PATTERN, _json_type, _short

    if not isinstance(raw, dict):
        raise DocumentError(f"{where}: 'params' must be an object, got {_json_type(raw)}")
    out: dict[str, ExposedParam] = {}
    for pname, body in raw.items():
        if not isinstance(pname, str) or not ID_PATTERN.match(pname) or pname in ("block", "repeat"):
            raise DocumentError(f"{where}: parameter name {_short(pname)} is not allowed")
        here = f"{where}: parameter {pname}"
        if not isinstance(body, dict) or not set(body) <= {"targets", "default", "help"} or \
                "targets" not in body:
            raise DocumentError(
                f'{here} must look like {{"targets": [[node, parameter], ...], "default": value}}')
        targets = body["targets"]
        if not isinstance(targets, list) or not 1 <= len(targets) <= 256 or not all(
                isinstance(t, list) and len(t) == 2 and all(isinstance(x, str) for x in t) for t in targets):
            raise DocumentError(f"{here}: 'targets' must be a list of [node id, parameter name] pairs")
        help_ = body.get("help", "")
        if not isinstance(help_, str) or len(help_) > 1_000:
            raise DocumentError(f"{here}: 'help' must be a short text")
        default = body.get("default")
        try:
            check_json_value(default, f"{here} default")
        except ParamError as exc:
            raise DocumentError(str(exc)) from None
        out[pname] = ExposedParam([(t[0], t[1]) for t in targets], _copy.deepcopy(default), help_)
    return out


def check_blocks(root: Document) -> None:
    """What needs every definition known: no definition uses itself, exposed parameters point at
    parameters that exist and their defaults fit, and instances inside definitions are valid."""
    for name in root.blocks:
        cycle = block_cycle(root.blocks, name)
        if cycle is not None:
            raise DocumentError(f"block {name} uses itself: {' → '.join(cycle)}")
    for name, d in root.blocks.items():
        where = f"block {name}"
        for pname, ep in d.params.items():
            for node_id, param in ep.targets:
                node = d.graph.nodes.get(node_id)
                if node is None:
                    raise DocumentError(f"{where}: parameter {pname} sets {node_id}.{param}, but the block "
                                        f"has no node {node_id}")
                spec = d.graph.node_spec(node_id)
                if spec.param(param) is None:
                    raise DocumentError(f"{where}: parameter {pname} sets {node_id}.{param}, but {node.type} "
                                        f"has no parameter '{param}'")
            spec = exposed_spec(root, d, pname)
            if spec is not None:
                try:
                    ep.default = spec.check(ep.default)
                except ParamError as exc:
                    raise DocumentError(f"{where}: default of parameter {exc}") from None
        for node in d.graph.nodes.values():
            if node.type in ("Input", "Output"):
                raise DocumentError(f"{where}: node {node.id}: the graph's {node.type} stays outside blocks; "
                                    "a block's ports are Block Input and Block Output nodes")
            if node.type == "Block":
                node.params = check_instance_params(root, f"{node.id} (in {where})", node.params)


# ---------------------------------------------------------------------------------------------
# expansion: the graph every consumer below the canvas reads
# ---------------------------------------------------------------------------------------------
class _TooBig(Exception):
    pass


def expanded_size(root: Document, graph: Document | None = None, _memo: dict[Any, int] | None = None,
                  _chain: tuple[str, ...] = (), _over: Mapping[str, Mapping[str, Any]] | None = None) -> int:
    """How many nodes `expand` would make (ports included); a definition that uses itself counts 1. The
    values instances pass in count as `expand` uses them: an exposed `repeat` multiplies too."""
    memo = {} if _memo is None else _memo
    over = _over or {}
    total = 0
    for node in (graph or root).nodes.values():
        if node.type != "Block":
            total += 1
            continue
        params = {**node.params, **over.get(node.id, {})}
        name = params.get("block")
        d = root.blocks.get(name) if isinstance(name, str) else None
        if d is None or name in _chain:
            total += 1
            continue
        inner = passed_values(d, params)
        key = (name, repr(inner))
        if key not in memo:
            memo[key] = expanded_size(root, d.graph, memo, (*_chain, name), inner)
        repeat = params.get("repeat", 1)
        total += memo[key] * (repeat if isinstance(repeat, int) and repeat > 0 else 1)
        if total > MAX_EXPANDED_NODES:
            return total
    return total


def passed_values(d: BlockDef, params: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """What an instance with `params` sets on the nodes of its definition `d`: {node id: {param: value}}."""
    inner: dict[str, dict[str, Any]] = {}
    for pname, ep in d.params.items():
        value = params.get(pname, ep.default)
        for target, tparam in ep.targets:
            inner.setdefault(target, {})[tparam] = value
    return inner


def expand(doc: Document) -> Document:
    """The graph with every Block instance replaced by its layers (see the module doc); `doc` itself
    when it has no instances, and an expanded graph as it is. Never raises for a user's mistake: an
    instance that can't expand stays one node, and `problems` of the result say why.

    The result carries `source` (the document), `instances` ({path: definition name}, for every
    instance and every copy of a repeat) and `problems` (Problems pinned to paths)."""
    if getattr(doc, "source", None) is not None or not has_blocks(doc):
        return doc
    from .document import Document

    flat = Document()
    flat.training = doc.training
    flat.view = doc.view
    flat.meta = doc.meta
    flat.source = doc
    flat.instances = {}
    flat.problems = []
    size = expanded_size(doc)
    if size > MAX_EXPANDED_NODES:
        flat.nodes = dict(doc.nodes)
        flat.edges = list(doc.edges)
        biggest = max((n for n in doc.nodes.values() if n.type == "Block"),
                      key=lambda n: expanded_size(doc, _single(doc, n)))
        flat.problems.append(Problem(biggest.id, None, f"the blocks expand to {size:,}+ layers; at most "
                                                      f"{MAX_EXPANDED_NODES:,} can train (lower a repeat)"))
        return flat
    _expand_into(flat, doc, doc, "", {}, ())
    return flat


def _single(root: Document, node) -> Document:
    from .document import Document

    g = Document()
    g.nodes = {node.id: node}
    return g


@dataclass
class _Ends:
    inputs: dict[str, str]  # port name -> the BlockPort's flat id
    outputs: dict[str, str]


def _expand_into(flat: Document, root: Document, graph: Document, prefix: str,
                 overrides: Mapping[str, Mapping[str, Any]], chain: tuple[str, ...]) -> _Ends:
    from .document import Edge, Node

    ends = _Ends({}, {})
    instances: dict[str, tuple[_Ends, _Ends]] = {}  # node id -> (first copy's ends, last copy's ends)
    for node in graph.nodes.values():
        fid = prefix + node.id
        params = {**node.params, **overrides.get(node.id, {})}
        if node.type == "Block":
            got = _expand_instance(flat, root, node, fid, params, chain)
            if got is not None:
                instances[node.id] = got
                continue
            flat.nodes[fid] = Node(fid, "Block", params, list(node.pos), node.name)
            continue
        if node.type in PORT_TYPES and prefix:
            flat.nodes[fid] = Node(fid, "BlockPort", {}, list(node.pos), node.name)
            (ends.inputs if node.type == "BlockInput" else ends.outputs)[node.id] = fid
            continue
        flat.nodes[fid] = Node(fid, node.type, params, list(node.pos), node.name)
    for e in graph.edges:
        if e.src in instances:
            src = instances[e.src][1].outputs.get(e.src_port)
            src_port = "out"
            if src is None:
                flat.problems.append(Problem(prefix + e.src, e.src_port, f"its block has no output port "
                                                                        f"'{e.src_port}' (wired to {e.dst})"))
                continue
        else:
            src, src_port = prefix + e.src, e.src_port
        if e.dst in instances:
            dst = instances[e.dst][0].inputs.get(e.dst_port)
            dst_port = "in"
            if dst is None:
                text = f"its block has no input port '{e.dst_port}' (wired from {e.src})"
                flat.problems.append(Problem(prefix + e.dst, e.dst_port, text))
                continue
        else:
            dst, dst_port = prefix + e.dst, e.dst_port
        flat.edges.append(Edge(src, src_port, dst, dst_port))
    return ends


def _expand_instance(flat: Document, root: Document, node, fid: str, params: Mapping[str, Any],
                     chain: tuple[str, ...]) -> tuple[_Ends, _Ends] | None:
    from .document import Edge

    name = params.get("block")
    d = root.blocks.get(name) if isinstance(name, str) else None
    if d is None:
        flat.problems.append(Problem(fid, None, f"uses block {name!r}, which this document does not define"))
        return None
    if name in chain:
        flat.problems.append(Problem(fid, None, f"block {name} uses itself: {' → '.join((*chain, name))}"))
        return None
    repeat = params.get("repeat", 1)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        repeat = 1
    if repeat > 1 and (len(d.input_ports()) != 1 or len(d.output_ports()) != 1):
        flat.problems.append(Problem(fid, None, f"repeats ×{repeat}, but block {name} has "
                                                f"{len(d.input_ports())} inputs and {len(d.output_ports())} "
                                                "outputs: a repeated block needs one of each"))
        repeat = 1
    inner = passed_values(d, params)
    flat.instances[fid] = name
    copies = []
    for r in range(repeat):
        sub = f"{fid}{SEP}{r}{SEP}" if repeat > 1 else f"{fid}{SEP}"
        if repeat > 1:
            flat.instances[f"{fid}{SEP}{r}"] = name
        copies.append(_expand_into(flat, root, d.graph, sub, inner, (*chain, name)))
    for a, b in zip(copies, copies[1:]):
        (out,), (in_,) = a.outputs.values(), b.inputs.values()
        flat.edges.append(Edge(out, "out", in_, "in"))
    return copies[0], copies[-1]


def passed_in(root: Document, path: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What the instances along `path` (e.g. ["layer2"], or ["stage", "0", "unit"] through a repeat's copy)
    set on the nodes of the definition opened there: {inner node id: {parameter: value}}, from each
    level's exposed parameters (an outer instance's values reach nested blocks' own exposed parameters)."""
    graph, over = root, {}
    parts = list(path)
    while parts:
        node = graph.nodes.get(parts.pop(0))
        if node is None or node.type != "Block":
            return {}
        params = {**node.params, **over.get(node.id, {})}
        d = root.blocks.get(params.get("block"))
        if d is None:
            return {}
        if parts and parts[0].isdigit() and params.get("repeat", 1) > 1:
            parts.pop(0)  # one copy of a repeat: every copy gets the same values
        over = passed_values(d, params)
        graph = d.graph
    return over


def split_path(flat_id: str) -> list[str]:
    return flat_id.split(SEP)


def module_path(flat_id: str) -> str:
    """The engine/PyTorch module path of an expanded node: `stage2/0/conv1` -> `stage2.0.conv1`."""
    return flat_id.replace(SEP, ".")


def top_level(flat_id: str | None) -> str | None:
    """The node of the top-level canvas a path belongs to (an instance, or the node itself)."""
    return None if flat_id is None else flat_id.split(SEP, 1)[0]


def inside(flat_id: str | None, path: Sequence[str]) -> str | None:
    """The node of the block opened at instance path `path` (e.g. ["stage2", "0"]) that `flat_id` is, or
    belongs to; None when it lies elsewhere."""
    if flat_id is None:
        return None
    parts = flat_id.split(SEP)
    n = len(path)
    if len(parts) <= n or parts[:n] != list(path):
        return None
    return parts[n]


# ---------------------------------------------------------------------------------------------
# edits: group, ungroup, make unique (each changes one graph; the editor makes them undoable steps)
# ---------------------------------------------------------------------------------------------
def instance_prefix(name: Any) -> str:
    """What an instance of block `name` is called before its number: `stage` -> stage1, stage2; a name that
    ends in a digit takes a `_` first (`stage2` -> stage2_1, not stage21)."""
    from .document import ID_PATTERN

    if not isinstance(name, str) or not ID_PATTERN.match(name + "_1"):
        return "block"
    return f"{name}_" if name[-1].isdigit() else name


def check_room(root: Document, more: int = 1) -> None:
    """Refuse an edit giving the document more definitions than a file may hold (it would not load)."""
    if len(root.blocks) + more > MAX_BLOCKS:
        raise DocumentError(f"a document can define at most {MAX_BLOCKS} blocks; it has {len(root.blocks)}")


def fresh_block_name(root: Document, base: str = "block") -> str:
    base = re.sub(r"\W", "_", base) or "block"
    if not re.match(r"[A-Za-z_]", base):
        base = f"b_{base}"
    base = base[:56]
    if base not in root.blocks:
        return base
    n = 2
    while f"{base}_{n}" in root.blocks:
        n += 1
    return f"{base}_{n}"


def group(graph: Document, ids: Iterable[str], name: str | None = None, color: str | None = None) -> str:
    """Make the nodes `ids` of `graph` one block: a new definition holding them (the wires that crossed
    the selection's border become its ports: one input per distinct source outside, one output per
    distinct inner output used outside) and one instance in their place. Returns the instance's id.
    One GRAPH_REPLACED event; nothing changes on error."""
    from .document import GRAPH_REPLACED, Document, Edge, Node

    root = graph.root
    chosen = [graph.node(i).id for i in ids]
    if not chosen:
        raise DocumentError("select the nodes to group first")
    keep = set(chosen)
    for nid in chosen:
        t = graph.nodes[nid].type
        if t in ("Input", "Output"):
            raise DocumentError(f"node {nid}: the graph's {t} stays outside blocks")
        if t in PORT_TYPES:
            raise DocumentError(f"node {nid}: a block's own port can't go into a block")
    _refuse_exposed(graph, chosen, "group it")
    check_room(root)
    name = fresh_block_name(root, name or "block")
    order = [nid for nid in graph.nodes if nid in keep]
    inner = Document()
    inner._root = root
    inner._block = name
    for nid in order:
        inner.nodes[nid] = _copy.deepcopy(graph.nodes[nid])
    xs = [graph.nodes[n].pos[0] for n in order]
    ys = [graph.nodes[n].pos[1] for n in order]
    cx, cy = (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2
    in_ports: dict[tuple[str, str], str] = {}
    out_ports: dict[tuple[str, str], str] = {}

    def port_id(prefix: str) -> str:
        n = 1
        candidate = prefix
        while candidate in inner.nodes:
            n += 1
            candidate = f"{prefix}{n}"
        return candidate

    inner_edges: list[Edge] = []
    outer_edges: list[Edge] = []
    instance = graph.fresh_id(instance_prefix(name))
    for e in graph.edges:
        src_in, dst_in = e.src in keep, e.dst in keep
        if src_in and dst_in:
            inner_edges.append(e)
        elif dst_in:
            key = (e.src, e.src_port)
            if key not in in_ports:
                pid = in_ports[key] = port_id("in")
                inner.nodes[pid] = Node(pid, "BlockInput", {},
                                        [min(xs) - 220.0, cy + 90.0 * (len(in_ports) - 1)])
                outer_edges.append(Edge(e.src, e.src_port, instance, pid))
            inner_edges.append(Edge(in_ports[key], "out", e.dst, e.dst_port))
        elif src_in:
            key = (e.src, e.src_port)
            if key not in out_ports:
                pid = out_ports[key] = port_id("out")
                inner.nodes[pid] = Node(pid, "BlockOutput", {},
                                        [max(xs) + 220.0, cy + 90.0 * (len(out_ports) - 1)])
                inner_edges.append(Edge(e.src, e.src_port, pid, "in"))
            outer_edges.append(Edge(instance, out_ports[key], e.dst, e.dst_port))
        else:
            outer_edges.append(e)
    # ports first, then the layers, so the definition reads left to right in the file too
    ports_in = [p for p in inner.nodes if inner.nodes[p].type == "BlockInput"]
    ports_out = [p for p in inner.nodes if inner.nodes[p].type == "BlockOutput"]
    inner.nodes = {k: inner.nodes[k] for k in (*ports_in, *order, *ports_out)}
    inner.edges = inner_edges
    d = BlockDef(name, inner, {}, color or DEFAULT_COLOR, "")
    new_nodes: dict[str, Node] = {}
    placed = False
    for nid, node in graph.nodes.items():
        if nid in keep:
            if not placed:
                new_nodes[instance] = Node(instance, "Block", {"block": name}, [cx, cy])
                placed = True
            continue
        new_nodes[nid] = node
    root.blocks[name] = d
    graph.nodes = new_nodes
    graph.edges = outer_edges
    root._emit_blocks_changed()
    graph._emit(GRAPH_REPLACED, (instance,))
    return instance


def ungroup(graph: Document, instance: str) -> list[str]:
    """Put an instance's layers back in its place (every copy of a repeat, chained; the exposed
    parameters written into them), wired as the instance was. Ids that are taken get fresh ones. The
    definition goes when nothing else uses it. Returns the new ids. One GRAPH_REPLACED event."""
    from .document import GRAPH_REPLACED, MAX_NODES, Edge, Node, first_free_id, id_prefix

    root = graph.root
    node = graph.node(instance)
    if node.type != "Block":
        raise DocumentError(f"node {instance} is not a block")
    d = root.blocks.get(node.params.get("block"))
    if d is None:
        raise DocumentError(f"node {instance}: its block {node.params.get('block')!r} is not defined")
    _refuse_exposed(graph, [instance], "ungroup it")
    params = node.params
    repeat = params.get("repeat", 1)
    if repeat > 1 and (len(d.input_ports()) != 1 or len(d.output_ports()) != 1):
        raise DocumentError(f"node {instance}: a repeated block needs one input and one output")
    values = passed_values(d, params)
    layers = d.layers()
    if len(graph.nodes) - 1 + repeat * len(layers) > MAX_NODES:  # the saved file would not load
        raise DocumentError(f"node {instance}: ungrouping it makes {repeat * len(layers):,} nodes, more than "
                            f"a graph can hold ({MAX_NODES:,}): lower its repeat first")
    lx = [d.graph.nodes[n].pos[0] for n in layers] or [0.0]
    ly = [d.graph.nodes[n].pos[1] for n in layers] or [0.0]
    width = max(lx) - min(lx) + 240.0
    dx0 = node.pos[0] - (min(lx) + max(lx)) / 2
    dy = node.pos[1] - (min(ly) + max(ly)) / 2
    taken = set(graph.nodes) - {instance}
    added: list[Node] = []
    copies: list[dict[str, str]] = []
    for r in range(repeat):
        ids: dict[str, str] = {}
        for nid in layers:
            inner = d.graph.nodes[nid]
            new_id = nid if nid not in taken else first_free_id(id_prefix(inner.type, inner.params), taken)
            taken.add(new_id)
            ids[nid] = new_id
            p = {**_copy.deepcopy(inner.params), **_copy.deepcopy(values.get(nid, {}))}
            shift = dx0 + (r - (repeat - 1) / 2) * width
            added.append(Node(new_id, inner.type, p, [inner.pos[0] + shift, inner.pos[1] + dy], inner.name))
        copies.append(ids)

    def feeds(port: str) -> list[tuple[str, str]]:  # what a block input reaches inside, per copy map
        return [(e.dst, e.dst_port) for e in d.graph.edges if e.src == port]

    def source(port: str) -> tuple[str, str] | None:  # what reaches a block output inside
        for e in d.graph.edges:
            if e.dst == port:
                return e.src, e.src_port
        return None

    inner_edges: list[Edge] = []
    for r, ids in enumerate(copies):
        for e in d.graph.edges:
            if e.src in ids and e.dst in ids:
                inner_edges.append(Edge(ids[e.src], e.src_port, ids[e.dst], e.dst_port))
        if r > 0:  # chain: what fed the previous copy's output feeds this copy's input
            (in_port,), (out_port,) = d.input_ports(), d.output_ports()
            src = source(out_port)
            prev = copies[r - 1]
            if src is not None and src[0] in prev:
                for dst, dst_port in feeds(in_port):
                    if dst in ids:
                        inner_edges.append(Edge(prev[src[0]], src[1], ids[dst], dst_port))
    edges: list[Edge] = []
    placed = False
    for e in graph.edges:
        if instance not in (e.src, e.dst):
            edges.append(e)
            continue
        # the layers' own wires follow the first wire into the instance (the order a chain was drawn in)
        if e.dst == instance:
            for dst, dst_port in feeds(e.dst_port):
                if dst in copies[0]:
                    edges.append(Edge(e.src, e.src_port, copies[0][dst], dst_port))
                elif dst in d.output_ports():  # a port wired straight through
                    for e2 in graph.edges:
                        if e2.src == instance and e2.src_port == dst:
                            edges.append(Edge(e.src, e.src_port, e2.dst, e2.dst_port))
        elif not placed:
            edges.extend(inner_edges)
            placed = True
        if e.dst != instance:
            src = source(e.src_port)
            if src is not None and src[0] in copies[-1]:
                edges.append(Edge(copies[-1][src[0]], src[1], e.dst, e.dst_port))
            continue
        if not placed:
            edges.extend(inner_edges)
            placed = True
    if not placed:
        edges.extend(inner_edges)
    new_nodes: dict[str, Node] = {}
    for nid, n in graph.nodes.items():
        if nid == instance:
            for a in added:
                new_nodes[a.id] = a
            continue
        new_nodes[nid] = n
    graph.nodes = new_nodes
    graph.edges = _unique(edges)
    if not _used_anywhere(root, d.name):
        del root.blocks[d.name]
        root._emit_blocks_changed()
    graph._emit(GRAPH_REPLACED, tuple(a.id for a in added))
    return [a.id for a in added]


def _unique(edges: list) -> list:
    seen: set = set()
    out = []
    for e in edges:
        if e not in seen:
            seen.add(e)
            out.append(e)
    return out


def _used_anywhere(root: Document, name: str) -> bool:
    graphs = [root, *(d.graph for d in root.blocks.values())]
    return any(n.type == "Block" and n.params.get("block") == name for g in graphs for n in g.nodes.values())


def instances_of(root: Document, name: str) -> list[tuple[str | None, str]]:
    """(definition holding it or None for the top level, node id) of every instance of `name`."""
    out: list[tuple[str | None, str]] = []
    for owner, g in [(None, root), *((k, d.graph) for k, d in root.blocks.items())]:
        out.extend((owner, n.id) for n in g.nodes.values()
                   if n.type == "Block" and n.params.get("block") == name)
    return out


def make_unique(graph: Document, instance: str, name: str | None = None) -> str:
    """Give one instance a definition of its own (a copy), so editing it leaves the others alone.
    Returns the new definition's name."""
    from .document import PARAM_CHANGED

    root = graph.root
    node = graph.node(instance)
    if node.type != "Block" or node.params.get("block") not in root.blocks:
        raise DocumentError(f"node {instance} is not an instance of a defined block")
    old = root.blocks[node.params["block"]]
    check_room(root)
    new = fresh_block_name(root, name or old.name)
    root.blocks[new] = copy_def(root, old, new)
    node.params["block"] = new
    root._emit_blocks_changed()
    graph._emit(PARAM_CHANGED, (instance,), key="block")
    return new


@dataclass
class Detached:
    """What removing a node from a definition took elsewhere: exposed-parameter targets (and parameters
    left with none, with each instance's value) and the wires on a removed port of every instance."""

    targets: list[tuple[str, int, tuple[str, str]]] = field(default_factory=list)
    params: list[tuple[int, str, ExposedParam, list[tuple[Document, str, Any]]]] = field(default_factory=list)
    wires: list[tuple[Document, int, Any]] = field(default_factory=list)


def _graph_of(root: Document, owner: str | None) -> Document:
    return root if owner is None else root.blocks[owner].graph


def detach(graph: Document, node_id: str) -> Detached:
    """Called by `Document.remove_node` inside a definition, before the node goes."""
    from .document import EDGE_REMOVED

    root, name = graph.root, graph._block
    d = root.blocks.get(name)
    out = Detached()
    if d is None:
        return out
    node = graph.nodes[node_id]
    for pname, ep in list(d.params.items()):
        for i in reversed(range(len(ep.targets))):
            if ep.targets[i][0] == node_id:
                out.targets.append((pname, i, ep.targets.pop(i)))
        if not ep.targets:  # nothing left to set: the parameter goes, and each instance's value with it
            values = []
            for owner, nid in instances_of(root, name):
                g = _graph_of(root, owner)
                if pname in g.nodes[nid].params:
                    values.append((g, nid, g.nodes[nid].params.pop(pname)))
            out.params.append((list(d.params).index(pname), pname, d.params.pop(pname), values))
    if node.type in PORT_TYPES:
        for owner, nid in instances_of(root, name):
            g = _graph_of(root, owner)
            for i in reversed(range(len(g.edges))):
                e = g.edges[i]
                on_port = (e.dst == nid and e.dst_port == node_id) if node.type == "BlockInput" else (
                    e.src == nid and e.src_port == node_id)
                if on_port:
                    out.wires.append((g, i, e))
                    del g.edges[i]
                    g._emit(EDGE_REMOVED, (e.src, e.dst), edge=e)
    return out


def reattach(graph: Document, detached: Detached) -> None:
    """Undo `detach` (called by `Document.restore_node`)."""
    from .document import EDGE_ADDED

    d = graph.root.blocks.get(graph._block)
    if d is None:
        return
    for index, pname, ep, values in reversed(detached.params):
        items = list(d.params.items())
        items.insert(min(index, len(items)), (pname, ep))
        d.params = dict(items)
        for g, nid, value in values:
            if nid in g.nodes:
                g.nodes[nid].params[pname] = value
    for pname, i, target in reversed(detached.targets):
        if pname in d.params:
            d.params[pname].targets.insert(min(i, len(d.params[pname].targets)), target)
    for g, i, e in reversed(detached.wires):
        g.edges.insert(min(i, len(g.edges)), e)
        g._emit(EDGE_ADDED, (e.src, e.dst), edge=e)


def renamed_inside(graph: Document, old: str, new: str) -> None:
    """Called by `Document.rename_node` inside a definition: exposed params and, for a port, the wires on
    that port of every instance follow the new id."""
    from .document import Edge

    root, name = graph.root, graph._block
    d = root.blocks.get(name)
    if d is None:
        return
    for ep in d.params.values():
        ep.targets = [(new if t == old else t, p) for t, p in ep.targets]
    kind = graph.nodes[new].type
    if kind not in PORT_TYPES:
        return
    for owner, nid in instances_of(root, name):
        g = _graph_of(root, owner)
        edges = []
        for e in g.edges:
            if kind == "BlockInput" and e.dst == nid and e.dst_port == old:
                e = Edge(e.src, e.src_port, e.dst, new)
            elif kind == "BlockOutput" and e.src == nid and e.src_port == old:
                e = Edge(e.src, new, e.dst, e.dst_port)
            edges.append(e)
        g.edges = edges


def copy_def(root: Document, d: BlockDef, name: str) -> BlockDef:
    g = d.graph.copy()
    g._root = root
    g._block = name
    return BlockDef(name, g, _copy.deepcopy(d.params), d.color, d.description)


def rename_block(root: Document, old: str, new: str) -> None:
    """Rename a definition and every instance's reference to it."""
    from .document import ID_PATTERN

    if old not in root.blocks:
        raise DocumentError(f"there is no block {old!r}")
    if not isinstance(new, str) or not ID_PATTERN.match(new):
        raise DocumentError(f"block name {new!r} is not allowed: use letters, digits and _")
    if new in root.blocks and new != old:
        raise DocumentError(f"there is already a block {new}")
    for owner, nid in instances_of(root, old):
        g = root if owner is None else root.blocks[owner].graph
        g.nodes[nid].params["block"] = new
    root.blocks = {(new if k == old else k): v for k, v in root.blocks.items()}
    root.blocks[new].name = new
    root.blocks[new].graph._block = new
    root._emit_blocks_changed()


# ---------------------------------------------------------------------------------------------
# undo support: the editor's one-step commands (group, ungroup, make unique, expose) put a graph
# back exactly as it was
# ---------------------------------------------------------------------------------------------
@dataclass
class GraphState:
    """One graph's nodes and wires and the root's definitions, as they were. The nodes are copies;
    the definitions are the BlockDef objects themselves, so an undo step that still holds a
    definition's graph (an edit made inside an opened block) edits the graph that is in use."""

    nodes: list[Any]
    edges: list[Any]
    blocks: dict[str, BlockDef]
    exposed: dict[str, dict[str, ExposedParam]]
    instances: dict[tuple[str | None, str], dict[str, Any]]  # every instance's params, wherever it is
    colors: dict[str, str] = field(default_factory=dict)


def snapshot(graph: Document) -> GraphState:
    root = graph.root
    instances = {(owner, n.id): _copy.deepcopy(n.params)
                 for owner, g in [(None, root), *((k, d.graph) for k, d in root.blocks.items())]
                 for n in g.nodes.values() if n.type == "Block"}
    return GraphState([_copy.deepcopy(n) for n in graph.nodes.values()], list(graph.edges), dict(root.blocks),
                      {k: _copy.deepcopy(d.params) for k, d in root.blocks.items()}, instances,
                      {k: d.color for k, d in root.blocks.items()})


def restore(graph: Document, state: GraphState) -> None:
    """Put `graph` and the root's definitions back to `state`: one BLOCKS_CHANGED and one
    GRAPH_REPLACED event, as group and ungroup send."""
    from .document import GRAPH_REPLACED

    root = graph.root
    graph.nodes = {n.id: _copy.deepcopy(n) for n in state.nodes}
    graph.edges = list(state.edges)
    root.blocks = dict(state.blocks)
    for name, d in root.blocks.items():
        d.name = name
        d.graph._block = name
        d.params = _copy.deepcopy(state.exposed.get(name, d.params))
        d.color = state.colors.get(name, d.color)
    for (owner, nid), params in state.instances.items():
        g = root if owner is None else (root.blocks[owner].graph if owner in root.blocks else None)
        if g is not None and g is not graph and nid in g.nodes:
            g.nodes[nid].params = _copy.deepcopy(params)
    root._emit_blocks_changed()
    graph._emit(GRAPH_REPLACED, tuple(graph.nodes))


def expose_param(root: Document, block: str, pname: str, node_id: str, param: str) -> None:
    """Make parameter `param` of node `node_id` in definition `block` a parameter of the block named
    `pname`, set per instance (its default: the node's current value). An existing `pname` takes the
    node's parameter as one more target, when the kinds agree. One BLOCKS_CHANGED event."""
    from .document import ID_PATTERN

    d = root.blocks.get(block)
    if d is None:
        raise DocumentError(f"there is no block {block!r}")
    if not isinstance(pname, str) or not ID_PATTERN.match(pname) or pname in ("block", "repeat"):
        raise DocumentError(f"block parameter name {pname!r} is not allowed: use letters, digits and _ "
                            "(not 'block' or 'repeat')")
    spec = d.graph.node_spec(node_id)
    target = spec.param(param)
    if target is None:
        raise DocumentError(f"node {node_id} ({spec.type}) has no parameter '{param}'")
    ep = d.params.get(pname)
    if ep is None:
        value = d.graph.nodes[node_id].params.get(param, target.default)
        d.params[pname] = ExposedParam([(node_id, param)], _copy.deepcopy(value), "")
    else:
        if (node_id, param) in ep.targets:
            raise DocumentError(f"{node_id}.{param} is already block parameter {pname}")
        first = exposed_spec(root, d, pname)
        if first is not None and first.kind != target.kind:
            raise DocumentError(f"block parameter {pname} holds {first.kind} values; {node_id}.{param} holds "
                                f"{target.kind} values: expose it under another name")
        ep.targets.append((node_id, param))
    root._emit_blocks_changed(block)


def exposed_as(d: BlockDef, node_id: str, param: str) -> str | None:
    """The block parameter that sets `node_id`.`param` inside definition `d`, if one does."""
    return next((k for k, ep in d.params.items() if (node_id, param) in ep.targets), None)


def _refuse_exposed(graph: Document, ids: Iterable[str], what: str) -> None:
    """Group and ungroup inside a definition would take away a node a block parameter sets."""
    d = graph.root.blocks.get(graph._block) if graph._block is not None else None
    for nid in ids if d is not None else ():
        for pname, ep in d.params.items():
            if any(t == nid for t, _ in ep.targets):
                raise DocumentError(f"node {nid} is set by parameter {pname} of block {d.name}: "
                                    f"un-expose it before you {what}")


def forget_targets(root: Document, block: str, node_ids: Iterable[str]) -> None:
    """Nodes of definition `block` were deleted: its parameters stop setting them (a parameter left
    setting nothing goes, with the instances' values of it). One BLOCKS_CHANGED event if any changed."""
    d = root.blocks[block]
    gone = set(node_ids)
    changed = False
    for pname in list(d.params):
        ep = d.params[pname]
        kept = [t for t in ep.targets if t[0] not in gone]
        if len(kept) != len(ep.targets):
            changed = True
            if kept:
                ep.targets = kept
            else:  # the instances' values of it go too (a stored value of no parameter would not load)
                del d.params[pname]
                for owner, nid in instances_of(root, block):
                    (root if owner is None else root.blocks[owner].graph).nodes[nid].params.pop(pname, None)
    if changed:
        root._emit_blocks_changed(block)


def retarget(root: Document, block: str, old: str, new: str) -> None:
    """A node of definition `block` changed its id from `old` to `new`: its parameters follow."""
    d = root.blocks[block]
    for ep in d.params.values():
        ep.targets = [(new if t == old else t, p) for t, p in ep.targets]
    root._emit_blocks_changed(block)


def exposed_targets(graph: Document) -> set[str]:
    """The nodes of a definition's graph that its block parameters set (none outside definitions)."""
    d = graph.root.blocks.get(graph._block) if graph._block is not None else None
    return {t for ep in d.params.values() for t, _ in ep.targets} if d is not None else set()


def set_color(root: Document, block: str, color: str) -> None:
    """The colour a definition's instances are drawn in ("#4a90d9")."""
    d = root.blocks.get(block)
    if d is None:
        raise DocumentError(f"there is no block {block!r}")
    if not isinstance(color, str) or not COLOR_PATTERN.match(color):
        raise DocumentError(f"block {block}: color must look like \"#4a90d9\", got {color!r}")
    d.color = color.lower()
    root._emit_blocks_changed(block)
