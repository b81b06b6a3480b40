"""``replay --out mqtt`` (docs/operations.md, Command line): a capture's events published to a
real broker (the suite's mosquitto) as ``replay`` writes them, marked as
replayed (``replay`` in the envelope, ids of the replay form), in
order, QoS 1, with no presence of its own (no status, no Last Will, no
command subscription: a replay never speaks for the live table), and
refused for a table whose retained status says its controller is online
unless ``--force-live-table``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.replay import mark_replayed
from tests.conftest import Broker, BrokerFactory, Subscriber, free_port
from tests.test_cli_errors import cli, one_line_error

CAPTURES = Path(__file__).parent / "captures"
CAPTURE = CAPTURES / "x_sequence_gap.shoelog"


def _broker_config(tmp_path: Path, host: str, port: int) -> Path:
    path = tmp_path / "broker.yaml"
    path.write_text(yaml.safe_dump({"table": "T01", "outputs": {"mqtt": {"host": host, "port": port}}}))
    return path


@pytest.mark.mqtt
def test_replay_to_mqtt_publishes_what_replay_writes_in_order_and_acknowledged(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker: Broker = mosquitto()
    sub = subscriber(broker, ["baccarat/#"])
    cfg = _broker_config(tmp_path, broker.host, broker.port)
    jsonl = cli("replay", str(CAPTURE), "--odds", "--roads", "--table", "T07")
    assert jsonl.returncode == 0, jsonl.stderr
    want = [json.loads(line) for line in jsonl.stdout.splitlines()]

    r = cli("replay", str(CAPTURE), "--odds", "--roads", "--table", "T07", "--out", "mqtt", "-c", str(cfg))
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    said = r.stderr.splitlines()
    # no controller ever said T07 is online: the replay says so, and goes on
    assert said[0] == "replay: table T07: no retained status within 1 s: no controller online there"
    last = re.fullmatch(
        rf"replay: {len(want)} events published to mqtt://{broker.host}:{broker.port}/baccarat/T07 "
        r"as replay run ([0-9a-f]{32}), every one acknowledged \(QoS 1\)",
        said[-1],
    )
    assert last is not None, said[-1]
    # what replay writes, marked as this run's replay
    want = list(mark_replayed(iter(want), last.group(1), CAPTURE.name))
    assert all(e["event_id"].startswith(f"replay/{last.group(1)}/T07/") for e in want)
    # every event was acknowledged before the command returned, so the
    # subscriber (QoS 1, subscribed before) has them all
    assert sub.wait_for(lambda ms: len([m for m in ms if m.topic != "baccarat/T07/odds"]) >= len(want), 20)
    with sub.lock:
        msgs = list(sub.messages)
    events = [m for m in msgs if m.topic != "baccarat/T07/odds"]  # the retained latest-odds copy
    assert [json.loads(m.payload) for m in events] == want
    for m, e in zip(events, want, strict=True):
        assert m.topic == f"baccarat/T07/{str(e['type']).replace('.', '/')}"
        assert m.qos == 1
    # the latest odds are kept retained, as the daemon keeps them
    assert [json.loads(m.payload) for m in msgs if m.topic == "baccarat/T07/odds"] == [
        e for e in want if e["type"] == "odds.update"
    ]
    # no presence: it never said the table is online or offline
    assert not [m for m in msgs if m.topic == "baccarat/T07/status" or "/cmd" in m.topic]


def test_replay_to_mqtt_with_no_broker_fails_in_one_line(tmp_path: Path) -> None:
    cfg = _broker_config(tmp_path, "127.0.0.1", free_port())
    r = cli("replay", str(CAPTURE), "--out", "mqtt", "-c", str(cfg), "--mqtt-timeout", "1")
    line = one_line_error(r, 1)
    # the table's retained status is read first: no broker, no replay
    assert line.startswith("shoe-controller replay: cannot reach the broker at 127.0.0.1:"), line


def test_replay_to_mqtt_forced_with_no_broker_fails_in_one_line(tmp_path: Path) -> None:
    cfg = _broker_config(tmp_path, "127.0.0.1", free_port())
    r = cli(
        "replay", str(CAPTURE), "--out", "mqtt", "-c", str(cfg), "--mqtt-timeout", "1", "--force-live-table"
    )
    line = one_line_error(r, 1)
    assert line.startswith("shoe-controller replay: the broker at 127.0.0.1:"), line
    assert "acknowledged 0 of 19 events, then none for 1 s (cannot connect to 127.0.0.1:" in line, line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "mqtt"], "--out mqtt needs -c config.yaml with the broker's outputs.mqtt"),
        (["-c", "x.yaml"], "-c is only for --out mqtt (the broker's settings)"),
        (["--out", "mqtt", "-c", "@CFG@", "--mqtt-timeout", "0"], "--mqtt-timeout must be above 0"),
        (["--out", "mqtt", "-c", "@CFG@", "--mqtt-timeout", "nan"], "--mqtt-timeout must be above 0"),
        (["--force-live-table"], "--force-live-table is only for --out mqtt"),
    ],
)
def test_replay_to_mqtt_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    cfg = _broker_config(tmp_path, "127.0.0.1", 1883)
    argv = [a.replace("@CFG@", str(cfg)) for a in args]
    line = one_line_error(cli("replay", str(CAPTURE), *argv), 2)
    assert line.startswith(f"shoe-controller replay: {message}"), line


def test_replay_to_mqtt_needs_a_broker_in_the_config(tmp_path: Path) -> None:
    cfg = tmp_path / "nobroker.yaml"
    cfg.write_text("table: T01\ndevice: {driver: fake}\n")
    line = one_line_error(cli("replay", str(CAPTURE), "--out", "mqtt", "-c", str(cfg)), 2)
    assert line == f"shoe-controller replay: {cfg}: --out mqtt needs outputs.mqtt (the broker)"


def _events_on(sub: Subscriber, table: str) -> list[dict[str, Any]]:
    """Every event received on ``table``'s topics (not its status or our probe)."""
    skip = {f"baccarat/{table}/status", f"baccarat/{table}/probe"}
    with sub.lock:
        return [json.loads(m.payload) for m in sub.messages if m.topic not in skip]


