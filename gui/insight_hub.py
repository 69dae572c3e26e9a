"""Where the window's "see inside" views get their answers: the live run when there is one (its Trainer
answers between two steps, in its own process; `app.insight`), else a model built in this process from the
canvas's document (with the weights of a reopened run or loaded weights), on a thread of its own so the
window never waits for it. Either way each answer arrives on the UI thread as `answered(record)`."""
from __future__ import annotations

import hashlib
import queue
import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.insight import InsightError
from gui.bridge import collect_garbage_on_the_ui_thread_while


class InsightHub(QObject):
    """Ask (`ask`) or keep asking while a run trains (`watch`); answers come as `answered(record)`.

    `monitor` is the window's `TrainingMonitor`: its current session (if any) answers; with none, a
    `LocalModel` of the canvas's document (rebuilt when the document or the weights change) does."""

    answered = Signal(object)
    busy_changed = Signal(bool)
    _local_answer = Signal(int, object)  # from the local model's thread: (generation, record)

    def __init__(self, monitor: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.monitor = monitor
        self.watched: dict[str, dict[str, Any]] = {}
        self._session: Any = None
        self._local: Any = None
        self._local_key: str | None = None
        self._jobs: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None
        self._alive = True
        # which model the views show; an answer from the local model about an older one (a run started, the
        # weights changed meanwhile) is dropped, never shown over the newer model's answer
        self.generation = 0
        self._local_answer.connect(self._from_local)

    # --- asking --------------------------------------------------------------------------------------
    def ask(self, kind: str, args: dict[str, Any] | None = None) -> None:
        """Answer `kind` about the model the window shows now: the current run's (training or not), or the
        canvas's document's when there is no run."""
        session = self.monitor.session
        if session is not None:
            session.ask_insight(kind, args)
        else:
            self._ask_locally(kind, dict(args or {}))

    def watch(self, kind: str, args: dict[str, Any] | None) -> None:
        """Keep `kind` answered while a run trains (this run and the next ones) and answer it now; `None`
        stops watching."""
        if args is None:
            self.watched.pop(kind, None)
        else:
            self.watched[kind] = dict(args)
        session = self.monitor.session
        if session is not None:
            session.watch_insight(kind, args)
        elif args is not None:
            self._ask_locally(kind, dict(args))

    def session_attached(self, session: Any) -> None:
        """A new run became the current one: it keeps the views' questions answered from its first step."""
        self.generation += 1
        self._session = session
        for kind, args in self.watched.items():
            session.watch_insight(kind, args)

    def refresh(self) -> None:
        """Answer every watched question again (the document, the weights or the run changed)."""
        for kind, args in list(self.watched.items()):
            self.ask(kind, args)

    def on_event(self, event: Any) -> None:
        """A session's event: the answers among them go out as `answered` (the current run's only)."""
        sender = self.sender()
        if _is_answer(event) and (sender is None or sender is self.monitor.session):
            self.answered.emit(event)

    # --- the model of a document without a run --------------------------------------------------------
    def _local_source(self) -> tuple[Any, Any, Any]:
        """(document, base_dir, weights) of the model the views show when no run is current."""
        window = self.monitor.window
        doc = self.monitor.editor.doc
        path = getattr(window, "path", None)
        base_dir = Path(path).parent if path is not None else None
        loaded = self.monitor.loaded_weights
        weights = loaded.arrays if loaded is not None else None
        reopened = self.monitor.reopened
        if reopened is not None and reopened.base_dir is not None:
            base_dir = reopened.base_dir
        return doc, base_dir, weights

    def _ask_locally(self, kind: str, args: dict[str, Any]) -> None:
        from app.training.session import load_training_modules

        load_training_modules()  # imports on the UI thread (PySide's import hook is not thread-safe)

        doc, base_dir, weights = self._local_source()
        key = _model_key(doc, base_dir, weights)
        self._jobs.put((self.generation, key, doc.copy(), base_dir, weights, kind, args))
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name="wiregrad-insight-local", daemon=True)
            self._worker.start()
            collect_garbage_on_the_ui_thread_while(self._worker.is_alive)
            self.busy_changed.emit(True)

    def _work(self) -> None:
        """The local model's thread: build it when the document or weights changed, answer, repeat until
        the queue is empty (a newer question of a kind replaces an older one not answered yet)."""
        from app.insight import LocalModel

        try:
            while self._alive:
                try:
                    jobs = [self._jobs.get(timeout=0.2)]
                except queue.Empty:
                    return
                while True:
                    try:
                        jobs.append(self._jobs.get_nowait())
                    except queue.Empty:
                        break
                latest: dict[str, tuple] = {}
                for job in jobs:
                    latest[job[5]] = job
                for generation, key, doc, base_dir, weights, kind, args in latest.values():
                    if key != self._local_key:
                        self._local, self._local_key = None, None
                        try:
                            self._local = LocalModel(doc, base_dir=base_dir, weights=weights)
                            self._local_key = key
                        except Exception as exc:  # noqa: BLE001 - the view says why it has no model
                            self._local_answer.emit(generation, InsightError(kind, _plain(exc), args))
                            continue
                    self._local_answer.emit(generation, self._local.answer(kind, args))
        finally:
            self.busy_changed.emit(False)

    def _from_local(self, generation: int, record: Any) -> None:
        if generation == self.generation and self.monitor.session is None:
            self.answered.emit(record)

    def forget_local_model(self) -> None:
        """The document or the weights changed: the next local answer rebuilds the model, and answers
        about the old one still on their way are dropped."""
        self.generation += 1
        self._local_key = None

    def shutdown(self) -> None:
        self._alive = False


def _is_answer(event: Any) -> bool:
    return isinstance(event, InsightError) or type(event).__module__.startswith("app.insight.")


def _model_key(doc: Any, base_dir: Any, weights: Any) -> str:
    """What the local model depends on: the document's graph and training setup, where relative files are,
    and which weights (by identity: loaded weights are replaced, never changed in place)."""
    from gui.training_monitor import model_signature

    ident = id(weights) if weights is not None else None
    return hashlib.sha1(f"{model_signature(doc)}|{base_dir}|{ident}".encode()).hexdigest()


def _plain(exc: Exception) -> str:
    """One line for a model that can't be built here (a graph that does not validate, a dataset that can't
    be read)."""
    text = " ".join(str(exc).split())
    return f"Can't build the model: {text}" if text else f"Can't build the model ({type(exc).__name__})"


__all__ = ["InsightHub"]
