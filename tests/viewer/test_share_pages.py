"""A rollout's share page, `/r/<id>` (issue 20), read over real HTTP from the launched app by a plain client, as a
link crawler reads it: the finished rollout's page and its Open Graph tags, its 1200 x 630 image and raw JSON with
their cache headers; a running episode's page; one 404 for every link to no rollout; a record full of hostile
strings rendered inert; the app's share links pointing at these pages. (An upstream row: test_browse_app.py; the
page in chromium: tests/browser/test_browse_links.py.)"""

from __future__ import annotations

import dataclasses
import io
import re
import time
from html.parser import HTMLParser

import httpx
import pytest

from agent.request import EpisodeRequest
from catalog.tasks import task_for
from live.runs import EpisodeRun
from rollouts.links import public_base
from testkit.app import launched_app
from testkit.records import make_record, make_records
from viewer.chart.scene import SHIP_FILL
from viewer.frames import episode_markdown
from viewer.share.page import TRANSCRIPT_CHARS, PageLinks, rollout_page
from viewer.share.routes import _Lru

Image = pytest.importorskip("PIL.Image")  # Pillow comes with gradio; it only reads the PNG back here

TASK = "dock-24B-w06x1-busy-0"
OWNER = "share-pages-test"
SCRIPT = "<script>window.__owned = 1</script>"
RTL = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: reverses the text after it


