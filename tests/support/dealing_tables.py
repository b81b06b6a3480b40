"""Tables dealing for real, for the archive's end-to-end fault tests: each a
fake shoe on a pseudo-terminal (``shoe-controller fake --pty``) read by a
daemon (``run``) that journals in SQLite and publishes over MQTT; and the
counts those tests wait on (events journalled, events archived)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import eventually
from tests.support.configs import write_config


def journal_events(path: Path) -> dict[str, str]:
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


def archived(dsn: str) -> int:
    """How many events the archive holds."""
    with psycopg.connect(dsn) as c:
        return int(c.execute("SELECT count(*) FROM event_ids").fetchone()[0])  # type: ignore[index]


def progress(what: str, more: int, count: Callable[[], int], timeout: float = 120) -> None:
    """Wait until ``count()`` has grown by ``more`` (a stream that moves on)."""
    start = count()
    assert eventually(lambda: count() >= start + more, timeout), f"no progress {what}"


@dataclass
class DealingTables:
    """The tables started by ``deal``; ``close`` stops them all."""

    cards_per_second: float
    fakes: list[subprocess.Popen[str]] = field(default_factory=list)
    procs: list[subprocess.Popen[Any]] = field(default_factory=list)
    journals: list[Path] = field(default_factory=list)

    def deal(self, directory: Path, table: str, seed: int, mqtt: dict[str, Any]) -> None:
        """A fake shoe (``seed``) dealing to a daemon for ``table`` in
        ``directory``/``table`` (its journal and daemon.log), publishing to
        ``mqtt`` (an ``outputs.mqtt`` config)."""
        fake = subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "fake", "--pty", "--seed", str(seed),
             "--cards-per-second", str(self.cards_per_second)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self.fakes.append(fake)
        assert fake.stdout is not None
        port = fake.stdout.readline().strip()
        assert port.startswith("/"), port
        d = directory / table
        d.mkdir()
        cfg = write_config(
            d, {"driver": "serial", "port": port, "baudrate": 115200},
            table=table, odds=True, outputs={"stdout": False, "mqtt": mqtt},
        )  # fmt: skip
        self.journals.append(d / "journal.sqlite3")
        with open(d / "daemon.log", "wb") as log:
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "controller.cli", "run", "-c", str(cfg)],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            )

    def journalled(self) -> int:
        """How many events the tables' journals hold, together."""
        return sum(len(journal_events(j)) for j in self.journals)

    def events(self) -> dict[str, str]:
        """event_id -> JSON of every event of every table's journal (no id in two)."""
        journal: dict[str, str] = {}
        for j in self.journals:
            part = journal_events(j)
            assert not journal.keys() & part.keys()
            journal.update(part)
        return journal

    def caught_up(self, dsn: str) -> bool:
        """The archive holds as many events as the journals, which hold no more."""
        a, b = self.journalled(), archived(dsn)
        return a == b and a == self.journalled()

    def dealing(self) -> bool:
        return all(f.poll() is None for f in self.fakes)

    def stop_shoes(self) -> None:
        """The shoes stop dealing; the daemons go on (to deliver what they hold)."""
        for f in self.fakes:
            f.send_signal(signal.SIGTERM)
            f.wait(20)

    def close(self) -> None:
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in self.fakes:
            if f.poll() is None:
                f.kill()
