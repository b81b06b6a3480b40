"""The daemon's own check of a command's origin: with a command key,
only commands signed with it, fresh and not replayed, are applied."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from controller.command_auth import CommandVerifier, sign
from controller.commands_schema import CommandError, parse_command
from controller.config import load_config
from controller.errors import ConfigError
from tests.conftest import BrokerFactory, Subscriber

KEY = b"k3y-for-tests-only"


def test_a_signed_fresh_command_passes_once() -> None:
    v = CommandVerifier(KEY)
    cmd = sign({"id": "1", "cmd": "accept", "coup": 4}, KEY, now=1000.0)
    assert v.check(cmd, now=1001.0) is None
    assert v.check(cmd, now=1002.0) == "replayed command: already taken"


def test_unsigned_tampered_stale_or_wrong_key_commands_are_refused() -> None:
    v = CommandVerifier(KEY)
    assert "unauthenticated" in (v.check({"id": "1", "cmd": "new_shoe"}, 0.0) or "")
    signed = sign({"id": "2", "cmd": "void", "coup": 3, "reason": "x"}, KEY, now=1000.0)
    assert "bad signature" in (v.check({**signed, "coup": 4}, 1000.0) or "")
    assert "bad signature" in (v.check(sign({"id": "3", "cmd": "new_shoe"}, b"other", 1000.0), 1000.0) or "")
    assert "stale" in (v.check(sign({"id": "4", "cmd": "new_shoe"}, KEY, 1000.0), 1400.0) or "")


def test_the_command_parser_takes_ts_and_sig_and_nothing_looser() -> None:
    cmd = sign({"id": "1", "cmd": "enter_card", "coup": 2, "card": "TD"}, KEY, 5.0)
    assert parse_command(json.dumps(cmd).encode()) == cmd
    with pytest.raises(CommandError, match="sig"):
        parse_command(json.dumps({**cmd, "sig": "nothex"}).encode())
    with pytest.raises(CommandError, match="ts"):
        parse_command(json.dumps({**cmd, "ts": "yesterday"}).encode())


def _write_config(tmp_path: Path, port: int, key_mode: int = 0o600) -> Path:
    key = tmp_path / "command.key"
    key.write_bytes(KEY + b"\n")
    key.chmod(key_mode)
    cfg = {
        "table": "T01",
        "device": {"driver": "fake", "cards_per_second": 20},
        "journal": str(tmp_path / "j.sqlite3"),
        "outputs": {
            "stdout": False,
            "mqtt": {"host": "127.0.0.1", "port": port, "command_key_file": str(key)},
        },
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_world_readable_command_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="command_key_file"):
        load_config(_write_config(tmp_path, 1883, key_mode=0o644))


@pytest.mark.mqtt
def test_the_daemon_applies_signed_commands_and_refuses_the_rest(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto()
    cfg = _write_config(tmp_path, broker.port)
    sub = subscriber(broker, ["baccarat/T01/#"])
    daemon = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "run", "-c", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert sub.wait_for(lambda ms: any(m.topic == "baccarat/T01/card" for m in ms), 60)
        ok = subprocess.run(
            [
                sys.executable,
                "-m",
                "controller.cli",
                "ctl",
                "new-shoe",
                "-c",
                str(cfg),
                "--timeout",
                "20",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ok.returncode == 0 and json.loads(ok.stdout)["ok"] is True, ok.stderr
        sub.publish("baccarat/T01/cmd", json.dumps({"id": "forged", "cmd": "end_shoe"}))
        assert sub.wait_for(
            lambda ms: any(m.topic == "baccarat/T01/cmd/reply" and b'"forged"' in m.payload for m in ms), 20
        )
        reply = next(
            json.loads(m.payload) for m in sub.on("baccarat/T01/cmd/reply") if b'"forged"' in m.payload
        )
        assert reply["ok"] is False and "unauthenticated" in reply["error"]
        assert sub.wait_for(
            lambda ms: any(
                m.topic == "baccarat/T01/security/alert" and b"COMMAND_REJECTED" in m.payload for m in ms
            ),
            20,
        )
        assert not [m for m in sub.on("baccarat/T01/shoe/ended") if b"ended by supervisor" in m.payload]
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
