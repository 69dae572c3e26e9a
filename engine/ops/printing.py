"""PyTorch-style repr: tensor([[ 1.,  2.]], requires_grad=True), with torch's number formats and padding."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D

_PRECISION = 4
_THRESHOLD = 1000
_EDGEITEMS = 3
_LINEWIDTH = 80
_SCI_MODE = None  # set_printoptions(sci_mode=): True/False forces it, None decides per tensor


class _Formatter:
    """One number format for a whole tensor, as torch picks it: int, fixed or scientific, one width."""

    def __init__(self, values: np.ndarray):
        self.floating = D.is_float_array(values)
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        if not self.floating:
            for v in values.tolist():
                self.width = max(self.width, len(str(v)))
            return
        vals = values.astype(np.float64)
        vals = vals[np.isfinite(vals) & (vals != 0)]
        if vals.size == 0:
            return
        mags = np.abs(vals)
        lo, hi = mags.min(), mags.max()
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        auto = bool(hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4)
        self.sci_mode = auto if _SCI_MODE is None else _SCI_MODE
        if self.sci_mode:
            self.width = max(len(f"{v:.{_PRECISION}e}") for v in vals.tolist())
        elif self.int_mode:
            self.width = max(len(f"{v:.0f}") + 1 for v in vals.tolist())
        else:
            self.width = max(len(f"{v:.{_PRECISION}f}") for v in vals.tolist())

    def format(self, v) -> str:
        if not self.floating:
            s = str(v)
        elif self.sci_mode:
            s = f"{v:{self.width}.{_PRECISION}e}"
        elif self.int_mode:
            s = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            s = f"{v:.{_PRECISION}f}"
        return " " * (self.width - len(s)) + s


def _summarized(a: np.ndarray) -> np.ndarray:
    """The elements that will be shown when the tensor is elided with '...' (edge items of every dim)."""
    if a.ndim == 0:
        return a.reshape(1)
    if a.shape[0] > 2 * _EDGEITEMS:
        rows = list(range(_EDGEITEMS)) + list(range(a.shape[0] - _EDGEITEMS, a.shape[0]))
    else:
        rows = range(a.shape[0])
    if a.ndim == 1:
        return a[list(rows)]
    parts = [_summarized(a[i]) for i in rows]
    return np.concatenate(parts) if parts else a.reshape(-1)


def _vector_str(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    per_line = max(1, (_LINEWIDTH - indent) // (fmt.width + 2))
    if summarize and a.shape[0] > 2 * _EDGEITEMS:
        data = ([fmt.format(v) for v in a[:_EDGEITEMS].tolist()] + [" ..."]
                + [fmt.format(v) for v in a[-_EDGEITEMS:].tolist()])
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    n = a.shape[0]
    if summarize and n > 2 * _EDGEITEMS:
        slices = ([_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(_EDGEITEMS)] + ["..."]
                  + [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(n - _EDGEITEMS, n)])
    else:
        slices = [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _fmt_array(a: np.ndarray, indent: int = 7) -> str:
    summarize = a.size > _THRESHOLD
    fmt = _Formatter(_summarized(a) if summarize else a.reshape(-1))
    return _tensor_str(a, indent, summarize, fmt)


def _add_suffixes(body: str, suffixes: list[str], indent: int) -> str:
    out = [body]
    last_line_len = len(body) - body.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > _LINEWIDTH:
            out.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            out.append(", " + suffix)
            last_line_len += len(suffix) + 2
    out.append(")")
    return "".join(out)


def tensor_repr(t) -> str:
    a = t.numpy(force=True)
    if a.dtype == D.BFLOAT16_NP:  # exact in float32; NumPy sees ml_dtypes' bfloat16 as kind 'V', not a float
        a = a.astype(np.float32)
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    if a.size == 0:
        body = "[]"
        if t.ndim != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        # nothing to read the dtype from, so every non-default dtype is named (int64 included)
        if t.dtype is not D.get_default_dtype():
            suffixes.append(f"dtype={t.dtype}")
    else:
        body = _fmt_array(a, indent)
        if t.dtype not in (D.get_default_dtype(), D.int64, D.bool_):
            suffixes.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
