"""Runs that say how to reproduce them, Qt-free: the record each run keeps in run.json ("reproduce": seeds,
the document and its SHA-256, the dataset's identity, library versions, device, thread counts, determinism
flags), and `reproduce`, which trains the recorded document again into a new run folder and compares the
losses step by step: bit for bit on the CPU, within GPU_RTOL on a GPU. `wiregrad reproduce RUN_DIR` and the
Runs panel's Reproduce button both print `ReproduceReport.lines()`."""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import os
import platform
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.document import Document, DocumentError, load_document

from .errors import TrainerError

RECORD_KEY = "reproduce"  # the run.json field
RECORD_FORMAT = 1
GPU_RTOL = 1e-3  # a GPU run's losses match when every step is this close (relative) ...
GPU_ATOL = 1e-6  # ... or this close (absolute): GPU reductions need not repeat their order
HASH_LIMIT = 4 << 30  # dataset files beyond this are identified by size and time only (hashing would stall)


class ReproduceError(TrainerError):
    """A run that can't be reproduced as recorded: one line naming the file or the run.json field."""


# --- the record -------------------------------------------------------------------------------------------
def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def document_sha256(doc: Document, run_dir: str | Path | None = None) -> str:
    """The SHA-256 of RUN_DIR/document.json's bytes, the snapshot the run trains (a later Wiregrad that reads
    the file into a richer document does not change it); of the document's JSON without a run folder."""
    if run_dir is not None:
        try:
            return sha256_file(Path(run_dir) / "document.json")
        except OSError:
            pass
    text = json.dumps(doc.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_identity(path: Path) -> dict[str, Any]:
    """Path, SHA-256 and size of a dataset file; a folder (image_folder) hashes every file under it with
    its relative path, in sorted order."""
    path = Path(path)
    if path.is_dir():
        digest, size, count = hashlib.sha256(), 0, 0
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(f.relative_to(path).as_posix().encode("utf-8", "surrogateescape") + b"\0")
            digest.update(bytes.fromhex(sha256_file(f)))
            size += f.stat().st_size
            count += 1
        return {"path": str(path), "sha256": digest.hexdigest(), "size": size, "files": count}
    size = path.stat().st_size
    return {"path": str(path), "sha256": sha256_file(path) if size <= HASH_LIMIT else None, "size": size}


def dataset_identity(doc: Document, base_dir: str | Path | None) -> dict[str, Any]:
    """Which data the run read: the catalogue name and its options (defaults filled in, paths absolute),
    and for every file it read (a user's file, the built-in digits) its path, SHA-256 and size."""
    from app.datasets.catalogue import resolve_options

    from .data import _dataset_spec

    info, opts = resolve_options(_dataset_spec(doc), Path(base_dir) if base_dir is not None else None)
    files: dict[str, Any] = {}
    for name, value in sorted(opts.items()):
        if isinstance(value, Path):
            try:
                files[name] = file_identity(value.resolve())
            except OSError as exc:
                files[name] = {"path": str(value), "error": exc.strerror or str(exc)}
    if info.name == "digits":
        from app.datasets.digits import DIGITS_PATH

        files["built-in"] = file_identity(DIGITS_PATH)
    options = {k: (str(v.resolve()) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
               for k, v in opts.items()}
    return {"name": info.name, "category": info.category, "options": options, "files": files}


def _distribution_version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def library_versions() -> dict[str, str | None]:
    """Python, NumPy, CuPy (None when it is not installed; read from its metadata, not imported), Wiregrad,
    ml_dtypes and the platform."""
    import numpy as np

    import engine

    cupy = sys.modules.get("cupy")
    cupy_version = getattr(cupy, "__version__", None) if cupy is not None else None
    if cupy_version is None:
        dists = importlib.metadata.packages_distributions().get("cupy", [])
        cupy_version = _distribution_version(*dists) if dists else None
    return {"python": platform.python_version(), "numpy": np.__version__, "cupy": cupy_version,
            "wiregrad": _distribution_version("wiregrad") or engine.__version__,
            "ml_dtypes": _distribution_version("ml_dtypes"), "platform": platform.platform()}


def determinism_flags() -> dict[str, Any]:
    import engine
    import engine.backends

    cudnn = engine.backends.cudnn
    return {"use_deterministic_algorithms": engine.are_deterministic_algorithms_enabled(),
            "cudnn.deterministic": bool(cudnn.deterministic), "cudnn.benchmark": bool(cudnn.benchmark),
            "float32_matmul_precision": engine.backends.get_float32_matmul_precision()}


def thread_counts(blas_threads: int | None) -> dict[str, Any]:
    """The BLAS cap the run asked for and the threads in effect where this is called (inside the run)."""
    import engine

    return {"blas_threads": blas_threads, "blas_threads_in_effect": engine.get_num_threads(),
            "engine_interop_threads": engine.get_num_interop_threads(), "cpu_count": os.cpu_count()}


def reproduce_record(doc: Document, *, device: Any, blas_threads: int | None,
                     base_dir: str | Path | None = None, run_dir: str | Path | None = None,
                     epochs: int | None = None) -> dict[str, Any]:
    """What run.json keeps under "reproduce" (call it inside the run: the thread counts are those in effect).
    The seed drives everything random: the engine's generator (`engine.manual_seed(seed)`), the dataset's
    generation and split (`SeedSequence(seed)`), and each epoch's shuffle (PCG64 of (seed, epoch)).
    `epochs`: what the run trains to when Start or `--epochs` overrode the document's (schedules are planned
    from it)."""
    seed = int(doc.training["seed"])
    try:
        dataset = dataset_identity(doc, base_dir)
    except Exception as exc:  # noqa: BLE001 - the record never stops a run that has loaded its data
        dataset = {"error": f"{type(exc).__name__}: {exc}"}
    return {"format": RECORD_FORMAT, "recorded": time.time(),
            "seeds": {"seed": seed, "engine": f"engine.manual_seed({seed})",
                      "dataset": f"numpy SeedSequence({seed}).spawn(2)",
                      "shuffle": f"PCG64(({seed}, epoch))"},
            "document": "document.json", "document_sha256": document_sha256(doc, run_dir),
            "epochs": int(epochs) if epochs is not None else int(doc.training["epochs"]),
            "inject_bug": doc.training.get("inject_bug") if "inject_bug" in doc.training else None,
            "base_dir": str(Path(base_dir).resolve()) if base_dir is not None else None,
            "dataset": dataset, "versions": library_versions(), "device": str(device),
            "threads": thread_counts(blas_threads), "determinism": determinism_flags()}


class ReproduceRecorder:
    """A Trainer callback that writes the record into run.json as each segment of the run starts (inside
    the run, where its BLAS cap is in effect): `wiregrad train` and `reproduce` add it; the window's session
    calls `record_run` from its own callback."""

    def __init__(self, trainer: Any, base_dir: str | Path | None, lock: Any = None) -> None:
        self.trainer, self.base_dir, self.lock = trainer, base_dir, lock

    def on_run_start(self, _info: Any) -> None:
        record_run(self.trainer, self.base_dir, self.lock)


def record_run(trainer: Any, base_dir: str | Path | None, lock: Any = None) -> None:
    """RUN_DIR/run.json's "reproduce" record for the Trainer's run (nothing without a run folder). `lock`,
    the run's `RunLock` held by this process, is touched after: a run.json newer than the lock would read as
    written after its holder died (see `runs._interrupted`)."""
    from .runs import note_run

    if trainer.run_dir is not None:
        note_run(trainer.run_dir, **{RECORD_KEY: reproduce_record(
            trainer.doc, device=trainer.device, blas_threads=trainer.blas_threads, base_dir=base_dir,
            run_dir=trainer.run_dir, epochs=trainer.epochs)})
        if lock is not None:
            lock.touch()


# --- reading it back ---------------------------------------------------------------------------------------
def _field(record: dict[str, Any], name: str, kind: type | tuple[type, ...], where: Path) -> Any:
    """record[name], of type `kind`, or a ReproduceError naming the field and the file."""
    value = record.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        got = "missing" if name not in record else f"{type(value).__name__} {str(value)[:40]!r}"
        raise ReproduceError(f"{where}: field '{RECORD_KEY}.{name}' is {got}; the run can't be reproduced "
                             f"from it")
    return value


def read_record(run_dir: str | Path) -> dict[str, Any]:
    """RUN_DIR/run.json's reproduce record, its fields checked; a ReproduceError (one line) otherwise."""
    path = Path(run_dir) / "run.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReproduceError(f"{path}: no such file; is {run_dir} a run folder?") from None
    except (OSError, ValueError) as exc:
        raise ReproduceError(f"{path}: can't be read ({exc.__class__.__name__}: {exc})") from None
    if not isinstance(meta, dict):
        raise ReproduceError(f"{path}: is not a JSON object")
    record = meta.get(RECORD_KEY)
    if not isinstance(record, dict):
        raise ReproduceError(f"{path}: has no '{RECORD_KEY}' record (the run was made before runs recorded "
                             "how to reproduce them)")
    seeds = _field(record, "seeds", dict, path)
    seed = seeds.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ReproduceError(f"{path}: field '{RECORD_KEY}.seeds.seed' must be a non-negative integer, "
                             f"got {str(seed)[:40]!r}")
    _field(record, "document_sha256", str, path)
    _field(record, "device", str, path)
    for name in ("dataset", "versions", "threads", "determinism"):
        _field(record, name, dict, path)
    blas = record["threads"].get("blas_threads")
    if blas is not None and (not isinstance(blas, int) or isinstance(blas, bool) or blas < 1):
        raise ReproduceError(f"{path}: field '{RECORD_KEY}.threads.blas_threads' must be a positive integer "
                             f"or null, got {str(blas)[:40]!r}")
    epochs = record.get("epochs")
    if epochs is not None and (not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1):
        raise ReproduceError(f"{path}: field '{RECORD_KEY}.epochs' must be a positive integer, got "
                             f"{str(epochs)[:40]!r}")
    base_dir = record.get("base_dir")
    if base_dir is not None and not isinstance(base_dir, str):
        raise ReproduceError(f"{path}: field '{RECORD_KEY}.base_dir' must be a folder path or null")
    files = record["dataset"].get("files", {})
    if not isinstance(files, dict) or not all(isinstance(f, dict) for f in files.values()):
        raise ReproduceError(f"{path}: field '{RECORD_KEY}.dataset.files' must be an object of files")
    return record


def record_rows(meta: Any) -> list[tuple[str, str]]:
    """A run.json's reproduce record as (label, text) rows for a person (the Runs panel); [] without one.
    Never raises: a damaged record shows what can be read of it."""
    record = meta.get(RECORD_KEY) if isinstance(meta, dict) else None
    if not isinstance(record, dict):
        return []

    def get(d: Any, *keys: str) -> Any:
        for k in keys:
            d = d.get(k) if isinstance(d, dict) else None
        return d

    rows: list[tuple[str, str]] = []
    seed = get(record, "seeds", "seed")
    rows.append(("Seed", "?" if seed is None else f"{seed}  (engine, dataset split, each epoch's shuffle)"))
    if get(record, "epochs") is not None:
        rows.append(("Epochs", str(get(record, "epochs"))))
    sha = get(record, "document_sha256")
    rows.append(("Document", f"document.json  SHA-256 {sha[:16]}…" if isinstance(sha, str) else "?"))
    ds = get(record, "dataset")
    if isinstance(ds, dict):
        opts = ds.get("options") if isinstance(ds.get("options"), dict) else {}
        shown = ", ".join(f"{k}={v}" for k, v in opts.items() if not isinstance(v, str) or "/" not in v)
        rows.append(("Dataset", f"{ds.get('name', '?')} ({ds.get('category', '?')})" + (f": {shown}" if shown
                                                                                        else "")))
        for name, f in (ds.get("files") or {}).items() if isinstance(ds.get("files"), dict) else ():
            if isinstance(f, dict):
                sha = f.get("sha256")
                size = f.get("size")
                rows.append((f"  {name}", f"{f.get('path', '?')}  ·  "
                             + (f"{size:,} bytes" if isinstance(size, int) else "size ?")
                             + (f"  ·  SHA-256 {sha[:16]}…" if isinstance(sha, str) else "")))
        if ds.get("error"):
            rows.append(("  error", str(ds["error"])))
    versions = get(record, "versions")
    if isinstance(versions, dict):
        rows.append(("Libraries", ", ".join(f"{k} {v}" for k, v in versions.items()
                                            if k != "platform" and v is not None)))
        if versions.get("platform"):
            rows.append(("Platform", str(versions["platform"])))
    rows.append(("Device", str(get(record, "device"))))
    threads = get(record, "threads")
    if isinstance(threads, dict):
        rows.append(("Threads", f"BLAS {threads.get('blas_threads_in_effect')} (cap "
                                f"{threads.get('blas_threads') or 'none'}), inter-op "
                                f"{threads.get('engine_interop_threads')}, {threads.get('cpu_count')} CPUs"))
    det = get(record, "determinism")
    if isinstance(det, dict):
        rows.append(("Determinism", ", ".join(f"{k} {v}" for k, v in det.items())))
    bug = get(record, "inject_bug")
    if bug:
        rows.append(("Injected bug", str(bug)))
    return rows


# --- reproducing --------------------------------------------------------------------------------------------
@dataclass
class ReproduceReport:
    """What `reproduce` found: how many steps it compared on which device, whether the losses match (bit for
    bit on the CPU, within GPU_RTOL on a GPU), the first step that differs, and notes (a library version that
    changed since the run)."""

    run_dir: str
    new_run_dir: str
    device: str
    exact: bool  # bit for bit asked (CPU) or within tolerance (GPU)
    compared: int
    matched: bool
    first_difference: dict[str, Any] | None = None
    max_abs_difference: float = 0.0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        how = "bit for bit" if self.exact else f"within {GPU_RTOL:g} (relative)"
        out = [f"Reproduced {self.run_dir} in {self.new_run_dir}"]
        if self.matched:
            out.append(f"The losses of all {self.compared} steps compared on {self.device} match {how}.")
        else:
            d = self.first_difference or {}
            where = f"step {d.get('step')} (epoch {d.get('epoch', 0) + 1}, batch {d.get('batch', 0) + 1})"
            if d.get("reproduced") is None:
                out.append(f"The losses differ from {where}: the reproduction ended before it "
                           f"({self.compared} steps compared on {self.device}).")
            else:
                out.append(f"The losses differ from {where}: {d.get('original')!r} in the run, "
                           f"{d.get('reproduced')!r} now; not {how} (largest difference "
                           f"{self.max_abs_difference:.3g} over {self.compared} steps on {self.device}).")
        out += [f"Note: {n}" for n in self.notes]
        return out

    def to_dict(self) -> dict[str, Any]:
        return _finite(asdict(self))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def batch_losses(path: Path) -> list[dict[str, Any]]:
    """The losses of a run's metrics.jsonl, one per (epoch, batch) in training order (a batch trained again
    after an interrupted run was continued from an older checkpoint counts once, as it was last trained)."""
    from .metrics import read_metrics

    try:
        records = read_metrics(path)
    except OSError as exc:
        raise ReproduceError(f"{path}: can't be read ({exc.strerror or exc})") from None
    seen: dict[tuple[int, int], dict[str, Any]] = {}
    for r in records:
        if r.get("kind") != "batch" or not all(isinstance(r.get(k), int) for k in ("epoch", "batch")):
            continue
        loss = r.get("loss")
        if isinstance(loss, str):
            loss = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(loss)
        if not isinstance(loss, int | float) or isinstance(loss, bool):
            continue
        key = (r["epoch"], r["batch"])
        seen.pop(key, None)
        seen[key] = {"epoch": r["epoch"], "batch": r["batch"], "step": r.get("step"), "loss": float(loss)}
    return sorted(seen.values(), key=lambda r: (r["epoch"], r["batch"]))


def _same(a: float, b: float, exact: bool) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if exact:
        return a == b
    return math.isclose(a, b, rel_tol=GPU_RTOL, abs_tol=GPU_ATOL)


def compare_losses(original: list[dict[str, Any]], reproduced: list[dict[str, Any]], exact: bool
                   ) -> tuple[bool, dict[str, Any] | None, float, int]:
    """(matched, first difference, largest |difference|, steps compared) over the original's steps."""
    largest = 0.0
    for i, o in enumerate(original):
        r = reproduced[i] if i < len(reproduced) else None
        if r is None:
            return False, {**o, "original": o["loss"], "reproduced": None}, largest, i
        if math.isfinite(o["loss"]) and math.isfinite(r["loss"]):
            largest = max(largest, abs(o["loss"] - r["loss"]))
        if (r["epoch"], r["batch"]) != (o["epoch"], o["batch"]) or not _same(o["loss"], r["loss"], exact):
            first = {"step": o["step"], "epoch": o["epoch"], "batch": o["batch"], "original": o["loss"],
                     "reproduced": r["loss"]}
            for o2, r2 in zip(original[i + 1:], reproduced[i + 1:], strict=False):
                if math.isfinite(o2["loss"]) and math.isfinite(r2["loss"]):
                    largest = max(largest, abs(o2["loss"] - r2["loss"]))
            return False, first, largest, min(len(original), len(reproduced))
    return True, None, largest, len(original)


def _check_files(record: dict[str, Any], now: dict[str, Any]) -> None:
    """Every file the run read must be the same today: a changed or missing one is named."""
    for name, then in record["dataset"].get("files", {}).items():
        if "sha256" not in then and "size" not in then:
            continue
        current = now.get("files", {}).get(name, {})
        where = then.get("path", name)
        if current.get("error"):
            raise ReproduceError(f"the dataset file {where} ({name}) can't be read now: {current['error']}")
        if current.get("sha256") != then.get("sha256") or current.get("size") != then.get("size"):
            sha = current.get("sha256") or "?"
            raise ReproduceError(f"the dataset file {where} ({name}) changed since the run: SHA-256 "
                                 f"{sha[:12]}…, {current.get('size')} bytes now; the run read "
                                 f"{str(then.get('sha256'))[:12]}…, {then.get('size')} bytes")


def _version_notes(then: dict[str, Any]) -> list[str]:
    now = library_versions()
    return [f"{name} was {then.get(name)} in the run, {now.get(name)} now: bit-for-bit equality may not hold"
            for name in ("python", "numpy", "cupy", "wiregrad", "ml_dtypes")
            if name in then and then.get(name) != now.get(name)]


class _StopAfter:
    """A Trainer callback that keeps each batch's loss and stops the run after `steps` batches."""

    def __init__(self, trainer: Any, steps: int) -> None:
        self.trainer, self.steps, self.losses = trainer, steps, []

    def on_batch_end(self, m: Any) -> None:
        self.losses.append({"epoch": m.epoch, "batch": m.batch, "step": m.step, "loss": float(m.loss)})
        t = self.trainer
        last = m.epoch == t.epochs - 1 and m.batch == t.steps_per_epoch - 1  # the run ends there anyway
        if len(self.losses) >= self.steps and not last:
            t.stop()


def reproduce(run_dir: str | Path, *, steps: int | None = None, out_dir: str | Path | None = None,
              callbacks: list[Any] | None = None) -> ReproduceReport:
    """Train RUN_DIR's recorded document again, from the recorded seed, on the recorded device and BLAS
    threads, into a new run folder beside it (or `out_dir`), and compare its losses with the run's: the
    first `steps` batches (all the run recorded by default). ReproduceError (one line) when the record is
    missing or damaged, the document or a dataset file changed, or the device is not here."""
    from app.training import Trainer

    from .config import resolve_device
    from .doctor import DEFAULT_POLICY
    from .runs import new_run_dir, note_run, read_run

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReproduceError(f"{run_dir}: no such run folder")
    record = read_record(run_dir)
    try:
        doc = load_document(run_dir / "document.json")
    except DocumentError as exc:
        raise ReproduceError(f"{run_dir / 'document.json'}: {exc}") from None
    sha = document_sha256(doc, run_dir)
    if sha != record["document_sha256"]:
        raise ReproduceError(f"{run_dir / 'document.json'} changed since the run: its SHA-256 is "
                             f"{sha[:12]}…, the run recorded {record['document_sha256'][:12]}…")
    if int(doc.training["seed"]) != record["seeds"]["seed"]:
        raise ReproduceError(f"{run_dir / 'document.json'}: seed {doc.training['seed']} is not the recorded "
                             f"seed {record['seeds']['seed']}")
    base_dir = record.get("base_dir")
    if "error" not in record["dataset"]:
        _check_files(record, dataset_identity(doc, base_dir))
    original = batch_losses(run_dir / "metrics.jsonl")
    if not original:
        raise ReproduceError(f"{run_dir / 'metrics.jsonl'}: has no batch losses to compare")
    if steps is not None:
        if steps < 1:
            raise ReproduceError(f"--steps must be at least 1, got {steps}")
        original = original[:steps]
    device_name = record["device"]
    kind = device_name.split(":")[0]
    try:
        device = resolve_device(kind)
    except TrainerError:
        raise ReproduceError(f"the run trained on {device_name}, which this machine does not have: a run is "
                             "reproduced on the kind of device it trained on") from None
    exact = device.type == "cpu"
    previous = read_run(run_dir)
    name = previous.name if previous is not None else run_dir.name
    graph = previous.graph if previous is not None and previous.graph else "run"
    target = Path(out_dir) if out_dir is not None else new_run_dir(run_dir.parent, f"{graph}-reproduce")
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run_dir / "document.json", target / "document.json")  # the very bytes: the same hash
    note_run(target, name=f"{name} · reproduced", graph=graph,
             started=time.time(), status="running", reproduces=str(run_dir.resolve()))
    try:
        trainer = Trainer(doc, target, device=kind, base_dir=base_dir, on_nonfinite="stop",
                          blas_threads=record["threads"].get("blas_threads"), epochs=record.get("epochs"))
        trainer.set_doctor_policy(dict.fromkeys(DEFAULT_POLICY, "warn"))  # a pause changed no number
        keeper = _StopAfter(trainer, len(original))
        trainer.callbacks += [keeper, ReproduceRecorder(trainer, base_dir), *(callbacks or [])]
        summary = trainer.run()
    except BaseException:
        note_run(target, status="failed")  # not "running" for ever in Runs
        raise
    matched, first, largest, compared = compare_losses(original, keeper.losses, exact)
    report = ReproduceReport(str(run_dir), str(target), str(trainer.device), exact, compared, matched, first,
                             largest, _version_notes(record["versions"]))
    note_run(target, status=summary.status, reproduced=report.to_dict())
    return report
