"""The floor on a replicated engine: a 3-node NATS JetStream cluster
(Debian's ``nats-server``; each node on free loopback ports, its own store,
an MQTT listener), tables publishing over MQTT 3.1.1 to one node, and two
archivers sharing one durable pull consumer of the stream in which NATS
keeps its MQTT clients' QoS 1 messages, replicated on all three nodes,
into the real PostgreSQL. One node is ``kill -9``ed mid-run
and brought back, then another: at the end the archive holds every
journalled event once, with its content (0 lost, 0 doubled).

Which nodes are killed: first the node the tables publish to (their
config lists all three, theirs first: they fail over to the next),
then, once it is back and caught up, the stream's leader among the
other two. The archivers list all three nodes and follow the cluster
(nats-py reconnects to the next server). Also: a table speaking MQTT 5 to a NATS node says, in
one line, that the broker lacks MQTT 5 and what to set.

The long form: ``NATS_FLOOR_TABLES=6 NATS_FLOOR_ROUNDS=5 pytest -s
tests/test_nats_cluster.py -k archive`` (docs/archive.md, "On a NATS JetStream
cluster", gives its numbers).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from controller.archive.config import MQTT_STREAM
from controller.archive.parse import canonical_json
from controller.config import MqttConfig
from controller.journal import Journal
from controller.outputs.mqtt import MqttOutput
from tests.conftest import eventually, need_tool
from tests.support.archiver import ArchiverProcess, migrate
from tests.support.dealing_tables import DealingTables, progress
from tests.support.dealing_tables import archived as _archived
from tests.support.nats_cluster import NatsCluster

pytestmark = pytest.mark.nats

STREAM = MQTT_STREAM
DURABLE = "archivers"
TABLES = int(os.environ.get("NATS_FLOOR_TABLES", "2"))
#: Kill-and-return rounds: each kills the two non-table nodes in turn.
ROUNDS = int(os.environ.get("NATS_FLOOR_ROUNDS", "1"))
CARDS_PER_SECOND = 30


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    binary = need_tool("nats-server", "/usr/sbin/nats-server")
    c = NatsCluster.make(binary, tmp_path / "nats")
    try:
        c.start()
        assert eventually(c.ready, 30), "the cluster elected no JetStream meta leader"
        yield c
    finally:
        c.stop()


def _stream(urls: list[str]) -> dict[str, Any]:
    """The stream's leader, its replicas (name, current, offline) and its
    message count, asked of the cluster (nats-py)."""
    import nats

    async def ask() -> dict[str, Any]:
        nc = await nats.connect(servers=urls, connect_timeout=2, max_reconnect_attempts=2)
        try:
            info = await nc.jetstream(timeout=5).stream_info(STREAM)
        finally:
            await nc.close()
        cl = info.cluster
        return {
            "leader": cl.leader if cl else None,
            "replicas": [(r.name, bool(r.current), bool(r.offline)) for r in (cl.replicas or [])]
            if cl
            else [],
            "messages": info.state.messages,
            "replicas_configured": info.config.num_replicas,
        }

    return asyncio.run(ask())


def _stream_or_none(urls: list[str]) -> dict[str, Any] | None:
    try:
        return _stream(urls)
    except Exception:  # no leader during an election, a node away
        return None


def _whole(urls: list[str]) -> bool:
    """A leader, and both followers current and online."""
    s = _stream_or_none(urls)
    return bool(
        s and s["leader"] and len(s["replicas"]) == 2 and all(c and not o for _, c, o in s["replicas"])
    )


def _first_mqtt_client(port: int) -> None:
    """Connect an MQTT 3.1.1 client and leave: NATS then has its MQTT streams."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="first", protocol=mqtt.MQTTv311)
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        assert eventually(client.is_connected, 30), "NATS did not accept an MQTT 3.1.1 client"
    finally:
        client.disconnect()
        client.loop_stop()


