"""User tables: CSV files with a header row, and NPZ files holding `x` and `y` arrays.

Both read only what they must: the CSV is streamed line by line (no line longer than MAX_LINE_CHARS),
and each NPZ member's .npy header is checked (dtype, shape, size against the archive and BYTE_LIMIT)
before its body is decompressed, so `describe` can answer from headers alone.
"""
from __future__ import annotations

import csv
import math
import zipfile
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from app.datasets.checks import (
    BYTE_LIMIT,
    MAX_CLASSES,
    check_bytes,
    check_finite,
    check_input_header,
    class_indices,
    float32_bytes,
    regular_file,
    size_text,
    sniff,
    where,
)
from app.datasets.errors import DatasetError
from app.datasets.split import Samples

# Integer-valued numeric labels with at most this many distinct values are read as classes.
MAX_AUTO_CLASSES = 20
# A longer line is not a table row (e.g. a binary file or one huge JSON line): refused, never buffered.
MAX_LINE_CHARS = 16 * 1024 * 1024
_FLOAT32_MAX = float(np.finfo(np.float32).max)
# How spreadsheets, R and pandas write a missing value (compared lower-cased, stripped).
_MISSING = frozenset({"", "na", "n/a", "nan", "null", "none", "?"})


def _lines(f: TextIO, path: Path) -> Iterator[str]:
    """The file's lines, each read with a length cap so one endless line cannot fill memory."""
    number = 0
    while line := f.readline(MAX_LINE_CHARS + 1):
        number += 1
        if len(line) > MAX_LINE_CHARS:
            raise DatasetError(f"{where('path', path)}, line {number}: longer than {MAX_LINE_CHARS:,} "
                               "characters; this is not a CSV table row.")
        yield line


def _check_text_file(path: Path) -> None:
    size = regular_file(path, "path")
    if size == 0:
        raise DatasetError(f"{where('path', path)}: the file is empty; expected a header row and data rows.")
    if size > BYTE_LIMIT:
        raise DatasetError(f"{where('path', path)}: the file is {size_text(size)}, more than the "
                           f"{size_text(BYTE_LIMIT)} a CSV table may have; use an .npz archive.")
    with open(path, "rb") as f:
        head = f.read(8192)
    kind = sniff(head)
    if b"\x00" in head or (kind and kind != "a Python pickle"):
        what = f"it is {kind}" if kind else "it contains NUL bytes, so it is binary or UTF-16"
        raise DatasetError(f"{where('path', path)}: not a CSV text file ({what}); save the table as "
                           "UTF-8 text.")


def _label_index(path: Path, header: list[str], label_column: int | str) -> int:
    if isinstance(label_column, int):
        if not -len(header) <= label_column < len(header):
            raise DatasetError(f"{where('label_column', label_column)}: out of range for {path.name}; "
                               f"the header has {len(header)} columns (0..{len(header) - 1}, or -1 for the "
                               "last).")
        return label_column % len(header)
    if label_column in header:
        return header.index(label_column)
    raise DatasetError(f"{where('label_column', repr(label_column))}: {path.name} has no column named "
                       f"'{label_column}'; the columns are " + ", ".join(repr(h) for h in header) + ".")


def _parse_number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass
class _Table:
    """A streamed CSV: features (when kept), one label code per row, and each distinct label text
    with the line it first appears on."""

    header: list[str]
    label: int
    rows: int
    features: np.ndarray | None
    codes: np.ndarray
    labels: list[str]
    first_lines: list[int]

    @property
    def feature_cols(self) -> list[int]:
        return [c for c in range(len(self.header)) if c != self.label]


