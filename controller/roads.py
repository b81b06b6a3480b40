"""Scoreboard roads of a shoe (docs/events.md, the ``roads`` event) and an
SVG drawing of them.

Input: the shoe's settled coups in order, each ``"B"``, ``"P"`` or ``"T"``
(or ``"banker"``/``"player"``/``"tie"``, or a mapping such as a
``coup.result`` payload with ``winner``, ``player_pair``, ``banker_pair``).

Output (:func:`build_roads`), JSON-ready; every road is a list of columns,
each column a list of cells, oldest first:

``bead_plate``
    Every coup, ties included, filled column by column, six to a column:
    ``{"w": "B" | "P" | "T", "pp": bool, "bp": bool}`` (``pp``/``bp``:
    Player / Banker pair).
``big_road``
    The *logical* columns: a new column each time the winner changes
    between Banker and Player; ties do not make a cell but are counted on
    the cell before them: ``{"w": "B" | "P", "ties": int, "pp": bool,
    "bp": bool}`` (pairs of the coup that made the cell). Ties before the
    first Banker or Player win are counted on that first cell when it
    comes, so the big road is empty while a shoe has had only ties (a
    display can ask :func:`build_roads` for scoreboards' opening-tie cell).
``big_eye_boy``, ``small_road``, ``cockroach_pig``
    The derived roads for k = 1, 2, 3, as logical columns of ``"red"`` /
    ``"blue"`` (a new column when the colour changes). Each big-road cell
    at logical column n, row m (1-based, ties ignored) adds one entry:

    * m = 1: red when columns n-1 and n-1-k have the same length, else blue;
    * m >= 2: red when column n-k has at least m cells or fewer than m-1
      ("it repeats, or has long stopped"), blue when it has exactly m-1.

    So road k starts with the big road's cell at column k+1 row 2, or, if
    column k+1 has a single cell, at column k+2 row 1: the first cell whose
    comparison columns all exist.

Columns are logical, not what a 6-row board shows: a column longer than
six, a *dragon tail*, is drawn turning right along the bottom row.
:func:`layout` gives those board positions (the SVG uses it, and a display
can too): each logical column starts at the top of the board column right
after the previous column's start, goes down while the cell below is free
and on the board, and otherwise turns right and keeps going right (so a
column that meets an earlier tail turns right above it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, cast
from xml.sax.saxutils import escape

from controller.event_types import BeadCell, BigRoadCell, Colour

__all__ = ["Placed", "RoadCoup", "Roads", "build_roads", "coup_of", "derived_entry", "layout", "render_svg"]

Winner = Literal["B", "P", "T"]
_WINNER_NAMES: dict[str, Winner] = {
    "B": "B",
    "P": "P",
    "T": "T",
    "BANKER": "B",
    "PLAYER": "P",
    "TIE": "T",
}
ROWS = 6
DERIVED = (("big_eye_boy", 1), ("small_road", 2), ("cockroach_pig", 3))


@dataclass(frozen=True, slots=True)
class RoadCoup:
    winner: Winner
    player_pair: bool = False
    banker_pair: bool = False


class Roads(TypedDict):
    """The ``roads`` event's payload (cells: ``controller.event_types``)."""

    bead_plate: list[list[BeadCell]]
    big_road: list[list[BigRoadCell]]
    big_eye_boy: list[list[Colour]]
    small_road: list[list[Colour]]
    cockroach_pig: list[list[Colour]]


def coup_of(item: str | Mapping[str, Any] | RoadCoup) -> RoadCoup:
    """One coup from ``"B"``/``"banker"``/…, a mapping with ``winner`` (and
    optional ``player_pair``/``banker_pair``), or a RoadCoup."""
    if isinstance(item, RoadCoup):
        return item
    return RoadCoup(*_triple(item))


def _triple(item: str | Mapping[str, Any] | RoadCoup) -> tuple[Winner, bool, bool]:
    """``coup_of``'s fields, without building a RoadCoup (``build_roads``)."""
    if isinstance(item, RoadCoup):
        return item.winner, item.player_pair, item.banker_pair
    if isinstance(item, str):
        name, pp, bp = item, False, False
    else:
        name = str(item.get("winner", ""))
        pp = bool(item.get("player_pair", False))
        bp = bool(item.get("banker_pair", False))
    winner = _WINNER_NAMES.get(name.strip().upper())
    if winner is None:
        raise ValueError(f"not a coup winner: {name!r} (B, P, T, banker, player or tie)")
    return winner, pp, bp


def _streaks(values: Sequence[Colour]) -> list[list[Colour]]:
    """Consecutive equal values as columns."""
    cols: list[list[Colour]] = []
    for v in values:
        if cols and cols[-1][-1] == v:
            cols[-1].append(v)
        else:
            cols.append([v])
    return cols


