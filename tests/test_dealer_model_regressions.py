"""Engine bugs the dealer model (tests/dealer_model.py) found, each as the
smallest sequence of frames and commands that shows it.

Over-counting after losses and early RESULTs: the engine numbered coups
that were never dealt, so ``accept`` with the true next coup was refused
("coup numbers below N are taken"), or applied to the wrong coup:

* a RESULT before four cards while the numbering is lost: its due cards
  opened a coup of their own (docs/dealing-errors.md, "Dealing errors": fewer than four
  cards before the next RESULT are the voided coup's due cards, lost
  numbering or not);
* ``accept`` given while frames were held: the number went to the first
  coup opened from frames that arrived before the command, not to the
  next coup dealt after it;
* an Angel Eye coup voided at its deadline whose first held RESULT came
  before its fourth card: the cards it then placed on B1, P2, ... opened
  a coup (its labels say a coup begins at the card it places on P1).
"""

from __future__ import annotations

from controller.commands_schema import Accept
from controller.engine import Engine
from controller.events import Event
from controller.rules import load_profile
from firmware_protocols.frames import (
    UNREAD_CARD_ERROR,
    Button,
    Card,
    CutCard,
    DeviceResult,
    Frame,
    Hello,
    SequenceGap,
    Status,
)
from tests.support.frames import T0, coup_frames, engine


def opening(*naturals: list[str]) -> list[Frame]:
    """A shoe-ascii/1 shoe: an ace exposed, one card burned, then coups."""
    frames: list[Frame] = [Hello(T0, 0, "FAKE", "1.0", "1"), Button(T0, 1, "NEWSHOE")]
    frames += [Card(T0, 2, "AS"), Card(T0, 3, "2S")]
    return frames + coup_frames(list(naturals), seq=4)


def alerts(events: list[Event]) -> list[str]:
    return [e["code"] for e in events if e["type"] == "security.alert"]


def first_cards(events: list[Event]) -> list[tuple[int, str]]:
    return [(e["coup"], e["card"]) for e in events if e["type"] == "card" and e["position"] == "P1"]


def test_due_cards_after_an_early_result_open_no_coup_while_the_numbering_is_lost() -> None:
    # Coups 1 and 2, then 5 frames lost (coup 3 whole, or coup 3's first
    # cards): the numbering is lost, the engine's next coup is 4. Coup 4 is
    # dealt with RESULT after 3 cards, then its due card and RESULT again.
    # Its due card opened coup 5 (void, number unknown), and the true next
    # coup, 5, was refused: "coup numbers below 6 are taken".
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"], ["8D", "2C", "KD", "5C"])
    frames.append(SequenceGap(T0, 19, 14, 5))
    frames += coup_frames([["7H", "7D", "TC", "JS"]], seq=19)
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert alerts(out) == ["COUP_NUMBERING_LOST"]
    early = [Card(T0 + 11, 24, "2H"), Card(T0 + 11, 25, "3D"), Card(T0 + 11, 26, "4C")]
    early += [Button(T0 + 11, 27, "RESULT"), Card(T0 + 11, 28, "5S"), Button(T0 + 11, 29, "RESULT")]
    out = [ev for f in early for ev in e.feed(f)]
    assert [(c["coup"], c["position"], c["card"]) for c in out if c["type"] == "card"] == [
        (4, "P1", "2H"),
        (4, "B1", "3D"),
        (4, "P2", "4C"),
        (4, "B2", "5S"),
    ]
    reply, out = e.command(Accept(id="a", coup=5, confirm=True), T0 + 12)
    assert reply["ok"] is True, reply
    assert alerts(out) == ["COUP_NUMBERING_RESTORED"]
    assert first_cards(e.feed(Card(T0 + 13, 30, "8C"))) == [(5, "8C")]


def test_accept_while_frames_are_held_numbers_the_coup_dealt_after_it() -> None:
    # Coup 2's RESULT and 5 more frames lost (coup 3 whole), then coup 4:
    # one or two coup ends may be in the gap, so the numbering is lost with
    # coup 3 still holding its frames (its deadline not yet passed). Coup 5
    # is dealt (held too), and the supervisor says the next coup is 6. The
    # number went to the first coup opened from the held frames (coup 5's
    # cards), and was then refused as out of range: the numbering stayed
    # lost and 8C opened coup 5.
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"])
    frames += [Card(T0, 9, "8D"), Card(T0, 10, "2C"), Card(T0, 11, "KD"), Card(T0, 12, "5C")]
    frames.append(SequenceGap(T0, 19, 13, 6))
    frames += coup_frames([["7H", "7D", "TC", "JS"]], seq=19)
    frames += coup_frames([["9D", "KC", "TH", "QD"]], seq=24, t=T0 + 1)
    out = [ev for f in frames for ev in e.feed(f)]
    assert alerts(out) == ["COUP_NUMBERING_LOST"]
    assert e.shoe is not None and e.shoe.current is not None and e.shoe.current.held
    reply, out = e.command(Accept(id="a", coup=6, confirm=True), T0 + 1.5)
    assert reply["ok"] is True, reply
    assert alerts(out) == ["COUP_NUMBERING_RESTORED"]
    out = e.tick(T0 + 10) + e.feed(Card(T0 + 11, 29, "8C"))
    assert alerts(out) == []  # (no COMMAND_REJECTED: the number stands)
    # the held coup's cards are dealt on in the stretch whose numbers are
    # unknown; the card after the command opens coup 6
    voids = [(v["coup"], v["code"]) for v in out if v["type"] == "coup.void"]
    assert voids == [(3, "SEQUENCE_GAP"), (4, "SEQUENCE_GAP"), (5, "SEQUENCE_GAP")]
    assert first_cards(out) == [(4, "9D"), (6, "8C")]
    assert e.shoe.numbering_lost is None


def test_an_angel_eye_coup_voided_with_an_early_result_held_keeps_its_due_cards() -> None:
    # Coup 2's RESULT is lost (how many frames, an Angel Eye cannot say);
    # coup 3 is dealt with RESULT after its first card, then its due cards
    # (placed B1, P2, B2, P3, B3 by the shoe) and RESULT again, then coup 4.
    # At the deadline the due cards opened a coup of their own (7D, labelled
    # B1, as its P1), and coup 4 was numbered 5.
    e = engine()

    def c(code: str, hand: str) -> Card:
        return Card(T0, None, code, hand=hand)

    def r(winner: str = "banker") -> DeviceResult:
        return DeviceResult(T0, None, winner, False, False)

    frames: list[Frame] = [Hello(T0, None, "ANGEL-EYE", "1.0", "1"), c("2S", "first"), c("3D", "burn")]
    frames += [c("4D", "burn"), c("9S", "P1"), c("KH", "B1"), c("TS", "P2"), c("QH", "B2"), r("player")]
    frames += [c("JH", "P1"), c("8D", "B1"), c("9C", "P2"), c("6C", "B2")]
    frames.append(SequenceGap(T0, None, 70, 1, exact=False))
    frames += [c("JS", "P1"), r()]
    frames += [c("7D", "B1"), c("AD", "P2"), c("3S", "B2"), c("QD", "P3"), c("2C", "B3"), r()]
    frames += [c("5H", "P1"), c("5D", "B1"), c("2D", "P2"), c("8S", "B2"), r()]
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    void3 = [v for v in out if v["type"] == "coup.void" and v["coup"] == 3]
    assert [x["card"] for x in void3[0]["cards"]] == ["JS", "7D", "AD", "3S", "QD", "2C"]
    assert first_cards(out) == [(1, "9S"), (2, "JH"), (4, "5H")]
    assert e.shoe is not None and e.shoe.next_coup == 5


