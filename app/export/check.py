"""Is an export faithful? Run the exported model on validation samples next to the engine and compare.

An exporter writes code (the PyTorch script) or a graph (ONNX) that should compute what the engine
computes; a wrong padding, a transposed weight or a corrupted file would still load and run. So after
each export the model is run again from what was written: the script's `Model` class, imported in a
subprocess (isolated, with a timeout: the code is ours, but it is a file on disk), with its weights file;
the ONNX file in onnxruntime, or in onnx's reference evaluator when onnxruntime is missing. The outputs
are compared with the engine's on the same samples (the largest absolute difference, and for classifiers
how often the predicted classes agree). With neither ONNX runtime installed the check says so and never
claims a match. No Qt: the CLI and the window run this same code.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.document import Document
from app.document.catalogue import CLASS_LOSSES

from .graph import ExportError, ExportGraph, load_split, plan_export

KINDS = ("pytorch", "onnx")
DEFAULT_SAMPLES = 32
# float32 sums taken in another order (BLAS, im2col, ONNX kernels) differ by ~1e-6 relative; a real
# mistake (a transposed weight, a missing bias) moves outputs by far more than this
RELATIVE_TOLERANCE = 1e-4
SUBPROCESS_TIMEOUT_S = 120.0

# Runs in a child interpreter (`python -I -B -c`: no user site, no __pycache__ left beside the script):
# import the generated script as a module (its training only runs under __main__), load the weights it
# names (else the engine's, passed as a file), predict.
_RUN_SCRIPT_MODEL = r"""
import importlib.machinery, importlib.util, sys
import numpy as np
import torch
script, fallback, inputs, out = sys.argv[1:5]
torch.set_num_threads(1)
loader = importlib.machinery.SourceFileLoader("wiregrad_exported_script", script)  # any file name
spec = importlib.util.spec_from_loader(loader.name, loader)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
net = module.Model()
weights = module.WEIGHTS if getattr(module, "WEIGHTS", None) is not None else fallback
module.load_weights(net, weights)
net.eval()
with np.load(inputs) as data:
    xs = [torch.from_numpy(data[f"x{i}"]) for i in range(len(data.files))]
with torch.no_grad():
    ys = net(*xs)
ys = ys if isinstance(ys, tuple) else (ys,)
np.savez(out, **{f"y{i}": y.detach().cpu().numpy() for i, y in enumerate(ys)})
print("weights:", "script" if weights != fallback else "engine")
"""


@dataclass(frozen=True)
class ExportCheck:
    """The result of running an export beside the engine. `checked` False: it could not be run here
    (no ONNX runtime, no samples): `ok` is then False too, and `message` says why: never a match claimed."""

    kind: str
    path: str
    checked: bool
    ok: bool
    message: str  # one line for the status bar and the CLI
    n_samples: int = 0
    samples: str = ""  # which samples: "validation", "random" or "given"
    runtime: str = ""  # what ran the export: "torch 2.13.0 in a subprocess, ...", "onnxruntime 1.32.0", ...
    max_abs_diff: float | None = None
    where: str = ""  # "sample 3, fc2[7]": where the largest difference is
    argmax_agreement: float | None = None  # the share of samples whose predicted class agrees (classifiers)
    tolerance: float = 0.0

    @property
    def verdict(self) -> str:
        """The message without the file's name ("checked: matches the engine on ...")."""
        return self.message[len(Path(self.path).name) + 2:]

    def details(self) -> str:
        """The numbers, one per line (the window's Details)."""
        lines = [f"export: {self.path} ({self.kind})", f"ran in: {self.runtime or 'nothing (not checked)'}",
                 f"samples: {self.n_samples} {self.samples}"]
        if self.max_abs_diff is not None:
            lines += [f"largest absolute difference: {self.max_abs_diff:.3g} at {self.where}",
                      f"tolerance: {self.tolerance:.3g} ({RELATIVE_TOLERANCE:g} of the engine's largest "
                      f"|output|, at least {RELATIVE_TOLERANCE:g})"]
        if self.argmax_agreement is not None:
            agree = round(self.argmax_agreement * self.n_samples)
            lines.append(f"predicted class agrees: {agree}/{self.n_samples} ({self.argmax_agreement:.1%})")
        if self.ok:
            verdict = "within the tolerance: the export computes what the engine computes"
        elif self.max_abs_diff is not None:
            verdict = "beyond the tolerance: the export computes something else"
        else:
            verdict = self.verdict
        lines.append(f"verdict: {verdict}")
        return "\n".join(lines)


