"""Training a graph on PyTorch's distributed engine: export the document's training script into a run
folder, start `torchrun` (torch.distributed.run) on it as a process group of its own, and follow the run
folder the script's rank 0 writes (the format Wiregrad's own Trainer writes: run.json, document.json,
metrics.jsonl, model.safetensors), so the CLI prints its progress and the window's monitor, Runs panel and
doctor show it as one of its own runs. Qt-free: `wiregrad launch` and the window (which starts
`wiregrad launch` as a child process and follows the folder, `app/training/follow.py`) share it.

Locally torchrun starts `--nproc-per-node` processes (Gloo on CPUs, NCCL on GPUs). For a cluster the run
folder also gets the files a person submits: `launch/torchrun_node<K>.sh` (one torchrun command per node)
and `launch/slurm.sbatch`; a folder on a shared filesystem can then be followed from the app as it grows.
Errors are one line each: torch missing (with the install command), a port in use, a rank that crashed
(the tail of its log; torchrun stops the others and the last checkpoint stays), an interrupted launch."""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.document import Document
from app.files import write_text_atomic
from app.training.follow import CONTROL_FILE, MetricsTail, request, signal_group

SCRIPT_NAME = "train_model.py"
TORCHRUN_LOG = "torchrun.log"  # torchrun's own output and every rank's, prefixed "[default<rank>]:"
LOG_DIR = "logs"  # each rank's stdout.log and stderr.log, under logs/<run id>/attempt_<n>/<local rank>/
LAUNCH_DIR = "launch"  # the cluster's launch files
TORCH_HINT = ("PyTorch is not installed for {python}; `wiregrad launch` trains on it: pip install torch "
              "(CPU only: pip install torch --index-url https://download.pytorch.org/whl/cpu)")
STOP_GRACE_S = 20.0  # a stop the script has not acted on by then is sent SIGTERM, then SIGKILL after as long
TAIL_LINES = 12


class LaunchError(Exception):
    """Something a person can act on, in one line."""


@dataclass
class LaunchOptions:
    """How torchrun runs the script: processes per node, nodes and where they meet, device, epochs."""

    nproc_per_node: int = 1
    nnodes: int = 1
    rdzv_endpoint: str | None = None  # HOST:PORT of node 0 (several nodes, or a fixed local port)
    device: str = "auto"  # cpu | cuda | auto (cuda when there is one)
    epochs: int | None = None

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    def check(self) -> None:
        if self.nproc_per_node < 1:
            raise LaunchError(f"--nproc-per-node must be at least 1, got {self.nproc_per_node}")
        if self.nnodes < 1:
            raise LaunchError(f"--nnodes must be at least 1, got {self.nnodes}")
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise LaunchError("--nnodes above 1 needs --rdzv-endpoint HOST:PORT (node 0's address, where the "
                              "nodes meet)")
        if self.rdzv_endpoint:
            endpoint(self.rdzv_endpoint)
        if self.device not in ("auto", "cpu", "cuda"):
            raise LaunchError(f"--device must be cpu, cuda or auto, got {self.device!r}")
        if self.epochs is not None and self.epochs < 1:
            raise LaunchError(f"--epochs must be at least 1, got {self.epochs}")


