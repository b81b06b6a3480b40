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
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from controller.archive.db import Conn
from controller.archive.store import BatchResult, Store
from controller.errors import RuntimeFailure

BATCH = 1000


def journal_messages(path: str, prefix: str, batch: int = BATCH) -> Iterator[list[tuple[str, bytes]]]:
    """The journal's events in seq order, as (topic, payload) batches."""
    if not Path(path).is_file():
        raise RuntimeFailure(f"{path}: no such journal")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error as exc:
        raise RuntimeFailure(f"{path}: cannot open the journal: {exc}") from None
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
            for _seq, etype, text in rows:
                # the topic the daemon published it on; the store checks the
                # event's own table and type against it
                table = _table_of(str(text))
                out.append((f"{prefix}/{table}/{str(etype).replace('.', '/')}", str(text).encode()))
            yield out
            last = int(rows[-1][0])
    finally:
        db.close()


def _table_of(text: str) -> str:
    try:
        table = json.loads(text).get("table")
    except (ValueError, AttributeError):
        return "-"
    return table if isinstance(table, str) and "/" not in table else "-"


def backfill(conn: Conn, store: Store, paths: list[str]) -> dict[str, dict[str, int]]:
    """Every journal of ``paths`` into the archive; counts per journal."""
    out: dict[str, dict[str, int]] = {}
    for path in paths:
        total = BatchResult()
        for messages in journal_messages(path, store.prefix):
            total.add(store.write(conn, messages))
        counts: Counter[str] = total.counts
        out[path] = {k: counts[k] for k in ("received", "archived", "duplicates", "conflicts", "rejects")}
    return out
