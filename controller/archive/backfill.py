"""``archive --backfill JOURNAL...``: a table's SQLite journal into the
archive, through the same idempotent store as the live stream.

What closes the archive's gaps: events published before the first archiver
subscribed, or while an archiver was away longer than its session expiry,
or lost with a crashed broker's queue, are all still in the tables'
journals (``journal_retention_days``, 90 by default). Backfilling a journal
twice, or one whose events the archiver already has, changes nothing
(duplicates); an event that differs from the archived one is a conflict,
kept aside and alerted on, as live. The journal is opened read-only (a
running daemon's journal, or a copy), and read in batches, so its size
does not bound memory.

A journal row that is not a valid event (a string with a lone surrogate
or a NUL, a number such as ``1e400``, anything ``parse`` refuses) is kept
aside in ``rejects`` as live, and reported by ``on_reject`` with its
journal seq; the rest is backfilled. The rows are read as bytes, so not
even text SQLite cannot decode stops the journal.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from controller.archive.db import Conn
from controller.archive.store import BatchResult, Store
from controller.config import table_problem
from controller.errors import RuntimeFailure

BATCH = 1000


def journal_messages(path: str, prefix: str, batch: int = BATCH) -> Iterator[list[tuple[int, str, bytes]]]:
    """The journal's events in seq order, as (seq, topic, payload) batches."""
    if not Path(path).is_file():
        raise RuntimeFailure(f"{path}: no such journal")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error as exc:
        raise RuntimeFailure(f"{path}: cannot open the journal: {exc}") from None
    db.text_factory = bytes  # the payload as stored, whatever bytes it holds
    try:
        last = -1
        while True:
            try:
                rows = db.execute(
                    "SELECT seq, type, json FROM events WHERE seq > ? ORDER BY seq LIMIT ?", (last, batch)
                ).fetchall()
            except sqlite3.Error as exc:
                raise RuntimeFailure(f"{path}: not a readable shoe-controller journal: {exc}") from None
            if not rows:
                return
            out = []
            for seq, etype, raw in rows:
                # the topic the daemon published it on; the store checks the
                # event's own table and type against it
                payload = _bytes(raw)
                etype_path = _bytes(etype).decode(errors="replace").replace(".", "/")
                out.append((int(seq), f"{prefix}/{_table_of(payload)}/{etype_path}", payload))
            yield out
            last = int(rows[-1][0])
    finally:
        db.close()


def journal_keys(path: str, prefix: str) -> tuple[str, bytes] | None:
    """The journal's signing keys as its table announces them on
    ``<prefix>/<table>/keys``, or None (a journal never signed)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            keys = db.execute("SELECT value FROM meta WHERE key = 'signing_keys'").fetchone()
            first = db.execute("SELECT json FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None  # journal_messages says what is wrong with it
    if keys is None or first is None:
        return None
    table = _table_of(_bytes(first[0]))
    try:
        listed = json.loads(keys[0])
    except ValueError:
        return None
    doc = json.dumps({"table": table, "keys": listed}, separators=(",", ":"))
    return f"{prefix}/{table}/keys", doc.encode()


def _bytes(value: object) -> bytes:
    """A column read with ``text_factory = bytes``: text and blobs as bytes."""
    if isinstance(value, bytes):
        return value
    return b"" if value is None else str(value).encode()


def _table_of(payload: bytes) -> str:
    """The event's table for its topic, or ``-`` (the store then rejects the
    event for its topic, or for what else is wrong with it)."""
    try:
        table = json.loads(payload).get("table")
    except (ValueError, AttributeError, RecursionError):  # not JSON, not an object, too deep
        return "-"
    if not isinstance(table, str) or table_problem(table) is not None:
        return "-"
    return table


def backfill(
    conn: Conn, store: Store, paths: list[str], on_reject: Callable[[str, int, str], None] | None = None
) -> dict[str, dict[str, int]]:
    """Every journal of ``paths`` into the archive; counts per journal.
    ``on_reject(path, seq, reason)`` for each event kept aside."""
    out: dict[str, dict[str, int]] = {}
    for path in paths:
        total = BatchResult()
        announcement = journal_keys(path, store.prefix)
        if announcement is not None:  # the table's keys before its events
            store.write(conn, [announcement])
        for rows in journal_messages(path, store.prefix):
            result = store.write(conn, [(topic, payload) for _, topic, payload in rows])
            if on_reject is not None:
                for index, reason in result.rejected:
                    on_reject(path, rows[index][0], reason)
            total.add(result)
        counts: Counter[str] = total.counts
        out[path] = {k: counts[k] for k in ("received", "archived", "duplicates", "conflicts", "rejects")}
    return out