def derived_entry(n: int, m: int, k: int) -> bool:
    """Whether the big-road cell at column n, row m (1-based, ties ignored)
    adds an entry to derived road k: only once every column it compares
    exists. A display that links each derived entry to the coup that made
    it walks the big road's cells in order with this."""
    return n - 1 - k >= 1 if m == 1 else n - k >= 1


def build_roads(coups: Iterable[str | Mapping[str, Any] | RoadCoup], *, opening_tie: bool = False) -> Roads:
    """The five roads of a shoe's coups (shape: module docstring).

    ``opening_tie``: while the shoe has had only ties, the big road shows
    them as scoreboards do, in its first cell ``{"w": "T", "ties": n}``,
    rather than staying empty; the first Banker or Player result then takes
    that cell with the count (as without it). The ``roads`` event keeps the
    documented shape (docs/events.md: cells are ``B``/``P``) and does not use it."""
    return _roads_of([_triple(c) for c in coups], opening_tie=opening_tie)


def _roads_of(seq: Sequence[tuple[Winner, bool, bool]], *, opening_tie: bool = False) -> Roads:
    """:func:`build_roads` of coups as ``(winner, player pair, banker
    pair)``. One pass over the coups: a derived road's entry reads
    only columns before the current one, whose lengths no later cell
    changes, so the lengths so far need no copy per cell."""
    cells: list[BeadCell] = [{"w": w, "pp": pp, "bp": bp} for w, pp, bp in seq]
    bead = [cells[i : i + ROWS] for i in range(0, len(cells), ROWS)]

    big: list[list[BigRoadCell]] = []
    pending_ties = 0
    lengths: list[int] = []  # of the big road's columns
    derived: list[list[Colour]] = [[], [], []]  # the colours of k = 1, 2, 3, in order
    last: BigRoadCell | None = None
    for w, pp, bp in seq:
        if w == "T":
            if last is not None:
                last["ties"] += 1
            else:
                pending_ties += 1
            continue
        last = {"w": w, "ties": pending_ties, "pp": pp, "bp": bp}
        pending_ties = 0
        if big and big[-1][0]["w"] == w:
            big[-1].append(last)
            lengths[-1] += 1
        else:
            big.append([last])
            lengths.append(1)
        # the cell at column n, row m (1-based): its entry in each derived
        # road whose comparison columns exist
        n, m = len(lengths), lengths[-1]
        for k in (1, 2, 3):
            if not derived_entry(n, m, k):
                continue
            if m == 1:
                derived[k - 1].append("red" if lengths[n - 2] == lengths[n - 2 - k] else "blue")
            else:
                derived[k - 1].append("blue" if lengths[n - k - 1] == m - 1 else "red")

    if opening_tie and not big and pending_ties:
        ties = [(pp, bp) for w, pp, bp in seq if w == "T"]
        first = {
            "w": "T",
            "ties": pending_ties,
            "pp": any(pp for pp, _ in ties),
            "bp": any(bp for _, bp in ties),
        }
        # a display's cell (the ``roads`` event never asks for it): "T" is
        # outside the event's big-road cell
        big.append([cast(BigRoadCell, first)])
    return Roads(
        bead_plate=bead,
        big_road=big,
        big_eye_boy=_streaks(derived[0]),
        small_road=_streaks(derived[1]),
        cockroach_pig=_streaks(derived[2]),
    )


@dataclass(frozen=True, slots=True)
class Placed:
    """A cell of a logical column at its board position (0-based)."""

    x: int
    y: int
    column: int  # logical column index
    cell: Any


def layout(columns: Sequence[Sequence[Any]], rows: int = ROWS) -> list[Placed]:
    """Board positions of logical columns on a ``rows``-row board, dragon
    tails turning right (rules: module docstring)."""
    taken: set[tuple[int, int]] = set()
    out: list[Placed] = []
    start = -1
    for i, col in enumerate(columns):
        x = start + 1
        while (x, 0) in taken:  # only after a tail that turned right on the top row
            x += 1
        start = x
        y = 0
        turned = False
        for j, cell in enumerate(col):
            if j:
                if not turned and y + 1 < rows and (x, y + 1) not in taken:
                    y += 1
                else:
                    turned = True
                    x += 1
            taken.add((x, y))
            out.append(Placed(x, y, i, cell))
    return out


# --- text, for a terminal ---------------------------------------------------------------

_ANSI = {"B": "\x1b[31m", "P": "\x1b[34m", "T": "\x1b[32m", "red": "\x1b[31m", "blue": "\x1b[34m"}
_RESET = "\x1b[0m"
#: The derived roads' cells as letters: r (red), b (blue).
_DERIVED_MARK = {"red": "r", "blue": "b"}


