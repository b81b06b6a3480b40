"""The archiver's optional Prometheus endpoint (``metrics: host:port``):
messages by outcome (archived, duplicates, conflicts, rejects, ignored,
bad_signatures; a replayed event's as replay_archived, replay_duplicates,
replay_conflicts, never with the live ones),
the batch queue, the broker and database links, and the time of the last
commit, the tables with a hole in their archived seqs and the marks
published (controller/archive/marks.py). Alert on
``shoe_controller_archive_messages_total{outcome="conflicts"}`` rising (an
integrity alert) and on the last commit growing old while tables deal."""

from __future__ import annotations

import time
from collections import Counter as Counts

from prometheus_client import CollectorRegistry, Counter, Gauge

from controller.archive.store import COUNTERS
from controller.errors import RuntimeFailure
from controller.metrics_http import MetricsServer, build_info


class ArchiveMetrics:
    def __init__(self, addr: tuple[str, int]) -> None:
        self.registry = reg = CollectorRegistry()
        build_info(reg, "archive")
        self.messages = Counter(
            "shoe_controller_archive_messages",
            "MQTT messages committed by the archiver, by outcome",
            ["outcome"],
            registry=reg,
        )
        for name in COUNTERS:
            if name != "received":
                self.messages.labels(name)  # present at 0 from the start
        self.queued = Gauge(
            "shoe_controller_archive_queued", "Messages received, not yet committed", registry=reg
        )
        self.broker = Gauge(
            "shoe_controller_archive_broker_connected", "1 while the MQTT connection is up", registry=reg
        )
        self.database = Gauge(
            "shoe_controller_archive_database_connected", "1 while PostgreSQL is connected", registry=reg
        )
        self.last_commit = Gauge(
            "shoe_controller_archive_last_commit_timestamp_seconds",
            "Unix time of the last committed batch",
            registry=reg,
        )
        self.holes_open = Gauge(
            "shoe_controller_archive_holes_open",
            "Tables with a hole in their archived seqs open longer than the grace (marks.HOLE_GRACE_S)",
            registry=reg,
        )
        self.holes_opened = Counter(
            "shoe_controller_archive_holes_opened",
            "Holes reported (each also one archive.hole_opened log line)",
            registry=reg,
        )
        self._holes_opened = 0
        self.marks_published = Counter(
            "shoe_controller_archive_marks_published",
            "Retained <prefix>/<table>/archive/mark messages published",
            registry=reg,
        )
        self.key_waits = Counter(
            "shoe_controller_archive_key_waits",
            "Signed events offered back (NATS: NAK with a delay) to wait for their table's key,"
            " announced to another archiver of the work queue",
            registry=reg,
        )
        try:
            self.server = MetricsServer(addr, reg)  # connections bounded and timed out
        except OSError as exc:
            raise RuntimeFailure(
                f"metrics: cannot listen on {addr[0]}:{addr[1]}: {exc.strerror or exc}"
            ) from None

    def holes(self, open_now: int, opened: int) -> None:
        self.holes_open.set(open_now)
        if opened > self._holes_opened:
            self.holes_opened.inc(opened - self._holes_opened)
            self._holes_opened = opened

    def committed(self, counts: Counts[str]) -> None:
        for name, n in counts.items():
            if name != "received" and n:
                self.messages.labels(name).inc(n)
        self.last_commit.set(time.time())