class NoSamples(ExportError):
    """There is nothing to run the export on: the check can't be made (not a fault of the export)."""


def validation_batch(doc: Document, base_dir: str | Path | None = None, n: int = DEFAULT_SAMPLES,
                     ) -> tuple[list[np.ndarray], str]:
    """Up to `n` validation samples as the engine sees them (normalised), one array per Input node,
    and "validation"; when the dataset can't feed the graph (it can't be loaded here, or the graph
    has its own inputs), seeded random float inputs of the Inputs' shapes and "random"."""
    split = load_split(doc, base_dir)
    graph = plan_export(doc, None if split is None else split.input_shape)
    if split is not None and len(graph.input_ids) == 1:
        shape = tuple(graph.input_shapes[graph.input_ids[0]][1:])
        if tuple(split.input_shape) == shape and len(split.x_val):
            return [np.ascontiguousarray(split.x_val[:n])], "validation"
    rng = np.random.default_rng(int(doc.training.get("seed", 0)))
    batch = []
    for nid in graph.input_ids:
        if graph.node(nid).params.get("dtype") == "int64":
            raise NoSamples(f"no samples for input {nid} (its dataset can't be loaded here, and "
                            "integer inputs can't be made up)")
        batch.append(rng.standard_normal((n, *graph.input_shapes[nid][1:])).astype(np.float32))
    return batch, "random"


def _engine_outputs(doc: Document, graph: ExportGraph, state: Mapping[str, np.ndarray],
                    batch: Sequence[np.ndarray]) -> list[np.ndarray]:
    import engine
    from app.compile import compile_document

    from .weights import load_into_engine

    shapes = {nid: tuple(graph.input_shapes[nid][1:]) for nid in graph.input_ids}
    model = compile_document(doc, shapes[graph.input_ids[0]] if len(shapes) == 1 else shapes)
    load_into_engine(model, state)
    model.eval()
    with engine.no_grad():
        ys = model(*(engine.from_numpy(np.array(x)) for x in batch))
    return [y.numpy() for y in (ys if isinstance(ys, tuple) else (ys,))]


def _run_script(path: Path, state: Mapping[str, np.ndarray], batch: Sequence[np.ndarray],
                timeout: float) -> tuple[list[np.ndarray], str]:
    """The script's model on the batch, in a child interpreter; its outputs and what ran them."""
    from .weights import save_weights

    with tempfile.TemporaryDirectory(prefix="wiregrad-check-") as tmp:
        tmp_path = Path(tmp)
        fallback = save_weights(state, tmp_path / "engine.safetensors")
        np.savez(tmp_path / "inputs.npz", **{f"x{i}": x for i, x in enumerate(batch)})
        out = tmp_path / "outputs.npz"
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        try:
            done = subprocess.run([sys.executable, "-I", "-B", "-c", _RUN_SCRIPT_MODEL, str(path.resolve()),
                                   str(fallback), str(tmp_path / "inputs.npz"), str(out)],
                                  cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise _NotRun(f"the script's model gave no answer within {timeout:.0f} s") from None
        if done.returncode != 0:
            last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()),
                        f"exit status {done.returncode}")
            raise _Failed(f"the script's model does not run: {last.strip()}")
        with np.load(out) as data:
            outputs = [data[f"y{i}"] for i in range(len(data.files))]
    import torch  # only for its version: the child ran the same interpreter

    weights = "its weights file" if "weights: script" in done.stdout else "the engine's weights"
    return outputs, f"torch {torch.__version__} in a subprocess, with {weights}"


