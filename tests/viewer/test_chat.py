"""The chat renderer: events (rollouts/events.py) and stored records -> gr.ChatMessage lists."""

from __future__ import annotations

import json
import re

import pytest
from gradio import ChatMessage

from berth_env import evaluate, grade, load_pack
from rollouts import events as ev
from rollouts.replay import record_events
from viewer.chat import ChatBuilder, chat_messages, format_arguments
from viewer.markdown import markdown_html
from viewer.replay import record_messages

TASK_ID = "dock-24B-w06x1-busy-0"
XSS_IMG = "<img src=x onerror=alert(1)>"
XSS_SCRIPT = "<script>alert('x')</script>"


@pytest.fixture(scope="module")
def task() -> dict:
    return load_pack().get(TASK_ID)


def _stamp(events: list[dict], times: list[float]) -> list[dict]:
    assert len(events) == len(times)
    for seq, (event, t) in enumerate(zip(events, times, strict=True)):
        event["seq"], event["t"] = seq, t
    return events


def _bad_plan(task: dict) -> list[dict]:
    """The optimal plan with ship 12 moved onto ship 0's slot: ship 12 arrives too early and the two overlap."""
    plan = [dict(e) for e in task["reference"]["optimal_plan"]]
    plan[12].update(berth_hour=0, section=4)
    return plan


def _episode(task: dict) -> tuple[list[dict], dict]:
    """A realistic two-turn episode: thinking, text, streamed check_plan with violations, a note, a submit."""
    load = load_pack()
    optimal = [dict(e) for e in task["reference"]["optimal_plan"]]
    bad = _bad_plan(task)
    checked = {**evaluate(task, bad), "checks_left": 9}
    graded = grade(task, optimal)
    submit_reply = {"submitted": True, "feasible": True, "reward": graded["reward"], "cost": graded["cost"],
                    "delay_cost": graded["delay_cost"], "moves": graded["moves"]}
    rubric = {"ships_clean": graded["clean_fraction"], "cost_quality": graded["quality"]}
    args = json.dumps({"plan": bad})
    record = {
        "schema_version": 1, "episode_id": "ep1", "model": "baseline:test", "task_id": TASK_ID,
        "task": {"split": "eval", "difficulty": "busy", "quay": "24B", "ships": 17, "optimal_cost": 87,
                 "naive_cost": task["reference"]["naive_cost"]},
        "limits": {"max_turns": 12}, "seconds": 9.5, "turns": 2, "reward": graded["reward"],
        "end_reason": "submitted", "usage": {"input_tokens": 3000, "output_tokens": 400}, "errors": [],
        "final": {"submitted": True, "plan": optimal, "grade": graded, "rubric": rubric},
        "steps": [{"turn": 1, "tool": "check_plan", "plan": bad, "result": checked},
                  {"turn": 2, "tool": "submit_plan", "plan": optimal, "result": submit_reply}],
        "messages": [
            {"role": "system", "content": f"The rules {XSS_SCRIPT}"},
            {"role": "user", "content": "## Situation\n| id | ship |\n|---|---|\n| 0 | PERSEUS |"},
            {"role": "assistant", "content": f"Checking a draft {XSS_IMG}",
             "reasoning": f"Let me think {XSS_SCRIPT} about ship 12", "stop": "tool_use",
             "tool_calls": [{"id": "call_1", "name": "check_plan", "arguments": args}]},
            {"role": "tool", "tool_call_id": "call_1", "name": "check_plan", "content": json.dumps(checked)},
            {"role": "user", "content": "This is your last turn: submit now."},
            {"role": "assistant", "content": "", "reasoning": "Submit the safe plan.", "stop": "tool_use",
             "tool_calls": [{"id": "call_2", "name": "submit_plan", "arguments": json.dumps({"plan": optimal})}]},
            {"role": "tool", "tool_call_id": "call_2", "name": "submit_plan", "content": json.dumps(submit_reply)},
        ],
    }
    events = [
        ev.episode_started(episode_id="ep1", task_id=TASK_ID, model="baseline:test", env_url="embedded",
                           instructions=f"The rules {XSS_SCRIPT}", situation=record["messages"][1]["content"],
                           tools=[], limits={"max_turns": 12}, task=load.public(task)),
        ev.turn_started(1, 12),
        ev.reasoning_delta(1, "Let me think "),
        ev.reasoning_delta(1, XSS_SCRIPT),
        ev.reasoning_delta(1, " about ship 12"),
        ev.text_delta(1, "Checking a draft "),
        ev.text_delta(1, XSS_IMG),
        ev.tool_args_delta(1, 0, "call_1", "check_plan", args[:20]),
        ev.tool_args_delta(1, 0, "call_1", "check_plan", args[20:]),
        ev.tool_call(1, "call_1", "check_plan", args),
        ev.tool_result(1, "call_1", "check_plan", json.dumps(checked), data=checked, step=record["steps"][0]),
        ev.turn_finished(1, "tool_use", {"input_tokens": 1000, "output_tokens": 300},
                         {"input_tokens": 1000, "output_tokens": 300}),
        ev.note(1, "last_turn", "This is your last turn: submit now."),
        ev.turn_started(2, 12),
        ev.reasoning_delta(2, "Submit the safe plan."),
        ev.tool_call(2, "call_2", "submit_plan", json.dumps({"plan": optimal})),
        ev.tool_result(2, "call_2", "submit_plan", json.dumps(submit_reply), data=submit_reply, done=True,
                       reward=graded["reward"], metadata={"grade": graded, "rubric": rubric},
                       step=record["steps"][1]),
        ev.turn_finished(2, "tool_use", {"input_tokens": 2000, "output_tokens": 100},
                         {"input_tokens": 3000, "output_tokens": 400}),
        ev.episode_finished(record),
    ]
    times = [0.0, 0.1, 1.0, 1.5, 3.2, 4.0, 4.2, 4.5, 5.0, 5.5, 5.8, 5.8, 5.8, 5.9, 6.5, 8.0, 8.4, 8.5, 9.5]
    return _stamp(events, times), record


