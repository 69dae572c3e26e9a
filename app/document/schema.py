"""Builds the JSON Schema (draft 2020-12) of the current document format from the catalogue.

`python -m app.document.schema` rewrites wiregrad.graph.schema.json; a test keeps the two in step.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .catalogue import ParamSpec, catalogue
from .document import FORMAT, MAX_COORD, MAX_EDGES, MAX_NODES, TRAINING_FIELDS, VERSION

SCHEMA_PATH = Path(__file__).with_name("wiregrad.graph.schema.json")


def _bounded(base: dict[str, Any], p: ParamSpec) -> dict[str, Any]:
    if p.min is not None:
        base["minimum"] = p.min
    if p.max is not None:
        base["maximum"] = p.max
    return base


def param_schema(p: ParamSpec) -> dict[str, Any]:
    """The JSON Schema of one parameter's stored value."""
    if p.kind == "int":
        s = _bounded({"type": "integer"}, p)
    elif p.kind == "float":
        s = _bounded({"type": "number"}, p)
    elif p.kind == "bool":
        s = {"type": "boolean"}
    elif p.kind == "choice":
        s = {"enum": list(p.choices)}
    elif p.kind == "str":
        s = {"type": "string", "maxLength": 1000}
    elif p.kind == "dict":
        s = {"type": "object"}
    else:
        item = _bounded({"type": "integer" if p.kind == "int-tuple" else "number"}, p)
        array: dict[str, Any] = {"type": "array", "items": item, "minItems": p.length or 1,
                                 "maxItems": p.length or 8}
        options = [array]
        if p.kind == "int-tuple":
            options.insert(0, dict(item))
        if p.choices:
            options.append({"enum": list(p.choices)})
        s = {"anyOf": options} if len(options) > 1 else array
    if p.nullable:
        s = {"anyOf": [s, {"type": "null"}]}
    s["description"] = p.help
    s["default"] = p.default
    return s


def _position(description: str) -> dict[str, Any]:
    coord = {"type": "number", "minimum": -MAX_COORD, "maximum": MAX_COORD}
    return {"type": "array", "prefixItems": [coord, coord], "items": False, "minItems": 2,
            "description": description}


def _training_schema() -> dict[str, Any]:
    root: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False,
                            "description": "How to train; every field has a default"}
    for path, spec in TRAINING_FIELDS.items():
        target = root
        keys = path.split(".")
        for key in keys[:-1]:
            target = target["properties"].setdefault(
                key, {"type": "object", "properties": {}, "additionalProperties": False})
        target["properties"][keys[-1]] = param_schema(spec)
    root["properties"]["dataset"]["required"] = ["name"]
    root["properties"]["dataset"]["properties"] = {"name": {"type": "string", "minLength": 1}}
    return root


def build_schema() -> dict[str, Any]:
    """The schema of a current-version document, with one parameter schema per node type."""
    specs = catalogue()
    defs: dict[str, Any] = {}
    per_type = []
    for name, spec in specs.items():
        defs[f"params_{name}"] = {
            "type": "object", "description": f"{name}: {spec.description}",
            "properties": {p.name: param_schema(p) for p in spec.params},
            # a Block instance also takes the parameters its definition exposes
            "additionalProperties": name == "Block",
        }
        per_type.append({"if": {"properties": {"type": {"const": name}}},
                         "then": {"properties": {"params": {"$ref": f"#/$defs/params_{name}"}}}})
    endpoint = {"type": "array", "prefixItems": [{"type": "string", "description": "node id"},
                                                 {"type": "string", "description": "port name"}],
                "items": False, "minItems": 2}
    node_schema = {
        "type": "object", "required": ["id", "type"], "additionalProperties": False,
        "properties": {
            "id": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,63}$",
                   "description": "Unique; usable as a Python attribute name"},
            "type": {"enum": list(specs), "description": "A node type of the layer catalogue"},
            "params": {"type": "object",
                       "description": "Only the parameters that differ from the defaults"},
            "pos": _position("Canvas position [x, y]"),
            "name": {"type": "string", "maxLength": 200, "description": "Display name"},
        },
        "allOf": per_type,
    }
    edges_schema = {
        "type": "array", "maxItems": MAX_EDGES,
        "description": "Wires, in order: a variadic input (Concat) takes them in this order",
        "items": {"type": "object", "required": ["from", "to"], "additionalProperties": False,
                  "properties": {"from": endpoint, "to": endpoint}},
    }
    block_schema = {
        "type": "object", "additionalProperties": False,
        "description": "One block definition: its layers, with BlockInput/BlockOutput nodes as its ports",
        "properties": {
            "nodes": {"type": "array", "maxItems": MAX_NODES, "items": {"$ref": "#/$defs/node"}},
            "edges": {"$ref": "#/$defs/edges"},
            "params": {"type": "object", "description": "Parameters each instance may set",
                       "additionalProperties": {
                           "type": "object", "required": ["targets"], "additionalProperties": False,
                           "properties": {
                               "targets": {"type": "array", "minItems": 1, "items": endpoint,
                                           "description": "[inner node id, its parameter] pairs it sets"},
                               "default": {}, "help": {"type": "string", "maxLength": 1000}}}},
            "color": {"type": "string", "pattern": "^#[0-9a-fA-F]{6}$"},
            "description": {"type": "string", "maxLength": 2000},
        },
    }
    defs["node"] = node_schema
    defs["edges"] = edges_schema
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://wiregrad.invalid/schemas/wiregrad.graph.schema.json",
        "title": "Wiregrad graph document",
        "description": "A network drawn in Wiregrad: layers (nodes), wires (edges), training settings "
                       "and view. Generated from the layer catalogue by app/document/schema.py.",
        "type": "object",
        "required": ["format", "version"],
        "additionalProperties": False,
        "properties": {
            "format": {"const": FORMAT},
            "version": {"const": VERSION},
            "nodes": {"type": "array", "maxItems": MAX_NODES, "items": {"$ref": "#/$defs/node"}},
            "edges": {"$ref": "#/$defs/edges"},
            "blocks": {"type": "object", "description": "Block definitions by name (format version 2)",
                       "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]{0,63}$"},
                       "additionalProperties": block_schema},
            "training": _training_schema(),
            "view": {"type": "object", "additionalProperties": False, "properties": {
                "zoom": {"type": "number", "minimum": 0.001, "maximum": 1000},
                "center": _position("Canvas point at the middle of the view")}},
            "meta": {"type": "object", "description": "Free notes (author, description); not interpreted"},
        },
        "$defs": defs,
    }


def write_schema(path: Path = SCHEMA_PATH) -> None:
    path.write_text(json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_schema()
