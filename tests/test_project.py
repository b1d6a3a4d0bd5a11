"""The project's own promises: the README's commands, CI running them, lint, and the data's attribution."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(.+?)\n```", text, flags=re.S)[:2]


def test_readme_opens_with_space_front_matter_and_the_two_commands():
    text = (ROOT / "README.md").read_text()
    front = text.split("---")[1]
    assert "sdk: gradio" in front and "app_file: app.py" in front and "hf_oauth: true" in front
    install_and_run, run_tests = readme_commands()
    assert install_and_run == "pip install -r requirements.txt && python app.py"
    assert run_tests.endswith("python -m pytest")


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme_commands()[1] in ci.splitlines()


def test_requirements_use_openenv_not_openenv_core():
    names = [re.split(r"[<>=\[ ;#]", line.strip())[0].lower()
             for line in (ROOT / "requirements.txt").read_text().splitlines() if line.strip()
             and not line.startswith("#")]
    assert "openenv" in names and "openenv-core" not in names
    for package in ("fastmcp", "gradio", "huggingface_hub", "datasets", "anthropic", "openai", "plotly", "pytest"):
        assert package in names


def test_the_task_data_keeps_its_licence_and_source_beside_it():
    data = ROOT / "berth_env" / "data"
    assert "Attribution-ShareAlike 4.0" in (data / "LICENSE").read_text()
    assert "Port de Barcelona" in (data / "SOURCE.md").read_text()


def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
