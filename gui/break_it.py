"""Break it: the Training panel's classic bug (`app.training.bugs`) run beside the correct run. The monitor
trains the canvas's graph as it is, then again with `training.inject_bug` set, on the same seed, one after
the other (each a normal run of the window: live plots, doctor, Runs); when both have ended, Runs ticks the
two so the plots overlay them, and the panel shows how they ended with the doctor's explanation and the
study card of that bug."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer

from app.training import read_metrics
from app.training.bugs import BUGS
from app.training.doctor import DEFAULT_POLICY, compare_runs
from app.training.runs import read_run
from app.training.session import Finished, StateChanged
from widgets.training_panel import BreakItReport

REPORT_WIDTH = 380  # the explanation beside the plots, in pixels


class BreakIt(QObject):
    """Drives the pair of runs for `TrainingMonitor` (see the module's docstring). `runs` are the two run
    folders of the last pair (correct first); `active` while a pair trains."""

    def __init__(self, monitor: Any) -> None:
        super().__init__(monitor)
        self.monitor = monitor
        self.bug: str | None = None
        self.epochs = 1
        self.runs: list[Path] = []
        self._sessions: list[Any] = []
        self._ended_by_us: set[int] = set()  # the runs this pair stopped (paused on a NaN): the pair goes on
        self.report = BreakItReport()  # beside the plots that overlay the pair
        monitor.monitor_widget.addWidget(self.report)
        monitor.monitor_widget.setStretchFactor(monitor.monitor_widget.indexOf(self.report), 1)
        self.report.closed.connect(self._report_closed)
        self._sizes: list[int] | None = None  # the Monitor's columns before the explanation took its place
        monitor.panel.break_it_requested.connect(self.start)

    @property
    def active(self) -> bool:
        return self.bug is not None

    def start(self, bug_name: str, epochs: int) -> bool:
        """Train the correct run, then the run with `bug_name`, `epochs` epochs each. False when refused (a
        run is going on, an unknown bug, the graph can't train: the monitor has said why)."""
        m = self.monitor
        if self.active or m.is_active():
            m.status("Break it: stop the run in progress first", 6000)
            return False
        if bug_name not in BUGS:
            return False
        self.bug, self.epochs, self.runs, self._sessions = bug_name, max(1, int(epochs)), [], []
        self.report.close_report()
        return self._next()

    def _next(self) -> bool:
        """Start the pair's next run: the correct one first, then the broken one."""
        m = self.monitor
        broken = len(self.runs) == 1
        doc = m.editor.doc.copy()
        doc.training["inject_bug"] = self.bug if broken else None
        label = BUGS[self.bug].title if broken else "correct"
        session = m.start(epochs=self.epochs, doc=doc, label=label)
        if session is None:  # refused: the monitor has shown why
            self._end(None)
            return False
        # the pair runs to its end: the doctor warns but pauses neither run (a NaN still ends the broken one)
        session.set_doctor_policy(dict.fromkeys(DEFAULT_POLICY, "warn"))
        session.events.connect(lambda event, s=session: self._on_event(s, event))
        self.runs.append(Path(session.run_dir))
        self._sessions.append(session)
        make_room = getattr(m.window, "make_room_for_monitor", None)
        if make_room is not None:
            make_room()  # as Start does: the Monitor's plots show while the pair trains
        what = f"the run with “{label}”" if broken else "the correct run"
        m.panel.show_break_it(f"Break it {len(self.runs)}/2: training {what} ({self.epochs} epochs, seed "
                              f"{doc.training['seed']})…")
        return True

    def _on_event(self, session: Any, event: Any) -> None:
        if session not in self._sessions or not self.active:
            return
        if isinstance(event, StateChanged) and event.state == "paused":
            # a NaN pauses a window's run; here the bug has shown itself: the run ends there
            self._ended_by_us.add(id(session))
            session.stop()
        elif isinstance(event, Finished):
            summary = session.summary
            status = getattr(summary, "status", None) or session.state
            if status == "failed" or (status == "stopped" and id(session) not in self._ended_by_us):
                self._end(f"Break it stopped: the {'broken' if len(self.runs) == 2 else 'correct'} run "
                          f"{'failed' if status == 'failed' else 'was stopped'}")
                return
            QTimer.singleShot(0, self._next if len(self.runs) == 1 else self._compare)

    def _compare(self) -> None:
        """Both runs ended: overlay them in the plots and say how each ended, with the bug explained."""
        m = self.monitor
        m.runs.refresh()  # the broken run's live curves stay: its gradient norms are often the symptom
        m.runs.set_checked([str(p) for p in self.runs])
        m.monitor_dock.raise_()
        records = [read_run(p) for p in self.runs]
        bug = self.bug
        lines = [f"{'Correct run' if i == 0 else BUGS[bug].title}: {r.summary or r.status}"
                 for i, r in enumerate(records) if r is not None]
        try:
            correct, broken = (read_metrics(p / "metrics.jsonl") for p in self.runs)
        except (OSError, ValueError):
            correct = broken = []
        self.report.show_report(bug, compare_runs(bug, broken, correct))
        # the overlay and the explanation take the Monitor; the predictions column folds away until the
        # explanation is closed (its handle drags it back meanwhile)
        split = m.monitor_widget
        self._sizes = split.sizes()
        total = sum(self._sizes)
        split.setSizes([total - REPORT_WIDTH, *(0 for _ in self._sizes[1:-1]), REPORT_WIDTH])
        self._end("Both runs ended: the plots overlay them, the doctor explains beside them.\n"
                  + "\n".join(lines))

    def _report_closed(self) -> None:
        split = self.monitor.monitor_widget
        if self._sizes is not None:
            sizes, self._sizes = self._sizes, None
            split.setSizes([*sizes[:-1], 0])

    def _end(self, text: str | None) -> None:
        self.bug = None
        self._sessions = []
        self._ended_by_us.clear()
        self.monitor.panel.show_break_it(text)
