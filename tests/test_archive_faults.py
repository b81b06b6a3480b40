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
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from controller.archive.parse import canonical_json
from tests.conftest import BrokerFactory, eventually
from tests.support.archiver import BROKER_CONFIG, ArchiverProcess, migrate, write_archive_config
from tests.support.configs import write_config

pytestmark = pytest.mark.mqtt

TABLES = ("T01", "T02", "T03", "T04")
CARDS_PER_SECOND = 30


def _journal(path: Path) -> dict[str, str]:
    """event_id -> JSON of every event in a daemon's journal (read-only)."""
    if not path.exists():
        return {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return {str(i): str(j) for i, j in db.execute("SELECT event_id, json FROM events")}
    except sqlite3.OperationalError:  # not created yet
        return {}
    finally:
        db.close()


def _archived(dsn: str) -> int:
    with psycopg.connect(dsn) as c:
        return int(c.execute("SELECT count(*) FROM event_ids").fetchone()[0])  # type: ignore[index]


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

    procs: list[subprocess.Popen[Any]] = []
    fakes: list[subprocess.Popen[str]] = []
    journals: list[Path] = []
    try:
        for i, table in enumerate(TABLES):
            fake = subprocess.Popen(
                [sys.executable, "-m", "controller.cli", "fake", "--pty", "--seed", str(i + 1),
                 "--cards-per-second", str(CARDS_PER_SECOND)],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            fakes.append(fake)
            assert fake.stdout is not None
            port = fake.stdout.readline().strip()
            assert port.startswith("/"), port
            d = tmp_path / table
            d.mkdir()
            mqtt = {"host": broker.host, "port": broker.port, "client_id": f"shoe-{table}"}
            cfg = write_config(
                d, {"driver": "serial", "port": port, "baudrate": 115200},
                table=table, odds=True, outputs={"stdout": False, "mqtt": mqtt},
            )  # fmt: skip
            journals.append(d / "journal.sqlite3")
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "controller.cli", "run", "-c", str(cfg)],
                    stdout=subprocess.DEVNULL,
                    stderr=open(d / "daemon.log", "wb"),  # noqa: SIM115
                )
            )

        def journalled() -> int:
            return sum(len(_journal(j)) for j in journals)

        def progress(what: str, more: int, count: Callable[[], int] = lambda: _archived(pg_dsn)) -> None:
            start = count()
            assert eventually(lambda: count() >= start + more, 120), f"no progress {what}"

        progress("before the faults", 300)
        # 1. the archiver is killed mid-stream; while it is away the broker
        # queues its share, and restarts, keeping that queue
        archiver.kill9()
        progress("while the archiver is down", 300, journalled)
        broker.stop()
        progress("while the broker is down", 100, journalled)
        broker.start()
        progress("while the archiver is still down", 300, journalled)
        archiver.start()
        progress("after the archiver's restart", 300)
        # 2. the broker restarts under the running archiver (its unacknowledged
        # deliveries come again on the resumed session)
        broker.stop()
        progress("while the broker is down again", 100, journalled)
        broker.start()
        progress("after the broker's restart", 300)
        # 3. the database connection is cut, twice
        cuts = 0
        for _ in range(2):
            with psycopg.connect(pg_dsn, autocommit=True) as admin:
                rows = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND application_name LIKE 'shoe-controller archive%'"
                ).fetchall()
            cuts += sum(1 for (ok,) in rows if ok)
            progress("after a cut connection", 200)
        assert cuts >= 2
        assert all(f.poll() is None for f in fakes), "the shoes stopped dealing before the faults were done"

        # the shoes stop; the daemons deliver what they hold; the archive catches up
        for f in fakes:
            f.send_signal(signal.SIGTERM)
            f.wait(20)

        def caught_up() -> bool:
            a, b = journalled(), _archived(pg_dsn)
            return a == b and a == journalled()

        assert eventually(caught_up, 180), (journalled(), _archived(pg_dsn))
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in fakes:
            if f.poll() is None:
                f.kill()
        archiver.stop()

    journal: dict[str, str] = {}
    for j in journals:
        part = _journal(j)
        assert not journal.keys() & part.keys()
        journal.update(part)
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
