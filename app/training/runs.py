"""Run folders, Qt-free: each training run lives in RUN_DIR (document.json, run.json with its name and
status, metrics.jsonl, checkpoints). Names a person can tell apart, what the Runs list shows of a folder,
and the lock that tells a live run from one whose process was killed. The window's Runs panel
(widgets/runs.py) and `wiregrad train` both use it."""
from __future__ import annotations

import json
import math
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.files import write_text_atomic


def note_run(run_dir: Path | None, **fields: Any) -> None:
    """Merge `fields` into RUN_DIR/run.json (its status); a damaged run.json is replaced."""
    if run_dir is None:
        return
    path = Path(run_dir) / "run.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    try:
        write_text_atomic(path, json.dumps({**(meta if isinstance(meta, dict) else {}), **fields}))
    except OSError:
        pass  # the folder went away: the run's metadata only


@dataclass
class RunRecord:
    path: Path
    name: str
    started: float
    status: str
    summary: str
    graph: str | None = None  # the graph (example or file) it trained, for numbering its runs
    bug: str | None = None  # the classic bug it was broken with on purpose (app/training/bugs.py), if any


def new_run_dir(root: Path, graph_name: str) -> Path:
    """A fresh, sortable directory name: runs/20250101-120000-spirals[-2]."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in graph_name)[:40] or "run"
    path = root / f"{stamp}-{safe}"
    n = 2
    while path.exists():
        path = root / f"{stamp}-{safe}-{n}"
        n += 1
    path.mkdir(parents=True)
    return path


def run_name(root: Path, graph_name: str, started: float | None = None) -> str:
    """A name a person can tell apart from the graph's other runs: "cnn_digits #3 · 14:05" (the number
    counts the runs of that graph kept under `root`, this one included)."""
    graph_name = graph_name or "untitled"
    taken = sum(1 for r in list_runs(root) if r.graph == graph_name)
    clock = time.strftime("%H:%M", time.localtime(time.time() if started is None else started))
    return f"{graph_name} #{taken + 1} · {clock}"


def _json_object(path: Path) -> dict[str, Any]:
    """A JSON file's object; {} when it is missing, unreadable, binary or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return {}
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def _summary_text(r: dict[str, Any]) -> str:
    epochs = r.get("epochs")
    summary = f"{epochs} epoch{'' if epochs == 1 else 's'}" if isinstance(epochs, int) else ""
    loss = _number(r.get("val_loss"))
    loss = loss if loss is not None else _number(r.get("train_loss"))
    acc = _number(r.get("val_accuracy"))
    if loss is not None:
        summary += f", loss {loss:.3g}"
    if acc is not None:
        summary += f", acc {acc:.1%}"
    return summary.lstrip(", ")


TAIL_BYTES = 256 * 1024  # where a run's last summary is looked for: the list stays quick for long runs


def _tail_lines(path: Path) -> list[str]:
    """The last lines of a file (its final TAIL_BYTES), undecodable bytes replaced; [] when unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            return f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _newer(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_mtime_ns > b.stat().st_mtime_ns
    except OSError:
        return False


RUN_LOCK = "run.lock"  # held by the process that trains a segment of the run (see RunLock)
LIVE_STATUSES = ("running", "paused", "stopping")
# a run without a lock (made before runs were locked) that wrote nothing for this long was killed
QUIET_SECONDS = 15 * 60


class RunLock:
    """RUN_DIR/run.lock held by the process that trains the run (the window or `wiregrad train`).

    An OS lock on the open file (flock on POSIX, msvcrt on Windows): the system drops it when the process
    ends, however it ends, so a run.json that says "running" while nobody holds the lock was interrupted.
    The file carries the holder's pid and host for a person who looks; it is removed on release, so a file
    left behind means its holder was killed."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def unlock(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            self.path.unlink()  # first: another process that opens it now finds no file, or a fresh one
        except OSError:
            pass
        _release(fd)
        os.close(fd)

    def touch(self) -> None:
        """Rewrite the holder's line: the lock file is then newer than a run.json written meanwhile."""
        if self._fd is not None:
            _write_holder(self._fd)


def _try_lock(fd: int) -> bool:
    try:
        if os.name == "nt":
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _release(fd: int) -> None:
    try:
        if os.name == "nt":
            import msvcrt

            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:
        pass


