"""The `wiregrad` command: train, validate, lr-find, summary (export and gui hand over elsewhere).

User errors print one line on stderr and exit with status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, TextIO

EXIT_USAGE = 2


class UserError(Exception):
    """Something the user can fix; printed as one line."""


def _user_errors() -> tuple[type[BaseException], ...]:
    from app.datasets import DatasetError
    from app.document import DocumentError, ShapeError
    from app.training import CheckpointError, TrainerError

    return (UserError, DocumentError, DatasetError, ShapeError, TrainerError, CheckpointError)


def _one_line(message: str) -> str:
    return " ".join(str(message).split()) if "\n" not in str(message) else str(message).strip()


def _read_text(path: str) -> str:
    from app.files import MAX_GRAPH_BYTES, describe_os_error, read_bytes

    try:  # only a regular file of a sane size: a FIFO or /dev/zero must not hang or eat memory
        raw = read_bytes(path, MAX_GRAPH_BYTES)
    except OSError as exc:
        raise UserError(f"can't read {path}: {describe_os_error(exc)}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text (byte {exc.start})") from None


def load_graph(path: str):
    """Load a document for training; DocumentError (or UserError) explains what is wrong."""
    from app.document import load_document

    return load_document(path)


def document_findings(text: str, base_dir: str | Path | None = None, *, deep: bool = True
                      ) -> tuple[list[str], list[str]]:
    """(errors, warnings) of a document's text, one CLI line each, from the same check the editor, Start and
    the Trainer run (`check_training`): structure, shapes, dtypes, the loss against the dataset's targets,
    the dataset and training settings, memory, and (deep) one step on two samples. Never raises for bad
    input; no errors means `wiregrad train` will train."""
    from app.document import DocumentError, format_problem, loads_document, validate
    from app.training.preflight import check_training

    try:
        doc = loads_document(text)
    except DocumentError as exc:
        first = str(exc)
        # the strict loader stops at the first problem; the lenient validator may list them all
        try:
            problems = validate(json.loads(text))
        except (ValueError, RecursionError, DocumentError):
            problems = []
        errors = [format_problem(p) for p in problems if p.severity == "error"]
        return (errors or [first]), [format_problem(p) for p in problems if p.severity == "warning"]
    problems = check_training(doc, base_dir=base_dir, deep=deep, device="document")
    return ([format_problem(p) for p in problems if p.severity == "error"],
            [format_problem(p) for p in problems if p.severity == "warning"])


def document_problems(text: str, base_dir: str | Path | None = None) -> list[str]:
    """Every problem of a document's text, one CLI line each (empty: it will train). Never raises."""
    return document_findings(text, base_dir)[0]


def document_warnings(text: str, base_dir: str | Path | None = None) -> list[str]:
    """The warnings of a document (a node left out of training, unwired ones), one line each."""
    return document_findings(text, base_dir, deep=False)[1]


# ----------------------------------------------------------------------------------------------
# progress
# ----------------------------------------------------------------------------------------------
def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds < 3600 else \
        f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _make_progress(trainer: Any, stream: TextIO, quiet: bool):
    from app.training import TrainerCallback

    class ProgressBar(TrainerCallback):
        """A one-line bar on a terminal; one line per epoch when stderr is a file or pipe."""

        def __init__(self) -> None:
            self.tty = stream.isatty()
            self.start = time.perf_counter()
            self.done_batches = 0
            self.total = trainer.epochs * trainer.steps_per_epoch
            self.last_draw = 0.0

        def _eta(self) -> float:
            elapsed = time.perf_counter() - self.start
            if not self.done_batches:
                return math.inf
            return elapsed / self.done_batches * (self.total - self.done_batches)

        def on_run_start(self, info) -> None:
            self.done_batches = info.start_epoch * trainer.steps_per_epoch
            self.start_done = self.done_batches

        def on_batch_end(self, m) -> None:
            self.done_batches += 1
            if quiet or not self.tty:
                return
            now = time.perf_counter()
            if now - self.last_draw < 0.1:
                return
            self.last_draw = now
            frac = self.done_batches / max(self.total, 1)
            bar = "#" * int(frac * 24) + "." * (24 - int(frac * 24))
            acc = f" acc {m.accuracy:.3f}" if m.accuracy is not None else ""
            stream.write(f"\repoch {m.epoch + 1}/{trainer.epochs} [{bar}] loss {m.loss:.4f}{acc} "
                         f"ETA {_clock(self._eta())} ")
            stream.flush()

        def on_epoch_end(self, m) -> None:
            if quiet:
                return
            val = f" val_loss {m.val_loss:.4f}" if m.val_loss is not None else ""
            acc = f" val_acc {m.val_accuracy:.4f}" if m.val_accuracy is not None else ""
            line = (f"epoch {m.epoch + 1}/{trainer.epochs} loss {m.train_loss:.4f}{val}{acc} "
                    f"({m.seconds:.1f}s, ETA {_clock(self._eta())})")
            stream.write(("\r" + line.ljust(78) if self.tty else line) + "\n")
            stream.flush()

        def on_finding(self, f) -> None:
            where = f" [{f.node_id}]" if f.node_id else ""
            stream.write(f"\n{f.severity}{where}: {f.message}\n  fix: {f.suggestion}\n")
            stream.flush()

    return ProgressBar()


