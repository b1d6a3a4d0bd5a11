r"""Untrusted text on a Markdown page: every piece of model output, tool output, provider error or ship name goes
through `escape_md`, `escape_cell` or `code_block` before it reaches the page, so it shows as text and never runs
as HTML (the Chatbot sanitises too; this is the first line, not the only one).

A link in untrusted text is shown as text, not followed, unless it points at the arena itself (its public address,
rollouts.links, or a path on it): a model's `https://evil.example`, `www.evil.example`, `[x](url)`, `[x]: url` or
`name@host` would otherwise be a link on the arena's own page, in the Chatbot (whose Markdown makes bare addresses
links) and on the share page alike. A backslash before one character of each (`:\//`, `www\.`, `]\(`, `]\:`,
`\@`) keeps the text as it reads and makes no link; inside a code span the backslash shows.

Pages of our own (the share page) turn that Markdown into HTML with `markdown_html`, a second line of its own: raw
HTML is never passed through (it shows as text), images are never loaded, links keep only the schemes
markdown-it allows (no `javascript:`, `vbscript:`, `file:` or `data:`) and carry `rel="nofollow ugc noopener"`.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from markdown_it import MarkdownIt

from rollouts.links import public_base

_BACKTICK_RUN = re.compile(r"`+")
LINK_TAIL = 8   # streamed characters remembered: the longest start of a link is `https://`
# What makes a link in CommonMark or the Chatbot's GFM (which links an address anywhere, even inside a word). One
# character class first, the rest looked at only after one of its characters: a hundred times faster on a long
# text than five alternatives tried at every position (a 24 MB record's transcript: 0.06 s, not 7 s).
_LINK_MAKERS = re.compile(r"[:wW\]@](?:(?P<url>(?<=:)//)|(?P<www>(?<=[wW])[wW]{2}\.)|(?P<inline>(?<=\])\()"
                          r"|(?P<ref>(?<=\]):)|(?P<at>(?<=@)))")
_SCHEMES = ("http", "https", "ftp")  # the ones the Chatbot links bare


def escape_md(text: Any, *, before: str = "", whole: bool = True) -> str:
    """Untrusted text for a Markdown page: HTML tags and entities show literally, remote images do not load, links
    show as text unless they point at the arena (see the module's docstring).

    Markdown formatting (tables, lists, emphasis) survives, which keeps situation texts readable. For text that
    streams in pieces, `before` is the end of what came before (a link may straddle two pieces) and `whole` False
    says the text may go on (an address cut at its end is not trusted to be the arena's).
    """
    text = _inert_links(str(text), before, whole)
    # `![` would load a remote image (a tracking pixel); a backslash keeps the text and drops the image.
    out = html.escape(text, quote=False).replace("![", "!\\[")
    return "\\" + out if before.endswith("!") and out.startswith("[") else out


def _inert_links(text: str, before: str, whole: bool) -> str:
    """`text` with a backslash before one character of every link it would make that does not point at the arena
    (`before`: the text just before it, already written)."""
    joined, offset = before + text, len(before)
    marks = []
    for kind, target, spot in _links(joined, offset):
        if kind in ("url", "inline") and _own(joined, target, whole, relative=kind == "inline"):
            continue
        if spot >= offset:
            marks.append(spot - offset)
    for spot in reversed(marks):
        text = f"{text[:spot]}\\{text[spot:]}"
    return text


def _links(joined: str, offset: int) -> Iterator[tuple[str, int, int]]:
    """Each link `joined` would make: its kind, where its target starts (a bare address's scheme, an inline link's
    first character after `(`) and the character a backslash goes before (one at or after `offset` if it can)."""
    for match in _LINK_MAKERS.finditer(joined):
        kind, at = match.lastgroup or "", match.start()
        if kind == "url":
            scheme = next((len(s) for s in _SCHEMES[::-1] if joined[max(0, at - len(s)):at].lower() == s), 0)
            if scheme:  # the first `/` of `://`, else the second one if the first was written already
                yield kind, at - scheme, at + 1 if at + 1 >= offset else at + 2
        elif kind == "at":
            if at and (joined[at - 1].isalnum() or joined[at - 1] in "._+-"):
                yield kind, at, at
        else:
            yield kind, match.end(), match.end() - 1


def _own(joined: str, target: int, whole: bool, *, relative: bool) -> bool:
    """Whether the link whose target starts at `target` is the arena's: its public address and then a path, a
    query, a fragment, the end of the link or a space (or the end of a whole text), or with `relative` a path on
    this host (`/x`, never `//host` or `/\\host`, which browsers read as another host)."""
    if relative and joined[target:target + 1] == "/":
        return joined[target + 1:target + 2] not in ("/", "\\", "")
    home = public_base()
    if not home or joined[target:target + len(home)].lower() != home.lower():
        return False
    after = joined[target + len(home):target + len(home) + 1]
    return (after in "/?#)" or after.isspace()) if after else whole


class StreamEscaper:
    """`escape_md` for text that streams in chunks: it remembers the end of what it escaped, so that `!` + `[` or
    a link cut across two chunks is caught, and holds back a link that may yet turn out to be the arena's
    (`https://team-arena.hf.sp`...) until the next chunk decides it or `flush` ends the text."""

    def __init__(self) -> None:
        self.before = ""   # the end of what was written, raw
        self.held = ""     # raw text not written yet

    def feed(self, chunk: str) -> str:
        text = self.held + chunk
        cut = _undecided_from(self.before, text)
        self.held = text[cut:]
        return self._write(text[:cut], whole=False)

    def flush(self) -> str:
        """What was held back, now that the text has ended."""
        text, self.held = self.held, ""
        return self._write(text, whole=True)

    def _write(self, text: str, *, whole: bool) -> str:
        out = escape_md(text, before=self.before, whole=whole)
        self.before = (self.before + text)[-LINK_TAIL:]
        return out


def _undecided_from(before: str, text: str) -> int:
    """Where in `text` a link starts that may still become the arena's as more text comes (len(text): none)."""
    home = (public_base() or "").lower()
    cut = len(text)
    if not home:
        return cut
    joined, offset = before + text, len(before)
    for kind, target, spot in _links(joined, offset):
        if kind not in ("url", "inline"):
            continue
        seen = joined[target:target + len(home) + 1].lower()
        if home.startswith(seen) or seen == home or (kind == "inline" and seen in ("", "/")):
            cut = min(cut, max(0, (target if kind == "url" else spot) - offset))
    return cut


def escape_cell(text: Any) -> str:
    """Untrusted text on one line of a table or a list item."""
    return escape_md(" ".join(str(text).split())).replace("|", "\\|")


def code_block(text: str, lang: str = "") -> str:
    """A fenced code block that the text cannot close early: the fence is longer than any backtick run inside."""
    longest = max((len(m) for m in _BACKTICK_RUN.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def compact_json(value: Any) -> str:
    """JSON text that stays short on screen: one line per key, and one line per item of a list of objects."""
    if not isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False)
    parts = []
    for key, item in value.items():
        head = json.dumps(str(key), ensure_ascii=False)
        if isinstance(item, list) and item and all(isinstance(x, Mapping | list) for x in item):
            rows = ",\n  ".join(json.dumps(x, ensure_ascii=False) for x in item)
            parts.append(f"{head}: [\n  {rows}\n ]")
        else:
            parts.append(f"{head}: {json.dumps(item, ensure_ascii=False)}")
    return "{\n " + ",\n ".join(parts) + "\n}" if parts else "{}"


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… ({len(text) - limit:,} more characters)"


def fmt_num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        text = f"{value:.{digits}f}".rstrip("0")
        return text + "0" if text.endswith(".") else text
    return escape_cell(value)


def _page_markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).disable("image")

    def link_open(renderer: Any, tokens: list, idx: int, options: Any, env: Any) -> str:
        # Links in model output are the writer's, not the arena's: no ranking credit, no window handle.
        tokens[idx].attrSet("rel", "nofollow ugc noopener noreferrer")
        return renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("link_open", link_open)
    return md


_PAGE_MD = _page_markdown()


def markdown_html(text: str, *, inline: bool = False, demote: int = 0) -> str:
    """Markdown (escaped by the functions above) as HTML for a page of our own; `inline`: no paragraph around it;
    `demote`: headings that many levels lower (a quoted text's `#` must not read as the page's own title)."""
    if inline:
        return _PAGE_MD.renderInline(text)
    tokens = _PAGE_MD.parse(text)
    for token in tokens:
        if demote and token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + demote)}"
    return _PAGE_MD.renderer.render(tokens, _PAGE_MD.options, {})
