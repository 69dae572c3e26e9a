"""The inspector: a form for the selected node generated from the layer catalogue, and a form for the
document's training setup (dataset options from app.datasets.DATASETS). Edits apply live, as undoable
commands through the NodeEditor."""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QIcon, QPixmap, QValidator
from PySide6.QtWidgets import (
    QCheckBox,
    QColorDialog,
    QComboBox,
    QDockWidget,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.datasets import DATASETS
from app.document import DocumentError, NodeSpec, ParamError, ParamSpec, blocks, format_shape
from app.document.catalogue import find_spec
from app.document.document import OPTIMIZER_OPTIONS, TRAINING_FIELDS, _get_path
from widgets.node_editor.items import block_contents, format_count
from widgets.node_editor.scene import _dataset_shape
from widgets.theme import current_theme, icon
from widgets.wheel_guard import guard_wheel

INT_MIN, INT_MAX = -(2**31), 2**31 - 1


class ScientificSpinBox(QDoubleSpinBox):
    """A double spin box that shows 0.001 and 1e-08 as typed, not as 0.00; arrows step by 10% of the value."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.setDecimals(15)
        self.setKeyboardTracking(False)

    def textFromValue(self, value: float) -> str:
        return f"{value:.6g}"

    def valueFromText(self, text: str) -> float:
        try:
            return float(text)
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int) -> object:
        stripped = text.strip()
        if not stripped or stripped in ("-", "+", ".", "e", "-."):
            return QValidator.Intermediate, text, pos
        try:
            value = float(stripped)
        except ValueError:
            ok = all(c in "0123456789.eE+-" for c in stripped)
            return (QValidator.Intermediate if ok else QValidator.Invalid), text, pos
        in_range = self.minimum() <= value <= self.maximum()
        state = QValidator.Acceptable if in_range else QValidator.Intermediate
        return state, text, pos

    def stepBy(self, steps: int) -> None:
        value = self.value()
        step = abs(value) * 0.1 if value else 0.01
        self.setValue(value + steps * step)


def _parse_list(text: str, kind: str, choices: tuple) -> Any:
    text = text.strip()
    if text in [str(c) for c in choices]:
        return text
    parts = [p for p in text.replace("(", "").replace(")", "").replace("[", "").replace("]", "").replace(
        "×", ",").replace("x", ",").split(",") if p.strip()]
    convert = int if kind == "int-tuple" else float
    try:
        values = [convert(p.strip()) for p in parts]
    except ValueError:
        raise ParamError(f"write numbers separated by commas, e.g. 3, 3 (got {text!r})") from None
    return values[0] if len(values) == 1 and kind == "int-tuple" else values


def _show(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


class Field:
    """One form row: an editing widget for a ParamSpec that calls `commit(value)` when the user edits."""

    def __init__(self, spec: ParamSpec, commit: Callable[[Any], None]) -> None:
        self.spec, self._commit = spec, commit
        kind = spec.kind
        self.widget: QWidget
        if kind == "bool":
            w = QCheckBox()
            w.toggled.connect(lambda v: self._commit(bool(v)))
        elif kind == "choice":
            w = QComboBox()
            if spec.nullable:
                w.addItem("(none)", None)
            for c in spec.choices:
                w.addItem(str(c), c)
            w.currentIndexChanged.connect(lambda i: self._commit(w.itemData(i)))
        elif kind == "int" and not spec.nullable:
            w = QSpinBox()
            w.setRange(int(max(spec.min if spec.min is not None else INT_MIN, INT_MIN)),
                       int(min(spec.max if spec.max is not None else INT_MAX, INT_MAX)))
            w.setAccelerated(True)
            w.setKeyboardTracking(False)  # commit 128, not 1 and 12 on the way
            w.valueChanged.connect(lambda v: self._commit(int(v)))
        elif kind == "float" and not spec.nullable:
            w = ScientificSpinBox()
            w.setRange(spec.min if spec.min is not None else -1e300,
                       spec.max if spec.max is not None else 1e300)
            w.valueChanged.connect(lambda v: self._commit(float(v)))
        else:
            w = QLineEdit()
            if spec.nullable:
                w.setPlaceholderText("none")
            w.editingFinished.connect(self._text_edited)
        if not isinstance(w, (QLineEdit, QCheckBox)):
            guard_wheel(w)  # scrolling the form must not turn a value under the mouse
        w.setToolTip(spec.help)
        self.widget = w

    def _text_edited(self) -> None:
        text = self.widget.text().strip()
        kind = self.spec.kind
        try:
            if not text and self.spec.nullable:
                value: Any = None
            elif kind == "int":
                value = int(text)
            elif kind == "float":
                value = float(text)
            elif kind in ("int-tuple", "float-tuple"):
                value = _parse_list(text, kind, self.spec.choices)
            elif kind == "dict":
                value = json.loads(text or "{}")
            else:
                value = text
        except (ValueError, ParamError) as exc:
            self.error(str(exc) if isinstance(exc, ParamError) else f"{self.spec.name}: can't read {text!r}")
            return
        if value == self._value:
            return
        self._commit(value)

    _value: Any = None
    error: Callable[[str], None] = staticmethod(lambda text: None)

    def set_value(self, value: Any) -> None:
        self._value = value
        w = self.widget
        w.blockSignals(True)
        try:
            if isinstance(w, QCheckBox):
                w.setChecked(bool(value))
            elif isinstance(w, QComboBox):
                index = w.findData(value)
                w.setCurrentIndex(max(index, 0))
            elif isinstance(w, QSpinBox):
                w.setValue(int(value))
            elif isinstance(w, QDoubleSpinBox):
                w.setValue(float(value) if value is not None and math.isfinite(value) else 0.0)
            else:
                w.setText(_show(value))
        finally:
            w.blockSignals(False)


def _form() -> QFormLayout:
    form = QFormLayout()
    form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
    form.setLabelAlignment(Qt.AlignRight | Qt.AlignVCenter)
    form.setHorizontalSpacing(10)
    form.setVerticalSpacing(6)
    return form


def _caption(text: str, object_name: str = "caption") -> QLabel:
    label = QLabel(text)
    label.setObjectName(object_name)
    label.setWordWrap(True)
    return label


def _node_spec(graph: Any, node_id: str) -> NodeSpec | None:
    """The node's spec: its catalogue entry, or a block instance's from its definition."""
    try:
        return graph.node_spec(node_id)
    except DocumentError:
        return find_spec(graph.node(node_id).type)


def _swatch(color: str) -> QIcon:
    pixmap = QPixmap(14, 14)
    pixmap.fill(QColor(color))
    return QIcon(pixmap)


def _form_signature(spec: NodeSpec | None) -> tuple:
    """What the fields of a form are built from: a block instance's change with its definition (its
    exposed parameters) and with the document's definitions (the choices of `block`)."""
    return () if spec is None else tuple((p.name, p.kind, tuple(p.choices)) for p in spec.params)


