"""Fuzzing documents with blocks (issue 26): hostile and mutated files never show a traceback, and a file the
app saved always opens again.

Seeds are the bundled examples with blocks, the shipped block files (as documents holding their definitions
and one instance) and small documents edited at random through the real blocks API. Each case mutates a
seed's JSON (keys dropped, duplicated or retyped, wrong types, huge or negative repeats, missing or
self-using definitions, renamed ports, broken exposed targets, deep nesting, unicode, huge numbers) and
checks that loading raises nothing but a one-line DocumentError and that what loads validates, infers
shapes, expands, passes the quick training check and saves to a file that loads back equal.

`WIREGRAD_FUZZ_CASES` raises the number of cases (a few hundred by default, to stay quick in CI);
`WIREGRAD_FUZZ_SEED` picks other ones.
"""
from __future__ import annotations

import copy
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from app.document import blocks
from app.document.document import Document, dumps_document, loads_document
from app.document.errors import DocumentError
from app.document.library import loads_block
from app.document.shapes import infer_shapes
from app.document.validate import validate
from app.training.preflight import check_training

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = [ROOT / "assets" / "examples" / f for f in ("resnet18_cifar.json", "transformer_classifier.json")]
BLOCK_FILES = sorted((ROOT / "assets" / "blocks").glob("*.wgblock.json"))
CASES = int(os.environ.get("WIREGRAD_FUZZ_CASES", "300"))
SEED = int(os.environ.get("WIREGRAD_FUZZ_SEED", "0"))  # another value explores other cases

WEIRD = [None, True, False, 0, -1, -(10 ** 9), 10 ** 30, 2 ** 63, 1e308, -1e308, 0.5, "", "x" * 300,
         "ünï©ødé ✓ 🙂", "\u202e\u0000", "a/b", "Block", "repeat", [], {}, [1, 2], {"a": 1}, [[[[]]]],
         "#zzzzzz", "in", "out", "conv1"]


# ---------------------------------------------------------------------------------------------
# seeds
# ---------------------------------------------------------------------------------------------
def block_file_document(path: Path) -> dict[str, Any]:
    """A graph document holding a block file's definitions and one instance of its block."""
    data = json.loads(path.read_text(encoding="utf-8"))
    name = data["block"]
    return {"format": "wiregrad.graph", "version": 2,
            "nodes": [{"id": "b", "type": "Block", "params": {"block": name}, "pos": [0.0, 0.0]}],
            "edges": [], "blocks": data["blocks"]}


def random_edits(doc: Document, rng: random.Random, steps: int) -> list[str]:
    """Apply `steps` random edits through the blocks API to `doc` (refused ones are skipped); returns what
    was done, for the failure message."""
    done: list[str] = []
    removed: list[tuple[Document, Any]] = []
    for _ in range(steps):
        root = doc.root
        graphs = [root, *(d.graph for d in root.blocks.values())]
        g = rng.choice(graphs)
        kind = rng.choice(["group", "ungroup", "unique", "remove", "restore", "rename", "repeat", "exposed",
                           "expose", "unset", "add", "connect"])
        ids = list(g.nodes)
        inst = [n for n in ids if g.nodes[n].type == "Block"]
        try:
            if kind == "group" and ids:
                chosen = rng.sample(ids, rng.randint(1, min(4, len(ids))))
                blocks.group(g, chosen)
            elif kind == "ungroup" and inst:
                blocks.ungroup(g, rng.choice(inst))
            elif kind == "unique" and inst:
                blocks.make_unique(g, rng.choice(inst))
            elif kind == "remove" and ids and g is not root:
                removed.append((g, g.remove_node(rng.choice(ids))))
            elif kind == "restore" and removed:
                g2, r = removed.pop()  # undo: the editor undoes the removals in turn, latest first
                g2.restore_node(r)
            elif kind == "rename" and ids and g is not root:
                g.rename_node(rng.choice(ids), f"n{rng.randint(0, 99)}")
            elif kind == "repeat" and inst:
                g.set_param(rng.choice(inst), "repeat", rng.choice([1, 2, 3, 1000, 0, -1, 10 ** 6, "2", 2.5]))
            elif kind == "exposed" and inst:
                nid = rng.choice(inst)
                d = root.blocks.get(g.nodes[nid].params.get("block"))
                if d is not None and d.params:
                    g.set_param(nid, rng.choice(list(d.params)), rng.choice([1, 8, 16, 0, -3, 0.5, "x"]))
            elif kind == "expose" and g is not root:
                layers = [n for n in ids if g.nodes[n].type not in blocks.PORT_TYPES]
                if layers:
                    nid = rng.choice(layers)
                    spec = g.node_spec(nid)
                    if spec.params:
                        blocks.expose_param(root, g._block, rng.choice(["p", "q", "channels"]), nid,
                                            rng.choice(spec.params).name)
            elif kind == "add":
                for _ in range(rng.choice([1, 1, 3])):
                    g.add_node(rng.choice(["ReLU", "Dropout", "GELU", "Add"]))
            elif kind == "connect" and len(ids) > 1:
                a, b = rng.sample(ids, 2)
                outs, ins = g.node_spec(a).outputs, g.node_spec(b).inputs
                if outs and ins:
                    g.connect(a, rng.choice(outs), b, rng.choice(ins).name)
            elif kind == "unset" and inst:
                g.set_param(rng.choice(inst), "repeat", rng.choice([2, 1]))
            else:
                continue
            done.append(f"{kind} in {g._block or 'top'}")
            if kind not in ("remove", "restore"):
                removed.clear()  # an undo stack would undo this edit before those removals
        except DocumentError as exc:
            assert "\n" not in str(exc), str(exc)
    return done