def test_a_jam_and_a_restart_while_frames_are_held_are_flagged_on_their_own_coups() -> None:
    # Coup 2's unread P1 decides its tableau, so every later frame is held
    # until a supervisor enters it. Coup 3 has a jam cleared by the device,
    # coup 4 a device restart. Their device.status events come at once; the
    # DEVICE_FAULT and the restart's loss were put on coup 2 (the coup
    # holding), so coup 2 stayed open after the entry and coups 3 and 4
    # were never dealt. They belong to the coups they came in.
    e = Engine("T01", load_profile("punto_banco", {"correction_deadline_s": 60.0}), 8)

    def c(code: str | None, t: float = T0) -> Card:
        return Card(t, None, code)

    def r(t: float = T0) -> Button:
        return Button(t, None, "RESULT")

    frames: list[Frame] = [Hello(T0, 0, "FAKE", "1.0", "1"), Button(T0, 1, "NEWSHOE"), c("AS"), c("2S")]
    frames += [c("9S"), c("KH"), c("TS"), c("QH"), r()]
    frames += [c(None), c("2C"), c("KD"), c("5C"), r()]
    frames += [c("9D", T0 + 1), c("KC", T0 + 1), Status(T0 + 1, None, "JAM"), Status(T0 + 1, None, "OK")]
    frames += [c("TH", T0 + 1), c("QD", T0 + 1), r(T0 + 1)]
    frames += [c("8C", T0 + 2), c("2D", T0 + 2), Hello(T0 + 2, 0, "FAKE", "1.0", "1")]
    frames += [c("9H", T0 + 2), c("7S", T0 + 2), r(T0 + 2)]
    out = [ev for f in frames for ev in e.feed(f)]
    assert [s["code"] for s in out if s["type"] == "device.status"] == ["HELLO", "JAM", "OK", "HELLO"]
    assert [(m["coup"], m["code"]) for m in out if m["type"] == "misdeal"] == [(2, "UNREAD_CARD")]
    reply, out = e.command({"id": "x", "cmd": "enter_card", "coup": 2, "card": "9C", "confirm": True}, T0 + 3)
    assert reply["ok"] is True, reply
    assert [(m["coup"], m["code"], m["action"]) for m in out if m["type"] == "misdeal"] == [
        (2, "UNREAD_CARD", "corrected"),
        (3, "DEVICE_FAULT", "awaiting_supervisor"),
        (3, "DEVICE_FAULT", "corrected"),
        (4, "SEQUENCE_GAP", "awaiting_supervisor"),
    ]
    assert [x["coup"] for x in out if x["type"] == "coup.result"] == [2, 3]
    assert [x["type"] for x in out if x["type"] == "device.status"] == []  # (sent when they came)


def test_an_early_result_after_frames_lost_loses_the_numbering_it_may_hold() -> None:
    # Coup 2's last card and RESULT are lost (2 frames); coup 3 is dealt
    # with RESULT after its first card, then its due cards and RESULT
    # again; then coup 4. At coup 2's deadline, KD and the due cards were
    # taken as coup 2's own (a fourth card, then cards after its RESULT)
    # with nothing flagged, and coup 4 was settled as coup 3. Both readings
    # fit the cards, with one dealing error each: the count is not known.
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"])
    frames += [Card(T0, 9, "KC"), Card(T0, 10, "9H"), Card(T0, 11, "AD")]
    frames.append(SequenceGap(T0, 14, 12, 2))
    frames += [Card(T0, 14, "KD"), Button(T0, 15, "RESULT")]
    frames += coup_frames([["8D", "JS", "QH"]], seq=16)
    frames += coup_frames([["2H", "8S", "JC", "7C", "4H", "5C"]], seq=20)
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert alerts(out) == ["COUP_NUMBERING_LOST"]
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == [1]


def test_due_cards_held_when_the_shoe_ends_open_no_coup() -> None:
    # Coup 2's unread P1 decides its tableau: every later frame is held.
    # Coup 3 is a natural; coup 4 is dealt with RESULT after its first
    # card, then its due cards and RESULT again; coup 5 is a natural; then
    # NEWSHOE. The held frames are dealt on as the shoe ends (they were
    # dealt before it ended), but with the shoe ending nothing waited for
    # coup 4's due cards: they opened coup 5, coup 5 was settled as 6 and
    # shoe.ended counted 6 coups.
    e = engine()
    frames: list[Frame] = [*opening(["9S", "KH", "TS", "QH"])]
    frames += [Card(T0, 9, None), Card(T0, 10, "2C"), Card(T0, 11, "KD"), Card(T0, 12, "5C")]
    frames.append(Button(T0, 13, "RESULT"))
    frames += coup_frames([["8D", "2C", "KD", "5C"], ["7D"], ["QS", "5C", "3D", "QS", "9S"]], seq=14)
    frames += coup_frames([["9H", "QD", "QD", "TD"]], seq=27)
    frames.append(Button(T0 + 1, 32, "NEWSHOE"))
    out = [ev for f in frames for ev in e.feed(f)]
    assert [(v["coup"], v["code"]) for v in out if v["type"] == "coup.void"] == [
        (2, "SHOE_ENDED"),
        (4, "PREMATURE_RESULT"),
    ]
    assert [(r["coup"], r["player"]["cards"]) for r in out if r["type"] == "coup.result"] == [
        (1, ["9S", "TS"]),
        (3, ["8D", "KD"]),
        (5, ["9H", "QD"]),
    ]
    assert [x["coups"] for x in out if x["type"] == "shoe.ended"] == [5]


def test_a_cut_card_among_an_early_results_due_cards_came_out_in_that_coup() -> None:
    # Coup 1 is a natural; coup 2 is dealt with RESULT after its first
    # card (void), then the cut card comes out before its due cards, which
    # follow with RESULT again. The cut card came out in coup 2, so coup 3
    # is the last; coup 4 is past it. The cut card was counted from coup 3
    # (nothing was in play while the due cards waited): coup 4 was settled
    # and shoe.ended counted 4 coups.
    e = engine()
    frames: list[Frame] = [*opening(["9S", "KH", "TS", "QH"])]
    frames += [Card(T0, 9, "7H"), Button(T0, 10, "RESULT"), CutCard(T0, 11)]
    frames += coup_frames([["7D", "TC", "JS"]], seq=12)
    frames += coup_frames([["8D", "2C", "KD", "5C"], ["9H", "QD", "QD", "TD"]], seq=16)
    out = [ev for f in frames for ev in e.feed(f)]
    assert [(c["coup"], c["last_coup"]) for c in out if c["type"] == "shoe.cut_card"] == [(2, 3)]
    assert [(c["coup"], c["position"], c["card"]) for c in out if c["type"] == "card"][-8:-4] == [
        (3, "P1", "8D"),
        (3, "B1", "2C"),
        (3, "P2", "KD"),
        (3, "B2", "5C"),
    ]
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == [1, 3]
    assert [(v["coup"], v["code"]) for v in out if v["type"] == "coup.void"] == [
        (2, "PREMATURE_RESULT"),
        (4, "CUT_CARD_OVERRUN"),
    ]
    assert [x["coups"] for x in out if x["type"] == "shoe.ended"] == [3]


