"""The project's imports, read with `ast` (nothing is imported): who imports what, on which line.

Every import counts, wherever it stands: at the top, inside a function, under `if TYPE_CHECKING:`, and
`importlib.import_module(...)` / `__import__(...)` when its argument is static (a string literal, or a lookup in a
module-level dict, list or tuple of string literals). An edge goes to the deepest project module the import names:
`from agent.providers import base` is an edge to `agent.providers.base`, `from agent.loop import run_episode` one
to `agent.loop`. The packages that Python runs on the way (`agent`, `agent.providers`) are not edges, or every
package `__init__` that imports its own submodules would be a cycle.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The layers, left to right: a module may import its own layer or one to its left.
LAYERS = ("berth_env", "rollouts", "agent", "catalog", "live", "batch", "viewer", "app")
# Where the code that the Space and the CLI run lives: the seven packages and app.py.
LAYERED_SOURCES = ("berth_env", "rollouts", "agent", "catalog", "live", "batch", "viewer", "app.py")
# A package's `__main__` is a program, as app.py is: it stands on top, whatever package it sits in
# (`python -m agent` is the batch CLI's name from before the batch side had a package of its own).
PROGRAMS = ("agent.__main__",)


@dataclass(frozen=True)
class Floor:
    """Parts of a package (its modules and subpackages, by name) on one floor: a part imports parts on its floor
    or below. `apart`: the parts on this floor import none of each other (sections, each a package of its own)."""
    parts: tuple[str, ...]
    apart: bool = False


REST = "*"  # every part of the package that no floor names
# Inside a package, floors from the bottom up, the same rule as between packages.
FLOORS: dict[str, tuple[Floor, ...]] = {
    "agent": (Floor((REST,)), Floor(("providers",)), Floor(("request", "loop"))),
    "rollouts": (Floor(("settings", "scrub", "model_spec", "schema", "layout", "jsonio", "record", "events", "problems", "replay", "search", "prices", "metrics",
                        "annotations", "filters")),
                 Floor(("index",)), Floor(("sources",)), Floor((REST,))),
    "viewer": (Floor(("chart",)), Floor((REST,)), Floor(("share",)),
               Floor(("run", "arena", "browse", "play"), apart=True)),
}
# What serves the layers and may import them all, but that none of them may import.
SERVING = ("testkit", "tests", "bench")


@dataclass(frozen=True)
class Import:
    source: str   # the importing module, dotted ("agent.loop", "app")
    target: str   # the imported module, dotted and absolute ("rollouts.store", "yaml")
    path: str     # the importing file, relative to the root it was read from
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source} imports {self.target}"


def python_files(root: Path, sources: Iterable[str]) -> list[Path]:
    """The .py files of these packages (folders) and single modules (files) under root."""
    files: list[Path] = []
    for source in sources:
        path = root / source
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_imports(root: Path, sources: Iterable[str]) -> list[Import]:
    """Every import of every module under these sources."""
    files = python_files(root, sources)
    known = {module_name(root, path) for path in files}
    found: list[Import] = []
    for path in files:
        module = module_name(root, path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = str(path.relative_to(root))
        # dict.fromkeys: `from x import a, b` is one edge, not two
        found += [Import(module, target, rel, line)
                  for target, line in dict.fromkeys(imports_in(tree, package, known, module))]
    return found


def imports_in(tree: ast.Module, package: str, known: set[str] = frozenset(),
               module: str = "") -> Iterator[tuple[str, int]]:
    """(absolute module, line) for each import in a parsed module. `package` resolves relative imports;
    `known` (dotted project module names) tells `from pkg import submodule` from `from module import name`."""
    constants = _string_constants(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module or "", node.level, package)
            for alias in node.names:
                submodule = f"{base}.{alias.name}" if base else alias.name
                yield (submodule if submodule in known else base), node.lineno
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
            for name in _static_strings(node.args[0], constants):
                yield name, node.lineno
        elif isinstance(node, ast.Call) and _scanned_package(node) in {m.rpartition(".")[0] for m in known}:
            # `pkgutil.iter_modules(pkg.__path__)` then import_module(...): every module of that package.
            scanned = _scanned_package(node)
            for name in sorted(m for m in known if m.rpartition(".")[0] == scanned and m != module):
                yield name, node.lineno


def _scanned_package(node: ast.Call) -> str | None:
    """`pkg.sub` for a call `pkgutil.iter_modules(pkg.sub.__path__)` (a registry importing a whole package)."""
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
    if name != "iter_modules" or not node.args:
        return None
    arg = node.args[0]
    if not (isinstance(arg, ast.Attribute) and arg.attr == "__path__"):
        return None
    parts, value = [], arg.value
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    return ".".join([value.id, *reversed(parts)]) if isinstance(value, ast.Name) else None


def _absolute(module: str, level: int, package: str) -> str:
    if level == 0:
        return module
    parts = package.split(".") if package else []
    base = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join([*base, module] if module else base)


def _is_dynamic_import(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name in ("import_module", "__import__")


def _string_constants(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level names bound to a dict, list or tuple of string literals (the values of a dict)."""
    constants: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        else:
            continue
        items = value.values if isinstance(value, ast.Dict) else getattr(value, "elts", None)
        if isinstance(value, ast.Dict | ast.List | ast.Tuple) and items and all(
                isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items):
            constants[name] = [i.value for i in items]
    return constants


