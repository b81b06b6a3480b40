"""A dealer model that knows the truth.

It deals shoes as a dealer physically does (8 decks shuffled by a seeded
RNG, the first card and its burn, coups by the tableau, the cut card and
one more coup), and makes the mistakes of docs/dealing-errors.md, "Dealing errors
(Article X)" where they happen at a real table: one kind of :data:`KINDS`
per coup it picks (or none). The frames go through the protocol's own
encoder and decoder, byte for byte, into a real :class:`Engine`; the
supervisor reacts to what the engine says (``enter_card``, ``void``,
``accept``) as one would at the table.

It records the truth: every physical coup's cards, its result by an
independent tableau (:func:`draws`, not the engine's), and whether the
rules void it. :func:`check` then reads the engine's events against it:

1. every ``coup.result`` has exactly the cards of one physical coup and
   that coup's winner and totals;
2. its number is the physical number, except in a stretch the engine has
   flagged (``COUP_NUMBERING_LOST`` until ``COUP_NUMBERING_RESTORED``);
3. every deviation injected is flagged (:data:`KINDS`' ``flags``);
4. nothing the rules void is settled; ``shoe.ended`` counts the coups dealt
   unless it says ``coups_exact: false``.

``python -m tests.dealer_model --coups 100000`` is the long run; it prints
the table of kinds (injected, flagged, violations).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from controller.engine import Engine
from controller.rules import load_profile
from firmware_protocols.detect import make_decoder, make_encoder
from firmware_protocols.frames import (
    UNREAD_CARD_ERROR,
    Button,
    Card,
    CutCard,
    DeviceResult,
    Frame,
    Hello,
    Status,
)

ASCII, BIN, ANGEL = "shoe-ascii/1", "shoe-bin/1", "angel-eye/2"
PROTOCOLS = (ASCII, BIN, ANGEL)
ALL = frozenset(PROTOCOLS)
LABELLESS = frozenset((ASCII, BIN))
RANKS = "A23456789TJQK"
SUITS = "SHDC"
DECKS = 8
DEADLINE_S = 120.0
T0 = 1_763_800_000.0
ANGEL_CYCLE = b"0123456789ABCDEF"

Event = dict[str, Any]


# --- the rules, written again here so the check is not circular -------------


def value(card: str) -> int:
    """Baccarat points of a card: A=1, 2-9 face value, T J Q K = 0."""
    r = RANKS.index(card[0]) + 1
    return r if r < 10 else 0


def total(cards: list[str]) -> int:
    return sum(value(c) for c in cards) % 10


def banker_draws(b: int, p3: int | None) -> bool:
    """Punto banco's Banker rule (Macau): on 0-2 always; 3 unless the Player's
    third is 8; 4 on 2-7; 5 on 4-7; 6 on 6-7; never on 7. Player stood: 0-5."""
    if p3 is None:
        return b <= 5
    return {0: True, 1: True, 2: True, 3: p3 != 8, 4: 2 <= p3 <= 7, 5: 4 <= p3 <= 7, 6: p3 in (6, 7)}.get(
        b, False
    )


def draws(cards: list[str]) -> list[str]:
    """The positions a coup takes from the cards ``cards`` (at least six
    given, in dealing order): P1 B1 P2 B2, then P3 and B3 as the tableau says."""
    pos = ["P1", "B1", "P2", "B2"]
    p, b = total([cards[0], cards[2]]), total([cards[1], cards[3]])
    if p >= 8 or b >= 8:
        return pos
    p3: int | None = None
    i = 4
    if p <= 5:
        pos.append("P3")
        p3 = value(cards[i])
        i += 1
    if banker_draws(b, p3):
        pos.append("B3")
    return pos


def outcome(player: list[str], banker: list[str]) -> tuple[str, int, int]:
    p, b = total(player), total(banker)
    return ("player" if p > b else "banker" if b > p else "tie"), p, b


# --- the kinds of deviation, and the flag each must raise -------------------


class Kind(NamedTuple):
    protocols: frozenset[str]
    #: any of these codes (a misdeal's, a void's or an alert's) flags it;
    #: ``face_up``: the card event says so; ``refused``: the reply did; empty:
    #: nothing to flag (see ``note``)
    flags: tuple[str, ...]
    #: what the rules make of the physical coup: settle, void or either
    #: (either: the engine cannot know it from the bytes; see ``note``)
    truth: str
    note: str


_GAP = ("SEQUENCE_GAP", "COUP_NUMBERING_LOST", "DEVICE_FAULT")
#: a restart among frames held behind an earlier loss: its device.status
#: (at once) is its flag; its coup is then settled only if its cards fit
_RESTART = (*_GAP, "HELLO")

#: kinds whose flag a void of their coup for another reason stands for
_VOID_EXEMPT = frozenset(
    (
        *("unread_enter_right", "unread_enter_wrong", "unread_deadline", "unread_void"),
        *("jam", "restart", "gap"),
        # (the dealing errors a coup already void raises no misdeal for: its
        # further cards are shown as dealt (extra cards included), a RESULT
        # or the device's result only closes it, a void or an accept has
        # nothing to act on; docs/dealing-errors.md, "Dealing errors")
        *("extra_card", "early_result_1", "early_result_2", "early_result_3", "early_result_due"),
        *("wrong_hand_accept", "wrong_hand_deadline", "device_disagrees", "supervisor_void"),
    )
)

#: Every kind the model injects: where, the flag it must raise, the truth.
KINDS: dict[str, Kind] = {
    "early_result_1": Kind(ALL, ("PREMATURE_RESULT",), "void", "RESULT after 1 card: void, due cards follow"),
    "early_result_2": Kind(ALL, ("PREMATURE_RESULT",), "void", "RESULT after 2 cards"),
    "early_result_3": Kind(ALL, ("PREMATURE_RESULT",), "void", "RESULT after 3 cards"),
    "early_result_due": Kind(
        ALL, ("PREMATURE_RESULT",), "settle", "RESULT with a third card due: corrected by the due card"
    ),
    "double_result": Kind(
        ALL, (), "settle", "exempt from the flag: a second RESULT with no coup open changes nothing"
    ),
    "no_result": Kind(
        LABELLESS,
        ("MISSING_RESULT", "EXTRA_CARD", "PREMATURE_RESULT", "COUP_NUMBERING_LOST", "SHOE_ENDED"),
        "either",
        "RESULT never pressed, the next coup dealt: four cards past a complete tableau are the next "
        "coup (docs/dealing-errors.md), the coup ends as dealt (MISSING_RESULT); fewer, extra cards; "
        "the shoe's last "
        "coup, then NEWSHOE: void with the shoe (SHOE_ENDED, a coup open when a new shoe is loaded)",
    ),
    "burn_short": Kind(frozenset((ANGEL,)), ("BURN_MISMATCH",), "settle", "one burn card fewer than called"),
    "burn_long": Kind(frozenset((ANGEL,)), ("BURN_MISMATCH",), "settle", "one burn card more than called"),
    "unread_enter_right": Kind(ALL, ("UNREAD_CARD",), "settle", "the supervisor enters the true card"),
    "unread_enter_wrong": Kind(
        ALL,
        ("UNREAD_CARD",),
        "entered",
        "the supervisor enters another card: refused (then voided), or applied with the entered card "
        "(the supervisor's record, UNREAD_CARD in its corrections)",
    ),
    "unread_deadline": Kind(ALL, ("UNREAD_CARD",), "void", "nobody enters it: void at the deadline"),
    "unread_void": Kind(ALL, ("UNREAD_CARD",), "void", "the supervisor voids it"),
    "exposed": Kind(LABELLESS, ("face_up",), "settle", "a card dealt face up: shown, the coup stands"),
    "extra_card": Kind(ALL, ("EXTRA_CARD",), "settle", "a card dropped past the complete tableau: burned"),
    "gap": Kind(ALL, _GAP, "either", "1-3 frames lost on the line: settled exactly or void"),
    "restart": Kind(ALL, _RESTART, "either", "the device restarts mid-coup (HELLO), 0-1 frames lost"),
    "jam": Kind(ALL, ("DEVICE_FAULT",), "settle", "a jam cleared by the device"),
    "foreign": Kind(LABELLESS, ("FOREIGN_CARD",), "void", "a card from a ninth deck"),
    "wrong_hand_accept": Kind(
        frozenset((ANGEL,)), ("WRONG_HAND",), "settle", "the device labels a card on the other hand; accepted"
    ),
    "wrong_hand_deadline": Kind(
        frozenset((ANGEL,)), ("WRONG_HAND",), "void", "the same, nobody accepts: void at the deadline"
    ),
    "device_disagrees": Kind(
        frozenset((ANGEL,)), ("SHOE_DISAGREES",), "settle", "the device announces the wrong winner"
    ),
    "supervisor_void": Kind(ALL, ("SUPERVISOR_VOID",), "void", "the supervisor voids the coup mid-deal"),
    "supervisor_void_unseen": Kind(
        ALL,
        (),
        "either",
        "exempt from the flag: the supervisor would void the coup mid-deal, but no card of it is shown "
        "(its frames are held behind an earlier coup's open misdeal, flagged there), so no void is sent: "
        "no deviation of its own (counted here, not as supervisor_void)",
    ),
    "shoe_ended": Kind(ALL, ("SHOE_ENDED",), "void", "a new shoe started with the coup half dealt"),
    "cut_overrun": Kind(ALL, ("CUT_CARD_OVERRUN",), "void", "a coup dealt past the last permitted"),
    "accept_right": Kind(
        ALL, ("COUP_NUMBERING_RESTORED",), "-", "accept with the true next coup after the numbering was lost"
    ),
    "accept_wrong": Kind(
        ALL,
        ("COUP_NUMBERING_RESTORED", "refused"),
        "-",
        "accept one too high: refused, or applied (the supervisor's number, recorded by the alert)",
    ),
}

#: kinds drawn per coup (the others are per shoe or reactive)
COUP_KINDS = [
    k
    for k in KINDS
    if k
    not in (
        "burn_short",
        "burn_long",
        "cut_overrun",
        "accept_right",
        "accept_wrong",
        "supervisor_void_unseen",
    )
]


# --- the truth ---------------------------------------------------------------


@dataclass
class Physical:
    """One coup as dealt at the table."""

    number: int
    positions: list[str]
    cards: list[str]
    kind: str | None = None
    #: settle, void, either, entered (settle with ``record`` if applied)
    truth: str = "settle"
    #: the hands the record must show when a supervisor's entry was applied
    record: tuple[list[str], list[str]] | None = None
    #: a supervisor's entry applied whose card makes the later cards' places
    #: differ from where they were dealt (the engine should refuse it)
    wrong_entry: bool = False

    def hands(self) -> tuple[list[str], list[str]]:
        if self.record is not None:
            return self.record
        p = [c for pos, c in zip(self.positions, self.cards, strict=True) if pos[0] == "P"]
        b = [c for pos, c in zip(self.positions, self.cards, strict=True) if pos[0] == "B"]
        return p, b


@dataclass
class TrueShoe:
    index: int
    coups: list[Physical] = field(default_factory=list)
    #: (true next coup, number accepted) for each accept the engine applied
    accepts: list[tuple[int, int]] = field(default_factory=list)
    #: kinds injected at shoe level (burn)
    shoe_kinds: list[str] = field(default_factory=list)
    #: the shoe ended with a coup half dealt
    cut_short: bool = False
    #: the engine's id of this shoe (its shoe after the burn)
    sid: str | None = None


@dataclass
class Violation:
    shoe: int
    coup: int | None
    kind: str | None
    what: str

    def __str__(self) -> str:
        return f"shoe {self.shoe} coup {self.coup} [{self.kind}]: {self.what}"


def _brief(e: Event) -> str:
    t = e["type"]
    if t == "card":
        return f"card {e['coup']} {e['position']} {e['card']}{' faceup' if e.get('face_up') else ''}"
    if t == "coup.result":
        return f"RESULT {e['coup']} P{e['player']['cards']} B{e['banker']['cards']} {e['winner']}"
    if t in ("misdeal", "coup.void", "security.alert"):
        return f"{t} {e.get('coup')} {e['code']} {e.get('action', '')} {e.get('detail', '')}"
    if t in ("odds.update", "roads"):
        return t
    return f"{t} {e.get('coup', '')}"


# --- the dealer --------------------------------------------------------------


class Dealer:
    """Deals ``protocol`` shoes with errors into a real engine (through the
    protocol's encoder and decoder) and keeps the truth."""

    def __init__(
        self, protocol: str, seed: int, error_rate: float = 0.5, kinds: Collection[str] | None = None
    ) -> None:
        self.protocol = protocol
        self.angel = protocol == ANGEL
        self.rng = random.Random(f"{protocol}:{seed}")
        self.error_rate = error_rate
        #: ``kinds``: only these are injected (all by default)
        self.kinds = [
            k for k in COUP_KINDS if protocol in KINDS[k].protocols and (kinds is None or k in kinds)
        ]
        self.burns = [k for k in ("burn_short", "burn_long") if kinds is None or k in kinds]
        self.enc = make_encoder(protocol)
        self.dec = make_decoder(protocol)
        self.engine = Engine("T01", load_profile("punto_banco", {"correction_deadline_s": DEADLINE_S}), DECKS)
        self.t = T0
        self.seq = 0
        self.events: list[Event] = []
        self.shoes: list[TrueShoe] = []
        self.injected: Counter[str] = Counter()
        self.replies: list[tuple[str, dict[str, Any]]] = []
        self._cmd = 0
        self._next_order: list[str] | None = None
        #: with ``trace``: every frame and event, for reading a failure
        self.trace: list[str] | None = None
        self._unread = 0
        self._cut_out = False
        self._cut_past_tableau = False

    # -- the wire -----------------------------------------------------------

    def _wire_seq(self) -> int:
        return ANGEL_CYCLE[self.seq % len(ANGEL_CYCLE)] if self.angel else self.seq % 65536

    def send(self, make: Callable[[float, int], Frame], lost: bool = False) -> None:
        """One frame: stamped, encoded, decoded and fed (or lost on the line:
        its sequence number is spent and nothing arrives)."""
        self.t += 0.5
        frame = make(self.t, self._wire_seq())
        self.seq += 1
        if self.trace is not None:
            self.trace.append(f"{'LOST ' if lost else '> '}{frame}")
        if lost:
            return
        for f in self.dec.feed(self.t, self.enc.encode(frame)):
            out = self.engine.feed(f)
            self.events.extend(out)
            if self.trace is not None:
                self.trace += [f"    {_brief(e)}" for e in out]

    def hello(self) -> None:
        self.seq = 0
        self.send(lambda t, q: Hello(t, q, "ANGEL-EYE" if self.angel else "MODEL", "1.0", "0001"))

    def card(
        self,
        code: str | None,
        label: str,
        *,
        lost: bool = False,
        face_up: bool = False,
        deck: int | None = None,
    ) -> None:
        if self.angel and code is None:
            # no unread-card code on this wire: the error instead of the card
            self.send(lambda t, q: Status(t, q, "ERROR", UNREAD_CARD_ERROR), lost=lost)
            self.send(lambda t, q: Status(t, q, "OK", "error cleared: " + UNREAD_CARD_ERROR), lost=lost)
            return
        hand = label if self.angel else None
        self.send(lambda t, q: Card(t, q, code, face_up=face_up, deck=deck, hand=hand), lost=lost)

    def result(
        self, player: list[str], banker: list[str], *, lost: bool = False, wrong: bool = False
    ) -> None:
        if self.angel:
            w, _, _ = outcome(player, banker) if len(player) >= 2 and len(banker) >= 2 else ("tie", 0, 0)
            if wrong:
                w = "player" if w != "player" else "banker"
            pp = len(player) >= 2 and player[0][0] == player[1][0]
            bp = len(banker) >= 2 and banker[0][0] == banker[1][0]
            self.send(lambda t, q: DeviceResult(t, q, w, pp, bp), lost=lost)
        else:
            self.send(lambda t, q: Button(t, q, "RESULT"), lost=lost)

    def tick(self, dt: float) -> None:
        self.t += dt
        out = self.engine.tick(self.t)
        self.events.extend(out)
        if self.trace is not None:
            self.trace.append(f"TICK +{dt}")
            self.trace += [f"    {_brief(e)}" for e in out]

    def command(self, kind: str, **cmd: Any) -> dict[str, Any]:
        self._cmd += 1
        self.t += 0.5
        reply, out = self.engine.command({"id": f"m{self._cmd}", **cmd}, self.t)
        self.events.extend(out)
        if self.trace is not None:
            self.trace.append(f"CMD {cmd} -> {reply}")
            self.trace += [f"    {_brief(e)}" for e in out]
        self.replies.append((kind, reply))
        return reply

    # -- what the engine says (read as a supervisor reads the screen) ---------

    def _open_misdeal(self, code: str, since: int) -> int | None:
        for e in reversed(self.events[since:]):
            if e["type"] == "misdeal" and e["code"] == code and e["action"] == "awaiting_supervisor":
                return int(e["coup"])
        return None

    def _numbering_lost(self) -> bool:
        shoe_id = self.engine.shoe.id if self.engine.shoe is not None else None  # type: ignore[attr-defined]
        lost = False
        for e in self.events:
            if e.get("shoe") != shoe_id or e["type"] != "security.alert":
                continue
            if e["code"] == "COUP_NUMBERING_LOST":
                lost = True
            elif e["code"] == "COUP_NUMBERING_RESTORED":
                lost = False
        return lost

    # -- a shoe -------------------------------------------------------------

    def deal(self, coups: int) -> None:
        """Deal whole shoes until at least ``coups`` physical coups, then end
        the last shoe and pass every deadline."""
        self.hello()
        dealt = 0
        while dealt < coups:
            dealt += self.deal_shoe()
        self.end_shoe(None)
        self.tick(10 * DEADLINE_S)

    def _shuffled(self) -> list[str]:
        order = [r + s for r in RANKS for s in SUITS for _ in range(DECKS)]
        self.rng.shuffle(order)
        return order

    def end_shoe(self, order: list[str] | None) -> None:
        if self.angel:
            # an Angel Eye's next shoe starts at its first card
            self._next_order = self._shuffled()
            self.card(self._next_order[0], "first")
        else:
            self.send(lambda t, q: Button(t, q, "NEWSHOE"))

    def deal_shoe(self) -> int:
        rng = self.rng
        truth = TrueShoe(len(self.shoes))
        self.shoes.append(truth)
        order, self._next_order = self._next_order or self._shuffled(), None
        # (the cut card some 14-16 cards from the end, or, in a shoe dealt
        # to a shallow cut card, after 60-150 cards: the rules only want at
        # least ``cut_card_min`` cards behind it, so both are legal; the
        # shallow ones give the coup past the last permitted one its 500
        # and more injections in the long run)
        shallow = rng.random() < 0.2
        cut_at = rng.randint(60, 150) if shallow else len(order) - 14 - rng.randint(0, 2)
        first = order[0]
        opening = len(self.shoes) == 1
        if opening and not self.angel:
            self.send(lambda t, q: Button(t, q, "NEWSHOE"))  # (later ones: the NEWSHOE ending the last)
        if opening or not self.angel:
            self.card(first, "first")  # (an Angel Eye's: sent as the last shoe's end)
        pos = 1
        burn = RANKS.index(first[0]) + 1 if first[0] not in "TJQK" else 10
        # the shoes with a shallow cut card and a sixth of the others dealt
        # to the cut card, the rest ended between two coups after 6-20 (more
        # shoes: more burns); a shoe dealt to its cut card is not ended
        # half dealt (shoe_ended), so that it reaches it
        to_cut = shallow or rng.random() < 1 / 6
        length = None if to_cut else rng.randint(6, 20)
        if self.angel and self.burns and rng.random() < 0.9:
            kind = rng.choice(self.burns)
            if kind == "burn_short" and burn >= 2:
                burn -= 1
                truth.shoe_kinds.append(kind)
                self.injected[kind] += 1
            elif kind == "burn_long":
                burn += 1
                truth.shoe_kinds.append(kind)
                self.injected[kind] += 1
        for _ in range(burn):
            self.card(order[pos], "burn")
            pos += 1
        # the engine's shoe the dealer deals now (the check reads its events)
        truth.sid = self.engine.shoe.id if self.engine.shoe is not None else None  # type: ignore[attr-defined]
        number = 0
        last: int | None = None
        prev: str | None = None
        self._cut_out = False
        self._cut_past_tableau = False
        while True:
            if last is not None and number >= last:
                break
            if len(order) - pos < 8 or (length is not None and number >= length):
                break
            number += 1
            kind = rng.choice(self.kinds) if self.kinds and rng.random() < self.error_rate else None
            if kind == "shoe_ended" and (number < 3 or to_cut):
                kind = None
            elif prev == "no_result" and kind in ("early_result_1", "early_result_2", "early_result_3"):
                # (not after a RESULT never pressed: fewer than four cards
                # then a RESULT are that coup's extra cards and its RESULT
                # (docs/dealing-errors.md, "A RESULT never pressed"), one dealing error
                # against these two, so the bytes read so and no engine
                # can tell the two apart; so are fewer than four then
                # NEWSHOE, below)
                kind = None
            elif prev == "no_result" and kind == "shoe_ended":
                kind = None
            elif prev == "no_result" and "supervisor_void" in self.kinds and rng.random() < 0.4:
                # the supervisor voids the coup after one whose RESULT was
                # never pressed: its first cards wait unseen (docs/dealing-errors.md, "A
                # RESULT never pressed"), so often nothing of it is shown
                # and no void can be sent (supervisor_void_unseen)
                kind = "supervisor_void"
            prev = kind
            pos, ended = self.deal_coup(truth, order, pos, number, kind, cut_at)
            if self._cut_out and last is None:
                # the cut card came out in this coup: one more (after_cut
                # one_more); out past its complete tableau (before an extra
                # card), it counts from the next coup (docs/dealing-errors.md, "Dealing
                # errors": a cut card after a complete tableau counts from
                # the next coup), so two more
                last = number + 1 + self._cut_past_tableau
            if ended:
                return len(truth.coups)
            self.supervise(truth)
        if (
            length is None
            and last is not None
            and number >= last
            and rng.random() < 0.8
            and len(order) - pos >= 7
        ):
            number += 1
            pos, _ = self.deal_coup(truth, order, pos, number, "cut_overrun", cut_at)
        self.end_shoe(order)
        return len(truth.coups)

    def supervise(self, truth: TrueShoe) -> None:
        """Between coups: the numbering lost, the supervisor may accept."""
        if not self._numbering_lost() or self.rng.random() < 0.3:
            return
        nxt = len(truth.coups) + 1
        kind = "accept_right" if self.rng.random() < 0.5 else "accept_wrong"
        number = nxt if kind == "accept_right" else nxt + 1
        self.injected[kind] += 1
        reply = self.command(kind, cmd="accept", coup=number)
        if not reply["ok"] and kind == "accept_right" and "confirm" in (reply["error"] or ""):
            # (an entry with consequences waits for the supervisor's confirm:
            # for the true number, given; a wrong one stays refused)
            self.replies.pop()
            reply = self.command(kind, cmd="accept", coup=number, confirm=True)
        if reply["ok"]:
            truth.accepts.append((nxt, number))

    def deal_coup(
        self, truth: TrueShoe, order: list[str], pos: int, number: int, kind: str | None, cut_at: int
    ) -> tuple[int, bool]:
        """One coup by the tableau with ``kind`` injected; returns where the
        shoe's order stands and whether the shoe ended in it."""
        rng = self.rng
        foreign_at = rng.randrange(4) if kind == "foreign" else None
        cards = order[pos : pos + 6]
        if foreign_at is not None:
            cards = [*cards[:foreign_at], rng.choice(RANKS) + rng.choice(SUITS), *cards[foreign_at:5]]
        positions = draws(cards)
        n = len(positions)
        cards = cards[:n]
        used = n - (1 if foreign_at is not None else 0)
        phys = Physical(number, positions, cards, kind, KINDS[kind].truth if kind else "settle")
        truth.coups.append(phys)
        if kind is not None:
            self.injected[kind] += 1
        player = [c for p, c in zip(positions, cards, strict=True) if p[0] == "P"]
        banker = [c for p, c in zip(positions, cards, strict=True) if p[0] == "B"]
        # the frames the dealer makes: ("card", i) ("result",) ("extra", card) ...
        steps: list[tuple[Any, ...]] = [("card", i) for i in range(n)] + [("result",)]
        since = len(self.events)
        if kind in ("early_result_1", "early_result_2", "early_result_3"):
            steps.insert(int(kind[-1]), ("result",))
        elif kind == "early_result_due":
            if n == 4:
                phys.kind, phys.truth = None, "settle"
                self.injected[kind] -= 1
            else:
                steps.insert(4, ("result",))
        elif kind == "double_result":
            steps.append(("result",))
        elif kind == "no_result":
            steps.pop()
        elif kind == "extra_card":
            extra = order[pos + used]
            used += 1
            slot = "P3" if len(player) < 3 else "B3" if len(banker) < 3 else "burn"
            steps.insert(n, ("extra", extra, slot))
        elif kind in ("unread_enter_right", "unread_enter_wrong", "unread_deadline", "unread_void"):
            i = rng.randrange(n)
            steps[i] = ("unread", i)
            self._unread = i
        elif kind == "exposed":
            i = rng.randrange(n)
            steps[i] = ("faceup", i)
        elif kind == "gap":
            k = rng.randint(1, 3)
            i = rng.randrange(len(steps))
            for j in range(i, min(i + k, len(steps))):
                steps[j] = ("lost", *steps[j])
        elif kind == "restart":
            i = rng.randrange(1, n)
            if rng.random() < 0.5:
                steps[i] = ("lost", *steps[i])
            steps.insert(i, ("hello",))
        elif kind == "jam":
            steps.insert(rng.randrange(1, n + 1), ("jam",))
        elif kind == "foreign":
            steps[foreign_at] = ("foreign", foreign_at)  # type: ignore[index]
        elif kind in ("wrong_hand_accept", "wrong_hand_deadline"):
            i = rng.randrange(n)
            steps[i] = ("wronghand", i)
        elif kind == "device_disagrees":
            steps[-1] = ("wrongresult",)
        elif kind == "supervisor_void":
            steps.insert(rng.randrange(1, n + 1), ("void",))
        elif kind == "shoe_ended":
            i = rng.randrange(1, n)
            steps = [*steps[:i], ("newshoe",)]
            truth.cut_short = True
        drawn = pos  # the index in the order of the next card the shoe gives
        sent: list[str | None] = []  # this coup's cards that reached the engine
        for step in steps:
            op = step[0]
            lost = op == "lost"
            if lost:
                step = step[1:]
                op = step[0]
            if op in ("card", "unread", "faceup", "foreign", "wronghand"):
                i = step[1]
                if op != "foreign":
                    self._cut_card(drawn, cut_at)
                    drawn += 1
                code: str | None = cards[i] if op != "unread" else None
                label = positions[i]
                if op == "wronghand":
                    label = ("B" if label[0] == "P" else "P") + label[1:]
                self.card(
                    code,
                    label,
                    lost=lost,
                    face_up=op == "faceup",
                    deck=DECKS + 1 if op == "foreign" else None,
                )
                sent += [] if lost else [code]
            elif op == "extra":
                if self._cut_card(drawn, cut_at):
                    self._cut_past_tableau = True
                drawn += 1
                self.card(step[1], step[2], lost=lost)
                sent += [] if lost else [step[1]]
            elif op == "result":
                self.result(player, banker, lost=lost)
            elif op == "wrongresult":
                self.result(player, banker, wrong=True)
            elif op == "hello":
                self.hello()
            elif op == "jam":
                if self.angel:
                    self.send(lambda t, q: Status(t, q, "ERROR", "card pulled back midway"))
                    self.send(lambda t, q: Status(t, q, "OK", "error cleared: card pulled back midway"))
                else:
                    self.send(lambda t, q: Status(t, q, "JAM"))
                    self.send(lambda t, q: Status(t, q, "OK"))
            elif op == "void":
                shown = [e for e in self.events[since:] if e["type"] == "card" and e["coup"] is not None]
                if shown and sent and shown[-1]["card"] == sent[-1]:
                    self.command(kind or "", cmd="void", coup=shown[-1]["coup"], reason="dealer error")
                else:
                    # (nothing of it on the screen: the supervisor cannot void
                    # it. Cards shown since it began but not the one just
                    # dealt are an earlier coup's, held behind its misdeal and
                    # dealt on late (docs/dealing-errors.md: every later
                    # frame is held): voiding the coup they show would void
                    # another coup than this one)
                    phys.truth = "either"
                    phys.kind = "supervisor_void_unseen"
                    self.injected["supervisor_void"] -= 1
                    self.injected["supervisor_void_unseen"] += 1
            elif op == "newshoe":
                self.end_shoe(order)
                return pos + used, True
        self._after_coup(phys, kind, since, cards, positions)
        return pos + used, False

    def _after_coup(
        self, phys: Physical, kind: str | None, since: int, cards: list[str], positions: list[str]
    ) -> None:
        """The supervisor, once the coup is dealt."""
        if kind is None:
            return
        if kind.startswith("unread"):
            coup = self._open_misdeal("UNREAD_CARD", since)
            if coup is None:
                return
            unread = self._unread
            true_card = cards[unread]
            if kind == "unread_enter_right":
                self.command(kind, cmd="enter_card", coup=coup, card=true_card)
            elif kind == "unread_enter_wrong":
                wrong = self._wrong_card(true_card)
                reply = self.command(kind, cmd="enter_card", coup=coup, card=wrong)
                if reply["ok"]:
                    rec = list(cards)
                    rec[unread] = wrong
                    places = draws(rec + ["2C"] * 2)
                    # (the engine refuses, or holds for confirm, an entry that
                    # makes the cards dealt after it illegal by the tableau:
                    # one set aside or one missing; docs/operations.md, Supervisor commands: "An entry is
                    # checked against what the shoe itself dealt". One whose
                    # tableau takes the same cards, the Player drawing where
                    # the Banker did, no card contradicts: the record is the
                    # supervisor's, checked as ``record`` below)
                    phys.wrong_entry = len(places) != len(positions)
                    p = [c for q, c in zip(places, rec, strict=False) if q[0] == "P"]
                    b = [c for q, c in zip(places, rec, strict=False) if q[0] == "B"]
                    phys.record = (p, b)
                else:
                    self.command(kind, cmd="void", coup=coup, reason="wrong entry refused")
                    phys.truth = "void"
            elif kind == "unread_void":
                self.command(kind, cmd="void", coup=coup, reason="unread card")
            else:
                self.tick(DEADLINE_S + 1)
        elif kind == "wrong_hand_accept":
            coup = self._open_misdeal("WRONG_HAND", since)
            if coup is not None:
                self.command(kind, cmd="accept", coup=coup)
        elif kind in ("wrong_hand_deadline", "gap", "restart"):
            self.tick(DEADLINE_S + 1)

    def _cut_card(self, index: int, cut_at: int) -> bool:
        """The cut card out before the card ``index`` of the order: whether it came now."""
        if index == cut_at and not self._cut_out:
            self._cut_out = True
            self.send(lambda t, q: CutCard(t, q))
            return True
        return False

    def _wrong_card(self, true_card: str) -> str:
        while True:
            c = self.rng.choice(RANKS) + self.rng.choice(SUITS)
            if value(c) != value(true_card):
                return c


# --- the invariant -------------------------------------------------------------


def _codes_of(e: Event) -> list[str]:
    if e["type"] in ("misdeal", "coup.void", "security.alert"):
        return [e["code"]]
    if e["type"] == "card" and e.get("face_up"):
        return ["face_up"]
    if e["type"] == "device.status" and e["code"] == "HELLO":
        return ["HELLO"]
    return []


@dataclass
class Verdict:
    violations: list[Violation]
    #: kind -> injections the engine flagged
    flagged: Counter[str]


def check(
    shoes: list[TrueShoe], events: list[Event], replies: list[tuple[str, dict[str, Any]]] = ()
) -> Verdict:  # type: ignore[assignment]
    """The engine's ``events`` against the truth ``shoes``, event by event."""
    out: list[Violation] = []
    flagged: Counter[str] = Counter()
    ids: list[str] = []
    for e in events:
        if e["type"] == "shoe.started" and e["shoe"] not in ids:
            ids.append(e["shoe"])
    if len(ids) < len(shoes):
        out.append(Violation(len(ids), None, None, f"{len(ids)} shoes started for {len(shoes)} dealt"))
    by_shoe: dict[str, list[Event]] = {}
    for e in events:
        by_shoe.setdefault(e.get("shoe") or "", []).append(e)
    for kind, reply in replies:
        if kind in ("accept_right", "accept_wrong") and reply["ok"]:
            flagged[kind] += 1  # (COUP_NUMBERING_RESTORED, the supervisor's number recorded)
        elif kind == "accept_wrong":
            flagged[kind] += 1  # refused
        elif kind == "accept_right":
            out.append(Violation(-1, None, kind, f"accept with the true next coup refused: {reply['error']}"))
    # Each shoe's events by the id the engine gave it when the dealer dealt
    # it (zipped in order, an extra shoe the engine started would shift
    # every later one: docs/dealing-errors.md, "Coup numbers after a gap": frames lost
    # after a shoe ended may have held the next shoe's start, and a card
    # after them starts one). A shoe the dealer never started settles
    # nothing: every coup of it is void (its numbering lost).
    sids = [t.sid or sid for t, sid in zip(shoes, ids, strict=False)]
    for truth, sid in zip(shoes, sids, strict=False):
        _check_shoe(truth, by_shoe.get(sid, []), out, flagged)
    for sid in ids:
        if sid not in sids:
            for e in by_shoe.get(sid, []):
                if e["type"] == "coup.result":
                    out.append(Violation(-1, e["coup"], None, f"settled in shoe {sid}, never dealt"))
    return Verdict(out, flagged)


def _check_shoe(truth: TrueShoe, evs: list[Event], out: list[Violation], flagged: Counter[str]) -> None:
    def bad(coup: int | None, kind: str | None, what: str) -> None:
        out.append(Violation(truth.index, coup, kind, what))

    phys = {c.number: c for c in truth.coups}
    settled: dict[int, Event] = {}  # physical number -> its result
    offsets: dict[int, int] = {}  # physical number -> engine number - physical (numbered settled coups)
    lost = False
    ever_lost = False
    delta = 0
    accepts = iter(truth.accepts)
    by_number: dict[int | None, set[str]] = {}
    voided: set[int] = set()  # coups the engine voided
    last_coup: int | None = None
    over = False  # shoe.ended seen
    lost_after_end = False  # then frames lost (an alert with no coup)
    for e in evs:
        t = e["type"]
        if t == "shoe.ended":
            over = True
        if e.get("coup") is not None:
            last_coup = e["coup"]
        elif t == "security.alert" and e["code"] == "SEQUENCE_GAP":
            # frames lost after the last permitted coup (docs/dealing-errors.md, "Dealing
            # errors": the alert has no coup, none is opened for it): the
            # flag of the coup then last seen
            by_number.setdefault(last_coup, set()).add("SEQUENCE_GAP")
            lost_after_end = lost_after_end or over
        if t == "security.alert" and e["code"] == "COUP_NUMBERING_LOST":
            lost = ever_lost = True
        elif t == "security.alert" and e["code"] == "COUP_NUMBERING_RESTORED":
            lost = False
            true_next, accepted = next(accepts, (0, 0))
            delta = accepted - true_next
        for code in _codes_of(e):
            by_number.setdefault(e.get("coup"), set()).add(code)
        if t == "coup.void":
            voided.add(e["coup"])
        if t != "coup.result":
            continue
        n = e["coup"]
        hands = (e["player"]["cards"], e["banker"]["cards"])
        winner, p, b = outcome(*hands) if len(hands[0]) >= 2 and len(hands[1]) >= 2 else ("?", -1, -1)
        if (e["winner"], e["player"]["total"], e["banker"]["total"]) != (winner, p, b):
            bad(
                n,
                None,
                f"result {e['winner']} {e['player']['total']}-{e['banker']['total']} for hands {hands}: "
                f"the rules give {winner} {p}-{b}",
            )
        if lost:
            match = [
                c for c in truth.coups if c.hands() == hands and c.number not in settled and c.truth != "void"
            ]
            if not match:
                bad(
                    n, None, f"settled {hands} while the numbering was lost: no physical coup has those cards"
                )
                continue
            settled[match[0].number] = e
            continue
        c = phys.get(n - delta)
        same = [x for x in truth.coups if x.hands() == hands and x.number not in settled]
        if (c is None or c.hands() != hands) and same:
            # numbered wrong: reported once, then read on from the physical
            # number (so one shift is one violation, not one per later coup)
            m = same[0]
            # (the deviation that shifted it: the last one injected before it)
            cause = next((x.kind for x in reversed(truth.coups[: m.number - 1]) if x.kind), m.kind)
            bad(
                n,
                cause,
                f"settled {hands} as coup {n}: they are physical coup {m.number}'s "
                f"(numbering off by {n - m.number - delta}, not flagged)",
            )
            delta = n - m.number
            c = m
        if c is None:
            bad(n, None, f"settled {hands}: no physical coup {n - delta}")
            continue
        if c.wrong_entry:
            bad(
                n,
                c.kind,
                "a supervisor's entry that contradicts the cards dealt after it was applied "
                "(found by the dealer model)",
            )
        if c.number in settled:
            bad(n, c.kind, "settled twice")
        settled[c.number] = e
        offsets[c.number] = delta
        if c.truth == "void":
            bad(n, c.kind, f"settled {hands}, but the rules void this coup")
        elif c.hands() != hands:
            other = [x.number for x in truth.coups if x.hands() == hands]
            bad(
                n,
                c.kind,
                f"settled {hands}; physical coup {c.number} was {c.hands()}"
                + (f" (the cards of physical coup(s) {other})" if other else ""),
            )
    # every deviation flagged
    for k in truth.shoe_kinds:
        if any(KINDS[k].flags[0] in codes for codes in by_number.values()):
            flagged[k] += 1
        else:
            bad(None, k, f"{k} not flagged ({KINDS[k].flags[0]})")
    for c in truth.coups:
        if c.kind is None:
            continue
        want = KINDS[c.kind].flags
        if not want:
            flagged[c.kind] += 1
            continue
        before = [m for m in offsets if m <= c.number]
        after = [m for m in offsets if m > c.number]
        shifts = {offsets[max(before)] if before else 0, offsets[min(after)] if after else delta}
        near = [
            c.number + d + e
            for d in sorted(shifts)
            for e in ((0, 1, -1) if KINDS[c.kind].truth == "either" else (0,))
        ]
        seen = set().union(*(by_number.get(x, set()) for x in near))
        if ever_lost:
            # a coup void because its number is unknown needs no flag of
            # its own: nothing of it is settled (the stretch is flagged)
            seen |= {"SEQUENCE_GAP", "COUP_NUMBERING_LOST"} & set().union(*by_number.values())
            seen |= set(want) if seen else set()
        if ever_lost or c.kind in ("no_result",):
            seen |= set().union(*by_number.values()) if by_number else set()
        own = {c.number + d for d in shifts}  # (its own number, no neighbour's)
        if c.kind == "cut_overrun" and lost_after_end and c.number not in settled:
            # frames lost once the shoe had ended (its last coup's end with
            # them) may have held the next shoe's NEWSHOE and burn: the card
            # after them starts a new shoe, its numbering lost, rather than
            # an overrun coup of this one (docs/dealing-errors.md, "Coup
            # numbers after a gap"); that shoe settles nothing unless accepted (checked in
            # ``check``), and its COUP_NUMBERING_LOST is the flag
            seen |= set(want)
        if c.kind in _VOID_EXEMPT and voided & own and c.number not in settled:
            # void by something else first (frames lost before it, held and
            # voided; a copy the shoe no longer holds, e.g. after a wrong
            # entry took it: FOREIGN_CARD): a void coup has nothing left to
            # enter or correct, so no misdeal of its own is raised on it
            # (the engine reports none on a coup already void; a fault's
            # device.status is sent at once all the same); nothing of it is
            # settled, and its void is its flag
            seen |= set(want)
        if seen & set(want):
            flagged[c.kind] += 1
        else:
            bad(
                c.number,
                c.kind,
                f"not flagged: none of {want} on coup {near[0]} "
                f"(got {sorted(by_number.get(near[0], set()))})",
            )
    # shoe.ended counts the coups dealt
    ended = [e for e in evs if e["type"] == "shoe.ended"]
    if ended and ended[-1].get("coups_exact", True) and not truth.accepts:
        # (a coup past the last permitted is none of the shoe's coups)
        dealt = len([c for c in truth.coups if c.kind != "cut_overrun"])
        if ended[-1]["coups"] != dealt:
            bad(None, None, f"shoe.ended counts {ended[-1]['coups']} coups; {dealt} were dealt")


# --- running it ------------------------------------------------------------------


def run(
    protocol: str, coups: int, seed: int, error_rate: float = 0.5, kinds: Collection[str] | None = None
) -> tuple[Dealer, Verdict]:
    d = Dealer(protocol, seed, error_rate, kinds)
    d.deal(coups)
    return d, check(d.shoes, d.events, d.replies)


def table(rows: list[tuple[Dealer, Verdict]]) -> str:
    injected: Counter[str] = Counter()
    flagged: Counter[str] = Counter()
    bad: Counter[str] = Counter()
    coups = 0
    for d, v in rows:
        injected.update(d.injected)
        flagged.update(v.flagged)
        coups += sum(len(s.coups) for s in d.shoes)
        for x in v.violations:
            bad[x.kind or "-"] += 1
    lines = [f"{'kind':22} {'injected':>9} {'flagged':>8} {'violations':>10}"]
    for k in [*KINDS, "-"]:
        if injected[k] or bad[k]:
            lines.append(f"{k:22} {injected[k]:9} {flagged[k]:8} {bad[k]:10}")
    lines.append(f"{'total':22} {sum(injected.values()):9} {sum(flagged.values()):8} {sum(bad.values()):10}")
    lines.append(f"physical coups: {coups}")
    return "\n".join(lines)


def _one(
    args: tuple[str, int, int, float, frozenset[str] | None],
) -> tuple[Counter[str], Counter[str], list[str], int]:
    protocol, coups, seed, rate, kinds = args  # (one run per worker)
    d, v = run(protocol, coups, seed, rate, kinds)
    return (
        d.injected,
        v.flagged,
        [f"{protocol} seed {seed} {x}" for x in v.violations],
        sum(len(s.coups) for s in d.shoes),
    )


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.dealer_model", description=__doc__.split("\n\n")[0])
    p.add_argument("--coups", type=int, default=100_000, help="at least this many physical coups in all")
    p.add_argument("--seed", type=int, default=27)
    p.add_argument("--error-rate", type=float, default=0.5, help="the share of coups with an error")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--show", type=int, default=20, help="violations listed")
    p.add_argument("--kinds", help="only these kinds are injected (comma-separated; default: all)")
    p.add_argument("--skip-kinds", default="", help="these kinds are not injected (comma-separated)")
    a = p.parse_args(argv)
    only = {k for k in (a.kinds or "").split(",") if k}
    skip = {k for k in a.skip_kinds.split(",") if k}
    unknown = sorted((only | skip) - set(KINDS))
    if unknown:
        p.error(f"unknown kind(s): {', '.join(unknown)}")
    kinds = None if not only and not skip else frozenset((only or set(KINDS)) - skip)
    chunk = 2000
    work = [
        (proto, chunk, a.seed * 100_000 + i, a.error_rate, kinds)
        for i in range(max(1, -(-a.coups // (chunk * len(PROTOCOLS)))))
        for proto in PROTOCOLS
    ]
    start = time.monotonic()
    if a.jobs > 1:
        import multiprocessing

        with multiprocessing.Pool(a.jobs) as pool:
            results = pool.map(_one, work)
    else:
        results = [_one(w) for w in work]
    injected: Counter[str] = Counter()
    flagged: Counter[str] = Counter()
    bad: Counter[str] = Counter()
    shown: list[str] = []
    coups = 0
    for inj, fl, viol, n in results:
        injected.update(inj)
        flagged.update(fl)
        coups += n
        for line in viol:
            kind = line.split("[", 1)[1].split("]", 1)[0]
            bad[kind if kind != "None" else "-"] += 1
        shown += viol
    print(f"{'kind':22} {'injected':>9} {'flagged':>8} {'violations':>10}")
    for k in [*KINDS, "-"]:
        if injected[k] or bad[k]:
            print(f"{k:22} {injected[k]:9} {flagged[k]:8} {bad[k]:10}")
    print(f"{'total':22} {sum(injected.values()):9} {sum(flagged.values()):8} {sum(bad.values()):10}")
    print(
        f"physical coups: {coups} ({len(work)} runs over {', '.join(PROTOCOLS)}), "
        f"{time.monotonic() - start:.0f} s"
    )
    for line in shown[: a.show]:
        print(line)
    return 1 if shown else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
