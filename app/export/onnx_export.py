"""Document + weights -> an ONNX model (opset 17), built node by node with `onnx.helper` (no torch).
Tensor names are the node ids (paths inside blocks, `stage2/0/conv1`: the expanded graph computes the same,
so a block document exports as its layers); the batch dimension is dynamic ("N").
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.document import Document
from app.document.blocks import module_path

from .graph import ExportError, ExportGraph, ExportNode, load_split, plan_export

if TYPE_CHECKING:
    from app.datasets.split import DatasetSplit, Normalization

OPSET = 17
_SIMPLE = {"ReLU": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "SELU": "Selu", "Softsign": "Softsign",
           "Hardswish": "HardSwish"}
_PAD_MODES = {"reflect": "reflect", "replicate": "edge"}


def _tuple(value: Any, n: int) -> list[int]:
    return list(value) if isinstance(value, list | tuple) else [value] * n


class _Builder:
    """Collects ONNX nodes and initializers; names intermediate tensors after the node id."""

    def __init__(self, state: Mapping[str, np.ndarray]) -> None:
        import onnx.helper

        self.h = onnx.helper
        self.state = state
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        n = self._count.get(base, 0)
        self._count[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def const(self, name: str, value: Any, dtype: Any = np.float32) -> str:
        import onnx.numpy_helper

        name = self.fresh(name)
        array = np.ascontiguousarray(np.asarray(value, dtype))
        self.initializers.append(onnx.numpy_helper.from_array(array, name))
        return name

    def weight(self, nid: str, key: str) -> np.ndarray:
        name = f"{module_path(nid)}.{key}"  # inside blocks the state dict names a path: stage2.0.conv1.weight
        if name not in self.state:
            raise ExportError(f"node {nid}: the weights have no {name}")
        return np.asarray(self.state[name], dtype=np.float32)

    def has(self, nid: str, key: str) -> bool:
        return f"{module_path(nid)}.{key}" in self.state

    def op(self, op_type: str, inputs: Sequence[str], name: str, n_out: int = 1, **attrs: Any) -> Any:
        outs = [self.fresh(name if i == 0 else f"{name}:{i}") for i in range(n_out)]
        self.nodes.append(self.h.make_node(op_type, list(inputs), outs, name=self.fresh(f"{name}/{op_type}"),
                                           **attrs))
        return outs[0] if n_out == 1 else outs


# ---------------------------------------------------------------------------------------------
# one emitter per node type: (builder, node, input tensor names, output name) -> output tensor name
# ---------------------------------------------------------------------------------------------
Emitter = Callable[[_Builder, ExportNode, list[str], str], str]
_EMITTERS: dict[str, Emitter] = {}


def _emits(*types: str):
    def register(fn: Emitter) -> Emitter:
        for t in types:
            _EMITTERS[t] = fn
        return fn

    return register


@_emits("Linear")
def _linear(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    w = b.weight(node.id, "weight")
    bias = b.weight(node.id, "bias") if node.params["bias"] else None
    if len(node.in_shapes["in"]) == 2:
        inputs = [xs[0], b.const(f"{node.id}.weight", w)]
        if bias is not None:
            inputs.append(b.const(f"{node.id}.bias", bias))
        return b.op("Gemm", inputs, out, transB=1)
    y = b.op("MatMul", [xs[0], b.const(f"{node.id}.weight_t", w.T)], out if bias is None else f"{out}/matmul")
    return y if bias is None else b.op("Add", [y, b.const(f"{node.id}.bias", bias)], out)


def _conv_pads(node: ExportNode, n: int) -> list[int]:
    p = node.params
    if p["padding"] == "valid":
        return [0] * (2 * n)
    if p["padding"] == "same":  # stride 1: PyTorch puts the odd extra padding on the right
        k, d = _tuple(p["kernel_size"], n), _tuple(p["dilation"], n)
        total = [di * (ki - 1) for ki, di in zip(k, d)]
        return [t // 2 for t in total] + [t - t // 2 for t in total]
    pad = _tuple(p["padding"], n)
    return pad + pad


@_emits("Conv1d", "Conv2d")
def _conv(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    p = node.params
    n = 1 if node.type == "Conv1d" else 2
    pads = _conv_pads(node, n)
    x = xs[0]
    if p["padding_mode"] != "zeros" and any(pads):
        mode = _PAD_MODES.get(p["padding_mode"])
        if mode is None:
            raise ExportError(f"not supported for ONNX: node {node.id} ({node.type}) with padding_mode "
                              f"{p['padding_mode']!r}")
        begin, end = pads[:n], pads[n:]
        x = b.op("Pad", [x, b.const(f"{node.id}.pads", [0, 0, *begin, 0, 0, *end], np.int64)],
                 f"{out}/pad", mode=mode)
        pads = [0] * (2 * n)
    inputs = [x, b.const(f"{node.id}.weight", b.weight(node.id, "weight"))]
    if p["bias"]:
        inputs.append(b.const(f"{node.id}.bias", b.weight(node.id, "bias")))
    return b.op("Conv", inputs, out, kernel_shape=_tuple(p["kernel_size"], n), strides=_tuple(p["stride"], n),
                pads=pads, dilations=_tuple(p["dilation"], n), group=p["groups"])


@_emits("ConvTranspose1d", "ConvTranspose2d")
def _conv_transpose(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    p = node.params
    n = int(node.type[-2])
    pad = _tuple(p["padding"], n)
    inputs = [xs[0], b.const(f"{node.id}.weight", b.weight(node.id, "weight"))]
    if p["bias"]:
        inputs.append(b.const(f"{node.id}.bias", b.weight(node.id, "bias")))
    return b.op("ConvTranspose", inputs, out, kernel_shape=_tuple(p["kernel_size"], n),
                strides=_tuple(p["stride"], n), pads=pad + pad, dilations=_tuple(p["dilation"], n),
                output_padding=_tuple(p["output_padding"], n), group=p["groups"])


@_emits("MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d")
def _pool(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    p = node.params
    n = int(node.type[-2])
    k = _tuple(p["kernel_size"], n)
    stride = k if p["stride"] is None else _tuple(p["stride"], n)
    pad = _tuple(p["padding"], n)
    attrs = dict(kernel_shape=k, strides=stride, pads=pad + pad, ceil_mode=int(p["ceil_mode"]))
    if node.type.startswith("Max"):
        return b.op("MaxPool", xs, out, dilations=_tuple(p["dilation"], n), **attrs)
    return b.op("AveragePool", xs, out, count_include_pad=int(p["count_include_pad"]), **attrs)


@_emits("AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d")
def _adaptive_pool(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    n = int(node.type[-2])
    size = node.in_shapes["in"][2:]
    target = _tuple(node.params["output_size"], n)
    is_max = "Max" in node.type
    if all(t == 1 for t in target):
        return b.op("GlobalMaxPool" if is_max else "GlobalAveragePool", xs, out)
    if any(s % t for s, t in zip(size, target)):
        raise ExportError(f"not supported for ONNX: node {node.id} ({node.type}) from {tuple(size)} to "
                          f"{tuple(target)}, which is not a whole-number window")
    k = [s // t for s, t in zip(size, target)]
    return b.op("MaxPool" if is_max else "AveragePool", xs, out, kernel_shape=k, strides=k)


def _channel_affine(b: _Builder, node: ExportNode) -> tuple[str, str]:
    """Per-channel scale and shift initializers: the learned ones, or 1 and 0 without affine."""
    c = node.in_shapes["in"][1]
    affine = node.params["affine"]
    scale = b.weight(node.id, "weight") if affine else np.ones(c, np.float32)
    shift = b.weight(node.id, "bias") if affine else np.zeros(c, np.float32)
    return b.const(f"{node.id}.weight", scale), b.const(f"{node.id}.bias", shift)


@_emits("BatchNorm1d", "BatchNorm2d", "InstanceNorm1d", "InstanceNorm2d")
def _batchnorm(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    p = node.params
    if not p["track_running_stats"]:
        if node.type.startswith("InstanceNorm"):  # each sample's own statistics, as in training
            return b.op("InstanceNormalization", [xs[0], *_channel_affine(b, node)], out,
                        epsilon=float(p["eps"]))
        raise ExportError(f"not supported for ONNX: node {node.id} ({node.type}) without running statistics "
                          "(it normalises with each batch's own statistics)")
    # evaluation with running statistics: the same affine map for batch and instance norm
    inputs = [xs[0], *_channel_affine(b, node),
              b.const(f"{node.id}.running_mean", b.weight(node.id, "running_mean")),
              b.const(f"{node.id}.running_var", b.weight(node.id, "running_var"))]
    return b.op("BatchNormalization", inputs, out, epsilon=float(p["eps"]))


@_emits("LayerNorm")
def _layernorm(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    p = node.params
    shape = node.in_shapes["in"][len(node.in_shapes["in"]) - p["normalized_dims"]:]
    affine = p["elementwise_affine"]
    scale = b.weight(node.id, "weight") if affine else np.ones(shape, np.float32)
    inputs = [xs[0], b.const(f"{node.id}.weight", scale)]
    if affine and p["bias"]:
        inputs.append(b.const(f"{node.id}.bias", b.weight(node.id, "bias")))
    return b.op("LayerNormalization", inputs, out, axis=-p["normalized_dims"], epsilon=float(p["eps"]))


@_emits("RMSNorm")
def _rmsnorm(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    # opset 17 has no RMSNormalization: x / sqrt(mean(x², last dims) + eps) · weight
    p = node.params
    dims = p["normalized_dims"]
    eps = float(np.finfo(np.float32).eps) if p["eps"] is None else float(p["eps"])
    x = xs[0]
    mean_sq = b.op("ReduceMean", [b.op("Mul", [x, x], f"{out}/sq")], f"{out}/mean_sq",
                   axes=list(range(-dims, 0)), keepdims=1)
    rms = b.op("Sqrt", [b.op("Add", [mean_sq, b.const(f"{node.id}.eps", eps)], f"{out}/mean_sq_eps")],
               f"{out}/rms")
    if not p["elementwise_affine"]:
        return b.op("Div", [x, rms], out)
    normed = b.op("Div", [x, rms], f"{out}/normed")
    return b.op("Mul", [normed, b.const(f"{node.id}.weight", b.weight(node.id, "weight"))], out)


@_emits("GroupNorm")
def _groupnorm(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    # opset 17 has no GroupNormalization: normalise (N, G, -1) by hand, then scale per channel
    p = node.params
    shape = node.in_shapes["in"]
    g, eps = p["num_groups"], float(p["eps"])
    grouped = b.op("Reshape", [xs[0], b.const(f"{node.id}.groups", [0, g, -1], np.int64)], f"{out}/grouped")
    mean = b.op("ReduceMean", [grouped], f"{out}/mean", axes=[2], keepdims=1)
    centred = b.op("Sub", [grouped, mean], f"{out}/centred")
    square = b.op("Mul", [centred, centred], f"{out}/sq")
    var = b.op("ReduceMean", [square], f"{out}/var", axes=[2], keepdims=1)
    std = b.op("Sqrt", [b.op("Add", [var, b.const(f"{node.id}.eps", eps)], f"{out}/var_eps")], f"{out}/std")
    normed = b.op("Div", [centred, std], f"{out}/normed")
    y = b.op("Reshape", [normed, b.const(f"{node.id}.shape", [0, *shape[1:]], np.int64)],
             out if not p["affine"] else f"{out}/unscaled")
    if not p["affine"]:
        return y
    per_channel = [shape[1]] + [1] * (len(shape) - 2)
    scale = b.const(f"{node.id}.weight", b.weight(node.id, "weight").reshape(per_channel))
    shift = b.const(f"{node.id}.bias", b.weight(node.id, "bias").reshape(per_channel))
    return b.op("Add", [b.op("Mul", [y, scale], f"{out}/scaled"), shift], out)


@_emits(*_SIMPLE)
def _simple(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op(_SIMPLE[node.type], xs, out)


@_emits("LeakyReLU")
def _leaky(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op("LeakyRelu", xs, out, alpha=float(node.params["negative_slope"]))


@_emits("ELU")
def _elu(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op("Elu", xs, out, alpha=float(node.params["alpha"]))


@_emits("GELU")
def _gelu(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    x = xs[0]
    nid = node.id
    if node.params["approximate"] == "tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = b.op("Mul", [b.op("Mul", [x, x], f"{out}/x2"), x], f"{out}/x3")
        cx3 = b.op("Mul", [cube, b.const(f"{nid}.c", 0.044715)], f"{out}/cx3")
        inner = b.op("Add", [x, cx3], f"{out}/in")
        t = b.op("Tanh", [b.op("Mul", [inner, b.const(f"{nid}.k", math.sqrt(2 / math.pi))], f"{out}/kin")],
                 f"{out}/tanh")
    else:  # 0.5 x (1 + erf(x / sqrt 2))
        scaled = b.op("Div", [x, b.const(f"{nid}.sqrt2", math.sqrt(2.0))], f"{out}/scaled")
        t = b.op("Erf", [scaled], f"{out}/erf")
    one_plus = b.op("Add", [t, b.const(f"{nid}.one", 1.0)], f"{out}/one_plus")
    half_x = b.op("Mul", [x, b.const(f"{nid}.half", 0.5)], f"{out}/half_x")
    return b.op("Mul", [half_x, one_plus], out)


@_emits("SiLU")
def _silu(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op("Mul", [xs[0], b.op("Sigmoid", xs, f"{out}/sigmoid")], out)


@_emits("Softmax", "LogSoftmax")
def _softmax(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op(node.type, xs, out, axis=node.params["dim"])


@_emits("Softplus")
def _softplus(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    # PyTorch: log(1 + exp(beta x)) / beta, and x itself where beta x > threshold
    beta, threshold = float(node.params["beta"]), float(node.params["threshold"])
    x = xs[0]
    bx = b.op("Mul", [x, b.const(f"{node.id}.beta", beta)], f"{out}/bx")
    soft = b.op("Div", [b.op("Softplus", [bx], f"{out}/softplus"), b.const(f"{node.id}.beta", beta)],
                f"{out}/soft")
    linear = b.op("Greater", [bx, b.const(f"{node.id}.threshold", threshold)], f"{out}/linear")
    return b.op("Where", [linear, x, soft], out)


@_emits("Hardtanh")
def _hardtanh(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    lo = b.const(f"{node.id}.min_val", float(node.params["min_val"]))
    hi = b.const(f"{node.id}.max_val", float(node.params["max_val"]))
    return b.op("Clip", [xs[0], lo, hi], out)


@_emits("ReLU6")
def _relu6(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op("Clip", [xs[0], b.const(f"{node.id}.min", 0.0), b.const(f"{node.id}.max", 6.0)], out)


@_emits("CELU")
def _celu(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op("Celu", xs, out, alpha=float(node.params["alpha"]))


@_emits("Hardsigmoid")
def _hardsigmoid(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op("HardSigmoid", xs, out, alpha=1 / 6, beta=0.5)  # PyTorch's relu6(x + 3) / 6


@_emits("Mish")
def _mish(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    soft = b.op("Softplus", xs, f"{out}/softplus")
    return b.op("Mul", [xs[0], b.op("Tanh", [soft], f"{out}/tanh")], out)


@_emits("LogSigmoid")
def _logsigmoid(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    # -softplus(-x): stable for large |x|, where log(sigmoid(x)) underflows
    soft = b.op("Softplus", [b.op("Neg", xs, f"{out}/neg")], f"{out}/softplus")
    return b.op("Neg", [soft], out)


@_emits("Softmin")
def _softmin(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op("Softmax", [b.op("Neg", xs, f"{out}/neg")], out, axis=node.params["dim"])


@_emits("Tanhshrink")
def _tanhshrink(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op("Sub", [xs[0], b.op("Tanh", xs, f"{out}/tanh")], out)


@_emits("Softshrink", "Hardshrink")
def _shrink(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    lambd = float(node.params["lambd"])
    return b.op("Shrink", xs, out, lambd=lambd, bias=lambd if node.type == "Softshrink" else 0.0)


@_emits("PReLU")
def _prelu(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    slope = b.weight(node.id, "weight")
    ndim = len(node.in_shapes["in"])
    if node.params["per_channel"]:  # (C,) -> (C, 1, ..., 1): broadcasts over dimension 1
        slope = slope.reshape([slope.size] + [1] * (ndim - 2))
    return b.op("PRelu", [xs[0], b.const(f"{node.id}.weight", slope)], out)


@_emits("GLU")
def _glu(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    first, second = b.op("Split", xs, f"{out}/half", n_out=2, axis=node.params["dim"])
    return b.op("Mul", [first, b.op("Sigmoid", [second], f"{out}/gate")], out)


@_emits("Dropout", "Dropout2d")
def _dropout(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op("Identity", xs, out)  # inference: dropout does nothing


@_emits("Flatten", "Unflatten", "Reshape")
def _reshape(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    if node.type == "Flatten" and node.params["end_dim"] in (-1, len(node.in_shapes["in"]) - 1) \
            and node.params["start_dim"] == 1:
        return b.op("Flatten", xs, out, axis=1)
    target = [0, *node.shape[1:]]  # 0 keeps the (dynamic) batch size
    return b.op("Reshape", [xs[0], b.const(f"{node.id}.shape", target, np.int64)], out)


@_emits("Permute")
def _permute(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    ndim = len(node.in_shapes["in"])
    return b.op("Transpose", xs, out, perm=[d % ndim for d in node.params["dims"]])


@_emits("PixelShuffle")
def _pixel_shuffle(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op("DepthToSpace", xs, out, blocksize=node.params["upscale_factor"], mode="CRD")


@_emits("PixelUnshuffle")
def _pixel_unshuffle(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    # ONNX's SpaceToDepth puts the block offset before the channel; PyTorch puts the channel first
    r = node.params["downscale_factor"]
    _, c, h, w = node.in_shapes["in"]
    blocks = b.op("Reshape", [xs[0], b.const(f"{node.id}.blocks", [0, c, h // r, r, w // r, r], np.int64)],
                  f"{out}/blocks")
    moved = b.op("Transpose", [blocks], f"{out}/moved", perm=[0, 1, 3, 5, 2, 4])
    return b.op("Reshape", [moved, b.const(f"{node.id}.shape", [0, *node.shape[1:]], np.int64)], out)


_RESIZE_MODES = {"nearest": "nearest", "linear": "linear", "bilinear": "linear"}


@_emits("Upsample")
def _upsample(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    p = node.params
    mode = p["mode"]
    attrs: dict[str, Any] = {"mode": _RESIZE_MODES[mode]}
    if mode == "nearest":  # PyTorch's nearest: source index floor(dst · in / out)
        attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    else:
        corners = "align_corners" if p["align_corners"] else "pytorch_half_pixel"
        attrs["coordinate_transformation_mode"] = corners
    n = len(node.in_shapes["in"]) - 2
    if p["size"] is None:  # the scale itself, as PyTorch uses it for the source coordinates
        scales = b.const(f"{node.id}.scales", [1.0, 1.0] + [float(p["scale_factor"])] * n)
        return b.op("Resize", [xs[0], "", scales], out, **attrs)
    # sizes are whole shapes: the dynamic (N, C) of the input, then the fixed spatial size
    batch_channels = b.op("Shape", xs, f"{out}/shape", start=0, end=2)
    sizes = b.op("Concat", [batch_channels, b.const(f"{node.id}.size", node.shape[2:], np.int64)],
                 f"{out}/sizes", axis=0)
    return b.op("Resize", [xs[0], "", "", sizes], out, **attrs)


_PAD_NODE_MODES = {"ZeroPad2d": "constant", "ReflectionPad2d": "reflect", "ReplicationPad2d": "edge"}


@_emits(*_PAD_NODE_MODES)
def _pad2d(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    left, right, top, bottom = _tuple(node.params["padding"], 4)
    lead = [0] * (len(node.in_shapes["in"]) - 2)
    pads = b.const(f"{node.id}.pads", [*lead, top, left, *lead, bottom, right], np.int64)
    return b.op("Pad", [xs[0], pads], out, mode=_PAD_NODE_MODES[node.type])


@_emits("Add", "Multiply")
def _merge(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    op = "Add" if node.type == "Add" else "Mul"
    acc = xs[0]
    for i, x in enumerate(xs[1:], start=1):
        acc = b.op(op, [acc, x], out if i == len(xs) - 1 else f"{out}/partial")
    return acc


@_emits("Concat")
def _concat(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op("Concat", xs, out, axis=node.params["dim"])


@_emits("MultiheadAttention")
def _attention(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    """Self-attention (query = key = value), batch first, as in evaluation (no dropout): the packed input
    projection, heads, softmax(q·kᵀ/√d)·v, the output projection."""
    nid, p = node.id, node.params
    e = int(node.in_shapes["in"][-1])
    h = int(p["num_heads"])
    d = e // h
    qkv = b.op("MatMul", [xs[0], b.const(f"{nid}.in_proj_weight_t", b.weight(nid, "in_proj_weight").T)],
               f"{out}/qkv" if not p["bias"] else f"{out}/qkv_matmul")
    if p["bias"]:
        qkv = b.op("Add", [qkv, b.const(f"{nid}.in_proj_bias", b.weight(nid, "in_proj_bias"))], f"{out}/qkv")
    heads = b.op("Reshape", [qkv, b.const(f"{nid}.qkv_shape", [0, 0, 3, h, d], np.int64)], f"{out}/heads")
    moved = b.op("Transpose", [heads], f"{out}/qkv_heads", perm=[2, 0, 3, 1, 4])  # (3, N, H, L, D)
    axis0 = b.const(f"{nid}.axis0", [0], np.int64)
    q, k, v = (b.op("Squeeze", [part, axis0], f"{out}/{name}")
               for part, name in zip(b.op("Split", [moved], f"{out}/split", n_out=3, axis=0), "qkv"))
    kt = b.op("Transpose", [k], f"{out}/k_t", perm=[0, 1, 3, 2])
    scores = b.op("Mul", [b.op("MatMul", [q, kt], f"{out}/qk"), b.const(f"{nid}.scale", 1.0 / math.sqrt(d))],
                  f"{out}/scores")
    weights = b.op("Softmax", [scores], f"{out}/weights", axis=-1)
    context = b.op("Transpose", [b.op("MatMul", [weights, v], f"{out}/context")], f"{out}/context_t",
                   perm=[0, 2, 1, 3])
    joined = b.op("Reshape", [context, b.const(f"{nid}.joined_shape", [0, 0, e], np.int64)], f"{out}/joined")
    w_out = b.const(f"{nid}.out_proj.weight_t", b.weight(nid, "out_proj.weight").T)
    if not p["bias"]:
        return b.op("MatMul", [joined, w_out], out)
    y = b.op("MatMul", [joined, w_out], f"{out}/out_matmul")
    return b.op("Add", [y, b.const(f"{nid}.out_proj.bias", b.weight(nid, "out_proj.bias"))], out)


@_emits("Embedding")
def _embedding(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    return b.op("Gather", [b.const(f"{node.id}.weight", b.weight(node.id, "weight")), xs[0]], out, axis=0)


# PyTorch stacks the gates i, f, g, o (LSTM) and r, z, n (GRU); ONNX wants i, o, f, c and z, r, h.
_GATE_ORDER = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN": [0]}


def _gates(w: np.ndarray, kind: str) -> np.ndarray:
    blocks = np.split(w, len(_GATE_ORDER[kind]), axis=0)
    return np.concatenate([blocks[i] for i in _GATE_ORDER[kind]], axis=0)


@_emits("RNN", "LSTM", "GRU")
def _recurrent(b: _Builder, node: ExportNode, xs: list[str], out: str) -> str:
    p = node.params
    kind, nid = node.type, node.id
    h = p["hidden_size"]
    dirs = 2 if p["bidirectional"] else 1
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    seq = b.op("Transpose", xs, f"{out}/seq_first", perm=[1, 0, 2])  # (L, N, features)
    y_h = None
    for layer in range(p["num_layers"]):
        ws, rs, bs = [], [], []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            ws.append(_gates(b.weight(nid, f"weight_ih{sfx}"), kind))
            rs.append(_gates(b.weight(nid, f"weight_hh{sfx}"), kind))
            if p["bias"]:
                bs.append(np.concatenate([_gates(b.weight(nid, f"bias_ih{sfx}"), kind),
                                          _gates(b.weight(nid, f"bias_hh{sfx}"), kind)]))
            else:
                bs.append(np.zeros(2 * gates * h, np.float32))
        inputs = [seq, b.const(f"{nid}.W_l{layer}", np.stack(ws)), b.const(f"{nid}.R_l{layer}", np.stack(rs)),
                  b.const(f"{nid}.B_l{layer}", np.stack(bs))]
        attrs: dict[str, Any] = {"hidden_size": h, "direction": "bidirectional" if dirs == 2 else "forward"}
        if kind == "GRU":
            attrs["linear_before_reset"] = 1  # PyTorch applies the reset gate after the hidden matmul
        if kind == "RNN":
            attrs["activations"] = ["Relu" if p["nonlinearity"] == "relu" else "Tanh"] * dirs
        n_out = 3 if kind == "LSTM" else 2
        outs = b.op(kind, inputs, f"{out}/l{layer}", n_out=n_out, **attrs)
        y, y_h = outs[0], outs[1]  # Y (L, dirs, N, H); Y_h (dirs, N, H)
        # (L, dirs, N, H) -> (L, N, dirs·H), the next layer's input
        both = b.op("Transpose", [y], f"{out}/l{layer}/seq", perm=[0, 2, 1, 3])
        flat = b.const(f"{nid}.seq_shape", [0, 0, -1], np.int64)
        seq = b.op("Reshape", [both, flat], f"{out}/l{layer}/flat")
    if p["return"] == "sequence":
        return b.op("Transpose", [seq], out, perm=[1, 0, 2])  # back to (N, L, dirs·H)
    # PyTorch's h_n[-1] (or cat(h_n[-2], h_n[-1])): the last layer's final states, forward first
    per_sample = b.op("Transpose", [y_h], f"{out}/h_n", perm=[1, 0, 2])  # (N, dirs, H)
    return b.op("Reshape", [per_sample, b.const(f"{nid}.last_shape", [0, -1], np.int64)], out)


# ---------------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------------
def build_onnx(graph: ExportGraph, state: Mapping[str, np.ndarray], *, name: str = "wiregrad",
               normalization: Normalization | None = None, metadata: Mapping[str, str] | None = None) -> Any:
    """The ONNX ModelProto of a planned graph with these weights (node-id names). With
    `normalization` the (single, float) input takes raw samples: a Sub and a Div in front apply the
    dataset's training statistics, as the trainer did. `metadata` goes into metadata_props."""
    import onnx
    from onnx import TensorProto, helper

    b = _Builder({k: np.asarray(v) for k, v in state.items()})
    tensor_of: dict[str, str] = {}
    inputs = []
    for nid in graph.input_ids:
        node = graph.node(nid)
        elem = TensorProto.INT64 if node.params.get("dtype") == "int64" else TensorProto.FLOAT
        shape = ["N", *graph.input_shapes[nid][1:]]
        inputs.append(helper.make_tensor_value_info(nid, elem, shape))
        tensor_of[nid] = nid
    if normalization is not None:
        nid = graph.input_ids[0]
        mean = b.const(f"{nid}.normalization_mean", normalization.shift)
        std = b.const(f"{nid}.normalization_std", normalization.scale)
        tensor_of[nid] = b.op("Div", [b.op("Sub", [nid, mean], f"{nid}/centred"), std], f"{nid}/normalised")
    for node in graph.layers:
        if node.type == "BlockPort":  # a block's port passes its input on: no ONNX node
            tensor_of[node.id] = tensor_of[node.inputs[0]]
            continue
        emit = _EMITTERS.get(node.type)
        if emit is None:
            raise ExportError(f"not supported for ONNX: node {node.id} ({node.type})")
        tensor_of[node.id] = emit(b, node, [tensor_of[s] for s in node.inputs], node.id)
    outputs = []
    for out_id in graph.output_ids:
        src = graph.prediction_of[out_id]
        shape = ["N", *graph.node(src).shape[1:]]
        name_out = tensor_of[src]
        if name_out in [o.name for o in outputs]:  # two losses on one prediction: one output each
            name_out = b.op("Identity", [name_out], f"{out_id}/prediction")
        outputs.append(helper.make_tensor_value_info(name_out, TensorProto.FLOAT, shape))
    g = helper.make_graph(b.nodes, name, inputs, outputs, initializer=b.initializers)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="wiregrad")
    model.ir_version = min(model.ir_version, 8)  # readable by onnxruntime releases of the last years
    if metadata:
        helper.set_model_props(model, dict(metadata))
    onnx.checker.check_model(model)
    return model


