"""A rollout's share page, `/r/<episode_id>`: one HTML document rendered on the server, read without any JavaScript
(the page carries none), and unfurled by link crawlers from its Open Graph and Twitter tags.

Pure: a record (or a running episode's events) and the page's links in, HTML out; viewer/share/routes.py serves
it. Nothing here decides what a rollout shows: the header's facts come from the record's view
(rollouts.record) and the share card's cost line, the chart is the app's own scene (viewer/chart.py) drawn by
its SVG output, the grade and the usage are viewer/summary.py's Markdown, and the transcript is the chat the app
shows (viewer/replay.py and viewer/chat.py: thinking, tool calls and results folded as `<details>`).

Every string from a record, a task or a model is untrusted: single-line facts go through `plain` (unsafe characters
dropped, then HTML-escaped, inside `<bdi>` so a right-to-left override cannot reorder the page around it), Markdown
through viewer.markdown.markdown_html (raw HTML shown as text, no images, no script links), the chart through its
own escaping. The server also forbids every script by its Content-Security-Policy.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rollouts.annotations import LABELS, step_words
from rollouts.links import beat_query
from rollouts.record import Record
from viewer.chart import chart_svg, optimum_scene, preview_scene, step_scene
from viewer.chart.card import cost_words
from viewer.chart.scene import UNSAFE, clean
from viewer.gap_view import final_gap, gap_markdown, outline_label, outlined_ships
from viewer.live import LiveView
from viewer.markdown import fmt_num, markdown_html, shorten
from viewer.replay import record_turns
from viewer.share.steps import StepAt, drafts_nav, step_banner, step_tags, step_title, turn_link
from viewer.summary import grade_panel, grade_words, usage_summary

ARENA = "Berth-planning agent arena"
MESSAGE_CHARS = 60_000     # one transcript message at most (the raw JSON has the whole record)
# The whole transcript at most: past it, a record's page is shortened and points to its raw JSON. A 24 MB record
# rendered whole was an 8 MB page (kept in memory, and sent to every crawler); a page of this size reads fine.
TRANSCRIPT_CHARS = 400_000
# What each message shown takes of that budget beyond its text: its own markup (about 150 characters) and its
# render. Counted, a record of a hundred thousand one-letter messages (a dataset's, anyone's) is shortened too.
MESSAGE_COST = 200
DESCRIPTION_CHARS = 300
ATTRIBUTION = "Task data: Port de Barcelona open data portal, CC BY-SA 4.0."


@dataclass(frozen=True)
class PageLinks:
    """Where a page points; `page` and `image` are absolute (crawlers need them so)."""

    page: str
    image: str
    arena: str               # the same rollout in the app: Browse, or the Run tab watching it live
    home: str
    raw: str | None = None   # the record as JSON
    rollout: str = ""        # the rollout's own page (`page` names a step of it when they differ)
    compare: str = ""        # Browse's compare of this rollout with the best other rollout of its task

    @property
    def whole(self) -> str:
        return self.rollout or self.page


def plain(value: Any, limit: int = 200) -> str:
    """Untrusted text on one line, as HTML text: unsafe characters dropped, cut to `limit`, escaped."""
    return html.escape(clean(value, limit), quote=True)


def isolated(value: Any, limit: int = 200) -> str:
    """`plain`, isolated from the text around it in both directions."""
    return f"<bdi>{plain(value, limit)}</bdi>"


# -- the finished rollout ----------------------------------------------------------------------------------------

def rollout_page(rollout: Record | Mapping[str, Any], row: Mapping[str, Any], task: Mapping[str, Any] | None,
                 links: PageLinks, flags: Sequence[Mapping[str, Any]] = (), at: StepAt | None = None) -> str:
    """The share page of a finished rollout; `row` is its index row (where it came from), `task` the full task when
    this Space has it (else the page says why there is no chart), `flags` the flags shown on its steps. `at`: the
    page opened at that step (its draft on the chart, its turn marked in the transcript, its own tags and image)."""
    view = Record.of(rollout)
    optimum_cost = optimal_cost(view, task)
    title = f"{clean(view.model or '?', 120)} on {clean(view.task_id or '?', 100)}"
    description = " · ".join(outcome_words(view, task))
    if at is not None:
        title = f"{title}: {step_title(view, at)}"
        description = f"{step_tags(view, at, optimum_cost)} · final: {description}"
    head = _head(title, description, links)
    steps = view.plan_steps
    shown = len(steps) - 1 if at is None else (at.draft.index - 1 if at.draft is not None else -1)
    split = final_gap(view, task)
    outline = ({"highlight": outlined_ships(split), "highlight_label": outline_label(split)}
               if at is None and outlined_ships(split) else {})
    scene = (step_scene(task, steps, shown, **outline) if steps and shown >= 0
             else (preview_scene(task) if task else None))
    chart = _figure(scene, "" if steps and shown >= 0 else "No plan was sent yet: the task as the port published it.")
    if task is None:
        chart = ('<p class="note">This task is not in this arena\'s task pack, so its plans cannot be drawn here; '
                 "the grade and the transcript are below.</p>")
    best = optimum_scene(task, view.last_plan, label=f"{clean(view.model, 60)}'s last plan") if steps else None
    optimum = (f'<details class="optimum"><summary>Beside the proven optimum</summary>{chart_svg(best)}</details>'
               if best is not None else "")
    drafts = drafts_nav(view, links.whole, optimum_cost, at.draft.index if at and at.draft else None)
    grade = (f'<section class="grade">{markdown_html(grade_panel(view, task))}'
             f'{markdown_html(usage_summary(view, heading=False))}'
             f'<div class="gap">{markdown_html(gap_markdown(split))}</div>'
             + (f'<p><a class="button" href="{html.escape(links.compare)}">Compare with the best rollout of this '
                "task</a></p>" if links.compare else "")
             + "</section>")
    banner = step_banner(view, at, links.whole, optimum_cost) if at is not None else ""
    # Starting Play from this rollout's last plan: only where the plan can be drawn (the task is served here).
    beat = f"{links.home.rstrip('/')}/?{beat_query(view.task_id, view.episode_id)}" if steps and task else None
    body = (_top(links, "Open in the arena", beat)
            + _header(view, task, _facts(view, task)) + banner
            + f'<main class="layout"><div class="picture">{chart}{drafts}{optimum}</div>{grade}</main>'
            + flags_html(flags)
            + transcript_html(record_turns(view, task), raw=links.raw, page=links.whole,
                              current=at.turn if at else None)
            + _footer(view, row))
    return _document(head, body)


def outcome_words(view: Record, task: Mapping[str, Any] | None) -> list[str]:
    """The result in a few words (og:description): reward, feasible or not, cost against the optimum, turns."""
    turns = f"{view.turns} turns" if view.turns is not None else ""
    if not view.grade:
        return [w for w in (f"not submitted (ended: {clean(view.end_reason or '?', 40)})",
                            f"reward {fmt_num(view.reward)}", turns) if w]
    breaks = "" if view.feasible else f" ({len(view.grade.get('violations') or [])} rule breaks)"
    words = [grade_words(view.feasible, view.reward) + breaks]
    costs = cost_words(view.cost, optimal_cost(view, task))
    return [w for w in (*words, costs, turns) if w]


def optimal_cost(view: Record, task: Mapping[str, Any] | None) -> int | None:
    """The proven optimum's cost: the grade's, else the record's task summary's, else the task's reference."""
    for value in (view.grade.get("optimal_cost"), view.task.get("optimal_cost"),
                  ((task or {}).get("reference") or {}).get("optimal_cost")):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _facts(view: Record, task: Mapping[str, Any] | None) -> str:
    """The result line: reward, feasible or not, cost against the optimum, how it ended, what it took."""
    if not view.grade:
        pill = (f'<span class="reward">reward {fmt_num(view.reward)}</span> '
                '<span class="pill muted">not submitted</span>')
    else:  # the badge carries the reward: "feasible" alone beside a low reward reads as a success
        pill = (f'<span class="pill {"ok" if view.feasible else "bad"}">'
                f'{plain(grade_words(view.feasible, view.reward))}</span>')
    costs = cost_words(view.cost, optimal_cost(view, task))
    facts = [pill,
             f"<span>{plain(costs)}</span>" if costs else "",
             f"<span>ended: {isolated(view.end_reason or '?', 40)}</span>", f"<span>{_effort(view)}</span>"]
    return " ".join(f for f in facts if f)


