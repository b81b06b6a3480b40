"""``replay --out mqtt``: a capture's events published to a broker exactly as
the daemon publishes them (SPEC section 5), through the same
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
to publish under another one).
"""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from controller.config import MqttConfig
from controller.errors import RuntimeFailure
from controller.events import Event
from controller.journal import Journal
from controller.outputs.mqtt import MqttOutput

#: Events stored per journal transaction while the capture is read.
BATCH = 500


class MqttReplay:
    def __init__(self, cfg: MqttConfig, *, stall_timeout: float = 30.0) -> None:
        self.cfg = cfg
        self.stall_timeout = stall_timeout
        # The output logs connection trouble for a daemon's operator; here
        # the one-line outcome says it (an expected error is one line).
        quiet = logging.getLogger("controller.outputs.mqtt")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False

    def publish(self, events: Iterable[Event], *, flush_each: bool = False) -> str:
        """Publish every event, wait for every PUBACK; the line to report.
        ``flush_each``: hand each event over at once (a paced replay)."""
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
        where = f"mqtt://{self.cfg.host}:{self.cfg.port}/{self.cfg.topic_prefix}/{table}"
        return f"replay: {total} events published to {where}, every one acknowledged (QoS 1)"

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
                    f"the broker at {self.cfg.host}:{self.cfg.port} acknowledged {total - left} of "
                    f"{total} events, then none for {self.stall_timeout:g} s{why}"
                )
