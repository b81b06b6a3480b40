"""Floor report query times on a year of one table's coups, and the
archive's bytes per row.

A fresh database on the machine's PostgreSQL (127.0.0.1:5432, trust; or
``ARCHIVE_TEST_PG``) gets the archive schema, then a year of one table made by
the real engine (:func:`benchmarks.floor_year.year`: 365 days, 16 h a day
at 60..80 coups per hour, unread cards entered or lost, supervisor voids),
written through the archiver's own store (``Store.write``, which COPYs into
``events``, ``event_ids`` and the typed tables). Card events are left out
of the year (the report never reads them; they would only make ``events``
bigger): the sizing below measures them on 28 days instead.

Each report is run ``RUNS`` times and its median wall time reported (the
database does the work, so wall time is what a user waits). The database
is dropped at the end unless ``FLOOR_BENCH_KEEP=1`` (then its DSN is
printed, for trying ``shoe-controller report`` on it).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from benchmarks.floor_year import BULKY, year
from tests.support.postgres import temporary_database

RUNS = 5
DAYS = int(os.environ.get("FLOOR_BENCH_DAYS", "365"))
FIRST_DAY = dt.date(2025, 11, 1)
SIZING_DAYS = 28
BATCH = 2000


def _store() -> Any:
    from controller.archive.store import Store

    return Store(
        archiver="bench",
        prefix="baccarat",
        max_payload_bytes=256 * 1024,
        retention_months=120,
        partitions_ahead=1,
        now=lambda: dt.datetime.combine(FIRST_DAY, dt.time(), tzinfo=dt.UTC) + dt.timedelta(days=DAYS),
    )


def load(dsn: str, events: Iterable[dict[str, Any]]) -> tuple[int, float]:
    """Write ``events`` through the archiver's store; (events, seconds)."""
    from controller.archive.db import connect

    store = _store()
    conn = connect(dsn)
    n = 0
    t0 = time.perf_counter()
    try:
        chunk: list[tuple[str, bytes]] = []
        for ev in events:
            chunk.append((f"baccarat/{ev['table']}/{ev['type'].replace('.', '/')}", json.dumps(ev).encode()))
            if len(chunk) >= BATCH:
                n += store.write(conn, chunk).counts["archived"]
                chunk = []
        if chunk:
            n += store.write(conn, chunk).counts["archived"]
    finally:
        conn.close()
    return n, time.perf_counter() - t0


def _migrated(dsn: str) -> str:
    from controller.archive import migrate
    from controller.archive.db import connect

    with connect(dsn, autocommit=True) as conn:
        migrate.apply(conn)
    return dsn


def _report_args(**kw: Any) -> Any:
    import argparse

    base = {"tz": "UTC", "shifts": "00:00", "table": None, "alpha": 0.001, "idle_minutes": 5.0}
    base.update(kw)
    return argparse.Namespace(**base)


def _time_report(dsn: str, args: Any) -> tuple[float, int]:
    from controller.archive.db import connect
    from controller.commands.report import query_from_args, report

    q = query_from_args(args)
    conn = connect(dsn, autocommit=True)
    times = []
    rows = 0
    try:
        report(conn, q)  # warm: the first run reads the pages from disk
        for _ in range(RUNS):
            t0 = time.perf_counter()
            rep = report(conn, q)
            times.append(time.perf_counter() - t0)
            rows = len(rep["rows"])
    finally:
        conn.close()
    return statistics.median(times), rows


def _sizes(dsn: str) -> dict[str, tuple[int, int]]:
    """(rows, bytes with indexes and TOAST) of each archive table."""
    from controller.archive.db import connect

    out = {}
    conn = connect(dsn, autocommit=True)
    try:
        for table in (
            "events",
            "event_ids",
            "coups",
            "misdeals",
            "security_alerts",
            "device_status",
            "shoes",
        ):
            row = conn.execute(
                "SELECT (SELECT count(*) FROM "
                + table
                + "), coalesce(sum(pg_total_relation_size(c.oid)), 0) "
                "FROM pg_class c WHERE c.oid = %s::regclass OR c.oid IN "
                "(SELECT inhrelid FROM pg_inherits WHERE inhparent = %s::regclass)",
                (table, table),
            ).fetchone()
            assert row is not None
            out[table] = (int(row[0]), int(row[1]))
    finally:
        conn.close()
    return out


def _without_bulky(events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (e for e in events if e["type"] not in BULKY)


def run() -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    keep = os.environ.get("FLOOR_BENCH_KEEP") == "1"

    # --- sizing: a week of one table, every event (cards included) ---
    with temporary_database("floor_size") as dsn:
        n, _ = load(_migrated(dsn), year(days=SIZING_DAYS, first_day=FIRST_DAY, live=True))
        sizes = _sizes(dsn)
    coups = sizes["coups"][0]
    total = sum(b for _, b in sizes.values())
    results.append(
        {
            "name": "archive bytes per event (28 days, as published)",
            "value": total / n,
            "unit": "B/event",
            "note": f"{n:,} events, {coups:,} coups; every table with its indexes",
        }
    )
    results.append(
        {
            "name": "archive bytes per coup (28 days, as published)",
            "value": total / max(coups, 1),
            "unit": "B/coup",
            "note": f"{n / max(coups, 1):.2f} events per coup; "
            + ", ".join(f"{t} {b / r:.0f} B/row" for t, (r, b) in sizes.items() if r >= 1000),
        }
    )

    # --- a year of one table, the report's queries ---
    with temporary_database("floor_bench", keep=keep) as dsn:
        _migrated(dsn)
        t0 = time.perf_counter()
        n, load_s = load(dsn, _without_bulky(year(days=DAYS, first_day=FIRST_DAY)))
        built = time.perf_counter() - t0
        with __import__("psycopg").connect(dsn, autocommit=True) as c:
            c.execute("VACUUM ANALYZE")
        sizes = _sizes(dsn)
        coups = sizes["coups"][0]
        misdeals = sizes["misdeals"][0]
        results.append(
            {
                "name": f"year of one table: coups archived ({DAYS} d)",
                "value": coups,
                "unit": "coups",
                "note": f"{n:,} events without cards, {misdeals:,} misdeal events; made and stored in "
                f"{built:.0f} s (store {n / load_s:,.0f} events/s incl. the engine)",
            }
        )
        last = FIRST_DAY + dt.timedelta(days=DAYS - 1)
        cases = [
            ("one day, 3 shifts", {"since": str(last), "to": str(last), "shifts": "06:00,14:00,22:00"}),
            (
                "one month, 3 shifts, Asia/Macau",
                {
                    "since": str(last - dt.timedelta(days=29)),
                    "to": str(last),
                    "shifts": "06:00,14:00,22:00",
                    "tz": "Asia/Macau",
                },
            ),
            ("a year, by day", {"since": str(FIRST_DAY), "to": str(last)}),
            ("a year, 3 shifts", {"since": str(FIRST_DAY), "to": str(last), "shifts": "06:00,14:00,22:00"}),
            ("a year, one table, by day", {"since": str(FIRST_DAY), "to": str(last), "table": "T01"}),
        ]
        for label, kw in cases:
            secs, rows = _time_report(dsn, _report_args(**kw))
            results.append(
                {
                    "name": f"report: {label}",
                    "value": secs * 1000,
                    "unit": "ms",
                    "note": f"median of {RUNS}; {rows} table-periods",
                }
            )
        if keep:
            print(f"FLOOR_BENCH_KEEP: the year is in {dsn!r}", file=sys.stderr)
    return results
