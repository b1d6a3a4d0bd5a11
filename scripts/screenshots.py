"""Screenshots of the app as a first visitor sees it, at 1440x900 and at 390x844 (a phone), into docs/screens/.

    python scripts/screenshots.py [--out docs/screens] [--only run]

It launches the app in this process on a temporary rollout folder (embedded berth server, no Hub), drives
Debian's chromium through Playwright and saves, per screen and size, `<screen>-<state>-<size>.png`. The Run tab:
idle with the task preview, mid-run (a `baseline:hasty` episode after its first check found broken ships) and
finished; the Arena: idle, two baselines racing, the verdict and the vote (a random pair on the phone), the match's
link opened afresh; Browse: the
list, a rollout opened by its share link, a compare and the leaderboard (on a folder of realistic rollouts from
testkit), the open rollout's flags on its steps with the form to add one (`flags`), the leaderboard with a
one-episode `human` beside baselines of many (`board`), its cost x reward frontier and a model's reproducibility card
(`frontier`); Play: a task picked,
a checked draft with its violations, the submitted optimum; a rollout's share page, `/r/<id>` (a real
`baseline:hasty` episode, played on the embedded server); the Run tab refusing a mistyped baseline (`typo`).
Each screen is a function below, so a new one is one more function in SCREENS.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SIZES = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--no-first-run",
                 "--disable-sync", "--disable-quic"]


def run_screens(page: Page, url: str, out: Path, size: str) -> list[Path]:
    """The Run tab: idle with the preview, mid-run after the first check, finished."""
    saved = []
    page.goto(url)
    expect(page.locator("#preview-chart .js-plotly-plot")).to_be_visible(timeout=30000)
    page.wait_for_timeout(600)
    saved.append(_shot(page, out / f"run-idle-{size}.png"))
    page.locator("#run").click()
    expect(page.locator("#chat")).to_contain_text("check_plan · ❌", timeout=30000)
    page.wait_for_timeout(400)
    saved.append(_shot(page, out / f"run-mid-{size}.png"))
    expect(page.locator("#grade")).to_contain_text("reward", timeout=60000)
    page.wait_for_timeout(600)
    saved.append(_shot(page, out / f"run-done-{size}.png"))
    saved.append(_shot(page, out / f"run-done-{size}-full.png", full=True))
    return saved


def typo_screens(page: Page, url: str, out: Path, size: str) -> list[Path]:
    """The Run tab refusing a mistyped baseline before anything is played, naming the ones there are."""
    page.goto(url)
    expect(page.locator("#preview-chart .js-plotly-plot")).to_be_visible(timeout=30000)
    box = page.locator("#model input")
    box.fill("baseline:smart")
    box.press("Enter")
    page.locator("#run").click()
    expect(page.locator("#model-note")).to_contain_text("unknown baseline", timeout=30000)
    page.locator("#model-note").scroll_into_view_if_needed()
    page.wait_for_timeout(400)
    return [_shot(page, out / f"run-typo-{size}.png")]


def browse_screens(page: Page, url: str, out: Path, size: str) -> list[Path]:
    """Browse: the list, a rollout opened from a share link, a compare, the leaderboard."""
    saved = []
    page.goto(f"{url}?tab=browse")
    expect(page.locator("#rollouts")).to_contain_text("dock-", timeout=30000)
    page.wait_for_timeout(600)
    saved.append(_shot(page, out / f"browse-list-{size}.png"))
    page.goto(f"{url}?tab=browse&rollout={SHOWN}")
    expect(page.locator("#browse-chart .js-plotly-plot")).to_be_visible(timeout=30000)
    page.wait_for_timeout(800)
    saved.append(_shot(page, out / f"browse-rollout-{size}.png"))
    page.goto(f"{url}?tab=browse&rollout={SHOWN}&compare={RIVAL}")
    expect(page.locator("#compare-b-chart .js-plotly-plot")).to_be_visible(timeout=30000)
    page.wait_for_timeout(800)
    saved.append(_shot(page, out / f"browse-compare-{size}.png", full=True))
    page.goto(f"{url}?tab=browse&view=board")
    expect(page.locator("#heatmap")).to_contain_text("dock-", timeout=30000)
    page.wait_for_timeout(600)
    saved.append(_shot(page, out / f"browse-board-{size}.png", full=True))
    # The board scrolled sideways to its pass^k columns, the notes saying what they are below.
    page.locator("#board .virtual-table-viewport").evaluate("""e => {
        const h = [...e.querySelectorAll('[role=columnheader]')].find(h => h.innerText.includes('pass^1'));
        e.scrollLeft = h ? h.offsetLeft - 300 : 0; }  // past the pinned model column""")
    page.locator("#board").evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(400)
    saved.append(_shot(page, out / f"browse-board-passk-{size}.png"))
    return saved


