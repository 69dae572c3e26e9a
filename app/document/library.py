"""The block library: block files (`*.wgblock.json`), the shipped blocks and the user's own folder.

A block file holds one block's definition and every definition it uses, so it can be dropped into
any document. It is checked exactly as a document's `blocks` are (the same parser, the same one-line
DocumentErrors, prefixed with the file) and saved atomically. The library is the shipped
`assets/blocks/` plus the user's folder (`WIREGRAD_BLOCKS_DIR`, else the platform's data folder);
"save my block to the library" writes a file there. Qt-free: the palette lists what `library()` returns.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .blocks import BlockDef
from .document import (
    FORMAT as GRAPH_FORMAT,
)
from .document import (
    VERSION,
    Document,
    _blocks_needed,
    _json_type,
    _parse_document,
    _short,
    check_fields,
    check_version,
    dumps_blocks,
    parse_json_text,
)
from .errors import DocumentError

FORMAT = "wiregrad.block"
SUFFIX = ".wgblock.json"
MAX_BLOCK_BYTES = 16 * 1024 * 1024
SHIPPED_DIR = Path(__file__).resolve().parents[2] / "assets" / "blocks"
_TOP_KEYS = {"format", "version", "block", "blocks"}


@dataclass
class LibraryBlock:
    """One block file's contents: `doc` is a root document holding the block `name` and every definition
    it uses (and nothing else); `path` the file it came from, `shipped` whether it is one of Wiregrad's."""

    name: str
    doc: Document
    path: Path | None = None
    shipped: bool = False

    @property
    def definition(self) -> BlockDef:
        return self.doc.blocks[self.name]

    @property
    def description(self) -> str:
        return self.definition.description

    def to_dict(self) -> dict[str, Any]:
        return block_file_dict(self.doc, self.name)


# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------
def block_file_dict(root: Document, name: str) -> dict[str, Any]:
    """The contents of a block file for definition `name` of `root`: it and every definition it uses."""
    root = root.root
    if name not in root.blocks:
        raise DocumentError(f"there is no block {name!r}")
    needed = _blocks_needed(root, [_instance(name)])
    return {"format": FORMAT, "version": VERSION, "block": name,
            "blocks": {n: root.blocks[n].to_dict() for n in needed}}


def dumps_block(root: Document, name: str) -> str:
    """A block file's text: one node and one wire per line, as documents are written."""
    d = block_file_dict(root, name)
    head = [f'  "{k}": {json.dumps(d[k], ensure_ascii=False)},' for k in ("format", "version", "block")]
    return "{\n" + "\n".join(head) + "\n" + dumps_blocks(d["blocks"]) + "\n}\n"


def parse_block(data: Any) -> LibraryBlock:
    """Check parsed block-file JSON as strictly as a document (its definitions go through the document
    parser) and return it. Raises DocumentError with one line naming the field."""
    if not isinstance(data, dict):
        raise DocumentError(f"a block file is a JSON object, got {_json_type(data)}")
    if data.get("format") != FORMAT:
        hint = " (this is a graph document: open it, not add it as a block)" \
            if data.get("format") == GRAPH_FORMAT else ""
        raise DocumentError(f"not a Wiregrad block: 'format' must be \"{FORMAT}\", got "
                            f"{_short(data.get('format'))}{hint}")
    version = check_version(data)
    if version < 2:  # blocks came with version 2 of the format
        raise DocumentError(f"unknown block format version {version}")
    check_fields(data, _TOP_KEYS, "unknown top-level field")
    name = data.get("block")
    if not isinstance(name, str):
        raise DocumentError(f"'block' must name the block the file holds, got {_short(name)}")
    if "blocks" not in data:
        raise DocumentError("'blocks' is missing: a block file holds its block's definition")
    doc = _parse_document({"format": GRAPH_FORMAT, "version": VERSION, "nodes": [], "edges": [],
                           "blocks": data["blocks"]}, strict=True)
    if name not in doc.blocks:
        raise DocumentError(f"block {name!r} is not among the file's definitions "
                            f"({', '.join(doc.blocks) or 'none'})")
    needed = set(_blocks_needed(doc, [_instance(name)]))
    extra = [n for n in doc.blocks if n not in needed]
    if extra:
        raise DocumentError(f"block {extra[0]}: block {name} does not use it (a block file holds one block "
                            "and the blocks it uses)")
    if not doc.blocks[name].input_ports() and not doc.blocks[name].output_ports():
        raise DocumentError(f"block {name} has no ports (a Block Input or Block Output node)")
    return LibraryBlock(name, doc)


def loads_block(text: str | bytes) -> LibraryBlock:
    return parse_block(parse_json_text(text))


def load_block(path: str | os.PathLike[str], shipped: bool = False) -> LibraryBlock:
    """Read a block file; DocumentError (naming the file) for anything wrong, unreadable files included."""
    from app.files import describe_os_error, read_bytes

    try:  # a FIFO, a device or a folder is refused before it can block or eat memory
        raw = read_bytes(path, MAX_BLOCK_BYTES)
    except OSError as exc:
        raise DocumentError(f"can't read {os.fspath(path)}: {describe_os_error(exc)}") from None
    try:
        block = loads_block(raw)
    except RecursionError:
        raise DocumentError(f"{os.fspath(path)}: not valid: the block is nested too deeply") from None
    except DocumentError as exc:
        raise DocumentError(f"{os.fspath(path)}: {exc}") from None
    block.path, block.shipped = Path(path), shipped
    return block


