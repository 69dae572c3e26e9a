"""The main window: palette, canvas and inspector around one Document, with the File/Edit/View menus,
recent files, autosave/recovery and the place (`add_panel`, `training_menu`) where training panels go."""
from __future__ import annotations

import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

from PySide6.QtCore import QLockFile, QSettings, QStandardPaths, Qt, QTimer
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QTabBar,
    QWidget,
)

from app.datasets import DatasetError
from app.document import Document, DocumentError, GraphInfo, load_document, save_document
from app.export import ExportError
from app.files import MAX_INFO_BYTES, read_bytes, write_text_atomic
from widgets.inspector import Inspector
from widgets.node_editor import NodeEditor
from widgets.palette import Palette
from widgets.shortcuts import show_shortcut_in_tooltip
from widgets.theme import ASSETS, icon

EXAMPLES = ASSETS / "examples"
DEFAULT_EXAMPLE = EXAMPLES / "mlp_digits.json"
MAX_RECENT = 8
AUTOSAVE_MS = 30_000
FILE_FILTER = "Wiregrad graphs (*.json);;All files (*)"
# Until a run starts the Monitor's plots are empty: it stays short and the canvas gets the height.
MONITOR_IDLE_H, MONITOR_TRAINING_FRACTION = 210, 0.42
TRAINING_MIN_ZOOM = 0.6
# File ▸ Export: kind -> (menu text, dialog title, file suffix, dialog filter)
CHECKED_EXPORTS = ("pytorch", "onnx")  # run beside the engine after writing (app/export/check.py)
EXPORTS = {
    "pytorch": ("&PyTorch script…", "Export a PyTorch training script", ".py", "Python scripts (*.py)"),
    "onnx": ("&ONNX…", "Export ONNX", ".onnx", "ONNX models (*.onnx)"),
    "safetensors": ("&Weights (safetensors)…", "Export the weights", ".safetensors",
                    "safetensors weights (*.safetensors)"),
}


def is_example(path: str | os.PathLike[str]) -> bool:
    """True for a file of the shipped examples folder."""
    try:
        return Path(path).resolve().parent == EXAMPLES.resolve()
    except OSError:
        return False


def example_name(path: Path) -> str:
    return path.stem.replace("_", " ")


def default_recovery_dir() -> Path:
    base = QStandardPaths.writableLocation(QStandardPaths.AppDataLocation) or str(Path.home() / ".wiregrad")
    return Path(base) / "recovery"


def write_export(kind: str, doc: Document, path: Path, weights: dict[str, Any] | None, *,
                 base_dir: Path | None = None, source_name: str | None = None,
                 weights_from: str | None = None) -> str:
    """Write one export; `weights` None means a freshly initialised model (the document's seed);
    `weights_from` says which weights they are ("weights loaded from w.safetensors"), else the last
    run's. Returns which weights went in, for the status bar."""
    from app.export import export_onnx, export_pytorch, save_weights
    from app.export.onnx_export import initial_state
    from app.training.data import dataset_input_shape

    which = "freshly initialised weights" if weights is None else \
        weights_from or "the trained weights of the last run"
    if kind == "onnx":
        from app.export.onnx_export import describe_onnx

        export_onnx(doc, path, weights=weights, base_dir=base_dir)
        return f"{which}: {describe_onnx(path)}"  # raw inputs or normalised ones, and the metadata
    if weights is None:
        weights = initial_state(doc, dataset_input_shape(doc, base_dir))
    if kind == "safetensors":
        save_weights(weights, path)
        return which
    with tempfile.TemporaryDirectory() as tmp:  # export_pytorch copies them next to the script
        export_pytorch(doc, path, weights=save_weights(weights, Path(tmp) / "weights.safetensors"),
                       base_dir=base_dir, source_name=source_name)
    from app.export.pytorch import bundled_files

    beside = [path.with_suffix(".safetensors").name, *bundled_files(doc.training["dataset"]["name"])]
    return f"{which} (in {' and '.join(beside)} beside it)"


