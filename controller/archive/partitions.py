"""Monthly partitions of the archive's growing tables, and retention.

A partition ``<parent>_pYYYYMM`` holds ``[first of month, first of next
month)`` UTC of the event's ``ts``. The archiver makes the current month's
and ``ahead`` months' partitions at start and every hour, and makes a
month's on demand when an event needs it (a replay of an older capture,
say), as long as that month is inside the retention window; an event
outside the window is kept aside as a reject (``store``), never silently
lost and never a reason to create a partition decades away.

Retention drops whole partitions (instant, no VACUUM debt) older than
``retention_months`` full months before the current one, and the
``event_ids``/``shoes`` rows of the same period. All DDL is taken under an
advisory lock so several archivers never race on it.
"""

from __future__ import annotations

import datetime as dt
import re

from psycopg import sql

from controller.archive.db import Conn

#: The partitioned tables (migration 0001; ``coup_corrections``, 0003). A
#: later migration that adds one adds it here.
PARTITIONED: tuple[str, ...] = (
    "events",
    "coups",
    "misdeals",
    "device_status",
    "security_alerts",
    "coup_corrections",
)

#: The tables of the ``replays`` schema (migration 5) with a ``ts``:
#: not partitioned, retention deletes their rows (``drop_expired``).
REPLAY_TABLES: tuple[str, ...] = ("event_ids", *PARTITIONED)

#: pg_advisory_xact_lock key for partition DDL.
PARTITION_LOCK = 0x5C0A_0002

_SUFFIX = re.compile(r"_p(\d{4})(\d{2})$")


def month_start(t: dt.datetime | dt.date) -> dt.date:
    return dt.date(t.year, t.month, 1)


def add_months(d: dt.date, n: int) -> dt.date:
    index = d.year * 12 + (d.month - 1) + n
    return dt.date(index // 12, index % 12 + 1, 1)


def horizon(now: dt.datetime, retention_months: int) -> dt.date:
    """The first day kept: the start of the month ``retention_months``
    before the current one (12 keeps this month and the 12 before it)."""
    return add_months(month_start(now), -retention_months)


def window(now: dt.datetime, retention_months: int, ahead: int) -> tuple[dt.datetime, dt.datetime]:
    """The ts range [low, high) the archive accepts: the retention horizon to
    the end of the last month made ahead."""
    low = horizon(now, retention_months)
    high = add_months(month_start(now), ahead + 1)
    utc = dt.UTC
    return (
        dt.datetime(low.year, low.month, 1, tzinfo=utc),
        dt.datetime(high.year, high.month, 1, tzinfo=utc),
    )


def partition_name(parent: str, month: dt.date) -> str:
    return f"{parent}_p{month.year:04d}{month.month:02d}"


def existing(conn: Conn, parent: str) -> dict[dt.date, str]:
    """The partitions of ``parent`` by month."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = %s::regclass",
        (parent,),
    ).fetchall()
    out: dict[dt.date, str] = {}
    for (name,) in rows:
        m = _SUFFIX.search(str(name))
        if m:
            out[dt.date(int(m.group(1)), int(m.group(2)), 1)] = str(name)
    return out


def ensure(conn: Conn, months: list[dt.date]) -> int:
    """Create the partitions of every month in ``months`` for every
    partitioned table; returns how many were made. Runs inside the caller's
    transaction (the lock is released at its end)."""
    if not months:
        return 0
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (PARTITION_LOCK,))
    made = 0
    for parent in PARTITIONED:
        have = existing(conn, parent)
        for month in sorted(set(months)):
            if month in have:
                continue
            nxt = add_months(month, 1)
            conn.execute(
                sql.SQL("CREATE TABLE {} PARTITION OF {} FOR VALUES FROM ({}) TO ({})").format(
                    sql.Identifier(partition_name(parent, month)),
                    sql.Identifier(parent),
                    sql.Literal(f"{month.isoformat()} 00:00:00+00"),
                    sql.Literal(f"{nxt.isoformat()} 00:00:00+00"),
                )
            )
            made += 1
    return made


def ensure_ahead(conn: Conn, now: dt.datetime, ahead: int) -> int:
    """This month's partitions and ``ahead`` months' after it (autocommit
    or not: one transaction)."""
    first = month_start(now)
    with conn.transaction():
        return ensure(conn, [add_months(first, i) for i in range(ahead + 1)])


def drop_expired(conn: Conn, now: dt.datetime, retention_months: int) -> list[str]:
    """Drop every partition wholly before the retention horizon, with the
    ``event_ids`` and ``shoes`` rows of that period; returns the dropped
    partitions' names. One transaction."""
    keep_from = horizon(now, retention_months)
    dropped: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (PARTITION_LOCK,))
        for parent in PARTITIONED:
            for month, name in sorted(existing(conn, parent).items()):
                if month < keep_from:
                    conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(name)))
                    dropped.append(name)
        cutoff = dt.datetime(keep_from.year, keep_from.month, 1, tzinfo=dt.UTC)
        conn.execute("DELETE FROM event_ids WHERE ts < %s", (cutoff,))
        conn.execute("DELETE FROM signed_lines WHERE ts < %s", (cutoff,))  # migration 6
        conn.execute("DELETE FROM shoes WHERE coalesce(started_at, ended_at) < %s", (cutoff,))
        # replayed events (migration 5): the same horizon, row by row (not partitioned)
        for table in REPLAY_TABLES:
            conn.execute(
                sql.SQL("DELETE FROM replays.{} WHERE ts < %s").format(sql.Identifier(table)), (cutoff,)
            )
        conn.execute("DELETE FROM replays.shoes WHERE coalesce(started_at, ended_at) < %s", (cutoff,))
        if dropped:
            # a table's mark holds it from its first archived seq (migration
            # 4): from the first one left, so that verify tells retention
            # from a deleted event (a table with none left: from above its
            # mark, where its next event will be)
            conn.execute(
                "UPDATE archive_table_marks m SET first_seq = f.seq FROM ("
                " SELECT t.table_id, coalesce("
                "(SELECT min(e.seq) FROM events e WHERE e.table_id = t.table_id), t.seq + 1) AS seq"
                " FROM archive_table_marks t) f"
                " WHERE f.table_id = m.table_id AND m.first_seq < f.seq"
            )
    return dropped