# ----------------------------------------------------------------------------------------------
# commands
# ----------------------------------------------------------------------------------------------
def _default_run_dir(graph: str) -> Path:
    return Path("runs") / f"{Path(graph).stem}-{time.strftime('%Y%m%d-%H%M%S')}"


class _Resumed:
    """What `--resume` continues: the document and the folder its relative dataset paths mean."""

    def __init__(self, doc: Any, base_dir: Path) -> None:
        self.doc, self.base_dir = doc, base_dir


def _resume_target(args: argparse.Namespace) -> _Resumed | None:
    """For `--resume RUN_DIR` (continue that run in place: its last.ckpt, metrics.jsonl appended to,
    summary.json rewritten) or `--resume CKPT` (a new run directory unless --out): the document (GRAPH
    when given, else the checkpoint's own), with args.resume, args.out and args.epochs filled in.
    --epochs is the total to train to; without it a stopped run finishes its plan."""
    if not args.resume:
        if args.graph is None:
            raise UserError("give a GRAPH.json to train, or --resume RUN_DIR to continue a run")
        return None
    if getattr(args, "weights", None):
        raise UserError("--weights and --resume both choose the starting weights; use one of them")
    from app.training import checkpoint_document, read_checkpoint

    target = Path(args.resume)
    ckpt = target / "last.ckpt" if target.is_dir() else target
    if target.is_dir() and not ckpt.is_file():
        raise UserError(f"{target} has no last.ckpt to continue from (a run that failed keeps none); "
                        f"pass one of its checkpoints instead")
    _, meta = read_checkpoint(ckpt)
    args.resume = str(ckpt)
    if args.graph is not None:
        doc, base_dir = load_graph(args.graph), Path(args.graph).resolve().parent
    else:
        doc, base_dir = checkpoint_document(ckpt), _run_source_dir(ckpt.parent) or ckpt.parent.resolve()
    cursor = meta.get("cursor") or {}
    done = int(cursor.get("epoch", 0))
    planned = cursor.get("epochs") if isinstance(cursor.get("epochs"), int) else int(doc.training["epochs"])
    if args.epochs is None:
        if done >= planned:
            raise UserError(f"{target} has already trained its {planned} epochs; pass --epochs N (more than "
                            f"{planned}) to train it on")
        args.epochs = planned
    elif args.epochs <= done and int(cursor.get("batch", 0)) == 0:
        raise UserError(f"--epochs {args.epochs}: {target} has already trained {done} epochs; --epochs is "
                        f"the total, pass more than {done} to train it on")
    if args.out is None:
        args.out = str(target) if target.is_dir() else str(_default_run_dir(args.graph or ckpt.parent.name))
    if args.graph is None:
        args.graph = str(ckpt)  # named in messages; the document comes from the checkpoint
    return _Resumed(doc, base_dir)


def _run_source_dir(run_dir: Path) -> Path | None:
    """The folder of the graph file a CLI run was trained from (recorded in its run.json)."""
    try:
        source = json.loads((run_dir / "run.json").read_text(encoding="utf-8")).get("source")
    except (OSError, ValueError, AttributeError):
        return None
    return Path(source).parent if isinstance(source, str) and Path(source).parent.is_dir() else None


def _read_start_weights(source: str) -> dict[str, Any]:
    """--weights: the file's tensors, read before anything is written (a bad file leaves no run folder)."""
    from app.export import ExportError
    from app.export.weights import read_state_dict

    try:
        return read_state_dict(source)
    except ExportError as exc:
        raise UserError(str(exc)) from None


