"""The archiver as a process between a real broker and the real
PostgreSQL: an acknowledgement means a COMMIT (a batch blocked in the
database when the archiver is killed comes again), several archivers share
the load through a shared subscription with each event archived once,
retained snapshots and bad payloads never stop the stream."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import psycopg
import pytest

from controller.events import dumps
from tests.conftest import Broker, BrokerFactory, eventually, free_port, mqtt_client
from tests.support.archiver import BROKER_CONFIG, ArchiverProcess, migrate, write_archive_config
from tests.test_archive import card

pytestmark = pytest.mark.mqtt


def _count(dsn: str, sql: str) -> int:
    with psycopg.connect(dsn) as c:
        return int(c.execute(sql).fetchone()[0])  # type: ignore[index]


def _publish(broker: Broker, payloads: list[tuple[str, bytes]], *, retain: bool = False) -> None:
    client, _ = mqtt_client(broker)
    try:
        for topic, payload in payloads:
            client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(10)
    finally:
        client.disconnect()
        client.loop_stop()


def _cards(first: int, n: int, table: str = "T01") -> list[tuple[str, bytes]]:
    out = []
    for seq in range(first, first + n):
        ev = {**card(seq), "table": table, "event_id": f"{table}/S1/{seq}"}
        out.append((f"baccarat/{table}/card", dumps(ev).encode()))
    return out


def test_a_batch_not_committed_is_not_acknowledged(
    tmp_path: Path, mosquitto: BrokerFactory, pg_dsn: str
) -> None:
    broker = mosquitto(persistence=True, config=BROKER_CONFIG)
    metrics_port = free_port()
    cfg = write_archive_config(
        tmp_path, host=broker.host, port=broker.port, dsn=pg_dsn, batch_max_latency_ms=50,
        metrics=f"127.0.0.1:{metrics_port}",
    )  # fmt: skip
    migrate(cfg)
    archiver = ArchiverProcess(cfg, tmp_path / "archiver.log")
    archiver.start()
    try:
        _publish(broker, _cards(1, 10))
        assert eventually(lambda: _count(pg_dsn, "SELECT count(*) FROM event_ids") == 10, 30)
        # the database holds the archiver's next batch (a lock it waits on)
        blocker = psycopg.connect(pg_dsn)
        blocker.execute("LOCK TABLE event_ids IN ACCESS EXCLUSIVE MODE")
        _publish(broker, _cards(11, 50))

        def waiting() -> bool:
            return (
                _count(
                    pg_dsn,
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND application_name LIKE 'shoe-controller archive%'",
                )
                > 0
            )

        assert eventually(waiting, 30), "the archiver's batch never reached the database"
        archiver.kill9()  # mid-batch: nothing committed, so nothing may have been acked
        blocker.rollback()
        blocker.close()
        assert _count(pg_dsn, "SELECT count(*) FROM event_ids") == 10
        archiver.start()
        assert eventually(lambda: _count(pg_dsn, "SELECT count(*) FROM event_ids") == 60, 60)
        # this process's count, on its Prometheus endpoint: the 50 held back
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert 'shoe_controller_archive_messages_total{outcome="archived"} 50.0' in text
        assert 'shoe_controller_archive_messages_total{outcome="conflicts"} 0.0' in text
        assert (
            "shoe_controller_archive_database_connected 1.0" in text
            and "shoe_controller_archive_broker_connected 1.0" in text
        )
    finally:
        archiver.stop()
    assert _count(pg_dsn, "SELECT count(*) FROM events") == 60


def test_archivers_share_the_load_and_each_event_is_archived_once(
    tmp_path: Path, mosquitto: BrokerFactory, pg_dsn: str
) -> None:
    broker = mosquitto(persistence=True, config=BROKER_CONFIG)
    archivers = []
    for name in ("archive-a", "archive-b"):
        cfg = write_archive_config(
            tmp_path, host=broker.host, port=broker.port, dsn=pg_dsn, client_id=name,
            share_group="floor", batch_max_events=20, batch_max_latency_ms=20,
        )  # fmt: skip
        if not archivers:
            migrate(cfg)
        archivers.append(ArchiverProcess(cfg, tmp_path / f"{name}.log"))
    for a in archivers:
        a.start()
    try:
        # retained snapshots and junk on the same topics never stop the stream
        retained = [("baccarat/T01/status", b"online"), ("baccarat/T01/shoe/state", b"{}")]
        _publish(broker, retained, retain=True)
        threads = [
            threading.Thread(target=_publish, args=(broker, _cards(1, 300, table)))
            for table in ("T01", "T02", "T03")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        _publish(broker, [("baccarat/T01/card", b"\x00junk")])
        assert eventually(lambda: _count(pg_dsn, "SELECT count(*) FROM event_ids") == 900, 60)
        assert eventually(lambda: _count(pg_dsn, "SELECT count(*) FROM rejects") == 1, 30)
    finally:
        for a in archivers:
            a.stop()
    with psycopg.connect(pg_dsn) as c:
        per = dict(
            c.execute("SELECT archiver, value FROM archive_counters WHERE name = 'archived'").fetchall()
        )
        dups = c.execute(
            "SELECT coalesce(sum(value), 0) FROM archive_counters WHERE name = 'duplicates'"
        ).fetchone()
    assert sum(per.values()) == 900
    assert set(per) == {"archive-a", "archive-b"} and all(v > 0 for v in per.values()), per
    assert dups is not None and dups[0] == 0  # a shared subscription delivers each message to one member
