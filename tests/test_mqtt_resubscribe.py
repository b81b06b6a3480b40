"""A subscription the broker refuses is asked for again while the table
stays connected (NATS refuses one while its MQTT streams elect a
leader after a node dies, and the table subscribed again only at its next
reconnect, taking no commands and no archive marks until then). Here a
real NATS node (MQTT 3.1.1) refuses by its permissions, then its config
is changed and reloaded (SIGHUP): the same connection takes both
subscriptions, and each refusal was said once, not at every try.
(Mosquitto 2 grants a subscription its ACL denies, so it cannot show this.)"""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.config import MqttConfig
from controller.journal import Journal
from controller.outputs.mqtt import MqttOutput
from tests.conftest import eventually, free_port, need_tool

pytestmark = pytest.mark.nats

DENY = 'subscribe: { allow: ">", deny: ["baccarat.T01.cmd", "baccarat.T01.archive.mark"] }'
ALLOW = 'subscribe: ">"'


def _config(directory: Path, client: int, mqtt: int, subscribe: str) -> str:
    return (
        f"server_name: s1\nlisten: 127.0.0.1:{client}\n"
        f'jetstream {{ store_dir: "{directory / "js"}" }}\n'
        f"mqtt {{ listen: 127.0.0.1:{mqtt} }}\n"
        "authorization { users = [ {user: table, password: pw, permissions: "
        f'{{ publish: ">", {subscribe} }} }} ] }}\n'
    )


@pytest.fixture
def nats_node(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, int, int]]:
    binary = need_tool("nats-server", "/usr/sbin/nats-server")
    client, mqtt = free_port(), free_port()
    conf = tmp_path / "nats.conf"
    conf.write_text(_config(tmp_path, client, mqtt, DENY))
    with open(tmp_path / "nats.log", "wb") as log:
        proc = subprocess.Popen([binary, "-c", str(conf)], stdout=log, stderr=log)

    def listening() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", mqtt), timeout=0.2):
                return True
        except OSError:
            return False

    try:
        assert eventually(listening, 20), (tmp_path / "nats.log").read_text()
        yield proc, conf, client, mqtt
    finally:
        proc.kill()
        proc.wait()


def test_a_refused_subscription_is_asked_again_on_the_same_connection(
    nats_node: tuple[subprocess.Popen[bytes], Path, int, int],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    proc, conf, client, mqtt = nats_node
    secret = tmp_path / "pw"
    secret.write_text("pw\n")
    secret.chmod(0o600)
    caplog.set_level(logging.INFO, logger="controller.outputs.mqtt")
    cfg = MqttConfig.model_validate(
        {
            "host": "127.0.0.1",
            "port": mqtt,
            "protocol": "3.1.1",
            "username": "table",
            "password_file": str(secret),
        }
    )
    out = MqttOutput(cfg, "T01", Journal(tmp_path / "journal.sqlite3"), poll_interval=0.1)

    def said(text: str) -> list[str]:
        return [r.getMessage() for r in caplog.records if text in r.getMessage()]

    out.start()
    try:
        assert eventually(lambda: out.connected, 20)
        assert eventually(lambda: len(said("refused the subscription")) == 2, 15), said("refused")
        assert not out.ready
        time.sleep(5)  # a retry or two refused again (after 2 s, then 4 s), unsaid
        assert len(said("refused the subscription")) == 2, said("refused")
        conf.write_text(_config(tmp_path, client, mqtt, ALLOW))
        proc.send_signal(signal.SIGHUP)  # nats-server reloads its config
        assert eventually(lambda: out.ready, 30), "the command subscription was not asked for again"
        assert eventually(lambda: not out._resubscribe, 30), out._resubscribe  # the mark's too
        assert out.connected and len(said("mqtt: connected to")) == 1  # the same connection throughout
    finally:
        out.stop(timeout=2)
    refused = said("refused the subscription")
    assert len(refused) == 2, refused
    assert any("baccarat/T01/cmd" in line and "asking again" in line for line in refused), refused
    assert any("baccarat/T01/archive/mark" in line and "asking again" in line for line in refused), refused
