"""The rule each loss-recovery capture pins, stated on its expected events.

``tests/test_captures.py`` compares every capture's events with its
``*.expected.jsonl`` byte for byte; this module says what in those events
is the point (docs/dealing-errors.md "How the engine decides what it cannot see"), so a
regenerated expected file that breaks a rule fails here, not only in a
reviewer's reading of the diff. The frames are those of the unit tests
named in ``tests/captures/README.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.test_captures import HERE

Event = dict[str, Any]
Hands = tuple[list[str | None], list[str | None]]
CHECKS: dict[str, Callable[[list[Event]], None]] = {}


def check(f: Callable[[list[Event]], None]) -> Callable[[list[Event]], None]:
    CHECKS[f.__name__] = f
    return f


def events_of(name: str) -> list[Event]:
    text = (HERE / f"{name}.expected.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def hands(r: Event) -> Hands:
    return (r["player"]["cards"], r["banker"]["cards"])


def results(es: list[Event]) -> list[tuple[int, Hands]]:
    return [(r["coup"], hands(r)) for r in es if r["type"] == "coup.result"]


def voids(es: list[Event]) -> list[tuple[int, str]]:
    return [(v["coup"], v["code"]) for v in es if v["type"] == "coup.void"]


def misdeals(es: list[Event]) -> list[tuple[int, str, str]]:
    return [(e["coup"], e["code"], e["action"]) for e in es if e["type"] == "misdeal"]


def alerts(es: list[Event]) -> list[tuple[int | None, str]]:
    return [(e["coup"], e["code"]) for e in es if e["type"] == "security.alert"]


def first_shoe(es: list[Event]) -> str:
    return str(next(e["shoe"] for e in es if e["type"] == "shoe.started"))


COUP_5 = (["8C", "KC"], ["3H", "4H"])


@check
def loss_newshoe_while_held(es: list[Event]) -> None:
    assert {e["coup"] for e in es if e["type"] in ("coup.result", "coup.void")} == {1, 2, 3}
    assert [e["coups"] for e in es if e["type"] == "shoe.ended"] == [3]


@check
def loss_during_burn(es: list[Event]) -> None:
    dealt = [(["6C", "4C", "JD"], ["AC", "TD", "2D"]), (["AH", "5H"], ["QD", "JH", "7H"])]
    assert [h for _, h in results(es) if h not in dealt] == []
    assert [c for c, _ in results(es)] == [2, 3]  # coup 1 lost its P1: void


@check
def loss_after_held_coup_voided(es: list[Event]) -> None:
    assert results(es) == []


@check
def loss_result_of_void_coup(es: list[Event]) -> None:
    assert {c for c, h in results(es) if h == (["8D", "KD"], ["2C", "5C"])} == {3}


@check
def loss_whole_coup_numbering_lost(es: list[Event]) -> None:
    assert results(es) == [(1, (["9S", "TS"], ["KH", "QH"])), (2, (["8D", "KD"], ["2C", "5C"]))]
    assert [c for c, code in alerts(es) if code == "COUP_NUMBERING_LOST"] == [3]
    assert voids(es) == [(3, "SEQUENCE_GAP"), (4, "SEQUENCE_GAP")]
    (end,) = [x for x in es if x["type"] == "shoe.ended"]
    assert (end["coups"], end["coups_exact"]) == (4, False)


@check
def loss_second_result_released_late(es: list[Event]) -> None:
    assert results(es) == [
        (2, (["KC", "QC", "8D"], ["9C", "4C"])),
        (4, (["TC", "6C"], ["AH", "2C", "QH"])),
        (5, (["7S", "4C", "TH"], ["2S", "TC", "3D"])),
    ]
    assert voids(es) == [(1, "SEQUENCE_GAP"), (3, "SEQUENCE_GAP")]


@check
def loss_result_then_extra_card(es: list[Event]) -> None:
    assert [(r["coup"], hands(r), r["corrections"]) for r in es if r["type"] == "coup.result"] == [
        (1, (["9S", "TS"], ["KH", "QH"]), []),
        (2, (["3C", "8D", "QD"], ["JC", "2H", "4H"]), ["SEQUENCE_GAP", "EXTRA_CARD"]),
        (3, COUP_5, []),
    ]


@check
def loss_result_while_unread_holds(es: list[Event]) -> None:
    assert results(es) == [(3, COUP_5)]
    assert voids(es) == [(1, "UNREAD_CARD"), (2, "SEQUENCE_GAP")]


@check
def loss_result_after_unread_may_complete(es: list[Event]) -> None:
    assert results(es) == [(3, COUP_5)]
    assert voids(es) in (
        [(1, "UNREAD_CARD"), (2, "SEQUENCE_GAP")],
        [(1, "SEQUENCE_GAP"), (2, "SEQUENCE_GAP")],
    )


@check
def loss_newshoe_lost(es: list[Event]) -> None:
    started = [e["shoe"] for e in es if e["type"] == "shoe.started"]
    assert len(started) == 2, started
    second = [e for e in es if e["shoe"] == started[1]]
    assert [a["code"] for a in second if a["type"] == "security.alert"] == [
        "BURN_MISMATCH",
        "COUP_NUMBERING_LOST",
    ]
    assert results(second) == []
    assert {c for _, c in voids(second)} == {"SEQUENCE_GAP"}
    (end,) = [e for e in second if e["type"] == "shoe.ended"]
    assert end["coups_exact"] is False
    first = [e for e in es if e["shoe"] == started[0]]
    assert [c for c, _ in results(first)] == [1, 2, 3]
    assert not [e for e in es if e.get("code") in ("CUT_CARD_OVERRUN", "FOREIGN_CARD")]


@check
def loss_lost_result_keeps_numbers(es: list[Event]) -> None:
    assert misdeals(es) == [(2, "SEQUENCE_GAP", "awaiting_supervisor"), (2, "SEQUENCE_GAP", "corrected")]
    assert results(es) == [
        (1, (["9S", "TS"], ["KH", "QH"])),
        (2, (["8D", "TD"], ["KD", "QD"])),
        (3, (["8C", "KC"], ["9C", "QC"])),
    ]


@check
def loss_lost_extra_card_opens_no_coup(es: list[Event]) -> None:
    assert misdeals(es) == [(2, "SEQUENCE_GAP", "awaiting_supervisor"), (2, "SEQUENCE_GAP", "corrected")]
    assert results(es) == [(1, (["9S", "TS"], ["KH", "QH"])), (2, (["8D", "TD"], ["KD", "QD"]))]


@check
def loss_gap_while_held(es: list[Event]) -> None:
    assert misdeals(es)[0] == (1, "SEQUENCE_GAP", "awaiting_supervisor")
    assert results(es) == []
    assert (2, "SEQUENCE_GAP", "awaiting_supervisor") in misdeals(es)


@check
def loss_held_coup_result_lost(es: list[Event]) -> None:
    assert misdeals(es)[0] == (1, "SEQUENCE_GAP", "awaiting_supervisor")
    dealt = {2: (["9S", "TS"], ["KH", "QH"]), 3: (["8D", "TD"], ["KD", "QD"])}
    assert [(n, h) for n, h in results(es) if dealt.get(n) != h] == []
    assert [c for c, _ in results(es)] == [3]  # coup 2's cards cannot be placed: void


@check
def loss_gap_on_void_coup(es: list[Event]) -> None:
    i = next(i for i, e in enumerate(es) if e["type"] == "coup.void")
    assert [e for e in es[i:] if e["type"] == "misdeal" and e["action"] == "awaiting_supervisor"] == []
    assert "5S" in [e["card"] for e in es if e["type"] == "card"]


@check
def loss_newshoe_voids_held_last_coup(es: list[Event]) -> None:
    first = first_shoe(es)
    assert [e["reason"] for e in es if e["type"] == "shoe.ended" and e["shoe"] == first] == [
        "new shoe loaded"
    ]


@check
def loss_newshoe_voids_held_coup_and_next(es: list[Event]) -> None:
    first = first_shoe(es)
    dealt = {e["coup"] for e in es if e["type"] == "card" and e["shoe"] == first and e["coup"]}
    ended = {e["coup"] for e in es if e["type"] in ("coup.result", "coup.void") and e["shoe"] == first}
    assert dealt <= ended, (dealt, ended)


@check
def loss_held_cards_of_void_last_coup_shown(es: list[Event]) -> None:
    assert {"4H", "5H", "6H"} <= {e["card"] for e in es if e["type"] == "card"}


@check
def hold_early_result_unread(es: list[Event]) -> None:
    assert misdeals(es)[0] == (1, "UNREAD_CARD", "awaiting_supervisor")
    assert (1, "UNREAD_CARD", "void") in misdeals(es)
    assert results(es) == [(2, (["9H", "2H", "AD"], ["KD", "6S"]))]


@check
def hold_unread_cannot_change_tableau(es: list[Event]) -> None:
    assert misdeals(es) == [(1, "UNREAD_CARD", "awaiting_supervisor"), (1, "UNREAD_CARD", "void")]
    assert results(es) == [(2, (["8D", "TD"], ["KD", "QD"]))]
    i = [e["type"] for e in es].index("coup.result")
    j = [(e["type"], e.get("action")) for e in es].index(("misdeal", "void"))
    assert i < j


@check
def hold_result_before_four_cards(es: list[Event]) -> None:
    assert misdeals(es) == [(1, "PREMATURE_RESULT", "void")]
    assert [c for c, _ in voids(es)] == [1]
    assert results(es) == [(2, (["8D", "TD"], ["KD", "QD"]))]


@check
def hold_extra_card_after_early_result(es: list[Event]) -> None:
    assert results(es) == [(1, (["AC", "3S", "JH"], ["2S", "TD", "2D"])), (2, (["9S", "TS"], ["KH", "QH"]))]


@check
def hold_void_coup_early_result_due_card(es: list[Event]) -> None:
    assert results(es) == [(2, (["9S", "TS"], ["KH", "QH"])), (3, COUP_5)]
    assert voids(es) == [(1, "FOREIGN_CARD")]


@check
def hold_void_coup_early_result_told_by_tableau(es: list[Event]) -> None:
    assert results(es) == [(2, (["9S", "TS"], ["KH", "QH"])), (3, COUP_5)]
    assert [(c["coup"], c["position"]) for c in es if c["type"] == "card" and c["card"] == "TH"] == [
        (1, "P3")
    ]


@check
def hold_void_coup_early_result_either_way(es: list[Event]) -> None:
    assert results(es) == []
    assert voids(es) == [(1, "FOREIGN_CARD"), (2, "PREMATURE_RESULT")]


@check
def hold_void_coup_early_result_next_void(es: list[Event]) -> None:
    assert results(es) == [(1, (["9S", "KH"], ["2C", "3D"]))]
    # every misdeal that voids a coup is followed by that coup's coup.void
    assert [(c, code) for c, code, action in misdeals(es) if action == "void"] == voids(es)
    assert voids(es) == [(2, "CUT_CARD_OVERRUN"), (3, "CUT_CARD_OVERRUN")]


@check
def x_foreign_copy_one_deck(es: list[Event]) -> None:
    assert alerts(es) == [(1, "FOREIGN_CARD")]


# --- the moves of the state tables no other capture takes
#     (tests/test_engine_transitions.py checks each takes its move) ---


@check
def move_first_card_unread_void(es: list[Event]) -> None:
    # the burn cannot be counted: coup 1 holds it until its deadline, and
    # the shoe is dealt on from coup 2
    assert voids(es) == [(1, "UNREAD_CARD")]
    assert alerts(es) == [(1, "BURN_MISMATCH")]
    assert results(es) == [(2, (["9S", "KH"], ["2C", "3D"]))]


@check
def move_newshoe_during_burn(es: list[Event]) -> None:
    ended = [e for e in es if e["type"] == "shoe.ended"]
    assert [(e["coups"], e["reason"]) for e in ended] == [(0, "new shoe loaded")]
    assert [e["type"] for e in es].count("shoe.started") == 2
    assert [c for c, _ in results(es)] == [1]


@check
def move_early_result_while_flagged(es: list[Event]) -> None:
    assert misdeals(es) == [
        (1, "DEVICE_FAULT", "awaiting_supervisor"),
        (1, "PREMATURE_RESULT", "awaiting_supervisor"),
        (1, "DEVICE_FAULT", "corrected"),
        (1, "PREMATURE_RESULT", "corrected"),
    ]
    assert results(es) == [(1, (["TS", "KH", "4H"], ["7C", "QD"])), (2, (["9S", "KH"], ["2C", "3D"]))]


@check
def move_gap_after_early_result(es: list[Event]) -> None:
    # the lost frame may have been the due card: never settled
    assert voids(es) == [(1, "PREMATURE_RESULT")]
    assert results(es) == [(2, (["9S", "KH"], ["2C", "3D"]))]


@check
def move_early_result_closed(es: list[Event]) -> None:
    # closed by the second RESULT, never settled: its due card was not
    # entered; the next coup is not held behind it
    assert voids(es) == [(1, "PREMATURE_RESULT")]
    assert results(es) == [(2, (["9S", "KH"], ["2C", "3D"]))]
    assert [e["coup"] for e in es if e["type"] in ("coup.result", "coup.void")] == [2, 1]


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_the_capture_keeps_the_rule_it_pins(name: str) -> None:
    CHECKS[name](events_of(name))


def test_every_loss_and_hold_capture_has_its_rule_here() -> None:
    names = {p.stem for p in HERE.glob("*.shoelog") if p.stem.startswith(("loss_", "hold_"))}
    assert names - set(CHECKS) == set()
