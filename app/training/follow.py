"""Following a run folder that another process trains: the PyTorch script Wiregrad exports (under torchrun,
started by `wiregrad launch` or by hand on a cluster) writes the run folder Wiregrad's own Trainer writes,
and `FollowSession` reads its metrics.jsonl as it grows and tells subscribers the same typed events a
`TrainingSession` does (`RunPlan`, `BatchMetrics`, `EpochMetrics`, `ControlEvent`, `Finding`, `StateChanged`,
`RunSummary`, `Failed`, `Finished`), so the window's plots, gradient norms and doctor show it unchanged. The
doctor's rules run here, on the records as they arrive.

Pause, resume and stop write one word into RUN_DIR/control, which the script's rank 0 reads at every batch
boundary (all processes then agree, see the exported script's `Control`). With `command`, the session also
starts the process that trains the run (the window starts `wiregrad launch ... --out RUN_DIR`), its output
in RUN_DIR/launch.log, and a run it can't stop through the control file is stopped by signal."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from app.document import Document
from app.files import write_text_atomic
from app.training.metrics import BatchMetrics, ControlEvent, EpochMetrics, Finding, RunInfo, RunSummary
from app.training.session import Failed, Finished, RunPlan, StateChanged, Subscriber

CONTROL_FILE = "control"  # one word: pause, resume or stop (the exported script's Control reads it)
LAUNCH_LOG = "launch.log"  # the output of the process a FollowSession started
POLL_S = 0.2  # how often the folder is read
STOP_GRACE_S = 20.0  # a run asked to stop that is still going after this is sent SIGTERM
LIVENESS_EVERY_S = 5.0  # how often a followed run without a process of ours is checked for being alive


def signal_group(process: subprocess.Popen | None, sig: int) -> None:
    """Send `sig` to a process started in a session of its own and to everything it started (where there
    are process groups; elsewhere to the process alone, and SIGKILL is terminate())."""
    if process is None or process.poll() is not None:
        return
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, sig)
        elif sig == getattr(signal, "SIGKILL", None):
            process.kill()
        else:
            process.terminate()
    except OSError:
        pass  # it ended meanwhile


def request(run_dir: str | os.PathLike[str], word: str) -> None:
    """Ask the script training RUN_DIR to "pause", "resume" or "stop" at its next batch boundary."""
    if word not in ("pause", "resume", "stop"):
        raise ValueError(f"unknown request {word!r}")
    write_text_atomic(Path(run_dir) / CONTROL_FILE, word + "\n")


class MetricsTail:
    """The records appended to a metrics.jsonl since the last read: whole lines only (a line the writer has
    not finished is read next time), lines that are not JSON objects skipped."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._offset = 0
        self._partial = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return []
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()  # b"" after a complete last line
        out = []
        for line in lines:
            try:
                record = json.loads(line.decode("utf-8", errors="replace"))
            except ValueError:
                continue
            if isinstance(record, dict):
                out.append(record)
        return out


def _nonfinite(value: Any) -> Any:
    from app.training.metrics import _unclean

    return _unclean(value)


def record_object(record: dict[str, Any]) -> Any:
    """A metrics.jsonl record as the object a live run emits (None for a kind a session does not emit, or a
    record missing a field)."""
    cls = {"batch": BatchMetrics, "epoch": EpochMetrics, "event": ControlEvent, "finding": Finding,
           "run": RunInfo, "summary": RunSummary}.get(record.get("kind"))
    if cls is None:
        return None
    names = {f.name for f in fields(cls)}
    try:
        return cls(**{k: _nonfinite(v) for k, v in record.items() if k in names})
    except TypeError:
        return None


def _doctor_for(doc: Document | None) -> Any:
    """The training doctor for the document's graph (node order, types, what feeds what), as the Trainer
    builds it; None when the document can't be read."""
    if doc is None:
        return None
    import networkx as nx

    from app.document.blocks import expand
    from app.training.doctor import TrainingDoctor

    try:
        graph = expand(doc)
        dag = nx.DiGraph([(e.src, e.dst) for e in graph.edges])
        dag.add_nodes_from(graph.nodes)
        order = list(nx.topological_sort(dag))
    except Exception:  # noqa: BLE001 - a graph that does not expand: the run shows without the doctor
        return None
    return TrainingDoctor(order, {nid: n.type for nid, n in graph.nodes.items()},
                          {e.dst: e.src for e in graph.edges})


