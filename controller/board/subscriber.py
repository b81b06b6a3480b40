"""The board's MQTT side: one paho client (built by the project's factory,
:func:`controller.mqtt_client.make_client`) subscribed to every table's
topics, ``<prefix>/<table>/#``, and nothing else: it never publishes.

Catching up: every connection starts clean (the project's session rule);
on every (re)connect the client subscribes again and the broker sends the
retained ``status``, ``shoe/state``, ``roads`` and ``odds`` afresh, which
give the board the shoe as it stands whatever it missed while away. Paho
reconnects on its own (1 s, then every 2 s).

Bounds: with MQTT 5 the CONNECT says the largest packet the board takes
(``limits.max_payload_bytes`` plus the topic's room), so a broker never
sends a larger one; with either protocol a larger payload that arrives
anyway is dropped unread and counted. The callbacks run on paho's network
thread and only hand the message to ``deliver`` (the app puts it on its
event loop).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from controller.board.config import BoardConfig
from controller.mqtt_client import connect_options, make_client

log = logging.getLogger(__name__)

#: At most one "cannot reach the broker" line this often while it stays
#: out of reach (the first failure is said at once).
RETRY_LOG_S = 30.0

#: Room for the topic and the packet's header beside the payload.
TOPIC_ROOM = 1024


class BoardSubscriber:
    def __init__(
        self,
        cfg: BoardConfig,
        deliver: Callable[[str, str, bytes], None],
        connection: Callable[[bool], None],
    ) -> None:
        self._cfg = cfg
        self._deliver = deliver
        self._connection = connection
        self._max = cfg.limits.max_payload_bytes
        prefix = cfg.mqtt.topic_prefix
        self.topics = {t.table: f"{prefix}/{t.table}/" for t in cfg.tables}
        #: messages dropped for their size (counted, never parsed)
        self.oversized = 0
        self.connects = 0
        self._failures = 0  # connection attempts failed in a row
        self._said_at = -RETRY_LOG_S  # when that was last logged (monotonic)
        client_id = cfg.mqtt.client_id or f"board-{socket.gethostname()[:40]}-{os.getpid()}"
        self._client = make_client(cfg.mqtt, client_id)
        self._client.reconnect_delay_set(min_delay=1, max_delay=2)
        self._client.on_connect = self._on_connect
        self._client.on_connect_fail = self._on_connect_fail
        self._client.on_disconnect = self._on_disconnect
        self._client.on_message = self._on_message
        self._client.on_subscribe = self._on_subscribe

    def _connect_options(self) -> dict[str, Any]:
        opts = connect_options(self._cfg.mqtt)
        if self._cfg.mqtt.protocol == "5":
            props: Properties = opts.get("properties") or Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            props.MaximumPacketSize = self._max + TOPIC_ROOM
            opts["properties"] = props
        return opts

    def start(self) -> None:
        m = self._cfg.mqtt
        self._client.connect_async(*m.endpoints()[0], keepalive=30, **self._connect_options())
        self._client.loop_start()

    def stop(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()

    def _where(self) -> str:
        return f"{self._client.host}:{self._client.port}"

    def _unreachable(self, why: str) -> None:
        """Said at the first failure, then at most every ``RETRY_LOG_S``
        while the broker stays out of reach (paho retries every 1-2 s)."""
        now = time.monotonic()
        self._failures += 1
        if now >= self._said_at + RETRY_LOG_S:
            self._said_at = now
            log.warning(
                "board: cannot reach the broker at %s: %s; retrying every 1-2 s (%d attempts failed)",
                self._where(),
                why,
                self._failures,
            )

    def _on_connect_fail(self, client: mqtt.Client, userdata: Any) -> None:
        self._unreachable("no connection")

    def _on_connect(
        self, client: mqtt.Client, userdata: Any, flags: Any, rc: ReasonCode, properties: Properties | None
    ) -> None:
        if rc.is_failure:
            log.error("board: the broker refused the connection: %s", rc)
            return
        if self._failures:
            log.info(
                "board: connected to the broker at %s after %d failed attempts", self._where(), self._failures
            )
        else:
            log.info("board: connected to the broker at %s", self._where())
        self._failures, self._said_at = 0, -RETRY_LOG_S
        self.connects += 1
        client.subscribe([(base + "#", 1) for base in self.topics.values()])

    def _on_subscribe(
        self, client: mqtt.Client, userdata: Any, mid: int, rcs: list[ReasonCode], props: Properties | None
    ) -> None:
        # the board is connected once the broker has taken its subscription:
        # before the SUBACK, a message published would not reach it
        if any(rc.is_failure for rc in rcs):
            log.error("board: the broker refused the subscription: %s", ", ".join(str(rc) for rc in rcs))
            return
        self._connection(True)

    def _on_disconnect(
        self, client: mqtt.Client, userdata: Any, flags: Any, rc: ReasonCode, properties: Properties | None
    ) -> None:
        if rc.is_failure:
            log.warning("board: lost the broker at %s: %s; reconnecting", self._where(), rc)
        self._connection(False)

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        if len(message.payload) > self._max:
            self.oversized += 1
            return
        topic = message.topic
        for table, base in self.topics.items():
            if topic.startswith(base):
                self._deliver(table, topic, bytes(message.payload))
                return