def _load_start_weights(trainer: Any, arrays: dict[str, Any], source: str, quiet: bool) -> None:
    """--weights: the file's tensors matched into the model by node id, name and shape; the report on
    stderr; none matching is a user error."""
    from app.training.checkpoint import apply_weights, match_weights

    match = match_weights(trainer.model.state_dict(), arrays, source, nodes=trainer.graph.nodes)
    if not match.loaded:
        raise UserError(f"no tensor of {source} fits the graph: " + "; ".join(match.problems[:3]))
    apply_weights(trainer.model, match)
    if not quiet:
        sys.stderr.write("\n".join(match.lines()) + "\n")


def _held_elsewhere(run_dir: Path) -> Any:
    """RUN_DIR's lock, taken for this process; a UserError when another live process trains that run
    (None when the folder has no lock to take: not made yet, read-only)."""
    from app.training.runs import RUN_LOCK, hold_run_lock

    lock = hold_run_lock(run_dir) if run_dir.is_dir() else None
    if lock is None and (run_dir / RUN_LOCK).exists():
        raise UserError(f"{run_dir} is being trained by another process (its {RUN_LOCK} is held); "
                        "stop that run first")
    return lock


def _inject_bug(name: str | None) -> str | None:
    """--inject-bug: a name of app/training/bugs.py's table (a UserError naming the choices otherwise)."""
    from app.training.bugs import BUG_NAMES

    if name is not None and name not in BUG_NAMES:
        raise UserError(f"--inject-bug must be one of {', '.join(BUG_NAMES)} (or list), got {name!r}")
    return name


def cmd_train(args: argparse.Namespace) -> int:
    if args.inject_bug == "list":  # the classic bugs, one a line: name, title, what it does
        from app.training.bugs import BUGS

        for b in BUGS.values():
            print(f"{b.name:18} {b.title}: {b.what}")
        return 0
    bug = _inject_bug(args.inject_bug)
    if args.resume and Path(args.resume).is_dir():  # before anything else reads the run it trains
        lock = _held_elsewhere(Path(args.resume))
        if lock is not None:
            lock.unlock()
    resumed = _resume_target(args)
    doc = resumed.doc if resumed is not None else load_graph(args.graph)
    start_weights = _read_start_weights(args.weights) if args.weights else None
    if bug is not None:
        doc.set_training("inject_bug", bug)
    from app.document import format_problem
    from app.training.preflight import preflight

    run_dir = Path(args.out) if args.out else _default_run_dir(args.graph)
    if args.epochs is not None and args.epochs < 1:
        raise UserError(f"--epochs must be at least 1, got {args.epochs}")
    base_dir = resumed.base_dir if resumed is not None else Path(args.graph).resolve().parent
    # the check `validate` runs, before anything is written: one line per problem, exit 2; the Trainer
    # takes its result (shape inference, dataset) instead of checking the same document again
    checked = preflight(doc, base_dir=base_dir, deep=True, epochs=args.epochs,
                        device=args.device or "document")
    if checked.errors:
        for p in checked.errors:
            print(f"wiregrad train: error: {_one_line(format_problem(p))}", file=sys.stderr)
        return EXIT_USAGE
    # held while this process trains: the window's Runs list shows the run as live, and as interrupted
    # if this process is killed; a second `train --resume` of the same folder is refused
    lock = _held_elsewhere(run_dir)
    try:
        return _train(args, doc, run_dir, base_dir, checked, resumed, start_weights, lock)
    finally:
        if lock is not None:
            lock.unlock()