def onnx_runner(preferred: str = "auto") -> tuple[str, Callable[[str, dict[str, np.ndarray]], list]] | None:
    """(name, run(path, feeds) -> outputs) for the ONNX runtime installed here: onnxruntime, else
    onnx's reference evaluator (pure Python, slower); None when neither is. `preferred` picks one
    ("onnxruntime" or "reference")."""
    if preferred in ("auto", "onnxruntime"):
        try:
            import onnxruntime
        except ImportError:
            onnxruntime = None
        if onnxruntime is not None:
            def run_ort(path: str, feeds: dict[str, np.ndarray]) -> list:
                session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
                return session.run(None, feeds)

            return f"onnxruntime {onnxruntime.__version__}", run_ort
    if preferred in ("auto", "reference"):
        try:
            import onnx
            from onnx.reference import ReferenceEvaluator
        except ImportError:
            return None

        def run_reference(path: str, feeds: dict[str, np.ndarray]) -> list:
            return ReferenceEvaluator(path).run(None, feeds)

        return f"onnx {onnx.__version__} reference evaluator", run_reference
    return None


def _run_onnx(path: Path, graph: ExportGraph, batch: Sequence[np.ndarray], runner: tuple[str, Callable]
              ) -> tuple[list[np.ndarray], str]:
    """The ONNX file on the batch. A file that normalises inside takes raw samples: the batch is mapped
    back with the mean/std its metadata states (not the graph's own constants, so a damaged constant
    shows as a difference)."""
    import onnx

    name, run = runner
    model = onnx.load(str(path), load_external_data=False)
    meta = {p.key: p.value for p in model.metadata_props}
    feeds = {nid: np.ascontiguousarray(x) for nid, x in zip(graph.input_ids, batch)}
    if meta.get("normalization_in_graph") == "true":
        nid = graph.input_ids[0]
        mean = np.asarray(json.loads(meta["mean"]), np.float32)
        std = np.asarray(json.loads(meta["std"]), np.float32)
        feeds[nid] = (feeds[nid] * std + mean).astype(np.float32)
    try:
        outputs = run(str(path), feeds)
    except Exception as exc:  # noqa: BLE001 - any runtime failure is the verdict, in one line
        raise _Failed(f"the ONNX model does not run in {name}: {_first_line(exc)}") from None
    return [np.asarray(y) for y in outputs], name


class _NotRun(Exception):
    """The export could not be run here (no runtime, a timeout): not checked."""


