"""The status line, the grade panel and the usage summary."""

from __future__ import annotations

import pytest

from berth_env import grade, load_pack, naive_plan
from rollouts import events as ev
from viewer.markdown import code_block, escape_md
from viewer.summary import (
    failure,
    gap_closed,
    grade_panel,
    grade_words,
    standing_words,
    status_line,
    usage_summary,
)

TASK_ID = "dock-24B-w06x1-busy-0"


@pytest.fixture(scope="module")
def task() -> dict:
    return load_pack().get(TASK_ID)


def _stamped(events: list[dict]) -> list[dict]:
    for seq, event in enumerate(events):
        event["seq"], event["t"] = seq, 2.5 * seq
    return events


def _running() -> list[dict]:
    return _stamped([
        ev.episode_started(episode_id="e", task_id=TASK_ID, model="m", env_url="embedded", instructions="",
                           situation="", tools=[], limits={"max_turns": 12}, task={}),
        ev.turn_started(1, 12),
        ev.turn_finished(1, "tool_use", {"input_tokens": 1200, "output_tokens": 300},
                         {"input_tokens": 1200, "output_tokens": 300}),
        ev.turn_started(2, 12),
        ev.text_delta(2, "hmm"),
    ])


# --- status line ----------------------------------------------------------------------------------------------

def test_status_line_while_running() -> None:
    assert status_line(_running()) == "turn 2 of 12 · 1,200 in / 300 out tokens · 10 s · **running**"


def test_status_line_before_the_first_turn_and_when_stopping() -> None:
    started = _running()[:1]
    assert status_line(started) == "0 s · **running**"
    assert status_line([]) == "**starting**"
    stopping = [*_running(), {**ev.note(2, "stopped", "stop"), "t": 11.0}]
    assert status_line(stopping).endswith("11 s · **stopping**")


def test_status_line_after_the_end_uses_the_record() -> None:
    record = {"end_reason": "submitted", "reward": 0.944468, "turns": 3, "seconds": 42.4,
              "usage": {"input_tokens": 5000, "output_tokens": 900}, "limits": {"max_turns": 12}}
    events = [*_running(), ev.episode_finished(record)]
    assert status_line(events) == "turn 3 of 12 · 5,000 in / 900 out tokens · 42 s · **submitted** (reward 0.9445)"
    failed = [*_running(), ev.error(2, "boom"), ev.episode_finished({**record, "end_reason": "error"})]
    assert status_line(failed).endswith("**error**")
    limit = [*_running(), ev.episode_finished({**record, "end_reason": "turn_limit"})]
    assert status_line(limit).endswith("**ended** (turn_limit)")
    assert status_line([*_running(), ev.error(2, "boom")]).endswith("**error**")


# --- grade panel ------------------------------------------------------------------------------------------------

def _record(task: dict, plan: list[dict]) -> dict:
    graded = grade(task, plan)
    return {"task": {"ships": len(task["ships"]), "optimal_cost": task["reference"]["optimal_cost"],
                     "naive_cost": task["reference"]["naive_cost"]},
            "reward": graded["reward"], "end_reason": "submitted",
            "final": {"submitted": True, "plan": plan, "grade": graded,
                      "rubric": {"ships_clean": graded["clean_fraction"], "cost_quality": graded["quality"]}}}


def test_grade_panel_of_a_costlier_feasible_plan(task: dict) -> None:
    plan = naive_plan(task)
    record = _record(task, plan)
    graded = record["final"]["grade"]
    optimal, naive = task["reference"]["optimal_cost"], task["reference"]["naive_cost"]
    assert graded["feasible"] and graded["cost"] == naive > optimal
    panel = grade_panel(record)
    assert panel.startswith(f"### Grade\n**✅ feasible, reward {graded['reward']:.4f}".rstrip("0") + "** · "
                            "no better than the naive re-plan\n")
    assert f"- cost **{naive}**" in panel
    above = naive - optimal
    assert f"- optimum {optimal}: {above} above (+{100 * above / optimal:.1f} %)" in panel
    assert f"- naive re-plan {naive}: this plan closed 0.0 % of its gap to the optimum" in panel
    assert "- ships clean: 17/17 ships, 1.0" in panel
    assert f"- rubric: ships_clean 1.0 · cost_quality {graded['quality']:.4f}".rstrip("0") in panel
    assert "- violations: 0" in panel


def test_grade_panel_of_an_infeasible_grade_dict(task: dict) -> None:
    plan = [dict(e) for e in task["reference"]["optimal_plan"]]
    plan[12].update(berth_hour=0, section=4)
    plan.append({"ship": 99, "berth_hour": 1, "section": 2})
    graded = grade(task, plan)
    panel = grade_panel(graded, task)
    assert f"**❌ infeasible, reward {graded['reward']:.4f}**\n" in panel  # no standing: it broke rules
    assert f"- optimum {task['reference']['optimal_cost']} · naive re-plan {task['reference']['naive_cost']}" in panel
    assert "- ships clean: 15/17 ships" in panel  # ships 0 and 12 overlap
    assert "- violations: 3 · parse problems: 1" in panel
    assert "unknown ship" in panel
    assert "  - ship 0: overlaps ship 12" in panel