def save_block(root: Document, name: str, path: str | os.PathLike[str]) -> None:
    """Write definition `name` (and what it uses) to `path` atomically: an existing file is replaced
    whole or not at all. Raises DocumentError."""
    from app.files import describe_os_error, write_text_atomic

    try:
        text = dumps_block(root, name)
        write_text_atomic(path, text)
    except UnicodeEncodeError:
        raise DocumentError(f"can't save {os.fspath(path)}: the block holds text that is not valid "
                            "Unicode") from None
    except (TypeError, ValueError) as exc:
        raise DocumentError(f"can't save {os.fspath(path)}: the block holds a value JSON can't store "
                            f"({exc})") from None
    except OSError as exc:
        raise DocumentError(f"can't save {os.fspath(path)}: {describe_os_error(exc)}") from None


# ---------------------------------------------------------------------------------------------
# into a document
# ---------------------------------------------------------------------------------------------
def _instance(name: str):
    from .document import Node

    return Node(name, "Block", {"block": name})


def _as_block(contents: LibraryBlock | dict[str, Any] | str | bytes) -> LibraryBlock:
    if isinstance(contents, LibraryBlock):
        return parse_block(contents.to_dict())  # a fresh copy: inserting renames in place
    if isinstance(contents, str | bytes):
        return loads_block(contents)
    return parse_block(contents)


def insert_block(root_doc: Document, contents: LibraryBlock | dict[str, Any] | str | bytes) -> str:
    """Bring a block file's definitions into a document: one the same as the document's (same name,
    same contents) is shared, one that differs under a taken name is renamed (and its users follow).
    Returns the name the block has in the document. One BLOCKS_CHANGED event when something was added."""
    block = _as_block(contents)
    renamed = root_doc.root._merge_blocks(block.doc)
    return renamed.get(block.name, block.name)


def instance_clip(contents: LibraryBlock | dict[str, Any] | str | bytes) -> dict[str, Any]:
    """A clipboard dict (what `Document.paste_dict` takes) holding one instance of the block at (0, 0) and
    its definitions: pasting it inserts the definitions as `insert_block` does, and the instance."""
    block = _as_block(contents)
    d = block.to_dict()
    return {"format": GRAPH_FORMAT, "version": VERSION,
            "nodes": [{"id": block.name, "type": "Block", "params": {"block": block.name},
                       "pos": [0.0, 0.0]}],
            "edges": [], "blocks": d["blocks"]}


def document_clip(root: Document, name: str) -> dict[str, Any]:
    """`instance_clip` for a definition the document already holds."""
    return instance_clip(block_file_dict(root, name))


# ---------------------------------------------------------------------------------------------
# the library
# ---------------------------------------------------------------------------------------------
def user_blocks_dir() -> Path:
    """Where the user's own blocks live: $WIREGRAD_BLOCKS_DIR, else the platform's data folder."""
    env = os.environ.get("WIREGRAD_BLOCKS_DIR")
    if env:
        return Path(env).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
    elif sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    return base / "wiregrad" / "blocks"


@dataclass
class Library:
    """What the palette lists: the blocks read, and one line per file that could not be read."""

    blocks: list[LibraryBlock]
    problems: list[str]

    def names(self) -> list[str]:
        return [b.name for b in self.blocks]

    def get(self, name: str) -> LibraryBlock | None:
        """The user's block of that name, else the shipped one (a user's copy overrides Wiregrad's)."""
        found = [b for b in self.blocks if b.name == name]
        return next((b for b in found if not b.shipped), found[0] if found else None)


def _read_folder(folder: Path, shipped: bool, blocks: list[LibraryBlock], problems: list[str]) -> None:
    try:
        paths = sorted(p for p in folder.iterdir() if p.name.endswith(SUFFIX))
    except FileNotFoundError:
        return
    except OSError as exc:
        from app.files import describe_os_error

        problems.append(f"can't list {folder}: {describe_os_error(exc)}")
        return
    for path in paths:
        try:
            blocks.append(load_block(path, shipped=shipped))
        except DocumentError as exc:
            problems.append(str(exc))


def library(user_dir: str | os.PathLike[str] | None = None) -> Library:
    """The shipped blocks, then the user's; a broken file is skipped and named in `problems`."""
    blocks: list[LibraryBlock] = []
    problems: list[str] = []
    _read_folder(SHIPPED_DIR, True, blocks, problems)
    _read_folder(Path(user_dir) if user_dir is not None else user_blocks_dir(), False, blocks, problems)
    return Library(blocks, problems)


def save_to_library(root: Document, name: str, user_dir: str | os.PathLike[str] | None = None) -> Path:
    """Save definition `name` as `<name>.wgblock.json` in the user's folder (made if missing; an older
    file of that name is replaced). Returns the path. Raises DocumentError."""
    folder = Path(user_dir) if user_dir is not None else user_blocks_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        from app.files import describe_os_error

        raise DocumentError(f"can't make the block folder {folder}: {describe_os_error(exc)}") from None
    path = folder / f"{name}{SUFFIX}"
    save_block(root, name, path)
    return path
