"""One batch of MQTT messages into PostgreSQL, in one transaction.

``Store.write`` is the whole of the archive's integrity rule:

* a message on a topic that carries no event is counted as ``ignored``;
* a payload that is not a valid event (``parse``), or whose ``ts`` lies
  outside the archive's window (older than retention, or beyond the
  partitions made ahead) is kept aside in ``rejects`` (its first
  ``max_payload_bytes``, as bytes: whatever it holds; the topic and the
  reason as printable text, ``parse.printable``) and counted;
* an event is claimed in ``event_ids`` (``INSERT .. ON CONFLICT DO
  NOTHING``, in event-id order so two archivers never deadlock): a new id
  is written to ``events`` and its typed table (COPY); an id already there
  with the same digest is a ``duplicate`` and changes nothing; an id there
  with a different digest is a ``conflict``: both payloads go to
  ``conflicts``, the stored rows are untouched, and the caller raises the
  alarm (log line; the durable counter is written here);
* a replayed event (``parse.Event.replay``: published by ``replay --out
  mqtt``, its id of the replay form) goes through the same steps in the
  schema ``replays`` (migration 5): its own ``event_ids``, ``events``,
  typed tables, ``shoes`` and ``conflicts``, never the live ones, so a
  replay never claims, duplicates or conflicts with a live event and the
  floor's figures never count it; its outcome is counted apart
  (``replay_archived``, ``replay_duplicates``, ``replay_conflicts``);
* the counters (``archive_counters``) are updated in the same transaction,
  so after ``kill -9`` they still count exactly what was committed;
* with a ``BatchMark``, the batch's id is recorded in the same transaction
  (``archive_batch_marks``, one row per archiver). A COMMIT whose reply is
  lost leaves the caller unsure whether the batch is in: it retries the
  same batch with ``retry`` set, and a batch already marked is not written
  or counted again (``BatchResult.already_committed``), so ``received``,
  ``duplicates``, ``ignored`` and ``rejects`` stay exact too. A refused
  batch written message by message marks each message (parts 1..n): a
  retry resumes after the last one committed.

The caller acknowledges the batch's messages only after ``write``
returns, i.e. after COMMIT. A connection failure (``psycopg.OperationalError``
or ``InterfaceError``) propagates: nothing was committed and the caller
retries on a new connection. A message's own values are never allowed to
wedge the stream: a row PostgreSQL refuses, or a value psycopg cannot send
(``_MESSAGE_ERRORS``), rolls the batch back and it is written message by
message, and a message that fails on its own is kept aside in ``rejects``
with the reason (so is one ``parse`` fails on in any way). What cannot be
kept aside either (the ``rejects`` row refused), and any other error, is
the database's or the archiver's, not a message's: it propagates like a
lost connection, retried and never acknowledged.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import psycopg
import structlog

from controller.archive import partitions
from controller.archive.db import Conn, one_line
from controller.archive.keys import TableKeys
from controller.archive.parse import Event, Invalid, classify, parse, printable

log = structlog.get_logger("archive")

COUNTERS: tuple[str, ...] = (
    "received",
    "archived",
    "duplicates",
    "conflicts",
    "rejects",
    "ignored",
    "bad_signatures",  # rejects for a missing or bad signature: each an alert
    "keys_refused",  # key announcements refused whole (also counted as ignored)
    # replayed events (schema ``replays``), counted apart from the live ones
    # above: never in archived, duplicates or conflicts (``received`` counts
    # every message, replayed or not)
    "replay_archived",
    "replay_duplicates",
    "replay_conflicts",
)

_COLUMNS: dict[str, tuple[str, ...]] = {
    "coups": (
        "coup", "demo", "void", "void_code", "player_cards", "banker_cards", "player_total", "banker_total",
        "winner", "natural", "player_pair", "banker_pair", "tags", "settlement", "corrections",
    ),
    "misdeals": ("coup", "code", "detail", "action", "deadline", "supervisor"),
    "security_alerts": ("coup", "code", "detail", "supervisor"),
    "device_status": ("state", "code", "device"),
    "coup_corrections": (
        "coup", "supersedes", "player_cards", "banker_cards", "player_total", "banker_total", "winner",
        "natural", "player_pair", "banker_pair", "tags", "settlement", "changes", "reason", "command_id",
    ),
}  # fmt: skip

#: The schema replayed events are archived in (migration 5); the live
#: tables are the search path's (``public``).
REPLAYS = "replays."

_SHOE_STARTED = """
INSERT INTO {ns}shoes (table_id, shoe, started_at, started_event_id, decks, profile, shuffle_commit)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (table_id, shoe) DO UPDATE SET started_at = EXCLUDED.started_at,
    started_event_id = EXCLUDED.started_event_id, decks = EXCLUDED.decks,
    profile = EXCLUDED.profile, shuffle_commit = EXCLUDED.shuffle_commit