def render_text(roads: Roads, title: str = "", *, colour: bool = False) -> str:
    """The roads drawn as a person reads them at a terminal, each on its
    6-row board as a scoreboard lays it out (dragon tails turning right):
    the bead plate (B, P, T, in dealing order down the columns), the big
    road (B or P per coup, a tie as the count of ties after it), and the
    three derived roads (r red, b blue). ``colour``: ANSI colours, red
    Banker and blue Player as on a scoreboard."""

    def paint(key: str, text: str) -> str:
        return f"{_ANSI[key]}{text}{_RESET}" if colour and key in _ANSI else text

    def board(placed: Sequence[Placed], mark: Any, width: int = 1) -> list[str]:
        cols = max((p.x for p in placed), default=-1) + 1
        grid = [[" " * width] * cols for _ in range(ROWS)]
        for p in placed:
            text, key = mark(p.cell)
            grid[p.y][p.x] = paint(key, text.ljust(width))
        return ["|" + "".join(row) + "|" if cols else "|(none)|" for row in grid]

    lines = [title] if title else []
    bead = [Placed(x, y, x, c) for x, col in enumerate(roads["bead_plate"]) for y, c in enumerate(col)]
    lines.append("bead plate")
    lines += board(bead, lambda c: (str(c["w"]), str(c["w"])))

    def big(c: Mapping[str, Any]) -> tuple[str, str]:
        ties = int(c.get("ties") or 0)
        w = str(c["w"])
        return w + ("" if not ties else str(ties) if ties <= 9 else "+"), w

    lines.append("big road (a digit: the ties after that coup; + for 10 or more)")
    lines += board(layout(roads["big_road"]), big, width=2)
    for name, _ in DERIVED:
        lines.append(name.replace("_", " ") + " (r red, b blue)")
        lines += board(layout(roads[name]), lambda c: (_DERIVED_MARK.get(str(c), "?"), str(c)))  # type: ignore[literal-required]
    return "\n".join(lines) + "\n"


# --- SVG ------------------------------------------------------------------------------------

_RED = "#d32f2f"
_BLUE = "#1565c0"
_GREEN = "#2e7d32"
_GRID = "#c8c8c8"
_FILL = {"B": _RED, "P": _BLUE, "T": _GREEN}
_MIN_COLUMNS = 24


def _f(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


class _Svg:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, tag: str, text: str | None = None, **attrs: Any) -> None:
        a = " ".join(
            f'{k.rstrip("_").replace("_", "-")}="{_f(v) if isinstance(v, float) else escape(str(v))}"'
            for k, v in attrs.items()
        )
        if text is None:
            self.parts.append(f"<{tag} {a}/>")
        else:
            self.parts.append(f"<{tag} {a}>{escape(text)}</{tag}>")


def _grid(svg: _Svg, x0: float, y0: float, cols: int, rows: int, size: float, label: str) -> None:
    svg.add("text", label, x=x0, y=y0 - 5.0, font_size=12, fill="#333", font_family="sans-serif")
    svg.add("rect", x=x0, y=y0, width=cols * size, height=rows * size, fill="#fff", stroke="#888")
    for c in range(1, cols):
        x = x0 + c * size
        svg.add("line", x1=x, y1=y0, x2=x, y2=y0 + rows * size, stroke=_GRID, stroke_width=0.5)
    for r in range(1, rows):
        y = y0 + r * size
        svg.add("line", x1=x0, y1=y, x2=x0 + cols * size, y2=y, stroke=_GRID, stroke_width=0.5)


def _pair_dots(svg: _Svg, cx: float, cy: float, r: float, cell: Mapping[str, Any]) -> None:
    d = r * 0.72
    if cell.get("bp"):
        svg.add("circle", cx=cx - d, cy=cy - d, r=r * 0.28, fill=_RED, stroke="#fff", stroke_width=0.8)
    if cell.get("pp"):
        svg.add("circle", cx=cx + d, cy=cy + d, r=r * 0.28, fill=_BLUE, stroke="#fff", stroke_width=0.8)


