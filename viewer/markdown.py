"""Untrusted text on a Markdown page: every piece of model output, tool output, provider error or ship name goes
through `escape_md`, `escape_cell` or `code_block` before it reaches the page, so it shows as text and never runs
as HTML (the Chatbot sanitises too; this is the first line, not the only one).

Pages of our own (the share page) turn that Markdown into HTML with `markdown_html`, a second line of its own: raw
HTML is never passed through (it shows as text), images are never loaded, links keep only the schemes
markdown-it allows (no `javascript:`, `vbscript:`, `file:` or `data:`) and carry `rel="nofollow ugc noopener"`.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from typing import Any

from markdown_it import MarkdownIt

_BACKTICK_RUN = re.compile(r"`+")


def escape_md(text: Any) -> str:
    """Untrusted text for a Markdown page: HTML tags and entities show literally, remote images do not load.

    Markdown formatting (tables, lists, emphasis) survives, which keeps situation texts readable.
    """
    # `![` would load a remote image (a tracking pixel); a backslash keeps the text and drops the image.
    return html.escape(str(text), quote=False).replace("![", "!\\[")


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