"""
_SHOE_ENDED = """
INSERT INTO {ns}shoes (table_id, shoe, ended_at, ended_event_id, coups, cards_dealt,
                   tally_player, tally_banker, tally_tie)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (table_id, shoe) DO UPDATE SET ended_at = EXCLUDED.ended_at,
    ended_event_id = EXCLUDED.ended_event_id, coups = EXCLUDED.coups,
    cards_dealt = EXCLUDED.cards_dealt, tally_player = EXCLUDED.tally_player,
    tally_banker = EXCLUDED.tally_banker, tally_tie = EXCLUDED.tally_tie
"""


@dataclass
class Conflict:
    event_id: str
    topic: str
    stored_digest: bytes
    new_digest: bytes
    new_canonical: str


@dataclass
class BatchResult:
    counts: Counter[str] = field(default_factory=Counter)
    conflicts: list[Conflict] = field(default_factory=list)
    #: (the message's index in what was written, "topic: reason") of each reject.
    rejected: list[tuple[int, str]] = field(default_factory=list)
    #: The indices of the messages ``write`` was allowed to set aside for
    #: their table's key (``deferrable``) and did: not written, not counted,
    #: for the caller to offer again (jetstream.py).
    deferred: list[int] = field(default_factory=list)
    #: A retry found the batch (or all of it that was left) already
    #: committed by an earlier attempt whose COMMIT reply was lost.
    already_committed: bool = False

    @property
    def reject_reasons(self) -> list[str]:
        return [reason for _, reason in self.rejected]

    def add(self, other: BatchResult) -> None:
        self.counts.update(other.counts)
        self.conflicts.extend(other.conflicts)
        self.rejected.extend(other.rejected)
        self.deferred.extend(other.deferred)


@dataclass(frozen=True)
class BatchMark:
    """Which batch a write is: the same ``batch`` on every attempt, with
    ``retry`` set on the second and later ones (the store then looks for the
    batch's mark before writing anything)."""

    batch: uuid.UUID = field(default_factory=uuid.uuid4)
    retry: bool = False


@dataclass
class _Reject:
    index: int  # in the messages of the write
    topic: str
    reason: str
    payload: bytes


#: What a message's own values can make writing a batch raise: PostgreSQL
#: refusing a row (``psycopg.Error`` but a connection's), or psycopg unable to
#: send a value (``ValueError``: ``UnicodeEncodeError`` for a lone surrogate;
#: ``OverflowError``). Anything else is the archiver's or the database's
#: fault, not one message's: it propagates, retried and never acknowledged.
_MESSAGE_ERRORS = (psycopg.Error, ValueError, OverflowError)


def is_connection_error(exc: BaseException) -> bool:
    """A failure of the connection or the server (retry on a new
    connection), as opposed to a row the database refuses."""
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


class Store:
    def __init__(
        self,
        *,
        archiver: str,
        prefix: str,
        max_payload_bytes: int,
        retention_months: int,
        partitions_ahead: int,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        pinned: dict[str, list[str]] | None = None,
        trust_on_first_use: bool = True,
    ) -> None:
        self.archiver = archiver
        self.prefix = prefix
        self.max_payload_bytes = max_payload_bytes
        self.retention_months = retention_months
        self.partitions_ahead = partitions_ahead
        self.now = now
        #: Months whose partitions are known to exist (per connection life:
        #: cleared on reconnect, since retention may have dropped some).
        self.months: set[dt.date] = set()
        #: each table's trusted signing keys
        self.keys = TableKeys(pinned or {}, trust_on_first_use=trust_on_first_use)

    # --- the batch ------------------------------------------------------------

    def write(
        self,
        conn: Conn,
        messages: Sequence[tuple[str, bytes]],
        mark: BatchMark | None = None,
        deferrable: AbstractSet[int] = frozenset(),
    ) -> BatchResult:
        """Write ``messages`` (topic, payload) in one transaction; see the
        module docstring. ``conn`` is not in autocommit mode. A message whose
        index is in ``deferrable`` and that is signed under a key of its table
        not known yet (``TableKeys.may_learn``) is neither written nor
        rejected nor counted: its index is in ``BatchResult.deferred``, for
        the caller to offer it again later."""
        start = 0
        if mark is not None and mark.retry:
            done = self._committed_part(conn, mark.batch)
            if done is not None and (done == 0 or done >= len(messages)):
                log.warning("archive.batch_already_committed", size=len(messages), part=done)
                return BatchResult(already_committed=True)
            start = done or 0
        if start == 0:
            try:
                return self._write(conn, messages, _part(mark, 0), deferrable=deferrable)
            except _MESSAGE_ERRORS as exc:  # a row refused, or a value psycopg cannot send
                if is_connection_error(exc):
                    raise
                _rollback(conn)
                if len(messages) == 1:
                    return self._refused(conn, messages[0], exc, _part(mark, 0), 0)
                log.warning(
                    "archive.batch_refused", size=len(messages), error=error_line(exc), then="one by one"
                )
        else:
            log.warning("archive.batch_resumed", size=len(messages), committed=start)
        result = BatchResult()
        for i in range(start, len(messages)):
            part = _part(mark, i + 1)
            try:
                result.add(self._write(conn, [messages[i]], part, offset=i, deferrable=deferrable))
            except _MESSAGE_ERRORS as exc:
                if is_connection_error(exc):
                    raise
                _rollback(conn)
                result.add(self._refused(conn, messages[i], exc, part, i))
        return result

    def _refused(
        self,
        conn: Conn,
        message: tuple[str, bytes],
        exc: BaseException,
        part: tuple[uuid.UUID, int] | None,
        index: int,
    ) -> BatchResult:
        """A message that failed on its own: kept aside in ``rejects``."""
        topic, payload = message
        if isinstance(exc, psycopg.Error):
            reason = f"database refused it: {one_line(exc)}"
        else:
            reason = f"could not be stored: {error_line(exc)}"
        log.error("archive.refused", topic=printable(topic), reason=printable(reason))
        return self._write_rejects(conn, [_Reject(index, topic, reason, payload)], part)

    def _committed_part(self, conn: Conn, batch: uuid.UUID) -> int | None:
        """How much of ``batch`` an earlier attempt committed (0: all of it;
        k: its first k messages, one by one), or None."""
        with conn.transaction():
            row = conn.execute(
                "SELECT part FROM archive_batch_marks WHERE archiver = %s AND batch = %s",
                (self.archiver, batch),
            ).fetchone()
        return None if row is None else int(row[0])

    def _mark(self, cur: psycopg.Cursor[tuple[Any, ...]], part: tuple[uuid.UUID, int] | None) -> None:
        if part is None:
            return
        cur.execute(
            "INSERT INTO archive_batch_marks (archiver, batch, part) VALUES (%s, %s, %s) "
            "ON CONFLICT (archiver) DO UPDATE SET batch = EXCLUDED.batch, part = EXCLUDED.part, "
            "marked_at = now()",
            (self.archiver, part[0], part[1]),
        )

    def _write(
        self,
        conn: Conn,
        messages: Sequence[tuple[str, bytes]],
        part: tuple[uuid.UUID, int] | None = None,
        *,
        offset: int = 0,
        deferrable: AbstractSet[int] = frozenset(),
    ) -> BatchResult:
        result = BatchResult()
        result.counts["received"] += len(messages)
        events: list[Event] = []
        rejects: list[_Reject] = []
        low, high = partitions.window(self.now(), self.retention_months, self.partitions_ahead)
        signed: dict[str, str] = {}
        checked: list[tuple[int, str, Event, bytes]] = []
        for index, (topic, payload) in enumerate(messages, offset):
            table = classify(topic, self.prefix)
            if table is None:
                result.counts["ignored"] += 1
                continue
            if topic == f"{self.prefix}/{table}/keys":
                if self.keys.announced(conn, table, payload) is not None:
                    result.counts["keys_refused"] += 1
                result.counts["ignored"] += 1
                continue
            try:
                ev = parse(topic, payload, prefix=self.prefix, max_bytes=self.max_payload_bytes)
            except Invalid as exc:
                rejects.append(_Reject(index, topic, str(exc), payload))
                continue
            except Exception as exc:  # a bug parse met on this message: never the stream's end
                reason = f"the archiver failed on it: {error_line(exc)}"
                log.error("archive.parse_failed", topic=printable(topic), error=printable(reason))
                rejects.append(_Reject(index, topic, reason, payload))
                continue
            if not low <= ev.ts < high:
                span = f"[{low.date()}, {high.date()})"
                reason = f"ts {ev.ts.isoformat()} is outside the archive's window {span} (retention, ahead)"
                rejects.append(_Reject(index, topic, reason, payload))
                continue
            checked.append((index, topic, ev, payload))
        # the live events' signatures, one verification per linked run of a
        # table's events (keys.check_batch); a replayed event is never signed
        to_check = [(ev, payload) for _, _, ev, payload in checked if ev.replay is None]
        verdicts = iter(self.keys.check_batch(conn, to_check))
        for index, topic, ev, payload in checked:
            if ev.replay is None:
                problem, line = next(verdicts)
                if problem is not None and index in deferrable and self.keys.may_learn(ev, payload):
                    result.deferred.append(index)
                    result.counts["received"] -= 1  # counted when it is written
                    continue
                if problem is not None:
                    result.counts["bad_signatures"] += 1
                    rejects.append(_Reject(index, topic, f"signature: {problem}", payload))
                    log.error(
                        "archive.signature_alert", event_id=printable(ev.event_id), problem=printable(problem)
                    )
                    continue
                if line is not None:
                    signed.setdefault(ev.event_id, line)
            events.append(ev)

        # Within the batch: the first copy of an id is the candidate.
        first: dict[str, Event] = {}
        later: list[Event] = []
        for ev in events:
            if ev.event_id in first:
                later.append(ev)
            else:
                first[ev.event_id] = ev
        self._ensure_partitions(conn, {ev.month for ev in first.values() if ev.replay is None})

        with conn.transaction():
            cur = conn.cursor()
            # live events, then replayed ones apart (their ids never meet:
            # controller.replay.replay_event_id)
            for ns in ("", REPLAYS):
                live = ns == ""
                self._claim(
                    cur,
                    ns,
                    {i: ev for i, ev in first.items() if (ev.replay is None) == live},
                    [ev for ev in later if (ev.replay is None) == live],
                    result,
                )
            self.keys.save(cur)
            _insert_signed(cur, [first[i] for i in sorted(signed) if first.get(i) is not None], signed)
            result.counts["rejects"] += len(rejects)
            self._insert_rejects(cur, rejects, result)
            self._count(cur, result.counts)
            self._mark(cur, part)
        return result

    def _claim(
        self,
        cur: psycopg.Cursor[tuple[Any, ...]],
        ns: str,
        first: dict[str, Event],
        later: list[Event],
        result: BatchResult,
    ) -> None:
        """Claim ``first``'s ids in ``{ns}event_ids`` and write the new ones;
        a duplicate or a conflict (``later``: further copies in the batch)
        counted and kept in ``{ns}conflicts``. ``ns``: "" (the live tables)
        or ``REPLAYS``."""
        if not first:
            return
        counted = "" if ns == "" else "replay_"  # a replay's outcomes are counted apart
        ids = sorted(first)
        cur.execute(
            f"INSERT INTO {ns}event_ids (event_id, ts, table_id, digest) "
            "SELECT * FROM unnest(%b::text[], %b::timestamptz[], %b::text[], %b::bytea[]) ORDER BY 1 "
            "ON CONFLICT (event_id) DO NOTHING RETURNING event_id",
            (
                ids,
                [first[i].ts for i in ids],
                [first[i].table for i in ids],
                [first[i].digest for i in ids],
            ),
        )  # %b: binary arrays, as in _insert_signed (in text psycopg formats each
        # element in Python: 8 us of the archiver's CPU an event, 1.5 so)
        new = {str(r[0]) for r in cur.fetchall()}
        stored: dict[str, tuple[bytes, dt.datetime]] = {}
        old = [i for i in ids if i not in new]
        if old:
            cur.execute(f"SELECT event_id, digest, ts FROM {ns}event_ids WHERE event_id = ANY(%b)", (old,))
            stored = {str(r[0]): (bytes(r[1]), r[2]) for r in cur.fetchall()}
        for ev in later:  # a later copy in this batch: compare with the first
            if ev.event_id in new:
                stored[ev.event_id] = (first[ev.event_id].digest, first[ev.event_id].ts)
        for ev in [first[i] for i in old] + later:
            digest, ts = stored[ev.event_id]
            if digest == ev.digest:
                result.counts[counted + "duplicates"] += 1
            else:
                self._conflict(cur, ns, ev, digest, ts, first, new, result)
        fresh = [first[i] for i in ids if i in new]
        self._insert_events(cur, ns, fresh)
        result.counts[counted + "archived"] += len(fresh)

    def _conflict(
        self,
        cur: psycopg.Cursor[tuple[Any, ...]],
        ns: str,
        ev: Event,
        stored_digest: bytes,
        stored_ts: dt.datetime,
        first: dict[str, Event],
        new: set[str],
        result: BatchResult,
    ) -> None:
        if ev.event_id in new:  # its first copy is in this very batch
            stored_payload: str | None = first[ev.event_id].canonical
        else:
            cur.execute(
                f"SELECT payload::text FROM {ns}events WHERE event_id = %s AND ts = %s",
                (ev.event_id, stored_ts),
            )
            row = cur.fetchone()
            stored_payload = None if row is None else str(row[0])
        cur.execute(
            f"INSERT INTO {ns}conflicts (event_id, archiver, topic, stored_digest, new_digest, "
            "stored_payload, new_payload) VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb)",
            (ev.event_id, self.archiver, ev.topic, stored_digest, ev.digest, stored_payload, ev.canonical),
        )
        result.counts["conflicts" if ns == "" else "replay_conflicts"] += 1
        result.conflicts.append(Conflict(ev.event_id, ev.topic, stored_digest, ev.digest, ev.canonical))

    def _insert_events(self, cur: psycopg.Cursor[tuple[Any, ...]], ns: str, fresh: list[Event]) -> None:
        if not fresh:
            return
        with cur.copy(f"COPY {ns}events (event_id, ts, table_id, shoe, seq, type, payload) FROM STDIN") as cp:
            for ev in fresh:
                cp.write_row((ev.event_id, ev.ts, ev.table, ev.shoe, ev.seq, ev.type, ev.canonical))
        by_table: dict[str, list[Event]] = {}
        for ev in fresh:
            if ev.typed is not None:
                by_table.setdefault(ev.typed[0], []).append(ev)
        for table, evs in by_table.items():
            if table in _COLUMNS:
                cols = _COLUMNS[table]
                names = ", ".join(f'"{c}"' for c in ("event_id", "ts", "table_id", "shoe", "seq", *cols))
                with cur.copy(f"COPY {ns}{table} ({names}) FROM STDIN") as cp:
                    for ev in evs:
                        assert ev.typed is not None
                        row = ev.typed[1]
                        cp.write_row((ev.event_id, ev.ts, ev.table, ev.shoe, ev.seq, *(row[c] for c in cols)))
            elif table == "shoes.started":
                cur.executemany(
                    _SHOE_STARTED.format(ns=ns),
                    [
                        (
                            ev.table,
                            ev.shoe,
                            ev.ts,
                            ev.event_id,
                            *_values(ev, ("decks", "profile", "shuffle_commit")),
                        )
                        for ev in evs
                        if ev.shoe is not None
                    ],
                )
            elif table == "shoes.ended":
                cols = ("coups", "cards_dealt", "tally_player", "tally_banker", "tally_tie")
                cur.executemany(
                    _SHOE_ENDED.format(ns=ns),
                    [
                        (ev.table, ev.shoe, ev.ts, ev.event_id, *_values(ev, cols))
                        for ev in evs
                        if ev.shoe is not None
                    ],
                )

    def _insert_rejects(
        self, cur: psycopg.Cursor[tuple[Any, ...]], rejects: list[_Reject], result: BatchResult
    ) -> None:
        if not rejects:
            return
        with cur.copy("COPY rejects (archiver, topic, reason, size, payload) FROM STDIN") as cp:
            for r in rejects:
                # text PostgreSQL takes whatever the message held: no NUL, no lone surrogate
                topic, reason = printable(r.topic), printable(r.reason)
                kept = r.payload[: self.max_payload_bytes]
                cp.write_row((self.archiver, topic, reason, len(r.payload), kept))
                result.rejected.append((r.index, f"{topic}: {reason}"))

    def _write_rejects(
        self, conn: Conn, rejects: list[_Reject], part: tuple[uuid.UUID, int] | None = None
    ) -> BatchResult:
        result = BatchResult()
        result.counts["received"] += len(rejects)
        result.counts["rejects"] += len(rejects)
        with conn.transaction():
            cur = conn.cursor()
            self._insert_rejects(cur, rejects, result)
            self._count(cur, result.counts)
            self._mark(cur, part)
        return result

    def _count(self, cur: psycopg.Cursor[tuple[Any, ...]], counts: Counter[str]) -> None:
        names = [n for n in COUNTERS if counts[n]]
        if not names:
            return
        cur.execute(
            "INSERT INTO archive_counters (archiver, name, value) "
            "SELECT %s, * FROM unnest(%s::text[], %s::bigint[]) "
            "ON CONFLICT (archiver, name) DO UPDATE SET value = archive_counters.value + EXCLUDED.value",
            (self.archiver, names, [counts[n] for n in names]),
        )

    # --- partitions -----------------------------------------------------------

    def _ensure_partitions(self, conn: Conn, months: set[dt.date]) -> None:
        """Make the partitions an event needs before the batch's own
        transaction (DDL there would hold the parent's lock until COMMIT)."""
        missing = months - self.months
        if not missing:
            return
        with conn.transaction():
            partitions.ensure(conn, sorted(missing))
        self.months |= missing

    def maintain(self, conn: Conn) -> tuple[int, list[str]]:
        """Partitions ahead, and retention: (partitions made, partitions dropped)."""
        now = self.now()
        made = partitions.ensure_ahead(conn, now, self.partitions_ahead)
        dropped = partitions.drop_expired(conn, now, self.retention_months)
        self.months.clear()
        return made, dropped


def _insert_signed(cur: psycopg.Cursor[tuple[Any, ...]], evs: list[Event], signed: dict[str, str]) -> None:
    """The signed lines of the events just claimed (``ON CONFLICT``: an id
    already archived keeps the line it was archived with)."""
    if not evs:
        return
    cur.execute(
        "INSERT INTO signed_lines (event_id, ts, table_id, seq, line) "
        "SELECT * FROM unnest(%b::text[], %b::timestamptz[], %b::text[], %b::bigint[], %b::text[]) "
        "ON CONFLICT (event_id) DO NOTHING",
        (
            [e.event_id for e in evs],
            [e.ts for e in evs],
            [e.table for e in evs],
            [e.seq for e in evs],
            [signed[e.event_id] for e in evs],
        ),
    )  # %b: the arrays go in binary, their elements as they are (in text, every
    # quote of every line is escaped in Python: 3 times the rest of the cost)


def _part(mark: BatchMark | None, part: int) -> tuple[uuid.UUID, int] | None:
    return None if mark is None else (mark.batch, part)


def _values(ev: Event, cols: Sequence[str]) -> list[Any]:
    assert ev.typed is not None
    return [ev.typed[1][c] for c in cols]


def error_line(exc: BaseException) -> str:
    """An unexpected error in one line: its type and first line."""
    return f"{type(exc).__name__}: {one_line(exc)}"


def _rollback(conn: Conn) -> None:
    with contextlib.suppress(psycopg.Error):
        conn.rollback()


def counters(conn: Conn) -> dict[str, dict[str, int]]:
    """The durable counters by archiver."""
    out: dict[str, dict[str, int]] = {}
    for archiver, name, value in conn.execute(
        "SELECT archiver, name, value FROM archive_counters"
    ).fetchall():
        out.setdefault(str(archiver), {})[str(name)] = int(value)
    return out