def hold_run_lock(run_dir: Path) -> RunLock | None:
    """Take RUN_DIR/run.lock while this process trains the run (see RunLock). None when it can't be
    taken: another live process trains the run, or the folder is read-only."""
    path = Path(run_dir) / RUN_LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    if not _try_lock(fd):
        os.close(fd)
        return None
    _write_holder(fd)
    return RunLock(path, fd)


def _write_holder(fd: int) -> None:
    """Who holds the lock (pid, host), for a person who looks; writing also makes the file newer."""
    try:
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"{os.getpid()}\n{socket.gethostname()}\nwiregrad\n".encode())
    except OSError:
        pass


def _interrupted(path: Path, status: str) -> bool:
    """A run.json that says the run trains, when nothing trains it: the app that held its lock is gone
    (and no one wrote run.json since it locked), or, without the app's lock (a CLI run), nothing was
    written for QUIET_SECONDS."""
    if status not in LIVE_STATUSES:
        return False
    lock_path = path / RUN_LOCK
    if lock_path.exists() and not _newer(path / "run.json", lock_path):
        probe = hold_run_lock(path)
        if probe is None:
            return False  # a live process (this app, another, or `wiregrad train`) trains it
        probe.unlock()  # the owner is gone: its stale lock goes too; run.json keeps the verdict
        _mark_interrupted(path)
        return True
    newest = 0.0
    for name in ("metrics.jsonl", "run.json"):
        try:
            newest = max(newest, (path / name).stat().st_mtime)
        except OSError:
            pass
    return newest > 0 and time.time() - newest > QUIET_SECONDS


def _mark_interrupted(path: Path) -> None:
    meta = _json_object(path / "run.json")
    try:
        write_text_atomic(path / "run.json", json.dumps({**meta, "status": "interrupted"}))
    except OSError:
        pass  # a read-only run folder: it shows as interrupted, the file stays as it was


def read_run(path: Path) -> RunRecord | None:
    """What the list shows of one RUN_DIR (None when it isn't one). A damaged run folder (a run.json
    that is not an object, fields of the wrong type, a binary metrics file) still lists, with what
    can be read of it: it must never stop the Runs panel, or the app, from opening."""
    if not (path / "document.json").is_file():
        return None
    meta = _json_object(path / "run.json")
    status = meta.get("status") if isinstance(meta.get("status"), str) else "unknown"
    summary = ""
    for line in reversed(_tail_lines(path / "metrics.jsonl")):
        try:
            r = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash, or by the tail's start
        if not isinstance(r, dict) or r.get("kind") not in ("summary", "run"):
            continue
        if r["kind"] == "run":  # a segment began after the last summary: it runs now (run.json says)
            break
        # the last segment's end; run.json written after it (a run continued just now) knows better
        if isinstance(r.get("status"), str) and (status == "unknown" or not _newer(path / "run.json",
                                                                                    path / "metrics.jsonl")):
            status = r["status"]
        summary = _summary_text(r)
        break
    if _interrupted(path, status):
        status = "interrupted"
    started = _number(meta.get("started"))
    if started is None:
        try:
            started = path.stat().st_mtime
        except OSError:
            started = 0.0
    name = meta.get("name") if isinstance(meta.get("name"), str) and meta.get("name") else path.name
    graph = meta.get("graph") if isinstance(meta.get("graph"), str) else None
    bug = meta.get("inject_bug") if isinstance(meta.get("inject_bug"), str) else None
    return RunRecord(path, name, started, status, summary, graph, bug)


def list_runs(root: Path) -> list[RunRecord]:
    """Runs under `root`, newest first."""
    if not root.exists():
        return []
    try:
        paths = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return []
    runs = [r for p in paths if (r := read_run(p)) is not None]
    return sorted(runs, key=lambda r: r.started, reverse=True)


def run_steps_per_epoch(path: Path) -> int:
    """Batches per epoch of a run: what its run record says (a PyTorch run), else from its document and
    dataset size in metrics.jsonl."""
    try:
        from app.training import read_metrics

        records = read_metrics(path / "metrics.jsonl")
        info = next(r for r in records if r.get("kind") == "run")
        if isinstance(info.get("steps_per_epoch"), int) and info["steps_per_epoch"] > 0:
            return info["steps_per_epoch"]  # a PyTorch run says it: each of its processes trains a share
        doc = json.loads((path / "document.json").read_text(encoding="utf-8"))
        batch = int(doc["training"]["batch_size"])
        return max(1, -(-int(info["dataset"]["train"]) // batch))
    except (OSError, ValueError, StopIteration, KeyError, TypeError):
        return 1