@pytest.mark.mqtt
def test_replay_to_a_table_whose_controller_is_online_is_refused_in_one_line(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker: Broker = mosquitto()
    sub = subscriber(broker, ["baccarat/#"])
    # what a live daemon leaves: its retained status (its Last Will says offline)
    sub.publish("baccarat/T07/status", "online", retain=True)
    assert sub.wait_for(lambda ms: any(m.topic == "baccarat/T07/status" for m in ms), 10)
    cfg = _broker_config(tmp_path, broker.host, broker.port)
    line = one_line_error(cli("replay", str(CAPTURE), "--table", "T07", "--out", "mqtt", "-c", str(cfg)), 2)
    assert line == (
        f"shoe-controller replay: table T07 has a controller online (retained baccarat/T07/status at "
        f"{broker.host}:{broker.port}): a replay is not published onto a live table's topics; use --table "
        "(a table no controller runs) or another topic_prefix, or --force-live-table to publish there "
        "anyway (as replayed events, archived apart)"
    )
    # nothing was published: a later publish of ours arrives with nothing before it
    sub.publish("baccarat/T07/probe", "x")
    assert sub.wait_for(lambda ms: any(m.topic == "baccarat/T07/probe" for m in ms), 10)
    assert [m.topic for m in sub.messages if m.topic != "baccarat/T07/status"] == ["baccarat/T07/probe"]

    # told explicitly: published, every event marked as a replay
    r = cli("replay", str(CAPTURE), "--table", "T07", "--out", "mqtt", "-c", str(cfg), "--force-live-table")
    assert r.returncode == 0, r.stderr
    assert sub.wait_for(lambda ms: len(ms) >= 2 + 19, 20)
    events = _events_on(sub, "T07")
    assert len(events) == 19
    run = str(events[0]["replay"]["run"])
    assert all(e["replay"] == {"run": run, "source": CAPTURE.name} for e in events)
    assert all(str(e["event_id"]).startswith(f"replay/{run}/T07/") for e in events)
    # the envelope's order: replay right after ts, then the payload
    assert list(events[0])[:8] == ["v", "type", "event_id", "table", "shoe", "seq", "ts", "replay"]


@pytest.mark.mqtt
def test_replay_to_a_table_whose_retained_status_is_offline_goes_on_and_says_so(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker: Broker = mosquitto()
    sub = subscriber(broker, ["baccarat/T08/status"])
    sub.publish("baccarat/T08/status", "offline", retain=True)
    assert sub.wait_for(lambda ms: len(ms) >= 1, 10)
    cfg = _broker_config(tmp_path, broker.host, broker.port)
    r = cli("replay", str(CAPTURE), "--table", "T08", "--out", "mqtt", "-c", str(cfg))
    assert r.returncode == 0, r.stderr
    assert (
        r.stderr.splitlines()[0]
        == "replay: table T08: its retained status is 'offline': no controller online there"
    )