def seeds() -> list[dict[str, Any]]:
    out = [json.loads(p.read_text(encoding="utf-8")) for p in EXAMPLES]
    out += [block_file_document(p) for p in BLOCK_FILES]
    return out


# ---------------------------------------------------------------------------------------------
# mutations
# ---------------------------------------------------------------------------------------------
def containers(value: Any, out: list) -> list:
    if isinstance(value, dict | list):
        out.append(value)
        for v in (value.values() if isinstance(value, dict) else value):
            containers(v, out)
    return out


def block_nodes(data: dict[str, Any]) -> list[dict[str, Any]]:
    graphs = [data, *(b for _, b in definitions(data))]
    return [n for g in graphs if isinstance(g.get("nodes"), list) for n in g["nodes"]
            if isinstance(n, dict) and n.get("type") == "Block" and isinstance(n.get("params"), dict)]


def definitions(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    b = data.get("blocks")
    return [(k, v) for k, v in b.items() if isinstance(v, dict)] if isinstance(b, dict) else []


def mutate(data: dict[str, Any], rng: random.Random) -> dict[str, Any] | str:
    """One random change to a document's JSON; a text when the change can't be a dict (a key twice)."""
    data = copy.deepcopy(data)
    kind = rng.choice(["drop", "retype", "duplicate", "repeat", "missing_def", "self_use", "rename_port",
                       "break_target", "deep", "unicode", "huge", "exposed_value", "dup_key", "swap_defs",
                       # changes a file may well hold, so more cases load and reach the consumers
                       "repeat_ok", "exposed_ok", "rewire", "nest", "rename_port", "drop_edge"])
    defs = definitions(data)
    if kind == "drop":
        c = rng.choice([x for x in containers(data, []) if x] or [data])
        if isinstance(c, dict) and c:
            del c[rng.choice(list(c))]
        elif isinstance(c, list) and c:
            del c[rng.randrange(len(c))]
    elif kind in ("retype", "huge", "unicode"):
        c = rng.choice([x for x in containers(data, []) if x] or [data])
        pool = {"retype": WEIRD, "huge": [10 ** 40, -(10 ** 40), 1e308, 2 ** 64, -2 ** 31],
                "unicode": ["ünï©ødé", "🙂" * 50, "\u0301", "名前", "a\u200bb"]}[kind]
        if isinstance(c, dict) and c:
            c[rng.choice(list(c))] = copy.deepcopy(rng.choice(pool))
        elif isinstance(c, list) and c:
            c[rng.randrange(len(c))] = copy.deepcopy(rng.choice(pool))
    elif kind == "duplicate":
        lists = [x for x in containers(data, []) if isinstance(x, list) and x]
        if lists:
            c = rng.choice(lists)
            c.append(copy.deepcopy(rng.choice(c)))
    elif kind == "repeat":
        nodes = block_nodes(data)
        if nodes:
            rng.choice(nodes)["params"]["repeat"] = rng.choice([0, -1, -(10 ** 12), 10 ** 9, 10 ** 40, 2.0,
                                                                True, "3", None, 100_000])
    elif kind == "repeat_ok":
        nodes = block_nodes(data)
        if nodes:
            rng.choice(nodes)["params"]["repeat"] = rng.choice([1, 2, 3, 7, 1000])
    elif kind == "exposed_ok":
        nodes = block_nodes(data)
        if nodes:
            rng.choice(nodes)["params"][rng.choice(["channels", "stride", "heads", "embed_dim", "ffn"])] = \
                rng.choice([1, 2, 3, 8, 16, 64])
    elif kind in ("rewire", "drop_edge"):
        graphs = [g for g in [data, *(b for _, b in definitions(data))]
                  if isinstance(g.get("edges"), list) and g["edges"] and isinstance(g.get("nodes"), list)]
        if graphs:
            g = rng.choice(graphs)
            i = rng.randrange(len(g["edges"]))
            ids = [n["id"] for n in g["nodes"] if isinstance(n, dict) and isinstance(n.get("id"), str)]
            e = g["edges"][i]
            if kind == "drop_edge" or not ids or not isinstance(e, dict) or not isinstance(e.get("to"), list):
                del g["edges"][i]
            else:
                port = rng.choice(["in", "out", "in", "x", "out1"])
                e[rng.choice(["from", "to"])] = [rng.choice(ids), port]
    elif kind == "nest" and defs:
        name, body = rng.choice(defs)
        if isinstance(body.get("nodes"), list):
            inner = rng.choice(defs)[0]
            body["nodes"].append({"id": f"nested_{inner}"[:64], "type": "Block",
                                  "params": {"block": inner, "repeat": rng.choice([1, 2, 50])}})
    elif kind == "missing_def" and defs:
        del data["blocks"][rng.choice(defs)[0]]
    elif kind == "self_use" and defs:
        name, body = rng.choice(defs)
        target = rng.choice(defs)[0]
        if isinstance(body.get("nodes"), list):
            body["nodes"].append({"id": "again", "type": "Block", "params": {"block": target}})
            if rng.random() < 0.5 and body["nodes"]:
                body.setdefault("edges", []).append({"from": ["again", "out"], "to": ["again", "in"]})
    elif kind == "rename_port" and defs:
        _, body = rng.choice(defs)
        ports = [n for n in body.get("nodes", []) if isinstance(n, dict)
                 and n.get("type") in blocks.PORT_TYPES]
        if ports:
            p = rng.choice(ports)
            old, p["id"] = p["id"], rng.choice(["renamed", "in", "out", "x1"])
            if rng.random() < 0.5:  # the wires inside follow; the instances' wires don't
                for e in body.get("edges", []):
                    for end in ("from", "to"):
                        if isinstance(e, dict) and isinstance(e.get(end), list) and e[end][:1] == [old]:
                            e[end][0] = p["id"]
    elif kind == "break_target" and defs:
        _, body = rng.choice(defs)
        params = body.get("params")
        if isinstance(params, dict) and params:
            ep = params[rng.choice(list(params))]
            if isinstance(ep, dict):
                ep["targets"] = rng.choice([[["ghost", "out_features"]], [["in", "repeat"]], [], "x",
                                            [["conv1", "nope"]], [[1, 2]], [["conv1"]]])
                if rng.random() < 0.5:
                    ep["default"] = rng.choice(WEIRD)
    elif kind == "exposed_value":
        nodes = block_nodes(data)
        if nodes:
            n = rng.choice(nodes)
            n["params"][rng.choice(["channels", "stride", "heads", "blocks", "ghost", "dropout"])] = \
                copy.deepcopy(rng.choice(WEIRD))
    elif kind == "deep":
        c = rng.choice([x for x in containers(data, []) if x] or [data])
        if isinstance(c, dict):
            c[rng.choice(list(c))] = "@deep@"
        else:
            c[rng.randrange(len(c))] = "@deep@"
        depth = rng.choice([50, 500, 5000, 100_000])  # spelled in the text: Python's json can't write it
        return json.dumps(data).replace('"@deep@"', "[" * depth + "1" + "]" * depth, 1)
    elif kind == "dup_key":
        text = json.dumps(data)
        return text.replace('"edges": [', '"edges": [], "edges": [', 1)
    elif kind == "swap_defs" and len(defs) > 1:
        (a, ba), (b, bb) = rng.sample(defs, 2)
        data["blocks"][a], data["blocks"][b] = bb, ba
    return data


# ---------------------------------------------------------------------------------------------
# the checks
# ---------------------------------------------------------------------------------------------
def one_line(exc: Exception) -> str:
    text = str(exc)
    assert text and "\n" not in text and "Traceback" not in text, repr(text)
    return text


def check_text(text: str) -> Document | None:
    """Load `text`; what loads must survive every consumer and save to a file that loads back equal."""
    try:
        doc = loads_document(text)
    except DocumentError as exc:
        one_line(exc)
        return None
    check_document(doc)
    return doc


def check_document(doc: Document) -> None:
    flat = blocks.expand(doc)
    for p in getattr(flat, "problems", []):
        assert "\n" not in p.message
    info = infer_shapes(doc)
    assert info is not None
    for p in validate(doc, info=info):
        assert "\n" not in p.message, p.message
    for p in check_training(doc, deep=False, cached_only=True):
        assert "\n" not in p.message, p.message
    saved = dumps_document(doc)
    again = loads_document(saved)  # a saved document always loads
    assert again == doc
    assert dumps_document(again) == saved


def case_text(seed: dict[str, Any], rng: random.Random) -> str:
    data: dict[str, Any] | str = seed
    for _ in range(rng.choice([1, 1, 2, 3])):
        data = mutate(data, rng) if isinstance(data, dict) else data
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=rng.random() < 0.5)


