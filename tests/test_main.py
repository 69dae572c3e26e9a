"""main.py's command line: --open-block opens a block instance (a path opens blocks within blocks), and a
path that names none is refused with one plain line before any window is made."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.document import load_document
from main import block_path_problem

ROOT = Path(__file__).resolve().parents[1]
RESNET = ROOT / "assets" / "examples" / "resnet18_cifar.json"


def test_a_block_path_names_instances_from_the_top_level_down():
    doc = load_document(RESNET)
    inner = next(n.id for n in doc.blocks["resnet_stage"].graph.nodes.values() if n.type == "Block")
    assert block_path_problem(doc, "layer2") is None
    assert block_path_problem(doc, f"layer2/{inner}") is None
    assert block_path_problem(doc, "fc") == "there is no block instance 'fc' to open there"  # a layer
    assert block_path_problem(doc, "layer2/nope") == "there is no block instance 'nope' to open there"
    assert block_path_problem(doc, inner) is not None  # not at the top level


def test_open_block_with_a_wrong_path_exits_2_with_one_line(tmp_path):
    png = tmp_path / "x.png"
    run = subprocess.run([sys.executable, str(ROOT / "main.py"), str(RESNET), "--open-block", "layer2/nope",
                          "--screenshot", str(png)], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert run.returncode == 2 and not png.exists()
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("wiregrad")]
    assert lines == ["wiregrad: --open-block layer2/nope: there is no block instance 'nope' to open there"]
    assert "Traceback" not in run.stderr
