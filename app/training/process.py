"""A training session whose Trainer runs in its own process: `ProcessSession` has `TrainingSession`'s
interface (subscribe, start, pause/resume/stop, step, lr, options, policy, wait, trainer), and the window
uses it so that training never holds the window's interpreter lock.

Why a process: Python threads share one lock (the GIL). A trainer thread spends most of a batch in Python
between NumPy calls, and on a loaded machine the UI thread waited behind it for 100-500 ms at a time, which
niceness, switch intervals and giving way at batch ends only halved. In a process of its own the trainer
competes with the window for CPU only, which the OS scheduler shares well (the child runs niced).

How: the child (`_serve`) runs an ordinary `TrainingSession` and sends every event it publishes back through
a pipe (events are plain dataclasses of numbers and arrays); the parent's reader thread hands them to
subscribers in order. Commands go the other way as ("call", name, args); a few questions the window asks
of a stopped run (its epoch, its weights, "train on to N epochs") are ("ask", id, name, args) with a
reply. The child ends when the parent closes the pipe, or dies: a window killed mid-run leaves a stopped
run behind, not a trainer running on its own. Children fork from a fork server that has imported the engine
once (Linux), so a Start costs milliseconds, not an interpreter start-up."""
from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from app.document import Document
from app.training.session import Failed, Finished, StateChanged, Subscriber, prepare_run_folder

_CONTEXT: Any = None
_CONTEXT_LOCK = threading.Lock()


def _context() -> Any:
    """The multiprocessing context for training processes: a fork server that preloaded the engine and
    the training code where there is one (Linux, macOS), else fresh interpreters (spawn). Never plain
    fork: the window's process has Qt and threads, which a forked child would inherit half-made."""
    global _CONTEXT
    with _CONTEXT_LOCK:
        if _CONTEXT is None:
            if "forkserver" in multiprocessing.get_all_start_methods():
                ctx = multiprocessing.get_context("forkserver")
                ctx.set_forkserver_preload(["app.training.process"])
            else:
                ctx = multiprocessing.get_context("spawn")
            _CONTEXT = ctx
        return _CONTEXT


def _fall_back_to_spawn() -> Any:
    global _CONTEXT
    with _CONTEXT_LOCK:
        _CONTEXT = multiprocessing.get_context("spawn")
        return _CONTEXT


def _start_child(ctx: Any, doc: Document, run_dir: Path | None, options: dict[str, Any]) -> tuple[Any, Any]:
    """The training process, started: (the parent's end of its pipe, the process)."""
    conn, child = ctx.Pipe(duplex=True)
    # the snapshot itself (pickled), not its JSON: the child trains exactly what the window checked
    where = str(run_dir) if run_dir is not None else None
    proc = ctx.Process(target=_serve, args=(child, doc, where, options), name="wiregrad-trainer", daemon=True)
    try:
        proc.start()
    except BaseException:
        conn.close()
        child.close()
        raise
    child.close()
    return conn, proc


class RemoteError(RuntimeError):
    """A question to the training process failed there, or the process is gone."""


class _RemoteModel:
    """The trained model as the window needs it from a stopped run: its weights."""

    def __init__(self, session: ProcessSession) -> None:
        self._session = session

    def state_dict(self) -> dict[str, Any]:
        """The model's parameters and buffers as engine tensors (copies, in the window's process)."""
        import engine

        arrays = self._session._ask("state_dict")
        return {name: engine.from_numpy(np.asarray(a)) for name, a in arrays.items()}


class RemoteTrainer:
    """The Trainer of a `ProcessSession`, as far as the window reads it: plain attributes (`epoch`,
    `epochs`, `batch`, `step`, `steps_per_epoch`, `info`...) are asked of the training process;
    `set_epochs` trains a stopped run on; `model.state_dict()` copies its weights over. Ask only while the
    run is not running, as with a Trainer in a thread."""

    def __init__(self, session: ProcessSession) -> None:
        self._session = session
        self.model = _RemoteModel(session)

    def set_epochs(self, epochs: int) -> str | None:
        return self._session._ask("set_epochs", int(epochs))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._session._ask("attr", name)