def _header(view: Record, task: Mapping[str, Any] | None, facts: str) -> str:
    """Model, task, tier, ships, quay and date, then the result line `facts`."""
    summary = view.task
    where = [f"on {isolated(view.task_id or '?', 100)}"]
    if summary.get("difficulty"):
        where.append(f"tier {isolated(summary['difficulty'], 40)}")
    ships = summary.get("ships") or len((task or {}).get("ships") or [])
    if ships:
        where.append(f"{plain(ships, 8)} ships")
    if summary.get("quay"):
        where.append(f"quay {isolated(summary['quay'], 20)}")
    started = view.started_stamp.replace("T", " ").removesuffix("Z")[:16]
    if started:
        where.append(f"{plain(started, 16)} UTC")
    return (f'<section class="head"><h1>{isolated(view.model or "?", 200)}</h1>'
            f'<p class="where">{" · ".join(where)}</p><p class="facts">{facts}</p></section>')


def _effort(view: Record) -> str:
    steps = [f"{view.turns} turns" if view.turns is not None else "", f"{len(view.checks)} checks"]
    usage = view.usage
    if usage["input_tokens"] or usage["output_tokens"]:
        steps.append(f"{usage['input_tokens'] + usage['output_tokens']:,} tokens")
    if view.seconds is not None:
        steps.append(f"{view.seconds:.0f} s")
    return " · ".join(s for s in steps if s)