class NodeForm(QWidget):
    """The form of one node: id, name, then one field per catalogue parameter. A block instance's are
    `block`, `repeat` and the parameters its definition exposes, with Open and Make unique; inside an
    open block each layer parameter has an "expose" button that makes it a parameter of the block."""

    def __init__(self, editor: Any) -> None:
        super().__init__()
        self.editor = editor
        self.node_id: str | None = None
        self.fields: dict[str, Field] = {}
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(10, 10, 10, 10)
        self._layout.setSpacing(8)
        self._body: QWidget | None = None
        self.show_node(None)

    def show_node(self, node_id: str | None) -> None:
        self.node_id = node_id
        self.fields = {}
        self._shape_note = False  # the shape field shows why a typed shape is not used
        if self._body is not None:
            self._body.hide()  # deleteLater alone would leave it on screen until the event loop runs
            self._body.setParent(None)
            self._body.deleteLater()
        body = QWidget()
        v = QVBoxLayout(body)
        v.setContentsMargins(0, 0, 0, 0)
        v.setSpacing(8)
        self._body = body
        self._layout.addWidget(body)
        doc = self.editor.graph
        self.expose_buttons: dict[str, QToolButton] = {}
        if node_id is None or node_id not in doc.nodes:
            v.addWidget(_caption("Select a node on the canvas to edit its parameters.\n\n"
                                 "Drag layers from the palette, or press Tab on the canvas to add one.",
                                 "placeholder"))
            v.addStretch(1)
            return
        node = doc.node(node_id)
        spec = _node_spec(doc, node_id)
        d = doc.root.blocks.get(node.params.get("block")) if node.type == "Block" else None
        title = QLabel(f"Block {d.name}" if d is not None else f"{node.type}")
        title.setObjectName("inspectorTitle")
        title_row = QHBoxLayout()
        title_row.addWidget(title, 1)
        v.addLayout(title_row)
        self.block_caption = None
        if node.type == "Block" and d is not None:
            self.block_caption = _caption(self._block_about(node.params, d))
            v.addWidget(self.block_caption)
        elif spec is not None:
            v.addWidget(_caption(spec.description))
        if node.type == "Block":
            v.addLayout(self._block_buttons(node_id, d))
            title_row.addWidget(self.rename_block_button, 0, Qt.AlignVCenter)  # beside the name it changes
        self._signature = _form_signature(spec)
        self.summary = _caption("", "summary")
        v.addWidget(self.summary)
        self.problem = _caption("", "problem")
        v.addWidget(self.problem)
        form = _form()
        self.id_edit = QLineEdit(node.id)
        self.id_edit.setToolTip("The node's id: letters, digits and _; wires and exports refer to it")
        self.id_edit.editingFinished.connect(self._id_edited)
        self.name_edit = QLineEdit(node.name or "")
        self.name_edit.setPlaceholderText(node.id)
        self.name_edit.setToolTip("Display name on the canvas (empty: the id)")
        self.name_edit.editingFinished.connect(
            lambda: self.editor.rename(self.node_id, self.name_edit.text()) if self.node_id else None)
        form.addRow("Id", self.id_edit)
        form.addRow("Name", self.name_edit)
        v.addLayout(form)
        if spec is not None and spec.params:
            line = QFrame()
            line.setFrameShape(QFrame.HLine)
            line.setObjectName("separator")
            v.addWidget(line)
            pform = _form()
            for p in spec.params:
                field = Field(p, lambda value, name=p.name: self._commit(name, value))
                error = _caption("", "fieldError")
                error.hide()

                def show_error(text: str, label: QLabel = error) -> None:
                    label.setText(text)
                    label.setVisible(bool(text))

                field.error = show_error
                field.error_label = error
                box = QWidget()
                bv = QVBoxLayout(box)
                bv.setContentsMargins(0, 0, 0, 0)
                bv.setSpacing(1)
                opened = self._opened_block()
                if opened is not None and node.type not in blocks.PORT_TYPES:
                    row = QHBoxLayout()
                    row.setSpacing(4)
                    row.addWidget(field.widget, 1)
                    row.addWidget(self._expose_button(p.name, opened))
                    bv.addLayout(row)
                else:
                    bv.addWidget(field.widget)
                help_label = _caption(p.help, "help")
                field.help_label = help_label
                bv.addWidget(help_label)
                bv.addWidget(error)
                label = QLabel(p.name)
                label.setToolTip(p.help)
                pform.addRow(label, box)
                field.label = label
                self.fields[p.name] = field
            v.addLayout(pform)
        v.addStretch(1)
        self.refresh()

    block_caption: QLabel | None = None  # a block instance's "holds ..., used by ..." line

    def _block_about(self, params: dict[str, Any], d: blocks.BlockDef) -> str:
        """An instance's caption: what one copy holds (with these parameters) and who else uses it."""
        root = self.editor.doc
        k = len(blocks.instances_of(root, d.name))
        about = f"{d.description} — " if d.description else ""
        return (f"{about}{block_contents(root, d, params)}, used by {k} instance{'s' if k != 1 else ''}. "
                "Double-click it to open it.")

    def _opened_block(self) -> blocks.BlockDef | None:
        """The definition shown on the canvas, when a block is open."""
        levels = getattr(self.editor, "levels", None)
        return self.editor.doc.blocks.get(levels[-1].block) if levels else None

    def _block_buttons(self, node_id: str, d: blocks.BlockDef | None) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setSpacing(6)
        self.open_button = QPushButton("Open")
        self.open_button.setToolTip("Show the block's layers on the canvas (Enter, or double-click it)")
        self.open_button.clicked.connect(lambda _c=False: self.editor.open_block(node_id))
        self.unique_button = QPushButton("Make unique")
        n = len(blocks.instances_of(self.editor.doc, d.name)) if d is not None else 0
        self.unique_button.setToolTip(f"Give this instance a copy of block {d.name if d else ''} of its own, "
                                      f"so editing it leaves the other {max(n - 1, 0)} alone")
        self.unique_button.setEnabled(n > 1)
        self.unique_button.clicked.connect(lambda _c=False: self.editor.make_unique(node_id))
        self.color_button = QPushButton("Colour…")
        self.color_button.setToolTip("The colour every instance of this block is drawn in")
        if d is not None:
            self.color_button.setIcon(_swatch(d.color))
        self.color_button.clicked.connect(lambda _c=False: self.pick_color())
        self.rename_block_button = QPushButton("Rename…")
        self.rename_block_button.setToolTip(f"Rename block {d.name if d else ''}: every instance follows")
        self.rename_block_button.clicked.connect(lambda _c=False: self.rename_block())
        for b in (self.open_button, self.unique_button, self.color_button, self.rename_block_button):
            b.setEnabled(b.isEnabled() and d is not None)
            row.addWidget(b)
        row.addStretch(1)
        return row

    def ask_block_name(self, current: str, problem: str = "") -> str | None:
        """The Rename block dialog (tests answer it through its real widgets); `problem`: why the name
        typed last was refused, shown above the field so it can be corrected."""
        label = f"New name of block {current} (every instance follows):"
        if problem:
            label = f"⚠ {problem}\n\n{label}"
        text, ok = QInputDialog.getText(self, "Rename block", label, text=current)
        return text.strip() if ok else None

    def rename_block(self) -> bool:
        """Ask for a new name of the selected instance's definition and rename it, one undo step; a
        taken or invalid name asks again, saying why, until it is fine or cancelled."""
        node = self.editor.graph.nodes.get(self.node_id) if self.node_id else None
        old = node.params.get("block") if node is not None and node.type == "Block" else None
        if old not in self.editor.doc.blocks:
            return False
        problem = ""
        while (name := self.ask_block_name(old, problem)) is not None:
            if name == old:
                return False
            if self.editor.rename_block(old, name):
                self.show_node(self.node_id)  # the title and the block choices name it anew
                return True
            problem = self.editor.last_message
        return False

    def ask_color(self, current: str) -> str | None:
        """The colour dialog (tests answer it through its real widgets)."""
        color = QColorDialog.getColor(QColor(current), self, "Block colour")
        return color.name() if color.isValid() else None

    def pick_color(self) -> bool:
        node = self.editor.graph.node(self.node_id)
        d = self.editor.doc.blocks.get(node.params.get("block"))
        color = self.ask_color(d.color) if d is not None else None
        return bool(color) and self.editor.set_block_color(self.node_id, color)

    def _expose_button(self, param: str, d: blocks.BlockDef) -> QToolButton:
        button = QToolButton()
        button.setText("⇱")
        button.setAutoRaise(True)
        button.clicked.connect(lambda _c=False: self.expose(param))
        self.expose_buttons[param] = button
        return button

    def ask_exposed_name(self, param: str, names: list[str]) -> str | None:
        """The name of the block parameter to expose `param` as (a new one, or one to extend)."""
        d = self._opened_block()
        text, ok = QInputDialog.getItem(self, "Expose as a block parameter",
                                        f"Set {self.node_id}.{param} per instance of block "
                                        f"{d.name if d else ''} as the parameter:", names, 0, True)
        return text.strip() if ok and text.strip() else None

    def expose(self, param: str, pname: str | None = None) -> bool:
        """Make `param` of this node a parameter of the open block (asks for its name unless given)."""
        d = self._opened_block()
        if d is None or self.node_id is None:
            return False
        if pname is None:
            new = param if param not in d.params else f"{self.node_id}_{param}"
            pname = self.ask_exposed_name(param, [new, *(k for k in d.params if k != new)])
            if pname is None:
                return False
        node_id = self.node_id
        ok = self.editor.expose_param(node_id, param, pname)
        if not ok and param in self.fields:
            self.fields[param].error(self.editor.last_message)
        return ok

    def _commit(self, name: str, value: Any) -> None:
        field = self.fields[name]
        graph = self.editor.graph
        node = graph.node(self.node_id)
        try:
            spec = _node_spec(graph, self.node_id)
            if spec is None:
                raise ParamError(f"{node.type} is not a known layer")
            spec.check_param(name, value)
        except ParamError as exc:
            field.error(str(exc))
            self.refresh()
            return
        field.error("")
        if node.type == "Block" and name == "block":
            self.editor.set_block(self.node_id, value)
            self.show_node(self.node_id)  # another definition: other parameters
            return
        self.editor.set_param(self.node_id, name, value)
        if name == "shape":
            note = self._dataset_shape_note(value)
            self._shape_note = bool(note)
            if note:
                field.error(note)  # typed where the user looks: the edit alone changes nothing

    def _dataset_shape_note(self, typed: Any) -> str:
        """When the dataset drives this Input's shape, a typed shape other than the dataset's is only
        a preview: say so, and name the dataset option that gives the typed shape, if one does."""
        doc = self.editor.doc
        node = self.editor.graph.node(self.node_id)
        spec = find_spec(node.type)
        values = {**spec.defaults(), **node.params} if spec is not None else {}
        if node.type != "Input" or not values.get("dataset_driven"):
            return ""
        dataset = dict(doc.training.get("dataset") or {})
        actual = _dataset_shape(json.dumps(dataset, sort_keys=True))
        typed = list(typed) if isinstance(typed, list | tuple) else [typed]
        if actual is None or list(actual) == typed:
            return ""
        name = dataset.get("name", "the dataset")
        note = f"Not used: the dataset {name} gives samples of shape {list(actual)} (dataset_driven is on)."
        info = DATASETS.get(name)
        for option in info.options if info is not None else ():
            for choice in option.choices:
                other = _dataset_shape(json.dumps({**dataset, option.name: choice}, sort_keys=True))
                if choice != dataset.get(option.name, option.default) and other is not None \
                        and list(other) == typed:
                    return f"{note} For {typed}, set Training ▸ {option.name} = {choice}."
        return f"{note} Untick dataset_driven to use your own shape."

    def _id_edited(self) -> None:
        new = self.id_edit.text().strip()
        if self.node_id and new and new != self.node_id:
            old = self.node_id
            if self.editor.change_id(old, new):
                self.node_id = new
            else:
                self.id_edit.setText(old)

    def refresh(self) -> None:
        """Show the document's current values (after an undo, say) without rebuilding the form."""
        doc = self.editor.graph
        if self.node_id is None or self.node_id not in doc.nodes or not hasattr(self, "summary"):
            return
        node = doc.node(self.node_id)
        spec = _node_spec(doc, self.node_id)
        if spec is None:
            return
        if node.type == "Block" and _form_signature(spec) != getattr(self, "_signature", None):
            self.show_node(self.node_id)  # its definition's parameters, or the definitions, changed
            return
        values = {**spec.defaults(), **node.params}
        d = doc.root.blocks.get(node.params.get("block")) if node.type == "Block" else None
        if d is not None and getattr(self, "color_button", None) is not None:
            self.color_button.setIcon(_swatch(d.color))
        if d is not None and self.block_caption is not None:  # an exposed repeat changes what it holds
            self.block_caption.setText(self._block_about(node.params, d))
        opened = self._opened_block()
        exposed = {p: blocks.exposed_as(opened, self.node_id, p) for p in self.fields} if opened else {}
        if self._shape_note and "shape" in self.fields:  # the dataset or dataset_driven may have changed
            note = self._dataset_shape_note(values.get("shape"))
            self._shape_note = bool(note)
            self.fields["shape"].error(note)
        for name, field in self.fields.items():
            field.set_value(values.get(name))
            applies = spec.param(name).applies(values)
            by_block = exposed.get(name)
            field.widget.setEnabled(applies and by_block is None)
            field.label.setEnabled(applies)
            button = self.expose_buttons.get(name)
            if button is not None:
                button.setToolTip(f"Set per instance by block parameter {by_block}: edit it on each instance"
                                  if by_block else f"Expose {name} as a parameter of block {opened.name}, "
                                                   "set per instance")
                button.setText("⇲" if by_block else "⇱")
                button.setEnabled(by_block is None)
                field.widget.setToolTip(f"Set by block parameter {by_block} on each instance" if by_block
                                        else field.spec.help)
                field.help_label.setText(f"Set on each instance: block parameter {by_block}" if by_block
                                         else field.spec.help)
        if not self.id_edit.hasFocus():
            self.id_edit.setText(node.id)
        if not self.name_edit.hasFocus():
            self.name_edit.setText(node.name or "")
        view = getattr(self.editor, "view_info", self.editor.info)
        info = view.nodes.get(self.node_id) if view is not None else None
        parts = []
        if info is not None:
            for port, shape in info.in_shapes.items():
                if isinstance(shape, list):
                    text = " + ".join(format_shape(s) if s else "?" for s in shape)
                else:
                    text = format_shape(shape) if shape else "?"
                parts.append(f"{port}: {text}" if port.startswith("in") else f"in {port}: {text}")
            if info.shape is not None:
                parts.append(f"out: {format_shape(info.shape)}")
            if info.param_count:
                parts.append(f"{info.param_count:,} parameters ({format_count(info.param_count)})")
        self.summary.setText("  ·  ".join(parts))
        problem = self.editor.scene.statuses.get(self.node_id)  # an error, or a warning about wiring
        self.problem.setText(f"⚠ {('port ' + problem.port + ': ') if problem.port else ''}{problem.message}"
                             if problem else "")
        name = "warning" if problem is not None and problem.severity == "warning" else "problem"
        if self.problem.objectName() != name:
            self.problem.setObjectName(name)
            self.problem.style().unpolish(self.problem)  # the style sheet picks the colour by name
            self.problem.style().polish(self.problem)
        self.problem.setVisible(problem is not None)