def _meta(message: ChatMessage) -> dict:
    return dict(message.metadata or {})


def _by_title(messages: list[ChatMessage], prefix: str) -> list[ChatMessage]:
    return [m for m in messages if _meta(m).get("title", "").startswith(prefix)]


def _outside_fences(content: str) -> str:
    """The Markdown outside fenced code blocks, with a CommonMark-style reading of fences: a block closes only
    at a line of at least as many backticks as opened it, so text cannot escape a longer fence."""
    out, fence = [], None
    for line in content.split("\n"):
        match = re.match(r"^(`{3,})", line)
        if fence is None:
            if match:
                fence = match.group(1)
            else:
                out.append(line)
        elif match and line.strip() == "`" * len(line.strip()) and len(line.strip()) >= len(fence):
            fence = None
    assert fence is None, "a fenced block is never closed"
    return "\n".join(out)


# --- layout and nesting ------------------------------------------------------------------------------------------

def test_episode_renders_rules_situation_thinking_text_calls_and_results(task: dict) -> None:
    events, _ = _episode(task)
    messages = chat_messages(events)
    titles = [_meta(m).get("title") for m in messages]
    assert titles[:2] == ["📜 Rules", "🗺️ Situation"]
    assert all(_meta(m)["status"] == "done" for m in messages[:2])  # collapsed
    # rules, situation, thinking, text, call, result, raw, note, thinking, call, result, raw, ended
    assert len(messages) == 13
    assert titles[2] == "🧠 Thinking" and titles[3] is None and messages[3].role == "assistant"
    assert titles[4].startswith("🛠️ check_plan")
    assert titles[-1] is None
    assert messages[-1].content == "🏁 **Episode ended: submitted** · reward **1.0** · 2 turns · 10 s"
    assert messages[7].role == "user" and titles[7] == "⏳ Last turn: submit now"