def test_a_cut_card_after_an_early_results_due_cards_counts_from_the_next_coup() -> None:
    # The same, but the cut card comes after the due cards that complete
    # coup 2's tableau (before the dealer's second RESULT): it counts from
    # coup 3, so coup 4 is the last and is settled.
    e = engine()
    frames: list[Frame] = [*opening(["9S", "KH", "TS", "QH"])]
    frames += [Card(T0, 9, "7H"), Button(T0, 10, "RESULT")]
    frames += [Card(T0, 11, "7D"), Card(T0, 12, "TC"), Card(T0, 13, "JS"), CutCard(T0, 14)]
    frames.append(Button(T0, 15, "RESULT"))
    frames += coup_frames([["8D", "2C", "KD", "5C"], ["9H", "QD", "QD", "TD"]], seq=16)
    out = [ev for f in frames for ev in e.feed(f)]
    assert [(c["coup"], c["last_coup"]) for c in out if c["type"] == "shoe.cut_card"] == [(3, 4)]
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == [1, 3, 4]


def test_a_coup_that_may_have_begun_with_the_extra_cards_before_it_is_not_settled() -> None:
    # Coup 1 is dealt (a natural, 9S KH TS QH) and its RESULT not pressed;
    # coup 2's first card 7C is dealt and RESULT pressed early; then the
    # rest of coup 2 (JC 8C 3S QC 3H, a whole tableau with 7C) and RESULT.
    # Read the other way (7C an extra card of coup 1, then JC 8C 3S QC a
    # natural with 3H an extra card) it is two dealing errors too, and coup
    # 2 was settled as Banker 8-3 on that guess. Both readings fit: coup 2
    # is void (its number is 2 either way), coup 1 stands.
    e = engine()
    frames: list[Frame] = [*opening()]
    frames += [Card(T0, 4 + i, c) for i, c in enumerate(["9S", "KH", "TS", "QH", "7C"])]
    frames.append(Button(T0, 9, "RESULT"))
    frames += coup_frames([["JC", "8C", "3S", "QC", "3H"], ["8D", "2C", "KD", "5C"]], seq=10)
    out = [ev for f in frames for ev in e.feed(f)]
    assert [(r["coup"], r["player"]["cards"]) for r in out if r["type"] == "coup.result"] == [
        (1, ["9S", "TS"]),
        (3, ["8D", "KD"]),
    ]
    assert [(v["coup"], v["code"]) for v in out if v["type"] == "coup.void"] == [(2, "PREMATURE_RESULT")]


def test_a_coup_after_extra_cards_that_cannot_have_begun_with_them_is_settled() -> None:
    # The same extra card 7C, but JC 8C 3S QC with 7C before them do not
    # make one coup (7C JC 8C 3S is Player 0, Banker 1: P3 and B3 due, and
    # QC then one more): only one reading fits, coup 2 is settled.
    e = engine()
    frames: list[Frame] = [*opening()]
    frames += [Card(T0, 4 + i, c) for i, c in enumerate(["9S", "KH", "TS", "QH", "7C"])]
    frames.append(Button(T0, 9, "RESULT"))
    frames += coup_frames([["JC", "8C", "KS", "QC"]], seq=10)
    out = [ev for f in frames for ev in e.feed(f)]
    assert [(r["coup"], r["banker"]["cards"]) for r in out if r["type"] == "coup.result"] == [
        (1, ["KH", "QH"]),
        (2, ["8C", "QC"]),
    ]


def test_a_coup_after_extra_cards_with_none_of_its_own_is_settled() -> None:
    # The extra card AC, then AD AH 2C 8C (Banker 9, a natural): with AC
    # first they would make one coup too (AC AD AH 2C, Player 8 drawn), but
    # that reading has two dealing errors (RESULT never pressed, then
    # pressed early) against one (an extra card): coup 2 is settled.
    e = engine()
    frames: list[Frame] = [*opening()]
    frames += [Card(T0, 4 + i, c) for i, c in enumerate(["9S", "KH", "TS", "QH", "AC"])]
    frames.append(Button(T0, 9, "RESULT"))
    frames += coup_frames([["AD", "AH", "2C", "8C"]], seq=10)
    out = [ev for f in frames for ev in e.feed(f)]
    assert [(r["coup"], r["banker"]["cards"]) for r in out if r["type"] == "coup.result"] == [
        (1, ["KH", "QH"]),
        (2, ["AH", "8C"]),
    ]


def angel_burn(*cards: tuple[str | None, str]) -> list[Event]:
    """An Angel Eye shoe: its first card 3S (three burn cards called), then
    ``cards`` as (card, label); an unread card is the device's error and
    its clearing, as the shoe reports it."""
    e = engine()
    frames: list[Frame] = [Hello(T0, 0, "ANGEL-EYE", "1.0", "1"), Card(T0, 1, "3S", hand="first")]
    for card, label in cards:
        seq = len(frames)
        if card is None:
            frames += [
                Status(T0, seq, "ERROR", UNREAD_CARD_ERROR),
                Status(T0, seq + 1, "OK", "error cleared"),
            ]
        else:
            frames.append(Card(T0, seq, card, hand=label))
    return [ev for f in frames for ev in e.feed(f)]


def test_an_angel_eye_burn_one_short_with_coup_ones_first_card_unread() -> None:
    # Two burn cards of the three called, then coup 1's P1 unread (the
    # device reports only an error), then 7S it places on B1. The unread
    # card was counted as the last burn card: 7S became coup 1's P1 with a
    # WRONG_HAND misdeal on each card after it, and no BURN_MISMATCH.
    out = angel_burn(("4D", "burn"), ("5D", "burn"), (None, "P1"), ("7S", "B1"), ("7D", "P2"), ("9C", "B2"))
    assert alerts(out) == ["BURN_MISMATCH"]
    assert [(c["coup"], c["position"], c["card"]) for c in out if c["type"] == "card"] == [
        (None, "burn", "3S"),
        (None, "burn", "4D"),
        (None, "burn", "5D"),
        (1, "P1", None),
        (1, "B1", "7S"),
        (1, "P2", "7D"),
        (1, "B2", "9C"),
    ]
    assert [b["burned"] for b in out if b["type"] == "shoe.burn"] == [2]
    assert [(m["code"], m["action"]) for m in out if m["type"] == "misdeal"] == [
        ("UNREAD_CARD", "awaiting_supervisor")
    ]


def test_an_angel_eye_last_burn_card_unread_is_burned() -> None:
    # The same unread card as the third burn card called, then 7S placed
    # on P1: it is burned, as called, with no alert.
    out = angel_burn(("4D", "burn"), ("5D", "burn"), (None, "burn"), ("7S", "P1"), ("7D", "B1"))
    assert alerts(out) == []
    assert [(c["coup"], c["position"], c["card"]) for c in out if c["type"] == "card"][3:] == [
        (None, "burn", None),
        (1, "P1", "7S"),
        (1, "B1", "7D"),
    ]
    assert [b["burned"] for b in out if b["type"] == "shoe.burn"] == [3]


