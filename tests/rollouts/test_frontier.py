"""The cost x reward frontier (rollouts.frontier) and its SVG (rollouts.board_plot): the Pareto computation
against brute force, the points equal to the board's figures, free players at $0, the document inert."""

from __future__ import annotations

import itertools
import random
import xml.etree.ElementTree as ET

from rollouts.board_plot import HEIGHT, WIDTH, frontier_svg
from rollouts.frontier import frontier, pareto
from rollouts.raster import svg_png
from testkit.boards import board_of, by_model


def brute_force(points: list[tuple[float, float]]) -> list[bool]:
    """On the frontier: no other point as cheap or cheaper and as good or better, one of them strictly."""
    return [not any(c <= cost and v >= value and (c < cost or v > value) for j, (c, v) in enumerate(points) if j != i)
            for i, (cost, value) in enumerate(points)]


def test_pareto_matches_brute_force_with_ties():
    rng = random.Random(7)
    for _ in range(400):
        size = rng.randint(0, 14)
        # few distinct values, so equal costs, equal rewards and equal points are common
        points = [(float(rng.randint(0, 4)), float(rng.randint(0, 4))) for _ in range(size)]
        assert pareto(points) == brute_force(points), points


def test_pareto_on_every_small_grid():
    for points in itertools.product([(0.0, 1.0), (1.0, 1.0), (1.0, 2.0), (0.0, 0.0), (2.0, 3.0)], repeat=3):
        assert pareto(list(points)) == brute_force(list(points))


def rows() -> list[dict]:
    out = []
    for model, usd, rewards in (("openai:big", 0.5, [0.9, 0.8, 0.85]), ("openai:small", 0.01, [0.6, 0.7, 0.65]),
                                ("openai:mid", 0.2, [0.5, 0.55, 0.6]), ("baseline:greedy", None, [0.5, 0.5, 0.5]),
                                ("human", None, [0.95, 0.95, 0.95]), ("vllm:local", None, [0.7, 0.7, 0.7])):
        out += [{"model": model, "task_id": f"t{i}", "reward": r, "usd": usd, "feasible": True, "submitted": True}
                for i, r in enumerate(rewards)]
    return out


def test_points_are_the_boards_figures():
    lines = board_of(rows())
    figure, line = frontier(lines), by_model(lines)
    assert figure.unpriced == ["vllm:local"]
    for point in figure.points:
        assert point.reward == line[point.model]["mean_reward"]
        assert (point.low, point.high) == (line[point.model]["ci_low"], line[point.model]["ci_high"])
        assert point.usd == (0.0 if point.free else line[point.model]["usd_per_episode"])
    assert {p.model for p in figure.points if p.provisional} == {p.model for p in figure.points}  # 3 tasks each
    on = {p.model: p.on_frontier for p in figure.points}
    # the person is drawn, never on the frontier; mid is beaten on both by small; greedy is the free floor
    assert on == {"human": False, "baseline:greedy": True, "openai:small": True, "openai:mid": False,
                  "openai:big": True}
    assert [p.model for p in figure.frontier] == ["baseline:greedy", "openai:small", "openai:big"]


def test_svg_parses_names_every_model_and_rasterises():
    figure = frontier(board_of(rows()))
    svg = frontier_svg(figure, subtitle="<script>alert(1)</script>")
    root = ET.fromstring(svg)
    assert root.get("width") == str(WIDTH) and root.get("height") == str(HEIGHT)
    words = "".join(root.itertext())
    for model in ("openai:big", "openai:small", "openai:mid", "baseline:greedy", "human", "vllm:local"):
        assert model in words
    assert "$0" in words and "<script" not in svg and not root.findall(".//{http://www.w3.org/2000/svg}script")
    png = svg_png(svg)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (WIDTH, HEIGHT)