def _scan(path: Path, delimiter: str, label_column: int | str, keep: bool) -> _Table:
    """Read the whole CSV once, checking every row; keep the feature values only when `keep`."""
    _check_text_file(path)
    header: list[str] | None = None
    label = 0
    values = array("d")
    codes = array("q")
    distinct: dict[str, int] = {}
    first_lines: list[int] = []
    rows = 0
    line = 0
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(_lines(f, path), delimiter=delimiter, strict=True)
            for fields in reader:
                line = reader.line_num
                if not fields or all(not v.strip() for v in fields):
                    continue
                if header is None:
                    header = [h.strip() for h in fields]
                    label = _label_index(path, header, label_column)
                    if len(header) < 2:
                        raise DatasetError(
                            f"{where('label_column', label_column)}: the label column '{header[label]}' is "
                            f"the only column of {path.name} (with delimiter {delimiter!r}), so there are no "
                            "feature columns; check the delimiter.")
                    feature_cols = [c for c in range(len(header)) if c != label]
                    continue
                if len(fields) != len(header):
                    raise DatasetError(f"{where('path', path)}, line {line}: has {len(fields)} fields "
                                       f"but the header has {len(header)}.")
                for c in feature_cols:
                    value = _parse_number(fields[c])
                    if value is None or abs(value) > _FLOAT32_MAX:
                        text = fields[c].strip()
                        if text.lower() in _MISSING:
                            raise DatasetError(f"{where('path', path)}, line {line}, column {c + 1} "
                                               f"('{header[c]}'): the value is missing ({text!r}); remove "
                                               "or fill the rows with missing values.")
                        what = (f"holds {text!r}, not a finite number" if value is None
                                else f"holds {text!r}, too large for 32-bit floats")
                        raise DatasetError(f"{where('path', path)}, line {line}, column {c + 1} "
                                           f"('{header[c]}'): the value {what}. Feature columns must be "
                                           "numeric.")
                    if keep:
                        values.append(value)
                text = fields[label].strip()
                code = distinct.get(text)
                if code is None:
                    code = distinct[text] = len(distinct)
                    first_lines.append(line)
                codes.append(code)
                rows += 1
    except UnicodeDecodeError:
        raise DatasetError(f"{where('path', path)}: not a UTF-8 text file; save the CSV as UTF-8.") from None
    except csv.Error as exc:
        raise DatasetError(f"{where('path', path)}, line {line + 1}: malformed CSV ({exc}).") from None
    except OSError as exc:
        raise DatasetError(f"{where('path', path)}: cannot read file ({exc.strerror}).") from None
    if header is None:
        raise DatasetError(f"{where('path', path)}: the file is empty; expected a header row and data rows.")
    if rows == 0:
        raise DatasetError(f"{where('path', path)}: has a header row but no data rows.")
    features = np.frombuffer(values, dtype=np.float64).reshape(rows, len(header) - 1) if keep else None
    return _Table(header, label, rows, features, np.frombuffer(codes, dtype=np.int64),
                  list(distinct), first_lines)


def _labels(path: Path, column: str, table: _Table, task: str) -> tuple[np.ndarray, str, tuple[str, ...]]:
    """Map each distinct label text to a class index or a regression target, choosing the task if
    'auto'. Returns that mapping (index it with table.codes), the task and the class names."""
    texts, lines = table.labels, table.first_lines
    parsed = []
    for text, line in zip(texts, lines):
        try:
            number: float | None = float(text)
        except ValueError:
            number = None
        if number is not None and not (math.isfinite(number) and abs(number) <= _FLOAT32_MAX):
            raise DatasetError(f"{where('path', path)}, line {line}, label column '{column}': {text!r} is "
                               "not a finite 32-bit number; remove or fill that row.")
        parsed.append(number)
    # An empty label is always missing; 'NA', '?' and the like are missing among numbers (a numeric
    # target or class number), but may be a class among text labels ('NA' for North America).
    gaps = [(line, text) for text, line, v in zip(texts, lines, parsed)
            if v is None and text.lower() in _MISSING]
    among_numbers = all(v is not None or t.lower() in _MISSING for t, v in zip(texts, parsed))
    if not among_numbers:
        gaps = [(line, text) for line, text in gaps if not text]
    if gaps:
        line, text = min(gaps)
        raise DatasetError(f"{where('path', path)}, line {line}, label column '{column}': the label is "
                           f"missing ({text!r}); remove or fill the rows with missing labels.")
    numeric = all(v is not None for v in parsed)
    if task == "regression":
        if not numeric:
            bad = min(line for v, line in zip(parsed, lines) if v is None)
            text = texts[lines.index(bad)]
            raise DatasetError(f"{where('path', path)}, line {bad}: regression needs numeric values in "
                               f"column '{column}', but it holds {text!r}.")
        return np.array(parsed, dtype=np.float32)[:, None], "regression", ()
    if task == "auto" and numeric:
        distinct = set(parsed)
        if not all(float(v).is_integer() for v in distinct) or len(distinct) > MAX_AUTO_CLASSES:
            return np.array(parsed, dtype=np.float32)[:, None], "regression", ()
    if numeric:
        # Sort numerically so labels 1, 2, 10 become classes 0, 1, 2 in that order ("1" and "1.0" agree).
        classes = sorted(set(parsed))
        index = {v: i for i, v in enumerate(classes)}
        names = tuple(str(int(v)) if float(v).is_integer() else str(v) for v in classes)
        mapping = [index[v] for v in parsed]
    else:
        names = tuple(sorted(texts))
        index = {v: i for i, v in enumerate(names)}
        mapping = [index[v] for v in texts]
    if len(names) > MAX_CLASSES:
        raise DatasetError(f"{where('label_column', table.header[table.label])}: {len(names):,} distinct "
                           f"labels in {path.name}; classification allows at most {MAX_CLASSES:,} "
                           "classes. Set the task to 'regression' for numeric targets.")
    return np.array(mapping, dtype=np.int64), "classification", names


