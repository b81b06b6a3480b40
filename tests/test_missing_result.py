"""A RESULT never pressed (found by the dealer model): the cards
after a complete tableau wait for the RESULT or a fourth card (docs/dealing-errors.md,
"Dealing errors (Article X)": four or more are the next coup, fewer are
extra cards). The coup whose RESULT was missed ends as dealt, flagged
``MISSING_RESULT``, and every later coup keeps its number."""

from __future__ import annotations

from typing import Any

from controller import checkpoint
from controller.engine import Engine
from firmware_protocols import shoe_ascii
from firmware_protocols.frames import DeviceResult, Link
from tests.table import Table

COUP_1 = ("9S", "2C", "KH", "3D")  # P 9S KH (9), B 2C 3D (5): Player natural
COUP_2 = ("8C", "KC", "KD", "4H")  # P 8C KD (8), B KC 4H (4): Player natural
COUP_3 = ("5H", "3S", "2D", "3C")  # P 5H 2D (7), B 3S 3C (6): both stand


def _results(t: Table) -> list[tuple[int, list[str], list[str], list[str]]]:
    return [
        (r["coup"], r["player"]["cards"], r["banker"]["cards"], r["corrections"])
        for r in t.of_type("coup.result")
    ]


def _codes(t: Table, type_: str = "misdeal") -> list[tuple[Any, str]]:
    return [(e["coup"], e["code"]) for e in t.of_type(type_)]


def test_four_cards_after_a_complete_tableau_are_the_next_coup() -> None:
    t = Table()
    t.start()
    t.cards(*COUP_1)  # no RESULT
    assert t.cards(*COUP_2[:3]) == []  # they wait: extra cards or the next coup's
    t.card(COUP_2[3])
    t.result()
    t.cards(*COUP_3)
    t.result()
    t.new_shoe()
    assert _results(t) == [
        (1, ["9S", "KH"], ["2C", "3D"], ["MISSING_RESULT"]),
        (2, ["8C", "KD"], ["KC", "4H"], []),
        (3, ["5H", "2D"], ["3S", "3C"], []),
    ]
    assert _codes(t) == [(1, "MISSING_RESULT")]
    flag = t.last("misdeal")
    assert flag["action"] == "corrected" and "8C, KC, KD, 4H" in flag["detail"]
    assert [e["position"] for e in t.of_type("card") if e["coup"] == 2] == ["P1", "B1", "P2", "B2"]
    assert t.last("shoe.ended")["coups"] == 3 and t.last("shoe.ended")["coups_exact"]


def test_fewer_than_four_then_the_result_are_extra_cards_placed_at_the_result() -> None:
    t = Table()
    t.start()
    t.cards(*COUP_1)
    out = t.cards("5D", "6D", "7D")
    assert out == []  # nothing is shown until the RESULT tells whose they are
    t.result()
    t.cards(*COUP_2)
    t.result()
    assert _results(t) == [
        (1, ["9S", "KH"], ["2C", "3D"], ["EXTRA_CARD"]),
        (2, ["8C", "KD"], ["KC", "4H"], []),
    ]
    assert [(e["coup"], e["position"], e["card"]) for e in t.of_type("card") if e["position"] == "extra"] == [
        (1, "extra", "5D"),
        (1, "extra", "6D"),
        (1, "extra", "7D"),
    ]
    assert _codes(t) == [(1, "EXTRA_CARD")] * 3


def test_the_extra_card_policies_apply_to_fewer_than_four_and_not_to_four() -> None:
    void = Table(extra_card="void")
    void.start()
    void.cards(*COUP_1, "5D", "6D")
    void.result()
    void.cards(*COUP_2)
    void.result()
    assert void.last("coup.void")["coup"] == 1 and void.last("coup.void")["code"] == "EXTRA_CARD"
    assert _results(void) == [(2, ["8C", "KD"], ["KC", "4H"], [])]
    nxt = Table(extra_card="next_coup")
    nxt.start()
    nxt.cards(*COUP_1, "8C")
    nxt.result()
    nxt.cards(*COUP_2[1:])
    nxt.result()
    assert _results(nxt) == [
        (1, ["9S", "KH"], ["2C", "3D"], ["EXTRA_CARD"]),
        (2, ["8C", "KD"], ["KC", "4H"], []),
    ]
    for policy in ("void", "next_coup"):
        t = Table(extra_card=policy)
        t.start()
        t.cards(*COUP_1, *COUP_2)
        t.result()
        assert _results(t) == [
            (1, ["9S", "KH"], ["2C", "3D"], ["MISSING_RESULT"]),
            (2, ["8C", "KD"], ["KC", "4H"], []),
        ], policy


def test_the_automatic_boundary_expects_no_result() -> None:
    t = Table(coup_boundary="auto")
    t.start()
    t.cards(*COUP_1, *COUP_2)
    assert [r[:3] for r in _results(t)] == [(1, ["9S", "KH"], ["2C", "3D"]), (2, ["8C", "KD"], ["KC", "4H"])]
    assert _codes(t) == []


