"""The Tensor lab's model: a chain of view/copy/in-place ops typed by a learner, run on the engine's real
tensors, and one picklable record per step of what the engine made of it (shape, strides, storage offset,
contiguity, which storage it reads and who shares it, the storage cell under every element, the values).

Nothing here computes a stride: every number is read back from the engine (`Tensor.stride()`,
`storage_offset()`, `is_contiguous()`, `untyped_storage()` for sharing, `data_ptr()` of each element's view
for the element -> storage map), so the lab shows what the engine does, bugs included. The learner's text is
never evaluated as Python: a small parser reads a whitelist of ops with int, float, tuple and slice
arguments, and the runner calls those methods on engine tensors.

Grammar (statements separated by `;` or new lines)::

    statement := [NAME "="] expr
    expr      := (SOURCE "(" args ")" | NAME) trailer*
    trailer   := "." METHOD "(" args ")" | "." ("T" | "mT") | "[" index ("," index)* "]"
    index     := INT | [INT] ":" [INT] [":" [INT]] | "None" | "..."

e.g. `x = arange(12).view(3, 4); y = x.t(); y.view(12)`.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_SOURCE = 64  # storage cells a source may have: the strip must stay readable
MAX_ELEMENTS = 128  # elements one tensor of the chain may have (an expand can make many from few cells)
MAX_STEPS = 24
MAX_INT = 10**6

SOURCES = ("arange", "zeros", "ones")
VIEW_OPS = ("view", "reshape", "t", "permute", "transpose", "expand", "narrow", "unsqueeze", "squeeze",
            "flatten", "select", "diagonal", "unfold", "movedim", "as_strided", "view_as", "expand_as")
COPY_OPS = ("contiguous", "clone", "float", "double", "long")
INPLACE_OPS = ("add_", "sub_", "mul_", "div_", "fill_", "zero_", "neg_", "clamp_")
ATTRIBUTES = ("T", "mT")
TENSOR_ARG_OPS = ("view_as", "expand_as")  # ops whose argument is another tensor of the chain (by name)
KNOWN_OPS = VIEW_OPS + COPY_OPS + INPLACE_OPS

# kinds of step: what the engine returned, judged by storage identity, never by the op's name
SOURCE, VIEW, COPY, INPLACE, SAME, FAILED = "source", "view", "copy", "in place", "same tensor", "failed"

PRESETS: dict[str, str] = {
    "transpose then view fails": "x = arange(12).view(3, 4); y = x.t(); y.view(12)",
    "contiguous() makes the view work": "x = arange(12).view(3, 4); y = x.t(); c = y.contiguous(); "
                                        "c.view(12)",
    "reshape copies when it must": "x = arange(12).view(3, 4); r = x.t().reshape(12); v = x.view(12)",
    "expand shares one cell": "x = arange(3).view(3, 1); e = x.expand(3, 4); x.add_(10)",
    "in place on an expand fails": "x = arange(3).view(3, 1); e = x.expand(3, 4); e.add_(1)",
    "slice then in-place add": "x = arange(12).view(3, 4); s = x[:, 1:3]; s.add_(100)",
    "stepped slice, then fill": "x = arange(16).view(4, 4); s = x[::2, 1::2]; s.fill_(0)",
    "clone is a copy": "x = arange(6).view(2, 3); c = x.clone(); x.mul_(10)",
    "permute a 3-D tensor": "x = arange(24).view(2, 3, 4); p = x.permute(2, 0, 1); p.reshape(24)",
    "narrow, unsqueeze, select": "x = arange(12).view(3, 4); n = x.narrow(1, 1, 2); u = n.unsqueeze(0); "
                                 "s = u.select(2, 1)",
    "overlapping windows (unfold)": "x = arange(8); w = x.unfold(0, 3, 2); x[4:].zero_()",
}
DEFAULT_PRESET = "slice then in-place add"


class LabSyntaxError(ValueError):
    """The chain's text does not parse (or names no tensor the chain has); one line saying where."""


# --- parsing ---------------------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(?P<num>\d+\.\d*|\.\d+|\d+)|(?P<name>[A-Za-z_]\w*)|(?P<dots>\.\.\.)"
                    r"|(?P<punct>[()\[\],:.;=\-])|(?P<nl>\n)|(?P<bad>\S))")


