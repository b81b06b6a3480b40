"""``ctl correct``'s arguments, checked before any broker is reached: 1 to 6
``--card POS=CARD`` (each position once, each a card), a reason."""

from __future__ import annotations

import pytest

from controller.commands.ctl import correction_fields
from controller.errors import UsageError


def test_six_cards_are_taken_in_position_order_and_normalised() -> None:
    cards = ["b3=ks", "P1=10d", "B1=2h", "P2=3c", "B2=4d", "P3=5s"]
    assert correction_fields(cards, "tape", True) == {
        "cards": {"P1": "TD", "B1": "2H", "P2": "3C", "B2": "4D", "P3": "5S", "B3": "KS"},
        "reason": "tape",
        "confirm": True,
    }
    assert "confirm" not in correction_fields(["P1=9H"], "tape", False)


@pytest.mark.parametrize(
    ("cards", "reason", "error"),
    [
        (["P1=9H"] * 7, "r", "--card: 1 to 6 cards (POS=CARD), not 7"),
        ([], "r", "--card: 1 to 6 cards (POS=CARD), not 0"),
        (["P1=9H", "p1=8H"], "r", "--card: P1 given twice"),
        (["P4=9H"], "r", "--card 'P4=9H': POS=CARD with POS one of P1 B1 P2 B2 P3 B3"),
        (["9H"], "r", "--card '9H': POS=CARD"),
        (["P1=1Z"], "r", "--card P1: not a card"),
        (["P1=9H"], "  ", "--reason is required"),
    ],
)
def test_what_the_controller_would_refuse_is_a_usage_error(cards: list[str], reason: str, error: str) -> None:
    with pytest.raises(UsageError) as got:
        correction_fields(cards, reason, True)
    assert str(got.value).startswith(error), str(got.value)