class ProcessSession:
    """`TrainingSession`'s interface with the Trainer in a child process (see the module's docstring).

    The run folder (document.json, run.json) is written here, before the child starts, so the Runs list
    sees the run at once; the child holds the run's lock while it trains. Events reach subscribers on this
    process's reader thread, in the order the child published them."""

    def __init__(self, doc: Document, run_dir: str | os.PathLike[str] | None = None, *,
                 run_meta: dict[str, Any] | None = None, **session_options: Any) -> None:
        self.doc = doc.copy()
        self.run_dir = Path(run_dir) if run_dir is not None else None
        resume_from = session_options.get("resume_from")
        self.resume_from = Path(resume_from) if resume_from is not None else None
        prepare_run_folder(self.doc, self.run_dir, run_meta)
        self.state = "ready"
        self.error: tuple[str, str] | None = None
        self.summary: Any = None
        self.plan: Any = None
        self._subscribers: list[Subscriber] = []
        self._running = False
        self._ended = threading.Event()
        self._ended.set()
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._replies: dict[int, Any] = {}
        self._replied = threading.Condition()
        self._closed = False
        options = dict(session_options, folder_ready=True)
        try:
            self._conn, self._proc = _start_child(_context(), self.doc, self.run_dir, options)
        except OSError:
            # the fork server could not start (its socket's path too long under a deep TMPDIR, a full /tmp):
            # fresh interpreters need no socket, only a slower start
            self._conn, self._proc = _start_child(_fall_back_to_spawn(), self.doc, self.run_dir, options)
        self._reader = threading.Thread(target=self._read, name="wiregrad-trainer-reader", daemon=True)
        self._reader.start()
        self._trainer = RemoteTrainer(self)
        self._has_trainer = False

    # --- events ------------------------------------------------------------------------------------
    def subscribe(self, fn: Subscriber) -> Any:
        """Call `fn(event)` for every event from now on (on the reader thread); returns the unsubscribe."""
        self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn) if fn in self._subscribers else None

    def _publish(self, event: Any) -> None:
        from app.training.metrics import RunSummary
        from app.training.session import RunPlan

        if isinstance(event, StateChanged):
            self.state = event.state
        elif isinstance(event, RunPlan):
            self.plan = event
            self._has_trainer = True
        elif isinstance(event, RunSummary):
            self.summary = event
        elif isinstance(event, Failed):
            self.error = (event.message, event.traceback)
        for fn in list(self._subscribers):
            fn(event)
        if isinstance(event, Finished):
            self._running = False
            self._ended.set()

    def _read(self) -> None:
        """The reader thread: events to subscribers, replies to whoever asked; a child that dies is a
        failed run (its exit code said), so the window never waits for a run that is gone."""
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "event":
                self._publish(message[1])
            elif kind == "reply":
                with self._replied:
                    self._replies[message[1]] = message[2:]
                    self._replied.notify_all()
        with self._replied:
            self._closed = True
            self._replied.notify_all()
        if self._running:  # the child died mid-run
            self._proc.join(5)
            code = self._proc.exitcode
            from app.training.runs import note_run

            note_run(self.run_dir, status="failed")
            message = (f"RuntimeError: the training process ended unexpectedly (exit code {code}); "
                       "the machine may have run out of memory")
            self.state = "failed"
            self._publish(StateChanged("failed"))
            self._publish(Failed(message, ""))
            self._publish(Finished())

    # --- lifecycle ---------------------------------------------------------------------------------
    @property
    def trainer(self) -> RemoteTrainer | None:
        """The Trainer's stand-in once the child has built the Trainer (None before)."""
        return self._trainer if self._has_trainer else None

    def is_running(self) -> bool:
        """True from `start()` until the child has said the run's segment ended (`Finished`)."""
        return self._running

    def start(self) -> None:
        """Start (or, after a stop, continue) training in the child."""
        if self._running or self._closed:
            return
        from app.training.runs import note_run

        self._running = True
        self._ended.clear()
        note_run(self.run_dir, status="running")  # at once, as a thread's start does: Runs lists it so now
        self._send(("call", "start", ()))

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the segment ends (after `stop()`, or the last epoch); True when it did."""
        return self._ended.wait(timeout_s)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop any run and end the child (after which the session can't start again)."""
        if not self._closed:
            try:
                self._send(("close",))
            except RemoteError:
                pass
        self._proc.join(timeout_s)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)
        self._conn.close()

    def __del__(self) -> None:
        try:
            if self._proc.is_alive() and not self._running:
                self._conn.close()  # the child sees the pipe close and ends
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # --- commands (any thread) ---------------------------------------------------------------------
    def _send(self, message: tuple) -> None:
        try:
            with self._send_lock:
                self._conn.send(message)
        except (OSError, ValueError) as exc:  # the pipe is closed: the child is gone
            raise RemoteError("the training process has ended") from exc

    def _call(self, name: str, *args: Any) -> None:
        try:
            self._send(("call", name, args))
        except RemoteError:
            pass  # a command to a run that is gone does nothing, as after a thread's end

    def _ask(self, name: str, *args: Any, timeout_s: float = 60.0) -> Any:
        ask_id = next(self._ids)
        self._send(("ask", ask_id, name, args))
        with self._replied:
            ok = self._replied.wait_for(lambda: ask_id in self._replies or self._closed, timeout_s)
            if not ok or ask_id not in self._replies:
                raise RemoteError(f"the training process did not answer ({name})")
            good, value = self._replies.pop(ask_id)
        if not good:
            raise value  # the child's own exception (a TrainerError, an AttributeError...), as a thread's
        return value

    def pause(self) -> None:
        self._call("pause")

    def resume(self) -> None:
        self._call("resume")

    def stop(self) -> None:
        self._call("stop")

    def step_once(self) -> None:
        self._call("step_once")

    def set_lr(self, lr: float) -> None:
        self._call("set_lr", float(lr))

    def set_option(self, name: str, value: Any) -> None:
        self._call("set_option", name, value)

    def set_doctor_policy(self, policy: dict[str, str]) -> None:
        self._call("set_doctor_policy", dict(policy))

    def request_graph(self) -> None:
        self._call("request_graph")

    def ask_insight(self, kind: str, args: dict[str, Any] | None = None) -> None:
        self._call("ask_insight", kind, args)

    def watch_insight(self, kind: str, args: dict[str, Any] | None = None) -> None:
        self._call("watch_insight", kind, args)