def test_a_coup_void_at_its_deadline_with_no_result_held_keeps_the_next_coups_cards_apart() -> None:
    # Coup 2 is dealt to its P3 (B3 due), then 2 frames are lost (its B3
    # and RESULT), then coup 3's four cards; coup 2's deadline passes
    # before coup 3's RESULT. Coup 3's cards were taken as coup 2's extra
    # cards, so coup 3's RESULT closed nothing and coup 4 was numbered 3
    # (the count of coup ends the loss holds, one, was not used).
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"])
    frames += [Card(T0, 9 + i, c) for i, c in enumerate(("AH", "KS", "AC", "QC", "JH"))]
    frames.append(SequenceGap(T0, 16, 14, 2))  # (B3 and RESULT, seq 14-15)
    frames += [Card(T0, 16 + i, c) for i, c in enumerate(("8D", "2C", "KD", "5C"))]
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    out += e.feed(Button(T0 + 11, 20, "RESULT"))
    out += [ev for f in coup_frames([["9D", "KC", "TH", "QD"]], seq=21, t=T0 + 12) for ev in e.feed(f)]
    results = [(r["coup"], r["player"]["cards"]) for r in out if r["type"] == "coup.result"]
    assert results == [(1, ["9S", "TS"]), (3, ["8D", "KD"]), (4, ["9D", "TH"])]
    assert [(v["coup"], v["code"]) for v in out if v["type"] == "coup.void"] == [(2, "SEQUENCE_GAP")]
    assert "COUP_NUMBERING_LOST" not in alerts(out)


def test_a_cut_card_after_a_lost_result_came_out_in_the_next_coup() -> None:
    # Coup 2's B2 comes unread (it holds: nobody enters it), then 2 frames
    # are lost (its RESULT among them), the cut card, coup 3's cards and
    # RESULT, coup 4's first card; coup 2's deadline passes. Coup 3 is the
    # phantom (void: its first cards may be lost); the cut card came out
    # after coup 2's RESULT, in coup 3, so coup 4 is the last. It was
    # applied in coup 2, and coup 4 was void as past the last coup.
    e = Engine("T01", load_profile("punto_banco", {"correction_deadline_s": 2.0}), 8)
    frames = opening(["9S", "KH", "TS", "QH"])
    frames += [Card(T0, 9 + i, c) for i, c in enumerate(("8D", "2C", "KD", "5C"))]
    frames = [*frames[:-1], Card(T0, 12, None)]
    frames.append(SequenceGap(T0, 15, 13, 2))
    frames.append(CutCard(T0, 15))
    frames += [Card(T0, 16 + i, c) for i, c in enumerate(("7H", "7D", "TC", "JS"))]
    frames.append(Button(T0, 20, "RESULT"))
    frames += [Card(T0, 21, "9D")]
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert [c["coup"] for c in out if c["type"] == "shoe.cut_card"] == [3]
    out += [ev for f in coup_frames([["KC", "TH", "QD"]], seq=22, t=T0 + 11) for ev in e.feed(f)]
    assert "CUT_CARD_OVERRUN" not in [m["code"] for m in out if m["type"] == "misdeal"]
    assert [(r["coup"], r["player"]["cards"]) for r in out if r["type"] == "coup.result"] == [
        (1, ["9S", "TS"]),
        (4, ["9D", "TH"]),
    ]


def test_a_shoe_ending_on_a_coup_opened_by_frames_lost_counts_it_unsure() -> None:
    # Coup 1 is complete and its RESULT lost: coup 2's three cards are held
    # and it is void at its deadline. Then 2 frames are lost (coup 2's last
    # card and RESULT, or its RESULT and coup 3's first card) and NEWSHOE
    # comes. Coup 3 was opened by the loss, nothing of it seen: whether it
    # was dealt is not known, yet shoe.ended counted it with coups_exact
    # true (the dealer model's shoe.ended counts one coup too many).
    e = engine()
    frames: list[Frame] = [Hello(T0, 0, "FAKE", "1.0", "1"), Button(T0, 1, "NEWSHOE")]
    frames += [Card(T0, 2, "AS"), Card(T0, 3, "2S")]
    frames += [Card(T0, 4 + i, c) for i, c in enumerate(("9S", "KH", "TS", "QH"))]
    frames.append(SequenceGap(T0, 9, 8, 1))  # (coup 1's RESULT)
    frames += [Card(T0, 9 + i, c) for i, c in enumerate(("8D", "2C", "KD"))]
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert [(v["coup"], v["code"]) for v in out if v["type"] == "coup.void"] == [(2, "SEQUENCE_GAP")]
    out = [ev for f in (SequenceGap(T0 + 11, 14, 12, 2), Button(T0 + 11, 14, "NEWSHOE")) for ev in e.feed(f)]
    ended = [x for x in out if x["type"] == "shoe.ended"]
    assert [(x["coups"], x["coups_exact"]) for x in ended] == [(3, False)]


def test_an_angel_eye_loss_after_an_early_result_leaves_the_p1_card_to_the_next_coup() -> None:
    # Coup 1 has two cards (P1, B1) and its RESULT came early: the cards
    # up to the next RESULT are its due cards or the next coup's, and the
    # device's labels tell which. Frames are lost before any RESULT: the
    # wait ends there. Cards the device placed on P1, B1, P2, B2 were taken
    # as coup 1's due cards by the tableau, the next coup opened on P2.
    e = engine()
    frames: list[Frame] = [Hello(T0, 0, "ANGEL-EYE", "1.0", "1"), Card(T0, 1, "AS", hand="first")]
    frames += [Card(T0, 2, "2S", hand="burn")]
    frames += [Card(T0, 3, "9S", hand="P1"), Card(T0, 4, "KH", hand="B1")]
    frames.append(DeviceResult(T0, 5, "tie", False, False))
    frames += [
        Card(T0, 6 + i, c, hand=h)
        for i, (c, h) in enumerate(zip(("2D", "JC", "6S", "4C"), ("P1", "B1", "P2", "B2"), strict=True))
    ]
    frames.append(SequenceGap(T0, 11, 10, 1))
    out = [ev for f in frames for ev in e.feed(f)]
    cards = [
        (c["coup"], c["position"], c["card"]) for c in out if c["type"] == "card" and c["coup"] is not None
    ]
    assert (2, "P1", "2D") in cards and (2, "P2", "6S") in cards, cards
    assert "WRONG_HAND" not in [m["code"] for m in out if m["type"] == "misdeal"]


def test_a_cut_card_while_the_numbering_is_lost_is_placed_by_the_accept() -> None:
    # Coups 1 and 2, then 5 frames lost (coup 3 whole, or its first
    # cards): the numbering is lost. Coup 4 is dealt, then the cut card
    # comes out in coup 5 (the engine's 4, number unknown); the supervisor
    # says the next coup is 6, the one more after the cut card. The cut
    # card stayed in the engine's coup 4, so coup 6 was void as past the
    # last coup (5) and the shoe ended a coup early.
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"], ["8D", "2C", "KD", "5C"])
    frames.append(SequenceGap(T0, 19, 14, 5))
    frames += coup_frames([["7H", "7D", "TC", "JS"]], seq=19)
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert alerts(out) == ["COUP_NUMBERING_LOST"]
    frames = [CutCard(T0 + 11, 24), *coup_frames([["9D", "KC", "TH", "QD"]], seq=25, t=T0 + 11)]
    out = [ev for f in frames for ev in e.feed(f)]
    assert [c["coup"] for c in out if c["type"] == "shoe.cut_card"] == [4]
    reply, out = e.command(Accept(id="a", coup=6, confirm=True), T0 + 12)
    assert reply["ok"] is True, reply
    out = [ev for f in coup_frames([["8C", "2H", "KS", "5S"]], seq=30, t=T0 + 13) for ev in e.feed(f)]
    assert [(r["coup"], r["player"]["cards"]) for r in out if r["type"] == "coup.result"] == [
        (6, ["8C", "KS"])
    ]
    assert "CUT_CARD_OVERRUN" not in [m["code"] for m in out if m["type"] == "misdeal"]


