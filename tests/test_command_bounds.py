"""Supervisor commands from the broker are bounded:
rate, queue, batch and alerts, so that a flood cannot stall the device or
fill the journal; and a retained command is never applied.

The bounds' own arithmetic is checked with an injected clock; the daemon
is checked in process against the suite's real mosquitto, by counts and
order (timings are in benchmarks/bench_command_flood.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
import structlog
import yaml
from paho.mqtt.enums import CallbackAPIVersion

from controller import command_limits
from controller.command_auth import stamp
from controller.command_limits import CommandInbox, RefusalAlerts
from controller.config import load_config
from controller.daemon import Daemon
from controller.journal import Journal
from drivers.fake import FakeDriver, FakeShoe
from tests.conftest import Broker, BrokerFactory, Subscriber, eventually


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_limit_takes_a_burst_of_20_then_2_per_second() -> None:
    clock = Clock()
    inbox = CommandInbox(clock=clock)
    assert (command_limits.BURST, command_limits.RATE_PER_S) == (20, 2.0)
    assert [inbox.admit() for _ in range(21)] == [True] * 20 + [False]
    clock.now += 0.49
    assert inbox.admit() is False
    clock.now += 0.01
    assert inbox.admit() is True
    clock.now += 1000.0  # a long quiet spell refills the burst, no more
    assert sum(inbox.admit() for _ in range(50)) == 20
    assert (inbox.admitted, inbox.dropped_rate, inbox.pop_dropped(), inbox.pop_dropped()) == (41, 32, 32, 0)


def test_the_queue_holds_32_and_drops_the_rest() -> None:
    inbox = CommandInbox()
    for i in range(40):
        inbox.offer({"id": i})
    assert (inbox.pending(), inbox.dropped_full, inbox.high_water) == (32, 8, 32)
    assert [c["id"] for c in inbox.take(command_limits.BATCH)] == [0, 1, 2, 3]
    assert command_limits.BATCH == 4
    assert len(inbox.take(100)) == 28 and inbox.take(1) == []
    assert inbox.pop_dropped() == 8


def test_refusal_alerts_are_one_per_window_plus_one_summary() -> None:
    alerts = RefusalAlerts(window_s=10.0)
    assert alerts.due(0.0) is None
    assert alerts.refused(0.0) is True  # the first: an alert of its own
    assert [alerts.refused(t) for t in (1.0, 2.0, 3.0)] == [False] * 3
    alerts.dropped(4.0, 500)
    assert alerts.due(9.99) is None
    assert alerts.due(10.0) == (3, 500)
    assert alerts.due(30.0) is None, "nothing more to say"
    alerts.dropped(40.0, 7)  # drops alone open a window too
    assert alerts.due(49.0) is None and alerts.due(50.0) == (0, 7)
    assert alerts.refused(51.0) is True and alerts.due(61.0) is None


# --- the daemon against the real broker ------------------------------------------

KEY = b"k3y-for-tests-only"


@pytest.fixture
def run_daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Factory: a Daemon in this process on ``broker`` with the fake shoe
    at 40 cards/s; stopped after the test."""
    running: list[tuple[Daemon, threading.Thread]] = []

    def start(broker: Broker, *, key: bool = False, protocol: str | None = None) -> Daemon:
        mqtt_cfg: dict[str, Any] = {"host": broker.host, "port": broker.port}
        if protocol is not None:  # None: the config's default (MQTT 5)
            mqtt_cfg["protocol"] = protocol
        if key:
            path = tmp_path / "command.key"
            path.write_bytes(KEY + b"\n")
            path.chmod(0o600)
            mqtt_cfg["command_key_file"] = str(path)
        cfg = tmp_path / "c.yaml"
        cfg.write_text(
            yaml.safe_dump(
                {
                    "table": "T01",
                    "device": {"driver": "fake", "cards_per_second": 40},
                    "journal": str(tmp_path / "j.sqlite3"),
                    "outputs": {"stdout": False, "mqtt": mqtt_cfg},
                }
            )
        )
        daemon = Daemon(load_config(cfg), driver=FakeDriver(FakeShoe(seed=5, t0=time.time()), 40))
        runner = threading.Thread(target=daemon.run)
        runner.start()
        running.append((daemon, runner))
        assert eventually(
            lambda: daemon.mqtt is not None and daemon.mqtt.ready and daemon.stats.cards > 3, 60
        )
        return daemon

    yield start
    for daemon, runner in running:
        daemon.request_stop()
        runner.join(60)