class Page(HTMLParser):
    """What a crawler sees of a page: every tag with its attributes, the meta tags, the text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.meta: dict[str, str] = {}
        self.links: dict[str, str] = {}
        self.words: list[str] = []
        self._anchor: dict | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "meta" and (attributes.get("property") or attributes.get("name")):
            self.meta[attributes.get("property") or attributes["name"]] = attributes.get("content", "")
        if tag == "link" and attributes.get("rel") == "canonical":
            self.meta["canonical"] = attributes["href"]
        if tag == "a":
            self._anchor = attributes

    def handle_data(self, data: str) -> None:
        self.words.append(data)
        if self._anchor is not None and data.strip():
            self.links[data.strip()] = self._anchor.get("href", "")
            self._anchor = None

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.words).split())

    def count(self, tag: str) -> int:
        return sum(1 for t, _ in self.tags if t == tag)


def feasible_record() -> dict:
    for seed in range(200):
        record = make_record(seed=seed, task_id=TASK, model="anthropic:claude-sonnet-5-5@high", end_reason="submitted",
                             episode_id=f"sharepage{seed:03d}", started="2026-11-29T10:00:00Z")
        if len(record["steps"]) >= 3 and record["final"]["grade"]["feasible"]:
            return record
    raise AssertionError("no suitable record")


def hostile_record() -> dict:
    """Every string a model, a provider, a task or a dataset could put in a record, hostile."""
    record = make_record(seed=5, task_id=TASK, end_reason="submitted", episode_id="hostile0001",
                         model=f"vllm:{SCRIPT}{RTL}gnp.exe", run='"><img src=x onerror=alert(1)>')
    record["task"]["difficulty"] = "busy<iframe src=//evil.example>"
    record["task"]["quay"] = f"24B\x00{RTL}"
    record["errors"] = [f"provider said {SCRIPT}\x00"]
    record["messages"].append({"role": "assistant", "stop": "end_turn", "tool_calls": [],
                               "reasoning": "<svg onload=alert(1)>" + "x" * 100_000,
                               "content": f"[click me](javascript:alert(1)) ![pixel](https://evil.example/p.png) "
                                          f"{SCRIPT} nul\x00here {RTL}reversed"})
    return record


def huge_record() -> dict:
    """A 24 MB record: 400 turns of 60,000 characters of thinking each (issue 27.5)."""
    record = make_record(seed=9, task_id=TASK, end_reason="submitted", episode_id="hugerecord01")
    record["messages"] += [{"role": "assistant", "stop": "end_turn", "tool_calls": [],
                            "reasoning": f"turn {n} " + "ponder " * 8_570, "content": f"answer {n}"}
                           for n in range(400)]
    return record


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    finished, hostile = feasible_record(), hostile_record()
    others = [*make_records(4, seed=41), huge_record()]
    with launched_app(tmp_path_factory.mktemp("share"), records=[finished, hostile, *others]) as app:
        # A baseline that waits two minutes before each step: it stays running while the tests read its page.
        run = app.ctx.registry.start(EpisodeRequest.of("baseline:hasty", TASK, baseline_pace_s=120.0), owner=OWNER)
        try:
            yield app, finished, hostile, run
        finally:
            app.ctx.registry.stop(run.episode_id, owner=OWNER)


def get(app, path: str, **headers: str) -> httpx.Response:
    return httpx.get(f"{app.url}{path}", headers={"User-Agent": "Slackbot-LinkExpanding 1.0", **headers}, timeout=60)


def max_age(response: httpx.Response) -> int:
    match = re.search(r"max-age=(\d+)", response.headers["cache-control"])
    return int(match.group(1)) if match else 0


def test_a_crawler_reads_the_rollout_and_its_open_graph_tags(world):
    app, record, _, _ = world
    episode_id, grade = record["episode_id"], record["final"]["grade"]
    response = get(app, f"r/{episode_id}")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    page = Page(response.text)
    url = f"{app.url}r/{episode_id}"
    assert page.meta["og:title"] == f"anthropic:claude-sonnet-5-5@high on {TASK}"
    description = page.meta["og:description"]
    for part in (f"reward {record['reward']:.4f}".rstrip("0"), "feasible", f"cost {grade['cost']:,}",
                 "optimum 87", f"{record['turns']} turns"):
        assert part in description, (part, description)
    assert page.meta["og:url"] == page.meta["canonical"] == url
    assert page.meta["og:image"] == page.meta["twitter:image"] == f"{url}.png"
    assert page.meta["twitter:card"] == "summary_large_image"
    # The header, the grade beside the optimum and the naive plan, the chart and the transcript, with no script.
    for part in ("anthropic:claude-sonnet-5-5@high", f"on {TASK}", "tier busy", "ended: submitted",
                 "2026-11-29 10:00 UTC", "optimum 87", "naive plan", "Transcript", "Thinking", "check_plan"):
        assert part in page.text, part
    assert page.count("script") == 0 and page.count("svg") >= 1 and page.count("h1") == 1
    assert sum(1 for tag, a in page.tags if tag == "rect" and a.get("fill") == SHIP_FILL) >= 5  # ships drawn
    assert page.count("details") >= len(record["steps"])  # thinking, calls and results folded
    assert page.links["Open in the arena"] == f"{app.url}?tab=browse&rollout={episode_id}"
    assert page.links["Raw JSON"] == f"{url}.json"


def test_a_finished_rollout_is_cached_for_long_with_its_image_and_record(world):
    app, record, _, _ = world
    episode_id = record["episode_id"]
    page = get(app, f"r/{episode_id}")
    # The page shows the flags visitors put on its steps: kept minutes, its ETag naming them (the image and the
    # record never change: kept for long).
    assert page.headers["etag"] and "public" in page.headers["cache-control"] and max_age(page) >= 300
    assert "default-src 'none'" in page.headers["content-security-policy"]  # no script may run, whatever it holds
    again = get(app, f"r/{episode_id}", **{"If-None-Match": page.headers["etag"]})
    assert again.status_code == 304 and again.content == b""

    image = get(app, f"r/{episode_id}.png")
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    assert image.headers["etag"] != page.headers["etag"] and max_age(image) >= 86400
    picture = Image.open(io.BytesIO(image.content))
    assert picture.format == "PNG" and picture.size == (1200, 630)
    colours = {rgb: n for n, rgb in picture.convert("RGB").getcolors(maxcolors=1 << 20)}
    assert colours.get((0x4C, 0x78, 0xA8), 0) > 5_000  # the final chart's ships, not a blank card
    assert get(app, f"r/{episode_id}.png", **{"If-None-Match": image.headers["etag"]}).status_code == 304

    raw = get(app, f"r/{episode_id}.json")
    assert raw.status_code == 200 and raw.json() == record and max_age(raw) >= 86400
    assert httpx.head(f"{app.url}r/{episode_id}").headers["etag"] == page.headers["etag"]
    # Drawn in the app's raster helper, not under the server's GIL.
    pages = app.server.state.share_pages
    assert pages.raster._process is not None and pages.raster._process.poll() is None and not pages.raster.in_process


def test_a_running_episode_says_so_and_is_never_cached(world):
    app, _, _, run = world
    assert not run.finished
    response = get(app, f"r/{run.episode_id}")
    assert response.status_code == 200 and response.headers["cache-control"] == "no-store"
    assert "etag" not in response.headers
    page = Page(response.text)
    assert "still running" in page.text and "baseline:hasty" in page.text and TASK in page.text
    assert page.links["Watch it live"] == f"{app.url}?episode={run.episode_id}"
    assert page.meta["og:title"].endswith("(still running)")
    image = get(app, f"r/{run.episode_id}.png")
    assert image.status_code == 200 and image.headers["cache-control"] == "no-store"
    assert Image.open(io.BytesIO(image.content)).size == (1200, 630)
    assert get(app, f"r/{run.episode_id}.json").status_code == 404  # no record yet


def test_every_link_to_no_rollout_gets_one_and_the_same_404(world):
    app, _, _, _ = world
    bodies = set()
    for name in ("nosuchrollout1", "nosuchrollout1.png", "x.json", "..%2F..%2Fetc%2Fpasswd", "a" * 65,
                 "%3Cscript%3E", "up-00000000", "a%00b", "a.png.png", "", "two/parts"):
        response = get(app, f"r/{name}")
        assert response.status_code == 404, name
        assert response.headers["cache-control"] == "no-store" and "etag" not in response.headers
        bodies.add(response.text)
    assert len(bodies) == 1
    body = bodies.pop()
    assert "No rollout here" in body and "nosuchrollout" not in body and "noindex" in body


def test_hostile_strings_stay_text_on_the_page_in_its_tags_and_on_its_image(world):
    app, _, hostile, _ = world
    response = get(app, f"r/{hostile['episode_id']}")
    assert response.status_code == 200
    page = Page(response.text)
    assert page.count("script") == page.count("iframe") == page.count("img") == 0
    for tag, attributes in page.tags:
        assert not any(name.startswith("on") for name in attributes), (tag, attributes)
        for name in ("href", "src"):
            assert not (attributes.get(name) or "").lower().lstrip().startswith(("javascript:", "data:")), attributes
    assert "\x00" not in response.text
    assert SCRIPT in page.text and "[click me](javascript:alert(1))" in page.text  # shown, as text
    assert re.search(r"\(\d\d,\d{3} more characters\)", page.text)  # the 100 KB thinking, cut to fit the page
    assert len(response.content) < 400_000
    # In the tags a crawler copies, the text is cut clean: no markup, no direction override, no NUL.
    for key in ("og:title", "og:description", "twitter:title"):
        assert RTL not in page.meta[key] and "\x00" not in page.meta[key]
    assert page.meta["og:title"].startswith(f"vllm:{SCRIPT}gnp.exe")
    # On the page the override is boxed in: the model name is isolated from the text around it.
    assert re.search(r"<h1><bdi>vllm:&lt;script&gt;", response.text)
    image = get(app, f"r/{hostile['episode_id']}.png")
    assert image.status_code == 200 and Image.open(io.BytesIO(image.content)).size == (1200, 630)


def test_the_apps_share_links_are_these_pages_built_on_the_public_host(world):
    app, record, _, _ = world
    run = EpisodeRun(record["episode_id"], record["model"], TASK, OWNER)
    run.saved = True
    run.finish(record)
    # Built on the address the app listens on, whatever address the visitor's request named.
    assert f"[share link]({app.url}r/{record['episode_id']})" in episode_markdown(app.ctx, run, _request())
    on_space = dataclasses.replace(app.ctx, settings=dataclasses.replace(app.ctx.settings, space_id="Team/Berth_Arena.v2",
                                                                        arena_url=None))
    assert on_space.rollout_link("abc") == "https://team-berth-arena-v2.hf.space/r/abc"
    assert on_space.share_link("episode=abc", "http://ignored/") == "https://team-berth-arena-v2.hf.space/?episode=abc"
    # One place decides the public address: ARENA_URL, else the Space's own host, else its id; none off a Space.
    assert public_base({"SPACE_HOST": "team-arena.hf.space,arena.example.org", "SPACE_ID": "x/y"}) == \
        "https://team-arena.hf.space"
    assert public_base({"ARENA_URL": "https://arena.example.org/", "SPACE_HOST": "team-arena.hf.space"}) == \
        "https://arena.example.org"
    assert public_base({"SPACE_ID": "Team/Berth_Arena.v2"}) == "https://team-berth-arena-v2.hf.space"
    assert public_base({}) is None
    # Else where the app listens, unless that is every interface: no address a visitor could use.
    assert public_base({}, listen=("127.0.0.1", 7860)) == "http://127.0.0.1:7860"
    assert public_base({}, listen=("::1", 8000)) == "http://[::1]:8000"
    assert public_base({}, listen=("0.0.0.0", 7860)) is None and public_base({}, listen=("::", 7860)) is None
    assert public_base({"ARENA_URL": "https://arena.example.org"}, listen=("127.0.0.1", 1)) == \
        "https://arena.example.org"


def _hrefs(page: Page) -> list[str]:
    return [a.get("href") or a.get("content") or "" for tag, a in page.tags
            if tag in ("a", "link") or (tag == "meta" and a.get("property") in ("og:url", "og:image"))]


def test_links_are_built_on_the_public_address_never_on_the_requests_host(world):
    """Issue 27, low: `Host: evil.example` names no link of the page, and every host gets the same page and ETag."""
    app, record, _, _ = world
    episode_id = record["episode_id"]
    plain = get(app, f"r/{episode_id}")
    forged = get(app, f"r/{episode_id}", Host="evil.example")
    assert forged.status_code == 200 and "evil.example" not in forged.text
    assert forged.content == plain.content and forged.headers["etag"] == plain.headers["etag"]
    assert "vary" not in forged.headers  # one page for every host: a shared cache may keep it
    page = Page(forged.text)
    assert page.meta["og:url"] == page.meta["canonical"] == f"{app.url}r/{episode_id}"
    links = _hrefs(page)
    assert len(links) >= 5 and all(link.startswith(app.url) for link in links), links
    missing = get(app, "r/nosuchrollout1", Host="evil.example")
    assert missing.status_code == 404 and "evil.example" not in missing.text
    # The share links the app's own pages hand out, too.
    assert app.ctx.rollout_link(episode_id, "http://evil.example/") == f"{app.url}r/{episode_id}"


def test_without_a_public_address_pages_name_the_visitors_host_and_say_vary(world, monkeypatch):
    """An app listening on every interface knows no address: its links follow the visitor's, with `Vary: Host`."""
    app, record, _, _ = world
    monkeypatch.setattr(app.ctx.settings, "arena_url", None)
    response = get(app, f"r/{record['episode_id']}", Host="arena.lan:7860")
    assert response.headers["vary"] == "Host"
    assert Page(response.text).meta["og:url"] == f"http://arena.lan:7860/r/{record['episode_id']}"
    assert get(app, "r/nosuchrollout1", Host="arena.lan:7860").headers["vary"] == "Host"