# ---------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------
def test_seeds_load_and_survive_every_consumer():
    for seed in seeds():
        assert check_text(json.dumps(seed)) is not None


@pytest.mark.parametrize("part", range(4))
def test_mutated_documents_never_show_a_traceback(part):
    rng = random.Random(SEED + 2600 + part)
    all_seeds = seeds()
    loaded = 0
    for i in range(CASES // 4):
        seed = all_seeds[i % len(all_seeds)]
        text = case_text(seed, rng)
        try:
            loaded += check_text(text) is not None
        except AssertionError:
            raise
        except Exception as exc:  # pragma: no cover - the failure message names the case
            raise AssertionError(f"case {i} (part {part}) raised {type(exc).__name__}: {exc}\n"
                                 f"{text[:4000]}") from exc
    assert loaded > 0  # the mutations leave some documents loadable, so the consumers are exercised


def test_mutated_block_files_load_or_refuse_in_one_line():
    rng = random.Random(SEED + 26)
    files = [json.loads(p.read_text(encoding="utf-8")) for p in BLOCK_FILES]
    for i in range(CASES // 3):
        data: Any = files[i % len(files)]
        data = mutate({**data, "blocks": data["blocks"]}, rng)
        text = data if isinstance(data, str) else json.dumps(data)
        try:
            block = loads_block(text)
        except DocumentError as exc:
            one_line(exc)
            continue
        check_document(block.doc)


def edited_documents(rng: random.Random, part: int, max_steps: int):
    """(case number, edits done, document) for documents edited at random from the seeds."""
    all_seeds = seeds()
    for i in range(max(CASES // 15, 4)):
        doc = loads_document(json.dumps(all_seeds[(i + part) % len(all_seeds)]))
        yield i, random_edits(doc, rng, rng.randint(1, max_steps)), doc


@pytest.mark.parametrize("part", range(3))
def test_random_edits_always_save_a_file_that_opens(part):
    for i, done, doc in edited_documents(random.Random(SEED + 260 + part), part, 12):
        try:
            check_document(doc)
        except Exception as exc:
            raise AssertionError(f"case {i}: after {done}: {type(exc).__name__}: {exc}") from exc


@pytest.mark.parametrize("part", range(2))
def test_edited_then_mutated_documents(part):
    """Random block documents made by the editing API, then mutated as a hostile file would be."""
    rng = random.Random(SEED + 2626 + part)
    for i, _, doc in edited_documents(rng, part, 8):
        text = case_text(json.loads(dumps_document(doc)), rng)
        try:
            check_text(text)
        except AssertionError:
            raise
        except Exception as exc:
            raise AssertionError(f"case {i}: {type(exc).__name__}: {exc}\n{text[:4000]}") from exc

# ---------------------------------------------------------------------------------------------
# regressions the fuzzing found
# ---------------------------------------------------------------------------------------------
def _chain_of_repeats(levels: int, repeat: int) -> dict[str, Any]:
    """Definitions L1..Ln, each one instance of the one below; each exposes `w`, which sets its instance's
    `repeat` (and, above L1, the `w` of the level below): one number on the top instance multiplies at
    every level."""
    leaf = {"nodes": [{"id": "in", "type": "BlockInput"}, {"id": "r", "type": "ReLU"},
                      {"id": "out", "type": "BlockOutput"}],
            "edges": [{"from": ["in", "out"], "to": ["r", "in"]},
                      {"from": ["r", "out"], "to": ["out", "in"]}]}
    defs: dict[str, Any] = {"L0": leaf}
    for k in range(1, levels + 1):
        targets = [["x", "repeat"], *([["x", "w"]] if k > 1 else [])]
        defs[f"L{k}"] = {
            "nodes": [{"id": "in", "type": "BlockInput"},
                      {"id": "x", "type": "Block", "params": {"block": f"L{k - 1}"}},
                      {"id": "out", "type": "BlockOutput"}],
            "edges": [{"from": ["in", "out"], "to": ["x", "in"]},
                      {"from": ["x", "out"], "to": ["out", "in"]}],
            "params": {"w": {"targets": targets, "default": 1}}}
    return {"format": "wiregrad.graph", "version": 2, "edges": [], "blocks": defs,
            "nodes": [{"id": "b", "type": "Block", "params": {"block": f"L{levels}", "w": repeat}}]}


def test_exposed_repeats_count_towards_the_expansion_limit():
    """A 1 KB file whose exposed `repeat` multiplies through nested blocks (1000³ layers) used to make
    `expand` run out of time and memory: the size check read only the instances' own `repeat`."""
    small = loads_document(json.dumps(_chain_of_repeats(2, 30)))
    flat = blocks.expand(small)
    # per L1 copy: its two ports and 30 copies of L0 (three nodes each); 30 L1 copies, then L2's ports
    assert len(flat.nodes) == 30 * (2 + 30 * 3) + 2 == blocks.expanded_size(small)
    huge = loads_document(json.dumps(_chain_of_repeats(3, 1000)))
    assert blocks.expanded_size(huge) > 1000 ** 3
    flat = blocks.expand(huge)
    assert list(flat.nodes) == ["b"]
    assert any("at most 100,000" in p.message for p in flat.problems)
    assert any(p.node_id == "b" and "at most 100,000" in p.message for p in validate(huge))
    check_document(huge)


def test_ungroup_refuses_more_nodes_than_a_file_may_hold():
    """Ungrouping an instance repeated 1000 times made 11,000 nodes; the saved file then failed to load."""
    doc = loads_document((ROOT / "assets" / "examples" / "transformer_classifier.json").read_text("utf-8"))
    inner = doc.blocks["transformer_encoder"].graph
    inner.add_node("ReLU")
    inner.add_node("ReLU")
    doc.set_param("encoder", "repeat", 1000)
    before = dumps_document(doc)
    with pytest.raises(DocumentError, match="lower its repeat") as err:
        blocks.ungroup(doc, "encoder")
    one_line(err.value)
    assert dumps_document(doc) == before  # nothing changed
    doc.set_param("encoder", "repeat", 100)
    blocks.ungroup(doc, "encoder")
    check_document(doc)


def test_no_edit_makes_more_definitions_than_a_file_may_hold():
    """group, make unique and paste refuse the definition past MAX_BLOCKS: the file would not load."""
    leaf = {"nodes": [{"id": "in", "type": "BlockInput"}, {"id": "out", "type": "BlockOutput"}],
            "edges": [{"from": ["in", "out"], "to": ["out", "in"]}]}
    data = {"format": "wiregrad.graph", "version": 2, "edges": [],
            "nodes": [{"id": "i", "type": "Block", "params": {"block": "b0"}}, {"id": "r", "type": "ReLU"}],
            "blocks": {f"b{k}": copy.deepcopy(leaf) for k in range(blocks.MAX_BLOCKS)}}
    doc = loads_document(json.dumps(data))
    before = dumps_document(doc)
    clip = {**data, "blocks": {"other": leaf},
            "nodes": [{"id": "j", "type": "Block", "params": {"block": "other"}}]}
    for edit in (lambda: blocks.make_unique(doc, "i"), lambda: blocks.group(doc, ["r"]),
                 lambda: doc.paste_dict(clip)):
        with pytest.raises(DocumentError, match="at most 1000 blocks") as err:
            edit()
        one_line(err.value)
        assert dumps_document(doc) == before
    doc.paste_dict({**data, "blocks": {"b0": leaf},  # a definition it has already: no new one
                    "nodes": [{"id": "j", "type": "Block", "params": {"block": "b0"}}]})
    check_document(doc)