def _static_strings(arg: ast.expr, constants: dict[str, list[str]]) -> list[str]:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Name):
        return constants.get(arg.value.id, [])
    return []


# -- the rules ------------------------------------------------------------------------------------------------


def layer_of(module: str) -> int | None:
    """The layer index of a project module, or None for anything else (stdlib, third-party, tests...)."""
    if module in PROGRAMS:
        return LAYERS.index("app")
    top = module.split(".")[0]
    return LAYERS.index(top) if top in LAYERS else None


def against_the_layers(imports: Iterable[Import]) -> list[Import]:
    """Imports from a layer to one on its right (berth_env importing any other layer is one of these), and from a
    layer to what only serves the layers (testkit, tests, bench), which is to the right of them all."""
    wrong = []
    for imp in imports:
        source, target = layer_of(imp.source), layer_of(imp.target)
        if source is None:
            continue
        if (target is not None and target > source) or imp.target.split(".")[0] in SERVING:
            wrong.append(imp)
    return wrong


def floor_of(package: str, part: str) -> tuple[int, bool]:
    floors = FLOORS[package]
    for level, floor in enumerate(floors):
        if part in floor.parts:
            return level, floor.apart
    rest = next(level for level, floor in enumerate(floors) if REST in floor.parts)
    return rest, floors[rest].apart


def against_the_floors(imports: Iterable[Import]) -> list[Import]:
    """Imports inside a package of FLOORS from a part to one on a floor above it, or between two parts of a
    floor kept apart. A package's own `__init__` and programs stand outside the floors."""
    wrong = []
    for imp in imports:
        for package in FLOORS:
            prefix = package + "."
            if not (imp.source.startswith(prefix) and imp.target.startswith(prefix)) or imp.source in PROGRAMS:
                continue
            source, target = imp.source[len(prefix):].split(".")[0], imp.target[len(prefix):].split(".")[0]
            if source == target:
                continue
            (source_floor, apart), (target_floor, _) = floor_of(package, source), floor_of(package, target)
            if target_floor > source_floor or (apart and target_floor == source_floor):
                wrong.append(imp)
    return wrong


def graph_of(imports: Iterable[Import], modules: Iterable[str] | None = None) -> dict[str, set[str]]:
    """source -> targets, for edges between project modules (those in `modules`, or in any layer)."""
    keep = set(modules) if modules is not None else None
    graph: dict[str, set[str]] = {}
    for imp in imports:
        inside = imp.target in keep if keep is not None else layer_of(imp.target) is not None
        if inside:
            graph.setdefault(imp.source, set()).add(imp.target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle per strongly connected group of modules, as a path that ends where it starts."""
    found = []
    for group in _strongly_connected(graph):
        start = min(group)
        if len(group) == 1 and start not in graph.get(start, ()):
            continue
        found.append(_shortest_cycle(graph, start, group))
    return sorted(found)


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (a deep import chain must not hit the recursion limit)."""
    nodes = set(graph) | {t for targets in graph.values() for t in targets}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


def _shortest_cycle(graph: dict[str, set[str]], start: str, group: set[str]) -> list[str]:
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph.get(node, ())):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if child in group and child not in came_from:
                came_from[child] = node
                queue.append(child)
    raise AssertionError(f"{start} is in a strongly connected group but on no cycle")


def into_tests(imports: Iterable[Import], tests_dir: Path) -> list[Import]:
    """Imports of the tests package, or of a module in tests/ by its bare name (with tests/ put on sys.path)."""
    bare = {p.stem for p in tests_dir.glob("*.py")} | {
        p.name for p in tests_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    # tests/ mirrors the project's packages (tests/rollouts/ ...): those names are the packages themselves.
    project = {p.stem for p in tests_dir.parent.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
    return [imp for imp in imports if imp.target.split(".")[0] in {"tests", *(bare - project)}]