class FollowSession:
    """A run folder another process trains, with the interface of `TrainingSession` the window uses:
    `subscribe`, `start` (follow, and start `command` when given), `pause`/`resume`/`stop` (through the
    control file), `wait`, `is_running`, `state`, `plan`, `summary`, `error`; `trainer` is None (the model
    lives in another process: nothing can be asked of it). Events reach subscribers on the session's reader
    thread, in the order the records were written."""

    def __init__(self, run_dir: str | os.PathLike[str], *, doc: Document | None = None,
                 command: Sequence[str] | None = None, env: dict[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None, poll_s: float = POLL_S) -> None:
        self.run_dir = Path(run_dir)
        if doc is None:
            from app.document import load_document

            try:
                doc = load_document(self.run_dir / "document.json")
            except Exception:  # noqa: BLE001 - a folder whose document is written later, or damaged
                doc = None
        self.doc = doc if doc is not None else Document()
        self.command = list(command) if command is not None else None
        self.env, self.cwd, self.poll_s = env, cwd, poll_s
        self.resume_from = None
        self.state = "ready"
        self.error: tuple[str, str] | None = None
        self.summary: Any = None
        self.plan: RunPlan | None = None
        self.process: subprocess.Popen | None = None
        self.doctor = _doctor_for(doc)
        self.policy: dict[str, str] = {}
        self._subscribers: list[Subscriber] = []
        self._thread: threading.Thread | None = None
        self._quit = threading.Event()
        self._stop_asked: float | None = None
        self._log: Any = None
        self._start_error: str | None = None

    # --- events ------------------------------------------------------------------------------------
    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn) if fn in self._subscribers else None

    def _publish(self, event: Any) -> None:
        if isinstance(event, StateChanged):
            self.state = event.state
        for fn in list(self._subscribers):
            fn(event)

    # --- lifecycle ---------------------------------------------------------------------------------
    @property
    def trainer(self) -> None:
        return None

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Follow the folder on a thread of its own (starting `command` first, when given)."""
        if self.is_running() or self._thread is not None:
            return
        if self.command is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._log = open(self.run_dir / LAUNCH_LOG, "ab")
            env = dict(os.environ if self.env is None else self.env, PYTHONUNBUFFERED="1")
            try:
                self.process = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, env=env, cwd=self.cwd,
                                                start_new_session=True)  # a group: a stop reaches it all
            except OSError as exc:  # told on the reader thread, as any failure of the run
                self._start_error = f"can't start {self.command[0]}: {exc.strerror or exc}"
        self._publish(StateChanged("building"))
        self._thread = threading.Thread(target=self._follow, name="wiregrad-follow", daemon=True)
        self._thread.start()

    def wait(self, timeout_s: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout_s)
        return not self.is_running()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop following. A process of ours still going is asked to stop and sent SIGTERM (`wiregrad launch`
        then stops the run at its next batch, checkpoint saved, on its own: nothing waits for it here)."""
        if self.process is not None and self.process.poll() is None:
            self.stop()
            signal_group(self.process, signal.SIGTERM)
        self._quit.set()
        self.wait(timeout_s)

    # --- commands ----------------------------------------------------------------------------------
    def _request(self, word: str) -> None:
        try:
            request(self.run_dir, word)
        except OSError:
            pass  # the folder went away: the reader says so

    def pause(self) -> None:
        self._request("pause")

    def resume(self) -> None:
        self._request("resume")

    def stop(self) -> None:
        self._stop_asked = time.monotonic()
        self._request("stop")

    def set_doctor_policy(self, policy: dict[str, str]) -> None:
        """Which doctor findings pause the run ("pause", through the control file) and which only warn."""
        self.policy = dict(policy)

    # what a run in another process can't do: these are accepted and do nothing
    def step_once(self) -> None: ...

    def set_lr(self, lr: float) -> None: ...

    def set_option(self, name: str, value: Any) -> None: ...

    def request_graph(self) -> None: ...

    def ask_insight(self, kind: str, args: dict[str, Any] | None = None) -> None: ...

    def watch_insight(self, kind: str, args: dict[str, Any] | None = None) -> None: ...

    # --- the reader thread -------------------------------------------------------------------------
    def _follow(self) -> None:
        tail = MetricsTail(self.run_dir / "metrics.jsonl")
        last_check = time.monotonic()
        try:
            if self._start_error is not None:
                self._fail(self._start_error)
                return
            while not self._quit.is_set():
                ended = self._ended_process()
                for record in tail.read():
                    self._on_record(record)
                if ended is not None:  # every record it wrote has been read
                    if self.summary is None or self.summary.status == "failed":
                        self._process_failed(ended)
                    break
                if self.summary is not None and self.process is None:
                    break
                self._signal_if_stuck()
                now = time.monotonic()
                if self.process is None and now - last_check > LIVENESS_EVERY_S:
                    last_check = now
                    if self._interrupted():
                        break
                time.sleep(self.poll_s)
        except Exception as exc:  # noqa: BLE001 - whoever watches must hear about every failure
            self.error = (f"{type(exc).__name__}: {exc}", "")
            self._publish(StateChanged("failed"))
            self._publish(Failed(*self.error))
        finally:
            if self._log is not None:
                self._log.close()
            self._publish(Finished())

    def _ended_process(self) -> int | None:
        if self.process is None:
            return None
        return self.process.poll()

    def _signal_if_stuck(self) -> None:
        """A stop the script has not acted on within STOP_GRACE_S (it waits in a collective for a process
        that is gone): SIGTERM to the group of the process we started."""
        if self._stop_asked is None or self.process is None or self.process.poll() is not None:
            return
        if time.monotonic() - self._stop_asked > STOP_GRACE_S:
            self._stop_asked = None
            signal_group(self.process, signal.SIGTERM)

    def _interrupted(self) -> bool:
        """A followed run whose writer is gone without a summary: say so and stop following."""
        from app.training.runs import read_run

        record = read_run(self.run_dir)
        if record is None or record.status != "interrupted":
            return False
        self._fail("the process that trained the run ended without finishing it (interrupted)")
        return True

    def _process_failed(self, code: int) -> None:
        """Our process ended without the run's summary, or after a failed one: its last error line
        (`wiregrad launch: error: ...`), which names the rank that failed, else the summary's error."""
        line = launch_error(self.run_dir / LAUNCH_LOG)
        if line is None and self.summary is not None:
            line = self.summary.error
        self._fail(line or f"the launch ended with exit status {code}")

    def _fail(self, message: str) -> None:
        self.error = (message, "")
        self._publish(StateChanged("failed"))
        self._publish(Failed(message, ""))

    def _on_record(self, record: dict[str, Any]) -> None:
        obj = record_object(record)
        if obj is None:
            return
        if isinstance(obj, RunInfo):
            epochs = int(record.get("epochs") or 0)
            steps = record.get("steps_per_epoch")
            steps = steps if isinstance(steps, int) and steps > 0 else 1
            plan = RunPlan(str(self.run_dir), epochs, steps, int(record.get("start_epoch") or 0),
                           int(record.get("batch_size") or 0), obj)
            self.plan = plan
            self._publish(plan)
            self._publish(StateChanged("running"))
        elif isinstance(obj, BatchMetrics):
            self._publish(obj)
            if self.doctor is not None and obj.stepped:
                self._findings(self.doctor.check_batch(obj))
        elif isinstance(obj, EpochMetrics):
            self._publish(obj)
            matrix = record.get("confusion")  # the exported script's: [true, predicted] on validation
            if isinstance(matrix, list) and matrix:
                from app.training.probes import Confusion

                try:
                    self._publish(Confusion(np.asarray(matrix, dtype=np.int64), obj.epoch))
                except ValueError:
                    pass
            if self.doctor is not None:
                self._findings(self.doctor.check_epoch(obj))
        elif isinstance(obj, ControlEvent):
            self._publish(obj)
            state = {"paused": "paused", "resumed": "running", "stopped": "stopping"}.get(obj.event)
            if state is not None:
                self._publish(StateChanged(state))
        elif isinstance(obj, Finding):
            self._publish(obj)
        elif isinstance(obj, RunSummary):
            self.summary = obj
            self._publish(obj)
            if obj.status == "failed":
                if self.process is None:  # else the launch's own error line says more, once it has ended
                    self._fail(obj.error or "the run failed")
            else:
                self._publish(StateChanged(obj.status))

    def _findings(self, found: list[Finding]) -> None:
        for f in found:
            self._publish(f)
            if self.policy.get(f.rule) == "pause":
                self._request("pause")


def launch_error(log: Path) -> str | None:
    """The last `wiregrad launch: error: ...` line of a launch's log, without its prefix."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    prefix = "wiregrad launch: error: "
    found = [line[len(prefix):] for line in lines if line.startswith(prefix)]
    return found[-1] if found else None


__all__ = ["CONTROL_FILE", "FollowSession", "MetricsTail", "launch_error", "record_object", "request"]
