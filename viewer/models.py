"""The models the app suggests, in the Run form and the arena's (any other `provider:model[@effort]` may be typed),
and the typed keys that let them run: one home, so both forms offer the same and the arena's random pairs come
from the same list (those the Space can play on its own keys)."""

from __future__ import annotations

import gradio as gr

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
KEY_LABELS = {"anthropic": "Anthropic API key", "openai": "OpenAI API key", "hf": "Hugging Face token (hf:)",
              "vllm": "vLLM server key (vllm:)"}


def build_key_fields(prefix: str = "") -> dict[str, gr.Textbox]:
    """One password box per provider that takes a key (elem ids `#<prefix>key-<provider>`), in the caller's layout;
    what is typed is used for that run only, never stored."""
    return {provider: gr.Textbox(type="password", label=label, elem_id=f"{prefix}key-{provider}")
            for provider, label in KEY_LABELS.items()}
