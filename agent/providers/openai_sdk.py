"""What the providers on the `openai` SDK share (Responses, and chat completions for `hf:` and `vllm:`)."""

from __future__ import annotations

import openai

from agent.providers.base import REQUEST_TIMEOUT_S, ModelAPI, shared_http_client


class OpenAIClientAPI(ModelAPI):
    """A provider spoken through the openai SDK: one client per episode over the process's shared HTTP client."""

    @staticmethod
    def make_client(base_url: str | None, key: str | None) -> openai.OpenAI:
        # The SDK's own retries are off: the base class retries, with a note the person watching can see.
        return openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=REQUEST_TIMEOUT_S,
                             http_client=shared_http_client("openai", openai.DefaultHttpxClient))

    def should_retry(self, error: BaseException) -> bool:
        """429, 5xx, and a refused, dropped or timed-out connection."""
        if isinstance(error, openai.APIStatusError):
            return error.status_code == 429 or error.status_code >= 500
        return isinstance(error, openai.APIConnectionError | openai.APITimeoutError)
