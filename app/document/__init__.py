"""The graph document (Qt-free): JSON model and edits, the layer catalogue, shape inference, validation."""
from .catalogue import (
    CATEGORIES,
    NodeSpec,
    ParamSpec,
    PortSpec,
    catalogue,
    get_spec,
)
from .document import (
    UNSET,
    Document,
    DocumentEvent,
    Edge,
    Node,
    RemovedNode,
    load_document,
    loads_document,
    migrate,
    save_document,
)
from .errors import DocumentError, ParamError, Problem, ShapeError, format_problem, format_shape
from .shapes import GraphInfo, NodeInfo, infer_shapes
from .validate import validate

__all__ = [
    "CATEGORIES", "NodeSpec", "ParamSpec", "PortSpec", "catalogue", "get_spec",
    "UNSET", "Document", "DocumentEvent", "Edge", "Node", "RemovedNode",
    "load_document", "loads_document", "migrate", "save_document",
    "DocumentError", "ParamError", "Problem", "ShapeError", "format_problem", "format_shape",
    "GraphInfo", "NodeInfo", "infer_shapes", "validate",
]
