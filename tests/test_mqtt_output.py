"""The MQTT contract (docs/operations.md, MQTT) against a real mosquitto: topics,
QoS 1, retained status / state / roads / odds, the Last Will, delivery only
on PUBACK with nothing lost or reordered across a broker outage, commands
and their replies, TLS, and the shipped broker config's ACL."""

from __future__ import annotations

import json
import logging
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.reasoncodes import ReasonCode

from controller.commands_schema import Command, command_dict
from controller.config import MqttConfig
from controller.journal import Journal
from controller.outputs.mqtt import MqttOutput, event_topic
from tests.conftest import (
    Broker,
    BrokerFactory,
    Certs,
    Received,
    Subscriber,
    eventually,
    mqtt_client,
    need_tool,
)

pytestmark = pytest.mark.mqtt

REPO = Path(__file__).resolve().parent.parent
TABLE = "T01"
PREFIX = "baccarat/T01"
SubscriberFactory = Callable[..., Subscriber]
#: MQTT 5 is the default; 3.1.1 stays selectable for old brokers, and the
#: delivery guarantees are tested under both.
PROTOCOLS = ["5", "3.1.1"]


def event(seq: int, type_: str = "card", **payload: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "v": 1,
        "type": type_,
        "event_id": f"T01/20261122T065611Z/{seq}",
        "table": TABLE,
        "shoe": "20261122T065611Z",
        "seq": seq,
        "ts": "2026-11-22T06:56:11.125Z",
    }
    ev.update(payload)
    return ev


def cards(first: int, last: int) -> list[dict[str, Any]]:
    return [event(seq, "card", coup=1, position="P1", card="QS") for seq in range(first, last + 1)]


def seqs_of(messages: list[Received]) -> list[int]:
    """Event seqs in arrival order (status, state and retained copies excluded)."""
    out = []
    for m in messages:
        if m.topic.endswith(("/status", "/shoe/state", "/odds")) or "/cmd" in m.topic:
            continue
        out.append(json.loads(m.payload)["seq"])
    return out


def first_seen(values: list[int]) -> list[int]:
    """Values in order of first arrival (at-least-once: a resend may repeat one)."""
    return list(dict.fromkeys(values))


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "journal.sqlite3")


@pytest.fixture
def start_output(journal: Journal) -> Iterator[Callable[..., MqttOutput]]:
    """Factory: an MqttOutput on ``broker``, started; stopped after the test."""
    started: list[MqttOutput] = []

    def start(broker: Broker, *, on_command: Any = None, **cfg: Any) -> MqttOutput:
        """``on_command`` is given each command parsed (the handler the
        output calls gets it with the bytes received, ``Received``)."""
        config = MqttConfig.model_validate({"host": broker.host, "port": broker.port, **cfg})
        handler = None if on_command is None else lambda r: on_command(r.cmd)
        out = MqttOutput(config, TABLE, journal, on_command=handler, poll_interval=0.1)
        out.start()
        started.append(out)
        return out

    yield start
    for out in started:
        out.stop(timeout=2)


class Rig(NamedTuple):
    """What most tests here set up: brokers, subscribers, the table's
    journal and its MQTT outputs (each a fixture of its own)."""

    mosquitto: BrokerFactory
    subscriber: SubscriberFactory
    journal: Journal
    start_output: Callable[..., MqttOutput]

    def connected(self, topics: list[str]) -> tuple[Broker, Subscriber, MqttOutput]:
        """A fresh broker, a subscriber on ``topics`` and a started output
        connected to the broker."""
        broker = self.mosquitto()
        sub = self.subscriber(broker, topics)
        out = self.start_output(broker)
        assert eventually(lambda: out.connected)
        return broker, sub, out


@pytest.fixture
def rig(
    mosquitto: BrokerFactory,
    subscriber: SubscriberFactory,
    journal: Journal,
    start_output: Callable[..., MqttOutput],
) -> Rig:
    return Rig(mosquitto, subscriber, journal, start_output)


def wait_delivered(out: MqttOutput) -> None:
    assert out.wait_idle(20), f"backlog {out.backlog()} not delivered"


# --- events ------------------------------------------------------------------


def test_events_go_out_in_order_with_qos_1_unretained_on_their_type_topics(rig: Rig) -> None:
    mosquitto, subscriber, journal, start_output = rig
    broker = mosquitto()
    sub = subscriber(broker, [f"{PREFIX}/#"])
    journal.append_events(
        [
            event(1, "shoe.started", decks=8, profile="punto_banco", shuffle_commit=None),
            *cards(2, 5),
            event(6, "coup.result", coup=1, winner="banker"),
            event(7, "security.alert", code="FOREIGN_CARD", detail="", coup=1),
        ]
    )
    out = start_output(broker)
    wait_delivered(out)
    assert sub.wait_for(lambda ms: len(seqs_of(ms)) >= 7)
    events = [m for m in sub.messages if m.topic != f"{PREFIX}/status"]
    assert [m.topic for m in events] == [
        f"{PREFIX}/shoe/started",
        *[f"{PREFIX}/card"] * 4,
        f"{PREFIX}/coup/result",
        f"{PREFIX}/security/alert",
    ]
    assert seqs_of(events) == list(range(1, 8))
    assert all(m.qos == 1 and not m.retain for m in events)
    assert json.loads(events[5].payload) == event(6, "coup.result", coup=1, winner="banker")
    assert journal.mark("mqtt") == 7


def test_event_topic_replaces_dots_with_levels() -> None:
    assert event_topic("baccarat", "T01", "coup.result") == "baccarat/T01/coup/result"
    assert event_topic("casino/floor2", "T9", "card") == "casino/floor2/T9/card"


def test_events_appended_while_running_are_sent_after_the_earlier_ones(rig: Rig) -> None:
    mosquitto, subscriber, journal, start_output = rig
    broker = mosquitto()
    sub = subscriber(broker, [f"{PREFIX}/card"])
    out = start_output(broker)
    for first in range(1, 200, 20):  # more than the in-flight window
        journal.append_events(cards(first, first + 19))
        out.notify()
    wait_delivered(out)
    assert sub.wait_for(lambda ms: len(first_seen(seqs_of(ms))) >= 200)
    assert first_seen(seqs_of(sub.messages)) == list(range(1, 201))