def _train(args: argparse.Namespace, doc: Any, run_dir: Path, base_dir: Path, checked: Any, resumed: Any,
           start_weights: Any, lock: Any) -> int:
    from app.document import save_document
    from app.training import Trainer
    from app.training.runs import hold_run_lock, note_run, run_name

    trainer = Trainer(doc, run_dir, device=args.device, epochs=args.epochs, base_dir=base_dir,
                      on_nonfinite="stop", blas_threads=args.blas_threads, checked=checked)
    lock = lock or hold_run_lock(run_dir)  # a new run's folder exists now
    try:  # released after the last word in run.json, so the run never looks interrupted
        if args.resume:
            note = trainer.load_checkpoint(args.resume)
            if note and not args.quiet:
                sys.stderr.write(note + "\n")
        if start_weights is not None:
            _load_start_weights(trainer, start_weights, args.weights, args.quiet)
        trainer.callbacks.insert(0, _make_progress(trainer, sys.stderr, args.quiet))
        from app.training.reproduce import ReproduceRecorder

        trainer.callbacks.append(ReproduceRecorder(trainer, base_dir, lock))  # run.json: how to reproduce it
        # the run folder the window makes too (document.json, run.json with a name), so a CLI run under the
        # window's runs folder lists in Runs and reopens there
        save_document(trainer.doc, run_dir / "document.json")
        try:
            meta: dict[str, Any] = {}
            if not resumed:
                graph = Path(args.graph).stem
                meta = {"source": str(Path(args.graph).resolve()), "graph": graph, "started": time.time(),
                        "name": run_name(run_dir.parent, graph)}
            note_run(run_dir, status="running", **meta)
            if lock is not None:
                lock.touch()  # newer than run.json: the lock, not the clock, says whether the run lives
            summary = trainer.run()
        except KeyboardInterrupt:
            note_run(run_dir, status="stopped")
            raise UserError("interrupted") from None
        except OSError as exc:  # a checkpoint or metrics write failed (disk full, file size limit)
            from app.files import describe_os_error

            note_run(run_dir, status="failed")
            raise UserError(f"can't write to the run folder {run_dir}: {describe_os_error(exc)}; "
                            "the run stopped") from None
        out = {"epochs": summary.epochs, "train_loss": summary.train_loss, "val_loss": summary.val_loss,
               "val_accuracy": summary.val_accuracy, "seconds": round(summary.seconds, 3),
               "status": summary.status, "run_dir": str(run_dir)}
        if trainer.inject_bug:
            out["inject_bug"] = trainer.inject_bug
        out = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}
        (run_dir / "summary.json").write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        note_run(run_dir, status=summary.status)
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        return 1 if summary.status == "failed" else 0
    finally:
        if lock is not None:
            lock.unlock()


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Train RUN_DIR's recorded document again into a new run folder and compare the losses; exit 0 when
    they match (bit for bit on the CPU, within tolerance on a GPU), 1 when they differ."""
    from app.training.reproduce import reproduce

    report = reproduce(args.run_dir, steps=args.steps)
    sys.stdout.write("\n".join(report.lines()) + "\n")
    if args.json:
        sys.stdout.write(json.dumps(report.to_dict()) + "\n")
    sys.stdout.flush()
    return 0 if report.matched else 1


def cmd_validate(args: argparse.Namespace) -> int:
    text = _read_text(args.graph)
    problems, warnings = document_findings(text, Path(args.graph).resolve().parent)
    for line in problems + warnings:
        print(line)
    if problems:
        return EXIT_USAGE
    print(f"{args.graph}: valid")
    return 0


def cmd_lr_find(args: argparse.Namespace) -> int:
    from app.training import find_lr

    doc = load_graph(args.graph)
    result = find_lr(doc, start_lr=args.start, end_lr=args.end, steps=args.steps, device=args.device,
                     base_dir=Path(args.graph).resolve().parent)
    if not args.quiet:
        every = max(1, len(result.lrs) // 20)
        for lr, loss in zip(result.lrs[::every], result.losses[::every]):
            sys.stderr.write(f"lr {lr:10.3g}  loss {loss:.4f}\n")
    if result.suggestion is None:
        raise UserError("the loss never went down during the sweep; check the graph and the dataset")
    sys.stdout.write(json.dumps({"suggested_lr": result.suggestion, "min_loss_lr": result.min_loss_lr,
                                 "diverged": result.diverged, "steps": len(result.lrs)}) + "\n")
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    from app.insight.summary import format_csv, format_text, model_summary, to_json

    if args.batch_size is not None and args.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, got {args.batch_size}")
    doc = load_graph(args.graph)
    summary = model_summary(doc, batch_size=args.batch_size, base_dir=Path(args.graph).resolve().parent)
    if args.format == "json":
        sys.stdout.write(json.dumps(to_json(summary), indent=2) + "\n")
    else:
        sys.stdout.write(format_csv(summary) if args.format == "csv" else format_text(summary))
    return 0


def cmd_gui(args: argparse.Namespace) -> int:
    try:
        import main as gui_main  # the top-level main.py
    except ImportError:
        raise UserError("the desktop app (main.py) is not available in this installation") from None
    return int(gui_main.main(args.rest) or 0)


def cmd_launch(args: argparse.Namespace) -> int:
    """Train on PyTorch's distributed engine (torchrun) into a run folder and follow it (`app/launch.py`)."""
    from app.launch import LaunchError, run_launch

    try:
        out = run_launch(args)
    except LaunchError as exc:
        raise UserError(str(exc)) from None
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 1 if out.get("status") == "failed" else 0


