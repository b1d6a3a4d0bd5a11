"""Flags on a step in the launched app (viewer/browse/flags.py over live/flags.py): a signed-in visitor's flag is
saved and found by Browse's "flagged" filter (form row and API alike), counted in its column, shown inert on the
share page and hidden by the Space's owner; an anonymous one is refused with a message, from the form and the API;
the per-account cap refuses the next flag, saying when."""

from __future__ import annotations

import time
from types import SimpleNamespace

import datasets
import gradio as gr
import httpx
import huggingface_hub.constants
import pytest
from gradio_client import Client
from huggingface_hub import snapshot_download

from live.flags import SIGN_IN, FlagDesk, FlagRefused, SpaceOwners
from rollouts.annotations import read_flags
from rollouts.filters import BY_NAME, Filters
from rollouts.record import Record
from testkit.app import launched_app
from testkit.fakehub import running_fakehub
from testkit.fakejobs import running_jobs_hub
from testkit.records import make_record
from viewer.browse import flags as flagging
from viewer.browse.filter_form import WIDGETS
from viewer.browse.views import list_table


def signed_in(name: str):
    """A request as Gradio hands one over for a visitor signed in with Hugging Face (the OAuth session Gradio
    reads for `gr.OAuthProfile`, as tests/viewer/test_visitors.py fakes it)."""
    session = {"oauth_info": {"userinfo": {"preferred_username": name}, "expires_at": time.time() + 600}}
    return SimpleNamespace(username=None, client=SimpleNamespace(host="203.0.113.7"), headers={},
                           request=SimpleNamespace(scope={"session": session}))


def anonymous():
    return SimpleNamespace(username=None, client=SimpleNamespace(host="203.0.113.8"), headers={},
                           request=SimpleNamespace(scope={}))


@pytest.fixture(scope="module")
def rollouts(arena):
    records = [make_record(seed=40 + n) for n in range(3)]
    for record in records:
        arena.ctx.store.save(record)
    arena.ctx.archive.refresh_local(force=True)
    return records


@pytest.fixture
def owners(arena):
    before = arena.ctx.flags.owners
    arena.ctx.flags.owners = SpaceOwners(["harbour-master"], token="hf_space", whoami=lambda token: "space-owner")
    yield arena.ctx.flags.owners
    arena.ctx.flags.owners = before


def refusal(client: Client, *args, api_name: str) -> str:
    with pytest.raises(Exception) as refused:  # gradio_client raises AppError with the handler's message
        client.predict(*args, api_name=api_name)
    return str(refused.value)