def test_events_handed_over_by_the_committing_thread_never_overtake_a_backlog(rig: Rig) -> None:
    # ``deliver`` publishes from the caller only what is next in line; a
    # commit it was not told of, or a batch over the window, leaves a
    # backlog that the sender sends first: every event once, in seq order.
    journal = rig.journal
    _, sub, out = rig.connected([f"{PREFIX}/card"])
    seq = 0
    for i in range(60):
        size = 25 if i % 10 == 9 else 1  # more than the window (20) now and then
        journal.append_events(cards(seq + 1, seq + size))
        seq += size
        if i % 7 == 3:
            out.notify()  # not handed over: the next hand-over finds a backlog
        else:
            out.deliver(journal.last_stored)
    wait_delivered(out)
    assert sub.wait_for(lambda ms: len(seqs_of(ms)) >= seq)
    assert seqs_of(sub.messages) == list(range(1, seq + 1))
    assert journal.mark("mqtt") == seq


def test_events_handed_over_while_the_broker_is_away_wait_in_the_journal(rig: Rig) -> None:
    mosquitto, subscriber, journal, start_output = rig
    broker = mosquitto(persistence=True)
    sub = subscriber(broker, [f"{PREFIX}/card"], client_id="handover-watcher", clean=False)
    out = start_output(broker)
    journal.append_events(cards(1, 5))
    out.deliver(journal.last_stored)
    wait_delivered(out)
    broker.stop()
    for s in range(6, 31):
        journal.append_events(cards(s, s))
        out.deliver(journal.last_stored)  # returns at once: nothing blocks
    assert out.backlog() > 0
    broker.start()
    wait_delivered(out)
    assert sub.wait_for(lambda ms: set(seqs_of(ms)) >= set(range(1, 31)), timeout=30)
    assert first_seen(seqs_of(sub.messages)) == list(range(1, 31))
    assert journal.mark("mqtt") == 30


def test_a_restarted_output_resumes_after_its_mark_without_resending(rig: Rig) -> None:
    mosquitto, subscriber, journal, start_output = rig
    broker = mosquitto()
    journal.append_events(cards(1, 5))
    first = start_output(broker)
    wait_delivered(first)
    first.stop()
    sub = subscriber(broker, [f"{PREFIX}/card"])
    journal.append_events(cards(6, 8))
    wait_delivered(start_output(broker))
    assert sub.wait_for(lambda ms: len(ms) >= 3)
    assert seqs_of(sub.messages) == [6, 7, 8]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_events_wait_in_the_journal_while_the_broker_is_away_and_none_are_lost(
    rig: Rig,
    protocol: str,
) -> None:
    # The broker keeps the subscriber's session across its restart, so what
    # the subscriber receives is exactly what the publisher delivered. The
    # controller's own session is clean (MQTT 5: clean start, expiry 0): its
    # events survive the restart in the journal, not on the broker.
    mosquitto, subscriber, journal, start_output = rig
    broker = mosquitto(persistence=True)
    sub = subscriber(broker, [f"{PREFIX}/card"], client_id="outage-watcher", clean=False)
    out = start_output(broker, protocol=protocol)
    journal.append_events(cards(1, 10))
    wait_delivered(out)

    broker.stop()
    journal.append_events(cards(11, 60))  # dealing goes on: nothing blocks
    out.notify()
    assert out.backlog() > 0 and journal.last_seq() == 60

    broker.start()
    wait_delivered(out)
    assert sub.wait_for(lambda ms: set(seqs_of(ms)) >= set(range(1, 61)), timeout=30)
    assert first_seen(seqs_of(sub.messages)) == list(range(1, 61))
    assert journal.mark("mqtt") == 60


def test_after_a_long_outage_the_reconnect_backoff_stays_capped_and_everything_is_delivered(rig: Rig) -> None:
    # The outage is measured in failed connection attempts, not in seconds.
    # With the old backoff (1, 2, 4, 8, 16, then 30 s) five failures took
    # 31 s and the broker, once back, waited up to 30 s more for the next
    # attempt; capped (1, 2, 2, 2, 2 s) they take 9 s and the next is <= 2 s
    # away. The generous timeouts below only stop a hung test.
    mosquitto, subscriber, journal, start_output = rig
    broker = mosquitto(persistence=True)
    sub = subscriber(broker, [f"{PREFIX}/card"], client_id="backoff-watcher", clean=False)
    out = start_output(broker)
    journal.append_events(cards(1, 5))
    wait_delivered(out)

    broker.stop()
    assert eventually(lambda: out.connect_failures >= 5, timeout=25), out.connect_failures
    journal.append_events(cards(6, 40))
    out.notify()
    assert out.backlog() == 35
    broker.start()
    assert eventually(lambda: out.connected, timeout=8), "not reconnected within the capped backoff"
    wait_delivered(out)
    assert sub.wait_for(lambda ms: set(seqs_of(ms)) >= set(range(1, 41)), timeout=30)
    assert first_seen(seqs_of(sub.messages)) == list(range(1, 41))


# --- retained topics and availability -----------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_status_is_retained_online_and_the_last_will_says_offline_when_the_publisher_is_killed(
    mosquitto: BrokerFactory, subscriber: SubscriberFactory, tmp_path: Path, protocol: str
) -> None:
    broker = mosquitto()
    cfg = json.dumps({"host": broker.host, "port": broker.port, "protocol": protocol})
    publisher = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "tests" / "support" / "mqtt_publisher.py"),
            str(tmp_path / "j.sqlite3"),
            TABLE,
            cfg,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert publisher.stdout is not None and publisher.stdout.readline().strip() == "connected"
        # connected is not yet published: once a first subscriber has the
        # status (live or retained), the broker holds it, and a later one
        # gets it retained (it came live, unretained, on a loaded machine)
        first = subscriber(broker, [f"{PREFIX}/status"])
        assert first.wait_for(lambda ms: any(m.text == "online" for m in ms))
        late = subscriber(broker, [f"{PREFIX}/status"])
        assert late.wait_for(lambda ms: any(m.text == "online" for m in ms))
        assert [(m.text, m.retain, m.qos) for m in late.messages] == [("online", True, 1)]

        publisher.send_signal(signal.SIGKILL)
        publisher.wait()
        assert late.wait_for(lambda ms: any(m.text == "offline" for m in ms))
        later = subscriber(broker, [f"{PREFIX}/status"])
        assert later.wait_for(lambda ms: len(ms) > 0)
        assert [(m.text, m.retain) for m in later.messages] == [("offline", True)]
    finally:
        publisher.kill()
        publisher.wait()