def _alerts(journal: Journal, after_seq: int) -> list[dict[str, Any]]:
    return [
        e
        for e in (json.loads(p.json) for p in journal.events_since(after_seq))
        if e["type"] == "security.alert" and e["code"] == "COMMAND_REJECTED"
    ]


@pytest.mark.mqtt
def test_a_command_flood_is_bounded_and_cards_keep_flowing(
    tmp_path: Path,
    mosquitto: BrokerFactory,
    subscriber: Callable[..., Subscriber],
    run_daemon: Callable[..., Daemon],
) -> None:
    """2,000 commands (unsigned, to a controller with a
    key: each one refused) used to become 2,000 journalled inputs and
    alerts while no device read happened."""
    # A queue per client large enough (deploy/mosquitto ships no count
    # limit, only a byte bound): with mosquitto's default of 1,000, a loaded
    # machine sometimes had the broker drop part of the flood before the
    # controller saw it, and the count of what the controller read or
    # dropped could not add up to 2,000.
    broker = mosquitto(config="listener @PORT@ 127.0.0.1\nallow_anonymous true\nmax_queued_messages 10000\n")
    daemon = run_daemon(broker, key=True)
    inbox = daemon._commands
    replies = subscriber(broker, ["baccarat/T01/cmd/reply"])
    journal = Journal(tmp_path / "j.sqlite3")
    first_input, first_seq = journal.last_input_id(), journal.last_seq()
    flooder = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id="flooder")
    flooder.max_inflight_messages_set(0)
    flooder.connect(broker.host, broker.port)
    flooder.loop_start()
    started = time.monotonic()
    try:
        sent = [
            flooder.publish(
                "baccarat/T01/cmd",
                json.dumps({"id": f"f{i}", "cmd": "void", "coup": 1, "reason": "flood", "ts": time.time()}),
                qos=1,
            )
            for i in range(2000)
        ]
        for info in sent:
            info.wait_for_publish(30)
        # every message is accounted for: read, or dropped over the rate
        assert eventually(lambda: inbox.admitted + inbox.dropped_rate == 2000, 30)
        # the summary alert comes when the 10 s window closes
        assert eventually(lambda: len(_alerts(journal, first_seq)) == 2, 40)
    finally:
        flooder.disconnect()
        flooder.loop_stop()
    elapsed = time.monotonic() - started
    admitted = inbox.admitted

    assert command_limits.BURST <= admitted <= command_limits.BURST + command_limits.RATE_PER_S * elapsed
    assert inbox.high_water <= command_limits.QUEUE_MAX and inbox.dropped_full == 0
    assert replies.wait_for(lambda ms: len(ms) >= admitted, 20)
    assert len(replies.messages) == admitted, "a dropped message gets no reply"

    first, summary = _alerts(journal, first_seq)
    assert "unauthenticated" in first["detail"]
    assert summary["detail"].startswith(
        f"{admitted - 1} more command(s) refused and {2000 - admitted} dropped unread in the last 10.0 s"
    )
    inputs = list(journal.inputs_since(first_input))
    cmds = [json.loads(r.data)["cmd"] for r in inputs if r.kind == "cmd"]
    assert cmds == ["_reject", "_refused"], "two inputs for 2,000 commands"
    # the device kept being read throughout: reads between the first
    # refusal and the summary, and card events after the first refusal
    at = [i for i, r in enumerate(inputs) if r.kind == "cmd"]
    assert any(r.kind == "rx" for r in inputs[at[0] : at[1]])
    events = [json.loads(p.json) for p in journal.events_since(first_seq)]
    assert [e["seq"] for e in events] == list(range(first_seq + 1, first_seq + 1 + len(events)))
    alert_at = next(i for i, e in enumerate(events) if e["event_id"] == first["event_id"])
    assert sum(e["type"] == "card" for e in events[alert_at:]) > 0
    journal.close()


