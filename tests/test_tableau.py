"""The third-card tableau of docs/dealing-errors.md, cell by cell, through the engine.

Each case deals the four first cards with the wanted totals (and the
Player's third card where it matters) and checks which position the engine
expects next: the tableau is read from the profile, so this also checks the
shipped profiles hold docs/dealing-errors.md's table.
"""

from __future__ import annotations

import pytest

from controller.engine import tableau
from tests.table import Table

# A card of each point value (tens and faces count zero).
CARD_OF_VALUE = {0: "QD", 1: "AD", 2: "2D", 3: "3D", 4: "4D", 5: "5D", 6: "6D", 7: "7D", 8: "8D", 9: "9D"}
# Two cards per hand total: a ten, then a card of the total's value.
TWO = {t: ("TS", CARD_OF_VALUE[t][0] + "H") for t in range(10)}

PROFILES = ["punto_banco", "ez_baccarat", "baccarat_27"]

# docs/dealing-errors.md: Banker's total when the Player drew -> Player third-card values
# on which Banker draws.
BANKER_DRAWS = {
    0: set(range(10)),
    1: set(range(10)),
    2: set(range(10)),
    3: set(range(10)) - {8},
    4: {2, 3, 4, 5, 6, 7},
    5: {4, 5, 6, 7},
    6: {6, 7},
    7: set(),
}


def _deal_four(tb: Table, p: int, b: int) -> None:
    p1, p2 = TWO[p]
    b1, b2 = ("JS", CARD_OF_VALUE[b][0] + "C")
    tb.start()
    tb.cards(p1, b1, p2, b2)


def _next(tb: Table) -> str | None:
    coup = tb.engine.shoe.current if tb.engine.shoe else None
    if coup is None:
        return None
    return tableau.next_position(tb.engine, coup)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("p", range(10))
@pytest.mark.parametrize("b", range(10))
def test_first_four_cards_decide_naturals_player_draw_and_banker_when_player_stands(
    profile: str, p: int, b: int
) -> None:
    tb = Table(profile, coup_boundary="button")
    _deal_four(tb, p, b)
    nxt = _next(tb)
    if p >= 8 or b >= 8:
        assert nxt is None, "a natural ends the coup"
    elif p <= 5:
        assert nxt == "P3", "Player draws on 0-5"
    elif b <= 5:
        assert nxt == "B3", "Player stood on 6-7: Banker draws on 0-5"
    else:
        assert nxt is None, "Player stood and Banker stands on 6-7"


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("b", range(8))
@pytest.mark.parametrize("v", range(10))
def test_banker_after_player_third_card(profile: str, b: int, v: int) -> None:
    tb = Table(profile)
    _deal_four(tb, 0, b)  # Player 0 draws
    tb.card(CARD_OF_VALUE[v])
    expected = "B3" if v in BANKER_DRAWS[b] else None
    assert _next(tb) == expected, f"Banker {b}, Player's third card {v}"


def _banker_draws(b: int, v: int) -> bool:
    tb = Table()
    _deal_four(tb, 0, b)
    tb.card(CARD_OF_VALUE[v])
    return _next(tb) == "B3"


def test_banker_with_3_draws_unless_player_third_is_8() -> None:
    assert [v for v in range(10) if _banker_draws(3, v)] == [0, 1, 2, 3, 4, 5, 6, 7, 9]


def test_banker_with_4_draws_on_player_third_2_to_7() -> None:
    # one translated rule card says "anything but 8" in one line: a slip
    # (docs/dealing-errors.md, The tableau)
    assert [v for v in range(10) if _banker_draws(4, v)] == [2, 3, 4, 5, 6, 7]


def test_banker_with_5_draws_on_player_third_4_to_7() -> None:
    # Macau Art. IX (C)(4) OCR lost the 6: "4, 5 or 7"
    assert [v for v in range(10) if _banker_draws(5, v)] == [4, 5, 6, 7]


def test_banker_with_6_draws_on_player_third_6_or_7() -> None:
    assert [v for v in range(10) if _banker_draws(6, v)] == [6, 7]


def test_banker_with_7_always_stands() -> None:
    assert [v for v in range(10) if _banker_draws(7, v)] == []


def test_banker_with_0_to_2_always_draws_after_player_drew() -> None:
    for b in (0, 1, 2):
        assert all(_banker_draws(b, v) for v in range(10))