def board_screens(page: Page, url: str, out: Path, size: str) -> list[Path]:
    """The leaderboard when one model has a single hand-played episode: no interval, no rank, listed last, and
    the notes under the board saying why (the phone scrolled to them)."""
    page.goto(f"{url}?tab=browse&view=board")
    expect(page.locator("#board")).to_contain_text("n too small", timeout=30000)
    expect(page.locator("#heatmap")).to_contain_text("dock-", timeout=30000)
    page.wait_for_timeout(600)
    if size == "phone":
        page.locator("#board-note").scroll_into_view_if_needed()
        page.evaluate("window.scrollBy(0, -420)")  # the board's last rows above its notes
    else:  # the board and the start of its notes in one view
        page.locator("#board").evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    return [_shot(page, out / f"board-small-sample-{size}.png")]


def frontier_screens(page: Page, url: str, out: Path, size: str) -> list[Path]:
    """The leaderboard's cost x reward frontier with a point's hover (a tap on the phone), then a model's
    reproducibility card opened under the board."""
    page.goto(f"{url}?tab=browse&view=board")
    plot = page.locator("#frontier .js-plotly-plot")
    expect(plot).to_be_visible(timeout=30000)
    page.wait_for_timeout(800)
    plot.scroll_into_view_if_needed()
    point = page.locator("#frontier .scatterlayer .trace:nth-child(2) .point").first
    box = point.bounding_box()
    if box is not None:  # a hover on the desktop; on a phone a tap gives the same label
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_timeout(500)
    saved = [_shot(page, out / f"board-frontier-{size}.png")]
    page.locator("#card-pick").scroll_into_view_if_needed()
    page.locator("#card-pick input").click()
    page.get_by_role("option", name="anthropic:claude-sonnet-5-5@high", exact=True).click()
    expect(page.locator("#model-card")).to_contain_text("harness", timeout=20000)
    page.locator("#card-pick").evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(400)
    saved.append(_shot(page, out / f"board-card-{size}.png"))
    return saved


