"""``ctl correct`` end to end: a real daemon and
broker; the correction is published on ``<prefix>/<table>/coup/corrected``,
journalled, and a restart re-feeds it to the same event."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.journal import Journal
from tests.conftest import Broker, BrokerFactory, Subscriber
from tests.support.signed import unsigned_line
from tests.test_cli_errors import cli, one_line_error
from tests.test_daemon import reference_events

pytestmark = pytest.mark.mqtt

CAPTURE = Path(__file__).parent / "captures" / "profile_punto_banco.shoelog"


def _config(tmp_path: Path, broker: Broker) -> Path:
    config = tmp_path / "table.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "table": "T01",
                "device": {"driver": "replay", "file": str(CAPTURE)},
                "journal": str(tmp_path / "journal.sqlite3"),
                "odds": False,
                "outputs": {"stdout": False, "mqtt": {"host": broker.host, "port": broker.port}},
            }
        )
    )
    return config


def _supervisor(tmp_path: Path, broker: Broker) -> str:
    path = tmp_path / "supervisor.yaml"
    path.write_text(
        yaml.safe_dump({"table": "T01", "outputs": {"mqtt": {"host": broker.host, "port": broker.port}}})
    )
    return str(path)


def _start(config: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "run", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _journalled(tmp_path: Path, kind: str) -> list[dict[str, Any]]:
    with Journal(tmp_path / "journal.sqlite3") as j:
        return [json.loads(e.json) for e in j.events_since(0) if e.type == kind]


def test_ctl_correct_is_published_journalled_and_refed_identically(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto()
    sub = subscriber(broker, ["baccarat/T01/#"])
    config = _config(tmp_path, broker)
    sup = _supervisor(tmp_path, broker)
    daemon = _start(config)
    try:
        assert sub.wait_for(lambda ms: sum(m.topic == "baccarat/T01/coup/result" for m in ms) >= 4, 60)
        assert sub.wait_for(
            lambda ms: any(m.topic == "baccarat/T01/status" and m.payload == b"online" for m in ms), 30
        )
        results = [json.loads(m.payload) for m in sub.on("baccarat/T01/coup/result")]
        coup2 = next(r for r in results if r["coup"] == 2)
        assert (coup2["player"]["cards"], coup2["winner"]) == (["6S", "KH"], "banker")

        ctl = ("ctl", "correct", "--coup", "2", "--card", "p1=8d", "--reason", "tape: P1 was 8D", "-c", sup)
        # without --confirm: nothing applied, the reply says what it would do
        r = cli(*ctl, "--timeout", "20")
        line = one_line_error(r, 1)
        assert line.startswith(
            "shoe-controller ctl: table T01 did not apply correct coup 2 (no --confirm): it would correct"
            " coup 2 (P1 6S->8D): Player 8D KH (8), Banker 7C QD (7): player;"
        ), line
        assert not sub.on("baccarat/T01/coup/corrected")

        r = cli(*ctl, "--confirm", "--timeout", "20")
        assert r.returncode == 0, r.stderr
        assert r.stdout == (
            "coup 2 corrected (P1 6S->8D): Player 8D KH (8), Banker 7C QD (7): player;"
            f" supersedes {coup2['event_id']}\n"
        )
        assert sub.wait_for(lambda ms: any(m.topic == "baccarat/T01/coup/corrected" for m in ms), 20)
        (msg,) = sub.on("baccarat/T01/coup/corrected")
        assert msg.qos == 1 and not msg.retain
        published = json.loads(msg.payload)
        assert published["supersedes"] == coup2["event_id"] and published["winner"] == "player"
        assert published["settlement"]["player"] == 1 and published["reason"] == "tape: P1 was 8D"
        # the roads again, coup 2 a Player win now
        assert sub.wait_for(
            lambda ms: any(
                m.topic == "baccarat/T01/roads" and json.loads(m.payload)["seq"] > published["seq"]
                for m in ms
            ),
            20,
        )
        roads = json.loads(sub.on("baccarat/T01/roads")[-1].payload)
        assert [c["w"] for c in roads["bead_plate"][0]] == ["P", "P", "B", "T"]
        assert _journalled(tmp_path, "coup.corrected") == [published]
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(10)

        # a restart rebuilds from the journal: the command is an input, so the
        # correction is made again, identical (a difference would stop it:
        # JournalConflict), and the daemon goes on
        restarts = len([m for m in sub.on("baccarat/T01/status") if m.payload == b"online"])
        daemon = _start(config)
        assert sub.wait_for(
            lambda ms: (
                len([m for m in ms if m.topic == "baccarat/T01/status" and m.payload == b"online"]) > restarts
            ),
            60,
        )
        assert daemon.poll() is None
        r = cli("ctl", "correct", "--coup", "2", "--card", "B1=7D", "--reason", "no", "-c", sup, "--json")
        assert r.returncode == 1 and json.loads(r.stdout)["ok"] is False  # (alive, answering)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
    assert _journalled(tmp_path, "coup.corrected") == [published]
    fresh = [e for e in reference_events(tmp_path / "journal.sqlite3") if e["type"] == "coup.corrected"]
    assert fresh == [json.loads(unsigned_line(json.dumps(published)))]  # re-fed: before the journal signs
