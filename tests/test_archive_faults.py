"""The archive's promise under faults, end to end and all real: four
tables (daemons reading fake shoes over pseudo-terminals, journalling in
SQLite) publish to a Mosquitto that keeps sessions across its restart; one
archiver writes to PostgreSQL. Mid-stream the archiver is ``kill -9``ed,
the broker restarts while it is away (the queue for it must survive) and
again under the running archiver, and the archiver's database connections
are cut (``pg_terminate_backend``) twice. Then every event in every
table's journal is in the archive exactly once, with the same content, and
nothing is in conflicts or rejects. The counts are printed (pytest -s)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import psycopg
import pytest

from controller.archive.parse import canonical_json
from tests.conftest import BrokerFactory, eventually
from tests.support.archiver import BROKER_CONFIG, ArchiverProcess, migrate, write_archive_config
from tests.support.dealing_tables import DealingTables, progress
from tests.support.dealing_tables import archived as _archived

pytestmark = pytest.mark.mqtt

TABLES = ("T01", "T02", "T03", "T04")
CARDS_PER_SECOND = 30


def test_every_journalled_event_is_archived_exactly_once_through_faults(
    tmp_path: Path, mosquitto: BrokerFactory, pg_dsn: str
) -> None:
    broker = mosquitto(persistence=True, config=BROKER_CONFIG)
    acfg = write_archive_config(
        tmp_path,
        host=broker.host,
        port=broker.port,
        dsn=pg_dsn,
        batch_max_events=200,
        batch_max_latency_ms=100,
    )
    migrate(acfg)
    archiver = ArchiverProcess(acfg, tmp_path / "archiver.log")
    archiver.start()

    tables = DealingTables(CARDS_PER_SECOND)
    try:
        for i, table in enumerate(TABLES):
            mqtt = {"host": broker.host, "port": broker.port, "client_id": f"shoe-{table}"}
            tables.deal(tmp_path, table, i + 1, mqtt)

        journalled = tables.journalled

        def in_archive() -> int:
            return _archived(pg_dsn)

        progress("before the faults", 300, in_archive)
        # 1. the archiver is killed mid-stream; while it is away the broker
        # queues its share, and restarts, keeping that queue
        archiver.kill9()
        progress("while the archiver is down", 300, journalled)
        broker.stop()
        progress("while the broker is down", 100, journalled)
        broker.start()
        progress("while the archiver is still down", 300, journalled)
        archiver.start()
        progress("after the archiver's restart", 300, in_archive)
        # 2. the broker restarts under the running archiver (its unacknowledged
        # deliveries come again on the resumed session)
        broker.stop()
        progress("while the broker is down again", 100, journalled)
        broker.start()
        progress("after the broker's restart", 300, in_archive)
        # 3. the database connection is cut, twice
        cuts = 0
        for _ in range(2):
            with psycopg.connect(pg_dsn, autocommit=True) as admin:
                rows = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND application_name LIKE 'shoe-controller archive%'"
                ).fetchall()
            cuts += sum(1 for (ok,) in rows if ok)
            progress("after a cut connection", 200, in_archive)
        assert cuts >= 2
        assert tables.dealing(), "the shoes stopped dealing before the faults were done"

        # the shoes stop; the daemons deliver what they hold; the archive catches up
        tables.stop_shoes()

        assert eventually(lambda: tables.caught_up(pg_dsn), 180), (journalled(), _archived(pg_dsn))
    finally:
        tables.close()
        archiver.stop()

    journal = tables.events()
    with psycopg.connect(pg_dsn) as c:
        stored = {str(i): bytes(d) for i, d in c.execute("SELECT event_id, digest FROM event_ids")}
        copies = dict(c.execute("SELECT event_id, count(*) FROM events GROUP BY event_id").fetchall())
        counters = {
            str(n): int(v)
            for n, v in c.execute("SELECT name, sum(value) FROM archive_counters GROUP BY name")
        }
        conflicts = c.execute("SELECT count(*) FROM conflicts").fetchone()[0]  # type: ignore[index]
        rejects = c.execute("SELECT count(*) FROM rejects").fetchone()[0]  # type: ignore[index]
        coups = c.execute("SELECT count(*) FROM coups").fetchone()[0]  # type: ignore[index]
    journal_coups = sum(
        1 for text in journal.values() if json.loads(text)["type"] in ("coup.result", "coup.void")
    )
    print(
        f"\narchive fault test: journalled {len(journal)} events of {len(TABLES)} tables; "
        f"archived {len(stored)} "
        f"(in events: {sum(copies.values())}); duplicates delivered {counters.get('duplicates', 0)}; "
        f"messages received {counters.get('received', 0)}; conflicts {conflicts}; rejects {rejects}; "
        f"coups {journal_coups} journalled, {coups} archived; "
        f"archiver starts {archiver.starts}, db cuts {cuts}"
    )
    assert set(stored) == set(journal), (len(set(journal) - set(stored)), len(set(stored) - set(journal)))
    assert all(n == 1 for n in copies.values()) and set(copies) == set(journal)
    for event_id, text in journal.items():
        digest = hashlib.sha256(canonical_json(json.loads(text)).encode()).digest()
        assert stored[event_id] == digest, event_id
    assert conflicts == 0 and rejects == 0
    assert coups == journal_coups
    assert counters["archived"] == len(journal)
    assert "archive.database_lost" in archiver.log_text()
