"""Flags on a step in Browse's open rollout: the flags shown at their step, the small form that adds one (a step, a
label, a note, the Flag button) and, for the Space's owner, hiding one; and the same as API routes (`flag_step`,
`hide_flag`). The rules (who, how many, which steps) are live/flags.py's; the rows are rollouts.annotations'.

Only a signed-in visitor flags. On a Space the form carries Gradio's "Sign in with Hugging Face" button; off a Space
there is none (Gradio's LoginButton needs a Hugging Face login on the machine), so the form says how to flag and
every anonymous call, from the form or the API, is refused with that message. Notes are the author's own words:
escaped where they are shown (viewer.markdown).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from live.flags import SIGN_IN, FlagRefused
from rollouts import settings
from rollouts.annotations import LABELS, NOTE_CHARS, step_words
from rollouts.archive import RolloutNotFound
from rollouts.record import Record
from rollouts.sources import SourceError
from viewer.context import AppContext
from viewer.markdown import escape_cell, escape_md
from viewer.visitors import account_of

TOGGLE = "🚩 Flag"
FLAG_CSS = """
#flag-form {gap: 6px; flex-wrap: wrap} #flag-form > * {min-width: 120px}
#rollout-flags ul {margin-top: 2px; margin-bottom: 2px}
"""


@dataclass
class FlagBox:
    shown: gr.Markdown   # the rollout's flags, each at its step (hidden while there are none)
    toggle: gr.Button    # in the rollout's row of actions: opens and closes the form
    form: gr.Column
    kind: gr.Radio
    step: gr.Number
    label: gr.Dropdown
    note: gr.Textbox
    button: gr.Button
    result: gr.Markdown
    hide_id: gr.Textbox
    hide_button: gr.Button

    @property
    def outputs(self) -> list[Any]:
        return [self.shown, self.kind, self.step, self.result]


def build_flag_box(toggle: gr.Button) -> FlagBox:
    """The flags and the form (closed until `toggle`, a button of the rollout's actions, opens it), in place: above
    the open rollout's chart, taking no room while the rollout has no flags and the form is closed."""
    shown = gr.Markdown(visible=False, elem_id="rollout-flags")
    with gr.Column(visible=False, elem_id="flag-box") as form:
        if settings.SPACE_ID.get():  # only on a Space: see the module doc
            gr.LoginButton(size="sm")
        with gr.Row(equal_height=True, elem_id="flag-form"):
            kind = gr.Radio(["draft", "turn"], value="draft", label="Step", min_width=130, elem_id="flag-kind")
            step = gr.Number(1, label="Number", minimum=1, precision=0, min_width=90, elem_id="flag-step")
            label = gr.Dropdown([(words, key) for key, words in LABELS.items()], value=None, label="Label",
                                min_width=170, elem_id="flag-label")
        note = gr.Textbox(label=f"Note (optional, at most {NOTE_CHARS} characters)", max_lines=4, max_length=NOTE_CHARS,
                          elem_id="flag-note")
        button = gr.Button("🚩 Flag this step", size="sm", variant="primary", elem_id="flag-button")
        result = gr.Markdown(elem_id="flag-result")
        with gr.Accordion("For the Space's owner: hide a flag", open=False, elem_id="hide-box"), \
                gr.Row(equal_height=True):
            hide_id = gr.Textbox(label="Flag id", max_lines=1, elem_id="hide-flag-id")
            hide_button = gr.Button("Hide", size="sm", scale=0, min_width=80, elem_id="hide-flag")
    return FlagBox(shown, toggle, form, kind, step, label, note, button, result, hide_id, hide_button)


def toggle_form(section: Any, label: str) -> dict:
    box = section.flags
    opening = not str(label).endswith("▴")
    return {box.toggle: gr.Button(f"{TOGGLE} ▴" if opening else TOGGLE), box.form: gr.Column(visible=opening)}


def flags_markdown(flags: list[dict], *, draft: int | None = None) -> str:
    """The flags of one rollout as Markdown, drafts then turns, each at its step (`draft`: the one the chart shows,
    marked), with its label, its escaped note, its author and when."""
    if not flags:
        return "**Flags** · none yet on this rollout's steps."
    lines = [f"**Flags** · {len(flags)} on this rollout's steps"]
    for row in flags:
        here = " ◀ on the chart" if row["step_kind"] == "draft" and row["step"] == draft else ""
        lines.append(f"- **{escape_cell(step_words(row))}**{here} · 🚩 {escape_cell(LABELS.get(row['label'], '?'))} "
                     f"· by {escape_cell(row['author'])}, {escape_cell(row['time'][:16].replace('T', ' '))} UTC "
                     f"· `{escape_cell(row['flag_id'])}`")
        if row["note"]:
            lines[-1] += "  \n  ✎ " + escape_md(row["note"]).replace("\n", " ").strip()
    return "\n".join(lines)


def shown_flags(ctx: AppContext, episode_id: str, draft: int | None = None) -> gr.Markdown:
    flags = ctx.archive.flags_of(episode_id) if episode_id else []
    return gr.Markdown(flags_markdown(flags, draft=draft), visible=bool(flags))


def flag_form(ctx: AppContext, box: FlagBox, episode_id: str, record: Record) -> dict:
    """The box for a rollout just opened: its flags, the step set on its last draft, a fresh result line."""
    drafts = len(record.plan_steps)
    sign_in = "" if ctx.flags is None else SIGN_IN if not settings.SPACE_ID.get() else ""
    return {box.shown: shown_flags(ctx, episode_id, drafts or None),
            box.kind: gr.Radio(value="draft" if drafts else "turn"), box.step: gr.Number(value=max(drafts, 1)),
            box.result: sign_in}


def add_flag(ctx: AppContext, episode_id: str, step_kind: str, step: Any, label: str, note: str,
             request: Any, profile: Any = None) -> dict:
    """Add the caller's flag on a step of a rollout; the row written. FlagRefused saying why."""
    if ctx.flags is None:
        raise FlagRefused("Flags are not taken here.")
    author = account_of(request, profile)
    if not author:  # before the record is read: an anonymous caller learns nothing of the rollout
        raise FlagRefused(SIGN_IN)
    try:
        view = ctx.records.find(episode_id, running=False).record
    except (RolloutNotFound, SourceError) as exc:
        raise FlagRefused(str(exc)) from None
    if not ctx.public(view.episode_id):
        raise FlagRefused("No such rollout.")
    return ctx.flags.flag(author, view.episode_id, step_kind, step, label, note, turns=view.turns,
                          drafts=len(view.plan_steps))


def flag_clicked(section: Any, state: Any, step_kind: str, step: Any, label: str, note: str,
                 request: gr.Request, profile: gr.OAuthProfile | None = None) -> dict:
    box = section.flags
    try:
        row = add_flag(section.ctx, state.rollout, step_kind, step, label, note, request, profile)
    except FlagRefused as exc:
        return {box.result: f"⚠️ {escape_cell(str(exc))}"}
    return {box.result: f"✓ Flagged {escape_cell(step_words(row))}: {escape_cell(LABELS[row['label']])} "
                        f"(flag `{row['flag_id']}`)", box.note: "",
            box.shown: shown_flags(section.ctx, state.rollout, int(step) if step_kind == "draft" else None)}


def hide_clicked(section: Any, state: Any, flag_id: str, request: gr.Request,
                 profile: gr.OAuthProfile | None = None) -> dict:
    box, ctx = section.flags, section.ctx
    try:
        if ctx.flags is None:
            raise FlagRefused("Flags are not taken here.")
        row = ctx.flags.hide(account_of(request, profile), (flag_id or "").strip())
    except FlagRefused as exc:
        return {box.result: f"⚠️ {escape_cell(str(exc))}"}
    return {box.result: f"✓ Flag `{row['flag_id']}` is hidden.", box.hide_id: "",
            box.shown: shown_flags(ctx, state.rollout)}


def draft_moved(section: Any, state: Any, position: float) -> dict:
    """The draft slider moved: the flags mark that draft's, and the form points at it."""
    draft = int(position or 1)
    box = section.flags
    return {box.shown: shown_flags(section.ctx, state.rollout, draft), box.kind: gr.Radio(value="draft"),
            box.step: gr.Number(value=draft)}


# -- the API -----------------------------------------------------------------------------------------------------

def flag_step(ctx: AppContext, episode_id: str, step_kind: str = "draft", step: int = 1, label: str = "",
              note: str = "", request: gr.Request = None, profile: gr.OAuthProfile | None = None) -> dict:
    """Flag one step of a rollout (signed-in visitors only): step_kind `draft` (the k-th plan sent to check_plan
    or submit_plan) or `turn`, its number from 1, a label (misread_rule, arithmetic_slip, ignored_violation,
    gave_up_early, good_recovery, other, or their words) and an optional note of at most 500 characters. The flag's
    row: flag_id, episode_id, step_kind, step, label, note, author, time, hidden."""
    try:
        return add_flag(ctx, episode_id, step_kind, step, label, note, request, profile)
    except FlagRefused as exc:
        raise gr.Error(str(exc)) from None


def hide_flag(ctx: AppContext, flag_id: str, request: gr.Request = None,
              profile: gr.OAuthProfile | None = None) -> dict:
    """Hide a flag (the Space's owner only: the account of its HF_TOKEN, or one ADMINS names); its row."""
    try:
        if ctx.flags is None:
            raise FlagRefused("Flags are not taken here.")
        return ctx.flags.hide(account_of(request, profile), (flag_id or "").strip())
    except FlagRefused as exc:
        raise gr.Error(str(exc)) from None
