"""The project's own promises: the README's commands, CI running them, requirements, lint, data licence."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

from tests.import_graph import LAYERED_SOURCES, ROOT, read_imports

# Our own top-level names; everything else outside the standard library is third-party.
PROJECT = {"berth_env", "rollouts", "agent", "catalog", "live", "batch", "viewer", "app", "testkit", "tests", "bench"}
# Import names whose distribution has another name, for when the distribution is not installed here to ask.
DISTRIBUTION_OF = {"yaml": "pyyaml", "PIL": "pillow", "sklearn": "scikit-learn", "dateutil": "python-dateutil",
                   "multipart": "python-multipart", "attr": "attrs"}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(path: Path) -> set[str]:
    """Normalized distribution names a requirements file declares, following `-r other.txt`."""
    names: set[str] = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith(("-r ", "--requirement ")):
            names |= requirement_names(path.parent / line.split(maxsplit=1)[1])
        elif line and not line.startswith("-"):
            names.add(normalized(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line).group()))
    return names


@cache
def installed_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distributions_of(module: str) -> set[str]:
    """Distributions that may provide a top-level module: those installed here that do, the known renames, and
    one named like the module (a meta-package such as `fastmcp` provides its module through another)."""
    found = {normalized(d) for d in installed_distributions().get(module, ())}
    return found | {normalized(DISTRIBUTION_OF.get(module, module))}


def undeclared(root: Path, sources: tuple[str, ...], requirements: Path) -> list[str]:
    """`path:line: module (distribution ...)` for each third-party import no requirement provides."""
    declared = requirement_names(requirements)
    local = PROJECT | {p.stem for source in sources if (root / source).is_dir() for p in (root / source).glob("*.py")}
    missing = []
    for imp in read_imports(root, sources):
        top = imp.target.split(".")[0]
        if not top or top in sys.stdlib_module_names or top in local or top == "__future__":
            continue
        if not distributions_of(top) & declared:
            likely = normalized(DISTRIBUTION_OF.get(top) or next(iter(installed_distributions().get(top, [])), top))
            missing.append(f"{imp.path}:{imp.line}: {top} (distribution {likely})")
    return list(dict.fromkeys(missing))


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(.+?)\n```", text, flags=re.S)[:2]


def test_readme_opens_with_space_front_matter_and_the_two_commands():
    text = (ROOT / "README.md").read_text()
    front = text.split("---")[1]
    assert "sdk: gradio" in front and "app_file: app.py" in front and "hf_oauth: true" in front
    install_and_run, run_tests = readme_commands()
    assert install_and_run == "pip install -r requirements.txt && python app.py"
    assert run_tests == "pip install -r requirements-dev.txt && python -m pytest"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme_commands()[1] in ci.splitlines()


def test_the_space_runs_requirements_txt_and_the_tools_are_in_requirements_dev():
    runtime = requirement_names(ROOT / "requirements.txt")
    assert "openenv" in runtime and "openenv-core" not in runtime
    for package in ("fastmcp", "gradio", "huggingface-hub", "datasets", "anthropic", "openai", "plotly", "duckdb",
                    "genai-prices"):
        assert package in runtime
    tools = {"pytest", "pytest-xdist", "playwright", "hypothesis", "ruff"}
    assert not tools & runtime, "test and lint tools belong in requirements-dev.txt"
    dev_lines = (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert dev_lines[0] == "-r requirements.txt"
    assert tools <= requirement_names(ROOT / "requirements-dev.txt")


def test_every_third_party_import_is_declared():
    # What the Space runs against requirements.txt; the tests, testkit and bench against requirements-dev.txt.
    missing = undeclared(ROOT, LAYERED_SOURCES, ROOT / "requirements.txt")
    missing += undeclared(ROOT, ("tests", "testkit", "bench"), ROOT / "requirements-dev.txt")
    assert not missing, "imported but not declared:\n" + "\n".join(missing)


def test_an_undeclared_import_is_caught_under_its_distribution_name(tmp_path):
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "cli.py").write_text(
        "import json\nimport yaml\nfrom typing_extensions import TypedDict\nfrom agent import loop\n\n"
        "def later():\n    import tqdm.auto\n    import some_unknown_module\n")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("PyYAML>=6  # the card's front matter\ntyping_extensions>=4\n")
    assert undeclared(tmp_path, ("agent",), requirements) == [
        "agent/cli.py:7: tqdm (distribution tqdm)",
        "agent/cli.py:8: some_unknown_module (distribution some-unknown-module)",
    ]
    dev = tmp_path / "requirements-dev.txt"
    dev.write_text("-r requirements.txt\ntqdm\nsome-unknown-module\n")
    assert undeclared(tmp_path, ("agent",), dev) == []


def test_the_task_data_keeps_its_licence_and_source_beside_it():
    data = ROOT / "berth_env" / "data"
    assert "Attribution-ShareAlike 4.0" in (data / "LICENSE").read_text()
    assert "Port de Barcelona" in (data / "SOURCE.md").read_text()


def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
