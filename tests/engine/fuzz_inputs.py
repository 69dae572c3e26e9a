"""Seeded random inputs for the differential fuzzers (test_fuzz_*.py): shapes, dtypes, values, layouts.

A drawn input is a NumPy array plus a layout: a function `(T, leaf) -> view` that both libraries apply to
the leaf built from the same array, so the op under test sees the same non-contiguous tensor in each."""
from __future__ import annotations

import numpy as np

DTYPES = ("float32", "float64", "float16", "int32", "int64", "uint8", "bool")
FLOATS = ("float32", "float64", "float16")
SPECIALS = (np.nan, np.inf, -np.inf, -0.0, 0.0)


def rand_shape(rng: np.random.Generator, max_ndim: int = 3, max_size: int = 4) -> tuple:
    """0-d to max_ndim-d; sizes 0 and 1 come up often (they are where reductions go wrong)."""
    nd = int(rng.integers(0, max_ndim + 1))
    return tuple(int(rng.choice([0, 1, 1, 2, 3, max_size])) if rng.random() < 0.35
                 else int(rng.integers(1, max_size + 1)) for _ in range(nd))


def rand_values(rng: np.random.Generator, shape: tuple, dtype: str, specials: bool = True,
                ties: bool | None = None) -> np.ndarray:
    """Values of `dtype`: floats from a wide or a tie-heavy range, with NaN/±inf/-0.0 sprinkled in;
    integers with negatives (wrapped into range for uint8); bools."""
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    ties = rng.random() < 0.4 if ties is None else ties
    if dtype in FLOATS:
        if ties:
            a = rng.integers(-2, 3, shape).astype(np.float64)
        else:
            a = rng.uniform(-3, 3, shape)
        if specials and a.size and rng.random() < 0.4:
            mask = rng.random(shape) < 0.25
            a = np.where(mask, rng.choice(SPECIALS, shape), a)
        return np.asarray(a).astype(dtype)
    lo, hi = (-3, 4) if ties else (-20, 21)
    a = rng.integers(lo, hi, shape)
    if dtype == "uint8":
        a = np.abs(a) if rng.random() < 0.7 else a % 256
    return np.asarray(a).astype(dtype)


def _identity(T, x):
    return x


def rand_layout(rng: np.random.Generator, shape: tuple):
    """(base shape, view fn, name): the view of a leaf of `base shape` has `shape` and its own strides."""
    kinds = ["contig", "contig"]
    if len(shape) >= 2:
        kinds.append("transposed")
    if shape:
        kinds += ["stepped", "expanded" if 1 in shape or rng.random() < 0.5 else "stepped"]
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "transposed":
        nd = len(shape)
        perm = list(range(nd))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        base = tuple(shape[p] for p in perm)
        return base, lambda T, x: x.transpose(-1, -2), kind
    if kind == "stepped":
        d = int(rng.integers(len(shape)))
        base = list(shape)
        base[d] = 2 * shape[d]
        index = (slice(None),) * d + (slice(None, None, 2),)
        return tuple(base), lambda T, x: x[index], kind
    if kind == "expanded":
        d = int(rng.integers(len(shape)))
        base = list(shape)
        base[d] = 1
        return tuple(base), lambda T, x: x.expand(*shape), kind
    return shape, _identity, kind


class Drawn:
    """One random input: `arr` (the leaf's data) and `view(T, leaf)` (what the op is given)."""

    def __init__(self, rng: np.random.Generator, shape: tuple | None = None, dtype: str | None = None,
                 specials: bool = True, layout: bool = True, ties: bool | None = None):
        self.shape = rand_shape(rng) if shape is None else tuple(shape)
        self.dtype = DTYPES[int(rng.integers(len(DTYPES)))] if dtype is None else dtype
        if layout:
            base, self.view, self.layout = rand_layout(rng, self.shape)
        else:
            base, self.view, self.layout = self.shape, _identity, "contig"
        self.arr = rand_values(rng, base, self.dtype, specials, ties)

    def __repr__(self) -> str:
        return f"{self.dtype}{list(self.shape)}{'' if self.layout == 'contig' else '-' + self.layout}"


def rand_dim(rng: np.random.Generator, ndim: int, allow_bad: bool = True):
    """A dim in range (negative half the time), now and then out of range (torch's IndexError)."""
    n = max(ndim, 1)
    if allow_bad and rng.random() < 0.06:
        return int(rng.choice([n, -n - 1, n + 2]))
    d = int(rng.integers(n))
    return d - n if rng.random() < 0.5 else d


def rand_dims(rng: np.random.Generator, ndim: int, allow_bad: bool = True):
    """None, an int, or a tuple of dims (sometimes repeated: torch's RuntimeError)."""
    r = rng.random()
    if r < 0.2:
        return None
    if r < 0.6 or ndim == 0:
        return rand_dim(rng, ndim, allow_bad)
    k = int(rng.integers(1, ndim + 1))
    dims = [int(d) for d in rng.choice(ndim, size=k, replace=False)]
    dims = [d - ndim if rng.random() < 0.5 else d for d in dims]
    if allow_bad and rng.random() < 0.08:
        dims.append(dims[0])
    return tuple(dims)
