"""A berth chart as plain data: the scene. The layers (viewer/chart/layers.py) and the assembler (viewer/chart.py)
build it once; two outputs draw it: the plotly figure the app shows (viewer/chart/figure.py) and an SVG document
for pages without JavaScript and for the share image (viewer/chart/svg.py). One scene, two outputs: a rule about
what the chart shows lives in the layers, never in an output.

Coordinates are data units (hours across, quay sections up). Texts are plain text, never markup: whatever came
from a task, a plan or a record went through `clean` where it entered the scene, and each output escapes every
text for its own markup in one place (`chart_plotly.text`, `chart_svg.text`), dropping `UNSAFE` characters again,
so a scene built by hand cannot smuggle markup either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# Characters no chart shows: C0/C1 controls (NUL breaks XML), bidirectional overrides and isolates (they would
# reorder the text after them, e.g. a model name written backwards), zero-width and invisible formatting (spoofing),
# Unicode tags, byte-order marks, lone surrogates (no UTF-8 for them) and the noncharacters XML forbids.
UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\u200e\u200f\u202a-\u202e\u2060-\u206f"
                    "\ufeff\ufff9-\ufffb\ufffe\uffff\ud800-\udfff\U000e0000-\U000e007f]")
_SPACES = re.compile(r"\s+")  # newlines, tabs and line separators too
# The palette and the legend names every output uses.
SHIP_FILL = "#4C78A8"
MOVED_FILL = "#F58518"       # changed since the previous draft (or differs from the other plan in a compare)
VIOLATION_LINE = "#D62728"
CLOSED_FILL = "#B8B8B8"
ALONGSIDE_FILL = "#3A3A3A"
GHOST_LINE = "rgba(60, 60, 60, 0.55)"
WIND_FILL = "rgba(90, 150, 220, 0.16)"
OUTAGE_FILL = "rgba(148, 103, 189, 0.55)"
CRANE_LINE = "#5b3a8c"
IN_USE_FILL = "rgba(76,120,168,0.15)"
PUBLISHED_NAME, MOVED_NAME = "published position", "moved from it"
AVAILABLE_NAME, IN_USE_NAME, OVER_NAME = "cranes available", "cranes in use", "more cranes than available"

NAME_CHARS = 60      # a ship name, a block label: longer ones are cut (the chart has no room for more)
TITLE_CHARS = 160    # a chart title with a model name in it
TIP_CHARS = 300      # one line of a hover, e.g. a rule the checker quotes


def clean(text: Any, limit: int = NAME_CHARS) -> str:
    """Untrusted text made fit for a chart: unsafe characters dropped, whitespace runs made one space, and at
    most `limit` characters (cut with "…")."""
    text = _SPACES.sub(" ", UNSAFE.sub("", str(text))).strip()
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


# -- hovers --------------------------------------------------------------------------------------------------------

Span = tuple[str, str]       # (style, text): style "" plain, "b" bold, "i" italic
TipLine = tuple[Span, ...]
Tip = tuple[TipLine, ...]    # what a hover (plotly) or a tooltip (SVG <title>) shows, line by line


def tip(*lines: str | TipLine) -> Tip:
    """A hover from lines: a str is one plain line, a tuple of spans keeps its styles."""
    return tuple(((("", line),) if isinstance(line, str) else line) for line in lines)


def tip_text(value: Tip) -> str:
    """The hover as plain text, one line per line."""
    return "\n".join("".join(text for _, text in line) for line in value)


# -- what a panel holds --------------------------------------------------------------------------------------------

@dataclass(slots=True)
class Box:
    """A rectangle: a ship (`ship:3`), its wind-waiting tail (`tail:3`), a closed stretch (`closed:1`), a ship
    already alongside (`alongside:0`), a wind window (`wind:0`) or a crane outage (`outage:0`).

    `layer` is where it stacks: "below" the grid, "between" the grid and the traces, "above" everything."""

    name: str
    x0: float
    x1: float
    y0: float
    y1: float
    fill: str
    layer: str
    edge: str | None = None          # outline colour; None: no outline
    edge_width: float = 0
    dash: str = ""                   # "" solid, "dot"
    opacity: float = 1.0
    label: str = ""                  # written inside (blocks; ships carry theirs as a Label)
    label_colour: str = "#333"
    label_vertical: bool = False     # run along the quay (a thin block)
    tip: Tip = ()


@dataclass(slots=True)
class Label:
    """A point that carries a hover and maybe a text drawn there: a ship's label at its centre (`group` "ships",
    `key` its index), or the hover spot of a block (`group` "blocks", no text)."""

    group: str
    key: int
    x: float
    y: float
    text: str
    tip: Tip
    colour: str = "white"


@dataclass(slots=True)
class Move:
    """A ship the plan moved off its published place: the outline where it was published and an arrow from
    there to where it is now."""

    ship: int
    ghost: tuple[float, float, float, float]    # x0, x1, y0, y1
    start: tuple[float, float]
    end: tuple[float, float]


@dataclass(slots=True)
class MarkSet:
    """One kind of mark (late, priority, emergency), drawn as `symbol` in `colour` at each point, with a hover."""

    kind: str
    name: str
    symbol: str                       # plotly's symbol names: "triangle-left", "star", "diamond"
    colour: str
    points: list[tuple[float, float, Tip]] = field(default_factory=list)


@dataclass(slots=True)
class Note:
    """A label pinned to the top ("top", one row per note) or the bottom ("bottom") edge of the quay panel."""

    name: str
    x: float
    text: str
    icon: str                         # an emoji the browser draws; outputs without colour fonts leave it out
    colour: str
    at: str
    row: int = 0


@dataclass(slots=True)
class Panel:
    """One quay panel: everything drawn over the sections and hours of one plan."""

    boxes: list[Box] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    marks: list[MarkSet] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    subtitle: str = ""
    x_extent: list[float] = field(default_factory=list)
    legend: set[str] = field(default_factory=set)     # the legend entries this panel needs

    def rect(self, name: str, x0: float, x1: float, y0: float, y1: float, **style: Any) -> None:
        self.boxes.append(Box(name, x0, x1, y0, y1, **style))

    def add_label(self, group: str, key: int, x: float, y: float, text: str, hover: Tip) -> None:
        self.labels.append(Label(group, key, x, y, text, hover))

    def note(self, name: str, x: float, text: str, icon: str, colour: str, at: str, row: int = 0) -> None:
        self.notes.append(Note(name, x, text, icon, colour, at, row))

    def ships(self) -> list[Box]:
        """The ship boxes (their wind-waiting tails aside)."""
        return [b for b in self.boxes if b.name.startswith("ship:")]


@dataclass(slots=True)
class Cranes:
    """Cranes in use and cranes available, hour by hour from hour 0 (crane-rule tasks)."""

    use: list[int]
    available: list[int]

    @property
    def over(self) -> list[int]:
        return [h for h, (u, a) in enumerate(zip(self.use, self.available, strict=True)) if u > a]


@dataclass(slots=True)
class LegendItem:
    """One legend entry. `kind`: "box" (a filled square), "ghost" (a dashed outline), "arrow", "mark" (`symbol`),
    "line" (a crane count, `dash` "dot" or ""), "dot" (hours over the crane limit)."""

    label: str
    kind: str
    fill: str
    edge: str = "white"
    symbol: str = ""
    dash: str = ""


@dataclass(slots=True)
class Axis:
    """The hour axis (`ticks` labelled `labels`) or the section axis (a tick every `dtick`)."""

    lo: float
    hi: float
    title: str
    ticks: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    dtick: int = 1


@dataclass(slots=True)
class Scene:
    """A whole chart: one panel (a plan) or two stacked on one hour axis (a compare), maybe the crane panel under
    the quay, the legend and a title. `plot_width` x `plot_height` is the plot area (px) the labels were fitted to;
    `height` is the figure height the app asks plotly for."""

    title: str
    x: Axis
    y: Axis
    panels: list[Panel]
    legend: list[LegendItem]
    cranes: Cranes | None = None
    height: int = 460
    plot_width: int = 700
    plot_height: int = 330