def test_an_accept_among_a_void_coups_held_frames_numbers_the_coup_after_it() -> None:
    # Coup 2 is dealt to two cards, 3 frames lost; coup 3's four cards come
    # and coup 2's deadline passes with no RESULT held: the loss may hold
    # coup 2's end, so the void coup holds on (numbering lost). The
    # supervisor says the next coup is 4; then coup 4 is dealt with frames
    # lost before, inside and after it, and a RESULT. Coup 4's cards were
    # dealt as one phantom with coup 3's, gaps dropped: coup 4 was settled
    # with cards from both sides of a loss.
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"])
    frames += [Card(T0, 9, "6S"), Card(T0, 10, "6D"), SequenceGap(T0, 14, 11, 3)]
    frames += [Card(T0, 14 + i, c) for i, c in enumerate(("6H", "QD", "JH", "7H"))]
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert alerts(out) == ["COUP_NUMBERING_LOST"]
    reply, out = e.command(Accept(id="a", coup=4, confirm=True), T0 + 11)
    assert reply["ok"] is True, reply
    t = T0 + 12
    frames = [SequenceGap(t, 19, 18, 1), Card(t, 19, "TH"), Card(t, 20, "8D"), SequenceGap(t, 24, 21, 3)]
    frames += [Card(t, 24, "3S"), Card(t, 25, "QC"), SequenceGap(t, 27, 26, 1), Card(t, 27, "4H")]
    frames.append(Button(t, 28, "RESULT"))
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(t + 10)
    assert [r for r in out if r["type"] == "coup.result"] == []
    # (coup 2 void at its deadline above; coup 3 lost whole, by the number)
    assert [(v["coup"], v["code"]) for v in out if v["type"] == "coup.void"] == [
        (3, "SEQUENCE_GAP"),
        (4, "SEQUENCE_GAP"),
    ]
    assert e.shoe is not None and e.shoe.next_coup == 5


def test_frames_lost_while_cards_wait_past_a_complete_tableau_lose_the_numbering() -> None:
    # Coup 2 is complete (a natural, 4 cards) and the dealer presses no
    # RESULT: coup 3's first three cards wait past its tableau, its fourth
    # is lost on the line, its fifth and RESULT come. The waiting cards, the
    # frame lost and the card after it may be coup 3 (four cards or more
    # before the next RESULT are the next coup) or coup 2's extra cards:
    # the engine placed them as extra cards and numbered coup 4 as 3,
    # unflagged (the dealer model: "numbering off by -1, not flagged").
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"])
    frames += [Card(T0, 9 + i, c) for i, c in enumerate(("8D", "2C", "KD", "5C"))]
    frames += [Card(T0, 13 + i, c) for i, c in enumerate(("2D", "TH", "4C"))]
    frames += [SequenceGap(T0, 17, 16, 1), Card(T0, 17, "KS"), Button(T0, 18, "RESULT")]
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert "COUP_NUMBERING_LOST" in alerts(out)
    # the next coup's number is not guessed: void until an accept
    out = [ev for f in coup_frames([["QC", "2H", "4D", "6D"]], seq=19, t=T0 + 11) for ev in e.feed(f)]
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == []
    reply, out = e.command(Accept(id="a", coup=5, confirm=True), T0 + 12)
    assert reply["ok"] is True, reply
    out = [ev for f in coup_frames([["8C", "2S", "KS", "5S"]], seq=24, t=T0 + 13) for ev in e.feed(f)]
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == [5]


def test_held_frames_dealt_on_at_newshoe_count_no_overrun_coup() -> None:
    # Coup 2's B1 comes unread and nobody enters it: every later frame is
    # held (the cut card after coup 2's RESULT, coups 3 and 4, the last,
    # and coup 5, dealt past it). NEWSHOE ends the shoe and the held frames
    # are dealt on: coup 5 is void as past the last permitted coup, and
    # shoe.ended counted it among the shoe's coups (5; 4 were dealt), where
    # a shoe ended by its last coup never does (the dealer model's '-' rows).
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"])
    frames += [Card(T0, 9, "8D"), Card(T0, 10, None), Card(T0, 11, "KD"), Card(T0, 12, "5C")]
    frames += [Button(T0, 13, "RESULT"), CutCard(T0, 14)]
    frames += coup_frames(
        [["7H", "7D", "TC", "JS"], ["9D", "KC", "TH", "QD"], ["8C", "2H", "KS", "5S"]], seq=15
    )
    frames.append(Button(T0, 30, "NEWSHOE"))
    out = [ev for f in frames for ev in e.feed(f)]
    assert ("CUT_CARD_OVERRUN", 5) in [(m["code"], m["coup"]) for m in out if m["type"] == "misdeal"]
    ended = [x for x in out if x["type"] == "shoe.ended"]
    assert [(x["coups"], x.get("coups_exact", True)) for x in ended] == [(4, True)]


def test_an_accept_while_cards_wait_after_an_early_result_numbers_the_coup_after_them() -> None:
    # The numbering is lost (5 frames lost after coup 2). A coup is dealt
    # to three cards, RESULT pressed early; four cards come, waiting for
    # the next RESULT (its due card, or the next coup). The supervisor then
    # says the next coup is 7: those four cards were dealt before the
    # command. The number was given to the coup they opened, and checked
    # again there without them: refused ("out of range"), so coup 7, dealt
    # after the command, was void with its number unknown.
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"], ["8D", "2C", "KD", "5C"])
    frames.append(SequenceGap(T0, 19, 14, 5))
    frames += coup_frames([["7H", "7D", "TC", "JS"]], seq=19)
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert alerts(out) == ["COUP_NUMBERING_LOST"]
    t = T0 + 11
    frames = [Card(t, 24, "3S"), Card(t, 25, "4S"), Card(t, 26, "2D"), Button(t, 27, "RESULT")]
    frames += [Card(t, 28 + i, c) for i, c in enumerate(("9D", "KC", "TH", "QD"))]
    out = [ev for f in frames for ev in e.feed(f)]
    reply, out = e.command(Accept(id="a", coup=7, confirm=True), t + 1)
    assert reply["ok"] is True, reply
    out = list(e.feed(Button(t + 2, 32, "RESULT")))
    out += [ev for f in coup_frames([["8C", "2H", "KS", "5S"]], seq=33, t=t + 3) for ev in e.feed(f)]
    assert "COMMAND_REJECTED" not in alerts(out)
    assert [(r["coup"], r["player"]["cards"]) for r in out if r["type"] == "coup.result"] == [
        (7, ["8C", "KS"])
    ]


