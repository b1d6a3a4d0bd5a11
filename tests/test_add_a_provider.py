"""ARCHITECTURE.md's recipe "a provider: one module" holds: a provider class declared in one place (here, a
test-only class registered by defining it) reaches every door that names providers, with nothing else edited: the
Run and Arena forms' key fields and their handlers, the forms' and the CLI's key checks, a sweep's secrets, the
prices."""

from __future__ import annotations

import re
from pathlib import Path

import gradio as gr
import pytest

from agent.providers.base import PROVIDERS, ModelAPI
from rollouts import prices

PREFIX, KEY_ENV, ENDPOINT_ENV = "testprov", "TESTPROV_API_KEY", "TESTPROV_BASE_URL"
USAGE = {"input_tokens": 12_000, "output_tokens": 3_000}


@pytest.fixture
def test_provider():
    """A provider defined as one class, as a module of agent/providers would define it; gone again after."""

    class TestProvider(ModelAPI):
        prefixes = (PREFIX,)
        label = "The test provider"
        key_env = KEY_ENV
        key_name, key_label, key_order = "test provider key", "Test provider key (testprov:)", 5
        endpoint_env = ENDPOINT_ENV
        price_group = "openai"  # a reseller at OpenAI's list prices
        model_grammar = re.compile(r"[a-z0-9.-]+")

    try:
        yield TestProvider
    finally:
        del PROVIDERS[PREFIX]
        prices._SPEC_GROUPS.pop(PREFIX, None)


def test_a_provider_declared_once_gets_a_key_field_in_both_forms_wired_to_their_handlers(test_provider, tmp_path):
    import app as app_module
    from testkit.app import settings_for
    from viewer.arena.section import start_match
    from viewer.context import AppContext
    from viewer.run.section import start_run

    ctx = AppContext.create(settings_for(Path(tmp_path) / "rollouts"))
    try:
        demo = app_module.build_app(ctx)
    finally:
        ctx.store.close()
    boxes = {b.elem_id: b for b in demo.blocks.values() if isinstance(b, gr.Textbox) and b.elem_id
             and "key-" in b.elem_id}
    for form, handler in (("", start_run), ("arena-", start_match)):
        # The order the forms have always shown, then the new provider's field, labelled as it declares.
        assert [i for i in boxes if i.startswith(f"{form}key-")] == [
            f"{form}key-{p}" for p in ("anthropic", "openai", "hf", "vllm", PREFIX)]
        field = boxes[f"{form}key-{PREFIX}"]
        assert field.label == "Test provider key (testprov:)" and field.type == "password"
        run = next(fn for fn in demo.fns.values() if getattr(fn.fn, "__wrapped__", None) is handler)
        assert field._id in [component._id for component in run.inputs]  # what is typed reaches the run


def test_the_forms_and_the_cli_ask_for_its_key_by_its_own_names(test_provider, monkeypatch):
    from agent.spec import SpecError
    from batch.cli import check_model
    from viewer.request_check import FormError, _checked_spec

    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(SpecError, match=f"testprov:m1 needs an API key: set {KEY_ENV} in this shell"):
        check_model("testprov:m1")
    with pytest.raises(FormError, match=f"needs an test provider key: .* or set {KEY_ENV} on the Space"):
        _checked_spec("model", "testprov:m1", {})
    assert _checked_spec("model", "testprov:m1", {PREFIX: "typed-key-1234"}).text == "testprov:m1"
    monkeypatch.setenv(KEY_ENV, "shell-key-5678")
    check_model("testprov:m1")


def test_a_sweep_sends_its_key_and_endpoint_as_secrets(test_provider, monkeypatch):
    from batch.sweep_plan import SweepError, job_secrets

    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(SweepError, match=f"testprov:m1 needs {KEY_ENV}"):
        job_secrets(["testprov:m1"], None)
    monkeypatch.setenv(KEY_ENV, "shell-key-5678")
    monkeypatch.setenv(ENDPOINT_ENV, "https://models.example.org/v1")
    assert job_secrets(["testprov:m1", "baseline:greedy"], "hf_token_1") == {
        KEY_ENV: "shell-key-5678", ENDPOINT_ENV: "https://models.example.org/v1", "HF_TOKEN": "hf_token_1"}


def test_its_episodes_are_priced_by_the_group_it_declares(test_provider):
    priced = prices.episode_usd({"model": f"{PREFIX}:gpt-4o", "usage": USAGE, "turns": 3})
    assert priced is not None and priced == prices.episode_usd({"model": "openai:gpt-4o", "usage": USAGE,
                                                                 "turns": 3})


def test_a_price_group_rollouts_does_not_hold_is_refused_as_the_class_is_defined():
    with pytest.raises(ValueError, match="unknown price group"):
        class Unpriceable(ModelAPI):
            prefixes = ("testprov-bad",)
            price_group = "nowhere"
    assert "testprov-bad" not in PROVIDERS and "testprov-bad" not in prices._SPEC_GROUPS


def test_the_built_in_providers_price_groups_are_named_for_their_prefixes():
    """What lets a process that never loads the providers (`python -m rollouts fill-index`) price their episodes
    alike (rollouts.prices.price_group)."""
    from agent.providers.registry import prefixes, provider_class

    declared = {prefix: provider_class(prefix).price_group for prefix in prefixes()}
    assert declared == {"anthropic": "anthropic", "baseline": None, "hf": "hf", "openai": "openai", "vllm": None}
    assert all(group in (prefix, None) for prefix, group in declared.items())
