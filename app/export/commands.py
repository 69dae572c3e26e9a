"""The `wiregrad export` and `wiregrad import` subcommands (wired into app/cli.py)."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from .graph import ExportError

FORMATS = ("pytorch", "onnx", "safetensors")
CHECKED = ("pytorch", "onnx")  # run beside the engine after writing (safetensors are the weights themselves)


def cmd_export(args: argparse.Namespace) -> int:
    from app.document import load_document

    doc = load_document(args.graph)
    base_dir = Path(args.graph).resolve().parent
    out = Path(args.output)

    def write(target: Path) -> None:
        if args.to == "pytorch":
            from .pytorch import export_pytorch

            export_pytorch(doc, target, weights=args.weights, base_dir=base_dir,
                           source_name=Path(args.graph).stem)
        elif args.to == "onnx":
            from .onnx_export import export_onnx

            export_onnx(doc, target, weights=args.weights, base_dir=base_dir)
        else:
            from .weights import read_state_dict, save_weights

            if args.weights is None:
                raise ExportError("--to safetensors needs --weights RUN_DIR or a checkpoint")
            save_weights(read_state_dict(args.weights), target)

    checks = []

    def check(target: Path) -> None:
        """Run the staged export beside the engine (app/export/check.py); one that disagrees is not
        moved into place."""
        if args.no_check or args.to not in CHECKED:
            return
        from .check import check_export

        result = check_export(args.to, target, doc, weights=args.weights, base_dir=base_dir)
        if result.checked and not result.ok:
            raise ExportError(f"{result.message}; nothing written (--no-check writes it anyway)")
        checks.append(result)

    try:
        _write_staged(out, write, check)
    except OSError as exc:  # disk full, read-only folder, a file where a folder should be
        from app.files import describe_os_error

        raise ExportError(f"can't write {exc.filename or out}: {describe_os_error(exc)}") from None
    print(f"wrote {out}")
    for result in checks:
        print(result.message)
    return 0


def _write_staged(out: Path, write: Callable[[Path], None],
                  check: Callable[[Path], None] | None = None) -> None:
    """Let `write` make its files (the script, its weights, bundled data) in a hidden folder next to
    `out`, then move each into place: a full disk or any failure (`check` raising on the staged
    file) leaves the files that were there before untouched, and no half-written file behind."""
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        write(stage / out.name)
        if check is not None:
            check(stage / out.name)
        for made in stage.iterdir():  # the same folder's file system: each rename is atomic
            os.replace(made, out.parent / made.name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def cmd_import(args: argparse.Namespace) -> int:
    from app.document import save_document, validate

    from .importer import import_target

    shape = tuple(int(d) for d in args.input_shape.split(",")) if args.input_shape else None
    doc = import_target(args.target, shape)
    save_document(doc, args.output)
    unknown = [n.id for n in doc.nodes.values() if n.type == "Unknown"]
    if unknown:
        print(f"note: {len(unknown)} module(s) Wiregrad does not know became Unknown nodes: "
              f"{', '.join(unknown)}; replace them before training", file=sys.stderr)
    errors = [p for p in validate(doc) if p.severity == "error" and p.node_id not in unknown]
    print(f"wrote {args.output} ({len(doc.nodes)} nodes, {len(errors) + len(unknown)} to fix)")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add `export` and `import` to the `wiregrad` command's subparsers."""
    export = sub.add_parser("export", help="export a graph: PyTorch training script, ONNX or weights")
    export.add_argument("graph", metavar="GRAPH.json")
    export.add_argument("--to", choices=FORMATS, required=True)
    export.add_argument("-o", "--output", required=True,
                        help="the file to write (train_model.py, model.onnx, ...)")
    export.add_argument("--weights",
                        help="trained weights: a run directory, a checkpoint or a .safetensors file")
    export.add_argument("--no-check", action="store_true",
                        help="don't run the exported model beside the engine on validation samples (by "
                             "default an export that disagrees is not written)")
    export.set_defaults(func=cmd_export)

    imp = sub.add_parser(
        "import", help="turn a PyTorch nn.Module (FILE.py:ClassName) into a graph document (runs FILE.py)",
        description="Turn a PyTorch nn.Module into a graph document. WARNING: this runs FILE.py (it is "
                    "imported as Python code to find the class), with your permissions: only import code "
                    "you trust.")
    imp.add_argument("target", metavar="FILE.py:ClassName",
                     help="the file (or module) and the class; the file is executed: only code you trust")
    imp.add_argument("-o", "--output", required=True, metavar="GRAPH.json")
    imp.add_argument("--input-shape",
                     help="one sample's shape, e.g. 1,28,28 (default: the script's INPUT_SHAPE)")
    imp.set_defaults(func=cmd_import)
