"""The two classes of wrong numbering, on every
protocol and card count where they arise. Each shoe is encoded by the
protocol's own encoder and read back by its decoder, then fed to the
engine as the daemon would; what is checked is the game record: every
coup's number, its settled hands, the void coup, ``shoe.ended``'s count
and the alerts.

1. A RESULT before the first four cards (1, 2 or 3), then the coup's
   missing cards (exactly, fewer or one more) and a second RESULT: the
   coup is void, and the cards and the second RESULT are its own (docs/dealing-errors.md,
   "Dealing errors": fewer than four cards before the next RESULT are the
   voided coup's due cards), so every later coup keeps its number.
2. An Angel Eye shoe labels every card's place itself: a burn one card
   short or one card long is an alert (BURN_MISMATCH, with both counts);
   the labels decide where each card goes, and coup 1 starts at the first
   card placed on a hand.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.cards import CARD_VALUE
from controller.engine import Engine
from controller.events import Event
from controller.rules import load_profile
from firmware_protocols.detect import make_decoder, make_encoder
from firmware_protocols.frames import Button, Card, DeviceResult, Frame, Hello

T0 = 1_763_800_000.0
ANGEL = "angel-eye/2"
PROTOCOLS = ["shoe-ascii/1", "shoe-bin/1", ANGEL]
CYCLE = "0123456789ABCDEF"  # the Angel Eye seq cycle the fake sends

Hand = list[str]
Coup = tuple[Hand, Hand]

#: the coup dealt with the early RESULT: both hands draw (6 cards)
DRAWS: Coup = (["2D", "TD", "7C"], ["9D", "6H", "TD"])
#: as above, the Banker standing (5 cards): the cards after its first are
#: also a whole coup by themselves (P TS 6D, B 8D 8D: both stand on 6)
EITHER_WAY: Coup = (["6H", "8D", "8D"], ["TS", "6D"])
#: coups dealt clean after it
LATER: list[Coup] = [
    (["9S", "KH"], ["2C", "3D"]),
    (["8C", "KD"], ["KC", "4H"]),
    (["5H", "2D"], ["3S", "3C"]),
]
EXTRA = "7S"  # a card past a complete tableau


def order(coup: Coup) -> list[tuple[str, str]]:
    """(position, card) in the order dealt: P1 B1 P2 B2 [P3] [B3]."""
    p, b = coup
    out = [("P1", p[0]), ("B1", b[0]), ("P2", p[1]), ("B2", b[1])]
    out += [("P3", p[2])] if len(p) > 2 else []
    out += [("B3", b[2])] if len(b) > 2 else []
    return out


def winner(coup: Coup) -> str:
    p, b = (sum(CARD_VALUE[c] for c in hand) % 10 for hand in coup)
    return "player" if p > b else "banker" if b > p else "tie"


class Dealer:
    """The frames a shoe sends for what the dealer does, in the protocol's
    terms (Angel Eye: no NEWSHOE, each card labelled, ``G`` for RESULT)."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.angel = protocol == ANGEL
        self.frames: list[Frame] = []

    def _add(self, make: Any) -> None:
        i = len(self.frames)
        seq = ord(CYCLE[i % len(CYCLE)]) if self.angel else i
        self.frames.append(make(T0 + 0.05 * i, seq))

    def start(self, first: str, burn: list[str]) -> None:
        self._add(lambda t, q: Hello(t, q, "ANGEL-EYE" if self.angel else "TEST", "", ""))
        if not self.angel:
            self._add(lambda t, q: Button(t, q, "NEWSHOE"))
        self.card(first, "first")
        for c in burn:
            self.card(c, "burn")

    def card(self, code: str, label: str) -> None:
        hand = label if self.angel else None
        self._add(lambda t, q: Card(t, q, code, hand=hand))

    def result(self, coup: Coup) -> None:
        if self.angel:
            p, b = coup
            pairs = (p[0][0] == p[1][0] if len(p) > 1 else False, b[0][0] == b[1][0] if len(b) > 1 else False)
            self._add(lambda t, q: DeviceResult(t, q, winner(coup), *pairs))
        else:
            self._add(lambda t, q: Button(t, q, "RESULT"))

    def coup(self, coup: Coup) -> None:
        for pos, c in order(coup):
            self.card(c, pos)
        self.result(coup)

    def end_shoe(self) -> None:
        if self.angel:
            self.card("AS", "first")  # (an Angel Eye's next shoe starts at its first card)
        else:
            self._add(lambda t, q: Button(t, q, "NEWSHOE"))

    def events(self) -> list[Event]:
        """The frames through the protocol's encoder and decoder, into an
        engine; then the deadlines passed."""
        enc, dec = make_encoder(self.protocol), make_decoder(self.protocol)
        data = b"".join(enc.encode(f) for f in self.frames)
        decoded = dec.feed(self.frames[-1].t, data)
        assert len(decoded) == len(self.frames), dec.stats
        engine = Engine("T01", load_profile("punto_banco"), 8)
        out = [e for f in decoded for e in engine.feed(f)]
        return out + engine.tick(self.frames[-1].t + 3600)


