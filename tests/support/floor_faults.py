"""A small floor for the end-to-end acknowledgement's fault runs:
real table daemons reading fake shoes over pseudo-terminals, journalling in
SQLite and publishing to a Mosquitto that persists (autosave every 1,800 s,
so a ``kill -9`` loses everything it held since it started), one archiver
writing to PostgreSQL; the faults of the issue's table; and the comparison
of every journal with the archive. Used by tests/test_archive_ack_faults.py
(the short form) and tests/soak/ack_faults.py (the long form)."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tests.support.archiver import ArchiverProcess, migrate, write_archive_config
from tests.support.dealing_tables import DealingTables

#: BROKER_CONFIG (tests/support/archiver.py) with an autosave far away:
#: the broker keeps its sessions, queues and retained messages in memory
#: only, as in the issue's run (killed before its first autosave)
BROKER_CONFIG = (
    "listener @PORT@ 127.0.0.1\nallow_anonymous true\nmax_queued_messages 10000000\nautosave_interval 1800\n"
)


def journal_ids(path: Path) -> set[str]:
    """The event ids a daemon's journal holds (read-only)."""
    if not path.exists():
        return set()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return {str(i) for (i,) in db.execute("SELECT event_id FROM events")}
    except sqlite3.OperationalError:
        return set()
    finally:
        db.close()


def _mark_and_top(path: Path) -> tuple[int, int]:
    """A journal's ``mqtt`` mark and its last seq (read-only)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        mark = db.execute("SELECT coalesce(max(seq), 0) FROM marks WHERE output = 'mqtt'").fetchone()[0]
        top = db.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
        return int(mark), int(top)
    finally:
        db.close()


@dataclass
class Row:
    """One line of the fault table."""

    fault: str
    journalled: int
    archived: int
    missing: int
    duplicates: int
    conflicts: int
    recovered_s: float | None  # seconds from the end of the fault to 0 missing; None: not within the bound
    #: deliveries of an event the archive already held (re-offers, redeliveries)
    delivered_again: int = 0
    #: per table: the lowest and highest missing seq, and the archive's mark
    missing_by_table: dict[str, Any] = field(default_factory=dict)
    backfill: bool = False  # the archive was never backfilled: the re-offer alone

    def line(self) -> str:
        rec = "no" if self.recovered_s is None else f"yes, {self.recovered_s:.0f} s"
        return (
            f"| {self.fault} | {self.journalled:,} | {self.archived:,} | {self.missing:,} |"
            f" {self.duplicates:,} | {rec} |"
        )


@dataclass
class Floor:
    directory: Path
    broker: Any  # tests.conftest.Broker
    dsn: str
    tables: tuple[str, ...] = ("T01", "T02", "T03")
    archive_ack: bool = True
    reoffer_after_s: float = 2.0
    cards_per_second: int = 30
    archiver: ArchiverProcess | None = None
    fakes: list[subprocess.Popen[str]] = field(default_factory=list)
    daemons: list[subprocess.Popen[bytes]] = field(default_factory=list)
    journals: list[Path] = field(default_factory=list)

    def start(self) -> None:
        acfg = write_archive_config(
            self.directory,
            host=self.broker.host,
            port=self.broker.port,
            dsn=self.dsn,
            batch_max_events=200,
            batch_max_latency_ms=100,
        )
        migrate(acfg)
        self.archiver = ArchiverProcess(acfg, self.directory / "archiver.log")
        self.archiver.start()
        tables = DealingTables(self.cards_per_second, self.fakes, self.daemons, self.journals)
        for i, table in enumerate(self.tables):
            mqtt = {
                "host": self.broker.host,
                "port": self.broker.port,
                "client_id": f"shoe-{table}",
                "archive_ack": self.archive_ack,
                "reoffer_after_s": self.reoffer_after_s,
            }
            tables.deal(self.directory, table, i + 1, mqtt)

    # --- counts ------------------------------------------------------------------

    def journal(self) -> set[str]:
        out: set[str] = set()
        for j in self.journals:
            out |= journal_ids(j)
        return out

    def journalled(self) -> int:
        return len(self.journal())

    def archived(self) -> set[str]:
        with psycopg.connect(self.dsn) as c:
            return {str(i) for (i,) in c.execute("SELECT event_id FROM event_ids")}

    def grow(self, what: str, more: int, timeout: float = 120.0) -> None:
        """Wait until the journals hold ``more`` events than now."""
        start = self.journalled()
        deadline = time.monotonic() + timeout
        while self.journalled() < start + more:
            if time.monotonic() > deadline:
                raise AssertionError(f"the tables did not deal on {what}")
            time.sleep(0.2)

    def wait_acked(self, timeout: float = 60.0) -> None:
        """Until the broker has PUBACKed every event journalled now (each
        table's ``mqtt`` mark at its journal's last seq): what the broker then
        loses, the tables count as delivered."""
        tops = [_mark_and_top(j)[1] for j in self.journals]
        deadline = time.monotonic() + timeout
        while any(_mark_and_top(j)[0] < top for j, top in zip(self.journals, tops, strict=True)):
            if time.monotonic() > deadline:
                raise AssertionError("the broker did not acknowledge the tables' events")
            time.sleep(0.1)

    def caught_up(self, timeout: float) -> float | None:
        """Seconds until the archive holds every journalled event (None: not
        within ``timeout``)."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if not self.journal() - self.archived():
                return time.monotonic() - start
            time.sleep(0.5)
        return None

    def compare(self, fault: str, recovered_s: float | None) -> Row:
        """Every journal against the archive: missing ids, duplicate rows."""
        journal = self.journal()
        with psycopg.connect(self.dsn) as c:
            stored = {str(i) for (i,) in c.execute("SELECT event_id FROM event_ids")}
            rows = c.execute("SELECT count(*), count(DISTINCT event_id) FROM events").fetchone()
            conflicts = c.execute("SELECT count(*) FROM conflicts").fetchone()
            table_marks = {
                str(t): int(m) for t, m in c.execute("SELECT table_id, seq FROM archive_table_marks")
            }
            again = c.execute(
                "SELECT coalesce(sum(value), 0) FROM archive_counters WHERE name = 'duplicates'"
            ).fetchone()
        assert rows is not None and conflicts is not None and again is not None
        return Row(
            fault=fault,
            journalled=len(journal),
            archived=len(stored & journal),
            missing=len(journal - stored),
            duplicates=int(rows[0]) - int(rows[1]),
            conflicts=int(conflicts[0]),
            recovered_s=recovered_s,
            delivered_again=int(again[0]),
            missing_by_table=_missing_by_table(journal - stored, table_marks),
        )

    def stop_dealing(self) -> None:
        for f in self.fakes:
            f.send_signal(signal.SIGTERM)
        for f in self.fakes:
            f.wait(20)

    def close(self) -> None:
        for p in self.daemons:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.daemons:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in self.fakes:
            if f.poll() is None:
                f.kill()
                f.wait()
        if self.archiver is not None:
            if self.archiver.proc is not None:
                self.archiver.proc.send_signal(signal.SIGCONT)  # a paused one must hear SIGTERM
            self.archiver.stop()

    def reoffered(self) -> int:
        """Events the tables re-offered, from their log lines."""
        n = 0
        for j in self.journals:
            log = (j.parent / "daemon.log").read_text(errors="replace")
            for line in log.splitlines():
                if "re-offered" in line:
                    with contextlib.suppress(IndexError, ValueError):
                        n += int(line.split("re-offered ")[1].split(" ")[0])
        return n


