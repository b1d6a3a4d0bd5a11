"""The task preview's text, over every bundled task."""

from __future__ import annotations

import copy

from berth_env import load_pack
from viewer.task_view import disruption_lines, task_brief


def test_every_disruption_of_every_task_gets_its_own_line():
    kinds = set()
    for task in load_pack().tasks:
        lines = disruption_lines(task)
        assert len(lines) == len(task["disruptions"])
        assert not any("details missing" in line or line.startswith("•") for line in lines), task["task_id"]
        kinds |= {d["type"] for d in task["disruptions"]}
    assert kinds == {"late", "closure", "priority", "crane_outage", "extra", "emergency", "gale", "bunching",
                     "divert"}


def test_the_brief_names_the_task_the_costs_and_what_broke():
    task = load_pack().get("dock-24B-w06x1-standard-0")
    brief = task_brief(task, broken=(5, 4))
    assert brief.startswith("**dock-24B-w06x1-standard-0** · quay 24B (APM Terminals Barcelona) · tier **standard**")
    assert "16 ships" in brief and "week of 2024-02-05" in brief
    assert "- 🚧 Sections 6–14 closed, h45–73 (fender repair)" in brief
    assert "- ⏰ ship 4 SEASPAN OCEANIA arrives 11 h late" in brief
    assert f"proven optimum **{task['reference']['optimal_cost']}**" in brief
    assert "breaks 5 rules on 4 ships" in brief


def test_untrusted_task_text_is_escaped_and_a_public_task_has_no_costs():
    task = copy.deepcopy(load_pack().get("dock-24B-w06x1-standard-0"))
    task["ships"][4]["name"] = "<img src=x onerror=alert(1)>"
    task["disruptions"][0]["reason"] = "<script>x</script>"
    del task["reference"]
    brief = task_brief(task)
    assert "<img" not in brief and "<script>" not in brief and "&lt;img" in brief
    assert "Cost:" not in brief
    assert "no preview" in task_brief(None, "dock-x")