def _footer(view: Record, row: Mapping[str, Any]) -> str:
    origin = [f"rollout {isolated(view.episode_id, 64)}", f"from {isolated(row.get('source') or '?', 20)}"]
    if view.run:
        origin.append(f"run {isolated(view.run, 80)}")
    if view.app_version:
        origin.append(f"arena {plain(view.app_version, 20)}")
    return f'<footer><p>{" · ".join(origin)}</p><p>{ATTRIBUTION}</p></footer>'


def flags_html(flags: Sequence[Mapping[str, Any]]) -> str:
    """The flags visitors put on the rollout's steps (rollouts.annotations), each at its step: its label, its author
    and its note, all plain text (a note is anyone's words)."""
    if not flags:
        return ""
    items = []
    for flag in flags:
        note = f'<p class="flag-note" dir="auto">{plain(flag.get("note"), 500)}</p>' if flag.get("note") else ""
        items.append(f'<li id="flag-{plain(flag.get("flag_id"), 64)}"><b>{plain(step_words(dict(flag)), 40)}</b> · '
                     f'<span class="flag-label">{plain(LABELS.get(str(flag.get("label")), "?"), 40)}</span> · '
                     f'by {isolated(flag.get("author"), 96)}, {plain(str(flag.get("time"))[:10], 10)}{note}</li>')
    return (f'<section class="flags"><h2>Flags on its steps ({len(flags)})</h2><p class="hint">Signed-in '
            f'visitors point at a turn or a draft (the k-th plan sent to a tool) and say what happened there.</p>'
            f'<ul>{"".join(items)}</ul></section>')


# -- a running episode and a missing one -------------------------------------------------------------------------

def running_page(model: str, task_id: str, events: Sequence[Mapping[str, Any]], task: Mapping[str, Any] | None,
                 links: PageLinks) -> str:
    """The page of an episode still running: what it did so far and a link to watch it live (never cached)."""
    live = LiveView(dict(task) if task else None, show_tokens=not model.startswith("baseline:"))
    live.extend(events)
    view = Record({"model": model, "task_id": task_id, "task": {"difficulty": (task or {}).get("difficulty"),
                                                                    "quay": (task or {}).get("quay")}})
    status = live.status()
    title = f"{clean(model, 120)} on {clean(task_id, 100)} (still running)"
    description = f"Still running: {clean(status.replace('**', ''), 200)}. Watch it live in the arena."
    steps = live.steps
    scene = step_scene(task, steps, len(steps) - 1) if steps and task else (preview_scene(task) if task else None)
    body = (_top(links, "Watch it live")
            + _header(view, task, '<span class="pill muted">still running</span>')
            + f'<p class="note">This episode is still running: {markdown_html(status, inline=True)}. This page '
              f'shows it as it was when you opened it; <a href="{html.escape(links.arena)}">watch it live</a>, or '
              "reload for the latest.</p>"
            + f'<main class="layout single"><div class="picture">{_figure(scene, "")}</div></main>'
            + transcript_html(live.messages)
            + f"<footer><p>{ATTRIBUTION}</p></footer>")
    return _document(_head(title, description, links), body)