_COMMANDS = frozenset({"start", "pause", "resume", "stop", "step_once", "set_lr", "set_option",
                       "set_doctor_policy", "request_graph", "ask_insight", "watch_insight"})


def _answer(session: Any, name: str, args: tuple) -> Any:
    """A question from the parent about the child's (stopped) run."""
    trainer = session.trainer
    if trainer is None:
        raise RuntimeError("the run has no trainer yet")
    if name == "attr":
        value = getattr(trainer, args[0])
        return value if not callable(value) else None
    if name == "set_epochs":
        return trainer.set_epochs(args[0])
    if name == "state_dict":
        weights = trainer.model.state_dict()
        return {k: np.array(v.detach().cpu().numpy(), copy=True) for k, v in weights.items()}
    raise RuntimeError(f"unknown question {name!r}")


def _serve(conn: Any, doc: Document, run_dir: str | None, options: dict[str, Any]) -> None:
    """The training process: a TrainingSession whose events go to the parent; commands come from it. Ends
    when the parent says close or its end of the pipe closes (the parent died): a run still going is
    stopped at its next batch and its run.json says so."""
    import pickle

    from app.training.session import TrainingSession

    send_lock = threading.Lock()

    def send(message: tuple) -> None:
        try:
            payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - what the parent can't take: say so, keep training
            if message[0] == "reply":  # the asker must hear back, never wait for an answer that can't come
                _, ask_id, good, value = message
                words = f"the answer could not be sent: {exc}" if good else f"{type(value).__name__}: {value}"
                payload = pickle.dumps(("reply", ask_id, False, RemoteError(words)))
            else:
                failed = Failed(f"RuntimeError: an event could not be sent: {exc}", "")
                payload = pickle.dumps(("event", failed))
        try:
            with send_lock:
                conn.send_bytes(payload)
        except (OSError, ValueError):
            pass  # the parent is gone; the command loop ends the run

    session = TrainingSession(doc, run_dir, **options)
    session.subscribe(lambda event: send(("event", event)))
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "close":
                break
            if kind == "call" and message[1] in _COMMANDS:
                getattr(session, message[1])(*message[2])
            elif kind == "ask":
                try:
                    reply = ("reply", message[1], True, _answer(session, message[2], message[3]))
                except Exception as exc:  # noqa: BLE001 - the asker gets the error (or its words); the run goes on
                    reply = ("reply", message[1], False, exc.with_traceback(None))
                send(reply)
    finally:
        if session.is_running():
            session.stop()
            session.wait(30)
        conn.close()
