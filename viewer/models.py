"""The models the app suggests, in the Run form and the arena's (any other `provider:model[@effort]` may be typed),
and the typed keys that let them run: one home, so both forms offer the same and the arena's random pairs come
from the same list (those the Space can play on its own keys). The key fields are the registered providers' own
(agent.providers.registry.key_providers): a provider added as one module gets its field in both forms."""

from __future__ import annotations

from typing import Any

import gradio as gr

from agent.providers.registry import key_providers

PRESETS = [
    "baseline:hasty",
    "baseline:greedy",
    "baseline:naive",
    "openai:gpt-6.1-sol",
    "anthropic:claude-sonnet-5-5",
    "hf:zai-org/GLM-5.3-Flash:baseten",
    "hf:Qwen/Qwen3.8-2.4T-A95B:together",
    "hf:zai-org/GLM-5.3:together",
    "hf:Qwen/Qwen3.8-27B:cerebras|ovhcloud",
]
DEFAULT_MODEL = "baseline:hasty"
MODEL_INFO = "provider:model[@effort] · baselines need no key"


def build_key_fields(prefix: str = "") -> dict[str, gr.Textbox]:
    """One password box per provider that takes a key (elem ids `#<prefix>key-<provider>`), labelled and ordered
    as each provider declares, in the caller's layout; what is typed is used for that run only, never stored.
    Handlers take them as `**typed` keyword inputs named by provider (`inputs_kwargs=fields`)."""
    return {provider: gr.Textbox(type="password", label=api.key_label or api.key_name,
                                 elem_id=f"{prefix}key-{provider}")
            for provider, api in key_providers()}


def typed_keys(typed: dict[str, Any], oauth_token: gr.OAuthToken | None = None) -> dict[str, str]:
    """The keys typed in a form's fields, by provider; a visitor signed in with Hugging Face lends their token to
    the provider whose key is the Hub's token (HF_TOKEN) when none was typed for it."""
    keys = {provider: value if isinstance(value, str) else "" for provider, value in typed.items()}
    if oauth_token is not None:
        for provider, api in key_providers():
            if api.key_env == "HF_TOKEN" and not keys.get(provider):
                keys[provider] = oauth_token.token
    return keys
