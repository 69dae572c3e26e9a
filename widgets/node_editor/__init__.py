"""The node editor: the canvas where the network is wired (scene, view, items, commands, minimap)."""
from .editor import NodeEditor
from .items import NodeItem, PortItem, WireItem
from .scene import GraphScene
from .view import NODE_MIME, GraphView

__all__ = ["NODE_MIME", "GraphScene", "GraphView", "NodeEditor", "NodeItem", "PortItem", "WireItem"]
