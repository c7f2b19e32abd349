"""The package's shape: layers the imports keep, no import cycle, no oversized class.

The layer order is written once, in setup.cfg's ``[importlinter]`` contract;
these tests run it (and prove the checker bites on a package that breaks
its layers), find import cycles with grimp, and measure classes with ast.
"""
import ast
import sys
import textwrap
from pathlib import Path

import grimp
import pytest
from importlinter import cli as importlinter_cli

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "testbed"
#: The largest class the codebase allows itself, in lines.
MAX_CLASS_LINES = 250


def lint(config: Path, cwd: Path) -> int:
    """import-linter's exit code for ``config``, run as ``lint-imports`` would from ``cwd``."""
    sys.path.insert(0, str(cwd))
    try:
        return importlinter_cli.lint_imports(config_filename=str(config), no_cache=True)
    finally:
        sys.path.remove(str(cwd))


pytestmark = pytest.mark.unit


def test_the_layer_contract_holds_with_no_exceptions():
    config = (ROOT / "setup.cfg").read_text()
    assert "ignore_imports" not in config and "unmatched_ignore" not in config
    assert lint(ROOT / "setup.cfg", ROOT) == 0


def test_the_layer_contract_catches_an_import_that_goes_up(tmp_path):
    pkg = tmp_path / "layered"
    (pkg / "top").mkdir(parents=True)
    (pkg / "bottom").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "top" / "__init__.py").write_text("")
    (pkg / "bottom" / "__init__.py").write_text("from layered.top import __name__ as _\n")
    config = tmp_path / "setup.cfg"
    config.write_text(textwrap.dedent("""\
        [importlinter]
        root_package = layered

        [importlinter:contract:layers]
        name = layers
        type = layers
        layers =
            layered.top
            layered.bottom
        """))
    assert lint(config, tmp_path) == 1


def import_cycles(package: str) -> list[list[str]]:
    """Strongly connected sets of modules (more than one) in ``package``'s import graph."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=True)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:          # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            part = []
            while True:
                member = stack.pop()
                part.append(member)
                if member == module:
                    break
            if len(part) > 1:
                cycles.append(sorted(part))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycle():
    assert import_cycles("testbed") == []


def test_the_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    pkg = tmp_path / "circular"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from circular import b\n")
    (pkg / "b.py").write_text("from circular import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("circular") == [["circular.a", "circular.b"]]


def class_lengths(root: Path) -> dict[str, int]:
    """Lines per class, ``path:Class``, of every class under ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                out[f"{path.relative_to(root.parent)}:{node.name}"] = node.end_lineno - node.lineno + 1
    return out


def test_no_class_is_over_the_limit():
    lengths = class_lengths(PACKAGE)
    assert lengths, "no class found: the measure is broken"
    assert {name: n for name, n in lengths.items() if n > MAX_CLASS_LINES} == {}
