"""Realistic coups for the floor benchmarks and tests, made by the real engine.

:class:`Dealer` deals shuffled shoes (seeded ``random``) to a real
:class:`controller.engine.Engine` as a shoe would: NEWSHOE, the burn (the
first card's value, 10 for a 10 or face), then coup after coup by the
tableau until 14 cards are left behind the cut, each coup's cards and its
RESULT as frames. Faults a real table has, at stated rates per coup:

* ``unread``: a card passes the reader unread and the supervisor enters it
  (``UNREAD_CARD`` corrected, a supervisor intervention);
* ``lost``: a card passes unread and nobody enters it: the coup is void at
  the correction deadline (``UNREAD_CARD`` void);
* ``void``: the supervisor voids a coup after two cards (``SUPERVISOR_VOID``).

:func:`year` is one table's year: every day the table deals 16 hours from
10:00 UTC at a pace drawn from 60..80 coups per hour, with an 8-minute
shuffle between shoes.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from controller.engine import Engine
from controller.rules import load_profile
from drivers.fake import banker_draws
from firmware_protocols.frames import Button, Card, Frame, Hello

RANKS = "A23456789TJQK"
SUITS = "SHDC"
CUT_CARDS = 14
SHUFFLE_S = 480.0
#: Event types the report does not read (left out of bulk loads).
BULKY = frozenset({"card", "odds.update", "roads"})


def value(card: str) -> int:
    return min(RANKS.index(card[0]) + 1, 10) % 10


def deal_coup(shoe: list[str]) -> list[str]:
    """The next coup's cards from the end of ``shoe``, in dealing order
    (P1 B1 P2 B2 [P3] [B3]), by the standard tableau."""
    cards = [shoe.pop() for _ in range(4)]
    pt = (value(cards[0]) + value(cards[2])) % 10
    bt = (value(cards[1]) + value(cards[3])) % 10
    if pt >= 8 or bt >= 8:
        return cards
    p3: int | None = None
    if pt <= 5:
        cards.append(shoe.pop())
        p3 = value(cards[-1])
    if (p3 is None and bt <= 5) or (p3 is not None and banker_draws(bt, p3)):
        cards.append(shoe.pop())
    return cards


@dataclass
class Faults:
    unread: float = 0.0
    lost: float = 0.0
    void: float = 0.0


class Dealer:
    """One table's shoe, dealt frame by frame to a real engine."""

    def __init__(
        self,
        table: str,
        profile: str = "punto_banco",
        decks: int = 8,
        seed: int = 1,
        start: float = 0.0,
        faults: Faults | None = None,
        without: str = "",
        live: bool = False,
    ) -> None:
        # live: odds.update and roads events after every coup, as the daemon
        # makes them by default (what a table really publishes)
        self.engine = Engine(table, load_profile(profile), decks, odds=live, roads=live)
        self.decks = decks
        self.rng = random.Random(seed)
        self.t = start
        self.seq = 0
        self.faults = faults or Faults()
        self.without = without
        self.coups = 0
        self.hello_sent = False
        self._cmd = 0

    def _feed(self, frame: Frame) -> list[dict[str, Any]]:
        return self.engine.feed(frame)

    def _frame_t(self) -> tuple[float, int]:
        self.t += 1.0
        self.seq += 1
        return self.t, self.seq

    def card(self, code: str | None) -> list[dict[str, Any]]:
        t, s = self._frame_t()
        return self._feed(Card(t, s, code))

    def button(self, name: str) -> list[dict[str, Any]]:
        t, s = self._frame_t()
        return self._feed(Button(t, s, name))

    def command(self, **cmd: Any) -> list[dict[str, Any]]:
        self.t += 2.0
        self._cmd += 1
        reply, out = self.engine.command({"id": f"c{self._cmd}", **cmd}, self.t)
        if not reply.get("ok"):
            raise RuntimeError(f"the engine refused {cmd}: {reply}")
        return out

    def shoe(
        self, coup_seconds: float = 50.0, until: float = float("inf"), limit: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """Deal one shoe (stopping early once ``until`` is passed or
        ``limit`` coups have been dealt by this dealer); a coup every
        ``coup_seconds`` on average."""
        if not self.hello_sent:
            t, _ = self._frame_t()
            yield from self._feed(Hello(t, 0, "BENCH", "1.0", "0001"))
            self.hello_sent = True
        cards = [r + s for r in RANKS for s in SUITS for _ in range(self.decks) if r not in self.without]
        self.rng.shuffle(cards)
        yield from self.button("NEWSHOE")
        first = cards.pop()
        yield from self.card(first)
        for _ in range(value(first) or 10):
            yield from self.card(cards.pop())
        f = self.faults
        while len(cards) > CUT_CARDS and self.t < until and (limit is None or self.coups < limit):
            coup_cards = deal_coup(cards)
            self.t += max(1.0, self.rng.uniform(0.7, 1.3) * coup_seconds - len(coup_cards) - 1)
            self.coups += 1
            roll = self.rng.random()
            n = self.engine.shoe.next_coup if self.engine.shoe is not None else 0
            if roll < f.void:
                yield from self.card(coup_cards[0])
                yield from self.card(coup_cards[1])
                yield from self.command(cmd="void", coup=n, reason="dealer exposed a card")
                yield from self.button("RESULT")
                continue
            unread = roll < f.void + f.unread + f.lost
            at = self.rng.randrange(4) if unread else -1
            for i, c in enumerate(coup_cards):
                yield from self.card(None if i == at else c)
            if at < 0:
                yield from self.button("RESULT")
            elif roll < f.void + f.unread:
                # the supervisor reads the card and enters it (the tableau
                # is known again: any third card was dealt already)
                yield from self.command(cmd="enter_card", coup=n, card=coup_cards[at])
                yield from self.button("RESULT")
            else:
                yield from self.button("RESULT")
                self.t += 125.0  # past the correction deadline: void
                yield from self.engine.tick(self.t)

    def deal(self, coups: int, coup_seconds: float = 50.0) -> Iterator[dict[str, Any]]:
        """Shoe after shoe (a shuffle between) until ``coups`` coups."""
        while self.coups < coups:
            yield from self.shoe(coup_seconds, limit=coups)
            self.t += SHUFFLE_S


def year(
    table: str = "T01",
    days: int = 365,
    first_day: dt.date = dt.date(2025, 11, 1),
    seed: int = 2026,
    faults: Faults | None = None,
    hours: float = 16.0,
    pace: tuple[float, float] = (60.0, 80.0),
    live: bool = False,
) -> Iterator[dict[str, Any]]:
    """``days`` days of one table, 16 h a day from 10:00 UTC, a pace drawn
    per day from ``pace`` coups per hour; every event the engine makes
    (with ``live``, odds and roads too, as the daemon publishes them)."""
    faults = faults or Faults(unread=0.01, lost=0.002, void=0.004)
    open_t = dt.datetime.combine(first_day, dt.time(10, 0), tzinfo=dt.UTC).timestamp()
    dealer = Dealer(table, seed=seed, start=open_t, faults=faults, live=live)
    rng = random.Random(seed + 1)
    for day in range(days):
        start = open_t + day * 86400
        close = start + hours * 3600
        dealer.t = max(dealer.t, start)
        per_hour = rng.uniform(*pace)
        while dealer.t < close - SHUFFLE_S:
            yield from dealer.shoe(coup_seconds=3600 / per_hour, until=close)
            dealer.t += SHUFFLE_S