def missing_page(home: str) -> str:
    """The page of a link that names no rollout: the same for an unknown id and a malformed one."""
    body = (f'<header class="top"><a class="brand" href="{html.escape(home)}">⚓ {ARENA}</a></header>'
            '<section class="head"><h1>No rollout here</h1><p class="where">This link names no rollout this arena '
            "holds: it may have been cut short or mistyped.</p>"
            f'<p class="facts"><a class="button primary" href="{html.escape(home)}?tab=browse">Browse every rollout'
            "</a></p></section>")
    head = f'<title>Rollout not found · {ARENA}</title><meta name="robots" content="noindex">'
    return _document(head, body)


# -- the transcript ----------------------------------------------------------------------------------------------

def transcript_html(messages: Sequence[Any], *, raw: str | None = None, budget: int = TRANSCRIPT_CHARS,
                    page: str = "", current: int | None = None) -> str:
    """The app's chat messages (gr.ChatMessage: Markdown content, metadata with title, id and parent_id) as HTML:
    a message with a title is folded under it, its children (a tool call's result, a result's raw JSON) inside.

    At most `budget` characters of messages are shown: the rest of a longer transcript is left out, and a note
    says how much and links to `raw`, the whole record as JSON.

    Messages given as (message, turn) pairs (viewer.replay.record_turns) are grouped by turn, each turn a section
    with an anchor (`#turn-4`) and, given the rollout's `page`, a link to its own page; turn `current` is marked."""
    pairs = [m if isinstance(m, tuple) else (m, None) for m in messages]
    turn_of = {id(m): t for m, t in pairs}
    messages = [m for m, _ in pairs]
    children: dict[str, list[Any]] = {}
    known = {str(_meta(m).get("id")) for m in messages if _meta(m).get("id")}
    roots = []
    for message in messages:
        parent = str(_meta(message).get("parent_id") or "")
        if parent and parent in known:
            children.setdefault(parent, []).append(message)
        else:
            roots.append(message)
    left, shown = [budget], [0]

    def render(message: Any) -> str:
        meta = _meta(message)
        role = "user" if getattr(message, "role", "") == "user" else "assistant"
        content = shorten(str(getattr(message, "content", "") or ""), max(0, min(MESSAGE_CHARS, left[0])))
        left[0] -= len(content) + MESSAGE_COST
        shown[0] += 1
        inner = markdown_html(content, demote=3) + "".join(render(c) for c in children.get(str(meta.get("id")), [])
                                                           if left[0] > 0)
        if not meta.get("title"):
            return f'<div class="msg {role}" dir="auto">{inner}</div>'
        log = " · ".join(str(x) for x in (meta.get("log"), _duration(meta.get("duration"))) if x)
        aside = f' <span class="log">{plain(log, 200)}</span>' if log else ""
        return (f'<details class="msg {role}"><summary>{markdown_html(str(meta["title"]), inline=True)}{aside}'
                f'</summary><div class="body" dir="auto">{inner}</div></details>')

    parts, open_turn = [], None
    for message in roots:
        if left[0] <= 0:
            break
        turn = turn_of.get(id(message))
        if turn != open_turn:
            parts.append(_turn_break(open_turn, turn, page, current))
            open_turn = turn
        parts.append(render(message))
    parts.append(_turn_break(open_turn, None, page, current))
    return ('<section class="transcript"><h2>Transcript</h2><p class="hint">Thinking, tool calls and their results '
            f'are folded: open one to read it.</p>{"".join(parts)}{_shortened(len(messages) - shown[0], raw)}'
            "</section>")


def _turn_break(closing: int | None, opening: int | None, page: str, current: int | None) -> str:
    """Where one turn's section ends and the next begins (messages outside every turn sit between them)."""
    end = "</section>" if closing is not None else ""
    if opening is None:
        return end
    mark = " current" if opening == current else ""
    link = (f' <a class="step-link" href="{html.escape(turn_link(page, opening))}">link to this step</a>'
            if page else "")
    here = ' <span class="here">this step</span>' if opening == current else ""
    return (f'{end}<section class="turn{mark}" id="turn-{opening}"><h3 class="turn-head">'
            f"Turn {opening}{here}{link}</h3>")