def test_results_nest_under_their_calls_and_raw_json_under_the_result(task: dict) -> None:
    messages = chat_messages(_episode(task)[0])
    ids = {_meta(m).get("id"): m for m in messages if _meta(m).get("id")}
    assert len(ids) == len([m for m in messages if _meta(m).get("id")])  # ids are unique
    for tool in ("check_plan", "submit_plan"):
        (call,) = _by_title(messages, f"🛠️ {tool}")
        children = [m for m in messages if _meta(m).get("parent_id") == _meta(call)["id"]]
        assert len(children) == 1
        (raw,) = [m for m in messages if _meta(m).get("parent_id") == _meta(children[0])["id"]]
        assert _meta(raw)["title"] == "Raw result" and _meta(raw)["status"] == "done"
        assert messages.index(call) < messages.index(children[0]) < messages.index(raw)  # parents come first
        assert _meta(call)["status"] == "done"


def test_check_result_summarises_the_checker_verdict(task: dict) -> None:
    messages = chat_messages(_episode(task)[0])
    checked = evaluate(task, _bad_plan(task))
    flagged = {v["ship"] for v in checked["violations"]}
    assert flagged == {0, 12}
    (call,) = _by_title(messages, "🛠️ check_plan")
    assert _meta(call)["title"] == "🛠️ check_plan · ❌"
    assert "17 ships" in _meta(call)["log"]
    (result,) = [m for m in messages if _meta(m).get("parent_id") == _meta(call)["id"]]
    assert _meta(result)["title"] == f"❌ Infeasible · {len(checked['violations'])} violations on 2 ships · 9 checks left"
    assert "- ship 0 PERSEUS: overlaps ship 12" in result.content
    assert "- ship 12 WEC MAJORELLE: " in result.content and "cannot arrive" in result.content
    assert "checks left: 9" in result.content
    (raw,) = [m for m in messages if _meta(m).get("parent_id") == _meta(result)["id"]]
    body = raw.content.split("\n", 1)[1].rsplit("\n", 1)[0]
    assert json.loads(body)["violations"] == checked["violations"]  # the raw child is the full JSON


def test_submit_result_shows_the_grade(task: dict) -> None:
    messages = chat_messages(_episode(task)[0])
    (call,) = _by_title(messages, "🛠️ submit_plan")
    assert _meta(call)["title"] == "🛠️ submit_plan · 🏁 reward 1.0"
    (result,) = [m for m in messages if _meta(m).get("parent_id") == _meta(call)["id"]]
    assert _meta(result)["title"] == "🏁 Graded · feasible, reward 1.0"
    assert "cost **87**" in result.content
    assert "optimum 87: at the optimum" in result.content
    assert "**✅ feasible, reward 1.0** · at the optimum" in result.content
    assert f"naive re-plan {task['reference']['naive_cost']}: this plan closed 100.0 % of its gap to the optimum" \
        in result.content
    assert "17/17 ships" in result.content


# --- streaming -----------------------------------------------------------------------------------------------------

def test_thinking_is_pending_while_streaming_and_done_with_its_duration_after(task: dict) -> None:
    events, _ = _episode(task)
    builder = ChatBuilder()
    for event in events[:5]:  # up to the third reasoning delta
        builder.add(event)
    thinking = builder.messages[-1]
    assert _meta(thinking)["title"] == "🧠 Thinking"
    assert _meta(thinking)["status"] == "pending"
    assert _meta(thinking)["duration"] == pytest.approx(2.2)  # 3.2 - 1.0, still running
    builder.add(events[5])  # the first text delta ends the thinking
    assert builder.messages[-2] is thinking
    assert _meta(thinking)["status"] == "done"
    assert _meta(thinking)["duration"] == pytest.approx(3.0)  # 4.0 - 1.0
    assert builder.messages[-1].content == "Checking a draft "


