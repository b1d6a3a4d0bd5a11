"""Protocol peers: small local servers that speak the Anthropic Messages, OpenAI Responses and OpenAI-compatible
chat completions wire protocols, driven by a script, so the agent loop is tested with the real SDKs.
See README.md beside this file."""

from .anthropic_peer import AnthropicPeer
from .base import Peer, RecordedRequest
from .chat_peer import ChatPeer
from .openai_responses_peer import ResponsesPeer
from .script import (
    DieAfter,
    Error,
    ScriptQueue,
    StreamError,
    Text,
    Thinking,
    ToolCall,
    Turn,
    Usage,
    always,
    decrypt_reasoning,
    encrypted_reasoning,
    overloaded,
    rate_limited,
    thinking_signature,
)

__all__ = [
    "AnthropicPeer", "ChatPeer", "DieAfter", "Error", "Peer", "RecordedRequest", "ResponsesPeer", "ScriptQueue",
    "StreamError", "Text", "Thinking", "ToolCall", "Turn", "Usage", "always", "decrypt_reasoning",
    "encrypted_reasoning", "overloaded", "rate_limited", "thinking_signature",
]