def _csv_task(opts: dict) -> str:
    return opts["task"] if opts["task"] in ("classification", "regression") else "auto"


def csv_table(opts: dict, rng: np.random.Generator) -> Samples:
    path: Path = opts["path"]
    table = _scan(path, opts["delimiter"], opts["label_column"], keep=True)
    column = table.header[table.label]
    mapping, found_task, names = _labels(path, column, table, _csv_task(opts))
    y = mapping[table.codes]
    feature_names = ", ".join(table.header[c] for c in table.feature_cols)
    desc = (f"{path.name}: {table.rows} rows, {len(table.feature_cols)} features ({feature_names}); "
            f"label '{column}' -> {found_task}" + (f" with {len(names)} classes." if names else "."))
    return Samples(table.features.astype(np.float32), y, found_task, "flat", names, desc)


def describe_csv(opts: dict) -> dict:
    """Streams the file once, checking every row, without keeping the feature values."""
    path: Path = opts["path"]
    table = _scan(path, opts["delimiter"], opts["label_column"], keep=False)
    _, task, names = _labels(path, table.header[table.label], table, _csv_task(opts))
    return {"task": task, "input_shape": (len(table.feature_cols),), "dtype": "float64",
            "class_names": names, "n_samples": table.rows, "n_val": None,
            "target_shape": () if task == "classification" else (1,)}


# ---------------------------------------------------------------- NPZ

_NPZ_HELP = "expected an .npz archive of numeric arrays 'x' and 'y' as written by numpy.savez"
_READ_ERRORS = (OSError, EOFError, ValueError, RuntimeError, NotImplementedError, zipfile.BadZipFile,
                zlib.error)


@dataclass(frozen=True)
class _Member:
    """One array of the archive, as its .npy header describes it (its body not read yet)."""

    key: str
    info: zipfile.ZipInfo
    shape: tuple[int, ...]
    dtype: np.dtype

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0


def _open_npz(path: Path) -> zipfile.ZipFile:
    regular_file(path, "path")
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(b"\x93NUMPY"):
        raise DatasetError(f"{where('path', path)}: is a single .npy array, not an .npz archive; save inputs "
                           "and labels together with numpy.savez(path, x=x, y=y).")
    if not head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        kind = sniff(head)
        raise DatasetError(f"{where('path', path)}: not an .npz archive"
                           + (f" (it is {kind})" if kind else "") + f"; {_NPZ_HELP}.")
    try:
        return zipfile.ZipFile(path)
    except _READ_ERRORS as exc:
        raise DatasetError(f"{where('path', path)}: not a readable .npz archive ({exc}); "
                           f"{_NPZ_HELP}.") from None


def _header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, key: str, path: Path) -> _Member:
    """Read one member's .npy header (a few hundred bytes even when compressed) and check that its
    body can be loaded: no Python objects, and a size that matches the archive and BYTE_LIMIT."""
    fmt = np.lib.format
    try:
        with zf.open(info) as fp:
            version = fmt.read_magic(fp)
            read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, _fortran, dtype = read_header(fp)
            offset = fp.tell()
    except _READ_ERRORS as exc:
        raise DatasetError(f"{where('path', path)}: '{key}' is not a readable NumPy array ({exc}).") from None
    if dtype.hasobject:
        # Never unpickle: loading a dataset must not execute code from the file.
        raise DatasetError(f"{where('path', path)}: '{key}' holds Python objects ({dtype}), which are not "
                           "loaded for safety; store numeric arrays.")
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    # 'x' is checked at the float32 size the trainer will hold; 'y' as stored (it stays small).
    needed = float32_bytes(shape, dtype) if key == "x" else nbytes
    check_bytes(needed, "path", path, f"'{key}' of shape {shape}")
    if info.file_size != offset + nbytes:
        raise DatasetError(f"{where('path', path)}: '{key}' claims shape {shape} ({nbytes} bytes) but the "
                           f"archive holds {info.file_size - offset} bytes for it; the file is damaged.")
    return _Member(key, info, tuple(shape), dtype)