class _Failed(Exception):
    """The export ran and failed, or gave outputs of other shapes: the check fails."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _is_classifier(graph: ExportGraph) -> bool:
    return bool(graph.output_ids) and graph.output_params(graph.output_ids[0])["loss"] in CLASS_LOSSES


def _compare(got: Sequence[np.ndarray], want: Sequence[np.ndarray], names: Sequence[str],
             classifier: bool) -> tuple[float, str, float | None, float]:
    """(largest |got - want|, where it is, argmax agreement of the first output or None, tolerance).
    NaN or infinity where the engine has another value counts as an infinite difference."""
    if len(got) != len(want):
        raise _Failed(f"the export gives {len(got)} output(s), the engine {len(want)}")
    scale = max([float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0)) for w in want] + [1.0])
    worst, where = 0.0, ""
    for name, g, w in zip(names, got, want):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if g.shape != w.shape:
            raise _Failed(f"{name}: the export's output has shape {g.shape}, the engine's {w.shape}")
        same = (np.isnan(g) & np.isnan(w)) | (g == w)  # equal infinities too
        diff = np.where(same, 0.0, np.nan_to_num(np.abs(g - w), nan=np.inf))
        if diff.size and (float(diff.max()) > worst or not where):
            at = np.unravel_index(int(np.argmax(diff)), diff.shape)
            worst = float(diff.max())
            index = ",".join(str(int(i)) for i in at[1:])
            where = f"sample {int(at[0])}, {name}" + (f"[{index}]" if index else "")
    agreement = None
    first_got, first_want = np.asarray(got[0]), np.asarray(want[0])
    if classifier and first_want.ndim == 2 and first_want.shape[1] > 1 and len(first_want):
        agreement = float(np.mean(first_got.argmax(1) == first_want.argmax(1)))
    return worst, where, agreement, RELATIVE_TOLERANCE * scale


def check_export(kind: str, path: str | Path, document: Document,
                 weights: str | Path | Mapping[str, Any] | None = None,
                 batch: np.ndarray | Sequence[np.ndarray] | None = None, *,
                 base_dir: str | Path | None = None, samples: str | None = None,
                 onnx_runtime: str = "auto", timeout: float = SUBPROCESS_TIMEOUT_S) -> ExportCheck:
    """Run the export at `path` ("pytorch": the script; "onnx": the .onnx file) on `batch` (the inputs
    as the engine takes them, normalised; default: up to DEFAULT_SAMPLES validation samples) next to
    the engine model of `document` with `weights` (a file, a run directory, arrays, or None for the
    freshly initialised ones the exporters use) and compare. Never raises for the export's faults: a
    model that does not run or disagrees is an ExportCheck with ok False; ExportError only for what
    makes the question itself unanswerable (the graph has errors, the weights don't fit it)."""
    from .onnx_export import initial_state
    from .weights import read_state_dict, state_dict_arrays

    if kind not in KINDS:
        raise ExportError(f"there is no check for {kind!r} exports (only {', '.join(KINDS)})")
    path = Path(path)
    if batch is None:
        try:
            batch_list, samples = validation_batch(document, base_dir)
        except NoSamples as exc:
            return ExportCheck(kind, str(path), False, False, f"{path.name}: not checked: {exc}")
    else:
        batch_list = [batch] if isinstance(batch, np.ndarray) else list(batch)
        samples = samples or "given"
    first_shape = tuple(batch_list[0].shape[1:])
    graph = plan_export(document, first_shape if len(batch_list) == 1 else None)
    if weights is None:  # the exporters' fresh weights: the document's seed, the inputs' shape
        state = initial_state(document, first_shape if len(batch_list) == 1 else None)
    elif isinstance(weights, Mapping):
        state = state_dict_arrays(weights)
    else:
        state = read_state_dict(weights)
    n = int(batch_list[0].shape[0])
    classifier = _is_classifier(graph)
    names = [graph.prediction_of[o] for o in graph.output_ids]
    record = dict(kind=kind, path=str(path), n_samples=n, samples=samples)
    runtime = ""
    try:
        if kind == "pytorch":
            got, runtime = _run_script(path, state, batch_list, timeout)
        else:
            runner = onnx_runner(onnx_runtime)
            if runner is None:
                raise _NotRun("no ONNX runtime (install onnxruntime, or onnx with its reference evaluator)")
            got, runtime = _run_onnx(path, graph, batch_list, runner)
        want = _engine_outputs(document, graph, state, batch_list)
        worst, where, agreement, tol = _compare(got, want, names, classifier)
    except _NotRun as exc:
        return ExportCheck(**record, checked=False, ok=False, runtime=runtime,
                           message=f"{path.name}: not checked: {exc}")
    except _Failed as exc:
        return ExportCheck(**record, checked=True, ok=False, runtime=runtime,
                           message=f"{path.name}: check failed: {exc}")
    ok = worst <= tol
    agree = "" if agreement is None else f", predicted class agrees on {agreement:.0%}"
    if ok:
        message = (f"{path.name}: checked: matches the engine on {n} {samples} samples "
                   f"(largest difference {worst:.2g}{agree})")
    else:
        message = (f"{path.name}: check failed: the export disagrees with the engine by up to {worst:.3g} "
                   f"at {where} (tolerance {tol:.2g}{agree})")
    return ExportCheck(**record, checked=True, ok=ok, max_abs_diff=worst, where=where,
                       argmax_agreement=agreement, tolerance=tol, runtime=runtime, message=message)


__all__ = ["DEFAULT_SAMPLES", "KINDS", "ExportCheck", "NoSamples", "check_export", "onnx_runner",
           "validation_batch"]