def _shortened(left_out: int, raw: str | None) -> str:
    """The note at the foot of a shortened transcript."""
    if not left_out:
        return ""
    whole = f'<a href="{html.escape(raw)}">the raw JSON</a>' if raw else "the record"
    more = "1 more message is" if left_out == 1 else f"{left_out:,} more messages are"
    return (f'<p class="note shortened">This transcript is too long to show whole: {more} left out here. '
            f"Read every one in {whole}.</p>")


def _meta(message: Any) -> dict:
    meta = getattr(message, "metadata", None)
    return meta if isinstance(meta, dict) else {}


def _duration(value: Any) -> str:
    return f"{value:.1f} s" if isinstance(value, int | float) and not isinstance(value, bool) else ""


# -- the document ------------------------------------------------------------------------------------------------

def _figure(scene: Any, caption: str) -> str:
    if scene is None:
        return ""
    note = f"<figcaption>{plain(caption)}</figcaption>" if caption else ""
    return f'<figure class="chart">{chart_svg(scene)}{note}</figure>'


def _top(links: PageLinks, action: str, beat: str | None = None) -> str:
    raw = f'<a class="button" href="{html.escape(links.raw)}">Raw JSON</a>' if links.raw else ""
    if beat:
        raw = f'<a class="button" id="try-to-beat" href="{html.escape(beat)}">Try to beat this</a>' + raw
    return (f'<header class="top"><a class="brand" href="{html.escape(links.home)}">⚓ {ARENA}</a>'
            f'<nav><a class="button primary" href="{html.escape(links.arena)}">{action}</a>{raw}</nav></header>')


def _head(title: str, description: str, links: PageLinks) -> str:
    """The title and the tags crawlers read (every value attribute-escaped, cut to what cards show)."""
    title = clean(title, 240)
    description = clean(description, DESCRIPTION_CHARS)
    tags = {"og:title": title, "og:description": description, "og:type": "article", "og:site_name": ARENA,
            "og:url": links.page, "og:image": links.image, "og:image:type": "image/png", "og:image:width": "1200",
            "og:image:height": "630", "og:image:alt": f"The berth chart of {title}"}
    twitter = {"twitter:card": "summary_large_image", "twitter:title": title, "twitter:description": description,
               "twitter:image": links.image}
    return (f"<title>{plain(title, 240)} · {ARENA}</title>"
            f'<meta name="description" content="{plain(description, DESCRIPTION_CHARS)}">'
            f'<link rel="canonical" href="{html.escape(links.page)}">'
            + "".join(f'<meta property="{k}" content="{html.escape(UNSAFE.sub("", v))}">' for k, v in tags.items())
            + "".join(f'<meta name="{k}" content="{html.escape(UNSAFE.sub("", v))}">' for k, v in twitter.items()))


def _document(head: str, body: str) -> str:
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"{head}<style>{CSS}</style></head><body>{body}</body></html>")