@dataclass(frozen=True)
class Token:
    kind: str  # num, name, punct, end
    text: str
    col: int  # 1-based column in the text


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind is None:
            continue
        value, col = m.group(kind), m.start(kind) + 1
        if kind == "bad":
            raise LabSyntaxError(f"at column {col}: unexpected {value!r}")
        if kind == "nl":
            tokens.append(Token("punct", ";", col))
        elif kind == "dots":
            tokens.append(Token("punct", "...", col))
        else:
            tokens.append(Token(kind, value, col))
    tokens.append(Token("end", "", len(text) + 1))
    return tokens


@dataclass(frozen=True)
class Call:
    """One op of the chain: a method call, an attribute (`T`, `mT`) or an index (`op == "[]"`)."""

    op: str
    args: tuple = ()
    text: str = ""  # how it reads after the tensor it applies to: ".view(3, 4)", "[:, 1:3]", ".T"


@dataclass(frozen=True)
class Statement:
    target: str | None
    base: str  # a source op (arange, zeros, ones) or the name of a tensor of the chain
    base_args: tuple
    calls: tuple[Call, ...]
    col: int  # where the base is written


def _describe(tok: Token) -> str:
    return "the end" if tok.kind == "end" else repr(tok.text)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = tokenize(text)
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def take(self) -> Token:
        t = self.toks[self.i]
        self.i += 1
        return t

    def at(self, text: str) -> bool:
        return self.tok.kind == "punct" and self.tok.text == text

    def expect(self, text: str, what: str = "") -> Token:
        if not self.at(text):
            where = f" {what}" if what else ""
            raise self.fail(f"expected {text!r}{where}, found {_describe(self.tok)}")
        return self.take()

    def fail(self, message: str, tok: Token | None = None) -> LabSyntaxError:
        return LabSyntaxError(f"at column {(tok or self.tok).col}: {message}")

    def program(self) -> list[Statement]:
        out: list[Statement] = []
        while self.tok.kind != "end":
            if self.at(";"):
                self.take()
                continue
            out.append(self.statement())
            if not (self.at(";") or self.tok.kind == "end"):
                raise self.fail(f"expected ';' or the end, found {_describe(self.tok)}")
        if not out:
            raise LabSyntaxError("the chain is empty: start with a tensor, e.g. arange(12).view(3, 4)")
        return out

    def statement(self) -> Statement:
        start = self.tok
        target = None
        after = self.toks[self.i + 1]
        if start.kind == "name" and after.kind == "punct" and after.text == "=":
            if start.text in SOURCES or start.text in ("None",):
                raise self.fail(f"{start.text!r} can't be a tensor's name")
            target = self.take().text
            self.take()
        base = self.tok
        if base.kind != "name":
            raise self.fail(f"expected a tensor (arange(...), zeros(...), ones(...) or a name), found "
                            f"{_describe(base)}")
        self.take()
        args: tuple = ()
        if base.text not in SOURCES and self.at("("):
            sources = ", ".join(f"{s}(...)" for s in SOURCES)
            raise self.fail(f"{base.text!r} makes no tensor; start with {sources} or a name", base)
        if base.text in SOURCES:
            self.expect("(", f"after {base.text}")
            args = self.args()
        calls: list[Call] = []
        while self.at(".") or self.at("["):
            calls.append(self.call())
        return Statement(target, base.text, args, tuple(calls), base.col)

    def call(self) -> Call:
        if self.at("["):
            open_ = self.take()
            items = [self.index_item()]
            while self.at(","):
                self.take()
                items.append(self.index_item())
            close = self.expect("]", "to close the index")
            return Call("[]", tuple(items), self._text(open_, close))
        dot = self.take()
        name = self.tok
        if name.kind != "name":
            raise self.fail(f"expected an op after '.', found {_describe(name)}")
        self.take()
        if name.text in ATTRIBUTES:
            return Call(name.text, (), "." + name.text)
        if name.text not in KNOWN_OPS:
            raise self.fail(f"{name.text!r} is not an op the lab knows; try one of "
                            f"{', '.join(VIEW_OPS + COPY_OPS + INPLACE_OPS + ATTRIBUTES)}", name)
        self.expect("(", f"after .{name.text}")
        args = self.args(names=name.text in TENSOR_ARG_OPS)
        return Call(name.text, args, self._text(dot, self.toks[self.i - 1]))

    def _text(self, first: Token, last: Token) -> str:
        """The call as it reads, rebuilt from its tokens with the spacing a person writes."""
        out = ""
        for t in self.toks[self.toks.index(first):self.toks.index(last) + 1]:
            out += ", " if t.text == "," else t.text
        return out

    def args(self, names: bool = False) -> tuple:
        """Arguments up to the closing ')': numbers, tuples/lists of ints, tensor names where `names`."""
        out: list[Any] = []
        while not self.at(")"):
            if self.tok.kind == "end":
                raise self.fail("expected ')', found the end")
            if out:
                self.expect(",", "between arguments")
            if self.at("(") or self.at("["):
                close = ")" if self.take().text == "(" else "]"
                items = []
                while not self.at(close):
                    if self.tok.kind == "end":
                        raise self.fail(f"expected {close!r}, found the end")
                    if items:
                        self.expect(",", "between sizes")
                    items.append(self.integer())
                self.take()
                out.append(tuple(items))
            elif names and self.tok.kind == "name":
                out.append(_Name(self.take().text))
            else:
                out.append(self.number())
        self.take()
        return tuple(out)

    def number(self) -> int | float:
        sign = 1
        if self.at("-"):
            self.take()
            sign = -1
        tok = self.tok
        if tok.kind != "num":
            raise self.fail(f"expected a number, found {_describe(tok)}")
        self.take()
        value = float(tok.text) if "." in tok.text else int(tok.text)
        if abs(value) > MAX_INT:
            raise self.fail(f"{tok.text} is too large for the lab (at most {MAX_INT:,})", tok)
        return sign * value

    def integer(self) -> int:
        tok = self.tok
        value = self.number()
        if not isinstance(value, int):
            raise self.fail(f"expected a whole number, found {tok.text}", tok)
        return value

    def index_item(self) -> Any:
        if self.at("..."):
            self.take()
            return Ellipsis
        if self.tok.kind == "name" and self.tok.text == "None":
            self.take()
            return None
        parts: list[int | None] = [None]
        colons = 0
        while True:
            if self.at(":"):
                self.take()
                colons += 1
                if colons > 2:
                    raise self.fail("a slice has at most two ':'")
                parts.append(None)
            elif self.at(",") or self.at("]"):
                break
            else:
                if parts[-1] is not None:
                    raise self.fail(f"expected ':' ',' or ']', found {_describe(self.tok)}")
                parts[-1] = self.integer()
        if colons == 0:
            if parts[0] is None:
                raise self.fail(f"expected an index, found {_describe(self.tok)}")
            return parts[0]
        return slice(*parts)


