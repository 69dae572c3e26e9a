"""The `wiregrad` command: train, validate, lr-find (export and gui hand over elsewhere).

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
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise UserError(f"can't read {path}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text (byte {exc.start})") from None


def load_graph(path: str):
    """Load a document for training; DocumentError (or UserError) explains what is wrong."""
    from app.document import load_document

    return load_document(path)


def document_problems(text: str) -> list[str]:
    """Every problem of a document's text, one CLI line each (empty: valid). Never raises for bad input."""
    from app.document import DocumentError, format_problem, loads_document, validate

    try:
        doc = loads_document(text)
    except DocumentError as exc:
        first = str(exc)
        # the strict loader stops at the first problem; the lenient validator may list them all
        try:
            data = json.loads(text)
            problems = [p for p in validate(data) if p.severity == "error"]
        except (ValueError, RecursionError, DocumentError):
            problems = []
        lines = [format_problem(p) for p in problems]
        return lines if lines else [first]
    problems = validate(doc, _dataset_shape(doc))
    return [format_problem(p) for p in problems if p.severity == "error"]


def document_warnings(text: str) -> list[str]:
    """The warnings of a loadable document (a node left out of training, unwired ones), one line each."""
    from app.document import DocumentError, format_problem, loads_document, validate

    try:
        doc = loads_document(text)
        problems = validate(doc, _dataset_shape(doc))
    except DocumentError:
        try:  # as document_problems: the lenient validator still sees what a broken file holds
            problems = validate(json.loads(text))
        except (ValueError, RecursionError, DocumentError):
            return []
    return [format_problem(p) for p in problems if p.severity == "warning"]


def _dataset_shape(doc: Any) -> tuple[int, ...] | None:
    """The dataset's sample shape for dataset-driven Inputs; None when the dataset can't load (yet)."""
    from app.datasets import DatasetError, load_dataset

    spec = dict(doc.training["dataset"])
    spec.setdefault("val_fraction", doc.training["val_fraction"])
    try:
        return load_dataset(spec, int(doc.training["seed"])).input_shape
    except (DatasetError, OSError, ValueError):
        return None


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


def cmd_train(args: argparse.Namespace) -> int:
    doc = load_graph(args.graph)
    from app.document import save_document
    from app.training import Trainer

    run_dir = Path(args.out) if args.out else _default_run_dir(args.graph)
    if args.epochs is not None and args.epochs < 1:
        raise UserError(f"--epochs must be at least 1, got {args.epochs}")
    trainer = Trainer(doc, run_dir, device=args.device, epochs=args.epochs,
                      base_dir=Path(args.graph).resolve().parent, on_nonfinite="stop",
                      blas_threads=args.blas_threads)
    if args.resume:
        trainer.load_checkpoint(args.resume)
    trainer.callbacks.insert(0, _make_progress(trainer, sys.stderr, args.quiet))
    save_document(trainer.doc, run_dir / "graph.json")
    try:
        summary = trainer.run()
    except KeyboardInterrupt:
        raise UserError("interrupted") from None
    out = {"epochs": summary.epochs, "train_loss": summary.train_loss, "val_loss": summary.val_loss,
           "val_accuracy": summary.val_accuracy, "seconds": round(summary.seconds, 3),
           "status": summary.status, "run_dir": str(run_dir)}
    out = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}
    (run_dir / "summary.json").write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 1 if summary.status == "failed" else 0


def cmd_validate(args: argparse.Namespace) -> int:
    text = _read_text(args.graph)
    problems = document_problems(text)
    for line in problems + document_warnings(text):
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


def cmd_gui(args: argparse.Namespace) -> int:
    try:
        import main as gui_main  # the top-level main.py
    except ImportError:
        raise UserError("the desktop app (main.py) is not available in this installation") from None
    return int(gui_main.main(args.rest) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wiregrad",
                                     description="Wire neural networks, train them, watch them.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = sub.add_parser("train", help="train a graph document")
    train.add_argument("graph", metavar="GRAPH.json")
    train.add_argument("--epochs", type=int, help="override the document's epochs")
    train.add_argument("--device", choices=("auto", "cpu", "cuda"), help="override the document's device")
    train.add_argument("--out", metavar="RUN_DIR", help="run directory (default runs/<graph>-<time>)")
    train.add_argument("--resume", metavar="CKPT", help="continue from a checkpoint")
    train.add_argument("--blas-threads", type=int, help="cap BLAS threads while training")
    train.add_argument("--quiet", action="store_true", help="no progress output")
    train.set_defaults(func=cmd_train)

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

    from app.export.commands import add_parsers as add_export_parsers

    add_export_parsers(sub)  # export, import

    gui = sub.add_parser("gui", help="open the desktop app")
    gui.add_argument("rest", nargs=argparse.REMAINDER)
    gui.set_defaults(func=cmd_gui)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `wiregrad` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except _user_errors() as exc:
        print(f"wiregrad {args.command}: error: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