def test_a_huge_record_gets_a_shortened_page_that_links_its_raw_json(world):
    """Issue 27.5: a 24 MB record's page is a few hundred KB: its transcript is cut, pointing to the whole record."""
    app, _, _, _ = world
    response = get(app, "r/hugerecord01")
    assert response.status_code == 200
    assert len(response.content) < 1.5 * TRANSCRIPT_CHARS, len(response.content)
    page = Page(response.text)
    assert "This transcript is too long to show whole" in page.text and "turn 0 ponder" in page.text
    assert re.search(r"\d{3} more messages are left out here", page.text)
    assert page.links["the raw JSON"] == page.links["Raw JSON"] == f"{app.url}r/hugerecord01.json"
    raw = get(app, "r/hugerecord01.json")
    assert len(raw.content) > 24_000_000 and raw.json()["messages"][-1]["content"] == "answer 399"


def test_a_record_of_many_tiny_messages_is_shortened_too():
    """A dataset's record is anyone's: twenty thousand one-letter messages were a 4 MB page, each message's markup
    counted for nothing against the transcript's bound."""
    record = make_record(seed=10, task_id=TASK, end_reason="submitted", episode_id="manymessages1")
    record["messages"] += [{"role": "assistant", "stop": "end_turn", "tool_calls": [], "reasoning": "r",
                            "content": "a"} for _ in range(20_000)]
    links = PageLinks(page="https://arena.example/r/manymessages1", image="https://arena.example/r/m.png",
                      arena="https://arena.example/", home="https://arena.example/",
                      raw="https://arena.example/r/manymessages1.json")
    page = rollout_page(record, {}, task_for(TASK, None), links)
    assert len(page) < 1.5 * TRANSCRIPT_CHARS, len(page)
    assert re.search(r"\d{2},\d{3} more messages are left out here", page)