@dataclass(frozen=True)
class _Name:
    """A tensor of the chain named as an argument (view_as(x))."""

    name: str


def parse_chain(text: str) -> list[Statement]:
    """The statements of a chain; `LabSyntaxError` (one line, with the column) when it does not parse."""
    return _Parser(text).program()


# --- records ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LabStep:
    """One tensor of the chain (or the in-place write, or the op that failed) as the engine left it.

    `positions[k]` is the storage cell under the k-th element in row-major order; `values` are the
    elements as the whole chain leaves them (a later in-place write through another view shows here);
    `written` the storage cells an in-place step wrote, `changed` those whose value it changed."""

    index: int
    name: str
    expr: str  # the step as it reads: "x.t()", "s.add_(100)", "x[:, 1:3]"
    op: str
    kind: str  # source, view, copy, in place, same tensor, failed
    source: int | None = None  # the step it applied to
    shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    offset: int = 0
    contiguous: bool = True
    dtype: str = ""
    storage: int = -1  # index into LabResult.storages
    shares_with: tuple[int, ...] = ()  # the other tensors (steps) on the same storage
    positions: tuple[int, ...] = ()
    values: tuple = ()
    written: tuple[int, ...] = ()
    changed: tuple[int, ...] = ()
    error: str = ""  # the engine's exact text, when the op failed
    error_type: str = ""

    @property
    def is_tensor(self) -> bool:
        """A tensor of its own to draw (an in-place write and a failed op are not)."""
        return self.kind in (SOURCE, VIEW, COPY, SAME)