def hands(r: Event) -> Coup:
    return r["player"]["cards"], r["banker"]["cards"]


def record(events: list[Event]) -> dict[str, Any]:
    """What the checks compare: per shoe (the first), every coup's end."""
    first = events[0]["shoe"] if events[0]["shoe"] else events[1]["shoe"]
    es = [e for e in events if e["shoe"] == first]
    return {
        "results": [(r["coup"], hands(r)) for r in es if r["type"] == "coup.result"],
        "voids": [(v["coup"], v["code"]) for v in es if v["type"] == "coup.void"],
        "misdeals": [(m["coup"], m["code"], m["action"]) for m in es if m["type"] == "misdeal"],
        "alerts": [(a["code"], a["detail"]) for a in es if a["type"] == "security.alert"],
        "ended": [e["coups"] for e in es if e["type"] == "shoe.ended"],
        "burn": [e["burned"] for e in es if e["type"] == "shoe.burn"],
        "cards": [(c["coup"], c["position"], c["card"]) for c in es if c["type"] == "card"],
    }


LATER_RESULTS = [(n, coup) for n, coup in enumerate(LATER, start=2)]


# --- 1. RESULT before four cards ------------------------------------------


def early_result_shoe(protocol: str, coup1: Coup, k: int, completion: str) -> Dealer:
    """Coup 1: ``k`` cards, RESULT, then its missing cards (``exact``), all
    but the last (``fewer``) or one more (``more``), RESULT again; then the
    later coups, dealt clean, and the shoe ends."""
    d = Dealer(protocol)
    d.start("AS", ["2C"])
    dealt = order(coup1)
    for pos, c in dealt[:k]:
        d.card(c, pos)
    d.result(coup1)
    missing = dealt[k:]
    if completion == "fewer":
        missing = missing[:-1]
    for pos, c in missing:
        d.card(c, pos)
    if completion == "more":
        d.card(EXTRA, "P3" if len(coup1[0]) < 3 else "B3" if len(coup1[1]) < 3 else "burn")
    d.result(coup1)
    for coup in LATER:
        d.coup(coup)
    d.end_shoe()
    return d


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("completion", ["exact", "fewer", "more"])
@pytest.mark.parametrize("coup1", [DRAWS, EITHER_WAY], ids=["draws", "either-way"])
def test_the_cards_after_a_result_before_four_cards_are_the_void_coups_own(
    protocol: str, k: int, completion: str, coup1: Coup
) -> None:
    got = record(early_result_shoe(protocol, coup1, k, completion).events())
    # every later coup under the number the dealer dealt it, as dealt
    assert got["results"] == LATER_RESULTS
    assert got["ended"] == [1 + len(LATER)]
    # coup 1 void once, at its early RESULT
    assert got["voids"] == [(1, "PREMATURE_RESULT")]
    assert got["misdeals"] == [(1, "PREMATURE_RESULT", "void")]
    # its cards, the missing ones included, all shown as coup 1's
    dealt = order(coup1)
    shown = dealt if completion != "fewer" else dealt[:-1]
    want = [(1, pos, c) for pos, c in shown] + ([(1, "extra", EXTRA)] if completion == "more" else [])
    assert [c for c in got["cards"] if c[0] == 1] == want
    assert not [a for a in got["alerts"] if a[0] != "EXTRA_CARD"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_whole_new_coup_after_a_result_at_three_cards_is_the_next_coup(protocol: str) -> None:
    # The dealer presses RESULT after three cards and deals a whole new
    # coup instead (capture hold_result_before_four_cards): its cards are
    # no due cards (one would be, then three extra cards): coup 2, settled.
    # (an Angel Eye places the new coup's first card on P1 itself)
    d = Dealer(protocol)
    d.start("AS", ["2C"])
    for pos, c in order(DRAWS)[:3]:
        d.card(c, pos)
    d.result(DRAWS)
    for coup in LATER:
        d.coup(coup)
    d.end_shoe()
    got = record(d.events())
    assert got["results"] == LATER_RESULTS
    assert got["misdeals"] == [(1, "PREMATURE_RESULT", "void")]
    assert got["voids"] == [(1, "PREMATURE_RESULT")]
    assert got["ended"] == [1 + len(LATER)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cards_past_the_due_ones_that_are_a_whole_coup_by_themselves_are_the_next_coup(protocol: str) -> None:
    # RESULT after P 2S / B KH; then 3D 5C 4H 9C 7S and RESULT. Read as
    # coup 1's due cards, 7S is one more (an extra card: a second error);
    # read alone they are one whole coup (P 3D 4H, B 5C 9C 7S), the dealer
    # having begun a new coup after the early RESULT (one error): coup 2.
    # An Angel Eye says which itself: its labels decide.
    coup1: Coup = (["2S", "3D", "4H"], ["KH", "5C", "9C"])
    got = record(early_result_shoe(protocol, coup1, 2, "more").events())
    if protocol == ANGEL:  # it placed them on P2, B2, P3, B3 and burn: coup 1's
        assert got["results"] == LATER_RESULTS and got["ended"] == [1 + len(LATER)]
        assert [c for c in got["cards"] if c[0] == 1][-1] == (1, "extra", EXTRA)
        return
    assert got["results"] == [(2, (["3D", "4H"], ["5C", "9C", EXTRA]))] + [
        (n + 1, coup) for n, coup in LATER_RESULTS
    ]
    assert got["voids"] == [(1, "PREMATURE_RESULT")]
    assert got["ended"] == [2 + len(LATER)]


# --- 2. Angel Eye: the device's labels decide where the burn ends ---------


def angel_burn_shoe(burned: int) -> Dealer:
    """First card 5D (5 to burn), ``burned`` cards labelled burn, then the
    coups, every card labelled with its place."""
    d = Dealer(ANGEL)
    d.start("5D", ["2H", "3H", "4H", "6H", "7H", "8H", "9H"][:burned])
    for coup in [DRAWS, *LATER]:
        d.coup(coup)
    d.end_shoe()
    return d


@pytest.mark.parametrize("burned", [3, 4, 5, 6, 7])
def test_an_angel_eye_burn_off_by_some_is_an_alert_and_every_coup_stands(burned: int) -> None:
    got = record(angel_burn_shoe(burned).events())
    assert got["results"] == [(1, DRAWS), *LATER_RESULTS]
    assert got["ended"] == [1 + len(LATER)]
    assert got["voids"] == [] and got["misdeals"] == []
    assert got["burn"] == [min(burned, 5)]
    # every card labelled burn is a burn card, in no coup
    assert [c for c in got["cards"] if c[0] is None][1:] == [
        (None, "burn", c) for c in ["2H", "3H", "4H", "6H", "7H", "8H", "9H"][:burned]
    ]
    mismatch = [detail for code, detail in got["alerts"] if code == "BURN_MISMATCH"]
    if burned == 5:
        assert got["alerts"] == []
    else:
        # once, with the count called and the count burned
        assert len(mismatch) == 1 and got["alerts"] == [("BURN_MISMATCH", mismatch[0])]
        assert "calls for 5 burn card(s)" in mismatch[0] and f"{burned} burned" in mismatch[0]


@pytest.mark.parametrize("protocol", ["shoe-ascii/1", "shoe-bin/1"])
def test_the_other_protocols_label_no_card_so_the_count_decides_there(protocol: str) -> None:
    with pytest.raises(ValueError):
        make_encoder(protocol).encode(Card(T0, 1, "2H", hand="burn"))
    with pytest.raises(ValueError):
        make_encoder(protocol).encode(Card(T0, 1, "2H", hand="P1"))
