"""The archiver on a NATS JetStream cluster (archive config ``nats:``):
the tables publish over MQTT 3.1.1 to any node of the cluster, and every
archiver pulls from one durable consumer of the stream in which NATS keeps
their QoS 1 messages, acknowledging a message only after the PostgreSQL
COMMIT of its batch.

Why through JetStream and not over MQTT: NATS 2.9 speaks MQTT 3.1.1 only,
and the archiver's MQTT path needs MQTT 5 (session expiry, receive
maximum, shared subscriptions); over 3.1.1 NATS's shared subscriptions
delivered nothing. JetStream itself gives what the MQTT session
gave, replicated: the stream keeps what no archiver has acknowledged, the
durable consumer remembers what was, across archiver and node restarts.

Which stream. NATS keeps every QoS 1 message an MQTT client publishes in
its own stream ``$MQTT_msgs``, under ``$MQTT.msgs.<subject>``, replicated
on ``mqtt.stream_replicas`` nodes, and sends the PUBACK only once the
stream has it (NATS's MQTT implementation, server/mqtt.go: the publish is
stored by a JetStream request before the PUBACK; a store that times out
closes the connection, so the table sends the event again). The archiver
consumes that stream, filtered on the tables' subjects: a PUBACK is then
a replicated copy the archiver will get. A stream of one's own capturing
``<prefix>.>`` is not that: NATS forwards the publish to it with no
acknowledgement, so what was on its way to a leader that dies, or came
while no leader was elected, is gone though the table had its PUBACK: 11
of 2,903 PUBACKed events were missing after two node kills
(tests/test_nats_cluster.py). ``$MQTT_msgs`` keeps a message while
a consumer has interest in it (interest retention): the durable consumer
is that interest, so nothing is dropped while an archiver is away, and an
acknowledged message is removed. The archiver never makes the stream (NATS
does, at its first MQTT client) and refuses one with fewer replicas than
``nats.replicas``.

The subjects. NATS maps the MQTT topic ``a/b/c`` to the subject ``a.b.c``
(https://docs.nats.io/running-a-nats-service/configuration/mqtt: "MQTT
topics are mapped to NATS subjects ... '/' is replaced by '.'"), so the
tables' ``<prefix>/<table>/<kind>`` arrive as ``$MQTT.msgs.<prefix>.<table>.<kind>``;
the archiver turns each subject back into its topic for the same parser
and store as the MQTT path (controller/archive/store.py, parse.py:
idempotent on ``event_id``). A table name is ``[A-Za-z0-9_-]``, so the
mapping is exact.

Several archivers on one ``durable``: a pull consumer hands each message
to one of the archivers fetching from it (a work queue); one that dies
holds only its un-acknowledged batch, which JetStream offers to the others
after ``ack_wait_s``. While a batch waits on the database the archiver
tells JetStream it is still working on it (``in_progress``), so a slow
database does not hand the batch to another archiver. At most twice
``batch_max_events`` messages are unacknowledged per consumer
(``max_ack_pending``, as the MQTT path's receive maximum).

Signing keys on a work queue. A table announces its keys
(retained, ``<prefix>/<table>/keys``); on a work queue that message goes
to one archiver, which commits them to ``table_keys``; the other may take
the table's signed events first. An event signed under a key id this
archiver does not hold, even after reading ``table_keys`` again
(keys.TableKeys), of a table that may yet teach one, is not rejected but
NAKed with a delay of ``KEY_WAIT_S``: by its redelivery the other
archiver has committed the key. After ``KEY_WAIT_DELIVERIES`` deliveries
it is written as on the MQTT path: to ``rejects``, with the reason. A bad
signature under a known key, or an unsigned event of a table that signs,
is rejected at once. The store is idempotent by ``event_id`` and the
archive's marks are computed from what is committed (marks.py), so an
event archived after those that followed it only closes a hole later.
Counted: ``key_waits`` (log) and ``shoe_controller_archive_key_waits_total``.

The writer (database connection, retried commits with their BatchMark,
maintenance, reports) is the MQTT archiver's own (service.Archiver);
only the source and the acknowledgement differ.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import nats
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from controller.archive import marks
from controller.archive.config import MQTT_STREAM, MQTT_SUBJECT_PREFIX, ArchiveConfig, NatsConfig
from controller.archive.metrics import ArchiveMetrics
from controller.archive.service import MAINTAIN_EVERY_S, STATS_EVERY_S, Archiver, _Msg
from controller.archive.store import BatchResult, Store
from controller.config import parse_host_port
from controller.errors import ConfigError

log = structlog.get_logger("archive")

#: How long one fetch waits for a first message (the stop flag is seen this often).
POLL_S = 0.5
#: A reconnecting client tries the next server after this (nats-py's wait between tries).
RECONNECT_WAIT_S = 1.0
#: A signed event whose table's key is not known yet comes back after this
#: (JetStream ``nak(delay)``); longer than TableKeys' reload throttle (1 s).
KEY_WAIT_S = 2.0
#: ... until its ``KEY_WAIT_DELIVERIES``-th delivery (about 20 s): then rejected, with the reason.
KEY_WAIT_DELIVERIES = 10
#: Retry a JetStream call that failed (no leader yet, a node away) after this, doubling to the cap.
RETRY_CAP_S = 5.0


def topic_of(subject: str) -> str:
    """The MQTT topic NATS stored as ``subject`` (``$MQTT.msgs.`` off, '.' back to '/')."""
    return subject.removeprefix(MQTT_SUBJECT_PREFIX).replace(".", "/")


class JetStreamArchiver(Archiver):
    """The archiver with a JetStream durable pull consumer as its source.
    Reuses the MQTT archiver's writer (``_database``, ``_commit``,
    ``_maintain``, ``_report``, ``_step_marks``), which needs ``cfg``,
    ``stop``, ``store``, ``totals``, ``metrics``, ``marks`` and ``_db``: set
    here, with no MQTT client."""

    def __init__(self, cfg: ArchiveConfig, stop: threading.Event) -> None:
        assert cfg.nats is not None
        self.cfg = cfg
        self.nats_cfg: NatsConfig = cfg.nats
        self.stop = stop
        self.max_ack_pending = 2 * cfg.batch_max_events
        self.store = Store(
            archiver=cfg.client_id,
            prefix=cfg.topic_prefix,
            max_payload_bytes=cfg.max_payload_bytes,
            retention_months=cfg.retention_months,
            partitions_ahead=cfg.partitions_ahead,
            pinned=cfg.signing.keys,
            trust_on_first_use=cfg.signing.trust_on_first_use,
        )
        self.totals = BatchResult()
        self._db = None
        self.metrics: ArchiveMetrics | None = None
        if cfg.metrics is not None:
            self.metrics = ArchiveMetrics(parse_host_port(cfg.metrics))
        self.redelivered = 0
        #: signed events NAKed to wait for their table's key (see the module's docstring)
        self.key_waits = 0
        #: each table's archive/mark (controller/archive/marks.py), published
        #: as a plain NATS message: NATS hands it to the table's MQTT
        #: subscription live (QoS 0, not retained: see ``_send_marks``)
        self.marks = marks.MarkKeeper(
            cfg.topic_prefix,
            self._queue_mark,
            on_hole=None if self.metrics is None else self.metrics.holes,
        )
        self._marks_out: list[tuple[str, bytes]] = []

    # --- marks -------------------------------------------------------------------

    def _queue_mark(self, topic: str, payload: bytes) -> None:
        self._marks_out.append((topic, payload))

    async def _send_marks(self, nc: NATS) -> None:
        """Publish the marks ``step`` made, each on its topic's subject.
        Not retained (a retained MQTT message is NATS's own store): a table
        that connects gets its mark with the next one published for it,
        after its next event archived, or after its re-offer of what it
        holds (every mark again after the archiver reconnects)."""
        out, self._marks_out = self._marks_out, []
        for topic, payload in out:
            with contextlib.suppress(NatsError, OSError):
                await nc.publish(topic.replace("/", "."), payload)
                if self.metrics is not None:
                    self.metrics.marks_published.inc()

    # --- NATS ---------------------------------------------------------------------

    async def _connect(self) -> NATS:
        n = self.nats_cfg

        async def on_error(exc: Exception) -> None:
            log.warning(
                "archive.nats_error", error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            )

        async def on_disconnected() -> None:
            if self.metrics is not None:
                self.metrics.broker.set(0)
            if not self.stop.is_set():
                log.warning("archive.nats_disconnected")

        async def on_reconnected() -> None:
            if self.metrics is not None:
                self.metrics.broker.set(1)
            self.marks.reconnected()
            log.info(
                "archive.nats_reconnected", server=str(nc.connected_url.netloc if nc.connected_url else "")
            )

        delay = RECONNECT_WAIT_S
        while True:
            try:
                nc = await nats.connect(
                    servers=n.servers,
                    name=f"shoe-controller archive {n.client_id}",
                    user=n.username,
                    password=n.password(),
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,  # forever: a floor's archiver never gives up
                    reconnect_time_wait=RECONNECT_WAIT_S,
                    connect_timeout=5,
                    error_cb=on_error,
                    disconnected_cb=on_disconnected,
                    reconnected_cb=on_reconnected,
                )
            except (TimeoutError, OSError, NatsError) as exc:
                log.warning("archive.nats_unreachable", servers=n.servers, error=_line(exc), retry_in_s=delay)
                if await self._sleep(delay):
                    raise _Stopped() from None
                delay = min(delay * 2, RETRY_CAP_S)
                continue
            if self.metrics is not None:
                self.metrics.broker.set(1)
            log.info(
                "archive.nats_connected", server=str(nc.connected_url.netloc if nc.connected_url else "")
            )
            return nc

    async def _check_stream(self, js: Any) -> None:
        """NATS's MQTT stream must be there (NATS makes it at its first MQTT
        client: until then, wait) with at least ``nats.replicas`` replicas
        (else exit 2: a node lost could lose acknowledged events)."""
        n = self.nats_cfg
        info = await js.stream_info(MQTT_STREAM)
        replicas = info.config.num_replicas or 1
        if replicas < n.replicas:
            raise ConfigError(
                f"nats.replicas: NATS keeps its MQTT messages ({MQTT_STREAM}) on {replicas} "
                f"replica(s), the config asks at least {n.replicas}: set mqtt {{ stream_replicas: "
                f"{n.replicas} }} in every node's nats-server config (then remove the stream, or "
                "update its replicas, for NATS to make it again)"
            )

    async def _subscribe(self, js: Any) -> Any:
        n = self.nats_cfg
        config = ConsumerConfig(
            durable_name=n.durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=float(n.ack_wait_s),
            max_ack_pending=self.max_ack_pending,
            filter_subject=n.subjects(),
        )
        return await js.pull_subscribe(n.subjects(), durable=n.durable, stream=MQTT_STREAM, config=config)

    async def _setup(self, nc: NATS) -> Any:
        """The stream and the consumer, retried while the cluster has no
        leader for them (a node away, an election)."""
        js = nc.jetstream(timeout=5)
        delay = 0.5
        while True:
            try:
                await self._check_stream(js)
                sub = await self._subscribe(js)
            except ConfigError:
                raise
            except NotFoundError:
                log.warning(
                    "archive.stream_absent",
                    stream=MQTT_STREAM,
                    reason="NATS makes it at its first MQTT client",
                    retry_in_s=delay,
                )
                if await self._sleep(delay):
                    raise _Stopped() from None
                delay = min(delay * 2, RETRY_CAP_S)
                continue
            except (TimeoutError, OSError, NatsError) as exc:
                log.warning("archive.jetstream_unavailable", error=_line(exc), retry_in_s=delay)
                if await self._sleep(delay):
                    raise _Stopped() from None
                delay = min(delay * 2, RETRY_CAP_S)
                continue
            n = self.nats_cfg
            log.info("archive.subscribed", stream=MQTT_STREAM, durable=n.durable, subjects=n.subjects())
            return sub

    async def _collect(self, sub: Any) -> list[Msg]:  # type: ignore[override]
        """A batch: up to ``batch_max_events``, closed ``batch_max_latency_ms``
        after its first message; [] when nothing came within ``POLL_S``."""
        cfg = self.cfg
        try:
            msgs: list[Msg] = await sub.fetch(batch=cfg.batch_max_events, timeout=POLL_S)
        except TimeoutError:
            return []
        deadline = time.monotonic() + cfg.batch_max_latency_ms / 1000
        while len(msgs) < cfg.batch_max_events:
            remaining = deadline - time.monotonic()
            if remaining <= 0.001:
                break
            try:
                msgs += await sub.fetch(batch=cfg.batch_max_events - len(msgs), timeout=remaining)
            except TimeoutError:
                break
        return msgs

    async def _commit_held(self, msgs: list[Msg], deferrable: frozenset[int]) -> BatchResult | None:
        """``_commit`` in a thread, telling JetStream every third of
        ``ack_wait_s`` that the batch is still being worked on."""
        batch = [_Msg(topic_of(m.subject), m.data, 0, 1, 0) for m in msgs]
        task = asyncio.create_task(asyncio.to_thread(self._commit, batch, deferrable))
        every = self.nats_cfg.ack_wait_s / 3
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            for m in msgs:
                with contextlib.suppress(NatsError, OSError):
                    await m.in_progress()

    async def _sleep(self, seconds: float) -> bool:
        """Sleep, waking for the stop flag; True once stopping."""
        deadline = time.monotonic() + seconds
        while not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(left, 0.1))
        return True

    async def _main(self) -> None:
        nc = await self._connect()
        try:
            sub = await self._setup(nc)
            next_maintain = time.monotonic() + MAINTAIN_EVERY_S
            next_stats = time.monotonic() + STATS_EVERY_S
            delay = 0.5
            while not self.stop.is_set():
                try:
                    msgs = await self._collect(sub)
                except (OSError, NatsError) as exc:
                    # a node away, the consumer's leader being elected: try again
                    log.warning("archive.fetch_failed", error=_line(exc), retry_in_s=delay)
                    await self._sleep(delay)
                    delay = min(delay * 2, RETRY_CAP_S)
                    continue
                delay = 0.5
                if msgs:
                    deferrable = frozenset(
                        i for i, m in enumerate(msgs) if m.metadata.num_delivered < KEY_WAIT_DELIVERIES
                    )
                    result = await self._commit_held(msgs, deferrable)
                    if result is None:
                        break  # stopping: the batch stays unacknowledged, offered again
                    # A retry that found the batch committed does not know
                    # which messages it set aside: all that could have been
                    # come back (archived ones as duplicates).
                    waiting = deferrable if result.already_committed else frozenset(result.deferred)
                    for i, m in enumerate(msgs):
                        self.redelivered += m.metadata.num_delivered > 1
                        # an ack lost with a connection is a redelivery, counted as a duplicate
                        with contextlib.suppress(NatsError, OSError):
                            if i in waiting:
                                await m.nak(delay=KEY_WAIT_S)
                            else:
                                await m.ack()
                    if waiting:
                        self.key_waits += len(waiting)
                        log.info("archive.key_wait", events=len(waiting), retry_in_s=KEY_WAIT_S)
                        if self.metrics is not None:
                            self.metrics.key_waits.inc(len(waiting))
                    with contextlib.suppress(NatsError, OSError, asyncio.TimeoutError):
                        await nc.flush(timeout=5)
                    self.marks.touched(topic_of(m.subject) for m in msgs)
                    self.totals.counts.update(result.counts)
                    if self.metrics is not None:
                        self.metrics.committed(result.counts)
                    self._report(result)
                self._step_marks()
                await self._send_marks(nc)
                now = time.monotonic()
                if now >= next_maintain:
                    await asyncio.to_thread(self._maintain)
                    next_maintain = now + MAINTAIN_EVERY_S
                if now >= next_stats:
                    log.info(
                        "archive.stats",
                        redelivered=self.redelivered,
                        key_waits=self.key_waits,
                        **dict(self.totals.counts),
                    )
                    next_stats = now + STATS_EVERY_S
        finally:
            with contextlib.suppress(Exception):
                await nc.close()

    def run(self) -> int:
        n = self.nats_cfg
        if self._database() is None:
            return 0
        self._maintain()
        log.info(
            "archive.started",
            client_id=n.client_id,
            servers=n.servers,
            durable=n.durable,
            batch=self.cfg.batch_max_events,
        )
        try:
            asyncio.run(self._main())
        except _Stopped:
            pass
        finally:
            self._drop_database()
            log.info(
                "archive.stopped",
                redelivered=self.redelivered,
                key_waits=self.key_waits,
                **dict(self.totals.counts),
            )
        return 0


class _Stopped(Exception):
    """The stop flag was set while connecting or setting up."""


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