def test_an_accept_after_an_early_result_in_a_coup_whose_first_cards_were_lost_is_not_placed() -> None:
    # The numbering is lost (5 frames lost after coup 2: the engine's coup
    # 3 is physical coup 4). Physical coup 5 loses its first three cards on
    # the line; its fourth and its RESULT come: a RESULT after one card
    # read, which the engine read as pressed early, its due cards to
    # follow. The supervisor says the next coup is 6. Coup 6 is dealt (a
    # natural), its RESULT lost on the line, then coups 7 and 8. Whether
    # coup 6's first three cards were coup 5's due cards, no byte tells
    # (its first cards may have been lost): the engine took them so, the
    # fourth opened coup 6, and coup 8 was settled as coup 7 (the dealer
    # model: "numbering off by -1, not flagged"). The number cannot be
    # placed: the numbering stays lost until the next accept.
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"], ["8D", "2C", "KD", "5C"])
    frames.append(SequenceGap(T0, 19, 14, 5))
    frames += coup_frames([["7H", "7D", "TC", "JS"]], seq=19)
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert alerts(out) == ["COUP_NUMBERING_LOST"]
    t = T0 + 11
    frames = [SequenceGap(t, 27, 24, 3), Card(t, 27, "5H"), Button(t, 28, "RESULT")]
    out = [ev for f in frames for ev in e.feed(f)]
    reply, out = e.command(Accept(id="a", coup=6, confirm=True), t + 1)
    assert reply["ok"] is True, reply
    frames = [Card(t + 2, 29 + i, c) for i, c in enumerate(("9D", "KC", "TH", "QD"))]
    frames.append(SequenceGap(t + 3, 34, 33, 1))  # (coup 6's RESULT)
    frames += coup_frames([["8C", "2H", "KS", "5S"], ["9C", "KS", "TD", "QS"]], seq=34, t=t + 3)
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(t + 10)
    assert [(r["coup"], r["player"]["cards"]) for r in out if r["type"] == "coup.result"] == []
    assert "COUP_NUMBERING_LOST" in alerts(out)
    reply, out = e.command(Accept(id="b", coup=9, confirm=True), t + 11)
    assert reply["ok"] is True, reply
    out = [ev for f in coup_frames([["9H", "KD", "TC", "QC"]], seq=44, t=t + 12) for ev in e.feed(f)]
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == [9]


def test_an_early_result_after_a_lost_result_loses_the_numbering() -> None:
    # Coup 2 is a natural, its RESULT lost on the line; coup 3 is dealt to
    # two cards and RESULT is pressed early, then its four due cards and
    # RESULT. One frame lost after a complete tableau, then two cards and a
    # RESULT: the frame was coup 2's RESULT and this one coup 3's, pressed
    # early, or the two cards were coup 2's extra cards and this RESULT its
    # own. The engine took the second reading only (a coup has 4 cards at
    # its RESULT), so coup 3's due cards opened coup 3 afresh and it was
    # settled with the next coup's first cards (the dealer model: "settled,
    # but the rules void this coup"). Neither is taken: coup 3 is void and
    # the numbering lost until an accept.
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"])
    frames += [Card(T0, 9 + i, c) for i, c in enumerate(("7H", "AH", "AC", "2C"))]
    frames += [SequenceGap(T0, 14, 13, 1), Card(T0, 14, "AD"), Card(T0, 15, "2S"), Button(T0, 16, "RESULT")]
    frames += [Card(T0, 17 + i, c) for i, c in enumerate(("2D", "KH", "2H", "JH"))]
    frames.append(Button(T0, 21, "RESULT"))
    frames += coup_frames([["8C", "JS", "QC", "9D"]], seq=22)
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == [1, 2]
    assert "COUP_NUMBERING_LOST" in alerts(out)
    assert (3, "SEQUENCE_GAP") in [(v["coup"], v["code"]) for v in out if v["type"] == "coup.void"]
    reply, out = e.command(Accept(id="a", coup=5, confirm=True), T0 + 11)
    assert reply["ok"] is True, reply
    out = [ev for f in coup_frames([["9H", "KD", "TC", "QC"]], seq=27, t=T0 + 12) for ev in e.feed(f)]
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == [5]


def test_a_jam_while_cards_wait_past_a_complete_tableau_is_flagged_on_their_coup() -> None:
    # Coup 2 is complete (a natural, 4 cards) and the dealer presses no
    # RESULT: coup 3's first card waits past coup 2's tableau, the device
    # jams and clears, then coup 3's next three cards come (four cards: the
    # next coup). The DEVICE_FAULT was put on coup 2 (the coup in play when
    # the jam came), and coup 3, where it happened, had no flag.
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"], ["8D", "2C", "KD", "5C"])[:-1]  # (no RESULT)
    frames += [Card(T0, 13, "2D"), Status(T0, 14, "JAM"), Status(T0, 15, "OK")]
    frames += [Card(T0, 16, "TH"), Card(T0, 17, "7C"), Card(T0, 18, "KS"), Button(T0, 19, "RESULT")]
    out = [ev for f in frames for ev in e.feed(f)]
    assert [s["code"] for s in out if s["type"] == "device.status"] == ["HELLO", "JAM", "OK"]
    assert [(m["coup"], m["code"], m["action"]) for m in out if m["type"] == "misdeal"] == [
        (2, "MISSING_RESULT", "corrected"),
        (3, "DEVICE_FAULT", "awaiting_supervisor"),
        (3, "DEVICE_FAULT", "corrected"),
    ]
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == [1, 2, 3]


def test_a_jam_while_cards_wait_past_a_complete_tableau_then_result_is_the_coups_own() -> None:
    # The same jam, but the dealer presses RESULT after two cards: they are
    # coup 2's extra cards, and the jam came in coup 2.
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"], ["8D", "2C", "KD", "5C"])[:-1]
    frames += [Card(T0, 13, "2D"), Status(T0, 14, "JAM"), Status(T0, 15, "OK")]
    frames += [Card(T0, 16, "TH"), Button(T0, 17, "RESULT")]
    out = [ev for f in frames for ev in e.feed(f)]
    assert [(m["coup"], m["code"], m["action"]) for m in out if m["type"] == "misdeal"] == [
        (2, "EXTRA_CARD", "corrected"),
        (2, "DEVICE_FAULT", "awaiting_supervisor"),
        (2, "DEVICE_FAULT", "corrected"),
        (2, "EXTRA_CARD", "corrected"),
    ]
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == [1, 2]


def test_a_restart_while_cards_wait_past_a_complete_tableau_loses_the_numbering() -> None:
    # Coup 2 is complete (a natural, 4 cards) and the dealer presses no
    # RESULT: coup 3's first two cards wait past its tableau, the device
    # restarts, coup 3's last two cards and its RESULT come. The waiting
    # cards, what the restart lost and the cards after it may be coup 3 or
    # coup 2's extra cards (as with a gap there): the engine took all four
    # as coup 2's extra cards and numbered coup 4 as 3, unflagged.
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"], ["8D", "2C", "KD", "5C"])[:-1]  # (no RESULT)
    frames += [Card(T0, 13, "2D"), Card(T0, 14, "TH"), Hello(T0, 0, "FAKE", "1.0", "1")]
    frames += [Card(T0, 1, "7C"), Card(T0, 2, "KS"), Button(T0, 3, "RESULT")]
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert "COUP_NUMBERING_LOST" in alerts(out)
    out = [ev for f in coup_frames([["8C", "2S", "KS", "5S"]], seq=4, t=T0 + 11) for ev in e.feed(f)]
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == []
    reply, out = e.command(Accept(id="a", coup=5, confirm=True), T0 + 12)
    assert reply["ok"] is True, reply
    out = [ev for f in coup_frames([["9C", "2H", "KC", "5H"]], seq=9, t=T0 + 13) for ev in e.feed(f)]
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == [5]


