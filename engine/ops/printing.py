"""PyTorch-style repr: tensor([[1., 2.]], requires_grad=True)."""
from __future__ import annotations

import numpy as np

from .. import dtypes as D


def _fmt_array(a: np.ndarray) -> str:
    if a.dtype.kind == "f":
        finite = a[np.isfinite(a)]
        ints = (
            finite.size == 0
            or bool(np.all(finite == np.round(finite)))
            and np.abs(finite).max(initial=0) < 1e8
        )
        if ints:

            def fmt(v):
                return "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf") if np.isinf(v) else f"{v:.0f}."
        else:
            big = np.abs(finite).max(initial=0)
            small = np.abs(finite[finite != 0]).min(initial=1)
            sci = big >= 1e8 or small < 1e-4

            def fmt(v):
                if np.isnan(v):
                    return "nan"
                if np.isinf(v):
                    return "inf" if v > 0 else "-inf"
                return f"{v:.4e}" if sci else f"{v:.4f}"

        return np.array2string(
            a, separator=", ", formatter={"float_kind": fmt}, threshold=1000, edgeitems=3, max_line_width=80
        )
    if a.dtype == np.bool_:
        return np.array2string(
            a,
            separator=", ",
            formatter={"bool": lambda v: "True" if v else "False"},
            threshold=1000,
            edgeitems=3,
            max_line_width=80,
        )
    return np.array2string(a, separator=", ", threshold=1000, edgeitems=3, max_line_width=80)


def tensor_repr(t) -> str:
    a = t.numpy(force=True)
    body = _fmt_array(a).replace("\n", "\n       ")
    extras = []
    if t.device.type != "cpu":
        extras.append(f"device='{t.device}'")
    default_shown = {D.get_default_dtype(), D.int64, D.bool_}
    if t.dtype not in default_shown or a.size == 0:
        if a.size == 0 and t.ndim != 1:
            extras.append(f"size={tuple(t.shape)}")
        if t.dtype not in default_shown:
            extras.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
