"""The graphics items of the canvas: NodeItem (a layer), PortItem (a typed port), WireItem (an edge),
ErrorBadge (the red "!" whose tooltip says what is wrong). They draw document state; they never edit it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPainterPathStroker,
    QPen,
    QPolygonF,
)
from PySide6.QtWidgets import QGraphicsItem, QGraphicsObject, QStyleOptionGraphicsItem, QWidget

from app.document import Edge, NodeInfo, NodeSpec, Problem, format_shape
from app.document.blocks import PORT_TYPES, BlockDef, passed_values
from app.document.document import Document, Node
from widgets.theme import current_theme, icon

if TYPE_CHECKING:
    from .scene import GraphScene

NODE_W = 180.0
HEADER_H = 30.0
LINE_H = 17.0
PORT_R = 6.0
PORT_GAP = 22.0
FIRST_PORT_Y = HEADER_H + 16
DOC_SCALE = 1.75  # documents place layers ~160-180 units apart (DESIGN.md); the canvas draws them wider
GRID = 10.0 * DOC_SCALE  # the snap grid is 10 document units
Z_WIRE, Z_NODE, Z_DRAG = 0.0, 10.0, 100.0
BLOCK_STACK = 5.0  # how far each card behind a block instance shows
TITLE_X = 32.0  # where a node's title starts, right of its icon
MIN_TITLE_PT = 7.5  # an id too long for the header shrinks to this size before it is elided
MIN_KIND_W = 24.0  # less room than this beside the title: the type label is left out
FOOTER_GAP = 6.0  # px between the output shape and the parameter count
FOOTER_PAD = 12.0  # the footer's margins: a little wider than the rows above, for a whole shape


def to_scene(pos: Any) -> QPointF:
    """Document position -> scene point."""
    return QPointF(pos[0] * DOC_SCALE, pos[1] * DOC_SCALE)


def to_doc(point: QPointF) -> list[float]:
    """Scene point -> document position (rounded, so files stay readable)."""
    return [round(point.x() / DOC_SCALE, 1), round(point.y() / DOC_SCALE, 1)]


def _fonts() -> tuple[QFont, QFont, QFont]:
    title = QFont()
    title.setPointSizeF(9.5)
    title.setBold(True)
    body = QFont()
    body.setPointSizeF(8.5)
    small = QFont()
    small.setPointSizeF(7.5)
    return title, body, small


def format_count(n: int) -> str:
    """12345 -> '12.3k', for the parameter count on a node."""
    if n < 1000:
        return str(n)
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f}{unit}" if value < 100 else f"{value:.0f}{unit}"
    return str(n)


def param_text(value: Any) -> str:
    if isinstance(value, list):
        return "×".join(str(v) for v in value) if all(isinstance(v, int) for v in value) else str(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass
class HeaderLayout:
    """What a node's header draws where (`NodeItem.header_layout`); an empty text is not drawn."""

    title: str
    title_font: QFont
    title_rect: QRectF
    kind: str
    kind_rect: QRectF
    pill_text: str
    pill_rect: QRectF


@dataclass
class FooterLayout:
    """The footer's output shape and parameter count, as drawn (`NodeItem.footer_layout`)."""

    shape: str
    shape_rect: QRectF
    count: str
    count_rect: QRectF


def _copies(params: dict[str, Any]) -> int:
    """How many copies an instance with these parameters runs (a bad repeat runs one, as `expand` does)."""
    repeat = params.get("repeat", 1)
    return repeat if isinstance(repeat, int) and not isinstance(repeat, bool) and repeat > 1 else 1


def layer_count(root: Document, d: BlockDef, params: dict[str, Any] | None = None,
                _chain: tuple[str, ...] = ()) -> int:
    """How many layers one copy of an instance of `d` with `params` runs: its own, and those of the
    blocks inside it, as many times as each repeats (an exposed parameter may set an inner repeat);
    ports are not layers, and a definition that uses itself counts once."""
    inner = passed_values(d, params or {})
    total = 0
    for node in d.graph.nodes.values():
        if node.type in PORT_TYPES:
            continue
        values = {**node.params, **inner.get(node.id, {})}
        sub = root.blocks.get(values.get("block")) if node.type == "Block" else None
        if sub is None or sub.name in (*_chain, d.name):
            total += 1
            continue
        total += layer_count(root, sub, values, (*_chain, d.name)) * _copies(values)
    return total