def endpoint(text: str) -> tuple[str, int]:
    """HOST:PORT as (host, port); LaunchError naming the text otherwise."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise LaunchError(f"--rdzv-endpoint must be HOST:PORT (e.g. node0:29500), got {text!r}")
    return host.strip("[]"), int(port)


def require_torch() -> None:
    """LaunchError with the install command when torch (and its launcher) can't be imported here: the
    script runs in this same Python."""
    try:
        import torch  # noqa: F401
        import torch.distributed.run  # noqa: F401
    except ImportError:
        raise LaunchError(TORCH_HINT.format(python=sys.executable)) from None


def _local(host: str) -> bool:
    names = {"localhost", "127.0.0.1", "::1", "0.0.0.0", socket.gethostname(), socket.getfqdn()}
    return host in names


def check_port(text: str) -> None:
    """A rendezvous port on this machine must be free (node 0 listens on it): LaunchError when it is not."""
    host, port = endpoint(text)
    if not _local(host):
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            raise LaunchError(f"port {port} on {host} is in use (another run, or another program); choose "
                              f"another with --rdzv-endpoint {host}:PORT") from None


# ---------------------------------------------------------------------------------------------
# the run folder
# ---------------------------------------------------------------------------------------------
def prepare_run(doc: Document, run_dir: str | os.PathLike[str], options: LaunchOptions, *,
                graph_name: str, source: str | os.PathLike[str] | None = None,
                base_dir: str | os.PathLike[str] | None = None) -> Path:
    """Write the run folder (document.json, run.json, the training script and its bundled data, the
    cluster's launch files) and return the script's path. The document is not changed (a copy gets
    `options.epochs`). ExportError when the graph can't be written as a PyTorch script."""
    from app.export.pytorch import export_pytorch
    from app.training.runs import note_run, run_name
    from app.training.session import prepare_run_folder

    run_dir = Path(run_dir)
    doc = doc.copy()
    if options.epochs is not None:
        doc.set_training("epochs", int(options.epochs))
    existing = _json_object(run_dir / "run.json")
    prepare_run_folder(doc, run_dir)
    meta = {"name": existing.get("name") or run_name(run_dir.parent, graph_name) + " · PyTorch",
            "graph": existing.get("graph") or graph_name, "started": existing.get("started") or time.time(),
            "source": existing.get("source") or (str(Path(source).resolve()) if source else ""),
            "status": "starting", "engine": "pytorch", "world_size": options.world_size,
            "nproc_per_node": options.nproc_per_node, "nnodes": options.nnodes}
    note_run(run_dir, **meta)
    script = export_pytorch(doc, run_dir / SCRIPT_NAME, base_dir=base_dir, source_name=graph_name)
    (run_dir / CONTROL_FILE).unlink(missing_ok=True)
    if options.nnodes > 1:
        write_cluster_files(run_dir, options)
    return script


def _json_object(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def torchrun_command(run_dir: str | os.PathLike[str], options: LaunchOptions, *, node_rank: int | None = None,
                     python: str | None = None) -> list[str]:
    """The torchrun command line for this machine (or, with `node_rank`, for that node of a cluster)."""
    run_dir = Path(run_dir).resolve()
    cmd = [python or sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
           str(options.nproc_per_node)]
    if options.nnodes == 1 and not options.rdzv_endpoint:
        cmd.append("--standalone")  # one machine: torchrun picks a free port
    else:
        cmd += ["--nnodes", str(options.nnodes), "--rdzv-backend", "c10d", "--rdzv-endpoint",
                str(options.rdzv_endpoint), "--rdzv-id", run_dir.name]
        if node_rank is not None:
            cmd += ["--node-rank", str(node_rank)]
    cmd += ["--log-dir", str(run_dir / LOG_DIR), "--redirects", "3", "--tee", "3", str(run_dir / SCRIPT_NAME),
            "--distributed", "--device", options.device, "--run-dir", str(run_dir)]
    if options.epochs is not None:
        cmd += ["--epochs", str(options.epochs)]
    return cmd


def write_cluster_files(run_dir: Path, options: LaunchOptions) -> list[Path]:
    """launch/torchrun_node<K>.sh for each node and launch/slurm.sbatch: what a person runs on a cluster
    whose nodes share the run folder. Every value is quoted for the shell."""
    folder = run_dir / LAUNCH_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for k in range(options.nnodes):
        cmd = torchrun_command(run_dir.resolve(), options, node_rank=k, python="python")
        text = ("#!/bin/sh\n"
                f"# node {k} of {options.nnodes}: run this on that node (the run folder on a shared "
                "filesystem)\n"
                f"exec {shlex.join(cmd)}\n")
        path = folder / f"torchrun_node{k}.sh"
        write_text_atomic(path, text)
        path.chmod(0o755)
        written.append(path)
    _, port = endpoint(str(options.rdzv_endpoint))
    cmd = torchrun_command(run_dir.resolve(), options, python="python")
    at = cmd.index("--rdzv-endpoint")
    cmd[at + 1] = "MASTER:" + str(port)  # node 0 is the allocation's first host
    line = shlex.join(cmd).replace(shlex.quote("MASTER:" + str(port)), '"$MASTER:' + str(port) + '"')
    sbatch = ("#!/bin/bash\n"
              f"#SBATCH --job-name={shlex.quote(run_dir.name[:60])}\n"
              f"#SBATCH --nodes={options.nnodes}\n"
              "#SBATCH --ntasks-per-node=1\n"
              + (f"#SBATCH --gpus-per-node={options.nproc_per_node}\n" if options.device == "cuda" else "")
              + f"#SBATCH --output={shlex.quote(str(run_dir.resolve() / 'slurm-%j.log'))}\n"
              "# one torchrun per node; they meet at the first node of the allocation\n"
              'MASTER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
              f"srun {line}\n")
    path = folder / "slurm.sbatch"
    write_text_atomic(path, sbatch)
    written.append(path)
    return written


# ---------------------------------------------------------------------------------------------
# the process group
# ---------------------------------------------------------------------------------------------
class Launch:
    """torchrun on a prepared run folder, in a process group (session) of its own, its output in
    RUN_DIR/torchrun.log. `stop()` asks the script through the control file (it stops every process at
    the same batch and saves its checkpoint), then signals the group if it has not ended."""

    def __init__(self, run_dir: str | os.PathLike[str], options: LaunchOptions,
                 env: dict[str, str] | None = None) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.options = options
        self.env = env
        self.process: subprocess.Popen | None = None
        self.stop_requested = False
        self.log_path = self.run_dir / TORCHRUN_LOG

    def start(self) -> None:
        if self.options.rdzv_endpoint:
            check_port(self.options.rdzv_endpoint)
        env = dict(os.environ if self.env is None else self.env, PYTHONUNBUFFERED="1")
        env.setdefault("OMP_NUM_THREADS", "1")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(torchrun_command(self.run_dir, self.options), stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                            cwd=self.run_dir, start_new_session=True)

    def poll(self) -> int | None:
        return self.process.poll() if self.process is not None else None

    def request(self, word: str) -> None:
        """pause, resume or stop at the next batch boundary (every process at the same one)."""
        if word == "stop":
            self.stop_requested = True
        request(self.run_dir, word)

    def signal(self, sig: int) -> None:
        """Send `sig` to torchrun and every process it started."""
        signal_group(self.process, sig)

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """Stop the run (its checkpoint is saved) and wait for the group; SIGTERM after `grace_s`, SIGKILL
        after as long again. Returns torchrun's exit status."""
        try:
            self.request("stop")
        except OSError:
            pass
        for sig in (None, signal.SIGTERM, getattr(signal, "SIGKILL", signal.SIGTERM)):
            if sig is not None:
                self.signal(sig)
            try:
                return self.process.wait(grace_s) if self.process is not None else None
            except subprocess.TimeoutExpired:
                continue
        return self.poll()

    def reap(self) -> None:
        """After torchrun ends: nothing it started may live on (a rank stuck in a collective)."""
        if self.process is not None and hasattr(os, "killpg"):
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # the group outlives torchrun itself
            except OSError:
                pass

    def rank_logs(self) -> dict[int, Path]:
        """Each local rank's stderr.log of the latest attempt."""
        found: dict[int, Path] = {}
        for path in sorted((self.run_dir / LOG_DIR).glob("*/attempt_*/*/stderr.log"),
                           key=lambda p: p.stat().st_mtime):
            if path.parent.name.isdigit():
                found[int(path.parent.name)] = path
        return found

    def failure(self, code: int) -> tuple[str, list[str]]:
        """Why torchrun ended with `code`: (one line, the tail of the failed rank's log)."""
        text = _read(self.log_path)
        if re.search(r"EADDRINUSE|address already in use", text, re.I):
            where = self.options.rdzv_endpoint or "the rendezvous port"
            return (f"the rendezvous port {where} is in use (another run, or another program); choose "
                    "another with --rdzv-endpoint HOST:PORT"), []
        root = re.search(r"Root Cause.*?rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)", text, re.S)
        logs = self.rank_logs()
        rank = int(root.group(1)) if root else None
        local = int(root.group(2)) if root else None
        if local is None:  # the first rank whose log holds a traceback
            local = next((r for r, p in sorted(logs.items()) if "Traceback" in _read(p)), None)
            rank = local
        log = logs.get(local) if local is not None else None
        if log is None:
            last = _last_error(text) or f"torchrun ended with exit status {code}"
            return f"the launch failed: {last} (its log: {self.log_path})", _tail(text)
        body = re.sub(r"(?m)^\[rank\d+\]:", "", _read(log))  # torch marks each line of a rank's error
        last = _last_error(body) or f"it ended with exit status {code}"
        kept = "; the last checkpoint is in the run folder" if (self.run_dir / "last.pt").exists() else ""
        return (f"rank {rank} failed: {last} (its log: {log}); the other processes were stopped{kept}",
                _tail(body))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _tail(text: str, n: int = TAIL_LINES) -> list[str]:
    return [line for line in text.splitlines() if line.strip()][-n:]


def _last_error(text: str) -> str | None:
    """The exception line closing the last traceback in `text` ("RuntimeError: ..."), or its last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    if "Traceback" in text:
        after = text.rsplit("Traceback", 1)[1].splitlines()
        error = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")
        errors = [line.strip() for line in after if error.match(line.strip())]
        if errors:
            return errors[-1]
    return lines[-1]


# ---------------------------------------------------------------------------------------------
# following a run folder
# ---------------------------------------------------------------------------------------------
def follow(run_dir: Path, on_record: Callable[[dict[str, Any]], None], *, alive: Callable[[], bool],
           poll_s: float = 0.2) -> dict[str, Any] | None:
    """Read RUN_DIR/metrics.jsonl as it grows, each new record to `on_record`, until its summary (returned)
    or until `alive()` says the writer is gone (then whatever was written is read, and None returned unless
    it held a summary)."""
    tail = MetricsTail(run_dir / "metrics.jsonl")
    summary = None
    while True:
        going = alive()
        for record in tail.read():
            on_record(record)
            if record.get("kind") == "summary":
                summary = record
        if summary is not None or not going:
            return summary
        time.sleep(poll_s)


class Progress:
    """What `wiregrad launch` prints while it follows a run: one line per epoch, findings, and a line every
    few seconds within an epoch."""

    def __init__(self, stream: Any, quiet: bool, every_s: float = 5.0) -> None:
        self.stream, self.quiet, self.every_s = stream, quiet, every_s
        self.epochs = 0
        self.steps = 1
        self._last = time.monotonic()

    def __call__(self, r: dict[str, Any]) -> None:
        if self.quiet:
            return
        kind = r.get("kind")
        if kind == "run":
            self.epochs = int(r.get("epochs") or 0)
            self.steps = int(r.get("steps_per_epoch") or 1)
            ds = r.get("dataset") or {}
            self._say(f"pytorch: {r.get('world_size')} process(es) on {r.get('device')}, "
                      f"{r.get('parameters'):,} parameters, {ds.get('train')} training samples")
        elif kind == "batch" and time.monotonic() - self._last > self.every_s:
            self._say(f"  epoch {int(r['epoch']) + 1}/{self.epochs}  batch {int(r['batch']) + 1}/"
                      f"{self.steps}  loss {_num(r.get('loss'))}")
        elif kind == "epoch":
            acc = r.get("val_accuracy")
            shown = f"  val_acc {acc:.4f}" if isinstance(acc, float) else ""
            self._say(f"epoch {int(r['epoch']) + 1}/{self.epochs}  loss {_num(r.get('train_loss'))}  "
                      f"val_loss {_num(r.get('val_loss'))}{shown}")
        elif kind == "event" and r.get("event") in ("paused", "resumed", "stopped"):
            epoch, batch = int(r.get("epoch") or 0) + 1, int(r.get("batch") or 0) + 1
            self._say(f"  {r['event']} at epoch {epoch}, batch {batch}")

    def _say(self, text: str) -> None:
        self._last = time.monotonic()
        self.stream.write(text + "\n")
        self.stream.flush()


def _num(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) else str(value)


# ---------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------
def _default_run_dir(graph: str) -> Path:
    return Path("runs") / f"{Path(graph).stem}-pytorch-{time.strftime('%Y%m%d-%H%M%S')}"


def _result(run_dir: Path, summary: dict[str, Any] | None, world_size: int) -> dict[str, Any]:
    s = summary or {}
    import math

    out = {"epochs": s.get("epochs"), "train_loss": s.get("train_loss"), "val_loss": s.get("val_loss"),
           "val_accuracy": s.get("val_accuracy"),
           "seconds": round(s["seconds"], 3) if isinstance(s.get("seconds"), int | float) else None,
           "status": s.get("status", "failed"), "run_dir": str(run_dir), "engine": "pytorch",
           "world_size": world_size}
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def _mark_failed(run_dir: Path, error: str) -> None:
    """A run whose script could not say so itself (killed, or it never started): run.json and a closing
    summary record say it failed, so Runs and a follower know."""
    from app.training.runs import note_run

    tail = MetricsTail(run_dir / "metrics.jsonl").read()
    if not tail or tail[-1].get("kind") != "summary":
        try:
            with open(run_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps({"kind": "summary", "status": "failed", "epochs": 0, "train_loss": None,
                                    "val_loss": None, "val_accuracy": None, "seconds": 0.0,
                                    "error": error}) + "\n")
        except OSError:
            pass
    note_run(run_dir, status="failed")


def run_launch(args: argparse.Namespace, stream: Any = None) -> dict[str, Any]:
    """`wiregrad launch`: prepare, start, follow, and return the final JSON. LaunchError (one line) for
    whatever a person must act on; the graph file is only read."""
    stream = stream if stream is not None else sys.stderr
    if args.follow:
        return _follow_only(Path(args.follow), args, stream)
    if not args.graph:
        raise LaunchError("give the graph to train (GRAPH.json), or --follow RUN_DIR")
    options = LaunchOptions(args.nproc_per_node, args.nnodes, args.rdzv_endpoint, args.device or "auto",
                            args.epochs)
    options.check()
    if not args.prepare_only:  # the files for a cluster are written without torch here (a laptop without it)
        require_torch()
    from app.document import format_problem, load_document
    from app.export import ExportError
    from app.training.preflight import preflight

    doc = load_document(args.graph)
    base_dir = Path(args.base_dir) if args.base_dir else Path(args.graph).resolve().parent
    checked = preflight(doc, base_dir=base_dir, deep=True, epochs=args.epochs)
    if checked.errors:
        raise LaunchError("; ".join(format_problem(p) for p in checked.errors[:3]))
    run_dir = Path(args.out) if args.out else _default_run_dir(args.graph)
    graph_name = args.name or Path(args.graph).stem
    try:
        script = prepare_run(doc, run_dir, options, graph_name=graph_name, source=args.graph,
                             base_dir=base_dir)
    except ExportError as exc:
        raise LaunchError(f"can't write the PyTorch script: {exc}") from None
    if args.prepare_only:
        files = [script] + sorted((run_dir / LAUNCH_DIR).glob("*"))
        for f in files:
            stream.write(f"{f}\n")
        return {"status": "prepared", "run_dir": str(run_dir), "engine": "pytorch",
                "world_size": options.world_size, "files": [str(f) for f in files]}
    launch = Launch(run_dir, options)
    try:
        launch.start()
    except LaunchError:
        _mark_failed(run_dir, "the launch did not start")
        raise
    progress = Progress(stream, args.quiet)
    _terminate_as_interrupt()
    try:
        summary = follow(run_dir, progress, alive=lambda: launch.poll() is None)
        code = launch.process.wait()
    except KeyboardInterrupt:
        if not args.quiet:
            stream.write("interrupted: stopping every process at its next batch…\n")
        launch.stop()
        launch.reap()
        summary = follow(run_dir, progress, alive=lambda: False)
        where = f"; its checkpoint and weights are in {run_dir}" if (run_dir / "last.pt").exists() else ""
        if summary is None:
            _mark_failed(run_dir, "interrupted")
        raise LaunchError(f"interrupted: the run stopped{where}") from None
    finally:
        launch.reap()
    if code != 0 and not (summary is not None and summary.get("status") in ("finished", "stopped")):
        line, tail = launch.failure(code)
        _mark_failed(run_dir, line)
        if not args.quiet and tail:
            stream.write("".join(f"  | {t}\n" for t in tail))
        raise LaunchError(line)
    return _result(run_dir, summary, options.world_size)


def _terminate_as_interrupt() -> None:
    """SIGTERM (the window's stop, a batch system's cancel) ends the launch as Ctrl-C does: the run is
    stopped at its next batch with its checkpoint saved. torchrun runs in a session of its own, so without
    this it would go on after `wiregrad launch` is gone."""
    import threading

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def _follow_only(run_dir: Path, args: argparse.Namespace, stream: Any) -> dict[str, Any]:
    """--follow RUN_DIR: print a run's progress (from its start) until its summary; Ctrl-C stops following,
    not the run."""
    from app.training.runs import read_run

    if not (run_dir / "document.json").is_file():
        raise LaunchError(f"{run_dir} is not a run folder (it has no document.json)")
    progress = Progress(stream, args.quiet)
    checked = {"at": time.monotonic(), "alive": True}

    def alive() -> bool:  # a writer that is gone leaves run.json live and its lock free: interrupted
        if time.monotonic() - checked["at"] > 5.0:
            checked["at"] = time.monotonic()
            record = read_run(run_dir)
            checked["alive"] = record is not None and record.status not in ("interrupted", "failed")
        return checked["alive"]

    try:
        summary = follow(run_dir, progress, alive=alive)
    except KeyboardInterrupt:
        raise LaunchError(f"stopped following {run_dir} (the run goes on)") from None
    if summary is None:
        raise LaunchError(f"{run_dir}: the process that trained it ended without finishing the run")
    world = _json_object(run_dir / "run.json").get("world_size")
    return _result(run_dir, summary, world if isinstance(world, int) else 0)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """`wiregrad launch` on the CLI's subcommands."""
    p = sub.add_parser("launch", help="train a graph on PyTorch's distributed engine (torchrun, "
                       "DistributedDataParallel) into a Wiregrad run folder, and follow it")
    p.add_argument("graph", metavar="GRAPH.json", nargs="?", help="the graph to train")
    p.add_argument("--nproc-per-node", type=int, default=1, metavar="N", help="processes on this machine "
                   "(Gloo on CPUs, NCCL with one GPU each)")
    p.add_argument("--nnodes", type=int, default=1, metavar="M", help="machines in all (a cluster: also "
                   "writes launch/torchrun_node<K>.sh and launch/slurm.sbatch into the run folder)")
    p.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="where the nodes meet (node 0)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), help="default: cuda when there is one")
    p.add_argument("--epochs", type=int, help="override the document's epochs")
    p.add_argument("--out", metavar="RUN_DIR", help="run folder (default runs/<graph>-pytorch-<time>)")
    p.add_argument("--follow", metavar="RUN_DIR", help="follow a run folder (e.g. a cluster's, on a shared "
                   "filesystem) until it ends, instead of launching")
    p.add_argument("--prepare-only", action="store_true", help="write the run folder and launch files; "
                   "start nothing")
    p.add_argument("--base-dir", metavar="DIR", help=argparse.SUPPRESS)  # the window's: where data is
    p.add_argument("--name", help=argparse.SUPPRESS)  # the window's: the graph the run is named after
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


__all__ = ["Launch", "LaunchError", "LaunchOptions", "add_parser", "check_port", "follow", "prepare_run",
           "require_torch", "run_launch", "torchrun_command", "write_cluster_files"]
