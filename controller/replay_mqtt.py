"""``replay --out mqtt``: a capture's events published to a broker exactly as
the daemon publishes them (docs/operations.md, MQTT), through the same
``controller.outputs.mqtt.MqttOutput``: one message per event on
``<prefix>/<table>/<type>``, QoS 1, in order, an event delivered only on
its PUBACK, ``roads`` and ``odds`` retained as the daemon retains them.

Like the daemon, the events go through a journal (a temporary one, per
file), so a broker that drops the connection mid-replay loses nothing: the
output resends from its mark. The replay ends when the broker has
acknowledged every event; if it acknowledges none for ``stall_timeout``
seconds, the replay fails (exit 1) saying how many were acknowledged.

A replay is not the table's controller: it sets no Last Will, publishes no
``status`` and takes no commands (``MqttOutput(presence=False)``), and it
connects under a client id of its own, so it never takes the live
controller's session. Its events carry the capture's table (``--table``
to publish under another one), marked as replayed
(``controller.replay.mark_replayed``: ``replay`` in the envelope, ids of
their own form) and signed by no table: the journal it goes through is its
own, with no key. Before anything is published, :func:`table_status` reads
the table's retained ``status``: a table whose controller is online is
refused unless the caller was told otherwise (``--force-live-table``).
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from controller.config import MqttConfig
from controller.errors import RuntimeFailure
from controller.events import Event
from controller.journal import Journal
from controller.mqtt_client import connect_options, make_client, status_text
from controller.outputs.mqtt import MqttOutput

#: Events stored per journal transaction while the capture is read.
BATCH = 500
#: How long the status check waits for the broker's CONNACK and SUBACK.
STATUS_CONNECT_S = 5.0
#: How long after its SUBACK the status check waits for a retained
#: ``status``: a broker sends the retained message of a subscription right
#: after the SUBACK (MQTT 3.1.1 section 3.3.1.3, 5.0 section 3.3.1.3), so
#: nothing within this bound means no retained status, i.e. no controller
#: has ever said it is online there (or its status was cleared).
STATUS_WAIT_S = 1.0


def table_status(
    cfg: MqttConfig, table: str, *, wait: float = STATUS_WAIT_S, connect: float = STATUS_CONNECT_S
) -> str | None:
    """The retained ``<prefix>/<table>/status`` (``online``, ``offline``,
    or what else it holds, cut to ``mqtt_client.MAX_STATUS_BYTES``), or None when the
    broker has none within ``wait`` seconds of the SUBACK. Raises
    ``RuntimeFailure`` (one line) when the broker cannot be reached or
    refuses within ``connect`` seconds."""
    topic = f"{cfg.topic_prefix}/{table}/status"
    client = make_client(cfg, f"replay-check-{uuid.uuid4().hex[:8]}")
    subscribed = threading.Event()
    got = threading.Event()
    found: list[str] = []
    failure: list[str] = []

    def on_connect(c: Any, _u: Any, _f: Any, rc: Any, _p: Any = None) -> None:
        if rc.is_failure:
            failure.append(f"the broker refused the connection: {rc}")
            subscribed.set()
            return
        c.subscribe(topic, qos=1)

    def on_subscribe(_c: Any, _u: Any, _mid: Any, codes: Any, _p: Any = None) -> None:
        if getattr(codes[0], "is_failure", False):
            failure.append(f"the broker refused the subscription to {topic} (ACL?)")
        subscribed.set()

    def on_message(_c: Any, _u: Any, msg: Any) -> None:
        if msg.topic == topic and msg.retain and not found:
            found.append(status_text(msg.payload))
            got.set()

    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    # every broker the config lists, in turn (one holds the floor's retained status)
    listed = getattr(cfg, "endpoints", None)
    endpoints: list[tuple[str, int]] = listed() if callable(listed) else [(cfg.host, cfg.port)]
    errors = []
    for host, port in endpoints:
        try:
            client.connect(host, port, keepalive=30, **connect_options(cfg))
            break
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc}")
    else:
        raise RuntimeFailure(f"cannot reach the broker at {'; '.join(errors)}")
    client.loop_start()
    try:
        if not subscribed.wait(connect):
            raise RuntimeFailure(
                f"the broker at {client.host}:{client.port} did not answer within {connect:g} s"
                f" (reading the retained {topic})"
            )
        if failure:
            raise RuntimeFailure(failure[0])
        got.wait(wait)
    finally:
        client.disconnect()
        client.loop_stop()
    return found[0] if found else None


class MqttReplay:
    def __init__(self, cfg: MqttConfig, *, stall_timeout: float = 30.0) -> None:
        self.cfg = cfg
        self.stall_timeout = stall_timeout
        # The output logs connection trouble for a daemon's operator; here
        # the one-line outcome says it (an expected error is one line).
        quiet = logging.getLogger("controller.outputs.mqtt")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False

    def publish(self, events: Iterable[Event], *, flush_each: bool = False, run: str = "") -> str:
        """Publish every event, wait for every PUBACK; the line to report.
        ``flush_each``: hand each event over at once (a paced replay);
        ``run``: the replay run the events are marked with (named in the line)."""
        with tempfile.TemporaryDirectory(prefix="shoe-replay-") as tmp:
            journal = Journal(Path(tmp) / "replay.sqlite3", synchronous="NORMAL")
            output: MqttOutput | None = None
            table = ""
            total = 0
            try:
                batch: list[Event] = []
                for event in events:
                    if output is None:
                        table = str(event["table"])
                        output = self._start(journal, table)
                    batch.append(event)
                    if flush_each or len(batch) >= BATCH:
                        total += len(journal.append_events(batch))
                        batch = []
                        output.notify()
                if output is None:
                    return "replay: no events, nothing published"
                if batch:
                    total += len(journal.append_events(batch))
                    output.notify()
                self._wait(journal, output, total)
            finally:
                if output is not None:
                    output.stop(timeout=5.0)
                journal.close()
        scheme = "mqtts" if self.cfg.tls else "mqtt"
        where = f"{scheme}://{output.endpoint}/{self.cfg.topic_prefix}/{table}"
        as_run = f" as replay run {run}" if run else ""
        return f"replay: {total} events published to {where}{as_run}, every one acknowledged (QoS 1)"

    def _start(self, journal: Journal, table: str) -> MqttOutput:
        own = self.cfg.model_copy(update={"client_id": f"replay-{table}-{uuid.uuid4().hex[:8]}"})
        output = MqttOutput(own, table, journal, presence=False, poll_interval=0.1)
        output.start()
        return output

    def _wait(self, journal: Journal, output: MqttOutput, total: int) -> None:
        left = journal.backlog(output.name)
        last_progress = time.monotonic()
        while left:
            output.notify()
            time.sleep(0.05)
            now_left = journal.backlog(output.name)
            if now_left < left:
                left, last_progress = now_left, time.monotonic()
            elif time.monotonic() - last_progress > self.stall_timeout:
                why = f" ({output.last_error})" if output.last_error else ""
                raise RuntimeFailure(
                    f"the broker at {output.endpoint} acknowledged {total - left} of "
                    f"{total} events, then none for {self.stall_timeout:g} s{why}"
                )