def arena_screens(page: Page, url: str, out: Path, size: str) -> list[Path]:
    """The Arena: idle, both sides racing (after the hasty side's first check found broken ships), the verdict with
    the vote. On a laptop a named match; on a phone a random pair, names hidden until the vote."""
    saved = []
    page.goto(f"{url}?tab=arena")
    expect(page.locator("#arena-task input")).not_to_have_value("", timeout=30000)
    page.wait_for_timeout(600)
    saved.append(_shot(page, out / f"arena-idle-{size}.png"))
    if size == "phone":
        page.locator("#arena-random input").check()
    else:
        page.locator("#arena-model-a input").fill("baseline:greedy")
        page.locator("#arena-model-b input").fill("baseline:hasty")
    page.locator("#arena-run").click()
    # The hasty side's first check breaks rules (a random pair may not hold it: then any first check).
    broken = "check_plan · ❌" if size != "phone" else "check_plan"
    expect(page.locator("#arena-a-chat, #arena-b-chat").filter(has_text=broken).first).to_be_visible(timeout=30000)
    saved.append(_shot(page, out / f"arena-running-{size}.png"))
    expect(page.locator("#arena-vote")).to_be_visible(timeout=60000)
    page.wait_for_timeout(1200)  # the phone scrolls to the verdict
    saved.append(_shot(page, out / f"arena-verdict-{size}.png"))
    saved.append(_shot(page, out / f"arena-verdict-{size}-full.png", full=True))
    if size == "phone":  # names hidden: vote, so that the link below shows them as anyone would see them
        page.locator("#arena-vote-tie").click()
        expect(page.locator("#arena-ballot")).to_contain_text("Your vote is counted")
    # The link the page offers for the match, opened as a visitor it was sent to would (a phone lands on the verdict).
    match_id = page.locator("#arena-link code").inner_text()
    page.goto(f"{url}?match={match_id}")
    for side in "ab":
        expect(page.locator(f"#arena-{side}-plan-step")).to_be_visible(timeout=30000)
    page.wait_for_timeout(1200)
    saved.append(_shot(page, out / f"arena-match-link-{size}.png"))
    saved.append(_shot(page, out / f"arena-match-link-{size}-full.png", full=True))
    return saved


def play_screens(page: Page, url: str, out: Path, size: str) -> list[Path]:
    """Play: a task picked, a draft checked (ship 5 moved, so rules break), the proven optimum submitted."""
    from berth_env import load_pack

    task = load_pack().get(PLAYED)
    saved = []
    page.goto(f"{url}?tab=play")
    expect(page.locator("#play-planner svg")).to_be_visible(timeout=30000)
    page.locator("#play-task input").fill(PLAYED)
    page.get_by_role("option").filter(has_text=PLAYED).first.click()
    expect(page.locator("#play-brief")).to_contain_text(PLAYED)
    page.wait_for_timeout(600)
    saved.append(_shot(page, out / f"play-idle-{size}.png"))
    cell = page.locator("#play-table .virtual-row").nth(5).locator("[role=gridcell]").nth(2)
    cell.dblclick()
    cell.locator("textarea").fill("80")
    cell.locator("textarea").press("Enter")
    expect(page.locator("#play-planner")).to_contain_text("Your draft", timeout=30000)
    page.locator("#play-check").click()
    expect(page.locator("#play-verdict")).to_contain_text("check 1 of 10", timeout=30000)
    page.wait_for_timeout(600)
    saved.append(_shot(page, out / f"play-checked-{size}.png"))
    page.get_by_text("Plan as JSON").click()
    page.locator("#play-json textarea").fill(json.dumps(task["reference"]["optimal_plan"]))
    page.locator("#play-load-json").click()
    expect(page.locator("#play-verdict")).to_contain_text("pasted plan", timeout=30000)
    page.locator("#play-submit").click()
    expect(page.locator("#play-verdict")).to_contain_text("Submitted", timeout=30000)
    page.wait_for_timeout(800)
    saved.append(_shot(page, out / f"play-submitted-{size}.png"))
    saved.append(_shot(page, out / f"play-submitted-{size}-full.png", full=True))
    return saved


def share_screens(page: Page, url: str, out: Path, size: str) -> list[Path]:
    """A rollout's share page, as a link pasted anywhere opens it: served whole, no Gradio JavaScript."""
    page.goto(f"{url}r/{SHARED}")
    expect(page.locator("figure.chart svg")).to_be_visible(timeout=30000)
    return [_shot(page, out / f"share-page-{size}.png")]