CSS = """
:root {color-scheme: light; --ink: #1f2d3d; --muted: #5a6570; --line: #dde3ea; --blue: #4C78A8; --bg: #f6f8fa}
* {box-sizing: border-box}
body {margin: 0 auto; max-width: 1360px; padding: 12px 24px 40px; font: 15px/1.5 system-ui, -apple-system, "Segoe UI",
  Roboto, "Liberation Sans", Arial, sans-serif; color: var(--ink); background: white}
a {color: #1f5fa8}
.top {display: flex; align-items: center; justify-content: space-between; gap: 12px; flex-wrap: wrap;
  padding-bottom: 10px; border-bottom: 1px solid var(--line)}
.brand {font-weight: 600; text-decoration: none; color: var(--ink)}
nav {display: flex; gap: 8px}
.button {display: inline-block; padding: 7px 14px; border: 1px solid var(--line); border-radius: 8px;
  text-decoration: none; font-weight: 600; color: var(--ink); background: var(--bg)}
.button.primary {background: var(--blue); border-color: var(--blue); color: white}
.head h1 {margin: 14px 0 2px; font-size: 1.7rem; line-height: 1.2; overflow-wrap: anywhere}
.where {margin: 0; color: var(--muted); overflow-wrap: anywhere}
.facts {margin: 8px 0 12px; display: flex; flex-wrap: wrap; align-items: center; gap: 6px 14px}
.reward {font-size: 1.3rem; font-weight: 700}
.pill {padding: 2px 12px; border-radius: 999px; color: white; font-weight: 700; font-size: .9rem}
.pill.ok {background: #2E7D32} .pill.bad {background: #D62728} .pill.muted {background: #6b7580}
.layout {display: grid; grid-template-columns: minmax(0, 1fr) 340px; gap: 18px; align-items: start}
.layout.single {grid-template-columns: minmax(0, 1fr); max-width: 1040px}
.chart {margin: 0; overflow-x: auto; border: 1px solid var(--line); border-radius: 8px; padding: 4px}
.chart svg, .optimum svg {display: block; width: 100%; height: auto; min-width: 560px}
figcaption {color: var(--muted); font-size: .85rem; padding: 2px 6px}
.optimum {margin-top: 10px} .optimum > summary {cursor: pointer; font-weight: 600}
.optimum[open] {overflow-x: auto}
.grade {border: 1px solid var(--line); border-radius: 8px; padding: 0 14px; background: var(--bg); font-size: .92rem;
  overflow-wrap: anywhere}
.grade h3 {margin: 10px 0 4px; font-size: 1.05rem} .grade ul {padding-left: 18px; margin: 4px 0 10px}
.note {color: var(--muted)}
.gap table {font-size: .85rem} .gap h3 {margin-top: 14px}
.transcript {max-width: 980px; margin-top: 22px} .transcript h2 {margin: 0; font-size: 1.25rem}
.hint {margin: 0 0 10px; color: var(--muted); font-size: .9rem}
.msg {margin: 8px 0; padding: 8px 12px; border: 1px solid var(--line); border-radius: 8px; overflow-wrap: anywhere}
.msg.user {background: var(--bg)} details.msg > summary {cursor: pointer; font-weight: 600}
.msg .msg {margin: 8px 0 0}
.log {color: var(--muted); font-weight: 400; font-size: .85rem}
.msg p, .msg li, .msg td, .msg pre, summary {unicode-bidi: plaintext}
.msg p {margin: 6px 0}
pre {overflow-x: auto; background: #f2f4f7; padding: 8px; border-radius: 6px; font-size: .82rem; max-height: 480px}
table {border-collapse: collapse; display: block; overflow-x: auto} td, th {border: 1px solid var(--line);
  padding: 2px 6px}
.flags {max-width: 980px; margin-top: 22px} .flags h2 {margin: 0; font-size: 1.25rem}
.flags ul {padding-left: 20px; margin: 4px 0} .flags li {margin: 4px 0; overflow-wrap: anywhere}
.flag-label {color: #b3261e; font-weight: 600} .flag-note {margin: 2px 0 0; color: var(--muted)}
.step {margin: 0 0 12px; padding: 8px 14px; border: 2px solid #F58518; border-radius: 8px; background: #fff8f0}
.step p {margin: 4px 0} .address {font-size: .9rem; overflow-wrap: anywhere}
.drafts {margin-top: 10px} .drafts > summary {cursor: pointer; font-weight: 600}
.drafts ol {margin: 6px 0; padding-left: 22px; font-size: .9rem} .drafts li.current {font-weight: 700}
.drafts li.current::marker {color: #F58518}
.turn {margin: 14px 0; padding: 2px 10px 4px; border-left: 3px solid var(--line); scroll-margin-top: 8px}
.turn-head {margin: 4px 0; font-size: 1rem} .step-link {font-size: .82rem; font-weight: 400; margin-left: 8px}
.here {font-size: .8rem; background: #F58518; color: white; border-radius: 999px; padding: 1px 8px; margin-left: 6px}
.turn.current, .turn:target {border-left-color: #F58518; background: #fff8f0}
footer {margin-top: 28px; color: var(--muted); font-size: .85rem; border-top: 1px solid var(--line)}
footer p {margin: 6px 0}
@media (max-width: 900px) {
  body {padding: 8px 12px 28px}
  .layout {grid-template-columns: minmax(0, 1fr)}
  .head h1 {font-size: 1.15rem}
  .facts {gap: 2px 10px; font-size: .9rem} .reward {font-size: 1.1rem}
  .chart svg, .optimum svg {min-width: 0}
}
"""