def render_svg(roads: Roads, title: str = "") -> str:
    """The roads drawn as a casino scoreboard (standalone SVG, stdlib only):
    bead plate (filled discs with the winner's letter, pair dots), big road
    (hollow rings, red Banker / blue Player, green slash per tie with the
    count when more than one), big eye boy (hollow rings), small road
    (filled dots), cockroach pig (slashes)."""
    bead_cols = max(len(roads["bead_plate"]), 1)
    big_cells = layout(roads["big_road"])
    derived_cells = {name: layout(roads[name]) for name, _ in DERIVED}  # type: ignore[literal-required]

    def width_of(placed: list[Placed]) -> int:
        return max((p.x for p in placed), default=-1) + 1

    big_size, bead_size, small_size = 24.0, 30.0, 12.0
    cols_big = max(_MIN_COLUMNS, width_of(big_cells) + 2)
    cols_small = max(2 * _MIN_COLUMNS, *(width_of(p) + 2 for p in derived_cells.values()))
    cols_bead = max(12, bead_cols + 1)
    margin, gap = 16.0, 30.0
    width = margin * 2 + max(cols_big * big_size, cols_small * small_size, cols_bead * bead_size)
    y = margin + (26.0 if title else 0.0)

    svg = _Svg()
    if title:
        svg.add(
            "text",
            title,
            x=margin,
            y=margin + 14.0,
            font_size=18,
            font_weight="bold",
            fill="#222",
            font_family="sans-serif",
        )
    y += 16.0
    _draw_bead_plate(svg, roads["bead_plate"], margin, y, cols_bead, bead_size)
    y += ROWS * bead_size + gap
    _draw_big_road(svg, big_cells, margin, y, cols_big, big_size)
    y += ROWS * big_size + gap
    for name, _ in DERIVED:
        _draw_derived_road(svg, name, derived_cells[name], margin, y, cols_small, small_size)
        y += ROWS * small_size + gap

    height = y - gap + margin
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(width)}" height="{_f(height)}" '
        f'viewBox="0 0 {_f(width)} {_f(height)}">'
    )
    return (
        "\n".join(
            [
                head,
                f'<rect x="0" y="0" width="{_f(width)}" height="{_f(height)}" fill="#f7f7f2"/>',
                *svg.parts,
                "</svg>",
            ]
        )
        + "\n"
    )


def _draw_bead_plate(svg: _Svg, columns: Any, x: float, y: float, cols: int, size: float) -> None:
    """The bead plate at (x, y): a filled disc per coup with the winner's
    letter and its pair dots."""
    _grid(svg, x, y, cols, ROWS, size, "Bead plate")
    r = size * 0.42
    for ci, col in enumerate(columns):
        for ri, cell in enumerate(col):
            cx = x + (ci + 0.5) * size
            cy = y + (ri + 0.5) * size
            svg.add("circle", cx=cx, cy=cy, r=r, fill=_FILL[cell["w"]])
            svg.add(
                "text",
                cell["w"],
                x=cx,
                y=cy + 5.0,
                font_size=14,
                font_weight="bold",
                fill="#fff",
                text_anchor="middle",
                font_family="sans-serif",
            )
            _pair_dots(svg, cx, cy, r, cell)


def _draw_big_road(svg: _Svg, cells: list[Placed], x: float, y: float, cols: int, size: float) -> None:
    """The big road at (x, y): a hollow ring per coup, a green slash over
    ties (with their count when more than one), pair dots."""
    _grid(svg, x, y, cols, ROWS, size, "Big road")
    r = size * 0.38
    for p in cells:
        cx = x + (p.x + 0.5) * size
        cy = y + (p.y + 0.5) * size
        cell = p.cell
        svg.add("circle", cx=cx, cy=cy, r=r, fill="none", stroke=_FILL[cell["w"]], stroke_width=3)
        ties = int(cell.get("ties", 0))
        if ties:
            svg.add("line", x1=cx - r, y1=cy + r, x2=cx + r, y2=cy - r, stroke=_GREEN, stroke_width=2.5)
            if ties > 1:
                svg.add(
                    "text",
                    str(ties),
                    x=cx,
                    y=cy + 4.0,
                    font_size=11,
                    font_weight="bold",
                    fill=_GREEN,
                    text_anchor="middle",
                    font_family="sans-serif",
                )
        _pair_dots(svg, cx, cy, r, cell)


_DERIVED_LABELS = {"big_eye_boy": "Big eye boy", "small_road": "Small road", "cockroach_pig": "Cockroach pig"}


def _draw_derived_road(
    svg: _Svg, name: str, cells: list[Placed], x: float, y: float, cols: int, size: float
) -> None:
    """A derived road at (x, y): big eye boy hollow rings, small road filled
    dots, cockroach pig slashes; red or blue."""
    _grid(svg, x, y, cols, ROWS, size, _DERIVED_LABELS[name])
    r = size * 0.36
    for p in cells:
        cx = x + (p.x + 0.5) * size
        cy = y + (p.y + 0.5) * size
        colour = _RED if p.cell == "red" else _BLUE
        if name == "big_eye_boy":
            svg.add("circle", cx=cx, cy=cy, r=r, fill="none", stroke=colour, stroke_width=1.8)
        elif name == "small_road":
            svg.add("circle", cx=cx, cy=cy, r=r, fill=colour)
        else:
            svg.add("line", x1=cx - r, y1=cy + r, x2=cx + r, y2=cy - r, stroke=colour, stroke_width=2.2)
