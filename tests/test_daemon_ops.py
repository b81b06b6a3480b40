"""The daemon under operational faults: a
secondary output that fails does not take it down, STATUS= follows the
device, an unreachable NOTIFY_SOCKET does not flood the log, dropped bytes
are counted with no frame at all, and SIGHUP at start-up is harmless."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog

from controller.config import load_config
from controller.daemon import Daemon, Notifier
from controller.outputs import jsonl as jsonl_mod
from tests.support.configs import write_config

CAPTURES = Path(__file__).parent / "captures"


def _config(tmp_path: Path, device: dict[str, Any], **extra: Any) -> Path:
    """Stdout on, and the JSON lines in a directory of their own (the tests make it unwritable)."""
    outputs = {"stdout": True, "jsonl": str(tmp_path / "out" / "events.jsonl")}
    return write_config(tmp_path, device, **{"outputs": outputs, **extra})


def _wait(pred: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Running:
    """A daemon in a thread, its stdout output in memory."""

    def __init__(self, cfg: Path) -> None:
        self.out = io.StringIO()
        self.daemon = Daemon(load_config(cfg), stdout=self.out)
        self.rc: int | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.rc = self.daemon.run()

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.out.getvalue().splitlines() if x.strip()]

    def alerts(self, code: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["type"] == "security.alert" and e["code"] == code]

    def cards_after(self, event: dict[str, Any]) -> int:
        return sum(1 for e in self.events() if e["type"] == "card" and e["seq"] > event["seq"])

    def stop(self) -> int | None:
        self.daemon.request_stop()
        self._thread.join(30)
        assert not self._thread.is_alive()
        return self.rc


@pytest.fixture
def fast_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl_mod, "RETRY_S", 0.2)


def _jsonl_seqs(path: Path) -> list[int]:
    return [json.loads(x)["seq"] for x in path.read_text().splitlines() if x.strip()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_jsonl_output_unwritable_at_start_is_reported_and_retried_while_dealing_goes_on(
    tmp_path: Path, fast_retry: None
) -> None:
    (tmp_path / "out").write_text("a file where the directory should be")
    cfg = _config(
        tmp_path,
        {"driver": "fake", "seed": 2, "cards_per_second": 40},
        metrics=f"127.0.0.1:{_free_port()}",
    )
    run = Running(cfg)
    try:
        _wait(lambda: bool(run.alerts("OUTPUT_FAILED")), "OUTPUT_FAILED")
        failed = run.alerts("OUTPUT_FAILED")[0]
        assert "jsonl" in failed["detail"] and "cannot open" in failed["detail"]
        _wait(lambda: run.cards_after(failed) >= 5, "cards dealt while the output fails")
        from prometheus_client import generate_latest

        text = generate_latest(run.daemon.metrics.registry).decode()
        assert 'shoe_controller_output_up{output="jsonl"} 0.0' in text
        assert 'shoe_controller_output_errors_total{output="jsonl"}' in text
        assert "output failing: jsonl" in run.daemon._status()

        (tmp_path / "out").unlink()
        _wait(lambda: bool(run.alerts("OUTPUT_RESTORED")), "OUTPUT_RESTORED")
        restored = run.alerts("OUTPUT_RESTORED")[0]
        _wait(
            lambda: restored["seq"] in _jsonl_seqs(tmp_path / "out" / "events.jsonl"),
            "the JSONL file caught up",
        )
    finally:
        assert run.stop() == 0
    # the file got everything, from the first event on, in order
    on_file = _jsonl_seqs(tmp_path / "out" / "events.jsonl")
    assert on_file == [e["seq"] for e in run.events()][: len(on_file)]
    assert on_file[0] == 1 and failed["seq"] in on_file
    assert len(run.alerts("OUTPUT_FAILED")) == 1  # one per change, not one per retry


def test_a_jsonl_output_not_reopenable_on_sighup_is_reported_and_retried(
    tmp_path: Path, fast_retry: None
) -> None:
    cfg = _config(tmp_path, {"driver": "fake", "seed": 2, "cards_per_second": 40})
    out = tmp_path / "out"
    run = Running(cfg)
    try:
        _wait(
            lambda: (out / "events.jsonl").exists() and len(_jsonl_seqs(out / "events.jsonl")) >= 10, "events"
        )
        out.rename(tmp_path / "out.1")
        out.write_text("not a directory any more")
        run.daemon._on_hup(signal.SIGHUP, None)
        _wait(lambda: bool(run.alerts("OUTPUT_FAILED")), "OUTPUT_FAILED")
        failed = run.alerts("OUTPUT_FAILED")[0]
        assert "cannot reopen" in failed["detail"]
        _wait(lambda: run.cards_after(failed) >= 5, "cards dealt while the output fails")
        out.unlink()
        _wait(lambda: bool(run.alerts("OUTPUT_RESTORED")), "OUTPUT_RESTORED")
        restored = run.alerts("OUTPUT_RESTORED")[0]
        _wait(lambda: restored["seq"] in _jsonl_seqs(out / "events.jsonl"), "the new file caught up")
    finally:
        assert run.stop() == 0
    both = _jsonl_seqs(tmp_path / "out.1" / "events.jsonl") + _jsonl_seqs(out / "events.jsonl")
    assert both == [e["seq"] for e in run.events()][: len(both)], "nothing lost across the failure"


# --- item 8 -----------------------------------------------------------------


def test_dropped_bytes_are_counted_for_a_stream_of_nothing_but_garbage(tmp_path: Path) -> None:
    capture = tmp_path / "garbage.shoelog"
    capture.write_text(
        "# protocol=shoe-ascii/1 table=T01\n"
        # 64 bytes with no '$' (no frame can even begin), 50 times
        + "".join(f"{1763800000 + i}.000 < hex:{bytes(range(0x40, 0x80)).hex()}\n" for i in range(50))
    )
    cfg = _config(
        tmp_path,
        {"driver": "replay", "file": str(capture), "realtime": False},
        metrics=f"127.0.0.1:{_free_port()}",
    )
    daemon = Daemon(load_config(cfg), stdout=io.StringIO(), stop_at_eof=True)
    assert daemon.run() == 0
    from prometheus_client import generate_latest

    assert daemon.stats.events == 0  # no frame, no event: the metric must not wait for one
    text = generate_latest(daemon.metrics.registry).decode()
    assert 'shoe_controller_frames_dropped{reason="garbage"} 3200.0' in text, text


def test_an_unreachable_notify_socket_is_logged_once_then_rate_limited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "no-such-socket"))
    now = [100.0]
    notifier = Notifier(warn_every_s=300.0, clock=lambda: now[0])
    with structlog.testing.capture_logs() as logs:
        for _ in range(100):  # a watchdog ping every few seconds for a long while
            notifier.send("WATCHDOG=1")
        assert len(logs) == 1 and logs[0]["event"] == "sd_notify failed"
        now[0] += 300.0
        notifier.send("WATCHDOG=1")
    assert len(logs) == 2 and logs[1]["failures"] == 100  # 99 held back, then this one


class NotifyListener:
    """The systemd side of sd_notify: a datagram socket at NOTIFY_SOCKET."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.messages: list[str] = []

    def statuses(self) -> list[str]:
        while True:
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except TimeoutError:
                break
        return [
            line[len("STATUS=") :]
            for m in self.messages
            for line in m.splitlines()
            if line.startswith("STATUS=")
        ]

    def wait_status(self, pred: Callable[[str], bool], what: str) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = [s for s in self.statuses() if pred(s)]
            if found:
                return found[-1]
        raise AssertionError(f"no STATUS {what}: {self.statuses()}")


