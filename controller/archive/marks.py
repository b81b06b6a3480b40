"""How far the archive holds each table's events without a hole, and the
holes themselves (end-to-end acknowledgement).

A table's events are numbered by ``seq``, which only grows and, within a
journal epoch, grows by one (``event_id`` is ``<table>/<shoe>/<seq>``). So
"the archive holds table T up to seq S" is one number per table: every
seq from the first one archived for T up to S is in ``events``. After each
committed batch the archiver moves that number forward over what is now
contiguous (``advance``, kept in ``archive_table_marks``, migration 4) and
publishes it, retained, at QoS 1, on ``<prefix>/<table>/archive/mark``
(``TableMark.payload``). The table re-offers from its journal whatever lies
above it (controller/outputs/mqtt.py), so a message the broker forgot
(a ``kill -9`` before its autosave) reaches the archive without anyone
running ``--backfill``.

A seq missing below one that is archived is a **hole**: ``advance`` stops
at it and returns it, and the archiver reports one that stays open
(``HOLE_GRACE_S``: a share group's other member may simply not have
committed its batch yet) with a log line and a metric. A hole right below
a ``security.alert`` ``JOURNAL_LOST`` is the jump of a new epoch (the
journal lost history and carries on above every seq it ever issued): most
of those seqs never existed, but the journal may still hold some of the
old epoch's last events, so the archiver steps over such a hole only once
it has been open ``EPOCH_HOLE_WAIT_S``, long after the table has
re-offered whatever it still held.

The walk is bounded (``WALK_ROWS`` rows a query) and reads the
``(table_id, seq)`` index of ``events``; marks only move forward
(``GREATEST`` in the upsert), so two archivers of a share group computing
the same table's mark at once cannot move it back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import structlog

from controller.archive.db import Conn
from controller.archive.parse import classify

log = structlog.get_logger("archive")

#: the topic suffix, after ``<prefix>/<table>/``
MARK_SUFFIX = "archive/mark"
#: version of the payload
MARK_VERSION = 1
#: a table's mark is computed and published at most this often (and after
#: the batch that touched it, once this has passed). Each costs a walk of
#: the index and a message (which comes back to the archivers as ignored):
#: at 1 s, a floor at a real table's rate (a mark moving every 2 s) cost
#: about one mark an event, and the ingest benchmark's archiver lost 46% of
#: its events per CPU-second at 500 tables; a table re-offers only after
#: ``reoffer_after_s`` (30 s by default), so 5 s costs it nothing
MARK_EVERY_S = 5.0
#: a hole still open this long after it was first seen is reported
HOLE_GRACE_S = 5.0
#: a hole just below a ``JOURNAL_LOST`` alert is stepped over after this long
EPOCH_HOLE_WAIT_S = 300.0
#: rows read per query of the walk
WALK_ROWS = 5000


def mark_topic(prefix: str, table: str) -> str:
    return f"{prefix}/{table}/{MARK_SUFFIX}"


@dataclass(frozen=True)
class TableMark:
    """Every event of ``table`` with a seq in [``first_seq``, ``seq``] is
    archived (but for an epoch's jump stepped over); ``event_id`` is the
    event at ``seq``."""

    table: str
    first_seq: int
    seq: int
    event_id: str

    def payload(self) -> bytes:
        return json.dumps(
            {
                "v": MARK_VERSION,
                "table": self.table,
                "first_seq": self.first_seq,
                "seq": self.seq,
                "event_id": self.event_id,
            },
            separators=(",", ":"),
        ).encode()


@dataclass(frozen=True)
class Hole:
    """Seqs ``first``..``last`` are missing below an archived event of
    ``table``; ``epoch``: that event is a ``JOURNAL_LOST`` alert."""

    table: str
    first: int
    last: int
    epoch: bool

    @property
    def missing(self) -> int:
        return self.last - self.first + 1


def advance(
    conn: Conn, table: str, *, step_over: tuple[int, int] | None = None
) -> tuple[TableMark | None, Hole | None]:
    """Move ``table``'s mark over what is archived contiguously above it
    and return it (None: nothing of the table is archived) with the hole it
    stops at, if any. ``step_over`` (first, last): an epoch's hole the
    caller has seen open for ``EPOCH_HOLE_WAIT_S``, which the walk crosses."""
    with conn.transaction():
        row = conn.execute(
            "SELECT first_seq, seq, event_id FROM archive_table_marks WHERE table_id = %s", (table,)
        ).fetchone()
        if row is None:
            first = conn.execute(
                "SELECT seq, event_id FROM events WHERE table_id = %s ORDER BY seq LIMIT 1", (table,)
            ).fetchone()
            if first is None:
                return None, None
            first_seq, seq, event_id = int(first[0]), int(first[0]), str(first[1])
            stored = None
        else:
            first_seq, seq, event_id = int(row[0]), int(row[1]), str(row[2])
            stored = seq
        hole: Hole | None = None
        clash = False
        shoe = _shoe_of(event_id)
        while hole is None and not clash:
            rows = conn.execute(
                "SELECT seq, event_id, type, shoe FROM events"
                " WHERE table_id = %s AND seq > %s ORDER BY seq LIMIT %s",
                (table, seq, WALK_ROWS),
            ).fetchall()
            for i, (s, eid, etype, eshoe) in enumerate(rows):
                s = int(s)
                if s == seq + 1 and not _continues(shoe, eshoe, rows, i):
                    # two journals under one table id: the mark stops rather
                    # than vouch for either with the other's events
                    clash = True
                    log.warning("archive.seq_clash", table=table, seq=s, event_id=str(eid))
                    break
                if s != seq + 1:
                    epoch = etype == "security.alert" and _journal_lost(conn, table, s)
                    if not (epoch and step_over == (seq + 1, s - 1)):
                        hole = Hole(table, seq + 1, s - 1, epoch)
                        break
                seq, event_id = s, str(eid)
                shoe = eshoe if eshoe is not None else shoe
            if len(rows) < WALK_ROWS:
                break
        if stored is None or seq > stored:
            conn.execute(
                "INSERT INTO archive_table_marks (table_id, first_seq, seq, event_id) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (table_id) DO UPDATE SET seq = EXCLUDED.seq, event_id = EXCLUDED.event_id,"
                " updated_at = now() WHERE archive_table_marks.seq < EXCLUDED.seq",
                (table, first_seq, seq, event_id),
            )
    return TableMark(table, first_seq, seq, event_id), hole


def _shoe_of(event_id: str) -> str | None:
    shoe = event_id.split("/")[1] if event_id.count("/") == 2 else None
    return None if shoe in (None, "-") else shoe


def _continues(shoe: str | None, eshoe: str | None, rows: list[Any], i: int) -> bool:
    """Whether the event at ``rows[i]``, the next seq, can be the same
    journal's as the ones before: no second event with its seq, and its
    shoe not earlier than theirs. A shoe id is the UTC second of the shoe's
    first frame, so along one journal's seqs shoe ids never go back; an
    event of another journal that falls into a hole (a table id reused)
    makes them go back going in or coming out, unless it lies exactly
    between two of the journal's shoes."""
    if i + 1 < len(rows) and int(rows[i + 1][0]) == int(rows[i][0]):
        return False
    return shoe is None or eshoe is None or eshoe >= shoe


def _journal_lost(conn: Conn, table: str, seq: int) -> bool:
    """Whether ``table``'s alert at ``seq`` is ``JOURNAL_LOST`` (read only at
    a hole: the walk itself reads no payload)."""
    row = conn.execute(
        "SELECT 1 FROM security_alerts WHERE table_id = %s AND seq = %s AND code = 'JOURNAL_LOST' LIMIT 1",
        (table, seq),
    ).fetchone()
    return row is not None


def load_all(conn: Conn) -> list[TableMark]:
    """Every table's mark, as stored (to publish again after a reconnect:
    a broker that crashed may have lost the retained copies)."""
    with conn.transaction():
        rows = conn.execute(
            "SELECT table_id, first_seq, seq, event_id FROM archive_table_marks ORDER BY table_id"
        ).fetchall()
    return [TableMark(str(t), int(f), int(s), str(e)) for t, f, s, e in rows]


@dataclass
class _Open:
    hole: Hole
    since: float  # monotonic: when first seen
    reported: bool = False

    def epoch_due(self, now: float) -> bool:
        """A new epoch's jump, open long enough to be stepped over."""
        return self.hole.epoch and now - self.since >= EPOCH_HOLE_WAIT_S

    def fields(self, table: str, now: float) -> dict[str, Any]:
        """The hole as its log lines (opened, closed) name it."""
        h = self.hole
        return {
            "table": table,
            "first_missing": h.first,
            "last_missing": h.last,
            "missing": h.missing,
            "epoch": h.epoch,
            "open_s": round(now - self.since, 1),
        }


class MarkKeeper:
    """The archiver's side of the marks: which tables a committed batch
    touched, when each may be computed again (``MARK_EVERY_S``), the holes
    open and their reports, and publishing (``publish(topic, payload)``:
    retained, QoS 1). Runs in the writer's thread, between batches."""

    def __init__(
        self,
        prefix: str,
        publish: Callable[[str, bytes], None],
        *,
        on_hole: Callable[[int, int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prefix = prefix
        self._publish = publish
        #: (holes open and reported now, holes reported in all): for the metrics
        self._on_hole = on_hole
        self._clock = clock
        self._dirty: set[str] = set()
        self._next: dict[str, float] = {}  # table -> monotonic time it may be computed again
        self._published: dict[str, int] = {}  # table -> seq last published
        self.open: dict[str, _Open] = {}
        self.opened_total = 0
        self._republish = True  # at start: the broker may have none, or an old one

    def touched(self, topics: Iterable[str]) -> None:
        for topic in topics:
            table = classify(topic, self.prefix)
            if table is not None and not topic.endswith("/" + MARK_SUFFIX):
                self._dirty.add(table)

    def reconnected(self) -> None:
        """Publish every table's mark again (paho's thread may call it)."""
        self._republish = True

    def pending(self) -> bool:
        """Whether ``step`` has anything to do (the writer asks before it
        takes a database connection for it)."""
        return self._republish or bool(self._dirty) or bool(self.open)

    def step(self, conn: Conn) -> int:
        """Compute the marks that are due, publish those that moved, report
        holes; the number of marks published."""
        now = self._clock()
        sent = 0
        if self._republish:
            self._republish = False
            for stored in load_all(conn):
                self._send(stored)
                sent += 1
        for table, o in self.open.items():
            if not o.reported and now - o.since >= HOLE_GRACE_S:
                o.reported = True
                self.opened_total += 1
                log.warning("archive.hole_opened", **o.fields(table, now))
                self._holes_changed()
            if o.epoch_due(now):
                self._dirty.add(table)
        for table in sorted(self._dirty):
            if now < self._next.get(table, 0.0):
                continue
            self._dirty.discard(table)
            self._next[table] = now + MARK_EVERY_S
            held = self.open.get(table)
            step_over = None
            if held is not None and held.epoch_due(now):
                step_over = (held.hole.first, held.hole.last)
            mark, hole = advance(conn, table, step_over=step_over)
            self._track(table, hole, now)
            if mark is not None and mark.seq != self._published.get(table):
                self._send(mark)
                sent += 1
        return sent

    def _send(self, mark: TableMark) -> None:
        self._publish(mark_topic(self.prefix, mark.table), mark.payload())
        self._published[mark.table] = mark.seq

    def _track(self, table: str, hole: Hole | None, now: float) -> None:
        o = self.open.get(table)
        if o is not None and (hole is None or hole.first != o.hole.first):
            del self.open[table]
            if o.reported:
                log.info("archive.hole_closed", **o.fields(table, now))
                self._holes_changed()
            o = None
        if hole is not None:
            if o is None:
                self.open[table] = _Open(hole, now)
            else:
                o.hole = hole

    def _holes_changed(self) -> None:
        if self._on_hole is not None:
            self._on_hole(sum(1 for o in self.open.values() if o.reported), self.opened_total)
