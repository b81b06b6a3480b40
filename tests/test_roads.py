"""Scoreboard roads: hand-worked sequences, the board layout (dragon tails)
and the SVG drawing.

Notation in the comments: big-road columns are numbered from 1 and written
with their lengths, e.g. ``[B] [PPP] [B]`` = lengths 1, 3, 1. For derived
road k a cell at (column n, row m) compares:
  m = 1:  len(n-1) == len(n-1-k)         -> red, else blue
  m >= 2: len(n-k) >= m or < m-1         -> red; len(n-k) == m-1 -> blue
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from controller.roads import RoadCoup, build_roads, coup_of, layout, render_svg


def winners(column: list[dict[str, Any]]) -> str:
    return "".join(c["w"] for c in column)


def big(seq: str) -> list[str]:
    return [winners(col) for col in build_roads(seq.split())["big_road"]]


def test_b_ppp_b() -> None:
    r = build_roads(["B", "P", "P", "P", "B"])
    # bead plate: one column, the five coups top to bottom
    assert [winners(c) for c in r["bead_plate"]] == ["BPPPB"]
    # big road: a new column each time the winner changes
    assert [winners(c) for c in r["big_road"]] == ["B", "PPP", "B"]
    # big eye boy (k=1), cells in big-road order:
    #   (1,1) B: needs columns 0 and -1     -> none
    #   (2,1) P: needs column 0             -> none
    #   (2,2) P: len(col 1)=1 == m-1=1      -> blue
    #   (2,3) P: len(col 1)=1 <  m-1=2      -> red
    #   (3,1) B: len(col 2)=3 != len(col 1)=1 -> blue
    # blue, red, blue: three one-cell columns.
    assert r["big_eye_boy"] == [["blue"], ["red"], ["blue"]]
    # small road (k=2) first needs column 3 row 2 or column 4 row 1: none yet
    assert r["small_road"] == []
    assert r["cockroach_pig"] == []


def test_longer_shoe_with_ties_and_a_dragon_tail() -> None:
    seq = "T B B T P P P P P P P P B P B B T T P"
    r = build_roads(seq.split())
    # Ties: the leading T waits for the first B; the T after the second B is
    # counted on it; the two Ts after the last BB go on the last B.
    # Big road columns: [BB] [PPPPPPPP] [B] [P] [BB] [P] -> lengths 2, 8, 1, 1, 2, 1
    assert [winners(c) for c in r["big_road"]] == ["BB", "PPPPPPPP", "B", "P", "BB", "P"]
    assert [[c["ties"] for c in col] for col in r["big_road"]] == [[1, 1], [0] * 8, [0], [0], [0, 2], [0]]
    # bead plate: all 19 coups, ties included, six to a column
    assert [len(c) for c in r["bead_plate"]] == [6, 6, 6, 1]
    assert winners(r["bead_plate"][0]) == "TBBTPP"

    # Big eye boy (k=1):
    #   col 2 rows 2..8 compare col 1 (len 2):
    #     row 2: 2 >= 2 red; row 3: 2 == 2 blue; rows 4..8: 2 < m-1 red (5 cells)
    #   (3,1): len 8 vs len 2 blue; (4,1): 1 vs 8 blue; (5,1): 1 vs 1 red
    #   (5,2): col 4 len 1 == 1 blue; (6,1): len 2 vs len 1 blue
    # -> red | blue | red x5 | blue blue | red | blue blue
    assert r["big_eye_boy"] == [["red"], ["blue"], ["red"] * 5, ["blue"] * 2, ["red"], ["blue"] * 2]
    # Small road (k=2): starts at col 3 row 2 (col 3 has one cell) or col 4 row 1:
    #   (4,1): len(3)=1 vs len(1)=2 blue; (5,1): len(4)=1 vs len(2)=8 blue
    #   (5,2): col 3 len 1 == 1 blue;     (6,1): len(5)=2 vs len(3)=1 blue
    assert r["small_road"] == [["blue"] * 4]
    # Cockroach pig (k=3): starts at col 4 row 2 or col 5 row 1:
    #   (5,1): len(4)=1 vs len(1)=2 blue; (5,2): len(2)=8 >= 2 red; (6,1): len(5)=2 vs len(2)=8 blue
    assert r["cockroach_pig"] == [["blue"], ["red"], ["blue"]]

    # On a six-row board the eight Ps turn right along the bottom row (a
    # dragon tail); every column starts one board column after the last.
    pos = [(p.x, p.y) for p in layout(r["big_road"])]
    assert pos == [
        (0, 0), (0, 1),  # BB
        (1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (2, 5), (3, 5),  # 8 Ps, tail at the bottom
        (2, 0),  # B
        (3, 0),  # P
        (4, 0), (4, 1),  # BB
        (5, 0),  # P
    ]  # fmt: skip


def test_red_when_the_compared_column_repeats() -> None:
    # [BB] [PP]: (2,2) compares col 1 (len 2): 2 >= 2 -> red
    # and (2,1) has no column 0 to compare: big eye boy is just [red]
    assert build_roads(["B", "B", "P", "P"])["big_eye_boy"] == [["red"]]
    # [B] [PP] [B]: (2,2) col 1 len 1 == 1 blue; (3,1) len 2 vs 1 blue
    assert build_roads(["B", "P", "P", "B"])["big_eye_boy"] == [["blue", "blue"]]
    # [B] [P] [B] [P]: (3,1) 1 vs 1 red; (4,1) 1 vs 1 red  ("ping-pong" is orderly)
    assert build_roads(["B", "P", "B", "P"])["big_eye_boy"] == [["red", "red"]]


def test_small_road_starts_at_column_three_row_two() -> None:
    # [B] [P] [BB]: the first small-road cell is (3,2): col 1 len 1 == 1 -> blue
    r = build_roads(["B", "P", "B", "B"])
    assert r["small_road"] == [["blue"]]
    # and the big eye boy: (3,1) 1 vs 1 red; (3,2) col 2 len 1 == 1 blue
    assert r["big_eye_boy"] == [["red"], ["blue"]]


def test_only_ties_so_far() -> None:
    r = build_roads(["T", "T"])
    assert r["big_road"] == []
    assert [winners(c) for c in r["bead_plate"]] == ["TT"]
    r = build_roads(["T", "T", "P"])
    assert r["big_road"] == [[{"w": "P", "ties": 2, "pp": False, "bp": False}]]


def test_pairs_and_input_forms() -> None:
    coups: list[str | dict[str, Any] | RoadCoup] = [
        {"winner": "banker", "player_pair": True, "banker_pair": False},
        "player",
        RoadCoup("T", banker_pair=True),
        "b",
    ]
    r = build_roads(coups)
    assert r["bead_plate"][0][0] == {"w": "B", "pp": True, "bp": False}
    assert r["bead_plate"][0][2] == {"w": "T", "pp": False, "bp": True}
    assert r["big_road"][0][0] == {"w": "B", "ties": 0, "pp": True, "bp": False}
    assert r["big_road"][1][0]["ties"] == 1
    with pytest.raises(ValueError, match="not a coup winner"):
        coup_of("X")
    with pytest.raises(ValueError):
        coup_of({"winner": None})


def test_layout_column_meets_an_earlier_tail() -> None:
    # [B x7] then [P x7]: the Bs tail right along row 6 at x=1; the Ps start
    # at x=1 and stop above the tail, turning right along row 5.
    cols = [["B"] * 7, ["P"] * 7]
    pos = [(p.x, p.y, p.cell) for p in layout(cols)]
    assert pos[:7] == [(0, y, "B") for y in range(6)] + [(1, 5, "B")]
    assert pos[7:] == [(1, y, "P") for y in range(5)] + [(2, 4, "P"), (3, 4, "P")]
    # once turned, a tail keeps going right even where the row below is free
    assert layout([["B"] * 2, ["P"] * 9], rows=3)[-1].y == 2


def test_layout_start_blocked_on_the_top_row() -> None:
    # a one-row board: every column is a tail along the top row, and the next
    # column starts after it
    pos = [(p.x, p.y) for p in layout([["B", "B", "B"], ["P"]], rows=1)]
    assert pos == [(0, 0), (1, 0), (2, 0), (3, 0)]


def test_bead_plate_columns_of_six() -> None:
    r = build_roads(["B"] * 13)
    assert [len(c) for c in r["bead_plate"]] == [6, 6, 1]
    assert r["big_road"] == [[{"w": "B", "ties": 0, "pp": False, "bp": False}] * 13]
    # one long column: every derived cell is red from where each road starts
    # (column n-k does not exist: there is no entry at all)
    assert r["big_eye_boy"] == []


def test_svg_is_well_formed_and_draws_every_cell() -> None:
    seq = ["T", "B", "B", "T", "P", "P", "P", "P", "P", "P", "P", "P", "B", "P", "B", "B", "T", "T", "P"]
    r = build_roads(seq)
    svg = render_svg(r, "Table <T01> & shoe")
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert "Table <T01> & shoe" in texts
    for label in ("Bead plate", "Big road", "Big eye boy", "Small road", "Cockroach pig"):
        assert label in texts
    # bead plate: a letter per coup
    assert sum(1 for t in texts if t in ("B", "P", "T")) == len(seq)
    # circles: 19 bead discs + 15 big-road rings (2+8+1+1+2+1) + 12 big eye boy rings + 4 small-road dots
    circles = list(root.iter(f"{ns}circle"))
    assert len(circles) == 19 + 15 + 12 + 4
    # the tie count 2 is written on its big-road cell
    assert "2" in texts


def test_svg_of_an_empty_shoe() -> None:
    root = ET.fromstring(render_svg(build_roads([])))
    assert root.tag.endswith("svg")


# --- the `roads` command ------------------------------------------------------------------------

# Four-card naturals with known results (cards in dealing order P1 B1 P2 B2).
NATURAL = {
    "B": ["2H", "4S", "3D", "5C"],  # Player 5, Banker 9
    "P": ["4H", "2S", "5D", "3C"],  # Player 9, Banker 5
    "T": ["4H", "3S", "4D", "5C"],  # 8 - 8
    "Ppp": ["4H", "2S", "4D", "3C"],  # Player 8 with a pair of 4s, Banker 5
}


def write_capture(path: Any, shoes: list[list[str]], header: str = "") -> None:
    """A shoe-ascii/1 capture: each shoe starts with NEWSHOE, a 3 exposed
    and three burned cards, then the coups, each closed by RESULT."""
    from firmware_protocols.frames import Button, Card, Frame, Hello
    from firmware_protocols.shoe_ascii import Encoder

    enc = Encoder()
    lines = [f"# protocol=shoe-ascii/1 table=T01 {header}".rstrip()]
    t = 1_763_800_000.0
    seq = 0

    def emit(make: Any, *fields: Any) -> None:
        nonlocal t, seq
        frame: Frame = make(t, seq, *fields)
        lines.append(f"{t:.3f} < {enc.encode(frame).decode('ascii').rstrip()}")
        t += 0.5
        seq += 1

    emit(Hello, "FAKE-1", "1.0", "000001")
    for coups in shoes:
        t += 60  # shoe ids are the start time to the second
        emit(Button, "NEWSHOE")
        for card in ("3S", "4C", "5D", "6H"):
            emit(Card, card)
        for result in coups:
            for card in NATURAL[result]:
                emit(Card, card)
            emit(Button, "RESULT")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_roads_command_uses_the_last_shoe(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from controller.cli import main

    cap = tmp_path / "two.shoelog"
    write_capture(cap, [["P", "P", "P"], ["B", "B", "T", "Ppp", "B"]])
    assert main(["roads", str(cap)]) == 0
    roads = json.loads(capsys.readouterr().out)
    assert set(roads) == {"bead_plate", "big_road", "big_eye_boy", "small_road", "cockroach_pig"}
    # only the second shoe: B B T P(pair) B
    assert [winners(c) for c in roads["bead_plate"]] == ["BBTPB"]
    assert roads["big_road"] == [
        [{"w": "B", "ties": 0, "pp": False, "bp": False}, {"w": "B", "ties": 1, "pp": False, "bp": False}],
        [{"w": "P", "ties": 0, "pp": True, "bp": False}],
        [{"w": "B", "ties": 0, "pp": False, "bp": False}],
    ]
    # (3,1): len(col 2)=1 vs len(col 1)=2 -> blue; nothing else has its columns yet
    assert roads["big_eye_boy"] == [["blue"]]


def test_roads_command_leaves_demo_coups_out(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from controller.cli import main

    cap = tmp_path / "demo.shoelog"
    write_capture(cap, [["P", "B", "B"]], header="demo_coups=1")
    assert main(["roads", str(cap)]) == 0
    roads = json.loads(capsys.readouterr().out)
    assert [winners(c) for c in roads["bead_plate"]] == ["BB"]


def test_roads_command_svg(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from controller.cli import main

    cap = tmp_path / "one.shoelog"
    write_capture(cap, [["B", "P", "T"]])
    out = tmp_path / "roads.svg"
    assert main(["roads", str(cap), "--svg", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "3 coups" in captured.err
    root = ET.fromstring(out.read_text(encoding="utf-8"))
    assert root.tag.endswith("svg")


def test_roads_command_errors(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from controller.cli import main

    assert main(["roads", str(tmp_path / "missing.shoelog")]) == 2
    assert "no such file" in capsys.readouterr().err
    empty = tmp_path / "empty.shoelog"
    empty.write_text("# protocol=shoe-ascii/1\n", encoding="utf-8")
    assert main(["roads", str(empty)]) == 1
    assert "no shoe was started" in capsys.readouterr().err


def test_last_shoe_coups_drops_voided_and_other_shoes() -> None:
    from controller.commands.roads import last_shoe_coups

    events: list[dict[str, Any]] = [
        {"type": "shoe.started", "shoe": "S1"},
        {"type": "coup.result", "shoe": "S1", "coup": 1, "winner": "player", "demo": False},
        {"type": "shoe.started", "shoe": "S2"},
        {"type": "coup.result", "shoe": "S2", "coup": 2, "winner": "banker", "demo": False},
        {"type": "coup.result", "shoe": "S2", "coup": 1, "winner": "tie", "demo": False},
        {"type": "coup.result", "shoe": "S2", "coup": 3, "winner": "player", "demo": False},
        {"type": "coup.void", "shoe": "S2", "coup": 3},
        {"type": "coup.result", "shoe": "S1", "coup": 9, "winner": "player", "demo": False},
    ]
    shoe, coups = last_shoe_coups(events)
    assert shoe == "S2"
    assert [c["winner"] for c in coups] == ["tie", "banker"]  # in coup order
    assert last_shoe_coups([]) == (None, [])


def test_an_opening_tie_takes_the_big_roads_first_cell_only_when_asked() -> None:
    # the roads event (docs/events.md) keeps B/P cells: nothing until a decisive coup
    assert build_roads(["T", "T"])["big_road"] == []
    shown = build_roads([RoadCoup("T", player_pair=True), "T"], opening_tie=True)
    assert shown["big_road"] == [[{"w": "T", "ties": 2, "pp": True, "bp": False}]]
    # the first decisive coup takes the cell, ties counted on it, as without the option
    assert build_roads(["T", "T", "B"], opening_tie=True) == build_roads(["T", "T", "B"])
    assert build_roads(["T", "B"], opening_tie=True)["big_road"] == [
        [{"w": "B", "ties": 1, "pp": False, "bp": False}]
    ]