def test_tool_arguments_stream_then_become_pretty_json(task: dict) -> None:
    events, _ = _episode(task)
    builder = ChatBuilder()
    for event in events[:8]:  # up to the first tool_args_delta
        builder.add(event)
    call = builder.messages[-1]
    assert _meta(call)["title"] == "🛠️ check_plan" and _meta(call)["status"] == "pending"
    assert call.content == "```json\n" + json.dumps({"plan": _bad_plan(task)})[:20] + "\n```"
    assert "receiving 20 characters" in _meta(call)["log"]
    builder.add(events[8])
    assert "receiving" in _meta(call)["log"] and call.content.endswith("}]}\n```")
    builder.add(events[9])  # the complete tool_call replaces the raw stream
    assert builder.messages[-1] is call
    assert call.content.startswith('```json\n{"plan": [\n  {"ship": 0, "berth_hour": 0, "section": 4, "cranes": 1},')
    assert _meta(call)["status"] == "pending"  # until the server answers
    builder.add(events[10])
    assert _meta(call)["status"] == "done"
    assert _meta(call)["duration"] == pytest.approx(1.3)  # first argument delta 4.5 -> result 5.8


def test_incremental_building_matches_building_from_the_whole_list(task: dict) -> None:
    events, _ = _episode(task)
    builder = ChatBuilder()
    snapshots = [len(builder.add(e)) for e in events]
    assert snapshots == sorted(snapshots)  # messages are only ever appended
    whole = chat_messages(events)
    assert [(m.role, m.content, _meta(m)) for m in builder.messages] == [(m.role, m.content, _meta(m)) for m in whole]


def test_many_small_deltas_fold_into_one_escaped_message() -> None:
    builder = ChatBuilder()
    builder.add(ev.turn_started(1, 12))
    for i in range(20_000):
        builder.add({**ev.reasoning_delta(1, "word <b> & "), "t": i * 0.001})
        builder.messages  # noqa: B018 - the live tab reads the list after every event
    assert len(builder.messages) == 1
    assert builder.messages[0].content.count("&lt;b&gt; &amp;") == 20_000


def test_calls_without_ids_match_by_turn_and_order() -> None:
    events = [ev.turn_started(1, 3),
              ev.tool_args_delta(1, 0, "", "check_plan", '{"plan": []}'),
              ev.tool_args_delta(1, 1, "", "get_situation", "{}"),
              ev.tool_call(1, "", "check_plan", '{"plan": []}'),
              ev.tool_call(1, "", "get_situation", "{}"),
              ev.tool_result(1, "", "check_plan", '{"error": "no entries"}', data={"error": "no entries"}),
              ev.tool_result(1, "", "get_situation", "# Situation\nQuay 24B")]
    messages = chat_messages(events)
    calls = _by_title(messages, "🛠️")
    assert [_meta(c)["title"] for c in calls] == ["🛠️ check_plan · ⚠️", "🛠️ get_situation"]
    results = [m for m in messages if _meta(m).get("parent_id") in {_meta(c)["id"] for c in calls}]
    assert [_meta(r)["parent_id"] for r in results] == [_meta(c)["id"] for c in calls]
    assert _meta(results[0])["title"] == "⚠️ Error from the server"
    assert _meta(results[1])["title"] == "🗺️ Situation text (20 characters)"


# --- notes, errors and the end ---------------------------------------------------------------------------------

def test_argument_errors_notes_provider_errors_and_unfinished_calls() -> None:
    events = [ev.turn_started(1, 12),
              ev.tool_call(1, "c1", "check_plan", '{"plan": [', error="arguments are not valid JSON"),
              ev.tool_result(1, "c1", "check_plan", '{"error": "invalid JSON arguments"}',
                             data={"error": "invalid JSON arguments"}, local=True),
              ev.note(1, "nudge", "Call a tool."),
              ev.note(1, "retry", "429: waiting 2 s"),
              ev.tool_args_delta(2, 0, "c2", "submit_plan", '{"plan": [{"ship": 0'),
              ev.error(2, f"ProviderError: upstream said {XSS_IMG}"),
              ev.episode_finished({"end_reason": "error", "reward": 0.0, "turns": 2})]
    messages = chat_messages(events)
    (bad_call,) = _by_title(messages, "🛠️ check_plan")
    assert _meta(bad_call)["title"] == "🛠️ check_plan · ⚠️ not sent"
    assert "**⚠️ Not sent to the server:** arguments are not valid JSON" in bad_call.content
    (local,) = [m for m in messages if _meta(m).get("parent_id") == _meta(bad_call)["id"]]
    assert _meta(local)["title"] == "⚠️ Error answered by the loop"
    assert [m.role for m in _by_title(messages, "🔔")] == ["user"]
    assert [m.role for m in _by_title(messages, "🔁")] == ["assistant"]
    (err,) = _by_title(messages, "❌ Provider error")
    assert "status" not in _meta(err)  # left open: errors are not hidden
    assert XSS_IMG not in _outside_fences(err.content)
    (cut,) = _by_title(messages, "🛠️ submit_plan")
    assert _meta(cut)["status"] == "done" and _meta(cut)["log"].endswith("no result")
    assert messages[-1].content.startswith("🏁 **Episode ended: error** · reward **0.0**")