@pytest.mark.mqtt
def test_with_the_default_config_a_retained_command_is_refused_before_and_while_connected(
    tmp_path: Path,
    mosquitto: BrokerFactory,
    subscriber: Callable[..., Subscriber],
    run_daemon: Callable[..., Daemon],
) -> None:
    """One retained before the controller connects, one
    retained while it is connected (the case that used to be applied), and
    an ordinary one that is applied; no protocol in the config: MQTT 5 is
    the default."""
    broker = mosquitto()
    sup = subscriber(broker, ["baccarat/T01/cmd/reply"])
    sup.publish(
        "baccarat/T01/cmd",
        json.dumps(stamp({"id": "before", "cmd": "new_shoe"}, "T01", time.time())),
        retain=True,
    )
    with structlog.testing.capture_logs() as logs:
        daemon = run_daemon(broker)
    assert daemon.cfg.outputs.mqtt is not None and daemon.cfg.outputs.mqtt.protocol == "5"
    assert not [e for e in logs if e["event"] == "weaker command protection"]
    sup.publish(
        "baccarat/T01/cmd",
        json.dumps(stamp({"id": "live", "cmd": "new_shoe"}, "T01", time.time())),
        retain=True,
    )
    sup.publish("baccarat/T01/cmd", json.dumps(stamp({"id": "plain", "cmd": "end_shoe"}, "T01", time.time())))
    assert sup.wait_for(lambda ms: len(ms) >= 3, 30)
    got = {r["id"]: r for r in (json.loads(m.payload) for m in sup.messages)}
    retained = "retained commands are refused; publish without retain"
    assert got["before"] == {"id": "before", "ok": False, "error": retained}
    assert got["live"] == {"id": "live", "ok": False, "error": retained}
    assert got["plain"]["ok"] is True
    assert daemon.journal is not None
    applied = [json.loads(r.data)["id"] for r in daemon.journal.inputs_since(0) if r.kind == "cmd"]
    assert applied == ["plain"]


@pytest.mark.mqtt
def test_with_mqtt_3_1_1_a_command_without_a_fresh_ts_or_taken_before_is_refused(
    mosquitto: BrokerFactory,
    subscriber: Callable[..., Subscriber],
    run_daemon: Callable[..., Daemon],
) -> None:
    """MQTT 3.1.1 cannot show a live retained command's flag: what keeps a
    retained copy from acting again is that every command needs a fresh
    ``ts`` and is taken once."""
    broker = mosquitto()
    sup = subscriber(broker, ["baccarat/T01/cmd/reply"])
    with structlog.testing.capture_logs() as logs:
        run_daemon(broker, protocol="3.1.1")
    # the daemon says at start what 3.1.1 cannot guarantee
    (warning,) = [e for e in logs if e["event"] == "weaker command protection"]
    assert warning["log_level"] == "warning" and "retained" in warning["detail"]
    fresh = stamp({"id": "once", "cmd": "end_shoe"}, "T01", time.time())
    for cmd in (
        {"id": "no-ts", "cmd": "end_shoe"},
        stamp({"id": "old", "cmd": "end_shoe"}, "T01", time.time() - 301),
        stamp({"id": "other-table", "cmd": "end_shoe"}, "T02", time.time()),
        fresh,
        fresh,
    ):
        sup.publish("baccarat/T01/cmd", json.dumps(cmd))
    assert sup.wait_for(lambda ms: len(ms) >= 5, 30)
    got = [(r["id"], r["ok"], r["error"]) for r in (json.loads(m.payload) for m in sup.messages)]
    assert [(i, ok) for i, ok, _ in got] == [
        ("no-ts", False),
        ("old", False),
        ("other-table", False),
        ("once", True),
        ("once", False),
    ]
    assert "without 'ts'" in got[0][2] and "stale" in got[1][2] and "table 'T02'" in got[2][2]
    assert got[4][2] == "replayed command: already taken"
