"""The protocol peers speak their wire protocols well enough for the real SDKs: anthropic and openai clients,
pointed at the peers over a loopback socket, parse text, reasoning, tool calls, usage, stop reasons and errors."""

from __future__ import annotations

import json
import time

import anthropic
import httpx2
import openai
import pytest

from testkit.peers import (
    AnthropicPeer,
    ChatPeer,
    DieAfter,
    Error,
    ResponsesPeer,
    StreamError,
    Text,
    Thinking,
    ToolCall,
    Turn,
    Usage,
    always,
    encrypted_reasoning,
    overloaded,
    rate_limited,
    thinking_signature,
)

PLAN_ARGS = '{"plan": [{"ship": 1, "berth_hour": 0, "section": 2}]}'
USER = [{"role": "user", "content": "make the new berth plan"}]
TOOL = {"name": "check_plan", "description": "check a draft plan",
        "parameters": {"type": "object", "properties": {"plan": {"type": "array"}}, "required": ["plan"],
                       "additionalProperties": False}}


def transport_failure(error: BaseException) -> httpx2.TransportError | None:
    """The transport error at the root of what an SDK raised: SDK versions differ in whether they wrap a dropped
    stream (anthropic 2.17 raises APIConnectionError from it, 2.14 let httpx2's own error through), so the peer's
    tests ask what happened on the wire, not which class carried it."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, httpx2.TransportError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def claude(peer: AnthropicPeer, **kw: object) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=peer.url, api_key="test", timeout=10, **kw)


def gpt(peer: ResponsesPeer | ChatPeer, **kw: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=peer.url + "/v1", api_key="test", timeout=10, **kw)


def full_turn(**kw: object) -> Turn:
    return Turn(Thinking("ship 1 fits section 2"), Text("Checking the draft now."),
                ToolCall("check_plan", PLAN_ARGS, id="call_a"),
                usage=Usage(input_tokens=120, cache_read_input_tokens=30), **kw)


# Anthropic Messages

def test_anthropic_stream_helper_reads_thinking_text_tool_use_and_usage() -> None:
    with AnthropicPeer([full_turn()]) as peer, claude(peer).messages.stream(
            model="claude-test", max_tokens=2048, messages=USER,
            thinking={"type": "enabled", "budget_tokens": 1024}) as stream:
        events = list(stream)
        message = stream.get_final_message()

    assert [e.text for e in events if e.type == "text"] == ["Chec", "king", " the", " dra", "ft n", "ow."]
    assert "".join(e.thinking for e in events if e.type == "thinking") == "ship 1 fits section 2"
    assert [e.type for e in events if e.type == "signature"] == ["signature"]
    assert "".join(e.partial_json for e in events if e.type == "input_json") == PLAN_ARGS
    thinking, text, tool = message.content
    assert thinking.type == "thinking" and thinking.signature == thinking_signature("ship 1 fits section 2")
    assert text.text == "Checking the draft now."
    assert (tool.type, tool.id, tool.name, tool.input) == ("tool_use", "call_a", "check_plan", json.loads(PLAN_ARGS))
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens) == (120, 30)
    assert message.usage.output_tokens == full_turn().output_tokens() > 1

    request = peer.requests[0]
    assert (request.method, request.path, request.body["stream"]) == ("POST", "/v1/messages", True)
    # anthropic 2.x sends the key as a bearer token (1.x used x-api-key); the peer accepts both
    assert request.headers.get("authorization") == "Bearer test" and "anthropic-version" in request.headers
    assert request.body["thinking"] == {"type": "enabled", "budget_tokens": 1024}


def test_anthropic_json_reply_and_stop_reasons() -> None:
    script = [Turn("All done."), Turn("The plan is lo", stop="max_tokens"), Turn(ToolCall("submit_plan", "{}"))]
    with AnthropicPeer(script) as peer:
        client = claude(peer)
        replies = [client.messages.create(model="claude-test", max_tokens=64, messages=USER) for _ in script]
    assert [r.stop_reason for r in replies] == ["end_turn", "max_tokens", "tool_use"]
    assert replies[0].content[0].text == "All done."
    assert replies[2].content[0].input == {}
    assert all(r.body.get("stream") is None for r in peer.requests)


def test_anthropic_malformed_tool_json_breaks_the_helper_but_not_the_raw_stream() -> None:
    bad = '{"plan": [1, oops]}'
    with AnthropicPeer([Turn(ToolCall("check_plan", bad)), Turn(ToolCall("check_plan", bad)),
                        Turn(ToolCall("check_plan", '{"plan": [1, 2'), stop="max_tokens")]) as peer:
        client = claude(peer)
        # the helper parses partial JSON as it arrives and gives up with a plain ValueError
        with pytest.raises(ValueError, match="Unable to parse tool parameter JSON"), client.messages.stream(
                model="claude-test", max_tokens=64, messages=USER) as stream:
            stream.until_done()
        # the raw event stream hands over the text untouched
        raw = client.messages.create(model="claude-test", max_tokens=64, messages=USER, stream=True)
        assert "".join(e.delta.partial_json for e in raw if e.type == "content_block_delta") == bad
        # a cut-off argument text is silently completed by the helper's partial parser
        with client.messages.stream(model="claude-test", max_tokens=64, messages=USER) as stream:
            message = stream.get_final_message()
        assert message.content[0].input == {"plan": [1, 2]} and message.stop_reason == "max_tokens"


def test_anthropic_peer_rejects_histories_the_api_rejects() -> None:
    sig = thinking_signature("plan first")
    turn_back = [{"role": "assistant", "content": [
        {"type": "thinking", "thinking": "plan first", "signature": sig},
        {"type": "tool_use", "id": "toolu_1", "name": "check_plan", "input": {}}]}]
    answer = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]
    forged = [{"role": "assistant", "content": [
        {"type": "thinking", "thinking": "plan first", "signature": "forged"},
        {"type": "tool_use", "id": "toolu_1", "name": "check_plan", "input": {}}]}]
    with AnthropicPeer([Turn("fine")]) as peer:
        client = claude(peer, max_retries=0)
        with pytest.raises(anthropic.BadRequestError, match="tool_result"):
            client.messages.create(model="m", max_tokens=64, messages=USER + turn_back + USER)
        with pytest.raises(anthropic.BadRequestError, match="signature"):
            client.messages.create(model="m", max_tokens=64, messages=USER + forged + answer)
        with pytest.raises(anthropic.BadRequestError, match="budget_tokens"):
            client.messages.create(model="m", max_tokens=64, messages=USER,
                                   thinking={"type": "enabled", "budget_tokens": 1024})
        assert peer.remaining == 1  # rejected requests consume no script
        reply = client.messages.create(model="m", max_tokens=64, messages=USER + turn_back + answer)
    assert reply.content[0].text == "fine"


def test_anthropic_retries_a_429_then_succeeds() -> None:
    with AnthropicPeer([rate_limited(), Turn("after the wait")]) as peer, \
            claude(peer).messages.stream(model="m", max_tokens=64, messages=USER) as stream:
        text = stream.get_final_text()
    assert text == "after the wait"
    assert [r.status for r in peer.requests] == [429, 200]
    assert peer.requests[1].headers["x-stainless-retry-count"] == "1"


def test_anthropic_errors_surface_as_sdk_exceptions() -> None:
    with AnthropicPeer([Error(500, "boom"), overloaded(), Error(401, "bad key")]) as peer:
        client = claude(peer, max_retries=0)
        with pytest.raises(anthropic.InternalServerError) as server_error:
            client.messages.create(model="m", max_tokens=64, messages=USER)
        with pytest.raises(anthropic.OverloadedError) as overload:
            client.messages.create(model="m", max_tokens=64, messages=USER)
        with pytest.raises(anthropic.AuthenticationError):
            client.messages.create(model="m", max_tokens=64, messages=USER)
    assert server_error.value.status_code == 500
    assert server_error.value.body == {"type": "error", "error": {"type": "api_error", "message": "boom"}}
    assert overload.value.status_code == 529 and overload.value.body["error"]["type"] == "overloaded_error"


def test_wrong_key_is_refused_and_a_dropped_json_request_is_retried() -> None:
    with AnthropicPeer([DieAfter(0), Turn("after reconnecting")], api_key="right") as peer:
        with pytest.raises(anthropic.AuthenticationError):
            claude(peer, max_retries=0).messages.create(model="m", max_tokens=64, messages=USER)
        client = anthropic.Anthropic(base_url=peer.url, api_key="right", max_retries=1, timeout=10)
        reply = client.messages.create(model="m", max_tokens=64, messages=USER)
    assert reply.content[0].text == "after reconnecting"
    assert [(r.status, r.dropped) for r in peer.requests] == [(401, False), (None, True), (200, False)]


def test_anthropic_dropped_and_failed_streams() -> None:
    with AnthropicPeer([DieAfter(6), StreamError(5, message="Overloaded")]) as peer:
        client = claude(peer, max_retries=0)
        seen = []
        with pytest.raises(Exception) as dropped, \
                client.messages.stream(model="m", max_tokens=64, messages=USER) as stream:
            seen.extend(e.type for e in stream)
        with pytest.raises(anthropic.APIStatusError, match="overloaded_error"), \
                client.messages.stream(model="m", max_tokens=64, messages=USER) as stream:
            stream.until_done()
    assert isinstance(transport_failure(dropped.value), httpx2.RemoteProtocolError)
    assert "incomplete chunked read" in str(transport_failure(dropped.value))
    assert "text" in seen and "message_stop" not in seen
    assert peer.requests[0].dropped and peer.requests[0].events_sent == 6
    assert not peer.requests[1].dropped and peer.requests[1].events_sent == 6  # five, then the error event


def test_deltas_are_paced_by_delay() -> None:
    with AnthropicPeer([Turn("abcdefghijkl", chunk=3, delay=0.05)]) as peer, \
            claude(peer).messages.stream(model="m", max_tokens=64, messages=USER) as stream:
        stamps = [(time.monotonic(), e.text) for e in stream if e.type == "text"]
    assert [t for _, t in stamps] == ["abc", "def", "ghi", "jkl"]
    assert stamps[-1][0] - stamps[0][0] >= 0.12


# OpenAI Responses

def responses_args(**kw: object) -> dict:
    return {"model": "gpt-test", "input": "make the new berth plan", "store": False,
            "reasoning": {"effort": "low", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
            "tools": [{"type": "function", **TOOL}], **kw}


def test_responses_stream_helper_reads_reasoning_text_call_and_usage() -> None:
    with ResponsesPeer([full_turn()]) as peer, gpt(peer).responses.stream(**responses_args()) as stream:
        events = list(stream)
        response = stream.get_final_response()

    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta") == \
        "ship 1 fits section 2"
    assert [e.delta for e in events if e.type == "response.output_text.delta"] == \
        ["Chec", "king", " the", " dra", "ft n", "ow."]
    arg_deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(arg_deltas) > 1 and arg_deltas[-1].snapshot == PLAN_ARGS
    added = next(e for e in events if e.type == "response.output_item.added" and e.item.type == "reasoning")
    assert added.item.encrypted_content is None  # only the finished item carries it

    reasoning, _message, call = response.output
    assert reasoning.summary[0].text == "ship 1 fits section 2"
    assert reasoning.encrypted_content == encrypted_reasoning("ship 1 fits section 2")
    assert response.output_text == "Checking the draft now."
    assert (call.type, call.name, call.call_id, call.arguments) == ("function_call", "check_plan", "call_a", PLAN_ARGS)
    assert response.status == "completed"
    usage = response.usage
    assert (usage.input_tokens, usage.input_tokens_details.cached_tokens) == (150, 30)
    assert usage.output_tokens_details.reasoning_tokens == full_turn().reasoning_tokens() > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert peer.requests[0].body["store"] is False and peer.requests[0].headers["authorization"] == "Bearer test"


def test_responses_reasoning_shows_only_what_the_request_asks_for() -> None:
    with ResponsesPeer([full_turn()]) as peer:
        response = gpt(peer).responses.create(model="gpt-test", input="plan")
    reasoning = response.output[0]
    assert reasoning.type == "reasoning" and reasoning.summary == [] and reasoning.encrypted_content is None


def test_responses_round_trip_of_encrypted_reasoning_and_tool_output() -> None:
    with ResponsesPeer([full_turn(), Turn("Submitted."), Turn("unused")]) as peer:
        client = gpt(peer, max_retries=0)
        first = client.responses.create(**responses_args())
        history = [{"role": "user", "content": "make the new berth plan"}]
        history += [item.model_dump(exclude_none=True) for item in first.output]
        history.append({"type": "function_call_output", "call_id": "call_a", "output": '{"feasible": true}'})
        second = client.responses.create(**responses_args(input=history))
        assert second.output_text == "Submitted."

        sent = peer.requests[1].body["input"]
        reasoning = next(i for i in sent if i.get("type") == "reasoning")
        assert reasoning["encrypted_content"] == encrypted_reasoning("ship 1 fits section 2")
        assert peer.requests[1].body["store"] is False

        stripped = [{k: v for k, v in i.items() if k != "encrypted_content"} for i in history]
        with pytest.raises(openai.NotFoundError, match="not persisted"):
            client.responses.create(**responses_args(input=stripped))
        with pytest.raises(openai.BadRequestError, match="No tool output"):
            client.responses.create(**responses_args(input=history[:-1]))
    assert peer.remaining == 1


def test_responses_max_tokens_ends_incomplete() -> None:
    with ResponsesPeer([Turn(Thinking("long"), Text("The plan is"), stop="max_tokens")]) as peer, \
            gpt(peer).responses.stream(**responses_args()) as stream:
        events = list(stream)
        # the helper only finalises on response.completed
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            stream.get_final_response()
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.status == "incomplete" and last.response.incomplete_details.reason == "max_output_tokens"
    assert last.response.output[-1].status == "incomplete"


def test_responses_retry_errors_drop_and_failure() -> None:
    with ResponsesPeer([rate_limited(), Turn("ok"), Error(500, "boom"), DieAfter(4), StreamError(3)]) as peer:
        assert gpt(peer).responses.create(model="m", input="x").output_text == "ok"
        client = gpt(peer, max_retries=0)
        with pytest.raises(openai.InternalServerError) as server_error:
            client.responses.create(model="m", input="x")
        with pytest.raises(openai.APIConnectionError) as dropped, \
                client.responses.stream(model="m", input="x") as stream:
            stream.until_done()
        with client.responses.stream(model="m", input="x") as stream:
            failed = list(stream)[-1]
    assert [r.status for r in peer.requests[:2]] == [429, 200]
    assert server_error.value.body == {"message": "boom", "type": "server_error", "param": None, "code": "server_error"}
    assert isinstance(transport_failure(dropped.value), httpx2.RemoteProtocolError)
    assert failed.type == "response.failed" and failed.response.error.code == "server_error"


# chat completions

def chat_args(**kw: object) -> dict:
    return {"model": "org/model", "messages": USER, "stream": True, "stream_options": {"include_usage": True},
            "tools": [{"type": "function", "function": TOOL}], **kw}


def test_chat_stream_chunks_carry_role_content_reasoning_tool_calls_and_usage() -> None:
    turn = Turn(Thinking("fits"), Text("Checking."), ToolCall("check_plan", PLAN_ARGS, id="call_x"),
                ToolCall("submit_plan", "{}"), usage=Usage(input_tokens=80, cache_read_input_tokens=20))
    with ChatPeer([turn, turn]) as peer:
        client = gpt(peer)
        chunks = list(client.chat.completions.create(**chat_args()))
        no_usage = list(client.chat.completions.create(**chat_args(stream_options=None)))

    assert chunks[0].choices[0].delta.role == "assistant"
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas) == "fits"
    assert [d.content for d in deltas if d.content] == ["Chec", "king", "."]
    fragments = [t for d in deltas for t in d.tool_calls or []]
    first = [f for f in fragments if f.id]
    assert [(f.index, f.id, f.function.name) for f in first] == [(0, "call_x", "check_plan"),
                                                                (1, first[1].id, "submit_plan")]
    assert all(f.id is None and f.function.name is None for f in fragments if f not in first)
    assert "".join(f.function.arguments or "" for f in fragments if f.index == 0) == PLAN_ARGS
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["tool_calls"]
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens == 100
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == 20
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == 1
    assert all(c.usage is None for c in no_usage) and all(c.choices for c in no_usage)


@pytest.mark.parametrize("style", ["reasoning", "think_tags"])
def test_chat_reasoning_styles(style: str) -> None:
    with ChatPeer([Turn(Thinking("weigh cranes"), Text("Done."), chat_reasoning=style)]) as peer:
        args = {k: v for k, v in chat_args().items() if k != "stream"}
        with gpt(peer).chat.completions.stream(**args) as stream:
            list(stream)
            message = stream.get_final_completion().choices[0].message
    if style == "think_tags":
        assert message.content == "<think>weigh cranes</think>Done."
    else:
        assert message.content == "Done." and message.model_extra["reasoning"] == "weigh cranes"


def test_chat_json_reply_and_finish_reasons() -> None:
    script = [Turn(Thinking("hm"), "A."), Turn("cut", stop="max_tokens"), Turn(ToolCall("check_plan", "{bad"))]
    with ChatPeer(script) as peer:
        client = gpt(peer)
        replies = [client.chat.completions.create(model="m", messages=USER) for _ in script]
    assert [r.choices[0].finish_reason for r in replies] == ["stop", "length", "tool_calls"]
    assert replies[0].choices[0].message.model_extra["reasoning_content"] == "hm"
    assert replies[2].choices[0].message.tool_calls[0].function.arguments == "{bad"
    assert replies[0].usage.prompt_tokens == 100


def test_chat_routes_by_model_for_provider_fallback() -> None:
    with ChatPeer(models={"org/model:provA": always(Error(500, "provider down")),
                          "org/model:provB": [Turn("from B")]}) as peer:
        client = gpt(peer, max_retries=0)
        with pytest.raises(openai.InternalServerError, match="provider down"):
            list(client.chat.completions.create(**chat_args(model="org/model:provA")))
        text = "".join(c.choices[0].delta.content or "" for c in
                       client.chat.completions.create(**chat_args(model="org/model:provB")) if c.choices)
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            client.chat.completions.create(**chat_args(model="org/other"))
    assert text == "from B"
    assert [r.body["model"] for r in peer.requests] == ["org/model:provA", "org/model:provB", "org/other"]


def test_chat_endless_answer_ignores_max_tokens_until_the_client_closes() -> None:
    with ChatPeer([Turn("berth ", chunk=6, endless=True)]) as peer:
        stream = gpt(peer).chat.completions.create(**chat_args(max_tokens=10))
        received = ""
        for chunk in stream:
            received += chunk.choices[0].delta.content or ""
            if len(received) > 600:  # ten times what max_tokens allows
                break
        stream.close()
        record = peer.requests[0]
        assert record.wait(5)
    assert record.client_closed and not record.dropped
    assert record.chars_sent >= len(received) > 600
    assert received.startswith("berth berth ")


def test_chat_errors_drop_and_mid_stream_failure() -> None:
    with ChatPeer([rate_limited(), Turn("ok"), DieAfter(3), StreamError(2, message="upstream fell over")]) as peer:
        assert gpt(peer).chat.completions.create(model="m", messages=USER).choices[0].message.content == "ok"
        client = gpt(peer, max_retries=0)
        with pytest.raises(openai.APIConnectionError):
            list(client.chat.completions.create(**chat_args()))
        with pytest.raises(openai.APIError, match="upstream fell over"):
            list(client.chat.completions.create(**chat_args()))
    assert [r.status for r in peer.requests[:2]] == [429, 200]


def test_chat_peer_rejects_unanswered_tool_calls() -> None:
    asked = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "check_plan", "arguments": "{}"}}]}
    answered = {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
    with ChatPeer([Turn("fine")]) as peer:
        client = gpt(peer, max_retries=0)
        with pytest.raises(openai.BadRequestError, match="call_1"):
            client.chat.completions.create(model="m", messages=[*USER, asked, *USER])
        reply = client.chat.completions.create(model="m", messages=[*USER, asked, answered])
    assert reply.choices[0].message.content == "fine"


# the script itself

def test_a_callable_script_sees_each_request() -> None:
    def reply(request: dict) -> Turn:
        return Turn(f"you sent {len(request['messages'])} message(s)")

    with ChatPeer(reply) as peer:
        client = gpt(peer)
        texts = [client.chat.completions.create(model="m", messages=USER * n).choices[0].message.content
                 for n in (1, 3)]
    assert texts == ["you sent 1 message(s)", "you sent 3 message(s)"]


def test_an_exhausted_script_is_a_clear_non_retried_error() -> None:
    with AnthropicPeer([Turn("only one")]) as peer:
        client = claude(peer)
        client.messages.create(model="m", max_tokens=64, messages=USER)
        with pytest.raises(anthropic.BadRequestError, match="script exhausted after 1 request"):
            client.messages.create(model="m", max_tokens=64, messages=USER)
    assert len(peer.requests) == 2 and "script exhausted" in peer.problems[0]


def test_a_turn_the_protocol_cannot_carry_is_a_clear_error() -> None:
    # the Messages API parses tool input before a JSON reply, so malformed input exists only in a stream
    with AnthropicPeer([Turn(ToolCall("check_plan", "{bad"))]) as peer, \
            pytest.raises(anthropic.BadRequestError, match="stream the request"):
        claude(peer).messages.create(model="m", max_tokens=64, messages=USER)
    assert len(peer.requests) == 1 and "malformed tool input" in peer.problems[0]


def test_turn_rejects_bad_scripts() -> None:
    with pytest.raises(ValueError, match="stop"):
        Turn("x", stop="length")
    with pytest.raises(TypeError):
        Turn(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="always"):
        ChatPeer(Turn("x"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="endless"):
        Turn(ToolCall("a"), endless=True)


def test_stop_ends_an_endless_stream_and_closes_the_port() -> None:
    peer = ChatPeer([Turn("more ", endless=True, delay=0.01)]).start()
    stream = gpt(peer, max_retries=0).chat.completions.create(**chat_args())
    next(iter(stream))
    started = time.monotonic()
    peer.stop()
    assert time.monotonic() - started < 2
    assert peer.requests[0].wait(1) and peer.requests[0].dropped
    with pytest.raises(openai.APIConnectionError):
        list(stream)
    with pytest.raises(RuntimeError, match="not running"):
        _ = peer.url