@dataclass(frozen=True)
class StorageRecord:
    """One storage (flat buffer) of the chain: its cells as the chain leaves them and who reads it."""

    index: int
    label: str  # "A", "B", ...
    dtype: str
    values: tuple
    users: tuple[int, ...]  # tensor steps that read it
    written: tuple[int, ...]  # cells any in-place step of the chain wrote

    @property
    def size(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class LabResult:
    text: str
    steps: tuple[LabStep, ...]
    storages: tuple[StorageRecord, ...]

    @property
    def failed(self) -> LabStep | None:
        return next((s for s in self.steps if s.kind == FAILED), None)

    @property
    def tensors(self) -> tuple[LabStep, ...]:
        return tuple(s for s in self.steps if s.is_tensor)

    def step(self, name: str) -> LabStep:
        """The last tensor step called `name`."""
        for s in reversed(self.steps):
            if s.name == name and s.is_tensor:
                return s
        raise KeyError(name)

    def writes(self) -> tuple[LabStep, ...]:
        return tuple(s for s in self.steps if s.kind == INPLACE)


@dataclass
class _Live:
    """What the runner keeps of one step while the chain runs (the engine tensor, not picklable)."""

    step: LabStep
    tensor: Any = None
    written: tuple[int, ...] = ()
    changed: tuple[int, ...] = ()
    extra: dict = field(default_factory=dict)


# --- running ---------------------------------------------------------------------------------------------
def _dtype_name(t: Any) -> str:
    return str(t.dtype).rsplit(".", 1)[-1]


def _storage_base(t: Any) -> int:
    return t.storage().data_ptr()


def storage_positions(t: Any) -> tuple[int, ...]:
    """The storage cell under each element (row-major), read from where the engine puts each element:
    the element's own 0-d view's `data_ptr()` against the storage's, in elements. No stride arithmetic."""
    base, size = _storage_base(t), t.element_size()
    every = itertools.product(*(range(n) for n in t.shape))
    return tuple((t[idx].data_ptr() - base) // size for idx in every)


def _flat_values(t: Any) -> tuple:
    return tuple(t.reshape(-1).tolist())


def _check_source(name: str, args: tuple, col: int) -> None:
    """A source's arguments, checked before anything runs: whole numbers, and few enough cells to draw."""
    if any(not isinstance(a, (int, tuple)) for a in args) or (name == "arange" and any(
            isinstance(a, tuple) for a in args)):
        raise LabSyntaxError(f"at column {col}: {name}() takes whole numbers")
    if name == "arange":
        if not 1 <= len(args) <= 3 or (len(args) == 3 and args[2] == 0):
            raise LabSyntaxError(f"at column {col}: arange takes (end), (start, end) or (start, end, step≠0)")
        n = len(range(*args))
    else:
        shape = args[0] if len(args) == 1 and isinstance(args[0], tuple) else args
        if any(isinstance(a, tuple) for a in shape) or any(a < 0 for a in shape):
            raise LabSyntaxError(f"at column {col}: {name}() takes sizes, e.g. {name}(3, 4)")
        n = math.prod(shape)
    if n > MAX_SOURCE:
        call = f"{name}({', '.join(map(str, args))})"
        raise LabSyntaxError(f"at column {col}: {call} has {n} elements; the lab draws at most {MAX_SOURCE}")


def _source(name: str, args: tuple) -> Any:
    import engine

    if name == "arange":
        return engine.arange(*args)
    return getattr(engine, name)(*(args[0] if len(args) == 1 and isinstance(args[0], tuple) else args))


def _apply(t: Any, call: Call, names: dict[str, Any]) -> Any:
    if call.op == "[]":
        return t[call.args[0] if len(call.args) == 1 else call.args]
    if call.op in ATTRIBUTES:
        return getattr(t, call.op)
    args = tuple(names[a.name] if isinstance(a, _Name) else a for a in call.args)
    return getattr(t, call.op)(*args)


def run_lab(text: str) -> LabResult:
    """Parse and run a chain on engine tensors; one `LabStep` per op. An op the engine refuses ends the chain
    with a `failed` step carrying the engine's exact error text; text that does not parse raises
    `LabSyntaxError` (and nothing runs)."""
    statements = parse_chain(text)
    n_steps = sum(len(s.calls) + (s.base in SOURCES) for s in statements)
    if n_steps > MAX_STEPS:
        raise LabSyntaxError(f"the chain has {n_steps} steps; the lab draws at most {MAX_STEPS}")
    # names are checked before anything runs, so a typo never half-runs a chain
    known: set[str] = set()
    for st in statements:
        if st.base in SOURCES:
            _check_source(st.base, st.base_args, st.col)
        refs = [st.base] if st.base not in SOURCES else []
        refs += [a.name for c in st.calls for a in c.args if isinstance(a, _Name)]
        for ref in refs:
            if ref not in known:
                hint = f" (the chain has {', '.join(sorted(known))})" if known else ""
                raise LabSyntaxError(f"at column {st.col}: no tensor named {ref!r} yet{hint}")
        if st.target is not None:
            known.add(st.target)

    import engine

    live: list[_Live] = []
    names: dict[str, Any] = {}  # name -> tensor
    index_of: dict[str, int] = {}  # name -> step index
    auto = itertools.count()
    with engine.no_grad():
        for st in statements:
            # the statement's name goes to the last tensor it makes (an in-place write makes none)
            named_at = max((k for k, c in enumerate(st.calls) if c.op not in INPLACE_OPS), default=-1)
            if st.base in SOURCES:
                expr = f"{st.base}({', '.join(map(str, st.base_args))})"
                try:
                    tensor = _source(st.base, st.base_args)
                except Exception as exc:  # noqa: BLE001 - zeros() with no size: the engine says why
                    live.append(_failed(len(live), expr, st.base, None, exc))
                    return _record(text, live)
                name = st.target if (named_at == -1 and st.target) else _auto_name(auto, names, statements)
                live.append(_Live(LabStep(len(live), name, expr, st.base, SOURCE), tensor))
                current, current_name, current_index = tensor, name, len(live) - 1
                names[name], index_of[name] = tensor, current_index
            else:
                current, current_name, current_index = names[st.base], st.base, index_of[st.base]
            for k, call in enumerate(st.calls):
                expr = current_name + call.text
                before = current.storage().tolist() if call.op in INPLACE_OPS else None
                try:
                    out = _apply(current, call, names)
                    if out.numel() > MAX_ELEMENTS:
                        raise _TooBig(f"{expr} has {out.numel()} elements; the lab draws at most "
                                      f"{MAX_ELEMENTS}")
                except Exception as exc:  # noqa: BLE001 - the engine's refusal is what the lab shows
                    live.append(_failed(len(live), expr, call.op, current_index, exc))
                    return _record(text, live)
                if call.op in INPLACE_OPS:
                    after = current.storage().tolist()
                    written = storage_positions(current)
                    changed = tuple(i for i, (a, b) in enumerate(zip(before, after)) if a != b)
                    live.append(_Live(LabStep(len(live), current_name, expr, call.op, INPLACE, current_index),
                                      current, tuple(sorted(set(written))), changed))
                    continue  # the same tensor goes on
                if out is current:
                    kind = SAME
                elif out.untyped_storage() is current.untyped_storage():
                    kind = VIEW
                else:
                    kind = COPY
                name = st.target if (k == named_at and st.target) else _auto_name(auto, names, statements)
                live.append(_Live(LabStep(len(live), name, expr, call.op, kind, current_index), out))
                current, current_name, current_index = out, name, len(live) - 1
                names[name], index_of[name] = out, current_index
            if st.target is not None:
                names[st.target], index_of[st.target] = current, current_index
    return _record(text, live)


class _TooBig(RuntimeError):
    pass


def _failed(index: int, expr: str, op: str, source: int | None, exc: Exception) -> _Live:
    """The step the engine refused, with its exact words (or the lab's size limit)."""
    kind = "lab limit" if isinstance(exc, _TooBig) else type(exc).__name__
    text = str(exc).strip() or kind
    return _Live(LabStep(index, "", expr, op, FAILED, source, error=text, error_type=kind))


def _auto_name(counter: Any, names: dict[str, Any], statements: list[Statement]) -> str:
    """t0, t1, ... skipping names the learner uses."""
    taken = set(names) | {s.target for s in statements if s.target}
    while True:
        name = f"t{next(counter)}"
        if name not in taken:
            return name


def _record(text: str, live: list[_Live]) -> LabResult:
    """Read every tensor back from the engine once the chain has run (values as the chain leaves them)."""
    storages: list[Any] = []  # engine storage objects, by first appearance
    users: list[list[int]] = []
    written: list[set[int]] = []
    for lv in live:
        if lv.tensor is None:
            continue
        st = lv.tensor.untyped_storage()
        k = next((i for i, s in enumerate(storages) if s is st), None)
        if k is None:
            storages.append(st)
            users.append([])
            written.append(set())
            k = len(storages) - 1
        lv.extra["storage"] = k
        if lv.step.is_tensor:
            users[k].append(lv.step.index)
        written[k].update(lv.written)
    steps: list[LabStep] = []
    for lv in live:
        s, t = lv.step, lv.tensor
        if t is None:
            steps.append(s)
            continue
        k = lv.extra["storage"]
        steps.append(LabStep(
            s.index, s.name, s.expr, s.op, s.kind, s.source,
            shape=tuple(t.shape), strides=tuple(t.stride()), offset=t.storage_offset(),
            contiguous=bool(t.is_contiguous()), dtype=_dtype_name(t), storage=k,
            shares_with=tuple(i for i in users[k] if i != s.index and not _same(live, i, s.index)),
            positions=storage_positions(t), values=_flat_values(t), written=lv.written, changed=lv.changed))
    records = []
    for k in range(len(storages)):
        owner = next(lv.tensor for lv in live if lv.tensor is not None and lv.extra["storage"] == k)
        records.append(StorageRecord(k, _label(k), _dtype_name(owner), tuple(owner.storage().tolist()),
                                     tuple(users[k]), tuple(sorted(written[k]))))
    return LabResult(text, tuple(steps), tuple(records))


def _same(live: list[_Live], i: int, j: int) -> bool:
    """Two steps that are the very same tensor (an in-place write returns it; contiguous() of a contiguous
    tensor too) do not 'share storage with' each other: they are one."""
    return live[i].tensor is live[j].tensor


def _label(k: int) -> str:
    return chr(ord("A") + k) if k < 26 else f"S{k}"


def format_values(values: tuple) -> tuple[str, ...]:
    """The values as the cells show them: ints as ints, floats short."""
    out = []
    for v in values:
        if isinstance(v, bool) or isinstance(v, (int, np.integer)):
            out.append(str(int(v)))
        else:
            out.append(f"{v:.4g}")
    return tuple(out)


def describe_step(step: LabStep, result: LabResult) -> list[str]:
    """The metadata lines of a tensor step, as the lab shows them."""
    storage = result.storages[step.storage]
    shared = [result.steps[i].name for i in step.shares_with]
    if shared:
        sharing = f"storage {storage.label}, shared with {', '.join(shared)}"
    else:
        sharing = f"storage {storage.label}, its own"
    return [
        f"shape ({', '.join(map(str, step.shape))}{',' if len(step.shape) == 1 else ''})",
        f"stride ({', '.join(map(str, step.strides))}{',' if len(step.strides) == 1 else ''})",
        f"offset {step.offset}",
        f"contiguous: {'yes' if step.contiguous else 'no'}",
        sharing,
    ]


def describe_write(step: LabStep, result: LabResult) -> str:
    """One line about an in-place write: which cells it wrote and which tensors see them."""
    storage = result.storages[step.storage]
    cells = set(step.written)
    seen = [result.steps[i].name for i in storage.users if cells & set(result.steps[i].positions)]
    changed = f", changed {len(step.changed)}" if len(step.changed) != len(step.written) else ""
    cells_text = f"{len(step.written)} cell{'s' if len(step.written) != 1 else ''}"
    return f"wrote {cells_text} of storage {storage.label}{changed}; seen by {', '.join(dict.fromkeys(seen))}"
