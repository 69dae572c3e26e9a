"""Reading and writing the user's files safely: every reader of a path the user typed goes through here.

A path can name a FIFO (open() blocks forever), /dev/zero or /dev/urandom (read() never ends and eats
memory), a directory, or a file far larger than anything Wiregrad writes. `open_regular` stats the
path first, opens it with O_NONBLOCK (so even a FIFO swapped in after the stat cannot block) and
checks again on the open descriptor, so only regular files of a sane size are ever read. The
errors are OSError subclasses whose `strerror` is a plain reason, so callers that already say
"can't read PATH: {exc.strerror}" keep working unchanged.

`atomic_write` is the writer's counterpart: temp file in the same folder, fsync, rename, so a full
disk or a crash never leaves a half-written file where a good one was.
"""
from __future__ import annotations

import errno
import os
import stat
import sys
import zipfile
from collections.abc import Callable
from typing import IO, BinaryIO

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

# the largest file each kind of reader accepts (far above anything Wiregrad writes)
MAX_GRAPH_BYTES = 128 * MiB  # a document is at most 32 Mi characters (4 bytes each in UTF-8)
MAX_INFO_BYTES = 1 * MiB  # small JSON side files (recovery info)
MAX_CHECKPOINT_BYTES = 64 * GiB
MAX_WEIGHTS_BYTES = 64 * GiB


class UnreadableFileError(OSError):
    """A path that is not a regular file, or one too large for what it should hold."""

    def __init__(self, path: str | os.PathLike[str], reason: str, code: int = errno.EINVAL) -> None:
        super().__init__(code, reason, os.fspath(path))


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check_stat(path: str | os.PathLike[str], st: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = _kind(st.st_mode)
        code = errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL
        reason = f"it is {kind}, not a file" if kind != "not a regular file" else "it is not a regular file"
        raise UnreadableFileError(path, reason, code)
    if st.st_size > max_bytes:
        raise UnreadableFileError(
            path, f"it is too large ({_size(st.st_size)}; the limit is {_size(max_bytes)})", errno.EFBIG)


def _size(n: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def regular_size(path: str | os.PathLike[str], max_bytes: int | None = None) -> int:
    """The size of `path` once stat says it is a regular file (of at most `max_bytes`), without opening
    it: a FIFO would block the open forever, a folder gives a confusing error, a device is endless. Raises
    like `open_regular` (UnreadableFileError with errno EISDIR for a folder, EFBIG when too large)."""
    st = os.stat(path)
    _check_stat(path, st, sys.maxsize if max_bytes is None else max_bytes)
    return st.st_size


def open_regular(path: str | os.PathLike[str], max_bytes: int) -> BinaryIO:
    """Open a regular file of at most `max_bytes` for binary reading. OSError (FileNotFoundError,
    PermissionError, UnreadableFileError...) otherwise; never blocks on a FIFO or a device."""
    regular_size(path, max_bytes)  # refuse devices before opening them at all
    flags = os.O_RDONLY
    for name in ("O_NONBLOCK", "O_NOCTTY", "O_CLOEXEC"):  # O_NONBLOCK: a FIFO swapped in can't block the open
        flags |= getattr(os, name, 0)
    fd = os.open(path, flags)
    try:
        _check_stat(path, os.fstat(fd), max_bytes)  # the path may have been swapped since the stat
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The whole content of a regular file of at most `max_bytes` (read with that cap, so a file that
    grows while it is read cannot take more memory)."""
    with open_regular(path, max_bytes) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnreadableFileError(path, f"it is too large (over {_size(max_bytes)})", errno.EFBIG)
    return data


def check_regular(path: str | os.PathLike[str], max_bytes: int) -> None:
    """Raise like `open_regular` unless `path` is a regular file a reader may open."""
    open_regular(path, max_bytes).close()


def check_zip_members(fh: IO[bytes], path: str | os.PathLike[str], *, max_total: int) -> None:
    """Refuse a zip whose members could inflate beyond what the file holds (a zip bomb): every
    member must be stored uncompressed (as Wiregrad writes checkpoints) with its declared sizes
    agreeing, and all of them together at most `max_total` bytes. After this check, reading the
    members cannot take more memory than the file's own size. Raises UnreadableFileError;
    zipfile.BadZipFile when it is no zip at all. Leaves `fh` at its start."""
    start = fh.tell()
    try:
        with zipfile.ZipFile(fh) as zf:
            total = 0
            for info in zf.infolist():
                if info.compress_type != zipfile.ZIP_STORED:
                    raise UnreadableFileError(path, f"its member {info.filename!r} is compressed; Wiregrad "
                                                    "writes checkpoints uncompressed, so it was altered")
                if info.file_size != info.compress_size:
                    raise UnreadableFileError(path, f"its member {info.filename!r} declares {info.file_size} "
                                                    f"bytes but stores {info.compress_size}")
                total += info.file_size
                if total > max_total:
                    raise UnreadableFileError(path, f"its members declare more data ({_size(total)}) than "
                                                    f"the file holds ({_size(max_total)})")
    finally:
        fh.seek(start)


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], None]) -> None:
    """Call write(f) on a temp file next to `path`, fsync, then rename it over `path` (the engine's own
    atomic write, which checkpoints use too). On any failure (disk full, read-only folder, file size
    limit) the temp file is removed, an existing `path` is untouched, and the OSError propagates."""
    from engine.serialization import _atomic_write

    _atomic_write(path, write)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """`atomic_write` for UTF-8 text."""
    data = text.encode("utf-8")
    atomic_write(path, lambda f: f.write(data))


def describe_os_error(exc: OSError) -> str:
    """The plain reason of an OSError ("No space left on device", "Read-only file system", "it is a
    pipe (FIFO), not a file"), without the "[Errno 28]" and the repeated path of str(exc)."""
    if isinstance(exc, FileExistsError | NotADirectoryError) and exc.filename:
        path = os.path.abspath(os.fspath(exc.filename))
        while not os.path.lexists(path) and os.path.dirname(path) != path:
            path = os.path.dirname(path)
        if os.path.lexists(path) and not os.path.isdir(path):  # the first part of the path that exists
            return f"{path} is a file, not a folder"
    return exc.strerror or str(exc) or type(exc).__name__


__all__ = ["MAX_CHECKPOINT_BYTES", "MAX_GRAPH_BYTES", "MAX_INFO_BYTES", "MAX_WEIGHTS_BYTES",
           "UnreadableFileError", "atomic_write", "check_regular", "check_zip_members", "describe_os_error",
           "open_regular", "read_bytes", "regular_size", "write_text_atomic"]