def test_clean_stop_leaves_status_offline(
    mosquitto: BrokerFactory, subscriber: SubscriberFactory, start_output: Callable[..., MqttOutput]
) -> None:
    broker = mosquitto()
    out = start_output(broker)
    sub = subscriber(broker, [f"{PREFIX}/status"])
    assert sub.wait_for(lambda ms: any(m.text == "online" for m in ms))
    out.stop()
    assert sub.wait_for(lambda ms: ms[-1].text == "offline")


def test_shoe_state_is_retained_and_only_the_latest_counts(
    mosquitto: BrokerFactory, subscriber: SubscriberFactory, start_output: Callable[..., MqttOutput]
) -> None:
    broker = mosquitto()
    out = start_output(broker)
    watcher = subscriber(broker, [f"{PREFIX}/shoe/state"])
    out.publish_state({"table": TABLE, "shoe": "S1", "coup": 1, "cards_left": 410})
    assert watcher.wait_for(lambda ms: len(ms) >= 1)
    out.publish_state({"table": TABLE, "shoe": "S1", "coup": 2, "cards_left": 405})
    assert watcher.wait_for(lambda ms: any(json.loads(m.payload)["coup"] == 2 for m in ms))
    late = subscriber(broker, [f"{PREFIX}/shoe/state"])
    assert late.wait_for(lambda ms: len(ms) >= 1)
    assert [(json.loads(m.payload)["coup"], m.retain) for m in late.messages] == [(2, True)]


def test_roads_and_odds_are_retained_and_also_sent_as_events(rig: Rig) -> None:
    mosquitto, subscriber, journal, start_output = rig
    broker = mosquitto()
    live = subscriber(broker, [f"{PREFIX}/#"])
    roads = event(
        1, "roads", bead_plate=[["B"]], big_road=[["B"]], big_eye_boy=[], small_road=[], cockroach_pig=[]
    )
    odds = event(2, "odds.update", coup=2, cards_left=410, bets={}, view="shoe")
    journal.append_events([roads, odds])
    wait_delivered(start_output(broker))
    assert live.wait_for(
        lambda ms: {m.topic for m in ms} >= {f"{PREFIX}/roads", f"{PREFIX}/odds/update", f"{PREFIX}/odds"}
    )
    # roads' event topic is its retained topic: one message, not two.
    assert len(live.on(f"{PREFIX}/roads")) == 1
    assert [json.loads(m.payload) for m in live.on(f"{PREFIX}/odds/update")] == [odds]

    late = subscriber(broker, [f"{PREFIX}/roads", f"{PREFIX}/odds", f"{PREFIX}/odds/update"])
    assert late.wait_for(lambda ms: len(ms) >= 2)
    retained = {m.topic: json.loads(m.payload) for m in late.messages if m.retain}
    assert retained == {f"{PREFIX}/roads": roads, f"{PREFIX}/odds": odds}
    assert late.on(f"{PREFIX}/odds/update") == []  # the event itself is not retained


# --- commands ------------------------------------------------------------------


def replies(sub: Subscriber) -> list[dict[str, Any]]:
    return [json.loads(m.payload) for m in sub.on(f"{PREFIX}/cmd/reply")]


def test_a_valid_command_reaches_the_handler_and_its_reply_goes_to_cmd_reply(
    mosquitto: BrokerFactory, subscriber: SubscriberFactory, start_output: Callable[..., MqttOutput]
) -> None:
    broker = mosquitto()
    received: list[dict[str, Any]] = []
    holder: list[MqttOutput] = []

    def handler(cmd: Command) -> None:
        received.append(command_dict(cmd))
        holder[0].reply({"id": cmd.id, "ok": True, "error": None})

    holder.append(start_output(broker, on_command=handler))
    supervisor = subscriber(broker, [f"{PREFIX}/cmd/reply"])
    assert eventually(lambda: holder[0].ready)
    supervisor.publish(
        f"{PREFIX}/cmd", json.dumps({"id": "c1", "cmd": "void", "coup": 4, "reason": "dealer error"})
    )
    assert supervisor.wait_for(lambda ms: len(ms) >= 1)
    assert received == [{"id": "c1", "cmd": "void", "coup": 4, "reason": "dealer error"}]
    assert replies(supervisor) == [{"id": "c1", "ok": True, "error": None}]


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"id": "c2", "cmd": "shuffle"}', "unknown cmd 'shuffle'"),
        (b'{"id": "c3", "cmd": "enter_card", "coup": 2}', "enter_card: missing 'card'"),
    ],
)
def test_a_malformed_command_gets_an_error_reply_and_changes_nothing(
    mosquitto: BrokerFactory,
    subscriber: SubscriberFactory,
    start_output: Callable[..., MqttOutput],
    payload: bytes,
    error: str,
) -> None:
    broker = mosquitto()
    received: list[Command] = []
    out = start_output(broker, on_command=received.append)
    assert eventually(lambda: out.ready)
    supervisor = subscriber(broker, [f"{PREFIX}/cmd/reply"])
    supervisor.publish(f"{PREFIX}/cmd", payload)
    assert supervisor.wait_for(lambda ms: len(ms) >= 1)
    (reply,) = replies(supervisor)
    assert reply["ok"] is False and error in reply["error"]
    assert reply["id"] == (None if payload.startswith(b"{not") else json.loads(payload)["id"])
    assert received == []


RETAINED = "retained commands are refused; publish without retain"


@pytest.mark.parametrize("protocol", ["3.1.1", "5"])
def test_a_command_retained_before_the_controller_connects_is_refused(
    mosquitto: BrokerFactory,
    subscriber: SubscriberFactory,
    start_output: Callable[..., MqttOutput],
    protocol: str,
) -> None:
    broker = mosquitto()
    supervisor = subscriber(broker, [f"{PREFIX}/cmd/reply"])
    supervisor.publish(f"{PREFIX}/cmd", json.dumps({"id": "old", "cmd": "new_shoe"}), retain=True)
    received: list[Command] = []
    start_output(broker, on_command=received.append, protocol=protocol)
    assert supervisor.wait_for(lambda ms: len(ms) >= 1)
    (reply,) = replies(supervisor)
    assert reply == {"id": "old", "ok": False, "error": RETAINED}
    assert received == []


