"""The archiver's ``nats:`` section (controller/archive/config.py): each
bound at its edge, exactly one of ``broker`` and ``nats``, what
``check-config`` says of it, and the subject mapping the JetStream
archiver relies on (controller/archive/jetstream.py). No NATS server
needed: tests/test_nats_cluster.py runs the real one."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.archive.config import MAX_NATS_SERVERS, ArchiveConfig
from controller.archive.jetstream import topic_of
from controller.cli import main
from controller.config import parse_model
from controller.errors import ConfigError

DSN = "dsn: 'host=127.0.0.1 dbname=floor user=archive'\n"
NATS = "nats: {servers: [nats://n1:4222, nats://n2:4222, 'tls://n3:4222'], client_id: archive-1}\n" + DSN


def _parse(text: str) -> ArchiveConfig:
    return parse_model(text, "archive.yaml", ArchiveConfig)


def _nats(**keys: object) -> str:
    fields = {"servers": "[nats://n1:4222]", "client_id": "a", **keys}
    return "nats: {" + ", ".join(f"{k}: {v}" for k, v in fields.items()) + "}\n" + DSN


def test_a_nats_archiver_takes_the_defaults_and_maps_subjects_back_to_topics() -> None:
    cfg = _parse(NATS)
    assert cfg.nats is not None and cfg.mqtt_broker is None
    n = cfg.nats
    assert (n.durable, n.replicas, n.ack_wait_s, n.topic_prefix) == ("archivers", 3, 60, "baccarat")
    assert cfg.client_id == "archive-1" and cfg.topic_prefix == "baccarat"
    assert n.subjects() == "$MQTT.msgs.baccarat.>"
    assert _parse(_nats(topic_prefix="floor/east")).nats.subjects() == "$MQTT.msgs.floor.east.>"  # type: ignore[union-attr]
    assert topic_of("$MQTT.msgs.baccarat.T01.coup.result") == "baccarat/T01/coup/result"
    with pytest.raises(AttributeError, match="reads NATS JetStream"):
        _ = cfg.broker


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (DSN, "exactly one of broker (MQTT 5) and nats (JetStream)"),
        ("broker: {host: h, client_id: a}\n" + NATS, "exactly one of broker"),
        (_nats(servers="[]"), "nats.servers"),
        (_nats(servers="[" + ", ".join(f"nats://n{i}:4222" for i in range(MAX_NATS_SERVERS + 1)) + "]"),
         "nats.servers"),
        (_nats(servers="['http://n1:4222']"), "not nats://host:port"),
        (_nats(servers="['nats://n1']"), "not nats://host:port"),
        (_nats(servers="['nats://n1:99999']"), "not nats://host:port"),
        (_nats(servers="['nats://user:pw@n1:4222']"), "no credentials in a URL"),
        (_nats(servers="['nats://n1:4222/x']"), "nothing after host:port"),
        (_nats(servers="[nats://n1:4222, nats://n1:4222]"), "listed twice"),
        (_nats(servers="['nats://" + "n" * 520 + ":4222']"), "at most 512 characters"),
        (_nats(client_id="''"), "nats.client_id"),
        (_nats(client_id="x" * 129), "nats.client_id"),
        (_nats(durable="'a.b'"), "nats.durable: must match"),
        (_nats(durable="x" * 65), "nats.durable: must match"),
        (_nats(replicas=0), "nats.replicas"),
        (_nats(replicas=6), "nats.replicas"),
        (_nats(ack_wait_s=4), "nats.ack_wait_s"),
        (_nats(ack_wait_s=3601), "nats.ack_wait_s"),
        (_nats(topic_prefix="'a.b'"), "nats.topic_prefix"),
        (_nats(topic_prefix="'a/+'"), "nats.topic_prefix"),
        (_nats(password_file="/nonexistent"), "nats.password_file"),
        (_nats(stream="FLOOR"), "nats.stream: unknown key"),
        (NATS + "share_group: g\n", "share_group is for MQTT"),
    ],
)  # fmt: skip
def test_a_bad_nats_section_is_one_line_naming_its_key(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        _parse(text)
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_the_bounds_themselves_are_taken() -> None:
    edge = _nats(replicas=5, ack_wait_s=3600, durable="x" * 64, client_id="x" * 128)
    n = _parse(edge).nats
    assert n is not None and (n.replicas, n.ack_wait_s) == (5, 3600)
    servers = "[" + ", ".join(f"nats://n{i}:4222" for i in range(MAX_NATS_SERVERS)) + "]"
    assert len(_parse(_nats(servers=servers)).nats.servers) == MAX_NATS_SERVERS  # type: ignore[union-attr]
    assert _parse(_nats(replicas=1, ack_wait_s=5)).nats is not None


def test_check_config_reports_a_nats_archiver(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "archive.yaml"
    path.write_text(NATS)
    assert main(["check-config", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "floor archive (shoe-controller archive), client id archive-1" in out
    assert (
        "NATS JetStream: nats://n1:4222, nats://n2:4222, tls://n3:4222; reads $MQTT.msgs.baccarat.> "
        "of NATS's MQTT stream (at least 3 replica(s)) through the durable pull consumer archivers"
    ) in out
    assert "acknowledged after its batch's COMMIT" in out


def test_check_config_takes_the_shipped_nats_example(capsys: pytest.CaptureFixture[str]) -> None:
    example = str(Path(__file__).resolve().parent.parent / "examples" / "archive-nats.yaml")
    assert main(["check-config", example]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith(f"ok: {example}\n") and "NATS JetStream: nats://n1.floor.lan:4222" in out


def test_a_nats_archiver_takes_the_signing_keys_of_its_config() -> None:
    """Signing on the NATS path: the config's pinned keys and
    ``trust_on_first_use`` reach the JetStreamArchiver's store, as the MQTT
    archiver's (service.Archiver)."""
    import threading

    from controller.archive.jetstream import JetStreamArchiver
    from controller.signing import b64

    key = b64(bytes(range(32)))
    text = NATS + f"signing: {{trust_on_first_use: false, keys: {{T01: ['{key}']}}}}\n"
    archiver = JetStreamArchiver(_parse(text), threading.Event())
    assert archiver.store.keys.pinned == {"T01": [key]}
    assert archiver.store.keys.tofu is False
    default = JetStreamArchiver(_parse(NATS), threading.Event())
    assert default.store.keys.pinned == {} and default.store.keys.tofu is True
