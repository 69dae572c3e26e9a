"""The layer catalogue: one `NodeSpec` per node type, read by palette, inspector, shape inference,
compiler and exporters. Adding a layer means adding one entry here.
"""
from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import DocumentError, ParamError, ShapeError, format_shape

Shape = tuple[int | None, ...]
InShapes = Mapping[str, Any]  # port -> Shape, or list[Shape] for a variadic port
OutShapes = dict[str, Shape]

CATEGORIES: tuple[str, ...] = (
    "Input/Output", "Dense", "Convolution", "Pooling", "Normalization", "Recurrent", "Attention",
    "Activation", "Reshape", "Merge", "Regularization", "Loss", "Blocks", "Imported",
)
PARAM_KINDS = ("int", "float", "bool", "choice", "str", "int-tuple", "float-tuple", "dict")
MAX_DIM = 2**31 - 1  # per-axis size limit; keeps products of shapes sane
_UNSET = object()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    if _is_int(v):
        return abs(v) <= 1e300  # larger ints would overflow float()
    return isinstance(v, float) and math.isfinite(v)


def check_json_value(value: Any, where: str, depth: int = 0) -> None:
    """Free-form settings (dataset options, schedule options) must be plain, finite JSON."""
    if depth > 8:
        raise ParamError(f"{where} is nested too deeply")
    if value is None or isinstance(value, bool | str) or _is_int(value):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ParamError(f"{where} must be a finite number, got {value!r}")
        return
    if isinstance(value, list | tuple):
        if len(value) > 10_000:
            raise ParamError(f"{where} has too many items")
        for item in value:
            check_json_value(item, where, depth + 1)
        return
    if isinstance(value, dict):
        if len(value) > 1_000:
            raise ParamError(f"{where} has too many entries")
        for key, item in value.items():
            if not isinstance(key, str):
                raise ParamError(f"{where} has a non-text key {_short(key)}")
            check_json_value(item, f"{where}.{key}", depth + 1)
        return
    raise ParamError(f"{where} must be plain JSON data, got {type(value).__name__}")


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a node type (or one training setting).

    kind: int | float | bool | choice | str | int-tuple | float-tuple | dict.
    An int-tuple also accepts a single int ("the same on every axis", as PyTorch does) and any
    string listed in `choices` (e.g. padding "same"). `ctor` says whether the value is passed to the
    engine/PyTorch constructor under this name; `only_when=(param, values)` says the parameter only
    matters when another parameter has one of those values (the inspector greys it out otherwise).
    """

    name: str
    kind: str
    default: Any
    help: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple[Any, ...] = ()
    nullable: bool = False
    length: int | None = None
    ctor: bool = True
    only_when: tuple[str, tuple[Any, ...]] | None = None

    def __post_init__(self) -> None:
        assert self.kind in PARAM_KINDS, self.kind

    def applies(self, params: Mapping[str, Any]) -> bool:
        """False when `only_when` says this parameter is irrelevant for the other values."""
        if self.only_when is None:
            return True
        other, values = self.only_when
        return params.get(other) in values

    def check(self, value: Any) -> Any:
        """Return the value in its stored (JSON) form, or raise ParamError in user terms."""
        name = self.name
        if value is None:
            if self.nullable:
                return None
            raise ParamError(f"{name} must be set")
        kind = self.kind
        if kind == "bool":
            if not isinstance(value, bool):
                raise ParamError(f"{name} must be true or false, got {_short(value)}")
            return value
        if kind == "choice":
            scalar = isinstance(value, str | int | float) and not isinstance(value, bool)
            if not scalar or value not in self.choices:
                options = ", ".join(str(c) for c in self.choices)
                raise ParamError(f"{name} must be one of {options}; got {_short(value)}")
            return value
        if kind == "str":
            if not isinstance(value, str) or len(value) > 1_000:
                raise ParamError(f"{name} must be a short text, got {_short(value)}")
            return value
        if kind == "int":
            if not _is_int(value):
                raise ParamError(f"{name} must be a whole number, got {_short(value)}")
            self._check_range(value, name)
            return value
        if kind == "float":
            if not _is_number(value):
                raise ParamError(f"{name} must be a finite number, got {_short(value)}")
            self._check_range(value, name)
            return float(value)
        if kind == "dict":
            if not isinstance(value, dict):
                raise ParamError(f"{name} must be a set of named values (a JSON object), got {_short(value)}")
            check_json_value(value, name)
            return value
        # int-tuple / float-tuple
        if isinstance(value, str):
            if value in self.choices:
                return value
            raise ParamError(f"{name} must be a list of numbers{self._or_choices()}, got {_short(value)}")
        element_ok = _is_int if kind == "int-tuple" else _is_number
        what = "whole numbers" if kind == "int-tuple" else "numbers"
        if kind == "int-tuple" and _is_int(value):
            self._check_range(value, name)
            return value
        if not isinstance(value, list | tuple):
            raise ParamError(f"{name} must be a list of {what}{self._or_choices()}, got {_short(value)}")
        if self.length is not None and len(value) != self.length:
            raise ParamError(f"{name} must have {self.length} entries, got {len(value)}")
        if not 1 <= len(value) <= 8:
            raise ParamError(f"{name} must have 1 to 8 entries, got {len(value)}")
        for item in value:
            if not element_ok(item):
                raise ParamError(f"{name} must be a list of {what}, got {_short(value)}")
            self._check_range(item, name)
        return [float(v) for v in value] if kind == "float-tuple" else list(value)

    def _or_choices(self) -> str:
        return "".join(f' or "{c}"' for c in self.choices)

    def _check_range(self, value: float, name: str) -> None:
        if self.min is not None and value < self.min:
            raise ParamError(f"{name} must be at least {self.min:g}, got {_short(value)}")
        if self.max is not None and value > self.max:
            raise ParamError(f"{name} must be at most {self.max:g}, got {_short(value)}")


@dataclass(frozen=True)
class PortSpec:
    """An input port. A variadic port (merge nodes) takes several wires, in document edge order."""

    name: str
    required: bool = True
    variadic: bool = False
    min_count: int = 1
    help: str = ""


def _zero(params: Mapping[str, Any], in_shapes: InShapes) -> int:
    return 0


def _no_kwargs(params: Mapping[str, Any], in_shapes: InShapes) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class NodeSpec:
    """Everything the app knows about one node type.

    The `*_fn` fields take *resolved* params (see `resolve_params`); call the methods
    `shape_rule`, `param_count`, `macs` and `engine_kwargs`, which resolve for you.
    `class_param` names a parameter whose value is the class to build (the Output node's `loss`).
    """

    type: str
    category: str
    description: str
    inputs: tuple[PortSpec, ...]
    outputs: tuple[str, ...]
    params: tuple[ParamSpec, ...]
    shape_fn: Callable[[Mapping[str, Any], InShapes], OutShapes]
    count_fn: Callable[[Mapping[str, Any], InShapes], int] = _zero
    macs_fn: Callable[[Mapping[str, Any], InShapes], int] = _zero
    kwargs_fn: Callable[[Mapping[str, Any], InShapes], dict[str, Any]] = _no_kwargs
    engine_class: str | None = None
    torch_class: str | None = None
    icon: str = "layer"
    key_params: tuple[str, ...] = ()
    id_prefix: str = "node"
    check_fn: Callable[[Mapping[str, Any]], None] | None = None
    class_param: str | None = None

    def __post_init__(self) -> None:
        assert self.category in CATEGORIES, self.category
        names = [p.name for p in self.params]
        assert len(set(names)) == len(names), self.type
        assert set(self.key_params) <= set(names), self.type

    # --- parameters -------------------------------------------------------------------------
    def param(self, name: str) -> ParamSpec | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def check_param(self, name: str, value: Any) -> Any:
        """Check one value against this type's ParamSpec; returns the stored form."""
        spec = self.param(name)
        if spec is None:
            known = ", ".join(p.name for p in self.params) or "none"
            raise ParamError(f"{self.type} has no parameter '{name}' (its parameters: {known})")
        return spec.check(value)

    def resolve_params(self, params: Mapping[str, Any], *, cross_check: bool = True) -> dict[str, Any]:
        """User params + defaults, each value checked; then cross-parameter checks
        (e.g. padding "same" needs stride 1). Raises ParamError."""
        resolved = self.defaults()
        for name, value in params.items():
            resolved[name] = self.check_param(name, value)
        if cross_check and self.check_fn is not None:
            self.check_fn(resolved)
        return resolved

    def input_port(self, name: str) -> PortSpec | None:
        for port in self.inputs:
            if port.name == name:
                return port
        return None

    # --- rules ------------------------------------------------------------------------------
    def shape_rule(self, params: Mapping[str, Any], in_shapes: InShapes) -> OutShapes:
        """Output shape per output port; raises ShapeError (or ParamError for bad params)."""
        return self.shape_fn(self.resolve_params(params), in_shapes)

    def param_count(self, params: Mapping[str, Any], in_shapes: InShapes) -> int:
        """Number of trainable parameters (what `sum(p.numel())` gives for the built layer)."""
        return self.count_fn(self.resolve_params(params), in_shapes)

    def macs(self, params: Mapping[str, Any], in_shapes: InShapes) -> int:
        """Multiply-adds per sample of the weighted work (elementwise layers count 0)."""
        return self.macs_fn(self.resolve_params(params), in_shapes)

    def engine_kwargs(self, params: Mapping[str, Any], in_shapes: InShapes) -> dict[str, Any]:
        """Constructor arguments, named exactly as PyTorch names them: inferred sizes
        (in_features, in_channels, ...) plus the user's constructor params. Lists become tuples."""
        resolved = self.resolve_params(params)
        kwargs: dict[str, Any] = {}
        for p in self.params:
            if p.ctor and p.name != self.class_param and p.applies(resolved):
                value = resolved[p.name]
                kwargs[p.name] = tuple(value) if isinstance(value, list) else value
        kwargs.update(self.kwargs_fn(resolved, in_shapes))
        return kwargs

    def class_name(self, params: Mapping[str, Any], *, torch: bool = False) -> str | None:
        """The class to construct: `engine_class`/`torch_class`, or the value of `class_param`."""
        if self.class_param is not None:
            return self.resolve_params(params, cross_check=False)[self.class_param]
        return self.torch_class if torch else self.engine_class


# ---------------------------------------------------------------------------------------------
# shape helpers
# ---------------------------------------------------------------------------------------------
def _in(in_shapes: InShapes, port: str = "in") -> Shape:
    return tuple(in_shapes[port])


def _need_ndim(shape: Shape, ndims: int | Sequence[int], layout: str, port: str = "in") -> None:
    allowed = (ndims,) if isinstance(ndims, int) else tuple(ndims)
    if len(shape) not in allowed:
        if len(allowed) == 1:
            raise ShapeError(f"expects a {allowed[0]}-D input {layout}, got {format_shape(shape)}", port)
        dims = " or ".join(f"{n}-D" for n in allowed)
        raise ShapeError(f"expects a {dims} input {layout}, got {format_shape(shape)}", port)


def _need_min_ndim(shape: Shape, ndim: int, layout: str, port: str = "in") -> None:
    if len(shape) < ndim:
        raise ShapeError(f"expects at least a {ndim}-D input {layout}, got {format_shape(shape)}", port)


def _axis(dim: int, shape: Shape, what: str = "dim", port: str = "in") -> int:
    """Normalise a (possibly negative) dim; refuse the batch dimension."""
    ndim = len(shape)
    d = dim + ndim if dim < 0 else dim
    if not 0 <= d < ndim:
        raise ShapeError(f"{what} {dim} is out of range for a {ndim}-D input {format_shape(shape)}", port)
    if d == 0:
        raise ShapeError(f"{what} {dim} is the batch dimension N; pick one of 1..{ndim - 1}", port)
    return d


def _tuple(value: Any, n: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, list | tuple) else (value,) * n


def _prod(values: Sequence[int | None]) -> int:
    out = 1
    for v in values:
        out *= v if v is not None else 1
    return out


def _per_sample(shape: Shape) -> int:
    return _prod(shape[1:])


def _conv_out(size: int, k: int, s: int, p: int, d: int, axis: str, shape: Shape) -> int:
    out = (size + 2 * p - d * (k - 1) - 1) // s + 1
    if out < 1:
        raise ShapeError(
            f"input {format_shape(shape)} is too small along {axis} for kernel {k}"
            f" (dilation {d}, padding {p}): the output would be empty"
        )
    return out


def _pool_out(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool, axis: str, shape: Shape) -> int:
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1  # floor division, as PyTorch's div_rtn
    # PyTorch: with ceil_mode the last window must start inside the input or its left padding
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    if out < 1:
        raise ShapeError(f"input {format_shape(shape)} is too small along {axis} for a window of {k}"
                         f" (dilation {d}, padding {p}): the output would be empty")
    return out


def _broadcast(shapes: Sequence[Shape], node: str) -> Shape:
    first = shapes[0]
    out = list(first)
    for i, shape in enumerate(shapes[1:], start=2):
        ndim = max(len(out), len(shape))
        a = [1] * (ndim - len(out)) + out
        b = [1] * (ndim - len(shape)) + list(shape)
        merged = []
        for x, y in zip(a, b):
            if x == y:
                merged.append(x)
            elif y == 1:
                merged.append(x)
            elif x == 1:
                merged.append(y)
            else:
                raise ShapeError(
                    f"expects {format_shape(first)} (the shape of its first input), "
                    f"got {format_shape(shape)} on input {i}; {node} needs matching or broadcastable shapes",
                    "in",
                )
        out = merged
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# shared parameter groups
# ---------------------------------------------------------------------------------------------
INIT_CHOICES = (
    "default", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal",
    "normal", "zeros", "constant",
)


def _init_params() -> tuple[ParamSpec, ...]:
    """Weight initialisation: declared here, applied by the compiler to the weight matrices."""
    return (
        ParamSpec("init", "choice", "default", choices=INIT_CHOICES, ctor=False,
                  help="How the weights start. 'default' is PyTorch's scheme; any other choice also "
                       "starts the biases at zero"),
        ParamSpec("init_gain", "float", 1.0, min=0.0, max=100.0, ctor=False,
                  only_when=("init", ("xavier_uniform", "xavier_normal", "orthogonal")),
                  help="Scale factor for Xavier and orthogonal initialisation"),
        ParamSpec("init_std", "float", 0.02, min=0.0, max=100.0, ctor=False, only_when=("init", ("normal",)),
                  help="Standard deviation of the normal initialisation (mean 0)"),
        ParamSpec("init_value", "float", 0.0, min=-1e6, max=1e6, ctor=False,
                  only_when=("init", ("constant",)), help="The value every weight starts at"),
    )


def _bias() -> ParamSpec:
    return ParamSpec("bias", "bool", True, help="Learn an additive bias")


def _size(name: str, default: int, help: str, lo: int = 1) -> ParamSpec:
    return ParamSpec(name, "int", default, help=help, min=lo, max=MAX_DIM)


def _dim_param(default: int, help: str) -> ParamSpec:
    return ParamSpec("dim", "int", default, help=help, min=-8, max=8)


_SPECS: dict[str, NodeSpec] = {}


def _register(spec: NodeSpec) -> None:
    assert spec.type not in _SPECS, spec.type
    _SPECS[spec.type] = spec


_IN = (PortSpec("in"),)
_OUT = ("out",)


# ---------------------------------------------------------------------------------------------
# Input / Output
# ---------------------------------------------------------------------------------------------
def _input_shape(p, s):
    return {"out": (None, *_tuple(p["shape"], 1))}


_register(NodeSpec(
    type="Input", category="Input/Output",
    description="Where samples enter the network; its shape is one sample's shape",
    inputs=(), outputs=_OUT,
    params=(
        ParamSpec("shape", "int-tuple", [64], min=1, max=MAX_DIM,
                  help="Shape of one sample, without the batch dimension, e.g. [1, 28, 28]"),
        ParamSpec("dataset_driven", "bool", True,
                  help="Take the shape from the training dataset (the shape above is then a preview)"),
        ParamSpec("dtype", "choice", "float32", choices=("float32", "int64"),
                  help="Element type: int64 for token ids feeding an Embedding"),
    ),
    shape_fn=_input_shape, icon="input", key_params=("shape",), id_prefix="x",
))

LOSSES = ("MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "PoissonNLLLoss", "CrossEntropyLoss", "NLLLoss",
          "MultiMarginLoss", "BCELoss", "BCEWithLogitsLoss", "MultiLabelSoftMarginLoss", "KLDivLoss")
# what the targets must be: class indices (N), or floats shaped like the prediction (one-hot for classes)
CLASS_LOSSES = ("CrossEntropyLoss", "NLLLoss", "MultiMarginLoss")
FLOAT_TARGET_LOSSES = ("MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "PoissonNLLLoss", "BCELoss",
                       "BCEWithLogitsLoss", "MultiLabelSoftMarginLoss", "KLDivLoss")
_MATRIX_LOSSES = ("MultiMarginLoss", "MultiLabelSoftMarginLoss")  # PyTorch takes (N, C) and nothing else


def _output_shape(p, s):
    x = _in(s)
    if p["loss"] in _MATRIX_LOSSES and len(x) != 2:
        raise ShapeError(f"{p['loss']} expects scores (N, C), got {format_shape(x)}", "in")
    if p["loss"] in CLASS_LOSSES and len(x) < 2:
        raise ShapeError(f"{p['loss']} expects class scores (N, C), got {format_shape(x)}", "in")
    return {}


def _output_check(p):
    if p["reduction"] == "batchmean" and p["loss"] != "KLDivLoss":
        raise ParamError("reduction 'batchmean' only exists for KLDivLoss")


_register(NodeSpec(
    type="Output", category="Loss",
    description="The loss: compares the prediction on 'in' with the dataset's targets",
    inputs=(PortSpec("in", help="The prediction"),), outputs=(),
    params=(
        ParamSpec("loss", "choice", "CrossEntropyLoss", choices=LOSSES, help="Loss function"),
        ParamSpec("reduction", "choice", "mean", choices=("mean", "sum", "batchmean"),
                  help="How per-sample losses combine ('batchmean' for KLDivLoss)"),
        ParamSpec("label_smoothing", "float", 0.0, min=0.0, max=1.0,
                  only_when=("loss", ("CrossEntropyLoss",)), help="Soften one-hot targets by this much"),
        ParamSpec("ignore_index", "int", -100, min=-(2**31), max=MAX_DIM,
                  only_when=("loss", ("CrossEntropyLoss", "NLLLoss")),
                  help="Target class that does not count"),
        ParamSpec("beta", "float", 1.0, min=0.0, max=1e6, only_when=("loss", ("SmoothL1Loss",)),
                  help="Where SmoothL1 switches from squared to absolute error"),
        ParamSpec("delta", "float", 1.0, min=1e-12, max=1e6, only_when=("loss", ("HuberLoss",)),
                  help="Where Huber switches from squared to absolute error"),
        ParamSpec("log_input", "bool", True, only_when=("loss", ("PoissonNLLLoss",)),
                  help="The prediction is the log of the rate (exp(pred) is the Poisson mean)"),
        ParamSpec("full", "bool", False, only_when=("loss", ("PoissonNLLLoss",)),
                  help="Add the Stirling term, so the loss is the full negative log-likelihood"),
        ParamSpec("p", "choice", 1, choices=(1, 2), only_when=("loss", ("MultiMarginLoss",)),
                  help="1: hinge loss; 2: squared hinge loss"),
        ParamSpec("margin", "float", 1.0, min=0.0, max=1e6, only_when=("loss", ("MultiMarginLoss",)),
                  help="How far the true class's score must beat every other class's"),
        ParamSpec("log_target", "bool", False, only_when=("loss", ("KLDivLoss",)),
                  help="The targets are given as log-probabilities"),
    ),
    shape_fn=_output_shape, icon="output", key_params=("loss",), id_prefix="loss",
    check_fn=_output_check, class_param="loss",
))


# ---------------------------------------------------------------------------------------------
# Dense
# ---------------------------------------------------------------------------------------------
def _linear_shape(p, s):
    x = _in(s)
    _need_min_ndim(x, 2, "(N, *, features)")
    return {"out": (*x[:-1], p["out_features"])}


_register(NodeSpec(
    type="Linear", category="Dense", description="Fully connected layer: y = x Wᵀ + b on the last dimension",
    inputs=_IN, outputs=_OUT,
    params=(_size("out_features", 64, "Number of output features"), _bias(), *_init_params()),
    shape_fn=_linear_shape,
    count_fn=lambda p, s: _in(s)[-1] * p["out_features"] + (p["out_features"] if p["bias"] else 0),
    macs_fn=lambda p, s: _prod(_in(s)[1:-1]) * _in(s)[-1] * p["out_features"],
    kwargs_fn=lambda p, s: {"in_features": _in(s)[-1]},
    engine_class="Linear", torch_class="Linear", icon="dense", key_params=("out_features",), id_prefix="fc",
))


def _bilinear_shape(p, s):
    a, b = _in(s, "in1"), _in(s, "in2")
    _need_min_ndim(a, 2, "(N, *, features)", "in1")
    _need_min_ndim(b, 2, "(N, *, features)", "in2")
    if a[:-1] != b[:-1]:
        raise ShapeError(
            f"expects (N, ..., features) with the same leading dimensions as in1 {format_shape(a)}, "
            f"got {format_shape(b)}", "in2")
    return {"out": (*a[:-1], p["out_features"])}


_register(NodeSpec(
    type="Bilinear", category="Dense", description="Bilinear layer: y = x1ᵀ A x2 + b",
    inputs=(PortSpec("in1"), PortSpec("in2")), outputs=_OUT,
    params=(_size("out_features", 64, "Number of output features"), _bias(), *_init_params()),
    shape_fn=_bilinear_shape,
    count_fn=lambda p, s: (_in(s, "in1")[-1] * _in(s, "in2")[-1] * p["out_features"]
                           + (p["out_features"] if p["bias"] else 0)),
    macs_fn=lambda p, s: (_prod(_in(s, "in1")[1:-1]) * _in(s, "in1")[-1] * _in(s, "in2")[-1]
                          * p["out_features"]),
    kwargs_fn=lambda p, s: {"in1_features": _in(s, "in1")[-1], "in2_features": _in(s, "in2")[-1]},
    engine_class="Bilinear", torch_class="Bilinear", icon="dense", key_params=("out_features",),
    id_prefix="bilinear",
))


def _embedding_check(p):
    idx = p["padding_idx"]
    if idx is not None and not -p["num_embeddings"] <= idx < p["num_embeddings"]:
        last = p["num_embeddings"] - 1
        raise ParamError(f"padding_idx must be within the vocabulary (0..{last}), got {idx}")


_register(NodeSpec(
    type="Embedding", category="Dense", description="Looks up a learned vector for each integer token id",
    inputs=_IN, outputs=_OUT,
    params=(
        _size("num_embeddings", 1000, "Vocabulary size: token ids are 0..num_embeddings-1"),
        _size("embedding_dim", 64, "Length of each embedding vector"),
        ParamSpec("padding_idx", "int", None, nullable=True, min=-MAX_DIM, max=MAX_DIM,
                  help="Token id whose vector stays zero and gets no gradient"),
        *_init_params(),
    ),
    shape_fn=lambda p, s: {"out": (*_in(s), p["embedding_dim"])},
    count_fn=lambda p, s: p["num_embeddings"] * p["embedding_dim"],
    check_fn=_embedding_check,
    engine_class="Embedding", torch_class="Embedding", icon="embedding",
    key_params=("num_embeddings", "embedding_dim"), id_prefix="embed",
))


# ---------------------------------------------------------------------------------------------
# Convolution
# ---------------------------------------------------------------------------------------------
def _conv_params(n: int, transposed: bool = False) -> tuple[ParamSpec, ...]:
    tup = dict(kind="int-tuple", length=n)
    padding_choices = () if transposed else ("same", "valid")
    params = [
        _size("out_channels", 16, "Number of output channels (filters)"),
        ParamSpec("kernel_size", default=3, min=1, max=MAX_DIM, help="Size of the filter window", **tup),
        ParamSpec("stride", default=1, min=1, max=MAX_DIM, help="Step between windows", **tup),
        ParamSpec("padding", default=0, min=0, max=MAX_DIM, choices=padding_choices,
                  help='Zeros added on each side; "same" keeps the size (stride 1 only)' if not transposed
                  else "Implicit zero padding removed from each side of the output", **tup),
    ]
    if transposed:
        params.append(ParamSpec("output_padding", default=0, min=0, max=MAX_DIM,
                                 help="Extra size added to one side of the output", **tup))
    params += [
        ParamSpec("dilation", default=1, min=1, max=MAX_DIM, help="Spacing between kernel taps", **tup),
        _size("groups", 1, "Split channels into this many independent groups"),
        _bias(),
    ]
    if not transposed:
        params.append(ParamSpec("padding_mode", "choice", "zeros",
                                choices=("zeros", "reflect", "replicate", "circular"),
                                help="What the padding is filled with"))
    return (*params, *_init_params())


def _conv_check(p):
    if p["padding"] == "same" and any(s != 1 for s in _tuple(p["stride"], 2)):
        raise ParamError('padding "same" only works with stride 1')
    if p["out_channels"] % p["groups"]:
        raise ParamError(f"out_channels ({p['out_channels']}) must be divisible by groups ({p['groups']})")


def _convt_check(p):
    _conv_check(p)
    n = len(_tuple(p["kernel_size"], 2))
    op, st, dl = (_tuple(p[k], n) for k in ("output_padding", "stride", "dilation"))
    if any(o >= max(s, d) for o, s, d in zip(op, st, dl)):
        raise ParamError("output_padding must be smaller than stride or dilation")


def _make_conv_shape(n: int, transposed: bool = False):
    layout = "(N, C, L)" if n == 1 else "(N, C, H, W)"
    axes = ("length",) if n == 1 else ("height", "width")

    def rule(p, s):
        x = _in(s)
        _need_ndim(x, n + 2, layout)
        c = x[1]
        if c % p["groups"]:
            raise ShapeError(f"has {c} input channels, which groups={p['groups']} does not divide", "in")
        k, st, dl = (_tuple(p[key], n) for key in ("kernel_size", "stride", "dilation"))
        if transposed:
            pd, op = _tuple(p["padding"], n), _tuple(p["output_padding"], n)
            sizes = []
            for i in range(n):
                out = (x[2 + i] - 1) * st[i] - 2 * pd[i] + dl[i] * (k[i] - 1) + op[i] + 1
                if out < 1:
                    raise ShapeError(f"input {format_shape(x)} is too small along {axes[i]}: "
                                     "the padding removes the whole output")
                sizes.append(out)
            return {"out": (x[0], p["out_channels"], *sizes)}
        if p["padding"] == "same":
            return {"out": (x[0], p["out_channels"], *x[2:])}
        pd = (0,) * n if p["padding"] == "valid" else _tuple(p["padding"], n)
        sizes = [_conv_out(x[2 + i], k[i], st[i], pd[i], dl[i], axes[i], x) for i in range(n)]
        return {"out": (x[0], p["out_channels"], *sizes)}

    return rule


def _make_conv_count(n: int, transposed: bool = False):
    def count(p, s):
        c = _in(s)[1]
        k = _prod(_tuple(p["kernel_size"], n))
        weight = c * (p["out_channels"] // p["groups"]) * k if transposed else \
            p["out_channels"] * (c // p["groups"]) * k
        return weight + (p["out_channels"] if p["bias"] else 0)

    return count


def _make_conv_macs(n: int, transposed: bool = False):
    def macs(p, s):
        x = _in(s)
        k = _prod(_tuple(p["kernel_size"], n))
        if transposed:  # every input element scatters into out_channels/groups * k outputs
            return _per_sample(x) * (p["out_channels"] // p["groups"]) * k
        out = _make_conv_shape(n)(p, s)["out"]
        return _per_sample(out) * (x[1] // p["groups"]) * k

    return macs


for _n, _t in ((1, "Conv1d"), (2, "Conv2d")):
    _register(NodeSpec(
        type=_t, category="Convolution",
        description=f"{_n}-D convolution over {'a sequence (N, C, L)' if _n == 1 else 'images (N, C, H, W)'}",
        inputs=_IN, outputs=_OUT, params=_conv_params(_n),
        shape_fn=_make_conv_shape(_n), count_fn=_make_conv_count(_n), macs_fn=_make_conv_macs(_n),
        kwargs_fn=lambda p, s: {"in_channels": _in(s)[1]}, check_fn=_conv_check,
        engine_class=_t, torch_class=_t, icon="conv", key_params=("out_channels", "kernel_size", "stride"),
        id_prefix="conv",
    ))

for _n, _t in ((1, "ConvTranspose1d"), (2, "ConvTranspose2d")):
    _register(NodeSpec(
        type=_t, category="Convolution",
        description=f"Transposed {_n}-D convolution (learned upsampling) over "
                    f"{'a sequence (N, C, L)' if _n == 1 else 'images (N, C, H, W)'}",
        inputs=_IN, outputs=_OUT, params=_conv_params(_n, transposed=True),
        shape_fn=_make_conv_shape(_n, True), count_fn=_make_conv_count(_n, True),
        macs_fn=_make_conv_macs(_n, True),
        kwargs_fn=lambda p, s: {"in_channels": _in(s)[1]}, check_fn=_convt_check,
        engine_class=_t, torch_class=_t, icon="conv",
        key_params=("out_channels", "kernel_size", "stride"), id_prefix="deconv",
    ))


# ---------------------------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------------------------
def _pool_params(n: int, is_max: bool) -> tuple[ParamSpec, ...]:
    tup = dict(kind="int-tuple", length=n)
    params = [
        ParamSpec("kernel_size", default=2, min=1, max=MAX_DIM, help="Size of the pooling window", **tup),
        ParamSpec("stride", default=None, nullable=True, min=1, max=MAX_DIM,
                  help="Step between windows (empty: the kernel size)", **tup),
        ParamSpec("padding", default=0, min=0, max=MAX_DIM,
                  help="Padding on each side (at most half the window)", **tup),
    ]
    if is_max:
        params.append(ParamSpec("dilation", default=1, min=1, max=MAX_DIM, help="Spacing between window taps",
                                **tup))
    params.append(ParamSpec("ceil_mode", "bool", False, help="Round the output size up instead of down"))
    if not is_max:
        params.append(ParamSpec("count_include_pad", "bool", True, help="Count padding zeros in the average"))
    return tuple(params)


def _make_pool_check(n: int, is_max: bool):
    def check(p):
        # PyTorch compares with the kernel size itself, even when dilated
        for ki, pi in zip(_tuple(p["kernel_size"], n), _tuple(p["padding"], n)):
            if pi > ki // 2:
                raise ParamError(f"padding ({pi}) must be at most half the window ({ki})")

    return check


def _make_pool_shape(n: int, is_max: bool):
    layout = "(N, C, L)" if n == 1 else "(N, C, H, W)"
    axes = ("length",) if n == 1 else ("height", "width")

    def rule(p, s):
        x = _in(s)
        _need_ndim(x, n + 2, layout)
        k = _tuple(p["kernel_size"], n)
        st = k if p["stride"] is None else _tuple(p["stride"], n)
        pd = _tuple(p["padding"], n)
        dl = _tuple(p["dilation"], n) if is_max else (1,) * n
        sizes = [_pool_out(x[2 + i], k[i], st[i], pd[i], dl[i], p["ceil_mode"], axes[i], x) for i in range(n)]
        return {"out": (*x[:2], *sizes)}

    return rule


for _n in (1, 2):
    for _is_max in (True, False):
        _t = f"{'Max' if _is_max else 'Avg'}Pool{_n}d"
        _register(NodeSpec(
            type=_t, category="Pooling",
            description=f"{'Maximum' if _is_max else 'Average'} over sliding "
                        f"{'windows of a sequence' if _n == 1 else 'windows of an image'}",
            inputs=_IN, outputs=_OUT, params=_pool_params(_n, _is_max),
            shape_fn=_make_pool_shape(_n, _is_max), check_fn=_make_pool_check(_n, _is_max),
            engine_class=_t, torch_class=_t, icon="pool", key_params=("kernel_size", "stride"),
            id_prefix="pool",
        ))


def _make_adaptive(n: int, is_max: bool) -> NodeSpec:
    layout = "(N, C, L)" if n == 1 else "(N, C, H, W)"

    def rule(p, s):
        x = _in(s)
        _need_ndim(x, n + 2, layout)
        return {"out": (*x[:2], *_tuple(p["output_size"], n))}

    kind = "Max" if is_max else "Avg"
    what = "a sequence of any length" if n == 1 else "any image size"
    size = (ParamSpec("output_size", "int", 1, min=1, max=MAX_DIM, help="Output length") if n == 1 else
            ParamSpec("output_size", "int-tuple", 1, length=2, min=1, max=MAX_DIM,
                      help="Output height and width"))
    return NodeSpec(
        type=f"Adaptive{kind}Pool{n}d", category="Pooling",
        description=f"{'Max' if is_max else 'Average'}-pools {what} down to a fixed output size",
        inputs=_IN, outputs=_OUT, params=(size,), shape_fn=rule,
        engine_class=f"Adaptive{kind}Pool{n}d", torch_class=f"Adaptive{kind}Pool{n}d",
        icon="pool", key_params=("output_size",), id_prefix="pool",
    )


for _n in (2, 1):
    for _is_max in (False, True):
        _register(_make_adaptive(_n, _is_max))


# ---------------------------------------------------------------------------------------------
# Normalization
# ---------------------------------------------------------------------------------------------
def _norm_common(affine_name: str = "affine", affine: bool = True) -> tuple[ParamSpec, ...]:
    return (
        ParamSpec("eps", "float", 1e-5, min=0.0, max=1.0, help="Added to the variance for stability"),
        ParamSpec(affine_name, "bool", affine, help="Learn a per-feature scale and shift"),
    )


def _running_stats(track: bool) -> tuple[ParamSpec, ...]:
    return (
        ParamSpec("momentum", "float", 0.1, nullable=True, min=0.0, max=1.0,
                  help="Update rate of the running statistics (empty: cumulative average)"),
        ParamSpec("track_running_stats", "bool", track, help="Keep running mean/variance for evaluation"),
    )


def _make_channel_norm(kind: str, n: int, description: str) -> NodeSpec:
    """BatchNorm and InstanceNorm: per-channel statistics (over the batch, or per sample), the same
    parameters and buffers; instance norm starts without affine and running statistics, as in PyTorch."""
    batch = kind == "BatchNorm"
    layouts = {1: ((2, 3), "(N, C) or (N, C, L)") if batch else ((3,), "(N, C, L)"),
               2: ((4,), "(N, C, H, W)")}
    ndims, layout = layouts[n]

    def rule(p, s):
        x = _in(s)
        _need_ndim(x, ndims, layout)
        return {"out": x}

    return NodeSpec(
        type=f"{kind}{n}d", category="Normalization", description=description, inputs=_IN, outputs=_OUT,
        params=(*_norm_common(affine=batch), *_running_stats(batch)),
        shape_fn=rule,
        count_fn=lambda p, s: 2 * _in(s)[1] if p["affine"] else 0,
        macs_fn=lambda p, s: _per_sample(_in(s)),
        kwargs_fn=lambda p, s: {"num_features": _in(s)[1]},
        engine_class=f"{kind}{n}d", torch_class=f"{kind}{n}d", icon="norm",
        id_prefix="bn" if batch else "inorm",
    )


_CHANNEL_NORMS = {
    "BatchNorm": "Normalises each channel over the batch, then scales and shifts",
    "InstanceNorm": "Normalises each channel of each sample on its own (style transfer, small batches)",
}
for _kind, _description in _CHANNEL_NORMS.items():
    for _n in (1, 2):
        _register(_make_channel_norm(_kind, _n, _description))


def _layernorm_shape(p, s):
    x = _in(s)
    if len(x) < p["normalized_dims"] + 1:
        raise ShapeError(f"normalises the last {p['normalized_dims']} dimensions, but the input "
                         f"{format_shape(x)} has only {len(x) - 1} besides N", "in")
    return {"out": x}


def _layernorm_normalized(p, s) -> tuple[int, ...]:
    return tuple(_in(s)[len(_in(s)) - p["normalized_dims"]:])


def _normalized_dims() -> ParamSpec:
    return ParamSpec("normalized_dims", "int", 1, min=1, max=7, ctor=False,
                     help="How many trailing dimensions to normalise over (PyTorch's normalized_shape)")


_register(NodeSpec(
    type="LayerNorm", category="Normalization",
    description="Normalises each sample over its last dimension(s), then scales and shifts",
    inputs=_IN, outputs=_OUT,
    params=(
        _normalized_dims(),
        *_norm_common("elementwise_affine"),
        ParamSpec("bias", "bool", True, only_when=("elementwise_affine", (True,)), help="Learn the shift"),
    ),
    shape_fn=_layernorm_shape,
    count_fn=lambda p, s: (_prod(_layernorm_normalized(p, s)) * (2 if p["bias"] else 1)
                           if p["elementwise_affine"] else 0),
    macs_fn=lambda p, s: _per_sample(_in(s)),
    kwargs_fn=lambda p, s: {"normalized_shape": _layernorm_normalized(p, s)},
    engine_class="LayerNorm", torch_class="LayerNorm", icon="norm", id_prefix="ln",
))


_register(NodeSpec(
    type="RMSNorm", category="Normalization",
    description="Divides each sample by the root mean square of its last dimension(s), then scales",
    inputs=_IN, outputs=_OUT,
    params=(
        _normalized_dims(),
        ParamSpec("eps", "float", None, nullable=True, min=0.0, max=1.0,
                  help="Added to the mean square for stability (empty: float32's machine epsilon)"),
        ParamSpec("elementwise_affine", "bool", True, help="Learn a per-feature scale"),
    ),
    shape_fn=_layernorm_shape,
    count_fn=lambda p, s: _prod(_layernorm_normalized(p, s)) if p["elementwise_affine"] else 0,
    macs_fn=lambda p, s: _per_sample(_in(s)),
    kwargs_fn=lambda p, s: {"normalized_shape": _layernorm_normalized(p, s)},
    engine_class="RMSNorm", torch_class="RMSNorm", icon="norm", id_prefix="rms",
))


def _groupnorm_shape(p, s):
    x = _in(s)
    _need_min_ndim(x, 2, "(N, C, *)")
    if x[1] % p["num_groups"]:
        raise ShapeError(f"has {x[1]} channels, which num_groups={p['num_groups']} does not divide", "in")
    return {"out": x}


_register(NodeSpec(
    type="GroupNorm", category="Normalization",
    description="Normalises groups of channels within each sample",
    inputs=_IN, outputs=_OUT,
    params=(_size("num_groups", 8, "Number of channel groups"), *_norm_common()),
    shape_fn=_groupnorm_shape,
    count_fn=lambda p, s: 2 * _in(s)[1] if p["affine"] else 0,
    macs_fn=lambda p, s: _per_sample(_in(s)),
    kwargs_fn=lambda p, s: {"num_channels": _in(s)[1]},
    engine_class="GroupNorm", torch_class="GroupNorm", icon="norm", key_params=("num_groups",),
    id_prefix="gn",
))


# ---------------------------------------------------------------------------------------------
# Regularization
# ---------------------------------------------------------------------------------------------
def _dropout_p() -> ParamSpec:
    return ParamSpec("p", "float", 0.5, min=0.0, max=1.0,
                     help="Probability of zeroing an element in training")


def _dropout2d_shape(p, s):
    x = _in(s)
    _need_ndim(x, 4, "(N, C, H, W)")
    return {"out": x}


_register(NodeSpec(
    type="Dropout", category="Regularization", description="Zeroes random elements while training",
    inputs=_IN, outputs=_OUT, params=(_dropout_p(),), shape_fn=lambda p, s: {"out": _in(s)},
    engine_class="Dropout", torch_class="Dropout", icon="dropout", key_params=("p",), id_prefix="drop",
))
_register(NodeSpec(
    type="Dropout2d", category="Regularization", description="Zeroes random whole channels while training",
    inputs=_IN, outputs=_OUT, params=(_dropout_p(),), shape_fn=_dropout2d_shape,
    engine_class="Dropout2d", torch_class="Dropout2d", icon="dropout", key_params=("p",), id_prefix="drop",
))


# ---------------------------------------------------------------------------------------------
# Recurrent
# ---------------------------------------------------------------------------------------------
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _make_rnn(kind: str) -> NodeSpec:
    gates = _GATES[kind]

    def rule(p, s):
        x = _in(s)
        _need_ndim(x, 3, "(N, L, features)")
        width = p["hidden_size"] * (2 if p["bidirectional"] else 1)
        return {"out": (x[0], x[1], width) if p["return"] == "sequence" else (x[0], width)}

    def count(p, s):
        h, dirs = p["hidden_size"], 2 if p["bidirectional"] else 1
        total = 0
        for layer in range(p["num_layers"]):
            in_size = _in(s)[2] if layer == 0 else h * dirs
            total += dirs * (gates * h * (in_size + h) + (2 * gates * h if p["bias"] else 0))
        return total

    def macs(p, s):
        x = _in(s)
        h, dirs = p["hidden_size"], 2 if p["bidirectional"] else 1
        per_step = sum(dirs * gates * h * ((x[2] if layer == 0 else h * dirs) + h)
                       for layer in range(p["num_layers"]))
        return x[1] * per_step

    params = [
        _size("hidden_size", 64, "Size of the hidden state"),
        ParamSpec("num_layers", "int", 1, min=1, max=64, help="Stacked recurrent layers"),
    ]
    if kind == "RNN":
        params.append(ParamSpec("nonlinearity", "choice", "tanh", choices=("tanh", "relu"),
                                help="Activation of the recurrence"))
    params += [
        _bias(),
        ParamSpec("dropout", "float", 0.0, min=0.0, max=1.0, help="Dropout between stacked layers"),
        ParamSpec("bidirectional", "bool", False, help="Also run the sequence backwards; doubles the width"),
        ParamSpec("return", "choice", "sequence", choices=("sequence", "last"), ctor=False,
                  help="'sequence': every step's output (N, L, H); 'last': the final hidden state (N, H), "
                       "e.g. to feed a Linear"),
        *_init_params(),
    ]
    return NodeSpec(
        type=kind, category="Recurrent",
        description={"RNN": "Elman recurrent layer over a sequence (N, L, features)",
                     "LSTM": "Long short-term memory layer over a sequence (N, L, features)",
                     "GRU": "Gated recurrent unit layer over a sequence (N, L, features)"}[kind],
        inputs=_IN, outputs=_OUT, params=tuple(params), shape_fn=rule, count_fn=count, macs_fn=macs,
        kwargs_fn=lambda p, s: {"input_size": _in(s)[2], "batch_first": True},
        engine_class=kind, torch_class=kind, icon="recurrent", key_params=("hidden_size", "return"),
        id_prefix=kind.lower(),
    )


for _kind in ("RNN", "LSTM", "GRU"):
    _register(_make_rnn(_kind))


# ---------------------------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------------------------
def _attention_shape(heads_param: str):
    def rule(p, s):
        x = _in(s)
        _need_ndim(x, 3, "(N, L, E)")
        if x[2] % p[heads_param]:
            raise ShapeError(f"embedding size {x[2]} of {format_shape(x)} is not divisible by "
                             f"{heads_param}={p[heads_param]}", "in")
        return {"out": x}

    return rule


def _mha_count(e: int, bias: bool) -> int:
    return 4 * e * e + (4 * e if bias else 0)


def _mha_macs(x: Shape) -> int:
    length, e = x[1], x[2]
    return 4 * length * e * e + 2 * length * length * e


_register(NodeSpec(
    type="MultiheadAttention", category="Attention",
    description="Multi-head self-attention over a sequence (N, L, E)",
    inputs=_IN, outputs=_OUT,
    params=(
        ParamSpec("num_heads", "int", 4, min=1, max=4096, help="Number of attention heads (must divide E)"),
        ParamSpec("dropout", "float", 0.0, min=0.0, max=1.0, help="Dropout on the attention weights"),
        _bias(), *_init_params(),
    ),
    shape_fn=_attention_shape("num_heads"),
    count_fn=lambda p, s: _mha_count(_in(s)[2], p["bias"]),
    macs_fn=lambda p, s: _mha_macs(_in(s)),
    kwargs_fn=lambda p, s: {"embed_dim": _in(s)[2], "batch_first": True},
    engine_class="MultiheadAttention", torch_class="MultiheadAttention", icon="attention",
    key_params=("num_heads",), id_prefix="attn",
))

_register(NodeSpec(
    type="TransformerEncoderLayer", category="Attention",
    description="Self-attention plus feed-forward block with residuals and layer norms",
    inputs=_IN, outputs=_OUT,
    params=(
        ParamSpec("nhead", "int", 4, min=1, max=4096, help="Number of attention heads (must divide d_model)"),
        _size("dim_feedforward", 256, "Width of the feed-forward block"),
        ParamSpec("dropout", "float", 0.1, min=0.0, max=1.0, help="Dropout inside the block"),
        ParamSpec("activation", "choice", "relu", choices=("relu", "gelu"), help="Feed-forward activation"),
        ParamSpec("layer_norm_eps", "float", 1e-5, min=0.0, max=1.0, help="LayerNorm epsilon"),
        ParamSpec("norm_first", "bool", False, help="Pre-norm (LayerNorm before attention and feed-forward)"),
        _bias(), *_init_params(),
    ),
    shape_fn=_attention_shape("nhead"),
    count_fn=lambda p, s: (_mha_count(_in(s)[2], p["bias"])
                           + 2 * _in(s)[2] * p["dim_feedforward"]
                           + ((p["dim_feedforward"] + _in(s)[2]) if p["bias"] else 0)
                           + 2 * _in(s)[2] * (2 if p["bias"] else 1)),
    macs_fn=lambda p, s: _mha_macs(_in(s)) + 2 * _in(s)[1] * _in(s)[2] * p["dim_feedforward"],
    kwargs_fn=lambda p, s: {"d_model": _in(s)[2], "batch_first": True},
    engine_class="TransformerEncoderLayer", torch_class="TransformerEncoderLayer", icon="attention",
    key_params=("nhead", "dim_feedforward"), id_prefix="encoder",
))


# ---------------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------------
def _same(p, s):
    return {"out": _in(s)}


def _softmax_shape(p, s):
    _axis(p["dim"], _in(s))
    return {"out": _in(s)}


def _glu_shape(p, s):
    x = _in(s)
    d = _axis(p["dim"], x)
    if x[d] % 2:
        raise ShapeError(f"halves dim {p['dim']}, which has odd size {x[d]} in {format_shape(x)}", "in")
    return {"out": (*x[:d], x[d] // 2, *x[d + 1:])}


def _hardtanh_check(p):
    if p["min_val"] >= p["max_val"]:
        raise ParamError(f"min_val ({p['min_val']:g}) must be below max_val ({p['max_val']:g})")


def _prelu_shape(p, s):
    x = _in(s)
    if p["per_channel"]:
        _need_min_ndim(x, 2, "(N, C, *) with a slope per channel C")
    return {"out": x}


def _activation(type_: str, description: str, params: tuple[ParamSpec, ...] = (), shape_fn=_same,
                check_fn=None, key_params: tuple[str, ...] = (), **extra: Any) -> NodeSpec:
    return NodeSpec(
        type=type_, category="Activation", description=description, inputs=_IN, outputs=_OUT, params=params,
        shape_fn=shape_fn, check_fn=check_fn, engine_class=type_, torch_class=type_, icon="activation",
        key_params=key_params, id_prefix=type_.lower(), **extra,
    )


def _lambd_param() -> ParamSpec:
    return ParamSpec("lambd", "float", 0.5, min=0.0, max=1e6, help="Values within ±lambd become 0")


for _spec in (
    _activation("ReLU", "max(0, x)"),
    _activation("LeakyReLU", "x if x > 0 else negative_slope · x",
                (ParamSpec("negative_slope", "float", 0.01, min=-1e3, max=1e3, help="Slope for x < 0"),)),
    _activation("ELU", "x if x > 0 else alpha · (exp(x) - 1)",
                (ParamSpec("alpha", "float", 1.0, min=0.0, max=1e3, help="Saturation value for x < 0"),)),
    _activation("GELU", "x · Φ(x), the Gaussian error linear unit",
                (ParamSpec("approximate", "choice", "none", choices=("none", "tanh"),
                           help="'tanh' uses the faster tanh approximation"),)),
    _activation("SiLU", "x · sigmoid(x) (swish)"),
    _activation("Sigmoid", "1 / (1 + exp(-x))"),
    _activation("Tanh", "Hyperbolic tangent"),
    _activation("Softmax", "Turns scores into probabilities along a dimension",
                (_dim_param(-1, "Dimension that sums to 1"),), _softmax_shape, key_params=("dim",)),
    _activation("LogSoftmax", "log(softmax(x)) along a dimension; pairs with NLLLoss",
                (_dim_param(-1, "Dimension of the softmax"),), _softmax_shape, key_params=("dim",)),
    _activation("Softplus", "Smooth ReLU: log(1 + exp(beta · x)) / beta",
                (ParamSpec("beta", "float", 1.0, min=1e-6, max=1e6, help="Sharpness"),
                 ParamSpec("threshold", "float", 20.0, min=0.0, max=1e6,
                           help="Above beta · x > threshold the output is x"))),
    _activation("Hardtanh", "Clamps x to [min_val, max_val]",
                (ParamSpec("min_val", "float", -1.0, min=-1e6, max=1e6, help="Lower clamp"),
                 ParamSpec("max_val", "float", 1.0, min=-1e6, max=1e6, help="Upper clamp")),
                check_fn=_hardtanh_check),
    _activation("GLU", "Gated linear unit: first half · sigmoid(second half) along a dimension",
                (_dim_param(-1, "Dimension split in half"),), _glu_shape, key_params=("dim",)),
    _activation("ReLU6", "min(max(0, x), 6): ReLU capped at 6"),
    _activation("SELU", "Self-normalising ELU: scale · ELU(x) with fixed alpha and scale"),
    _activation("CELU", "x if x > 0 else alpha · (exp(x / alpha) - 1), continuously differentiable",
                (ParamSpec("alpha", "float", 1.0, min=1e-6, max=1e3, help="Saturation value for x < 0"),)),
    _activation("PReLU", "x if x > 0 else a · x, with the slope a learned",
                (ParamSpec("per_channel", "bool", False, ctor=False,
                           help="Learn one slope per channel (dimension 1) instead of one shared slope"),
                 ParamSpec("init_slope", "float", 0.25, min=-1e3, max=1e3, ctor=False,
                           help="The value every slope starts at (PyTorch's init)")),
                _prelu_shape, key_params=("per_channel",),
                count_fn=lambda p, s: _in(s)[1] if p["per_channel"] else 1,
                kwargs_fn=lambda p, s: {"num_parameters": _in(s)[1] if p["per_channel"] else 1,
                                        "init": p["init_slope"]}),
    _activation("Mish", "x · tanh(softplus(x))"),
    _activation("Hardswish", "x · ReLU6(x + 3) / 6, a cheap swish (MobileNetV3)"),
    _activation("Hardsigmoid", "ReLU6(x + 3) / 6, a cheap piecewise-linear sigmoid"),
    _activation("Softsign", "x / (1 + |x|)"),
    _activation("LogSigmoid", "log(sigmoid(x)), computed stably as -softplus(-x)"),
    _activation("Softmin", "softmax(-x) along a dimension: the smallest values get the most weight",
                (_dim_param(-1, "Dimension that sums to 1"),), _softmax_shape, key_params=("dim",)),
    _activation("Tanhshrink", "x - tanh(x)"),
    _activation("Softshrink", "Shrinks x towards 0 by lambd; values within ±lambd become 0",
                (_lambd_param(),), key_params=("lambd",)),
    _activation("Hardshrink", "x where |x| > lambd, else 0", (_lambd_param(),), key_params=("lambd",)),
):
    _register(_spec)


# ---------------------------------------------------------------------------------------------
# Reshape
# ---------------------------------------------------------------------------------------------
def _flatten_shape(p, s):
    x = _in(s)
    start = _axis(p["start_dim"], x, "start_dim")
    end = _axis(p["end_dim"], x, "end_dim")
    if start > end:
        raise ShapeError(
            f"start_dim {p['start_dim']} comes after end_dim {p['end_dim']} for {format_shape(x)}", "in")
    return {"out": (*x[:start], _prod(x[start:end + 1]), *x[end + 1:])}


def _fill_minus_one(target: Sequence[int], total: int, x: Shape, what: str) -> tuple[int, ...]:
    if sum(1 for t in target if t == -1) > 1:
        raise ShapeError(f"{what} may contain -1 only once", "in")
    known = _prod([t for t in target if t != -1])
    if -1 in target:
        if known == 0 or total % known:
            raise ShapeError(
                f"can't reshape {format_shape(x)}: {total} elements don't fit {list(target)}", "in")
        return tuple(total // known if t == -1 else t for t in target)
    if known != total:
        raise ShapeError(f"can't reshape {format_shape(x)}: {total} elements don't fit {list(target)} "
                         f"({known} elements)", "in")
    return tuple(target)


def _unflatten_shape(p, s):
    x = _in(s)
    d = _axis(p["dim"], x)
    sizes = _fill_minus_one(_tuple(p["unflattened_size"], 1), x[d], x, "unflattened_size")
    return {"out": (*x[:d], *sizes, *x[d + 1:])}


def _reshape_shape(p, s):
    x = _in(s)
    return {"out": (x[0], *_fill_minus_one(_tuple(p["shape"], 1), _per_sample(x), x, "shape"))}


def _permute_shape(p, s):
    x = _in(s)
    dims = [d + len(x) if d < 0 else d for d in _tuple(p["dims"], 1)]
    if sorted(dims) != list(range(len(x))):
        raise ShapeError(f"dims {p['dims']} must list every dimension of the {len(x)}-D input "
                         f"{format_shape(x)} exactly once", "in")
    if dims[0] != 0:
        raise ShapeError("dims must start with 0: the batch dimension N stays first", "in")
    return {"out": tuple(x[d] for d in dims)}


_register(NodeSpec(
    type="Flatten", category="Reshape", description="Merges a range of dimensions into one",
    inputs=_IN, outputs=_OUT,
    params=(ParamSpec("start_dim", "int", 1, min=-8, max=8, help="First dimension to merge (1 = after N)"),
            ParamSpec("end_dim", "int", -1, min=-8, max=8, help="Last dimension to merge")),
    shape_fn=_flatten_shape, engine_class="Flatten", torch_class="Flatten", icon="reshape",
    id_prefix="flatten",
))
_register(NodeSpec(
    type="Unflatten", category="Reshape", description="Splits one dimension into several",
    inputs=_IN, outputs=_OUT,
    params=(_dim_param(1, "Dimension to split"),
            ParamSpec("unflattened_size", "int-tuple", [1, -1], min=-1, max=MAX_DIM,
                      help="Sizes it splits into; one may be -1 (inferred)")),
    shape_fn=_unflatten_shape, engine_class="Unflatten", torch_class="Unflatten", icon="reshape",
    key_params=("unflattened_size",), id_prefix="unflatten",
))
_register(NodeSpec(
    type="Reshape", category="Reshape",
    description="Gives each sample a new shape with the same element count",
    inputs=_IN, outputs=_OUT,
    params=(ParamSpec("shape", "int-tuple", [-1], min=-1, max=MAX_DIM,
                      help="New per-sample shape (without N); one entry may be -1"),),
    shape_fn=_reshape_shape, engine_class="Reshape", torch_class=None, icon="reshape", key_params=("shape",),
    id_prefix="reshape",
))
_register(NodeSpec(
    type="Permute", category="Reshape", description="Reorders dimensions, like x.permute(0, 2, 1)",
    inputs=_IN, outputs=_OUT,
    params=(ParamSpec("dims", "int-tuple", [0, 2, 1], min=-8, max=8,
                      help="New order of all dimensions, starting with 0 (the batch)"),),
    shape_fn=_permute_shape, engine_class="Permute", torch_class=None, icon="reshape", key_params=("dims",),
    id_prefix="permute",
))


def _pixel_shuffle_shape(p, s):
    x = _in(s)
    _need_ndim(x, 4, "(N, C, H, W)")
    r = p["upscale_factor"]
    if x[1] % (r * r):
        raise ShapeError(f"has {x[1]} channels in {format_shape(x)}, which upscale_factor² = {r * r} "
                         "does not divide", "in")
    return {"out": (x[0], x[1] // (r * r), x[2] * r, x[3] * r)}


def _pixel_unshuffle_shape(p, s):
    x = _in(s)
    _need_ndim(x, 4, "(N, C, H, W)")
    r = p["downscale_factor"]
    if x[2] % r or x[3] % r:
        raise ShapeError(f"height and width of {format_shape(x)} must be multiples of downscale_factor={r}",
                         "in")
    return {"out": (x[0], x[1] * r * r, x[2] // r, x[3] // r)}


_register(NodeSpec(
    type="PixelShuffle", category="Reshape",
    description="Trades channels for resolution: (N, C·r², H, W) -> (N, C, H·r, W·r)",
    inputs=_IN, outputs=_OUT,
    params=(ParamSpec("upscale_factor", "int", 2, min=1, max=1024,
                      help="r: how many times taller and wider"),),
    shape_fn=_pixel_shuffle_shape, engine_class="PixelShuffle", torch_class="PixelShuffle", icon="upsample",
    key_params=("upscale_factor",), id_prefix="shuffle",
))
_register(NodeSpec(
    type="PixelUnshuffle", category="Reshape",
    description="Trades resolution for channels: (N, C, H·r, W·r) -> (N, C·r², H, W)",
    inputs=_IN, outputs=_OUT,
    params=(ParamSpec("downscale_factor", "int", 2, min=1, max=1024,
                      help="r: how many times shorter and narrower"),),
    shape_fn=_pixel_unshuffle_shape, engine_class="PixelUnshuffle", torch_class="PixelUnshuffle",
    icon="reshape", key_params=("downscale_factor",), id_prefix="unshuffle",
))

_UPSAMPLE_LAYOUTS = {"nearest": ((3, 4), "(N, C, L) or (N, C, H, W)"), "linear": ((3,), "(N, C, L)"),
                     "bilinear": ((4,), "(N, C, H, W)")}


def _upsample_check(p):
    if (p["size"] is None) == (p["scale_factor"] is None):
        raise ParamError("set exactly one of size and scale_factor (leave the other empty)")


def _upsample_shape(p, s):
    x = _in(s)
    ndims, layout = _UPSAMPLE_LAYOUTS[p["mode"]]
    _need_ndim(x, ndims, f"{layout} for mode {p['mode']}")
    n = len(x) - 2
    if p["size"] is not None:
        size = _tuple(p["size"], n)
        if len(size) != n:
            raise ShapeError(f"size {p['size']} has {len(size)} entries, but {format_shape(x)} has {n} "
                             "spatial dimensions", "in")
        return {"out": (*x[:2], *size)}
    sizes = tuple(math.floor(d * p["scale_factor"]) for d in x[2:])
    if min(sizes) < 1:
        raise ShapeError(f"scale_factor {p['scale_factor']:g} shrinks {format_shape(x)} to nothing", "in")
    return {"out": (*x[:2], *sizes)}


_register(NodeSpec(
    type="Upsample", category="Reshape",
    description="Resizes images or sequences by interpolation (no weights)",
    inputs=_IN, outputs=_OUT,
    params=(
        ParamSpec("size", "int-tuple", None, nullable=True, min=1, max=MAX_DIM,
                  help="Output size, e.g. [64, 64] (empty: use scale_factor)"),
        ParamSpec("scale_factor", "float", 2.0, nullable=True, min=1e-3, max=1e3,
                  help="Multiplier of every spatial size, rounded down (empty: use size)"),
        ParamSpec("mode", "choice", "nearest", choices=tuple(_UPSAMPLE_LAYOUTS),
                  help="nearest copies pixels; linear (sequences) and bilinear (images) interpolate"),
        ParamSpec("align_corners", "bool", False, only_when=("mode", ("linear", "bilinear")),
                  help="Match the corner pixels of input and output exactly"),
    ),
    shape_fn=_upsample_shape, check_fn=_upsample_check, engine_class="Upsample", torch_class="Upsample",
    icon="upsample", key_params=("scale_factor", "size", "mode"), id_prefix="up",
))


def _make_pad2d(type_: str, description: str) -> NodeSpec:
    def rule(p, s):
        x = _in(s)
        _need_ndim(x, (3, 4), "(N, C, H, W) or (N, H, W)")
        left, right, top, bottom = _tuple(p["padding"], 4)
        if type_ == "ReflectionPad2d" and (max(left, right) >= x[-1] or max(top, bottom) >= x[-2]):
            raise ShapeError(f"reflection padding must be smaller than the input it mirrors: "
                             f"{format_shape(x)} with padding (left, right, top, bottom) = "
                             f"{(left, right, top, bottom)}", "in")
        return {"out": (*x[:-2], x[-2] + top + bottom, x[-1] + left + right)}

    return NodeSpec(
        type=type_, category="Reshape", description=description, inputs=_IN, outputs=_OUT,
        params=(ParamSpec("padding", "int-tuple", 1, length=4, min=0, max=MAX_DIM,
                          help="Rows and columns added: one number, or [left, right, top, bottom]"),),
        shape_fn=rule, engine_class=type_, torch_class=type_, icon="pad", key_params=("padding",),
        id_prefix="pad",
    )


for _spec in (
    _make_pad2d("ZeroPad2d", "Adds rows and columns of zeros around an image"),
    _make_pad2d("ReflectionPad2d", "Pads an image with its own mirror image (edge not repeated)"),
    _make_pad2d("ReplicationPad2d", "Pads an image by repeating its edge pixels"),
):
    _register(_spec)


# ---------------------------------------------------------------------------------------------
# Merge
# ---------------------------------------------------------------------------------------------
def _shapes(s) -> list[Shape]:
    return [tuple(x) for x in s["in"]]


def _concat_shape(p, s):
    shapes = _shapes(s)
    first = shapes[0]
    d = _axis(p["dim"], first)
    total = 0
    for i, x in enumerate(shapes, start=1):
        if len(x) != len(first) or x[:d] != first[:d] or x[d + 1:] != first[d + 1:]:
            want = format_shape((*first[:d], "*", *first[d + 1:]))
            raise ShapeError(f"expects {want} (like its first input, any size along dim {p['dim']}), "
                             f"got {format_shape(x)} on input {i}", "in")
        total += x[d]
    return {"out": (*first[:d], total, *first[d + 1:])}


_MERGE_IN = (PortSpec("in", variadic=True, min_count=2, help="Two or more inputs, in wiring order"),)
_register(NodeSpec(
    type="Add", category="Merge", description="Elementwise sum of its inputs (skip connections)",
    inputs=_MERGE_IN, outputs=_OUT, params=(), shape_fn=lambda p, s: {"out": _broadcast(_shapes(s), "Add")},
    icon="merge-add", id_prefix="add",
))
_register(NodeSpec(
    type="Multiply", category="Merge", description="Elementwise product of its inputs (gating)",
    inputs=_MERGE_IN, outputs=_OUT, params=(),
    shape_fn=lambda p, s: {"out": _broadcast(_shapes(s), "Multiply")}, icon="merge-multiply", id_prefix="mul",
))
_register(NodeSpec(
    type="Concat", category="Merge", description="Joins its inputs along a dimension, in wiring order",
    inputs=_MERGE_IN, outputs=_OUT,
    params=(_dim_param(1, "Dimension to join along (1 = features/channels)"),),
    shape_fn=_concat_shape, icon="merge-concat", key_params=("dim",), id_prefix="cat",
))


# ---------------------------------------------------------------------------------------------
# Imported: a PyTorch module the catalogue has no entry for (app/export/importer.py)
# ---------------------------------------------------------------------------------------------
def _unknown_shape(p, s):
    raise ShapeError(f"unknown module {p['module']}: edit or replace it with a known layer", None)


_register(NodeSpec(
    type="Unknown", category="Imported",
    description="A module imported from PyTorch that Wiregrad does not know; replace it to train",
    inputs=(PortSpec("in", required=False, variadic=True, min_count=0, help="What fed the module"),),
    outputs=_OUT,
    params=(ParamSpec("module", "str", "", ctor=False, help="The imported module's class or function"),),
    shape_fn=_unknown_shape, icon="error", key_params=("module",), id_prefix="unknown",
))


# ---------------------------------------------------------------------------------------------
# Blocks (app/document/blocks.py): a block's definition holds BlockInput/BlockOutput nodes, its
# ports; an instance on the canvas is a Block node, whose ports and parameters come from the
# definition (`Document.node_spec`). Expanded for training, each port becomes a BlockPort.
# ---------------------------------------------------------------------------------------------
def _outside_block(what: str):
    def rule(p, s):
        raise ShapeError(f"a {what} belongs inside a block's definition (it is one of the block's ports)",
                         None)
    return rule


_register(NodeSpec(
    type="BlockInput", category="Blocks",
    description="An input port of the block being edited: what enters the block through it",
    inputs=(), outputs=_OUT, params=(), shape_fn=_outside_block("Block Input"), icon="input",
    id_prefix="in",
))
_register(NodeSpec(
    type="BlockOutput", category="Blocks",
    description="An output port of the block being edited: what leaves the block through it",
    inputs=_IN, outputs=(), params=(), shape_fn=_outside_block("Block Output"), icon="output",
    id_prefix="out",
))
_register(NodeSpec(
    type="BlockPort", category="Blocks",
    description="A block's port in the expanded graph: passes its input on unchanged",
    inputs=_IN, outputs=_OUT, params=(), shape_fn=lambda p, s: {"out": _in(s)}, icon="layer",
    id_prefix="port",
))


def _block_outside_document(p, s):
    raise ShapeError(f"block {p['block']!r} is read with the document that defines it", None)


_register(NodeSpec(
    type="Block", category="Blocks",
    description="A block: a group of layers defined once and used here (double-click to open it)",
    inputs=(), outputs=(),
    params=(
        ParamSpec("block", "str", "", ctor=False, help="The definition this instance uses"),
        ParamSpec("repeat", "int", 1, min=1, max=1000, ctor=False,
                  help="How many copies run in series, each with its own weights"),
    ),
    shape_fn=_block_outside_document, icon="layer", key_params=("block", "repeat"), id_prefix="block",
))
INTERNAL_TYPES = frozenset({"BlockPort"})
"""Types the expanded graph uses and no one places by hand."""


# ---------------------------------------------------------------------------------------------
# lookup
# ---------------------------------------------------------------------------------------------
def catalogue() -> dict[str, NodeSpec]:
    """All node types, by type name, grouped in CATEGORIES order."""
    order = {c: i for i, c in enumerate(CATEGORIES)}
    return dict(sorted(_SPECS.items(), key=lambda kv: order[kv[1].category]))


def close_types(name: str) -> list[str]:
    """Known type names that look like `name` (for "did you mean" messages)."""
    if not isinstance(name, str):
        return []
    # difflib's ratio is 2*matches/(len(a)+len(b)), so a name over (2/0.6 - 1) times the longest type
    # name can never reach the cutoff; comparing a 20 MB one anyway took seconds (and twice per load)
    longest = max(len(t) for t in _SPECS)
    if len(name) > 3 * longest:
        return []
    lowered = {t.lower(): t for t in _SPECS}
    if name.lower() in lowered:  # only the capitalisation is off
        return [lowered[name.lower()]]
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)
    return [lowered[h] for h in hits]


def unknown_type_message(name: Any) -> str:
    close = close_types(name)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"unknown node type {_short(name)}{hint}"


def find_spec(type_: str) -> NodeSpec | None:
    return _SPECS.get(type_) if isinstance(type_, str) else None


def get_spec(type_: str) -> NodeSpec:
    """The spec for a type; DocumentError naming close matches if there is none."""
    spec = find_spec(type_)
    if spec is None:
        raise DocumentError(unknown_type_message(type_))
    return spec
