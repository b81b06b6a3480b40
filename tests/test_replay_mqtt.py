"""``replay --out mqtt`` (SPEC section 6): a capture's events published to a
real broker (the suite's mosquitto) exactly as ``replay`` writes them, in
order, QoS 1, with no presence of its own (no status, no Last Will, no
command subscription: a replay never speaks for the live table)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

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
    assert r.stderr.splitlines()[-1] == (
        f"replay: {len(want)} events published to mqtt://{broker.host}:{broker.port}/baccarat/T07, "
        "every one acknowledged (QoS 1)"
    )
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
    assert line.startswith("shoe-controller replay: the broker at 127.0.0.1:"), line
    assert "acknowledged 0 of 19 events, then none for 1 s (cannot connect to 127.0.0.1:" in line, line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "mqtt"], "--out mqtt needs -c config.yaml with the broker's outputs.mqtt"),
        (["-c", "x.yaml"], "-c is only for --out mqtt (the broker's settings)"),
        (["--out", "mqtt", "-c", "@CFG@", "--mqtt-timeout", "0"], "--mqtt-timeout must be above 0"),
        (["--out", "mqtt", "-c", "@CFG@", "--mqtt-timeout", "nan"], "--mqtt-timeout must be above 0"),
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
