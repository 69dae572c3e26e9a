"""The window's "see inside" views, docked beside the Monitor: the Data as it reaches the Input node, the
Predictions for one sample with each layer's output, the Mistakes on the validation set, the model Summary
and an Embedding of one layer's outputs. They show the current run's model (live while it trains, as it
stopped or ended, or reopened from Runs) or, with no run, the canvas's graph as it would start.

Answers about the model come from `InsightHub` (`gui/insight_hub.py`); a view asks only while it is shown,
so closed views cost the run nothing."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QDockWidget, QSplitter

from app.insight import InsightError, model_caption
from app.training.data import load_training_dataset
from gui.bridge import collect_garbage_on_the_ui_thread_while
from gui.insight_hub import InsightHub

MODEL_EDIT_DEBOUNCE_MS = 600  # canvas edits settle this long before the views ask the edited graph again


_VIEW_OF = {"SampleInsight": "predictions", "ValidationReport": "mistakes", "Embedding": "embedding"}


class SeeInside(QObject):
    """Builds the docks and routes: view requests -> hub, hub answers -> views, picks between views."""

    summary_ready = Signal(object, int)  # summary (or an error text), the request it answers

    def __init__(self, window: Any, monitor: Any) -> None:
        super().__init__(window)
        from widgets.confusion_matrix import ConfusionPanel
        from widgets.data_preview import DataPreviewView
        from widgets.embedding import EmbeddingView
        from widgets.layer_outputs import LayerOutputView
        from widgets.misclassified import MisclassifiedGallery
        from widgets.model_summary import ModelSummaryView
        from widgets.predictions import PredictionsView

        self.window = window
        self.monitor = monitor
        self.editor = window.editor
        self.hub = InsightHub(monitor, self)
        self.data = DataPreviewView()
        self.predictions = PredictionsView()
        self.layers = LayerOutputView()
        self.mistakes = ConfusionPanel()
        self.gallery = MisclassifiedGallery()
        self.summary = ModelSummaryView()
        self.embedding = EmbeddingView()
        self.data.thread_guard = collect_garbage_on_the_ui_thread_while
        self.errors: dict[str, str] = {}  # view key -> why it has no answer (cleared by the next answer)
        self.answers: dict[str, int] = {}  # view key -> answers (or errors) it got so far
        self.last_sample: Any = None  # the newest SampleInsight (its layers feed the layer view)
        self.layer_node: str | None = None  # the node whose output the layer view shows
        self._summary_request = 0
        self._summary_batch: int | None = None  # the batch size the user chose (None: the document's)

        pred = QSplitter(Qt.Horizontal)
        pred.addWidget(self.predictions)
        pred.addWidget(self.layers)
        pred.setStretchFactor(0, 3)
        pred.setStretchFactor(1, 2)
        wrong = QSplitter(Qt.Horizontal)
        wrong.addWidget(self.mistakes)
        wrong.addWidget(self.gallery)
        wrong.setStretchFactor(0, 5)
        wrong.setStretchFactor(1, 4)
        wrong.setSizes([720, 580])  # the matrix and its table side by side, the gallery beside them
        w = window
        self.docks: dict[str, QDockWidget] = {
            "data": w.add_panel(self.data, "Data", Qt.BottomDockWidgetArea, "data"),
            "predictions": w.add_panel(pred, "Predictions", Qt.BottomDockWidgetArea, "predictions"),
            "mistakes": w.add_panel(wrong, "Mistakes", Qt.BottomDockWidgetArea, "mistakes"),
            "summary": w.add_panel(self.summary, "Summary", Qt.BottomDockWidgetArea, "summary"),
            "embedding": w.add_panel(self.embedding, "Embedding", Qt.BottomDockWidgetArea, "embedding"),
        }
        for dock in self.docks.values():
            w.tabifyDockWidget(monitor.monitor_dock, dock)
        monitor.monitor_dock.raise_()

        # what each view asks while it is shown
        self._wants: dict[str, tuple[str, dict[str, Any]]] = {
            "predictions": ("sample", {"split": "val", "index": 0}),
            "mistakes": ("validation", {}),
            "embedding": ("embedding", {}),
        }
        for key, dock in self.docks.items():
            dock.visibilityChanged.connect(lambda shown, k=key: self._shown(k, shown))

        self.hub.answered.connect(self._answered)
        monitor.session_attached.connect(self._session_attached)
        monitor.model_changed.connect(self._model_changed)
        self.editor.document_replaced.connect(lambda _doc: self._model_changed())
        self.editor.selection_changed.connect(self._selection_changed)
        self._edits = QTimer(self)
        self._edits.setSingleShot(True)
        self._edits.setInterval(MODEL_EDIT_DEBOUNCE_MS)
        self._edits.timeout.connect(self._graph_edited)
        self._unsubscribe = None
        self._watch_document()
        self.editor.document_replaced.connect(lambda _doc: self._watch_document())

        self.predictions.sample_requested.connect(self._sample_requested)
        self.data.sample_chosen.connect(self.open_sample)
        self.gallery.sample_chosen.connect(self.open_sample)
        self.embedding.sample_chosen.connect(self.open_sample)
        self.embedding.layer_chosen.connect(lambda nid: self._want("embedding", {"node": nid}))
        self.mistakes.cell_clicked.connect(self.gallery.show_cell)
        self.gallery.refresh_requested.connect(lambda: self.hub.ask(*self._wants["mistakes"]))
        monitor.confusion.cell_clicked.connect(self._monitor_cell_clicked)
        self.summary.node_selected.connect(monitor.focus_node)
        self.summary.batch_size_changed.connect(self._summary_batch_changed)
        self.summary_ready.connect(self._summary_done)
        self.data.loaded.connect(self._data_loaded)
        self._model_changed()

    # --- which views are shown ---------------------------------------------------------------------
    def is_shown(self, key: str) -> bool:
        dock = self.docks[key]
        return dock.isVisible() and not dock.visibleRegion().isEmpty()

    def show(self, key: str) -> None:
        """Show and raise a view's dock (View ▸ Panels, `main.py --tab`)."""
        dock = self.docks[key]
        dock.show()
        dock.raise_()

    def refresh(self, key: str) -> None:
        """Ask a view's question again (the Summary and Data views: compute them again)."""
        if key == "summary":
            self._refresh_summary()
        elif key == "data":
            self.data.reload()
        else:
            self.hub.ask(*self._wants[key])

    def _shown(self, key: str, shown: bool) -> None:
        if key == "summary" and shown:
            self._refresh_summary()
        if key in ("data", "mistakes") and shown:
            self._refresh_data()
        if key not in self._wants:
            return
        kind, args = self._wants[key]
        self.hub.watch(kind, args if shown else None)

    def _want(self, key: str, args: dict[str, Any]) -> None:
        kind, _ = self._wants[key]
        self._wants[key] = (kind, dict(args))
        if self.docks[key].isVisible():
            self.hub.watch(kind, args)

    # --- the model changed ---------------------------------------------------------------------------
    def _watch_document(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._unsubscribe = self.editor.doc.subscribe(lambda _e: self._edits.start())

    def _graph_edited(self) -> None:
        """The canvas changed: with no run current, the views show the edited graph (debounced)."""
        if self.monitor.session is None:
            self._model_changed()
        elif self.is_shown("summary"):
            self._refresh_summary()

    def _model_changed(self) -> None:
        self.last_sample = None
        self._refresh_data()
        if self.is_shown("summary"):
            self._refresh_summary()
        self.hub.forget_local_model()
        for key, (kind, args) in self._wants.items():
            if self.docks[key].isVisible():
                self.hub.ask(kind, args)

    def _session_attached(self, session: Any) -> None:
        session.events.connect(self.hub.on_event)
        self.hub.session_attached(session)

    # --- answers ---------------------------------------------------------------------------------------
    def has_error(self, key: str) -> bool:
        return key in self.errors

    def _answered(self, record: Any) -> None:
        name = type(record).__name__
        key = _VIEW_OF.get(name)
        if key is not None:
            self.errors.pop(key, None)
        if isinstance(record, InsightError):
            key = {"sample": "predictions", "validation": "mistakes"}.get(record.kind, record.kind)
            self.errors[key] = record.message
        if key is not None:
            self.answers[key] = self.answers.get(key, 0) + 1
        if isinstance(record, InsightError):
            self._show_error(record)
            if record.kind == "validation":
                self.mistakes.show_error(record.message)
        elif name == "SampleInsight":
            self.last_sample = record
            self.predictions.show_insight(record)
            self._show_layer()
        elif name == "ValidationReport":
            self.mistakes.show_report(record)
            self.gallery.show_report(record)
        elif name == "Embedding":
            self.embedding.show_embedding(record)

    def _show_error(self, error: InsightError) -> None:
        views = {"sample": self.predictions, "validation": self.gallery, "embedding": self.embedding}
        view = views.get(error.kind)
        if view is not None and hasattr(view, "show_error"):
            view.show_error(error.message)
        else:
            self.window.statusBar().showMessage(error.message, 8000)

    def _monitor_cell_clicked(self, true: int, predicted: int) -> None:
        """A cell of the Monitor's confusion matrix: its samples in the Mistakes gallery."""
        self.show("mistakes")
        self.gallery.show_cell(true, predicted)

    # --- one sample, one layer ---------------------------------------------------------------------------
    def _sample_requested(self, request: dict[str, Any]) -> None:
        self._want("predictions", request)

    def open_sample(self, split: str, index: int) -> None:
        """Show sample `index` of `split` in Predictions (from the data grid, the gallery, the embedding)."""
        self.predictions.choose_sample(split, int(index))
        self.show("predictions")

    def _selection_changed(self, ids: list[str]) -> None:
        if len(ids) == 1:
            self.layer_node = ids[0]
            self._show_layer()

    def _show_layer(self) -> None:
        s = self.last_sample
        if s is None:
            return
        nid = self.layer_node
        if nid is None or nid not in s.layers:
            nid = first_telling_layer(s)  # nothing clicked yet: the first layer worth looking at
        if nid is None:
            return
        self.layers.show_output(nid, s.node_types.get(nid, ""), s.layers[nid],
                                attention=s.attention.get(nid), caption=model_caption(s.step, s.epoch))

    # --- summary and data (this process, off the UI thread) ----------------------------------------------
    def _model_doc(self) -> tuple[Any, Path | None]:
        """The document of the model shown and where its relative files are."""
        session = self.monitor.session
        doc = session.doc if session is not None else self.editor.doc
        path = getattr(self.window, "path", None)
        return doc, (Path(path).parent if path is not None else None)

    def _refresh_summary(self) -> None:
        from app.insight.summary import model_summary

        self._summary_request += 1
        request = self._summary_request
        doc, base_dir = self.editor.doc.copy(), self._model_doc()[1]
        batch = self._summary_batch

        def work() -> None:
            try:
                result: Any = model_summary(doc, batch_size=batch, base_dir=base_dir)
            except Exception as exc:  # noqa: BLE001 - the view says why there is no summary
                result = " ".join(str(exc).split()) or type(exc).__name__
            self.summary_ready.emit(result, request)

        threading.Thread(target=work, name="wiregrad-summary", daemon=True).start()

    def _summary_batch_changed(self, batch: int) -> None:
        self._summary_batch = int(batch)
        self._refresh_summary()

    def _summary_done(self, result: Any, request: int) -> None:
        if request != self._summary_request:
            return  # a newer graph's summary is on its way
        if isinstance(result, str):
            self.errors["summary"] = result
            self.summary.show_problem(result)
        else:
            self.errors.pop("summary", None)
            self.summary.show_summary(result)

    def _refresh_data(self) -> None:
        """The dataset of the model shown: the Data view loads it (off the UI thread, once per dataset), and
        the gallery and the sample picker take the same arrays when it has (`_data_loaded`)."""
        doc, base_dir = self._model_doc()
        self.data.set_document(doc, base_dir)

    def _data_loaded(self) -> None:
        if self.data.preview is None:  # it could not be loaded: the Data view says why
            return
        doc, base_dir = self._model_doc()
        try:  # the arrays the Data view just loaded, from the cache: never a file read on this thread
            data = load_training_dataset(doc, base_dir, cached_only=True)
        except Exception:  # noqa: BLE001 - the Data view has shown what is wrong
            return
        if data is None:
            return
        self.gallery.set_samples(data.x_val, data.normalization)
        self.predictions.set_dataset_size(len(data.x_train), len(data.x_val))

    def shutdown(self) -> None:
        self.hub.shutdown()


def first_telling_layer(insight: Any) -> str | None:
    """The layer the layer view shows before a node is clicked: the first with feature maps, else the
    first hidden layer with weights or attention, else the first layer after the Input."""
    order = [nid for nid in insight.layers if insight.node_types.get(nid) not in ("Input", "Output")]
    for nid in order:
        if insight.layers[nid].ndim == 3 or nid in insight.attention:
            return nid
    for nid in order:
        if insight.node_types.get(nid, "") in ("Linear", "Embedding", "LSTM", "GRU", "RNN"):
            return nid
    return order[0] if order else None


__all__ = ["SeeInside", "first_telling_layer"]