def _bug_names() -> tuple[str, ...]:
    from app.training.bugs import BUG_NAMES

    return BUG_NAMES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wiregrad",
                                     description="Wire neural networks, train them, watch them.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = sub.add_parser("train", help="train a graph document")
    train.add_argument("graph", metavar="GRAPH.json", nargs="?",
                       help="the graph to train (may be left out with --resume: the run's own graph)")
    train.add_argument("--epochs", type=int, help="override the document's epochs; with --resume, the total "
                       "to train to (more than a finished run's, to train it on)")
    train.add_argument("--device", choices=("auto", "cpu", "cuda"), help="override the document's device")
    train.add_argument("--out", metavar="RUN_DIR", help="run directory (default runs/<graph>-<time>)")
    train.add_argument("--resume", metavar="RUN_DIR|CKPT",
                       help="continue a run: a run directory is continued in place (from its last.ckpt; "
                       "metrics.jsonl is appended to, summary.json rewritten), a checkpoint file in a new "
                       "run directory (or --out); a schedule planned from the epochs is re-planned for a "
                       "new --epochs")
    train.add_argument("--weights", metavar="FILE",
                       help="start from these weights (.safetensors, a checkpoint or a run directory), "
                       "matched to the graph's nodes by id, name and shape; prints what matched")
    train.add_argument("--blas-threads", type=int, help="cap BLAS threads while training")
    train.add_argument("--quiet", action="store_true", help="no progress output")
    train.add_argument("--inject-bug", metavar="NAME", help="break the run on purpose with one of the "
                       "classic bugs (list: what each does): " + ", ".join(_bug_names()))
    train.set_defaults(func=cmd_train)

    rep = sub.add_parser("reproduce", help="train a run again from its recorded document and seed into a new "
                         "run folder; report whether the losses match (bit for bit on the CPU)")
    rep.add_argument("run_dir", metavar="RUN_DIR")
    rep.add_argument("--steps", type=int, help="compare only the first N steps (default: every step the run "
                     "recorded)")
    rep.add_argument("--json", action="store_true", help="also print the report as one JSON line")
    rep.set_defaults(func=cmd_reproduce)

    val = sub.add_parser("validate", help="check a graph document; exit 0 when valid, else 2")
    val.add_argument("graph", metavar="GRAPH.json")
    val.set_defaults(func=cmd_validate)

    lr = sub.add_parser("lr-find", help="sweep the learning rate and suggest one")
    lr.add_argument("graph", metavar="GRAPH.json")
    lr.add_argument("--start", type=float, default=1e-6)
    lr.add_argument("--end", type=float, default=1.0)
    lr.add_argument("--steps", type=int, default=100)
    lr.add_argument("--device", choices=("auto", "cpu", "cuda"))
    lr.add_argument("--quiet", action="store_true")
    lr.set_defaults(func=cmd_lr_find)

    summary = sub.add_parser("summary", help="a table of the graph's layers: output shapes, parameters, "
                             "MACs, activation memory")
    summary.add_argument("graph", metavar="GRAPH.json")
    summary.add_argument("--batch-size", type=int, help="the batch for the activation memory (default: the "
                         "document's batch_size)")
    summary.add_argument("--format", choices=("text", "csv", "json"), default="text")
    summary.set_defaults(func=cmd_summary)

    from app.export.commands import add_parsers as add_export_parsers

    add_export_parsers(sub)  # export, import
    from app.launch import add_parser as add_launch_parser

    add_launch_parser(sub).set_defaults(func=cmd_launch)

    gui = sub.add_parser("gui", help="open the desktop app")
    gui.add_argument("rest", nargs=argparse.REMAINDER)
    gui.set_defaults(func=cmd_gui)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `wiregrad` console script; returns the exit status."""
    for stream in (sys.stdout, sys.stderr):  # a file's odd text (a lone surrogate) must print, not crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except _user_errors() as exc:
        print(f"wiregrad {args.command}: error: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # a full disk, a read-only or missing output folder: one line naming the path
        from app.files import describe_os_error

        where = f"can't write {exc.filename}: " if exc.filename else ""
        print(f"wiregrad {args.command}: error: {where}{_one_line(describe_os_error(exc))}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