def test_four_cards_after_a_restart_past_a_complete_tableau_are_the_next_coup() -> None:
    # Coup 2 is complete and the device restarts (nothing lost); the
    # dealer presses no RESULT and deals coup 3 (four cards) and its
    # RESULT, then coup 4. Four cards past a complete tableau before the
    # next RESULT are the next coup (docs/dealing-errors.md, "A RESULT never pressed"): at
    # coup 2's deadline they were taken as its extra cards, and coup 4 was
    # settled as coup 3.
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"], ["8D", "2C", "KD", "5C"])[:-1]  # (no RESULT)
    frames += [Hello(T0, 0, "FAKE", "1.0", "1")]
    frames += [Card(T0, 1, c) for c in ("2D", "TH", "7C", "KS")] + [Button(T0, 5, "RESULT")]
    frames += coup_frames([["8C", "2S", "KS", "5S"]], seq=6, t=T0 + 1)
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    voids = [(v["coup"], [c["card"] for c in v["cards"]]) for v in out if v["type"] == "coup.void"]
    assert voids == [(2, ["8D", "2C", "KD", "5C"]), (3, ["2D", "TH", "7C", "KS"])]
    assert [(r["coup"], r["player"]["cards"]) for r in out if r["type"] == "coup.result"] == [
        (1, ["9S", "TS"]),
        (4, ["8C", "KS"]),
    ]


def test_an_accept_after_an_early_result_read_after_a_lost_result_is_not_placed() -> None:
    # Coup 2 is a natural and its RESULT is never pressed; coup 3's first
    # three cards are lost on the line, its fourth and its RESULT come. One
    # reading: extra cards of coup 2 and its RESULT; another: coup 2's
    # RESULT lost and coup 3's pressed early; the true one (coup 2's RESULT
    # not pressed) no count tells: coup 3 is void, the numbering lost. The
    # supervisor says the next coup is 4, and coups 4 and 5 are dealt. The
    # void coup 3 took coup 4's cards, and coup 5 was settled as coup 4.
    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"])
    frames += [Card(T0, 9 + i, c) for i, c in enumerate(("8D", "2C", "KD", "5C"))]
    frames += [SequenceGap(T0, 16, 13, 3), Card(T0, 16, "3H"), Button(T0, 17, "RESULT")]
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert "COUP_NUMBERING_LOST" in alerts(out)
    reply, out = e.command(Accept(id="a", coup=4, confirm=True), T0 + 11)
    assert reply["ok"] is True, reply
    frames = coup_frames([["9D", "KC", "TH", "QD"], ["8C", "2H", "KS", "5S"]], seq=18, t=T0 + 12)
    out = [ev for f in frames for ev in e.feed(f)]
    assert [(r["coup"], r["player"]["cards"]) for r in out if r["type"] == "coup.result"] == []
    assert "COUP_NUMBERING_LOST" in alerts(out)
    reply, out = e.command(Accept(id="b", coup=6, confirm=True), T0 + 13)
    assert reply["ok"] is True, reply
    out = [ev for f in coup_frames([["9H", "KD", "TC", "QC"]], seq=28, t=T0 + 14) for ev in e.feed(f)]
    assert [r["coup"] for r in out if r["type"] == "coup.result"] == [6]


def angel(*cards: tuple[str, str]) -> list[Frame]:
    """Cards as an Angel Eye places them, (card, label), then its result."""
    out: list[Frame] = [Card(T0, None, c, hand=h) for c, h in cards]
    return [*out, DeviceResult(T0, None, "banker", False, False)]


def test_an_angel_eye_coup_voided_after_its_early_result_leaves_the_p1_card_to_the_next_coup() -> None:
    # Coup 1 (Player 2+3, P3 due) has its result early, and is voided (by
    # a supervisor) before its due card. The device then places the next
    # coup's cards on P1, B1, P2, B2: they were coup 1's P3, B3 and extra
    # cards, the result closed coup 1, and coup 3 was numbered 2.
    e = engine()
    frames: list[Frame] = [Hello(T0, None, "ANGEL-EYE", "1.0", "1"), Card(T0, None, "AS", hand="first")]
    frames += [Card(T0, None, "2S", hand="burn")]
    frames += angel(("2D", "P1"), ("4C", "B1"), ("3H", "P2"), ("KC", "B2"))  # (result: P3 due)
    out = [ev for f in frames for ev in e.feed(f)]
    assert [m["code"] for m in out if m["type"] == "misdeal"] == ["PREMATURE_RESULT"]
    reply, out = e.command({"id": "v", "cmd": "void", "coup": 1, "reason": "dealer error"}, T0 + 1)
    assert reply["ok"] is True, reply
    frames = angel(("9S", "P1"), ("KH", "B1"), ("TS", "P2"), ("QH", "B2"))
    frames += angel(("8D", "P1"), ("2C", "B1"), ("KD", "P2"), ("5C", "B2"))
    out += [ev for f in frames for ev in e.feed(f)]
    assert [(r["coup"], r["player"]["cards"]) for r in out if r["type"] == "coup.result"] == [
        (2, ["9S", "TS"]),
        (3, ["8D", "KD"]),
    ]
    assert [v["coup"] for v in out if v["type"] == "coup.void"] == [1]


def test_an_angel_eye_coup_voided_before_its_early_result_keeps_the_cards_it_places_after_it() -> None:
    # Coup 1 is voided (by a supervisor) after its first two cards; the
    # dealer presses RESULT early, then deals its P2 and B2 (so the device
    # places them) and RESULT again, then coup 2. Its RESULT before four
    # cards was taken as the end of a coup abandoned there: P2 and B2
    # opened coup 2 (WRONG_HAND), and the real coup 2 was numbered 3.
    e = engine()
    frames: list[Frame] = [Hello(T0, None, "ANGEL-EYE", "1.0", "1"), Card(T0, None, "AS", hand="first")]
    frames += [
        Card(T0, None, "2S", hand="burn"),
        Card(T0, None, "2D", hand="P1"),
        Card(T0, None, "4C", hand="B1"),
    ]
    out = [ev for f in frames for ev in e.feed(f)]
    reply, out = e.command({"id": "v", "cmd": "void", "coup": 1, "reason": "dealer error"}, T0 + 1)
    assert reply["ok"] is True, reply
    frames = [DeviceResult(T0, None, "tie", False, False), *angel(("3H", "P2"), ("KC", "B2"))]
    frames += angel(("9S", "P1"), ("KH", "B1"), ("TS", "P2"), ("QH", "B2"))
    out += [ev for f in frames for ev in e.feed(f)]
    assert [(r["coup"], r["player"]["cards"]) for r in out if r["type"] == "coup.result"] == [
        (2, ["9S", "TS"])
    ]
    assert [(c["coup"], c["position"], c["card"]) for c in out if c["type"] == "card"][:2] == [
        (1, "P2", "3H"),
        (1, "B2", "KC"),
    ]
    assert "WRONG_HAND" not in [m["code"] for m in out if m["type"] == "misdeal"]


def unread() -> list[Frame]:
    """An unread card as an Angel Eye reports it: an error and its clearing."""
    return [Status(T0, None, "ERROR", UNREAD_CARD_ERROR), Status(T0, None, "OK", "error cleared")]


def angel_shoe() -> list[Frame]:
    return [
        Hello(T0, None, "ANGEL-EYE", "1.0", "1"),
        Card(T0, None, "AS", hand="first"),
        Card(T0, None, "2S", hand="burn"),
    ]