def test_status_follows_the_device_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from drivers.fake import FakeShoe, serve_pty

    listener = NotifyListener(tmp_path / "notify.sock")
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify.sock"))
    link = tmp_path / "shoe"  # no device there yet
    cfg = _config(tmp_path, {"driver": "serial", "port": str(link), "baudrate": 115200})
    run = Running(cfg)
    stop = threading.Event()
    fake: threading.Thread | None = None
    try:
        first = listener.wait_status(lambda s: True, "at READY")
        assert any("READY=1" in m for m in listener.messages)
        assert first.startswith("waiting for the device"), first  # not "device open"
        fake = threading.Thread(
            target=serve_pty,
            args=(FakeShoe(seed=4, protocol="shoe-ascii/1", shoes=1), 20.0, lambda _: None),
            kwargs={"link": str(link), "stop": stop},
            daemon=True,
        )
        fake.start()
        listener.wait_status(lambda s: s.startswith("dealing: device up"), "device up")
        stop.set()  # the shoe goes away: its pty closes
        fake.join(10)
        listener.wait_status(lambda s: s.startswith("waiting for the device") and str(link) in s, "down")
    finally:
        stop.set()
        assert run.stop() == 0


def test_sighup_during_start_up_does_not_kill_the_daemon(tmp_path: Path) -> None:
    # The config is a FIFO: the daemon blocks reading it, provably past the
    # start of its own code and before the daemon exists; SIGHUP lands there.
    cfg = _config(tmp_path, {"driver": "fake", "seed": 1, "cards_per_second": 40})
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "run", "-c", str(fifo)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with open(fifo, "w") as f:  # returns once the daemon opened it to read
            proc.send_signal(signal.SIGHUP)
            proc.send_signal(signal.SIGHUP)
            f.write(cfg.read_text())
        out = tmp_path / "out" / "events.jsonl"
        _wait(lambda: (out.exists() and len(_jsonl_seqs(out)) >= 5) or proc.poll() is not None, "events")
        assert proc.poll() is None, f"died: rc {proc.returncode}"
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    assert rc == 0, proc.stderr.read() if proc.stderr else ""