def test_grade_panel_without_a_submission_and_with_hostile_text() -> None:
    assert grade_panel({"final": {"submitted": False, "grade": None}, "reward": 0.0, "end_reason": "no_tool_call"}) \
        == "### Grade\n**Not submitted** · reward 0.0 · ended: no_tool_call"
    hostile = {"reward": 0.1, "feasible": False, "clean_fraction": 0.5, "quality": 0.0,
               "violations": [{"ship": 1, "problem": "<img src=x onerror=alert(1)> | pipe"}], "parse_problems": []}
    panel = grade_panel(hostile)
    assert "<img" not in panel and "&lt;img src=x onerror=alert(1)&gt; \\| pipe" in panel
    assert grade_panel(None) == "### Grade\nNo grade yet."


def test_a_feasible_plan_dearer_than_the_naive_re_plan_says_it_is_worse() -> None:
    """A rule-keeping plan that scores little reads as what it is: worse than the naive re-plan, in words, never as a
    negative share of the gap closed, and the feasible badge carries its reward."""
    graded = {"reward": 0.2, "feasible": True, "cost": 687, "delay_cost": 672, "moves": 3, "optimal_cost": 114,
              "naive_cost": 311, "clean_fraction": 1.0, "quality": 0.0, "violations": [], "parse_problems": []}
    panel = grade_panel(graded)
    assert panel.split("\n")[1] == "**✅ feasible, reward 0.2** · worse than the naive re-plan"
    assert "- naive re-plan 311: 376 cheaper than this plan" in panel
    assert "%  of" not in panel and "-190" not in panel and "gap closed" not in panel
    assert standing_words(311, 114, 311) == "no better than the naive re-plan"
    assert standing_words(200, 114, 311) == "better than the naive re-plan"
    assert standing_words(114, 114, 311) == "at the optimum"
    assert standing_words(200, None, None) is None
    assert grade_words(False, 0.05) == "infeasible, reward 0.05"


def test_gap_closed() -> None:
    assert gap_closed(100, 100, 300) == 100.0
    assert gap_closed(200, 100, 300) == 50.0
    assert gap_closed(400, 100, 300) == -50.0
    assert gap_closed(100, 100, 100) is None


# --- usage --------------------------------------------------------------------------------------------------------

def test_usage_summary() -> None:
    record = {"model": "hf:org/model:nebius", "task_id": TASK_ID, "turns": 4, "seconds": 61.3,
              "end_reason": "submitted", "usage": {"input_tokens": 40000, "output_tokens": 8000},
              "steps": [{"tool": "check_plan"}, {"tool": "check_plan"}, {"tool": "submit_plan"}],
              "errors": ["APIError: <script>x</script>"], "provider_switches": ["nebius -> together"]}
    text = usage_summary(record)
    lines = text.split("\n")
    assert lines[0] == f"**hf:org/model:nebius** on {TASK_ID}"
    assert lines[1] == "- 4 turns · 2 checks · 61.3 s · ended: submitted"
    assert lines[2] == "- tokens: 40,000 in / 8,000 out (2,000 out per turn)"
    assert lines[3] == "- provider switch: nebius -&gt; together"  # shows as "->"
    assert lines[4] == "- ❌ provider error: &lt;script&gt;x&lt;/script&gt;"


def test_a_failure_is_named_as_its_partys_without_the_exception_class() -> None:
    """An unreachable berth server is the server's fault, not the provider's, and a visitor reads what happened,
    not a Python class name."""
    offline = "EnvError: could not start an episode on https://fineenvs-portsimenv.hf.space: Name or service not known"
    assert failure(offline) == ("berth server", "could not start an episode on "
                                                "https://fineenvs-portsimenv.hf.space: Name or service not known")
    assert failure("InternalServerError: Error code: 500") == ("provider", "Error code: 500")
    assert failure("the model said nothing") == ("provider", "the model said nothing")
    assert "- ❌ berth server error: could not start" in usage_summary({"errors": [offline]})


# --- helpers ----------------------------------------------------------------------------------------------------

def test_code_block_fence_outgrows_the_text_and_escape_md_keeps_markdown() -> None:
    assert code_block("a ``` b ````` c") == "``````\na ``` b ````` c\n``````"
    assert code_block("plain", "json") == "```json\nplain\n```"
    # (the link is shown as text too: issue 27, model output's links)
    assert escape_md("| a | <b>x</b> & ![i](u)") == "| a | &lt;b&gt;x&lt;/b&gt; &amp; !\\[i]\\(u)"
