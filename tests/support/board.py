"""The board and the daemon as real processes for the board's tests, and a
headless Chromium driven by Selenium (Debian's ``chromium`` and
``chromium-driver``; ``make deps-system`` installs them)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import Broker, free_port, mqtt_client, need_tool
from tests.support.configs import write_config

CHROMIUM = ("/usr/bin/chromium", "/usr/lib/chromium/chromium")
CHROMEDRIVER = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")


def board_config(
    tmp_path: Path, broker: Broker, tables: list[dict[str, Any]] | None = None, **extra: Any
) -> Path:
    cfg = {
        "listen": f"127.0.0.1:{free_port()}",
        "mqtt": {"host": broker.host, "port": broker.port},
        "tables": tables or [{"table": "T01", "title": "Table 1"}],
        **extra,
    }
    path = tmp_path / "board.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class Board:
    """``shoe-controller board`` in its own process; ``url`` once it listens."""

    def __init__(self, config: Path, log: Path) -> None:
        self.log = log
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "board", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            text=True,
        )
        self.url = ""
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self._log.write(line)
                self._log.flush()
                m = re.search(r"on (http://\S+/)", line)
                if m and not ready.is_set():
                    self.url = m.group(1)
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(30) or not self.url:
            self.stop()
            raise RuntimeError(f"the board did not start:\n{log.read_text()}")

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def view(self, table: str = "T01") -> dict[str, Any]:
        status, body = self.get(f"/api/table/{table}")
        assert status == 200, body
        data: dict[str, Any] = json.loads(body)
        return data

    def stats(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.get("/api/stats")[1])
        return data

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def daemon_config(
    tmp_path: Path, broker: Broker, *, cards_per_second: float, seed: int = 3, **extra: Any
) -> Path:
    """A daemon dealing a fake shoe to ``broker`` (the suite's base config)."""
    return write_config(
        tmp_path,
        {"driver": "fake", "seed": seed, "cards_per_second": cards_per_second},
        outputs={
            "stdout": False,
            "mqtt": {"host": broker.host, "port": broker.port, "client_id": "shoe-T01"},
        },
        **extra,
    )


def start_daemon(cfg: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "run", "-c", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


@contextmanager
def chromium(width: int = 1600, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium under Selenium; skipped (failed in CI) without
    the browser or its driver."""
    browser = need_tool("chromium", *CHROMIUM)
    driver_path = need_tool("chromedriver", *CHROMEDRIVER)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespace for the sandbox
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


class TablePublisher:
    """Publishes as table T01's controller would, for the board's browser
    tests: ``event(kind, **payload)`` is an event of shoe ``shoe`` with the
    next seq (as JSON text), ``send(topic, payload, retain)`` publishes it
    under ``baccarat/T01/`` at QoS 1 and waits for the broker."""

    def __init__(self, broker: Broker, shoe: str = "20261123T050000Z") -> None:
        self.client = mqtt_client(broker)[0]
        self.shoe = shoe
        self._seq = iter(range(1, 100_000))

    def event(self, kind: str, **payload: Any) -> str:
        n = next(self._seq)
        return json.dumps({"v": 1, "type": kind, "event_id": f"T01/{self.shoe}/{n}", "table": "T01",
                           "shoe": self.shoe, "seq": n, "ts": "2026-11-23T05:00:00.000Z",
                           **payload})  # fmt: skip

    def send(self, topic: str, payload: str, retain: bool = False) -> None:
        self.client.publish(f"baccarat/T01/{topic}", payload, qos=1, retain=retain).wait_for_publish(10)

    def close(self) -> None:
        self.client.disconnect()