def _missing_by_table(missing: set[str], table_marks: dict[str, int]) -> dict[str, Any]:
    by: dict[str, list[int]] = {}
    for event_id in missing:
        table, _, seq = event_id.split("/")
        by.setdefault(table, []).append(int(seq))
    return {t: [min(v), max(v), len(v), table_marks.get(t)] for t, v in sorted(by.items())}


# --- the faults ---------------------------------------------------------------------


def broker_kill_behind_the_archiver(floor: Floor, events: int, down_s: float) -> None:
    """The broker is ``kill -9``ed before its first autosave holding events
    it PUBACKed that the archiver has not taken (paused: SIGSTOP, as an
    archiver behind), and comes back after ``down_s``."""
    archiver = floor.archiver
    assert archiver is not None and archiver.proc is not None
    archiver.proc.send_signal(signal.SIGSTOP)
    try:
        floor.grow("while the archiver is paused", events)
        floor.wait_acked()
        floor.broker.kill()
    finally:
        archiver.proc.send_signal(signal.SIGCONT)
    floor.grow("while the broker is down", 1)
    time.sleep(down_s)
    floor.broker.start()


def archiver_away_then_broker_kill(floor: Floor, events: int, down_s: float) -> None:
    """The archiver is ``kill -9``ed; the broker queues for its session, and
    is ``kill -9``ed too (the queue and the session gone); the broker comes
    back after ``down_s``, then the archiver."""
    archiver = floor.archiver
    assert archiver is not None
    archiver.kill9()
    floor.grow("while the archiver is away", events)
    floor.wait_acked()
    floor.broker.kill()
    floor.grow("while the broker is down", 1)
    time.sleep(down_s)
    floor.broker.start()
    floor.grow("before the archiver is back", max(1, events // 4))
    archiver.start()


def broker_kill(floor: Floor, events: int, down_s: float) -> None:
    """The issue's first row: the broker ``kill -9``ed before its first
    autosave under a running archiver, back after ``down_s``. It loses what
    it held for the archiver at that instant (its queue, and what was in
    flight): little or nothing when the archiver keeps up."""
    floor.wait_acked()
    floor.broker.kill()
    floor.grow("while the broker is down", 1)
    time.sleep(down_s)
    floor.broker.start()


FAULTS: dict[str, Callable[[Floor, int, float], None]] = {
    "broker `kill -9` before its first autosave, archiver behind": broker_kill_behind_the_archiver,
    "archiver away, then broker `kill -9`": archiver_away_then_broker_kill,
    "broker `kill -9` before its first autosave": broker_kill,
}
#: the faults that certainly lose events at the broker (the re-offer must act)
CERTAIN_LOSS = frozenset(list(FAULTS)[:2])


def run_fault(floor: Floor, fault: str, *, events: int, down_s: float, settle_s: float) -> Row:
    """Deal, inject ``fault``, deal on, stop the shoes, and compare once the
    archive holds every journal or ``settle_s`` has passed. No backfill."""
    floor.grow("before the fault", events)
    FAULTS[fault](floor, events, down_s)
    floor.grow("after the fault", events)
    floor.stop_dealing()
    recovered = floor.caught_up(settle_s)
    return floor.compare(fault, recovered)


def print_table(rows: list[Row]) -> str:
    head = "| fault | journalled | archived | missing | duplicates | recovered without backfill |"
    lines = [head, "| --- | --- | --- | --- | --- | --- |", *(r.line() for r in rows)]
    return "\n".join(lines)


def summary(row: Row, floor: Floor) -> str:
    return json.dumps({**row.__dict__, "reoffered": floor.reoffered()}, default=str)