def test_kept_pages_are_bounded_in_bytes_and_keyed_without_the_host(world):
    """Issue 27.5: the page cache holds at most its bytes, and one copy of a page however many hosts ask."""
    app, record, _, _ = world
    pages = app.server.state.share_pages
    for host in ("a.example", "b.example", "c.example", "d.example"):
        assert get(app, f"r/{record['episode_id']}", Host=host).status_code == 200
    kept = [key for key in pages.pages._items if key[0] == record["episode_id"] and "arena.lan" not in key[2]]
    # (the test above asked as arena.lan); the last part names the flags the page shows, none here
    assert kept == [(record["episode_id"], "page", app.url.rstrip("/"), "")]
    lru = _Lru(64, max_bytes=1_000)
    for n in range(10):
        lru.put(n, b"x" * 300, 300)
    lru.put("huge", b"x" * 2_000, 2_000)
    assert lru.bytes <= 1_000 and list(lru._items) == [7, 8, 9] and lru.get("huge") is None


def test_a_kept_page_is_answered_without_waiting_on_the_pace(world):
    """Issue 27.5: under a flood the pace makes renders wait; a page already kept costs nothing and waits for none."""
    app, record, _, _ = world
    pages = app.server.state.share_pages
    for path in (f"r/{record['episode_id']}", f"r/{record['episode_id']}.png"):
        first = get(app, path)
        pages.pace._free_at = time.monotonic() + 30  # the pace owes 30 s of rest, as after a flood of renders
        try:
            started = time.monotonic()
            again = get(app, path)
            assert time.monotonic() - started < 3 and again.content == first.content
            assert get(app, path, **{"If-None-Match": first.headers["etag"]}).status_code == 304
            assert time.monotonic() - started < 6
        finally:
            pages.pace._free_at = 0.0


def _request():
    """The part of a gr.Request that links read: the address the visitor used."""
    from types import SimpleNamespace

    return SimpleNamespace(request=SimpleNamespace(base_url="http://host:1/"))