# --- untrusted text ------------------------------------------------------------------------------------------------

def test_model_and_tool_text_never_reaches_the_page_as_html(task: dict) -> None:
    events, _ = _episode(task)
    hostile = "a ```` fence ```` and " + XSS_IMG + " and ![pixel](http://evil.example/p.png)"
    events[-1:-1] = [ev.tool_result(2, "c9", "get_situation", hostile),
                     ev.note(2, "cutoff", hostile),
                     ev.tool_call(2, "c8", "check_plan", json.dumps({"plan": hostile}))]
    messages = chat_messages(events)
    for message in messages:
        visible = _outside_fences(message.content)
        title = _meta(message).get("title", "")
        for text in (visible, title):
            assert "<script" not in text and "<img" not in text, text
            assert "![" not in text, text
    rendered = "\n".join(m.content for m in messages)
    assert "Let me think &lt;script&gt;alert('x')&lt;/script&gt; about ship 12" in rendered
    assert "Checking a draft &lt;img src=x onerror=alert(1)&gt;" in rendered
    assert "The rules &lt;script&gt;" in rendered
    # Inside a fence the text stays as written, and the fence is longer than any backtick run in it.
    (call,) = [m for m in messages if _meta(m).get("title", "").startswith("🛠️ check_plan") and hostile in m.content]
    assert call.content.startswith("`````")


def test_escaping_holds_across_chunk_boundaries() -> None:
    chunks = ["look !", "[x](http://e/p.png) <", "img src=x onerror=alert(1)", ">"]
    builder = ChatBuilder()
    for chunk in chunks:
        builder.add(ev.text_delta(1, chunk))
    (message,) = builder.messages
    assert message.content == "look !\\[x]\\(http:\\//e/p.png) &lt;img src=x onerror=alert(1)&gt;"


def test_huge_plans_are_cut_with_the_ship_count() -> None:
    plan = [{"ship": i % 59, "berth_hour": i, "section": 2, "cranes": 1} for i in range(200)]
    body, log = format_arguments(json.dumps({"plan": plan}))
    assert log == "59 ships"
    assert "… 120 more entries" in body
    assert body.count('"berth_hour"') == 80
    body, log = format_arguments(json.dumps({"plan": json.dumps(plan[:3])}))
    assert log == "3 ships, plan sent as a JSON string"
    body, log = format_arguments("x" * 50_000)
    assert log == "arguments are not valid JSON" and "more characters" in body and len(body) < 13_000


# --- stored records go through the same renderer ----------------------------------------------------------------

def test_a_record_replays_into_the_same_chat_as_the_live_run(task: dict) -> None:
    events, record = _episode(task)
    live = chat_messages(events)
    replayed = record_messages(record, task)  # a record keeps a task summary; ship names come from the task
    assert len(replayed) == len(live)

    def shape(messages: list[ChatMessage]) -> list[tuple]:
        return [(m.role, _meta(m).get("title"), _meta(m).get("parent_id") is not None) for m in messages]

    # The record's note has no kind (as upstream's records); the replay reads it as the last-turn note it is.
    assert "kind" not in record["messages"][5]
    assert shape(replayed) == shape(live)
    assert "⏳ Last turn: submit now" in [t for _, t, _ in shape(replayed)]
    for a, b in zip(live, replayed, strict=True):
        if _meta(a).get("title", "").startswith(("❌", "🏁 Graded", "Raw", "🛠️")) or _meta(a) == {}:
            assert a.content == b.content
    assert "duration" not in _meta(_by_title(replayed, "🧠")[0])  # a record has no timestamps


