"""How the floor tests' events get into the archive: ``archive`` writes
them through the archiver's own insert path
(``controller.archive.store.Store``), as MQTT messages on their topics, so
the report is tested on what users run. The events themselves come from
the real engine (``tests.table.Table`` for scripted coups,
``benchmarks.floor_year.Dealer`` for whole shoes)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from benchmarks.floor_year import BULKY


def topic_of(ev: dict[str, Any], prefix: str = "baccarat") -> str:
    return f"{prefix}/{ev['table']}/{ev['type'].replace('.', '/')}"


def archive(dsn: str, events: Iterable[dict[str, Any]], batch: int = 500) -> int:
    """Write ``events`` through the archiver's store, in batches; returns
    how many were archived (new; replayed ones too, which the store counts
    apart)."""
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
                done += _archived(store.write(conn, chunk).counts)
                chunk = []
        if chunk:
            done += _archived(store.write(conn, chunk).counts)
    finally:
        conn.close()
    return done


def without_bulky(events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (e for e in events if e["type"] not in BULKY)


def _archived(counts: Any) -> int:
    return int(counts["archived"] + counts["replay_archived"])


@contextmanager
def fresh_archive(prefix: str = "floor_test") -> Iterator[str]:
    """A fresh database (tests.support.postgres) with every archive
    migration applied; fails with what to install or start when the
    server is not there."""
    from controller.archive import migrate
    from controller.archive.db import connect
    from tests.support import postgres

    problem = postgres.unavailable()
    if problem:
        pytest.fail(problem, pytrace=False)
    with postgres.temporary_database(prefix) as dsn:
        conn = connect(dsn, autocommit=True)
        try:
            migrate.apply(conn)
        finally:
            conn.close()
        yield dsn
