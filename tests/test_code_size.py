"""No function over 80 lines, no module over 500 lines (the project's standard), in all of our Python.

A function's length runs from its `def` line to its last line (decorators aside; its docstring and any function
nested in it count). A module's is its line count. An exception needs an entry in ALLOWED, with the reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.import_graph import ROOT, module_name, python_files

MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 500
# Everything we write: the app's layers, the shared test peers, the benchmarks and the tests themselves.
SOURCES = ("berth_env", "rollouts", "agent", "viewer", "app.py", "testkit", "bench", "tests")
# {qualified name ("agent.loop.stream_episode", or a module "viewer.chat"): why it may be longer}
ALLOWED: dict[str, str] = {}


def functions(tree: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function and method, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}.{node.name}"
            yield name, node.end_lineno - node.lineno + 1
            yield from functions(node, name)
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}.{node.name}")
        else:
            yield from functions(node, prefix)


def too_long(root: Path, sources: tuple[str, ...]) -> list[str]:
    found = []
    for path in python_files(root, sources):
        text = path.read_text(encoding="utf-8")
        module = module_name(root, path)
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"module {module} ({path.relative_to(root)}): {lines} lines > {MAX_MODULE_LINES}")
        for name, length in functions(ast.parse(text), module):
            if length > MAX_FUNCTION_LINES:
                found.append(f"function {name}: {length} lines > {MAX_FUNCTION_LINES}")
    return found


def allowed(finding: str) -> bool:
    return finding.split(" ")[1] in ALLOWED


def test_no_function_over_80_lines_and_no_module_over_500():
    found = [f for f in too_long(ROOT, SOURCES) if not allowed(f)]
    assert not found, "too long (split it, or add it to ALLOWED with a reason):\n" + "\n".join(found)


def test_every_allowance_is_still_needed():
    names = {finding.split(" ")[1] for finding in too_long(ROOT, SOURCES)}
    assert not set(ALLOWED) - names, f"no longer too long, drop from ALLOWED: {sorted(set(ALLOWED) - names)}"


def test_the_measure_on_a_made_up_package(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(78))
    (package / "ok.py").write_text(f"def fits():\n{body}\n    return 0\n" + "\n" * 420)  # 80 and 500 lines
    nested = "\n".join(f"        x{i} = {i}" for i in range(77))
    (package / "long.py").write_text(  # a method of 81 lines, with a function inside it, in 501 lines
        f"class Board:\n    @property\n    def rows(self):\n        def inner():\n            pass\n"
        f"{nested}\n        return 0\n" + "\n" * 418)
    assert too_long(tmp_path, ("pkg",)) == [
        "module pkg.long (pkg/long.py): 501 lines > 500",
        "function pkg.long.Board.rows: 81 lines > 80",
    ]