def initial_state(doc: Document, input_shape: Sequence[int] | None) -> dict[str, np.ndarray]:
    """Freshly initialised weights (the document's seed and init choices), from the engine."""
    import engine
    from app.compile import compile_document

    from .weights import state_dict_arrays

    engine.manual_seed(int(doc.training["seed"]))
    return state_dict_arrays(compile_document(doc, input_shape).state_dict())


_LAYOUTS = {1: "NF (batch, features)", 2: "NTF (batch, time steps, features)",
            3: "NCHW (batch, channels, height, width)"}


def _input_normalization(graph: ExportGraph, split: DatasetSplit | None) -> Normalization | None:
    """The dataset's normalisation when it feeds the model's one float input (and does something)."""
    if split is None or len(graph.input_ids) != 1:
        return None
    nid = graph.input_ids[0]
    if graph.node(nid).params.get("dtype") == "int64" or split.normalization.mode == "none":
        return None
    if tuple(graph.input_shapes[nid][1:]) != tuple(split.input_shape):
        return None
    return split.normalization


def onnx_metadata(graph: ExportGraph, split: DatasetSplit | None, normalization: Normalization | None
                  ) -> dict[str, str]:
    """What a user of the .onnx file needs besides the weights, as metadata_props (JSON values):
    the input layout, the task and class names, and the normalisation (inside the graph or not)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        wiregrad_version = version("wiregrad")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree that isn't installed
        wiregrad_version = "unknown"
    meta = {"producer": "Wiregrad", "wiregrad_version": wiregrad_version,
            "inputs": json.dumps(graph.input_ids), "outputs": json.dumps(graph.output_ids)}
    if len(graph.input_ids) == 1:
        shape = [int(d) for d in graph.input_shapes[graph.input_ids[0]][1:]]
        meta["input_shape"] = json.dumps(shape)
        meta["input_layout"] = _LAYOUTS.get(len(shape), f"N plus {len(shape)} sample dimensions")
    if split is not None:
        meta["dataset"] = split.name
        meta["task"] = split.task
        if split.task == "classification":
            meta["class_names"] = json.dumps(list(split.class_names))
    if normalization is not None:
        meta["normalization"] = normalization.mode
        meta["normalization_in_graph"] = "true"
        meta["mean"] = json.dumps(normalization.mean.tolist())
        meta["std"] = json.dumps(normalization.std.tolist())
        meta["preprocessing"] = ("none needed: feed raw samples; the graph computes (x - mean) / std with "
                                 "the training statistics" + (" (mean = min, std = max - min)"
                                                              if normalization.mode == "minmax" else ""))
        if split is not None and split.task == "reconstruction":
            meta["postprocessing"] = "the output is the normalised input rebuilt: output * std + mean is raw"
    else:
        meta["normalization_in_graph"] = "false"
        meta["preprocessing"] = "feed the samples as the model saw them in training (no normalisation inside)"
    return meta


def describe_onnx(path: str | Path) -> str:
    """A few words for the user (the status bar): does the file take raw inputs, what its metadata
    holds. E.g. "raw inputs (normalisation inside), class names and mean/std in the metadata"."""
    import onnx

    meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    inside = meta.get("normalization_in_graph") == "true"
    text = "raw inputs (normalisation inside)" if inside else "inputs as they are (no normalisation inside)"
    held = [what for key, what in (("class_names", "class names"), ("mean", "mean/std")) if key in meta]
    return f"{text}, {' and '.join(held)} in the metadata" if held else text


def export_onnx(doc: Document, path: str | Path, *, weights: str | Path | Mapping[str, Any] | None = None,
                base_dir: str | Path | None = None, input_shape: Sequence[int] | None = None,
                normalize_inputs: bool = True) -> Path:
    """Write the graph with its weights (a file, a run directory, a state dict, or None for freshly
    initialised ones) as an ONNX model; ExportError names any node ONNX can't express. With
    `normalize_inputs` the dataset's normalisation is part of the graph, so it takes raw samples;
    metadata_props say so and carry mean/std, class names, input layout, task and the version."""
    try:
        import onnx
    except ImportError:
        raise ExportError("ONNX export needs the onnx package: pip install 'wiregrad[export]'") from None
    from .weights import read_state_dict, state_dict_arrays

    split = load_split(doc, base_dir)
    if input_shape is None:
        input_shape = None if split is None else split.input_shape
    graph = plan_export(doc, input_shape)
    if weights is None:
        state = initial_state(doc, input_shape)
    elif isinstance(weights, Mapping):
        state = state_dict_arrays(weights)
    else:
        state = read_state_dict(weights)
    normalization = _input_normalization(graph, split) if normalize_inputs else None
    model = build_onnx(graph, state, name=Path(path).stem, normalization=normalization,
                       metadata=onnx_metadata(graph, split, normalization))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


__all__ = ["OPSET", "build_onnx", "describe_onnx", "export_onnx", "onnx_metadata"]
