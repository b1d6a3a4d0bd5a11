"""Imports point one way: berth_env < rollouts < agent < viewer < app.py, no cycles, and bench/ stays off tests/.

The first tests read the project's real imports (tests/import_graph.py); the rest feed the same rules small
made-up modules, so each rule is seen failing when it should.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from tests.import_graph import (
    FLOORS,
    LAYERED_SOURCES,
    ROOT,
    Import,
    against_the_floors,
    against_the_layers,
    cycles,
    graph_of,
    imports_in,
    into_tests,
    python_files,
    read_imports,
)


def project_imports() -> list[Import]:
    return read_imports(ROOT, LAYERED_SOURCES)


def listed(imports: list[Import]) -> str:
    return "\n".join(str(i) for i in imports)


def test_the_graph_reads_every_layered_module():
    imports = project_imports()
    sources = {i.source for i in imports}
    for module in ("app", "agent.loop", "viewer.run.section", "rollouts.store", "berth_env.server"):
        assert module in sources
    # The registry imports every module of agent/providers (pkgutil.iter_modules + import_module): read too.
    registry = {i.target for i in imports if i.source == "agent.providers.registry"}
    assert "agent.providers.baseline" in registry and "agent.providers.anthropic_messages" in registry


def test_imports_point_left_only():
    wrong = against_the_layers(project_imports())
    assert not wrong, ("imports against berth_env < rollouts < agent < viewer < app.py (or into testkit, tests "
                       "or bench):\n" + listed(wrong))


def test_inside_a_package_imports_point_down_its_floors():
    wrong = against_the_floors(project_imports())
    assert not wrong, "imports against a package's floors (tests/import_graph.FLOORS):\n" + listed(wrong)


def test_every_floor_names_real_parts():
    for package, floors in FLOORS.items():
        parts = {p.stem for p in (ROOT / package).iterdir() if p.suffix == ".py" or any(p.glob("*.py"))}
        named = {part for floor in floors for part in floor.parts} - {"*"}
        assert named <= parts, f"{package}'s floors name what is not there: {sorted(named - parts)}"


def test_berth_env_imports_nothing_else_of_the_project():
    outside = [i for i in project_imports() if i.source.split(".")[0] == "berth_env"
               and i.target.split(".")[0] in {"rollouts", "agent", "viewer", "app", "testkit", "tests", "bench"}]
    assert not outside, "berth_env must stand alone:\n" + listed(outside)


def test_no_import_cycles():
    found = cycles(graph_of(project_imports()))
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


def test_the_index_sits_below_the_sources_and_the_archive():
    # Inside rollouts/ the index is read by the sources and the archive, never the other way: the sources' names
    # and precedence are the index's own (rollouts.index.format.SOURCES).
    upward = [i for i in project_imports() if i.source.startswith("rollouts.index.")
              and i.target.split(".")[:2] in (["rollouts", "sources"], ["rollouts", "archive"])]
    assert not upward, "rollouts/index imports rollouts.sources or rollouts.archive:\n" + listed(upward)


def test_bench_and_testkit_import_nothing_from_tests():
    # testkit is what bench shares with the tests, so it must stay off tests/ too.
    imports = read_imports(ROOT, ("bench", "testkit"))
    wrong = into_tests(imports, ROOT / "tests")
    assert not wrong, "bench/ and testkit/ must not import tests/:\n" + listed(wrong)
    on_path = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in python_files(ROOT, ("bench", "testkit"))
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.stmt) and not isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Module)
               and "sys.path" in (code := ast.unparse(node)) and "'tests'" in code]
    assert not on_path, "bench/ puts tests/ on sys.path: " + ", ".join(on_path)


# -- the rules on made-up modules ----------------------------------------------------------------------------


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_every_kind_of_import_is_read(tmp_path):
    write(tmp_path, {
        "agent/__init__.py": "",
        "agent/providers/__init__.py": "from . import base\n",
        "agent/providers/base.py": "from ..loop import run\nfrom .. import spec\n",
        "agent/spec.py": "",
        "agent/loop.py": """
            import importlib
            import yaml
            from agent.providers import base
            from rollouts.store import RolloutStore
            ADAPTERS = {"a": "agent.providers.base", "b": "agent.spec"}

            def later():
                import viewer.chat
                from app import build_app
                importlib.import_module("rollouts.card")
                return importlib.import_module(ADAPTERS[name])
            """,
    })
    found = {(i.source, i.target) for i in read_imports(tmp_path, ("agent",))}
    assert found == {
        ("agent.providers", "agent.providers.base"),
        ("agent.providers.base", "agent.loop"), ("agent.providers.base", "agent.spec"),
        ("agent.loop", "importlib"), ("agent.loop", "yaml"), ("agent.loop", "agent.providers.base"),
        ("agent.loop", "rollouts.store"), ("agent.loop", "viewer.chat"), ("agent.loop", "app"),
        ("agent.loop", "rollouts.card"), ("agent.loop", "agent.spec"),
    }


def test_a_dynamic_import_of_a_computed_name_is_not_guessed():
    tree = ast.parse("import importlib\nimportlib.import_module(prefix + '.x')\n")
    assert [name for name, _ in imports_in(tree, "")] == ["importlib"]


def edge(source: str, target: str) -> Import:
    return Import(source, target, source.replace(".", "/") + ".py", 1)


def test_an_import_to_the_right_is_caught_and_one_to_the_left_is_not():
    back = [edge("rollouts.store", "agent.loop"), edge("berth_env.server", "rollouts.schema"),
            edge("viewer.chat", "app"), edge("agent.loop", "viewer.live"), edge("app", "testkit.peers"),
            edge("rollouts.card", "tests.agent_helpers")]
    fine = [edge("app", "viewer.chat"), edge("viewer.chat", "berth_env.plan"), edge("agent.loop", "rollouts.events"),
            edge("rollouts.store", "yaml"), edge("agent.loop", "rollouts.store"), edge("testkit.app", "app"),
            edge("bench.loop_bench", "agent.loop")]
    assert against_the_layers(back + fine) == back


def test_an_import_up_a_packages_floors_or_across_sections_is_caught():
    back = [edge("viewer.chart.svg", "viewer.markdown"), edge("viewer.markdown", "viewer.run.section"),
            edge("viewer.arena.match", "viewer.run.stream"), edge("rollouts.index.engine", "rollouts.sources"),
            edge("agent.providers.base", "agent.loop")]
    fine = [edge("viewer.run.section", "viewer.run.stream"), edge("viewer.share.page", "viewer.chart.svg"),
            edge("viewer.arena.match", "viewer.rollout_panel"), edge("rollouts.archive", "rollouts.index.engine"),
            edge("agent.loop", "agent.providers.base"), edge("agent.__main__", "batch.cli"),
            edge("viewer.rollout_panel", "viewer.chat")]
    assert against_the_floors(back + fine) == back


def test_a_cycle_is_reported_with_its_path():
    graph = graph_of([edge("agent.a", "agent.b"), edge("agent.b", "agent.c"), edge("agent.c", "agent.a"),
                      edge("agent.c", "agent.d"), edge("agent.d", "rollouts.x"), edge("rollouts.x", "yaml")])
    assert cycles(graph) == [["agent.a", "agent.b", "agent.c", "agent.a"]]


def test_two_modules_importing_each_other_and_a_self_import_are_cycles():
    graph = graph_of([edge("viewer.chat", "viewer.live"), edge("viewer.live", "viewer.chat"),
                      edge("rollouts.store", "rollouts.store"), edge("app", "viewer.chat")])
    assert cycles(graph) == [["rollouts.store", "rollouts.store"], ["viewer.chat", "viewer.live", "viewer.chat"]]


def test_the_shortest_way_around_a_tangle_is_reported():
    graph = graph_of([edge("agent.a", "agent.b"), edge("agent.b", "agent.c"), edge("agent.c", "agent.d"),
                      edge("agent.d", "agent.a"), edge("agent.b", "agent.a")])
    assert cycles(graph) == [["agent.a", "agent.b", "agent.a"]]


def test_a_long_chain_without_a_cycle_passes():
    chain = [edge(f"agent.m{i}", f"agent.m{i + 1}") for i in range(3000)]
    assert cycles(graph_of(chain)) == []


def test_bench_importing_tests_is_caught(tmp_path):
    tests_dir = write(tmp_path, {"tests/agent_helpers.py": "", "tests/browser/conftest.py": ""}) / "tests"
    imports = [edge("bench.a", "tests.agent_helpers"), edge("bench.b", "agent_helpers"),
               edge("bench.c", "browser.conftest"), edge("bench.d", "testkit.app"), edge("bench.e", "agent.loop")]
    assert into_tests(imports, tests_dir) == imports[:3]