def _members(path: Path) -> tuple[zipfile.ZipFile, dict[str, _Member]]:
    zf = _open_npz(path)
    try:
        infos = {i.filename[:-4]: i for i in zf.infolist() if i.filename.endswith(".npy")}
        if "x" not in infos:
            found = sorted(infos) or "no arrays"
            raise DatasetError(f"{where('path', path)}: has no array named 'x'; it holds {found}.")
        return zf, {k: _header(zf, infos[k], k, path) for k in ("x", "y") if k in infos}
    except BaseException:
        zf.close()
        raise


def _read(zf: zipfile.ZipFile, member: _Member, path: Path) -> np.ndarray:
    try:
        with zf.open(member.info) as fp:
            return np.lib.format.read_array(fp, allow_pickle=False)
    except _READ_ERRORS as exc:
        raise DatasetError(f"{where('path', path)}: cannot read '{member.key}' ({exc}).") from None


def _check_headers(path: Path, x: _Member, y: _Member | None, task: str) -> str:
    """Everything about x and y that the headers tell; returns the task ('auto' resolved)."""
    check_input_header(x.shape, x.dtype, "path", path, "'x'")
    if y is None:
        if task != "reconstruction":
            raise DatasetError(f"{where('path', path)}: has no array named 'y'; add labels or set the "
                               "task to 'reconstruction'.")
        return task
    if len(y.shape) == 0 or len(y) != len(x):
        raise DatasetError(f"{where('path', path)}: 'x' holds {len(x)} samples but 'y' holds "
                           f"{len(y) if y.shape else 'a single value'}; the counts must match.")
    if y.dtype.kind not in "biuf":
        what = "(complex targets are not supported)" if y.dtype.kind == "c" else str(y.shape)
        raise DatasetError(f"{where('path', path)}: 'y' must be numbers; got {y.dtype} {what}.")
    if task == "auto":
        return "classification" if y.dtype.kind in "iu" and y.shape[1:] in ((), (1,)) else "regression"
    return task


def _label_vector(y: np.ndarray) -> np.ndarray:
    """Class labels saved as a column, y[:, None] of shape (N, 1) as scikit-learn and Keras users often
    have them, as the (N,) vector classification needs."""
    return y[:, 0] if y.ndim == 2 and y.shape[1] == 1 else y


def npz_arrays(opts: dict, rng: np.random.Generator) -> Samples:
    path: Path = opts["path"]
    zf, members = _members(path)
    with zf:
        x_member, y_member = members["x"], members.get("y")
        task = _check_headers(path, x_member, y_member, opts["task"])
        x = _read(zf, x_member, path)
        check_finite(x, "path", path, "'x'")
        if task == "reconstruction" and y_member is None:
            return Samples(x, None, "reconstruction", _layout(x), (), f"{path.name}: x {x.shape}.")
        y = _read(zf, y_member, path)
    names: tuple[str, ...] = ()
    if task == "classification":
        y, k = class_indices(_label_vector(y), "path", path, "'y'")
        names = tuple(str(c) for c in range(k))
    elif task == "regression":
        check_finite(y, "path", path, "'y'")
        y = y.astype(np.float32)
    return Samples(x, y, task, _layout(x), names, f"{path.name}: x {x.shape}, y {y.shape}, {task}.")


def describe_npz(opts: dict) -> dict:
    """From the .npy headers; 'y' is read only for classification, to count the classes."""
    path: Path = opts["path"]
    zf, members = _members(path)
    with zf:
        x, y = members["x"], members.get("y")
        task = _check_headers(path, x, y, opts["task"])
        names: tuple[str, ...] = ()
        if task == "classification":
            _, k = class_indices(_label_vector(_read(zf, y, path)), "path", path, "'y'")
            names = tuple(str(c) for c in range(k))
    target = None
    if task == "regression":
        target = y.shape[1:] or (1,)
    return {"task": task, "input_shape": x.shape[1:], "dtype": x.dtype.name, "class_names": names,
            "n_samples": len(x), "n_val": None, "target_shape": target}


def _layout(x: np.ndarray) -> str:
    return {2: "flat", 3: "sequence", 4: "image"}.get(x.ndim, "flat")