def test_an_angel_eye_unread_card_before_a_b1_card_after_an_early_result_opens_the_next_coup() -> None:
    # Coup 1's result comes after three cards (void), then its due card
    # never comes: the next coup's P1 is unread (the device reports only
    # an error), then cards it places on B1, P2, B2, and its result. No
    # card was placed on P1, so all were taken as coup 1's due cards and
    # extra cards: coup 2 was never opened.
    e = engine()
    frames = angel_shoe() + angel(("2D", "P1"), ("4C", "B1"), ("3H", "P2"))
    frames += unread() + angel(("KH", "B1"), ("TS", "P2"), ("QH", "B2"))
    out = [ev for f in frames for ev in e.feed(f)]
    cards = [(c["coup"], c["position"], c["card"]) for c in out if c["type"] == "card" and c["coup"] == 2]
    assert cards == [(2, "P1", None), (2, "B1", "KH"), (2, "P2", "TS"), (2, "B2", "QH")]


def test_an_angel_eye_unread_card_before_a_b1_card_past_a_complete_tableau_opens_the_next_coup() -> None:
    # Coup 1 is complete (a natural) and its result never arrives; the
    # next coup's P1 is unread, then cards placed on B1, P2, B2. The
    # unread card waited past the tableau, and the cards placed on B1, P2
    # and B2 were taken as coup 1's extra cards (then the unread one too).
    e = engine()
    frames = angel_shoe() + [
        Card(T0, None, c, hand=h) for c, h in (("9S", "P1"), ("KH", "B1"), ("TS", "P2"), ("QH", "B2"))
    ]
    frames += unread() + angel(("KD", "B1"), ("TH", "P2"), ("QD", "B2"))
    out = [ev for f in frames for ev in e.feed(f)]
    cards = [(c["coup"], c["position"], c["card"]) for c in out if c["type"] == "card" and c["coup"] == 2]
    assert cards == [(2, "P1", None), (2, "B1", "KD"), (2, "P2", "TH"), (2, "B2", "QD")]
    assert [(r["coup"], r["player"]["cards"]) for r in out if r["type"] == "coup.result"] == [
        (1, ["9S", "TS"])
    ]
    assert "MISSING_RESULT" in [m["code"] for m in out if m["type"] == "misdeal"]
    assert "EXTRA_CARD" not in [m["code"] for m in out if m["type"] == "misdeal"]


def test_an_angel_eye_result_after_an_early_results_wait_is_compared_with_the_coup_it_closes() -> None:
    # Coup 1's result comes after two cards (void); the next coup's cards
    # wait for the next result, which tells whose they are: placed from
    # P1, coup 2's. The device announces Banker for Player's 9: the coup
    # was settled by the tableau with no SHOE_DISAGREES (the device's
    # result was applied as a plain RESULT there).
    e = engine()
    frames = angel_shoe() + angel(("2D", "P1"), ("4C", "B1"))
    frames += [Card(T0, None, c, hand=h) for c, h in (("9S", "P1"), ("KH", "B1"), ("TS", "P2"), ("QH", "B2"))]
    frames.append(DeviceResult(T0, None, "banker", False, False))
    out = [ev for f in frames for ev in e.feed(f)]
    assert [(r["coup"], r["winner"]) for r in out if r["type"] == "coup.result"] == [(2, "player")]
    assert [(m["coup"], m["code"]) for m in out if m["type"] == "misdeal"][-1] == (2, "SHOE_DISAGREES")


def test_an_angel_eye_coup_after_a_lost_result_keeps_the_due_cards_of_its_early_result() -> None:
    # Coup 2 is voided after three cards; its B2 and result are lost (how
    # many frames, an Angel Eye cannot say). The next coup's P1 comes and
    # its result after that one card, then its due cards (placed B1, P2,
    # B2) and its result again. Coup 3 (its first frames may be lost, void)
    # ended at the early result, and its due cards opened coup 4: the next
    # coup dealt, 4, was refused ("coup numbers below 5 are taken").
    e = engine()
    frames = angel_shoe() + angel(("9S", "P1"), ("KH", "B1"), ("TS", "P2"), ("QH", "B2"))
    frames += [Card(T0, None, c, hand=h) for c, h in (("2D", "P1"), ("4C", "B1"), ("3H", "P2"))]
    out = [ev for f in frames for ev in e.feed(f)]
    reply, out = e.command({"id": "v", "cmd": "void", "coup": 2, "reason": "dealer error"}, T0 + 1)
    assert reply["ok"] is True, reply
    frames = [SequenceGap(T0, None, 70, 1, exact=False), *angel(("KS", "P1"))]
    frames += angel(("TD", "B1"), ("8C", "P2"), ("QC", "B2"))
    out += [ev for f in frames for ev in e.feed(f)]
    assert "COUP_NUMBERING_LOST" in alerts(out)
    assert [(c["coup"], c["position"], c["card"]) for c in out if c["type"] == "card"] == [
        (3, "extra", x) for x in ("KS", "TD", "8C", "QC")
    ]
    reply, out = e.command(Accept(id="a", coup=4, confirm=True), T0 + 2)
    assert reply["ok"] is True, reply


def test_an_angel_eye_phantom_coup_keeps_the_cards_it_places_after_its_early_result() -> None:
    # Coup 2's B2 and result are lost (an unknown number of frames); the
    # next coup's four cards come, its result early (P3 due), its P3 and
    # B3 and its result again, then coup 4's cards. At the deadline coup 3
    # is counted from the cards read (void, its first frames may be lost),
    # and its P3 and B3 opened a coup of their own: the next coup dealt,
    # 4, was refused ("coup numbers below 5 are taken").
    e = engine()
    frames = angel_shoe() + angel(("9S", "P1"), ("KH", "B1"), ("TS", "P2"), ("QH", "B2"))
    frames += [Card(T0, None, c, hand=h) for c, h in (("2D", "P1"), ("4C", "B1"), ("3H", "P2"))]
    frames.append(SequenceGap(T0, None, 70, 1, exact=False))
    frames += angel(("JC", "P1"), ("JD", "B1"), ("JH", "P2"), ("TD", "B2"))  # (result early: P3 due)
    frames += angel(("8S", "P3"), ("8D", "B3"))
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert "COUP_NUMBERING_LOST" in alerts(out)
    assert [(c["coup"], c["position"], c["card"]) for c in out if c["type"] == "card" and c["coup"] == 3] == [
        (3, "extra", x) for x in ("JC", "JD", "JH", "TD", "8S", "8D")
    ]
    reply, out = e.command(Accept(id="a", coup=4, confirm=True), T0 + 11)
    assert reply["ok"] is True, reply


def test_an_angel_eye_card_placed_on_p1_mid_coup_is_a_loss_the_seq_did_not_show() -> None:
    # Coup 1's B2, P3 and result are lost where the seq cannot show it (at
    # the top of a cycle not yet learned): the next card the shoe places on
    # P1. It was taken as coup 1's B2 (WRONG_HAND), the next coup's cards
    # as coup 1's, and coup 1 void at the deadline: the coup after counted
    # one too few, with no flag on the numbering.
    e = engine()
    frames = angel_shoe() + [Card(T0, None, c, hand=h) for c, h in (("2D", "P1"), ("4C", "B1"), ("3H", "P2"))]
    frames += angel(("AH", "P1"), ("TD", "B1"), ("AC", "P2"), ("3D", "B2"), ("5S", "P3"))
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    misdeals = [(m["coup"], m["code"]) for m in out if m["type"] == "misdeal"]
    assert (1, "SEQUENCE_GAP") in misdeals and "WRONG_HAND" not in [c for _, c in misdeals]
    assert "COUP_NUMBERING_LOST" in alerts(out)
    assert (1, "B2", "AH") not in [(c["coup"], c["position"], c["card"]) for c in out if c["type"] == "card"]
