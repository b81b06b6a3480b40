"""Events for the floor tests, made by the real engine, and how they get
into the archive.

``deal`` feeds scripted coups (cards and RESULT) to a real
:class:`controller.engine.Engine` through ``tests.table.Table``; ``shoes``
deals whole shoes shuffled by a seeded ``random`` (optionally doctored)
the same way. ``archive`` writes events into an archive database through
the archiver's own insert path (``controller.archive.store.Store``), as
MQTT messages on their topics, so the report is tested on what users run.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from tests.table import Table

RANKS = "A23456789TJQK"
SUITS = "SHDC"
#: Events the report does not read; left out of bulk loads to keep the
#: tests quick (the scripted scenario archives everything).
BULKY = frozenset({"card", "odds.update", "roads"})


def topic_of(ev: dict[str, Any], prefix: str = "baccarat") -> str:
    return f"{prefix}/{ev['table']}/{ev['type'].replace('.', '/')}"


def archive(dsn: str, events: Iterable[dict[str, Any]], batch: int = 500) -> int:
    """Write ``events`` through the archiver's store, in batches; returns
    how many were archived (new)."""
    from controller.archive.db import connect
    from controller.archive.store import Store

    store = Store(
        archiver="floor-test",
        prefix="baccarat",
        max_payload_bytes=256 * 1024,
        retention_months=120,
        partitions_ahead=1,
        now=lambda: dt.datetime(2027, 1, 1, tzinfo=dt.UTC),
    )
    conn = connect(dsn)
    done = 0
    try:
        chunk: list[tuple[str, bytes]] = []
        for ev in events:
            chunk.append((topic_of(ev), json.dumps(ev).encode()))
            if len(chunk) >= batch:
                done += store.write(conn, chunk).counts["archived"]
                chunk = []
        if chunk:
            done += store.write(conn, chunk).counts["archived"]
    finally:
        conn.close()
    return done


def _value(card: str) -> int:
    return min(RANKS.index(card[0]) + 1, 10) % 10


def deal_coup(shoe: list[str]) -> list[str]:
    """The cards of the next coup from the top (end) of ``shoe``, in the
    order dealt (P1 B1 P2 B2 [P3] [B3]), by the standard tableau."""
    from drivers.fake import banker_draws

    cards = [shoe.pop() for _ in range(4)]
    pt = (_value(cards[0]) + _value(cards[2])) % 10
    bt = (_value(cards[1]) + _value(cards[3])) % 10
    if pt >= 8 or bt >= 8:
        return cards
    p3: int | None = None
    if pt <= 5:
        cards.append(shoe.pop())
        p3 = _value(cards[-1])
    if (p3 is None and bt <= 5) or (p3 is not None and banker_draws(bt, p3)):
        cards.append(shoe.pop())
    return cards


def shoes(
    table: Table,
    coups: int,
    seed: int,
    without: str = "",
    coup_seconds: float = 50.0,
) -> Iterator[dict[str, Any]]:
    """Deal ``coups`` coups at ``table`` (shoe after shoe, 14 cards behind
    the cut), one every ``coup_seconds``; yields the engine's events as
    they come. ``without`` takes those ranks out of every shoe."""
    rng = random.Random(seed)
    decks = table.engine.decks
    dealt = 0
    first = True
    while dealt < coups:
        shoe = [r + s for r in RANKS for s in SUITS for _ in range(decks) if r not in without]
        rng.shuffle(shoe)
        if first:
            table.hello()
            first = False
        table.new_shoe()
        burn = shoe.pop()
        table.card(burn)
        n = min(_value(burn) or 10, 10)
        table.cards(*[shoe.pop() for _ in range(n)])
        while len(shoe) > 14 and dealt < coups:
            table.t += coup_seconds - 6
            table.cards(*deal_coup(shoe))
            table.result()
            dealt += 1
        yield from table.events
        table.events.clear()
        table.t += 600  # the shuffle


def without_bulky(events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (e for e in events if e["type"] not in BULKY)


def at(when: dt.datetime) -> float:
    return when.timestamp()


def types(events: Sequence[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]