def _marks(path: Path) -> dict[str, int]:
    """A journal's marks: ``mqtt`` (acknowledged by the broker) and
    ``archive`` (the archive's mark, received from the archiver)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return {str(n): int(v) for n, v in db.execute("SELECT output, seq FROM marks")}
    finally:
        db.close()


def _archive_config(directory: Path, cluster: NatsCluster, dsn: str, name: str) -> Path:
    cfg = {
        "nats": {
            "servers": cluster.urls,
            "client_id": name,
            "durable": DURABLE,
            "replicas": 3,
            "ack_wait_s": 30,
        },
        "dsn": dsn,
        "batch_max_events": 200,
        "batch_max_latency_ms": 100,
    }
    path = directory / f"archive-{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_table_speaking_mqtt5_to_nats_is_told_to_set_3_1_1(
    cluster: NatsCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """NATS 2.9 answers an MQTT 5 CONNECT with "unsupported protocol
    version" and closes: the table says so, and what to set, in one line
    (not again at every retry, and not followed by a vague disconnect);
    with "3.1.1" the same table connects."""
    node = cluster.nodes[0]
    journal = Journal(tmp_path / "journal.sqlite3")
    caplog.set_level(logging.INFO, logger="controller.outputs.mqtt")
    cfg = MqttConfig.model_validate({"host": "127.0.0.1", "port": node.mqtt_port})
    out = MqttOutput(cfg, "T01", journal, poll_interval=0.1)
    out.start()
    try:
        assert eventually(lambda: out.connect_failures + len(caplog.records) >= 1, 10)
        time.sleep(3)  # paho retries after 1 s, then 2 s: the same refusal is not said again
    finally:
        out.stop(timeout=2)
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1, lines
    assert lines[0].endswith(
        "the broker does not speak MQTT 5 (CONNACK: unsupported protocol version; NATS 2.9 and "
        'RabbitMQ 3.x speak 3.1.1 only): set outputs.mqtt.protocol: "3.1.1"'
    ), lines
    assert not out.connected

    cfg311 = MqttConfig.model_validate({"host": "127.0.0.1", "port": node.mqtt_port, "protocol": "3.1.1"})
    out = MqttOutput(cfg311, "T01", journal, poll_interval=0.1)
    out.start()
    try:
        assert eventually(lambda: out.connected, 15), "the table did not connect over MQTT 3.1.1"
    finally:
        out.stop(timeout=2)


def test_the_archive_equals_the_journals_through_node_kills(
    cluster: NatsCluster, tmp_path: Path, pg_dsn: str
) -> None:
    # NATS makes its MQTT streams (R3 here) at its first MQTT client
    _first_mqtt_client(cluster.nodes[0].mqtt_port)
    # two archivers on one durable consumer of NATS's MQTT stream
    archivers = []
    for name in ("archive-a", "archive-b"):
        acfg = _archive_config(tmp_path, cluster, pg_dsn, name)
        if not archivers:
            migrate(acfg)
        archivers.append(ArchiverProcess(acfg, tmp_path / f"{name}.log"))
    for a in archivers:
        a.start()
    info = _stream(cluster.urls)
    assert info["replicas_configured"] == 3 and len(info["replicas"]) == 2, info

    # the tables publish over MQTT 3.1.1 to n1 first, and list the other two
    table_node = cluster.nodes[0]
    others = cluster.nodes[1:]
    tables = DealingTables(CARDS_PER_SECOND)
    journals = tables.journals
    kills: list[str] = []
    try:
        for i in range(TABLES):
            table = f"T{i + 1:02d}"
            # every node, the tables' own first: a dead one costs one failed attempt
            brokers = [{"host": "127.0.0.1", "port": n.mqtt_port} for n in [table_node, *others]]
            mqtt = {"brokers": brokers, "client_id": f"shoe-{table}", "protocol": "3.1.1"}
            tables.deal(tmp_path, table, i + 1, mqtt)

        journalled = tables.journalled

        def in_archive() -> int:
            return _archived(pg_dsn)

        progress("before the kills", 150, in_archive)
        for _ in range(ROUNDS):
            # the tables' node (they fail over), then the stream's leader
            # among the others once the first is back
            for k in range(2):
                leader = (_stream_or_none(cluster.urls) or {}).get("leader")
                node = table_node if k == 0 else next((n for n in others if n.name == leader), others[0])
                node.kill9()
                kills.append(node.name)
                progress(f"with {node.name} killed", 150, in_archive)
                node.start()
                assert eventually(lambda: _whole(cluster.urls), 60), (
                    f"{node.name} did not catch up: {_stream_or_none(cluster.urls)}"
                )
                progress(f"after {node.name} came back", 100, in_archive)
        assert tables.dealing(), "the shoes stopped dealing before the kills were done"

        # the shoes stop; the daemons deliver what they hold; the archive catches up
        tables.stop_shoes()

        assert eventually(lambda: tables.caught_up(pg_dsn), 120), (journalled(), _archived(pg_dsn))

        # The archive's marks reach the tables through NATS: each table knows
        # the archive holds all it sent (NATS may refuse a table's subscription
        # to its mark while its MQTT streams elect a leader: the table asks
        # again, backing off to 60 s, on the same connection)
        def marked() -> bool:
            return all(_marks(j).get("archive") == _marks(j).get("mqtt") for j in journals)

        assert eventually(marked, 90), [_marks(j) for j in journals]
    finally:
        tables.close()
        for a in archivers:
            a.stop()

    # every table warned once, at start, of what MQTT 3.1.1 cannot protect
    for j in journals:
        log = (j.parent / "daemon.log").read_text(errors="replace")
        assert (
            log.count('outputs.mqtt.protocol: \\"3.1.1\\" cannot show')
            + log.count('outputs.mqtt.protocol: "3.1.1" cannot show')
            == 1
        ), log[-2000:]

    journal = tables.events()
    with psycopg.connect(pg_dsn) as c:
        stored = {str(i): bytes(d) for i, d in c.execute("SELECT event_id, digest FROM event_ids")}
        copies = dict(c.execute("SELECT event_id, count(*) FROM events GROUP BY event_id").fetchall())
        counters: dict[tuple[str, str], int] = {
            (str(a), str(n)): int(v)
            for a, n, v in c.execute("SELECT archiver, name, value FROM archive_counters")
        }
        conflicts = c.execute("SELECT count(*) FROM conflicts").fetchone()[0]  # type: ignore[index]
        rejects = c.execute("SELECT count(*) FROM rejects").fetchone()[0]  # type: ignore[index]
        verified = c.execute("SELECT count(*) FROM signed_lines").fetchone()[0]  # type: ignore[index]
        bad = c.execute(  # type: ignore[index]
            "SELECT coalesce(sum(value), 0) FROM archive_counters WHERE name = 'bad_signatures'"
        ).fetchone()[0]
    archived = {a: v for (a, n), v in counters.items() if n == "archived"}
    duplicates = sum(v for (_, n), v in counters.items() if n == "duplicates")
    lost = len(set(journal) - set(stored))
    # signed events taken before their table's key reached this archiver
    # (the announcement went to the other): NAKed and redelivered, not rejected
    waits = sum(
        int(m.group(1))
        for a in ("archive-a", "archive-b")
        for line in (tmp_path / f"{a}.log").read_text(errors="replace").splitlines()
        if "archive.key_wait" in line and (m := re.search(r'events"?[=:] ?(\d+)', line))
    )
    print(
        f"\nNATS cluster run: {TABLES} tables over MQTT 3.1.1 to {table_node.name} first, "
        f"nodes killed in turn: "
        f"{', '.join(kills)}; journalled {len(journal)}, archived {len(stored)}, lost {lost}, "
        f"rows per event max {max(copies.values(), default=0)}; duplicates delivered {duplicates}; "
        f"per archiver {archived}; conflicts {conflicts}; rejects {rejects}; signed and verified "
        f"{verified}; bad signatures {bad}; events waiting for their key {waits}; "
        f"tables' marks (mqtt, archive): {[(m.get('mqtt'), m.get('archive')) for m in map(_marks, journals)]}"
    )
    assert set(stored) == set(journal), (lost, len(set(stored) - set(journal)))
    assert all(n == 1 for n in copies.values()) and set(copies) == set(journal)
    for event_id, text in journal.items():
        digest = hashlib.sha256(canonical_json(json.loads(text)).encode()).digest()
        assert stored[event_id] == digest, event_id
    assert conflicts == 0 and rejects == 0 and bad == 0
    # every event signed by its table and verified by the archive
    assert verified == len(journal), (verified, len(journal))
    assert sum(archived.values()) == len(journal)
    # one durable consumer, a work queue: both archivers took a share
    assert set(archived) == {"archive-a", "archive-b"} and all(v > 0 for v in archived.values()), archived


def test_a_signed_event_taken_before_its_key_waits_for_the_other_archiver(
    cluster: NatsCluster, tmp_path: Path, pg_dsn: str
) -> None:
    """The signing-key race on a work queue, forced: the table's key
    announcement goes to one consumer of the durable (this test, standing
    for the other archiver, which holds it un-acknowledged), its signed
    events to the archiver. The archiver NAKs them with a delay instead of
    rejecting them; once the key is committed to ``table_keys`` (as the
    other archiver would) and its message acknowledged, the redelivered
    events are archived and verified: 0 rejects."""
    import threading

    import nats
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from controller.archive import db
    from controller.archive.config import MQTT_SUBJECT_PREFIX, ArchiveConfig
    from controller.archive.jetstream import JetStreamArchiver
    from controller.archive.store import Store
    from controller.config import parse_model
    from controller.signing import Signer
    from tests.test_archive import result

    _first_mqtt_client(cluster.nodes[0].mqtt_port)
    acfg = _archive_config(tmp_path, cluster, pg_dsn, "archive-a")
    migrate(acfg)
    archiver = ArchiverProcess(acfg, tmp_path / "archive-a.log")
    signer = Signer(Ed25519PrivateKey.generate())
    keys = json.dumps(
        {"table": "T01", "keys": [{"public_key": signer.public_key, "key_id": signer.key_id}]}
    ).encode()
    events = []
    for seq in range(1, 21):
        ev = dict(result(seq, seq), key_id=signer.key_id)
        events.append(signer.seal(json.dumps(ev, separators=(",", ":"))))
    subject = MQTT_SUBJECT_PREFIX + "baccarat.T01."

    async def race() -> None:
        nc = await nats.connect(servers=cluster.urls, connect_timeout=5)
        try:
            js = nc.jetstream(timeout=5)
            # the same durable, made as the archiver makes it
            same = JetStreamArchiver(
                parse_model(acfg.read_text(), "a.yaml", ArchiveConfig), threading.Event()
            )
            sub = await same._subscribe(js)
            await js.publish(subject + "keys", keys)
            (held,) = await sub.fetch(1, timeout=10)  # the other archiver has the announcement
            assert held.subject.endswith(".keys")
            for line in events:
                await js.publish(subject + "coup.result", line.encode())
            await asyncio.to_thread(archiver.start)
            waited = await asyncio.to_thread(
                eventually, lambda: "archive.key_wait" in archiver.log_text(), 30
            )
            assert waited, archiver.log_text()[-2000:]
            assert _archived(pg_dsn) == 0
            # the other archiver commits the key, then acknowledges its message
            with db.connect(pg_dsn) as conn:
                other = Store(
                    archiver="archive-b", prefix="baccarat", max_payload_bytes=256 * 1024,
                    retention_months=24, partitions_ahead=2,
                )  # fmt: skip
                other.write(conn, [("baccarat/T01/keys", keys)])
            await held.ack()
            done = await asyncio.to_thread(eventually, lambda: _archived(pg_dsn) == len(events), 60)
            assert done, (_archived(pg_dsn), archiver.log_text()[-2000:])
        finally:
            await nc.close()

    try:
        asyncio.run(race())
    finally:
        archiver.stop()
    with psycopg.connect(pg_dsn) as c:
        rejects = c.execute("SELECT count(*) FROM rejects").fetchone()[0]  # type: ignore[index]
        verified = c.execute("SELECT count(*) FROM signed_lines").fetchone()[0]  # type: ignore[index]
    assert rejects == 0 and verified == len(events), (rejects, verified)