def test_a_command_retained_while_the_controller_is_connected_is_refused_with_the_default_config(
    mosquitto: BrokerFactory, subscriber: SubscriberFactory, start_output: Callable[..., MqttOutput]
) -> None:
    """A live subscriber sees the retain flag cleared,
    unless it subscribed "retain as published" (MQTT 5), as the output does
    with the default config."""
    broker = mosquitto()
    received: list[Command] = []
    out = start_output(broker, on_command=received.append)  # no protocol: the default
    assert out._cfg.protocol == "5"
    assert eventually(lambda: out.ready)
    supervisor = subscriber(broker, [f"{PREFIX}/cmd/reply"])
    supervisor.publish(f"{PREFIX}/cmd", json.dumps({"id": "live", "cmd": "new_shoe"}), retain=True)
    supervisor.publish(f"{PREFIX}/cmd", json.dumps({"id": "plain", "cmd": "new_shoe"}))
    assert supervisor.wait_for(lambda ms: len(ms) >= 1)
    assert eventually(lambda: len(received) == 1)
    assert replies(supervisor) == [{"id": "live", "ok": False, "error": RETAINED}]
    assert [c.id for c in received] == ["plain"], "only the unretained one reaches the handler"


def test_with_mqtt_3_1_1_a_command_retained_while_connected_reaches_the_handler_once(
    mosquitto: BrokerFactory, subscriber: SubscriberFactory, start_output: Callable[..., MqttOutput]
) -> None:
    """What 3.1.1 cannot guarantee, as docs/operations.md says: the broker clears the
    flag on live delivery, so the output cannot tell the retained command
    from a plain one; the copy delivered on the next (re)subscription shows
    the flag and is refused. (The daemon's fresh-ts and once-only checks stop
    a copy from acting again: tests/test_command_bounds.py.)"""
    broker = mosquitto()
    received: list[Command] = []
    out = start_output(broker, on_command=received.append, protocol="3.1.1")
    assert eventually(lambda: out.ready)
    supervisor = subscriber(broker, [f"{PREFIX}/cmd/reply"])
    supervisor.publish(f"{PREFIX}/cmd", json.dumps({"id": "live", "cmd": "new_shoe"}), retain=True)
    assert eventually(lambda: len(received) == 1)
    assert [c.id for c in received] == ["live"]
    out.stop(timeout=2)
    again = start_output(broker, on_command=received.append, protocol="3.1.1")
    assert eventually(lambda: again.ready)
    assert supervisor.wait_for(lambda ms: len(ms) >= 1)
    assert replies(supervisor) == [{"id": "live", "ok": False, "error": RETAINED}]
    assert [c.id for c in received] == ["live"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_command_sent_while_the_controller_is_away_is_not_delivered_when_it_returns(
    mosquitto: BrokerFactory,
    subscriber: SubscriberFactory,
    start_output: Callable[..., MqttOutput],
    protocol: str,
) -> None:
    """A clean session on every connect (MQTT 5: clean start, session expiry
    0): the broker queues nothing for the controller while it is away, so an
    old command is never acted on when it comes back."""
    broker = mosquitto()
    received: list[Command] = []
    first = start_output(broker, on_command=received.append, protocol=protocol)
    assert eventually(lambda: first.ready)
    first.stop(timeout=2)
    supervisor = subscriber(broker, [f"{PREFIX}/cmd/reply"])
    supervisor.publish(f"{PREFIX}/cmd", json.dumps({"id": "while-away", "cmd": "new_shoe"}))
    second = start_output(broker, on_command=received.append, protocol=protocol)  # same client id
    assert eventually(lambda: second.ready)
    supervisor.publish(f"{PREFIX}/cmd", json.dumps({"id": "after", "cmd": "new_shoe"}))
    assert eventually(lambda: len(received) >= 1)
    assert [c.id for c in received] == ["after"]


def test_messages_over_the_admit_limit_are_dropped_unread(
    mosquitto: BrokerFactory, subscriber: SubscriberFactory, start_output: Callable[..., MqttOutput]
) -> None:
    """The owner's rate limit sees every message on the command topic,
    well-formed or not, before it is parsed; one it refuses gets no reply."""
    broker = mosquitto()
    tokens = [True, True, False, False, True]
    received: list[Command] = []
    config = MqttConfig.model_validate({"host": broker.host, "port": broker.port})
    out = MqttOutput(
        config,
        TABLE,
        Journal(broker.directory / "j.sqlite3"),
        on_command=lambda r: received.append(r.cmd),
        admit=lambda: tokens.pop(0),
        poll_interval=0.1,
    )
    out.start()
    try:
        assert eventually(lambda: out.ready)
        supervisor = subscriber(broker, [f"{PREFIX}/cmd/reply"])
        for payload in (b'{"id": 1, "cmd": "new_shoe"}', b"{junk", b'{"id": 3, "cmd": "new_shoe"}', b"{junk"):
            supervisor.publish(f"{PREFIX}/cmd", payload)
        supervisor.publish(f"{PREFIX}/cmd", b'{"id": 5, "cmd": "end_shoe"}')
        assert eventually(lambda: [c.id for c in received] == [1, 5])
        assert supervisor.wait_for(lambda ms: len(ms) >= 1)
        assert [r["id"] for r in replies(supervisor)] == [None], "only the admitted bad one is answered"
        assert tokens == []
    finally:
        out.stop(timeout=2)


# --- protocol 5, TLS, and the shipped broker config -------------------------------


def test_mqtt_3_1_1_delivers_the_same_events(rig: Rig) -> None:
    mosquitto, subscriber, journal, start_output = rig
    broker = mosquitto()
    sub = subscriber(broker, [f"{PREFIX}/card"])
    journal.append_events(cards(1, 30))
    wait_delivered(start_output(broker, protocol="3.1.1"))
    assert sub.wait_for(lambda ms: len(ms) >= 30)
    assert first_seen(seqs_of(sub.messages)) == list(range(1, 31))


def tls_broker(mosquitto: BrokerFactory, certs: Certs, extra: str = "") -> Broker:
    """A Mosquitto listening with TLS only (the throwaway CA's server
    certificate), anonymous clients allowed; ``extra``: more config lines."""
    return mosquitto(
        config=(
            "listener @PORT@ 127.0.0.1\nallow_anonymous true\n"
            f"cafile {certs.path('ca.crt')}\n"
            f"certfile {certs.path('server.crt')}\n"
            f"keyfile {certs.path('server.key')}\n"
            f"{extra}"
        )
    )


def test_tls_with_a_client_certificate_delivers_events(
    rig: Rig,
    certs: Certs,
) -> None:
    mosquitto, journal, start_output = rig.mosquitto, rig.journal, rig.start_output
    broker = tls_broker(mosquitto, certs, "require_certificate true\n")
    journal.append_events(cards(1, 5))
    out = start_output(
        broker,
        tls={
            "ca_file": certs.path("ca.crt"),
            "cert_file": certs.path("client.crt"),
            "key_file": certs.path("client.key"),
        },
    )
    wait_delivered(out)
    assert journal.mark("mqtt") == 5


def shipped_broker(mosquitto: BrokerFactory, certs: Certs, tmp_path: Path) -> Broker:
    """mosquitto running deploy/mosquitto/ with only paths, port and user
    replaced: test users shoe-T01, shoe-T02, supervisor and archive with known passwords."""
    passwd_tool = need_tool("mosquitto_passwd")
    passwd = tmp_path / "passwd"
    passwd.touch(mode=0o600)
    for user in ("shoe-T01", "supervisor", "shoe-T02", "archive"):
        subprocess.run([passwd_tool, "-b", str(passwd), user, f"pw-{user}"], check=True, capture_output=True)
    acl = tmp_path / "acl"
    shutil.copy(REPO / "deploy" / "mosquitto" / "acl", acl)
    replace = {
        "password_file": str(passwd),
        "acl_file": str(acl),
        "cafile": certs.path("ca.crt"),
        "certfile": certs.path("server.crt"),
        "keyfile": certs.path("server.key"),
    }
    lines = []
    for line in (REPO / "deploy" / "mosquitto" / "mosquitto.conf").read_text().splitlines():
        key = line.split(" ", 1)[0]
        if key in replace:
            line = f"{key} {replace[key]}"
        elif re.fullmatch(r"listener \d+", line):
            line = "listener @PORT@ 127.0.0.1"
        elif key in ("persistence", "persistence_location", "autosave_interval"):
            continue  # the fixture decides
        lines.append(line)
    return mosquitto(config="\n".join(lines))


@pytest.fixture
def acl_broker(mosquitto: BrokerFactory, certs: Certs, tmp_path: Path) -> Broker:
    return shipped_broker(mosquitto, certs, tmp_path)


def test_ctl_says_at_once_when_the_broker_refuses_its_command(
    acl_broker: Broker, certs: Certs, subscriber: SubscriberFactory, tmp_path: Path
) -> None:
    """MQTT 5 (the default) gives the ACL's "not authorized" in the PUBACK:
    ``ctl`` run with a table controller's credentials (not allowed to publish
    commands) exits 1 with that reason instead of waiting for a reply that
    cannot come."""
    ca = certs.path("ca.crt")
    watcher = subscriber(
        acl_broker, [f"{PREFIX}/cmd"], username="supervisor", password="pw-supervisor", ca_file=ca
    )
    # the table's controller is online (ctl says so at once, and sends nothing, when none is)
    table, _ = mqtt_client(acl_broker, username="shoe-T01", password="pw-shoe-T01", ca_file=ca)
    table.publish(f"{PREFIX}/status", "online", qos=1, retain=True).wait_for_publish(10)
    table.disconnect()
    table.loop_stop()
    password_file = tmp_path / "pass"
    password_file.write_text("pw-shoe-T01\n")
    password_file.chmod(0o600)
    cfg = tmp_path / "ctl.yaml"
    cfg.write_text(
        json.dumps(
            {
                "table": TABLE,
                "device": {"driver": "fake"},
                "outputs": {
                    "mqtt": {
                        "host": acl_broker.host,
                        "port": acl_broker.port,
                        "username": "shoe-T01",
                        "password_file": str(password_file),
                        "tls": {"ca_file": ca},
                    }
                },
            }
        )
    )
    r = subprocess.run(
        [sys.executable, "-m", "controller.cli", "ctl", "new-shoe", "-c", str(cfg), "--timeout", "60"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert "the broker refused the command" in line and "not authorized" in line.lower()
    assert watcher.messages == [], "the broker dropped it"


def test_shipped_broker_config_refuses_an_anonymous_client(acl_broker: Broker, certs: Certs) -> None:
    _, rc = mqtt_client(acl_broker, ca_file=certs.path("ca.crt"), host="localhost")
    assert rc is not None and rc.is_failure and "authori" in str(rc).lower()
    _, rc = mqtt_client(acl_broker, username="shoe-T01", password="wrong", ca_file=certs.path("ca.crt"))
    assert rc is not None and rc.is_failure


def test_shipped_acl_drops_a_table_users_command_and_passes_a_supervisors(
    acl_broker: Broker, certs: Certs, subscriber: SubscriberFactory
) -> None:
    ca = certs.path("ca.crt")
    watcher = subscriber(
        acl_broker, [f"{PREFIX}/#"], username="supervisor", password="pw-supervisor", ca_file=ca
    )
    # MQTT 5, as the daemon connects: Mosquitto 2.0 answers a denied QoS 1
    # publish with a PUBACK carrying "not authorized", which an MQTT 3.1.1
    # client may take for a malformed packet and drop its connection over
    acks: list[ReasonCode] = []
    table, rc = mqtt_client(
        acl_broker, username="shoe-T01", password="pw-shoe-T01", ca_file=ca, protocol=mqtt.MQTTv5
    )
    assert rc is not None and not rc.is_failure
    table.on_publish = lambda c, u, mid, reason, props: acks.append(reason)
    table.publish(f"{PREFIX}/cmd", '{"id":"forged","cmd":"end_shoe"}', qos=1).wait_for_publish(10)
    assert [str(r) for r in acks] == ["Not authorized"], acks
    table.publish(f"{PREFIX}/card", "after-forged", qos=1).wait_for_publish(10)
    # In-order delivery: had the forged command passed, it would be here first.
    assert watcher.wait_for(lambda ms: any(m.payload == b"after-forged" for m in ms))
    assert watcher.on(f"{PREFIX}/cmd") == []

    other, _ = mqtt_client(
        acl_broker, username="shoe-T02", password="pw-shoe-T02", ca_file=ca, protocol=mqtt.MQTTv5
    )
    other.publish(f"{PREFIX}/card", "T02-posing-as-T01", qos=1).wait_for_publish(10)
    supervisor = Subscriber(
        mqtt_client(acl_broker, username="supervisor", password="pw-supervisor", ca_file=ca)[0]
    )
    supervisor.publish(f"{PREFIX}/cmd", '{"id":"s1","cmd":"new_shoe"}')
    assert watcher.wait_for(lambda ms: len(watcher.on(f"{PREFIX}/cmd")) == 1)
    assert [m.payload for m in watcher.on(f"{PREFIX}/card")] == [b"after-forged"]
    for c in (table, other):
        c.disconnect()
        c.loop_stop()
    supervisor.stop()


def test_the_controller_delivers_and_takes_commands_through_the_shipped_config(
    acl_broker: Broker,
    certs: Certs,
    subscriber: SubscriberFactory,
    journal: Journal,
    start_output: Callable[..., MqttOutput],
    tmp_path: Path,
) -> None:
    ca = certs.path("ca.crt")
    password_file = tmp_path / "mqtt.pass"
    password_file.write_text("pw-shoe-T01\n")
    password_file.chmod(0o600)
    watcher = subscriber(
        acl_broker, [f"{PREFIX}/#"], username="supervisor", password="pw-supervisor", ca_file=ca
    )
    received: list[Command] = []
    journal.append_events(cards(1, 3))
    out = start_output(
        acl_broker,
        on_command=received.append,
        username="shoe-T01",
        password_file=str(password_file),
        tls={"ca_file": ca},
    )
    wait_delivered(out)
    assert watcher.wait_for(lambda ms: len(seqs_of(ms)) >= 3)
    assert [m.text for m in watcher.on(f"{PREFIX}/status")] == ["online"]
    assert eventually(lambda: out.ready)
    watcher.publish(f"{PREFIX}/cmd", '{"id":"s2","cmd":"end_shoe"}')
    assert watcher.wait_for(lambda ms: len(received) == 1)
    assert [command_dict(c) for c in received] == [{"id": "s2", "cmd": "end_shoe"}]


# --- delivery means PUBACK ---------------------------------------------------------


class SilentBroker:
    """Just enough of an MQTT 3.1.1 / 5 broker to accept one client and
    record its PUBLISH packets without acknowledging them, until told to: the
    test decides which PUBACKs the controller gets. (MQTT 5 adds a property
    length after the variable header of CONNACK, SUBACK and PUBLISH; a PUBACK
    of two bytes means success in both.)"""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self.publishes: list[tuple[str, int, bytes]] = []  # (topic, packet id, payload)
        self.conn: socket.socket | None = None
        self.v5 = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _read_packet(self, conn: socket.socket) -> tuple[int, bytes]:
        header = conn.recv(1)
        if not header:
            raise ConnectionError
        length, shift = 0, 0
        while True:
            byte = conn.recv(1)[0]
            length += (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        body = b""
        while len(body) < length:
            chunk = conn.recv(length - len(body))
            if not chunk:
                raise ConnectionError
            body += chunk
        return header[0], body

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        self.conn = conn
        try:
            while True:
                kind, body = self._read_packet(conn)
                if kind >> 4 == 1:  # CONNECT: "\x00\x04MQTT", then the protocol level
                    self.v5 = body[6] == 5
                    conn.sendall(b"\x20\x03\x00\x00\x00" if self.v5 else b"\x20\x02\x00\x00")
                elif kind >> 4 == 8:  # SUBSCRIBE: grant QoS 1
                    if self.v5:
                        conn.sendall(b"\x90\x04" + body[:2] + b"\x00\x01")
                    else:
                        conn.sendall(b"\x90\x03" + body[:2] + b"\x01")
                elif kind >> 4 == 3:  # PUBLISH, QoS 1
                    n = int.from_bytes(body[:2], "big")
                    topic = body[2 : 2 + n].decode()
                    pid = int.from_bytes(body[2 + n : 4 + n], "big")
                    at = 4 + n
                    if self.v5:  # skip the properties (a variable-length count)
                        length, shift = 0, 0
                        while True:
                            byte = body[at]
                            at += 1
                            length += (byte & 0x7F) << shift
                            shift += 7
                            if not byte & 0x80:
                                break
                        at += length
                    self.publishes.append((topic, pid, body[at:]))
                elif kind >> 4 == 12:  # PINGREQ
                    conn.sendall(b"\xd0\x00")
        except (ConnectionError, OSError, IndexError):
            return

    def events(self) -> list[tuple[int, int]]:
        """(seq, packet id) of every event received so far."""
        return [(json.loads(p)["seq"], pid) for t, pid, p in list(self.publishes) if t.endswith("/card")]

    def puback(self, pid: int) -> None:
        assert self.conn is not None
        self.conn.sendall(b"\x40\x02" + pid.to_bytes(2, "big"))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.server.close()


@pytest.fixture
def silent_broker() -> Iterator[SilentBroker]:
    broker = SilentBroker()
    yield broker
    broker.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_event_counts_as_delivered_only_on_its_puback_and_the_mark_moves_over_a_contiguous_prefix(
    silent_broker: SilentBroker, journal: Journal, protocol: str
) -> None:
    config = MqttConfig.model_validate(
        {"host": "127.0.0.1", "port": silent_broker.port, "protocol": protocol}
    )
    out = MqttOutput(config, TABLE, journal, poll_interval=0.05, window=20)
    journal.append_events(cards(1, 50))
    out.start()
    try:
        assert eventually(lambda: len(silent_broker.events()) == 20)
        assert not eventually(lambda: len(silent_broker.events()) > 20, timeout=1.0)  # the window is full
        assert journal.mark("mqtt") == 0

        pid = dict(silent_broker.events())
        silent_broker.puback(pid[2])  # out of order: 1 is still unacknowledged
        assert not eventually(lambda: journal.mark("mqtt") > 0, timeout=1.0)
        silent_broker.puback(pid[1])
        assert eventually(lambda: journal.mark("mqtt") == 2)
        assert eventually(lambda: len(silent_broker.events()) == 22)  # two slots freed, two more sent
        assert [seq for seq, _ in silent_broker.events()] == list(range(1, 23))
        assert silent_broker.v5 is (protocol == "5")
    finally:
        out.stop(timeout=0.5)


def test_an_event_the_broker_refuses_mqtt_5_is_not_marked_delivered_and_is_sent_again(
    mosquitto: BrokerFactory,
    subscriber: SubscriberFactory,
    journal: Journal,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="controller.outputs.mqtt")
    passwd = tmp_path / "passwd"
    passwd.touch(mode=0o600)
    subprocess.run(
        [need_tool("mosquitto_passwd"), "-b", str(passwd), "u", "p"], check=True, capture_output=True
    )
    acl = tmp_path / "acl"
    acl.write_text("user u\ntopic readwrite baccarat/T01/status\ntopic readwrite baccarat/T01/coup/#\n")
    broker = mosquitto(
        config=f"listener @PORT@ 127.0.0.1\nallow_anonymous false\npassword_file {passwd}\nacl_file {acl}\n"
    )
    password_file = tmp_path / "pass"
    password_file.write_text("p\n")
    password_file.chmod(0o600)
    config = MqttConfig.model_validate(
        {
            "host": broker.host,
            "port": broker.port,
            "protocol": "5",
            "username": "u",
            "password_file": str(password_file),
        }
    )
    out = MqttOutput(config, TABLE, journal, poll_interval=0.05, retry_delay=0.2)
    journal.append_events([event(1, "coup.result", coup=1), *cards(2, 2), event(3, "coup.result", coup=2)])
    out.start()
    try:
        # 1 and 3 are accepted; 2 (a card: not allowed by this ACL) is refused
        # with "not authorized" every time it is sent. The mark stays at 1:
        # the events wait in the journal until the broker takes them.
        def refusals() -> int:
            return sum("refused event seq 2" in r.getMessage() for r in caplog.records)

        assert eventually(lambda: refusals() >= 2)
        assert "not authorized" in caplog.text.lower()
        assert journal.mark("mqtt") == 1
        assert out.backlog() == 2
    finally:
        out.stop(timeout=0.5)


def test_events_written_by_the_committing_thread_over_tls_arrive_once_in_order(
    rig: Rig,
    certs: Certs,
) -> None:
    # ``deliver`` writes the packets from the caller's thread
    # (``Client.direct``) while paho's network thread reads PUBACKs from
    # the same TLS socket: the shared I/O lock keeps one TLS operation at a
    # time and paho's queue order on the wire.
    mosquitto, subscriber, journal, start_output = rig
    broker = tls_broker(mosquitto, certs)
    sub = subscriber(broker, [f"{PREFIX}/card"], ca_file=certs.path("ca.crt"))
    out = start_output(broker, tls={"ca_file": certs.path("ca.crt")})
    assert eventually(lambda: out.connected)
    for seq in range(1, 301):
        journal.append_events(cards(seq, seq))
        out.deliver(journal.last_stored)
    wait_delivered(out)
    assert sub.wait_for(lambda ms: len(seqs_of(ms)) >= 300)
    assert seqs_of(sub.messages) == list(range(1, 301))
    assert journal.mark("mqtt") == 300


def _looping_client(broker: Any, client_id: str) -> tuple[Any, threading.Event]:
    """The project's paho client (``make_client``), connecting to ``broker``
    with paho's network thread started; the event is set once connected.
    The caller stops it (``loop_stop``, ``disconnect``)."""
    from controller.mqtt_client import make_client

    client = make_client(MqttConfig.model_validate({"host": broker.host, "port": broker.port}), client_id)
    connected = threading.Event()
    client.on_connect = lambda *a: connected.set()
    client.connect(broker.host, broker.port)
    client.loop_start()
    return client, connected


def test_write_now_leaves_the_packets_to_the_network_thread_while_it_holds_the_io_lock(
    mosquitto: BrokerFactory, subscriber: SubscriberFactory
) -> None:
    # A reconnect holds paho's I/O for seconds: the daemon's loop must not
    # wait for it. ``write_now`` gives up after its short wait, and the
    # packet still goes out, by the network thread, once the lock is free.
    from controller.mqtt_client import _QuietWake

    broker = mosquitto()
    sub = subscriber(broker, ["t/direct"])
    client, connected = _looping_client(broker, "direct-test")
    try:
        # the wake-up socket paho 2.x publishes through is ours to quieten:
        # a paho without it still works, but wakes its thread on every message
        assert isinstance(client._sockpairW, _QuietWake)
        assert connected.wait(10)
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            with client._io_lock:
                holding.set()
                release.wait(10)

        th = threading.Thread(target=hold)
        th.start()
        assert holding.wait(5)
        client.publish("t/direct", b"1", qos=1)
        assert client.write_now(wait=0.01) is False
        release.set()
        th.join(5)
        assert sub.wait_for(lambda ms: [m.payload for m in ms] == [b"1"])
        client.publish("t/direct", b"2", qos=1)
        assert client.write_now() is True
        assert sub.wait_for(lambda ms: [m.payload for m in ms] == [b"1", b"2"])
        # inside direct(): no wake-up of the network thread, the caller
        # writes; with the lock held elsewhere, the network thread is woken
        with client.direct():
            client.publish("t/direct", b"3", qos=1)
        assert sub.wait_for(lambda ms: [m.payload for m in ms][-1:] == [b"3"])
        holding.clear()
        release.clear()
        th = threading.Thread(target=hold)
        th.start()
        assert holding.wait(5)
        with client.direct():
            client.publish("t/direct", b"4", qos=1)
        release.set()
        th.join(5)
        assert sub.wait_for(lambda ms: [m.payload for m in ms] == [b"1", b"2", b"3", b"4"])
    finally:
        client.loop_stop()
        client.disconnect()


def test_a_batch_written_by_the_caller_is_one_send_and_every_message_is_acknowledged(
    mosquitto: BrokerFactory, subscriber: SubscriberFactory
) -> None:
    # ``write_now`` merges the QoS 1 publishes queued at the head of paho's
    # queue into one packet: one ``send`` for a batch. Each message still
    # arrives once, in order, and each is acknowledged under its own id.
    broker = mosquitto()
    sub = subscriber(broker, ["t/batch/#"])
    client, connected = _looping_client(broker, "batch-test")
    acked: list[int] = []
    client.on_publish = lambda c, u, mid, rc, props: acked.append(mid)
    sends: list[int] = []
    real_send = client._sock_send

    def counted(buf: bytes | bytearray) -> int:
        sends.append(len(buf))
        return real_send(buf)

    try:
        assert connected.wait(10)
        client._sock_send = counted  # type: ignore[method-assign]
        payloads = [f"{i}".encode() * (1 + 700 * i) for i in range(6)]  # up to 3.5 KB each
        with client.direct():
            mids = [client.publish(f"t/batch/{i}", p, qos=1).mid for i, p in enumerate(payloads)]
            client.publish("t/batch/retained", b"r", qos=1, retain=True)
        assert len(sends) == 1, sends  # the six and the retained one together
        assert sub.wait_for(lambda ms: len(ms) >= 7)
        assert [m.payload for m in sub.messages] == [*payloads, b"r"]
        assert eventually(lambda: len(acked) == 7)
        assert sorted(acked[:6]) == sorted(mids)
        # a QoS 0 publish is never merged (paho acts on its being written)
        sends.clear()
        with client.direct():
            client.publish("t/batch/q0", b"a", qos=0)
            client.publish("t/batch/q1", b"b", qos=1)
            client.publish("t/batch/q1", b"c", qos=1)
        assert len(sends) == 2, sends
        assert sub.wait_for(lambda ms: [m.payload for m in ms][-3:] == [b"a", b"b", b"c"])
    finally:
        client.loop_stop()
        client.disconnect()


def test_read_ahead_takes_many_messages_a_recv_and_a_batch_of_acks_is_one_send(
    mosquitto: BrokerFactory,
) -> None:
    # The archiver's client (``read_ahead``, manual acks): one ``recv`` takes
    # whatever the broker has sent (paho alone: 3-4 ``recv`` a message), a
    # message larger than a read and one split across reads still arrive
    # whole, every message once, in order; the acks of a batch queued inside
    # ``direct()`` leave in one ``send``, and the broker takes them (a
    # resumed session gets nothing again).
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties
    from paho.mqtt.subscribeoptions import SubscribeOptions

    from controller.mqtt_client import READ_AHEAD_BYTES, make_client

    # every message in flight at once, none acknowledged until the end
    config = (
        "listener @PORT@ 127.0.0.1\nallow_anonymous true\nmax_inflight_messages 0\nmax_queued_messages 0\n"
    )
    broker = mosquitto(config=config)
    cfg = MqttConfig.model_validate({"host": broker.host, "port": broker.port})
    got: list[mqtt.MQTTMessage] = []
    subscribed = threading.Event()

    def reader() -> Any:
        client = make_client(cfg, "read-ahead-test", manual_ack=True)
        client.read_ahead = True
        client.on_message = lambda c, u, m: got.append(m)
        client.on_subscribe = lambda *a: subscribed.set()
        client.on_connect = lambda c, *a: c.subscribe("t/ra/#", options=SubscribeOptions(qos=1))
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 60
        client.connect(broker.host, broker.port, clean_start=False, properties=props)
        return client

    client = reader()
    client.loop_start()
    pub, connected = _looping_client(broker, "read-ahead-pub")
    # the reads that reach this client's socket (paho's own ``_sock_recv``,
    # which ours calls once a read)
    recvs: list[int] = []
    real_sock_recv = mqtt.Client._sock_recv

    def socket_reads(self: Any, bufsize: int) -> bytes:
        data = real_sock_recv(self, bufsize)
        if self is client:
            recvs.append(len(data))
        return data

    try:
        assert subscribed.wait(10) and connected.wait(10)
        payloads = [f"{i:04d}".encode() * (1 + (i % 7) * 50) for i in range(600)]
        payloads[300] = b"x" * (2 * READ_AHEAD_BYTES + 17)  # larger than one read
        mqtt.Client._sock_recv = socket_reads  # type: ignore[method-assign]
        try:
            for i, p in enumerate(payloads):
                pub.publish(f"t/ra/{i % 5}", p, qos=1)
            assert eventually(lambda: len(got) >= len(payloads), timeout=30)
        finally:
            mqtt.Client._sock_recv = real_sock_recv  # type: ignore[method-assign]
        assert [m.payload for m in got] == payloads
        assert len(recvs) < len(payloads) / 2, len(recvs)
        sends: list[int] = []
        real_send = client._sock_send

        def sent(buf: bytes | bytearray) -> int:
            sends.append(len(buf))
            return real_send(buf)

        client._sock_send = sent  # type: ignore[method-assign]
        with client.direct():
            for m in got:
                client.ack(m.mid, m.qos)
        assert sends == [4 * len(got)], sends  # one PUBACK of 4 bytes each, in one send
        assert eventually(lambda: not client.want_write())
    finally:
        client.disconnect()
        client.loop_stop()
        pub.loop_stop()
        pub.disconnect()
    # the same session again: the broker holds nothing unacknowledged
    got.clear()
    subscribed.clear()
    again = reader()
    again.loop_start()
    try:
        assert subscribed.wait(10)
        pub, connected = _looping_client(broker, "read-ahead-pub2")
        assert connected.wait(10)
        pub.publish("t/ra/end", b"end", qos=1)
        assert eventually(lambda: any(m.payload == b"end" for m in got))
        assert [m.payload for m in got] == [b"end"]
        pub.loop_stop()
        pub.disconnect()
    finally:
        again.disconnect()
        again.loop_stop()


def test_in_steady_flow_an_ack_wakes_no_sender_and_the_mark_is_not_written_per_event(
    rig: Rig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Events handed over by the committing thread one at a time, each
    # acknowledged before the next: the acks are settled by the next
    # ``deliver`` (the window never fills) and the mark is written on the
    # sender's passes, not once per event (a write per PUBACK took the
    # journal's lock beside every card's commit). Nothing is lost for it:
    # every event is marked delivered in the end.
    journal = rig.journal
    writes: list[int] = []
    real = journal.mark_delivered

    def counting(output: str, seq: int, *, durable: bool = True) -> None:
        writes.append(seq)
        real(output, seq, durable=durable)

    monkeypatch.setattr(journal, "mark_delivered", counting)
    _, sub, out = rig.connected([f"{PREFIX}/card"])
    n = 60
    for seq in range(1, n + 1):
        journal.append_events(cards(seq, seq))
        out.deliver(journal.last_stored)
        assert sub.wait_for(lambda ms, s=seq: len(seqs_of(ms)) >= s)
    wait_delivered(out)
    assert seqs_of(sub.messages) == list(range(1, n + 1))
    assert journal.mark("mqtt") == n
    assert writes == sorted(writes) and writes[-1] == n
    assert len(writes) < n // 2, f"{len(writes)} mark writes for {n} events"


def test_a_card_behind_the_odds_goes_out_before_their_retained_copies(rig: Rig) -> None:
    # A coup's first card is stored behind the coup before's odds (two
    # views). The retained copies on `odds` are not part of the ordered
    # stream: they follow the batch, so the card does not wait for them;
    # the broker still keeps the latest odds.
    subscriber, journal = rig.subscriber, rig.journal
    broker, live, out = rig.connected([f"{PREFIX}/#"])
    shoe = event(1, "odds.update", coup=2, cards_left=410, bets={}, view="shoe")
    counter = event(2, "odds.update", coup=2, cards_left=410, bets={}, view="counter")
    journal.append_events([shoe, counter, *cards(3, 3)])
    out.deliver(journal.last_stored)
    assert live.wait_for(lambda ms: len([m for m in ms if m.topic == f"{PREFIX}/odds"]) >= 2)
    order = [m.topic.removeprefix(PREFIX + "/") for m in live.messages if m.topic != f"{PREFIX}/status"]
    assert order == ["odds/update", "odds/update", "card", "odds", "odds"], order
    late = subscriber(broker, [f"{PREFIX}/odds"])
    assert late.wait_for(lambda ms: len(ms) >= 1)
    assert [json.loads(m.payload) for m in late.messages if m.retain] == [counter]
