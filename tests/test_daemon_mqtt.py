"""The daemon against a real broker (started by the test suite): every topic
of docs/operations.md, MQTT, supervisor commands through ``shoe-controller ctl``, a
broker outage mid-shoe with nothing lost or reordered, and the Last Will
when the daemon is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from controller.journal import Journal
from tests.conftest import Broker, BrokerFactory, Subscriber, eventually

pytestmark = __import__("pytest").mark.mqtt


def _config(tmp_path: Path, broker: Broker, **device: Any) -> Path:
    cfg = {
        "table": "T01",
        "device": {"driver": "fake", "seed": 3, "cards_per_second": 40, **device},
        "journal": str(tmp_path / "journal.sqlite3"),
        "outputs": {
            "stdout": False,
            "mqtt": {"host": broker.host, "port": broker.port, "client_id": "shoe-T01"},
        },
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _start(cfg: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "run", "-c", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )


def _events(sub: Subscriber) -> list[dict[str, Any]]:
    with sub.lock:
        msgs = list(sub.messages)
    out = []
    for m in msgs:
        # events only: not the retained snapshots (status, shoe state, latest
        # odds), not commands and replies; a retained 'roads' is the latest
        # roads event itself (published once, retained)
        if m.topic in ("baccarat/T01/status", "baccarat/T01/shoe/state", "baccarat/T01/odds"):
            continue
        if m.topic == "baccarat/T01/keys":  # the table's signing keys, not an event
            continue
        if m.topic.startswith("baccarat/T01/cmd"):
            continue
        out.append(json.loads(m.payload))
    return out


def _ctl(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "ctl", *args, "-c", str(cfg), "--timeout", "20"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def test_daemon_publishes_every_topic_and_answers_commands(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto()
    sub = subscriber(broker, ["baccarat/T01/#"])
    cfg = _config(tmp_path, broker)
    daemon = _start(cfg)
    try:
        assert sub.wait_for(lambda ms: sum(m.topic == "baccarat/T01/coup/result" for m in ms) >= 2, 60)
        topics = {m.topic for m in sub.messages}
        for t in (
            "baccarat/T01/status",
            "baccarat/T01/device/status",
            "baccarat/T01/shoe/started",
            "baccarat/T01/shoe/burn",
            "baccarat/T01/card",
            "baccarat/T01/coup/result",
            "baccarat/T01/odds/update",
            "baccarat/T01/roads",
            "baccarat/T01/odds",
        ):
            assert t in topics, t
        assert sub.wait_for(lambda ms: any(m.topic == "baccarat/T01/shoe/state" for m in ms), 20)
        assert [m.text for m in sub.on("baccarat/T01/status")][-1] == "online"
        # events: QoS 1, never retained
        assert all(m.qos == 1 and not m.retain for m in sub.on("baccarat/T01/coup/result"))

        # a late subscriber gets the retained status, state, roads and odds
        late = subscriber(broker, ["baccarat/T01/#"])
        assert late.wait_for(
            lambda ms: (
                {m.topic for m in ms if m.retain}
                >= {
                    "baccarat/T01/status",
                    "baccarat/T01/shoe/state",
                    "baccarat/T01/roads",
                    "baccarat/T01/odds",
                    "baccarat/T01/keys",
                }
            ),
            20,
        )
        # the retained keys name the key every event is signed with
        keys = json.loads(late.on("baccarat/T01/keys")[-1].payload)
        assert keys["table"] == "T01" and len(keys["keys"]) == 1
        signed_with = {json.loads(m.payload)["key_id"] for m in sub.on("baccarat/T01/coup/result")}
        assert signed_with == {keys["keys"][0]["key_id"]}

        settled = json.loads(sub.on("baccarat/T01/coup/result")[0].payload)["coup"]
        r = _ctl(cfg, "void", "--coup", str(settled), "--reason", "test", "--json")
        assert r.returncode == 1, r.stderr
        reply = json.loads(r.stdout)
        assert reply["ok"] is False and "already settled" in reply["error"]

        r = _ctl(cfg, "new-shoe")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("shoe ") and r.stdout.endswith("; the next card starts the new shoe\n")
        assert sub.wait_for(lambda ms: sum(m.topic == "baccarat/T01/shoe/started" for m in ms) >= 2, 20)

        sub.publish("baccarat/T01/cmd", b'{"id": "bad", "cmd": "launch"}')
        assert sub.wait_for(
            lambda ms: any(m.topic == "baccarat/T01/cmd/reply" and b'"bad"' in m.payload for m in ms), 20
        )
        bad = next(json.loads(m.payload) for m in sub.on("baccarat/T01/cmd/reply") if b'"bad"' in m.payload)
        assert bad["ok"] is False and bad["error"]
    finally:
        assert _stop(daemon) == 0
    assert sub.wait_for(
        lambda ms: [m.text for m in ms if m.topic == "baccarat/T01/status"][-1] == "offline", 20
    )


def test_broker_outage_mid_shoe_loses_nothing_and_keeps_order(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto(persistence=True)
    # a persistent session: QoS 1 messages queued for us while we reconnect
    sub = subscriber(broker, ["baccarat/T01/#"], client_id="surveillance-1", clean=False)
    cfg = _config(tmp_path, broker)
    daemon = _start(cfg)
    try:
        assert sub.wait_for(lambda ms: sum(m.topic == "baccarat/T01/coup/result" for m in ms) >= 2, 60)
        broker.stop()
        with Journal(tmp_path / "journal.sqlite3") as j:
            before = j.last_seq()
        # several coups are dealt while the broker is away
        assert eventually(lambda: _journal_coups(tmp_path) >= 3 + _journal_coups(tmp_path, upto=before), 60)
        broker.start()
        with Journal(tmp_path / "journal.sqlite3") as j:
            target = j.last_seq()
        assert sub.wait_for(lambda ms: any(e["seq"] >= target for e in _events(sub)), 60)
    finally:
        assert _stop(daemon) == 0
    got = _events(sub)
    first_seen: dict[str, dict[str, Any]] = {}
    for e in got:
        assert first_seen.setdefault(e["event_id"], e) == e
    seqs = [e["seq"] for e in first_seen.values()]
    assert seqs == sorted(seqs), "order kept"
    with Journal(tmp_path / "journal.sqlite3") as j:
        stored = [json.loads(p.json) for p in j.events_since(0)]
    assert [e["seq"] for e in stored][: len(seqs)] == seqs, (
        "none lost: every stored event up to the last arrived"
    )


def _journal_coups(tmp_path: Path, upto: int | None = None) -> int:
    with Journal(tmp_path / "journal.sqlite3") as j:
        return sum(
            1
            for p in j.events_since(0)
            if (upto is None or p.seq <= upto) and json.loads(p.json)["type"] in ("coup.result", "coup.void")
        )


def test_killing_the_daemon_leaves_the_last_will_offline(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto()
    sub = subscriber(broker, ["baccarat/T01/status"])
    daemon = _start(_config(tmp_path, broker))
    try:
        assert sub.wait_for(lambda ms: any(m.text == "online" for m in ms), 60)
    finally:
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(10)
    # the broker notices the dead connection (keepalive 30 s at most; a
    # killed process's socket closes at once) and publishes the will
    assert sub.wait_for(lambda ms: ms[-1].text == "offline", 60)