def flags_screens(page: Page, url: str, out: Path, size: str) -> list[Path]:
    """Browse's open rollout with the flags visitors put on its steps, and the form to add one, as an anonymous
    visitor finds it: a label picked, Flag pressed, the request to sign in."""
    page.goto(f"{url}?tab=browse&rollout={SHOWN}")
    expect(page.locator("#rollout-flags")).to_contain_text("misread a rule", timeout=30000)
    page.locator("#flag-open").click()
    page.locator("#flag-label input").click()
    page.get_by_role("option").filter(has_text="ignored a violation").click()
    page.locator("#flag-button").click()
    expect(page.locator("#flag-result")).to_contain_text("Sign in with Hugging Face", timeout=30000)
    page.locator("#rollout-flags").scroll_into_view_if_needed()
    page.wait_for_timeout(600)
    return [_shot(page, out / f"flags-{size}.png")]


SCREENS: dict[str, Callable[[Page, str, Path, str], list[Path]]] = {"run": run_screens, "arena": arena_screens,
                                                                    "browse": browse_screens, "board": board_screens,
                                                                    "frontier": frontier_screens,
                                                                    "play": play_screens, "share": share_screens,
                                                                    "typo": typo_screens, "flags": flags_screens}
PLAYED = "dock-24B-w06x1-busy-0"
SHOWN, RIVAL, SHARED = "shown0001", "rival0001", "shared000001"


def _rollouts(store: Any) -> None:
    """Rollouts for Browse to show: a varied set, and two of one task to open and compare."""
    from testkit.records import make_record, make_records

    task = "dock-24B-w06x1-busy-0"
    for seed in range(200):
        shown = make_record(seed=seed, task_id=task, model="anthropic:claude-sonnet-5-5@high", end_reason="submitted",
                            episode_id=SHOWN, started="2026-11-29T10:00:00Z")
        if len(shown["steps"]) >= 3 and shown["final"]["grade"]["feasible"]:
            break
    rival = make_record(seed=7, task_id=task, model="openai:gpt-5.5@medium", end_reason="submitted",
                        episode_id=RIVAL, started="2026-11-28T09:00:00Z")
    # One hand-played episode, as a visitor's first: a board must not rank it above models of many episodes.
    human = next(r for seed in range(300) if (r := make_record(seed=seed, task_id=task, model="human",
                                                               end_reason="submitted"))["reward"] > 0.8)
    for record in [shown, rival, human, *make_records(120, seed=12)]:
        store.save(record)
    from rollouts.annotations import FlagBook, new_flag

    book = FlagBook(store.root, store.writer_id)  # two visitors' flags on the rollout Browse opens
    book.add(new_flag(SHOWN, "draft", 2, "misread_rule", "Moved the priority ship off its published section and "
                      "never put it back.", "harbour-analyst"))
    book.add(new_flag(SHOWN, "turn", 3, "good_recovery", "", "ana"))
    from agent.loop import run_episode
    from agent.request import EpisodeRequest

    # The share page shows a real episode: its charts, grade and transcript agree, as a visitor's would.
    store.save(run_episode(EpisodeRequest.of("baseline:hasty", "dock-36A-w06x1-busy-0", run="screenshots"),
                           episode_id=SHARED))


def _shot(page: Page, path: Path, *, full: bool = False) -> Path:
    page.screenshot(path=str(path), full_page=full)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screens")
    parser.add_argument("--only", choices=sorted(SCREENS), action="append", help="only these screens")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    import app as app_module
    from testkit.app import serving
    from viewer.context import AppContext, Settings

    with tempfile.TemporaryDirectory() as folder:
        settings = dataclasses.replace(Settings.from_env(), rollout_dir=Path(folder), dataset=None, hub_token=None,
                                       public_rollouts=None, baseline_pace_s=2.0)
        ctx = AppContext.create(settings)
        _rollouts(ctx.store)
        demo = app_module.build_app(ctx)
        with serving(app_module.serve(demo, ctx)) as url:
            try:
                with sync_playwright() as playwright:
                    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                    for name in args.only or SCREENS:
                        for size, viewport in SIZES.items():
                            page = browser.new_context(viewport=viewport).new_page()
                            for path in SCREENS[name](page, url, args.out, size):
                                print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
                            page.context.close()
                    browser.close()
            finally:
                demo.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