class MainWindow(QMainWindow):
    """Wiregrad's window. Training panels are added with `add_panel` and `training_menu` (see below)."""

    def __init__(self, doc: Document | None = None, path: str | os.PathLike[str] | None = None, *,
                 settings: QSettings | None = None, recovery_dir: str | os.PathLike[str] | None = None,
                 example: str | None = None) -> None:
        """`example`: the name of the shipped example `doc` is an untitled copy of, if it is one."""
        super().__init__()
        self.settings = settings if settings is not None else QSettings("Wiregrad", "Wiregrad")
        self.recovery_dir = Path(recovery_dir) if recovery_dir is not None else default_recovery_dir()
        self.path: Path | None = Path(path) if path is not None else None
        self.example = example if path is None else None
        self.run_name: str | None = None  # the current training run's name, in the title
        self.reopened_run: str | None = None  # the run the open document was reopened from (Runs)
        self.reopened_graph: str | None = None  # the graph that run trained: what Save As offers
        self._recovered = False  # a restored document counts as modified until saved

        self.editor = NodeEditor(doc if doc is not None else Document(), self)
        self.setCentralWidget(self.editor)
        self.palette_widget = Palette()
        self.inspector = Inspector(self.editor, base_dir=lambda: self.path.parent if self.path else None)
        self.editor.scene.base_dir = lambda: self.path.parent if self.path else None
        self.palette_dock = self.add_panel(self.palette_widget, "Layers", Qt.LeftDockWidgetArea, "palette")
        self.inspector_dock = self.add_panel(self.inspector, "Inspector", Qt.RightDockWidgetArea, "inspector")
        self.resizeDocks([self.palette_dock, self.inspector_dock], [230, 330], Qt.Horizontal)
        self.palette_widget.add_requested.connect(self.editor.add_node_at_center)
        # the palette's Blocks group: the document's definitions, and blocks added by double-click
        self.palette_widget.set_document(self.editor.doc)
        self.editor.document_replaced.connect(self.palette_widget.set_document)
        self.palette_widget.block_add_requested.connect(self.editor.add_block)
        self.palette_widget.message.connect(self.editor.show_message)

        self._status = QLabel()
        self.statusBar().addPermanentWidget(self._status)
        self.editor.info_updated.connect(self._update_status)
        self.editor.message.connect(self._show_status_message)
        # a bound method, not a lambda: Qt drops it with the window (a lambda outlived it at teardown)
        self.editor.undo_stack.cleanChanged.connect(self._on_clean_changed)

        self._build_menus()
        self._build_toolbar()
        self._autosave = QTimer(self)
        self._autosave.setInterval(AUTOSAVE_MS)
        self._autosave.timeout.connect(self.autosave_now)
        self._autosave.start()
        self._update_title()
        if self.editor.info is not None:
            self._update_status(self.editor.info)
        from gui.training_monitor import TrainingMonitor

        self.training = TrainingMonitor(self)  # training panel, plots, doctor, graph view, runs
        from gui.see_inside import SeeInside

        self.see_inside = SeeInside(self, self.training)  # data, predictions, mistakes, summary, embedding
        from gui.learn import LearnViews

        self.learn = LearnViews(self, self.training)  # the Tensor lab (the Learn menu)
        self._idle_bottom_docks()
        self.training.panel.start_requested.connect(self.make_room_for_monitor)
        self.training.actions["start"].triggered.connect(self.make_room_for_monitor)

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        QTimer.singleShot(0, self._hide_stale_tab_bars)

    def _hide_stale_tab_bars(self) -> None:
        # Tabifying docks one by one (Monitor + graph, then + Runs) leaves Qt's tab bar of the
        # earlier group visible on top of the dock it used to serve, where a sliver of it peeks
        # out under the dock's title. A live dock tab bar sits beside its docks, never on one.
        # Likewise a bar whose docks are all hidden (the bottom group before the first run).
        docks = [d for d in self.findChildren(QDockWidget) if not d.isFloating()]
        shown = [d.geometry() for d in docks if d.isVisible()]
        hidden_titles = {d.windowTitle() for d in docks if d.isHidden()}
        for bar in self.findChildren(QTabBar, options=Qt.FindDirectChildrenOnly):
            titles = {bar.tabText(i) for i in range(bar.count())}
            on_a_dock = any(g.contains(bar.geometry()) for g in shown)
            if bar.isVisible() and (on_a_dock or titles <= hidden_titles):
                bar.hide()

    def _bottom_docks(self) -> list[QDockWidget]:
        t = self.training
        return [t.monitor_dock, t.graph_dock, t.runs_dock, *self.see_inside.docks.values(),
                *self.learn.docks.values()]

    def _idle_bottom_docks(self) -> None:
        """Before any run the Monitor's plots are empty, and squeezed short they look broken: the
        bottom shows the list of earlier runs, short, or nothing at all when there are none."""
        if self.training.runs.list.count() == 0:
            for dock in self._bottom_docks():
                dock.hide()
            return
        self.resizeDocks([self.training.monitor_dock], [MONITOR_IDLE_H], Qt.Vertical)
        self.training.runs_dock.raise_()

    def make_room_for_monitor(self) -> None:
        """Once a run starts, the bottom docks show and the Monitor's plots get a good share of the
        height; a graph that was all in view stays in view on the shorter canvas."""
        if not self.training.is_active():
            return
        self._make_room_below(self.training.monitor_dock, show_all=True)

    def show_inside_view(self, key: str) -> None:
        """Show one of the "see inside" views (data, predictions, mistakes, summary, embedding) or a Learn
        view (lab) with a good share of the height, as View ▸ Panels, Learn or `main.py --tab` do."""
        docks = {**self.see_inside.docks, **self.learn.docks}
        self._make_room_below(docks[key], show_all=False)

    def _make_room_below(self, dock: QDockWidget, show_all: bool) -> None:
        """Raise a bottom dock with a good share of the height (`show_all`: the whole bottom group shows);
        a graph that was all in view stays in view on the shorter canvas."""
        want = round(self.height() * MONITOR_TRAINING_FRACTION)
        hidden = all(d.isHidden() for d in self._bottom_docks())
        grows = hidden or dock.isHidden() or (not dock.isFloating() and dock.height() < want)
        ed = self.editor
        if grows and ed.view.visible_scene_rect().contains(ed.scene.nodes_rect()):
            # while training, the tints and sparklines matter more than reading every label, so
            # the graph may shrink a little below the readable zoom to stay whole
            # an untouched example's layout is the app's own: lay it out anew for the shorter canvas
            untouched_example = self.example is not None and not self.is_modified()
            ed.refit_while_resizing(TRAINING_MIN_ZOOM, arrange=untouched_example)
        if hidden and show_all:
            for d in self._bottom_docks():
                d.show()
        dock.show()
        dock.raise_()
        if not dock.isFloating() and dock.height() < want:
            self.resizeDocks([dock], [want], Qt.Vertical)
        QTimer.singleShot(0, self._hide_stale_tab_bars)

    # --- extension points for the training issue --------------------------------------------------
    def add_panel(self, widget: QWidget, title: str, area: Qt.DockWidgetArea = Qt.BottomDockWidgetArea,
                  name: str | None = None) -> QDockWidget:
        """Dock a panel (training monitor, plots, graph view...) and list it in View ▸ Panels."""
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock_{name or title}")
        dock.setWidget(widget)
        dock.setFeatures(QDockWidget.DockWidgetMovable | QDockWidget.DockWidgetClosable
                         | QDockWidget.DockWidgetFloatable)
        self.addDockWidget(area, dock)
        if hasattr(self, "panels_menu"):
            self.panels_menu.addAction(dock.toggleViewAction())
        return dock

    @property
    def doc(self) -> Document:
        return self.editor.doc

    # --- menus ----------------------------------------------------------------------------------------
    def _action(self, text: str, slot: Any, shortcut: Any = None, icon_name: str | None = None) -> QAction:
        a = QAction(text, self)
        if shortcut is not None:
            a.setShortcut(QKeySequence(shortcut))
        if icon_name:
            a.setIcon(icon(icon_name))
        a.triggered.connect(lambda _checked=False: slot())
        return a

    def _build_menus(self) -> None:
        ed = self.editor.actions
        self.file_actions = {
            "new": self._action("&New", self.new_document, QKeySequence.New, "new"),
            "open": self._action("&Open…", self.open_dialog, QKeySequence.Open, "open"),
            "save": self._action("&Save", self.save, QKeySequence.Save, "save"),
            "save_as": self._action("Save &As…", self.save_as, QKeySequence.SaveAs),
            "quit": self._action("&Quit", self.close, QKeySequence.Quit),
        }
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        for key in ("new", "open"):
            file_menu.addAction(self.file_actions[key])
        self.recent_menu = file_menu.addMenu("Open &Recent")
        self.examples_menu = file_menu.addMenu("&Examples")
        for path in sorted(EXAMPLES.glob("*.json")):
            a = self.examples_menu.addAction(example_name(path))
            a.setToolTip(str(path))
            a.triggered.connect(lambda _c=False, p=path: self.open_example(p))
        file_menu.addSeparator()
        file_menu.addAction(self.file_actions["save"])
        file_menu.addAction(self.file_actions["save_as"])
        self.export_menu = file_menu.addMenu("E&xport")
        self.export_actions: dict[str, QAction] = {}
        for kind, (text, *_rest) in EXPORTS.items():
            a = self.export_menu.addAction(text)
            a.triggered.connect(lambda _c=False, k=kind: self.export_to(k))
            self.export_actions[kind] = a
        file_menu.addSeparator()
        file_menu.addAction(self.file_actions["quit"])
        self._refresh_recent_menu()

        self.edit_menu = bar.addMenu("&Edit")
        for key in ("undo", "redo", None, "cut", "copy", "paste", "duplicate", "delete", None, "select_all",
                    "rename", None, "group", "ungroup", "open_block", "block_up", "make_unique"):
            if key is None:
                self.edit_menu.addSeparator()
            else:
                self.edit_menu.addAction(ed[key])

        view = bar.addMenu("&View")
        for key in ("fit", "zoom_in", "zoom_out", None, "layout", "snap", "minimap"):
            if key is None:
                view.addSeparator()
            else:
                view.addAction(ed[key])
        view.addSeparator()
        self.panels_menu = view.addMenu("&Panels")
        for dock in (self.palette_dock, self.inspector_dock):
            self.panels_menu.addAction(dock.toggleViewAction())

        # The training issue fills this menu (Train, Pause, Stop, ...) and docks its panels with add_panel.
        self.training_menu: QMenu = bar.addMenu("&Training")
        placeholder = self.training_menu.addAction(icon("train"), "Train (coming soon)")
        placeholder.setEnabled(False)
        self.training_placeholder = placeholder

        # every action's shortcut, read from the actions when the list opens (so training's are in it)
        self.help_menu = bar.addMenu("&Help")
        self.shortcuts_action = self._action("&Keyboard shortcuts", self.show_shortcuts, "F1")
        self.help_menu.addAction(self.shortcuts_action)

    def show_shortcuts(self) -> QDialog:
        from widgets.shortcuts import ShortcutsDialog

        dialog = ShortcutsDialog(self)
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.show()
        return dialog

    def _build_toolbar(self) -> None:
        tb = self.addToolBar("Main")
        tb.setObjectName("mainToolbar")
        tb.setMovable(False)
        tb.setToolButtonStyle(Qt.ToolButtonIconOnly)
        ed = self.editor.actions
        for a in (self.file_actions["new"], self.file_actions["open"], self.file_actions["save"], None,
                  ed["undo"], ed["redo"], None, ed["cut"], ed["copy"], ed["paste"], ed["delete"], None,
                  ed["zoom_out"], ed["zoom_in"], ed["fit"], ed["layout"], ed["snap"], ed["minimap"]):
            if a is None:
                tb.addSeparator()
            else:
                tb.addAction(a)
                show_shortcut_in_tooltip(a)  # "Save (Ctrl+S)": a button teaches its key
        self.toolbar = tb

    # --- title and status -------------------------------------------------------------------------------
    def is_modified(self) -> bool:
        return self._recovered or not self.editor.undo_stack.isClean()

    def _on_clean_changed(self, _clean: bool) -> None:
        self._update_title()

    def _show_status_message(self, text: str) -> None:
        self.statusBar().showMessage(text, 6000)

    def document_name(self) -> str:
        """What the open document is called: its file, the example or the run it came from, else Untitled."""
        if self.path is not None:
            return self.path.name
        if self.example:
            return f"{self.example} (example)"
        return f"{self.reopened_run} (run)" if self.reopened_run else "Untitled"

    def set_run_name(self, name: str | None, *, reopened: bool = False, graph: str | None = None) -> None:
        """Name the current run in the title; `reopened`: the document is that run's graph (named
        `graph`: its file's stem or example, when the run recorded it)."""
        self.run_name = name
        if reopened:
            self.reopened_run = name
            self.reopened_graph = graph
        self._update_title()

    def _update_title(self) -> None:
        run = getattr(self, "run_name", None)
        run = f" · run {run}" if run and run != getattr(self, "reopened_run", None) else ""
        self.setWindowTitle(f"{self.document_name()}[*]{run} — Wiregrad")
        self.setWindowModified(self.is_modified())

    def _update_status(self, info: GraphInfo) -> None:
        doc = self.doc
        statuses = self.editor.scene.statuses.values()
        errors = [p for p in statuses if p.severity == "error"]
        warnings = [p for p in statuses if p.severity == "warning"]
        missing = [w for w, t in (("Input", "Input"), ("Output", "Output"))
                   if not any(n.type == t for n in doc.nodes.values())]
        shown = self.editor.graph  # inside a block: its definition, counted as the canvas shows it
        where = f"block {self.editor.levels[-1].block}: " if self.editor.levels else ""
        parts = [f"{where}{len(shown.nodes)} nodes", f"{len(shown.edges)} wires",
                 f"{info.total_params:,} parameters" + (" in the whole model" if where else "")]
        if errors:
            parts.append(f"⚠ {len(errors)} problem{'s' if len(errors) != 1 else ''}")
        if warnings:
            parts.append(f"△ {len(warnings)} warning{'s' if len(warnings) != 1 else ''}")
        from widgets.training_panel import settings_problems

        settings = [p for p in settings_problems(self.editor.scene.problems) if p.severity == "error"]
        if settings:  # Start would refuse them: said here too, not only once Start is pressed
            n = len(settings)
            parts.append(f"✗ {n} problem{'s' if n != 1 else ''} in training settings")
            self._status.setToolTip("\n".join(p.message for p in settings))
        else:
            self._status.setToolTip("")
        if not (errors or warnings or settings):
            if missing and doc.nodes:
                parts.append("needs " + " and ".join(f"an {m} node" for m in missing))
            else:
                parts.append("✓ shapes check out" if doc.nodes else "empty graph")
        self._status.setText("   ·   ".join(parts))

    # --- files ----------------------------------------------------------------------------------------
    def ask_save_changes(self) -> str:
        """'save', 'discard' or 'cancel' (tests replace this)."""
        name = self.document_name()
        answer = QMessageBox.question(
            self, "Unsaved changes", f"Save the changes to {name} first?",
            QMessageBox.Save | QMessageBox.Discard | QMessageBox.Cancel, QMessageBox.Save)
        return {QMessageBox.Save: "save", QMessageBox.Discard: "discard"}.get(answer, "cancel")

    def show_error(self, title: str, text: str) -> None:
        """Tell the user something failed (tests replace this to read the message)."""
        QMessageBox.critical(self, title, text)

    def show_report(self, title: str, text: str) -> None:
        """Tell the user what an action did, e.g. which weights loaded (tests replace this)."""
        box = QMessageBox(QMessageBox.Information, title, text, QMessageBox.Ok, self)
        box.setStyleSheet("QLabel#qt_msgbox_label { min-width: 520px; }")  # report lines read whole
        box.exec()

    def maybe_save(self) -> bool:
        """True when it is fine to drop the current document."""
        if not self.is_modified():
            return True
        answer = self.ask_save_changes()
        if answer == "save":
            return self.save()
        return answer == "discard"

    def _set_document(self, doc: Document, path: Path | None, example: str | None = None) -> None:
        self.path = path
        self.example = example
        self.reopened_run = None
        self.reopened_graph = None
        self.run_name = None
        self._recovered = False
        self.editor.set_document(doc)
        self._update_title()
        self.show_first_view()

    def show_first_view(self) -> None:
        """The view of a document just opened: readable, never a row of specks or a pile. A shipped
        example that doesn't fit is laid out to fit; a graph whose nodes share a spot (written
        without positions) is laid out; otherwise a user's graph keeps its layout and is shown
        from its start, with a hint how to see the rest."""
        ed = self.editor
        if self.example is not None:
            ed.arrange_to_fit()
        elif ed.lay_out_piled_nodes():
            ed.show_message("Some layers had no position of their own, so the graph was laid out")
        elif not ed.show_readable():
            ed.show_message("The graph is larger than the window: pan with the middle button or "
                            "Space+drag, F shows all of it, Ctrl+L lays it out to fit")

    def new_document(self) -> None:
        if self.maybe_save():
            self._set_document(Document(), None)

    def open_dialog(self) -> None:
        if not self.maybe_save():
            return
        start = str(self.path.parent) if self.path else str(EXAMPLES)
        path, _ = QFileDialog.getOpenFileName(self, "Open graph", start, FILE_FILTER)
        if path:
            self.open_file(path, ask=False)

    def open_file(self, path: str | os.PathLike[str], *, ask: bool = True) -> bool:
        """Load a document; on failure show why and keep the current document untouched. A shipped
        example opens as an untitled copy, like from File ▸ Examples."""
        if is_example(path):
            return self.open_example(Path(path), ask=ask)
        if ask and not self.maybe_save():
            return False
        try:
            doc = load_document(path)
        except DocumentError as exc:
            # the message names the file already when the file itself was the trouble: once is enough
            text = str(exc) if os.fspath(path) in str(exc) else f"{os.fspath(path)}:\n{exc}"
            self.show_error("Can't open the file", text)
            return False
        self._set_document(doc, Path(path))
        self._add_recent(Path(path))
        return True

    def open_example(self, path: Path, *, ask: bool = True) -> bool:
        """Examples open as untitled copies, so Save never overwrites the shipped file."""
        if ask and not self.maybe_save():
            return False
        try:
            doc = load_document(path)
        except DocumentError as exc:
            self.show_error("Can't open the example", f"{path.name}:\n{exc}")
            return False
        self._set_document(doc, None, example_name(path))
        return True

    def save(self) -> bool:
        if self.path is None:
            return self.save_as()
        return self._write(self.path)

    def save_as(self, path: str | os.PathLike[str] | None = None) -> bool:
        if path is None:
            stem = (self.example or self.reopened_graph or "untitled").replace(" ", "_")
            start = str(self.path) if self.path else str(Path.home() / f"{stem}.json")
            path, _ = QFileDialog.getSaveFileName(self, "Save graph", start, FILE_FILTER)
            if not path:
                return False
        path = Path(path)
        if path.suffix == "":
            path = path.with_suffix(".json")
        if not self._write(path):
            return False
        self.path = path
        self.example = None
        self._add_recent(path)
        self._update_title()
        return True

    def _write(self, path: Path) -> bool:
        zoom, centre = self.editor.top_view()  # the top level's, also while a block is open
        try:
            self.doc.set_view(zoom=round(zoom, 4), center=[round(centre.x(), 1), round(centre.y(), 1)])
            save_document(self.doc, path)
        except DocumentError as exc:
            self.show_error("Can't save the file", str(exc))
            return False
        self._recovered = False
        self.editor.undo_stack.setClean()
        self._update_title()
        self.statusBar().showMessage(f"Saved {path}", 4000)
        self._remove_recovery()
        return True

    def _add_recent(self, path: Path) -> None:
        recent = [p for p in self.recent_files() if p != str(path.resolve())]
        recent.insert(0, str(path.resolve()))
        self.settings.setValue("recent_files", json.dumps(recent[:MAX_RECENT]))
        self._refresh_recent_menu()

    def recent_files(self) -> list[str]:
        try:
            value = json.loads(self.settings.value("recent_files", "[]"))
        except (TypeError, ValueError):
            return []
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    def _refresh_recent_menu(self) -> None:
        self.recent_menu.clear()
        recent = self.recent_files()
        for p in recent:
            a = self.recent_menu.addAction(Path(p).name)
            a.setToolTip(p)
            a.triggered.connect(lambda _c=False, p=p: self.open_recent(p))
        self.recent_menu.setEnabled(bool(recent))

    def open_recent(self, path: str) -> bool:
        """Open a recent file; one that is gone from disk leaves the list (after saying so)."""
        if self.open_file(path):
            return True
        if not Path(path).exists():
            self.settings.setValue("recent_files", json.dumps([p for p in self.recent_files() if p != path]))
            self._refresh_recent_menu()
        return False

    # --- export ------------------------------------------------------------------------------------------
    def export_to(self, kind: str, path: str | os.PathLike[str] | None = None) -> bool:
        """File ▸ Export: a PyTorch training script, ONNX, or the weights as .safetensors. The
        weights are the current run's (paused, stopped or finished) when it trained this graph,
        else a freshly initialised model's. A failure (a node ONNX can't express...) is shown
        naming the node."""
        _text, title, suffix, file_filter = EXPORTS[kind]
        if path is None:
            stem = self.path.stem if self.path else (self.example or "model").replace(" ", "_")
            folder = self.path.parent if self.path else Path.home()
            name = {"pytorch": f"train_{stem}"}.get(kind, stem)
            path, _ = QFileDialog.getSaveFileName(self, title, str(folder / f"{name}{suffix}"), file_filter)
            if not path:
                return False
        path = Path(path)
        if path.suffix == "":
            path = path.with_suffix(suffix)
        QApplication.setOverrideCursor(Qt.WaitCursor)
        try:
            weights = self.run_weights()
            loaded, session = self.training.loaded_weights, self.training.session
            # run_weights gave the loaded ones (a file's, a reopened run's) when no run trained this graph
            from_loaded = weights is not None and loaded is not None and (
                session is None or session.trainer is None)
            which = write_export(kind, self.doc, path, weights,
                                 base_dir=self.path.parent if self.path else None,
                                 source_name=self.path.stem if self.path else None,
                                 weights_from=loaded.describe() if from_loaded else None)
        except (ExportError, DocumentError, DatasetError, OSError, ValueError) as exc:
            QApplication.restoreOverrideCursor()
            self.show_error("Can't export", f"{path.name}:\n{exc}")
            return False
        QApplication.restoreOverrideCursor()
        if kind not in CHECKED_EXPORTS:
            self.statusBar().showMessage(f"Exported {path.name} with {which}", 8000)  # the name: it must fit
            return True
        # what matters first: a long `which` may run past the status bar's end
        self.statusBar().showMessage(f"Checking {path.name} against the engine… (written with {which})")
        self._check_export(kind, path, weights, which)
        return True

    def _check_export(self, kind: str, path: Path, weights: dict[str, Any] | None, which: str) -> None:
        """Run the export beside the engine on validation samples (app/export/check.py) on a thread:
        the script's check starts a Python process, seconds the window must not freeze for. The verdict
        comes back to `_export_checked`."""
        from app.export.check import check_export
        from gui.training_monitor import _CheckRunner

        doc, base_dir = self.doc.copy(), self.path.parent if self.path else None  # edits may follow
        runner = _CheckRunner()  # no parent: it outlives a closed window until its thread is done
        runner.done.connect(self._export_checked)
        runner.error.connect(self._export_checked)
        self._export_checks = [r for r in getattr(self, "_export_checks", []) if r.thread.is_alive()]
        runner.thread = runner.run(json.dumps([str(path), which]),
                                   lambda: check_export(kind, path, doc, weights, base_dir=base_dir))
        self._export_checks.append(runner)

    def _export_checked(self, what: str, result: Any) -> None:
        """Say what the check found: "Exported" only when the export matches the engine; a warning
        when it disagrees or could not be run. The numbers are behind Details."""
        path, which = json.loads(what)
        name = Path(path).name
        warn, detail = QMessageBox.Warning, None
        if isinstance(result, str):  # the check itself failed (an exception's text)
            status, title, icon = f"{name} was not checked: {result}", "Export not checked", warn
            text = f"{name} was written with {which}, but the check could not run:\n{result}"
        elif result.ok:
            status = (f"Exported {name} (checked: largest difference {result.max_abs_diff:.2g} on "
                      f"{result.n_samples} samples) with {which}")
            title, icon = "Export checked", QMessageBox.Information
            verdict = result.verdict.replace("checked: matches", "checked: it matches", 1)
            text, detail = f"Exported {name} with {which}.\n\n{verdict[:1].upper()}{verdict[1:]}.", \
                result.details()
        elif result.checked:
            status, title, icon, detail = result.message, "Export does not match the engine", warn, \
                result.details()
            text = (f"{name} was written, but it does not compute what the engine computes: "
                    f"{result.verdict.removeprefix('check failed: ')}.\n\nDon't rely on it: the exporter has "
                    "a bug (please report it) or the file was changed. Details has the numbers.")
        else:
            status, title, icon, detail = result.message, "Export not checked", warn, result.details()
            text = f"{name} was written with {which}, but {result.verdict}."
        self.statusBar().showMessage(status, 15000)
        box = QMessageBox(icon, title, text, QMessageBox.Ok, self)
        if detail:
            box.setDetailedText(detail)
        box.setStyleSheet("QLabel#qt_msgbox_label { min-width: 520px; } "  # Details: every line whole
                          "QTextEdit { min-width: 640px; min-height: 150px; }")
        box.setWindowModality(Qt.WindowModality.WindowModal)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.export_check_box = box  # the open box (tests read it)
        box.open()

    def run_weights(self) -> dict[str, Any] | None:
        """The weights of the last run, as arrays, if it trained this very graph; else None. While
        a run is training, ExportError: its weights change under the reader's feet."""
        from app.export.weights import state_dict_arrays
        from gui.training_monitor import model_signature

        monitor = self.training
        session = monitor.session
        if session is None or session.trainer is None:
            return self._loaded_weights()
        if monitor.state in ("building", "running"):
            raise ExportError("a run is training: pause or stop it first, so the export takes one "
                              "consistent set of weights")
        if model_signature(session.doc) != model_signature(self.doc):
            return None  # the graph changed since: those weights belong to another model
        return state_dict_arrays(session.trainer.model.state_dict())

    def _loaded_weights(self) -> dict[str, Any] | None:
        """Weights loaded into the open graph (Training ▸ Load weights, or a reopened run's), over freshly
        initialised ones for any tensor they don't cover; None when there are none."""
        loaded = self.training.loaded_weights
        if loaded is None:
            return None
        from app.export.onnx_export import initial_state
        from app.training.checkpoint import match_weights
        from app.training.data import dataset_input_shape

        base_dir = self.path.parent if self.path else None
        state = initial_state(self.doc, dataset_input_shape(self.doc, base_dir))
        state.update(match_weights(state, loaded.arrays, loaded.source).loaded)
        return state

    # --- autosave and recovery ---------------------------------------------------------------------------
    # Each window autosaves to its own recovery-<pid>-<token>.json (+ .info.json) and holds
    # recovery-<...>.lock (a QLockFile: pid, host, app) while it does, so two running instances sharing
    # the folder never offer, or delete, each other's live autosave: only files whose owner is gone
    # (a crash, kill -9) are offered, and their leftover temp files are cleaned up.
    @property
    def recovery_path(self) -> Path:
        if not hasattr(self, "_recovery_id"):
            self._recovery_id = f"{os.getpid()}-{secrets.token_hex(4)}"
            self._recovery_lock: QLockFile | None = None
        return self.recovery_dir / f"recovery-{self._recovery_id}.json"

    @staticmethod
    def _recovery_parts(doc_path: Path) -> tuple[Path, Path]:
        """The info file and the lock file that go with an autosaved document."""
        stem = doc_path.name.removesuffix(".json")
        return doc_path.with_name(f"{stem}.info.json"), doc_path.with_name(f"{stem}.lock")

    def autosave_now(self) -> bool:
        """Write the document to this window's recovery file if it has unsaved changes. The info file
        (which path it belongs to) and the document are each written atomically, info first, so a
        crash at any moment leaves readable files."""
        if not self.is_modified():
            return False
        doc_path = self.recovery_path
        info_path, lock_path = self._recovery_parts(doc_path)
        try:
            self.recovery_dir.mkdir(parents=True, exist_ok=True)
            if self._recovery_lock is None:
                lock = QLockFile(str(lock_path))
                lock.setStaleLockTime(0)  # alive is alive, however long the window stays open
                if not lock.tryLock(0):
                    raise OSError(f"can't lock {lock_path}")
                self._recovery_lock = lock
            write_text_atomic(info_path, json.dumps({"path": str(self.path) if self.path else None,
                                                     "pid": os.getpid()}))
            save_document(self.doc, doc_path)
        except (OSError, DocumentError) as exc:
            self.statusBar().showMessage(f"Autosave failed: {exc}", 6000)
            return False
        return True

    def _remove_recovery(self) -> None:
        """This window's autosave is no longer needed (saved, or closed cleanly)."""
        self._remove_recovery_files(self.recovery_path)
        if self._recovery_lock is not None:
            self._recovery_lock.unlock()  # removes the lock file
            self._recovery_lock = None

    @classmethod
    def _remove_recovery_files(cls, doc_path: Path) -> None:
        for path in (doc_path, cls._recovery_parts(doc_path)[0]):
            try:
                path.unlink()
            except OSError:
                pass

    def _orphaned_recoveries(self) -> list[tuple[Path, QLockFile]]:
        """Autosaves whose owner is gone (its lock is stale or missing), newest first, each with its
        lock now held by this window. Removes the leftover temp files of gone owners on the way."""
        try:
            names = sorted(os.listdir(self.recovery_dir))
        except OSError:
            return []
        own = self.recovery_path.name
        found: list[tuple[float, Path, QLockFile]] = []
        gone: set[str] = set()
        for name in names:
            if not (name.startswith("recovery") and name.endswith(".json")) or name.endswith(".info.json") \
                    or name == own:
                continue
            doc_path = self.recovery_dir / name
            lock = QLockFile(str(self._recovery_parts(doc_path)[1]))
            lock.setStaleLockTime(0)
            if not lock.tryLock(0):
                continue  # a running instance's live autosave: not ours to offer or delete
            gone.add(name.removesuffix(".json"))
            try:
                found.append((doc_path.stat().st_mtime, doc_path, lock))
            except OSError:
                lock.unlock()
        for name in names:  # temp files of atomic writes a killed owner never finished (a few MB each)
            if not (name.startswith(".recovery") and name.endswith(".tmp")):
                continue
            stem = name[1:].split(".json", 1)[0].removesuffix(".info")
            if stem not in gone and stem != own.removesuffix(".json"):
                probe = QLockFile(str(self.recovery_dir / f"{stem}.lock"))
                probe.setStaleLockTime(0)
                if probe.tryLock(0):  # no live owner (its lock was stale or never made)
                    probe.unlock()
                    gone.add(stem)
            if stem in gone:
                try:
                    (self.recovery_dir / name).unlink()
                except OSError:
                    pass
        found.sort(key=lambda item: item[0], reverse=True)
        return [(doc_path, lock) for _mtime, doc_path, lock in found]

    def ask_restore(self) -> bool:
        answer = QMessageBox.question(
            self, "Restore unsaved work?",
            "Wiregrad did not close cleanly last time. Restore the unsaved graph it kept?",
            QMessageBox.Yes | QMessageBox.No, QMessageBox.Yes)
        return answer == QMessageBox.Yes

    def offer_recovery(self) -> bool:
        """After a crash: offer the newest autosave whose owner is gone. Returns True if it was restored.
        A readable autosave is only deleted once the user declines it or this window has saved it as
        its own; a missing or damaged info file only loses which file the graph came from."""
        orphans = self._orphaned_recoveries()
        try:
            if not orphans:
                return False
            doc_path = orphans[0][0]
            info_path = self._recovery_parts(doc_path)[0]
            if not self.ask_restore():
                self._remove_recovery_files(doc_path)
                return False
            try:
                doc = load_document(doc_path)
            except DocumentError as exc:
                self.show_error("Can't restore", f"The recovery file is damaged: {exc}")
                self._remove_recovery_files(doc_path)
                return False
            try:
                info = json.loads(read_bytes(info_path, MAX_INFO_BYTES).decode("utf-8"))
            except (OSError, ValueError):
                info = None
            path = info.get("path") if isinstance(info, dict) else None
            self._set_document(doc, Path(path) if isinstance(path, str) else None)
            self._recovered = True
            self._update_title()
            if self.autosave_now():  # now kept as this window's own autosave: the old copy can go
                self._remove_recovery_files(doc_path)
            return True
        finally:
            for _doc_path, lock in orphans:
                lock.unlock()

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self.maybe_save():
            event.ignore()
            return
        self._autosave.stop()
        self.training.shutdown()  # stop the worker thread before the widgets go
        self.see_inside.shutdown()
        self._remove_recovery()
        self.editor.scene.close()
        event.accept()
