"""Engine dtypes (engine.float32, ...) and PyTorch's type-promotion rules.

bfloat16 is stored as ml_dtypes' NumPy bfloat16 (a real 2-byte NumPy dtype), not as uint16 bits with our own
round-to-nearest-even conversion. Judged on three counts:
- correctness: with ml_dtypes every NumPy routine the engine's kernels call (views, copies, indexing,
  concatenation, sorting, comparisons, the elementwise ufuncs) works on bfloat16 arrays as on float16 ones;
  its ufuncs compute each element in float32 and round once, as torch's CPU kernels do, and its casts round to
  nearest even. A uint16 storage looks like an integer array to every one of those routines: each op would
  need a branch that unpacks, computes and repacks, and any op without one would silently compute on bits.
- speed: the casts are C loops; matmul, convolution and reductions run on float32 copies through BLAS (no
  library has a bfloat16 GEMM for NumPy), so the per-element loops only matter for elementwise ops. Our own
  rounding in NumPy (shift, add the rounding bias, mask) would take several array passes per cast.
- maintenance: ml_dtypes is the JAX team's, a small NumPy-only wheel (onnx already depends on it); it is a
  runtime dependency in pyproject.toml.
What ml_dtypes does not do torch's way: reductions and matmul accumulate in bfloat16 (or refuse), and a
bfloat16 array with a Python float gives float32 where torch keeps the number in float32 but returns
bfloat16; those ops compute in float32 and round once (`upcast`; elementwise.py `_f32`). Its dtype has kind
'V', so a test for a floating array goes through `is_float_array`, not `dtype.kind == "f"`. ml_dtypes
registers one dtype object, so hot paths test `arr.dtype is BFLOAT16_NP` (cheaper than ==).

On a GPU there is no bfloat16: CuPy has no such arrays, and moving a bfloat16 tensor there raises (the CUDA
backend's `check_dtype`); autocast('cuda') uses float16."""
from __future__ import annotations

import ml_dtypes
import numpy as np


class dtype:  # noqa: N801 - named like torch.dtype
    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_complex", "is_signed", "_rank", "_cat")

    def __init__(self, name: str, np_dtype, cat: int, rank: int):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.is_floating_point = cat == 2
        self.is_complex = False
        self.is_signed = name not in ("uint8", "bool")
        self._cat = cat  # 0 bool, 1 integer, 2 floating
        self._rank = rank

    def __repr__(self) -> str:
        return f"engine.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    def to_real(self) -> dtype:
        return self


bool_ = dtype("bool", np.bool_, 0, 0)
uint8 = dtype("uint8", np.uint8, 1, 1)
int8 = dtype("int8", np.int8, 1, 2)
int16 = dtype("int16", np.int16, 1, 3)
int32 = dtype("int32", np.int32, 1, 4)
int64 = dtype("int64", np.int64, 1, 5)
float16 = dtype("float16", np.float16, 2, 6)
float32 = dtype("float32", np.float32, 2, 7)
float64 = dtype("float64", np.float64, 2, 8)
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, 2, 6)  # same rank as float16: together they make float32

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
BFLOAT16_NP = bfloat16.np
LOW_FLOATS = (float16.np, bfloat16.np)  # the 2-byte floats, computed in float32
_FROM_NP = {d.np: d for d in ALL}
_NAMES = {d.name: d for d in ALL}
_NAMES.update({"float": float32, "double": float64, "half": float16, "long": int64, "int": int32,
               "short": int16, "byte": uint8, "bool_": bool_})


def is_float_array(a) -> bool:
    """Whether a NumPy/CuPy array (or dtype) holds floating values, bfloat16 (NumPy kind 'V') included."""
    dt = getattr(a, "dtype", a)
    return dt.kind == "f" or dt == BFLOAT16_NP


def upcast(a):
    """A bfloat16 array as float32 (exact), to compute in as torch's CPU kernels do; others unchanged."""
    return a.astype(np.float32) if a.dtype is BFLOAT16_NP else a


def np_finfo(np_dtype):
    """np.finfo that also knows bfloat16 (NumPy's refuses it: kind 'V')."""
    return ml_dtypes.finfo(np_dtype) if np_dtype == BFLOAT16_NP else np.finfo(np_dtype)

_default_float = float32


_TORCH_SCALAR_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
                       "int64": "Long", "float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
                       "float64": "Double"}


def scalar_type_name(d: dtype) -> str:
    """PyTorch's C++ name of a dtype, as its kernel errors spell it: 'Long', 'Float', 'Half'..."""
    return _TORCH_SCALAR_NAMES[d.name]


_CPP_NAMES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int",
              "int32": "int", "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
              "float32": "float", "float64": "double"}


def cpp_type_name(d: dtype) -> str:
    """The C++ element type PyTorch's messages name: 'float', 'double', 'long int', 'unsigned char'..."""
    return _CPP_NAMES[d.name]


def _by_name(name: str) -> dtype:
    return _NAMES[name]


def from_numpy(np_dtype) -> dtype:
    d = _FROM_NP.get(np_dtype)
    if d is None:
        d = _FROM_NP.get(np.dtype(np_dtype))
        if d is None:
            raise TypeError(
                f"can't convert np.ndarray of type {np.dtype(np_dtype)}. The only supported types are: "
                "float64, float32, float16, int64, int32, int16, int8, uint8, and bool."
            )
    return d


def as_dtype(d) -> dtype:
    """Accept an engine dtype, a NumPy dtype, a Python type or a name."""
    if isinstance(d, dtype):
        return d
    if d is float:
        return _default_float
    if d is int:
        return int64
    if d is bool:
        return bool_
    if isinstance(d, str):
        try:
            return _NAMES[d]
        except KeyError:
            raise TypeError(f"unknown dtype name {d!r}") from None
    return from_numpy(np.dtype(d))


def get_default_dtype() -> dtype:
    return _default_float


def set_default_dtype(d) -> None:
    global _default_float
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default_float = d


def promote_types(a: dtype, b: dtype) -> dtype:
    if a is b:
        return a
    if a._cat != b._cat:
        return a if a._cat > b._cat else b
    if a._cat == 1 and {a.name, b.name} == {"uint8", "int8"}:
        return int16
    if a._rank == b._rank == 6:  # float16 with bfloat16: neither holds the other (torch gives float32)
        return float32
    return a if a._rank > b._rank else b


def scalar_dtype(v) -> dtype:
    if isinstance(v, bool):
        return bool_
    if isinstance(v, int):
        return int64
    return _default_float


def _cat_of_scalar(v) -> int:
    return 0 if isinstance(v, bool) else 1 if isinstance(v, int) else 2


def result_type(*operands) -> dtype:
    """PyTorch's rule: dimensioned tensors > zero-dim tensors > Python scalars, by category."""
    from .tensor import Tensor

    dim_t = zero_t = scal = None
    for o in operands:
        if isinstance(o, Tensor):
            if o._shape:
                dim_t = o._dtype if dim_t is None else promote_types(dim_t, o._dtype)
            else:
                zero_t = o._dtype if zero_t is None else promote_types(zero_t, o._dtype)
        elif o is not None:
            s = scalar_dtype(o)
            scal = s if scal is None else promote_types(scal, s)
    out = dim_t
    for nxt in (zero_t, scal):
        if nxt is None:
            continue
        if out is None:
            out = nxt
        elif nxt._cat > out._cat:
            out = nxt if nxt is not scal else (_default_float if nxt._cat == 2 else nxt)
    return out if out is not None else _default_float
