"""User tables: CSV files with a header row, and NPZ files holding `x` and `y` arrays."""
from __future__ import annotations

import csv
import math
import zipfile
from pathlib import Path

import numpy as np

from app.datasets.errors import DatasetError
from app.datasets.split import Samples

# Integer-valued numeric labels with at most this many distinct values are read as classes.
MAX_AUTO_CLASSES = 20


def _read_rows(path: Path, delimiter: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and (line number, fields) rows; blank lines skipped. Line numbers are 1-based."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f, delimiter=delimiter, strict=True)
            header: list[str] | None = None
            rows: list[tuple[int, list[str]]] = []
            for fields in reader:
                if not fields or all(not v.strip() for v in fields):
                    continue
                if header is None:
                    header = [h.strip() for h in fields]
                else:
                    rows.append((reader.line_num, fields))
    except FileNotFoundError:
        raise DatasetError(f"{path}: file not found.") from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: not a UTF-8 text file; save the CSV as UTF-8.") from None
    except csv.Error as exc:
        raise DatasetError(f"{path}, line {reader.line_num}: malformed CSV ({exc}).") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read file ({exc.strerror}).") from None
    if header is None:
        raise DatasetError(f"{path}: the file is empty; expected a header row and data rows.")
    if not rows:
        raise DatasetError(f"{path}: has a header row but no data rows.")
    return header, rows


def _label_index(path: Path, header: list[str], label_column: int | str) -> int:
    if isinstance(label_column, int):
        if not -len(header) <= label_column < len(header):
            raise DatasetError(f"{path}: label_column {label_column} is out of range; the header has "
                               f"{len(header)} columns (0..{len(header) - 1}, or -1 for the last).")
        return label_column % len(header)
    if label_column in header:
        return header.index(label_column)
    raise DatasetError(f"{path}: no column named '{label_column}'; the columns are "
                       + ", ".join(repr(h) for h in header) + ".")


def _parse_number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _labels(path: Path, column: str, values: list[str], task: str) -> tuple[np.ndarray, str, tuple[str, ...]]:
    """Turn label strings into class indices or regression targets, choosing the task if 'auto'."""
    numbers = [_parse_number(v) for v in values]
    numeric = all(v is not None for v in numbers)
    if task == "regression":
        if not numeric:
            bad = next(i for i, v in enumerate(numbers) if v is None)
            raise DatasetError(f"{path}: regression needs numeric values in column '{column}', "
                               f"but data row {bad + 1} holds {values[bad]!r}.")
        return np.array(numbers, dtype=np.float32)[:, None], "regression", ()
    if task == "auto" and numeric:
        distinct = set(numbers)
        if not all(float(v).is_integer() for v in distinct) or len(distinct) > MAX_AUTO_CLASSES:
            return np.array(numbers, dtype=np.float32)[:, None], "regression", ()
    if numeric:
        # Sort numerically so labels 1, 2, 10 become classes 0, 1, 2 in that order.
        classes = sorted(set(numbers))
        index = {v: i for i, v in enumerate(classes)}
        names = tuple(str(int(v)) if float(v).is_integer() else str(v) for v in classes)
        return np.array([index[v] for v in numbers], dtype=np.int64), "classification", names
    names = tuple(sorted(set(values)))
    index = {v: i for i, v in enumerate(names)}
    return np.array([index[v] for v in values], dtype=np.int64), "classification", names


def csv_table(opts: dict, rng: np.random.Generator) -> Samples:
    path: Path = opts["path"]
    header, rows = _read_rows(path, opts["delimiter"])
    label = _label_index(path, header, opts["label_column"])
    width = len(header)
    features = np.empty((len(rows), width - 1), dtype=np.float64)
    label_values: list[str] = []
    feature_cols = [c for c in range(width) if c != label]
    for r, (line, fields) in enumerate(rows):
        if len(fields) != width:
            raise DatasetError(f"{path}, line {line}: has {len(fields)} fields but the header has {width}.")
        label_values.append(fields[label].strip())
        for j, c in enumerate(feature_cols):
            value = _parse_number(fields[c])
            if value is None:
                what = "is empty" if not fields[c].strip() else f"holds {fields[c].strip()!r}, not a number"
                raise DatasetError(f"{path}, line {line}, column {c + 1} ('{header[c]}'): the value {what}. "
                                   "Feature columns must be numeric.")
            features[r, j] = value
    task = opts["task"] if opts["task"] in ("classification", "regression") else "auto"
    y, found_task, names = _labels(path, header[label], label_values, task)
    feature_names = ", ".join(header[c] for c in feature_cols)
    desc = (f"{path.name}: {len(rows)} rows, {len(feature_cols)} features ({feature_names}); "
            f"label '{header[label]}' -> {found_task}" + (f" with {len(names)} classes." if names else "."))
    return Samples(features.astype(np.float32), y, found_task, "flat", names, desc)


def npz_arrays(opts: dict, rng: np.random.Generator) -> Samples:
    path: Path = opts["path"]
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise DatasetError(f"{path}: is a single .npy array; expected an .npz archive "
                                   "with 'x' and 'y'.")
            arrays = {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise DatasetError(f"{path}: file not found.") from None
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        # Never offer to unpickle: loading a dataset must not execute code from the file.
        reason = "it holds Python objects, which are not loaded for safety" if "pickle" in str(exc) else exc
        raise DatasetError(f"{path}: not a readable NPZ archive of numeric arrays 'x' and 'y' "
                           f"as written by numpy.savez ({reason}).") from None
    if "x" not in arrays:
        raise DatasetError(f"{path}: has no array named 'x'; it holds {sorted(arrays) or 'no arrays'}.")
    x = arrays["x"]
    if x.ndim >= 1 and len(x) == 0:
        raise DatasetError(f"{path}: 'x' holds no samples.")
    if x.ndim < 2 or not np.issubdtype(x.dtype, np.number):
        raise DatasetError(f"{path}: 'x' must be a numeric array of shape (N, ...); got {x.dtype} {x.shape}.")
    y = arrays.get("y")
    task = opts["task"]
    if y is None:
        if task != "reconstruction":
            raise DatasetError(f"{path}: has no array named 'y'; add labels or set task to 'reconstruction'.")
        return Samples(x, None, "reconstruction", _layout(x), (), f"{path.name}: x {x.shape}.")
    if len(y) != len(x):
        raise DatasetError(f"{path}: 'x' holds {len(x)} samples but 'y' holds {len(y)}; "
                           "the counts must match.")
    if task == "auto":
        task = "classification" if np.issubdtype(y.dtype, np.integer) and y.ndim == 1 else "regression"
    names: tuple[str, ...] = ()
    if task == "classification":
        is_index = np.issubdtype(y.dtype, np.number) and np.all(np.mod(y, 1) == 0) and y.min() >= 0
        if y.ndim != 1 or not is_index:
            raise DatasetError(f"{path}: classification needs 'y' to be a 1-D array of class indices "
                               f"0, 1, 2, ...; got {y.dtype} {y.shape}.")
        names = tuple(str(c) for c in range(int(y.max()) + 1))
        y = y.astype(np.int64)
    elif task == "regression":
        y = y.astype(np.float32)
    return Samples(x, y, task, _layout(x), names, f"{path.name}: x {x.shape}, y {y.shape}, {task}.")


def _layout(x: np.ndarray) -> str:
    return {2: "flat", 3: "sequence", 4: "image"}.get(x.ndim, "flat")