# which optimisers use each optimiser setting (type and lr apply to all): the others' rows are hidden
_OPTIMIZER_ONLY = {
    f"optimizer.{name}": tuple(kind for kind, options in OPTIMIZER_OPTIONS.items() if name in options)
    for name in dict.fromkeys(n for options in OPTIMIZER_OPTIONS.values() for n in options)
}


def _option_param(opt: Any) -> ParamSpec:
    """A dataset OptionSpec as a ParamSpec, so the same fields edit both."""
    kind = {"int": "int", "float": "float", "bool": "bool", "choice": "choice", "size": "int-tuple"}.get(
        opt.kind, "str")
    nullable = opt.kind == "path" or opt.required
    return ParamSpec(opt.name, kind, opt.default, help=opt.description, min=opt.minimum, max=opt.maximum,
                     choices=tuple(opt.choices), nullable=nullable)


FOLDER_DATASETS = {"image_folder"}
DATASET_FILE_FILTERS = {
    "csv": "CSV files (*.csv *.tsv *.txt);;All files (*)",
    "npz": "NumPy archives (*.npz);;All files (*)",
    "idx": "IDX files (*-ubyte *-ubyte.gz *.idx *.idx.gz *.gz);;All files (*)",
}


class TrainingForm(QWidget):
    """Dataset, loss, optimiser, schedule, batch size, epochs... of the document. `base_dir` says
    where the document lives (None while untitled): dataset paths are relative to it."""

    def __init__(self, editor: Any, base_dir: Callable[[], Path | None] | None = None) -> None:
        super().__init__()
        self.editor = editor
        self.base_dir = base_dir or (lambda: None)
        self.fields: dict[str, Field] = {}
        self.dataset_fields: dict[str, Field] = {}
        v = QVBoxLayout(self)
        v.setContentsMargins(10, 10, 10, 10)
        v.setSpacing(8)
        title = QLabel("Training setup")
        title.setObjectName("inspectorTitle")
        v.addWidget(title)
        # what the training check finds wrong with these settings (a schedule that can't run...), in red
        self.problems_label = _caption("", "fieldError")
        self.problems_label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.problems_label.setStyleSheet(f"color: {current_theme().error}")
        self.problems_label.hide()
        v.addWidget(self.problems_label)
        form = _form()
        self.dataset_combo = QComboBox()
        guard_wheel(self.dataset_combo)
        for info in DATASETS.values():
            self.dataset_combo.addItem(info.title, info.name)
        self.dataset_combo.currentIndexChanged.connect(self._dataset_picked)
        form.addRow("Dataset", self.dataset_combo)
        v.addLayout(form)
        self.dataset_help = _caption("", "help")
        v.addWidget(self.dataset_help)
        self.dataset_box = QWidget()
        self.dataset_form = _form()
        self.dataset_box.setLayout(self.dataset_form)
        v.addWidget(self.dataset_box)
        line = QFrame()
        line.setFrameShape(QFrame.HLine)
        line.setObjectName("separator")
        v.addWidget(line)
        tform = self.training_rows = _form()
        for path, spec in TRAINING_FIELDS.items():
            if path == "dataset":
                continue
            field = Field(spec, lambda value, p=path: self._commit(p, value))
            field.widget.setToolTip(spec.help)
            text = path.replace("optimizer.", "").replace("lr_schedule.", "schedule ")
            label = QLabel(text.replace("_", " "))
            label.setToolTip(spec.help)
            label.setProperty("helpTip", spec.help)
            field.label = label
            tform.addRow(label, field.widget)
            self.fields[path] = field
        v.addLayout(tform)
        self.error = _caption("", "fieldError")
        self.error.hide()
        v.addWidget(self.error)
        v.addStretch(1)
        self._dataset_name: str | None = None
        self.refresh()

    def _commit(self, path: str, value: Any) -> None:
        if self.editor.set_training(path, value):
            self.error.hide()
        else:
            self.error.setText(self.editor.last_message)
            self.error.show()
            self.refresh()

    def _dataset_picked(self, index: int) -> None:
        name = self.dataset_combo.itemData(index)
        current = self.editor.doc.training.get("dataset", {})
        if current.get("name") != name:
            self._commit("dataset", {"name": name})

    def _commit_option(self, option: str, value: Any) -> None:
        spec = dict(self.editor.doc.training.get("dataset", {}))
        if value is None:
            spec.pop(option, None)
        else:
            spec[option] = list(value) if isinstance(value, tuple) else value
        self._commit("dataset", spec)

    def _build_dataset_form(self, name: str) -> None:
        self._dataset_name = name
        while self.dataset_form.rowCount():
            self.dataset_form.removeRow(0)
        self.dataset_fields = {}
        info = DATASETS.get(name)
        self.dataset_help.setText(info.description if info else f"Unknown dataset {name!r}")
        if info is None:
            return
        for opt in info.options:
            if opt.name == "val_fraction":  # the training setting of the same name is the one that counts
                continue
            field = Field(_option_param(opt), lambda value, o=opt.name: self._commit_option(o, value))
            row: QWidget = field.widget
            if opt.kind == "path":
                row = self._with_browse_button(field, name, opt.name)
            self.dataset_form.addRow(opt.name.replace("_", " "), row)
            self.dataset_fields[opt.name] = field

    def _with_browse_button(self, field: Field, dataset: str, option: str) -> QWidget:
        """A path field with a Browse… button beside it (a folder chooser for image folders)."""
        box = QWidget()
        h = QHBoxLayout(box)
        h.setContentsMargins(0, 0, 0, 0)
        h.setSpacing(4)
        h.addWidget(field.widget, 1)
        button = QPushButton(icon("open"), "Browse…")
        button.setObjectName(f"browse_{option}")
        folder = dataset in FOLDER_DATASETS
        button.setToolTip(f"Choose the {'folder' if folder else 'file'} on disk")
        button.clicked.connect(lambda _c=False: self.browse(option))
        h.addWidget(button)
        field.browse_button = button
        return box

    def browse(self, option: str) -> bool:
        """Pick a dataset file (or image folder) for `option`; True if one was chosen."""
        dataset = self.editor.doc.training.get("dataset", {})
        name = dataset.get("name")
        base = self.base_dir()
        current = dataset.get(option)
        start = Path(current).expanduser() if isinstance(current, str) and current.strip() else None
        if start is not None and not start.is_absolute() and base is not None:
            start = base / start
        start_dir = str(start if start is not None else (base or Path.home()))
        folder = name in FOLDER_DATASETS
        picked = self.ask_path(f"Choose the {option.replace('_', ' ')} of the {name} dataset", start_dir,
                               DATASET_FILE_FILTERS.get(name, "All files (*)"), folder)
        if not picked:
            return False
        self._commit_option(option, self._stored_path(Path(picked).resolve(), base))
        return True

    @staticmethod
    def _stored_path(picked: Path, base: Path | None) -> str:
        """A pick inside the document's folder is stored relative to it (the project folder can move,
        and runs resolve it against the document, as `wiregrad train` does); anything else absolute."""
        if base is not None:
            try:
                return picked.relative_to(Path(base).resolve()).as_posix()
            except ValueError:
                pass
        return picked.as_posix()

    def ask_path(self, title: str, start: str, file_filter: str, folder: bool) -> str | None:
        """The file dialog (tests replace this)."""
        if folder:
            return QFileDialog.getExistingDirectory(self, title, start) or None
        path, _ = QFileDialog.getOpenFileName(self, title, start, file_filter)
        return path or None

    def refresh(self) -> None:
        training = self.editor.doc.training
        dataset = training.get("dataset", {})
        name = dataset.get("name")
        if name != self._dataset_name:
            self._build_dataset_form(name)
        self.dataset_combo.blockSignals(True)
        self.dataset_combo.setCurrentIndex(max(self.dataset_combo.findData(name), 0))
        self.dataset_combo.blockSignals(False)
        info = DATASETS.get(name)
        for opt_name, field in self.dataset_fields.items():
            default = info.option(opt_name).default if info else None
            field.set_value(dataset.get(opt_name, default))
        optimizer = training.get("optimizer", {}).get("type")
        for path, field in self.fields.items():
            try:
                field.set_value(_get_path(training, path.split(".")))
            except (KeyError, TypeError):
                field.set_value(TRAINING_FIELDS[path].default)
            only = _OPTIMIZER_ONLY.get(path)
            applies = only is None or optimizer in only
            field.widget.setEnabled(applies)
            field.label.setEnabled(applies)
            self.training_rows.setRowVisible(field.widget, applies)


    def show_problems(self, problems: list[Any]) -> None:
        """The training check's problems with these settings: red lines under the title, and the label
        of each setting at fault in red with the message as its tooltip."""
        from widgets.training_panel import problem_line

        self.problems_label.setText("\n".join(problem_line(p) for p in problems))
        self.problems_label.setVisible(bool(problems))
        at_fault: dict[QLabel, str] = {}
        for p in problems:
            path = p.field.removeprefix("training.")
            keys = [k for k in self.fields if path == k or path.startswith(k + ".")]
            key = max(keys, key=len) if keys else None
            label = self.fields[key].label if key is not None else None
            if key is None and path.startswith("dataset."):
                row = self.dataset_fields.get(path.split(".")[1])
                label = self.dataset_form.labelForField(row.widget) if row is not None else None
                label = label if isinstance(label, QLabel) else None
            if label is not None:
                at_fault.setdefault(label, p.message)
        labels = [f.label for f in self.fields.values()]
        for i in range(self.dataset_form.rowCount()):
            item = self.dataset_form.itemAt(i, QFormLayout.LabelRole)
            if item is not None and isinstance(item.widget(), QLabel):
                labels.append(item.widget())
        error = current_theme().error
        for label in labels:
            message = at_fault.get(label)
            style = f"color: {error}" if message else ""
            if label.styleSheet() != style:  # restyling every label on every edit would cost the canvas time
                label.setStyleSheet(style)
            if message or label.property("problemTip"):
                label.setToolTip(message or label.property("helpTip") or "")
                label.setProperty("problemTip", bool(message))


