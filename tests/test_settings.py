"""One door to the environment: rollouts/settings.py for rollouts, the agent, the viewer and the app, and
berth_env/settings.py for berth_env, which stands alone. No other module of theirs reads os.environ or os.getenv
(read with `ast`); every setting says its variable, type, default and purpose; a secret's value never prints."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rollouts import settings
from tests.import_graph import LAYERED_SOURCES as LAYERS

ROOT = Path(__file__).resolve().parent.parent

DOORS = {"rollouts/settings.py", "berth_env/settings.py"}
READERS = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def environment_reads(source: str) -> list[int]:
    """The lines of `source` that touch the process environment: `os.environ...`, `os.getenv(...)`, or such a name
    imported from os (`from os import environ`)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr in READERS and isinstance(node.value, ast.Name) \
                and node.value.id == "os") or (isinstance(node, ast.ImportFrom) and node.module == "os" and any(a.name in READERS for a in node.names)):
            lines.append(node.lineno)
    return lines


def modules() -> list[Path]:
    found = []
    for layer in LAYERS:
        path = ROOT / layer
        found += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return found


def test_the_scan_finds_a_direct_read():
    assert environment_reads("import os\nx = os.environ.get('X')\n") == [2]
    assert environment_reads("import os\nx = os.getenv('X', '')\n") == [2]
    assert environment_reads("from os import environ\n") == [1]
    assert environment_reads("import os\nos.environ['X'] = '1'\n") == [2]
    assert environment_reads("from rollouts import settings\nx = settings.HF_TOKEN.get()\n") == []


def test_no_module_but_the_settings_reads_the_environment():
    readers = {}
    for path in modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel not in DOORS:
            found = environment_reads(path.read_text())
            if found:
                readers[rel] = found
    assert readers == {}, f"read the environment through rollouts.settings (berth_env: berth_env.settings): {readers}"


def test_every_setting_says_its_variable_type_default_and_purpose():
    import agent.providers.registry as registry

    registry.key_providers()  # every provider declared: its key and endpoint variables are settings too
    assert len(settings.SETTINGS) >= 30
    for name, setting in settings.SETTINGS.items():
        assert setting.name == name and name.isupper() and callable(setting.kind) and len(setting.doc) > 10
    for prefix, api in registry.key_providers():
        assert settings.setting(api.key_env).secret, prefix
    assert all(settings.setting(name).secret for name in registry.endpoint_envs().values())


def test_a_setting_is_read_when_asked_and_a_bad_one_is_named(monkeypatch):
    monkeypatch.setenv("ARENA_MAX_EPISODES", "5")
    assert settings.ARENA_MAX_EPISODES.get() == 5
    monkeypatch.setenv("ARENA_MAX_EPISODES", " ")
    assert settings.ARENA_MAX_EPISODES.get() == 16  # blank: the default
    monkeypatch.setenv("PUBLIC_ROLLOUTS", "")
    assert settings.PUBLIC_ROLLOUTS.get() is None  # blank turns the public rollouts off
    monkeypatch.delenv("PUBLIC_ROLLOUTS")
    assert settings.PUBLIC_ROLLOUTS.get() == "FineEnvs/PortSimEnv"
    monkeypatch.setenv("ARENA_MAX_EPISODES", "many")
    with pytest.raises(ValueError, match="ARENA_MAX_EPISODES='many' is not a valid int"):
        settings.ARENA_MAX_EPISODES.get()


def test_a_secret_read_through_the_settings_never_prints(monkeypatch):
    import agent.providers.registry as registry

    registry.key_providers()
    monkeypatch.setenv("HF_TOKEN", "hf_SeCrEtToKeN0123456789")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-SeCrEt-0123456789")
    monkeypatch.setenv("ARENA_MAX_EPISODES", "7")
    now = settings.current()
    assert now["HF_TOKEN"] == "hf_SeCrEtToKeN0123456789"  # the value, for whoever asks for it by name
    for shown in (repr(now), str(now), f"{now}", repr(settings.HF_TOKEN)):
        assert "SeCrEt" not in shown
    assert "'ARENA_MAX_EPISODES': 7" in repr(now) and f"'HF_TOKEN': '{settings.MASK}'" in repr(now)
    with pytest.raises(ValueError) as bad:
        settings.Setting("TEST_SECRET", int, None, "a secret number", secret=True).get({"TEST_SECRET": "sk-9SeCrEt"})
    assert "SeCrEt" not in str(bad.value)