def test_a_status_and_the_cut_card_leave_the_cards_waiting() -> None:
    t = Table()
    t.start()
    t.cards(*COUP_1, "8C")
    t.status("LOW_POWER")
    t.cut()
    t.cards(*COUP_2[1:])
    t.result()
    t.cards(*COUP_3)
    t.result()
    # the cut card came out in coup 2: coup 3 is the last (after_cut: one_more)
    assert t.last("shoe.cut_card")["coup"] == 2 and t.last("shoe.cut_card")["last_coup"] == 3
    assert [r[0] for r in _results(t)] == [1, 2, 3]
    assert t.last("shoe.ended")["coups"] == 3


def test_the_last_coup_with_no_result_then_a_coup_past_it() -> None:
    t = Table()
    t.start()
    t.cut()
    t.cards(*COUP_1)
    t.result()
    t.cards(*COUP_2)  # the last permitted coup, no RESULT
    t.cards(*COUP_3)
    t.result()
    assert _results(t)[1] == (2, ["8C", "KD"], ["KC", "4H"], ["MISSING_RESULT"])
    assert t.last("shoe.ended")["coups"] == 2
    assert t.last("coup.void")["coup"] == 3 and t.last("coup.void")["code"] == "CUT_CARD_OVERRUN"


def test_a_loss_or_another_button_places_the_waiting_cards_as_extra_cards_first() -> None:
    shoe = Table()
    shoe.start()
    shoe.cards(*COUP_1, "5D", "6D")
    shoe.new_shoe()
    assert [(e["coup"], e["position"], e["card"]) for e in shoe.of_type("card")][-2:] == [
        (1, "extra", "5D"),
        (1, "extra", "6D"),
    ]
    assert shoe.last("coup.void")["code"] == "SHOE_ENDED"
    assert [c["card"] for c in shoe.last("coup.void")["cards"] if c["position"] == "extra"] == ["5D", "6D"]
    gap = Table()
    gap.start()
    gap.cards(*COUP_1, "5D")
    out = gap.gap(1)
    assert [(e["type"], e.get("position")) for e in out][:2] == [("card", "extra"), ("misdeal", None)]
    link = Table()
    link.start()
    link.cards(*COUP_1, "5D")
    out = link.feed(Link(link.t + 1, False, "cable"))
    assert out[0]["type"] == "card" and out[0]["position"] == "extra"


def test_a_void_lists_the_waiting_cards_as_its_extra_cards() -> None:
    t = Table()
    t.start()
    t.cards(*COUP_1, "5D", "6D")
    reply, _ = t.command(cmd="void", coup=1, reason="dealer error")
    assert reply["ok"], reply
    void = t.last("coup.void")
    assert [c["card"] for c in void["cards"]] == ["9S", "2C", "KH", "3D", "5D", "6D"]
    t.cards("7D", "8D")  # still the void coup's (as before): its RESULT closes it
    t.result()
    t.cards(*COUP_2)
    t.result()
    assert _results(t) == [(2, ["8C", "KD"], ["KC", "4H"], [])]


def test_an_angel_eye_card_placed_on_p1_opens_the_next_coup_at_once() -> None:
    t = Table()
    t.start()
    for card, hand in zip(COUP_1, ("P1", "B1", "P2", "B2"), strict=True):
        t.card(card, hand=hand)
    out = t.card("5D", hand="burn")  # labelled no hand: an extra card, at once
    assert [(e["type"], e.get("position")) for e in out if e["type"] in ("card", "misdeal")] == [
        ("card", "extra"),
        ("misdeal", None),
    ]
    out = t.card(COUP_2[0], hand="P1")
    assert [e["type"] for e in out if e["type"] in ("misdeal", "coup.result", "card")] == [
        "misdeal",
        "coup.result",
        "card",
    ]
    for card, hand in zip(COUP_2[1:], ("B1", "P2", "B2"), strict=True):
        t.card(card, hand=hand)
    t.feed(DeviceResult(t.t + 1, 99, "player", False, False))
    assert _results(t) == [
        (1, ["9S", "KH"], ["2C", "3D"], ["EXTRA_CARD", "MISSING_RESULT"]),
        (2, ["8C", "KD"], ["KC", "4H"], []),
    ]


def test_the_waiting_cards_survive_a_checkpoint() -> None:
    def run(restore: bool) -> list[dict[str, Any]]:
        t = Table()
        t.start()
        t.cards(*COUP_1, "5D", "6D")
        if restore:
            text = checkpoint.dump(1, t.engine, shoe_ascii.Decoder())
            _, t.engine, _ = checkpoint.load(
                text, lambda: Engine("T01", t.engine.profile, 8), shoe_ascii.Decoder
            )
            assert [c.card for c in t.engine.shoe.current.past] == ["5D", "6D"]  # type: ignore[union-attr]
        t.cards("7D", "8D")
        t.result()
        return t.events

    assert run(True) == run(False)
