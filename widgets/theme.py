"""Light and dark themes: the Qt palette, the QSS style sheet from assets/styles, the canvas colours,
and icons from assets/icons tinted for the theme."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from PySide6.QtCore import QByteArray, QSize, Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QApplication

ASSETS = Path(__file__).resolve().parent.parent / "assets"
ICONS = ASSETS / "icons"
STYLES = ASSETS / "styles"


@dataclass(frozen=True)
class Theme:
    """Colours shared by the widgets and the canvas painters."""

    name: str
    window: str
    base: str
    text: str
    muted: str
    accent: str
    canvas: str
    grid_minor: str
    grid_major: str
    node_body: str
    node_border: str
    node_selected: str
    wire: str
    wire_label_bg: str
    error: str
    warning: str
    ok: str
    category_colors: tuple[tuple[str, str], ...]

    def category_color(self, category: str) -> QColor:
        return QColor(dict(self.category_colors).get(category, self.accent))

    def color(self, field: str) -> QColor:
        return QColor(getattr(self, field))


_CATEGORY_HUES = (
    ("Input/Output", "#2f9e6e"), ("Dense", "#3b7dd8"), ("Convolution", "#7a55c7"), ("Pooling", "#9a6ad6"),
    ("Normalization", "#c08a1e"), ("Recurrent", "#c0567a"), ("Attention", "#d0643c"),
    ("Activation", "#d4a017"), ("Reshape", "#5f8a8b"), ("Merge", "#2b9cb0"), ("Regularization", "#8a8f98"),
    ("Loss", "#c94141"),
)

LIGHT = Theme(
    name="light", window="#f4f5f7", base="#ffffff", text="#1f2328", muted="#6a7380", accent="#3b7dd8",
    canvas="#eef0f3", grid_minor="#e3e6ea", grid_major="#d3d8de", node_body="#ffffff",
    node_border="#c3c9d1", node_selected="#3b7dd8", wire="#7d8896", wire_label_bg="#ffffff",
    error="#d93838", warning="#d08a00", ok="#2f9e6e", category_colors=_CATEGORY_HUES,
)
DARK = Theme(
    name="dark", window="#1e2126", base="#262a30", text="#e3e6ea", muted="#9aa3ae", accent="#5b9bf0",
    canvas="#181b1f", grid_minor="#1f2328", grid_major="#2a2f36", node_body="#2a2f36",
    node_border="#434b55", node_selected="#5b9bf0", wire="#8b96a3", wire_label_bg="#23272d",
    error="#f05252", warning="#e0a020", ok="#3fbf86", category_colors=_CATEGORY_HUES,
)

_current: Theme = LIGHT


def current_theme() -> Theme:
    return _current


def system_prefers_dark() -> bool:
    hints = QGuiApplication.styleHints()
    return hints is not None and hints.colorScheme() == Qt.ColorScheme.Dark


def apply_theme(app: QApplication, name: str | None = None) -> Theme:
    """Apply 'light', 'dark', or (None) whatever the system prefers; returns the theme."""
    global _current
    if name is None:
        name = "dark" if system_prefers_dark() else "light"
    theme = DARK if name == "dark" else LIGHT
    _current = theme
    app.setStyle("Fusion")  # the same look on every platform, so both palettes render as designed
    pal = QPalette()
    roles = {
        QPalette.Window: theme.window, QPalette.WindowText: theme.text, QPalette.Base: theme.base,
        QPalette.AlternateBase: theme.window, QPalette.Text: theme.text, QPalette.Button: theme.window,
        QPalette.ButtonText: theme.text, QPalette.Highlight: theme.accent,
        QPalette.HighlightedText: "#ffffff",
        QPalette.ToolTipBase: theme.base, QPalette.ToolTipText: theme.text,
        QPalette.PlaceholderText: theme.muted, QPalette.Link: theme.accent,
    }
    for role, color in roles.items():
        pal.setColor(role, QColor(color))
    for role in (QPalette.Text, QPalette.WindowText, QPalette.ButtonText):
        pal.setColor(QPalette.Disabled, role, QColor(theme.muted))
    app.setPalette(pal)
    qss = STYLES / f"{theme.name}.qss"
    sheet = qss.read_text(encoding="utf-8") if qss.exists() else ""
    app.setStyleSheet(sheet.replace("@ICONS@", ICONS.as_posix()))  # url() needs an absolute path
    icon.cache_clear()
    return theme


@lru_cache(maxsize=256)
def icon(name: str, color: str | None = None) -> QIcon:
    """An icon from assets/icons/<name>.svg; `currentColor` in the SVG becomes `color` (default: text)."""
    path = ICONS / f"{name}.svg"
    if not path.exists():
        path = ICONS / "layer.svg"
    source = path.read_text(encoding="utf-8")
    result = QIcon()
    # a selected row is filled with the accent colour, which would swallow an icon of that colour:
    # selected, the icon turns white like the row's text
    for mode, fill in ((QIcon.Normal, color or _current.text), (QIcon.Selected, "#ffffff")):
        renderer = QSvgRenderer(QByteArray(source.replace("currentColor", fill).encode("utf-8")))
        for size in (16, 18, 24, 32, 36, 48, 64):
            pixmap = QPixmap(QSize(size, size))
            pixmap.fill(Qt.transparent)
            painter = QPainter(pixmap)
            renderer.render(painter)
            painter.end()
            result.addPixmap(pixmap, mode)
    return result
