"""The archiver: the broker's events into PostgreSQL, acknowledged only
once committed.

MQTT side (paho's network thread): MQTT 5, the brokers of ``broker`` in
turn (the first that answers; ``Client.set_endpoints``), reconnecting
after 1, then 2 s as a table does, a persistent session
(``clean_start`` false, a session expiry of ``session_expiry_s``: short
in a share group, see controller/archive/config.py), the
subscription ``[$share/<group>/]<prefix>/+/#`` at QoS 1, manual acks, and
a Receive Maximum of twice the batch size, so the broker keeps a batch
and a half in flight while the last one commits and never more (the queue
between the threads is bounded by it). Each message is tagged with the
connection it came on.

Writer side (the calling thread): a batch closes at ``batch_max_events``
or ``batch_max_latency_ms`` after its first message; ``Store.write``
commits it; then every message of the batch that came on the current
connection is acknowledged, in the order received. A message whose
connection has since dropped is not acknowledged (the broker delivers it
again on the resumed session; the archive counts it as a duplicate). A
lost database connection is retried with backoff, on a new connection,
with the same batch, for as long as it takes: nothing is acknowledged
meanwhile, so the broker holds (and queues) the rest. A poison message
(not a valid event: a lone surrogate, a NUL, ``1e400``, too deep, too big;
or a row the database refuses on its own) is no such failure: the store
keeps it aside in ``rejects`` and it is acknowledged with its batch, so the
next message flows; any other error from writing a batch is retried like
a lost connection, never acknowledged, and never ends the loop. Every attempt
carries the batch's ``BatchMark``: when the connection was lost just as
the COMMIT succeeded, the retry finds the batch's mark and writes and
counts nothing again (controller/archive/store.py), so the durable
counters stay exact. ``kill -9`` at any
point loses nothing: what was committed is in the archive, what was not
is unacknowledged and comes again.

Every hour (and at start) the writer makes the partitions ahead and
applies retention.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt
import psycopg
import structlog
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from controller.archive import db, marks, migrate
from controller.archive.config import ArchiveConfig
from controller.archive.metrics import ArchiveMetrics
from controller.archive.store import BatchMark, BatchResult, Store, error_line, is_connection_error
from controller.config import parse_host_port
from controller.errors import ConfigError
from controller.mqtt_client import Client, make_client
from controller.outputs.mqtt import RECONNECT_DELAY_S

log = structlog.get_logger("archive")

MAINTAIN_EVERY_S = 3600.0
STATS_EVERY_S = 60.0
#: Reject reasons logged per batch (the rest are counted; all are in ``rejects``).
LOGGED_REJECTS = 5
MAX_RECEIVE_MAXIMUM = 65_535


@dataclass(frozen=True)
class _Msg:
    topic: str
    payload: bytes
    mid: int
    qos: int
    conn: int  # the MQTT connection it came on


class Archiver:
    def __init__(self, cfg: ArchiveConfig, stop: threading.Event) -> None:
        self.cfg = cfg
        self.stop = stop
        self.receive_maximum = min(MAX_RECEIVE_MAXIMUM, 2 * cfg.batch_max_events)
        # paho's thread blocks on a full queue: back-pressure, never a drop.
        self._queue: queue.Queue[_Msg] = queue.Queue(maxsize=self.receive_maximum + cfg.batch_max_events)
        self._conn_no = 0
        self._lock = threading.Lock()
        self._connected = threading.Event()
        self.store = Store(
            archiver=cfg.client_id,
            prefix=cfg.broker.topic_prefix,
            max_payload_bytes=cfg.max_payload_bytes,
            retention_months=cfg.retention_months,
            partitions_ahead=cfg.partitions_ahead,
            pinned=cfg.signing.keys,
            trust_on_first_use=cfg.signing.trust_on_first_use,
        )
        self.totals = BatchResult()
        self._db: db.Conn | None = None
        self._client = self._make_client()
        self.metrics: ArchiveMetrics | None = None
        if cfg.metrics is not None:
            self.metrics = ArchiveMetrics(parse_host_port(cfg.metrics))
        #: each table's retained archive/mark (controller/archive/marks.py)
        self.marks = marks.MarkKeeper(
            cfg.broker.topic_prefix,
            self._publish_mark,
            on_hole=None if self.metrics is None else self.metrics.holes,
        )

    # --- MQTT (paho's thread) ---------------------------------------------------

    def _make_client(self) -> Client:
        client = make_client(self.cfg.broker, self.cfg.client_id, manual_ack=True)
        # thousands of messages a second: each recv takes all the broker has
        # sent so far (controller/mqtt_client.py), not a few bytes of one
        client.read_ahead = True
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        client.on_connect_fail = self._on_connect_fail
        # capped as a table's is (1, then 2 s: RECONNECT_DELAY_S): a broker
        # back after a crash had its archiver back 31 s later with a cap of 30
        client.reconnect_delay_set(round(RECONNECT_DELAY_S[0]), round(RECONNECT_DELAY_S[1]))
        return client

    def _connect_properties(self) -> Properties:
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = self.cfg.session_expiry_s
        props.ReceiveMaximum = self.receive_maximum
        return props

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, rc: ReasonCode, props: Any) -> None:
        if rc.is_failure:
            log.error("archive.broker_refused", reason=str(rc))
            return
        with self._lock:
            self._conn_no += 1
        self._connected.set()
        if self.metrics is not None:
            self.metrics.broker.set(1)
        log.info(
            "archive.broker_connected",
            broker=self._client.endpoint,
            session_present=bool(flags.session_present),
        )
        # a broker that crashed may have lost the retained marks
        self.marks.reconnected()
        # Subscribing again on a resumed session replaces the subscription
        # with itself; retained copies only for a new subscription.
        client.subscribe(self.cfg.topic_filter(), options=SubscribeOptions(qos=1, retainHandling=1))
        if self.cfg.share_group is not None:
            # the tables' retained signing keys for every archiver:
            # a shared subscription gets no retained message (MQTT 5, 4.8.2)
            keys = f"{self.cfg.broker.topic_prefix}/+/keys"
            client.subscribe(keys, options=SubscribeOptions(qos=1, retainHandling=0))

    def _on_connect_fail(self, client: mqtt.Client, userdata: Any) -> None:
        log.warning("archive.broker_unreachable", broker=self._client.endpoint)

    def _on_subscribe(self, client: mqtt.Client, userdata: Any, mid: int, rcs: Any, props: Any) -> None:
        for rc in rcs:
            if rc.is_failure:
                log.error("archive.subscribe_refused", topic=self.cfg.topic_filter(), reason=str(rc))
            else:
                log.info("archive.subscribed", topic=self.cfg.topic_filter(), qos=int(rc.value))

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, flags: Any, rc: Any, props: Any) -> None:
        self._connected.clear()
        if self.metrics is not None:
            self.metrics.broker.set(0)
        if not self.stop.is_set():
            log.warning("archive.broker_disconnected", reason=str(rc))

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        with self._lock:
            conn = self._conn_no
        self._queue.put(_Msg(message.topic, bytes(message.payload), message.mid, message.qos, conn))

    def _publish_mark(self, topic: str, payload: bytes) -> None:
        # paho queues it while the broker is away; ``reconnected`` sends all again
        self._client.publish(topic, payload, qos=1, retain=True)
        if self.metrics is not None:
            self.metrics.marks_published.inc()

    def _step_marks(self) -> None:
        """The tables' marks that are due (controller/archive/marks.py);
        a database error here is retried on the next pass, like maintenance."""
        if not self.marks.pending():
            return
        conn = self._database()
        if conn is None:
            return
        try:
            self.marks.step(conn)
        except psycopg.Error as exc:
            log.error("archive.marks_failed", error=db.one_line(exc))
            self._drop_database()

    # --- PostgreSQL (the writer) ------------------------------------------------

    def _database(self) -> db.Conn | None:
        """The connection, made (with backoff) when there is none; None once
        stopping."""
        delay = 0.5
        while self._db is None or self._db.closed:
            if self.stop.is_set():
                return None
            try:
                conn = db.connect(
                    self.cfg.dsn, application_name=f"shoe-controller archive {self.cfg.client_id}"
                )
                problem = migrate.check_current(conn)
                conn.rollback()
                if problem is not None:
                    conn.close()
                    raise ConfigError(problem)
                self._db = conn
                self.store.months.clear()
                if self.metrics is not None:
                    self.metrics.database.set(1)
                log.info("archive.database_connected")
            except ConfigError:
                raise
            except Exception as exc:  # RuntimeFailure from connect, psycopg errors
                log.warning("archive.database_unavailable", error=str(exc).splitlines()[0], retry_in_s=delay)
                self.stop.wait(delay)
                delay = min(delay * 2, 10.0)
        return self._db

    def _drop_database(self) -> None:
        if self.metrics is not None:
            self.metrics.database.set(0)
        if self._db is not None:
            with contextlib.suppress(psycopg.Error):
                self._db.close()
            self._db = None

    def _commit(self, batch: list[_Msg], deferrable: AbstractSet[int] = frozenset()) -> BatchResult | None:
        """Write ``batch`` until it is committed (None: stopped first);
        ``deferrable``: see ``Store.write`` (the JetStream path's)."""
        delay = 0.5
        messages = [(m.topic, m.payload) for m in batch]
        mark = BatchMark()
        while True:
            conn = self._database()
            if conn is None:
                return None
            try:
                return self.store.write(conn, messages, mark, deferrable)
            except Exception as exc:
                # Did the COMMIT happen? The next attempt asks the database.
                mark = BatchMark(mark.batch, retry=True)
                # A connection failure, or (the store keeps a message that
                # fails on its own aside itself, acknowledged) a failure to
                # write even that: the database's, not a message's. Retry,
                # never ack; the process stays up.
                lost = is_connection_error(exc)
                (log.warning if lost else log.error)(
                    "archive.database_lost" if lost else "archive.write_failed",
                    error=db.one_line(exc) if isinstance(exc, psycopg.Error) else error_line(exc),
                    batch=len(batch),
                )
                self._drop_database()
                if self.stop.wait(delay):
                    return None
                delay = min(delay * 2, 10.0)

    def _maintain(self) -> None:
        conn = self._database()
        if conn is None:
            return
        try:
            made, dropped = self.store.maintain(conn)
        except psycopg.Error as exc:
            # Partitions and retention must not stop ingest: say so, retry next hour.
            log.error("archive.maintenance_failed", error=db.one_line(exc))
            self._drop_database()
            return
        if made or dropped:
            log.info("archive.partitions", made=made, dropped=dropped)

    # --- the loop ---------------------------------------------------------------

    def _collect(self) -> list[_Msg]:
        try:
            first = self._queue.get(timeout=0.5)
        except queue.Empty:
            return []
        batch = [first]
        deadline = time.monotonic() + self.cfg.batch_max_latency_ms / 1000
        while len(batch) < self.cfg.batch_max_events:
            remaining = deadline - time.monotonic()
            try:
                batch.append(
                    self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
                )
            except queue.Empty:
                break
        return batch

    def _ack(self, batch: list[_Msg]) -> int:
        with self._lock:
            current = self._conn_no
        acked = 0
        # queued without waking paho's network thread for each, and written
        # from here in one send on the way out (Client.direct)
        with self._client.direct():
            for m in batch:
                if m.conn == current and m.qos > 0:
                    self._client.ack(m.mid, m.qos)
                    acked += 1
        return acked

    def _report(self, result: BatchResult) -> None:
        for c in result.conflicts:
            log.error(
                "archive.integrity_alert",
                event_id=c.event_id,
                topic=c.topic,
                problem="the same event_id with different content; both kept in the conflicts table",
                stored_sha256=c.stored_digest.hex(),
                new_sha256=c.new_digest.hex(),
            )
        for reason in result.reject_reasons[:LOGGED_REJECTS]:
            log.warning("archive.rejected", reason=reason)
        if len(result.reject_reasons) > LOGGED_REJECTS:
            log.warning("archive.rejected_more", count=len(result.reject_reasons) - LOGGED_REJECTS)

    def run(self) -> int:
        cfg = self.cfg
        if self._database() is None:
            return 0
        self._maintain()
        self._client.connect_async(
            *cfg.broker.endpoints()[0],  # then each in turn (``Client.set_endpoints``)
            keepalive=30,
            clean_start=False,
            properties=self._connect_properties(),
        )
        self._client.loop_start()
        log.info(
            "archive.started", client_id=cfg.client_id, topic=cfg.topic_filter(), batch=cfg.batch_max_events
        )
        next_maintain = time.monotonic() + MAINTAIN_EVERY_S
        next_stats = time.monotonic() + STATS_EVERY_S
        try:
            while not self.stop.is_set():
                batch = self._collect()
                if batch:
                    result = self._commit(batch)
                    if result is None:
                        break  # stopping: the batch stays unacknowledged
                    self._ack(batch)
                    self.marks.touched(m.topic for m in batch)
                    self.totals.counts.update(result.counts)
                    if self.metrics is not None:
                        self.metrics.committed(result.counts)
                    self._report(result)
                self._step_marks()
                if self.metrics is not None:
                    self.metrics.queued.set(self._queue.qsize())
                now = time.monotonic()
                if now >= next_maintain:
                    self._maintain()
                    next_maintain = now + MAINTAIN_EVERY_S
                if now >= next_stats:
                    log.info("archive.stats", queued=self._queue.qsize(), **dict(self.totals.counts))
                    next_stats = now + STATS_EVERY_S
        finally:
            self._client.disconnect()
            self._client.loop_stop()
            self._drop_database()
            log.info("archive.stopped", **dict(self.totals.counts))
        return 0
