"""The daemon end to end: same events as replay, and after ``kill -9`` it
delivers exactly what an uninterrupted run of the same input would."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller import signing
from controller.config import load_config
from controller.daemon import Daemon
from controller.engine import Engine
from controller.events import dumps
from controller.journal import Journal
from controller.replay import ReplayOptions, replay_events
from controller.rules import load_profile
from firmware_protocols.detect import make_decoder
from firmware_protocols.frames import Link
from tests.support.configs import write_config
from tests.support.signed import unsigned, unsigned_line

CAPTURES = Path(__file__).parent / "captures"


_config = write_config


@pytest.mark.parametrize("capture", ["profile_punto_banco", "x_unread_card", "line_split_frames"])
def test_daemon_on_a_capture_emits_what_replay_emits(tmp_path: Path, capture: str) -> None:
    path = CAPTURES / f"{capture}.shoelog"
    cfg = load_config(
        _config(tmp_path, {"driver": "replay", "file": str(path)}, outputs={"stdout": True, "jsonl": None})
    )
    out = io.StringIO()
    rc = Daemon(cfg, stdout=out, stop_at_eof=True).run()
    assert rc == 0
    want = "".join(dumps(e) + "\n" for e in replay_events(path, ReplayOptions(roads=True)))
    assert unsigned(out.getvalue()) == want


def reference_events(
    journal_path: Path, protocol: str = "shoe-ascii/1", rules: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """A fresh engine fed every input the journal holds: what an
    uninterrupted run of the same input delivers (with the daemon's own
    rule overrides)."""
    engine = Engine(
        "T01", load_profile("punto_banco", rules), 8, odds=False, roads=True, defer_analytics=True
    )
    decoder = make_decoder(protocol)
    out: list[dict[str, Any]] = []
    with Journal(journal_path) as j:
        for rec in j.inputs_since(0):
            if rec.kind == "rx":
                for f in decoder.feed(rec.t, rec.data):
                    out += engine.feed(f)
            elif rec.kind == "link":
                out += engine.feed(Link(rec.t, None, rec.data[:1] == b"1", rec.data[1:].decode()))
            elif rec.kind == "tick":
                out += engine.tick(rec.t)
            elif rec.kind == "cmd":
                out += engine.command(json.loads(rec.data), rec.t)[1]
            out += engine.drain_analytics()  # as the daemon: after each input
    return [json.loads(dumps(e)) for e in out]


def _wait_for(pred: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_kill_9_mid_coup_then_restart_delivers_what_an_uninterrupted_run_would(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    fake = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "fake", "--pty", "--seed", "5", "--cards-per-second", "40"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert fake.stdout is not None
        port = fake.stdout.readline().strip()
        assert port.startswith("/"), port
        # a short deadline: if bytes were lost while the daemon was dead, the
        # hold it opens resolves within the test
        cfg = _config(
            tmp_path,
            {"driver": "serial", "port": port, "baudrate": 115200},
            rules={"correction_deadline_s": 3},
        )
        events = tmp_path / "events.jsonl"
        cmd = [sys.executable, "-m", "controller.cli", "run", "-c", str(cfg)]
        daemon = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)

        def mid_coup() -> bool:
            ev = _lines(events)
            return len([e for e in ev if e["type"] == "coup.result"]) >= 3 and ev[-1]["type"] == "card"

        _wait_for(mid_coup, 60, "three coups and a card of the fourth")
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(10)
        before = _lines(events)
        killed_at = len(before)
        interrupted = before[-1]["coup"]
        daemon = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        _wait_for(
            lambda: len([e for e in _lines(events)[killed_at:] if e["type"] == "coup.result"]) >= 3,
            60,
            "three more coups after the restart",
        )
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(20) == 0
    finally:
        fake.send_signal(signal.SIGTERM)
        fake.wait(10)

    delivered = _lines(events)
    by_id: dict[str, dict[str, Any]] = {}
    for e in delivered:
        # at least once: a repeat must be the very same event
        assert by_id.setdefault(e["event_id"], e) == e, (
            f"{e['event_id']} delivered twice with different content"
        )
    firsts = list(by_id.values())
    assert [e["seq"] for e in firsts] == sorted(e["seq"] for e in firsts), "per-table order kept"
    # the daemon's deadline, not the profile's: they differ once frames were lost
    reference = reference_events(tmp_path / "journal.sqlite3", rules={"correction_deadline_s": 3})
    assert [json.loads(unsigned_line(json.dumps(e))) for e in firsts] == reference
    # signed and chained across the kill and the restart: each
    # event's prev is the digest of the one before it, delivered or journalled
    ring = signing.KeyRing()
    ring.add(signing.Signer(signing.load_key(tmp_path / "signing.key")).public_key)
    check = signing.ChainCheck(ring, anchored=False)
    with sqlite3.connect(tmp_path / "journal.sqlite3") as db:
        for seq, text in db.execute("SELECT seq, json FROM events ORDER BY seq"):
            assert check.feed(f"seq {seq}", text.encode()) is None
    assert check.signed == check.count == len(firsts)
    # The coup cut by the kill is finished (settled with its own cards, or
    # flagged): if bytes were lost while no one read the port, it is a
    # misdeal, never a silently dealt-over coup.
    assert any(
        e["type"] in ("coup.result", "coup.void", "misdeal") and e["coup"] == interrupted for e in firsts
    )


def test_a_journal_that_cannot_be_written_stops_the_daemon_loudly(tmp_path: Path) -> None:
    locked = tmp_path / "ro"
    locked.mkdir()
    Journal(locked / "journal.sqlite3").close()
    (locked / "journal.sqlite3").chmod(0o444)
    locked.chmod(0o555)
    try:
        cfg = _config(tmp_path, {"driver": "fake", "cards_per_second": 0})
        data = yaml.safe_load(cfg.read_text())
        data["journal"] = str(locked / "journal.sqlite3")
        cfg.write_text(yaml.safe_dump(data))
        if os.geteuid() == 0:
            # root ignores file modes: make the journal unwritable another way
            data["journal"] = "/proc/shoe-controller-test/journal.sqlite3"
            cfg.write_text(yaml.safe_dump(data))
        r = subprocess.run(
            [sys.executable, "-m", "controller.cli", "run", "-c", str(cfg)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        locked.chmod(0o755)
    assert r.returncode == 1
    assert "journal" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "events.jsonl").exists() or (tmp_path / "events.jsonl").read_text() == ""


def test_the_prometheus_endpoint_counts_cards_coups_and_drops(tmp_path: Path) -> None:
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    capture = CAPTURES / "line_garbage.shoelog"
    cfg = load_config(
        _config(
            tmp_path,
            {"driver": "replay", "file": str(capture), "realtime": False},
            metrics=f"127.0.0.1:{port}",
        )
    )
    daemon = Daemon(cfg, stop_at_eof=True)
    assert daemon.run() == 0
    # the endpoint lives as long as the process; the daemon's registry says what it served
    from prometheus_client import generate_latest

    text = generate_latest(daemon.metrics.registry).decode()
    assert "shoe_controller_cards_total 8.0" in text
    assert 'shoe_controller_coups_total{outcome="settled"} 1.0' in text
    assert 'shoe_controller_frames_dropped{reason="garbage"}' in text
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert b"shoe_controller_cards_total" in resp.read()