def block_contents(root: Document, d: BlockDef, params: dict[str, Any] | None = None) -> str:
    """What one copy of an instance of `d` with `params` holds, truthfully: "7 layers", or "2 blocks · 16
    layers" when blocks are inside it (each copy of a repeat counted, the layers counted through them)."""
    n = layer_count(root, d, params)
    text = f"{n} layer{'s' if n != 1 else ''}"
    inner = passed_values(d, params or {})
    blocks_in = sum(_copies({**node.params, **inner.get(node.id, {})})
                    for node in d.graph.nodes.values() if node.type == "Block")
    return f"{blocks_in} block{'s' if blocks_in != 1 else ''} · {text}" if blocks_in else text


class PortItem(QGraphicsItem):
    """An input or output port; hovering shows its name and the shape it carries."""

    def __init__(self, node: NodeItem, name: str, is_input: bool, variadic: bool = False) -> None:
        super().__init__(node)
        self.node_item, self.name, self.is_input, self.variadic = node, name, is_input, variadic
        self.connected = False
        self.fault: str | None = None  # "error" / "warning" when this port is what is wrong
        self.setAcceptHoverEvents(True)
        self.setCursor(Qt.CrossCursor)
        self.setCacheMode(QGraphicsItem.DeviceCoordinateCache)
        self._hover = False

    @property
    def node_id(self) -> str:
        return self.node_item.node_id

    _RECT = QRectF(-(PORT_R + 4), -(PORT_R + 4), 2 * (PORT_R + 4), 2 * (PORT_R + 4))
    _SHAPE = QPainterPath()
    _SHAPE.addEllipse(_RECT)

    def boundingRect(self) -> QRectF:
        return self._RECT

    def shape(self) -> QPainterPath:
        return self._SHAPE

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        theme = current_theme()
        fault_color = theme.color("error" if self.fault == "error" else "warning")
        color = fault_color if self.fault else self.node_item.category_color
        painter.setRenderHint(QPainter.Antialiasing)
        painter.setPen(QPen(color, 2.0 if not self.fault else 2.5))
        painter.setBrush(QBrush(color) if (self.connected or self._hover) else theme.color("node_body"))
        r = PORT_R + (1.5 if self._hover else 0.0)
        if self.variadic:  # a merge port takes many wires: draw it as a pill
            painter.drawRoundedRect(QRectF(-r * 0.8, -r * 1.5, 1.6 * r, 3 * r), r * 0.8, r * 0.8)
        else:
            painter.drawEllipse(QPointF(0, 0), r, r)
        if self.fault:
            painter.setPen(QPen(fault_color, 1.5))
            painter.setBrush(Qt.NoBrush)
            painter.drawEllipse(QPointF(0, 0), r + 3.5, r + 3.5)

    def hoverEnterEvent(self, event: Any) -> None:
        self._hover = True
        self.update()

    def hoverLeaveEvent(self, event: Any) -> None:
        self._hover = False
        self.update()


class ErrorBadge(QGraphicsItem):
    """The badge on a node with a problem; its tooltip is the problem message. An error is a red
    disc; a warning (a port left unwired, an output going nowhere) an amber triangle, so the two
    differ in shape as well as colour."""

    SIZE = 20.0

    def __init__(self, parent: NodeItem) -> None:
        super().__init__(parent)
        self.setAcceptHoverEvents(True)
        self.severity = "error"

    def boundingRect(self) -> QRectF:
        return QRectF(-self.SIZE / 2, -self.SIZE / 2, self.SIZE, self.SIZE)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        theme = current_theme()
        painter.setRenderHint(QPainter.Antialiasing)
        painter.setPen(QPen(QColor("#ffffff"), 1.5))
        rect = self.boundingRect().adjusted(1, 1, -1, -1)
        text_rect = self.boundingRect()
        if self.severity == "error":
            painter.setBrush(theme.color("error"))
            painter.drawEllipse(rect)
        else:
            painter.setBrush(theme.color("warning"))
            painter.drawPolygon(QPolygonF([QPointF(0, rect.top() - 1),
                                           QPointF(rect.right() + 1, rect.bottom()),
                                           QPointF(rect.left() - 1, rect.bottom())]))
            text_rect = text_rect.adjusted(0, 3, 0, 0)
        font = QFont()
        font.setBold(True)
        font.setPointSizeF(9)
        painter.setFont(font)
        painter.setPen(QColor("#ffffff"))
        painter.drawText(text_rect, Qt.AlignCenter, "!")


