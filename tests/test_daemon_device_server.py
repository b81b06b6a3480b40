"""The daemon and ``record`` reading a shoe through a serial device server
(``socket://`` and ``rfc2217://`` on 127.0.0.1), the server stopped and
restarted mid-coup: ``device.status`` offline/online, the interrupted coup
held as on a local port, and every event the same as over a local port."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import tty
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.config import load_config
from controller.daemon import Daemon
from controller.shoelog import read_header, read_shoelog
from controller.signing import SIGNING_FIELDS
from drivers.fake import FakeShoe, serve_pty
from tests.support.device_server import Rfc2217Server, ShoeServer

pytestmark = pytest.mark.filterwarnings("ignore:set(Daemon|Name)\\(\\) is deprecated:DeprecationWarning")

REPO = Path(__file__).resolve().parent.parent


def shoe() -> FakeShoe:
    # one 1-deck shoe whose line drops mid-coup several times (seed 5)
    return FakeShoe(seed=5, shoes=1, decks=1, cut_card_min=12, faults="disconnect:0.3")


def disconnected_coups(fake: FakeShoe) -> list[int]:
    return [c["coup"] for c in fake.coups for f in c["faults"] if f["kind"] == "disconnect"]


def assert_losses_held(got: list[dict[str, Any]], fake: FakeShoe, restarts: int) -> None:
    """Each loss came mid-coup and held a coup; frames lost in it are
    flagged as lost, never guessed around."""
    misdeals = [e for e in got if e["type"] == "misdeal"]
    mid_coup = "the device disconnected mid-coup"
    held = [e for e in misdeals if e["code"] == "DEVICE_FAULT" and e["detail"] == mid_coup]
    # (a loss while the coup is already held adds no second hold)
    assert 0 < len(held) <= restarts
    lost = [f["lost"] for c in fake.coups for f in c["faults"] if f["kind"] == "disconnect"]
    assert any(lost), "the seed loses frames in some outage"
    assert any(e["code"] == "SEQUENCE_GAP" for e in misdeals)
    resumed = [e for e in misdeals if e["code"] == "DEVICE_FAULT" and e["action"] == "corrected"]
    assert 0 < len(resumed) < restarts


def write_config(tmp_path: Path, port: str, rules: dict[str, Any] | None = None, **device: Any) -> Path:
    cfg: dict[str, Any] = {
        "table": "T01",
        "decks": 1,
        "device": {"driver": "serial", "port": port, **device},
        "journal": str(tmp_path / "journal.sqlite3"),
        "odds": False,
        "outputs": {"stdout": False, "jsonl": str(tmp_path / "events.jsonl")},
    }
    if rules:
        cfg["rules"] = rules
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def rx_bytes(journal: Path) -> int:
    """Device bytes the daemon has committed so far (read-only look)."""
    if not journal.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=5) as db:
            row = db.execute("SELECT coalesce(sum(length(data)), 0) FROM inputs WHERE kind = 'rx'").fetchone()
    except sqlite3.OperationalError:
        return 0  # not created yet
    return int(row[0])


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_daemon_until(cfg_path: Path, total: int) -> list[dict[str, Any]]:
    """The daemon in process until it has committed ``total`` device bytes."""
    daemon = Daemon(load_config(cfg_path))
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(daemon.run()), daemon=True)
    thread.start()
    try:
        wait_for(lambda: rx_bytes(cfg_path.parent / "journal.sqlite3") >= total, 60, "every byte of the shoe")
    finally:
        daemon.request_stop()
        thread.join(30)
    assert result == [0]
    return events(cfg_path.parent / "events.jsonl")


def comparable(got: list[dict[str, Any]]) -> list[str]:
    """Events without what depends on the wall clock or the port's name:
    read times, deadlines, link details, the shoe id (its start time), and
    the signing fields (each daemon makes its own key; the chain digests
    the read times)."""
    out = []
    shoes: dict[str, str] = {}
    for event in got:
        drop = {"ts", "deadline", *SIGNING_FIELDS}
        if event["type"] == "device.status":
            drop.add("detail")
        text = json.dumps({k: v for k, v in event.items() if k not in drop}, sort_keys=True)
        if event.get("shoe"):
            shoe_id = shoes.setdefault(event["shoe"], f"shoe-{len(shoes) + 1}")
            text = text.replace(event["shoe"], shoe_id)
        out.append(text)
    return out


def test_the_daemon_through_a_device_server_emits_what_it_emits_on_a_local_port(tmp_path: Path) -> None:
    total = len(b"".join(d for _, d in shoe().stream()))

    # a local port: the fake shoe on a pty whose line drops at each fault
    local = tmp_path / "local"
    local.mkdir()
    link = str(local / "shoe")
    ready = threading.Event()
    stop = threading.Event()
    pty_fake = shoe()
    server = threading.Thread(
        target=serve_pty,
        args=(pty_fake, 0.0, lambda path: ready.set()),
        kwargs={"link": link, "stop": stop, "reconnect_delay": 0.3, "settle": 0.3},
        daemon=True,
    )
    server.start()
    try:
        assert ready.wait(10)
        on_pty = run_daemon_until(write_config(local, link, baudrate=115200), total)
    finally:
        stop.set()
        server.join(15)

    # the same shoe behind a device server restarted at each fault
    remote = tmp_path / "remote"
    remote.mkdir()
    net_fake = shoe()
    with ShoeServer(net_fake, outage=0.3) as box:
        on_socket = run_daemon_until(write_config(remote, box.url), total)
    assert box.restarts == len(disconnected_coups(net_fake)) >= 2

    statuses = [e for e in on_socket if e["type"] == "device.status" and e["code"] != "HELLO"]
    assert [(e["state"], e["code"]) for e in statuses] == [
        ("offline", "DISCONNECTED"),
        ("online", "CONNECTED"),
    ] * box.restarts
    assert all(e["detail"].startswith(box.url) for e in statuses)
    assert_losses_held(on_socket, net_fake, box.restarts)
    # and everything else is exactly what the local port gave (serve_pty
    # closes its pty once the shoe is dealt; the box stays up)
    if on_pty[-1]["type"] == "device.status" and on_pty[-1]["state"] == "offline":
        on_pty.pop()
    assert comparable(on_socket) == comparable(on_pty)


def gaps_voided(got: list[dict[str, Any]]) -> bool:
    gaps = {e["coup"] for e in got if e["type"] == "misdeal" and e["code"] == "SEQUENCE_GAP"}
    return bool(gaps) and gaps <= {e["coup"] for e in got if e["type"] == "coup.void"}


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from controller.cli import main; sys.exit(main())", *args]


def test_shoe_controller_run_over_socket_reports_the_restarts_as_device_status(tmp_path: Path) -> None:
    fake = shoe()
    total = len(b"".join(d for _, d in shoe().stream()))
    with ShoeServer(fake, outage=0.5, cards_per_second=200) as box:
        # a short correction deadline: a coup that lost frames is voided
        # within the test
        cfg = write_config(tmp_path, box.url, rules={"correction_deadline_s": 2})
        daemon = subprocess.Popen(
            cli("run", "-c", str(cfg)),
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(lambda: rx_bytes(tmp_path / "journal.sqlite3") >= total, 90, "every byte of the shoe")
            wait_for(
                lambda: gaps_voided(events(tmp_path / "events.jsonl")),
                30,
                "the coups that lost frames voided at their deadline",
            )
        finally:
            daemon.send_signal(signal.SIGTERM)
            _, stderr = daemon.communicate(timeout=30)
    assert daemon.returncode == 0, stderr
    got = events(tmp_path / "events.jsonl")
    links = [e for e in got if e["type"] == "device.status" and e["code"] in ("DISCONNECTED", "CONNECTED")]
    assert [e["code"] for e in links] == ["DISCONNECTED", "CONNECTED"] * box.restarts
    assert box.restarts == len(disconnected_coups(fake)) >= 2
    assert all(e["detail"].startswith(box.url) for e in links)
    # the daemon's own log says the same, one warning per transition
    assert stderr.count('"event": "device link"') == 2 * box.restarts
    assert_losses_held(got, fake, box.restarts)
    # coups settle with the shoe's own cards; the one that lost frames is
    # void, never settled with cards guessed around the hole
    results = {e["coup"]: e for e in got if e["type"] == "coup.result"}
    dealt = {c["coup"]: c for c in fake.coups if c["shoe"] == 1}
    assert results[1]["player"]["cards"] == dealt[1]["player"]
    assert results[1]["banker"]["cards"] == dealt[1]["banker"]
    gap_coups = {e["coup"] for e in got if e["type"] == "misdeal" and e["code"] == "SEQUENCE_GAP"}
    voided = {e["coup"] for e in got if e["type"] == "coup.void"}
    assert gap_coups and gap_coups <= voided
    assert not gap_coups & set(results)


def test_record_over_socket_captures_every_byte_and_the_link_changes(tmp_path: Path) -> None:
    fake = shoe()
    expected = b"".join(d for _, d in shoe().stream())
    out = tmp_path / "t01.shoelog"
    with ShoeServer(fake, outage=0.3) as box:
        cfg = write_config(tmp_path, box.url)
        rec = subprocess.Popen(
            cli("record", "-c", str(cfg), "-o", str(out)), cwd=REPO, stderr=subprocess.PIPE, text=True
        )
        try:

            def captured() -> bytes:
                if not out.exists():
                    return b""
                return b"".join(r.data for r in read_shoelog(out) if not isinstance(r, dict))

            wait_for(box.finished.is_set, 60, "the shoe dealt")
            wait_for(lambda: len(captured()) >= len(expected), 30, "the capture of every byte")
        finally:
            rec.send_signal(signal.SIGTERM)
            _, stderr = rec.communicate(timeout=30)
    assert rec.returncode == 0, stderr
    assert captured() == expected
    assert read_header(out)["protocol"] == "shoe-ascii/1"
    text = out.read_text()
    assert text.count("# link down at ") == text.count("# link up at ") == box.restarts >= 2
    assert "the device server closed the connection" in text
    assert stderr.count("link down") == box.restarts


def test_record_over_rfc2217_captures_the_shoe(tmp_path: Path) -> None:
    master, slave = os.openpty()
    tty.setraw(slave)
    name = os.ttyname(slave)
    os.close(slave)
    stream = b"".join(d for _, d in FakeShoe(seed=3, shoes=1, decks=1, cut_card_min=12).stream())
    out = tmp_path / "t01.shoelog"
    try:
        with Rfc2217Server(name) as box:
            cfg = write_config(tmp_path, box.url, protocol="shoe-ascii/1", baudrate=19200)
            rec = subprocess.Popen(
                cli("record", "-c", str(cfg), "-o", str(out)), cwd=REPO, stderr=subprocess.PIPE, text=True
            )
            try:
                assert box.ready.wait(30), "record never finished opening the port"
                os.write(master, stream)

                def captured() -> bytes:
                    if not out.exists():
                        return b""
                    return b"".join(r.data for r in read_shoelog(out) if not isinstance(r, dict))

                wait_for(lambda: len(captured()) >= len(stream), 30, "the capture")
            finally:
                rec.send_signal(signal.SIGTERM)
                _, stderr = rec.communicate(timeout=30)
    finally:
        os.close(master)
    assert rec.returncode == 0, stderr
    assert box.baudrates == [19200]
    assert captured() == stream
