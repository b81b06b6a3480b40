"""An archiver (``shoe-controller archive``) run as a process for a test or
a benchmark: its config written beside its log, started, waited for (its
subscription acknowledged) and killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

#: A broker config for archiving: the default listener, and no limit on the
#: messages queued for a client (mosquitto's default of 1000 would drop
#: QoS 1 events for an archiver that is down or behind: see docs/archive.md, Archive).
BROKER_CONFIG = "listener @PORT@ 127.0.0.1\nallow_anonymous true\nmax_queued_messages 10000000\n"


def write_archive_config(directory: Path, *, host: str, port: int, dsn: str, **extra: Any) -> Path:
    broker = {"host": host, "port": port, "client_id": extra.pop("client_id", "archive-test")}
    cfg = {"broker": broker, "dsn": dsn, **extra}
    path = directory / f"archive-{broker['client_id']}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "controller.cli", *args]


def migrate(config: Path) -> None:
    out = subprocess.run(
        cli("archive", "--config", str(config), "--migrate"), capture_output=True, text=True, timeout=120
    )
    if out.returncode != 0:
        raise RuntimeError(f"archive --migrate failed: {out.stderr}")


@dataclass
class ArchiverProcess:
    config: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = field(default=0)

    def start(self, timeout: float = 60.0) -> None:
        """Start it and return once the broker acknowledged its subscription."""
        assert self.proc is None
        before = self.log_text().count("archive.subscribed")
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                cli("archive", "--config", str(self.config)),
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.starts += 1
        deadline = time.monotonic() + timeout
        while self.log_text().count("archive.subscribed") <= before:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the archiver exited ({self.proc.returncode}):\n{self.log_text()[-3000:]}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"the archiver did not subscribe:\n{self.log_text()[-3000:]}")
            time.sleep(0.05)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill9(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def stop(self) -> int:
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self.proc = None
        return rc