class NodeItem(QGraphicsObject):
    """One node: header with icon, name and type; key parameters; output shape and parameter count.
    A block instance (`block`: its definition) is drawn as a stack of cards in the definition's colour,
    with its name, "×N" when it repeats, and its exposed parameters."""

    def __init__(self, node: Node, spec: NodeSpec | None, block: BlockDef | None = None) -> None:
        super().__init__()
        self.node_id = node.id
        self.spec = spec
        self.block = block
        self.setFlags(QGraphicsItem.ItemIsMovable | QGraphicsItem.ItemIsSelectable
                      | QGraphicsItem.ItemSendsGeometryChanges)
        self.setCacheMode(QGraphicsItem.DeviceCoordinateCache)  # repainting 300 nodes per pan frame is slow
        self.setZValue(Z_NODE)
        self.setAcceptHoverEvents(True)
        self.category_color = self._color()
        self.wires: set[WireItem] = set()
        self.inputs: dict[str, PortItem] = {}
        self.outputs: dict[str, PortItem] = {}
        self._repeat = 1
        if spec is not None:
            for i, port in enumerate(spec.inputs):
                item = PortItem(self, port.name, True, port.variadic)
                item.setPos(0.0, FIRST_PORT_Y + i * PORT_GAP)
                self.inputs[port.name] = item
            for i, name in enumerate(spec.outputs):
                item = PortItem(self, name, False)
                item.setPos(NODE_W, FIRST_PORT_Y + i * PORT_GAP)
                self.outputs[name] = item
        self.badge = ErrorBadge(self)
        self.badge.setPos(NODE_W - 4, 4)
        self.badge.setVisible(False)
        self._label = node.label
        self._type = node.type
        self._lines: list[tuple[str, str]] = []
        self._shape_text = ""
        self._count_text = ""
        self._problem: str | None = None
        self._severity: str | None = None  # "error" or "warning" while there is a problem
        self._blocked = False
        self._height = HEADER_H + 2 * LINE_H + 14
        self._relayout()
        self.setPos(to_scene(node.pos))
        self.signature: tuple | None = None

    def _color(self) -> QColor:
        if self.block is not None:
            return QColor(self.block.color)
        return current_theme().category_color(self.spec.category if self.spec else "")

    def port_signature(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The names of the input and output ports drawn (an instance's follow its definition)."""
        return tuple(self.inputs), tuple(self.outputs)

    def set_block(self, spec: NodeSpec | None, block: BlockDef | None) -> None:
        """The instance's definition changed (not its ports): take its parameters, name and colour."""
        self.spec, self.block = spec, block
        self.category_color = self._color()
        self.signature = None  # the next set_state repaints
        for port in (*self.inputs.values(), *self.outputs.values()):
            port.update()

    @property
    def is_block(self) -> bool:
        return self._type == "Block"

    # --- state from the document ------------------------------------------------------------------
    def set_state(self, node: Node, info: NodeInfo | None, status: Problem | None = None) -> None:
        """Take the node's label, key params, shapes and problem (`status`: what to show, error or
        warning; default the inference's problem); repaints only if something changed."""
        spec = self.spec
        lines: list[tuple[str, str]] = []
        params = info.params if info is not None and info.params is not None else dict(node.params)
        if node.type == "Block":
            repeat = params.get("repeat", 1)
            self._repeat = repeat if isinstance(repeat, int) and repeat > 1 else 1
            lines = self._block_lines(params)
        elif spec is not None:
            for key in spec.key_params[:3]:
                p = spec.param(key)
                value = params.get(key, p.default if p else None)
                if value is None or (p is not None and not p.applies(params)):
                    continue  # unset or irrelevant (Upsample's size when it scales): nothing to read
                lines.append((key, param_text(value)))
        problem = status if status is not None else (info.problem if info is not None else None)
        shape = info.shape if info is not None else None
        if node.type == "BlockOutput":  # what leaves the block through this port
            entering = info.in_shapes.get("in") if info is not None else None
            shape_text = f"→ {format_shape(entering)}" if entering is not None else "?"
        elif spec is not None and not spec.outputs:
            shape_text = "→ scalar loss" if info is not None and info.ok else ""
        else:
            shape_text = format_shape(shape) if shape is not None else "?"
        count = info.param_count if info is not None else None
        count_text = f"{format_count(count)} params" if count else ""
        fault_port = problem.port if problem is not None else None
        signature = (node.label, tuple(lines), shape_text, count_text, problem.message if problem else None,
                     fault_port, info.blocked if info else False, problem.severity if problem else None,
                     self._repeat, self.block.name if self.block else None)
        if signature == self.signature:
            return
        self.signature = signature
        self._label = node.label
        self._lines, self._shape_text, self._count_text = lines, shape_text, count_text
        self._problem = problem.message if problem else None
        self._severity = problem.severity if problem else None
        self._blocked = bool(info and info.blocked)
        for name, port in self.inputs.items():
            port.fault = self._severity if problem is not None and fault_port == name else None
            port.update()
        self.badge.setVisible(problem is not None)
        if problem is not None:
            self.badge.severity = problem.severity
            where = f"port {fault_port}: " if fault_port else ""
            kind = "Warning — " if problem.severity == "warning" else ""
            self.badge.setToolTip(f"{kind}{node.label}: {where}{problem.message}")
            self.badge.update()
        self._relayout()
        self._update_tooltip(info)
        self.update()

    def _block_lines(self, params: dict[str, Any]) -> list[tuple[str, str]]:
        """An instance's body: its exposed parameters (two at most), then what it holds (its blocks and
        layers, counted through the blocks inside it)."""
        lines: list[tuple[str, str]] = []
        spec = self.spec
        exposed = [p for p in (spec.params if spec is not None else ()) if p.name not in ("block", "repeat")]
        for p in exposed[:2]:
            value = params.get(p.name, p.default)
            if value is not None:
                lines.append((p.name, param_text(value)))
        if self.block is not None:
            text = block_contents(self.block.graph.root, self.block, params)
            lines.append(("block", f"{text} × {self._repeat}" if self._repeat > 1 else text))
        return lines

    @property
    def repeat(self) -> int:
        return self._repeat

    @property
    def problem(self) -> str | None:
        """The message of the node's error or warning, if it has one."""
        return self._problem

    @property
    def severity(self) -> str | None:
        """'error', 'warning', or None when the node is fine."""
        return self._severity

    def _update_tooltip(self, info: NodeInfo | None) -> None:
        spec = self.spec
        kind = f"block {self.block.name}" if self.block is not None else self._type
        parts = [f"<b>{self._label}</b> — {kind}" + (f" ×{self._repeat}" if self._repeat > 1 else "")]
        if spec is not None:
            parts.append(spec.description)
        if self.block is not None:
            parts.append("<i>Double-click to open the block</i>")
        if self._problem:
            color = current_theme().error if self._severity == "error" else current_theme().warning
            parts.append(f"<span style='color:{color}'>⚠ {self._problem}</span>")
        self.setToolTip("<br>".join(parts))
        if info is None:
            return
        for name, port in self.inputs.items():
            shape = info.in_shapes.get(name)
            if isinstance(shape, list):
                text = ", ".join(format_shape(s) if s is not None else "?" for s in shape)
            else:
                text = format_shape(shape) if shape is not None else "not connected"
            port.setToolTip(f"input {name}: {text}")
        for name, port in self.outputs.items():
            shape = info.out_shapes.get(name)
            port.setToolTip(f"output {name}: {format_shape(shape) if shape is not None else '?'}")

    def _relayout(self) -> None:
        n_ports = max(len(self.inputs), len(self.outputs), 1)
        body = HEADER_H + 8 + len(self._lines) * LINE_H + LINE_H + 10
        ports = HEADER_H + 16 + (n_ports - 1) * PORT_GAP + 16
        height = max(body, ports, HEADER_H + 30)
        if height != self._height or not hasattr(self, "_bounds"):
            self.prepareGeometryChange()
            self._height = height
            stack = 2 * BLOCK_STACK if self._type == "Block" else 0.0  # the cards behind an instance
            self._bounds = QRectF(-4, -4 - stack, NODE_W + 8 + stack, height + 8 + stack)

    # --- geometry ---------------------------------------------------------------------------------
    @property
    def height(self) -> float:
        return self._height

    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addRoundedRect(QRectF(0, 0, NODE_W, self._height), 8, 8)
        return path

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        theme = current_theme()
        painter.setRenderHint(QPainter.Antialiasing)
        painter.setRenderHint(QPainter.TextAntialiasing)
        rect = QRectF(0, 0, NODE_W, self._height)
        error = self._severity == "error"
        warning = self._severity == "warning"
        accent = theme.color("error") if error else self.category_color
        if self.is_block:  # a block is a stack of cards: one behind, two when it repeats
            for k in range(2 if self._repeat > 1 else 1, 0, -1):
                card = rect.translated(BLOCK_STACK * k, -BLOCK_STACK * k)
                painter.setPen(QPen(_mix(theme.color("node_border"), self.category_color, 0.6), 1.2))
                painter.setBrush(_mix(theme.color("node_body"), self.category_color, 0.18 + 0.08 * k))
                painter.drawRoundedRect(card, 8, 8)
        # soft drop shadow
        painter.setPen(Qt.NoPen)
        painter.setBrush(QColor(0, 0, 0, 60 if theme.name == "dark" else 28))
        painter.drawRoundedRect(rect.translated(0, 2.5), 8, 8)
        # body
        if self.isSelected():
            border = QPen(theme.color("node_selected"), 2.5)
        elif error:
            border = QPen(theme.color("error"), 2.0)
        elif warning:
            border = QPen(theme.color("warning"), 1.8, Qt.DashLine)
        else:
            border = QPen(theme.color("node_border"), 1.0)
        painter.setPen(border)
        body = theme.color("node_body")
        if error:
            body = _mix(body, theme.color("error"), 0.10)
        painter.setBrush(body)
        painter.drawRoundedRect(rect, 8, 8)
        # header band in the category colour
        header = QPainterPath()
        header.addRoundedRect(QRectF(0, 0, NODE_W, HEADER_H), 8, 8)
        header.addRect(QRectF(0, HEADER_H / 2, NODE_W, HEADER_H / 2))
        painter.setPen(Qt.NoPen)
        painter.setBrush(_mix(body, accent, 0.22 if theme.name == "light" else 0.35))
        painter.drawPath(header.simplified())
        painter.setBrush(accent)
        painter.drawRect(QRectF(0, HEADER_H - 2, NODE_W, 2))

        title_font, body_font, small_font = _fonts()
        icon("block" if self.is_block else (self.spec.icon if self.spec else "layer"), accent.name()).paint(
            painter, QRectF(9, (HEADER_H - 18) / 2, 18, 18).toRect())
        head = self.header_layout()
        painter.setFont(head.title_font)
        painter.setPen(theme.color("text"))
        painter.drawText(head.title_rect, Qt.AlignVCenter | Qt.AlignLeft, head.title)
        if head.pill_text:  # "×3" in a pill of the block's colour
            painter.setPen(Qt.NoPen)
            painter.setBrush(accent)
            painter.drawRoundedRect(head.pill_rect, 9, 9)
            painter.setFont(title_font)
            painter.setPen(QColor("#ffffff"))
            painter.drawText(head.pill_rect, Qt.AlignCenter, head.pill_text)
        if head.kind:
            painter.setFont(small_font)
            painter.setPen(theme.color("muted"))
            painter.drawText(head.kind_rect, Qt.AlignVCenter | Qt.AlignRight, head.kind)

        # key parameters
        painter.setFont(body_font)
        y = HEADER_H + 6
        left, right = 16.0, NODE_W - 16.0
        for key, value in self._lines:
            line = QRectF(left, y, right - left, LINE_H)
            painter.setPen(theme.color("muted"))
            painter.drawText(line, Qt.AlignVCenter | Qt.AlignLeft, key)
            painter.setPen(theme.color("text"))
            painter.drawText(line, Qt.AlignVCenter | Qt.AlignRight, value)
            y += LINE_H
        # footer: output shape and parameter count
        foot = self.footer_layout()
        y = foot.shape_rect.top()
        painter.setPen(QPen(theme.color("node_border"), 0.8))
        painter.drawLine(QPointF(10, y - 2), QPointF(NODE_W - 10, y - 2))
        painter.setFont(body_font)
        painter.setPen(theme.color("error") if error else
                       (theme.color("muted") if self._blocked else theme.color("accent")))
        painter.drawText(foot.shape_rect, Qt.AlignVCenter | Qt.AlignLeft, foot.shape)
        painter.setFont(small_font)
        painter.setPen(theme.color("muted"))
        painter.drawText(foot.count_rect, Qt.AlignVCenter | Qt.AlignRight, foot.count)

    def header_layout(self) -> HeaderLayout:
        """Where the header's texts go. The id (or name) always shows whole: the type label beside it
        is elided first, then left out (the tooltip has it); only an id too long for the whole header
        is drawn in a smaller font, and elided past that."""
        title_font, _, small_font = _fonts()
        right = NODE_W - (22 if self._severity else 10)  # the badge sits in the corner
        pill_text, pill_rect = "", QRectF()
        if self._repeat > 1:
            pill_text = f"×{self._repeat}"
            pill_w = QFontMetricsF(title_font).horizontalAdvance(pill_text) + 12
            pill_rect = QRectF(right - pill_w, (HEADER_H - 18) / 2, pill_w, 18)
            right -= pill_w + 6
        title = self._label
        room = right - TITLE_X
        fm = QFontMetricsF(title_font)
        while fm.horizontalAdvance(title) > room and title_font.pointSizeF() > MIN_TITLE_PT:
            title_font.setPointSizeF(title_font.pointSizeF() - 0.5)
            fm = QFontMetricsF(title_font)
        if fm.horizontalAdvance(title) > room:
            title = fm.elidedText(title, Qt.ElideRight, room)
        title_w = min(fm.horizontalAdvance(title) + 1, room)
        title_rect = QRectF(TITLE_X, 0, title_w, HEADER_H)
        kind = self.block.name if self.block is not None else self._type
        kind_text, kind_rect = "", QRectF()
        kind_room = right - (TITLE_X + title_w + 8)
        if self._label != kind and kind_room >= MIN_KIND_W:
            small = QFontMetricsF(small_font)
            kind_text = small.elidedText(kind, Qt.ElideRight, kind_room)
            if kind_text != kind and len(kind_text) < 4:  # "re…" says nothing
                kind_text = ""
            else:
                kind_w = small.horizontalAdvance(kind_text) + 1
                kind_rect = QRectF(right - kind_w, 0, kind_w, HEADER_H)
        return HeaderLayout(title, title_font, title_rect, kind_text, kind_rect, pill_text, pill_rect)

    def footer_layout(self) -> FooterLayout:
        """Where the output shape and the parameter count go, side by side and never overlapping: a
        shape too wide beside the count drops its batch dimension ("32×16×16"), then is elided."""
        _, body_font, small_font = _fonts()
        left, right = FOOTER_PAD, NODE_W - FOOTER_PAD
        y = self._height - LINE_H - 6
        count = self._count_text
        count_w = QFontMetricsF(small_font).horizontalAdvance(count) + 1 if count else 0.0
        room = right - left - (count_w + FOOTER_GAP if count else 0.0)
        fm = QFontMetricsF(body_font)
        shape = self._shape_text
        if fm.horizontalAdvance(shape) > room and shape.startswith("("):
            shape = compact_shape_label(shape)
        if fm.horizontalAdvance(shape) > room:
            shape = fm.elidedText(shape, Qt.ElideRight, room)
        shape_w = min(fm.horizontalAdvance(shape) + 1, room)
        return FooterLayout(shape, QRectF(left, y, shape_w, LINE_H), count,
                            QRectF(right - count_w, y, count_w, LINE_H))

    # --- interaction ------------------------------------------------------------------------------
    def itemChange(self, change: QGraphicsItem.GraphicsItemChange, value: Any) -> Any:
        if change == QGraphicsItem.ItemPositionChange:
            scene = self.scene()
            if scene is not None and getattr(scene, "snap_to_grid", False):
                return QPointF(round(value.x() / GRID) * GRID, round(value.y() / GRID) * GRID)
        elif change == QGraphicsItem.ItemPositionHasChanged:
            for wire in self.wires:
                wire.update_path()
        elif change == QGraphicsItem.ItemSelectedHasChanged:
            for wire in self.wires:
                wire.update()
        return super().itemChange(change, value)

    def port(self, name: str, is_input: bool) -> PortItem | None:
        return (self.inputs if is_input else self.outputs).get(name)


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    return QColor.fromRgbF(a.redF() * (1 - t) + b.redF() * t, a.greenF() * (1 - t) + b.greenF() * t,
                           a.blueF() * (1 - t) + b.blueF() * t)


_WIRE_PENS: dict[tuple[str, str], tuple[QColor, QPen]] = {}


def _wire_pen(theme_name: str, state: str) -> tuple[QColor, QPen]:
    key = (theme_name, state)
    if key not in _WIRE_PENS:
        theme = current_theme()
        color = theme.color({"fault": "error", "selected": "node_selected", "plain": "wire"}[state])
        pen = QPen(color, 2.6 if state == "selected" else 1.8)
        if state == "fault":
            pen.setStyle(Qt.DashLine)
        _WIRE_PENS[key] = (color, pen)
    return _WIRE_PENS[key]


def _view_moving(viewport: QWidget) -> bool:
    view = viewport.parentWidget()
    return bool(getattr(view, "moving", False))


RETURN_CLEARANCE = 70.0  # how far below the ports a wire back to the left runs, when they are level


def wire_path(p1: QPointF, p2: QPointF) -> QPainterPath:
    """A horizontal S-curve from an output port to an input port. A wire back to the left (into
    the next band of a wrapped layout) leaves to the right, turns, runs back along the channel
    between the two rows, and turns again into the input, instead of looping across the nodes."""
    path = QPainterPath(p1)
    if p2.x() >= p1.x() - 10.0:
        dx = max(abs(p2.x() - p1.x()) * 0.5, 40.0)
        path.cubicTo(QPointF(p1.x() + dx, p1.y()), QPointF(p2.x() - dx, p2.y()), p2)
        return path
    if abs(p2.y() - p1.y()) >= 2 * RETURN_CLEARANCE:
        channel = (p1.y() + p2.y()) / 2
    else:  # ports about level: pass below both
        channel = max(p1.y(), p2.y()) + RETURN_CLEARANCE
    bend = min(max(abs(channel - p1.y()), abs(channel - p2.y())) * 0.6, 60.0)
    path.cubicTo(QPointF(p1.x() + bend, p1.y()), QPointF(p1.x() + bend, channel), QPointF(p1.x(), channel))
    path.lineTo(QPointF(p2.x(), channel))
    path.cubicTo(QPointF(p2.x() - bend, channel), QPointF(p2.x() - bend, p2.y()), p2)
    return path


LABEL_PORT_GAP = 3.0  # px between a wire's shape label and the ports at its ends


def compact_shape_label(label: str) -> str:
    """"(N, 16, 8, 8)" -> "16×8×8": the shape of one sample, for a wire too short for the whole label."""
    dims = [d.strip() for d in label.strip("()").split(",") if d.strip()]
    if len(dims) > 1 and not dims[0].isdigit():
        dims = dims[1:]
    return "×".join(dims)


class WireItem(QGraphicsItem):
    """A wire between two ports, labelled with the tensor shape it carries."""

    def __init__(self, edge: Edge, src: PortItem, dst: PortItem) -> None:
        super().__init__()
        self.edge = edge
        self.src, self.dst = src, dst
        self.setFlags(QGraphicsItem.ItemIsSelectable)
        self.setZValue(Z_WIRE)

        self.label = ""
        self._shown_label = ""  # the label as drawn: shortened or left out where the wire is short
        self.fault = False
        self._path = QPainterPath()
        self._shape = QPainterPath()
        self._label_rect = QRectF()
        self._bounds = QRectF()
        src.node_item.wires.add(self)
        dst.node_item.wires.add(self)
        self.update_path()

    def detach(self) -> None:
        self.src.node_item.wires.discard(self)
        self.dst.node_item.wires.discard(self)

    def set_label(self, text: str, fault: bool) -> None:
        if (text, fault) != (self.label, self.fault):
            self.label, self.fault = text, fault
            self.update_path()
            self.update()

    def update_path(self) -> None:
        p1, p2 = self.src.scenePos(), self.dst.scenePos()
        self.prepareGeometryChange()
        self._path = wire_path(p1, p2)
        stroker = QPainterPathStroker()
        stroker.setWidth(10)
        self._shape = stroker.createStroke(self._path)
        self._shown_label = self._fitting_label(p1, p2)
        if self._shown_label:
            _, _, small = _fonts()
            w = QFontMetricsF(small).horizontalAdvance(self._shown_label) + 12
            mid = self._path.pointAtPercent(0.5)
            self._label_rect = QRectF(mid.x() - w / 2, mid.y() - 9, w, 18)
        else:
            self._label_rect = QRectF()
        self.setToolTip(f"{self.edge.src} → {self.edge.dst}: {self.label}" if self.label else "")
        self._bounds = self._path.boundingRect().adjusted(-4, -4, 4, 4).united(self._label_rect)

    def _fitting_label(self, p1: QPointF, p2: QPointF) -> str:
        """The label as it fits between the two ports of a forward wire: whole, else without the batch
        dimension ("16×8×8"), else none (the tooltip has it); it never runs under a port."""
        if not self.label or p2.x() < p1.x() - 10.0:  # a wire back into the next band: room on its channel
            return self.label
        _, _, small = _fonts()
        metrics = QFontMetricsF(small)
        room = abs(p2.x() - p1.x()) - 2 * (PORT_R + LABEL_PORT_GAP)
        for text in (self.label, compact_shape_label(self.label)):
            if metrics.horizontalAdvance(text) + 12 <= room:
                return text
        return ""

    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        return self._shape

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        # runs for every visible wire on every frame: keep the Python work small
        theme = current_theme()
        painter.setRenderHint(QPainter.Antialiasing, not (widget is not None and _view_moving(widget)))
        selected = self.isSelected() or self.src.node_item.isSelected() or self.dst.node_item.isSelected()
        state = "fault" if self.fault else ("selected" if selected else "plain")
        color, pen = _wire_pen(theme.name, state)
        painter.setPen(pen)
        painter.setBrush(Qt.NoBrush)
        painter.drawPath(self._path)
        if self._shown_label and painter.worldTransform().m11() > 0.45:  # unreadable when zoomed far out
            _, _, small = _fonts()
            painter.setFont(small)
            painter.setPen(QPen(color, 1.0))
            painter.setBrush(theme.color("wire_label_bg"))
            painter.drawRoundedRect(self._label_rect, 9, 9)
            painter.setPen(theme.color("text") if not self.fault else color)
            painter.drawText(self._label_rect, Qt.AlignCenter, self._shown_label)


class DragWire(QGraphicsItem):
    """The wire that follows the mouse while connecting."""

    def __init__(self, port: PortItem) -> None:
        super().__init__()
        self.port = port
        self.setZValue(Z_DRAG)
        self.end = port.scenePos()
        self.valid: bool | None = None
        self._path = QPainterPath()
        self.set_end(self.end)

    def set_end(self, pos: QPointF, valid: bool | None = None) -> None:
        self.prepareGeometryChange()
        self.end, self.valid = pos, valid
        a = self.port.scenePos()
        self._path = wire_path(pos, a) if self.port.is_input else wire_path(a, pos)

    def boundingRect(self) -> QRectF:
        return self._path.boundingRect().adjusted(-4, -4, 4, 4)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        theme = current_theme()
        painter.setRenderHint(QPainter.Antialiasing)
        color = {True: theme.color("ok"), False: theme.color("error")}.get(self.valid, theme.color("accent"))
        pen = QPen(color, 2.2, Qt.DashLine)
        painter.setPen(pen)
        painter.drawPath(self._path)


def scene_of(item: QGraphicsItem) -> GraphScene:
    return item.scene()  # type: ignore[return-value]