def test_a_signed_in_flag_is_saved_filtered_counted_shown_inert_and_hidden_by_the_owner(arena, rollouts, owners):
    ctx, first = arena.ctx, rollouts[0]["episode_id"]
    note = "moved ship 3 off its section <script>alert(1)</script> [x](https://evil.example)"
    row = flagging.add_flag(ctx, first, "draft", 2, "misread a rule", note, signed_in("ana"))
    assert row["author"] == "ana" and row["label"] == "misread_rule" and (row["step_kind"], row["step"]) == ("draft", 2)
    assert row in read_flags(arena.root)
    profile = gr.OAuthProfile({"preferred_username": "bo", "name": "Bo", "profile": "", "picture": ""})
    other = flagging.add_flag(ctx, rollouts[1]["episode_id"], "turn", 3, "good_recovery", "", anonymous(), profile)
    assert other["author"] == "bo"

    client = Client(arena.url, verbose=False)
    found = client.predict(api_name="/browse_rollouts", flagged="misread_rule", page_size=500)
    assert [r["episode_id"] for r in found["rows"]] == [first] and found["rows"][0]["flags"] == 1
    # The filter's row in the form: its widget reads back the key the API takes.
    widget = WIDGETS[BY_NAME["flagged"].kind]
    assert widget.read(["misread_rule"]) == ["misread_rule"]
    both = client.predict(api_name="/browse_rollouts", flagged="misread_rule,good recovery", page_size=500)
    assert {r["episode_id"] for r in both["rows"]} == {first, rollouts[1]["episode_id"]}
    # The list's `flags` column: the count, a blank where there is none.
    rows = ctx.archive.query(Filters(), size=500)[0]
    shown = dict(zip(rows.column("episode_id").to_pylist(), list_table(rows, ["flags"])["flags"], strict=True))
    assert (shown[first], shown[rollouts[1]["episode_id"]], shown[rollouts[2]["episode_id"]]) == ("1", "1", "")

    page = httpx.get(f"{arena.url}r/{first}", timeout=30)
    assert page.status_code == 200 and "Flags on its steps (1)" in page.text and "draft 2" in page.text
    assert "misread a rule" in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "<script" not in page.text and 'href="https://evil.example' not in page.text
    assert "by <bdi>ana</bdi>" in page.text

    shown = flagging.flags_markdown(ctx.archive.flags_of(first), draft=2)
    assert "◀ on the chart" in shown and "&lt;script&gt;" in shown and "<script>" not in shown

    with pytest.raises(FlagRefused, match="Only the Space's owner"):
        ctx.flags.hide("ana", row["flag_id"])
    assert "Sign in with Hugging Face first" in refusal(client, row["flag_id"], api_name="/hide_flag")
    hidden = flagging.hide_flag(ctx, row["flag_id"], signed_in("space-owner"))  # the HF_TOKEN's account
    assert hidden["hidden"] is True and {**hidden, "hidden": False} == row
    assert client.predict(api_name="/browse_rollouts", flagged="misread_rule")["total"] == 0
    assert "Flags on its steps" not in httpx.get(f"{arena.url}r/{first}", timeout=30).text
    again = flagging.hide_flag(ctx, other["flag_id"], signed_in("harbour-master"))  # one ADMINS names
    assert again["hidden"] is True


def test_an_anonymous_flag_is_refused_with_a_message_and_nothing_is_written(arena, rollouts):
    before = read_flags(arena.root)
    client = Client(arena.url, verbose=False)
    message = refusal(client, rollouts[2]["episode_id"], "draft", 1, "other", "hi", api_name="/flag_step")
    assert SIGN_IN in message
    with pytest.raises(FlagRefused, match="Sign in with Hugging Face"):
        flagging.add_flag(arena.ctx, rollouts[2]["episode_id"], "turn", 1, "other", "", anonymous())
    assert read_flags(arena.root) == before


@pytest.mark.parametrize("kind, step, label, note, words", [
    ("draft", 99, "other", "", "drafts 1 to {drafts}; there is no draft 99"),
    ("turn", 0, "other", "", "turns 1 to {turns}; there is no turn 0"),
    ("draft", "two", "other", "", "whole number"),
    ("draft", 1, "nice", "", "Pick a label"),
    ("draft", 1, "other", "x" * 501, "at most 500 characters"),
])
def test_a_flag_names_a_step_the_rollout_has_a_label_of_the_list_and_a_short_note(arena, rollouts, kind, step, label,
                                                                                 note, words):
    view = Record(rollouts[2])
    with pytest.raises(FlagRefused, match=words.format(drafts=len(view.plan_steps), turns=view.turns)):
        flagging.add_flag(arena.ctx, rollouts[2]["episode_id"], kind, step, label, note, signed_in("cy"))


def test_the_per_hour_cap_refuses_the_next_flag_with_a_message(arena, rollouts, monkeypatch):
    desk = arena.ctx.flags
    capped = FlagDesk(desk.book, per_hour=2, owners=desk.owners)
    monkeypatch.setattr(arena.ctx, "flags", capped)
    episode = rollouts[2]["episode_id"]
    for step in (1, 2):
        flagging.add_flag(arena.ctx, episode, "turn", step, "gave_up_early", "", signed_in("dee"))
    written = len(read_flags(arena.root))
    with pytest.raises(FlagRefused, match=r"You have added 2 flags in the last hour \(the limit is 2 per account\)"
                                          r"\. The next one can be added in 60 min"):
        flagging.add_flag(arena.ctx, episode, "turn", 3, "gave_up_early", "", signed_in("dee"))
    assert len(read_flags(arena.root)) == written
    flagging.add_flag(arena.ctx, episode, "turn", 3, "gave_up_early", "", signed_in("eve"))  # another account