def test_record_events_carry_steps_grade_and_usage(task: dict) -> None:
    _, record = _episode(task)
    events = record_events(record)
    assert [e["seq"] for e in events] == list(range(len(events)))
    results = [e for e in events if e["type"] == "tool_result"]
    assert [r["step"] for r in results] == record["steps"]
    assert results[1]["done"] and results[1]["metadata"]["grade"] == record["final"]["grade"]
    assert [e["usage_total"] for e in events if e["type"] == "turn_finished"][-1] == record["usage"]
    assert events[-1] == {"type": "episode_finished", "record": record, "seq": len(events) - 1}


def test_record_with_bad_arguments_errors_and_stop() -> None:
    record = {
        "model": "hf:org/m", "task_id": TASK_ID, "end_reason": "stopped", "reward": 0.0, "turns": 1,
        "errors": ["APIError: 500 <b>boom</b>"], "provider_switches": ["nebius -> together"],
        "steps": [], "final": {"submitted": False, "plan": None, "grade": None},
        "messages": [{"role": "system", "content": "rules"}, {"role": "user", "content": "situation"},
                     {"role": "assistant", "content": None, "reasoning": None,
                      "tool_calls": [{"id": "x", "name": "check_plan", "arguments": "{not json"}]},
                     {"role": "tool", "tool_call_id": "x", "name": "check_plan",
                      "content": '{"error": "invalid arguments"}'}],
    }
    messages = record_messages(record)
    titles = [_meta(m).get("title") for m in messages]
    assert "🛠️ check_plan · ⚠️ not sent" in titles
    assert "🔀 Provider switch" in titles and "⏹️ Stopped by the user" in titles
    (err,) = _by_title(messages, "❌ Provider error")
    assert "<b>" not in _outside_fences(err.content)
    assert messages[-1].content.startswith("🏁 **Episode ended: stopped**")


HOSTILE_LINKS = ("Read https://evil.example/a and www.evil.example, mail me@evil.example, [click](https://evil.example) "
                 "or [here][1].\n\n[1]: https://evil.example/ref\n\nYours is [the board](https://team-arena.hf.space/"
                 "?tab=browse), https://team-arena.hf.space/r/abc and [this page](/r/abc); not "
                 "https://team-arena.hf.space.evil.example/ nor [that](//evil.example).")
LINK_MAKERS = ("https://evil", "www.evil", "e@evil", "](https://evil", "]: https", "](//evil",
               "https://team-arena.hf.space.evil")


@pytest.mark.parametrize("chunk", [1, 7, 10_000])
def test_links_in_model_text_show_as_text_unless_they_point_at_the_arena(chunk, monkeypatch) -> None:
    """Issue 27, low: a model's links (bare, `www.`, e-mail, inline, reference) are text in the Chatbot's Markdown
    (which links bare addresses) and on the share page; the arena's own stay links, however the text streamed."""
    monkeypatch.setenv("SPACE_HOST", "team-arena.hf.space")
    builder = ChatBuilder()
    for at in range(0, len(HOSTILE_LINKS), chunk):
        builder.add(ev.text_delta(1, HOSTILE_LINKS[at:at + chunk]))
    builder.add(ev.turn_started(2, None))  # the text ends
    (message,) = builder.messages
    markdown = message.content
    for maker in LINK_MAKERS:  # the Chatbot's GFM makes a link of each of these as written
        assert maker not in markdown, maker
    page = markdown_html(markdown)
    assert re.findall(r'<a href="([^"]*)"', page) == ["https://team-arena.hf.space/?tab=browse", "/r/abc"]
    text = re.sub(r"<[^>]+>", "", page).replace("&amp;", "&")
    for words in ("https://evil.example/a", "www.evil.example", "me@evil.example", "[click](https://evil.example)",
                  "[1]: https://evil.example/ref", "https://team-arena.hf.space/r/abc", "[that](//evil.example)"):
        assert words in text, words  # read as written