class Inspector(QTabWidget):
    """Tabs: the selected node's form, and the training setup."""

    def __init__(self, editor: Any, parent: Any = None,
                 base_dir: Callable[[], Path | None] | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inspector")
        self.editor = editor
        self.node_form = NodeForm(editor)
        self.training_form = TrainingForm(editor, base_dir)
        self.addTab(_scroll(self.node_form), "Node")
        self.addTab(_scroll(self.training_form), "Training")
        editor.selection_changed.connect(self._selection_changed)
        editor.info_updated.connect(lambda _info: self.refresh())
        editor.document_replaced.connect(lambda _doc: self._document_replaced())
        editor.graph_changed.connect(lambda _graph: self.node_form.show_node(None))

    def _selection_changed(self, ids: list[str]) -> None:
        node_id = ids[0] if len(ids) == 1 else None
        if node_id != self.node_form.node_id:
            self.node_form.show_node(node_id)
        if node_id is not None:
            if self.currentIndex() != 0:
                self.setCurrentIndex(0)
            # docked in a tab group (behind the Training panel, say), the form would change unseen
            dock = self.parentWidget()
            while dock is not None and not isinstance(dock, QDockWidget):
                dock = dock.parentWidget()
            if dock is not None and not dock.isFloating() and not dock.isHidden():
                dock.raise_()

    def _document_replaced(self) -> None:
        self.node_form.show_node(None)
        self.training_form.refresh()

    def refresh(self) -> None:
        form = self.node_form
        if form.node_id is not None and form.node_id not in self.editor.graph.nodes:
            ids = self.editor.selected_ids()  # deleted, or its id changed by an undo
            form.show_node(ids[0] if len(ids) == 1 else None)
        else:
            form.refresh()
        self.training_form.refresh()
        from widgets.training_panel import settings_problems

        self.training_form.show_problems(settings_problems(getattr(self.editor.scene, "problems", ())))


def _scroll(widget: QWidget) -> QScrollArea:
    area = QScrollArea()
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
    return area


__all__ = ["Field", "Inspector", "NodeForm", "TrainingForm", "current_theme"]
