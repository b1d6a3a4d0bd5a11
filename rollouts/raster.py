"""SVG to PNG in this process: resvg (the `resvg-py` wheel: no browser, no network, no system library) with the
bundled Liberation Sans (rollouts/fonts/, SIL OFL 1.1) and no system font, so a picture is the same everywhere.

It sits here, low, because both sides draw pictures: the board's frontier (rollouts.board_plot) is written as a PNG
by `python -m agent board --plot` (batch, which cannot import the viewer) and served by the app as `/board.png`,
and the share card of a rollout (viewer/chart/card.py) by the app. The app's server never calls this directly: it
draws through viewer/chart/raster.py's helper process (resvg holds the GIL while it draws), which calls this.
"""

from __future__ import annotations

from pathlib import Path

import resvg_py

FONT_DIR = Path(__file__).with_name("fonts")
FONT_FILES = [str(FONT_DIR / "LiberationSans-Regular.ttf"), str(FONT_DIR / "LiberationSans-Bold.ttf")]
FONT_FAMILY = "Liberation Sans"


def svg_png(svg: str) -> bytes:
    """`svg` as a PNG, in this process (it holds the GIL meanwhile)."""
    return bytes(resvg_py.svg_to_bytes(svg_string=svg, font_files=FONT_FILES, skip_system_fonts=True,
                                       font_family=FONT_FAMILY, sans_serif_family=FONT_FAMILY))