def test_the_space_owner_is_its_hf_token_account_asked_of_the_hub_once_or_one_admins_names(tmp_path):
    with running_jobs_hub(tmp_path, token="hf_owner", user="space-owner") as (hub, _):
        owners = SpaceOwners(["harbour-master", " "], token="hf_owner", endpoint=hub.url)
        assert "space-owner" in owners and "harbour-master" in owners
        assert "ana" not in owners and "" not in owners and None not in owners
        assert sum(path == "/api/whoami-v2" for _, _, path, _ in hub.requests) == 1
        # A token the Hub refuses names nobody: ADMINS still hold, and nothing is raised to the visitor.
        refused = SpaceOwners(["harbour-master"], token="hf_not_this", endpoint=hub.url)
        assert refused.names() == {"harbour-master"}


def test_a_flag_made_in_the_app_reaches_the_hub_dataset_where_load_dataset_reads_it(tmp_path, monkeypatch):
    token, repo = "hf_flags_app", "arena/flags-app"
    record = make_record(seed=77)
    with running_fakehub(token=token) as hub:
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)  # where the app's pusher goes
        # ...and downloads from (a download URL is built from this, fixed at import), as test_hidden_sides.py does.
        monkeypatch.setattr(huggingface_hub.constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                            hub.url + "/{repo_id}/resolve/{revision}/{filename}")
        with launched_app(tmp_path / "space", records=[record], dataset=repo, hub_token=token) as app:
            row = flagging.add_flag(app.ctx, record["episode_id"], "turn", 2, "arithmetic_slip", "2 + 2 = 5",
                                    signed_in("ana"))
            assert app.ctx.store.flush(timeout=60)
            rel = f"annotations/{row['time'][:10]}/{app.ctx.store.writer_id}.jsonl"
            assert hub.files(repo)[rel] == (app.root / rel).read_bytes()
        copy = snapshot_download(repo, repo_type="dataset", endpoint=hub.url, token=token,
                                 local_dir=tmp_path / "copy")
    loaded = datasets.load_dataset(copy, "annotations", split="train", cache_dir=str(tmp_path / ".cache"))
    assert loaded.to_list()[0] | {"time": row["time"]} == row


def test_the_form_flags_for_a_signed_in_visitor_and_the_owner_hides_from_it(arena, rollouts, owners):
    """The Browse form's handlers (viewer/browse/flags.py), as Gradio calls them, on one component per key."""
    box = SimpleNamespace(result="result", note="note", shown="shown", hide_id="hide_id")
    section, state = SimpleNamespace(ctx=arena.ctx, flags=box), SimpleNamespace(rollout=rollouts[1]["episode_id"])
    out = flagging.flag_clicked(section, state, "draft", 1, "gave_up_early", "stopped at 1 <b>check</b>",
                                signed_in("fay"))
    assert out["result"].startswith("✓ Flagged draft 1: gave up early (flag `") and out["note"] == ""
    flag_id = out["result"].split("`")[1]
    shown = out["shown"]
    assert shown.visible and "◀ on the chart" in shown.value and "&lt;b&gt;check&lt;/b&gt;" in shown.value
    refused = flagging.flag_clicked(section, state, "draft", 1, "other", "", anonymous())
    assert refused["result"] == f"⚠️ {SIGN_IN}"
    assert flagging.hide_clicked(section, state, flag_id, signed_in("fay"))["result"].startswith(
        "⚠️ Only the Space's owner")
    hidden = flagging.hide_clicked(section, state, flag_id, signed_in("harbour-master"))
    assert hidden["result"] == f"✓ Flag `{flag_id}` is hidden." and flag_id not in str(hidden["shown"].value)
