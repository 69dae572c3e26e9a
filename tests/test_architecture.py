"""Imports run one way, `gui -> widgets -> app -> engine`: the engine knows nothing of the application,
the application core imports no Qt (so the CLI and the headless tests run exactly the window's code), and
the reusable widgets know nothing of the shell that docks them. Every import statement of every file is
read with `ast`, the ones inside functions too: a lazy import runs back up the layers all the same."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QT = ("PySide6", "pyqtgraph", "shiboken6")
# package -> top-level modules it must never import
FORBIDDEN = {
    "engine": ("app", "widgets", "gui", "main", *QT),
    "app": ("widgets", "gui", *QT),
    "widgets": ("gui", "main"),
}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module name) of every absolute import in a Python file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def upward_imports(package: str, root: Path = ROOT) -> list[str]:
    """"file:line imports module" for each import of `package`'s files that runs against the layers."""
    bad = []
    for path in sorted((root / package).rglob("*.py")):
        for line, module in imported_modules(path):
            if module.split(".")[0] in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(root).as_posix()}:{line} imports {module}")
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_package_imports_a_layer_above_it(package):
    assert (ROOT / package).is_dir()
    assert sorted((ROOT / package).rglob("*.py")), f"{package}/ has no Python files to check"
    assert upward_imports(package) == []


def test_the_check_sees_imports_inside_functions_and_from_imports(tmp_path):
    """The walker is not blind: lazy imports of Qt and of the shell inside a function of app/ are reported,
    a relative import and numpy are not."""
    pkg = tmp_path / "app" / "sub"
    pkg.mkdir(parents=True)
    (pkg / "bad.py").write_text("import numpy\nfrom . import gui\n\ndef f():\n"
                                "    from PySide6.QtGui import QImage\n"
                                "    import gui.bridge\n    return QImage\n", encoding="utf-8")
    assert upward_imports("app", tmp_path) == ["app/sub/bad.py:5 imports PySide6.QtGui",
                                               "app/sub/bad.py:6 imports gui.bridge"]


def test_the_gui_package_is_the_shell():
    """The shell imports the layers below it (it is not checked against them: it sits on top)."""
    modules = {m.split(".")[0] for path in (ROOT / "gui").rglob("*.py") for _, m in imported_modules(path)}
    assert {"app", "widgets", "PySide6"} <= modules


def test_test_files_have_unique_base_names():
    """pytest imports test modules by base name (tests/ has no __init__.py): two files named alike in
    different folders make the second fail to collect ("import file mismatch"), so each name is used once."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
